/* Serialized instruction heads, shared by the backends' executable formats. */
#include <string.h>

#include "../core/lt_node.h"
#include "bytes.h"
#include "instr.h"

void lt__instr_write_head(lt_wbuf *w, const lt_instr *in) {
  uint64_t fbits;
  memcpy(&fbits, &in->fattr, sizeof fbits);
  lt__wb_int(w, in->op, 2);
  lt__wb_int(w, in->dtype, 1);
  lt__wb_int(w, in->ndim, 1);
  for (int d = 0; d < in->ndim; d++) lt__wb_int(w, (uint64_t)in->shape[d], 8);
  lt__wb_int(w, fbits, 8);
}

const char *lt__instr_read_head(lt_rbuf *r, lt_instr *in) {
  uint64_t op = lt__rb_int(r, 2), dt = lt__rb_int(r, 1), nd = lt__rb_int(r, 1);
  if (r->bad) return "truncated instruction";
  if (op >= LT_OP_COUNT) return "unknown op";
  if (dt >= LT_NUM_DTYPES) return "unknown dtype";
  if (nd > LT_MAX_DIMS) return "too many dims";
  in->op = (uint16_t)op;
  in->dtype = (uint8_t)dt;
  in->ndim = (uint8_t)nd;
  int64_t numel = 1;
  for (uint64_t d = 0; d < nd; d++) {
    int64_t s = (int64_t)lt__rb_int(r, 8);
    if (s < 0 || (s > 0 && numel > INT64_MAX / 8 / s)) return "bad shape";
    in->shape[d] = s;
    numel *= s;
  }
  uint64_t fbits = lt__rb_int(r, 8);
  memcpy(&in->fattr, &fbits, sizeof fbits);
  return r->bad ? "truncated instruction" : NULL;
}
