/* Eager mode (lt_set_eager, LT_EAGER=1): each op is run as soon as it is
 * traced, asynchronously as in the reference (the op returns once its
 * execution is queued; a read waits for it, and a failure surfaces at the
 * next sync or read).
 *
 * Autograd differentiates IR graphs, and an eager value has none left: its
 * graph was cut when it ran. So a value that autograd may need keeps its
 * history: its data leaf records the node that computed it (lt_node.origin),
 * whose operands are in turn the data leaves of earlier eager values.
 * lt_backward walks through these origins as if the graph had never been
 * cut. Only values that depend on a requires-grad tensor keep a history,
 * and a requires-grad tensor never does (it is a leaf; lt__tensor_set_ir),
 * so an optimizer's updates do not chain one step's history to the next. */
#include "lt_ops.h"
#include "op_nograd.h"

/* Whether the value of n depends on a requires-grad tensor, so that autograd
 * may need its history. The walk stops at data leaves and at values made
 * constant by lt_detach or a no-grad scope. Eager graphs are an op over a few
 * leaves; past a budget of nodes the answer is yes, which only keeps some
 * history that was not needed. No node marks: another thread's walk may be
 * marking shared nodes (the RNG chain) meanwhile. */
static bool carries_grad(lt_node *n) {
  enum { kBudget = 256 };
  lt_node *stack[kBudget];
  int sp = 0, seen = 0;
  stack[sp++] = n;
  while (sp) {
    lt_node *cur = stack[--sp];
    if (++seen > kBudget) return true;
    if (cur->grad_id == LT__GRAD_ID_CONST) continue;
    if (cur->grad_id > 0) return true;
    if (cur->op == LT_OP_DATA) {
      if (cur->origin) return true;
      continue;
    }
    for (int i = 0; i < cur->noperands; i++) {
      if (sp == kBudget) return true;
      stack[sp++] = cur->operands[i].node;
    }
  }
  return false;
}

int lt__eager_run(lt_tensor *t) {
  lt_node *n = lt__node_retain(t->ir);
  bool history = carries_grad(n);
  int rc = lt__sync_internal(&t, 1, false, false, "eager");
  if (rc == LT_OK && history && t->buf && !t->requires_grad && !t->data_node) {
    lt_node *leaf = lt__node_data(t->buf);
    if (leaf) {
      lt__node_set_origin(leaf, n);
      t->data_node = leaf; /* the tensor's value as an operand, with its history */
    } else {
      rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
    }
  }
  lt__node_release(n);
  return rc;
}
