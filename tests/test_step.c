/* The executor's step semantics (docs/DESIGN.md, rules 2-5 and 7), each observed through
 * counters, values, device memory or the device lock. */
#include <pthread.h>

#include "test_util.h"
#include "lazytensor_nn.h"
#include "../src/lt_test_hooks.h"

enum { N = 1 << 14 };

static int64_t ctr(const char *name) { return tu_counter(name); }

static int setup(void **state) {
  lt_wait_device_ops(lt_cpu(1));
  tu_reset_executor();
  lt_set_param_aliasing(true);
  lt_set_eager(false);
  lt_set_execute_delay_us(0);
  lt_inject_fault(LT_FAULT_EXECUTE, -1);
  lt_inject_fault(LT_FAULT_COMPILE, -1);
  return tu_setup(state);
}
#define STEST(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown_wait)

static lt_tensor *filled(float v) {
  float *d = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) d[i] = v;
  lt_tensor *t = lt_retain(tu_f32(SHAPE(N), 1, d));
  free(d);
  return t;
}

/* Three steps of w = w - lr * g, lr changing each step. Returns the largest
 * growth of device bytes during a step over the bytes alive before it. */
static int64_t sgd_steps(bool aliasing) {
  lt_set_param_aliasing(aliasing);
  lt_tensor *w = filled(1.0f), *g = filled(0.5f);
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* a step barrier uploads host data */
  assert_int_equal(lt_get_state(w), LT_STATE_DEVICE);
  lt_counters_reset();
  int64_t worst = 0;
  for (int step = 0; step < 3; step++) {
    lt_scope_begin();
    lt_tensor *lr = lt_scalar(CPU0, LT_F32, 0.1 * (step + 1));
    assert_int_equal(lt_assign(w, lt_sub(w, lt_mul(lr, g))), LT_OK);
    lt_scope_end(); /* temporaries gone: only w, g and their graph are live */
    int64_t live, peak;
    assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    lt_device_memory(CPU0, &live, NULL);
    lt_device_memory_reset_peak(CPU0);
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    lt_device_memory(CPU0, NULL, &peak);
    if (peak - live > worst) worst = peak - live;
  }
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("CachedCompile"), 2);
  double v[1];
  assert_int_equal(lt_item(w, N - 1, v), LT_OK);
  assert_true(fabs(v[0] - (1.0 - 0.5 * (0.1 + 0.2 + 0.3))) < 1e-6);
  lt_release(w);
  lt_release(g);
  return worst;
}

static void test_step_donation_and_peak_memory(void **state) {
  (void)state;
  int64_t extra_alias = sgd_steps(true);
  assert_true(ctr("InputOutputAlias") > 0);
  lt_metric_stats st;
  if (lt_get_metric("InputOutputAliasCount", &st) == LT_OK) assert_true(st.max >= 1);
  lt_cache_clear();
  int64_t extra_plain = sgd_steps(false);
  assert_int_equal(ctr("InputOutputAlias"), 0);
  /* With donation the cpu backend's step needs at most its temporary (lr * g,
   * fused away); without, the new w needs storage of its own: exactly one
   * more copy of w. The ref backend (the oracle) stores the temporary and
   * snapshots every donor before writing it, so that a failed step gives the
   * old w back: there donation saves nothing, and costs nothing either. */
  const char *be = getenv("LT_BACKEND");
  if (be && strcmp(be, "ref") == 0) {
    assert_true(extra_alias <= (int64_t)N * 4 * 2);
    assert_int_equal(extra_plain, extra_alias);
  } else {
    assert_true(extra_alias <= (int64_t)N * 4);
    assert_int_equal(extra_plain - extra_alias, (int64_t)N * 4);
  }
}

static void test_mark_step_cuts_graph_and_uploads_host_data(void **state) {
  (void)state;
  lt_tensor *h = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_tensor *y = lt_exp(lt_ones(CPU0, LT_F32, SHAPE(2), 1));
  assert_int_equal(lt_get_state(h), LT_STATE_HOST);
  assert_int_equal(lt_get_state(y), LT_STATE_PENDING);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_get_state(h), LT_STATE_DEVICE);
  assert_int_equal(lt_get_state(y), LT_STATE_DEVICE); /* a placeholder, then the value */
  assert_int_equal(ctr("MarkStep"), 1);
  assert_int_equal(ctr("TransferToDevice"), 1);
  tu_expect(y, LT_F32, SHAPE(2), 1, (double[]){M_E, M_E}, 1e-6);
  int64_t exec = ctr("ExecuteComputation");
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* nothing pending: nothing runs */
  assert_int_equal(ctr("ExecuteComputation"), exec);
}

