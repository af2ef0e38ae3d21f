/* The thread pools: LT_NUM_THREADS workers (default: the CPUs this process
 * may run on), the caller being one of them. A job is a kernel over
 * [0, extent) cut into chunks that threads take from an atomic counter. Small
 * jobs run on the caller alone. Between jobs a worker first spins a short
 * while (SPIN_NS) on the job counter, yielding the core now and then, then
 * sleeps on a condition variable: the kernels of a step follow each other
 * within microseconds, and a wake-up through the kernel costs tens of
 * microseconds on a virtual machine (more than a small loop's whole run),
 * while an idle pool still sleeps. The GEMM libraries run one thread per
 * call (cpu_gemm.c), their products cut into parts for these pools.
 *
 * One pool serves every device, except the replicas of an in-process world
 * (lt_world_local): each device of a world of n gets a pool of its own with
 * its share of the threads (LT_NUM_THREADS / n, at least 1), so that the
 * replicas' parallel kernels run at the same time instead of taking turns on
 * one pool. The pool is picked by the device executing on this thread
 * (lt__coll_current, set by the executor). A device's pool is made when its
 * share is first needed and kept (sleeping) after its world is freed; a
 * later world with another share makes another. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../../core/lt_collective.h"
#include "cpu.h"

#define MAX_THREADS 256
#define MIN_WORK 32768 /* elements below which a job runs on the caller */
/* How long a worker (and a caller waiting for its workers) spins before it
 * sleeps: a step's kernels come back to back, so a worker finds the next job
 * while spinning. */
#define SPIN_NS 100000

typedef struct pool {
  int threads;
  pthread_mutex_t job_lock; /* one job at a time */
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  _Atomic uint64_t gen;    /* the current job's number: written under lock, read while spinning */
  _Atomic uint64_t closed; /* the last job whose chunks all ran: its fields may change */
  atomic_int busy;         /* workers inside a job (that read its fields) */
  struct {
    cpu_kernel_fn fn;
    void **slots;
    int64_t extent, chunk, nchunks;
    atomic_llong next, done; /* chunks taken, chunks finished */
  } job;
  struct pool *prev; /* an older pool of the same device (kept: its threads sleep on it) */
} pool;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* A bounded spin: each look at what it waits for is followed by spin_on,
 * which pauses and says whether to look again (false once SPIN_NS passed). */
typedef struct spin {
  unsigned looks;
  uint64_t t0;
} spin;

static bool spin_on(spin *s) {
  cpu_relax();
  if ((++s->looks & 255) != 0) return true; /* the clock now and then: it costs more */
  uint64_t t = lt__cpu_profile_now();
  if (!s->t0)
    s->t0 = t;
  else if (t - s->t0 > SPIN_NS)
    return false;
  /* past the first microseconds, give the core to any other runnable thread
   * (the tracing thread, another process) between looks */
  sched_yield();
  return true;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pool g_pool = {1,
                      PTHREAD_MUTEX_INITIALIZER,
                      PTHREAD_MUTEX_INITIALIZER,
                      PTHREAD_COND_INITIALIZER,
                      PTHREAD_COND_INITIALIZER,
                      0,
                      0,
                      0,
                      {0},
                      NULL};
static pthread_mutex_t g_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static pool *g_dev_pool[LT_MAX_DEVICES]; /* per device of an in-process world */

/* Takes and runs chunks of the current job until none is left. Whoever
 * finishes the last one tells a caller that may have gone to sleep (under
 * the lock, so that the caller's check and its wait cannot straddle it). */
static void run_chunks(pool *p) {
  for (;;) {
    long long c = atomic_fetch_add(&p->job.next, 1);
    if (c >= p->job.nchunks) break;
    int64_t lo = c * p->job.chunk, hi = lo + p->job.chunk;
    if (hi > p->job.extent) hi = p->job.extent;
    p->job.fn(p->job.slots, lo, hi);
    if (atomic_fetch_add_explicit(&p->job.done, 1, memory_order_acq_rel) + 1 == p->job.nchunks) {
      pthread_mutex_lock(&p->lock);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
}

static void *worker(void *arg) {
  pool *p = arg;
  uint64_t seen = 0;
  for (;;) {
    spin sp = {0};
    while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && spin_on(&sp)) {
    }
    if (atomic_load(&p->gen) == seen) {
      pthread_mutex_lock(&p->lock);
      while (atomic_load(&p->gen) == seen) pthread_cond_wait(&p->wake, &p->lock);
      pthread_mutex_unlock(&p->lock);
    }
    seen = atomic_load(&p->gen);
    /* A worker that wakes after the caller ran every chunk itself must not
     * read the job's fields (the caller may be writing the next job's): it
     * enters (busy), then reads the job only if it is still open. The
     * caller closes the job, then waits for busy to be 0. Both sides are
     * sequentially consistent, so at least one of them sees the other. */
    atomic_fetch_add(&p->busy, 1);
    if (atomic_load(&p->closed) != seen) run_chunks(p);
    atomic_fetch_sub(&p->busy, 1);
  }
  return NULL;
}

/* Starts up to n - 1 workers on p; returns the threads it has (caller included). */
static int start_workers(pool *p, int n) {
  int started = 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 1; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, &attr, worker, p) != 0) break;
    started++;
  }
  pthread_attr_destroy(&attr);
  return started;
}

