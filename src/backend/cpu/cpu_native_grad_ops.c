/* cpu kernels of the ops autograd makes for the index and slice ops (ref:
 * ref_grad_ops.c): LT_OP_SCATTER_ADD, LT_OP_INDEX_ADD and LT_OP_UNSLICE.
 *  - scatter_add and index_add accumulate floats in double and integers with
 *    two's complement wrap, each output in ref's order (along the axis from
 *    index 0); work is split across columns, never along the summed axis, so
 *    the order does not depend on the thread count. Positions are checked
 *    before anything is written; one out of range makes the kernel return
 *    CPU_NATIVE_DECLINED, and the fallback reports it;
 *  - unslice copies by bytes, but as ref's kernel adds each element to 0 it
 *    turns -0.0 into 0.0 and bool bytes into 0 / 1 as that sum does. */
#include <stdatomic.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_shape.h"
#include "cpu_native_kernels.h"

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

/* The loop of dtype dt; NULL when dt is not a dtype or has no loop here. */
static cols_fn scat_for(int dt) {
  switch ((lt_dtype)dt) {
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
  case LT_U8:
  case LT_I8:
    return scat_u8;
  case LT_BF16: /* no loop here: the fallback runs it */
  case LT_NUM_DTYPES:
    break;
  }
  return NULL;
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
int lt__cpu_native_scatter(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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
  if (!c.cols) return lt__dtype_valid(out->dtype) ? DECLINE : no_dtype_loop(ins, out->dtype);
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

struct unslice_ctx;
/* n src elements from index i0 to output elements base, base + step, ... */
typedef void (*unslice_fn)(const struct unslice_ctx *c, int64_t base, int64_t step, int64_t i0,
                           int64_t n);

typedef struct unslice_ctx {
  const char *x;
  char *y;
  unslice_fn row; /* the copy of the dtype */
  int nd;
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
#define FIX_BF16(v) lt__f32_to_bf16(lt__bf16_to_f32(v) + 0.0f)
#define FIX_BOOL(v) ((uint8_t)((v) != 0))
#define FIX_NONE(v) (v)

UNSLICE_RUN(unslice_f32, float, FIX_F32)
UNSLICE_RUN(unslice_f64, double, FIX_F64)
UNSLICE_RUN(unslice_bf16, uint16_t, FIX_BF16)
UNSLICE_RUN(unslice_bool, uint8_t, FIX_BOOL)
UNSLICE_RUN(unslice_8, uint64_t, FIX_NONE)
UNSLICE_RUN(unslice_4, uint32_t, FIX_NONE)
UNSLICE_RUN(unslice_1, uint8_t, FIX_NONE)

/* The copy of dtype dt; NULL when dt is not a dtype. */
static unslice_fn unslice_for(int dt) {
  switch ((lt_dtype)dt) {
  case LT_F32:
    return unslice_f32;
  case LT_F64:
    return unslice_f64;
  case LT_BOOL:
    return unslice_bool;
  case LT_I64:
    return unslice_8;
  case LT_I32:
    return unslice_4;
  case LT_U8:
  case LT_I8:
    return unslice_1;
  case LT_BF16:
    return unslice_bf16;
  case LT_NUM_DTYPES:
    break;
  }
  return NULL;
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
    c->row(c, base, c->steps[last], i, end - i);
    i = end;
  }
}

int lt__cpu_native_unslice(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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
                   .row = unslice_for(out->dtype),
                   .nd = nd,
                   .sshape = src->shape,
                   .starts = starts,
                   .steps = steps,
                   .L = nd ? src->shape[nd - 1] : 1};
  if (!c.row) return no_dtype_loop(ins, out->dtype);
  if (!out->numel) return LT_OK;
  zero_elems(out->data, esize(out->dtype), out->numel);
  if (!src->numel) return LT_OK;
  if (nd == 0) {
    c.row(&c, 0, 1, 0, 1);
    return LT_OK;
  }
  lt__row_major_strides(out->shape, nd, c.ostride);
  par(unslice_chunk, &c, src->numel, 1);
  return LT_OK;
}
