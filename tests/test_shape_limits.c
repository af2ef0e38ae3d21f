/* Shapes too large to exist: every op that makes a shape refuses an element
 * count beyond the size limit (LT_MAX_NUMEL, about 2^59, counted over the
 * non-zero dims) with LT_ESHAPE when it is called, naming the op and the shape,
 * so no backend ever sees a byte count that wraps. Each case runs with the ref
 * backend and with cpu forced (lt__backend_force), and checks that the operands
 * keep their values and the library keeps working after the refusal. */
#include "test_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_node.h"

#define BIG (1LL << 40)
#define WIDE (1LL << 22) /* BIG * WIDE = 2^62 elements: 2^64 bytes of f32, which wraps to 0 */
#define LIMIT ((1LL << 59) - 1) /* LT_MAX_NUMEL on a 64-bit machine: INT64_MAX / 16 */

static int force_ref(void **state) {
  (void)state;
  lt__backend_force(&lt__ref_backend);
  return 0;
}
static int force_cpu(void **state) {
  (void)state;
  lt__backend_force(&lt__cpu_backend);
  return 0;
}
static int unforce(void **state) {
  (void)state;
  lt_wait_device_ops(CPU0);
  lt__backend_force(NULL);
  return 0;
}

/* x broadcast (lazily, no memory) to shape. */
static lt_tensor *expand(lt_tensor *x, const int64_t *shape, int ndim) {
  lt_tensor *e = lt_expand(x, shape, ndim);
  if (!e) fail_msg("lt_expand: %s", lt_last_error());
  return e;
}

/* After a refusal: e (src, a [1, 1] tensor holding v, expanded to [d0, d1])
 * still has its shape, src its value, and a new graph over src still compiles
 * and runs on the forced backend. (e itself is too large for ref to compute:
 * ref computes every node in full.) */
static void expect_intact(lt_tensor *src, lt_tensor *e, int64_t d0, int64_t d1, double v) {
  assert_int_equal(lt_ndim(e), 2);
  assert_int_equal(lt_dim(e, 0), d0);
  assert_int_equal(lt_dim(e, 1), d1);
  tu_expect(src, lt_get_dtype(src), SHAPE(1, 1), 2, (double[]){v}, 0);
  lt_tensor *sum = lt_add(expand(src, SHAPE(2, 1), 2), src);
  tu_expect(sum, lt_get_dtype(src), SHAPE(2, 1), 2, (double[]){2 * v, 2 * v}, 0);
}

/* The reported case: [2^40, 1] + [1, 2^22] broadcast to 2^62 elements. The
 * cpu worker crashed (the byte count wrapped to 0) and a sum of it hung. */
static void test_broadcast_too_large(void **state) {
  (void)state;
  lt_tensor *one = tu_f32(SHAPE(1, 1), 2, (float[]){3});
  lt_tensor *a = expand(one, SHAPE(BIG, 1), 2), *b = expand(one, SHAPE(1, WIDE), 2);
  TU_EXPECT_ERROR(lt_add(a, b), LT_ESHAPE, "lt_add: shapes [1099511627776, 1] and [1, 4194304]");
  tu_expect_substr(lt_last_error(), "[1099511627776, 4194304], which is too large");
  TU_EXPECT_ERROR(lt_sum(lt_add(a, b), NULL, 0, false), LT_ESHAPE, "lt_add");
  TU_EXPECT_ERROR(lt_mul(b, a), LT_ESHAPE, "lt_mul");
  TU_EXPECT_ERROR(lt_gt(a, b), LT_ESHAPE, "lt_gt");
  lt_tensor *cond = lt_cast(a, LT_BOOL);
  TU_EXPECT_ERROR(lt_where(cond, a, b), LT_ESHAPE, "lt_where");
  /* The operands are untouched, and a sum over one of them runs. */
  expect_intact(one, a, BIG, 1, 3);
  expect_intact(one, b, 1, WIDE, 3);
  tu_expect(lt_sum(b, NULL, 0, false), LT_F32, NULL, 0, (double[]){3.0 * WIDE}, 0);
}

