/* cpu kernels of the ops along one axis whose result has the operand's shape
 * (ref: ref_scan.c), bit for bit ref's:
 *  - cumsum accumulates floats in double and integers with two's complement
 *    wrap, along the axis from index 0 (from the end when reversed); work is
 *    split across columns, never along the summed axis, so the order does not
 *    depend on the thread count;
 *  - argsort orders (key, index) pairs, NaN last, -0.0 equal to 0.0, as ref's
 *    comparator does, so any correct sort gives ref's permutation; lines too
 *    long for one task are sorted in parts and merged. */
#include <stdatomic.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "cpu_native_kernels.h"

static bool same_dims(const lt_buffer *a, const lt_buffer *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

typedef struct scan_ctx {
  const void *x;
  void *y;
  lines p;
  bool reverse;
  cols_fn line;
} scan_ctx;

/* Columns [j0, j1) of outer index o: running sums in ACC (lt__ref_scan's double
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

int lt__cpu_native_cumsum(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int axis = axis_attr(ins, x->ndim);
  if (ins->noperands != 1 || ins->nattrs < 2 || axis < 0 || !same_dims(x, out) ||
      x->dtype != out->dtype)
    return DECLINE;
  scan_ctx c = {.x = x->data, .y = out->data, .p = split_at(x->shape, x->ndim, axis)};
  c.reverse = ins->attrs[1] != 0;
  switch ((lt_dtype)x->dtype) {
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
  case LT_BOOL: /* no loop here: the fallback runs them */
  case LT_U8:
  case LT_I8:
  case LT_BF16:
    return DECLINE;
  case LT_NUM_DTYPES:
    break;
  }
  if (!c.line) return no_dtype_loop(ins, x->dtype); /* not a dtype */
  if (!out->numel) return LT_OK;
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

/* x's dtype dt is a table row (lt__cpu_native_argsort checks). */
static uint64_t key_at(const void *x, int dt, int64_t i) {
  switch ((lt_dtype)dt) {
  case LT_F32:
    return key_of_double(((const float *)x)[i]);
  case LT_F64:
    return key_of_double(((const double *)x)[i]);
  case LT_BF16:
    return key_of_double(lt__bf16_to_f32(((const uint16_t *)x)[i]));
  case LT_I64:
    return key_of_int(((const int64_t *)x)[i]);
  case LT_I32:
    return key_of_int(((const int32_t *)x)[i]);
  case LT_I8:
    return key_of_int(((const int8_t *)x)[i]);
  case LT_BOOL:
  case LT_U8:
    return key_of_int(((const uint8_t *)x)[i]);
  case LT_NUM_DTYPES:
    break;
  }
  return 0;
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
  c->nparts = lt__cpu_pool_threads();
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

int lt__cpu_native_argsort(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int axis = axis_attr(ins, x->ndim);
  if (ins->noperands != 1 || ins->nattrs < 2 || axis < 0 || out->dtype != LT_I64 ||
      out->numel != x->numel)
    return DECLINE;
  if (!lt__dtype_valid(x->dtype)) return no_dtype_loop(ins, x->dtype); /* key_at has no case */
  sort_ctx c = {.x = x->data, .dt = x->dtype, .y = out->data, .desc = ins->attrs[1] != 0};
  c.p = split_at(x->shape, x->ndim, axis);
  if (!out->numel) return LT_OK;
  if ((uint64_t)c.p.n > SIZE_MAX / (2 * sizeof(sitem))) return DECLINE;
  atomic_init(&c.nomem, 0);
  int64_t nlines = c.p.outer * c.p.inner;
  /* A few long lines: each split over the threads; else a line per thread. */
  if (lt__cpu_pool_threads() > 1 && nlines < lt__cpu_pool_threads() && c.p.n >= 32768) {
    for (int64_t t = 0; t < nlines; t++)
      if (sort_long_line(&c, line_base(&c, t)) != LT_OK) return DECLINE;
    return LT_OK;
  }
  par(sort_lines_chunk, &c, nlines, c.p.n * 8);
  return atomic_load(&c.nomem) ? DECLINE : LT_OK;
}
