/* Elementwise ops: hand-computed values, broadcasting, dtype promotion, 0-d and
 * empty tensors, NaN/inf, integer corner cases and every error case. */
#include "test_util.h"
#include "test_backends.h"

#include "lazytensor_nn.h"

static const double kNan = NAN;
static const double kInf = INFINITY;

/* ---- binary arithmetic ---- */

static void test_add_sub_mul_broadcast(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  lt_tensor *b = tu_f32(SHAPE(3), 1, (float[]){10, 20, 30});
  tu_expect(lt_add(a, b), LT_F32, SHAPE(2, 3), 2, (double[]){11, 22, 33, 14, 25, 36}, 1e-6);
  tu_expect(lt_add(b, a), LT_F32, SHAPE(2, 3), 2, (double[]){11, 22, 33, 14, 25, 36}, 1e-6);
  tu_expect(lt_sub(a, b), LT_F32, SHAPE(2, 3), 2, (double[]){-9, -18, -27, -6, -15, -24}, 1e-6);
  tu_expect(lt_sub(b, a), LT_F32, SHAPE(2, 3), 2, (double[]){9, 18, 27, 6, 15, 24}, 1e-6);
  tu_expect(lt_mul(a, b), LT_F32, SHAPE(2, 3), 2, (double[]){10, 40, 90, 40, 100, 180}, 1e-6);

  /* [2,1] * [1,3] -> [2,3] */
  lt_tensor *c = tu_f64(SHAPE(2, 1), 2, (double[]){2, 3});
  lt_tensor *d = tu_f64(SHAPE(1, 3), 2, (double[]){1, 10, 100});
  tu_expect(lt_mul(c, d), LT_F64, SHAPE(2, 3), 2, (double[]){2, 20, 200, 3, 30, 300}, 0);
  /* [2,1,3] + [4,1] -> [2,4,3] (rank extension and both-sided broadcast) */
  lt_tensor *e = tu_i32(SHAPE(2, 1, 3), 3, (int32_t[]){0, 1, 2, 3, 4, 5});
  lt_tensor *f = tu_i32(SHAPE(4, 1), 2, (int32_t[]){0, 10, 20, 30});
  double want[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 3; k++) want[(i * 4 + j) * 3 + k] = (i * 3 + k) + j * 10;
  tu_expect(lt_add(e, f), LT_I32, SHAPE(2, 4, 3), 3, want, 0);
}

static void test_div(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(5), 1, (float[]){1, -1, 0, 7, 1});
  lt_tensor *b = tu_f32(SHAPE(5), 1, (float[]){0, 0, 0, 2, 3});
  tu_expect(lt_div(a, b), LT_F32, SHAPE(5), 1, (double[]){kInf, -kInf, kNan, 3.5, 1.0 / 3}, 1e-6);
  /* ints: true division in f32, division by zero gives inf/nan instead of trapping */
  lt_tensor *i = tu_i32(SHAPE(4), 1, (int32_t[]){7, -7, 1, 0});
  lt_tensor *j = tu_i32(SHAPE(4), 1, (int32_t[]){2, 2, 0, 0});
  tu_expect(lt_div(i, j), LT_F32, SHAPE(4), 1, (double[]){3.5, -3.5, kInf, kNan}, 1e-6);
  lt_tensor *k = tu_i64(SHAPE(2), 1, (int64_t[]){1, 9});
  tu_expect(lt_div(k, k), LT_F32, SHAPE(2), 1, (double[]){1, 1}, 0);
  /* f64 stays f64; i32 / f64 0-d -> f64 */
  lt_tensor *s = lt_scalar(CPU0, LT_F64, 4.0);
  tu_expect(lt_div(i, s), LT_F64, SHAPE(4), 1, (double[]){1.75, -1.75, 0.25, 0}, 0);
}

static void test_pow(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(4), 1, (float[]){2, 4, -8, 0});
  lt_tensor *b = tu_f32(SHAPE(4), 1, (float[]){3, 0.5f, 2, -1});
  tu_expect(lt_pow(a, b), LT_F32, SHAPE(4), 1, (double[]){8, 2, 64, kInf}, 1e-6);
  lt_tensor *n = tu_f32(SHAPE(1), 1, (float[]){-8});
  lt_tensor *h = tu_f32(SHAPE(1), 1, (float[]){0.5f});
  tu_expect(lt_pow(n, h), LT_F32, SHAPE(1), 1, (double[]){kNan}, 0);
  /* int ** int stays int; negative exponents give the truncated 1 / a^-b */
  lt_tensor *x = tu_i32(SHAPE(8), 1, (int32_t[]){2, 3, -1, -1, 1, 0, 5, 0});
  lt_tensor *y = tu_i32(SHAPE(8), 1, (int32_t[]){10, -1, -3, -2, -5, -1, 0, 0});
  tu_expect(lt_pow(x, y), LT_I32, SHAPE(8), 1, (double[]){1024, 0, -1, 1, 1, 0, 1, 1}, 0);
  /* i64 exact beyond 2^53; i32 wraps */
  lt_tensor *p = tu_i64(SHAPE(2), 1, (int64_t[]){3, 2});
  lt_tensor *q = tu_i64(SHAPE(2), 1, (int64_t[]){39, 62});
  int64_t got[2];
  assert_int_equal(lt_to_data(lt_pow(p, q), got, sizeof got), LT_OK);
  assert_true(got[0] == 4052555153018976267LL);
  assert_true(got[1] == 4611686018427387904LL);
  lt_tensor *w = tu_i32(SHAPE(1), 1, (int32_t[]){2});
  lt_tensor *e = tu_i32(SHAPE(1), 1, (int32_t[]){32});
  tu_expect(lt_pow(w, e), LT_I32, SHAPE(1), 1, (double[]){0}, 0);
  /* int ** float -> float; float tensor ** int 0-d stays float */
  lt_tensor *fl = tu_f64(SHAPE(1), 1, (double[]){0.5});
  tu_expect(lt_pow(w, fl), LT_F64, SHAPE(1), 1, (double[]){M_SQRT2}, 1e-12);
  lt_tensor *two = lt_scalar(CPU0, LT_I64, 2);
  tu_expect(lt_pow(a, two), LT_F32, SHAPE(4), 1, (double[]){4, 16, 64, 0}, 0);
}

