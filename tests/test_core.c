/* Core: devices, tensor lifetimes and scopes, creation ops, errors, the
 * allocator hook, counters. */
#include "test_util.h"

static void test_device_parse_and_print(void **state) {
  (void)state;
  lt_device d;
  assert_int_equal(lt_device_parse("CPU:0", &d), LT_OK);
  assert_int_equal(d.type, LT_DEVICE_CPU);
  assert_int_equal(d.index, 0);
  assert_int_equal(lt_device_parse("cpu:12", &d), LT_OK);
  assert_int_equal(d.index, 12);
  char buf[16];
  assert_int_equal(lt_device_str(d, buf, sizeof buf), 6);
  assert_string_equal(buf, "CPU:12");
  const char *bad[] = {"", "CPU", "CPU:", "GPU:0", "CPU:-1", "CPU:1x", "CPU:64", "CPUS:0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(lt_device_parse(bad[i], &d), LT_EDEVICE);
    assert_non_null(strstr(lt_last_error(), "lt_device_parse"));
  }
  assert_int_equal(lt_device_parse(NULL, &d), LT_EINVAL);
  TU_EXPECT_ERROR(lt_zeros(lt_cpu(99), LT_F32, SHAPE(2), 1), LT_EDEVICE, "unknown device");
}

static void test_devices_are_separate(void **state) {
  (void)state;
  lt_tensor *a = lt_ones(lt_cpu(1), LT_F32, SHAPE(2), 1);
  lt_tensor *b = lt_ones(lt_cpu(0), LT_F32, SHAPE(2), 1);
  assert_int_equal(lt_get_device(a).index, 1);
  TU_EXPECT_ERROR(lt_add(a, b), LT_EDEVICE, "CPU:1");
  tu_expect(lt_add(a, a), LT_F32, SHAPE(2), 1, (double[]){2, 2}, 0);
}

static void test_lifetime_and_scopes(void **state) {
  (void)state;
  int64_t live0 = lt_device_live_tensors(CPU0);
  int64_t created0 = tu_counter("CreateTensor"), destroyed0 = tu_counter("DestroyTensor");
  lt_tensor *kept;
  lt_scope_begin();
  lt_tensor *a = lt_ones(CPU0, LT_F32, SHAPE(3), 1);
  lt_scope_begin();
  lt_tensor *b = lt_add(a, a);
  kept = lt_retain(lt_mul(b, b));
  assert_int_equal(lt_device_live_tensors(CPU0), live0 + 3);
  lt_scope_end(); /* b released, kept survives through its extra reference */
  assert_int_equal(lt_device_live_tensors(CPU0), live0 + 2);
  lt_scope_end();
  assert_int_equal(lt_device_live_tensors(CPU0), live0 + 1);
  tu_expect(kept, LT_F32, SHAPE(3), 1, (double[]){4, 4, 4}, 0); /* graph outlives a and b */
  lt_release(kept);
  assert_int_equal(lt_device_live_tensors(CPU0), live0);
  assert_int_equal(tu_counter("CreateTensor") - created0, 3 + 0);
  assert_int_equal(tu_counter("DestroyTensor") - destroyed0, 3);
  lt_release(NULL); /* accepted */
  lt_scope_end();   /* extra end: closes the test's scope, harmless */
  lt_scope_begin(); /* reopen for the teardown */
  /* ids are unique */
  lt_tensor *x = lt_ones(CPU0, LT_F32, SHAPE(1), 1), *y = lt_ones(CPU0, LT_F32, SHAPE(1), 1);
  assert_true(lt_id(x) != lt_id(y));
}

