/* The cpu backend's hand-written kernels (see cpu_native.h).
 *
 * Every kernel reproduces its ref kernel (src/backend/ref) bit for bit:
 *  - copies (concat, pad, gather, index_select, unslice) move elements by
 *    their bytes (ref's gather and index_select pass floats through double,
 *    which changes no value but a signalling NaN, which it quiets); unslice,
 *    whose ref kernel adds each element to 0, turns -0.0 into 0.0 and bool
 *    bytes into 0 / 1 as that sum does;
 *  - sums (cumsum, scatter_add, index_add) accumulate floats in double and
 *    integers with two's complement wrap, each output in ref's order: along
 *    the axis, from index 0 (from the end for a reversed cumsum). Work is
 *    split across columns (the other axes), never along the summed axis, so
 *    the order does not depend on the thread count;
 *  - argmax / argmin take the first extreme, the first NaN if any; argsort
 *    orders (key, index) pairs, NaN last, -0.0 equal to 0.0, as ref's
 *    comparator does, so any correct sort gives ref's permutation;
 *  - normal draws and randperm use core/lt_philox.h as ref does (randperm's
 *    swaps run in ref's order; only the draws, pure functions of their step,
 *    are computed in parallel).
 * Index values are checked before they address memory; a kernel that meets
 * one out of range returns CPU_NATIVE_DECLINED and the fallback reports it.
 * Work runs on the pool through cpu_pool_run, which keeps small jobs on the
 * calling thread; a kernel's context sits behind the slots pointer. */
#include "cpu_native.h"

#include <stdatomic.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_dtype.h"
#include "../../core/lt_philox.h"
#include "../../core/lt_shape.h"
#include "cpu.h"
#include "cpu_attention.h"
#include "cpu_conv.h"

#define DECLINE CPU_NATIVE_DECLINED
/* Columns one task of a line kernel handles: its accumulators stay in L1. */
#define BLOCK 256

/* ---- shared helpers ----------------------------------------------------------------------- */

/* fn over [0, extent) on the pool, ctx behind the slots pointer. */
static void par(cpu_kernel_fn fn, void *ctx, int64_t extent, int64_t unit_cost) {
  void *slots[1] = {ctx};
  cpu_pool_run(fn, slots, extent, unit_cost);
}

