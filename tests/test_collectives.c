/* Collectives (lazytensor_dist.h) on in-process worlds of 2 and 3 replicas:
 * every op, reduction and dtype against values computed here by plain loops,
 * on both backends; their gradients against hand-derived ones; and the bad
 * configurations, which must fail with a clear message and never hang (a
 * replica that skips a collective makes the others time out). */
#include "test_world_util.h"

#include <time.h>

static const lt_dtype kDtypes[] = {LT_F32, LT_F64, LT_I32, LT_I64, LT_I8, LT_U8};
#define NDTYPES ((int)(sizeof kDtypes / sizeof kDtypes[0]))

/* ---- every op and dtype ---------------------------------------------------------------- */

/* The expected element j of rank r's result. */
static double expected(int kind, int op, int axis, int root, int n, int r, const int64_t *shape,
                       int ndim, int64_t j, lt_dtype dt) {
  int64_t inner = 1;
  for (int d = axis + 1; d < ndim; d++) inner *= shape[d];
  switch (kind) {
  case TW_ALL_REDUCE:
    return tw_reduce(op, NULL, n, j, dt);
  case TW_ALL_GATHER: {
    int64_t chunk = shape[axis] * inner, o = j / (n * chunk), rem = j % (n * chunk);
    return tw_val((int)(rem / chunk), o * chunk + rem % chunk, dt);
  }
  case TW_REDUCE_SCATTER: {
    int64_t blk = shape[axis] / n * inner, o = j / blk, e = j % blk;
    return tw_reduce(op, NULL, n, o * shape[axis] * inner + r * blk + e, dt);
  }
  default:
    return tw_val(root, j, dt);
  }
}

static int values_replica(int r, lt_device dev, void *arg) {
  tw_ctx *c = arg;
  int n = c->n;
  static const int64_t shape[3] = {2, 3, 2}; /* axis 1 of 3 rows: fits n = 3; axis 0 and 2: n = 2 */
  double got[64];
  for (int di = 0; di < NDTYPES; di++) {
    lt_dtype dt = kDtypes[di];
    for (int kind = TW_ALL_REDUCE; kind <= TW_BROADCAST; kind++) {
      for (int op = 0; op < 4; op++) {
        if (!tw_sweeps(kind, op, dt)) continue;
        int axis =
            kind == TW_REDUCE_SCATTER ? (n == 3 ? 1 : 2) : (kind == TW_ALL_GATHER ? n - 2 : 0);
        int root = n - 1;
        lt_scope_begin();
        lt_tensor *x = tw_input(dev, r, dt, shape, 3, tw_val), *y = NULL;
        switch (kind) {
        case TW_ALL_REDUCE:
          y = lt_all_reduce(x, (lt_reduce_op)op);
          break;
        case TW_ALL_GATHER:
          y = lt_all_gather(x, axis);
          break;
        case TW_REDUCE_SCATTER:
          y = lt_reduce_scatter(x, (lt_reduce_op)op, axis);
          break;
        default:
          y = lt_broadcast(x, root);
          break;
        }
        int rc = y ? tw_read_all(y, got) : lt_last_status();
        int64_t m = y ? lt_numel(y) : 0;
        if (rc == LT_OK && lt_get_dtype(y) != dt) rc = -100;
        for (int64_t j = 0; rc == LT_OK && j < m; j++) {
          double want = expected(kind, op, axis, root, n, r, shape, 3, j, dt);
          if (fabs(got[j] - want) > tw_tol(dt, want)) {
            snprintf(c->err[r], sizeof c->err[r], "%s kind %d op %d elem %lld: got %g want %g",
                     lt_dtype_name(dt), kind, op, (long long)j, got[j], want);
            rc = -101;
          }
        }
        if (rc != LT_OK && !c->err[r][0])
          snprintf(c->err[r], sizeof c->err[r], "%s kind %d op %d: %s", lt_dtype_name(dt), kind, op,
                   lt_last_error());
        lt_scope_end();
        if (rc != LT_OK) return rc;
        c->checked[r]++;
      }
    }
  }
  return LT_OK;
}

