/* nn convolution and normalisation layers: conv2d init (bounds, shapes,
 * seed), forward against plain loops, batch norm's parameters and running
 * statistics (two training steps against a C oracle, eval by the running
 * statistics), layer norm, the train/eval switch compiling each mode once,
 * saving the buffers with the model, and freeing. */
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

static void test_conv2d_init_bounds_and_shapes(void **state) {
  (void)state;
  enum { IN = 6, OUT = 8, G = 2, KH = 3, KW = 2, NW = OUT * (IN / G) * KH * KW };
  lt_nn_conv2d a, b, c;
  assert_int_equal(lt_set_seed(CPU0, 11), LT_OK);
  assert_int_equal(lt_nn_conv2d_init_n(&a, CPU0, LT_F32, IN, OUT, SHAPE(KH, KW), 2, SHAPE(2, 1), 2,
                                       SHAPE(1, 0), 2, NULL, 0, G, true),
                   LT_OK);
  assert_int_equal(lt_ndim(a.weight), 4);
  const int64_t want[4] = {OUT, IN / G, KH, KW};
  for (int i = 0; i < 4; i++) assert_int_equal(lt_dim(a.weight, i), want[i]);
  assert_int_equal(lt_ndim(a.bias), 1);
  assert_int_equal(lt_dim(a.bias, 0), OUT);
  assert_true(lt_get_requires_grad(a.weight) && lt_get_requires_grad(a.bias));
  assert_int_equal(a.stride[0], 2);
  assert_int_equal(a.stride[1], 1);
  assert_int_equal(a.padding[0], 1);
  assert_int_equal(a.dilation[1], 1);
  assert_int_equal(lt_get_state(a.weight), LT_STATE_PENDING); /* drawn with the next sync */
  lt_tensor *ps[2] = {a.weight, a.bias};
  assert_int_equal(lt_nn_params_sync(ps, 2), LT_OK);
  assert_int_equal(lt_get_state(a.weight), LT_STATE_DEVICE);
  double w1[NW], b1[OUT], w2[NW];
  read_all(a.weight, w1);
  read_all(a.bias, b1);
  /* fan_in = in / groups * kh * kw = 18 */
  double bound = 1.0 / sqrt((double)(IN / G * KH * KW)), lo = 1, hi = -1;
  for (int i = 0; i < NW; i++) {
    assert_true(w1[i] >= -bound && w1[i] < bound);
    lo = fmin(lo, w1[i]);
    hi = fmax(hi, w1[i]);
  }
  assert_true(lo < -0.7 * bound && hi > 0.7 * bound); /* spread over the interval */
  double blo = 1, bhi = -1;
  for (int i = 0; i < OUT; i++) {
    assert_true(b1[i] >= -bound && b1[i] < bound);
    blo = fmin(blo, b1[i]);
    bhi = fmax(bhi, b1[i]);
  }
  assert_true(bhi - blo > 0.3 * bound); /* not a constant */
  /* same seed: the same weight; no bias */
  assert_int_equal(lt_set_seed(CPU0, 11), LT_OK);
  assert_int_equal(lt_nn_conv2d_init_n(&b, CPU0, LT_F32, IN, OUT, SHAPE(KH, KW), 2, SHAPE(2, 1), 2,
                                       SHAPE(1, 0), 2, NULL, 0, G, false),
                   LT_OK);
  assert_null(b.bias);
  read_all(b.weight, w2);
  assert_memory_equal(w1, w2, sizeof w1);
  /* bad configurations leave the layer empty */
  assert_int_equal(lt_nn_conv2d_init_n(&c, CPU0, LT_F32, 3, 4, SHAPE(3, 3), 2, NULL, 0, NULL, 0,
                                       NULL, 0, 2, true),
                   LT_EINVAL); /* groups does not divide in */
  assert_null(c.weight);
  assert_int_equal(
      lt_nn_conv2d_init_n(&c, CPU0, LT_F32, 2, 4, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 1, true),
      LT_EINVAL);
  assert_int_equal(lt_nn_conv2d_init_n(&c, CPU0, LT_F32, 2, 4, SHAPE(0, 3), 2, NULL, 0, NULL, 0,
                                       NULL, 0, 1, true),
                   LT_EINVAL);
  assert_int_equal(lt_nn_conv2d_init_n(&c, CPU0, LT_F32, 2, 4, SHAPE(3, 3), 2, NULL, 0,
                                       SHAPE(-1, 0), 2, NULL, 0, 1, true),
                   LT_EINVAL);
  assert_int_equal(lt_nn_conv2d_init_n(&c, CPU0, LT_I32, 2, 4, SHAPE(3, 3), 2, NULL, 0, NULL, 0,
                                       NULL, 0, 1, true),
                   LT_EDTYPE);
  assert_null(c.weight);
  lt_nn_conv2d_free(&a);
  assert_null(a.weight);
  lt_nn_conv2d_free(&a); /* twice is harmless */
  lt_nn_conv2d_free(&b);
  lt_nn_conv2d_free(NULL);
}

