/* Sharding (lazytensor_dist.h, docs/SCALE_OUT.md "Sharding"): a world of 2
 * on cpu, every replica running the same program. Each propagation case is
 * checked against plain C loops over the global values (read through
 * lt_unshard) and the layout it must give; reads (lt_to_data, lt_item,
 * lt_to_f32) of sharded tensors of every dtype against the replicated
 * value; gradients of a sharded program against finite differences of its
 * own (replicated) loss; a 2-way tensor-parallel MLP trained 20 Adam steps
 * against the same MLP on one device. All of it on both backends (ref, the
 * oracle, and cpu).
 *
 * Checks inside a replica do not use cmocka's asserts (which jump out of
 * the calling thread): they record a message and fail the replica, and the
 * test thread reports it. */
#include "test_util.h"

#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

typedef struct replica_err {
  char msg[2][512];
} replica_err;

static replica_err g_err;

#define CHECK(r, cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      int n_ = snprintf(g_err.msg[r], sizeof g_err.msg[r], "line %d: ", __LINE__); \
      snprintf(g_err.msg[r] + n_, sizeof g_err.msg[r] - (size_t)n_, __VA_ARGS__);  \
      return LT_EINVAL;                                                            \
    }                                                                              \
  } while (0)

#define OK(r, expr)                                                            \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    CHECK(r, rc_ == LT_OK, "%s failed (%d): %s", #expr, rc_, lt_last_error()); \
  } while (0)

static lt_world *g_world;

/* Runs fn on a world of 2 and fails the test with a replica's message. */
static void run2_on(lt_replica_fn fn, void *ctx) {
  memset(&g_err, 0, sizeof g_err);
  assert_int_equal(lt_world_local(2, &g_world), LT_OK);
  int rc = lt_world_run(g_world, fn, ctx);
  lt_world_free(g_world);
  g_world = NULL;
  for (int r = 0; r < 2; r++)
    if (g_err.msg[r][0]) fail_msg("rank %d: %s", r, g_err.msg[r]);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
}

static const lt_backend *backend_at(int b) { return b == 0 ? &lt__ref_backend : &lt__cpu_backend; }

/* run2_on for each backend. */
static void run2(lt_replica_fn fn, void *ctx) {
  for (int b = 0; b < tu_nbackends(); b++) {
    lt__backend_force(backend_at(b));
    run2_on(fn, ctx);
    lt__backend_force(NULL);
  }
}

/* t's global value as doubles (through lt_unshard); LT_OK or the status. */
static int global_values(lt_tensor *t, double *out, int64_t cap) {
  if (!t) return lt_last_status() ? lt_last_status() : LT_EINVAL;
  lt_tensor *u = lt_cast(lt_unshard(t), LT_F64);
  if (!u) return lt_last_status();
  int64_t n = lt_numel(u);
  if (n > cap) return LT_EINVAL;
  return lt_to_data(u, out, (size_t)n * sizeof(double));
}

/* Checks t's layout (axis, -1: replicated), global shape and values. */
static int expect(int r, const char *what, lt_tensor *t, int axis, const int64_t *shape, int ndim,
                  const double *want, double tol) {
  CHECK(r, t != NULL, "%s: NULL (%s)", what, lt_last_error());
  CHECK(r, lt_sharding_axis(t) == axis, "%s: sharded along %d, expected %d", what,
        lt_sharding_axis(t), axis);
  CHECK(r, lt_ndim(t) == ndim, "%s: rank %d, expected %d", what, lt_ndim(t), ndim);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK(r, lt_dim(t, d) == shape[d], "%s: dim %d is %lld, expected %lld", what, d,
          (long long)lt_dim(t, d), (long long)shape[d]);
    n *= shape[d];
  }
  CHECK(r, lt_numel(t) == n, "%s: numel %lld", what, (long long)lt_numel(t));
  double got[256];
  OK(r, global_values(t, got, 256));
  for (int64_t i = 0; i < n; i++)
    CHECK(r, tu_near(got[i], want[i], tol), "%s[%lld]: got %.9g, want %.9g", what, (long long)i,
          got[i], want[i]);
  return LT_OK;
}

static double val(int seed, int64_t i) { return (double)tu_wave_at(seed, i); }

static lt_tensor *make(lt_device dev, int seed, const int64_t *shape, int ndim) {
  double v[256];
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  for (int64_t i = 0; i < n; i++) v[i] = val(seed, i);
  return lt_cast(lt_from_data(dev, LT_F64, shape, ndim, v), LT_F32);
}

/* ---- mark, unshard, errors ---------------------------------------------------------------- */