static void test_maximum_minimum(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(4), 1, (float[]){1, 5, NAN, -2});
  lt_tensor *b = tu_f32(SHAPE(4), 1, (float[]){3, 2, 0, NAN});
  tu_expect(lt_maximum(a, b), LT_F32, SHAPE(4), 1, (double[]){3, 5, kNan, kNan}, 0);
  tu_expect(lt_minimum(a, b), LT_F32, SHAPE(4), 1, (double[]){1, 2, kNan, kNan}, 0);
  /* broadcast against a 0-d */
  lt_tensor *z = lt_scalar(CPU0, LT_F32, 0);
  tu_expect(lt_maximum(a, z), LT_F32, SHAPE(4), 1, (double[]){1, 5, kNan, 0}, 0);
  /* int64 compares exactly beyond 2^53 (a double domain would tie) */
  lt_tensor *i = tu_i64(SHAPE(2), 1, (int64_t[]){9007199254740993LL, -5});
  lt_tensor *j = tu_i64(SHAPE(2), 1, (int64_t[]){9007199254740992LL, -7});
  int64_t got[2];
  assert_int_equal(lt_to_data(lt_maximum(i, j), got, sizeof got), LT_OK);
  assert_true(got[0] == 9007199254740993LL && got[1] == -5);
  assert_int_equal(lt_to_data(lt_minimum(i, j), got, sizeof got), LT_OK);
  assert_true(got[0] == 9007199254740992LL && got[1] == -7);
  /* bool: maximum is or, minimum is and */
  lt_tensor *p = tu_bool(SHAPE(4), 1, (uint8_t[]){0, 0, 1, 1});
  lt_tensor *q = tu_bool(SHAPE(4), 1, (uint8_t[]){0, 1, 0, 1});
  tu_expect(lt_maximum(p, q), LT_BOOL, SHAPE(4), 1, (double[]){0, 1, 1, 1}, 0);
  tu_expect(lt_minimum(p, q), LT_BOOL, SHAPE(4), 1, (double[]){0, 0, 0, 1}, 0);
}

static void test_int_wraparound(void **state) {
  (void)state;
  lt_tensor *a = tu_i32(SHAPE(2), 1, (int32_t[]){INT32_MAX, INT32_MIN});
  lt_tensor *one = tu_i32(SHAPE(1), 1, (int32_t[]){1});
  tu_expect(lt_add(a, one), LT_I32, SHAPE(2), 1, (double[]){INT32_MIN, INT32_MIN + 1.0}, 0);
  tu_expect(lt_sub(a, one), LT_I32, SHAPE(2), 1, (double[]){INT32_MAX - 1.0, INT32_MAX}, 0);
  lt_tensor *m = tu_i64(SHAPE(1), 1, (int64_t[]){INT64_MAX});
  lt_tensor *two = tu_i64(SHAPE(1), 1, (int64_t[]){2});
  int64_t got;
  assert_int_equal(lt_to_data(lt_mul(m, two), &got, sizeof got), LT_OK);
  assert_true(got == -2);
  assert_int_equal(lt_to_data(lt_add(m, lt_neg(two)), &got, sizeof got), LT_OK);
  assert_true(got == INT64_MAX - 2);
}

static void test_bool_arithmetic(void **state) {
  (void)state;
  lt_tensor *p = tu_bool(SHAPE(4), 1, (uint8_t[]){0, 0, 1, 1});
  lt_tensor *q = tu_bool(SHAPE(4), 1, (uint8_t[]){0, 1, 0, 1});
  tu_expect(lt_add(p, q), LT_BOOL, SHAPE(4), 1, (double[]){0, 1, 1, 1}, 0);
  tu_expect(lt_mul(p, q), LT_BOOL, SHAPE(4), 1, (double[]){0, 0, 0, 1}, 0);
  tu_expect(lt_div(p, q), LT_F32, SHAPE(4), 1, (double[]){kNan, 0, kInf, 1}, 0);
  TU_EXPECT_ERROR(lt_sub(p, q), LT_EDTYPE, "lt_sub");
  TU_EXPECT_ERROR(lt_pow(p, q), LT_EDTYPE, "lt_pow");
  /* bool with an int joins the int: true + 5 = 6 */
  lt_tensor *i = tu_i32(SHAPE(4), 1, (int32_t[]){5, 5, 5, 5});
  tu_expect(lt_add(p, i), LT_I32, SHAPE(4), 1, (double[]){5, 5, 6, 6}, 0);
  tu_expect(lt_sub(i, q), LT_I32, SHAPE(4), 1, (double[]){5, 4, 5, 4}, 0);
}

/* ---- dtype promotion ---- */

static lt_tensor *make(lt_dtype dt, int ndim, double v) {
  return ndim == 0 ? lt_scalar(CPU0, dt, v) : lt_full(CPU0, dt, SHAPE(2), 1, v);
}

static void test_promotion_matrix(void **state) {
  (void)state;
  /* Both with dims: the larger dtype wins (bool < i32 < i64 < f32 < f64; the
   * enum's first five, in promotion order; u8 / i8: test_dtypes_small.c). */
  for (int x = 0; x <= LT_F64; x++) {
    for (int y = 0; y <= LT_F64; y++) {
      lt_dtype want = x > y ? (lt_dtype)x : (lt_dtype)y;
      lt_tensor *a = make((lt_dtype)x, 1, 1), *b = make((lt_dtype)y, 1, 1);
      lt_tensor *r = lt_mul(a, b);
      tu_expect(r, want, SHAPE(2), 1, (double[]){1, 1}, 0);
      /* two 0-d tensors follow the same rule */
      lt_tensor *c = make((lt_dtype)x, 0, 1), *d = make((lt_dtype)y, 0, 1);
      tu_expect(lt_mul(c, d), want, NULL, 0, (double[]){1}, 0);
      /* comparisons promote then give bool; eq of equal values is true */
      tu_expect(lt_eq(a, b), LT_BOOL, SHAPE(2), 1, (double[]){1, 1}, 0);
      tu_expect(lt_eq(a, d), LT_BOOL, SHAPE(2), 1, (double[]){1, 1}, 0);
      /* div is float whatever the ints */
      lt_dtype dw = want < LT_F32 ? LT_F32 : want;
      tu_expect(lt_div(a, b), dw, SHAPE(2), 1, (double[]){1, 1}, 0);
    }
  }
}

