/* The IR's contract per op (lt_node_rules.h): each family's operands, dtypes,
 * attrs and result shape, as the op table's comments lay them out and as the
 * kernels read them. Every rule names the field it is about, so that a
 * rejected node says what is wrong with it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lt_dtype.h"
#include "lt_error.h"
#include "lt_node_rules.h"
#include "lt_caller.h"
#include "lt_shape.h"

lt_mm_fit lt__matmul_shape(const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                           int *out_ndim) {
  if (an < 2 || bn < 2) return LT_MM_RANK;
  if (a[an - 1] != b[bn - 2]) return LT_MM_CONTRACTION;
  int nd = 0;
  if (!lt__broadcast_shape(a, an - 2, b, bn - 2, out, &nd) || nd + 2 > LT_MAX_DIMS)
    return LT_MM_BATCH;
  out[nd++] = a[an - 2];
  out[nd++] = b[bn - 1];
  *out_ndim = nd;
  return LT_MM_OK;
}

void lt__reduce_shape(const int64_t *shape, int ndim, int64_t mask, bool keepdim, int64_t *out,
                      int *out_ndim) {
  int nd = 0;
  for (int d = 0; d < ndim; d++) {
    if (!((mask >> d) & 1))
      out[nd++] = shape[d];
    else if (keepdim)
      out[nd++] = 1;
  }
  *out_ndim = nd;
}

int64_t lt__conv_windows(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t lim = LT_CONV_LIMIT;
  if (k < 1 || k > lim || s < 1 || s > lim || p < 0 || p > lim || d < 1 || d > lim || in < 0 ||
      in > lim)
    return -1;
  if (k - 1 > lim / d) return -1; /* (k - 1) d would leave the range */
  int64_t room = in + 2 * p - d * (k - 1) - 1;
  return room < 0 ? 0 : room / s + 1;
}

/* ---- the check ------------------------------------------------------------------- */

typedef struct ck {
  char *why;
  size_t n;
  lt_op op;
  lt_dtype dt;
  const int64_t *shape;
  int ndim;
  const lt_rule_operand *ops;
  int nops;
  const int64_t *attrs;
  int nattrs;
} ck;

__attribute__((format(printf, 2, 3))) static const char *bad(ck *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, c->n, fmt, ap);
  va_end(ap);
  return c->why;
}

static bool same_shape(const int64_t *a, int an, const int64_t *b, int bn) {
  return an == bn && memcmp(a, b, (size_t)an * sizeof *a) == 0;
}

/* The node's shape must be want (what its operands and attrs give). */
static const char *want_shape(ck *c, const int64_t *want, int wn) {
  if (same_shape(c->shape, c->ndim, want, wn)) return NULL;
  char g[LT_SHAPE_STR_MAX], w[LT_SHAPE_STR_MAX];
  return bad(c, "shape %s where the operands and attrs give %s",
             lt__shape_str(c->shape, c->ndim, g, sizeof g), lt__shape_str(want, wn, w, sizeof w));
}

static const char *want_nattrs(ck *c, int n) {
  if (c->nattrs == n) return NULL;
  return bad(c, "%d attrs where the op takes %d", c->nattrs, n);
}

/* An index op's attrs: its own one, and the id of the public function that
 * built it when it was built inside a caller scope (lt_caller.h). */
static const char *want_index_attrs(ck *c) {
  if (c->nattrs == 2 && lt__caller_known(c->attrs[1])) return NULL;
  if (c->nattrs == 2)
    return bad(c, "attr 1 (caller) %lld is no known caller", (long long)c->attrs[1]);
  return want_nattrs(c, 1);
}

static const char *want_dtype(ck *c, int k, lt_dtype dt) {
  if (c->ops[k].dtype == dt) return NULL;
  return bad(c, "operand %d dtype %s where the op takes %s", k,
             lt_dtype_name((lt_dtype)c->ops[k].dtype), lt_dtype_name(dt));
}

static const char *want_float(ck *c, int k) {
  if (lt__is_float((lt_dtype)c->ops[k].dtype)) return NULL;
  return bad(c, "operand %d dtype %s where the op takes f32 or f64", k,
             lt_dtype_name((lt_dtype)c->ops[k].dtype));
}

static const char *want_rank(ck *c, int k, int lo, int hi) {
  int r = c->ops[k].ndim;
  if (r >= lo && r <= hi) return NULL;
  if (lo == hi) return bad(c, "operand %d has rank %d where the op takes rank %d", k, r, lo);
  return bad(c, "operand %d has rank %d where the op takes rank %d to %d", k, r, lo, hi);
}

