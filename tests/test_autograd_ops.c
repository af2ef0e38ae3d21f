/* Autograd of the reductions, matmul, shape and index ops: finite-difference
 * checks (f64) over several shapes and axis sets, hand values for the cases
 * where the derivative is a convention (ties of max/min, zeros of prod), the
 * gradient ops' kernels, and a small MLP whose gradients are also derived by
 * hand. */
#include "test_grad_util.h"

#include "../src/ops/lt_ops.h" /* to build gradient-op nodes by hand */

/* n distinct values in [0.5, 1.5] (for prod). */
static double *pos_vals(int n, double seed) {
  double *v = tg_vals(n, seed);
  for (int i = 0; i < n; i++) v[i] = 1.0 + 0.24 * v[i];
  return v;
}

static int64_t numel_of(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* ---- reductions ------------------------------------------------------------------ */

typedef lt_tensor *(*red_fn)(lt_tensor *, const int *, int, bool);

typedef struct red_case {
  red_fn f;
  const int *axes;
  int naxes;
  bool keep;
} red_case;

static lt_tensor *apply_red(lt_tensor *const *in, void *ud) {
  const red_case *c = ud;
  return c->f(in[0], c->axes, c->naxes, c->keep);
}

static void check_reduction(const char *name, red_fn f, bool positive) {
  static const int ax1[] = {1}, axneg[] = {-1}, ax02[] = {0, 2}, axneg2[] = {-3, -2};
  struct {
    const int *axes;
    int naxes;
  } sets[] = {{ax1, 1}, {axneg, 1}, {ax02, 2}, {axneg2, 2}, {NULL, 0}};
  const int64_t *shape = SHAPE(2, 3, 4);
  double *x = positive ? pos_vals(24, 0.4) : tg_vals(24, 0.4);
  for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
    for (int keep = 0; keep < 2; keep++) {
      red_case c = {f, sets[s].axes, sets[s].naxes, keep != 0};
      tg_input in = {shape, 3, x, true, LT_F64};
      tg_check(name, apply_red, &c, &in, 1, 1e-5);
    }
  }
  /* 1-d, all axes; and a 0-d operand (its implicit axis) */
  double *y = positive ? pos_vals(5, 1.1) : tg_vals(5, 1.1);
  red_case all = {f, NULL, 0, false};
  tg_input in1 = {SHAPE(5), 1, y, true, LT_F64};
  tg_check(name, apply_red, &all, &in1, 1, 1e-5);
  static const int ax0[] = {0};
  red_case zero_d = {f, ax0, 1, true};
  tg_input in0 = {NULL, 0, y, true, LT_F64};
  tg_check(name, apply_red, &zero_d, &in0, 1, 1e-5);
}

static void test_sum_mean_logsumexp(void **state) {
  (void)state;
  check_reduction("sum", lt_sum, false);
  check_reduction("mean", lt_mean, false);
  check_reduction("logsumexp", lt_logsumexp, false);
}

static void test_max_min_prod(void **state) {
  (void)state;
  check_reduction("max", lt_max, false);
  check_reduction("min", lt_min, false);
  check_reduction("prod", lt_prod, true);
  check_reduction("prod (signs)", lt_prod, false);
}