static void test_read_right_after_mark_step(void **state) {
  (void)state;
  /* A read straight after lt_mark_step waits for the step: it must never see
   * an output the kernels are still writing (outputs are published only when
   * the whole execution succeeded). */
  lt_set_seed(CPU0, 7);
  lt_tensor *w = lt_retain(lt_rand_uniform(CPU0, LT_F32, SHAPE(256, 256), 2, -1, 1));
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  for (int step = 0; step < 20; step++) {
    lt_scope_begin();
    lt_tensor *x = lt_rand_uniform(CPU0, LT_F32, SHAPE(64, 256), 2, -1, 1);
    lt_tensor *loss = lt_retain(lt_mean(lt_tanh(lt_matmul(x, w)), NULL, 0, false));
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    double early, late;
    assert_int_equal(lt_item(loss, 0, &early), LT_OK);
    assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    assert_int_equal(lt_item(loss, 0, &late), LT_OK);
    assert_true(early == late);
    lt_release(loss);
  }
  lt_release(w);
}

static void test_two_tensors_one_value(void **state) {
  (void)state;
  /* y and w end with the same node: both roots of one step */
  lt_tensor *w = lt_retain(tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3})));
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  lt_tensor *y = lt_sub(w, lt_scalar(CPU0, LT_F32, 0.5));
  assert_int_equal(lt_assign(w, y), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  tu_expect(y, LT_F32, SHAPE(3), 1, (double[]){0.5, 1.5, 2.5}, 0);
  tu_expect(w, LT_F32, SHAPE(3), 1, (double[]){0.5, 1.5, 2.5}, 0);
  lt_release(w);
}

static void test_force_flag_is_part_of_the_key(void **state) {
  (void)state;
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){0, 1}));
  lt_tensor *a = lt_exp(x);
  assert_int_equal(lt_sync(&a, 1, true), LT_OK);
  lt_tensor *b = lt_exp(x);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(ctr("UncachedCompile"), 2); /* same graph, other force flag */
  lt_tensor *c = lt_exp(x);
  assert_int_equal(lt_sync(&c, 1, false), LT_OK);
  assert_int_equal(ctr("CachedCompile"), 1);
  tu_expect(b, LT_F32, SHAPE(2), 1, (double[]){1, M_E}, 1e-6);
  tu_expect(c, LT_F32, SHAPE(2), 1, (double[]){1, M_E}, 1e-6);
}

static void test_collect_once_per_tensor_and_data_leaves(void **state) {
  (void)state;
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_tensor *y = lt_neg(x);
  lt_tensor *list[3] = {y, y, x};
  assert_int_equal(lt_sync(list, 3, true), LT_OK);
  assert_int_equal(ctr("ExecuteComputation"), 1);
  /* a tensor whose value is a bare data leaf gets the buffer, no compute */
  lt_tensor *z = lt_zeros(CPU0, LT_F32, SHAPE(2), 1);
  assert_int_equal(lt_assign(z, y), LT_OK);
  assert_int_equal(lt_get_state(z), LT_STATE_DEVICE);
  assert_int_equal(lt_sync(&z, 1, true), LT_OK);
  assert_int_equal(ctr("ExecuteComputation"), 1);
  tu_expect(z, LT_F32, SHAPE(2), 1, (double[]){-1, -2}, 0);
}

static void test_scalar_cache(void **state) {
  (void)state;
  lt_tensor *a = lt_scalar(CPU0, LT_F32, 0.25);
  lt_tensor *b = lt_scalar(CPU0, LT_F32, 0.25);
  lt_tensor *c = lt_scalar(CPU0, LT_F64, 0.25);
  assert_int_equal(ctr("ScalarCacheHit"), 1);
  assert_int_equal(ctr("TransferToDevice"), 2);
  tu_expect(lt_add(a, b), LT_F32, NULL, 0, (double[]){0.5}, 0);
  tu_expect(c, LT_F64, NULL, 0, (double[]){0.25}, 0);
}

