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

/* An entry is the file DIR/<key.hi><key.lo>.ltx (32 lowercase hex digits),
 * little-endian:
 *   [0]  magic "LTXC"            [4]  u32 format version
 *   [8]  backend name, NUL-padded to 32 bytes
 *   [40] u64 backend env_hash    [48] u64 key.lo, [56] u64 key.hi
 *   [64] u64 payload length n    [72] payload (the backend's serialize bytes)
 *   [72 + n] u64 XXH3-64 of the 72 + n bytes before it.
 * Written to a temporary file (".<name>.tmp.XXXXXX") in DIR, fsync'd, renamed. */
enum {
  LT_DISK_FORMAT_VERSION = 1,
  LT_DISK_OFF_VERSION = 4,
  LT_DISK_OFF_BACKEND = 8,
  LT_DISK_BACKEND_NAME_LEN = 32,
  LT_DISK_OFF_ENV = 40,
  LT_DISK_OFF_KEY = 48,
  LT_DISK_OFF_LEN = 64,
  LT_DISK_HEADER_BYTES = 72,
  LT_DISK_CHECKSUM_BYTES = 8
};

/* Test hooks: the next n stores fail as on a full disk (ENOSPC, after part of
 * the temporary file is written; 0 disarms), and the size bound in bytes
 * (0: back to LT_PERSISTENT_CACHE_MAX_BYTES or its default). */
void lt__disk_cache_fail_next_write(int n);
void lt__disk_cache_set_max_bytes(uint64_t bytes);

#endif
