/* Convolution and pooling (NCHW): lt_conv2d_n, lt_conv_transpose2d_n,
 * lt_max_pool2d_n, lt_avg_pool2d_n, lt_adaptive_avg_pool2d_n, lt_flatten.
 *
 * Primitives (op table, family CONV): conv2d is CONV2D (CONV2D_BIAS with a
 * bias); conv_transpose2d is
 * CONV2D_GRAD_INPUT (the transpose of a convolution); max_pool2d is a
 * POOL_GATHER of each plane through MAX_POOL2D_ARGMAX's window maxima, so its
 * gradient is a POOL_SCATTER_ADD to each window's argmax. The rest are composites:
 * avg_pool2d sums each window by a CONV2D with a ones kernel over the planes
 * and divides by a divisor fixed at trace time; adaptive_avg_pool2d is slices
 * and means, axis by axis (a window's mean is the mean of its rows' means);
 * flatten is a reshape.
 *
 * Arguments are checked as PyTorch checks them. 3-d inputs [C, H, W] are
 * batches of one, reshaped around the nodes. */
#include <math.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_ops.h"
#include "op_autocast.h"

/* Attribute values beyond this are rejected as too large (so that no size
 * computation can overflow; the ref kernels hold attrs to the same bound). */
#define CONV_LIMIT ((int64_t)1 << 40)

static int need_float(const char *fn, const char *what, const lt_tensor *t) {
  if (lt__is_float(t->dtype)) return LT_OK;
  return lt__err(LT_EDTYPE, "%s: %s must be f32 or f64, got %s", fn, what,
                 lt_dtype_name((lt_dtype)t->dtype));
}

/* An {h, w} argument of nv entries (the header's rule): 2 is {h, w}, 1 one
 * value for both axes, 0 {dflt, dflt}; each at least lo and at most
 * CONV_LIMIT. */
static int pair_arg(const char *fn, const char *what, const int64_t *v, int nv, int64_t dflt,
                    int64_t lo, int64_t out[2]) {
  if (nv < 0 || nv > 2)
    return lt__err(LT_EINVAL,
                   "%s: %s has %d entries; it takes 2 ({h, w}), 1 (both axes) or 0 (the default)",
                   fn, what, nv);
  if (nv > 0 && !v) return lt__err(LT_EINVAL, "%s: %s is NULL with %d entries", fn, what, nv);
  out[0] = nv > 0 ? v[0] : dflt;
  out[1] = nv == 2 ? v[1] : out[0];
  for (int i = 0; i < 2; i++) {
    if (out[i] < lo)
      return lt__err(LT_EINVAL, "%s: %s must be %s, got {%lld, %lld}", fn, what,
                     lo > 0 ? "positive" : "non-negative", (long long)out[0], (long long)out[1]);
    if (out[i] > CONV_LIMIT)
      return lt__err(LT_EINVAL, "%s: %s {%lld, %lld} is too large", fn, what, (long long)out[0],
                     (long long)out[1]);
  }
  return LT_OK;
}

/* A pair_arg without a default (a kernel, an output size): 1 or 2 entries. */
static int required_pair_arg(const char *fn, const char *what, const int64_t *v, int nv, int64_t lo,
                             int64_t out[2]) {
  if (nv < 1 || nv > 2)
    return lt__err(LT_EINVAL, "%s: %s has %d entries; it takes 2 ({h, w}) or 1 (both axes)", fn,
                   what, nv);
  return pair_arg(fn, what, v, nv, 0, lo, out);
}

/* A spatial input size or kernel size the arithmetic below can take. */
static int size_ok(const char *fn, const char *what, int64_t n) {
  if (n <= CONV_LIMIT) return LT_OK;
  return lt__err(LT_ESHAPE, "%s: %s %lld is too large", fn, what, (long long)n);
}

/* in + 2p - d (k - 1) - 1: the room a window has to move along an axis
 * (negative: the kernel is larger than the padded input). All arguments are
 * within CONV_LIMIT, so nothing overflows. */
static int64_t room(int64_t in, int64_t k, int64_t p, int64_t d) {
  return in + 2 * p - d * (k - 1) - 1;
}

