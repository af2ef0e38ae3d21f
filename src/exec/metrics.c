/* Counters and their text report. */
#include <stdio.h>
#include <string.h>

#include "lazytensor.h"
#include "metrics.h"

_Atomic int64_t lt__counters[LT_CTR_COUNT];

/* Names follow the reference's counters so that its users recognise them. */
static const char *const kNames[LT_CTR_COUNT + 1] = {"CreateTensor",
                                                     "DestroyTensor",
                                                     "CachedCompile",
                                                     "UncachedCompile",
                                                     "CompileFailure",
                                                     "ExecuteComputation",
                                                     "ExecuteFailure",
                                                     "SyncTensors",
                                                     "TransferToDevice",
                                                     "TransferFromDevice",
                                                     "CompilationCacheEviction",
                                                     "NodesCompiled",
                                                     NULL};

const char *const *lt_counter_names(void) { return kNames; }

int64_t lt_counter(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < LT_CTR_COUNT; i++)
    if (strcmp(kNames[i], name) == 0)
      return atomic_load_explicit(&lt__counters[i], memory_order_relaxed);
  return -1;
}

void lt_counters_reset(void) {
  for (int i = 0; i < LT_CTR_COUNT; i++) atomic_store(&lt__counters[i], 0);
}

int lt_metrics_report(char *buf, size_t n) {
  /* snprintf semantics: always terminated when n > 0, returns the full length. */
  size_t used = 0;
  if (buf && n) buf[0] = '\0';
  for (int i = 0; i < LT_CTR_COUNT; i++) {
    char *dst = buf && used < n ? buf + used : NULL;
    size_t room = dst ? n - used : 0;
    int len = snprintf(dst, room, "Counter: %s\n  Value: %lld\n", kNames[i],
                       (long long)atomic_load(&lt__counters[i]));
    used += (size_t)len;
  }
  return (int)used;
}
