/* lt_matmul: numpy.matmul semantics against hand-computed values. */
#include "test_util.h"

/* a = [[1, 2, 3], [4, 5, 6]], b = [[7, 8], [9, 10], [11, 12]] */
static const float kA23[] = {1, 2, 3, 4, 5, 6};
static const float kB32[] = {7, 8, 9, 10, 11, 12};

static void test_2d_2d(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA23);
  lt_tensor *b = tu_f32(SHAPE(3, 2), 2, kB32);
  tu_expect(lt_matmul(a, b), LT_F32, SHAPE(2, 2), 2, (double[]){58, 64, 139, 154}, 1e-6);
  /* b @ a: [3, 2] @ [2, 3] */
  tu_expect(lt_matmul(b, a), LT_F32, SHAPE(3, 3), 2,
            (double[]){39, 54, 69, 49, 68, 87, 59, 82, 105}, 1e-6);
}

static void test_1d_1d(void **state) {
  (void)state;
  lt_tensor *a = tu_f64(SHAPE(3), 1, (double[]){1, 2, 3});
  lt_tensor *b = tu_f64(SHAPE(3), 1, (double[]){4, 5, 6});
  lt_tensor *r = lt_matmul(a, b);
  tu_expect(r, LT_F64, NULL, 0, (double[]){32}, 1e-12);
  assert_int_equal(lt_ndim(r), 0);
}

static void test_1d_2d(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3), 1, (float[]){1, 2, 3});
  lt_tensor *b = tu_f32(SHAPE(3, 2), 2, kB32);
  tu_expect(lt_matmul(a, b), LT_F32, SHAPE(2), 1, (double[]){58, 64}, 1e-6);
}

static void test_2d_1d(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA23);
  lt_tensor *b = tu_f32(SHAPE(3), 1, (float[]){1, 1, 2});
  tu_expect(lt_matmul(a, b), LT_F32, SHAPE(2), 1, (double[]){9, 21}, 1e-6);
}

static void test_1d_batched(void **state) {
  (void)state;
  /* [3] @ [2, 3, 2] -> [2, 2]; [2, 2, 3] @ [3] -> [2, 2] */
  float a12[12];
  for (int i = 0; i < 12; i++) a12[i] = (float)(i + 1);
  lt_tensor *v = tu_f32(SHAPE(3), 1, (float[]){1, 0, 1});
  lt_tensor *b = tu_f32(SHAPE(2, 3, 2), 3, a12);
  /* batch 0: rows [1,2],[3,4],[5,6] -> [6, 8]; batch 1: [7,8],[9,10],[11,12] -> [18, 20] */
  tu_expect(lt_matmul(v, b), LT_F32, SHAPE(2, 2), 2, (double[]){6, 8, 18, 20}, 1e-6);
  lt_tensor *a = tu_f32(SHAPE(2, 2, 3), 3, a12);
  tu_expect(lt_matmul(a, v), LT_F32, SHAPE(2, 2), 2, (double[]){4, 10, 16, 22}, 1e-6);
}

static void test_batched(void **state) {
  (void)state;
  float a12[12];
  for (int i = 0; i < 12; i++) a12[i] = (float)(i + 1);
  lt_tensor *a = tu_f32(SHAPE(2, 2, 3), 3, a12);
  lt_tensor *b = tu_f32(SHAPE(3, 2), 2, kB32);
  tu_expect(lt_matmul(a, b), LT_F32, SHAPE(2, 2, 2), 3,
            (double[]){58, 64, 139, 154, 220, 244, 301, 334}, 1e-6);
  /* the batch may also be on the right: [3, 2]^T-free case [2, 3] @ [2, 3, 2] */
  lt_tensor *bb = tu_f32(SHAPE(2, 3, 2), 3, a12);
  lt_tensor *x = tu_f32(SHAPE(2, 3), 2, kA23);
  /* batch 0: [[1,2,3],[4,5,6]] @ [[1,2],[3,4],[5,6]] = [[22,28],[49,64]]
   * batch 1: [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] */
  tu_expect(lt_matmul(x, bb), LT_F32, SHAPE(2, 2, 2), 3,
            (double[]){22, 28, 49, 64, 58, 64, 139, 154}, 1e-6);
}

