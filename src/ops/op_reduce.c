/* Reduction builders: sum, mean, max, min, prod, logsumexp over a set of axes;
 * argmax, argmin, softmax, log_softmax along one axis.
 *
 * Node layout (lt_node.h):
 *   SUM/MEAN/MAX/MIN/PROD/LOGSUMEXP: attrs[0] = bit mask of reduced input axes,
 *     attrs[1] = keepdim; node shape = output shape.
 *   ARGMAX/ARGMIN: attrs[0] = axis, attrs[1] = keepdim; i64 result.
 *   SOFTMAX/LOG_SOFTMAX: attrs[0] = axis; node shape = input shape.
 *
 * 0-d operands (as PyTorch): a 0-d tensor has one implicit axis, so an axis
 * argument of 0 or -1 is accepted (any other is out of range) and reducing it,
 * with or without keepdim, gives the value itself as a 0-d tensor. The axis-set
 * reductions record an empty mask then (every output element reduces exactly
 * one input element). The one-axis ops reshape the operand to [1], work on
 * axis 0 and come back to 0-d, so their nodes always carry a real axis. */
#include "lt_ops.h"
#include "op_autocast.h"

/* Normalises one axis for an operand of rank ndim. A 0-d operand accepts 0 and
 * -1 (its implicit axis), reported as axis 0. */
static int norm_axis(const char *fn, int axis, const lt_tensor *a, int *out) {
  if (a->ndim > 0) return lt__norm_axis(fn, axis, a->ndim, out);
  if (axis != 0 && axis != -1)
    return lt__err(LT_EINVAL, "%s: axis %d out of range for a tensor of rank 0 (only 0 or -1)", fn,
                   axis);
  *out = 0;
  return LT_OK;
}

/* Validates the axis set and returns the bit mask of reduced axes (all axes
 * when naxes == 0; 0 for a 0-d operand, which has no real axis). */
static int axes_mask(const char *fn, const lt_tensor *a, const int *axes, int naxes,
                     int64_t *mask) {
  if (naxes < 0 || (naxes > 0 && !axes))
    return lt__err(LT_EINVAL, "%s: bad axes argument (axes %s, naxes %d)", fn,
                   axes ? "given" : "NULL", naxes);
  *mask = 0;
  if (naxes == 0) {
    for (int d = 0; d < a->ndim; d++) *mask |= (int64_t)1 << d;
    return LT_OK;
  }
  /* seen tracks normalised axes, including the implicit one of a 0-d operand,
   * so that duplicates are caught there too (PyTorch rejects them as well). */
  int64_t seen = 0;
  for (int i = 0; i < naxes; i++) {
    int ax;
    int rc = norm_axis(fn, axes[i], a, &ax);
    if (rc != LT_OK) return rc;
    if (seen & ((int64_t)1 << ax))
      return lt__err(LT_EINVAL, "%s: axis %d appears more than once in the axes", fn, axes[i]);
    seen |= (int64_t)1 << ax;
  }
  *mask = a->ndim ? seen : 0;
  return LT_OK;
}

/* max/min/argmax/argmin have no value over nothing: fail when a reduced axis
 * is empty (PyTorch does too). */
static int check_nonempty(const char *fn, const lt_tensor *a, int64_t mask) {
  for (int d = 0; d < a->ndim; d++) {
    if ((mask & ((int64_t)1 << d)) && a->shape[d] == 0) {
      char sb[128];
      return lt__err(LT_ESHAPE, "%s: cannot reduce over axis %d of size 0 (shape %s)", fn, d,
                     lt__shape_str(a->shape, a->ndim, sb, sizeof sb));
    }
  }
  return LT_OK;
}

static lt_tensor *reduce_axes(const char *fn, lt_op op, lt_tensor *a, const int *axes, int naxes,
                              bool keepdim) {
  /* a sharded operand: local reductions plus spmd collectives (op_shard.c) */
  if (a && a->shard_n && lt__shard_aware_depth() == 0)
    return lt__shard_reduce(fn, op, a, axes, naxes, keepdim, reduce_axes);
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  lt_dtype in_dt = (lt_dtype)a->dtype;
  int64_t mask;
  if (axes_mask(fn, a, axes, naxes, &mask) != LT_OK) return NULL;

  /* Result dtype as PyTorch; the operand is cast to it (max/min keep theirs). */
  lt_dtype dt = in_dt;
  switch (op) {
  case LT_OP_SUM:
    dt = lt__is_float(in_dt) ? in_dt : LT_I64;
    break;
  case LT_OP_PROD: /* on autocast's f32 list */
    dt = lt__is_float(in_dt) ? lt__autocast_dtype(a->dev, LT_AUTOCAST_PROD, in_dt) : LT_I64;
    break;
  case LT_OP_MEAN:
    if (!lt__is_float(in_dt)) {
      lt__err(LT_EDTYPE, "%s: needs a floating dtype, got %s (as PyTorch)", fn,
              lt_dtype_name(in_dt));
      return NULL;
    }
    break;
  case LT_OP_LOGSUMEXP:
    dt = lt__is_float(in_dt) ? in_dt : LT_F32;
    break;
  case LT_OP_MAX:
  case LT_OP_MIN:
    if (check_nonempty(fn, a, mask) != LT_OK) return NULL;
    break;
  default:
    break;
  }

  int64_t shape[LT_MAX_DIMS];
  int ndim;
  lt__reduce_shape(a->shape, a->ndim, mask, keepdim, shape, &ndim);
  lt_node *x = lt__ir_as(a, dt);
  if (!x) return NULL;
  int64_t attrs[2] = {mask, keepdim ? 1 : 0};
  if (op == LT_OP_MEAN && dt == LT_BF16) {
    /* torch 1.13's bf16 mean is its sum, rounded to bf16, divided by the
     * count and rounded again (mean = sum / n in the result dtype) */
    int64_t count = 1;
    for (int d = 0; d < a->ndim; d++)
      if ((mask >> d) & 1) count *= a->shape[d];
    lt_node *sum = lt__node_make(LT_OP_SUM, dt, shape, ndim, &x, 1, attrs, 2, 0.0);
    return lt__wrap(a->dev,
                    lt__node_bin(LT_OP_DIV, sum, lt__node_const(dt, NULL, 0, (double)count)));
  }
  return lt__make(a->dev, op, dt, shape, ndim, &x, 1, attrs, 2, 0.0);
}

