/* Dtype names, sizes and promotion. */
#include <math.h>

#include "lt_dtype.h"
#include "lt_tensor.h"

static const char *const kNames[LT_NUM_DTYPES] = {"bool", "i32", "i64", "f32", "f64"};
static const size_t kSizes[LT_NUM_DTYPES] = {1, 4, 8, 4, 8};

const char *lt_dtype_name(lt_dtype dt) { return lt__dtype_valid(dt) ? kNames[dt] : "?"; }
size_t lt_dtype_size(lt_dtype dt) { return lt__dtype_valid(dt) ? kSizes[dt] : 0; }

lt_dtype lt__promote(const lt_tensor *const *ts, int n) {
  /* PyTorch's rule: tensors with dims decide the dtype within their category;
   * 0-d tensors win only when they belong to a higher category. */
  int have_dim = 0, have_zero = 0;
  lt_dtype dim_dt = LT_BOOL, zero_dt = LT_BOOL;
  for (int i = 0; i < n; i++) {
    lt_dtype dt = (lt_dtype)ts[i]->dtype;
    if (ts[i]->ndim > 0) {
      dim_dt = have_dim ? lt__dtype_max(dim_dt, dt) : dt;
      have_dim = 1;
    } else {
      zero_dt = have_zero ? lt__dtype_max(zero_dt, dt) : dt;
      have_zero = 1;
    }
  }
  if (!have_dim) return zero_dt;
  if (have_zero && lt__dtype_category(zero_dt) > lt__dtype_category(dim_dt)) return zero_dt;
  return dim_dt;
}

double lt__dtype_round(lt_dtype dt, double v) {
  switch (dt) {
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
