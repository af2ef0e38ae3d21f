/* A growable printf-style string: the IR text of the cpu backend, the graph
 * dumps and compile explanations of the executor's debug output.
 *
 * Its memory comes from the library's allocator (lt_alloc.h). On allocation
 * failure it stops growing and remembers oom; every later call does nothing,
 * so a writer checks once at the end instead of after every piece. The text
 * is NUL-terminated whenever s is not NULL (s stays NULL until the first
 * write). Zero-initialise to start; lt__sb_free to finish. */
#ifndef LT_STRBUF_H
#define LT_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct lt_strbuf {
  char *s;
  size_t len, cap;
  bool oom;
} lt_strbuf;

void lt__sb_printf(lt_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lt__sb_vprintf(lt_strbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Appends n bytes of p. */
void lt__sb_append(lt_strbuf *b, const char *p, size_t n);
/* Cuts the text back to its first len bytes (len <= b->len), e.g. to drop
 * what was written since an earlier b->len. */
void lt__sb_truncate(lt_strbuf *b, size_t len);
void lt__sb_free(lt_strbuf *b);

#endif
