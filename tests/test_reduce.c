/* Reductions (sum, mean, max, min, prod, logsumexp), argmax / argmin and
 * softmax / log_softmax against hand-computed values. */
#include "test_util.h"

#define AXES(...) ((const int[]){__VA_ARGS__})
#define NAXES(...) ((int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)))
/* Reduction over an axis list given inline. */
#define RED(fn, t, keep, ...) fn((t), AXES(__VA_ARGS__), NAXES(__VA_ARGS__), (keep))

/* a = [[1, 2, 3], [4, 5, 6]] */
static const float kA[] = {1, 2, 3, 4, 5, 6};
/* b = [[3, -1, 2], [0, 5, -4]] */
static const float kB[] = {3, -1, 2, 0, 5, -4};

/* [2, 3, 4] holding 0..23: element (i, j, k) = 12 i + 4 j + k. */
static lt_tensor *iota234(lt_dtype dt) {
  double v[24];
  for (int i = 0; i < 24; i++) v[i] = i;
  lt_tensor *t = tu_f64(SHAPE(2, 3, 4), 3, v);
  return dt == LT_F64 ? t : lt_cast(t, dt);
}

static double lse(const double *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += exp(v[i]);
  return log(s);
}

/* ---- sum --------------------------------------------------------------------------- */

static void test_sum_2d(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  tu_expect(RED(lt_sum, a, false, 0), LT_F32, SHAPE(3), 1, (double[]){5, 7, 9}, 1e-6);
  tu_expect(RED(lt_sum, a, false, 1), LT_F32, SHAPE(2), 1, (double[]){6, 15}, 1e-6);
  tu_expect(RED(lt_sum, a, false, -1), LT_F32, SHAPE(2), 1, (double[]){6, 15}, 1e-6);
  tu_expect(RED(lt_sum, a, false, 0, 1), LT_F32, NULL, 0, (double[]){21}, 1e-6);
  tu_expect(lt_sum(a, NULL, 0, false), LT_F32, NULL, 0, (double[]){21}, 1e-6);
  /* keepdim */
  tu_expect(RED(lt_sum, a, true, 0), LT_F32, SHAPE(1, 3), 2, (double[]){5, 7, 9}, 1e-6);
  tu_expect(RED(lt_sum, a, true, 1), LT_F32, SHAPE(2, 1), 2, (double[]){6, 15}, 1e-6);
  tu_expect(RED(lt_sum, a, true, 1, 0), LT_F32, SHAPE(1, 1), 2, (double[]){21}, 1e-6);
  tu_expect(lt_sum(a, NULL, 0, true), LT_F32, SHAPE(1, 1), 2, (double[]){21}, 1e-6);
}

static void test_sum_3d(void **state) {
  (void)state;
  lt_tensor *x = iota234(LT_F32);
  /* sum over i, k of 12 i + 4 j + k = 32 j + 60 */
  const double want[] = {60, 92, 124};
  tu_expect(RED(lt_sum, x, false, 0, 2), LT_F32, SHAPE(3), 1, want, 1e-6);
  tu_expect(RED(lt_sum, x, false, 2, 0), LT_F32, SHAPE(3), 1, want, 1e-6);
  tu_expect(RED(lt_sum, x, false, -1, -3), LT_F32, SHAPE(3), 1, want, 1e-6);
  tu_expect(RED(lt_sum, x, true, 0, 2), LT_F32, SHAPE(1, 3, 1), 3, want, 1e-6);
  /* over j: 3 (12 i + k) + 12 */
  tu_expect(RED(lt_sum, x, false, 1), LT_F32, SHAPE(2, 4), 2,
            (double[]){12, 15, 18, 21, 48, 51, 54, 57}, 1e-6);
  tu_expect(lt_sum(x, NULL, 0, false), LT_F32, NULL, 0, (double[]){276}, 1e-6);
}