static void test_accessors(void **state) {
  (void)state;
  lt_tensor *t = lt_zeros(CPU0, LT_I64, SHAPE(2, 3, 4), 3);
  assert_int_equal(lt_ndim(t), 3);
  assert_int_equal(lt_numel(t), 24);
  assert_int_equal(lt_dim(t, -1), 4);
  assert_int_equal(lt_dim(t, 3), -1);
  assert_int_equal(lt_get_dtype(t), LT_I64);
  assert_string_equal(lt_dtype_name(LT_F64), "f64");
  assert_string_equal(lt_dtype_name((lt_dtype)42), "?");
  assert_int_equal(lt_dtype_size(LT_BOOL), 1);
  assert_int_equal(lt_dtype_size(LT_I32), 4);
  assert_int_equal(lt_dtype_size((lt_dtype)-1), 0);
  assert_int_equal(lt_ndim(NULL), -1);
  assert_int_equal(lt_numel(NULL), -1);
}

static void test_from_data_every_dtype(void **state) {
  (void)state;
  tu_expect(tu_bool(SHAPE(3), 1, ((uint8_t[]){1, 0, 1})), LT_BOOL, SHAPE(3), 1, (double[]){1, 0, 1},
            0);
  tu_expect(tu_i32(SHAPE(2), 1, ((int32_t[]){-7, 2147483647})), LT_I32, SHAPE(2), 1,
            (double[]){-7, 2147483647}, 0);
  int64_t big = (1LL << 53) + 1, got;
  lt_tensor *t = tu_i64(SHAPE(1), 1, &big);
  assert_int_equal(lt_to_data(t, &got, sizeof got), LT_OK);
  assert_true(got == big); /* exact: host data is copied bit for bit */
  tu_expect(tu_f64(SHAPE(2, 1), 2, ((double[]){1e300, -0.5})), LT_F64, SHAPE(2, 1), 2,
            (double[]){1e300, -0.5}, 0);
  /* the data is copied: changing the source afterwards changes nothing */
  float src[2] = {1, 2};
  lt_tensor *f = tu_f32(SHAPE(2), 1, src);
  src[0] = 100;
  tu_expect(f, LT_F32, SHAPE(2), 1, (double[]){1, 2}, 0);
  /* 0-d and empty */
  float one = 3.5f;
  tu_expect(lt_from_data(CPU0, LT_F32, NULL, 0, &one), LT_F32, NULL, 0, (double[]){3.5}, 0);
  tu_expect(lt_from_data(CPU0, LT_F32, SHAPE(0, 4), 2, NULL), LT_F32, SHAPE(0, 4), 2, NULL, 0);
}

static void test_full_zeros_ones_scalar(void **state) {
  (void)state;
  tu_expect(lt_full(CPU0, LT_F32, SHAPE(2, 2), 2, 2.5), LT_F32, SHAPE(2, 2), 2,
            (double[]){2.5, 2.5, 2.5, 2.5}, 0);
  tu_expect(lt_full(CPU0, LT_I32, SHAPE(2), 1, 7.9), LT_I32, SHAPE(2), 1, (double[]){7, 7}, 0);
  tu_expect(lt_full(CPU0, LT_BOOL, SHAPE(2), 1, 3), LT_BOOL, SHAPE(2), 1, (double[]){1, 1}, 0);
  tu_expect(lt_zeros(CPU0, LT_I64, SHAPE(3), 1), LT_I64, SHAPE(3), 1, (double[]){0, 0, 0}, 0);
  tu_expect(lt_ones(CPU0, LT_F64, SHAPE(1, 2), 2), LT_F64, SHAPE(1, 2), 2, (double[]){1, 1}, 0);
  tu_expect(lt_ones(CPU0, LT_F64, NULL, 0), LT_F64, NULL, 0, (double[]){1}, 0);
  tu_expect(lt_zeros(CPU0, LT_F32, SHAPE(0), 1), LT_F32, SHAPE(0), 1, NULL, 0);
  tu_expect(lt_full(CPU0, LT_F32, SHAPE(5, 0), 2, 4.0), LT_F32, SHAPE(5, 0), 2, NULL, 0);
  tu_expect(lt_scalar(CPU0, LT_F64, -2.25), LT_F64, NULL, 0, (double[]){-2.25}, 0);
  tu_expect(lt_scalar(CPU0, LT_I64, -1), LT_I64, NULL, 0, (double[]){-1}, 0);
  /* 0 and +-1 are graph constants; other values are device data */
  assert_int_equal(lt_get_state(lt_scalar(CPU0, LT_F32, 1)), LT_STATE_PENDING);
  assert_int_equal(lt_get_state(lt_scalar(CPU0, LT_F32, 0.5)), LT_STATE_DEVICE);
  TU_EXPECT_ERROR(lt_full(CPU0, (lt_dtype)9, SHAPE(2), 1, 1), LT_EDTYPE, "lt_full");
  TU_EXPECT_ERROR(lt_zeros(CPU0, LT_F32, SHAPE(2, -1), 2), LT_ESHAPE, "[2, -1]");
  TU_EXPECT_ERROR(lt_zeros(CPU0, LT_F32, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), 9), LT_ESHAPE, "rank 9");
  TU_EXPECT_ERROR(lt_zeros(CPU0, LT_F32, NULL, 2), LT_EINVAL, "shape is NULL");
  TU_EXPECT_ERROR(lt_from_data(CPU0, LT_F32, SHAPE(2), 1, NULL), LT_EINVAL, "data is NULL");
  TU_EXPECT_ERROR(lt_zeros(CPU0, LT_F32, SHAPE(1LL << 40, 1LL << 40), 2), LT_ESHAPE, "too large");
}

