/* Autograd internals: the vector-Jacobian product of each IR op, and node
 * helpers to write them. A rule receives the node, the gradient g of its
 * output (same shape and dtype as the node; borrowed) and fills out[k] with a
 * NEW reference to the gradient of operand k (exactly operand k's shape and
 * dtype), or NULL when operand k gets none (integer operands, indices). A
 * rule returns LT_OK or a negative status with the error recorded. */
#ifndef LT_AG_H
#define LT_AG_H

#include "../ops/lt_ops.h"

typedef int (*ag_vjp_fn)(const lt_node *n, lt_node *g, lt_node **out);

/* The rule of op (from the op table), or NULL for an op outside the table. */
ag_vjp_fn lt__ag_rule(lt_op op);

/* The rules, one per GRAD token of the op table (lt_op_table.h): autograd's
 * dispatch is built from the table, so a row naming a rule that does not
 * exist fails to compile. Each lives with its family: ag_elementwise.c,
 * ag_reduce.c, ag_shape.c; lt__ag_rule_none (no operand gets a gradient) in
 * ag_util.c. */
int lt__ag_rule_none(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_unary(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_cast(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_binary(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_where(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_reduce(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_softmax(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_matmul(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_reshape(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_permute(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_expand(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_slice(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_concat(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_pad(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_indexed(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_unslice(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_scan(const lt_node *n, lt_node *g, lt_node **out); /* ag_scan.c */
int lt__ag_rule_conv(const lt_node *n, lt_node *g, lt_node **out); /* ag_conv.c */
/* ag_attention.c */
int lt__ag_rule_attention(const lt_node *n, lt_node *g, lt_node **out);
/* ag_collective.c */
int lt__ag_rule_collective(const lt_node *n, lt_node *g, lt_node **out);
int lt__ag_rule_spmd(const lt_node *n, lt_node *g, lt_node **out);

/* ---- helpers: every function consumes its node arguments and returns a NEW
 * reference (NULL on failure, with the error recorded; NULL inputs give NULL) ---- */
lt_node *lt__ag_const(lt_dtype dt, const int64_t *shape, int ndim, double v);
/* Elementwise ops, where and reductions: lt__node_un, lt__node_bin,
 * lt__node_where, lt__node_reduce (core, lt_node.h), shared with the
 * composite ops. */
/* torch's fused backward kernels (tanh, sigmoid, gelu, softmax, log_softmax)
 * widen bf16 inputs to f32, compute the whole formula there and round the
 * gradient once; its other gradients are chains of ops in the node's dtype,
 * each rounding (so those rules stay in the node's dtype). A rule matching a
 * fused kernel reads its operands, output and g through lt__ag_widen, builds
 * in lt__ag_wide_dtype and ends with lt__ag_narrow. */
lt_dtype lt__ag_wide_dtype(lt_dtype dt);         /* f32 for bf16, else dt itself */
lt_node *lt__ag_widen(lt_node *x);               /* x in lt__ag_wide_dtype of its dtype */
lt_node *lt__ag_narrow(lt_node *x, lt_dtype dt); /* x rounded to dt (no-op when it has it) */
/* Sums g down to shape (the transpose of numpy broadcasting to g's shape). */
lt_node *lt__ag_reduce_to(lt_node *g, const int64_t *shape, int ndim);
/* Broadcasts a to shape (EXPAND; a no-op when equal). */
lt_node *lt__ag_expand(lt_node *a, const int64_t *shape, int ndim);
/* a + b when both are blocks of one zero shape side by side along one axis
 * (UNSLICEs of step 1, as the gradients of a split's parts): one CONCAT of
 * their sources, under an UNSLICE unless together they fill the shape. A
 * sum of zero-padded blocks is a pass over each padding and an add per
 * block; the concat writes each element once (ag_shape.c). Consumes a and b
 * and returns the new node; NULL, consuming nothing, when they are not such
 * blocks (or on failure, with the error recorded). */
lt_node *lt__ag_merge_blocks(lt_node *a, lt_node *b);
/* n retained (borrowed node used as an operand of a new node). */
static inline lt_node *ag_ref(const lt_node *n) { return lt__node_retain((lt_node *)n); }
/* The node's k-th operand, retained. */
static inline lt_node *ag_arg(const lt_node *n, int k) { return ag_ref(n->operands[k].node); }
static inline bool ag_is_float(const lt_node *n) { return lt__is_float(n->dtype); }

#endif
