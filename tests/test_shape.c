/* Shape ops (reshape, permute, transpose, expand, squeeze, unsqueeze, slice,
 * concat, stack, pad) against hand-computed values, on every dtype, 0-d and
 * empty tensors, chains, and every error case. */
#include "test_util.h"

#define VALS(...) ((double[]){__VA_ARGS__})

/* A tensor of dtype dt from doubles (each converted to the dtype's element). */
static lt_tensor *mk(lt_dtype dt, const int64_t *shape, int ndim, const double *v) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  size_t sz = lt_dtype_size(dt);
  char *buf = malloc((size_t)n * sz + 1);
  for (int64_t i = 0; i < n; i++) lt__store_f64(dt, buf, i, v[i]);
  lt_tensor *t = lt_from_data(CPU0, dt, shape, ndim, buf);
  free(buf);
  return t;
}

/* Exact check of an i64 result (tu_expect reads doubles, which round above 2^53). */
static void expect_i64(lt_tensor *t, const int64_t *shape, int ndim, const int64_t *want) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  assert_int_equal(lt_get_dtype(t), LT_I64);
  assert_int_equal(lt_ndim(t), ndim);
  for (int i = 0; i < ndim; i++) assert_int_equal(lt_shape(t)[i], shape[i]);
  int64_t n = lt_numel(t);
  int64_t *got = malloc(sizeof(int64_t) * (size_t)(n + 1));
  assert_int_equal(lt_to_data(t, got, sizeof(int64_t) * (size_t)n), LT_OK);
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("element %lld: got %lld, want %lld", (long long)i, (long long)got[i],
               (long long)want[i]);
  free(got);
}

/* An identity op must still give a new tensor with the same value. */
static void expect_new(lt_tensor *r, lt_tensor *a) {
  assert_non_null(r);
  assert_ptr_not_equal(r, a);
  assert_true(lt_id(r) != lt_id(a));
}

static const float k6[] = {1, 2, 3, 4, 5, 6};

/* ---- reshape ------------------------------------------------------------------------------ */

static void test_reshape(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, k6);
  tu_expect(lt_reshape(a, SHAPE(3, 2), 2), LT_F32, SHAPE(3, 2), 2, VALS(1, 2, 3, 4, 5, 6), 0);
  tu_expect(lt_reshape(a, SHAPE(-1), 1), LT_F32, SHAPE(6), 1, VALS(1, 2, 3, 4, 5, 6), 0);
  tu_expect(lt_reshape(a, SHAPE(2, -1, 1), 3), LT_F32, SHAPE(2, 3, 1), 3, VALS(1, 2, 3, 4, 5, 6),
            0);
  tu_expect(lt_reshape(a, SHAPE(1, 6, 1, 1), 4), LT_F32, SHAPE(1, 6, 1, 1), 4,
            VALS(1, 2, 3, 4, 5, 6), 0);
  /* Same shape: a new tensor on the same value. */
  lt_tensor *r = lt_reshape(a, SHAPE(2, 3), 2);
  expect_new(r, a);
  tu_expect(r, LT_F32, SHAPE(2, 3), 2, VALS(1, 2, 3, 4, 5, 6), 0);
  /* The operand is untouched. */
  tu_expect(a, LT_F32, SHAPE(2, 3), 2, VALS(1, 2, 3, 4, 5, 6), 0);
}

static void test_reshape_dtypes(void **state) {
  (void)state;
  tu_expect(lt_reshape(tu_f64(SHAPE(4), 1, (double[]){0.5, -1.25, 3, 1e300}), SHAPE(2, 2), 2),
            LT_F64, SHAPE(2, 2), 2, VALS(0.5, -1.25, 3, 1e300), 0);
  tu_expect(lt_reshape(tu_i32(SHAPE(2, 2), 2, (int32_t[]){-7, 2147483647, 0, 5}), SHAPE(4), 1),
            LT_I32, SHAPE(4), 1, VALS(-7, 2147483647, 0, 5), 0);
  tu_expect(lt_reshape(tu_bool(SHAPE(3), 1, (uint8_t[]){1, 0, 1}), SHAPE(3, 1), 2), LT_BOOL,
            SHAPE(3, 1), 2, VALS(1, 0, 1), 0);
  const int64_t big[] = {INT64_MAX, (1LL << 53) + 1, INT64_MIN, -3};
  expect_i64(lt_reshape(tu_i64(SHAPE(2, 2), 2, big), SHAPE(4, 1), 2), SHAPE(4, 1), 2, big);
}

static void test_reshape_0d(void **state) {
  (void)state;
  lt_tensor *s = tu_f64(NULL, 0, (double[]){7.5});
  lt_tensor *r = lt_reshape(s, SHAPE(1), 1);
  tu_expect(r, LT_F64, SHAPE(1), 1, VALS(7.5), 0);
  lt_tensor *back = lt_reshape(r, NULL, 0);
  tu_expect(back, LT_F64, NULL, 0, VALS(7.5), 0);
  assert_int_equal(lt_ndim(back), 0);
  tu_expect(lt_reshape(s, SHAPE(-1), 1), LT_F64, SHAPE(1), 1, VALS(7.5), 0);
  tu_expect(lt_reshape(s, SHAPE(1, -1, 1), 3), LT_F64, SHAPE(1, 1, 1), 3, VALS(7.5), 0);
  /* [1, 1] -> 0-d */
  tu_expect(lt_reshape(tu_i32(SHAPE(1, 1), 2, (int32_t[]){-4}), NULL, 0), LT_I32, NULL, 0, VALS(-4),
            0);
}

static void test_reshape_empty(void **state) {
  (void)state;
  lt_tensor *e = tu_f32(SHAPE(0, 3), 2, NULL);
  tu_expect(lt_reshape(e, SHAPE(3, 0), 2), LT_F32, SHAPE(3, 0), 2, VALS(0), 0);
  tu_expect(lt_reshape(e, SHAPE(0), 1), LT_F32, SHAPE(0), 1, VALS(0), 0);
  tu_expect(lt_reshape(e, SHAPE(-1, 3), 2), LT_F32, SHAPE(0, 3), 2, VALS(0), 0);
  tu_expect(lt_reshape(e, SHAPE(2, 0, 5), 3), LT_F32, SHAPE(2, 0, 5), 3, VALS(0), 0);
  /* As torch: with the other dims holding 0 elements, -1 is ambiguous. */
  TU_EXPECT_ERROR(lt_reshape(e, SHAPE(0, -1), 2), LT_ESHAPE, "-1");
  TU_EXPECT_ERROR(lt_reshape(e, SHAPE(1), 1), LT_ESHAPE, "[0, 3]");
}