static void test_promotion_zero_dim(void **state) {
  (void)state;
  /* A 0-d operand only matters when it raises the category; then its own dtype
   * is used (torch.result_type with 0-d tensors). */
  static const struct {
    lt_dtype dim, zero, want;
  } cases[] = {
      {LT_I32, LT_F64, LT_F64},  {LT_I32, LT_F32, LT_F32},  {LT_F32, LT_F64, LT_F32},
      {LT_F64, LT_F32, LT_F64},  {LT_I32, LT_I64, LT_I32},  {LT_I64, LT_I32, LT_I64},
      {LT_BOOL, LT_I64, LT_I64}, {LT_BOOL, LT_I32, LT_I32}, {LT_BOOL, LT_F64, LT_F64},
      {LT_I64, LT_BOOL, LT_I64}, {LT_F32, LT_I64, LT_F32},  {LT_BOOL, LT_BOOL, LT_BOOL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    lt_tensor *a = make(cases[k].dim, 1, 1), *b = make(cases[k].zero, 0, 1);
    tu_expect(lt_add(a, b), cases[k].want, SHAPE(2), 1,
              (double[]){cases[k].want == LT_BOOL ? 1 : 2, cases[k].want == LT_BOOL ? 1 : 2}, 0);
    tu_expect(lt_add(b, a), cases[k].want, SHAPE(2), 1,
              (double[]){cases[k].want == LT_BOOL ? 1 : 2, cases[k].want == LT_BOOL ? 1 : 2}, 0);
  }
  /* the value keeps the 0-d's precision when its dtype wins */
  lt_tensor *i = tu_i32(SHAPE(2), 1, (int32_t[]){1, 2});
  lt_tensor *s = lt_scalar(CPU0, LT_F64, 0.1);
  tu_expect(lt_add(i, s), LT_F64, SHAPE(2), 1, (double[]){1.1, 2.1}, 1e-15);
  /* and is cast down when the dimensioned float decides: f32 + 0-d f64 */
  lt_tensor *f = tu_f32(SHAPE(1), 1, (float[]){0});
  tu_expect(lt_add(f, s), LT_F32, SHAPE(1), 1, (double[]){(double)0.1f}, 0);
  /* 0-d int with a dimensioned f32 keeps f32; 0-d i64 with i32 keeps i32 (wraps) */
  lt_tensor *big = lt_scalar(CPU0, LT_I64, 4294967297.0); /* 2^32 + 1 */
  tu_expect(lt_add(i, big), LT_I32, SHAPE(2), 1, (double[]){2, 3}, 0);
}

/* ---- unary ---- */

static void test_neg_abs_sign_relu(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(5), 1, (float[]){-2.5f, 0, 3, NAN, -INFINITY});
  tu_expect(lt_neg(a), LT_F32, SHAPE(5), 1, (double[]){2.5, 0, -3, kNan, kInf}, 0);
  tu_expect(lt_abs(a), LT_F32, SHAPE(5), 1, (double[]){2.5, 0, 3, kNan, kInf}, 0);
  tu_expect(lt_sign(a), LT_F32, SHAPE(5), 1, (double[]){-1, 0, 1, 0, -1}, 0);
  tu_expect(lt_relu(a), LT_F32, SHAPE(5), 1, (double[]){0, 0, 3, kNan, 0}, 0);
  lt_tensor *i = tu_i32(SHAPE(4), 1, (int32_t[]){-7, 0, 4, INT32_MIN});
  tu_expect(lt_neg(i), LT_I32, SHAPE(4), 1, (double[]){7, 0, -4, INT32_MIN}, 0);
  tu_expect(lt_abs(i), LT_I32, SHAPE(4), 1, (double[]){7, 0, 4, INT32_MIN}, 0);
  tu_expect(lt_sign(i), LT_I32, SHAPE(4), 1, (double[]){-1, 0, 1, -1}, 0);
  tu_expect(lt_relu(i), LT_I32, SHAPE(4), 1, (double[]){0, 0, 4, 0}, 0);
  lt_tensor *l = tu_i64(SHAPE(2), 1, (int64_t[]){-3, INT64_MIN});
  int64_t got[2];
  assert_int_equal(lt_to_data(lt_abs(l), got, sizeof got), LT_OK);
  assert_true(got[0] == 3 && got[1] == INT64_MIN); /* wraps, as torch */
  /* bool: abs/sign/relu keep bool and the value */
  lt_tensor *b = tu_bool(SHAPE(2), 1, (uint8_t[]){0, 1});
  tu_expect(lt_abs(b), LT_BOOL, SHAPE(2), 1, (double[]){0, 1}, 0);
  tu_expect(lt_sign(b), LT_BOOL, SHAPE(2), 1, (double[]){0, 1}, 0);
  tu_expect(lt_relu(b), LT_BOOL, SHAPE(2), 1, (double[]){0, 1}, 0);
}

static void test_floor_ceil_round(void **state) {
  (void)state;
  lt_tensor *a = tu_f64(SHAPE(8), 1, (double[]){0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.2, NAN});
  tu_expect(lt_floor(a), LT_F64, SHAPE(8), 1, (double[]){0, 1, 2, -1, -2, -3, 2, kNan}, 0);
  tu_expect(lt_ceil(a), LT_F64, SHAPE(8), 1, (double[]){1, 2, 3, -0.0, -1, -2, 3, kNan}, 0);
  /* half to even */
  tu_expect(lt_round(a), LT_F64, SHAPE(8), 1, (double[]){0, 2, 2, -0.0, -2, -3, 2, kNan}, 0);
  lt_tensor *f = tu_f32(SHAPE(2), 1, (float[]){3.5f, -4.5f});
  tu_expect(lt_round(f), LT_F32, SHAPE(2), 1, (double[]){4, -4}, 0);
  /* integers and bools are their own floor/ceil/round, in a new tensor */
  lt_tensor *i = tu_i32(SHAPE(3), 1, (int32_t[]){-3, 0, 7});
  lt_tensor *r = lt_floor(i);
  assert_non_null(r);
  assert_ptr_not_equal(r, i);
  assert_true(lt_id(r) != lt_id(i));
  tu_expect(r, LT_I32, SHAPE(3), 1, (double[]){-3, 0, 7}, 0);
  tu_expect(lt_ceil(i), LT_I32, SHAPE(3), 1, (double[]){-3, 0, 7}, 0);
  tu_expect(lt_round(i), LT_I32, SHAPE(3), 1, (double[]){-3, 0, 7}, 0);
  lt_tensor *b = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  tu_expect(lt_round(b), LT_BOOL, SHAPE(2), 1, (double[]){1, 0}, 0);
  /* and the identity of a pending value still computes */
  tu_expect(lt_floor(lt_add(i, i)), LT_I32, SHAPE(3), 1, (double[]){-6, 0, 14}, 0);
}

