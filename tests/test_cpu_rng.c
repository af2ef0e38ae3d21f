/* Uniform draws fused into the cpu backend's loops (src/backend/cpu/cpu_codegen.c):
 * RNG_UNIFORM is evaluated per element from its flat index in its own shape
 * (Philox4x32-10, core/lt_philox.h), inside whatever loop reads it. Every case
 * here is compared bit for bit with the ref backend, and the plain draws also
 * with lt_philox_uniform_f32 / f64 under the seed the device chain gives:
 * shapes of odd sizes, 0-d and empty ones; the draws scaled as
 * lt_rand_uniform does; broadcast and permuted uses; a draw read by a
 * reduction (its operand fused, reduced dims inner or outer) and by an
 * elementwise op; several outputs of one loop reading one draw; eager mode.
 * Large cases run on the pool's threads (the default thread count). */
#include "test_util.h"

#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_philox.h"
#include "../src/exec/rng.h"

static int setup(void **state) {
  lt_wait_device_ops(CPU0);
  lt_cache_clear();
  lt_set_eager(false);
  return tu_setup(state);
}
static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt_set_eager(false);
  lt__backend_force(NULL);
  return rc;
}
#define RTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

enum { kMaxOut = 4 };

typedef struct out {
  int n;
  lt_dtype dt[kMaxOut];
  int64_t numel[kMaxOut];
  void *data[kMaxOut];
} out;

/* Builds outputs from inputs (made on the current backend); returns how many. */
typedef int (*build_fn)(lt_tensor **res, const void *ud);

static uint64_t g_seed = 12345;

/* f on be, from base seed g_seed: the outputs' bytes into o. */
static void run_on(const lt_backend *be, build_fn f, const void *ud, out *o) {
  memset(o, 0, sizeof *o);
  lt__backend_force(be);
  lt_wait_device_ops(CPU0);
  lt_cache_clear();
  assert_int_equal(lt_set_seed(CPU0, g_seed), LT_OK);
  lt_scope_begin();
  lt_tensor *res[kMaxOut];
  o->n = f(res, ud);
  for (int i = 0; i < o->n; i++)
    if (!res[i]) fail_msg("build: %s", lt_last_error());
  assert_int_equal(lt_sync(res, o->n, true), LT_OK);
  for (int i = 0; i < o->n; i++) {
    o->dt[i] = lt_get_dtype(res[i]);
    o->numel[i] = lt_numel(res[i]);
    size_t nb = (size_t)o->numel[i] * lt_dtype_size(o->dt[i]);
    o->data[i] = malloc(nb + 8);
    assert_int_equal(lt_to_data(res[i], o->data[i], nb), LT_OK);
  }
  lt_scope_end();
  lt_wait_device_ops(CPU0);
  lt__backend_force(NULL);
}

static void out_free(out *o) {
  for (int i = 0; i < o->n; i++) free(o->data[i]);
}

/* f on cpu and on ref: the same bytes; output 0 within tol0 (relative) when
 * it is a float sum (the cpu backend sums in a different order) or a
 * softmax. */
static void check_tol(const char *what, build_fn f, const void *ud, double tol0) {
  out c, r;
  run_on(&lt__cpu_backend, f, ud, &c);
  run_on(&lt__ref_backend, f, ud, &r);
  assert_int_equal(c.n, r.n);
  for (int i = 0; i < c.n; i++) {
    assert_int_equal(c.dt[i], r.dt[i]);
    assert_int_equal(c.numel[i], r.numel[i]);
    size_t es = lt_dtype_size(c.dt[i]);
    for (int64_t j = 0; j < c.numel[i]; j++)
      if (memcmp((char *)c.data[i] + j * es, (char *)r.data[i] + j * es, es) != 0) {
        double a = c.dt[i] == LT_F32 ? ((float *)c.data[i])[j] : ((double *)c.data[i])[j];
        double b = r.dt[i] == LT_F32 ? ((float *)r.data[i])[j] : ((double *)r.data[i])[j];
        if (i == 0 && fabs(a - b) <= tol0 * fabs(b)) continue;
        fail_msg("%s: output %d element %lld: cpu %.17g, ref %.17g", what, i, (long long)j, a, b);
      }
  }
  out_free(&c);
  out_free(&r);
}

static void check(const char *what, build_fn f, const void *ud) { check_tol(what, f, ud, 0); }

/* ---- plain draws ---------------------------------------------------------------------- */

typedef struct shape_case {
  int ndim;
  int64_t shape[4];
} shape_case;

static const shape_case kShapes[] = {
    {0, {0}},       {1, {1}},        {1, {13}}, {1, {1001}},    {2, {5, 7}},    {3, {3, 5, 7}},
    {3, {2, 1, 9}}, {2, {300, 517}}, {1, {0}},  {3, {4, 0, 3}}, {2, {1, 4099}}, {4, {2, 3, 1, 5}}};

typedef struct plain {
  lt_dtype dt;
  const shape_case *s;
  double lo, hi;
} plain;

