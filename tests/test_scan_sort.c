/* cumsum, sort, argsort and topk (src/ops/op_scan.c, the CUMSUM and ARGSORT
 * rows, src/backend/ref/ref_scan.c, src/autograd/ag_scan.c) against
 * hand-computed values and torch's documented edge cases: dtype promotion,
 * ties (the sort is stable), NaN (the largest), negative dims, 0-d and empty
 * inputs, k = 0, k = size and k out of range; gradients against finite
 * differences. Every case runs on both backends (lt__backend_force); the cpu
 * runs them through the executor's fallback. Also: the new ops survive the
 * persistent cache (the decoders of serialized executables accept them),
 * and their kernels reject malformed instructions (attrs come from those
 * bytes too). */
#include "test_grad_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_buffer.h"

/* t's values equal want exactly (NaN matches NaN), with dtype and shape. */
static void expect(lt_tensor *t, lt_dtype dt, const int64_t *shape, int ndim, const double *want) {
  tu_expect(t, dt, shape, ndim, want, 0.0);
}

/* An empty tensor as device data. Empty cases use data rather than lt_zeros
 * and sync both results of a sort together, so that the cpu executable has
 * no empty temporary: one trips UBSan in cpu_exec.c (arena NULL + offset 0,
 * a bug of the executor outside these ops, seen with lt_concat too). */
static lt_tensor *empty(lt_dtype dt, const int64_t *shape, int ndim) {
  static const double none[1];
  return lt_from_data(CPU0, dt, shape, ndim, none);
}
static void sync2(lt_tensor *v, lt_tensor *i) {
  assert_int_equal(lt_sync((lt_tensor *[]){v, i}, 2, true), LT_OK);
}

/* lt_sort that must succeed. */
static void sort_ok(lt_tensor *a, int dim, bool descending, lt_tensor **v, lt_tensor **i) {
  int rc = lt_sort(a, dim, descending, v, i);
  if (rc != LT_OK) fail_msg("lt_sort: %s", lt_last_error());
}

static void topk_ok(lt_tensor *a, int64_t k, int dim, bool largest, lt_tensor **v, lt_tensor **i) {
  int rc = lt_topk(a, k, dim, largest, v, i);
  if (rc != LT_OK) fail_msg("lt_topk: %s", lt_last_error());
}

/* ---- cumsum ------------------------------------------------------------------------------ */

static void cumsum_values(void) {
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6});
  expect(lt_cumsum(a, 1), LT_F32, SHAPE(2, 3), 2, (double[]){1, 3, 6, 4, 9, 15});
  expect(lt_cumsum(a, -1), LT_F32, SHAPE(2, 3), 2, (double[]){1, 3, 6, 4, 9, 15});
  expect(lt_cumsum(a, 0), LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 3, 5, 7, 9});
  expect(lt_cumsum(a, -2), LT_F32, SHAPE(2, 3), 2, (double[]){1, 2, 3, 5, 7, 9});
  /* rank 3, the middle axis */
  lt_tensor *b = lt_reshape(lt_arange(CPU0, LT_F64, 0, 8, 1), SHAPE(2, 2, 2), 3);
  expect(lt_cumsum(b, 1), LT_F64, SHAPE(2, 2, 2), 3, (double[]){0, 1, 2, 4, 4, 5, 10, 12});
}

static void cumsum_nan_inf(void) {
  lt_tensor *a = tu_f64(SHAPE(4), 1, (double[]){1, NAN, 2, 3});
  expect(lt_cumsum(a, 0), LT_F64, SHAPE(4), 1, (double[]){1, NAN, NAN, NAN});
  lt_tensor *b = tu_f64(SHAPE(4), 1, (double[]){1, INFINITY, -INFINITY, 2});
  expect(lt_cumsum(b, 0), LT_F64, SHAPE(4), 1, (double[]){1, INFINITY, NAN, NAN});
}

