/* The buffer pool (see lt_buffer_pool.h): size-classed, huge-page-backed
 * blocks, kept after free up to a bound. One lock guards the registry of
 * blocks and the cache; system calls happen outside it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lt_alloc.h"
#include "lt_buffer_pool.h"
#include "lt_error.h"

#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifndef POOL_ASAN
#define POOL_ASAN 0
#endif
#if POOL_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define POOL_VALGRIND 1
#endif
#endif
#ifndef POOL_VALGRIND
#define POOL_VALGRIND 0
#endif

#define HUGE_BYTES ((size_t)2 << 20)
#ifndef MADV_POPULATE_WRITE /* Linux 5.14; older kernels refuse it (EINVAL) */
#define MADV_POPULATE_WRITE 23
#endif
enum { NBUCKETS = 1024 };

typedef struct pool_block {
  char *base;  /* HUGE_BYTES aligned */
  size_t size; /* its size class: the length of its mapping */
  bool cached;
  struct pool_block *hnext;       /* registry chain (every block the pool holds) */
  struct pool_block *prev, *next; /* the cache, oldest first (cached blocks only) */
} pool_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_block *g_buckets[NBUCKETS];
static pool_block *g_oldest, *g_newest;
static lt_buffer_pool_stats g_st;
static int64_t g_env_limit = -1; /* LT_BUFFER_POOL_MB in bytes; -1: unset */
static int64_t g_limit = -1;     /* the cap in force; -1: only the peak rule */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  const char *s = getenv("LT_BUFFER_POOL_MB");
  char *end = NULL;
  long long mb = s && *s ? strtoll(s, &end, 10) : -1;
  if (mb >= 0 && end && *end == '\0' && mb < (INT64_MAX >> 20)) g_env_limit = (int64_t)mb << 20;
  g_limit = g_env_limit;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t lt__buffer_pool_class(size_t n) {
  if (n < LT_BUFFER_POOL_MIN_BYTES || n > (SIZE_MAX >> 2)) return 0;
  size_t whole = round_up(n, HUGE_BYTES);
  /* Every 2 MiB of such a block can be one huge page; an eighth of slack at
   * most, since a huge page is resident whole (peak RSS). */
  if (n >= whole - whole / 8) return whole;
  size_t pow = LT_BUFFER_POOL_MIN_BYTES;
  while (pow * 2 < n) pow *= 2;
  return round_up(n, pow / 4); /* at most a fifth wasted */
}

static pool_block **bucket(const void *p) {
  uint64_t h = ((uint64_t)(uintptr_t)p >> 21) * 0x9E3779B97F4A7C15ull;
  return &g_buckets[h >> 54]; /* top 10 bits: NBUCKETS */
}

static pool_block *lookup(const void *p) {
  pool_block *b = *bucket(p);
  while (b && b->base != p) b = b->hnext;
  return b;
}

static void unregister(pool_block *b) {
  pool_block **at = bucket(b->base);
  while (*at != b) at = &(*at)->hnext;
  *at = b->hnext;
}

static void cache_unlink(pool_block *b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    g_oldest = b->next;
  if (b->next)
    b->next->prev = b->prev;
  else
    g_newest = b->prev;
  b->prev = b->next = NULL;
  b->cached = false;
  g_st.cached_bytes -= b->size;
}

/* Blocks kept beyond the bound leave the registry, oldest first, into *out
 * (chained by next), to be unmapped outside the lock. */
static void evict(pool_block **out) {
  size_t room = g_st.peak_bytes - g_st.in_use_bytes;
  if (g_limit >= 0 && (uint64_t)g_limit < room) room = (size_t)g_limit;
  while (g_st.cached_bytes > room) {
    pool_block *b = g_oldest;
    cache_unlink(b);
    unregister(b);
    b->next = *out;
    *out = b;
    g_st.unmaps++;
  }
}

/* ---- blocks and the memory checkers ---- */

static char *map_block(size_t size) {
  if (POOL_ASAN) { /* the sanitizer's heap: LeakSanitizer tracks the block */
    void *p = NULL;
    return posix_memalign(&p, HUGE_BYTES, size) == 0 ? p : NULL;
  }
  size_t span = size + HUGE_BYTES;
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *p = (char *)round_up((uintptr_t)raw, HUGE_BYTES);
  if (p > raw) munmap(raw, (size_t)(p - raw));
  if (raw + span > p + size) munmap(p + size, (size_t)(raw + span - (p + size)));
  /* Without THP (or with it off) this fails, and the block just uses small pages. */
  if (size >= HUGE_BYTES) (void)madvise(p, size, MADV_HUGEPAGE);
  return p;
}

static void unmap_block(pool_block *b) {
  if (POOL_ASAN) {
#if POOL_ASAN
    ASAN_UNPOISON_MEMORY_REGION(b->base, b->size);
#endif
    free(b->base);
  } else {
    munmap(b->base, b->size);
  }
}

static void release(pool_block *list) {
  while (list) {
    pool_block *next = list->next;
    unmap_block(list);
    lt__free(list, sizeof *list);
    list = next;
  }
}

/* The first n bytes of b become usable; fresh: just mapped (zero unless from
 * the sanitizer's heap). */
