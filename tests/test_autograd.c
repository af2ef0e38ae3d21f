/* Autograd: the API, its errors, and finite-difference checks (f64) of the
 * elementwise ops' gradients, including broadcasting. */
#include "test_grad_util.h"
#include "test_backends.h"

typedef lt_tensor *(*un_op)(lt_tensor *);
typedef lt_tensor *(*bin_op)(lt_tensor *, lt_tensor *);

static lt_tensor *apply_un(lt_tensor *const *in, void *ud) { return ((un_op)ud)(in[0]); }
static lt_tensor *apply_bin(lt_tensor *const *in, void *ud) { return ((bin_op)ud)(in[0], in[1]); }

static const double kX[6] = {0.3, -1.2, 0.7, 1.9, -0.4, 0.05};
static const double kPos[6] = {0.3, 1.2, 0.7, 1.9, 0.4, 2.5};
static const double kY[3] = {0.9, -0.6, 1.4};
static const double kYPos[3] = {0.9, 0.6, 1.4};
/* The binary ops' second operands: no ratio of an a to a b is an integer,
 * where remainder jumps and a finite difference has no meaning. */
static const double kB[3] = {0.9, -0.65, 1.4};
static const double kBPos[6] = {0.32, 1.17, 0.73, 1.93, 0.41, 2.57};

/* The points of a DOMAIN column of lazytensor_ops.h: all of them inside. */
#define POINTS_REAL kX
#define POINTS_NONNEG kPos
#define POINTS_ABOVE_M1 kPos
#define POINTS_NONE kX
#define POINTS_ZERO_OVER_ZERO kX
#define POINTS_ZERO_DIVISOR kX
#define POINTS_FRACTIONAL_POWER kPos

typedef struct {
  const char *name;
  un_op f;
  const double *x;
} unary_case;
typedef struct {
  const char *name;
  bin_op f;
  const double *a;
} binary_case;

/* Every differentiable (GRAD DIFF) unary and elementwise binary op of
 * lazytensor_ops.h; matmul has tests of its own (test_autograd_ops.c). */
#define UNARY_CASE_DIFF(name, domain) {#name, lt_##name, POINTS_##domain},
#define UNARY_CASE_NODIFF(name, domain)
#define UNARY_CASE(name, build, ir, dtype, domain, grad) UNARY_CASE_##grad(name, domain)
#define BINARY_CASE_ELEMENTWISE_DIFF(name, domain) {#name, lt_##name, POINTS_##domain},
#define BINARY_CASE_ELEMENTWISE_NODIFF(name, domain)
#define BINARY_CASE_CONTRACTION_DIFF(name, domain)
#define BINARY_CASE(name, build, ir, kind, domain, grad) BINARY_CASE_##kind##_##grad(name, domain)
static const unary_case kUnaryCases[] = {LT_UNARY_OPS(UNARY_CASE)};
static const binary_case kBinaryCases[] = {LT_BINARY_OPS(BINARY_CASE)};

static void test_unary_gradients(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kUnaryCases / sizeof kUnaryCases[0]; i++) {
    tg_input in = {SHAPE(2, 3), 2, kUnaryCases[i].x, true, LT_F64};
    tg_check(kUnaryCases[i].name, apply_un, (void *)kUnaryCases[i].f, &in, 1, 1e-5);
  }
}

static void test_binary_gradients_with_broadcasting(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kBinaryCases / sizeof kBinaryCases[0]; i++) {
    const binary_case *c = &kBinaryCases[i];
    tg_input ins[2] = {{SHAPE(2, 3), 2, c->a, true, LT_F64}, {SHAPE(3), 1, kB, true, LT_F64}};
    tg_check(c->name, apply_bin, (void *)c->f, ins, 2, 1e-5);
    tg_input swapped[2] = {{SHAPE(3, 1), 2, kYPos, true, LT_F64},
                           {SHAPE(2, 1, 3), 3, kBPos, true, LT_F64}};
    tg_check(c->name, apply_bin, (void *)c->f, swapped, 2, 1e-5);
  }
}

static lt_tensor *where_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_where(lt_gt(in[0], in[1]), lt_mul(in[0], in[0]), in[1]);
}
static lt_tensor *clamp_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_clamp(in[0], -0.5, 1.0);
}