static void test_sum_dtypes(void **state) {
  (void)state;
  tu_expect(RED(lt_sum, tu_f64(SHAPE(2, 2), 2, (double[]){0.5, 1, 2, 4}), false, 1), LT_F64,
            SHAPE(2), 1, (double[]){1.5, 6}, 1e-12);
  /* ints and bools sum to i64 */
  tu_expect(RED(lt_sum, tu_i32(SHAPE(2, 2), 2, (int32_t[]){1, -2, 3, 4}), false, 0), LT_I64,
            SHAPE(2), 1, (double[]){4, 2}, 0);
  tu_expect(lt_sum(tu_i32(SHAPE(2), 1, (int32_t[]){2000000000, 2000000000}), NULL, 0, false),
            LT_I64, NULL, 0, (double[]){4000000000.0}, 0);
  tu_expect(RED(lt_sum, tu_i64(SHAPE(3), 1, (int64_t[]){-5, 7, 1}), false, 0), LT_I64, NULL, 0,
            (double[]){3}, 0);
  tu_expect(RED(lt_sum, tu_bool(SHAPE(2, 3), 2, (uint8_t[]){1, 0, 1, 1, 1, 1}), false, 1), LT_I64,
            SHAPE(2), 1, (double[]){2, 3}, 0);
}

/* ---- mean -------------------------------------------------------------------------- */

static void test_mean(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  tu_expect(RED(lt_mean, a, false, 0), LT_F32, SHAPE(3), 1, (double[]){2.5, 3.5, 4.5}, 1e-6);
  tu_expect(RED(lt_mean, a, true, 1), LT_F32, SHAPE(2, 1), 2, (double[]){2, 5}, 1e-6);
  tu_expect(lt_mean(a, NULL, 0, false), LT_F32, NULL, 0, (double[]){3.5}, 1e-6);
  lt_tensor *x = iota234(LT_F64);
  /* (32 j + 60) / 8 */
  tu_expect(RED(lt_mean, x, false, 0, 2), LT_F64, SHAPE(3), 1, (double[]){7.5, 11.5, 15.5}, 1e-12);
  tu_expect(RED(lt_mean, x, true, 0, -1), LT_F64, SHAPE(1, 3, 1), 3, (double[]){7.5, 11.5, 15.5},
            1e-12);
}

/* ---- max / min --------------------------------------------------------------------- */

static void test_max_min_2d(void **state) {
  (void)state;
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, kB);
  tu_expect(RED(lt_max, b, false, 0), LT_F32, SHAPE(3), 1, (double[]){3, 5, 2}, 0);
  tu_expect(RED(lt_max, b, false, 1), LT_F32, SHAPE(2), 1, (double[]){3, 5}, 0);
  tu_expect(RED(lt_max, b, true, 1), LT_F32, SHAPE(2, 1), 2, (double[]){3, 5}, 0);
  tu_expect(lt_max(b, NULL, 0, false), LT_F32, NULL, 0, (double[]){5}, 0);
  tu_expect(RED(lt_min, b, false, 0), LT_F32, SHAPE(3), 1, (double[]){0, -1, -4}, 0);
  tu_expect(RED(lt_min, b, true, 0), LT_F32, SHAPE(1, 3), 2, (double[]){0, -1, -4}, 0);
  tu_expect(RED(lt_min, b, false, -1), LT_F32, SHAPE(2), 1, (double[]){-1, -4}, 0);
  tu_expect(lt_min(b, NULL, 0, true), LT_F32, SHAPE(1, 1), 2, (double[]){-4}, 0);
}

