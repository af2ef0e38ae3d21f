/* Normalisation layers (torch.nn.functional.batch_norm, layer_norm,
 * group_norm) as composite ops: built from SUM, elementwise and shape nodes
 * only, so every backend runs them and autograd differentiates them through
 * their parts (no op-table row, kernel or gradient rule of their own).
 *
 * Shape of the graphs, chosen for the cpu backend's fusion: the statistics
 * take two reductions over x (the mean, then the sum of squared deviations
 * from it: two-pass, as lt_var, so a large mean does not cancel the
 * variance); batch and group norm then fold rsqrt(var + eps), weight and
 * bias into one scale and one shift per channel, and the output is a single
 * elementwise pass x * scale + shift (torch's CPU kernels do the same).
 *
 * Every tensor argument must have x's dtype (torch's CPU kernels refuse mixed
 * dtypes), except that a bf16 x takes f32 parameters too (torch's batch_norm
 * does; its layer_norm does from 2.0 on), so that f32 layers run on bf16
 * activations under autocast. A bf16 x computes in f32 and its result is
 * rounded to bf16 once, as torch's CPU kernels (a graph in bf16 would round
 * after every node). The node helpers consume their node arguments and
 * give NULL for a NULL argument, so a failure anywhere reaches the end as
 * NULL with the first error recorded. */
#include <math.h>
#include <string.h>

#include "lt_ops.h"
#include "op_nograd.h"

/* A 0-d constant (broadcasts against anything). */
static lt_node *kc(lt_dtype dt, double v) { return lt__node_const(dt, NULL, 0, v); }

static lt_node *ref(lt_node *n) { return lt__node_retain(n); }

/* ---- checks ------------------------------------------------------------------------ */

/* x, then the optional tensors that are given, on one device; x floating. */
static int check_inputs(const char *fn, lt_tensor *x, lt_tensor *const *opt, int nopt) {
  lt_tensor *ts[5] = {x};
  int n = 1;
  for (int i = 0; i < nopt; i++)
    if (opt[i]) ts[n++] = opt[i];
  int rc = lt__check_operands(fn, ts, n);
  if (rc != LT_OK) return rc;
  if (!lt__is_float((lt_dtype)x->dtype))
    return lt__err(LT_EDTYPE, "%s: needs a floating input, got %s (as torch)", fn,
                   lt_dtype_name((lt_dtype)x->dtype));
  return LT_OK;
}

/* The dtype a norm of x computes in. */
static lt_dtype compute_dtype(const lt_tensor *x) { return lt__dtype_compute(x->dtype); }

/* An optional parameter t (named what): NULL, or of shape shape and x's
 * dtype (or f32 for a bf16 x). */
static int check_param(const char *fn, const char *what, const lt_tensor *t, const lt_tensor *x,
                       const int64_t *shape, int nd) {
  if (!t) return LT_OK;
  if (t->ndim != nd || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)nd) != 0) {
    char s[LT_SHAPE_STR_MAX], w[LT_SHAPE_STR_MAX];
    return lt__err(LT_ESHAPE, "%s: %s has shape %s, expected %s", fn, what,
                   lt__shape_str(t->shape, t->ndim, s, sizeof s),
                   lt__shape_str(shape, nd, w, sizeof w));
  }
  if (t->dtype != x->dtype && !(x->dtype == LT_BF16 && t->dtype == LT_F32))
    return lt__err(LT_EDTYPE, "%s: %s is %s but the input is %s (torch requires one dtype)", fn,
                   what, lt_dtype_name((lt_dtype)t->dtype), lt_dtype_name((lt_dtype)x->dtype));
  return LT_OK;
}

static int check_eps(const char *fn, double eps) {
  if (isfinite(eps) && eps >= 0) return LT_OK;
  return lt__err(LT_EINVAL, "%s: eps must be finite and >= 0, got %g", fn, eps);
}

/* ---- graph pieces -------------------------------------------------------------------- */

/* The mean of x over the axes in mask (keepdim) and the sum of squared
 * deviations from it (keepdim): two passes. count: elements per group. x is
 * consumed.
 *
 * The mean inside the deviations is a constant to autograd: the sum of
 * squares' derivative by the mean, -2 sum(x - mean), is zero for every x (as
 * are all its derivatives), but differentiated it would cost the backward one
 * more reduction over x per layer, a full pass over the activations. torch's
 * backward formula leaves it out the same way. */