static void test_reshape_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, k6);
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(-1, -1), 2), LT_ESHAPE, "only one dim may be -1");
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(4), 1), LT_ESHAPE,
                  "cannot reshape [2, 3] (6 elements) into [4]");
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(7, 1), 2), LT_ESHAPE, "into [7, 1]");
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(-1, 4), 2), LT_ESHAPE, "[2, 3]");
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(-2, -3), 2), LT_ESHAPE, "invalid dim -2");
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(INT64_MAX, INT64_MAX), 2), LT_ESHAPE, "cannot reshape");
  TU_EXPECT_ERROR(lt_reshape(a, SHAPE(1, 1, 1, 1, 1, 1, 2, 3, 1), 9), LT_EINVAL, "rank 9");
  TU_EXPECT_ERROR(lt_reshape(a, NULL, 2), LT_EINVAL, "shape is NULL");
  TU_EXPECT_ERROR(lt_reshape(a, NULL, 0), LT_ESHAPE, "into []");
  TU_EXPECT_ERROR(lt_reshape(NULL, SHAPE(1), 1), LT_EINVAL, "lt_reshape");
}

/* ---- permute / transpose ------------------------------------------------------------------ */

static void test_permute(void **state) {
  (void)state;
  int32_t v[24];
  for (int i = 0; i < 24; i++) v[i] = i;
  lt_tensor *a = tu_i32(SHAPE(2, 3, 4), 3, v); /* a[i][j][k] = 12i + 4j + k */
  /* out[k][i][j] = a[i][j][k] */
  const double want[] = {0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,
                         2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23};
  tu_expect(lt_permute(a, (int[]){2, 0, 1}, 3), LT_I32, SHAPE(4, 2, 3), 3, want, 0);
  tu_expect(lt_permute(a, (int[]){-1, 0, -2}, 3), LT_I32, SHAPE(4, 2, 3), 3, want, 0);
  /* out[j][i][k] = a[i][j][k] */
  tu_expect(
      lt_permute(a, (int[]){1, 0, 2}, 3), LT_I32, SHAPE(3, 2, 4), 3,
      VALS(0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23),
      0);
  lt_tensor *id = lt_permute(a, (int[]){0, 1, 2}, 3);
  expect_new(id, a);
  double all[24];
  for (int i = 0; i < 24; i++) all[i] = i;
  tu_expect(id, LT_I32, SHAPE(2, 3, 4), 3, all, 0);
  /* 0-d: the empty permutation. */
  lt_tensor *s = tu_f32(NULL, 0, (float[]){3});
  lt_tensor *ps = lt_permute(s, NULL, 0);
  expect_new(ps, s);
  tu_expect(ps, LT_F32, NULL, 0, VALS(3), 0);
  /* empty */
  tu_expect(lt_permute(tu_f32(SHAPE(0, 3), 2, NULL), (int[]){1, 0}, 2), LT_F32, SHAPE(3, 0), 2,
            VALS(0), 0);
  /* bool and exact i64 */
  tu_expect(lt_permute(tu_bool(SHAPE(2, 2), 2, (uint8_t[]){1, 1, 0, 1}), (int[]){1, 0}, 2), LT_BOOL,
            SHAPE(2, 2), 2, VALS(1, 0, 1, 1), 0);
  const int64_t big[] = {INT64_MAX, 1, (1LL << 53) + 1, INT64_MIN};
  expect_i64(lt_permute(tu_i64(SHAPE(2, 2), 2, big), (int[]){1, 0}, 2), SHAPE(2, 2), 2,
             (int64_t[]){INT64_MAX, (1LL << 53) + 1, 1, INT64_MIN});
}

static void test_permute_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3, 1), 3, k6);
  TU_EXPECT_ERROR(lt_permute(a, (int[]){0, 0, 1}, 3), LT_EINVAL, "axis 0 appears twice");
  TU_EXPECT_ERROR(lt_permute(a, (int[]){0, -3, 1}, 3), LT_EINVAL, "appears twice");
  TU_EXPECT_ERROR(lt_permute(a, (int[]){0, 1}, 2), LT_EINVAL,
                  "2 entries for a tensor of shape [2, 3, 1]");
  TU_EXPECT_ERROR(lt_permute(a, (int[]){0, 1, 3}, 3), LT_EINVAL, "axis 3 out of range");
  TU_EXPECT_ERROR(lt_permute(a, NULL, 3), LT_EINVAL, "perm is NULL");
  TU_EXPECT_ERROR(lt_permute(NULL, (int[]){0}, 1), LT_EINVAL, "lt_permute");
}

static void test_transpose(void **state) {
  (void)state;
  lt_tensor *a = tu_f64(SHAPE(2, 3), 2, (double[]){1, 2, 3, 4, 5, 6});
  tu_expect(lt_transpose(a, 0, 1), LT_F64, SHAPE(3, 2), 2, VALS(1, 4, 2, 5, 3, 6), 0);
  tu_expect(lt_transpose(a, -1, -2), LT_F64, SHAPE(3, 2), 2, VALS(1, 4, 2, 5, 3, 6), 0);
  lt_tensor *same = lt_transpose(a, 1, 1);
  expect_new(same, a);
  tu_expect(same, LT_F64, SHAPE(2, 3), 2, VALS(1, 2, 3, 4, 5, 6), 0);
  /* 3-d: swap the outer axes of [2, 1, 2] -> [2, 1, 2] with out[k][j][i] = a[i][j][k] */
  tu_expect(lt_transpose(tu_i64(SHAPE(2, 1, 2), 3, (int64_t[]){1, 2, 3, 4}), 0, 2), LT_I64,
            SHAPE(2, 1, 2), 3, VALS(1, 3, 2, 4), 0);
  /* 0-d accepts the axes of a 1-d tensor, as torch. */
  tu_expect(lt_transpose(tu_f32(NULL, 0, (float[]){2}), 0, -1), LT_F32, NULL, 0, VALS(2), 0);
  TU_EXPECT_ERROR(lt_transpose(a, 0, 2), LT_EINVAL, "lt_transpose: axis 2 out of range");
  TU_EXPECT_ERROR(lt_transpose(a, -3, 0), LT_EINVAL, "axis -3");
  TU_EXPECT_ERROR(lt_transpose(NULL, 0, 1), LT_EINVAL, "lt_transpose");
}

