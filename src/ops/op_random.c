/* Random op builders: uniform, normal, bernoulli, dropout and randperm.
 *
 * Each builder validates its arguments first and only then draws the op's seed
 * from the device's chain (exec/rng.h), so a rejected call never advances the
 * random state. The random node (RNG_UNIFORM / RNG_NORMAL / RANDPERM) takes the
 * seed as its operand; bounds, moments, probabilities and scales enter the
 * graph through lt__scalar_node, so changing them does not recompile (only 0
 * and +-1 are baked in as constants).
 *
 *  - lt_rand_uniform: lo + (hi - lo) * U, then MINIMUM with the largest value
 *    of the dtype below hi: rounding of lo + (hi - lo) * U may reach hi in the
 *    dtype, and the result must stay in [lo, hi). [0, 1) is U alone.
 *  - lt_rand_normal: mean + std * N.
 *  - lt_bernoulli: CAST(U < p) to p's dtype. p is not checked (it is data):
 *    p <= 0 gives 0, p >= 1 gives 1, NaN gives 0.
 *  - lt_dropout: WHERE(U >= p, a * (1 / (1 - p)), 0); without training, or
 *    with p == 0, a new tensor over a's value. */
#include <math.h>

#include "../exec/rng.h"
#include "lt_device.h"
#include "lt_ops.h"

/* Device, float dtype and shape of a random creation op. */
static int check_float_op(const char *fn, lt_device dev, lt_dtype dt, const int64_t *shape,
                          int ndim) {
  if (!lt__device_ctx(fn, dev)) return LT_EDEVICE;
  if (!lt__dtype_valid(dt) || !lt__is_float(dt))
    return lt__err(LT_EDTYPE, "%s: dtype %s is not accepted (f32 or f64)", fn, lt_dtype_name(dt));
  return lt__check_shape(fn, shape, ndim);
}

/* The random node of op on dev, with the device's next seed as operand. */
static lt_node *random_node(const char *fn, lt_device dev, lt_op op, lt_dtype dt,
                            const int64_t *shape, int ndim) {
  lt_node *seed = lt__rng_next_seed(fn, dev);
  return lt__node_make(op, dt, shape, ndim, &seed, 1, NULL, 0, 0.0);
}

/* x op scalar (consumes x), the scalar in x's dtype, broadcast inside the
 * binary node; the result has x's dtype, or bool for a comparison. */
static lt_node *with_scalar(lt_device dev, lt_op op, lt_node *x, double v) {
  if (!x) return NULL;
  lt_dtype dt = (lt_dtype)x->dtype;
  lt_dtype result = lt__op_result(op) == LT_RES_BOOL ? LT_BOOL : dt;
  lt_node *ops[2] = {x, lt__scalar_node(dev, dt, v)};
  return lt__node_make(op, result, x->shape, x->ndim, ops, 2, NULL, 0, 0.0);
}

/* The largest value of dt below v. */
static double below(lt_dtype dt, double v) {
  if (dt == LT_F32) return (double)nextafterf((float)v, -INFINITY);
  return nextafter(v, -INFINITY);
}

lt_tensor *lt_rand_uniform(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double lo,
                           double hi) {
  const char *fn = "lt_rand_uniform";
  if (check_float_op(fn, dev, dt, shape, ndim) != LT_OK) return NULL;
  double lo_r = lt__dtype_round(dt, lo), hi_r = lt__dtype_round(dt, hi);
  if (!isfinite(lo_r) || !isfinite(hi_r) || !(lo_r < hi_r)) {
    lt__err(LT_EINVAL, "%s: need finite lo < hi in %s (got lo = %g, hi = %g)", fn,
            lt_dtype_name(dt), lo, hi);
    return NULL;
  }
  double range = lt__dtype_round(dt, hi_r - lo_r);
  if (!isfinite(range)) {
    lt__err(LT_EINVAL, "%s: hi - lo = %g overflows %s", fn, hi_r - lo_r, lt_dtype_name(dt));
    return NULL;
  }
  lt_node *x = random_node(fn, dev, LT_OP_RNG_UNIFORM, dt, shape, ndim);
  if (range != 1.0 || lo_r != 0.0) {
    if (range != 1.0) x = with_scalar(dev, LT_OP_MUL, x, range);
    if (lo_r != 0.0) x = with_scalar(dev, LT_OP_ADD, x, lo_r);
    x = with_scalar(dev, LT_OP_MINIMUM, x, below(dt, hi_r));
  }
  return lt__wrap(dev, x);
}

