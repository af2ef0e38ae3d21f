/* Elementwise op builders: unary, binary arithmetic, comparisons, logical ops,
 * where, cast and clamp. Each builder validates its operands, casts them to the
 * compute dtype (lt__ir_as) and records one node; broadcasting is implicit in
 * binary nodes (the node has the broadcast shape, operands keep their own).
 *
 * dtype rules (PyTorch's, with the simplifications documented in lazytensor.h):
 *  - binary arithmetic: operands promoted with lt__promote; div of bool/int
 *    operands is true division in f32; bool - bool and bool ** bool are
 *    LT_EDTYPE errors; bool + bool and bool * bool give bool ((a op b) != 0).
 *  - neg of bool is LT_EDTYPE; abs/sign/relu/floor/ceil/round keep the dtype
 *    (floor/ceil/round of bool and ints, and abs/relu of bool, are identities
 *    that still return a new tensor).
 *  - floating unary ops (exp ... erf) give f32 for bool/int inputs.
 *  - comparisons promote the operands, then give bool.
 *  - logical and/or read both operands as bool (non-zero is true, NaN too).
 *  - pow of ints stays int; a negative exponent gives the truncated 1 / a^-b:
 *    1 for a == 1, +-1 for a == -1, 0 otherwise (also for a == 0), as PyTorch. */
#include <math.h>
#include <stdint.h>

#include "lt_ops.h"

/* ---- unary ----------------------------------------------------------------- */

/* A NODE row's DTYPE column of LT_UNARY_OPS, UK_<DTYPE>. */
typedef enum unary_kind {
  UK_KEEP,     /* result keeps the input dtype (abs, sign, relu) */
  UK_INTEGRAL, /* identity on bool/int inputs (floor, ceil, round) */
  UK_FLOAT,    /* floating op: bool/int inputs become f32 */
} unary_kind;

static lt_tensor *unary_local(const char *fn, lt_op op, unary_kind kind, lt_tensor *a);

/* Elementwise builders propagate shardings (op_shard.c): the result is
 * sharded as its operands once they are brought to one layout. */
