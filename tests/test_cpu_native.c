/* The cpu backend's hand-written kernels (src/backend/cpu/cpu_native.c), one
 * for each NATIVE row of the op table, against the ref backend: every case
 * runs the same graph on both and the results must be the same bytes (the
 * kernels sum in ref's order and precision, so no tolerance; a NaN matches
 * any NaN), or both runs must fail with the same status and message.
 *
 * The executor's fallback is replaced by a spy that counts its runs and
 * passes them on to ref: a cpu run of valid inputs must not reach it (the
 * native kernel ran), and one with an index out of range must (the native
 * kernel leaves the node to the fallback, which reports the error in ref's
 * words). Cases cover every dtype a kernel takes, odd sizes, every axis and
 * negative axes where the API takes them, empty tensors, and sizes of 300k
 * elements and more that the pool splits over its threads (the default
 * thread count: the test does not set LT_NUM_THREADS). Under LT_BACKEND=ref
 * (the valgrind run) only the ref side runs. */
#include "test_util.h"

#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/cpu/cpu_native.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/exec/exec_internal.h"

/* ---- the fallback spy ---------------------------------------------------------------------- */

static atomic_int g_fallback_runs;
static _Atomic int g_fallback_op = -1;
static lt_backend g_spy;

static int spy_run_instr(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  atomic_fetch_add(&g_fallback_runs, 1);
  atomic_store(&g_fallback_op, ins->op);
  return lt__ref_backend.run_instr(ins, out, in);
}

static int setup(void **state) {
  lt__backends_init(); /* the executor names its fallback once; the spy replaces it */
  g_spy = lt__ref_backend;
  g_spy.run_instr = spy_run_instr;
  lt__backend_set_fallback(&g_spy);
  lt_set_eager(false);
  return tu_setup(state);
}

static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt__backend_set_fallback(&lt__ref_backend);
  lt__backend_force(NULL);
  return rc;
}
#define NTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* ---- cases and runs ------------------------------------------------------------------------ */

/* What a build function reads; each test uses the fields it needs. */
typedef struct tcase {
  lt_dtype dt, idt; /* value dtype, index dtype */
  int nd;           /* input shape */
  int64_t shape[4];
  int axis;  /* may be negative */
  bool flag; /* keepdim, descending, ... */
  int ind;   /* index shape (-1: 0-d) */
  int64_t ishape[4];
  int64_t lo, hi; /* index values in [lo, hi) */
  int64_t bad_at; /* >= 0: that index element is set to bad */
  int64_t bad;
  double value; /* pad value, alpha, ... */
  int nops;     /* concat: operands and their sizes along axis */
  int64_t sizes[48];
  int64_t pads[8];
  int64_t n; /* randperm, one_hot's classes, slice step */
  uint64_t seed;
} tcase;

typedef int (*build_fn)(lt_tensor **outs, const tcase *c);

typedef struct res {
  int nout, rc;
  char err[512];
  lt_dtype dt[2];
  int64_t numel[2];
  void *data[2];
  int fallback_runs, fallback_op;
} res;

static uint64_t next(uint64_t *s) { return tu_xorshift(s); }

static int64_t numel_of(const int64_t *shape, int nd) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  return n;
}

/* Reproducible values of dtype dt: floats with full mantissas (so that an
 * f32 sum in another precision or order would show), and with NaN, +-inf,
 * -0.0 and repeats when specials; integers small with repeats (ties), or any
 * bits (wrap-around); bool 0 / 1. */
static lt_tensor *mk(lt_dtype dt, const int64_t *shape, int nd, uint64_t seed, bool specials) {
  int64_t n = numel_of(shape, nd);
  uint64_t s = seed * 2654435761u + 1;
  char *v = malloc((size_t)n * lt_dtype_size(dt) + 8);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next(&s);
    double f = ((double)(r >> 11) / 9007199254740992.0 * 2 - 1) * 100;
    if (specials && r % 16 == 0) {
      static const double sp[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0, 1.0, -2.5};
      f = sp[(r >> 4) % 8];
    }
    int64_t k = r % 8 ? (int64_t)(r >> 8) % 21 - 10 : (int64_t)r;
    if (lt__is_float(dt))
      lt__store_f64(dt, v, i, f);
    else /* integers keep the low bits of k (u8, i8: any byte) */
      lt__store_i64(dt, v, i, dt == LT_BOOL ? (int64_t)(r >> 9 & 1) : k);
  }
  lt_tensor *t = lt_from_data(CPU0, dt, shape, nd, v);
  free(v);
  return t;
}

/* Index values in [lo, hi) of dtype dt (i32 or i64); element bad_at (if
 * >= 0) set to bad. */
