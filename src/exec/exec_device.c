/* Device execution order and asynchronous execution: the hand-off lock, the
 * worker thread of each device, and failure handling of async executions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/lt_alloc.h"
#include "../core/lt_collective.h"
#include "../core/lt_error.h"
#include "coll_fingerprint.h"
#include "cost.h"
#include "exec_internal.h"
#include "lt_metrics.h"

static lt_exec_dev g_exec[LT_MAX_DEVICES];
static pthread_once_t g_exec_once = PTHREAD_ONCE_INIT;

static void init_exec_devs(void) {
  for (int i = 0; i < LT_MAX_DEVICES; i++) {
    g_exec[i].core = lt__device_ctx("lt_exec", lt_cpu(i));
    pthread_mutex_init(&g_exec[i].lock, NULL);
    pthread_cond_init(&g_exec[i].cond, NULL);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_exec[i].graph_lock, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  /* Slow one-time set-up of the backend (JIT, threads) overlaps the program's
   * first tracing. */
  const lt_backend *be = lt__backend_for(lt_cpu(0));
  if (be && be->prepare) be->prepare();
}

lt_exec_dev *lt__exec_dev(const char *fn, lt_device dev) {
  if (!lt__device_ctx(fn, dev)) return NULL;
  pthread_once(&g_exec_once, init_exec_devs);
  return &g_exec[dev.index];
}

int lt__device_acquire(lt_exec_dev *ctx, bool report_error) {
  return lt__device_acquire_since(ctx, report_error, lt__now_ns());
}

int lt__device_acquire_since(lt_exec_dev *ctx, bool report_error, int64_t t0) {
  pthread_mutex_lock(&ctx->lock);
  while (ctx->busy) pthread_cond_wait(&ctx->cond, &ctx->lock);
  ctx->busy = true;
  int64_t waited = lt__now_ns() - t0;
  ctx->lock_wait_ns += waited;
  ctx->last_wait_ns = waited;
  int status = LT_OK;
  char msg[sizeof ctx->pending_msg];
  if (report_error && ctx->pending_status != LT_OK) {
    status = ctx->pending_status;
    memcpy(msg, ctx->pending_msg, sizeof msg);
    ctx->pending_status = LT_OK;
    ctx->busy = false;
    pthread_cond_broadcast(&ctx->cond);
  }
  pthread_mutex_unlock(&ctx->lock);
  lt__timer_add(LT_TIMER_LOCK_WAIT, waited);
  if (status != LT_OK) return lt__err(status, "%s", msg);
  return LT_OK;
}

void lt__device_release(lt_exec_dev *ctx) {
  pthread_mutex_lock(&ctx->lock);
  ctx->busy = false;
  pthread_cond_broadcast(&ctx->cond);
  pthread_mutex_unlock(&ctx->lock);
}

void lt__graph_lock(lt_exec_dev *ctx) { pthread_mutex_lock(&ctx->graph_lock); }
void lt__graph_unlock(lt_exec_dev *ctx) { pthread_mutex_unlock(&ctx->graph_lock); }

void lt__device_error_seen(lt_exec_dev *ctx, uint64_t seq) {
  pthread_mutex_lock(&ctx->lock);
  if (ctx->pending_status != LT_OK && ctx->error_seq == seq) ctx->pending_status = LT_OK;
  pthread_mutex_unlock(&ctx->lock);
}

void lt__job_free(lt_exec_job *job) {
  if (!job) return;
  for (int i = 0; i < job->nparams; i++) lt__buffer_release(job->params[i]);
  for (int i = 0; i < job->nouts; i++) lt__buffer_release(job->outs[i]);
  lt__free(job->params, (size_t)job->nparams * sizeof *job->params);
  lt__free(job->outs, (size_t)job->nouts * sizeof *job->outs);
  lt__cache_entry_release(job->entry);
  lt__free(job, sizeof *job);
}

/* What every backend's execute may assume: as many arguments and results as
 * the executable was compiled for, and every argument holding a value. */
static int check_call(const lt_backend *be, const lt_exec_job *job) {
  int nparams = -1, nroots = -1;
  be->signature(job->entry->exe, &nparams, &nroots);
  if (nparams != job->nparams || nroots != job->nouts)
    return lt__err(LT_EEXEC, "%s: executable takes %d arguments and gives %d results, got %d/%d",
                   be->name, nparams, nroots, job->nparams, job->nouts);
  for (int a = 0; a < job->nparams; a++)
    if (atomic_load(&job->params[a]->state) != LT_BUF_READY)
      return lt__err(LT_EEXEC, "%s: argument %d holds no value", be->name, a);
  return LT_OK;
}

static int execute(lt_exec_job *job) {
  int64_t delay = lt__execute_delay_us();
  if (delay > 0) {
    struct timespec ts = {delay / 1000000, (delay % 1000000) * 1000};
    nanosleep(&ts, NULL);
  }
  int64_t t0 = lt__now_ns();
  const lt_backend *be = job->entry->backend;
  int rc = lt__fault_fire(LT_FAULT_EXECUTE)
               ? lt__err(LT_EEXEC, "execution failed: injected fault (lt_inject_fault)")
               : check_call(be, job);
  if (rc == LT_OK) {
    /* collective kernels find their world through the device running them */
    lt__coll_set_current(job->ctx->core->dev.index);
    lt__coll_set_graph(lt__coll_fp_of(job->entry->key.lo)); /* ranks compare it */
    rc = be->execute(job->entry->exe, job->params, job->nparams, job->outs, job->nouts);
    lt__coll_set_current(-1);
  }
  lt__timer_add(LT_TIMER_EXECUTE, lt__now_ns() - t0);
  for (int r = 0; rc == LT_OK && r < job->nouts; r++)
    if (!job->outs[r]->data) /* defensive: a backend must fill every output */
      rc = lt__err(LT_EEXEC, "execution left output %d without a value", r);
  if (rc == LT_OK) {
    /* Published only now: a reader waiting on a placeholder must not see
     * storage the kernels are still writing. */
    for (int r = 0; r < job->nouts; r++) lt__buffer_publish(job->outs[r]);
    lt__count(LT_CTR_EXECUTE_COMPUTATION, 1);
    lt__cost_executed(job->ctx->core->dev.index, atomic_load(&job->entry->flops),
                      atomic_load(&job->entry->bytes));
    for (int i = 0; i < job->nparams; i++)
      if (atomic_load(&job->params[i]->state) == LT_BUF_DONATED)
        lt__count(LT_CTR_INPUT_OUTPUT_ALIAS, 1);
  } else {
    lt__count(LT_CTR_EXECUTE_FAILURE, 1);
  }
  return rc;
}

