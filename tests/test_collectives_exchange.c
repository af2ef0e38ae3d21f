/* The exchanging collectives (lazytensor_collective.h) and bool reductions
 * on in-process worlds of 2 and 3 replicas, on both backends:
 * lt_all_to_all and lt_collective_permute against values computed here by
 * plain loops (index arithmetic, not the library's copy routine), their
 * gradients against hand-derived ones, all_reduce / reduce_scatter of bool
 * tensors (any, all, and torch's sum/max/min on bool), bad arguments, and
 * replicas whose calls disagree (a clear error on every rank, no hang).
 * test_collectives.c holds the other collectives. */
#include "test_world_util.h"

static const lt_dtype kDtypes[] = {LT_F32, LT_F64, LT_I32, LT_I8, LT_U8, LT_BOOL, LT_BF16};
#define NDTYPES ((int)(sizeof kDtypes / sizeof kDtypes[0]))

/* Rank r's element i: distinct per rank and index, exact in every dtype
 * (bool: a pattern with both values). */
static double val(int r, int64_t i, lt_dtype dt) {
  if (dt == LT_BOOL) return (double)((r * 7 + i * 3) % 5 < 2);
  if (dt == LT_F32 || dt == LT_F64 || dt == LT_BF16) return (r + 1) * 0.5 + (double)(i % 32) - r;
  double v = (double)((r * 5 + i * 3) % 13);
  return dt == LT_U8 ? v : v - 6;
}

static int64_t flat(const int64_t *idx, const int64_t *shape, int ndim) {
  int64_t o = 0;
  for (int d = 0; d < ndim; d++) o = o * shape[d] + idx[d];
  return o;
}

static void unflat(int64_t o, const int64_t *shape, int ndim, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = o % shape[d];
    o /= shape[d];
  }
}

/* all_to_all on n ranks: where element j of rank r's result comes from
 * (*from_rank, and the flat index in its input). */
static int64_t a2a_source(int n, int r, const int64_t *in, int ndim, int sa, int ca, int64_t j,
                          int *from_rank) {
  int64_t out[LT_MAX_DIMS], idx[LT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) out[d] = in[d];
  out[sa] /= n;
  int64_t box_c = out[ca]; /* the block size along concat_axis */
  out[ca] *= n;
  unflat(j, out, ndim, idx);
  *from_rank = (int)(idx[ca] / box_c);
  idx[ca] %= box_c;
  idx[sa] += r * (in[sa] / n);
  return flat(idx, in, ndim);
}

static double tol(lt_dtype dt, double want) {
  return dt == LT_BF16 ? 1e-2 * (1 + fabs(want)) : 1e-12 * (1 + fabs(want));
}

/* ---- all_to_all and collective_permute values ----------------------------------------------- */

static const int64_t kShape[3] = {6, 4, 3}; /* axis 0 splits for n = 2, 3; 1 for 2; 2 for 3 */
static const int kAxes[][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 2}, {1, 0}, {2, 0}, {2, 1}, {-1, -3}};
#define NAXES ((int)(sizeof kAxes / sizeof kAxes[0]))

