/* MAX_POOL2D_ARGMAX on the cpu backend (see cpu_conv.h): for each window,
 * the index h * W + w of its largest element in x's plane, the first largest
 * in row-major window order, or the last NaN when the window holds one (the
 * rule `v > max || isnan(v)` from a max of -inf, starting at the window's
 * first real element, as PyTorch's CPU kernel). Padding is never chosen:
 * each window's real rows and columns are worked out once per call; a
 * window of padding only gets -1 (as ref). Exact: values are
 * only compared. Planes (n, c) are split over the pool. The common 2x2
 * stride-2 window without padding or dilation has its own loop. A bf16
 * plane is widened to f32 (exactly: the same comparisons, NaN included) and
 * runs the f32 loops. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_conv.h"
#include "../../core/lt_dtype.h"

#define DECLINE CPU_NATIVE_DECLINED
#define DIM_MAX (1LL << 31)

typedef struct pool_job {
  const void *x;
  int64_t *y;
  int64_t h, w, oh, ow, dh, dw;
  const int64_t *hfirst, *hend, *wfirst, *wend; /* per output row / column: real input range */
  bool quad;                                    /* 2x2 windows, stride 2, no padding, dilation 1 */
  int dt;                                       /* x's: f32, f64 or bf16 */
  atomic_int nomem; /* a bf16 plane's f32 copy could not be made: declined */
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
        int64_t wf = j->wfirst[ow], we = j->wend[ow];                                       \
        int64_t idx = hf < he && wf < we ? hf * W + wf : -1; /* -1: padding only */         \
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
  pool_job *j = slots[0];
  int64_t in = j->h * j->w, on = j->oh * j->ow;
  float *wide = NULL; /* a bf16 plane as f32 */
  if (j->dt == LT_BF16 && !(wide = malloc((size_t)(in ? in : 1) * sizeof *wide))) {
    atomic_store(&j->nomem, 1);
    return;
  }
  for (int64_t p = lo; p < hi; p++) {
    if (j->dt == LT_F64) {
      plane_f64(j, (const double *)j->x + p * in, j->y + p * on);
    } else if (j->dt == LT_BF16) {
      const uint16_t *x = (const uint16_t *)j->x + p * in;
      for (int64_t e = 0; e < in; e++) wide[e] = lt__bf16_to_f32(x[e]);
      plane_f32(j, wide, j->y + p * on);
    } else {
      plane_f32(j, (const float *)j->x + p * in, j->y + p * on);
    }
  }
  free(wide);
}

/* PyTorch's pooling_output_shape, floor or ceil mode; -1 when not positive. */
static int64_t pool_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o >= 1 ? o : -1;
}

/* For each of the n outputs along an axis, its window's first real input
 * index and the end of the window's real part (both 0 when the window holds
 * padding only). */
static void axis_ranges(int64_t n, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                        int64_t *first, int64_t *end) {
  for (int64_t o = 0; o < n; o++) {
    int64_t st = o * s - p, f = st;
    if (f < 0) f += (-f + d - 1) / d * d;
    int64_t e = st + (k - 1) * d + 1;
    if (e > in) e = in;
    if (f >= e) f = e = 0;
    first[o] = f;
    end[o] = e;
  }
}

int lt__cpu_max_pool2d_argmax(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (!ins || !out || !in || !in[0] || ins->nattrs != 8 || !ins->attrs || ins->noperands != 1 ||
      ins->dtype != LT_I64 || out->dtype != LT_I64 || ins->ndim != 4 || out->ndim != 4)
    return DECLINE;
  const lt_buffer *xb = in[0];
  if ((xb->dtype != LT_F32 && xb->dtype != LT_F64 && xb->dtype != LT_BF16) || xb->ndim != 4)
    return DECLINE;
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
                .dt = xb->dtype};
  j.quad = a[0] == 2 && a[1] == 2 && a[2] == 2 && a[3] == 2 && a[4] == 0 && a[5] == 0 &&
           a[6] == 1 && a[7] == 1;
  axis_ranges(oh, h, a[0], a[2], a[4], a[6], r, r + oh);
  axis_ranges(ow, w, a[1], a[3], a[5], a[7], r + 2 * oh, r + 2 * oh + ow);
  void *slots[1] = {&j};
  /* a window reads at most min(k, size) rows and columns */
  int64_t win = (a[0] < h ? a[0] : h) * (a[1] < w ? a[1] : w);
  atomic_init(&j.nomem, 0);
  lt__cpu_pool_run(pool_chunk, slots, out->shape[0] * out->shape[1], oh * ow * win);
  free(r);
  return atomic_load(&j.nomem) ? DECLINE : LT_OK;
}

