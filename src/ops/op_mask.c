/* Masking ops: lt_masked_fill, lt_tril, lt_triu. All three are a WHERE node:
 * no row, no kernel and no gradient rule of their own, so every backend runs
 * them in its fused elementwise loops and the gradient passes through the
 * kept elements by where's rule.
 *
 * Values that vary between calls (the fill value, the triangle of a given
 * diagonal) enter the graph as data, never as constants, so that changing
 * them reuses the compiled executable (docs/DESIGN.md, rule 1). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_metrics.h"
#include "lt_ops.h"

/* ---- masked_fill ------------------------------------------------------------- */

/* torch 1.13 converts the fill value to the tensor's dtype with an overflow
 * check: a value (before truncation) outside the dtype's range, or a
 * non-finite one for an integer dtype, is an error; a float value into an
 * integer dtype is truncated toward zero; any value into bool is value != 0
 * (NaN too); f32 takes inf and NaN but no finite value beyond FLT_MAX.
 * torch wraps some negative integers into u8 (-1 gives 255); here u8 takes
 * [0, 255] only. Returns false when v does not fit; *out is the value as
 * the dtype holds it. (lt_scatter's value form checks its value here too.) */
bool lt__fill_value(lt_dtype dt, double v, double *out) {
  const lt_dtype_info *d = lt__dtype_info(dt);
  if (d->kind == LT_DK_BOOL) {
    *out = v != 0;
    return true;
  }
  if (d->kind == LT_DK_FLOAT) {
    *out = lt__dtype_round(dt, v);
    return !(isfinite(v) && fabs(v) > d->max_f64);
  }
  /* the range of the dtype's table row; i64's max reads 2^63 as a double,
   * itself out of range (also NaN) */
  if (!(v >= d->min_f64 && v <= d->max_f64 && v < 9223372036854775808.0)) return false;
  *out = trunc(v);
  return true;
}

lt_tensor *lt_masked_fill(lt_tensor *a, lt_tensor *mask, double value) {
  static const char *fn = "lt_masked_fill";
  lt_tensor *ts[2] = {a, mask};
  if (lt__check_operands(fn, ts, 2) != LT_OK) return NULL;
  if (mask->dtype != LT_BOOL) {
    lt__err(LT_EDTYPE, "%s: mask must be bool, got %s", fn, lt_dtype_name((lt_dtype)mask->dtype));
    return NULL;
  }
  if (!lt__broadcastable(mask->shape, mask->ndim, a->shape, a->ndim)) {
    char sa[LT_SHAPE_STR_MAX], sm[LT_SHAPE_STR_MAX];
    lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
    lt__shape_str(mask->shape, mask->ndim, sm, sizeof sm);
    lt__err(LT_ESHAPE, "%s: mask %s does not broadcast to the input's shape %s", fn, sm, sa);
    return NULL;
  }
  lt_dtype dt = (lt_dtype)a->dtype;
  double v;
  if (!lt__fill_value(dt, value, &v)) {
    lt__err(LT_EINVAL, "%s: value %g cannot be converted to %s without overflow", fn, value,
            lt_dtype_name(dt));
    return NULL;
  }
  lt_node *ops[3] = {lt__ir_as(mask, LT_BOOL), lt__scalar_node(a->dev, dt, v), lt__ir_as(a, dt)};
  return lt__make(a->dev, LT_OP_WHERE, dt, a->shape, a->ndim, ops, 3, NULL, 0, 0.0);
}

/* ---- tril / triu -------------------------------------------------------------- */

/* Whether element (i, j) is kept: j - i <= diagonal (tril) or >= (triu).
 * j - i is within +-2^62, so the comparison cannot overflow. */
static bool kept(int64_t i, int64_t j, int64_t diagonal, bool lower) {
  return lower ? j - i <= diagonal : j - i >= diagonal;
}

/* The [rows, cols] bool mask of the kept elements as device data on dev. */
static lt_node *triangle_mask(lt_device dev, int64_t rows, int64_t cols, int64_t diagonal,
                              bool lower) {
  const lt_backend *be = lt__backend_for(dev);
  int64_t shape[2] = {rows, cols};
  size_t n = (size_t)(rows * cols);
  uint8_t *host = lt__malloc(n ? n : 1);
  if (!host) return NULL;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) host[i * cols + j] = kept(i, j, diagonal, lower);
  lt_buffer *b = NULL;
  int st = lt__buffer_alloc(be, dev, LT_BOOL, shape, 2, &b);
  if (st == LT_OK && n) st = be->to_device(b, host, n);
  lt__free(host, n ? n : 1);
  if (st != LT_OK) {
    lt__buffer_release(b);
    return NULL;
  }
  lt__count(LT_CTR_TRANSFER_TO_DEVICE, 1);
  lt_node *node = lt__node_data(b);
  lt__buffer_release(b);
  return node;
}

static lt_tensor *triangle(const char *fn, lt_tensor *a, int64_t diagonal, bool lower) {
  lt_tensor *ts[1] = {a};
  if (lt__check_operands(fn, ts, 1) != LT_OK) return NULL;
  if (a->ndim < 2) {
    lt__err(LT_ESHAPE, "%s: the input must have at least 2 dimensions, got %d", fn, a->ndim);
    return NULL;
  }
  if (!lt__device_ctx_ok(a->dev)) return NULL;
  lt_dtype dt = (lt_dtype)a->dtype;
  int64_t rows = a->shape[a->ndim - 2], cols = a->shape[a->ndim - 1];
  /* Every element kept (also an empty matrix): a new tensor over the same value. */
  bool all = rows == 0 || cols == 0 ||
             (lower ? kept(0, cols - 1, diagonal, lower) : kept(rows - 1, 0, diagonal, lower));
  if (all) return lt__wrap(a->dev, lt__ir_as(a, dt));
  lt_node *ops[3] = {triangle_mask(a->dev, rows, cols, diagonal, lower), lt__ir_as(a, dt),
                     lt__node_const(dt, NULL, 0, 0.0)};
  return lt__make(a->dev, LT_OP_WHERE, dt, a->shape, a->ndim, ops, 3, NULL, 0, 0.0);
}

lt_tensor *lt_tril(lt_tensor *a, int64_t diagonal) {
  return triangle("lt_tril", a, diagonal, true);
}
lt_tensor *lt_triu(lt_tensor *a, int64_t diagonal) {
  return triangle("lt_triu", a, diagonal, false);
}