/* The dilated kernel d (k - 1) + 1 along both axes within CONV_LIMIT, so that
 * room() cannot overflow. */
static int span_ok(const char *fn, const int64_t *k, const int64_t *d) {
  for (int i = 0; i < 2; i++)
    if (k[i] - 1 > CONV_LIMIT / d[i])
      return lt__err(LT_EINVAL, "%s: kernel {%lld, %lld} with dilation {%lld, %lld} is too large",
                     fn, (long long)k[0], (long long)k[1], (long long)d[0], (long long)d[1]);
  return LT_OK;
}

/* Floor division that rounds toward -inf for a positive divisor. */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The input as [N, C, H, W]: 3-d [C, H, W] is a batch of one. */
static int batch4(const char *fn, const lt_tensor *x, int64_t s[4]) {
  if (x->ndim != 3 && x->ndim != 4) {
    char sx[LT_SHAPE_STR_MAX];
    return lt__err(LT_ESHAPE, "%s: input must be 3-d [C, H, W] or 4-d [N, C, H, W], got shape %s",
                   fn, lt__shape_str(x->shape, x->ndim, sx, sizeof sx));
  }
  int off = 4 - x->ndim;
  s[0] = 1;
  for (int d = 0; d < x->ndim; d++) s[d + off] = x->shape[d];
  for (int d = 2; d < 4; d++)
    if (size_ok(fn, "input size", s[d]) != LT_OK) return LT_ESHAPE;
  return LT_OK;
}

/* The node of t as dt, reshaped to shape (NEW reference). */
static lt_node *as_shape(lt_tensor *t, lt_dtype dt, const int64_t *shape, int nd) {
  return lt__node_reshape(lt__ir_as(t, dt), shape, nd);
}

/* A node of shape [N, K, OH, OW] back to the caller's rank (3-d input: [K, OH, OW]). */
static lt_node *unbatch(lt_node *y, int ndim) {
  if (!y || ndim == 4) return y;
  return lt__node_reshape(y, y->shape + 1, 3);
}

/* ---- convolution ------------------------------------------------------------------------ */

/* Checks bias (NULL or [k], float). */
static int check_bias(const char *fn, const lt_tensor *bias, int64_t k) {
  if (!bias) return LT_OK;
  if (need_float(fn, "bias", bias) != LT_OK) return LT_EDTYPE;
  if (bias->ndim == 1 && bias->shape[0] == k) return LT_OK;
  char sb[LT_SHAPE_STR_MAX];
  return lt__err(LT_ESHAPE, "%s: bias must be 1-d with %lld elements (the output channels), got %s",
                 fn, (long long)k, lt__shape_str(bias->shape, bias->ndim, sb, sizeof sb));
}

/* Operands, dtypes and the common arguments of both convolutions; dt gets
 * the promoted dtype of x, weight and bias. */
static int conv_common(const char *fn, lt_tensor *x, lt_tensor *weight, lt_tensor *bias,
                       int64_t groups, int64_t xs[4], lt_dtype *dt) {
  lt_tensor *ts[3] = {x, weight, bias};
  int n = bias ? 3 : 2;
  if (lt__check_operands(fn, ts, n) != LT_OK) return LT_EINVAL;
  if (need_float(fn, "input", x) != LT_OK || need_float(fn, "weight", weight) != LT_OK)
    return LT_EDTYPE;
  if (batch4(fn, x, xs) != LT_OK) return LT_ESHAPE;
  if (weight->ndim != 4) {
    char sw[LT_SHAPE_STR_MAX];
    return lt__err(LT_ESHAPE, "%s: weight must be 4-d, got shape %s", fn,
                   lt__shape_str(weight->shape, weight->ndim, sw, sizeof sw));
  }
  if (groups < 1)
    return lt__err(LT_EINVAL, "%s: groups must be positive, got %lld", fn, (long long)groups);
  for (int d = 2; d < 4; d++) {
    if (weight->shape[d] < 1) return lt__err(LT_ESHAPE, "%s: the kernel has a size 0 axis", fn);
    if (size_ok(fn, "kernel size", weight->shape[d]) != LT_OK) return LT_ESHAPE;
  }
  *dt = lt__promote((const lt_tensor *const *)ts, n);
  return LT_OK;
}