static void test_overlap_tracing_with_execution(void **state) {
  (void)state;
  lt_tensor *w = filled(2.0f);
  lt_tensor *ref = filled(2.0f);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  lt_set_execute_delay_us(400000); /* make the device work slow */
  lt_scope_begin();
  assert_int_equal(lt_assign(w, lt_mul(lt_exp(w), lt_scalar(CPU0, LT_F32, 0.5))), LT_OK);
  lt_scope_end();
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* returns while the step runs */
  assert_false(lt_ready(w));
  lt_scope_begin();
  lt_tensor *next = lt_sum(lt_tanh(lt_add(w, w)), NULL, 0, false); /* traces the next step */
  assert_non_null(next);
  assert_false(lt_ready(w)); /* the tracing returned before the step's work ended */
  lt_set_execute_delay_us(0);
  double got[1], want[1];
  tu_read(next, got, 1);
  /* the same math run synchronously, op by op */
  lt_tensor *r = lt_mul(lt_exp(ref), lt_scalar(CPU0, LT_F32, 0.5));
  assert_int_equal(lt_sync(&r, 1, true), LT_OK);
  lt_tensor *rn = lt_sum(lt_tanh(lt_add(r, r)), NULL, 0, false);
  tu_read(rn, want, 1);
  assert_true(got[0] == want[0]);
  lt_scope_end();
  lt_release(w);
  lt_release(ref);
}

static void test_async_failure_surfaces_once(void **state) {
  (void)state;
  lt_tensor *w = lt_retain(tu_f32(SHAPE(2), 1, ((float[]){1, 2})));
  lt_tensor *g = lt_retain(tu_f32(SHAPE(2), 1, ((float[]){2, 2})));
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  lt_scope_begin();
  assert_int_equal(lt_assign(w, lt_sub(w, lt_mul(lt_scalar(CPU0, LT_F32, 0.25), g))), LT_OK);
  lt_scope_end();
  lt_inject_fault(LT_FAULT_EXECUTE, 0);
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* queued: the failure comes later */
  /* w keeps its last good value */
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){1, 2}, 0);
  lt_clear_error();
  assert_int_equal(lt_mark_step(CPU0), LT_EEXEC); /* the next lock taker reports it */
  assert_non_null(strstr(lt_last_error(), "injected fault"));
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* once */
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(ctr("ExecuteFailure"), 1);
  /* the next step runs normally */
  lt_scope_begin();
  assert_int_equal(lt_assign(w, lt_sub(w, lt_mul(lt_scalar(CPU0, LT_F32, 0.25), g))), LT_OK);
  lt_scope_end();
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){0.5, 1.5}, 0);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);

  /* a value with no earlier version reports the failure when read, and that
   * read is the one report: the device does not report it again */
  lt_tensor *y = lt_exp(w);
  lt_inject_fault(LT_FAULT_EXECUTE, 0);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  float out[2];
  assert_int_equal(lt_to_data(y, out, sizeof out), LT_EEXEC);
  assert_non_null(strstr(lt_last_error(), "injected fault"));
  assert_int_equal(lt_to_data(y, out, sizeof out), LT_EEXEC); /* the tensor keeps saying so */
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){0.5, 1.5}, 0);
  lt_release(w);
  lt_release(g);
}

static void test_compile_failure_keeps_pending(void **state) {
  (void)state;
  lt_tensor *y = lt_exp(tu_f32(SHAPE(1), 1, ((float[]){0})));
  lt_inject_fault(LT_FAULT_COMPILE, 0);
  float v;
  assert_int_equal(lt_to_data(y, &v, sizeof v), LT_ECOMPILE);
  assert_int_equal(lt_get_state(y), LT_STATE_PENDING);
  assert_int_equal(lt_to_data(y, &v, sizeof v), LT_OK);
  assert_true(v == 1.0f);
}

/* lt_warmup_step compiles the executable lt_mark_step then looks up: the step
 * barrier's flag, its donors (w1 and w2 are overwritten), the roots in the
 * step's order whatever order they are given in. */
