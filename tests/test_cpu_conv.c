/* The cpu backend's convolution and max-pool kernels (src/backend/cpu/
 * cpu_conv.c, cpu_maxpool.c), called directly on hand-made instructions and
 * buffers, against plain C loops written here.
 *
 * Convolutions (oneDNN) sum in their own order in f32: each element must be
 * within 1e-4 of the sum of the absolute values of its terms (computed with
 * the reference in double). Big problems check a spread sample of elements.
 * The pool's argmax is exact. Cases: odd sizes, N = 1 and 7, stride 2,
 * dilation 2, groups 2, padding beyond half the kernel, 1x1 kernels, one
 * input channel, the example CNN's shapes at batch 128, NaN / inf / ties,
 * ceil-mode shapes, bad instructions (declined, no crash), the primitive
 * cache, and the same problem under LT_NUM_THREADS=2 and 8 (child processes:
 * the pool's size is fixed at its first use). Under LT_BACKEND=ref (the
 * valgrind run) the oneDNN cases are skipped. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#include "../src/backend/cpu/cpu_conv.h"
#include "../src/core/lt_dtype.h"
#include "../src/core/lt_buffer.h"
#include "../src/core/lt_node.h"

#define DECLINE CPU_NATIVE_DECLINED

enum { FWD, BWD_DATA, BWD_WEIGHT };

typedef struct prob {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g;
} prob;

static int64_t osz(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

static void mkbuf(lt_buffer *b, lt_dtype dt, const int64_t s[4], void *data) {
  memset(b, 0, sizeof *b);
  b->dtype = (uint8_t)dt;
  b->ndim = 4;
  b->numel = 1;
  for (int d = 0; d < 4; d++) b->shape[d] = s[d], b->numel *= s[d];
  b->nbytes = (size_t)b->numel * lt_dtype_size(dt);
  b->data = data;
}

static void mkins(lt_instr *ins, lt_dtype dt, const int64_t s[4], int nops, int64_t *attrs,
                  int nattrs) {
  memset(ins, 0, sizeof *ins);
  ins->dtype = (uint8_t)dt;
  ins->ndim = 4;
  for (int d = 0; d < 4; d++) ins->shape[d] = s[d];
  ins->noperands = nops;
  ins->attrs = attrs;
  ins->nattrs = nattrs;
}

static float *rnd(int64_t n, uint32_t seed) {
  float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  assert_non_null(v);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return v;
}

/* ---- reference: one element at a time, in double, with the sum of |terms| ---------------- */

typedef struct dims {
  int64_t oh, ow, cg, og; /* output size, channels per group in and out */
} dims;

static dims dims_of(const prob *p) {
  dims d = {osz(p->h, p->kh, p->sh, p->ph, p->dh), osz(p->w, p->kw, p->sw, p->pw, p->dw),
            p->c / p->g, p->o / p->g};
  return d;
}

static double ref_fwd(const prob *p, const float *x, const float *w, int64_t e, double *abs_sum) {
  dims d = dims_of(p);
  int64_t ow = e % d.ow, oh = e / d.ow % d.oh, o = e / (d.ow * d.oh) % p->o,
          n = e / (d.ow * d.oh * p->o);
  int64_t gi = o / d.og;
  double s = 0, a = 0;
  for (int64_t ci = 0; ci < d.cg; ci++)
    for (int64_t i = 0; i < p->kh; i++)
      for (int64_t j = 0; j < p->kw; j++) {
        int64_t ih = oh * p->sh - p->ph + i * p->dh, iw = ow * p->sw - p->pw + j * p->dw;
        if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
        double t = (double)x[((n * p->c + gi * d.cg + ci) * p->h + ih) * p->w + iw] *
                   w[((o * d.cg + ci) * p->kh + i) * p->kw + j];
        s += t, a += fabs(t);
      }
  *abs_sum = a;
  return s;
}

static double ref_bwd_data(const prob *p, const float *gy, const float *w, int64_t e,
                           double *abs_sum) {
  dims d = dims_of(p);
  int64_t iw = e % p->w, ih = e / p->w % p->h, c = e / (p->w * p->h) % p->c,
          n = e / (p->w * p->h * p->c);
  int64_t gi = c / d.cg, ci = c % d.cg;
  double s = 0, a = 0;
  for (int64_t oo = 0; oo < d.og; oo++)
    for (int64_t i = 0; i < p->kh; i++)
      for (int64_t j = 0; j < p->kw; j++) {
        int64_t th = ih + p->ph - i * p->dh, tw = iw + p->pw - j * p->dw;
        if (th < 0 || tw < 0 || th % p->sh || tw % p->sw) continue;
        int64_t oh = th / p->sh, ow = tw / p->sw, o = gi * d.og + oo;
        if (oh >= d.oh || ow >= d.ow) continue;
        double t = (double)gy[((n * p->o + o) * d.oh + oh) * d.ow + ow] *
                   w[((o * d.cg + ci) * p->kh + i) * p->kw + j];
        s += t, a += fabs(t);
      }
  *abs_sum = a;
  return s;
}

