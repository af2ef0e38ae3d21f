/* Random ops: the Philox generator against its published answers, the
 * distributions (deterministic given the seed, so the statistical checks never
 * flake), the seed chain (same seed, same numbers; successive draws and steps
 * differ; the graph compiles once across steps), eager mode, and every error. */
#include "test_util.h"

#include "../src/core/lt_philox.h"

static int64_t ctr(const char *name) { return tu_counter(name); }

static int setup(void **state) {
  lt_cache_clear();
  lt_counters_reset();
  lt_set_eager(false);
  lt_set_seed(CPU0, 0);
  return tu_setup(state);
}
static int teardown(void **state) {
  lt_set_eager(false);
  return tu_teardown(state);
}
#define RTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* t's raw bytes (malloc'd, *nbytes long). */
static void *raw(lt_tensor *t, size_t *nbytes) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  *nbytes = (size_t)lt_numel(t) * lt_dtype_size(lt_get_dtype(t));
  void *p = malloc(*nbytes + 1);
  if (lt_to_data(t, p, *nbytes) != LT_OK) fail_msg("lt_to_data: %s", lt_last_error());
  return p;
}

static void moments(const double *v, int64_t n, double *mean, double *std) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += v[i];
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) s2 += (v[i] - *mean) * (v[i] - *mean);
  *std = sqrt(s2 / (double)n);
}

/* ---- the generator ---- */

static void test_philox_known_answers(void **state) {
  (void)state;
  /* Random123's kat_vectors for philox4x32 10: counter, key, expected block. */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int i = 0; i < 3; i++) {
    lt_philox_block b = lt_philox4x32_10(&kat[i][0], &kat[i][4]);
    for (int w = 0; w < 4; w++) assert_int_equal(b.w[w], kat[i][6 + w]);
  }
  /* The element mapping: key = seed halves, counter = k. */
  uint32_t ctr4[4] = {7, 0, 0, 0}, key[2] = {0x89abcdefu, 0x01234567u};
  lt_philox_block want = lt_philox4x32_10(ctr4, key);
  lt_philox_block got = lt_philox_at(0x0123456789abcdefull, 7);
  assert_memory_equal(&want, &got, sizeof want);
  assert_true(lt_philox_u24(0xffffffffu) < 1.0f);
  assert_true(lt_philox_u53(0xffffffffu, 0xffffffffu) < 1.0);
  assert_true(lt_philox_u53(0, 0) == 0.0);
}

/* ---- distributions ---- */

static void test_uniform_range_and_mean(void **state) {
  (void)state;
  const int64_t n = 100000;
  lt_dtype dts[2] = {LT_F32, LT_F64};
  for (int d = 0; d < 2; d++) {
    lt_tensor *x = lt_rand_uniform(CPU0, dts[d], SHAPE(n), 1, -2.0, 3.0);
    assert_int_equal(lt_get_dtype(x), dts[d]);
    assert_int_equal(lt_ndim(x), 1);
    assert_int_equal(lt_dim(x, 0), n);
    double *v = tu_values(x), lo = INFINITY, hi = -INFINITY, mean, std;
    for (int64_t i = 0; i < n; i++) {
      if (!(v[i] >= -2.0 && v[i] < 3.0)) fail_msg("element %lld = %g", (long long)i, v[i]);
      lo = fmin(lo, v[i]);
      hi = fmax(hi, v[i]);
    }
    moments(v, n, &mean, &std);
    assert_true(fabs(mean - 0.5) < 0.02);
    assert_true(fabs(std - 5.0 / sqrt(12.0)) < 0.02);
    assert_true(lo < -1.99 && hi > 2.99);
    free(v);
  }
  /* [0, 1) is the generator's own output. */
  double *u = tu_values(lt_rand_uniform(CPU0, LT_F64, SHAPE(1000), 1, 0.0, 1.0));
  for (int i = 0; i < 1000; i++) assert_true(u[i] >= 0.0 && u[i] < 1.0);
  free(u);
  /* Two adjacent floats: lo + (hi - lo) * U rounds to hi for about half of the
   * draws; the result must still be lo every time. */
  double lo = 1.0, hi = (double)nextafterf(1.0f, 2.0f);
  double *w = tu_values(lt_rand_uniform(CPU0, LT_F32, SHAPE(1000), 1, lo, hi));
  for (int i = 0; i < 1000; i++) assert_true(w[i] == lo);
  free(w);
  /* 0-d and empty shapes. */
  double s;
  tu_read(lt_rand_uniform(CPU0, LT_F32, NULL, 0, 5.0, 6.0), &s, 1);
  assert_true(s >= 5.0 && s < 6.0);
  lt_tensor *e = lt_rand_uniform(CPU0, LT_F32, SHAPE(3, 0), 2, 0.0, 1.0);
  assert_int_equal(lt_numel(e), 0);
  free(tu_values(e));
}

