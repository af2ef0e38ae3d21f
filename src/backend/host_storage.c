/* Storage in host memory, for backends whose device is the host (ref, cpu):
 * from the buffer pool (large) or lt__malloc, whose blocks the pool's free
 * also takes, so that an upload may adopt lt_from_data's copy. */
#include <string.h>

#include "../core/lt_alloc.h"
#include "../core/lt_buffer_pool.h"
#include "../core/lt_error.h"
#include "backend.h"

int lt__host_data_alloc(lt_buffer *b) {
  b->data = lt__buffer_pool_alloc(b->nbytes, false);
  return b->data ? LT_OK : LT_ENOMEM;
}

void lt__host_data_free(lt_buffer *b) {
  lt__buffer_pool_free(b->data, b->nbytes);
  b->data = NULL;
}

int lt__host_to_device(lt_buffer *dst, const void *src, size_t nbytes) {
  if (nbytes != dst->nbytes)
    return lt__err(LT_EINVAL, "copy of %zu bytes into a buffer of %zu", nbytes, dst->nbytes);
  if (nbytes) memcpy(dst->data, src, nbytes);
  return LT_OK;
}

int lt__host_from_device(const lt_buffer *src, void *dst, size_t nbytes) {
  if (nbytes < src->nbytes)
    return lt__err(LT_EINVAL, "reading %zu bytes into room for %zu", src->nbytes, nbytes);
  if (src->nbytes) memcpy(dst, src->data, src->nbytes);
  return LT_OK;
}
