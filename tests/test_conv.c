/* Convolution and pooling (lt_conv2d_n, lt_conv_transpose2d_n, lt_max_pool2d_n,
 * lt_avg_pool2d_n, lt_adaptive_avg_pool2d_n, lt_flatten) against plain loops
 * written here from PyTorch's definitions (conv_transpose2d as a scatter, the
 * library's kernels gather), gradients against finite differences, and every
 * argument error. Run with LT_BACKEND=ref and with the default backend. */
#include "test_grad_util.h"

#include "../src/ops/lt_ops.h"

/* ---- inputs --------------------------------------------------------------------------- */

/* n values in [-2, 2], multiples of 1/64 (exact in f32, so one set of
 * inputs serves both dtypes), from a small LCG. */
static double *vals(int64_t n, uint64_t seed) {
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (double)((int64_t)(s >> 33) % 257 - 128) / 64.0;
  }
  return v;
}

static lt_tensor *mk(lt_dtype dt, const int64_t *shape, int nd, const double *v) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  if (dt == LT_F64) return lt_from_data(CPU0, LT_F64, shape, nd, v);
  float *f = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  lt_tensor *t = lt_from_data(CPU0, LT_F32, shape, nd, f);
  free(f);
  return t;
}

static int64_t numel4(const int64_t s[4]) { return s[0] * s[1] * s[2] * s[3]; }
/* Every product of two inputs is a multiple of 1/4096 within 4, so any f32
 * sum of fewer than 1024 of them is exact in every order (oneDNN's or the
 * JIT's): what remains is the final rounding (and a pool's division). */
static double tol_of(lt_dtype dt) { return dt == LT_F64 ? 1e-12 : 2e-6; }
static const lt_dtype kDts[2] = {LT_F64, LT_F32};

#define I4(s, a, b, c, d) ((((a) * (s)[1] + (b)) * (s)[2] + (c)) * (s)[3] + (d))

/* ---- oracles ---------------------------------------------------------------------------- */

typedef struct conv_case {
  int64_t xs[4], ws[4], s[2], p[2], d[2], g, op[2];
  bool bias;
} conv_case;

/* torch.nn.functional.conv2d: y[n,o,a,b] = bias[o] + sum over the group's
 * channels and the kernel of x at (a s - p + i d, b s - p + j d), zero outside. */
static void conv_oracle(const conv_case *c, const double *x, const double *w, const double *bias,
                        double *y, int64_t ys[4]) {
  int64_t cg = c->ws[1], og = c->ws[0] / c->g;
  ys[0] = c->xs[0];
  ys[1] = c->ws[0];
  for (int i = 0; i < 2; i++)
    ys[2 + i] = (c->xs[2 + i] + 2 * c->p[i] - c->d[i] * (c->ws[2 + i] - 1) - 1) / c->s[i] + 1;
  for (int64_t n = 0; n < ys[0]; n++)
    for (int64_t o = 0; o < ys[1]; o++)
      for (int64_t a = 0; a < ys[2]; a++)
        for (int64_t b = 0; b < ys[3]; b++) {
          double acc = bias ? bias[o] : 0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t i = 0; i < c->ws[2]; i++)
              for (int64_t j = 0; j < c->ws[3]; j++) {
                int64_t h = a * c->s[0] - c->p[0] + i * c->d[0];
                int64_t v = b * c->s[1] - c->p[1] + j * c->d[1];
                if (h < 0 || v < 0 || h >= c->xs[2] || v >= c->xs[3]) continue;
                acc += x[I4(c->xs, n, o / og * cg + ci, h, v)] * w[I4(c->ws, o, ci, i, j)];
              }
          y[I4(ys, n, o, a, b)] = acc;
        }
}

/* torch.nn.functional.conv_transpose2d as a scatter: every input element adds
 * x * w to the output positions its kernel taps reach. */
static void convt_oracle(const conv_case *c, const double *x, const double *w, const double *bias,
                         double *y, int64_t ys[4]) {
  int64_t cg = c->xs[1] / c->g, og = c->ws[1];
  ys[0] = c->xs[0];
  ys[1] = og * c->g;
  for (int i = 0; i < 2; i++)
    ys[2 + i] =
        (c->xs[2 + i] - 1) * c->s[i] - 2 * c->p[i] + c->d[i] * (c->ws[2 + i] - 1) + c->op[i] + 1;
  for (int64_t k = 0; k < numel4(ys); k++) y[k] = bias ? bias[(k / (ys[2] * ys[3])) % ys[1]] : 0;
  for (int64_t n = 0; n < c->xs[0]; n++)
    for (int64_t ci = 0; ci < c->xs[1]; ci++)
      for (int64_t a = 0; a < c->xs[2]; a++)
        for (int64_t b = 0; b < c->xs[3]; b++)
          for (int64_t oi = 0; oi < og; oi++)
            for (int64_t i = 0; i < c->ws[2]; i++)
              for (int64_t j = 0; j < c->ws[3]; j++) {
                int64_t h = a * c->s[0] - c->p[0] + i * c->d[0];
                int64_t v = b * c->s[1] - c->p[1] + j * c->d[1];
                if (h < 0 || v < 0 || h >= ys[2] || v >= ys[3]) continue;
                y[I4(ys, n, ci / cg * og + oi, h, v)] +=
                    x[I4(c->xs, n, ci, a, b)] * w[I4(c->ws, ci, oi, i, j)];
              }
}

typedef struct pool_case {
  int64_t xs[4], k[2], s[2], p[2], d[2];
  bool ceil, include_pad;
  int64_t divisor;
} pool_case;

/* PyTorch's pooling_output_shape. */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t n = num / s + 1; /* num >= 0 in every case here */
  if (ceil && (n - 1) * s >= in + p) n--;
  return n;
}

/* max_pool2d as PyTorch's CPU loop: start from -inf at the window's first
 * element; take a value when it is larger or NaN. idx: its h * W + w. */
static void maxpool_oracle(const pool_case *c, const double *x, double *y, int64_t *idx,
                           int64_t ys[4]) {
  ys[0] = c->xs[0];
  ys[1] = c->xs[1];
  for (int i = 0; i < 2; i++)
    ys[2 + i] = pool_out(c->xs[2 + i], c->k[i], c->s[i], c->p[i], c->d[i], c->ceil);
  int64_t H = c->xs[2], W = c->xs[3];
  for (int64_t q = 0; q < ys[0] * ys[1]; q++)
    for (int64_t a = 0; a < ys[2]; a++)
      for (int64_t b = 0; b < ys[3]; b++) {
        int64_t h0 = a * c->s[0] - c->p[0], w0 = b * c->s[1] - c->p[1];
        int64_t h1 = h0 + (c->k[0] - 1) * c->d[0] + 1, w1 = w0 + (c->k[1] - 1) * c->d[1] + 1;
        if (h1 > H) h1 = H;
        if (w1 > W) w1 = W;
        while (h0 < 0) h0 += c->d[0];
        while (w0 < 0) w0 += c->d[1];
        double m = -INFINITY;
        int64_t mi = h0 * W + w0;
        for (int64_t h = h0; h < h1; h += c->d[0])
          for (int64_t v = w0; v < w1; v += c->d[1]) {
            double e = x[q * H * W + h * W + v];
            if (e > m || isnan(e)) {
              m = e;
              mi = h * W + v;
            }
          }
        y[(q * ys[2] + a) * ys[3] + b] = m;
        if (idx) idx[(q * ys[2] + a) * ys[3] + b] = mi;
      }
}