/* y (consumed) plus bias (may be NULL) along axis 1, then back to the caller's rank. */
static lt_tensor *finish_conv(lt_tensor *x, lt_node *y, lt_tensor *bias, lt_dtype dt) {
  if (bias) {
    int64_t bs[3] = {bias->shape[0], 1, 1};
    y = lt__node_bin(LT_OP_ADD, y, as_shape(bias, dt, bs, 3));
  }
  return lt__wrap(x->dev, unbatch(y, x->ndim));
}

lt_tensor *lt_conv2d_n(lt_tensor *x, lt_tensor *weight, lt_tensor *bias, const int64_t *stride,
                       int nstride, const int64_t *padding, int npadding, const int64_t *dilation,
                       int ndilation, int64_t groups) {
  static const char *fn = "lt_conv2d_n";
  int64_t xs[4], s[2], p[2], d[2];
  lt_dtype dt;
  if (conv_common(fn, x, weight, bias, groups, xs, &dt) != LT_OK) return NULL;
  dt = lt__autocast_dtype(x->dev, LT_AUTOCAST_CONV2D, dt);
  if (pair_arg(fn, "stride", stride, nstride, 1, 1, s) != LT_OK ||
      pair_arg(fn, "padding", padding, npadding, 0, 0, p) != LT_OK ||
      pair_arg(fn, "dilation", dilation, ndilation, 1, 1, d) != LT_OK)
    return NULL;
  const int64_t *ws = weight->shape;
  int64_t c = xs[1], o = ws[0];
  if (o < groups || o % groups) {
    lt__err(LT_ESHAPE,
            "%s: the weight's %lld output channels are not a positive multiple of groups %lld", fn,
            (long long)o, (long long)groups);
    return NULL;
  }
  if (ws[1] * groups != c) {
    lt__err(LT_ESHAPE,
            "%s: input has %lld channels, but weight [%lld, %lld, %lld, %lld] with groups %lld "
            "expects %lld",
            fn, (long long)c, (long long)ws[0], (long long)ws[1], (long long)ws[2],
            (long long)ws[3], (long long)groups, (long long)(ws[1] * groups));
    return NULL;
  }
  if (check_bias(fn, bias, o) != LT_OK || span_ok(fn, ws + 2, d) != LT_OK) return NULL;
  int64_t rh = room(xs[2], ws[2], p[0], d[0]), rw = room(xs[3], ws[3], p[1], d[1]);
  if (rh < 0 || rw < 0) {
    lt__err(LT_ESHAPE,
            "%s: the padded input (%lld x %lld) is smaller than the dilated kernel (%lld x %lld): "
            "the output would be empty",
            fn, (long long)(xs[2] + 2 * p[0]), (long long)(xs[3] + 2 * p[1]),
            (long long)(d[0] * (ws[2] - 1) + 1), (long long)(d[1] * (ws[3] - 1) + 1));
    return NULL;
  }
  int64_t ys[4] = {xs[0], o, rh / s[0] + 1, rw / s[1] + 1};
  if (lt__check_size(fn, ys, 4) != LT_OK) return NULL;
  int64_t attrs[7] = {s[0], s[1], p[0], p[1], d[0], d[1], groups};
  /* The bias is an operand of the convolution (CONV2D_BIAS), not an add
   * after it: the cpu backend's primitive adds it while it writes the output,
   * where an add would be a loop of its own over the whole output (a
   * following batch norm reads the sum several times, so it is stored). */
  lt_node *ops[3] = {as_shape(x, dt, xs, 4), lt__ir_as(weight, dt),
                     bias ? lt__ir_as(bias, dt) : NULL};
  lt_node *y = lt__node_make(bias ? LT_OP_CONV2D_BIAS : LT_OP_CONV2D, dt, ys, 4, ops, bias ? 3 : 2,
                             attrs, 7, 0.0);
  return finish_conv(x, y, NULL, dt);
}

