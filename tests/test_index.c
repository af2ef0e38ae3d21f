/* lt_gather, lt_index_select, lt_one_hot against hand-computed values, and
 * index errors: shape/dtype errors at build time, out-of-range values at run time. */
#include "test_util.h"

/* a = [[1, 2], [3, 4], [5, 6]] */
static const float kA32[] = {1, 2, 3, 4, 5, 6};
/* b = [[1, 2, 3], [4, 5, 6]] */
static const float kB23[] = {1, 2, 3, 4, 5, 6};

/* ---- gather ---- */

static void test_gather_axis0(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 2), 2, kA32);
  lt_tensor *idx = tu_i64(SHAPE(2, 2), 2, (int64_t[]){2, 0, 1, 1});
  /* out[i][j] = a[idx[i][j]][j] */
  tu_expect(lt_gather(a, 0, idx), LT_F32, SHAPE(2, 2), 2, (double[]){5, 2, 3, 4}, 0);
  /* index larger than a along the gather axis is fine */
  lt_tensor *idx4 = tu_i32(SHAPE(4, 1), 2, (int32_t[]){0, 2, 2, 1});
  tu_expect(lt_gather(a, 0, idx4), LT_F32, SHAPE(4, 1), 2, (double[]){1, 5, 5, 3}, 0);
}

static void test_gather_axis1(void **state) {
  (void)state;
  /* torch docs: gather([[1,2],[3,4]], 1, [[0,0],[1,0]]) = [[1,1],[4,3]] */
  lt_tensor *t = tu_i32(SHAPE(2, 2), 2, (int32_t[]){1, 2, 3, 4});
  lt_tensor *idx = tu_i64(SHAPE(2, 2), 2, (int64_t[]){0, 0, 1, 0});
  tu_expect(lt_gather(t, 1, idx), LT_I32, SHAPE(2, 2), 2, (double[]){1, 1, 4, 3}, 0);
  /* negative axis; index smaller than b off the axis and longer along it */
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, kB23);
  lt_tensor *idx2 = tu_i32(SHAPE(1, 4), 2, (int32_t[]){2, 0, 1, 1});
  tu_expect(lt_gather(b, -1, idx2), LT_F32, SHAPE(1, 4), 2, (double[]){3, 1, 2, 2}, 0);
}

static void test_gather_3d_and_dtypes(void **state) {
  (void)state;
  /* a[i][j][k] = 100 i + 10 j + k, shape [2, 3, 2]; gather along axis 1 */
  double av[12];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 2; k++) av[(i * 3 + j) * 2 + k] = 100 * i + 10 * j + k;
  lt_tensor *a = tu_f64(SHAPE(2, 3, 2), 3, av);
  lt_tensor *idx = tu_i64(SHAPE(2, 1, 2), 3, (int64_t[]){2, 1, 0, 2});
  tu_expect(lt_gather(a, 1, idx), LT_F64, SHAPE(2, 1, 2), 3, (double[]){20, 11, 100, 121}, 0);
  /* i64 values are copied exactly and bool stays bool */
  const int64_t big = ((int64_t)1 << 53) + 1;
  lt_tensor *x = tu_i64(SHAPE(2), 1, (int64_t[]){7, big});
  lt_tensor *r = lt_gather(x, 0, tu_i32(SHAPE(3), 1, (int32_t[]){1, 0, 1}));
  int64_t got[3];
  assert_int_equal(lt_to_data(r, got, sizeof got), LT_OK);
  assert_true(got[0] == big && got[1] == 7 && got[2] == big);
  lt_tensor *bo = tu_bool(SHAPE(3), 1, (uint8_t[]){1, 0, 0});
  tu_expect(lt_gather(bo, 0, tu_i64(SHAPE(2), 1, (int64_t[]){1, 0})), LT_BOOL, SHAPE(2), 1,
            (double[]){0, 1}, 0);
}