static void test_warmup_then_hit(void **state) {
  (void)state;
  lt_tensor *w1 = filled(1.0f), *w2 = filled(2.0f), *g = filled(0.5f);
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* uploads */
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_counters_reset();
  for (int step = 0; step < 2; step++) {
    lt_scope_begin();
    lt_tensor *lr = lt_scalar(CPU0, LT_F32, 0.1);
    assert_int_equal(lt_assign(w1, lt_sub(w1, lt_mul(lr, g))), LT_OK);
    assert_int_equal(lt_assign(w2, lt_add(w2, lt_mul(lr, g))), LT_OK);
    lt_scope_end();
    if (step == 0) {
      /* not the step's order (newest tensor first); g has no pending graph */
      lt_tensor *ts[3] = {w1, g, w2};
      assert_int_equal(lt_warmup_step(ts, 3), LT_OK);
      assert_int_equal(ctr("UncachedCompile"), 1);
      assert_int_equal(ctr("ExecuteComputation"), 0);
      assert_int_equal(lt_get_state(w1), LT_STATE_PENDING);
      lt_metric_stats donors;
      assert_int_equal(lt_get_metric("InputOutputAliasCount", &donors), LT_OK);
      assert_true(donors.count == 1 && donors.max == 2); /* compiled with the step's donors */
    }
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    assert_int_equal(ctr("UncachedCompile"), 1); /* the step found the warmed executable */
    assert_int_equal(ctr("CachedCompile"), step + 1);
  }
  assert_int_equal(ctr("ExecuteComputation"), 2);
  double v[1];
  assert_int_equal(lt_item(w1, N - 1, v), LT_OK);
  assert_true(fabs(v[0] - 0.9) < 1e-6);
  assert_int_equal(lt_item(w2, 0, v), LT_OK);
  assert_true(fabs(v[0] - 2.1) < 1e-6);
  /* tensors of two devices */
  lt_tensor *other = lt_full(lt_cpu(1), LT_F32, SHAPE(1), 1, 1.0);
  lt_tensor *mixed[2] = {w1, other};
  assert_int_equal(lt_warmup_step(mixed, 2), LT_EDEVICE);
  assert_int_equal(lt_warmup(mixed, 2), LT_EDEVICE);
  lt_release(w1);
  lt_release(w2);
  lt_release(g);
}

/* lt_warmup compiles what reading the tensors compiles (no step barrier, the
 * roots in the order given): a later lt_to_data of the one tensor, or
 * lt_sync of the several, finds it in the cache and compiles nothing. */
static void test_warmup_then_read_hits(void **state) {
  (void)state;
  lt_tensor *a = filled(1.0f), *b = filled(2.0f);
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* uploads */
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_tensor *y = lt_add(lt_mul(a, b), a);
  lt_counters_reset();
  assert_int_equal(lt_warmup(&y, 1), LT_OK);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("ExecuteComputation"), 0);
  assert_int_equal(lt_get_state(y), LT_STATE_PENDING);
  double v[1];
  assert_int_equal(lt_item(y, N - 1, v), LT_OK); /* lt_to_data */
  assert_int_equal(ctr("UncachedCompile"), 1);   /* no new compile */
  assert_int_equal(ctr("CachedCompile"), 1);
  assert_true(v[0] == 3.0);
  /* two tensors, read together */
  lt_tensor *ts[2] = {lt_sub(a, b), lt_mul(b, b)};
  assert_int_equal(lt_warmup(ts, 2), LT_OK);
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(lt_sync(ts, 2, true), LT_OK);
  assert_int_equal(lt_item(ts[0], 0, v), LT_OK);
  assert_true(v[0] == -1.0);
  assert_int_equal(lt_item(ts[1], 0, v), LT_OK);
  assert_true(v[0] == 4.0);
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(ctr("CachedCompile"), 2);
  /* the step graph of the same tensor is another executable */
  lt_tensor *s = lt_add(a, a);
  assert_int_equal(lt_warmup(&s, 1), LT_OK);
  assert_int_equal(ctr("UncachedCompile"), 3);
  assert_int_equal(lt_warmup_step(&s, 1), LT_OK);
  assert_int_equal(ctr("UncachedCompile"), 4);
  assert_int_equal(ctr("ExecuteComputation"), 2);
  lt_release(a);
  lt_release(b);
}

static void test_program_execute_by_key(void **state) {
  (void)state;
  lt_tensor *a = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_tensor *b = tu_f32(SHAPE(2), 1, ((float[]){10, 20}));
  lt_tensor *y = lt_add(lt_mul(a, lt_scalar(CPU0, LT_F32, 3)), b);
  lt_tensor *ins[2] = {a, b};
  lt_program *p = lt_program_create(&y, 1, ins, 2);
  assert_non_null(p);
  lt_key k = lt_program_key(p);
  assert_true(k.lo || k.hi);
  lt_tensor *c = tu_f32(SHAPE(2), 1, ((float[]){5, 6}));
  lt_tensor *d = tu_f32(SHAPE(2), 1, ((float[]){0.5, 0.25}));
  lt_tensor *ins2[2] = {c, d}, *out = NULL;
  int64_t created = ctr("CreateTensor");
  assert_int_equal(lt_program_run(p, ins2, 2, &out), LT_OK);
  assert_int_equal(ctr("CreateTensor") - created, 1); /* no tracing: only the output */
  tu_expect(out, LT_F32, SHAPE(2), 1, (double[]){15.5, 18.25}, 0);
  assert_int_equal(ctr("UncachedCompile"), 1);
  /* wrong input shape, then an evicted key */
  lt_tensor *bad[2] = {c, tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}))};
  assert_int_equal(lt_program_run(p, bad, 2, &out), LT_ESHAPE);
  assert_non_null(strstr(lt_last_error(), "[3]"));
  lt_cache_clear();
  assert_int_equal(lt_program_run(p, ins2, 2, &out), LT_ENOTFOUND);
  assert_non_null(strstr(lt_last_error(), "evicted"));
  lt_program_free(p);
  lt_clear_error();
  assert_null(lt_program_create(&a, 1, NULL, 0));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "no pending graph"));
}