static double ref_bwd_weight(const prob *p, const float *x, const float *gy, int64_t e,
                             double *abs_sum) {
  dims d = dims_of(p);
  int64_t j = e % p->kw, i = e / p->kw % p->kh, ci = e / (p->kw * p->kh) % d.cg,
          o = e / (p->kw * p->kh * d.cg);
  int64_t c = o / d.og * d.cg + ci;
  double s = 0, a = 0;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t oh = 0; oh < d.oh; oh++)
      for (int64_t ow = 0; ow < d.ow; ow++) {
        int64_t ih = oh * p->sh - p->ph + i * p->dh, iw = ow * p->sw - p->pw + j * p->dw;
        if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
        double t = (double)x[((n * p->c + c) * p->h + ih) * p->w + iw] *
                   gy[((n * p->o + o) * d.oh + oh) * d.ow + ow];
        s += t, a += fabs(t);
      }
  *abs_sum = a;
  return s;
}

/* ---- running a direction ------------------------------------------------------------------ */

/* The result shape of direction kind, and its operands' shapes. */
static void shapes(const prob *p, int kind, int64_t res[4], int64_t a[4], int64_t b[4]) {
  dims d = dims_of(p);
  int64_t xs[4] = {p->n, p->c, p->h, p->w}, ys[4] = {p->n, p->o, d.oh, d.ow},
          ws[4] = {p->o, d.cg, p->kh, p->kw};
  const int64_t *r = kind == FWD ? ys : kind == BWD_DATA ? xs : ws;
  const int64_t *s0 = kind == BWD_DATA ? ys : xs, *s1 = kind == BWD_WEIGHT ? ys : ws;
  memcpy(res, r, 4 * sizeof *res);
  memcpy(a, s0, 4 * sizeof *a);
  memcpy(b, s1, 4 * sizeof *b);
}

static int64_t numel4(const int64_t s[4]) { return s[0] * s[1] * s[2] * s[3]; }

static int run_dir(const prob *p, int kind, const float *a, const float *b, float *res) {
  int64_t rs[4], as[4], bs[4];
  shapes(p, kind, rs, as, bs);
  int64_t attrs[7] = {p->sh, p->sw, p->ph, p->pw, p->dh, p->dw, p->g};
  lt_instr ins;
  mkins(&ins, LT_F32, rs, 2, attrs, 7);
  lt_buffer ob, ab, bb;
  mkbuf(&ob, LT_F32, rs, res);
  mkbuf(&ab, LT_F32, as, (void *)a);
  mkbuf(&bb, LT_F32, bs, (void *)b);
  lt_buffer *in[2] = {&ab, &bb};
  if (kind == FWD) return lt__cpu_conv2d_fwd(&ins, &ob, in);
  if (kind == BWD_DATA) return lt__cpu_conv2d_bwd_data(&ins, &ob, in);
  return lt__cpu_conv2d_bwd_weight(&ins, &ob, in);
}

/* Checks res against the reference on about budget multiply-adds' worth of
 * elements (all of them when that is enough), the last one always. */
static void check_dir(const prob *p, int kind, const float *a, const float *b, const float *res,
                      double budget) {
  int64_t rs[4], as[4], bs[4];
  shapes(p, kind, rs, as, bs);
  int64_t total = numel4(rs);
  dims d = dims_of(p);
  double cost = kind == FWD        ? (double)(d.cg * p->kh * p->kw)
                : kind == BWD_DATA ? (double)(d.og * p->kh * p->kw)
                                   : (double)(p->n * d.oh * d.ow);
  int64_t step = (int64_t)((double)total * (cost + 1) / budget);
  if (step < 1) step = 1;
  if (step > 1 && step % 2 == 0) step++; /* odd: the sample walks over every position */
  for (int64_t e = 0; e < total; e += step) {
    for (int last = 0; last < 2; last++) {
      int64_t at = last ? total - 1 : e;
      double abs_sum, r = kind == FWD        ? ref_fwd(p, a, b, at, &abs_sum)
                          : kind == BWD_DATA ? ref_bwd_data(p, a, b, at, &abs_sum)
                                             : ref_bwd_weight(p, a, b, at, &abs_sum);
      if (fabs(res[at] - r) > 1e-4 * abs_sum + 1e-30)
        fail_msg("kind %d element %lld: %.9g, expected %.9g (|terms| %.3g)", kind, (long long)at,
                 (double)res[at], r, abs_sum);
    }
  }
}

/* All three directions of p on random data. */
static void check_prob(const prob *p, double budget) {
  dims d = dims_of(p);
  int64_t xn = p->n * p->c * p->h * p->w, yn = p->n * p->o * d.oh * d.ow,
          wn = p->o * d.cg * p->kh * p->kw;
  float *x = rnd(xn, 1), *w = rnd(wn, 2), *gy = rnd(yn, 3);
  float *y = rnd(yn, 4), *gx = rnd(xn, 5), *gw = rnd(wn, 6); /* garbage: all must be written */
  assert_int_equal(run_dir(p, FWD, x, w, y), LT_OK);
  check_dir(p, FWD, x, w, y, budget);
  assert_int_equal(run_dir(p, BWD_DATA, gy, w, gx), LT_OK);
  check_dir(p, BWD_DATA, gy, w, gx, budget);
  assert_int_equal(run_dir(p, BWD_WEIGHT, x, gy, gw), LT_OK);
  check_dir(p, BWD_WEIGHT, x, gy, gw, budget);
  free(x), free(w), free(gy), free(y), free(gx), free(gw);
}

#define P(...) ((const prob){__VA_ARGS__})
#define SMALL 1e12 /* every element */

