/* Differential tests: every op, dtype and broadcasting case, and random op
 * DAGs, computed by the cpu backend and by ref (the oracle) in one process
 * (lt__backend_force picks the backend of each computation), compared within
 * the tolerances below. A failing random case prints its seed; rerun one
 * with LT_DIFF_SEED=<seed>.
 *
 * Tolerances: integers and bools exact. f64: |d| <= 1e-12 + 1e-10 |ref|
 * (reduction order differs). f32: |d| <= 1e-6 + 2e-5 |ref| for single ops
 * (the vectorized exp/log/tanh/erf/sigmoid are within ~1e-6 relative; sums
 * use another order); DAGs: 1e-4 relative to the larger of |ref| and the
 * output's largest magnitude, since errors compound through a graph. f32
 * matmul and convolution outputs (oneDNN: the order of their sums depends on
 * the processor) also get tu_f32_sum_tol of their terms (g_sum_tol). The
 * reductions sum f32 in double on both backends, so their order does not
 * matter. Infinities must match exactly. NaN must match NaN, and both backends
 * giving NaN counts as agreement only where NaN is the answer: where an
 * operand of the element is NaN or infinite, or, for the elementwise ops
 * whose domain excludes some finite values (log of a negative number, 0 / 0,
 * a negative number to a fractional power), where the operands lie outside
 * it. An op missing from both backends (NaN everywhere) fails. */
#include "test_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

typedef struct input {
  lt_dtype dt;
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  void *data;
} input;

typedef int (*build_fn)(lt_tensor **in, const void *ud, lt_tensor **outs);

typedef struct result {
  int nout;
  lt_dtype dt[4];
  int64_t n[4];
  int ndim[4];
  int64_t shape[4][LT_MAX_DIMS];
  void *data[4];
  int rc;
} result;

static uint64_t g_rng;
static uint64_t rnd(void) { return tu_xorshift(&g_rng); }
static double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
static int irand(int n) { return (int)(rnd() % (uint64_t)n); }

static int64_t numel(const int64_t *s, int nd) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= s[d];
  return n;
}

static double gen_value(bool specials) {
  if (specials && irand(20) == 0) {
    static const double sp[] = {NAN,   INFINITY, -INFINITY, 0.0,   -0.0, 1e30,
                                -1e30, 1e-40,    88.0,      -90.0, 0.5,  -0.5};
    return sp[irand(12)];
  }
  double v = (urand() * 2 - 1) * 4;
  return irand(4) == 0 ? v * 10 : v;
}

static void input_fill(input *in, lt_dtype dt, const int64_t *shape, int nd, bool specials) {
  in->dt = dt;
  in->ndim = nd;
  memcpy(in->shape, shape, (size_t)nd * sizeof *shape);
  int64_t n = numel(shape, nd);
  in->data = malloc((size_t)n * lt_dtype_size(dt) + 8);
  for (int64_t i = 0; i < n; i++) {
    double v = gen_value(specials);
    switch (dt) {
    case LT_BOOL:
      ((uint8_t *)in->data)[i] = irand(2);
      break;
    case LT_I32:
      ((int32_t *)in->data)[i] = irand(5) ? irand(21) - 10 : (int32_t)rnd();
      break;
    case LT_U8:
    case LT_I8: /* small values, or any byte (u8 above 127, i8 below 0) */
      ((uint8_t *)in->data)[i] = (uint8_t)(irand(5) ? irand(21) - 10 : (int)rnd());
      break;
    case LT_I64:
      ((int64_t *)in->data)[i] = irand(5) ? irand(21) - 10 : (int64_t)rnd();
      break;
    case LT_F32:
      ((float *)in->data)[i] = (float)v;
      break;
    case LT_BF16: /* 2-byte elements: through the table, never as a double */
    case LT_F64:
      lt__store_f64(dt, in->data, i, v);
      break;
    case LT_NUM_DTYPES:
      break;
    }
  }
}

static void input_free(input *in, int n) {
  for (int i = 0; i < n; i++) free(in[i].data);
}

static void run_on(const lt_backend *be, input *ins, int nin, build_fn f, const void *ud,
                   result *r) {
  memset(r, 0, sizeof *r);
  lt__backend_force(be);
  lt_scope_begin();
  lt_tensor *t[16], *outs[4];
  for (int i = 0; i < nin; i++)
    t[i] = lt_from_data(CPU0, ins[i].dt, ins[i].shape, ins[i].ndim, ins[i].data);
  r->nout = f(t, ud, outs);
  if (r->nout > 0) {
    r->rc = lt_sync(outs, r->nout, true);
    for (int o = 0; o < r->nout && r->rc == LT_OK; o++) {
      r->dt[o] = lt_get_dtype(outs[o]);
      r->n[o] = lt_numel(outs[o]);
      r->ndim[o] = lt_ndim(outs[o]);
      memcpy(r->shape[o], lt_shape(outs[o]), (size_t)r->ndim[o] * sizeof(int64_t));
      size_t nb = (size_t)r->n[o] * lt_dtype_size(r->dt[o]);
      r->data[o] = malloc(nb + 8);
      r->rc = lt_to_data(outs[o], r->data[o], nb);
    }
  }
  lt_scope_end();
  lt__backend_force(NULL);
}

static void result_free(result *r) {
  for (int o = 0; o < 4; o++) free(r->data[o]);
}

static int g_failures, g_cases, g_failures_before;

/* When NaN is the answer of an elementwise op for finite operand values x
 * (one per operand of the case, broadcast to the element). */
typedef bool (*nan_rule)(const double *x);
/* How a case's NaN results are judged. elementwise: per element, from the
 * operands at that element (their shapes broadcast to the output's) and
 * rule (NULL: no finite operands give NaN); else at(ins, shape, nd, i) when
 * given (a case's own rule); else per case: NaN only when some operand holds
 * a non-finite value (reductions, views, ...). */
typedef struct nan_policy {
  bool elementwise;
  nan_rule rule;
  bool (*at)(const input *ins, const int64_t *shape, int nd, int64_t i);
} nan_policy;

static bool any_nonfinite(const input *ins, int nin) {
  for (int k = 0; k < nin; k++) {
    if (!lt__is_float(ins[k].dt)) continue;
    for (int64_t i = 0; i < numel(ins[k].shape, ins[k].ndim); i++)
      if (!isfinite(lt__load_f64(ins[k].dt, ins[k].data, i))) return true;
  }
  return false;
}

