/* bf16 in the cpu backend's generated loops (src/backend/cpu/cpu_ops.c,
 * cpu_codegen.c) against ref, which computes each op in double and rounds
 * once through f32 to bf16 (the dtype table's store):
 *  - every unary and elementwise binary op of lazytensor_ops.h on bf16
 *    operands holding the edge values (+-0, +-inf, NaNs with payloads,
 *    subnormals, values at bf16's largest, operand pairs whose exact sum or
 *    product is a tie between two bf16 values) and random bits;
 *  - sum, mean, max, min and prod over bf16;
 *  - fused chains of bf16 ops, where every node rounds to bf16 before its
 *    consumers see it (exp(x * 3 + 1) as torch computes it in bf16);
 *  - bf16 mixed with f32 and integers, casts between bf16 and every dtype,
 *    bf16 constants, and a strided copy (bits kept, NaN payloads too).
 * Exact ops must give ref's bits: the loops compute them in f32 from the
 * operands' exact f32 values, and f32's + - * / sqrt give the bits of
 * double's rounded to f32 (53 >= 2 * 24 + 2), so the one rounding to bf16
 * starts from the same f32. The f32 polynomials (exp, log, tanh, sigmoid,
 * erf) are within a few f32 ulps of the true value, so after rounding they
 * may land on the neighbouring bf16 value: 1 bf16 ulp. gelu and gelu_tanh
 * cancel in 1 + erf / 1 + tanh, where the f32 formula has an absolute error
 * (the f32 tests' 1e-6 plus 2e-5 relative), then 1 bf16 ulp more.
 * Each case also checks that the cpu ran it as generated loops, not on the
 * per-node fallback: the kernels it compiled or found compiled. */
#include <dirent.h>
#include <unistd.h>

#include "test_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

enum { N = 1536, MAXIN = 3 };

static uint64_t g_rng;
static uint32_t rnd32(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 16);
}

/* Edge values, as bf16 bits: zeros, infinities, NaNs (quiet, negative,
 * signalling, with payloads), subnormals and the smallest normal, the
 * largest finite values, 1 and its neighbours, and 2^-8 / 2^-7 / 3 * 2^-8,
 * which added to 1 give ties (1 + 2^-8 lies halfway between 1 and 1 + 2^-7). */
static const uint16_t kEdges[] = {
    0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x7FFF, 0x0001, 0x8001, 0x007F,
    0x807F, 0x0080, 0x8080, 0x7F7F, 0xFF7F, 0x7F7E, 0x3F80, 0xBF80, 0x3F81, 0x3F7F, 0x3B80,
    0x3C00, 0x3BC0, 0x4040, 0xC040, 0x3F00, 0x4B00, 0x4B01, 0x3FC0, 0x3FA0, 0xBFA0, 0x4120,
};
enum { NEDGES = sizeof kEdges / sizeof *kEdges };

/* bf16 bits of a moderate finite value: |x| in [2^-6, 2^6), either sign. */
static uint16_t moderate(void) {
  uint32_t r = rnd32();
  return (uint16_t)((r & 0x8000u) | ((127u - 6u + (r >> 20) % 12u) << 7) | (r & 0x7Fu));
}

/* n bf16 values: the edges at positions spread by `shift` (so that two
 * operands meet each edge against each other edge over the array), then
 * random bits (any value) or moderate values, half and half. */
static void fill_bf16(uint16_t *p, int n, int shift) {
  for (int i = 0; i < n; i++) {
    int e = i < NEDGES * NEDGES ? (i / (shift ? NEDGES : 1) + i * shift) % NEDGES : -1;
    p[i] = e >= 0 && i < NEDGES * NEDGES ? kEdges[e]
           : (rnd32() & 1)               ? moderate()
                                         : (uint16_t)rnd32();
  }
}

/* ---- running a graph on both backends ---- */

typedef struct operand {
  lt_dtype dt;
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  const void *data;
} operand;

typedef lt_tensor *(*build_fn)(lt_tensor *const *in, const void *ud);

