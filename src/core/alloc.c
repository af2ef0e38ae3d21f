/* The single allocation path of the library (see lt_set_allocator), and the
 * per-thread free lists of small objects (lt__slab_alloc). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Objects on a free list are dead to the program: under ASan and valgrind a
 * read or write of one is reported as a use after free would be. All but the
 * list link: their leak checks skip memory marked so, and must follow it. */
#if defined(__SANITIZE_ADDRESS__)
#define LT_SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LT_SLAB_ASAN 1
#endif
#endif
#ifdef LT_SLAB_ASAN
#include <sanitizer/asan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define LT_SLAB_VALGRIND 1
#endif
#endif

#include "lt_alloc.h"
#include "lt_error.h"
#include "lt_tensor.h"

static void *default_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

/* Atomic: worker threads allocate and free while a test swaps the hook. */
static _Atomic(lt_alloc_fn) g_alloc = default_alloc;
static _Atomic(void *) g_alloc_ud;

void lt_set_allocator(lt_alloc_fn fn, void *ud) {
  /* this thread's cached objects go back to the allocator that made them:
   * released tensor headers first, which go through the lists */
  lt__tensor_quarantine_flush();
  lt__slab_flush();
  atomic_store(&g_alloc_ud, fn ? ud : NULL);
  atomic_store(&g_alloc, fn ? fn : default_alloc);
}

void *lt__realloc(void *p, size_t oldn, size_t newn) {
  if (newn == 0) newn = 1; /* zero would mean free to the hook */
  void *q = atomic_load_explicit(&g_alloc, memory_order_acquire)(
      atomic_load_explicit(&g_alloc_ud, memory_order_relaxed), p, oldn, newn);
  if (!q) lt__err(LT_ENOMEM, "out of memory allocating %zu bytes", newn);
  return q;
}

void *lt__malloc(size_t n) { return lt__realloc(NULL, 0, n); }

void *lt__calloc(size_t n) {
  /* The default allocator: the C library's calloc, which writes no zeros
   * over memory it knows to be zero (pages fresh from the kernel, as its
   * large blocks are), so a large zero tensor (an optimizer's state: 5 MB
   * for bench/cache_warm_start's MLP) costs no page until it is used. A hook
   * has no calloc: a plain allocation, zeroed here. */
  if (atomic_load_explicit(&g_alloc, memory_order_acquire) == default_alloc) {
    if (n == 0) n = 1; /* as lt__realloc */
    void *p = calloc(1, n);
    if (!p) lt__err(LT_ENOMEM, "out of memory allocating %zu bytes", n);
    return p;
  }
  void *p = lt__malloc(n);
  if (p) memset(p, 0, n);
  return p;
}

void lt__free(void *p, size_t n) {
  if (p)
    atomic_load_explicit(&g_alloc, memory_order_acquire)(
        atomic_load_explicit(&g_alloc_ud, memory_order_relaxed), p, n ? n : 1, 0);
}

/* ---- per-thread free lists of small objects ---- */

enum {
  kSlabGrain = 16,
  kSlabMax = 512,
  kSlabClasses = kSlabMax / kSlabGrain,
  kSlabCapBytes = 1 << 20, /* held by one thread: a traced step of ~6000 nodes */
};

enum { SLAB_NEW, SLAB_LIVE, SLAB_DEAD };

typedef struct slab_cache {
  void *head[kSlabClasses]; /* each object links to the next in its last word */
  size_t bytes, count;
  int state; /* SLAB_DEAD: the thread is exiting, nothing more is cached */
} slab_cache;

static _Thread_local slab_cache tl_slab;
static _Atomic bool g_slab_with_hook;
static pthread_key_t g_slab_key;
static pthread_once_t g_slab_once = PTHREAD_ONCE_INIT;
static bool g_slab_key_ok;

/* The link sits in the last word: for most objects a word no field uses, so
 * a stale access to any field is still reported. */
