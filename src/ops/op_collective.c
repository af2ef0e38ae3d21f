/* The collective ops (lazytensor_dist.h): lt_all_reduce, lt_all_gather,
 * lt_reduce_scatter, lt_broadcast, lt_all_to_all, lt_collective_permute.
 * Each records one COLLECTIVE node (layout in lt_op_table.h); it runs where
 * its graph runs, through the world of the device executing it
 * (backend/coll_instr.c).
 *
 * The operand's device must belong to a world when the op is traced: a
 * collective traced alone would otherwise fail only when run, far from its
 * cause. The world's size is read now, and the gather and scatter nodes
 * record it (their shapes depend on it).
 *
 * The _over forms run within the replica groups of a mesh axis
 * (lazytensor_world.h): the node records the group as two trailing attrs,
 * its size and the stride between its ranks (core/lt_collective.h), and
 * a broadcast's root is a coordinate along the axis. */
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

/* Checks op for t's dtype and gives the reduction the node records: bool
 * reductions become max (any: or) and min (all: and) of 0/1 bytes, so the
 * kernels and transports know no reductions beyond the four. Bool follows
 * torch.distributed's NCCL group: sum and max are or, min is and, mean is
 * refused. */
static int check_redop(const char *fn, const lt_tensor *t, lt_reduce_op op, int64_t *redop) {
  if (op < LT_REDUCE_SUM || op > LT_REDUCE_ALL)
    return lt__err(LT_EINVAL, "%s: unknown reduction %d", fn, (int)op);
  bool any_all = op == LT_REDUCE_ANY || op == LT_REDUCE_ALL;
  if (t->dtype == LT_BOOL) {
    if (op == LT_REDUCE_MEAN)
      return lt__err(LT_EDTYPE, "%s: mean of bool tensors (use any or all, or cast first)", fn);
    *redop = op == LT_REDUCE_MIN || op == LT_REDUCE_ALL ? LT_REDUCE_MIN : LT_REDUCE_MAX;
    return LT_OK;
  }
  if (any_all)
    return lt__err(LT_EDTYPE, "%s: %s needs a bool tensor, got %s", fn,
                   op == LT_REDUCE_ANY ? "any" : "all", lt_dtype_name((lt_dtype)t->dtype));
  if (op == LT_REDUCE_MEAN && !lt__is_float((lt_dtype)t->dtype))
    return lt__err(LT_EDTYPE, "%s: mean needs a float tensor, got %s", fn,
                   lt_dtype_name((lt_dtype)t->dtype));
  *redop = op;
  return LT_OK;
}

static lt_tensor *make(lt_tensor *t, lt_op op, const int64_t *shape, const int64_t *attrs,
                       int nattrs) {
  lt_node *x = lt__ir_as(t, (lt_dtype)t->dtype);
  return lt__make(t->dev, op, (lt_dtype)t->dtype, shape, t->ndim, &x, 1, attrs, nattrs, 0.0);
}

/* The replica group a collective runs in: size ranks stride apart, or the
 * whole world (stride 0; size: the world's size). */
typedef struct group {
  int size, stride;
} group;

/* t's world as one group (mesh NULL), or the groups of mesh's axis, t's
 * device being one of the mesh's world's. */
static int group_of(const char *fn, const lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                    group *g) {
  lt_coll_binding b;
  if (world_of(fn, t, &b) != LT_OK) return LT_EDEVICE;
  if (!mesh) {
    *g = (group){b.size, 0};
    return LT_OK;
  }
  const lt_world *w = lt_mesh_world(mesh);
  lt_device d = lt_world_device(w, b.rank);
  if (d.type != t->dev.type || d.index != t->dev.index) {
    char dev[32];
    lt_device_str(t->dev, dev, sizeof dev);
    return lt__err(LT_EDEVICE, "%s: %s is not a device of the mesh's world", fn, dev);
  }
  if (mesh_axis < 0 || mesh_axis >= lt_mesh_ndim(mesh))
    return lt__err(LT_EINVAL, "%s: mesh axis %d out of range for a mesh of %d axes", fn, mesh_axis,
                   lt_mesh_ndim(mesh));
  int stride = 1;
  for (int a = mesh_axis + 1; a < lt_mesh_ndim(mesh); a++) stride *= lt_mesh_size(mesh, a);
  *g = (group){lt_mesh_size(mesh, mesh_axis), stride};
  return LT_OK;
}