static void test_max_min_ties_split_evenly(void **state) {
  (void)state;
  const double a[6] = {1, 3, 3, 2, 2, 2};
  lt_tensor *x = tu_f64(SHAPE(2, 3), 2, a);
  lt_set_requires_grad(x, true);
  assert_int_equal(lt_backward(lt_sum(lt_max(x, (int[]){1}, 1, false), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2, 3), 2, (double[]){0, 0.5, 0.5, 1. / 3, 1. / 3, 1. / 3},
            1e-12);
  lt_zero_grad(x);
  /* over everything: the two 3s share it */
  assert_int_equal(lt_backward(lt_max(x, NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2, 3), 2, (double[]){0, 0.5, 0.5, 0, 0, 0}, 1e-12);
  lt_zero_grad(x);
  /* min along axis 0 with keepdim, weighted by column: columns 0 and 1 tie
   * across the rows, column 2 does not */
  const double b[6] = {1, 2, 5, 1, 2, 4};
  lt_tensor *y = tu_f64(SHAPE(2, 3), 2, b);
  lt_set_requires_grad(y, true);
  lt_tensor *w = tu_f64(SHAPE(1, 3), 2, (double[]){10, 20, 30});
  assert_int_equal(lt_backward(lt_sum(lt_mul(lt_min(y, (int[]){0}, 1, true), w), NULL, 0, false)),
                   LT_OK);
  tu_expect(lt_grad(y), LT_F64, SHAPE(2, 3), 2, (double[]){5, 10, 0, 5, 10, 30}, 1e-12);
}

static void test_prod_with_zeros(void **state) {
  (void)state;
  /* rows: one zero, two zeros, none */
  const double a[9] = {2, 0, 3, 0, 0, 4, 1, 2, 3};
  lt_tensor *x = tu_f64(SHAPE(3, 3), 2, a);
  lt_set_requires_grad(x, true);
  assert_int_equal(lt_backward(lt_sum(lt_prod(x, (int[]){1}, 1, false), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(3, 3), 2, (double[]){0, 6, 0, 0, 0, 0, 6, 3, 2}, 1e-12);
  /* the same through finite differences (prod is linear in each element) */
  static const int ax1[] = {1}, ax0[] = {0};
  red_case rows = {lt_prod, ax1, 1, false}, cols = {lt_prod, ax0, 1, true};
  tg_input in = {SHAPE(3, 3), 2, a, true, LT_F64};
  tg_check("prod zeros rows", apply_red, &rows, &in, 1, 1e-5);
  tg_check("prod zeros cols", apply_red, &cols, &in, 1, 1e-5);
  red_case all = {lt_prod, NULL, 0, false};
  const double one_zero[4] = {1.5, -2, 0, 0.5};
  tg_input in1 = {SHAPE(4), 1, one_zero, true, LT_F64};
  tg_check("prod one zero", apply_red, &all, &in1, 1, 1e-5);
}

typedef struct axis_case {
  lt_tensor *(*f)(lt_tensor *, int);
  int axis;
} axis_case;

static lt_tensor *apply_axis(lt_tensor *const *in, void *ud) {
  const axis_case *c = ud;
  return c->f(in[0], c->axis);
}

static void test_softmax_log_softmax(void **state) {
  (void)state;
  double *x = tg_vals(24, 2.0);
  for (int log_form = 0; log_form < 2; log_form++) {
    lt_tensor *(*f)(lt_tensor *, int) = log_form ? lt_log_softmax : lt_softmax;
    const char *name = log_form ? "log_softmax" : "softmax";
    for (int axis = -2; axis < 2; axis++) {
      axis_case c = {f, axis};
      tg_input in = {SHAPE(3, 4), 2, x, true, LT_F64};
      tg_check(name, apply_axis, &c, &in, 1, 1e-5);
    }
    axis_case mid = {f, 1};
    tg_input in3 = {SHAPE(2, 3, 4), 3, x, true, LT_F64};
    tg_check(name, apply_axis, &mid, &in3, 1, 1e-5);
    axis_case z = {f, 0};
    tg_input in0 = {NULL, 0, x, true, LT_F64};
    tg_check(name, apply_axis, &z, &in0, 1, 1e-5);
  }
}

/* argmax / argmin carry no gradient, but a graph through them still works. */
static lt_tensor *argmax_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  lt_tensor *i = lt_argmax(in[0], 1, true);
  lt_tensor *j = lt_argmin(in[0], 1, true);
  return lt_add(lt_gather(in[0], 1, i), lt_mul(lt_gather(in[0], 1, j), lt_cast(i, LT_F64)));
}

static void test_argmax_argmin_no_gradient(void **state) {
  (void)state;
  tg_input in = {SHAPE(3, 4), 2, tg_vals(12, 0.9), true, LT_F64};
  tg_check("argmax", argmax_fn, NULL, &in, 1, 1e-5);
}

/* ---- matmul ---------------------------------------------------------------------- */

static lt_tensor *matmul_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_matmul(in[0], in[1]);
}

static lt_tensor *gram_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_matmul(in[0], lt_transpose(in[0], 0, 1));
}

/* torch's linear: x [.., 4] @ w^T with w [3, 4] (in[1]), plus a bias */
static lt_tensor *linear_t_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_add(lt_matmul(in[0], lt_transpose(in[1], 0, 1)), in[2]);
}

/* A weight used transposed (torch's layout): its gradient is finite-difference
 * right, and is made in the weight's own layout as one product g^T x, not a
 * transposed view of x^T g (which the optimizer's update would read strided). */
static void test_matmul_transposed_weight(void **state) {
  (void)state;
  const int64_t *xs[] = {SHAPE(5, 4), SHAPE(2, 3, 4)};
  int xn[] = {2, 3};
  for (int k = 0; k < 2; k++) {
    tg_input ins[3] = {
        {xs[k], xn[k], tg_vals(k ? 24 : 20, 0.3), true, LT_F64},
        {SHAPE(3, 4), 2, tg_vals(12, 0.8), true, LT_F64},
        {SHAPE(3), 1, tg_vals(3, 0.5), true, LT_F64},
    };
    tg_check(k ? "batch linear w^T" : "linear w^T", linear_t_fn, NULL, ins, 3, 1e-5);
  }
  lt_tensor *x = tu_f64(SHAPE(2, 2), 2, (double[]){1, 2, 3, 4});
  lt_tensor *w = tu_f64(SHAPE(1, 2), 2, (double[]){5, 6});
  assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
  assert_int_equal(lt_backward(lt_sum(lt_matmul(x, lt_transpose(w, 0, 1)), NULL, 0, false)), LT_OK);
  const lt_node *g = lt__tensor_ir(lt_grad(w));
  assert_non_null(g);
  assert_int_equal(g->op, LT_OP_MATMUL);
  assert_int_equal(g->shape[0], 1);
  assert_int_equal(g->shape[1], 2);
  tu_expect(lt_grad(w), LT_F64, SHAPE(1, 2), 2, (double[]){4, 6}, 0);
}

