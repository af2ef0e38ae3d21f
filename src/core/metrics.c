/* Counters, timers and value metrics, their text report, and the automatic
 * step warnings.
 *
 * Counters are relaxed atomics (metrics.h). Each timer or value metric has its
 * own mutex guarding its count, total, min, max and a ring buffer of its last
 * kReservoir samples; percentiles are taken over that ring (nearest rank), so
 * they describe recent behaviour and cost bounded memory. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/lt_error.h"
#include "lazytensor.h"
#include "lt_metrics.h"

_Atomic int64_t lt__counters[LT_CTR_COUNT];

/* Names follow the reference's counters so that its users recognise them. */
static const char *const kNames[LT_CTR_COUNT + 1] = {"CreateTensor",
                                                     "DestroyTensor",
                                                     "CachedCompile",
                                                     "UncachedCompile",
                                                     "CompileFailure",
                                                     "ExecuteComputation",
                                                     "ExecuteFailure",
                                                     "SyncTensors",
                                                     "TransferToDevice",
                                                     "TransferFromDevice",
                                                     "CompilationCacheEviction",
                                                     "NodesCompiled",
                                                     "MarkStep",
                                                     "InputOutputAlias",
                                                     "ScalarCacheHit",
                                                     "ClearedPending",
                                                     "PersistentCacheHit",
                                                     "PersistentCacheMiss",
                                                     "PersistentCacheDeserializeFailure",
                                                     "PersistentCacheWriteFailure",
                                                     "KernelCompile",
                                                     "KernelCacheHit",
                                                     "ExecutedFlops",
                                                     "ExecutedBytes",
                                                     "Bf16GemmNative",
                                                     "Bf16GemmConverted",
                                                     "Bf16ConvNative",
                                                     "Bf16ConvConverted",
                                                     NULL};
_Static_assert(sizeof kNames / sizeof kNames[0] == LT_CTR_COUNT + 1, "one name per counter");

/* ---- timers and value metrics ---------------------------------------------------- */

enum { kReservoir = 1024, kNumMetrics = LT_TIMER_COUNT + LT_VALUE_COUNT };

typedef struct metric {
  pthread_mutex_t mu;
  int64_t count;
  double total, min, max;
  int next; /* ring position of the next sample */
  double ring[kReservoir];
} metric;

/* Timers first (index = lt_timer_id), then values (LT_TIMER_COUNT + lt_value_id). */
static const char *const kMetricNames[kNumMetrics + 1] = {"TraceTime",
                                                          "CompileTime",
                                                          "ExecuteTime",
                                                          "TransferToDeviceTime",
                                                          "TransferFromDeviceTime",
                                                          "DeviceLockWait",
                                                          "PersistentCacheLoadTime",
                                                          "TensorsGraphSize",
                                                          "InputOutputAliasCount",
                                                          NULL};
_Static_assert(LT_TIMER_COUNT == 7 && LT_VALUE_COUNT == 2, "kMetricNames and g_metrics");

#define METRIC_INIT \
  { .mu = PTHREAD_MUTEX_INITIALIZER }
static metric g_metrics[kNumMetrics] = {METRIC_INIT, METRIC_INIT, METRIC_INIT,
                                        METRIC_INIT, METRIC_INIT, METRIC_INIT,
                                        METRIC_INIT, METRIC_INIT, METRIC_INIT};

int64_t lt__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void metric_add(metric *m, double v) {
  pthread_mutex_lock(&m->mu);
  if (m->count == 0 || v < m->min) m->min = v;
  if (m->count == 0 || v > m->max) m->max = v;
  m->count++;
  m->total += v;
  m->ring[m->next] = v;
  m->next = (m->next + 1) % kReservoir;
  pthread_mutex_unlock(&m->mu);
}

void lt__timer_add(lt_timer_id id, int64_t ns) {
  if ((unsigned)id < LT_TIMER_COUNT) metric_add(&g_metrics[id], (double)ns);
}

