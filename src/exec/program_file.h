/* Saved program files (lt_program_save / lt_program_load; docs/DEPLOY.md).
 * Little-endian:
 *   [0]  magic "LTPG"              [4]  u32 format version
 *   [8]  u32 library version (major << 16 | minor << 8 | patch)
 *   [12] u32 flags (0)             [16] u64 op table hash
 *   [24] u64 backend environment key (lt__backend_env_key)
 *   [32] backend name, NUL-padded to 32 bytes
 *   [64] u64 graph key lo, [72] hi [80] u64 file length
 *   [88] u32 section count (4)     [92] u32 reserved (0)
 *   [96] sections, each: u32 tag, u32 0, u64 length, bytes;
 *        in order SIGN, GRPH, CNST, CODE
 *   [end - 8] u64 XXH3-64 of every byte before it. */
#ifndef LT_PROGRAM_FILE_H
#define LT_PROGRAM_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "lazytensor.h"

#define LT_PGM_TAG(a, b, c, d) \
  ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

enum {
  LT_PGM_FORMAT_VERSION = 1,
  LT_PGM_OFF_VERSION = 4,
  LT_PGM_OFF_LIBVERSION = 8,
  LT_PGM_OFF_FLAGS = 12,
  LT_PGM_OFF_OPHASH = 16,
  LT_PGM_OFF_ENV = 24,
  LT_PGM_OFF_BACKEND = 32,
  LT_PGM_BACKEND_NAME_LEN = 32,
  LT_PGM_OFF_KEY = 64,
  LT_PGM_OFF_LENGTH = 80,
  LT_PGM_OFF_NSECTIONS = 88,
  LT_PGM_HEADER_BYTES = 96,
  LT_PGM_CHECKSUM_BYTES = 8,
  LT_PGM_NSECTIONS = 4
};

#define LT_PGM_SEC_SIGN LT_PGM_TAG('S', 'I', 'G', 'N')
#define LT_PGM_SEC_GRAPH LT_PGM_TAG('G', 'R', 'P', 'H')
#define LT_PGM_SEC_CONST LT_PGM_TAG('C', 'N', 'S', 'T')
#define LT_PGM_SEC_CODE LT_PGM_TAG('C', 'O', 'D', 'E')

/* A program from a file's bytes (what names them in errors). The fuzz target
 * and lt_program_load call it. */
lt_program *lt__program_load_bytes(const uint8_t *bytes, size_t size, const char *what);

/* Test hook: folds salt into the environment key written and expected, as a
 * process on another CPU or compiler would have (0: the real key). */
void lt__program_file_set_env_salt(uint64_t salt);
uint32_t lt__program_file_lib_version(void);

#endif
