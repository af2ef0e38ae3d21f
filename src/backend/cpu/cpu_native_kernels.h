/* What the cpu backend's hand-written kernels share (cpu_native.h): the
 * helpers that split work over the pool, the [outer, n, inner] view of a shape
 * around one axis, the index dtypes, the refusal of a dtype, and each
 * family's kernel (one file each, split as src/backend/ref is):
 *   cpu_native_reduce.c    argmax / argmin
 *   cpu_native_scan.c      cumsum, argsort
 *   cpu_native_shape.c     concat, pad
 *   cpu_native_index.c     gather, index_select, one_hot
 *   cpu_native_random.c    normal draws, randperm
 *   cpu_native_grad_ops.c  scatter_add / index_add, unslice
 * cpu_native.c picks the kernel of an instruction. Internal to these files. */
#ifndef LT_CPU_NATIVE_KERNELS_H
#define LT_CPU_NATIVE_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "../../core/lt_dtype.h"
#include "../../core/lt_error.h"
#include "../../core/lt_node.h"
#include "cpu.h"
#include "cpu_native.h"

#define DECLINE CPU_NATIVE_DECLINED
/* Columns one task of a line kernel handles: its accumulators stay in L1. */
#define BLOCK 256

/* ---- shared helpers ----------------------------------------------------------------------- */

/* fn over [0, extent) on the pool, ctx behind the slots pointer. */
static inline void par(cpu_kernel_fn fn, void *ctx, int64_t extent, int64_t unit_cost) {
  void *slots[1] = {ctx};
  lt__cpu_pool_run(fn, slots, extent, unit_cost);
}

static inline size_t esize(int dt) { return lt_dtype_size((lt_dtype)dt); }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The index dtypes the builders make; others are left to the fallback. */
static inline bool index_dtype(int dt) { return dt == LT_I32 || dt == LT_I64; }
static inline int64_t index_at(const void *p, bool wide, int64_t i) {
  return wide ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* A shape seen as [outer, n, inner] around one axis. */
typedef struct lines {
  int64_t outer, n, inner;
} lines;

static inline lines split_at(const int64_t *shape, int nd, int axis) {
  lines p = {1, shape[axis], 1};
  for (int d = 0; d < nd; d++) {
    if (d < axis) p.outer *= shape[d];
    if (d > axis) p.inner *= shape[d];
  }
  return p;
}

/* The axis in attrs[0] when it is one of rank nd, else -1. */
static inline int axis_attr(const lt_instr *ins, int nd) {
  if (ins->nattrs < 1 || ins->attrs[0] < 0 || ins->attrs[0] >= nd) return -1;
  return (int)ins->attrs[0];
}

/* Tasks of a line kernel: one per outer index and block of BLOCK columns. */
static inline int64_t nblocks(int64_t inner) { return (inner + BLOCK - 1) / BLOCK; }

/* A line kernel: columns [j0, j1) of outer index o, its context behind ctx. */
typedef void (*cols_fn)(const void *ctx, int64_t o, int64_t j0, int64_t j1);
typedef struct cols_job {
  cols_fn fn;
  const void *ctx;
  int64_t inner, nblk;
} cols_job;

static inline void cols_chunk(void **slots, int64_t lo, int64_t hi) {
  const cols_job *j = slots[0];
  for (int64_t t = lo; t < hi; t++) {
    int64_t o = t / j->nblk, j0 = t % j->nblk * BLOCK;
    j->fn(j->ctx, o, j0, min64(j0 + BLOCK, j->inner));
  }
}

/* fn over every outer index of p and block of BLOCK columns, on the pool. */
static inline void par_cols(cols_fn fn, const void *ctx, const lines *p) {
  cols_job j = {fn, ctx, p->inner, nblocks(p->inner)};
  par(cols_chunk, &j, p->outer * j.nblk, p->n * min64(p->inner, BLOCK));
}

/* The refusal of a kernel for a dtype that is not a row of the dtype table
 * (the executor hands these kernels table dtypes only, so an instruction
 * decoded from bad bytes): an error naming the op and the dtype, never
 * another dtype's loop. The kernels' switches over dtypes list every row and
 * have no default, so a new row without its case fails the build (-Wswitch,
 * part of -Wall); a row a kernel does not take declines to the fallback. */
static inline int no_dtype_loop(const lt_instr *ins, int dt) {
  return lt__err(LT_EDTYPE, "cpu: %s has no kernel for dtype %d (not a dtype)",
                 lt__op_name((lt_op)ins->op), dt);
}

/* The kernels (cpu_native_fn), by family. */
int lt__cpu_native_argext(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_cumsum(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_argsort(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_concat(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_pad(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_index_select(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_one_hot(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_normal(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_randperm(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_scatter(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__cpu_native_unslice(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

#endif