static void test_conv_shapes(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  static const prob cases[] = {
      /* n  c  h   w   o  kh kw sh sw ph pw dh dw g */
      {1, 3, 7, 9, 5, 3, 2, 1, 1, 1, 0, 1, 1, 1},  /* odd sizes, N = 1, uneven kernel */
      {7, 4, 11, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1}, /* N = 7, stride 2 */
      {2, 3, 9, 10, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1}, /* dilation 2 */
      {3, 4, 8, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},  /* groups 2 */
      {2, 2, 5, 6, 3, 3, 3, 1, 1, 2, 3, 1, 1, 1},  /* padding beyond half (and the whole) kernel */
      {4, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1}, /* 1x1 */
      {3, 6, 9, 8, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1},  /* 1x1, stride 2 */
      {3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* one input channel, the CNN's first */
      {7, 6, 13, 12, 4, 3, 2, 2, 1, 2, 1, 2, 1, 2},  /* stride, dilation, groups together */
      {2, 4, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4},    /* depthwise */
      {1, 2, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1},    /* a single output */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_prob(&cases[i], SMALL);
}

static void test_conv_cnn_batch128(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  check_prob(&P(128, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1), 8e6);
  check_prob(&P(128, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1), 8e6);
}

/* Weights of 4 MB and slices of one sample each: backward-weights keeps its
 * partial gradients to a few slices. */
static void test_conv_big_weights(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  check_prob(&P(8, 1024, 16, 16, 1024, 1, 1, 1, 1, 0, 0, 1, 1, 1), 4e6);
}

/* gx's shape gives H: both sizes that map to the same OH (output_padding). */
static void test_conv_grad_input_sizes(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  check_prob(&P(2, 3, 8, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1), SMALL);
  check_prob(&P(2, 3, 7, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1), SMALL);
}

/* Empty inputs: a zero result where the sum is empty, nothing where it is. */
static void test_conv_empty(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  prob p = {2, 0, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1}; /* C = 0 */
  float x[1], w[1], y[2 * 3 * 16];
  for (int i = 0; i < 96; i++) y[i] = 7;
  assert_int_equal(run_dir(&p, FWD, x, w, y), LT_OK);
  for (int i = 0; i < 96; i++) assert_true(y[i] == 0.0f);
  prob q = {0, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1}; /* N = 0: zero weight gradient */
  float gw[3 * 2 * 9];
  for (int i = 0; i < 54; i++) gw[i] = 7;
  assert_int_equal(run_dir(&q, BWD_WEIGHT, x, y, gw), LT_OK);
  for (int i = 0; i < 54; i++) assert_true(gw[i] == 0.0f);
}

/* Declined, nothing read or written out of bounds (ASan runs), no crash. */
static void test_conv_bad(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  prob p = {2, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  int64_t xs[4] = {2, 4, 6, 6}, ws[4] = {4, 4, 3, 3}, ys[4] = {2, 4, 6, 6};
  float *x = rnd(144 * 2, 1), *w = rnd(144, 2), *y = rnd(144 * 2, 3);
  lt_buffer xb, wb, yb;
  mkbuf(&xb, LT_F32, xs, x);
  mkbuf(&wb, LT_F32, ws, w);
  mkbuf(&yb, LT_F32, ys, y);
  lt_buffer *in[2] = {&xb, &wb};
  lt_instr ins;
  int64_t good[7] = {1, 1, 1, 1, 1, 1, 1};
  mkins(&ins, LT_F32, ys, 2, good, 7);
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), LT_OK);
  int64_t bad[][7] = {
      {0, 1, 1, 1, 1, 1, 1},         {1, 1, -1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 1, 1},
      {1, 1, 1, 1, 1, 1, 3},         {1, 1, 1, 1, 1, 1, 0},  {1, 1, 1, 1, 1, 1, 2}, /* C/g != 4 */
      {2, 1, 1, 1, 1, 1, 1},         {1, 1, 0, 1, 1, 1, 1},  {1, 1, 1, 1, 2, 1, 1}, /* OH differs */
      {1, 1, 1LL << 40, 1, 1, 1, 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mkins(&ins, LT_F32, ys, 2, bad[i], 7);
    assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
    assert_int_equal(lt__cpu_conv2d_bwd_data(&ins, &xb, (lt_buffer *[]){&yb, &wb}), DECLINE);
    assert_int_equal(lt__cpu_conv2d_bwd_weight(&ins, &wb, (lt_buffer *[]){&xb, &yb}), DECLINE);
  }
  mkins(&ins, LT_F32, ys, 2, good, 6); /* attribute count */
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  mkins(&ins, LT_F64, ys, 2, good, 7); /* f64 is the fallback's */
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  mkins(&ins, LT_F32, ys, 1, good, 7); /* operand count */
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  mkins(&ins, LT_F32, ys, 2, good, 7);
  xb.numel = 1000; /* a buffer that does not match its shape */
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  xb.numel = 288;
  xb.ndim = 3;
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  xb.ndim = 4;
  wb.shape[1] = 5, wb.numel = 180; /* C/g != C */
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  wb.shape[1] = 4, wb.numel = 144;
  ins.shape[3] = 5; /* the node's shape is not the result's */
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &yb, in), DECLINE);
  (void)p;
  free(x), free(w), free(y);
}

static double max_abs(const float *v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
  return m;
}

/* CONV2D_BIAS: the forward primitive adds bias[o] (an operand read where it
 * is) to every element of channel o; against the forward without bias plus
 * the bias, on an odd problem and the CNN's (batch 128: several slices). */
