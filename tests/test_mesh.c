/* Meshes and collectives over replica groups (lazytensor_world.h,
 * lazytensor_collective.h: lt_*_over) on in-process worlds: a 2 x 2 mesh
 * (the data x model mesh of a 2-d parallel step) and a 2 x 3 one (groups of
 * unequal sizes along its two axes), every op along each axis against values
 * computed here from the group's members, on both backends; the gradients
 * over a group; replicas that name different groups; mesh construction and
 * bad arguments. */
#include "test_util.h"

#include "lazytensor_dist.h"
#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

static const lt_dtype kDtypes[] = {LT_F32, LT_F64, LT_I32, LT_U8};
#define NDTYPES ((int)(sizeof kDtypes / sizeof kDtypes[0]))

/* Rank r's element i: distinct per rank, exact in every dtype. */
static double val(int r, int64_t i, lt_dtype dt) {
  if (dt == LT_F32 || dt == LT_F64) return (r + 1) * 0.5 + (double)i * 1.25 - (double)(i % 3) * r;
  double v = (double)((r * 5 + i * 3) % 13);
  return dt == LT_U8 ? v : v - 6;
}

/* The members of rank r's group along mesh axis a of an R x C mesh. */
static int members(int r, int a, int C, int R, int *out) {
  int n = a == 0 ? R : C, stride = a == 0 ? C : 1;
  int base = a == 0 ? r % C : r - r % C;
  for (int j = 0; j < n; j++) out[j] = base + j * stride;
  return n;
}

static double reduce(int op, const int *mem, int n, int64_t i, lt_dtype dt) {
  double acc = val(mem[0], i, dt);
  for (int k = 1; k < n; k++) {
    double v = val(mem[k], i, dt);
    if (op == LT_REDUCE_SUM || op == LT_REDUCE_MEAN) acc += v;
    if (op == LT_REDUCE_MAX && v > acc) acc = v;
    if (op == LT_REDUCE_MIN && v < acc) acc = v;
  }
  return op == LT_REDUCE_MEAN ? acc / n : acc;
}

enum { K_ALL_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_BROADCAST };

typedef struct mesh_ctx {
  const lt_mesh *m;
  int R, C;
  int checked[LT_MAX_DEVICES];
  char err[LT_MAX_DEVICES][300];
} mesh_ctx;

/* Element j of rank r's result (input shape {6, 2}, ops along axis 0). */
static double expected(int kind, int op, const int *mem, int n, int g, int64_t j, lt_dtype dt) {
  const int64_t rows = 6, cols = 2;
  switch (kind) {
  case K_ALL_REDUCE:
    return reduce(op, mem, n, j, dt);
  case K_ALL_GATHER: /* [n * 6, 2]: member k's rows, in group order */
    return val(mem[j / (rows * cols)], j % (rows * cols), dt);
  case K_REDUCE_SCATTER: /* [6 / n, 2]: chunk g of the reduction */
    return reduce(op, mem, n, g * (rows / n) * cols + j, dt);
  default: /* root: the group's last member */
    return val(mem[n - 1], j, dt);
  }
}

