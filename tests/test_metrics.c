/* Counters, timers and value metrics: what the executor records at each sync,
 * the reservoir statistics, the report, reset, and the step warnings. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "../src/core/lt_metrics.h"
#include "../src/lt_test_hooks.h"

static const char *const kTimers[] = {
    "TraceTime",     "CompileTime", "ExecuteTime", "TransferToDeviceTime", "TransferFromDeviceTime",
    "DeviceLockWait"};
static const char *const kValues[] = {"TensorsGraphSize", "InputOutputAliasCount"};
enum { kNumTimers = 6, kNumValues = 2 };

#define MTEST(f) cmocka_unit_test_setup_teardown(f, tu_setup_fresh, tu_teardown_wait)

static lt_metric_stats metric(const char *name) {
  lt_metric_stats s;
  memset(&s, 0xff, sizeof s);
  if (lt_get_metric(name, &s) != LT_OK) fail_msg("lt_get_metric(%s): %s", name, lt_last_error());
  return s;
}

/* The invariants every metric keeps, whatever recorded it. */
static void expect_consistent(const char *name, bool timer) {
  lt_metric_stats s = metric(name);
  assert_true(s.count >= 0);
  if (s.count == 0) {
    assert_true(s.total == 0 && s.min == 0 && s.max == 0 && s.p50 == 0 && s.p99 == 0);
    return;
  }
  if (!(s.min <= s.p50 && s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.max))
    fail_msg("%s: min %g p50 %g p90 %g p99 %g max %g out of order", name, s.min, s.p50, s.p90,
             s.p99, s.max);
  if (timer) assert_true(s.min >= 0);
  assert_true(s.total >= s.max * (s.min >= 0 ? 1 : 0));
  assert_true(s.total <= s.max * (double)s.count + 1e-9);
  assert_true(s.total >= s.min * (double)s.count - 1e-9);
}

/* ---- step warnings (first: they run before any thread of the library exists) ---- */

/* LT_METRICS_WARNINGS=0, read at the first step of a process: a child. */
static void test_step_warnings_disabled(void **state) {
  (void)state;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("LT_METRICS_WARNINGS", "0", 1);
    char path[] = "/tmp/lt_metrics_child_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(2);
    lt_counters_reset();
    for (int i = 0; i < 30; i++) {
      lt__count(LT_CTR_UNCACHED_COMPILE, 1);
      lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
      lt__metrics_on_step();
    }
    off_t size = lseek(fd, 0, SEEK_END);
    unlink(path);
    _exit(size == 0 ? 0 : 3);
  }
  assert_int_equal(tu_wait_child(pid), 0);
}

static void test_step_warnings(void **state) {
  (void)state;
  tu_capture c;
  tu_capture_begin(&c, "lt_metrics_stderr_");

  /* A steady loop: compiles before and in its first steps never warn. */
  lt__count(LT_CTR_UNCACHED_COMPILE, 5);
  for (int i = 0; i < 30; i++) {
    if (i < 3) lt__count(LT_CTR_UNCACHED_COMPILE, 1);
    if (i % 2) lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
    lt__metrics_on_step();
  }
  char *text = tu_capture_read(&c);
  assert_string_equal(text, "");
  free(text);

  /* A graph that changes every step: warned after more than 10 steps, once. */
  lt_counters_reset();
  for (int i = 0; i < 11; i++) {
    lt__count(LT_CTR_UNCACHED_COMPILE, 1);
    lt__metrics_on_step();
  }
  text = tu_capture_read(&c);
  assert_string_equal(text, "");
  free(text);
  for (int i = 0; i < 20; i++) {
    lt__count(LT_CTR_UNCACHED_COMPILE, 1);
    lt__metrics_on_step();
  }
  text = tu_capture_read(&c);
  assert_int_equal(tu_occurrences(text, "compiles in"), 1);
  assert_non_null(strstr(text, "11 compiles in 11 steps"));
  assert_non_null(strstr(text, "LT_DEBUG=1"));
  assert_null(strstr(text, "read from the device"));
  free(text);

  /* A value read on every step: a streak of 9 does not warn, one of 10 does. */
  lt_counters_reset();
  lt__metrics_on_step();
  for (int i = 0; i < 9; i++) {
    lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
    lt__metrics_on_step();
  }
  lt__metrics_on_step(); /* no read: the streak ends */
  text = tu_capture_read(&c);
  assert_null(strstr(text, "read from the device"));
  free(text);
  for (int i = 0; i < 25; i++) {
    lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 2);
    lt__metrics_on_step();
  }
  text = tu_capture_read(&c);
  assert_int_equal(tu_occurrences(text, "read from the device"), 1);
  free(text);

  /* Each warning at most once per process, even after a reset. */
  lt_counters_reset();
  for (int i = 0; i < 40; i++) {
    lt__count(LT_CTR_UNCACHED_COMPILE, 1);
    lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
    lt__metrics_on_step();
  }
  text = tu_capture_read(&c);
  assert_int_equal(tu_occurrences(text, "compiles in"), 1);
  assert_int_equal(tu_occurrences(text, "read from the device"), 1);
  free(text);
  tu_capture_end(&c);
  lt_counters_reset();
}

