/* The layout of an ATTENTION instruction, checked once for every backend's
 * kernel (ref_attention.c, cpu_attention.c): instructions also come from
 * serialized executables, so nothing here is trusted. */
#ifndef LT_ATTN_PLAN_H
#define LT_ATTN_PLAN_H

#include "../core/lt_buffer.h"
#include "../core/lt_error.h"
#include "instr.h"

/* q [B, L, E], k [B, S, E], v [B, S, Ev], mask [B, L, S], out [B, L, Ev]. */
typedef struct attn_plan {
  int64_t B, L, S, E, Ev;
  bool causal;
  int mask_kind; /* 0 none, 1 bool (true: seen), 2 additive */
  double scale;
} attn_plan;

static inline bool attn_dims(const lt_buffer *b, int64_t d0, int64_t d1, int64_t d2) {
  return b->ndim == 3 && b->shape[0] == d0 && b->shape[1] == d1 && b->shape[2] == d2;
}

/* Fills p from ins and its buffers, or fails with LT_EEXEC saying what is
 * wrong: operand count, attrs (count and range), ranks and shapes, dtypes. */
static inline int attn_plan_make(const lt_instr *ins, const lt_buffer *out, lt_buffer *const *in,
                                 attn_plan *p) {
  if (ins->noperands < 3 || ins->noperands > 4 || ins->nattrs != 2)
    return lt__err(LT_EEXEC, "attention: malformed instruction (%d operands, %d attrs)",
                   ins->noperands, ins->nattrs);
  int64_t causal = ins->attrs[0], kind = ins->attrs[1];
  if ((causal != 0 && causal != 1) || kind < 0 || kind > 2 || (kind != 0) != (ins->noperands == 4))
    return lt__err(LT_EEXEC,
                   "attention: malformed instruction (causal %lld, mask kind %lld, %d operands)",
                   (long long)causal, (long long)kind, ins->noperands);
  const lt_buffer *q = in[0], *k = in[1], *v = in[2];
  if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3)
    return lt__err(LT_EEXEC, "attention: operands must have rank 3 (got %d, %d, %d)", q->ndim,
                   k->ndim, v->ndim);
  p->B = q->shape[0];
  p->L = q->shape[1];
  p->E = q->shape[2];
  p->S = k->shape[1];
  p->Ev = v->shape[2];
  p->causal = causal != 0;
  p->mask_kind = (int)kind;
  p->scale = ins->fattr;
  if (!attn_dims(k, p->B, p->S, p->E) || !attn_dims(v, p->B, p->S, p->Ev) ||
      !attn_dims(out, p->B, p->L, p->Ev) || (kind != 0 && !attn_dims(in[3], p->B, p->L, p->S)))
    return lt__err(LT_EEXEC, "attention: operand and result shapes do not fit");
  if (q->dtype != out->dtype || k->dtype != out->dtype || v->dtype != out->dtype ||
      (out->dtype != LT_F32 && out->dtype != LT_F64 && out->dtype != LT_BF16) ||
      (kind == 1 && in[3]->dtype != LT_BOOL) || (kind == 2 && in[3]->dtype != out->dtype))
    return lt__err(LT_EEXEC, "attention: operand dtypes do not fit");
  return LT_OK;
}

#endif