/* attrs[i] (called name) must lie in [lo, hi]. */
static const char *want_attr(ck *c, int i, const char *name, int64_t lo, int64_t hi) {
  int64_t v = c->attrs[i];
  if (v >= lo && v <= hi) return NULL;
  return bad(c, "attrs[%d] (%s) is %lld, outside [%lld, %lld]", i, name, (long long)v,
             (long long)lo, (long long)hi);
}

#define TRY(x)            \
  do {                    \
    const char *e_ = (x); \
    if (e_) return e_;    \
  } while (0)

static const char *check_elementwise(ck *c) {
  TRY(want_nattrs(c, 0));
  const lt_rule_operand *o = c->ops;
  int64_t s[LT_MAX_DIMS];
  int nd = o[0].ndim;
  memcpy(s, o[0].shape, (size_t)nd * sizeof *s);
  for (int k = 1; k < c->nops; k++) {
    int64_t t[LT_MAX_DIMS];
    int tn;
    if (!lt__broadcast_shape(s, nd, o[k].shape, o[k].ndim, t, &tn)) {
      char a[LT_SHAPE_STR_MAX], b[LT_SHAPE_STR_MAX];
      return bad(c, "operand %d shape %s does not broadcast with %s", k,
                 lt__shape_str(o[k].shape, o[k].ndim, a, sizeof a),
                 lt__shape_str(s, nd, b, sizeof b));
    }
    memcpy(s, t, (size_t)tn * sizeof *s);
    nd = tn;
  }
  switch (lt__op_family(c->op)) {
  case LT_FAM_UNARY:
    if (c->op == LT_OP_NEG && o[0].dtype == LT_BOOL) return want_float(c, 0);
    if (c->op >= LT_OP_EXP && c->op <= LT_OP_ERF) TRY(want_float(c, 0));
    break;
  case LT_FAM_BINARY:
  case LT_FAM_COMPARE:
    TRY(want_dtype(c, 1, (lt_dtype)o[0].dtype));
    break;
  case LT_FAM_TERNARY:
    TRY(want_dtype(c, 0, LT_BOOL));
    TRY(want_dtype(c, 2, (lt_dtype)o[1].dtype));
    break;
  default:
    break;
  }
  return want_shape(c, s, nd);
}

/* Reductions over an axis mask, over one axis, and the one-axis ops that
 * keep the operand's shape (softmax, cumsum, argsort). */
static const char *check_reduce(ck *c) {
  const lt_rule_operand *x = &c->ops[0];
  int r = x->ndim;
  int64_t s[LT_MAX_DIMS];
  int nd;
  switch (c->op) {
  case LT_OP_ARGMAX:
  case LT_OP_ARGMIN:
    TRY(want_nattrs(c, 2));
    if (r == 0) return want_rank(c, 0, 1, LT_MAX_DIMS);
    TRY(want_attr(c, 0, "axis", 0, r - 1));
    TRY(want_attr(c, 1, "keepdim", 0, 1));
    lt__reduce_shape(x->shape, r, (int64_t)1 << c->attrs[0], c->attrs[1] != 0, s, &nd);
    return want_shape(c, s, nd);
  case LT_OP_SOFTMAX:
  case LT_OP_LOG_SOFTMAX:
  case LT_OP_CUMSUM:
  case LT_OP_ARGSORT: {
    bool softmax = c->op == LT_OP_SOFTMAX || c->op == LT_OP_LOG_SOFTMAX;
    TRY(want_nattrs(c, softmax ? 1 : 2));
    if (r == 0) return want_rank(c, 0, 1, LT_MAX_DIMS);
    TRY(want_attr(c, 0, "axis", 0, r - 1));
    if (!softmax) TRY(want_attr(c, 1, c->op == LT_OP_CUMSUM ? "reverse" : "descending", 0, 1));
    if (softmax) TRY(want_float(c, 0));
    return want_shape(c, x->shape, r);
  }
  default:
    TRY(want_nattrs(c, 2));
    TRY(want_attr(c, 0, "axis mask", 0, ((int64_t)1 << r) - 1));
    TRY(want_attr(c, 1, "keepdim", 0, 1));
    if (c->op == LT_OP_MEAN || c->op == LT_OP_LOGSUMEXP) TRY(want_float(c, 0));
    lt__reduce_shape(x->shape, r, c->attrs[0], c->attrs[1] != 0, s, &nd);
    return want_shape(c, s, nd);
  }
}

