/* bf16 products and convolutions on the cpu backend (src/backend/cpu/cpu_gemm.c,
 * cpu_matmul_prim.c, cpu_conv.c): bf16 operands, sums in f32, each result
 * rounded to bf16 once, as torch's CPU bf16 matmul. Where oneDNN has bf16
 * instructions (AVX512-BF16, AMX) a native bf16 kernel runs; elsewhere, and
 * under LT_CPU_ISA=avx2 (the ctest test_cpu_isa_avx2_bf16_gemm runs this file
 * so), the operands are converted to f32. Each run checks that the path it
 * expects ran (the counters Bf16GemmNative / Bf16GemmConverted, ...) and what
 * lt_get_isa names.
 *
 * Every product is held to the exact sum (in double: a product of two bf16
 * values is exact in f32 and in double) on both backends: ref rounds that
 * exact sum once; cpu rounds an f32 sum, whose error depends on the order
 * oneDNN adds in (its blocking, the instruction set), which no test knows.
 * So each result may differ from the exact sum by the f32 sum's error
 * (tu_f32_sum_tol: k terms, each at most max |a||b|) plus half a bf16 ulp of
 * that f32 sum (the one rounding to nearest: at most 2^-8 of its size,
 * which is within the error of the exact sum). The two backends may then
 * differ by a whole ulp where the f32 error moves a sum across a rounding
 * boundary; each stays within this bound of the exact sum. A product summed
 * in bf16, rounded twice or truncated instead of rounded misses it (the
 * last by up to a whole ulp). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_backends.h"

#include "lazytensor_nn.h"

#include "../src/backend/cpu/cpu.h"
#include "../src/backend/cpu/cpu_dnnl.h"
#include "../src/core/lt_dtype.h"

static bool capped(void) {
  const char *e = getenv("LT_CPU_ISA");
  return e && strcmp(e, "avx2") == 0;
}

/* Deterministic values in [-1, 1), rounded to bf16 (exactly what the
 * tensor holds: lt_from_f32 rounds them again, without change). */