static inline void **slab_link(void *o, size_t cb) {
  return (void **)((char *)o + cb - sizeof(void *));
}

static inline void slab_poison(void *o, size_t cb) {
#ifdef LT_SLAB_ASAN
  ASAN_POISON_MEMORY_REGION(o, cb - sizeof(void *));
#endif
#ifdef LT_SLAB_VALGRIND
  VALGRIND_MAKE_MEM_NOACCESS(o, cb - sizeof(void *));
#endif
  (void)o;
  (void)cb;
}

/* Makes o usable again; returns its link. */
static inline void *slab_take(void *o, size_t cb) {
#ifdef LT_SLAB_ASAN
  ASAN_UNPOISON_MEMORY_REGION(o, cb - sizeof(void *));
#endif
  void *next = *slab_link(o, cb);
#ifdef LT_SLAB_VALGRIND
  VALGRIND_MAKE_MEM_UNDEFINED(o, cb); /* as fresh from malloc */
#endif
  return next;
}

/* The lists hold only the default allocator's objects (see lt_alloc.h). */
static inline bool slab_on(void) {
  return atomic_load_explicit(&g_alloc, memory_order_relaxed) == default_alloc ||
         atomic_load_explicit(&g_slab_with_hook, memory_order_relaxed);
}

static void slab_drain(slab_cache *s) {
  for (int c = 0; c < kSlabClasses; c++) {
    size_t cb = (size_t)(c + 1) * kSlabGrain;
    while (s->head[c]) {
      void *o = s->head[c];
      s->head[c] = slab_take(o, cb);
      lt__free(o, cb);
    }
  }
  s->bytes = s->count = 0;
}

static void slab_thread_exit(void *p) {
  slab_cache *s = p;
  slab_drain(s);
  s->state = SLAB_DEAD; /* frees by later destructors go straight to lt__free */
}

static void slab_key_init(void) {
  g_slab_key_ok = pthread_key_create(&g_slab_key, slab_thread_exit) == 0;
}

/* Registers the thread's lists for draining at its exit (on its first free);
 * false when they cannot be (then nothing is cached). */
static bool slab_register(slab_cache *s) {
  if (s->state == SLAB_DEAD) return false;
  pthread_once(&g_slab_once, slab_key_init);
  if (!g_slab_key_ok || pthread_setspecific(g_slab_key, s) != 0) {
    s->state = SLAB_DEAD;
    return false;
  }
  s->state = SLAB_LIVE;
  return true;
}

void *lt__slab_alloc(size_t n) {
  if (n > kSlabMax) return lt__malloc(n);
  size_t c = n ? (n - 1) / kSlabGrain : 0, cb = (c + 1) * kSlabGrain;
  slab_cache *s = &tl_slab;
  void *o = s->head[c];
  if (o && slab_on()) {
    s->head[c] = slab_take(o, cb);
    s->bytes -= cb;
    s->count--;
    return o;
  }
  return lt__malloc(cb); /* the refill: fails as any allocation does */
}

void lt__slab_free(void *p, size_t n) {
  if (!p) return;
  if (n > kSlabMax) {
    lt__free(p, n);
    return;
  }
  size_t c = n ? (n - 1) / kSlabGrain : 0, cb = (c + 1) * kSlabGrain;
  slab_cache *s = &tl_slab;
  if (s->bytes + cb > kSlabCapBytes || !slab_on() || (s->state != SLAB_LIVE && !slab_register(s))) {
    lt__free(p, cb);
    return;
  }
  *slab_link(p, cb) = s->head[c];
  slab_poison(p, cb);
  s->head[c] = p;
  s->bytes += cb;
  s->count++;
}

void lt__slab_flush(void) { slab_drain(&tl_slab); }

void lt__slab_set_with_hook(bool on) { atomic_store(&g_slab_with_hook, on); }

size_t lt__slab_cached(void) { return tl_slab.count; }