static void run_values(int n, const lt_backend *be) {
  lt_world *w = tw_world(n, be, 10000);
  assert_int_equal(lt_world_size(w), n);
  for (int r = 0; r < n; r++) {
    assert_int_equal(lt_world_device(w, r).index, r);
    assert_int_equal(lt_world_rank_of(lt_cpu(r)), r);
  }
  assert_int_equal(lt_world_device(w, n).index, -1);
  tw_ctx c;
  /* 6 dtypes x (4 all_reduce + gather + 4 reduce_scatter + broadcast), less
   * mean for the 4 integer dtypes */
  tw_run(w, NULL, values_replica, &c, be->name, 6 * 10 - 4 * 2);
  tw_world_free(w, NULL);
  assert_int_equal(lt_world_rank_of(lt_cpu(0)), -1);
}

static void test_values_two_and_three(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) {
    run_values(2, tu_backends[b]);
    run_values(3, tu_backends[b]);
  }
}

/* ---- one compile for the world ------------------------------------------------------------ */

/* x_r = r + i, 7 elements; z = all_reduce(x * x, sum) + x over *arg ranks. */
static int compile_replica(int r, lt_device dev, void *arg) {
  int n = *(const int *)arg;
  lt_scope_begin();
  float v[7];
  for (int i = 0; i < 7; i++) v[i] = (float)(r + i);
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(7), 1, v);
  lt_tensor *y = lt_all_reduce(lt_mul(x, x), LT_REDUCE_SUM);
  lt_tensor *z = lt_add(y, x);
  float out[7];
  int rc = z ? lt_to_data(z, out, sizeof out) : lt_last_status();
  for (int i = 0; rc == LT_OK && i < 7; i++) {
    float want = (float)(r + i);
    for (int k = 0; k < n; k++) want += (float)((k + i) * (k + i));
    if (out[i] != want) rc = -1;
  }
  lt_scope_end();
  return rc;
}

static void test_replicas_share_one_executable(void **state) {
  (void)state;
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(3, &w), LT_OK);
  int64_t before = tu_counter("UncachedCompile");
  const int n = 3;
  int rc = lt_world_run(w, compile_replica, (void *)&n);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  assert_int_equal(tu_counter("UncachedCompile") - before, 1);
  rc = lt_world_run(w, compile_replica, (void *)&n); /* and hit it next time */
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  assert_int_equal(tu_counter("UncachedCompile") - before, 1);
  lt_world_free(w);
}

/* ---- steps on the devices' workers ------------------------------------------------------- */

static int step_replica(int r, lt_device dev, void *arg) {
  (void)arg;
  double v = r + 1.0;
  lt_tensor *p = lt_from_data(dev, LT_F64, NULL, 0, &v);
  int rc = LT_OK;
  for (int s = 0; s < 5 && rc == LT_OK; s++) { /* p <- all_reduce(p, sum): (1+2) * 2^s */
    lt_scope_begin();
    rc = lt_assign(p, lt_all_reduce(p, LT_REDUCE_SUM));
    lt_scope_end();
    if (rc == LT_OK) rc = lt_mark_step(dev);
  }
  double got = 0;
  if (rc == LT_OK) rc = lt_to_data(p, &got, sizeof got);
  if (rc == LT_OK && got != 3.0 * 16) rc = -1;
  lt_release(p);
  return rc;
}

static void test_async_steps(void **state) {
  (void)state;
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  int rc = lt_world_run(w, step_replica, NULL);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  /* eager mode: each op (collectives too) runs at once on the device's worker */
  const int n = 2;
  lt_set_eager(true);
  rc = lt_world_run(w, compile_replica, (void *)&n);
  lt_set_eager(false);
  if (rc != LT_OK) fail_msg("eager: %s", lt_last_error());
  lt_world_free(w);
}

/* ---- bad configurations ------------------------------------------------------------------ */

