/* Lifetime misuse is reported, not undefined: a tensor read after the scope
 * that owned it ended, released twice, or released while its scope still owns
 * it fails with LT_EINVAL and a message naming the public call. Released
 * headers wait in a per-thread quarantine of LT_TENSOR_QUARANTINE (so these
 * misuses read valid memory: the suite stays clean under ASan and valgrind),
 * and that quarantine is bounded: a long run recycles headers. */
#include <pthread.h>

#include "test_util.h"
#include "../src/core/lt_alloc.h"
#include "../src/core/lt_tensor.h"

static void expect_released(int rc, const char *fn, int64_t id) {
  assert_int_equal(rc, LT_EINVAL);
  assert_int_equal(lt_last_status(), LT_EINVAL);
  char want[96];
  snprintf(want, sizeof want, "%s: tensor %lld was released", fn, (long long)id);
  tu_expect_substr(lt_last_error(), want);
}

/* The common misuse: a result read after lt_scope_end (before: SIGSEGV). */
static void test_read_after_scope_end(void **state) {
  (void)state;
  lt_tensor *a = lt_retain(lt_full(CPU0, LT_F32, SHAPE(2), 1, 3.0));
  lt_scope_begin();
  lt_tensor *y = lt_mul(a, a);
  int64_t id = lt_id(y);
  lt_scope_end();
  int64_t live = lt_device_live_tensors(CPU0);

  lt_clear_error();
  double v = -1;
  expect_released(lt_item(y, 0, &v), "lt_item", id);
  assert_true(v == -1);
  float buf[2] = {-1, -1};
  lt_clear_error();
  expect_released(lt_to_data(y, buf, sizeof buf), "lt_to_data", id);
  assert_true(buf[0] == -1);
  lt_clear_error();
  expect_released(lt_sync(&y, 1, true), "lt_sync", id);

  /* an op given it fails as for a NULL operand, naming itself */
  lt_clear_error();
  assert_null(lt_add(a, y));
  expect_released(lt_last_status(), "lt_add", id);
  lt_clear_error();
  assert_null(lt_retain(y));
  expect_released(lt_last_status(), "lt_retain", id);

  /* accessors answer their "none" value and say why */
  lt_clear_error();
  assert_null(lt_shape(y));
  expect_released(lt_last_status(), "lt_shape", id);
  lt_clear_error();
  assert_int_equal(lt_ndim(y), -1);
  expect_released(lt_last_status(), "lt_ndim", id);
  lt_clear_error();
  assert_int_equal(lt_numel(y), -1);
  expect_released(lt_last_status(), "lt_numel", id);
  lt_clear_error();
  assert_false(lt_ready(y));
  expect_released(lt_last_status(), "lt_ready", id);
  lt_clear_error();
  assert_null(lt_grad(y));
  expect_released(lt_last_status(), "lt_grad", id);
  lt_clear_error();
  expect_released(lt_set_requires_grad(y, true), "lt_set_requires_grad", id);

  /* nothing came back to life, and the live tensor is untouched */
  assert_int_equal(lt_device_live_tensors(CPU0), live);
  tu_expect(lt_mul(a, a), LT_F32, SHAPE(2), 1, (double[]){9, 9}, 0);
  lt_release(a);
}

/* NULL stays quiet where it was: accessors and lt_release accept it. */
static void test_null_is_not_misuse(void **state) {
  (void)state;
  lt_clear_error();
  lt_release(NULL);
  assert_null(lt_retain(NULL));
  assert_int_equal(lt_ndim(NULL), -1);
  assert_null(lt_shape(NULL));
  assert_int_equal(lt_last_status(), LT_OK);
}

/* A second lt_release of the same reference (before: a quiet invalid read,
 * and the device's live count and the allocator's lists corrupted). */
static void test_double_release(void **state) {
  (void)state;
  int64_t live0 = lt_device_live_tensors(CPU0);
  int64_t destroyed0 = tu_counter("DestroyTensor");
  lt_tensor *t = lt_ones(CPU0, LT_F32, SHAPE(3), 1); /* no scope is open: the caller's */
  int64_t id = lt_id(t);
  lt_release(t);
  assert_int_equal(lt_device_live_tensors(CPU0), live0);
  lt_clear_error();
  lt_release(t);
  expect_released(lt_last_status(), "lt_release", id);
  assert_int_equal(lt_device_live_tensors(CPU0), live0);
  assert_int_equal(tu_counter("DestroyTensor") - destroyed0, 1);
}

/* Releasing the reference a scope holds would free the tensor under the
 * scope, which releases it again at its end: refused, the tensor lives on. */