static lt_tensor *mk_index(lt_dtype dt, const int64_t *shape, int nd, uint64_t seed, int64_t lo,
                           int64_t hi, int64_t bad_at, int64_t bad) {
  int64_t n = numel_of(shape, nd);
  uint64_t s = seed * 40503u + 7;
  int64_t *v = malloc((size_t)n * sizeof *v + 8);
  for (int64_t i = 0; i < n; i++)
    v[i] = hi > lo ? lo + (int64_t)(next(&s) % (uint64_t)(hi - lo)) : 0;
  if (bad_at >= 0 && bad_at < n) v[bad_at] = bad;
  lt_tensor *t;
  if (dt == LT_I64) {
    t = lt_from_data(CPU0, LT_I64, shape, nd, v);
  } else {
    int32_t *w = malloc((size_t)n * sizeof *w + 4);
    for (int64_t i = 0; i < n; i++) w[i] = (int32_t)v[i];
    t = lt_from_data(CPU0, LT_I32, shape, nd, w);
    free(w);
  }
  free(v);
  return t;
}

static void run_on(const lt_backend *be, build_fn f, const tcase *c, res *r) {
  memset(r, 0, sizeof *r);
  lt__backend_force(be);
  lt_wait_device_ops(CPU0);
  assert_int_equal(lt_set_seed(CPU0, 4242), LT_OK);
  atomic_store(&g_fallback_runs, 0);
  atomic_store(&g_fallback_op, -1);
  lt_scope_begin();
  lt_tensor *outs[2] = {NULL, NULL};
  lt_clear_error();
  r->nout = f(outs, c);
  for (int o = 0; o < r->nout; o++)
    if (!outs[o]) r->nout = 0;
  if (r->nout <= 0) {
    r->rc = lt_last_status() ? lt_last_status() : -1000;
    snprintf(r->err, sizeof r->err, "build: %s", lt_last_error());
  } else {
    r->rc = lt_sync(outs, r->nout, true);
    for (int o = 0; o < r->nout && r->rc == LT_OK; o++) {
      r->dt[o] = lt_get_dtype(outs[o]);
      r->numel[o] = lt_numel(outs[o]);
      size_t nb = (size_t)r->numel[o] * lt_dtype_size(r->dt[o]);
      r->data[o] = malloc(nb + 8);
      r->rc = lt_to_data(outs[o], r->data[o], nb);
    }
    if (r->rc != LT_OK) snprintf(r->err, sizeof r->err, "%s", lt_last_error());
  }
  lt_scope_end();
  lt_wait_device_ops(CPU0);
  lt_clear_error();
  r->fallback_runs = atomic_load(&g_fallback_runs);
  r->fallback_op = atomic_load(&g_fallback_op);
  lt__backend_force(NULL);
}

static void res_free(res *r) {
  for (int o = 0; o < 2; o++) free(r->data[o]);
}

/* Element i of two float arrays is NaN in both. Which NaN a sum gives is not
 * fixed (a compiler may swap the operands of an addition, and x86 returns
 * the first NaN operand), so NaNs match each other whatever their bits. */
static bool both_nan(lt_dtype dt, const void *a, const void *b, int64_t i) {
  if (dt == LT_F32) return isnan(((const float *)a)[i]) && isnan(((const float *)b)[i]);
  if (dt == LT_F64) return isnan(((const double *)a)[i]) && isnan(((const double *)b)[i]);
  return false;
}

/* The case on ref and on cpu: equal bytes (NaNs: any NaN), the cpu's from its native kernel
 * (no fallback run); or, with want_error, both failing at execution alike and
 * the cpu's error from the fallback. */
static void check(const char *what, build_fn f, const tcase *c, bool want_error) {
  res r, k;
  bool cpu = tu_cpu_allowed();
  /* cpu first, as test_cpu_differential.c diff_nan (why: there) */
  if (cpu) run_on(&lt__cpu_backend, f, c, &k);
  run_on(&lt__ref_backend, f, c, &r);
  if (r.nout <= 0) fail_msg("%s: %s", what, r.err); /* every case is one the API takes */
  if (want_error) {
    if (r.rc != LT_EEXEC) fail_msg("%s: ref gave %d, not an execution error", what, r.rc);
  } else if (r.rc != LT_OK) {
    fail_msg("%s: ref failed: %s", what, r.err);
  }
  if (!cpu) {
    res_free(&r);
    return;
  }
  if (k.rc != r.rc || strcmp(k.err, r.err) != 0)
    fail_msg("%s: ref gave %d '%s', cpu %d '%s'", what, r.rc, r.err, k.rc, k.err);
  if (want_error) {
    if (k.fallback_runs < 1) fail_msg("%s: the cpu's error did not come from the fallback", what);
  } else {
    if (k.fallback_runs)
      fail_msg("%s: the cpu backend ran op %s on the fallback (%d runs)", what,
               lt__op_name((lt_op)k.fallback_op), k.fallback_runs);
    for (int o = 0; o < r.nout; o++) {
      assert_int_equal(k.dt[o], r.dt[o]);
      assert_int_equal(k.numel[o], r.numel[o]);
      size_t es = lt_dtype_size(r.dt[o]);
      for (int64_t i = 0; i < r.numel[o]; i++)
        if (memcmp((char *)r.data[o] + i * es, (char *)k.data[o] + i * es, es) != 0 &&
            !both_nan(r.dt[o], r.data[o], k.data[o], i))
          fail_msg("%s: output %d element %lld of %lld differs from ref's", what, o, (long long)i,
                   (long long)r.numel[o]);
    }
  }
  res_free(&r);
  res_free(&k);
}

