/* Creation ops (host data, constants, ranges) and lazy assignment. */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_device.h"
#include "lt_ops.h"
#include "op_nograd.h"

static int check_create(const char *fn, lt_device dev, lt_dtype dt, const int64_t *shape,
                        int ndim) {
  if (!lt__exec_dev(fn, dev)) return LT_EDEVICE; /* also starts the backend's set-up */
  if (!lt__dtype_valid(dt)) return lt__err(LT_EDTYPE, "%s: invalid dtype %d", fn, (int)dt);
  return lt__check_shape(fn, shape, ndim);
}

/* Host data of the given shape: a copy of data, or zeros when data is NULL. */
static lt_tensor *from_host_copy(const char *fn, lt_device dev, lt_dtype dt, const int64_t *shape,
                                 int ndim, const void *data) {
  if (check_create(fn, dev, dt, shape, ndim) != LT_OK) return NULL;
  size_t nbytes = (size_t)lt__numel(shape, ndim) * lt_dtype_size(dt);
  void *copy = data ? lt__malloc(nbytes) : lt__calloc(nbytes);
  if (!copy) return NULL;
  if (data && nbytes) memcpy(copy, data, nbytes);
  lt_tensor *t = lt__tensor_from_host(dev, dt, shape, ndim, copy, nbytes);
  if (!t) lt__free(copy, nbytes);
  return t;
}

lt_tensor *lt_from_data(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                        const void *data) {
  if (!data) { /* only an empty tensor needs no data */
    if (check_create("lt_from_data", dev, dt, shape, ndim) != LT_OK) return NULL;
    if (lt__numel(shape, ndim) > 0) {
      lt__err(LT_EINVAL, "lt_from_data: data is NULL");
      return NULL;
    }
  }
  return from_host_copy("lt_from_data", dev, dt, shape, ndim, data);
}

lt_tensor *lt_from_f32(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                       const float *data) {
  const char *fn = "lt_from_f32";
  if (check_create(fn, dev, dt, shape, ndim) != LT_OK) return NULL;
  int64_t n = lt__numel(shape, ndim);
  if (!data && n > 0) {
    lt__err(LT_EINVAL, "%s: data is NULL", fn);
    return NULL;
  }
  size_t nbytes = (size_t)n * lt_dtype_size(dt);
  void *copy = lt__malloc(nbytes ? nbytes : 1);
  if (!copy) return NULL;
  /* each value converts as CAST from f32 does (the dtype table's store) */
  for (int64_t i = 0; i < n; i++) lt__store_f64(dt, copy, i, (double)data[i]);
  lt_tensor *t = lt__tensor_from_host(dev, dt, shape, ndim, copy, nbytes);
  if (!t) lt__free(copy, nbytes ? nbytes : 1);
  return t;
}

lt_tensor *lt__zeros_data(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim) {
  return from_host_copy("lt__zeros_data", dev, dt, shape, ndim, NULL);
}

/* lt_full, its errors naming fn (lt_zeros and lt_ones are its forms). */
static lt_tensor *full_named(const char *fn, lt_device dev, lt_dtype dt, const int64_t *shape,
                             int ndim, double value) {
  if (check_create(fn, dev, dt, shape, ndim) != LT_OK) return NULL;
  /* A full tensor is a scalar broadcast: the graph stays the same whatever the
   * value, unless the value is a constant the compiler may exploit. */
  lt_node *s = lt__scalar_node(dev, dt, value);
  if (!s) return NULL;
  if (s->op == LT_OP_CONST) {
    lt_node *c = lt__node_const(dt, shape, ndim, s->fattr);
    lt__node_release(s);
    return lt__wrap(dev, c);
  }
  if (ndim == 0) return lt__wrap(dev, s);
  return lt__make(dev, LT_OP_EXPAND, dt, shape, ndim, &s, 1, NULL, 0, 0.0);
}

lt_tensor *lt_full(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double value) {
  return full_named("lt_full", dev, dt, shape, ndim, value);
}

lt_tensor *lt_zeros(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim) {
  return full_named("lt_zeros", dev, dt, shape, ndim, 0.0);
}

lt_tensor *lt_ones(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim) {
  return full_named("lt_ones", dev, dt, shape, ndim, 1.0);
}

lt_tensor *lt_scalar(lt_device dev, lt_dtype dt, double value) {
  if (check_create("lt_scalar", dev, dt, NULL, 0) != LT_OK) return NULL;
  return lt__wrap(dev, lt__scalar_node(dev, dt, value));
}

/* Integer aranges as torch computes them: start and step truncated toward 0
 * to int64, each value start + i * step in int64, kept to the low bits of dt
 * (two's complement: the unsigned type of dt's width holds the same bits as
 * the signed one, and converts modulo 2^n). */
static void arange_int(void *p, lt_dtype dt, int64_t n, double start, double step) {
  uint64_t s = (uint64_t)(int64_t)start, d = (uint64_t)(int64_t)step;
  size_t width = lt_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) {
    uint64_t v = s + d * (uint64_t)i;
    if (width == 1)
      ((uint8_t *)p)[i] = (uint8_t)v;
    else if (width == 4)
      ((uint32_t *)p)[i] = (uint32_t)v;
    else
      ((uint64_t *)p)[i] = v;
  }
}

/* True when v truncates to an int64 without overflow. */
static bool fits_int64(double v) {
  return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
}