void lt__value_add(lt_value_id id, double v) {
  if ((unsigned)id < LT_VALUE_COUNT) metric_add(&g_metrics[LT_TIMER_COUNT + id], v);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least p of the samples at or below it. */
static double percentile(const double *sorted, int n, double p) {
  int k = (int)ceil(p * n) - 1;
  if (k < 0) k = 0;
  if (k >= n) k = n - 1;
  return sorted[k];
}

/* A consistent snapshot of m (the sort runs outside its lock). */
static void metric_stats(metric *m, lt_metric_stats *out) {
  double samples[kReservoir];
  pthread_mutex_lock(&m->mu);
  *out = (lt_metric_stats){.count = m->count, .total = m->total, .min = m->min, .max = m->max};
  int n = m->count < kReservoir ? (int)m->count : kReservoir;
  memcpy(samples, m->ring, (size_t)n * sizeof samples[0]);
  pthread_mutex_unlock(&m->mu);
  if (n == 0) return;
  qsort(samples, (size_t)n, sizeof samples[0], cmp_double);
  out->p50 = percentile(samples, n, 0.50);
  out->p90 = percentile(samples, n, 0.90);
  out->p99 = percentile(samples, n, 0.99);
}

static void metric_reset(metric *m) {
  pthread_mutex_lock(&m->mu);
  m->count = 0;
  m->total = m->min = m->max = 0;
  m->next = 0;
  pthread_mutex_unlock(&m->mu);
}

/* Lookups by name (lt_get_metric, lt_get_counter): a status, LT_ENOTFOUND
 * for an unknown name, with a message naming it and where the names are. */
int lt_get_metric(const char *name, lt_metric_stats *out) {
  if (!name || !out) return lt__err(LT_EINVAL, "lt_get_metric: %s is NULL", name ? "out" : "name");
  for (int i = 0; i < kNumMetrics; i++) {
    if (strcmp(kMetricNames[i], name) == 0) {
      metric_stats(&g_metrics[i], out);
      return LT_OK;
    }
  }
  return lt__err(LT_ENOTFOUND, "lt_get_metric: no metric named '%s' (lt_metric_names lists them)",
                 name);
}

const char *const *lt_metric_names(void) { return kMetricNames; }

/* ---- counters ------------------------------------------------------------------------ */

const char *const *lt_counter_names(void) { return kNames; }

int lt_get_counter(const char *name, int64_t *out) {
  if (!name || !out) return lt__err(LT_EINVAL, "lt_get_counter: %s is NULL", name ? "out" : "name");
  for (int i = 0; i < LT_CTR_COUNT; i++) {
    if (strcmp(kNames[i], name) == 0) {
      *out = atomic_load_explicit(&lt__counters[i], memory_order_relaxed);
      return LT_OK;
    }
  }
  return lt__err(LT_ENOTFOUND,
                 "lt_get_counter: no counter named '%s' (lt_counter_names lists them)", name);
}

/* ---- step warnings ------------------------------------------------------------------- */

enum { kStepsBeforeWarning = 10, kTransferWindow = 10 };

static pthread_mutex_t g_step_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int64_t steps;          /* steps seen since the first one (or the last reset) */
  int64_t compiles_base;  /* UncachedCompile at the first step */
  int64_t last_transfers; /* TransferFromDevice at the previous step */
  int transfer_streak;    /* consecutive steps in which it grew */
  int warnings;           /* -1 unknown, 0 disabled (LT_METRICS_WARNINGS=0), 1 enabled */
  bool warned_compiles, warned_transfers; /* once per process, not reset */
} g_step = {.warnings = -1};

static void step_state_reset(void) {
  pthread_mutex_lock(&g_step_mu);
  g_step.steps = 0;
  g_step.compiles_base = 0;
  g_step.last_transfers = 0;
  g_step.transfer_streak = 0;
  pthread_mutex_unlock(&g_step_mu);
}

/* The first call takes the baseline, so compiles before the training loop (or
 * in its first step) do not count: from then on, a graph that compiles at more
 * than every other step is the reference's "graph changes every step" case. A
 * read of a value on every step (a printed loss) makes each step wait for the
 * previous one, which is the other case the reference warns about. */