static const lt_dtype kAll[] = {LT_F32, LT_F64, LT_I64, LT_I32, LT_U8, LT_I8, LT_BOOL};
#define NALL ((int)(sizeof kAll / sizeof kAll[0]))

static tcase shaped(lt_dtype dt, int nd, const int64_t *shape, int axis) {
  tcase c;
  memset(&c, 0, sizeof c);
  c.dt = dt;
  c.idt = LT_I64;
  c.nd = nd;
  memcpy(c.shape, shape, (size_t)nd * sizeof *shape);
  c.axis = axis;
  c.bad_at = -1;
  c.seed = 1;
  return c;
}

/* index_select's and index_add's case: a 1-d index of n entries. */
static tcase index1_case(lt_dtype dt, int nd, const int64_t *shape, int axis, int64_t n) {
  tcase c = shaped(dt, nd, shape, axis);
  c.ind = 1;
  c.ishape[0] = n;
  return c;
}

/* The index of gather, index_select and index_add: c's index shape (a 0-d
 * one for ind -1), values along the input's axis, element bad_at set to bad. */
static lt_tensor *case_index(const tcase *c) {
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  return mk_index(c->idt, c->ishape, c->ind < 0 ? 0 : c->ind, c->seed, 0, c->shape[ax], c->bad_at,
                  c->bad);
}

/* ---- argmax / argmin ----------------------------------------------------------------------- */

static int b_argmax(lt_tensor **o, const tcase *c) {
  o[0] = lt_argmax(mk(c->dt, c->shape, c->nd, c->seed, true), c->axis, c->flag);
  return 1;
}
static int b_argmin(lt_tensor **o, const tcase *c) {
  o[0] = lt_argmin(mk(c->dt, c->shape, c->nd, c->seed, true), c->axis, c->flag);
  return 1;
}

static void test_argmax_argmin(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = shaped(kAll[t], 3, SHAPE(7, 5, 3), axis);
      c.flag = axis % 2 == 0;
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("argmax", b_argmax, &c, false);
      check("argmin", b_argmin, &c, false);
    }
  tcase c = shaped(LT_F32, 2, SHAPE(0, 4), 1); /* empty result */
  check("argmax empty", b_argmax, &c, false);
  c = shaped(LT_F64, 1, SHAPE(1), -1);
  check("argmin one", b_argmin, &c, false);
  /* large: columns split over the threads, rows, one long row */
  c = shaped(LT_F32, 2, SHAPE(300, 1001), 0);
  check("argmax large axis 0", b_argmax, &c, false);
  c.axis = 1;
  check("argmin large axis 1", b_argmin, &c, false);
  c = shaped(LT_I32, 2, SHAPE(1001, 300), -2);
  check("argmax large i32", b_argmax, &c, false);
  c = shaped(LT_F64, 1, SHAPE(300001), 0);
  check("argmin large 1-d", b_argmin, &c, false);
}

/* ---- cumsum -------------------------------------------------------------------------------- */

static int b_cumsum(lt_tensor **o, const tcase *c) {
  o[0] = lt_cumsum(mk(c->dt, c->shape, c->nd, c->seed, true), c->axis);
  return 1;
}

/* The reversed scan: the gradient of cumsum (sum(cumsum(x) * w) by x is the
 * cumsum of w from the end). */
static int b_cumsum_reverse(lt_tensor **o, const tcase *c) {
  lt_tensor *x = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_tensor *w = mk(c->dt, c->shape, c->nd, c->seed + 1, true);
  lt_set_requires_grad(x, true);
  if (lt_backward(lt_sum(lt_mul(lt_cumsum(x, c->axis), w), NULL, 0, false)) != LT_OK) return 0;
  o[0] = lt_grad(x);
  return 1;
}

static void test_cumsum(void **state) {
  (void)state;
  static const lt_dtype dts[] = {LT_F32, LT_F64, LT_I64, LT_I32, LT_U8, LT_BOOL};
  for (int t = 0; t < 6; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = shaped(dts[t], 3, SHAPE(7, 5, 3), axis);
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("cumsum", b_cumsum, &c, false);
      if (dts[t] == LT_F32 || dts[t] == LT_F64)
        check("cumsum reverse", b_cumsum_reverse, &c, false);
    }
  tcase c = shaped(LT_F32, 2, SHAPE(0, 4), 1);
  check("cumsum empty", b_cumsum, &c, false);
  c = shaped(LT_F32, 0, SHAPE(1), 0);
  check("cumsum 0-d", b_cumsum, &c, false);
  c = shaped(LT_F32, 2, SHAPE(300, 1001), 0);
  check("cumsum large axis 0", b_cumsum, &c, false);
  check("cumsum large reverse", b_cumsum_reverse, &c, false);
  c.axis = -1;
  check("cumsum large axis 1", b_cumsum, &c, false);
  c = shaped(LT_I64, 2, SHAPE(1001, 300), 0);
  check("cumsum large i64", b_cumsum, &c, false);
  c = shaped(LT_F64, 1, SHAPE(300001), 0);
  check("cumsum large 1-d", b_cumsum, &c, false);
}