static void test_max_min_3d_dtypes(void **state) {
  (void)state;
  /* over i, k: max 12 + 4 j + 3, min 4 j */
  tu_expect(RED(lt_max, iota234(LT_I32), false, 0, 2), LT_I32, SHAPE(3), 1, (double[]){15, 19, 23},
            0);
  tu_expect(RED(lt_min, iota234(LT_I64), true, 0, 2), LT_I64, SHAPE(1, 3, 1), 3,
            (double[]){0, 4, 8}, 0);
  tu_expect(RED(lt_max, iota234(LT_F64), false, 2, 0), LT_F64, SHAPE(3), 1, (double[]){15, 19, 23},
            0);
  lt_tensor *i = tu_i64(SHAPE(3), 1, (int64_t[]){INT64_MIN, -7, INT64_MAX});
  tu_expect(lt_max(i, NULL, 0, false), LT_I64, NULL, 0, (double[]){(double)INT64_MAX}, 0);
  tu_expect(lt_min(i, NULL, 0, false), LT_I64, NULL, 0, (double[]){(double)INT64_MIN}, 0);
  lt_tensor *bo = tu_bool(SHAPE(2, 2), 2, (uint8_t[]){0, 1, 0, 0});
  tu_expect(RED(lt_max, bo, false, 1), LT_BOOL, SHAPE(2), 1, (double[]){1, 0}, 0);
  tu_expect(RED(lt_min, bo, false, 0), LT_BOOL, SHAPE(2), 1, (double[]){0, 0}, 0);
}

static void test_max_min_nan_inf(void **state) {
  (void)state;
  lt_tensor *t = tu_f32(SHAPE(2, 3), 2, (float[]){1, NAN, 5, -INFINITY, INFINITY, 0});
  tu_expect(RED(lt_max, t, false, 1), LT_F32, SHAPE(2), 1, (double[]){NAN, INFINITY}, 0);
  tu_expect(RED(lt_min, t, false, 1), LT_F32, SHAPE(2), 1, (double[]){NAN, -INFINITY}, 0);
  tu_expect(RED(lt_max, t, false, 0), LT_F32, SHAPE(3), 1, (double[]){1, NAN, 5}, 0);
}

/* ---- prod -------------------------------------------------------------------------- */

static void test_prod(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  tu_expect(RED(lt_prod, a, false, 0), LT_F32, SHAPE(3), 1, (double[]){4, 10, 18}, 1e-6);
  tu_expect(RED(lt_prod, a, true, 1), LT_F32, SHAPE(2, 1), 2, (double[]){6, 120}, 1e-6);
  tu_expect(lt_prod(a, NULL, 0, false), LT_F32, NULL, 0, (double[]){720}, 1e-6);
  tu_expect(RED(lt_prod, tu_i32(SHAPE(2, 2), 2, (int32_t[]){-3, 2, 100000, 100000}), false, 1),
            LT_I64, SHAPE(2), 1, (double[]){-6, 1e10}, 0);
  tu_expect(RED(lt_prod, tu_bool(SHAPE(2, 2), 2, (uint8_t[]){1, 1, 1, 0}), false, 1), LT_I64,
            SHAPE(2), 1, (double[]){1, 0}, 0);
  /* over i, k of [2, 3, 4] + 1 in f64: j = 0: (1*2*3*4)(13*14*15*16) */
  lt_tensor *x = iota234(LT_F64);
  lt_tensor *x1 = lt_add(x, lt_scalar(CPU0, LT_F64, 1));
  double want[3];
  for (int j = 0; j < 3; j++) {
    want[j] = 1;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) want[j] *= 12 * i + 4 * j + k + 1;
  }
  tu_expect(RED(lt_prod, x1, false, 0, 2), LT_F64, SHAPE(3), 1, want, 1e-12);
}

/* ---- logsumexp --------------------------------------------------------------------- */

