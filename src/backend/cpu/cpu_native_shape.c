/* cpu kernels of the shape ops that copy with a layout of their own (ref:
 * ref_shape.c): LT_OP_CONCAT and LT_OP_PAD. Elements move by their bytes, as
 * ref's do; pad's value is stored as ref_setf stores it. */
#include <string.h>

#include "../../core/lt_alloc.h"
#include "cpu_native_kernels.h"

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

int lt__cpu_native_concat(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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
  lt_dtype_elem fill;                    /* the pad value, stored as ref_setf stores it */
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
      fill_elems(yr + (size_t)a * es, (const unsigned char *)&c->fill, es, b - a);
    } else { /* [0, before) pad, [before, before + inL) input, the rest pad */
      int64_t s = c->before, e = c->before + c->inL;
      fill_elems(yr + (size_t)a * es, (const unsigned char *)&c->fill, es, min64(b, s) - a);
      int64_t cs = a > s ? a : s, ce = min64(b, e);
      if (ce > cs)
        memcpy(yr + (size_t)cs * es, c->x + (size_t)(irow * c->inL + cs - s) * es,
               (size_t)(ce - cs) * es);
      int64_t fs = a > e ? a : e;
      fill_elems(yr + (size_t)fs * es, (const unsigned char *)&c->fill, es, b - fs);
    }
    i = R * c->L + b;
  }
}

int lt__cpu_native_pad(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int nd = out->ndim;
  if (ins->noperands != 1 || x->ndim != nd || ins->nattrs < 2 * nd || x->dtype != out->dtype)
    return DECLINE;
  if (!lt__dtype_valid(out->dtype)) return no_dtype_loop(ins, out->dtype); /* no fill value */
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
  lt__store_f64(out->dtype, &c.fill, 0, ins->fattr);
  par(pad_chunk, &c, out->numel, 1);
  return LT_OK;
}
