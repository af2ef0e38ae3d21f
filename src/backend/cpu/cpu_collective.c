/* The cpu backend's collectives: native kernels (lt__cpu_native_find) on
 * contiguous operands, run on the executing thread (never on the pool: a
 * replica waiting for the others must not hold the pool they need) through
 * the same runner as ref (backend/coll_instr.c). */
#include "cpu_native.h"
#include "../coll_instr.h"

int lt__cpu_collective(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  return lt__coll_run_instr(ins, out, in);
}