static void test_logsumexp(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  tu_expect(RED(lt_logsumexp, a, false, 1), LT_F32, SHAPE(2), 1,
            (double[]){lse((double[]){1, 2, 3}, 3), lse((double[]){4, 5, 6}, 3)}, 1e-6);
  tu_expect(
      RED(lt_logsumexp, a, true, 0), LT_F32, SHAPE(1, 3), 2,
      (double[]){lse((double[]){1, 4}, 2), lse((double[]){2, 5}, 2), lse((double[]){3, 6}, 2)},
      1e-6);
  tu_expect(lt_logsumexp(a, NULL, 0, false), LT_F32, NULL, 0,
            (double[]){lse((double[]){1, 2, 3, 4, 5, 6}, 6)}, 1e-6);
  /* stable: a naive exp(1000) overflows */
  lt_tensor *big = tu_f64(SHAPE(2), 1, (double[]){1000, 1000});
  tu_expect(RED(lt_logsumexp, big, false, 0), LT_F64, NULL, 0, (double[]){1000 + log(2.0)}, 1e-12);
  lt_tensor *small = tu_f64(SHAPE(2), 1, (double[]){-1000, -1000});
  tu_expect(RED(lt_logsumexp, small, false, 0), LT_F64, NULL, 0, (double[]){-1000 + log(2.0)},
            1e-12);
  /* rows: all -inf -> -inf; -inf and 0 -> 0; +inf -> +inf; NaN -> NaN */
  lt_tensor *t =
      tu_f32(SHAPE(4, 2), 2, (float[]){-INFINITY, -INFINITY, -INFINITY, 0, INFINITY, 1, NAN, 1});
  tu_expect(RED(lt_logsumexp, t, false, 1), LT_F32, SHAPE(4), 1,
            (double[]){-INFINITY, 0, INFINITY, NAN}, 1e-6);
  /* [2, 3, 4] over {0, 2} */
  lt_tensor *x = iota234(LT_F64);
  double want[3];
  for (int j = 0; j < 3; j++) {
    double v[8];
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) v[i * 4 + k] = 12 * i + 4 * j + k;
    want[j] = lse(v, 8);
  }
  tu_expect(RED(lt_logsumexp, x, false, 0, 2), LT_F64, SHAPE(3), 1, want, 1e-12);
  /* ints and bools give f32 */
  tu_expect(RED(lt_logsumexp, tu_i32(SHAPE(2), 1, (int32_t[]){0, 0}), false, 0), LT_F32, NULL, 0,
            (double[]){log(2.0)}, 1e-6);
  tu_expect(lt_logsumexp(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), NULL, 0, false), LT_F32, NULL, 0,
            (double[]){log(exp(1.0) + 1)}, 1e-6);
}

/* ---- argmax / argmin --------------------------------------------------------------- */

static void test_argmax_argmin(void **state) {
  (void)state;
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, kB);
  tu_expect(lt_argmax(b, 0, false), LT_I64, SHAPE(3), 1, (double[]){0, 1, 0}, 0);
  tu_expect(lt_argmax(b, 1, false), LT_I64, SHAPE(2), 1, (double[]){0, 1}, 0);
  tu_expect(lt_argmax(b, -1, true), LT_I64, SHAPE(2, 1), 2, (double[]){0, 1}, 0);
  tu_expect(lt_argmin(b, 0, true), LT_I64, SHAPE(1, 3), 2, (double[]){1, 0, 1}, 0);
  tu_expect(lt_argmin(b, 1, false), LT_I64, SHAPE(2), 1, (double[]){1, 2}, 0);
  /* [2, 3, 4] along axis 1: the last j is largest, the first smallest */
  tu_expect(lt_argmax(iota234(LT_F32), 1, false), LT_I64, SHAPE(2, 4), 2,
            (double[]){2, 2, 2, 2, 2, 2, 2, 2}, 0);
  tu_expect(lt_argmin(iota234(LT_I64), -2, true), LT_I64, SHAPE(2, 1, 4), 3,
            (double[]){0, 0, 0, 0, 0, 0, 0, 0}, 0);
}