static void test_normal_moments(void **state) {
  (void)state;
  const int64_t n = 100000;
  double mean, std;
  double *v = tu_values(lt_rand_normal(CPU0, LT_F32, SHAPE(n), 1, 0.0, 1.0));
  for (int64_t i = 0; i < n; i++) assert_true(isfinite(v[i]));
  moments(v, n, &mean, &std);
  assert_true(fabs(mean) < 0.02);
  assert_true(fabs(std - 1.0) < 0.02);
  free(v);

  lt_tensor *x = lt_rand_normal(CPU0, LT_F64, SHAPE(400, 250), 2, 3.0, 2.0);
  assert_int_equal(lt_get_dtype(x), LT_F64);
  v = tu_values(x);
  moments(v, n, &mean, &std);
  assert_true(fabs(mean - 3.0) < 0.02);
  assert_true(fabs(std - 2.0) < 0.02);
  /* Roughly 68% within one std. */
  int64_t in1 = 0;
  for (int64_t i = 0; i < n; i++) in1 += fabs(v[i] - 3.0) < 2.0;
  assert_true(fabs((double)in1 / (double)n - 0.6827) < 0.01);
  free(v);

  /* std 0 gives the mean exactly. */
  v = tu_values(lt_rand_normal(CPU0, LT_F32, SHAPE(16), 1, 1.5, 0.0));
  for (int i = 0; i < 16; i++) assert_true(v[i] == 1.5);
  free(v);
}

static void test_bernoulli(void **state) {
  (void)state;
  const int64_t n = 100000;
  lt_tensor *p = lt_full(CPU0, LT_F32, SHAPE(n), 1, 0.3);
  lt_tensor *b = lt_bernoulli(p);
  assert_int_equal(lt_get_dtype(b), LT_F32);
  assert_int_equal(lt_dim(b, 0), n);
  double *v = tu_values(b), ones = 0;
  for (int64_t i = 0; i < n; i++) {
    assert_true(v[i] == 0.0 || v[i] == 1.0);
    ones += v[i];
  }
  assert_true(fabs(ones / (double)n - 0.3) < 0.01);
  free(v);
  /* p of 0 and 1 are exact; elementwise p; f64 stays f64. */
  double pv[6] = {0, 1, 0, 1, 1, 0}, want[6] = {0, 1, 0, 1, 1, 0};
  tu_expect(lt_bernoulli(tu_f64(SHAPE(2, 3), 2, pv)), LT_F64, SHAPE(2, 3), 2, want, 0);
}

