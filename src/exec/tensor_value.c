/* The value a tensor contributes to a graph: its pending node, or a data leaf
 * over its buffer, uploading host data first (the executor's job, since it
 * picks the device's backend). */
#include "../core/lt_alloc.h"
#include "../core/lt_error.h"
#include "exec_internal.h"
#include "lt_metrics.h"

/* Moves host data to a device buffer (the first use of a host tensor in a graph). */
static int upload(lt_tensor *t) {
  const lt_backend *be = lt__backend_for(t->dev);
  lt_buffer *b = NULL;
  int rc;
  if (be->host_storage) { /* the host copy becomes the device storage */
    rc = lt__buffer_adopt(be, t->dev, (lt_dtype)t->dtype, t->shape, t->ndim, t->host, &b);
    if (rc == LT_OK) t->host = NULL; /* the buffer owns it now */
  } else {
    rc = lt__buffer_alloc(be, t->dev, (lt_dtype)t->dtype, t->shape, t->ndim, &b);
    if (rc != LT_OK) return rc;
    int64_t t0 = lt__now_ns();
    rc = be->to_device(b, t->host, t->host_bytes);
    lt__timer_add(LT_TIMER_TRANSFER_TO, lt__now_ns() - t0);
    if (rc != LT_OK) lt__buffer_release(b);
  }
  if (rc != LT_OK) return rc;
  lt__count(LT_CTR_TRANSFER_TO_DEVICE, 1);
  lt__tensor_set_buffer(t, b);
  return LT_OK;
}

lt_node *lt__tensor_ir(lt_tensor *t) {
  lt_node *n = t->ir;
  if (!n) {
    if (t->host && upload(t) != LT_OK) return NULL;
    if (!t->data_node) t->data_node = lt__node_data(t->buf);
    n = t->data_node;
  }
  /* Autograd finds its leaves through this stamp: the node is this
   * requires-grad tensor's value wherever a graph reads it. */
  if (n && t->requires_grad) n->grad_id = t->id;
  return n;
}
