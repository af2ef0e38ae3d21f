/* Shape helpers shared by op builders and the backends. */
#ifndef LT_SHAPE_H
#define LT_SHAPE_H

#include <stdint.h>

#include "lazytensor.h"

/* The most elements a shape may hold, counted as the product of its non-zero
 * dims: the byte size of such a tensor in any dtype (8 bytes at most), and
 * twice that, fit in both int64_t and size_t, so byte counts, their sums and
 * every row-major stride are computed without wrapping (an empty shape is
 * held to it too, since its strides are the products of its other dims). */
#if SIZE_MAX < INT64_MAX
#define LT_MAX_NUMEL ((int64_t)(SIZE_MAX / 16))
#else
#define LT_MAX_NUMEL (INT64_MAX / 16)
#endif

/* Room for lt__shape_str of any shape of up to LT_MAX_DIMS dims. */
#define LT_SHAPE_STR_MAX 256

/* True when the dims of shape (all >= 0) stay within LT_MAX_NUMEL. */
bool lt__shape_fits(const int64_t *shape, int ndim);
/* LT_ESHAPE with a message naming fn and the shape when it exceeds
 * LT_MAX_NUMEL: the one size limit, checked by every op that makes a shape
 * and again by lt__node_new for every node. */
int lt__check_size(const char *fn, const int64_t *shape, int ndim);
/* numpy broadcast of two shapes into out (out_ndim set); false, with nothing
 * recorded, when they do not broadcast. No size check. */
bool lt__broadcast_shape(const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                         int *out_ndim);
/* numpy broadcast of two shapes into out (out_ndim set). LT_ESHAPE with a
 * message naming fn when they do not broadcast or the result exceeds
 * LT_MAX_NUMEL. */
int lt__broadcast(const char *fn, const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                  int *out_ndim);
/* True when shape `from` broadcasts to `to` (numpy rules). */
bool lt__broadcastable(const int64_t *from, int fn, const int64_t *to, int tn);
/* Normalises a possibly negative axis for rank ndim into [0, ndim);
 * LT_EINVAL naming fn when out of range. */
int lt__norm_axis(const char *fn, int axis, int ndim, int *out);
/* Validates a shape given by a user: ndim in [0, LT_MAX_DIMS], dims >= 0,
 * within LT_MAX_NUMEL. */
int lt__check_shape(const char *fn, const int64_t *shape, int ndim);

/* ---- flat index <-> coordinates, row-major (the last dim varies fastest) ---- */

/* Strides of a contiguous row-major layout of shape; returns the element
 * count (the product of the dims). */
static inline int64_t lt__row_major_strides(const int64_t *shape, int ndim, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d];
  }
  return s;
}

/* Unravels flat index i of shape into coords. A size-0 dim (no element to
 * address) gets coordinate 0, and so do the dims before it. */
static inline void lt__unravel(int64_t i, const int64_t *shape, int ndim, int64_t *coords) {
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t s = shape[d];
    coords[d] = s ? i % s : 0;
    i = s ? i / s : 0;
  }
}

/* Offset of flat index i of shape in a layout with the given strides: the
 * unravelled coordinates dotted with the strides (a size-0 dim as in
 * lt__unravel). */
static inline int64_t lt__unravel_offset(int64_t i, const int64_t *shape, const int64_t *strides,
                                         int ndim) {
  int64_t off = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    int64_t s = shape[d];
    off += (s ? i % s : 0) * strides[d];
    i = s ? i / s : 0;
  }
  return off;
}

/* Flat index of coords in shape. */
static inline int64_t lt__ravel(const int64_t *coords, const int64_t *shape, int ndim) {
  int64_t i = 0;
  for (int d = 0; d < ndim; d++) i = i * shape[d] + coords[d];
  return i;
}

/* Flat index in shape (ndim dims) of the element that broadcasts to coords
 * of rank out_ndim >= ndim: the dims align to the right, size-1 dims repeat. */
static inline int64_t lt__bcast_ravel(const int64_t *shape, int ndim, const int64_t *coords,
                                      int out_ndim) {
  int64_t i = 0;
  int off = out_ndim - ndim;
  for (int d = 0; d < ndim; d++) i = i * shape[d] + (shape[d] == 1 ? 0 : coords[d + off]);
  return i;
}

#endif
