/* The backend interface: buffers on a device, compilation of a post-order
 * graph into an executable, and execution. ref (interpreter, the oracle) and
 * cpu (fused LLVM kernels) implement it.
 *
 * Buffers are generic headers (this file) whose storage the backend provides.
 * A buffer may exist before its storage does: the executor installs such
 * placeholders in tensors so that tracing goes on while a step executes. */
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lazytensor.h"
#include "../core/lt_node.h"

typedef struct lt_backend lt_backend;

typedef enum lt_buffer_state {
  LT_BUF_READY = 0,   /* data holds the value */
  LT_BUF_PENDING = 1, /* a placeholder: an execution will fill it */
  LT_BUF_FAILED = 2,  /* the execution that was to fill it failed: err_* say why */
  LT_BUF_DONATED = 3  /* its storage was given to an output of a later step */
} lt_buffer_state;

/* A device buffer. Reference counted; tensors, graph leaves and executions in
 * flight share them. */
typedef struct lt_buffer {
  atomic_int refs;
  atomic_int state; /* lt_buffer_state */
  uint8_t dtype;
  uint8_t ndim;
  bool user_donate; /* the user allows its storage to be reused by an output */
  lt_device dev;
  int64_t shape[LT_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
  void *data; /* backend storage (host memory for the CPU backends) or NULL */
  const lt_backend *backend;
  int err_status; /* LT_BUF_FAILED: the status and message of the failure */
  char *err_msg;
  uint64_t err_seq;    /* which failure of its device (reported once per device) */
  int64_t owner_id;    /* the tensor whose value it holds (restored on a failed step) */
  uint32_t param_mark; /* executor walk epoch, for parameter dedup */
  int32_t param_index;
  int32_t graph_refs; /* DATA leaves of the graph being walked that hold it */
} lt_buffer;

/* A header without storage, in state PENDING (a placeholder). NULL on OOM. */
lt_buffer *lt__buffer_new(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                          int ndim);
/* Gives b storage from its backend (device bytes counted). Its state does not
 * change: a placeholder becomes readable only when the executor publishes it,
 * after the whole execution succeeded. */
int lt__buffer_materialize(lt_buffer *b);
/* Marks b READY: its storage holds its value. */
void lt__buffer_publish(lt_buffer *b);
/* lt__buffer_new + lt__buffer_materialize, READY. */
int lt__buffer_alloc(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                     int ndim, lt_buffer **out);
/* A READY buffer whose storage is host, lt__malloc'd with the buffer's byte
 * size (backends with host_storage only); it takes host only on success. */
int lt__buffer_adopt(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                     int ndim, void *host, lt_buffer **out);
/* Moves src's storage into dst (same dtype and shape); src becomes DONATED.
 * The bytes stay counted once. */
void lt__buffer_take_data(lt_buffer *dst, lt_buffer *src);
/* Marks b FAILED with a copy of msg (placeholders of a failed execution). */
void lt__buffer_fail(lt_buffer *b, int status, const char *msg, uint64_t seq);
/* Waits until b is no longer PENDING; returns LT_OK when READY, else the
 * failure (recorded as the thread's error). */
int lt__buffer_wait(lt_buffer *b);
/* Wakes every waiter after placeholders changed state. */
void lt__buffer_notify(void);

lt_buffer *lt__buffer_retain(lt_buffer *b);
void lt__buffer_release(lt_buffer *b);

/* Counts delta bytes of storage on dev (live and peak). */
void lt__buffer_account(lt_device dev, int64_t delta);
/* Live and peak bytes of storage per device. */
void lt__device_bytes_reset_peak(lt_device dev);
int64_t lt__device_bytes_live(lt_device dev);
int64_t lt__device_bytes_peak(lt_device dev);

/* A graph as handed to compile: nodes in post-order (every operand comes before
 * its user, node->order is its index), the parameter index of each DATA node
 * (-1 for other nodes), the node index of each root (an output), and the
 * parameters whose storage may be reused for an output (ascending). The
 * backend pairs each donor with the first free root of equal dtype and shape
 * and may write that root's value in place. */
typedef struct lt_graph {
  lt_node **nodes;
  int nnodes;
  const int *param_of; /* per node */
  int nparams;
  const int *roots;
  int nroots;
  const int *donors;
  int ndonors;
} lt_graph;

typedef struct lt_executable lt_executable; /* backend-defined */

struct lt_backend {
  const char *name;
  /* Folds everything that changes generated code (backend version, CPU, ...). */
  uint64_t (*env_hash)(void);
  /* Storage for b->nbytes bytes into b->data; data_free gives it back. */
  int (*data_alloc)(lt_buffer *b);
  void (*data_free)(lt_buffer *b);
  int (*to_device)(lt_buffer *dst, const void *src, size_t nbytes);
  /* true: data_alloc's storage is host memory from lt__malloc(nbytes), so an
   * upload adopts the host copy of lt_from_data instead of copying it again. */
  bool host_storage;
  int (*from_device)(const lt_buffer *src, void *dst, size_t nbytes);
  /* The graph's nodes stay owned by the caller; the executable must not keep
   * pointers to them (nor to any device data). */
  int (*compile)(const lt_graph *g, lt_executable **out);
  /* args: one READY buffer per parameter. outs: one PENDING header per root,
   * which execute fills (materialize, or take a donated argument's storage).
   * On failure outs may be left PENDING: the executor fails them. */
  int (*execute)(lt_executable *exe, lt_buffer *const *args, int nargs, lt_buffer *const *outs,
                 int nouts);
  void (*executable_free)(lt_executable *exe);
  /* Optional: starts slow one-time set-up (JIT, threads) in the background
   * when the first device context is made, so that it overlaps the program's
   * first tracing instead of delaying its first sync. */
  void (*prepare)(void);
  /* Optional (NULL when unsupported): bytes for the persistent cache. */
  int (*serialize)(const lt_executable *exe, void **bytes, size_t *nbytes);
  int (*deserialize)(const void *bytes, size_t nbytes, lt_executable **out);
};

/* The backend that serves dev (LT_BACKEND chooses; ref by default today). */
const lt_backend *lt__backend_for(lt_device dev);

extern const lt_backend lt__ref_backend;

#endif