static const char *check_matmul(ck *c) {
  const lt_rule_operand *o = c->ops;
  if (c->op == LT_OP_MATMUL) {
    TRY(want_nattrs(c, 0));
    if (o[0].dtype == LT_BOOL) return bad(c, "operand 0 dtype bool where the op takes a number");
    TRY(want_dtype(c, 1, (lt_dtype)o[0].dtype));
    int64_t s[LT_MAX_DIMS];
    int nd = 0;
    switch (lt__matmul_shape(o[0].shape, o[0].ndim, o[1].shape, o[1].ndim, s, &nd)) {
    case LT_MM_RANK:
      return bad(c, "operand ranks %d and %d where the op takes rank >= 2", o[0].ndim, o[1].ndim);
    case LT_MM_CONTRACTION:
      return bad(c, "operand 1 dim %d is %lld where operand 0's contraction dim is %lld",
                 o[1].ndim - 2, (long long)o[1].shape[o[1].ndim - 2],
                 (long long)o[0].shape[o[0].ndim - 1]);
    case LT_MM_BATCH:
      return bad(c, "operand batch dims do not broadcast");
    case LT_MM_OK:
      break;
    }
    return want_shape(c, s, nd);
  }
  /* attention: q [B, L, E], k [B, S, E], v [B, S, Ev][, mask [B, L, S]] */
  if (c->nops < 3 || c->nops > 4) return bad(c, "%d operands where the op takes 3 or 4", c->nops);
  TRY(want_nattrs(c, 2));
  TRY(want_attr(c, 0, "causal", 0, 1));
  TRY(want_attr(c, 1, "mask kind", c->nops == 4 ? 1 : 0, c->nops == 4 ? 2 : 0));
  for (int k = 0; k < c->nops; k++) TRY(want_rank(c, k, 3, 3));
  TRY(want_float(c, 0));
  TRY(want_dtype(c, 1, (lt_dtype)o[0].dtype));
  TRY(want_dtype(c, 2, (lt_dtype)o[0].dtype));
  const int64_t *q = o[0].shape, *k = o[1].shape, *v = o[2].shape;
  if (k[0] != q[0] || k[2] != q[2])
    return bad(c, "operand 1 (keys) [%lld, %lld, %lld] does not fit the queries", (long long)k[0],
               (long long)k[1], (long long)k[2]);
  if (v[0] != q[0] || v[1] != k[1]) return bad(c, "operand 2 (values) does not fit the keys");
  if (c->nops == 4) {
    const int64_t *m = o[3].shape;
    TRY(want_dtype(c, 3, c->attrs[1] == 1 ? LT_BOOL : (lt_dtype)o[0].dtype));
    if (m[0] != q[0] || m[1] != q[1] || m[2] != k[1])
      return bad(c, "operand 3 (mask) is not [B, L, S] of the queries and keys");
  }
  int64_t s[3] = {q[0], q[1], v[2]};
  return want_shape(c, s, 3);
}

/* conv2d, conv2d_bias and the two gradients: x [N, C, H, W], y [N, O, OH,
 * OW], w [O, C / groups, kh, kw] with attrs {sh, sw, ph, pw, dh, dw, groups};
 * one of the three is the node. conv2d's output has the windows' count, the
 * gradients' y at most that (conv_transpose2d's output_padding). */
static const char *check_conv(ck *c, const int64_t *x, const int64_t *y, const int64_t *w,
                              bool exact) {
  TRY(want_nattrs(c, 7));
  const char *names[6] = {"stride h",  "stride w",   "padding h",
                          "padding w", "dilation h", "dilation w"};
  for (int i = 0; i < 6; i++) TRY(want_attr(c, i, names[i], i / 2 == 1 ? 0 : 1, LT_CONV_LIMIT));
  TRY(want_attr(c, 6, "groups", 1, LT_CONV_LIMIT));
  int64_t g = c->attrs[6];
  if (y[0] != x[0])
    return bad(c, "batch sizes %lld and %lld differ", (long long)x[0], (long long)y[0]);
  if (x[1] % g || y[1] % g)
    return bad(c, "attrs[6] (groups) %lld does not divide the channels %lld and %lld", (long long)g,
               (long long)x[1], (long long)y[1]);
  if (w[0] != y[1] || w[1] != x[1] / g)
    return bad(c, "weight [%lld, %lld, ...] where the channels give [%lld, %lld, ...]",
               (long long)w[0], (long long)w[1], (long long)y[1], (long long)(x[1] / g));
  for (int i = 0; i < 2; i++) {
    int64_t n = lt__conv_windows(x[2 + i], w[2 + i], c->attrs[i], c->attrs[2 + i], c->attrs[4 + i]);
    if (n < 0) return bad(c, "kernel or input size along axis %d out of range", 2 + i);
    if (exact ? y[2 + i] != n : y[2 + i] > n)
      return bad(c, "output size %lld along axis %d where the input and attrs give %s%lld",
                 (long long)y[2 + i], 2 + i, exact ? "" : "at most ", (long long)n);
  }
  return NULL;
}

