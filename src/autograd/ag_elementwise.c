/* Gradient rules of the elementwise ops. Binary ops broadcast, so each
 * operand's gradient is summed back to its own shape (lt__ag_reduce_to). */
#include <math.h>

#include "../core/lt_op_switch.h"
#include "ag.h"

#define A(n) ag_arg(n, 0)
#define B(n) ag_arg(n, 1)
#define G(g) ag_ref(g)
#define OUT(n) ag_ref(n)
#define K(n, v) lt__ag_const((lt_dtype)(n)->dtype, NULL, 0, (v)) /* a 0-d constant */
/* The same, widened: for the rules of torch's fused kernels (ag.h) */
#define WA(n) lt__ag_widen(A(n))
#define WG(g) lt__ag_widen(G(g))
#define WOUT(n) lt__ag_widen(OUT(n))
#define WK(n, v) lt__ag_const(lt__ag_wide_dtype((lt_dtype)(n)->dtype), NULL, 0, (v))

static lt_node *shape_of(lt_node *x, const lt_node *like) {
  return lt__ag_reduce_to(x, like->operands[0].node->shape, like->operands[0].node->ndim);
}

static int done1(lt_node **out, lt_node *ga) {
  out[0] = ga;
  return ga ? LT_OK : LT_ENOMEM;
}

/* Unary rules: gradient of the operand as a function of g, the operand a and
 * the output. The switch lists every lt_op (lt_op_switch.h): a unary row
 * added to the table without a case here fails the build; any other op that
 * arrives sets *no_case. */
