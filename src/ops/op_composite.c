/* Composite ops: built from existing IR nodes only (no op-table row, no kernel,
 * no gradient rule of their own), so every backend runs them and autograd
 * differentiates them through their parts.
 *
 *  - isnan, isinf, isfinite: comparisons (x != x; |x| against inf);
 *  - any, all: a sum of x != 0 compared with 0;
 *  - var, std: the two-pass formula (f32 in f64), torch's correction
 *    (divisor max(N - correction, 0));
 *  - norm: torch.linalg.vector_norm for any ord, with torch's zero gradient
 *    where the norm (or an element, for ord < 1) is 0;
 *  - remainder, floor_divide: torch's formulas over the exact FMOD node;
 *  - scatter_add, index_add: the SCATTER_ADD / INDEX_ADD nodes autograd uses
 *    for the transposes of gather and index_select, added to the input;
 *    scatter: a scatter_add of the values and of a count.
 *
 * Every builder checks its operands, then makes nodes with the helpers below,
 * which consume their node arguments and give NULL for a NULL argument, so a
 * failure anywhere reaches the end as NULL with the first error recorded. */
#include <math.h>
#include <string.h>

#include "lt_caller.h"
#include "lt_ops.h"
#include "op_nograd.h"

/* ---- node helpers -------------------------------------------------------------- */

/* A 0-d constant (broadcasts against anything). */
static lt_node *kc(lt_dtype dt, double v) { return lt__node_const(dt, NULL, 0, v); }

static lt_node *fail2(lt_node *a, lt_node *b) {
  lt__node_release(a);
  lt__node_release(b);
  return NULL;
}

static lt_node *ref(lt_node *n) { return lt__node_retain(n); }

/* ---- axes ---------------------------------------------------------------------- */

/* The reduction axes as a bit mask (naxes == 0: all), as lt_sum takes them: a
 * 0-d tensor accepts axis 0 or -1 and reduces nothing (mask 0); duplicates
 * are an error. *count: the elements of each reduced group. */
static int axes_mask(const char *fn, const lt_tensor *a, const int *axes, int naxes, int64_t *mask,
                     int64_t *count) {
  if (naxes < 0 || (naxes > 0 && !axes))
    return lt__err(LT_EINVAL, "%s: bad axes argument (axes %s, naxes %d)", fn,
                   axes ? "given" : "NULL", naxes);
  int64_t seen = 0;
  for (int i = 0; i < naxes; i++) {
    int ax;
    int rc = lt__norm_axis(fn, axes[i], a->ndim ? a->ndim : 1, &ax);
    if (rc != LT_OK) return rc;
    if ((seen >> ax) & 1)
      return lt__err(LT_EINVAL, "%s: axis %d appears more than once in the axes", fn, axes[i]);
    seen |= (int64_t)1 << ax;
  }
  if (naxes == 0) seen = ((int64_t)1 << a->ndim) - 1;
  *mask = a->ndim ? seen : 0;
  *count = 1;
  for (int d = 0; d < a->ndim; d++)
    if ((*mask >> d) & 1) *count *= a->shape[d];
  return LT_OK;
}

static int need_float(const char *fn, const lt_tensor *a) {
  if (lt__is_float((lt_dtype)a->dtype)) return LT_OK;
  return lt__err(LT_EDTYPE, "%s: needs a floating dtype, got %s (as torch)", fn,
                 lt_dtype_name((lt_dtype)a->dtype));
}

/* ---- isnan / isinf / isfinite ------------------------------------------------------ */

typedef enum fp_class { FP_IS_NAN, FP_IS_INF, FP_IS_FINITE } fp_class;

static lt_tensor *classify(const char *fn, lt_tensor *a, fp_class c) {
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)a->dtype;
  /* Integers and bools are never NaN or infinite. */
  if (!lt__is_float(dt))
    return lt__wrap(a->dev, lt__node_const(LT_BOOL, a->shape, a->ndim, c == FP_IS_FINITE));
  lt_node *x = lt__ir_as(a, dt);
  lt_node *r;
  if (c == FP_IS_NAN)
    r = lt__node_bin(LT_OP_NE, x, ref(x));
  else /* NaN compares false with inf: neither infinite nor finite */
    r = lt__node_bin(c == FP_IS_INF ? LT_OP_EQ : LT_OP_LT, lt__node_un(LT_OP_ABS, x),
                     kc(dt, INFINITY));
  return lt__wrap(a->dev, r);
}

