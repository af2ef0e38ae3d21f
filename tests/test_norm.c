/* batch_norm, layer_norm and group_norm (composite ops): values against plain
 * C oracles (f32 and f64, both backends), the running statistics after a few
 * training steps, eval mode, gradients by finite differences (f64), that the
 * running-statistics update carries no gradient, and bad inputs. */
#include "test_grad_util.h"
#include "test_backends.h"

/* n values with a non-zero mean and uneven spread per position. */
static void fill(double *v, int64_t n, double seed) {
  for (int64_t i = 0; i < n; i++) v[i] = 1.5 + 2.0 * sin(0.9 * (double)i + seed) + 0.05 * (double)i;
}

static lt_tensor *make(lt_dtype dt, const int64_t *shape, int nd, const double *v) {
  lt_tensor *t = tu_f64(shape, nd, v);
  return dt == LT_F64 ? t : lt_cast(t, dt);
}

/* ---- oracles (x seen as [N, C, S]) --------------------------------------------------- */

/* Batch norm: statistics per channel over N and S (biased variance for the
 * output; *mean and *uvar, when given, get the mean and unbiased variance). */
static void bn_oracle(const double *x, int64_t n, int64_t c, int64_t s, const double *w,
                      const double *b, double eps, double *y, double *mean_out, double *uvar_out) {
  for (int64_t ch = 0; ch < c; ch++) {
    double sum = 0, sq = 0, cnt = (double)(n * s);
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < s; k++) sum += x[(i * c + ch) * s + k];
    double mean = sum / cnt;
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < s; k++) {
        double d = x[(i * c + ch) * s + k] - mean;
        sq += d * d;
      }
    double rstd = 1 / sqrt(sq / cnt + eps);
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < s; k++) {
        int64_t j = (i * c + ch) * s + k;
        y[j] = (x[j] - mean) * rstd * (w ? w[ch] : 1) + (b ? b[ch] : 0);
      }
    if (mean_out) mean_out[ch] = mean;
    if (uvar_out) uvar_out[ch] = sq / (cnt - 1);
  }
}

/* Eval batch norm with given statistics. */
static void bn_eval_oracle(const double *x, int64_t n, int64_t c, int64_t s, const double *rm,
                           const double *rv, const double *w, const double *b, double eps,
                           double *y) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t k = 0; k < s; k++) {
        int64_t j = (i * c + ch) * s + k;
        y[j] = (x[j] - rm[ch]) / sqrt(rv[ch] + eps) * (w ? w[ch] : 1) + (b ? b[ch] : 0);
      }
}

/* Layer norm: rows of m elements, affine over the m. */
static void ln_oracle(const double *x, int64_t rows, int64_t m, const double *w, const double *b,
                      double eps, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * m;
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < m; k++) sum += xr[k];
    double mean = sum / (double)m;
    for (int64_t k = 0; k < m; k++) sq += (xr[k] - mean) * (xr[k] - mean);
    double rstd = 1 / sqrt(sq / (double)m + eps);
    for (int64_t k = 0; k < m; k++)
      y[r * m + k] = (xr[k] - mean) * rstd * (w ? w[k] : 1) + (b ? b[k] : 0);
  }
}

/* Group norm: statistics per (sample, group of c / g channels), affine per channel. */
static void gn_oracle(const double *x, int64_t n, int64_t c, int64_t s, int64_t g, const double *w,
                      const double *b, double eps, double *y) {
  int64_t cg = c / g, m = cg * s;
  for (int64_t i = 0; i < n; i++)
    for (int64_t gr = 0; gr < g; gr++) {
      const double *xg = x + (i * c + gr * cg) * s;
      double sum = 0, sq = 0;
      for (int64_t k = 0; k < m; k++) sum += xg[k];
      double mean = sum / (double)m;
      for (int64_t k = 0; k < m; k++) sq += (xg[k] - mean) * (xg[k] - mean);
      double rstd = 1 / sqrt(sq / (double)m + eps);
      for (int64_t k = 0; k < m; k++) {
        int64_t ch = gr * cg + k / s;
        y[(i * c + gr * cg) * s + k] = (xg[k] - mean) * rstd * (w ? w[ch] : 1) + (b ? b[ch] : 0);
      }
    }
}