/* LT_NUM_THREADS, else the CPUs this process may run on; 1..MAX_THREADS. */
static int wanted_threads(void) {
  int n = 0;
  const char *s = getenv("LT_NUM_THREADS");
  if (s && *s) n = atoi(s);
  if (n <= 0) {
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  }
  if (n < 1) n = 1;
  if (n > MAX_THREADS) n = MAX_THREADS;
  return n;
}

static bool g_started; /* written once, inside pool_init */

static void pool_init(void) {
  lt__cpu_gemm_init();
  g_pool.threads = start_workers(&g_pool, wanted_threads());
  __atomic_store_n(&g_started, true, __ATOMIC_RELEASE);
}

int lt__cpu_pool_threads_planned(void) {
  return __atomic_load_n(&g_started, __ATOMIC_ACQUIRE) ? g_pool.threads : wanted_threads();
}

/* The pool of the device executing on this thread. */
static pool *current_pool(void) {
  pthread_once(&g_once, pool_init);
  int dev = lt__coll_current();
  lt_coll_binding b;
  if (dev < 0 || dev >= LT_MAX_DEVICES || !lt__coll_binding(dev, &b) || !b.transport->in_process ||
      b.size < 2)
    return &g_pool;
  int share = g_pool.threads / b.size;
  if (share < 1) share = 1;
  pthread_mutex_lock(&g_dev_lock);
  pool *p = g_dev_pool[dev];
  if (!p || p->threads != share) {
    pool *q = calloc(1, sizeof *q);
    if (q) {
      pthread_mutex_init(&q->job_lock, NULL);
      pthread_mutex_init(&q->lock, NULL);
      pthread_cond_init(&q->wake, NULL);
      pthread_cond_init(&q->done, NULL);
      q->prev = p;
      q->threads = start_workers(q, share);
      g_dev_pool[dev] = p = q;
    }
  }
  pthread_mutex_unlock(&g_dev_lock);
  return p ? p : &g_pool;
}

int lt__cpu_pool_threads(void) { return current_pool()->threads; }

/* One job on every thread of p, the caller included; returns when all chunks ran. */
static void dispatch(pool *p, cpu_kernel_fn fn, void **slots, int64_t extent, int64_t chunk) {
  pthread_mutex_lock(&p->job_lock);
  p->job.fn = fn;
  p->job.slots = slots;
  p->job.extent = extent;
  p->job.chunk = chunk;
  p->job.nchunks = (extent + chunk - 1) / chunk;
  atomic_store(&p->job.next, 0);
  atomic_store(&p->job.done, 0);
  pthread_mutex_lock(&p->lock); /* for the workers that went to sleep */
  uint64_t g = atomic_fetch_add(&p->gen, 1) + 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  run_chunks(p);
  /* Done when every chunk ran, not when every worker has answered: a worker
   * still waking from sleep (tens of microseconds) would make a small loop
   * wait for it for nothing. */
  spin sp = {0};
  while (atomic_load_explicit(&p->job.done, memory_order_acquire) < p->job.nchunks &&
         spin_on(&sp)) {
  }
  if (atomic_load(&p->job.done) < p->job.nchunks) {
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->job.done) < p->job.nchunks) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
  }
  atomic_store(&p->closed, g);
  /* workers inside the job: each leaves at once (no chunk is left), unless
   * the system paused it in between */
  while (atomic_load(&p->busy) > 0) sched_yield();
  pthread_mutex_unlock(&p->job_lock);
}

void lt__cpu_pool_run(cpu_kernel_fn fn, void **slots, int64_t extent, int64_t unit_cost) {
  if (extent <= 0) return;
  pool *p = current_pool();
  int nt = p->threads;
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
  /* A kernel with work per output (a reduction) gets whole blocks of
   * LT_CPU_SUM_BLOCK outputs where there are enough for every thread: a column sum
   * keeps one accumulator per output of its block (cpu_codegen.c's
   * sum_blocked), and a narrower block leaves each row's adds waiting on the
   * row before (at 16 outputs, a 128 x 2048 column sum on two threads ran 3x
   * slower than on one). */
  if (unit_cost > 1 && extent >= LT_CPU_SUM_BLOCK * nt && chunk % LT_CPU_SUM_BLOCK != 0)
    chunk = (chunk + LT_CPU_SUM_BLOCK - 1) / LT_CPU_SUM_BLOCK * LT_CPU_SUM_BLOCK;
  dispatch(p, fn, slots, extent, chunk);
}

void lt__cpu_pool_run_parts(cpu_kernel_fn fn, void **ctx, int64_t nparts) {
  if (nparts <= 0) return;
  pool *p = current_pool();
  if (p->threads == 1 || nparts == 1) {
    fn(ctx, 0, nparts);
    return;
  }
  dispatch(p, fn, ctx, nparts, 1);
}

void lt__cpu_loop_run(const cpu_kernel *k, void **table) {
  lt__cpu_pool_run(k->fn, cpu_loop_args(k, table), k->extent, k->unit_cost);
}