/* ---- the reservoir ------------------------------------------------------------------- */

static void test_metric_errors(void **state) {
  (void)state;
  lt_metric_stats s;
  assert_int_equal(lt_get_metric(NULL, &s), LT_EINVAL);
  assert_int_equal(lt_get_metric("CompileTime", NULL), LT_EINVAL);
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_int_equal(lt_get_metric("NoSuchMetric", &s), LT_ENOTFOUND);
  assert_non_null(strstr(lt_last_error(), "NoSuchMetric"));
  assert_int_equal(lt_get_metric("CachedCompile", &s), LT_ENOTFOUND); /* a counter, not a metric */
  assert_int_equal(lt_get_metric("compiletime", &s), LT_ENOTFOUND);   /* names are exact */
  for (int i = 0; i < kNumTimers; i++) assert_int_equal(lt_get_metric(kTimers[i], &s), LT_OK);
  for (int i = 0; i < kNumValues; i++) assert_int_equal(lt_get_metric(kValues[i], &s), LT_OK);
  assert_int_equal(tu_counter("MarkStep"), 0);
  assert_int_equal(tu_counter("InputOutputAlias"), 0);
}

/* One answer for an unknown name, for every lookup by name: LT_ENOTFOUND, a
 * message naming it and where the known names are listed, *out untouched. The
 * deprecated lt_counter keeps its -1 and records the same status. */
