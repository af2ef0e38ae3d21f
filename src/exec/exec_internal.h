/* Pieces of the executor shared by its files (executor.c, exec_device.c,
 * program.c). */
#ifndef LT_EXEC_INTERNAL_H
#define LT_EXEC_INTERNAL_H

#include "../backend/backend.h"
#include "../core/lt_device.h"
#include "../core/lt_tensor.h"
#include "cache.h"
#include "../lt_test_hooks.h"

/* The executor's state of one device (core's lt_device_ctx holds only the
 * live tensors). */
typedef struct lt_exec_dev {
  lt_device_ctx *core; /* the device's live tensors */
  /* Execution ordering. `busy` is a lock that one thread takes and another may
   * give back: the caller of a sync takes it, and the worker that finishes the
   * sync's execution releases it. Guarded by `lock`, signalled on `cond`. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool busy;
  /* TraceTime and DeviceLockWait. lock_wait_ns and last_wait_ns are written
   * under `lock` by the thread that has just taken `busy`; the others only by
   * a holder of `busy`: so a holder of `busy` reads them all safely. */
  int64_t lock_wait_ns;          /* every wait for `busy` so far */
  int64_t last_wait_ns;          /* the wait of the current holder */
  int64_t last_sync_end_ns;      /* when the last sync ended (0: none yet) */
  int64_t lock_wait_at_sync_end; /* lock_wait_ns then */

  /* The walk marks (visit, order) of the nodes of this device's graphs: a
   * walk writes them and reads them until it is done with the graph (the
   * executor until its compile, lt_backward until its last gradient). Nodes
   * can be shared between threads' graphs (the device's RNG chain). Taken
   * after the device lock, never before it: a holder must not sync (it would
   * wait for a sync that waits for it). Recursive, so that a thread that
   * does anyway cannot deadlock itself. */
  pthread_mutex_t graph_lock;

  /* The failure of an asynchronous execution, reported once. */
  int pending_status;
  char pending_msg[512];
  uint64_t error_seq; /* bumped for each failure */

  /* The worker thread and its queue (at most one job: busy orders them). */
  bool worker_started, worker_stop;
  pthread_t worker;
  struct lt_exec_job *job;
} lt_exec_dev;

/* The executor's state of dev, set up at first use (the device's backend is
 * then asked to start its slow set-up in the background). NULL with
 * LT_EDEVICE recorded, naming fn, for an unknown device. */
lt_exec_dev *lt__exec_dev(const char *fn, lt_device dev);

/* The IR value of t for use as an operand: its pending node, or a data leaf
 * over its buffer (host data is uploaded first). Borrowed: the tensor keeps it.
 * NULL with the error recorded on failure. */
lt_node *lt__tensor_ir(lt_tensor *t);

/* The backends built into the library (backends.c): registered at first use;
 * the backend that serves dev. */
void lt__backends_init(void);
const lt_backend *lt__backend_for(lt_device dev);

/* One execution: the executable, its arguments and the placeholders it fills.
 * Owns a reference on each. */
typedef struct lt_exec_job {
  lt_exec_dev *ctx;
  lt_cache_entry *entry;
  lt_buffer **params;
  int nparams;
  lt_buffer **outs;
  int nouts;
} lt_exec_job;

/* Takes the device's execution lock, waiting for the execution in flight.
 * When report_error and an earlier asynchronous execution failed, gives the
 * lock back and returns that failure (once). */
int lt__device_acquire(lt_exec_dev *ctx, bool report_error);
/* The same, for a caller that began at t0 (lt__now_ns): its wait counts from
 * then, so that a sync's time is all TraceTime or DeviceLockWait. */
int lt__device_acquire_since(lt_exec_dev *ctx, bool report_error, int64_t t0);
void lt__device_release(lt_exec_dev *ctx);

/* The device's graph lock (see graph_lock above). */
void lt__graph_lock(lt_exec_dev *ctx);
void lt__graph_unlock(lt_exec_dev *ctx);

/* Runs job on this thread and returns its status; the caller keeps the lock. */
int lt__job_run_sync(lt_exec_job *job);
/* Hands job and the device lock to the device's worker thread, which runs it
 * and then releases the lock. On a failure the placeholders are restored from
 * their tensors' previous buffers when possible, else failed, and the error
 * is kept for the next call that takes the lock. */
int lt__job_run_async(lt_exec_job *job);
/* Releases everything a job holds, and the job. */
void lt__job_free(lt_exec_job *job);

/* Reports a failed buffer's error to its device as seen (so that it is not
 * reported again by the next lock taker). */
void lt__device_error_seen(lt_exec_dev *ctx, uint64_t seq);

/* The sync at the heart of every public entry point. force: a step barrier
 * (host data uploaded, storage of overwritten values donated). */
int lt__sync_internal(lt_tensor *const *ts, int n, bool force, bool wait, const char *reason);

/* Walks roots, computes their key (no donors) and finds or compiles the
 * executable. *params (thread-local scratch, valid until the next walk on
 * this thread) lists the parameter buffers in order. The caller holds the
 * device lock and releases *entry. */
int lt__compile_roots(lt_device dev, lt_node *const *roots, int nroots, const char *reason,
                      lt_graph_key *key, lt_buffer ***params, int *nparams, lt_cache_entry **entry);

/* Fault injection (tests): true when this execution / compile must fail. */
bool lt__fault_fire(lt_fault kind);
int64_t lt__execute_delay_us(void);

#endif