typedef struct result {
  lt_dtype dt;
  int64_t n;
  unsigned char *data;
  int64_t kernels; /* loop kernels the cpu compiled or found compiled */
} result;

static void run_on(const lt_backend *be, const operand *ops, int nin, build_fn f, const void *ud,
                   result *r) {
  memset(r, 0, sizeof *r);
  lt__backend_force(be);
  lt_cache_clear(); /* compiled anew: its kernels are counted (made or found made) */
  lt_scope_begin();
  lt_tensor *t[MAXIN];
  for (int i = 0; i < nin; i++) {
    t[i] = lt_from_data(CPU0, ops[i].dt, ops[i].shape, ops[i].ndim, ops[i].data);
    assert_non_null(t[i]);
  }
  lt_tensor *out = f(t, ud);
  if (!out) fail_msg("building the graph: %s", lt_last_error());
  int64_t before = tu_counter("KernelCompile") + tu_counter("KernelCacheHit");
  assert_int_equal(lt_sync(&out, 1, true), LT_OK);
  r->kernels = tu_counter("KernelCompile") + tu_counter("KernelCacheHit") - before;
  r->dt = lt_get_dtype(out);
  r->n = lt_numel(out);
  size_t nb = (size_t)r->n * lt_dtype_size(r->dt);
  r->data = malloc(nb + 1);
  assert_int_equal(lt_to_data(out, r->data, nb), LT_OK);
  lt_scope_end();
  lt__backend_force(NULL);
}

typedef enum tol {
  EXACT,   /* ref's bits */
  ULP1,    /* f32 math: 1 bf16 ulp, NaN and infinities exact */
  F32_ULP1 /* gelu: f32's bound, then 1 bf16 ulp */
} tol;

/* bf16 bits as an integer in value order (-0 and +0 both 0). */
static int32_t order_key(uint16_t b) { return b & 0x8000 ? -(int32_t)(b & 0x7FFF) : (int32_t)b; }

static bool bf16_close(uint16_t want, uint16_t got, tol t) {
  if (want == got) return true;
  if (t == EXACT) return false;
  float x = lt__bf16_to_f32(want), y = lt__bf16_to_f32(got);
  if (isnan(x) || isnan(y) || isinf(x) || isinf(y)) return false;
  int32_t d = order_key(want) - order_key(got);
  if (d >= -1 && d <= 1) return true;
  if (t != F32_ULP1) return false;
  double ulp = x != 0 ? ldexp(1.0, ilogb(x) - 7) : 0;
  return fabs((double)x - y) <= 1e-6 + 2e-5 * fabs(x) + ulp;
}

/* Runs f on ref and cpu and compares; the cpu's count of loop kernels
 * (at least min_kernels) is returned. */
static int64_t check(const char *what, const operand *ops, int nin, build_fn f, const void *ud,
                     tol t, int64_t min_kernels) {
  result a, b; /* cpu first, as test_cpu_differential.c diff_nan (why: there) */
  run_on(&lt__cpu_backend, ops, nin, f, ud, &b);
  run_on(&lt__ref_backend, ops, nin, f, ud, &a);
  assert_int_equal(a.dt, b.dt);
  assert_int_equal(a.n, b.n);
  for (int64_t i = 0; i < a.n; i++) {
    bool ok;
    if (a.dt == LT_BF16)
      ok = bf16_close(((uint16_t *)a.data)[i], ((uint16_t *)b.data)[i], t);
    else /* f32 / f64 NaN bits are not canonical on either backend: any NaN */
      ok = memcmp(a.data + i * lt_dtype_size(a.dt), b.data + i * lt_dtype_size(a.dt),
                  lt_dtype_size(a.dt)) == 0 ||
           (lt__is_float(a.dt) && isnan(lt__load_f64(a.dt, a.data, i)) &&
            isnan(lt__load_f64(b.dt, b.data, i)));
    if (!ok) {
      char in[128] = "";
      for (int k = 0; k < nin; k++)
        if (ops[k].dt == LT_BF16 && lt__numel(ops[k].shape, ops[k].ndim) == a.n)
          snprintf(in + strlen(in), sizeof in - strlen(in), " in%d 0x%04X", k,
                   ((const uint16_t *)ops[k].data)[i]);
      fail_msg("%s element %lld:%s ref %.9g cpu %.9g (out %s)", what, (long long)i, in,
               lt__load_f64(a.dt, a.data, i), lt__load_f64(b.dt, b.data, i), lt_dtype_name(a.dt));
    }
  }
  if (b.kernels < min_kernels)
    fail_msg("%s: the cpu ran %lld loop kernels, expected at least %lld (the fallback?)", what,
             (long long)b.kernels, (long long)min_kernels);
  free(a.data);
  free(b.data);
  return b.kernels;
}