static void test_where_clamp_cast(void **state) {
  (void)state;
  tg_input ins[2] = {{SHAPE(2, 3), 2, kX, true, LT_F64}, {SHAPE(3), 1, kY, true, LT_F64}};
  tg_check("where", where_fn, NULL, ins, 2, 1e-5);
  tg_check("clamp", clamp_fn, NULL, ins, 1, 1e-5);
  /* a cast passes the gradient through, converted (finite differences through
   * f32 are too coarse, so by hand: d/dx sum(f32(x) * f32(x)) = 2x) */
  lt_tensor *x = lt_from_data(CPU0, LT_F64, SHAPE(2), 1, (double[]){1.5, -2});
  lt_set_requires_grad(x, true);
  lt_tensor *x32 = lt_cast(x, LT_F32);
  assert_int_equal(lt_backward(lt_sum(lt_mul(x32, x32), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2), 1, (double[]){3, -4}, 0);
  /* no gradient flows into integers */
  lt_tensor *i = lt_from_data(CPU0, LT_I32, SHAPE(2), 1, (int32_t[]){1, 2});
  assert_int_equal(lt_backward(lt_sum(lt_mul(x, lt_cast(i, LT_F64)), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2), 1, (double[]){3 + 1, -4 + 2}, 0); /* accumulated */
}

static void test_ties_split_like_pytorch(void **state) {
  (void)state;
  lt_tensor *a = lt_from_data(CPU0, LT_F64, SHAPE(2), 1, (double[]){1, 2});
  lt_tensor *b = lt_from_data(CPU0, LT_F64, SHAPE(2), 1, (double[]){1, 3});
  lt_set_requires_grad(a, true);
  lt_set_requires_grad(b, true);
  assert_int_equal(lt_backward(lt_sum(lt_maximum(a, b), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(a), LT_F64, SHAPE(2), 1, (double[]){0.5, 0}, 0);
  tu_expect(lt_grad(b), LT_F64, SHAPE(2), 1, (double[]){0.5, 1}, 0);
  lt_tensor *z = lt_from_data(CPU0, LT_F64, SHAPE(3), 1, (double[]){-1, 0, 2});
  lt_set_requires_grad(z, true);
  assert_int_equal(lt_backward(lt_sum(lt_relu(z), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(z), LT_F64, SHAPE(3), 1, (double[]){0, 0, 1}, 0); /* relu'(0) = 0 */
}

static void test_accumulation_and_zero_grad(void **state) {
  (void)state;
  lt_tensor *x = lt_from_data(CPU0, LT_F32, SHAPE(2), 1, (float[]){1, 2});
  assert_int_equal(lt_set_requires_grad(x, true), LT_OK);
  assert_true(lt_get_requires_grad(x));
  assert_null(lt_grad(x));
  for (int i = 0; i < 2; i++)
    assert_int_equal(lt_backward(lt_sum(lt_mul(x, x), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F32, SHAPE(2), 1, (double[]){4, 8}, 0); /* 2x twice */
  assert_int_equal(lt_zero_grad(x), LT_OK);
  assert_null(lt_grad(x));
  /* a value used twice gets both contributions */
  lt_tensor *u = lt_exp(x);
  assert_int_equal(lt_backward(lt_sum(lt_add(u, lt_mul(u, x)), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F32, SHAPE(2), 1, (double[]){exp(1) * (1 + 1 + 1), exp(2) * (1 + 2 + 1)},
            1e-5);
}

static void test_errors(void **state) {
  (void)state;
  lt_tensor *x = lt_from_data(CPU0, LT_F32, SHAPE(2), 1, (float[]){1, 2});
  lt_tensor *i = lt_from_data(CPU0, LT_I32, SHAPE(2), 1, (int32_t[]){1, 2});
  assert_int_equal(lt_set_requires_grad(i, true), LT_EDTYPE);
  assert_non_null(strstr(lt_last_error(), "floating"));
  assert_int_equal(lt_set_requires_grad(NULL, true), LT_EINVAL);
  assert_int_equal(lt_backward(NULL), LT_EINVAL);
  lt_set_requires_grad(x, true);
  assert_int_equal(lt_backward(lt_mul(x, x)), LT_EINVAL); /* two elements */
  assert_non_null(strstr(lt_last_error(), "one floating element"));
  lt_tensor *y = lt_from_data(CPU0, LT_F32, SHAPE(2), 1, (float[]){1, 2});
  assert_int_equal(lt_backward(lt_sum(lt_exp(y), NULL, 0, false)), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "does not depend"));
  lt_tensor *loss = lt_sum(lt_exp(x), NULL, 0, false);
  float v;
  assert_int_equal(lt_to_data(loss, &v, sizeof v), LT_OK);
  assert_int_equal(lt_backward(loss), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "before reading"));
  assert_null(lt_grad(NULL));
}

/* issue 12, item 0: a = [0.5], b = [2] gave d/db exp(a*b) = 5.43656 (= d/da):
 * the gradient nodes g*b and g*a have one hash (same-shaped leaves hash
 * alike), and the graph key did not say which leaf each node reads, so the
 * second gradient read reused the executable compiled for the first. */
typedef struct prod_case {
  const char *name;
  un_op f;
  double (*df)(double); /* f'(y) */
} prod_case;
static double d_exp(double y) { return exp(y); }
static double d_sigmoid(double y) { return exp(-y) / ((1 + exp(-y)) * (1 + exp(-y))); }
static double d_sqrt(double y) { return 0.5 / sqrt(y); }
static double d_log(double y) { return 1 / y; }

static void test_same_shaped_leaves_in_a_product(void **state) {
  (void)state;
  const prod_case ops[] = {{"exp", lt_exp, d_exp},
                           {"sigmoid", lt_sigmoid, d_sigmoid},
                           {"sqrt", lt_sqrt, d_sqrt},
                           {"log", lt_log, d_log}};
  const double av[2] = {0.5, 1.5}, bv[2] = {2.0, 0.7};
  const int64_t shape[1] = {2};
  const int ndims[3] = {0, 1, 1}, sizes[3] = {1, 1, 2}; /* 0-d, [1], [2] */
  for (int be = 0; be < tu_nbackends(); be++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
      for (int s = 0; s < 3; s++) {
        lt__backend_force(tu_backends[be]);
        lt_scope_begin();
        int64_t sh[1] = {sizes[s]};
        lt_tensor *a = lt_from_data(CPU0, LT_F64, ndims[s] ? sh : shape, ndims[s], av);
        lt_tensor *b = lt_from_data(CPU0, LT_F64, ndims[s] ? sh : shape, ndims[s], bv);
        lt_set_requires_grad(a, true);
        lt_set_requires_grad(b, true);
        assert_int_equal(lt_backward(lt_sum(ops[o].f(lt_mul(a, b)), NULL, 0, false)), LT_OK);
        double ga[2], gb[2], want_a[2], want_b[2];
        for (int i = 0; i < sizes[s]; i++) {
          want_a[i] = ops[o].df(av[i] * bv[i]) * bv[i];
          want_b[i] = ops[o].df(av[i] * bv[i]) * av[i];
        }
        tu_read(lt_grad(a), ga, 2); /* one sync per gradient, as a user reads them */
        tu_read(lt_grad(b), gb, 2);
        for (int i = 0; i < sizes[s]; i++)
          if (!tu_near(ga[i], want_a[i], 1e-12) || !tu_near(gb[i], want_b[i], 1e-12))
            fail_msg("%s on %s, %d-d [%d]: grad a %.9g (want %.9g), grad b %.9g (want %.9g)",
                     ops[o].name, tu_backends[be]->name, ndims[s], i, ga[i], want_a[i], gb[i],
                     want_b[i]);
        lt_scope_end();
        lt__backend_force(NULL);
      }
}

/* The root cause of item 0 without autograd: (a-b)*(a-b) and (a-b)*(b-a) have
 * equal root hashes and read a and b in the same order, yet differ. */
static void test_graph_key_tells_which_leaf_a_node_reads(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *a = lt_from_data(CPU0, LT_F64, SHAPE(2), 1, (double[]){3, 1});
    lt_tensor *b = lt_from_data(CPU0, LT_F64, SHAPE(2), 1, (double[]){1, 4});
    tu_expect(lt_mul(lt_sub(a, b), lt_sub(a, b)), LT_F64, SHAPE(2), 1, (double[]){4, 9}, 0);
    tu_expect(lt_mul(lt_sub(a, b), lt_sub(b, a)), LT_F64, SHAPE(2), 1, (double[]){-4, -9}, 0);
    /* one node read twice, and two equal nodes: other graphs, same values */
    lt_tensor *d = lt_sub(a, b);
    tu_expect(lt_mul(d, d), LT_F64, SHAPE(2), 1, (double[]){4, 9}, 0);
    /* two roots: which root is which node */
    lt_tensor *r[2] = {lt_sub(a, b), lt_sub(b, a)};
    assert_int_equal(lt_sync(r, 2, true), LT_OK);
    tu_expect(r[0], LT_F64, SHAPE(2), 1, (double[]){2, -3}, 0);
    tu_expect(r[1], LT_F64, SHAPE(2), 1, (double[]){-2, 3}, 0);
    lt_tensor *q[2] = {lt_sub(b, a), lt_sub(a, b)};
    assert_int_equal(lt_sync(q, 2, true), LT_OK);
    tu_expect(q[0], LT_F64, SHAPE(2), 1, (double[]){-2, 3}, 0);
    tu_expect(q[1], LT_F64, SHAPE(2), 1, (double[]){2, -3}, 0);
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* issue 12, item 3: torch.clamp's gradient is 1 on [lo, hi], bounds included
 * (it was 0.5 there: maximum/minimum split ties), 0 outside and at NaN; the
 * value of a NaN stays NaN; with lo > hi every element is hi, gradient 0. */
static void test_clamp_gradient_at_bounds(void **state) {
  (void)state;
  const double x[7] = {-2, -0.5, 0, 1, 1.5, NAN, 0.25};
  float xf[7];
  for (int i = 0; i < 7; i++) xf[i] = (float)x[i];
  struct {
    double lo, hi;
    double value[7], grad[7];
  } cases[] = {
      {-0.5, 1, {-0.5, -0.5, 0, 1, 1, NAN, 0.25}, {0, 1, 1, 1, 0, 0, 1}},
      {-0.5, NAN, {-0.5, -0.5, 0, 1, 1.5, NAN, 0.25}, {0, 1, 1, 1, 1, 0, 1}},
      {NAN, 1, {-2, -0.5, 0, 1, 1, NAN, 0.25}, {1, 1, 1, 1, 0, 0, 1}},
      {0.25, 0.25, {0.25, 0.25, 0.25, 0.25, 0.25, NAN, 0.25}, {0, 0, 0, 0, 0, 0, 1}},
      {1, -0.5, {-0.5, -0.5, -0.5, -0.5, -0.5, NAN, -0.5}, {0, 0, 0, 0, 0, 0, 0}},
  };
  for (int be = 0; be < tu_nbackends(); be++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
      for (int dt = 0; dt < 2; dt++) {
        lt_dtype dtype = dt ? LT_F32 : LT_F64;
        lt__backend_force(tu_backends[be]);
        lt_scope_begin();
        lt_tensor *t = dt ? lt_from_data(CPU0, LT_F32, SHAPE(7), 1, xf)
                          : lt_from_data(CPU0, LT_F64, SHAPE(7), 1, x);
        lt_set_requires_grad(t, true);
        lt_tensor *y = lt_clamp(t, cases[c].lo, cases[c].hi);
        tu_expect(y, dtype, SHAPE(7), 1, cases[c].value, 0);
        assert_int_equal(lt_backward(lt_sum(lt_clamp(t, cases[c].lo, cases[c].hi), NULL, 0, false)),
                         LT_OK);
        tu_expect(lt_grad(t), dtype, SHAPE(7), 1, cases[c].grad, 0);
        lt_scope_end();
        lt__backend_force(NULL);
      }
}

/* torch.maximum / torch.minimum: a tie splits g evenly; a NaN in either
 * operand compares false both ways, so both get all of g
 * (where(a == b, g / 2, g) masked to 0 where the other operand wins). */
static void test_maximum_minimum_ties_and_nan(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *a = lt_from_data(CPU0, LT_F64, SHAPE(4), 1, (double[]){1, 2, NAN, 5});
    lt_tensor *b = lt_from_data(CPU0, LT_F64, SHAPE(4), 1, (double[]){1, 3, 0, NAN});
    lt_set_requires_grad(a, true);
    lt_set_requires_grad(b, true);
    assert_int_equal(lt_backward(lt_sum(lt_maximum(a, b), NULL, 0, false)), LT_OK);
    tu_expect(lt_grad(a), LT_F64, SHAPE(4), 1, (double[]){0.5, 0, 1, 1}, 0);
    tu_expect(lt_grad(b), LT_F64, SHAPE(4), 1, (double[]){0.5, 1, 1, 1}, 0);
    lt_zero_grad(a);
    lt_zero_grad(b);
    assert_int_equal(lt_backward(lt_sum(lt_minimum(a, b), NULL, 0, false)), LT_OK);
    tu_expect(lt_grad(a), LT_F64, SHAPE(4), 1, (double[]){0.5, 1, 1, 1}, 0);
    tu_expect(lt_grad(b), LT_F64, SHAPE(4), 1, (double[]){0.5, 0, 1, 1}, 0);
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_unary_gradients),
      TU_TEST(test_binary_gradients_with_broadcasting),
      TU_TEST(test_where_clamp_cast),
      TU_TEST(test_ties_split_like_pytorch),
      TU_TEST(test_accumulation_and_zero_grad),
      TU_TEST(test_errors),
      TU_TEST(test_same_shaped_leaves_in_a_product),
      TU_TEST(test_graph_key_tells_which_leaf_a_node_reads),
      TU_TEST(test_clamp_gradient_at_bounds),
      TU_TEST(test_maximum_minimum_ties_and_nan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