/* ---- values ---------------------------------------------------------------------------- */

typedef struct shape_case {
  int64_t shape[4];
  int nd;
} shape_case;

static int64_t numel_of(const shape_case *c) {
  int64_t n = 1;
  for (int d = 0; d < c->nd; d++) n *= c->shape[d];
  return n;
}

/* inner size S of [N, C, S...] */
static int64_t inner_of(const shape_case *c) {
  int64_t s = 1;
  for (int d = 2; d < c->nd; d++) s *= c->shape[d];
  return s;
}

static void test_batch_norm_values(void **state) {
  (void)state;
  const shape_case shapes[] = {{{5, 3}, 2}, {{3, 3, 2, 5}, 4}, {{2, 1, 7}, 3}};
  const lt_dtype dts[] = {LT_F32, LT_F64};
  double x[128], y[128], w[8], b[8], rm[8], rv[8];
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
      const shape_case *sc = &shapes[si];
      int64_t n = sc->shape[0], c = sc->shape[1], s = inner_of(sc), total = numel_of(sc);
      fill(x, total, 0.3 + (double)si);
      fill(w, c, 2.0);
      fill(b, c, 5.0);
      for (int64_t k = 0; k < c; k++) {
        rm[k] = 0.2 * (double)k - 0.1;
        rv[k] = 0.5 + 0.3 * (double)k;
      }
      for (int di = 0; di < 2; di++) {
        lt_dtype dt = dts[di];
        double tol = dt == LT_F32 ? 2e-5 : 1e-12;
        for (int affine = 0; affine < 2; affine++) {
          lt_scope_begin();
          lt_tensor *xt = make(dt, sc->shape, sc->nd, x);
          lt_tensor *wt = affine ? make(dt, &c, 1, w) : NULL;
          lt_tensor *bt = affine ? make(dt, &c, 1, b) : NULL;
          /* training without running statistics */
          bn_oracle(x, n, c, s, affine ? w : NULL, affine ? b : NULL, 1e-5, y, NULL, NULL);
          tu_expect(lt_batch_norm(xt, NULL, NULL, wt, bt, true, 0.1, 1e-5), dt, sc->shape, sc->nd,
                    y, tol);
          /* eval: the running statistics */
          bn_eval_oracle(x, n, c, s, rm, rv, affine ? w : NULL, affine ? b : NULL, 1e-3, y);
          lt_tensor *rmt = make(dt, &c, 1, rm), *rvt = make(dt, &c, 1, rv);
          tu_expect(lt_batch_norm(xt, rmt, rvt, wt, bt, false, 0.1, 1e-3), dt, sc->shape, sc->nd, y,
                    tol);
          /* eval leaves them alone */
          tu_expect(rmt, dt, &c, 1, rm, 1e-7);
          tu_expect(rvt, dt, &c, 1, rv, 1e-7);
          lt_scope_end();
        }
      }
    }
    lt__backend_force(NULL);
  }
}

