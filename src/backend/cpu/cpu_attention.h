/* The cpu backend's attention kernel (cpu_attention.c), in the cpu_native_fn
 * shape (cpu_native.h): LT_OP_ATTENTION on contiguous f32 operands, a
 * blocked online softmax that never stores the L x S scores in full. Matches
 * ref within f32 rounding (sums in f32, block products by oneDNN's sgemm).
 * CPU_NATIVE_DECLINED for an instruction that does not fit (the fallback
 * then reports it) or when scratch memory is short. */
#ifndef LT_CPU_ATTENTION_H
#define LT_CPU_ATTENTION_H

#include "cpu_native.h"

int lt__cpu_attention(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

#endif
