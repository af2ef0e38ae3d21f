/* The dtype table's rows (lt_dtype.h), name lookup and promotion. */
#include <math.h>
#include <string.h>

#include "lt_dtype.h"
#include "lt_tensor.h"

/* A row's limits as int64: a float row takes int64's own (load_i64 saturates there). */
#define I64_LIMIT_BOOL(x, i64) ((int64_t)(x))
#define I64_LIMIT_SINT(x, i64) ((int64_t)(x))
#define I64_LIMIT_UINT(x, i64) ((int64_t)(x))
#define I64_LIMIT_FLOAT(x, i64) (i64)
#define ROW(E, NAME, TORCH, T, KIND, F2I, MIN, MAX, REP) \
  [LT_##E] = {NAME,                                      \
              TORCH,                                     \
              sizeof(T),                                 \
              LT_DK_##KIND,                              \
              LT_F2I_##F2I,                              \
              (double)(MIN),                             \
              (double)(MAX),                             \
              I64_LIMIT_##KIND(MIN, INT64_MIN),          \
              I64_LIMIT_##KIND(MAX, INT64_MAX),          \
              lt__load_f64_##E,                          \
              lt__load_i64_##E,                          \
              lt__store_f64_##E,                         \
              lt__store_i64_##E},
const lt_dtype_info lt__dtype_infos[LT_NUM_DTYPES] = {LT_DTYPE_TABLE(ROW)};
#undef ROW

const char *lt_dtype_name(lt_dtype dt) {
  return lt__dtype_valid(dt) ? lt__dtype_infos[dt].name : "?";
}
size_t lt_dtype_size(lt_dtype dt) { return lt__dtype_valid(dt) ? lt__dtype_infos[dt].size : 0; }

int lt__dtype_from_name(const char *name) {
  for (int dt = 0; name && dt < LT_NUM_DTYPES; dt++)
    if (!strcmp(name, lt__dtype_infos[dt].name) || !strcmp(name, lt__dtype_infos[dt].torch_name))
      return dt;
  return -1;
}

/* Bits of an integer dtype (its rank among integers). */
static size_t int_bits(lt_dtype dt) { return 8 * lt_dtype_size(dt); }

lt_dtype lt__promote_types(lt_dtype a, lt_dtype b) {
  if (a == b || b == LT_BOOL) return a;
  if (a == LT_BOOL) return b;
  if (lt__is_float(a) || lt__is_float(b)) {
    if (lt__is_float(a) && lt__is_float(b)) return lt_dtype_size(a) >= lt_dtype_size(b) ? a : b;
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

int64_t lt__int_wrap(lt_dtype dt, int64_t v) {
  const lt_dtype_info *d = lt__dtype_info(dt);
  return lt__is_int(dt) ? lt__wrap_range(v, d->min_i64, d->max_i64) : v;
}

double lt__dtype_round(lt_dtype dt, double v) {
  const lt_dtype_info *d = lt__dtype_info(dt);
  if (!d) return v;
  /* A non-finite value into a saturating integer dtype reads 0 here (lt_pad_n's
   * value, scalar creation), where CAST gives the dtype's limit. */
  if (d->f2i == LT_F2I_SAT && !isfinite(v)) return 0;
  double elem[2]; /* any row's element fits */
  d->store_f64(elem, 0, v);
  return d->load_f64(elem, 0);
}