static lt_node *unary_grad(const lt_node *n, lt_node *g, bool *no_case) {
  switch ((lt_op)n->op) {
  case LT_OP_NEG:
    return lt__node_un(LT_OP_NEG, G(g));
  case LT_OP_ABS:
    return lt__node_bin(LT_OP_MUL, G(g), lt__node_un(LT_OP_SIGN, A(n)));
  case LT_OP_SIGN:
  case LT_OP_FLOOR:
  case LT_OP_CEIL:
  case LT_OP_ROUND:
    return lt__ag_const((lt_dtype)n->dtype, n->shape, n->ndim, 0.0);
  case LT_OP_RELU: /* 0 at 0, as PyTorch */
    return lt__node_where(lt__node_bin(LT_OP_GT, A(n), K(n, 0)), G(g), K(n, 0));
  case LT_OP_EXP:
    return lt__node_bin(LT_OP_MUL, G(g), OUT(n));
  case LT_OP_LOG:
    return lt__node_bin(LT_OP_DIV, G(g), A(n));
  case LT_OP_LOG1P:
    return lt__node_bin(LT_OP_DIV, G(g), lt__node_bin(LT_OP_ADD, A(n), K(n, 1)));
  case LT_OP_SQRT:
    return lt__node_bin(LT_OP_DIV, G(g), lt__node_bin(LT_OP_MUL, OUT(n), K(n, 2)));
  case LT_OP_RSQRT: /* -x^(-3/2) / 2 = -out^3 / 2 */
    return lt__node_bin(
        LT_OP_MUL, G(g),
        lt__node_bin(LT_OP_MUL,
                     lt__node_bin(LT_OP_MUL, OUT(n), lt__node_bin(LT_OP_MUL, OUT(n), OUT(n))),
                     K(n, -0.5)));
  case LT_OP_SIN:
    return lt__node_bin(LT_OP_MUL, G(g), lt__node_un(LT_OP_COS, A(n)));
  case LT_OP_COS:
    return lt__node_un(LT_OP_NEG, lt__node_bin(LT_OP_MUL, G(g), lt__node_un(LT_OP_SIN, A(n))));
  case LT_OP_TANH: /* torch's tanh_backward: g (1 - y^2) in f32 for bf16, one rounding */
    return lt__ag_narrow(
        lt__node_bin(LT_OP_MUL, WG(g),
                     lt__node_bin(LT_OP_SUB, WK(n, 1), lt__node_bin(LT_OP_MUL, WOUT(n), WOUT(n)))),
        (lt_dtype)n->dtype);
  case LT_OP_SIGMOID: /* torch's sigmoid_backward, as tanh's */
    return lt__ag_narrow(
        lt__node_bin(LT_OP_MUL, WG(g),
                     lt__node_bin(LT_OP_MUL, WOUT(n), lt__node_bin(LT_OP_SUB, WK(n, 1), WOUT(n)))),
        (lt_dtype)n->dtype);
  case LT_OP_GELU: { /* Phi(x) + x phi(x): torch's gelu_backward, as tanh's */
    lt_node *cdf = lt__node_bin(
        LT_OP_MUL, WK(n, 0.5),
        lt__node_bin(LT_OP_ADD, WK(n, 1),
                     lt__node_un(LT_OP_ERF, lt__node_bin(LT_OP_MUL, WA(n), WK(n, M_SQRT1_2)))));
    lt_node *pdf = lt__node_bin(
        LT_OP_MUL, WK(n, 0.5 * M_2_SQRTPI * M_SQRT1_2),
        lt__node_un(LT_OP_EXP,
                    lt__node_bin(LT_OP_MUL, lt__node_bin(LT_OP_MUL, WA(n), WA(n)), WK(n, -0.5))));
    return lt__ag_narrow(
        lt__node_bin(LT_OP_MUL, WG(g),
                     lt__node_bin(LT_OP_ADD, cdf, lt__node_bin(LT_OP_MUL, WA(n), pdf))),
        (lt_dtype)n->dtype);
  }
  case LT_OP_GELU_TANH: {
    /* With u = b (x + k x^3), t = tanh(u): (1 + t) / 2 + x/2 (1 - t^2) b (1 + 3 k x^2). Built
     * from primitives, so its own gradient (second order) follows. torch 1.13's kernel works in
     * the dtype itself, bf16 included (its constants rounded to it, every op rounding): the
     * nodes follow its order of operations so that bf16 rounds where torch does. */
    const double b = 0.7978845608028654, k = 0.044715;
    lt_node *x2 = lt__node_bin(LT_OP_MUL, A(n), A(n));
    lt_node *x3 = lt__node_bin(LT_OP_MUL, lt__node_retain(x2), A(n));
    lt_node *u = lt__node_bin(LT_OP_MUL, K(n, b),
                              lt__node_bin(LT_OP_ADD, A(n), lt__node_bin(LT_OP_MUL, K(n, k), x3)));
    lt_node *t = lt__node_un(LT_OP_TANH, u);
    lt_node *left = lt__node_bin(LT_OP_MUL, K(n, 0.5), A(n));
    lt_node *left_d =
        lt__node_bin(LT_OP_MUL, K(n, 0.5), lt__node_bin(LT_OP_ADD, K(n, 1), lt__node_retain(t)));
    lt_node *tanh_d =
        lt__node_bin(LT_OP_SUB, K(n, 1), lt__node_bin(LT_OP_MUL, lt__node_retain(t), t));
    lt_node *three_k = lt__node_bin(LT_OP_MUL, K(n, 3), K(n, k)); /* rounded as torch's */
    lt_node *inner_d = lt__node_bin(
        LT_OP_MUL, K(n, b), lt__node_bin(LT_OP_ADD, K(n, 1), lt__node_bin(LT_OP_MUL, three_k, x2)));
    lt_node *right_d = lt__node_bin(LT_OP_MUL, lt__node_bin(LT_OP_MUL, left, tanh_d), inner_d);
    return lt__node_bin(LT_OP_MUL, G(g), lt__node_bin(LT_OP_ADD, left_d, right_d));
  }
  case LT_OP_ERF: /* 2/sqrt(pi) exp(-x^2) */
    return lt__node_bin(
        LT_OP_MUL, G(g),
        lt__node_bin(
            LT_OP_MUL, K(n, M_2_SQRTPI),
            lt__node_un(LT_OP_EXP, lt__node_un(LT_OP_NEG, lt__node_bin(LT_OP_MUL, A(n), A(n))))));
  case LT_OP_SOFTSIGN: { /* 1 / (1 + |x|)^2 (torch's: 1 at 0, where abs' gradient is 0) */
    lt_node *d = lt__node_bin(LT_OP_ADD, K(n, 1), lt__node_un(LT_OP_ABS, A(n)));
    return lt__node_bin(LT_OP_DIV, G(g), lt__node_bin(LT_OP_MUL, d, lt__node_retain(d)));
  }
  case LT_OP_NOT:  /* no gradient (the table says none) */
  case LT_OP_CAST: /* lt__ag_rule_cast */
    LT_OP_CASES_OUTSIDE(UNARY)
    break;
  }
  *no_case = true;
  return NULL;
}

/* A rule reached by an op it has no case for (a table row naming the wrong
 * rule): an error naming the op, not an empty out-of-memory. */
static int rule_has_no_case(const char *rule, const lt_node *n) {
  return lt__err(LT_EINVAL, "lt_backward: the %s gradient rule has no case for op %s", rule,
                 lt__op_name((lt_op)n->op));
}

int lt__ag_rule_unary(const lt_node *n, lt_node *g, lt_node **out) {
  bool no_case = false;
  lt_node *ga = unary_grad(n, g, &no_case);
  if (no_case) return rule_has_no_case("unary", n);
  return done1(out, ga);
}

int lt__ag_rule_cast(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = n->operands[0].node;
  if (!ag_is_float(a)) return LT_OK; /* no gradient into integers */
  return done1(out, lt__node_cast(G(g), (lt_dtype)a->dtype));
}

static int finish2(const lt_node *n, lt_node **out, lt_node *ga, lt_node *gb) {
  out[0] = ga ? shape_of(ga, n) : NULL;
  out[1] = gb ? lt__ag_reduce_to(gb, n->operands[1].node->shape, n->operands[1].node->ndim) : NULL;
  return out[0] && out[1] ? LT_OK : LT_ENOMEM;
}