static void moments(lt_node *x, int64_t mask, int64_t count, lt_node **mean, lt_node **sqdev) {
  lt_dtype dt = x ? (lt_dtype)x->dtype : LT_F32;
  *mean = lt__node_bin(LT_OP_DIV, lt__node_reduce(LT_OP_SUM, ref(x), mask, true),
                       kc(dt, (double)count));
  lt_node *d = lt__node_bin(LT_OP_SUB, x, lt__node_detached(ref(*mean)));
  *sqdev = lt__node_reduce(LT_OP_SUM, lt__node_bin(LT_OP_MUL, d, ref(d)), mask, true);
}

/* t's value in dt, reshaped to shape (NULL t gives NULL without an error:
 * callers test t first). */
static lt_node *param_node(lt_tensor *t, lt_dtype dt, const int64_t *shape, int nd) {
  return lt__node_reshape(lt__ir_as(t, dt), shape, nd);
}

/* x * scale + shift, scale = rstd * weight and shift = bias - mean * scale
 * (all consumed; weight and bias, already in the stats' shape, are left out
 * when not given: a NULL node of a given one is a failure). */
static lt_node *scale_shift(lt_node *x, lt_node *mean, lt_node *rstd, const lt_tensor *weight,
                            lt_node *w, const lt_tensor *bias, lt_node *b) {
  lt_node *scale = weight ? lt__node_bin(LT_OP_MUL, rstd, w) : rstd;
  lt_node *ms = lt__node_bin(LT_OP_MUL, mean, ref(scale));
  lt_node *shift = bias ? lt__node_bin(LT_OP_SUB, b, ms) : lt__node_un(LT_OP_NEG, ms);
  return lt__node_bin(LT_OP_ADD, lt__node_bin(LT_OP_MUL, x, scale), shift);
}

static lt_node *rsqrt_eps(lt_node *var, double eps) {
  lt_dtype dt = var ? (lt_dtype)var->dtype : LT_F32;
  return lt__node_un(LT_OP_RSQRT, lt__node_bin(LT_OP_ADD, var, kc(dt, eps)));
}

/* ---- batch_norm ---------------------------------------------------------------------- */

/* (1 - momentum) r + momentum s, detached (running statistics carry no
 * gradient), in r's shape [C]. s consumed. */
static lt_node *running_update(lt_tensor *r, lt_node *s, double momentum) {
  lt_dtype dt = compute_dtype(r);
  lt_node *sc = lt__node_reshape(lt__node_cast(s, dt), r->shape, r->ndim);
  lt_node *v = lt__node_bin(LT_OP_ADD, lt__node_bin(LT_OP_MUL, sc, kc(dt, momentum)),
                            lt__node_bin(LT_OP_MUL, lt__ir_as(r, dt), kc(dt, 1.0 - momentum)));
  return lt__node_detached(lt__node_cast(v, (lt_dtype)r->dtype));
}