static int a2a_replica(int r, lt_device dev, void *arg) {
  tw_ctx *c = arg;
  int n = c->n;
  double got[72];
  for (int di = 0; di < NDTYPES; di++) {
    lt_dtype dt = kDtypes[di];
    for (int a = 0; a < NAXES; a++) {
      int sa = (kAxes[a][0] + 3) % 3, ca = (kAxes[a][1] + 3) % 3;
      if (kShape[sa] % n) continue;
      lt_scope_begin();
      lt_tensor *y = lt_all_to_all(tw_input(dev, r, dt, kShape, 3, val), kAxes[a][0], kAxes[a][1]);
      int rc = y ? tw_read_all(y, got) : lt_last_status();
      int64_t want_shape[3] = {kShape[0], kShape[1], kShape[2]};
      want_shape[sa] /= n;
      want_shape[ca] *= n;
      if (rc == LT_OK && (lt_get_dtype(y) != dt || lt_ndim(y) != 3 ||
                          memcmp(lt_shape(y), want_shape, sizeof want_shape) != 0))
        rc = -100;
      for (int64_t j = 0; rc == LT_OK && j < 72; j++) {
        int k;
        int64_t i = a2a_source(n, r, kShape, 3, sa, ca, j, &k);
        double want = val(k, i, dt);
        if (fabs(got[j] - want) > tol(dt, want)) {
          snprintf(c->err[r], sizeof c->err[r], "%s split %d concat %d elem %lld: got %g want %g",
                   lt_dtype_name(dt), sa, ca, (long long)j, got[j], want);
          rc = -101;
        }
      }
      if (rc != LT_OK && !c->err[r][0])
        snprintf(c->err[r], sizeof c->err[r], "%s split %d concat %d: %s", lt_dtype_name(dt), sa,
                 ca, lt_last_error());
      lt_scope_end();
      if (rc != LT_OK) return rc;
      c->checked[r]++;
    }
  }
  return LT_OK;
}

/* Permutations for n ranks (pairs, count): a rotation, one with a rank
 * left out (it gets zeros) and a fixed point, none at all. */
static int perm_pairs(int n, int which, int *pairs) {
  switch (which) {
  case 0: /* r -> r + 1 */
    for (int r = 0; r < n; r++) pairs[2 * r] = r, pairs[2 * r + 1] = (r + 1) % n;
    return n;
  case 1: /* 1 -> 0 and (n = 3) 2 -> 2: rank 1 gets zeros */
    pairs[0] = 1, pairs[1] = 0;
    pairs[2] = n - 1, pairs[3] = n - 1;
    return n == 2 ? 1 : 2;
  default:
    return 0;
  }
}

static int permute_replica(int r, lt_device dev, void *arg) {
  tw_ctx *c = arg;
  int n = c->n;
  double got[12];
  for (int di = 0; di < NDTYPES; di++) {
    lt_dtype dt = kDtypes[di];
    for (int which = 0; which < 3; which++) {
      int pairs[2 * LT_MAX_DEVICES];
      int np = perm_pairs(n, which, pairs);
      int from = -1;
      for (int k = 0; k < np; k++)
        if (pairs[2 * k + 1] == r) from = pairs[2 * k];
      lt_scope_begin();
      lt_tensor *y = lt_collective_permute(tw_input(dev, r, dt, SHAPE(3, 4), 2, val), pairs, np);
      int rc = y ? tw_read_all(y, got) : lt_last_status();
      if (rc == LT_OK && (lt_get_dtype(y) != dt || lt_numel(y) != 12)) rc = -100;
      for (int64_t j = 0; rc == LT_OK && j < 12; j++) {
        double want = from < 0 ? 0 : val(from, j, dt);
        if (fabs(got[j] - want) > tol(dt, want)) {
          snprintf(c->err[r], sizeof c->err[r], "%s permutation %d elem %lld: got %g want %g",
                   lt_dtype_name(dt), which, (long long)j, got[j], want);
          rc = -101;
        }
      }
      if (rc != LT_OK && !c->err[r][0])
        snprintf(c->err[r], sizeof c->err[r], "%s permutation %d: %s", lt_dtype_name(dt), which,
                 lt_last_error());
      lt_scope_end();
      if (rc != LT_OK) return rc;
      c->checked[r]++;
    }
  }
  return LT_OK;
}

static void run_world(int n, const lt_backend *be, lt_replica_fn fn, int want_checked) {
  lt_world *w = tw_world(n, be, 10000);
  tw_ctx c;
  tw_run(w, NULL, fn, &c, be->name, want_checked);
  tw_world_free(w, NULL);
}

static void test_all_to_all_values(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) {
    /* axis pairs whose split axis divides: n = 2: 5 of 8; n = 3: 6 of 8 */
    run_world(2, tu_backends[b], a2a_replica, NDTYPES * 5);
    run_world(3, tu_backends[b], a2a_replica, NDTYPES * 6);
  }
}

