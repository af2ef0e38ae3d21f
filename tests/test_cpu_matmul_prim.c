/* The f32 products of LT_CPU_MATMUL=primitive (src/backend/cpu/cpu_matmul_prim.c)
 * against a plain f64 product: every transposition, dense operands and the
 * strided blocks that the pool cuts a product into (lda, ldb, ldc wider than
 * the block: copied densely first), odd sizes, and the
 * same shape twice (the cached primitive). The tolerance is k f32 roundings
 * of the sum of |a||b|, whatever the order of summation.
 *
 * oneDNN 2.6 has matmul primitives of its own (brgemm) only from AVX-512 on;
 * below that, lt__cpu_gemm_prim declines every product and the test is
 * skipped, saying so. The test lifts scripts/test.sh's AVX2 caps
 * (ONEDNN_MAX_CPU_ISA, LT_CPU_ISA: set for the ASan run), so that the copies
 * run under ASan where the machine has AVX-512. */
#include "test_util.h"

#include "../src/backend/cpu/cpu.h"

typedef struct shape {
  bool ta, tb;
  int64_t n, m, k, pad_a, pad_b, pad_c; /* pad: the leading dimension's extra width */
} shape;

static uint64_t g_rng = 12345;

static float next_value(void) {
  g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(g_rng >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

/* Runs s through the primitive; returns false when it declined. */
static bool check_shape(const shape *s) {
  int64_t a_rows = s->ta ? s->k : s->n, a_cols = s->ta ? s->n : s->k;
  int64_t b_rows = s->tb ? s->m : s->k, b_cols = s->tb ? s->k : s->m;
  int64_t lda = a_cols + s->pad_a, ldb = b_cols + s->pad_b, ldc = s->m + s->pad_c;
  float *a = malloc((size_t)(a_rows * lda + 1) * sizeof *a);
  float *b = malloc((size_t)(b_rows * ldb + 1) * sizeof *b);
  float *c = malloc((size_t)(s->n * ldc + 1) * sizeof *c);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  for (int64_t i = 0; i < a_rows * lda; i++) a[i] = next_value();
  for (int64_t i = 0; i < b_rows * ldb; i++) b[i] = next_value();
  for (int64_t i = 0; i < s->n * ldc; i++) c[i] = 1234.5f; /* the padding must keep it */
  bool ran =
      lt__cpu_gemm_prim(LT_F32, LT_F32, s->ta, s->tb, s->n, s->m, s->k, a, lda, b, ldb, c, ldc);
  for (int64_t i = 0; ran && i < s->n; i++) {
    for (int64_t j = 0; j < s->m; j++) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < s->k; p++) {
        double x = s->ta ? a[p * lda + i] : a[i * lda + p];
        double y = s->tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
        mag += fabs(x * y);
      }
      double tol = (double)(s->k + 1) * FLT_EPSILON * mag + 1e-30;
      if (fabs(c[i * ldc + j] - sum) > tol)
        fail_msg("%s%s %lldx%lldx%lld pads %lld/%lld/%lld: c[%lld][%lld] = %.9g, want %.9g",
                 s->ta ? "At" : "A", s->tb ? "Bt" : "B", (long long)s->n, (long long)s->m,
                 (long long)s->k, (long long)s->pad_a, (long long)s->pad_b, (long long)s->pad_c,
                 (long long)i, (long long)j, c[i * ldc + j], sum);
    }
    for (int64_t j = s->m; j < ldc; j++)
      if (c[i * ldc + j] != 1234.5f)
        fail_msg("row %lld: the padding of C was written", (long long)i);
  }
  free(a);
  free(b);
  free(c);
  return ran;
}

static void test_products_match_f64(void **state) {
  (void)state;
  static const int64_t sizes[][3] = {{1, 1, 1},      {17, 33, 5},  {64, 64, 32},
                                     {128, 96, 300}, {3, 200, 64}, {256, 16, 128}};
  static const int64_t pads[][3] = {{0, 0, 0}, {7, 0, 0}, {0, 5, 0}, {0, 0, 9}, {16, 16, 16}};
  int ran = 0, total = 0;
  for (int t = 0; t < 4; t++)
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
      for (size_t p = 0; p < sizeof pads / sizeof pads[0]; p++)
        for (int twice = 0; twice < 2; twice++) { /* made, then from the cache */
          shape s = {.ta = t & 1,
                     .tb = t >> 1,
                     .n = sizes[z][0],
                     .m = sizes[z][1],
                     .k = sizes[z][2],
                     .pad_a = pads[p][0],
                     .pad_b = pads[p][1],
                     .pad_c = pads[p][2]};
          ran += check_shape(&s);
          total++;
        }
  printf("# %d of %d products ran through matmul primitives\n", ran, total);
  /* No AVX-512: oneDNN offers only its sgemm, which cpu_gemm.c calls. (With
   * it, every shape here got a primitive on the machines tried; which
   * shapes oneDNN takes is its business, and each one that ran is checked.) */
  if (ran == 0) skip();
}

int main(void) {
  /* before the first product: the option and the ISA are read once */
  setenv("LT_CPU_MATMUL", "primitive", 1);
  unsetenv("ONEDNN_MAX_CPU_ISA");
  unsetenv("LT_CPU_ISA");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_products_match_f64)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