/* attrs followed by the group's {size, stride} when it is not the world:
 * the count of attrs. */
static int with_group(int64_t *attrs, int n, group g, bool has_size) {
  if (!g.stride) return n;
  if (!has_size) attrs[n++] = g.size;
  attrs[n++] = g.stride;
  return n;
}

static lt_tensor *all_reduce(const char *fn, lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                             lt_reduce_op op) {
  group g;
  int64_t redop = 0;
  if (lt__check_operands(fn, &t, 1) != LT_OK || group_of(fn, t, mesh, mesh_axis, &g) != LT_OK ||
      check_redop(fn, t, op, &redop) != LT_OK)
    return NULL;
  int64_t attrs[3] = {redop};
  return make(t, LT_OP_ALL_REDUCE, t->shape, attrs, with_group(attrs, 1, g, false));
}

static lt_tensor *all_gather(const char *fn, lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                             int axis) {
  group g;
  if (lt__check_operands(fn, &t, 1) != LT_OK || group_of(fn, t, mesh, mesh_axis, &g) != LT_OK)
    return NULL;
  if (t->ndim == 0) {
    lt__err(LT_ESHAPE, "%s: a 0-d tensor has no axis to gather along (reshape it to [1])", fn);
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, t->ndim, &ax) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  shape[ax] *= g.size;
  int64_t attrs[3] = {ax, g.size};
  return make(t, LT_OP_ALL_GATHER, shape, attrs, with_group(attrs, 2, g, true));
}

static lt_tensor *reduce_scatter(const char *fn, lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                                 lt_reduce_op op, int axis) {
  group g;
  int64_t redop = 0;
  if (lt__check_operands(fn, &t, 1) != LT_OK || group_of(fn, t, mesh, mesh_axis, &g) != LT_OK ||
      check_redop(fn, t, op, &redop) != LT_OK)
    return NULL;
  if (t->ndim == 0) {
    lt__err(LT_ESHAPE, "%s: a 0-d tensor has no axis to scatter along", fn);
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, t->ndim, &ax) != LT_OK) return NULL;
  if (lt__axis_divides(fn, "axis", t, ax, g.size) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  shape[ax] /= g.size;
  int64_t attrs[4] = {redop, ax, g.size};
  return make(t, LT_OP_REDUCE_SCATTER, shape, attrs, with_group(attrs, 3, g, true));
}

static lt_tensor *broadcast(const char *fn, lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                            int root) {
  group g;
  if (lt__check_operands(fn, &t, 1) != LT_OK || group_of(fn, t, mesh, mesh_axis, &g) != LT_OK)
    return NULL;
  if (root < 0 || root >= g.size) {
    lt__err(LT_EINVAL, "%s: root %d out of range for %s of %d replicas", fn, root,
            mesh ? "a mesh axis" : "a world", g.size);
    return NULL;
  }
  int64_t attrs[3] = {root};
  return make(t, LT_OP_BROADCAST, t->shape, attrs, with_group(attrs, 1, g, false));
}

lt_tensor *lt_all_reduce(lt_tensor *t, lt_reduce_op op) {
  return all_reduce("lt_all_reduce", t, NULL, 0, op);
}
lt_tensor *lt_all_gather(lt_tensor *t, int axis) {
  return all_gather("lt_all_gather", t, NULL, 0, axis);
}
lt_tensor *lt_reduce_scatter(lt_tensor *t, lt_reduce_op op, int axis) {
  return reduce_scatter("lt_reduce_scatter", t, NULL, 0, op, axis);
}
lt_tensor *lt_broadcast(lt_tensor *t, int root) {
  return broadcast("lt_broadcast", t, NULL, 0, root);
}

static bool have_mesh(const char *fn, const lt_mesh *mesh) {
  if (mesh) return true;
  lt__err(LT_EINVAL, "%s: mesh is NULL", fn);
  return false;
}

