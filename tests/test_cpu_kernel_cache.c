/* The cpu backend's kernel cache and parallel compile (src/backend/cpu/
 * cpu_jit.c, cpu_backend.c): kernels are keyed by their structure, so a graph
 * whose kernel a live executable has compiles only its other kernels
 * (KernelCompile, KernelCacheHit), whatever the slots that kernel has in
 * each graph; a kernel of another op, shape, dtype or aliasing is another
 * key; the cache holds only live executables' kernels; kernels repeated in
 * one graph compile once and are stored once in the persistent cache, and
 * one loaded from disk shares a live copy; the eval graph after the train
 * graph compiles only what the train graph lacks, with the values of a cold
 * compile; compiling on several threads gives the values of compiling on one. */
#include "test_util.h"
#include "lazytensor_nn.h"
#include "../src/backend/cpu/cpu_api.h"

static int setup(void **state) {
  lt__backend_force(&lt__cpu_backend);
  tu_reset_executor();
  return tu_setup(state);
}

static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt_cache_clear();
  lt__backend_force(NULL);
  unsetenv("LT_COMPILE_THREADS");
  return rc;
}

#define CPU_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* Kernels compiled and found compiled by the syncs in between. */
typedef struct counts {
  int64_t compiled, hits;
} counts;

static counts now(void) {
  return (counts){tu_counter("KernelCompile"), tu_counter("KernelCacheHit")};
}

static counts since(counts c0) {
  counts c = now();
  return (counts){c.compiled - c0.compiled, c.hits - c0.hits};
}

static void sync_all(lt_tensor **ts, int n) { assert_int_equal(lt_sync(ts, n, true), LT_OK); }

/* The expression both graphs of the sharing tests have: tanh(x * w + x). */
static lt_tensor *shared_expr(lt_tensor *x, lt_tensor *w) {
  return lt_tanh(lt_add(lt_mul(x, w), x));
}

static void expect_shared_expr(lt_tensor *y, int sx, int sw, int64_t n) {
  double *v = tu_values(y);
  for (int64_t i = 0; i < n; i++) {
    double x = tu_wave_at(sx, i), w = tu_wave_at(sw, i);
    if (!tu_near(v[i], tanh(x * w + x), 1e-5)) fail_msg("element %lld: %.9g", (long long)i, v[i]);
  }
  free(v);
}

/* A second graph with a kernel of the first (and other parameters before
 * it, so that its slots have other numbers there) compiles only its other
 * kernel; its values are right. */
static void test_second_graph_shares_a_kernel(void **s) {
  (void)s;
  if (!tu_cpu_allowed()) skip();
  lt_tensor *x = tu_wave_f32(1, SHAPE(33, 17), 2), *w = tu_wave_f32(2, SHAPE(33, 17), 2);
  lt_tensor *q = tu_wave_f32(3, SHAPE(5, 7), 2);
  lt_tensor *a = shared_expr(x, w);
  lt_tensor *first[2] = {a, lt_sum(lt_mul(a, a), (const int[]){1}, 1, false)};
  counts c0 = now();
  sync_all(first, 2);
  counts c1 = since(c0);
  assert_int_equal(c1.compiled, 2); /* the expression, the sum */
  assert_int_equal(c1.hits, 0);
  lt_tensor *second[2] = {lt_exp(lt_mul(q, q)), shared_expr(x, w)};
  c0 = now();
  sync_all(second, 2);
  counts c2 = since(c0);
  assert_int_equal(c2.compiled, 1); /* exp(q * q) only */
  assert_int_equal(c2.hits, 1);
  expect_shared_expr(second[1], 1, 2, 33 * 17);
  double *e = tu_values(second[0]);
  for (int64_t i = 0; i < 35; i++)
    assert_true(tu_near(e[i], exp(tu_wave_at(3, i) * tu_wave_at(3, i)), 1e-5));
  free(e);
}