/* Pooling's argmax: attrs {kh, kw, sh, sw, ph, pw, dh, dw}; each output
 * length is the conv formula's, or one more (ceil_mode) for a last window
 * that starts inside the input or its left padding. */
static const char *check_pool_argmax(ck *c) {
  TRY(want_nattrs(c, 8));
  TRY(want_rank(c, 0, 4, 4));
  TRY(want_float(c, 0));
  const int64_t *x = c->ops[0].shape, *a = c->attrs;
  if (c->ndim != 4 || c->shape[0] != x[0] || c->shape[1] != x[1])
    return bad(c, "shape is not [N, C, OH, OW] of the operand's N and C");
  for (int i = 0; i < 2; i++) {
    int64_t n = lt__conv_windows(x[2 + i], a[i], a[2 + i], a[4 + i], a[6 + i]);
    if (n < 1 || 2 * a[4 + i] > a[i])
      return bad(c, "attrs (kernel, stride, padding, dilation) along axis %d out of range", 2 + i);
    int64_t out = c->shape[2 + i];
    bool ceil_ok = out == n + 1 && (out - 1) * a[2 + i] < x[2 + i] + a[4 + i];
    if (out != n && !ceil_ok)
      return bad(c, "output size %lld along axis %d where the input and attrs give %lld",
                 (long long)out, 2 + i, (long long)n);
  }
  return NULL;
}

/* pool_gather (v [N,C,H,W], idx) -> idx's shape; pool_scatter_add (g, idx)
 * -> [N,C,H,W]: idx i64 [N, C, ...] of the small side's shape. */
static const char *check_pool_planes(ck *c) {
  TRY(want_nattrs(c, 0));
  TRY(want_dtype(c, 1, LT_I64));
  bool gather = c->op == LT_OP_POOL_GATHER;
  const lt_rule_operand *idx = &c->ops[1];
  const int64_t *big = gather ? c->ops[0].shape : c->shape;
  int bign = gather ? c->ops[0].ndim : c->ndim;
  const int64_t *small = gather ? c->shape : c->ops[0].shape;
  int smalln = gather ? c->ndim : c->ops[0].ndim;
  TRY(want_float(c, 0));
  if (bign != 4)
    return bad(c, "the plane tensor (%s) has rank %d, not 4", gather ? "operand 0" : "shape", bign);
  if (idx->ndim < 2 || !same_shape(idx->shape, idx->ndim, small, smalln) ||
      idx->shape[0] != big[0] || idx->shape[1] != big[1])
    return bad(c, "operand 1 (index) is not [N, C, ...] of the %s's shape",
               gather ? "node" : "operand 0");
  return NULL;
}

static const char *check_conv_family(ck *c) {
  const lt_rule_operand *o = c->ops;
  switch (c->op) {
  case LT_OP_MAX_POOL2D_ARGMAX:
    return check_pool_argmax(c);
  case LT_OP_POOL_GATHER:
  case LT_OP_POOL_SCATTER_ADD:
    return check_pool_planes(c);
  default:
    break;
  }
  for (int k = 0; k < c->nops; k++) TRY(want_rank(c, k, k == 2 ? 1 : 4, k == 2 ? 1 : 4));
  if (c->ndim != 4) return bad(c, "rank %d where the op makes rank 4", c->ndim);
  TRY(want_float(c, 0));
  for (int k = 1; k < c->nops; k++) TRY(want_dtype(c, k, (lt_dtype)o[0].dtype));
  switch (c->op) {
  case LT_OP_CONV2D:
    return check_conv(c, o[0].shape, c->shape, o[1].shape, true);
  case LT_OP_CONV2D_BIAS:
    TRY(check_conv(c, o[0].shape, c->shape, o[1].shape, true));
    if (o[2].shape[0] != c->shape[1])
      return bad(c, "operand 2 (bias) has %lld elements for %lld channels",
                 (long long)o[2].shape[0], (long long)c->shape[1]);
    return NULL;
  case LT_OP_CONV2D_GRAD_INPUT: /* (gy, w) -> x */
    return check_conv(c, c->shape, o[0].shape, o[1].shape, false);
  default: /* CONV2D_GRAD_WEIGHT: (x, gy) -> w */
    return check_conv(c, o[0].shape, o[1].shape, c->shape, false);
  }
}

