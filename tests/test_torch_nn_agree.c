/* Cases where lazytensor disagreed with PyTorch 1.13 (found by a
 * differential run), each checked on both backends: max_pool2d's ceil-mode
 * window wider than the input and its windows of padding only, group_norm
 * with one value per group, and run-time index errors naming the public
 * function the caller used. Each expectation carries the torch call that
 * gave it. */
#include "test_util.h"
#include "test_backends.h"
#include "lazytensor_nn.h"

#include "../src/backend/backend.h"

static lt_tensor *leaf(lt_dtype dt, const int64_t *shape, int nd, const double *v) {
  lt_tensor *t;
  if (dt == LT_F64) {
    t = tu_f64(shape, nd, v);
  } else {
    float f[64];
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    t = tu_f32(shape, nd, f);
  }
  assert_int_equal(lt_set_requires_grad(t, true), LT_OK);
  return t;
}

/* ---- max_pool2d ------------------------------------------------------------------------- */

/* ceil_mode: the only window is wider than the input along both axes (legal:
 * it starts inside the input). */
TU_BOTH(test_max_pool_ceil_window_wider_than_input) {
  for (int k = 0; k < 2; k++) {
    lt_dtype dt = k ? LT_F64 : LT_F32;
    /* x = torch.tensor([[[[1., 4.], [3., 2.]]]], requires_grad=True)
     * y = F.max_pool2d(x, kernel_size=3, stride=2, ceil_mode=True)  -> [[[[4.]]]]
     * y.sum().backward(); x.grad -> [[[[0., 1.], [0., 0.]]]] */
    lt_tensor *x = leaf(dt, SHAPE(1, 1, 2, 2), 4, (double[]){1, 4, 3, 2});
    lt_tensor *y = lt_max_pool2d_n(x, SHAPE(3, 3), 2, SHAPE(2, 2), 2, NULL, 0, NULL, 0, true);
    assert_int_equal(lt_backward(lt_sum(y, NULL, 0, false)), LT_OK); /* before a read */
    tu_expect(y, dt, SHAPE(1, 1, 1, 1), 4, (double[]){4}, 0);
    tu_expect(lt_grad(x), dt, SHAPE(1, 1, 2, 2), 4, (double[]){0, 1, 0, 0}, 0);

    /* x = torch.tensor([[[[1., 4., 0.], [3., 2., 8.]]]], requires_grad=True)
     * y = F.max_pool2d(x, kernel_size=3, stride=2, ceil_mode=True)  -> [[[[8.]]]]
     * y.sum().backward(); x.grad -> [[[[0., 0., 0.], [0., 0., 1.]]]] */
    lt_tensor *x2 = leaf(dt, SHAPE(1, 2, 3), 3, (double[]){1, 4, 0, 3, 2, 8});
    lt_tensor *y2 = lt_max_pool2d_n(x2, SHAPE(3, 3), 2, SHAPE(2, 2), 2, NULL, 0, NULL, 0, true);
    assert_int_equal(lt_backward(lt_sum(y2, NULL, 0, false)), LT_OK);
    tu_expect(y2, dt, SHAPE(1, 1, 1), 3, (double[]){8}, 0);
    tu_expect(lt_grad(x2), dt, SHAPE(1, 2, 3), 3, (double[]){0, 0, 0, 0, 0, 1}, 0);
  }
  /* F.max_pool2d(x, kernel_size=3, stride=2) (floor mode) -> "Output size is too small" */
  lt_tensor *x = tu_f32(SHAPE(1, 1, 2, 2), 4, (float[]){1, 4, 3, 2});
  TU_EXPECT_ERROR(lt_max_pool2d_n(x, SHAPE(3, 3), 2, SHAPE(2, 2), 2, NULL, 0, NULL, 0, false),
                  LT_ESHAPE, "the output would be empty");
}

/* A dilated window whose taps all fall in the padding (padding <= kernel / 2
 * is all PyTorch asks): its value is -inf, the max over nothing. */
