/* lt_masked_fill, lt_tril, lt_triu against plain C loops and torch 1.13's
 * documented behaviour (value conversion, broadcasting, diagonals), their
 * errors, and their gradients against finite differences. */
#include "test_grad_util.h"

/* ---- masked_fill ---- */

static void test_masked_fill_values(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  /* a [3] mask broadcasts over the rows; -inf goes into a float tensor */
  lt_tensor *m = tu_bool(SHAPE(3), 1, (uint8_t[]){1, 0, 1});
  tu_expect(lt_masked_fill(a, m, -INFINITY), LT_F32, SHAPE(2, 3), 2,
            (double[]){-INFINITY, 2, -INFINITY, -INFINITY, 5, -INFINITY}, 0);
  /* a full-shape mask, a value that is not a constant of the graph */
  lt_tensor *m2 = tu_bool(SHAPE(2, 3), 2, (uint8_t[]){0, 0, 1, 1, 0, 0});
  tu_expect(lt_masked_fill(a, m2, 0.25), LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 0.25, 0.25, 5, 6},
            0);
  /* NaN into a float tensor */
  tu_expect(lt_masked_fill(a, m2, NAN), LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, NAN, NAN, 5, 6},
            0);
  /* integers: torch truncates toward zero */
  lt_tensor *i = tu_i32(SHAPE(2, 3), 2, (int32_t[]){0, 1, 2, 3, 4, 5});
  tu_expect(lt_masked_fill(i, m, 2.7), LT_I32, SHAPE(2, 3), 2, (double[]){2, 1, 2, 2, 4, 2}, 0);
  tu_expect(lt_masked_fill(i, m, -2.7), LT_I32, SHAPE(2, 3), 2, (double[]){-2, 1, -2, -2, 4, -2},
            0);
  lt_tensor *l = tu_i64(SHAPE(2), 1, (int64_t[]){7, 8});
  tu_expect(lt_masked_fill(l, tu_bool(SHAPE(2), 1, (uint8_t[]){0, 1}), -9007199254740992.0), LT_I64,
            SHAPE(2), 1, (double[]){7, -9007199254740992.0}, 0);
  /* bool: any non-zero value (NaN too) is true */
  lt_tensor *b = tu_bool(SHAPE(3), 1, (uint8_t[]){0, 1, 0});
  tu_expect(lt_masked_fill(b, m, 0.5), LT_BOOL, SHAPE(3), 1, (double[]){1, 1, 1}, 0);
  tu_expect(lt_masked_fill(b, m, NAN), LT_BOOL, SHAPE(3), 1, (double[]){1, 1, 1}, 0);
  tu_expect(lt_masked_fill(lt_logical_not(b), m, 0), LT_BOOL, SHAPE(3), 1, (double[]){0, 0, 0}, 0);
  /* u8 and i8 at the ends of their ranges */
  lt_tensor *u = lt_cast(i, LT_U8), *s = lt_cast(i, LT_I8);
  tu_expect(lt_masked_fill(u, m, 255), LT_U8, SHAPE(2, 3), 2, (double[]){255, 1, 255, 255, 4, 255},
            0);
  tu_expect(lt_masked_fill(s, m, -128), LT_I8, SHAPE(2, 3), 2,
            (double[]){-128, 1, -128, -128, 4, -128}, 0);
  /* a pending input and a 0-d mask */
  tu_expect(lt_masked_fill(lt_add(a, a), tu_bool(NULL, 0, (uint8_t[]){1}), 3), LT_F32, SHAPE(2, 3),
            2, (double[]){3, 3, 3, 3, 3, 3}, 0);
  /* empty */
  lt_tensor *e = lt_zeros(CPU0, LT_F32, SHAPE(0, 3), 2);
  tu_expect(lt_masked_fill(e, m, 1), LT_F32, SHAPE(0, 3), 2, NULL, 0);
}

