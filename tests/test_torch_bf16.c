/* bf16 against PyTorch 1.13's CPU bf16 results: elementwise ops (with f32
 * and integer promotion), casts, reductions, matmul, softmax, layer_norm,
 * cross-entropy, conv2d, and the gradients of bf16 leaves through small
 * graphs. The expected values come from tests/gen/torch_bf16_cases.py
 * (tests/torch_bf16_cases.h, each with its torch expression); every case runs
 * on ref and on cpu.
 *
 * The tolerance, in bf16 ulps of the expected value, is 0 where torch's value
 * is the exact result rounded once (elementwise ops and casts; sums, matmul
 * and conv of these few bf16 values, which f32 holds exactly). It is 1 where
 * torch's kernel rounds an f32 intermediate that depends on its order or
 * formula (exp-sums of softmax / log_softmax / logsumexp, layer_norm's rstd,
 * erf in gelu, the mean of cross-entropy): the exact value and torch's can sit
 * on either side of a rounding boundary. Gradients: torch's fused bf16
 * backward kernels (tanh, sigmoid, gelu, softmax, log_softmax) compute in f32
 * from the bf16 forward output and round once, its other gradients are chains
 * of bf16 ops, and ours do the same (src/autograd); the generator's comments
 * give each case's tolerance and why. BF16_ULPS_REPORT=1 in the environment
 * prints each case's worst error instead of checking. */
#include <math.h>

#include "test_backends.h"

#include "lazytensor_nn.h"
#include "torch_bf16_cases.h"

static lt_tensor *bf(const int64_t *shape, int nd, const float *v) {
  lt_tensor *t = lt_from_f32(lt_cpu(0), LT_BF16, shape, nd, v);
  if (!t) fail_msg("lt_from_f32: %s", lt_last_error());
  return t;
}

/* The inputs of the generator (the same values, bf16 exactly). */
static lt_tensor *in_a(void) {
  return bf(SHAPE(2, 3), 2, (float[]){0.5f, -1.25f, 2.0f, 3.140625f, -0.0078125f, 1.5f});
}
static lt_tensor *in_b(void) {
  return bf(SHAPE(2, 3), 2, (float[]){1.75f, 0.3125f, -2.5f, 0.8515625f, 4.0f, -0.6640625f});
}
static lt_tensor *in_p(void) {
  return bf(SHAPE(2, 3), 2, (float[]){0.25f, 1.5f, 7.0f, 0.0625f, 3.0f, 100.0f});
}
static lt_tensor *in_w(void) {
  return bf(
      SHAPE(3, 4), 2,
      (float[]){0.5f, -1.0f, 0.25f, 2.0f, 1.5f, 0.125f, -0.75f, 1.0f, -2.0f, 0.625f, 3.0f, -0.5f});
}
static lt_tensor *in_lw(void) { return bf(SHAPE(3), 1, (float[]){1.5f, -0.5f, 2.0f}); }
static lt_tensor *in_lb(void) { return bf(SHAPE(3), 1, (float[]){0.25f, 0.0f, -1.0f}); }
static lt_tensor *in_t(void) { return tu_i64(SHAPE(2), 1, (int64_t[]){2, 0}); }

