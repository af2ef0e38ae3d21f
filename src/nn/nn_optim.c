/* Optimizers as lazy in-place updates: SGD (momentum, nesterov, weight decay)
 * and Adam/AdamW with bias correction, following torch.optim (1.13) update
 * for update. Every new value is computed first and assigned (lt_assign) only
 * when all of them were built, so a failure leaves parameters and state as
 * they were. Per-step values (lr, bias corrections) are device data made with
 * lt_from_data, never IR constants: lt_scalar would turn a value that reaches
 * 0 or +-1 (1 - beta^t rounds to 1 in f32 after a few hundred steps) into a
 * constant and recompile.
 *
 * Each parameter has its own step count, advanced only by the steps that
 * gave it a gradient (PyTorch's per-parameter state["step"]), so its bias
 * corrections are its own: one pair of 0-d data leaves per parameter, made
 * from the count on the host as torch's non-capturable Adam does (1 - beta^t
 * in double). A leaf per parameter, even where counts are equal, keeps the
 * graph the same whatever the counts are.
 *
 * A parameter given its own weight decay (lt_nn_optim_set_param_weight_decay)
 * gets the decay term from then on as a 0-d data leaf of its own, even at 0,
 * so that changing the value never changes the graph; the others keep the
 * config's decay (no term at all when it is 0). */
#include <math.h>
#include <string.h>

#include "nn.h"

lt_nn_optim_config lt_nn_optim_defaults(lt_nn_optim_kind kind) {
  lt_nn_optim_config c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.lr = kind == LT_NN_SGD ? 0.01 : 1e-3;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-8;
  c.weight_decay = kind == LT_NN_ADAMW ? 1e-2 : 0.0;
  return c;
}

int lt__nn_optim_check_config(const char *fn, const lt_nn_optim_config *c) {
  if (c->kind != LT_NN_SGD && c->kind != LT_NN_ADAM && c->kind != LT_NN_ADAMW)
    return lt__err(LT_EINVAL, "%s: unknown optimizer kind %d", fn, (int)c->kind);
  if (!(c->lr >= 0) || !isfinite(c->lr))
    return lt__err(LT_EINVAL, "%s: lr must be finite and >= 0 (got %g)", fn, c->lr);
  if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
    return lt__err(LT_EINVAL, "%s: weight_decay must be finite and >= 0 (got %g)", fn,
                   c->weight_decay);
  if (c->kind == LT_NN_SGD) {
    if (!(c->momentum >= 0) || !isfinite(c->momentum))
      return lt__err(LT_EINVAL, "%s: momentum must be finite and >= 0 (got %g)", fn, c->momentum);
    if (c->nesterov && c->momentum <= 0)
      return lt__err(LT_EINVAL, "%s: nesterov needs momentum > 0", fn);
  } else {
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
      return lt__err(LT_EINVAL, "%s: betas must be in [0, 1) (got %g, %g)", fn, c->beta1, c->beta2);
    if (!(c->eps >= 0) || !isfinite(c->eps))
      return lt__err(LT_EINVAL, "%s: eps must be finite and >= 0 (got %g)", fn, c->eps);
  }
  return LT_OK;
}

/* A zero-filled host tensor shaped like p: device data at the next barrier,
 * so that the first step's graph equals every later one. */
static lt_tensor *zeros_like_data(lt_tensor *p) {
  /* a sharded parameter's state is sharded alike: its local chunk's shape */
  lt_tensor *z = lt__zeros_data(lt_get_device(p), lt_get_dtype(p), p->shape, p->ndim);
  if (z) lt__tensor_copy_sharding(z, p);
  return z;
}

void lt_nn_optim_free(lt_nn_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    if (o->params) lt_release(o->params[i]);
    if (o->s1) lt_release(o->s1[i]);
    if (o->s2) lt_release(o->s2[i]);
  }
  size_t arr = (size_t)o->n * sizeof(lt_tensor *);
  lt__free(o->params, arr);
  lt__free(o->s1, arr);
  lt__free(o->s2, arr);
  lt__free(o->pstep, (size_t)o->n * sizeof(int64_t));
  lt__free(o->pwd, (size_t)o->n * sizeof(double));
  lt__free(o, sizeof *o);
}

/* The state of parameter p: shaped like p, or its shard of shard elements
 * (a flat [shard]) when the state is split over the replicas. */
static lt_tensor *state_zeros(lt_tensor *p, int64_t shard) {
  if (!shard) return zeros_like_data(p);
  return lt__zeros_data(lt_get_device(p), lt_get_dtype(p), &shard, 1);
}