/* ---- argsort / sort ------------------------------------------------------------------------ */

static int b_argsort(lt_tensor **o, const tcase *c) {
  o[0] = lt_argsort(mk(c->dt, c->shape, c->nd, c->seed, true), c->axis, c->flag);
  return 1;
}

/* Values and indices (the values are a gather through the indices). */
static int b_sort(lt_tensor **o, const tcase *c) {
  lt_tensor *x = mk(c->dt, c->shape, c->nd, c->seed, true);
  return lt_sort(x, c->axis, c->flag, &o[0], &o[1]) == LT_OK ? 2 : 0;
}

static void test_argsort(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -1; axis < 3; axis++)
      for (int desc = 0; desc < 2; desc++) {
        tcase c = shaped(kAll[t], 3, SHAPE(7, 5, 9), axis);
        c.flag = desc;
        c.seed = (uint64_t)(t * 10 + axis + 5);
        check("argsort", b_argsort, &c, false);
      }
  tcase c = shaped(LT_F32, 2, SHAPE(3, 0), 1);
  check("argsort empty", b_argsort, &c, false);
  c = shaped(LT_F64, 2, SHAPE(4, 33), -1);
  check("sort", b_sort, &c, false);
  /* large: one long line split over the threads (ascending and descending,
   * NaN and ties), many lines, a few long ones */
  c = shaped(LT_F32, 1, SHAPE(300001), 0);
  check("argsort large 1-d", b_argsort, &c, false);
  c.flag = true;
  check("argsort large 1-d descending", b_argsort, &c, false);
  c = shaped(LT_I32, 1, SHAPE(300001), -1);
  check("argsort large ties", b_argsort, &c, false);
  c = shaped(LT_F64, 2, SHAPE(600, 501), 0);
  check("argsort large axis 0", b_argsort, &c, false);
  c.axis = 1;
  check("sort large axis 1", b_sort, &c, false);
  c = shaped(LT_I64, 2, SHAPE(3, 100003), 1);
  c.flag = true;
  check("argsort large few lines", b_argsort, &c, false);
}

/* ---- concat -------------------------------------------------------------------------------- */

static int b_concat(lt_tensor **o, const tcase *c) {
  lt_tensor *ts[48];
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  for (int k = 0; k < c->nops; k++) {
    int64_t shape[4];
    memcpy(shape, c->shape, sizeof shape);
    shape[ax] = c->sizes[k];
    ts[k] = mk(c->dt, shape, c->nd, c->seed + (uint64_t)k, true);
  }
  o[0] = lt_concat(ts, c->nops, c->axis);
  return 1;
}

static void test_concat(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = shaped(kAll[t], 3, SHAPE(4, 3, 5), axis);
      c.nops = 3;
      c.sizes[0] = 2, c.sizes[1] = 0, c.sizes[2] = 3; /* an empty operand among them */
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("concat", b_concat, &c, false);
    }
  tcase c = shaped(LT_I8, 2, SHAPE(3, 2), 0);
  c.nops = 40; /* more operands than the kernel keeps on its stack */
  for (int k = 0; k < 40; k++) c.sizes[k] = k % 3;
  check("concat many", b_concat, &c, false);
  c = shaped(LT_F32, 2, SHAPE(0, 2), 1);
  c.nops = 2;
  c.sizes[0] = 1, c.sizes[1] = 2;
  check("concat empty", b_concat, &c, false);
  c = shaped(LT_F32, 2, SHAPE(300, 1001), 0);
  c.nops = 2;
  c.sizes[0] = 300, c.sizes[1] = 301;
  check("concat large axis 0", b_concat, &c, false);
  c.axis = -1;
  c.sizes[0] = 1001, c.sizes[1] = 7;
  check("concat large axis 1", b_concat, &c, false);
}

/* ---- pad ----------------------------------------------------------------------------------- */

static int b_pad(lt_tensor **o, const tcase *c) {
  o[0] = lt_pad_n(mk(c->dt, c->shape, c->nd, c->seed, true), c->pads, 2 * c->nd, c->value);
  return 1;
}

