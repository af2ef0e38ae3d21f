/* ref kernels of the CONV family (NCHW): LT_OP_CONV2D (and CONV2D_BIAS), LT_OP_CONV2D_GRAD_INPUT,
 * LT_OP_POOL_GATHER, LT_OP_POOL_SCATTER_ADD,
 * LT_OP_CONV2D_GRAD_WEIGHT and LT_OP_MAX_POOL2D_ARGMAX.
 *
 * Every output element is computed on its own as a sum over the input
 * positions that reach it (the gather form, also for the two gradients), in
 * double, so each is plainly the formula of the op table's comment:
 *   conv2d       y[n,o,a,b]  = sum_{c,i,j} x[n, g Cg + c, a sh - ph + i dh, b sw - pw + j dw]
 * w[o,c,i,j] grad_input   gx[n,C,h,w] = sum_{o,i,j} gy[n,o,a,b] w[o,C - g Cg,i,j] where h = a sh -
 * ph + i dh grad_weight  gw[o,c,i,j] = sum_{n,a,b} gy[n,o,a,b] x[n, g Cg + c, a sh - ph + i dh,
 * ...] (g: the group of o or C; Cg = C / groups) with positions outside the input read as zeros.
 * Attributes and shapes come from decoded bytes too, so they are all checked before any element is
 * read. */
#include <math.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "../../core/lt_node_rules.h"
#include "ref.h"

/* One spatial axis of a window op: input length, output length, kernel,
 * stride, padding, dilation. */
typedef struct conv_axis {
  int64_t in, out, k, s, p, d;
} conv_axis;

/* The number of windows of ax along its input (the conv formula, the IR's
 * rule in lt_node_rules.h; 0 when none fits), or -1 when the numbers are out
 * of any sensible range (corrupted attributes). */
static int64_t windows(const conv_axis *ax) {
  return lt__conv_windows(ax->in, ax->k, ax->s, ax->p, ax->d);
}

/* The input position window a's tap i reads along ax (may lie in the padding). */
static inline int64_t tap(const conv_axis *ax, int64_t a, int64_t i) {
  return a * ax->s - ax->p + i * ax->d;
}

static int bad(const lt_instr *ins, const char *why) {
  return lt__err(LT_EEXEC, "%s: malformed instruction: %s", lt__op_name((lt_op)ins->op), why);
}

static bool rank4(const lt_buffer *b) { return b->ndim == 4; }

/* The three convolution ops seen as one problem: x [N, C, H, W], y (the
 * convolution's output, or its gradient) [N, O, OH, OW], w [O, Cg, kh, kw]. */
typedef struct conv_plan {
  int64_t n, c, o, groups, cg, og;
  conv_axis h, w;
} conv_plan;

/* Checks a convolution instruction whose x, y and w buffers are given (one
 * of them is the output) and fills p. CONV2D's output has exactly the conv
 * formula's size; the gradients accept a longer input (conv_transpose2d's
 * output_padding), whose extra positions no window reaches. */
static int plan_conv(const lt_instr *ins, const lt_buffer *x, const lt_buffer *y,
                     const lt_buffer *w, conv_plan *p) {
  int nops = ins->op == LT_OP_CONV2D_BIAS ? 3 : 2;
  if ((int)ins->noperands != nops || ins->nattrs != 7)
    return bad(ins, nops == 3 ? "needs 3 operands and 7 attrs" : "needs 2 operands and 7 attrs");
  if (!rank4(x) || !rank4(y) || !rank4(w)) return bad(ins, "operands must have rank 4");
  if (!ref_is_float(x->dtype) || x->dtype != y->dtype || x->dtype != w->dtype)
    return bad(ins, "operands must share one float dtype");
  const int64_t *a = ins->attrs;
  p->n = x->shape[0];
  p->c = x->shape[1];
  p->o = y->shape[1];
  p->groups = a[6];
  p->h = (conv_axis){x->shape[2], y->shape[2], w->shape[2], a[0], a[2], a[4]};
  p->w = (conv_axis){x->shape[3], y->shape[3], w->shape[3], a[1], a[3], a[5]};
  if (y->shape[0] != p->n) return bad(ins, "batch sizes differ");
  if (p->groups < 1 || p->c % p->groups || p->o % p->groups)
    return bad(ins, "groups must divide both channel counts");
  p->cg = p->c / p->groups;
  p->og = p->o / p->groups;
  if (w->shape[0] != p->o || w->shape[1] != p->cg) return bad(ins, "weight shape");
  int64_t wh = windows(&p->h), ww = windows(&p->w);
  if (wh < 0 || ww < 0) return bad(ins, "attributes out of range");
  bool exact = ins->op == LT_OP_CONV2D || ins->op == LT_OP_CONV2D_BIAS;
  if (exact ? (p->h.out != wh || p->w.out != ww) : (p->h.out > wh || p->w.out > ww))
    return bad(ins, "output size does not follow from the input and the attrs");
  return LT_OK;
}