/* torch.cumsum: bool and integer inputs accumulate in (and give) i64. */
static void cumsum_dtypes(void) {
  lt_tensor *i = tu_i32(SHAPE(2, 2), 2, (int32_t[]){2147483647, 1, -5, 7});
  expect(lt_cumsum(i, 1), LT_I64, SHAPE(2, 2), 2, (double[]){2147483647, 2147483648.0, -5, 2});
  lt_tensor *b = tu_bool(SHAPE(4), 1, (uint8_t[]){1, 0, 1, 1});
  expect(lt_cumsum(b, 0), LT_I64, SHAPE(4), 1, (double[]){1, 1, 2, 3});
  lt_tensor *u = lt_from_data(CPU0, LT_U8, SHAPE(3), 1, (uint8_t[]){250, 10, 255});
  expect(lt_cumsum(u, 0), LT_I64, SHAPE(3), 1, (double[]){250, 260, 515});
  lt_tensor *s = lt_from_data(CPU0, LT_I8, SHAPE(3), 1, (int8_t[]){-128, -128, 1});
  expect(lt_cumsum(s, 0), LT_I64, SHAPE(3), 1, (double[]){-128, -256, -255});
  /* i64 keeps every bit (a double would round 2^53 + 1) */
  int64_t big[2] = {(int64_t)1 << 53, 1}, got[2];
  lt_tensor *c = lt_cumsum(tu_i64(SHAPE(2), 1, big), 0);
  assert_int_equal(lt_to_data(c, got, sizeof got), LT_OK);
  assert_true(got[1] == ((int64_t)1 << 53) + 1);
  /* torch's dtype= argument is a cast first */
  expect(lt_cumsum(lt_cast(b, LT_F32), 0), LT_F32, SHAPE(4), 1, (double[]){1, 1, 2, 3});
}

static void cumsum_edges(void) {
  lt_tensor *s = lt_scalar(CPU0, LT_F32, 2.5);
  expect(lt_cumsum(s, 0), LT_F32, NULL, 0, (double[]){2.5});
  expect(lt_cumsum(s, -1), LT_F32, NULL, 0, (double[]){2.5});
  expect(lt_cumsum(lt_scalar(CPU0, LT_BOOL, 1), 0), LT_I64, NULL, 0, (double[]){1});
  expect(lt_cumsum(empty(LT_F32, SHAPE(0, 3), 2), 0), LT_F32, SHAPE(0, 3), 2, NULL);
  expect(lt_cumsum(empty(LT_F32, SHAPE(2, 0), 2), 1), LT_F32, SHAPE(2, 0), 2, NULL);
  expect(lt_cumsum(empty(LT_I64, SHAPE(2, 0), 2), 0), LT_I64, SHAPE(2, 0), 2, NULL);
  /* a size-1 axis is the identity */
  lt_tensor *a = tu_f32(SHAPE(1, 3), 2, (float[]){1, 2, 3});
  expect(lt_cumsum(a, 0), LT_F32, SHAPE(1, 3), 2, (double[]){1, 2, 3});

  TU_EXPECT_ERROR(lt_cumsum(a, 2), LT_EINVAL, "lt_cumsum: axis 2 out of range");
  TU_EXPECT_ERROR(lt_cumsum(a, -3), LT_EINVAL, "rank 2");
  TU_EXPECT_ERROR(lt_cumsum(s, 1), LT_EINVAL, "rank 0");
  TU_EXPECT_ERROR(lt_cumsum(NULL, 0), LT_EINVAL, "lt_cumsum");
}

/* ---- sort / argsort ---------------------------------------------------------------------- */

static const float kRows[8] = {3, 1, 2, 1, 0, -1, 5, -1}; /* [2, 4] */

static void sort_values(void) {
  lt_tensor *a = tu_f32(SHAPE(2, 4), 2, kRows), *v, *i;
  sort_ok(a, 1, false, &v, &i);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){1, 1, 2, 3, -1, -1, 0, 5});
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){1, 3, 2, 0, 1, 3, 0, 2});
  /* descending keeps ties in their order too (stable) */
  sort_ok(a, -1, true, &v, &i);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){3, 2, 1, 1, 5, 0, -1, -1});
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){0, 2, 1, 3, 2, 0, 1, 3});
  /* along dim 0: each column */
  sort_ok(a, 0, false, &v, &i);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){0, -1, 2, -1, 3, 1, 5, 1});
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){1, 1, 0, 1, 0, 0, 1, 0});
  sort_ok(a, -2, true, &v, &i);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){3, 1, 5, 1, 0, -1, 2, -1});
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){0, 0, 1, 0, 1, 1, 0, 1});
  /* argsort is sort's indices */
  expect(lt_argsort(a, 1, true), LT_I64, SHAPE(2, 4), 2, (double[]){0, 2, 1, 3, 2, 0, 1, 3});
  expect(lt_argsort(a, 0, false), LT_I64, SHAPE(2, 4), 2, (double[]){1, 1, 0, 1, 0, 0, 1, 0});
}

