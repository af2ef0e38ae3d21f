/* The buffer pool (src/core/lt_buffer_pool.h): reuse, size classes and
 * alignment, the bound, zeroing, failure injection through the allocator hook,
 * concurrent use, the memory checkers, and the cpu backend's arena. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>

#include "test_util.h"
#include "../src/core/lt_buffer_pool.h"

#if TU_ASAN
#include <sanitizer/asan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define TEST_VALGRIND 1
#endif
#endif

#define MIB ((size_t)1 << 20)
#define HUGE_ALIGN (2 * MIB)

static lt_buffer_pool_stats stats(void) {
  lt_buffer_pool_stats s;
  lt__buffer_pool_stats(&s);
  return s;
}

/* Each test starts from an empty cache, the default bound and a fresh peak. */
static int pool_setup(void **state) {
  lt__buffer_pool_set_limit(-1);
  lt__buffer_pool_trim();
  return tu_setup(state);
}
#define POOL_TEST(f) cmocka_unit_test_setup_teardown(f, pool_setup, tu_teardown)

/* Whether [p, p + n) is still mapped (mincore fails with ENOMEM where not). */
static bool mapped(void *p, size_t n) {
  unsigned char vec[8];
  return mincore(p, n < 8 * 4096 ? n : 8 * 4096, vec) == 0 || errno != ENOMEM;
}

static void test_reuse(void **state) {
  (void)state;
  lt_buffer_pool_stats s0 = stats();
  char *p = lt__buffer_pool_alloc(MIB, false);
  assert_non_null(p);
  memset(p, 1, MIB);
  lt__buffer_pool_free(p, MIB);
  /* a request of the same class gets the same block back, without a new mapping */
  char *q = lt__buffer_pool_alloc(MIB - 5000, false);
  assert_ptr_equal(q, p);
  lt_buffer_pool_stats s1 = stats();
  assert_int_equal(s1.maps - s0.maps, 1);
  assert_int_equal(s1.hits - s0.hits, 1);
  assert_int_equal(s1.in_use_bytes - s0.in_use_bytes, MIB);
  lt__buffer_pool_free(q, MIB - 5000);
  assert_int_equal(stats().in_use_bytes, s0.in_use_bytes);
}

static void test_classes_and_alignment(void **state) {
  (void)state;
  const size_t sizes[] = {
      LT_BUFFER_POOL_MIN_BYTES, 401408, MIB + 1, 1605632, 1900000, 2 * MIB, 3993600, 9 * MIB + 5};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i], c = lt__buffer_pool_class(n);
    assert_true(c >= n);
    assert_true(c - n <= c / 4); /* a quarter of the block at most is slack */
    assert_int_equal(c % 4096, 0);
    char *p = lt__buffer_pool_alloc(n, false);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % HUGE_ALIGN, 0);
    memset(p, 7, n); /* every byte asked for is usable */
    lt__buffer_pool_free(p, n);
  }
  /* sizes close under a multiple of 2 MiB take whole huge pages, others the
   * next of four steps per power of two */
  assert_int_equal(lt__buffer_pool_class(1900000), 2 * MIB);
  assert_int_equal(lt__buffer_pool_class(3993600), 4 * MIB);
  assert_int_equal(lt__buffer_pool_class(1605632), 7 * MIB / 4);
  assert_int_equal(lt__buffer_pool_class(MIB), MIB);
  /* small requests are not pooled */
  assert_int_equal(lt__buffer_pool_class(LT_BUFFER_POOL_MIN_BYTES - 1), 0);
  lt_buffer_pool_stats s0 = stats();
  void *small = lt__buffer_pool_alloc(1000, false);
  assert_non_null(small);
  assert_int_equal(stats().in_use_bytes, s0.in_use_bytes);
  lt__buffer_pool_free(small, 1000);
  /* an impossible size fails cleanly */
  lt_clear_error();
  assert_null(lt__buffer_pool_alloc(SIZE_MAX / 2, false));
  assert_int_equal(lt_last_status(), LT_ENOMEM);
  tu_expect_substr(lt_last_error(), "bytes of storage");
}