/* ---- expand ------------------------------------------------------------------------------ */

static void test_expand(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 1), 2, (float[]){1, 2, 3});
  tu_expect(lt_expand(a, SHAPE(3, 2), 2), LT_F32, SHAPE(3, 2), 2, VALS(1, 1, 2, 2, 3, 3), 0);
  tu_expect(lt_expand(a, SHAPE(-1, 2), 2), LT_F32, SHAPE(3, 2), 2, VALS(1, 1, 2, 2, 3, 3), 0);
  tu_expect(lt_expand(a, SHAPE(2, 3, 2), 3), LT_F32, SHAPE(2, 3, 2), 3,
            VALS(1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3), 0);
  tu_expect(lt_expand(a, SHAPE(2, -1, -1), 3), LT_F32, SHAPE(2, 3, 1), 3, VALS(1, 2, 3, 1, 2, 3),
            0);
  lt_tensor *same = lt_expand(a, SHAPE(3, 1), 2);
  expect_new(same, a);
  tu_expect(same, LT_F32, SHAPE(3, 1), 2, VALS(1, 2, 3), 0);
  tu_expect(lt_expand(a, SHAPE(-1, -1), 2), LT_F32, SHAPE(3, 1), 2, VALS(1, 2, 3), 0);
  /* [1, 2] -> [2, 2]: the row repeats */
  tu_expect(lt_expand(tu_f64(SHAPE(1, 2), 2, (double[]){0.25, -8}), SHAPE(2, 2), 2), LT_F64,
            SHAPE(2, 2), 2, VALS(0.25, -8, 0.25, -8), 0);
  /* 0-d -> [2, 2] */
  tu_expect(lt_expand(tu_i32(NULL, 0, (int32_t[]){-9}), SHAPE(2, 2), 2), LT_I32, SHAPE(2, 2), 2,
            VALS(-9, -9, -9, -9), 0);
  /* size 1 -> 0 (empty), and an empty operand */
  tu_expect(lt_expand(tu_f32(SHAPE(1), 1, (float[]){5}), SHAPE(0), 1), LT_F32, SHAPE(0), 1, VALS(0),
            0);
  tu_expect(lt_expand(tu_f32(SHAPE(0, 1), 2, NULL), SHAPE(4, 0, 3), 3), LT_F32, SHAPE(4, 0, 3), 3,
            VALS(0), 0);
  /* bool and exact i64 */
  tu_expect(lt_expand(tu_bool(SHAPE(2), 1, (uint8_t[]){0, 1}), SHAPE(2, 2), 2), LT_BOOL,
            SHAPE(2, 2), 2, VALS(0, 1, 0, 1), 0);
  const int64_t b = (1LL << 53) + 1;
  expect_i64(lt_expand(tu_i64(SHAPE(2, 1), 2, (int64_t[]){b, INT64_MIN}), SHAPE(2, 3), 2),
             SHAPE(2, 3), 2, (int64_t[]){b, b, b, INT64_MIN, INT64_MIN, INT64_MIN});
}

static void test_expand_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 1), 2, (float[]){1, 2, 3});
  TU_EXPECT_ERROR(lt_expand(a, SHAPE(2, 2), 2), LT_ESHAPE, "cannot expand [3, 1] to [2, 2]");
  TU_EXPECT_ERROR(lt_expand(a, SHAPE(3), 1), LT_ESHAPE, "fewer dims");
  TU_EXPECT_ERROR(lt_expand(a, SHAPE(-1, 3, 1), 3), LT_ESHAPE, "new leading dim");
  TU_EXPECT_ERROR(lt_expand(a, SHAPE(3, -2), 2), LT_ESHAPE, "invalid dim -2");
  TU_EXPECT_ERROR(lt_expand(a, NULL, 2), LT_EINVAL, "shape is NULL");
  TU_EXPECT_ERROR(lt_expand(a, SHAPE(1, 1, 1, 1, 1, 1, 1, 3, 1), 9), LT_EINVAL, "rank 9");
  TU_EXPECT_ERROR(lt_expand(NULL, SHAPE(3, 1), 2), LT_EINVAL, "lt_expand");
}

/* ---- squeeze / unsqueeze --------------------------------------------------------------- */

static void test_squeeze(void **state) {
  (void)state;
  lt_tensor *a = tu_i32(SHAPE(1, 3, 1), 3, (int32_t[]){4, 5, 6});
  tu_expect(lt_squeeze(a, 0), LT_I32, SHAPE(3, 1), 2, VALS(4, 5, 6), 0);
  tu_expect(lt_squeeze(a, -1), LT_I32, SHAPE(1, 3), 2, VALS(4, 5, 6), 0);
  tu_expect(lt_squeeze(a, 2), LT_I32, SHAPE(1, 3), 2, VALS(4, 5, 6), 0);
  /* A dim that is not 1: a no-op, as torch (still a new tensor). */
  lt_tensor *same = lt_squeeze(a, 1);
  expect_new(same, a);
  tu_expect(same, LT_I32, SHAPE(1, 3, 1), 3, VALS(4, 5, 6), 0);
  /* [1] -> 0-d; 0-d accepts 0 and -1 and stays 0-d */
  tu_expect(lt_squeeze(tu_f64(SHAPE(1), 1, (double[]){2.5}), 0), LT_F64, NULL, 0, VALS(2.5), 0);
  tu_expect(lt_squeeze(tu_f64(NULL, 0, (double[]){2.5}), -1), LT_F64, NULL, 0, VALS(2.5), 0);
  /* empty */
  tu_expect(lt_squeeze(tu_bool(SHAPE(0, 1), 2, NULL), 1), LT_BOOL, SHAPE(0), 1, VALS(0), 0);
  tu_expect(lt_squeeze(tu_bool(SHAPE(0, 1), 2, NULL), 0), LT_BOOL, SHAPE(0, 1), 2, VALS(0), 0);
  TU_EXPECT_ERROR(lt_squeeze(a, 3), LT_EINVAL, "lt_squeeze: axis 3 out of range");
  TU_EXPECT_ERROR(lt_squeeze(a, -4), LT_EINVAL, "axis -4");
  TU_EXPECT_ERROR(lt_squeeze(tu_f32(NULL, 0, (float[]){1}), 1), LT_EINVAL, "axis 1");
  TU_EXPECT_ERROR(lt_squeeze(NULL, 0), LT_EINVAL, "lt_squeeze");
}