lt_nn_optim *lt_nn_optim_create(const lt_nn_optim_config *cfg, lt_tensor *const *params, int n) {
  return lt__nn_optim_create("lt_nn_optim_create", cfg, params, n, 0);
}

lt_nn_optim *lt__nn_optim_create(const char *fn, const lt_nn_optim_config *cfg,
                                 lt_tensor *const *params, int n, int shard_size) {
  if (!cfg || n <= 0 || !params) {
    lt__err(LT_EINVAL, "%s: needs a config and at least one parameter", fn);
    return NULL;
  }
  if (lt__nn_optim_check_config(fn, cfg) != LT_OK) return NULL;
  for (int i = 0; i < n; i++) {
    if (!params[i]) {
      lt__err(LT_EINVAL, "%s: parameter %d is NULL", fn, i);
      return NULL;
    }
    lt_dtype dt = lt_get_dtype(params[i]);
    if (dt != LT_F32 && dt != LT_F64) {
      lt__err(LT_EDTYPE, "%s: parameter %d has dtype %s (f32 or f64 only)", fn, i,
              lt_dtype_name(dt));
      return NULL;
    }
    lt_device d0 = lt_get_device(params[0]), d = lt_get_device(params[i]);
    if (d.type != d0.type || d.index != d0.index) {
      lt__err(LT_EDEVICE, "%s: parameters are on different devices (0 and %d)", fn, i);
      return NULL;
    }
  }
  lt_nn_optim *o = lt__calloc(sizeof *o);
  if (!o) return NULL;
  o->cfg = *cfg;
  o->n = n;
  o->shard_size = shard_size;
  o->dev = lt_get_device(params[0]);
  size_t arr = (size_t)n * sizeof(lt_tensor *);
  bool need1 = cfg->kind != LT_NN_SGD || cfg->momentum != 0, need2 = cfg->kind != LT_NN_SGD;
  o->params = lt__calloc(arr);
  o->s1 = lt__calloc(arr);
  o->s2 = lt__calloc(arr);
  o->pstep = lt__calloc((size_t)n * sizeof(int64_t));
  o->pwd = lt__calloc((size_t)n * sizeof(double));
  if (!o->params || !o->s1 || !o->s2 || !o->pstep || !o->pwd) {
    lt_nn_optim_free(o);
    return NULL;
  }
  for (int i = 0; i < n; i++) o->pwd[i] = NAN;
  bool ok = true;
  nn_own_begin();
  for (int i = 0; i < n && ok; i++) {
    o->params[i] = lt_retain(params[i]);
    int64_t shard = shard_size ? nn_optim_shard_len(params[i], shard_size) : 0;
    if (need1) ok = ok && (o->s1[i] = nn_keep(state_zeros(params[i], shard)));
    if (need2) ok = ok && (o->s2[i] = nn_keep(state_zeros(params[i], shard)));
  }
  nn_own_end();
  if (!ok) {
    lt_nn_optim_free(o);
    return NULL;
  }
  return o;
}

int lt_nn_optim_set_lr(lt_nn_optim *o, double lr) {
  if (!o) return lt__err(LT_EINVAL, "lt_nn_optim_set_lr: optimizer is NULL");
  if (!(lr >= 0) || !isfinite(lr))
    return lt__err(LT_EINVAL, "lt_nn_optim_set_lr: lr must be finite and >= 0 (got %g)", lr);
  o->cfg.lr = lr;
  return LT_OK;
}

int lt_nn_optim_set_param_weight_decay(lt_nn_optim *o, int i, double weight_decay) {
  const char *fn = "lt_nn_optim_set_param_weight_decay";
  if (!o) return lt__err(LT_EINVAL, "%s: optimizer is NULL", fn);
  if (i < 0 || i >= o->n)
    return lt__err(LT_EINVAL, "%s: parameter index %d out of range [0, %d)", fn, i, o->n);
  if (!(weight_decay >= 0) || !isfinite(weight_decay))
    return lt__err(LT_EINVAL, "%s: weight_decay must be finite and >= 0 (got %g)", fn,
                   weight_decay);
  o->pwd[i] = weight_decay;
  return LT_OK;
}

int64_t lt_nn_optim_steps(const lt_nn_optim *o) { return o ? o->steps : 0; }

int64_t lt_nn_optim_state_bytes(const lt_nn_optim *o) {
  if (!o) return 0;
  int64_t bytes = 0;
  for (int i = 0; i < o->n; i++) {
    lt_tensor *st[2] = {o->s1[i], o->s2[i]};
    for (int k = 0; k < 2; k++)
      if (st[k]) bytes += lt_numel(st[k]) * (int64_t)lt_dtype_size(lt_get_dtype(st[k]));
  }
  return bytes;
}