int lt__job_run_sync(lt_exec_job *job) { return execute(job); }

/* After a failed async execution: each placeholder gets its tensor's previous
 * value back when that buffer is still whole (the tensor keeps its last good
 * value), else it records the failure. */
static void fail_outputs(lt_exec_job *job, int status, const char *msg, uint64_t seq) {
  for (int r = 0; r < job->nouts; r++) {
    lt_buffer *out = job->outs[r];
    if (out->data) {
      /* Filled before the failure, perhaps with donated storage half
       * written: not a value anyone may read. */
      out->data_free(out);
      out->data = NULL;
      lt__buffer_account(out->dev, -(int64_t)out->nbytes);
    }
    if (atomic_load(&out->state) != LT_BUF_PENDING) continue;
    lt_buffer *prev = NULL;
    for (int p = 0; p < job->nparams && !prev; p++) {
      lt_buffer *b = job->params[p];
      if (b->owner_id == out->owner_id && atomic_load(&b->state) == LT_BUF_READY &&
          b->dtype == out->dtype && b->nbytes == out->nbytes)
        prev = b;
    }
    if (prev && atomic_load(&prev->refs) == 1) {
      lt__buffer_take_data(out, prev); /* only this job still held it */
      lt__buffer_publish(out);
      continue;
    }
    if (prev && lt__buffer_materialize(out) == LT_OK) {
      if (out->nbytes) memcpy(out->data, prev->data, out->nbytes);
      lt__buffer_publish(out);
      continue;
    }
    lt__buffer_fail(out, status, msg, seq);
  }
}

static void run_async(lt_exec_job *job) {
  lt_exec_dev *ctx = job->ctx;
  int rc = execute(job);
  if (rc != LT_OK) {
    char msg[sizeof ctx->pending_msg];
    snprintf(msg, sizeof msg, "%s", lt_last_error());
    lt_clear_error(); /* the worker's own error state stays clean */
    pthread_mutex_lock(&ctx->lock);
    uint64_t seq = ++ctx->error_seq;
    ctx->pending_status = rc;
    memcpy(ctx->pending_msg, msg, sizeof msg);
    pthread_mutex_unlock(&ctx->lock);
    fail_outputs(job, rc, msg, seq);
  }
  lt__job_free(job);
  lt__buffer_notify();
  lt__device_release(ctx);
}

static void *worker_main(void *arg) {
  lt_exec_dev *ctx = arg;
  pthread_mutex_lock(&ctx->lock);
  for (;;) {
    while (!ctx->job && !ctx->worker_stop) pthread_cond_wait(&ctx->cond, &ctx->lock);
    if (!ctx->job) break; /* stop requested and nothing queued */
    lt_exec_job *job = ctx->job;
    ctx->job = NULL;
    pthread_mutex_unlock(&ctx->lock);
    run_async(job);
    pthread_mutex_lock(&ctx->lock);
  }
  pthread_mutex_unlock(&ctx->lock);
  return NULL;
}

/* Workers are joined at exit so that queued work finishes and tools such as
 * valgrind see every thread end. */
static pthread_mutex_t g_workers_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_exec_dev *g_workers[LT_MAX_DEVICES];
static int g_nworkers;

static void stop_workers(void) {
  pthread_mutex_lock(&g_workers_lock);
  for (int i = 0; i < g_nworkers; i++) {
    lt_exec_dev *ctx = g_workers[i];
    pthread_mutex_lock(&ctx->lock);
    ctx->worker_stop = true;
    pthread_cond_broadcast(&ctx->cond);
    pthread_mutex_unlock(&ctx->lock);
    pthread_join(ctx->worker, NULL);
    ctx->worker_started = false;
    ctx->worker_stop = false;
  }
  g_nworkers = 0;
  pthread_mutex_unlock(&g_workers_lock);
}

static int start_worker(lt_exec_dev *ctx) {
  static bool registered;
  pthread_mutex_lock(&g_workers_lock);
  int rc = LT_OK;
  if (!ctx->worker_started) {
    if (pthread_create(&ctx->worker, NULL, worker_main, ctx) != 0) {
      rc = lt__err(LT_ENOMEM, "could not start the device's worker thread");
    } else {
      ctx->worker_started = true;
      g_workers[g_nworkers++] = ctx;
      if (!registered) registered = atexit(stop_workers) == 0;
    }
  }
  pthread_mutex_unlock(&g_workers_lock);
  return rc;
}

int lt__job_run_async(lt_exec_job *job) {
  lt_exec_dev *ctx = job->ctx;
  if (start_worker(ctx) != LT_OK) { /* defensive: run it here instead */
    run_async(job);
    return LT_OK;
  }
  pthread_mutex_lock(&ctx->lock);
  ctx->job = job;
  pthread_cond_broadcast(&ctx->cond);
  pthread_mutex_unlock(&ctx->lock);
  return LT_OK;
}
