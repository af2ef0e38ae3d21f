/* Autograd's side of lt_detach and the no-grad scope: a node stamped
 * LT__GRAD_ID_CONST (src/ops/op_nograd.c) is where differentiation stops.
 * lt_backward's walk treats it as a leaf that no tensor owns, so nothing
 * below it is visited through it and it is never marked as needing a
 * gradient, even when its operands are reached along another path. */
#include "ag_nograd.h"

#include "../core/lt_error.h"
#include "../ops/op_nograd.h"

bool lt__ag_nograd_stops(const lt_node *n) { return n->grad_id == LT__GRAD_ID_CONST; }

int lt__ag_nograd_check_loss(const lt_node *loss) {
  if (!lt__ag_nograd_stops(loss)) return LT_OK;
  return lt__err(LT_EINVAL,
                 "lt_backward: the loss was computed without autograd (lt_detach or "
                 "inside lt_no_grad_begin/lt_no_grad_end), so it has no gradient");
}
