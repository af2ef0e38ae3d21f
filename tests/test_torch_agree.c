/* Values where a differential run against PyTorch 1.13 found lazytensor
 * disagreeing: remainder's exactness and gradient, f32 var/std beyond the
 * f32 range of the squares, scatter's value conversion, integer arange with
 * a step that truncates to 0, and mse_loss's promotion of a 0-d target. Each
 * expected value carries the torch expression that gives it; every case runs
 * on ref and on cpu. */
#include <float.h>

#include "test_grad_util.h"
#include "test_backends.h"

#include "lazytensor_nn.h"

/* t's values, which must equal want exactly, zeros with their sign. */
static void expect_exact(lt_tensor *t, lt_dtype dt, const double *want, int64_t n) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  assert_int_equal(lt_get_dtype(t), dt);
  assert_int_equal(lt_numel(t), n);
  double *got = tu_values(t);
  for (int64_t i = 0; i < n; i++)
    if (!(got[i] == want[i] && signbit(got[i]) == signbit(want[i])))
      fail_msg("element %lld: got %.17g, want %.17g", (long long)i, got[i], want[i]);
  free(got);
}

/* ---- remainder: exact for any magnitude ------------------------------------------------ */

static const double kDividends[10] = {-0.0, 0.0, 1e20, -1e20, 5, -5, -3, 3, 1e30, 7.5};

TU_BOTH(test_remainder_exact_f32) {
  float av[10];
  for (int i = 0; i < 10; i++) av[i] = (float)kDividends[i];
  lt_tensor *a = tu_f32(SHAPE(10), 1, av);
  /* torch.remainder(torch.tensor([-0.0, 0.0, 1e20, -1e20, 5.0, -5.0, -3.0, 3.0, 1e30, 7.5]), 3)
   * = [-0.0, 0.0, 2.0, 1.0, 2.0, 1.0, -0.0, 0.0, 0.0, 1.5] */
  expect_exact(lt_remainder(a, tu_f32(NULL, 0, (float[]){3})), LT_F32,
               (double[]){-0.0, 0.0, 2, 1, 2, 1, -0.0, 0.0, 0, 1.5}, 10);
  /* the same, % -3: [-0.0, 0.0, -1.0, -2.0, -1.0, -2.0, -0.0, 0.0, 0.0, -1.5] */
  expect_exact(lt_remainder(a, tu_f32(NULL, 0, (float[]){-3})), LT_F32,
               (double[]){-0.0, 0.0, -1, -2, -1, -2, -0.0, 0.0, 0, -1.5}, 10);
  /* tiny b: torch.remainder(torch.tensor([1.0, -1.0, 1e-40, 1e20, -0.0]), torch.tensor(1e-30))
   * = [7.272100821418535e-31, 2.7278992102922333e-31, 9.99994610111476e-41,
   *    8.096729856825464e-32, -0.0] */
  lt_tensor *t = tu_f32(SHAPE(5), 1, (float[]){1, -1, 1e-40f, 1e20f, -0.0f});
  expect_exact(lt_remainder(t, tu_f32(NULL, 0, (float[]){1e-30f})), LT_F32,
               (double[]){7.272100821418535e-31, 2.7278992102922333e-31, 9.99994610111476e-41,
                          8.096729856825464e-32, -0.0},
               5);
  /* torch.remainder(torch.tensor([1.0, -1.0, 1e20]), torch.tensor(-1e-30))
   * = [-2.7278992102922333e-31, -7.272100821418535e-31, -9.190327046028222e-31] */
  expect_exact(lt_remainder(tu_f32(SHAPE(3), 1, (float[]){1, -1, 1e20f}),
                            tu_f32(NULL, 0, (float[]){-1e-30f})),
               LT_F32,
               (double[]){-2.7278992102922333e-31, -7.272100821418535e-31, -9.190327046028222e-31},
               3);
  /* the widest ratio: torch.remainder(torch.tensor([3e38, -3e38]), torch.tensor(1e-45))
   * = [0.0, -0.0] (every f32 is a multiple of the smallest subnormal) */
  expect_exact(lt_remainder(tu_f32(SHAPE(2), 1, (float[]){3e38f, -3e38f}),
                            tu_f32(NULL, 0, (float[]){1e-45f})),
               LT_F32, (double[]){0.0, -0.0}, 2);
}

