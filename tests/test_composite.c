/* The composite ops (src/ops/op_composite.c, op_split.c) against hand-computed
 * values and torch's documented semantics (the torch docs' own examples where
 * they have one): dtypes, edge values, empty shapes, negative axes and bad
 * input. Each value test runs on ref and on cpu (BOTH): composites are graphs
 * of existing ops, and both backends must give the same exact answers. */
#include "test_util.h"
#include "test_backends.h"

static lt_tensor *range_f64(const int64_t *shape, int nd, double start) {
  double v[64];
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  for (int64_t i = 0; i < n; i++) v[i] = start + (double)i;
  return tu_f64(shape, nd, v);
}

/* ---- isnan / isinf / isfinite ---------------------------------------------------- */

TU_BOTH(test_classify) {
  lt_tensor *x = tu_f32(SHAPE(6), 1, (float[]){1, NAN, INFINITY, -INFINITY, 0, -0.0f});
  tu_expect(lt_isnan(x), LT_BOOL, SHAPE(6), 1, (double[]){0, 1, 0, 0, 0, 0}, 0);
  tu_expect(lt_isinf(x), LT_BOOL, SHAPE(6), 1, (double[]){0, 0, 1, 1, 0, 0}, 0);
  tu_expect(lt_isfinite(x), LT_BOOL, SHAPE(6), 1, (double[]){1, 0, 0, 0, 1, 1}, 0);
  lt_tensor *d = tu_f64(SHAPE(2), 1, (double[]){-INFINITY, 5e-324});
  tu_expect(lt_isfinite(d), LT_BOOL, SHAPE(2), 1, (double[]){0, 1}, 0);
  /* integers and bools: never NaN or inf */
  lt_tensor *i = tu_i64(SHAPE(2, 1), 2, (int64_t[]){INT64_MIN, 3});
  tu_expect(lt_isnan(i), LT_BOOL, SHAPE(2, 1), 2, (double[]){0, 0}, 0);
  tu_expect(lt_isinf(i), LT_BOOL, SHAPE(2, 1), 2, (double[]){0, 0}, 0);
  tu_expect(lt_isfinite(tu_bool(SHAPE(1), 1, (uint8_t[]){0})), LT_BOOL, SHAPE(1), 1, (double[]){1},
            0);
  /* empty and 0-d */
  tu_expect(lt_isnan(lt_zeros(CPU0, LT_F32, SHAPE(0, 3), 2)), LT_BOOL, SHAPE(0, 3), 2, NULL, 0);
  tu_expect(lt_isnan(tu_f64(NULL, 0, (double[]){NAN})), LT_BOOL, NULL, 0, (double[]){1}, 0);
}

/* ---- any / all ---------------------------------------------------------------------- */

TU_BOTH(test_any_all) {
  lt_tensor *x = tu_f32(SHAPE(2, 3), 2, (float[]){0, 0, 0, 0, NAN, 2});
  tu_expect(lt_any(x, NULL, 0, false), LT_BOOL, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_all(x, NULL, 0, false), LT_BOOL, NULL, 0, (double[]){0}, 0);
  /* NaN is non-zero */
  tu_expect(lt_any(x, (int[]){1}, 1, false), LT_BOOL, SHAPE(2), 1, (double[]){0, 1}, 0);
  tu_expect(lt_all(x, (int[]){-2}, 1, true), LT_BOOL, SHAPE(1, 3), 2, (double[]){0, 0, 0}, 0);
  lt_tensor *y = tu_i32(SHAPE(2, 2), 2, (int32_t[]){1, -1, 0, 5});
  tu_expect(lt_all(y, (int[]){1}, 1, false), LT_BOOL, SHAPE(2), 1, (double[]){1, 0}, 0);
  tu_expect(lt_any(y, (int[]){0, 1}, 2, true), LT_BOOL, SHAPE(1, 1), 2, (double[]){1}, 0);
  lt_tensor *b = tu_bool(SHAPE(3), 1, (uint8_t[]){1, 1, 1});
  tu_expect(lt_all(b, NULL, 0, false), LT_BOOL, NULL, 0, (double[]){1}, 0);
  /* torch: u8 in, u8 out */
  lt_tensor *u = lt_cast(tu_i32(SHAPE(2), 1, (int32_t[]){0, 200}), LT_U8);
  tu_expect(lt_any(u, NULL, 0, false), LT_U8, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_all(u, NULL, 0, false), LT_U8, NULL, 0, (double[]){0}, 0);
  /* over nothing: any false, all true */
  lt_tensor *e = lt_zeros(CPU0, LT_F32, SHAPE(2, 0), 2);
  tu_expect(lt_any(e, (int[]){1}, 1, false), LT_BOOL, SHAPE(2), 1, (double[]){0, 0}, 0);
  tu_expect(lt_all(e, (int[]){1}, 1, false), LT_BOOL, SHAPE(2), 1, (double[]){1, 1}, 0);
  tu_expect(lt_all(e, (int[]){0}, 1, false), LT_BOOL, SHAPE(0), 1, NULL, 0);
  /* 0-d: axis 0 or -1 */
  lt_tensor *s = tu_f64(NULL, 0, (double[]){-0.0});
  tu_expect(lt_any(s, (int[]){-1}, 1, false), LT_BOOL, NULL, 0, (double[]){0}, 0);
}

/* ---- var / std ---------------------------------------------------------------------- */