static float *bf16_values(int seed, int64_t n) {
  float *v = malloc((size_t)(n + 1) * sizeof *v);
  uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(seed + 1);
  for (int64_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    float x = (float)((double)(s >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
    v[i] = lt__bf16_to_f32(lt__f32_to_bf16(x));
  }
  return v;
}

/* |got - exact| within the f32 sum's error and half a bf16 ulp (file comment). */
static void expect_bf16_sum(double got, double exact, int64_t terms, double max_term,
                            const char *what, int64_t i) {
  double f32_err = tu_f32_sum_tol(terms, max_term);
  double tol = f32_err + ldexp(fabs(exact) + f32_err, -8);
  if (!(fabs(got - exact) <= tol))
    fail_msg("%s element %lld: got %.9g, exact sum %.9g (tolerance %.3g)", what, (long long)i, got,
             exact, tol);
}

/* One product case: a [.., n, k] (transposed: stored [.., k, n]) times
 * b [.., k, m] (or [.., m, k]), batch dims broadcast as given. */
typedef struct mm_case {
  const char *name;
  int ndim_a, ndim_b;
  int64_t a_shape[4], b_shape[4]; /* as stored */
  bool ta, tb;                    /* transposed views of the stored last two dims */
} mm_case;

static lt_tensor *operand(const int64_t *shape, int nd, bool trans, const float *v) {
  lt_tensor *t = lt_from_f32(CPU0, LT_BF16, shape, nd, v);
  assert_non_null(t);
  return trans ? lt_transpose(t, nd - 2, nd - 1) : t;
}

static int64_t numel_of(const int64_t *s, int nd) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= s[d];
  return n;
}

/* Element (bi, r, c) of an operand's view: batch index bi over the result's
 * batch shape (broadcast), row r and column c of the (maybe transposed)
 * matrix. */
static double at(const float *v, const int64_t *shape, int nd, bool trans, const int64_t *oshape,
                 int ond, int64_t bi, int64_t r, int64_t c) {
  int64_t rows = shape[nd - 2], cols = shape[nd - 1];
  int64_t off = 0, stride = rows * cols;
  int nb = ond - 2, own = nd - 2;
  for (int d = nb - 1; d >= 0; d--) { /* unravel bi over the result's batch */
    int64_t idx = bi % oshape[d];
    bi /= oshape[d];
    int e = d - (nb - own);
    if (e >= 0) {
      if (shape[e] != 1) off += idx * stride;
      stride *= shape[e];
    }
  }
  return trans ? v[off + c * cols + r] : v[off + r * cols + c];
}

static void run_case(const mm_case *mc) {
  int64_t na = numel_of(mc->a_shape, mc->ndim_a), nb = numel_of(mc->b_shape, mc->ndim_b);
  float *va = bf16_values(1, na), *vb = bf16_values(2, nb);
  double *got[2] = {NULL, NULL};
  int64_t oshape[LT_MAX_DIMS];
  int ond = 0;
  int64_t moved[2] = {0, 0};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    int64_t before = tu_counter("Bf16GemmNative") + tu_counter("Bf16GemmConverted");
    lt_tensor *a = operand(mc->a_shape, mc->ndim_a, mc->ta, va);
    lt_tensor *b = operand(mc->b_shape, mc->ndim_b, mc->tb, vb);
    lt_tensor *y = lt_matmul(a, b);
    if (!y) fail_msg("%s: lt_matmul: %s", mc->name, lt_last_error());
    assert_int_equal(lt_get_dtype(y), LT_BF16);
    ond = lt_ndim(y);
    memcpy(oshape, lt_shape(y), (size_t)ond * sizeof *oshape);
    got[be] = tu_values(y);
    moved[be] = tu_counter("Bf16GemmNative") + tu_counter("Bf16GemmConverted") - before;
    lt_scope_end();
    lt__backend_force(NULL);
  }
  /* the cpu backend ran a bf16 GEMM (not the fallback); ref none */
  assert_int_equal(moved[0], 0);
  if (tu_nbackends() > 1 && moved[1] < 1)
    fail_msg("%s: no bf16 GEMM ran on the cpu backend", mc->name);
  int64_t n = oshape[ond - 2], m = oshape[ond - 1];
  int64_t k = mc->ta ? mc->a_shape[mc->ndim_a - 2] : mc->a_shape[mc->ndim_a - 1];
  int64_t nbatch = numel_of(oshape, ond - 2);
  for (int64_t bi = 0; bi < nbatch; bi++)
    for (int64_t r = 0; r < n; r++)
      for (int64_t c = 0; c < m; c++) {
        double s = 0, max_term = 0;
        for (int64_t p = 0; p < k; p++) {
          double t = at(va, mc->a_shape, mc->ndim_a, mc->ta, oshape, ond, bi, r, p) *
                     at(vb, mc->b_shape, mc->ndim_b, mc->tb, oshape, ond, bi, p, c);
          s += t;
          max_term = fmax(max_term, fabs(t));
        }
        int64_t i = (bi * n + r) * m + c;
        for (int be = 0; be < tu_nbackends(); be++)
          expect_bf16_sum(got[be][i], s, k, max_term, tu_backends[be]->name, i);
      }
  free(va);
  free(vb);
  free(got[0]);
  free(got[1]);
}