static void test_pad(void **state) {
  (void)state;
  static const int64_t pads[][6] = {{1, 0, 0, 2, 3, 1}, {0, 0, 0, 0, 0, 0}, {2, 2, 1, 1, 0, 0}};
  for (int t = 0; t < NALL; t++)
    for (int p = 0; p < 3; p++) {
      tcase c = shaped(kAll[t], 3, SHAPE(3, 4, 5), 0);
      memcpy(c.pads, pads[p], sizeof pads[p]);
      c.value = kAll[t] == LT_F32 || kAll[t] == LT_F64 ? -2.5 : (p == 2 ? 0 : 3);
      c.seed = (uint64_t)(t * 10 + p);
      check("pad", b_pad, &c, false);
    }
  tcase c = shaped(LT_F32, 1, SHAPE(0), 0);
  c.pads[0] = 2, c.pads[1] = 1, c.value = 1;
  check("pad empty", b_pad, &c, false);
  c = shaped(LT_F64, 2, SHAPE(0, 3), 0);
  c.pads[2] = 1;
  check("pad empty result", b_pad, &c, false);
  c = shaped(LT_F32, 2, SHAPE(600, 501), 0);
  c.pads[0] = 1, c.pads[1] = 2, c.pads[2] = 3, c.pads[3] = 4, c.value = 0.5;
  check("pad large", b_pad, &c, false);
  c = shaped(LT_I64, 1, SHAPE(300001), 0);
  c.pads[0] = 5, c.pads[1] = 3;
  check("pad large 1-d", b_pad, &c, false);
}

/* ---- gather -------------------------------------------------------------------------------- */

static int b_gather(lt_tensor **o, const tcase *c) {
  lt_tensor *a = mk(c->dt, c->shape, c->nd, c->seed, true);
  o[0] = lt_gather(a, c->axis, case_index(c));
  return 1;
}

static tcase gather_case(lt_dtype dt, lt_dtype idt, int axis) {
  tcase c = shaped(dt, 3, SHAPE(5, 6, 7), axis);
  c.idt = idt;
  c.ind = 3;
  memcpy(c.ishape, SHAPE(4, 6, 3), 3 * sizeof(int64_t)); /* smaller than a off the axis */
  int ax = axis < 0 ? axis + 3 : axis;
  c.ishape[ax] = 9; /* and longer along it */
  return c;
}

static void test_gather(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = gather_case(kAll[t], axis % 2 ? LT_I32 : LT_I64, axis);
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("gather", b_gather, &c, false);
    }
  tcase c = gather_case(LT_F32, LT_I64, 1);
  c.ishape[0] = 0;
  check("gather empty", b_gather, &c, false);
  c = shaped(LT_F32, 2, SHAPE(300, 1001), 0);
  c.ind = 2;
  memcpy(c.ishape, c.shape, sizeof c.ishape);
  check("gather large axis 0", b_gather, &c, false);
  c.axis = -1;
  c.idt = LT_I32;
  check("gather large axis 1", b_gather, &c, false);
}

static void test_gather_out_of_range(void **state) {
  (void)state;
  tcase c = gather_case(LT_F64, LT_I64, 1);
  c.bad_at = 17, c.bad = 6; /* the size along axis 1 */
  check("gather index = size", b_gather, &c, true);
  c.bad = -1; /* torch's gather takes no negative index either */
  c.idt = LT_I32;
  check("gather negative index", b_gather, &c, true);
  /* one bad index among 300k, in a chunk of another thread than the first */
  c = shaped(LT_F32, 2, SHAPE(300, 1001), 1);
  c.ind = 2;
  memcpy(c.ishape, c.shape, sizeof c.ishape);
  c.bad_at = 250000, c.bad = 1001;
  check("gather large bad index", b_gather, &c, true);
}

/* ---- index_select -------------------------------------------------------------------------- */

static int b_index_select(lt_tensor **o, const tcase *c) {
  lt_tensor *a = mk(c->dt, c->shape, c->nd, c->seed, true);
  o[0] = lt_index_select(a, c->axis, case_index(c));
  return 1;
}

static void test_index_select(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = index1_case(kAll[t], 3, SHAPE(5, 6, 7), axis, 9); /* repeats among them */
      c.idt = axis % 2 ? LT_I32 : LT_I64;
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("index_select", b_index_select, &c, false);
    }
  tcase c = index1_case(LT_F32, 2, SHAPE(5, 6), 1, 0); /* no index at all */
  check("index_select empty index", b_index_select, &c, false);
  c.ind = -1; /* a 0-d index */
  check("index_select 0-d index", b_index_select, &c, false);
  c = index1_case(LT_F32, 2, SHAPE(1000, 300), 0, 1001);
  check("index_select large axis 0", b_index_select, &c, false);
  c = index1_case(LT_I64, 2, SHAPE(300, 1000), -1, 1001);
  check("index_select large axis 1", b_index_select, &c, false);
}

static void test_index_select_out_of_range(void **state) {
  (void)state;
  tcase c = index1_case(LT_F32, 2, SHAPE(5, 6), 1, 4);
  c.bad_at = 2, c.bad = 6;
  check("index_select index = size", b_index_select, &c, true);
  c.bad = -3;
  c.idt = LT_I32;
  check("index_select negative index", b_index_select, &c, true);
  c = index1_case(LT_F32, 2, SHAPE(0, 6), 1, 3); /* checked even when nothing is selected */
  c.bad_at = 0, c.bad = 7;
  check("index_select bad index, empty result", b_index_select, &c, true);
}

/* ---- one_hot ------------------------------------------------------------------------------- */

static int b_one_hot(lt_tensor **o, const tcase *c) {
  lt_tensor *index = mk_index(c->idt, c->shape, c->nd, c->seed, 0, c->n, c->bad_at, c->bad);
  o[0] = lt_one_hot(index, c->n, c->dt);
  return 1;
}

