/* ref kernels for reductions (sum, mean, max, min, prod, logsumexp), argmax /
 * argmin, and softmax / log_softmax.
 *
 * Every op here splits the input axes into kept axes and reduced axes. Output
 * element o (row-major over the kept axes, which is also the flat order of the
 * output with or without keepdim) reduces the input elements (o, r) for r
 * running row-major over the reduced axes. Float dtypes compute in double,
 * bool and integer dtypes in int64 (sums and products wrap as two's complement
 * instead of overflowing, since signed overflow would be undefined in C).
 *
 * NaN follows PyTorch: max/min/logsumexp propagate it, argmax/argmin take the
 * first NaN as the extreme, softmax rows holding one are all NaN. */
#include <math.h>

#include "../../core/lt_error.h"
#include "../../core/lt_op_switch.h"
#include "ref.h"

typedef struct plan {
  int nk, nr;                   /* kept / reduced axis counts */
  int64_t kshape[LT_MAX_DIMS];  /* sizes of the kept axes */
  int64_t kstride[LT_MAX_DIMS]; /* their input strides */
  int64_t rshape[LT_MAX_DIMS];  /* sizes of the reduced axes */
  int64_t rstride[LT_MAX_DIMS]; /* their input strides */
  int64_t outer, inner;         /* element counts over kept / reduced axes */
} plan;

static int make_plan(const lt_buffer *in, int64_t mask, plan *p) {
  if (in->ndim > LT_MAX_DIMS || mask < 0 || (mask >> in->ndim) != 0)
    return lt__err(LT_EEXEC, "reduce: axis mask %lld does not fit rank %d", (long long)mask,
                   in->ndim);
  int64_t strides[LT_MAX_DIMS];
  lt__row_major_strides(in->shape, in->ndim, strides);
  p->nk = p->nr = 0;
  p->outer = p->inner = 1;
  for (int d = 0; d < in->ndim; d++) {
    if (mask & ((int64_t)1 << d)) {
      p->rshape[p->nr] = in->shape[d];
      p->rstride[p->nr++] = strides[d];
      p->inner *= in->shape[d];
    } else {
      p->kshape[p->nk] = in->shape[d];
      p->kstride[p->nk++] = strides[d];
      p->outer *= in->shape[d];
    }
  }
  return LT_OK;
}

/* Flat input index of element (o, r). */
static int64_t in_index(const plan *p, int64_t o, int64_t r) {
  return lt__unravel_offset(o, p->kshape, p->kstride, p->nk) +
         lt__unravel_offset(r, p->rshape, p->rstride, p->nr);
}

/* Largest value of row o, NaN if the row holds one, -inf for an empty row. */
static double row_max(const lt_buffer *in, const plan *p, int64_t o) {
  double m = -INFINITY;
  for (int64_t r = 0; r < p->inner; r++) {
    double v = ref_getf(in, in_index(p, o, r));
    if (isnan(v)) return v;
    if (v > m) m = v;
  }
  return m;
}

static double row_min(const lt_buffer *in, const plan *p, int64_t o) {
  double m = INFINITY;
  for (int64_t r = 0; r < p->inner; r++) {
    double v = ref_getf(in, in_index(p, o, r));
    if (isnan(v)) return v;
    if (v < m) m = v;
  }
  return m;
}

/* log(sum(exp(x))) shifted by the row max as PyTorch does: the shift is 0
 * when the max is infinite, so an all -inf (or empty) row gives -inf and a
 * +inf entry gives +inf, never inf - inf. */
/* v rounded to bf16 (through f32, as every bf16 store). */
static double r16(double v) { return lt__dtype_round(LT_BF16, v); }

/* torch's logsumexp is a chain of ops (exp of x - max, sum, log, + max),
 * each rounding to the input's dtype: bf16 rounds at each of them (matched
 * against torch 1.13's bf16 results); the wider dtypes round once. */