static void test_products_match_the_exact_sums(void **state) {
  (void)state;
  static const mm_case cases[] = {
      {"1x1x1", 2, 2, {1, 1}, {1, 1}, false, false},
      {"odd 3x7 @ 7x5", 2, 2, {3, 7}, {7, 5}, false, false},
      {"odd 17x65 @ 65x33", 2, 2, {17, 65}, {65, 33}, false, false},
      {"a transposed", 2, 2, {65, 17}, {65, 33}, true, false},
      {"b transposed", 2, 2, {17, 65}, {33, 65}, false, true},
      {"both transposed", 2, 2, {65, 17}, {33, 65}, true, true},
      {"k 3000", 2, 2, {9, 3000}, {3000, 20}, false, false},
      {"k 2048, 64x64 (pool blocks)", 2, 2, {64, 2048}, {2048, 64}, false, false},
      {"batch, broadcast weight", 3, 2, {3, 5, 19}, {19, 7}, false, false},
      {"batch both", 3, 3, {2, 6, 40}, {2, 40, 9}, false, false},
      {"batch broadcast both, b transposed", 4, 4, {2, 1, 5, 8}, {1, 3, 6, 8}, false, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    print_message("  %s\n", cases[i].name);
    run_case(&cases[i]);
  }
}

/* A bf16 product followed by elementwise work (no epilogue fused into the
 * product: cpu_lower.c's mark_epilogues), against ref. */
static void test_product_then_bias_matches_ref(void **state) {
  (void)state;
  float *va = bf16_values(3, 32 * 48), *vb = bf16_values(4, 48 * 40), *vc = bf16_values(5, 40);
  double *got[2] = {NULL, NULL};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *a = lt_from_f32(CPU0, LT_BF16, SHAPE(32, 48), 2, va);
    lt_tensor *b = lt_from_f32(CPU0, LT_BF16, SHAPE(48, 40), 2, vb);
    lt_tensor *c = lt_from_f32(CPU0, LT_BF16, SHAPE(40), 1, vc);
    got[be] = tu_values(lt_add(lt_matmul(a, b), c));
    lt_scope_end();
    lt__backend_force(NULL);
  }
  /* the sum rounded to bf16 differs by at most an ulp (file comment) between
   * the backends; the bias add then rounds both alike, to within an ulp */
  for (int be = 1; be < tu_nbackends(); be++)
    for (int64_t i = 0; i < 32 * 40; i++) {
      double tol = tu_f32_sum_tol(48, 1.0) + ldexp(fmax(fabs(got[0][i]), 1.0), -6);
      if (!(fabs(got[be][i] - got[0][i]) <= tol))
        fail_msg("element %lld: cpu %.9g, ref %.9g", (long long)i, got[be][i], got[0][i]);
    }
  free(va);
  free(vb);
  free(vc);
  free(got[0]);
  free(got[1]);
}

/* A linear layer under autocast (f32 x, weight and bias; bf16 products):
 * torch's addmm adds the bias to the f32 sums and rounds once, so the
 * product is one of bf16 operands with an f32 result (the op table's ACC
 * rule), on the bf16 kernels. ref computes the sums in double and keeps
 * them in f32, so its result must be exactly bf16(f32(sum) + bias) (a product
 * rounded to bf16 before the bias is added, then again, misses it on some
 * elements); cpu's f32 sums stay within the f32 sum's error plus half an
 * ulp. The backward takes the bf16 kernels too (the gradient arrives as a
 * widened bf16 value), and the weight's gradient is f32 on both backends. */
