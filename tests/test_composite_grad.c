/* Autograd through the composite ops (finite differences, f64), the gradient
 * conventions they take from torch (hand values), and lt_detach / the no-grad
 * scope, which make values autograd treats as constants. */
#include <pthread.h>

#include "test_grad_util.h"
#include "test_backends.h"

/* ---- var / std / norm -------------------------------------------------------------- */

typedef struct red_case {
  lt_tensor *(*f)(lt_tensor *, const int *, int, double, bool);
  const int *axes;
  int naxes;
  double arg; /* correction or ord */
  bool keep;
} red_case;

static lt_tensor *apply_var(lt_tensor *const *in, void *ud) {
  const red_case *c = ud;
  return c->f(in[0], c->axes, c->naxes, c->arg, c->keep);
}

static lt_tensor *apply_norm(lt_tensor *const *in, void *ud) {
  const red_case *c = ud;
  return lt_vector_norm(in[0], c->axes, c->naxes, c->arg, c->keep);
}

static void test_var_std_grad(void **state) {
  (void)state;
  static const int ax1[] = {1}, ax02[] = {0, -1};
  double *x = tg_vals(24, 0.4);
  tg_input in = {SHAPE(2, 3, 4), 3, x, true, LT_F64};
  const red_case cases[] = {
      {lt_var, NULL, 0, 1, false}, {lt_var, ax1, 1, 0, true},  {lt_var, ax02, 2, 1, false},
      {lt_std, NULL, 0, 1, false}, {lt_std, ax1, 1, 1, false}, {lt_std, ax02, 2, 0.5, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    tg_check("var/std", apply_var, (void *)&cases[i], &in, 1, 1e-5);
}

static void test_norm_grad(void **state) {
  (void)state;
  static const int ax1[] = {1}, axm[] = {-1, 0};
  double *x = tg_vals(12, 0.9);
  tg_input in = {SHAPE(3, 4), 2, x, true, LT_F64};
  const double ords[] = {2, 1, 3, 0.5, -1, 1.5, INFINITY, -INFINITY};
  for (size_t k = 0; k < sizeof ords / sizeof ords[0]; k++) {
    red_case all = {NULL, NULL, 0, ords[k], false}, rows = {NULL, ax1, 1, ords[k], true},
             both = {NULL, axm, 2, ords[k], false};
    tg_check("norm", apply_norm, &all, &in, 1, 1e-5);
    tg_check("norm rows", apply_norm, &rows, &in, 1, 1e-5);
    tg_check("norm both", apply_norm, &both, &in, 1, 1e-5);
  }
}

/* torch's conventions where the norm is not differentiable: 0 where the norm
 * is 0 (not NaN), 0 at zero elements for ord < 1; the inf norm splits the
 * gradient among its ties. */
static void test_norm_grad_conventions(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *z = lt_zeros(CPU0, LT_F64, SHAPE(3), 1);
    lt_tensor *p = tu_f64(SHAPE(3), 1, (double[]){0, 4, -1});
    lt_tensor *t = tu_f64(SHAPE(4), 1, (double[]){3, -3, 1, 2});
    lt_set_requires_grad(z, true);
    lt_set_requires_grad(p, true);
    lt_set_requires_grad(t, true);
    lt_tensor *loss =
        lt_add(lt_add(lt_vector_norm(z, NULL, 0, 2, false), lt_vector_norm(z, NULL, 0, 3, false)),
               lt_add(lt_vector_norm(p, NULL, 0, 0.5, false),
                      lt_vector_norm(t, NULL, 0, INFINITY, false)));
    assert_int_equal(lt_backward(loss), LT_OK);
    double gz[3], gp[3], gt[4];
    tu_read_grad(z, gz, 3);
    tu_read_grad(p, gp, 3);
    tu_read_grad(t, gt, 4);
    for (int i = 0; i < 3; i++) assert_true(gz[i] == 0);
    /* ord 0.5 of [0 4 -1]: (2 + 1)^2 = 9; d/dx = 9^(1/2) |x|^(-1/2) sign(x) */
    assert_true(gp[0] == 0);
    assert_true(tu_near(gp[1], 3.0 / 2, 1e-12) && tu_near(gp[2], -3.0, 1e-12));
    assert_true(gt[0] == 0.5 && gt[1] == -0.5 && gt[2] == 0 && gt[3] == 0);
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* ---- remainder / floor_divide --------------------------------------------------------- */

static lt_tensor *apply_rem(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_remainder(in[0], in[1]);
}

static void test_remainder_grad(void **state) {
  (void)state;
  /* quotients well away from integers, both signs (a and b of different
   * shapes: broadcasting sums b's gradient) */
  double av[6] = {5.3, -5.3, 7.7, -0.4, 2.2, -9.1}, bv[3] = {2.1, -1.7, 0.9};
  tg_input in[2] = {{SHAPE(2, 3), 2, av, true, LT_F64}, {SHAPE(3), 1, bv, true, LT_F64}};
  tg_check("remainder", apply_rem, NULL, in, 2, 1e-5);
  /* by hand: d/da = 1, d/db = -floor(a / b); floor_divide has no gradient */
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *a = tu_f64(SHAPE(2), 1, (double[]){7, -7});
    lt_tensor *b = tu_f64(NULL, 0, (double[]){2});
    lt_set_requires_grad(a, true);
    lt_set_requires_grad(b, true);
    lt_tensor *y = lt_add(lt_remainder(a, b), lt_floor_divide(a, b));
    assert_int_equal(lt_backward(lt_sum(y, NULL, 0, false)), LT_OK);
    double ga[2], gb[1];
    tu_read_grad(a, ga, 2);
    tu_read_grad(b, gb, 1);
    assert_true(ga[0] == 1 && ga[1] == 1);
    assert_true(tu_near(gb[0], -(3.0 + -4.0), 1e-12));
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* ---- scatter_add / scatter / index_add ---------------------------------------------------- */

static lt_tensor *apply_scatter_add(lt_tensor *const *in, void *ud) {
  return lt_scatter_add(in[0], *(int *)ud, in[2], in[1]);
}
static lt_tensor *apply_scatter(lt_tensor *const *in, void *ud) {
  return lt_scatter(in[0], *(int *)ud, in[2], in[1]);
}
static lt_tensor *apply_index_add(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_index_add(in[0], 0, in[2], in[1], 2.5);
}

static void test_scatter_grad(void **state) {
  (void)state;
  int ax0 = 0, ax1 = -1;
  /* a [3, 4], src [2, 4] of which index [2, 3] uses the first 3 columns */
  tg_input in[3] = {{SHAPE(3, 4), 2, tg_vals(12, 0.2), true, LT_F64},
                    {SHAPE(2, 4), 2, tg_vals(8, 1.3), true, LT_F64},
                    {SHAPE(2, 3), 2, (double[]){2, 0, 1, 0, 0, 2}, false, LT_I64}};
  tg_check("scatter_add axis 0 (repeats add)", apply_scatter_add, &ax0, in, 3, 1e-5);
  tg_check("scatter axis 0 (repeats average)", apply_scatter, &ax0, in, 3, 1e-5);
  /* no repeats along the last axis: torch's exact replacement */
  in[2].values = (double[]){3, 0, 1, 2, 1, 0};
  tg_check("scatter_add axis 1", apply_scatter_add, &ax1, in, 3, 1e-5);
  tg_check("scatter axis 1", apply_scatter, &ax1, in, 3, 1e-5);
  /* index_add: a [4, 3], src [3, 3], index with a repeat */
  tg_input ia[3] = {{SHAPE(4, 3), 2, tg_vals(12, 2.1), true, LT_F64},
                    {SHAPE(3, 3), 2, tg_vals(9, 0.7), true, LT_F64},
                    {SHAPE(3), 1, (double[]){3, 0, 3}, false, LT_I64}};
  tg_check("index_add", apply_index_add, NULL, ia, 3, 1e-5);
}

/* ---- flip / roll / repeat / split / chunk --------------------------------------------------- */

static lt_tensor *apply_flip(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_flip(in[0], (int[]){0, -1}, 2);
}
static lt_tensor *apply_roll(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_add(lt_roll(in[0], (int64_t[]){1, -5}, 2, (int[]){0, 1}, 2),
                lt_roll(in[0], (int64_t[]){7}, 1, NULL, 0));
}
static lt_tensor *apply_repeat(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_repeat(in[0], (int64_t[]){2, 1, 3}, 3);
}
/* The pieces scaled differently, flattened and put back together, so that
 * each piece's gradient is told apart. */
static lt_tensor *apply_pieces(lt_tensor *const *in, void *ud) {
  lt_tensor *p[8];
  int n = ud ? lt_chunk(in[0], 3, 1, p, 8) : lt_split(in[0], (int64_t[]){1, 3}, 2, 1, p, 8);
  if (n < 0) return NULL;
  for (int i = 0; i < n; i++)
    p[i] = lt_reshape(lt_mul(p[i], lt_scalar(CPU0, LT_F64, 1.5 + i)), (int64_t[]){-1}, 1);
  return lt_concat(p, n, 0);
}

static void test_shape_composites_grad(void **state) {
  (void)state;
  tg_input in = {SHAPE(3, 4), 2, tg_vals(12, 0.5), true, LT_F64};
  tg_check("flip", apply_flip, NULL, &in, 1, 1e-5);
  tg_check("roll", apply_roll, NULL, &in, 1, 1e-5);
  tg_check("split", apply_pieces, NULL, &in, 1, 1e-5);
  tg_check("chunk", apply_pieces, (void *)1, &in, 1, 1e-5);
  tg_input in2 = {SHAPE(2, 3), 2, tg_vals(6, 0.5), true, LT_F64};
  tg_check("repeat", apply_repeat, NULL, &in2, 1, 1e-5);
}

/* ---- lt_detach --------------------------------------------------------------------------------
 */

static void test_detach(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *x = tu_f64(SHAPE(2), 1, (double[]){1.5, -2});
    assert_int_equal(lt_set_requires_grad(x, true), LT_OK);
    lt_tensor *y = lt_mul(x, x);
    lt_tensor *d = lt_detach(y);
    assert_false(lt_get_requires_grad(d));
    /* sum(detach(x^2) * x): the gradient is x^2, not 3 x^2 */
    assert_int_equal(lt_backward(lt_sum(lt_mul(d, x), NULL, 0, false)), LT_OK);
    tu_expect(lt_grad(x), LT_F64, SHAPE(2), 1, (double[]){2.25, 4}, 0);
    tu_expect(d, LT_F64, SHAPE(2), 1, (double[]){2.25, 4}, 0);
    /* a detached leaf: sum(detach(x) * x) gives x; x itself stays differentiable */
    lt_zero_grad(x);
    assert_int_equal(lt_backward(lt_sum(lt_mul(lt_detach(x), x), NULL, 0, false)), LT_OK);
    tu_expect(lt_grad(x), LT_F64, SHAPE(2), 1, (double[]){1.5, -2}, 0);
    lt_zero_grad(x);
    assert_int_equal(lt_backward(lt_sum(lt_mul(x, x), NULL, 0, false)), LT_OK);
    tu_expect(lt_grad(x), LT_F64, SHAPE(2), 1, (double[]){3, -4}, 0);
    /* nothing differentiable left: torch's "does not require grad" */
    lt_clear_error();
    assert_int_equal(lt_backward(lt_sum(lt_detach(x), NULL, 0, false)), LT_EINVAL);
    tu_expect_substr(lt_last_error(), "does not depend");
    assert_int_equal(lt_backward(lt_detach(lt_sum(lt_mul(x, x), NULL, 0, false))), LT_EINVAL);
    tu_expect_substr(lt_last_error(), "without autograd");
    /* requires_grad on a detached tensor makes it a leaf of its own */
    lt_zero_grad(x);
    lt_tensor *e = lt_detach(lt_mul(x, lt_scalar(CPU0, LT_F64, 3)));
    assert_int_equal(lt_set_requires_grad(e, true), LT_OK);
    assert_int_equal(lt_backward(lt_sum(lt_mul(e, e), NULL, 0, false)), LT_OK);
    tu_expect(lt_grad(e), LT_F64, SHAPE(2), 1, (double[]){9, -12}, 0);
    assert_null(lt_grad(x));
    /* a synced (device data) value and an integer one */
    lt_tensor *s = lt_mul(x, x);
    assert_int_equal(lt_sync(&s, 1, true), LT_OK);
    tu_expect(lt_detach(s), LT_F64, SHAPE(2), 1, (double[]){2.25, 4}, 0);
    tu_expect(lt_detach(tu_i32(SHAPE(1), 1, (int32_t[]){7})), LT_I32, SHAPE(1), 1, (double[]){7},
              0);
    lt_clear_error();
    assert_null(lt_detach(NULL));
    assert_int_equal(lt_last_status(), LT_EINVAL);
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* ---- the no-grad scope --------------------------------------------------------------------------
 */

static void *read_no_grad(void *arg) {
  *(bool *)arg = lt_get_no_grad();
  return NULL;
}

static void test_no_grad(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *x = tu_f64(SHAPE(2), 1, (double[]){1.5, -2});
    lt_tensor *w = tu_f64(SHAPE(2), 1, (double[]){0.5, 3});
    lt_set_requires_grad(x, true);
    lt_set_requires_grad(w, true);
    assert_false(lt_get_no_grad());
    lt_no_grad_begin();
    assert_true(lt_get_no_grad());
    lt_tensor *y = lt_mul(x, x);
    /* an identity op inside the scope must not take x's differentiability away */
    lt_tensor *same = lt_reshape(x, SHAPE(2), 1);
    lt_no_grad_begin(); /* nested */
    lt_no_grad_end();
    assert_true(lt_get_no_grad());
    bool other = true; /* thread-local: another thread is not in the scope */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_no_grad, &other), 0);
    pthread_join(th, NULL);
    assert_false(other);
    lt_no_grad_end();
    assert_false(lt_get_no_grad());
    lt_no_grad_end(); /* an end without a begin does nothing */
    assert_false(lt_get_no_grad());
    /* sum(y w) + sum(same) + sum(x x): w gets y = x^2, x only 2 x */
    lt_tensor *loss =
        lt_add(lt_add(lt_sum(lt_mul(y, w), NULL, 0, false), lt_sum(same, NULL, 0, false)),
               lt_sum(lt_mul(x, x), NULL, 0, false));
    assert_int_equal(lt_backward(loss), LT_OK);
    tu_expect(lt_grad(w), LT_F64, SHAPE(2), 1, (double[]){2.25, 4}, 0);
    tu_expect(lt_grad(x), LT_F64, SHAPE(2), 1, (double[]){3, -4}, 0);
    /* a loss made inside the scope has no gradient */
    lt_no_grad_begin();
    lt_tensor *l2 = lt_sum(lt_mul(x, w), NULL, 0, false);
    lt_no_grad_end();
    lt_clear_error();
    assert_int_equal(lt_backward(l2), LT_EINVAL);
    tu_expect_substr(lt_last_error(), "without autograd");
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* SGD written by hand, the update inside the scope (as torch's optimizers):
 * each step's gradient is that of the current parameter only. */
static void test_no_grad_update_loop(void **state) {
  (void)state;
  lt_tensor *p = tu_f64(SHAPE(2), 1, (double[]){1, -3});
  lt_set_requires_grad(p, true);
  double want[2] = {1, -3};
  for (int step = 0; step < 3; step++) {
    lt_scope_begin();
    assert_int_equal(lt_backward(lt_sum(lt_mul(p, p), NULL, 0, false)), LT_OK);
    lt_no_grad_begin();
    assert_int_equal(lt_assign(p, lt_sub(p, lt_mul(lt_grad(p), lt_scalar(CPU0, LT_F64, 0.1)))),
                     LT_OK);
    lt_no_grad_end();
    lt_zero_grad(p);
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    lt_scope_end();
    for (int i = 0; i < 2; i++) want[i] *= 0.8;
  }
  assert_true(lt_get_requires_grad(p));
  tu_expect(p, LT_F64, SHAPE(2), 1, want, 1e-15);
  lt_scope_begin();
  assert_int_equal(lt_backward(lt_sum(lt_mul(p, p), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(p), LT_F64, SHAPE(2), 1, (double[]){2 * want[0], 2 * want[1]}, 1e-15);
  lt_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_var_std_grad),   TU_TEST(test_norm_grad),    TU_TEST(test_norm_grad_conventions),
      TU_TEST(test_remainder_grad), TU_TEST(test_scatter_grad), TU_TEST(test_shape_composites_grad),
      TU_TEST(test_detach),         TU_TEST(test_no_grad),      TU_TEST(test_no_grad_update_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
