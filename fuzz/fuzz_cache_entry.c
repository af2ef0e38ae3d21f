/* libFuzzer target: the persistent cache's entry loader and the ref backend's
 * deserializer. The first input byte picks the path:
 *   0: the rest goes straight to lt__ref_backend.deserialize;
 *   1: the rest is written as the cache entry file of a fixed key and read
 *      with lt__disk_cache_load (header, length, checksum, backend, key);
 *   2: the rest is wrapped as the payload of an entry with a valid header and
 *      checksum, so that the loader hands it to deserialize.
 * Decoded executables are freed, never executed: deserialize checks the
 * structure (indices, counts, arity, aliasing) but does not redo shape
 * inference, which the entry's checksum and key vouch for. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "backend/backend.h"
#include "backend/ref/ref_api.h"
#include "exec/disk_cache.h"
#include "fuzz_entry.h"

static char g_dir[64], g_entry[160];
static const lt_graph_key kKey = {0x0123456789abcdefull, 0xfedcba9876543210ull};
static int g_devnull = -1;
static bool g_verbose;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(g_dir, sizeof g_dir, "/tmp/lt-fuzz-cache-%ld", (long)getpid());
  if (lt_set_persistent_cache(g_dir, false) != LT_OK) abort();
  snprintf(g_entry, sizeof g_entry, "%s/%016llx%016llx.ltx", g_dir, (unsigned long long)kKey.hi,
           (unsigned long long)kKey.lo);
  g_devnull = open("/dev/null", O_WRONLY);
  g_verbose = getenv("LT_FUZZ_VERBOSE") != NULL;
  return 0;
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void write_entry(const uint8_t *b, size_t n) {
  FILE *f = fopen(g_entry, "wb");
  if (!f) abort();
  if (n && fwrite(b, 1, n, f) != n) abort();
  if (fclose(f) != 0) abort();
}

/* The loader reports every bad entry on stderr: silenced unless LT_FUZZ_VERBOSE. */
static int load(lt_executable **exe) {
  int saved = -1;
  if (!g_verbose) {
    fflush(stderr);
    saved = dup(2);
    dup2(g_devnull, 2);
  }
  int rc = lt__disk_cache_load(&lt__ref_backend, kKey, exe);
  if (!g_verbose) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
  }
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 3;
  data++;
  size--;
  lt_clear_error();
  lt_executable *exe = NULL;
  int rc;
  if (mode == 0) {
    rc = lt__ref_backend.deserialize(data, size, &exe);
    if (rc != LT_OK && lt_last_error()[0] == '\0') abort();
  } else {
    if (mode == 1) {
      write_entry(data, size);
    } else {
      size_t n = LT_DISK_HEADER_BYTES + size + LT_DISK_CHECKSUM_BYTES;
      uint8_t *b = calloc(1, n);
      if (!b) abort();
      memcpy(b, "LTXC", 4);
      b[LT_DISK_OFF_VERSION] = LT_DISK_FORMAT_VERSION;
      memcpy(b + LT_DISK_OFF_BACKEND, lt__ref_backend.name, strlen(lt__ref_backend.name));
      put64(b + LT_DISK_OFF_ENV, lt__ref_backend.env_hash());
      put64(b + LT_DISK_OFF_KEY, kKey.lo);
      put64(b + LT_DISK_OFF_KEY + 8, kKey.hi);
      put64(b + LT_DISK_OFF_LEN, size);
      if (size) memcpy(b + LT_DISK_HEADER_BYTES, data, size);
      put64(b + LT_DISK_HEADER_BYTES + size, XXH3_64bits(b, LT_DISK_HEADER_BYTES + size));
      write_entry(b, n);
      free(b);
    }
    rc = load(&exe);
    /* a bad entry is a miss, never an error of the caller */
    if (rc != LT_OK && rc != LT_ENOTFOUND) abort();
    if (lt_last_status() != LT_OK) abort();
    unlink(g_entry);
  }
  if (rc == LT_OK) {
    if (!exe) abort();
    lt__ref_backend.executable_free(exe);
  }
  return 0;
}