/* The cache holds the kernels of live executables only: after lt_cache_clear
 * (every executable freed), the same graph compiles every kernel again. */
static void test_cleared_cache_compiles_again(void **s) {
  (void)s;
  if (!tu_cpu_allowed()) skip();
  lt_tensor *x = tu_wave_f32(1, SHAPE(33, 17), 2), *w = tu_wave_f32(2, SHAPE(33, 17), 2);
  lt_tensor *y = shared_expr(x, w);
  sync_all(&y, 1);
  lt_cache_clear();
  counts c0 = now();
  lt_tensor *z = shared_expr(x, w);
  sync_all(&z, 1);
  counts c = since(c0);
  assert_int_equal(c.compiled, 1);
  assert_int_equal(c.hits, 0);
  expect_shared_expr(z, 1, 2, 33 * 17);
}

/* Compiles one graph of root y beside the live one and returns its counts. */
static counts one_graph(lt_tensor *y) {
  counts c0 = now();
  sync_all(&y, 1);
  return since(c0);
}

/* A kernel's key follows its structure: the same expression over other
 * buffers shares the compiled kernel, and so does one over more elements of
 * the same layout (a flat loop takes its range at run time); another op,
 * layout (a broadcast), dtype, view offset or aliasing of its operands is
 * another kernel. */
static void test_key_follows_structure(void **s) {
  (void)s;
  if (!tu_cpu_allowed()) skip();
  lt_tensor *x = tu_wave_f32(1, SHAPE(33, 17), 2), *w = tu_wave_f32(2, SHAPE(33, 17), 2);
  lt_tensor *live = shared_expr(x, w); /* its executable stays in the cache */
  sync_all(&live, 1);
  /* other buffers, in a graph of its own (alone, it would be the live
   * executable's graph: a hit of the executable cache, no compile at all) */
  lt_tensor *x2 = tu_wave_f32(4, SHAPE(33, 17), 2), *w2 = tu_wave_f32(5, SHAPE(33, 17), 2);
  lt_tensor *q = tu_wave_f32(3, SHAPE(5, 7), 2);
  lt_tensor *same[2] = {lt_neg(q), shared_expr(x2, w2)};
  counts c0 = now();
  sync_all(same, 2);
  counts c = since(c0);
  assert_int_equal(c.compiled, 1); /* -q */
  assert_int_equal(c.hits, 1);
  expect_shared_expr(same[1], 4, 5, 33 * 17);
  lt_tensor *longer =
      shared_expr(tu_wave_f32(4, SHAPE(41, 17), 2), tu_wave_f32(5, SHAPE(41, 17), 2));
  c = one_graph(longer);
  assert_int_equal(c.compiled, 0);
  assert_int_equal(c.hits, 1);
  expect_shared_expr(longer, 4, 5, 41 * 17);

  lt_tensor *big = tu_wave_f32(6, SHAPE(34, 17), 2);
  lt_tensor *variants[] = {
      lt_tanh(lt_sub(lt_mul(x, w), x)),                    /* an op */
      shared_expr(x, tu_wave_f32(8, SHAPE(17), 1)),        /* a broadcast */
      shared_expr(lt_cast(x, LT_F64), lt_cast(w, LT_F64)), /* a dtype (and casts) */
      shared_expr(lt_slice_n(big, SHAPE(1, 0), SHAPE(34, 17), SHAPE(1, 1), 2),
                  w),    /* a view offset */
      shared_expr(x, x), /* aliased operands */
  };
  for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
    c = one_graph(variants[i]);
    if (c.compiled != 1 || c.hits != 0)
      fail_msg("variant %zu: %lld compiled, %lld found", i, (long long)c.compiled,
               (long long)c.hits);
  }
  double *v = tu_values(variants[4]);
  for (int64_t i = 0; i < 33 * 17; i++) {
    double xi = tu_wave_at(1, i);
    assert_true(tu_near(v[i], tanh(xi * xi + xi), 1e-5));
  }
  free(v);
}