static void test_unsqueeze(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, k6);
  const double *v = VALS(1, 2, 3, 4, 5, 6);
  tu_expect(lt_unsqueeze(a, 0), LT_F32, SHAPE(1, 2, 3), 3, v, 0);
  tu_expect(lt_unsqueeze(a, 1), LT_F32, SHAPE(2, 1, 3), 3, v, 0);
  tu_expect(lt_unsqueeze(a, 2), LT_F32, SHAPE(2, 3, 1), 3, v, 0);
  tu_expect(lt_unsqueeze(a, -1), LT_F32, SHAPE(2, 3, 1), 3, v, 0);
  tu_expect(lt_unsqueeze(a, -3), LT_F32, SHAPE(1, 2, 3), 3, v, 0);
  /* 0-d -> [1] */
  lt_tensor *s = tu_i64(NULL, 0, (int64_t[]){(1LL << 53) + 1});
  expect_i64(lt_unsqueeze(s, 0), SHAPE(1), 1, (int64_t[]){(1LL << 53) + 1});
  expect_i64(lt_unsqueeze(s, -1), SHAPE(1), 1, (int64_t[]){(1LL << 53) + 1});
  /* empty */
  tu_expect(lt_unsqueeze(tu_f32(SHAPE(0), 1, NULL), 0), LT_F32, SHAPE(1, 0), 2, VALS(0), 0);
  TU_EXPECT_ERROR(lt_unsqueeze(a, 3), LT_EINVAL, "lt_unsqueeze: axis 3 out of range");
  TU_EXPECT_ERROR(lt_unsqueeze(a, -4), LT_EINVAL, "axis -4");
  TU_EXPECT_ERROR(lt_unsqueeze(s, 1), LT_EINVAL, "axis 1");
  lt_tensor *r8 = tu_f32(SHAPE(1, 1, 1, 1, 1, 1, 1, 1), 8, (float[]){1});
  TU_EXPECT_ERROR(lt_unsqueeze(r8, 0), LT_EINVAL, "rank 9");
  TU_EXPECT_ERROR(lt_unsqueeze(NULL, 0), LT_EINVAL, "lt_unsqueeze");
}

/* ---- slice --------------------------------------------------------------------------------- */

static void test_slice(void **state) {
  (void)state;
  float v[20];
  for (int i = 0; i < 20; i++) v[i] = (float)i;
  lt_tensor *a = tu_f32(SHAPE(4, 5), 2, v); /* a[i][j] = 5i + j */
  /* [1:3, 0:5:2] */
  tu_expect(lt_slice_n(a, SHAPE(1, 0), SHAPE(3, 5), SHAPE(1, 2), 2), LT_F32, SHAPE(2, 3), 2,
            VALS(5, 7, 9, 10, 12, 14), 0);
  /* [-2:, -3:] */
  tu_expect(lt_slice_n(a, SHAPE(-2, -3), NULL, NULL, 2), LT_F32, SHAPE(2, 3), 2,
            VALS(12, 13, 14, 17, 18, 19), 0);
  /* [0:-1:2, 1:-1] */
  tu_expect(lt_slice_n(a, SHAPE(0, 1), SHAPE(-1, -1), SHAPE(2, 1), 2), LT_F32, SHAPE(2, 3), 2,
            VALS(1, 2, 3, 11, 12, 13), 0);
  /* clamped bounds: [-100:100:3, 2:100:10] -> rows 0, 3; col 2 */
  tu_expect(lt_slice_n(a, SHAPE(-100, 2), SHAPE(100, 100), SHAPE(3, 10), 2), LT_F32, SHAPE(2, 1), 2,
            VALS(2, 17), 0);
  /* huge bounds and steps do not overflow */
  tu_expect(lt_slice_n(a, SHAPE(INT64_MIN, 1), SHAPE(INT64_MAX, INT64_MAX), SHAPE(INT64_MAX, 3), 2),
            LT_F32, SHAPE(1, 2), 2, VALS(1, 4), 0);
  /* everything: a new tensor on the same value */
  lt_tensor *all = lt_slice_n(a, NULL, NULL, NULL, lt_ndim(a));
  expect_new(all, a);
  double w[20];
  for (int i = 0; i < 20; i++) w[i] = i;
  tu_expect(all, LT_F32, SHAPE(4, 5), 2, w, 0);
  tu_expect(lt_slice_n(a, SHAPE(-4, -5), SHAPE(4, 99), SHAPE(1, 1), 2), LT_F32, SHAPE(4, 5), 2, w,
            0);
  /* 0-d: no axes to slice */
  tu_expect(lt_slice_n(tu_f64(NULL, 0, (double[]){1.5}), NULL, NULL, NULL, 0), LT_F64, NULL, 0,
            VALS(1.5), 0);
}

