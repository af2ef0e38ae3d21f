/* Node helpers for the gradient rules. */
#include <string.h>

#include "ag.h"

lt_node *lt__ag_const(lt_dtype dt, const int64_t *shape, int ndim, double v) {
  return lt__node_const(dt, shape, ndim, v);
}

lt_dtype lt__ag_wide_dtype(lt_dtype dt) { return lt__dtype_compute(dt); }

/* lt__node_cast returns x itself when it has the dtype (or is NULL) */
lt_node *lt__ag_widen(lt_node *x) {
  return x ? lt__node_cast(x, lt__ag_wide_dtype((lt_dtype)x->dtype)) : NULL;
}

lt_node *lt__ag_narrow(lt_node *x, lt_dtype dt) { return lt__node_cast(x, dt); }

lt_node *lt__ag_reduce_to(lt_node *g, const int64_t *shape, int ndim) {
  if (!g) return NULL;
  if (g->ndim == ndim && memcmp(g->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0) return g;
  /* Axes that broadcasting added (leading) or stretched (size 1 in shape). */
  int64_t mask = 0;
  int off = g->ndim - ndim;
  for (int d = 0; d < g->ndim; d++) {
    int sd = d - off;
    if (sd < 0 || (shape[sd] == 1 && g->shape[d] != 1)) mask |= (int64_t)1 << d;
  }
  lt_node *s = mask ? lt__node_reduce(LT_OP_SUM, g, mask, true) : g;
  return lt__node_reshape(s, shape, ndim);
}

lt_node *lt__ag_expand(lt_node *a, const int64_t *shape, int ndim) {
  if (!a) return NULL;
  if (a->ndim == ndim && memcmp(a->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0) return a;
  if (a->op == LT_OP_CONST) {
    lt_node *c = lt__node_const((lt_dtype)a->dtype, shape, ndim, a->fattr);
    lt__node_release(a);
    return c;
  }
  return lt__node_make(LT_OP_EXPAND, (lt_dtype)a->dtype, shape, ndim, &a, 1, NULL, 0, 0.0);
}

int lt__ag_rule_none(const lt_node *n, lt_node *g, lt_node **out) {
  (void)n;
  (void)g;
  (void)out;
  return LT_OK;
}