static void test_linear_rounds_once_on_bf16_kernels(void **state) {
  (void)state;
  enum { N = 32, K = 48, M = 40 };
  float *vx = bf16_values(6, N * K), *vw = bf16_values(7, K * M), *vb = bf16_values(8, M);
  float *vr = bf16_values(9, N * M);
  double *y[2] = {NULL, NULL}, *gw[2] = {NULL, NULL};
  int64_t moved[2] = {0, 0};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    int64_t before = tu_counter("Bf16GemmNative") + tu_counter("Bf16GemmConverted");
    lt_nn_linear l = {lt_from_f32(CPU0, LT_F32, SHAPE(K, M), 2, vw),
                      lt_from_f32(CPU0, LT_F32, SHAPE(M), 1, vb), K, M};
    assert_int_equal(lt_set_requires_grad(l.weight, true), LT_OK);
    lt_tensor *x = lt_from_f32(CPU0, LT_F32, SHAPE(N, K), 2, vx);
    assert_int_equal(lt_autocast_begin(CPU0, LT_BF16), LT_OK);
    lt_tensor *out = lt_nn_linear_forward(&l, x);
    assert_int_equal(lt_autocast_end(CPU0), LT_OK);
    assert_non_null(out);
    assert_int_equal(lt_get_dtype(out), LT_BF16);
    lt_tensor *r = lt_from_f32(CPU0, LT_F32, SHAPE(N, M), 2, vr);
    lt_tensor *loss = lt_sum(lt_mul(lt_cast(out, LT_F32), r), NULL, 0, false);
    assert_int_equal(lt_backward(loss), LT_OK);
    y[be] = tu_values(out);
    lt_tensor *g = lt_grad(l.weight);
    assert_non_null(g);
    assert_int_equal(lt_get_dtype(g), LT_F32);
    gw[be] = tu_values(g);
    moved[be] = tu_counter("Bf16GemmNative") + tu_counter("Bf16GemmConverted") - before;
    lt_release(l.weight);
    lt_release(l.bias);
    lt_scope_end();
    lt__backend_force(NULL);
  }
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < M; j++) {
      double exact = 0;
      for (int64_t p = 0; p < K; p++) exact += (double)vx[i * K + p] * vw[p * M + j];
      double bias = vb[j];
      /* the f32 sum (ref: the double sum rounded once to f32), the f32 add */
      float once = lt__bf16_to_f32(lt__f32_to_bf16((float)exact + (float)bias));
      if (y[0][i * M + j] != once)
        fail_msg("ref element %lld: %.9g, once rounded %.9g", (long long)(i * M + j),
                 y[0][i * M + j], once);
      for (int be = 1; be < tu_nbackends(); be++)
        expect_bf16_sum(y[be][i * M + j], exact + bias, K + 1, 1.0, "cpu linear", i * M + j);
    }
  /* dW = x^T (r rounded to bf16: the gradient of the bf16 output) over N rows */
  for (int be = 1; be < tu_nbackends(); be++)
    for (int64_t e = 0; e < K * M; e++)
      expect_bf16_sum(gw[be][e], gw[0][e], N, 1.0, "cpu weight gradient", e);
  assert_int_equal(moved[0], 0);
  print_message("  bf16 products of the linear step: %lld\n", (long long)moved[1]);
  if (tu_nbackends() > 1) assert_true(moved[1] >= 2); /* the forward and dW (x needs none) */
  free(vx);
  free(vw);
  free(vb);
  free(vr);
  for (int be = 0; be < 2; be++) {
    free(y[be]);
    free(gw[be]);
  }
}

/* The path this run must take: native where oneDNN has bf16 instructions
 * and LT_CPU_ISA does not cap it, converted otherwise; the counters and the
 * names say which ran. */
static void test_the_expected_path_ran_and_is_named(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  lt_counters_reset();
  float *v = bf16_values(6, 64 * 64);
  lt_tensor *a = lt_from_f32(CPU0, LT_BF16, SHAPE(64, 64), 2, v);
  double *out = tu_values(lt_matmul(a, a));
  free(out);
  free(v);
  int64_t native = tu_counter("Bf16GemmNative"), conv = tu_counter("Bf16GemmConverted");
  bool host_bf16 = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  host_bf16 = __builtin_cpu_supports("avx512bf16");
#endif
  const char *isa = lt_get_isa(CPU0, LT_BF16);
  assert_non_null(isa);
  print_message("  bf16 products: %s (native %lld, converted %lld)\n", isa, (long long)native,
                (long long)conv);
  if (host_bf16 && !capped()) { /* this machine must run them natively */
    assert_true(native > 0);
    assert_int_equal(conv, 0);
    assert_true(strstr(isa, "avx512_core_bf16") || strstr(isa, "avx512_core_amx"));
    assert_null(strstr(isa, "converted"));
  } else {
    assert_true(conv > 0);
    assert_int_equal(native, 0);
    assert_non_null(strstr(isa, "(bf16 converted to f32)"));
  }
  if (capped()) assert_string_equal(isa, "avx2 (bf16 converted to f32)");
  /* the report names the set beside the counters */
  char buf[8192];
  int len = lt_metrics_report(buf, sizeof buf);
  assert_true(len > 0 && (size_t)len < sizeof buf);
  char line[128];
  snprintf(line, sizeof line, "Info: Bf16Isa\n  Value: %s\n", isa);
  tu_expect_substr(buf, line);
  tu_expect_substr(buf, "Counter: Bf16GemmNative\n");
}