static void test_gather_0d_and_empty(void **state) {
  (void)state;
  lt_tensor *s = tu_f32(NULL, 0, (float[]){5});
  lt_tensor *i0 = tu_i64(NULL, 0, (int64_t[]){0});
  tu_expect(lt_gather(s, 0, i0), LT_F32, NULL, 0, (double[]){5}, 0);
  tu_expect(lt_gather(s, -1, i0), LT_F32, NULL, 0, (double[]){5}, 0);
  lt_tensor *a = tu_f32(SHAPE(3, 2), 2, kA32);
  lt_tensor *e = tu_i64(SHAPE(0, 2), 2, (int64_t[]){0});
  tu_expect(lt_gather(a, 0, e), LT_F32, SHAPE(0, 2), 2, NULL, 0);
  /* an empty input with an empty index */
  lt_tensor *z = lt_zeros(CPU0, LT_F32, SHAPE(0, 2), 2);
  tu_expect(lt_gather(z, 0, e), LT_F32, SHAPE(0, 2), 2, NULL, 0);
}

/* ---- index_select ---- */

static void test_index_select(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 2), 2, kA32);
  /* repeated indices along axis 0 */
  lt_tensor *i64 = tu_i64(SHAPE(3), 1, (int64_t[]){2, 0, 2});
  tu_expect(lt_index_select(a, 0, i64), LT_F32, SHAPE(3, 2), 2, (double[]){5, 6, 1, 2, 5, 6}, 0);
  /* along axis 1 with i32 indices, longer than the axis */
  lt_tensor *b = tu_f32(SHAPE(2, 3), 2, kB23);
  lt_tensor *i32 = tu_i32(SHAPE(4), 1, (int32_t[]){1, 1, 0, 2});
  tu_expect(lt_index_select(b, 1, i32), LT_F32, SHAPE(2, 4), 2, (double[]){2, 2, 1, 3, 5, 5, 4, 6},
            0);
  tu_expect(lt_index_select(b, -1, i32), LT_F32, SHAPE(2, 4), 2, (double[]){2, 2, 1, 3, 5, 5, 4, 6},
            0);
  /* middle axis of a 3-d i64 tensor */
  int64_t cv[12];
  for (int i = 0; i < 12; i++) cv[i] = i;
  lt_tensor *c = tu_i64(SHAPE(2, 3, 2), 3, cv);
  tu_expect(lt_index_select(c, 1, tu_i32(SHAPE(2), 1, (int32_t[]){2, 2})), LT_I64, SHAPE(2, 2, 2),
            3, (double[]){4, 5, 4, 5, 10, 11, 10, 11}, 0);
}

static void test_index_select_0d_and_empty(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 2), 2, kA32);
  /* a 0-d index selects like [i]: the axis keeps size 1 (torch) */
  lt_tensor *i0 = tu_i64(NULL, 0, (int64_t[]){1});
  tu_expect(lt_index_select(a, 0, i0), LT_F32, SHAPE(1, 2), 2, (double[]){3, 4}, 0);
  tu_expect(lt_index_select(a, 1, i0), LT_F32, SHAPE(3, 1), 2, (double[]){2, 4, 6}, 0);
  /* 0-d input: one index, 0-d result */
  lt_tensor *s = tu_f64(NULL, 0, (double[]){2.5});
  lt_tensor *z0 = tu_i32(NULL, 0, (int32_t[]){0});
  tu_expect(lt_index_select(s, 0, z0), LT_F64, NULL, 0, (double[]){2.5}, 0);
  tu_expect(lt_index_select(s, 0, tu_i32(SHAPE(1), 1, (int32_t[]){0})), LT_F64, NULL, 0,
            (double[]){2.5}, 0);
  /* empty index: the axis becomes 0 */
  lt_tensor *e = tu_i64(SHAPE(0), 1, (int64_t[]){0});
  tu_expect(lt_index_select(a, 0, e), LT_F32, SHAPE(0, 2), 2, NULL, 0);
  lt_tensor *z = lt_zeros(CPU0, LT_F32, SHAPE(0, 3), 2);
  tu_expect(lt_index_select(z, 1, tu_i64(SHAPE(2), 1, (int64_t[]){2, 0})), LT_F32, SHAPE(0, 2), 2,
            NULL, 0);
}

/* ---- one_hot ---- */

