/* Little-endian byte writer and bounds-checked reader for the backends'
 * serialized executables (the persistent cache). A writer remembers an
 * allocation failure and a reader an overrun, so encoders and decoders check
 * once at the end instead of after every field. */
#ifndef LT_BYTES_H
#define LT_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lt_wbuf {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} lt_wbuf;

void lt__wb_int(lt_wbuf *w, uint64_t v, int nbytes); /* the low nbytes of v */
void lt__wb_raw(lt_wbuf *w, const void *p, size_t n);
/* Hands the bytes over exactly sized (the caller frees them with
 * lt__free(bytes, nbytes)), or frees them and returns LT_ENOMEM naming who. */
int lt__wb_finish(lt_wbuf *w, void **bytes, size_t *nbytes, const char *who);

typedef struct lt_rbuf {
  const uint8_t *p;
  size_t len, pos;
  bool bad; /* read past the end */
} lt_rbuf;

uint64_t lt__rb_int(lt_rbuf *r, int nbytes); /* 0 once past the end */
static inline size_t lt__rb_left(const lt_rbuf *r) { return r->bad ? 0 : r->len - r->pos; }

#endif
