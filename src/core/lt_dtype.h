/* Dtype facts and PyTorch-style promotion. */
#ifndef LT_DTYPE_H
#define LT_DTYPE_H

#include "lazytensor.h"

static inline bool lt__dtype_valid(int dt) { return dt >= 0 && dt < LT_NUM_DTYPES; }
static inline bool lt__is_float(lt_dtype dt) { return dt == LT_F32 || dt == LT_F64; }
static inline bool lt__is_int(lt_dtype dt) {
  return dt == LT_I32 || dt == LT_I64 || dt == LT_U8 || dt == LT_I8;
}
/* 0 bool, 1 integer, 2 floating */
static inline int lt__dtype_category(lt_dtype dt) {
  return dt == LT_BOOL ? 0 : lt__is_int(dt) ? 1 : 2;
}
/* torch.promote_types(a, b); u8 with i8 gives i32 (torch: int16, not a dtype
 * here). The enum order is not the promotion order (u8, i8 come last). */
lt_dtype lt__promote_types(lt_dtype a, lt_dtype b);

/* Result dtype of an op over n operands: tensors with dims decide within a
 * category; 0-d tensors only raise the category. */
lt_dtype lt__promote(const lt_tensor *const *ts, int n);

/* Converts a double to what an element of dtype dt stores, then back. */
double lt__dtype_round(lt_dtype dt, double v);

/* A float truncated toward zero to int64, saturating at its range, NaN 0:
 * the first step of every float-to-integer conversion (no undefined behaviour). */
int64_t lt__f2i64(double v);
/* v wrapped to the range of integer dtype dt (its low bits, two's complement):
 * how integer arithmetic and conversions to u8 / i8 / i32 overflow. Other
 * dtypes return v. */
int64_t lt__int_wrap(lt_dtype dt, int64_t v);

#endif
