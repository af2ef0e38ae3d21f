/* The small MLP both data-parallel equivalence tests train
 * (tests/test_data_parallel.c in one process, tests/mpi/mpi_world.c over
 * MPI): IN -> HID (ReLU) -> OUT with MSE, Adam lr 1e-2, STEPS steps of 2B
 * fixed rows each; a replica takes B of them. Everything here is
 * deterministic, so every process makes the same problem. */
#ifndef LT_TESTS_DP_MLP_H
#define LT_TESTS_DP_MLP_H

#include <stdint.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"

enum { IN = 5, HID = 8, OUT = 3, B = 6 /* per replica */, STEPS = 20, NP = 4 };
static const int64_t kShapes[NP][2] = {{IN, HID}, {1, HID}, {HID, OUT}, {1, OUT}};

static inline uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}
static inline float uni(uint32_t *s) { return (float)(lcg(s) & 0xffff) / 65536.0f - 0.5f; }

/* The initial parameters and every step's batch of 2B rows. */
typedef struct problem {
  float init[NP][IN * HID];
  float x[STEPS][2 * B * IN], y[STEPS][2 * B * OUT];
} problem;

static inline void make_problem(problem *p) {
  uint32_t s = 12345;
  for (int k = 0; k < NP; k++)
    for (int i = 0; i < kShapes[k][0] * kShapes[k][1]; i++) p->init[k][i] = uni(&s);
  for (int t = 0; t < STEPS; t++) {
    for (int i = 0; i < 2 * B * IN; i++) p->x[t][i] = 2 * uni(&s);
    for (int i = 0; i < 2 * B * OUT; i++) p->y[t][i] = uni(&s);
  }
}

typedef struct model {
  lt_tensor *p[NP];
  lt_nn_optim *o;
} model;

/* The parameters at the problem's values plus offset (rank 1 starts
 * elsewhere: the broadcast from rank 0 must fix it). */
static inline int model_init(model *m, lt_device dev, const problem *pb, float offset) {
  for (int k = 0; k < NP; k++) {
    int64_t n = kShapes[k][0] * kShapes[k][1];
    float v[IN * HID];
    for (int i = 0; i < n; i++) v[i] = pb->init[k][i] + offset;
    m->p[k] = lt_from_data(dev, LT_F32, kShapes[k][0] == 1 ? &kShapes[k][1] : kShapes[k],
                           kShapes[k][0] == 1 ? 1 : 2, v);
    if (!m->p[k] || lt_set_requires_grad(m->p[k], true) != LT_OK) return lt_last_status();
  }
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 1e-2;
  m->o = lt_nn_optim_create(&cfg, m->p, NP);
  return m->o ? LT_OK : lt_last_status();
}

static inline void model_free(model *m) {
  lt_nn_optim_free(m->o);
  for (int k = 0; k < NP; k++) lt_release(m->p[k]);
}

/* Traces the mean-squared-error loss of rows [row0, row0 + rows) of step t
 * and its backward pass. */
static inline int forward_backward(model *m, lt_device dev, const problem *pb, int t, int row0,
                                   int rows) {
  const int64_t xs[2] = {rows, IN}, ys[2] = {rows, OUT};
  lt_tensor *x = lt_from_data(dev, LT_F32, xs, 2, pb->x[t] + row0 * IN);
  lt_tensor *y = lt_from_data(dev, LT_F32, ys, 2, pb->y[t] + row0 * OUT);
  lt_tensor *h = lt_relu(lt_add(lt_matmul(x, m->p[0]), m->p[1]));
  lt_tensor *out = lt_add(lt_matmul(h, m->p[2]), m->p[3]);
  lt_tensor *loss = lt_nn_mse_loss(out, y, LT_NN_REDUCTION_MEAN);
  return loss ? lt_backward(loss) : lt_last_status();
}

#endif
