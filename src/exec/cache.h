/* The in-memory cache of compiled executables: a hash table keyed by the
 * 128-bit graph key with least-recently-used eviction. */
#ifndef LT_CACHE_H
#define LT_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"

typedef struct lt_graph_key {
  uint64_t lo, hi;
} lt_graph_key;

typedef struct lt_cache_entry {
  atomic_int refs; /* the cache's and each user's during execution */
  lt_graph_key key;
  const lt_backend *backend;
  lt_executable *exe;
  /* The graph's cost analysis (cost.h), set at its first lookup with the
   * graph at hand (calloc'd zeros until then); every graph of one key has
   * the same cost, so racing setters agree. */
  atomic_bool costed;
  _Atomic int64_t flops, bytes;
  struct lt_cache_entry *bucket_next;
  struct lt_cache_entry *lru_prev, *lru_next;
} lt_cache_entry;

/* A new reference on the entry for key, or NULL. Marks it most recently used. */
lt_cache_entry *lt__cache_get(lt_graph_key key);
/* Inserts exe under key (evicting the least recently used entry beyond the
 * capacity) and returns a new reference on its entry, or NULL on allocation
 * failure (exe is then freed). When another thread inserted the same key
 * first, that entry is returned and exe freed. */
lt_cache_entry *lt__cache_put(lt_graph_key key, const lt_backend *be, lt_executable *exe);
void lt__cache_entry_release(lt_cache_entry *e);
/* Number of entries held. */
int64_t lt__cache_size(void);
/* Drops every entry (tests and shutdown). */
void lt__cache_clear(void);

#endif