int64_t lt_nn_optim_param_steps(const lt_nn_optim *o, int i) {
  if (!o || i < 0 || i >= o->n) {
    lt__err(LT_EINVAL, "lt_nn_optim_param_steps: %s (index %d)",
            o ? "index out of range" : "optimizer is NULL", i);
    return -1;
  }
  return o->pstep[i];
}

/* The per-step and constant scalars of one dtype, shared by its parameters. */
typedef struct scalars {
  lt_tensor *lr;    /* SGD: lr */
  lt_tensor *decay; /* AdamW: 1 - lr * wd */
  lt_tensor *wd, *mom, *b1, *c1, *b2, *c2, *eps;
} scalars;

/* Adam's bias corrections of one parameter at its step t. */
typedef struct bias_corr {
  lt_tensor *step_size; /* lr / (1 - beta1^t) */
  lt_tensor *bc2_sqrt;  /* sqrt(1 - beta2^t) */
} bias_corr;

static bias_corr make_bias_corr(const lt_nn_optim *o, lt_dtype dt, int64_t t) {
  const lt_nn_optim_config *c = &o->cfg;
  double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
  bias_corr b = {nn_step_scalar(o->dev, dt, c->lr / bc1), nn_step_scalar(o->dev, dt, sqrt(bc2))};
  return b;
}

static void make_scalars(const lt_nn_optim *o, lt_dtype dt, scalars *s) {
  const lt_nn_optim_config *c = &o->cfg;
  lt_device dev = o->dev;
  memset(s, 0, sizeof *s);
  s->wd = lt_scalar(dev, dt, c->weight_decay);
  if (c->kind == LT_NN_SGD) {
    s->lr = nn_step_scalar(dev, dt, c->lr);
    s->mom = lt_scalar(dev, dt, c->momentum);
    return;
  }
  if (c->kind == LT_NN_ADAMW) s->decay = nn_step_scalar(dev, dt, 1.0 - c->lr * c->weight_decay);
  s->b1 = lt_scalar(dev, dt, c->beta1);
  s->c1 = lt_scalar(dev, dt, 1.0 - c->beta1);
  s->b2 = lt_scalar(dev, dt, c->beta2);
  s->c2 = lt_scalar(dev, dt, 1.0 - c->beta2);
  s->eps = lt_scalar(dev, dt, c->eps);
}

/* New values of parameter i and its state from grad g, into out[0..2]
 * (parameter, s1, s2; NULL where unused). */
static void update_one(const lt_nn_optim *o, int i, lt_tensor *p, lt_tensor *g, const scalars *s,
                       lt_tensor **out) {
  const lt_nn_optim_config *c = &o->cfg;
  lt_dtype dt = lt_get_dtype(p);
  /* the parameter's own decay: g + wd p (SGD, Adam) or p (1 - lr wd) (AdamW), as data */
  bool own = !isnan(o->pwd[i]);
  if (own && c->kind != LT_NN_ADAMW)
    g = lt_add(g, lt_mul(nn_step_scalar(o->dev, dt, o->pwd[i]), p));
  if (own && c->kind == LT_NN_ADAMW)
    p = lt_mul(p, nn_step_scalar(o->dev, dt, 1.0 - c->lr * o->pwd[i]));
  if (c->kind == LT_NN_SGD) {
    if (!own && c->weight_decay != 0) g = lt_add(g, lt_mul(s->wd, p));
    if (c->momentum != 0) {
      lt_tensor *buf = lt_add(lt_mul(s->mom, o->s1[i]), g); /* dampening 0 */
      out[1] = buf;
      g = c->nesterov ? lt_add(g, lt_mul(s->mom, buf)) : buf;
    }
    out[0] = lt_sub(p, lt_mul(s->lr, g));
    return;
  }
  bias_corr bc = make_bias_corr(o, dt, o->pstep[i] + 1);
  if (!own && c->kind == LT_NN_ADAM && c->weight_decay != 0) g = lt_add(g, lt_mul(s->wd, p));
  if (!own && c->kind == LT_NN_ADAMW && c->weight_decay != 0) p = lt_mul(p, s->decay);
  lt_tensor *m = lt_add(lt_mul(o->s1[i], s->b1), lt_mul(s->c1, g));
  lt_tensor *v = lt_add(lt_mul(o->s2[i], s->b2), lt_mul(lt_mul(s->c2, g), g));
  lt_tensor *denom = lt_add(lt_div(lt_sqrt(v), bc.bc2_sqrt), s->eps);
  out[0] = lt_sub(p, lt_mul(bc.step_size, lt_div(m, denom)));
  out[1] = m;
  out[2] = v;
}

