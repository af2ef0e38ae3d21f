/* libFuzzer target: the saved-program loader (lt__program_load_bytes, what
 * lt_program_load runs on a file's bytes). The first input byte picks how
 * the rest is used:
 *   0: as the file, unchanged (magic, version, length and checksum gates);
 *   1: as the file with its length field and checksum made right, so that
 *      the section parsers and the graph rebuild see the mutated bytes.
 * Programs that load are freed, never run. The ref backend compiles (cheap,
 * and the same loader path as cpu's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "backend/backend.h"
#include "backend/ref/ref_api.h"
#include "exec/program_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  lt__backend_force(&lt__ref_backend);
  return 0;
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
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
  lt_program_free(p);
  free(b);
  return 0;
}