static void test_dropout(void **state) {
  (void)state;
  const int64_t n = 100000;
  lt_tensor *a = lt_full(CPU0, LT_F32, SHAPE(n), 1, 2.0);
  lt_tensor *d = lt_dropout(a, 0.25, true);
  assert_int_equal(lt_get_dtype(d), LT_F32);
  double *v = tu_values(d), zeros = 0;
  double kept = (double)(2.0f * (float)(1.0 / 0.75));
  for (int64_t i = 0; i < n; i++) {
    if (v[i] == 0.0)
      zeros++;
    else if (v[i] != kept)
      fail_msg("element %lld = %.9g, want 0 or %.9g", (long long)i, v[i], kept);
  }
  assert_true(fabs(zeros / (double)n - 0.25) < 0.01);
  free(v);

  /* f64, p = 0.5: the expected value is kept. */
  double *w = tu_values(lt_dropout(lt_full(CPU0, LT_F64, SHAPE(n), 1, 1.0), 0.5, true));
  double mean, std;
  moments(w, n, &mean, &std);
  assert_true(fabs(mean - 1.0) < 0.02);
  for (int64_t i = 0; i < n; i++) assert_true(w[i] == 0.0 || w[i] == 2.0);
  free(w);

  /* Not training, or p == 0: a new tensor with a's value. */
  float av[4] = {1, -2, 3.5f, 0};
  double want[4] = {1, -2, 3.5, 0};
  lt_tensor *x = tu_f32(SHAPE(4), 1, av);
  lt_tensor *y = lt_dropout(x, 0.5, false), *z = lt_dropout(x, 0.0, true);
  assert_true(y != x && z != x && y != z);
  tu_expect(y, LT_F32, SHAPE(4), 1, want, 0);
  tu_expect(z, LT_F32, SHAPE(4), 1, want, 0);
  tu_expect(x, LT_F32, SHAPE(4), 1, want, 0);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void test_randperm(void **state) {
  (void)state;
  const int64_t n = 1000;
  lt_tensor *p = lt_randperm(CPU0, LT_I64, n);
  assert_int_equal(lt_get_dtype(p), LT_I64);
  assert_int_equal(lt_ndim(p), 1);
  assert_int_equal(lt_dim(p, 0), n);
  double *v = tu_values(p);
  int64_t fixed = 0;
  for (int64_t i = 0; i < n; i++) fixed += v[i] == (double)i;
  assert_true(fixed < 10); /* expected 1 for a uniform permutation */
  /* A permutation of 0..n-1 is, sorted, exactly 0, 1, ..., n-1 (no value is
   * used as an index: a bad one cannot write out of bounds). */
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  for (int64_t i = 0; i < n; i++) assert_true(v[i] == (double)i);
  free(v);

  double want1[1] = {0};
  tu_expect(lt_randperm(CPU0, LT_I32, 1), LT_I32, SHAPE(1), 1, want1, 0);
  lt_tensor *e = lt_randperm(CPU0, LT_I32, 0);
  assert_int_equal(lt_ndim(e), 1);
  assert_int_equal(lt_dim(e, 0), 0);
  free(tu_values(e));
  v = tu_values(lt_randperm(CPU0, LT_I32, 10));
  double sum = 0;
  for (int i = 0; i < 10; i++) sum += v[i];
  assert_true(sum == 45);
  free(v);
}

/* ---- the seed chain ---- */

/* Draws one of each random op after lt_set_seed(seed); their bytes. */
static void draw_all(uint64_t seed, void **bytes, size_t *nbytes) {
  lt_scope_begin();
  assert_int_equal(lt_set_seed(CPU0, seed), LT_OK);
  lt_tensor *t[4] = {
      lt_rand_uniform(CPU0, LT_F32, SHAPE(64), 1, -1.0, 4.0),
      lt_rand_normal(CPU0, LT_F64, SHAPE(8, 8), 2, 0.0, 1.0),
      lt_randperm(CPU0, LT_I64, 64),
      lt_dropout(lt_full(CPU0, LT_F32, SHAPE(64), 1, 1.0), 0.5, true),
  };
  for (int i = 0; i < 4; i++) bytes[i] = raw(t[i], &nbytes[i]);
  lt_scope_end();
}

static void test_same_seed_same_numbers(void **state) {
  (void)state;
  void *a[4], *b[4], *c[4];
  size_t na[4], nb[4], nc[4];
  draw_all(42, a, na);
  draw_all(42, b, nb);
  draw_all(43, c, nc);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(na[i], nb[i]);
    assert_memory_equal(a[i], b[i], na[i]);
    assert_memory_not_equal(a[i], c[i], na[i]);
    free(a[i]);
    free(b[i]);
    free(c[i]);
  }
}