TU_BOTH(test_var_std) {
  /* rows [1 2 3 4] and [2 4 6 8]: over all, mean 3.75 and sum of squared
   * deviations 37.5; per row 5 and 20; per column 0.5, 2, 4.5, 8 */
  lt_tensor *x = tu_f64(SHAPE(2, 4), 2, (double[]){1, 2, 3, 4, 2, 4, 6, 8});
  tu_expect(lt_var(x, NULL, 0, 1, false), LT_F64, NULL, 0, (double[]){37.5 / 7}, 1e-15);
  tu_expect(lt_var(x, NULL, 0, 0, false), LT_F64, NULL, 0, (double[]){37.5 / 8}, 1e-15);
  tu_expect(lt_var(x, (int[]){-1}, 1, 1, false), LT_F64, SHAPE(2), 1, (double[]){5.0 / 3, 20.0 / 3},
            1e-15);
  tu_expect(lt_std(x, (int[]){0}, 1, 0, true), LT_F64, SHAPE(1, 4), 2, (double[]){0.5, 1, 1.5, 2},
            1e-15);
  /* a fractional correction divides by N - correction */
  tu_expect(lt_var(x, (int[]){1}, 1, 2.5, false), LT_F64, SHAPE(2), 1,
            (double[]){5 / 1.5, 20 / 1.5}, 1e-15);
  lt_tensor *f = tu_f32(SHAPE(3), 1, (float[]){1, 2, 4});
  tu_expect(lt_std(f, NULL, 0, 1, false), LT_F32, NULL, 0, (double[]){1.5275252316519468}, 1e-6);
  /* N - correction <= 0 divides by 0: NaN (0 / 0), as torch; an empty group too */
  tu_expect(lt_var(tu_f64(NULL, 0, (double[]){3}), NULL, 0, 1, false), LT_F64, NULL, 0,
            (double[]){NAN}, 0);
  tu_expect(lt_var(tu_f64(SHAPE(2), 1, (double[]){1, 3}), NULL, 0, 3, false), LT_F64, NULL, 0,
            (double[]){INFINITY}, 0);
  tu_expect(lt_std(lt_zeros(CPU0, LT_F32, SHAPE(0, 2), 2), (int[]){0}, 1, 1, false), LT_F32,
            SHAPE(2), 1, (double[]){NAN, NAN}, 0);
  /* NaN and inf propagate */
  tu_expect(lt_var(tu_f64(SHAPE(2), 1, (double[]){1, INFINITY}), NULL, 0, 1, false), LT_F64, NULL,
            0, (double[]){NAN}, 0);
}

static void test_var_std_errors(void **state) {
  (void)state;
  lt_tensor *i = tu_i32(SHAPE(2), 1, (int32_t[]){1, 2});
  TU_EXPECT_ERROR(lt_var(i, NULL, 0, 1, false), LT_EDTYPE, "lt_var");
  TU_EXPECT_ERROR(lt_std(i, NULL, 0, 1, false), LT_EDTYPE, "lt_std");
  lt_tensor *x = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  TU_EXPECT_ERROR(lt_var(x, (int[]){2}, 1, 1, false), LT_EINVAL, "lt_var");
  TU_EXPECT_ERROR(lt_var(x, (int[]){1, -1}, 2, 1, false), LT_EINVAL, "more than once");
  TU_EXPECT_ERROR(lt_std(x, NULL, 0, NAN, false), LT_EINVAL, "correction");
  TU_EXPECT_ERROR(lt_var(NULL, NULL, 0, 1, false), LT_EINVAL, "lt_var");
}

/* ---- norm ------------------------------------------------------------------------------ */

TU_BOTH(test_norm) {
  lt_tensor *x = tu_f64(SHAPE(2), 1, (double[]){3, -4});
  tu_expect(lt_vector_norm(x, NULL, 0, 2, false), LT_F64, NULL, 0, (double[]){5}, 0);
  tu_expect(lt_vector_norm(x, NULL, 0, 1, false), LT_F64, NULL, 0, (double[]){7}, 0);
  tu_expect(lt_vector_norm(x, NULL, 0, INFINITY, false), LT_F64, NULL, 0, (double[]){4}, 0);
  tu_expect(lt_vector_norm(x, NULL, 0, -INFINITY, false), LT_F64, NULL, 0, (double[]){3}, 0);
  tu_expect(lt_vector_norm(x, NULL, 0, 0, false), LT_F64, NULL, 0, (double[]){2}, 0);
  tu_expect(lt_vector_norm(x, NULL, 0, 3, false), LT_F64, NULL, 0, (double[]){4.497941445275415},
            1e-14);
  tu_expect(lt_vector_norm(x, NULL, 0, -1, false), LT_F64, NULL, 0, (double[]){12.0 / 7}, 1e-14);
  /* zero elements: |0|^p is 0 (p > 0) or inf (p < 0) */
  lt_tensor *z = tu_f32(SHAPE(2), 1, (float[]){0, 2});
  tu_expect(lt_vector_norm(z, NULL, 0, -1, false), LT_F32, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_vector_norm(z, NULL, 0, 0.5, false), LT_F32, NULL, 0, (double[]){2}, 1e-6);
  tu_expect(lt_vector_norm(z, NULL, 0, 0, false), LT_F32, NULL, 0, (double[]){1}, 0);
  /* axes and keepdim: rows [3 4], [0 0], [1 -1] */
  lt_tensor *m = tu_f32(SHAPE(3, 2), 2, (float[]){3, 4, 0, 0, 1, -1});
  tu_expect(lt_vector_norm(m, (int[]){-1}, 1, 2, false), LT_F32, SHAPE(3), 1,
            (double[]){5, 0, 1.4142135623730951}, 1e-6);
  tu_expect(lt_vector_norm(m, (int[]){0}, 1, 1, true), LT_F32, SHAPE(1, 2), 2, (double[]){4, 5}, 0);
  /* empty: the p-norms are 0 (inf for p < 0) */
  lt_tensor *e = lt_zeros(CPU0, LT_F64, SHAPE(0), 1);
  tu_expect(lt_vector_norm(e, NULL, 0, 2, false), LT_F64, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_vector_norm(e, NULL, 0, -2, false), LT_F64, NULL, 0, (double[]){INFINITY}, 0);
  /* NaN propagates; an infinite element gives inf */
  tu_expect(lt_vector_norm(tu_f64(SHAPE(2), 1, (double[]){1, NAN}), NULL, 0, 2, false), LT_F64,
            NULL, 0, (double[]){NAN}, 0);
  tu_expect(lt_vector_norm(tu_f64(SHAPE(2), 1, (double[]){1, -INFINITY}), NULL, 0, 3, false),
            LT_F64, NULL, 0, (double[]){INFINITY}, 0);
  /* 0-d */
  tu_expect(lt_vector_norm(tu_f64(NULL, 0, (double[]){-2}), NULL, 0, 2, false), LT_F64, NULL, 0,
            (double[]){2}, 0);
}

