/* Per-device thread pools (src/backend/cpu/cpu_pool.c): with LT_NUM_THREADS=4,
 * each replica of an in-process world of 2 gets a pool of 2 threads (one
 * worker besides its caller), made once and reused by a later world of the
 * same size; a world of 4 gives each a pool of 1 (no worker). The replicas'
 * parallel kernels (a large elementwise op, a GEMM cut into parts) must give
 * the values of plain C loops. Threads are counted in /proc/self/task. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "lazytensor_dist.h"

enum { N = 1 << 18, R = 96 };

static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static float *g_x;      /* N inputs */
static float *g_a;      /* R x R */
static float *g_mm;     /* g_a @ g_a by plain loops */
static double g_mm_tol; /* sgemm and the loops sum R products in their own orders */

/* Every replica: x * (rank + 1) + 1 over N elements and a @ a, read back. */
static int replica(int rank, lt_device dev, void *ctx) {
  (void)ctx;
  float *out = malloc(N * sizeof *out), *mm = malloc(R * R * sizeof *mm);
  int rc = LT_OK;
  lt_scope_begin();
  const int64_t sn[1] = {N}, sa[2] = {R, R};
  lt_tensor *x = lt_from_data(dev, LT_F32, sn, 1, g_x);
  lt_tensor *a = lt_from_data(dev, LT_F32, sa, 2, g_a);
  lt_tensor *y = lt_add(lt_mul(x, lt_scalar(dev, LT_F32, rank + 1)), lt_scalar(dev, LT_F32, 1));
  lt_tensor *p = lt_matmul(a, a);
  if (!y || !p || lt_to_data(y, out, N * sizeof *out) != LT_OK ||
      lt_to_data(p, mm, R * R * sizeof *mm) != LT_OK)
    rc = lt_last_status();
  lt_scope_end();
  for (int i = 0; rc == LT_OK && i < N; i++)
    if (out[i] != g_x[i] * (float)(rank + 1) + 1) rc = LT_EEXEC;
  for (int i = 0; rc == LT_OK && i < R * R; i++)
    if (!(fabs(mm[i] - g_mm[i]) <= g_mm_tol)) rc = LT_EEXEC;
  free(out);
  free(mm);
  return rc;
}

static void run_world(int n) {
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(n, &w), LT_OK);
  int rc = lt_world_run(w, replica, NULL);
  if (rc != LT_OK) fail_msg("world of %d: %s", n, lt_last_error());
  lt_world_free(w);
}

static void test_each_replica_its_share(void **state) {
  (void)state;
  g_x = malloc(N * sizeof *g_x);
  g_a = malloc(R * R * sizeof *g_a);
  g_mm = calloc(R * R, sizeof *g_mm);
  for (int i = 0; i < N; i++) g_x[i] = (float)(i % 1000) * 0.01f;
  double amax = 0;
  for (int i = 0; i < R * R; i++) {
    g_a[i] = (float)((i * 37) % 23) * 0.1f - 1;
    amax = fmax(amax, fabs(g_a[i]));
  }
  g_mm_tol = tu_f32_sum_tol(R, amax * amax);
  for (int i = 0; i < R; i++)
    for (int k = 0; k < R; k++)
      for (int j = 0; j < R; j++) g_mm[i * R + j] += g_a[i * R + k] * g_a[k * R + j];
  /* the default pool and the devices' executor threads, before counting */
  for (int d = 0; d < 4; d++) assert_int_equal(replica(0, lt_cpu(d), NULL), LT_OK);
  const char *be = getenv("LT_BACKEND");
  bool cpu = !be || !*be || strcmp(be, "cpu") == 0; /* the ref backend has no pools */
  int t0 = thread_count();
  run_world(2);
  if (cpu) assert_int_equal(thread_count(), t0 + 2); /* one worker per replica's pool */
  run_world(2);
  if (cpu) assert_int_equal(thread_count(), t0 + 2); /* the same pools again */
  run_world(4);
  if (cpu) assert_int_equal(thread_count(), t0 + 2); /* shares of 1: callers only */
  /* outside a world, the shared pool */
  assert_int_equal(replica(1, lt_cpu(0), NULL), LT_OK);
  free(g_x);
  free(g_a);
  free(g_mm);
}

int main(void) {
  setenv("LT_NUM_THREADS", "4", 1); /* before the backend starts its pool */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_replica_its_share),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
