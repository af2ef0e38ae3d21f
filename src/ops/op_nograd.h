/* Values autograd treats as constants: lt_detach and the no-grad scope
 * (lt_no_grad_begin / lt_no_grad_end).
 *
 * Autograd finds what to differentiate through the grad ids stamped on IR
 * nodes (lt_node.grad_id: the id of the requires-grad tensor whose value the
 * node is). A node stamped LT__GRAD_ID_CONST instead is a constant to it:
 * lt_backward neither walks below it nor sends it a gradient. Setting
 * requires_grad on the tensor holding such a node stamps it with that
 * tensor's id, which makes it a leaf, as torch's x.detach().requires_grad_(). */
#ifndef LT_OP_NOGRAD_H
#define LT_OP_NOGRAD_H

#include "../core/lt_node.h"

/* Tensor ids start at 1, so no tensor has this one. */
#define LT__GRAD_ID_CONST ((int64_t)-1)

/* A node with n's value that autograd treats as a constant, owned by no one
 * else: n itself when it is a fresh op node, else a new node (a data leaf
 * over the same buffer, a constant, or an identity reshape). Consumes n;
 * returns a new reference or NULL with the error recorded. */
lt_node *lt__node_detached(lt_node *n);

/* The node an op builder wraps into its result: n (consumed) as it is, or
 * lt__node_detached(n) inside a no-grad scope of this thread. */
lt_node *lt__no_grad_mark(lt_node *n);

#endif
