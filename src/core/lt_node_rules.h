/* The IR's contract, node by node: for each op, the operands, dtypes, attrs
 * and result shape that its kernels (ref and cpu) take for granted. The op
 * builders make nodes that keep it by construction; a graph read from bytes
 * (lt_program_load) is held to it before anything compiles or runs, so that a
 * node whose shape disagrees with its operands is an error, never a kernel
 * reading past a buffer.
 *
 * The shape inference that builders and the check share lives here too
 * (matmul's result, a reduction's kept dims, a convolution's window count):
 * one rule, one place. */
#ifndef LT_NODE_RULES_H
#define LT_NODE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lt_node.h"

/* Attribute values the window ops accept at most (strides, paddings, kernel
 * sizes, dilations): no size computed from them can overflow. */
#define LT_CONV_LIMIT ((int64_t)1 << 40)

/* [..., n, k] x [..., k, m] (both rank >= 2) -> broadcast batch + [n, m].
 * LT_MM_OK, or which rule the operands break. */
typedef enum lt_mm_fit { LT_MM_OK, LT_MM_RANK, LT_MM_CONTRACTION, LT_MM_BATCH } lt_mm_fit;
lt_mm_fit lt__matmul_shape(const int64_t *a, int an, const int64_t *b, int bn, int64_t *out,
                           int *out_ndim);

/* The shape a reduction over the axes in mask leaves (reduced axes dropped,
 * or kept as 1 with keepdim). mask must lie within ndim bits. */
void lt__reduce_shape(const int64_t *shape, int ndim, int64_t mask, bool keepdim, int64_t *out,
                      int *out_ndim);

/* Windows of a convolution along one axis: (in + 2p - d (k - 1) - 1) / s + 1,
 * 0 when the dilated kernel is larger than the padded input, -1 when an
 * argument is out of range (k, s, d < 1, p < 0, or any beyond LT_CONV_LIMIT). */
int64_t lt__conv_windows(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d);

/* What the check reads of an operand: a node's or an instruction's dtype
 * and shape. */
typedef struct lt_rule_operand {
  uint8_t dtype, ndim;
  const int64_t *shape;
} lt_rule_operand;

/* NULL when a node of op, result dtype dt and shape over these operands and
 * attrs keeps the contract; else why not, naming the field at fault
 * ("shape [2, 3] where the operands give [2, 4]", "attrs[1] (keepdim) is 7"),
 * written to why. The operands are values already checked (earlier nodes of
 * the graph, earlier instructions of an executable). */
const char *lt__node_rules_check(lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                                 const lt_rule_operand *ops, int nops, const int64_t *attrs,
                                 int nattrs, char *why, size_t nwhy);

#endif
