/* Hand-written C kernels for the ops the cpu backend does not generate code
 * for (the op table's NATIVE rows): arg reductions, cumsum, argsort, concat,
 * pad, the index ops, normal draws, randperm and the indexing transposes.
 *
 * They run as CK_REF kernels (lowering makes their operands contiguous) in
 * place of the executor's fallback, with the ref kernels' exact results:
 * elements are copied by their bytes, sums run in ref's order and precision
 * (double for floats, wrapping integers), argsort orders equal keys by
 * index, and the draws use the counter-based mapping of core/lt_philox.h. Work
 * above a size is split over the pool's threads (lt__cpu_pool_run). The
 * convolutions are the exception: they run through oneDNN (cpu_conv.h), whose
 * sums are ordered as its kernels choose, so they match ref within rounding,
 * as GEMM does. */
#ifndef LT_CPU_NATIVE_H
#define LT_CPU_NATIVE_H

#include "../backend.h"

/* What a kernel returns when it leaves the node to the fallback: an index out
 * of range (so that the error reads the same on every backend: the fallback
 * reports it), an instruction whose layout it does not know (one decoded from
 * bad bytes), or scratch memory it could not get. Whatever it wrote to out is
 * overwritten or dropped. */
#define CPU_NATIVE_DECLINED 1

/* A kernel: fills out (contiguous, the instruction's dtype and shape) from
 * the contiguous operands in. LT_OK, a negative status, or
 * CPU_NATIVE_DECLINED. */
typedef int (*cpu_native_fn)(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

/* The kernel of op for a result of dtype whose operand 0 has in_dtype, or
 * NULL when there is none (the fallback runs the node). */
cpu_native_fn lt__cpu_native_find(int op, int dtype, int in_dtype);

/* The collectives (cpu_collective.c): every dtype, through the world's
 * transport. */
int lt__cpu_collective(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

/* Whether op has a kernel for some dtypes. */
bool lt__cpu_native_has(int op);

#endif
