/* Pieces shared by the benchmarks of the MLP training step (train_step,
 * cache_warm_start): a clock and a synthetic stand-in for Fashion-MNIST. */
#ifndef LT_BENCH_MLP_H
#define LT_BENCH_MLP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "lazytensor.h"
#include "lazytensor_nn.h"

enum { MLP_FEATURES = 784, MLP_CLASSES = 10 };

static inline double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* n samples of uniform pseudo-random pixels, labels i mod 10. */
static inline void bench_synthetic(lt_nn_dataset *ds, int64_t n) {
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->rows = ds->cols = 28;
  ds->features = MLP_FEATURES;
  ds->num_classes = MLP_CLASSES;
  ds->images = malloc((size_t)(n * MLP_FEATURES));
  ds->labels = malloc((size_t)n * sizeof(int64_t));
  uint32_t s = 1;
  for (int64_t i = 0; i < n * MLP_FEATURES; i++) {
    s = s * 1664525u + 1013904223u;
    ds->images[i] = (uint8_t)(s >> 24);
  }
  for (int64_t i = 0; i < n; i++) ds->labels[i] = i % MLP_CLASSES;
}

/* The benchmarked model: 784-hidden-hidden-10 with ReLU, trained by Adam. */
typedef struct bench_mlp {
  lt_nn_linear layer[3];
  lt_tensor *params[6];
  lt_nn_optim *opt;
  lt_dtype precision; /* LT_BF16: forward and loss under autocast; else (0) f32 */
} bench_mlp;

/* Builds the layers and the optimizer; their initial values stay pending
 * until the next step barrier. */
static inline int bench_mlp_init(bench_mlp *m, lt_device dev, int64_t hidden) {
  memset(m, 0, sizeof *m);
  int64_t dims[4] = {MLP_FEATURES, hidden, hidden, MLP_CLASSES};
  for (int i = 0; i < 3; i++) {
    int rc = lt_nn_linear_init(&m->layer[i], dev, LT_F32, dims[i], dims[i + 1], true);
    if (rc != LT_OK) return rc;
    m->params[2 * i] = m->layer[i].weight;
    m->params[2 * i + 1] = m->layer[i].bias;
  }
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  m->opt = lt_nn_optim_create(&oc, m->params, 6);
  return m->opt ? LT_OK : lt_last_status();
}

/* Traces one training step (forward, loss, backward, update); returns the
 * loss (owned by the open scope) or NULL. */
static inline lt_tensor *bench_mlp_step(bench_mlp *m, lt_tensor *x, lt_tensor *y) {
  lt_tensor *h = x;
  bool bf16 = m->precision == LT_BF16;
  if (bf16 && lt_autocast_begin(lt_get_device(x), LT_BF16) != LT_OK) return NULL;
  for (int i = 0; i < 3; i++) {
    h = lt_nn_linear_forward(&m->layer[i], h);
    if (i < 2) h = lt_nn_relu(h);
  }
  lt_tensor *loss = lt_nn_cross_entropy(h, y);
  if (bf16) lt_autocast_end(lt_get_device(x));
  if (!loss || lt_backward(loss) != LT_OK || lt_nn_optim_step(m->opt) != LT_OK) return NULL;
  return loss;
}

static inline void bench_mlp_free(bench_mlp *m) {
  lt_nn_optim_free(m->opt);
  for (int i = 0; i < 3; i++) lt_nn_linear_free(&m->layer[i]);
}

#endif