static void test_float_unary(void **state) {
  (void)state;
  lt_tensor *a = tu_f64(SHAPE(4), 1, (double[]){0, 1, -1, 4});
  tu_expect(lt_exp(a), LT_F64, SHAPE(4), 1, (double[]){1, M_E, 1 / M_E, 54.598150033144236}, 1e-14);
  tu_expect(lt_log(a), LT_F64, SHAPE(4), 1, (double[]){-kInf, 0, kNan, 2 * M_LN2}, 1e-14);
  tu_expect(lt_log1p(a), LT_F64, SHAPE(4), 1, (double[]){0, M_LN2, -kInf, log(5.0)}, 1e-14);
  tu_expect(lt_sqrt(a), LT_F64, SHAPE(4), 1, (double[]){0, 1, kNan, 2}, 1e-14);
  tu_expect(lt_rsqrt(a), LT_F64, SHAPE(4), 1, (double[]){kInf, 1, kNan, 0.5}, 1e-14);
  tu_expect(lt_sin(a), LT_F64, SHAPE(4), 1,
            (double[]){0, 0.8414709848078965, -0.8414709848078965, -0.7568024953079282}, 1e-14);
  tu_expect(lt_cos(a), LT_F64, SHAPE(4), 1,
            (double[]){1, 0.5403023058681398, 0.5403023058681398, -0.6536436208636119}, 1e-14);
  tu_expect(lt_tanh(a), LT_F64, SHAPE(4), 1,
            (double[]){0, 0.7615941559557649, -0.7615941559557649, 0.999329299739067}, 1e-14);
  tu_expect(lt_erf(a), LT_F64, SHAPE(4), 1,
            (double[]){0, 0.8427007929497149, -0.8427007929497149, 0.9999999845827421}, 1e-14);
  tu_expect(lt_gelu(a), LT_F64, SHAPE(4), 1,
            (double[]){0, 0.8413447460685429, -0.15865525393145707, 3.9998733150326675}, 1e-12);
  /* tanh approximation: values of torch.nn.functional.gelu(approximate='tanh') in f64 */
  lt_tensor *g = tu_f64(SHAPE(6), 1, (double[]){0, 1, -1, 4, -3, 0.1});
  tu_expect(lt_gelu_tanh(g), LT_F64, SHAPE(6), 1,
            (double[]){0, 0.8411919906082768, -0.15880800939172324, 3.9999297540518075,
                       -0.0036373920817729943, 0.053982751045435165},
            1e-14);
  tu_expect(lt_nn_gelu_tanh(g), LT_F64, SHAPE(6), 1,
            (double[]){0, 0.8411919906082768, -0.15880800939172324, 3.9999297540518075,
                       -0.0036373920817729943, 0.053982751045435165},
            1e-14);
  /* as torch: +inf stays, -inf gives NaN (inf * 0 in the formula), NaN stays */
  lt_tensor *gi = tu_f32(SHAPE(4), 1, (float[]){INFINITY, -INFINITY, NAN, -1e13f});
  tu_expect(lt_gelu_tanh(gi), LT_F32, SHAPE(4), 1, (double[]){kInf, kNan, kNan, 0}, 0);
  tu_expect(lt_sigmoid(a), LT_F64, SHAPE(4), 1,
            (double[]){0.5, 0.7310585786300049, 0.2689414213699951, 0.9820137900379085}, 1e-14);
  /* sigmoid stays finite and exact at the extremes */
  lt_tensor *x = tu_f32(SHAPE(4), 1, (float[]){-1000, 1000, -100, INFINITY});
  tu_expect(lt_sigmoid(x), LT_F32, SHAPE(4), 1, (double[]){0, 1, 3.720076e-44, 1}, 1e-6);
  lt_tensor *y = tu_f64(SHAPE(2), 1, (double[]){-800, -INFINITY});
  tu_expect(lt_sigmoid(y), LT_F64, SHAPE(2), 1, (double[]){0, 0}, 0);
  /* f32 in, f32 out */
  lt_tensor *f = tu_f32(SHAPE(2), 1, (float[]){-1, 9});
  tu_expect(lt_sqrt(f), LT_F32, SHAPE(2), 1, (double[]){kNan, 3}, 0);
  tu_expect(lt_exp(f), LT_F32, SHAPE(2), 1, (double[]){(float)(1 / M_E), 8103.083927575384}, 1e-6);
}

static void test_float_unary_on_ints(void **state) {
  (void)state;
  lt_tensor *i = tu_i32(SHAPE(3), 1, (int32_t[]){0, 1, 4});
  tu_expect(lt_sqrt(i), LT_F32, SHAPE(3), 1, (double[]){0, 1, 2}, 0);
  tu_expect(lt_exp(i), LT_F32, SHAPE(3), 1, (double[]){1, M_E, 54.598150033144236}, 1e-6);
  lt_tensor *l = tu_i64(SHAPE(2), 1, (int64_t[]){1, 0});
  tu_expect(lt_log(l), LT_F32, SHAPE(2), 1, (double[]){0, -kInf}, 0);
  lt_tensor *b = tu_bool(SHAPE(2), 1, (uint8_t[]){0, 1});
  tu_expect(lt_cos(b), LT_F32, SHAPE(2), 1, (double[]){1, 0.5403023058681398}, 1e-6);
  tu_expect(lt_sigmoid(b), LT_F32, SHAPE(2), 1, (double[]){0.5, 0.7310585786300049}, 1e-6);
  tu_expect(lt_gelu(b), LT_F32, SHAPE(2), 1, (double[]){0, 0.8413447460685429}, 1e-6);
  tu_expect(lt_gelu_tanh(b), LT_F32, SHAPE(2), 1, (double[]){0, 0.8411920070648193}, 1e-6);
  tu_expect(lt_erf(b), LT_F32, SHAPE(2), 1, (double[]){0, 0.8427007929497149}, 1e-6);
  tu_expect(lt_tanh(i), LT_F32, SHAPE(3), 1, (double[]){0, 0.7615941559557649, 0.999329299739067},
            1e-6);
  tu_expect(lt_log1p(i), LT_F32, SHAPE(3), 1, (double[]){0, M_LN2, log(5.0)}, 1e-6);
  tu_expect(lt_rsqrt(i), LT_F32, SHAPE(3), 1, (double[]){kInf, 1, 0.5}, 0);
  tu_expect(lt_sin(i), LT_F32, SHAPE(3), 1, (double[]){0, 0.8414709848078965, -0.7568024953079282},
            1e-6);
}

