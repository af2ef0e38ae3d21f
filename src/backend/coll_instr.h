/* A collective instruction run through the current device's world: the one
 * kernel of the op table's COLLECTIVE rows, shared by the ref backend
 * (ref_collective.c) and the cpu backend (cpu_collective.c), so that both
 * call the same transport (core/lt_collective.h). */
#ifndef LT_COLL_INSTR_H
#define LT_COLL_INSTR_H

#include "backend.h"

/* Fills out (contiguous, the instruction's dtype and shape) from the
 * contiguous in[0] and the other ranks' operands. LT_OK, or LT_EEXEC with a
 * message (bad attributes, no world, a timeout, replicas that disagree). */
int lt__coll_run_instr(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

#endif
