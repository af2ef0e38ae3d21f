/* Data-parallel training (lazytensor_dist.h): an MLP trained for 20 Adam
 * steps by 2 replicas, each on its half of every batch (gradients averaged
 * by an all-reduce inside the step graph), must end with the parameters of
 * one device trained on the whole batches (within 1e-5 relative), and the
 * replicas with equal parameters. Rank 1 starts from other values: the
 * broadcast from rank 0 must make them equal first. */
#include "test_util.h"

#include "lazytensor_dist.h"
#include "lazytensor_nn.h"

enum { IN = 5, HID = 8, OUT = 3, B = 6 /* per replica */, STEPS = 20, NP = 4 };
static const int64_t kShapes[NP][2] = {{IN, HID}, {1, HID}, {HID, OUT}, {1, OUT}};

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}
static float uni(uint32_t *s) { return (float)(lcg(s) & 0xffff) / 65536.0f - 0.5f; }

/* The initial parameters and every step's batch of 2B rows, fixed here. */
typedef struct problem {
  float init[NP][IN * HID];
  float x[STEPS][2 * B * IN], y[STEPS][2 * B * OUT];
} problem;

static void make_problem(problem *p) {
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

static int model_init(model *m, lt_device dev, const problem *pb, float offset) {
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

static void model_free(model *m) {
  lt_nn_optim_free(m->o);
  for (int k = 0; k < NP; k++) lt_release(m->p[k]);
}

/* Traces the mean-squared-error loss of rows [row0, row0 + rows) of step t
 * and its backward pass. */
static int forward_backward(model *m, lt_device dev, const problem *pb, int t, int row0, int rows) {
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(rows, IN), 2, pb->x[t] + row0 * IN);
  lt_tensor *y = lt_from_data(dev, LT_F32, SHAPE(rows, OUT), 2, pb->y[t] + row0 * OUT);
  lt_tensor *h = lt_relu(lt_add(lt_matmul(x, m->p[0]), m->p[1]));
  lt_tensor *out = lt_add(lt_matmul(h, m->p[2]), m->p[3]);
  lt_tensor *loss = lt_nn_mse_loss(out, y, LT_NN_REDUCTION_MEAN);
  return loss ? lt_backward(loss) : lt_last_status();
}

static int read_params(model *m, float vals[NP][IN * HID]) {
  for (int k = 0; k < NP; k++) {
    int rc = lt_to_data(m->p[k], vals[k], sizeof vals[k]);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

typedef struct dp_ctx {
  const problem *pb;
  float final[2][NP][IN * HID];
  float start[2][NP][IN * HID];
  char err[2][300];
} dp_ctx;

static int replica(int r, lt_device dev, void *arg) {
  dp_ctx *c = arg;
  model m = {0};
  int rc = model_init(&m, dev, c->pb, r == 0 ? 0.0f : 0.25f);
  if (rc == LT_OK) rc = lt_dp_broadcast_params(m.p, NP);
  if (rc == LT_OK) rc = lt_mark_step(dev);
  if (rc == LT_OK) rc = read_params(&m, c->start[r]);
  for (int t = 0; t < STEPS && rc == LT_OK; t++) {
    lt_scope_begin();
    rc = forward_backward(&m, dev, c->pb, t, r * B, B);
    if (rc == LT_OK) rc = lt_dp_optim_step(m.o);
    lt_scope_end();
    if (rc == LT_OK) rc = lt_mark_step(dev);
  }
  if (rc == LT_OK) rc = read_params(&m, c->final[r]);
  if (rc != LT_OK) snprintf(c->err[r], sizeof c->err[r], "%s", lt_last_error());
  model_free(&m);
  return rc;
}

static void test_two_replicas_match_one_device(void **state) {
  (void)state;
  problem *pb = calloc(1, sizeof *pb);
  dp_ctx *c = calloc(1, sizeof *c);
  make_problem(pb);
  c->pb = pb;

  /* one device (of no world), whole batches */
  lt_device solo = lt_cpu(2);
  model m = {0};
  assert_int_equal(model_init(&m, solo, pb, 0.0f), LT_OK);
  for (int t = 0; t < STEPS; t++) {
    lt_scope_begin();
    assert_int_equal(forward_backward(&m, solo, pb, t, 0, 2 * B), LT_OK);
    assert_int_equal(lt_nn_optim_step(m.o), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(solo), LT_OK);
  }
  static float want[NP][IN * HID];
  assert_int_equal(read_params(&m, want), LT_OK);
  model_free(&m);

  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  int rc = lt_world_run(w, replica, c);
  for (int r = 0; r < 2; r++)
    if (c->err[r][0]) fail_msg("rank %d: %s", r, c->err[r]);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  lt_world_free(w);

  for (int k = 0; k < NP; k++)
    for (int i = 0; i < kShapes[k][0] * kShapes[k][1]; i++) {
      assert_true(c->start[1][k][i] == pb->init[k][i]); /* rank 0's values */
      assert_true(c->final[0][k][i] == c->final[1][k][i]);
      if (fabs((double)c->final[0][k][i] - want[k][i]) > 1e-5 * fabs(want[k][i]) + 1e-7)
        fail_msg("param %d[%d]: replicas %.9g, one device %.9g", k, i, c->final[0][k][i],
                 want[k][i]);
    }
  /* and training moved them */
  assert_true(fabs(c->final[0][0][0] - pb->init[0][0]) > 1e-3);
  free(pb);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_replicas_match_one_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
