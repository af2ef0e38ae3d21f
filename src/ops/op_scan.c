/* Ops along one axis whose IR result keeps the operand's shape: lt_cumsum
 * (the CUMSUM node), lt_argsort, lt_sort and lt_topk (an ARGSORT node, with
 * the values gathered through it and topk's first k taken by a slice).
 *
 * Node layout (lt_op_table.h): CUMSUM attrs = {axis, reverse}; ARGSORT attrs
 * = {axis, descending}, an i64 result.
 *
 * Sorting is by ARGSORT and GATHER rather than a node with two outputs (a
 * node has one): the values' gradient is gather's (a scatter-add through the
 * indices), which is torch.sort's, and argsort itself has none.
 *
 * 0-d operands (as PyTorch): a 0-d tensor has one implicit axis (dim 0 or
 * -1). It runs as [1] on axis 0 and comes back to 0-d, so that nodes always
 * carry a real axis. */
#include "lt_ops.h"

static const int64_t kOne[1] = {1};

/* Normalises axis for a (0-d: only 0 and -1, reported as 0). */
static int line_axis(const char *fn, const lt_tensor *a, int axis, int *out) {
  if (a->ndim > 0) return lt__norm_axis(fn, axis, a->ndim, out);
  if (axis != 0 && axis != -1)
    return lt__err(LT_EINVAL, "%s: axis %d out of range for a tensor of rank 0 (only 0 or -1)", fn,
                   axis);
  *out = 0;
  return LT_OK;
}

/* a's IR as dtype dt, seen as [1] when a is 0-d. NEW reference. */
static lt_node *line_operand(lt_tensor *a, lt_dtype dt) {
  lt_node *x = lt__ir_as(a, dt);
  if (x && a->ndim == 0) x = lt__node_reshape(x, kOne, 1);
  return x;
}

/* x (consumed) back to a's shape (a no-op unless a is 0-d). */
static lt_node *unline(const lt_tensor *a, lt_node *x) {
  return x && a->ndim == 0 ? lt__node_reshape(x, a->shape, 0) : x;
}

/* ---- cumsum ------------------------------------------------------------------------------- */

lt_tensor *lt_cumsum(lt_tensor *a, int axis) {
  static const char *fn = "lt_cumsum";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int ax;
  if (line_axis(fn, a, axis, &ax) != LT_OK) return NULL;
  /* torch.cumsum: bool and integer inputs accumulate (and come back) in i64. */
  lt_dtype dt = lt__is_float((lt_dtype)a->dtype) ? (lt_dtype)a->dtype : LT_I64;
  lt_node *x = line_operand(a, dt);
  if (!x) return NULL;
  int64_t attrs[2] = {ax, 0};
  lt_node *y = lt__node_make(LT_OP_CUMSUM, dt, x->shape, x->ndim, &x, 1, attrs, 2, 0.0);
  return lt__wrap(a->dev, unline(a, y));
}

/* ---- sorting ------------------------------------------------------------------------------ */

/* ARGSORT of x (consumed, a line operand) along ax. NEW reference. */
static lt_node *argsort_node(lt_node *x, int ax, bool descending) {
  if (!x) return NULL;
  int64_t attrs[2] = {ax, descending ? 1 : 0};
  return lt__node_make(LT_OP_ARGSORT, LT_I64, x->shape, x->ndim, &x, 1, attrs, 2, 0.0);
}

/* The first k entries of idx (consumed) along ax; idx itself when k is the
 * whole axis. Canonical attrs as lt_slice_n records them. */
static lt_node *first_k(lt_node *idx, int ax, int64_t k) {
  if (!idx || idx->shape[ax] == k) return idx;
  int64_t shape[LT_MAX_DIMS], attrs[2 * LT_MAX_DIMS];
  for (int d = 0; d < idx->ndim; d++) {
    shape[d] = d == ax ? k : idx->shape[d];
    attrs[d] = 0;
    attrs[idx->ndim + d] = 1;
  }
  return lt__node_make(LT_OP_SLICE, LT_I64, shape, idx->ndim, &idx, 1, attrs, 2 * idx->ndim, 0.0);
}

