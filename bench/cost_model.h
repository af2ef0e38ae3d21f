/* The cost model of data-parallel training over p hosts (docs/COST_MODEL.md),
 * pure functions so that tests/test_cost_model.c can check the arithmetic
 * by hand and bench/allreduce can print predictions from measured terms.
 *
 * Ring all-reduce of S bytes over p hosts: a reduce-scatter then an
 * all-gather, each of p - 1 steps in which every host sends S / p bytes to
 * its neighbour, so
 *
 *   T(p, S) = 2 (p - 1) alpha + 2 (p - 1) / p * S * beta
 *
 * with alpha the latency of one step (one message) and beta the time per
 * byte of one link (the reduction's per-byte work folded in). An all-reduce
 * of two ranks is one step each way: T(2, S) = 2 alpha + S beta, which is how
 * a straight line t(S) = a + S b fitted to 2-rank timings gives the terms:
 * alpha = a / 2, beta = b.
 *
 * Units: microseconds and bytes throughout (beta in us per byte). */
#ifndef LT_BENCH_COST_MODEL_H
#define LT_BENCH_COST_MODEL_H

#include <math.h>
#include <stdbool.h>

/* A network: the ring's per-step latency and per-byte time. */
typedef struct cost_net {
  const char *name;
  double alpha_us, beta_us_per_byte;
} cost_net;

/* A workload under weak scaling: every host steps `batch` samples. */
typedef struct cost_workload {
  const char *name;
  double compute_us; /* one process's step (forward, backward, update) */
  double grad_bytes; /* all parameters' gradients, all-reduced every step */
  int tensors;       /* parameter tensors */
  int calls;         /* all-reduces per step (lt_dp_optim_step: one per large gradient, one per
                        bucket of small ones) */
  double last_bytes; /* the gradients produced last in backward (the first layer's) */
  int last_calls;    /* their all-reduces */
  int batch;
} cost_workload;

/* The fitted line t(S) = a + S b through n points (S[i] bytes, t[i] us),
 * weighted by 1 / t[i]^2: relative errors count, so that the microsecond
 * points of small messages fix a and the large ones fix b (plain least
 * squares would let the largest message set both). false when the points
 * do not determine a line (n < 2, all S equal, a t <= 0). */
static inline bool cost_fit_line(const double *S, const double *t, int n, double *a, double *b) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    if (!(t[i] > 0)) return false;
    double w = 1.0 / (t[i] * t[i]);
    sw += w, sx += w * S[i], sy += w * t[i];
    sxx += w * S[i] * S[i], sxy += w * S[i] * t[i];
  }
  double det = sw * sxx - sx * sx;
  if (n < 2 || !(fabs(det) > 1e-12 * sw * sxx)) return false;
  *b = (sw * sxy - sx * sy) / det;
  *a = (sy - *b * sx) / sw;
  return true;
}

/* The ring's terms from a 2-rank fit t(S) = a + S b. */
static inline cost_net cost_net_from_fit(const char *name, double a_us, double b_us_per_byte) {
  cost_net n = {name, a_us / 2, b_us_per_byte};
  return n;
}

/* `calls` ring all-reduces totalling `bytes` over p hosts: each call pays
 * the 2 (p - 1) latencies, the bytes pay the bandwidth term once. 0 for
 * p <= 1 (nothing to exchange). */
static inline double cost_allreduce_us(const cost_net *n, int p, double bytes, int calls) {
  if (p <= 1) return 0;
  return calls * 2.0 * (p - 1) * n->alpha_us + 2.0 * (p - 1) / p * bytes * n->beta_us_per_byte;
}

/* A step on p hosts. No overlap (what lt_dp_optim_step does today: the
 * all-reduces run after backward, one per parameter): compute + all-reduce.
 * fused: the same with one all-reduce of all gradients. overlap (perfect):
 * the other gradients' all-reduces hidden behind compute as far as they fit,
 * but those of the gradients produced last can only start once backward
 * ends: max(compute, all-reduce of the rest) + all-reduce of the last
 * bucket (counted once, so never slower than no overlap). */
typedef enum cost_mode { COST_NO_OVERLAP, COST_FUSED, COST_OVERLAP } cost_mode;

static inline double cost_step_us(const cost_workload *w, const cost_net *n, int p, cost_mode m) {
  if (m != COST_OVERLAP)
    return w->compute_us + cost_allreduce_us(n, p, w->grad_bytes, m == COST_FUSED ? 1 : w->calls);
  double rest = cost_allreduce_us(n, p, w->grad_bytes - w->last_bytes, w->calls - w->last_calls);
  double last = cost_allreduce_us(n, p, w->last_bytes, w->last_calls);
  return (w->compute_us > rest ? w->compute_us : rest) + last;
}

/* Samples per second of the p hosts together. */
static inline double cost_samples_per_s(const cost_workload *w, int p, double step_us) {
  return step_us > 0 ? (double)p * w->batch / (step_us / 1e6) : 0;
}

/* Weak-scaling efficiency: the one-host step over the p-host step (1 is
 * perfect: p hosts make p times the samples). */
static inline double cost_efficiency(const cost_workload *w, double step_us) {
  return step_us > 0 ? w->compute_us / step_us : 0;
}

#endif