static operand bf16_operand(const uint16_t *data, int64_t n) {
  operand o = {.dt = LT_BF16, .ndim = 1, .shape = {n}, .data = data};
  return o;
}

/* ---- unary and binary ops ---- */

typedef lt_tensor *(*unary_op)(lt_tensor *);
typedef lt_tensor *(*binary_op)(lt_tensor *, lt_tensor *);

static lt_tensor *b_unary(lt_tensor *const *in, const void *ud) {
  return (*(const unary_op *)ud)(in[0]);
}
static lt_tensor *b_binary(lt_tensor *const *in, const void *ud) {
  return (*(const binary_op *)ud)(in[0], in[1]);
}

/* The f32 polynomials (cpu_irmath.c) and softsign's f32 division after an
 * f32 add: within 1 bf16 ulp. gelu: see the top. Every other op is exact:
 * rsqrt, log1p, sin, cos and pow go through double and libm as ref does. */
static tol unary_tol(const char *name) {
  static const char *ulp1[] = {"exp", "log", "tanh", "sigmoid", "erf", "softsign"};
  for (size_t i = 0; i < sizeof ulp1 / sizeof *ulp1; i++)
    if (!strcmp(name, ulp1[i])) return ULP1;
  if (!strncmp(name, "gelu", 4)) return F32_ULP1;
  return EXACT;
}

#define UNARY_CASE(name, build, ir, dtype, domain, grad) {#name, lt_##name},
#define BINARY_CASE_ELEMENTWISE(name) {#name, lt_##name},
#define BINARY_CASE_CONTRACTION(name) /* matmul: not a loop */
#define BINARY_CASE(name, build, ir, kind, domain, grad) BINARY_CASE_##kind(name)

static const struct {
  const char *name;
  unary_op f;
} kUnary[] = {LT_UNARY_OPS(UNARY_CASE)};

static const struct {
  const char *name;
  binary_op f;
} kBinary[] = {LT_BINARY_OPS(BINARY_CASE)};

static void test_unary_ops(void **state) {
  (void)state;
  static uint16_t x[N];
  g_rng = 0x9E3779B97F4A7C15ull;
  fill_bf16(x, N, 0);
  operand op = bf16_operand(x, N);
  for (size_t u = 0; u < sizeof kUnary / sizeof *kUnary; u++) {
    char what[64];
    snprintf(what, sizeof what, "%s bf16", kUnary[u].name);
    check(what, &op, 1, b_unary, &kUnary[u].f, unary_tol(kUnary[u].name), 1);
  }
}

/* Every binary op is exact: + - * / in f32 (see the top), pow through
 * double, fmod exact, the comparisons and max / min exact; remainder and
 * floor_divide are chains of those, each node rounded as ref rounds it. */
static void test_binary_ops(void **state) {
  (void)state;
  static uint16_t a[N], b[N];
  g_rng = 0xD1B54A32D192ED03ull;
  fill_bf16(a, N, 0);
  fill_bf16(b, N, 1);
  operand ops[2] = {bf16_operand(a, N), bf16_operand(b, N)};
  for (size_t o = 0; o < sizeof kBinary / sizeof *kBinary; o++) {
    char what[64];
    snprintf(what, sizeof what, "%s bf16", kBinary[o].name);
    check(what, ops, 2, b_binary, &kBinary[o].f, EXACT, 1);
  }
}

/* ---- reductions ---- */

