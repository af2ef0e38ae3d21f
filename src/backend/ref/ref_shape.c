/* ref kernels of the shape ops: RESHAPE, PERMUTE, EXPAND, SLICE, CONCAT, PAD.
 *
 * None of them computes: each output element is a copy of one input element
 * (or, for PAD, the pad value). Elements are copied by their bytes, so every
 * dtype, i64 included, stays exact. For each output element the kernel
 * unravels its coordinates, maps them to the input's, and ravels those. */
#include <string.h>

#include "../../core/lt_error.h"
#include "ref.h"

/* out[oi] = in[ii]. The builders give operands the node's dtype; a differing
 * dtype would still convert correctly through the int64/double accessors. */
static void copy_elem(lt_buffer *out, int64_t oi, const lt_buffer *in, int64_t ii) {
  if (in->dtype == out->dtype) {
    size_t sz = lt_dtype_size((lt_dtype)out->dtype);
    memcpy((char *)out->data + (size_t)oi * sz, (const char *)in->data + (size_t)ii * sz, sz);
  } else if (ref_is_float(in->dtype) || ref_is_float(out->dtype)) {
    ref_setf(out, oi, ref_getf(in, ii));
  } else {
    ref_seti(out, oi, ref_geti(in, ii));
  }
}

/* Same elements in the same row-major order. */
static int do_reshape(lt_buffer *out, const lt_buffer *in) {
  for (int64_t i = 0; i < out->numel; i++) copy_elem(out, i, in, i);
  return LT_OK;
}

/* Output axis d is input axis perm[d]. */
static int do_permute(const lt_instr *ins, lt_buffer *out, const lt_buffer *in) {
  int64_t oc[LT_MAX_DIMS], ic[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, out->shape, out->ndim, oc);
    for (int d = 0; d < out->ndim; d++) ic[ins->attrs[d]] = oc[d];
    copy_elem(out, i, in, lt__ravel(ic, in->shape, in->ndim));
  }
  return LT_OK;
}

/* numpy broadcast: the input's dims align to the right, size-1 dims repeat. */
static int do_expand(lt_buffer *out, const lt_buffer *in) {
  int64_t oc[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, out->shape, out->ndim, oc);
    copy_elem(out, i, in, lt__bcast_ravel(in->shape, in->ndim, oc, out->ndim));
  }
  return LT_OK;
}

/* Input coord = start + output coord * step, per axis. */
static int do_slice(const lt_instr *ins, lt_buffer *out, const lt_buffer *in) {
  int nd = out->ndim;
  int64_t oc[LT_MAX_DIMS], ic[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, out->shape, nd, oc);
    for (int d = 0; d < nd; d++) ic[d] = ins->attrs[d] + oc[d] * ins->attrs[nd + d];
    copy_elem(out, i, in, lt__ravel(ic, in->shape, nd));
  }
  return LT_OK;
}

/* Each operand lands at an offset along the axis: the sum of the earlier
 * operands' sizes there. */
static int do_concat(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  int axis = (int)ins->attrs[0];
  int64_t offset = 0, c[LT_MAX_DIMS];
  for (int k = 0; k < ins->noperands; k++) {
    const lt_buffer *b = in[k];
    for (int64_t i = 0; i < b->numel; i++) {
      lt__unravel(i, b->shape, b->ndim, c);
      c[axis] += offset;
      copy_elem(out, lt__ravel(c, out->shape, out->ndim), b, i);
    }
    offset += b->shape[axis];
  }
  return LT_OK;
}

/* Fill with the pad value, then copy the input shifted by the "before" pads. */
static int do_pad(const lt_instr *ins, lt_buffer *out, const lt_buffer *in) {
  int64_t c[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) ref_setf(out, i, ins->fattr);
  for (int64_t i = 0; i < in->numel; i++) {
    lt__unravel(i, in->shape, in->ndim, c);
    for (int d = 0; d < in->ndim; d++) c[d] += ins->attrs[2 * d];
    copy_elem(out, lt__ravel(c, out->shape, out->ndim), in, i);
  }
  return LT_OK;
}

int lt__ref_shape(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  switch (ins->op) {
  case LT_OP_RESHAPE:
    return do_reshape(out, in[0]);
  case LT_OP_PERMUTE:
    return do_permute(ins, out, in[0]);
  case LT_OP_EXPAND:
    return do_expand(out, in[0]);
  case LT_OP_SLICE:
    return do_slice(ins, out, in[0]);
  case LT_OP_CONCAT:
    return do_concat(ins, out, in);
  case LT_OP_PAD:
    return do_pad(ins, out, in[0]);
  default:
    return lt__err(LT_EEXEC, "lt__ref_shape: op %s is not a shape op", lt__op_name((lt_op)ins->op));
  }
}
