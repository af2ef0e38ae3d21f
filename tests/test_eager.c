/* Eager mode with autograd (issue: eager mode is the debugging mode users
 * reach for, so lt_backward and the optimizers must work there): gradients
 * and training steps computed one op at a time equal the lazy ones, on both
 * backends, and an eager training loop keeps no history from one step to the
 * next (no growth of memory or live tensors). */
#include <math.h>

#include "test_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "lazytensor_nn.h"

static int setup(void **state) {
  tu_reset_executor();
  return tu_setup(state);
}
static int teardown(void **state) {
  lt_set_eager(false);
  int rc = tu_teardown_wait(state);
  lt__backend_force(NULL);
  return rc;
}
#define ETEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* The case and its kin: two same-shaped leaves in a product that a
 * non-linear op follows, plus a second use of each leaf. */
static void grads_of_products(bool eager, double *ga, double *gb) {
  lt_scope_begin();
  lt_set_eager(eager);
  lt_tensor *a = tu_f64(SHAPE(3), 1, ((double[]){0.5, -1.25, 2.0}));
  lt_tensor *b = tu_f64(SHAPE(3), 1, ((double[]){2.0, 0.75, -0.5}));
  assert_int_equal(lt_set_requires_grad(a, true), LT_OK);
  assert_int_equal(lt_set_requires_grad(b, true), LT_OK);
  lt_tensor *ab = lt_mul(a, b);
  lt_tensor *y = lt_add(lt_exp(ab), lt_mul(lt_sigmoid(a), lt_mul(b, b)));
  lt_tensor *one = lt_scalar(CPU0, LT_F64, 1.0);
  lt_tensor *r = lt_sqrt(lt_add(lt_add(lt_mul(ab, ab), lt_mul(a, a)), one));
  lt_tensor *loss = lt_sum(lt_add(y, r), NULL, 0, false);
  if (lt_backward(loss) != LT_OK) fail_msg("lt_backward: %s", lt_last_error());
  lt_set_eager(false);
  tu_read(lt_grad(a), ga, 3);
  tu_read(lt_grad(b), gb, 3);
  lt_scope_end();
}

/* d/da and d/db of sum(exp(ab) + sigmoid(a) b^2 + sqrt((ab)^2 + a^2 + 1)). */
static void expected_grads(double *ga, double *gb) {
  const double a[3] = {0.5, -1.25, 2.0}, b[3] = {2.0, 0.75, -0.5};
  for (int i = 0; i < 3; i++) {
    double s = 1 / (1 + exp(-a[i])), ab = a[i] * b[i], r = sqrt(ab * ab + a[i] * a[i] + 1);
    ga[i] = b[i] * exp(ab) + s * (1 - s) * b[i] * b[i] + (ab * b[i] + a[i]) / r;
    gb[i] = a[i] * exp(ab) + 2 * s * b[i] + ab * a[i] / r;
  }
}

static void check_backward(const lt_backend *be) {
  lt__backend_force(be);
  double la[3], lb[3], ea[3], eb[3], wa[3], wb[3];
  expected_grads(wa, wb);
  grads_of_products(false, la, lb);
  grads_of_products(true, ea, eb);
  for (int i = 0; i < 3; i++) {
    if (!tu_near(ea[i], wa[i], 1e-10) || !tu_near(eb[i], wb[i], 1e-10))
      fail_msg("%s eager grad %d: a %.12g b %.12g, want %.12g %.12g", be->name, i, ea[i], eb[i],
               wa[i], wb[i]);
    if (!tu_near(la[i], wa[i], 1e-10) || !tu_near(lb[i], wb[i], 1e-10))
      fail_msg("%s lazy grad %d: a %.12g b %.12g", be->name, i, la[i], lb[i]);
  }
}

static void test_eager_backward_ref(void **state) {
  (void)state;
  check_backward(&lt__ref_backend);
}
static void test_eager_backward_cpu(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  check_backward(&lt__cpu_backend);
}

/* A loss that was computed eagerly and then read still has its history. */
static void test_eager_loss_read_then_backward(void **state) {
  (void)state;
  lt_set_eager(true);
  lt_tensor *a = tu_f64(SHAPE(2), 1, ((double[]){0.5, 2.0}));
  assert_int_equal(lt_set_requires_grad(a, true), LT_OK);
  lt_tensor *loss = lt_sum(lt_mul(a, a), NULL, 0, false);
  double v = 0;
  assert_int_equal(lt_item(loss, 0, &v), LT_OK);
  assert_true(v == 4.25);
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_set_eager(false);
  tu_expect(lt_grad(a), LT_F64, SHAPE(2), 1, (double[]){1.0, 4.0}, 0);
  /* a value without history (made with no requires-grad input) still says so */
  lt_set_eager(true);
  lt_tensor *c = lt_sum(tu_f64(SHAPE(2), 1, ((double[]){1, 2})), NULL, 0, false);
  assert_int_equal(lt_backward(c), LT_EINVAL);
  lt_set_eager(false);
}

/* ---- a training loop: eager equals lazy, and keeps nothing step to step ---- */

enum { kIn = 6, kHidden = 8, kClasses = 3, kBatch = 5 };

typedef struct model {
  lt_tensor *w1, *b1, *w2, *b2;
} model;