typedef struct red_case {
  lt_tensor *(*f)(lt_tensor *, const int *, int, bool);
  int axes[2], naxes;
} red_case;

static lt_tensor *b_reduce(lt_tensor *const *in, const void *ud) {
  const red_case *c = ud;
  return c->f(in[0], c->axes, c->naxes, false);
}

/* Sums, means and products accumulate in double in any order (the loops
 * reassociate), so the one rounding at the end may fall on either side of a
 * tie that ref's order meets: 1 bf16 ulp. max and min are exact. */
static void test_reductions(void **state) {
  (void)state;
  enum { R = 48, C = 33 };
  static uint16_t x[R * C], y[R * C];
  g_rng = 0x2545F4914F6CDD1Dull;
  for (int i = 0; i < R * C; i++) x[i] = moderate();
  memcpy(y, x, sizeof y);
  /* a few rows and columns that hold a NaN or an infinity: propagated, 0x7FC0 */
  for (int i = 0; i < 6; i++) y[(7 * i + 3) * C + (5 * i) % C] = kEdges[2 + i % 5];
  static const struct {
    const char *name;
    lt_tensor *(*f)(lt_tensor *, const int *, int, bool);
    tol t;
  } ops[] = {{"sum", lt_sum, ULP1},
             {"mean", lt_mean, ULP1},
             {"max", lt_max, EXACT},
             {"min", lt_min, EXACT},
             {"prod", lt_prod, ULP1}};
  static const int axes[3][3] = {{1, 0}, {1, 1}, {2, 0}}; /* naxes, axes */
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
    for (int a = 0; a < 3; a++)
      for (int v = 0; v < 2; v++) {
        red_case c = {ops[o].f, {axes[a][1], 1}, axes[a][0]};
        operand op = {.dt = LT_BF16, .ndim = 2, .shape = {R, C}, .data = v ? y : x};
        /* prod of 48 values of up to 2^6 overflows; of 33 (axis 1) may: an
         * infinity on both sides is compared as such */
        char what[80];
        snprintf(what, sizeof what, "%s bf16 axes %d%s", ops[o].name, a, v ? " with NaN/inf" : "");
        check(what, &op, 1, b_reduce, &c, ops[o].t, 1);
      }
}

/* ---- fused chains: each node rounds ---- */

static lt_tensor *b_exp_chain(lt_tensor *const *in, const void *ud) {
  (void)ud;
  lt_tensor *three = lt_full(CPU0, LT_BF16, NULL, 0, 3.0), *one = lt_scalar(CPU0, LT_BF16, 1.0);
  return lt_exp(lt_add(lt_mul(in[0], three), one));
}

/* (x * a + b) * x - a, relu: exact ops only, each rounded; a and b are
 * operands of the same shape, so nothing but this one kernel runs. */
static lt_tensor *b_exact_chain(lt_tensor *const *in, const void *ud) {
  (void)ud;
  lt_tensor *t = lt_add(lt_mul(in[0], in[1]), in[2]);
  return lt_relu(lt_sub(lt_mul(t, in[0]), in[1]));
}

/* constants that bf16 rounds: 0.1 is 0x3DCD; 1/3 0x3EAB */
static lt_tensor *b_const_chain(lt_tensor *const *in, const void *ud) {
  (void)ud;
  lt_tensor *c1 = lt_full(CPU0, LT_BF16, NULL, 0, 0.1),
            *c2 = lt_full(CPU0, LT_BF16, NULL, 0, 1.0 / 3);
  return lt_sub(lt_mul(in[0], c1), c2);
}

static void test_fused_chains(void **state) {
  (void)state;
  static uint16_t x[N], a[N], b[N];
  g_rng = 0xBF58476D1CE4E5B9ull;
  for (int i = 0; i < N; i++) x[i] = moderate(), a[i] = moderate(), b[i] = moderate();
  fill_bf16(a, NEDGES * NEDGES, 1);
  operand ops[3] = {bf16_operand(x, N), bf16_operand(a, N), bf16_operand(b, N)};
  /* one kernel each: the whole chain in one loop */
  assert_int_equal(check("exp(x * 3 + 1) bf16", ops, 1, b_exp_chain, NULL, ULP1, 1), 1);
  assert_int_equal(check("relu((x * a + b) * x - a) bf16", ops, 3, b_exact_chain, NULL, EXACT, 1),
                   1);
  assert_int_equal(check("x * 0.1 - 1/3 bf16", ops, 1, b_const_chain, NULL, EXACT, 1), 1);
}

