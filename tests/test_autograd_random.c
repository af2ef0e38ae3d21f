/* Randomized gradient checks: random graphs over several leaves of ONE shape
 * (f64), drawn from the unary, binary, reduction, matmul, reshape and
 * broadcast families, differentiated by lt_backward and compared with central
 * differences (tg_check), on the ref and the cpu backend.
 *
 * Same-shaped leaves hash alike (node hashes are data-free), so the gradient
 * nodes of a graph often have equal hashes, e.g. g*b and g*a for a*b: this is
 * where anything that takes a hash for a node's identity (a graph key that
 * misses which leaf a node reads, a memo keyed by hash) gives wrong values.
 * tg_check reads each gradient by its own sync, so two such graphs meet in
 * the compilation cache.
 *
 * A failing case prints its seed, backend and graph; rerun one seed with
 * LT_AG_SEED=<seed>. */
#include "test_grad_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

enum { MAX_LEAVES = 5, MAX_STEPS = 14, MAX_VALUES = MAX_LEAVES + MAX_STEPS };

typedef enum family {
  F_UNARY,
  F_BINARY,
  F_REDUCE,
  F_MATMUL,
  F_RESHAPE,
  F_BROADCAST,
  F_COUNT
} family;

static const int kKinds[F_COUNT] = {8, 6, 8, 2, 2, 2};
static const char kFam[F_COUNT] = {'u', 'b', 'r', 'm', 's', 'e'};

/* One op: family and kind, operands as indices into the value list (leaves
 * first, then each step's result), an axis for reductions. */
typedef struct step {
  int fam, kind, x, y, z, axis;
} step;

/* Every value has the leaves' shape [rows, cols], so any value may meet any
 * other; the output is the sum of the values nothing else reads. */
typedef struct rgraph {
  int nleaves, nsteps;
  int64_t rows, cols;
  step steps[MAX_STEPS];
  bool sink[MAX_VALUES];
  double leaf[MAX_LEAVES][16];
  char text[512];
} rgraph;

static uint64_t g_rng;
static uint64_t rnd(void) { return tu_xorshift(&g_rng); }
static int irand(int n) { return (int)(rnd() % (uint64_t)n); }
static double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static lt_tensor *f64(double v) { return lt_scalar(CPU0, LT_F64, v); }

/* x * x + 1: a product of one value with itself, positive for sqrt and log. */
static lt_tensor *sq1(lt_tensor *x) { return lt_add(lt_mul(x, x), f64(1)); }

static lt_tensor *unary(int kind, lt_tensor *x) {
  switch (kind) {
  case 0:
    return lt_tanh(x);
  case 1:
    return lt_sigmoid(x);
  case 2:
    return lt_exp(lt_tanh(x));
  case 3:
    return lt_sqrt(sq1(x));
  case 4:
    return lt_log(sq1(x));
  case 5:
    return lt_sin(x);
  case 6:
    return lt_neg(x);
  default:
    return lt_gelu(x);
  }
}

static lt_tensor *binary(int kind, lt_tensor *x, lt_tensor *y) {
  switch (kind) {
  case 0:
    return lt_add(x, y);
  case 1:
    return lt_sub(x, y);
  case 2:
    return lt_mul(x, y);
  case 3:
    return lt_div(x, sq1(y));
  case 4:
    return lt_maximum(x, y);
  default:
    return lt_minimum(x, y);
  }
}

/* A reduction along one axis, kept, then broadcast against y (or a softmax,
 * which keeps the shape). */
static lt_tensor *reduce(int kind, int axis, lt_tensor *x, lt_tensor *y) {
  const int ax[1] = {axis};
  switch (kind) {
  case 0:
    return lt_mul(lt_sum(x, ax, 1, true), y);
  case 1:
    return lt_add(lt_mean(x, ax, 1, true), y);
  case 2:
    return lt_sub(lt_max(x, ax, 1, true), y);
  case 3:
    return lt_add(lt_min(x, ax, 1, true), y);
  case 4:
    return lt_mul(lt_logsumexp(x, ax, 1, true), y);
  case 5:
    return lt_mul(lt_prod(lt_tanh(x), ax, 1, true), y);
  case 6:
    return lt_softmax(x, axis);
  default:
    return lt_log_softmax(x, axis);
  }
}