/* Whether NaN is the answer at element i of an output of shape (shape, nd). */
static bool nan_is_answer(const input *ins, int nin, const nan_policy *np, const int64_t *shape,
                          int nd, int64_t i) {
  if (np && np->at) return np->at(ins, shape, nd, i);
  if (!np || !np->elementwise) return any_nonfinite(ins, nin);
  int64_t coords[LT_MAX_DIMS];
  for (int d = nd - 1; d >= 0; d--) {
    coords[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  double x[4];
  for (int k = 0; k < nin && k < 4; k++) {
    int64_t idx = 0;
    for (int d = 0; d < ins[k].ndim; d++) {
      int64_t c = ins[k].shape[d] == 1 ? 0 : coords[nd - ins[k].ndim + d];
      idx = idx * ins[k].shape[d] + c;
    }
    x[k] = lt__load_f64(ins[k].dt, ins[k].data, idx);
    if (!isfinite(x[k])) return true;
  }
  return np->rule && np->rule(x);
}

/* An f32 sum's order bound (tu_f32_sum_tol from its terms) for the first
 * nout outputs (0: output 0 only), allowed on top of the rule above: matmul
 * and convolution products sum in oneDNN's order on cpu, which depends on the
 * processor, and an output that is a 1-Lipschitz function of such a sum
 * (relu of the product) inherits its bound. each: one bound per element
 * (NULL: all is every element's). */
static struct {
  const double *each;
  double all;
  int nout;
} g_sum_tol;

/* Compares; on mismatch prints and counts a failure. scale_rel: the DAG mode. */
static bool compare(const char *what, uint64_t seed, const result *a, const result *b, bool dag,
                    const input *ins, int nin, const nan_policy *np) {
  g_cases++;
  if (a->nout != b->nout || a->rc != b->rc) {
    printf("MISMATCH %s seed %llu: ref gave %d outputs rc %d, cpu %d outputs rc %d (%s)\n", what,
           (unsigned long long)seed, a->nout, a->rc, b->nout, b->rc, lt_last_error());
    g_failures++;
    return false;
  }
  if (a->rc != LT_OK) return true; /* both refused: the same error path */
  for (int o = 0; o < a->nout; o++) {
    if (a->dt[o] != b->dt[o] || a->n[o] != b->n[o]) {
      printf("MISMATCH %s seed %llu: output %d dtype/size differ\n", what, (unsigned long long)seed,
             o);
      g_failures++;
      return false;
    }
    lt_dtype dt = a->dt[o];
    double amax = 0;
    for (int64_t i = 0; i < a->n[o]; i++) {
      double x = fabs(lt__load_f64(dt, a->data[o], i));
      if (isfinite(x) && x > amax) amax = x;
    }
    for (int64_t i = 0; i < a->n[o]; i++) {
      bool ok;
      if (dt == LT_I64) {
        ok = ((int64_t *)a->data[o])[i] == ((int64_t *)b->data[o])[i];
      } else {
        double x = lt__load_f64(dt, a->data[o], i), y = lt__load_f64(dt, b->data[o], i);
        if (isnan(x) && isnan(y) && !nan_is_answer(ins, nin, np, a->shape[o], a->ndim[o], i)) {
          printf(
              "MISMATCH %s seed %llu: output %d element %lld: both give NaN where the answer "
              "is finite\n",
              what, (unsigned long long)seed, o, (long long)i);
          g_failures++;
          return false;
        }
        if (isnan(x) || isnan(y))
          ok = isnan(x) && isnan(y);
        else if (isinf(x) || isinf(y))
          ok = x == y;
        else if (dt == LT_BF16) { /* cpu computes bf16 in f32 (within f32's bound
                                     below, and a sum's order bound), then rounds:
                                     one bf16 ulp of the larger more */
          double big = fmax(fabs(x), fabs(y));
          double sum_tol = o < (g_sum_tol.nout > 0 ? g_sum_tol.nout : 1)
                               ? (g_sum_tol.each ? g_sum_tol.each[i] : g_sum_tol.all)
                               : 0;
          ok = fabs(x - y) <=
               1e-6 + 2e-5 * fabs(x) + sum_tol + (big != 0 ? ldexp(1.0, ilogb(big) - 7) : 0);
        } else if (dt != LT_F32 && dt != LT_F64)
          ok = x == y;
        else {
          double rtol = dt == LT_F32 ? 2e-5 : 1e-10, atol = dt == LT_F32 ? 1e-6 : 1e-12;
          double scale = fabs(x);
          if (dag) {
            rtol = dt == LT_F32 ? 1e-4 : 1e-9;
            scale = fmax(scale, amax);
          }
          if (o < (g_sum_tol.nout > 0 ? g_sum_tol.nout : 1) && dt == LT_F32)
            atol += g_sum_tol.each ? g_sum_tol.each[i] : g_sum_tol.all;
          ok = fabs(x - y) <= atol + rtol * scale;
        }
      }
      if (!ok) {
        printf("MISMATCH %s seed %llu: output %d element %lld: ref %.9g cpu %.9g\n", what,
               (unsigned long long)seed, o, (long long)i, lt__load_f64(dt, a->data[o], i),
               lt__load_f64(dt, b->data[o], i));
        g_failures++;
        return false;
      }
    }
  }
  return true;
}

/* np: how NaN results are judged (NULL: per case, see nan_policy). cpu runs
 * first: its outputs then cannot land in memory that ref has just freed
 * holding the very values expected, which would hide entries a kernel leaves
 * unwritten. */
static void diff_nan(const char *what, uint64_t seed, input *ins, int nin, build_fn f,
                     const void *ud, bool dag, const nan_policy *np) {
  result a, b;
  run_on(&lt__cpu_backend, ins, nin, f, ud, &b);
  run_on(&lt__ref_backend, ins, nin, f, ud, &a);
  compare(what, seed, &a, &b, dag, ins, nin, np);
  result_free(&a);
  result_free(&b);
}

static void diff(const char *what, uint64_t seed, input *ins, int nin, build_fn f, const void *ud,
                 bool dag) {
  diff_nan(what, seed, ins, nin, f, ud, dag, NULL);
}

/* ---- single ops ---- */

typedef lt_tensor *(*unary_op)(lt_tensor *);
typedef lt_tensor *(*binary_op)(lt_tensor *, lt_tensor *);

static int b_unary(lt_tensor **in, const void *ud, lt_tensor **outs) {
  outs[0] = (*(const unary_op *)ud)(in[0]);
  return outs[0] ? 1 : -1;
}
static int b_binary(lt_tensor **in, const void *ud, lt_tensor **outs) {
  outs[0] = (*(const binary_op *)ud)(in[0], in[1]);
  return outs[0] ? 1 : -1;
}
/* a fused chain ending in the op, and the op's result reused: exercises fusion */
static int b_binary_chain(lt_tensor **in, const void *ud, lt_tensor **outs) {
  lt_tensor *r = (*(const binary_op *)ud)(lt_neg(lt_neg(in[0])), in[1]);
  if (!r) return -1;
  outs[0] = r;
  outs[1] = lt_cast(r, LT_F64);
  return 2;
}

/* The finite operands for which NaN is the answer (torch.log(-1) is nan,
 * torch.log1p(-2) nan, torch.sqrt(-1) nan, torch.rsqrt(-1) nan,
 * torch.tensor(0.) / 0 nan, torch.pow(-2., 0.5) nan). */
static bool nan_below_0(const double *x) { return x[0] < 0; }
static bool nan_below_m1(const double *x) { return x[0] < -1; }
static bool nan_0_over_0(const double *x) { return x[0] == 0 && x[1] == 0; }
static bool nan_fractional_power(const double *x) { return x[0] < 0 && x[1] != floor(x[1]); }

static bool nan_zero_divisor(const double *x) { return x[1] == 0; }

/* Every unary and elementwise binary op of lazytensor_ops.h, with the NaN
 * rule of its DOMAIN column. */
#define NAN_RULE_REAL NULL
#define NAN_RULE_NONNEG nan_below_0
#define NAN_RULE_ABOVE_M1 nan_below_m1
#define NAN_RULE_NONE NULL
#define NAN_RULE_ZERO_OVER_ZERO nan_0_over_0
#define NAN_RULE_FRACTIONAL_POWER nan_fractional_power
#define NAN_RULE_ZERO_DIVISOR nan_zero_divisor
#define UNARY_CASE(name, build, ir, dtype, domain, grad) {#name, lt_##name, NAN_RULE_##domain},
#define BINARY_CASE_ELEMENTWISE(name, domain) {#name, lt_##name, NAN_RULE_##domain},
#define BINARY_CASE_CONTRACTION(name, domain) /* matmul: its own tests below */
#define BINARY_CASE(name, build, ir, kind, domain, grad) BINARY_CASE_##kind(name, domain)

static const struct {
  const char *name;
  unary_op f;
  nan_rule nan;
} kUnary[] = {LT_UNARY_OPS(UNARY_CASE)};

static const struct {
  const char *name;
  binary_op f;
  nan_rule nan;
} kBinary[] = {LT_BINARY_OPS(BINARY_CASE)};

static void test_unary(void **state) {
  (void)state;
  for (size_t u = 0; u < sizeof kUnary / sizeof *kUnary; u++)
    for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
      for (int sz = 0; sz < 3; sz++) {
        static const int64_t sizes[3][2] = {{1, 1}, {7, 13}, {64, 1031}};
        input in;
        g_rng = 0x9e3779b97f4a7c15ull + u * 131 + (uint64_t)dt * 7 + (uint64_t)sz;
        input_fill(&in, (lt_dtype)dt, sizes[sz], sz ? 2 : 0, true);
        char what[64];
        snprintf(what, sizeof what, "%s %s", kUnary[u].name, lt_dtype_name((lt_dtype)dt));
        nan_policy np = {true, kUnary[u].nan, NULL};
        diff_nan(what, 0, &in, 1, b_unary, &kUnary[u].f, false, &np);
        input_free(&in, 1);
      }
  assert_int_equal(g_failures - g_failures_before, 0);
}

static const struct {
  int na, nb;
  int64_t a[4], b[4];
} kBcast[] = {
    {1, 1, {1000}, {1000}},
    {0, 1, {0}, {37}},
    {2, 2, {3, 1}, {1, 4}},
    {3, 1, {2, 3, 4}, {4}},
    {3, 2, {2, 1, 4}, {3, 1}},
    {2, 2, {5, 7}, {5, 7}},
    {4, 4, {2, 3, 1, 5}, {1, 3, 4, 1}},
    {2, 1, {300, 129}, {129}},
    {2, 2, {129, 1}, {129, 300}},
    {1, 1, {0}, {1}},
};

static void test_binary(void **state) {
  (void)state;
  for (size_t o = 0; o < sizeof kBinary / sizeof *kBinary; o++)
    for (int da = 0; da < LT_NUM_DTYPES; da++)
      for (size_t c = 0; c < sizeof kBcast / sizeof *kBcast; c++) {
        /* same dtypes everywhere, plus one mixed pairing per case */
        int db = (c % 3 == 0) ? (da + 1 + (int)o) % LT_NUM_DTYPES : da;
        input in[2];
        g_rng = 0x1234567ull + o * 1000 + (uint64_t)da * 100 + c;
        input_fill(&in[0], (lt_dtype)da, kBcast[c].a, kBcast[c].na, true);
        input_fill(&in[1], (lt_dtype)db, kBcast[c].b, kBcast[c].nb, true);
        char what[96];
        snprintf(what, sizeof what, "%s %s,%s case %zu", kBinary[o].name,
                 lt_dtype_name((lt_dtype)da), lt_dtype_name((lt_dtype)db), c);
        nan_policy np = {true, kBinary[o].nan, NULL};
        diff_nan(what, 0, in, 2, c % 2 ? b_binary_chain : b_binary, &kBinary[o].f, false, &np);
        input_free(in, 2);
      }
  assert_int_equal(g_failures - g_failures_before, 0);
}

static int b_where(lt_tensor **in, const void *ud, lt_tensor **outs) {
  (void)ud;
  outs[0] = lt_where(in[0], in[1], in[2]);
  return outs[0] ? 1 : -1;
}
static int b_cast(lt_tensor **in, const void *ud, lt_tensor **outs) {
  outs[0] = lt_cast(in[0], *(const lt_dtype *)ud);
  return outs[0] ? 1 : -1;
}
static int b_clamp(lt_tensor **in, const void *ud, lt_tensor **outs) {
  (void)ud;
  outs[0] = lt_clamp(in[0], -1.5, 2.25);
  return outs[0] ? 1 : -1;
}

static int b_mask(lt_tensor **in, const void *ud, lt_tensor **outs) {
  int which = *(const int *)ud;
  switch (which) {
  case 0:
    outs[0] = lt_masked_fill(in[1], in[0], lt_get_dtype(in[1]) == LT_U8 ? 7 : -3);
    break;
  case 1: /* fused into a user */
    outs[0] = lt_add(lt_masked_fill(in[1], in[0], 1), in[1]);
    break;
  case 2:
    outs[0] = lt_tril(in[2], -1);
    break;
  case 3:
    outs[0] = lt_triu(in[2], 2);
    break;
  default:
    outs[0] = lt_tril(lt_masked_fill(in[1], in[0], 0), 1);
    break;
  }
  return outs[0] ? 1 : -1;
}

/* masked_fill, tril, triu of every dtype. */
static void test_mask_ops(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    input in[3];
    g_rng = 91 + (uint64_t)dt;
    input_fill(&in[0], LT_BOOL, SHAPE(4, 1), 2, false);
    input_fill(&in[1], (lt_dtype)dt, SHAPE(4, 5), 2, true);
    input_fill(&in[2], (lt_dtype)dt, SHAPE(2, 3, 4), 3, true);
    for (int which = 0; which < 5; which++) {
      char what[64];
      snprintf(what, sizeof what, "mask case %d %s", which, lt_dtype_name((lt_dtype)dt));
      diff(what, 0, in, 3, b_mask, &which, false);
    }
    input_free(in, 3);
  }
  assert_int_equal(g_failures - g_failures_before, 0);
}

static void test_where_cast_clamp(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    input in[3];
    g_rng = 77 + (uint64_t)dt;
    input_fill(&in[0], LT_BOOL, SHAPE(3, 1, 5), 3, false);
    input_fill(&in[1], (lt_dtype)dt, SHAPE(4, 5), 2, true);
    input_fill(&in[2], (lt_dtype)dt, SHAPE(3, 4, 1), 3, true);
    diff("where", 0, in, 3, b_where, NULL, false);
    diff("clamp", 0, &in[1], 1, b_clamp, NULL, false);
    for (int to = 0; to < LT_NUM_DTYPES; to++) {
      lt_dtype t = (lt_dtype)to;
      char what[64];
      snprintf(what, sizeof what, "cast %s->%s", lt_dtype_name((lt_dtype)dt), lt_dtype_name(t));
      diff(what, 0, &in[1], 1, b_cast, &t, false);
    }
    input_free(in, 3);
  }
  /* float -> int saturation and NaN */
  input f;
  double sp[] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, 1e19, -1e19, 2.5, -2.5, -0.0};
  f.dt = LT_F64;
  f.ndim = 1;
  f.shape[0] = 10;
  f.data = sp;
  for (int to = 0; to < LT_NUM_DTYPES; to++) {
    lt_dtype t = (lt_dtype)to;
    diff("cast specials", 0, &f, 1, b_cast, &t, false);
  }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- reductions ---- */

