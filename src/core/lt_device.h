/* Device contexts: one per device, holding the weak list of its live tensors,
 * the lock that orders its executions, its worker thread, and the error of a
 * failed asynchronous execution until it is reported. */
#ifndef LT_DEVICE_H
#define LT_DEVICE_H

#include <pthread.h>

#include "lazytensor.h"

struct lt_exec_job;

typedef struct lt_device_ctx {
  lt_device dev;
  pthread_mutex_t live_lock; /* guards the live list and count */
  lt_tensor *live_head;
  int64_t live_count;

  /* Execution ordering. `busy` is a lock that one thread takes and another may
   * give back: the caller of a sync takes it, and the worker that finishes the
   * sync's execution releases it. Guarded by `lock`, signalled on `cond`. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool busy;
  int64_t last_sync_end_ns; /* for the TraceTime timer */

  /* The failure of an asynchronous execution, reported once. */
  int pending_status;
  char pending_msg[512];
  uint64_t error_seq; /* bumped for each failure */

  /* The worker thread and its queue (at most one job: busy orders them). */
  bool worker_started, worker_stop;
  pthread_t worker;
  struct lt_exec_job *job;
} lt_device_ctx;

/* NULL (with LT_EDEVICE recorded, naming fn) for an unknown device. */
lt_device_ctx *lt__device_ctx(const char *fn, lt_device dev);
bool lt__device_equal(lt_device a, lt_device b);

void lt__device_add_live(lt_device_ctx *ctx, lt_tensor *t);
void lt__device_remove_live(lt_device_ctx *ctx, lt_tensor *t);
/* Every live tensor of ctx, each with a new reference (release them), into a
 * fresh array (lt__free with *n * sizeof(lt_tensor *)). NULL on OOM. */
lt_tensor **lt__device_live_snapshot(lt_device_ctx *ctx, int *n);

#endif
