/* Device buffers: the backend-neutral header of a device value. Core owns
 * their lifetime (reference counts), state (ready, placeholder, failed,
 * donated), waiting, and the per-device byte accounting; the storage itself
 * comes from a backend (src/backend), which sets data and data_free when it
 * gives a buffer storage. Core never calls a backend: a buffer carries the
 * function that frees its own storage.
 *
 * A buffer may exist before its storage does: the executor installs such
 * placeholders in tensors so that tracing goes on while a step executes. */
#ifndef LT_BUFFER_H
#define LT_BUFFER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lazytensor.h"

struct lt_backend; /* src/backend/backend.h; opaque here */
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
  void *data;                             /* backend storage or NULL */
  void (*data_free)(struct lt_buffer *b); /* gives data back to its backend */
  const lt_backend *backend;              /* the backend it belongs to */
  int err_status;                         /* LT_BUF_FAILED: the status and message of the failure */
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
/* Marks b READY: its storage holds its value. */
void lt__buffer_publish(lt_buffer *b);
/* Moves src's storage into dst (same dtype and shape); src becomes DONATED.
 * The bytes stay counted once. */
void lt__buffer_take_data(lt_buffer *dst, lt_buffer *src);
/* Undoes lt__buffer_take_data after a failed execution: donor gets holder's
 * storage back and is READY again; holder keeps its state, without storage.
 * The caller vouches that the storage holds donor's value (unwritten, or
 * restored from a snapshot). */
void lt__buffer_give_back(lt_buffer *donor, lt_buffer *holder);
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

#endif
