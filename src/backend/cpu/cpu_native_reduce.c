/* cpu kernel of LT_OP_ARGMAX / LT_OP_ARGMIN (ref: ref_reduce.c), bit for bit
 * ref's: the first extreme along the axis, the first NaN if any. Work is split
 * across columns (the other axes), never along the reduced axis. */
#include <string.h>

#include "cpu_native_kernels.h"

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

/* The loop of dtype dt; NULL when dt is not a dtype or has no loop here. */
static cols_fn argext_for(int dt, bool max) {
  switch ((lt_dtype)dt) {
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
  case LT_BOOL:
  case LT_U8:
    return max ? argmax_u8 : argmin_u8;
  case LT_BF16: /* no loop here: the fallback runs it */
  case LT_NUM_DTYPES:
    break;
  }
  return NULL;
}

int lt__cpu_native_argext(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *x = in[0];
  int axis = axis_attr(ins, x->ndim);
  if (ins->noperands != 1 || axis < 0 || out->dtype != LT_I64) return DECLINE;
  argext_ctx c = {.x = x->data,
                  .out = out->data,
                  .p = split_at(x->shape, x->ndim, axis),
                  .line = argext_for(x->dtype, ins->op == LT_OP_ARGMAX)};
  if (!c.line) return lt__dtype_valid(x->dtype) ? DECLINE : no_dtype_loop(ins, x->dtype);
  if (out->numel != c.p.outer * c.p.inner) return DECLINE;
  if (!out->numel) return LT_OK;
  if (!c.p.n) { /* ref's answer for an empty axis */
    memset(out->data, 0, (size_t)out->numel * sizeof(int64_t));
    return LT_OK;
  }
  par_cols(c.line, &c, &c.p);
  return LT_OK;
}
