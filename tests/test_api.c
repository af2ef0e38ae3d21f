/* The API consistency rules of lazytensor.h's Conventions (docs/API.md):
 *  - the counts of array arguments are checked: a count that does not fit
 *    is LT_EINVAL naming the function called, and nothing is created;
 *  - a {h, w} count of 1 is one value for both axes;
 *  - every deprecated alias still compiles and gives what its new name
 *    gives. This is the one place that calls the aliases (the warning is
 *    silenced here only), so it fails when an alias breaks. */
#include "test_util.h"

#include "lazytensor_nn.h"

/* The values of t as doubles (malloc'd; n gets the count). */
static double *values(lt_tensor *t, int64_t *n) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  *n = lt_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(*n + 1));
  for (int64_t i = 0; i < *n; i++) assert_int_equal(lt_item(t, i, &v[i]), LT_OK);
  return v;
}

/* a and b have one dtype, shape and value (bit for bit: the same graph). */
static void expect_same(lt_tensor *a, lt_tensor *b) {
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(lt_get_dtype(a), lt_get_dtype(b));
  assert_int_equal(lt_ndim(a), lt_ndim(b));
  for (int i = 0; i < lt_ndim(a); i++) assert_int_equal(lt_dim(a, i), lt_dim(b, i));
  int64_t na, nb;
  double *va = values(a, &na), *vb = values(b, &nb);
  assert_int_equal(na, nb);
  for (int64_t i = 0; i < na; i++)
    if (memcmp(&va[i], &vb[i], sizeof(double)) != 0)
      fail_msg("element %lld: %.17g vs %.17g", (long long)i, va[i], vb[i]);
  free(va);
  free(vb);
}

/* A failed call: NULL result (checked by the caller), LT_EINVAL, and a
 * message that starts with the function's name and holds needle. */
static void expect_einval(const char *fn, const char *needle) {
  assert_int_equal(lt_last_status(), LT_EINVAL);
  char prefix[96];
  snprintf(prefix, sizeof prefix, "%s: ", fn);
  if (strncmp(lt_last_error(), prefix, strlen(prefix)) != 0 || !strstr(lt_last_error(), needle))
    fail_msg("message '%s' does not start with '%s' or lacks '%s'", lt_last_error(), prefix,
             needle);
}

