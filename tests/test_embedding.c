/* lt_embedding and lt_nn_embedding_*: rows picked for indices of any shape
 * (against plain C loops), the gradient into the table (repeats sum; against
 * hand sums and finite differences), errors at build and execution time, and
 * the layer's N(0, 1) initialisation. */
#include "test_grad_util.h"

#include "lazytensor_nn.h"

/* weight[r][c] = 10 r + c, [5, 3] */
static void table(double *w) {
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) w[r * 3 + c] = 10 * r + c;
}

static void test_embedding_values(void **state) {
  (void)state;
  double wv[15], want[64];
  table(wv);
  lt_tensor *w = tu_f64(SHAPE(5, 3), 2, wv);
  /* [2, 3] i64 indices with repeats -> [2, 3, 3] */
  int64_t idx[6] = {4, 0, 2, 2, 4, 1};
  for (int i = 0; i < 6; i++)
    for (int c = 0; c < 3; c++) want[i * 3 + c] = wv[idx[i] * 3 + c];
  tu_expect(lt_embedding(tu_i64(SHAPE(2, 3), 2, idx), w), LT_F64, SHAPE(2, 3, 3), 3, want, 0);
  /* the same as i32, as [3, 1, 2] */
  int32_t idx32[6] = {4, 0, 2, 2, 4, 1};
  tu_expect(lt_embedding(tu_i32(SHAPE(3, 1, 2), 3, idx32), w), LT_F64, SHAPE(3, 1, 2, 3), 4, want,
            0);
  /* 0-d index: one row; 1-d; empty */
  tu_expect(lt_embedding(tu_i64(NULL, 0, (int64_t[]){3}), w), LT_F64, SHAPE(3), 1,
            (double[]){30, 31, 32}, 0);
  tu_expect(lt_embedding(tu_i32(SHAPE(2), 1, (int32_t[]){1, 1}), w), LT_F64, SHAPE(2, 3), 2,
            (double[]){10, 11, 12, 10, 11, 12}, 0);
  tu_expect(lt_embedding(lt_zeros(CPU0, LT_I64, SHAPE(0, 2), 2), w), LT_F64, SHAPE(0, 2, 3), 3,
            NULL, 0);
  /* other table dtypes, a pending table and pending indices */
  lt_tensor *wi = lt_cast(w, LT_I32);
  tu_expect(lt_embedding(tu_i64(SHAPE(1), 1, (int64_t[]){2}), wi), LT_I32, SHAPE(1, 3), 2,
            (double[]){20, 21, 22}, 0);
  lt_tensor *pi =
      lt_add(tu_i64(SHAPE(2), 1, (int64_t[]){1, 2}), tu_i64(SHAPE(2), 1, (int64_t[]){1, 2}));
  tu_expect(lt_embedding(pi, lt_mul(w, w)), LT_F64, SHAPE(2, 3), 2,
            (double[]){400, 441, 484, 1600, 1681, 1764}, 0);
}

static void test_embedding_errors(void **state) {
  (void)state;
  double wv[15];
  table(wv);
  lt_tensor *w = tu_f64(SHAPE(5, 3), 2, wv);
  lt_tensor *idx = tu_i64(SHAPE(2), 1, (int64_t[]){0, 1});
  TU_EXPECT_ERROR(lt_embedding(NULL, w), LT_EINVAL, "lt_embedding");
  TU_EXPECT_ERROR(lt_embedding(idx, NULL), LT_EINVAL, "lt_embedding");
  TU_EXPECT_ERROR(lt_embedding(tu_f32(SHAPE(1), 1, (float[]){1}), w), LT_EDTYPE, "i32 or i64");
  TU_EXPECT_ERROR(lt_embedding(idx, tu_f64(SHAPE(3), 1, (double[]){1, 2, 3})), LT_ESHAPE,
                  "must be 2-d");
  /* index values are data: out of range fails at execution */
  tu_expect_exec_error(lt_embedding(tu_i64(SHAPE(2), 1, (int64_t[]){0, 5}), w), "out of range");
  tu_expect_exec_error(lt_embedding(tu_i32(SHAPE(1, 1), 2, (int32_t[]){-1}), w), "index -1");
  lt_clear_error();
  tu_expect(lt_embedding(idx, w), LT_F64, SHAPE(2, 3), 2, (double[]){0, 1, 2, 10, 11, 12}, 0);
}

/* The gradient of sum(embedding(idx, w) * r): row k of w gets the sum of the
 * rows of r whose index is k (repeats add), other rows 0. */
