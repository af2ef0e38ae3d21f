/* cpu kernels of the index ops (ref: ref_index.c): LT_OP_GATHER,
 * LT_OP_INDEX_SELECT and LT_OP_ONE_HOT. Elements move by their bytes (ref's
 * gather and index_select pass floats through double, which changes no value
 * but a signalling NaN, which it quiets). Index values are checked before they
 * address memory; one out of range makes the kernel return
 * CPU_NATIVE_DECLINED, and the fallback reports it. */
#include <stdatomic.h>
#include <string.h>

#include "../../core/lt_shape.h"
#include "cpu_native_kernels.h"

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

int lt__cpu_native_gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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

int lt__cpu_native_index_select(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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
  lt_dtype_elem one;
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
    memcpy(c->y + (size_t)i * row + (size_t)v * c->es, &c->one, c->es);
  }
}

int lt__cpu_native_one_hot(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *index = in[0];
  if (ins->noperands != 1 || ins->nattrs < 1 || ins->attrs[0] <= 0 || !index_dtype(index->dtype))
    return DECLINE;
  if (!lt__dtype_valid(out->dtype)) return no_dtype_loop(ins, out->dtype); /* no 1 to store */
  int64_t nc = ins->attrs[0];
  if (out->numel % nc || out->numel / nc != index->numel) return DECLINE;
  if (!out->numel) return LT_OK;
  onehot_ctx c = {.idx = index->data,
                  .wide = index->dtype == LT_I64,
                  .y = out->data,
                  .es = esize(out->dtype),
                  .nc = nc};
  lt__store_i64(out->dtype, &c.one, 0, 1); /* ref_seti's 1 in every dtype */
  atomic_init(&c.bad, 0);
  par(onehot_chunk, &c, index->numel, nc);
  return atomic_load(&c.bad) ? DECLINE : LT_OK;
}