static void test_matmul(void **state) {
  (void)state;
  struct {
    const char *name;
    const int64_t *as;
    int an;
    const int64_t *bs;
    int bn;
  } cases[] = {
      {"2d", SHAPE(3, 4), 2, SHAPE(4, 2), 2},
      {"1d@2d", SHAPE(4), 1, SHAPE(4, 3), 2},
      {"2d@1d", SHAPE(3, 4), 2, SHAPE(4), 1},
      {"1d@1d", SHAPE(4), 1, SHAPE(4), 1},
      {"batched", SHAPE(2, 3, 4), 3, SHAPE(2, 4, 2), 3},
      {"batch@2d", SHAPE(2, 3, 4), 3, SHAPE(4, 5), 2},
      {"4d batch@2d", SHAPE(2, 3, 2, 4), 4, SHAPE(4, 3), 2},
      {"2d@batch", SHAPE(3, 4), 2, SHAPE(2, 4, 5), 3},
      {"broadcast batch", SHAPE(2, 1, 3, 2), 4, SHAPE(3, 2, 2), 3},
      {"1d@batch", SHAPE(3), 1, SHAPE(2, 3, 2), 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tg_input ins[2] = {
        {cases[i].as, cases[i].an, tg_vals((int)numel_of(cases[i].as, cases[i].an), 0.1), true,
         LT_F64},
        {cases[i].bs, cases[i].bn, tg_vals((int)numel_of(cases[i].bs, cases[i].bn), 0.7), true,
         LT_F64},
    };
    tg_check(cases[i].name, matmul_fn, NULL, ins, 2, 1e-5);
  }
  /* a plain sum: the gradient reaching the matmul is a constant */
  lt_tensor *a = tu_f64(SHAPE(2, 2), 2, (double[]){1, 2, 3, 4});
  lt_tensor *b = tu_f64(SHAPE(2, 2), 2, (double[]){5, 6, 7, 8});
  lt_set_requires_grad(a, true);
  lt_set_requires_grad(b, true);
  assert_int_equal(lt_backward(lt_sum(lt_matmul(a, b), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(a), LT_F64, SHAPE(2, 2), 2, (double[]){11, 15, 11, 15}, 0);
  tu_expect(lt_grad(b), LT_F64, SHAPE(2, 2), 2, (double[]){4, 4, 6, 6}, 0);
  /* x @ x^T: one tensor on both sides, its two contributions add */
  tg_input sq = {SHAPE(3, 4), 2, tg_vals(12, 0.2), true, LT_F64};
  tg_check("x@x^T", gram_fn, NULL, &sq, 1, 1e-5);
}

/* ---- shape ops -------------------------------------------------------------------- */

typedef enum shape_kind {
  K_RESHAPE,
  K_RESHAPE_INFER,
  K_PERMUTE,
  K_TRANSPOSE,
  K_EXPAND,
  K_EXPAND_NEW,
  K_SQUEEZE,
  K_UNSQUEEZE,
  K_SLICE_STEPS,
  K_SLICE_NEG,
  K_PAD,
  K_SLICE_OF_SLICE,
} shape_kind;

static lt_tensor *shape_fn(lt_tensor *const *in, void *ud) {
  lt_tensor *a = in[0];
  switch ((shape_kind)(intptr_t)ud) {
  case K_RESHAPE:
    return lt_reshape(a, SHAPE(6, 4), 2);
  case K_RESHAPE_INFER:
    return lt_reshape(lt_exp(a), SHAPE(4, -1, 2), 3);
  case K_PERMUTE:
    return lt_permute(a, (int[]){2, 0, 1}, 3);
  case K_TRANSPOSE:
    return lt_transpose(lt_mul(a, a), 0, -1);
  case K_EXPAND:
    return lt_expand(lt_reshape(a, SHAPE(2, 1, 12), 3), SHAPE(2, 3, 12), 3);
  case K_EXPAND_NEW:
    return lt_expand(lt_slice_n(a, NULL, SHAPE(2, 1, 4), NULL, 3), SHAPE(3, 2, 5, 4), 4);
  case K_SQUEEZE:
    return lt_squeeze(lt_slice_n(a, NULL, SHAPE(2, 1, 4), NULL, 3), 1);
  case K_UNSQUEEZE:
    return lt_unsqueeze(lt_unsqueeze(a, -1), 1);
  case K_SLICE_STEPS:
    return lt_slice_n(a, SHAPE(0, 1, 1), SHAPE(2, 3, 4), SHAPE(1, 2, 2), 3);
  case K_SLICE_NEG:
    return lt_slice_n(a, SHAPE(-1, -2, 0), SHAPE(2, 100, -1), SHAPE(1, 1, 3), 3);
  case K_PAD:
    return lt_pad_n(a, SHAPE(1, 0, 0, 2, 2, 1), 6, 0.5);
  case K_SLICE_OF_SLICE: {
    lt_tensor *s = lt_slice_n(a, SHAPE(0, 0, 1), SHAPE(2, 3, 4), SHAPE(1, 2, 1), 3);
    return lt_slice_n(lt_mul(s, s), SHAPE(1, 0, 0), SHAPE(2, 2, 3), SHAPE(1, 1, 2), 3);
  }
  }
  return NULL;
}

static void test_shape_ops(void **state) {
  (void)state;
  static const char *names[] = {"reshape",     "reshape -1",     "permute", "transpose",
                                "expand",      "expand new",     "squeeze", "unsqueeze",
                                "slice steps", "slice negative", "pad",     "slice of slice"};
  double *x = tg_vals(24, 0.5);
  for (int k = K_RESHAPE; k <= K_SLICE_OF_SLICE; k++) {
    tg_input in = {SHAPE(2, 3, 4), 3, x, true, LT_F64};
    tg_check(names[k], shape_fn, (void *)(intptr_t)k, &in, 1, 1e-5);
  }
}

static lt_tensor *concat_fn(lt_tensor *const *in, void *ud) {
  int axis = (int)(intptr_t)ud;
  lt_tensor *parts[3] = {in[0], lt_mul(in[1], in[1]), in[2]};
  return lt_concat(parts, 3, axis);
}

static lt_tensor *stack_fn(lt_tensor *const *in, void *ud) {
  int axis = (int)(intptr_t)ud;
  lt_tensor *parts[3] = {in[0], lt_exp(in[1]), in[0]}; /* in[0] twice: contributions add */
  return lt_stack(parts, 3, axis);
}

static void test_concat_stack(void **state) {
  (void)state;
  tg_input along1[3] = {{SHAPE(2, 1), 2, tg_vals(2, 0.1), true, LT_F64},
                        {SHAPE(2, 3), 2, tg_vals(6, 0.2), true, LT_F64},
                        {SHAPE(2, 2), 2, tg_vals(4, 0.3), true, LT_F64}};
  tg_check("concat axis 1", concat_fn, (void *)(intptr_t)1, along1, 3, 1e-5);
  tg_input along0[3] = {{SHAPE(1, 3), 2, tg_vals(3, 0.1), true, LT_F64},
                        {SHAPE(2, 3), 2, tg_vals(6, 0.2), true, LT_F64},
                        {SHAPE(3, 3), 2, tg_vals(9, 0.3), true, LT_F64}};
  tg_check("concat axis -2", concat_fn, (void *)(intptr_t)-2, along0, 3, 1e-5);
  tg_input st[2] = {{SHAPE(2, 3), 2, tg_vals(6, 0.4), true, LT_F64},
                    {SHAPE(2, 3), 2, tg_vals(6, 0.5), true, LT_F64}};
  for (int axis = -3; axis < 3; axis++)
    tg_check("stack", stack_fn, (void *)(intptr_t)axis, st, 2, 1e-5);
}

/* ---- index ops --------------------------------------------------------------------- */

static lt_tensor *gather_fn(lt_tensor *const *in, void *ud) {
  return lt_gather(lt_mul(in[0], in[0]), (int)(intptr_t)ud, in[1]);
}

static lt_tensor *index_select_fn(lt_tensor *const *in, void *ud) {
  return lt_index_select(lt_sin(in[0]), (int)(intptr_t)ud, in[1]);
}

static void test_gather_index_select(void **state) {
  (void)state;
  double *x = tg_vals(12, 0.8);
  /* repeated indices: their gradients add up */
  const double idx1[6] = {3, 0, 3, 1, 1, 1};
  tg_input g1[2] = {{SHAPE(3, 4), 2, x, true, LT_F64}, {SHAPE(3, 2), 2, idx1, false, LT_I64}};
  tg_check("gather axis 1", gather_fn, (void *)(intptr_t)1, g1, 2, 1e-5);
  tg_check("gather axis -1", gather_fn, (void *)(intptr_t)-1, g1, 2, 1e-5);
  const double idx0[6] = {2, 0, 2, 1, 2, 2};
  tg_input g0[2] = {{SHAPE(3, 4), 2, x, true, LT_F64}, {SHAPE(2, 3), 2, idx0, false, LT_I32}};
  tg_check("gather axis 0 (smaller index)", gather_fn, (void *)(intptr_t)0, g0, 2, 1e-5);

  const double sel[5] = {2, 0, 2, 2, 1};
  tg_input s0[2] = {{SHAPE(3, 4), 2, x, true, LT_F64}, {SHAPE(5), 1, sel, false, LT_I64}};
  tg_check("index_select axis 0", index_select_fn, (void *)(intptr_t)0, s0, 2, 1e-5);
  tg_input s1[2] = {{SHAPE(3, 4), 2, x, true, LT_F64}, {SHAPE(5), 1, sel, false, LT_I32}};
  tg_check("index_select axis 1", index_select_fn, (void *)(intptr_t)1, s1, 2, 1e-5);
  tg_input s3[2] = {{SHAPE(2, 3, 2), 3, x, true, LT_F64}, {SHAPE(5), 1, sel, false, LT_I64}};
  tg_check("index_select axis -2", index_select_fn, (void *)(intptr_t)-2, s3, 2, 1e-5);
}

/* The gradient ops' kernels by hand: accumulation of repeated indices. */
static void test_gradient_op_values(void **state) {
  (void)state;
  lt_tensor *x = tu_f64(SHAPE(2, 3), 2, (double[]){1, 2, 3, 4, 5, 6});
  lt_set_requires_grad(x, true);
  lt_tensor *idx = tu_i64(SHAPE(2, 3), 2, (int64_t[]){2, 2, 0, 1, 1, 1});
  lt_tensor *w = tu_f64(SHAPE(2, 3), 2, (double[]){1, 10, 100, 1000, 10000, 100000});
  assert_int_equal(lt_backward(lt_sum(lt_mul(lt_gather(x, 1, idx), w), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2, 3), 2, (double[]){100, 0, 11, 0, 111000, 0}, 0);
  lt_zero_grad(x);

  lt_tensor *sel = tu_i32(SHAPE(4), 1, (int32_t[]){1, 1, 0, 1});
  lt_tensor *w2 = tu_f64(SHAPE(4, 3), 2, (double[]){1, 2, 3, 10, 20, 30, 100, 200, 300, 4, 5, 6});
  assert_int_equal(lt_backward(lt_sum(lt_mul(lt_index_select(x, 0, sel), w2), NULL, 0, false)),
                   LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2, 3), 2, (double[]){100, 200, 300, 15, 27, 39}, 0);
  lt_zero_grad(x);

  int64_t starts[2] = {1, 0}, stops[2] = {2, 3}, steps[2] = {1, 2};
  assert_int_equal(lt_backward(lt_sum(lt_mul(lt_slice_n(x, starts, stops, steps, lt_ndim(x)),
                                             tu_f64(SHAPE(1, 2), 2, (double[]){7, 9})),
                                      NULL, 0, false)),
                   LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(2, 3), 2, (double[]){0, 0, 0, 7, 0, 9}, 0);

  /* f32 too */
  lt_tensor *y = tu_f32(SHAPE(3), 1, (float[]){1, 2, 3});
  lt_set_requires_grad(y, true);
  lt_tensor *i2 = tu_i64(SHAPE(4), 1, (int64_t[]){0, 0, 2, 0});
  assert_int_equal(lt_backward(lt_sum(lt_index_select(y, 0, i2), NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(y), LT_F32, SHAPE(3), 1, (double[]){3, 0, 1}, 0);
}

/* A gradient-op node over src and index, built by hand. */
static lt_tensor *grad_node(lt_op op, lt_tensor *src, lt_tensor *index, const int64_t *shape,
                            int ndim, const int64_t *attrs, int nattrs) {
  lt_node *ops[2] = {lt__node_retain(lt__tensor_ir(src)),
                     index ? lt__node_retain(lt__tensor_ir(index)) : NULL};
  return lt__make(CPU0, op, (lt_dtype)lt_get_dtype(src), shape, ndim, ops, index ? 2 : 1, attrs,
                  nattrs, 0.0);
}

/* The kernels range-check what the forward ops would have, and handle every
 * dtype; a correct hand-built node gives the documented values. */
static void test_gradient_op_kernels(void **state) {
  (void)state;
  lt_tensor *src = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  lt_tensor *isrc = tu_i64(SHAPE(2, 2), 2, (int64_t[]){1, 2, 3, (int64_t)1 << 40});
  lt_tensor *good = tu_i64(SHAPE(2, 2), 2, (int64_t[]){2, 2, 0, 2});
  lt_tensor *bad = tu_i64(SHAPE(2, 2), 2, (int64_t[]){0, 3, 0, 0});
  lt_tensor *neg = tu_i32(SHAPE(2), 1, (int32_t[]){0, -1});
  lt_tensor *sel = tu_i32(SHAPE(2), 1, (int32_t[]){1, 1});
  int64_t ax1 = 1, ax0 = 0;
  tu_expect(grad_node(LT_OP_SCATTER_ADD, src, good, SHAPE(2, 3), 2, &ax1, 1), LT_F32, SHAPE(2, 3),
            2, (double[]){0, 0, 3, 3, 0, 4}, 0);
  tu_expect(grad_node(LT_OP_SCATTER_ADD, isrc, good, SHAPE(2, 3), 2, &ax1, 1), LT_I64, SHAPE(2, 3),
            2, (double[]){0, 0, 3, 3, 0, (double)((int64_t)1 << 40)}, 0);
  tu_expect(grad_node(LT_OP_INDEX_ADD, src, sel, SHAPE(3, 2), 2, &ax0, 1), LT_F32, SHAPE(3, 2), 2,
            (double[]){0, 0, 4, 6, 0, 0}, 0);
  int64_t us[4] = {1, 0, 1, 2};
  tu_expect(grad_node(LT_OP_UNSLICE, src, NULL, SHAPE(3, 4), 2, us, 4), LT_F32, SHAPE(3, 4), 2,
            (double[]){0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0}, 0);

  tu_expect_exec_error(grad_node(LT_OP_SCATTER_ADD, src, bad, SHAPE(2, 3), 2, &ax1, 1),
                       "scatter_add: index 3 out of range [0, 3)");
  tu_expect_exec_error(grad_node(LT_OP_INDEX_ADD, src, neg, SHAPE(2, 2), 2, &ax1, 1),
                       "index_add: index -1 out of range [0, 2)");
  int64_t over[4] = {2, 0, 1, 1};
  tu_expect_exec_error(grad_node(LT_OP_UNSLICE, src, NULL, SHAPE(3, 2), 2, over, 4),
                       "unslice: index 3 out of range [0, 3)");
  /* empty sources give zeros */
  lt_tensor *empty = lt_zeros(CPU0, LT_F64, SHAPE(0, 2), 2);
  lt_tensor *eidx = lt_zeros(CPU0, LT_I64, SHAPE(0), 1);
  tu_expect(grad_node(LT_OP_INDEX_ADD, empty, eidx, SHAPE(2, 2), 2, &ax0, 1), LT_F64, SHAPE(2, 2),
            2, (double[]){0, 0, 0, 0}, 0);
}

/* A gradient is an ordinary value: it can be differentiated again, through
 * the gradient ops' own rules. */
static void test_second_order(void **state) {
  (void)state;
  lt_tensor *x = tu_f64(SHAPE(3), 1, (double[]){1, 2, 3});
  lt_set_requires_grad(x, true);
  lt_tensor *idx = tu_i64(SHAPE(2), 1, (int64_t[]){2, 2});
  /* d/dx sum(gather(x^3)) = 3 x^2 per pick: [0, 0, 54] */
  lt_tensor *cube = lt_mul(lt_mul(x, x), x);
  assert_int_equal(lt_backward(lt_sum(lt_gather(cube, 0, idx), NULL, 0, false)), LT_OK);
  lt_tensor *g = lt_mul(lt_grad(x), lt_scalar(CPU0, LT_F64, 1.0));
  assert_int_equal(lt_zero_grad(x), LT_OK);
  /* d/dx sum(6 x_2^2) = 12 x_2 */
  assert_int_equal(lt_backward(lt_sum(g, NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(x), LT_F64, SHAPE(3), 1, (double[]){0, 0, 36}, 1e-12);
}

/* The gradient of an inner loss of in[0], as a function of in[0] (second
 * order through the rule of the op under test). */
typedef struct inner_case {
  lt_tensor *(*f)(lt_tensor *x, lt_tensor *const *in);
} inner_case;

static lt_tensor *grad_of(lt_tensor *const *in, void *ud) {
  lt_tensor *x = in[0];
  lt_set_requires_grad(x, true);
  lt_tensor *y = ((const inner_case *)ud)->f(x, in);
  lt_tensor *w = lt_sin(lt_mul(y, y)); /* something that is not linear */
  if (lt_backward(lt_sum(w, NULL, 0, false)) != LT_OK) return NULL;
  lt_tensor *g = lt_mul(lt_grad(x), lt_scalar(CPU0, LT_F64, 1.0));
  lt_zero_grad(x);
  return g;
}

static lt_tensor *inner_slice(lt_tensor *x, lt_tensor *const *in) {
  (void)in;
  return lt_slice_n(x, SHAPE(1, 0), SHAPE(3, 4), SHAPE(1, 2), 2);
}
static lt_tensor *inner_gather(lt_tensor *x, lt_tensor *const *in) {
  return lt_gather(x, 1, in[1]);
}
static lt_tensor *inner_index_select(lt_tensor *x, lt_tensor *const *in) {
  return lt_index_select(x, 1, lt_reshape(in[1], SHAPE(-1), 1));
}
static lt_tensor *inner_matmul(lt_tensor *x, lt_tensor *const *in) {
  (void)in;
  return lt_matmul(x, lt_transpose(x, 0, 1));
}
static lt_tensor *inner_reductions(lt_tensor *x, lt_tensor *const *in) {
  (void)in;
  lt_tensor *a = lt_softmax(x, 1), *b = lt_logsumexp(x, (int[]){0}, 1, true);
  return lt_add(lt_mul(a, b), lt_max(x, (int[]){1}, 1, true));
}

static void test_second_order_finite_differences(void **state) {
  (void)state;
  const double idx[6] = {3, 0, 3, 1, 1, 2};
  tg_input ins[2] = {{SHAPE(3, 4), 2, tg_vals(12, 0.6), true, LT_F64},
                     {SHAPE(3, 2), 2, idx, false, LT_I64}};
  tg_check("second order slice", grad_of, &(inner_case){inner_slice}, ins, 2, 1e-5);
  tg_check("second order gather", grad_of, &(inner_case){inner_gather}, ins, 2, 1e-5);
  tg_check("second order index_select", grad_of, &(inner_case){inner_index_select}, ins, 2, 1e-5);
  tg_check("second order matmul", grad_of, &(inner_case){inner_matmul}, ins, 2, 1e-5);
  tg_check("second order reductions", grad_of, &(inner_case){inner_reductions}, ins, 2, 1e-5);
}

static lt_tensor *one_hot_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_mul(lt_one_hot(in[1], 4, LT_F64), in[0]);
}

static void test_one_hot(void **state) {
  (void)state;
  const double idx[3] = {3, 0, 3};
  tg_input ins[2] = {{SHAPE(3, 4), 2, tg_vals(12, 0.3), true, LT_F64},
                     {SHAPE(3), 1, idx, false, LT_I64}};
  tg_check("one_hot", one_hot_fn, NULL, ins, 2, 1e-5);
}

/* ---- a small MLP, checked against a hand derivation ------------------------------- */

enum { NB = 4, NI = 3, NH = 5, NO = 2 };

static lt_tensor *mlp_fn(lt_tensor *const *in, void *ud) {
  (void)ud;
  lt_tensor *h = lt_relu(lt_add(lt_matmul(in[0], in[1]), in[2]));
  lt_tensor *o = lt_add(lt_matmul(h, in[3]), in[4]);
  lt_tensor *lp = lt_log_softmax(o, 1);
  lt_tensor *picked = lt_gather(lp, 1, lt_reshape(in[5], SHAPE(NB, 1), 2));
  return lt_neg(lt_mean(picked, NULL, 0, false));
}

static void test_mlp_matches_hand_derivation(void **state) {
  (void)state;
  double x[NB * NI], w1[NI * NH], b1[NH], w2[NH * NO], b2[NO];
  const double labels[NB] = {1, 0, 0, 1};
  memcpy(x, tg_vals(NB * NI, 0.11), sizeof x);
  memcpy(w1, tg_vals(NI * NH, 0.23), sizeof w1);
  memcpy(b1, tg_vals(NH, 0.37), sizeof b1);
  memcpy(w2, tg_vals(NH * NO, 0.41), sizeof w2);
  memcpy(b2, tg_vals(NO, 0.53), sizeof b2);
  for (int i = 0; i < NI * NH; i++) w1[i] *= 0.5;
  for (int i = 0; i < NH; i++) b1[i] *= 0.3;
  tg_input ins[6] = {{SHAPE(NB, NI), 2, x, true, LT_F64}, {SHAPE(NI, NH), 2, w1, true, LT_F64},
                     {SHAPE(NH), 1, b1, true, LT_F64},    {SHAPE(NH, NO), 2, w2, true, LT_F64},
                     {SHAPE(NO), 1, b2, true, LT_F64},    {SHAPE(NB), 1, labels, false, LT_I64}};
  tg_check("mlp", mlp_fn, NULL, ins, 6, 1e-5);

  /* Forward by hand. */
  double h1[NB][NH], r[NB][NH], o[NB][NO], p[NB][NO], loss = 0;
  for (int i = 0; i < NB; i++) {
    for (int j = 0; j < NH; j++) {
      h1[i][j] = b1[j];
      for (int k = 0; k < NI; k++) h1[i][j] += x[i * NI + k] * w1[k * NH + j];
      r[i][j] = h1[i][j] > 0 ? h1[i][j] : 0;
    }
    double m = -INFINITY, s = 0;
    for (int j = 0; j < NO; j++) {
      o[i][j] = b2[j];
      for (int k = 0; k < NH; k++) o[i][j] += r[i][k] * w2[k * NO + j];
      if (o[i][j] > m) m = o[i][j];
    }
    for (int j = 0; j < NO; j++) s += exp(o[i][j] - m);
    for (int j = 0; j < NO; j++) p[i][j] = exp(o[i][j] - m) / s;
    loss -= (o[i][(int)labels[i]] - m - log(s)) / NB;
  }
  /* Backward by hand: d loss / d o = (softmax - onehot) / NB. */
  double dO[NB][NO], dW2[NH * NO] = {0}, dB2[NO] = {0}, dH[NB][NH], dW1[NI * NH] = {0},
                              dB1[NH] = {0}, dX[NB * NI] = {0};
  for (int i = 0; i < NB; i++)
    for (int j = 0; j < NO; j++) dO[i][j] = (p[i][j] - (j == (int)labels[i])) / NB;
  for (int i = 0; i < NB; i++) {
    for (int j = 0; j < NO; j++) {
      dB2[j] += dO[i][j];
      for (int k = 0; k < NH; k++) dW2[k * NO + j] += r[i][k] * dO[i][j];
    }
    for (int k = 0; k < NH; k++) {
      double d = 0;
      for (int j = 0; j < NO; j++) d += dO[i][j] * w2[k * NO + j];
      dH[i][k] = h1[i][k] > 0 ? d : 0;
    }
  }
  for (int i = 0; i < NB; i++) {
    for (int k = 0; k < NH; k++) {
      dB1[k] += dH[i][k];
      for (int m = 0; m < NI; m++) {
        dW1[m * NH + k] += x[i * NI + m] * dH[i][k];
        dX[i * NI + m] += dH[i][k] * w1[m * NH + k];
      }
    }
  }

  lt_tensor *t[6];
  for (int i = 0; i < 6; i++) {
    t[i] = tg_make(&ins[i]);
    if (ins[i].differentiable) assert_int_equal(lt_set_requires_grad(t[i], true), LT_OK);
  }
  lt_tensor *l = mlp_fn(t, NULL);
  assert_non_null(l);
  assert_int_equal(lt_backward(l), LT_OK);
  tu_expect(l, LT_F64, NULL, 0, &loss, 1e-12);
  tu_expect(lt_grad(t[0]), LT_F64, SHAPE(NB, NI), 2, dX, 1e-12);
  tu_expect(lt_grad(t[1]), LT_F64, SHAPE(NI, NH), 2, dW1, 1e-12);
  tu_expect(lt_grad(t[2]), LT_F64, SHAPE(NH), 1, dB1, 1e-12);
  tu_expect(lt_grad(t[3]), LT_F64, SHAPE(NH, NO), 2, dW2, 1e-12);
  tu_expect(lt_grad(t[4]), LT_F64, SHAPE(NO), 1, dB2, 1e-12);
}

/* Gradients of blocks of one tensor: the parts of a split (each block
 * adjacent to the next: autograd sums them as one concat), two adjacent
 * blocks that leave the rest of the axis zero, and two blocks with a gap or
 * an overlap (a plain sum). */
typedef enum { B_SPLIT, B_ADJACENT, B_GAP, B_OVERLAP } block_kind;

static lt_tensor *blocks_fn(lt_tensor *const *in, void *ud) {
  lt_tensor *a = in[0];
  lt_tensor *p[3] = {NULL, NULL, NULL};
  switch ((block_kind)(intptr_t)ud) {
  case B_SPLIT:
    if (lt_split_size(a, 2, 2, p, 3) != 3) return NULL;
    return lt_add(lt_mul(p[2], p[0]), lt_exp(p[1]));
  case B_ADJACENT:
    return lt_mul(lt_slice_n(a, SHAPE(0, 0, 3), SHAPE(2, 3, 5), NULL, 3),
                  lt_slice_n(a, SHAPE(0, 0, 1), SHAPE(2, 3, 3), NULL, 3));
  case B_GAP:
    return lt_mul(lt_slice_n(a, SHAPE(0, 0, 0), SHAPE(2, 3, 2), NULL, 3),
                  lt_slice_n(a, SHAPE(0, 0, 4), SHAPE(2, 3, 6), NULL, 3));
  case B_OVERLAP:
    return lt_mul(lt_slice_n(a, SHAPE(0, 0, 0), SHAPE(2, 3, 3), NULL, 3),
                  lt_slice_n(a, SHAPE(0, 0, 2), SHAPE(2, 3, 5), NULL, 3));
  }
  return NULL;
}

static void test_block_gradients(void **state) {
  (void)state;
  static const char *names[] = {"split parts", "adjacent blocks", "blocks with a gap",
                                "overlapping blocks"};
  double *x = tg_vals(36, 0.3);
  for (int k = B_SPLIT; k <= B_OVERLAP; k++) {
    tg_input in = {SHAPE(2, 3, 6), 3, x, true, LT_F64};
    tg_check(names[k], blocks_fn, (void *)(intptr_t)k, &in, 1, 1e-5);
  }
  /* the split's gradient is one concat of the parts' gradients, not a sum
   * of zero-padded blocks; adjacent blocks one concat under one unslice */
  for (int k = B_SPLIT; k <= B_ADJACENT; k++) {
    lt_tensor *a = lt_from_data(CPU0, LT_F64, SHAPE(2, 3, 6), 3, x);
    assert_int_equal(lt_set_requires_grad(a, true), LT_OK);
    lt_tensor *y = blocks_fn(&a, (void *)(intptr_t)k);
    assert_int_equal(lt_backward(lt_sum(y, NULL, 0, false)), LT_OK);
    const lt_node *g = lt__tensor_ir(lt_grad(a));
    assert_non_null(g);
    if (k == B_ADJACENT) {
      assert_int_equal(g->op, LT_OP_UNSLICE);
      g = g->operands[0].node;
    }
    assert_int_equal(g->op, LT_OP_CONCAT);
    assert_int_equal(g->noperands, k == B_SPLIT ? 3 : 2);
  } /* the test's scope owns a and the results */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_sum_mean_logsumexp),
      TU_TEST(test_matmul_transposed_weight),
      TU_TEST(test_max_min_prod),
      TU_TEST(test_max_min_ties_split_evenly),
      TU_TEST(test_prod_with_zeros),
      TU_TEST(test_softmax_log_softmax),
      TU_TEST(test_argmax_argmin_no_gradient),
      TU_TEST(test_matmul),
      TU_TEST(test_shape_ops),
      TU_TEST(test_concat_stack),
      TU_TEST(test_block_gradients),
      TU_TEST(test_gather_index_select),
      TU_TEST(test_gradient_op_values),
      TU_TEST(test_gradient_op_kernels),
      TU_TEST(test_second_order),
      TU_TEST(test_second_order_finite_differences),
      TU_TEST(test_one_hot),
      TU_TEST(test_mlp_matches_hand_derivation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