/* [r, c] x [c, r] x [r, c], or [r, c] x ([c, r] x [r, c]). */
static lt_tensor *matmul(int kind, lt_tensor *x, lt_tensor *y, lt_tensor *z) {
  lt_tensor *yt = lt_transpose(y, 0, 1);
  if (kind == 0) return lt_matmul(lt_matmul(x, yt), z);
  return lt_matmul(x, lt_matmul(yt, z));
}

/* Element shuffles through other shapes, back to [r, c]. */
static lt_tensor *reshape(const rgraph *g, int kind, lt_tensor *x, lt_tensor *y) {
  int64_t r = g->rows, c = g->cols, flat[1] = {r * c}, back[2] = {r, c};
  if (kind == 0) return lt_transpose(lt_reshape(x, (int64_t[]){c, r}, 2), 0, 1);
  return lt_reshape(lt_mul(lt_reshape(x, flat, 1), lt_reshape(y, flat, 1)), back, 2);
}

/* One row (or column) of x broadcast over [r, c] by expand, times y. */
static lt_tensor *broadcast(const rgraph *g, int kind, int pick, lt_tensor *x, lt_tensor *y) {
  int64_t shape[2] = {g->rows, g->cols};
  int64_t starts[2] = {0, 0}, stops[2] = {g->rows, g->cols};
  int axis = kind; /* 0: a row, 1: a column */
  starts[axis] = pick % shape[axis];
  stops[axis] = starts[axis] + 1;
  return lt_mul(lt_expand(lt_slice_n(x, starts, stops, NULL, lt_ndim(x)), shape, 2), y);
}

static lt_tensor *apply_step(const rgraph *g, const step *s, lt_tensor **v) {
  lt_tensor *x = v[s->x], *y = v[s->y], *z = v[s->z];
  switch (s->fam) {
  case F_UNARY:
    return unary(s->kind, x);
  case F_BINARY:
    return binary(s->kind, x, y);
  case F_REDUCE:
    return reduce(s->kind, s->axis, x, y);
  case F_MATMUL:
    return matmul(s->kind, x, y, z);
  case F_RESHAPE:
    return reshape(g, s->kind, x, y);
  default:
    return broadcast(g, s->kind, s->axis, x, y);
  }
}

/* tg_fn: the graph over leaves in[0 .. nleaves-1]. */
static lt_tensor *build(lt_tensor *const *in, void *ud) {
  const rgraph *g = ud;
  lt_tensor *v[MAX_VALUES];
  for (int i = 0; i < g->nleaves; i++) v[i] = in[i];
  for (int k = 0; k < g->nsteps; k++) {
    v[g->nleaves + k] = apply_step(g, &g->steps[k], v);
    if (!v[g->nleaves + k]) fail_msg("%s: step %d: %s", g->text, k, lt_last_error());
  }
  lt_tensor *out = NULL;
  for (int i = 0; i < g->nleaves + g->nsteps; i++)
    if (g->sink[i]) out = out ? lt_add(out, v[i]) : v[i];
  return out;
}

/* Operands favour recent values, so graphs are deep; a leaf is read again
 * now and then. */
static int pick_operand(const rgraph *g, int nvalues) {
  if (irand(6) == 0 || nvalues == g->nleaves) return irand(g->nleaves);
  int back = irand(nvalues - g->nleaves < 4 ? nvalues - g->nleaves : 4);
  return nvalues - 1 - back;
}

/* The graph opens with binary ops on pairs of distinct leaves (a*b, a-b,
 * max(a, b), ...), whose leaves are often read nowhere else, each followed by
 * an op on its result (often a non-linear one, so the result's gradient
 * reads a and b): the leaves' gradient graphs are then mirror images with
 * equal hashes (g*b and g*a). A leaf without a pair is read by the first
 * random op. */