/* Many equal keys: every group keeps its order (a plain qsort would not). */
static void sort_stable_long(void) {
  enum { N = 1000 };
  int32_t x[N];
  for (int k = 0; k < N; k++) x[k] = (k * 7) % 3;
  for (int desc = 0; desc < 2; desc++) {
    lt_tensor *i = lt_argsort(tu_i32(SHAPE(N), 1, x), 0, desc);
    double *got = tu_values(i);
    for (int k = 1; k < N; k++) {
      int64_t p = (int64_t)got[k - 1], q = (int64_t)got[k];
      bool ordered = desc ? x[p] >= x[q] : x[p] <= x[q];
      if (!ordered || (x[p] == x[q] && p >= q))
        fail_msg("descending %d: position %d: index %lld (%d) then %lld (%d)", desc, k,
                 (long long)p, x[p], (long long)q, x[q]);
    }
    free(got);
  }
}

/* NaN is larger than every number: last ascending, first descending, and
 * NaNs among themselves keep their order. -0.0 and 0.0 are equal. */
static void sort_nan_zero(void) {
  lt_tensor *a = tu_f64(SHAPE(6), 1, (double[]){2, NAN, -INFINITY, NAN, INFINITY, 0}), *v, *i;
  sort_ok(a, 0, false, &v, &i);
  expect(v, LT_F64, SHAPE(6), 1, (double[]){-INFINITY, 0, 2, INFINITY, NAN, NAN});
  expect(i, LT_I64, SHAPE(6), 1, (double[]){2, 5, 0, 4, 1, 3});
  sort_ok(a, 0, true, &v, &i);
  expect(v, LT_F64, SHAPE(6), 1, (double[]){NAN, NAN, INFINITY, 2, 0, -INFINITY});
  expect(i, LT_I64, SHAPE(6), 1, (double[]){1, 3, 4, 0, 5, 2});
  lt_tensor *f = tu_f32(SHAPE(3), 1, (float[]){NAN, 1, NAN});
  sort_ok(f, 0, false, &v, &i);
  expect(i, LT_I64, SHAPE(3), 1, (double[]){1, 0, 2});

  lt_tensor *z = tu_f64(SHAPE(3), 1, (double[]){0.0, -0.0, 0.0});
  for (int desc = 0; desc < 2; desc++) {
    sort_ok(z, 0, desc, &v, &i);
    expect(i, LT_I64, SHAPE(3), 1, (double[]){0, 1, 2});
    double got[3];
    assert_int_equal(lt_to_data(v, got, sizeof got), LT_OK);
    assert_true(!signbit(got[0]) && signbit(got[1]) && !signbit(got[2]));
  }
}

static void sort_dtypes(void) {
  lt_tensor *v, *i;
  /* i64 compares exactly: 2^53 + 1 > 2^53, which doubles cannot tell apart */
  int64_t big[3] = {((int64_t)1 << 53) + 1, (int64_t)1 << 53, -3}, got[3];
  sort_ok(tu_i64(SHAPE(3), 1, big), 0, false, &v, &i);
  expect(i, LT_I64, SHAPE(3), 1, (double[]){2, 1, 0});
  assert_int_equal(lt_to_data(v, got, sizeof got), LT_OK);
  assert_true(got[0] == -3 && got[1] == big[1] && got[2] == big[0]);

  sort_ok(tu_i32(SHAPE(3), 1, (int32_t[]){5, -2, 7}), 0, true, &v, &i);
  expect(v, LT_I32, SHAPE(3), 1, (double[]){7, 5, -2});
  expect(i, LT_I64, SHAPE(3), 1, (double[]){2, 0, 1});

  lt_tensor *b = tu_bool(SHAPE(5), 1, (uint8_t[]){1, 0, 1, 0, 0});
  sort_ok(b, 0, false, &v, &i);
  expect(v, LT_BOOL, SHAPE(5), 1, (double[]){0, 0, 0, 1, 1});
  expect(i, LT_I64, SHAPE(5), 1, (double[]){1, 3, 4, 0, 2});
  sort_ok(b, 0, true, &v, &i);
  expect(i, LT_I64, SHAPE(5), 1, (double[]){0, 2, 1, 3, 4});

  /* u8 is unsigned (200 > 3), i8 signed */
  lt_tensor *u = lt_from_data(CPU0, LT_U8, SHAPE(3), 1, (uint8_t[]){200, 3, 255});
  sort_ok(u, 0, false, &v, &i);
  expect(v, LT_U8, SHAPE(3), 1, (double[]){3, 200, 255});
  expect(i, LT_I64, SHAPE(3), 1, (double[]){1, 0, 2});
  lt_tensor *s = lt_from_data(CPU0, LT_I8, SHAPE(3), 1, (int8_t[]){-100, 3, 127});
  sort_ok(s, 0, true, &v, &i);
  expect(v, LT_I8, SHAPE(3), 1, (double[]){127, 3, -100});
}

