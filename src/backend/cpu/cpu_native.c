/* The cpu backend's hand-written kernels (see cpu_native.h): which kernel
 * runs an instruction. The kernels live by family, as src/backend/ref's do
 * (cpu_native_kernels.h lists the files).
 *
 * Every kernel of those files reproduces its ref kernel bit for bit; the
 * convolutions, pooling and attention here come from their own files and match
 * ref within rounding, as GEMM does. Work runs on the pool through
 * lt__cpu_pool_run, which keeps small jobs on the calling thread. */
#include "cpu_attention.h"
#include "cpu_conv.h"
#include "cpu_native_kernels.h"

cpu_native_fn lt__cpu_native_find(int op, int dtype, int in_dtype) {
  if (dtype < 0 || dtype >= LT_NUM_DTYPES || in_dtype < 0 || in_dtype >= LT_NUM_DTYPES) return NULL;
  bool same = dtype == in_dtype, fl = dtype == LT_F32 || dtype == LT_F64;
  switch (op) {
  case LT_OP_ARGMAX:
  case LT_OP_ARGMIN:
    return dtype == LT_I64 ? lt__cpu_native_argext : NULL;
  case LT_OP_ARGSORT:
    return dtype == LT_I64 ? lt__cpu_native_argsort : NULL;
  case LT_OP_CUMSUM:
    return same && (fl || dtype == LT_I64 || dtype == LT_I32) ? lt__cpu_native_cumsum : NULL;
  case LT_OP_CONCAT:
    return same ? lt__cpu_native_concat : NULL;
  case LT_OP_PAD:
    return same ? lt__cpu_native_pad : NULL;
  case LT_OP_GATHER:
    return same ? lt__cpu_native_gather : NULL;
  case LT_OP_INDEX_SELECT:
    return same ? lt__cpu_native_index_select : NULL;
  case LT_OP_ONE_HOT:
    return index_dtype(in_dtype) ? lt__cpu_native_one_hot : NULL;
  case LT_OP_RNG_NORMAL:
    return fl && in_dtype == LT_I64 ? lt__cpu_native_normal : NULL;
  case LT_OP_RANDPERM:
    return (dtype == LT_I64 || dtype == LT_I32) && in_dtype == LT_I64 ? lt__cpu_native_randperm
                                                                      : NULL;
  case LT_OP_SCATTER_ADD:
  case LT_OP_INDEX_ADD:
    return same ? lt__cpu_native_scatter : NULL;
  case LT_OP_UNSLICE:
    return same ? lt__cpu_native_unslice : NULL;
  /* convolutions through oneDNN (f32, and bf16 with f32 sums: f64 takes
   * the fallback); not byte-equal to ref, as GEMM (cpu_conv.h) */
  case LT_OP_CONV2D:
  case LT_OP_CONV2D_BIAS:
    return (dtype == LT_F32 || dtype == LT_BF16) && same ? lt__cpu_conv2d_fwd : NULL;
  case LT_OP_CONV2D_GRAD_INPUT:
    return (dtype == LT_F32 || dtype == LT_BF16) && same ? lt__cpu_conv2d_bwd_data : NULL;
  case LT_OP_CONV2D_GRAD_WEIGHT:
    return (dtype == LT_F32 || dtype == LT_BF16) && same ? lt__cpu_conv2d_bwd_weight : NULL;
  case LT_OP_MAX_POOL2D_ARGMAX:
    return dtype == LT_I64 && (in_dtype == LT_F32 || in_dtype == LT_F64 || in_dtype == LT_BF16)
               ? lt__cpu_max_pool2d_argmax
               : NULL;
  /* blocked online softmax (f32 only: f64 takes the fallback); within f32
   * rounding of ref, as GEMM (cpu_attention.h) */
  case LT_OP_ATTENTION:
    return dtype == LT_F32 && same ? lt__cpu_attention : NULL;
  case LT_OP_POOL_GATHER:
  case LT_OP_POOL_SCATTER_ADD:
    return same && (fl || dtype == LT_BF16)
               ? (op == LT_OP_POOL_GATHER ? lt__cpu_pool_gather : lt__cpu_pool_scatter_add)
               : NULL;
  case LT_OP_ALL_REDUCE:
  case LT_OP_ALL_GATHER:
  case LT_OP_REDUCE_SCATTER:
  case LT_OP_BROADCAST:
  case LT_OP_SHARD:
  case LT_OP_SPMD_ALL_GATHER:
  case LT_OP_SPMD_ALL_REDUCE:
  case LT_OP_SPMD_COPY:
  case LT_OP_ALL_TO_ALL:
  case LT_OP_COLLECTIVE_PERMUTE:
    return same ? lt__cpu_collective : NULL;
  default:
    return NULL;
  }
}

bool lt__cpu_native_has(int op) {
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
    for (int in_dt = 0; in_dt < LT_NUM_DTYPES; in_dt++)
      if (lt__cpu_native_find(op, dt, in_dt)) return true;
  return false;
}
