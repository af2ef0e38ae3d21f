/* The cpu backend's loops over many bytes (cpu_codegen.c, pf_loop): from
 * 256 KB streamed on, flat elementwise loops and a reduction's first pass
 * over its rows run in blocks that prefetch the lines ahead of each stream.
 * Checked against ref on lengths that are no multiple of a block or a
 * vector, with streams of different widths (i8, f32, f64), strided and
 * reversed views, a scalar operand, a kernel of two outputs, row
 * reductions (softmax, logsumexp, max, sum, an integer sum) and a column
 * one, split over the pool's threads; the prefetches reach past the end of
 * the buffers without harm (ASan runs this too). */
#include "test_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

enum { kN = 300007 }; /* 1.2 MB per f32 stream, odd */

typedef struct host {
  float a[2 * kN], b[kN];
  int8_t c[kN];
  double d[kN];
} host;

static host *host_new(void) {
  host *h = malloc(sizeof *h);
  for (int64_t i = 0; i < 2 * kN; i++) h->a[i] = tu_wave_at(1, i);
  for (int64_t i = 0; i < kN; i++) {
    h->b[i] = tu_wave_at(2, i);
    h->c[i] = (int8_t)(i % 251 - 125);
    h->d[i] = (double)tu_wave_at(3, i) * 3.0;
  }
  return h;
}

/* The outputs of a case from its inputs (a is 2 kN long, the rest kN). */
typedef int (*build_fn)(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out);

enum { kOuts = 5 };

/* Runs f on backend be; the outputs' values into vals[o] (n[o] each). */
static void run_on(const lt_backend *be, const host *h, build_fn f, double **vals, int64_t *n,
                   int *nout) {
  lt__backend_force(be);
  lt_scope_begin();
  lt_tensor *a = lt_from_data(CPU0, LT_F32, SHAPE(2 * kN), 1, h->a);
  lt_tensor *b = lt_from_data(CPU0, LT_F32, SHAPE(kN), 1, h->b);
  lt_tensor *c = lt_from_data(CPU0, LT_I8, SHAPE(kN), 1, h->c);
  lt_tensor *d = lt_from_data(CPU0, LT_F64, SHAPE(kN), 1, h->d);
  lt_tensor *out[kOuts];
  *nout = f(a, b, c, d, out);
  assert_int_equal(lt_sync(out, *nout, true), LT_OK);
  for (int o = 0; o < *nout; o++) {
    n[o] = lt_numel(out[o]);
    vals[o] = tu_values(out[o]);
  }
  lt_scope_end();
  lt__backend_force(NULL);
}

/* cpu against ref: |cpu - ref| <= tol (1 + |ref|) for every element. */
static void check(build_fn f, double tol) {
  if (!tu_cpu_allowed()) return;
  host *h = host_new();
  double *want[kOuts], *got[kOuts];
  int64_t nwant[kOuts], ngot[kOuts];
  int nw, ng;
  /* cpu first: its outputs cannot then reuse ref's freed buffers holding
   * the expected values, which would hide entries left unwritten */
  run_on(&lt__cpu_backend, h, f, got, ngot, &ng);
  run_on(&lt__ref_backend, h, f, want, nwant, &nw);
  assert_int_equal(nw, ng);
  for (int o = 0; o < nw; o++) {
    assert_int_equal(nwant[o], ngot[o]);
    for (int64_t i = 0; i < nwant[o]; i++)
      if (!tu_near(got[o][i], want[o][i], tol))
        fail_msg("output %d element %lld: cpu %.9g, ref %.9g", o, (long long)i, got[o][i],
                 want[o][i]);
    free(want[o]);
    free(got[o]);
  }
  free(h);
}

/* bench/kernels.c's chain: 8 ops, one tanh, a scalar operand */
static int chain(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out) {
  (void)c;
  (void)d;
  lt_tensor *a1 = lt_slice_n(a, SHAPE(0), SHAPE(kN), NULL, 1);
  lt_tensor *x = lt_mul(lt_add(a1, b), a1);
  x = lt_mul(lt_relu(lt_sub(x, b)), lt_scalar(CPU0, LT_F32, 0.5));
  out[0] = lt_add(lt_tanh(lt_maximum(x, b)), a1);
  return 1;
}

static void test_chain(void **state) {
  (void)state;
  check(chain, 1e-6);
}

/* streams of 1, 4 and 8 bytes per element into an f64 output */
static int widths(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out) {
  (void)a;
  lt_tensor *prod = lt_mul(lt_cast(b, LT_F64), lt_cast(c, LT_F64));
  out[0] = lt_add(prod, d);
  return 1;
}

static void test_widths(void **state) {
  (void)state;
  check(widths, 0);
}

/* every other element of a, and b reversed */
static int views(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out) {
  (void)c;
  (void)d;
  lt_tensor *odd = lt_slice_n(a, SHAPE(1), SHAPE(2 * kN), SHAPE(2), 1);
  out[0] = lt_sub(lt_mul(odd, lt_flip(b, (int[]){0}, 1)), odd);
  return 1;
}

static void test_views(void **state) {
  (void)state;
  check(views, 0);
}

/* two stored values, the first read only by the second's kernel */
static int two_outputs(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out) {
  (void)c;
  (void)d;
  lt_tensor *a1 = lt_slice_n(a, SHAPE(kN), SHAPE(2 * kN), NULL, 1);
  out[0] = lt_exp(lt_sub(a1, b));
  out[1] = lt_add(lt_mul(out[0], b), a1);
  return 2;
}

static void test_two_outputs(void **state) {
  (void)state;
  check(two_outputs, 1e-6);
}

/* a 61 x 4919 view of a (rows of 19676 bytes, no multiple of a block) */
static lt_tensor *rows(lt_tensor *a) {
  lt_tensor *flat = lt_slice_n(a, SHAPE(3), SHAPE(3 + 61 * 4919), NULL, 1);
  return lt_reshape(flat, SHAPE(61, 4919), 2);
}

static int row_softmax(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out) {
  (void)b;
  (void)c;
  (void)d;
  lt_tensor *x = lt_mul(rows(a), lt_scalar(CPU0, LT_F32, 4.0));
  out[0] = lt_softmax(x, 1);
  out[1] = lt_log_softmax(x, 1);
  return 2;
}

static void test_row_softmax(void **state) {
  (void)state;
  check(row_softmax, 1e-5);
}

static int row_reductions(lt_tensor *a, lt_tensor *b, lt_tensor *c, lt_tensor *d, lt_tensor **out) {
  (void)b;
  (void)d;
  lt_tensor *x = rows(a);
  out[0] = lt_logsumexp(x, (int[]){1}, 1, false);
  out[1] = lt_max(x, (int[]){1}, 1, true);
  out[2] = lt_mean(x, (int[]){1}, 1, false);
  out[3] = lt_sum(x, (int[]){0}, 1, false);
  out[4] = lt_sum(lt_cast(c, LT_I64), (int[]){0}, 1, false);
  return 5;
}

static void test_row_reductions(void **state) {
  (void)state;
  check(row_reductions, 1e-5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_chain),       TU_TEST(test_widths),      TU_TEST(test_views),
      TU_TEST(test_two_outputs), TU_TEST(test_row_softmax), TU_TEST(test_row_reductions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