lt_tensor *lt_isnan(lt_tensor *a) { return classify("lt_isnan", a, FP_IS_NAN); }
lt_tensor *lt_isinf(lt_tensor *a) { return classify("lt_isinf", a, FP_IS_INF); }
lt_tensor *lt_isfinite(lt_tensor *a) { return classify("lt_isfinite", a, FP_IS_FINITE); }

/* ---- any / all --------------------------------------------------------------------- */

/* any: some element is non-zero (NaN counts); all: none is zero. Over nothing,
 * any is false and all is true. Bool result, u8 for a u8 input (as torch). */
static lt_tensor *any_all(const char *fn, lt_tensor *a, const int *axes, int naxes, bool keepdim,
                          bool all) {
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  int64_t mask, count;
  if (axes_mask(fn, a, axes, naxes, &mask, &count) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)a->dtype;
  lt_node *x = lt__ir_as(a, dt);
  lt_node *hits = lt__node_cast(lt__node_bin(all ? LT_OP_EQ : LT_OP_NE, x, kc(dt, 0)), LT_I64);
  lt_node *r = lt__node_bin(all ? LT_OP_EQ : LT_OP_GT,
                            lt__node_reduce(LT_OP_SUM, hits, mask, keepdim), kc(LT_I64, 0));
  return lt__wrap(a->dev, lt__node_cast(r, dt == LT_U8 ? LT_U8 : LT_BOOL));
}

lt_tensor *lt_any(lt_tensor *a, const int *axes, int naxes, bool keepdim) {
  return any_all("lt_any", a, axes, naxes, keepdim, false);
}
lt_tensor *lt_all(lt_tensor *a, const int *axes, int naxes, bool keepdim) {
  return any_all("lt_all", a, axes, naxes, keepdim, true);
}

/* ---- var / std ----------------------------------------------------------------------- */

/* sum((x - mean)^2) / max(N - correction, 0): a divisor of 0 gives NaN (or
 * inf), as torch; so does an empty group (its mean is 0 / 0). f32 and bf16
 * compute in f64 and round once at the end, as torch's cpu kernels accumulate
 * them (in a wider type than the values): the
 * squares of f32 values beyond ~1.8e19 overflow f32, while a std of them
 * (std([3e19, -3e19]) = 4.24e19) does not. */
static lt_node *variance(lt_tensor *a, int64_t mask, int64_t count, double correction, bool keepdim,
                         bool sqrt_of) {
  lt_dtype dt = (lt_dtype)a->dtype;
  lt_dtype acc = LT_F64; /* var / std take floating dtypes only */
  lt_node *x = lt__ir_as(a, acc);
  lt_node *mean = lt__node_bin(LT_OP_DIV, lt__node_reduce(LT_OP_SUM, ref(x), mask, true),
                               kc(acc, (double)count));
  lt_node *d = lt__node_bin(LT_OP_SUB, x, mean);
  lt_node *ss = lt__node_reduce(LT_OP_SUM, lt__node_bin(LT_OP_MUL, d, ref(d)), mask, keepdim);
  lt_node *v = lt__node_bin(LT_OP_DIV, ss, kc(acc, fmax((double)count - correction, 0.0)));
  return lt__node_cast(sqrt_of ? lt__node_un(LT_OP_SQRT, v) : v, dt);
}

static lt_tensor *var_std(const char *fn, lt_tensor *a, const int *axes, int naxes,
                          double correction, bool keepdim, bool sqrt_of) {
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (need_float(fn, a) != LT_OK) return NULL;
  if (isnan(correction)) {
    lt__err(LT_EINVAL, "%s: correction is NaN", fn);
    return NULL;
  }
  int64_t mask, count;
  if (axes_mask(fn, a, axes, naxes, &mask, &count) != LT_OK) return NULL;
  return lt__wrap(a->dev, variance(a, mask, count, correction, keepdim, sqrt_of));
}

lt_tensor *lt_var(lt_tensor *a, const int *axes, int naxes, double correction, bool keepdim) {
  return var_std("lt_var", a, axes, naxes, correction, keepdim, false);
}
lt_tensor *lt_std(lt_tensor *a, const int *axes, int naxes, double correction, bool keepdim) {
  return var_std("lt_std", a, axes, naxes, correction, keepdim, true);
}