static void test_slice_empty_and_dtypes(void **state) {
  (void)state;
  float v[20];
  for (int i = 0; i < 20; i++) v[i] = (float)i;
  lt_tensor *a = tu_f32(SHAPE(4, 5), 2, v);
  /* start after stop, start past the end, stop before the start of the axis */
  tu_expect(lt_slice_n(a, SHAPE(3, 0), SHAPE(1, 5), NULL, 2), LT_F32, SHAPE(0, 5), 2, VALS(0), 0);
  tu_expect(lt_slice_n(a, SHAPE(10, 0), NULL, NULL, 2), LT_F32, SHAPE(0, 5), 2, VALS(0), 0);
  tu_expect(lt_slice_n(a, NULL, SHAPE(4, -10), NULL, 2), LT_F32, SHAPE(4, 0), 2, VALS(0), 0);
  /* slice of an empty tensor */
  tu_expect(lt_slice_n(tu_f32(SHAPE(0, 3), 2, NULL), SHAPE(0, 1), NULL, NULL, 2), LT_F32,
            SHAPE(0, 2), 2, VALS(0), 0);
  /* each dtype: [1::2] of 5 elements -> elements 1, 3 */
  tu_expect(
      lt_slice_n(tu_bool(SHAPE(5), 1, (uint8_t[]){1, 0, 1, 1, 0}), SHAPE(1), NULL, SHAPE(2), 1),
      LT_BOOL, SHAPE(2), 1, VALS(0, 1), 0);
  tu_expect(
      lt_slice_n(tu_i32(SHAPE(5), 1, (int32_t[]){-1, -2, -3, -4, -5}), SHAPE(1), NULL, SHAPE(2), 1),
      LT_I32, SHAPE(2), 1, VALS(-2, -4), 0);
  tu_expect(lt_slice_n(tu_f64(SHAPE(5), 1, (double[]){0.1, 0.2, 0.3, 0.4, 0.5}), SHAPE(1), NULL,
                       SHAPE(2), 1),
            LT_F64, SHAPE(2), 1, VALS(0.2, 0.4), 0);
  const int64_t b = (1LL << 53) + 1;
  expect_i64(lt_slice_n(tu_i64(SHAPE(5), 1, (int64_t[]){0, b, 0, INT64_MAX, 0}), SHAPE(1), NULL,
                        SHAPE(2), 1),
             SHAPE(2), 1, (int64_t[]){b, INT64_MAX});
}

static void test_slice_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, k6);
  TU_EXPECT_ERROR(lt_slice_n(a, NULL, NULL, SHAPE(1, 0), 2), LT_EINVAL,
                  "step 0 on axis 1 must be > 0");
  TU_EXPECT_ERROR(lt_slice_n(a, NULL, NULL, SHAPE(-1, 1), 2), LT_EINVAL, "step -1 on axis 0");
  TU_EXPECT_ERROR(lt_slice_n(NULL, NULL, NULL, NULL, 0), LT_EINVAL, "lt_slice");
}

/* ---- concat / stack ------------------------------------------------------------------------ */

static void test_concat(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  lt_tensor *b = tu_f32(SHAPE(1, 2), 2, (float[]){5, 6});
  lt_tensor *c = tu_f32(SHAPE(2, 1), 2, (float[]){7, 8});
  tu_expect(lt_concat((lt_tensor *[]){a, b}, 2, 0), LT_F32, SHAPE(3, 2), 2, VALS(1, 2, 3, 4, 5, 6),
            0);
  tu_expect(lt_concat((lt_tensor *[]){b, a, b}, 3, -2), LT_F32, SHAPE(4, 2), 2,
            VALS(5, 6, 1, 2, 3, 4, 5, 6), 0);
  tu_expect(lt_concat((lt_tensor *[]){a, c}, 2, 1), LT_F32, SHAPE(2, 3), 2, VALS(1, 2, 7, 3, 4, 8),
            0);
  tu_expect(lt_concat((lt_tensor *[]){c, a, c}, 3, -1), LT_F32, SHAPE(2, 4), 2,
            VALS(7, 1, 2, 7, 8, 3, 4, 8), 0);
  /* the same tensor twice */
  tu_expect(lt_concat((lt_tensor *[]){c, c}, 2, 0), LT_F32, SHAPE(4, 1), 2, VALS(7, 8, 7, 8), 0);
  /* one tensor: a new tensor with the same value */
  lt_tensor *one = lt_concat((lt_tensor *[]){a}, 1, 0);
  expect_new(one, a);
  tu_expect(one, LT_F32, SHAPE(2, 2), 2, VALS(1, 2, 3, 4), 0);
  /* middle axis of 3-d: [2, 1, 2] ++ [2, 2, 2] along 1 */
  tu_expect(lt_concat((lt_tensor *[]){tu_i32(SHAPE(2, 1, 2), 3, (int32_t[]){1, 2, 3, 4}),
                                      tu_i32(SHAPE(2, 2, 2), 3,
                                             (int32_t[]){10, 20, 30, 40, 50, 60, 70, 80})},
                      2, 1),
            LT_I32, SHAPE(2, 3, 2), 3, VALS(1, 2, 10, 20, 30, 40, 3, 4, 50, 60, 70, 80), 0);
}

static void test_concat_dtypes(void **state) {
  (void)state;
  lt_tensor *i32 = tu_i32(SHAPE(2), 1, (int32_t[]){1, 2});
  lt_tensor *f64 = tu_f64(SHAPE(1), 1, (double[]){0.5});
  lt_tensor *bl = tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0});
  const int64_t b = (1LL << 53) + 1;
  lt_tensor *i64 = tu_i64(SHAPE(2), 1, (int64_t[]){b, INT64_MIN});
  tu_expect(lt_concat((lt_tensor *[]){i32, f64}, 2, 0), LT_F64, SHAPE(3), 1, VALS(1, 2, 0.5), 0);
  tu_expect(lt_concat((lt_tensor *[]){bl, i32}, 2, 0), LT_I32, SHAPE(4), 1, VALS(1, 0, 1, 2), 0);
  tu_expect(lt_concat((lt_tensor *[]){bl, bl}, 2, 0), LT_BOOL, SHAPE(4), 1, VALS(1, 0, 1, 0), 0);
  expect_i64(lt_concat((lt_tensor *[]){i64, i32, bl}, 3, 0), SHAPE(6), 1,
             (int64_t[]){b, INT64_MIN, 1, 2, 1, 0});
  lt_tensor *f32 = tu_f32(SHAPE(1), 1, (float[]){0.25f});
  tu_expect(lt_concat((lt_tensor *[]){i64, f32}, 2, 0), LT_F32, SHAPE(3), 1,
            VALS((float)b, (float)INT64_MIN, 0.25), 0);
}

