/* Thread-local error state: every failure is a returned code and a message. */
#ifndef LT_ERROR_H
#define LT_ERROR_H

#include "lazytensor.h"

/* Records status and a printf-style message naming the failing call; returns
 * status so that callers can write `return lt__err(LT_EINVAL, "...")`. */
int lt__err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For an op that received a NULL operand: keeps an error already recorded (the
 * cause up the chain), else records that fn got a NULL operand. Returns LT_EINVAL. */
int lt__err_null(const char *fn);

/* Formats a shape as "[2, 3]" into buf (size n); returns buf. */
const char *lt__shape_str(const int64_t *shape, int ndim, char *buf, size_t n);

#endif
