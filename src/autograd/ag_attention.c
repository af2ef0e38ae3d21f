/* Gradient rule of LT_OP_ATTENTION, as IR made of primitives so that second
 * order and every backend follow from the existing rules.
 *
 * With s = scale q k^T + bias, P = softmax(s) (rebuilt here from matmul, the
 * mask or the causal triangle and softmax: the L x S probabilities exist in
 * the backward only), O = P v (the node itself) and g = dL/dO:
 *   dv = P^T g
 *   ds = P * (g v^T - rowsum(g * O))   (rowsum(P * (g v^T)) = rowsum(g * O))
 *   dq = scale ds k,  dk = scale ds^T q
 *   d(additive mask) = ds;  a bool mask gets none.
 * A row that sees nothing has a NaN output and NaN gradients, as torch's
 * math path. */
#include "../ops/op_attention.h"
#include "ag.h"

int lt__ag_rule_attention(const lt_node *n, lt_node *g, lt_node **out) {
  lt_attn_mask_kind kind = (lt_attn_mask_kind)n->attrs[1];
  bool causal = n->attrs[0] != 0;
  double scale = n->fattr;
  lt_dtype dt = (lt_dtype)n->dtype;
  lt_node *mask = kind != LT_ATTN_MASK_NONE ? ag_arg(n, 3) : NULL;
  lt_node *s = lt__attn_scores(ag_arg(n, 0), ag_arg(n, 1), mask, kind, causal, scale);
  int64_t axis[1] = {2};
  lt_node *p = s ? lt__node_make(LT_OP_SOFTMAX, dt, s->shape, 3, &s, 1, axis, 1, 0.0) : NULL;
  if (!p) return LT_ENOMEM;

  out[2] = lt__attn_matmul(lt__attn_transpose(ag_ref(p)), ag_ref(g));
  lt_node *gp = lt__attn_matmul(ag_ref(g), lt__attn_transpose(ag_arg(n, 2)));
  lt_node *rs = lt__node_reduce(LT_OP_SUM, lt__node_bin(LT_OP_MUL, ag_ref(g), ag_ref(n)),
                                (int64_t)1 << 2, true);
  lt_node *ds = lt__node_bin(LT_OP_MUL, p, lt__node_bin(LT_OP_SUB, gp, rs));
  lt_node *dss = lt__node_bin(LT_OP_MUL, ag_ref(ds), lt__node_const(dt, NULL, 0, scale));
  out[0] = lt__attn_matmul(ag_ref(dss), ag_arg(n, 1));
  out[1] = lt__attn_matmul(lt__attn_transpose(dss), ag_arg(n, 0));
  if (kind == LT_ATTN_MASK_ADDITIVE)
    out[3] = ds;
  else
    lt__node_release(ds);
  bool ok = out[0] && out[1] && out[2] && (kind != LT_ATTN_MASK_ADDITIVE || out[3]);
  return ok ? LT_OK : LT_ENOMEM;
}
