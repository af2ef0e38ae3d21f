/* Thread-local error state. */
#include <stdarg.h>
#include <stdio.h>

#include "lt_error.h"

static _Thread_local int tl_status;
static _Thread_local char tl_message[512];

int lt__err(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tl_message, sizeof tl_message, fmt, ap);
  va_end(ap);
  tl_status = status;
  return status;
}

int lt__err_null(const char *fn) {
  /* Keep the cause recorded up the chain: it is more useful than "NULL operand". */
  if (tl_status != LT_OK) return LT_EINVAL;
  return lt__err(LT_EINVAL, "%s: operand is NULL", fn);
}

const char *lt_last_error(void) { return tl_message; }
int lt_last_status(void) { return tl_status; }

void lt_clear_error(void) {
  tl_status = LT_OK;
  tl_message[0] = '\0';
}

const char *lt__shape_str(const int64_t *shape, int ndim, char *buf, size_t n) {
  size_t used = 0;
  if (n == 0) return buf;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}