TU_BOTH(test_remainder_exact_f64) {
  lt_tensor *a = tu_f64(SHAPE(10), 1, kDividends);
  /* torch.remainder(torch.tensor([-0.0, 0.0, 1e20, -1e20, 5.0, -5.0, -3.0, 3.0, 1e30, 7.5],
   * dtype=torch.float64), 3) = [-0.0, 0.0, 1.0, 2.0, 2.0, 1.0, -0.0, 0.0, 1.0, 1.5] */
  expect_exact(lt_remainder(a, tu_f64(NULL, 0, (double[]){3})), LT_F64,
               (double[]){-0.0, 0.0, 1, 2, 2, 1, -0.0, 0.0, 1, 1.5}, 10);
  /* % -3: [-0.0, 0.0, -2.0, -1.0, -1.0, -2.0, -0.0, 0.0, -2.0, -1.5] */
  expect_exact(lt_remainder(a, tu_f64(NULL, 0, (double[]){-3})), LT_F64,
               (double[]){-0.0, 0.0, -2, -1, -1, -2, -0.0, 0.0, -2, -1.5}, 10);
  /* torch.remainder(torch.tensor([1e300, -1e300, 1e-300], dtype=torch.float64),
   * torch.tensor(7e-300, dtype=torch.float64))
   * = [5.651755366164927e-300, 1.348244633835073e-300, 1e-300] */
  expect_exact(lt_remainder(tu_f64(SHAPE(3), 1, (double[]){1e300, -1e300, 1e-300}),
                            tu_f64(NULL, 0, (double[]){7e-300})),
               LT_F64, (double[]){5.651755366164927e-300, 1.348244633835073e-300, 1e-300}, 3);
  /* torch.remainder(torch.tensor([1e300, -1e300], dtype=torch.float64),
   * torch.tensor(-5e-324, dtype=torch.float64)) = [0.0, -0.0] */
  expect_exact(lt_remainder(tu_f64(SHAPE(2), 1, (double[]){1e300, -1e300}),
                            tu_f64(NULL, 0, (double[]){-5e-324})),
               LT_F64, (double[]){0.0, -0.0}, 2);
  /* floor_divide shares the fmod: torch.floor_divide(torch.tensor([1e20, -1e20],
   * dtype=torch.float64), 3) = [3.333333333333333e+19, -3.333333333333333e+19] */
  expect_exact(
      lt_floor_divide(tu_f64(SHAPE(2), 1, (double[]){1e20, -1e20}), tu_f64(NULL, 0, (double[]){3})),
      LT_F64, (double[]){3.333333333333333e+19, -3.333333333333333e+19}, 2);
}

/* ---- remainder: gradient --------------------------------------------------------------- */

/* The gradients of sum(remainder(a, b)) for a, b of n (at most 8) elements. */
static void remainder_grads(const double *av, const double *bv, int n, double *ga, double *gb) {
  lt_scope_begin();
  lt_tensor *a = tu_f64(SHAPE(n), 1, av), *b = tu_f64(SHAPE(n), 1, bv);
  lt_set_requires_grad(a, true);
  lt_set_requires_grad(b, true);
  assert_int_equal(lt_backward(lt_sum(lt_remainder(a, b), NULL, 0, false)), LT_OK);
  tu_read_grad(a, ga, n);
  tu_read_grad(b, gb, n);
  lt_scope_end();
}

/* remainder(a, b) of scalars through the library. */
static double remainder_at(double a, double b) {
  lt_scope_begin();
  double r;
  assert_int_equal(lt_item(lt_remainder(tu_f64(NULL, 0, &a), tu_f64(NULL, 0, &b)), 0, &r), LT_OK);
  lt_scope_end();
  return r;
}

/* remainder jumps by |b| where it is 0, so the slope there is one-sided:
 * the side that keeps it near 0 (the smaller change) is the continuous one. */