static void test_norm_errors(void **state) {
  (void)state;
  TU_EXPECT_ERROR(lt_vector_norm(tu_i64(SHAPE(1), 1, (int64_t[]){1}), NULL, 0, 2, false), LT_EDTYPE,
                  "lt_vector_norm");
  lt_tensor *e = lt_zeros(CPU0, LT_F32, SHAPE(2, 0), 2);
  TU_EXPECT_ERROR(lt_vector_norm(e, (int[]){1}, 1, INFINITY, false), LT_ESHAPE, "empty");
  TU_EXPECT_ERROR(lt_vector_norm(e, NULL, 0, -INFINITY, false), LT_ESHAPE, "[2, 0]");
  /* the inf norm over a non-empty axis of an empty tensor is fine (empty) */
  tu_expect(lt_vector_norm(e, (int[]){0}, 1, INFINITY, false), LT_F32, SHAPE(0), 1, NULL, 0);
  TU_EXPECT_ERROR(lt_vector_norm(e, NULL, 0, NAN, false), LT_EINVAL, "ord");
  TU_EXPECT_ERROR(lt_vector_norm(e, (int[]){3}, 1, 2, false), LT_EINVAL, "lt_vector_norm");
}

/* ---- remainder / floor_divide ---------------------------------------------------------- */

TU_BOTH(test_int_remainder_floor_divide) {
  /* Python's % and //: the remainder takes the divisor's sign */
  int64_t av[] = {-7, 7, -7, 7, 0, 6, -6, 5, -5};
  int64_t bv[] = {2, 2, -2, -2, 3, 3, 3, 0, 0};
  lt_tensor *a = tu_i64(SHAPE(9), 1, av), *b = tu_i64(SHAPE(9), 1, bv);
  /* integer division by 0 gives 0 for both (numpy's answer) */
  tu_expect(lt_remainder(a, b), LT_I64, SHAPE(9), 1, (double[]){1, 1, -1, -1, 0, 0, 0, 0, 0}, 0);
  tu_expect(lt_floor_divide(a, b), LT_I64, SHAPE(9), 1, (double[]){-4, 3, 3, -4, 0, 2, -2, 0, 0},
            0);
  /* i32 with broadcasting against a 0-d divisor; INT32_MIN // -1 wraps */
  lt_tensor *c = tu_i32(SHAPE(3), 1, (int32_t[]){INT32_MIN, -1, 10});
  lt_tensor *m1 = tu_i32(NULL, 0, (int32_t[]){-1});
  tu_expect(lt_floor_divide(c, m1), LT_I32, SHAPE(3), 1, (double[]){INT32_MIN, 1, -10}, 0);
  tu_expect(lt_remainder(c, m1), LT_I32, SHAPE(3), 1, (double[]){0, 0, 0}, 0);
  lt_tensor *three = tu_i32(NULL, 0, (int32_t[]){-3});
  tu_expect(lt_remainder(c, three), LT_I32, SHAPE(3), 1, (double[]){-2, -1, -2}, 0);
  /* i64 beyond 2^53 stays exact */
  const int64_t big = ((int64_t)1 << 60) + 7;
  lt_tensor *r = lt_remainder(tu_i64(SHAPE(1), 1, (int64_t[]){big}),
                              tu_i64(SHAPE(1), 1, (int64_t[]){1 << 20}));
  int64_t got;
  assert_int_equal(lt_to_data(r, &got, sizeof got), LT_OK);
  assert_true(got == 7);
  /* u8: unsigned */
  lt_tensor *u = lt_cast(tu_i32(SHAPE(2), 1, (int32_t[]){250, 7}), LT_U8);
  lt_tensor *u7 = lt_cast(tu_i32(SHAPE(2), 1, (int32_t[]){7, 250}), LT_U8);
  tu_expect(lt_remainder(u, u7), LT_U8, SHAPE(2), 1, (double[]){5, 7}, 0);
  tu_expect(lt_floor_divide(u, u7), LT_U8, SHAPE(2), 1, (double[]){35, 0}, 0);
  /* promotion: int with float divides in float */
  tu_expect(lt_remainder(tu_i32(SHAPE(1), 1, (int32_t[]){7}), tu_f32(NULL, 0, (float[]){-2.5f})),
            LT_F32, SHAPE(1), 1, (double[]){-0.5}, 0);
}

TU_BOTH(test_float_remainder_floor_divide) {
  /* torch's (and Python's) values, exactly: 1 % 0.1 is 0.09999999999999995,
   * not the 0 of 1 - floor(1 / 0.1) * 0.1, and 1 // 0.1 is 9 */
  double av[] = {-7.5, 7.5, 5.3, 1, -1, 1e15, -0.5, 3, -3};
  double bv[] = {2, -2, 2, 0.1, 0.1, 3, 3, INFINITY, INFINITY};
  lt_tensor *a = tu_f64(SHAPE(9), 1, av), *b = tu_f64(SHAPE(9), 1, bv);
  tu_expect(lt_remainder(a, b), LT_F64, SHAPE(9), 1,
            (double[]){0.5, -0.5, 1.2999999999999998, 0.09999999999999995, 5.551115123125783e-17, 1,
                       2.5, 3, INFINITY},
            0);
  tu_expect(lt_floor_divide(a, b), LT_F64, SHAPE(9), 1,
            (double[]){-4, -4, 2, 9, -10, 333333333333333, -1, 0, -1}, 0);
  /* f32 computes in f32 with an exact fmod: 1 % 0.1f = 1 - 9 * 0.1f */
  lt_tensor *f = tu_f32(SHAPE(2), 1, (float[]){1, -2.75f});
  lt_tensor *g = tu_f32(SHAPE(2), 1, (float[]){0.1f, 0.5f});
  tu_expect(lt_remainder(f, g), LT_F32, SHAPE(2), 1, (double[]){0.09999998658895493, 0.25}, 0);
  tu_expect(lt_floor_divide(f, g), LT_F32, SHAPE(2), 1, (double[]){9, -6}, 0);
  /* b == 0: remainder NaN, floor_divide a / b; an infinite a: NaN */
  lt_tensor *s = tu_f64(SHAPE(4), 1, (double[]){1, -1, 0, INFINITY});
  lt_tensor *z = tu_f64(SHAPE(4), 1, (double[]){0, 0, 0, 2});
  tu_expect(lt_remainder(s, z), LT_F64, SHAPE(4), 1, (double[]){NAN, NAN, NAN, NAN}, 0);
  tu_expect(lt_floor_divide(s, z), LT_F64, SHAPE(4), 1, (double[]){INFINITY, -INFINITY, NAN, NAN},
            0);
  /* NaN in, NaN out */
  tu_expect(lt_remainder(tu_f32(SHAPE(1), 1, (float[]){NAN}), tu_f32(NULL, 0, (float[]){2})),
            LT_F32, SHAPE(1), 1, (double[]){NAN}, 0);
  /* a zero quotient keeps the sign of a / b: 0 // -3 is -0.0 (Python too) */
  double q[2];
  lt_tensor *zq = lt_floor_divide(tu_f64(SHAPE(2), 1, (double[]){0.0, 0.5}),
                                  tu_f64(SHAPE(2), 1, (double[]){-3, 3}));
  assert_int_equal(lt_to_data(zq, q, sizeof q), LT_OK);
  assert_true(q[0] == 0 && signbit(q[0]));
  assert_true(q[1] == 0 && !signbit(q[1]));
  /* empty */
  tu_expect(lt_remainder(lt_zeros(CPU0, LT_F32, SHAPE(0), 1), tu_f32(NULL, 0, (float[]){2})),
            LT_F32, SHAPE(0), 1, NULL, 0);
}

