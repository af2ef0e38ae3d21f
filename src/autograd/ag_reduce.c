/* Gradient rules of the reductions (sum, mean, max, min, prod, logsumexp over
 * an axis set; softmax and log_softmax along one axis; argmax and argmin have
 * none).
 *
 * An axis-set reduction's output may have its reduced axes removed (keepdim
 * off). Every rule first reshapes g (and, where used, the output) to the
 * keepdim shape, where the reduced axes are 1, and lets broadcasting against
 * the operand spread it over each reduced group. */
#include "../core/lt_op_switch.h"
#include "ag.h"

#define A(n) ag_arg(n, 0)
#define G(g) ag_ref(g)
#define K(n, v) lt__ag_const((lt_dtype)(n)->dtype, NULL, 0, (v)) /* a 0-d constant */

static const lt_node *operand(const lt_node *n) { return n->operands[0].node; }

static int done1(lt_node **out, lt_node *ga) {
  out[0] = ga;
  return ga ? LT_OK : LT_ENOMEM;
}

/* The operand's shape with the axes of mask set to 1. */
static void keep_shape(const lt_node *n, int64_t mask, int64_t *shape) {
  const lt_node *a = operand(n);
  for (int d = 0; d < a->ndim; d++) shape[d] = (mask >> d) & 1 ? 1 : a->shape[d];
}

/* x (consumed; the node's output shape) seen with keepdim. */
static lt_node *as_keep(const lt_node *n, lt_node *x) {
  int64_t shape[LT_MAX_DIMS];
  keep_shape(n, n->attrs[0], shape);
  return lt__node_reshape(x, shape, operand(n)->ndim);
}

/* x (consumed) broadcast to the operand's shape. */
static lt_node *to_operand(const lt_node *n, lt_node *x) {
  return lt__ag_expand(x, operand(n)->shape, operand(n)->ndim);
}

/* Elements per reduced group. */
static int64_t group_size(const lt_node *n) {
  const lt_node *a = operand(n);
  int64_t c = 1;
  for (int d = 0; d < a->ndim; d++)
    if ((n->attrs[0] >> d) & 1) c *= a->shape[d];
  return c;
}

/* The product over the groups of mask with keepdim. */
static lt_node *prod_keep(lt_node *x, int64_t mask) {
  if (!x) return NULL;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) shape[d] = (mask >> d) & 1 ? 1 : x->shape[d];
  int64_t attrs[2] = {mask, 1};
  return lt__node_make(LT_OP_PROD, (lt_dtype)x->dtype, shape, x->ndim, &x, 1, attrs, 2, 0.0);
}

/* 1 where cond holds, else 0, in the node's dtype (cond consumed). */
static lt_node *indicator(const lt_node *n, lt_node *cond) {
  return lt__node_where(cond, K(n, 1), K(n, 0));
}