static void test_clear_pending(void **state) {
  (void)state;
  lt_tensor *x = lt_exp(lt_ones(CPU0, LT_F32, SHAPE(2), 1));
  lt_tensor *kept = lt_ones(CPU0, LT_F32, SHAPE(2), 1);
  assert_int_equal(lt_sync(&kept, 1, true), LT_OK);
  assert_true(lt_clear_pending(CPU0) >= 1);
  float v[2];
  assert_int_equal(lt_to_data(x, v, sizeof v), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_clear_pending"));
  tu_expect(kept, LT_F32, SHAPE(2), 1, (double[]){1, 1}, 0);
}

static void test_eager_mode(void **state) {
  (void)state;
  lt_set_eager(true);
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){1, 4}));
  lt_tensor *y = lt_sqrt(x);
  assert_int_equal(lt_get_state(y), LT_STATE_DEVICE); /* queued at once: no pending graph */
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(ctr("ExecuteComputation"), 1);
  lt_tensor *z = lt_sqrt(lt_add(y, y));
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(ctr("ExecuteComputation"), 3);
  lt_tensor *z2 = lt_sqrt(lt_add(z, z));       /* same op signatures: cache hits */
  assert_int_equal(ctr("UncachedCompile"), 2); /* sqrt and add of [2] f32 */
  assert_int_equal(ctr("CachedCompile"), 3);
  lt_set_eager(false);
  tu_expect(z2, LT_F32, SHAPE(2), 1, (double[]){sqrt(2 * sqrt(2.0)), sqrt(2 * sqrt(4.0))}, 1e-6);
  /* Eager execution is asynchronous, as the reference's: an op that fails at
   * run time returns a tensor, and the failure is reported by the read. */
  lt_set_eager(true);
  lt_tensor *idx = tu_i64(SHAPE(1), 1, ((int64_t[]){9}));
  lt_tensor *bad = lt_index_select(x, 0, idx);
  assert_non_null(bad);
  lt_set_eager(false);
  tu_expect_exec_error(bad, "range");
  tu_expect(x, LT_F32, SHAPE(2), 1, (double[]){1, 4}, 0); /* the operand keeps its value */
}

/* Tracing does not wait for an eager op's execution; a read does. */
static void test_eager_mode_is_asynchronous(void **state) {
  (void)state;
  lt_set_eager(true);
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){1, 4}));
  lt_tensor *y = lt_sqrt(x);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_set_execute_delay_us(200000);
  lt_tensor *z = lt_add(y, y); /* queued behind a slow worker */
  assert_false(lt_ready(z));   /* returned before its execution finished */
  lt_set_execute_delay_us(0);
  lt_set_eager(false);
  tu_expect(z, LT_F32, SHAPE(2), 1, (double[]){2, 4}, 0); /* the read waits */
}

static void test_user_donation(void **state) {
  (void)state;
  lt_scope_begin();
  lt_tensor *x = tu_f32(SHAPE(4), 1, ((float[]){1, 2, 3, 4}));
  assert_int_equal(lt_set_donatable(x, true), LT_OK);
  lt_tensor *y = lt_retain(lt_neg(x));
  lt_scope_end(); /* nothing but the graph holds x's buffer now */
  assert_int_equal(lt_sync(&y, 1, true), LT_OK);
  assert_int_equal(ctr("InputOutputAlias"), 1);
  tu_expect(y, LT_F32, SHAPE(4), 1, (double[]){-1, -2, -3, -4}, 0);
  lt_release(y);
  assert_int_equal(lt_set_donatable(NULL, true), LT_EINVAL);
}