static void test_remainder_errors(void **state) {
  (void)state;
  lt_tensor *b = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  TU_EXPECT_ERROR(lt_remainder(b, b), LT_EDTYPE, "lt_remainder");
  TU_EXPECT_ERROR(lt_floor_divide(b, b), LT_EDTYPE, "bool");
  lt_tensor *x = tu_f32(SHAPE(2), 1, (float[]){1, 2});
  lt_tensor *y = tu_f32(SHAPE(3), 1, (float[]){1, 2, 3});
  TU_EXPECT_ERROR(lt_remainder(x, y), LT_ESHAPE, "lt_remainder");
  TU_EXPECT_ERROR(lt_floor_divide(x, NULL), LT_EINVAL, "lt_floor_divide");
}

/* ---- flip / roll / repeat ---------------------------------------------------------------- */

TU_BOTH(test_flip) {
  lt_tensor *x = range_f64(SHAPE(2, 3), 2, 0); /* [[0 1 2] [3 4 5]] */
  tu_expect(lt_flip(x, (int[]){0}, 1), LT_F64, SHAPE(2, 3), 2, (double[]){3, 4, 5, 0, 1, 2}, 0);
  tu_expect(lt_flip(x, (int[]){-1}, 1), LT_F64, SHAPE(2, 3), 2, (double[]){2, 1, 0, 5, 4, 3}, 0);
  tu_expect(lt_flip(x, (int[]){1, 0}, 2), LT_F64, SHAPE(2, 3), 2, (double[]){5, 4, 3, 2, 1, 0}, 0);
  tu_expect(lt_flip(x, NULL, 0), LT_F64, SHAPE(2, 3), 2, (double[]){0, 1, 2, 3, 4, 5}, 0);
  /* torch docs: flip(arange(8).view(2, 2, 2), [0, 1]) */
  lt_tensor *t = lt_cast(range_f64(SHAPE(2, 2, 2), 3, 0), LT_I64);
  tu_expect(lt_flip(t, (int[]){0, 1}, 2), LT_I64, SHAPE(2, 2, 2), 3,
            (double[]){6, 7, 4, 5, 2, 3, 0, 1}, 0);
  tu_expect(lt_flip(tu_bool(SHAPE(3), 1, (uint8_t[]){1, 0, 0}), (int[]){0}, 1), LT_BOOL, SHAPE(3),
            1, (double[]){0, 0, 1}, 0);
  /* 0-d, size-1 and empty axes */
  tu_expect(lt_flip(tu_f32(NULL, 0, (float[]){7}), (int[]){0}, 1), LT_F32, NULL, 0, (double[]){7},
            0);
  tu_expect(lt_flip(lt_zeros(CPU0, LT_F32, SHAPE(1, 0), 2), (int[]){0, 1}, 2), LT_F32, SHAPE(1, 0),
            2, NULL, 0);
}

TU_BOTH(test_roll) {
  /* torch docs: x = [1..8].view(4, 2) */
  lt_tensor *x = range_f64(SHAPE(4, 2), 2, 1);
  tu_expect(lt_roll(x, (int64_t[]){1}, 1, NULL, 0), LT_F64, SHAPE(4, 2), 2,
            (double[]){8, 1, 2, 3, 4, 5, 6, 7}, 0);
  tu_expect(lt_roll(x, (int64_t[]){1}, 1, (int[]){0}, 1), LT_F64, SHAPE(4, 2), 2,
            (double[]){7, 8, 1, 2, 3, 4, 5, 6}, 0);
  tu_expect(lt_roll(x, (int64_t[]){-1}, 1, (int[]){0}, 1), LT_F64, SHAPE(4, 2), 2,
            (double[]){3, 4, 5, 6, 7, 8, 1, 2}, 0);
  tu_expect(lt_roll(x, (int64_t[]){2, 1}, 2, (int[]){0, 1}, 2), LT_F64, SHAPE(4, 2), 2,
            (double[]){6, 5, 8, 7, 2, 1, 4, 3}, 0);
  /* shifts beyond the size wrap; an axis twice adds up; a full turn is the identity */
  tu_expect(lt_roll(x, (int64_t[]){-9, 4}, 2, (int[]){-2, 0}, 2), LT_F64, SHAPE(4, 2), 2,
            (double[]){3, 4, 5, 6, 7, 8, 1, 2}, 0);
  tu_expect(lt_roll(x, (int64_t[]){8}, 1, NULL, 0), LT_F64, SHAPE(4, 2), 2,
            (double[]){1, 2, 3, 4, 5, 6, 7, 8}, 0);
  lt_tensor *i = tu_i32(SHAPE(3), 1, (int32_t[]){1, 2, 3});
  tu_expect(lt_roll(i, (int64_t[]){INT64_MIN}, 1, (int[]){0}, 1), LT_I32, SHAPE(3), 1,
            (double[]){3, 1, 2}, 0); /* -2^63 mod 3 = 1 */
  /* empty and 0-d */
  tu_expect(lt_roll(lt_zeros(CPU0, LT_F32, SHAPE(0, 2), 2), (int64_t[]){3}, 1, (int[]){0}, 1),
            LT_F32, SHAPE(0, 2), 2, NULL, 0);
  tu_expect(lt_roll(tu_f32(NULL, 0, (float[]){4}), (int64_t[]){3}, 1, NULL, 0), LT_F32, NULL, 0,
            (double[]){4}, 0);
}

