/* Buffers shared by all backends: lifetime, state, waiting, and storage
 * accounting per device (see lt_buffer.h). */
#include <pthread.h>
#include <string.h>

#include "lt_alloc.h"
#include "lt_buffer.h"
#include "lt_error.h"
#include "lt_node.h"

static _Atomic int64_t g_live[LT_MAX_DEVICES], g_peak[LT_MAX_DEVICES];

static int dev_slot(lt_device dev) {
  return dev.index >= 0 && dev.index < LT_MAX_DEVICES ? dev.index : 0;
}

void lt__buffer_account(lt_device dev, int64_t delta) {
  int s = dev_slot(dev);
  int64_t now = atomic_fetch_add(&g_live[s], delta) + delta;
  int64_t peak = atomic_load(&g_peak[s]);
  while (now > peak && !atomic_compare_exchange_weak(&g_peak[s], &peak, now)) {
  }
}

void lt__device_bytes_reset_peak(lt_device dev) {
  int s = dev_slot(dev);
  atomic_store(&g_peak[s], atomic_load(&g_live[s]));
}
int64_t lt__device_bytes_live(lt_device dev) { return atomic_load(&g_live[dev_slot(dev)]); }
int64_t lt__device_bytes_peak(lt_device dev) { return atomic_load(&g_peak[dev_slot(dev)]); }

lt_buffer *lt__buffer_new(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                          int ndim) {
  lt_buffer *b = lt__calloc(sizeof *b);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  atomic_init(&b->state, LT_BUF_PENDING);
  b->dtype = (uint8_t)dt;
  b->ndim = (uint8_t)ndim;
  b->dev = dev;
  if (ndim) memcpy(b->shape, shape, (size_t)ndim * sizeof(int64_t));
  b->numel = lt__numel(shape, ndim);
  b->nbytes = (size_t)b->numel * lt_dtype_size(dt);
  b->backend = be;
  b->param_index = -1;
  return b;
}

void lt__buffer_publish(lt_buffer *b) { atomic_store(&b->state, LT_BUF_READY); }

void lt__buffer_take_data(lt_buffer *dst, lt_buffer *src) {
  dst->data = src->data;
  dst->data_free = src->data_free;
  src->data = NULL;
  atomic_store(&src->state, LT_BUF_DONATED);
}

void lt__buffer_give_back(lt_buffer *donor, lt_buffer *holder) {
  donor->data = holder->data;
  donor->data_free = holder->data_free;
  holder->data = NULL;
  atomic_store(&donor->state, LT_BUF_READY);
}

void lt__buffer_fail(lt_buffer *b, int status, const char *msg, uint64_t seq) {
  size_t n = strlen(msg) + 1;
  char *copy = lt__malloc(n);
  if (copy) memcpy(copy, msg, n); /* without memory, the status alone remains */
  lt__free(b->err_msg, b->err_msg ? strlen(b->err_msg) + 1 : 0);
  b->err_msg = copy;
  b->err_status = status;
  b->err_seq = seq; /* all written before the state publishes them */
  atomic_store(&b->state, LT_BUF_FAILED);
}

static pthread_mutex_t g_wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wait_cond = PTHREAD_COND_INITIALIZER;

void lt__buffer_notify(void) {
  pthread_mutex_lock(&g_wait_lock);
  pthread_cond_broadcast(&g_wait_cond);
  pthread_mutex_unlock(&g_wait_lock);
}

int lt__buffer_wait(lt_buffer *b) {
  if (atomic_load(&b->state) == LT_BUF_PENDING) {
    pthread_mutex_lock(&g_wait_lock);
    while (atomic_load(&b->state) == LT_BUF_PENDING) pthread_cond_wait(&g_wait_cond, &g_wait_lock);
    pthread_mutex_unlock(&g_wait_lock);
  }
  switch (atomic_load(&b->state)) {
  case LT_BUF_READY:
    return LT_OK;
  case LT_BUF_FAILED:
    return lt__err(b->err_status ? b->err_status : LT_EEXEC, "%s",
                   b->err_msg ? b->err_msg : "the execution that computes this value failed");
  default:
    return lt__err(LT_EEXEC, "the buffer's storage was donated to a later step");
  }
}

lt_buffer *lt__buffer_retain(lt_buffer *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

void lt__buffer_release(lt_buffer *b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  if (b->data) {
    b->data_free(b);
    lt__buffer_account(b->dev, -(int64_t)b->nbytes);
  }
  lt__free(b->err_msg, b->err_msg ? strlen(b->err_msg) + 1 : 0);
  lt__free(b, sizeof *b);
}