/* avg_pool2d as PyTorch's CPU loop. */
static void avgpool_oracle(const pool_case *c, const double *x, double *y, int64_t ys[4]) {
  ys[0] = c->xs[0];
  ys[1] = c->xs[1];
  for (int i = 0; i < 2; i++)
    ys[2 + i] = pool_out(c->xs[2 + i], c->k[i], c->s[i], c->p[i], 1, c->ceil);
  int64_t H = c->xs[2], W = c->xs[3];
  for (int64_t q = 0; q < ys[0] * ys[1]; q++)
    for (int64_t a = 0; a < ys[2]; a++)
      for (int64_t b = 0; b < ys[3]; b++) {
        int64_t h0 = a * c->s[0] - c->p[0], w0 = b * c->s[1] - c->p[1];
        int64_t h1 = h0 + c->k[0], w1 = w0 + c->k[1];
        if (h1 > H + c->p[0]) h1 = H + c->p[0];
        if (w1 > W + c->p[1]) w1 = W + c->p[1];
        int64_t pool = (h1 - h0) * (w1 - w0);
        if (h0 < 0) h0 = 0;
        if (w0 < 0) w0 = 0;
        if (h1 > H) h1 = H;
        if (w1 > W) w1 = W;
        double sum = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t v = w0; v < w1; v++) sum += x[q * H * W + h * W + v];
        double div = c->divisor       ? (double)c->divisor
                     : c->include_pad ? (double)pool
                                      : (double)((h1 - h0) * (w1 - w0));
        y[(q * ys[2] + a) * ys[3] + b] = sum / div;
      }
}

static void adaptive_oracle(const int64_t xs[4], int64_t oh, int64_t ow, const double *x,
                            double *y) {
  int64_t H = xs[2], W = xs[3];
  for (int64_t q = 0; q < xs[0] * xs[1]; q++)
    for (int64_t a = 0; a < oh; a++)
      for (int64_t b = 0; b < ow; b++) {
        int64_t h0 = a * H / oh, h1 = ((a + 1) * H + oh - 1) / oh;
        int64_t w0 = b * W / ow, w1 = ((b + 1) * W + ow - 1) / ow;
        double sum = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t v = w0; v < w1; v++) sum += x[q * H * W + h * W + v];
        y[(q * oh + a) * ow + b] = sum / (double)((h1 - h0) * (w1 - w0));
      }
}

/* ---- forward values ----------------------------------------------------------------------- */

static void check_conv(const conv_case *c, bool transpose) {
  int64_t nx = numel4(c->xs), nw = numel4(c->ws);
  double *x = vals(nx, 1), *w = vals(nw, 2), *bias = vals(64, 3);
  double *want = calloc(4096, sizeof(double));
  int64_t ys[4];
  if (transpose)
    convt_oracle(c, x, w, c->bias ? bias : NULL, want, ys);
  else
    conv_oracle(c, x, w, c->bias ? bias : NULL, want, ys);
  assert_true(numel4(ys) <= 4096);
  for (int k = 0; k < 2; k++) {
    lt_dtype dt = kDts[k];
    lt_tensor *xt = mk(dt, c->xs, 4, x), *wt = mk(dt, c->ws, 4, w);
    lt_tensor *bt = c->bias ? mk(dt, SHAPE(ys[1]), 1, bias) : NULL;
    lt_tensor *y =
        transpose ? lt_conv_transpose2d_n(xt, wt, bt, c->s, 2, c->p, 2, c->op, 2, c->d, 2, c->g)
                  : lt_conv2d_n(xt, wt, bt, c->s, 2, c->p, 2, c->d, 2, c->g);
    tu_expect(y, dt, ys, 4, want, tol_of(dt));
  }
  free(x);
  free(w);
  free(bias);
  free(want);
}

