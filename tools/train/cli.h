/* What the three commands of lazytensor-train (train.c, train_gpt.c,
 * train_dp.c) share: parsing of numeric options and a monotonic clock. */
#ifndef LT_TRAIN_CLI_H
#define LT_TRAIN_CLI_H

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* A whole decimal integer >= lo (nothing after it, no overflow). */
static inline bool cli_parse_i64(const char *s, int64_t lo, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo) return false;
  *out = v;
  return true;
}

/* A whole finite number >= 0. */
static inline bool cli_parse_f64(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

static inline double cli_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