static void test_roll_flip_errors(void **state) {
  (void)state;
  lt_tensor *x = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  TU_EXPECT_ERROR(lt_roll(x, (int64_t[]){1, 2}, 2, NULL, 0), LT_EINVAL, "one shift");
  TU_EXPECT_ERROR(lt_roll(x, (int64_t[]){1, 2}, 2, (int[]){0}, 1), LT_EINVAL, "align");
  TU_EXPECT_ERROR(lt_roll(x, (int64_t[]){1}, 1, (int[]){2}, 1), LT_EINVAL, "lt_roll");
  TU_EXPECT_ERROR(lt_roll(x, NULL, 0, NULL, 0), LT_EINVAL, "lt_roll");
  TU_EXPECT_ERROR(lt_flip(x, (int[]){0, -2}, 2), LT_EINVAL, "more than once");
  TU_EXPECT_ERROR(lt_flip(x, (int[]){-3}, 1), LT_EINVAL, "lt_flip");
  TU_EXPECT_ERROR(lt_flip(x, NULL, 1), LT_EINVAL, "lt_flip");
}

TU_BOTH(test_repeat) {
  /* torch docs: x = [1, 2, 3]; x.repeat(4, 2) is [4, 6]; x.repeat(4, 2, 1) is [4, 2, 3] */
  lt_tensor *x = tu_i64(SHAPE(3), 1, (int64_t[]){1, 2, 3});
  double want[24];
  for (int i = 0; i < 24; i++) want[i] = 1 + i % 3;
  tu_expect(lt_repeat(x, (int64_t[]){4, 2}, 2), LT_I64, SHAPE(4, 6), 2, want, 0);
  tu_expect(lt_repeat(x, (int64_t[]){4, 2, 1}, 3), LT_I64, SHAPE(4, 2, 3), 3, want, 0);
  lt_tensor *m = range_f64(SHAPE(2, 2), 2, 1); /* [[1 2] [3 4]] */
  tu_expect(lt_repeat(m, (int64_t[]){2, 3}, 2), LT_F64, SHAPE(4, 6), 2,
            (double[]){1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}, 0);
  tu_expect(lt_repeat(m, (int64_t[]){1, 1}, 2), LT_F64, SHAPE(2, 2), 2, (double[]){1, 2, 3, 4}, 0);
  /* 0 repeats give an empty axis; a 0-d tensor takes any number of repeats */
  tu_expect(lt_repeat(m, (int64_t[]){0, 2}, 2), LT_F64, SHAPE(0, 4), 2, NULL, 0);
  tu_expect(lt_repeat(tu_f32(NULL, 0, (float[]){5}), (int64_t[]){2}, 1), LT_F32, SHAPE(2), 1,
            (double[]){5, 5}, 0);
  tu_expect(lt_repeat(tu_f32(NULL, 0, (float[]){5}), NULL, 0), LT_F32, NULL, 0, (double[]){5}, 0);
  tu_expect(lt_repeat(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), (int64_t[]){2, 1, 2}, 3), LT_BOOL,
            SHAPE(2, 1, 4), 3, (double[]){1, 0, 1, 0, 1, 0, 1, 0}, 0);
  /* every one of 8 axes repeated */
  lt_tensor *r8 =
      lt_repeat(tu_f32(SHAPE(1), 1, (float[]){3}), (int64_t[]){2, 2, 2, 2, 2, 2, 2, 2}, 8);
  double w8[256];
  for (int i = 0; i < 256; i++) w8[i] = 3;
  tu_expect(r8, LT_F32, SHAPE(2, 2, 2, 2, 2, 2, 2, 2), 8, w8, 0);
}

static void test_repeat_errors(void **state) {
  (void)state;
  lt_tensor *m = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  TU_EXPECT_ERROR(lt_repeat(m, (int64_t[]){2}, 1), LT_EINVAL, "rank 2");
  TU_EXPECT_ERROR(lt_repeat(m, (int64_t[]){2, -1}, 2), LT_EINVAL, "-1");
  TU_EXPECT_ERROR(lt_repeat(m, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, 9), LT_EINVAL, "lt_repeat");
  TU_EXPECT_ERROR(lt_repeat(m, (int64_t[]){INT64_MAX / 2, 1}, 2), LT_ESHAPE, "lt_repeat");
  TU_EXPECT_ERROR(lt_repeat(m, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40}, 2), LT_ESHAPE,
                  "lt_repeat");
}

/* ---- split / chunk ------------------------------------------------------------------------- */

static void expect_piece(lt_tensor *t, const int64_t *shape, int nd, double first) {
  double v[64];
  for (int i = 0; i < 64; i++) v[i] = first + i;
  tu_expect(t, LT_F64, shape, nd, v, 0);
}

