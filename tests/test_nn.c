/* nn layers and losses: linear init (bounds, determinism by seed), forward,
 * cross-entropy (hand values, stability, gradient), accuracy, save/load, and
 * a tiny end-to-end training run. */
#include <unistd.h>

#include "test_util.h"
#include "lazytensor_nn.h"

static int setup(void **state) {
  lt_wait_device_ops(CPU0);
  lt_counters_reset();
  return tu_setup(state);
}
#define NTEST(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown_wait)

static void read_all(lt_tensor *t, double *out) { tu_read(t, out, lt_numel(t)); }

static void test_linear_init_bounds_and_seed(void **state) {
  (void)state;
  enum { IN = 16, OUT = 24 };
  double w1[IN * OUT], b1[OUT], w2[IN * OUT], b2[OUT], w3[IN * OUT];
  lt_nn_linear a, b, c;
  assert_int_equal(lt_set_seed(CPU0, 7), LT_OK);
  assert_int_equal(lt_nn_linear_init(&a, CPU0, LT_F32, IN, OUT, true), LT_OK);
  assert_int_equal(lt_ndim(a.weight), 2);
  assert_int_equal(lt_dim(a.weight, 0), IN);
  assert_int_equal(lt_dim(a.weight, 1), OUT);
  assert_int_equal(lt_dim(a.bias, 0), OUT);
  assert_true(lt_get_requires_grad(a.weight) && lt_get_requires_grad(a.bias));
  lt_tensor *ps[2] = {a.weight, a.bias};
  assert_int_equal(lt_nn_params_sync(ps, 2), LT_OK);
  assert_int_equal(lt_get_state(a.weight), LT_STATE_DEVICE);
  read_all(a.weight, w1);
  read_all(a.bias, b1);
  double bound = 1.0 / sqrt(IN), lo = 1, hi = -1, mean = 0;
  for (int i = 0; i < IN * OUT; i++) {
    assert_true(w1[i] >= -bound && w1[i] < bound);
    lo = fmin(lo, w1[i]);
    hi = fmax(hi, w1[i]);
    mean += w1[i] / (IN * OUT);
  }
  for (int i = 0; i < OUT; i++) assert_true(b1[i] >= -bound && b1[i] < bound);
  assert_true(lo < -0.8 * bound && hi > 0.8 * bound); /* spread over the interval */
  assert_true(fabs(mean) < 0.1 * bound);
  /* same seed: same parameters; another seed: others */
  assert_int_equal(lt_set_seed(CPU0, 7), LT_OK);
  assert_int_equal(lt_nn_linear_init(&b, CPU0, LT_F32, IN, OUT, true), LT_OK);
  read_all(b.weight, w2);
  read_all(b.bias, b2);
  assert_memory_equal(w1, w2, sizeof w1);
  assert_memory_equal(b1, b2, sizeof b1);
  assert_int_equal(lt_set_seed(CPU0, 8), LT_OK);
  assert_int_equal(lt_nn_linear_init(&c, CPU0, LT_F32, IN, OUT, false), LT_OK);
  assert_null(c.bias);
  read_all(c.weight, w3);
  assert_memory_not_equal(w1, w3, sizeof w1);
  lt_nn_linear_free(&a);
  lt_nn_linear_free(&b);
  lt_nn_linear_free(&c);
  lt_nn_linear_free(NULL);
}

static void test_linear_forward_and_errors(void **state) {
  (void)state;
  lt_nn_linear l;
  assert_int_equal(lt_nn_linear_init(&l, CPU0, LT_F64, 3, 2, true), LT_OK);
  double w[6], b[2];
  read_all(l.weight, w);
  read_all(l.bias, b);
  const double x[6] = {1, 2, 3, -1, 0, 0.5};
  double want[4];
  for (int r = 0; r < 2; r++)
    for (int o = 0; o < 2; o++) {
      want[r * 2 + o] = b[o];
      for (int k = 0; k < 3; k++) want[r * 2 + o] += x[r * 3 + k] * w[k * 2 + o];
    }
  tu_expect(lt_nn_linear_forward(&l, tu_f64(SHAPE(2, 3), 2, x)), LT_F64, SHAPE(2, 2), 2, want,
            1e-12);
  TU_EXPECT_ERROR(lt_nn_linear_forward(&l, tu_f64(SHAPE(2, 2), 2, x)), LT_ESHAPE, "[2, 2]");
  TU_EXPECT_ERROR(lt_nn_linear_forward(&l, NULL), LT_EINVAL, "lt_nn_linear_forward");
  lt_nn_linear_free(&l);
  lt_nn_linear bad;
  assert_int_equal(lt_nn_linear_init(&bad, CPU0, LT_F32, 0, 2, true), LT_EINVAL);
  assert_int_equal(lt_nn_linear_init(&bad, CPU0, LT_I32, 2, 2, true), LT_EDTYPE);
  assert_null(bad.weight);
}