static void test_unknown_names(void **state) {
  (void)state;
  int64_t v = 42;
  assert_int_equal(lt_get_counter("NoSuchCounter", &v), LT_ENOTFOUND);
  assert_int_equal(lt_last_status(), LT_ENOTFOUND);
  assert_int_equal(v, 42);
  assert_non_null(strstr(lt_last_error(), "'NoSuchCounter'"));
  assert_non_null(strstr(lt_last_error(), "lt_counter_names"));
  assert_int_equal(lt_get_counter("CompileTime", &v), LT_ENOTFOUND); /* a metric, not a counter */
  assert_int_equal(lt_get_counter("markstep", &v), LT_ENOTFOUND);    /* names are exact */
  assert_int_equal(lt_get_counter(NULL, &v), LT_EINVAL);
  assert_int_equal(lt_get_counter("MarkStep", NULL), LT_EINVAL);
  assert_int_equal(lt_get_counter("MarkStep", &v), LT_OK);
  assert_int_equal(v, 0);

  lt_metric_stats s, before;
  memset(&s, 0x5a, sizeof s);
  before = s;
  assert_int_equal(lt_get_metric("NoSuchMetric", &s), LT_ENOTFOUND);
  assert_int_equal(lt_last_status(), LT_ENOTFOUND);
  assert_memory_equal(&s, &before, sizeof s);
  assert_non_null(strstr(lt_last_error(), "'NoSuchMetric'"));
  assert_non_null(strstr(lt_last_error(), "lt_metric_names"));

  /* The lists name exactly what the lookups know. */
  int ncounters = 0, nmetrics = 0;
  for (const char *const *n = lt_counter_names(); *n; n++, ncounters++)
    assert_int_equal(lt_get_counter(*n, &v), LT_OK);
  for (const char *const *n = lt_metric_names(); *n; n++, nmetrics++) {
    assert_int_equal(lt_get_metric(*n, &s), LT_OK);
    assert_int_equal(lt_get_counter(*n, &v), LT_ENOTFOUND);
  }
  assert_int_equal(ncounters, LT_CTR_COUNT);
  assert_int_equal(nmetrics, LT_TIMER_COUNT + LT_VALUE_COUNT);
  for (int i = 0; i < kNumTimers + kNumValues; i++) {
    const char *name = i < kNumTimers ? kTimers[i] : kValues[i - kNumTimers];
    bool listed = false;
    for (const char *const *n = lt_metric_names(); *n; n++) listed |= strcmp(*n, name) == 0;
    assert_true(listed);
  }

  /* The old names still answer as before (and record the status). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  lt_clear_error();
  assert_int_equal(lt_counter("NoSuchCounter"), -1);
  assert_int_equal(lt_last_status(), LT_ENOTFOUND);
  assert_non_null(strstr(lt_last_error(), "'NoSuchCounter'"));
  assert_int_equal(lt_counter("MarkStep"), 0);
  assert_int_equal(lt_metric("NoSuchMetric", &s), LT_ENOTFOUND);
  assert_int_equal(lt_metric("CompileTime", &s), LT_OK);
#pragma GCC diagnostic pop
}

static void test_reservoir_percentiles(void **state) {
  (void)state;
  for (int i = 1000; i >= 1; i--) lt__value_add(LT_VALUE_ALIAS_COUNT, i); /* order is irrelevant */
  lt_metric_stats s = metric("InputOutputAliasCount");
  assert_int_equal(s.count, 1000);
  assert_true(s.total == 500500);
  assert_true(s.min == 1 && s.max == 1000);
  assert_true(s.p50 == 500 && s.p90 == 900 && s.p99 == 990);

  /* The percentiles follow the last 1024 samples; count, total, min and max all. */
  for (int i = 0; i < 2000; i++) lt__value_add(LT_VALUE_ALIAS_COUNT, 7);
  s = metric("InputOutputAliasCount");
  assert_int_equal(s.count, 3000);
  assert_true(s.total == 500500 + 14000);
  assert_true(s.min == 1 && s.max == 1000);
  assert_true(s.p50 == 7 && s.p90 == 7 && s.p99 == 7);

  lt__timer_add(LT_TIMER_LOCK_WAIT, 2500000); /* 2.5 ms */
  s = metric("DeviceLockWait");
  assert_true(s.count >= 1 && s.max >= 2500000);
  lt__timer_add((lt_timer_id)99, 1); /* out of range: ignored */
  lt__value_add((lt_value_id)-1, 1);
  for (int i = 0; i < kNumTimers; i++) expect_consistent(kTimers[i], true);
  for (int i = 0; i < kNumValues; i++) expect_consistent(kValues[i], false);
}

enum { kThreads = 4, kPerThread = 20000 };

static void *add_values(void *arg) {
  (void)arg;
  for (int i = 0; i < kPerThread; i++) lt__value_add(LT_VALUE_ALIAS_COUNT, (double)(i % 10));
  return NULL;
}

static void test_metrics_are_thread_safe(void **state) {
  (void)state;
  pthread_t th[kThreads];
  for (int i = 0; i < kThreads; i++)
    assert_int_equal(pthread_create(&th[i], NULL, add_values, NULL), 0);
  for (int i = 0; i < kThreads; i++) pthread_join(th[i], NULL);
  lt_metric_stats s = metric("InputOutputAliasCount");
  assert_int_equal(s.count, kThreads * kPerThread);
  assert_true(s.total == 45.0 * kThreads * kPerThread / 10);
  assert_true(s.min == 0 && s.max == 9);
  expect_consistent("InputOutputAliasCount", false);
}

/* ---- what the executor records (needs its calls) ---------------------------------------- */

/* exp(a + b) on n elements: 4 nodes (two data leaves, add, exp). */
static double run_graph(int64_t n, float fill) {
  float *d = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) d[i] = fill;
  lt_tensor *a = tu_f32(SHAPE(n), 1, d), *b = tu_f32(SHAPE(n), 1, d);
  free(d);
  double out[16];
  tu_read(lt_exp(lt_add(a, b)), out, 16);
  return out[0];
}