static int replica_mark(int r, lt_device dev, void *ctx) {
  (void)ctx;
  lt_scope_begin();
  double want[24];
  for (int i = 0; i < 24; i++) want[i] = (float)val(1, i);
  for (int axis = 0; axis < 2; axis++) {
    lt_tensor *t = make(dev, 1, SHAPE(4, 6), 2);
    int64_t id = lt_id(t);
    OK(r, lt_mark_sharding(t, g_world, axis));
    CHECK(r, lt_id(t) == id, "identity changed");
    OK(r, lt_mark_sharding(t, g_world, axis)); /* the same spec again: fine */
    CHECK(r, lt_mark_sharding(t, g_world, 1 - axis) == LT_EINVAL, "resharding accepted");
    if (expect(r, "marked", t, axis, SHAPE(4, 6), 2, want, 0) != LT_OK) return LT_EINVAL;
    OK(r, lt_mark_step(dev)); /* and after the step, as device data */
    if (expect(r, "stepped", t, axis, SHAPE(4, 6), 2, want, 0) != LT_OK) return LT_EINVAL;
    lt_tensor *u = lt_unshard(t);
    if (expect(r, "unshard", u, -1, SHAPE(4, 6), 2, want, 0) != LT_OK) return LT_EINVAL;
    /* a read gathers: the whole value, on every replica (test_reads_gather) */
    float buf[24];
    OK(r, lt_to_data(t, buf, sizeof buf));
    for (int i = 0; i < 24; i++) CHECK(r, buf[i] == want[i], "read [%d]: %g", i, buf[i]);
    /* an op that does not propagate shardings: a clear error, t untouched */
    lt_clear_error();
    CHECK(r, lt_cumsum(t, 1) == NULL, "cumsum of a shard accepted");
    CHECK(r, lt_last_status() == LT_EINVAL, "status %d", lt_last_status());
    CHECK(r, strstr(lt_last_error(), "lt_cumsum") && strstr(lt_last_error(), "lt_unshard"),
          "message: %s", lt_last_error());
    lt_clear_error();
    CHECK(r, lt_add(lt_argmax(t, 1, false), t) == NULL, "argmax of a shard accepted");
    CHECK(r, strstr(lt_last_error(), "lt_argmax"), "message: %s", lt_last_error());
    CHECK(r, lt_flip(t, (const int[]){1}, 1) == NULL, "flip of a shard accepted");
    if (expect(r, "after errors", t, axis, SHAPE(4, 6), 2, want, 0) != LT_OK) return LT_EINVAL;
  }
  lt_tensor *odd = make(dev, 2, SHAPE(3, 4), 2);
  CHECK(r, lt_mark_sharding(odd, g_world, 0) == LT_ESHAPE, "3 rows split in 2");
  CHECK(r, lt_sharding_axis(odd) == -1, "failed mark left a sharding");
  lt_tensor *far = lt_zeros(lt_cpu(5), LT_F32, SHAPE(4), 1);
  CHECK(r, far && lt_mark_sharding(far, g_world, 0) == LT_EDEVICE, "device of no mesh");
  CHECK(r, lt_mark_sharding(NULL, g_world, 0) == LT_EINVAL, "NULL tensor");
  lt_tensor *s = lt_scalar(dev, LT_F32, 2.0);
  OK(r, lt_mark_sharding(s, g_world, -1)); /* replicated: nothing to do */
  CHECK(r, lt_mark_sharding(s, g_world, 0) == LT_ESHAPE, "0-d split");
  lt_scope_end();
  return LT_OK;
}

static void test_mark_unshard_errors(void **state) {
  (void)state;
  run2(replica_mark, NULL);
}

/* Host data marked sharded is cut on the host: each replica keeps only its
 * chunk, as host data still (uploaded alone at its first use), instead of
 * the whole value behind a shard node (uploaded whole by every replica);
 * values as before, along both axes. */
static int replica_host_chunk(int r, lt_device dev, void *ctx) {
  (void)ctx;
  enum { ROWS = 8, COLS = 6 };
  float all[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; i++) all[i] = (float)i;
  for (int axis = 0; axis < 2; axis++) {
    lt_scope_begin();
    lt_tensor *t = lt_from_data(dev, LT_F32, SHAPE(ROWS, COLS), 2, all);
    OK(r, lt_mark_sharding(t, g_world, axis));
    CHECK(r, lt_get_state(t) == LT_STATE_HOST, "axis %d: state %d, not host data", axis,
          (int)lt_get_state(t));
    lt_tensor *y = lt_neg(t);
    int64_t at = axis == 0 ? (int64_t)r * (ROWS / 2) * COLS : (int64_t)r * (COLS / 2);
    double v;
    OK(r, lt_item(lt_unshard(t), at, &v)); /* the global element at the chunk's start */
    CHECK(r, v == all[at], "axis %d: %g, want %g", axis, v, (double)all[at]);
    float whole[ROWS * COLS];
    OK(r, lt_to_data(y, whole, sizeof whole));
    for (int i = 0; i < ROWS * COLS; i++)
      CHECK(r, whole[i] == -all[i], "axis %d: y[%d] = %g", axis, i, (double)whole[i]);
    lt_scope_end();
  }
  return LT_OK;
}

static void test_host_data_uploads_its_chunk(void **state) {
  (void)state;
  run2(replica_host_chunk, NULL);
}

/* ---- reads: lt_to_data, lt_to_f32, lt_item gather --------------------------------------- */

/* Exact in every dtype below: small integers, non-negative for u8, 0/1 for
 * bool. */
static double read_val(lt_dtype dt, int i) {
  if (dt == LT_BOOL) return i % 3 == 0;
  if (dt == LT_U8) return (i * 37) % 251;
  return (i * 7) % 23 - 11;
}