static void test_conv2d_forward(void **state) {
  (void)state;
  /* x [1, 2, 3, 3], 2 -> 2 channels, kernel 2x2, padding 1, stride 2 */
  enum { C = 2, O = 2, H = 3, K = 2, OH = 2 };
  lt_nn_conv2d l;
  assert_int_equal(lt_nn_conv2d_init_n(&l, CPU0, LT_F64, C, O, SHAPE(K, K), 2, SHAPE(2, 2), 2,
                                       SHAPE(1, 1), 2, NULL, 0, 1, true),
                   LT_OK);
  double w[O * C * K * K], b[O], x[C * H * H], want[O * OH * OH];
  read_all(l.weight, w);
  read_all(l.bias, b);
  for (int i = 0; i < C * H * H; i++) x[i] = sin(0.7 * i + 0.3);
  for (int o = 0; o < O; o++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OH; ow++) {
        double s = b[o];
        for (int c = 0; c < C; c++)
          for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
              int h = oh * 2 - 1 + i, ww = ow * 2 - 1 + j;
              if (h >= 0 && h < H && ww >= 0 && ww < H)
                s += w[((o * C + c) * K + i) * K + j] * x[(c * H + h) * H + ww];
            }
        want[(o * OH + oh) * OH + ow] = s;
      }
  tu_expect(lt_nn_conv2d_forward(&l, tu_f64(SHAPE(1, C, H, H), 4, x)), LT_F64, SHAPE(1, O, OH, OH),
            4, want, 1e-12);
  double x3[3 * H * H] = {0}; /* 3 channels where the layer takes 2 */
  TU_EXPECT_ERROR(lt_nn_conv2d_forward(&l, tu_f64(SHAPE(1, 3, 3, 3), 4, x3)), LT_ESHAPE,
                  "[1, 3, 3, 3]");
  TU_EXPECT_ERROR(lt_nn_conv2d_forward(&l, NULL), LT_EINVAL, "lt_nn_conv2d_forward");
  lt_nn_conv2d_free(&l);
  TU_EXPECT_ERROR(lt_nn_conv2d_forward(&l, tu_f64(SHAPE(1, C, H, H), 4, x)), LT_EINVAL,
                  "not initialised");
}

enum { BN_N = 3, BN_C = 2, BN_HW = 4, BN_M = BN_N * BN_HW };

/* C oracle of a training forward: y by the batch statistics (biased
 * variance), and the running statistics updated with the unbiased one. */
