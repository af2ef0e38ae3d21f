/* The single allocation path of the library (see lt_set_allocator). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_error.h"

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
  void *p = lt__malloc(n);
  if (p) memset(p, 0, n);
  return p;
}

void lt__free(void *p, size_t n) {
  if (p)
    atomic_load_explicit(&g_alloc, memory_order_acquire)(
        atomic_load_explicit(&g_alloc_ud, memory_order_relaxed), p, n ? n : 1, 0);
}
