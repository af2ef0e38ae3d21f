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
 *   all_to_all           g -> all_to_all(g) with the axes swapped
 *   collective_permute   g -> collective_permute(g) with the pairs reversed
 * broadcast declares none in the table (docs/SCALE_OUT.md says why). Over a
 * replica group (the trailing {size, stride} attrs), the adjoint runs over
 * the same group. */
#include "ag.h"

static lt_node *coll(lt_op op, const lt_node *like, lt_node *g, const int64_t *shape,
                     const int64_t *attrs, int nattrs) {
  return lt__node_make(op, (lt_dtype)like->dtype, shape, like->ndim, &g, 1, attrs, nattrs, 0.0);
}

/* all_to_all {split, concat, size} -> all_to_all(g) {concat, split, size}:
 * chunk r of rank j's input became block j of rank r's output, so block j
 * of rank r's g goes back as chunk r of rank j's gradient.
 * collective_permute {size, s0, t0, ...} -> the pairs reversed: target t's
 * g goes back to its source s; a rank that sent nothing gets zeros. */
static int rule_exchange(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *x = n->operands[0].node;
  if (n->op == LT_OP_ALL_TO_ALL) {
    int64_t attrs[3] = {n->attrs[1], n->attrs[0], n->attrs[2]};
    out[0] = coll(LT_OP_ALL_TO_ALL, n, ag_ref(g), x->shape, attrs, 3);
  } else {
    int64_t attrs[1 + 2 * LT_MAX_DEVICES];
    int na = n->nattrs < 1 + 2 * LT_MAX_DEVICES ? n->nattrs : 1 + 2 * LT_MAX_DEVICES;
    attrs[0] = n->attrs[0];
    for (int k = 1; k + 1 < na; k += 2) {
      attrs[k] = n->attrs[k + 1];
      attrs[k + 1] = n->attrs[k];
    }
    out[0] = coll(LT_OP_COLLECTIVE_PERMUTE, n, ag_ref(g), x->shape, attrs, na);
  }
  return out[0] ? LT_OK : LT_ENOMEM;
}

int lt__ag_rule_collective(const lt_node *n, lt_node *g, lt_node **out) {
  out[0] = NULL;
  if (!ag_is_float(n)) return LT_OK; /* integer values carry no gradient */
  if (n->op == LT_OP_ALL_TO_ALL || n->op == LT_OP_COLLECTIVE_PERMUTE)
    return rule_exchange(n, g, out);
  const lt_node *x = n->operands[0].node;
  int redop = n->op == LT_OP_ALL_GATHER ? 0 : (int)n->attrs[0];
  if (redop != 0 && redop != 1)
    return lt__err(LT_EINVAL, "lt_backward: %s(%s) has no gradient (only sum and mean do)",
                   lt__op_name((lt_op)n->op), redop == 2 ? "max" : "min");
  switch (n->op) {
  case LT_OP_ALL_REDUCE: { /* {redop[, size, stride]}: the same node */
    out[0] = coll(LT_OP_ALL_REDUCE, n, ag_ref(g), x->shape, n->attrs, n->nattrs);
    break;
  }
  case LT_OP_ALL_GATHER: { /* {axis, size[, stride]} -> {sum, axis, size[, stride]} */
    int64_t attrs[4] = {0, n->attrs[0], n->attrs[1], n->nattrs == 3 ? n->attrs[2] : 0};
    out[0] = coll(LT_OP_REDUCE_SCATTER, n, ag_ref(g), x->shape, attrs, n->nattrs + 1);
    break;
  }
  case LT_OP_REDUCE_SCATTER: { /* {redop, axis, size[, stride]} -> {axis, size[, stride]} */
    int64_t attrs[3] = {n->attrs[1], n->attrs[2], n->nattrs == 4 ? n->attrs[3] : 0};
    lt_node *y = coll(LT_OP_ALL_GATHER, n, ag_ref(g), x->shape, attrs, n->nattrs - 1);
    if (y && redop == 1)
      y = lt__node_bin(LT_OP_MUL, y,
                       lt__ag_const((lt_dtype)n->dtype, NULL, 0, 1.0 / (double)n->attrs[2]));
    out[0] = y;
    break;
  }
  default:
    return lt__err(LT_EINVAL, "lt_backward: %s has no gradient", lt__op_name((lt_op)n->op));
  }
  return out[0] ? LT_OK : LT_ENOMEM;
}

/* The SPMD collectives (sharding): the replicas run ONE global program whose
 * loss is replicated, not a sum of per-replica losses, so the adjoints are
 * those of the global function:
 *   shard            g (a chunk) -> spmd_all_gather(g): the full gradient
 *   spmd_all_gather  g (replicated) -> shard(g): this rank's chunk of it
 *   spmd_all_reduce  sum: g to each partial (identity); mean: g / size
 *   spmd_copy        g -> spmd_all_reduce(g, sum): a replicated value used by
 *                    rank-dependent work gets the sum of the ranks' parts */
int lt__ag_rule_spmd(const lt_node *n, lt_node *g, lt_node **out) {
  out[0] = NULL;
  if (!ag_is_float(n)) return LT_OK;
  const lt_node *x = n->operands[0].node;
  switch (n->op) {
  case LT_OP_SHARD:
    out[0] = coll(LT_OP_SPMD_ALL_GATHER, n, ag_ref(g), x->shape, n->attrs, 2);
    break;
  case LT_OP_SPMD_ALL_GATHER:
    out[0] = coll(LT_OP_SHARD, n, ag_ref(g), x->shape, n->attrs, 2);
    break;
  case LT_OP_SPMD_ALL_REDUCE:
    if (n->attrs[0] != 0 && n->attrs[0] != 1)
      return lt__err(LT_EINVAL, "lt_backward: spmd_all_reduce(%s) has no gradient",
                     n->attrs[0] == 2 ? "max" : "min");
    out[0] = ag_ref(g);
    if (n->attrs[0] == 1)
      out[0] = lt__node_bin(LT_OP_MUL, out[0],
                            lt__ag_const((lt_dtype)n->dtype, NULL, 0, 1.0 / (double)n->attrs[1]));
    break;
  case LT_OP_SPMD_COPY: {
    int64_t attrs[2] = {0, n->attrs[0]};
    out[0] = coll(LT_OP_SPMD_ALL_REDUCE, n, ag_ref(g), x->shape, attrs, 2);
    break;
  }
  default:
    return lt__err(LT_EINVAL, "lt_backward: %s has no gradient", lt__op_name((lt_op)n->op));
  }
  return out[0] ? LT_OK : LT_ENOMEM;
}