static int replica_reads(int r, lt_device dev, void *ctx) {
  (void)ctx;
  static const lt_dtype kDtypes[] = {LT_F32, LT_F64, LT_BF16, LT_I64,
                                     LT_I32, LT_I8,  LT_U8,   LT_BOOL};
  enum { M = 4, N = 6 };
  for (size_t k = 0; k < sizeof kDtypes / sizeof *kDtypes; k++)
    for (int axis = 0; axis < 2; axis++) {
      lt_dtype dt = kDtypes[k];
      const char *dn = lt_dtype_name(dt);
      size_t esz = lt_dtype_size(dt), nbytes = M * N * esz;
      lt_scope_begin();
      double v[M * N];
      for (int i = 0; i < M * N; i++) v[i] = read_val(dt, i);
      /* ref: the replicated value; t: the same, sharded, then read */
      lt_tensor *ref = lt_cast(lt_from_data(dev, LT_F64, SHAPE(M, N), 2, v), dt);
      lt_tensor *t = lt_cast(lt_from_data(dev, LT_F64, SHAPE(M, N), 2, v), dt);
      unsigned char want[M * N * 8], got[M * N * 8];
      OK(r, lt_to_data(ref, want, sizeof want));
      OK(r, lt_mark_sharding(t, g_world, axis));
      for (int pass = 0; pass < 2; pass++) { /* pending, then device data after the step */
        memset(got, 0xA5, sizeof got);
        OK(r, lt_to_data(t, got, nbytes));
        CHECK(r, memcmp(got, want, nbytes) == 0, "%s axis %d pass %d: lt_to_data differs", dn, axis,
              pass);
        CHECK(r, lt_sharding_axis(t) == axis && lt_dim(t, axis) == (axis ? N : M),
              "%s: the read changed the sharding", dn);
        double d, w;
        for (int i = 0; i < M * N; i += 5) { /* both ranks' chunks */
          OK(r, lt_item(t, i, &d));
          OK(r, lt_item(ref, i, &w));
          CHECK(r, d == w, "%s axis %d: lt_item(%d) %g, want %g", dn, axis, i, d, w);
        }
        float f[M * N];
        OK(r, lt_to_f32(t, f, M * N));
        for (int i = 0; i < M * N; i++)
          CHECK(r, f[i] == (float)v[i], "%s: lt_to_f32[%d] %g, want %g", dn, i, f[i], v[i]);
        if (pass == 0) OK(r, lt_mark_step(dev));
      }
      /* errors name the function called, with the global size */
      lt_clear_error();
      CHECK(r, lt_to_data(t, got, nbytes / 2) == LT_EINVAL, "%s: short destination accepted", dn);
      CHECK(r, strstr(lt_last_error(), "lt_to_data") && strstr(lt_last_error(), "needs"),
            "message: %s", lt_last_error());
      double d;
      CHECK(r, lt_item(t, M * N, &d) == LT_EINVAL, "%s: lt_item out of range accepted", dn);
      CHECK(r, strstr(lt_last_error(), "lt_item") && strstr(lt_last_error(), "24 elements"),
            "message: %s", lt_last_error());
      lt_scope_end();
    }
  /* an empty tensor splits and reads (nothing to copy) */
  lt_scope_begin();
  lt_tensor *empty = lt_zeros(dev, LT_F32, SHAPE(0, 4), 2);
  OK(r, lt_mark_sharding(empty, g_world, 0));
  OK(r, lt_to_data(empty, NULL, 0));
  lt_scope_end();
  /* a pending sharded result (its graph runs with the gather), still sharded
   * for the ops after the read */
  lt_scope_begin();
  double a[M * N], w[M * N];
  for (int i = 0; i < M * N; i++) a[i] = (float)val(7, i);
  lt_tensor *A = make(dev, 7, SHAPE(M, N), 2);
  OK(r, lt_mark_sharding(A, g_world, 1));
  lt_tensor *B = lt_mul(A, A);
  for (int i = 0; i < M * N; i++) w[i] = (float)(a[i] * a[i]);
  float got[M * N];
  OK(r, lt_to_data(B, got, sizeof got));
  for (int i = 0; i < M * N; i++) CHECK(r, got[i] == (float)w[i], "a*a [%d]: %g", i, got[i]);
  lt_tensor *C = lt_add(B, A);
  CHECK(r, lt_sharding_axis(B) == 1 && lt_sharding_axis(C) == 1, "layout after a read");
  for (int i = 0; i < M * N; i++) w[i] = (float)((float)(a[i] * a[i]) + a[i]);
  if (expect(r, "a*a+a", C, 1, SHAPE(M, N), 2, w, 0) != LT_OK) return LT_EINVAL;
  lt_scope_end();
  return LT_OK;
}

static void test_reads_gather(void **state) {
  (void)state;
  run2(replica_reads, NULL);
}

/* ---- elementwise -------------------------------------------------------------------------- */

