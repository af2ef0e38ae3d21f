/* Gradient rules of the convolution ops (the op table's CONV family; the
 * max-pool argmax is an index and declares none: pooled values reach
 * autograd through a POOL_GATHER, whose rule is at the top).
 *
 * The three ops are the three bilinear maps of one convolution y = x * w:
 *   CONV2D(x, w)             -> y     dx = GRAD_INPUT(g, w), dw = GRAD_WEIGHT(x, g)
 *   GRAD_INPUT(gy, w)        -> gx    dgy = CONV2D(g, w),    dw = GRAD_WEIGHT(g, gy)
 *   GRAD_WEIGHT(x, gy)       -> gw    dx = GRAD_INPUT(gy, g), dgy = CONV2D(x, g)
 * all with the node's attrs, so every gradient is differentiable again.
 * CONV2D_BIAS(x, w, b) is CONV2D's maps plus db = the sum of g over every axis
 * but the channels. A
 * GRAD_INPUT output may be longer than a convolution of its size needs
 * (conv_transpose2d's output_padding); CONV2D over it then has more windows
 * than gy has positions, and only the first ones are gy's gradient. */
#include <string.h>

#include "ag.h"

/* CONV2D of x and w (consumed) with n's attrs, cut to like's shape. */
static lt_node *conv_like(const lt_node *n, lt_node *x, lt_node *w, const lt_node *like) {
  if (!x || !w) {
    lt__node_release(x);
    lt__node_release(w);
    return NULL;
  }
  const int64_t *a = n->attrs;
  int64_t shape[4] = {x->shape[0], w->shape[0], 0, 0};
  for (int i = 0; i < 2; i++) {
    int64_t room = x->shape[2 + i] + 2 * a[2 + i] - a[4 + i] * (w->shape[2 + i] - 1) - 1;
    shape[2 + i] = room < 0 ? 0 : room / a[i] + 1;
  }
  lt_node *ops[2] = {x, w};
  lt_node *y = lt__node_make(LT_OP_CONV2D, (lt_dtype)n->dtype, shape, 4, ops, 2, a, 7, 0.0);
  if (!y || (shape[2] == like->shape[2] && shape[3] == like->shape[3])) return y;
  int64_t attrs[8] = {0, 0, 0, 0, 1, 1, 1, 1}; /* starts, then steps */
  return lt__node_make(LT_OP_SLICE, (lt_dtype)n->dtype, like->shape, 4, &y, 1, attrs, 8, 0.0);
}

/* op (GRAD_INPUT or GRAD_WEIGHT) of a and b (consumed) with n's attrs, of like's shape. */
static lt_node *conv_grad(const lt_node *n, lt_op op, lt_node *a, lt_node *b, const lt_node *like) {
  lt_node *ops[2] = {a, b};
  return lt__node_make(op, (lt_dtype)n->dtype, like->shape, like->ndim, ops, 2, n->attrs, 7, 0.0);
}

/* POOL_GATHER(v, idx) -> dv = POOL_SCATTER_ADD(g, idx) of v's shape, and
 * POOL_SCATTER_ADD(s, idx) -> ds = POOL_GATHER(g, idx): each is the other's
 * transpose (as GATHER and SCATTER_ADD); the index gets none. */
static int pool_planes_rule(const lt_node *n, lt_node *g, lt_node **out) {
  if (n->noperands != 2 || n->nattrs != 0)
    return lt__err(LT_EINVAL, "lt_backward: malformed %s node", lt__op_name((lt_op)n->op));
  bool gather = n->op == LT_OP_POOL_GATHER;
  const lt_node *like = n->operands[0].node;
  lt_node *ops[2] = {ag_ref(g), ag_arg(n, 1)};
  out[0] = lt__node_make(gather ? LT_OP_POOL_SCATTER_ADD : LT_OP_POOL_GATHER, (lt_dtype)n->dtype,
                         like->shape, like->ndim, ops, 2, NULL, 0, 0.0);
  return out[0] ? LT_OK : LT_ENOMEM;
}

int lt__ag_rule_conv(const lt_node *n, lt_node *g, lt_node **out) {
  if (n->op == LT_OP_POOL_GATHER || n->op == LT_OP_POOL_SCATTER_ADD)
    return pool_planes_rule(n, g, out);
  const lt_node *a = n->operands[0].node, *b = n->operands[1].node;
  if (n->nattrs != 7 || n->ndim != 4)
    return lt__err(LT_EINVAL, "lt_backward: malformed %s node", lt__op_name((lt_op)n->op));
  switch ((lt_op)n->op) {
  case LT_OP_CONV2D_BIAS:
    if (n->noperands != 3)
      return lt__err(LT_EINVAL, "lt_backward: malformed %s node", lt__op_name((lt_op)n->op));
    out[0] = conv_grad(n, LT_OP_CONV2D_GRAD_INPUT, ag_ref(g), ag_arg(n, 1), a);
    out[1] = conv_grad(n, LT_OP_CONV2D_GRAD_WEIGHT, ag_arg(n, 0), ag_ref(g), b);
    out[2] = lt__node_reduce(LT_OP_SUM, ag_ref(g), 1 | 4 | 8, false); /* axes 0, 2, 3 */
    return out[0] && out[1] && out[2] ? LT_OK : LT_ENOMEM;
  case LT_OP_CONV2D:
    out[0] = conv_grad(n, LT_OP_CONV2D_GRAD_INPUT, ag_ref(g), ag_arg(n, 1), a);
    out[1] = conv_grad(n, LT_OP_CONV2D_GRAD_WEIGHT, ag_arg(n, 0), ag_ref(g), b);
    break;
  case LT_OP_CONV2D_GRAD_INPUT:
    out[0] = conv_like(n, ag_ref(g), ag_arg(n, 1), a);
    out[1] = conv_grad(n, LT_OP_CONV2D_GRAD_WEIGHT, ag_ref(g), ag_arg(n, 0), b);
    break;
  case LT_OP_CONV2D_GRAD_WEIGHT:
    out[0] = conv_grad(n, LT_OP_CONV2D_GRAD_INPUT, ag_arg(n, 1), ag_ref(g), a);
    out[1] = conv_like(n, ag_arg(n, 0), ag_ref(g), b);
    break;
  default:
    return lt__err(LT_EINVAL, "lt_backward: the conv gradient rule has no case for op %s",
                   lt__op_name((lt_op)n->op));
  }
  return out[0] && out[1] ? LT_OK : LT_ENOMEM;
}