static void test_timers_and_values_after_syncs(void **state) {
  (void)state;
  assert_true(fabs(run_graph(4, 0.5f) - exp(1.0)) < 1e-5); /* compiles */
  assert_true(fabs(run_graph(4, 1.0f) - exp(2.0)) < 1e-5); /* cache hit */
  assert_true(fabs(run_graph(8, 0.0f) - 1.0) < 1e-6);      /* new shape: compiles */
  double out[4];
  tu_read(lt_neg(tu_f32(SHAPE(2), 1, ((float[]){3, 4}))), out, 4); /* 2 nodes, compiles */
  assert_true(out[0] == -3 && out[1] == -4);
  assert_int_equal(tu_counter("UncachedCompile"), 3);
  assert_int_equal(tu_counter("CachedCompile"), 1);

  lt_metric_stats s = metric("TensorsGraphSize"); /* one sample per synced graph */
  assert_int_equal(s.count, 4);
  assert_true(s.total == 4 + 4 + 4 + 2);
  assert_true(s.min == 2 && s.max == 4 && s.p50 == 4 && s.p99 == 4);

  s = metric("CompileTime"); /* one sample per compile */
  assert_int_equal(s.count, 3);
  assert_true(s.min > 0);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  s = metric("ExecuteTime"); /* one sample per execution */
  assert_true(s.count >= 4 && tu_counter("ExecuteComputation") >= 4);
  s = metric("TransferFromDeviceTime");
  assert_true(s.count >= 4);
  s = metric("DeviceLockWait");
  assert_true(s.count >= 4);
  s = metric("TraceTime"); /* between syncs: all but the first */
  assert_true(s.count >= 3);
  s = metric("InputOutputAliasCount"); /* no donors outside mark_step */
  assert_true(s.count == 3 && s.max == 0);
  for (int i = 0; i < kNumTimers; i++) expect_consistent(kTimers[i], true);
  for (int i = 0; i < kNumValues; i++) expect_consistent(kValues[i], false);
}

/* ---- report and reset ---------------------------------------------------------------- */

static void test_report(void **state) {
  (void)state;
  run_graph(4, 1.0f);
  lt__timer_add(LT_TIMER_LOCK_WAIT, 1500000);
  int need = lt_metrics_report(NULL, 0);
  assert_true(need > 0);
  char *full = malloc((size_t)need + 1);
  memset(full, 'x', (size_t)need + 1);
  assert_int_equal(lt_metrics_report(full, (size_t)need + 1), need);
  assert_int_equal(strlen(full), need);
  for (const char *const *n = lt_counter_names(); *n; n++) {
    char line[128];
    snprintf(line, sizeof line, "Counter: %s\n", *n);
    if (!strstr(full, line)) fail_msg("report lacks counter %s:\n%s", *n, full);
  }
  for (int i = 0; i < kNumTimers + kNumValues; i++) {
    const char *name = i < kNumTimers ? kTimers[i] : kValues[i - kNumTimers];
    char line[128];
    snprintf(line, sizeof line, "Metric: %s\n", name);
    if (!strstr(full, line)) fail_msg("report lacks metric %s:\n%s", name, full);
  }
  assert_non_null(strstr(full, "Percentiles: 50%="));
  assert_non_null(strstr(full, "1.500ms")); /* timers in milliseconds */
  assert_non_null(strstr(full, "Metric: TensorsGraphSize\n  TotalSamples: 1\n  Accumulator: 4\n"));

  /* snprintf semantics: truncated but terminated, the same full length. */
  char small[16];
  memset(small, 'x', sizeof small);
  assert_int_equal(lt_metrics_report(small, sizeof small), need);
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_memory_equal(small, full, sizeof small - 1);
  char exact[1];
  exact[0] = 'x';
  assert_int_equal(lt_metrics_report(exact, 1), need);
  assert_int_equal(exact[0], '\0');
  assert_int_equal(lt_metrics_report(full, (size_t)need), need); /* one byte short */
  assert_int_equal(strlen(full), need - 1);
  free(full);
}