static double init_at(int which, int i) { return 0.3 * sin(1.7 * i + which); }

static lt_tensor *param(int which, const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  float v[kIn * kHidden];
  for (int64_t i = 0; i < n; i++) v[i] = (float)init_at(which, (int)i);
  lt_tensor *t = lt_retain(lt_from_data(CPU0, LT_F32, shape, ndim, v));
  assert_int_equal(lt_set_requires_grad(t, true), LT_OK);
  return t;
}

static void model_init(model *m) {
  lt_scope_begin();
  m->w1 = param(1, SHAPE(kIn, kHidden), 2);
  m->b1 = param(2, SHAPE(kHidden), 1);
  m->w2 = param(3, SHAPE(kHidden, kClasses), 2);
  m->b2 = param(4, SHAPE(kClasses), 1);
  lt_scope_end();
}

static void model_free(model *m) {
  lt_release(m->w1);
  lt_release(m->b1);
  lt_release(m->w2);
  lt_release(m->b2);
}

/* One Adam step on batch `step`; returns the loss. */
static double train_step(model *m, lt_nn_optim *o, int step) {
  lt_scope_begin();
  float x[kBatch * kIn];
  int64_t y[kBatch];
  for (int i = 0; i < kBatch * kIn; i++) x[i] = (float)cos(0.9 * i + step);
  for (int i = 0; i < kBatch; i++) y[i] = (i + step) % kClasses;
  lt_tensor *xt = tu_f32(SHAPE(kBatch, kIn), 2, x);
  lt_tensor *h = lt_nn_relu(lt_add(lt_matmul(xt, m->w1), m->b1));
  lt_tensor *logits = lt_add(lt_matmul(h, m->w2), m->b2);
  lt_tensor *loss = lt_nn_cross_entropy(logits, tu_i64(SHAPE(kBatch), 1, y));
  if (lt_backward(loss) != LT_OK) fail_msg("lt_backward: %s", lt_last_error());
  if (lt_nn_optim_step(o) != LT_OK) fail_msg("optim: %s", lt_last_error());
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  double v = NAN;
  assert_int_equal(lt_item(loss, 0, &v), LT_OK);
  lt_scope_end();
  return v;
}

static void train(bool eager, int steps, double *losses, float *w2_out, int64_t *bytes_at,
                  int64_t *live_at) {
  lt_set_eager(eager);
  model m;
  model_init(&m);
  lt_tensor *params[4] = {m.w1, m.b1, m.w2, m.b2};
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 0.05;
  lt_nn_optim *o = lt_nn_optim_create(&cfg, params, 4);
  assert_non_null(o);
  for (int s = 0; s < steps; s++) {
    losses[s] = train_step(&m, o, s);
    for (int p = 0; p < 4; p++) assert_int_equal(lt_zero_grad(params[p]), LT_OK);
    assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    if (bytes_at) assert_int_equal(lt_device_memory(CPU0, &bytes_at[s], NULL), LT_OK);
    if (live_at) live_at[s] = lt_device_live_tensors(CPU0);
  }
  lt_set_eager(false);
  assert_int_equal(lt_to_data(m.w2, w2_out, sizeof(float) * kHidden * kClasses), LT_OK);
  lt_nn_optim_free(o);
  model_free(&m);
}

enum { kSteps = 12 };

static void check_training(const lt_backend *be) {
  lt__backend_force(be);
  double lazy_loss[kSteps], eager_loss[kSteps];
  float lazy_w2[kHidden * kClasses], eager_w2[kHidden * kClasses];
  int64_t bytes[kSteps], live[kSteps];
  train(false, kSteps, lazy_loss, lazy_w2, NULL, NULL);
  train(true, kSteps, eager_loss, eager_w2, bytes, live);
  for (int s = 0; s < kSteps; s++)
    if (!tu_near(eager_loss[s], lazy_loss[s], 1e-5))
      fail_msg("%s step %d: eager loss %.9g, lazy %.9g", be->name, s, eager_loss[s], lazy_loss[s]);
  assert_true(eager_loss[kSteps - 1] < eager_loss[0]); /* it learns */
  for (int i = 0; i < kHidden * kClasses; i++)
    if (!tu_near(eager_w2[i], lazy_w2[i], 1e-5))
      fail_msg("%s w2[%d]: eager %.9g, lazy %.9g", be->name, i, eager_w2[i], lazy_w2[i]);
  /* No history carried from step to step: storage and live tensors are the
   * same after step 4 as after the last. */
  if (bytes[kSteps - 1] != bytes[3] || live[kSteps - 1] != live[3])
    fail_msg(
        "%s: eager steps keep growing: %lld bytes / %lld tensors after step 4, %lld / %lld "
        "after step %d",
        be->name, (long long)bytes[3], (long long)live[3], (long long)bytes[kSteps - 1],
        (long long)live[kSteps - 1], kSteps);
}

static void test_eager_training_ref(void **state) {
  (void)state;
  check_training(&lt__ref_backend);
}
static void test_eager_training_cpu(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  check_training(&lt__cpu_backend);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      ETEST(test_eager_backward_ref),
      ETEST(test_eager_backward_cpu),
      ETEST(test_eager_loss_read_then_backward),
      ETEST(test_eager_training_ref),
      ETEST(test_eager_training_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
