/* Shape composites, built from existing nodes (no op-table row of their own):
 *  - split, split_size, chunk: one SLICE per piece, written to a caller's array;
 *  - flip: INDEX_SELECT with a reversed index per flipped axis (the index is
 *    device data, so equal shapes give equal graphs);
 *  - roll: per axis, CONCAT of the two SLICEs that swap places;
 *  - repeat: per repeated axis, RESHAPE to [before, 1, dim, after], EXPAND
 *    the 1 to the count, RESHAPE back.
 * Their gradients are those of the parts (slice, index_select, concat,
 * expand). A constant operand stays a constant of the new shape. */
#include <string.h>

#include "lt_alloc.h"
#include "lt_ops.h"

static lt_node *ref(lt_node *n) { return lt__node_retain(n); }

/* A constant of shape with c's value (c consumed), for ops whose every result
 * element is an element of a constant. */
static lt_node *const_as(lt_node *c, const int64_t *shape, int nd) {
  lt_node *r = lt__node_const((lt_dtype)c->dtype, shape, nd, c->fattr);
  lt__node_release(c);
  return r;
}

/* [start, start + len) of x (borrowed) along ax, as a new reference. */
static lt_node *block(lt_node *x, int ax, int64_t start, int64_t len) {
  if (len == x->shape[ax]) return ref(x);
  int nd = x->ndim;
  int64_t shape[LT_MAX_DIMS], attrs[2 * LT_MAX_DIMS] = {0};
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
  shape[ax] = len;
  if (x->op == LT_OP_CONST) return lt__node_const((lt_dtype)x->dtype, shape, nd, x->fattr);
  for (int d = 0; d < nd; d++) attrs[nd + d] = 1;
  attrs[ax] = len ? start : 0; /* lt_slice_n's canonical attrs: equal slices, equal graphs */
  lt_node *op = ref(x);
  return lt__node_make(LT_OP_SLICE, (lt_dtype)x->dtype, shape, nd, &op, 1, attrs, 2 * nd, 0.0);
}

/* ---- split / split_size / chunk ---------------------------------------------------- */

/* The pieces: n of them, sizes[i] each, or (sizes NULL) `step` each with the
 * last one holding what is left of `total`. */
typedef struct plan {
  int64_t n;
  const int64_t *sizes;
  int64_t step, total;
} plan;

static int64_t piece_size(const plan *p, int64_t i) {
  if (p->sizes) return p->sizes[i];
  int64_t left = p->total - i * p->step;
  return left < p->step ? left : p->step;
}

/* Rank and axis checks shared by the three. */
static int split_axis(const char *fn, lt_tensor *a, int axis, int *ax) {
  int rc = lt__check_operands(fn, &a, 1);
  if (rc != LT_OK) return rc;
  if (a->ndim == 0) return lt__err(LT_ESHAPE, "%s: a 0-d tensor cannot be split (as torch)", fn);
  return lt__norm_axis(fn, axis, a->ndim, ax);
}

/* Writes the pieces of a along ax to out: the count, or a negative status
 * with nothing created (out NULL: only the count). */
static int emit_pieces(const char *fn, lt_tensor *a, int ax, const plan *p, lt_tensor **out,
                       int cap) {
  if (p->n > INT32_MAX)
    return lt__err(LT_EINVAL, "%s: %lld pieces are too many to return", fn, (long long)p->n);
  int n = (int)p->n;
  if (!out) return n;
  if (cap < n) {
    char s[LT_SHAPE_STR_MAX];
    return lt__err(LT_EINVAL, "%s: splitting %s along axis %d gives %d pieces; out has room for %d",
                   fn, lt__shape_str(a->shape, a->ndim, s, sizeof s), ax, n, cap);
  }
  lt_node *x = lt__ir_as(a, (lt_dtype)a->dtype);
  if (!x) return lt_last_status();
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    int64_t len = piece_size(p, i);
    out[i] = lt__wrap(a->dev, block(x, ax, start, len));
    if (!out[i]) {
      int rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
      /* Newest first: each is then the last tensor of the open scope. */
      for (int j = i - 1; j >= 0; j--) {
        lt__tensor_discard(out[j]);
        out[j] = NULL;
      }
      lt__node_release(x);
      return rc;
    }
    start += len;
  }
  lt__node_release(x);
  return n;
}

int lt_split(lt_tensor *a, const int64_t *sizes, int nsizes, int axis, lt_tensor **out, int cap) {
  static const char *fn = "lt_split";
  int ax;
  int rc = split_axis(fn, a, axis, &ax);
  if (rc != LT_OK) return rc;
  if (nsizes < 0 || (nsizes > 0 && !sizes))
    return lt__err(LT_EINVAL, "%s: bad sizes argument (sizes %s, nsizes %d)", fn,
                   sizes ? "given" : "NULL", nsizes);
  int64_t dim = a->shape[ax], sum = 0;
  for (int i = 0; i < nsizes; i++) {
    if (sizes[i] < 0)
      return lt__err(LT_EINVAL, "%s: size %d is %lld; sizes must be >= 0", fn, i,
                     (long long)sizes[i]);
    sum += sizes[i] > dim ? dim + 1 : sizes[i]; /* stays small: no overflow */
    if (sum > dim) break;
  }
  if (sum != dim) {
    char s[LT_SHAPE_STR_MAX];
    return lt__err(LT_ESHAPE, "%s: the sizes do not add up to %lld, the size of axis %d of %s", fn,
                   (long long)dim, ax, lt__shape_str(a->shape, a->ndim, s, sizeof s));
  }
  plan p = {nsizes, sizes, 0, dim};
  return emit_pieces(fn, a, ax, &p, out, cap);
}

