/* Kernels of several outputs in the cpu backend (src/backend/cpu/cpu_lower.c):
 * stored elementwise values whose only readers are another stored value's
 * kernel are computed in that kernel's loop (Adam's m, v and parameter
 * updates in one pass). Checked here: Adam over two parameters gives ref's
 * values and writes every parameter and state in place, and updates in place
 * stay correct when one output of a kernel reads a parameter that another
 * output of the same kernel overwrites. Also the reductions whose outputs are
 * contiguous in the operand (column sums: rows outside, a block of outputs
 * inside) against ref. */
#include "test_util.h"
#include "lazytensor_nn.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

/* tu_wave_f32, retained: it outlives the scope it is made in. */
static lt_tensor *input(int seed, const int64_t *shape, int ndim) {
  return lt_retain(tu_wave_f32(seed, shape, ndim));
}

/* Waits for the traced work, runs lt_mark_step and waits again; returns how
 * many buffers that step donated (InputOutputAlias). */
static int64_t mark_step_aliases(void) {
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  int64_t before = tu_counter("InputOutputAlias");
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  return tu_counter("InputOutputAlias") - before;
}

static int setup(void **state) {
  tu_reset_executor();
  lt_set_param_aliasing(true);
  lt_set_eager(false);
  return tu_setup(state);
}
static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt__backend_force(NULL);
  return rc;
}
#define FTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* ---- Adam over two parameters ---------------------------------------------------------- */

enum { kSteps = 4, kN1 = 33 * 65, kN2 = 7 };

/* Runs kSteps Adam steps on be; the parameters' values into p1, p2; per step,
 * the parameters donated to the step's execution into donated. */
static void adam_run(const lt_backend *be, float *p1, float *p2, int64_t *donated) {
  lt__backend_force(be);
  lt_wait_device_ops(CPU0);
  lt_cache_clear();
  lt_scope_begin();
  lt_tensor *w = input(1, SHAPE(33, 65), 2), *b = input(2, SHAPE(7), 1);
  lt_tensor *params[2] = {w, b};
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 0.05; /* moves the values well past rounding */
  lt_nn_optim *o = lt_nn_optim_create(&cfg, params, 2);
  assert_non_null(o);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  for (int s = 0; s < kSteps; s++) {
    lt_scope_begin();
    /* grads that depend on the parameters, as a real step's do */
    lt_tensor *grads[2] = {lt_add(lt_mul(w, w), input(10 + s, SHAPE(33, 65), 2)),
                           lt_sub(lt_sin(b), input(20 + s, SHAPE(7), 1))};
    assert_int_equal(lt_nn_optim_step_grads(o, grads), LT_OK);
    lt_scope_end();
    donated[s] = mark_step_aliases();
  }
  assert_int_equal(lt_to_data(w, p1, kN1 * sizeof(float)), LT_OK);
  assert_int_equal(lt_to_data(b, p2, kN2 * sizeof(float)), LT_OK);
  lt_nn_optim_free(o);
  lt_release(w);
  lt_release(b);
  lt_scope_end();
  lt_wait_device_ops(CPU0);
  lt__backend_force(NULL);
}

static void test_adam_two_params(void **state) {
  (void)state;
  static float c1[kN1], c2[kN2], r1[kN1], r2[kN2];
  int64_t cd[kSteps], rd[kSteps];
  adam_run(&lt__cpu_backend, c1, c2, cd);
  adam_run(&lt__ref_backend, r1, r2, rd);
  for (int i = 0; i < kN1; i++)
    if (!(fabsf(c1[i] - r1[i]) <= 1e-5f * (1 + fabsf(r1[i]))))
      fail_msg("w[%d]: cpu %.9g, ref %.9g", i, c1[i], r1[i]);
  for (int i = 0; i < kN2; i++)
    if (!(fabsf(c2[i] - r2[i]) <= 1e-5f * (1 + fabsf(r2[i]))))
      fail_msg("b[%d]: cpu %.9g, ref %.9g", i, c2[i], r2[i]);
  /* Once the state exists (after the first step), each step writes both
   * parameters and their m and v in place: six donated buffers, as ref. */
  for (int s = 1; s < kSteps; s++) {
    assert_int_equal(rd[s], 6);
    assert_int_equal(cd[s], 6);
  }
}

/* ---- outputs of one kernel that read a parameter another one overwrites -------------- */

enum { kM = 19, kK = 37 };

/* p := p * 2 and q := p + (p * 2): one kernel of two outputs; the first
 * writes p in place, the second reads p's old value (loaded before the
 * store). */