static void bn_oracle_train(const double *x, double *rm, double *rv, double *y, double mom,
                            double eps) {
  for (int c = 0; c < BN_C; c++) {
    double mean = 0, var = 0;
    for (int n = 0; n < BN_N; n++)
      for (int i = 0; i < BN_HW; i++) mean += x[(n * BN_C + c) * BN_HW + i] / BN_M;
    for (int n = 0; n < BN_N; n++)
      for (int i = 0; i < BN_HW; i++) {
        double d = x[(n * BN_C + c) * BN_HW + i] - mean;
        var += d * d / BN_M;
      }
    for (int n = 0; n < BN_N; n++)
      for (int i = 0; i < BN_HW; i++) {
        int k = (n * BN_C + c) * BN_HW + i;
        y[k] = (x[k] - mean) / sqrt(var + eps);
      }
    rm[c] = (1 - mom) * rm[c] + mom * mean;
    rv[c] = (1 - mom) * rv[c] + mom * var * BN_M / (BN_M - 1);
  }
}

static void bn_input(int seed, double *x) {
  for (int i = 0; i < BN_N * BN_C * BN_HW; i++)
    x[i] = 2.0 * sin(1.3 * i + seed) + 0.5 * seed + (i % BN_HW);
}

static void test_batchnorm_init(void **state) {
  (void)state;
  lt_nn_batchnorm2d l, na;
  assert_int_equal(lt_nn_batchnorm2d_init(&l, CPU0, LT_F32, 3, true), LT_OK);
  assert_true(l.momentum == 0.1 && l.eps == 1e-5);
  assert_int_equal(l.num_features, 3);
  assert_true(lt_get_requires_grad(l.weight) && lt_get_requires_grad(l.bias));
  assert_false(lt_get_requires_grad(l.running_mean) || lt_get_requires_grad(l.running_var));
  /* parameters and buffers sync as one list (a model's init graph) */
  lt_tensor *all[4] = {l.weight, l.bias, l.running_mean, l.running_var};
  assert_int_equal(lt_nn_params_sync(all, 4), LT_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(lt_get_state(all[i]), LT_STATE_DEVICE);
  tu_expect(l.weight, LT_F32, SHAPE(3), 1, (double[]){1, 1, 1}, 0);
  tu_expect(l.bias, LT_F32, SHAPE(3), 1, (double[]){0, 0, 0}, 0);
  tu_expect(l.running_mean, LT_F32, SHAPE(3), 1, (double[]){0, 0, 0}, 0);
  tu_expect(l.running_var, LT_F32, SHAPE(3), 1, (double[]){1, 1, 1}, 0);
  assert_int_equal(lt_nn_batchnorm2d_init(&na, CPU0, LT_F64, 2, false), LT_OK);
  assert_null(na.weight);
  assert_null(na.bias);
  assert_int_equal(lt_get_dtype(na.running_var), LT_F64);
  TU_EXPECT_ERROR(
      lt_nn_batchnorm2d_forward(&l, tu_f32(SHAPE(1, 2, 1, 1), 4, ((float[]){1, 2})), true),
      LT_ESHAPE, "[1, 2, 1, 1]");
  lt_nn_batchnorm2d_free(&l);
  lt_nn_batchnorm2d_free(&na);
  assert_null(l.running_mean);
  lt_nn_batchnorm2d_free(&l);
  lt_nn_batchnorm2d_free(NULL);
  TU_EXPECT_ERROR(
      lt_nn_batchnorm2d_forward(&l, tu_f32(SHAPE(1, 3, 1, 1), 4, ((float[]){1, 2, 3})), false),
      LT_EINVAL, "not initialised");
  lt_nn_batchnorm2d bad;
  assert_int_equal(lt_nn_batchnorm2d_init(&bad, CPU0, LT_F32, 0, true), LT_EINVAL);
  assert_int_equal(lt_nn_batchnorm2d_init(&bad, CPU0, LT_I64, 2, true), LT_EDTYPE);
  assert_null(bad.running_mean);
}

/* Two training steps through the layer (each its own step barrier), then
 * eval: values and running statistics against the oracle; eval reads the
 * running statistics and leaves them alone. */
static void test_batchnorm_running_stats(void **state) {
  (void)state;
  enum { NX = BN_N * BN_C * BN_HW };
  const int64_t *xs = SHAPE(BN_N, BN_C, 2, 2);
  lt_nn_batchnorm2d l;
  assert_int_equal(lt_nn_batchnorm2d_init(&l, CPU0, LT_F64, BN_C, true), LT_OK);
  l.momentum = 0.25; /* not the default: the layer's field is what counts */
  double rm[BN_C] = {0, 0}, rv[BN_C] = {1, 1}, x[NX], y[NX];
  for (int step = 0; step < 2; step++) {
    bn_input(step, x);
    bn_oracle_train(x, rm, rv, y, 0.25, 1e-5);
    lt_scope_begin();
    lt_tensor *out = lt_retain(lt_nn_batchnorm2d_forward(&l, tu_f64(xs, 4, x), true));
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    tu_expect(out, LT_F64, xs, 4, y, 1e-9);
    lt_release(out);
    tu_expect(l.running_mean, LT_F64, SHAPE(BN_C), 1, rm, 1e-12);
    tu_expect(l.running_var, LT_F64, SHAPE(BN_C), 1, rv, 1e-12);
  }
  /* eval of the same x: the running statistics, not the batch's */
  double ye[NX];
  for (int k = 0; k < NX; k++) {
    int c = (k / BN_HW) % BN_C;
    ye[k] = (x[k] - rm[c]) / sqrt(rv[c] + 1e-5);
  }
  for (int rep = 0; rep < 2; rep++) {
    lt_tensor *e = lt_nn_batchnorm2d_forward(&l, tu_f64(xs, 4, x), false);
    tu_expect(e, LT_F64, xs, 4, ye, 1e-9);
    double tv[NX];
    read_all(e, tv);
    double diff = 0;
    for (int k = 0; k < NX; k++) diff = fmax(diff, fabs(tv[k] - y[k]));
    assert_true(diff > 0.05); /* train and eval differ */
    tu_expect(l.running_mean, LT_F64, SHAPE(BN_C), 1, rm, 1e-12);
    tu_expect(l.running_var, LT_F64, SHAPE(BN_C), 1, rv, 1e-12);
  }
  lt_nn_batchnorm2d_free(&l);
}

static void test_layernorm(void **state) {
  (void)state;
  lt_nn_layernorm l, na;
  assert_int_equal(lt_nn_layernorm_init(&l, CPU0, LT_F64, SHAPE(2, 3), 2, true), LT_OK);
  assert_int_equal(lt_ndim(l.weight), 2);
  assert_int_equal(lt_dim(l.weight, 1), 3);
  assert_true(lt_get_requires_grad(l.weight) && lt_get_requires_grad(l.bias));
  double x[12], want[12];
  for (int i = 0; i < 12; i++) x[i] = cos(0.9 * i) * (1 + i);
  for (int r = 0; r < 2; r++) {
    double m = 0, v = 0;
    for (int i = 0; i < 6; i++) m += x[r * 6 + i] / 6;
    for (int i = 0; i < 6; i++) v += (x[r * 6 + i] - m) * (x[r * 6 + i] - m) / 6;
    for (int i = 0; i < 6; i++) want[r * 6 + i] = (x[r * 6 + i] - m) / sqrt(v + 1e-5);
  }
  tu_expect(lt_nn_layernorm_forward(&l, tu_f64(SHAPE(2, 2, 3), 3, x)), LT_F64, SHAPE(2, 2, 3), 3,
            want, 1e-9);
  assert_int_equal(lt_nn_layernorm_init(&na, CPU0, LT_F64, SHAPE(6), 1, false), LT_OK);
  assert_null(na.weight);
  tu_expect(lt_nn_layernorm_forward(&na, tu_f64(SHAPE(2, 6), 2, x)), LT_F64, SHAPE(2, 6), 2, want,
            1e-9);
  lt_nn_layernorm bad;
  assert_int_equal(lt_nn_layernorm_init(&bad, CPU0, LT_F64, SHAPE(2, 0), 2, true), LT_EINVAL);
  assert_int_equal(lt_nn_layernorm_init(&bad, CPU0, LT_F64, SHAPE(2), 0, true), LT_EINVAL);
  assert_int_equal(lt_nn_layernorm_init(&bad, CPU0, LT_U8, SHAPE(2), 1, true), LT_EDTYPE);
  lt_nn_layernorm_free(&l);
  lt_nn_layernorm_free(&na);
  lt_nn_layernorm_free(NULL);
  TU_EXPECT_ERROR(lt_nn_layernorm_forward(&l, tu_f64(SHAPE(2, 6), 2, x)), LT_EINVAL,
                  "not initialised");
}

static void test_pool_conveniences(void **state) {
  (void)state;
  double x[16];
  for (int i = 0; i < 16; i++) x[i] = (i * 7) % 16;
  lt_tensor *t = tu_f64(SHAPE(1, 1, 4, 4), 4, x);
  double mx[4], av[4];
  for (int oh = 0; oh < 2; oh++)
    for (int ow = 0; ow < 2; ow++) {
      double m = -1, s = 0;
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
          double v = x[(oh * 2 + i) * 4 + ow * 2 + j];
          m = fmax(m, v);
          s += v;
        }
      mx[oh * 2 + ow] = m;
      av[oh * 2 + ow] = s / 4;
    }
  tu_expect(lt_nn_max_pool2d_n(t, SHAPE(2, 2), 2, NULL, 0, NULL, 0), LT_F64, SHAPE(1, 1, 2, 2), 4,
            mx, 0);
  tu_expect(lt_nn_avg_pool2d_n(t, SHAPE(2, 2), 2, NULL, 0, NULL, 0), LT_F64, SHAPE(1, 1, 2, 2), 4,
            av, 1e-12);
  /* padding 1, stride 1, kernel 3: padded zeros count in the average */
  lt_tensor *a = lt_nn_avg_pool2d_n(t, SHAPE(3, 3), 2, SHAPE(1, 1), 2, SHAPE(1, 1), 2);
  double v[16];
  read_all(a, v);
  assert_true(tu_near(v[0], (x[0] + x[1] + x[4] + x[5]) / 9, 1e-12));
}

