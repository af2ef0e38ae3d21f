/* Helpers shared by the cmocka test programs. */
#ifndef LT_TEST_UTIL_H
#define LT_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lazytensor.h"
#include "../src/core/lt_dtype.h" /* the dtype table: element load / store */

/* 1 in an AddressSanitizer build (gcc says so by a macro, clang by a feature). */
#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

#define CPU0 lt_cpu(0)
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* Whether a test may run the cpu backend: LT_BACKEND=ref is how scripts/test.sh
 * runs the suite under valgrind, which does not follow the LLVM JIT (its
 * set-up reads as leaks), so there only ref; the ASan, TSan and plain runs
 * cover cpu. */
static inline bool tu_cpu_allowed(void) {
  const char *only = getenv("LT_BACKEND");
  return !only || strcmp(only, "ref") != 0;
}

/* How many of the backends {ref, cpu} a test that loops over both runs. */
static inline int tu_nbackends(void) { return tu_cpu_allowed() ? 2 : 1; }

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

/* A counter's value; fails the test for an unknown name. */
static inline int64_t tu_counter(const char *name) {
  int64_t v = -1;
  if (lt_get_counter(name, &v) != LT_OK) fail_msg("lt_get_counter: %s", lt_last_error());
  return v;
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
  for (int64_t i = 0; i < numel; i++) out[i] = lt__load_f64(lt_get_dtype(t), tmp, i);
  free(tmp);
}

/* The one closeness rule of the tests: |got - want| <= tol * (1 + |want|),
 * relative for large values and absolute near 0. False when either is NaN. */
static inline bool tu_near(double got, double want, double tol) {
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* The tolerance of an f32 sum of `terms` values (the products of a matmul or
 * a convolution, a reduction's elements), each at most max_term in size,
 * against the same sum in another order (or in double): oneDNN and the JIT
 * choose blocking, SIMD width and FMA by the processor (AVX-512, AVX2,
 * SSE4.1), so no test knows the order. Each addition rounds by at most half
 * an ulp of its partial sum; for the tests' data (terms of mixed sign, whose
 * partial sums grow like a random walk) one order's error stays within
 * terms * max_term * FLT_EPSILON / 2 (a sum built to be adversarial can do
 * worse); two orders compared with each other, and a safety factor of 2,
 * give the factor 2 here. The result's own size plays no part: a sum that
 * cancels to nearly 0 keeps the error of its large terms. For tu_near, whose
 * tolerance also scales with 1 + |want|, this is at least as loose. */
static inline double tu_f32_sum_tol(int64_t terms, double max_term) {
  return 2.0 * (double)(terms > 1 ? terms : 1) * max_term * FLT_EPSILON;
}

/* t's values as doubles (malloc'd, numel + 1 entries, the caller frees);
 * fails the test on error. */
static inline double *tu_values(lt_tensor *t) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  int64_t n = lt_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  tu_read(t, v, n);
  return v;
}

/* Asserts t has dtype dt, the given shape, and values close to expect
 * (tu_near; NaN matches NaN, inf matches inf). */
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
    if (!tu_near(g, w, tol)) fail_msg("element %lld: got %.9g, want %.9g", (long long)i, g, w);
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

/* Asserts that reading t fails when its graph runs (LT_EEXEC, returned and
 * as the last status) with a message containing needle; t holds at most
 * 256 bytes. For the errors only execution can see (index values). */
static inline void tu_expect_exec_error(lt_tensor *t, const char *needle) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  char buf[256];
  size_t sz = (size_t)lt_numel(t) * lt_dtype_size(lt_get_dtype(t));
  assert_true(sz <= sizeof buf);
  lt_clear_error();
  assert_int_equal(lt_to_data(t, buf, sz), LT_EEXEC);
  assert_int_equal(lt_last_status(), LT_EEXEC);
  if (!strstr(lt_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", lt_last_error(), needle);
}

/* Asserts that text contains needle; shows the whole text when not. */
static inline void tu_expect_substr(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' not found in:\n%s", needle, text);
}

/* How many times needle occurs in text (overlapping occurrences count). */
static inline int tu_occurrences(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* ---- files, directories and child processes ---------------------------------------- */

/* Makes a new directory /tmp/<prefix>XXXXXX and writes its path into buf
 * (n bytes); returns buf, or NULL when mkdtemp fails. */
static inline char *tu_mkdtemp(char *buf, size_t n, const char *prefix) {
  snprintf(buf, n, "/tmp/%sXXXXXX", prefix);
  return mkdtemp(buf);
}

/* Creates an empty file from tmpl ("...XXXXXX", rewritten in place with the
 * name chosen), for a child or the library to write. */
static inline void tu_mkstemp(char *tmpl) {
  int fd = mkstemp(tmpl);
  assert_true(fd >= 0);
  close(fd);
}

/* Removes path and, when it is a directory, everything below it, like
 * rm -rf: directories a test made read-only are made writable first, and a
 * path that does not exist is not an error. Returns 0, or -1 when something
 * stayed. */
static inline int tu_rm_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
  if (!S_ISDIR(st.st_mode)) return unlink(path);
  chmod(path, 0700);
  DIR *d = opendir(path);
  if (!d) return -1;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    char sub[1024];
    int len = snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
    if (len < 0 || (size_t)len >= sizeof sub || tu_rm_tree(sub) != 0) rc = -1;
  }
  closedir(d);
  return rmdir(path) == 0 ? rc : -1;
}