/* The rows of LT_REDUCE_OPS built as one IR node (BUILD NODE), generated;
 * lt_any and lt_all (op_composite.c) have builders of their own. */
#define REDUCE_BUILDER_NODE(name, ir)                                            \
  lt_tensor *lt_##name(lt_tensor *a, const int *axes, int naxes, bool keepdim) { \
    return reduce_axes("lt_" #name, LT_OP_##ir, a, axes, naxes, keepdim);        \
  }
#define REDUCE_BUILDER_OWN(name, ir)
#define REDUCE_BUILDER(name, build, ir) REDUCE_BUILDER_##build(name, ir)
LT_REDUCE_OPS(REDUCE_BUILDER)

/* The operand's IR as dtype dt, seen as [1] when a is 0-d (see top comment). */
static lt_node *one_axis_operand(lt_tensor *a, lt_dtype dt) {
  lt_node *x = lt__ir_as(a, dt);
  if (x && a->ndim == 0) x = lt__node_reshape(x, (const int64_t[]){1}, 1);
  return x;
}

static lt_tensor *arg_reduce(const char *fn, lt_op op, lt_tensor *a, int axis, bool keepdim) {
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int ax;
  if (norm_axis(fn, axis, a, &ax) != LT_OK) return NULL;
  if (check_nonempty(fn, a, (int64_t)1 << ax) != LT_OK) return NULL;

  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  if (a->ndim > 0) lt__reduce_shape(a->shape, a->ndim, (int64_t)1 << ax, keepdim, shape, &ndim);
  /* A 0-d operand runs as [1] with keepdim off, giving a 0-d index (always 0). */
  lt_node *x = one_axis_operand(a, (lt_dtype)a->dtype);
  if (!x) return NULL;
  int64_t attrs[2] = {ax, a->ndim > 0 && keepdim ? 1 : 0};
  return lt__make(a->dev, op, LT_I64, shape, ndim, &x, 1, attrs, 2, 0.0);
}

lt_tensor *lt_argmax(lt_tensor *a, int axis, bool keepdim) {
  return arg_reduce("lt_argmax", LT_OP_ARGMAX, a, axis, keepdim);
}
lt_tensor *lt_argmin(lt_tensor *a, int axis, bool keepdim) {
  return arg_reduce("lt_argmin", LT_OP_ARGMIN, a, axis, keepdim);
}

static lt_tensor *softmax_local(const char *fn, lt_op op, lt_tensor *a, int axis);

/* sharded operands: local along an unsplit axis, gathered along the split one */
static lt_tensor *softmax_like(const char *fn, lt_op op, lt_tensor *a, int axis) {
  lt_shard_ctx c;
  if (lt__shard_one_axis(fn, &a, axis, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, softmax_local(fn, op, a, axis));
}

static lt_tensor *softmax_local(const char *fn, lt_op op, lt_tensor *a, int axis) {
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int ax;
  if (norm_axis(fn, axis, a, &ax) != LT_OK) return NULL;
  lt_dtype dt = lt__is_float((lt_dtype)a->dtype) ? (lt_dtype)a->dtype : LT_F32;
  lt_node *x = one_axis_operand(a, dt);
  if (!x) return NULL;
  int64_t attrs[1] = {ax};
  const int64_t one[1] = {1};
  const int64_t *shape = a->ndim ? a->shape : one;
  int ndim = a->ndim ? a->ndim : 1;
  lt_node *y = lt__node_make(op, dt, shape, ndim, &x, 1, attrs, 1, 0.0);
  if (y && a->ndim == 0) y = lt__node_reshape(y, a->shape, 0);
  return lt__wrap(a->dev, y);
}

lt_tensor *lt_softmax(lt_tensor *a, int axis) {
  return softmax_like("lt_softmax", LT_OP_SOFTMAX, a, axis);
}
lt_tensor *lt_log_softmax(lt_tensor *a, int axis) {
  return softmax_like("lt_log_softmax", LT_OP_LOG_SOFTMAX, a, axis);
}