lt_tensor *lt_conv_transpose2d_n(lt_tensor *x, lt_tensor *weight, lt_tensor *bias,
                                 const int64_t *stride, int nstride, const int64_t *padding,
                                 int npadding, const int64_t *output_padding, int noutput_padding,
                                 const int64_t *dilation, int ndilation, int64_t groups) {
  static const char *fn = "lt_conv_transpose2d_n";
  int64_t xs[4], s[2], p[2], op[2], d[2];
  lt_dtype dt;
  if (conv_common(fn, x, weight, bias, groups, xs, &dt) != LT_OK) return NULL;
  dt = lt__autocast_dtype(x->dev, LT_AUTOCAST_CONV_TRANSPOSE2D, dt);
  if (pair_arg(fn, "stride", stride, nstride, 1, 1, s) != LT_OK ||
      pair_arg(fn, "padding", padding, npadding, 0, 0, p) != LT_OK ||
      pair_arg(fn, "output_padding", output_padding, noutput_padding, 0, 0, op) != LT_OK ||
      pair_arg(fn, "dilation", dilation, ndilation, 1, 1, d) != LT_OK)
    return NULL;
  for (int i = 0; i < 2; i++) {
    if (op[i] >= s[i] && op[i] >= d[i]) {
      lt__err(LT_EINVAL,
              "%s: output_padding {%lld, %lld} must be smaller than either stride {%lld, %lld} or "
              "dilation {%lld, %lld}",
              fn, (long long)op[0], (long long)op[1], (long long)s[0], (long long)s[1],
              (long long)d[0], (long long)d[1]);
      return NULL;
    }
  }
  const int64_t *ws = weight->shape;
  int64_t c = xs[1];
  if (ws[0] != c || c < groups || c % groups) {
    lt__err(LT_ESHAPE,
            "%s: weight [%lld, %lld, %lld, %lld] must have the input's %lld channels in dim 0, a "
            "positive multiple of groups %lld",
            fn, (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3],
            (long long)c, (long long)groups);
    return NULL;
  }
  int64_t o = ws[1] * groups;
  if (check_bias(fn, bias, o) != LT_OK || span_ok(fn, ws + 2, d) != LT_OK) return NULL;
  int64_t ys[4] = {xs[0], o, 0, 0};
  for (int i = 0; i < 2; i++) {
    if (xs[2 + i] - 1 > CONV_LIMIT / s[i]) {
      lt__err(LT_ESHAPE, "%s: the output would be too large (input %lld with stride %lld)", fn,
              (long long)xs[2 + i], (long long)s[i]);
      return NULL;
    }
    ys[2 + i] = (xs[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (ws[2 + i] - 1) + op[i] + 1;
    if (ys[2 + i] < 1) {
      lt__err(LT_ESHAPE, "%s: the output would be empty (size %lld along axis %d)", fn,
              (long long)ys[2 + i], 2 + i);
      return NULL;
    }
  }
  if (lt__check_size(fn, ys, 4) != LT_OK) return NULL;
  int64_t attrs[7] = {s[0], s[1], p[0], p[1], d[0], d[1], groups};
  lt_node *ops[2] = {as_shape(x, dt, xs, 4), lt__ir_as(weight, dt)};
  lt_node *y = lt__node_make(LT_OP_CONV2D_GRAD_INPUT, dt, ys, 4, ops, 2, attrs, 7, 0.0);
  return finish_conv(x, y, bias, dt);
}

/* ---- pooling ------------------------------------------------------------------------------ */

typedef struct pool_args {
  int64_t xs[4]; /* the input as [N, C, H, W] */
  int64_t k[2], s[2], p[2], d[2];
  int64_t out[2];
} pool_args;

/* PyTorch's pooling_output_shape: the conv formula, or with ceil_mode
 * rounded up, less one when the last window would start at or past the end
 * of the input and its left padding. */
static int64_t pool_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t r = room(in, k, p, d);
  int64_t n = floor_div(r + (ceil_mode ? s - 1 : 0), s) + 1;
  if (ceil_mode && (n - 1) * s >= in + p) n--;
  return n;
}

/* A pooling's {h, w} arguments with their counts (pair_arg). */
typedef struct pool_pairs {
  const int64_t *kernel, *stride, *padding, *dilation;
  int nkernel, nstride, npadding, ndilation;
} pool_pairs;

/* Checks a pooling's input and arguments as PyTorch does and fills a. */
static int pool_check(const char *fn, lt_tensor *x, const pool_pairs *g, bool ceil_mode,
                      pool_args *a) {
  if (lt__check_operands(fn, &x, 1) != LT_OK) return LT_EINVAL;
  if (need_float(fn, "input", x) != LT_OK) return LT_EDTYPE;
  if (batch4(fn, x, a->xs) != LT_OK) return LT_ESHAPE;
  for (int d = 4 - x->ndim; d < 4; d++) {
    if (d > 0 && a->xs[d] == 0) {
      char sx[LT_SHAPE_STR_MAX];
      return lt__err(LT_ESHAPE, "%s: input %s has a size 0 axis other than the batch", fn,
                     lt__shape_str(x->shape, x->ndim, sx, sizeof sx));
    }
  }
  if (required_pair_arg(fn, "kernel", g->kernel, g->nkernel, 1, a->k) != LT_OK) return LT_EINVAL;
  /* no stride: the kernel's */
  if (pair_arg(fn, "stride", g->nstride ? g->stride : a->k, g->nstride ? g->nstride : 2, 1, 1,
               a->s) != LT_OK ||
      pair_arg(fn, "padding", g->padding, g->npadding, 0, 0, a->p) != LT_OK ||
      pair_arg(fn, "dilation", g->dilation, g->ndilation, 1, 1, a->d) != LT_OK)
    return LT_EINVAL;
  if (span_ok(fn, a->k, a->d) != LT_OK) return LT_EINVAL;
  for (int i = 0; i < 2; i++) {
    if (a->p[i] > a->k[i] / 2)
      return lt__err(
          LT_EINVAL, "%s: padding {%lld, %lld} must be at most half the kernel {%lld, %lld}", fn,
          (long long)a->p[0], (long long)a->p[1], (long long)a->k[0], (long long)a->k[1]);
  }
  for (int i = 0; i < 2; i++) {
    a->out[i] = pool_len(a->xs[2 + i], a->k[i], a->s[i], a->p[i], a->d[i], ceil_mode);
    if (a->out[i] < 1)
      return lt__err(LT_ESHAPE,
                     "%s: the output would be empty: input %lld x %lld is too small for kernel "
                     "{%lld, %lld} with padding {%lld, %lld} and dilation {%lld, %lld}",
                     fn, (long long)a->xs[2], (long long)a->xs[3], (long long)a->k[0],
                     (long long)a->k[1], (long long)a->p[0], (long long)a->p[1], (long long)a->d[0],
                     (long long)a->d[1]);
  }
  return LT_OK;
}

/* True when some window of an axis reads padding only (possible with a
 * dilation larger than the input). Only a window that starts in the left
 * padding can (the output size keeps every other start inside the input),
 * and its first tap at or past 0 is below d and among the first
 * ceil(p / d) <= k / 2 taps. */
static bool some_window_empty(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
  if (d <= in) return false;
  for (int64_t a = 0; a < out && a * s < p; a++) {
    int64_t start = a * s - p, first = start;
    if (start < 0) first = start + (-start + d - 1) / d * d; /* the first tap at or past 0 */
    if (first >= in || (first - start) / d >= k) return true;
  }
  return false;
}

/* PyTorch gives a window of padding only -inf (the max over nothing), and its
 * gradient reaches no input element. MAX_POOL2D_ARGMAX marks such a window
 * with index -1: it reads plane element 0 instead, and a WHERE on the mark
 * puts -inf in its place, so that its gradient is a zero added to element 0.
 * Built only when the arguments make such a window (known at trace time).
 * Consumes x and arg. */
static lt_node *gather_windows(lt_node *x, lt_node *arg, lt_dtype dt, const int64_t *ys,
                               bool has_empty) {
  if (!has_empty) {
    lt_node *ops[2] = {x, arg};
    return lt__node_make(LT_OP_POOL_GATHER, dt, ys, 4, ops, 2, NULL, 0, 0.0);
  }
  lt_node *zero = lt__node_const(LT_I64, NULL, 0, 0.0);
  lt_node *real = lt__node_bin(LT_OP_GE, lt__node_retain(arg), lt__node_retain(zero));
  lt_node *ops[2] = {x, lt__node_bin(LT_OP_MAXIMUM, arg, zero)};
  lt_node *v = lt__node_make(LT_OP_POOL_GATHER, dt, ys, 4, ops, 2, NULL, 0, 0.0);
  return lt__node_where(real, v, lt__node_const(dt, NULL, 0, -INFINITY));
}

lt_tensor *lt_max_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel, const int64_t *stride,
                           int nstride, const int64_t *padding, int npadding,
                           const int64_t *dilation, int ndilation, bool ceil_mode) {
  static const char *fn = "lt_max_pool2d_n";
  pool_pairs g = {kernel, stride, padding, dilation, nkernel, nstride, npadding, ndilation};
  pool_args a;
  if (pool_check(fn, x, &g, ceil_mode, &a) != LT_OK) return NULL;
  bool has_empty = false;
  for (int i = 0; i < 2; i++)
    has_empty |= some_window_empty(a.xs[2 + i], a.out[i], a.k[i], a.s[i], a.p[i], a.d[i]);
  int64_t ys[4] = {a.xs[0], a.xs[1], a.out[0], a.out[1]};
  if (lt__check_size(fn, ys, 4) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)x->dtype;
  int64_t attrs[8] = {a.k[0], a.k[1], a.s[0], a.s[1], a.p[0], a.p[1], a.d[0], a.d[1]};
  lt_node *xn = as_shape(x, dt, a.xs, 4);
  lt_node *arg = lt__node_make(LT_OP_MAX_POOL2D_ARGMAX, LT_I64, ys, 4, &xn, 1, attrs, 8, 0.0);
  /* values: each plane read at its windows' flat indices (POOL_GATHER: its
   * gradient writes each plane's gradient directly, a POOL_SCATTER_ADD) */
  lt_node *v = gather_windows(as_shape(x, dt, a.xs, 4), arg, dt, ys, has_empty);
  return lt__wrap(x->dev, unbatch(v, x->ndim));
}

