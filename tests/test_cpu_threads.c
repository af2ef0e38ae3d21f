/* The cpu backend's threading policy: one set of worker threads for the
 * whole process. GEMMs run on the backend's pool (oneDNN and OpenBLAS one
 * thread per call), so a matrix product starts no OpenMP team of its own, and
 * products cut into parts across the pool give the same values as on one
 * thread. */
#include <dirent.h>
#include <math.h>
#include <time.h>

#include "test_util.h"

static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static lt_tensor *filled(int64_t r, int64_t c, float scale) {
  float *v = malloc((size_t)(r * c) * sizeof *v);
  assert_non_null(v);
  for (int64_t i = 0; i < r * c; i++) v[i] = (float)((i * 7919) % 101) * scale - 0.5f;
  lt_tensor *t = tu_f32(SHAPE(r, c), 2, v);
  free(v);
  return t;
}

static void test_gemm_starts_no_threads(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  lt_device dev = CPU0;
  /* the pool and the executor's worker start with the first big loop */
  lt_tensor *x = filled(512, 512, 0.01f);
  lt_tensor *y = lt_exp(x);
  assert_int_equal(lt_sync(&y, 1, true), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  int before = thread_count();
  assert_true(before > 0);
  for (int i = 0; i < 3; i++) {
    lt_scope_begin();
    lt_tensor *p = lt_matmul(x, lt_exp(x)); /* 512^3: cut across the pool */
    assert_int_equal(lt_sync(&p, 1, true), LT_OK);
    lt_scope_end();
  }
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  assert_int_equal(thread_count(), before);
  lt_release(x);
  lt_release(y);
}

/* A product with an epilogue (relu and the update, run per block of rows),
 * whose result is written in place over a donated parameter that the product
 * reads: W -= 0.01 relu(x @ W), three steps, against the host. */
static void test_epilogue_in_place_update(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  enum { N = 192, STEPS = 3 };
  static double w[N * N], x[N * N], p[N * N];
  for (int i = 0; i < N * N; i++) {
    w[i] = (double)((i * 37) % 23) / 23.0 - 0.4;
    x[i] = (double)((i * 11) % 19) / 19.0 - 0.5;
  }
  lt_tensor *W = tu_f64(SHAPE(N, N), 2, w), *X = tu_f64(SHAPE(N, N), 2, x);
  lt_tensor *rate = lt_scalar(CPU0, LT_F64, 0.01);
  assert_int_equal(lt_set_donatable(W, true), LT_OK);
  for (int s = 0; s < STEPS; s++) {
    lt_scope_begin();
    assert_int_equal(lt_assign(W, lt_sub(W, lt_mul(rate, lt_relu(lt_matmul(X, W))))), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    for (int i = 0; i < N; i++) /* the same on the host */
      for (int j = 0; j < N; j++) {
        double acc = 0;
        for (int k = 0; k < N; k++) acc += x[i * N + k] * w[k * N + j];
        p[i * N + j] = acc;
      }
    for (int i = 0; i < N * N; i++) w[i] -= 0.01 * (p[i] > 0 ? p[i] : 0);
  }
  static double got[N * N];
  tu_read(W, got, N * N);
  for (int i = 0; i < N * N; i++) assert_true(fabs(got[i] - w[i]) < 1e-9);
  lt_release(W);
  lt_release(X);
  lt_release(rate);
}

/* Many small loops one after another, some after a pause longer than the
 * pool's spin (its workers then sleep, and may wake after the caller ran
 * every chunk itself): each result exact. With 8 threads on fewer cores some
 * workers are always late; under TSan a late worker that read a job's fields
 * while the next job is written would be reported. */
static void test_small_loops_back_to_back(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  enum { N = 40000, ROUNDS = 120 }; /* just above the size a loop is split at */
  static float v[N];
  static double got[N];
  for (int i = 0; i < N; i++) v[i] = (float)(i % 1000);
  lt_tensor *x = tu_f32(SHAPE(N), 1, v);
  for (int r = 0; r < ROUNDS; r++) {
    lt_scope_begin();
    lt_tensor *k = lt_scalar(CPU0, LT_F32, (double)(r % 7));
    lt_tensor *y = lt_add(lt_mul(x, k), k);
    assert_int_equal(lt_sync(&y, 1, true), LT_OK);
    tu_read(y, got, N);
    for (int i = 0; i < N; i++)
      assert_true(got[i] == (double)(v[i] * (float)(r % 7) + (float)(r % 7)));
    lt_scope_end();
    if (r % 3 == 0) { /* longer than the spin: the workers go to sleep */
      struct timespec ts = {0, 300000};
      nanosleep(&ts, NULL);
    }
  }
  lt_release(x);
}

int main(void) {
  setenv("LT_NUM_THREADS", "8", 0); /* products cut in 8 parts: some run after others */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_starts_no_threads),
      cmocka_unit_test(test_epilogue_in_place_update),
      cmocka_unit_test(test_small_loops_back_to_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