static void test_arange_and_eye(void **state) {
  (void)state;
  tu_expect(lt_arange(CPU0, LT_I64, 0, 5, 1), LT_I64, SHAPE(5), 1, (double[]){0, 1, 2, 3, 4}, 0);
  tu_expect(lt_arange(CPU0, LT_F32, 1, 2, 0.25), LT_F32, SHAPE(4), 1,
            (double[]){1, 1.25, 1.5, 1.75}, 0);
  tu_expect(lt_arange(CPU0, LT_I32, 5, 0, -2), LT_I32, SHAPE(3), 1, (double[]){5, 3, 1}, 0);
  tu_expect(lt_arange(CPU0, LT_F64, 3, 3, 1), LT_F64, SHAPE(0), 1, NULL, 0);
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_F64, 3, 0, 1), LT_EINVAL, "inconsistent"); /* as torch */
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_F32, 0, 1, 0), LT_EINVAL, "non-zero step");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_F32, 0, INFINITY, 1), LT_EINVAL, "finite");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_BOOL, 0, 2, 1), LT_EDTYPE, "bool");
  tu_expect(lt_eye(CPU0, LT_F32, 3, 0), LT_F32, SHAPE(3, 3), 2,
            (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, 0);
  tu_expect(lt_eye(CPU0, LT_BOOL, 2, 3), LT_BOOL, SHAPE(2, 3), 2, (double[]){1, 0, 0, 0, 1, 0}, 0);
  tu_expect(lt_eye(CPU0, LT_I32, 0, 0), LT_I32, SHAPE(0, 0), 2, NULL, 0);
  TU_EXPECT_ERROR(lt_eye(CPU0, LT_F32, -2, 3), LT_ESHAPE, "lt_eye");
}

static void test_null_operand_keeps_first_error(void **state) {
  (void)state;
  lt_tensor *a = lt_ones(CPU0, LT_F32, SHAPE(2), 1);
  lt_tensor *b = lt_ones(CPU0, LT_F32, SHAPE(3), 1);
  lt_clear_error();
  lt_tensor *r = lt_exp(lt_mul(lt_add(a, b), a));
  assert_null(r);
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  assert_non_null(strstr(lt_last_error(), "lt_add"));
  lt_clear_error();
  assert_null(lt_exp(NULL));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_exp: operand is NULL"));
  lt_clear_error();
  assert_int_equal(lt_last_status(), LT_OK);
  assert_string_equal(lt_last_error(), "");
}