static void check_bias(const prob *p) {
  dims d = dims_of(p);
  int64_t xn = p->n * p->c * p->h * p->w, yn = p->n * p->o * d.oh * d.ow,
          wn = p->o * d.cg * p->kh * p->kw;
  float *x = rnd(xn, 1), *w = rnd(wn, 2), *b = rnd(p->o, 3), *y0 = rnd(yn, 4), *y = rnd(yn, 5);
  assert_int_equal(run_dir(p, FWD, x, w, y0), LT_OK);
  int64_t rs[4], as[4], bs[4];
  shapes(p, FWD, rs, as, bs);
  int64_t attrs[7] = {p->sh, p->sw, p->ph, p->pw, p->dh, p->dw, p->g};
  lt_instr ins;
  mkins(&ins, LT_F32, rs, 3, attrs, 7);
  ins.op = LT_OP_CONV2D_BIAS;
  lt_buffer ob, ab, wb, bb;
  mkbuf(&ob, LT_F32, rs, y);
  mkbuf(&ab, LT_F32, as, x);
  mkbuf(&wb, LT_F32, bs, w);
  mkbuf(&bb, LT_F32, (const int64_t[4]){p->o, 1, 1, 1}, b);
  bb.ndim = 1;
  lt_buffer *in[3] = {&ab, &wb, &bb};
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &ob, in), LT_OK);
  /* the two primitives may sum in different orders (oneDNN picks its kernels
   * by the processor): within the f32 error of cg*kh*kw products and the bias */
  double tol = tu_f32_sum_tol(d.cg * p->kh * p->kw + 1,
                              fmax(max_abs(x, xn) * max_abs(w, wn), max_abs(b, p->o)));
  int64_t plane = d.oh * d.ow;
  for (int64_t e = 0; e < yn; e++) {
    double want = (double)y0[e] + b[e / plane % p->o];
    if (!(fabs(y[e] - want) <= tol))
      fail_msg("element %lld: %.9g, expected %.9g (tolerance %.3g)", (long long)e, (double)y[e],
               want, tol);
  }
  /* declined: a bias of the wrong length or dtype, or missing */
  bb.shape[0] = bb.numel = p->o + 1;
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &ob, in), DECLINE);
  bb.shape[0] = bb.numel = p->o;
  bb.dtype = LT_F64;
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &ob, in), DECLINE);
  bb.dtype = LT_F32;
  ins.noperands = 2;
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &ob, in), DECLINE);
  free(x), free(w), free(b), free(y0), free(y);
}