static double row_logsumexp(const lt_buffer *in, const plan *p, int64_t o) {
  double m = row_max(in, p, o);
  if (isnan(m)) return m;
  double shift = isinf(m) ? 0.0 : m;
  double s = 0.0;
  bool bf16 = in->dtype == LT_BF16;
  for (int64_t r = 0; r < p->inner; r++) {
    double d = ref_getf(in, in_index(p, o, r)) - shift;
    s += bf16 ? r16(exp(r16(d))) : exp(d);
  }
  return bf16 ? r16(r16(log(r16(s))) + shift) : log(s) + shift;
}

static double reduce_float(int op, const lt_buffer *in, const plan *p, int64_t o) {
  double acc;
  switch (op) {
  case LT_OP_SUM:
  case LT_OP_MEAN:
    acc = 0.0;
    for (int64_t r = 0; r < p->inner; r++) acc += ref_getf(in, in_index(p, o, r));
    /* An empty mean is 0 / 0 = NaN, as PyTorch. */
    return op == LT_OP_MEAN ? acc / (double)p->inner : acc;
  case LT_OP_PROD:
    acc = 1.0;
    for (int64_t r = 0; r < p->inner; r++) acc *= ref_getf(in, in_index(p, o, r));
    return acc;
  case LT_OP_MAX:
    return row_max(in, p, o);
  case LT_OP_MIN:
    return row_min(in, p, o);
  case LT_OP_LOGSUMEXP:
    return row_logsumexp(in, p, o);
  default: /* ruled out by lt__ref_reduce_has_case */
    return NAN;
  }
}

static int64_t reduce_int(int op, const lt_buffer *in, const plan *p, int64_t o) {
  uint64_t acc; /* unsigned so that overflow wraps instead of being undefined */
  int64_t m;
  switch (op) {
  case LT_OP_SUM:
    acc = 0;
    for (int64_t r = 0; r < p->inner; r++) acc += (uint64_t)ref_geti(in, in_index(p, o, r));
    return (int64_t)acc;
  case LT_OP_PROD:
    acc = 1;
    for (int64_t r = 0; r < p->inner; r++) acc *= (uint64_t)ref_geti(in, in_index(p, o, r));
    return (int64_t)acc;
  case LT_OP_MAX:
    m = INT64_MIN;
    for (int64_t r = 0; r < p->inner; r++) {
      int64_t v = ref_geti(in, in_index(p, o, r));
      if (v > m) m = v;
    }
    return m;
  default: /* LT_OP_MIN (lt__ref_reduce sends no other op here) */
    m = INT64_MAX;
    for (int64_t r = 0; r < p->inner; r++) {
      int64_t v = ref_geti(in, in_index(p, o, r));
      if (v < m) m = v;
    }
    return m;
  }
}

/* Index along the reduced axis of the first extreme of row o: the first NaN
 * if any (PyTorch treats NaN as both the largest and the smallest). */
static int64_t row_argext(bool want_max, const lt_buffer *in, const plan *p, int64_t o) {
  int64_t best = 0;
  if (ref_is_float(in->dtype)) {
    double bv = p->inner ? ref_getf(in, in_index(p, o, 0)) : 0.0;
    for (int64_t r = 1; r < p->inner && !isnan(bv); r++) {
      double v = ref_getf(in, in_index(p, o, r));
      if (isnan(v) || (want_max ? v > bv : v < bv)) {
        best = r;
        bv = v;
      }
    }
  } else {
    int64_t bv = p->inner ? ref_geti(in, in_index(p, o, 0)) : 0;
    for (int64_t r = 1; r < p->inner; r++) {
      int64_t v = ref_geti(in, in_index(p, o, r));
      if (want_max ? v > bv : v < bv) {
        best = r;
        bv = v;
      }
    }
  }
  return best;
}

/* softmax / log_softmax of row o, shifted by the row max. A row of all -inf
 * (or holding +inf or NaN) gives NaN, as PyTorch. torch's bf16 log_softmax
 * along the last axis rounds the row's sum, then its log, to bf16 before
 * the one subtraction in f32 (its last-axis kernel; along any other axis it
 * rounds once): bf16_last asks for that. */