/* starts then steps (slice, unslice): the strided box lies inside full. */
static const char *check_box(ck *c, const int64_t *full, const int64_t *box, int nd) {
  TRY(want_nattrs(c, 2 * nd));
  for (int d = 0; d < nd; d++) {
    int64_t start = c->attrs[d], step = c->attrs[nd + d];
    if (step < 1) return bad(c, "attrs[%d] (step of axis %d) is %lld", nd + d, d, (long long)step);
    if (box[d] == 0) continue;
    /* the last position, start + (len - 1) step, inside [0, full) without overflow */
    if (start < 0 || start >= full[d] || (box[d] - 1) > (full[d] - 1 - start) / step)
      return bad(c,
                 "attrs[%d] (start of axis %d) %lld with step %lld and %lld elements leaves the "
                 "axis of %lld",
                 d, d, (long long)start, (long long)step, (long long)box[d], (long long)full[d]);
  }
  return NULL;
}

static const char *check_shape_family(ck *c) {
  const lt_rule_operand *x = &c->ops[0];
  int r = x->ndim;
  switch (c->op) {
  case LT_OP_RESHAPE:
    TRY(want_nattrs(c, 0));
    if (lt__numel(c->shape, c->ndim) != lt__numel(x->shape, r))
      return bad(c, "shape holds %lld elements where the operand holds %lld",
                 (long long)lt__numel(c->shape, c->ndim), (long long)lt__numel(x->shape, r));
    return NULL;
  case LT_OP_PERMUTE: {
    TRY(want_nattrs(c, r));
    int64_t s[LT_MAX_DIMS];
    bool seen[LT_MAX_DIMS] = {false};
    for (int d = 0; d < r; d++) {
      TRY(want_attr(c, d, "perm", 0, r - 1));
      if (seen[c->attrs[d]])
        return bad(c, "attrs[%d] (perm) repeats axis %lld", d, (long long)c->attrs[d]);
      seen[c->attrs[d]] = true;
      s[d] = x->shape[c->attrs[d]];
    }
    return want_shape(c, s, r);
  }
  case LT_OP_EXPAND:
    TRY(want_nattrs(c, 0));
    if (!lt__broadcastable(x->shape, r, c->shape, c->ndim)) {
      char a[LT_SHAPE_STR_MAX], b[LT_SHAPE_STR_MAX];
      return bad(c, "shape %s is not a broadcast of the operand's %s",
                 lt__shape_str(c->shape, c->ndim, a, sizeof a),
                 lt__shape_str(x->shape, r, b, sizeof b));
    }
    return NULL;
  case LT_OP_SLICE:
    if (c->ndim != r) return bad(c, "rank %d where the operand has rank %d", c->ndim, r);
    return check_box(c, x->shape, c->shape, r);
  case LT_OP_PAD: {
    TRY(want_nattrs(c, 2 * r));
    int64_t s[LT_MAX_DIMS];
    for (int d = 0; d < r; d++) {
      TRY(want_attr(c, 2 * d, "pad before", 0, LT_MAX_NUMEL));
      TRY(want_attr(c, 2 * d + 1, "pad after", 0, LT_MAX_NUMEL));
      s[d] = x->shape[d] + c->attrs[2 * d] + c->attrs[2 * d + 1];
    }
    return want_shape(c, s, r);
  }
  default: { /* CONCAT */
    TRY(want_nattrs(c, 1));
    if (r == 0) return want_rank(c, 0, 1, LT_MAX_DIMS);
    TRY(want_attr(c, 0, "axis", 0, r - 1));
    int ax = (int)c->attrs[0];
    int64_t s[LT_MAX_DIMS];
    memcpy(s, x->shape, (size_t)r * sizeof *s);
    for (int k = 1; k < c->nops; k++) {
      const lt_rule_operand *o = &c->ops[k];
      TRY(want_dtype(c, k, (lt_dtype)x->dtype));
      bool fits = o->ndim == r;
      for (int d = 0; fits && d < r; d++) fits = d == ax || o->shape[d] == s[d];
      if (!fits) return bad(c, "operand %d shape does not fit operand 0's off axis %d", k, ax);
      if (o->shape[ax] > LT_MAX_NUMEL - s[ax]) return bad(c, "operands too large to concatenate");
      s[ax] += o->shape[ax];
    }
    return want_shape(c, s, r);
  }
  }
}