static void test_cross_entropy_hand_values(void **state) {
  (void)state;
  /* row 0: log(e + e^2 + e^3) - 3 = 0.40760596; row 1: log 3 = 1.09861229 */
  lt_tensor *logits = tu_f64(SHAPE(2, 3), 2, ((double[]){1, 2, 3, 1, 1, 1}));
  lt_tensor *labels = tu_i64(SHAPE(2), 1, ((int64_t[]){2, 0}));
  assert_int_equal(lt_set_requires_grad(logits, true), LT_OK);
  lt_tensor *ce = lt_nn_cross_entropy(logits, labels);
  if (lt_backward(ce) != LT_OK) fail_msg("backward: %s", lt_last_error());
  tu_expect(ce, LT_F64, NULL, 0, (double[]){0.7531091265562451}, 1e-14);
  /* d/dlogits = (softmax - one_hot) / B, as torch */
  tu_expect(lt_grad(logits), LT_F64, SHAPE(2, 3), 2,
            (double[]){0.04501528658519022, 0.12236423552739882, -0.1673795221125891,
                       -0.33333333333333337, 0.16666666666666666, 0.16666666666666666},
            1e-14);
  /* stable for large logits; i32 labels; f32 */
  lt_tensor *big = tu_f32(SHAPE(2, 2), 2, ((float[]){1000, 0, -1000, 0}));
  tu_expect(lt_nn_cross_entropy(big, tu_i32(SHAPE(2), 1, ((int32_t[]){1, 1}))), LT_F32, NULL, 0,
            (double[]){500}, 1e-6);
  tu_expect(lt_nn_cross_entropy(big, tu_i32(SHAPE(2), 1, ((int32_t[]){0, 1}))), LT_F32, NULL, 0,
            (double[]){0}, 1e-6);
  TU_EXPECT_ERROR(lt_nn_cross_entropy(tu_f32(SHAPE(2), 1, ((float[]){1, 2})), labels), LT_ESHAPE,
                  "lt_nn_cross_entropy");
  TU_EXPECT_ERROR(lt_nn_cross_entropy(logits, tu_f32(SHAPE(2), 1, ((float[]){1, 2}))), LT_EDTYPE,
                  "labels");
  TU_EXPECT_ERROR(lt_nn_cross_entropy(logits, tu_i64(SHAPE(3), 1, ((int64_t[]){1, 2, 0}))),
                  LT_ESHAPE, "[3]");
}

static void test_accuracy(void **state) {
  (void)state;
  lt_tensor *logits = tu_f32(SHAPE(4, 2), 2, ((float[]){0.1f, 0.9f, 0.8f, 0.2f, 0.5f, 0.5f, 3, 1}));
  lt_tensor *labels = tu_i64(SHAPE(4), 1, ((int64_t[]){1, 1, 0, 0}));
  /* argmax (first on ties): 1, 0, 0, 0 -> hits 1, 0, 1, 1 */
  tu_expect(lt_nn_accuracy(logits, labels), LT_F32, NULL, 0, (double[]){0.75}, 1e-7);
  TU_EXPECT_ERROR(lt_nn_accuracy(logits, NULL), LT_EINVAL, "");
}

