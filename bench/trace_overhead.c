/* Tracing cost per op and cost of a cache-hit sync of a 1000-node graph.
 *
 * Prints, in the bench line format (docs/DESIGN.md, section "Benchmarks"):
 *   bench trace_op <ns> ns/op ratio <r> vs budget_300ns
 *   bench sync_hit_1000 <us> us ratio <r> vs budget_100us
 *   bench trace_op ... ratio <r> vs torch_eager_add   (only when python3 can import torch)
 * Each figure is the median of repeated runs, since this machine is shared. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "lazytensor.h"

/* One-element tensors: the sync figure measures the executor (collect, walk,
 * key, cache lookup) and the interpreter's per-node dispatch, not arithmetic. */
enum { kNodes = 1000, kReps = 101, kElems = 1 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A chain of kNodes elementwise ops over two leaves; returns the last tensor. */
static lt_tensor *trace_chain(lt_tensor *a, lt_tensor *b) {
  lt_tensor *t = a;
  for (int i = 0; i < kNodes; i++) {
    switch (i % 4) {
    case 0:
      t = lt_add(t, b);
      break;
    case 1:
      t = lt_mul(t, b);
      break;
    case 2:
      t = lt_sub(t, a);
      break;
    default:
      t = lt_maximum(t, a);
      break;
    }
  }
  return t;
}

/* Times torch eager adds of small tensors, in a child process, if torch exists. */
static double torch_eager_ns(void) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s -c \"%s\" 2>/dev/null", bench_torch_python(),
           "import time, torch\n"
           "torch.set_num_threads(1)\n"
           "a = torch.ones(16); b = torch.ones(16)\n"
           "best = []\n"
           "for r in range(21):\n"
           "    t0 = time.perf_counter_ns()\n"
           "    for i in range(1000): a = a + b\n"
           "    best.append((time.perf_counter_ns() - t0) / 1000)\n"
           "best.sort(); print(best[len(best)//2])\n");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  double ns = -1;
  if (fscanf(p, "%lf", &ns) != 1) ns = -1;
  pclose(p);
  return ns;
}

int main(void) {
  float av[kElems], bv[kElems];
  for (int i = 0; i < kElems; i++) {
    av[i] = 0.01f * (float)i;
    bv[i] = 0.5f;
  }
  const int64_t shape[1] = {kElems};
  lt_tensor *a = lt_from_data(lt_cpu(0), LT_F32, shape, 1, av);
  lt_tensor *b = lt_from_data(lt_cpu(0), LT_F32, shape, 1, bv);
  float out[kElems];

  double trace_ns[kReps], sync_us[kReps];
  for (int r = 0; r < kReps; r++) {
    lt_scope_begin();
    double t0 = now_ns();
    lt_tensor *y = trace_chain(a, b);
    double t1 = now_ns();
    if (lt_to_data(y, out, sizeof out) != LT_OK) {
      fprintf(stderr, "trace_overhead: %s\n", lt_last_error());
      return 1;
    }
    double t2 = now_ns();
    lt_scope_end();
    trace_ns[r] = (t1 - t0) / kNodes;
    sync_us[r] = (t2 - t1) / 1e3;
  }
  /* The first sync compiled; every later one must have hit the cache. */
  if (counter("UncachedCompile") != 1 || counter("CachedCompile") != kReps - 1) {
    fprintf(stderr, "trace_overhead: expected 1 compile and %d cache hits, got %lld and %lld\n",
            kReps - 1, counter("UncachedCompile"), counter("CachedCompile"));
    return 1;
  }
  double op_ns = bench_median(trace_ns, kReps);
  double hit_us = bench_median(sync_us + 1, kReps - 1);
  printf("bench trace_op %.1f ns/op ratio %.2f vs budget_300ns\n", op_ns, 300.0 / op_ns);
  printf("bench sync_hit_%d %.1f us ratio %.2f vs budget_100us\n", kNodes, hit_us, 100.0 / hit_us);
  if (getenv("LT_BENCH_NO_TORCH")) {
    printf("# peer figure skipped (LT_BENCH_NO_TORCH)\n");
  } else {
    double torch_ns = torch_eager_ns();
    if (torch_ns > 0)
      printf("bench trace_op %.1f ns/op ratio %.2f vs torch_eager_add\n", op_ns, torch_ns / op_ns);
    else
      printf("# torch not importable by python3: no peer figure\n");
  }
  lt_release(a);
  lt_release(b);
  return 0;
}