int lt__ag_rule_reduce(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n);
  int64_t mask = n->attrs[0];
  /* Nothing reduced (a 0-d operand): every op is the identity there. */
  if (mask == 0) return done1(out, lt__node_reshape(G(g), a->shape, a->ndim));
  /* An empty operand has an empty gradient: no division by its group size. */
  if (lt__numel(a->shape, a->ndim) == 0)
    return done1(out, lt__ag_const((lt_dtype)a->dtype, a->shape, a->ndim, 0.0));
  lt_node *gk = as_keep(n, G(g));
  switch ((lt_op)n->op) {
  case LT_OP_SUM:
    return done1(out, to_operand(n, gk));
  case LT_OP_MEAN:
    return done1(out,
                 to_operand(n, lt__node_bin(LT_OP_MUL, gk, K(n, 1.0 / (double)group_size(n)))));
  case LT_OP_MAX:
  case LT_OP_MIN: {
    /* PyTorch's amax/amin: g split evenly among the elements equal to the
     * result (a NaN result matches none, so its group gets zeros). */
    lt_node *hit = lt__node_bin(LT_OP_EQ, A(n), as_keep(n, ag_ref(n)));
    lt_node *count = lt__node_reduce(LT_OP_SUM, indicator(n, ag_ref(hit)), mask, true);
    return done1(out, lt__node_where(hit, lt__node_bin(LT_OP_DIV, gk, count), K(n, 0)));
  }
  case LT_OP_PROD: {
    /* d out / d a_i = the product of the others. With z zeros in a group and
     * p the product of its non-zero elements: z = 0 gives p / a_i, z = 1 gives
     * p at the zero and 0 elsewhere, z >= 2 gives 0 everywhere. */
    lt_node *zero = lt__node_bin(LT_OP_EQ, A(n), K(n, 0));
    lt_node *nzero = lt__node_reduce(LT_OP_SUM, indicator(n, ag_ref(zero)), mask, true);
    lt_node *p = prod_keep(lt__node_where(ag_ref(zero), K(n, 1), A(n)), mask);
    lt_node *at_zero =
        lt__node_where(lt__node_bin(LT_OP_EQ, ag_ref(nzero), K(n, 1)), ag_ref(p), K(n, 0));
    lt_node *elsewhere = lt__node_where(
        lt__node_bin(LT_OP_EQ, nzero, K(n, 0)),
        lt__node_bin(LT_OP_DIV, p, lt__node_where(ag_ref(zero), K(n, 1), A(n))), K(n, 0));
    return done1(out, lt__node_bin(LT_OP_MUL, gk, lt__node_where(zero, at_zero, elsewhere)));
  }
  case LT_OP_LOGSUMEXP:
    return done1(
        out,
        lt__node_bin(LT_OP_MUL, gk,
                     lt__node_un(LT_OP_EXP, lt__node_bin(LT_OP_SUB, A(n), as_keep(n, ag_ref(n))))));
  case LT_OP_ARGMAX: /* no gradient, or rules of their own (lt__ag_rule_softmax, lt__ag_rule_scan)
                      */
  case LT_OP_ARGMIN:
  case LT_OP_SOFTMAX:
  case LT_OP_LOG_SOFTMAX:
  case LT_OP_CUMSUM:
  case LT_OP_ARGSORT:
    LT_OP_CASES_OUTSIDE(REDUCE)
    break;
  }
  lt__node_release(gk);
  return lt__err(LT_EINVAL, "lt_backward: the reduce gradient rule has no case for op %s",
                 lt__op_name((lt_op)n->op));
}

/* torch's softmax and log_softmax backward kernels: for bf16, computed in
 * f32 from the bf16 output and rounded once; along the last axis (its
 * vectorized kernel) the row sum is rounded to bf16 first, along any other
 * axis it is not (both matched against torch 1.13). */
int lt__ag_rule_softmax(const lt_node *n, lt_node *g, lt_node **out) {
  int64_t axis = (int64_t)1 << n->attrs[0];
  lt_dtype dt = (lt_dtype)n->dtype;
  /* the dtype the row sum is rounded to: the result's along the last axis */
  lt_dtype sum_dt = n->attrs[0] == n->ndim - 1 ? dt : lt__ag_wide_dtype(dt);
  lt_node *ga;
  if (n->op == LT_OP_SOFTMAX) { /* out * (g - sum(g * out)) */
    lt_node *s = lt__node_reduce(
        LT_OP_SUM, lt__node_bin(LT_OP_MUL, lt__ag_widen(G(g)), lt__ag_widen(ag_ref(n))), axis,
        true);
    s = lt__ag_widen(lt__ag_narrow(s, sum_dt));
    ga = lt__node_bin(LT_OP_MUL, lt__ag_widen(ag_ref(n)),
                      lt__node_bin(LT_OP_SUB, lt__ag_widen(G(g)), s));
  } else { /* g - exp(out) * sum(g) */
    lt_node *s = lt__node_reduce(LT_OP_SUM, lt__ag_widen(G(g)), axis, true);
    s = lt__ag_widen(lt__ag_narrow(s, sum_dt));
    ga = lt__node_bin(LT_OP_SUB, lt__ag_widen(G(g)),
                      lt__node_bin(LT_OP_MUL, lt__node_un(LT_OP_EXP, lt__ag_widen(ag_ref(n))), s));
  }
  return done1(out, lt__ag_narrow(ga, dt));
}
