/* The executor's first-cut rules, observed through counters and values:
 * caching by structure, scalars as parameters, shape changes, parameter dedup,
 * failure leaving tensors intact. */
#include "test_util.h"

static int64_t ctr(const char *name) { return tu_counter(name); }

static int setup(void **state) {
  lt_cache_clear();
  lt_counters_reset();
  return tu_setup(state);
}
#define XTEST(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown)

/* y = exp(a * b + a) - 2.5 * b, on data of the given size and fill. */
static lt_tensor *trace(int64_t n, float fill, double scalar) {
  float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
  for (int64_t i = 0; i < n; i++) {
    a[i] = fill * (float)i / (float)n;
    b[i] = fill - (float)i;
  }
  lt_tensor *A = tu_f32(SHAPE(n), 1, a), *B = tu_f32(SHAPE(n), 1, b);
  free(a);
  free(b);
  return lt_sub(lt_exp(lt_add(lt_mul(A, B), A)), lt_mul(lt_scalar(CPU0, LT_F32, scalar), B));
}

static void test_same_graph_new_data_compiles_once(void **state) {
  (void)state;
  double v1[4], v2[4];
  tu_read(trace(4, 1.0f, 2.5), v1, 4);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("CachedCompile"), 0);
  tu_read(trace(4, 2.0f, 2.5), v2, 4);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("CachedCompile"), 1);
  assert_int_equal(ctr("ExecuteComputation"), 2);
  /* the second run really used its own data */
  assert_true(fabs(v1[0] - v2[0]) > 1e-3);
  double want = exp(0.0 * 2.0 + 0.0) - 2.5 * 2.0; /* element 0 of the second run */
  assert_true(fabs(v2[0] - want) < 1e-4);
}

static void test_changing_scalar_does_not_recompile(void **state) {
  (void)state;
  double v[4];
  tu_read(trace(4, 1.0f, 2.5), v, 4);
  tu_read(trace(4, 1.0f, 7.25), v, 4);
  tu_read(trace(4, 1.0f, -3.5), v, 4);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("CachedCompile"), 2);
  /* the value used is the new scalar: element 1 = exp(a*b+a) + 3.5*b */
  double a1 = 0.25, b1 = 0.0;
  assert_true(fabs(v[1] - (exp(a1 * b1 + a1) + 3.5 * b1)) < 1e-4);
}

static void test_constant_scalars_are_baked(void **state) {
  (void)state;
  /* 0 and +-1 are constants: they are part of the graph, so changing from 1 to
   * -1 changes the graph (a recompile), while 2 and 3 share one. */
  double v[4];
  tu_read(trace(4, 1.0f, 1.0), v, 4);
  tu_read(trace(4, 1.0f, -1.0), v, 4);
  assert_int_equal(ctr("UncachedCompile"), 2);
  tu_read(trace(4, 1.0f, 2.0), v, 4);
  tu_read(trace(4, 1.0f, 3.0), v, 4);
  assert_int_equal(ctr("UncachedCompile"), 3);
  assert_int_equal(ctr("CachedCompile"), 1);
}

static void test_changed_shape_recompiles(void **state) {
  (void)state;
  double v[8];
  tu_read(trace(4, 1.0f, 2.5), v, 8);
  tu_read(trace(8, 1.0f, 2.5), v, 8);
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(ctr("CachedCompile"), 0);
  tu_read(trace(8, 3.0f, 4.5), v, 8);
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(ctr("CachedCompile"), 1);
}

static void test_changed_dtype_and_op_recompile(void **state) {
  (void)state;
  double v[2];
  lt_tensor *a = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_tensor *b = tu_f64(SHAPE(2), 1, ((double[]){1, 2}));
  tu_read(lt_exp(a), v, 2);
  tu_read(lt_exp(b), v, 2);
  tu_read(lt_log(a), v, 2);
  assert_int_equal(ctr("UncachedCompile"), 3);
}

