/* Shape helpers: broadcasting, axis normalisation, validation. */
#include <stdio.h>

#include "lt_error.h"
#include "lt_shape.h"

bool lt__shape_fits(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) continue;
    if (shape[i] < 0 || shape[i] > LT_MAX_NUMEL / n) return false;
    n *= shape[i];
  }
  return true;
}

int lt__check_size(const char *fn, const int64_t *shape, int ndim) {
  if (lt__shape_fits(shape, ndim)) return LT_OK;
  char s[LT_SHAPE_STR_MAX];
  return lt__err(LT_ESHAPE, "%s: shape %s is too large (more than %lld elements)", fn,
                 lt__shape_str(shape, ndim, s, sizeof s), (long long)LT_MAX_NUMEL);
}

bool lt__broadcast_shape(const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                         int *out_ndim) {
  int n = an > bn ? an : bn;
  for (int i = 0; i < n; i++) {
    int ai = an - n + i, bi = bn - n + i;
    int64_t da = ai >= 0 ? a[ai] : 1, db = bi >= 0 ? b[bi] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  *out_ndim = n;
  return true;
}

int lt__broadcast(const char *fn, const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                  int *out_ndim) {
  char sa[LT_SHAPE_STR_MAX], sb[LT_SHAPE_STR_MAX], so[LT_SHAPE_STR_MAX];
  if (!lt__broadcast_shape(a, an, b, bn, out, out_ndim))
    return lt__err(LT_ESHAPE, "%s: shapes %s and %s do not broadcast", fn,
                   lt__shape_str(a, an, sa, sizeof sa), lt__shape_str(b, bn, sb, sizeof sb));
  /* Two operands within the limit can broadcast to a result far beyond it. */
  if (!lt__shape_fits(out, *out_ndim))
    return lt__err(LT_ESHAPE,
                   "%s: shapes %s and %s broadcast to %s, which is too large (more than %lld "
                   "elements)",
                   fn, lt__shape_str(a, an, sa, sizeof sa), lt__shape_str(b, bn, sb, sizeof sb),
                   lt__shape_str(out, *out_ndim, so, sizeof so), (long long)LT_MAX_NUMEL);
  return LT_OK;
}

bool lt__broadcastable(const int64_t *from, int fn, const int64_t *to, int tn) {
  if (fn > tn) return false;
  for (int i = 0; i < fn; i++) {
    int64_t f = from[fn - 1 - i], t = to[tn - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

int lt__norm_axis(const char *fn, int axis, int ndim, int *out) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    return lt__err(LT_EINVAL, "%s: axis %d out of range for a tensor of rank %d", fn, axis, ndim);
  *out = a;
  return LT_OK;
}

int lt__check_shape(const char *fn, const int64_t *shape, int ndim) {
  if (ndim < 0 || ndim > LT_MAX_DIMS)
    return lt__err(LT_ESHAPE, "%s: rank %d outside [0, %d]", fn, ndim, LT_MAX_DIMS);
  if (ndim > 0 && !shape) return lt__err(LT_EINVAL, "%s: shape is NULL", fn);
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      char s[LT_SHAPE_STR_MAX];
      return lt__err(LT_ESHAPE, "%s: negative dim in shape %s", fn,
                     lt__shape_str(shape, ndim, s, sizeof s));
    }
  }
  return lt__check_size(fn, shape, ndim);
}
