/* Sharded optimizer state (lazytensor_dist.h, lt_dp_options.shard_optimizer):
 * 2 replicas each train two copies of a small model on their half of every
 * batch, one with replicated optimizer state and one with sharded state
 * (lt_dp_optim_create without and with shard_optimizer), for Adam, SGD with
 * momentum, AdamW (with a parameter's own weight decay) and SGD with
 * nesterov. The sharded copies must end within 1e-5 of the replicated
 * ones, equal on both replicas, holding half the state bytes (each
 * parameter's chunk, rounded up). The parameters' sizes (35, 7, 21, 3, 1,
 * 16 899) do not divide by 2: the last chunks are padded, and the
 * 1-element parameter's second chunk is all padding. One parameter gets no
 * grad; one (16 899 elements) is over the size under which grads share a
 * collective. */
#include "test_backends.h"

#include "lazytensor_dist.h"
#include "lazytensor_nn.h"

enum { ZIN = 5, ZHID = 7, ZOUT = 3, ZB = 4 /* rows per replica */, ZSTEPS = 4, ZP = 7 };
/* W1, b1, W2, b2, s (an output scale), u (no grad), V (a penalty's: its
 * 67 596 bytes are over LT_DP_SMALL_GRAD_BYTES, so it goes alone) */
static const int64_t kZShape[ZP][2] = {{ZIN, ZHID}, {1, ZHID}, {ZHID, ZOUT}, {1, ZOUT},
                                       {1, 1},      {1, 2},    {129, 131}};
enum { ZMAXN = 129 * 131 };

static int64_t znumel(int k) { return kZShape[k][0] * kZShape[k][1]; }

typedef struct zero_ctx {
  lt_nn_optim_config cfg;
  float init[ZP][ZMAXN];
  float x[ZSTEPS][2 * ZB * ZIN], y[ZSTEPS][2 * ZB * ZOUT];
  float got[2][2][ZP][ZMAXN]; /* [rank][replicated, sharded][param] */
  int64_t bytes[2][2];        /* lt_nn_optim_state_bytes, same indices */
  char err[2][300];
} zero_ctx;

static int zmodel_init(lt_tensor **p, lt_nn_optim **o, lt_device dev, const zero_ctx *c,
                       bool shard) {
  for (int k = 0; k < ZP; k++) {
    p[k] = kZShape[k][0] == 1 ? lt_from_data(dev, LT_F32, &kZShape[k][1], 1, c->init[k])
                              : lt_from_data(dev, LT_F32, kZShape[k], 2, c->init[k]);
    if (!p[k] || lt_set_requires_grad(p[k], true) != LT_OK) return lt_last_status();
  }
  lt_dp_options opts = {.shard_optimizer = shard};
  *o = lt_dp_optim_create(&c->cfg, p, ZP, &opts);
  if (!*o) return lt_last_status();
  /* a parameter's own weight decay applies to its chunk alike */
  return c->cfg.kind == LT_NN_ADAMW ? lt_nn_optim_set_param_weight_decay(*o, 2, 0.5) : LT_OK;
}

/* loss = mean(((relu(x W1 + b1) W2 + b2) * s - y)^2) over rows [row0, row0 + ZB)
 *        + sum(V^2) / 100 */
static int zbackward(lt_tensor *const *p, lt_device dev, const zero_ctx *c, int t, int row0) {
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(ZB, ZIN), 2, c->x[t] + row0 * ZIN);
  lt_tensor *y = lt_from_data(dev, LT_F32, SHAPE(ZB, ZOUT), 2, c->y[t] + row0 * ZOUT);
  lt_tensor *h = lt_relu(lt_add(lt_matmul(x, p[0]), p[1]));
  lt_tensor *out = lt_mul(lt_add(lt_matmul(h, p[2]), p[3]), p[4]);
  lt_tensor *loss =
      lt_add(lt_nn_mse_loss(out, y, LT_NN_REDUCTION_MEAN),
             lt_mul(lt_sum(lt_mul(p[6], p[6]), NULL, 0, false), lt_scalar(dev, LT_F32, 0.01)));
  return loss ? lt_backward(loss) : lt_last_status();
}