static double continuous_slope(double a, double b, bool wrt_b) {
  double x = wrt_b ? b : a, h = 1e-7 * (1 + fabs(x)), r0 = remainder_at(a, b);
  double up = wrt_b ? remainder_at(a, b + h) : remainder_at(a + h, b);
  double down = wrt_b ? remainder_at(a, b - h) : remainder_at(a - h, b);
  return fabs(up - r0) <= fabs(down - r0) ? (up - r0) / h : (r0 - down) / h;
}

static lt_tensor *apply_rem(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_remainder(in[0], in[1]);
}

static void test_remainder_grad_everywhere(void **state) {
  (void)state;
  /* where the remainder is exactly 0 (both signs of a and b) and where it is
   * not; torch: a = torch.tensor([6., -6., 6., -6., 0., 7.5, 1e20, -1e20]),
   * b = torch.tensor([3., 3., -2., -2., 5., 2.5, 3., 3.]), both f64,
   * remainder(a, b).sum().backward(): a.grad = [1] * 8, b.grad =
   * [-2, 2, 3, -3, -0.0, -3, -3.333333333333333e+19, 3.333333333333333e+19] */
  const double av[8] = {6, -6, 6, -6, 0, 7.5, 1e20, -1e20}, bv[8] = {3, 3, -2, -2, 5, 2.5, 3, 3};
  const double want_gb[8] = {-2, 2, 3, -3, 0, -3, -3.333333333333333e+19, 3.333333333333333e+19};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    double ga[8], gb[8];
    remainder_grads(av, bv, 8, ga, gb);
    for (int i = 0; i < 8; i++) {
      if (ga[i] != 1) fail_msg("d/da [%d]: got %g, want 1", i, ga[i]);
      if (!tu_near(gb[i], want_gb[i], 1e-15))
        fail_msg("d/db [%d]: got %.17g, want %.17g", i, gb[i], want_gb[i]);
    }
    /* and the one-sided differences where the remainder is 0 (the first 6) */
    for (int i = 0; i < 6; i++) {
      if (remainder_at(av[i], bv[i]) != 0) continue;
      double sa = continuous_slope(av[i], bv[i], false), sb = continuous_slope(av[i], bv[i], true);
      if (!tu_near(ga[i], sa, 1e-6) || !tu_near(gb[i], sb, 1e-6))
        fail_msg("[%d]: backward (%g, %g), one-sided differences (%g, %g)", i, ga[i], gb[i], sa,
                 sb);
    }
    /* f32: a = torch.tensor([1e20, 6., -7.5]), b = torch.tensor([3., 3., 2.5]),
     * remainder(a, b).sum().backward(): a.grad = [1, 1, 1],
     * b.grad = [-3.3333333268354826e+19, -2.0, 3.0] */
    lt_scope_begin();
    lt_tensor *fa = tu_f32(SHAPE(3), 1, (float[]){1e20f, 6, -7.5f});
    lt_tensor *fb = tu_f32(SHAPE(3), 1, (float[]){3, 3, 2.5f});
    lt_set_requires_grad(fa, true);
    lt_set_requires_grad(fb, true);
    assert_int_equal(lt_backward(lt_sum(lt_remainder(fa, fb), NULL, 0, false)), LT_OK);
    expect_exact(lt_grad(fa), LT_F32, (double[]){1, 1, 1}, 3);
    expect_exact(lt_grad(fb), LT_F32, (double[]){-3.3333333268354826e+19, -2, 3}, 3);
    lt_scope_end();
    /* central differences at points away from the jumps */
    double *x = tg_vals(12, 0.7), *y = tg_vals(12, 2.1);
    tg_input in[2] = {{SHAPE(12), 1, x, true, LT_F64}, {SHAPE(12), 1, y, true, LT_F64}};
    tg_check("remainder", apply_rem, NULL, in, 2, 1e-5);
    lt__backend_force(NULL);
  }
}

/* ---- var / std of f32 beyond the f32 range of the squares ----------------------------- */