typedef struct red_case {
  int op; /* 0 sum 1 mean 2 max 3 min 4 prod 5 logsumexp 6 argmax 7 argmin 8 softmax 9 log_softmax
           */
  int axes[4], naxes;
  bool keep;
} red_case;

static int b_reduce(lt_tensor **in, const void *ud, lt_tensor **outs) {
  const red_case *c = ud;
  lt_tensor *x = in[0];
  switch (c->op) {
  case 0:
    outs[0] = lt_sum(x, c->axes, c->naxes, c->keep);
    break;
  case 1:
    outs[0] = lt_mean(x, c->axes, c->naxes, c->keep);
    break;
  case 2:
    outs[0] = lt_max(x, c->axes, c->naxes, c->keep);
    break;
  case 3:
    outs[0] = lt_min(x, c->axes, c->naxes, c->keep);
    break;
  case 4:
    outs[0] = lt_prod(x, c->axes, c->naxes, c->keep);
    break;
  case 5:
    outs[0] = lt_logsumexp(x, c->axes, c->naxes, c->keep);
    break;
  case 6:
    outs[0] = lt_argmax(x, c->axes[0], c->keep);
    break;
  case 7:
    outs[0] = lt_argmin(x, c->axes[0], c->keep);
    break;
  case 8:
    outs[0] = lt_softmax(x, c->axes[0]);
    break;
  default:
    outs[0] = lt_log_softmax(x, c->axes[0]);
    break;
  }
  return outs[0] ? 1 : -1;
}