/* ---- norm ------------------------------------------------------------------------------ */

/* s ** e where s > 0, and zero_value where s == 0, with a zero gradient there:
 * the power itself only ever sees the 1 put in place of a 0, so its infinite
 * slope at 0 never multiplies a zero into NaN (torch's masked norm gradient). */
static lt_node *pow_nonzero(lt_node *s, double e, double zero_value) {
  if (!s) return NULL;
  lt_dtype dt = (lt_dtype)s->dtype;
  lt_node *zero = lt__node_bin(LT_OP_EQ, ref(s), kc(dt, 0));
  lt_node *safe = lt__node_where(ref(zero), kc(dt, 1), s);
  lt_node *p = e == 0.5 ? lt__node_un(LT_OP_SQRT, safe) : lt__node_bin(LT_OP_POW, safe, kc(dt, e));
  return lt__node_where(zero, kc(dt, zero_value), p);
}

static lt_node *vector_norm(lt_node *x, double ord, int64_t mask, bool keepdim) {
  if (!x) return NULL;
  lt_dtype dt = (lt_dtype)x->dtype;
  if (isinf(ord)) /* max or min of |x|: the gradient goes to the ties, split evenly */
    return lt__node_reduce(ord > 0 ? LT_OP_MAX : LT_OP_MIN, lt__node_un(LT_OP_ABS, x), mask,
                           keepdim);
  if (ord == 0) /* the count of non-zero elements; no gradient */
    return lt__node_reduce(LT_OP_SUM, lt__node_cast(lt__node_bin(LT_OP_NE, x, kc(dt, 0)), dt), mask,
                           keepdim);
  if (ord == 1) return lt__node_reduce(LT_OP_SUM, lt__node_un(LT_OP_ABS, x), mask, keepdim);
  if (ord == 2)
    return pow_nonzero(
        lt__node_reduce(LT_OP_SUM, lt__node_bin(LT_OP_MUL, x, ref(x)), mask, keepdim), 0.5, 0.0);
  /* (sum |x|^ord)^(1/ord); |0|^ord is 0 (inf for ord < 0) with no gradient,
   * as torch's for ord < 1. */
  lt_node *terms = pow_nonzero(lt__node_un(LT_OP_ABS, x), ord, pow(0.0, ord));
  return pow_nonzero(lt__node_reduce(LT_OP_SUM, terms, mask, keepdim), 1.0 / ord,
                     pow(0.0, 1.0 / ord));
}

lt_tensor *lt_vector_norm(lt_tensor *a, const int *axes, int naxes, double ord, bool keepdim) {
  static const char *fn = "lt_vector_norm";
  if (lt__check_operands(fn, &a, 1) != LT_OK) return NULL;
  if (need_float(fn, a) != LT_OK) return NULL;
  if (isnan(ord)) {
    lt__err(LT_EINVAL, "%s: ord is NaN", fn);
    return NULL;
  }
  int64_t mask, count;
  if (axes_mask(fn, a, axes, naxes, &mask, &count) != LT_OK) return NULL;
  if (isinf(ord) && count == 0) {
    char s[LT_SHAPE_STR_MAX];
    lt__err(LT_ESHAPE, "%s: the %s norm of an empty group (shape %s) has no value", fn,
            ord > 0 ? "inf" : "-inf", lt__shape_str(a->shape, a->ndim, s, sizeof s));
    return NULL;
  }
  /* bf16 computes in f32 and rounds once, as torch's kernel accumulates */
  lt_dtype dt = (lt_dtype)a->dtype, acc = lt__dtype_compute(dt);
  return lt__wrap(a->dev, lt__node_cast(vector_norm(lt__ir_as(a, acc), ord, mask, keepdim), dt));
}

/* ---- remainder / floor_divide ------------------------------------------------------------ */

