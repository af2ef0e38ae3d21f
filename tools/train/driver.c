/* The training driver of lazytensor-train (driver.h). */
#include "driver.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "cli.h"

bool driver_parse_option(driver_opts *o, const char *name, const char *val, bool *ok) {
  int64_t iv = 0;
  *ok = true;
  if (!strcmp(name, "--seed")) {
    *ok = cli_parse_i64(val, 0, &iv);
    o->seed = (uint64_t)iv;
  } else if (!strcmp(name, "--log-every"))
    *ok = cli_parse_i64(val, 1, &o->log_every);
  else if (!strcmp(name, "--threads")) {
    *ok = cli_parse_i64(val, 1, &iv);
    o->threads = val;
  } else if (!strcmp(name, "--backend")) {
    *ok = !strcmp(val, "ref") || !strcmp(val, "cpu");
    o->backend = val;
  } else if (!strcmp(name, "--data"))
    o->data = val;
  else if (!strcmp(name, "--save"))
    o->save = val;
  else if (!strcmp(name, "--cache-dir"))
    o->cache_dir = val;
  else if (!strcmp(name, "--log"))
    o->log_path = val;
  else if (!strcmp(name, "--plot"))
    o->plot_path = val;
  else if (!strcmp(name, "--precision")) {
    *ok = !strcmp(val, "f32") || !strcmp(val, "bf16");
    o->precision = !strcmp(val, "bf16") ? LT_BF16 : LT_F32;
  } else
    return false;
  return true;
}

int driver_setup(const driver_opts *o, lt_device *dev) {
#if defined(__SSE__)
  /* Adam's first moment of an input whose grad stays 0 decays through the
   * subnormal range, which otherwise doubles the step time. */
  if (!o->keep_denormals) _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
#endif
  /* Before the library's first use: both are read once. */
  if (o->threads) setenv("LT_NUM_THREADS", o->threads, 1);
  if (o->backend) setenv("LT_BACKEND", o->backend, 1);
  /* Before the first compile (the model's initialisation is one). */
  if (o->cache_dir && lt_set_persistent_cache(o->cache_dir, false) != LT_OK)
    return driver_fail("--cache-dir");
  *dev = lt_cpu(0);
  lt_set_seed(*dev, o->seed);
  return 0;
}

const char *driver_backend_name(void) {
  const char *be = getenv("LT_BACKEND");
  return be && *be ? be : "default";
}

const char *driver_precision_name(const driver_opts *o, lt_device dev) {
  static char name[96];
  if (o->precision != LT_BF16) return "f32";
  const char *isa = lt_get_isa(dev, LT_BF16);
  snprintf(name, sizeof name, "bf16 (autocast, products on %s)", isa ? isa : "?");
  return name;
}

const char *driver_threads_name(void) {
  return getenv("LT_NUM_THREADS") ? getenv("LT_NUM_THREADS") : "default";
}

int driver_fail(const char *what) {
  fflush(stdout);
  const char *e = lt_last_error();
  fprintf(stderr, "lazytensor-train: %s: %s\n", what, *e ? e : "failed (see above)");
  return 1;
}

int driver_loss_begin(driver_loss *l, lt_device dev) {
  double zero = 0;
  l->dev = dev;
  l->prev = NULL;
  l->acc = lt_from_data(dev, LT_F64, NULL, 0, &zero);
  return l->acc ? LT_OK : lt_last_status();
}

int driver_loss_init(driver_loss *l, lt_device dev, const char *what) {
  return driver_loss_begin(l, dev) == LT_OK ? 0 : driver_fail(what);
}

void driver_loss_free(driver_loss *l) {
  lt_release(l->prev);
  lt_release(l->acc);
  l->prev = l->acc = NULL;
}

int driver_trace_step(driver_loss *l, lt_tensor *(*trace)(void *ctx), void *ctx) {
  lt_scope_begin();
  lt_tensor *loss = trace(ctx);
  lt_tensor *next = loss ? lt_add(l->acc, lt_cast(loss, LT_F64)) : NULL;
  if (next) lt_retain(next);
  lt_scope_end();
  if (!next) return lt_last_status() != LT_OK ? lt_last_status() : LT_EINVAL;
  lt_release(l->prev);
  l->prev = l->acc;
  l->acc = next;
  return LT_OK;
}

int driver_step(driver_loss *l, lt_tensor *(*trace)(void *ctx), void *ctx) {
  if (driver_trace_step(l, trace, ctx) != LT_OK) return driver_fail("training step");
  if (lt_mark_step(l->dev) != LT_OK) return driver_fail("training step (mark_step)");
  return 0;
}

int64_t driver_planned_steps(int64_t epochs, int64_t per_epoch, int64_t limit) {
  int64_t planned = epochs * per_epoch;
  return limit && limit < planned ? limit : planned;
}

double driver_cosine_lr(double lr, int64_t step, int64_t steps) {
  return 0.5 * lr * (1 + cos(3.14159265358979323846 * (double)step / (double)steps));
}

int driver_read_sum(lt_tensor *sum, double *out) {
  return lt_item(sum, 0, out) == LT_OK ? 0 : driver_fail("reading the loss");
}

double driver_window_loss(const driver_window *w, int64_t step, double sum) {
  return step > w->step ? (sum - w->sum) / (double)(step - w->step) : NAN;
}

double driver_window_rate(const driver_window *w, int64_t done, double t) {
  return (double)(done - w->done) / (t - w->t);
}

int64_t driver_log_every(int64_t steps) {
  return steps / DRIVER_LOG_POINTS > 1 ? steps / DRIVER_LOG_POINTS : 1;
}

/* A counter's value (-1 for an unknown name). */
static long long counter(const char *name) {
  int64_t v = -1;
  lt_get_counter(name, &v);
  return (long long)v;
}

static double metric_ms(const char *name) {
  lt_metric_stats st;
  return lt_get_metric(name, &st) == LT_OK ? st.total / 1e6 : 0.0;
}

void driver_print_summary(void) {
  printf("summary: compiles %lld uncached, %lld cached (cache hits)\n", counter("UncachedCompile"),
         counter("CachedCompile"));
  /* Tracing and waiting apart: a step traced faster than the device runs the
   * one before waits for the lock, and that wait is not tracing. */
  printf("summary: trace %.1f ms, lock wait %.1f ms, compile %.1f ms, execute %.1f ms\n",
         metric_ms("TraceTime"), metric_ms("DeviceLockWait"), metric_ms("CompileTime"),
         metric_ms("ExecuteTime"));
  /* Model FLOPs utilisation (docs/COST.md): the executor's cost analysis of
   * every graph run, over the time the executions took, against the FMA
   * peak of the threads the library runs on. */
  lt_cost cost;
  double exec_ms = metric_ms("ExecuteTime"), peak = 0;
  if (lt_get_executed_cost(&cost) != LT_OK || !(exec_ms > 0)) return;
  double gflops = cost.flops / exec_ms / 1e6;
  if (lt_get_fma_peak(0, &peak) == LT_OK)
    printf(
        "summary: achieved %.1f GFLOP/s, MFU %.3f (%.3g GFLOP executed; FMA peak %.1f GFLOP/s)\n",
        gflops, gflops / peak, cost.flops / 1e9, peak);
  else
    printf("summary: achieved %.1f GFLOP/s (%.3g GFLOP executed), no MFU: %s\n", gflops,
           cost.flops / 1e9, lt_last_error());
}