/* ---- POOL_GATHER and POOL_SCATTER_ADD ------------------------------------------------------ */

/* A plane gather or scatter: big [N, C, H, W] (the gather's operand, the
 * scatter's result), idx i64 and small of one shape [N, C, ...] (the
 * gather's result, the scatter's operand). */
typedef struct plane_job {
  const int64_t *idx;
  const void *src;
  void *dst;
  int64_t hw, per; /* a big plane's elements; a small plane's */
  int dt;          /* the values': f32, f64 or bf16 */
  atomic_int bad;  /* an index outside its plane: declined (ref reports it) */
} plane_job;

static bool plane_shapes(const lt_instr *ins, const lt_buffer *big, const lt_buffer *idx,
                         const lt_buffer *small, lt_buffer *out, plane_job *j) {
  if (!ins || !out || !big || !idx || !small || ins->noperands != 2 || ins->nattrs != 0 ||
      big->ndim != 4 || idx->ndim < 2 || idx->ndim != small->ndim || idx->dtype != LT_I64 ||
      (big->dtype != LT_F32 && big->dtype != LT_F64 && big->dtype != LT_BF16) ||
      small->dtype != big->dtype || ins->dtype != out->dtype || ins->ndim != out->ndim)
    return false;
  for (int d = 0; d < out->ndim; d++)
    if (ins->shape[d] != out->shape[d]) return false;
  int64_t bn = 1, sn = 1;
  for (int d = 0; d < 4; d++)
    if (big->shape[d] < 0 || __builtin_mul_overflow(bn, big->shape[d], &bn)) return false;
  for (int d = 0; d < idx->ndim; d++)
    if (idx->shape[d] != small->shape[d] || idx->shape[d] < 0 ||
        __builtin_mul_overflow(sn, idx->shape[d], &sn))
      return false;
  if (bn != big->numel || sn != idx->numel || sn != small->numel ||
      idx->shape[0] != big->shape[0] || idx->shape[1] != big->shape[1] || (bn && !big->data) ||
      (sn && (!idx->data || !small->data)))
    return false;
  int64_t planes = big->shape[0] * big->shape[1];
  *j = (plane_job){.idx = idx->data,
                   .hw = big->shape[2] * big->shape[3],
                   .per = planes ? sn / planes : 0,
                   .dt = big->dtype};
  atomic_init(&j->bad, 0);
  return true;
}

/* ref's gather stores each value through the dtype table: a bf16 NaN comes
 * out as the quiet 0x7FC0, whatever its payload */
#define KEEP(v) (v)
#define BF16_CANON(v) ((uint16_t)(((v)&0x7FFFu) > 0x7F80u ? 0x7FC0u : (v)))
#define GATHER_PLANES(NAME, T, FIX)                        \
  static void NAME(void **slots, int64_t lo, int64_t hi) { \
    plane_job *j = slots[0];                               \
    for (int64_t q = lo; q < hi; q++) {                    \
      const T *x = (const T *)j->src + q * j->hw;          \
      const int64_t *k = j->idx + q * j->per;              \
      T *y = (T *)j->dst + q * j->per;                     \
      uint64_t out_of_plane = 0;                           \
      for (int64_t i = 0; i < j->per; i++) {               \
        uint64_t e = (uint64_t)k[i];                       \
        out_of_plane |= e >= (uint64_t)j->hw;              \
        y[i] = FIX(x[e < (uint64_t)j->hw ? e : 0]);        \
      }                                                    \
      if (out_of_plane) atomic_store(&j->bad, 1);          \
    }                                                      \
  }
GATHER_PLANES(gather_f32, float, KEEP)
GATHER_PLANES(gather_f64, double, KEEP)
GATHER_PLANES(gather_bf16, uint16_t, BF16_CANON)

int lt__cpu_pool_gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  plane_job j;
  if (!in || !plane_shapes(ins, in[0], in ? in[1] : NULL, out, out, &j)) return DECLINE;
  if (out->numel == 0) return LT_OK;
  if (j.hw == 0) return DECLINE; /* every index is out of its (empty) plane */
  j.src = in[0]->data;
  j.dst = out->data;
  void *slots[1] = {&j};
  lt__cpu_pool_run(j.dt == LT_F64    ? gather_f64
                   : j.dt == LT_BF16 ? gather_bf16
                                     : gather_f32,
                   slots, in[0]->shape[0] * in[0]->shape[1], j.per);
  return atomic_load(&j.bad) ? DECLINE : LT_OK;
}