static void test_assign_errors(void **state) {
  (void)state;
  lt_tensor *a = lt_ones(CPU0, LT_F32, SHAPE(2), 1);
  assert_int_equal(lt_assign(NULL, a), LT_EINVAL);
  assert_int_equal(lt_assign(a, lt_ones(lt_cpu(1), LT_F32, SHAPE(2), 1)), LT_EDEVICE);
  assert_int_equal(lt_assign(a, a), LT_OK);
  tu_expect(a, LT_F32, SHAPE(2), 1, (double[]){1, 1}, 0);
  /* assign from a tensor that holds device data: no compute needed */
  lt_tensor *d = lt_scalar(CPU0, LT_F32, 6.5);
  int64_t exec0 = tu_counter("ExecuteComputation");
  assert_int_equal(lt_assign(d, lt_scalar(CPU0, LT_F32, 8.5)), LT_OK);
  tu_expect(d, LT_F32, NULL, 0, (double[]){8.5}, 0);
  assert_int_equal(tu_counter("ExecuteComputation"), exec0);
}

static void test_allocation_failures_are_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(4), 1, ((float[]){1, 2, 3, 4}));
  lt_tensor *b = tu_f32(SHAPE(4), 1, ((float[]){1, 1, 1, 1}));
  double v[4];
  tu_read(lt_add(a, b), v, 4); /* warm: uploads done, the cache holds the graph */
  lt_set_allocator(tu_failing_alloc, NULL);
  int failures = 0, successes = 0;
  /* Fail the k-th allocation of a trace-and-read, for each k in turn: every
   * attempt ends in a clear error or a right result, never a crash. */
  for (long k = 0; k < 40; k++) {
    lt_clear_error();
    atomic_store(&tu_budget, k);
    lt_tensor *s = lt_sub(lt_mul(a, b), lt_scalar(CPU0, LT_F32, 0.5));
    float out[4];
    int rc = s ? lt_to_data(s, out, sizeof out) : lt_last_status();
    atomic_store(&tu_budget, -1);
    if (rc == LT_OK) {
      successes++;
      assert_true(out[3] == 3.5f);
    } else {
      failures++;
      assert_int_equal(rc, LT_ENOMEM);
      assert_non_null(strstr(lt_last_error(), "out of memory"));
    }
  }
  lt_set_allocator(NULL, NULL);
  assert_true(failures > 0);
  assert_true(successes > 0);
  tu_expect(lt_add(a, b), LT_F32, SHAPE(4), 1, (double[]){2, 3, 4, 5}, 0);
}

static void test_counters_and_report(void **state) {
  (void)state;
  int64_t v = 0;
  assert_int_equal(lt_get_counter("NoSuchCounter", &v), LT_ENOTFOUND);
  assert_int_equal(lt_get_counter(NULL, &v), LT_EINVAL);
  const char *const *names = lt_counter_names();
  const char *want[] = {"CachedCompile", "UncachedCompile", "ExecuteComputation", "CreateTensor",
                        "DestroyTensor"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int found = 0;
    for (int k = 0; names[k]; k++) found |= strcmp(names[k], want[i]) == 0;
    assert_true(found);
    assert_true(tu_counter(want[i]) >= 0);
  }
  char small[8];
  int need = lt_metrics_report(small, sizeof small);
  assert_true(need > (int)sizeof small);
  assert_int_equal(strlen(small), sizeof small - 1);
  char *full = malloc((size_t)need + 1);
  assert_int_equal(lt_metrics_report(full, (size_t)need + 1), need);
  assert_non_null(strstr(full, "UncachedCompile"));
  free(full);
  lt_counters_reset();
  assert_int_equal(tu_counter("CreateTensor"), 0);
}

/* torch.arange: ceil((stop - start) / step) elements of the values as given;
 * an integer dtype truncates start and step toward 0 (to int64) and computes
 * start + i * step in int64 (torch's cpu kernel: acc_type of an integer is
 * int64), so lt_arange(I32, 0, 5, 1.5) is 0 1 2 3 (it was 0 1 3 4). */