static void test_reader_after_writer(void **state) {
  (void)state;
  lt__backend_force(&lt__cpu_backend);
  lt_tensor *p = input(3, SHAPE(kM, kK), 2), *q = input(4, SHAPE(kM, kK), 2);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  double want_p[kM * kK], want_q[kM * kK];
  for (int i = 0; i < kM * kK; i++) {
    want_p[i] = tu_wave_at(3, i);
    want_q[i] = tu_wave_at(4, i);
  }
  for (int s = 0; s < 3; s++) {
    lt_scope_begin();
    lt_tensor *a = lt_mul(p, lt_scalar(CPU0, LT_F32, 2));
    lt_tensor *b = lt_add(p, a);
    assert_int_equal(lt_assign(p, a), LT_OK);
    assert_int_equal(lt_assign(q, b), LT_OK);
    lt_scope_end();
    /* p's storage holds p * 2 (q is no input: nothing else to donate) */
    assert_int_equal(mark_step_aliases(), 1);
    for (int i = 0; i < kM * kK; i++) {
      want_q[i] = (double)(float)(want_p[i] + (double)(float)(want_p[i] * 2));
      want_p[i] = (double)(float)(want_p[i] * 2);
    }
  }
  tu_expect(p, LT_F32, SHAPE(kM, kK), 2, want_p, 1e-6);
  tu_expect(q, LT_F32, SHAPE(kM, kK), 2, want_q, 1e-6);
  lt_release(p);
  lt_release(q);
}

/* p := q * 2 and q := (q * 2) + p: the first output would write p before the
 * second loads it, so p goes to the second output (which reads it first) and
 * q to the first; the values stay those of the graph. */
static void test_reader_before_writer(void **state) {
  (void)state;
  lt__backend_force(&lt__cpu_backend);
  lt_tensor *p = input(5, SHAPE(kM, kK), 2), *q = input(6, SHAPE(kM, kK), 2);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  double want_p[kM * kK], want_q[kM * kK];
  for (int i = 0; i < kM * kK; i++) {
    want_p[i] = tu_wave_at(5, i);
    want_q[i] = tu_wave_at(6, i);
  }
  for (int s = 0; s < 3; s++) {
    lt_scope_begin();
    lt_tensor *a = lt_mul(q, lt_scalar(CPU0, LT_F32, 2));
    lt_tensor *b = lt_add(a, p);
    assert_int_equal(lt_assign(p, a), LT_OK);
    assert_int_equal(lt_assign(q, b), LT_OK);
    lt_scope_end();
    assert_int_equal(mark_step_aliases(), 2); /* both, swapped */
    for (int i = 0; i < kM * kK; i++) {
      double a2 = (double)(float)(want_q[i] * 2);
      want_q[i] = (double)(float)(a2 + want_p[i]);
      want_p[i] = a2;
    }
  }
  tu_expect(p, LT_F32, SHAPE(kM, kK), 2, want_p, 1e-6);
  tu_expect(q, LT_F32, SHAPE(kM, kK), 2, want_q, 1e-6);
  lt_release(p);
  lt_release(q);
}

/* p := q * 2, and b = f64((q * 2) + p) kept as a value: b cannot take p's
 * storage (another dtype) and would load p after the first output stored
 * over it, so p is not donated; the values stay those of the graph. */
static void test_no_store_before_load(void **state) {
  (void)state;
  lt__backend_force(&lt__cpu_backend);
  lt_tensor *p = input(11, SHAPE(kM, kK), 2), *q = input(12, SHAPE(kM, kK), 2);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  lt_scope_begin();
  lt_tensor *a = lt_mul(q, lt_scalar(CPU0, LT_F32, 2));
  lt_tensor *b = lt_retain(lt_cast(lt_add(a, p), LT_F64));
  assert_int_equal(lt_assign(p, a), LT_OK);
  lt_scope_end();
  assert_int_equal(mark_step_aliases(), 0);
  static double want_p[kM * kK], want_b[kM * kK];
  for (int i = 0; i < kM * kK; i++) {
    float a2 = tu_wave_at(12, i) * 2.0f;
    want_p[i] = a2;
    want_b[i] = (float)(a2 + tu_wave_at(11, i));
  }
  tu_expect(p, LT_F32, SHAPE(kM, kK), 2, want_p, 1e-6);
  tu_expect(b, LT_F64, SHAPE(kM, kK), 2, want_b, 1e-6);
  lt_release(p);
  lt_release(q);
  lt_release(b);
}

/* A chain of stored values read only by the next one (each a root): one
 * kernel; and a value also read through a broadcast (not grouped). */