/* The whole file at path (malloc'd, the caller frees), with a '\0' after its
 * last byte so that text can be searched; its size into *n unless n is NULL.
 * Fails the test when the file cannot be read. */
static inline void *tu_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)len + 1);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  b[len] = '\0';
  fclose(f);
  if (n) *n = (size_t)len;
  return b;
}

/* Sends this process's stderr (fd 2, the library's messages included) to a
 * temporary file /tmp/<prefix>XXXXXX until tu_capture_end. */
typedef struct tu_capture {
  int saved_fd;
  char path[64];
} tu_capture;

static inline void tu_capture_begin(tu_capture *c, const char *prefix) {
  fflush(stderr);
  snprintf(c->path, sizeof c->path, "/tmp/%sXXXXXX", prefix);
  int fd = mkstemp(c->path);
  assert_true(fd >= 0);
  c->saved_fd = dup(2);
  assert_true(c->saved_fd >= 0);
  assert_true(dup2(fd, 2) >= 0);
  close(fd);
}

/* What was written to stderr since tu_capture_begin (malloc'd, the caller
 * frees); the capture goes on. */
static inline char *tu_capture_read(tu_capture *c) {
  fflush(stderr);
  return tu_read_file(c->path, NULL);
}

/* Gives stderr back and removes the file. */
static inline void tu_capture_end(tu_capture *c) {
  fflush(stderr);
  dup2(c->saved_fd, 2);
  close(c->saved_fd);
  unlink(c->path);
}

/* Waits for the child pid (through EINTR); returns its exit status, or 128 +
 * the signal that killed it, so that `== 0` means it exited cleanly. */
static inline int tu_wait_child(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) assert_int_equal(errno, EINTR);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- deterministic inputs ---------------------------------------------------------- */

/* Element i of input `seed`: a smooth wave in [-1.5, 1.5], distinct for each
 * seed, that a test can also compute on the host to derive expected values. */
static inline float tu_wave_at(int seed, int64_t i) {
  return (float)sin(0.37 * (double)i + seed) * 1.5f;
}

/* An f32 tensor of the given shape on CPU:0 holding tu_wave_at(seed, i). */
static inline lt_tensor *tu_wave_f32(int seed, const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  float *v = malloc((size_t)n * sizeof *v + 1);
  for (int64_t i = 0; i < n; i++) v[i] = tu_wave_at(seed, i);
  lt_tensor *t = lt_from_data(CPU0, LT_F32, shape, ndim, v);
  free(v);
  return t;
}

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

/* A clean executor for tests that count compiles, cache hits or transfers:
 * no work still queued on CPU:0, an empty compilation cache, zero counters. */
static inline void tu_reset_executor(void) {
  lt_wait_device_ops(CPU0);
  lt_cache_clear();
  lt_counters_reset();
}

/* tu_setup after tu_reset_executor: each test sees only its own compiles. */
static inline int tu_setup_fresh(void **state) {
  tu_reset_executor();
  return tu_setup(state);
}

/* tu_teardown, then waits for the work the test left queued on CPU:0, so
 * that none of it runs into the next test's set-up (counters, cache). */
static inline int tu_teardown_wait(void **state) {
  int rc = tu_teardown(state);
  lt_wait_device_ops(CPU0);
  return rc;
}

/* xorshift64: reproducible pseudo-random test data (state must not be 0). */
static inline uint64_t tu_xorshift(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

#endif
