/* LT_CPU_ISA (src/backend/cpu/cpu_isa.c): with avx2, an AVX-512 machine runs
 * what an AVX2-only one runs. Checked where the cap must reach: the LLVM
 * JIT's feature list keeps no AVX-512 or AMX feature on, oneDNN's effective
 * instruction set is AVX2 at most, the FMA peak is measured, and the kernels
 * so built still give ref's values (a fused chain, a product, a softmax). A value other than
 * avx2 or native makes the cpu backend refuse to start with a message that
 * names it (in a child process: the variable is read once per process). */
#include "test_util.h"

#include <oneapi/dnnl/dnnl.h>

#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

static int g_bad_child_status = -1; /* the child's exit status, set in main */

static void test_the_cap_reaches_every_picker(void **state) {
  (void)state;
  assert_true(lt__cpu_isa()->capped);
  assert_false(lt__cpu_isa()->avx512);
  const char *features = NULL;
  assert_int_equal(lt__cpu_jit_host(NULL, &features), LT_OK);
  if (strstr(features, "+avx512") || strstr(features, "+amx"))
    fail_msg("LLVM features keep AVX-512 or AMX on: %s", features);
  lt__cpu_gemm_init();
  assert_true(dnnl_get_effective_cpu_isa() <= dnnl_cpu_isa_avx2);
  double peak = 0;
  assert_int_equal(lt_get_fma_peak(1, &peak), LT_OK);
  assert_true(peak > 0);
}

/* The same values as ref through the capped kernels. */
static void test_capped_kernels_match_ref(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  enum { N = 37, K = 29, M = 21 };
  float a[N * K], b[K * M];
  for (int i = 0; i < N * K; i++) a[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < K * M; i++) b[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
  double got[2][N * M];
  const lt_backend *backends[2] = {&lt__ref_backend, &lt__cpu_backend};
  for (int d = 0; d < 2; d++) {
    lt__backend_force(backends[d]);
    int64_t sa[] = {N, K}, sb[] = {K, M};
    lt_tensor *x = lt_from_data(CPU0, LT_F32, sa, 2, a);
    lt_tensor *w = lt_from_data(CPU0, LT_F32, sb, 2, b);
    lt_tensor *y = lt_softmax(lt_tanh(lt_mul(lt_matmul(x, w), lt_exp(lt_matmul(x, w)))), 1);
    if (!y) fail_msg("%s", lt_last_error());
    tu_read(y, got[d], N * M);
    lt__backend_force(NULL);
  }
  for (int i = 0; i < N * M; i++)
    if (!tu_near(got[1][i], got[0][i], 1e-5))
      fail_msg("element %d: cpu %.9g, ref %.9g", i, got[1][i], got[0][i]);
}

static void test_a_bad_value_is_refused(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  /* 0: the child saw LT_ECOMPILE and a message naming LT_CPU_ISA=sse */
  assert_int_equal(g_bad_child_status, 0);
}

int main(void) {
  /* The bad value, first, in a child (fork before this process starts
   * any thread): it reads the variable once, as this process will. */
  pid_t pid = fork();
  if (pid == 0) {
    setenv("LT_CPU_ISA", "sse", 1);
    float v[2] = {1, 2};
    int64_t s[] = {2};
    lt_tensor *x = lt_from_data(lt_cpu(0), LT_F32, s, 1, v);
    lt_tensor *y = x ? lt_add(x, x) : NULL;
    float out[2];
    int rc = y ? lt_to_data(y, out, sizeof out) : lt_last_status();
    bool named = strstr(lt_last_error(), "LT_CPU_ISA=sse") != NULL;
    if (rc == LT_OK || !named) fprintf(stderr, "child: rc %d, message '%s'\n", rc, lt_last_error());
    exit(rc != LT_OK && named ? 0 : 1); /* exit, not _exit: the library's atexit clean-up runs */
  }
  int st = 0;
  if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st)) g_bad_child_status = WEXITSTATUS(st);
  setenv("LT_CPU_ISA", "avx2", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_cap_reaches_every_picker),
      cmocka_unit_test(test_capped_kernels_match_ref),
      cmocka_unit_test(test_a_bad_value_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