void lt__metrics_on_step(void) {
  int64_t compiles = atomic_load(&lt__counters[LT_CTR_UNCACHED_COMPILE]);
  int64_t transfers = atomic_load(&lt__counters[LT_CTR_TRANSFER_FROM_DEVICE]);
  char msg[2][320];
  int nmsg = 0;
  pthread_mutex_lock(&g_step_mu);
  if (g_step.warnings < 0) {
    const char *env = getenv("LT_METRICS_WARNINGS");
    g_step.warnings = !(env && strcmp(env, "0") == 0);
  }
  if (g_step.steps++ == 0) {
    g_step.compiles_base = compiles;
    g_step.last_transfers = transfers;
  } else {
    int64_t intervals = g_step.steps - 1, n = compiles - g_step.compiles_base;
    g_step.transfer_streak = transfers > g_step.last_transfers ? g_step.transfer_streak + 1 : 0;
    g_step.last_transfers = transfers;
    if (g_step.warnings && !g_step.warned_compiles && intervals > kStepsBeforeWarning &&
        2 * n > intervals) {
      g_step.warned_compiles = true;
      snprintf(msg[nmsg++], sizeof msg[0],
               "lazytensor: %lld compiles in %lld steps: the graph changes every step; set "
               "LT_DEBUG=1 to see why\n",
               (long long)n, (long long)intervals);
    }
    if (g_step.warnings && !g_step.warned_transfers && g_step.transfer_streak >= kTransferWindow) {
      g_step.warned_transfers = true;
      snprintf(msg[nmsg++], sizeof msg[0],
               "lazytensor: a value was read from the device in each of the last %d steps: "
               "each read waits for the step's execution, so tracing cannot overlap it; read "
               "less often\n",
               kTransferWindow);
    }
  }
  pthread_mutex_unlock(&g_step_mu);
  for (int i = 0; i < nmsg; i++) fputs(msg[i], stderr);
}

void lt_counters_reset(void) {
  for (int i = 0; i < LT_CTR_COUNT; i++) atomic_store(&lt__counters[i], 0);
  for (int i = 0; i < kNumMetrics; i++) metric_reset(&g_metrics[i]);
  step_state_reset();
}

/* ---- the bf16 instruction set --------------------------------------------------------- */

static _Atomic(const char *) g_bf16_isa;

void lt__metrics_set_bf16_isa(const char *name) { atomic_store(&g_bf16_isa, name); }

/* ---- report -------------------------------------------------------------------------- */

typedef struct report {
  char *buf;
  size_t n, used; /* used may pass n: the full length */
} report;

static void emit(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(report *r, const char *fmt, ...) {
  char *dst = r->buf && r->used < r->n ? r->buf + r->used : NULL;
  size_t room = dst ? r->n - r->used : 0;
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (len > 0) r->used += (size_t)len;
}

/* A timer sample (ns) in milliseconds; a value as it is. */
static const char *fmt_metric(char *buf, size_t n, double v, bool timer) {
  if (timer) /* ns resolution below a millisecond, us above */
    snprintf(buf, n, fabs(v) < 1e6 ? "%.6fms" : "%.3fms", v / 1e6);
  else
    snprintf(buf, n, "%.6g", v);
  return buf;
}

int lt_metrics_report(char *buf, size_t n) {
  /* snprintf semantics: always terminated when n > 0, returns the full length. */
  report r = {buf, n, 0};
  if (buf && n) buf[0] = '\0';
  for (int i = 0; i < LT_CTR_COUNT; i++)
    emit(&r, "Counter: %s\n  Value: %lld\n", kNames[i], (long long)atomic_load(&lt__counters[i]));
  const char *isa = atomic_load(&g_bf16_isa);
  if (isa) emit(&r, "Info: Bf16Isa\n  Value: %s\n", isa);
  for (int i = 0; i < kNumMetrics; i++) {
    bool timer = i < LT_TIMER_COUNT;
    lt_metric_stats s;
    metric_stats(&g_metrics[i], &s);
    emit(&r, "Metric: %s\n  TotalSamples: %lld\n", kMetricNames[i], (long long)s.count);
    if (s.count == 0) continue;
    char a[48], b[48], c[48];
    emit(&r, "  Accumulator: %s\n", fmt_metric(a, sizeof a, s.total, timer));
    emit(&r, "  Mean: %s\n", fmt_metric(a, sizeof a, s.total / (double)s.count, timer));
    emit(&r, "  Min/Max: %s / %s\n", fmt_metric(a, sizeof a, s.min, timer),
         fmt_metric(b, sizeof b, s.max, timer));
    emit(&r, "  Percentiles: 50%%=%s; 90%%=%s; 99%%=%s\n", fmt_metric(a, sizeof a, s.p50, timer),
         fmt_metric(b, sizeof b, s.p90, timer), fmt_metric(c, sizeof c, s.p99, timer));
  }
  return (int)r.used;
}
