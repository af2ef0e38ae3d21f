/* Meshes (lazytensor_world.h): a world's ranks arranged in a named grid,
 * row-major. A mesh axis's replica groups are the ranks gsize = shape[a]
 * apart by gstride = the product of the later axes' sizes: what the
 * collectives over a mesh axis record (core/lt_collective.h), so that the
 * transports need to know nothing of meshes. */
#include <string.h>

#include "lazytensor_world.h"
#include "../core/lt_alloc.h"
#include "../core/lt_error.h"

struct lt_mesh {
  const lt_world *w;
  int ndim;
  int shape[LT_MESH_MAX_DIMS];
  char names[LT_MESH_MAX_DIMS][LT_MESH_NAME_MAX + 1];
};

int lt_mesh_new(const lt_world *w, int ndim, const int *shape, const char *const *names,
                lt_mesh **out) {
  static const char *fn = "lt_mesh_new";
  if (!out) return lt__err(LT_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  if (!w || !shape) return lt__err(LT_EINVAL, "%s: NULL world or shape", fn);
  if (ndim < 1 || ndim > LT_MESH_MAX_DIMS)
    return lt__err(LT_EINVAL, "%s: %d axes; a mesh has 1..%d", fn, ndim, LT_MESH_MAX_DIMS);
  lt_mesh m = {.w = w, .ndim = ndim};
  int64_t prod = 1;
  for (int a = 0; a < ndim; a++) {
    if (shape[a] < 1 || shape[a] > LT_MAX_DEVICES)
      return lt__err(LT_EINVAL, "%s: axis %d has size %d", fn, a, shape[a]);
    prod *= shape[a];
    m.shape[a] = shape[a];
    const char *nm = names ? names[a] : NULL;
    size_t len = nm ? strlen(nm) : 0;
    if (names && (!nm || len < 1 || len > LT_MESH_NAME_MAX))
      return lt__err(LT_EINVAL, "%s: axis %d's name must have 1..%d characters", fn, a,
                     LT_MESH_NAME_MAX);
    if (nm)
      memcpy(m.names[a], nm, len + 1);
    else
      m.names[a][0] = (char)('0' + a);
    for (int b = 0; b < a; b++)
      if (strcmp(m.names[a], m.names[b]) == 0)
        return lt__err(LT_EINVAL, "%s: axes %d and %d are both named \"%s\"", fn, b, a, m.names[a]);
  }
  if (prod != lt_world_size(w))
    return lt__err(LT_EINVAL, "%s: a mesh of %lld ranks over a world of %d", fn, (long long)prod,
                   lt_world_size(w));
  lt_mesh *p = lt__calloc(sizeof *p);
  if (!p) return lt__err(LT_ENOMEM, "%s: out of memory", fn);
  *p = m;
  *out = p;
  return LT_OK;
}

void lt_mesh_free(lt_mesh *m) {
  if (m) lt__free(m, sizeof *m);
}

const lt_world *lt_mesh_world(const lt_mesh *m) { return m ? m->w : NULL; }
int lt_mesh_ndim(const lt_mesh *m) { return m ? m->ndim : 0; }
int lt_mesh_size(const lt_mesh *m, int axis) {
  return m && axis >= 0 && axis < m->ndim ? m->shape[axis] : 0;
}

int lt_mesh_axis(const lt_mesh *m, const char *name) {
  if (!m || !name) {
    lt__err(LT_EINVAL, "lt_mesh_axis: NULL mesh or name");
    return -1;
  }
  for (int a = 0; a < m->ndim; a++)
    if (strcmp(m->names[a], name) == 0) return a;
  lt__err(LT_EINVAL, "lt_mesh_axis: the mesh has no axis named \"%s\"", name);
  return -1;
}

/* The product of the sizes of the axes after a: the distance between two
 * ranks one apart along a. */
static int stride_of(const lt_mesh *m, int axis) {
  int st = 1;
  for (int a = axis + 1; a < m->ndim; a++) st *= m->shape[a];
  return st;
}

int lt_mesh_coord(const lt_mesh *m, int rank, int axis) {
  if (!m || axis < 0 || axis >= m->ndim || rank < 0 || rank >= lt_world_size(m->w)) return -1;
  return rank / stride_of(m, axis) % m->shape[axis];
}