static void test_concat_empty(void **state) {
  (void)state;
  lt_tensor *a = tu_f64(SHAPE(2, 2), 2, (double[]){1, 2, 3, 4});
  lt_tensor *e0 = tu_f64(SHAPE(0, 2), 2, NULL);
  lt_tensor *e1 = tu_f64(SHAPE(2, 0), 2, NULL);
  tu_expect(lt_concat((lt_tensor *[]){e0, a, e0}, 3, 0), LT_F64, SHAPE(2, 2), 2, VALS(1, 2, 3, 4),
            0);
  tu_expect(lt_concat((lt_tensor *[]){a, e1}, 2, 1), LT_F64, SHAPE(2, 2), 2, VALS(1, 2, 3, 4), 0);
  tu_expect(lt_concat((lt_tensor *[]){e0, e0}, 2, 0), LT_F64, SHAPE(0, 2), 2, VALS(0), 0);
  tu_expect(lt_concat((lt_tensor *[]){e1, e1}, 2, 0), LT_F64, SHAPE(4, 0), 2, VALS(0), 0);
}

static void test_concat_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, k6);
  lt_tensor *v = tu_f32(SHAPE(4), 1, (float[]){1, 2, 3, 4});
  lt_tensor *s = tu_f32(NULL, 0, (float[]){1});
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, b}, 2, 0), LT_ESHAPE,
                  "tensor 1 has shape [2, 3], dim 1 differs from tensor 0's [2, 2]");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, v}, 2, 0), LT_ESHAPE, "rank 1 differs");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){s, s}, 2, 0), LT_ESHAPE, "0-d tensors cannot");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, s}, 2, 0), LT_ESHAPE, "rank 0 differs");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, a}, 2, 2), LT_EINVAL,
                  "lt_concat: axis 2 out of range");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, a}, 2, -3), LT_EINVAL, "axis -3");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a}, 0, 0), LT_EINVAL, "at least one tensor");
  TU_EXPECT_ERROR(lt_concat(NULL, 2, 0), LT_EINVAL, "list is NULL");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, NULL}, 2, 0), LT_EINVAL, "lt_concat");
}

static void test_stack(void **state) {
  (void)state;
  lt_tensor *a = tu_i64(SHAPE(2), 1, (int64_t[]){1, 2});
  lt_tensor *b = tu_i64(SHAPE(2), 1, (int64_t[]){3, 4});
  tu_expect(lt_stack((lt_tensor *[]){a, b}, 2, 0), LT_I64, SHAPE(2, 2), 2, VALS(1, 2, 3, 4), 0);
  tu_expect(lt_stack((lt_tensor *[]){a, b}, 2, 1), LT_I64, SHAPE(2, 2), 2, VALS(1, 3, 2, 4), 0);
  tu_expect(lt_stack((lt_tensor *[]){a, b, a}, 3, -1), LT_I64, SHAPE(2, 3), 2,
            VALS(1, 3, 1, 2, 4, 2), 0);
  tu_expect(lt_stack((lt_tensor *[]){a, b}, 2, -2), LT_I64, SHAPE(2, 2), 2, VALS(1, 2, 3, 4), 0);
  /* one tensor: an unsqueeze */
  tu_expect(lt_stack((lt_tensor *[]){a}, 1, 1), LT_I64, SHAPE(2, 1), 2, VALS(1, 2), 0);
  /* 0-d tensors give a 1-d result */
  lt_tensor *x = tu_f32(NULL, 0, (float[]){1.5f}), *y = tu_f32(NULL, 0, (float[]){-2});
  tu_expect(lt_stack((lt_tensor *[]){x, y, x}, 3, 0), LT_F32, SHAPE(3), 1, VALS(1.5, -2, 1.5), 0);
  tu_expect(lt_stack((lt_tensor *[]){x, y}, 2, -1), LT_F32, SHAPE(2), 1, VALS(1.5, -2), 0);
  /* promotion; [2, 2] along the middle axis */
  lt_tensor *m = tu_i32(SHAPE(2, 2), 2, (int32_t[]){1, 2, 3, 4});
  lt_tensor *n = tu_f64(SHAPE(2, 2), 2, (double[]){0.5, 0.25, 0.125, 8});
  tu_expect(lt_stack((lt_tensor *[]){m, n}, 2, 1), LT_F64, SHAPE(2, 2, 2), 3,
            VALS(1, 2, 0.5, 0.25, 3, 4, 0.125, 8), 0);
  tu_expect(lt_stack((lt_tensor *[]){tu_bool(SHAPE(1), 1, (uint8_t[]){1}),
                                     tu_bool(SHAPE(1), 1, (uint8_t[]){0})},
                     2, 0),
            LT_BOOL, SHAPE(2, 1), 2, VALS(1, 0), 0);
  /* empty */
  lt_tensor *e = tu_f32(SHAPE(0, 3), 2, NULL);
  tu_expect(lt_stack((lt_tensor *[]){e, e}, 2, 1), LT_F32, SHAPE(0, 2, 3), 3, VALS(0), 0);
}

static void test_stack_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, k6);
  lt_tensor *c = tu_f32(SHAPE(4), 1, (float[]){1, 2, 3, 4});
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){a, b}, 2, 0), LT_ESHAPE,
                  "all shapes must be equal: tensor 1 has shape [2, 3], tensor 0 has [2, 2]");
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){a, c}, 2, 0), LT_ESHAPE, "shape [4]");
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){a, a}, 2, 3), LT_EINVAL,
                  "lt_stack: axis 3 out of range");
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){a, a}, 2, -4), LT_EINVAL, "axis -4");
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){a}, 0, 0), LT_EINVAL, "at least one tensor");
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){NULL, a}, 2, 0), LT_EINVAL, "lt_stack");
  lt_tensor *r8 = tu_f32(SHAPE(1, 1, 1, 1, 1, 1, 1, 1), 8, (float[]){1});
  TU_EXPECT_ERROR(lt_stack((lt_tensor *[]){r8, r8}, 2, 0), LT_EINVAL, "rank 9");
}

/* ---- pad ------------------------------------------------------------------------------------ */