static void sort_edges(void) {
  lt_tensor *v, *i;
  sort_ok(lt_scalar(CPU0, LT_F32, 4), 0, false, &v, &i);
  expect(v, LT_F32, NULL, 0, (double[]){4});
  expect(i, LT_I64, NULL, 0, (double[]){0});
  sort_ok(empty(LT_F32, SHAPE(2, 0), 2), 1, true, &v, &i);
  sync2(v, i);
  expect(v, LT_F32, SHAPE(2, 0), 2, NULL);
  expect(i, LT_I64, SHAPE(2, 0), 2, NULL);
  sort_ok(empty(LT_I32, SHAPE(0, 3), 2), 1, false, &v, &i);
  sync2(v, i);
  expect(v, LT_I32, SHAPE(0, 3), 2, NULL);
  expect(i, LT_I64, SHAPE(0, 3), 2, NULL);

  /* one output only */
  lt_tensor *a = tu_f32(SHAPE(2, 4), 2, kRows);
  v = i = NULL;
  sort_ok(a, 1, false, &v, NULL);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){1, 1, 2, 3, -1, -1, 0, 5});
  sort_ok(a, 1, false, NULL, &i);
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){1, 3, 2, 0, 1, 3, 0, 2});
}

/* A failed call returns its status, sets both outputs to NULL and leaves no
 * tensor behind. */
static void sort_errors(void) {
  lt_tensor *a = tu_f32(SHAPE(2, 4), 2, kRows), *s = lt_scalar(CPU0, LT_F32, 1);
  int64_t live = lt_device_live_tensors(CPU0);
  lt_tensor *v = a, *i = a;
  lt_clear_error();
  assert_int_equal(lt_sort(a, 2, false, &v, &i), LT_EINVAL);
  assert_null(v);
  assert_null(i);
  tu_expect_substr(lt_last_error(), "lt_sort: axis 2 out of range for a tensor of rank 2");
  v = i = a;
  assert_int_equal(lt_sort(s, 1, false, &v, &i), LT_EINVAL);
  assert_null(v);
  assert_null(i);
  tu_expect_substr(lt_last_error(), "rank 0");
  assert_int_equal(lt_sort(a, 0, false, NULL, NULL), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_sort: values and indices are both NULL");
  v = a;
  assert_true(lt_sort(NULL, 0, false, &v, NULL) < 0);
  assert_null(v);
  tu_expect_substr(lt_last_error(), "lt_sort");
  assert_int_equal(lt_device_live_tensors(CPU0), live);
  TU_EXPECT_ERROR(lt_argsort(a, -3, false), LT_EINVAL, "lt_argsort");
}

/* ---- topk -------------------------------------------------------------------------------- */

static void topk_values(void) {
  lt_tensor *a = tu_f32(SHAPE(2, 4), 2, kRows), *v, *i;
  topk_ok(a, 2, 1, true, &v, &i);
  expect(v, LT_F32, SHAPE(2, 2), 2, (double[]){3, 2, 5, 0});
  expect(i, LT_I64, SHAPE(2, 2), 2, (double[]){0, 2, 2, 0});
  topk_ok(a, 2, -1, false, &v, &i); /* ties: the first ones, in order */
  expect(v, LT_F32, SHAPE(2, 2), 2, (double[]){1, 1, -1, -1});
  expect(i, LT_I64, SHAPE(2, 2), 2, (double[]){1, 3, 1, 3});
  /* k = size: the whole sort */
  topk_ok(a, 4, 1, true, &v, &i);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){3, 2, 1, 1, 5, 0, -1, -1});
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){0, 2, 1, 3, 2, 0, 1, 3});
  /* k = 0: empty along dim */
  topk_ok(a, 0, 1, true, &v, &i);
  sync2(v, i);
  expect(v, LT_F32, SHAPE(2, 0), 2, NULL);
  expect(i, LT_I64, SHAPE(2, 0), 2, NULL);
  /* along dim 0 */
  lt_tensor *c = tu_f32(SHAPE(3, 2), 2, (float[]){1, 6, 5, 2, 3, 4});
  topk_ok(c, 1, 0, true, &v, &i);
  expect(v, LT_F32, SHAPE(1, 2), 2, (double[]){5, 6});
  expect(i, LT_I64, SHAPE(1, 2), 2, (double[]){1, 0});
  topk_ok(c, 2, -2, false, &v, &i);
  expect(v, LT_F32, SHAPE(2, 2), 2, (double[]){1, 2, 3, 4});
  expect(i, LT_I64, SHAPE(2, 2), 2, (double[]){0, 1, 2, 2});
}