static void test_embedding_grad(void **state) {
  (void)state;
  double wv[15], rv[18], want[15] = {0}, got[15];
  table(wv);
  for (int i = 0; i < 18; i++) rv[i] = 0.25 * i - 1;
  int64_t idx[6] = {4, 0, 2, 2, 4, 4};
  for (int i = 0; i < 6; i++)
    for (int c = 0; c < 3; c++) want[idx[i] * 3 + c] += rv[i * 3 + c];
  lt_tensor *w = tu_f64(SHAPE(5, 3), 2, wv);
  assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
  lt_tensor *e = lt_embedding(tu_i64(SHAPE(3, 2), 2, idx), w);
  lt_tensor *loss = lt_sum(lt_mul(e, tu_f64(SHAPE(3, 2, 3), 3, rv)), NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  tu_read(lt_grad(w), got, 15);
  for (int i = 0; i < 15; i++)
    if (!tu_near(got[i], want[i], 1e-12)) fail_msg("grad %d: got %g, want %g", i, got[i], want[i]);
}

static lt_tensor *apply_embedding(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_tanh(lt_embedding(in[1], in[0]));
}

static void test_embedding_fd(void **state) {
  (void)state;
  static const double kW[] = {0.3, -1.2, 0.7, 2.0, -0.4, 1.1, 0.9, -2.2};
  static const double kIdx[] = {3, 1, 1, 0, 3, 3};
  tg_input in[2] = {{SHAPE(4, 2), 2, kW, true, LT_F64}, {SHAPE(2, 3), 2, kIdx, false, LT_I32}};
  tg_check("embedding", apply_embedding, NULL, in, 2, 1e-6);
}

/* ---- the layer ---- */

static void test_nn_embedding(void **state) {
  (void)state;
  lt_nn_embedding l;
  assert_int_equal(lt_set_seed(CPU0, 1234), LT_OK);
  assert_int_equal(lt_nn_embedding_init(&l, CPU0, LT_F32, 200, 32), LT_OK);
  assert_int_equal(l.num, 200);
  assert_int_equal(l.dim, 32);
  assert_int_equal(lt_ndim(l.weight), 2);
  assert_int_equal(lt_dim(l.weight, 0), 200);
  assert_int_equal(lt_dim(l.weight, 1), 32);
  assert_int_equal(lt_get_dtype(l.weight), LT_F32);
  assert_true(lt_get_requires_grad(l.weight));
  /* N(0, 1): the mean and variance of 6400 draws */
  double *v = tu_values(l.weight), s = 0, ss = 0;
  for (int i = 0; i < 6400; i++) s += v[i], ss += v[i] * v[i];
  double mean = s / 6400, var = ss / 6400 - mean * mean;
  assert_true(fabs(mean) < 0.05);
  assert_true(fabs(var - 1) < 0.08);
  /* forward picks the rows */
  lt_tensor *y = lt_nn_embedding_forward(&l, tu_i64(SHAPE(1, 2), 2, (int64_t[]){199, 0}));
  assert_non_null(y);
  assert_int_equal(lt_ndim(y), 3);
  double *yv = tu_values(y);
  for (int c = 0; c < 32; c++) {
    assert_true(yv[c] == v[199 * 32 + c]);
    assert_true(yv[32 + c] == v[c]);
  }
  free(yv);
  free(v);
  lt_nn_embedding_free(&l);
  assert_null(l.weight);
  lt_nn_embedding_free(NULL);
  /* errors leave the layer empty */
  assert_int_equal(lt_nn_embedding_init(&l, CPU0, LT_F32, 0, 3), LT_EINVAL);
  assert_null(l.weight);
  assert_int_equal(lt_nn_embedding_init(&l, CPU0, LT_I32, 2, 3), LT_EDTYPE);
  assert_int_equal(lt_nn_embedding_init(NULL, CPU0, LT_F32, 2, 3), LT_EINVAL);
  TU_EXPECT_ERROR(lt_nn_embedding_forward(&l, tu_i64(SHAPE(1), 1, (int64_t[]){0})), LT_EINVAL,
                  "not initialised");
  TU_EXPECT_ERROR(lt_nn_embedding_forward(NULL, NULL), LT_EINVAL, "not initialised");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_embedding_values), TU_TEST(test_embedding_errors), TU_TEST(test_embedding_grad),
      TU_TEST(test_embedding_fd),     TU_TEST(test_nn_embedding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