static void test_chain_and_broadcast(void **state) {
  (void)state;
  lt__backend_force(&lt__cpu_backend);
  lt_tensor *x = input(7, SHAPE(kM, kK), 2), *r = input(8, SHAPE(kK), 1);
  lt_tensor *a = lt_exp(lt_mul(x, lt_scalar(CPU0, LT_F32, 0.25)));
  lt_tensor *b = lt_sub(a, x);
  lt_tensor *c = lt_mul(b, a);
  lt_tensor *d = lt_add(r, lt_scalar(CPU0, LT_F32, 1)); /* [kK], broadcast below */
  lt_tensor *e = lt_mul(c, d);
  lt_tensor *outs[5] = {a, b, c, d, e};
  assert_int_equal(lt_sync(outs, 5, true), LT_OK);
  static double wa[kM * kK], wb[kM * kK], wc[kM * kK], wd[kK], we[kM * kK];
  for (int j = 0; j < kK; j++) wd[j] = (float)(tu_wave_at(8, j) + 1.0f);
  for (int i = 0; i < kM * kK; i++) {
    float xv = tu_wave_at(7, i), av = expf(xv * 0.25f), bv = av - xv, cv = bv * av;
    wa[i] = av;
    wb[i] = bv;
    wc[i] = cv;
    we[i] = cv * (float)wd[i % kK];
  }
  tu_expect(a, LT_F32, SHAPE(kM, kK), 2, wa, 1e-5);
  tu_expect(b, LT_F32, SHAPE(kM, kK), 2, wb, 1e-5);
  tu_expect(c, LT_F32, SHAPE(kM, kK), 2, wc, 1e-5);
  tu_expect(d, LT_F32, SHAPE(kK), 1, wd, 1e-6);
  tu_expect(e, LT_F32, SHAPE(kM, kK), 2, we, 1e-5);
  lt_release(x);
  lt_release(r);
}

/* ---- column sums ------------------------------------------------------------------------ */

typedef struct colcase {
  int64_t shape[3];
  int ndim;
  int axes[2], naxes;
  int op; /* 0 sum, 1 mean, 2 prod */
  bool keepdim, f64, fused;
} colcase;

/* c's reduction (of x * 0.5 + y with y broadcast along dim 0 when fused) on be. */
static double *col_run(const lt_backend *be, const colcase *c, int64_t *n) {
  lt__backend_force(be);
  lt_scope_begin();
  lt_tensor *x = input(30, c->shape, c->ndim);
  if (c->f64) x = lt_cast(x, LT_F64);
  if (c->fused) {
    int64_t ys[3];
    memcpy(ys, c->shape, sizeof ys);
    ys[0] = 1;
    lt_tensor *y = input(31, ys, c->ndim);
    if (c->f64) y = lt_cast(y, LT_F64);
    x = lt_add(lt_mul(x, lt_scalar(CPU0, c->f64 ? LT_F64 : LT_F32, 0.5)), y);
  }
  if (c->op == 2) /* products of values near 1 */
    x = lt_add(lt_mul(x, lt_scalar(CPU0, c->f64 ? LT_F64 : LT_F32, 0.01)),
               lt_scalar(CPU0, c->f64 ? LT_F64 : LT_F32, 1));
  lt_tensor *r = c->op == 0   ? lt_sum(x, c->axes, c->naxes, c->keepdim)
                 : c->op == 1 ? lt_mean(x, c->axes, c->naxes, c->keepdim)
                              : lt_prod(x, c->axes, c->naxes, c->keepdim);
  assert_non_null(r);
  *n = lt_numel(r);
  double *v = tu_values(r);
  lt_scope_end();
  lt_wait_device_ops(CPU0);
  lt__backend_force(NULL);
  return v;
}

static void test_column_sums(void **state) {
  (void)state;
  static const colcase cases[] = {
      {{128, 512}, 2, {0}, 1, 0, false, false, false},     /* a bias gradient */
      {{128, 512}, 2, {0}, 1, 0, true, false, true},       /* fused, keepdim */
      {{5, 40, 33}, 3, {0}, 1, 1, false, false, false},    /* mean, outputs 40 x 33 */
      {{6, 20, 50}, 3, {1}, 1, 0, false, false, true},     /* kept dims on both sides */
      {{7, 3, 70}, 3, {0, 1}, 2, 0, false, true, false},   /* f64, two reduced dims */
      {{9, 4, 100}, 3, {0, 1}, 2, 2, false, false, false}, /* product */
      {{3, 1000}, 2, {0}, 1, 1, false, true, true},        /* many blocks, f64 mean */
      {{128, 10}, 2, {0}, 1, 0, false, false, false},      /* narrow: one output per loop */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t nc, nr;
    double *got = col_run(&lt__cpu_backend, &cases[i], &nc);
    double *want = col_run(&lt__ref_backend, &cases[i], &nr);
    assert_int_equal(nc, nr);
    double tol = cases[i].f64 ? 1e-12 : 1e-6;
    for (int64_t j = 0; j < nc; j++)
      if (!tu_near(got[j], want[j], tol))
        fail_msg("case %zu element %lld: cpu %.17g, ref %.17g", i, (long long)j, got[j], want[j]);
    free(got);
    free(want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FTEST(test_adam_two_params),      FTEST(test_reader_after_writer),
      FTEST(test_reader_before_writer), FTEST(test_no_store_before_load),
      FTEST(test_chain_and_broadcast),  FTEST(test_column_sums),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