/* ---- long chains: their loops interleave two vectors (cpu_codegen.c) ---- */

/* depth rounds of (t * a + b) * x - a, relu (b a row: broadcast): exact ops,
 * each rounded: a body of hundreds of operations for the deeper one */
static lt_tensor *b_deep_chain(lt_tensor *const *in, const void *ud) {
  int depth = *(const int *)ud;
  lt_tensor *t = in[0];
  for (int d = 0; d < depth; d++)
    t = lt_relu(lt_sub(lt_mul(lt_add(lt_mul(t, in[1]), in[2]), in[0]), in[1]));
  return t;
}

/* Whether any module LT_DUMP_KERNELS wrote into dir (before optimisation,
 * *.ll but not *.opt.ll) asks for interleaving. */
static bool dumped_interleave(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  bool found = false;
  struct dirent *e;
  char path[512], line[512];
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".ll") != 0 || strstr(e->d_name, ".opt.ll")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
      if (strstr(line, "llvm.loop.interleave.count")) found = true;
    fclose(f);
    unlink(path);
  }
  closedir(d);
  return found;
}

static void test_long_chains_interleave(void **state) {
  (void)state;
  enum { ROWS = 6, COLS = 512 }; /* rows of 512: a whole number of two vectors */
  static uint16_t x[ROWS * COLS], a[ROWS * COLS], b[ROWS * COLS];
  g_rng = 0x94D049BB133111EBull;
  for (int i = 0; i < ROWS * COLS; i++) x[i] = moderate(), a[i] = moderate(), b[i] = moderate();
  operand ops[3];
  /* b a row broadcast over the rows (a bias): the loops then stay rows of
   * COLS instead of one flat loop over every element */
  for (int i = 0; i < 3; i++) {
    ops[i] = bf16_operand(i == 0 ? x : i == 1 ? a : b, ROWS * COLS);
    ops[i].ndim = 2;
    ops[i].shape[0] = ROWS;
    ops[i].shape[1] = COLS;
  }
  ops[2].ndim = 1;
  ops[2].shape[0] = COLS;
  char dir[] = "/tmp/lt_interleaveXXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("LT_DUMP_KERNELS", dir, 1);
  /* the values exactly as ref's, whatever the loop's shape */
  int deep = 12, shallow = 1;
  check("deep exact chain bf16", ops, 3, b_deep_chain, &deep, EXACT, 1);
  bool deep_asks = dumped_interleave(dir);
  check("shallow exact chain bf16", ops, 3, b_deep_chain, &shallow, EXACT, 1);
  bool shallow_asks = dumped_interleave(dir);
  unsetenv("LT_DUMP_KERNELS");
  rmdir(dir);
  assert_true(deep_asks);
  assert_false(shallow_asks);
}

/* ---- mixed dtypes and casts ---- */

typedef struct cast_case {
  lt_dtype to;
} cast_case;

static lt_tensor *b_cast(lt_tensor *const *in, const void *ud) {
  return lt_cast(in[0], ((const cast_case *)ud)->to);
}
static lt_tensor *b_mixed_mul(lt_tensor *const *in, const void *ud) {
  (void)ud;
  return lt_mul(lt_add(in[0], in[1]), in[0]); /* bf16 + f32 -> f32, * bf16 */
}
static lt_tensor *b_mixed_int(lt_tensor *const *in, const void *ud) {
  (void)ud;
  return lt_sub(lt_mul(in[0], in[1]), in[0]); /* bf16 * i32 -> bf16 (torch), - bf16 */
}
static lt_tensor *b_mixed_where(lt_tensor *const *in, const void *ud) {
  (void)ud; /* where(x > y, x, y) of bf16 and f32 -> f32; where(bf16 cond) as bf16 */
  lt_tensor *w = lt_where(lt_gt(in[0], in[1]), in[0], in[1]);
  return lt_where(in[0], lt_cast(w, LT_BF16), lt_neg(in[0]));
}

