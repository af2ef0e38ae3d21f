/* Buffers shared by all backends, and the choice of backend per device. */
#include "backend.h"

lt_buffer *lt__buffer_retain(lt_buffer *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

void lt__buffer_release(lt_buffer *b) {
  if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
    b->backend->buffer_free(b);
}

const lt_backend *lt__backend_for(lt_device dev) {
  (void)dev; /* one backend today; the cpu backend joins in a later issue */
  return &lt__ref_backend;
}