/* f32: each plane's values are stored straight into the zeroed plane (0 + g,
 * as ref's double sum rounds a single term) while a mark per element notes a
 * second hit; a plane with one (overlapping windows) is redone with double
 * sums rounded once, so the result is ref's either way. bf16 does the same
 * through f32 (0 + g rounds as ref's store does; double sums rounded once).
 * f64 sums in the plane itself, in ref's order. */
#define LOAD_F32(v) (v)
#define STORE_F32(x) ((float)(x))
#define LOAD_BF16(v) lt__bf16_to_f32(v)
#define STORE_BF16(x) lt__f32_to_bf16((float)(x))
/* Plane q of T (f32 or bf16) as the comment above; *oop notes an index
 * outside the plane; false when the sums' buffer could not be made. */
#define SCATTER_MARKED(NAME, T, LOAD, STORE)                                                    \
  static bool NAME(const plane_job *j, int64_t q, uint8_t *mark, double **acc, uint64_t *oop) { \
    const int64_t *k = j->idx + q * j->per;                                                     \
    const T *g = (const T *)j->src + q * j->per;                                                \
    T *y = (T *)j->dst + q * j->hw;                                                             \
    uint64_t hw = (uint64_t)j->hw;                                                              \
    memset(y, 0, (size_t)j->hw * sizeof *y);                                                    \
    memset(mark, 0, (size_t)j->hw);                                                             \
    uint8_t again = 0;                                                                          \
    for (int64_t i = 0; i < j->per; i++) {                                                      \
      uint64_t e = (uint64_t)k[i];                                                              \
      *oop |= e >= hw;                                                                          \
      e = e < hw ? e : 0;                                                                       \
      again |= mark[e];                                                                         \
      mark[e] = 1;                                                                              \
      y[e] = STORE(0.0f + LOAD(g[i]));                                                          \
    }                                                                                           \
    if (!again || *oop) return true;                                                            \
    if (!*acc && !(*acc = malloc((size_t)j->hw * sizeof **acc))) return false;                  \
    memset(*acc, 0, (size_t)j->hw * sizeof **acc);                                              \
    for (int64_t i = 0; i < j->per; i++) (*acc)[k[i]] += LOAD(g[i]);                            \
    for (int64_t e = 0; e < j->hw; e++) y[e] = STORE((*acc)[e]);                                \
    return true;                                                                                \
  }
SCATTER_MARKED(scatter_plane_f32, float, LOAD_F32, STORE_F32)
SCATTER_MARKED(scatter_plane_bf16, uint16_t, LOAD_BF16, STORE_BF16)

static void scatter_planes(void **slots, int64_t lo, int64_t hi) {
  plane_job *j = slots[0];
  uint8_t *mark = NULL;
  double *acc = NULL;
  bool f64 = j->dt == LT_F64;
  if (!f64 && !(mark = malloc((size_t)j->hw))) {
    atomic_store(&j->bad, 1);
    return;
  }
  for (int64_t q = lo; q < hi; q++) {
    uint64_t out_of_plane = 0;
    if (f64) {
      const int64_t *k = j->idx + q * j->per;
      uint64_t hw = (uint64_t)j->hw;
      const double *g = (const double *)j->src + q * j->per;
      double *y = (double *)j->dst + q * j->hw;
      memset(y, 0, (size_t)j->hw * sizeof *y);
      for (int64_t i = 0; i < j->per; i++) {
        uint64_t e = (uint64_t)k[i];
        out_of_plane |= e >= hw;
        y[e < hw ? e : 0] += e < hw ? g[i] : 0.0;
      }
    } else if (!(j->dt == LT_BF16 ? scatter_plane_bf16 : scatter_plane_f32)(j, q, mark, &acc,
                                                                            &out_of_plane)) {
      atomic_store(&j->bad, 1);
      break;
    }
    if (out_of_plane) atomic_store(&j->bad, 1);
  }
  free(mark);
  free(acc);
}

int lt__cpu_pool_scatter_add(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  plane_job j;
  if (!in || !plane_shapes(ins, out, in[1], in[0], out, &j)) return DECLINE;
  if (out->numel == 0) return LT_OK;
  if (j.hw == 0 || (j.per && !in[0]->data)) return DECLINE;
  j.src = in[0]->data;
  j.dst = out->data;
  void *slots[1] = {&j};
  lt__cpu_pool_run(scatter_planes, slots, out->shape[0] * out->shape[1], j.hw + j.per);
  return atomic_load(&j.bad) ? DECLINE : LT_OK;
}