int lt_nn_optim_step_grads(lt_nn_optim *o, lt_tensor *const *grads) {
  const char *fn = "lt_nn_optim_step";
  if (!o || !grads) return lt__err(LT_EINVAL, "%s: optimizer or grads is NULL", fn);
  for (int i = 0; i < o->n; i++) {
    lt_tensor *g = grads[i], *p = o->params[i];
    if (!g) continue;
    bool same = lt_ndim(g) == lt_ndim(p);
    for (int d = 0; same && d < lt_ndim(p); d++) same = lt_shape(g)[d] == lt_shape(p)[d];
    if (!same) {
      char b1[128], b2[128];
      return lt__err(LT_ESHAPE, "%s: grad %d has shape %s, its parameter %s", fn, i,
                     lt__shape_str(lt_shape(g), lt_ndim(g), b1, sizeof b1),
                     lt__shape_str(lt_shape(p), lt_ndim(p), b2, sizeof b2));
    }
    if (lt_get_dtype(g) != LT_F32 && lt_get_dtype(g) != LT_F64)
      return lt__err(LT_EDTYPE, "%s: grad %d has dtype %s", fn, i, lt_dtype_name(lt_get_dtype(g)));
  }
  if (o->shard_size)
    return lt__err(LT_EINVAL,
                   "%s: the optimizer's state is sharded over the replicas (lt_dp_optim_create); "
                   "step it with lt_dp_optim_step",
                   fn);
  size_t bytes = (size_t)o->n * 3 * sizeof(lt_tensor *);
  lt_tensor **out = lt__calloc(bytes);
  if (!out) return LT_ENOMEM;
  lt_clear_error();
  nn_own_begin();
  int rc = lt__nn_optim_build(o, o->params, grads, out);
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    if (!grads[i]) continue;
    lt_tensor *dst[3] = {o->params[i], o->s1[i], o->s2[i]};
    for (int j = 0; j < 3 && rc == LT_OK; j++)
      if (dst[j] && out[3 * i + j]) rc = lt_assign(dst[j], out[3 * i + j]);
  }
  nn_own_end();
  lt__free(out, bytes);
  if (rc == LT_OK) lt__nn_optim_count_step(o, grads);
  return rc;
}

int lt__nn_optim_build(const lt_nn_optim *o, lt_tensor *const *p, lt_tensor *const *g,
                       lt_tensor **out) {
  int rc = LT_OK;
  scalars sc[2]; /* f32, f64: made on first use */
  bool have[2] = {false, false};
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    if (!g[i]) continue;
    int k = lt_get_dtype(o->params[i]) == LT_F64;
    if (!have[k]) {
      make_scalars(o, k ? LT_F64 : LT_F32, &sc[k]);
      have[k] = true;
    }
    update_one(o, i, p[i], g[i], &sc[k], out + 3 * i);
    if (!out[3 * i] || (o->s1[i] && !out[3 * i + 1]) || (o->s2[i] && !out[3 * i + 2]))
      rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
  }
  return rc;
}

void lt__nn_optim_count_step(lt_nn_optim *o, lt_tensor *const *grads) {
  o->steps++;
  for (int i = 0; i < o->n; i++) o->pstep[i] += grads[i] != NULL;
}

int lt_nn_optim_step(lt_nn_optim *o) {
  if (!o) return lt__err(LT_EINVAL, "lt_nn_optim_step: optimizer is NULL");
  size_t bytes = (size_t)o->n * sizeof(lt_tensor *);
  lt_tensor **g = lt__calloc(bytes);
  if (!g) return LT_ENOMEM;
  for (int i = 0; i < o->n; i++) g[i] = lt_grad(o->params[i]);
  int rc = lt_nn_optim_step_grads(o, g);
  if (rc == LT_OK)
    for (int i = 0; i < o->n; i++)
      if (g[i]) lt_zero_grad(o->params[i]);
  lt__free(g, bytes);
  return rc;
}

/* ---- gradient clipping ------------------------------------------------------------------ */

/* The norm of g (flattened) of order p: sqrt(sum g^2), max |g| or
 * (sum |g|^p)^(1/p), as torch.norm. */
static lt_tensor *norm_p(lt_tensor *g, double p) {
  lt_device dev = lt_get_device(g);
  lt_dtype dt = lt_get_dtype(g);
  if (isinf(p)) return lt_max(lt_abs(g), NULL, 0, false);
  if (p == 2) return lt_sqrt(lt_sum(lt_mul(g, g), NULL, 0, false));
  if (p == 1) return lt_sum(lt_abs(g), NULL, 0, false);
  lt_tensor *s = lt_sum(lt_pow(lt_abs(g), lt_scalar(dev, dt, p)), NULL, 0, false);
  return lt_pow(s, lt_scalar(dev, dt, 1.0 / p));
}