static inline int64_t at4(const lt_buffer *b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return ((i0 * b->shape[1] + i1) * b->shape[2] + i2) * b->shape[3] + i3;
}

/* CONV2D, and CONV2D_BIAS: the same sum plus bias[o] (in[2], [O]). */
static int conv2d(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0], *w = in[1];
  conv_plan p;
  int rc = plan_conv(ins, x, out, w, &p);
  if (rc != LT_OK) return rc;
  const lt_buffer *bias = ins->op == LT_OP_CONV2D_BIAS ? in[2] : NULL;
  if (bias && (bias->ndim != 1 || bias->shape[0] != p.o || bias->dtype != x->dtype))
    return bad(ins, "bias must be [O] of the input's dtype");
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t o = 0; o < p.o; o++) {
      int64_t c0 = o / p.og * p.cg;
      for (int64_t a = 0; a < p.h.out; a++)
        for (int64_t b = 0; b < p.w.out; b++) {
          double acc = 0;
          for (int64_t c = 0; c < p.cg; c++)
            for (int64_t i = 0; i < p.h.k; i++) {
              int64_t h = tap(&p.h, a, i);
              if (h < 0 || h >= p.h.in) continue;
              for (int64_t j = 0; j < p.w.k; j++) {
                int64_t v = tap(&p.w, b, j);
                if (v < 0 || v >= p.w.in) continue;
                acc += ref_getf(x, at4(x, n, c0 + c, h, v)) * ref_getf(w, at4(w, o, c, i, j));
              }
            }
          if (bias) acc += ref_getf(bias, o);
          ref_setf(out, at4(out, n, o, a, b), acc);
        }
    }
  return LT_OK;
}

/* The window that tap i of an axis reads position h from, or -1: h = a s - p + i d. */
static inline int64_t window_of(const conv_axis *ax, int64_t h, int64_t i) {
  int64_t t = h + ax->p - i * ax->d;
  if (t < 0 || t % ax->s) return -1;
  t /= ax->s;
  return t < ax->out ? t : -1;
}

static int grad_input(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *gy = in[0], *w = in[1];
  conv_plan p;
  int rc = plan_conv(ins, out, gy, w, &p);
  if (rc != LT_OK) return rc;
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t c = 0; c < p.c; c++) {
      int64_t g = c / p.cg, cw = c - g * p.cg;
      for (int64_t h = 0; h < p.h.in; h++)
        for (int64_t v = 0; v < p.w.in; v++) {
          double acc = 0;
          for (int64_t o = g * p.og; o < (g + 1) * p.og; o++)
            for (int64_t i = 0; i < p.h.k; i++) {
              int64_t a = window_of(&p.h, h, i);
              if (a < 0) continue;
              for (int64_t j = 0; j < p.w.k; j++) {
                int64_t b = window_of(&p.w, v, j);
                if (b < 0) continue;
                acc += ref_getf(gy, at4(gy, n, o, a, b)) * ref_getf(w, at4(w, o, cw, i, j));
              }
            }
          ref_setf(out, at4(out, n, c, h, v), acc);
        }
    }
  return LT_OK;
}