static void test_conv2d_values(void **state) {
  (void)state;
  static const conv_case cases[] = {
      {{2, 3, 5, 7}, {4, 3, 3, 2}, {1, 1}, {0, 0}, {1, 1}, 1, {0, 0}, true},
      /* stride 2, groups 2, uneven padding */
      {{1, 4, 7, 6}, {6, 2, 3, 3}, {2, 2}, {1, 2}, {1, 1}, 2, {0, 0}, false},
      /* dilation 2, padding larger than the kernel's half */
      {{2, 2, 9, 8}, {2, 2, 2, 3}, {1, 2}, {3, 2}, {2, 2}, 1, {0, 0}, true},
      /* depthwise (groups = channels), stride 2 */
      {{1, 4, 6, 5}, {4, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 4, {0, 0}, true},
      /* 1x1 kernel, stride 3 */
      {{3, 2, 7, 7}, {3, 2, 1, 1}, {3, 3}, {0, 0}, {1, 1}, 1, {0, 0}, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv(&cases[i], false);
}

static void test_conv2d_defaults_and_3d(void **state) {
  (void)state;
  /* NULL stride, padding and dilation are 1, 0, 1; a 3-d input is one image */
  conv_case c = {{1, 3, 5, 4}, {2, 3, 2, 3}, {1, 1}, {0, 0}, {1, 1}, 1, {0, 0}, false};
  double *x = vals(60, 4), *w = vals(36, 5), want[64];
  int64_t ys[4];
  conv_oracle(&c, x, w, NULL, want, ys);
  lt_tensor *x3 = mk(LT_F64, SHAPE(3, 5, 4), 3, x), *wt = mk(LT_F64, c.ws, 4, w);
  tu_expect(lt_conv2d_n(x3, wt, NULL, NULL, 0, NULL, 0, NULL, 0, 1), LT_F64, ys + 1, 3, want,
            1e-12);
  /* f32 input with an f64 weight: computed in f64 */
  lt_tensor *x32 = mk(LT_F32, c.xs, 4, x);
  tu_expect(lt_conv2d_n(x32, wt, NULL, NULL, 0, NULL, 0, NULL, 0, 1), LT_F64, ys, 4, want, 1e-12);
  /* an empty batch gives an empty batch */
  lt_tensor *e = lt_conv2d_n(lt_zeros(CPU0, LT_F32, SHAPE(0, 3, 5, 4), 4), mk(LT_F32, c.ws, 4, w),
                             NULL, NULL, 0, NULL, 0, NULL, 0, 1);
  tu_expect(e, LT_F32, SHAPE(0, 2, 4, 2), 4, NULL, 0);
  free(x);
  free(w);
}

static void test_conv_transpose2d_values(void **state) {
  (void)state;
  static const conv_case cases[] = {
      {{2, 4, 3, 4}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1, 1}, 1, {1, 0}, true},
      /* groups 2, dilation, output padding on both axes */
      {{1, 4, 3, 3}, {4, 1, 2, 3}, {2, 3}, {0, 1}, {2, 1}, 2, {1, 2}, false},
      /* output padding not below the stride but below the dilation */
      {{1, 2, 3, 3}, {2, 1, 3, 3}, {1, 1}, {0, 0}, {2, 2}, 1, {1, 1}, true},
      /* 3-channel groups of one (depthwise transpose) */
      {{2, 3, 2, 3}, {3, 2, 3, 2}, {3, 2}, {1, 0}, {1, 1}, 3, {2, 1}, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv(&cases[i], true);
}

static void check_max_pool(const pool_case *c, const double *x) {
  double want[4096];
  int64_t ys[4];
  maxpool_oracle(c, x, want, NULL, ys);
  for (int k = 0; k < 2; k++) {
    lt_dtype dt = kDts[k];
    lt_tensor *y =
        lt_max_pool2d_n(mk(dt, c->xs, 4, x), c->k, 2, c->s, 2, c->p, 2, c->d, 2, c->ceil);
    tu_expect(y, dt, ys, 4, want, 0);
  }
}

static const pool_case kMaxCases[] = {
    {{2, 3, 7, 6}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, false, false, 0},
    {{1, 2, 6, 5}, {3, 3}, {2, 2}, {1, 0}, {1, 1}, true, false, 0},
    {{1, 1, 9, 8}, {3, 2}, {1, 2}, {1, 1}, {2, 2}, true, false, 0},
    {{2, 2, 5, 7}, {2, 3}, {3, 2}, {1, 1}, {2, 1}, true, false, 0},
    {{1, 2, 4, 4}, {4, 4}, {1, 1}, {2, 2}, {1, 1}, false, false, 0},
};

static void test_max_pool2d_values(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kMaxCases / sizeof kMaxCases[0]; i++) {
    double *x = vals(numel4(kMaxCases[i].xs), 10 + i); /* ties too: values repeat */
    check_max_pool(&kMaxCases[i], x);
    free(x);
  }
  /* stride NULL is the kernel; a 3-d input; ceil_mode's extra window */
  double *x = vals(50, 7), want[64];
  pool_case c = {{1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true, false, 0};
  int64_t ys[4];
  maxpool_oracle(&c, x, want, NULL, ys);
  assert_int_equal(ys[2], 3);
  lt_tensor *y =
      lt_max_pool2d_n(mk(LT_F64, SHAPE(2, 5, 5), 3, x), c.k, 2, NULL, 0, NULL, 0, NULL, 0, true);
  tu_expect(y, LT_F64, ys + 1, 3, want, 0);
  free(x);
}

static void test_max_pool2d_nan_inf(void **state) {
  (void)state;
  const double nan = NAN, inf = INFINITY;
  /* windows of 2x2, stride 2: {1, nan, 3, nan}, {-inf x4}, {inf, 2, nan, 5},
   * {7, inf, -inf, 7} */
  const double x[16] = {1, nan, -inf, -inf, 3, nan, -inf, -inf, inf, 2, 7, inf, nan, 5, -inf, 7};
  pool_case c = {{1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, false, 0};
  double want[4];
  int64_t idx[4], ys[4];
  maxpool_oracle(&c, x, want, idx, ys);
  assert_true(isnan(want[0]) && want[1] == -inf && isnan(want[2]) && want[3] == inf);
  check_max_pool(&c, x);
  /* padding (as -inf) next to -inf elements is never the result */
  pool_case cp = {{1, 1, 4, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false, 0};
  check_max_pool(&cp, x);
}

static void check_avg_pool(const pool_case *c, const double *x, lt_tensor *(*wrap)(lt_tensor *)) {
  double want[4096];
  int64_t ys[4];
  avgpool_oracle(c, x, want, ys);
  for (int k = 0; k < 2; k++) {
    lt_dtype dt = kDts[k];
    lt_tensor *in = mk(dt, c->xs, 4, x);
    if (wrap) in = wrap(in);
    lt_tensor *y =
        lt_avg_pool2d_n(in, c->k, 2, c->s, 2, c->p, 2, c->ceil, c->include_pad, c->divisor);
    if (wrap)
      tu_expect(y, dt, ys + 1, 3, want, tol_of(dt));
    else
      tu_expect(y, dt, ys, 4, want, tol_of(dt));
  }
}

static lt_tensor *drop_batch(lt_tensor *x) { return lt_reshape(x, lt_shape(x) + 1, 3); }

static void test_avg_pool2d_values(void **state) {
  (void)state;
  static const pool_case cases[] = {
      {{2, 3, 7, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 1}, false, true, 0},
      {{2, 3, 7, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 1}, false, false, 0},
      {{1, 2, 6, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true, 0},
      {{1, 2, 6, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false, 0},
      {{1, 1, 5, 5}, {3, 3}, {3, 3}, {1, 1}, {1, 1}, true, true, 0},
      {{1, 2, 4, 7}, {2, 4}, {3, 2}, {1, 2}, {1, 1}, true, false, 0},
      {{2, 1, 5, 6}, {2, 3}, {2, 2}, {1, 1}, {1, 1}, true, true, 5},
      {{2, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double *x = vals(numel4(cases[i].xs), 20 + i);
    check_avg_pool(&cases[i], x, NULL);
    if (cases[i].xs[0] == 1) check_avg_pool(&cases[i], x, drop_batch);
    free(x);
  }
  /* stride NULL is the kernel; infinities stay in their own windows */
  const double xi[8] = {1, 2, INFINITY, 4, 5, 6, 7, 8};
  lt_tensor *y = lt_avg_pool2d_n(mk(LT_F64, SHAPE(1, 1, 2, 4), 4, xi), SHAPE(2, 2), 2, NULL, 0,
                                 NULL, 0, false, true, 0);
  tu_expect(y, LT_F64, SHAPE(1, 1, 1, 2), 4, (double[]){3.5, INFINITY}, 1e-12);
}

static void test_adaptive_avg_pool2d_values(void **state) {
  (void)state;
  const int64_t xs[4] = {2, 3, 7, 5};
  double *x = vals(numel4(xs), 30);
  static const int64_t outs[][2] = {{3, 2}, {7, 5}, {1, 1}, {4, 3}, {5, 4}, {6, 1}, {2, 7}};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
    double want[512];
    adaptive_oracle(xs, outs[i][0], outs[i][1], x, want);
    for (int k = 0; k < 2; k++) {
      lt_dtype dt = kDts[k];
      lt_tensor *y = lt_adaptive_avg_pool2d_n(mk(dt, xs, 4, x), outs[i], 2);
      tu_expect(y, dt, SHAPE(2, 3, outs[i][0], outs[i][1]), 4, want, tol_of(dt));
    }
  }
  /* 3-d input; an output size of 0 gives an empty result */
  double want[64];
  adaptive_oracle(SHAPE(1, 2, 7, 5), 3, 3, x, want);
  tu_expect(lt_adaptive_avg_pool2d_n(mk(LT_F64, SHAPE(2, 7, 5), 3, x), SHAPE(3, 3), 2), LT_F64,
            SHAPE(2, 3, 3), 3, want, 1e-12);
  tu_expect(lt_adaptive_avg_pool2d_n(mk(LT_F64, xs, 4, x), SHAPE(0, 2), 2), LT_F64,
            SHAPE(2, 3, 0, 2), 4, NULL, 0);
  /* an infinity reaches only the windows that hold it */
  const double xi[6] = {1, INFINITY, 3, 4, 5, 6};
  tu_expect(lt_adaptive_avg_pool2d_n(mk(LT_F64, SHAPE(1, 1, 1, 6), 4, xi), SHAPE(1, 3), 2), LT_F64,
            SHAPE(1, 1, 1, 3), 4, (double[]){INFINITY, 3.5, 5.5}, 1e-12);
  free(x);
}

static void test_flatten(void **state) {
  (void)state;
  double v[24];
  for (int i = 0; i < 24; i++) v[i] = i;
  lt_tensor *x = mk(LT_F64, SHAPE(2, 3, 4), 3, v);
  tu_expect(lt_flatten(x, 1, -1), LT_F64, SHAPE(2, 12), 2, v, 0);
  tu_expect(lt_flatten(x, 0, 1), LT_F64, SHAPE(6, 4), 2, v, 0);
  tu_expect(lt_flatten(x, 0, -1), LT_F64, SHAPE(24), 1, v, 0);
  tu_expect(lt_flatten(x, 2, 2), LT_F64, SHAPE(2, 3, 4), 3, v, 0);
  tu_expect(lt_flatten(mk(LT_F64, NULL, 0, v + 5), 0, -1), LT_F64, SHAPE(1), 1, v + 5, 0);
  TU_EXPECT_ERROR(lt_flatten(x, 2, 1), LT_EINVAL, "start_axis 2 comes after end_axis 1");
  TU_EXPECT_ERROR(lt_flatten(x, 0, 3), LT_EINVAL, "lt_flatten");
  TU_EXPECT_ERROR(lt_flatten(NULL, 0, 1), LT_EINVAL, "lt_flatten");
}

/* Values PyTorch 1.13 printed for a ones input [1, 1, H, H] (last output row,
 * count_include_pad) and its ceil_mode output sizes. */
static void test_pool_torch_values(void **state) {
  (void)state;
  static const struct {
    int64_t h, k, s, p, out;
    double last[4];
  } cases[] = {
      {5, 2, 2, 0, 3, {1, 1, 1}},
      {6, 3, 2, 1, 4, {1.0 / 3, 0.5, 0.5, 0.25}},
      {5, 3, 3, 1, 2, {2.0 / 3, 1}},
      {4, 2, 3, 1, 2, {0.5, 1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t h = cases[i].h, n = cases[i].out;
    const int64_t k[2] = {cases[i].k, cases[i].k}, st[2] = {cases[i].s, cases[i].s},
                  p[2] = {cases[i].p, cases[i].p};
    lt_tensor *x = lt_ones(CPU0, LT_F32, SHAPE(1, 1, h, h), 4);
    lt_tensor *m = lt_max_pool2d_n(x, k, 2, st, 2, p, 2, NULL, 0, true);
    assert_non_null(m);
    assert_int_equal(lt_shape(m)[2], n);
    assert_int_equal(lt_shape(m)[3], n);
    lt_tensor *a = lt_avg_pool2d_n(x, k, 2, st, 2, p, 2, true, true, 0);
    lt_tensor *row = lt_slice_n(a, SHAPE(0, 0, n - 1, 0), NULL, NULL, 4);
    tu_expect(lt_reshape(row, SHAPE(n), 1), LT_F32, SHAPE(n), 1, cases[i].last, 1e-6);
  }
}

/* ---- gradients ------------------------------------------------------------------------------ */

static lt_tensor *conv_fn(lt_tensor *const *in, void *ud) {
  const conv_case *c = ud;
  return lt_conv2d_n(in[0], in[1], c->bias ? in[2] : NULL, c->s, 2, c->p, 2, c->d, 2, c->g);
}

static lt_tensor *convt_fn(lt_tensor *const *in, void *ud) {
  const conv_case *c = ud;
  return lt_conv_transpose2d_n(in[0], in[1], c->bias ? in[2] : NULL, c->s, 2, c->p, 2, c->op, 2,
                               c->d, 2, c->g);
}

static void test_conv_gradients(void **state) {
  (void)state;
  conv_case c = {{2, 2, 4, 3}, {2, 1, 3, 2}, {2, 1}, {1, 1}, {1, 2}, 2, {0, 0}, true};
  tg_input ins[3] = {{c.xs, 4, tg_vals(48, 0.1), true, LT_F64},
                     {c.ws, 4, tg_vals(12, 0.7), true, LT_F64},
                     {SHAPE(2), 1, tg_vals(2, 1.3), true, LT_F64}};
  tg_check("conv2d", conv_fn, &c, ins, 3, 1e-6);
  conv_case t = {{1, 2, 3, 2}, {2, 2, 2, 2}, {2, 2}, {1, 0}, {1, 1}, 1, {1, 1}, true};
  tg_input tins[3] = {{t.xs, 4, tg_vals(12, 0.2), true, LT_F64},
                      {t.ws, 4, tg_vals(16, 0.9), true, LT_F64},
                      {SHAPE(2), 1, tg_vals(2, 1.9), true, LT_F64}};
  tg_check("conv_transpose2d", convt_fn, &t, tins, 3, 1e-6);
  /* output padding beyond the stride (below the dilation): the input's
   * gradient is the first windows of a longer convolution */
  conv_case u = {{1, 2, 3, 2}, {2, 1, 2, 2}, {1, 1}, {0, 0}, {2, 2}, 2, {1, 1}, false};
  tg_input uins[2] = {{u.xs, 4, tg_vals(12, 0.4), true, LT_F64},
                      {u.ws, 4, tg_vals(8, 1.1), true, LT_F64}};
  tg_check("conv_transpose2d output_padding", convt_fn, &u, uins, 2, 1e-6);
}

static lt_tensor *max_fn(lt_tensor *const *in, void *ud) {
  const pool_case *c = ud;
  return lt_max_pool2d_n(in[0], c->k, 2, c->s, 2, c->p, 2, c->d, 2, c->ceil);
}
static lt_tensor *avg_fn(lt_tensor *const *in, void *ud) {
  const pool_case *c = ud;
  return lt_avg_pool2d_n(in[0], c->k, 2, c->s, 2, c->p, 2, c->ceil, c->include_pad, c->divisor);
}
static lt_tensor *adaptive_fn(lt_tensor *const *in, void *ud) {
  return lt_adaptive_avg_pool2d_n(in[0], (const int64_t *)ud, 2);
}

static void test_pool_gradients(void **state) {
  (void)state;
  /* distinct values: no ties, so the max is differentiable */
  pool_case m = {{1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false, 0};
  tg_input mi[1] = {{m.xs, 4, tg_vals(50, 0.3), true, LT_F64}};
  tg_check("max_pool2d", max_fn, &m, mi, 1, 1e-6);
  pool_case md = {{1, 1, 6, 5}, {2, 2}, {1, 2}, {1, 0}, {2, 1}, false, false, 0};
  tg_input mdi[1] = {{md.xs, 4, tg_vals(30, 0.5), true, LT_F64}};
  tg_check("max_pool2d dilated", max_fn, &md, mdi, 1, 1e-6);
  pool_case a = {{1, 2, 5, 4}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true, false, 0};
  tg_input ai[1] = {{a.xs, 4, tg_vals(40, 0.8), true, LT_F64}};
  tg_check("avg_pool2d", avg_fn, &a, ai, 1, 1e-6);
  a.include_pad = true;
  a.divisor = 3;
  tg_check("avg_pool2d divisor_override", avg_fn, &a, ai, 1, 1e-6);
  tg_input di[1] = {{SHAPE(1, 2, 5, 7), 4, tg_vals(70, 1.2), true, LT_F64}};
  tg_check("adaptive_avg_pool2d", adaptive_fn, (void *)SHAPE(3, 4), di, 1, 1e-6);
}

/* Ties go to the first largest element of the window, NaN to the last NaN. */
static void test_max_pool2d_gradient_routing(void **state) {
  (void)state;
  const double x[8] = {2, 2, NAN, 1, 2, 1, 5, NAN};
  lt_tensor *t = mk(LT_F64, SHAPE(1, 1, 2, 4), 4, x);
  assert_int_equal(lt_set_requires_grad(t, true), LT_OK);
  lt_tensor *y = lt_max_pool2d_n(t, SHAPE(2, 2), 2, NULL, 0, NULL, 0, NULL, 0, false);
  assert_int_equal(lt_backward(lt_sum(y, NULL, 0, false)), LT_OK);
  tu_expect(lt_grad(t), LT_F64, SHAPE(1, 1, 2, 4), 4, (double[]){1, 0, 0, 0, 0, 0, 0, 1}, 0);
}

/* Second order: the gradient of an inner loss through a convolution,
 * differentiated again (through the gradient ops' own rules). */
typedef struct inner {
  const conv_case *c;
  bool wrt_weight;
} inner;

static lt_tensor *conv_grad_fn(lt_tensor *const *in, void *ud) {
  const inner *s = ud;
  lt_tensor *v = in[0];
  lt_set_requires_grad(v, true);
  lt_tensor *y = s->wrt_weight
                     ? lt_conv2d_n(in[1], v, NULL, s->c->s, 2, s->c->p, 2, s->c->d, 2, s->c->g)
                     : lt_conv2d_n(v, in[1], NULL, s->c->s, 2, s->c->p, 2, s->c->d, 2, s->c->g);
  if (!y) return NULL;
  if (lt_backward(lt_sum(lt_sin(lt_mul(y, y)), NULL, 0, false)) != LT_OK) return NULL;
  lt_tensor *g = lt_mul(lt_grad(v), lt_scalar(CPU0, LT_F64, 1.0));
  lt_zero_grad(v);
  return g;
}

static void test_conv_second_order(void **state) {
  (void)state;
  conv_case c = {{1, 2, 4, 3}, {2, 1, 2, 2}, {2, 1}, {1, 0}, {1, 1}, 2, {0, 0}, false};
  tg_input wrt_x[2] = {{c.xs, 4, tg_vals(24, 0.15), true, LT_F64},
                       {c.ws, 4, tg_vals(8, 0.45), false, LT_F64}};
  tg_check("conv2d second order (input)", conv_grad_fn, &(inner){&c, false}, wrt_x, 2, 1e-5);
  tg_input wrt_w[2] = {{c.ws, 4, tg_vals(8, 0.45), true, LT_F64},
                       {c.xs, 4, tg_vals(24, 0.15), false, LT_F64}};
  tg_check("conv2d second order (weight)", conv_grad_fn, &(inner){&c, true}, wrt_w, 2, 1e-5);
}

/* Second order through max_pool2d: the gradient reaching v (a
 * POOL_SCATTER_ADD of the pooled gradient), differentiated again, by the
 * multiplier u (through its rule, a POOL_GATHER) and by v. Overlapping
 * windows (3x3, stride 1): an element may be the maximum of several. */
static lt_tensor *pool_grad_fn(lt_tensor *const *in, void *ud) {
  const pool_case *c = ud;
  lt_tensor *v = in[0];
  lt_set_requires_grad(v, true);
  lt_tensor *y = lt_max_pool2d_n(v, c->k, 2, c->s, 2, c->p, 2, c->d, 2, c->ceil);
  if (!y) return NULL;
  if (lt_backward(lt_sum(lt_sin(lt_mul(y, in[1])), NULL, 0, false)) != LT_OK) return NULL;
  lt_tensor *g = lt_mul(lt_grad(v), lt_scalar(CPU0, LT_F64, 1.0));
  lt_zero_grad(v);
  lt_zero_grad(in[1]); /* the inner backward reached u too: only the outer one counts */
  return g;
}

static void test_max_pool2d_second_order(void **state) {
  (void)state;
  pool_case c = {{1, 2, 4, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false, 0};
  tg_input ins[2] = {{c.xs, 4, tg_vals(40, 0.35), false, LT_F64},
                     {SHAPE(1, 2, 4, 5), 4, tg_vals(40, 0.7), true, LT_F64}};
  tg_check("max_pool2d second order (multiplier)", pool_grad_fn, &c, ins, 2, 1e-6);
}

/* ---- argument errors ------------------------------------------------------------------------ */

/* Each call fails with status st and a message naming the function and
 * needle, and leaves no tensor behind (operands are made before the count). */
#define EXPECT_BAD(expr, st, needle)                       \
  do {                                                     \
    int64_t live_ = lt_device_live_tensors(CPU0);          \
    TU_EXPECT_ERROR(expr, st, needle);                     \
    assert_int_equal(lt_device_live_tensors(CPU0), live_); \
  } while (0)

static void test_conv_errors(void **state) {
  (void)state;
  lt_tensor *x = lt_zeros(CPU0, LT_F32, SHAPE(1, 4, 5, 5), 4);
  lt_tensor *w = lt_zeros(CPU0, LT_F32, SHAPE(6, 2, 3, 3), 4);
  lt_tensor *xi = lt_zeros(CPU0, LT_I32, SHAPE(1, 4, 5, 5), 4);
  const int64_t *one = SHAPE(1, 1), *zero = SHAPE(0, 0);
  EXPECT_BAD(lt_conv2d_n(NULL, w, NULL, NULL, 0, NULL, 0, NULL, 0, 2), LT_EINVAL, "lt_conv2d");
  EXPECT_BAD(lt_conv2d_n(xi, w, NULL, NULL, 0, NULL, 0, NULL, 0, 2), LT_EDTYPE,
             "lt_conv2d_n: input must be f32 or f64, got i32");
  lt_tensor *w_i64 = lt_zeros(CPU0, LT_I64, SHAPE(6, 2, 3, 3), 4);
  EXPECT_BAD(lt_conv2d_n(x, w_i64, NULL, NULL, 0, NULL, 0, NULL, 0, 2), LT_EDTYPE,
             "weight must be f32 or f64");
  lt_tensor *x_2d = lt_zeros(CPU0, LT_F32, SHAPE(4, 5), 2);
  EXPECT_BAD(lt_conv2d_n(x_2d, w, NULL, NULL, 0, NULL, 0, NULL, 0, 2), LT_ESHAPE,
             "input must be 3-d");
  lt_tensor *w_3d = lt_zeros(CPU0, LT_F32, SHAPE(6, 2, 3), 3);
  EXPECT_BAD(lt_conv2d_n(x, w_3d, NULL, NULL, 0, NULL, 0, NULL, 0, 2), LT_ESHAPE,
             "weight must be 4-d");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, NULL, 0, 0), LT_EINVAL,
             "groups must be positive");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, NULL, 0, 1), LT_ESHAPE, "expects 2");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, NULL, 0, 4), LT_ESHAPE,
             "multiple of groups");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, zero, 2, NULL, 0, NULL, 0, 2), LT_EINVAL,
             "stride must be positive");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, SHAPE(-1, 0), 2, NULL, 0, 2), LT_EINVAL,
             "padding must be non-negative");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, SHAPE(1, 0), 2, 2), LT_EINVAL,
             "dilation must be positive");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, SHAPE((int64_t)1 << 50, 1), 2, NULL, 0, NULL, 0, 2), LT_EINVAL,
             "too large");
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, SHAPE(3, 1), 2, 2), LT_ESHAPE,
             "smaller than the dilated kernel");
  lt_tensor *w_empty = lt_zeros(CPU0, LT_F32, SHAPE(6, 2, 0, 3), 4);
  EXPECT_BAD(lt_conv2d_n(x, w_empty, NULL, NULL, 0, NULL, 0, NULL, 0, 2), LT_ESHAPE, "size 0 axis");
  lt_tensor *b_5 = lt_zeros(CPU0, LT_F32, SHAPE(5), 1);
  EXPECT_BAD(lt_conv2d_n(x, w, b_5, NULL, 0, NULL, 0, NULL, 0, 2), LT_ESHAPE,
             "bias must be 1-d with 6 elements");
  lt_tensor *b_i32 = lt_zeros(CPU0, LT_I32, SHAPE(6), 1);
  EXPECT_BAD(lt_conv2d_n(x, w, b_i32, NULL, 0, NULL, 0, NULL, 0, 2), LT_EDTYPE,
             "bias must be f32 or f64");
  lt_tensor *b_2d = lt_zeros(CPU0, LT_F32, SHAPE(6, 1), 2);
  EXPECT_BAD(lt_conv2d_n(x, w, b_2d, one, 2, NULL, 0, NULL, 0, 2), LT_ESHAPE, "lt_conv2d_n: bias");
  const int64_t *huge = SHAPE((int64_t)1 << 40, 1);
  EXPECT_BAD(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, huge, 2, 2), LT_EINVAL,
             "kernel {3, 3} with dilation {1099511627776, 1} is too large");
  /* conv_transpose2d: weight [C, O / groups, kh, kw] */
  lt_tensor *wt = lt_zeros(CPU0, LT_F32, SHAPE(4, 3, 3, 3), 4);
  EXPECT_BAD(lt_conv_transpose2d_n(x, w, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 1), LT_ESHAPE,
             "lt_conv_transpose2d_n: weight [6, 2, 3, 3] must have the input's 4 channels");
  EXPECT_BAD(lt_conv_transpose2d_n(x, wt, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 3), LT_ESHAPE,
             "multiple of groups 3");
  EXPECT_BAD(
      lt_conv_transpose2d_n(x, wt, NULL, SHAPE(2, 2), 2, NULL, 0, SHAPE(2, 0), 2, NULL, 0, 1),
      LT_EINVAL, "output_padding {2, 0} must be smaller than either stride");
  EXPECT_BAD(lt_conv_transpose2d_n(x, wt, NULL, SHAPE((int64_t)1 << 40, 1), 2, NULL, 0, NULL, 0,
                                   NULL, 0, 1),
             LT_ESHAPE, "the output would be too large");
  EXPECT_BAD(lt_conv_transpose2d_n(x, wt, NULL, NULL, 0, NULL, 0, SHAPE(0, -1), 2, NULL, 0, 1),
             LT_EINVAL, "output_padding must be non-negative");
  EXPECT_BAD(lt_conv_transpose2d_n(x, wt, NULL, NULL, 0, SHAPE(4, 0), 2, NULL, 0, NULL, 0, 1),
             LT_ESHAPE, "the output would be empty");
  lt_tensor *b_4 = lt_zeros(CPU0, LT_F32, SHAPE(4), 1);
  EXPECT_BAD(lt_conv_transpose2d_n(x, wt, b_4, NULL, 0, NULL, 0, NULL, 0, NULL, 0, 1), LT_ESHAPE,
             "bias must be 1-d with 3 elements");
}