static void test_get_isa_names_each_dtype(void **state) {
  (void)state;
  /* f32: oneDNN's set, capped by LT_CPU_ISA */
  const char *f32 = lt_get_isa(CPU0, LT_F32);
  assert_non_null(f32);
  if (capped()) assert_string_equal(f32, "avx2");
  assert_string_equal(f32, lt__cpu_dnnl_isa_name());
  const char *f64 = lt_get_isa(CPU0, LT_F64);
  assert_non_null(f64);
  assert_true(strncmp(f64, "openblas", 8) == 0);
  assert_string_equal(lt_get_isa(CPU0, LT_I32), "ref");
  /* the ref backend: its own loops */
  lt__backend_force(&lt__ref_backend);
  assert_string_equal(lt_get_isa(CPU0, LT_BF16), "ref");
  lt__backend_force(NULL);
  /* bad arguments: NULL, and the error names the function */
  assert_null(lt_get_isa(CPU0, (lt_dtype)99));
  tu_expect_substr(lt_last_error(), "lt_get_isa");
  assert_null(lt_get_isa(lt_cpu(1 << 20), LT_F32));
  tu_expect_substr(lt_last_error(), "lt_get_isa");
}

/* One bf16 convolution case: forward (with bias), and the gradients of
 * sum(y * r) with respect to x, w and bias. */
typedef struct conv_case {
  const char *name;
  int64_t xs[4], ws[4];
  int64_t stride[2], pad[2];
  int64_t groups;
} conv_case;

enum { CONV_Y, CONV_GX, CONV_GW, CONV_OUTS };

/* The convolution of cc, its input and weight gradients on backend be in
 * dtype dt (bf16; f64 on ref: the exact sums, as bf16 values and their
 * products are exact in double) into got[CONV_*]; returns the bf16
 * convolutions that the counters saw. */
