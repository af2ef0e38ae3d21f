/* Pieces shared by the benchmarks of the MLP training step (train_step,
 * cache_warm_start): a clock and a synthetic stand-in for Fashion-MNIST. */
#ifndef LT_BENCH_MLP_H
#define LT_BENCH_MLP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lazytensor.h"

enum { MLP_FEATURES = 784, MLP_CLASSES = 10 };

static inline double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* n samples of uniform pseudo-random pixels, labels i mod 10. */
static inline void bench_synthetic(lt_nn_dataset *ds, int64_t n) {
  memset(ds, 0, sizeof *ds);
  ds->n = n;
  ds->rows = ds->cols = 28;
  ds->features = MLP_FEATURES;
  ds->num_classes = MLP_CLASSES;
  ds->images = malloc((size_t)(n * MLP_FEATURES));
  ds->labels = malloc((size_t)n * sizeof(int64_t));
  uint32_t s = 1;
  for (int64_t i = 0; i < n * MLP_FEATURES; i++) {
    s = s * 1664525u + 1013904223u;
    ds->images[i] = (uint8_t)(s >> 24);
  }
  for (int64_t i = 0; i < n; i++) ds->labels[i] = i % MLP_CLASSES;
}

#endif
