/* OpenBLAS is loaded at the first f64 product, not with the program
 * (cpu_openblas.c): the process maps no libopenblas before it; f64 products
 * give exact sums (small integers) by OpenBLAS and, where it cannot be loaded
 * (the ctest test_cpu_openblas_missing sets LT_OPENBLAS_LIBRARY to a file that
 * does not exist), by plain loops, and lt_get_isa says which. */
#include "test_util.h"

/* Whether this process has a libopenblas mapped. */
static bool openblas_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, "libopenblas") != NULL;
  fclose(f);
  return found;
}

static bool blas_expected(void) {
  const char *e = getenv("LT_OPENBLAS_LIBRARY");
  return !e || !*e;
}

/* First in the process: nothing f64 has run yet, f32 products neither load
 * OpenBLAS (oneDNN has them). */
static void test_not_loaded_before_an_f64_product(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  assert_false(openblas_mapped());
  lt_tensor *a = tu_f32(SHAPE(2, 2), 2, (float[]){1, 2, 3, 4});
  tu_expect(lt_matmul(a, a), LT_F32, SHAPE(2, 2), 2, (double[]){7, 10, 15, 22}, 0);
  assert_false(openblas_mapped());
}

/* (n x k) @ (k x m) with both operands optionally transposed, against sums
 * in the test; small integers, so every order of summing is exact. Big
 * enough (n * m * k >= 2^20) to be cut over the pool too. */
static void check_product(int64_t n, int64_t m, int64_t k, bool ta, bool tb) {
  double *a = malloc(sizeof(double) * (size_t)(n * k)),
         *b = malloc(sizeof(double) * (size_t)(k * m));
  double *want = malloc(sizeof(double) * (size_t)(n * m));
  /* a[i][p] and b[p][j] as math; stored transposed when ta / tb */
  for (int64_t i = 0; i < n; i++)
    for (int64_t p = 0; p < k; p++)
      a[ta ? p * n + i : i * k + p] = (double)((i * 7 + p * 3) % 11 - 5);
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < m; j++)
      b[tb ? j * k + p : p * m + j] = (double)((p * 5 + j * 2) % 13 - 6);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += a[ta ? p * n + i : i * k + p] * b[tb ? j * k + p : p * m + j];
      want[i * m + j] = s;
    }
  lt_tensor *ta_t = ta ? tu_f64(SHAPE(k, n), 2, a) : tu_f64(SHAPE(n, k), 2, a);
  lt_tensor *tb_t = tb ? tu_f64(SHAPE(m, k), 2, b) : tu_f64(SHAPE(k, m), 2, b);
  lt_tensor *x = ta ? lt_transpose(ta_t, 0, 1) : ta_t, *y = tb ? lt_transpose(tb_t, 0, 1) : tb_t;
  tu_expect(lt_matmul(x, y), LT_F64, SHAPE(n, m), 2, want, 0);
  free(a), free(b), free(want);
}

static void test_f64_products_are_exact(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  lt_scope_begin();
  check_product(3, 2, 4, false, false);
  check_product(5, 3, 2, true, false);
  check_product(4, 6, 3, false, true);
  check_product(2, 3, 5, true, true);
  check_product(160, 96, 128, false, false); /* cut over the pool's threads */
  check_product(96, 160, 128, true, true);
  lt_scope_end();
}

/* After the products: loaded, and lt_get_isa names it; or, when it cannot
 * be loaded, neither, and the isa says why. */
static void test_the_isa_names_the_f64_path(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  const char *isa = lt_get_isa(CPU0, LT_F64);
  assert_non_null(isa);
  if (blas_expected()) {
    assert_true(openblas_mapped());
    assert_true(strncmp(isa, "openblas", 8) == 0);
  } else {
    assert_false(openblas_mapped());
    assert_non_null(strstr(isa, "plain loops (cannot load"));
    assert_non_null(strstr(isa, getenv("LT_OPENBLAS_LIBRARY")));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_not_loaded_before_an_f64_product),
      cmocka_unit_test(test_f64_products_are_exact),
      cmocka_unit_test(test_the_isa_names_the_f64_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
