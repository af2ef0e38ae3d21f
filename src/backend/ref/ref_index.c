/* ref kernels for the index ops: LT_OP_GATHER, LT_OP_INDEX_SELECT, LT_OP_ONE_HOT.
 *
 * Index values are data, so they are checked here, element by element, before
 * any memory is touched with them: an index outside [0, size) (negative ones
 * included: torch's gather rejects them too) fails with LT_EEXEC. */
#include "ref.h"

#include "../../core/lt_caller.h"
#include "../../core/lt_error.h"

/* Copies element si of src to element di of dst (same dtype): ints through
 * int64 so that i64 values keep every bit. */
static void copy_elem(lt_buffer *dst, int64_t di, const lt_buffer *src, int64_t si) {
  if (ref_is_float(dst->dtype))
    ref_setf(dst, di, ref_getf(src, si));
  else
    ref_seti(dst, di, ref_geti(src, si));
}

/* Named by the public function the instruction was built for, when it
 * records one (lt_caller.h), else by the op. */
static int out_of_range(const lt_instr *ins, const char *what, int64_t v, int64_t size, int axis) {
  const char *noun, *who = lt__caller_who(ins->attrs, ins->nattrs, what, &noun);
  return lt__err(LT_EEXEC, "%s: %s %lld out of range [0, %lld) along axis %d", who, noun,
                 (long long)v, (long long)size, axis);
}

/* out[c] = a[c with c[axis] = index[c]]; out and index share a shape. */
static int gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *a = in[0], *index = in[1];
  int axis = (int)ins->attrs[0];
  int64_t size = a->shape[axis];
  int64_t coords[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) {
    int64_t v = ref_geti(index, i);
    if (v < 0 || v >= size) return out_of_range(ins, "gather", v, size, axis);
    lt__unravel(i, ins->shape, ins->ndim, coords);
    coords[axis] = v;
    copy_elem(out, i, a, lt__ravel(coords, a->shape, a->ndim));
  }
  return LT_OK;
}

/* out[c] = a[c with c[axis] = index[c[axis]]]; index is 1-d. */
static int index_select(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *a = in[0], *index = in[1];
  int axis = (int)ins->attrs[0];
  int64_t size = a->shape[axis];
  /* Check every index first, so that an error does not depend on whether the
   * output happens to be empty along another axis. */
  for (int64_t j = 0; j < index->numel; j++) {
    int64_t v = ref_geti(index, j);
    if (v < 0 || v >= size) return out_of_range(ins, "index_select", v, size, axis);
  }
  int64_t coords[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, ins->shape, ins->ndim, coords);
    coords[axis] = ref_geti(index, coords[axis]);
    copy_elem(out, i, a, lt__ravel(coords, a->shape, a->ndim));
  }
  return LT_OK;
}

/* out[c..., j] = (indices[c...] == j), for j in [0, num_classes). */
static int one_hot(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *indices = in[0];
  int64_t nc = ins->attrs[0];
  for (int64_t i = 0; i < indices->numel; i++) {
    int64_t v = ref_geti(indices, i);
    if (v < 0 || v >= nc) {
      const char *noun, *who = lt__caller_who(ins->attrs, ins->nattrs, "one_hot", &noun);
      return lt__err(LT_EEXEC, "%s: %s %lld out of range [0, %lld)", who, noun, (long long)v,
                     (long long)nc);
    }
    for (int64_t j = 0; j < nc; j++) ref_seti(out, i * nc + j, j == v);
  }
  return LT_OK;
}

int lt__ref_index(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  switch (ins->op) {
  case LT_OP_GATHER:
    return gather(ins, out, in);
  case LT_OP_INDEX_SELECT:
    return index_select(ins, out, in);
  case LT_OP_ONE_HOT:
    return one_hot(ins, out, in);
  default:
    return lt__err(LT_EEXEC, "lt__ref_index: unexpected op %s", lt__op_name(ins->op));
  }
}