TU_BOTH(test_split_chunk) {
  /* torch docs: a = arange(10).reshape(5, 2) */
  lt_tensor *a = range_f64(SHAPE(5, 2), 2, 0);
  lt_tensor *out[16] = {0};
  assert_int_equal(lt_split_size(a, 2, 0, NULL, 0), 3); /* the count only */
  assert_int_equal(lt_split_size(a, 2, 0, out, 8), 3);
  expect_piece(out[0], SHAPE(2, 2), 2, 0);
  expect_piece(out[1], SHAPE(2, 2), 2, 4);
  expect_piece(out[2], SHAPE(1, 2), 2, 8);
  assert_int_equal(lt_split(a, (int64_t[]){1, 4}, 2, 0, out, 2), 2);
  expect_piece(out[0], SHAPE(1, 2), 2, 0);
  expect_piece(out[1], SHAPE(4, 2), 2, 2);
  /* along the last axis, with a size that covers it */
  assert_int_equal(lt_split_size(a, 5, -1, out, 1), 1);
  expect_piece(out[0], SHAPE(5, 2), 2, 0);
  /* torch docs: chunk(arange(11), 6) gives 6 pieces, chunk(arange(13), 6) only 5 */
  lt_tensor *r11 = range_f64(SHAPE(11), 1, 0), *r13 = range_f64(SHAPE(13), 1, 0);
  assert_int_equal(lt_chunk(r11, 6, 0, out, 8), 6);
  expect_piece(out[4], SHAPE(2), 1, 8);
  expect_piece(out[5], SHAPE(1), 1, 10);
  assert_int_equal(lt_chunk(r13, 6, 0, out, 8), 5);
  expect_piece(out[3], SHAPE(3), 1, 9);
  expect_piece(out[4], SHAPE(1), 1, 12);
  assert_int_equal(lt_chunk(r13, 20, 0, out, 16), 13);
  expect_piece(out[12], SHAPE(1), 1, 12);
  /* zero sizes and empty axes: split(empty, 2) is one empty piece; chunk of
   * an empty axis gives `chunks` empty pieces */
  assert_int_equal(lt_split(r11, (int64_t[]){0, 11, 0}, 3, 0, out, 3), 3);
  expect_piece(out[0], SHAPE(0), 1, 0);
  expect_piece(out[1], SHAPE(11), 1, 0);
  lt_tensor *e = lt_zeros(CPU0, LT_F64, SHAPE(2, 0), 2);
  assert_int_equal(lt_split_size(e, 2, 1, out, 8), 1);
  expect_piece(out[0], SHAPE(2, 0), 2, 0);
  assert_int_equal(lt_split_size(e, 0, 1, out, 8), 1);
  assert_int_equal(lt_chunk(e, 3, 1, out, 8), 3);
  expect_piece(out[2], SHAPE(2, 0), 2, 0);
  assert_int_equal(lt_split(e, NULL, 0, 1, out, 8), 0);
  /* other dtypes keep theirs */
  lt_tensor *b = tu_bool(SHAPE(3), 1, (uint8_t[]){1, 0, 1});
  assert_int_equal(lt_chunk(b, 2, 0, out, 2), 2);
  tu_expect(out[1], LT_BOOL, SHAPE(1), 1, (double[]){1}, 0);
}

static void test_split_errors(void **state) {
  (void)state;
  lt_tensor *a = lt_zeros(CPU0, LT_F32, SHAPE(5, 2), 2);
  lt_tensor *out[4] = {0};
  lt_clear_error();
  assert_int_equal(lt_split_size(a, 2, 0, out, 2), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "3 pieces");
  assert_null(out[0]); /* nothing created */
  assert_int_equal(lt_split(a, (int64_t[]){2, 2}, 2, 0, out, 4), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "add up to 5");
  assert_int_equal(lt_split(a, (int64_t[]){6, -1}, 2, 0, out, 4), LT_ESHAPE);
  assert_int_equal(lt_split(a, (int64_t[]){-1, 6}, 2, 0, out, 4), LT_EINVAL);
  assert_int_equal(lt_split(a, NULL, 2, 0, out, 4), LT_EINVAL);
  assert_int_equal(lt_split_size(a, 0, 0, out, 4), LT_EINVAL);
  assert_int_equal(lt_split_size(a, -1, 0, out, 4), LT_EINVAL);
  assert_int_equal(lt_chunk(a, 0, 0, out, 4), LT_EINVAL);
  assert_int_equal(lt_chunk(a, 2, 2, out, 4), LT_EINVAL);
  assert_int_equal(lt_chunk(tu_f32(NULL, 0, (float[]){1}), 1, 0, out, 4), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "0-d");
  assert_int_equal(lt_chunk(NULL, 1, 0, out, 4), LT_EINVAL);
  assert_null(out[0]);
}

/* ---- scatter_add / scatter / index_add ----------------------------------------------------- */

TU_BOTH(test_scatter_add) {
  /* torch docs: zeros(3, 5).scatter_add(0, index, ones(2, 5)) */
  lt_tensor *z = lt_zeros(CPU0, LT_F32, SHAPE(3, 5), 2);
  double ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  lt_tensor *src = lt_cast(tu_f64(SHAPE(2, 5), 2, ones), LT_F32);
  lt_tensor *i1 = tu_i64(SHAPE(1, 5), 2, (int64_t[]){0, 1, 2, 0, 0});
  tu_expect(lt_scatter_add(z, 0, i1, src), LT_F32, SHAPE(3, 5), 2,
            (double[]){1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}, 0);
  lt_tensor *i2 = tu_i64(SHAPE(2, 5), 2, (int64_t[]){0, 1, 2, 0, 0, 0, 1, 2, 2, 2});
  tu_expect(lt_scatter_add(z, 0, i2, src), LT_F32, SHAPE(3, 5), 2,
            (double[]){2, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 2, 1, 1}, 0);
  /* along the last axis, into a non-zero input, i32 index and i64 values */
  lt_tensor *a = tu_i64(SHAPE(2, 3), 2, (int64_t[]){10, 20, 30, 40, 50, 60});
  lt_tensor *v = tu_i64(SHAPE(2, 2), 2, (int64_t[]){1, 2, 3, 4});
  lt_tensor *ix = tu_i32(SHAPE(2, 2), 2, (int32_t[]){2, 2, 0, 1});
  tu_expect(lt_scatter_add(a, -1, ix, v), LT_I64, SHAPE(2, 3), 2,
            (double[]){10, 20, 33, 43, 54, 60}, 0);
  /* bool: a position becomes true when anything true lands on it */
  lt_tensor *bo = tu_bool(SHAPE(3), 1, (uint8_t[]){0, 1, 0});
  lt_tensor *bi = tu_i64(SHAPE(3), 1, (int64_t[]){2, 2, 0});
  tu_expect(lt_scatter_add(bo, 0, bi, tu_bool(SHAPE(3), 1, (uint8_t[]){1, 1, 0})), LT_BOOL,
            SHAPE(3), 1, (double[]){0, 1, 1}, 0);
  tu_expect(lt_index_add(bo, 0, bi, tu_bool(SHAPE(3), 1, (uint8_t[]){0, 0, 1}), 1), LT_BOOL,
            SHAPE(3), 1, (double[]){1, 1, 0}, 0);
  /* an empty index leaves the input; 0-d operands work as one element */
  tu_expect(lt_scatter_add(a, 1, lt_zeros(CPU0, LT_I64, SHAPE(2, 0), 2),
                           lt_zeros(CPU0, LT_I64, SHAPE(2, 0), 2)),
            LT_I64, SHAPE(2, 3), 2, (double[]){10, 20, 30, 40, 50, 60}, 0);
  tu_expect(lt_scatter_add(tu_f64(NULL, 0, (double[]){1}), 0, tu_i64(NULL, 0, (int64_t[]){0}),
                           tu_f64(NULL, 0, (double[]){2.5})),
            LT_F64, NULL, 0, (double[]){3.5}, 0);
}