lt_tensor *lt_all_reduce_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis, lt_reduce_op op) {
  static const char *fn = "lt_all_reduce_over";
  return have_mesh(fn, mesh) ? all_reduce(fn, t, mesh, mesh_axis, op) : NULL;
}
lt_tensor *lt_all_gather_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis, int axis) {
  static const char *fn = "lt_all_gather_over";
  return have_mesh(fn, mesh) ? all_gather(fn, t, mesh, mesh_axis, axis) : NULL;
}
lt_tensor *lt_reduce_scatter_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis, lt_reduce_op op,
                                  int axis) {
  static const char *fn = "lt_reduce_scatter_over";
  return have_mesh(fn, mesh) ? reduce_scatter(fn, t, mesh, mesh_axis, op, axis) : NULL;
}
lt_tensor *lt_broadcast_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis, int root) {
  static const char *fn = "lt_broadcast_over";
  return have_mesh(fn, mesh) ? broadcast(fn, t, mesh, mesh_axis, root) : NULL;
}

lt_tensor *lt_all_to_all(lt_tensor *t, int split_axis, int concat_axis) {
  static const char *fn = "lt_all_to_all";
  lt_coll_binding b;
  if (lt__check_operands(fn, &t, 1) != LT_OK || world_of(fn, t, &b) != LT_OK) return NULL;
  if (t->ndim == 0) {
    lt__err(LT_ESHAPE, "%s: a 0-d tensor has no axis to split (reshape it to [1])", fn);
    return NULL;
  }
  int sa, ca;
  if (lt__norm_axis(fn, split_axis, t->ndim, &sa) != LT_OK ||
      lt__norm_axis(fn, concat_axis, t->ndim, &ca) != LT_OK)
    return NULL;
  if (lt__axis_divides(fn, "split axis", t, sa, b.size) != LT_OK) return NULL;
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  shape[sa] /= b.size;
  if (shape[ca] > LT_MAX_NUMEL / b.size) {
    lt__err(LT_ESHAPE, "%s: concatenating along axis %d makes too many elements", fn, ca);
    return NULL;
  }
  shape[ca] *= b.size;
  int64_t attrs[3] = {sa, ca, b.size};
  return make(t, LT_OP_ALL_TO_ALL, shape, attrs, 3);
}

lt_tensor *lt_collective_permute(lt_tensor *t, const int *pairs, int npairs) {
  static const char *fn = "lt_collective_permute";
  lt_coll_binding b;
  if (lt__check_operands(fn, &t, 1) != LT_OK || world_of(fn, t, &b) != LT_OK) return NULL;
  if (npairs < 0 || npairs > b.size || (npairs > 0 && !pairs)) {
    lt__err(LT_EINVAL, "%s: %d pairs%s; a world of %d replicas takes 0..%d", fn, npairs,
            npairs > 0 && !pairs ? " and pairs is NULL" : "", b.size, b.size);
    return NULL;
  }
  bool is_src[LT_MAX_DEVICES] = {0}, is_dst[LT_MAX_DEVICES] = {0};
  /* attrs {size, s0, t0, s1, t1, ...}: the pairs in the caller's order (the
   * graph key tells different orders apart, which is harmless) */
  int64_t attrs[1 + 2 * LT_MAX_DEVICES];
  attrs[0] = b.size;
  for (int k = 0; k < npairs; k++) {
    int src = pairs[2 * k], dst = pairs[2 * k + 1];
    if (src < 0 || src >= b.size || dst < 0 || dst >= b.size) {
      lt__err(LT_EINVAL, "%s: pair %d (%d -> %d) names a rank outside 0..%d", fn, k, src, dst,
              b.size - 1);
      return NULL;
    }
    if (is_src[src] || is_dst[dst]) {
      lt__err(LT_EINVAL, "%s: pair %d (%d -> %d): rank %d is %s of two pairs", fn, k, src, dst,
              is_src[src] ? src : dst, is_src[src] ? "the source" : "the target");
      return NULL;
    }
    is_src[src] = is_dst[dst] = true;
    attrs[1 + 2 * k] = src;
    attrs[2 + 2 * k] = dst;
  }
  return make(t, LT_OP_COLLECTIVE_PERMUTE, t->shape, attrs, 1 + 2 * npairs);
}