static void test_one_hot(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++) {
    tcase c = shaped(kAll[t], 2, SHAPE(7, 3), 0);
    c.idt = t % 2 ? LT_I32 : LT_I64;
    c.n = 5;
    check("one_hot", b_one_hot, &c, false);
  }
  tcase c = shaped(LT_F32, 1, SHAPE(0), 0);
  c.n = 3;
  check("one_hot empty", b_one_hot, &c, false);
  c = shaped(LT_F32, 0, SHAPE(1), 0);
  c.n = 3;
  check("one_hot 0-d", b_one_hot, &c, false);
  c = shaped(LT_I64, 1, SHAPE(100003), 0);
  c.n = 3;
  check("one_hot large", b_one_hot, &c, false);
  c.bad_at = 99999, c.bad = 3;
  check("one_hot large bad index", b_one_hot, &c, true);
  c = shaped(LT_F32, 2, SHAPE(2, 3), 0);
  c.n = 4;
  c.idt = LT_I32;
  c.bad_at = 4, c.bad = -1;
  check("one_hot negative index", b_one_hot, &c, true);
}

/* ---- random: normal draws and randperm ------------------------------------------------------ */

static int b_normal(lt_tensor **o, const tcase *c) {
  o[0] = lt_rand_normal(CPU0, c->dt, c->shape, c->nd, 0.0, 1.0);
  return 1;
}

/* Two draws in one graph: the second from the next seed of the chain. */
static int b_normal_two(lt_tensor **o, const tcase *c) {
  o[0] = lt_rand_normal(CPU0, c->dt, c->shape, c->nd, 0.0, 1.0);
  o[1] = lt_rand_normal(CPU0, c->dt, c->shape, c->nd, 3.0, 0.5);
  return 2;
}

static int b_randperm(lt_tensor **o, const tcase *c) {
  o[0] = lt_randperm(CPU0, c->dt, c->n);
  return 1;
}

static void test_random(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++) {
    lt_dtype dt = t ? LT_F64 : LT_F32;
    tcase c = shaped(dt, 2, SHAPE(7, 5), 0);
    check("rand_normal", b_normal, &c, false);
    check("rand_normal two", b_normal_two, &c, false);
    c = shaped(dt, 0, SHAPE(1), 0);
    check("rand_normal 0-d", b_normal, &c, false);
    c = shaped(dt, 2, SHAPE(3, 0), 0);
    check("rand_normal empty", b_normal, &c, false);
    c = shaped(dt, 1, SHAPE(300001), 0);
    check("rand_normal large", b_normal, &c, false);
  }
  static const int64_t ns[] = {0, 1, 2, 17, 300001};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 5; i++) {
      tcase c = shaped(t ? LT_I32 : LT_I64, 1, SHAPE(1), 0);
      c.n = ns[i];
      check("randperm", b_randperm, &c, false);
    }
}

/* ---- scatter_add, index_add ----------------------------------------------------------------- */

/* a (shape) with src added at index (ishape, no larger than a off the axis):
 * src has index's shape plus one along every axis (only the part index
 * covers is read). Duplicate positions add up. */
static int b_scatter_add(lt_tensor **o, const tcase *c) {
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  int64_t sshape[4];
  for (int d = 0; d < c->nd; d++) sshape[d] = c->ishape[d] + 1;
  lt_tensor *a = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_tensor *src = mk(c->dt, sshape, c->nd, c->seed + 1, true);
  lt_tensor *index = mk_index(c->idt, c->ishape, c->ind, c->seed, c->lo,
                              c->hi ? c->hi : c->shape[ax], c->bad_at, c->bad);
  o[0] = lt_scatter_add(a, c->axis, index, src);
  return 1;
}

/* torch.scatter: built on scatter_add (f64 / i64 sums and counts). */
static int b_scatter(lt_tensor **o, const tcase *c) {
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  lt_tensor *a = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_tensor *src = mk(c->dt, c->ishape, c->nd, c->seed + 1, false);
  lt_tensor *index = mk_index(c->idt, c->ishape, c->ind, c->seed, 0, c->shape[ax], -1, 0);
  o[0] = lt_scatter(a, c->axis, index, src);
  return 1;
}

static tcase scatter_case(lt_dtype dt, int axis) {
  tcase c = shaped(dt, 3, SHAPE(5, 6, 7), axis);
  c.ind = 3;
  memcpy(c.ishape, SHAPE(4, 5, 3), 3 * sizeof(int64_t));
  int ax = axis < 0 ? axis + 3 : axis;
  c.ishape[ax] = 11; /* more entries than positions: duplicates */
  return c;
}