/* The two operands in their promoted dtype, broadcast shape checked. */
static int div_operands(const char *fn, lt_tensor *a, lt_tensor *b, lt_node **x, lt_node **y) {
  lt_tensor *ts[2] = {a, b};
  int rc = lt__check_operands(fn, ts, 2);
  if (rc != LT_OK) return rc;
  int64_t shape[LT_MAX_DIMS];
  int nd;
  rc = lt__broadcast(fn, a->shape, a->ndim, b->shape, b->ndim, shape, &nd);
  if (rc != LT_OK) return rc;
  lt_dtype dt = lt__promote((const lt_tensor *const *)ts, 2);
  if (dt == LT_BOOL)
    return lt__err(LT_EDTYPE, "%s: not defined for bool tensors (as torch); cast first", fn);
  *x = lt__ir_as(a, dt);
  *y = lt__ir_as(b, dt);
  if (*x && *y) return LT_OK;
  fail2(*x, *y);
  return lt_last_status() ? lt_last_status() : LT_ENOMEM;
}

/* C's fmod(a, b) in the operands' float dtype: the FMOD node, exact for any
 * magnitudes (|result| < |b|, the sign of a, -0.0 for fmod(-3, 3)); NaN for
 * b == 0 or an infinite a. Its gradient is torch's fmod one: 1 for a,
 * -trunc(a / b) for b. */
static lt_node *fmod_node(lt_node *a, lt_node *b) { return lt__node_bin(LT_OP_FMOD, a, b); }

/* torch's adjustment from a truncated to a floored division: the remainder
 * r is non-zero and its sign differs from b's. */
static lt_node *needs_floor_fix(lt_node *r, lt_node *b) {
  if (!r || !b) return fail2(r, b);
  lt_dtype dt = (lt_dtype)r->dtype;
  lt_node *nz = lt__node_bin(LT_OP_NE, ref(r), kc(dt, 0));
  return lt__node_bin(LT_OP_AND, nz,
                      lt__node_bin(LT_OP_NE, lt__node_bin(LT_OP_LT, r, kc(dt, 0)),
                                   lt__node_bin(LT_OP_LT, b, kc(dt, 0))));
}

/* Integers: DIV truncates (and gives 0 for x / 0); q b + r == a. */
static void int_divmod(lt_node *a, lt_node *b, lt_node **q, lt_node **r) {
  *q = lt__node_bin(LT_OP_DIV, ref(a), ref(b));
  *r = lt__node_bin(LT_OP_SUB, a, lt__node_bin(LT_OP_MUL, ref(*q), b));
}

/* Integer division by zero gives 0 for both ops (numpy's answer; torch
 * raises an error, which a lazy graph cannot: the divisor is data). */
static lt_node *int_div_zero(lt_node *b, lt_node *v) {
  if (!v) return fail2(b, v);
  return lt__node_where(lt__node_bin(LT_OP_EQ, b, kc((lt_dtype)v->dtype, 0)),
                        kc((lt_dtype)v->dtype, 0), v);
}

lt_tensor *lt_remainder(lt_tensor *a, lt_tensor *b) {
  lt_node *x, *y;
  if (div_operands("lt_remainder", a, b, &x, &y) != LT_OK) return NULL;
  lt_node *r;
  if (lt__is_float((lt_dtype)x->dtype)) {
    r = fmod_node(ref(x), ref(y));
    lt__node_release(x);
  } else {
    lt_node *q;
    int_divmod(x, ref(y), &q, &r);
    lt__node_release(q);
  }
  /* torch: fmod, then + b where the signs of the result and b differ. */
  lt_node *fix = needs_floor_fix(ref(r), ref(y));
  lt_node *res = lt__node_where(fix, lt__node_bin(LT_OP_ADD, ref(r), ref(y)), r);
  if (!lt__is_float((lt_dtype)y->dtype)) res = int_div_zero(ref(y), res);
  lt__node_release(y);
  return lt__wrap(a->dev, res);
}

/* torch's div_floor_floating: (a - fmod) / b, minus 1 where the signs call
 * for it, rounded to the nearest integer; a zero result takes the sign of
 * a / b; b == 0 gives a / b (inf or NaN). */
