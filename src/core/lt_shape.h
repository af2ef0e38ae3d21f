/* Shape helpers shared by op builders. */
#ifndef LT_SHAPE_H
#define LT_SHAPE_H

#include "lazytensor.h"

/* numpy broadcast of two shapes into out (out_ndim set). LT_ESHAPE with a
 * message naming fn when they do not broadcast. */
int lt__broadcast(const char *fn, const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                  int *out_ndim);
/* True when shape `from` broadcasts to `to` (numpy rules). */
bool lt__broadcastable(const int64_t *from, int fn, const int64_t *to, int tn);
/* Normalises a possibly negative axis for rank ndim into [0, ndim);
 * LT_EINVAL naming fn when out of range. */
int lt__norm_axis(const char *fn, int axis, int ndim, int *out);
/* Validates a shape given by a user: ndim in [0, LT_MAX_DIMS], dims >= 0. */
int lt__check_shape(const char *fn, const int64_t *shape, int ndim);

#endif
