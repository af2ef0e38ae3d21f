/* MAX_POOL2D_ARGMAX on the cpu backend (see cpu_conv.h): for each window,
 * the index h * W + w of its largest element in x's plane, the first largest
 * in row-major window order, or the last NaN when the window holds one (the
 * rule `v > max || isnan(v)` from a max of -inf, starting at the window's
 * first real element, as PyTorch's CPU kernel). Padding is never chosen:
 * each window's real rows and columns are worked out once per call, and an
 * instruction with a window of padding only is declined. Exact: values are
 * only compared. Planes (n, c) are split over the pool. The common 2x2
 * stride-2 window without padding or dilation has its own loop. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"
#include "cpu_conv.h"

#define DECLINE CPU_NATIVE_DECLINED
#define DIM_MAX (1LL << 31)

typedef struct pool_job {
  const void *x;
  int64_t *y;
  int64_t h, w, oh, ow, dh, dw;
  const int64_t *hfirst, *hend, *wfirst, *wend; /* per output row / column: real input range */
  bool quad;                                    /* 2x2 windows, stride 2, no padding, dilation 1 */
  bool f64;
} pool_job;

/* The 2x2 windows of one output row, n of them, whose top-left corners are
 * r0[2 i] (r1 is the row below, base the index of r0[0] in the plane). f32
 * runs four windows at a time in vector lanes, choosing by masks instead of
 * branches: which of four neighbours is largest is data (near random for a
 * trained activation), and the mispredicted branches cost more than the
 * loop's memory traffic. The rule is the scalar one, lane by lane: a NaN
 * compares unequal to itself. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4i pick_i(v4i m, v4i v, v4i o) { return (v & m) | (o & ~m); }

static int64_t quad_row_f32(const float *r0, const float *r1, int64_t *y, int64_t n, int64_t base,
                            int64_t W) {
  int64_t i = 0;
  if (W > INT32_MAX - 1) return 0;
  const v4i one = {1, 1, 1, 1}, down = one * (int32_t)W, diag = down + one;
  for (; i < n && n >= 4; i += 4) {
    if (i + 4 > n) i = n - 4; /* the last four again: rewriting a window is harmless */
    const float *p = r0 + 2 * i, *q = r1 + 2 * i;
    v4f a0 = {p[0], p[2], p[4], p[6]}, a1 = {p[1], p[3], p[5], p[7]};
    v4f b0 = {q[0], q[2], q[4], q[6]}, b1 = {q[1], q[3], q[5], q[7]};
    v4f best = a0;
    v4i off = {0, 0, 0, 0};
    v4i t = (a1 > best) | (a1 != a1);
    best = (v4f)pick_i(t, (v4i)a1, (v4i)best);
    off = pick_i(t, one, off);
    t = (b0 > best) | (b0 != b0);
    best = (v4f)pick_i(t, (v4i)b0, (v4i)best);
    off = pick_i(t, down, off);
    t = (b1 > best) | (b1 != b1);
    off = pick_i(t, diag, off);
    for (int k = 0; k < 4; k++) y[i + k] = base + 2 * (i + k) + off[k];
  }
  return n >= 4 ? n : 0;
}

/* One plane of dtype T: the general window loop, or the 2x2 one where the
 * whole window is real (a ceil-mode last row or column is not). */
#define POOL_PLANE(NAME, T, QUAD)                                                           \
  static void NAME(const pool_job *j, const T *x, int64_t *y) {                             \
    int64_t W = j->w;                                                                       \
    for (int64_t oh = 0; oh < j->oh; oh++) {                                                \
      int64_t hf = j->hfirst[oh], he = j->hend[oh], ow = 0;                                 \
      int64_t *yr = y + oh * j->ow;                                                         \
      if (j->quad && he - hf == 2) {                                                        \
        const T *r0 = x + hf * W, *r1 = r0 + W;                                             \
        int64_t nq = j->ow; /* windows wholly inside: all but a ceil-mode last */           \
        while (nq > 0 && j->wend[nq - 1] - j->wfirst[nq - 1] != 2) nq--;                    \
        ow = QUAD(r0, r1, yr, nq, hf * W, W);                                               \
        for (; ow < nq; ow++) {                                                             \
          int64_t c = 2 * ow, idx = hf * W + c;                                             \
          T best = r0[c];                                                                   \
          if (r0[c + 1] > best || isnan(r0[c + 1])) best = r0[c + 1], idx = hf * W + c + 1; \
          if (r1[c] > best || isnan(r1[c])) best = r1[c], idx = (hf + 1) * W + c;           \
          if (r1[c + 1] > best || isnan(r1[c + 1])) idx = (hf + 1) * W + c + 1;             \
          yr[ow] = idx;                                                                     \
        }                                                                                   \
      }                                                                                     \
      for (; ow < j->ow; ow++) {                                                            \
        int64_t wf = j->wfirst[ow], we = j->wend[ow], idx = hf * W + wf;                    \
        T best = -(T)INFINITY;                                                              \
        for (int64_t ih = hf; ih < he; ih += j->dh)                                         \
          for (int64_t iw = wf; iw < we; iw += j->dw) {                                     \
            T v = x[ih * W + iw];                                                           \
            if (v > best || isnan(v)) best = v, idx = ih * W + iw;                          \
          }                                                                                 \
        yr[ow] = idx;                                                                       \
      }                                                                                     \
    }                                                                                       \
  }