static void test_draws_in_one_step_differ(void **state) {
  (void)state;
  size_t n1, n2;
  void *a = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(100), 1, 0.0, 1.0), &n1);
  void *b = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(100), 1, 0.0, 1.0), &n2);
  assert_memory_not_equal(a, b, n1);
  free(a);
  free(b);
  /* Two draws traced together, read together. */
  lt_tensor *x = lt_rand_normal(CPU0, LT_F32, SHAPE(100), 1, 0.0, 1.0);
  lt_tensor *y = lt_rand_normal(CPU0, LT_F32, SHAPE(100), 1, 0.0, 1.0);
  lt_tensor *ts[2] = {x, y};
  assert_int_equal(lt_sync(ts, 2, true), LT_OK);
  a = raw(x, &n1);
  b = raw(y, &n2);
  assert_memory_not_equal(a, b, n1);
  free(a);
  free(b);
}

static void test_bounds_do_not_recompile(void **state) {
  (void)state;
  lt_set_seed(CPU0, 5);
  double *a = tu_values(lt_rand_uniform(CPU0, LT_F32, SHAPE(8), 1, 2.0, 5.0));
  lt_set_seed(CPU0, 5);
  double *b = tu_values(lt_rand_uniform(CPU0, LT_F32, SHAPE(8), 1, 3.0, 7.5));
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("CachedCompile"), 1);
  for (int i = 0; i < 8; i++) assert_true(fabs((a[i] - 2.0) / 3.0 - (b[i] - 3.0) / 4.5) < 1e-5);
  free(a);
  free(b);
  /* The same for normal moments and dropout's p. (Each draw follows a
   * lt_set_seed: within a step, the k-th draw's graph holds k chain links.) */
  lt_counters_reset();
  lt_tensor *x = lt_full(CPU0, LT_F32, SHAPE(8), 1, 3.0);
  lt_set_seed(CPU0, 1);
  free(tu_values(lt_rand_normal(CPU0, LT_F32, SHAPE(8), 1, 2.0, 3.0)));
  lt_set_seed(CPU0, 2);
  free(tu_values(lt_rand_normal(CPU0, LT_F32, SHAPE(8), 1, -4.0, 0.5)));
  lt_set_seed(CPU0, 3);
  free(tu_values(lt_dropout(x, 0.3, true)));
  lt_set_seed(CPU0, 4);
  free(tu_values(lt_dropout(x, 0.6, true)));
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(ctr("CachedCompile"), 2);
}

static void test_rejected_call_keeps_state(void **state) {
  (void)state;
  size_t n;
  lt_set_seed(CPU0, 11);
  void *a = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(32), 1, 0.0, 1.0), &n);
  lt_set_seed(CPU0, 11);
  assert_null(lt_rand_uniform(CPU0, LT_F32, SHAPE(32), 1, 1.0, 0.0));
  assert_null(lt_dropout(lt_full(CPU0, LT_F32, SHAPE(4), 1, 1.0), 1.0, true));
  assert_null(lt_randperm(CPU0, LT_F32, 3));
  lt_clear_error();
  void *b = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(32), 1, 0.0, 1.0), &n);
  assert_memory_equal(a, b, n);
  free(a);
  free(b);
}

static void test_devices_have_own_seeds(void **state) {
  (void)state;
  lt_device cpu1 = lt_cpu(1);
  size_t n;
  lt_set_seed(CPU0, 9);
  lt_set_seed(cpu1, 9);
  void *a = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(16), 1, 0.0, 1.0), &n);
  void *b = raw(lt_rand_uniform(cpu1, LT_F32, SHAPE(16), 1, 0.0, 1.0), &n);
  assert_memory_equal(a, b, n);
  /* Draws on CPU:1 do not move CPU:0's chain. */
  lt_set_seed(CPU0, 9);
  free(tu_values(lt_rand_normal(cpu1, LT_F32, SHAPE(4), 1, 0.0, 1.0)));
  void *c = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(16), 1, 0.0, 1.0), &n);
  assert_memory_equal(a, c, n);
  free(a);
  free(b);
  free(c);
}

