/* Accuracy of the float math of each backend (exp, log, tanh, erf, sigmoid,
 * gelu, log1p, sin, cos) in f32 and f64, in ulps against long double libm,
 * over: every 2^k-th bit pattern (subnormals, +-0, tiny and huge
 * magnitudes, inf, NaN), dense grids over the ranges where the functions
 * bend and where exp overflows and underflows, and the edge values of the
 * range reductions. NaN must give NaN, an infinite or exactly zero result
 * must come out exactly (sign of zero included: tanh(-0) is -0).
 *
 * The cpu backend emits f32 exp, log, tanh, erf, sigmoid and gelu as
 * vectorizable polynomial code (cpu_irmath.c); its f32 log1p, sin, cos and
 * all of f64 go through libm in double, as ref does. The bounds below are
 * PyTorch's (Sleef's 1-ulp functions, within a few ulps) and tight enough
 * that a wrong coefficient, a lost range-reduction term or a flushed
 * subnormal fails them. gelu is measured in ulps of the larger of |gelu(x)|
 * and |x|: its formula x (1 + erf(x / sqrt 2)) / 2, PyTorch's too, cancels
 * for negative x. LT_MATH_SWEEP=k runs 2^k times as many points (offline);
 * LT_MATH_VERBOSE=1 prints the largest error of each function. */
#include "test_util.h"

#include <float.h>
#include <limits.h>

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

typedef long double ld;

static ld ref_sigmoid(ld x) { return 1.0L / (1.0L + expl(-x)); }
static ld ref_gelu(ld x) { return 0.5L * x * erfcl(-x / sqrtl(2.0L)); }
/* torch's tanh approximation, its definition evaluated in long double. */
static ld ref_gelu_tanh(ld x) {
  const ld b = 0.797884560802865355879892119868763737L; /* sqrt(2 / pi) */
  return 0.5L * x * (1.0L + tanhl(b * (x + 0.044715L * x * x * x)));
}

typedef struct mfn {
  const char *name;
  lt_tensor *(*op)(lt_tensor *);
  ld (*ref)(ld);
  double ulp32, ulp64; /* bounds */
  bool gelu;           /* ulps of max(|gelu(x)|, |x|) */
} mfn;

static const mfn kFns[] = {
    {"exp", lt_exp, expl, 1, 1, false},
    {"log", lt_log, logl, 1, 1, false},
    {"tanh", lt_tanh, tanhl, 1.5, 2.5, false},
    {"erf", lt_erf, erfl, 1.5, 1.5, false},
    {"sigmoid", lt_sigmoid, ref_sigmoid, 2.5, 2.5, false},
    {"gelu", lt_gelu, ref_gelu, 2, 2, true},
    {"gelu_tanh", lt_gelu_tanh, ref_gelu_tanh, 2.5, 2.5, true},
    {"log1p", lt_log1p, log1pl, 0.6, 1, false},
    {"sin", lt_sin, sinl, 0.6, 1, false},
    {"cos", lt_cos, cosl, 0.6, 1, false},
};
enum { kNFns = sizeof kFns / sizeof *kFns };

/* ---- inputs ---- */

static int sweep_shift(void) {
  const char *s = getenv("LT_MATH_SWEEP");
  int k = s ? atoi(s) : 0;
  return k < 0 ? 0 : k > 12 ? 12 : k;
}

/* The edge values: range-reduction thresholds and the ends of the ranges
 * (as doubles; each is also taken one ulp either side in the dtype). */
static const double kEdges[][6] = {
    {0.0, 1.0, 2.0, 0.5, 0.55, 0.625}, /* splits */
    {0.75, 0.9277, 0.6931471805599453, 1.41421356237309505, 0.70710678118654752, 3.9},
    {3.92, 4.0, 5.656854, 7.90531, 9.0, 9.01}, /* erf, tanh saturate */
    {10.0, 15.0, 17.0, 19.06, 20.0, 27.0},
    {88.0, 88.3762626647949, 88.72283935546875, 88.7228391, 89.0, 126.0}, /* f32 exp */
    {87.33654, 103.972, 104.0, 3.14159265358979, 1.5707963267949, 1e5},
    {709.782712893384, 708.3964185322641, 745.1332191019411, 746.0, 1e7, 8388608.5}, /* f64 exp */
    {1e-10, 1e-20, 1e-30, 1e-38, 1e-45, 1e-300},                                     /* tiny */
    {1e-310, 16777216.0, 1e10, 1e16, 1e20, 1e30},                                    /* large */
    {1e38, 3.4e38, 1e300, 1.7e308, 0.0, 0.0}};

static double next_in(double x, bool f32, double dir) {
  return f32 ? (double)nextafterf((float)x, (float)dir) : nextafter(x, dir);
}