/* f64 keeps the scalar 2x2 loop (no model of ours pools in f64) */
#define NO_QUAD(r0, r1, y, n, base, W) 0
POOL_PLANE(plane_f32, float, quad_row_f32)
POOL_PLANE(plane_f64, double, NO_QUAD)

static void pool_chunk(void **slots, int64_t lo, int64_t hi) {
  const pool_job *j = slots[0];
  int64_t in = j->h * j->w, on = j->oh * j->ow;
  for (int64_t p = lo; p < hi; p++) {
    if (j->f64)
      plane_f64(j, (const double *)j->x + p * in, j->y + p * on);
    else
      plane_f32(j, (const float *)j->x + p * in, j->y + p * on);
  }
}

/* PyTorch's pooling_output_shape, floor or ceil mode; -1 when not positive. */
static int64_t pool_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o >= 1 ? o : -1;
}

/* For each of the n outputs along an axis, its window's first real input
 * index and the end of the window's real part; false when a window holds
 * padding only. */
static bool axis_ranges(int64_t n, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                        int64_t *first, int64_t *end) {
  for (int64_t o = 0; o < n; o++) {
    int64_t st = o * s - p, f = st;
    if (f < 0) f += (-f + d - 1) / d * d;
    int64_t e = st + (k - 1) * d + 1;
    if (e > in) e = in;
    if (f >= e) return false;
    first[o] = f;
    end[o] = e;
  }
  return true;
}

int cpu_max_pool2d_argmax(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (!ins || !out || !in || !in[0] || ins->nattrs != 8 || !ins->attrs || ins->noperands != 1 ||
      ins->dtype != LT_I64 || out->dtype != LT_I64 || ins->ndim != 4 || out->ndim != 4)
    return DECLINE;
  const lt_buffer *xb = in[0];
  if ((xb->dtype != LT_F32 && xb->dtype != LT_F64) || xb->ndim != 4) return DECLINE;
  int64_t xn = 1, yn = 1;
  for (int d = 0; d < 4; d++) {
    if (xb->shape[d] < 0 || xb->shape[d] >= DIM_MAX || out->shape[d] < 0 ||
        out->shape[d] >= DIM_MAX || out->shape[d] != ins->shape[d] ||
        __builtin_mul_overflow(xn, xb->shape[d], &xn) ||
        __builtin_mul_overflow(yn, out->shape[d], &yn))
      return DECLINE;
  }
  if (xn != xb->numel || yn != out->numel || (xn && !xb->data) || (yn && !out->data) ||
      out->shape[0] != xb->shape[0] || out->shape[1] != xb->shape[1])
    return DECLINE;
  const int64_t *a = ins->attrs; /* kh, kw, sh, sw, ph, pw, dh, dw */
  for (int i = 0; i < 8; i++)
    if (a[i] < (i == 4 || i == 5 ? 0 : 1) || a[i] >= DIM_MAX) return DECLINE;
  int64_t h = xb->shape[2], w = xb->shape[3], oh = out->shape[2], ow = out->shape[3];
  if ((oh != pool_size(h, a[0], a[2], a[4], a[6], false) &&
       oh != pool_size(h, a[0], a[2], a[4], a[6], true)) ||
      (ow != pool_size(w, a[1], a[3], a[5], a[7], false) &&
       ow != pool_size(w, a[1], a[3], a[5], a[7], true)))
    return DECLINE;
  if (yn == 0) return LT_OK;
  int64_t *r = malloc((size_t)(oh + ow) * 2 * sizeof *r);
  if (!r) return DECLINE;
  pool_job j = {.x = xb->data,
                .y = out->data,
                .h = h,
                .w = w,
                .oh = oh,
                .ow = ow,
                .dh = a[6],
                .dw = a[7],
                .hfirst = r,
                .hend = r + oh,
                .wfirst = r + 2 * oh,
                .wend = r + 2 * oh + ow,
                .f64 = xb->dtype == LT_F64};
  j.quad = a[0] == 2 && a[1] == 2 && a[2] == 2 && a[3] == 2 && a[4] == 0 && a[5] == 0 &&
           a[6] == 1 && a[7] == 1;
  int rc = DECLINE;
  if (axis_ranges(oh, h, a[0], a[2], a[4], a[6], r, r + oh) &&
      axis_ranges(ow, w, a[1], a[3], a[5], a[7], r + 2 * oh, r + 2 * oh + ow)) {
    void *slots[1] = {&j};
    /* a window reads at most min(k, size) rows and columns */
    int64_t win = (a[0] < h ? a[0] : h) * (a[1] < w ? a[1] : w);
    cpu_pool_run(pool_chunk, slots, out->shape[0] * out->shape[1], oh * ow * win);
    rc = LT_OK;
  }
  free(r);
  return rc;
}