static lt_node *float_floor_divide(lt_node *a, lt_node *b) {
  lt_dtype dt = (lt_dtype)a->dtype;
  lt_node *mod = fmod_node(ref(a), ref(b));
  lt_node *div = lt__node_bin(LT_OP_DIV, lt__node_bin(LT_OP_SUB, ref(a), ref(mod)), ref(b));
  div = lt__node_where(needs_floor_fix(mod, ref(b)), lt__node_bin(LT_OP_SUB, ref(div), kc(dt, 1)),
                       div);
  lt_node *fl = lt__node_un(LT_OP_FLOOR, ref(div));
  lt_node *round_up =
      lt__node_bin(LT_OP_GT, lt__node_bin(LT_OP_SUB, ref(div), ref(fl)), kc(dt, 0.5));
  fl = lt__node_where(round_up, lt__node_bin(LT_OP_ADD, ref(fl), kc(dt, 1)), fl);
  lt_node *q = lt__node_bin(LT_OP_DIV, a, ref(b));
  lt_node *signed_zero = lt__node_bin(LT_OP_MUL, ref(q), kc(dt, 0));
  lt_node *res = lt__node_where(lt__node_bin(LT_OP_NE, div, kc(dt, 0)), fl, signed_zero);
  return lt__node_where(lt__node_bin(LT_OP_EQ, b, kc(dt, 0)), q, res);
}

lt_tensor *lt_floor_divide(lt_tensor *a, lt_tensor *b) {
  lt_node *x, *y;
  if (div_operands("lt_floor_divide", a, b, &x, &y) != LT_OK) return NULL;
  lt_node *res;
  if (lt__is_float((lt_dtype)x->dtype)) {
    res = float_floor_divide(x, y);
  } else {
    lt_node *q, *r;
    int_divmod(x, ref(y), &q, &r);
    lt_dtype dt = (lt_dtype)y->dtype;
    lt_node *fix = needs_floor_fix(r, ref(y));
    res = int_div_zero(y, lt__node_where(fix, lt__node_bin(LT_OP_SUB, ref(q), kc(dt, 1)), q));
  }
  /* A step function: no gradient (torch's is zero). */
  return lt__wrap(a->dev, lt__node_detached(res));
}

/* ---- scatter_add / index_add / scatter ---------------------------------------------------- */

static int check_index(const char *fn, const lt_tensor *index) {
  if (index->dtype == LT_I32 || index->dtype == LT_I64) return LT_OK;
  return lt__err(LT_EDTYPE, "%s: index must be i32 or i64, got %s", fn,
                 lt_dtype_name((lt_dtype)index->dtype));
}

static int same_dtype(const char *fn, const lt_tensor *a, const lt_tensor *src) {
  if (a->dtype == src->dtype) return LT_OK;
  return lt__err(LT_EDTYPE, "%s: src is %s but the input is %s (torch requires one dtype)", fn,
                 lt_dtype_name((lt_dtype)src->dtype), lt_dtype_name((lt_dtype)a->dtype));
}

/* torch's scatter shape rules: index, src and a of one rank; index no larger
 * than src in any dim, nor than a off the scatter axis. */
static int check_scatter_shapes(const char *fn, const lt_tensor *a, const lt_tensor *index,
                                const lt_tensor *src, int ax) {
  char sa[LT_SHAPE_STR_MAX], si[LT_SHAPE_STR_MAX], ss[LT_SHAPE_STR_MAX];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(index->shape, index->ndim, si, sizeof si);
  lt__shape_str(src->shape, src->ndim, ss, sizeof ss);
  if (index->ndim != a->ndim || src->ndim != a->ndim)
    return lt__err(LT_ESHAPE, "%s: input %s, index %s and src %s must have one rank", fn, sa, si,
                   ss);
  for (int d = 0; d < a->ndim; d++) {
    if (index->shape[d] > src->shape[d])
      return lt__err(LT_ESHAPE, "%s: index %s is larger than src %s in dim %d", fn, si, ss, d);
    if (d != ax && index->shape[d] > a->shape[d])
      return lt__err(LT_ESHAPE, "%s: index %s is larger than input %s in dim %d (axis %d)", fn, si,
                     sa, d, ax);
  }
  return LT_OK;
}

/* src (consumed) cut to shape from its start (torch uses only the part of src
 * that index covers). */