static void test_scatter_add(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = scatter_case(kAll[t], axis);
      c.idt = axis % 2 ? LT_I32 : LT_I64;
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("scatter_add", b_scatter_add, &c, false);
    }
  for (int t = 0; t < 3; t++) {
    tcase c = scatter_case(t == 0 ? LT_F32 : t == 1 ? LT_I64 : LT_U8, 1);
    check("scatter", b_scatter, &c, false);
  }
  /* f32 along the last axis with src's rows matching the output's (the
   * row-at-a-time path, max-pool's gradient): small, and split over threads */
  for (int k = 0; k < 3; k++) {
    tcase r = scatter_case(LT_F32, k == 1 ? -1 : 2);
    int64_t rows = k == 2 ? 4000 : 5;
    memcpy(r.shape, SHAPE(rows, 6, 7), 3 * sizeof(int64_t));
    memcpy(r.ishape, SHAPE(rows, 6, 11), 3 * sizeof(int64_t));
    r.idt = k == 1 ? LT_I32 : LT_I64;
    r.seed = (uint64_t)(90 + k);
    check("scatter_add rows", b_scatter_add, &r, false);
  }
  tcase c = scatter_case(LT_F32, 0);
  c.ishape[1] = 0;
  check("scatter_add empty index", b_scatter_add, &c, false);
  /* large: every column sums ~300 f32 terms onto 7 rows (double sums
   * rounded once, as ref), split over the threads by columns */
  c = shaped(LT_F32, 2, SHAPE(7, 1001), 0);
  c.ind = 2;
  memcpy(c.ishape, SHAPE(300, 1000), 2 * sizeof(int64_t));
  check("scatter_add large axis 0", b_scatter_add, &c, false);
  c = shaped(LT_F64, 2, SHAPE(301, 50), -1);
  c.ind = 2;
  memcpy(c.ishape, SHAPE(300, 1000), 2 * sizeof(int64_t));
  check("scatter_add large axis 1", b_scatter_add, &c, false);
}

static void test_scatter_add_out_of_range(void **state) {
  (void)state;
  tcase c = scatter_case(LT_F32, 1);
  c.bad_at = 40, c.bad = 6;
  check("scatter_add index = size", b_scatter_add, &c, true);
  c.bad = -2;
  c.idt = LT_I32;
  check("scatter_add negative index", b_scatter_add, &c, true);
  c = shaped(LT_F32, 2, SHAPE(7, 1001), 0);
  c.ind = 2;
  memcpy(c.ishape, SHAPE(300, 1000), 2 * sizeof(int64_t));
  c.bad_at = 290000, c.bad = 7;
  check("scatter_add large bad index", b_scatter_add, &c, true);
}

/* a with alpha * src added at index[i] along the axis (src: a's shape with
 * the index's length there). */
static int b_index_add(lt_tensor **o, const tcase *c) {
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  int64_t sshape[4];
  memcpy(sshape, c->shape, sizeof sshape);
  sshape[ax] = c->ishape[0];
  lt_tensor *a = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_tensor *src = mk(c->dt, sshape, c->nd, c->seed + 1, true);
  o[0] = lt_index_add(a, c->axis, case_index(c), src, c->value);
  return 1;
}

static void test_index_add(void **state) {
  (void)state;
  for (int t = 0; t < NALL; t++)
    for (int axis = -3; axis < 3; axis++) {
      tcase c = index1_case(kAll[t], 3, SHAPE(5, 6, 7), axis, 11); /* duplicates */
      c.idt = axis % 2 ? LT_I32 : LT_I64;
      c.value = kAll[t] == LT_BOOL ? 1 : axis % 2 ? 1 : 2;
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("index_add", b_index_add, &c, false);
    }
  tcase c = index1_case(LT_F32, 2, SHAPE(5, 6), 0, 0);
  c.value = 1;
  check("index_add empty index", b_index_add, &c, false);
  c = index1_case(LT_F32, 2, SHAPE(50, 1001), 0, 300);
  check("index_add large axis 0", b_index_add, &c, false);
  c = index1_case(LT_F64, 2, SHAPE(300, 70), -1, 1001);
  c.value = 0.5;
  check("index_add large axis 1", b_index_add, &c, false);
}

static void test_index_add_out_of_range(void **state) {
  (void)state;
  tcase c = index1_case(LT_F32, 3, SHAPE(5, 6, 7), 1, 4);
  c.value = 1;
  c.bad_at = 3, c.bad = 6;
  check("index_add index = size", b_index_add, &c, true);
  c.bad = -1;
  c.idt = LT_I32;
  check("index_add negative index", b_index_add, &c, true);
}

/* ---- the transposes autograd makes: scatter_add, index_add, unslice ------------------------- */

/* Gradients of gather, index_select and slice: sum(op(x) * w) by x. */
static int b_grad_gather(lt_tensor **o, const tcase *c) {
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  lt_tensor *x = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_set_requires_grad(x, true);
  lt_tensor *index = mk_index(LT_I64, c->ishape, c->ind, c->seed, 0, c->shape[ax], -1, 0);
  lt_tensor *w = mk(c->dt, c->ishape, c->ind, c->seed + 1, true);
  if (lt_backward(lt_sum(lt_mul(lt_gather(x, c->axis, index), w), NULL, 0, false)) != LT_OK)
    return 0;
  o[0] = lt_grad(x);
  return 1;
}