static void draw(rgraph *g) {
  memset(g, 0, sizeof *g);
  g->nleaves = 2 + irand(MAX_LEAVES - 1);
  g->nsteps = 6 + irand(MAX_STEPS - 5);
  g->rows = 1 + irand(3);
  g->cols = 1 + irand(3);
  int n = g->nleaves, npairs = g->nleaves / 2;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < g->rows * g->cols; j++) g->leaf[i][j] = urand() * 3 - 1.5;
  for (int k = 0; k < g->nsteps; k++) {
    step *s = &g->steps[k];
    bool pair = k < npairs, follow = !pair && k < 2 * npairs;
    s->fam = pair ? F_BINARY : follow && irand(2) ? F_UNARY : irand(F_COUNT);
    s->kind = pair && irand(2) ? 2 /* mul: the mirror-image gradients */ : irand(kKinds[s->fam]);
    s->x = pair                                ? 2 * k
           : follow                            ? g->nleaves + k - npairs
           : k == 2 * npairs && g->nleaves % 2 ? g->nleaves - 1
                                               : pick_operand(g, n);
    s->y = pair ? 2 * k + 1 : pick_operand(g, n);
    s->z = pick_operand(g, n);
    s->axis = irand(2) + (s->fam == F_BROADCAST ? 2 * irand(2) : 0);
    n++;
  }
  for (int i = 0; i < n; i++) g->sink[i] = true;
  for (int k = 0; k < g->nsteps; k++) {
    const step *s = &g->steps[k];
    g->sink[s->x] = false;
    if (s->fam != F_UNARY) g->sink[s->y] = false;
    if (s->fam == F_MATMUL) g->sink[s->z] = false;
  }
  for (int i = 0; i < g->nleaves; i++) g->sink[i] = false; /* an unread leaf: zero gradient */
  g->sink[n - 1] = true;
}

static void describe(rgraph *g, unsigned seed, const char *backend) {
  int k = snprintf(g->text, sizeof g->text, "seed %u on %s: %d leaves [%lld, %lld];", seed, backend,
                   g->nleaves, (long long)g->rows, (long long)g->cols);
  for (int i = 0; i < g->nsteps && k > 0 && k < (int)sizeof g->text; i++) {
    const step *s = &g->steps[i];
    k += snprintf(g->text + k, sizeof g->text - (size_t)k, " v%d=%c%d(v%d,v%d,v%d;%d)",
                  g->nleaves + i, kFam[s->fam], s->kind, s->x, s->y, s->z, s->axis);
  }
}

/* Whether every value of the graph is finite and small: finite differences
 * of large values (products of products) lose the digits the check needs. */
static bool tame(rgraph *g) {
  lt_scope_begin();
  lt_tensor *v[MAX_VALUES];
  for (int i = 0; i < g->nleaves; i++)
    v[i] = lt_from_data(CPU0, LT_F64, (int64_t[]){g->rows, g->cols}, 2, g->leaf[i]);
  for (int k = 0; k < g->nsteps; k++)
    if (!(v[g->nleaves + k] = apply_step(g, &g->steps[k], v)))
      fail_msg("%s: step %d: %s", g->text, k, lt_last_error());
  if (lt_sync(v + g->nleaves, g->nsteps, true) != LT_OK)
    fail_msg("%s: %s", g->text, lt_last_error());
  bool ok = true;
  for (int k = 0; k < g->nsteps && ok; k++) {
    double d[16];
    tu_read(v[g->nleaves + k], d, 16);
    for (int64_t j = 0; j < g->rows * g->cols; j++) ok = ok && isfinite(d[j]) && fabs(d[j]) < 20;
  }
  lt_scope_end();
  return ok;
}

static void check_seed(unsigned seed, const lt_backend *be) {
  g_rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0x2545F4914F6CDD1Dull);
  rgraph g;
  lt__backend_force(be);
  do { /* redrawn from the same stream, so a seed names one graph */
    draw(&g);
    describe(&g, seed, be->name);
  } while (!tame(&g));
  int64_t shape[2] = {g.rows, g.cols};
  tg_input ins[MAX_LEAVES];
  for (int i = 0; i < g.nleaves; i++) ins[i] = (tg_input){shape, 2, g.leaf[i], true, LT_F64};
  tg_check(g.text, build, &g, ins, g.nleaves, 1e-5);
  lt__backend_force(NULL);
}

static void run_seeds(const lt_backend *be) {
  const char *one = getenv("LT_AG_SEED");
  if (one) {
    check_seed((unsigned)strtoul(one, NULL, 10), be);
    return;
  }
  for (unsigned seed = 1; seed <= 24; seed++) check_seed(seed, be);
}

static void test_random_graphs_ref(void **state) {
  (void)state;
  run_seeds(&lt__ref_backend);
}

static void test_random_graphs_cpu(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip(); /* valgrind's run: see tu_cpu_allowed */
  run_seeds(&lt__cpu_backend);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_random_graphs_ref),
      TU_TEST(test_random_graphs_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