static void test_eager_mode(void **state) {
  (void)state;
  void *lazy[4], *eager[4];
  size_t nl[4], ne[4];
  draw_all(77, lazy, nl);
  lt_set_eager(true);
  assert_true(lt_get_eager());
  draw_all(77, eager, ne);
  /* The seed is plain data in eager mode, yet the numbers are the same. */
  for (int i = 0; i < 4; i++) {
    assert_int_equal(nl[i], ne[i]);
    assert_memory_equal(lazy[i], eager[i], nl[i]);
    free(lazy[i]);
    free(eager[i]);
  }
  /* Each eager op runs at once; two draws differ and steps advance. */
  lt_set_seed(CPU0, 1);
  lt_tensor *x = lt_rand_uniform(CPU0, LT_F32, SHAPE(32), 1, 0.0, 1.0);
  assert_int_not_equal(lt_get_state(x), LT_STATE_PENDING);
  lt_tensor *y = lt_rand_uniform(CPU0, LT_F32, SHAPE(32), 1, 0.0, 1.0);
  size_t n;
  void *a = raw(x, &n), *b = raw(y, &n);
  assert_memory_not_equal(a, b, n);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  void *c = raw(lt_rand_uniform(CPU0, LT_F32, SHAPE(32), 1, 0.0, 1.0), &n);
  assert_memory_not_equal(a, c, n);
  assert_memory_not_equal(b, c, n);
  free(a);
  free(b);
  free(c);
  lt_set_eager(false);
}

/* ---- across steps (lt_mark_step) ---- */

static void test_steps_compile_once(void **state) {
  (void)state;
  lt_set_seed(CPU0, 123);
  int64_t before = ctr("UncachedCompile");
  double ys[10];
  void *xs[2] = {NULL, NULL};
  size_t n;
  for (int step = 0; step < 10; step++) {
    lt_scope_begin();
    lt_tensor *x = lt_rand_uniform(CPU0, LT_F32, SHAPE(256), 1, 0.0, 1.0);
    lt_tensor *y = lt_sum(x, NULL, 0, false);
    if (lt_mark_step(CPU0) != LT_OK) fail_msg("lt_mark_step: %s", lt_last_error());
    tu_read(y, &ys[step], 1);
    if (step < 2) xs[step] = raw(x, &n);
    lt_scope_end();
  }
  assert_int_equal(ctr("UncachedCompile") - before, 1);
  assert_memory_not_equal(xs[0], xs[1], n);
  for (int i = 0; i < 10; i++) {
    assert_true(ys[i] > 100 && ys[i] < 156); /* 128 +- 8.7 sigma */
    for (int j = 0; j < i; j++) assert_true(ys[i] != ys[j]);
  }
  free(xs[0]);
  free(xs[1]);
}

/* Three steps of two normal draws each after lt_set_seed(seed). */
static void run_steps(uint64_t seed, void *out[3][2], size_t *n) {
  lt_set_seed(CPU0, seed);
  for (int step = 0; step < 3; step++) {
    lt_scope_begin();
    lt_tensor *a = lt_rand_normal(CPU0, LT_F32, SHAPE(64), 1, 0.0, 1.0);
    lt_tensor *b = lt_rand_normal(CPU0, LT_F32, SHAPE(64), 1, 0.0, 1.0);
    if (lt_mark_step(CPU0) != LT_OK) fail_msg("lt_mark_step: %s", lt_last_error());
    out[step][0] = raw(a, n);
    out[step][1] = raw(b, n);
    lt_scope_end();
  }
}

static void test_steps_repeat_after_manual_seed(void **state) {
  (void)state;
  void *r1[3][2], *r2[3][2];
  size_t n;
  run_steps(2024, r1, &n);
  run_steps(2024, r2, &n);
  for (int s = 0; s < 3; s++)
    for (int k = 0; k < 2; k++) assert_memory_equal(r1[s][k], r2[s][k], n);
  /* No draw repeats another, within a step or across steps (in particular the
   * first draw of a step is not the second draw of the step before). */
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < i; j++) assert_memory_not_equal(r1[i / 2][i % 2], r1[j / 2][j % 2], n);
  for (int s = 0; s < 3; s++)
    for (int k = 0; k < 2; k++) {
      free(r1[s][k]);
      free(r2[s][k]);
    }
}