static lt_node *leading_block(lt_node *src, const int64_t *shape, int nd) {
  if (!src || (src->ndim == nd && !memcmp(src->shape, shape, sizeof(int64_t) * (size_t)nd)))
    return src;
  if (src->op == LT_OP_CONST) { /* every element is the same value */
    lt_node *c = lt__node_const((lt_dtype)src->dtype, shape, nd, src->fattr);
    lt__node_release(src);
    return c;
  }
  int64_t attrs[2 * LT_MAX_DIMS] = {0};
  for (int d = 0; d < nd; d++) attrs[nd + d] = 1;
  return lt__node_make(LT_OP_SLICE, (lt_dtype)src->dtype, shape, nd, &src, 1, attrs, 2 * nd, 0.0);
}

/* A SCATTER_ADD node: zeros of shape with src's elements added at index
 * along ax (src and index of one shape). Out-of-range indices fail when the
 * graph runs (LT_EEXEC), before anything is written. */
static lt_node *scatter_add_node(lt_node *src, lt_node *index, int ax, const int64_t *shape,
                                 int nd) {
  if (!src || !index) return fail2(src, index);
  lt_node *ops[2] = {src, index};
  int64_t attr = ax;
  return lt__node_make(LT_OP_SCATTER_ADD, (lt_dtype)src->dtype, shape, nd, ops, 2, &attr, 1, 0.0);
}

/* The checked operands of a scatter: a's, index's and src's nodes, with 0-d
 * operands seen as [1] (the kernels want an axis). *shape / *nd: a's shape as
 * the nodes see it. src may be 0-d when value_ok (scatter's value form: any
 * dtype, converted to a's). */
typedef struct scatter_args {
  lt_node *a, *index, *src;
  int ax, nd;
  int64_t shape[LT_MAX_DIMS];
} scatter_args;

/* torch's value form takes a Scalar, converted to a's dtype with an overflow
 * check (as lt_masked_fill's value): the 0-d src is read (its pending graph
 * runs) unless its dtype converts without loss. u8 takes [0, 255] only,
 * where torch 1.13 also wraps -255..-1 (-1 gives 255) but rejects -256. */
static int check_scatter_value(const char *fn, const lt_tensor *a, lt_tensor *src) {
  lt_dtype dt = (lt_dtype)a->dtype;
  if (src->dtype == dt || src->dtype == LT_BOOL || dt == LT_F64 || dt == LT_BOOL) return LT_OK;
  double v, held;
  int rc = lt_item(src, 0, &v);
  if (rc != LT_OK) return rc;
  if (lt__fill_value(dt, v, &held)) return LT_OK;
  return lt__err(LT_EINVAL, "%s: value %g cannot be converted to %s without overflow", fn, v,
                 lt_dtype_name(dt));
}

static int scatter_prepare(const char *fn, lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src,
                           bool value_ok, scatter_args *s) {
  lt_tensor *ts[3] = {a, index, src};
  int rc = lt__check_operands(fn, ts, 3);
  if (rc != LT_OK) return rc;
  bool value = value_ok && src->ndim == 0 && a->ndim > 0;
  rc = check_index(fn, index);
  if (rc == LT_OK && !value) rc = same_dtype(fn, a, src);
  if (rc == LT_OK) rc = lt__norm_axis(fn, axis, a->ndim ? a->ndim : 1, &s->ax);
  if (rc == LT_OK) rc = check_scatter_shapes(fn, a, index, value ? index : src, s->ax);
  if (rc == LT_OK && value) rc = check_scatter_value(fn, a, src);
  if (rc != LT_OK) return rc;
  static const int64_t one[1] = {1};
  s->nd = a->ndim ? a->ndim : 1;
  memcpy(s->shape, a->ndim ? a->shape : one, sizeof(int64_t) * (size_t)s->nd);
  const int64_t *ishape = index->ndim ? index->shape : one;
  s->a = lt__node_reshape(lt__ir_as(a, (lt_dtype)a->dtype), s->shape, s->nd);
  s->index = lt__node_reshape(lt__ir_as(index, (lt_dtype)index->dtype), ishape, s->nd);
  lt_node *v = lt__ir_as(src, (lt_dtype)a->dtype);
  if (value && v && v->op == LT_OP_CONST) {
    lt_node *c = lt__node_const((lt_dtype)v->dtype, ishape, s->nd, v->fattr);
    lt__node_release(v);
    v = c;
  } else if (value) { /* the value (in a's dtype), broadcast over the index */
    lt_node *c = v;
    v = lt__node_make(LT_OP_EXPAND, (lt_dtype)a->dtype, ishape, s->nd, &c, 1, NULL, 0, 0.0);
  } else {
    v = leading_block(lt__node_reshape(v, src->ndim ? src->shape : one, s->nd), ishape, s->nd);
  }
  s->src = v;
  if (s->a && s->index && s->src) return LT_OK;
  lt__node_release(s->a);
  fail2(s->index, s->src);
  return lt_last_status() ? lt_last_status() : LT_ENOMEM;
}