static void test_no_world(void **state) {
  (void)state;
  lt_scope_begin();
  float v[4] = {1, 2, 3, 4};
  lt_tensor *x = lt_from_data(lt_cpu(5), LT_F32, SHAPE(4), 1, v);
  assert_null(lt_all_reduce(x, LT_REDUCE_SUM));
  assert_int_equal(lt_last_status(), LT_EDEVICE);
  tu_expect_substr(lt_last_error(), "CPU:5 belongs to no world");
  assert_null(lt_all_gather(x, 0));
  assert_null(lt_reduce_scatter(x, LT_REDUCE_SUM, 0));
  assert_null(lt_broadcast(x, 0));
  assert_int_equal(lt_world_rank_of(lt_cpu(5)), -1);

  /* traced in a world, run after it is gone: an error, not a hang */
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(1, &w), LT_OK);
  lt_tensor *a = lt_from_data(CPU0, LT_F32, SHAPE(4), 1, v);
  lt_tensor *y = lt_all_reduce(a, LT_REDUCE_SUM);
  assert_non_null(y);
  lt_world_free(w);
  float out[4];
  assert_int_equal(lt_to_data(y, out, sizeof out), LT_EEXEC);
  tu_expect_substr(lt_last_error(), "belongs to no world");
  lt_scope_end();
}

static void test_bad_arguments(void **state) {
  (void)state;
  lt_world *w = NULL, *w2 = NULL;
  assert_int_equal(lt_world_local(0, &w), LT_EINVAL);
  assert_int_equal(lt_world_local(LT_MAX_DEVICES + 1, &w), LT_EINVAL);
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  assert_int_equal(lt_world_local(3, &w2), LT_EINVAL); /* CPU:0, CPU:1 are taken */
  tu_expect_substr(lt_last_error(), "already belongs to a world");
  assert_null(w2);
  assert_int_equal(lt_world_set_timeout_ms(w, 0), LT_EINVAL);
  lt_scope_begin();
  uint8_t bv[6] = {0};
  int32_t iv[6] = {0};
  lt_tensor *b = lt_from_data(CPU0, LT_BOOL, SHAPE(6), 1, bv);
  lt_tensor *i = lt_from_data(CPU0, LT_I32, SHAPE(3, 2), 2, iv);
  assert_null(lt_all_reduce(b, LT_REDUCE_MEAN)); /* bool: any, all (test_collectives_exchange) */
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  assert_null(lt_all_reduce(i, LT_REDUCE_MEAN));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  assert_null(lt_all_reduce(i, (lt_reduce_op)7));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_null(lt_reduce_scatter(i, LT_REDUCE_SUM, 0)); /* 3 rows, 2 replicas */
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "does not divide into 2 replicas");
  assert_null(lt_all_gather(i, 2));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_null(lt_broadcast(i, 2));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  lt_tensor *s = lt_from_data(CPU0, LT_I32, NULL, 0, iv);
  assert_null(lt_all_gather(s, 0));
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  /* bool moves */
  assert_non_null(lt_all_gather(b, 0));
  assert_non_null(lt_broadcast(b, 1));
  lt_tensor *g = lt_reduce_scatter(i, LT_REDUCE_MAX, 1);
  assert_non_null(g);
  assert_int_equal(lt_ndim(g), 2);
  lt_scope_end();
  lt_world_free(w);
}

static int mismatch_replica(int r, lt_device dev, void *arg) {
  (void)arg;
  lt_scope_begin();
  float v[5] = {1, 2, 3, 4, 5};
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(4 + r), 1, v);
  float out[5];
  int rc = lt_to_data(lt_all_reduce(x, LT_REDUCE_SUM), out, sizeof out);
  lt_scope_end();
  return rc;
}