static void test_bound(void **state) {
  (void)state;
  /* a cap of one block: of two freed blocks the older goes back to the OS */
  lt__buffer_pool_set_limit((int64_t)MIB);
  char *a = lt__buffer_pool_alloc(MIB, false), *b = lt__buffer_pool_alloc(MIB, false);
  assert_non_null(a);
  assert_non_null(b);
  memset(a, 1, MIB);
  memset(b, 2, MIB);
  lt_buffer_pool_stats s0 = stats();
  lt__buffer_pool_free(a, MIB);
  lt__buffer_pool_free(b, MIB);
  lt_buffer_pool_stats s1 = stats();
  assert_int_equal(s1.cached_bytes, MIB);
  assert_int_equal(s1.unmaps - s0.unmaps, 1);
  if (!TU_ASAN) { /* (under ASan blocks come from its heap) */
    assert_false(mapped(a, MIB));
    assert_true(mapped(b, MIB));
  }
  char *c = lt__buffer_pool_alloc(MIB, false);
  assert_ptr_equal(c, b);
  lt__buffer_pool_free(c, MIB);

  /* a cap of 0 keeps nothing */
  lt__buffer_pool_set_limit(0);
  assert_int_equal(stats().cached_bytes, 0);
  char *d = lt__buffer_pool_alloc(MIB, false);
  assert_non_null(d);
  lt__buffer_pool_free(d, MIB);
  assert_int_equal(stats().cached_bytes, 0);
  if (!TU_ASAN) assert_false(mapped(d, MIB));

  /* without a cap the pool still never holds more than its peak in use: a
   * block of another class evicts the kept one rather than add to it */
  lt__buffer_pool_set_limit(-1);
  lt__buffer_pool_trim();
  size_t base = stats().in_use_bytes;
  char *e = lt__buffer_pool_alloc(MIB, false);
  lt__buffer_pool_free(e, MIB);
  assert_int_equal(stats().cached_bytes, MIB); /* the peak was base + 1 MiB */
  s0 = stats();
  char *f = lt__buffer_pool_alloc(2 * MIB, false);
  assert_non_null(f);
  s1 = stats();
  assert_int_equal(s1.cached_bytes, 0);
  assert_int_equal(s1.unmaps - s0.unmaps, 1);
  assert_true(s1.in_use_bytes + s1.cached_bytes <= s1.peak_bytes);
  assert_int_equal(s1.in_use_bytes, base + 2 * MIB);
  lt__buffer_pool_free(f, 2 * MIB);
  lt__buffer_pool_trim();
  assert_int_equal(stats().cached_bytes, 0);
}

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* How many of the pages of [p, p + n) are resident. */
static size_t resident_pages(void *p, size_t n) {
  size_t np = (n + 4095) / 4096, count = 0;
  unsigned char *vec = malloc(np);
  assert_non_null(vec);
  assert_int_equal(mincore(p, n, vec), 0);
  for (size_t i = 0; i < np; i++) count += vec[i] & 1;
  free(vec);
  return count;
}

/* A new block below a huge page that is about to be written (no zeros asked
 * for) comes with its pages present (one system call, not a fault per
 * page); a zero block stays untouched until used. */
static void test_fresh_small_blocks_are_populated(void **state) {
  (void)state;
  if (TU_ASAN) skip(); /* blocks from the sanitizer's heap */
  void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(probe != MAP_FAILED);
  bool can = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(probe, 4096);
  if (!can) skip();       /* a kernel before 5.14 */
  size_t n = 3 * MIB / 2; /* a class of its own, below 2 MiB */
  lt_buffer_pool_stats s0 = stats();
  char *p = lt__buffer_pool_alloc(n, false);
  assert_non_null(p);
  assert_int_equal(stats().maps - s0.maps, 1); /* fresh */
  assert_int_equal(resident_pages(p, n), n / 4096);
  char *z = lt__buffer_pool_alloc(n, true);
  assert_non_null(z);
  assert_int_equal(stats().maps - s0.maps, 2);
  assert_int_equal(resident_pages(z, n), 0);
  lt__buffer_pool_free(z, n);
  lt__buffer_pool_free(p, n);
}

static void test_zeroing(void **state) {
  (void)state;
  unsigned char *p = lt__buffer_pool_alloc(3 * MIB, true); /* fresh */
  assert_non_null(p);
  assert_true(all_zero(p, 3 * MIB));
  memset(p, 0xAB, 3 * MIB);
  lt__buffer_pool_free(p, 3 * MIB);
  unsigned char *q = lt__buffer_pool_alloc(3 * MIB, true); /* reused: cleared */
  assert_ptr_equal(q, p);
  assert_true(all_zero(q, 3 * MIB));
  lt__buffer_pool_free(q, 3 * MIB);
  unsigned char *s = lt__buffer_pool_alloc(5000, true); /* small: lt__calloc */
  assert_non_null(s);
  assert_true(all_zero(s, 5000));
  lt__buffer_pool_free(s, 5000);
}