lt_tensor *lt_rand_normal(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double mean,
                          double std) {
  const char *fn = "lt_rand_normal";
  if (check_float_op(fn, dev, dt, shape, ndim) != LT_OK) return NULL;
  double mean_r = lt__dtype_round(dt, mean), std_r = lt__dtype_round(dt, std);
  if (!isfinite(mean_r) || !isfinite(std_r) || !(std_r >= 0)) {
    lt__err(LT_EINVAL, "%s: need a finite mean and a finite std >= 0 in %s (got %g, %g)", fn,
            lt_dtype_name(dt), mean, std);
    return NULL;
  }
  lt_node *x = random_node(fn, dev, LT_OP_RNG_NORMAL, dt, shape, ndim);
  if (std_r != 1.0) x = with_scalar(dev, LT_OP_MUL, x, std_r);
  if (mean_r != 0.0) x = with_scalar(dev, LT_OP_ADD, x, mean_r);
  return lt__wrap(dev, x);
}

lt_tensor *lt_bernoulli(lt_tensor *p) {
  const char *fn = "lt_bernoulli";
  lt_tensor *ts[1] = {p};
  if (lt__check_operands(fn, ts, 1) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)p->dtype;
  if (!lt__is_float(dt)) {
    lt__err(LT_EDTYPE, "%s: p must have a float dtype (f32 or f64), got %s", fn, lt_dtype_name(dt));
    return NULL;
  }
  lt_node *pv = lt__ir_as(p, dt);
  if (!pv) return NULL;
  lt_node *cmp[2] = {random_node(fn, p->dev, LT_OP_RNG_UNIFORM, dt, p->shape, p->ndim), pv};
  lt_node *hit = lt__node_make(LT_OP_LT, LT_BOOL, p->shape, p->ndim, cmp, 2, NULL, 0, 0.0);
  return lt__wrap(p->dev, lt__node_cast(hit, dt));
}

lt_tensor *lt_dropout(lt_tensor *a, double p, bool train) {
  const char *fn = "lt_dropout";
  lt_tensor *ts[1] = {a};
  if (lt__check_operands(fn, ts, 1) != LT_OK) return NULL;
  lt_dtype dt = (lt_dtype)a->dtype;
  if (!lt__is_float(dt)) {
    lt__err(LT_EDTYPE, "%s: a must have a float dtype (f32 or f64), got %s", fn, lt_dtype_name(dt));
    return NULL;
  }
  double p_r = lt__dtype_round(dt, p);
  if (!(p >= 0 && p_r < 1)) {
    lt__err(LT_EINVAL, "%s: p must be in [0, 1) in %s (got %g)", fn, lt_dtype_name(dt), p);
    return NULL;
  }
  if (!train || p_r == 0) return lt__wrap(a->dev, lt__ir_as(a, dt));
  lt_node *av = lt__ir_as(a, dt);
  if (!av) return NULL;
  lt_device dev = a->dev;
  lt_node *kept = with_scalar(dev, LT_OP_MUL, av, 1.0 / (1.0 - p_r));
  lt_node *keep = with_scalar(dev, LT_OP_GE,
                              random_node(fn, dev, LT_OP_RNG_UNIFORM, dt, a->shape, a->ndim), p_r);
  lt_node *w[3] = {keep, kept, lt__node_const(dt, NULL, 0, 0.0)};
  return lt__make(dev, LT_OP_WHERE, dt, a->shape, a->ndim, w, 3, NULL, 0, 0.0);
}

lt_tensor *lt_randperm(lt_device dev, lt_dtype dt, int64_t n) {
  const char *fn = "lt_randperm";
  if (!lt__device_ctx(fn, dev)) return NULL;
  if (dt != LT_I32 && dt != LT_I64) { /* the index dtypes (not u8 / i8) */
    lt__err(LT_EDTYPE, "%s: dtype %s is not accepted (i32 or i64)", fn, lt_dtype_name(dt));
    return NULL;
  }
  if (n < 0) {
    lt__err(LT_EINVAL, "%s: n must be >= 0 (got %lld)", fn, (long long)n);
    return NULL;
  }
  if (dt == LT_I32 && n > (int64_t)INT32_MAX + 1) {
    lt__err(LT_EINVAL, "%s: n = %lld does not fit i32 indices", fn, (long long)n);
    return NULL;
  }
  if (lt__check_shape(fn, &n, 1) != LT_OK) return NULL;
  return lt__wrap(dev, random_node(fn, dev, LT_OP_RANDPERM, dt, &n, 1));
}
