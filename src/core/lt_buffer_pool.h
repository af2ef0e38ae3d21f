/* The buffer pool: large tensor storage (host_storage.c) and the cpu backend's
 * per-execution arenas come from here.
 *
 * A fresh page costs a fault (and the kernel zeroing it) on first touch, and
 * a warm process's first step spends a fifth of its time there. So requests of
 * LT_BUFFER_POOL_MIN_BYTES or more get blocks of their own mapping, 2 MiB
 * aligned, with MADV_HUGEPAGE from 2 MiB up (one fault per 2 MiB where
 * transparent huge pages are enabled or in madvise mode; ignored where not),
 * and a freed block is kept for the next request of its size class instead of
 * going back to the OS. A new block smaller than a huge page, asked for
 * without zeros, has its pages made present in one system call
 * (MADV_POPULATE_WRITE) rather than a fault per page. Smaller requests go to
 * lt__malloc unchanged.
 *
 * Size classes: a whole number of 2 MiB pages when that wastes at most an
 * eighth of the block (a huge page is resident whole), else four classes per
 * power of two (at most a fifth wasted, in pages never touched).
 *
 * Bound: the blocks kept never make the pool larger than its peak in use
 * (bytes handed out at once, so far), and LT_BUFFER_POOL_MB caps them further
 * (0: keep none); the least recently freed go back to the OS first.
 *
 * Failures: a refill (a request no kept block serves) allocates the block's
 * record through lt__malloc first, so lt_set_allocator's hook sees every
 * request for new memory and tests can fail it; then LT_ENOMEM is recorded.
 *
 * Checkers: under ASan a kept block is poisoned (a use after free is
 * reported) and blocks come from the sanitizer's heap (LeakSanitizer sees
 * them); under valgrind each hand-out and return is a malloc-like event. */
#ifndef LT_BUFFER_POOL_H
#define LT_BUFFER_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 256 KiB: the cpu backend's activations of a 128 x 512 f32 batch are this
 * size; smaller blocks are cheap for malloc to recycle. */
#define LT_BUFFER_POOL_MIN_BYTES ((size_t)256 * 1024)

/* n bytes, zeroed when zero; pooled blocks are 2 MiB aligned. NULL and
 * LT_ENOMEM on failure. */
void *lt__buffer_pool_alloc(size_t n, bool zero);
/* Frees p (n as given to the allocation). p may also be an lt__malloc block
 * (a host copy adopted as storage): what the pool did not hand out goes to
 * lt__free. */
void lt__buffer_pool_free(void *p, size_t n);

/* ---- for tests ---- */
typedef struct lt_buffer_pool_stats {
  size_t in_use_bytes; /* blocks handed out (class sizes) */
  size_t cached_bytes; /* blocks kept for reuse */
  size_t peak_bytes;   /* highest in_use_bytes so far */
  int64_t maps;        /* blocks taken from the OS */
  int64_t unmaps;      /* blocks given back */
  int64_t hits;        /* requests served by a kept block */
  int64_t failures;    /* refills that failed (LT_ENOMEM) */
} lt_buffer_pool_stats;
void lt__buffer_pool_stats(lt_buffer_pool_stats *out);
/* Caps the kept bytes (overrides LT_BUFFER_POOL_MB); bytes < 0 restores the
 * environment's setting. Blocks over the new cap go back at once. */
void lt__buffer_pool_set_limit(int64_t bytes);
/* Gives every kept block back to the OS (also done at exit), and restarts the
 * peak from what is in use now. */
void lt__buffer_pool_trim(void);
/* The size class (block bytes) of a pooled request of n bytes; 0 when n is
 * not pooled (too small, or too large to map). */
size_t lt__buffer_pool_class(size_t n);

#endif