static bool int_dtype(int dt) { return dt != LT_BOOL && !lt__is_float((lt_dtype)dt); }

static const char *check_index(ck *c) {
  const lt_rule_operand *a = &c->ops[0];
  int r = a->ndim;
  if (c->op == LT_OP_ONE_HOT) {
    TRY(want_index_attrs(c));
    if (!int_dtype(a->dtype))
      return bad(c, "operand 0 dtype %s where the op takes an integer",
                 lt_dtype_name((lt_dtype)a->dtype));
    TRY(want_attr(c, 0, "num_classes", 0, LT_MAX_NUMEL));
    if (r + 1 > LT_MAX_DIMS) return want_rank(c, 0, 0, LT_MAX_DIMS - 1);
    int64_t s[LT_MAX_DIMS];
    memcpy(s, a->shape, (size_t)r * sizeof *s);
    s[r] = c->attrs[0];
    return want_shape(c, s, r + 1);
  }
  TRY(want_index_attrs(c));
  if (r == 0) return want_rank(c, 0, 1, LT_MAX_DIMS);
  TRY(want_attr(c, 0, "axis", 0, r - 1));
  int ax = (int)c->attrs[0];
  const lt_rule_operand *idx = &c->ops[1];
  if (!int_dtype(idx->dtype))
    return bad(c, "operand 1 (index) dtype %s where the op takes an integer",
               lt_dtype_name((lt_dtype)idx->dtype));
  if (c->op == LT_OP_GATHER) {
    /* the index has a's rank and, off the axis, no dim longer than a's */
    if (idx->ndim != r)
      return bad(c, "operand 1 (index) has rank %d where operand 0 has %d", idx->ndim, r);
    for (int d = 0; d < r; d++)
      if (d != ax && idx->shape[d] > a->shape[d])
        return bad(c, "operand 1 (index) dim %d is %lld, longer than operand 0's %lld", d,
                   (long long)idx->shape[d], (long long)a->shape[d]);
    return want_shape(c, idx->shape, r);
  }
  TRY(want_rank(c, 1, 1, 1)); /* INDEX_SELECT */
  int64_t s[LT_MAX_DIMS];
  memcpy(s, a->shape, (size_t)r * sizeof *s);
  s[ax] = idx->shape[0];
  return want_shape(c, s, r);
}

static const char *check_random(ck *c) {
  TRY(want_nattrs(c, 0));
  TRY(want_dtype(c, 0, LT_I64));
  TRY(want_rank(c, 0, 0, 0));
  if (c->op == LT_OP_RANDPERM) {
    if (c->dt != LT_I32 && c->dt != LT_I64)
      return bad(c, "dtype %s where the op makes i32 or i64", lt_dtype_name(c->dt));
    if (c->ndim != 1) return bad(c, "rank %d where the op makes rank 1", c->ndim);
  } else if (!lt__is_float(c->dt)) {
    return bad(c, "dtype %s where the op makes f32 or f64", lt_dtype_name(c->dt));
  }
  return NULL;
}

/* The transposes of gather, index_select and slice: zeros of the node's
 * shape, src (operand 0) added or placed at the forward op's positions. */