static void test_one_buffer_twice_is_one_parameter(void **state) {
  (void)state;
  /* x + x and x + y have equal node hashes (data leaves hash dtype and shape
   * only) but different parameter sequences: two compiles, right values. */
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_tensor *y = tu_f32(SHAPE(2), 1, ((float[]){10, 20}));
  tu_expect(lt_add(x, x), LT_F32, SHAPE(2), 1, (double[]){2, 4}, 0);
  tu_expect(lt_add(x, y), LT_F32, SHAPE(2), 1, (double[]){11, 22}, 0);
  assert_int_equal(ctr("UncachedCompile"), 2);
  lt_tensor *z = tu_f32(SHAPE(2), 1, ((float[]){5, 6}));
  tu_expect(lt_add(z, x), LT_F32, SHAPE(2), 1, (double[]){6, 8}, 0);
  tu_expect(lt_add(z, z), LT_F32, SHAPE(2), 1, (double[]){10, 12}, 0);
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(ctr("CachedCompile"), 2);
}

static void test_synced_tensor_becomes_device_data(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}));
  assert_int_equal(lt_get_state(a), LT_STATE_HOST);
  lt_tensor *b = lt_mul(a, a);
  assert_int_equal(lt_get_state(a), LT_STATE_DEVICE); /* uploaded on first use */
  assert_int_equal(lt_get_state(b), LT_STATE_PENDING);
  double v[3];
  tu_read(b, v, 3);
  assert_int_equal(lt_get_state(b), LT_STATE_DEVICE);
  /* reading again transfers without executing */
  tu_read(b, v, 3);
  assert_int_equal(ctr("ExecuteComputation"), 1);
  /* using b in a new graph: its value is a leaf, the old graph is cut */
  tu_expect(lt_add(b, a), LT_F32, SHAPE(3), 1, (double[]){2, 6, 12}, 0);
  assert_int_equal(ctr("ExecuteComputation"), 2);
}

static void test_shared_subgraph_and_deep_chain(void **state) {
  (void)state;
  lt_tensor *x = tu_f64(SHAPE(1), 1, ((double[]){0.5}));
  lt_tensor *t = x;
  for (int i = 0; i < 5000; i++) t = lt_add(t, lt_mul(t, lt_scalar(CPU0, LT_F64, 0.0)));
  tu_expect(t, LT_F64, SHAPE(1), 1, (double[]){0.5}, 0);
  lt_tensor *u = lt_exp(x);
  tu_expect(lt_add(u, u), LT_F64, SHAPE(1), 1, (double[]){2 * exp(0.5)}, 1e-12);
}

static void test_execution_error_keeps_tensor(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}));
  lt_tensor *bad = tu_i64(SHAPE(1), 1, ((int64_t[]){7}));
  lt_tensor *g = lt_index_select(a, 0, bad);
  assert_non_null(g);
  float out[1];
  assert_int_equal(lt_to_data(g, out, sizeof out), LT_EEXEC);
  assert_non_null(strstr(lt_last_error(), "range"));
  assert_int_equal(lt_get_state(g), LT_STATE_PENDING);
  assert_int_equal(ctr("ExecuteFailure"), 1);
  /* the device goes on working */
  tu_expect(lt_neg(a), LT_F32, SHAPE(3), 1, (double[]){-1, -2, -3}, 0);
}

static void test_to_data_errors(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}));
  float out[3];
  lt_clear_error();
  assert_int_equal(lt_to_data(NULL, out, sizeof out), LT_EINVAL);
  assert_int_equal(lt_to_data(a, out, 8), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_to_data"));
  assert_int_equal(lt_to_data(a, NULL, 12), LT_EINVAL);
  double d;
  assert_int_equal(lt_item(a, 3, &d), LT_EINVAL);
  assert_int_equal(lt_item(a, 2, &d), LT_OK);
  assert_true(d == 3.0);
}

