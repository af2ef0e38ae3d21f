/* Dtype names, sizes and promotion. */
#include <math.h>

#include "lt_dtype.h"
#include "lt_tensor.h"

static const char *const kNames[LT_NUM_DTYPES] = {"bool", "i32", "i64", "f32", "f64", "u8", "i8"};
static const size_t kSizes[LT_NUM_DTYPES] = {1, 4, 8, 4, 8, 1, 1};

const char *lt_dtype_name(lt_dtype dt) { return lt__dtype_valid(dt) ? kNames[dt] : "?"; }
size_t lt_dtype_size(lt_dtype dt) { return lt__dtype_valid(dt) ? kSizes[dt] : 0; }

/* Bits of an integer dtype (its rank among integers). */
static int int_bits(lt_dtype dt) { return dt == LT_U8 || dt == LT_I8 ? 8 : dt == LT_I32 ? 32 : 64; }

lt_dtype lt__promote_types(lt_dtype a, lt_dtype b) {
  if (a == b || b == LT_BOOL) return a;
  if (a == LT_BOOL) return b;
  if (lt__is_float(a) || lt__is_float(b)) {
    if (lt__is_float(a) && lt__is_float(b)) return a == LT_F64 || b == LT_F64 ? LT_F64 : LT_F32;
    return lt__is_float(a) ? a : b;
  }
  /* Two integers: the wider one; u8 with i8 needs a signed type above 8 bits. */
  if (int_bits(a) == int_bits(b)) return LT_I32;
  return int_bits(a) > int_bits(b) ? a : b;
}

lt_dtype lt__promote(const lt_tensor *const *ts, int n) {
  /* PyTorch's rule: tensors with dims decide the dtype within their category;
   * 0-d tensors win only when they belong to a higher category. */
  int have_dim = 0, have_zero = 0;
  lt_dtype dim_dt = LT_BOOL, zero_dt = LT_BOOL;
  for (int i = 0; i < n; i++) {
    lt_dtype dt = (lt_dtype)ts[i]->dtype;
    if (ts[i]->ndim > 0) {
      dim_dt = have_dim ? lt__promote_types(dim_dt, dt) : dt;
      have_dim = 1;
    } else {
      zero_dt = have_zero ? lt__promote_types(zero_dt, dt) : dt;
      have_zero = 1;
    }
  }
  if (!have_dim) return zero_dt;
  if (have_zero && lt__dtype_category(zero_dt) > lt__dtype_category(dim_dt)) return zero_dt;
  return dim_dt;
}

int64_t lt__f2i64(double v) {
  if (isnan(v)) return 0;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  return (int64_t)v;
}

int64_t lt__int_wrap(lt_dtype dt, int64_t v) {
  /* Through the unsigned type, whose conversion is defined modulo 2^n; the
   * signed step is two's complement on every compiler this builds with. */
  switch (dt) {
  case LT_U8:
    return (uint8_t)v;
  case LT_I8:
    return (int8_t)(uint8_t)v;
  case LT_I32:
    return (int32_t)(uint32_t)v;
  default:
    return v;
  }
}

double lt__dtype_round(lt_dtype dt, double v) {
  switch (dt) {
  case LT_U8:
  case LT_I8:
    return (double)lt__int_wrap(dt, lt__f2i64(v));
  case LT_BOOL:
    return v != 0;
  case LT_I32:
    return isfinite(v) ? (double)(int32_t)v : 0;
  case LT_I64:
    return isfinite(v) ? (double)(int64_t)v : 0;
  case LT_F32:
    return (double)(float)v;
  default:
    return v;
  }
}
