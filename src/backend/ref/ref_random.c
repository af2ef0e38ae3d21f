/* ref kernels for random ops: RNG_UNIFORM, RNG_NORMAL and RANDPERM. Operand 0
 * is the op's seed (0-d i64). Element k is a function of (seed, k) only, by
 * Philox4x32-10 with the mapping documented in core/lt_philox.h: keyed by the
 * seed, counter = k (uniform f32: four elements per block). RANDPERM is Fisher-Yates
 * from the end: for i = n-1 down to 1, swap element i with element j, j drawn
 * uniformly in [0, i] from block i of the seed's stream. */
#include "../../core/lt_error.h"
#include "../../core/lt_philox.h"
#include "ref.h"

int lt__ref_random(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  uint64_t seed = (uint64_t)ref_geti(in[0], 0);
  int64_t n = out->numel;
  switch (ins->op) {
  case LT_OP_RNG_UNIFORM:
    if (out->dtype == LT_F32)
      for (int64_t k = 0; k < n; k++) ref_setf(out, k, lt_philox_uniform_f32(seed, (uint64_t)k));
    else
      for (int64_t k = 0; k < n; k++) ref_setf(out, k, lt_philox_uniform_f64(seed, (uint64_t)k));
    return LT_OK;
  case LT_OP_RNG_NORMAL:
    for (int64_t k = 0; k < n; k++) ref_setf(out, k, lt_philox_normal(seed, (uint64_t)k));
    return LT_OK;
  case LT_OP_RANDPERM:
    for (int64_t k = 0; k < n; k++) ref_seti(out, k, k);
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)lt_philox_below(seed, (uint64_t)i, (uint64_t)i);
      int64_t vi = ref_geti(out, i), vj = ref_geti(out, j);
      ref_seti(out, i, vj);
      ref_seti(out, j, vi);
    }
    return LT_OK;
  default:
    return lt__err(LT_EEXEC, "ref: no kernel for op %s", lt__op_name((lt_op)ins->op));
  }
}