static void test_permute_values(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) {
    run_world(2, tu_backends[b], permute_replica, NDTYPES * 3);
    run_world(3, tu_backends[b], permute_replica, NDTYPES * 3);
  }
}

/* ---- bool reductions ------------------------------------------------------------------------ */

/* Element i of rank r: bit r of i, so that 8 elements over 3 ranks hold
 * every combination (all false, all true, mixed). */
static int bool_replica(int r, lt_device dev, void *arg) {
  tw_ctx *c = arg;
  int n = c->n;
  uint8_t v[8];
  for (int i = 0; i < 8; i++) v[i] = (uint8_t)(i >> r & 1);
  /* the public op, and whether it is an or (else an and) */
  static const struct {
    lt_reduce_op op;
    bool is_or;
  } ops[] = {{LT_REDUCE_ANY, true},
             {LT_REDUCE_ALL, false},
             {LT_REDUCE_SUM, true},
             {LT_REDUCE_MAX, true},
             {LT_REDUCE_MIN, false}};
  for (int k = 0; k < 5; k++) {
    for (int scatter = 0; scatter < (n == 2 ? 2 : 1); scatter++) { /* [2, 4]: rows per rank */
      lt_scope_begin();
      lt_tensor *x = lt_from_data(dev, LT_BOOL, SHAPE(8), 1, v);
      lt_tensor *y = scatter ? lt_reduce_scatter(lt_reshape(x, SHAPE(2, 4), 2), ops[k].op, 0)
                             : lt_all_reduce(x, ops[k].op);
      double got[8];
      int rc = y ? tw_read_all(y, got) : lt_last_status();
      int64_t m = y ? lt_numel(y) : 0, off = 0;
      if (rc == LT_OK && lt_get_dtype(y) != LT_BOOL) rc = -100;
      if (scatter) off = 4 * r; /* rank r keeps row r of [2, 4] */
      if (rc == LT_OK && m != (scatter ? 4 : 8)) rc = -100;
      for (int64_t j = 0; rc == LT_OK && j < m; j++) {
        int64_t i = off + j;
        bool acc = !ops[k].is_or;
        for (int q = 0; q < n; q++)
          acc = ops[k].is_or ? (acc || (i >> q & 1)) : (acc && (i >> q & 1));
        if (got[j] != (double)acc) {
          snprintf(c->err[r], sizeof c->err[r], "op %d scatter %d elem %lld: got %g want %d",
                   (int)ops[k].op, scatter, (long long)j, got[j], acc);
          rc = -101;
        }
      }
      if (rc != LT_OK && !c->err[r][0])
        snprintf(c->err[r], sizeof c->err[r], "op %d scatter %d: %s", (int)ops[k].op, scatter,
                 lt_last_error());
      lt_scope_end();
      if (rc != LT_OK) return rc;
      c->checked[r]++;
    }
  }
  return LT_OK;
}

static void test_bool_reductions(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) {
    run_world(2, tu_backends[b], bool_replica, 10);
    run_world(3, tu_backends[b], bool_replica, 5);
  }
}

/* ---- gradients ------------------------------------------------------------------------------ */

/* Rank r's loss is sum(y_r * w_r) with w_r[j] = 1 + r + 0.25 j; the
 * gradient of x_r[i] is w_k[j] where x_r[i] lands as element j of rank k's
 * result (all_to_all: found by searching a2a_source over every rank's
 * result; permute: k is r's target, j = i; no target: 0). */