static void topk_dtypes_nan(void) {
  lt_tensor *v, *i;
  lt_tensor *f = tu_f64(SHAPE(3), 1, (double[]){1, NAN, 3});
  topk_ok(f, 1, 0, true, &v, &i); /* NaN is the largest */
  expect(v, LT_F64, SHAPE(1), 1, (double[]){NAN});
  expect(i, LT_I64, SHAPE(1), 1, (double[]){1});
  topk_ok(f, 2, 0, false, &v, &i);
  expect(v, LT_F64, SHAPE(2), 1, (double[]){1, 3});
  expect(i, LT_I64, SHAPE(2), 1, (double[]){0, 2});
  topk_ok(tu_i64(SHAPE(3), 1, (int64_t[]){4, 9, -1}), 2, 0, true, &v, &i);
  expect(v, LT_I64, SHAPE(2), 1, (double[]){9, 4});
  expect(i, LT_I64, SHAPE(2), 1, (double[]){1, 0});
  topk_ok(tu_bool(SHAPE(3), 1, (uint8_t[]){0, 1, 1}), 1, 0, true, &v, &i);
  expect(v, LT_BOOL, SHAPE(1), 1, (double[]){1});
  expect(i, LT_I64, SHAPE(1), 1, (double[]){1});
}

static void topk_edges_errors(void) {
  lt_tensor *v, *i;
  topk_ok(lt_scalar(CPU0, LT_F32, 7), 1, -1, true, &v, &i);
  expect(v, LT_F32, NULL, 0, (double[]){7});
  expect(i, LT_I64, NULL, 0, (double[]){0});
  topk_ok(empty(LT_F32, SHAPE(0), 1), 0, 0, true, &v, &i);
  sync2(v, i);
  expect(v, LT_F32, SHAPE(0), 1, NULL);
  expect(i, LT_I64, SHAPE(0), 1, NULL);

  lt_tensor *a = tu_f32(SHAPE(2, 4), 2, kRows), *s = lt_scalar(CPU0, LT_F32, 7);
  int64_t live = lt_device_live_tensors(CPU0);
  v = i = a;
  lt_clear_error();
  assert_int_equal(lt_topk(a, 5, 1, true, &v, &i), LT_EINVAL);
  assert_null(v);
  assert_null(i);
  tu_expect_substr(lt_last_error(),
                   "lt_topk: k = 5 out of range [0, 4] for axis 1 of shape [2, 4]");
  assert_int_equal(lt_topk(a, -1, 0, true, &v, NULL), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "k = -1 out of range [0, 2]");
  assert_int_equal(lt_topk(a, 1, 2, true, &v, &i), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_topk: axis 2 out of range");
  assert_int_equal(lt_topk(s, 0, 0, true, &v, &i), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "k = 0 out of range [1, 1]");
  assert_int_equal(lt_topk(s, 2, 0, true, &v, &i), LT_EINVAL);
  assert_int_equal(lt_topk(a, 1, 0, true, NULL, NULL), LT_EINVAL);
  assert_int_equal(lt_device_live_tensors(CPU0), live);
}

/* ---- gradients --------------------------------------------------------------------------- */

typedef struct axis_arg {
  int dim, k;
  bool flag;
} axis_arg;

static lt_tensor *f_cumsum(lt_tensor *const *in, void *ud) {
  const axis_arg *p = ud;
  return lt_cumsum(in[0], p->dim);
}
static lt_tensor *f_sort(lt_tensor *const *in, void *ud) {
  const axis_arg *p = ud;
  lt_tensor *v = NULL;
  return lt_sort(in[0], p->dim, p->flag, &v, NULL) == LT_OK ? v : NULL;
}
static lt_tensor *f_topk(lt_tensor *const *in, void *ud) {
  const axis_arg *p = ud;
  lt_tensor *v = NULL;
  return lt_topk(in[0], p->k, p->dim, p->flag, &v, NULL) == LT_OK ? v : NULL;
}
/* cumsum twice: the gradient of a gradient-shaped (reverse) scan */
static lt_tensor *f_cumsum_twice(lt_tensor *const *in, void *ud) {
  const axis_arg *p = ud;
  return lt_cumsum(lt_mul(lt_cumsum(in[0], p->dim), in[0]), p->dim);
}

static const double kDistinct[6] = {0.3, -1.2, 2.5, 1.1, -0.4, 0.9}; /* [2, 3] */

static void gradients(void) {
  tg_input x = {SHAPE(2, 3), 2, kDistinct, true, LT_F64};
  for (int d = -2; d < 2; d++) {
    axis_arg p = {d, 0, false};
    tg_check("cumsum", f_cumsum, &p, &x, 1, 1e-6);
    tg_check("cumsum twice", f_cumsum_twice, &p, &x, 1, 1e-6);
    for (int desc = 0; desc < 2; desc++) {
      p.flag = desc;
      tg_check("sort values", f_sort, &p, &x, 1, 1e-6);
      for (int k = 0; k <= 2; k++) {
        p.k = k;
        tg_check("topk values", f_topk, &p, &x, 1, 1e-6);
      }
    }
  }
  tg_input s = {NULL, 0, (double[]){1.5}, true, LT_F64};
  axis_arg p0 = {0, 1, true};
  tg_check("cumsum 0-d", f_cumsum, &p0, &s, 1, 1e-6);
  tg_check("sort 0-d", f_sort, &p0, &s, 1, 1e-6);
  tg_check("topk 0-d", f_topk, &p0, &s, 1, 1e-6);
}

/* d sum(cumsum(x)) / d x[i] = the number of prefixes holding x[i]; the
 * incoming gradient here is a constant node. */
static void cumsum_gradient_by_hand(void) {
  lt_tensor *x = tu_f64(SHAPE(4), 1, (double[]){0.5, -2, 3, 1});
  assert_int_equal(lt_set_requires_grad(x, true), LT_OK);
  assert_int_equal(lt_backward(lt_sum(lt_cumsum(x, 0), NULL, 0, false)), LT_OK);
  expect(lt_grad(x), LT_F64, SHAPE(4), 1, (double[]){4, 3, 2, 1});
  lt_tensor *y = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  assert_int_equal(lt_set_requires_grad(y, true), LT_OK);
  assert_int_equal(lt_backward(lt_sum(lt_cumsum(y, -2), NULL, 0, false)), LT_OK);
  expect(lt_grad(y), LT_F32, SHAPE(2, 2), 2, (double[]){2, 2, 1, 1});
}

/* With ties the values are still a permutation of a: each element gets the
 * gradient of the place it went to (torch's). a = [3, 1, 3] sorted
 * descending is [a0, a2, a1]; loss = values . [1, 2, 3] gives [1, 3, 2]. */
static void gradient_ties(void) {
  lt_tensor *a = tu_f64(SHAPE(3), 1, (double[]){3, 1, 3}), *v;
  assert_int_equal(lt_set_requires_grad(a, true), LT_OK);
  sort_ok(a, 0, true, &v, NULL);
  lt_tensor *w = tu_f64(SHAPE(3), 1, (double[]){1, 2, 3});
  assert_int_equal(lt_backward(lt_sum(lt_mul(v, w), NULL, 0, false)), LT_OK);
  expect(lt_grad(a), LT_F64, SHAPE(3), 1, (double[]){1, 3, 2});
  /* the largest 2 of [3, 1, 3]: both 3s, the 1 gets nothing */
  lt_tensor *b = tu_f64(SHAPE(3), 1, (double[]){3, 1, 3});
  assert_int_equal(lt_set_requires_grad(b, true), LT_OK);
  topk_ok(b, 2, 0, true, &v, NULL);
  assert_int_equal(
      lt_backward(lt_sum(lt_mul(v, lt_slice_n(w, NULL, SHAPE(2), NULL, 1)), NULL, 0, false)),
      LT_OK);
  expect(lt_grad(b), LT_F64, SHAPE(3), 1, (double[]){1, 0, 2});
}

/* ---- eager mode, the persistent cache, malformed instructions ---------------------------- */

static void eager(void) {
  lt_set_eager(true);
  lt_tensor *a = tu_f32(SHAPE(2, 4), 2, kRows), *v, *i, *t;
  sort_ok(a, 1, true, &v, &i);
  topk_ok(a, 1, 1, false, &t, NULL);
  lt_tensor *c = lt_cumsum(a, 0);
  lt_set_eager(false);
  expect(v, LT_F32, SHAPE(2, 4), 2, (double[]){3, 2, 1, 1, 5, 0, -1, -1});
  expect(i, LT_I64, SHAPE(2, 4), 2, (double[]){0, 2, 1, 3, 2, 0, 1, 3});
  expect(t, LT_F32, SHAPE(2, 1), 2, (double[]){1, -1});
  expect(c, LT_F32, SHAPE(2, 4), 2, (double[]){3, 1, 2, 1, 3, 0, 7, 0});
}

static char g_dir[64];

/* Every new op in one graph; its values as doubles into out (returns how many). */
static int64_t scan_sort_graph(double *out) {
  lt_scope_begin();
  lt_tensor *x = tu_wave_f32(3, SHAPE(5, 7), 2), *v, *i, *tv, *ti;
  sort_ok(lt_exp(x), 1, true, &v, &i);
  topk_ok(lt_transpose(x, 0, 1), 3, 1, false, &tv, &ti);
  lt_tensor *outs[5] = {v, i, tv, ti, lt_cumsum(lt_mul(x, x), 0)};
  assert_int_equal(lt_sync(outs, 5, true), LT_OK);
  int64_t n = 0;
  for (int k = 0; k < 5; k++) {
    tu_read(outs[k], out + n, lt_numel(outs[k]));
    n += lt_numel(outs[k]);
  }
  lt_scope_end();
  return n;
}

/* The decoders of serialized executables take each op's operand count from
 * the op table: an executable holding the new ops is written, then loaded
 * instead of compiled, and gives the same values. */
static void persistent_cache(void) {
  static double a[256], b[256];
  assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "lt_scan_sort"));
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  tu_reset_executor();
  int64_t na = scan_sort_graph(a);
  int64_t uncached = tu_counter("UncachedCompile");
  assert_true(uncached >= 1);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_cache_clear();
  int64_t nb = scan_sort_graph(b);
  assert_int_equal(na, nb);
  assert_int_equal(tu_counter("UncachedCompile"), uncached);
  assert_true(tu_counter("PersistentCacheHit") >= 1);
  assert_int_equal(tu_counter("PersistentCacheDeserializeFailure"), 0);
  assert_memory_equal(a, b, (size_t)na * sizeof a[0]);
  lt_wait_device_ops(CPU0);
  lt_set_persistent_cache(NULL, false);
  lt_cache_clear();
  tu_rm_tree(g_dir);
}

