/* Node helpers for the gradient rules. */
#include <string.h>

#include "ag.h"

lt_node *ag_const(lt_dtype dt, const int64_t *shape, int ndim, double v) {
  return lt__node_const(dt, shape, ndim, v);
}

lt_node *ag_un(lt_op op, lt_node *a) {
  if (!a) return NULL;
  return lt__node_make(op, (lt_dtype)a->dtype, a->shape, a->ndim, &a, 1, NULL, 0, 0.0);
}

lt_node *ag_bin(lt_op op, lt_node *a, lt_node *b) {
  if (!a || !b) {
    lt__node_release(a);
    lt__node_release(b);
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  if (lt__broadcast("lt_backward", a->shape, a->ndim, b->shape, b->ndim, shape, &ndim) != LT_OK) {
    lt__node_release(a);
    lt__node_release(b);
    return NULL;
  }
  b = lt__node_cast(b, (lt_dtype)a->dtype);
  lt_node *ops[2] = {a, b};
  lt_dtype dt = lt__op_result(op) == LT_RES_BOOL ? LT_BOOL : (lt_dtype)a->dtype;
  return lt__node_make(op, dt, shape, ndim, ops, 2, NULL, 0, 0.0);
}

lt_node *ag_where(lt_node *cond, lt_node *a, lt_node *b) {
  if (!cond || !a || !b) {
    lt__node_release(cond);
    lt__node_release(a);
    lt__node_release(b);
    return NULL;
  }
  int64_t s1[LT_MAX_DIMS], s2[LT_MAX_DIMS];
  int n1, n2;
  if (lt__broadcast("lt_backward", cond->shape, cond->ndim, a->shape, a->ndim, s1, &n1) ||
      lt__broadcast("lt_backward", s1, n1, b->shape, b->ndim, s2, &n2)) {
    lt__node_release(cond);
    lt__node_release(a);
    lt__node_release(b);
    return NULL;
  }
  lt_dtype dt = (lt_dtype)a->dtype;
  lt_node *ops[3] = {lt__node_cast(cond, LT_BOOL), a, lt__node_cast(b, dt)};
  return lt__node_make(LT_OP_WHERE, dt, s2, n2, ops, 3, NULL, 0, 0.0);
}

lt_node *ag_sum_keep(lt_node *a, int64_t mask) {
  if (!a) return NULL;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) shape[d] = (mask >> d) & 1 ? 1 : a->shape[d];
  int64_t attrs[2] = {mask, 1};
  return lt__node_make(LT_OP_SUM, (lt_dtype)a->dtype, shape, a->ndim, &a, 1, attrs, 2, 0.0);
}

lt_node *ag_reduce_to(lt_node *g, const int64_t *shape, int ndim) {
  if (!g) return NULL;
  if (g->ndim == ndim && memcmp(g->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0) return g;
  /* Axes that broadcasting added (leading) or stretched (size 1 in shape). */
  int64_t mask = 0;
  int off = g->ndim - ndim;
  for (int d = 0; d < g->ndim; d++) {
    int sd = d - off;
    if (sd < 0 || (shape[sd] == 1 && g->shape[d] != 1)) mask |= (int64_t)1 << d;
  }
  lt_node *s = mask ? ag_sum_keep(g, mask) : g;
  return lt__node_reshape(s, shape, ndim);
}

lt_node *ag_expand(lt_node *a, const int64_t *shape, int ndim) {
  if (!a) return NULL;
  if (a->ndim == ndim && memcmp(a->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0) return a;
  if (a->op == LT_OP_CONST) {
    lt_node *c = lt__node_const((lt_dtype)a->dtype, shape, ndim, a->fattr);
    lt__node_release(a);
    return c;
  }
  return lt__node_make(LT_OP_EXPAND, (lt_dtype)a->dtype, shape, ndim, &a, 1, NULL, 0, 0.0);
}

int ag_rule_none(const lt_node *n, lt_node *g, lt_node **out) {
  (void)n;
  (void)g;
  (void)out;
  return LT_OK;
}