TU_BOTH(test_f32_var_std_no_overflow) {
  lt_tensor *x = tu_f32(SHAPE(2), 1, (float[]){3e19f, -3e19f});
  /* torch.std(torch.tensor([3e19, -3e19])) = 4.242640658024838e+19; torch.var of it is inf
   * (1.8e39 > FLT_MAX) */
  tu_expect(lt_std(x, NULL, 0, 1, false), LT_F32, NULL, 0, (double[]){4.242640658024838e+19},
            3 * FLT_EPSILON);
  tu_expect(lt_var(x, NULL, 0, 1, false), LT_F32, NULL, 0, (double[]){INFINITY}, 0);
  /* y = torch.tensor([[3e19, -3e19, 1e19], [1e-20, -2e-20, 5e-20]]):
   * torch.std(y, dim=1) = [3.0550506721849115e+19, 3.51188447100367e-20],
   * torch.var(y, dim=1, unbiased=False) = [inf, 8.222216830318367e-40] (an f32 subnormal) */
  lt_tensor *y = tu_f32(SHAPE(2, 3), 2, (float[]){3e19f, -3e19f, 1e19f, 1e-20f, -2e-20f, 5e-20f});
  tu_expect(lt_std(y, (int[]){1}, 1, 1, false), LT_F32, SHAPE(2), 1,
            (double[]){3.0550506721849115e+19, 3.51188447100367e-20}, 3 * FLT_EPSILON);
  lt_tensor *v = lt_var(y, (int[]){1}, 1, 0, true);
  assert_non_null(v);
  assert_int_equal(lt_get_dtype(v), LT_F32);
  assert_int_equal(lt_ndim(v), 2);
  double vv[2];
  tu_read(v, vv, 2);
  assert_true(vv[0] == INFINITY);
  /* the subnormal keeps 14 of f32's 24 bits: within 2^-13 relative */
  assert_true(fabs(vv[1] - 8.222216830318367e-40) <= 8.222216830318367e-40 * 0x1p-13);
  /* z = torch.tensor([1e19, 2e19, -1.5e19, 0.5e19]): torch.var(z) = 2.1666667833173214e+38,
   * torch.std(z, unbiased=False) = 1.2747548696434967e+19 */
  lt_tensor *z = tu_f32(SHAPE(4), 1, (float[]){1e19f, 2e19f, -1.5e19f, 0.5e19f});
  tu_expect(lt_var(z, NULL, 0, 1, false), LT_F32, NULL, 0, (double[]){2.1666667833173214e+38},
            3 * FLT_EPSILON);
  tu_expect(lt_std(z, NULL, 0, 0, false), LT_F32, NULL, 0, (double[]){1.2747548696434967e+19},
            3 * FLT_EPSILON);
  /* the gradient: x = torch.tensor([3e19, -3e19, 1e19], requires_grad=True);
   * torch.std(x).backward(): x.grad = [0.436435729265213, -0.5455446839332581,
   * 0.10910893231630325] */
  lt_tensor *w = tu_f32(SHAPE(3), 1, (float[]){3e19f, -3e19f, 1e19f});
  lt_set_requires_grad(w, true);
  assert_int_equal(lt_backward(lt_std(w, NULL, 0, 1, false)), LT_OK);
  tu_expect(lt_grad(w), LT_F32, SHAPE(3), 1,
            (double[]){0.436435729265213, -0.5455446839332581, 0.10910893231630325},
            3 * FLT_EPSILON);
}

/* ---- scatter's value form converts with torch's overflow check ------------------------- */