static void reveal(pool_block *b, size_t n, bool zero, bool fresh) {
#if POOL_ASAN
  ASAN_UNPOISON_MEMORY_REGION(b->base, n);
  ASAN_POISON_MEMORY_REGION(b->base + n, b->size - n); /* overruns into the class slack */
#endif
#if POOL_VALGRIND
  /* A fresh mapping is zero, but only a caller that asked for zeros may rely on it. */
  VALGRIND_MALLOCLIKE_BLOCK(b->base, n, 0, fresh && zero);
#endif
  if (zero && (!fresh || POOL_ASAN)) memset(b->base, 0, n);
}

/* b goes into the cache: no one may touch it until it is handed out again. */
static void hide(pool_block *b) {
#if POOL_VALGRIND
  VALGRIND_FREELIKE_BLOCK(b->base, 0);
#endif
#if POOL_ASAN
  ASAN_POISON_MEMORY_REGION(b->base, b->size);
#endif
  (void)b;
}

/* ---- the interface ---- */

static void *refill(size_t n, size_t size, bool zero) {
  pool_block *b = lt__malloc(sizeof *b); /* the allocator hook sees every refill */
  char *p = b ? map_block(size) : NULL;
  if (!p) {
    lt__free(b, sizeof *b);
    pthread_mutex_lock(&g_lock);
    g_st.failures++;
    pthread_mutex_unlock(&g_lock);
    lt__err(LT_ENOMEM, "out of memory allocating %zu bytes of storage (a block of %zu)", n, size);
    return NULL;
  }
  memset(b, 0, sizeof *b);
  b->base = p;
  b->size = size;
  pool_block *victims = NULL;
  pthread_mutex_lock(&g_lock);
  pool_block **at = bucket(p);
  b->hnext = *at;
  *at = b;
  g_st.maps++;
  g_st.in_use_bytes += size;
  if (g_st.in_use_bytes > g_st.peak_bytes) g_st.peak_bytes = g_st.in_use_bytes;
  evict(&victims); /* blocks of other classes must not take the pool above its peak */
  pthread_mutex_unlock(&g_lock);
  release(victims);
  reveal(b, n, zero, true);
  /* A block below a huge page has a fault per 4 KiB page at first touch,
   * costly on virtual machines (1.6 MB: 3.8 ms touched, 1.8 ms populated on
   * the 2-core machine of bench/cache_warm_start). Storage asked for without
   * zeros is about to be written whole (a kernel's output, an arena): its
   * pages made present in one system call. Zero blocks stay untouched, as
   * their pages may never be written (lt__calloc). */
  if (!POOL_ASAN && !zero && size < HUGE_BYTES)
    (void)madvise(p, round_up(n, 4096), MADV_POPULATE_WRITE);
  return p;
}

void *lt__buffer_pool_alloc(size_t n, bool zero) {
  size_t size = lt__buffer_pool_class(n);
  if (!size) {
    if (n >= LT_BUFFER_POOL_MIN_BYTES) {
      lt__err(LT_ENOMEM, "out of memory allocating %zu bytes of storage", n);
      return NULL;
    }
    return zero ? lt__calloc(n) : lt__malloc(n);
  }
  pthread_once(&g_env_once, read_env);
  pthread_mutex_lock(&g_lock);
  pool_block *b = g_newest; /* the most recently freed is the likeliest still in cache */
  while (b && b->size != size) b = b->prev;
  if (b) {
    cache_unlink(b);
    g_st.hits++;
    g_st.in_use_bytes += size;
    if (g_st.in_use_bytes > g_st.peak_bytes) g_st.peak_bytes = g_st.in_use_bytes;
  }
  pthread_mutex_unlock(&g_lock);
  if (!b) return refill(n, size, zero);
  reveal(b, n, zero, false);
  return b->base;
}

void lt__buffer_pool_free(void *p, size_t n) {
  if (!p) return;
  if (n < LT_BUFFER_POOL_MIN_BYTES) {
    lt__free(p, n);
    return;
  }
  pool_block *victims = NULL;
  pthread_mutex_lock(&g_lock);
  pool_block *b = lookup(p);
  if (b && !b->cached) { /* (a second free of a kept block would corrupt the cache) */
    hide(b);             /* before another thread can take it from the cache */
    b->cached = true;
    b->prev = g_newest;
    if (g_newest)
      g_newest->next = b;
    else
      g_oldest = b;
    g_newest = b;
    g_st.cached_bytes += b->size;
    g_st.in_use_bytes -= b->size;
    evict(&victims);
  }
  pthread_mutex_unlock(&g_lock);
  if (!b) lt__free(p, n); /* not the pool's: an adopted lt__malloc block */
  release(victims);
}

void lt__buffer_pool_stats(lt_buffer_pool_stats *out) {
  pthread_mutex_lock(&g_lock);
  *out = g_st;
  pthread_mutex_unlock(&g_lock);
}

void lt__buffer_pool_set_limit(int64_t bytes) {
  pthread_once(&g_env_once, read_env);
  pool_block *victims = NULL;
  pthread_mutex_lock(&g_lock);
  g_limit = bytes >= 0 ? bytes : g_env_limit;
  evict(&victims);
  pthread_mutex_unlock(&g_lock);
  release(victims);
}

void lt__buffer_pool_trim(void) {
  pool_block *victims = NULL;
  pthread_mutex_lock(&g_lock);
  int64_t keep = g_limit;
  g_limit = 0;
  evict(&victims);
  g_limit = keep;
  g_st.peak_bytes = g_st.in_use_bytes; /* the peak rule starts over */
  pthread_mutex_unlock(&g_lock);
  release(victims);
}

/* Leak checkers and the OS see an empty cache at exit. */
__attribute__((destructor)) static void trim_at_exit(void) { lt__buffer_pool_trim(); }
