/* A failed step loses nothing (docs/ARCHITECTURE.md, "A failed step loses
 * nothing"), with parameter aliasing on, on both backends: after a step whose
 * execution fails, every parameter, every other tensor the step would have
 * overwritten in place (a running statistic, whose storage is donated like a
 * parameter's) and every plain input reads its last good value bit-exactly,
 * and the next good step gives exactly what it gives when the failed step
 * never happened.
 *
 * Ways to fail: a kernel's runtime error (a label out of range: one_hot) in
 * a training step, surfacing at lt_wait_device_ops or at a later read; a
 * kernel that fails after a donated buffer was already written (the donor's
 * update comes first in the step); the same on the synchronous path
 * (lt_sync with a donatable tensor); a collective that fails after a donated
 * buffer was written. Allocation failures are swept by test_faults. */
#include "test_util.h"

#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_collective.h"
#include "../src/core/lt_error.h"

enum { IN = 4, OUT = 3, BATCH = 2 };
enum { NW = IN * OUT, NVALUES = IN * OUT + OUT };

static const float kX[BATCH * IN] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, 0.125f, -0.5f};
static const int64_t kGood[BATCH] = {0, 2};
static const int64_t kBad[BATCH] = {9, 1}; /* 9 is out of range [0, 3) */

/* ---- a one-layer classifier trained by plain SGD, plus a running sum ------------------ */

typedef struct model {
  lt_device dev;
  lt_nn_linear lin;
  lt_nn_optim *opt;
  lt_tensor *params[2];
  lt_tensor *x;    /* a plain input, kept across steps */
  lt_tensor *seen; /* a running statistic, not a parameter: seen += sum(x) each step */
} model;

static void model_init(model *m, lt_device dev, const float *values, float seen) {
  memset(m, 0, sizeof *m);
  m->dev = dev;
  assert_int_equal(lt_set_seed(dev, 3), LT_OK);
  assert_int_equal(lt_nn_linear_init(&m->lin, dev, LT_F32, IN, OUT, true), LT_OK);
  m->params[0] = m->lin.weight;
  m->params[1] = m->lin.bias;
  lt_scope_begin();
  assert_int_equal(lt_assign(m->params[0], lt_from_data(dev, LT_F32, SHAPE(IN, OUT), 2, values)),
                   LT_OK);
  assert_int_equal(lt_assign(m->params[1], lt_from_data(dev, LT_F32, SHAPE(OUT), 1, values + NW)),
                   LT_OK);
  lt_scope_end();
  m->x = lt_from_data(dev, LT_F32, SHAPE(BATCH, IN), 2, kX);
  m->seen = lt_from_data(dev, LT_F32, SHAPE(1), 1, &seen);
  assert_non_null(m->x);
  assert_non_null(m->seen);
  assert_int_equal(lt_mark_step(dev), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_SGD);
  cfg.lr = 0.5;
  m->opt = lt_nn_optim_create(&cfg, m->params, 2);
  assert_non_null(m->opt);
}

static void model_free(model *m) {
  lt_wait_device_ops(m->dev);
  lt_clear_error();
  lt_nn_optim_free(m->opt);
  lt_nn_linear_free(&m->lin);
  lt_release(m->x);
  lt_release(m->seen);
}

/* Every value the model holds: weight, bias, seen, x. */
enum { NSTATE = NVALUES + 1 + BATCH * IN };
static void model_read(model *m, float *v) {
  lt_tensor *ts[4] = {m->params[0], m->params[1], m->seen, m->x};
  const char *names[4] = {"weight", "bias", "seen", "x"};
  for (int i = 0; i < 4; i++) {
    int64_t n = lt_numel(ts[i]);
    if (lt_to_data(ts[i], v, (size_t)n * sizeof(float)) != LT_OK)
      fail_msg("%s is unreadable: %s", names[i], lt_last_error());
    v += n;
  }
}

/* Traces one step with labels y and queues it (lt_mark_step); the loss is
 * returned pending (the caller releases it). */
static lt_tensor *model_trace(model *m, const int64_t *y, int *rc) {
  lt_tensor *labels = lt_from_data(m->dev, LT_I64, SHAPE(BATCH), 1, y);
  lt_tensor *loss = lt_nn_cross_entropy(lt_nn_linear_forward(&m->lin, m->x), labels);
  lt_release(labels);
  assert_non_null(loss);
  lt_tensor *s = lt_add(m->seen, lt_sum(m->x, NULL, 0, false));
  assert_int_equal(lt_assign(m->seen, s), LT_OK);
  lt_release(s);
  assert_int_equal(lt_backward(loss), LT_OK);
  assert_int_equal(lt_nn_optim_step(m->opt), LT_OK);
  *rc = lt_mark_step(m->dev);
  return loss;
}

