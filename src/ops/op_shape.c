/* Shape ops: reshape, permute, transpose, expand, squeeze, unsqueeze, slice,
 * concat, stack, pad.
 *
 * Each op validates its arguments, then records one node whose layout is the
 * one documented in lt_node.h. Cases that leave the value unchanged (reshape
 * to the same shape, identity permutation, expand to the same shape, a slice
 * of everything, zero padding) reuse the operand's node: the result is still a
 * new tensor, only the graph stays smaller. Composite ops (transpose, squeeze,
 * unsqueeze, stack) are built from nodes, never from public calls. */
#include <stdint.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_ops.h"

/* Room for the text of a shape of LT_MAX_DIMS dims of up to 20 digits. */
#define SHAPE_STR 256

/* A new tensor on a's device that shares a's value (an identity op). */
static lt_tensor *same_value(lt_tensor *a) {
  return lt__wrap(a->dev, lt__ir_as(a, (lt_dtype)a->dtype));
}

/* A one-operand shape node over op (consumed) wrapped into a tensor on dev. A
 * constant operand folds into a constant of the new shape: every element of
 * the result is the same value. */
static lt_tensor *make_unary(lt_device dev, lt_op kind, lt_dtype dt, const int64_t *shape, int ndim,
                             lt_node *op, const int64_t *attrs, int nattrs) {
  if (op && op->op == LT_OP_CONST) {
    lt_node *c = lt__node_const(dt, shape, ndim, op->fattr);
    lt__node_release(op);
    return lt__wrap(dev, c);
  }
  return lt__make(dev, kind, dt, shape, ndim, &op, 1, attrs, nattrs, 0.0);
}

/* Records the common "wrong rank" failure. */
static lt_tensor *fail_rank(const char *fn, const char *what, int ndim) {
  lt__err(LT_EINVAL, "%s: %s rank %d outside [0, %d]", fn, what, ndim, LT_MAX_DIMS);
  return NULL;
}

/* ---- reshape ---------------------------------------------------------------------- */

static lt_tensor *reshape_local(lt_tensor *a, const int64_t *shape, int ndim);

/* Reshapes propagate shardings (op_shard.c): local when the split axis's
 * chunks stay the chunks of one axis of the new shape, else on the gathered
 * value. */
lt_tensor *lt_reshape(lt_tensor *a, const int64_t *shape, int ndim) {
  int64_t local[LT_MAX_DIMS];
  int t = lt__shard_reshape_axis(a, shape, ndim, local);
  lt_shard_ctx c;
  if (lt__shard_layout(&a, t, &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, reshape_local(a, c.aware && t >= 0 ? local : shape, ndim));
}

static lt_tensor *reshape_local(lt_tensor *a, const int64_t *shape, int ndim) {
  static const char *fn = "lt_reshape";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (ndim < 0 || ndim > LT_MAX_DIMS) return fail_rank(fn, "target", ndim);
  if (ndim > 0 && !shape) {
    lt__err(LT_EINVAL, "%s: shape is NULL", fn);
    return NULL;
  }

  char sa[SHAPE_STR], sb[SHAPE_STR];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(shape, ndim, sb, sizeof sb);

  /* At most one -1; every other dim >= 0. */
  int infer = -1;
  bool has_zero = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        lt__err(LT_ESHAPE, "%s: only one dim may be -1, got shape %s", fn, sb);
        return NULL;
      }
      infer = i;
    } else if (shape[i] < 0) {
      lt__err(LT_ESHAPE, "%s: invalid dim %lld in shape %s", fn, (long long)shape[i], sb);
      return NULL;
    } else if (shape[i] == 0) {
      has_zero = true;
    }
  }
  /* known = product of the given dims. A product that would overflow can never
   * match numel (nor give a valid shape), so it fails rather than overflow. */
  int64_t numel = lt__numel(a->shape, a->ndim);
  int64_t known = has_zero ? 0 : 1;
  for (int i = 0; i < ndim && known > 0; i++) {
    if (i == infer) continue;
    if (known > INT64_MAX / shape[i]) {
      lt__err(LT_ESHAPE, "%s: cannot reshape %s (%lld elements) into %s", fn, sa, (long long)numel,
              sb);
      return NULL;
    }
    known *= shape[i];
  }

  int64_t target[LT_MAX_DIMS];
  for (int i = 0; i < ndim; i++) target[i] = shape[i];
  if (infer >= 0) {
    /* As torch: with 0 known elements the -1 could be anything. */
    if (known == 0) {
      lt__err(LT_ESHAPE,
              "%s: cannot infer the -1 of shape %s for %s: the other dims hold 0 "
              "elements",
              fn, sb, sa);
      return NULL;
    }
    if (numel % known != 0) {
      lt__err(LT_ESHAPE, "%s: cannot reshape %s (%lld elements) into %s", fn, sa, (long long)numel,
              sb);
      return NULL;
    }
    target[infer] = numel / known;
  } else if (known != numel) {
    lt__err(LT_ESHAPE, "%s: cannot reshape %s (%lld elements) into %s (%lld elements)", fn, sa,
            (long long)numel, sb, (long long)known);
    return NULL;
  }
  /* An empty tensor takes any shape with a 0 in it, but not one whose other
   * dims exceed the size limit. */
  if (lt__check_size(fn, target, ndim) != LT_OK) return NULL;
  /* lt__node_reshape returns the operand itself when the shape is unchanged. */
  return lt__wrap(a->dev, lt__node_reshape(lt__ir_as(a, (lt_dtype)a->dtype), target, ndim));
}

