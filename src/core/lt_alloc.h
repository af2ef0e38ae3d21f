/* Every allocation of the library goes through here, so one hook (lt_set_allocator)
 * sees them all and tests can inject failures. */
#ifndef LT_ALLOC_H
#define LT_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* Returns NULL and records LT_ENOMEM on failure. Zero sizes allocate one byte so
 * that empty tensors still get a distinct, freeable block. */
void *lt__malloc(size_t n);
void *lt__calloc(size_t n);
void *lt__realloc(void *p, size_t oldn, size_t newn);
void lt__free(void *p, size_t n);

/* Small objects made on every traced op (IR nodes, tensor handles): per-thread
 * free lists by size class (16-byte steps up to 512 bytes), so a training
 * loop that traces the same step again reuses the last step's objects instead
 * of calling the allocator. A miss (an empty list: the refill) is an ordinary
 * lt__malloc of the class size and fails as it does. Freed objects go to the
 * freeing thread's lists, up to 1 MiB a thread; the rest, and a thread's lists
 * when it exits, go back through lt__free. The lists serve only the default
 * allocator: with a hook set (lt_set_allocator), every object comes from and
 * returns to the hook, so it still sees every allocation. n must be the same
 * in the free as in the allocation. */
void *lt__slab_alloc(size_t n);
void lt__slab_free(void *p, size_t n);
/* Frees this thread's cached objects (lt_set_allocator calls it, so that they
 * go back to the allocator that made them). */
void lt__slab_flush(void);
/* Test hook: the free lists serve allocations under a hook too, so that a
 * test can count the hook's calls and fail a refill. */
void lt__slab_set_with_hook(bool on);
/* Objects this thread's free lists hold (a test reads reuse from it). */
size_t lt__slab_cached(void);

#endif
