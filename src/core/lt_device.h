/* Device contexts: one per device, holding the weak list of its live tensors
 * and the lock that orders its executions. */
#ifndef LT_DEVICE_H
#define LT_DEVICE_H

#include <pthread.h>

#include "lazytensor.h"

typedef struct lt_device_ctx {
  pthread_mutex_t live_lock; /* guards the live list and count */
  lt_tensor *live_head;
  int64_t live_count;
  pthread_mutex_t exec_lock; /* one execution at a time per device */
} lt_device_ctx;

/* NULL (with LT_EDEVICE recorded, naming fn) for an unknown device. */
lt_device_ctx *lt__device_ctx(const char *fn, lt_device dev);
bool lt__device_equal(lt_device a, lt_device b);

void lt__device_add_live(lt_device_ctx *ctx, lt_tensor *t);
void lt__device_remove_live(lt_device_ctx *ctx, lt_tensor *t);

#endif