/* ---- errors ---- */

static void test_allocation_failures_are_errors(void **state) {
  (void)state;
  lt_set_allocator(tu_failing_alloc, NULL);
  int failures = 0, successes = 0;
  /* Fail the k-th allocation of a draw-and-read, for each k in turn. */
  for (long k = 0; k < 2000 && successes < 3; k++) {
    lt_clear_error();
    lt_scope_begin();
    lt_set_seed(CPU0, 3); /* the same graph every time (the chain restarts) */
    atomic_store(&tu_budget, k);
    lt_tensor *d = lt_dropout(lt_rand_uniform(CPU0, LT_F32, SHAPE(4), 1, 2.0, 3.0), 0.5, true);
    lt_tensor *p = lt_randperm(CPU0, LT_I32, 4);
    float out[4];
    int32_t perm[4];
    int rc = d && p ? lt_to_data(d, out, sizeof out) : lt_last_status();
    if (rc == LT_OK) rc = lt_to_data(p, perm, sizeof perm);
    atomic_store(&tu_budget, -1);
    if (rc == LT_OK) {
      successes++;
      for (int i = 0; i < 4; i++) assert_true(out[i] == 0.0f || (out[i] >= 4.0f && out[i] < 6.0f));
      assert_int_equal(perm[0] + perm[1] + perm[2] + perm[3], 6);
    } else {
      failures++;
      assert_int_equal(rc, LT_ENOMEM);
    }
    lt_scope_end();
  }
  lt_set_allocator(NULL, NULL);
  assert_true(failures > 0);
  assert_true(successes > 0);
  /* The chain still works. */
  double v[8];
  tu_read(lt_rand_uniform(CPU0, LT_F64, SHAPE(8), 1, 0.0, 1.0), v, 8);
  for (int i = 0; i < 8; i++) assert_true(v[i] >= 0 && v[i] < 1);
}

