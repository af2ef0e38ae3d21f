/* libFuzzer target: the saved-program loader (lt__program_load_bytes, what
 * lt_program_load runs on a file's bytes). The first input byte picks how
 * the rest is used:
 *   0: as the file, unchanged (magic, version, length and checksum gates);
 *   1: as the file with its length field and checksum made right, so that
 *      the section parsers and the graph rebuild see the mutated bytes.
 * A program that loads (every node checked against the IR's contract) is
 * run on zeros when its values are small, so that a node the check let
 * through with shapes its kernel cannot take shows as a crash here. The ref
 * backend compiles and runs (cheap, and the same loader path as cpu's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "backend/backend.h"
#include "backend/ref/ref_api.h"
#include "exec/program_file.h"
#include "exec/program_internal.h"
#include "fuzz_entry.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  lt__backend_force(&lt__ref_backend);
  return 0;
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Whether every node under p's roots holds at most kMaxRunNumel elements
 * (and there are not too many): running it then takes microseconds. */
enum { kMaxRunNumel = 1 << 14, kMaxRunNodes = 512 };
static int small_enough(const lt_program *p) {
  lt_node *stack[kMaxRunNodes];
  int sp = 0, seen = 0;
  for (int r = 0; r < p->nout; r++) {
    if (sp == kMaxRunNodes) return 0;
    stack[sp++] = p->roots[r];
  }
  while (sp) {
    lt_node *n = stack[--sp];
    if (++seen > 4 * kMaxRunNodes || lt__numel(n->shape, n->ndim) > kMaxRunNumel) return 0;
    for (int k = 0; k < n->noperands; k++) {
      if (sp == kMaxRunNodes) return 0;
      stack[sp++] = n->operands[k].node;
    }
  }
  return 1;
}

/* Runs p on zeros; a failure must say why, a success gives every output. */
static void run_on_zeros(lt_program *p) {
  lt_tensor *in[16] = {0}, *out[16] = {0};
  if (p->nin > 16 || p->nout > 16 || !small_enough(p)) return;
  int ok = 1;
  for (int i = 0; i < p->nin && ok; i++)
    ok = (in[i] = lt_zeros(lt_cpu(0), (lt_dtype)p->in_sig[i].dtype, p->in_sig[i].shape,
                           p->in_sig[i].ndim)) != NULL;
  if (ok) {
    lt_clear_error();
    if (lt_program_run(p, in, p->nin, out) != LT_OK) {
      if (lt_last_error()[0] == '\0') abort();
    } else {
      for (int o = 0; o < p->nout; o++) {
        if (!out[o]) abort();
        lt_release(out[o]);
      }
    }
  }
  for (int i = 0; i < p->nin; i++) lt_release(in[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 2;
  data++;
  size--;
  uint8_t *b = malloc(size + 1);
  if (!b) abort();
  if (size) memcpy(b, data, size);
  if (mode == 1 && size >= LT_PGM_HEADER_BYTES + LT_PGM_CHECKSUM_BYTES) {
    put64(b + LT_PGM_OFF_LENGTH, size);
    put64(b + size - LT_PGM_CHECKSUM_BYTES, XXH3_64bits(b, size - LT_PGM_CHECKSUM_BYTES));
  }
  lt_clear_error();
  lt_program *p = lt__program_load_bytes(b, size, "fuzz input");
  /* a failure always says why */
  if (!p && (lt_last_status() == LT_OK || lt_last_error()[0] == '\0')) abort();
  if (p) run_on_zeros(p);
  lt_program_free(p);
  free(b);
  return 0;
}