#define EXPECT_COUNT_ERROR(call, fn, needle)                       \
  do {                                                             \
    lt_clear_error();                                              \
    int64_t live_ = lt_device_live_tensors(CPU0);                  \
    if ((call) != NULL) fail_msg("expected failure of %s", #call); \
    assert_int_equal(lt_device_live_tensors(CPU0), live_);         \
    expect_einval(fn, needle);                                     \
  } while (0)

static lt_tensor *ramp(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *v = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = (float)((i * 7) % 11) - 5.0f;
  lt_tensor *t = tu_f32(shape, ndim, v);
  free(v);
  return t;
}

/* ---- counts --------------------------------------------------------------------------- */

static void test_slice_pad_counts(void **state) {
  (void)state;
  lt_tensor *a = ramp(SHAPE(3, 4), 2);
  /* a count other than the rank: the arrays are too short or too long */
  EXPECT_COUNT_ERROR(lt_slice_n(a, SHAPE(1), SHAPE(2), NULL, 1), "lt_slice_n",
                     "have 1 entries, but a has 2 axes");
  EXPECT_COUNT_ERROR(lt_slice_n(a, SHAPE(0, 0, 0), NULL, NULL, 3), "lt_slice_n", "a has 2 axes");
  EXPECT_COUNT_ERROR(lt_slice_n(a, NULL, NULL, NULL, -1), "lt_slice_n", "a has 2 axes");
  EXPECT_COUNT_ERROR(lt_pad_n(a, SHAPE(1, 1), 2, 0), "lt_pad_n", "pads has 2 entries");
  EXPECT_COUNT_ERROR(lt_pad_n(a, SHAPE(1, 1, 1, 1, 1), 5, 0), "lt_pad_n", "(2 entries each: 4)");
  /* the right counts work, NULL arrays included */
  tu_expect(lt_slice_n(a, SHAPE(1, 0), NULL, SHAPE(1, 3), 2), LT_F32, SHAPE(2, 2), 2,
            (double[]){1, 0, -4, -5}, 0);
  tu_expect(lt_pad_n(lt_slice_n(a, NULL, SHAPE(1, 1), NULL, 2), SHAPE(0, 1, 1, 0), 4, 9), LT_F32,
            SHAPE(2, 2), 2, (double[]){9, -5, 9, 9}, 0);
  tu_expect(lt_slice_n(tu_f32(NULL, 0, (float[]){2}), NULL, NULL, NULL, 0), LT_F32, NULL, 0,
            (double[]){2}, 0);
}

static void test_conv_pool_counts(void **state) {
  (void)state;
  lt_tensor *x = ramp(SHAPE(1, 2, 6, 6), 4), *w = ramp(SHAPE(3, 2, 3, 3), 4);
  lt_tensor *wt = ramp(SHAPE(2, 3, 3, 3), 4);
  const int64_t *two = SHAPE(2, 2), *k3 = SHAPE(3, 3);
  EXPECT_COUNT_ERROR(lt_conv2d_n(x, w, NULL, two, 3, NULL, 0, NULL, 0, 1), "lt_conv2d_n",
                     "stride has 3 entries");
  EXPECT_COUNT_ERROR(lt_conv2d_n(x, w, NULL, NULL, 0, two, -1, NULL, 0, 1), "lt_conv2d_n",
                     "padding has -1 entries");
  EXPECT_COUNT_ERROR(lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, NULL, 2, 1), "lt_conv2d_n",
                     "dilation is NULL with 2 entries");
  EXPECT_COUNT_ERROR(lt_conv_transpose2d_n(x, wt, NULL, NULL, 0, NULL, 0, two, 3, NULL, 0, 1),
                     "lt_conv_transpose2d_n", "output_padding has 3 entries");
  EXPECT_COUNT_ERROR(lt_max_pool2d_n(x, k3, 0, NULL, 0, NULL, 0, NULL, 0, false), "lt_max_pool2d_n",
                     "kernel has 0 entries");
  EXPECT_COUNT_ERROR(lt_max_pool2d_n(x, k3, 2, NULL, 0, NULL, 0, two, 4, false), "lt_max_pool2d_n",
                     "dilation has 4 entries");
  EXPECT_COUNT_ERROR(lt_avg_pool2d_n(x, k3, 3, NULL, 0, NULL, 0, false, true, 0), "lt_avg_pool2d_n",
                     "kernel has 3 entries");
  EXPECT_COUNT_ERROR(lt_adaptive_avg_pool2d_n(x, two, 0), "lt_adaptive_avg_pool2d_n",
                     "output_size has 0 entries");
  /* the nn conveniences check under their own names */
  EXPECT_COUNT_ERROR(lt_nn_max_pool2d_n(x, k3, 2, two, 3, NULL, 0), "lt_nn_max_pool2d_n",
                     "stride has 3 entries");
  EXPECT_COUNT_ERROR(lt_nn_avg_pool2d_n(x, NULL, 1, NULL, 0, NULL, 0), "lt_nn_avg_pool2d_n",
                     "kernel is NULL with 1 entries");
  lt_nn_conv2d l;
  lt_clear_error();
  assert_int_equal(
      lt_nn_conv2d_init_n(&l, CPU0, LT_F32, 2, 3, k3, 2, NULL, 0, two, 5, NULL, 0, 1, true),
      LT_EINVAL);
  expect_einval("lt_nn_conv2d_init_n", "padding has 5 entries");
  assert_null(l.weight);
  assert_int_equal(
      lt_nn_conv2d_init_n(&l, CPU0, LT_F32, 2, 3, k3, 0, NULL, 0, NULL, 0, NULL, 0, 1, true),
      LT_EINVAL);
  expect_einval("lt_nn_conv2d_init_n", "kernel has 0 entries");

  /* a count of 1 is one value for both axes: the same as the pair */
  const int64_t one_two = 2, one_one = 1;
  expect_same(lt_conv2d_n(x, w, NULL, &one_two, 1, &one_one, 1, NULL, 0, 1),
              lt_conv2d_n(x, w, NULL, two, 2, SHAPE(1, 1), 2, NULL, 0, 1));
  expect_same(lt_max_pool2d_n(x, &one_two, 1, NULL, 0, NULL, 0, NULL, 0, false),
              lt_max_pool2d_n(x, two, 2, two, 2, NULL, 0, NULL, 0, false));
  expect_same(lt_adaptive_avg_pool2d_n(x, &one_two, 1), lt_adaptive_avg_pool2d_n(x, two, 2));
  assert_int_equal(lt_nn_conv2d_init_n(&l, CPU0, LT_F32, 2, 3, (const int64_t[]){3}, 1, &one_two, 1,
                                       NULL, 0, NULL, 0, 1, true),
                   LT_OK);
  assert_true(l.kernel[0] == 3 && l.kernel[1] == 3 && l.stride[0] == 2 && l.stride[1] == 2);
  assert_true(l.padding[0] == 0 && l.dilation[1] == 1);
  lt_nn_conv2d_free(&l);
}