static int grad_weight(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0], *gy = in[1];
  conv_plan p;
  int rc = plan_conv(ins, x, gy, out, &p);
  if (rc != LT_OK) return rc;
  for (int64_t o = 0; o < p.o; o++) {
    int64_t c0 = o / p.og * p.cg;
    for (int64_t c = 0; c < p.cg; c++)
      for (int64_t i = 0; i < p.h.k; i++)
        for (int64_t j = 0; j < p.w.k; j++) {
          double acc = 0;
          for (int64_t n = 0; n < p.n; n++)
            for (int64_t a = 0; a < p.h.out; a++) {
              int64_t h = tap(&p.h, a, i);
              if (h < 0 || h >= p.h.in) continue;
              for (int64_t b = 0; b < p.w.out; b++) {
                int64_t v = tap(&p.w, b, j);
                if (v < 0 || v >= p.w.in) continue;
                acc += ref_getf(gy, at4(gy, n, o, a, b)) * ref_getf(x, at4(x, n, c0 + c, h, v));
              }
            }
          ref_setf(out, at4(out, o, c, i, j), acc);
        }
  }
  return LT_OK;
}

/* ---- max pooling's argmax ------------------------------------------------------------- */

/* Output length of a pooling axis as PyTorch computes it: the conv formula
 * with its quotient rounded down (room may be negative: a window wider than
 * the input still fits in ceil mode), or with ceil_mode rounded up, less one
 * when that last window would start at or past the input's end plus its left
 * padding. The node's shape must be one of the two, and at least 1. */
static bool pool_len_ok(const conv_axis *ax) {
  if (windows(ax) < 0 || 2 * ax->p > ax->k) return false; /* attrs out of range */
  int64_t room = ax->in + 2 * ax->p - ax->d * (ax->k - 1) - 1;
  for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++) {
    int64_t num = room + (ceil_mode ? ax->s - 1 : 0);
    int64_t n = (num >= 0 ? num / ax->s : -((-num + ax->s - 1) / ax->s)) + 1;
    if (ceil_mode && (n - 1) * ax->s >= ax->in + ax->p) n--;
    if (n >= 1 && ax->out == n) return true;
  }
  return false;
}

static int max_pool_argmax(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  if (ins->noperands != 1 || ins->nattrs != 8) return bad(ins, "needs 1 operand and 8 attrs");
  if (!rank4(x) || !rank4(out)) return bad(ins, "operand and result must have rank 4");
  if (!ref_is_float(x->dtype) || out->dtype != LT_I64)
    return bad(ins, "needs a float operand and an i64 result");
  if (out->shape[0] != x->shape[0] || out->shape[1] != x->shape[1])
    return bad(ins, "batch or channel counts differ");
  const int64_t *t = ins->attrs;
  conv_axis ah = {x->shape[2], out->shape[2], t[0], t[2], t[4], t[6]};
  conv_axis aw = {x->shape[3], out->shape[3], t[1], t[3], t[5], t[7]};
  if (out->numel == 0) return LT_OK;
  if (!pool_len_ok(&ah) || !pool_len_ok(&aw))
    return bad(ins, "output size does not follow from the input and the attrs");
  int64_t planes = x->shape[0] * x->shape[1];
  for (int64_t q = 0; q < planes; q++)
    for (int64_t a = 0; a < ah.out; a++)
      for (int64_t b = 0; b < aw.out; b++) {
        int64_t best = -1;
        double bv = 0;
        /* row-major window order: the first largest wins, and any NaN
         * replaces what came before it (so the last NaN wins) */
        for (int64_t i = 0; i < ah.k; i++) {
          int64_t h = tap(&ah, a, i);
          if (h < 0 || h >= ah.in) continue;
          for (int64_t j = 0; j < aw.k; j++) {
            int64_t v = tap(&aw, b, j);
            if (v < 0 || v >= aw.in) continue;
            int64_t k = h * aw.in + v;
            double e = ref_getf(x, q * ah.in * aw.in + k);
            if (best < 0 || e > bv || isnan(e)) {
              best = k;
              bv = e;
            }
          }
        }
        /* best stays -1 for a window of padding only (op_conv.c gives it -inf) */
        ref_seti(out, (q * ah.out + a) * aw.out + b, best);
      }
  return LT_OK;
}