/* The op of case name on a (and b, w: the other inputs). */
static lt_tensor *forward(const char *name, lt_tensor *a, lt_tensor *w) {
  lt_tensor *b = in_b(), *p = in_p();
  int one = 1;
  if (!strcmp(name, "add")) return lt_add(a, b);
  if (!strcmp(name, "sub")) return lt_sub(a, b);
  if (!strcmp(name, "mul")) return lt_mul(a, b);
  if (!strcmp(name, "div")) return lt_div(a, b);
  if (!strcmp(name, "add_f32"))
    return lt_add(a, tu_f32(SHAPE(2, 3), 2, (float[]){0.1f, -0.2f, 0.3f, 1e-3f, 2.5f, -7.7f}));
  if (!strcmp(name, "add_i64"))
    return lt_add(a, tu_i64(SHAPE(2, 3), 2, (int64_t[]){1, -2, 3, 4, 5, -6}));
  if (!strcmp(name, "maximum")) return lt_maximum(a, b);
  if (!strcmp(name, "neg")) return lt_neg(a);
  if (!strcmp(name, "exp")) return lt_exp(a);
  if (!strcmp(name, "log")) return lt_log(p);
  if (!strcmp(name, "sqrt")) return lt_sqrt(p);
  if (!strcmp(name, "tanh")) return lt_tanh(a);
  if (!strcmp(name, "sigmoid")) return lt_sigmoid(a);
  if (!strcmp(name, "relu")) return lt_relu(a);
  if (!strcmp(name, "gelu")) return lt_gelu(a);
  if (!strcmp(name, "cast_f32_bf16"))
    return lt_cast(tu_f32(SHAPE(2, 3), 2, (float[]){0.1f, -0.2f, 0.3f, 1e-3f, 2.5f, -7.7f}),
                   LT_BF16);
  if (!strcmp(name, "cast_bf16_f32")) return lt_cast(a, LT_F32);
  if (!strcmp(name, "sum")) return lt_sum(a, NULL, 0, false);
  if (!strcmp(name, "sum_ax1")) return lt_sum(a, &one, 1, false);
  if (!strcmp(name, "mean_ax1")) return lt_mean(a, &one, 1, false);
  if (!strcmp(name, "max_ax1")) return lt_max(a, &one, 1, false);
  if (!strcmp(name, "logsumexp_ax1")) return lt_logsumexp(a, &one, 1, false);
  if (!strcmp(name, "var")) return lt_var(a, NULL, 0, 1.0, false);
  if (!strcmp(name, "norm")) return lt_vector_norm(a, NULL, 0, 2.0, false);
  if (!strcmp(name, "matmul")) return lt_matmul(a, w);
  if (!strcmp(name, "softmax")) return lt_softmax(a, 1);
  if (!strcmp(name, "log_softmax")) return lt_log_softmax(a, 1);
  if (!strcmp(name, "log_softmax_ax0")) return lt_log_softmax(a, 0);
  if (!strcmp(name, "layer_norm")) return lt_layer_norm(a, SHAPE(3), 1, in_lw(), in_lb(), 1e-5);
  if (!strcmp(name, "cross_entropy"))
    return lt_nn_cross_entropy_ex(a, in_t(), LT_NN_REDUCTION_MEAN, -100, 0.0);
  if (!strcmp(name, "conv2d"))
    return lt_conv2d_n(bf(SHAPE(1, 1, 3, 3), 4,
                          (float[]){0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f, 3.0f, 0.125f, -2.0f}),
                       bf(SHAPE(1, 1, 2, 2), 4, (float[]){1.0f, -0.5f, 0.25f, 2.0f}), NULL, NULL, 0,
                       NULL, 0, NULL, 0, 1);
  /* gradients: the scalar losses of GRADS */
  if (!strcmp(name, "g_tanh_mul")) return lt_sum(lt_mul(lt_tanh(a), b), NULL, 0, false);
  if (!strcmp(name, "g_matmul")) return lt_sum(lt_matmul(a, w), NULL, 0, false);
  if (!strcmp(name, "g_softmax")) return lt_sum(lt_mul(lt_softmax(a, 1), b), NULL, 0, false);
  if (!strcmp(name, "g_layer_norm"))
    return lt_sum(lt_mul(lt_layer_norm(a, SHAPE(3), 1, in_lw(), in_lb(), 1e-5), b), NULL, 0, false);
  if (!strcmp(name, "g_cross_entropy"))
    return lt_nn_cross_entropy_ex(a, in_t(), LT_NN_REDUCTION_MEAN, -100, 0.0);
  fail_msg("no builder for case %s", name);
  return NULL;
}

/* One bf16 ulp at |v| (the spacing of bf16 values there; subnormals' for 0). */
static double bf16_ulp(double v) {
  int e;
  frexp(fabs(v) > 0x1p-126 ? v : 0x1p-126, &e);
  return ldexp(1.0, e - 8);
}

static void expect_case(const bf16_case *c, lt_tensor *t) {
  if (!t) fail_msg("%s (%s): %s", c->name, c->expr, lt_last_error());
  if (lt_get_dtype(t) != c->dtype)
    fail_msg("%s (%s): dtype %s, torch's %s", c->name, c->expr, lt_dtype_name(lt_get_dtype(t)),
             lt_dtype_name(c->dtype));
  assert_int_equal(lt_numel(t), c->n);
  double *got = tu_values(t);
  if (getenv("BF16_ULPS_REPORT")) { /* the worst error of each case, no check */
    double worst = 0;
    for (int i = 0; i < c->n; i++) {
      double d = fabs(got[i] - c->want[i]) / bf16_ulp(c->want[i]);
      if (d > worst) worst = d;
    }
    print_message("%s: worst %.2f ulps\n", c->name, worst);
    free(got);
    return;
  }
  for (int i = 0; i < c->n; i++) {
    double want = c->want[i], tol = c->ulps * bf16_ulp(want);
    if (!(fabs(got[i] - want) <= tol))
      fail_msg("%s (%s) element %d: got %.9g, torch %.9g (%d ulps allowed)", c->name, c->expr, i,
               got[i], want, c->ulps);
  }
  free(got);
}

