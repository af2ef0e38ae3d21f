/* Giving buffers storage from their backend (the buffer header itself is
 * core's, lt_buffer.h). */
#include "../core/lt_alloc.h"
#include "../core/lt_error.h"
#include "backend.h"

int lt__buffer_materialize(lt_buffer *b) {
  int rc = b->backend->data_alloc(b);
  if (rc != LT_OK) return rc;
  b->data_free = b->backend->data_free;
  lt__buffer_account(b->dev, (int64_t)b->nbytes);
  return LT_OK;
}

int lt__buffer_alloc(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                     int ndim, lt_buffer **out) {
  lt_buffer *b = lt__buffer_new(be, dev, dt, shape, ndim);
  if (!b) return LT_ENOMEM;
  int rc = lt__buffer_materialize(b);
  if (rc != LT_OK) {
    lt__buffer_release(b);
    return rc;
  }
  lt__buffer_publish(b);
  *out = b;
  return LT_OK;
}

int lt__buffer_adopt(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                     int ndim, void *host, lt_buffer **out) {
  lt_buffer *b = lt__buffer_new(be, dev, dt, shape, ndim);
  if (!b) return LT_ENOMEM;
  b->data = host;
  b->data_free = be->data_free;
  lt__buffer_account(dev, (int64_t)b->nbytes);
  lt__buffer_publish(b);
  *out = b;
  return LT_OK;
}
