/* The collective ops (lazytensor_dist.h): lt_all_reduce, lt_all_gather,
 * lt_reduce_scatter, lt_broadcast. Each records one COLLECTIVE node (layout
 * in lt_op_table.h); it runs where its graph runs, through the world of the
 * device executing it (backend/coll_instr.c).
 *
 * The operand's device must belong to a world when the op is traced: a
 * collective traced alone would otherwise fail only when run, far from its
 * cause. The world's size is read now, and the gather and scatter nodes
 * record it (their shapes depend on it). */
#include "lazytensor_collective.h"
#include "lt_ops.h"
#include "../core/lt_collective.h"

/* t's world (its device's binding); LT_EDEVICE when it has none. */
static int world_of(const char *fn, const lt_tensor *t, lt_coll_binding *b) {
  if (t->dev.type == LT_DEVICE_CPU && lt__coll_binding(t->dev.index, b)) return LT_OK;
  char dev[32];
  lt_device_str(t->dev, dev, sizeof dev);
  return lt__err(LT_EDEVICE,
                 "%s: %s belongs to no world; collectives run between the replicas of one "
                 "(lt_world_local)",
                 fn, dev);
}

static int check_redop(const char *fn, const lt_tensor *t, lt_reduce_op op) {
  if (op < LT_REDUCE_SUM || op > LT_REDUCE_MIN)
    return lt__err(LT_EINVAL, "%s: unknown reduction %d", fn, (int)op);
  if (t->dtype == LT_BOOL)
    return lt__err(LT_EDTYPE, "%s: bool tensors cannot be reduced (cast them first)", fn);
  if (op == LT_REDUCE_MEAN && !lt__is_float((lt_dtype)t->dtype))
    return lt__err(LT_EDTYPE, "%s: mean needs a float tensor, got %s", fn,
                   lt_dtype_name((lt_dtype)t->dtype));
  return LT_OK;
}

static lt_tensor *make(lt_tensor *t, lt_op op, const int64_t *shape, const int64_t *attrs,
                       int nattrs) {
  lt_node *x = lt__ir_as(t, (lt_dtype)t->dtype);
  return lt__make(t->dev, op, (lt_dtype)t->dtype, shape, t->ndim, &x, 1, attrs, nattrs, 0.0);
}

lt_tensor *lt_all_reduce(lt_tensor *t, lt_reduce_op op) {
  static const char *fn = "lt_all_reduce";
  lt_coll_binding b;
  if (lt__check_operands(fn, &t, 1) != LT_OK || world_of(fn, t, &b) != LT_OK ||
      check_redop(fn, t, op) != LT_OK)
    return NULL;
  int64_t attrs[1] = {op};
  return make(t, LT_OP_ALL_REDUCE, t->shape, attrs, 1);
}

lt_tensor *lt_all_gather(lt_tensor *t, int axis) {
  static const char *fn = "lt_all_gather";
  lt_coll_binding b;
  if (lt__check_operands(fn, &t, 1) != LT_OK || world_of(fn, t, &b) != LT_OK) return NULL;
  if (t->ndim == 0) {
    lt__err(LT_ESHAPE, "%s: a 0-d tensor has no axis to gather along (reshape it to [1])", fn);
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, t->ndim, &ax) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  shape[ax] *= b.size;
  int64_t attrs[2] = {ax, b.size};
  return make(t, LT_OP_ALL_GATHER, shape, attrs, 2);
}

lt_tensor *lt_reduce_scatter(lt_tensor *t, lt_reduce_op op, int axis) {
  static const char *fn = "lt_reduce_scatter";
  lt_coll_binding b;
  if (lt__check_operands(fn, &t, 1) != LT_OK || world_of(fn, t, &b) != LT_OK ||
      check_redop(fn, t, op) != LT_OK)
    return NULL;
  if (t->ndim == 0) {
    lt__err(LT_ESHAPE, "%s: a 0-d tensor has no axis to scatter along", fn);
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, t->ndim, &ax) != LT_OK) return NULL;
  if (t->shape[ax] % b.size != 0) {
    char s[96];
    lt__err(LT_ESHAPE, "%s: axis %d of %s does not divide into %d replicas", fn, ax,
            lt__shape_str(t->shape, t->ndim, s, sizeof s), b.size);
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  shape[ax] /= b.size;
  int64_t attrs[3] = {op, ax, b.size};
  return make(t, LT_OP_REDUCE_SCATTER, shape, attrs, 3);
}

lt_tensor *lt_broadcast(lt_tensor *t, int root) {
  static const char *fn = "lt_broadcast";
  lt_coll_binding b;
  if (lt__check_operands(fn, &t, 1) != LT_OK || world_of(fn, t, &b) != LT_OK) return NULL;
  if (root < 0 || root >= b.size) {
    lt__err(LT_EINVAL, "%s: root %d out of range for a world of %d replicas", fn, root, b.size);
    return NULL;
  }
  int64_t attrs[1] = {root};
  return make(t, LT_OP_BROADCAST, t->shape, attrs, 1);
}