lt_tensor *lt_batch_norm(lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                         lt_tensor *weight, lt_tensor *bias, bool training, double momentum,
                         double eps) {
  static const char *fn = "lt_batch_norm";
  lt_tensor *opt[4] = {running_mean, running_var, weight, bias};
  if (check_inputs(fn, x, opt, 4) != LT_OK) return NULL;
  char sx[LT_SHAPE_STR_MAX];
  lt__shape_str(x->shape, x->ndim, sx, sizeof sx);
  if (x->ndim < 2) {
    lt__err(LT_ESHAPE, "%s: input of shape %s needs at least 2 dims [N, C, ...]", fn, sx);
    return NULL;
  }
  if (check_eps(fn, eps) != LT_OK) return NULL;
  if (!isfinite(momentum)) {
    lt__err(LT_EINVAL, "%s: momentum must be finite, got %g", fn, momentum);
    return NULL;
  }
  const int64_t c = x->shape[1];
  if (check_param(fn, "running_mean", running_mean, x, &c, 1) != LT_OK ||
      check_param(fn, "running_var", running_var, x, &c, 1) != LT_OK ||
      check_param(fn, "weight", weight, x, &c, 1) != LT_OK ||
      check_param(fn, "bias", bias, x, &c, 1) != LT_OK)
    return NULL;
  if (!running_mean != !running_var) {
    lt__err(LT_EINVAL, "%s: running_mean and running_var are given both or neither", fn);
    return NULL;
  }
  if (!training && !running_mean) {
    lt__err(LT_EINVAL, "%s: running_mean and running_var are required when not training", fn);
    return NULL;
  }
  int64_t count = 1, mask = 0; /* elements per channel; every axis but 1 */
  for (int d = 0; d < x->ndim; d++)
    if (d != 1) {
      count *= x->shape[d];
      mask |= (int64_t)1 << d;
    }
  if (training && count == 1) {
    lt__err(LT_ESHAPE,
            "%s: Expected more than 1 value per channel when training, got input of "
            "shape %s",
            fn, sx);
    return NULL;
  }

  lt_dtype dt = compute_dtype(x);
  int64_t cshape[LT_MAX_DIMS]; /* [1, C, 1, ...]: per channel, broadcast over x */
  for (int d = 0; d < x->ndim; d++) cshape[d] = d == 1 ? c : 1;
  int nd = x->ndim;
  lt_node *xn = lt__ir_as(x, dt);
  lt_node *w = weight ? param_node(weight, dt, cshape, nd) : NULL;
  lt_node *b = bias ? param_node(bias, dt, cshape, nd) : NULL;
  lt_node *y, *new_mean = NULL, *new_var = NULL;
  bool update = training && running_mean && count > 0; /* torch skips an empty batch */
  if (training) {
    lt_node *mean, *sqdev;
    moments(ref(xn), mask, count, &mean, &sqdev);
    lt_node *var = lt__node_bin(LT_OP_DIV, ref(sqdev), kc(dt, (double)count));
    if (update) {
      new_mean = running_update(running_mean, ref(mean), momentum);
      new_var = running_update(
          running_var, lt__node_bin(LT_OP_DIV, ref(sqdev), kc(dt, (double)(count - 1))), momentum);
    }
    lt__node_release(sqdev);
    y = scale_shift(xn, mean, rsqrt_eps(var, eps), weight, w, bias, b);
  } else { /* the running statistics are constants here (torch does not differentiate them) */
    lt_node *mean = lt__node_detached(param_node(running_mean, dt, cshape, nd));
    lt_node *var = lt__node_detached(param_node(running_var, dt, cshape, nd));
    y = scale_shift(xn, mean, rsqrt_eps(var, eps), weight, w, bias, b);
  }
  if (update && (!new_mean || !new_var)) {
    lt__node_release(y);
    y = NULL;
  }
  lt_tensor *out = lt__wrap(x->dev, lt__node_cast(y, (lt_dtype)x->dtype));
  if (!out || !update) {
    lt__node_release(new_mean);
    lt__node_release(new_var);
    return out;
  }
  /* The result exists: only now do the running statistics change (as lt_assign). */
  lt__tensor_set_ir(running_mean, new_mean);
  lt__tensor_set_ir(running_var, new_var);
  return out;
}

/* ---- layer_norm ---------------------------------------------------------------------- */

lt_tensor *lt_layer_norm(lt_tensor *x, const int64_t *normalized_shape, int nnorm,
                         lt_tensor *weight, lt_tensor *bias, double eps) {
  static const char *fn = "lt_layer_norm";
  lt_tensor *opt[2] = {weight, bias};
  if (check_inputs(fn, x, opt, 2) != LT_OK) return NULL;
  if (nnorm < 1 || nnorm > LT_MAX_DIMS || !normalized_shape) {
    lt__err(LT_EINVAL, "%s: normalized_shape needs 1 to %d dims (got %d, %s)", fn, LT_MAX_DIMS,
            nnorm, normalized_shape ? "given" : "NULL");
    return NULL;
  }
  int off = x->ndim - nnorm;
  bool fits = off >= 0;
  for (int i = 0; fits && i < nnorm; i++) fits = x->shape[off + i] == normalized_shape[i];
  if (!fits) {
    char sn[LT_SHAPE_STR_MAX], sx[LT_SHAPE_STR_MAX];
    lt__shape_str(normalized_shape, nnorm, sn, sizeof sn);
    lt__err(LT_ESHAPE, "%s: normalized_shape %s does not match the last dims of the input %s", fn,
            sn, lt__shape_str(x->shape, x->ndim, sx, sizeof sx));
    return NULL;
  }
  if (check_eps(fn, eps) != LT_OK ||
      check_param(fn, "weight", weight, x, normalized_shape, nnorm) != LT_OK ||
      check_param(fn, "bias", bias, x, normalized_shape, nnorm) != LT_OK)
    return NULL;
  int64_t count = 1, mask = 0;
  for (int d = off; d < x->ndim; d++) {
    count *= x->shape[d];
    mask |= (int64_t)1 << d;
  }
  lt_dtype dt = compute_dtype(x);
  lt_node *xn = lt__ir_as(x, dt);
  lt_node *mean, *sqdev;
  moments(ref(xn), mask, count, &mean, &sqdev);
  lt_node *rstd = rsqrt_eps(lt__node_bin(LT_OP_DIV, sqdev, kc(dt, (double)count)), eps);
  /* The statistics are per row and the affine per column: (x - mean) * rstd,
   * one elementwise pass with the affine (and more accurate than a shift). */
  lt_node *y = lt__node_bin(LT_OP_MUL, lt__node_bin(LT_OP_SUB, xn, mean), rstd);
  if (weight) y = lt__node_bin(LT_OP_MUL, y, lt__ir_as(weight, dt));
  if (bias) y = lt__node_bin(LT_OP_ADD, y, lt__ir_as(bias, dt));
  return lt__wrap(x->dev, lt__node_cast(y, (lt_dtype)x->dtype));
}

