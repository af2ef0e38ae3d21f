/* Pieces every benchmark uses. */
#ifndef LT_BENCH_UTIL_H
#define LT_BENCH_UTIL_H

#include <stdlib.h>

#include "lazytensor.h"

/* A counter's value (-1 for an unknown name). */
static inline long long counter(const char *name) {
  int64_t v = -1;
  lt_get_counter(name, &v);
  return (long long)v;
}

/* qsort's comparison of doubles. */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n-1] (sorts v). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

#endif