static void test_pad(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  tu_expect(lt_pad_n(a, SHAPE(1, 0, 0, 2), 4, 9), LT_F32, SHAPE(3, 4), 2,
            VALS(9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9), 0);
  tu_expect(lt_pad_n(a, SHAPE(0, 1, 1, 1), 4, -0.5), LT_F32, SHAPE(3, 4), 2,
            VALS(-0.5, 1, 2, -0.5, -0.5, 3, 4, -0.5, -0.5, -0.5, -0.5, -0.5), 0);
  /* zero pads: a new tensor on the same value */
  lt_tensor *same = lt_pad_n(a, SHAPE(0, 0, 0, 0), 4, 7);
  expect_new(same, a);
  tu_expect(same, LT_F32, SHAPE(2, 2), 2, VALS(1, 2, 3, 4), 0);
  /* each dtype; the result keeps the input dtype */
  tu_expect(lt_pad_n(tu_f64(SHAPE(1), 1, (double[]){0.1}), SHAPE(1, 1), 2, 1e300), LT_F64, SHAPE(3),
            1, VALS(1e300, 0.1, 1e300), 0);
  tu_expect(lt_pad_n(tu_i32(SHAPE(2), 1, (int32_t[]){5, 6}), SHAPE(0, 2), 2, 2.7), LT_I32, SHAPE(4),
            1, VALS(5, 6, 2, 2), 0);
  tu_expect(lt_pad_n(tu_bool(SHAPE(2), 1, (uint8_t[]){0, 0}), SHAPE(1, 1), 2, 1), LT_BOOL, SHAPE(4),
            1, VALS(1, 0, 0, 1), 0);
  const int64_t b = (1LL << 53) + 1;
  expect_i64(
      lt_pad_n(tu_i64(SHAPE(3), 1, (int64_t[]){b, INT64_MAX, INT64_MIN}), SHAPE(2, 1), 2, -1),
      SHAPE(6), 1, (int64_t[]){-1, -1, b, INT64_MAX, INT64_MIN, -1});
  /* empty input: all padding */
  tu_expect(lt_pad_n(tu_f32(SHAPE(0), 1, NULL), SHAPE(1, 2), 2, 5), LT_F32, SHAPE(3), 1,
            VALS(5, 5, 5), 0);
  tu_expect(lt_pad_n(tu_f32(SHAPE(0, 2), 2, NULL), SHAPE(0, 0, 1, 0), 4, 5), LT_F32, SHAPE(0, 3), 2,
            VALS(0), 0);
  /* 0-d: nothing to pad */
  tu_expect(lt_pad_n(tu_f32(NULL, 0, (float[]){3}), NULL, 0, 1), LT_F32, NULL, 0, VALS(3), 0);
}

static void test_pad_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  TU_EXPECT_ERROR(lt_pad_n(a, SHAPE(0, 0, -1, 0), 4, 0), LT_EINVAL,
                  "pads of axis 1 are -1 and 0; they must be >= 0");
  TU_EXPECT_ERROR(lt_pad_n(a, SHAPE(0, -2, 0, 0), 4, 0), LT_EINVAL, "axis 0");
  TU_EXPECT_ERROR(lt_pad_n(a, SHAPE(0, INT64_MAX, 0, 0), 4, 0), LT_ESHAPE, "too large");
  TU_EXPECT_ERROR(lt_pad_n(a, NULL, 4, 0), LT_EINVAL, "pads is NULL");
  TU_EXPECT_ERROR(lt_pad_n(NULL, SHAPE(0, 0), 2, 0), LT_EINVAL, "lt_pad");
}

/* ---- every kernel on every dtype ------------------------------------------------------------ */

static void test_all_dtypes(void **state) {
  (void)state;
  for (int d = 0; d < LT_NUM_DTYPES; d++) {
    lt_dtype dt = (lt_dtype)d;
    /* bool stores only 0/1; the others keep small integers exactly */
    const double *v = dt == LT_BOOL ? VALS(1, 0, 0, 1, 1, 0) : VALS(1, 2, 3, 4, 5, 6);
    lt_tensor *a = mk(dt, SHAPE(2, 3), 2, v);
    tu_expect(lt_reshape(a, SHAPE(3, 2), 2), dt, SHAPE(3, 2), 2, v, 0);
    tu_expect(lt_transpose(a, 0, 1), dt, SHAPE(3, 2), 2,
              (double[]){v[0], v[3], v[1], v[4], v[2], v[5]}, 0);
    tu_expect(lt_expand(lt_reshape(a, SHAPE(2, 1, 3), 3), SHAPE(2, 2, 3), 3), dt, SHAPE(2, 2, 3), 3,
              (double[]){v[0], v[1], v[2], v[0], v[1], v[2], v[3], v[4], v[5], v[3], v[4], v[5]},
              0);
    tu_expect(lt_slice_n(a, SHAPE(1, 0), NULL, SHAPE(1, 2), 2), dt, SHAPE(1, 2), 2,
              (double[]){v[3], v[5]}, 0);
    tu_expect(lt_concat((lt_tensor *[]){a, a}, 2, 1), dt, SHAPE(2, 6), 2,
              (double[]){v[0], v[1], v[2], v[0], v[1], v[2], v[3], v[4], v[5], v[3], v[4], v[5]},
              0);
    tu_expect(lt_stack((lt_tensor *[]){a, a}, 2, 0), dt, SHAPE(2, 2, 3), 3,
              (double[]){v[0], v[1], v[2], v[3], v[4], v[5], v[0], v[1], v[2], v[3], v[4], v[5]},
              0);
    tu_expect(lt_pad_n(a, SHAPE(0, 0, 1, 0), 4, 0), dt, SHAPE(2, 4), 2,
              (double[]){0, v[0], v[1], v[2], 0, v[3], v[4], v[5]}, 0);
  }
}

/* ---- constants and scalar-filled tensors --------------------------------------------------------
 */

/* lt_ones is a constant leaf (shape ops fold into a constant); lt_full of other
 * values broadcasts device data. Both must read the same through every op. */
