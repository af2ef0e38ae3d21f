/* Helpers shared by the cmocka test programs. */
#ifndef LT_TEST_UTIL_H
#define LT_TEST_UTIL_H

#include <math.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lazytensor.h"

#define CPU0 lt_cpu(0)
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* f32 / f64 / i32 / i64 / bool tensors from literal lists. */
static inline lt_tensor *tu_f32(const int64_t *shape, int ndim, const float *v) {
  return lt_from_data(CPU0, LT_F32, shape, ndim, v);
}
static inline lt_tensor *tu_f64(const int64_t *shape, int ndim, const double *v) {
  return lt_from_data(CPU0, LT_F64, shape, ndim, v);
}
static inline lt_tensor *tu_i32(const int64_t *shape, int ndim, const int32_t *v) {
  return lt_from_data(CPU0, LT_I32, shape, ndim, v);
}
static inline lt_tensor *tu_i64(const int64_t *shape, int ndim, const int64_t *v) {
  return lt_from_data(CPU0, LT_I64, shape, ndim, v);
}
static inline lt_tensor *tu_bool(const int64_t *shape, int ndim, const uint8_t *v) {
  return lt_from_data(CPU0, LT_BOOL, shape, ndim, v);
}

/* Reads t (any dtype) as doubles into out (capacity n); fails the test on error. */
static inline void tu_read(lt_tensor *t, double *out, int64_t n) {
  assert_non_null(t);
  int64_t numel = lt_numel(t);
  assert_true(numel <= n);
  size_t sz = lt_dtype_size(lt_get_dtype(t));
  void *tmp = malloc(numel * sz + 1);
  int rc = lt_to_data(t, tmp, numel * sz);
  if (rc != LT_OK) fail_msg("lt_to_data: %s", lt_last_error());
  for (int64_t i = 0; i < numel; i++) {
    switch (lt_get_dtype(t)) {
    case LT_BOOL:
      out[i] = ((uint8_t *)tmp)[i];
      break;
    case LT_I32:
      out[i] = ((int32_t *)tmp)[i];
      break;
    case LT_I64:
      out[i] = (double)((int64_t *)tmp)[i];
      break;
    case LT_F32:
      out[i] = ((float *)tmp)[i];
      break;
    default:
      out[i] = ((double *)tmp)[i];
      break;
    }
  }
  free(tmp);
}

/* Asserts t has dtype dt, the given shape, and values close to expect
 * (|got - want| <= tol * (1 + |want|); NaN matches NaN, inf matches inf). */
static inline void tu_expect(lt_tensor *t, lt_dtype dt, const int64_t *shape, int ndim,
                             const double *expect, double tol) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  assert_int_equal(lt_get_dtype(t), dt);
  assert_int_equal(lt_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) assert_int_equal(lt_shape(t)[i], shape[i]);
  int64_t n = lt_numel(t);
  double *got = malloc(sizeof(double) * (n + 1));
  tu_read(t, got, n);
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = expect[i];
    if (isnan(w) && isnan(g)) continue;
    if (isinf(w) && g == w) continue;
    if (!(fabs(g - w) <= tol * (1 + fabs(w))))
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, g, w);
  }
  free(got);
}

/* Asserts that a call failed with status st and a message containing needle. */
#define TU_EXPECT_ERROR(expr, st, needle)                             \
  do {                                                                \
    lt_clear_error();                                                 \
    lt_tensor *tu_r_ = (expr);                                        \
    if (tu_r_) fail_msg("expected failure of %s", #expr);             \
    assert_int_equal(lt_last_status(), (st));                         \
    if (!strstr(lt_last_error(), (needle)))                           \
      fail_msg("message '%s' lacks '%s'", lt_last_error(), (needle)); \
  } while (0)

/* An allocator hook that fails once a budget of allocations is spent
 * (tu_budget < 0: never). Atomic: worker threads allocate too. */
static atomic_long tu_budget = -1;
static inline void *tu_failing_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  long b = atomic_load(&tu_budget);
  while (b > 0 && !atomic_compare_exchange_weak(&tu_budget, &b, b - 1)) {
  }
  if (b == 0) return NULL;
  return realloc(ptr, nsize);
}

/* Wraps a test body in a scope so that every temporary is released. */
static inline int tu_setup(void **state) {
  (void)state;
  lt_clear_error();
  lt_scope_begin();
  return 0;
}
static inline int tu_teardown(void **state) {
  (void)state;
  lt_scope_end();
  return 0;
}
#define TU_TEST(f) cmocka_unit_test_setup_teardown(f, tu_setup, tu_teardown)

#endif
