/* Process-wide counters, timers and value metrics, readable by name through
 * the public API. */
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
  LT_CTR_MARK_STEP,
  LT_CTR_INPUT_OUTPUT_ALIAS, /* storage reused in place, summed over executions */
  LT_CTR_SCALAR_CACHE_HIT,
  LT_CTR_CLEARED_PENDING,
  LT_CTR_PERSISTENT_HIT,        /* executables loaded from the persistent cache */
  LT_CTR_PERSISTENT_MISS,       /* lookups there that found no usable entry */
  LT_CTR_PERSISTENT_BAD_ENTRY,  /* entries rejected (truncated, corrupt, foreign) */
  LT_CTR_PERSISTENT_WRITE_FAIL, /* stores that failed (read-only dir, full disk, ...) */
  LT_CTR_KERNEL_COMPILE,        /* cpu backend: kernels compiled by LLVM */
  LT_CTR_KERNEL_CACHE_HIT, /* cpu backend: kernels of a new executable found compiled already */
  LT_CTR_EXECUTED_FLOPS,   /* the cost analysis's FLOPs of each graph executed (exec/cost.h) */
  LT_CTR_EXECUTED_BYTES,   /* and its bytes moved */
  /* cpu backend: bf16 products (each GEMM call: a product, or one block of
   * one cut over the threads) and convolutions run by a native bf16 kernel,
   * or with their operands converted to f32 (no bf16 instructions) */
  LT_CTR_BF16_GEMM_NATIVE,
  LT_CTR_BF16_GEMM_CONVERTED,
  LT_CTR_BF16_CONV_NATIVE,
  LT_CTR_BF16_CONV_CONVERTED,
  LT_CTR_COUNT
} lt_counter_id;

extern _Atomic int64_t lt__counters[LT_CTR_COUNT];

static inline void lt__count(lt_counter_id id, int64_t by) {
  atomic_fetch_add_explicit(&lt__counters[id], by, memory_order_relaxed);
}

typedef enum lt_timer_id {
  /* the program tracing: from the end of one sync on a device to the start of
   * the next, less the lock waits in between */
  LT_TIMER_TRACE,
  LT_TIMER_COMPILE,
  LT_TIMER_EXECUTE,
  LT_TIMER_TRANSFER_TO,   /* host data to a device buffer */
  LT_TIMER_TRANSFER_FROM, /* device buffer to host memory */
  LT_TIMER_LOCK_WAIT,     /* waiting for the device's execution lock (the execution in flight) */
  /* reading and deserializing a persistent cache entry (hits only) */
  LT_TIMER_PERSISTENT_LOAD,
  LT_TIMER_COUNT
} lt_timer_id;

typedef enum lt_value_id {
  LT_VALUE_GRAPH_SIZE,  /* nodes in each synced graph */
  LT_VALUE_ALIAS_COUNT, /* donated parameters of each compiled graph */
  LT_VALUE_COUNT
} lt_value_id;

int64_t lt__now_ns(void);
/* Records one sample (thread-safe; a bounded reservoir feeds the percentiles). */
void lt__timer_add(lt_timer_id id, int64_t ns);
void lt__value_add(lt_value_id id, double v);
/* Called at each mark_step: counts steps and prints the reference's
 * automatic warnings to stderr once each (more than 0.5 compiles per step
 * after 10 steps; a transfer from the device on every step). */
void lt__metrics_on_step(void);
/* The instruction set the backend's bf16 products ran with (a static
 * string); the report prints it once set. */
void lt__metrics_set_bf16_isa(const char *name);

#endif
