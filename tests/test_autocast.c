/* Autocast scopes (lt_autocast_begin / lt_autocast_end): result dtypes
 * inside and outside, nesting and the off scope, errors, and a small MLP
 * step whose loss and f32 parameter gradients equal the same graph written
 * with explicit casts, and torch.autocast("cpu", dtype=torch.bfloat16)'s
 * values from torch 1.13. Runs on ref and on cpu. */
#include <float.h>
#include <math.h>

#include "test_backends.h"

#include "lazytensor_nn.h"

static lt_device dev0(void) { return lt_cpu(0); }

static lt_tensor *f32m(int64_t r, int64_t c, const float *v) { return tu_f32(SHAPE(r, c), 2, v); }

TU_BOTH(test_autocast_dtypes) {
  lt_tensor *a = f32m(2, 3, (float[]){1, 2, 3, 4, 5, 6});
  lt_tensor *w = f32m(3, 2, (float[]){1, 0, 0, 1, 1, 1});
  assert_int_equal(lt_get_dtype(lt_matmul(a, w)), LT_F32);
  assert_int_equal(lt_autocast_begin(dev0(), LT_BF16), LT_OK);
  lt_tensor *y = lt_matmul(a, w);
  assert_int_equal(lt_get_dtype(y), LT_BF16);                         /* lower precision list */
  assert_int_equal(lt_get_dtype(lt_sum(y, NULL, 0, false)), LT_BF16); /* its input's dtype */
  assert_int_equal(lt_get_dtype(lt_softmax(y, 1)), LT_BF16);
  assert_int_equal(lt_get_dtype(lt_prod(y, NULL, 0, false)), LT_F32); /* f32 list */
  assert_int_equal(lt_get_dtype(lt_nn_cross_entropy_ex(y, tu_i64(SHAPE(2), 1, (int64_t[]){0, 1}),
                                                       LT_NN_REDUCTION_MEAN, -100, 0.0)),
                   LT_F32);
  assert_int_equal(lt_get_dtype(lt_add(y, f32m(2, 2, (float[]){1, 2, 3, 4}))),
                   LT_F32); /* bf16 + f32 promotes, as torch */
  /* f64 is left alone (torch casts f32 only) */
  lt_tensor *d = lt_cast(a, LT_F64), *dw = lt_cast(w, LT_F64);
  assert_int_equal(lt_get_dtype(lt_matmul(d, dw)), LT_F64);
  /* nested off, then on again */
  assert_int_equal(lt_autocast_begin(dev0(), LT_F32), LT_OK);
  assert_int_equal(lt_get_dtype(lt_matmul(a, w)), LT_F32);
  assert_int_equal(lt_autocast_end(dev0()), LT_OK);
  assert_int_equal(lt_get_dtype(lt_matmul(a, w)), LT_BF16);
  /* another device is not in the scope */
  lt_tensor *a1 = lt_from_f32(lt_cpu(1), LT_F32, SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  assert_int_equal(lt_get_dtype(lt_matmul(a1, a1)), LT_F32);
  assert_int_equal(lt_autocast_end(dev0()), LT_OK);
  assert_int_equal(lt_get_dtype(lt_matmul(a, w)), LT_F32);
}

TU_BOTH(test_autocast_errors) {
  assert_int_equal(lt_autocast_end(dev0()), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_autocast_end"));
  assert_int_equal(lt_autocast_begin(dev0(), LT_I32), LT_EDTYPE);
  assert_non_null(strstr(lt_last_error(), "lt_autocast_begin"));
  assert_int_equal(lt_autocast_begin(dev0(), LT_F64), LT_EDTYPE);
  assert_int_equal(lt_autocast_begin(dev0(), (lt_dtype)99), LT_EDTYPE);
  lt_device bad = {LT_DEVICE_CPU, LT_MAX_DEVICES};
  assert_int_equal(lt_autocast_begin(bad, LT_BF16), LT_EDEVICE);
  int depth = 0;
  while (lt_autocast_begin(dev0(), LT_BF16) == LT_OK) depth++;
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_int_equal(depth, 32);
  while (depth--) assert_int_equal(lt_autocast_end(dev0()), LT_OK);
  assert_int_equal(lt_autocast_end(dev0()), LT_EINVAL);
}

/* The tiny model: relu(linear(x; W1, b1)) @ W2, cross-entropy. */
static const float kX[6] = {0.5f, -1.0f, 0.25f, 2.0f, 0.125f, -0.75f};
static const float kW1[12] = {0.1f,  -0.2f, 0.3f,  0.4f, 0.5f,  0.6f,
                              -0.7f, 0.8f,  -0.9f, 1.0f, 0.15f, -0.25f};
static const float kB1[4] = {0.01f, -0.02f, 0.03f, 0.04f};
static const float kW2[8] = {0.2f, -0.1f, 0.3f, 0.4f, -0.5f, 0.6f, 0.7f, -0.8f};

typedef struct mlp {
  lt_nn_linear l1;
  lt_tensor *w2;
} mlp;

static void mlp_init(mlp *m) {
  m->l1.weight = f32m(3, 4, kW1);
  m->l1.bias = tu_f32(SHAPE(4), 1, kB1);
  m->l1.in = 3;
  m->l1.out = 4;
  m->w2 = f32m(4, 2, kW2);
  assert_int_equal(lt_set_requires_grad(m->l1.weight, true), LT_OK);
  assert_int_equal(lt_set_requires_grad(m->l1.bias, true), LT_OK);
  assert_int_equal(lt_set_requires_grad(m->w2, true), LT_OK);
}

static lt_tensor *target(void) { return tu_i64(SHAPE(2), 1, (int64_t[]){1, 0}); }

/* Grads of the three parameters as doubles (12 + 4 + 8). */
static void read_grads(mlp *m, double *g) {
  lt_tensor *ps[3] = {m->l1.weight, m->l1.bias, m->w2};
  for (int i = 0; i < 3; i++) assert_int_equal(lt_get_dtype(lt_grad(ps[i])), LT_F32);
  tu_read_grad(m->l1.weight, g, 12);
  tu_read_grad(m->l1.bias, g + 12, 4);
  tu_read_grad(m->w2, g + 16, 8);
}

TU_BOTH(test_autocast_mlp_step) {
  /* under autocast */
  mlp m;
  mlp_init(&m);
  lt_tensor *x = f32m(2, 3, kX);
  assert_int_equal(lt_autocast_begin(dev0(), LT_BF16), LT_OK);
  lt_tensor *h = lt_relu(lt_nn_linear_forward(&m.l1, x));
  lt_tensor *logits = lt_matmul(h, m.w2);
  assert_int_equal(lt_get_dtype(logits), LT_BF16);
  lt_tensor *loss = lt_nn_cross_entropy_ex(logits, target(), LT_NN_REDUCTION_MEAN, -100, 0.0);
  assert_int_equal(lt_autocast_end(dev0()), LT_OK);
  assert_int_equal(lt_get_dtype(loss), LT_F32);
  assert_int_equal(lt_backward(loss), LT_OK);
  double got_loss, got[24];
  assert_int_equal(lt_item(loss, 0, &got_loss), LT_OK);
  read_grads(&m, got);

  /* the same graph with explicit casts (linear's bias added in f32 before
   * the one rounding, as the autocast linear does) */
  mlp e;
  mlp_init(&e);
  lt_tensor *xb = lt_cast(x, LT_BF16);
  lt_tensor *mm = lt_matmul(lt_cast(xb, LT_F32), lt_cast(lt_cast(e.l1.weight, LT_BF16), LT_F32));
  lt_tensor *lin = lt_cast(lt_add(mm, lt_cast(lt_cast(e.l1.bias, LT_BF16), LT_F32)), LT_BF16);
  lt_tensor *lg = lt_matmul(lt_relu(lin), lt_cast(e.w2, LT_BF16));
  lt_tensor *el =
      lt_nn_cross_entropy_ex(lt_cast(lg, LT_F32), target(), LT_NN_REDUCTION_MEAN, -100, 0.0);
  assert_int_equal(lt_backward(el), LT_OK);
  double want_loss, want[24];
  assert_int_equal(lt_item(el, 0, &want_loss), LT_OK);
  read_grads(&e, want);
  assert_true(got_loss == want_loss);
  for (int i = 0; i < 24; i++)
    if (got[i] != want[i])
      fail_msg("grad %d: autocast %.9g, explicit casts %.9g", i, got[i], want[i]);

  /* torch 1.13: the same model under torch.autocast("cpu", dtype=torch.bfloat16),
   * loss = F.cross_entropy(torch.relu(F.linear(x, W1.t(), b1)) @ W2, t) =
   * 0.256743848323822; W1.grad, b1.grad, W2.grad (f32) below. torch's bf16
   * linear (oneDNN) gives 0.43359375 for h[1][2], where the exact sum rounded
   * once (ours, and torch's own explicit-cast graph) is 0.431640625: one bf16
   * ulp, which reaches the logits and the loss. So one bf16 ulp (relative
   * 2^-7) is allowed on the loss and on each gradient. */
  if (!(fabs(got_loss - 0.256743848323822) <= 0.256743848323822 * 0x1p-7))
    fail_msg("loss %.17g, torch 0.256743848323822", got_loss);
  static const double torch_grads[24] = {-0.05517578125,
                                         0.0,
                                         0.12890625,
                                         -0.275390625,
                                         -0.003448486328125,
                                         0.0,
                                         0.16015625,
                                         -0.0172119140625,
                                         0.020751953125,
                                         0.0,
                                         -0.1123046875,
                                         0.103515625,
                                         -0.027587890625,
                                         0.0,
                                         -0.04638671875,
                                         -0.1376953125,
                                         -0.0869140625,
                                         0.0869140625,
                                         0.0,
                                         0.0,
                                         0.0830078125,
                                         -0.0830078125,
                                         -0.103515625,
                                         0.103515625};
  for (int i = 0; i < 24; i++)
    if (!(fabs(got[i] - torch_grads[i]) <=
          fabs(torch_grads[i]) * 0x1p-6)) /* 2 ulps: the 1 propagated */
      fail_msg("grad %d: %.9g, torch %.9g", i, got[i], torch_grads[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_autocast_dtypes),
      TU_TEST(test_autocast_errors),
      TU_TEST(test_autocast_mlp_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