/* The result node r (consumed) as a tensor of a's own shape (0-d stays 0-d). */
static lt_tensor *scatter_result(lt_tensor *a, lt_node *r) {
  return lt__wrap(a->dev, lt__node_reshape(r, a->shape, a->ndim));
}

lt_tensor *lt_scatter_add(lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src) {
  scatter_args s;
  if (scatter_prepare("lt_scatter_add", a, axis, index, src, false, &s) != LT_OK) return NULL;
  int caller = lt__caller_begin(LT_CALLER_SCATTER_ADD); /* a bad index names lt_scatter_add */
  lt_node *added = scatter_add_node(s.src, s.index, s.ax, s.shape, s.nd);
  lt__caller_end(caller);
  return scatter_result(a, lt__node_bin(LT_OP_ADD, s.a, added));
}

/* A GATHER node: m's elements at index along ax (index's shape). */
static lt_node *gather_node(lt_node *m, lt_node *index, int ax) {
  if (!m || !index) return fail2(m, index);
  lt_node *ops[2] = {m, index};
  int64_t attr = ax;
  int64_t shape[LT_MAX_DIMS];
  memcpy(shape, index->shape, sizeof(int64_t) * (size_t)index->ndim);
  return lt__node_make(LT_OP_GATHER, (lt_dtype)m->dtype, shape, index->ndim, ops, 2, &attr, 1, 0.0);
}

/* floor(x / d) for integers, d > 0 (DIV truncates). */
static lt_node *floor_div_pos(lt_node *x, lt_node *d) {
  lt_node *q, *r;
  int_divmod(x, d, &q, &r);
  lt_node *neg = lt__node_bin(LT_OP_LT, r, kc(LT_I64, 0));
  return lt__node_where(neg, lt__node_bin(LT_OP_SUB, ref(q), kc(LT_I64, 1)), q);
}

/* The mean of the values scattered onto each position (v: the values in
 * f64 or i64; count: how many land on each position, at least 1), in two
 * passes so that values that are all equal come back exactly: a first
 * estimate m (floats: a sum of v / count, which cannot overflow; integers: in
 * f64, where a sum of i64 values cannot wrap), then m plus the mean of the
 * residuals v - m, which are then equal and small. Integers get the floored
 * mean, exact while the spread of the values times their count stays below
 * 2^63. A position whose estimate is inf or NaN (an inf or NaN value) keeps
 * it: its residuals are NaN. */
static lt_node *scatter_mean(lt_node *v, lt_node *index, lt_node *count, const scatter_args *s) {
  if (!v || !index || !count) {
    lt__node_release(index);
    return fail2(v, count);
  }
  bool is_float = v->dtype == LT_F64;
  lt_node *m;
  if (is_float) {
    lt_node *share = lt__node_bin(LT_OP_DIV, ref(v), gather_node(ref(count), ref(index), s->ax));
    m = scatter_add_node(share, ref(index), s->ax, s->shape, s->nd);
  } else { /* truncated to i64: the residuals correct it */
    lt_node *sum =
        scatter_add_node(lt__node_cast(ref(v), LT_F64), ref(index), s->ax, s->shape, s->nd);
    m = lt__node_cast(lt__node_bin(LT_OP_DIV, sum, lt__node_cast(ref(count), LT_F64)), LT_I64);
  }
  lt_node *resid = lt__node_bin(LT_OP_SUB, v, gather_node(ref(m), ref(index), s->ax));
  lt_node *rsum = scatter_add_node(resid, index, s->ax, s->shape, s->nd);
  lt_node *rmean = is_float ? lt__node_bin(LT_OP_DIV, rsum, count) : floor_div_pos(rsum, count);
  lt_node *mean = lt__node_bin(LT_OP_ADD, ref(m), rmean);
  if (!is_float) {
    lt__node_release(m);
    return mean;
  }
  lt_node *finite = lt__node_bin(LT_OP_LT, lt__node_un(LT_OP_ABS, ref(m)), kc(LT_F64, INFINITY));
  return lt__node_where(finite, mean, m);
}