static void test_save_load_roundtrip_and_errors(void **state) {
  (void)state;
  char path[] = "/tmp/lt_test_nn_XXXXXX";
  tu_mkstemp(path);
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, ((float[]){1, 2, 3, 4, 5, 6}));
  lt_tensor *b = lt_exp(tu_f64(SHAPE(2), 1, ((double[]){0, 1}))); /* pending: saved by value */
  lt_tensor *src[2] = {a, b};
  assert_int_equal(lt_nn_params_save(src, 2, path), LT_OK);
  lt_tensor *c = lt_zeros(CPU0, LT_F32, SHAPE(2, 3), 2);
  lt_tensor *d = lt_zeros(CPU0, LT_F64, SHAPE(2), 1);
  lt_tensor *dst[2] = {c, d};
  assert_int_equal(lt_nn_params_load(dst, 2, path), LT_OK);
  tu_expect(c, LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 3, 4, 5, 6}, 0);
  tu_expect(d, LT_F64, SHAPE(2), 1, (double[]){1, M_E}, 1e-15);
  /* wrong model: count, shape, dtype */
  assert_int_equal(lt_nn_params_load(dst, 1, path), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "holds 2 tensors"));
  lt_tensor *wrong[2] = {lt_zeros(CPU0, LT_F32, SHAPE(3, 2), 2), d};
  assert_int_equal(lt_nn_params_load(wrong, 2, path), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "[3, 2]"));
  /* corrupt: flip a data byte; truncate; bad magic; missing */
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, 40, SEEK_SET);
  fputc(0x7f, f);
  fclose(f);
  assert_int_equal(lt_nn_params_load(dst, 2, path), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "checksum"));
  assert_int_equal(truncate(path, 30), 0);
  assert_int_equal(lt_nn_params_load(dst, 2, path), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "truncated"));
  f = fopen(path, "wb");
  fputs("NOTPARAMS-------------------", f);
  fclose(f);
  assert_int_equal(lt_nn_params_load(dst, 2, path), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "bad magic"));
  remove(path);
  assert_int_equal(lt_nn_params_load(dst, 2, path), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "cannot open"));
  /* the failed loads left the tensors alone */
  tu_expect(c, LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 3, 4, 5, 6}, 0);
}

/* 64 samples of 4 features, 2 classes (the sign of feature 0 plus noise in
 * the others): a 4-8-2 MLP with Adam learns it in a few full-batch steps,
 * and the step compiles once. */
static void test_tiny_training_loss_decreases(void **state) {
  (void)state;
  enum { N = 64, F = 4, H = 8 };
  float x[N * F];
  int64_t y[N];
  uint32_t s = 12345;
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < F; k++) {
      s = s * 1664525u + 1013904223u;
      x[i * F + k] = (float)((s >> 8) / 16777216.0 * 2 - 1);
    }
    y[i] = x[i * F] > 0;
  }
  lt_tensor *xt = lt_retain(tu_f32(SHAPE(N, F), 2, x));
  lt_tensor *yt = lt_retain(tu_i64(SHAPE(N), 1, y));
  lt_set_seed(CPU0, 3);
  lt_nn_linear l1, l2;
  assert_int_equal(lt_nn_linear_init(&l1, CPU0, LT_F32, F, H, true), LT_OK);
  assert_int_equal(lt_nn_linear_init(&l2, CPU0, LT_F32, H, 2, true), LT_OK);
  lt_tensor *ps[4] = {l1.weight, l1.bias, l2.weight, l2.bias};
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 0.05;
  lt_nn_optim *opt = lt_nn_optim_create(&cfg, ps, 4);
  assert_non_null(opt);
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* init: one graph */
  int64_t compiles = 0;
  double first = 0, last = 0;
  for (int step = 0; step < 30; step++) {
    lt_scope_begin();
    lt_tensor *logits = lt_nn_linear_forward(&l2, lt_nn_relu(lt_nn_linear_forward(&l1, xt)));
    lt_tensor *loss = lt_retain(lt_nn_cross_entropy(logits, yt));
    int rc = lt_backward(loss);
    if (rc != LT_OK) fail_msg("backward: %s", lt_last_error());
    assert_int_equal(lt_nn_optim_step(opt), LT_OK);
    lt_scope_end();
    if (step == 1) compiles = tu_counter("UncachedCompile");
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    if (step == 0) assert_int_equal(lt_item(loss, 0, &first), LT_OK);
    if (step == 29) assert_int_equal(lt_item(loss, 0, &last), LT_OK);
    lt_release(loss);
  }
  /* steps 2..30 hit the cache (reads of the loss cut nothing: it was synced) */
  assert_int_equal(tu_counter("UncachedCompile"), compiles);
  assert_true(last < 0.5 * first);
  lt_scope_begin();
  double accv;
  lt_tensor *logits = lt_nn_linear_forward(&l2, lt_nn_relu(lt_nn_linear_forward(&l1, xt)));
  assert_int_equal(lt_item(lt_nn_accuracy(logits, yt), 0, &accv), LT_OK);
  lt_scope_end();
  assert_true(accv >= 0.9);
  lt_nn_optim_free(opt);
  lt_nn_linear_free(&l1);
  lt_nn_linear_free(&l2);
  lt_release(xt);
  lt_release(yt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      NTEST(test_linear_init_bounds_and_seed),    NTEST(test_linear_forward_and_errors),
      NTEST(test_cross_entropy_hand_values),      NTEST(test_accuracy),
      NTEST(test_save_load_roundtrip_and_errors), NTEST(test_tiny_training_loss_decreases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
