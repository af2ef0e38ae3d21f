/* libFuzzer target: the IDX reader (lt_nn_idx_read) on arbitrary files, plain
 * and gzip-compressed. The first input byte picks the form; the rest is the
 * file's content (for gzip: compressed by this harness, so that the reader's
 * header and size checks see the fuzzed bytes).
 *
 * The reader allocates the size the header declares before it reads the data
 * (up to 2^40 bytes): a short file declaring a huge size makes one huge
 * allocation that fails (LT_ENOMEM) instead of a "truncated" error. libFuzzer
 * reports any allocation over -malloc_limit_mb as a crash, so inputs whose
 * header declares more than kMaxDeclared bytes are skipped here (see
 * scripts/reliability.sh and the reliability report). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "fuzz_entry.h"

static const int64_t kMaxDeclared = (int64_t)1 << 26;
static char g_path[64];
static volatile uint8_t g_sum;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(g_path, sizeof g_path, "/tmp/lt-fuzz-idx-%ld", (long)getpid());
  return 0;
}

/* The element count the header of b declares, or 0 when it is no IDX header. */
static int64_t declared(const uint8_t *b, size_t n) {
  if (n < 4 || b[3] == 0 || b[3] > LT_MAX_DIMS || n < 4 + 4 * (size_t)b[3]) return 0;
  int64_t size = 1;
  for (int d = 0; d < b[3]; d++) {
    const uint8_t *p = b + 4 + 4 * d;
    int64_t v = ((int64_t)p[0] << 24) | ((int64_t)p[1] << 16) | ((int64_t)p[2] << 8) | p[3];
    if (v != 0 && size > ((int64_t)1 << 40) / v) return (int64_t)1 << 41;
    size *= v;
  }
  return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  bool gz = data[0] & 1;
  data++;
  size--;
  if (declared(data, size) > kMaxDeclared) return 0;
  if (gz) {
    gzFile f = gzopen(g_path, "wb1");
    if (!f) abort();
    if (size && gzwrite(f, data, (unsigned)size) != (int)size) abort();
    if (gzclose(f) != Z_OK) abort();
  } else {
    FILE *f = fopen(g_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
  }
  lt_clear_error();
  lt_nn_idx x;
  int rc = lt_nn_idx_read(g_path, &x);
  if (rc == LT_OK) {
    int64_t n = 1;
    for (int d = 0; d < x.ndim; d++) n *= x.dims[d];
    if (x.ndim < 1 || x.ndim > LT_MAX_DIMS || n != x.size) abort();
    uint8_t sum = 0; /* touch every byte: ASan checks the buffer's extent */
    for (int64_t i = 0; i < x.size; i++) sum += x.data[i];
    g_sum = sum;
    lt_nn_idx_free(&x);
  } else if (rc > 0 || lt_last_error()[0] == '\0') {
    abort(); /* a failure must come with a message */
  }
  unlink(g_path);
  return 0;
}
