/* Dtype facts and PyTorch-style promotion. */
#ifndef LT_DTYPE_H
#define LT_DTYPE_H

#include "lazytensor.h"

static inline bool lt__dtype_valid(int dt) { return dt >= 0 && dt < LT_NUM_DTYPES; }
static inline bool lt__is_float(lt_dtype dt) { return dt == LT_F32 || dt == LT_F64; }
static inline bool lt__is_int(lt_dtype dt) { return dt == LT_I32 || dt == LT_I64; }
/* 0 bool, 1 integer, 2 floating */
static inline int lt__dtype_category(lt_dtype dt) {
  return dt == LT_BOOL ? 0 : lt__is_int(dt) ? 1 : 2;
}
static inline lt_dtype lt__dtype_max(lt_dtype a, lt_dtype b) { return a > b ? a : b; }

/* Result dtype of an op over n operands: tensors with dims decide within a
 * category; 0-d tensors only raise the category. */
lt_dtype lt__promote(const lt_tensor *const *ts, int n);

/* Converts a double to what an element of dtype dt stores, then back. */
double lt__dtype_round(lt_dtype dt, double v);

#endif
