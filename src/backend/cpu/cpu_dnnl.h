/* What the oneDNN primitives of the cpu backend share (cpu_dnnl.c): the
 * process's one CPU engine, and the memory objects that wrap the caller's
 * buffers for one execution. Used by the convolutions (cpu_conv.c) and the
 * matmul primitives (cpu_matmul_prim.c). */
#ifndef LT_CPU_DNNL_H
#define LT_CPU_DNNL_H
#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>

/* The engine, made on first use and kept for the process (the primitives
 * made on it are kept too); NULL when oneDNN could not make it. */
dnnl_engine_t lt__cpu_dnnl_engine(void);

/* Appends argument `arg` (data described by md) to args[*n], wrapping data
 * in a memory object that is also appended to keep[*nkeep] for the caller
 * to destroy after the execution; false when the object cannot be made. */
bool lt__cpu_dnnl_arg(dnnl_exec_arg_t *args, int *n, int arg, const dnnl_memory_desc_t *md,
                      const void *data, dnnl_memory_t *keep, int *nkeep);

/* Scratch memory of the calling thread, 64-byte aligned, grown to `bytes`
 * and kept until the thread ends; NULL when memory is short. Two separate
 * buffers (CPU_SCRATCH_*), so that a product converting its bf16 operands
 * may call a primitive that uses the other one. */
enum { CPU_SCRATCH_PRIM, CPU_SCRATCH_CONVERT, CPU_SCRATCH_BATCH, CPU_SCRATCH_COUNT };
void *lt__cpu_thread_scratch(int which, size_t bytes);

/* ---- bf16 products: native or converted ---- */
/* Whether oneDNN runs bf16 products natively here: its effective
 * instruction set (after LT_CPU_ISA's cap) has the AVX512-BF16 dot product
 * (avx512_core_bf16, or AMX tiles). Elsewhere the cpu backend converts the
 * operands to f32, runs the f32 kernel and rounds the result once. */
bool lt__cpu_bf16_native(void);
/* The name of oneDNN's effective instruction set ("avx512_core_amx", ...). */
const char *lt__cpu_dnnl_isa_name(void);
/* The instruction set of bf16 products: oneDNN's when native, else
 * "<set> (bf16 converted to f32)". A static string. */
const char *lt__cpu_bf16_isa_name(void);
/* Records that a bf16 product or convolution ran natively or converted
 * (counters Bf16GemmNative / Bf16GemmConverted, Bf16ConvNative /
 * Bf16ConvConverted, and the instruction set the metrics report shows). */
void lt__cpu_bf16_count(bool conv, bool native);
#endif