static void test_failure_injection(void **state) {
  (void)state;
  lt_set_allocator(tu_failing_alloc, NULL);
  /* a refill asks the allocator hook first: failing it fails the request */
  atomic_store(&tu_budget, 0);
  lt_clear_error();
  lt_buffer_pool_stats s0 = stats();
  assert_null(lt__buffer_pool_alloc(MIB, false));
  assert_int_equal(lt_last_status(), LT_ENOMEM);
  tu_expect_substr(lt_last_error(), "1048576 bytes of storage");
  assert_int_equal(stats().maps, s0.maps);
  assert_int_equal(stats().failures, s0.failures + 1);
  assert_int_equal(stats().in_use_bytes, s0.in_use_bytes);
  atomic_store(&tu_budget, -1);
  char *p = lt__buffer_pool_alloc(MIB, false);
  assert_non_null(p);
  lt__buffer_pool_free(p, MIB);
  /* a kept block needs no new memory */
  atomic_store(&tu_budget, 0);
  char *q = lt__buffer_pool_alloc(MIB, false);
  atomic_store(&tu_budget, -1);
  assert_ptr_equal(q, p);
  lt__buffer_pool_free(q, MIB);

  /* Through the library: fail the k-th allocation of a trace-and-read whose
   * result is pooled storage, for each k in turn, with an empty cache so that
   * the storage is refilled. Each attempt ends in a clear error or the right
   * result, and some of the failures are the pool's refills. */
  enum { N = 512 * 512 };
  float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
  assert_non_null(x);
  assert_non_null(got);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f;
  int failures = 0, successes = 0;
  int64_t refill_failures = stats().failures;
  /* k = -1 compiles the graph (no failure): the sweep then runs the cached one */
  for (long k = -1; k < 200 && successes < 4; k++) {
    lt_scope_begin();
    lt__buffer_pool_trim();
    lt_clear_error();
    atomic_store(&tu_budget, k);
    lt_tensor *t = lt_from_data(CPU0, LT_F32, SHAPE(512, 512), 2, x);
    lt_tensor *y =
        lt_abs(lt_add(lt_mul(t, lt_scalar(CPU0, LT_F32, 2.0)), lt_scalar(CPU0, LT_F32, 1.0)));
    int rc = y ? lt_to_data(y, got, N * sizeof *got) : lt_last_status();
    atomic_store(&tu_budget, -1);
    if (rc == LT_OK) {
      for (int i = 0; i < N; i++) assert_true(got[i] == fabsf(2.0f * x[i] + 1.0f));
      successes++;
    } else {
      assert_true(rc < 0);
      assert_true(strlen(lt_last_error()) > 0);
      failures++;
    }
    lt_scope_end();
  }
  lt_set_allocator(NULL, NULL);
  free(x);
  free(got);
  assert_true(failures > 0);
  assert_true(stats().failures > refill_failures); /* the sweep reached the pool */
  assert_true(successes > 0);
}

/* ---- two threads: one allocates and hands blocks over, both free ---- */

enum { RING = 8, ROUNDS = 200 };
typedef struct handoff {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  char *ring[RING];
  size_t size[RING];
  int head, count;
  bool done;
} handoff;

static const size_t kSizes[] = {LT_BUFFER_POOL_MIN_BYTES, 300 * 1024, MIB, 1605632, 3 * MIB};

static void stamp(char *p, size_t n, char tag) {
  p[0] = tag;
  p[n / 2] = tag;
  p[n - 1] = tag;
}
static bool stamped(const char *p, size_t n, char tag) {
  return p[0] == tag && p[n / 2] == tag && p[n - 1] == tag;
}

