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

int lt__eager_run(lt_tensor *t) {
  lt_node *n = lt__node_retain(t->ir);
  bool history = lt__carries_grad(n);
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