static void test_mixed_and_casts(void **state) {
  (void)state;
  static uint16_t x[N];
  static float f[N];
  static int32_t k[N];
  g_rng = 0x94D049BB133111EBull;
  fill_bf16(x, N, 0);
  /* f32 values of every kind: random bits (ties to even among them when the
   * low 16 bits are 0x8000), bf16 values, and exact ties */
  for (int i = 0; i < N; i++) {
    uint32_t u = rnd32() << 1 ^ rnd32();
    if (i % 4 == 1) u = (u & 0xFFFF0000u) | 0x8000u;
    if (i % 4 == 2) u = (uint32_t)x[i] << 16;
    memcpy(&f[i], &u, sizeof u);
    k[i] = i % 3 ? (int32_t)(rnd32() % 601) - 300 : (int32_t)(rnd32() << 1 ^ rnd32());
  }
  operand xb = bf16_operand(x, N);
  operand fo = {.dt = LT_F32, .ndim = 1, .shape = {N}, .data = f};
  operand ko = {.dt = LT_I32, .ndim = 1, .shape = {N}, .data = k};
  operand bf[2] = {xb, fo}, bi[2] = {xb, ko};
  check("(bf16 + f32) * bf16", bf, 2, b_mixed_mul, NULL, EXACT, 1);
  check("bf16 * i32 - bf16", bi, 2, b_mixed_int, NULL, EXACT, 1);
  check("where, bf16 and f32", bf, 2, b_mixed_where, NULL, EXACT, 1);
  /* bf16 to every dtype, and every dtype to bf16 (values of that dtype made
   * from the f32 ones: the cast under test only after the conversion) */
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    cast_case c = {(lt_dtype)dt};
    char what[64];
    snprintf(what, sizeof what, "cast bf16 -> %s", lt_dtype_name((lt_dtype)dt));
    check(what, &xb, 1, b_cast, &c, EXACT, dt == LT_BF16 ? 0 : 1);
    static unsigned char src[N * 8];
    for (int i = 0; i < N; i++) {
      double v = i % 2 ? (double)k[i] : (double)f[i];
      if (dt == LT_F64 && i % 8 == 3) v += ldexp((double)f[i], -30); /* f32 rounds it first */
      lt__store_f64(dt, src, i, v);
    }
    operand so = {.dt = (lt_dtype)dt, .ndim = 1, .shape = {N}, .data = src};
    cast_case to = {LT_BF16};
    snprintf(what, sizeof what, "cast %s -> bf16", lt_dtype_name((lt_dtype)dt));
    check(what, &so, 1, b_cast, &to, EXACT, dt == LT_BF16 ? 0 : 1);
  }
}

/* ---- a copy keeps the bits ---- */

static lt_tensor *b_transpose(lt_tensor *const *in, const void *ud) {
  (void)ud;
  return lt_transpose(in[0], 0, 1);
}

static void test_copy_keeps_bits(void **state) {
  (void)state;
  static uint16_t x[64 * 24];
  g_rng = 0x3C79AC492BA7B653ull;
  fill_bf16(x, 64 * 24, 0);
  operand op = {.dt = LT_BF16, .ndim = 2, .shape = {64, 24}, .data = x};
  check("transpose bf16", &op, 1, b_transpose, NULL, EXACT, 0);
}

static int setup(void **state) {
  tu_reset_executor();
  lt_set_eager(false);
  return tu_setup(state);
}
static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt__backend_force(NULL);
  return rc;
}
#define BTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      BTEST(test_unary_ops),
      BTEST(test_binary_ops),
      BTEST(test_reductions),
      BTEST(test_fused_chains),
      BTEST(test_mixed_and_casts),
      BTEST(test_copy_keeps_bits),
      BTEST(test_long_chains_interleave),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