/* One good step; its loss into *loss. */
static void model_good_step(model *m, float *loss) {
  lt_scope_begin();
  int rc;
  lt_tensor *l = model_trace(m, kGood, &rc);
  if (rc == LT_OK) rc = lt_wait_device_ops(m->dev);
  if (rc == LT_OK) rc = lt_to_data(l, loss, sizeof *loss);
  if (rc != LT_OK) fail_msg("a good step failed: %s", lt_last_error());
  lt_scope_end();
}

static const float kInit[NVALUES] = {0.1f, -0.2f, 0.3f,  0.05f, -0.15f, 0.25f,  0.35f, -0.3f,
                                     0.2f, 0.1f,  -0.1f, 0.4f,  0.01f,  -0.02f, 0.03f};

static void check_same(const float *got, const float *want, int n, const char *what) {
  if (memcmp(got, want, (size_t)n * sizeof(float)) == 0) return;
  for (int i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
      fail_msg("%s: value %d is %.9g, expected %.9g", what, i, got[i], want[i]);
}

static const lt_backend *g_backends[2] = {&lt__ref_backend, &lt__cpu_backend};
static const char *g_backend_names[2] = {"ref", "cpu"};

/* A label out of range in a step queued by lt_mark_step: the failure surfaces
 * at lt_wait_device_ops (late_read false) or at the loss's read; either way
 * the model keeps its last good values, and the next good step matches a
 * model that never saw the bad one. */
static void bad_label_step(int b, bool late_read) {
  lt__backend_force(g_backends[b]);
  lt_set_param_aliasing(true);
  model m, r;
  model_init(&m, lt_cpu(2), kInit, 0.0f);
  model_init(&r, lt_cpu(3), kInit, 0.0f);
  float loss, rloss, before[NSTATE], after[NSTATE], want[NSTATE];
  model_good_step(&m, &loss);
  model_good_step(&r, &rloss);
  model_read(&m, before);

  lt_scope_begin();
  int rc;
  lt_tensor *l = model_trace(&m, kBad, &rc);
  assert_int_equal(rc, LT_OK); /* queued: the execution fails on the worker */
  if (late_read) {
    float v;
    rc = lt_to_data(l, &v, sizeof v);
  } else {
    rc = lt_wait_device_ops(m.dev);
  }
  lt_scope_end();
  assert_int_equal(rc, LT_EEXEC);
  assert_non_null(strstr(lt_last_error(), "out of range"));
  lt_clear_error();
  lt_wait_device_ops(m.dev); /* reported already, or now */
  lt_clear_error();
  model_read(&m, after);
  check_same(after, before, NSTATE, g_backend_names[b]);

  model_good_step(&m, &loss);
  model_good_step(&r, &rloss);
  model_read(&m, after);
  model_read(&r, want);
  check_same(after, want, NSTATE, "the step after the failed one");
  assert_true(memcmp(&loss, &rloss, sizeof loss) == 0);
  model_free(&m);
  model_free(&r);
  lt__backend_force(NULL);
}

static void test_bad_label_keeps_the_model(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) bad_label_step(b, false);
}

static void test_bad_label_seen_at_a_later_read(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) bad_label_step(b, true);
}

/* A step whose first root overwrites a donated tensor in place, and whose
 * second root then fails: the donor was written before the failure. */