static void test_argmax_ties_nan_dtypes(void **state) {
  (void)state;
  /* first occurrence wins */
  lt_tensor *t = tu_f64(SHAPE(4), 1, (double[]){1, 3, 3, 1});
  tu_expect(lt_argmax(t, 0, false), LT_I64, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_argmin(t, 0, false), LT_I64, NULL, 0, (double[]){0}, 0);
  /* NaN is the extreme both ways; the first NaN wins */
  lt_tensor *n = tu_f32(SHAPE(2, 4), 2, (float[]){1, NAN, 5, NAN, 7, 2, 9, NAN});
  tu_expect(lt_argmax(n, 1, false), LT_I64, SHAPE(2), 1, (double[]){1, 3}, 0);
  tu_expect(lt_argmin(n, 1, false), LT_I64, SHAPE(2), 1, (double[]){1, 3}, 0);
  tu_expect(lt_argmax(tu_f32(SHAPE(2), 1, (float[]){NAN, 1}), 0, false), LT_I64, NULL, 0,
            (double[]){0}, 0);
  /* -inf / +inf */
  lt_tensor *inf = tu_f32(SHAPE(3), 1, (float[]){-INFINITY, INFINITY, 0});
  tu_expect(lt_argmax(inf, 0, false), LT_I64, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_argmin(inf, 0, false), LT_I64, NULL, 0, (double[]){0}, 0);
  /* integer and bool operands */
  lt_tensor *i = tu_i32(SHAPE(2, 3), 2, (int32_t[]){-5, 9, 9, 4, 4, -8});
  tu_expect(lt_argmax(i, 1, false), LT_I64, SHAPE(2), 1, (double[]){1, 0}, 0);
  tu_expect(lt_argmin(i, 1, false), LT_I64, SHAPE(2), 1, (double[]){0, 2}, 0);
  lt_tensor *l = tu_i64(SHAPE(3), 1, (int64_t[]){INT64_MAX, INT64_MIN, 0});
  tu_expect(lt_argmax(l, 0, false), LT_I64, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_argmin(l, 0, false), LT_I64, NULL, 0, (double[]){1}, 0);
  lt_tensor *bo = tu_bool(SHAPE(3), 1, (uint8_t[]){0, 1, 1});
  tu_expect(lt_argmax(bo, 0, false), LT_I64, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_argmin(bo, 0, false), LT_I64, NULL, 0, (double[]){0}, 0);
}

/* ---- softmax / log_softmax --------------------------------------------------------- */

static void test_softmax(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  double s1 = exp(1) + exp(2) + exp(3), s2 = exp(4) + exp(5) + exp(6);
  double want1[] = {exp(1) / s1, exp(2) / s1, exp(3) / s1, exp(4) / s2, exp(5) / s2, exp(6) / s2};
  tu_expect(lt_softmax(a, 1), LT_F32, SHAPE(2, 3), 2, want1, 1e-6);
  tu_expect(lt_softmax(a, -1), LT_F32, SHAPE(2, 3), 2, want1, 1e-6);
  /* along axis 0 each column is softmax(x, x + 3) */
  double p = 1 / (1 + exp(3));
  tu_expect(lt_softmax(a, 0), LT_F32, SHAPE(2, 3), 2, (double[]){p, p, p, 1 - p, 1 - p, 1 - p},
            1e-6);
  double want_log[6];
  for (int i = 0; i < 6; i++) want_log[i] = log(want1[i]);
  tu_expect(lt_log_softmax(a, 1), LT_F32, SHAPE(2, 3), 2, want_log, 1e-6);
  tu_expect(lt_log_softmax(a, 0), LT_F32, SHAPE(2, 3), 2,
            (double[]){log(p), log(p), log(p), log(1 - p), log(1 - p), log(1 - p)}, 1e-6);
  /* [2, 3, 4] along axis 1: entries 4 apart, the same for every (i, k) */
  double z = 1 + exp(4) + exp(8), want3[24];
  for (int i = 0; i < 24; i++) want3[i] = exp(4 * ((i / 4) % 3)) / z;
  tu_expect(lt_softmax(iota234(LT_F64), 1), LT_F64, SHAPE(2, 3, 4), 3, want3, 1e-12);
}