static void test_pool_errors(void **state) {
  (void)state;
  lt_tensor *x = lt_zeros(CPU0, LT_F32, SHAPE(1, 2, 5, 5), 4);
  const int64_t *k3 = SHAPE(3, 3);
  EXPECT_BAD(lt_max_pool2d_n(NULL, k3, 2, NULL, 0, NULL, 0, NULL, 0, false), LT_EINVAL,
             "lt_max_pool2d");
  lt_tensor *x_i64 = lt_zeros(CPU0, LT_I64, SHAPE(1, 2, 5, 5), 4);
  EXPECT_BAD(lt_max_pool2d_n(x_i64, k3, 2, NULL, 0, NULL, 0, NULL, 0, false), LT_EDTYPE,
             "lt_max_pool2d_n: input must be f32 or f64");
  lt_tensor *x_2d = lt_zeros(CPU0, LT_F32, SHAPE(5, 5), 2);
  EXPECT_BAD(lt_max_pool2d_n(x_2d, k3, 2, NULL, 0, NULL, 0, NULL, 0, false), LT_ESHAPE,
             "input must be 3-d");
  lt_tensor *x_no_c = lt_zeros(CPU0, LT_F32, SHAPE(1, 0, 5, 5), 4);
  EXPECT_BAD(lt_max_pool2d_n(x_no_c, k3, 2, NULL, 0, NULL, 0, NULL, 0, false), LT_ESHAPE,
             "size 0 axis other than the batch");
  EXPECT_BAD(lt_max_pool2d_n(x, NULL, 0, NULL, 0, NULL, 0, NULL, 0, false), LT_EINVAL,
             "kernel has 0 entries");
  EXPECT_BAD(lt_max_pool2d_n(x, SHAPE(0, 2), 2, NULL, 0, NULL, 0, NULL, 0, false), LT_EINVAL,
             "kernel must be positive");
  EXPECT_BAD(lt_max_pool2d_n(x, k3, 2, SHAPE(1, 0), 2, NULL, 0, NULL, 0, false), LT_EINVAL,
             "stride must be positive");
  EXPECT_BAD(lt_max_pool2d_n(x, k3, 2, NULL, 0, SHAPE(2, 1), 2, NULL, 0, false), LT_EINVAL,
             "at most half the kernel");
  EXPECT_BAD(lt_max_pool2d_n(x, k3, 2, NULL, 0, SHAPE(-1, 1), 2, NULL, 0, false), LT_EINVAL,
             "non-negative");
  EXPECT_BAD(lt_max_pool2d_n(x, k3, 2, NULL, 0, NULL, 0, SHAPE(0, 1), 2, false), LT_EINVAL,
             "dilation must be positive");
  EXPECT_BAD(lt_max_pool2d_n(x, SHAPE(6, 2), 2, NULL, 0, NULL, 0, NULL, 0, false), LT_ESHAPE,
             "the output would be empty");
  EXPECT_BAD(lt_max_pool2d_n(x, k3, 2, NULL, 0, NULL, 0, SHAPE(3, 1), 2, false), LT_ESHAPE,
             "the output would be empty");
  /* a window of padding only (H = 2, kernel 2, padding 1, dilation 3) is
   * accepted as PyTorch does: -inf (test_torch_nn_agree.c) */
  EXPECT_BAD(lt_max_pool2d_n(x, k3, 2, NULL, 0, NULL, 0, SHAPE((int64_t)1 << 40, 1), 2, false),
             LT_EINVAL, "too large");
  EXPECT_BAD(lt_avg_pool2d_n(x, k3, 2, NULL, 0, SHAPE(2, 2), 2, false, true, 0), LT_EINVAL,
             "lt_avg_pool2d_n: padding {2, 2} must be at most half the kernel {3, 3}");
  EXPECT_BAD(lt_avg_pool2d_n(x, k3, 2, NULL, 0, NULL, 0, false, true, -1), LT_EINVAL,
             "divisor_override must be positive");
  lt_tensor *x_i32 = lt_zeros(CPU0, LT_I32, SHAPE(2, 5, 5), 3);
  EXPECT_BAD(lt_avg_pool2d_n(x_i32, k3, 2, NULL, 0, NULL, 0, false, true, 0), LT_EDTYPE,
             "lt_avg_pool2d_n: input must be f32 or f64");
  EXPECT_BAD(lt_avg_pool2d_n(x, SHAPE(6, 6), 2, NULL, 0, NULL, 0, false, true, 0), LT_ESHAPE,
             "the output would be empty");
  EXPECT_BAD(lt_adaptive_avg_pool2d_n(x, NULL, 0), LT_EINVAL, "output_size has 0 entries");
  EXPECT_BAD(lt_adaptive_avg_pool2d_n(x, SHAPE(-1, 2), 2), LT_EINVAL,
             "lt_adaptive_avg_pool2d_n: output_size must be non-negative");
  lt_tensor *x_no_h = lt_zeros(CPU0, LT_F32, SHAPE(1, 2, 0, 5), 4);
  EXPECT_BAD(lt_adaptive_avg_pool2d_n(x_no_h, SHAPE(2, 2), 2), LT_ESHAPE, "empty spatial axis");
  lt_tensor *x_5d = lt_zeros(CPU0, LT_F32, SHAPE(2, 1, 2, 5, 5), 5);
  EXPECT_BAD(lt_adaptive_avg_pool2d_n(x_5d, SHAPE(2, 2), 2), LT_ESHAPE, "input must be 3-d");
  lt_tensor *x_u8 = lt_zeros(CPU0, LT_U8, SHAPE(2, 5, 5), 3);
  EXPECT_BAD(lt_adaptive_avg_pool2d_n(x_u8, SHAPE(2, 2), 2), LT_EDTYPE, "input must be f32 or f64");
}

