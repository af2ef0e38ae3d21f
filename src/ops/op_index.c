/* Index ops: lt_gather, lt_index_select, lt_one_hot, lt_embedding.
 *
 * Only shapes and dtypes are checked here; index values are data, so an index
 * out of range is reported by the backend when the graph runs (LT_EEXEC).
 * 0-d operands (accepted as in torch) are reshaped to [1] around the node, so
 * the kernels only ever see rank >= 1. */
#include "lt_caller.h"
#include "lt_ops.h"

static bool is_index_dtype(int dt) { return dt == LT_I32 || dt == LT_I64; }

static int check_index_dtype(const char *fn, const lt_tensor *index) {
  if (is_index_dtype(index->dtype)) return LT_OK;
  return lt__err(LT_EDTYPE, "%s: index must be i32 or i64, got %s", fn,
                 lt_dtype_name((lt_dtype)index->dtype));
}

static const int64_t kOne[1] = {1};

lt_tensor *lt_gather(lt_tensor *a, int axis, lt_tensor *index) {
  static const char *fn = "lt_gather";
  lt_tensor *ts[2] = {a, index};
  if (lt__check_operands(fn, ts, 2) != LT_OK) return NULL;
  if (check_index_dtype(fn, index) != LT_OK) return NULL;

  char sa[128], si[128];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(index->shape, index->ndim, si, sizeof si);
  if (index->ndim != a->ndim) {
    lt__err(LT_ESHAPE, "%s: index %s must have the rank of the input %s", fn, si, sa);
    return NULL;
  }
  /* A 0-d tensor has one axis for indexing purposes (torch accepts 0 and -1). */
  int ax;
  if (lt__norm_axis(fn, axis, a->ndim ? a->ndim : 1, &ax) != LT_OK) return NULL;
  /* torch's rule: off the gather axis, index may not be larger than the input. */
  for (int d = 0; d < a->ndim; d++) {
    if (d != ax && index->shape[d] > a->shape[d]) {
      lt__err(LT_ESHAPE, "%s: index %s is larger than input %s in dim %d (axis %d)", fn, si, sa, d,
              ax);
      return NULL;
    }
  }

  lt_node *ops[2] = {lt__ir_as(a, (lt_dtype)a->dtype), lt__ir_as(index, (lt_dtype)index->dtype)};
  int64_t attrs[1] = {ax};
  if (a->ndim == 0) {
    ops[0] = lt__node_reshape(ops[0], kOne, 1);
    ops[1] = lt__node_reshape(ops[1], kOne, 1);
    lt_node *g = lt__node_make(LT_OP_GATHER, (lt_dtype)a->dtype, kOne, 1, ops, 2, attrs, 1, 0.0);
    return lt__wrap(a->dev, lt__node_reshape(g, kOne, 0));
  }
  return lt__make(a->dev, LT_OP_GATHER, (lt_dtype)a->dtype, index->shape, index->ndim, ops, 2,
                  attrs, 1, 0.0);
}

lt_tensor *lt_index_select(lt_tensor *a, int axis, lt_tensor *index) {
  static const char *fn = "lt_index_select";
  lt_tensor *ts[2] = {a, index};
  if (lt__check_operands(fn, ts, 2) != LT_OK) return NULL;
  if (check_index_dtype(fn, index) != LT_OK) return NULL;

  char sa[128], si[128];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(index->shape, index->ndim, si, sizeof si);
  if (index->ndim > 1) {
    lt__err(LT_ESHAPE, "%s: index must be 1-d (or 0-d), got shape %s", fn, si);
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, a->ndim ? a->ndim : 1, &ax) != LT_OK) return NULL;
  int64_t len = index->ndim ? index->shape[0] : 1;
  /* torch: selecting from a 0-d tensor takes exactly one index and stays 0-d. */
  if (a->ndim == 0 && len != 1) {
    lt__err(LT_ESHAPE, "%s: a 0-d input takes exactly one index, got shape %s", fn, si);
    return NULL;
  }

  lt_node *ops[2] = {lt__ir_as(a, (lt_dtype)a->dtype), lt__ir_as(index, (lt_dtype)index->dtype)};
  /* The node's index is always 1-d: a 0-d index selects like [i]. */
  if (index->ndim == 0) ops[1] = lt__node_reshape(ops[1], kOne, 1);
  int64_t attrs[1] = {ax};
  if (a->ndim == 0) {
    ops[0] = lt__node_reshape(ops[0], kOne, 1);
    lt_node *s =
        lt__node_make(LT_OP_INDEX_SELECT, (lt_dtype)a->dtype, kOne, 1, ops, 2, attrs, 1, 0.0);
    return lt__wrap(a->dev, lt__node_reshape(s, kOne, 0));
  }
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) shape[d] = a->shape[d];
  shape[ax] = len;
  if (lt__check_size(fn, shape, a->ndim) != LT_OK) {
    lt__node_release(ops[0]);
    lt__node_release(ops[1]);
    return NULL;
  }
  return lt__make(a->dev, LT_OP_INDEX_SELECT, (lt_dtype)a->dtype, shape, a->ndim, ops, 2, attrs, 1,
                  0.0);
}