static int build_plain(lt_tensor **res, const void *ud) {
  const plain *p = ud;
  res[0] = lt_rand_uniform(CPU0, p->dt, p->s->shape, p->s->ndim, p->lo, p->hi);
  return 1;
}

/* The draws of the first random op after lt_set_seed(g_seed). */
static void check_philox(const plain *p) {
  out c;
  run_on(&lt__cpu_backend, build_plain, p, &c);
  uint64_t seed = (uint64_t)LT_RNG_SEED_ADD + (uint64_t)LT_RNG_SEED_MUL * g_seed;
  for (int64_t k = 0; k < c.numel[0]; k++) {
    if (p->dt == LT_F32) {
      float want = lt_philox_uniform_f32(seed, (uint64_t)k), got = ((float *)c.data[0])[k];
      if (memcmp(&want, &got, sizeof want) != 0)
        fail_msg("f32 element %lld: %.9g, want %.9g", (long long)k, got, want);
    } else {
      double want = lt_philox_uniform_f64(seed, (uint64_t)k), got = ((double *)c.data[0])[k];
      if (memcmp(&want, &got, sizeof want) != 0)
        fail_msg("f64 element %lld: %.17g, want %.17g", (long long)k, got, want);
    }
  }
  out_free(&c);
}

static void test_plain_draws(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kShapes / sizeof *kShapes; i++)
    for (int d = 0; d < 2; d++) {
      plain p = {d ? LT_F64 : LT_F32, &kShapes[i], 0.0, 1.0};
      check_philox(&p);
      check("plain", build_plain, &p);
    }
}

/* lo + (hi - lo) * U, then MINIMUM: one loop writing the values. */
static void test_scaled_draws(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kShapes / sizeof *kShapes; i++)
    for (int d = 0; d < 2; d++) {
      plain p = {d ? LT_F64 : LT_F32, &kShapes[i], -0.0357, 0.0357};
      check("scaled", build_plain, &p);
    }
}

/* An MLP's initialisation: several scaled draws in one graph. */
static int build_init(lt_tensor **res, const void *ud) {
  (void)ud;
  res[0] = lt_rand_uniform(CPU0, LT_F32, SHAPE(784, 67), 2, -0.0357, 0.0357);
  res[1] = lt_rand_uniform(CPU0, LT_F32, SHAPE(67), 1, -0.0357, 0.0357);
  res[2] = lt_rand_uniform(CPU0, LT_F64, SHAPE(67, 10), 2, -0.1, 0.2);
  res[3] = lt_rand_uniform(CPU0, LT_F32, SHAPE(10), 1, -0.1, 0.1);
  return 4;
}

static void test_init_graph(void **state) {
  (void)state;
  check("init", build_init, NULL);
}

/* ---- uses of a draw --------------------------------------------------------------------- */

static lt_tensor *ramp(lt_dtype dt, const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  double *v = malloc((size_t)n * sizeof *v + 8);
  for (int64_t i = 0; i < n; i++) v[i] = sin(0.37 * (double)i) * 1.5;
  lt_tensor *t = lt_cast(lt_from_data(CPU0, LT_F64, shape, ndim, v), dt);
  free(v);
  return t;
}

typedef struct use {
  lt_dtype dt;
  int kind;
} use;

enum {
  kBroadcastRow,  /* x[m, n] + U[n] */
  kBroadcastBoth, /* U[m, 1] * U[1, n] */
  kExpandSize1,   /* x[m, 1, n] + U[m, 1, n] (size-1 dims inside the draw) */
  kPermuted,      /* permute(U[m, n]) + x[n, m] */
  kPermuted3,     /* permute(U[a, b, c], (2, 0, 1)) * 3 - x */
  kSumRows,       /* sum(U * 2, axis 1): reduced dim inner */
  kSumCols,       /* sum(U + x, axis 0): reduced dim outer (blocked column sums) */
  kSum3,          /* sum(U[a, b, c], axes (0, 2)) */
  kSoftmax0,      /* softmax(U, axis 0) */
  kMaxAll,        /* max(U) */
  kRedAndElem,    /* sum(U, axis 1) and U * x: U read by a reduction and an elementwise op */
  kTwoOutputs,    /* U * 2 and U + x: two outputs of one loop */
  kBernoulli,     /* bernoulli(p) */
  kDropout,       /* dropout(x, 0.3) */
  kNumUses
};

