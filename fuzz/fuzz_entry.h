/* The entry points libFuzzer calls, which every fuzzer here defines:
 * declared so that -Wmissing-prototypes (on for the whole project) holds. */
#ifndef LT_FUZZ_ENTRY_H
#define LT_FUZZ_ENTRY_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