/* ---- permute / transpose ------------------------------------------------------------- */

/* Validates perm (ndim entries, possibly negative) against a and writes the
 * normalised permutation into out. */
static int check_perm(const char *fn, const lt_tensor *a, const int *perm, int ndim, int64_t *out) {
  if (ndim != a->ndim) {
    char sa[SHAPE_STR];
    return lt__err(LT_EINVAL, "%s: permutation has %d entries for a tensor of shape %s", fn, ndim,
                   lt__shape_str(a->shape, a->ndim, sa, sizeof sa));
  }
  if (ndim > 0 && !perm) return lt__err(LT_EINVAL, "%s: perm is NULL", fn);
  bool seen[LT_MAX_DIMS] = {false};
  for (int i = 0; i < ndim; i++) {
    int ax;
    if (lt__norm_axis(fn, perm[i], ndim, &ax) != LT_OK) return LT_EINVAL;
    if (seen[ax]) return lt__err(LT_EINVAL, "%s: axis %d appears twice in the permutation", fn, ax);
    seen[ax] = true;
    out[i] = ax;
  }
  return LT_OK;
}

/* A PERMUTE node over a, or a's value itself for the identity. */
static lt_tensor *make_permute(lt_tensor *a, const int64_t *perm) {
  int nd = a->ndim;
  bool identity = true;
  int64_t shape[LT_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    shape[i] = a->shape[perm[i]];
    if (perm[i] != i) identity = false;
  }
  if (identity) return same_value(a);
  return make_unary(a->dev, LT_OP_PERMUTE, (lt_dtype)a->dtype, shape, nd,
                    lt__ir_as(a, (lt_dtype)a->dtype), perm, nd);
}

/* Where a permutation p puts a's split axis (permutes propagate shardings:
 * the chunk moves with its axis). */
static int moved_axis(const lt_tensor *a, const int64_t *p) {
  for (int q = 0; q < a->ndim; q++)
    if (p[q] == a->shard_axis) return q;
  return -1;
}

static lt_tensor *permute_sharded(lt_tensor *a, const int64_t *p) {
  lt_shard_ctx c;
  if (lt__shard_layout(&a, moved_axis(a, p), &c) != LT_OK) return NULL;
  return lt__shard_finish(&c, make_permute(a, p));
}

lt_tensor *lt_permute(lt_tensor *a, const int *perm, int ndim) {
  static const char *fn = "lt_permute";
  int64_t p[LT_MAX_DIMS];
  if (a && a->shard_n && lt__shard_aware_depth() == 0)
    return check_perm(fn, a, perm, ndim, p) == LT_OK ? permute_sharded(a, p) : NULL;
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (check_perm(fn, a, perm, ndim, p) != LT_OK) return NULL;
  return make_permute(a, p);
}