TU_BOTH(test_scatter) {
  /* torch docs: src = arange(1, 11).reshape(2, 5) */
  lt_tensor *src = range_f64(SHAPE(2, 5), 2, 1);
  lt_tensor *z = lt_zeros(CPU0, LT_F64, SHAPE(3, 5), 2);
  lt_tensor *i0 = tu_i64(SHAPE(1, 4), 2, (int64_t[]){0, 1, 2, 0});
  tu_expect(lt_scatter(z, 0, i0, src), LT_F64, SHAPE(3, 5), 2,
            (double[]){1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}, 0);
  lt_tensor *i1 = tu_i64(SHAPE(2, 3), 2, (int64_t[]){0, 1, 2, 0, 1, 4});
  tu_expect(lt_scatter(z, 1, i1, src), LT_F64, SHAPE(3, 5), 2,
            (double[]){1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0}, 0);
  /* the value form: full((2, 4), 2.).scatter(1, [[2], [3]], 1.23) */
  lt_tensor *f = lt_full(CPU0, LT_F32, SHAPE(2, 4), 2, 2.0);
  lt_tensor *iv = tu_i64(SHAPE(2, 1), 2, (int64_t[]){2, 3});
  tu_expect(lt_scatter(f, 1, iv, tu_f64(NULL, 0, (double[]){1.23})), LT_F32, SHAPE(2, 4), 2,
            (double[]){2, 2, 1.23f, 2, 2, 2, 2, 1.23f}, 0);
  /* a repeated position gets the mean of its values: exact when they are
   * equal, for f32 fractions and i64 values beyond 2^53 alike */
  lt_tensor *dup = tu_i64(SHAPE(3), 1, (int64_t[]){1, 1, 1});
  tu_expect(
      lt_scatter(lt_zeros(CPU0, LT_F32, SHAPE(3), 1), 0, dup, tu_f32(NULL, 0, (float[]){0.1f})),
      LT_F32, SHAPE(3), 1, (double[]){0, 0.1f, 0}, 0);
  tu_expect(
      lt_scatter(lt_zeros(CPU0, LT_F64, SHAPE(3), 1), 0, dup, tu_f64(NULL, 0, (double[]){0.1})),
      LT_F64, SHAPE(3), 1, (double[]){0, 0.1, 0}, 0);
  lt_tensor *dup7 = tu_i64(SHAPE(7), 1, (int64_t[]){1, 1, 1, 1, 1, 1, 1});
  tu_expect(
      lt_scatter(lt_zeros(CPU0, LT_F64, SHAPE(3), 1), 0, dup7, tu_f64(NULL, 0, (double[]){-1.1})),
      LT_F64, SHAPE(3), 1, (double[]){0, -1.1, 0}, 0);
  const int64_t big = ((int64_t)1 << 62) + 1;
  lt_tensor *bi = lt_scatter(tu_i64(SHAPE(2), 1, (int64_t[]){5, 6}), 0, dup,
                             tu_i64(SHAPE(3), 1, (int64_t[]){big, big, big}));
  int64_t got[2];
  assert_int_equal(lt_to_data(bi, got, sizeof got), LT_OK);
  assert_true(got[0] == 5 && got[1] == big);
  tu_expect(
      lt_scatter(lt_zeros(CPU0, LT_F64, SHAPE(2), 1), 0, tu_i64(SHAPE(2), 1, (int64_t[]){0, 0}),
                 tu_f64(SHAPE(2), 1, (double[]){1, 4})),
      LT_F64, SHAPE(2), 1, (double[]){2.5, 0}, 0);
  /* bool, NaN and inf values are placed as they are */
  tu_expect(
      lt_scatter(tu_bool(SHAPE(3), 1, (uint8_t[]){0, 1, 0}), 0,
                 tu_i64(SHAPE(2), 1, (int64_t[]){2, 1}), tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0})),
      LT_BOOL, SHAPE(3), 1, (double[]){0, 0, 1}, 0);
  tu_expect(
      lt_scatter(lt_zeros(CPU0, LT_F64, SHAPE(3), 1), 0, tu_i64(SHAPE(2), 1, (int64_t[]){2, 0}),
                 tu_f64(SHAPE(2), 1, (double[]){NAN, -INFINITY})),
      LT_F64, SHAPE(3), 1, (double[]){-INFINITY, 0, NAN}, 0);
}

