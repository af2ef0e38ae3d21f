/* The fused attention kernel against the same attention built from matmul,
 * where and softmax ops, at the GPT model's shape (batch 32, 4 heads,
 * T = 64, head width 32, causal), f32 on the cpu backend.
 *
 * Prints, in the bench line format (docs/DESIGN.md, section "Benchmarks"):
 *   bench attention_fwd <ms> ms ratio <r> vs composite
 *   bench attention_fwd_bwd <ms> ms ratio <r> vs composite
 * ratio < 1: the fused op is faster. Each figure is the median of repeated
 * runs (the machine is shared); a run is one cached graph's execution. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/ops/op_attention.h" /* lt__attn_set_fused_always */
#include "bench_util.h"
#include "lazytensor.h"

enum { kB = 32, kH = 4, kT = 64, kD = 32, kReps = 41 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* softmax(q k^T / sqrt(D) masked causally) v from public ops. */
static lt_tensor *composite(lt_tensor *q, lt_tensor *k, lt_tensor *v, lt_tensor *keep) {
  lt_tensor *s = lt_mul(lt_matmul(q, lt_transpose(k, -2, -1)),
                        lt_scalar(lt_cpu(0), LT_F32, 1.0 / sqrt((double)kD)));
  s = lt_where(keep, s, lt_scalar(lt_cpu(0), LT_F32, -INFINITY));
  return lt_matmul(lt_softmax(s, -1), v);
}

/* Median ms of one execution: the forward alone, or with the gradients of
 * q, k, v of sum(out * w). */
static double run(bool fused, bool backward, const float *data, lt_tensor *keep) {
  const int64_t shape[4] = {kB, kH, kT, kD};
  const size_t n = (size_t)kB * kH * kT * kD;
  float *out = malloc(sizeof(float) * n);
  double t[kReps];
  for (int rep = 0; rep < kReps; rep++) {
    lt_scope_begin();
    lt_tensor *q = lt_from_data(lt_cpu(0), LT_F32, shape, 4, data);
    lt_tensor *k = lt_from_data(lt_cpu(0), LT_F32, shape, 4, data + n);
    lt_tensor *v = lt_from_data(lt_cpu(0), LT_F32, shape, 4, data + 2 * n);
    lt_tensor *w = lt_from_data(lt_cpu(0), LT_F32, shape, 4, data + 3 * n);
    lt_tensor *ins[3] = {q, k, v};
    if (backward)
      for (int i = 0; i < 3; i++) lt_set_requires_grad(ins[i], true);
    lt_sync(ins, 3, true);
    lt_sync(&w, 1, true);
    double t0 = now_ms();
    lt_tensor *o = fused ? lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN)
                         : composite(q, k, v, keep);
    if (!backward) {
      if (lt_to_data(o, out, sizeof(float) * n) != LT_OK) {
        fprintf(stderr, "attention: %s\n", lt_last_error());
        exit(1);
      }
    } else {
      lt_tensor *loss = lt_sum(lt_mul(o, w), NULL, 0, false);
      if (lt_backward(loss) != LT_OK) {
        fprintf(stderr, "attention backward: %s\n", lt_last_error());
        exit(1);
      }
      lt_tensor *g[3] = {lt_grad(q), lt_grad(k), lt_grad(v)};
      if (lt_sync(g, 3, true) != LT_OK || lt_to_data(g[0], out, sizeof(float) * n) != LT_OK) {
        fprintf(stderr, "attention gradients: %s\n", lt_last_error());
        exit(1);
      }
    }
    t[rep] = now_ms() - t0;
    lt_scope_end();
  }
  free(out);
  qsort(t, kReps, sizeof *t, bench_cmp_double);
  return t[kReps / 2];
}

int main(void) {
  /* the ATTENTION node also where training at this shape would build the
   * composite (docs/ATTENTION.md) */
  lt__attn_set_fused_always(true);
  const size_t n = (size_t)kB * kH * kT * kD;
  float *data = malloc(sizeof(float) * 4 * n);
  for (size_t i = 0; i < 4 * n; i++) data[i] = (float)sin(0.37 * (double)i) * 1.5f;
  uint8_t keep[kT * kT];
  for (int i = 0; i < kT; i++)
    for (int j = 0; j < kT; j++) keep[i * kT + j] = j <= i;
  lt_tensor *mask = lt_from_data(lt_cpu(0), LT_BOOL, (const int64_t[]){kT, kT}, 2, keep);
  for (int bwd = 0; bwd < 2; bwd++) {
    double fused = run(true, bwd, data, mask), comp = run(false, bwd, data, mask);
    printf("bench %s %.3f ms ratio %.3f vs composite\n",
           bwd ? "attention_fwd_bwd" : "attention_fwd", fused, fused / comp);
  }
  lt_release(mask);
  free(data);
  return 0;
}
