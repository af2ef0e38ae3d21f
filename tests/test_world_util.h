/* Helpers for the tests whose replicas run on in-process worlds
 * (lt_world_local): test_collectives, test_collectives_exchange, test_mesh.
 * A replica runs on a thread of its own, where a cmocka assertion cannot stop
 * the test; so it records its first error and the checks it passed in a
 * tw_ctx, and the runner, back on the test's thread, reports them. Here too:
 * inputs and results as doubles, the values and expectations of the sweep
 * over every collective, reduction and dtype, and the gradient check. */
#ifndef LT_TEST_WORLD_UTIL_H
#define LT_TEST_WORLD_UTIL_H

#include "test_backends.h"

#include "lazytensor_dist.h"
#include "../src/backend/backend.h"

/* What one run's replicas share with the runner: the world's size, its mesh
 * (NULL: none) and, per rank, the checks passed and the first error ("":
 * none). */
typedef struct tw_ctx {
  int n;
  const lt_mesh *mesh;
  int checked[LT_MAX_DEVICES];
  char err[LT_MAX_DEVICES][300];
} tw_ctx;

/* Rank r's element i in dtype dt: each test's own pattern of values. */
typedef double (*tw_val_fn)(int r, int64_t i, lt_dtype dt);

/* Rank r's input of shape [shape] and dtype dt, element i being val(r, i, dt). */
static inline lt_tensor *tw_input(lt_device dev, int r, lt_dtype dt, const int64_t *shape, int ndim,
                                  tw_val_fn val) {
  int64_t m = 1;
  for (int d = 0; d < ndim; d++) m *= shape[d];
  size_t sz = lt_dtype_size(dt);
  unsigned char *buf = calloc((size_t)m + 1, sz);
  for (int64_t i = 0; i < m; i++) lt__store_f64(dt, buf, i, val(r, i, dt));
  lt_tensor *t = lt_from_data(dev, dt, shape, ndim, buf);
  free(buf);
  return t;
}

/* Reads t, of any dtype, as doubles into out[numel]. */
static inline int tw_read_all(lt_tensor *t, double *out) {
  lt_dtype dt = lt_get_dtype(t);
  int64_t m = lt_numel(t);
  size_t sz = lt_dtype_size(dt);
  unsigned char *buf = malloc((size_t)m * sz + 1);
  int rc = lt_to_data(t, buf, (size_t)m * sz);
  for (int64_t i = 0; rc == LT_OK && i < m; i++) out[i] = lt__load_f64(dt, buf, i);
  free(buf);
  return rc;
}

/* A world of n in-process replicas on backend be (NULL: the default), whose
 * collectives give up after timeout_ms (0: the world's default). */
static inline lt_world *tw_world(int n, const lt_backend *be, int timeout_ms) {
  lt__backend_force(be);
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(n, &w), LT_OK);
  if (timeout_ms > 0) assert_int_equal(lt_world_set_timeout_ms(w, timeout_ms), LT_OK);
  return w;
}

/* Frees mesh m (NULL: none) and world w, and gives back the default backend. */
static inline void tw_world_free(lt_world *w, lt_mesh *m) {
  lt_mesh_free(m);
  lt_world_free(w);
  lt__backend_force(NULL);
}

/* Runs fn on every rank of w (and its mesh m, or NULL) with c, cleared, as
 * its argument; fails on any rank's error, on a failed run, or (want_checked
 * >= 0) on a rank that passed another number of checks. On failure m and w
 * are freed first: a failed test must not leave CPU:0.. bound for the next
 * one. what names the run in the messages (a backend, say). */
static inline void tw_run(lt_world *w, lt_mesh *m, lt_replica_fn fn, tw_ctx *c, const char *what,
                          int want_checked) {
  memset(c, 0, sizeof *c);
  c->n = lt_world_size(w);
  c->mesh = m;
  int rc = lt_world_run(w, fn, c);
  char msg[400];
  snprintf(msg, sizeof msg, "%s", lt_last_error());
  bool ok = rc == LT_OK;
  for (int r = 0; r < c->n; r++)
    if (c->err[r][0] || (want_checked >= 0 && c->checked[r] != want_checked)) ok = false;
  if (ok) return;
  tw_world_free(w, m);
  for (int r = 0; r < c->n; r++)
    if (c->err[r][0]) fail_msg("%s, world of %d, rank %d: %s", what, c->n, r, c->err[r]);
  if (rc != LT_OK) fail_msg("%s, lt_world_run: %s", what, msg);
  for (int r = 0; want_checked >= 0 && r < c->n; r++) assert_int_equal(c->checked[r], want_checked);
}

