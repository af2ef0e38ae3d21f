/* Gradient rule of the scans (LT_OP_CUMSUM; argsort has none: its values
 * reach autograd through a gather, whose rule scatters g back).
 *
 * out[j] = sum over i <= j of a[i], so d loss / d a[i] = sum over j >= i of
 * g[j]: the cumulative sum of g taken from the other end, which is the same
 * op with its reverse flag flipped (and so is differentiable again). */
#include "ag.h"

int lt__ag_rule_scan(const lt_node *n, lt_node *g, lt_node **out) {
  out[0] = NULL;
  if (!ag_is_float(n)) return LT_OK; /* integer sums carry no gradient */
  lt_node *gg = ag_ref(g);
  int64_t attrs[2] = {n->attrs[0], !n->attrs[1]};
  out[0] =
      lt__node_make(LT_OP_CUMSUM, (lt_dtype)n->dtype, n->shape, n->ndim, &gg, 1, attrs, 2, 0.0);
  return out[0] ? LT_OK : LT_ENOMEM;
}