lt_tensor *lt_transpose(lt_tensor *a, int axis0, int axis1) {
  static const char *fn = "lt_transpose";
  bool sharded = a && a->shard_n && lt__shard_aware_depth() == 0;
  if (!sharded && lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  /* As torch, a 0-d tensor accepts the axes of a 1-d one (and is unchanged). */
  int rank = a->ndim ? a->ndim : 1;
  int x, y;
  if (lt__norm_axis(fn, axis0, rank, &x) != LT_OK) return NULL;
  if (lt__norm_axis(fn, axis1, rank, &y) != LT_OK) return NULL;
  int64_t p[LT_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) p[i] = i;
  if (a->ndim) {
    p[x] = y;
    p[y] = x;
  }
  return sharded ? permute_sharded(a, p) : make_permute(a, p);
}

/* ---- expand ------------------------------------------------------------------------------ */

lt_tensor *lt_expand(lt_tensor *a, const int64_t *shape, int ndim) {
  static const char *fn = "lt_expand";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (ndim < 0 || ndim > LT_MAX_DIMS) return fail_rank(fn, "target", ndim);
  if (ndim > 0 && !shape) {
    lt__err(LT_EINVAL, "%s: shape is NULL", fn);
    return NULL;
  }
  char sa[SHAPE_STR], sb[SHAPE_STR];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(shape, ndim, sb, sizeof sb);
  if (ndim < a->ndim) {
    lt__err(LT_ESHAPE, "%s: cannot expand %s to %s: the target has fewer dims", fn, sa, sb);
    return NULL;
  }

  /* Dims align to the right (numpy); -1 keeps the operand's dim. */
  int off = ndim - a->ndim;
  int64_t target[LT_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int j = i - off;
    int64_t d = shape[i];
    if (d == -1) {
      if (j < 0) {
        lt__err(LT_ESHAPE, "%s: cannot expand %s to %s: -1 is not allowed in a new leading dim", fn,
                sa, sb);
        return NULL;
      }
      d = a->shape[j];
    } else if (d < 0) {
      lt__err(LT_ESHAPE, "%s: invalid dim %lld in shape %s", fn, (long long)d, sb);
      return NULL;
    }
    if (j >= 0 && a->shape[j] != d && a->shape[j] != 1) {
      lt__err(LT_ESHAPE, "%s: cannot expand %s to %s: dim %d has size %lld, not 1 or %lld", fn, sa,
              sb, j, (long long)a->shape[j], (long long)d);
      return NULL;
    }
    target[i] = d;
  }
  if (lt__check_shape(fn, target, ndim) != LT_OK) return NULL;
  if (ndim == a->ndim && memcmp(target, a->shape, sizeof(int64_t) * (size_t)ndim) == 0)
    return same_value(a);
  return make_unary(a->dev, LT_OP_EXPAND, (lt_dtype)a->dtype, target, ndim,
                    lt__ir_as(a, (lt_dtype)a->dtype), NULL, 0);
}

/* ---- squeeze / unsqueeze ------------------------------------------------------------------ */

lt_tensor *lt_squeeze(lt_tensor *a, int axis) {
  static const char *fn = "lt_squeeze";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  /* As torch, a 0-d tensor accepts axis 0 and -1 (and is unchanged). */
  int ax;
  if (lt__norm_axis(fn, axis, a->ndim ? a->ndim : 1, &ax) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < a->ndim; i++)
    if (i != ax || a->shape[i] != 1) shape[nd++] = a->shape[i];
  return lt__wrap(a->dev, lt__node_reshape(lt__ir_as(a, (lt_dtype)a->dtype), shape, nd));
}

lt_tensor *lt_unsqueeze(lt_tensor *a, int axis) {
  static const char *fn = "lt_unsqueeze";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (a->ndim >= LT_MAX_DIMS) return fail_rank(fn, "result", a->ndim + 1);
  int ax;
  if (lt__norm_axis(fn, axis, a->ndim + 1, &ax) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < a->ndim; i++) {
    if (i == ax) shape[nd++] = 1;
    shape[nd++] = a->shape[i];
  }
  if (ax == a->ndim) shape[nd++] = 1;
  return lt__wrap(a->dev, lt__node_reshape(lt__ir_as(a, (lt_dtype)a->dtype), shape, nd));
}

/* ---- slice --------------------------------------------------------------------------------- */

/* Python's clamping of a slice bound for step > 0: negative counts from the end,
 * then the bound is clamped into [0, n]. */
static int64_t clamp_bound(int64_t v, int64_t n) {
  if (v < 0) v = v + n < 0 ? 0 : v + n; /* v >= INT64_MIN and n >= 0: no overflow */
  return v > n ? n : v;
}

lt_tensor *lt_slice_n(lt_tensor *a, const int64_t *starts, const int64_t *stops,
                      const int64_t *steps, int n) {
  static const char *fn = "lt_slice_n";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int nd = a->ndim;
  /* the count is the arrays' length: a rank the caller did not expect would
   * read past them */
  if (n != nd) {
    lt__err(LT_EINVAL, "%s: starts, stops and steps have %d entries, but a has %d axes", fn, n, nd);
    return NULL;
  }
  int64_t attrs[2 * LT_MAX_DIMS], shape[LT_MAX_DIMS];
  bool identity = true;
  for (int i = 0; i < nd; i++) {
    int64_t n = a->shape[i];
    int64_t step = steps ? steps[i] : 1;
    if (step <= 0) {
      lt__err(LT_EINVAL, "%s: step %lld on axis %d must be > 0", fn, (long long)step, i);
      return NULL;
    }
    int64_t start = clamp_bound(starts ? starts[i] : 0, n);
    int64_t stop = stops ? clamp_bound(stops[i], n) : n;
    /* (stop - start - 1) / step + 1 rather than a rounded-up division: no overflow for huge steps.
     */
    int64_t len = stop > start ? (stop - start - 1) / step + 1 : 0;
    /* Canonical attrs so equal results give equal graphs: step is irrelevant
     * for at most one element, start for none. */
    if (len <= 1) step = 1;
    if (len == 0) start = 0;
    attrs[i] = start;
    attrs[nd + i] = step;
    shape[i] = len;
    /* len == n forces start 0 and step 1 whenever n > 1. */
    if (len != n) identity = false;
  }
  if (identity) return same_value(a);
  return make_unary(a->dev, LT_OP_SLICE, (lt_dtype)a->dtype, shape, nd,
                    lt__ir_as(a, (lt_dtype)a->dtype), attrs, 2 * nd);
}

/* ---- concat / stack ------------------------------------------------------------------------- */

/* Common checks of concat and stack: a list of 1..UINT16_MAX non-NULL tensors on one device. */
static int check_list(const char *fn, lt_tensor *const *ts, int n) {
  if (n < 1) return lt__err(LT_EINVAL, "%s: needs at least one tensor, got %d", fn, n);
  if (n > UINT16_MAX) return lt__err(LT_EINVAL, "%s: too many tensors (%d)", fn, n);
  if (!ts) return lt__err(LT_EINVAL, "%s: tensor list is NULL", fn);
  return lt__check_operands(fn, ts, n);
}

/* Releases the first n nodes of ops (on a failure half-way through a list). */
static void release_nodes(lt_node **ops, int n) {
  for (int i = 0; i < n; i++) lt__node_release(ops[i]);
}

/* The operands of a CONCAT node: each tensor cast to dt and reshaped to
 * shape (when shape != NULL; stack), written into ops. */
static lt_node **list_operands(lt_tensor *const *ts, int n, lt_dtype dt, const int64_t *shape,
                               int ndim) {
  lt_node **ops = lt__malloc(sizeof(lt_node *) * (size_t)n);
  if (!ops) return NULL;
  for (int i = 0; i < n; i++) {
    lt_node *op = lt__ir_as(ts[i], dt);
    if (op && shape) op = lt__node_reshape(op, shape, ndim);
    if (!op) {
      release_nodes(ops, i);
      lt__free(ops, sizeof(lt_node *) * (size_t)n);
      return NULL;
    }
    ops[i] = op;
  }
  return ops;
}

/* One CONCAT node over ops (consumed, and the array freed); a single operand
 * is its own result. */
static lt_tensor *make_concat(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                              lt_node **ops, int n, int axis) {
  lt_node *node;
  if (n == 1) {
    node = ops[0];
  } else {
    int64_t attr = axis;
    node = lt__node_make(LT_OP_CONCAT, dt, shape, ndim, ops, n, &attr, 1, 0.0);
  }
  lt__free(ops, sizeof(lt_node *) * (size_t)n);
  return lt__wrap(dev, node);
}

lt_tensor *lt_concat(lt_tensor *const *ts, int n, int axis) {
  static const char *fn = "lt_concat";
  if (check_list(fn, ts, n) != LT_OK) return NULL;
  int nd = ts[0]->ndim;
  char s0[SHAPE_STR], si[SHAPE_STR];
  lt__shape_str(ts[0]->shape, nd, s0, sizeof s0);
  if (nd == 0) {
    lt__err(LT_ESHAPE, "%s: 0-d tensors cannot be concatenated (tensor 0 has shape %s)", fn, s0);
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, nd, &ax) != LT_OK) return NULL;

  int64_t shape[LT_MAX_DIMS];
  memcpy(shape, ts[0]->shape, sizeof(int64_t) * (size_t)nd);
  for (int i = 1; i < n; i++) {
    const lt_tensor *t = ts[i];
    lt__shape_str(t->shape, t->ndim, si, sizeof si);
    if (t->ndim != nd) {
      lt__err(LT_ESHAPE, "%s: tensor %d has shape %s, rank %d differs from tensor 0's %s", fn, i,
              si, t->ndim, s0);
      return NULL;
    }
    for (int d = 0; d < nd; d++) {
      if (d != ax && t->shape[d] != shape[d]) {
        lt__err(LT_ESHAPE, "%s: tensor %d has shape %s, dim %d differs from tensor 0's %s", fn, i,
                si, d, s0);
        return NULL;
      }
    }
    if (t->shape[ax] > INT64_MAX - shape[ax]) {
      lt__err(LT_ESHAPE, "%s: result is too large along axis %d", fn, ax);
      return NULL;
    }
    shape[ax] += t->shape[ax];
  }
  if (lt__check_shape(fn, shape, nd) != LT_OK) return NULL;

  lt_dtype dt = lt__promote((const lt_tensor *const *)ts, n);
  lt_node **ops = list_operands(ts, n, dt, NULL, 0);
  if (!ops) return NULL;
  return make_concat(ts[0]->dev, dt, shape, nd, ops, n, ax);
}