static void test_conv_bias(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  check_bias(&P(3, 4, 7, 9, 6, 3, 2, 2, 1, 1, 2, 1, 2, 2));
  check_bias(&P(128, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  check_bias(&P(128, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1));
  /* C = 0: the output is the bias alone */
  float b[3] = {1.5f, -2, 0.25f}, y[2 * 3 * 16], x[1], w[1];
  int64_t attrs[7] = {1, 1, 1, 1, 1, 1, 1}, ys[4] = {2, 3, 4, 4};
  lt_instr ins;
  mkins(&ins, LT_F32, ys, 3, attrs, 7);
  ins.op = LT_OP_CONV2D_BIAS;
  lt_buffer ob, ab, wb, bb;
  mkbuf(&ob, LT_F32, ys, y);
  mkbuf(&ab, LT_F32, (const int64_t[4]){2, 0, 4, 4}, x);
  mkbuf(&wb, LT_F32, (const int64_t[4]){3, 0, 3, 3}, w);
  mkbuf(&bb, LT_F32, (const int64_t[4]){3, 1, 1, 1}, b);
  bb.ndim = 1;
  assert_int_equal(lt__cpu_conv2d_fwd(&ins, &ob, (lt_buffer *[]){&ab, &wb, &bb}), LT_OK);
  for (int i = 0; i < 96; i++) assert_true(y[i] == b[i / 16 % 3]);
}

static void test_conv_cache(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  prob p = {2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  check_prob(&p, SMALL);
  assert_true(lt__cpu_conv_cached() > 0);
  lt__cpu_conv_cleanup();
  assert_int_equal(lt__cpu_conv_cached(), 0);
  lt__cpu_conv_cleanup();
  check_prob(&p, SMALL); /* made again */
  /* more problems than the cache holds: the oldest are evicted */
  for (int64_t h = 3; h < 3 + 70; h++) {
    prob q = {1, 1, h, 3, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
    float x[3 * 72], w[1], y[3 * 72];
    w[0] = 2;
    for (int64_t i = 0; i < 3 * h; i++) x[i] = (float)i;
    assert_int_equal(run_dir(&q, FWD, x, w, y), LT_OK);
    for (int64_t i = 0; i < 3 * h; i++) assert_true(y[i] == 2.0f * (float)i);
  }
  assert_true(lt__cpu_conv_cached() <= 64);
  lt__cpu_conv_cleanup();
}

/* Several threads running problems that overflow the cache while another
 * empties it: every result right (TSan would see races), nothing freed in use. */
static atomic_int g_stop;

static void *conv_worker(void *arg) {
  int64_t id = (int64_t)(intptr_t)arg;
  float x[3 * 90], w[1] = {2}, y[3 * 90];
  for (int64_t i = 0; i < 3 * 90; i++) x[i] = (float)i;
  for (int64_t it = 0; it < 150; it++) {
    int64_t h = 1 + (it * 7 + id * 13) % 90;
    prob q = {1, 1, h, 3, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
    if (run_dir(&q, FWD, x, w, y) != LT_OK) return (void *)1;
    for (int64_t i = 0; i < 3 * h; i++)
      if (y[i] != 2.0f * (float)i) return (void *)1;
  }
  return NULL;
}

static void *cleaner(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    lt__cpu_conv_cleanup();
    usleep(200);
  }
  return NULL;
}

static void test_conv_cache_threads(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  pthread_t t[4], c;
  atomic_store(&g_stop, 0);
  assert_int_equal(pthread_create(&c, NULL, cleaner, NULL), 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, conv_worker, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_null(r);
  }
  atomic_store(&g_stop, 1);
  assert_int_equal(pthread_join(c, NULL), 0);
  lt__cpu_conv_cleanup();
  assert_int_equal(lt__cpu_conv_cached(), 0);
}

/* ---- threads: the same problem in child processes with 2 and 8 pool threads --------------- */

static const prob g_thread_prob = {16, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1};
static char *g_self;

static void thread_data(float **x, float **w, float **gy, int64_t n[3]) {
  const prob *p = &g_thread_prob;
  dims d = dims_of(p);
  n[0] = p->n * p->c * p->h * p->w, n[1] = p->o * d.cg * p->kh * p->kw,
  n[2] = p->n * p->o * d.oh * d.ow;
  *x = rnd(n[0], 11), *w = rnd(n[1], 12), *gy = rnd(n[2], 13);
}

/* The child: the three directions, written to path as floats. */
static int thread_count(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

static int thread_child(const char *path) {
  int before = thread_count(); /* the threads before any product */
  float *x, *w, *gy;
  int64_t n[3];
  thread_data(&x, &w, &gy, n);
  float *y = malloc((size_t)n[2] * 4), *gx = malloc((size_t)n[0] * 4),
        *gw = malloc((size_t)n[1] * 4);
  int rc = run_dir(&g_thread_prob, FWD, x, w, y) | run_dir(&g_thread_prob, BWD_DATA, gy, w, gx) |
           run_dir(&g_thread_prob, BWD_WEIGHT, x, gy, gw);
  FILE *f = fopen(path, "wb");
  if (rc != LT_OK || !f) return 1;
  fwrite(y, 4, (size_t)n[2], f);
  fwrite(gx, 4, (size_t)n[0], f);
  fwrite(gw, 4, (size_t)n[1], f);
  fclose(f);
  free(x), free(w), free(gy), free(y), free(gx), free(gw);
  /* the pool's workers and no others: oneDNN opened no OpenMP team (its
   * threads would spin beside the pool's: once 80x slower at one thread) */
  return thread_count() == before + atoi(getenv("LT_NUM_THREADS")) - 1 ? 0 : 2;
}

static float *run_child(const char *threads, int64_t total) {
  char path[] = "/tmp/lt_conv_threadsXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("LT_NUM_THREADS", threads, 1);
    execl("/proc/self/exe", g_self, "--conv-child", path, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0); /* 2: more threads than the pool's */
  float *v = malloc((size_t)total * 4);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fread(v, 4, (size_t)total, f), (size_t)total);
  fclose(f);
  unlink(path);
  return v;
}

static void test_conv_threads(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  float *x, *w, *gy;
  int64_t n[3];
  thread_data(&x, &w, &gy, n);
  int64_t total = n[0] + n[1] + n[2];
  float *r2 = run_child("2", total), *r8 = run_child("8", total), *r1 = run_child("1", total);
  free(r1);
  for (int t = 0; t < 2; t++) {
    const float *r = t ? r8 : r2;
    check_dir(&g_thread_prob, FWD, x, w, r, SMALL);
    check_dir(&g_thread_prob, BWD_DATA, gy, w, r + n[2], SMALL);
    check_dir(&g_thread_prob, BWD_WEIGHT, x, gy, r + n[2] + n[0], SMALL);
  }
  /* the two agree as closely as each agrees with the reference: any
   * difference is rounding, never a missing or doubled slice */
  for (int64_t i = 0; i < total; i++) assert_true(fabsf(r2[i] - r8[i]) <= 1e-3f);
  free(x), free(w), free(gy), free(r2), free(r8);
}

/* ---- max-pool argmax --------------------------------------------------------------------- */

/* The reference: each window's real elements in row-major order; the first
 * one taken, then any larger one or any NaN. */
static void ref_pool(const double *x, int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                     const int64_t a[8], int64_t *y) {
  for (int64_t p = 0; p < nc; p++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        int64_t idx = -1;
        double best = 0;
        for (int64_t u = 0; u < a[0]; u++)
          for (int64_t v = 0; v < a[1]; v++) {
            int64_t ih = i * a[2] - a[4] + u * a[6], iw = j * a[3] - a[5] + v * a[7];
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            double e = x[p * h * w + ih * w + iw];
            if (idx < 0 || e > best || isnan(e)) best = e, idx = ih * w + iw;
          }
        y[(p * oh + i) * ow + j] = idx;
      }
}

static int run_pool(lt_dtype dt, const int64_t xs[4], void *x, int64_t oh, int64_t ow,
                    int64_t *attrs, int nattrs, int64_t *y) {
  int64_t ys[4] = {xs[0], xs[1], oh, ow};
  lt_instr ins;
  mkins(&ins, LT_I64, ys, 1, attrs, nattrs);
  lt_buffer xb, yb;
  mkbuf(&xb, dt, xs, x);
  mkbuf(&yb, LT_I64, ys, y);
  lt_buffer *in[1] = {&xb};
  return lt__cpu_max_pool2d_argmax(&ins, &yb, in);
}

/* PyTorch's output size (floor or ceil mode). */
static int64_t pool_osz(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t o = (in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

static void check_pool(int64_t n, int64_t c, int64_t h, int64_t w, const int64_t a[8],
                       bool ceil_mode, const double *vals) {
  int64_t oh = pool_osz(h, a[0], a[2], a[4], a[6], ceil_mode),
          ow = pool_osz(w, a[1], a[3], a[5], a[7], ceil_mode);
  int64_t xn = n * c * h * w, yn = n * c * oh * ow, xs[4] = {n, c, h, w};
  double *xd = malloc((size_t)xn * sizeof *xd);
  float *xf = malloc((size_t)xn * sizeof *xf);
  uint16_t *xh = malloc((size_t)xn * sizeof *xh); /* bf16: the values are exact in it */
  int64_t *want = malloc((size_t)yn * 8), *got = malloc((size_t)yn * 8);
  float *r = rnd(xn, 7);
  for (int64_t i = 0; i < xn; i++) {
    /* few distinct values: many ties */
    xd[i] = vals ? vals[i] : floor((double)r[i] * 3.0);
    xf[i] = (float)xd[i];
    xh[i] = lt__f32_to_bf16(xf[i]);
  }
  int64_t attrs[8];
  memcpy(attrs, a, sizeof attrs);
  ref_pool(xd, n * c, h, w, oh, ow, a, want);
  const lt_dtype dts[3] = {LT_F32, LT_F64, LT_BF16};
  void *xs_of[3] = {xf, xd, xh};
  for (int dt = 0; dt < 3; dt++) {
    memset(got, 0xff, (size_t)yn * 8);
    assert_int_equal(run_pool(dts[dt], xs, xs_of[dt], oh, ow, attrs, 8, got), LT_OK);
    for (int64_t i = 0; i < yn; i++)
      if (got[i] != want[i])
        fail_msg("pool %s element %lld: %lld, expected %lld", lt_dtype_name(dts[dt]), (long long)i,
                 (long long)got[i], (long long)want[i]);
  }
  free(xd), free(xf), free(xh), free(want), free(got), free(r);
}

static void test_pool_hand(void **state) {
  (void)state;
  /* checked with torch 1.13: last NaN of the window; first of equal maxima;
   * all -inf: the window's first real element */
  float a[8] = {1, NAN, 3, NAN, 5, 5, 0, 0};
  int64_t y[3], xs[4] = {1, 1, 2, 4};
  int64_t k24[8] = {2, 4, 1, 1, 0, 0, 1, 1};
  assert_int_equal(run_pool(LT_F32, xs, a, 1, 1, k24, 8, y), LT_OK);
  assert_int_equal(y[0], 3);
  float b[8] = {2, 5, 5, 1, 5, 0, 0, 0};
  int64_t k22[8] = {2, 2, 1, 1, 0, 0, 1, 1};
  assert_int_equal(run_pool(LT_F32, xs, b, 1, 3, k22, 8, y), LT_OK);
  assert_int_equal(y[0], 1), assert_int_equal(y[1], 1), assert_int_equal(y[2], 2);
  double c[25];
  for (int i = 0; i < 25; i++) c[i] = -INFINITY;
  int64_t z[9], xs5[4] = {1, 1, 5, 5}, k3[8] = {3, 3, 2, 2, 1, 1, 1, 1};
  assert_int_equal(run_pool(LT_F64, xs5, c, 3, 3, k3, 8, z), LT_OK); /* ceil mode */
  const int64_t want[9] = {0, 1, 3, 5, 6, 8, 15, 16, 18};
  for (int i = 0; i < 9; i++) assert_int_equal(z[i], want[i]);
  /* 2x2 stride 2 (its own loop): NaN last wins, inf, ties */
  float d[16] = {NAN, 1, INFINITY,  2,         3, NAN, 2,         INFINITY,
                 1,   1, -INFINITY, -INFINITY, 1, 1,   -INFINITY, -INFINITY};
  int64_t xs4[4] = {1, 1, 4, 4}, q[8] = {2, 2, 2, 2, 0, 0, 1, 1}, w4[4];
  assert_int_equal(run_pool(LT_F32, xs4, d, 2, 2, q, 8, w4), LT_OK);
  assert_int_equal(w4[0], 5), assert_int_equal(w4[1], 2), assert_int_equal(w4[2], 8),
      assert_int_equal(w4[3], 10);
}

static void test_pool_shapes(void **state) {
  (void)state;
  static const struct {
    int64_t n, c, h, w, a[8];
    bool ceil_mode;
  } cases[] = {
      {2, 3, 8, 8, {2, 2, 2, 2, 0, 0, 1, 1}, false},   /* the common case */
      {2, 3, 9, 7, {2, 2, 2, 2, 0, 0, 1, 1}, false},   /* odd: a row and column left over */
      {2, 3, 9, 7, {2, 2, 2, 2, 0, 0, 1, 1}, true},    /* ceil: partial last windows */
      {1, 2, 10, 11, {3, 3, 2, 2, 1, 1, 1, 1}, false}, /* padding */
      {1, 2, 10, 11, {3, 3, 2, 2, 1, 1, 1, 1}, true},
      {3, 1, 12, 9, {3, 2, 1, 2, 2, 1, 2, 3}, false}, /* dilation, uneven everything */
      {3, 1, 12, 9, {3, 2, 3, 2, 2, 1, 2, 3}, true},
      {1, 1, 5, 5, {5, 5, 1, 1, 2, 2, 1, 1}, false}, /* windows as big as the input */
      {1, 1, 1, 1, {1, 1, 1, 1, 0, 0, 1, 1}, false},
      {4, 64, 28, 28, {2, 2, 2, 2, 0, 0, 1, 1}, false}, /* big enough for the pool */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_pool(cases[i].n, cases[i].c, cases[i].h, cases[i].w, cases[i].a, cases[i].ceil_mode,
               NULL);
  /* NaN and infinities sprinkled over a padded, dilated case and the 2x2 one */
  double v[2 * 9 * 10];
  float *r = rnd(180, 9);
  for (int i = 0; i < 180; i++)
    v[i] = r[i] > 0.7f ? NAN : r[i] > 0.4f ? INFINITY : r[i] < -0.6f ? -INFINITY : floor(r[i] * 2);
  free(r);
  check_pool(2, 1, 9, 10, (const int64_t[8]){3, 3, 2, 2, 1, 1, 2, 2}, true, v);
  check_pool(2, 1, 9, 10, (const int64_t[8]){2, 2, 2, 2, 0, 0, 1, 1}, true, v);
  check_pool(1, 2, 9, 10, (const int64_t[8]){2, 2, 2, 2, 0, 0, 1, 1}, false, v);
  /* rows of 9 windows: two blocks of four lanes and an overlapping last one */
  check_pool(2, 1, 4, 18, (const int64_t[8]){2, 2, 2, 2, 0, 0, 1, 1}, false, v);
}

static void test_pool_bad(void **state) {
  (void)state;
  float x[36] = {0};
  int64_t xs[4] = {1, 1, 6, 6}, y[64];
  int64_t good[8] = {2, 2, 2, 2, 0, 0, 1, 1};
  assert_int_equal(run_pool(LT_F32, xs, x, 3, 3, good, 8, y), LT_OK);
  assert_int_equal(run_pool(LT_F32, xs, x, 3, 3, good, 7, y), DECLINE); /* attribute count */
  assert_int_equal(run_pool(LT_F32, xs, x, 4, 3, good, 8, y), DECLINE); /* OH */
  assert_int_equal(run_pool(LT_I32, xs, x, 3, 3, good, 8, y), DECLINE); /* dtype */
  int64_t bad[][8] = {
      {0, 2, 2, 2, 0, 0, 1, 1}, {2, 2, 0, 2, 0, 0, 1, 1},         {2, 2, 2, 2, -1, 0, 1, 1},
      {2, 2, 2, 2, 0, 0, 0, 1}, {2, 2, 2, 2, 0, 0, 1, 1LL << 40},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(run_pool(LT_F32, xs, x, 3, 3, bad[i], 8, y), DECLINE);
  /* a window of padding only (kernel 1, padding 1) has index -1, as in ref */
  int64_t pad_only[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  assert_int_equal(run_pool(LT_F32, xs, x, 8, 8, pad_only, 8, y), LT_OK);
  assert_int_equal(y[0], -1), assert_int_equal(y[9], 0), assert_int_equal(y[63], -1);
}

/* ---- plane gather and scatter (max_pool2d's values and their gradient) ------------------ */

/* POOL_GATHER (v [n, c, h, w] -> [n, c, per]) or POOL_SCATTER_ADD ([n, c,
 * per] -> [n, c, h, w]) through idx on buffers made here. */
static int run_planes(bool gather, lt_dtype dt, int64_t n, int64_t c, int64_t h, int64_t w,
                      int64_t per, const int64_t *idx, const void *src, void *dst) {
  int64_t big[4] = {n, c, h, w}, small[4] = {n, c, per, 1};
  lt_buffer bb, ib, sb;
  mkbuf(&bb, dt, big, gather ? (void *)src : dst);
  mkbuf(&ib, LT_I64, small, (void *)idx);
  mkbuf(&sb, dt, small, gather ? dst : (void *)src);
  ib.ndim = sb.ndim = 3;
  lt_instr ins;
  mkins(&ins, dt, gather ? small : big, 2, NULL, 0);
  ins.ndim = gather ? 3 : 4;
  ins.op = gather ? LT_OP_POOL_GATHER : LT_OP_POOL_SCATTER_ADD;
  lt_buffer *in[2] = {gather ? &bb : &sb, &ib};
  return gather ? lt__cpu_pool_gather(&ins, &sb, in) : lt__cpu_pool_scatter_add(&ins, &bb, in);
}

/* Against plain loops: the gather copies, the scatter sums each position's
 * terms in double in index order and rounds once (ref's rule); planes with
 * and without repeated indices, -0.0 (0 + -0 is +0), both dtypes, and a
 * size that runs on the pool. */
static void test_pool_planes(void **state) {
  (void)state;
  const int64_t n = 16, c = 32, h = 6, w = 5, hw = 30, per = 12, planes = n * c;
  int64_t *idx = malloc((size_t)(planes * per) * sizeof *idx);
  float *v = rnd(planes * hw, 11), *g = rnd(planes * per, 12);
  float *got = malloc((size_t)(planes * hw) * sizeof *got);
  double *vd = malloc((size_t)(planes * hw) * sizeof *vd),
         *gd = malloc((size_t)(planes * per) * sizeof *gd);
  double *gotd = malloc((size_t)(planes * hw) * sizeof *gotd), *acc = malloc(sizeof(double) * 30);
  uint32_t s = 5;
  for (int64_t q = 0; q < planes; q++)
    for (int64_t i = 0; i < per; i++) {
      s = s * 1664525u + 1013904223u;
      /* even planes: distinct indices (2 i + 1 or 2 i); odd: random, repeats */
      idx[q * per + i] = q % 2 == 0 ? 2 * i + (s >> 31) : (int64_t)((s >> 8) % (uint32_t)hw);
    }
  for (int64_t i = 0; i < planes * per; i++) {
    g[i] *= 1e3f; /* sums of repeats round differently in f32 */
    if (i % 7 == 0) g[i] = -0.0f;
    gd[i] = g[i];
  }
  for (int64_t i = 0; i < planes * hw; i++) vd[i] = v[i];
  /* gather */
  assert_int_equal(run_planes(true, LT_F32, n, c, h, w, per, idx, v, got), LT_OK);
  assert_int_equal(run_planes(true, LT_F64, n, c, h, w, per, idx, vd, gotd), LT_OK);
  for (int64_t q = 0; q < planes; q++)
    for (int64_t i = 0; i < per; i++) {
      assert_true(got[q * per + i] == v[q * hw + idx[q * per + i]]);
      assert_true(gotd[q * per + i] == vd[q * hw + idx[q * per + i]]);
    }
  /* scatter */
  for (int dt = 0; dt < 2; dt++) {
    if (dt)
      assert_int_equal(run_planes(false, LT_F64, n, c, h, w, per, idx, gd, gotd), LT_OK);
    else
      assert_int_equal(run_planes(false, LT_F32, n, c, h, w, per, idx, g, got), LT_OK);
    for (int64_t q = 0; q < planes; q++) {
      for (int64_t e = 0; e < hw; e++) acc[e] = 0;
      for (int64_t i = 0; i < per; i++) acc[idx[q * per + i]] += gd[q * per + i];
      for (int64_t e = 0; e < hw; e++) {
        double want = dt ? acc[e] : (double)(float)acc[e],
               have = dt ? gotd[q * hw + e] : got[q * hw + e];
        if (memcmp(&want, &have, sizeof want) != 0)
          fail_msg("%s plane %lld element %lld: %.9g, expected %.9g", dt ? "f64" : "f32",
                   (long long)q, (long long)e, have, want);
      }
    }
  }
  /* bf16: the gather copies the bits (a NaN as ref's quiet 0x7FC0), the
   * scatter rounds ref's double sums once */
  uint16_t *vh = malloc((size_t)(planes * hw) * 2), *gh = malloc((size_t)(planes * per) * 2),
           *goth = malloc((size_t)(planes * hw) * 2);
  for (int64_t i = 0; i < planes * hw; i++) vh[i] = lt__f32_to_bf16(v[i]);
  vh[idx[3]] = 0x7FC1; /* a NaN with a payload, read by plane 0's element 3 */
  for (int64_t i = 0; i < planes * per; i++) gh[i] = lt__f32_to_bf16(g[i]);
  assert_int_equal(run_planes(true, LT_BF16, n, c, h, w, per, idx, vh, goth), LT_OK);
  for (int64_t q = 0; q < planes; q++)
    for (int64_t i = 0; i < per; i++) {
      uint16_t src = vh[q * hw + idx[q * per + i]];
      assert_int_equal(goth[q * per + i], src == 0x7FC1 ? 0x7FC0 : src);
    }
  assert_int_equal(run_planes(false, LT_BF16, n, c, h, w, per, idx, gh, goth), LT_OK);
  for (int64_t q = 0; q < planes; q++) {
    for (int64_t e = 0; e < hw; e++) acc[e] = 0;
    for (int64_t i = 0; i < per; i++) acc[idx[q * per + i]] += lt__bf16_to_f32(gh[q * per + i]);
    for (int64_t e = 0; e < hw; e++)
      if (goth[q * hw + e] != lt__f32_to_bf16((float)acc[e]))
        fail_msg("bf16 plane %lld element %lld: %#x, expected %#x", (long long)q, (long long)e,
                 goth[q * hw + e], lt__f32_to_bf16((float)acc[e]));
  }
  free(vh), free(gh), free(goth);
  /* an index outside its plane, a bad shape: declined */
  idx[5 * per + 3] = hw;
  assert_int_equal(run_planes(true, LT_F32, n, c, h, w, per, idx, v, got), DECLINE);
  assert_int_equal(run_planes(false, LT_F32, n, c, h, w, per, idx, g, got), DECLINE);
  idx[5 * per + 3] = -1;
  assert_int_equal(run_planes(false, LT_F64, n, c, h, w, per, idx, gd, gotd), DECLINE);
  idx[5 * per + 3] = 0;
  assert_int_equal(run_planes(true, LT_I32, n, c, h, w, per, idx, v, got), DECLINE);
  free(idx), free(v), free(g), free(got), free(vd), free(gd), free(gotd), free(acc);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--conv-child") == 0) return thread_child(argv[2]);
  g_self = argv[0];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_shapes),        cmocka_unit_test(test_conv_cnn_batch128),
      cmocka_unit_test(test_conv_big_weights),   cmocka_unit_test(test_conv_grad_input_sizes),
      cmocka_unit_test(test_conv_empty),         cmocka_unit_test(test_conv_bad),
      cmocka_unit_test(test_conv_bias),          cmocka_unit_test(test_conv_cache),
      cmocka_unit_test(test_conv_cache_threads), cmocka_unit_test(test_conv_threads),
      cmocka_unit_test(test_pool_hand),          cmocka_unit_test(test_pool_shapes),
      cmocka_unit_test(test_pool_bad),           cmocka_unit_test(test_pool_planes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