/* torch.nn.functional.softsign (torch 1.13): values and gradient, on each backend. */
TU_BOTH(test_softsign) {
  /* F.softsign(torch.tensor([-3., -1., -0.25, 0., 0.5, 2., 1e30, inf, -inf, nan],
   *                         dtype=torch.float64)) */
  lt_tensor *a =
      tu_f64(SHAPE(10), 1, (double[]){-3, -1, -0.25, 0, 0.5, 2, 1e30, INFINITY, -INFINITY, NAN});
  tu_expect(
      lt_softsign(a), LT_F64, SHAPE(10), 1,
      (double[]){-0.75, -0.5, -0.2, 0, 0.3333333333333333, 0.6666666666666666, 1, kNan, kNan, kNan},
      1e-15);
  /* F.softsign(torch.tensor([-3., -0.25, 0.5, 2., 1e30])) (float32) */
  lt_tensor *f = tu_f32(SHAPE(5), 1, (float[]){-3, -0.25f, 0.5f, 2, 1e30f});
  tu_expect(lt_softsign(f), LT_F32, SHAPE(5), 1,
            (double[]){-0.75, -0.20000000298023224, 0.3333333432674408, 0.6666666865348816, 1}, 0);
  /* F.softsign(torch.tensor([-2, 0, 3])): float32 */
  lt_tensor *i = tu_i64(SHAPE(3), 1, (int64_t[]){-2, 0, 3});
  tu_expect(lt_softsign(i), LT_F32, SHAPE(3), 1, (double[]){-0.6666666865348816, 0, 0.75}, 0);
  /* x = torch.tensor([-3., -0.25, 0., 0.5, 2.], dtype=torch.float64, requires_grad=True);
   * F.softsign(x).sum().backward(); x.grad (1 at 0, where abs' own gradient is 0) */
  lt_tensor *x = tu_f64(SHAPE(5), 1, (double[]){-3, -0.25, 0, 0.5, 2});
  assert_int_equal(lt_set_requires_grad(x, true), LT_OK);
  assert_int_equal(lt_backward(lt_sum(lt_softsign(x), NULL, 0, false)), LT_OK);
  double g[5];
  tu_read_grad(x, g, 5);
  static const double kGrad[5] = {0.0625, 0.64, 1.0, 0.4444444444444444, 0.1111111111111111};
  for (int k = 0; k < 5; k++) assert_true(fabs(g[k] - kGrad[k]) <= 1e-15);
}

/* ---- clamp ---- */

static void test_clamp(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(6), 1, (float[]){-3, -1, 0, 1.5f, 4, NAN});
  tu_expect(lt_clamp(a, -1.5, 2.5), LT_F32, SHAPE(6), 1, (double[]){-1.5, -1, 0, 1.5, 2.5, kNan},
            0);
  tu_expect(lt_clamp(a, 0, NAN), LT_F32, SHAPE(6), 1, (double[]){0, 0, 0, 1.5, 4, kNan}, 0);
  tu_expect(lt_clamp(a, NAN, 1), LT_F32, SHAPE(6), 1, (double[]){-3, -1, 0, 1, 1, kNan}, 0);
  lt_tensor *same = lt_clamp(a, NAN, NAN);
  assert_ptr_not_equal(same, a);
  tu_expect(same, LT_F32, SHAPE(6), 1, (double[]){-3, -1, 0, 1.5, 4, kNan}, 0);
  /* lo > hi: everything becomes hi (min(max(x, lo), hi)) */
  tu_expect(lt_clamp(a, 3, 2), LT_F32, SHAPE(6), 1, (double[]){2, 2, 2, 2, 2, kNan}, 0);
  /* infinite bounds */
  tu_expect(lt_clamp(a, -INFINITY, 0.25), LT_F32, SHAPE(6), 1,
            (double[]){-3, -1, 0, 0.25, 0.25, kNan}, 0);
  /* integers keep their dtype; bounds are converted to it (truncated), out of
   * range bounds saturate or vanish */
  lt_tensor *i = tu_i32(SHAPE(5), 1, (int32_t[]){-10, -2, 0, 3, 10});
  tu_expect(lt_clamp(i, -2.7, 3.9), LT_I32, SHAPE(5), 1, (double[]){-2, -2, 0, 3, 3}, 0);
  tu_expect(lt_clamp(i, -1e30, 1e30), LT_I32, SHAPE(5), 1, (double[]){-10, -2, 0, 3, 10}, 0);
  tu_expect(lt_clamp(i, 1e30, NAN), LT_I32, SHAPE(5), 1,
            (double[]){INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX}, 0);
  tu_expect(lt_clamp(i, -INFINITY, INFINITY), LT_I32, SHAPE(5), 1, (double[]){-10, -2, 0, 3, 10},
            0);
  lt_tensor *l = tu_i64(SHAPE(2), 1, (int64_t[]){INT64_MIN, INT64_MAX});
  int64_t got[2];
  assert_int_equal(lt_to_data(lt_clamp(l, -1e300, 1e300), got, sizeof got), LT_OK);
  assert_true(got[0] == INT64_MIN && got[1] == INT64_MAX);
  assert_int_equal(lt_to_data(lt_clamp(l, -5, 7), got, sizeof got), LT_OK);
  assert_true(got[0] == -5 && got[1] == 7);
  /* empty and 0-d */
  lt_tensor *e = tu_f32(SHAPE(2, 0), 2, NULL);
  tu_expect(lt_clamp(e, 0, 1), LT_F32, SHAPE(2, 0), 2, NULL, 0);
  lt_tensor *z = lt_scalar(CPU0, LT_F64, 7.5);
  tu_expect(lt_clamp(z, 0, 2.25), LT_F64, NULL, 0, (double[]){2.25}, 0);
  TU_EXPECT_ERROR(lt_clamp(tu_bool(SHAPE(1), 1, (uint8_t[]){1}), 0, 1), LT_EDTYPE, "lt_clamp");
}