static int grad_replica(int r, lt_device dev, void *arg) {
  tw_ctx *c = arg;
  int n = c->n;
  int rc = LT_OK;
  for (int kind = 0; kind < 3 && rc == LT_OK; kind++) {
    int sa = kind == 0 ? 0 : 2, ca = kind == 0 ? 2 : 0; /* kind 2: permute */
    const int64_t *shape = SHAPE(6, 2, 6);
    /* 0 -> 1 (and 1 -> 2 in a world of 3): not its own inverse */
    int pairs[4] = {0, 1, 1, 2}, npairs = n == 2 ? 1 : 2;
    lt_scope_begin();
    lt_tensor *x = tw_input(dev, r, LT_F64, shape, 3, val);
    lt_set_requires_grad(x, true);
    lt_tensor *y = kind < 2 ? lt_all_to_all(x, sa, ca) : lt_collective_permute(x, pairs, npairs);
    double wv[72];
    for (int j = 0; j < 72; j++) wv[j] = 1 + r + 0.25 * j;
    lt_tensor *w = y ? lt_from_data(dev, LT_F64, lt_shape(y), 3, wv) : NULL;
    lt_tensor *loss = lt_sum(lt_mul(y, w), NULL, 0, false);
    rc = loss ? lt_backward(loss) : lt_last_status();
    double g[72];
    if (rc == LT_OK) rc = lt_grad(x) ? tw_read_all(lt_grad(x), g) : -1;
    for (int64_t i = 0; rc == LT_OK && i < 72; i++) {
      double want = 0;
      if (kind == 2) {
        int target = r == 0 ? 1 : r == 1 && n == 3 ? 2 : -1;
        if (target >= 0) want = 1 + target + 0.25 * (double)i;
      } else {
        for (int k = 0; k < n; k++)
          for (int64_t j = 0; j < 72; j++) {
            int from;
            if (a2a_source(n, k, shape, 3, sa, ca, j, &from) == i && from == r)
              want = 1 + k + 0.25 * (double)j;
          }
      }
      if (fabs(g[i] - want) > 1e-12) {
        snprintf(c->err[r], sizeof c->err[r], "kind %d grad[%lld] = %g, want %g", kind,
                 (long long)i, g[i], want);
        rc = -1;
      }
    }
    if (rc != LT_OK && !c->err[r][0])
      snprintf(c->err[r], sizeof c->err[r], "kind %d: %s", kind, lt_last_error());
    lt_scope_end();
    if (rc == LT_OK) c->checked[r]++;
  }
  return rc;
}

static void test_gradients(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) {
    run_world(2, tu_backends[b], grad_replica, 3);
    run_world(3, tu_backends[b], grad_replica, 3);
  }
}

/* ---- bad arguments -------------------------------------------------------------------------- */