TU_BOTH(test_bf16_forward_as_torch) {
  for (size_t i = 0; i < sizeof kForward / sizeof kForward[0]; i++) {
    lt_scope_begin();
    expect_case(&kForward[i], forward(kForward[i].name, in_a(), in_w()));
    lt_scope_end();
  }
}

/* Each pair of rows: the gradient of A, then of W (n 0: W has none). */
TU_BOTH(test_bf16_grads_as_torch) {
  for (size_t i = 0; i + 1 < sizeof kGrads / sizeof kGrads[0]; i += 2) {
    lt_scope_begin();
    lt_tensor *a = in_a(), *w = in_w();
    assert_int_equal(lt_set_requires_grad(a, true), LT_OK);
    assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
    lt_tensor *loss = forward(kGrads[i].name, a, w);
    if (!loss) fail_msg("%s: %s", kGrads[i].name, lt_last_error());
    assert_int_equal(lt_backward(loss), LT_OK);
    expect_case(&kGrads[i], lt_grad(a));
    if (kGrads[i + 1].n)
      expect_case(&kGrads[i + 1], lt_grad(w));
    else
      assert_null(lt_grad(w));
    lt_scope_end();
  }
}

/* ---- the random cases (kRand): R_ROWS x R_COLS inputs of the generator ---- */

static lt_tensor *rand_in(char name, bool grad) {
  lt_tensor *t = NULL;
  switch (name) {
  case 'X':
    t = bf(SHAPE(R_ROWS, R_COLS), 2, k_in_X);
    break;
  case 'S':
    t = bf(SHAPE(R_ROWS, R_COLS), 2, k_in_S);
    break;
  case 'P':
    t = bf(SHAPE(R_ROWS, R_COLS), 2, k_in_P);
    break;
  case 'E':
    t = bf(SHAPE(R_ROWS, R_COLS), 2, k_in_E);
    break;
  case 'Q': /* attention's q, k, v: [2, 6, 8] */
    t = bf(SHAPE(2, 6, 8), 3, k_in_Q);
    break;
  case 'K':
    t = bf(SHAPE(2, 6, 8), 3, k_in_K);
    break;
  case 'V':
    t = bf(SHAPE(2, 6, 8), 3, k_in_V);
    break;
  case 'M':
    t = bf(SHAPE(R_COLS, R_OUT), 2, k_in_M);
    break;
  default:
    fail_msg("no random input %c", name);
  }
  if (grad) assert_int_equal(lt_set_requires_grad(t, true), LT_OK);
  return t;
}

/* The expression of random case c, its leaves (case letters) requiring grad;
 * the inputs it reads are returned through ins (by letter) for lt_grad. */