static void test_errors(void **state) {
  (void)state;
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_I32, SHAPE(2), 1, 0, 1), LT_EDTYPE, "lt_rand_uniform");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, (lt_dtype)42, SHAPE(2), 1, 0, 1), LT_EDTYPE, "dtype");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(2), 1, 1, 1), LT_EINVAL, "lo < hi");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(2), 1, 2, 1), LT_EINVAL, "lo < hi");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(2), 1, 0, INFINITY), LT_EINVAL, "finite");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F64, SHAPE(2), 1, NAN, 1), LT_EINVAL, "finite");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(2), 1, 1e39, 2e39), LT_EINVAL, "f32");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(2), 1, -3e38, 3e38), LT_EINVAL, "overflows");
  TU_EXPECT_ERROR(lt_rand_uniform(lt_cpu(99), LT_F32, SHAPE(2), 1, 0, 1), LT_EDEVICE,
                  "lt_rand_uniform");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, NULL, 1, 0, 1), LT_EINVAL, "shape is NULL");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(2, -1), 2, 0, 1), LT_ESHAPE, "negative");
  TU_EXPECT_ERROR(lt_rand_uniform(CPU0, LT_F32, SHAPE(1), 9, 0, 1), LT_ESHAPE, "rank");

  TU_EXPECT_ERROR(lt_rand_normal(CPU0, LT_BOOL, SHAPE(2), 1, 0, 1), LT_EDTYPE, "lt_rand_normal");
  TU_EXPECT_ERROR(lt_rand_normal(CPU0, LT_F32, SHAPE(2), 1, 0, -1), LT_EINVAL, "std >= 0");
  TU_EXPECT_ERROR(lt_rand_normal(CPU0, LT_F32, SHAPE(2), 1, NAN, 1), LT_EINVAL, "finite mean");
  TU_EXPECT_ERROR(lt_rand_normal(CPU0, LT_F64, SHAPE(2), 1, 0, INFINITY), LT_EINVAL, "finite");
  TU_EXPECT_ERROR(lt_rand_normal(lt_cpu(-1), LT_F32, SHAPE(2), 1, 0, 1), LT_EDEVICE,
                  "lt_rand_normal");

  TU_EXPECT_ERROR(lt_bernoulli(NULL), LT_EINVAL, "lt_bernoulli: operand is NULL");
  int32_t iv[2] = {0, 1};
  TU_EXPECT_ERROR(lt_bernoulli(tu_i32(SHAPE(2), 1, iv)), LT_EDTYPE, "lt_bernoulli");

  lt_tensor *a = lt_full(CPU0, LT_F32, SHAPE(4), 1, 1.0);
  TU_EXPECT_ERROR(lt_dropout(NULL, 0.5, true), LT_EINVAL, "lt_dropout: operand is NULL");
  TU_EXPECT_ERROR(lt_dropout(a, 1.0, true), LT_EINVAL, "[0, 1)");
  TU_EXPECT_ERROR(lt_dropout(a, -0.1, true), LT_EINVAL, "lt_dropout");
  TU_EXPECT_ERROR(lt_dropout(a, NAN, false), LT_EINVAL, "lt_dropout");
  TU_EXPECT_ERROR(lt_dropout(a, 1.0 - 1e-10, true), LT_EINVAL, "f32"); /* rounds to 1 */
  TU_EXPECT_ERROR(lt_dropout(tu_i32(SHAPE(2), 1, iv), 0.5, true), LT_EDTYPE, "lt_dropout");

  TU_EXPECT_ERROR(lt_randperm(CPU0, LT_F32, 3), LT_EDTYPE, "lt_randperm");
  TU_EXPECT_ERROR(lt_randperm(CPU0, LT_BOOL, 3), LT_EDTYPE, "i32 or i64");
  TU_EXPECT_ERROR(lt_randperm(CPU0, LT_I64, -1), LT_EINVAL, "n must be >= 0");
  TU_EXPECT_ERROR(lt_randperm(CPU0, LT_I32, (int64_t)INT32_MAX + 2), LT_EINVAL, "i32");
  TU_EXPECT_ERROR(lt_randperm(lt_cpu(64), LT_I64, 3), LT_EDEVICE, "lt_randperm");

  lt_clear_error();
  assert_int_equal(lt_set_seed(lt_cpu(64), 1), LT_EDEVICE);
  assert_non_null(strstr(lt_last_error(), "lt_set_seed"));

  /* A chain keeps the first error. */
  lt_clear_error();
  assert_null(
      lt_dropout(lt_bernoulli(lt_rand_uniform(CPU0, LT_I64, SHAPE(2), 1, 0, 1)), 0.5, true));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  assert_non_null(strstr(lt_last_error(), "lt_rand_uniform"));
}

/* ---- RNG state get/set ---- */

/* A dropout mask, a permutation and uniform draws (each read as bytes). */
static void draw3(void *out[3], size_t n[3]) {
  lt_scope_begin();
  lt_tensor *t[3] = {
      lt_dropout(lt_full(CPU0, LT_F32, SHAPE(64), 1, 1.0), 0.5, true),
      lt_randperm(CPU0, LT_I64, 32),
      lt_rand_uniform(CPU0, LT_F64, SHAPE(16), 1, 0.0, 1.0),
  };
  for (int i = 0; i < 3; i++) out[i] = raw(t[i], &n[i]);
  lt_scope_end();
}

static void expect_same3(void *a[3], void *b[3], size_t n[3], bool same) {
  for (int i = 0; i < 3; i++) {
    if (same) assert_memory_equal(a[i], b[i], n[i]);
    if (!same) assert_memory_not_equal(a[i], b[i], n[i]);
  }
}

static void free3(void *a[3]) {
  for (int i = 0; i < 3; i++) free(a[i]);
}

/* get, draw, mark_step, draw; set, the same again: the same numbers, also
 * after the step barrier (the base seed is part of the state) and from a
 * state taken in the middle of a step (after pending draws). */