/* ---- deprecated aliases --------------------------------------------------------------- */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void test_ops_aliases(void **state) {
  (void)state;
  lt_tensor *a = ramp(SHAPE(3, 4), 2);
  expect_same(lt_norm(a, 3, (int[]){1}, 1, true), lt_vector_norm(a, (int[]){1}, 1, 3, true));
  expect_same(lt_norm(a, INFINITY, NULL, 0, false), lt_vector_norm(a, NULL, 0, INFINITY, false));
  expect_same(lt_slice(a, SHAPE(1, -3), NULL, SHAPE(1, 2)),
              lt_slice_n(a, SHAPE(1, -3), NULL, SHAPE(1, 2), 2));
  expect_same(lt_slice(a, NULL, NULL, NULL), lt_slice_n(a, NULL, NULL, NULL, 2));
  expect_same(lt_pad(a, SHAPE(1, 0, 2, 1), -1), lt_pad_n(a, SHAPE(1, 0, 2, 1), 4, -1));
  /* errors go through the new functions */
  lt_clear_error();
  assert_null(lt_slice(a, NULL, NULL, SHAPE(0, 1)));
  expect_einval("lt_slice_n", "step 0 on axis 0");
  assert_null(lt_pad(NULL, SHAPE(0, 0), 0));
  assert_int_equal(lt_last_status(), LT_EINVAL);

  lt_tensor *x = ramp(SHAPE(2, 2, 7, 6), 4), *w = ramp(SHAPE(4, 1, 3, 2), 4);
  lt_tensor *b = ramp(SHAPE(4), 1), *wt = ramp(SHAPE(2, 3, 2, 3), 4);
  const int64_t *s = SHAPE(2, 1), *p = SHAPE(1, 0), *d = SHAPE(1, 2), *k = SHAPE(3, 2);
  expect_same(lt_conv2d(x, w, b, s, p, d, 2), lt_conv2d_n(x, w, b, s, 2, p, 2, d, 2, 2));
  expect_same(lt_conv2d(x, w, NULL, NULL, NULL, NULL, 2),
              lt_conv2d_n(x, w, NULL, NULL, 0, NULL, 0, NULL, 0, 2));
  expect_same(lt_conv_transpose2d(x, wt, NULL, s, p, SHAPE(1, 0), NULL, 1),
              lt_conv_transpose2d_n(x, wt, NULL, s, 2, p, 2, SHAPE(1, 0), 2, NULL, 0, 1));
  expect_same(lt_max_pool2d(x, k, NULL, p, SHAPE(1, 1), true),
              lt_max_pool2d_n(x, k, 2, NULL, 0, p, 2, SHAPE(1, 1), 2, true));
  expect_same(lt_avg_pool2d(x, k, s, p, false, false, 0),
              lt_avg_pool2d_n(x, k, 2, s, 2, p, 2, false, false, 0));
  expect_same(lt_adaptive_avg_pool2d(x, SHAPE(3, 2)), lt_adaptive_avg_pool2d_n(x, SHAPE(3, 2), 2));
  lt_clear_error();
  assert_null(lt_max_pool2d(x, NULL, NULL, NULL, NULL, false));
  expect_einval("lt_max_pool2d_n", "kernel has 0 entries");
  expect_same(lt_nn_max_pool2d(x, k, s, NULL), lt_nn_max_pool2d_n(x, k, 2, s, 2, NULL, 0));
  expect_same(lt_nn_avg_pool2d(x, k, NULL, p), lt_nn_avg_pool2d_n(x, k, 2, NULL, 0, p, 2));

  /* the same draws from the same RNG state: the same layer */
  lt_rng_state rng;
  assert_int_equal(lt_get_rng_state(CPU0, &rng), LT_OK);
  lt_nn_conv2d old, now;
  assert_int_equal(lt_nn_conv2d_init(&old, CPU0, LT_F32, 2, 4, k, s, p, NULL, 2, true), LT_OK);
  assert_int_equal(lt_nn_params_sync((lt_tensor *[]){old.weight, old.bias}, 2), LT_OK);
  assert_int_equal(lt_set_rng_state(CPU0, &rng), LT_OK);
  assert_int_equal(
      lt_nn_conv2d_init_n(&now, CPU0, LT_F32, 2, 4, k, 2, s, 2, p, 2, NULL, 0, 2, true), LT_OK);
  assert_int_equal(lt_nn_params_sync((lt_tensor *[]){now.weight, now.bias}, 2), LT_OK);
  expect_same(old.weight, now.weight);
  expect_same(old.bias, now.bias);
  assert_memory_equal(old.kernel, now.kernel, sizeof old.kernel);
  assert_memory_equal(old.stride, now.stride, sizeof old.stride);
  assert_memory_equal(old.padding, now.padding, sizeof old.padding);
  assert_memory_equal(old.dilation, now.dilation, sizeof old.dilation);
  lt_nn_conv2d_free(&old);
  lt_nn_conv2d_free(&now);
}

