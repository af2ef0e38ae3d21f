/* Meshes and collectives over replica groups (lazytensor_world.h,
 * lazytensor_collective.h: lt_*_over) on in-process worlds: a 2 x 2 mesh
 * (the data x model mesh of a 2-d parallel step) and a 2 x 3 one (groups of
 * unequal sizes along its two axes), every op along each axis against values
 * computed here from the group's members, on both backends; the gradients
 * over a group; replicas that name different groups; mesh construction and
 * bad arguments. */
#include "test_world_util.h"

static const lt_dtype kDtypes[] = {LT_F32, LT_F64, LT_I32, LT_U8};
#define NDTYPES ((int)(sizeof kDtypes / sizeof kDtypes[0]))

/* The members of rank r's group along mesh axis a of an R x C mesh. */
static int members(int r, int a, int C, int R, int *out) {
  int n = a == 0 ? R : C, stride = a == 0 ? C : 1;
  int base = a == 0 ? r % C : r - r % C;
  for (int j = 0; j < n; j++) out[j] = base + j * stride;
  return n;
}

/* Element j of rank r's result (input shape {6, 2}, ops along axis 0). */
static double expected(int kind, int op, const int *mem, int n, int g, int64_t j, lt_dtype dt) {
  const int64_t rows = 6, cols = 2;
  switch (kind) {
  case TW_ALL_REDUCE:
    return tw_reduce(op, mem, n, j, dt);
  case TW_ALL_GATHER: /* [n * 6, 2]: member k's rows, in group order */
    return tw_val(mem[j / (rows * cols)], j % (rows * cols), dt);
  case TW_REDUCE_SCATTER: /* [6 / n, 2]: chunk g of the reduction */
    return tw_reduce(op, mem, n, g * (rows / n) * cols + j, dt);
  default: /* root: the group's last member */
    return tw_val(mem[n - 1], j, dt);
  }
}

static int mesh_replica(int r, lt_device dev, void *arg) {
  tw_ctx *c = arg;
  static const int64_t shape[2] = {6, 2}; /* 6 rows: split by groups of 2 and of 3 */
  int R = lt_mesh_size(c->mesh, 0), C = lt_mesh_size(c->mesh, 1);
  double got[64];
  for (int a = 0; a < 2; a++) {
    int mem[LT_MAX_DEVICES];
    int n = members(r, a, C, R, mem), g = lt_mesh_coord(c->mesh, r, a);
    if (mem[g] != r) {
      snprintf(c->err[r], sizeof c->err[r], "lt_mesh_coord(%d, %d) = %d", r, a, g);
      return -1;
    }
    for (int di = 0; di < NDTYPES; di++) {
      lt_dtype dt = kDtypes[di];
      for (int kind = TW_ALL_REDUCE; kind <= TW_BROADCAST; kind++) {
        for (int op = 0; op < 4; op++) {
          if (!tw_sweeps(kind, op, dt)) continue;
          lt_scope_begin();
          lt_tensor *x = tw_input(dev, r, dt, shape, 2, tw_val), *y = NULL;
          switch (kind) {
          case TW_ALL_REDUCE:
            y = lt_all_reduce_over(x, c->mesh, a, (lt_reduce_op)op);
            break;
          case TW_ALL_GATHER:
            y = lt_all_gather_over(x, c->mesh, a, 0);
            break;
          case TW_REDUCE_SCATTER:
            y = lt_reduce_scatter_over(x, c->mesh, a, (lt_reduce_op)op, 0);
            break;
          default:
            y = lt_broadcast_over(x, c->mesh, a, n - 1);
            break;
          }
          int64_t want_rows = kind == TW_ALL_GATHER ? 6 * n : kind == TW_REDUCE_SCATTER ? 6 / n : 6;
          int rc = !y ? lt_last_status() : lt_dim(y, 0) != want_rows ? -102 : LT_OK;
          int64_t m = y ? lt_numel(y) : 0;
          if (rc == LT_OK) rc = tw_read_all(y, got);
          for (int64_t j = 0; rc == LT_OK && j < m; j++) {
            unsigned char wb[8];
            lt__store_f64(dt, wb, 0, expected(kind, op, mem, n, g, j, dt)); /* cast as dt wraps */
            double want = lt__load_f64(dt, wb, 0);
            if (fabs(got[j] - want) > tw_tol(dt, want)) {
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
  lt_world *w = tw_world(R * C, be, 20000);
  lt_mesh *m = NULL;
  const int shape[2] = {R, C};
  const char *names[2] = {"data", "model"};
  assert_int_equal(lt_mesh_new(w, 2, shape, names, &m), LT_OK);
  assert_int_equal(lt_mesh_axis(m, "model"), 1);
  tw_ctx c;
  /* 2 axes x (4 float dtypes' 10 calls, less mean for the 2 integer ones) */
  tw_run(w, m, mesh_replica, &c, be->name, 2 * (4 * 10 - 2 * 2));
  tw_world_free(w, m);
}

static void test_values_2x2_and_2x3(void **state) {
  (void)state;
  for (int b = 0; b < tu_nbackends(); b++) {
    run_mesh(2, 2, tu_backends[b]);
    run_mesh(2, 3, tu_backends[b]);
  }
}

/* ---- gradients over a group ---------------------------------------------------------------- */

/* 2 x 2 mesh, along the model axis (groups {0, 1} and {2, 3}): the
 * gradient of x_r (hand-derived, c_k the weights of rank k, its group's
 * members k; tw_grad_replica says the rest):
 *   all_reduce sum   sum_k c_k[j]
 *   all_gather       sum_k c_k[g * 4 + j]   (g: r's place in the group)
 *   reduce_scatter   c_{k = member j / 2}[j % 2] */
static lt_tensor *grad_op(const tw_ctx *c, lt_tensor *x, int kind) {
  return kind == 0   ? lt_all_reduce_over(x, c->mesh, 1, LT_REDUCE_SUM)
         : kind == 1 ? lt_all_gather_over(x, c->mesh, 1, 0)
                     : lt_reduce_scatter_over(x, c->mesh, 1, LT_REDUCE_SUM, 0);
}

static double grad_want(const tw_ctx *c, int r, int kind, int j) {
  (void)c;
  int base = r - r % 2, g = r % 2;
  double want = 0;
  for (int k = base; k < base + 2; k++) {
    if (kind == 0) want += 1 + k + 0.5 * j;
    if (kind == 1) want += 1 + k + 0.5 * (g * 4 + j);
  }
  if (kind == 2) want = 1 + (base + j / 2) + 0.5 * (j % 2);
  return want;
}

static int grad_replica(int r, lt_device dev, void *arg) {
  return tw_grad_replica(arg, r, dev, 3, grad_op, grad_want);
}

static void test_gradients_over_a_group(void **state) {
  (void)state;
  lt_world *w = tw_world(4, NULL, 0);
  lt_mesh *m = NULL;
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, NULL, &m), LT_OK);
  tw_ctx c;
  tw_run(w, m, grad_replica, &c, "gradients", -1);
  tw_world_free(w, m);
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
