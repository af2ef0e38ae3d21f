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
#endif