static void test_one_hot(void **state) {
  (void)state;
  lt_tensor *i = tu_i64(SHAPE(3), 1, (int64_t[]){2, 0, 1});
  tu_expect(lt_one_hot(i, 3, LT_F32), LT_F32, SHAPE(3, 3), 2, (double[]){0, 0, 1, 1, 0, 0, 0, 1, 0},
            0);
  tu_expect(lt_one_hot(i, 4, LT_BOOL), LT_BOOL, SHAPE(3, 4), 2,
            (double[]){0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0}, 0);
  lt_tensor *j = tu_i32(SHAPE(2, 2), 2, (int32_t[]){0, 1, 1, 0});
  tu_expect(lt_one_hot(j, 2, LT_I64), LT_I64, SHAPE(2, 2, 2), 3, (double[]){1, 0, 0, 1, 0, 1, 1, 0},
            0);
  tu_expect(lt_one_hot(j, 2, LT_I32), LT_I32, SHAPE(2, 2, 2), 3, (double[]){1, 0, 0, 1, 0, 1, 1, 0},
            0);
  tu_expect(lt_one_hot(j, 2, LT_F64), LT_F64, SHAPE(2, 2, 2), 3, (double[]){1, 0, 0, 1, 0, 1, 1, 0},
            0);
  /* 0-d and empty indices */
  lt_tensor *s = tu_i32(NULL, 0, (int32_t[]){3});
  tu_expect(lt_one_hot(s, 5, LT_F32), LT_F32, SHAPE(5), 1, (double[]){0, 0, 0, 1, 0}, 0);
  lt_tensor *e = tu_i64(SHAPE(0), 1, (int64_t[]){0});
  tu_expect(lt_one_hot(e, 3, LT_F32), LT_F32, SHAPE(0, 3), 2, NULL, 0);
  /* a pending index (computed, not data) */
  lt_tensor *k = tu_i64(SHAPE(2), 1, (int64_t[]){0, 1});
  tu_expect(lt_one_hot(lt_add(k, k), 3, LT_F32), LT_F32, SHAPE(2, 3), 2,
            (double[]){1, 0, 0, 0, 0, 1}, 0);
}

/* ---- build-time errors ---- */

static void test_build_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 2), 2, kA32);
  lt_tensor *fi = tu_f32(SHAPE(2, 2), 2, (float[]){0, 1, 0, 1});
  lt_tensor *bi = tu_bool(SHAPE(2, 2), 2, (uint8_t[]){0, 1, 0, 1});
  lt_tensor *i1 = tu_i64(SHAPE(2), 1, (int64_t[]){0, 1});
  lt_tensor *i22 = tu_i64(SHAPE(2, 2), 2, (int64_t[]){0, 1, 0, 1});
  /* gather */
  TU_EXPECT_ERROR(lt_gather(a, 0, fi), LT_EDTYPE, "f32");
  TU_EXPECT_ERROR(lt_gather(a, 0, bi), LT_EDTYPE, "lt_gather");
  TU_EXPECT_ERROR(lt_gather(a, 0, i1), LT_ESHAPE, "[2]");
  TU_EXPECT_ERROR(lt_gather(a, 2, i22), LT_EINVAL, "axis");
  TU_EXPECT_ERROR(lt_gather(a, -3, i22), LT_EINVAL, "lt_gather");
  /* off the gather axis the index may not be larger than the input */
  lt_tensor *i13 = tu_i64(SHAPE(1, 3), 2, (int64_t[]){0, 0, 0});
  TU_EXPECT_ERROR(lt_gather(a, 0, i13), LT_ESHAPE, "[1, 3]");
  TU_EXPECT_ERROR(lt_gather(NULL, 0, i22), LT_EINVAL, "lt_gather");
  TU_EXPECT_ERROR(lt_gather(a, 0, NULL), LT_EINVAL, "lt_gather");
  /* index_select */
  TU_EXPECT_ERROR(lt_index_select(a, 0, tu_f32(SHAPE(1), 1, (float[]){0})), LT_EDTYPE,
                  "lt_index_select");
  TU_EXPECT_ERROR(lt_index_select(a, 0, i22), LT_ESHAPE, "[2, 2]");
  TU_EXPECT_ERROR(lt_index_select(a, 2, i1), LT_EINVAL, "axis");
  lt_tensor *s = tu_f32(NULL, 0, (float[]){1});
  TU_EXPECT_ERROR(lt_index_select(s, 0, i1), LT_ESHAPE, "0-d");
  /* one_hot */
  TU_EXPECT_ERROR(lt_one_hot(i1, 0, LT_F32), LT_EINVAL, "num_classes");
  TU_EXPECT_ERROR(lt_one_hot(i1, -2, LT_F32), LT_EINVAL, "lt_one_hot");
  TU_EXPECT_ERROR(lt_one_hot(fi, 3, LT_F32), LT_EDTYPE, "f32");
  TU_EXPECT_ERROR(lt_one_hot(i1, 3, (lt_dtype)42), LT_EDTYPE, "lt_one_hot");
  lt_tensor *big = lt_zeros(CPU0, LT_I64, SHAPE(1, 1, 1, 1, 1, 1, 1, 1), 8);
  TU_EXPECT_ERROR(lt_one_hot(big, 2, LT_F32), LT_ESHAPE, "lt_one_hot");
  TU_EXPECT_ERROR(lt_one_hot(NULL, 2, LT_F32), LT_EINVAL, "lt_one_hot");
}