TU_BOTH(test_scatter_value_overflow) {
  lt_tensor *idx = tu_i64(SHAPE(2), 1, (int64_t[]){0, 2});
  lt_tensor *u = lt_cast(tu_i32(SHAPE(3), 1, (int32_t[]){1, 2, 3}), LT_U8);
  /* torch.zeros(3, dtype=torch.uint8).scatter(0, torch.tensor([0, 2]), 256): "value cannot
   * be converted to type uint8_t without overflow"; so for 255.5 and -256. torch 1.13 wraps
   * -255..-1 (-1 gives 255); as lt_masked_fill, u8 takes [0, 255] only. */
  TU_EXPECT_ERROR(lt_scatter(u, 0, idx, tu_i32(NULL, 0, (int32_t[]){-1})), LT_EINVAL,
                  "lt_scatter: value -1 cannot be converted to u8");
  TU_EXPECT_ERROR(lt_scatter(u, 0, idx, tu_i32(NULL, 0, (int32_t[]){256})), LT_EINVAL, "overflow");
  TU_EXPECT_ERROR(lt_scatter(u, 0, idx, tu_f64(NULL, 0, (double[]){255.5})), LT_EINVAL, "overflow");
  /* a value computed lazily is read too (2 - 3 = -1) */
  lt_tensor *lazy = lt_sub(tu_i32(NULL, 0, (int32_t[]){2}), tu_i32(NULL, 0, (int32_t[]){3}));
  TU_EXPECT_ERROR(lt_scatter(u, 0, idx, lazy), LT_EINVAL, "overflow");
  /* ... and the input keeps its value */
  tu_expect(u, LT_U8, SHAPE(3), 1, (double[]){1, 2, 3}, 0);
  /* torch.zeros(3, dtype=torch.int8).scatter(0, i, 128): overflow */
  lt_tensor *i8 = lt_zeros(CPU0, LT_I8, SHAPE(3), 1);
  TU_EXPECT_ERROR(lt_scatter(i8, 0, idx, tu_i32(NULL, 0, (int32_t[]){128})), LT_EINVAL, "i8");
  /* torch.zeros(3, dtype=torch.float32).scatter(0, i, 1e39): overflow; inf is taken */
  lt_tensor *f = lt_zeros(CPU0, LT_F32, SHAPE(3), 1);
  TU_EXPECT_ERROR(lt_scatter(f, 0, idx, tu_f64(NULL, 0, (double[]){1e39})), LT_EINVAL, "f32");
  tu_expect(lt_scatter(f, 0, idx, tu_f64(NULL, 0, (double[]){INFINITY})), LT_F32, SHAPE(3), 1,
            (double[]){INFINITY, 0, INFINITY}, 0);
  /* values that fit: torch.zeros(3, dtype=torch.uint8).scatter(0, i, 255) = [255, 0, 255];
   * torch.zeros(3, dtype=torch.int32).scatter(0, i, -2.5) = [-2, 0, -2] */
  tu_expect(lt_scatter(u, 0, idx, tu_i32(NULL, 0, (int32_t[]){255})), LT_U8, SHAPE(3), 1,
            (double[]){255, 2, 255}, 0);
  tu_expect(
      lt_scatter(lt_zeros(CPU0, LT_I32, SHAPE(3), 1), 0, idx, tu_f64(NULL, 0, (double[]){-2.5})),
      LT_I32, SHAPE(3), 1, (double[]){-2, 0, -2}, 0);
}

/* ---- integer arange: torch 1.13's ------------------------------------------------------- */

TU_BOTH(test_int_arange_torch) {
  /* torch.arange(-3, 3, 0.5, dtype=torch.int64): "step must be nonzero" (numpy's
   * np.arange(-3, 3, 0.5, dtype=np.int64) is -3, -2, ..., 8) */
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I64, -3, 3, 0.5), LT_EINVAL, "non-zero step");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I32, -3, 3, 0.5), LT_EINVAL, "truncated");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_U8, 0, 5, -0.5), LT_EINVAL, "lt_arange");
  /* the float dtypes keep the step: torch.arange(-3, 3, 0.5) has 12 elements */
  tu_expect(lt_arange(CPU0, LT_F32, -3, 3, 0.5), LT_F32, SHAPE(12), 1,
            (double[]){-3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5}, 0);
  /* torch.arange(-2.5, 3, 1.5, dtype=torch.int64) = [-2, -1, 0, 1, 2]; int32: [-2, -1, 0, 1];
   * uint8: [254, 255, 0, 1] */
  tu_expect(lt_arange(CPU0, LT_I64, -2.5, 3, 1.5), LT_I64, SHAPE(5), 1, (double[]){-2, -1, 0, 1, 2},
            0);
  tu_expect(lt_arange(CPU0, LT_I32, -2.5, 3, 1.5), LT_I32, SHAPE(4), 1, (double[]){-2, -1, 0, 1},
            0);
  tu_expect(lt_arange(CPU0, LT_U8, -2.5, 3, 1.5), LT_U8, SHAPE(4), 1, (double[]){254, 255, 0, 1},
            0);
  /* torch.arange(3, -3, -1.5, dtype=torch.int64) = [3, 2, 1, 0, -1, -2]; int32: [3, 2, 1, 0] */
  tu_expect(lt_arange(CPU0, LT_I64, 3, -3, -1.5), LT_I64, SHAPE(6), 1,
            (double[]){3, 2, 1, 0, -1, -2}, 0);
  tu_expect(lt_arange(CPU0, LT_I32, 3, -3, -1.5), LT_I32, SHAPE(4), 1, (double[]){3, 2, 1, 0}, 0);
  /* bounds in order once truncated: torch.arange(0.9, -0.9, 1, dtype=torch.int64) = [];
   * int32: "invalid size, possible overflow?"; torch.arange(2.5, 2.2, -1, dtype=torch.int32)
   * = [2] */
  tu_expect(lt_arange(CPU0, LT_I64, 0.9, -0.9, 1), LT_I64, SHAPE(0), 1, NULL, 0);
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I32, 0.9, -0.9, 1), LT_EINVAL, "negative length");
  tu_expect(lt_arange(CPU0, LT_I32, 2.5, 2.2, -1), LT_I32, SHAPE(1), 1, (double[]){2}, 0);
  /* ordinary ranges: torch.arange(0, 5, 2, dtype=torch.int32) = [0, 2, 4] */
  tu_expect(lt_arange(CPU0, LT_I32, 0, 5, 2), LT_I32, SHAPE(3), 1, (double[]){0, 2, 4}, 0);
}