static void test_reset(void **state) {
  (void)state;
  run_graph(4, 1.0f);
  lt__timer_add(LT_TIMER_TRANSFER_TO, 10);
  assert_true(tu_counter("SyncTensors") > 0);
  assert_true(metric("TensorsGraphSize").count > 0);
  lt_wait_device_ops(CPU0);
  lt_counters_reset();
  for (const char *const *n = lt_counter_names(); *n; n++) assert_int_equal(tu_counter(*n), 0);
  for (int i = 0; i < kNumTimers + kNumValues; i++) {
    const char *name = i < kNumTimers ? kTimers[i] : kValues[i - kNumTimers];
    lt_metric_stats s = metric(name);
    assert_int_equal(s.count, 0);
    assert_true(s.total == 0 && s.min == 0 && s.max == 0 && s.p50 == 0 && s.p90 == 0 && s.p99 == 0);
  }
  char buf[8192];
  lt_metrics_report(buf, sizeof buf);
  assert_non_null(strstr(buf, "Metric: CompileTime\n  TotalSamples: 0\n"));
  /* Recording goes on after a reset. */
  lt__value_add(LT_VALUE_GRAPH_SIZE, 3);
  lt_metric_stats s = metric("TensorsGraphSize");
  assert_true(s.count == 1 && s.min == 3 && s.max == 3 && s.p50 == 3);
}

/* ---- tracing apart from waiting ------------------------------------------------------- */

/* w = -w, then a step barrier. */
static void negate_step(lt_tensor *w) {
  lt_scope_begin();
  assert_int_equal(lt_assign(w, lt_neg(w)), LT_OK);
  lt_scope_end();
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
}

/* Two steps on a slow device; the second waits for the first's execution, in
 * its own sync or, with wait_first, in lt_wait_device_ops before it. From the
 * end of the first step's sync to the second's getting the lock, the time is
 * tracing then waiting: TraceTime's sample and the DeviceLockWait samples are
 * disjoint, so they sum to at most the time around both steps; and to at
 * least the delay, which began after the first sync ended. Counting the wait
 * in TraceTime too would make the sum about twice the delay. */
static void slow_device_steps(bool wait_first) {
  const int64_t delay_ns = 200 * 1000000;
  lt_tensor *w = lt_retain(tu_f32(SHAPE(4), 1, ((float[]){0, 1, 2, 3})));
  negate_step(w); /* compiled here, not in the window below */
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_set_execute_delay_us(delay_ns / 1000);
  int64_t t0 = lt__now_ns();
  negate_step(w); /* queued: the worker sleeps, then runs it */
  assert_false(lt_ready(w));
  lt_metric_stats trace0 = metric("TraceTime"), wait0 = metric("DeviceLockWait");
  if (wait_first) assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  negate_step(w);
  int64_t t1 = lt__now_ns();
  lt_metric_stats trace1 = metric("TraceTime"), wait1 = metric("DeviceLockWait");
  lt_set_execute_delay_us(0);
  assert_int_equal(trace1.count, trace0.count + 1);
  assert_int_equal(wait1.count, wait0.count + (wait_first ? 2 : 1));
  double trace = trace1.total - trace0.total, wait = wait1.total - wait0.total;
  if (!(trace + wait <= (double)(t1 - t0) && trace + wait >= (double)delay_ns))
    fail_msg("%s: TraceTime %.3f ms + DeviceLockWait %.3f ms, window %.3f ms, delay %.3f ms",
             wait_first ? "wait, then sync" : "sync", trace / 1e6, wait / 1e6,
             (double)(t1 - t0) / 1e6, (double)delay_ns / 1e6);
  tu_expect(w, LT_F32, SHAPE(4), 1, (double[]){0, -1, -2, -3}, 0);
  lt_release(w);
}

static void test_lock_wait_is_not_trace_time(void **state) {
  (void)state;
  slow_device_steps(false);
  slow_device_steps(true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      MTEST(test_step_warnings_disabled),
      MTEST(test_step_warnings),
      MTEST(test_metric_errors),
      MTEST(test_unknown_names),
      MTEST(test_reservoir_percentiles),
      MTEST(test_metrics_are_thread_safe),
      MTEST(test_timers_and_values_after_syncs),
      MTEST(test_report),
      MTEST(test_reset),
      MTEST(test_lock_wait_is_not_trace_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