/* Bounds are device data, not constants: new bounds reuse the compiled graph. */
static void test_clamp_bounds_are_data(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3), 1, (float[]){-5, 0.5f, 5});
  tu_expect(lt_clamp(a, -2.5, 2.5), LT_F32, SHAPE(3), 1, (double[]){-2.5, 0.5, 2.5}, 0);
  int64_t cached = tu_counter("CachedCompile");
  int64_t uncached = tu_counter("UncachedCompile");
  tu_expect(lt_clamp(a, -3.5, 0.25), LT_F32, SHAPE(3), 1, (double[]){-3.5, 0.25, 0.25}, 0);
  assert_true(tu_counter("CachedCompile") == cached + 1);
  assert_true(tu_counter("UncachedCompile") == uncached);
}

/* ---- comparisons and logical ops ---- */

static void test_comparisons(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, NAN, 5, -INFINITY});
  lt_tensor *b = tu_f32(SHAPE(3), 1, (float[]){2, 2, NAN});
  tu_expect(lt_eq(a, b), LT_BOOL, SHAPE(2, 3), 2, (double[]){0, 1, 0, 0, 0, 0}, 0);
  tu_expect(lt_ne(a, b), LT_BOOL, SHAPE(2, 3), 2, (double[]){1, 0, 1, 1, 1, 1}, 0);
  tu_expect(lt_lt(a, b), LT_BOOL, SHAPE(2, 3), 2, (double[]){1, 0, 0, 0, 0, 0}, 0);
  tu_expect(lt_le(a, b), LT_BOOL, SHAPE(2, 3), 2, (double[]){1, 1, 0, 0, 0, 0}, 0);
  tu_expect(lt_gt(a, b), LT_BOOL, SHAPE(2, 3), 2, (double[]){0, 0, 0, 0, 1, 0}, 0);
  tu_expect(lt_ge(a, b), LT_BOOL, SHAPE(2, 3), 2, (double[]){0, 1, 0, 0, 1, 0}, 0);
  /* mixed dtypes are promoted first: i32 vs f32 compares 2 < 2.5 */
  lt_tensor *i = tu_i32(SHAPE(3), 1, (int32_t[]){2, 3, -1});
  lt_tensor *f = tu_f32(SHAPE(3), 1, (float[]){2.5f, 3, -1.5f});
  tu_expect(lt_lt(i, f), LT_BOOL, SHAPE(3), 1, (double[]){1, 0, 0}, 0);
  tu_expect(lt_eq(i, f), LT_BOOL, SHAPE(3), 1, (double[]){0, 1, 0}, 0);
  /* i64 compares in i64, exact beyond 2^53 */
  lt_tensor *p = tu_i64(SHAPE(1), 1, (int64_t[]){9007199254740993LL});
  lt_tensor *q = tu_i64(SHAPE(1), 1, (int64_t[]){9007199254740992LL});
  tu_expect(lt_gt(p, q), LT_BOOL, SHAPE(1), 1, (double[]){1}, 0);
  tu_expect(lt_eq(p, q), LT_BOOL, SHAPE(1), 1, (double[]){0}, 0);
  /* bool vs bool, and bool vs int (true == 1) */
  lt_tensor *t = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  lt_tensor *one = lt_scalar(CPU0, LT_I32, 1);
  tu_expect(lt_eq(t, one), LT_BOOL, SHAPE(2), 1, (double[]){1, 0}, 0);
  tu_expect(lt_gt(t, lt_logical_not(t)), LT_BOOL, SHAPE(2), 1, (double[]){1, 0}, 0);
  /* 0-d vs 0-d gives a 0-d bool */
  lt_tensor *z = lt_le(lt_scalar(CPU0, LT_F32, 2.5), lt_scalar(CPU0, LT_F64, 2.5));
  tu_expect(z, LT_BOOL, NULL, 0, (double[]){1}, 0);
}

static void test_logical(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(4), 1, (float[]){0, 0.5f, NAN, -0.0f});
  lt_tensor *b = tu_i32(SHAPE(4), 1, (int32_t[]){3, 0, 1, 7});
  tu_expect(lt_logical_and(a, b), LT_BOOL, SHAPE(4), 1, (double[]){0, 0, 1, 0}, 0);
  tu_expect(lt_logical_or(a, b), LT_BOOL, SHAPE(4), 1, (double[]){1, 1, 1, 1}, 0);
  tu_expect(lt_logical_not(a), LT_BOOL, SHAPE(4), 1, (double[]){1, 0, 0, 1}, 0);
  tu_expect(lt_logical_not(b), LT_BOOL, SHAPE(4), 1, (double[]){0, 1, 0, 0}, 0);
  /* a tiny f64 is true even next to an f32 with dims (no flush through f32) */
  lt_tensor *tiny = lt_scalar(CPU0, LT_F64, 1e-300);
  lt_tensor *ones = tu_f32(SHAPE(2), 1, (float[]){1, 0});
  tu_expect(lt_logical_and(ones, tiny), LT_BOOL, SHAPE(2), 1, (double[]){1, 0}, 0);
  /* broadcast [2,1] with [2] */
  lt_tensor *c = tu_bool(SHAPE(2, 1), 2, (uint8_t[]){1, 0});
  lt_tensor *d = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  tu_expect(lt_logical_and(c, d), LT_BOOL, SHAPE(2, 2), 2, (double[]){1, 0, 0, 0}, 0);
  tu_expect(lt_logical_or(c, d), LT_BOOL, SHAPE(2, 2), 2, (double[]){1, 1, 1, 0}, 0);
  lt_tensor *l = tu_i64(SHAPE(2), 1, (int64_t[]){INT64_MIN, 0});
  tu_expect(lt_logical_not(l), LT_BOOL, SHAPE(2), 1, (double[]){0, 1}, 0);
}

/* ---- where ---- */