/* An instruction's attrs come from serialized bytes too: the kernels check
 * them (axis in range, both attrs present, a result of the operand's shape)
 * and fail with LT_EEXEC instead of reading out of bounds. */
static void malformed_instructions(void) {
  lt_buffer *x = NULL, *out = NULL, *bad = NULL;
  assert_int_equal(lt__buffer_alloc(&lt__ref_backend, CPU0, LT_F32, SHAPE(2, 3), 2, &x), LT_OK);
  assert_int_equal(lt__buffer_alloc(&lt__ref_backend, CPU0, LT_I64, SHAPE(2, 3), 2, &out), LT_OK);
  assert_int_equal(lt__buffer_alloc(&lt__ref_backend, CPU0, LT_I64, SHAPE(3, 2), 2, &bad), LT_OK);
  memset(x->data, 0, x->nbytes);
  lt_buffer *in[1] = {x};
  int ops[2] = {LT_OP_ARGSORT, LT_OP_CUMSUM};
  for (int k = 0; k < 2; k++) {
    int64_t attrs[2] = {2, 0};
    lt_instr ins = {.op = (uint16_t)ops[k],
                    .dtype = LT_I64,
                    .ndim = 2,
                    .shape = {2, 3},
                    .param = -1,
                    .noperands = 1,
                    .nattrs = 2,
                    .attrs = attrs};
    lt_clear_error();
    assert_int_equal(lt__ref_backend.run_instr(&ins, out, in), LT_EEXEC);
    tu_expect_substr(lt_last_error(), "axis 2 out of range for rank 2");
    attrs[0] = -1;
    assert_int_equal(lt__ref_backend.run_instr(&ins, out, in), LT_EEXEC);
    attrs[0] = 1;
    ins.nattrs = 1;
    assert_int_equal(lt__ref_backend.run_instr(&ins, out, in), LT_EEXEC);
    tu_expect_substr(lt_last_error(), "malformed instruction");
    ins.nattrs = 2;
    assert_int_equal(lt__ref_backend.run_instr(&ins, bad, in), LT_EEXEC);
    tu_expect_substr(lt_last_error(), "result shape differs");
    assert_int_equal(lt__ref_backend.run_instr(&ins, out, in), LT_OK);
  }
  lt_clear_error();
  lt__buffer_release(x);
  lt__buffer_release(out);
  lt__buffer_release(bad);
}