static void test_rng_state_replays_draws(void **state) {
  (void)state;
  assert_int_equal(lt_set_seed(CPU0, 5), LT_OK);
  lt_tensor *pending = lt_rand_uniform(CPU0, LT_F32, SHAPE(4), 1, 0.0, 1.0); /* mid-step */
  assert_int_equal(lt_get_state(pending), LT_STATE_PENDING);
  lt_rng_state st;
  assert_int_equal(lt_get_rng_state(CPU0, &st), LT_OK);
  void *a0[3], *a1[3], *b0[3], *b1[3];
  size_t n[3];
  draw3(a0, n);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  draw3(a1, n);
  assert_int_equal(lt_set_rng_state(CPU0, &st), LT_OK);
  draw3(b0, n);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  draw3(b1, n);
  expect_same3(a0, b0, n, true);
  expect_same3(a1, b1, n, true);
  expect_same3(a0, a1, n, false); /* the step barrier did advance */
  /* the same state in eager mode: the same numbers */
  lt_set_eager(true);
  void *e0[3];
  assert_int_equal(lt_set_rng_state(CPU0, &st), LT_OK);
  draw3(e0, n);
  lt_set_eager(false);
  expect_same3(a0, e0, n, true);
  free3(a0);
  free3(a1);
  free3(b0);
  free3(b1);
  free3(e0);
}

/* The blob is the documented little-endian layout; a state taken after
 * lt_set_seed holds the seed as base and running seed. Bad blobs fail and
 * leave the state alone. */
static void test_rng_state_blob_and_errors(void **state) {
  (void)state;
  assert_int_equal(lt_set_seed(CPU0, 0x0102030405060708ull), LT_OK);
  lt_rng_state st, bad, now;
  assert_int_equal(lt_get_rng_state(CPU0, &st), LT_OK);
  static const uint8_t want[LT_RNG_STATE_BYTES] = {'L', 'T', 'R', 'S', 1, 0, 0, 0, 8, 7, 6, 5,
                                                   4,   3,   2,   1,   8, 7, 6, 5, 4, 3, 2, 1};
  assert_memory_equal(st.bytes, want, sizeof want);
  assert_int_equal(lt_get_rng_state(CPU0, NULL), LT_EINVAL);
  assert_int_equal(lt_get_rng_state(lt_cpu(64), &now), LT_EDEVICE);
  assert_non_null(strstr(lt_last_error(), "lt_get_rng_state"));
  assert_int_equal(lt_set_rng_state(CPU0, NULL), LT_EINVAL);
  assert_int_equal(lt_set_rng_state(lt_cpu(-1), &st), LT_EDEVICE);
  bad = st;
  bad.bytes[0] = 'X';
  assert_int_equal(lt_set_rng_state(CPU0, &bad), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "bad magic"));
  bad = st;
  bad.bytes[4] = 9;
  assert_int_equal(lt_set_rng_state(CPU0, &bad), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "version 9"));
  bad = st;
  bad.bytes[31] = 1;
  assert_int_equal(lt_set_rng_state(CPU0, &bad), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "corrupt"));
  assert_int_equal(lt_get_rng_state(CPU0, &now), LT_OK);
  assert_memory_equal(now.bytes, st.bytes, sizeof st.bytes);
  /* a draw moves the running seed; the base seed stays */
  lt_rand_uniform(CPU0, LT_F32, SHAPE(2), 1, 0.0, 1.0);
  assert_int_equal(lt_get_rng_state(CPU0, &now), LT_OK);
  assert_memory_equal(now.bytes, st.bytes, 16);
  assert_memory_not_equal(now.bytes + 16, st.bytes + 16, 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      RTEST(test_philox_known_answers),
      RTEST(test_uniform_range_and_mean),
      RTEST(test_normal_moments),
      RTEST(test_bernoulli),
      RTEST(test_dropout),
      RTEST(test_randperm),
      RTEST(test_same_seed_same_numbers),
      RTEST(test_draws_in_one_step_differ),
      RTEST(test_bounds_do_not_recompile),
      RTEST(test_rejected_call_keeps_state),
      RTEST(test_devices_have_own_seeds),
      RTEST(test_eager_mode),
      RTEST(test_steps_compile_once),
      RTEST(test_steps_repeat_after_manual_seed),
      RTEST(test_errors),
      RTEST(test_allocation_failures_are_errors),
      RTEST(test_rng_state_replays_draws),
      RTEST(test_rng_state_blob_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