static void row_softmax(bool log_form, bool bf16_last, const lt_buffer *in, lt_buffer *out,
                        const plan *p, int64_t o) {
  double m = row_max(in, p, o);
  double s = 0.0;
  for (int64_t r = 0; r < p->inner; r++) s += exp(ref_getf(in, in_index(p, o, r)) - m);
  double log_s = log_form && bf16_last ? r16(log(r16(s))) : log(s);
  for (int64_t r = 0; r < p->inner; r++) {
    int64_t i = in_index(p, o, r);
    double z = ref_getf(in, i) - m;
    ref_setf(out, i, log_form ? z - log_s : exp(z) / s);
  }
}

bool lt__ref_reduce_has_case(lt_op op) {
  switch (op) {
  case LT_OP_SUM:
  case LT_OP_MEAN:
  case LT_OP_MAX:
  case LT_OP_MIN:
  case LT_OP_PROD:
  case LT_OP_LOGSUMEXP:
  case LT_OP_ARGMAX:
  case LT_OP_ARGMIN:
  case LT_OP_SOFTMAX:
  case LT_OP_LOG_SOFTMAX:
    return true;
  case LT_OP_CUMSUM: /* one-axis ops of the family with kernels of their own (ref_scan.c) */
  case LT_OP_ARGSORT:
    LT_OP_CASES_OUTSIDE(REDUCE)
    return false;
  }
  return false;
}

int lt__ref_reduce(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (ins->op >= LT_OP_COUNT || !lt__ref_reduce_has_case((lt_op)ins->op))
    return lt__err(LT_EEXEC, "ref: the reduction kernel has no case for op %s",
                   lt__op_name((lt_op)ins->op));
  if (ins->noperands != 1 || ins->nattrs < 1)
    return lt__err(LT_EEXEC, "reduce: malformed instruction (%d operands, %d attrs)",
                   ins->noperands, ins->nattrs);
  const lt_buffer *x = in[0];
  bool one_axis = ins->op == LT_OP_ARGMAX || ins->op == LT_OP_ARGMIN || ins->op == LT_OP_SOFTMAX ||
                  ins->op == LT_OP_LOG_SOFTMAX;
  int64_t mask = ins->attrs[0];
  if (one_axis) {
    if (mask < 0 || mask >= x->ndim)
      return lt__err(LT_EEXEC, "reduce: axis %lld out of range for rank %d", (long long)mask,
                     x->ndim);
    mask = (int64_t)1 << mask;
  }
  plan p;
  int rc = make_plan(x, mask, &p);
  if (rc != LT_OK) return rc;

  bool whole = ins->op == LT_OP_SOFTMAX || ins->op == LT_OP_LOG_SOFTMAX;
  if (out->numel != (whole ? p.outer * p.inner : p.outer))
    return lt__err(LT_EEXEC, "reduce: output of %lld elements does not fit the operand",
                   (long long)out->numel);

  for (int64_t o = 0; o < p.outer; o++) {
    switch (ins->op) {
    case LT_OP_ARGMAX:
    case LT_OP_ARGMIN:
      ref_seti(out, o, row_argext(ins->op == LT_OP_ARGMAX, x, &p, o));
      break;
    case LT_OP_SOFTMAX:
    case LT_OP_LOG_SOFTMAX:
      row_softmax(ins->op == LT_OP_LOG_SOFTMAX, x->dtype == LT_BF16 && ins->attrs[0] == x->ndim - 1,
                  x, out, &p, o);
      break;
    case LT_OP_SUM:
    case LT_OP_PROD:
    case LT_OP_MAX:
    case LT_OP_MIN:
      if (!ref_is_float(out->dtype)) {
        ref_seti(out, o, reduce_int(ins->op, x, &p, o));
        break;
      }
      /* fall through */
    case LT_OP_MEAN:
    case LT_OP_LOGSUMEXP:
      ref_setf(out, o, reduce_float(ins->op, x, &p, o));
      break;
    default:
      break; /* ruled out by lt__ref_reduce_has_case above */
    }
  }
  return LT_OK;
}