/* ---- both backends ----------------------------------------------------------------------- */

static int setup_ref(void **state) {
  lt__backend_force(&lt__ref_backend);
  return tu_setup(state);
}
static int setup_cpu(void **state) {
  lt__backend_force(&lt__cpu_backend);
  return tu_setup(state);
}
static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt_set_eager(false);
  lt__backend_force(NULL);
  return rc;
}

#define BOTH(f)                       \
  static void f##_ref(void **state) { \
    (void)state;                      \
    f();                              \
  }                                   \
  static void f##_cpu(void **state) { \
    (void)state;                      \
    if (!tu_cpu_allowed()) skip();    \
    f();                              \
  }
#define ON_BOTH(f)                                               \
  cmocka_unit_test_setup_teardown(f##_ref, setup_ref, teardown), \
      cmocka_unit_test_setup_teardown(f##_cpu, setup_cpu, teardown)

BOTH(cumsum_values)
BOTH(cumsum_nan_inf)
BOTH(cumsum_dtypes)
BOTH(cumsum_edges)
BOTH(sort_values)
BOTH(sort_stable_long)
BOTH(sort_nan_zero)
BOTH(sort_dtypes)
BOTH(sort_edges)
BOTH(sort_errors)
BOTH(topk_values)
BOTH(topk_dtypes_nan)
BOTH(topk_edges_errors)
BOTH(gradients)
BOTH(cumsum_gradient_by_hand)
BOTH(gradient_ties)
BOTH(eager)
BOTH(persistent_cache)

static void test_malformed_instructions(void **state) {
  (void)state;
  malformed_instructions();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      ON_BOTH(cumsum_values),
      ON_BOTH(cumsum_nan_inf),
      ON_BOTH(cumsum_dtypes),
      ON_BOTH(cumsum_edges),
      ON_BOTH(sort_values),
      ON_BOTH(sort_stable_long),
      ON_BOTH(sort_nan_zero),
      ON_BOTH(sort_dtypes),
      ON_BOTH(sort_edges),
      ON_BOTH(sort_errors),
      ON_BOTH(topk_values),
      ON_BOTH(topk_dtypes_nan),
      ON_BOTH(topk_edges_errors),
      ON_BOTH(gradients),
      ON_BOTH(cumsum_gradient_by_hand),
      ON_BOTH(gradient_ties),
      ON_BOTH(eager),
      ON_BOTH(persistent_cache),
      TU_TEST(test_malformed_instructions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