static void test_broadcast_batch(void **state) {
  (void)state;
  /* a: [2, 1, 2, 3] holding 0..11; b: [3, 3, 2] holding 0..17 -> [2, 3, 2, 2] */
  float av[12], bv[18];
  for (int i = 0; i < 12; i++) av[i] = (float)i;
  for (int i = 0; i < 18; i++) bv[i] = (float)i;
  lt_tensor *a = tu_f32(SHAPE(2, 1, 2, 3), 4, av);
  lt_tensor *b = tu_f32(SHAPE(3, 3, 2), 3, bv);
  lt_tensor *r = lt_matmul(a, b);
  assert_non_null(r);
  assert_int_equal(lt_ndim(r), 4);
  const int64_t want_shape[] = {2, 3, 2, 2};
  for (int d = 0; d < 4; d++) assert_int_equal(lt_dim(r, d), want_shape[d]);
  double got[24];
  tu_read(r, got, 24);
  /* r[0][0] = [[0,1,2],[3,4,5]] @ [[0,1],[2,3],[4,5]] */
  const double r00[] = {10, 13, 28, 40};
  /* r[1][2] = [[6,7,8],[9,10,11]] @ [[12,13],[14,15],[16,17]] */
  const double r12[] = {298, 319, 424, 454};
  /* r[0][1] = [[0,1,2],[3,4,5]] @ [[6,7],[8,9],[10,11]] */
  const double r01[] = {28, 31, 100, 112};
  for (int i = 0; i < 4; i++) {
    assert_float_equal(got[0 + i], r00[i], 1e-6);
    assert_float_equal(got[(1 * 3 + 2) * 4 + i], r12[i], 1e-6);
    assert_float_equal(got[(0 * 3 + 1) * 4 + i], r01[i], 1e-6);
  }
  /* every entry against a direct loop over the broadcast indices */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int r_ = 0; r_ < 2; r_++)
        for (int c = 0; c < 2; c++) {
          double acc = 0;
          for (int p = 0; p < 3; p++) acc += av[i * 6 + r_ * 3 + p] * bv[j * 6 + p * 2 + c];
          assert_float_equal(got[((i * 3 + j) * 2 + r_) * 2 + c], acc, 1e-6);
        }
}

static void test_int(void **state) {
  (void)state;
  lt_tensor *a = tu_i32(SHAPE(2, 2), 2, (int32_t[]){1, 2, 3, 4});
  lt_tensor *b = tu_i32(SHAPE(2, 2), 2, (int32_t[]){5, 6, 7, 8});
  tu_expect(lt_matmul(a, b), LT_I32, SHAPE(2, 2), 2, (double[]){19, 22, 43, 50}, 0);
  lt_tensor *c = tu_i64(SHAPE(2, 2), 2, (int64_t[]){-1, 0, 2, 3});
  /* i32 @ i64 -> i64 */
  tu_expect(lt_matmul(a, c), LT_I64, SHAPE(2, 2), 2, (double[]){3, 6, 5, 12}, 0);
  /* i64 accumulates exactly beyond 2^53 (a double accumulator would round) */
  const int64_t big = ((int64_t)1 << 53) + 1;
  lt_tensor *x = tu_i64(SHAPE(2), 1, (int64_t[]){big, 1});
  lt_tensor *y = tu_i64(SHAPE(2), 1, (int64_t[]){1, 2});
  lt_tensor *r = lt_matmul(x, y);
  int64_t got = 0;
  assert_int_equal(lt_to_data(r, &got, sizeof got), LT_OK);
  assert_true(got == big + 2);
}

static void test_promotion(void **state) {
  (void)state;
  lt_tensor *a = tu_i32(SHAPE(2, 3), 2, (int32_t[]){1, 2, 3, 4, 5, 6});
  lt_tensor *b = tu_f32(SHAPE(3, 2), 2, kB32);
  tu_expect(lt_matmul(a, b), LT_F32, SHAPE(2, 2), 2, (double[]){58, 64, 139, 154}, 1e-6);
  tu_expect(lt_matmul(b, a), LT_F32, SHAPE(3, 3), 2,
            (double[]){39, 54, 69, 49, 68, 87, 59, 82, 105}, 1e-6);
  lt_tensor *d = tu_f64(SHAPE(3), 1, (double[]){0.5, 0.25, 1});
  tu_expect(lt_matmul(lt_cast(a, LT_F32), d), LT_F64, SHAPE(2), 1, (double[]){4, 9.25}, 1e-12);
  lt_tensor *e = tu_i64(SHAPE(3), 1, (int64_t[]){1, 2, 3});
  tu_expect(lt_matmul(e, d), LT_F64, NULL, 0, (double[]){4}, 1e-12);
}