static void test_where(void **state) {
  (void)state;
  lt_tensor *c = tu_bool(SHAPE(2, 1), 2, (uint8_t[]){1, 0});
  lt_tensor *a = tu_i32(SHAPE(3), 1, (int32_t[]){1, 2, 3});
  lt_tensor *b = lt_scalar(CPU0, LT_F32, -0.5);
  /* i32 [3] with f32 0-d -> f32 (0-d raises the category) */
  tu_expect(lt_where(c, a, b), LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 3, -0.5, -0.5, -0.5}, 0);
  /* a non-bool condition is read as non-zero */
  lt_tensor *cf = tu_f32(SHAPE(3), 1, (float[]){0, NAN, 2});
  lt_tensor *x = tu_f64(SHAPE(3), 1, (double[]){10, 20, 30});
  lt_tensor *y = tu_f64(SHAPE(3), 1, (double[]){-1, -2, -3});
  tu_expect(lt_where(cf, x, y), LT_F64, SHAPE(3), 1, (double[]){-1, 20, 30}, 0);
  /* i64 values pass through exactly */
  lt_tensor *p = tu_i64(SHAPE(2), 1, (int64_t[]){9007199254740993LL, 1});
  lt_tensor *q = tu_i64(SHAPE(2), 1, (int64_t[]){0, -9007199254740993LL});
  lt_tensor *m = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  int64_t got[2];
  assert_int_equal(lt_to_data(lt_where(m, p, q), got, sizeof got), LT_OK);
  assert_true(got[0] == 9007199254740993LL && got[1] == -9007199254740993LL);
  /* all three broadcast: [2,1,1], [1,2,1], [2] -> [2,2,2] */
  lt_tensor *c3 = tu_i32(SHAPE(2, 1, 1), 3, (int32_t[]){0, 5});
  lt_tensor *a3 = tu_bool(SHAPE(1, 2, 1), 3, (uint8_t[]){1, 0});
  lt_tensor *b3 = tu_i64(SHAPE(2), 1, (int64_t[]){7, 8});
  tu_expect(lt_where(c3, a3, b3), LT_I64, SHAPE(2, 2, 2), 3, (double[]){7, 8, 7, 8, 1, 1, 0, 0}, 0);
  /* empty */
  lt_tensor *e = tu_f32(SHAPE(0), 1, NULL);
  tu_expect(lt_where(e, e, b), LT_F32, SHAPE(0), 1, NULL, 0);
  TU_EXPECT_ERROR(lt_where(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), a, b), LT_ESHAPE, "lt_where");
}

/* ---- cast ---- */

static void test_cast(void **state) {
  (void)state;
  lt_tensor *f = tu_f32(SHAPE(5), 1, (float[]){-1.7f, 2.9f, 0, -0.0f, NAN});
  tu_expect(lt_cast(f, LT_I32), LT_I32, SHAPE(5), 1, (double[]){-1, 2, 0, 0, 0}, 0);
  tu_expect(lt_cast(f, LT_I64), LT_I64, SHAPE(5), 1, (double[]){-1, 2, 0, 0, 0}, 0);
  tu_expect(lt_cast(f, LT_BOOL), LT_BOOL, SHAPE(5), 1, (double[]){1, 1, 0, 0, 1}, 0);
  tu_expect(lt_cast(f, LT_F64), LT_F64, SHAPE(5), 1,
            (double[]){(double)-1.7f, (double)2.9f, 0, 0, kNan}, 0);
  /* out of range floats saturate (defined, no trap) */
  lt_tensor *big = tu_f64(SHAPE(3), 1, (double[]){1e30, -1e30, INFINITY});
  tu_expect(lt_cast(big, LT_I32), LT_I32, SHAPE(3), 1, (double[]){INT32_MAX, INT32_MIN, INT32_MAX},
            0);
  lt_tensor *l = tu_i64(SHAPE(3), 1, (int64_t[]){4294967297LL, -1, 16777217});
  tu_expect(lt_cast(l, LT_I32), LT_I32, SHAPE(3), 1, (double[]){1, -1, 16777217}, 0);
  tu_expect(lt_cast(l, LT_F32), LT_F32, SHAPE(3), 1, (double[]){4294967296.0, -1, 16777216}, 0);
  tu_expect(lt_cast(l, LT_BOOL), LT_BOOL, SHAPE(3), 1, (double[]){1, 1, 1}, 0);
  lt_tensor *b = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  tu_expect(lt_cast(b, LT_F64), LT_F64, SHAPE(2), 1, (double[]){1, 0}, 0);
  tu_expect(lt_cast(b, LT_I64), LT_I64, SHAPE(2), 1, (double[]){1, 0}, 0);
  /* same dtype: a new tensor with the same value */
  lt_tensor *s = lt_cast(f, LT_F32);
  assert_non_null(s);
  assert_ptr_not_equal(s, f);
  tu_expect(s, LT_F32, SHAPE(5), 1, (double[]){-1.7f, 2.9f, 0, 0, kNan}, 0);
  /* 0-d and empty */
  tu_expect(lt_cast(lt_scalar(CPU0, LT_F64, 3.75), LT_I32), LT_I32, NULL, 0, (double[]){3}, 0);
  tu_expect(lt_cast(tu_i32(SHAPE(2, 0), 2, NULL), LT_F64), LT_F64, SHAPE(2, 0), 2, NULL, 0);
  TU_EXPECT_ERROR(lt_cast(f, (lt_dtype)9), LT_EDTYPE, "lt_cast");
  TU_EXPECT_ERROR(lt_cast(f, (lt_dtype)-1), LT_EDTYPE, "lt_cast");
}

/* ---- 0-d and empty ---- */

static void test_zero_dim(void **state) {
  (void)state;
  lt_tensor *a = lt_scalar(CPU0, LT_F32, 2.5);
  lt_tensor *b = tu_f32(SHAPE(2), 1, (float[]){1, -1});
  tu_expect(lt_add(a, b), LT_F32, SHAPE(2), 1, (double[]){3.5, 1.5}, 0);
  tu_expect(lt_sub(a, b), LT_F32, SHAPE(2), 1, (double[]){1.5, 3.5}, 0);
  lt_tensor *r = lt_mul(a, a);
  tu_expect(r, LT_F32, NULL, 0, (double[]){6.25}, 0);
  assert_int_equal(lt_ndim(r), 0);
  tu_expect(lt_neg(a), LT_F32, NULL, 0, (double[]){-2.5}, 0);
  tu_expect(lt_exp(lt_scalar(CPU0, LT_I32, 0)), LT_F32, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_logical_not(lt_scalar(CPU0, LT_I64, 3)), LT_BOOL, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_where(lt_scalar(CPU0, LT_BOOL, 1), a, lt_scalar(CPU0, LT_F32, 7)), LT_F32, NULL, 0,
            (double[]){2.5}, 0);
}