static void test_masked_fill_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  lt_tensor *m = tu_bool(SHAPE(3), 1, (uint8_t[]){1, 0, 1});
  TU_EXPECT_ERROR(lt_masked_fill(NULL, m, 0), LT_EINVAL, "lt_masked_fill");
  TU_EXPECT_ERROR(lt_masked_fill(a, NULL, 0), LT_EINVAL, "lt_masked_fill");
  /* the mask must be bool */
  TU_EXPECT_ERROR(lt_masked_fill(a, tu_i32(SHAPE(3), 1, (int32_t[]){1, 0, 1}), 0), LT_EDTYPE,
                  "mask must be bool");
  /* the mask broadcasts to a's shape, not the other way */
  TU_EXPECT_ERROR(lt_masked_fill(tu_f32(SHAPE(3), 1, (float[]){1, 2, 3}),
                                 tu_bool(SHAPE(2, 3), 2, (uint8_t[]){1, 0, 1, 0, 1, 0}), 0),
                  LT_ESHAPE, "does not broadcast");
  TU_EXPECT_ERROR(lt_masked_fill(a, tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), 0), LT_ESHAPE,
                  "does not broadcast");
  /* torch's overflow checks of the value */
  TU_EXPECT_ERROR(lt_masked_fill(a, m, 1e300), LT_EINVAL, "without overflow");
  lt_tensor *i = tu_i32(SHAPE(3), 1, (int32_t[]){1, 2, 3});
  TU_EXPECT_ERROR(lt_masked_fill(i, m, INFINITY), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(i, m, NAN), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(i, m, 2147483648.0), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(i, m, 2147483647.5), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(lt_cast(i, LT_U8), m, 256), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(lt_cast(i, LT_U8), m, -0.5), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(lt_cast(i, LT_I8), m, -129), LT_EINVAL, "without overflow");
  TU_EXPECT_ERROR(lt_masked_fill(lt_cast(i, LT_I64), m, 9.3e18), LT_EINVAL, "without overflow");
  /* the tensors stay usable */
  lt_clear_error();
  tu_expect(lt_masked_fill(i, m, 9), LT_I32, SHAPE(3), 1, (double[]){9, 2, 9}, 0);
}

/* Changing the fill value changes data, not the graph: one compile. */
static void test_masked_fill_no_recompile(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(4), 1, (float[]){1, 2, 3, 4});
  lt_tensor *m = tu_bool(SHAPE(4), 1, (uint8_t[]){0, 1, 0, 1});
  int64_t compiles = 0;
  for (int k = 0; k < 3; k++) {
    double v = 10.5 + k;
    tu_expect(lt_masked_fill(lt_mul(a, a), m, v), LT_F32, SHAPE(4), 1, (double[]){1, v, 9, v}, 0);
    if (k == 0) compiles = tu_counter("UncachedCompile");
  }
  assert_int_equal(tu_counter("UncachedCompile"), compiles);
  /* and a new diagonal is new data too */
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  for (int64_t d = -1; d <= 1; d++) { /* none of them keeps all or nothing */
    double v[6];
    tu_read(lt_tril(lt_mul(b, b), d), v, 6);
    if (d == -1) compiles = tu_counter("UncachedCompile");
  }
  assert_int_equal(tu_counter("UncachedCompile"), compiles);
}

/* ---- tril / triu ---- */

/* Expected tril/triu of x (shape [..., r, c], n elements) by plain loops. */
static void tri_expect(const double *x, int64_t n, int64_t r, int64_t c, int64_t diag, bool lower,
                       double *out) {
  for (int64_t k = 0; k < n; k++) {
    int64_t i = (k / c) % r, j = k % c;
    bool keep = lower ? j - i <= diag : j - i >= diag;
    out[k] = keep ? x[k] : 0;
  }
}