/* torch.scatter (replace): each position written once gets exactly the value
 * written. Where index repeats a position torch leaves the result unspecified
 * (one of the values); here it is their mean (floored for integers and
 * bool), exact when they are all equal (scattering one fill value). */
lt_tensor *lt_scatter(lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src) {
  scatter_args s;
  if (scatter_prepare("lt_scatter", a, axis, index, src, true, &s) != LT_OK) return NULL;
  int caller = lt__caller_begin(LT_CALLER_SCATTER); /* a bad index names lt_scatter */
  lt_dtype dt = (lt_dtype)s.a->dtype;
  lt_dtype wide = lt__is_float(dt) ? LT_F64 : LT_I64;
  lt_node *ones = lt__node_const(wide, s.index->shape, s.index->ndim, 1.0);
  lt_node *count = scatter_add_node(ones, ref(s.index), s.ax, s.shape, s.nd);
  lt_node *written = lt__node_bin(LT_OP_GT, ref(count), kc(wide, 0));
  /* max(count, 1): positions nothing lands on divide by 1, not 0 */
  lt_node *mean = scatter_mean(lt__node_cast(s.src, wide), s.index,
                               lt__node_bin(LT_OP_MAXIMUM, count, kc(wide, 1)), &s);
  lt__caller_end(caller);
  return scatter_result(a, lt__node_where(written, lt__node_cast(mean, dt), s.a));
}

/* torch.index_add: a with alpha * src[..., i, ...] added at index[i] along
 * axis; src has a's shape except len(index) along axis. */
lt_tensor *lt_index_add(lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src, double alpha) {
  static const char *fn = "lt_index_add";
  lt_tensor *ts[3] = {a, index, src};
  if (lt__check_operands(fn, ts, 3) != LT_OK) return NULL;
  if (check_index(fn, index) != LT_OK || same_dtype(fn, a, src) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)a->dtype;
  if (!lt__is_float(dt) && alpha != trunc(alpha)) {
    lt__err(LT_EINVAL, "%s: alpha %g must be an integer for a %s input (as torch)", fn, alpha,
            lt_dtype_name(dt));
    return NULL;
  }
  int ax;
  if (lt__norm_axis(fn, axis, a->ndim ? a->ndim : 1, &ax) != LT_OK) return NULL;
  char sa[LT_SHAPE_STR_MAX], si[LT_SHAPE_STR_MAX], ss[LT_SHAPE_STR_MAX];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(index->shape, index->ndim, si, sizeof si);
  lt__shape_str(src->shape, src->ndim, ss, sizeof ss);
  int64_t len = index->ndim ? index->shape[0] : 1;
  bool ok = index->ndim <= 1 && src->ndim == a->ndim;
  for (int d = 0; ok && d < a->ndim; d++) ok = src->shape[d] == (d == ax ? len : a->shape[d]);
  if (!ok || (a->ndim == 0 && len != 1)) {
    lt__err(LT_ESHAPE,
            "%s: src %s must have input %s's shape with the length of index %s (1-d) along "
            "axis %d",
            fn, ss, sa, si, ax);
    return NULL;
  }
  static const int64_t one[1] = {1};
  int nd = a->ndim ? a->ndim : 1;
  const int64_t *shape = a->ndim ? a->shape : one;
  lt_node *x = lt__node_reshape(lt__ir_as(a, dt), shape, nd);
  lt_node *v = lt__node_reshape(lt__ir_as(src, dt), src->ndim ? src->shape : one, nd);
  if (alpha != 1) v = lt__node_bin(LT_OP_MUL, v, lt__scalar_node(a->dev, dt, alpha));
  lt_node *ops[2] = {v, lt__node_reshape(lt__ir_as(index, (lt_dtype)index->dtype), &len, 1)};
  int64_t attr = ax;
  lt_node *added = ops[0] && ops[1]
                       ? lt__node_make(LT_OP_INDEX_ADD, dt, shape, nd, ops, 2, &attr, 1, 0.0)
                       : fail2(ops[0], ops[1]);
  return scatter_result(a, lt__node_bin(LT_OP_ADD, x, added));
}