/* ---- mse_loss promotes after broadcasting ------------------------------------------------ */

TU_BOTH(test_mse_0d_target_promotes) {
  lt_tensor *x = tu_f32(SHAPE(3), 1, (float[]){1, 2, 4});
  lt_tensor *t = tu_f64(NULL, 0, (double[]){2.5});
  /* F.mse_loss(torch.tensor([1., 2., 4.]), torch.tensor(2.5, dtype=torch.float64)):
   * tensor(1.5833, dtype=torch.float64) (19 / 12); sum 4.75; none [2.25, 0.25, 2.25] */
  tu_expect(lt_nn_mse_loss(x, t, LT_NN_REDUCTION_MEAN), LT_F64, NULL, 0, (double[]){19.0 / 12},
            1e-15);
  tu_expect(lt_nn_mse_loss(x, t, LT_NN_REDUCTION_SUM), LT_F64, NULL, 0, (double[]){4.75}, 0);
  tu_expect(lt_nn_mse_loss(x, t, LT_NN_REDUCTION_NONE), LT_F64, SHAPE(3), 1,
            (double[]){2.25, 0.25, 2.25}, 0);
  /* both 0-d: F.mse_loss(torch.tensor(1.5), torch.tensor(0.25, dtype=torch.float64))
   * = tensor(1.5625, dtype=torch.float64) */
  tu_expect(lt_nn_mse_loss(tu_f32(NULL, 0, (float[]){1.5f}), tu_f64(NULL, 0, (double[]){0.25}),
                           LT_NN_REDUCTION_MEAN),
            LT_F64, NULL, 0, (double[]){1.5625}, 0);
  /* F.mse_loss(torch.tensor([1., 2.], dtype=torch.float64), torch.tensor(0.5)) = 1.25, f64 */
  tu_expect(lt_nn_mse_loss(tu_f64(SHAPE(2), 1, (double[]){1, 2}), tu_f32(NULL, 0, (float[]){0.5f}),
                           LT_NN_REDUCTION_MEAN),
            LT_F64, NULL, 0, (double[]){1.25}, 0);
  /* the gradient reaches the f32 input in f32: d/dx mean((x - t)^2) = 2 (x - t) / 3 */
  lt_set_requires_grad(x, true);
  assert_int_equal(lt_backward(lt_nn_mse_loss(x, t, LT_NN_REDUCTION_MEAN)), LT_OK);
  tu_expect(lt_grad(x), LT_F32, SHAPE(3), 1, (double[]){-1, -1.0 / 3, 1}, 3 * FLT_EPSILON);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_remainder_exact_f32),       TU_TEST(test_remainder_exact_f64),
      TU_TEST(test_remainder_grad_everywhere), TU_TEST(test_f32_var_std_no_overflow),
      TU_TEST(test_scatter_value_overflow),    TU_TEST(test_int_arange_torch),
      TU_TEST(test_mse_0d_target_promotes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
