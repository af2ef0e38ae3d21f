/* Pieces every benchmark uses. */
#ifndef LT_BENCH_UTIL_H
#define LT_BENCH_UTIL_H

#include "lazytensor.h"

/* A counter's value (-1 for an unknown name). */
static inline long long counter(const char *name) {
  int64_t v = -1;
  lt_get_counter(name, &v);
  return (long long)v;
}

#endif