static void test_arange_follows_torch(void **state) {
  (void)state;
  tu_expect(lt_arange(CPU0, LT_I32, 0, 5, 1.5), LT_I32, SHAPE(4), 1, (double[]){0, 1, 2, 3}, 0);
  /* i64 takes its length from the truncated values: ceil(5 / 1) (torch.arange(0, 5, 1.5,
   * dtype=torch.int64) is [0, 1, 2, 3, 4]) */
  tu_expect(lt_arange(CPU0, LT_I64, 0, 5, 1.5), LT_I64, SHAPE(5), 1, (double[]){0, 1, 2, 3, 4}, 0);
  /* negative step: ceil(-5 / -1.5) = 4 values, step -1 */
  tu_expect(lt_arange(CPU0, LT_I32, 5, 0, -1.5), LT_I32, SHAPE(4), 1, (double[]){5, 4, 3, 2}, 0);
  /* a fractional start truncates toward 0: ceil(4.5 / 1.5) = 3 values from 0 (torch.arange(0.5,
   * 5, 1.5, dtype=torch.int32) is [0, 1, 2]; int64: ceil(5 / 1), [0, 1, 2, 3, 4]) */
  tu_expect(lt_arange(CPU0, LT_I32, 0.5, 5, 1.5), LT_I32, SHAPE(3), 1, (double[]){0, 1, 2}, 0);
  tu_expect(lt_arange(CPU0, LT_I64, 0.5, 5, 1.5), LT_I64, SHAPE(5), 1, (double[]){0, 1, 2, 3, 4},
            0);
  tu_expect(lt_arange(CPU0, LT_I32, -2.5, 1, 1), LT_I32, SHAPE(4), 1, (double[]){-2, -1, 0, 1}, 0);
  /* a step under 1 truncates to 0, a zero step (torch.arange(1, 3, 0.5, dtype=torch.int32):
   * "step must be nonzero") */
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I32, 1, 3, 0.5), LT_EINVAL, "non-zero step");
  /* i32 values are computed in int64 and wrap (no undefined float-to-int cast) */
  tu_expect(lt_arange(CPU0, LT_I32, 2147483647.0, 2147483649.0, 1), LT_I32, SHAPE(2), 1,
            (double[]){2147483647.0, -2147483648.0}, 0);
  /* float dtypes: start + i * step, ceil((stop - start) / step) of them */
  tu_expect(lt_arange(CPU0, LT_F32, 0, 5, 1.5), LT_F32, SHAPE(4), 1, (double[]){0, 1.5, 3, 4.5}, 0);
  tu_expect(lt_arange(CPU0, LT_F64, 1, 0, -0.3), LT_F64, SHAPE(4), 1,
            (double[]){1, 1 - 0.3, 1 - 0.6, 1 - 0.9}, 1e-15);
  tu_expect(lt_arange(CPU0, LT_I32, 2, 2, -1), LT_I32, SHAPE(0), 1, NULL, 0);
  /* torch's errors: zero step, a step leading away from stop */
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I32, 0, 5, 0), LT_EINVAL, "non-zero step");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I32, 0, 3, -1), LT_EINVAL,
                  "lt_arange: start 0 and stop 3 are inconsistent with the sign of step -1");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_F32, 1, 0, 0.5), LT_EINVAL, "inconsistent");
  TU_EXPECT_ERROR(lt_arange(CPU0, LT_I64, 1e19, 2e19, 1e18), LT_EINVAL, "integer");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_device_parse_and_print), TU_TEST(test_devices_are_separate),
      TU_TEST(test_lifetime_and_scopes),    TU_TEST(test_accessors),
      TU_TEST(test_from_data_every_dtype),  TU_TEST(test_full_zeros_ones_scalar),
      TU_TEST(test_arange_and_eye),         TU_TEST(test_null_operand_keeps_first_error),
      TU_TEST(test_assign_errors),          TU_TEST(test_allocation_failures_are_errors),
      TU_TEST(test_counters_and_report),    TU_TEST(test_arange_follows_torch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
