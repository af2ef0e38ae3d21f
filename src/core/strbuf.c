/* The growable printf-style string (see lt_strbuf.h). */
#include "lt_strbuf.h"

#include <stdio.h>
#include <string.h>

#include "lt_alloc.h"

/* Room for n more bytes and the NUL; false (oom set) when it cannot grow. */
static bool reserve(lt_strbuf *b, size_t n) {
  if (b->oom) return false;
  if (b->s && b->len + n < b->cap) return true;
  size_t nc = b->cap ? b->cap * 2 : 4096;
  while (nc < b->len + n + 1) nc *= 2;
  char *s = lt__realloc(b->s, b->cap, nc);
  if (!s) {
    b->oom = true;
    return false;
  }
  b->s = s;
  b->cap = nc;
  return true;
}

void lt__sb_vprintf(lt_strbuf *b, const char *fmt, va_list ap) {
  if (b->oom) return;
  va_list again; /* ap is spent by the first try, which may find too little room */
  va_copy(again, ap);
  size_t room = b->cap - b->len;
  int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
  if (n < 0) /* an encoding error: the text is lost as on a failed allocation */
    b->oom = true;
  else if ((!b->s || (size_t)n >= room) && reserve(b, (size_t)n))
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, again);
  if (!b->oom) b->len += (size_t)n;
  va_end(again);
}

void lt__sb_printf(lt_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lt__sb_vprintf(b, fmt, ap);
  va_end(ap);
}

void lt__sb_append(lt_strbuf *b, const char *p, size_t n) {
  if (!reserve(b, n)) return;
  if (n) memcpy(b->s + b->len, p, n);
  b->len += n;
  b->s[b->len] = '\0';
}

void lt__sb_truncate(lt_strbuf *b, size_t len) {
  if (len >= b->len) return;
  b->len = len;
  if (b->s) b->s[len] = '\0';
}

void lt__sb_free(lt_strbuf *b) {
  lt__free(b->s, b->cap);
  *b = (lt_strbuf){0};
}