static int build_use(lt_tensor **res, const void *ud) {
  const use *u = ud;
  lt_dtype dt = u->dt;
  enum { M = 37, N = 131 };
  switch (u->kind) {
  case kBroadcastRow:
    res[0] = lt_add(ramp(dt, SHAPE(M, N), 2), lt_rand_uniform(CPU0, dt, SHAPE(N), 1, 0, 1));
    return 1;
  case kBroadcastBoth:
    res[0] = lt_mul(lt_rand_uniform(CPU0, dt, SHAPE(M, 1), 2, -1, 1),
                    lt_rand_uniform(CPU0, dt, SHAPE(1, N), 2, 0, 1));
    return 1;
  case kExpandSize1:
    res[0] =
        lt_add(ramp(dt, SHAPE(M, 1, N), 3), lt_rand_uniform(CPU0, dt, SHAPE(M, 1, N), 3, 0, 1));
    return 1;
  case kPermuted:
    res[0] = lt_add(lt_permute(lt_rand_uniform(CPU0, dt, SHAPE(M, N), 2, 0, 1), (int[]){1, 0}, 2),
                    ramp(dt, SHAPE(N, M), 2));
    return 1;
  case kPermuted3: {
    lt_tensor *p =
        lt_permute(lt_rand_uniform(CPU0, dt, SHAPE(5, 6, 7), 3, 0, 1), (int[]){2, 0, 1}, 3);
    res[0] = lt_sub(lt_mul(p, lt_scalar(CPU0, dt, 3.0)), ramp(dt, SHAPE(7, 5, 6), 3));
    return 1;
  }
  case kSumRows:
    res[0] = lt_sum(lt_mul(lt_rand_uniform(CPU0, dt, SHAPE(M, N), 2, 0, 1), lt_scalar(CPU0, dt, 2)),
                    (int[]){1}, 1, false);
    return 1;
  case kSumCols:
    res[0] = lt_sum(
        lt_add(lt_rand_uniform(CPU0, dt, SHAPE(300, 70), 2, 0, 1), ramp(dt, SHAPE(300, 70), 2)),
        (int[]){0}, 1, false);
    return 1;
  case kSum3:
    res[0] = lt_sum(lt_rand_uniform(CPU0, dt, SHAPE(5, 6, 7), 3, 0, 1), (int[]){0, 2}, 2, true);
    return 1;
  case kSoftmax0:
    res[0] = lt_softmax(lt_rand_uniform(CPU0, dt, SHAPE(M, 9), 2, -3, 3), 0);
    return 1;
  case kMaxAll:
    res[0] = lt_max(lt_rand_uniform(CPU0, dt, SHAPE(M, N), 2, 0, 1), NULL, 0, false);
    return 1;
  case kRedAndElem: {
    lt_tensor *r = lt_rand_uniform(CPU0, dt, SHAPE(M, N), 2, 0, 1);
    res[0] = lt_sum(r, (int[]){1}, 1, false);
    res[1] = lt_mul(r, ramp(dt, SHAPE(M, N), 2));
    return 2;
  }
  case kTwoOutputs: {
    lt_tensor *r = lt_rand_uniform(CPU0, dt, SHAPE(M, N), 2, 0, 1);
    res[0] = lt_mul(r, lt_scalar(CPU0, dt, 2));
    res[1] = lt_add(r, ramp(dt, SHAPE(M, N), 2));
    return 2;
  }
  case kBernoulli:
    res[0] = lt_bernoulli(lt_sigmoid(ramp(dt, SHAPE(M, N), 2)));
    return 1;
  default:
    res[0] = lt_dropout(ramp(dt, SHAPE(M, N), 2), 0.3, true);
    return 1;
  }
}

static void test_uses(void **state) {
  (void)state;
  for (int kind = 0; kind < kNumUses; kind++)
    for (int d = 0; d < 2; d++) {
      use u = {d ? LT_F64 : LT_F32, kind};
      char what[64];
      snprintf(what, sizeof what, "use %d (%s)", kind, d ? "f64" : "f32");
      bool sum = kind == kSumRows || kind == kSumCols || kind == kSum3 || kind == kRedAndElem;
      double tol = sum && d ? 1e-13 : 0;
      if (kind == kSoftmax0) tol = d ? 1e-13 : 1e-5; /* f32 exp: cpu's polynomial */
      check_tol(what, build_use, &u, tol);
    }
}

/* Eager mode: each op its own graph, the seed a fresh 0-d leaf. */
static void test_eager(void **state) {
  (void)state;
  lt_set_eager(true);
  for (size_t i = 0; i < sizeof kShapes / sizeof *kShapes; i++) {
    plain p = {LT_F32, &kShapes[i], -2.0, 3.0};
    check("eager", build_plain, &p);
  }
  use u = {LT_F64, kRedAndElem};
  check_tol("eager use", build_use, &u, 1e-13);
  u.kind = kSumCols;
  check_tol("eager use", build_use, &u, 1e-13);
  lt_set_eager(false);
}

/* Steps: the seed leaf changes, the compiled graph is reused, the draws follow. */
static void test_steps(void **state) {
  (void)state;
  for (int s = 0; s < 3; s++) {
    g_seed = 777 + (uint64_t)s * 1000003;
    use u = {LT_F32, kTwoOutputs};
    check("step", build_use, &u);
  }
  g_seed = 12345;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      RTEST(test_plain_draws), RTEST(test_scaled_draws), RTEST(test_init_graph),
      RTEST(test_uses),        RTEST(test_eager),        RTEST(test_steps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