/* A tiny CNN (conv, batch norm, ReLU, max-pool, flatten, linear, dropout):
 * alternating training steps and evaluations compile two graphs after the
 * first rounds and none later; eval is deterministic. */
typedef struct tiny_cnn {
  lt_nn_conv2d conv;
  lt_nn_batchnorm2d bn;
  lt_nn_linear fc;
  lt_tensor *params[6];
} tiny_cnn;

static lt_tensor *tiny_forward(tiny_cnn *m, lt_tensor *x, bool train) {
  lt_tensor *h =
      lt_nn_relu(lt_nn_batchnorm2d_forward(&m->bn, lt_nn_conv2d_forward(&m->conv, x), train));
  h = lt_flatten(lt_nn_max_pool2d_n(h, SHAPE(2, 2), 2, NULL, 0, NULL, 0), 1, -1);
  return lt_nn_linear_forward(&m->fc, lt_nn_dropout(h, 0.25, train));
}

static void test_train_eval_compile_once(void **state) {
  (void)state;
  enum { B = 4, CLS = 3 };
  tiny_cnn m;
  assert_int_equal(lt_set_seed(CPU0, 3), LT_OK);
  assert_int_equal(lt_nn_conv2d_init_n(&m.conv, CPU0, LT_F32, 1, 2, SHAPE(3, 3), 2, NULL, 0,
                                       SHAPE(1, 1), 2, NULL, 0, 1, true),
                   LT_OK);
  assert_int_equal(lt_nn_batchnorm2d_init(&m.bn, CPU0, LT_F32, 2, true), LT_OK);
  assert_int_equal(lt_nn_linear_init(&m.fc, CPU0, LT_F32, 2 * 2 * 2, CLS, true), LT_OK);
  lt_tensor *ps[6] = {m.conv.weight, m.conv.bias, m.bn.weight, m.bn.bias, m.fc.weight, m.fc.bias};
  memcpy(m.params, ps, sizeof ps);
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_nn_optim *opt = lt_nn_optim_create(&oc, m.params, 6);
  assert_non_null(opt);
  float xv[B * 16];
  for (int i = 0; i < B * 16; i++) xv[i] = (float)sin(0.37 * i);
  lt_tensor *x = lt_retain(tu_f32(SHAPE(B, 1, 4, 4), 4, xv));
  lt_tensor *y = lt_retain(tu_i64(SHAPE(B), 1, ((int64_t[]){0, 1, 2, 1})));
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* init */
  int64_t after_warm = 0;
  double rm_before[2], rm_after[2], e1[B * CLS], e2[B * CLS];
  for (int round = 0; round < 4; round++) {
    if (round == 2) after_warm = tu_counter("UncachedCompile");
    lt_scope_begin();
    lt_tensor *loss = lt_nn_cross_entropy(tiny_forward(&m, x, true), y);
    assert_non_null(loss);
    assert_int_equal(lt_backward(loss), LT_OK);
    assert_int_equal(lt_nn_optim_step(opt), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    read_all(m.bn.running_mean, rm_before);
    lt_scope_begin();
    read_all(tiny_forward(&m, x, false), e1);
    read_all(tiny_forward(&m, x, false), e2);
    lt_scope_end();
    assert_memory_equal(e1, e2, sizeof e1); /* eval: no dropout, statistics untouched */
    read_all(m.bn.running_mean, rm_after);
    assert_memory_equal(rm_before, rm_after, sizeof rm_before);
  }
  /* rounds 3 and 4 found both graphs (train step, eval forward) compiled */
  assert_int_equal(tu_counter("UncachedCompile"), after_warm);
  assert_true(after_warm >= 2);
  lt_release(x);
  lt_release(y);
  lt_nn_optim_free(opt);
  lt_nn_conv2d_free(&m.conv);
  lt_nn_batchnorm2d_free(&m.bn);
  lt_nn_linear_free(&m.fc);
}

/* The buffers travel with the parameters in a parameter file. */
static void test_batchnorm_save_load(void **state) {
  (void)state;
  char path[] = "/tmp/lt_nn_conv_XXXXXX";
  tu_mkstemp(path);
  lt_nn_batchnorm2d a, b;
  assert_int_equal(lt_nn_batchnorm2d_init(&a, CPU0, LT_F64, BN_C, true), LT_OK);
  assert_int_equal(lt_nn_batchnorm2d_init(&b, CPU0, LT_F64, BN_C, true), LT_OK);
  double x[BN_N * BN_C * BN_HW];
  bn_input(5, x);
  lt_scope_begin();
  lt_nn_batchnorm2d_forward(&a, tu_f64(SHAPE(BN_N, BN_C, 2, 2), 4, x), true);
  lt_scope_end();
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  lt_tensor *ta[4] = {a.weight, a.bias, a.running_mean, a.running_var};
  lt_tensor *tb[4] = {b.weight, b.bias, b.running_mean, b.running_var};
  assert_int_equal(lt_nn_params_save(ta, 4, path), LT_OK);
  assert_int_equal(lt_nn_params_load(tb, 4, path), LT_OK);
  double va[BN_C], vb[BN_C];
  read_all(a.running_var, va);
  read_all(b.running_var, vb);
  assert_memory_equal(va, vb, sizeof va);
  assert_true(va[0] != 1.0);
  read_all(a.running_mean, va);
  read_all(b.running_mean, vb);
  assert_memory_equal(va, vb, sizeof va);
  unlink(path);
  lt_nn_batchnorm2d_free(&a);
  lt_nn_batchnorm2d_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      NTEST(test_conv2d_init_bounds_and_shapes),
      NTEST(test_conv2d_forward),
      NTEST(test_batchnorm_init),
      NTEST(test_batchnorm_running_stats),
      NTEST(test_layernorm),
      NTEST(test_pool_conveniences),
      NTEST(test_train_eval_compile_once),
      NTEST(test_batchnorm_save_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