static void test_softmax_stable_and_dtypes(void **state) {
  (void)state;
  /* exp(1000) overflows without the max shift */
  lt_tensor *big = tu_f64(SHAPE(3), 1, (double[]){1000, 1000, -INFINITY});
  tu_expect(lt_softmax(big, 0), LT_F64, SHAPE(3), 1, (double[]){0.5, 0.5, 0}, 1e-12);
  tu_expect(lt_log_softmax(big, 0), LT_F64, SHAPE(3), 1,
            (double[]){-log(2.0), -log(2.0), -INFINITY}, 1e-12);
  lt_tensor *small = tu_f32(SHAPE(2), 1, (float[]){-1000, -1000});
  tu_expect(lt_log_softmax(small, 0), LT_F32, SHAPE(2), 1, (double[]){-log(2.0), -log(2.0)}, 1e-6);
  /* ints and bools give f32 */
  tu_expect(lt_softmax(tu_i32(SHAPE(2), 1, (int32_t[]){5, 5}), 0), LT_F32, SHAPE(2), 1,
            (double[]){0.5, 0.5}, 1e-6);
  tu_expect(lt_log_softmax(tu_i64(SHAPE(2), 1, (int64_t[]){0, 0}), 0), LT_F32, SHAPE(2), 1,
            (double[]){-log(2.0), -log(2.0)}, 1e-6);
  double q = 1 / (1 + exp(-1.0));
  tu_expect(lt_softmax(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), 0), LT_F32, SHAPE(2), 1,
            (double[]){q, 1 - q}, 1e-6);
}

/* ---- 0-d operands: reducing the implicit axis gives the value itself --------------- */

static void test_zero_dim(void **state) {
  (void)state;
  lt_tensor *s = tu_f32(NULL, 0, (float[]){2.5f});
  const double v[] = {2.5};
  tu_expect(lt_sum(s, NULL, 0, false), LT_F32, NULL, 0, v, 0);
  tu_expect(lt_sum(s, NULL, 0, true), LT_F32, NULL, 0, v, 0);
  tu_expect(RED(lt_sum, s, false, 0), LT_F32, NULL, 0, v, 0);
  tu_expect(RED(lt_sum, s, true, -1), LT_F32, NULL, 0, v, 0);
  tu_expect(RED(lt_mean, s, false, 0), LT_F32, NULL, 0, v, 0);
  tu_expect(lt_max(s, NULL, 0, false), LT_F32, NULL, 0, v, 0);
  tu_expect(RED(lt_min, s, true, -1), LT_F32, NULL, 0, v, 0);
  tu_expect(lt_prod(s, NULL, 0, false), LT_F32, NULL, 0, v, 0);
  tu_expect(lt_logsumexp(s, NULL, 0, false), LT_F32, NULL, 0, v, 1e-6);
  tu_expect(lt_argmax(s, 0, false), LT_I64, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_argmin(s, -1, true), LT_I64, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_softmax(s, 0), LT_F32, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_log_softmax(s, -1), LT_F32, NULL, 0, (double[]){0}, 0);
  /* dtype rules still apply */
  lt_tensor *i = tu_i32(NULL, 0, (int32_t[]){7});
  tu_expect(lt_sum(i, NULL, 0, false), LT_I64, NULL, 0, (double[]){7}, 0);
  tu_expect(lt_max(i, NULL, 0, false), LT_I32, NULL, 0, (double[]){7}, 0);
  tu_expect(lt_softmax(i, 0), LT_F32, NULL, 0, (double[]){1}, 0);
  /* constants (lt_scalar of 0 and 1 are IR constants) */
  tu_expect(lt_sum(lt_scalar(CPU0, LT_F64, 1), NULL, 0, false), LT_F64, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_logsumexp(lt_scalar(CPU0, LT_F64, 0), NULL, 0, false), LT_F64, NULL, 0,
            (double[]){0}, 0);
}

/* ---- empty tensors ------------------------------------------------------------------ */