/* ---- the kernels check their instructions ------------------------------------------------ */

/* A node no builder would make (op, attrs, result shape), over a's value. */
static lt_tensor *raw(lt_op op, lt_tensor *a, lt_tensor *b, lt_dtype dt, const int64_t *shape,
                      const int64_t *attrs, int nattrs) {
  lt_node *ops[2] = {lt__ir_as(a, lt_get_dtype(a)), b ? lt__ir_as(b, lt_get_dtype(b)) : NULL};
  return lt__make(CPU0, op, dt, shape, 4, ops, b ? 2 : 1, attrs, nattrs, 0.0);
}

/* Attributes and shapes come from decoded bytes too: the kernels refuse
 * what does not fit (LT_EEXEC) rather than read outside their operands. */
static void test_kernels_check_instructions(void **state) {
  (void)state;
  lt_tensor *x = lt_ones(CPU0, LT_F32, SHAPE(1, 4, 5, 5), 4);
  lt_tensor *w = lt_ones(CPU0, LT_F32, SHAPE(2, 2, 3, 3), 4);
  const int64_t ok[7] = {1, 1, 0, 0, 1, 1, 2}, ys[4] = {1, 2, 3, 3};
  lt_tensor *gy4 = lt_ones(CPU0, LT_F32, SHAPE(1, 2, 4, 4), 4); /* more windows than fit */
  lt_tensor *gy1 = lt_ones(CPU0, LT_F32, SHAPE(1, 2, 1, 1), 4);
  lt_tensor *w1 = lt_ones(CPU0, LT_F32, SHAPE(2, 1, 3, 3), 4); /* 2 input channels per group */
  double want[18];
  for (int i = 0; i < 18; i++) want[i] = 18;
  tu_expect(raw(LT_OP_CONV2D, x, w, LT_F32, ys, ok, 7), LT_F32, ys, 4, want, 0);
  tu_expect_exec_error(raw(LT_OP_CONV2D, x, w, LT_F32, ys, ok, 6), "malformed instruction");
  const int64_t g3[7] = {1, 1, 0, 0, 1, 1, 3}, big[7] = {1, 1, 0, 0, (int64_t)1 << 62, 1, 2};
  tu_expect_exec_error(raw(LT_OP_CONV2D, x, w, LT_F32, ys, g3, 7), "groups");
  tu_expect_exec_error(raw(LT_OP_CONV2D, x, w, LT_F32, ys, big, 7), "out of range");
  tu_expect_exec_error(raw(LT_OP_CONV2D, x, w, LT_F32, SHAPE(1, 2, 4, 3), ok, 7), "output size");
  /* CONV2D_BIAS: the bias is [O] of x's dtype; 3 operands */
  lt_tensor *b2 = lt_full(CPU0, LT_F32, SHAPE(2), 1, 0.5),
            *b3 = lt_full(CPU0, LT_F32, SHAPE(3), 1, 0.5);
  double wantb[18];
  for (int i = 0; i < 18; i++) wantb[i] = 18.5;
  lt_node *bops[3] = {lt__ir_as(x, LT_F32), lt__ir_as(w, LT_F32), lt__ir_as(b2, LT_F32)};
  tu_expect(lt__make(CPU0, LT_OP_CONV2D_BIAS, LT_F32, ys, 4, bops, 3, ok, 7, 0.0), LT_F32, ys, 4,
            wantb, 0);
  lt_node *bad3[3] = {lt__ir_as(x, LT_F32), lt__ir_as(w, LT_F32), lt__ir_as(b3, LT_F32)};
  tu_expect_exec_error(lt__make(CPU0, LT_OP_CONV2D_BIAS, LT_F32, ys, 4, bad3, 3, ok, 7, 0.0),
                       "bias must be [O]");
  lt_node *bad7[3] = {lt__ir_as(x, LT_F32), lt__ir_as(w, LT_F32), lt__ir_as(b2, LT_F32)};
  tu_expect_exec_error(lt__make(CPU0, LT_OP_CONV2D_BIAS, LT_F32, ys, 4, bad7, 3, ok, 6, 0.0),
                       "malformed instruction");
  tu_expect_exec_error(raw(LT_OP_CONV2D_GRAD_WEIGHT, x, gy4, LT_F32, SHAPE(2, 2, 3, 3), ok, 7),
                       "output size");
  tu_expect_exec_error(raw(LT_OP_CONV2D_GRAD_INPUT, gy1, w1, LT_F32, SHAPE(1, 4, 3, 3), ok, 7),
                       "weight shape");
  const int64_t pool[8] = {2, 2, 2, 2, 0, 0, 1, 1};
  tu_expect(raw(LT_OP_MAX_POOL2D_ARGMAX, x, NULL, LT_I64, SHAPE(1, 4, 2, 2), pool, 8), LT_I64,
            SHAPE(1, 4, 2, 2), 4,
            (double[]){0, 2, 10, 12, 0, 2, 10, 12, 0, 2, 10, 12, 0, 2, 10, 12}, 0);
  tu_expect_exec_error(raw(LT_OP_MAX_POOL2D_ARGMAX, x, NULL, LT_I64, SHAPE(1, 4, 2, 2), pool, 7),
                       "malformed instruction");
  tu_expect_exec_error(raw(LT_OP_MAX_POOL2D_ARGMAX, x, NULL, LT_I64, SHAPE(1, 4, 4, 2), pool, 8),
                       "output size");
  /* the plane gather / scatter of max_pool2d's values: no attrs; every index
   * inside its plane (4 x 5 x 5: 25 a plane) */
  lt_tensor *ix = lt_from_data(CPU0, LT_I64, SHAPE(1, 4, 1), 3, (int64_t[]){0, 24, 7, 3});
  lt_tensor *ibad = lt_from_data(CPU0, LT_I64, SHAPE(1, 4, 1), 3, (int64_t[]){0, 25, 7, 3});
  lt_tensor *v3 = lt_full(CPU0, LT_F32, SHAPE(1, 4, 1), 3, 2.0);
  lt_node *pg[2] = {lt__ir_as(x, LT_F32), lt__ir_as(ix, LT_I64)};
  tu_expect(lt__make(CPU0, LT_OP_POOL_GATHER, LT_F32, SHAPE(1, 4, 1), 3, pg, 2, NULL, 0, 0.0),
            LT_F32, SHAPE(1, 4, 1), 3, (double[]){1, 1, 1, 1}, 0);
  lt_node *pgb[2] = {lt__ir_as(x, LT_F32), lt__ir_as(ibad, LT_I64)};
  tu_expect_exec_error(
      lt__make(CPU0, LT_OP_POOL_GATHER, LT_F32, SHAPE(1, 4, 1), 3, pgb, 2, NULL, 0, 0.0),
      "index out of its plane");
  lt_node *pga[2] = {lt__ir_as(x, LT_F32), lt__ir_as(ix, LT_I64)};
  tu_expect_exec_error(
      lt__make(CPU0, LT_OP_POOL_GATHER, LT_F32, SHAPE(1, 4, 1), 3, pga, 2, ok, 1, 0.0),
      "malformed instruction");
  /* scatters into [1, 4, 2, 2]: 4 a plane */
  lt_tensor *ibad4 = lt_from_data(CPU0, LT_I64, SHAPE(1, 4, 1), 3, (int64_t[]){0, 4, 2, 1});
  lt_node *ps[2] = {lt__ir_as(v3, LT_F32), lt__ir_as(ibad4, LT_I64)};
  tu_expect_exec_error(
      lt__make(CPU0, LT_OP_POOL_SCATTER_ADD, LT_F32, SHAPE(1, 4, 2, 2), 4, ps, 2, NULL, 0, 0.0),
      "index out of its plane");
  lt_node *psw[2] = {lt__ir_as(v3, LT_F32), lt__ir_as(ix, LT_I64)}; /* 2 planes, idx has 4 */
  tu_expect_exec_error(
      lt__make(CPU0, LT_OP_POOL_SCATTER_ADD, LT_F32, SHAPE(1, 2, 2, 2), 4, psw, 2, NULL, 0, 0.0),
      "channel counts differ");
  /* padding 1 with dilation 3 over 2 rows: a window of padding only has index -1 */
  lt_tensor *x2 = lt_ones(CPU0, LT_F32, SHAPE(1, 1, 2, 2), 4);
  const int64_t hole[8] = {2, 2, 2, 2, 1, 1, 3, 3};
  tu_expect(raw(LT_OP_MAX_POOL2D_ARGMAX, x2, NULL, LT_I64, SHAPE(1, 1, 1, 1), hole, 8), LT_I64,
            SHAPE(1, 1, 1, 1), 4, (double[]){-1}, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_conv2d_values),
      TU_TEST(test_conv2d_defaults_and_3d),
      TU_TEST(test_conv_transpose2d_values),
      TU_TEST(test_max_pool2d_values),
      TU_TEST(test_max_pool2d_nan_inf),
      TU_TEST(test_avg_pool2d_values),
      TU_TEST(test_adaptive_avg_pool2d_values),
      TU_TEST(test_pool_torch_values),
      TU_TEST(test_flatten),
      TU_TEST(test_conv_gradients),
      TU_TEST(test_pool_gradients),
      TU_TEST(test_max_pool2d_gradient_routing),
      TU_TEST(test_conv_second_order),
      TU_TEST(test_max_pool2d_second_order),
      TU_TEST(test_conv_errors),
      TU_TEST(test_pool_errors),
      TU_TEST(test_kernels_check_instructions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