static void *producer(void *arg) {
  handoff *h = arg;
  uint64_t rng = 1;
  for (int i = 0; i < ROUNDS; i++) {
    size_t n = kSizes[tu_xorshift(&rng) % 5];
    char *own = lt__buffer_pool_alloc(n, false); /* kept here a moment */
    char *give = lt__buffer_pool_alloc(kSizes[i % 5], false);
    if (!own || !give) abort();
    stamp(own, n, 'p');
    stamp(give, kSizes[i % 5], 'g');
    pthread_mutex_lock(&h->lock);
    while (h->count == RING) pthread_cond_wait(&h->cond, &h->lock);
    h->ring[(h->head + h->count) % RING] = give;
    h->size[(h->head + h->count) % RING] = kSizes[i % 5];
    h->count++;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    if (!stamped(own, n, 'p')) abort(); /* no one else was given it */
    lt__buffer_pool_free(own, n);
  }
  pthread_mutex_lock(&h->lock);
  h->done = true;
  pthread_cond_broadcast(&h->cond);
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

static void *consumer(void *arg) {
  handoff *h = arg;
  uint64_t rng = 2;
  long bad = 0;
  for (;;) {
    size_t n = kSizes[tu_xorshift(&rng) % 5];
    char *own = lt__buffer_pool_alloc(n, true);
    if (!own || own[n - 1] != 0) bad++;
    stamp(own, n, 'c');
    pthread_mutex_lock(&h->lock);
    while (h->count == 0 && !h->done) pthread_cond_wait(&h->cond, &h->lock);
    if (h->count == 0) {
      pthread_mutex_unlock(&h->lock);
      lt__buffer_pool_free(own, n);
      break;
    }
    char *got = h->ring[h->head];
    size_t gn = h->size[h->head];
    h->head = (h->head + 1) % RING;
    h->count--;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    if (!stamped(got, gn, 'g')) bad++;
    lt__buffer_pool_free(got, gn); /* freed by the other thread than its allocator */
    if (!stamped(own, n, 'c')) bad++;
    lt__buffer_pool_free(own, n);
  }
  return (void *)(intptr_t)bad;
}

static void test_two_threads(void **state) {
  (void)state;
  size_t base = stats().in_use_bytes;
  handoff h = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  pthread_t a, b;
  assert_int_equal(pthread_create(&a, NULL, producer, &h), 0);
  assert_int_equal(pthread_create(&b, NULL, consumer, &h), 0);
  void *bad = NULL;
  pthread_join(a, NULL);
  pthread_join(b, &bad);
  assert_int_equal((intptr_t)bad, 0);
  lt_buffer_pool_stats s = stats();
  assert_int_equal(s.in_use_bytes, base);
  assert_true(s.hits > 0);
  assert_true(s.in_use_bytes + s.cached_bytes <= s.peak_bytes);
}

/* ---- the memory checkers still see a pooled block's misuse ---- */

static void test_use_after_free_is_caught(void **state) {
  (void)state;
#if TU_ASAN
  char *p = lt__buffer_pool_alloc(MIB, false);
  assert_non_null(p);
  assert_false(__asan_address_is_poisoned(p + 100));
  lt__buffer_pool_free(p, MIB);
  assert_true(__asan_address_is_poisoned(p + 100)); /* kept, but poisoned */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 2); /* ASan's report */
    volatile char *v = p;
    v[100] = 1; /* a use after free: ASan ends the process */
    _exit(0);
  }
  assert_true(pid > 0);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char *q = lt__buffer_pool_alloc(MIB, false); /* handed out again: usable */
  assert_ptr_equal(q, p);
  assert_false(__asan_address_is_poisoned(q + 100));
  q[100] = 1;
  lt__buffer_pool_free(q, MIB);
#elif defined(TEST_VALGRIND)
  if (!RUNNING_ON_VALGRIND) skip(); /* needs ASan or valgrind (scripts/test.sh runs both) */
  char *p = lt__buffer_pool_alloc(MIB, false);
  assert_non_null(p);
  unsigned char vbits = 0;
  assert_int_equal(VALGRIND_GET_VBITS(p + 100, &vbits, 1), 1); /* addressable */
  lt__buffer_pool_free(p, MIB);
  assert_int_equal(VALGRIND_GET_VBITS(p + 100, &vbits, 1), 3); /* kept, but freed to memcheck */
#else
  skip(); /* needs ASan or valgrind (scripts/test.sh runs both) */
#endif
}

/* ---- the library's storage and the cpu backend's arena come from the pool ---- */

static void test_steps_reuse_blocks(void **state) {
  (void)state;
  enum { N = 512 };
  float *x = malloc((size_t)N * N * sizeof *x);
  assert_non_null(x);
  for (int i = 0; i < N * N; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  lt_tensor *a = lt_from_data(CPU0, LT_F32, SHAPE(N, N), 2, x);
  free(x);
  assert_non_null(a);
  double first = 0;
  lt_buffer_pool_stats s[3];
  for (int run = 0; run < 3; run++) {
    s[run] = stats();
    lt_scope_begin();
    /* exp(a) @ a is a 1 MiB temporary (the cpu backend's arena); the sum is small */
    lt_tensor *y = lt_sum(lt_matmul(lt_exp(a), a), NULL, 0, false);
    double v = 0;
    assert_int_equal(lt_item(y, 0, &v), LT_OK);
    if (run == 0) first = v;
    assert_true(v == first);
    lt_scope_end();
  }
  lt_buffer_pool_stats end = stats();
  /* later runs are served from kept blocks: no new mapping */
  assert_true(s[2].hits > s[1].hits);
  assert_int_equal(end.maps, s[2].maps);
  assert_int_equal(end.in_use_bytes, s[2].in_use_bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      POOL_TEST(test_reuse),
      POOL_TEST(test_classes_and_alignment),
      POOL_TEST(test_bound),
      POOL_TEST(test_zeroing),
      POOL_TEST(test_fresh_small_blocks_are_populated),
      POOL_TEST(test_failure_injection),
      POOL_TEST(test_two_threads),
      POOL_TEST(test_use_after_free_is_caught),
      POOL_TEST(test_steps_reuse_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