TU_BOTH(test_max_pool_window_of_padding_only) {
  for (int k = 0; k < 2; k++) {
    lt_dtype dt = k ? LT_F64 : LT_F32;
    /* x = torch.tensor([[[[1., 5.], [3., 2.]], [[0., -1.], [7., 6.]]]], requires_grad=True)
     * y = F.max_pool2d(x, kernel_size=(1, 2), padding=(0, 1), dilation=(1, 3))
     *   -> [[[[-inf], [-inf]], [[-inf], [-inf]]]] (each row's window reads columns -1 and 2)
     * PyTorch 1.13's CPU backward routes such a window's gradient through the index of its
     * first tap past the padding, outside the window (even outside the plane: with
     * (y * w).sum().backward(), w = [1, 2, 3, 4], x.grad comes out as
     * [[[[0, 0], [1, 0]], [[2, 0], [3, 0]]]], the 2 written from plane 0 into plane 1).
     * A max over no element has no argument, so here the gradient goes nowhere: zeros. */
    lt_tensor *x = leaf(dt, SHAPE(1, 2, 2, 2), 4, (double[]){1, 5, 3, 2, 0, -1, 7, 6});
    lt_tensor *y =
        lt_max_pool2d_n(x, SHAPE(1, 2), 2, NULL, 0, SHAPE(0, 1), 2, SHAPE(1, 3), 2, false);
    lt_tensor *w = leaf(dt, SHAPE(1, 2, 2, 1), 4, (double[]){1, 2, 3, 4});
    /* exp(y) = 0 keeps the loss finite, so every gradient stays a number */
    assert_int_equal(lt_backward(lt_sum(lt_mul(lt_exp(y), w), NULL, 0, false)), LT_OK);
    tu_expect(y, dt, SHAPE(1, 2, 2, 1), 4, (double[]){-INFINITY, -INFINITY, -INFINITY, -INFINITY},
              0);
    tu_expect(lt_grad(x), dt, SHAPE(1, 2, 2, 2), 4, (double[]){0, 0, 0, 0, 0, 0, 0, 0}, 0);
  }
  /* the window of padding only along the rows too, ceil mode, on a 3-d input:
   * F.max_pool2d(torch.tensor([[[1., 2.]]]), kernel_size=2, padding=1, dilation=2,
   *              ceil_mode=True) -> tensor([[[-inf, -inf]]]) (rows -1 and 1 only) */
  lt_tensor *x3 = tu_f32(SHAPE(1, 1, 2), 3, (float[]){1, 2});
  lt_tensor *y3 =
      lt_max_pool2d_n(x3, SHAPE(2, 2), 2, NULL, 0, SHAPE(1, 1), 2, SHAPE(2, 2), 2, true);
  tu_expect(y3, LT_F32, SHAPE(1, 1, 2), 3, (double[]){-INFINITY, -INFINITY}, 0);
}

/* ---- group_norm ------------------------------------------------------------------------ */

TU_BOTH(test_group_norm_one_value_per_group) {
  lt_tensor *w = tu_f32(SHAPE(2), 1, (float[]){2, 3}),
            *b = tu_f32(SHAPE(2), 1, (float[]){0.5f, -1});
  /* F.group_norm(torch.tensor([[1., 2.]]), 2) -> ValueError: Expected more than 1 value per
   * channel when training, got input size [1, 2] */
  TU_EXPECT_ERROR(lt_group_norm(tu_f32(SHAPE(1, 2), 2, (float[]){1, 2}), 2, NULL, NULL, 1e-5),
                  LT_ESHAPE,
                  "lt_group_norm: Expected more than 1 value per channel when training, got input "
                  "of shape [1, 2]");
  /* F.group_norm(torch.tensor([[[[1.]], [[2.]]]]), 2, w, b) -> the same ValueError, got input
   * size [1, 2, 1, 1] */
  TU_EXPECT_ERROR(lt_group_norm(tu_f32(SHAPE(1, 2, 1, 1), 4, (float[]){1, 2}), 2, w, b, 1e-5),
                  LT_ESHAPE, "got input of shape [1, 2, 1, 1]");
  /* two samples pass PyTorch's check (it counts N * C / G * H * W values):
   * F.group_norm(torch.tensor([[1., 2.], [3., 5.]]), 2, w, b)
   *   -> [[0.5, -1.0], [0.5, -1.0002]] (each value minus its own mean is 0: the bias; PyTorch's
   *   -1.0002 is its rounding of that 0) */
  lt_tensor *y = lt_group_norm(tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 5}), 2, w, b, 1e-5);
  tu_expect(y, LT_F32, SHAPE(2, 2), 2, (double[]){0.5, -1, 0.5, -1}, 1e-3);
  /* one group of two values: F.group_norm(torch.tensor([[1., 2.]]), 1, w, b)
   *   -> [[-1.5000, 1.9999]] */
  lt_tensor *y1 = lt_group_norm(tu_f32(SHAPE(1, 2), 2, (float[]){1, 2}), 1, w, b, 1e-5);
  tu_expect(y1, LT_F32, SHAPE(1, 2), 2, (double[]){-1.5, 1.9999}, 1e-3);
}

/* ---- run-time index errors name the function the caller used ------------------------------ */