/* Two kernels of one structure in one graph (each over its own slots)
 * compile once; the executable's persistent cache entry holds that code
 * once; loaded from disk while another executable has the kernel, it shares
 * that one's copy; every value right each time. */
static lt_tensor *dup_graph(lt_tensor *x, lt_tensor *y, lt_tensor **outs) {
  outs[0] = lt_add(lt_tanh(x), y);
  outs[1] = lt_add(lt_tanh(y), x);
  return outs[0];
}

static void expect_dup(lt_tensor **outs) {
  double *a = tu_values(outs[0]), *b = tu_values(outs[1]);
  for (int64_t i = 0; i < 19 * 23; i++) {
    double x = tu_wave_at(1, i), y = tu_wave_at(2, i);
    assert_true(tu_near(a[i], tanh(x) + y, 1e-5));
    assert_true(tu_near(b[i], tanh(y) + x, 1e-5));
  }
  free(a);
  free(b);
}

static void test_repeated_kernel_and_disk(void **s) {
  (void)s;
  if (!tu_cpu_allowed()) skip();
  char dir[64];
  assert_non_null(tu_mkdtemp(dir, sizeof dir, "lt_kcache"));
  assert_int_equal(lt_set_persistent_cache(dir, false), LT_OK);
  lt_tensor *x = tu_wave_f32(1, SHAPE(19, 23), 2), *y = tu_wave_f32(2, SHAPE(19, 23), 2);
  lt_tensor *outs[2];
  dup_graph(x, y, outs);
  counts c0 = now();
  sync_all(outs, 2);
  counts c = since(c0);
  assert_int_equal(c.compiled, 1);
  assert_int_equal(c.hits, 1);
  expect_dup(outs);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);

  lt_cache_clear();                       /* no kernel left in memory */
  lt_tensor *one = lt_add(lt_tanh(x), y); /* another graph, the same kernel */
  c = one_graph(one);
  assert_int_equal(c.compiled, 1);
  int64_t disk0 = tu_counter("PersistentCacheHit");
  dup_graph(x, y, outs);
  c0 = now();
  sync_all(outs, 2);
  c = since(c0);
  assert_int_equal(tu_counter("PersistentCacheHit"), disk0 + 1);
  assert_int_equal(c.compiled, 0);
  assert_int_equal(c.hits, 1); /* the loaded executable's one code: shared */
  expect_dup(outs);
  lt_set_persistent_cache(NULL, false);
  tu_rm_tree(dir);
}

/* The case: a small MLP's train step (forward, cross-entropy,
 * backward, SGD), then its eval forward, whose first loop (bias and ReLU
 * after the first product) the train step has: the eval graph compiles fewer
 * kernels than it has, and its logits equal those of the same graph compiled
 * cold. */
enum { kIn = 12, kHid = 16, kOut = 5, kBatch = 8 };

static lt_tensor *mlp_forward(const lt_nn_linear *l, lt_tensor *x) {
  return lt_nn_linear_forward(&l[1], lt_nn_relu(lt_nn_linear_forward(&l[0], x)));
}

