/* Data-parallel training (lazytensor_dist.h): an MLP trained for 20 Adam
 * steps by 2 replicas, each on its half of every batch (gradients averaged
 * by an all-reduce inside the step graph), must end with the parameters of
 * one device trained on the whole batches (within 1e-5 relative), and the
 * replicas with equal parameters. Rank 1 starts from other values: the
 * broadcast from rank 0 must make them equal first. A second model mixes a
 * large gradient with small ones (which share one all-reduce) and a
 * parameter without a gradient. */
#include "test_util.h"

#include "../src/core/lt_collective.h"
#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "dp_mlp.h"

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

/* ---- small gradients share an all-reduce ----
 * W's gradient (128 x 130 f32: 66 560 bytes) is over LT_DP_SMALL_GRAD_BYTES
 * and is all-reduced alone; b's and s's are concatenated into one; u gets
 * no gradient and no all-reduce. 3 SGD steps on 2 replicas x 4 rows must
 * match one device x 8 rows, with 2 collectives per step. */
enum { MK = 128, MN = 130, MB = 4, MSTEPS = 3, MP = 4 };
static const int64_t kMixed[MP][2] = {{MK, MN}, {1, MN}, {1, 1}, {1, 3}};

typedef struct mixed_ctx {
  float *x;             /* MSTEPS x 2MB x MK */
  float *init[MP];      /* initial values */
  float *got[2][MP];    /* each replica's final values */
  uint64_t per_step[2]; /* collectives in the last step */
  char err[2][300];
} mixed_ctx;

static int mixed_init(lt_tensor **p, lt_nn_optim **o, lt_device dev, float *const *init) {
  for (int k = 0; k < MP; k++) {
    p[k] = k == 0 ? lt_from_data(dev, LT_F32, kMixed[0], 2, init[0])
                  : lt_from_data(dev, LT_F32, &kMixed[k][1], 1, init[k]);
    if (!p[k] || lt_set_requires_grad(p[k], true) != LT_OK) return lt_last_status();
  }
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_SGD);
  cfg.lr = 0.1;
  *o = lt_nn_optim_create(&cfg, p, MP);
  return *o ? LT_OK : lt_last_status();
}

/* loss = mean(((x W + b) * s)^2); u takes no part */
static int mixed_backward(lt_tensor *const *p, lt_device dev, const float *x, int rows) {
  lt_tensor *xt = lt_from_data(dev, LT_F32, SHAPE(rows, MK), 2, x);
  lt_tensor *y = lt_mul(lt_add(lt_matmul(xt, p[0]), p[1]), p[2]);
  lt_tensor *loss = lt_mean(lt_mul(y, y), NULL, 0, false);
  return loss ? lt_backward(loss) : lt_last_status();
}

static int mixed_replica(int r, lt_device dev, void *arg) {
  mixed_ctx *c = arg;
  lt_tensor *p[MP] = {0};
  lt_nn_optim *o = NULL;
  int rc = mixed_init(p, &o, dev, c->init);
  if (rc == LT_OK) rc = lt_mark_step(dev);
  for (int t = 0; t < MSTEPS && rc == LT_OK; t++) {
    uint64_t before = lt__coll_count(dev.index);
    lt_scope_begin();
    rc = mixed_backward(p, dev, c->x + (size_t)(t * 2 * MB + r * MB) * MK, MB);
    if (rc == LT_OK) rc = lt_dp_optim_step(o);
    lt_scope_end();
    if (rc == LT_OK) rc = lt_mark_step(dev);
    if (rc == LT_OK) rc = lt_wait_device_ops(dev);
    c->per_step[r] = lt__coll_count(dev.index) - before;
  }
  for (int k = 0; k < MP && rc == LT_OK; k++)
    rc = lt_to_data(p[k], c->got[r][k], (size_t)(kMixed[k][0] * kMixed[k][1]) * sizeof(float));
  if (rc != LT_OK) snprintf(c->err[r], sizeof c->err[r], "%s", lt_last_error());
  lt_nn_optim_free(o);
  for (int k = 0; k < MP; k++) lt_release(p[k]);
  return rc;
}

static void test_small_grads_share_an_all_reduce(void **state) {
  (void)state;
  mixed_ctx *c = calloc(1, sizeof *c);
  uint32_t s = 777;
  c->x = malloc((size_t)MSTEPS * 2 * MB * MK * sizeof(float));
  for (int i = 0; i < MSTEPS * 2 * MB * MK; i++) c->x[i] = uni(&s);
  float *want[MP];
  for (int k = 0; k < MP; k++) {
    int64_t n = kMixed[k][0] * kMixed[k][1];
    c->init[k] = malloc((size_t)n * sizeof(float));
    want[k] = malloc((size_t)n * sizeof(float));
    for (int r = 0; r < 2; r++) c->got[r][k] = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) c->init[k][i] = k == 2 ? 1.5f : uni(&s);
  }

  lt_device solo = lt_cpu(2);
  lt_tensor *p[MP] = {0};
  lt_nn_optim *o = NULL;
  assert_int_equal(mixed_init(p, &o, solo, c->init), LT_OK);
  for (int t = 0; t < MSTEPS; t++) {
    lt_scope_begin();
    assert_int_equal(mixed_backward(p, solo, c->x + (size_t)t * 2 * MB * MK, 2 * MB), LT_OK);
    assert_int_equal(lt_nn_optim_step(o), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(solo), LT_OK);
  }
  for (int k = 0; k < MP; k++)
    assert_int_equal(
        lt_to_data(p[k], want[k], (size_t)(kMixed[k][0] * kMixed[k][1]) * sizeof(float)), LT_OK);
  lt_nn_optim_free(o);
  for (int k = 0; k < MP; k++) lt_release(p[k]);

  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  int rc = lt_world_run(w, mixed_replica, c);
  for (int r = 0; r < 2; r++)
    if (c->err[r][0]) fail_msg("rank %d: %s", r, c->err[r]);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  lt_world_free(w);

  for (int r = 0; r < 2; r++)
    if (c->per_step[r] != 2)
      fail_msg("rank %d ran %llu collectives in a step, want 2 (W alone; b and s together)", r,
               (unsigned long long)c->per_step[r]);
  for (int k = 0; k < MP; k++)
    for (int64_t i = 0; i < kMixed[k][0] * kMixed[k][1]; i++) {
      float g = c->got[0][k][i];
      assert_true(g == c->got[1][k][i]);
      if (fabs((double)g - want[k][i]) > 1e-5 * fabs(want[k][i]) + 1e-7)
        fail_msg("param %d[%lld]: replicas %.9g, one device %.9g", k, (long long)i, g, want[k][i]);
    }
  assert_true(c->got[0][3][0] == c->init[3][0]);    /* u: no gradient, untouched */
  assert_true(fabs(c->got[0][2][0] - 1.5f) > 1e-4); /* s moved */
  for (int k = 0; k < MP; k++) {
    free(c->init[k]);
    free(want[k]);
    for (int r = 0; r < 2; r++) free(c->got[r][k]);
  }
  free(c->x);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_replicas_match_one_device),
      cmocka_unit_test(test_small_grads_share_an_all_reduce),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