int lt_split_size(lt_tensor *a, int64_t size, int axis, lt_tensor **out, int cap) {
  static const char *fn = "lt_split_size";
  int ax;
  int rc = split_axis(fn, a, axis, &ax);
  if (rc != LT_OK) return rc;
  int64_t dim = a->shape[ax];
  if (size < 0 || (size == 0 && dim != 0))
    return lt__err(LT_EINVAL, "%s: size %lld must be > 0 (0 only for an axis of size 0)", fn,
                   (long long)size);
  /* torch: at least one piece, also for an empty axis. */
  int64_t n = dim == 0 ? 1 : dim / size + (dim % size != 0);
  plan p = {n, NULL, size, dim};
  return emit_pieces(fn, a, ax, &p, out, cap);
}

int lt_chunk(lt_tensor *a, int chunks, int axis, lt_tensor **out, int cap) {
  static const char *fn = "lt_chunk";
  int ax;
  int rc = split_axis(fn, a, axis, &ax);
  if (rc != LT_OK) return rc;
  if (chunks <= 0) return lt__err(LT_EINVAL, "%s: chunks is %d; it must be > 0", fn, chunks);
  int64_t dim = a->shape[ax];
  /* torch.chunk: pieces of ceil(dim / chunks), so fewer than `chunks` of them
   * when that size covers the axis sooner; an empty axis gives `chunks`
   * empty pieces. */
  int64_t size = dim / chunks + (dim % chunks != 0);
  int64_t n = dim == 0 ? chunks : dim / size + (dim % size != 0);
  plan p = {n, NULL, size, dim};
  return emit_pieces(fn, a, ax, &p, out, cap);
}

/* ---- flip ------------------------------------------------------------------------------ */

/* n-1, ..., 1, 0 as an i64 device data leaf (NEW reference). */
static lt_node *reversed_index(lt_device dev, int64_t n) {
  size_t nbytes = sizeof(int64_t) * (size_t)n;
  int64_t *v = lt__malloc(nbytes);
  if (!v) return NULL;
  for (int64_t i = 0; i < n; i++) v[i] = n - 1 - i;
  lt_tensor *t = lt__tensor_from_host(dev, LT_I64, &n, 1, v, nbytes);
  if (!t) {
    lt__free(v, nbytes);
    return NULL;
  }
  lt_node *node = ref(lt__tensor_ir(t)); /* uploads; the node keeps the buffer */
  lt__tensor_discard(t);
  return node;
}

/* The axes (naxes entries) as a bit mask, as torch.flip takes them. */
static int flip_axes(const char *fn, const lt_tensor *a, const int *axes, int naxes,
                     int64_t *mask) {
  if (naxes < 0 || (naxes > 0 && !axes))
    return lt__err(LT_EINVAL, "%s: bad axes argument (axes %s, naxes %d)", fn,
                   axes ? "given" : "NULL", naxes);
  *mask = 0;
  for (int i = 0; i < naxes; i++) {
    int ax;
    int rc = lt__norm_axis(fn, axes[i], a->ndim ? a->ndim : 1, &ax);
    if (rc != LT_OK) return rc;
    if ((*mask >> ax) & 1)
      return lt__err(LT_EINVAL, "%s: axis %d appears more than once in axes", fn, axes[i]);
    *mask |= (int64_t)1 << ax;
  }
  return LT_OK;
}

lt_tensor *lt_flip(lt_tensor *a, const int *axes, int naxes) {
  static const char *fn = "lt_flip";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int64_t mask = 0;
  if (flip_axes(fn, a, axes, naxes, &mask) != LT_OK) return NULL;
  lt_node *x = lt__ir_as(a, (lt_dtype)a->dtype);
  /* Axes of size 0 or 1 read the same either way, and so does a constant. */
  for (int ax = 0; x && x->op != LT_OP_CONST && ax < a->ndim; ax++) {
    if (!((mask >> ax) & 1) || a->shape[ax] <= 1) continue;
    lt_node *ops[2] = {x, reversed_index(a->dev, a->shape[ax])};
    int64_t attr = ax;
    x = lt__node_make(LT_OP_INDEX_SELECT, (lt_dtype)a->dtype, a->shape, a->ndim, ops, 2, &attr, 1,
                      0.0);
  }
  return lt__wrap(a->dev, x);
}

/* ---- roll ------------------------------------------------------------------------------- */

