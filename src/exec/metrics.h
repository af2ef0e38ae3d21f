/* Process-wide counters, readable by name through the public API. */
#ifndef LT_METRICS_H
#define LT_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum lt_counter_id {
  LT_CTR_CREATE_TENSOR,
  LT_CTR_DESTROY_TENSOR,
  LT_CTR_CACHED_COMPILE,
  LT_CTR_UNCACHED_COMPILE,
  LT_CTR_COMPILE_FAILURE,
  LT_CTR_EXECUTE_COMPUTATION,
  LT_CTR_EXECUTE_FAILURE,
  LT_CTR_SYNC_TENSORS,
  LT_CTR_TRANSFER_TO_DEVICE,
  LT_CTR_TRANSFER_FROM_DEVICE,
  LT_CTR_CACHE_EVICTION,
  LT_CTR_NODES_COMPILED,
  LT_CTR_COUNT
} lt_counter_id;

extern _Atomic int64_t lt__counters[LT_CTR_COUNT];

static inline void lt__count(lt_counter_id id, int64_t by) {
  atomic_fetch_add_explicit(&lt__counters[id], by, memory_order_relaxed);
}

#endif