/* ---- every collective, reduction and dtype (test_collectives, test_mesh) ---- */

/* Rank r's element i: distinct per rank, mixed signs (but u8), exact in every dtype. */
static inline double tw_val(int r, int64_t i, lt_dtype dt) {
  if (dt == LT_F32 || dt == LT_F64) return (r + 1) * 0.5 + (double)i * 1.25 - (double)(i % 3) * r;
  double v = (double)((r * 5 + i * 3) % 13);
  return dt == LT_U8 ? v : v - 6;
}

/* Reduction op (an lt_reduce_op) of element i (tw_val) over the ranks
 * mem[0..n-1] (NULL: ranks 0..n-1). */
static inline double tw_reduce(int op, const int *mem, int n, int64_t i, lt_dtype dt) {
  double acc = tw_val(mem ? mem[0] : 0, i, dt);
  for (int k = 1; k < n; k++) {
    double v = tw_val(mem ? mem[k] : k, i, dt);
    if (op == LT_REDUCE_SUM || op == LT_REDUCE_MEAN) acc += v;
    if (op == LT_REDUCE_MAX && v > acc) acc = v;
    if (op == LT_REDUCE_MIN && v < acc) acc = v;
  }
  return op == LT_REDUCE_MEAN ? acc / n : acc;
}

enum { TW_ALL_REDUCE, TW_ALL_GATHER, TW_REDUCE_SCATTER, TW_BROADCAST };

/* Whether the sweep runs collective kind (TW_*) with reduction op (0..3) in
 * dtype dt: all_gather and broadcast take no op (they run once, as op 0),
 * and mean is for float dtypes only. */
static inline bool tw_sweeps(int kind, int op, lt_dtype dt) {
  if ((kind == TW_ALL_GATHER || kind == TW_BROADCAST) && op > 0) return false;
  return op != LT_REDUCE_MEAN || dt == LT_F32 || dt == LT_F64;
}

/* How far a result may be from want: f32 rounds; f64 and integers are
 * exact but for the order of a sum. */
static inline double tw_tol(lt_dtype dt, double want) {
  return dt == LT_F32 ? 1e-6 * (1 + fabs(want)) : 1e-12 * (1 + fabs(want));
}

/* ---- gradients through collectives, against hand-derived ones ----
 * Rank r's x_r = {0.5 r, 1 - r, 2, -1} (f64), y = op(x_r) for each kind <
 * nkinds, the loss sum(y * c_r) with weights c_r[i] = 1 + r + 0.5 i; the
 * gradient of x_r[j] must be want(c, r, kind, j) to 1e-12. */
typedef lt_tensor *(*tw_grad_op)(const tw_ctx *c, lt_tensor *x, int kind);
typedef double (*tw_grad_want)(const tw_ctx *c, int r, int kind, int j);

static inline int tw_grad_replica(tw_ctx *c, int r, lt_device dev, int nkinds, tw_grad_op op,
                                  tw_grad_want want) {
  int rc = LT_OK;
  for (int kind = 0; kind < nkinds && rc == LT_OK; kind++) {
    lt_scope_begin();
    double xv[4] = {0.5 * r, 1 - r, 2, -1};
    lt_tensor *x = lt_from_data(dev, LT_F64, SHAPE(4), 1, xv);
    lt_set_requires_grad(x, true);
    lt_tensor *y = op(c, x, kind);
    int64_t ny = y ? lt_numel(y) : 0;
    double cv[4 * LT_MAX_DEVICES];
    for (int i = 0; i < ny; i++) cv[i] = 1 + r + 0.5 * i;
    lt_tensor *cw = lt_from_data(dev, LT_F64, SHAPE(ny), 1, cv);
    lt_tensor *loss = lt_sum(lt_mul(y, cw), NULL, 0, false);
    rc = loss ? lt_backward(loss) : lt_last_status();
    double g[4] = {0};
    if (rc == LT_OK) rc = lt_grad(x) ? tw_read_all(lt_grad(x), g) : -1;
    for (int j = 0; rc == LT_OK && j < 4; j++) {
      double wj = want(c, r, kind, j);
      if (fabs(g[j] - wj) > 1e-12) {
        snprintf(c->err[r], sizeof c->err[r], "kind %d grad[%d] = %g, want %g", kind, j, g[j], wj);
        rc = -1;
      }
    }
    if (rc != LT_OK && !c->err[r][0])
      snprintf(c->err[r], sizeof c->err[r], "kind %d: %s", kind, lt_last_error());
    lt_scope_end();
  }
  return rc;
}

#endif
