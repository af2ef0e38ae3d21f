/* Gradients of the collectives (as PyTorch/XLA's): each is the adjoint
 * collective, so the backward pass of a replicated graph is replicated too
 * and its collectives come in the same order on every replica.
 *   all_reduce sum       g -> all_reduce(g, sum)   (every output depends on
 *                        every rank's input with weight 1)
 *   all_reduce mean      g -> all_reduce(g, mean)
 *   all_gather           g -> reduce_scatter(g, sum) along the same axis
 *   reduce_scatter sum   g -> all_gather(g) along the same axis
 *   reduce_scatter mean  g -> all_gather(g) / size
 *   max, min             no gradient: an error rather than a silent zero
 * broadcast declares none in the table (docs/SCALE_OUT.md says why). */
#include "ag.h"

static lt_node *coll(lt_op op, const lt_node *like, lt_node *g, const int64_t *shape,
                     const int64_t *attrs, int nattrs) {
  return lt__node_make(op, (lt_dtype)like->dtype, shape, like->ndim, &g, 1, attrs, nattrs, 0.0);
}

int ag_rule_collective(const lt_node *n, lt_node *g, lt_node **out) {
  out[0] = NULL;
  if (!ag_is_float(n)) return LT_OK; /* integer values carry no gradient */
  const lt_node *x = n->operands[0].node;
  int redop = n->op == LT_OP_ALL_GATHER ? 0 : (int)n->attrs[0];
  if (redop != 0 && redop != 1)
    return lt__err(LT_EINVAL, "lt_backward: %s(%s) has no gradient (only sum and mean do)",
                   lt__op_name((lt_op)n->op), redop == 2 ? "max" : "min");
  switch (n->op) {
  case LT_OP_ALL_REDUCE: {
    int64_t attrs[1] = {redop};
    out[0] = coll(LT_OP_ALL_REDUCE, n, ag_ref(g), x->shape, attrs, 1);
    break;
  }
  case LT_OP_ALL_GATHER: {
    int64_t attrs[3] = {0, n->attrs[0], n->attrs[1]};
    out[0] = coll(LT_OP_REDUCE_SCATTER, n, ag_ref(g), x->shape, attrs, 3);
    break;
  }
  case LT_OP_REDUCE_SCATTER: {
    int64_t attrs[2] = {n->attrs[1], n->attrs[2]};
    lt_node *y = coll(LT_OP_ALL_GATHER, n, ag_ref(g), x->shape, attrs, 2);
    if (y && redop == 1)
      y = lt__node_bin(LT_OP_MUL, y,
                       ag_const((lt_dtype)n->dtype, NULL, 0, 1.0 / (double)n->attrs[2]));
    out[0] = y;
    break;
  }
  default:
    return lt__err(LT_EINVAL, "lt_backward: %s has no gradient", lt__op_name((lt_op)n->op));
  }
  return out[0] ? LT_OK : LT_ENOMEM;
}
