/* lt_detach and the no-grad scope (torch.Tensor.detach, torch.no_grad). Both
 * make values that autograd treats as constants by stamping their nodes with
 * LT__GRAD_ID_CONST (op_nograd.h); lt_backward stops there
 * (src/autograd/ag_nograd.c). Nothing is computed: a detached value is the
 * same lazy graph under one more node, so a step that detaches still compiles
 * to one executable. */
#include "op_nograd.h"

#include "lt_ops.h"

/* Open no-grad scopes of this thread (torch.no_grad is thread-local too). */
static _Thread_local int tl_no_grad_depth;

void lt_no_grad_begin(void) { tl_no_grad_depth++; }

void lt_no_grad_end(void) {
  if (tl_no_grad_depth > 0) tl_no_grad_depth--;
}

bool lt_get_no_grad(void) { return tl_no_grad_depth > 0; }

/* A new node with n's value that no tensor holds yet (n borrowed). A data
 * leaf or constant is already a constant to autograd unless a requires-grad
 * tensor holds it, so a fresh copy of the leaf is enough; an op node gets an
 * identity reshape over it, the one node the stamp may then go on. */
static lt_node *fresh_copy(lt_node *n) {
  switch ((lt_op)n->op) {
  case LT_OP_DATA:
    return lt__node_data(n->data);
  case LT_OP_CONST:
    return lt__node_const((lt_dtype)n->dtype, n->shape, n->ndim, n->fattr);
  default: {
    lt_node *op = lt__node_retain(n);
    return lt__node_make(LT_OP_RESHAPE, (lt_dtype)n->dtype, n->shape, n->ndim, &op, 1, NULL, 0,
                         0.0);
  }
  }
}

lt_node *lt__node_detached(lt_node *n) {
  if (!n) return NULL;
  /* refs == 1: only the caller holds n (an op just made it), so stamping it
   * changes no other tensor's value. Otherwise n may be another tensor's
   * value, a requires-grad tensor's included, which must stay differentiable. */
  if (n->refs > 1 || (n->grad_id != 0 && n->grad_id != LT__GRAD_ID_CONST)) {
    lt_node *c = fresh_copy(n);
    lt__node_release(n);
    n = c;
    if (!n) return NULL;
  }
  if (n->op != LT_OP_DATA && n->op != LT_OP_CONST) n->grad_id = LT__GRAD_ID_CONST;
  return n;
}

lt_node *lt__no_grad_mark(lt_node *n) { return tl_no_grad_depth > 0 ? lt__node_detached(n) : n; }

lt_tensor *lt_detach(lt_tensor *a) {
  if (lt__check_operands("lt_detach", &a, 1) != LT_OK) return NULL;
  lt_node *n = lt__ir_as(a, (lt_dtype)a->dtype);
  if (!n) return NULL;
  /* a's value is also a's: lt__ir_as gave a second reference, so this always
   * makes a new node and leaves a differentiable. */
  return lt__wrap(a->dev, lt__node_detached(n));
}