static void test_eval_after_train(void **s) {
  (void)s;
  if (!tu_cpu_allowed()) skip();
  lt_set_seed(CPU0, 7);
  lt_nn_linear l[2];
  assert_int_equal(lt_nn_linear_init(&l[0], CPU0, LT_F32, kIn, kHid, true), LT_OK);
  assert_int_equal(lt_nn_linear_init(&l[1], CPU0, LT_F32, kHid, kOut, true), LT_OK);
  lt_tensor *params[4] = {l[0].weight, l[0].bias, l[1].weight, l[1].bias};
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_SGD);
  lt_nn_optim *opt = lt_nn_optim_create(&oc, params, 4);
  assert_non_null(opt);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  lt_tensor *x = tu_wave_f32(20, SHAPE(kBatch, kIn), 2);
  int64_t labels[kBatch];
  for (int i = 0; i < kBatch; i++) labels[i] = (i * 3) % kOut;
  lt_tensor *y = tu_i64(SHAPE(kBatch), 1, labels);
  lt_scope_begin();
  lt_tensor *loss = lt_nn_cross_entropy(mlp_forward(l, x), y);
  assert_int_equal(lt_backward(loss), LT_OK);
  assert_int_equal(lt_nn_optim_step(opt), LT_OK);
  lt_scope_end();
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);

  counts c0 = now();
  lt_tensor *shared = mlp_forward(l, x);
  double *warm = tu_values(shared);
  counts c = since(c0);
  print_message("eval: %lld kernels compiled, %lld shared\n", (long long)c.compiled,
                (long long)c.hits);
  assert_true(c.hits >= 1); /* the first layer's bias and ReLU */
  lt_cache_clear();
  c0 = now();
  double *cold = tu_values(mlp_forward(l, x));
  counts cc = since(c0);
  assert_int_equal(cc.hits, 0);
  assert_int_equal(cc.compiled, c.compiled + c.hits);
  assert_memory_equal(warm, cold, sizeof(double) * kBatch * kOut);
  free(warm);
  free(cold);
  lt_nn_optim_free(opt);
  lt_nn_linear_free(&l[0]);
  lt_nn_linear_free(&l[1]);
}

/* A graph of many distinct kernels (shapes differ), compiled on one thread
 * and then on four: the same number of kernels compiled, the same bits. */
enum { kParts = 9 };

static void parts_graph(lt_tensor **outs, int64_t *sizes) {
  for (int i = 0; i < kParts; i++) {
    lt_tensor *x = tu_wave_f32(10 + i, SHAPE(6 + i, 4 + 2 * i), 2);
    lt_tensor *e = lt_exp(lt_mul(x, lt_sigmoid(x)));
    outs[i] = i % 2 ? lt_sum(e, (const int[]){i % 2}, 1, false) : lt_softmax(e, 0);
    sizes[i] = lt_numel(outs[i]);
  }
}

static double *parts_values(int threads, int64_t *total, counts *c) {
  char n[8];
  snprintf(n, sizeof n, "%d", threads);
  setenv("LT_COMPILE_THREADS", n, 1);
  lt_cache_clear();
  lt_scope_begin();
  lt_tensor *outs[kParts];
  int64_t sizes[kParts];
  parts_graph(outs, sizes);
  counts c0 = now();
  sync_all(outs, kParts);
  *c = since(c0);
  *total = 0;
  for (int i = 0; i < kParts; i++) *total += sizes[i];
  double *v = malloc((size_t)*total * sizeof *v);
  for (int i = 0, at = 0; i < kParts; at += (int)sizes[i], i++) tu_read(outs[i], v + at, sizes[i]);
  lt_scope_end();
  return v;
}

static void test_parallel_compile_matches_serial(void **s) {
  (void)s;
  if (!tu_cpu_allowed()) skip();
  int64_t n1, n4;
  counts c1, c4;
  double *serial = parts_values(1, &n1, &c1);
  double *parallel = parts_values(4, &n4, &c4);
  assert_int_equal(n1, n4);
  assert_true(c1.compiled >= kParts);
  assert_int_equal(c1.compiled, c4.compiled);
  assert_int_equal(c1.hits, c4.hits);
  assert_memory_equal(serial, parallel, (size_t)n1 * sizeof *serial);
  free(serial);
  free(parallel);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      CPU_TEST(test_second_graph_shares_a_kernel),
      CPU_TEST(test_cleared_cache_compiles_again),
      CPU_TEST(test_key_follows_structure),
      CPU_TEST(test_repeated_kernel_and_disk),
      CPU_TEST(test_eval_after_train),
      CPU_TEST(test_parallel_compile_matches_serial),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