/* ---- run-time errors: out-of-range index values ---- */

static void test_out_of_range(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3, 2), 2, kA32);
  lt_tensor *g = lt_gather(a, 0, tu_i64(SHAPE(2, 2), 2, (int64_t[]){0, 7, 1, 1}));
  tu_expect_exec_error(g, "gather: index 7 out of range [0, 3) along axis 0");
  /* the tensor keeps its graph: a second read fails the same way */
  tu_expect_exec_error(g, "index 7");
  /* negative indices are rejected too */
  tu_expect_exec_error(lt_gather(a, 1, tu_i32(SHAPE(1, 1), 2, (int32_t[]){-1})), "index -1");
  /* gathering anything from an empty axis is out of range */
  lt_tensor *z = lt_zeros(CPU0, LT_F32, SHAPE(0, 2), 2);
  tu_expect_exec_error(lt_gather(z, 0, tu_i64(SHAPE(1, 2), 2, (int64_t[]){0, 0})), "[0, 0)");
  tu_expect_exec_error(lt_gather(tu_f32(NULL, 0, (float[]){1}), 0, tu_i64(NULL, 0, (int64_t[]){1})),
                       "gather");

  tu_expect_exec_error(lt_index_select(a, 1, tu_i64(SHAPE(2), 1, (int64_t[]){0, 2})),
                       "index_select: index 2 out of range [0, 2) along axis 1");
  tu_expect_exec_error(lt_index_select(a, 0, tu_i32(SHAPE(1), 1, (int32_t[]){-4})), "index -4");

  tu_expect_exec_error(lt_one_hot(tu_i64(SHAPE(3), 1, (int64_t[]){0, 3, 1}), 3, LT_F32),
                       "one_hot: index 3 out of range [0, 3)");
  tu_expect_exec_error(lt_one_hot(tu_i32(SHAPE(1), 1, (int32_t[]){-1}), 3, LT_F32), "index -1");

  /* a failing op downstream of a good one, inside a bigger graph */
  lt_tensor *eye = tu_f32(SHAPE(2, 2), 2, (float[]){1, 0, 0, 1});
  lt_tensor *sum = lt_add(g, lt_matmul(eye, eye));
  tu_expect_exec_error(sum, "out of range");

  /* everything else keeps working afterwards */
  lt_clear_error();
  lt_tensor *ok = lt_gather(a, 0, tu_i64(SHAPE(1, 2), 2, (int64_t[]){2, 1}));
  tu_expect(ok, LT_F32, SHAPE(1, 2), 2, (double[]){5, 4}, 0);
  tu_expect(lt_one_hot(tu_i64(SHAPE(1), 1, (int64_t[]){2}), 3, LT_F32), LT_F32, SHAPE(1, 3), 2,
            (double[]){0, 0, 1}, 0);
  assert_int_equal(lt_last_status(), LT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_gather_axis0),
      TU_TEST(test_gather_axis1),
      TU_TEST(test_gather_3d_and_dtypes),
      TU_TEST(test_gather_0d_and_empty),
      TU_TEST(test_index_select),
      TU_TEST(test_index_select_0d_and_empty),
      TU_TEST(test_one_hot),
      TU_TEST(test_build_errors),
      TU_TEST(test_out_of_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