/* Fills xs (capacity cap) with the inputs of a dtype; returns how many. */
static int64_t make_inputs(bool f32, double *xs, int64_t cap) {
  int64_t n = 0;
#define PUT(v)                                     \
  do {                                             \
    if (n < cap) xs[n++] = f32 ? (float)(v) : (v); \
  } while (0)
  for (size_t i = 0; i < sizeof kEdges / sizeof(double); i++)
    for (int s = -1; s <= 1; s += 2) {
      double v = kEdges[i / 6][i % 6], e = s * (f32 ? (double)(float)v : v);
      PUT(e);
      PUT(next_in(e, f32, INFINITY));
      PUT(next_in(e, f32, -INFINITY));
    }
  PUT(INFINITY);
  PUT(-INFINITY);
  PUT(NAN);
  PUT(-NAN);
  PUT(f32 ? FLT_MIN : DBL_MIN);
  PUT(f32 ? -FLT_MIN : -DBL_MIN);
  PUT(f32 ? FLT_TRUE_MIN : DBL_TRUE_MIN);
  PUT(f32 ? -FLT_TRUE_MIN : -DBL_TRUE_MIN);
  PUT(f32 ? FLT_MAX : DBL_MAX);
  PUT(f32 ? -FLT_MAX : -DBL_MAX);
  int k = sweep_shift();
  /* every stride-th bit pattern (odd stride: every low-bit pattern shows) */
  int64_t nb = (int64_t)1 << (f32 ? 18 : 17) << k;
  for (int64_t i = 0; i < nb; i++) {
    if (f32) {
      uint32_t b = (uint32_t)((uint64_t)i * ((0xFFFFFFFFu / (uint64_t)nb) | 1));
      float f;
      memcpy(&f, &b, sizeof f);
      PUT((double)f);
    } else {
      uint64_t b = (uint64_t)i * ((UINT64_MAX / (uint64_t)nb) | 1);
      double d;
      memcpy(&d, &b, sizeof d);
      PUT(d);
    }
  }
  /* dense grids: where the functions bend; where exp leaves the normals */
  int64_t ng = (int64_t)1 << 16 << k;
  for (int64_t i = 0; i <= ng; i++) PUT(-20.0 + 40.0 * (double)i / (double)ng);
  for (int64_t i = 0; i <= ng; i++) PUT(-2.0 + 4.0 * (double)i / (double)ng);
  for (int64_t i = 0; i <= ng; i++)
    PUT(f32 ? -110.0 + 200.0 * (double)i / (double)ng : -750.0 + 1465.0 * (double)i / (double)ng);
#undef PUT
  return n;
}

/* ---- measuring ---- */

/* One ulp of the dtype at y (finite): the spacing of the dtype's numbers of
 * y's binade, subnormal spacing below the normals. */
static ld ulp_at(ld y, bool f32) {
  int e = y == 0 ? INT_MIN : ilogbl(y);
  int emin = f32 ? -126 : -1022, p = f32 ? 23 : 52;
  return ldexpl(1.0L, (e < emin ? emin : e) - p);
}

typedef struct worst {
  double ulps, x, got; /* the largest error in ulps, where */
  ld want;
  const char *why; /* the first special value that came out wrong */
  double why_x, why_got;
} worst;

/* Adds the error of got at x to w. */
static void error_of(const mfn *f, bool f32, double x, double got, worst *w) {
  ld want = f->ref((ld)x);
  double rounded = f32 ? (double)(float)want : (double)want;
  const char *why = NULL;
  double u = 0;
  if (isnan(want) || isnan(got)) {
    if (!(isnan(want) && isnan(got))) why = "NaN";
  } else if (isinf(rounded)) {
    if (got != rounded) why = "infinity";
  } else if (want == 0) {
    if (got != 0 || !signbit(got) != !signbit(want)) why = "signed zero";
  } else {
    ld unit = ulp_at(want, f32);
    if (f->gelu && ulp_at(x, f32) > unit) unit = ulp_at(x, f32);
    u = (double)(fabsl((ld)got - want) / unit);
  }
  if (why && !w->why) {
    w->why = why;
    w->why_x = x;
    w->why_got = got;
  }
  if (u > w->ulps) {
    w->ulps = u;
    w->x = x;
    w->got = got;
    w->want = want;
  }
}

/* f of xs (n values) on backend be, read back as doubles into out. */
static void compute(const lt_backend *be, const mfn *f, bool f32, const double *xs, int64_t n,
                    double *out) {
  lt__backend_force(be);
  lt_scope_begin();
  void *data = malloc((size_t)n * (f32 ? 4 : 8));
  for (int64_t i = 0; i < n; i++)
    if (f32)
      ((float *)data)[i] = (float)xs[i];
    else
      ((double *)data)[i] = xs[i];
  lt_tensor *x = lt_from_data(CPU0, f32 ? LT_F32 : LT_F64, SHAPE(n), 1, data);
  tu_read(f->op(x), out, n);
  free(data);
  lt_scope_end();
  lt__backend_force(NULL);
}

static void check_dtype(bool f32) {
  const lt_backend *bes[2] = {&lt__ref_backend, &lt__cpu_backend};
  int64_t cap = ((int64_t)1 << 20 << sweep_shift()) + 4096;
  double *xs = malloc((size_t)cap * sizeof *xs), *ys = malloc((size_t)cap * sizeof *ys);
  int64_t n = make_inputs(f32, xs, cap);
  bool verbose = getenv("LT_MATH_VERBOSE") != NULL;
  int bad = 0;
  for (int b = 0; b < tu_nbackends(); b++) {
    for (int i = 0; i < kNFns; i++) {
      const mfn *f = &kFns[i];
      double bound = f32 ? f->ulp32 : f->ulp64;
      compute(bes[b], f, f32, xs, n, ys);
      worst w = {0};
      for (int64_t j = 0; j < n; j++) error_of(f, f32, xs[j], ys[j], &w);
      bool ok = w.ulps <= bound && !w.why;
      if (verbose || !ok)
        print_message("%s %s %-7s max %.3f ulp (bound %g) at x=%.9g: got %.9g, want %.9Lg\n",
                      bes[b]->name, f32 ? "f32" : "f64", f->name, w.ulps, bound, w.x, w.got,
                      w.want);
      if (w.why) print_message("  wrong %s: %s(%g) gave %g\n", w.why, f->name, w.why_x, w.why_got);
      bad += !ok;
    }
  }
  free(xs);
  free(ys);
  assert_int_equal(bad, 0);
}

static void test_f32_math(void **state) {
  (void)state;
  check_dtype(true);
}

static void test_f64_math(void **state) {
  (void)state;
  check_dtype(false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f32_math),
      cmocka_unit_test(test_f64_math),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