static const char *check_scatter(ck *c) {
  const lt_rule_operand *src = &c->ops[0];
  int r = c->ndim;
  if (src->ndim != r) return bad(c, "operand 0 has rank %d where the node has %d", src->ndim, r);
  if (c->op == LT_OP_UNSLICE) return check_box(c, c->shape, src->shape, r);
  TRY(want_index_attrs(c));
  if (r == 0) return bad(c, "rank 0 where the op takes an axis");
  TRY(want_attr(c, 0, "axis", 0, r - 1));
  int ax = (int)c->attrs[0];
  const lt_rule_operand *idx = &c->ops[1];
  if (!int_dtype(idx->dtype))
    return bad(c, "operand 1 (index) dtype %s where the op takes an integer",
               lt_dtype_name((lt_dtype)idx->dtype));
  if (c->op == LT_OP_SCATTER_ADD) {
    if (!same_shape(idx->shape, idx->ndim, src->shape, r))
      return bad(c, "operand 1 (index) shape differs from operand 0's");
  } else {
    TRY(want_rank(c, 1, 1, 1));
    if (idx->shape[0] != src->shape[ax])
      return bad(c, "operand 1 (index) has %lld elements where operand 0's axis %d has %lld",
                 (long long)idx->shape[0], ax, (long long)src->shape[ax]);
  }
  for (int d = 0; d < r; d++)
    if (d != ax && src->shape[d] > c->shape[d])
      return bad(c, "operand 0 dim %d is %lld, longer than the node's %lld", d,
                 (long long)src->shape[d], (long long)c->shape[d]);
  return NULL;
}

/* The optional replica group of a collective: attrs[at] (size) and
 * attrs[at + 1] (stride) when the node has at + 2 attrs, else none. */
static const char *want_group(ck *c, int at, int64_t big) {
  if (c->nattrs == at) return NULL;
  TRY(want_nattrs(c, at + 2));
  TRY(want_attr(c, at, "size", 1, big));
  return want_attr(c, at + 1, "stride", 1, big);
}

static const char *check_collective(ck *c) {
  const lt_rule_operand *x = &c->ops[0];
  int r = x->ndim;
  int64_t s[LT_MAX_DIMS];
  memcpy(s, x->shape, (size_t)r * sizeof *s);
  const int64_t big = (int64_t)1 << 30; /* a world size bound: counts, not memory */
  switch (c->op) {
  case LT_OP_ALL_REDUCE:
    if (c->nattrs < 1) TRY(want_nattrs(c, 1));
    TRY(want_attr(c, 0, "redop", 0, 3));
    TRY(want_group(c, 1, big));
    break;
  case LT_OP_BROADCAST:
    if (c->nattrs < 1) TRY(want_nattrs(c, 1));
    TRY(want_attr(c, 0, "root", 0, big));
    TRY(want_group(c, 1, big));
    if (c->nattrs == 3) TRY(want_attr(c, 0, "root", 0, c->attrs[1] - 1));
    break;
  case LT_OP_SPMD_COPY:
    TRY(want_nattrs(c, 1));
    TRY(want_attr(c, 0, "size", 1, big));
    break;
  case LT_OP_SPMD_ALL_REDUCE:
    TRY(want_nattrs(c, 2));
    TRY(want_attr(c, 0, "redop", 0, 3));
    TRY(want_attr(c, 1, "size", 1, big));
    break;
  case LT_OP_ALL_TO_ALL: { /* {split_axis, concat_axis, size} */
    TRY(want_nattrs(c, 3));
    if (r == 0) return want_rank(c, 0, 1, LT_MAX_DIMS);
    TRY(want_attr(c, 0, "split_axis", 0, r - 1));
    TRY(want_attr(c, 1, "concat_axis", 0, r - 1));
    TRY(want_attr(c, 2, "size", 1, big));
    int sa = (int)c->attrs[0], ca = (int)c->attrs[1];
    int64_t n = c->attrs[2];
    if (s[sa] % n)
      return bad(c, "operand 0 axis %d of %lld does not split into attrs[2] (size) %lld", sa,
                 (long long)s[sa], (long long)n);
    s[sa] /= n;
    if (s[ca] > LT_MAX_NUMEL / n) return bad(c, "attrs[2] (size) gathers too many elements");
    s[ca] *= n;
    break;
  }
  case LT_OP_COLLECTIVE_PERMUTE: { /* {size, s0, t0, ...}: a partial permutation */
    if (c->nattrs < 1 || c->nattrs % 2 != 1)
      return bad(c, "%d attrs (size, then pairs)", c->nattrs);
    TRY(want_attr(c, 0, "size", 1, LT_MAX_DEVICES));
    int64_t n = c->attrs[0];
    if ((c->nattrs - 1) / 2 > n) return bad(c, "more pairs than ranks");
    uint64_t srcs = 0, dsts = 0;
    for (int k = 1; k < c->nattrs; k++) {
      TRY(want_attr(c, k, k % 2 ? "source" : "target", 0, n - 1));
      uint64_t bit = (uint64_t)1 << c->attrs[k], *seen = k % 2 ? &srcs : &dsts;
      if (*seen & bit) return bad(c, "attrs[%d]: rank %lld twice", k, (long long)c->attrs[k]);
      *seen |= bit;
    }
    break;
  }
  default: { /* gather, scatter, shard: {[redop,] axis, size} */
    int at = c->op == LT_OP_REDUCE_SCATTER ? 1 : 0;
    bool grouped = (c->op == LT_OP_ALL_GATHER || c->op == LT_OP_REDUCE_SCATTER) &&
                   c->nattrs == at + 3; /* {..., size, stride}: a replica group */
    if (grouped)
      TRY(want_attr(c, at + 2, "stride", 1, big));
    else
      TRY(want_nattrs(c, at + 2));
    if (at) TRY(want_attr(c, 0, "redop", 0, 3));
    if (r == 0) return want_rank(c, 0, 1, LT_MAX_DIMS);
    TRY(want_attr(c, at, "axis", 0, r - 1));
    TRY(want_attr(c, at + 1, "size", 1, big));
    int ax = (int)c->attrs[at];
    int64_t n = c->attrs[at + 1];
    if (c->op == LT_OP_ALL_GATHER || c->op == LT_OP_SPMD_ALL_GATHER) {
      if (s[ax] > LT_MAX_NUMEL / n)
        return bad(c, "attrs[%d] (size) gathers too many elements", at + 1);
      s[ax] *= n;
    } else {
      if (s[ax] % n)
        return bad(c, "operand 0 axis %d of %lld does not split into attrs[%d] (size) %lld", ax,
                   (long long)s[ax], at + 1, (long long)n);
      s[ax] /= n;
    }
  }
  }
  if (c->op == LT_OP_ALL_REDUCE || c->op == LT_OP_REDUCE_SCATTER ||
      c->op == LT_OP_SPMD_ALL_REDUCE) {
    /* attrs[0] is the redop of all three */
    if (x->dtype == LT_BOOL && c->attrs[0] != 2 && c->attrs[0] != 3)
      return bad(c, "operand 0 dtype bool reduced by other than max (or) and min (and)");
  }
  return want_shape(c, s, r);
}