static void test_empty(void **state) {
  (void)state;
  float dummy = 0;
  lt_tensor *e = tu_f32(SHAPE(0, 3), 2, &dummy);
  tu_expect(RED(lt_sum, e, false, 0), LT_F32, SHAPE(3), 1, (double[]){0, 0, 0}, 0);
  tu_expect(RED(lt_prod, e, true, 0), LT_F32, SHAPE(1, 3), 2, (double[]){1, 1, 1}, 0);
  tu_expect(RED(lt_mean, e, false, 0), LT_F32, SHAPE(3), 1, (double[]){NAN, NAN, NAN}, 0);
  tu_expect(RED(lt_logsumexp, e, false, 0), LT_F32, SHAPE(3), 1,
            (double[]){-INFINITY, -INFINITY, -INFINITY}, 0);
  tu_expect(lt_sum(e, NULL, 0, false), LT_F32, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_prod(e, NULL, 0, false), LT_F32, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_mean(e, NULL, 0, false), LT_F32, NULL, 0, (double[]){NAN}, 0);
  tu_expect(lt_sum(lt_cast(e, LT_I32), NULL, 0, false), LT_I64, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_prod(lt_cast(e, LT_BOOL), NULL, 0, false), LT_I64, NULL, 0, (double[]){1}, 0);
  /* reducing the non-empty axis leaves an empty result */
  tu_expect(RED(lt_sum, e, false, 1), LT_F32, SHAPE(0), 1, NULL, 0);
  tu_expect(RED(lt_max, e, true, 1), LT_F32, SHAPE(0, 1), 2, NULL, 0);
  tu_expect(RED(lt_min, e, false, -1), LT_F32, SHAPE(0), 1, NULL, 0);
  tu_expect(lt_argmax(e, 1, false), LT_I64, SHAPE(0), 1, NULL, 0);
  tu_expect(lt_softmax(e, 0), LT_F32, SHAPE(0, 3), 2, NULL, 0);
  tu_expect(lt_log_softmax(e, 1), LT_F32, SHAPE(0, 3), 2, NULL, 0);
}

/* ---- errors --------------------------------------------------------------------------- */

static void test_errors_axes(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  TU_EXPECT_ERROR(RED(lt_sum, a, false, 2), LT_EINVAL, "lt_sum: axis 2 out of range");
  TU_EXPECT_ERROR(RED(lt_sum, a, false, 2), LT_EINVAL, "rank 2");
  TU_EXPECT_ERROR(RED(lt_max, a, false, -3), LT_EINVAL, "lt_max: axis -3");
  TU_EXPECT_ERROR(RED(lt_logsumexp, a, true, 0, 5), LT_EINVAL, "lt_logsumexp");
  TU_EXPECT_ERROR(lt_argmax(a, 2, false), LT_EINVAL, "lt_argmax: axis 2 out of range");
  TU_EXPECT_ERROR(lt_argmin(a, -3, false), LT_EINVAL, "rank 2");
  TU_EXPECT_ERROR(lt_softmax(a, 7), LT_EINVAL, "lt_softmax: axis 7");
  TU_EXPECT_ERROR(lt_log_softmax(a, -4), LT_EINVAL, "lt_log_softmax");
  /* duplicates, also when spelled differently */
  TU_EXPECT_ERROR(RED(lt_sum, a, false, 1, 1), LT_EINVAL, "lt_sum: axis 1 appears more than once");
  TU_EXPECT_ERROR(RED(lt_prod, a, false, 0, 1, -1), LT_EINVAL, "lt_prod: axis -1 appears");
  TU_EXPECT_ERROR(RED(lt_mean, a, false, 0, -2), LT_EINVAL, "more than once");
  /* bad axes arguments */
  TU_EXPECT_ERROR(lt_sum(a, NULL, 1, false), LT_EINVAL, "lt_sum: bad axes");
  TU_EXPECT_ERROR(lt_min(a, AXES(0), -1, false), LT_EINVAL, "lt_min: bad axes");
  /* 0-d: only 0 and -1, once */
  lt_tensor *s = tu_f32(NULL, 0, (float[]){1});
  TU_EXPECT_ERROR(RED(lt_sum, s, false, 1), LT_EINVAL, "lt_sum: axis 1 out of range");
  TU_EXPECT_ERROR(RED(lt_sum, s, false, 1), LT_EINVAL, "rank 0");
  TU_EXPECT_ERROR(RED(lt_sum, s, false, 0, -1), LT_EINVAL, "appears more than once");
  TU_EXPECT_ERROR(lt_argmax(s, -2, false), LT_EINVAL, "lt_argmax: axis -2");
  TU_EXPECT_ERROR(lt_softmax(s, 1), LT_EINVAL, "rank 0");
}