lt_tensor *lt_stack(lt_tensor *const *ts, int n, int axis) {
  static const char *fn = "lt_stack";
  if (check_list(fn, ts, n) != LT_OK) return NULL;
  int nd = ts[0]->ndim;
  if (nd >= LT_MAX_DIMS) return fail_rank(fn, "result", nd + 1);
  int ax;
  if (lt__norm_axis(fn, axis, nd + 1, &ax) != LT_OK) return NULL;
  char s0[SHAPE_STR], si[SHAPE_STR];
  lt__shape_str(ts[0]->shape, nd, s0, sizeof s0);
  for (int i = 1; i < n; i++) {
    const lt_tensor *t = ts[i];
    if (t->ndim != nd || memcmp(t->shape, ts[0]->shape, sizeof(int64_t) * (size_t)nd) != 0) {
      lt__err(LT_ESHAPE, "%s: all shapes must be equal: tensor %d has shape %s, tensor 0 has %s",
              fn, i, lt__shape_str(t->shape, t->ndim, si, sizeof si), s0);
      return NULL;
    }
  }
  /* Each operand unsqueezed at ax, then one CONCAT along ax. */
  int64_t part[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  int k = 0;
  for (int d = 0; d <= nd; d++) part[d] = d == ax ? 1 : ts[0]->shape[k++];
  memcpy(shape, part, sizeof part);
  if ((int64_t)n > 1 && lt__numel(part, nd + 1) > INT64_MAX / n) {
    lt__err(LT_ESHAPE, "%s: result is too large", fn);
    return NULL;
  }
  shape[ax] = n;
  if (lt__check_shape(fn, shape, nd + 1) != LT_OK) return NULL;

  lt_dtype dt = lt__promote((const lt_tensor *const *)ts, n);
  lt_node **ops = list_operands(ts, n, dt, part, nd + 1);
  if (!ops) return NULL;
  return make_concat(ts[0]->dev, dt, shape, nd + 1, ops, n, ax);
}

/* ---- pad ---------------------------------------------------------------------------------------
 */

lt_tensor *lt_pad_n(lt_tensor *a, const int64_t *pads, int npads, double value) {
  static const char *fn = "lt_pad_n";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int nd = a->ndim;
  if (npads != 2 * nd) {
    lt__err(LT_EINVAL, "%s: pads has %d entries, but a has %d axes (2 entries each: %d)", fn, npads,
            nd, 2 * nd);
    return NULL;
  }
  if (nd > 0 && !pads) {
    lt__err(LT_EINVAL, "%s: pads is NULL", fn);
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS], attrs[2 * LT_MAX_DIMS];
  bool identity = true;
  for (int i = 0; i < nd; i++) {
    int64_t before = pads[2 * i], after = pads[2 * i + 1];
    if (before < 0 || after < 0) {
      lt__err(LT_EINVAL, "%s: pads of axis %d are %lld and %lld; they must be >= 0", fn, i,
              (long long)before, (long long)after);
      return NULL;
    }
    if (before > INT64_MAX - a->shape[i] || after > INT64_MAX - a->shape[i] - before) {
      lt__err(LT_ESHAPE, "%s: padded axis %d is too large", fn, i);
      return NULL;
    }
    shape[i] = a->shape[i] + before + after;
    attrs[2 * i] = before;
    attrs[2 * i + 1] = after;
    if (before || after) identity = false;
  }
  if (lt__check_shape(fn, shape, nd) != LT_OK) return NULL;
  if (identity) return same_value(a);
  lt_dtype dt = (lt_dtype)a->dtype;
  /* The value as an element of dt stores it, so equal results give equal graphs. */
  double v = lt__dtype_round(dt, value);
  lt_node *op = lt__ir_as(a, dt);
  return lt__make(a->dev, LT_OP_PAD, dt, shape, nd, &op, 1, attrs, 2 * nd, v);
}