static void test_release_of_scope_owned_tensor(void **state) {
  (void)state;
  int64_t live0 = lt_device_live_tensors(CPU0);
  int64_t destroyed0 = tu_counter("DestroyTensor");
  lt_scope_begin();
  lt_tensor *a = lt_full(CPU0, LT_F32, SHAPE(2), 1, 2.0);
  lt_clear_error();
  lt_release(a);
  assert_int_equal(lt_last_status(), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_release: tensor");
  tu_expect_substr(lt_last_error(), "belongs to the open scope");
  tu_expect(a, LT_F32, SHAPE(2), 1, (double[]){2, 2}, 0); /* kept its value */

  /* one retain buys one release; the second is the scope's again */
  lt_tensor *b = lt_retain(lt_add(a, a));
  lt_clear_error();
  lt_release(b);
  assert_int_equal(lt_last_status(), LT_OK);
  lt_release(b);
  tu_expect_substr(lt_last_error(), "belongs to the open scope");
  tu_expect(b, LT_F32, SHAPE(2), 1, (double[]){4, 4}, 0);
  lt_scope_end(); /* releases a and b once each */
  assert_int_equal(lt_device_live_tensors(CPU0), live0);
  assert_int_equal(tu_counter("DestroyTensor") - destroyed0, 2);

  /* a reference retained past the scope is the caller's to release */
  lt_scope_begin();
  lt_tensor *c = lt_retain(lt_full(CPU0, LT_F32, SHAPE(1), 1, 5.0));
  lt_scope_end();
  lt_clear_error();
  lt_release(c);
  assert_int_equal(lt_last_status(), LT_OK);
  assert_int_equal(lt_device_live_tensors(CPU0), live0);
}

/* ---- the quarantine is bounded: counted through an allocator hook ---- */

static atomic_long g_blocks; /* blocks the hook handed out and has not had back */

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    if (ptr) atomic_fetch_sub(&g_blocks, 1);
    free(ptr);
    return NULL;
  }
  void *q = realloc(ptr, nsize);
  if (q && !ptr) atomic_fetch_add(&g_blocks, 1);
  return q;
}

/* A leaf already read by a graph: its data node exists, so an op over it
 * makes one node and one tensor (see test_alloc.c). */
static lt_tensor *warm_leaf(void) {
  lt_tensor *a = lt_retain(lt_full(CPU0, LT_F32, SHAPE(2), 1, 1.0));
  lt_tensor *t = lt_retain(lt_add(a, a));
  double v;
  assert_int_equal(lt_item(t, 0, &v), LT_OK);
  lt_release(t);
  return a;
}

/* Churns tensors one at a time: each is made and released at once. */
static void churn(lt_tensor *a, int n) {
  for (int i = 0; i < n; i++) {
    lt_tensor *t = lt_add(a, a);
    assert_non_null(t);
    lt_release(t);
  }
}

/* Far more releases than the quarantine holds cost no more memory than
 * the quarantine itself: headers are recycled. */
static void test_quarantine_is_bounded(void **state) {
  (void)state;
  lt_tensor *a = warm_leaf();
  lt_scope_end(); /* the test's scope: churn's tensors are the caller's */
  atomic_store(&g_blocks, 0);
  lt__slab_set_with_hook(true);
  lt_set_allocator(counting_alloc, NULL);
  churn(a, 2 * LT_TENSOR_QUARANTINE);
  long after_two = atomic_load(&g_blocks);
  churn(a, 8 * LT_TENSOR_QUARANTINE);
  long after_ten = atomic_load(&g_blocks);
  lt_set_allocator(NULL, NULL); /* gives quarantine and lists back to the hook */
  lt__slab_set_with_hook(false);
  long left = atomic_load(&g_blocks);
  lt_scope_begin();
  lt_release(a);
  assert_true(after_two >= LT_TENSOR_QUARANTINE); /* the window is really kept */
  assert_int_equal(after_ten, after_two);         /* and no more than that */
  assert_int_equal(left, 0);
}

static void *churn_and_exit(void *p) {
  churn(p, LT_TENSOR_QUARANTINE / 2);
  return NULL;
}

/* A thread's quarantine is given back when it exits. */
static void test_thread_exit_frees_its_quarantine(void **state) {
  (void)state;
  lt_tensor *a = warm_leaf();
  atomic_store(&g_blocks, 0);
  lt__slab_set_with_hook(true);
  lt_set_allocator(counting_alloc, NULL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, churn_and_exit, a), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  long left = atomic_load(&g_blocks);
  lt_set_allocator(NULL, NULL);
  lt__slab_set_with_hook(false);
  lt_release(a);
  assert_int_equal(left, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_read_after_scope_end),
      TU_TEST(test_null_is_not_misuse),
      cmocka_unit_test(test_double_release),
      cmocka_unit_test(test_release_of_scope_owned_tensor),
      TU_TEST(test_quarantine_is_bounded),
      cmocka_unit_test(test_thread_exit_frees_its_quarantine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