/* Rank 1 never joins: it returns at once (*arg == 0) or stalls for *arg ms first. */
static int skip_replica(int r, lt_device dev, void *arg) {
  int stall_ms = *(const int *)arg;
  if (r == 1) {
    struct timespec ts = {stall_ms / 1000, (stall_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return LT_OK;
  }
  lt_scope_begin();
  float v[2] = {1, 2}, out[2];
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(2), 1, v);
  int rc = lt_to_data(lt_all_reduce(x, LT_REDUCE_SUM), out, sizeof out);
  lt_scope_end();
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_replicas_that_disagree(void **state) {
  (void)state;
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  assert_int_equal(lt_world_set_timeout_ms(w, 5000), LT_OK);
  assert_int_equal(lt_world_run(w, mismatch_replica, NULL), LT_EEXEC);
  tu_expect_substr(lt_last_error(), "replicas disagree");
  tu_expect_substr(lt_last_error(), "f32[4]");
  tu_expect_substr(lt_last_error(), "f32[5]");
  /* the world stays broken: the next collective fails at once */
  assert_int_equal(lt_world_run(w, mismatch_replica, NULL), LT_EEXEC);
  tu_expect_substr(lt_last_error(), "replicas disagree");
  lt_world_free(w);
}

/* The same all-reduce (f32[4] sum) after x + x on rank 0 and x * x on
 * rank 1: the graphs around it differ, so the replicas disagree there. */
static int graph_replica(int r, lt_device dev, void *arg) {
  (void)arg;
  lt_scope_begin();
  float v[4] = {1, 2, 3, 4}, out[4];
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  lt_tensor *y = r == 0 ? lt_add(x, x) : lt_mul(x, x);
  int rc = lt_to_data(lt_all_reduce(y, LT_REDUCE_SUM), out, sizeof out);
  lt_scope_end();
  return rc;
}

static void test_replicas_in_different_graphs(void **state) {
  (void)state;
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  assert_int_equal(lt_world_set_timeout_ms(w, 5000), LT_OK);
  assert_int_equal(lt_world_run(w, graph_replica, NULL), LT_EEXEC);
  tu_expect_substr(lt_last_error(), "replicas disagree");
  tu_expect_substr(lt_last_error(), "rank 0 runs all_reduce(sum) f32[4]");
  tu_expect_substr(lt_last_error(), "rank 1 runs all_reduce(sum) f32[4]");
  tu_expect_substr(lt_last_error(), "graph");
  lt_world_free(w);
}

/* Each replica all-reduces its own slice of x (at rank * 2): the graphs
 * differ only in the slice's start, as in data parallelism where a replica
 * slices its shard of the batch; their fingerprints agree, so they pair.
 * rank 0 has x[0:2] = {1, 2}, rank 1 x[2:4] = {3, 4}: the sum is {4, 6}. */
static int shard_replica(int r, lt_device dev, void *arg) {
  float *got = (float *)arg + 2 * r;
  lt_scope_begin();
  float v[4] = {1, 2, 3, 4};
  const int64_t lo[1] = {2 * r}, hi[1] = {2 * r + 2};
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  int rc = lt_to_data(lt_all_reduce(lt_slice_n(x, lo, hi, NULL, lt_ndim(x)), LT_REDUCE_SUM), got,
                      2 * sizeof *got);
  lt_scope_end();
  return rc;
}

static void test_replicas_slicing_their_shard_agree(void **state) {
  (void)state;
  lt_world *w = NULL;
  float got[4] = {0, 0, 0, 0};
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  int rc = lt_world_run(w, shard_replica, got);
  if (rc != LT_OK) fail_msg("lt_world_run: %s", lt_last_error());
  for (int r = 0; r < 2; r++) {
    assert_true(got[2 * r] == 4.0f);
    assert_true(got[2 * r + 1] == 6.0f);
  }
  lt_world_free(w);
}

static void test_a_replica_that_skips_times_out(void **state) {
  (void)state;
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  assert_int_equal(lt_world_set_timeout_ms(w, 200), LT_OK);
  /* stalls: rank 0 gives up after the timeout */
  int stall_ms = 700;
  double t0 = now_s();
  assert_int_equal(lt_world_run(w, skip_replica, &stall_ms), LT_EEXEC);
  double dt = now_s() - t0;
  tu_expect_substr(lt_last_error(), "rank 0: ");
  tu_expect_substr(lt_last_error(), "waited 200 ms");
  tu_expect_substr(lt_last_error(), "rank(s) 1 never joined");
  assert_true(dt >= 0.19 && dt < 5.0);
  lt_world_free(w);

  /* returns without joining: rank 0 fails as soon as it is gone, not at the
   * (long) timeout */
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  assert_int_equal(lt_world_set_timeout_ms(w, 20000), LT_OK);
  stall_ms = 0;
  t0 = now_s();
  assert_int_equal(lt_world_run(w, skip_replica, &stall_ms), LT_EEXEC);
  dt = now_s() - t0;
  tu_expect_substr(lt_last_error(), "rank 0: ");
  tu_expect_substr(lt_last_error(), "rank(s) 1, whose replica function returned");
  assert_true(dt < 5.0);
  lt_world_free(w);
}

/* ---- gradients --------------------------------------------------------------------------- */

/* World of 2: the gradient of x_r (hand-derived, c_k the weights of rank k;
 * tw_grad_replica says the rest):
 *   all_reduce sum    sum_k c_k                     mean: that / n
 *   all_gather        c_k's block r, summed over k  (y_k = [x_0..x_{n-1}])
 *   reduce_scatter    rank k's y_k = sum_q x_q[block k], so x_r[j] gets c_{j / blk}[j % blk]
 *                     (mean: / n) */
static lt_tensor *grad_op(const tw_ctx *c, lt_tensor *x, int kind) {
  (void)c;
  return kind == 0   ? lt_all_reduce(x, LT_REDUCE_SUM)
         : kind == 1 ? lt_all_reduce(x, LT_REDUCE_MEAN)
         : kind == 2 ? lt_all_gather(x, 0)
         : kind == 3 ? lt_reduce_scatter(x, LT_REDUCE_SUM, 0)
                     : lt_reduce_scatter(x, LT_REDUCE_MEAN, 0);
}

static double grad_want(const tw_ctx *c, int r, int kind, int j) {
  const int n = c->n, m = 4;
  double want = 0;
  for (int k = 0; k < n; k++) {
    if (kind <= 1) want += 1 + k + 0.5 * j;
    if (kind == 2) want += 1 + k + 0.5 * (r * m + j);
  }
  if (kind == 1) want /= n;
  if (kind >= 3) {
    int blk = m / n, k = j / blk;
    want = 1 + k + 0.5 * (j % blk);
    if (kind == 4) want /= n;
  }
  return want;
}

static int grad_replica(int r, lt_device dev, void *arg) {
  return tw_grad_replica(arg, r, dev, 5, grad_op, grad_want);
}

static int grad_max_replica(int r, lt_device dev, void *arg) {
  (void)r;
  (void)arg;
  lt_scope_begin();
  double xv[2] = {1, 2};
  lt_tensor *x = lt_from_data(dev, LT_F64, SHAPE(2), 1, xv);
  lt_set_requires_grad(x, true);
  int rc = lt_backward(lt_sum(lt_all_reduce(x, LT_REDUCE_MAX), NULL, 0, false));
  lt_scope_end();
  return rc;
}

static void test_gradients(void **state) {
  (void)state;
  lt_world *w = tw_world(2, NULL, 0);
  tw_ctx c;
  tw_run(w, NULL, grad_replica, &c, "gradients", -1);
  assert_int_equal(lt_world_run(w, grad_max_replica, NULL), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "all_reduce(max) has no gradient");
  tw_world_free(w, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_two_and_three),
      cmocka_unit_test(test_replicas_share_one_executable),
      cmocka_unit_test(test_async_steps),
      cmocka_unit_test(test_no_world),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_replicas_that_disagree),
      cmocka_unit_test(test_replicas_in_different_graphs),
      cmocka_unit_test(test_replicas_slicing_their_shard_agree),
      cmocka_unit_test(test_a_replica_that_skips_times_out),
      cmocka_unit_test(test_gradients),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