static int b_grad_index_select(lt_tensor **o, const tcase *c) {
  int ax = c->axis < 0 ? c->axis + c->nd : c->axis;
  lt_tensor *x = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_set_requires_grad(x, true);
  lt_tensor *index = mk_index(LT_I32, c->ishape, 1, c->seed, 0, c->shape[ax], -1, 0);
  int64_t wshape[4];
  memcpy(wshape, c->shape, sizeof wshape);
  wshape[ax] = c->ishape[0];
  lt_tensor *w = mk(c->dt, wshape, c->nd, c->seed + 1, true);
  lt_tensor *y = lt_index_select(x, c->axis, index);
  if (lt_backward(lt_sum(lt_mul(y, w), NULL, 0, false)) != LT_OK) return 0;
  o[0] = lt_grad(x);
  return 1;
}

/* x sliced with step c->n from 1 on every axis; w holds -0.0, which the
 * gradient (an unslice: added to zeros) turns into 0.0. */
static int b_grad_slice(lt_tensor **o, const tcase *c) {
  lt_tensor *x = mk(c->dt, c->shape, c->nd, c->seed, false);
  lt_set_requires_grad(x, true);
  int64_t starts[4], steps[4], wshape[4];
  for (int d = 0; d < c->nd; d++) {
    starts[d] = 1;
    steps[d] = c->n;
    wshape[d] = c->shape[d] > 1 ? (c->shape[d] - 2) / c->n + 1 : 0;
  }
  lt_tensor *w = mk(c->dt, wshape, c->nd, c->seed + 1, true);
  lt_tensor *y = lt_slice_n(x, starts, NULL, steps, lt_ndim(x));
  if (lt_backward(lt_sum(lt_mul(y, w), NULL, 0, false)) != LT_OK) return 0;
  o[0] = lt_grad(x);
  return 1;
}

static void test_gradient_transposes(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++)
    for (int axis = -3; axis < 3; axis++) {
      lt_dtype dt = t ? LT_F64 : LT_F32;
      tcase c = gather_case(dt, LT_I64, axis);
      c.seed = (uint64_t)(t * 10 + axis + 5);
      check("gather gradient", b_grad_gather, &c, false);
      c = shaped(dt, 3, SHAPE(5, 6, 7), axis);
      c.ishape[0] = 9;
      check("index_select gradient", b_grad_index_select, &c, false);
    }
  for (int step = 1; step < 4; step++) {
    tcase c = shaped(step == 2 ? LT_F64 : LT_F32, 3, SHAPE(5, 6, 7), 0);
    c.n = step;
    check("slice gradient", b_grad_slice, &c, false);
  }
  tcase c = shaped(LT_F32, 2, SHAPE(600, 501), 0);
  c.n = 2;
  check("slice gradient large", b_grad_slice, &c, false);
  c = shaped(LT_F32, 2, SHAPE(300, 1001), 1);
  c.ind = 2;
  memcpy(c.ishape, SHAPE(300, 1001), 2 * sizeof(int64_t));
  check("gather gradient large", b_grad_gather, &c, false);
  c = shaped(LT_F32, 2, SHAPE(1000, 300), 0);
  c.ishape[0] = 1001;
  check("index_select gradient large", b_grad_index_select, &c, false);
}

/* ---- the lookup ----------------------------------------------------------------------------- */

/* What the op table's NATIVE rows promise: a kernel, for the dtypes the
 * builders make; other dtypes are left to the fallback. */
static void test_lookup(void **state) {
  (void)state;
  for (int op = 0; op < LT_OP_COUNT; op++)
    assert_int_equal(lt__cpu_native_has(op), lt__op_cpu_path(op) == LT_CPU_NATIVE);
  assert_non_null(lt__cpu_native_find(LT_OP_GATHER, LT_I8, LT_I8));
  assert_null(lt__cpu_native_find(LT_OP_GATHER, LT_F32, LT_F64)); /* a conversion: ref's */
  assert_non_null(lt__cpu_native_find(LT_OP_RNG_NORMAL, LT_F32, LT_I64));
  assert_null(lt__cpu_native_find(LT_OP_RNG_NORMAL, LT_I32, LT_I64));
  assert_null(lt__cpu_native_find(LT_OP_CUMSUM, LT_U8, LT_U8));
  assert_null(lt__cpu_native_find(LT_OP_ADD, LT_F32, LT_F32));
  assert_null(lt__cpu_native_find(LT_OP_GATHER, LT_NUM_DTYPES, LT_F32));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      NTEST(test_lookup),
      NTEST(test_argmax_argmin),
      NTEST(test_cumsum),
      NTEST(test_argsort),
      NTEST(test_concat),
      NTEST(test_pad),
      NTEST(test_gather),
      NTEST(test_gather_out_of_range),
      NTEST(test_index_select),
      NTEST(test_index_select_out_of_range),
      NTEST(test_one_hot),
      NTEST(test_random),
      NTEST(test_scatter_add),
      NTEST(test_scatter_add_out_of_range),
      NTEST(test_index_add),
      NTEST(test_index_add_out_of_range),
      NTEST(test_gradient_transposes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
