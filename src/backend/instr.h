/* Instructions: IR nodes copied into an executable, and their serialized
 * head. Shared by every backend: the fallback path (the ref kernels, one
 * node at a time) takes one. */
#ifndef LT_INSTR_H
#define LT_INSTR_H

#include <stdint.h>

#include "lazytensor.h"

/* A node as an executable keeps it: a copy without pointers (operands are
 * indices of earlier instructions). The ref backend's program and the cpu
 * backend's fallback kernels are made of these. */
typedef struct lt_instr {
  uint16_t op;
  uint8_t dtype;
  uint8_t ndim;
  int64_t shape[LT_MAX_DIMS];
  double fattr;
  int param;     /* DATA: parameter index */
  int noperands; /* indices of earlier instructions */
  int *operands;
  int nattrs;
  int64_t *attrs;
} lt_instr;

struct lt_wbuf;
struct lt_rbuf;
/* An instruction's head: u16 op, u8 dtype, u8 ndim, i64 shape[ndim], u64 fattr bits. */
void lt__instr_write_head(struct lt_wbuf *w, const lt_instr *in);
/* Reads a head into in; NULL, or what is wrong with the bytes. */
const char *lt__instr_read_head(struct lt_rbuf *r, lt_instr *in);

#endif