/* A data leaf of dt and shape [n0, n1] holding v (NEW reference). */
static lt_node *host_leaf(lt_device dev, lt_dtype dt, const double *v, int64_t n0, int64_t n1) {
  int64_t shape[2] = {n0, n1}, n = n0 * n1;
  size_t nbytes = (size_t)n * lt_dtype_size(dt);
  void *p = lt__malloc(nbytes ? nbytes : 1);
  if (!p) return NULL;
  for (int64_t i = 0; i < n; i++) lt__store_f64(dt, p, i, v[i]);
  lt_tensor *t = lt__tensor_from_host(dev, dt, shape, 2, p, nbytes);
  if (!t) {
    lt__free(p, nbytes ? nbytes : 1);
    return NULL;
  }
  lt_node *node = lt__node_retain(lt__tensor_ir(t)); /* uploads; the node keeps the buffer */
  lt__tensor_discard(t);
  return node;
}

/* PyTorch's avg_pool2d divisor of window (a, b): the window clipped to the
 * padded input (count_include_pad) or to the input itself. */
static double avg_divisor(const pool_args *g, int64_t a, int64_t b, bool include_pad) {
  int64_t n[2];
  for (int i = 0; i < 2; i++) {
    int64_t in = g->xs[2 + i], start = (i ? b : a) * g->s[i] - g->p[i];
    int64_t end = start + g->k[i];
    if (end > in + g->p[i]) end = in + g->p[i];
    if (!include_pad) {
      if (start < 0) start = 0;
      if (end > in) end = in;
    }
    n[i] = end - start;
  }
  return (double)(n[0] * n[1]);
}