static int mesh_replica(int r, lt_device dev, void *arg) {
  mesh_ctx *c = arg;
  static const int64_t shape[2] = {6, 2}; /* 6 rows: split by groups of 2 and of 3 */
  double got[64];
  for (int a = 0; a < 2; a++) {
    int mem[LT_MAX_DEVICES];
    int n = members(r, a, c->C, c->R, mem), g = lt_mesh_coord(c->m, r, a);
    if (mem[g] != r) {
      snprintf(c->err[r], sizeof c->err[r], "lt_mesh_coord(%d, %d) = %d", r, a, g);
      return -1;
    }
    for (int di = 0; di < NDTYPES; di++) {
      lt_dtype dt = kDtypes[di];
      bool fl = dt == LT_F32 || dt == LT_F64;
      for (int kind = K_ALL_REDUCE; kind <= K_BROADCAST; kind++) {
        for (int op = 0; op < 4; op++) {
          if ((kind == K_ALL_GATHER || kind == K_BROADCAST) && op > 0) continue;
          if (op == LT_REDUCE_MEAN && !fl) continue;
          lt_scope_begin();
          unsigned char buf[12 * 8];
          for (int i = 0; i < 12; i++) lt__store_f64(dt, buf, i, val(r, i, dt));
          lt_tensor *x = lt_from_data(dev, dt, shape, 2, buf), *y = NULL;
          switch (kind) {
          case K_ALL_REDUCE:
            y = lt_all_reduce_over(x, c->m, a, (lt_reduce_op)op);
            break;
          case K_ALL_GATHER:
            y = lt_all_gather_over(x, c->m, a, 0);
            break;
          case K_REDUCE_SCATTER:
            y = lt_reduce_scatter_over(x, c->m, a, (lt_reduce_op)op, 0);
            break;
          default:
            y = lt_broadcast_over(x, c->m, a, n - 1);
            break;
          }
          int64_t want_rows = kind == K_ALL_GATHER ? 6 * n : kind == K_REDUCE_SCATTER ? 6 / n : 6;
          int rc = !y ? lt_last_status() : lt_dim(y, 0) != want_rows ? -102 : LT_OK;
          int64_t m = y ? lt_numel(y) : 0;
          if (rc == LT_OK) {
            unsigned char *ob = malloc((size_t)m * 8 + 1);
            rc = lt_to_data(y, ob, (size_t)m * lt_dtype_size(dt));
            for (int64_t j = 0; rc == LT_OK && j < m; j++) got[j] = lt__load_f64(dt, ob, j);
            free(ob);
          }
          for (int64_t j = 0; rc == LT_OK && j < m; j++) {
            unsigned char wb[8];
            lt__store_f64(dt, wb, 0, expected(kind, op, mem, n, g, j, dt)); /* cast as dt wraps */
            double want = lt__load_f64(dt, wb, 0);
            double tol = dt == LT_F32 ? 1e-6 * (1 + fabs(want)) : 1e-12 * (1 + fabs(want));
            if (fabs(got[j] - want) > tol) {
              snprintf(c->err[r], sizeof c->err[r],
                       "mesh axis %d %s kind %d op %d elem %lld: got %g want %g", a,
                       lt_dtype_name(dt), kind, op, (long long)j, got[j], want);
              rc = -101;
            }
          }
          if (rc != LT_OK && !c->err[r][0])
            snprintf(c->err[r], sizeof c->err[r], "mesh axis %d %s kind %d op %d: %s (%d)", a,
                     lt_dtype_name(dt), kind, op, lt_last_error(), rc);
          lt_scope_end();
          if (rc != LT_OK) return rc;
          c->checked[r]++;
        }
      }
    }
  }
  return LT_OK;
}

static void run_mesh(int R, int C, const lt_backend *be) {
  lt__backend_force(be);
  lt_world *w = NULL;
  lt_mesh *m = NULL;
  assert_int_equal(lt_world_local(R * C, &w), LT_OK);
  assert_int_equal(lt_world_set_timeout_ms(w, 20000), LT_OK);
  const int shape[2] = {R, C};
  const char *names[2] = {"data", "model"};
  assert_int_equal(lt_mesh_new(w, 2, shape, names, &m), LT_OK);
  assert_int_equal(lt_mesh_axis(m, "model"), 1);
  mesh_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.R = R;
  c.C = C;
  int rc = lt_world_run(w, mesh_replica, &c);
  for (int r = 0; r < R * C; r++)
    if (c.err[r][0]) fail_msg("%s, mesh %dx%d, rank %d: %s", be->name, R, C, r, c.err[r]);
  if (rc != LT_OK) fail_msg("lt_world_run: %s", lt_last_error());
  /* 2 axes x (4 float dtypes' 10 calls, less mean for the 2 integer ones) */
  for (int r = 0; r < R * C; r++) assert_int_equal(c.checked[r], 2 * (4 * 10 - 2 * 2));
  lt_mesh_free(m);
  lt_world_free(w);
  lt__backend_force(NULL);
}

static void test_values_2x2_and_2x3(void **state) {
  (void)state;
  const lt_backend *bes[2] = {&lt__ref_backend, &lt__cpu_backend};
  for (int b = 0; b < tu_nbackends(); b++) {
    run_mesh(2, 2, bes[b]);
    run_mesh(2, 3, bes[b]);
  }
}

/* ---- gradients over a group ---------------------------------------------------------------- */