/* ---- a plane's values at flat indices, and back ------------------------------------------ */

/* The planes of a pool gather / scatter: big [N, C, H, W] (the gather's
 * operand, the scatter's result), idx [N, C, ...] (i64, in [0, H W)), small
 * (idx's shape: the gather's result, the scatter's operand). */
static int plan_planes(const lt_instr *ins, const lt_buffer *big, const lt_buffer *idx,
                       const lt_buffer *small, int64_t *planes, int64_t *hw, int64_t *per) {
  if (ins->noperands != 2 || ins->nattrs != 0) return bad(ins, "needs 2 operands and no attrs");
  if (!rank4(big) || idx->ndim < 2 || idx->ndim != small->ndim)
    return bad(ins, "needs a rank-4 plane tensor and an index of its [N, C, ...]");
  if (!ref_is_float(big->dtype) || big->dtype != small->dtype || idx->dtype != LT_I64)
    return bad(ins, "needs float values and i64 indices");
  for (int d = 0; d < idx->ndim; d++)
    if (idx->shape[d] != small->shape[d]) return bad(ins, "index and values differ in shape");
  if (idx->shape[0] != big->shape[0] || idx->shape[1] != big->shape[1])
    return bad(ins, "batch or channel counts differ");
  *planes = big->shape[0] * big->shape[1];
  *hw = big->shape[2] * big->shape[3];
  *per = *planes ? idx->numel / *planes : 0;
  return LT_OK;
}

static int pool_gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  int64_t planes, hw, per;
  int rc = plan_planes(ins, in[0], in[1], out, &planes, &hw, &per);
  if (rc != LT_OK) return rc;
  for (int64_t q = 0; q < planes; q++)
    for (int64_t i = 0; i < per; i++) {
      int64_t k = ref_geti(in[1], q * per + i);
      if (k < 0 || k >= hw) return bad(ins, "index out of its plane");
      ref_setf(out, q * per + i, ref_getf(in[0], q * hw + k));
    }
  return LT_OK;
}

/* Each plane's sums in double, in index order, rounded once (as SCATTER_ADD). */
static int pool_scatter_add(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  int64_t planes, hw, per;
  int rc = plan_planes(ins, out, in[1], in[0], &planes, &hw, &per);
  if (rc != LT_OK) return rc;
  size_t bytes = (size_t)(hw > 0 ? hw : 1) * sizeof(double);
  double *acc = lt__malloc(bytes);
  if (!acc) return lt__err(LT_ENOMEM, "pool_scatter_add: out of memory");
  for (int64_t q = 0; q < planes && rc == LT_OK; q++) {
    for (int64_t k = 0; k < hw; k++) acc[k] = 0;
    for (int64_t i = 0; i < per; i++) {
      int64_t k = ref_geti(in[1], q * per + i);
      if (k < 0 || k >= hw) {
        rc = bad(ins, "index out of its plane");
        break;
      }
      acc[k] += ref_getf(in[0], q * per + i);
    }
    for (int64_t k = 0; k < hw; k++) ref_setf(out, q * hw + k, acc[k]);
  }
  lt__free(acc, bytes);
  return rc;
}

int lt__ref_conv(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  switch (ins->op) {
  case LT_OP_CONV2D:
  case LT_OP_CONV2D_BIAS:
    return conv2d(ins, out, in);
  case LT_OP_CONV2D_GRAD_INPUT:
    return grad_input(ins, out, in);
  case LT_OP_CONV2D_GRAD_WEIGHT:
    return grad_weight(ins, out, in);
  case LT_OP_MAX_POOL2D_ARGMAX:
    return max_pool_argmax(ins, out, in);
  case LT_OP_POOL_GATHER:
    return pool_gather(ins, out, in);
  case LT_OP_POOL_SCATTER_ADD:
    return pool_scatter_add(ins, out, in);
  default:
    return lt__err(LT_EEXEC, "ref: the conv kernel has no case for op %s",
                   lt__op_name((lt_op)ins->op));
  }
}