/* Three training steps with momentum 0.1 from zeros / ones, then eval. */
static void test_batch_norm_running_stats(void **state) {
  (void)state;
  const int64_t shape[4] = {3, 2, 2, 3};
  const int64_t n = 3, c = 2, s = 6, total = 36;
  const lt_dtype dts[] = {LT_F32, LT_F64};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (int di = 0; di < 2; di++) {
      lt_dtype dt = dts[di];
      double tol = dt == LT_F32 ? 2e-5 : 1e-12;
      double rm[2] = {0, 0}, rv[2] = {1, 1}, x[36], y[36], mean[2], uvar[2];
      lt_tensor *rmt = lt_zeros(CPU0, dt, &c, 1), *rvt = lt_ones(CPU0, dt, &c, 1);
      for (int step = 0; step < 3; step++) {
        lt_scope_begin();
        fill(x, total, 1.1 * step);
        for (int64_t i = 0; i < total; i++) x[i] *= 1 + step; /* the statistics change */
        bn_oracle(x, n, c, s, NULL, NULL, 1e-5, y, mean, uvar);
        for (int k = 0; k < 2; k++) {
          rm[k] = 0.9 * rm[k] + 0.1 * mean[k];
          rv[k] = 0.9 * rv[k] + 0.1 * uvar[k];
        }
        lt_tensor *out =
            lt_batch_norm(make(dt, shape, 4, x), rmt, rvt, NULL, NULL, true, 0.1, 1e-5);
        tu_expect(out, dt, shape, 4, y, tol);
        if (step == 1) assert_int_equal(lt_mark_step(CPU0), LT_OK);
        lt_scope_end();
      }
      tu_expect(rmt, dt, &c, 1, rm, tol);
      tu_expect(rvt, dt, &c, 1, rv, tol);
      /* eval with what they learnt */
      lt_scope_begin();
      bn_eval_oracle(x, n, c, s, rm, rv, NULL, NULL, 1e-5, y);
      tu_expect(lt_batch_norm(make(dt, shape, 4, x), rmt, rvt, NULL, NULL, false, 0.1, 1e-5), dt,
                shape, 4, y, tol);
      lt_scope_end(); /* rmt, rvt: the test's own scope (tu_setup) frees them */
    }
    lt__backend_force(NULL);
  }
}

static void test_layer_norm_values(void **state) {
  (void)state;
  const int64_t shape[3] = {2, 3, 5};
  const lt_dtype dts[] = {LT_F32, LT_F64};
  double x[30], y[30], w[30], b[30];
  fill(x, 30, 0.7);
  fill(w, 30, 1.9);
  fill(b, 30, 3.3);
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (int di = 0; di < 2; di++) {
      lt_dtype dt = dts[di];
      double tol = dt == LT_F32 ? 2e-5 : 1e-12;
      for (int nnorm = 1; nnorm <= 3; nnorm++) {
        const int64_t *ns = shape + 3 - nnorm;
        int64_t m = 1;
        for (int k = 0; k < nnorm; k++) m *= ns[k];
        for (int affine = 0; affine < 2; affine++) {
          lt_scope_begin();
          ln_oracle(x, 30 / m, m, affine ? w : NULL, affine ? b : NULL, 1e-5, y);
          lt_tensor *wt = affine ? make(dt, ns, nnorm, w) : NULL;
          lt_tensor *bt = affine ? make(dt, ns, nnorm, b) : NULL;
          tu_expect(lt_layer_norm(make(dt, shape, 3, x), ns, nnorm, wt, bt, 1e-5), dt, shape, 3, y,
                    tol);
          lt_scope_end();
        }
      }
      /* weight alone, bias alone */
      lt_scope_begin();
      ln_oracle(x, 6, 5, w, NULL, 1e-5, y);
      tu_expect(
          lt_layer_norm(make(dt, shape, 3, x), shape + 2, 1, make(dt, shape + 2, 1, w), NULL, 1e-5),
          dt, shape, 3, y, tol);
      ln_oracle(x, 6, 5, NULL, b, 1e-5, y);
      tu_expect(
          lt_layer_norm(make(dt, shape, 3, x), shape + 2, 1, NULL, make(dt, shape + 2, 1, b), 1e-5),
          dt, shape, 3, y, tol);
      lt_scope_end();
    }
    lt__backend_force(NULL);
  }
}