/* [2^40, 1] @ [1, 2^22], and batch dims that broadcast to too much. */
static void test_matmul_too_large(void **state) {
  (void)state;
  lt_tensor *one = tu_f32(SHAPE(1, 1), 2, (float[]){2});
  lt_tensor *a = expand(one, SHAPE(BIG, 1), 2), *b = expand(one, SHAPE(1, WIDE), 2);
  TU_EXPECT_ERROR(lt_matmul(a, b), LT_ESHAPE, "lt_matmul: shapes [1099511627776, 1] and [1, ");
  tu_expect_substr(lt_last_error(), "result of shape [1099511627776, 4194304]");
  lt_tensor *one4 = lt_reshape(one, SHAPE(1, 1, 1, 1), 4);
  lt_tensor *x = expand(one4, SHAPE(BIG, 1, 1, 1), 4), *y = expand(one4, SHAPE(1, WIDE, 1, 1), 4);
  TU_EXPECT_ERROR(lt_matmul(x, y), LT_ESHAPE, "too large");
  tu_expect_substr(lt_last_error(), "lt_matmul");
  /* A fitting product of the same source still runs: [2, 1] @ [1, 2]. */
  lt_tensor *p = lt_matmul(expand(one, SHAPE(2, 1), 2), expand(one, SHAPE(1, 2), 2));
  tu_expect(p, LT_F32, SHAPE(2, 2), 2, (double[]){4, 4, 4, 4}, 0);
  expect_intact(one, a, BIG, 1, 2);
}

static void test_expand_too_large(void **state) {
  (void)state;
  lt_tensor *one = tu_f32(SHAPE(1, 1), 2, (float[]){5});
  TU_EXPECT_ERROR(lt_expand(one, SHAPE(BIG, WIDE), 2), LT_ESHAPE,
                  "lt_expand: shape [1099511627776, 4194304] is too large");
  /* An empty result is held to the limit too: its strides are the products
   * of its other dims (2^80 here). */
  lt_tensor *empty = lt_zeros(CPU0, LT_F32, SHAPE(0, 1, 1), 3);
  TU_EXPECT_ERROR(lt_expand(empty, SHAPE(0, BIG, BIG), 3), LT_ESHAPE, "too large");
  TU_EXPECT_ERROR(lt_zeros(CPU0, LT_F32, SHAPE(0, BIG, BIG), 3), LT_ESHAPE, "too large");
  /* Right at the limit it is accepted (lazily: nothing is allocated); one
   * more element is not. */
  lt_tensor *fit = expand(one, SHAPE(LIMIT, 1), 2);
  assert_int_equal(lt_numel(fit), LIMIT);
  TU_EXPECT_ERROR(lt_expand(one, SHAPE(LIMIT + 1, 1), 2), LT_ESHAPE, "too large");
  tu_expect(one, LT_F32, SHAPE(1, 1), 2, (double[]){5}, 0);
}

static void test_reshape_too_large(void **state) {
  (void)state;
  lt_tensor *empty = lt_zeros(CPU0, LT_F32, SHAPE(0), 1);
  TU_EXPECT_ERROR(lt_reshape(empty, SHAPE(0, BIG, BIG), 3), LT_ESHAPE,
                  "lt_reshape: shape [0, 1099511627776, 1099511627776] is too large");
  lt_tensor *r = lt_reshape(empty, SHAPE(0, BIG), 2); /* 2^40: fits */
  assert_non_null(r);
  assert_int_equal(lt_dim(r, 1), BIG);
  lt_tensor *x = tu_f32(SHAPE(2), 1, (float[]){1, 2});
  TU_EXPECT_ERROR(lt_reshape(x, SHAPE(BIG, WIDE, 0), 3), LT_ESHAPE, "lt_reshape");
  tu_expect(x, LT_F32, SHAPE(2), 1, (double[]){1, 2}, 0);
}