/* ---- group_norm ---------------------------------------------------------------------- */

/* s [N, G, 1] (consumed) repeated over each group's channels as cshape
 * [N, C, 1, ...]. */
static lt_node *per_channel(lt_node *s, int64_t n, int64_t g, int64_t c, const int64_t *cshape,
                            int nd) {
  if (!s) return NULL;
  int64_t wide[3] = {n, g, g ? c / g : 0};
  lt_node *e = lt__node_make(LT_OP_EXPAND, (lt_dtype)s->dtype, wide, 3, &s, 1, NULL, 0, 0.0);
  return lt__node_reshape(e, cshape, nd);
}

lt_tensor *lt_group_norm(lt_tensor *x, int64_t num_groups, lt_tensor *weight, lt_tensor *bias,
                         double eps) {
  static const char *fn = "lt_group_norm";
  lt_tensor *opt[2] = {weight, bias};
  if (check_inputs(fn, x, opt, 2) != LT_OK) return NULL;
  char sx[LT_SHAPE_STR_MAX];
  lt__shape_str(x->shape, x->ndim, sx, sizeof sx);
  if (x->ndim < 2) {
    lt__err(LT_ESHAPE, "%s: input of shape %s needs at least 2 dims [N, C, ...]", fn, sx);
    return NULL;
  }
  const int64_t n = x->shape[0], c = x->shape[1];
  if (num_groups <= 0) {
    lt__err(LT_EINVAL, "%s: num_groups must be positive, got %lld", fn, (long long)num_groups);
    return NULL;
  }
  if (c % num_groups != 0) {
    lt__err(LT_ESHAPE, "%s: the %lld channels of the input %s are not divisible by num_groups %lld",
            fn, (long long)c, sx, (long long)num_groups);
    return NULL;
  }
  if (check_eps(fn, eps) != LT_OK || check_param(fn, "weight", weight, x, &c, 1) != LT_OK ||
      check_param(fn, "bias", bias, x, &c, 1) != LT_OK)
    return NULL;
  int64_t rest = 1;
  for (int d = 2; d < x->ndim; d++) rest *= x->shape[d];
  const int64_t g = num_groups, count = c / g * rest; /* elements per (sample, group) */
  /* F.group_norm's check (its _verify_batch_size of [N * C / G, G, ...]):
   * only when the whole batch holds one value per group, so N = 2 with
   * single-value groups passes (and gives the bias, as PyTorch) */
  if (n * count == 1) {
    lt__err(LT_ESHAPE,
            "%s: Expected more than 1 value per channel when training, got input of shape %s", fn,
            sx);
    return NULL;
  }
  int nd = x->ndim;
  int64_t
      cshape[LT_MAX_DIMS]; /* [N, C, 1, ...] for the statistics, [1, C, 1, ...] for the affine */
  for (int d = 0; d < nd; d++) cshape[d] = d < 2 ? x->shape[d] : 1;
  lt_dtype dt = compute_dtype(x);
  lt_node *xn = lt__ir_as(x, dt);
  int64_t gshape[3] = {n, g, count};
  lt_node *mean, *sqdev;
  moments(lt__node_reshape(ref(xn), gshape, 3), (int64_t)1 << 2, count, &mean, &sqdev);
  lt_node *rstd = rsqrt_eps(lt__node_bin(LT_OP_DIV, sqdev, kc(dt, (double)count)), eps);
  mean = per_channel(mean, n, g, c, cshape, nd);
  rstd = per_channel(rstd, n, g, c, cshape, nd);
  cshape[0] = 1;
  lt_node *w = weight ? param_node(weight, dt, cshape, nd) : NULL;
  lt_node *b = bias ? param_node(bias, dt, cshape, nd) : NULL;
  return lt__wrap(
      x->dev, lt__node_cast(scale_shift(xn, mean, rstd, weight, w, bias, b), (lt_dtype)x->dtype));
}
