/* Autograd's side of lt_detach and the no-grad scope (src/ops/op_nograd.h):
 * nodes stamped LT__GRAD_ID_CONST are constants to lt_backward. */
#ifndef LT_AG_NOGRAD_H
#define LT_AG_NOGRAD_H

#include "../core/lt_node.h"

/* True when lt_backward must neither walk below n nor give it a gradient. */
bool lt__ag_nograd_stops(const lt_node *n);

/* LT_OK, or LT_EINVAL (recorded) when the loss itself is such a constant
 * (torch: "element 0 of tensors does not require grad"). */
int lt__ag_nograd_check_loss(const lt_node *loss);

#endif