static void test_group_norm_values(void **state) {
  (void)state;
  const shape_case shapes[] = {{{2, 6, 5}, 3}, {{3, 4, 2, 3}, 4}, {{2, 6}, 2}};
  const int64_t groups[][3] = {{3, 1, 6}, {2, 4, 1}, {3, 2, 6}};
  const lt_dtype dts[] = {LT_F32, LT_F64};
  double x[128], y[128], w[8], b[8];
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
      const shape_case *sc = &shapes[si];
      int64_t n = sc->shape[0], c = sc->shape[1], s = inner_of(sc);
      fill(x, numel_of(sc), 0.1 + (double)si);
      fill(w, c, 4.0);
      fill(b, c, 6.0);
      for (int di = 0; di < 2; di++) {
        lt_dtype dt = dts[di];
        double tol = dt == LT_F32 ? 2e-5 : 1e-12;
        for (int gi = 0; gi < 3; gi++)
          for (int affine = 0; affine < 2; affine++) {
            int64_t g = groups[si][gi];
            /* One element per group: the variance is 0 and rstd 1/sqrt(eps);
             * x * scale + shift (torch's CPU form) then cancels in f32. */
            if (c / g * s == 1 && dt == LT_F32) continue;
            lt_scope_begin();
            gn_oracle(x, n, c, s, g, affine ? w : NULL, affine ? b : NULL, 1e-5, y);
            lt_tensor *wt = affine ? make(dt, &c, 1, w) : NULL;
            lt_tensor *bt = affine ? make(dt, &c, 1, b) : NULL;
            tu_expect(lt_group_norm(make(dt, sc->shape, sc->nd, x), g, wt, bt, 1e-5), dt, sc->shape,
                      sc->nd, y, tol);
            lt_scope_end();
          }
      }
    }
    lt__backend_force(NULL);
  }
}

/* ---- gradients ------------------------------------------------------------------------- */

typedef struct norm_case {
  int kind; /* 0 batch (training), 1 batch (eval), 2 batch (training, running stats), 3 layer, 4
               group */
  const int64_t *nshape;
  int nnorm;
  int64_t groups;
} norm_case;

static lt_tensor *apply_norm(lt_tensor *const *in, void *ud) {
  const norm_case *k = ud;
  switch (k->kind) {
  case 0:
    return lt_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
  case 1:
  case 2: {
    int64_t c = lt_shape(in[0])[1];
    double rm[8], rv[8];
    for (int64_t i = 0; i < c; i++) {
      rm[i] = 0.3 - 0.2 * (double)i;
      rv[i] = 0.7 + 0.4 * (double)i;
    }
    lt_tensor *rmt = tu_f64(&c, 1, rm), *rvt = tu_f64(&c, 1, rv);
    return lt_batch_norm(in[0], rmt, rvt, in[1], in[2], k->kind == 2, 0.1, 1e-3);
  }
  case 3:
    return lt_layer_norm(in[0], k->nshape, k->nnorm, in[1], in[2], 1e-5);
  default:
    return lt_group_norm(in[0], k->groups, in[1], in[2], 1e-5);
  }
}

static void test_norm_grads(void **state) {
  (void)state;
  double *x = tg_vals(36, 0.2), *w = tg_vals(6, 1.3), *b = tg_vals(6, 2.9);
  const int64_t c3[1] = {3};
  /* batch norm: [4, 3] and [2, 3, 2, 3] */
  for (int kind = 0; kind < 3; kind++) {
    norm_case k = {kind, NULL, 0, 0};
    tg_input in2[3] = {
        {SHAPE(4, 3), 2, x, true, LT_F64}, {c3, 1, w, true, LT_F64}, {c3, 1, b, true, LT_F64}};
    tg_check("batch_norm 2-d", apply_norm, &k, in2, 3, 1e-5);
    tg_input in4[3] = {{SHAPE(2, 3, 2, 3), 4, x, true, LT_F64},
                       {c3, 1, w, true, LT_F64},
                       {c3, 1, b, true, LT_F64}};
    tg_check("batch_norm 4-d", apply_norm, &k, in4, 3, 1e-5);
  }
  /* layer norm over the last 1 and 2 axes of [2, 3, 4] */
  const int64_t ls[3] = {2, 3, 4};
  for (int nnorm = 1; nnorm <= 2; nnorm++) {
    norm_case k = {3, ls + 3 - nnorm, nnorm, 0};
    tg_input in[3] = {{ls, 3, x, true, LT_F64},
                      {ls + 3 - nnorm, nnorm, w, true, LT_F64},
                      {ls + 3 - nnorm, nnorm, b, true, LT_F64}};
    tg_check("layer_norm", apply_norm, &k, in, 3, 1e-5);
  }
  /* group norm: [2, 6, 3] in 3 groups, [3, 6] in 2 */
  const int64_t c6[1] = {6};
  norm_case g3 = {4, NULL, 0, 3}, g2 = {4, NULL, 0, 2};
  tg_input gi[3] = {
      {SHAPE(2, 6, 3), 3, x, true, LT_F64}, {c6, 1, w, true, LT_F64}, {c6, 1, b, true, LT_F64}};
  tg_check("group_norm 3-d", apply_norm, &g3, gi, 3, 1e-5);
  tg_input gi2[3] = {
      {SHAPE(3, 6), 2, x, true, LT_F64}, {c6, 1, w, true, LT_F64}, {c6, 1, b, true, LT_F64}};
  tg_check("group_norm 2-d", apply_norm, &g2, gi2, 3, 1e-5);
}

