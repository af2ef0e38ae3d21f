/* ref kernels of the ops autograd makes for the index and slice ops:
 * LT_OP_SCATTER_ADD (transpose of GATHER), LT_OP_INDEX_ADD (transpose of
 * INDEX_SELECT) and LT_OP_UNSLICE (transpose of SLICE).
 *
 * Each output starts as zeros and receives the source's elements at the
 * positions the forward op read them from; scatter-add and index-add sum the
 * elements that land on one position. Floats accumulate in double (one
 * accumulator per output element, stored once at the end), integers in int64
 * wrapping as two's complement. The forward op validated the indices, but a
 * graph built by hand may not have: every position is range-checked before
 * anything is written and an index out of range fails with LT_EEXEC. */
#include "../../core/lt_alloc.h"
#include "../../core/lt_caller.h"
#include "../../core/lt_error.h"
#include "ref.h"

/* Named by the public function the instruction was built for, when it
 * records one (lt_caller.h; ins NULL: UNSLICE, which records none), else by
 * the op. */
static int bad_index(const lt_instr *ins, const char *what, int64_t v, int64_t size, int axis) {
  const char *noun, *who = ins ? lt__caller_who(ins->attrs, ins->nattrs, what, &noun) : what;
  if (!ins) noun = "index";
  return lt__err(LT_EEXEC, "%s: %s %lld out of range [0, %lld) along axis %d", who, noun,
                 (long long)v, (long long)size, axis);
}

/* Maps src element i to its output position (written to *pos), or fails. */
typedef int (*place_fn)(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in, int64_t i,
                        int64_t *pos);

/* SCATTER_ADD: src element at c goes to c with c[axis] = index[c]. */
static int place_scatter(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in, int64_t i,
                         int64_t *pos) {
  const lt_buffer *src = in[0], *index = in[1];
  int axis = (int)ins->attrs[0];
  int64_t c[LT_MAX_DIMS];
  lt__unravel(i, src->shape, src->ndim, c);
  int64_t v = ref_geti(index, i);
  if (v < 0 || v >= out->shape[axis])
    return bad_index(ins, "scatter_add", v, out->shape[axis], axis);
  c[axis] = v;
  for (int d = 0; d < out->ndim; d++)
    if (c[d] >= out->shape[d]) return bad_index(ins, "scatter_add", c[d], out->shape[d], d);
  *pos = lt__ravel(c, out->shape, out->ndim);
  return LT_OK;
}

/* INDEX_ADD: src element at c goes to c with c[axis] = index[c[axis]]. */
static int place_index_add(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in,
                           int64_t i, int64_t *pos) {
  const lt_buffer *src = in[0], *index = in[1];
  int axis = (int)ins->attrs[0];
  int64_t c[LT_MAX_DIMS];
  lt__unravel(i, src->shape, src->ndim, c);
  if (c[axis] >= index->numel) return bad_index(ins, "index_add", c[axis], index->numel, axis);
  int64_t v = ref_geti(index, c[axis]);
  if (v < 0 || v >= out->shape[axis]) return bad_index(ins, "index_add", v, out->shape[axis], axis);
  c[axis] = v;
  for (int d = 0; d < out->ndim; d++)
    if (c[d] >= out->shape[d]) return bad_index(ins, "index_add", c[d], out->shape[d], d);
  *pos = lt__ravel(c, out->shape, out->ndim);
  return LT_OK;
}

/* UNSLICE: src element at c goes to starts + c * steps. */
static int place_unslice(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in, int64_t i,
                         int64_t *pos) {
  const lt_buffer *src = in[0];
  int nd = out->ndim;
  int64_t c[LT_MAX_DIMS];
  lt__unravel(i, src->shape, nd, c);
  for (int d = 0; d < nd; d++) {
    c[d] = ins->attrs[d] + c[d] * ins->attrs[nd + d];
    if (c[d] < 0 || c[d] >= out->shape[d])
      return bad_index(NULL, "unslice", c[d], out->shape[d], d);
  }
  *pos = lt__ravel(c, out->shape, nd);
  return LT_OK;
}

static int check_layout(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *src = in[0];
  bool ok = src->ndim == out->ndim;
  if (ins->op == LT_OP_UNSLICE) {
    ok = ok && ins->noperands == 1 && ins->nattrs == 2 * out->ndim;
  } else {
    ok = ok && ins->noperands == 2 && ins->nattrs >= 1 && ins->attrs[0] >= 0 &&
         ins->attrs[0] < out->ndim;
    if (ok && ins->op == LT_OP_SCATTER_ADD) ok = in[1]->numel == src->numel;
    if (ok && ins->op == LT_OP_INDEX_ADD) ok = in[1]->ndim == 1;
  }
  if (!ok) return lt__err(LT_EEXEC, "ref: malformed %s instruction", lt__op_name((lt_op)ins->op));
  return LT_OK;
}

int lt__ref_grad_ops(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  place_fn place;
  switch (ins->op) {
  case LT_OP_SCATTER_ADD:
    place = place_scatter;
    break;
  case LT_OP_INDEX_ADD:
    place = place_index_add;
    break;
  case LT_OP_UNSLICE:
    place = place_unslice;
    break;
  default:
    return lt__err(LT_EEXEC, "lt__ref_grad_ops: op %s is not a gradient op",
                   lt__op_name((lt_op)ins->op));
  }
  int rc = check_layout(ins, out, in);
  if (rc != LT_OK) return rc;
  const lt_buffer *src = in[0];
  /* Every position first, so that nothing is written on failure. */
  int64_t *pos = lt__malloc(sizeof(int64_t) * (size_t)src->numel);
  if (!pos) return LT_ENOMEM;
  for (int64_t i = 0; i < src->numel && rc == LT_OK; i++) rc = place(ins, out, in, i, &pos[i]);
  bool is_float = ref_is_float(out->dtype);
  size_t accn = sizeof(double) * (size_t)out->numel; /* double and uint64_t: 8 bytes each */
  void *acc = rc == LT_OK ? lt__calloc(accn) : NULL;
  if (rc == LT_OK && !acc) rc = LT_ENOMEM;
  if (rc == LT_OK) {
    double *accf = acc;
    uint64_t *acci = acc;
    for (int64_t i = 0; i < src->numel; i++) {
      if (is_float)
        accf[pos[i]] += ref_getf(src, i);
      else
        acci[pos[i]] += (uint64_t)ref_geti(src, i);
    }
    for (int64_t j = 0; j < out->numel; j++) {
      if (is_float)
        ref_setf(out, j, accf[j]);
      else
        ref_seti(out, j, (int64_t)acci[j]);
    }
  }
  lt__free(acc, accn);
  lt__free(pos, sizeof(int64_t) * (size_t)src->numel);
  return rc;
}