static int zreplica(int r, lt_device dev, void *arg) {
  zero_ctx *c = arg;
  lt_tensor *p[2][ZP] = {{0}};
  lt_nn_optim *o[2] = {0};
  int rc = LT_OK;
  for (int s = 0; s < 2 && rc == LT_OK; s++) rc = zmodel_init(p[s], &o[s], dev, c, s == 1);
  if (rc == LT_OK) rc = lt_mark_step(dev);
  for (int t = 0; t < ZSTEPS && rc == LT_OK; t++) {
    lt_scope_begin();
    for (int s = 0; s < 2 && rc == LT_OK; s++) {
      rc = zbackward(p[s], dev, c, t, r * ZB);
      if (rc == LT_OK) rc = lt_dp_optim_step(o[s]);
    }
    lt_scope_end();
    if (rc == LT_OK) rc = lt_mark_step(dev);
  }
  for (int s = 0; s < 2 && rc == LT_OK; s++) {
    c->bytes[r][s] = lt_nn_optim_state_bytes(o[s]);
    for (int k = 0; k < ZP && rc == LT_OK; k++)
      rc = lt_to_data(p[s][k], c->got[r][s][k], (size_t)znumel(k) * sizeof(float));
  }
  if (rc != LT_OK) snprintf(c->err[r], sizeof c->err[r], "%s", lt_last_error());
  for (int s = 0; s < 2; s++) {
    lt_nn_optim_free(o[s]);
    for (int k = 0; k < ZP; k++) lt_release(p[s][k]);
  }
  return rc;
}