/* PyTorch's maximum/minimum: where(a == b, g / 2, g), then 0 where the other
 * operand wins (loses: the mask). A NaN compares false both ways, so with a
 * NaN in either operand both operands get all of g, as in PyTorch. */
static lt_node *pick(lt_node *g, lt_node *loses, lt_node *tie, const lt_node *n) {
  return lt__node_where(loses, K(n, 0),
                        lt__node_where(tie, lt__node_bin(LT_OP_MUL, G(g), K(n, 0.5)), G(g)));
}

int lt__ag_rule_binary(const lt_node *n, lt_node *g, lt_node **out) {
  switch ((lt_op)n->op) {
  case LT_OP_ADD:
    return finish2(n, out, G(g), G(g));
  case LT_OP_SUB:
    return finish2(n, out, G(g), lt__node_un(LT_OP_NEG, G(g)));
  case LT_OP_MUL:
    return finish2(n, out, lt__node_bin(LT_OP_MUL, G(g), B(n)),
                   lt__node_bin(LT_OP_MUL, G(g), A(n)));
  case LT_OP_DIV:
    /* d/db = -g (out / b): torch's order of operations, each rounding in bf16 as in torch */
    return finish2(n, out, lt__node_bin(LT_OP_DIV, G(g), B(n)),
                   lt__node_bin(LT_OP_MUL, lt__node_un(LT_OP_NEG, G(g)),
                                lt__node_bin(LT_OP_DIV, OUT(n), B(n))));
  case LT_OP_POW: {
    /* d/da = b a^(b-1); d/db = out log a, taken as 0 where a == 0 (as PyTorch); both in
     * torch's order of operations, each rounding in bf16 as in torch */
    lt_node *ga = lt__node_bin(
        LT_OP_MUL, G(g),
        lt__node_bin(LT_OP_MUL, B(n),
                     lt__node_bin(LT_OP_POW, A(n), lt__node_bin(LT_OP_SUB, B(n), K(n, 1)))));
    lt_node *gb =
        lt__node_where(lt__node_bin(LT_OP_EQ, A(n), K(n, 0)), K(n, 0),
                       lt__node_bin(LT_OP_MUL, G(g),
                                    lt__node_bin(LT_OP_MUL, OUT(n), lt__node_un(LT_OP_LOG, A(n)))));
    return finish2(n, out, ga, gb);
  }
  case LT_OP_FMOD: {
    /* d/da = 1, d/db = -n for the exact truncated quotient n = (a - out) / b
     * (an integer up to rounding, hence the ROUND): torch's trunc(a / b)
     * where that is exact, and what makes remainder's d/db torch's
     * -floor_divide(a, b) everywhere (op_composite.c). */
    lt_node *n_q = lt__node_un(
        LT_OP_ROUND, lt__node_bin(LT_OP_DIV, lt__node_bin(LT_OP_SUB, A(n), OUT(n)), B(n)));
    return finish2(n, out, G(g), lt__node_un(LT_OP_NEG, lt__node_bin(LT_OP_MUL, G(g), n_q)));
  }
  case LT_OP_MAXIMUM:
  case LT_OP_MINIMUM: {
    lt_op a_loses = n->op == LT_OP_MAXIMUM ? LT_OP_LT : LT_OP_GT;
    lt_op b_loses = n->op == LT_OP_MAXIMUM ? LT_OP_GT : LT_OP_LT;
    lt_node *ga = pick(g, lt__node_bin(a_loses, A(n), B(n)), lt__node_bin(LT_OP_EQ, A(n), B(n)), n);
    lt_node *gb = pick(g, lt__node_bin(b_loses, A(n), B(n)), lt__node_bin(LT_OP_EQ, A(n), B(n)), n);
    return finish2(n, out, ga, gb);
  }
  case LT_OP_EQ: /* comparisons and logic: no gradient */
  case LT_OP_NE:
  case LT_OP_LT:
  case LT_OP_LE:
  case LT_OP_GT:
  case LT_OP_GE:
  case LT_OP_AND:
  case LT_OP_OR:
    return LT_OK;
    LT_OP_CASES_OUTSIDE_BINARY_COMPARE
    break;
  }
  return rule_has_no_case("binary", n);
}

int lt__ag_rule_where(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = n->operands[1].node, *b = n->operands[2].node;
  lt_node *ga = lt__node_where(ag_arg(n, 0), G(g), K(n, 0));
  lt_node *gb = lt__node_where(ag_arg(n, 0), K(n, 0), G(g));
  out[1] = lt__ag_reduce_to(ga, a->shape, a->ndim);
  out[2] = lt__ag_reduce_to(gb, b->shape, b->ndim);
  return out[1] && out[2] ? LT_OK : LT_ENOMEM;
}