static void test_concat_and_pad_too_large(void **state) {
  (void)state;
  lt_tensor *one = tu_f32(SHAPE(1, 1), 2, (float[]){7});
  lt_tensor *half = expand(one, SHAPE(1LL << 58, 1), 2); /* 2^58: fits, three of them do not */
  lt_tensor *parts[3] = {half, half, half};
  TU_EXPECT_ERROR(lt_concat(parts, 3, 0), LT_ESHAPE, "lt_concat");
  tu_expect_substr(lt_last_error(), "too large");
  TU_EXPECT_ERROR(lt_stack(parts, 3, 0), LT_ESHAPE, "lt_stack");
  lt_tensor *a = expand(one, SHAPE(BIG, 1), 2);
  TU_EXPECT_ERROR(lt_pad_n(a, SHAPE(0, 0, 0, WIDE), 4, 0), LT_ESHAPE,
                  "lt_pad_n: shape [1099511627776, 4194305] is too large");
  expect_intact(one, a, BIG, 1, 7);
  lt_tensor *two[2] = {one, one};
  tu_expect(lt_concat(two, 2, 0), LT_F32, SHAPE(2, 1), 2, (double[]){7, 7}, 0);
}

static void test_index_ops_too_large(void **state) {
  (void)state;
  lt_tensor *zero = tu_i64(SHAPE(1), 1, (int64_t[]){0});
  lt_tensor *idx = expand(zero, SHAPE(BIG), 1);
  TU_EXPECT_ERROR(lt_one_hot(idx, WIDE, LT_F32), LT_ESHAPE,
                  "lt_one_hot: shape [1099511627776, 4194304] is too large");
  lt_tensor *row = expand(tu_f32(SHAPE(1, 1), 2, (float[]){4}), SHAPE(1, BIG), 2);
  TU_EXPECT_ERROR(lt_index_select(row, 0, expand(zero, SHAPE(WIDE), 1)), LT_ESHAPE,
                  "lt_index_select: shape [4194304, 1099511627776] is too large");
  tu_expect(lt_one_hot(zero, 3, LT_I32), LT_I32, SHAPE(1, 3), 2, (double[]){1, 0, 0}, 0);
  tu_expect(zero, LT_I64, SHAPE(1), 1, (double[]){0}, 0);
}

static void test_creation_too_large(void **state) {
  (void)state;
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_F32, 0, 1e18, 1), LT_ESHAPE, "lt_arange");
  TU_EXPECT_ERROR(lt_full(CPU0, LT_F64, SHAPE(BIG, WIDE), 2, 1), LT_ESHAPE, "lt_full");
  TU_EXPECT_ERROR(lt_from_data(CPU0, LT_F32, SHAPE(BIG, WIDE), 2, NULL), LT_ESHAPE, "too large");
}

/* The choke point: a node of a shape beyond the limit is refused whichever
 * builder asks, with the op's name. */
static void test_node_refuses_too_large(void **state) {
  (void)state;
  lt_clear_error();
  lt_node *n = lt__node_const(LT_F32, SHAPE(BIG, WIDE), 2, 1.0);
  assert_null(n);
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "[1099511627776, 4194304] is too large");
  n = lt__node_const(LT_F32, SHAPE(LIMIT), 1, 1.0);
  assert_non_null(n);
  lt__node_release(n);
}

#define CASES(prefix)                                                               \
  const struct CMUnitTest prefix[] = {                                              \
      TU_TEST(test_broadcast_too_large),      TU_TEST(test_matmul_too_large),       \
      TU_TEST(test_expand_too_large),         TU_TEST(test_reshape_too_large),      \
      TU_TEST(test_concat_and_pad_too_large), TU_TEST(test_index_ops_too_large),    \
      TU_TEST(test_creation_too_large),       TU_TEST(test_node_refuses_too_large), \
  }

int main(void) {
  CASES(tests);
  int failed = cmocka_run_group_tests_name("ref", tests, force_ref, unforce);
  if (tu_cpu_allowed()) /* not in valgrind's run: see tu_cpu_allowed */
    failed += cmocka_run_group_tests_name("cpu", tests, force_cpu, unforce);
  return failed;
}
