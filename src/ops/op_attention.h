/* Attention internals shared by the builder (op_attention.c) and the
 * gradient rule (autograd/ag_attention.c), which rebuilds the probabilities
 * from primitives. */
#ifndef LT_OP_ATTENTION_H
#define LT_OP_ATTENTION_H

#include "lt_ops.h"

/* The kinds of mask an attention takes (the ATTENTION node's attrs[1]). */
typedef enum lt_attn_mask_kind {
  LT_ATTN_MASK_NONE = 0,
  LT_ATTN_MASK_BOOL = 1,     /* true: the position is seen */
  LT_ATTN_MASK_ADDITIVE = 2, /* added to the scaled scores */
} lt_attn_mask_kind;

/* The scores softmax reads, scale * q k^T with the mask or the causal
 * triangle applied, from rank-3 nodes q [B, L, E], k [B, S, E] and mask
 * [B, L, S] (NULL when kind is NONE; bool, or q's dtype when ADDITIVE).
 * Consumes q, k and mask; NEW reference or NULL with the error recorded. */
lt_node *lt__attn_scores(lt_node *q, lt_node *k, lt_node *mask, lt_attn_mask_kind kind, bool causal,
                         double scale);

/* x (consumed, rank >= 2) with its last two axes swapped (PERMUTE). */
lt_node *lt__attn_transpose(lt_node *x);
/* x @ y (consumed) for rank-3 operands of equal batch size. */
lt_node *lt__attn_matmul(lt_node *x, lt_node *y);

/* Tests: true makes lt_scaled_dot_product_attention build the ATTENTION
 * node always, also where training at short sequences builds the composite
 * (op_attention.c), so that the node's gradient rule stays exercised. */
void lt__attn_set_fused_always(bool on);

#endif
