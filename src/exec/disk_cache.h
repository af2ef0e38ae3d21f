/* The persistent compilation cache: compiled executables on disk, keyed by
 * the graph key (which already folds the compile environment), so that a new
 * process skips compiles an earlier one did. */
#ifndef LT_DISK_CACHE_H
#define LT_DISK_CACHE_H

#include "../backend/backend.h"
#include "cache.h"

/* True when a directory is configured (LT_PERSISTENT_CACHE_PATH or
 * lt_set_persistent_cache) and be can serialize executables. */
bool lt__disk_cache_enabled(const lt_backend *be);
/* LT_OK with *exe deserialized by be; LT_ENOTFOUND on a miss or a bad entry
 * (counted, removed unless read-only; never an error to the caller). */
int lt__disk_cache_load(const lt_backend *be, lt_graph_key key, lt_executable **exe);
/* Best effort: a failure to write is counted and reported once on stderr. */
void lt__disk_cache_store(const lt_backend *be, lt_graph_key key, const lt_executable *exe);

#endif
