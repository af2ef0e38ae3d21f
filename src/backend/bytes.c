/* Byte writer and reader of serialized executables. */
#include "bytes.h"

#include <string.h>

#include "../core/lt_alloc.h"
#include "../core/lt_error.h"

static void reserve(lt_wbuf *w, size_t n) {
  if (w->oom || w->len + n <= w->cap) return;
  size_t nc = w->cap ? w->cap * 2 : 1024;
  while (nc < w->len + n) nc *= 2;
  uint8_t *p = lt__realloc(w->p, w->cap, nc);
  if (!p) {
    w->oom = true;
    return;
  }
  w->p = p;
  w->cap = nc;
}

void lt__wb_int(lt_wbuf *w, uint64_t v, int nbytes) {
  reserve(w, (size_t)nbytes);
  if (w->oom) return;
  for (int i = 0; i < nbytes; i++) w->p[w->len++] = (uint8_t)(v >> (8 * i));
}

void lt__wb_raw(lt_wbuf *w, const void *p, size_t n) {
  reserve(w, n);
  if (w->oom || !n) return;
  memcpy(w->p + w->len, p, n);
  w->len += n;
}

int lt__wb_finish(lt_wbuf *w, void **bytes, size_t *nbytes, const char *who) {
  uint8_t *p = w->oom ? NULL : lt__realloc(w->p, w->cap, w->len);
  if (!p) {
    lt__free(w->p, w->cap);
    *w = (lt_wbuf){0};
    return lt__err(LT_ENOMEM, "%s: out of memory serializing an executable", who);
  }
  *bytes = p;
  *nbytes = w->len;
  return LT_OK;
}

uint64_t lt__rb_int(lt_rbuf *r, int nbytes) {
  if (r->bad || r->len - r->pos < (size_t)nbytes) {
    r->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < nbytes; i++) v |= (uint64_t)r->p[r->pos++] << (8 * i);
  return v;
}