/* The status of a failed call (recorded by whatever failed). */
static int failure(void) { return lt_last_status() < 0 ? lt_last_status() : LT_ENOMEM; }

/* Hands out values = x gathered at idx along ax, and idx, each when asked
 * for; x and idx (line nodes) are consumed. On failure nothing is handed out
 * and no tensor is left behind. */
static int hand_out(lt_tensor *a, lt_node *x, lt_node *idx, int ax, lt_tensor **values,
                    lt_tensor **indices) {
  if (!x || !idx) {
    lt__node_release(x);
    lt__node_release(idx);
    return failure();
  }
  lt_tensor *v = NULL, *i = NULL;
  if (values) {
    lt_node *ops[2] = {x, lt__node_retain(idx)};
    int64_t attrs[1] = {ax};
    lt_node *g = lt__node_make(LT_OP_GATHER, (lt_dtype)x->dtype, idx->shape, idx->ndim, ops, 2,
                               attrs, 1, 0.0);
    v = lt__wrap(a->dev, unline(a, g));
    if (!v) {
      lt__node_release(idx);
      return failure();
    }
  } else {
    lt__node_release(x);
  }
  if (indices) {
    i = lt__wrap(a->dev, unline(a, idx));
    if (!i) {
      lt__tensor_discard(v);
      return failure();
    }
  } else {
    lt__node_release(idx);
  }
  if (values) *values = v;
  if (indices) *indices = i;
  return LT_OK;
}

/* The common start of sort and topk: clears the outputs, checks a and axis. */
static int sort_begin(const char *fn, lt_tensor *a, int axis, lt_tensor **values,
                      lt_tensor **indices, int *ax) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!values && !indices) return lt__err(LT_EINVAL, "%s: values and indices are both NULL", fn);
  int rc = lt__check_operands(fn, &a, 1);
  if (rc != LT_OK) return rc;
  return line_axis(fn, a, axis, ax);
}

int lt_sort(lt_tensor *a, int axis, bool descending, lt_tensor **values, lt_tensor **indices) {
  static const char *fn = "lt_sort";
  int ax;
  int rc = sort_begin(fn, a, axis, values, indices, &ax);
  if (rc != LT_OK) return rc;
  lt_node *x = line_operand(a, (lt_dtype)a->dtype);
  lt_node *idx = argsort_node(lt__node_retain(x), ax, descending);
  return hand_out(a, x, idx, ax, values, indices);
}

lt_tensor *lt_argsort(lt_tensor *a, int axis, bool descending) {
  static const char *fn = "lt_argsort";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int ax;
  if (line_axis(fn, a, axis, &ax) != LT_OK) return NULL;
  lt_node *idx = argsort_node(line_operand(a, (lt_dtype)a->dtype), ax, descending);
  return lt__wrap(a->dev, unline(a, idx));
}

int lt_topk(lt_tensor *a, int64_t k, int axis, bool largest, lt_tensor **values,
            lt_tensor **indices) {
  static const char *fn = "lt_topk";
  int ax;
  int rc = sort_begin(fn, a, axis, values, indices, &ax);
  if (rc != LT_OK) return rc;
  int64_t size = a->ndim ? a->shape[ax] : 1;
  /* A 0-d input has one element and a 0-d result: there is no empty top 0
   * of it (torch leaves that result uninitialized), so k must be 1. */
  int64_t lo = a->ndim ? 0 : 1;
  if (k < lo || k > size) {
    char sa[128];
    return lt__err(LT_EINVAL, "%s: k = %lld out of range [%lld, %lld] for axis %d of shape %s", fn,
                   (long long)k, (long long)lo, (long long)size, axis,
                   lt__shape_str(a->shape, a->ndim, sa, sizeof sa));
  }
  lt_node *x = line_operand(a, (lt_dtype)a->dtype);
  lt_node *idx = first_k(argsort_node(lt__node_retain(x), ax, largest), ax, k);
  return hand_out(a, x, idx, ax, values, indices);
}