static void test_empty(void **state) {
  (void)state;
  lt_tensor *e = tu_f32(SHAPE(0), 1, NULL);
  tu_expect(lt_add(e, e), LT_F32, SHAPE(0), 1, NULL, 0);
  lt_tensor *e2 = tu_i32(SHAPE(2, 0), 2, NULL);
  tu_expect(lt_add(e2, e), LT_F32, SHAPE(2, 0), 2, NULL, 0);
  tu_expect(lt_mul(e2, lt_scalar(CPU0, LT_I32, 3)), LT_I32, SHAPE(2, 0), 2, NULL, 0);
  /* [2,1] broadcast with [0] gives [2,0] */
  lt_tensor *c = tu_f32(SHAPE(2, 1), 2, (float[]){1, 2});
  tu_expect(lt_sub(c, e), LT_F32, SHAPE(2, 0), 2, NULL, 0);
  tu_expect(lt_exp(e2), LT_F32, SHAPE(2, 0), 2, NULL, 0);
  tu_expect(lt_neg(e2), LT_I32, SHAPE(2, 0), 2, NULL, 0);
  tu_expect(lt_lt(e2, e), LT_BOOL, SHAPE(2, 0), 2, NULL, 0);
  tu_expect(lt_logical_not(e), LT_BOOL, SHAPE(0), 1, NULL, 0);
  tu_expect(lt_pow(e2, e2), LT_I32, SHAPE(2, 0), 2, NULL, 0);
  TU_EXPECT_ERROR(lt_add(e, tu_f32(SHAPE(2), 1, (float[]){1, 2})), LT_ESHAPE, "lt_add");
}

/* A chain of ops runs as one graph. */
static void test_chain(void **state) {
  (void)state;
  lt_tensor *x = tu_f32(SHAPE(3), 1, (float[]){-1, 0, 2});
  lt_tensor *two = lt_scalar(CPU0, LT_F32, 2);
  /* relu(x) * 2 + exp(x) - sigmoid(0) */
  lt_tensor *r =
      lt_sub(lt_add(lt_mul(lt_relu(x), two), lt_exp(x)), lt_sigmoid(lt_scalar(CPU0, LT_F32, 0)));
  tu_expect(r, LT_F32, SHAPE(3), 1, (double[]){exp(-1) - 0.5, 0.5, 4 + exp(2) - 0.5}, 1e-6);
}

/* ---- errors ---- */

static void test_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  lt_tensor *b = tu_f32(SHAPE(4), 1, (float[]){1, 2, 3, 4});
  /* shape mismatch names the call and both shapes */
  TU_EXPECT_ERROR(lt_add(a, b), LT_ESHAPE, "lt_add");
  assert_non_null(strstr(lt_last_error(), "[2, 3]"));
  assert_non_null(strstr(lt_last_error(), "[4]"));
  TU_EXPECT_ERROR(lt_eq(a, b), LT_ESHAPE, "lt_eq");
  TU_EXPECT_ERROR(lt_logical_or(a, b), LT_ESHAPE, "lt_logical_or");
  TU_EXPECT_ERROR(lt_maximum(b, a), LT_ESHAPE, "[4]");
  /* a NULL operand keeps the earlier error */
  TU_EXPECT_ERROR(lt_exp(lt_mul(lt_add(a, b), a)), LT_ESHAPE, "lt_add");
  TU_EXPECT_ERROR(lt_where(a, lt_sub(a, b), a), LT_ESHAPE, "lt_sub");
  TU_EXPECT_ERROR(lt_clamp(lt_add(a, b), 0, 1), LT_ESHAPE, "lt_add");
  TU_EXPECT_ERROR(lt_cast(lt_add(a, b), LT_I32), LT_ESHAPE, "lt_add");
  /* a NULL with no earlier error is LT_EINVAL naming the call */
  TU_EXPECT_ERROR(lt_add(NULL, a), LT_EINVAL, "lt_add");
  TU_EXPECT_ERROR(lt_neg(NULL), LT_EINVAL, "lt_neg");
  TU_EXPECT_ERROR(lt_logical_not(NULL), LT_EINVAL, "lt_logical_not");
  TU_EXPECT_ERROR(lt_where(a, a, NULL), LT_EINVAL, "lt_where");
  /* dtype errors */
  lt_tensor *t = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  TU_EXPECT_ERROR(lt_neg(t), LT_EDTYPE, "lt_neg");
  TU_EXPECT_ERROR(lt_cast(a, LT_NUM_DTYPES), LT_EDTYPE, "lt_cast");
  TU_EXPECT_ERROR(lt_sub(t, lt_scalar(CPU0, LT_BOOL, 1)), LT_EDTYPE, "lt_sub");
  /* device mismatch */
  lt_tensor *c1 = lt_from_data(lt_cpu(1), LT_F32, SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  assert_non_null(c1);
  TU_EXPECT_ERROR(lt_add(a, c1), LT_EDEVICE, "CPU:0");
  assert_non_null(strstr(lt_last_error(), "CPU:1"));
  assert_non_null(strstr(lt_last_error(), "lt_add"));
  TU_EXPECT_ERROR(lt_where(t, a, c1), LT_EDEVICE, "lt_where");
  /* ops on the other device work and stay there */
  lt_tensor *r = lt_add(c1, c1);
  assert_int_equal(lt_get_device(r).index, 1);
  tu_expect(r, LT_F32, SHAPE(2, 3), 2, (double[]){2, 4, 6, 8, 10, 12}, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_add_sub_mul_broadcast),
      TU_TEST(test_div),
      TU_TEST(test_pow),
      TU_TEST(test_maximum_minimum),
      TU_TEST(test_int_wraparound),
      TU_TEST(test_bool_arithmetic),
      TU_TEST(test_promotion_matrix),
      TU_TEST(test_promotion_zero_dim),
      TU_TEST(test_neg_abs_sign_relu),
      TU_TEST(test_floor_ceil_round),
      TU_TEST(test_float_unary),
      TU_TEST(test_float_unary_on_ints),
      TU_TEST(test_softsign),
      TU_TEST(test_clamp),
      TU_TEST(test_clamp_bounds_are_data),
      TU_TEST(test_comparisons),
      TU_TEST(test_logical),
      TU_TEST(test_where),
      TU_TEST(test_cast),
      TU_TEST(test_zero_dim),
      TU_TEST(test_empty),
      TU_TEST(test_chain),
      TU_TEST(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