static void test_errors_dtype_shape_null(void **state) {
  (void)state;
  TU_EXPECT_ERROR(lt_mean(tu_i32(SHAPE(2), 1, (int32_t[]){1, 2}), NULL, 0, false), LT_EDTYPE,
                  "lt_mean: needs a floating dtype, got i32");
  TU_EXPECT_ERROR(lt_mean(tu_i64(SHAPE(2), 1, (int64_t[]){1, 2}), NULL, 0, false), LT_EDTYPE,
                  "got i64");
  TU_EXPECT_ERROR(lt_mean(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), AXES(0), 1, true), LT_EDTYPE,
                  "got bool");
  /* no extreme of nothing */
  float dummy = 0;
  lt_tensor *e = tu_f32(SHAPE(2, 0), 2, &dummy);
  TU_EXPECT_ERROR(lt_argmax(e, 1, false), LT_ESHAPE,
                  "lt_argmax: cannot reduce over axis 1 of size 0");
  TU_EXPECT_ERROR(lt_argmin(e, -1, true), LT_ESHAPE, "[2, 0]");
  TU_EXPECT_ERROR(RED(lt_max, e, false, 1), LT_ESHAPE, "lt_max: cannot reduce over axis 1");
  TU_EXPECT_ERROR(RED(lt_min, e, true, 0, 1), LT_ESHAPE, "lt_min");
  TU_EXPECT_ERROR(lt_max(e, NULL, 0, false), LT_ESHAPE, "size 0");
  /* NULL operands */
  TU_EXPECT_ERROR(lt_sum(NULL, NULL, 0, false), LT_EINVAL, "lt_sum: operand is NULL");
  TU_EXPECT_ERROR(lt_mean(NULL, NULL, 0, false), LT_EINVAL, "lt_mean");
  TU_EXPECT_ERROR(lt_max(NULL, NULL, 0, false), LT_EINVAL, "lt_max");
  TU_EXPECT_ERROR(lt_min(NULL, NULL, 0, false), LT_EINVAL, "lt_min");
  TU_EXPECT_ERROR(lt_prod(NULL, NULL, 0, false), LT_EINVAL, "lt_prod");
  TU_EXPECT_ERROR(lt_logsumexp(NULL, NULL, 0, false), LT_EINVAL, "lt_logsumexp");
  TU_EXPECT_ERROR(lt_argmax(NULL, 0, false), LT_EINVAL, "lt_argmax");
  TU_EXPECT_ERROR(lt_argmin(NULL, 0, false), LT_EINVAL, "lt_argmin");
  TU_EXPECT_ERROR(lt_softmax(NULL, 0), LT_EINVAL, "lt_softmax");
  TU_EXPECT_ERROR(lt_log_softmax(NULL, 0), LT_EINVAL, "lt_log_softmax");
  /* a chain keeps the first error */
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA);
  lt_clear_error();
  lt_tensor *r = lt_softmax(RED(lt_sum, a, false, 9), 0);
  assert_null(r);
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_sum: axis 9"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_sum_2d),
      TU_TEST(test_sum_3d),
      TU_TEST(test_sum_dtypes),
      TU_TEST(test_mean),
      TU_TEST(test_max_min_2d),
      TU_TEST(test_max_min_3d_dtypes),
      TU_TEST(test_max_min_nan_inf),
      TU_TEST(test_prod),
      TU_TEST(test_logsumexp),
      TU_TEST(test_argmax_argmin),
      TU_TEST(test_argmax_ties_nan_dtypes),
      TU_TEST(test_softmax),
      TU_TEST(test_softmax_stable_and_dtypes),
      TU_TEST(test_zero_dim),
      TU_TEST(test_empty),
      TU_TEST(test_errors_axes),
      TU_TEST(test_errors_dtype_shape_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