static void test_lru_eviction(void **state) {
  (void)state;
  /* LT_COMPILATION_CACHE_SIZE is read once per process; the default holds
   * 2048 graphs, far more than this test makes, so nothing is evicted. */
  double v[1];
  for (int i = 1; i <= 5; i++) {
    lt_tensor *a = lt_full(CPU0, LT_F32, SHAPE(i), 1, 2.0);
    tu_read(lt_sum(lt_exp(a), NULL, 0, false), v, 1);
  }
  assert_int_equal(lt_cache_entries(), 5);
  assert_int_equal(ctr("CompilationCacheEviction"), 0);
  lt_cache_clear();
  assert_int_equal(lt_cache_entries(), 0);
}

static void test_multiple_roots_and_assign(void **state) {
  (void)state;
  lt_tensor *w = lt_retain(tu_f32(SHAPE(2), 1, ((float[]){1, 2})));
  lt_tensor *g = tu_f32(SHAPE(2), 1, ((float[]){10, 20}));
  for (int step = 0; step < 3; step++) {
    lt_scope_begin();
    double lr = 0.1 * (step + 1);
    assert_int_equal(lt_assign(w, lt_sub(w, lt_mul(lt_scalar(CPU0, LT_F32, lr), g))), LT_OK);
    assert_int_equal(lt_get_state(w), LT_STATE_PENDING);
    double v[2];
    tu_read(w, v, 2);
    lt_scope_end();
  }
  /* 1 - (0.1+0.2+0.3)*10 = -5, 2 - 0.6*20 = -10 */
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){-5, -10}, 1e-5);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("CachedCompile"), 2);
  /* assign broadcasts and casts */
  assert_int_equal(lt_assign(w, lt_scalar(CPU0, LT_I32, 4)), LT_OK);
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){4, 4}, 0);
  assert_int_equal(lt_assign(w, tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}))), LT_ESHAPE);
  assert_non_null(strstr(lt_last_error(), "[3]"));
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){4, 4}, 0); /* kept its value */
  lt_release(w);
}

/* A program runs on the device it was created on: an input on another
 * device is LT_EDEVICE naming both (it was LT_ESHAPE, with a message that
 * gave the same dtype and shape twice). */
static void test_program_input_on_another_device(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}));
  lt_tensor *y = lt_mul(a, a);
  lt_program *p = lt_program_create(&y, 1, &a, 1);
  assert_non_null(p);
  lt_tensor *other = lt_from_data(lt_cpu(1), LT_F32, SHAPE(3), 1, ((float[]){4, 5, 6}));
  assert_non_null(other);
  lt_tensor *out = NULL;
  assert_int_equal(lt_program_run(p, &other, 1, &out), LT_EDEVICE);
  assert_int_equal(lt_last_status(), LT_EDEVICE);
  assert_null(out);
  tu_expect_substr(lt_last_error(), "lt_program_run: input 0 is on CPU:1");
  tu_expect_substr(lt_last_error(), "created on CPU:0");
  /* the refused input is intact, and the program still runs a right one */
  tu_expect(other, LT_F32, SHAPE(3), 1, (double[]){4, 5, 6}, 0);
  lt_tensor *c = tu_f32(SHAPE(3), 1, ((float[]){4, 5, 6}));
  assert_int_equal(lt_program_run(p, &c, 1, &out), LT_OK);
  tu_expect(out, LT_F32, SHAPE(3), 1, (double[]){16, 25, 36}, 0);
  /* a wrong shape on the right device is still LT_ESHAPE, naming both */
  lt_tensor *d = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  assert_int_equal(lt_program_run(p, &d, 1, &out), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "input 0 is f32 [2], the program takes f32 [3]");
  lt_program_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      XTEST(test_same_graph_new_data_compiles_once),
      XTEST(test_changing_scalar_does_not_recompile),
      XTEST(test_constant_scalars_are_baked),
      XTEST(test_changed_shape_recompiles),
      XTEST(test_changed_dtype_and_op_recompile),
      XTEST(test_one_buffer_twice_is_one_parameter),
      XTEST(test_synced_tensor_becomes_device_data),
      XTEST(test_shared_subgraph_and_deep_chain),
      XTEST(test_execution_error_keeps_tensor),
      XTEST(test_to_data_errors),
      XTEST(test_lru_eviction),
      XTEST(test_multiple_roots_and_assign),
      XTEST(test_program_input_on_another_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