typedef struct grad_ctx {
  const lt_mesh *m;
  char err[LT_MAX_DEVICES][300];
} grad_ctx;

/* 2 x 2 mesh, along the model axis (groups {0, 1} and {2, 3}): rank r's
 * weights c_r[i] = 1 + r + 0.5 i, the loss sum(y * c_r), x_r of 4
 * elements. The gradient of x_r (hand-derived, its group's members k):
 *   all_reduce sum   sum_k c_k[j]
 *   all_gather       sum_k c_k[g * 4 + j]   (g: r's place in the group)
 *   reduce_scatter   c_{k = member j / 2}[j % 2] */
static int grad_replica(int r, lt_device dev, void *arg) {
  grad_ctx *c = arg;
  int rc = LT_OK;
  int base = r - r % 2, g = r % 2;
  for (int kind = 0; kind < 3 && rc == LT_OK; kind++) {
    lt_scope_begin();
    double xv[4] = {0.5 * r, 1 - r, 2, -1};
    lt_tensor *x = lt_from_data(dev, LT_F64, SHAPE(4), 1, xv);
    lt_set_requires_grad(x, true);
    lt_tensor *y = kind == 0   ? lt_all_reduce_over(x, c->m, 1, LT_REDUCE_SUM)
                   : kind == 1 ? lt_all_gather_over(x, c->m, 1, 0)
                               : lt_reduce_scatter_over(x, c->m, 1, LT_REDUCE_SUM, 0);
    int64_t ny = y ? lt_numel(y) : 0;
    double cv[8];
    for (int i = 0; i < ny; i++) cv[i] = 1 + r + 0.5 * i;
    lt_tensor *cw = lt_from_data(dev, LT_F64, SHAPE(ny), 1, cv);
    lt_tensor *loss = lt_sum(lt_mul(y, cw), NULL, 0, false);
    rc = loss ? lt_backward(loss) : lt_last_status();
    double gr[4] = {0};
    if (rc == LT_OK) rc = lt_grad(x) ? lt_to_data(lt_grad(x), gr, sizeof gr) : -1;
    for (int j = 0; rc == LT_OK && j < 4; j++) {
      double want = 0;
      for (int k = base; k < base + 2; k++) {
        if (kind == 0) want += 1 + k + 0.5 * j;
        if (kind == 1) want += 1 + k + 0.5 * (g * 4 + j);
      }
      if (kind == 2) want = 1 + (base + j / 2) + 0.5 * (j % 2);
      if (fabs(gr[j] - want) > 1e-12) {
        snprintf(c->err[r], sizeof c->err[r], "kind %d grad[%d] = %g, want %g", kind, j, gr[j],
                 want);
        rc = -1;
      }
    }
    if (rc != LT_OK && !c->err[r][0])
      snprintf(c->err[r], sizeof c->err[r], "kind %d: %s", kind, lt_last_error());
    lt_scope_end();
  }
  return rc;
}

static void test_gradients_over_a_group(void **state) {
  (void)state;
  lt_world *w = NULL;
  lt_mesh *m = NULL;
  assert_int_equal(lt_world_local(4, &w), LT_OK);
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, NULL, &m), LT_OK);
  grad_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  int rc = lt_world_run(w, grad_replica, &c);
  for (int r = 0; r < 4; r++)
    if (c.err[r][0]) fail_msg("rank %d: %s", r, c.err[r]);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  lt_mesh_free(m);
  lt_world_free(w);
}

/* ---- replicas that name different groups ------------------------------------------------
 * Ranks 0 and 2 all-reduce along the data axis, 1 and 3 along the model
 * axis: the same kind, dtype and shape, but not the same call. Every rank
 * must fail at that call, naming the groups, rather than mix values or hang. */
static int disagree_replica(int r, lt_device dev, void *arg) {
  const lt_mesh *m = arg;
  lt_scope_begin();
  float v[4] = {1, 2, 3, 4}, out[4];
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  int rc = lt_to_data(lt_all_reduce_over(x, m, r % 2, LT_REDUCE_SUM), out, sizeof out);
  lt_scope_end();
  return rc;
}

