/* The thread pool: LT_NUM_THREADS workers (default: the CPUs this process may
 * run on), the caller being one of them. A job is a kernel over [0, extent)
 * cut into chunks that threads take from an atomic counter. Small jobs run
 * on the caller alone. Workers sleep on a condition variable between jobs.
 * The GEMM libraries run one thread per call (cpu_gemm.c), their products cut
 * into parts for this pool: one set of threads for the whole backend. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu.h"

#define MAX_THREADS 256
#define MIN_WORK 32768 /* elements below which a job runs on the caller */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_threads = 1;
static pthread_mutex_t g_job_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER, g_done = PTHREAD_COND_INITIALIZER;
static uint64_t g_gen;
static int g_active; /* workers still on the current job */

static struct {
  cpu_kernel_fn fn;
  void **slots;
  int64_t extent, chunk, nchunks;
  atomic_llong next;
} g_job;

static void run_chunks(void) {
  for (;;) {
    long long c = atomic_fetch_add(&g_job.next, 1);
    if (c >= g_job.nchunks) break;
    int64_t lo = c * g_job.chunk, hi = lo + g_job.chunk;
    if (hi > g_job.extent) hi = g_job.extent;
    g_job.fn(g_job.slots, lo, hi);
  }
}

static void *worker(void *arg) {
  (void)arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&g_lock);
  for (;;) {
    while (g_gen == seen) pthread_cond_wait(&g_wake, &g_lock);
    seen = g_gen;
    pthread_mutex_unlock(&g_lock);
    run_chunks();
    pthread_mutex_lock(&g_lock);
    if (--g_active == 0) pthread_cond_signal(&g_done);
  }
  return NULL;
}

static void pool_init(void) {
  int n = 0;
  const char *s = getenv("LT_NUM_THREADS");
  if (s && *s) n = atoi(s);
  if (n <= 0) {
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  }
  if (n < 1) n = 1;
  if (n > MAX_THREADS) n = MAX_THREADS;
  cpu_gemm_init();
  int started = 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 1; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, worker, NULL) != 0) break;
    started++;
  }
  pthread_attr_destroy(&attr);
  g_threads = started;
}

int cpu_pool_threads(void) {
  pthread_once(&g_once, pool_init);
  return g_threads;
}

/* One job on every thread, the caller included; returns when all chunks ran. */
static void dispatch(cpu_kernel_fn fn, void **slots, int64_t extent, int64_t chunk) {
  pthread_mutex_lock(&g_job_lock);
  g_job.fn = fn;
  g_job.slots = slots;
  g_job.extent = extent;
  g_job.chunk = chunk;
  g_job.nchunks = (extent + chunk - 1) / chunk;
  atomic_store(&g_job.next, 0);
  pthread_mutex_lock(&g_lock);
  g_active = g_threads - 1;
  g_gen++;
  pthread_cond_broadcast(&g_wake);
  pthread_mutex_unlock(&g_lock);
  run_chunks();
  pthread_mutex_lock(&g_lock);
  while (g_active > 0) pthread_cond_wait(&g_done, &g_lock);
  pthread_mutex_unlock(&g_lock);
  pthread_mutex_unlock(&g_job_lock);
}

void cpu_pool_run(cpu_kernel_fn fn, void **slots, int64_t extent, int64_t unit_cost) {
  if (extent <= 0) return;
  int nt = cpu_pool_threads();
  int64_t work = extent * (unit_cost > 0 ? unit_cost : 1);
  if (nt == 1 || extent == 1 || work < MIN_WORK) {
    fn(slots, 0, extent);
    return;
  }
  /* about 4 chunks per thread, none under MIN_WORK / 4 elements */
  int64_t chunks = (int64_t)nt * 4;
  int64_t per = (MIN_WORK / 4) / (unit_cost > 0 ? unit_cost : 1);
  if (per < 1) per = 1;
  if (extent / chunks < per) chunks = extent / per;
  if (chunks < 2) chunks = 2;
  if (chunks > extent) chunks = extent;
  int64_t chunk = (extent + chunks - 1) / chunks;
  if (unit_cost <= 1 && chunk > 64) chunk = (chunk + 63) & ~(int64_t)63; /* whole cache lines */
  dispatch(fn, slots, extent, chunk);
}

void cpu_pool_run_parts(cpu_kernel_fn fn, void **ctx, int64_t nparts) {
  if (nparts <= 0) return;
  if (cpu_pool_threads() == 1 || nparts == 1) {
    fn(ctx, 0, nparts);
    return;
  }
  dispatch(fn, ctx, nparts, 1);
}

void cpu_loop_run(const cpu_kernel *k, void **table) {
  cpu_pool_run(k->fn, cpu_loop_args(k, table), k->extent, k->unit_cost);
}