static void test_bad_arguments(void **state) {
  (void)state;
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(3, &w), LT_OK);
  lt_scope_begin();
  float fv[12] = {0};
  uint8_t bv[6] = {0};
  lt_tensor *f = lt_from_data(CPU0, LT_F32, SHAPE(3, 4), 2, fv);
  lt_tensor *b = lt_from_data(CPU0, LT_BOOL, SHAPE(6), 1, bv);
  lt_tensor *s = lt_from_data(CPU0, LT_F32, NULL, 0, fv);
  lt_tensor *off = lt_from_data(lt_cpu(5), LT_F32, SHAPE(3), 1, fv);

  assert_null(lt_all_to_all(f, 1, 0)); /* 4 columns, 3 replicas */
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "lt_all_to_all: split axis 1 of [3, 4] does not divide");
  assert_null(lt_all_to_all(f, 0, 2));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_all_to_all");
  assert_null(lt_all_to_all(s, 0, 0));
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  assert_null(lt_all_to_all(off, 0, 0));
  assert_int_equal(lt_last_status(), LT_EDEVICE);
  assert_non_null(lt_all_to_all(f, 0, 1));
  assert_non_null(lt_all_to_all(b, 0, 0)); /* bool moves */

  int dup_src[4] = {0, 1, 0, 2}, dup_dst[4] = {0, 1, 2, 1}, out_of_range[2] = {0, 3};
  int neg[2] = {-1, 0}, ok[4] = {2, 0, 0, 2};
  assert_null(lt_collective_permute(f, dup_src, 2));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_collective_permute: pair 1 (0 -> 2): rank 0 is the source");
  assert_null(lt_collective_permute(f, dup_dst, 2));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "rank 1 is the target of two pairs");
  assert_null(lt_collective_permute(f, out_of_range, 1));
  tu_expect_substr(lt_last_error(), "lt_collective_permute: pair 0 (0 -> 3) names a rank outside");
  assert_null(lt_collective_permute(f, neg, 1));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_null(lt_collective_permute(f, NULL, 1));
  tu_expect_substr(lt_last_error(), "pairs is NULL");
  assert_null(lt_collective_permute(f, ok, -1));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_null(lt_collective_permute(f, ok, 4));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_null(lt_collective_permute(off, ok, 2));
  assert_int_equal(lt_last_status(), LT_EDEVICE);
  assert_non_null(lt_collective_permute(f, ok, 2));
  assert_non_null(lt_collective_permute(s, NULL, 0)); /* 0-d, no pairs: zeros */

  assert_null(lt_all_reduce(f, LT_REDUCE_ANY));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  tu_expect_substr(lt_last_error(), "lt_all_reduce: any needs a bool tensor, got f32");
  assert_null(lt_reduce_scatter(f, LT_REDUCE_ALL, 0));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  tu_expect_substr(lt_last_error(), "lt_reduce_scatter: all needs a bool tensor");
  assert_null(lt_all_reduce(b, LT_REDUCE_MEAN));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  tu_expect_substr(lt_last_error(), "lt_all_reduce: mean of bool tensors");
  assert_null(lt_all_reduce(b, (lt_reduce_op)6));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  lt_scope_end();
  lt_world_free(w);
}

/* ---- replicas that disagree ----------------------------------------------------------------- */

/* *arg picks the disagreement: 0 rank 0 all_to_all, rank 1 all_gather (same
 * input); 1 all_to_all with other concat axes; 2 permutes with other pairs. */
static int mismatch_replica(int r, lt_device dev, void *arg) {
  int which = *(const int *)arg;
  lt_scope_begin();
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[16];
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(2, 4), 2, v), *y = NULL;
  int swap[4] = {0, 1, 1, 0}, self[4] = {0, 0, 1, 1};
  if (which == 0) y = r == 0 ? lt_all_to_all(x, 1, 1) : lt_all_gather(x, 1);
  if (which == 1) y = lt_all_to_all(x, 0, r);
  if (which == 2) y = lt_collective_permute(x, r == 0 ? swap : self, 2);
  int rc = y ? lt_to_data(y, out, (size_t)lt_numel(y) * sizeof *out) : lt_last_status();
  lt_scope_end();
  return rc;
}

static void test_replicas_that_disagree(void **state) {
  (void)state;
  static const char *want[3][2] = {
      {"rank 0 runs all_to_all split 1 concat 1 f32[2, 4]", "rank 1 runs all_gather axis 1 f32"},
      {"rank 0 runs all_to_all split 0 concat 0 f32", "rank 1 runs all_to_all split 0 concat 1"},
      {"rank 0 runs collective_permute pairs {1->0, 0->1} f32",
       "rank 1 runs collective_permute pairs {0->0, 1->1} f32"}};
  for (int which = 0; which < 3; which++) {
    lt_world *w = NULL;
    assert_int_equal(lt_world_local(2, &w), LT_OK);
    /* the check fails at once: a long deadline must not be reached */
    assert_int_equal(lt_world_set_timeout_ms(w, 60000), LT_OK);
    assert_int_equal(lt_world_run(w, mismatch_replica, &which), LT_EEXEC);
    tu_expect_substr(lt_last_error(), "replicas disagree");
    tu_expect_substr(lt_last_error(), want[which][0]);
    tu_expect_substr(lt_last_error(), want[which][1]);
    lt_world_free(w);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_to_all_values), cmocka_unit_test(test_permute_values),
      cmocka_unit_test(test_bool_reductions),   cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_bad_arguments),     cmocka_unit_test(test_replicas_that_disagree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