lt_tensor *lt_arange(lt_device dev, lt_dtype dt, double start, double stop, double step) {
  static const char *fn = "lt_arange";
  if (check_create(fn, dev, dt, NULL, 0) != LT_OK) return NULL;
  if (dt == LT_BOOL) {
    lt__err(LT_EDTYPE, "%s: bool is not accepted", fn);
    return NULL;
  }
  if (!isfinite(start) || !isfinite(stop) || !isfinite(step)) {
    lt__err(LT_EINVAL, "%s: need finite start, stop and step (got %g, %g, %g)", fn, start, stop,
            step);
    return NULL;
  }
  bool integral = lt__is_int(dt);
  if (integral && (!fits_int64(start) || !fits_int64(stop) || !fits_int64(step))) {
    lt__err(LT_EINVAL, "%s: start %g, stop %g or step %g does not fit in an integer", fn, start,
            stop, step);
    return NULL;
  }
  /* torch checks the bounds and the step as the dtype's accumulator holds
   * them: an integer dtype truncates all three toward 0 first, so a step
   * like 0.5 is a zero step there (torch: "step must be nonzero"). */
  double s0 = integral ? trunc(start) : start, s1 = integral ? trunc(stop) : stop;
  double ds = integral ? trunc(step) : step;
  if (ds == 0) {
    lt__err(LT_EINVAL, "%s: need a non-zero step (got %g%s; torch: step must be nonzero)", fn, step,
            integral ? ", 0 once truncated to an integer" : "");
    return NULL;
  }
  /* As torch: a range that the step walks away from is an error, not empty. */
  if ((ds > 0 && s1 < s0) || (ds < 0 && s1 > s0)) {
    lt__err(LT_EINVAL, "%s: start %g and stop %g are inconsistent with the sign of step %g", fn,
            start, stop, step);
    return NULL;
  }
  /* The length, torch's ceil((stop - start) / step) in double: from the
   * truncated values for i64, from the values as given for every other
   * dtype (torch.arange(0.5, 5, 1.5) has 5 elements in int64, 3 in int32). */
  double count = dt == LT_I64 ? ceil((s1 - s0) / ds) : ceil((stop - start) / step);
  /* (double)LT_MAX_NUMEL rounds up: the second test is the exact one. */
  if (count > (double)LT_MAX_NUMEL || (int64_t)count > LT_MAX_NUMEL) {
    lt__err(LT_ESHAPE, "%s: %g elements is too many (more than %lld)", fn, count,
            (long long)LT_MAX_NUMEL);
    return NULL;
  }
  /* The truncated bounds may be in order while the values as given are not
   * (0.9, -0.9, 1 in i32): a negative length, torch's "invalid size". */
  if (count < 0) {
    lt__err(LT_EINVAL, "%s: start %g, stop %g and step %g give a negative length", fn, start, stop,
            step);
    return NULL;
  }
  int64_t n = (int64_t)count;
  size_t nbytes = (size_t)n * lt_dtype_size(dt);
  void *p = lt__malloc(nbytes);
  if (!p) return NULL;
  if (integral)
    arange_int(p, dt, n, start, step);
  else /* start + i * step in double, then rounded to dt, as torch on cpu */
    for (int64_t i = 0; i < n; i++) lt__store_f64(dt, p, i, start + (double)i * step);
  lt_tensor *t = lt__tensor_from_host(dev, dt, &n, 1, p, nbytes);
  if (!t) lt__free(p, nbytes);
  return t;
}

lt_tensor *lt_eye(lt_device dev, lt_dtype dt, int64_t n, int64_t m) {
  if (m <= 0) m = n;
  int64_t shape[2] = {n, m};
  if (check_create("lt_eye", dev, dt, shape, 2) != LT_OK) return NULL;
  size_t nbytes = (size_t)(n * m) * lt_dtype_size(dt);
  void *p = lt__calloc(nbytes);
  if (!p) return NULL;
  for (int64_t i = 0; i < n && i < m; i++) lt__store_f64(dt, p, i * m + i, 1.0);
  lt_tensor *t = lt__tensor_from_host(dev, dt, shape, 2, p, nbytes);
  if (!t) lt__free(p, nbytes);
  return t;
}

int lt_assign(lt_tensor *dst, lt_tensor *src) {
  lt_tensor *ts[2] = {dst, src};
  /* dst keeps its sharding: src is brought to it (op_shard.c) */
  if (dst && src && dst != src && (dst->shard_n || src->shard_n) && lt__shard_aware_depth() == 0)
    return lt__shard_assign(dst, src);
  int rc = lt__check_operands("lt_assign", ts, 2);
  if (rc != LT_OK) return rc;
  if (dst == src) return LT_OK;
  if (!lt__broadcastable(src->shape, src->ndim, dst->shape, dst->ndim)) {
    char a[128], b[128];
    return lt__err(LT_ESHAPE, "lt_assign: source shape %s does not broadcast to %s",
                   lt__shape_str(src->shape, src->ndim, a, sizeof a),
                   lt__shape_str(dst->shape, dst->ndim, b, sizeof b));
  }
  lt_node *n = lt__ir_as(src, (lt_dtype)dst->dtype);
  if (n && (n->ndim != dst->ndim ||
            memcmp(n->shape, dst->shape, (size_t)dst->ndim * sizeof(int64_t)) != 0)) {
    if (n->op == LT_OP_CONST) {
      lt_node *c = lt__node_const((lt_dtype)n->dtype, dst->shape, dst->ndim, n->fattr);
      lt__node_release(n);
      n = c;
    } else {
      n = lt__node_make(LT_OP_EXPAND, (lt_dtype)dst->dtype, dst->shape, dst->ndim, &n, 1, NULL, 0,
                        0.0);
    }
  }
  /* Inside a no-grad scope the assigned value is a constant to autograd, as
   * torch's in-place updates under no_grad: gradients do not reach src. */
  n = lt__no_grad_mark(n);
  if (!n) return lt_last_status() ? lt_last_status() : LT_ENOMEM;
  lt__tensor_set_ir(dst, n);
  return LT_OK;
}