static void test_empty(void **state) {
  (void)state;
  /* k = 0: sums over nothing are 0 */
  lt_tensor *a = lt_zeros(CPU0, LT_F32, SHAPE(2, 0), 2);
  lt_tensor *b = lt_zeros(CPU0, LT_F32, SHAPE(0, 3), 2);
  tu_expect(lt_matmul(a, b), LT_F32, SHAPE(2, 3), 2, (double[]){0, 0, 0, 0, 0, 0}, 0);
  lt_tensor *ai = tu_i32(SHAPE(2, 0), 2, (int32_t[]){0});
  lt_tensor *bi = tu_i32(SHAPE(0, 2), 2, (int32_t[]){0});
  tu_expect(lt_matmul(ai, bi), LT_I32, SHAPE(2, 2), 2, (double[]){0, 0, 0, 0}, 0);
  lt_tensor *v0 = tu_f64(SHAPE(0), 1, (double[]){0});
  tu_expect(lt_matmul(v0, v0), LT_F64, NULL, 0, (double[]){0}, 0);
  /* n = 0 and m = 0: empty results */
  lt_tensor *n0 = lt_zeros(CPU0, LT_F32, SHAPE(0, 3), 2);
  lt_tensor *b32 = tu_f32(SHAPE(3, 2), 2, kB32);
  tu_expect(lt_matmul(n0, b32), LT_F32, SHAPE(0, 2), 2, NULL, 0);
  lt_tensor *a23 = tu_f32(SHAPE(2, 3), 2, kA23);
  lt_tensor *m0 = lt_zeros(CPU0, LT_F32, SHAPE(3, 0), 2);
  tu_expect(lt_matmul(a23, m0), LT_F32, SHAPE(2, 0), 2, NULL, 0);
  /* empty batch */
  lt_tensor *eb = lt_zeros(CPU0, LT_F32, SHAPE(0, 2, 3), 3);
  tu_expect(lt_matmul(eb, b32), LT_F32, SHAPE(0, 2, 2), 3, NULL, 0);
}

static void test_chain(void **state) {
  (void)state;
  /* (a @ b) @ v and a pending operand: everything stays lazy until read */
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA23);
  lt_tensor *b = tu_f32(SHAPE(3, 2), 2, kB32);
  lt_tensor *v = tu_f32(SHAPE(2), 1, (float[]){1, -1});
  lt_tensor *ab = lt_matmul(a, b);
  tu_expect(lt_matmul(ab, v), LT_F32, SHAPE(2), 1, (double[]){-6, -15}, 1e-6);
  tu_expect(lt_matmul(lt_add(a, a), b), LT_F32, SHAPE(2, 2), 2, (double[]){116, 128, 278, 308},
            1e-6);
}

static void test_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2, 3), 2, kA23);
  lt_tensor *b = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  TU_EXPECT_ERROR(lt_matmul(a, b), LT_ESHAPE, "[2, 3]");
  TU_EXPECT_ERROR(lt_matmul(a, b), LT_ESHAPE, "[2, 2]");
  TU_EXPECT_ERROR(lt_matmul(a, b), LT_ESHAPE, "lt_matmul");
  lt_tensor *v2 = tu_f32(SHAPE(2), 1, (float[]){1, 2});
  lt_tensor *v3 = tu_f32(SHAPE(3), 1, (float[]){1, 2, 3});
  TU_EXPECT_ERROR(lt_matmul(v2, v3), LT_ESHAPE, "[3]");
  TU_EXPECT_ERROR(lt_matmul(v3, a), LT_ESHAPE, "[2, 3]");
  TU_EXPECT_ERROR(lt_matmul(a, v2), LT_ESHAPE, "[2]");
  /* batch dims that do not broadcast */
  lt_tensor *x = lt_zeros(CPU0, LT_F32, SHAPE(2, 2, 3), 3);
  lt_tensor *y = lt_zeros(CPU0, LT_F32, SHAPE(3, 3, 2), 3);
  TU_EXPECT_ERROR(lt_matmul(x, y), LT_ESHAPE, "[3, 3, 2]");
  /* bool */
  lt_tensor *bo = tu_bool(SHAPE(3, 2), 2, (uint8_t[]){1, 0, 1, 0, 1, 0});
  TU_EXPECT_ERROR(lt_matmul(a, bo), LT_EDTYPE, "bool");
  TU_EXPECT_ERROR(lt_matmul(bo, a), LT_EDTYPE, "bool");
  /* 0-d */
  lt_tensor *s = lt_scalar(CPU0, LT_F32, 2.5);
  TU_EXPECT_ERROR(lt_matmul(s, a), LT_ESHAPE, "lt_matmul");
  TU_EXPECT_ERROR(lt_matmul(v3, s), LT_ESHAPE, "[]");
  /* NULL operand; an earlier error is kept through a chain */
  TU_EXPECT_ERROR(lt_matmul(NULL, a), LT_EINVAL, "lt_matmul");
  TU_EXPECT_ERROR(lt_matmul(lt_matmul(a, b), b), LT_ESHAPE, "[2, 3]");
  /* the library is still usable after the failures */
  tu_expect(lt_matmul(v3, v3), LT_F32, NULL, 0, (double[]){14}, 1e-6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_2d_2d),           TU_TEST(test_1d_1d),      TU_TEST(test_1d_2d),
      TU_TEST(test_2d_1d),           TU_TEST(test_1d_batched), TU_TEST(test_batched),
      TU_TEST(test_broadcast_batch), TU_TEST(test_int),        TU_TEST(test_promotion),
      TU_TEST(test_empty),           TU_TEST(test_chain),      TU_TEST(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