static int check_clip_args(const char *fn, lt_tensor *const *params, int n, double max_norm,
                           double norm_type) {
  if (n < 0 || (n > 0 && !params)) return lt__err(LT_EINVAL, "%s: bad parameter list", fn);
  if (!(max_norm >= 0))
    return lt__err(LT_EINVAL, "%s: max_norm must be >= 0 (got %g)", fn, max_norm);
  if (!(norm_type > 0) || (isinf(norm_type) && norm_type < 0))
    return lt__err(LT_EINVAL, "%s: norm_type must be > 0 or inf (got %g)", fn, norm_type);
  for (int i = 0; i < n; i++) {
    if (!params[i]) return lt__err(LT_EINVAL, "%s: parameter %d is NULL", fn, i);
    lt_device d0 = lt_get_device(params[0]), d = lt_get_device(params[i]);
    if (d.type != d0.type || d.index != d0.index)
      return lt__err(LT_EDEVICE, "%s: parameters are on different devices (0 and %d)", fn, i);
    lt_tensor *g = lt_grad(params[i]);
    if (g && lt_numel(g) == 0 && isinf(norm_type))
      return lt__err(LT_EINVAL, "%s: the inf norm of the empty grad of parameter %d", fn, i);
  }
  return LT_OK;
}

int lt_nn_clip_grad_norm(lt_tensor *const *params, int n, double max_norm, double norm_type,
                         lt_tensor **total_norm) {
  const char *fn = "lt_nn_clip_grad_norm";
  if (total_norm) *total_norm = NULL;
  int rc = check_clip_args(fn, params, n, max_norm, norm_type);
  if (rc != LT_OK) return rc;
  lt_device dev = n > 0 ? lt_get_device(params[0]) : lt_cpu(0);
  lt_dtype tdt = LT_F32; /* the norms' dtype: f64 when any grad is f64 (torch.stack promotes) */
  int ng = 0;
  for (int i = 0; i < n; i++) {
    lt_tensor *g = lt_grad(params[i]);
    ng += g != NULL;
    if (g && lt_get_dtype(g) == LT_F64) tdt = LT_F64;
  }
  size_t bytes = (size_t)(ng ? ng : 1) * sizeof(lt_tensor *);
  lt_tensor **norms = lt__calloc(bytes), **scaled = lt__calloc(bytes);
  lt_tensor *kept = NULL;
  if (!norms || !scaled) rc = LT_ENOMEM;
  lt_clear_error();
  nn_own_begin();
  lt_tensor *total = NULL;
  if (rc == LT_OK && ng == 0) total = lt_scalar(dev, LT_F32, 0); /* torch.tensor(0.) */
  if (rc == LT_OK && ng > 0) {
    for (int i = 0, k = 0; i < n; i++)
      if (lt_grad(params[i])) norms[k++] = lt_cast(norm_p(lt_grad(params[i]), norm_type), tdt);
    lt_tensor *stacked = lt_stack(norms, ng, 0);
    /* torch: the max of the per-grad maxima, or the p-norm of the p-norms */
    total = isinf(norm_type) ? lt_max(stacked, NULL, 0, false) : norm_p(stacked, norm_type);
    lt_tensor *coef =
        lt_div(lt_scalar(dev, tdt, max_norm), lt_add(total, lt_scalar(dev, tdt, 1e-6)));
    coef = lt_minimum(coef, lt_scalar(dev, tdt, 1.0));
    for (int i = 0, k = 0; i < n; i++) {
      lt_tensor *g = lt_grad(params[i]);
      if (g) scaled[k++] = lt_mul(g, lt_cast(coef, lt_get_dtype(g)));
    }
  }
  for (int k = 0; rc == LT_OK && k < ng; k++)
    if (!scaled[k]) rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
  if (rc == LT_OK && !total) rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
  /* every new value is built: only now do the grads change */
  for (int i = 0, k = 0; rc == LT_OK && i < n; i++)
    if (lt_grad(params[i])) rc = lt_assign(lt_grad(params[i]), scaled[k++]);
  if (rc == LT_OK && total_norm) kept = nn_keep(total);
  nn_own_end();
  lt__free(norms, bytes);
  lt__free(scaled, bytes);
  if (kept) {
    /* a new tensor over the same node, in the caller's scope */
    *total_norm = lt_reshape(kept, NULL, 0);
    lt_release(kept);
    if (!*total_norm) rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
  }
  return rc;
}