/* reduction of a fused producer: exp(x) * 0.5 + x reduced */
static int b_reduce_fused(lt_tensor **in, const void *ud, lt_tensor **outs) {
  lt_tensor *x = in[0];
  if (lt_get_dtype(x) == LT_F32 || lt_get_dtype(x) == LT_F64) {
    x = lt_add(lt_mul(lt_tanh(x), lt_scalar(CPU0, lt_get_dtype(x), 0.5)), in[0]);
  }
  lt_tensor *tmp[1] = {x};
  return b_reduce(tmp, ud, outs);
}

static void test_reductions(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{6, 5, 7}, {1, 300, 1}, {4, 1, 2049}};
  for (int op = 0; op < 10; op++)
    for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
      for (int s = 0; s < 3; s++)
        for (int ax = 0; ax < 6; ax++) {
          red_case c = {.op = op, .keep = ax & 1};
          bool one = op >= 6;
          if (one) {
            if (ax > 2) continue;
            c.axes[0] = ax - 1; /* -1, 0, 1 */
            c.naxes = 1;
          } else {
            static const int sets[6][3] = {{0}, {1}, {2}, {0, 2}, {-1}, {0, 1}};
            static const int ns[6] = {0, 1, 1, 2, 1, 2}; /* 0: all axes */
            c.naxes = ns[ax];
            memcpy(c.axes, sets[ax], sizeof sets[ax]);
          }
          input in;
          g_rng = 4242 + (uint64_t)op * 1000 + (uint64_t)dt * 100 + (uint64_t)s * 10 + ax;
          /* specials (NaN, inf, 1e30) only where no sum of them can cancel in another order */
          input_fill(&in, (lt_dtype)dt, shapes[s], 3, s == 0 && op != 0 && op != 1 && op != 4);
          char what[96];
          snprintf(what, sizeof what, "reduce op %d %s shape %d axes %d", op,
                   lt_dtype_name((lt_dtype)dt), s, ax);
          if (getenv("LT_DIFF_ONLY") && strcmp(getenv("LT_DIFF_ONLY"), what) != 0) {
            input_free(&in, 1);
            continue;
          }
          diff(what, 0, &in, 1, (ax & 2) ? b_reduce_fused : b_reduce, &c, false);
          input_free(&in, 1);
        }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- matmul ---- */

typedef struct mm_case {
  int ta, tb; /* transpose the operand's last two dims before the matmul */
} mm_case;

static int b_matmul(lt_tensor **in, const void *ud, lt_tensor **outs) {
  const mm_case *c = ud;
  lt_tensor *a = in[0], *b = in[1];
  if (c->ta) a = lt_transpose(a, -1, -2);
  if (c->tb) b = lt_transpose(b, -1, -2);
  outs[0] = lt_matmul(a, b);
  if (!outs[0]) return -1;
  outs[1] = lt_relu(outs[0]);
  return 2;
}

/* The largest magnitude among an f32 input's values (finite ones). */
/* The largest finite |value| of an f32 or bf16 input. */
static double max_abs_f32(const input *in) {
  double m = 0;
  for (int64_t i = 0; i < numel(in->shape, in->ndim); i++) {
    double v = fabs(lt__load_f64(in->dt, in->data, i));
    if (isfinite(v)) m = fmax(m, v);
  }
  return m;
}

