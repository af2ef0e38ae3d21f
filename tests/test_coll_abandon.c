/* A transport that gives up while MPI may still use the caller's memory
 * (a timed-out request cannot be cancelled) marks the execution abandoned
 * (lt__coll_abandon). The backend must then leak that execution's memory
 * instead of reusing it: here a fake transport abandons every call, and the
 * step's argument buffer must come out of the failed execution with one
 * more reference (never freed), on both backends; the failure reaches the
 * caller as the transport's error, and the mark does not leak into the
 * next execution (a later step on another device frees normally).
 *
 * The leak is the point, so leak checkers are told: LeakSanitizer by the
 * test's environment (CMakeLists.txt), valgrind by scripts/test.sh (which
 * skips this binary). */
#include "test_util.h"

#include <stdatomic.h>

#include "lazytensor_dist.h"
#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_buffer.h"
#include "../src/core/lt_collective.h"
#include "../src/core/lt_error.h"
#include "../src/core/lt_tensor.h"

enum { DEV = 5 };

static int giving_up(void *state, int rank, lt_coll_call *call) {
  (void)state;
  (void)rank;
  (void)call;
  lt__coll_abandon();
  return lt__err(LT_EEXEC, "fake transport: gave up with a request pending");
}
static const lt_transport kGivingUp = {"giving-up", giving_up, false};

static void run(const lt_backend *be) {
  lt__backend_force(be);
  assert_int_equal(lt__coll_bind(DEV, &kGivingUp, NULL, 0, 2), LT_OK);
  const float v[4] = {1, 2, 3, 4};
  lt_tensor *x = lt_from_data(lt_cpu(DEV), LT_F32, SHAPE(4), 1, v);
  assert_non_null(x);
  assert_int_equal(lt_mark_step(lt_cpu(DEV)), LT_OK);
  assert_int_equal(lt_wait_device_ops(lt_cpu(DEV)), LT_OK);
  assert_non_null(x->buf);
  int before = atomic_load(&x->buf->refs);
  lt_tensor *y = lt_all_reduce(lt_mul(x, x), LT_REDUCE_SUM);
  assert_non_null(y);
  float got[4];
  assert_int_not_equal(lt_to_data(y, got, sizeof got), LT_OK);
  assert_non_null(strstr(lt_last_error(), "gave up"));
  assert_int_equal(atomic_load(&x->buf->refs), before + 1); /* leaked, never reused */
  /* x keeps its value */
  float back[4];
  lt__coll_unbind(DEV);
  assert_int_equal(lt_to_data(x, back, sizeof back), LT_OK);
  assert_true(back[0] == 1 && back[3] == 4);
  lt_release(y);
  lt_release(x);

  /* the next execution (another device, no collective) releases as usual */
  lt_tensor *a = lt_from_data(lt_cpu(DEV + 1), LT_F32, SHAPE(4), 1, v);
  assert_int_equal(lt_mark_step(lt_cpu(DEV + 1)), LT_OK);
  assert_int_equal(lt_wait_device_ops(lt_cpu(DEV + 1)), LT_OK);
  int refs = atomic_load(&a->buf->refs);
  lt_tensor *b = lt_add(a, a);
  assert_int_equal(lt_to_data(b, back, sizeof back), LT_OK);
  assert_true(back[3] == 8);
  assert_int_equal(atomic_load(&a->buf->refs), refs);
  lt_release(b);
  lt_release(a);
  lt__backend_force(NULL);
}

static void test_abandoned_execution_leaks_its_memory(void **state) {
  (void)state;
  const lt_backend *bes[2] = {&lt__ref_backend, &lt__cpu_backend};
  for (int b = 0; b < tu_nbackends(); b++) run(bes[b]);
}

/* A step that overwrites a donated tensor in place and then abandons a
 * collective: the donor's storage stays with MPI (leaked), and the tensor
 * keeps its value in fresh storage. */
static void donor_of_abandoned(const lt_backend *be) {
  lt__backend_force(be);
  lt_set_param_aliasing(true);
  lt_device dev = lt_cpu(DEV + 2);
  const float v[4] = {1, 2, 3, 4};
  lt_tensor *w = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  assert_int_equal(lt_mark_step(dev), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  assert_int_equal(lt__coll_bind(DEV + 2, &kGivingUp, NULL, 0, 2), LT_OK);
  lt_scope_begin();
  assert_int_equal(lt_assign(w, lt_add(w, w)), LT_OK); /* first: w's storage written */
  assert_int_equal(lt_assign(x, lt_add(x, lt_all_reduce(lt_mul(w, x), LT_REDUCE_SUM))), LT_OK);
  lt_scope_end();
  int rc = lt_mark_step(dev);
  if (rc == LT_OK) rc = lt_wait_device_ops(dev);
  assert_int_not_equal(rc, LT_OK);
  assert_non_null(strstr(lt_last_error(), "gave up"));
  lt__coll_unbind(DEV + 2);
  float got[4];
  assert_int_equal(lt_to_data(w, got, sizeof got), LT_OK);
  assert_true(memcmp(got, v, sizeof v) == 0);
  assert_int_equal(lt_to_data(x, got, sizeof got), LT_OK);
  assert_true(memcmp(got, v, sizeof v) == 0);
  lt_release(w);
  lt_release(x);
  lt__backend_force(NULL);
}

static void test_abandoned_step_keeps_donated_values(void **state) {
  (void)state;
  const lt_backend *bes[2] = {&lt__ref_backend, &lt__cpu_backend};
  for (int b = 0; b < tu_nbackends(); b++) donor_of_abandoned(bes[b]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_abandoned_execution_leaks_its_memory),
      cmocka_unit_test(test_abandoned_step_keeps_donated_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