static void written_then_failed(int b, bool sync) {
  lt__backend_force(g_backends[b]);
  lt_set_param_aliasing(true);
  lt_device dev = lt_cpu(4);
  const float v[4] = {1.5f, -2.0f, 0.25f, 8.0f};
  const int64_t bad[2] = {1, 9}, good[2] = {1, 0};
  lt_tensor *s = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  assert_int_equal(lt_mark_step(dev), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  if (sync) assert_int_equal(lt_set_donatable(s, true), LT_OK);
  lt_tensor *two = lt_scalar(dev, LT_F32, 2.0);
  lt_tensor *twice = lt_mul(s, two);
  lt_tensor *upd = lt_add(twice, two); /* s * 2 + 2 */
  assert_int_equal(lt_assign(s, upd), LT_OK);
  lt_release(twice);
  lt_release(upd);
  lt_tensor *idx = lt_from_data(dev, LT_I64, SHAPE(2), 1, bad);
  lt_tensor *z = lt_one_hot(idx, 3, LT_F32);
  assert_non_null(z);
  int rc;
  if (sync) {
    lt_tensor *ts[2] = {s, z};
    rc = lt_sync(ts, 2, true);
  } else {
    rc = lt_mark_step(dev);
    if (rc == LT_OK) rc = lt_wait_device_ops(dev);
  }
  assert_int_equal(rc, LT_EEXEC);
  lt_clear_error();
  float got[4];
  assert_int_equal(lt_to_data(s, got, sizeof got), LT_OK);
  float want[4];
  /* the barrier kept the old value; lt_sync kept s's pending graph, whose
   * leaf (the donated storage) must still hold v */
  for (int i = 0; i < 4; i++) want[i] = sync ? v[i] * 2 + 2 : v[i];
  check_same(got, want, 4, sync ? "lt_sync" : "lt_mark_step");
  /* and the next good step goes on from there */
  lt_release(z);
  lt_release(idx);
  idx = lt_from_data(dev, LT_I64, SHAPE(2), 1, good);
  z = lt_one_hot(idx, 3, LT_F32);
  twice = lt_mul(s, two);
  upd = lt_add(twice, two);
  assert_int_equal(lt_assign(s, upd), LT_OK);
  lt_release(twice);
  assert_int_equal(lt_mark_step(dev), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  assert_int_equal(lt_to_data(s, got, sizeof got), LT_OK);
  for (int i = 0; i < 4; i++) want[i] = want[i] * 2 + 2;
  check_same(got, want, 4, "the next step");
  lt_release(upd);
  lt_release(z);
  lt_release(idx);
  lt_release(two);
  lt_release(s);
  lt__backend_force(NULL);
}

static void test_donor_written_before_the_failure(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) written_then_failed(b, false);
}

static void test_donor_written_before_the_failure_sync(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) written_then_failed(b, true);
}

/* ---- a collective that fails ------------------------------------------------------- */

static int failing_transport(void *state, int rank, lt_coll_call *call) {
  (void)state;
  (void)rank;
  (void)call;
  return lt__err(LT_EEXEC, "fake transport: peer 1 is gone");
}
static const lt_transport kFailing = {"failing", failing_transport, false};

/* a is updated first (its storage written in place), then b's update needs
 * an all_reduce, which fails. */
static void collective_fails(int b) {
  lt__backend_force(g_backends[b]);
  lt_set_param_aliasing(true);
  enum { D = 6 };
  lt_device dev = lt_cpu(D);
  const float av[3] = {1, 2, 3}, bv[3] = {-4, 5, 0.5f};
  lt_tensor *a = lt_from_data(dev, LT_F32, SHAPE(3), 1, av);
  lt_tensor *bb = lt_from_data(dev, LT_F32, SHAPE(3), 1, bv);
  assert_int_equal(lt_mark_step(dev), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  assert_int_equal(lt__coll_bind(D, &kFailing, NULL, 0, 2), LT_OK);
  lt_scope_begin();
  lt_tensor *one = lt_scalar(dev, LT_F32, 1.0);
  assert_int_equal(lt_assign(a, lt_add(a, one)), LT_OK);
  assert_int_equal(lt_assign(bb, lt_add(bb, lt_all_reduce(lt_mul(a, bb), LT_REDUCE_SUM))), LT_OK);
  lt_scope_end();
  int rc = lt_mark_step(dev);
  if (rc == LT_OK) rc = lt_wait_device_ops(dev);
  assert_int_equal(rc, LT_EEXEC);
  assert_non_null(strstr(lt_last_error(), "peer 1 is gone"));
  lt_clear_error();
  lt__coll_unbind(D);
  float got[3];
  assert_int_equal(lt_to_data(a, got, sizeof got), LT_OK);
  check_same(got, av, 3, "a (written before the collective)");
  assert_int_equal(lt_to_data(bb, got, sizeof got), LT_OK);
  check_same(got, bv, 3, "b");
  lt_release(a);
  lt_release(bb);
  lt__backend_force(NULL);
}

static void test_collective_failure_keeps_donors(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) collective_fails(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_label_keeps_the_model),
      cmocka_unit_test(test_bad_label_seen_at_a_later_read),
      cmocka_unit_test(test_donor_written_before_the_failure),
      cmocka_unit_test(test_donor_written_before_the_failure_sync),
      cmocka_unit_test(test_collective_failure_keeps_donors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