/* Backward through a training batch_norm that updates running statistics:
 * the gradients are those without the update, and the statistics get none
 * (even when they require grad) while taking their new values. */
static void test_batch_norm_update_has_no_grad(void **state) {
  (void)state;
  double x[12], y[12], mean[3], uvar[3];
  fill(x, 12, 0.4);
  bn_oracle(x, 4, 3, 1, NULL, NULL, 1e-5, y, mean, uvar);
  const int64_t c = 3;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    double g_with[12], g_without[12];
    for (int with = 0; with < 2; with++) {
      lt_scope_begin();
      lt_tensor *xt = tu_f64(SHAPE(4, 3), 2, x);
      lt_tensor *rm = lt_zeros(CPU0, LT_F64, &c, 1), *rv = lt_ones(CPU0, LT_F64, &c, 1);
      lt_tensor *w = lt_ones(CPU0, LT_F64, &c, 1);
      assert_int_equal(lt_set_requires_grad(xt, true), LT_OK);
      assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
      lt_tensor *out = lt_batch_norm(xt, with ? rm : NULL, with ? rv : NULL, w, NULL, true, 0.1, 0);
      assert_non_null(out);
      /* a loss that reads the updated statistics too: they are constants */
      lt_tensor *loss = lt_sum(lt_mul(out, lt_sin(out)), NULL, 0, false);
      if (with) loss = lt_add(loss, lt_sum(lt_add(lt_mul(rm, rm), rv), NULL, 0, false));
      assert_int_equal(lt_backward(loss), LT_OK);
      tu_read(lt_grad(xt), with ? g_with : g_without, 12);
      assert_null(lt_grad(rm));
      assert_null(lt_grad(rv));
      if (with) {
        double want_m[3], want_v[3];
        for (int k = 0; k < 3; k++) {
          want_m[k] = 0.1 * mean[k];
          want_v[k] = 0.9 + 0.1 * uvar[k];
        }
        tu_expect(rm, LT_F64, &c, 1, want_m, 1e-12);
        tu_expect(rv, LT_F64, &c, 1, want_v, 1e-12);
      }
      lt_scope_end();
    }
    for (int i = 0; i < 12; i++) assert_true(tu_near(g_with[i], g_without[i], 1e-12));
    lt__backend_force(NULL);
  }
}

/* The no-grad scope: the output is a constant, the statistics still update. */
static void test_batch_norm_no_grad_scope(void **state) {
  (void)state;
  double x[8];
  fill(x, 8, 1.0);
  const int64_t c = 2;
  lt_scope_begin();
  lt_tensor *xt = tu_f64(SHAPE(4, 2), 2, x);
  lt_tensor *rm = lt_zeros(CPU0, LT_F64, &c, 1), *rv = lt_ones(CPU0, LT_F64, &c, 1);
  assert_int_equal(lt_set_requires_grad(xt, true), LT_OK);
  lt_no_grad_begin();
  lt_tensor *out = lt_batch_norm(xt, rm, rv, NULL, NULL, true, 0.5, 1e-5);
  lt_no_grad_end();
  assert_non_null(out);
  assert_int_equal(lt_backward(lt_sum(lt_add(out, lt_mul(xt, xt)), NULL, 0, false)), LT_OK);
  double g[8];
  tu_read(lt_grad(xt), g, 8);
  for (int i = 0; i < 8; i++) assert_true(tu_near(g[i], 2 * x[i], 1e-12));
  double m[2];
  tu_read(rm, m, 2);
  assert_true(m[0] != 0 && m[1] != 0);
  lt_scope_end();
}