static int64_t lock_waits(void) {
  lt_metric_stats s;
  assert_int_equal(lt_get_metric("DeviceLockWait", &s), LT_OK);
  return s.count;
}

/* Three training steps of loss = sum(tanh(x * w)): forward, lt_backward, SGD
 * with momentum, lt_mark_step. overlap: the device is slow and each step is
 * traced while the one before runs; else each step is waited for. w's values
 * after them into out. */
static void train_steps(bool overlap, double out[4]) {
  lt_tensor *w = lt_retain(tu_f32(SHAPE(4), 1, ((float[]){0.5f, -1, 2, 0.25f})));
  lt_tensor *x = lt_retain(tu_f32(SHAPE(4), 1, ((float[]){1, 2, -0.5f, 3})));
  assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_SGD);
  cfg.lr = 0.1;
  cfg.momentum = 0.9;
  lt_nn_optim *opt = lt_nn_optim_create(&cfg, &w, 1);
  assert_non_null(opt);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_set_execute_delay_us(overlap ? 400000 : 0);
  lt_tensor *prev = NULL; /* the loss of the step before, synced by its mark_step */
  for (int step = 0; step < 3; step++) {
    int64_t waits = lock_waits();
    lt_scope_begin();
    lt_tensor *loss = lt_sum(lt_tanh(lt_mul(x, w)), NULL, 0, false);
    assert_int_equal(lt_backward(loss), LT_OK);
    assert_int_equal(lt_nn_optim_step(opt), LT_OK);
    lt_retain(loss);
    lt_scope_end();
    if (overlap && prev) {
      /* the whole step, backward included, was traced without taking the
       * device lock, while the step before still ran */
      assert_int_equal(lock_waits(), waits);
      assert_false(lt_ready(prev));
    }
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    if (!overlap) assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    lt_release(prev);
    prev = loss;
  }
  lt_set_execute_delay_us(0);
  lt_release(prev);
  tu_read(w, out, 4);
  lt_nn_optim_free(opt);
  lt_release(w);
  lt_release(x);
}

static void test_backward_overlaps_execution(void **state) {
  (void)state;
  double serial[4], overlapped[4];
  train_steps(false, serial);
  train_steps(true, overlapped);
  assert_true(serial[0] != 0.5); /* the steps changed w: the comparison means something */
  for (int i = 0; i < 4; i++)
    if (serial[i] != overlapped[i])
      fail_msg("w[%d]: %.9g overlapped, %.9g serial", i, overlapped[i], serial[i]);
}

typedef struct worker_arg {
  int device;
  double result;
} worker_arg;

static void *trace_loop(void *p) {
  worker_arg *a = p;
  lt_device dev = lt_cpu(a->device);
  lt_tensor *w = lt_retain(lt_full(dev, LT_F64, SHAPE(8), 1, 1.0));
  for (int step = 0; step < 50; step++) {
    lt_scope_begin();
    lt_assign(w, lt_add(lt_mul(w, lt_scalar(dev, LT_F64, 0.5)), lt_scalar(dev, LT_F64, step)));
    lt_scope_end();
    lt_mark_step(dev);
  }
  lt_item(w, 7, &a->result);
  lt_release(w);
  return NULL;
}

static void test_two_devices_two_threads(void **state) {
  (void)state;
  worker_arg a = {2, 0}, b = {3, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, trace_loop, &a);
  pthread_create(&tb, NULL, trace_loop, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  double w = 1.0;
  for (int step = 0; step < 50; step++) w = w * 0.5 + step;
  assert_true(fabs(a.result - w) < 1e-9);
  assert_true(fabs(b.result - w) < 1e-9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      STEST(test_step_donation_and_peak_memory),
      STEST(test_mark_step_cuts_graph_and_uploads_host_data),
      STEST(test_two_tensors_one_value),
      STEST(test_read_right_after_mark_step),
      STEST(test_force_flag_is_part_of_the_key),
      STEST(test_collect_once_per_tensor_and_data_leaves),
      STEST(test_scalar_cache),
      STEST(test_overlap_tracing_with_execution),
      STEST(test_async_failure_surfaces_once),
      STEST(test_compile_failure_keeps_pending),
      STEST(test_warmup_then_hit),
      STEST(test_warmup_then_read_hits),
      STEST(test_program_execute_by_key),
      STEST(test_clear_pending),
      STEST(test_eager_mode),
      STEST(test_eager_mode_is_asynchronous),
      STEST(test_user_donation),
      STEST(test_two_devices_two_threads),
      STEST(test_backward_overlaps_execution),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