static void test_replicas_naming_other_groups_fail(void **state) {
  (void)state;
  lt_world *w = NULL;
  lt_mesh *m = NULL;
  assert_int_equal(lt_world_local(4, &w), LT_OK);
  assert_int_equal(lt_world_set_timeout_ms(w, 20000), LT_OK);
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, NULL, &m), LT_OK);
  assert_int_equal(lt_world_run(w, disagree_replica, m), LT_EEXEC);
  tu_expect_substr(lt_last_error(), "the replicas disagree");
  tu_expect_substr(lt_last_error(), "in groups of 2 (stride 2)");
  tu_expect_substr(lt_last_error(), "in groups of 2 (stride 1)");
  lt_mesh_free(m);
  lt_world_free(w);
}

/* ---- construction and bad arguments ------------------------------------------------------ */

static void test_mesh_new_and_bad_arguments(void **state) {
  (void)state;
  lt_world *w = NULL;
  lt_mesh *m = NULL;
  assert_int_equal(lt_world_local(4, &w), LT_OK);
  const char *names[2] = {"data", "model"}, *same[2] = {"x", "x"}, *empty[2] = {"x", ""};
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 3}, names, &m), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_mesh_new: a mesh of 6 ranks over a world of 4");
  assert_null(m);
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, same, &m), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "both named \"x\"");
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, empty, &m), LT_EINVAL);
  assert_int_equal(lt_mesh_new(w, 0, (const int[]){4}, NULL, &m), LT_EINVAL);
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){0, 4}, NULL, &m), LT_EINVAL);
  assert_int_equal(lt_mesh_new(NULL, 1, (const int[]){4}, NULL, &m), LT_EINVAL);
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, names, &m), LT_OK);
  assert_ptr_equal(lt_mesh_world(m), w);
  assert_int_equal(lt_mesh_ndim(m), 2);
  assert_int_equal(lt_mesh_size(m, 0), 2);
  assert_int_equal(lt_mesh_size(m, 2), 0);
  assert_int_equal(lt_mesh_axis(m, "data"), 0);
  assert_int_equal(lt_mesh_axis(m, "pipe"), -1);
  tu_expect_substr(lt_last_error(), "no axis named \"pipe\"");
  /* row-major: rank 3 is (1, 1), rank 2 is (1, 0) */
  assert_int_equal(lt_mesh_coord(m, 2, 0), 1);
  assert_int_equal(lt_mesh_coord(m, 2, 1), 0);
  assert_int_equal(lt_mesh_coord(m, 4, 0), -1);

  lt_scope_begin();
  float v[6] = {0};
  lt_tensor *x = lt_from_data(CPU0, LT_F32, SHAPE(3, 2), 2, v);
  assert_null(lt_all_reduce_over(x, NULL, 0, LT_REDUCE_SUM));
  tu_expect_substr(lt_last_error(), "lt_all_reduce_over: mesh is NULL");
  assert_null(lt_all_gather_over(x, m, 2, 0));
  tu_expect_substr(lt_last_error(), "lt_all_gather_over: mesh axis 2 out of range");
  assert_null(lt_reduce_scatter_over(x, m, 1, LT_REDUCE_SUM, 0)); /* 3 rows, groups of 2 */
  assert_int_equal(lt_last_status(), LT_ESHAPE);
  tu_expect_substr(lt_last_error(), "lt_reduce_scatter_over: axis 0 of [3, 2] does not divide");
  assert_null(lt_broadcast_over(x, m, 0, 2));
  tu_expect_substr(lt_last_error(), "lt_broadcast_over: root 2 out of range for a mesh axis of 2");
  lt_tensor *far = lt_from_data(lt_cpu(5), LT_F32, SHAPE(3, 2), 2, v); /* in no world */
  assert_null(lt_all_reduce_over(far, m, 0, LT_REDUCE_SUM));
  assert_int_equal(lt_last_status(), LT_EDEVICE);
  /* the shapes: gather along a group of 2 doubles the axis */
  lt_tensor *y = lt_all_gather_over(x, m, 0, 1);
  assert_non_null(y);
  assert_int_equal(lt_dim(y, 1), 4);
  lt_scope_end();
  lt_mesh_free(m);
  lt_world_free(w);
  lt_mesh_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_2x2_and_2x3),
      cmocka_unit_test(test_gradients_over_a_group),
      cmocka_unit_test(test_replicas_naming_other_groups_fail),
      cmocka_unit_test(test_mesh_new_and_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
