/* The ref kernel of the collectives: the shared instruction runner
 * (backend/coll_instr.c), which calls the current device's world. */
#include "ref.h"
#include "../coll_instr.h"

int lt__ref_collective(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  return lt__coll_run_instr(ins, out, in);
}