/* An empty batch leaves the running statistics alone (torch); eager mode
 * gives the lazy values and updates. */
static void test_batch_norm_edges(void **state) {
  (void)state;
  const int64_t c = 3;
  double x[12], y[12], mean[3], uvar[3];
  fill(x, 12, 2.2);
  bn_oracle(x, 4, 3, 1, NULL, NULL, 1e-5, y, mean, uvar);
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *rm = lt_zeros(CPU0, LT_F64, &c, 1), *rv = lt_ones(CPU0, LT_F64, &c, 1);
    lt_tensor *e =
        lt_batch_norm(lt_zeros(CPU0, LT_F64, SHAPE(0, 3), 2), rm, rv, NULL, NULL, true, 0.1, 1e-5);
    tu_expect(e, LT_F64, SHAPE(0, 3), 2, NULL, 0);
    tu_expect(rm, LT_F64, &c, 1, (double[]){0, 0, 0}, 0);
    tu_expect(rv, LT_F64, &c, 1, (double[]){1, 1, 1}, 0);
    lt_set_eager(true);
    tu_expect(lt_batch_norm(tu_f64(SHAPE(4, 3), 2, x), rm, rv, NULL, NULL, true, 0.25, 1e-5),
              LT_F64, SHAPE(4, 3), 2, y, 1e-12);
    lt_set_eager(false);
    double want_m[3], want_v[3];
    for (int k = 0; k < 3; k++) {
      want_m[k] = 0.25 * mean[k];
      want_v[k] = 0.75 + 0.25 * uvar[k];
    }
    tu_expect(rm, LT_F64, &c, 1, want_m, 1e-12);
    tu_expect(rv, LT_F64, &c, 1, want_v, 1e-12);
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* ---- bad inputs ------------------------------------------------------------------------- */

static void test_bad_inputs(void **state) {
  (void)state;
  lt_scope_begin();
  const int64_t c3 = 3, c4 = 4, n5[1] = {5}, n45[2] = {4, 5}, n34[2] = {4, 4};
  lt_tensor *x = lt_ones(CPU0, LT_F32, SHAPE(2, 3, 4), 3);
  lt_tensor *v3 = lt_ones(CPU0, LT_F32, &c3, 1), *v4 = lt_ones(CPU0, LT_F32, &c4, 1);
  lt_tensor *d3 = lt_ones(CPU0, LT_F64, &c3, 1);
  lt_tensor *xi = lt_ones(CPU0, LT_I32, SHAPE(2, 3, 4), 3);
  lt_tensor *r0 = lt_zeros(CPU0, LT_F32, &c3, 1), *r1 = lt_ones(CPU0, LT_F32, &c3, 1);

  /* batch_norm */
  TU_EXPECT_ERROR(lt_batch_norm(x, NULL, NULL, v4, NULL, true, 0.1, 1e-5), LT_ESHAPE, "weight");
  TU_EXPECT_ERROR(lt_batch_norm(x, NULL, NULL, NULL, v4, true, 0.1, 1e-5), LT_ESHAPE, "bias");
  TU_EXPECT_ERROR(lt_batch_norm(x, v4, v4, NULL, NULL, true, 0.1, 1e-5), LT_ESHAPE, "running_mean");
  TU_EXPECT_ERROR(lt_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5), LT_EINVAL,
                  "required when not training");
  TU_EXPECT_ERROR(lt_batch_norm(x, r0, NULL, NULL, NULL, true, 0.1, 1e-5), LT_EINVAL,
                  "both or neither");
  TU_EXPECT_ERROR(
      lt_batch_norm(lt_ones(CPU0, LT_F32, SHAPE(1, 3), 2), r0, r1, NULL, NULL, true, 0.1, 1e-5),
      LT_ESHAPE, "Expected more than 1 value per channel when training");
  TU_EXPECT_ERROR(lt_batch_norm(lt_ones(CPU0, LT_F32, SHAPE(1, 3, 1), 3), NULL, NULL, NULL, NULL,
                                true, 0.1, 1e-5),
                  LT_ESHAPE, "more than 1 value per channel");
  TU_EXPECT_ERROR(lt_batch_norm(xi, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), LT_EDTYPE,
                  "floating");
  TU_EXPECT_ERROR(lt_batch_norm(x, NULL, NULL, d3, NULL, true, 0.1, 1e-5), LT_EDTYPE, "f64");
  TU_EXPECT_ERROR(lt_batch_norm(v3, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), LT_ESHAPE,
                  "at least 2 dims");
  TU_EXPECT_ERROR(lt_batch_norm(x, NULL, NULL, NULL, NULL, true, NAN, 1e-5), LT_EINVAL, "momentum");
  TU_EXPECT_ERROR(lt_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, -1), LT_EINVAL, "eps");
  TU_EXPECT_ERROR(lt_batch_norm(NULL, NULL, NULL, NULL, NULL, true, 0.1, 1e-5), LT_EINVAL, "");
  /* a one-sample batch is fine in eval */
  assert_non_null(
      lt_batch_norm(lt_ones(CPU0, LT_F32, SHAPE(1, 3), 2), r0, r1, NULL, NULL, false, 0.1, 1e-5));
  /* failures leave the running statistics untouched */
  TU_EXPECT_ERROR(lt_batch_norm(x, r0, r1, v4, NULL, true, 0.1, 1e-5), LT_ESHAPE, "weight");
  tu_expect(r0, LT_F32, &c3, 1, (double[]){0, 0, 0}, 0);
  tu_expect(r1, LT_F32, &c3, 1, (double[]){1, 1, 1}, 0);

  /* layer_norm */
  TU_EXPECT_ERROR(lt_layer_norm(x, n34, 2, NULL, NULL, 1e-5), LT_ESHAPE, "normalized_shape");
  TU_EXPECT_ERROR(lt_layer_norm(x, n5, 1, NULL, NULL, 1e-5), LT_ESHAPE, "normalized_shape");
  TU_EXPECT_ERROR(lt_layer_norm(x, SHAPE(1, 2, 3, 4), 4, NULL, NULL, 1e-5), LT_ESHAPE,
                  "normalized_shape");
  TU_EXPECT_ERROR(lt_layer_norm(x, n45, 0, NULL, NULL, 1e-5), LT_EINVAL, "normalized_shape");
  TU_EXPECT_ERROR(lt_layer_norm(x, SHAPE(4), 1, v3, NULL, 1e-5), LT_ESHAPE, "weight");
  TU_EXPECT_ERROR(lt_layer_norm(xi, SHAPE(4), 1, NULL, NULL, 1e-5), LT_EDTYPE, "floating");
  TU_EXPECT_ERROR(lt_layer_norm(x, SHAPE(4), 1, NULL, lt_ones(CPU0, LT_F64, SHAPE(4), 1), 1e-5),
                  LT_EDTYPE, "bias");

  /* group_norm */
  TU_EXPECT_ERROR(lt_group_norm(x, 2, NULL, NULL, 1e-5), LT_ESHAPE, "divisible by num_groups");
  TU_EXPECT_ERROR(lt_group_norm(x, 0, NULL, NULL, 1e-5), LT_EINVAL, "num_groups");
  TU_EXPECT_ERROR(lt_group_norm(x, 3, v4, NULL, 1e-5), LT_ESHAPE, "weight");
  TU_EXPECT_ERROR(lt_group_norm(xi, 3, NULL, NULL, 1e-5), LT_EDTYPE, "floating");
  TU_EXPECT_ERROR(lt_group_norm(v3, 1, NULL, NULL, 1e-5), LT_ESHAPE, "at least 2 dims");
  TU_EXPECT_ERROR(lt_group_norm(x, 3, NULL, NULL, NAN), LT_EINVAL, "eps");
  lt_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_batch_norm_values),
      TU_TEST(test_batch_norm_running_stats),
      TU_TEST(test_layer_norm_values),
      TU_TEST(test_group_norm_values),
      TU_TEST(test_norm_grads),
      TU_TEST(test_batch_norm_update_has_no_grad),
      TU_TEST(test_batch_norm_no_grad_scope),
      TU_TEST(test_batch_norm_edges),
      TU_TEST(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