static int replica_elementwise(int r, lt_device dev, void *ctx) {
  (void)ctx;
  lt_scope_begin();
  enum { M = 4, N = 6 };
  double a[M * N], b[M * N], c[N], d[M], e[M * N], w[M * N];
  for (int i = 0; i < M * N; i++) {
    a[i] = (float)val(1, i);
    b[i] = (float)val(2, i);
    e[i] = (float)val(5, i);
  }
  for (int j = 0; j < N; j++) c[j] = (float)val(3, j);
  for (int i = 0; i < M; i++) d[i] = (float)val(4, i);
  lt_tensor *A = make(dev, 1, SHAPE(M, N), 2), *B = make(dev, 2, SHAPE(M, N), 2);
  lt_tensor *C = make(dev, 3, SHAPE(N), 1), *D = make(dev, 4, SHAPE(M, 1), 2);
  lt_tensor *E = make(dev, 5, SHAPE(M, N), 2);
  OK(r, lt_mark_sharding(A, g_world, 0));
  OK(r, lt_mark_sharding(E, g_world, 1));
  const double tol = 1e-6;
  /* both sharded alike / replicated of full size (split here) */
  for (int i = 0; i < M * N; i++) w[i] = (float)(a[i] + b[i]);
  if (expect(r, "a+b", lt_add(A, B), 0, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  /* replicated broadcasting along the split axis: used as it is */
  for (int i = 0; i < M * N; i++) w[i] = (float)(a[i] * c[i % N]);
  if (expect(r, "a*c", lt_mul(A, C), 0, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  for (int i = 0; i < M * N; i++) w[i] = (float)(c[i % N] - a[i]);
  if (expect(r, "c-a", lt_sub(C, A), 0, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  /* replicated [M,1]: split along the rows, broadcast along the columns */
  for (int i = 0; i < M * N; i++) w[i] = (float)(a[i] - d[i / N]);
  if (expect(r, "a-d", lt_sub(A, D), 0, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  /* split along different axes: e gathered first */
  for (int i = 0; i < M * N; i++) w[i] = (float)(a[i] + e[i]);
  if (expect(r, "a+e", lt_add(A, E), 0, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  if (expect(r, "e+a", lt_add(E, A), 1, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  /* e split on 1 with c [N]: c split too */
  for (int i = 0; i < M * N; i++) w[i] = (float)(e[i] * c[i % N]);
  if (expect(r, "e*c", lt_mul(E, C), 1, SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
  /* unary ops and casts keep the layout */
  for (int i = 0; i < M * N; i++) w[i] = (float)exp((float)a[i]);
  if (expect(r, "exp", lt_exp(A), 0, SHAPE(M, N), 2, w, 1e-5)) return LT_EINVAL;
  for (int i = 0; i < M * N; i++) w[i] = a[i] > 0 ? a[i] : 0;
  lt_tensor *rl = lt_cast(lt_relu(A), LT_F64);
  CHECK(r, rl && lt_get_dtype(rl) == LT_F64, "cast dtype");
  if (expect(r, "relu", rl, 0, SHAPE(M, N), 2, w, 0)) return LT_EINVAL;
  /* where: cond sharded, branches replicated and sharded on the other axis */
  for (int i = 0; i < M * N; i++) w[i] = a[i] > 0 ? b[i] : e[i];
  lt_tensor *zero = lt_scalar(dev, LT_F32, 0.0);
  if (expect(r, "where", lt_where(lt_gt(A, zero), B, E), 0, SHAPE(M, N), 2, w, 0)) return LT_EINVAL;
  /* softmax along the unsplit axis: local; along the split one: gathered */
  for (int axis = 0; axis < 2; axis++) {
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < (axis ? N : M); k++) s += exp(axis ? a[i * N + k] : a[k * N + j]);
        w[i * N + j] = exp(a[i * N + j]) / s;
      }
    if (expect(r, "softmax", lt_softmax(A, axis), axis ? 0 : -1, SHAPE(M, N), 2, w, 1e-6))
      return LT_EINVAL;
  }
  /* an nn loss built on aware ops: replicated, of the global values */
  double mse = 0;
  for (int i = 0; i < M * N; i++) mse += (a[i] - b[i]) * (a[i] - b[i]) / (M * N);
  if (expect(r, "mse", lt_nn_mse_loss(A, B, LT_NN_REDUCTION_MEAN), -1, NULL, 0, &mse, 1e-6))
    return LT_EINVAL;
  /* global shapes that do not broadcast fail with the global shapes */
  lt_tensor *bad = make(dev, 6, SHAPE(2, N), 2);
  lt_clear_error();
  CHECK(r, lt_add(A, bad) == NULL && lt_last_status() == LT_ESHAPE, "bad broadcast: %s",
        lt_last_error());
  /* assign: the destination keeps its sharding */
  lt_tensor *dst = make(dev, 7, SHAPE(M, N), 2);
  OK(r, lt_mark_sharding(dst, g_world, 1));
  OK(r, lt_assign(dst, A));
  if (expect(r, "assign", dst, 1, SHAPE(M, N), 2, a, 0)) return LT_EINVAL;
  OK(r, lt_assign(dst, B));
  if (expect(r, "assign2", dst, 1, SHAPE(M, N), 2, b, 0)) return LT_EINVAL;
  lt_tensor *rep = make(dev, 8, SHAPE(M, N), 2);
  OK(r, lt_assign(rep, E)); /* a replicated destination gets the whole value */
  if (expect(r, "assign3", rep, -1, SHAPE(M, N), 2, e, 0)) return LT_EINVAL;
  OK(r, lt_assign(dst, C)); /* broadcast along the split axis of dst */
  for (int i = 0; i < M * N; i++) w[i] = c[i % N];
  if (expect(r, "assign4", dst, 1, SHAPE(M, N), 2, w, 0)) return LT_EINVAL;
  lt_scope_end();
  return LT_OK;
}

static void test_elementwise(void **state) {
  (void)state;
  run2(replica_elementwise, NULL);
}

/* ---- matmul ------------------------------------------------------------------------------- */

static int replica_matmul(int r, lt_device dev, void *ctx) {
  (void)ctx;
  enum { M = 4, K = 6, N = 8 };
  double a[M * K], b[K * N], w[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)val(1, i);
  for (int i = 0; i < K * N; i++) b[i] = (float)val(2, i);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];
      w[i * N + j] = s;
    }
  /* K products of values within 1.5 (tu_wave_at), summed in sgemm's order */
  const double tol = tu_f32_sum_tol(K, 1.5 * 1.5);
  /* (layout of a, layout of b) -> layout of the result */
  static const int kCases[9][3] = {{-1, -1, -1}, {-1, 1, 1}, {0, -1, 0}, {1, 0, -1}, {-1, 0, -1},
                                   {1, -1, -1},  {0, 0, 0},  {0, 1, 0},  {1, 1, 1}};
  for (int k = 0; k < 9; k++) {
    lt_scope_begin();
    lt_tensor *A = make(dev, 1, SHAPE(M, K), 2), *B = make(dev, 2, SHAPE(K, N), 2);
    if (kCases[k][0] >= 0) OK(r, lt_mark_sharding(A, g_world, kCases[k][0]));
    if (kCases[k][1] >= 0) OK(r, lt_mark_sharding(B, g_world, kCases[k][1]));
    char what[32];
    snprintf(what, sizeof what, "matmul(%d,%d)", kCases[k][0], kCases[k][1]);
    if (expect(r, what, lt_matmul(A, B), kCases[k][2], SHAPE(M, N), 2, w, tol)) return LT_EINVAL;
    lt_scope_end();
  }
  /* batched: gathered, replicated result */
  lt_scope_begin();
  lt_tensor *A3 = lt_reshape(make(dev, 1, SHAPE(M, K), 2), SHAPE(2, 2, K), 3);
  OK(r, lt_mark_sharding(A3, g_world, 0));
  lt_tensor *B = make(dev, 2, SHAPE(K, N), 2);
  OK(r, lt_mark_sharding(B, g_world, 1));
  if (expect(r, "batched", lt_matmul(A3, B), -1, SHAPE(2, 2, N), 3, w, tol)) return LT_EINVAL;
  lt_tensor *A = make(dev, 1, SHAPE(M, K), 2), *Bt = make(dev, 2, SHAPE(N, K), 2);
  OK(r, lt_mark_sharding(A, g_world, 0));
  lt_clear_error();
  CHECK(r, lt_matmul(A, Bt) == NULL && lt_last_status() == LT_ESHAPE, "bad shapes: %s",
        lt_last_error());
  lt_scope_end();
  return LT_OK;
}

static void test_matmul(void **state) {
  (void)state;
  run2(replica_matmul, NULL);
}

/* ---- reductions --------------------------------------------------------------------------- */

typedef lt_tensor *(*reduce_fn)(lt_tensor *, const int *, int, bool);

static int replica_reduce(int r, lt_device dev, void *ctx) {
  (void)ctx;
  enum { M = 4, N = 6 };
  double a[M * N];
  for (int i = 0; i < M * N; i++) a[i] = (float)val(1, i);
  /* plain C: sum/mean/max/min over rows, columns, all */
  double rs[M], rm[M], rx[M], cs[N], cm[N], cn[N], all = 0;
  for (int i = 0; i < M; i++) {
    rs[i] = 0;
    rx[i] = -1e30;
    for (int j = 0; j < N; j++) {
      rs[i] += a[i * N + j];
      rx[i] = fmax(rx[i], a[i * N + j]);
    }
    rm[i] = rs[i] / N;
    all += rs[i];
  }
  for (int j = 0; j < N; j++) {
    cs[j] = 0;
    cn[j] = 1e30;
    for (int i = 0; i < M; i++) {
      cs[j] += a[i * N + j];
      cn[j] = fmin(cn[j], a[i * N + j]);
    }
    cm[j] = cs[j] / M;
  }
  double mean_all = all / (M * N);
  struct {
    reduce_fn f;
    int split, axis; /* axis -1: all */
    bool keep;
    int want_axis;
    const double *want;
    const char *what;
  } cases[] = {
      {lt_sum, 0, 1, false, 0, rs, "sum rows split 0"},
      {lt_sum, 0, 1, true, 0, rs, "sum rows keepdim"},
      {lt_mean, 0, 1, false, 0, rm, "mean rows split 0"},
      {lt_sum, 0, 0, false, -1, cs, "sum cols split 0"},
      {lt_mean, 0, 0, false, -1, cm, "mean cols split 0"},
      {lt_sum, 1, 0, false, 0, cs, "sum cols split 1"},
      {lt_sum, 1, 0, true, 1, cs, "sum cols split 1 keepdim"},
      {lt_min, 1, 0, false, 0, cn, "min cols split 1"},
      {lt_max, 1, 1, false, -1, rx, "max rows split 1"},
      {lt_sum, 1, -1, false, -1, &all, "sum all"},
      {lt_mean, 0, -1, false, -1, &mean_all, "mean all"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    lt_scope_begin();
    lt_tensor *A = make(dev, 1, SHAPE(M, N), 2);
    OK(r, lt_mark_sharding(A, g_world, cases[k].split));
    int ax = cases[k].axis;
    lt_tensor *y = cases[k].f(A, ax >= 0 ? &ax : NULL, ax >= 0 ? 1 : 0, cases[k].keep);
    int64_t shape[2];
    int nd = 0;
    if (ax >= 0)
      for (int d = 0; d < 2; d++) {
        if (d != ax)
          shape[nd++] = d == 0 ? M : N;
        else if (cases[k].keep)
          shape[nd++] = 1;
      }
    /* each replica's partial sum and the all-reduce's sum of them: at most
     * M * N values within 1.5 (tu_wave_at), rounded to f32 along the way */
    if (expect(r, cases[k].what, y, cases[k].want_axis, shape, nd, cases[k].want,
               tu_f32_sum_tol(M * N, 1.5)))
      return LT_EINVAL;
    lt_scope_end();
  }
  return LT_OK;
}

static void test_reductions(void **state) {
  (void)state;
  run2(replica_reduce, NULL);
}

/* ---- shape ops: transpose, permute, reshape ---------------------------------------------- */

static int replica_shape(int r, lt_device dev, void *ctx) {
  (void)ctx;
  lt_scope_begin();
  double a[24], want[24];
  for (int i = 0; i < 24; i++) a[i] = (float)val(3, i);
  lt_tensor *A = make(dev, 3, SHAPE(4, 6), 2);
  OK(r, lt_mark_sharding(A, g_world, 1));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) want[j * 4 + i] = a[i * 6 + j];
  if (expect(r, "transpose", lt_transpose(A, 0, 1), 0, SHAPE(6, 4), 2, want, 0)) return LT_EINVAL;
  /* [4, 6] split on 1 -> [4, 2, 3]: the chunks of 6 are the chunks of 2 */
  if (expect(r, "reshape kept", lt_reshape(A, SHAPE(4, 2, 3), 3), 1, SHAPE(4, 2, 3), 3, a, 0))
    return LT_EINVAL;
  /* -> [24]: a chunk of columns is no chunk of the flat vector: gathered */
  if (expect(r, "reshape gathered", lt_reshape(A, SHAPE(24), 1), -1, SHAPE(24), 1, a, 0))
    return LT_EINVAL;
  lt_tensor *B = make(dev, 3, SHAPE(4, 6), 2);
  OK(r, lt_mark_sharding(B, g_world, 0));
  if (expect(r, "rows reshaped", lt_reshape(B, SHAPE(2, 12), 2), 0, SHAPE(2, 12), 2, a, 0))
    return LT_EINVAL;
  if (expect(r, "rows flattened", lt_reshape(B, SHAPE(-1), 1), 0, SHAPE(24), 1, a, 0))
    return LT_EINVAL;
  lt_clear_error();
  CHECK(r, lt_reshape(B, SHAPE(5, 5), 2) == NULL && lt_last_status() == LT_ESHAPE,
        "a bad global shape: %s", lt_last_error());
  /* permute of [2, 4, 6] split on 2 by (2, 0, 1): split on 0 */
  double x[48], px[48];
  for (int i = 0; i < 48; i++) x[i] = (float)val(5, i);
  lt_tensor *X = make(dev, 5, SHAPE(2, 4, 6), 3);
  OK(r, lt_mark_sharding(X, g_world, 2));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 6; k++) px[(k * 2 + i) * 4 + j] = x[(i * 4 + j) * 6 + k];
  if (expect(r, "permute", lt_permute(X, (const int[]){2, 0, 1}, 3), 0, SHAPE(6, 2, 4), 3, px, 0))
    return LT_EINVAL;

  /* gradients through them: L = sum(W^T^2 K1) + sum(reshape(W, [4,2,3]) K2)
   * + sum(reshape(W, [24]) K3), W split on 1; dL/dW = 2 W K1^T + K2 + K3 */
  lt_tensor *W = make(dev, 3, SHAPE(4, 6), 2);
  OK(r, lt_set_requires_grad(W, true));
  OK(r, lt_mark_sharding(W, g_world, 1));
  lt_tensor *K1 = make(dev, 6, SHAPE(6, 4), 2), *K2 = make(dev, 7, SHAPE(4, 2, 3), 3),
            *K3 = make(dev, 8, SHAPE(24), 1);
  lt_tensor *t = lt_transpose(W, 0, 1);
  lt_tensor *L =
      lt_add(lt_add(lt_sum(lt_mul(lt_mul(t, t), K1), NULL, 0, false),
                    lt_sum(lt_mul(lt_reshape(W, SHAPE(4, 2, 3), 3), K2), NULL, 0, false)),
             lt_sum(lt_mul(lt_reshape(W, SHAPE(24), 1), K3), NULL, 0, false));
  CHECK(r, L && lt_sharding_axis(L) == -1, "loss: %s", lt_last_error());
  OK(r, lt_backward(L));
  double g[24];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++)
      g[i * 6 + j] = 2 * a[i * 6 + j] * (float)val(6, j * 4 + i) + (float)val(7, i * 6 + j) +
                     (float)val(8, i * 6 + j);
  if (expect(r, "grad", lt_grad(W), 1, SHAPE(4, 6), 2, g, 1e-5)) return LT_EINVAL;
  lt_scope_end();
  return LT_OK;
}

static void test_shape_ops(void **state) {
  (void)state;
  run2(replica_shape, NULL);
}

/* ---- gradients ---------------------------------------------------------------------------- */

/* The global loss of a program using every SPMD collective, in f64:
 *   h = tanh(x @ W1 + b) s  x replicated (spmd_copy), W1 split on 1, b
 *                           replicated (shard), s [B,1] replicated
 *                           (broadcast along the split axis: spmd_copy),
 *                           h split on 1
 *   y = h @ W2              W2 split on 0: row-parallel (spmd_all_reduce)
 *   loss = mean(y^2) + 0.3 sum(mean(h, 1)) + 0.05 sum(unshard(h)^2)
 * (mean over the split axis: spmd_all_reduce(mean); unshard: gather). */
enum { GB = 3, GI = 4, GH = 6, GO = 2, GNP = 5, GMAX = GI * GH };
static const int64_t kGShape[GNP][2] = {{GB, GI}, {GI, GH}, {1, GH}, {GH, GO}, {GB, 1}};
static const int kGSplit[GNP] = {-1, 1, -1, 0, -1};

typedef struct grad_ctx {
  double p[GNP][GMAX];
  double grad[2][GNP][GMAX]; /* autograd, per rank */
  double fd[GNP][GMAX];      /* finite differences, rank 0 */
} grad_ctx;

static int64_t gnumel(int k) { return kGShape[k][0] * kGShape[k][1]; }

static lt_tensor *gparam(lt_device dev, const grad_ctx *g, int k, const double *v) {
  (void)g;
  if (kGShape[k][0] == 1) return lt_from_data(dev, LT_F64, &kGShape[k][1], 1, v);
  return lt_from_data(dev, LT_F64, kGShape[k], 2, v);
}

/* The loss of parameters vals; with grads != NULL also their gradients. */
static int gloss(int r, lt_device dev, double vals[GNP][GMAX], double *loss,
                 double grads[GNP][GMAX]) {
  lt_scope_begin();
  lt_tensor *p[GNP];
  for (int k = 0; k < GNP; k++) {
    p[k] = gparam(dev, NULL, k, vals[k]);
    CHECK(r, p[k] != NULL, "param: %s", lt_last_error());
    if (grads) OK(r, lt_set_requires_grad(p[k], true));
    if (kGSplit[k] >= 0) OK(r, lt_mark_sharding(p[k], g_world, kGSplit[k]));
  }
  lt_tensor *h = lt_mul(lt_tanh(lt_add(lt_matmul(p[0], p[1]), p[2])), p[4]);
  CHECK(r, h && lt_sharding_axis(h) == 1, "h: %s", lt_last_error());
  lt_tensor *y = lt_matmul(h, p[3]);
  CHECK(r, y && lt_sharding_axis(y) == -1, "y: %s", lt_last_error());
  lt_tensor *l1 = lt_mean(lt_mul(y, y), NULL, 0, false);
  int one = 1;
  lt_tensor *l2 = lt_sum(lt_mean(h, &one, 1, false), NULL, 0, false);
  lt_tensor *hu = lt_unshard(h);
  lt_tensor *l3 = lt_sum(lt_mul(hu, hu), NULL, 0, false);
  lt_tensor *l = lt_add(lt_add(l1, lt_mul(l2, lt_scalar(dev, LT_F64, 0.3))),
                        lt_mul(l3, lt_scalar(dev, LT_F64, 0.05)));
  CHECK(r, l && lt_sharding_axis(l) == -1, "loss: %s", lt_last_error());
  if (grads) OK(r, lt_backward(l));
  OK(r, lt_item(l, 0, loss));
  for (int k = 0; grads && k < GNP; k++) {
    lt_tensor *gk = lt_grad(p[k]);
    CHECK(r, gk && lt_sharding_axis(gk) == kGSplit[k], "grad %d layout", k);
    OK(r, global_values(gk, grads[k], GMAX));
  }
  lt_scope_end();
  return LT_OK;
}

static int replica_grad(int r, lt_device dev, void *arg) {
  grad_ctx *g = arg;
  double loss;
  if (gloss(r, dev, g->p, &loss, g->grad[r]) != LT_OK) return LT_EINVAL;
  const double h = 1e-6;
  static double v[2][GNP][GMAX];
  memcpy(v[r], g->p, sizeof v[r]);
  for (int k = 0; k < GNP; k++)
    for (int64_t i = 0; i < gnumel(k); i++) {
      double lp, lm, x = v[r][k][i];
      v[r][k][i] = x + h;
      if (gloss(r, dev, v[r], &lp, NULL) != LT_OK) return LT_EINVAL;
      v[r][k][i] = x - h;
      if (gloss(r, dev, v[r], &lm, NULL) != LT_OK) return LT_EINVAL;
      v[r][k][i] = x;
      if (r == 0) g->fd[k][i] = (lp - lm) / (2 * h);
    }
  return LT_OK;
}

static void test_gradients_finite_differences(void **state) {
  (void)state;
  grad_ctx *g = calloc(1, sizeof *g);
  for (int k = 0; k < GNP; k++)
    for (int64_t i = 0; i < gnumel(k); i++) g->p[k][i] = val(10 + k, i);
  run2(replica_grad, g);
  for (int k = 0; k < GNP; k++)
    for (int64_t i = 0; i < gnumel(k); i++) {
      if (g->grad[0][k][i] != g->grad[1][k][i])
        fail_msg("param %d[%lld]: ranks disagree (%.12g, %.12g)", k, (long long)i, g->grad[0][k][i],
                 g->grad[1][k][i]);
      if (!tu_near(g->grad[0][k][i], g->fd[k][i], 1e-6))
        fail_msg("param %d[%lld]: autograd %.12g, finite differences %.12g", k, (long long)i,
                 g->grad[0][k][i], g->fd[k][i]);
    }
  assert_true(fabs(g->grad[0][1][0]) > 1e-4); /* a real gradient */
  free(g);
}

/* ---- the tensor-parallel MLP -------------------------------------------------------------- */

enum { IN = 16, HID = 8, OUT = 4, B = 6, STEPS = 20, NP = 4, PMAX = IN * HID };
static const int64_t kShape[NP][2] = {{IN, HID}, {1, HID}, {HID, OUT}, {1, OUT}};
/* W1 column-split, b1 split alike, W2 row-split, b2 replicated */
static const int kSplit[NP] = {1, 0, 0, -1};

typedef struct mlp_problem {
  float init[NP][PMAX];
  float x[STEPS][B * IN], y[STEPS][B * OUT];
} mlp_problem;

typedef struct mlp_result {
  float params[NP][PMAX];
  float out[B * OUT]; /* the last step's forward output */
} mlp_result;

typedef struct mlp_ctx {
  const mlp_problem *pb;
  mlp_result got[2];
} mlp_ctx;

static int mlp_train(int r, lt_device dev, const mlp_problem *pb, bool sharded, mlp_result *res) {
  lt_nn_linear l1, l2;
  OK(r, lt_nn_linear_init(&l1, dev, LT_F32, IN, HID, true));
  OK(r, lt_nn_linear_init(&l2, dev, LT_F32, HID, OUT, true));
  lt_tensor *p[NP] = {l1.weight, l1.bias, l2.weight, l2.bias};
  for (int k = 0; k < NP; k++) {
    lt_tensor *v = lt_from_data(dev, LT_F32, kShape[k][0] == 1 ? &kShape[k][1] : kShape[k],
                                kShape[k][0] == 1 ? 1 : 2, pb->init[k]);
    OK(r, lt_assign(p[k], v));
    lt_release(v);
    if (sharded && kSplit[k] >= 0) OK(r, lt_mark_sharding(p[k], g_world, kSplit[k]));
  }
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 1e-2;
  lt_nn_optim *o = lt_nn_optim_create(&cfg, p, NP);
  CHECK(r, o != NULL, "optim: %s", lt_last_error());
  OK(r, lt_mark_step(dev));
  for (int t = 0; t < STEPS; t++) {
    lt_scope_begin();
    lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(B, IN), 2, pb->x[t]);
    lt_tensor *y = lt_from_data(dev, LT_F32, SHAPE(B, OUT), 2, pb->y[t]);
    lt_tensor *h = lt_relu(lt_nn_linear_forward(&l1, x));
    CHECK(r, h && lt_sharding_axis(h) == (sharded ? 1 : -1), "hidden: %s", lt_last_error());
    lt_tensor *out = lt_nn_linear_forward(&l2, h);
    CHECK(r, out && lt_sharding_axis(out) == -1, "out: %s", lt_last_error());
    lt_tensor *loss = lt_nn_mse_loss(out, y, LT_NN_REDUCTION_MEAN);
    CHECK(r, loss != NULL, "loss: %s", lt_last_error());
    OK(r, lt_backward(loss));
    OK(r, lt_nn_optim_step(o));
    if (t == STEPS - 1) OK(r, lt_to_data(out, res->out, sizeof res->out));
    lt_scope_end();
    OK(r, lt_mark_step(dev));
  }
  for (int k = 0; k < NP; k++) {
    CHECK(r, lt_sharding_axis(p[k]) == (sharded ? kSplit[k] : -1), "param %d layout", k);
    lt_scope_begin();
    OK(r, lt_to_data(lt_unshard(p[k]), res->params[k], sizeof res->params[k]));
    lt_scope_end();
  }
  lt_nn_optim_free(o);
  lt_nn_linear_free(&l1);
  lt_nn_linear_free(&l2);
  return LT_OK;
}

static int replica_mlp(int r, lt_device dev, void *arg) {
  mlp_ctx *c = arg;
  return mlp_train(r, dev, c->pb, true, &c->got[r]);
}

/* One device (of no world, nothing sharded) against 2 replicas. */
static void check_mlp(const mlp_problem *pb) {
  static mlp_result want;
  memset(&g_err, 0, sizeof g_err);
  if (mlp_train(0, lt_cpu(2), pb, false, &want) != LT_OK) fail_msg("%s", g_err.msg[0]);
  mlp_ctx *c = calloc(1, sizeof *c);
  c->pb = pb;
  run2_on(replica_mlp, c);
  for (int k = 0; k < NP; k++)
    for (int64_t i = 0; i < kShape[k][0] * kShape[k][1]; i++) {
      float w = want.params[k][i];
      if (c->got[0].params[k][i] != c->got[1].params[k][i])
        fail_msg("param %d[%lld]: ranks disagree", k, (long long)i);
      if (fabs((double)c->got[0].params[k][i] - w) > 1e-5 * fabs(w) + 1e-7)
        fail_msg("param %d[%lld]: sharded %.9g, one device %.9g", k, (long long)i,
                 c->got[0].params[k][i], w);
    }
  for (int i = 0; i < B * OUT; i++)
    for (int r = 0; r < 2; r++)
      if (fabs((double)c->got[r].out[i] - want.out[i]) > 1e-5 * fabs(want.out[i]) + 1e-7)
        fail_msg("rank %d output %d: %.9g, one device %.9g", r, i, c->got[r].out[i], want.out[i]);
  /* training moved the parameters */
  assert_true(fabs(want.params[0][0] - pb->init[0][0]) > 1e-3);
  free(c);
}

static void test_tensor_parallel_mlp(void **state) {
  (void)state;
  mlp_problem *pb = calloc(1, sizeof *pb);
  uint32_t s = 777;
  for (int k = 0; k < NP; k++)
    for (int64_t i = 0; i < kShape[k][0] * kShape[k][1]; i++)
      pb->init[k][i] = tu_wave_at((int)s + k, i) * 0.5f;
  for (int t = 0; t < STEPS; t++) {
    for (int i = 0; i < B * IN; i++) pb->x[t][i] = tu_wave_at(100 + t, i);
    for (int i = 0; i < B * OUT; i++) pb->y[t][i] = tu_wave_at(200 + t, i) * 0.5f;
  }
  for (int b = 0; b < tu_nbackends(); b++) {
    lt__backend_force(backend_at(b));
    check_mlp(pb);
    lt__backend_force(NULL);
  }
  free(pb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mark_unshard_errors),
      cmocka_unit_test(test_reads_gather),
      cmocka_unit_test(test_host_data_uploads_its_chunk),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_shape_ops),
      cmocka_unit_test(test_gradients_finite_differences),
      cmocka_unit_test(test_tensor_parallel_mlp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