static void test_constants(void **state) {
  (void)state;
  lt_tensor *o = lt_ones(CPU0, LT_I64, SHAPE(2, 1), 2);
  tu_expect(lt_permute(o, (int[]){1, 0}, 2), LT_I64, SHAPE(1, 2), 2, VALS(1, 1), 0);
  tu_expect(lt_expand(o, SHAPE(2, 2, 3), 3), LT_I64, SHAPE(2, 2, 3), 3,
            VALS(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0);
  tu_expect(lt_slice_n(o, SHAPE(1, 0), NULL, NULL, 2), LT_I64, SHAPE(1, 1), 2, VALS(1), 0);
  tu_expect(lt_reshape(o, SHAPE(2), 1), LT_I64, SHAPE(2), 1, VALS(1, 1), 0);
  tu_expect(lt_pad_n(o, SHAPE(0, 0, 1, 0), 4, 5), LT_I64, SHAPE(2, 2), 2, VALS(5, 1, 5, 1), 0);
  lt_tensor *f = lt_full(CPU0, LT_F32, SHAPE(1, 2), 2, 3.5);
  tu_expect(lt_transpose(f, 0, 1), LT_F32, SHAPE(2, 1), 2, VALS(3.5, 3.5), 0);
  tu_expect(lt_slice_n(f, SHAPE(0, 1), NULL, NULL, 2), LT_F32, SHAPE(1, 1), 2, VALS(3.5), 0);
  tu_expect(lt_concat((lt_tensor *[]){f, lt_zeros(CPU0, LT_F32, SHAPE(1, 2), 2)}, 2, 0), LT_F32,
            SHAPE(2, 2), 2, VALS(3.5, 3.5, 0, 0), 0);
  tu_expect(lt_stack((lt_tensor *[]){o, lt_full(CPU0, LT_I64, SHAPE(2, 1), 2, 7)}, 2, 0), LT_I64,
            SHAPE(2, 2, 1), 3, VALS(1, 1, 7, 7), 0);
}

/* ---- chains and error propagation --------------------------------------------------------------
 */

static void test_chain(void **state) {
  (void)state;
  float v[24];
  for (int i = 0; i < 24; i++) v[i] = (float)i;
  lt_tensor *a = tu_f32(SHAPE(2, 3, 4), 3, v);       /* a[i][j][k] = 12i + 4j + k */
  lt_tensor *p = lt_permute(a, (int[]){2, 0, 1}, 3); /* [4, 2, 3]: p[k][i][j] */
  lt_tensor *s =
      lt_slice_n(p, SHAPE(1, 0, 1), SHAPE(3, 2, 3), NULL, 3); /* k 1..2, i 0..1, j 1..2 */
  lt_tensor *r = lt_reshape(s, SHAPE(-1), 1);
  tu_expect(r, LT_F32, SHAPE(8), 1, VALS(5, 9, 17, 21, 6, 10, 18, 22), 0);
  /* a longer chain: transpose, expand, concat, pad, squeeze, stack in one graph */
  lt_tensor *m = tu_i32(SHAPE(1, 2), 2, (int32_t[]){1, 2});
  lt_tensor *t = lt_transpose(m, 0, 1);                              /* [2, 1]: 1, 2 */
  lt_tensor *e = lt_expand(t, SHAPE(2, 2), 2);                       /* 1 1 / 2 2 */
  lt_tensor *c = lt_concat((lt_tensor *[]){e, m}, 2, 0);             /* 1 1 / 2 2 / 1 2 */
  lt_tensor *pd = lt_pad_n(c, SHAPE(0, 1, 1, 0), 4, 0);              /* [4, 3] */
  lt_tensor *sl = lt_slice_n(pd, SHAPE(0, 1), NULL, SHAPE(3, 1), 2); /* rows 0, 3; cols 1, 2 */
  tu_expect(sl, LT_I32, SHAPE(2, 2), 2, VALS(1, 1, 0, 0), 0);
  lt_tensor *st = lt_stack((lt_tensor *[]){lt_squeeze(lt_unsqueeze(sl, 0), 0), sl}, 2, 2);
  tu_expect(st, LT_I32, SHAPE(2, 2, 2), 3, VALS(1, 1, 1, 1, 0, 0, 0, 0), 0);
  /* the intermediate results still read correctly after the graph ran */
  tu_expect(pd, LT_I32, SHAPE(4, 3), 2, VALS(0, 1, 1, 0, 2, 2, 0, 1, 2, 0, 0, 0), 0);
  tu_expect(
      p, LT_F32, SHAPE(4, 2, 3), 3,
      VALS(0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23),
      0);
}

static void test_error_chain(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, k6);
  /* The first failure is kept through the rest of the expression. */
  TU_EXPECT_ERROR(lt_reshape(lt_permute(a, (int[]){1, 1}, 2), SHAPE(6), 1), LT_EINVAL,
                  "lt_permute: axis 1 appears twice");
  TU_EXPECT_ERROR(lt_pad_n(lt_slice_n(a, NULL, NULL, SHAPE(0, 1), 2), SHAPE(1, 1, 1, 1), 4, 0),
                  LT_EINVAL, "lt_slice_n: step 0");
  TU_EXPECT_ERROR(lt_concat((lt_tensor *[]){a, lt_expand(a, SHAPE(3, 3), 2)}, 2, 0), LT_ESHAPE,
                  "lt_expand");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_reshape),        TU_TEST(test_reshape_dtypes),
      TU_TEST(test_reshape_0d),     TU_TEST(test_reshape_empty),
      TU_TEST(test_reshape_errors), TU_TEST(test_permute),
      TU_TEST(test_permute_errors), TU_TEST(test_transpose),
      TU_TEST(test_expand),         TU_TEST(test_expand_errors),
      TU_TEST(test_squeeze),        TU_TEST(test_unsqueeze),
      TU_TEST(test_slice),          TU_TEST(test_slice_empty_and_dtypes),
      TU_TEST(test_slice_errors),   TU_TEST(test_concat),
      TU_TEST(test_concat_dtypes),  TU_TEST(test_concat_empty),
      TU_TEST(test_concat_errors),  TU_TEST(test_stack),
      TU_TEST(test_stack_errors),   TU_TEST(test_pad),
      TU_TEST(test_pad_errors),     TU_TEST(test_all_dtypes),
      TU_TEST(test_constants),      TU_TEST(test_chain),
      TU_TEST(test_error_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