/* The table's result dtype rule (lt__node_new checks it too; here it is
 * named as a field). */
static const char *check_result_dtype(ck *c) {
  lt_dtype want =
      lt__op_result_dtype(c->op, (lt_dtype)c->ops[lt__op_dtype_operand(c->op)].dtype, c->dt);
  if (want == c->dt) return NULL;
  return bad(c, "dtype %s where the op table's rule gives %s", lt_dtype_name(c->dt),
             lt_dtype_name(want));
}

const char *lt__node_rules_check(lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                                 const lt_rule_operand *ops, int nops, const int64_t *attrs,
                                 int nattrs, char *why, size_t nwhy) {
  ck c = {why, nwhy, op, dt, shape, ndim, ops, nops, attrs, nattrs};
  if ((unsigned)op >= LT_OP_COUNT) return bad(&c, "unknown op %d", (int)op);
  if (!lt__dtype_valid(dt)) return bad(&c, "dtype %d unknown", (int)dt);
  if (ndim < 0 || ndim > LT_MAX_DIMS) return bad(&c, "rank %d", ndim);
  if (!lt__op_arity_ok(op, (uint32_t)nops))
    return bad(&c, "%d operands where the op takes %d", nops, lt__op_info[op].arity);
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0) return bad(&c, "shape dim %d is %lld", d, (long long)shape[d]);
  if (!lt__shape_fits(shape, ndim)) return bad(&c, "shape holds too many elements");
  if (nops) TRY(check_result_dtype(&c));
  switch (lt__op_family(op)) {
  case LT_FAM_LEAF:
    return want_nattrs(&c, 0);
  case LT_FAM_UNARY:
  case LT_FAM_BINARY:
  case LT_FAM_COMPARE:
  case LT_FAM_TERNARY:
    return check_elementwise(&c);
  case LT_FAM_REDUCE:
    return check_reduce(&c);
  case LT_FAM_MATMUL:
    return check_matmul(&c);
  case LT_FAM_CONV:
    return check_conv_family(&c);
  case LT_FAM_SHAPE:
    return check_shape_family(&c);
  case LT_FAM_INDEX:
    return check_index(&c);
  case LT_FAM_RANDOM:
    return check_random(&c);
  case LT_FAM_SCATTER:
    return check_scatter(&c);
  case LT_FAM_COLLECTIVE:
    return check_collective(&c);
  }
  return bad(&c, "op of no family");
}