static void test_tril_triu_values(void **state) {
  (void)state;
  /* [2, 3, 4]: batch dims, non-square, every diagonal from all-zero to all-kept */
  double xv[24];
  for (int k = 0; k < 24; k++) xv[k] = k + 1 - 0.5 * (k % 3);
  lt_tensor *x = tu_f64(SHAPE(2, 3, 4), 3, xv);
  lt_tensor *xi = lt_cast(x, LT_I64);
  lt_tensor *xb = lt_ne(x, lt_scalar(CPU0, LT_F64, 5.5));
  double want[24], xiv[24], xbv[24];
  tu_read(xi, xiv, 24);
  tu_read(xb, xbv, 24);
  for (int64_t d = -5; d <= 5; d++) {
    for (int lower = 0; lower < 2; lower++) {
      lt_tensor *(*f)(lt_tensor *, int64_t) = lower ? lt_tril : lt_triu;
      tri_expect(xv, 24, 3, 4, d, lower, want);
      tu_expect(f(x, d), LT_F64, SHAPE(2, 3, 4), 3, want, 0);
      tri_expect(xiv, 24, 3, 4, d, lower, want);
      tu_expect(f(xi, d), LT_I64, SHAPE(2, 3, 4), 3, want, 0);
      tri_expect(xbv, 24, 3, 4, d, lower, want);
      tu_expect(f(xb, d), LT_BOOL, SHAPE(2, 3, 4), 3, want, 0);
    }
  }
  /* huge diagonals: all kept or all zero, no overflow */
  tri_expect(xv, 24, 3, 4, 0, true, want);
  double zeros[24] = {0};
  tu_expect(lt_tril(x, INT64_MAX), LT_F64, SHAPE(2, 3, 4), 3, xv, 0);
  tu_expect(lt_tril(x, INT64_MIN), LT_F64, SHAPE(2, 3, 4), 3, zeros, 0);
  tu_expect(lt_triu(x, INT64_MIN), LT_F64, SHAPE(2, 3, 4), 3, xv, 0);
  tu_expect(lt_triu(x, INT64_MAX), LT_F64, SHAPE(2, 3, 4), 3, zeros, 0);
  /* the kept-all result is a new tensor */
  lt_tensor *same = lt_tril(x, 100);
  assert_non_null(same);
  assert_true(lt_id(same) != lt_id(x));
  /* torch.tril(ones(3, 3)), the causal mask of attention */
  lt_tensor *o = lt_ones(CPU0, LT_F32, SHAPE(3, 3), 2);
  tu_expect(lt_tril(o, 0), LT_F32, SHAPE(3, 3), 2, (double[]){1, 0, 0, 1, 1, 0, 1, 1, 1}, 0);
  tu_expect(lt_triu(o, 1), LT_F32, SHAPE(3, 3), 2, (double[]){0, 1, 1, 0, 0, 1, 0, 0, 0}, 0);
  /* empty matrices */
  tu_expect(lt_tril(lt_zeros(CPU0, LT_F32, SHAPE(2, 0, 3), 3), 0), LT_F32, SHAPE(2, 0, 3), 3, NULL,
            0);
  tu_expect(lt_triu(lt_zeros(CPU0, LT_I32, SHAPE(3, 0), 2), -1), LT_I32, SHAPE(3, 0), 2, NULL, 0);
}

static void test_tril_triu_errors(void **state) {
  (void)state;
  TU_EXPECT_ERROR(lt_tril(NULL, 0), LT_EINVAL, "lt_tril");
  TU_EXPECT_ERROR(lt_tril(tu_f32(SHAPE(3), 1, (float[]){1, 2, 3}), 0), LT_ESHAPE,
                  "at least 2 dimensions");
  TU_EXPECT_ERROR(lt_triu(tu_f32(NULL, 0, (float[]){1}), 0), LT_ESHAPE, "at least 2 dimensions");
}

/* ---- gradients ---- */

static lt_tensor *apply_masked_fill(lt_tensor *const *in, void *ud) {
  (void)ud;
  /* (the gradient helper makes integer inputs: the mask is cast to bool here) */
  return lt_masked_fill(lt_mul(in[0], in[0]), lt_cast(in[1], LT_BOOL), -3.5);
}

static lt_tensor *apply_tri(lt_tensor *const *in, void *ud) {
  int kind = *(const int *)ud;
  lt_tensor *x = lt_sin(in[0]);
  switch (kind) {
  case 0:
    return lt_tril(x, 0);
  case 1:
    return lt_triu(x, 1);
  case 2:
    return lt_tril(x, -1);
  default:
    return lt_triu(x, -2);
  }
}

static void test_gradients(void **state) {
  (void)state;
  static const double kX[] = {0.3, -1.2, 0.7, 2.0, -0.4, 1.1, 0.9, -2.2, 0.05, 1.7, -0.6, 0.2};
  static const double kMask[] = {1, 0, 0, 1};
  tg_input mf[2] = {{SHAPE(3, 4), 2, kX, true, LT_F64}, {SHAPE(4), 1, kMask, false, LT_I64}};
  tg_check("masked_fill", apply_masked_fill, NULL, mf, 2, 1e-5);
  for (int kind = 0; kind < 4; kind++) {
    tg_input in = {SHAPE(2, 2, 3), 3, kX, true, LT_F64};
    tg_check("tril/triu", apply_tri, &kind, &in, 1, 1e-5);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_masked_fill_values),       TU_TEST(test_masked_fill_errors),
      TU_TEST(test_masked_fill_no_recompile), TU_TEST(test_tril_triu_values),
      TU_TEST(test_tril_triu_errors),         TU_TEST(test_gradients),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