/* x (consumed) rolled by shift along ax: element i moves to (i + shift) mod n. */
static lt_node *roll_axis(lt_node *x, int ax, int64_t shift) {
  if (!x || x->op == LT_OP_CONST) return x;
  int64_t n = x->shape[ax];
  int64_t s = n ? shift % n : 0;
  if (s < 0) s += n;
  if (s == 0) return x;
  lt_node *ops[2] = {block(x, ax, n - s, s), block(x, ax, 0, n - s)};
  int64_t attr = ax;
  lt_node *r =
      lt__node_make(LT_OP_CONCAT, (lt_dtype)x->dtype, x->shape, x->ndim, ops, 2, &attr, 1, 0.0);
  lt__node_release(x);
  return r;
}

lt_tensor *lt_roll(lt_tensor *a, const int64_t *shifts, int nshifts, const int *axes, int naxes) {
  static const char *fn = "lt_roll";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (nshifts <= 0 || !shifts || naxes < 0 || (naxes > 0 && !axes)) {
    lt__err(LT_EINVAL, "%s: bad shifts or axes argument (nshifts %d, naxes %d)", fn, nshifts,
            naxes);
    return NULL;
  }
  /* torch: no axes rolls the flattened tensor by one shift. */
  if (naxes == 0 && nshifts != 1) {
    lt__err(LT_EINVAL, "%s: without axes there must be one shift, got %d", fn, nshifts);
    return NULL;
  }
  if (naxes > 0 && nshifts != naxes) {
    lt__err(LT_EINVAL, "%s: shifts and axes must align: %d shifts, %d axes", fn, nshifts, naxes);
    return NULL;
  }
  int norm[LT_MAX_DIMS * 8];
  if (naxes > (int)(sizeof norm / sizeof *norm)) {
    lt__err(LT_EINVAL, "%s: %d axes are too many", fn, naxes);
    return NULL;
  }
  for (int i = 0; i < naxes; i++)
    if (lt__norm_axis(fn, axes[i], a->ndim ? a->ndim : 1, &norm[i]) != LT_OK) return NULL;
  lt_node *x = lt__ir_as(a, (lt_dtype)a->dtype);
  if (naxes == 0) {
    int64_t flat = lt__numel(a->shape, a->ndim);
    x = lt__node_reshape(roll_axis(lt__node_reshape(x, &flat, 1), 0, shifts[0]), a->shape, a->ndim);
  } else if (a->ndim > 0) { /* a 0-d tensor rolls onto itself */
    for (int i = 0; i < naxes; i++) x = roll_axis(x, norm[i], shifts[i]);
  }
  return lt__wrap(a->dev, x);
}

/* ---- repeat ----------------------------------------------------------------------------- */

/* x (consumed) with axis ax of cur (x's shape, updated) repeated r times as
 * whole blocks: [before, 1, n, after] expanded to [before, r, n, after]. */
static lt_node *repeat_axis(lt_node *x, int64_t *cur, int nd, int ax, int64_t r) {
  int64_t before = lt__numel(cur, ax), after = lt__numel(cur + ax + 1, nd - ax - 1);
  int64_t four[4] = {before, 1, cur[ax], after};
  x = lt__node_reshape(x, four, 4);
  four[1] = r;
  if (x) x = lt__node_make(LT_OP_EXPAND, (lt_dtype)x->dtype, four, 4, &x, 1, NULL, 0, 0.0);
  cur[ax] *= r;
  return lt__node_reshape(x, cur, nd);
}

lt_tensor *lt_repeat(lt_tensor *a, const int64_t *repeats, int nrep) {
  static const char *fn = "lt_repeat";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (nrep < a->ndim || nrep > LT_MAX_DIMS || (nrep > 0 && !repeats)) {
    lt__err(LT_EINVAL, "%s: %d repeats for a tensor of rank %d (need rank to %d of them)", fn, nrep,
            a->ndim, LT_MAX_DIMS);
    return NULL;
  }
  /* a's shape with leading 1s to nrep dims (torch), and the result's. */
  int64_t cur[LT_MAX_DIMS], out[LT_MAX_DIMS];
  int lead = nrep - a->ndim;
  for (int d = 0; d < nrep; d++) {
    cur[d] = d < lead ? 1 : a->shape[d - lead];
    if (repeats[d] < 0) {
      lt__err(LT_EINVAL, "%s: repeat %d is %lld; repeats must be >= 0", fn, d,
              (long long)repeats[d]);
      return NULL;
    }
    if (repeats[d] > 0 && cur[d] > INT64_MAX / repeats[d]) {
      lt__err(LT_ESHAPE, "%s: the result is too large along axis %d", fn, d);
      return NULL;
    }
    out[d] = cur[d] * repeats[d];
  }
  if (lt__check_shape(fn, out, nrep) != LT_OK) return NULL;
  lt_node *x = lt__node_reshape(lt__ir_as(a, (lt_dtype)a->dtype), cur, nrep);
  if (x && x->op == LT_OP_CONST) return lt__wrap(a->dev, const_as(x, out, nrep));
  for (int d = 0; d < nrep; d++)
    if (repeats[d] != 1) x = repeat_axis(x, cur, nrep, d, repeats[d]);
  return lt__wrap(a->dev, x);
}