static size_t esize(int dt) { return lt_dtype_size((lt_dtype)dt); }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The index dtypes the builders make; others are left to the fallback. */
static bool index_dtype(int dt) { return dt == LT_I32 || dt == LT_I64; }
static inline int64_t index_at(const void *p, bool wide, int64_t i) {
  return wide ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* A shape seen as [outer, n, inner] around one axis. */
typedef struct lines {
  int64_t outer, n, inner;
} lines;

static lines split_at(const int64_t *shape, int nd, int axis) {
  lines p = {1, shape[axis], 1};
  for (int d = 0; d < nd; d++) {
    if (d < axis) p.outer *= shape[d];
    if (d > axis) p.inner *= shape[d];
  }
  return p;
}

static bool same_dims(const lt_buffer *a, const lt_buffer *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

/* The axis in attrs[0] when it is one of rank nd, else -1. */
static int axis_attr(const lt_instr *ins, int nd) {
  if (ins->nattrs < 1 || ins->attrs[0] < 0 || ins->attrs[0] >= nd) return -1;
  return (int)ins->attrs[0];
}

/* Tasks of a line kernel: one per outer index and block of BLOCK columns. */
static int64_t nblocks(int64_t inner) { return (inner + BLOCK - 1) / BLOCK; }

/* A line kernel: columns [j0, j1) of outer index o, its context behind ctx. */
typedef void (*cols_fn)(const void *ctx, int64_t o, int64_t j0, int64_t j1);
typedef struct cols_job {
  cols_fn fn;
  const void *ctx;
  int64_t inner, nblk;
} cols_job;

static void cols_chunk(void **slots, int64_t lo, int64_t hi) {
  const cols_job *j = slots[0];
  for (int64_t t = lo; t < hi; t++) {
    int64_t o = t / j->nblk, j0 = t % j->nblk * BLOCK;
    j->fn(j->ctx, o, j0, min64(j0 + BLOCK, j->inner));
  }
}

/* fn over every outer index of p and block of BLOCK columns, on the pool. */
static void par_cols(cols_fn fn, const void *ctx, const lines *p) {
  cols_job j = {fn, ctx, p->inner, nblocks(p->inner)};
  par(cols_chunk, &j, p->outer * j.nblk, p->n * min64(p->inner, BLOCK));
}

/* n elements of es bytes at p set to 0 (every dtype's zero is all 0 bytes). */
typedef struct zero_ctx {
  char *p;
  size_t es;
} zero_ctx;

static void zero_chunk(void **slots, int64_t lo, int64_t hi) {
  const zero_ctx *c = slots[0];
  memset(c->p + (size_t)lo * c->es, 0, (size_t)(hi - lo) * c->es);
}

static void zero_elems(void *p, size_t es, int64_t n) {
  zero_ctx c = {p, es};
  if (n > 0) par(zero_chunk, &c, n, 1);
}

/* v stored at p in dtype dt, converted as ref_setf converts it. */
static void store_f(void *p, int dt, double v) {
  switch (dt) {
  case LT_BOOL:
    *(uint8_t *)p = v != 0;
    break;
  case LT_U8:
  case LT_I8:
    *(uint8_t *)p = (uint8_t)lt__f2i64(v);
    break;
  case LT_I32: {
    int32_t x = (int32_t)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  case LT_I64: {
    int64_t x = (int64_t)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  case LT_F32: {
    float x = (float)v;
    memcpy(p, &x, sizeof x);
    break;
  }
  default:
    memcpy(p, &v, sizeof v);
    break;
  }
}

/* n copies of the es-byte pattern pat at dst. */
static void fill_elems(char *dst, const unsigned char *pat, size_t es, int64_t n) {
  if (n <= 0) return;
  bool uniform = true;
  for (size_t b = 1; b < es; b++) uniform = uniform && pat[b] == pat[0];
  if (uniform) {
    memset(dst, pat[0], (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, pat, es);
}

/* ---- argmax / argmin ---------------------------------------------------------------------- */

typedef struct argext_ctx {
  const void *x;
  int64_t *out;
  lines p;
  cols_fn line;
} argext_ctx;

#define NAN_F(v) ((v) != (v))
#define NAN_I(v) 0

/* Columns [j0, j1) of outer index o: the first extreme along the axis (ref's
 * row_argext: a NaN, once met, is kept). */
#define ARGEXT(NAME, T, CMP, ISNAN)                                      \
  static void NAME(const void *ctx, int64_t o, int64_t j0, int64_t j1) { \
    const argext_ctx *c = ctx;                                           \
    int64_t n = c->p.n, inner = c->p.inner;                              \
    const T *x = (const T *)c->x + o * n * inner;                        \
    int64_t *out = c->out + o * inner;                                   \
    if (inner == 1) {                                                    \
      int64_t best = 0;                                                  \
      T bv = x[0];                                                       \
      for (int64_t r = 1; r < n && !ISNAN(bv); r++)                      \
        if (ISNAN(x[r]) || x[r] CMP bv) {                                \
          best = r;                                                      \
          bv = x[r];                                                     \
        }                                                                \
      out[0] = best;                                                     \
      return;                                                            \
    }                                                                    \
    T bv[BLOCK];                                                         \
    int64_t best[BLOCK];                                                 \
    for (int64_t j = j0; j < j1; j++) {                                  \
      bv[j - j0] = x[j];                                                 \
      best[j - j0] = 0;                                                  \
    }                                                                    \
    for (int64_t r = 1; r < n; r++) {                                    \
      const T *row = x + r * inner;                                      \
      for (int64_t j = j0; j < j1; j++) {                                \
        T v = row[j], b = bv[j - j0];                                    \
        if (!ISNAN(b) && (ISNAN(v) || v CMP b)) {                        \
          bv[j - j0] = v;                                                \
          best[j - j0] = r;                                              \
        }                                                                \
      }                                                                  \
    }                                                                    \
    for (int64_t j = j0; j < j1; j++) out[j] = best[j - j0];             \
  }

ARGEXT(argmax_f32, float, >, NAN_F)
ARGEXT(argmin_f32, float, <, NAN_F)
ARGEXT(argmax_f64, double, >, NAN_F)
ARGEXT(argmin_f64, double, <, NAN_F)
ARGEXT(argmax_i64, int64_t, >, NAN_I)
ARGEXT(argmin_i64, int64_t, <, NAN_I)
ARGEXT(argmax_i32, int32_t, >, NAN_I)
ARGEXT(argmin_i32, int32_t, <, NAN_I)
ARGEXT(argmax_i8, int8_t, >, NAN_I)
ARGEXT(argmin_i8, int8_t, <, NAN_I)
ARGEXT(argmax_u8, uint8_t, >, NAN_I) /* bool too */
ARGEXT(argmin_u8, uint8_t, <, NAN_I)

static cols_fn argext_for(int dt, bool max) {
  switch (dt) {
  case LT_F32:
    return max ? argmax_f32 : argmin_f32;
  case LT_F64:
    return max ? argmax_f64 : argmin_f64;
  case LT_I64:
    return max ? argmax_i64 : argmin_i64;
  case LT_I32:
    return max ? argmax_i32 : argmin_i32;
  case LT_I8:
    return max ? argmax_i8 : argmin_i8;
  default: /* bool, u8 */
    return max ? argmax_u8 : argmin_u8;
  }
}

static int k_argext(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int axis = axis_attr(ins, x->ndim);
  if (ins->noperands != 1 || axis < 0 || out->dtype != LT_I64) return DECLINE;
  argext_ctx c = {.x = x->data, .out = out->data, .p = split_at(x->shape, x->ndim, axis)};
  if (out->numel != c.p.outer * c.p.inner) return DECLINE;
  if (!out->numel) return LT_OK;
  if (!c.p.n) { /* ref's answer for an empty axis */
    memset(out->data, 0, (size_t)out->numel * sizeof(int64_t));
    return LT_OK;
  }
  c.line = argext_for(x->dtype, ins->op == LT_OP_ARGMAX);
  par_cols(c.line, &c, &c.p);
  return LT_OK;
}

/* ---- cumsum ------------------------------------------------------------------------------- */

typedef struct scan_ctx {
  const void *x;
  void *y;
  lines p;
  bool reverse;
  cols_fn line;
} scan_ctx;

/* Columns [j0, j1) of outer index o: running sums in ACC (ref_scan's double
 * or uint64), each stored converted to T. */
#define SCAN(NAME, T, ACC)                                               \
  static void NAME(const void *ctx, int64_t o, int64_t j0, int64_t j1) { \
    const scan_ctx *c = ctx;                                             \
    int64_t n = c->p.n, inner = c->p.inner;                              \
    const T *x = (const T *)c->x + o * n * inner;                        \
    T *y = (T *)c->y + o * n * inner;                                    \
    if (inner == 1) { /* one contiguous line: its sum in a register */   \
      ACC a = 0;                                                         \
      for (int64_t k = 0; k < n; k++) {                                  \
        int64_t r = c->reverse ? n - 1 - k : k;                          \
        a += (ACC)x[r];                                                  \
        y[r] = (T)a;                                                     \
      }                                                                  \
      return;                                                            \
    }                                                                    \
    ACC acc[BLOCK];                                                      \
    for (int64_t j = j0; j < j1; j++) acc[j - j0] = 0;                   \
    for (int64_t k = 0; k < n; k++) {                                    \
      int64_t r = c->reverse ? n - 1 - k : k;                            \
      const T *xr = x + r * inner;                                       \
      T *yr = y + r * inner;                                             \
      for (int64_t j = j0; j < j1; j++) {                                \
        acc[j - j0] += (ACC)xr[j];                                       \
        yr[j] = (T)acc[j - j0];                                          \
      }                                                                  \
    }                                                                    \
  }

SCAN(scan_f32, float, double)
SCAN(scan_f64, double, double)
SCAN(scan_i64, int64_t, uint64_t)
SCAN(scan_i32, int32_t, uint64_t)

static int k_cumsum(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int axis = axis_attr(ins, x->ndim);
  if (ins->noperands != 1 || ins->nattrs < 2 || axis < 0 || !same_dims(x, out) ||
      x->dtype != out->dtype)
    return DECLINE;
  scan_ctx c = {.x = x->data, .y = out->data, .p = split_at(x->shape, x->ndim, axis)};
  if (!out->numel) return LT_OK;
  c.reverse = ins->attrs[1] != 0;
  switch (x->dtype) {
  case LT_F32:
    c.line = scan_f32;
    break;
  case LT_F64:
    c.line = scan_f64;
    break;
  case LT_I64:
    c.line = scan_i64;
    break;
  case LT_I32:
    c.line = scan_i32;
    break;
  default:
    return DECLINE;
  }
  par_cols(c.line, &c, &c.p);
  return LT_OK;
}

/* ---- argsort ------------------------------------------------------------------------------ */

/* An element as a key whose unsigned order is ref's order (cmp_double /
 * cmp_int), and its index along the axis. */
typedef struct sitem {
  uint64_t key;
  int64_t idx;
} sitem;

static inline uint64_t key_of_double(double d) {
  if (d != d) return UINT64_MAX; /* NaN: above every number; all NaNs equal */
  if (d == 0) d = 0.0;           /* -0.0 equals 0.0 */
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return b >> 63 ? ~b : b | (UINT64_C(1) << 63);
}

static inline uint64_t key_of_int(int64_t v) { return (uint64_t)v ^ (UINT64_C(1) << 63); }

static uint64_t key_at(const void *x, int dt, int64_t i) {
  switch (dt) {
  case LT_F32:
    return key_of_double(((const float *)x)[i]);
  case LT_F64:
    return key_of_double(((const double *)x)[i]);
  case LT_I64:
    return key_of_int(((const int64_t *)x)[i]);
  case LT_I32:
    return key_of_int(((const int32_t *)x)[i]);
  case LT_I8:
    return key_of_int(((const int8_t *)x)[i]);
  default: /* bool, u8 */
    return key_of_int(((const uint8_t *)x)[i]);
  }
}

static void insertion_sort(sitem *a, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    sitem v = a[i];
    int64_t j = i;
    for (; j > 0 && a[j - 1].key > v.key; j--) a[j] = a[j - 1];
    a[j] = v;
  }
}

/* Stable merge of a[0..na) and b[0..nb) into out. */
static void merge(const sitem *a, int64_t na, const sitem *b, int64_t nb, sitem *out) {
  int64_t i = 0, j = 0, k = 0;
  while (i < na && j < nb) out[k++] = b[j].key < a[i].key ? b[j++] : a[i++];
  while (i < na) out[k++] = a[i++];
  while (j < nb) out[k++] = b[j++];
}

/* Stable sort of a[0..n) by key, tmp: n items of scratch. Items enter in
 * index order, so equal keys stay in index order: ref's tie-break. */
static void merge_sort(sitem *a, sitem *tmp, int64_t n) {
  enum { RUN = 32 };
  for (int64_t lo = 0; lo < n; lo += RUN) insertion_sort(a + lo, min64(RUN, n - lo));
  sitem *src = a, *dst = tmp;
  for (int64_t w = RUN; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = min64(lo + w, n), hi = min64(lo + 2 * w, n);
      merge(src + lo, mid - lo, src + mid, hi - mid, dst + lo);
    }
    sitem *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

typedef struct sort_ctx {
  const void *x;
  int dt;
  int64_t *y;
  lines p;
  bool desc;
  atomic_int nomem;
  /* one long line sorted by the pool: parts sorted, then merged in rounds */
  int64_t base, nparts, width;
  sitem *items, *tmp;
  const sitem *src;
  sitem *dst;
} sort_ctx;

static void load_line(const sort_ctx *c, int64_t base, sitem *items, int64_t lo, int64_t hi) {
  uint64_t flip = c->desc ? UINT64_MAX : 0; /* descending: keys reversed, ties still by index */
  for (int64_t j = lo; j < hi; j++) {
    items[j].key = key_at(c->x, c->dt, base + j * c->p.inner) ^ flip;
    items[j].idx = j;
  }
}

static void store_line(const sort_ctx *c, int64_t base, const sitem *items) {
  for (int64_t j = 0; j < c->p.n; j++) c->y[base + j * c->p.inner] = items[j].idx;
}

static int64_t line_base(const sort_ctx *c, int64_t t) {
  return t / c->p.inner * c->p.n * c->p.inner + t % c->p.inner;
}

/* Lines [lo, hi), each sorted by one thread. */
static void sort_lines_chunk(void **slots, int64_t lo, int64_t hi) {
  sort_ctx *c = slots[0];
  size_t bytes = 2 * (size_t)c->p.n * sizeof(sitem);
  sitem *s = lt__malloc(bytes);
  if (!s) {
    atomic_store(&c->nomem, 1);
    return;
  }
  for (int64_t t = lo; t < hi; t++) {
    int64_t base = line_base(c, t);
    load_line(c, base, s, 0, c->p.n);
    merge_sort(s, s + c->p.n, c->p.n);
    store_line(c, base, s);
  }
  lt__free(s, bytes);
}

/* Start of part k of nparts of n (the first n % nparts parts one longer). */
static int64_t part_at(int64_t n, int64_t nparts, int64_t k) {
  if (k >= nparts) return n;
  return n / nparts * k + min64(k, n % nparts);
}

static void sort_parts_chunk(void **slots, int64_t lo, int64_t hi) {
  const sort_ctx *c = slots[0];
  for (int64_t k = lo; k < hi; k++) {
    int64_t a = part_at(c->p.n, c->nparts, k), b = part_at(c->p.n, c->nparts, k + 1);
    load_line(c, c->base, c->items, a, b);
    merge_sort(c->items + a, c->tmp + a, b - a);
  }
}

/* Pairs [lo, hi) of runs of width parts: run 2q merged with run 2q + 1. */
static void merge_parts_chunk(void **slots, int64_t lo, int64_t hi) {
  const sort_ctx *c = slots[0];
  for (int64_t q = lo; q < hi; q++) {
    int64_t k = 2 * q * c->width;
    int64_t a = part_at(c->p.n, c->nparts, k), m = part_at(c->p.n, c->nparts, k + c->width),
            b = part_at(c->p.n, c->nparts, k + 2 * c->width);
    merge(c->src + a, m - a, c->src + m, b - m, c->dst + a);
  }
}

/* One line split into a part per thread, the parts sorted at once, then
 * merged pairwise, every merge of a round at once. */
static int sort_long_line(sort_ctx *c, int64_t base) {
  int64_t n = c->p.n;
  size_t bytes = 2 * (size_t)n * sizeof(sitem);
  sitem *s = lt__malloc(bytes);
  if (!s) return DECLINE;
  c->base = base;
  c->items = s;
  c->tmp = s + n;
  c->nparts = cpu_pool_threads();
  par(sort_parts_chunk, c, c->nparts, n / c->nparts);
  c->src = c->items;
  c->dst = c->tmp;
  for (c->width = 1; c->width < c->nparts; c->width *= 2) {
    int64_t pairs = (c->nparts + 2 * c->width - 1) / (2 * c->width);
    par(merge_parts_chunk, c, pairs, n / pairs);
    const sitem *t = c->src;
    c->src = c->dst;
    c->dst = (sitem *)t;
  }
  store_line(c, base, c->src);
  lt__free(s, bytes);
  return LT_OK;
}

static int k_argsort(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int axis = axis_attr(ins, x->ndim);
  if (ins->noperands != 1 || ins->nattrs < 2 || axis < 0 || out->dtype != LT_I64 ||
      out->numel != x->numel)
    return DECLINE;
  sort_ctx c = {.x = x->data, .dt = x->dtype, .y = out->data, .desc = ins->attrs[1] != 0};
  c.p = split_at(x->shape, x->ndim, axis);
  if (!out->numel) return LT_OK;
  if ((uint64_t)c.p.n > SIZE_MAX / (2 * sizeof(sitem))) return DECLINE;
  atomic_init(&c.nomem, 0);
  int64_t nlines = c.p.outer * c.p.inner;
  /* A few long lines: each split over the threads; else a line per thread. */
  if (cpu_pool_threads() > 1 && nlines < cpu_pool_threads() && c.p.n >= 32768) {
    for (int64_t t = 0; t < nlines; t++)
      if (sort_long_line(&c, line_base(&c, t)) != LT_OK) return DECLINE;
    return LT_OK;
  }
  par(sort_lines_chunk, &c, nlines, c.p.n * 8);
  return atomic_load(&c.nomem) ? DECLINE : LT_OK;
}

/* ---- concat ------------------------------------------------------------------------------- */

typedef struct concat_ctx {
  lt_buffer *const *in;
  char *y;
  size_t es;
  int64_t row;        /* output elements per outer index */
  const int64_t *cum; /* nops + 1 starts of the operands' pieces within a row */
  int nops;
} concat_ctx;

/* The operand whose piece holds position r of a row: the last k with
 * cum[k] <= r (empty operands share their start with the next one). */
static int piece_at(const concat_ctx *c, int64_t r) {
  int lo = 0, hi = c->nops - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (c->cum[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Output elements [lo, hi): runs of one operand's piece, copied at once. */
static void concat_chunk(void **slots, int64_t lo, int64_t hi) {
  const concat_ctx *c = slots[0];
  for (int64_t i = lo; i < hi;) {
    int64_t o = i / c->row, r = i % c->row;
    int k = piece_at(c, r);
    int64_t len = c->cum[k + 1] - c->cum[k], end = min64(o * c->row + c->cum[k + 1], hi);
    const char *src = (const char *)c->in[k]->data + (size_t)(o * len + r - c->cum[k]) * c->es;
    memcpy(c->y + (size_t)i * c->es, src, (size_t)(end - i) * c->es);
    i = end;
  }
}

static int k_concat(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  int nd = out->ndim, axis = axis_attr(ins, nd), nops = ins->noperands;
  if (axis < 0 || nops < 1) return DECLINE;
  int64_t small[33], *cum = small;
  size_t cbytes = (size_t)(nops + 1) * sizeof *cum;
  if (nops >= 33 && !(cum = lt__malloc(cbytes))) return DECLINE;
  lines p = split_at(out->shape, nd, axis);
  bool ok = true;
  cum[0] = 0;
  for (int k = 0; k < nops && ok; k++) {
    const lt_buffer *b = in[k];
    ok = b->ndim == nd && b->dtype == out->dtype;
    for (int d = 0; ok && d < nd; d++) ok = d == axis || b->shape[d] == out->shape[d];
    if (ok) cum[k + 1] = cum[k] + b->shape[axis] * p.inner;
  }
  ok = ok && cum[nops] == p.n * p.inner;
  if (ok && out->numel) {
    concat_ctx c = {in, out->data, esize(out->dtype), p.n * p.inner, cum, nops};
    par(concat_chunk, &c, out->numel, 1);
  }
  if (cum != small) lt__free(cum, cbytes);
  return ok ? LT_OK : DECLINE;
}

/* ---- pad ---------------------------------------------------------------------------------- */

typedef struct pad_ctx {
  const char *x;
  char *y;
  size_t es;
  int nd;
  const int64_t *oshape, *ishape, *pads; /* pads: before / after pairs */
  int64_t L, inL, before;                /* last axis: output and input sizes, before pad */
  unsigned char fill[8];
} pad_ctx;

/* The input row (over all axes but the last) that output row R shows, or -1
 * when R lies in the padding of an outer axis. */
static int64_t pad_in_row(const pad_ctx *c, int64_t R) {
  int64_t irow = 0, mult = 1;
  for (int d = c->nd - 2; d >= 0; d--) {
    int64_t ci = R % c->oshape[d] - c->pads[2 * d];
    R /= c->oshape[d];
    if (ci < 0 || ci >= c->ishape[d]) return -1;
    irow += ci * mult;
    mult *= c->ishape[d];
  }
  return irow;
}

static void pad_chunk(void **slots, int64_t lo, int64_t hi) {
  const pad_ctx *c = slots[0];
  size_t es = c->es;
  for (int64_t i = lo; i < hi;) {
    int64_t R = i / c->L, a = i % c->L, b = min64((R + 1) * c->L, hi) - R * c->L;
    char *yr = c->y + (size_t)(R * c->L) * es;
    int64_t irow = pad_in_row(c, R);
    if (irow < 0) {
      fill_elems(yr + (size_t)a * es, c->fill, es, b - a);
    } else { /* [0, before) pad, [before, before + inL) input, the rest pad */
      int64_t s = c->before, e = c->before + c->inL;
      fill_elems(yr + (size_t)a * es, c->fill, es, min64(b, s) - a);
      int64_t cs = a > s ? a : s, ce = min64(b, e);
      if (ce > cs)
        memcpy(yr + (size_t)cs * es, c->x + (size_t)(irow * c->inL + cs - s) * es,
               (size_t)(ce - cs) * es);
      int64_t fs = a > e ? a : e;
      fill_elems(yr + (size_t)fs * es, c->fill, es, b - fs);
    }
    i = R * c->L + b;
  }
}

static int k_pad(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int nd = out->ndim;
  if (ins->noperands != 1 || x->ndim != nd || ins->nattrs < 2 * nd || x->dtype != out->dtype)
    return DECLINE;
  for (int d = 0; d < nd; d++) {
    int64_t b = ins->attrs[2 * d], a = ins->attrs[2 * d + 1];
    if (b < 0 || a < 0 || out->shape[d] - x->shape[d] != b + a) return DECLINE;
  }
  size_t es = esize(out->dtype);
  if (nd == 0) {
    memcpy(out->data, x->data, es);
    return LT_OK;
  }
  if (!out->numel) return LT_OK;
  pad_ctx c = {.x = x->data,
               .y = out->data,
               .es = es,
               .nd = nd,
               .oshape = out->shape,
               .ishape = x->shape,
               .pads = ins->attrs,
               .L = out->shape[nd - 1],
               .inL = x->shape[nd - 1],
               .before = ins->attrs[2 * (nd - 1)]};
  store_f(c.fill, out->dtype, ins->fattr);
  par(pad_chunk, &c, out->numel, 1);
  return LT_OK;
}

/* ---- gather ------------------------------------------------------------------------------- */

typedef struct gather_ctx {
  const char *a;
  const void *idx;
  bool wide;
  char *y;
  size_t es;
  int nd, axis;
  const int64_t *oshape;
  int64_t astride[LT_MAX_DIMS];
  int64_t L, size; /* output's last axis; a's size along axis */
  atomic_int bad;
} gather_ctx;

/* Offset in a of output row R (all axes but the last), the gather axis left out. */
static int64_t gather_row_base(const gather_ctx *c, int64_t R) {
  int64_t base = 0;
  for (int d = c->nd - 2; d >= 0; d--) {
    int64_t cd = R % c->oshape[d];
    R /= c->oshape[d];
    if (d != c->axis) base += cd * c->astride[d];
  }
  return base;
}

/* Elements [i, end) of one output row starting at column col; false at an
 * index out of range. */
#define GATHER_RUN(NAME, T)                                                                  \
  static bool NAME(const gather_ctx *c, int64_t base, int64_t i, int64_t col, int64_t end) { \
    const T *a = (const T *)c->a;                                                            \
    T *y = (T *)c->y;                                                                        \
    bool last = c->axis == c->nd - 1;                                                        \
    int64_t sax = c->astride[c->axis];                                                       \
    for (; i < end; i++, col++) {                                                            \
      int64_t v = index_at(c->idx, c->wide, i);                                              \
      if (v < 0 || v >= c->size) return false;                                               \
      y[i] = a[base + (last ? v : col + v * sax)];                                           \
    }                                                                                        \
    return true;                                                                             \
  }

GATHER_RUN(gather_run8, uint64_t)
GATHER_RUN(gather_run4, uint32_t)
GATHER_RUN(gather_run1, uint8_t)

static void gather_chunk(void **slots, int64_t lo, int64_t hi) {
  gather_ctx *c = slots[0];
  for (int64_t i = lo; i < hi;) {
    if (atomic_load_explicit(&c->bad, memory_order_relaxed)) return;
    int64_t R = i / c->L, col = i % c->L, end = min64((R + 1) * c->L, hi);
    int64_t base = gather_row_base(c, R);
    bool ok = c->es == 8   ? gather_run8(c, base, i, col, end)
              : c->es == 4 ? gather_run4(c, base, i, col, end)
                           : gather_run1(c, base, i, col, end);
    if (!ok) {
      atomic_store(&c->bad, 1);
      return;
    }
    i = end;
  }
}

static int k_gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *a = in[0], *index = in[1];
  int nd = out->ndim, axis = axis_attr(ins, nd);
  if (ins->noperands != 2 || axis < 0 || a->ndim != nd || a->dtype != out->dtype ||
      index->numel != out->numel || !index_dtype(index->dtype))
    return DECLINE;
  for (int d = 0; d < nd; d++)
    if (d != axis && out->shape[d] > a->shape[d]) return DECLINE;
  if (!out->numel) return LT_OK;
  gather_ctx c = {.a = a->data,
                  .idx = index->data,
                  .wide = index->dtype == LT_I64,
                  .y = out->data,
                  .es = esize(out->dtype),
                  .nd = nd,
                  .axis = axis,
                  .oshape = out->shape,
                  .L = out->shape[nd - 1],
                  .size = a->shape[axis]};
  lt__row_major_strides(a->shape, nd, c.astride);
  atomic_init(&c.bad, 0);
  par(gather_chunk, &c, out->numel, 1);
  return atomic_load(&c.bad) ? DECLINE : LT_OK;
}

/* ---- index_select ------------------------------------------------------------------------- */

typedef struct isel_ctx {
  const char *a;
  const void *idx;
  bool wide;
  char *y;
  size_t es;
  int64_t m, n, inner; /* output [outer, m, inner] from a [outer, n, inner] */
} isel_ctx;

#define ISEL_ONE(NAME, T)                                              \
  static void NAME(const isel_ctx *c, int64_t lo, int64_t hi) {        \
    const T *a = (const T *)c->a;                                      \
    T *y = (T *)c->y;                                                  \
    for (int64_t i = lo; i < hi; i++)                                  \
      y[i] = a[i / c->m * c->n + index_at(c->idx, c->wide, i % c->m)]; \
  }

ISEL_ONE(isel_one8, uint64_t)
ISEL_ONE(isel_one4, uint32_t)
ISEL_ONE(isel_one1, uint8_t)

/* Output elements [lo, hi): runs of one selected slice copied at once (one
 * element each when the axis is the last). */
static void isel_chunk(void **slots, int64_t lo, int64_t hi) {
  const isel_ctx *c = slots[0];
  if (c->inner == 1) {
    if (c->es == 8)
      isel_one8(c, lo, hi);
    else if (c->es == 4)
      isel_one4(c, lo, hi);
    else
      isel_one1(c, lo, hi);
    return;
  }
  int64_t rowlen = c->m * c->inner;
  for (int64_t i = lo; i < hi;) {
    int64_t o = i / rowlen, r = i % rowlen, j = r / c->inner, t = r % c->inner;
    int64_t end = min64(i + c->inner - t, hi), v = index_at(c->idx, c->wide, j);
    memcpy(c->y + (size_t)i * c->es, c->a + (size_t)((o * c->n + v) * c->inner + t) * c->es,
           (size_t)(end - i) * c->es);
    i = end;
  }
}

static int k_index_select(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *a = in[0], *index = in[1];
  int nd = out->ndim, axis = axis_attr(ins, nd);
  if (ins->noperands != 2 || axis < 0 || a->ndim != nd || a->dtype != out->dtype ||
      index->ndim != 1 || index->numel != out->shape[axis] || !index_dtype(index->dtype))
    return DECLINE;
  for (int d = 0; d < nd; d++)
    if (d != axis && out->shape[d] != a->shape[d]) return DECLINE;
  bool wide = index->dtype == LT_I64;
  /* every index first, as ref: an error does not depend on the output's size */
  for (int64_t j = 0; j < index->numel; j++) {
    int64_t v = index_at(index->data, wide, j);
    if (v < 0 || v >= a->shape[axis]) return DECLINE;
  }
  if (!out->numel) return LT_OK;
  lines p = split_at(out->shape, nd, axis);
  isel_ctx c = {a->data,           index->data, wide,           out->data,
                esize(out->dtype), p.n,         a->shape[axis], p.inner};
  par(isel_chunk, &c, out->numel, 1);
  return LT_OK;
}

/* ---- one_hot ------------------------------------------------------------------------------ */

typedef struct onehot_ctx {
  const void *idx;
  bool wide;
  char *y;
  size_t es;
  int64_t nc;
  unsigned char one[8];
  atomic_int bad;
} onehot_ctx;

/* Rows [lo, hi): zeros with a one at the index. */
static void onehot_chunk(void **slots, int64_t lo, int64_t hi) {
  onehot_ctx *c = slots[0];
  size_t row = (size_t)c->nc * c->es;
  memset(c->y + (size_t)lo * row, 0, (size_t)(hi - lo) * row);
  for (int64_t i = lo; i < hi; i++) {
    int64_t v = index_at(c->idx, c->wide, i);
    if (v < 0 || v >= c->nc) {
      atomic_store(&c->bad, 1);
      return;
    }
    memcpy(c->y + (size_t)i * row + (size_t)v * c->es, c->one, c->es);
  }
}

static int k_one_hot(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *index = in[0];
  if (ins->noperands != 1 || ins->nattrs < 1 || ins->attrs[0] <= 0 || !index_dtype(index->dtype))
    return DECLINE;
  int64_t nc = ins->attrs[0];
  if (out->numel % nc || out->numel / nc != index->numel) return DECLINE;
  if (!out->numel) return LT_OK;
  onehot_ctx c = {.idx = index->data,
                  .wide = index->dtype == LT_I64,
                  .y = out->data,
                  .es = esize(out->dtype),
                  .nc = nc};
  store_f(c.one, out->dtype, 1.0); /* ref_seti's 1 in every dtype */
  atomic_init(&c.bad, 0);
  par(onehot_chunk, &c, index->numel, nc);
  return atomic_load(&c.bad) ? DECLINE : LT_OK;
}

/* ---- random: normal draws and randperm ---------------------------------------------------- */

typedef struct rng_ctx {
  uint64_t seed;
  void *y;
  bool f64, wide;
  int64_t first; /* randperm: the step of draws[0] */
  uint64_t *draws;
} rng_ctx;

/* The seed operand (0-d i64), as ref reads it; false when it is not one. */
static bool seed_of(const lt_buffer *s, uint64_t *seed) {
  if (s->dtype != LT_I64 || s->numel < 1) return false;
  *seed = (uint64_t)((const int64_t *)s->data)[0];
  return true;
}

static void normal_chunk(void **slots, int64_t lo, int64_t hi) {
  const rng_ctx *c = slots[0];
  if (c->f64)
    for (int64_t k = lo; k < hi; k++) ((double *)c->y)[k] = lt_philox_normal(c->seed, (uint64_t)k);
  else
    for (int64_t k = lo; k < hi; k++)
      ((float *)c->y)[k] = (float)lt_philox_normal(c->seed, (uint64_t)k);
}

static int k_normal(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  rng_ctx c = {.y = out->data, .f64 = out->dtype == LT_F64};
  if (ins->noperands != 1 || !seed_of(in[0], &c.seed)) return DECLINE;
  if (out->dtype != LT_F32 && out->dtype != LT_F64) return DECLINE;
  par(normal_chunk, &c, out->numel, 16);
  return LT_OK;
}

static void iota_chunk(void **slots, int64_t lo, int64_t hi) {
  const rng_ctx *c = slots[0];
  if (c->wide)
    for (int64_t k = lo; k < hi; k++) ((int64_t *)c->y)[k] = k;
  else
    for (int64_t k = lo; k < hi; k++) ((int32_t *)c->y)[k] = (int32_t)k;
}

/* Fisher-Yates steps first + [lo, hi): each one's draw in [0, step]. */
static void draw_chunk(void **slots, int64_t lo, int64_t hi) {
  const rng_ctx *c = slots[0];
  for (int64_t t = lo; t < hi; t++) {
    uint64_t step = (uint64_t)(c->first + t);
    c->draws[t] = lt_philox_below(c->seed, step, step);
  }
}

/* ref's Fisher-Yates from the end; the draws of a block of steps computed
 * at once (they depend on the step only), the swaps in ref's order. */
static int k_randperm(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  rng_ctx c = {.y = out->data, .wide = out->dtype == LT_I64};
  if (ins->noperands != 1 || !seed_of(in[0], &c.seed)) return DECLINE;
  if (out->dtype != LT_I64 && out->dtype != LT_I32) return DECLINE;
  int64_t n = out->numel;
  enum { STEPS = 1 << 16 };
  size_t bytes = (size_t)min64(n, STEPS) * sizeof(uint64_t);
  if (n > 1 && !(c.draws = lt__malloc(bytes))) return DECLINE;
  par(iota_chunk, &c, n, 1);
  for (int64_t hi = n - 1; hi >= 1; hi -= STEPS) {
    c.first = hi - STEPS + 1 > 1 ? hi - STEPS + 1 : 1;
    par(draw_chunk, &c, hi - c.first + 1, 16);
    for (int64_t i = hi; i >= c.first; i--) {
      int64_t j = (int64_t)c.draws[i - c.first];
      if (c.wide) {
        int64_t *y = c.y, t = y[i];
        y[i] = y[j];
        y[j] = t;
      } else {
        int32_t *y = c.y, t = y[i];
        y[i] = y[j];
        y[j] = t;
      }
    }
  }
  if (c.draws) lt__free(c.draws, bytes);
  return LT_OK;
}

/* ---- scatter_add, index_add --------------------------------------------------------------- */

typedef struct scat_ctx {
  const void *src, *idx;
  bool wide, scatter; /* scatter: an index per element; else one per slice (index_add) */
  void *acc;          /* the output, or double accumulators for an f32 output */
  const int64_t *sshape;
  int nd, axis;
  lines s; /* src around axis */
  int64_t ostride[LT_MAX_DIMS];
  int64_t osize;   /* the output's size along axis */
  bool same_inner; /* src and output agree on the axes after axis */
  cols_fn cols;
  atomic_int bad;
} scat_ctx;

#define ADD_SUM(acc, v) ((acc) += (v))
#define ADD_OR(acc, v) ((acc) |= (v) != 0) /* bool: ref's sum, stored as sum != 0 */

/* src columns [j0, j1) of outer index o added into acc, down the axis in
 * ref's order (each output element's terms in src's flat order). */
#define SCAT(NAME, T, A, ADD)                                                                   \
  static void NAME(const void *ctx, int64_t o, int64_t j0, int64_t j1) {                        \
    const scat_ctx *c = ctx;                                                                    \
    const T *src = c->src;                                                                      \
    A *acc = (A *)c->acc + lt__unravel_offset(o, c->sshape, c->ostride, c->axis);               \
    int64_t n = c->s.n, inner = c->s.inner, sax = c->ostride[c->axis];                          \
    const int64_t *i64 = c->idx;                                                                \
    const int32_t *i32 = c->idx;                                                                \
    for (int64_t k = 0; k < n; k++) {                                                           \
      int64_t row = (o * n + k) * inner;                                                        \
      const T *s = src + row;                                                                   \
      if (!c->same_inner) { /* src narrower than the output after the axis */                   \
        for (int64_t j = j0; j < j1; j++) {                                                     \
          int64_t v = index_at(c->idx, c->wide, c->scatter ? row + j : k);                      \
          int64_t jo = lt__unravel_offset(j, c->sshape + c->axis + 1, c->ostride + c->axis + 1, \
                                          c->nd - c->axis - 1);                                 \
          ADD(acc[v * sax + jo], s[j]);                                                         \
        }                                                                                       \
      } else if (!c->scatter) { /* index_add: one output slice per k */                         \
        A *d = acc + index_at(c->idx, c->wide, k) * sax;                                        \
        for (int64_t j = j0; j < j1; j++) ADD(d[j], s[j]);                                      \
      } else if (c->wide) {                                                                     \
        for (int64_t j = j0; j < j1; j++) ADD(acc[i64[row + j] * sax + j], s[j]);               \
      } else {                                                                                  \
        for (int64_t j = j0; j < j1; j++) ADD(acc[i32[row + j] * sax + j], s[j]);               \
      }                                                                                         \
    }                                                                                           \
  }

SCAT(scat_f32, float, double, ADD_SUM)
SCAT(scat_f64, double, double, ADD_SUM)
SCAT(scat_u64, uint64_t, uint64_t, ADD_SUM) /* i64 */
SCAT(scat_u32, uint32_t, uint32_t, ADD_SUM) /* i32 */
SCAT(scat_u8, uint8_t, uint8_t, ADD_SUM)    /* u8, i8 */
SCAT(scat_bool, uint8_t, uint8_t, ADD_OR)

static cols_fn scat_for(int dt) {
  switch (dt) {
  case LT_F32:
    return scat_f32;
  case LT_F64:
    return scat_f64;
  case LT_I64:
    return scat_u64;
  case LT_I32:
    return scat_u32;
  case LT_BOOL:
    return scat_bool;
  default: /* u8, i8 */
    return scat_u8;
  }
}

/* scatter_add's index values [lo, hi): each within the output's axis. */
static void scat_check_chunk(void **slots, int64_t lo, int64_t hi) {
  scat_ctx *c = slots[0];
  for (int64_t i = lo; i < hi; i++) {
    int64_t v = index_at(c->idx, c->wide, i);
    if (v < 0 || v >= c->osize) {
      atomic_store(&c->bad, 1);
      return;
    }
  }
}

/* f32 results of double accumulators, rounded once as ref_setf does. */
typedef struct round_ctx {
  const double *acc;
  float *y;
} round_ctx;

static void round_chunk(void **slots, int64_t lo, int64_t hi) {
  const round_ctx *c = slots[0];
  for (int64_t i = lo; i < hi; i++) c->y[i] = (float)c->acc[i];
}

/* Whether every position ref's kernel would compute is in range (ref's
 * check_layout and place_*), so that it would not fail. */
static bool scat_positions_ok(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in,
                              scat_ctx *c) {
  const lt_buffer *src = in[0], *index = in[1];
  if (!src->numel) return true; /* no position to check */
  for (int d = 0; d < c->nd; d++)
    if (d != c->axis && src->shape[d] > out->shape[d]) return false;
  if (ins->op == LT_OP_INDEX_ADD) {
    if (src->shape[c->axis] > index->numel) return false;
    for (int64_t k = 0; k < src->shape[c->axis]; k++) {
      int64_t v = index_at(index->data, c->wide, k);
      if (v < 0 || v >= c->osize) return false;
    }
    return true;
  }
  par(scat_check_chunk, c, index->numel, 1);
  return !atomic_load(&c->bad);
}

/* f32 scatter_add along the last axis, src and output alike before it (the
 * gradient of a gather through per-row indices, e.g. max-pool's): each
 * output row sums in a double row of its own, in src's order, and is rounded
 * once, as ref; no output-sized accumulator is allocated and zeroed. */
typedef struct rowscat_ctx {
  const float *src;
  const void *idx;
  bool wide;
  float *out;
  int64_t n, osize; /* src and output row lengths */
  atomic_int bad;
} rowscat_ctx;

static void rowscat_chunk(void **slots, int64_t lo, int64_t hi) {
  rowscat_ctx *c = slots[0];
  size_t bytes = (size_t)c->osize * sizeof(double);
  double *acc = lt__malloc(bytes ? bytes : 1);
  if (!acc) {
    atomic_store(&c->bad, 1);
    return;
  }
  for (int64_t o = lo; o < hi; o++) {
    memset(acc, 0, bytes);
    const float *s = c->src + o * c->n;
    for (int64_t k = 0; k < c->n; k++) acc[index_at(c->idx, c->wide, o * c->n + k)] += s[k];
    float *y = c->out + o * c->osize;
    for (int64_t j = 0; j < c->osize; j++) y[j] = (float)acc[j];
  }
  lt__free(acc, bytes ? bytes : 1);
}

static bool rowscat_applies(const lt_buffer *out, const lt_buffer *src, int axis) {
  if (out->dtype != LT_F32 || axis != out->ndim - 1) return false;
  for (int d = 0; d < axis; d++)
    if (src->shape[d] != out->shape[d]) return false;
  return true;
}

/* Zeros of the output's shape with src's elements added at the indexed
 * positions: checked first, then summed into the output (or, for f32,
 * double accumulators rounded once at the end, as ref). */
static int k_scatter(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *src = in[0], *index = in[1];
  int nd = out->ndim, axis = axis_attr(ins, nd);
  if (ins->noperands != 2 || axis < 0 || src->ndim != nd || src->dtype != out->dtype ||
      !index_dtype(index->dtype))
    return DECLINE;
  bool scatter = ins->op == LT_OP_SCATTER_ADD;
  if (scatter ? index->numel != src->numel : index->ndim != 1) return DECLINE;
  scat_ctx c = {.src = src->data,
                .idx = index->data,
                .wide = index->dtype == LT_I64,
                .scatter = scatter,
                .acc = out->data,
                .sshape = src->shape,
                .nd = nd,
                .axis = axis,
                .s = split_at(src->shape, nd, axis),
                .osize = out->shape[axis],
                .same_inner = true,
                .cols = scat_for(out->dtype)};
  atomic_init(&c.bad, 0);
  lt__row_major_strides(out->shape, nd, c.ostride);
  for (int d = axis + 1; d < nd; d++) c.same_inner = c.same_inner && src->shape[d] == out->shape[d];
  if (!scat_positions_ok(ins, out, in, &c)) return DECLINE;
  if (!out->numel) return LT_OK;
  if (scatter && rowscat_applies(out, src, axis)) {
    rowscat_ctx r = {.src = src->data,
                     .idx = index->data,
                     .wide = c.wide,
                     .out = out->data,
                     .n = src->shape[axis],
                     .osize = out->shape[axis]};
    atomic_init(&r.bad, 0);
    par(rowscat_chunk, &r, out->numel / r.osize, r.n + r.osize);
    return atomic_load(&r.bad) ? DECLINE : LT_OK;
  }
  bool f32 = out->dtype == LT_F32;
  size_t accn = (size_t)out->numel * sizeof(double);
  if (f32 && !(c.acc = lt__malloc(accn))) return DECLINE;
  zero_elems(c.acc, f32 ? sizeof(double) : esize(out->dtype), out->numel);
  par_cols(c.cols, &c, &c.s);
  if (f32) {
    round_ctx r = {c.acc, out->data};
    par(round_chunk, &r, out->numel, 1);
    lt__free(c.acc, accn);
  }
  return LT_OK;
}

/* ---- unslice ------------------------------------------------------------------------------ */

typedef struct unslice_ctx {
  const char *x;
  char *y;
  int dt, nd;
  const int64_t *sshape, *starts, *steps;
  int64_t ostride[LT_MAX_DIMS];
  int64_t L; /* src's last axis */
} unslice_ctx;

/* ref adds each element to a zero: floats lose a -0.0 sign, bools become 0 / 1. */
#define UNSLICE_RUN(NAME, T, FIX)                                                             \
  static void NAME(const unslice_ctx *c, int64_t base, int64_t step, int64_t i0, int64_t n) { \
    const T *x = (const T *)c->x + i0;                                                        \
    T *y = (T *)c->y + base;                                                                  \
    for (int64_t j = 0; j < n; j++) y[j * step] = FIX(x[j]);                                  \
  }

#define FIX_F32(v) ((float)((double)(v) + 0.0))
#define FIX_F64(v) ((v) + 0.0)
#define FIX_BOOL(v) ((uint8_t)((v) != 0))
#define FIX_NONE(v) (v)

UNSLICE_RUN(unslice_f32, float, FIX_F32)
UNSLICE_RUN(unslice_f64, double, FIX_F64)
UNSLICE_RUN(unslice_bool, uint8_t, FIX_BOOL)
UNSLICE_RUN(unslice_8, uint64_t, FIX_NONE)
UNSLICE_RUN(unslice_4, uint32_t, FIX_NONE)
UNSLICE_RUN(unslice_1, uint8_t, FIX_NONE)

static void unslice_row(const unslice_ctx *c, int64_t base, int64_t step, int64_t i0, int64_t n) {
  switch (c->dt) {
  case LT_F32:
    unslice_f32(c, base, step, i0, n);
    break;
  case LT_F64:
    unslice_f64(c, base, step, i0, n);
    break;
  case LT_BOOL:
    unslice_bool(c, base, step, i0, n);
    break;
  case LT_I64:
    unslice_8(c, base, step, i0, n);
    break;
  case LT_I32:
    unslice_4(c, base, step, i0, n);
    break;
  default:
    unslice_1(c, base, step, i0, n);
    break;
  }
}

/* src elements [lo, hi), a row (all axes but the last) at a time. */
static void unslice_chunk(void **slots, int64_t lo, int64_t hi) {
  const unslice_ctx *c = slots[0];
  int last = c->nd - 1;
  for (int64_t i = lo; i < hi;) {
    int64_t R = i / c->L, col = i % c->L, end = min64((R + 1) * c->L, hi), base = 0;
    for (int d = last - 1; d >= 0; d--) {
      base += (c->starts[d] + R % c->sshape[d] * c->steps[d]) * c->ostride[d];
      R /= c->sshape[d];
    }
    base += c->starts[last] + col * c->steps[last];
    unslice_row(c, base, c->steps[last], i, end - i);
    i = end;
  }
}

static int k_unslice(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *src = in[0];
  int nd = out->ndim;
  if (ins->noperands != 1 || src->ndim != nd || ins->nattrs != 2 * nd || src->dtype != out->dtype)
    return DECLINE;
  const int64_t *starts = ins->attrs, *steps = ins->attrs + nd;
  /* every position in range and distinct (ref would fail, or sum duplicates) */
  for (int d = 0; src->numel && d < nd; d++)
    if (starts[d] < 0 || steps[d] < 1 || starts[d] >= out->shape[d] ||
        (out->shape[d] - 1 - starts[d]) / steps[d] < src->shape[d] - 1)
      return DECLINE;
  unslice_ctx c = {.x = src->data,
                   .y = out->data,
                   .dt = out->dtype,
                   .nd = nd,
                   .sshape = src->shape,
                   .starts = starts,
                   .steps = steps,
                   .L = nd ? src->shape[nd - 1] : 1};
  if (!out->numel) return LT_OK;
  zero_elems(out->data, esize(out->dtype), out->numel);
  if (!src->numel) return LT_OK;
  if (nd == 0) {
    unslice_row(&c, 0, 1, 0, 1);
    return LT_OK;
  }
  lt__row_major_strides(out->shape, nd, c.ostride);
  par(unslice_chunk, &c, src->numel, 1);
  return LT_OK;
}

/* ---- lookup ------------------------------------------------------------------------------- */

cpu_native_fn cpu_native_find(int op, int dtype, int in_dtype) {
  if (dtype < 0 || dtype >= LT_NUM_DTYPES || in_dtype < 0 || in_dtype >= LT_NUM_DTYPES) return NULL;
  bool same = dtype == in_dtype, fl = dtype == LT_F32 || dtype == LT_F64;
  switch (op) {
  case LT_OP_ARGMAX:
  case LT_OP_ARGMIN:
    return dtype == LT_I64 ? k_argext : NULL;
  case LT_OP_ARGSORT:
    return dtype == LT_I64 ? k_argsort : NULL;
  case LT_OP_CUMSUM:
    return same && (fl || dtype == LT_I64 || dtype == LT_I32) ? k_cumsum : NULL;
  case LT_OP_CONCAT:
    return same ? k_concat : NULL;
  case LT_OP_PAD:
    return same ? k_pad : NULL;
  case LT_OP_GATHER:
    return same ? k_gather : NULL;
  case LT_OP_INDEX_SELECT:
    return same ? k_index_select : NULL;
  case LT_OP_ONE_HOT:
    return index_dtype(in_dtype) ? k_one_hot : NULL;
  case LT_OP_RNG_NORMAL:
    return fl && in_dtype == LT_I64 ? k_normal : NULL;
  case LT_OP_RANDPERM:
    return (dtype == LT_I64 || dtype == LT_I32) && in_dtype == LT_I64 ? k_randperm : NULL;
  case LT_OP_SCATTER_ADD:
  case LT_OP_INDEX_ADD:
    return same ? k_scatter : NULL;
  case LT_OP_UNSLICE:
    return same ? k_unslice : NULL;
  /* convolutions through oneDNN (f32 only: f64 takes the fallback); not
   * byte-equal to ref, as GEMM (cpu_conv.h) */
  case LT_OP_CONV2D:
  case LT_OP_CONV2D_BIAS:
    return dtype == LT_F32 && same ? cpu_conv2d_fwd : NULL;
  case LT_OP_CONV2D_GRAD_INPUT:
    return dtype == LT_F32 && same ? cpu_conv2d_bwd_data : NULL;
  case LT_OP_CONV2D_GRAD_WEIGHT:
    return dtype == LT_F32 && same ? cpu_conv2d_bwd_weight : NULL;
  case LT_OP_MAX_POOL2D_ARGMAX:
    return dtype == LT_I64 && (in_dtype == LT_F32 || in_dtype == LT_F64) ? cpu_max_pool2d_argmax
                                                                         : NULL;
  /* blocked online softmax (f32 only: f64 takes the fallback); within f32
   * rounding of ref, as GEMM (cpu_attention.h) */
  case LT_OP_ATTENTION:
    return dtype == LT_F32 && same ? cpu_attention : NULL;
  case LT_OP_POOL_GATHER:
  case LT_OP_POOL_SCATTER_ADD:
    return same && fl ? (op == LT_OP_POOL_GATHER ? cpu_pool_gather : cpu_pool_scatter_add) : NULL;
  case LT_OP_ALL_REDUCE:
  case LT_OP_ALL_GATHER:
  case LT_OP_REDUCE_SCATTER:
  case LT_OP_BROADCAST:
  case LT_OP_SHARD:
  case LT_OP_SPMD_ALL_GATHER:
  case LT_OP_SPMD_ALL_REDUCE:
  case LT_OP_SPMD_COPY:
    return same ? cpu_collective : NULL;
  default:
    return NULL;
  }
}

bool cpu_native_has(int op) {
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
    for (int in_dt = 0; in_dt < LT_NUM_DTYPES; in_dt++)
      if (cpu_native_find(op, dt, in_dt)) return true;
  return false;
}