TU_BOTH(test_index_add) {
  /* torch docs: ones(5, 3).index_add_(0, [0, 4, 2], [[1 2 3] [4 5 6] [7 8 9]]) */
  lt_tensor *x = lt_full(CPU0, LT_F32, SHAPE(5, 3), 2, 1.0);
  lt_tensor *t = lt_cast(range_f64(SHAPE(3, 3), 2, 1), LT_F32);
  lt_tensor *idx = tu_i64(SHAPE(3), 1, (int64_t[]){0, 4, 2});
  tu_expect(lt_index_add(x, 0, idx, t, 1), LT_F32, SHAPE(5, 3), 2,
            (double[]){2, 3, 4, 1, 1, 1, 8, 9, 10, 1, 1, 1, 5, 6, 7}, 0);
  tu_expect(lt_index_add(x, 0, idx, t, 2), LT_F32, SHAPE(5, 3), 2,
            (double[]){3, 5, 7, 1, 1, 1, 15, 17, 19, 1, 1, 1, 9, 11, 13}, 0);
  /* duplicates add up; the last axis; integers with an integral alpha */
  lt_tensor *a = tu_i32(SHAPE(2, 2), 2, (int32_t[]){0, 0, 0, 0});
  lt_tensor *s = tu_i32(SHAPE(2, 3), 2, (int32_t[]){1, 2, 3, 4, 5, 6});
  tu_expect(lt_index_add(a, -1, tu_i32(SHAPE(3), 1, (int32_t[]){1, 1, 0}), s, -1), LT_I32,
            SHAPE(2, 2), 2, (double[]){-3, -3, -6, -9}, 0);
  /* a 0-d index; an empty index */
  tu_expect(lt_index_add(a, 0, tu_i64(NULL, 0, (int64_t[]){1}),
                         tu_i32(SHAPE(1, 2), 2, (int32_t[]){7, 8}), 1),
            LT_I32, SHAPE(2, 2), 2, (double[]){0, 0, 7, 8}, 0);
  tu_expect(lt_index_add(a, 1, lt_zeros(CPU0, LT_I64, SHAPE(0), 1),
                         lt_zeros(CPU0, LT_I32, SHAPE(2, 0), 2), 1),
            LT_I32, SHAPE(2, 2), 2, (double[]){0, 0, 0, 0}, 0);
}

static void test_scatter_errors(void **state) {
  (void)state;
  lt_tensor *a = lt_zeros(CPU0, LT_F32, SHAPE(2, 3), 2);
  lt_tensor *src = lt_zeros(CPU0, LT_F32, SHAPE(2, 3), 2);
  lt_tensor *i = tu_i64(SHAPE(2, 3), 2, (int64_t[]){0, 1, 0, 1, 0, 1});
  TU_EXPECT_ERROR(lt_scatter_add(a, 0, lt_cast(i, LT_F32), src), LT_EDTYPE, "index");
  TU_EXPECT_ERROR(lt_scatter_add(a, 0, i, lt_cast(src, LT_F64)), LT_EDTYPE, "f64");
  TU_EXPECT_ERROR(lt_scatter(a, 0, i, lt_zeros(CPU0, LT_F32, SHAPE(3), 1)), LT_ESHAPE, "one rank");
  TU_EXPECT_ERROR(lt_scatter_add(a, 0, lt_zeros(CPU0, LT_I64, SHAPE(3, 3), 2), src), LT_ESHAPE,
                  "src");
  TU_EXPECT_ERROR(lt_scatter_add(a, 0, lt_zeros(CPU0, LT_I64, SHAPE(1, 4), 2),
                                 lt_zeros(CPU0, LT_F32, SHAPE(1, 4), 2)),
                  LT_ESHAPE, "dim 1");
  TU_EXPECT_ERROR(lt_scatter_add(a, 2, i, src), LT_EINVAL, "lt_scatter_add");
  TU_EXPECT_ERROR(lt_scatter(a, 0, i, NULL), LT_EINVAL, "lt_scatter");
  lt_tensor *s3 = lt_zeros(CPU0, LT_F32, SHAPE(3, 3), 2);
  TU_EXPECT_ERROR(lt_index_add(a, 0, tu_i64(SHAPE(2), 1, (int64_t[]){0, 1}), s3, 1), LT_ESHAPE,
                  "index");
  TU_EXPECT_ERROR(lt_index_add(a, 0, lt_zeros(CPU0, LT_I64, SHAPE(1, 1), 2), s3, 1), LT_ESHAPE,
                  "1-d");
  lt_tensor *ai = tu_i32(SHAPE(2), 1, (int32_t[]){1, 2});
  TU_EXPECT_ERROR(lt_index_add(ai, 0, tu_i64(SHAPE(2), 1, (int64_t[]){0, 1}), ai, 0.5), LT_EINVAL,
                  "alpha");
}

/* Index values are data: out of range (or negative) fails when the graph
 * runs, on both backends, and the input keeps its value. */
TU_BOTH(test_scatter_out_of_range) {
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  lt_tensor *src = tu_f32(SHAPE(1, 3), 2, (float[]){9, 9, 9});
  tu_expect_exec_error(lt_scatter_add(a, 0, tu_i64(SHAPE(1, 3), 2, (int64_t[]){0, 2, 1}), src),
                       "index 2 out of range");
  tu_expect_exec_error(lt_scatter(a, 1, tu_i64(SHAPE(1, 3), 2, (int64_t[]){0, -1, 1}), src),
                       "index -1 out of range");
  tu_expect_exec_error(lt_index_add(a, 1, tu_i32(SHAPE(1), 1, (int32_t[]){3}),
                                    lt_zeros(CPU0, LT_F32, SHAPE(2, 1), 2), 1),
                       "index 3 out of range");
  lt_clear_error();
  tu_expect(a, LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 3, 4, 5, 6}, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_classify),
      TU_TEST(test_any_all),
      TU_TEST(test_var_std),
      TU_TEST(test_var_std_errors),
      TU_TEST(test_norm),
      TU_TEST(test_norm_errors),
      TU_TEST(test_int_remainder_floor_divide),
      TU_TEST(test_float_remainder_floor_divide),
      TU_TEST(test_remainder_errors),
      TU_TEST(test_flip),
      TU_TEST(test_roll),
      TU_TEST(test_roll_flip_errors),
      TU_TEST(test_repeat),
      TU_TEST(test_repeat_errors),
      TU_TEST(test_split_chunk),
      TU_TEST(test_split_errors),
      TU_TEST(test_scatter_add),
      TU_TEST(test_scatter),
      TU_TEST(test_index_add),
      TU_TEST(test_scatter_errors),
      TU_TEST(test_scatter_out_of_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