static void test_matmul(void **state) {
  (void)state;
  static const struct {
    int na, nb;
    int64_t a[4], b[4];
  } cases[] = {
      {2, 2, {7, 5}, {5, 3}},
      {2, 2, {64, 33}, {33, 65}},
      {3, 2, {2, 4, 3}, {3, 5}},
      {3, 3, {2, 4, 3}, {2, 3, 5}},
      {4, 3, {2, 1, 3, 4}, {3, 4, 2}},
      {1, 2, {6}, {6, 3}},
      {2, 1, {3, 6}, {6}},
      {1, 1, {6}, {6}},
      {2, 2, {1, 9}, {9, 1}},
      {2, 2, {3, 0}, {0, 4}},
      /* big enough for the pool to share: cut along rows, along columns,
       * and into whole batch entries (odd sizes: a short last block) */
      {2, 2, {131, 300}, {300, 70}},
      {2, 2, {40, 300}, {300, 257}},
      {3, 3, {4, 40, 64}, {4, 64, 50}},
      {4, 2, {3, 1, 37, 64}, {64, 129}},
  };
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
      for (int t = 0; t < 4; t++) {
        mm_case mc = {t & 1, t >> 1};
        int64_t sa[4], sb[4];
        memcpy(sa, cases[c].a, sizeof sa);
        memcpy(sb, cases[c].b, sizeof sb);
        int na = cases[c].na, nb = cases[c].nb;
        if (mc.ta && na < 2) continue;
        if (mc.tb && nb < 2) continue;
        if (mc.ta) {
          int64_t x = sa[na - 1];
          sa[na - 1] = sa[na - 2];
          sa[na - 2] = x;
        }
        if (mc.tb) {
          int64_t x = sb[nb - 1];
          sb[nb - 1] = sb[nb - 2];
          sb[nb - 2] = x;
        }
        input in[2];
        g_rng = 99 + (uint64_t)dt * 100 + c * 4 + (uint64_t)t;
        input_fill(&in[0], (lt_dtype)dt, sa, na, false);
        input_fill(&in[1], (lt_dtype)dt, sb, nb, false);
        char what[64];
        snprintf(what, sizeof what, "matmul %s case %zu t%d", lt_dtype_name((lt_dtype)dt), c, t);
        if (dt == LT_F32 || dt == LT_BF16) /* sums of K products in f32 (bf16's too) */
          g_sum_tol.all = tu_f32_sum_tol(cases[c].a[cases[c].na - 1],
                                         max_abs_f32(&in[0]) * max_abs_f32(&in[1]));
        g_sum_tol.nout = 2; /* the product and its relu (b_matmul) */
        diff(what, 0, in, 2, b_matmul, &mc, true);
        g_sum_tol.all = 0;
        g_sum_tol.nout = 0;
        input_free(in, 2);
      }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* Batched products that do not fold into one GEMM (cpu_gemm.c batch_prim: one
 * batched primitive per range of entries, each operand packed densely unless
 * its entries already lie one after the other): the heads of attention (an
 * operand a view [B, T, H, D] read as [B, H, T, D], rows H * D apart),
 * batch dims that broadcast either operand, dense entries, every
 * transposition. Big cases share the pool's threads (an odd entry count: two
 * ranges of different lengths); small ones run whole on one. */
typedef struct bmm_case {
  bool heads;    /* operands stored [B, rows, H, cols], the product over [B, H] */
  int nbd;       /* batch dims, 0..2 */
  int64_t bs[2]; /* the batch shape */
  bool bc_a[2];  /* that batch dim of a (or b) is 1: broadcast */
  bool bc_b[2];
  bool a_no_batch; /* a has no batch dims at all (b's entries share it) */
  int64_t n, m, k;
} bmm_case;

typedef struct bmm_ud {
  const bmm_case *c;
  int ta, tb;
} bmm_ud;

static int b_batched_matmul(lt_tensor **in, const void *ud, lt_tensor **outs) {
  const bmm_ud *u = ud;
  lt_tensor *a = in[0], *b = in[1];
  if (u->c->heads) {
    a = lt_transpose(a, 1, 2);
    b = lt_transpose(b, 1, 2);
  }
  if (u->ta) a = lt_transpose(a, -1, -2);
  if (u->tb) b = lt_transpose(b, -1, -2);
  outs[0] = lt_matmul(a, b);
  return outs[0] ? 1 : -1;
}

/* The stored shape of one operand: its batch dims, then rows x cols (op(X)
 * transposed when t), with heads the head dim between rows and cols. */
static int bmm_operand(const bmm_case *c, bool is_a, int t, int64_t *shape) {
  int64_t rows = is_a ? (t ? c->k : c->n) : (t ? c->m : c->k);
  int64_t cols = is_a ? (t ? c->n : c->k) : (t ? c->k : c->m);
  int nd = 0;
  if (c->heads) {
    shape[nd++] = c->bs[0];
    shape[nd++] = rows;
    shape[nd++] = c->bs[1];
    shape[nd++] = cols;
    return nd;
  }
  if (!(is_a && c->a_no_batch))
    for (int d = 0; d < c->nbd; d++) shape[nd++] = (is_a ? c->bc_a[d] : c->bc_b[d]) ? 1 : c->bs[d];
  shape[nd++] = rows;
  shape[nd++] = cols;
  return nd;
}