static lt_tensor *logits23(void) { return tu_f32(SHAPE(2, 3), 2, (float[]){1, 2, 3, 4, 5, 6}); }
static lt_tensor *target07(void) { return tu_i64(SHAPE(2), 1, (int64_t[]){0, 7}); }

/* t fails when read, with needle in the message; in eager mode (LT_EAGER=1)
 * the op runs as it is traced, so t is NULL with that error already. */
static void expect_index_error(lt_tensor *t, const char *needle) {
  if (t) {
    tu_expect_exec_error(t, needle);
    return;
  }
  assert_int_equal(lt_last_status(), LT_EEXEC);
  if (!strstr(lt_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", lt_last_error(), needle);
}

/* The index errors of every function that builds index ops for its caller. */
static void expect_caller_errors(void) {
  /* F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 7])) -> IndexError: Target 7 is out of
   * bounds. (F.nll_loss alike) */
  expect_index_error(
      lt_nn_cross_entropy_ex(logits23(), target07(), LT_NN_REDUCTION_MEAN, -100, 0.0),
      "lt_nn_cross_entropy_ex: target 7 out of range [0, 3) along axis 1");
  expect_index_error(lt_nn_nll_loss(logits23(), target07(), LT_NN_REDUCTION_SUM, -100),
                     "lt_nn_nll_loss: target 7 out of range [0, 3) along axis 1");
  expect_index_error(lt_nn_cross_entropy(logits23(), target07()),
                     "lt_nn_cross_entropy: target 7 out of range [0, 3)");
  /* F.embedding(torch.tensor([0, 5]), torch.randn(3, 2)) -> IndexError: index out of range in
   * self */
  lt_tensor *w = tu_f32(SHAPE(3, 2), 2, (float[]){1, 2, 3, 4, 5, 6});
  expect_index_error(lt_embedding(tu_i64(SHAPE(2), 1, (int64_t[]){0, 5}), w),
                     "lt_embedding: index 5 out of range [0, 3) along axis 0");
  /* torch.zeros(2, 3).scatter(0, torch.tensor([[0, 2, 1]]), torch.ones(1, 3)) -> RuntimeError:
   * index 2 is out of bounds for dimension 0 with size 2 (scatter_add alike) */
  lt_tensor *a = lt_zeros(CPU0, LT_F32, SHAPE(2, 3), 2),
            *src = lt_ones(CPU0, LT_F32, SHAPE(1, 3), 2);
  lt_tensor *i = tu_i64(SHAPE(1, 3), 2, (int64_t[]){0, 2, 1});
  expect_index_error(lt_scatter(a, 0, i, src),
                     "lt_scatter: index 2 out of range [0, 2) along axis 0");
  expect_index_error(lt_scatter_add(a, 0, i, src),
                     "lt_scatter_add: index 2 out of range [0, 2) along axis 0");
  /* torch.zeros(3, 2).gather(0, torch.tensor([[0, 7], [1, 1]])) -> RuntimeError: index 7 is out
   * of bounds for dimension 0 with size 3; a gather of the same shapes built directly, after
   * the loss's, is still named by its op: no scope is left open */
  lt_tensor *g = lt_gather(lt_zeros(CPU0, LT_F32, SHAPE(2, 3), 2), 1,
                           tu_i64(SHAPE(2, 1), 2, (int64_t[]){0, 7}));
  expect_index_error(g, "gather: index 7 out of range [0, 3) along axis 1");
  assert_null(strstr(lt_last_error(), "lt_nn"));
}

TU_BOTH(test_index_errors_name_the_caller) { expect_caller_errors(); }

/* An executable loaded from the persistent cache reports the same names (the
 * caller is one of its instructions' attributes). */
static void test_index_errors_from_the_disk_cache(void **state) {
  (void)state;
  char dir[64];
  tu_mkdtemp(dir, sizeof dir, "lt_caller_cache");
  assert_int_equal(lt_set_persistent_cache(dir, false), LT_OK);
  tu_reset_executor();    /* nothing compiled by the tests before */
  expect_caller_errors(); /* compiles and stores */
  long long hits = tu_counter("PersistentCacheHit");
  lt_cache_clear(); /* the memory cache: the next lookups go to disk */
  expect_caller_errors();
  assert_true(tu_counter("PersistentCacheHit") > hits);
  assert_int_equal(lt_set_persistent_cache(NULL, false), LT_OK);
  tu_rm_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_max_pool_ceil_window_wider_than_input),
      TU_TEST(test_max_pool_window_of_padding_only),
      TU_TEST(test_group_norm_one_value_per_group),
      TU_TEST(test_index_errors_name_the_caller),
      TU_TEST(test_index_errors_from_the_disk_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