/* The divisors of every window: a scalar when they are all equal (the
 * common case), else an [OH, OW] data leaf (NEW reference). */
static lt_node *avg_divisors(lt_device dev, lt_dtype dt, const pool_args *g, bool include_pad,
                             int64_t divisor_override) {
  if (divisor_override > 0) return lt__scalar_node(dev, dt, (double)divisor_override);
  if (g->xs[0] * g->xs[1] == 0) return lt__scalar_node(dev, dt, 1.0); /* nothing to divide */
  int64_t n = g->out[0] * g->out[1];
  size_t nbytes = sizeof(double) * (size_t)n;
  double *v = lt__malloc(nbytes);
  if (!v) return NULL;
  bool same = true;
  for (int64_t a = 0; a < g->out[0]; a++)
    for (int64_t b = 0; b < g->out[1]; b++) {
      v[a * g->out[1] + b] = avg_divisor(g, a, b, include_pad);
      same = same && v[a * g->out[1] + b] == v[0];
    }
  lt_node *r = same ? lt__scalar_node(dev, dt, v[0]) : host_leaf(dev, dt, v, g->out[0], g->out[1]);
  lt__free(v, nbytes);
  return r;
}

lt_tensor *lt_avg_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel, const int64_t *stride,
                           int nstride, const int64_t *padding, int npadding, bool ceil_mode,
                           bool count_include_pad, int64_t divisor_override) {
  static const char *fn = "lt_avg_pool2d_n";
  pool_pairs g = {kernel, stride, padding, NULL, nkernel, nstride, npadding, 0};
  pool_args a;
  if (pool_check(fn, x, &g, ceil_mode, &a) != LT_OK) return NULL;
  if (divisor_override < 0) {
    lt__err(LT_EINVAL, "%s: divisor_override must be positive (or 0: none), got %lld", fn,
            (long long)divisor_override);
    return NULL;
  }
  int64_t ys[4] = {a.xs[0], a.xs[1], a.out[0], a.out[1]};
  if (lt__check_size(fn, ys, 4) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)x->dtype;
  /* Window sums: a ones kernel over every plane as a 1-channel image. The
   * last window of ceil_mode may reach past the right padding; zeros padded
   * there first make the conv formula give ceil_mode's size. */
  int64_t planes[4] = {a.xs[0] * a.xs[1], 1, a.xs[2], a.xs[3]};
  lt_node *xn = as_shape(x, dt, planes, 4);
  int64_t extra[2], pads[8] = {0}, padded[4];
  memcpy(padded, planes, sizeof padded);
  for (int i = 0; i < 2; i++) {
    extra[i] = (a.out[i] - 1) * a.s[i] + a.k[i] - (a.xs[2 + i] + 2 * a.p[i]);
    if (extra[i] < 0) extra[i] = 0;
    pads[2 * (2 + i) + 1] = extra[i];
    padded[2 + i] += extra[i];
  }
  if (xn && (extra[0] || extra[1]))
    xn = lt__node_make(LT_OP_PAD, dt, padded, 4, &xn, 1, pads, 8, 0.0);
  int64_t ks[4] = {1, 1, a.k[0], a.k[1]};
  int64_t attrs[7] = {a.s[0], a.s[1], a.p[0], a.p[1], 1, 1, 1};
  int64_t sums[4] = {planes[0], 1, a.out[0], a.out[1]};
  lt_node *ops[2] = {xn, lt__node_const(dt, ks, 4, 1.0)};
  lt_node *sum = lt__node_make(LT_OP_CONV2D, dt, sums, 4, ops, 2, attrs, 7, 0.0);
  lt_node *y = lt__node_bin(LT_OP_DIV, sum,
                            avg_divisors(x->dev, dt, &a, count_include_pad, divisor_override));
  return lt__wrap(x->dev, unbatch(lt__node_reshape(y, ys, 4), x->ndim));
}