static int64_t conv_outputs(const lt_backend *be, lt_dtype dt, const conv_case *cc,
                            double *got[CONV_OUTS], int64_t count[CONV_OUTS]) {
  int64_t nx = numel_of(cc->xs, 4), nw = numel_of(cc->ws, 4), o = cc->ws[0];
  float *vx = bf16_values(7, nx), *vw = bf16_values(8, nw), *vb = bf16_values(9, o);
  lt__backend_force(be);
  lt_scope_begin();
  int64_t before = tu_counter("Bf16ConvNative") + tu_counter("Bf16ConvConverted");
  lt_tensor *x = lt_from_f32(CPU0, dt, cc->xs, 4, vx);
  lt_tensor *w = lt_from_f32(CPU0, dt, cc->ws, 4, vw);
  lt_tensor *b = lt_from_f32(CPU0, dt, SHAPE(o), 1, vb);
  assert_int_equal(lt_set_requires_grad(x, true), LT_OK);
  assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
  lt_tensor *y = lt_conv2d_n(x, w, b, cc->stride, 2, cc->pad, 2, NULL, 0, cc->groups);
  if (!y) fail_msg("%s: lt_conv2d_n: %s", cc->name, lt_last_error());
  assert_int_equal(lt_get_dtype(y), dt);
  int64_t ny = lt_numel(y);
  float *vr = bf16_values(10, ny);
  /* the gradient reaching y is r, exactly, in either dtype */
  lt_tensor *r = lt_from_f32(CPU0, dt, lt_shape(y), 4, vr);
  free(vr);
  lt_tensor *loss = lt_sum(lt_mul(y, r), NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  /* torch gives bf16 leaves bf16 gradients */
  assert_int_equal(lt_get_dtype(lt_grad(w)), dt);
  assert_int_equal(lt_get_dtype(lt_grad(x)), dt);
  got[CONV_Y] = tu_values(y);
  got[CONV_GX] = tu_values(lt_grad(x));
  got[CONV_GW] = tu_values(lt_grad(w));
  count[CONV_Y] = ny;
  count[CONV_GX] = nx;
  count[CONV_GW] = nw;
  int64_t moved = tu_counter("Bf16ConvNative") + tu_counter("Bf16ConvConverted") - before;
  lt_scope_end();
  lt__backend_force(NULL);
  free(vx);
  free(vw);
  free(vb);
  return moved;
}

static void run_conv_case(const conv_case *cc) {
  double *exact[CONV_OUTS], *got[CONV_OUTS];
  int64_t count[CONV_OUTS];
  conv_outputs(&lt__ref_backend, LT_F64, cc, exact, count);
  int64_t o = cc->ws[0], cg = cc->xs[1] / cc->groups;
  int64_t oh = (cc->xs[2] + 2 * cc->pad[0] - cc->ws[2]) / cc->stride[0] + 1;
  int64_t ow = (cc->xs[3] + 2 * cc->pad[1] - cc->ws[3]) / cc->stride[1] + 1;
  /* terms per sum, each at most 1 in size: y: C/g kh kw products and the
   * bias; gx: at most O/g kh kw; gw: N OH OW */
  int64_t terms[CONV_OUTS] = {cg * cc->ws[2] * cc->ws[3] + 1,
                              o / cc->groups * cc->ws[2] * cc->ws[3], cc->xs[0] * oh * ow};
  static const char *const names[CONV_OUTS] = {"y", "grad x", "grad w"};
  for (int be = 0; be < tu_nbackends(); be++) {
    int64_t moved = conv_outputs(tu_backends[be], LT_BF16, cc, got, count);
    /* the three convolutions ran on the cpu backend's kernels; none on ref */
    if (be == 0) assert_int_equal(moved, 0);
    if (be == 1 && moved < 3)
      fail_msg("%s: %lld bf16 convolutions on cpu", cc->name, (long long)moved);
    for (int i = 0; i < CONV_OUTS; i++) {
      char what[64];
      snprintf(what, sizeof what, "%s %s", tu_backends[be]->name, names[i]);
      for (int64_t e = 0; e < count[i]; e++)
        expect_bf16_sum(got[i][e], exact[i][e], terms[i], 1.0, what, e);
      free(got[i]);
    }
  }
  for (int i = 0; i < CONV_OUTS; i++) free(exact[i]);
}

static void test_convolutions_match_ref(void **state) {
  (void)state;
  static const conv_case cases[] = {
      /* 16 channels and more: oneDNN's blocked layouts */
      {"16 -> 32, 3x3, padding 1", {2, 16, 9, 9}, {32, 16, 3, 3}, {1, 1}, {1, 1}, 1},
      /* few channels (plain layouts), groups 2, stride 2, uneven padding */
      {"groups 2, stride 2", {3, 4, 7, 6}, {6, 2, 3, 2}, {2, 2}, {1, 0}, 2},
      /* a long weight-gradient sum: N OH OW = 4 * 30 * 30 */
      {"weight gradient over 3600 terms", {4, 3, 32, 32}, {8, 3, 3, 3}, {1, 1}, {0, 0}, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    print_message("  %s\n", cases[i].name);
    run_conv_case(&cases[i]);
  }
  if (!tu_cpu_allowed()) return;
  int64_t native = tu_counter("Bf16ConvNative"), conv = tu_counter("Bf16ConvConverted");
  print_message("  bf16 convolutions: native %lld, converted %lld\n", (long long)native,
                (long long)conv);
  if (lt__cpu_bf16_native()) /* native wherever oneDNN takes the problem */
    assert_true(native > 0);
  else
    assert_true(conv > 0 && native == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_products_match_the_exact_sums),
      TU_TEST(test_product_then_bias_matches_ref),
      TU_TEST(test_linear_rounds_once_on_bf16_kernels),
      TU_TEST(test_the_expected_path_ran_and_is_named),
      TU_TEST(test_get_isa_names_each_dtype),
      TU_TEST(test_convolutions_match_ref),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
