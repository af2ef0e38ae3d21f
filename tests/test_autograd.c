/* Autograd: the API, its errors, and finite-difference checks (f64) of the
 * elementwise ops' gradients, including broadcasting. */
#include "test_grad_util.h"

typedef lt_tensor *(*un_op)(lt_tensor *);
typedef lt_tensor *(*bin_op)(lt_tensor *, lt_tensor *);

static lt_tensor *apply_un(lt_tensor *const *in, void *ud) { return ((un_op)ud)(in[0]); }
static lt_tensor *apply_bin(lt_tensor *const *in, void *ud) { return ((bin_op)ud)(in[0], in[1]); }

static const double kX[6] = {0.3, -1.2, 0.7, 1.9, -0.4, 0.05};
static const double kPos[6] = {0.3, 1.2, 0.7, 1.9, 0.4, 2.5};
static const double kY[3] = {0.9, -0.6, 1.4};
static const double kYPos[3] = {0.9, 0.6, 1.4};

static void test_unary_gradients(void **state) {
  (void)state;
  struct {
    const char *name;
    un_op f;
    const double *x;
  } cases[] = {
      {"neg", lt_neg, kX},     {"abs", lt_abs, kX},       {"relu", lt_relu, kX},
      {"exp", lt_exp, kX},     {"log", lt_log, kPos},     {"log1p", lt_log1p, kPos},
      {"sqrt", lt_sqrt, kPos}, {"rsqrt", lt_rsqrt, kPos}, {"sin", lt_sin, kX},
      {"cos", lt_cos, kX},     {"tanh", lt_tanh, kX},     {"sigmoid", lt_sigmoid, kX},
      {"gelu", lt_gelu, kX},   {"erf", lt_erf, kX},       {"floor", lt_floor, kX},
      {"sign", lt_sign, kX},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tg_input in = {SHAPE(2, 3), 2, cases[i].x, true, LT_F64};
    tg_check(cases[i].name, apply_un, (void *)cases[i].f, &in, 1, 1e-5);
  }
}

static void test_binary_gradients_with_broadcasting(void **state) {
  (void)state;
  struct {
    const char *name;
    bin_op f;
    const double *a;
  } cases[] = {
      {"add", lt_add, kX},         {"sub", lt_sub, kX},   {"mul", lt_mul, kX},
      {"div", lt_div, kX},         {"pow", lt_pow, kPos}, {"maximum", lt_maximum, kX},
      {"minimum", lt_minimum, kX},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tg_input ins[2] = {{SHAPE(2, 3), 2, cases[i].a, true, LT_F64}, {SHAPE(3), 1, kY, true, LT_F64}};
    tg_check(cases[i].name, apply_bin, (void *)cases[i].f, ins, 2, 1e-5);
    tg_input swapped[2] = {{SHAPE(3, 1), 2, kYPos, true, LT_F64},
                           {SHAPE(2, 1, 3), 3, kPos, true, LT_F64}};
    tg_check(cases[i].name, apply_bin, (void *)cases[i].f, swapped, 2, 1e-5);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_unary_gradients),
      TU_TEST(test_binary_gradients_with_broadcasting),
      TU_TEST(test_where_clamp_cast),
      TU_TEST(test_ties_split_like_pytorch),
      TU_TEST(test_accumulation_and_zero_grad),
      TU_TEST(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