static void check_sharded_matches(lt_nn_optim_kind kind, double momentum, bool nesterov,
                                  int nstate) {
  zero_ctx *c = calloc(1, sizeof *c);
  c->cfg = lt_nn_optim_defaults(kind);
  c->cfg.lr = kind == LT_NN_SGD ? 0.1 : 1e-2;
  c->cfg.momentum = momentum;
  c->cfg.nesterov = nesterov;
  uint32_t s = 4242;
  for (int k = 0; k < ZP; k++)
    for (int i = 0; i < znumel(k); i++) {
      s = s * 1664525u + 1013904223u;
      c->init[k][i] = k == 4 ? 1.5f : (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
  for (int t = 0; t < ZSTEPS; t++) {
    for (int i = 0; i < 2 * ZB * ZIN; i++) c->x[t][i] = (float)((i * 7 + t * 3) % 11) / 5 - 1;
    for (int i = 0; i < 2 * ZB * ZOUT; i++) c->y[t][i] = (float)((i * 5 + t) % 7) / 7 - 0.4f;
  }
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  int rc = lt_world_run(w, zreplica, c);
  for (int r = 0; r < 2; r++)
    if (c->err[r][0]) fail_msg("rank %d: %s", r, c->err[r]);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  lt_world_free(w);

  int64_t whole = 0, half = 0;
  for (int k = 0; k < ZP; k++) {
    whole += znumel(k) * 4 * nstate;
    half += (znumel(k) + 1) / 2 * 4 * nstate;
  }
  for (int r = 0; r < 2; r++) {
    assert_int_equal(c->bytes[r][0], whole);
    assert_int_equal(c->bytes[r][1], half);
  }
  for (int k = 0; k < ZP; k++)
    for (int i = 0; i < znumel(k); i++) {
      float rep = c->got[0][0][k][i], sh = c->got[0][1][k][i];
      assert_true(rep == c->got[1][0][k][i]);
      if (sh != c->got[1][1][k][i])
        fail_msg("param %d[%d]: sharded replicas differ (%.9g, %.9g)", k, i, sh,
                 c->got[1][1][k][i]);
      if (fabs((double)sh - rep) > 1e-5 * fabs(rep) + 1e-7)
        fail_msg("param %d[%d]: sharded %.9g, replicated %.9g", k, i, sh, rep);
    }
  assert_true(fabs(c->got[0][1][6][ZMAXN - 1] - c->init[6][ZMAXN - 1]) > 1e-4); /* V's last */
  assert_true(c->got[0][1][5][0] == c->init[5][0]);             /* u: no grad, untouched */
  assert_true(fabs(c->got[0][1][4][0] - 1.5f) > 1e-4);          /* s (1 element) moved */
  assert_true(fabs(c->got[0][1][3][2] - c->init[3][2]) > 1e-4); /* b2's padded chunk moved */
  free(c);
}

TU_BOTH(test_sharded_adam_matches_replicated) { check_sharded_matches(LT_NN_ADAM, 0, false, 2); }

TU_BOTH(test_sharded_sgd_momentum_matches_replicated) {
  check_sharded_matches(LT_NN_SGD, 0.9, false, 1);
}

static void test_sharded_adamw_and_nesterov_match(void **state) {
  (void)state;
  check_sharded_matches(LT_NN_ADAMW, 0, false, 2);
  check_sharded_matches(LT_NN_SGD, 0.5, true, 1);
}

/* ---- misuse: clear errors, nothing changed ---- */
typedef struct misuse_ctx {
  int step_rc, save_rc, dp_rc, mark_rc;
  char step_err[300], save_err[300];
  float after[2];
} misuse_ctx;

static int misuse_replica(int r, lt_device dev, void *arg) {
  misuse_ctx *c = arg;
  float v[2] = {1, 2};
  lt_tensor *p = lt_from_data(dev, LT_F32, SHAPE(2), 1, v);
  lt_set_requires_grad(p, true);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_dp_options opts = {.shard_optimizer = true};
  lt_nn_optim *o = lt_dp_optim_create(&cfg, &p, 1, &opts);
  if (!o) return lt_last_status();
  lt_backward(lt_sum(lt_mul(p, p), NULL, 0, false));
  if (r == 0) {
    c->step_rc = lt_nn_optim_step(o);
    snprintf(c->step_err, sizeof c->step_err, "%s", lt_last_error());
    char path[] = "/tmp/lt_dp_zero_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    c->save_rc = lt_nn_checkpoint_save(&p, 1, o, path);
    snprintf(c->save_err, sizeof c->save_err, "%s", lt_last_error());
    unlink(path);
  }
  /* the grad is still there: the sharded step takes it */
  int rc = lt_dp_optim_step(o);
  if (r == 0) c->dp_rc = rc;
  if (rc == LT_OK) rc = lt_mark_step(dev);
  if (r == 0 && rc == LT_OK) rc = lt_to_data(p, c->after, sizeof c->after);
  lt_nn_optim_free(o);
  lt_release(p);
  return rc;
}

static void test_sharded_misuse(void **state) {
  (void)state;
  /* no world: nothing to shard over */
  lt_tensor *p = lt_from_data(lt_cpu(2), LT_F32, SHAPE(2), 1, ((float[]){1, 2}));
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_SGD);
  lt_dp_options opts = {.shard_optimizer = true};
  assert_null(lt_dp_optim_create(&cfg, &p, 1, &opts));
  assert_int_equal(lt_last_status(), LT_EDEVICE);
  assert_non_null(strstr(lt_last_error(), "lt_dp_optim_create"));
  lt_nn_optim *o = lt_dp_optim_create(&cfg, &p, 1, NULL); /* the defaults: replicated */
  assert_non_null(o);
  lt_nn_optim_free(o);
  lt_release(p);

  misuse_ctx *c = calloc(1, sizeof *c);
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  int rc = lt_world_run(w, misuse_replica, c);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  lt_world_free(w);
  assert_int_equal(c->step_rc, LT_EINVAL);
  assert_non_null(strstr(c->step_err, "lt_dp_optim_step"));
  assert_int_equal(c->save_rc, LT_EINVAL);
  assert_non_null(strstr(c->save_err, "lt_nn_checkpoint_save"));
  assert_int_equal(c->dp_rc, LT_OK);
  /* Adam's first step moves each element by lr (its grad's sign) */
  assert_float_equal(c->after[0], 1 - 1e-3, 1e-6);
  assert_float_equal(c->after[1], 2 - 1e-3, 1e-6);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sharded_adam_matches_replicated),
      cmocka_unit_test(test_sharded_sgd_momentum_matches_replicated),
      cmocka_unit_test(test_sharded_adamw_and_nesterov_match),
      cmocka_unit_test(test_sharded_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