static lt_tensor *unary(const char *fn, lt_op op, unary_kind kind, lt_tensor *a) {
  lt_shard_ctx c;
  if (lt__shard_elementwise(fn, &a, 1, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, unary_local(fn, op, kind, a));
}

static lt_tensor *unary_local(const char *fn, lt_op op, unary_kind kind, lt_tensor *a) {
  lt_tensor *ts[1] = {a};
  if (lt__check_operands(fn, ts, 1) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)a->dtype;
  if (kind == UK_FLOAT && !lt__is_float(dt)) dt = LT_F32;
  /* Rounding an integer (or bool) is the integer itself; so is abs/relu of a
   * bool. The result is a new tensor over the same value. */
  bool identity = (kind == UK_INTEGRAL && !lt__is_float(dt)) ||
                  (dt == LT_BOOL && (op == LT_OP_ABS || op == LT_OP_RELU || op == LT_OP_SIGN));
  lt_node *x = lt__ir_as(a, dt);
  if (identity) return lt__wrap(a->dev, x);
  return lt__make(a->dev, op, dt, a->shape, a->ndim, &x, 1, NULL, 0, 0.0);
}

lt_tensor *lt_neg(lt_tensor *a) {
  if (a && a->dtype == LT_BOOL) {
    lt_tensor *ts[1] = {a};
    if (lt__check_operands("lt_neg", ts, 1) != LT_OK) return NULL;
    lt__err(LT_EDTYPE, "lt_neg: negation of a bool tensor is not supported (use lt_logical_not)");
    return NULL;
  }
  return unary("lt_neg", LT_OP_NEG, UK_KEEP, a);
}

/* The rows of LT_UNARY_OPS built as one IR node (BUILD NODE): one builder
 * each, generated; the OWN rows have builders of their own (lt_neg above,
 * lt_logical_not below, lt_isnan ... in op_composite.c). */
#define UNARY_BUILDER_NODE(name, ir, dtype) \
  lt_tensor *lt_##name(lt_tensor *a) { return unary("lt_" #name, LT_OP_##ir, UK_##dtype, a); }
#define UNARY_BUILDER_OWN(name, ir, dtype)
#define UNARY_BUILDER(name, build, ir, dtype, ...) UNARY_BUILDER_##build(name, ir, dtype)
LT_UNARY_OPS(UNARY_BUILDER)

/* Logical not reads its operand in its own dtype (non-zero is true). */
static lt_tensor *logical_not_local(lt_tensor *a);

lt_tensor *lt_logical_not(lt_tensor *a) {
  lt_shard_ctx c;
  if (lt__shard_elementwise("lt_logical_not", &a, 1, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, logical_not_local(a));
}

static lt_tensor *logical_not_local(lt_tensor *a) {
  lt_tensor *ts[1] = {a};
  if (lt__check_operands("lt_logical_not", ts, 1) != LT_OK) return NULL;
  lt_node *x = lt__ir_as(a, (lt_dtype)a->dtype);
  return lt__make(a->dev, LT_OP_NOT, LT_BOOL, a->shape, a->ndim, &x, 1, NULL, 0, 0.0);
}

static lt_tensor *cast_local(lt_tensor *a, lt_dtype dt);

lt_tensor *lt_cast(lt_tensor *a, lt_dtype dt) {
  lt_shard_ctx c;
  if (lt__shard_elementwise("lt_cast", &a, 1, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, cast_local(a, dt));
}

static lt_tensor *cast_local(lt_tensor *a, lt_dtype dt) {
  lt_tensor *ts[1] = {a};
  if (lt__check_operands("lt_cast", ts, 1) != LT_OK) return NULL;
  if (!lt__dtype_valid(dt)) {
    lt__err(LT_EDTYPE, "lt_cast: invalid dtype %d", (int)dt);
    return NULL;
  }
  /* lt__ir_as inserts the CAST node (or returns the value when dt is a's). */
  return lt__wrap(a->dev, lt__ir_as(a, dt));
}

/* ---- binary ------------------------------------------------------------------ */

/* Broadcast shape of a and b into shape/ndim; LT_OK or the recorded error. */
static int bcast2(const char *fn, const lt_tensor *a, const lt_tensor *b, int64_t *shape,
                  int *ndim) {
  return lt__broadcast(fn, a->shape, a->ndim, b->shape, b->ndim, shape, ndim);
}

static lt_tensor *binary_local(const char *fn, lt_op op, lt_tensor *a, lt_tensor *b);

static lt_tensor *binary(const char *fn, lt_op op, lt_tensor *a, lt_tensor *b) {
  lt_shard_ctx c;
  lt_tensor *ts[2] = {a, b};
  if (lt__shard_elementwise(fn, ts, 2, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, binary_local(fn, op, ts[0], ts[1]));
}

static lt_tensor *binary_local(const char *fn, lt_op op, lt_tensor *a, lt_tensor *b) {
  lt_tensor *ts[2] = {a, b};
  if (lt__check_operands(fn, ts, 2) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  if (bcast2(fn, a, b, shape, &ndim) != LT_OK) return NULL;

  lt_dtype compute = lt__promote((const lt_tensor *const *)ts, 2);
  lt_dtype result = compute;
  switch (op) {
  case LT_OP_SUB:
    if (compute == LT_BOOL) {
      lt__err(LT_EDTYPE, "%s: subtraction of bool tensors is not supported (cast first)", fn);
      return NULL;
    }
    break;
  case LT_OP_POW:
    if (compute == LT_BOOL) {
      lt__err(LT_EDTYPE, "%s: bool ** bool is not supported (cast to an integer dtype first)", fn);
      return NULL;
    }
    break;
  case LT_OP_DIV:
    /* True division: bool and integer operands divide in f32. */
    if (!lt__is_float(compute)) compute = result = LT_F32;
    break;
  case LT_OP_EQ:
  case LT_OP_NE:
  case LT_OP_LT:
  case LT_OP_LE:
  case LT_OP_GT:
  case LT_OP_GE:
    result = LT_BOOL;
    break;
  case LT_OP_AND:
  case LT_OP_OR:
    /* Truthiness is exact in bool (promotion could flush a tiny f64 to 0 in f32). */
    compute = result = LT_BOOL;
    break;
  default:
    break;
  }
  lt_node *x[2] = {lt__ir_as(a, compute), lt__ir_as(b, compute)};
  return lt__make(a->dev, op, result, shape, ndim, x, 2, NULL, 0, 0.0);
}

/* The rows of LT_BINARY_OPS built as one IR node (BUILD NODE), generated;
 * lt_remainder, lt_floor_divide (op_composite.c) and lt_matmul
 * (op_matmul.c) have builders of their own. */
#define BINARY_BUILDER_NODE(name, ir) \
  lt_tensor *lt_##name(lt_tensor *a, lt_tensor *b) { return binary("lt_" #name, LT_OP_##ir, a, b); }
#define BINARY_BUILDER_OWN(name, ir)
#define BINARY_BUILDER(name, build, ir, ...) BINARY_BUILDER_##build(name, ir)
LT_BINARY_OPS(BINARY_BUILDER)

/* ---- where ------------------------------------------------------------------- */

static lt_tensor *where_local(lt_tensor *cond, lt_tensor *a, lt_tensor *b);

lt_tensor *lt_where(lt_tensor *cond, lt_tensor *a, lt_tensor *b) {
  lt_shard_ctx c;
  lt_tensor *ts[3] = {cond, a, b};
  if (lt__shard_elementwise("lt_where", ts, 3, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, where_local(ts[0], ts[1], ts[2]));
}

static lt_tensor *where_local(lt_tensor *cond, lt_tensor *a, lt_tensor *b) {
  lt_tensor *ts[3] = {cond, a, b};
  if (lt__check_operands("lt_where", ts, 3) != LT_OK) return NULL;
  int64_t s1[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  int n1 = 0, ndim = 0;
  if (bcast2("lt_where", cond, a, s1, &n1) != LT_OK) return NULL;
  if (lt__broadcast("lt_where", s1, n1, b->shape, b->ndim, shape, &ndim) != LT_OK) return NULL;
  lt_dtype dt = lt__promote((const lt_tensor *const *)&ts[1], 2);
  lt_node *x[3] = {lt__ir_as(cond, LT_BOOL), lt__ir_as(a, dt), lt__ir_as(b, dt)};
  return lt__make(a->dev, LT_OP_WHERE, dt, shape, ndim, x, 3, NULL, 0, 0.0);
}

/* ---- clamp ------------------------------------------------------------------- */

/* Turns bound v of an integer dtype into a value that dtype holds exactly
 * (truncated toward zero, as a cast would, and saturated to the dtype's range).
 * Returns false when the bound cannot bind any value (it is no bound). */
static bool int_bound(lt_dtype dt, double v, bool lower, double *out) {
  /* The dtype's range (a bound outside must not wrap into it); the largest
   * value it holds as a double (i64: INT64_MAX rounds up to 2^63). */
  const lt_dtype_info *t = lt__dtype_info(dt);
  double lo = t->min_f64, top = t->max_f64;
  /* Largest double that converts to the dtype without overflow (i64: 2^63 - 1024). */
  double maxrep = top >= 9223372036854775808.0 ? nextafter(top, 0.0) : top;
  if (lower && v <= lo) return false;
  if (!lower && v >= top) return false;
  v = trunc(v);
  *out = v < lo ? lo : v > maxrep ? maxrep : v;
  return true;
}

/* A comparison or where node of x's shape (consumes the operands). */
static lt_node *clamp_node(lt_op op, lt_dtype dt, const lt_node *like, lt_node *a, lt_node *b,
                           lt_node *c) {
  lt_node *ops[3] = {a, b, c};
  return lt__node_make(op, dt, like->shape, like->ndim, ops, c ? 3 : 2, NULL, 0, 0.0);
}

/* One side of clamp, for the lower bound (or the upper): x where x >= bound
 * (x <= bound), else the bound where x < bound (x > bound), else NaN. Only
 * the first branch reads x, so the gradient is torch.clamp's: 1 inside and AT
 * the bound, 0 outside and at a NaN (maximum/minimum would split a tie in
 * half); a NaN element stays NaN (through the constant: NaN compares false
 * both ways). Integers have no NaN and no gradient: maximum/minimum. Consumes x. */
static lt_node *clamp_side(lt_device dev, lt_node *x, double bound, bool lower) {
  if (!x || isnan(bound)) return x;
  lt_dtype dt = (lt_dtype)x->dtype;
  if (lt__is_int(dt) && !int_bound(dt, bound, lower, &bound)) return x;
  lt_node *b = lt__scalar_node(dev, dt, bound);
  if (!b) {
    lt__node_release(x);
    return NULL;
  }
  if (lt__is_int(dt)) return clamp_node(lower ? LT_OP_MAXIMUM : LT_OP_MINIMUM, dt, x, x, b, NULL);
  lt_node *inside = clamp_node(lower ? LT_OP_GE : LT_OP_LE, LT_BOOL, x, lt__node_retain(x),
                               lt__node_retain(b), NULL);
  lt_node *outside = clamp_node(lower ? LT_OP_LT : LT_OP_GT, LT_BOOL, x, lt__node_retain(x),
                                lt__node_retain(b), NULL);
  lt_node *other = clamp_node(LT_OP_WHERE, dt, x, outside, b, lt__node_const(dt, NULL, 0, NAN));
  return clamp_node(LT_OP_WHERE, dt, x, inside, x, other);
}

/* min(max(a, lo), hi), as torch.clamp: with lo > hi every element becomes hi;
 * NaN elements stay NaN. Integer tensors get the bounds converted to their
 * dtype (truncated), so the result keeps a's dtype. */
lt_tensor *lt_clamp(lt_tensor *a, double lo, double hi) {
  lt_tensor *ts[1] = {a};
  if (lt__check_operands("lt_clamp", ts, 1) != LT_OK) return NULL;
  if (a->dtype == LT_BOOL) {
    lt__err(LT_EDTYPE, "lt_clamp: clamp of a bool tensor is not supported");
    return NULL;
  }
  lt_node *x = lt__ir_as(a, (lt_dtype)a->dtype);
  x = clamp_side(a->dev, x, lo, true);
  x = clamp_side(a->dev, x, hi, false);
  return lt__wrap(a->dev, x);
}
