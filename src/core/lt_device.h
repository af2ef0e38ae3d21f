/* Device contexts: one per device, holding the weak list of its live tensors.
 * The executor keeps its own per-device state (execution lock, worker, pending
 * error) in src/exec: core knows nothing of execution. */
#ifndef LT_DEVICE_H
#define LT_DEVICE_H

#include <pthread.h>

#include "lazytensor.h"

typedef struct lt_device_ctx {
  lt_device dev;
  pthread_mutex_t live_lock; /* guards the live list and count */
  lt_tensor *live_head;
  int64_t live_count;
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