/* path's bytes equal other's. */
static void expect_same_file(const char *path, const char *other) {
  size_t n, m;
  char *a = tu_read_file(path, &n), *b = tu_read_file(other, &m);
  assert_int_equal(n, m);
  assert_memory_equal(a, b, n);
  free(a);
  free(b);
}

static void test_file_aliases(void **state) {
  (void)state;
  char old_path[] = "/tmp/lt_test_api_old_XXXXXX", new_path[] = "/tmp/lt_test_api_new_XXXXXX";
  tu_mkstemp(old_path);
  tu_mkstemp(new_path);
  lt_tensor *p = tu_f32(SHAPE(3), 1, ((float[]){1, -2, 3}));
  lt_tensor *q = lt_exp(tu_f64(SHAPE(2), 1, ((double[]){0, 1})));
  lt_tensor *ts[2] = {p, q};
  assert_int_equal(lt_nn_save(old_path, ts, 2), LT_OK);
  assert_int_equal(lt_nn_params_save(ts, 2, new_path), LT_OK);
  expect_same_file(old_path, new_path);
  lt_tensor *a[2] = {lt_zeros(CPU0, LT_F32, SHAPE(3), 1), lt_zeros(CPU0, LT_F64, SHAPE(2), 1)};
  lt_tensor *b[2] = {lt_zeros(CPU0, LT_F32, SHAPE(3), 1), lt_zeros(CPU0, LT_F64, SHAPE(2), 1)};
  assert_int_equal(lt_nn_load(old_path, a, 2), LT_OK);
  assert_int_equal(lt_nn_params_load(b, 2, old_path), LT_OK);
  expect_same(a[0], b[0]);
  expect_same(a[1], b[1]);
  expect_same(a[0], p);

  /* with an optimizer that has state (Adam after one step) */
  assert_int_equal(lt_set_requires_grad(p, true), LT_OK);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_nn_optim *o = lt_nn_optim_create(&cfg, &p, 1);
  assert_non_null(o);
  lt_tensor *g = tu_f32(SHAPE(3), 1, ((float[]){0.5f, -0.25f, 1}));
  assert_int_equal(lt_nn_optim_step_grads(o, &g), LT_OK);
  assert_int_equal(lt_nn_save_state(old_path, &p, 1, o), LT_OK);
  assert_int_equal(lt_nn_checkpoint_save(&p, 1, o, new_path), LT_OK);
  expect_same_file(old_path, new_path);
  lt_tensor *r1 = lt_zeros(CPU0, LT_F32, SHAPE(3), 1), *r2 = lt_zeros(CPU0, LT_F32, SHAPE(3), 1);
  lt_nn_optim *o1 = lt_nn_optim_create(&cfg, &r1, 1), *o2 = lt_nn_optim_create(&cfg, &r2, 1);
  assert_int_equal(lt_nn_load_state(old_path, &r1, 1, o1), LT_OK);
  assert_int_equal(lt_nn_checkpoint_load(&r2, 1, o2, old_path), LT_OK);
  expect_same(r1, r2);
  expect_same(r1, p);
  assert_int_equal(lt_nn_optim_steps(o1), lt_nn_optim_steps(o2));
  assert_int_equal(lt_nn_optim_steps(o1), 1);
  lt_nn_optim_free(o);
  lt_nn_optim_free(o1);
  lt_nn_optim_free(o2);
  unlink(old_path);
  unlink(new_path);
}

/* The aliases of the earlier renames (lazytensor.h's deprecated section). */
static void test_earlier_aliases(void **state) {
  (void)state;
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  assert_int_equal(lt_requires_grad(x, true), LT_OK);
  assert_true(lt_get_requires_grad(x));
  assert_int_equal(lt_mark_donatable(x, false), LT_OK);
  assert_int_equal(lt_manual_seed(CPU0, 5), LT_OK);
  int64_t v = -2;
  assert_int_equal(lt_get_counter("CreateTensor", &v), LT_OK);
  assert_int_equal(lt_counter("CreateTensor"), v);
  assert_int_equal(lt_counter("NoSuchCounter"), -1);
  lt_metric_stats s1, s2;
  assert_int_equal(lt_metric("CompileTime", &s1), LT_OK);
  assert_int_equal(lt_get_metric("CompileTime", &s2), LT_OK);
  assert_int_equal(s1.count, s2.count);
}

#pragma GCC diagnostic pop

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slice_pad_counts), cmocka_unit_test(test_conv_pool_counts),
      cmocka_unit_test(test_ops_aliases),      cmocka_unit_test(test_file_aliases),
      cmocka_unit_test(test_earlier_aliases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