static lt_tensor *rand_expr(const bf16_rand_case *c, lt_tensor **ins) {
  const char *nm = c->name;
  int one = 1;
  for (const char *p = "XPEMQKV"; *p; p++) ins[*p - 'A'] = rand_in(*p, c->leaf == *p);
  lt_tensor *x = ins['X' - 'A'], *p = ins['P' - 'A'], *e = ins['E' - 'A'], *m = ins['M' - 'A'];
  if (!strcmp(nm, "r_div")) { /* both operands are leaves */
    lt_set_requires_grad(x, true);
    lt_set_requires_grad(p, true);
  }
  if (!strcmp(nm, "r_pow")) {
    lt_set_requires_grad(p, true);
    lt_set_requires_grad(e, true);
  }
  if (!strcmp(nm, "r_matmul")) {
    lt_set_requires_grad(x, true);
    lt_set_requires_grad(m, true);
  }
  lt_tensor *s = rand_in('S', false);
  lt_tensor *s1 = bf(SHAPE(R_ROWS), 1, k_in_S1);
  lt_tensor *sixteen = bf(SHAPE(1), 1, (float[]){16.0f});
  lt_tensor *f = NULL; /* an elementwise f, weighted by S */
  if (!strcmp(nm, "r_tanh")) f = lt_tanh(x);
  if (!strcmp(nm, "r_sigmoid")) f = lt_sigmoid(x);
  if (!strcmp(nm, "r_gelu")) f = lt_gelu(x);
  if (!strcmp(nm, "r_gelu_tanh")) f = lt_gelu_tanh(x);
  if (!strcmp(nm, "r_erf")) f = lt_erf(x);
  if (!strcmp(nm, "r_exp")) f = lt_exp(x);
  if (!strcmp(nm, "r_log")) f = lt_log(p);
  if (!strcmp(nm, "r_log1p")) f = lt_log1p(p);
  if (!strcmp(nm, "r_sin")) f = lt_sin(x);
  if (!strcmp(nm, "r_sqrt")) f = lt_sqrt(p);
  if (!strcmp(nm, "r_rsqrt")) f = lt_rsqrt(p);
  if (!strcmp(nm, "r_div")) f = lt_div(x, p);
  if (!strcmp(nm, "r_pow")) f = lt_pow(p, e);
  if (!strcmp(nm, "r_softmax")) f = lt_softmax(x, 1);
  if (!strcmp(nm, "r_log_softmax")) f = lt_log_softmax(x, 1);
  if (!strcmp(nm, "r_log_softmax_ax0")) f = lt_log_softmax(x, 0);
  if (!strcmp(nm, "r_layer_norm"))
    f = lt_layer_norm(x, SHAPE(R_COLS), 1, bf(SHAPE(R_COLS), 1, k_in_LW),
                      bf(SHAPE(R_COLS), 1, k_in_LB), 1e-5);
  if (f) return lt_sum(lt_mul(f, s), NULL, 0, false);
  lt_tensor *r = NULL; /* a reduction over axis 1, weighted by S1 */
  if (!strcmp(nm, "r_logsumexp")) r = lt_logsumexp(x, &one, 1, false);
  if (!strcmp(nm, "r_sum")) r = lt_sum(x, &one, 1, false);
  if (!strcmp(nm, "r_mean")) r = lt_mean(x, &one, 1, false);
  if (!strcmp(nm, "r_max")) r = lt_max(x, &one, 1, false);
  if (r) return lt_sum(lt_mul(r, s1), NULL, 0, false);
  if (!strcmp(nm, "r_cross_entropy"))
    return lt_nn_cross_entropy_ex(x, tu_i64(SHAPE(R_ROWS), 1, k_in_T), LT_NN_REDUCTION_MEAN, -100,
                                  0.0);
  if (!strcmp(nm, "r_matmul"))
    return lt_sum(lt_mul(lt_matmul(x, m), bf(SHAPE(R_ROWS, R_OUT), 2, k_in_S5)), NULL, 0, false);
  if (!strcmp(nm, "r_attention")) /* the training path: a leaf needs a gradient */
    return lt_sum(lt_mul(lt_scaled_dot_product_attention(ins['Q' - 'A'], ins['K' - 'A'],
                                                         ins['V' - 'A'], NULL, true, NAN),
                         bf(SHAPE(2, 6, 8), 3, k_in_SA)),
                  NULL, 0, false);
  if (!strcmp(nm, "r_floor_divide")) return lt_floor_divide(lt_mul(x, sixteen), p);
  if (!strcmp(nm, "r_remainder")) return lt_remainder(lt_mul(x, sixteen), p);
  fail_msg("no builder for case %s", nm);
  return NULL;
}

/* Each row: the value of the case (leaf 0) or the gradient of one leaf,
 * within the row's ulps of torch's (the table's comment says why). */
TU_BOTH(test_bf16_random_as_torch) {
  for (size_t i = 0; i < sizeof kRand / sizeof kRand[0]; i++) {
    const bf16_rand_case *c = &kRand[i];
    lt_scope_begin();
    lt_tensor *ins[26] = {0};
    lt_tensor *r = rand_expr(c, ins);
    if (!r) fail_msg("%s: %s", c->name, lt_last_error());
    if (c->leaf) {
      assert_int_equal(lt_backward(r), LT_OK);
      r = lt_grad(ins[c->leaf - 'A']);
      if (!r) fail_msg("%s: no gradient for %c", c->name, c->leaf);
    }
    bf16_case as = {c->name, c->expr, LT_BF16, c->n, c->ulps, c->want};
    expect_case(&as, r);
    lt_scope_end();
  }
}

/* torch 1.13 has no bf16 mse_loss on the CPU ("mse_cpu" not implemented for
 * 'BFloat16'): refused with the function's name, as torch. */
TU_BOTH(test_bf16_mse_refused) {
  lt_tensor *a = in_a();
  assert_null(lt_nn_mse_loss(a, in_b(), LT_NN_REDUCTION_MEAN));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  assert_non_null(strstr(lt_last_error(), "lt_nn_mse_loss"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_bf16_forward_as_torch),
      TU_TEST(test_bf16_grads_as_torch),
      TU_TEST(test_bf16_random_as_torch),
      TU_TEST(test_bf16_mse_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