lt_tensor *lt_one_hot(lt_tensor *indices, int64_t num_classes, lt_dtype dt) {
  static const char *fn = "lt_one_hot";
  lt_tensor *ts[1] = {indices};
  if (lt__check_operands(fn, ts, 1) != LT_OK) return NULL;
  if (check_index_dtype(fn, indices) != LT_OK) return NULL;
  if (!lt__dtype_valid(dt)) {
    lt__err(LT_EDTYPE, "%s: invalid result dtype %d", fn, (int)dt);
    return NULL;
  }
  if (num_classes <= 0) {
    lt__err(LT_EINVAL, "%s: num_classes must be > 0, got %lld", fn, (long long)num_classes);
    return NULL;
  }
  char si[128];
  lt__shape_str(indices->shape, indices->ndim, si, sizeof si);
  if (indices->ndim >= LT_MAX_DIMS) {
    lt__err(LT_ESHAPE, "%s: indices of shape %s leave no room for the class axis (max rank %d)", fn,
            si, LT_MAX_DIMS);
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < indices->ndim; d++) shape[d] = indices->shape[d];
  shape[indices->ndim] = num_classes;
  if (lt__check_shape(fn, shape, indices->ndim + 1) != LT_OK) return NULL;

  lt_node *ops[1] = {lt__ir_as(indices, (lt_dtype)indices->dtype)};
  int64_t attrs[1] = {num_classes};
  return lt__make(indices->dev, LT_OP_ONE_HOT, dt, shape, indices->ndim + 1, ops, 1, attrs, 1, 0.0);
}

/* An index_select of the flattened indices along weight's rows, reshaped to
 * the indices' shape plus the row: no node of its own, so every backend and
 * the gradient (index_add into weight, repeated rows summing) follow. */
lt_tensor *lt_embedding(lt_tensor *indices, lt_tensor *weight) {
  static const char *fn = "lt_embedding";
  lt_tensor *ts[2] = {indices, weight};
  if (lt__check_operands(fn, ts, 2) != LT_OK) return NULL;
  if (check_index_dtype(fn, indices) != LT_OK) return NULL;
  if (weight->ndim != 2) {
    char sw[LT_SHAPE_STR_MAX];
    lt__shape_str(weight->shape, weight->ndim, sw, sizeof sw);
    lt__err(LT_ESHAPE, "%s: weight must be 2-d [num, dim], got shape %s", fn, sw);
    return NULL;
  }
  if (indices->ndim >= LT_MAX_DIMS) {
    lt__err(LT_ESHAPE, "%s: indices of rank %d leave no room for the embedding axis (max rank %d)",
            fn, indices->ndim, LT_MAX_DIMS);
    return NULL;
  }
  int64_t n = lt__numel(indices->shape, indices->ndim), dim = weight->shape[1];
  int64_t shape[LT_MAX_DIMS], flat[2] = {n, dim};
  for (int d = 0; d < indices->ndim; d++) shape[d] = indices->shape[d];
  shape[indices->ndim] = dim;
  if (lt__check_size(fn, shape, indices->ndim + 1) != LT_OK) return NULL;

  lt_node *ops[2] = {lt__ir_as(weight, (lt_dtype)weight->dtype),
                     lt__node_reshape(lt__ir_as(indices, (lt_dtype)indices->dtype), &n, 1)};
  int64_t attrs[1] = {0};
  int caller = lt__caller_begin(LT_CALLER_EMBEDDING); /* a bad index names lt_embedding */
  lt_node *rows =
      lt__node_make(LT_OP_INDEX_SELECT, (lt_dtype)weight->dtype, flat, 2, ops, 2, attrs, 1, 0.0);
  lt__caller_end(caller);
  return lt__wrap(weight->dev, lt__node_reshape(rows, shape, indices->ndim + 1));
}