static void test_batched_matmul(void **state) {
  (void)state;
  static const bmm_case cases[] = {
      /* heads: 2 x 3 of 16x16x8 (one thread), 4 x 4 of 64x64x32 (the GPT's) */
      {.heads = true, .nbd = 2, .bs = {2, 3}, .n = 16, .m = 16, .k = 8},
      {.heads = true, .nbd = 2, .bs = {4, 4}, .n = 64, .m = 32, .k = 64},
      {.heads = true, .nbd = 2, .bs = {4, 4}, .n = 64, .m = 64, .k = 32},
      /* a broadcast over dim 1, b over dim 0 */
      {.nbd = 2,
       .bs = {3, 4},
       .bc_a = {false, true},
       .bc_b = {true, false},
       .n = 20,
       .m = 9,
       .k = 12},
      /* b one matrix for every entry (folds only without ta), a one for every entry */
      {.nbd = 1, .bs = {5}, .bc_b = {true}, .n = 17, .m = 33, .k = 24},
      {.nbd = 1, .bs = {6}, .a_no_batch = true, .n = 30, .m = 40, .k = 50},
      /* dense entries: 5 small, 9 big enough to share (ranges of 4 and 5) */
      {.nbd = 1, .bs = {5}, .n = 24, .m = 20, .k = 16},
      {.nbd = 1, .bs = {9}, .n = 64, .m = 48, .k = 40},
      /* 2 big entries: fewer than the threads of a pool of 3 or more (then each
       * entry is cut over the pool) */
      {.nbd = 1, .bs = {2}, .n = 128, .m = 96, .k = 96},
  };
  const lt_dtype dts[3] = {LT_F32, LT_BF16, LT_F64};
  for (int d = 0; d < 3; d++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
      for (int t = 0; t < 4; t++) {
        bmm_ud u = {&cases[c], t & 1, t >> 1};
        int64_t sa[LT_MAX_DIMS], sb[LT_MAX_DIMS];
        int na = bmm_operand(&cases[c], true, u.ta, sa),
            nb = bmm_operand(&cases[c], false, u.tb, sb);
        input in[2];
        g_rng = 555 + (uint64_t)d * 100 + c * 4 + (uint64_t)t;
        input_fill(&in[0], dts[d], sa, na, false);
        input_fill(&in[1], dts[d], sb, nb, false);
        char what[64];
        snprintf(what, sizeof what, "batched matmul %s case %zu t%d", lt_dtype_name(dts[d]), c, t);
        if (dts[d] != LT_F64)
          g_sum_tol.all = tu_f32_sum_tol(cases[c].k, max_abs_f32(&in[0]) * max_abs_f32(&in[1]));
        diff(what, 0, in, 2, b_batched_matmul, &u, false);
        g_sum_tol.all = 0;
        input_free(in, 2);
      }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- convolution and pooling: x [2, 4, 7, 6], w [6, 2, 3, 3] (groups 2), b [6] ---- */

static int b_conv_pool(lt_tensor **in, const void *ud, lt_tensor **outs) {
  int which = *(const int *)ud;
  lt_tensor *x = in[0], *w = in[1], *b = in[2];
  const int64_t s2[2] = {2, 2}, p1[2] = {1, 1}, k3[2] = {3, 3}, one[2] = {1, 1};
  switch (which) {
  case 0: /* conv, bias, relu, then max pooling with ceil_mode */
    outs[0] = lt_relu(lt_conv2d_n(x, w, b, one, 2, p1, 2, NULL, 0, 2));
    outs[1] = lt_max_pool2d_n(outs[0], k3, 2, s2, 2, p1, 2, NULL, 0, true);
    break;
  case 1: /* strided dilated conv, and the transpose of it (w read as [C, O / g, kh, kw]) */
    outs[0] = lt_conv2d_n(x, w, NULL, s2, 2, p1, 2, SHAPE(2, 1), 2, 2);
    outs[1] = lt_conv_transpose2d_n(outs[0], w, NULL, s2, 2, p1, 2, one, 2, SHAPE(2, 1), 2,
                                    2); /* [2, 4, ..] */
    break;
  default: /* the composites */
    outs[0] = lt_avg_pool2d_n(x, k3, 2, s2, 2, p1, 2, true, false, 0);
    outs[1] = lt_adaptive_avg_pool2d_n(x, SHAPE(3, 4), 2);
    break;
  }
  if (!outs[0] || !outs[1]) fail_msg("conv/pool case %d: %s", which, lt_last_error());
  return 2;
}

static void test_conv_pool(void **state) {
  (void)state;
  const lt_dtype dts[2] = {LT_F32, LT_F64};
  for (int d = 0; d < 2; d++)
    for (int which = 0; which < 3; which++)
      for (int sp = 0; sp < 2; sp++) {
        input in[3];
        g_rng = 7 + (uint64_t)d * 10 + (uint64_t)which * 2 + (uint64_t)sp;
        input_fill(&in[0], dts[d], SHAPE(2, 4, 7, 6), 4, sp);
        input_fill(&in[1], dts[d], SHAPE(6, 2, 3, 3), 4, false);
        input_fill(&in[2], dts[d], SHAPE(6), 1, false);
        char what[64];
        snprintf(what, sizeof what, "conv/pool %s case %d specials %d", lt_dtype_name(dts[d]),
                 which, sp);
        /* a convolution's output sums C / g * 3 * 3 products and the bias
         * (with specials, 1e30 and inf: the relative rule) */
        if ((dts[d] == LT_F32 || dts[d] == LT_BF16) && which < 2 && !sp)
          g_sum_tol.all = tu_f32_sum_tol(
              2 * 3 * 3 + 1, fmax(max_abs_f32(&in[0]) * max_abs_f32(&in[1]), max_abs_f32(&in[2])));
        diff(what, 0, in, 3, b_conv_pool, &which, true);
        g_sum_tol.all = 0;
        input_free(in, 3);
      }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- attention: q [2, 3, 5, 4], k [2, 3, 7, 4], v [1, 3, 7, 6], mask [5, 7] ---- */

/* q is scaled down so that scores stay within what f32 sums match ref to. */
static int b_attention(lt_tensor **in, const void *ud, lt_tensor **outs) {
  int which = *(const int *)ud;
  lt_tensor *q = lt_mul(in[0], lt_scalar(CPU0, lt_get_dtype(in[0]), 0.02));
  lt_tensor *k = in[1], *v = in[2], *m = in[3];
  switch (which) {
  case 0: /* causal, and a fused user of the result */
    outs[0] = lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN);
    break;
  case 1: /* an additive mask, an explicit scale */
    outs[0] = lt_scaled_dot_product_attention(q, k, v, m, false, 0.7);
    break;
  default: /* a bool mask (rows may see nothing: NaN on both) */
    outs[0] = lt_scaled_dot_product_attention(q, k, v, lt_gt(m, lt_scalar(CPU0, LT_F32, 2.0)),
                                              false, NAN);
    break;
  }
  if (!outs[0]) fail_msg("attention case %d: %s", which, lt_last_error());
  outs[1] = lt_relu(lt_add(outs[0], outs[0]));
  return 2;
}

/* Attention case 2: a query row whose bool mask (m > 2, m [L, S]) is false
 * everywhere sees nothing, and its output row is NaN (softmax of all -inf,
 * as torch's math path); every other element is finite. */
static bool nan_row_sees_nothing(const input *ins, const int64_t *shape, int nd, int64_t i) {
  int64_t L = shape[nd - 2], Ev = shape[nd - 1], row = (i / Ev) % L, S = ins[3].shape[1];
  for (int64_t j = 0; j < S; j++)
    if (lt__load_f64(ins[3].dt, ins[3].data, row * S + j) > 2.0) return false;
  return true;
}

static void test_attention(void **state) {
  (void)state;
  const lt_dtype dts[2] = {LT_F32, LT_F64};
  for (int d = 0; d < 2; d++)
    for (int which = 0; which < 3; which++) {
      input in[4];
      g_rng = 31 + (uint64_t)d * 10 + (uint64_t)which;
      input_fill(&in[0], dts[d], SHAPE(2, 3, 5, 4), 4, false);
      input_fill(&in[1], dts[d], SHAPE(2, 3, 7, 4), 4, false);
      input_fill(&in[2], dts[d], SHAPE(1, 3, 7, 6), 4, false);
      input_fill(&in[3], dts[d], SHAPE(5, 7), 2, false);
      char what[64];
      snprintf(what, sizeof what, "attention %s case %d", lt_dtype_name(dts[d]), which);
      nan_policy np = {false, NULL, which == 2 ? nan_row_sees_nothing : NULL};
      diff_nan(what, 0, in, 4, b_attention, &which, true, &np);
      input_free(in, 4);
    }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- shape and index ops, fused with elementwise users ---- */

static int b_shapes(lt_tensor **in, const void *ud, lt_tensor **outs) {
  int which = *(const int *)ud;
  lt_tensor *x = in[0]; /* [4, 6, 5] */
  lt_tensor *r = NULL;
  switch (which) {
  case 0:
    r = lt_reshape(lt_permute(x, (int[]){2, 0, 1}, 3), SHAPE(20, 6), 2);
    break;
  case 1:
    r = lt_add(lt_permute(x, (int[]){1, 2, 0}, 3), lt_exp(lt_permute(x, (int[]){1, 2, 0}, 3)));
    break;
  case 2:
    r = lt_mul(
        lt_expand(lt_slice_n(x, SHAPE(0, 0, 0), SHAPE(4, 1, 5), NULL, 3), SHAPE(2, 4, 6, 5), 4), x);
    break;
  case 3:
    r = lt_slice_n(lt_sigmoid(x), SHAPE(1, 0, 1), SHAPE(4, 6, 5), SHAPE(2, 3, 2), 3);
    break;
  case 4:
    r = lt_concat((lt_tensor *[]){x, lt_neg(x), lt_transpose(lt_transpose(x, 0, 1), 0, 1)}, 3, 1);
    break;
  case 5:
    r = lt_pad_n(lt_relu(x), SHAPE(1, 0, 0, 2, 1, 1), 6, 0.25);
    break;
  case 6:
    r = lt_index_select(lt_tanh(x), 1,
                        lt_from_data(CPU0, LT_I64, SHAPE(3), 1, (int64_t[]){5, 0, 5}));
    break;
  case 7: {
    int64_t idx[4 * 6 * 5];
    for (int i = 0; i < 120; i++) idx[i] = (i * 7) % 5;
    r = lt_gather(x, 2, lt_from_data(CPU0, LT_I64, SHAPE(4, 6, 5), 3, idx));
    break;
  }
  case 8:
    r = lt_one_hot(lt_from_data(CPU0, LT_I32, SHAPE(2, 3), 2, (int32_t[]){0, 3, 1, 2, 2, 0}), 4,
                   LT_F32);
    break;
  case 9:
    r = lt_reshape(lt_add(x, lt_scalar(CPU0, LT_F32, 3.0)), SHAPE(6, 20), 2);
    break;
  case 10:
    r = lt_sum(lt_transpose(lt_exp(x), 0, 2), (int[]){1}, 1, false);
    break;
  case 11:
    r = lt_squeeze(lt_unsqueeze(lt_softmax(lt_transpose(x, 1, 2), 1), 0), 0);
    break;
  case 12:
    r = lt_stack((lt_tensor *[]){x, x}, 2, 3);
    break;
  case 13: /* rows of exp(x) as [24, 5], picked by [2, 3] indices with repeats */
    r = lt_mul(
        lt_embedding(lt_from_data(CPU0, LT_I32, SHAPE(2, 3), 2, (int32_t[]){23, 0, 5, 5, 1, 17}),
                     lt_reshape(lt_exp(x), SHAPE(24, 5), 2)),
        lt_scalar(CPU0, LT_F32, 0.5));
    break;
  case 14:   /* batched a under a matrix: entries evenly spaced, one product of all rows */
  case 15:   /* the same of a permuted a (transposed entries) */
  case 16: { /* and of a slice (entries 30 apart, 5 rows of 5: not one product) */
    float w[15];
    for (int i = 0; i < 15; i++) w[i] = 0.25f * (float)(i % 7) - 0.5f;
    lt_tensor *a = which == 14   ? x
                   : which == 15 ? lt_permute(x, (int[]){0, 2, 1}, 3)
                                 : lt_slice_n(x, SHAPE(0, 1, 0), SHAPE(4, 6, 5), NULL, 3);
    int64_t k = lt_dim(a, -1);
    r = lt_matmul(a, lt_from_data(CPU0, LT_F32, SHAPE(k, 15 / k), 2, w));
    break;
  }
  default:
    r = lt_matmul(lt_transpose(x, 1, 2), lt_exp(x));
    break;
  }
  outs[0] = r;
  return r ? 1 : -1;
}

/* The order bound of each element of shape case which >= 14 (a matmul of
 * x [4, 6, 5]; see b_shapes), from its own terms. */
static void shape_matmul_tol(int which, const float *x, double *tol) {
  float w[15];
  for (int i = 0; i < 15; i++) w[i] = 0.25f * (float)(i % 7) - 0.5f;
  /* a [4, M, K] as strides into x, and b: w [K, N] or exp(x) [4, 6, 5] */
  int64_t m = which == 15 ? 5 : which == 16 ? 5 : which == 17 ? 5 : 6;
  int64_t k = which == 15 || which == 17 ? 6 : 5, nn = which == 17 ? 5 : 15 / k;
  int64_t sm = which == 15 || which == 17 ? 1 : 5, sk = which == 15 || which == 17 ? 5 : 1;
  int64_t off = which == 16 ? 5 : 0;
  for (int64_t b = 0; b < 4; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < nn; j++) {
        double mx = 0;
        for (int64_t p = 0; p < k; p++) {
          double a = x[b * 30 + off + i * sm + p * sk];
          double bv = which == 17 ? exp(x[b * 30 + p * 5 + j]) : w[p * nn + j];
          mx = fmax(mx, fabs(a * bv));
        }
        tol[(b * m + i) * nn + j] = tu_f32_sum_tol(k, mx);
      }
}

static void test_shape_index(void **state) {
  (void)state;
  for (int which = 0; which < 18; which++) {
    input in;
    g_rng = 555 + (uint64_t)which;
    input_fill(&in, LT_F32, SHAPE(4, 6, 5), 3, false);
    char what[32];
    snprintf(what, sizeof what, "shape case %d", which);
    double tol[4 * 6 * 5];
    if (which >= 14) {
      shape_matmul_tol(which, in.data, tol);
      g_sum_tol.each = tol;
    }
    diff(what, 0, &in, 1, b_shapes, &which, false);
    g_sum_tol.each = NULL;
    input_free(&in, 1);
  }
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- random DAGs ---- */

typedef struct dag_spec {
  uint64_t seed;
  int nin;
} dag_spec;

static lt_tensor *dag_unary(lt_tensor *x, int k) {
  switch (k) {
  case 0:
    return lt_neg(x);
  case 1:
    return lt_abs(x);
  case 2:
    return lt_relu(x);
  case 3:
    return lt_tanh(x);
  case 4:
    return lt_sigmoid(x);
  case 5:
    return lt_sin(x);
  case 6:
    return lt_sqrt(lt_abs(x));
  case 7:
    return lt_exp(lt_neg(lt_abs(x)));
  case 8:
    return lt_log(lt_add(lt_abs(x), lt_scalar(CPU0, lt_get_dtype(x), 1.0)));
  case 9:
    return lt_erf(x);
  case 10:
    return lt_gelu(x);
  case 11:
    return lt_mul(x, lt_scalar(CPU0, lt_get_dtype(x), 0.75));
  case 12:
    return lt_gelu_tanh(x);
  default:
    return lt_cos(x);
  }
}

static lt_tensor *dag_binary(lt_tensor *a, lt_tensor *b, int k) {
  switch (k) {
  case 0:
    return lt_add(a, b);
  case 1:
    return lt_sub(a, b);
  case 2:
    return lt_mul(a, b);
  case 3:
    return lt_maximum(a, b);
  case 4:
    return lt_minimum(a, b);
  case 5:
    return lt_div(a, lt_add(lt_abs(b), lt_scalar(CPU0, lt_get_dtype(b), 1.0)));
  default:
    return lt_where(lt_gt(a, b), a, lt_neg(b));
  }
}

/* Every tensor of a DAG broadcasts to its base shape: ops keep that true. */
static int b_dag(lt_tensor **in, const void *ud, lt_tensor **outs) {
  const dag_spec *s = ud;
  uint64_t saved = g_rng;
  g_rng = s->seed * 2654435761u + 1;
  lt_tensor *v[64];
  int n = s->nin;
  for (int i = 0; i < n; i++) v[i] = in[i];
  int nops = 4 + irand(30);
  for (int k = 0; k < nops && n < 64; k++) {
    lt_tensor *a = v[irand(n)], *b = v[irand(n)], *r;
    int nd = lt_ndim(a), kind = irand(10);
    if (kind < 4) {
      r = dag_unary(a, irand(14));
    } else if (kind < 8) {
      r = dag_binary(a, b, irand(7));
    } else if (kind == 8 && nd > 0) {
      int ax = irand(nd);
      switch (irand(5)) {
      case 0:
        r = lt_sum(a, &ax, 1, true);
        break;
      case 1:
        r = lt_max(a, &ax, 1, true);
        break;
      case 2:
        r = lt_mean(a, &ax, 1, true);
        break;
      case 3:
        r = lt_softmax(a, ax);
        break;
      default:
        r = lt_logsumexp(a, &ax, 1, true);
        break;
      }
    } else if (nd >= 2 && irand(2)) { /* a view: transpose twice, or permute then back */
      r = lt_transpose(lt_exp(lt_neg(lt_abs(lt_transpose(a, 0, nd - 1)))), 0, nd - 1);
    } else {
      r = lt_cast(lt_cast(a, lt_get_dtype(a) == LT_F32 ? LT_F64 : LT_F32), lt_get_dtype(a));
    }
    if (!r) {
      g_rng = saved;
      return -1;
    }
    v[n++] = r;
  }
  int nout = 1 + irand(3);
  for (int o = 0; o < nout; o++) outs[o] = v[n - 1 - irand(n - s->nin > 0 ? n - s->nin : 1)];
  outs[0] = v[n - 1];
  g_rng = saved;
  return nout;
}

static void dag_case(uint64_t seed) {
  g_rng = seed * 0x9E3779B97F4A7C15ull + 12345;
  int rank = 1 + irand(4);
  int64_t base[4];
  for (int d = 0; d < rank; d++) base[d] = 1 + irand(irand(4) == 0 ? 40 : 7);
  lt_dtype dt = irand(4) == 0 ? LT_F64 : LT_F32;
  dag_spec s = {seed, 1 + irand(3)};
  input in[4];
  for (int i = 0; i < s.nin; i++) {
    int64_t sh[4];
    int nd = rank - (irand(3) == 0 ? irand(rank) : 0);
    for (int d = 0; d < nd; d++) sh[d] = irand(4) == 0 ? 1 : base[rank - nd + d];
    input_fill(&in[i], dt, sh, nd, false);
  }
  char what[48];
  snprintf(what, sizeof what, "random DAG (LT_DIFF_SEED=%llu)", (unsigned long long)seed);
  diff(what, seed, in, s.nin, b_dag, &s, true);
  input_free(in, s.nin);
}

static void test_random_dags(void **state) {
  (void)state;
  const char *one = getenv("LT_DIFF_SEED");
  if (one) {
    dag_case(strtoull(one, NULL, 10));
  } else {
    for (uint64_t seed = 1; seed <= 400; seed++) dag_case(seed);
  }
  printf("random DAGs: %d cases compared so far, %d failures\n", g_cases, g_failures);
  assert_int_equal(g_failures - g_failures_before, 0);
}

/* ---- scans and sorts (the executor's fallback on cpu), fed by views and fused ops ---- */

static int b_scan_sort(lt_tensor **in, const void *ud, lt_tensor **outs) {
  int which = *(const int *)ud;
  lt_tensor *x = in[0]; /* [4, 6, 5] */
  int rc = LT_OK;
  switch (which) {
  case 0:
    outs[0] = lt_cumsum(lt_tanh(x), 1);
    break;
  case 1:
    outs[0] = lt_add(lt_cumsum(lt_transpose(x, 0, 2), 0), lt_scalar(CPU0, LT_F32, 1.5));
    break;
  case 2:
    outs[0] = lt_cumsum(lt_cast(lt_mul(x, lt_scalar(CPU0, LT_F32, 4)), LT_I32), -1);
    break;
  case 3:
    rc = lt_sort(lt_mul(x, x), -1, true, &outs[0], &outs[1]);
    break;
  case 4:
    rc = lt_sort(lt_transpose(x, 0, 1), 0, false, &outs[0], &outs[1]);
    break;
  case 5:
    rc = lt_topk(x, 3, 1, true, &outs[0], &outs[1]);
    if (rc == LT_OK) outs[0] = lt_exp(outs[0]);
    break;
  case 6:
    rc = lt_topk(lt_slice_n(x, SHAPE(1, 0, 1), SHAPE(4, 6, 5), SHAPE(1, 2, 2), 3), 2, 2, false,
                 &outs[0], &outs[1]);
    break;
  default:
    outs[0] = lt_argsort(lt_gt(x, lt_scalar(CPU0, LT_F32, 0)), 1, false);
    break;
  }
  /* a case that cannot be built would compare equal on both backends */
  if (rc != LT_OK || !outs[0]) fail_msg("scan/sort case %d: %s", which, lt_last_error());
  return which >= 3 && which < 7 ? 2 : 1;
}

static void test_scan_sort(void **state) {
  (void)state;
  for (int which = 0; which < 8; which++) {
    input in;
    g_rng = 777 + (uint64_t)which;
    input_fill(&in, LT_F32, SHAPE(4, 6, 5), 3, true);
    char what[32];
    snprintf(what, sizeof what, "scan/sort case %d", which);
    diff(what, 0, &in, 1, b_scan_sort, &which, false);
    input_free(&in, 1);
  }
  assert_int_equal(g_failures - g_failures_before, 0);
}

static int setup(void **state) {
  (void)state;
  g_failures_before = g_failures;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_unary, setup),
      cmocka_unit_test_setup(test_binary, setup),
      cmocka_unit_test_setup(test_where_cast_clamp, setup),
      cmocka_unit_test_setup(test_mask_ops, setup),
      cmocka_unit_test_setup(test_reductions, setup),
      cmocka_unit_test_setup(test_matmul, setup),
      cmocka_unit_test_setup(test_batched_matmul, setup),
      cmocka_unit_test_setup(test_conv_pool, setup),
      cmocka_unit_test_setup(test_attention, setup),
      cmocka_unit_test_setup(test_shape_index, setup),
      cmocka_unit_test_setup(test_random_dags, setup),
      cmocka_unit_test_setup(test_scan_sort, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