/* The mean of x (consumed) over the adaptive windows of axis ax, out of them:
 * window i covers [floor(i n / out), ceil((i + 1) n / out)). */
static lt_node *adaptive_axis(lt_node *x, int ax, int64_t out) {
  if (!x) return NULL;
  int64_t n = x->shape[ax];
  if (out == n) { /* windows of one element each */
    return x;
  }
  int nd = x->ndim;
  int64_t shape[LT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
  shape[ax] = out;
  if (out == 0) {
    lt_node *e = lt__node_const((lt_dtype)x->dtype, shape, nd, 0.0);
    lt__node_release(x);
    return e;
  }
  size_t bytes = sizeof(lt_node *) * (size_t)out;
  lt_node **parts = lt__calloc(bytes);
  if (!parts) {
    lt__node_release(x);
    return NULL;
  }
  for (int64_t i = 0; i < out; i++) {
    int64_t start = i * n / out, end = ((i + 1) * n + out - 1) / out;
    int64_t ss[LT_MAX_DIMS], attrs[2 * LT_MAX_DIMS];
    memcpy(ss, x->shape, sizeof(int64_t) * (size_t)nd);
    ss[ax] = end - start;
    for (int d = 0; d < nd; d++) {
      attrs[d] = d == ax ? start : 0;
      attrs[nd + d] = 1;
    }
    lt_node *s = lt__node_retain(x);
    if (end - start != n)
      s = lt__node_make(LT_OP_SLICE, (lt_dtype)x->dtype, ss, nd, &s, 1, attrs, 2 * nd, 0.0);
    parts[i] = lt__node_reduce(LT_OP_MEAN, s, (int64_t)1 << ax, true);
  }
  lt__node_release(x);
  lt_node *r;
  if (out == 1) {
    r = parts[0];
  } else {
    int64_t attr = ax;
    r = lt__node_make(LT_OP_CONCAT, (lt_dtype)parts[0]->dtype, shape, nd, parts, (int)out, &attr, 1,
                      0.0);
  }
  lt__free(parts, bytes);
  return r;
}

lt_tensor *lt_adaptive_avg_pool2d_n(lt_tensor *x, const int64_t *output_size, int noutput_size) {
  static const char *fn = "lt_adaptive_avg_pool2d_n";
  if (lt__check_operands(fn, &x, 1) != LT_OK) return NULL;
  if (need_float(fn, "input", x) != LT_OK) return NULL;
  int64_t xs[4];
  if (batch4(fn, x, xs) != LT_OK) return NULL;
  if (xs[2] == 0 || xs[3] == 0) {
    char sx[LT_SHAPE_STR_MAX];
    lt__err(LT_ESHAPE, "%s: input %s has an empty spatial axis", fn,
            lt__shape_str(x->shape, x->ndim, sx, sizeof sx));
    return NULL;
  }
  int64_t out[2];
  if (required_pair_arg(fn, "output_size", output_size, noutput_size, 0, out) != LT_OK) return NULL;
  /* one slice and mean per output row and column: keep graphs of sane size */
  for (int i = 0; i < 2; i++) {
    if (out[i] > 4096) {
      lt__err(LT_EINVAL, "%s: output_size {%lld, %lld} is too large (at most 4096 per axis)", fn,
              (long long)out[0], (long long)out[1]);
      return NULL;
    }
  }
  int64_t ys[4] = {xs[0], xs[1], out[0], out[1]};
  if (lt__check_size(fn, ys, 4) != LT_OK) return NULL;
  lt_node *y = as_shape(x, (lt_dtype)x->dtype, xs, 4);
  y = adaptive_axis(adaptive_axis(y, 2, out[0]), 3, out[1]);
  return lt__wrap(x->dev, unbatch(y, x->ndim));
}

/* ---- flatten -------------------------------------------------------------------------------- */

lt_tensor *lt_flatten(lt_tensor *x, int start_axis, int end_axis) {
  static const char *fn = "lt_flatten";
  if (lt__check_operands(fn, &x, 1) != LT_OK) return NULL;
  /* torch: a 0-d tensor flattens to [1]; its one axis is 0 (or -1) */
  int nd = x->ndim ? x->ndim : 1, s, e;
  if (lt__norm_axis(fn, start_axis, nd, &s) != LT_OK ||
      lt__norm_axis(fn, end_axis, nd, &e) != LT_OK)
    return NULL;
  if (s > e) {
    lt__err(LT_EINVAL, "%s: start_axis %d comes after end_axis %d", fn, start_axis, end_axis);
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS];
  int n = 0;
  if (x->ndim == 0) {
    shape[n++] = 1;
  } else {
    for (int d = 0; d < s; d++) shape[n++] = x->shape[d];
    int64_t m = 1;
    for (int d = s; d <= e; d++) m *= x->shape[d];
    shape[n++] = m;
    for (int d = e + 1; d < x->ndim; d++) shape[n++] = x->shape[d];
  }
  return lt__wrap(x->dev, lt__node_reshape(lt__ir_as(x, (lt_dtype)x->dtype), shape, n));
}
