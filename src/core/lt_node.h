/* IR nodes. A node is one op with its attributes, result dtype and shape, its
 * operands, and a structural hash computed once at creation:
 *   hash = H(op, attrs, dtype, shape, each operand's hash and output index).
 * Device-data leaves hash dtype and shape only, so data never enters a key.
 * Nodes are immutable after creation and reference counted; a node holds a
 * reference on each operand. */
#ifndef LT_NODE_H
#define LT_NODE_H

#include <stdint.h>

#include "lazytensor.h"

struct lt_buffer;

typedef enum lt_op {
  /* leaves */
  LT_OP_DATA,  /* device data: a parameter of the graph */
  LT_OP_CONST, /* fattr broadcast to the node's shape */
  /* unary elementwise (operand already has the compute dtype) */
  LT_OP_NEG,
  LT_OP_ABS,
  LT_OP_SIGN,
  LT_OP_RELU,
  LT_OP_FLOOR,
  LT_OP_CEIL,
  LT_OP_ROUND,
  LT_OP_EXP,
  LT_OP_LOG,
  LT_OP_LOG1P,
  LT_OP_SQRT,
  LT_OP_RSQRT,
  LT_OP_SIN,
  LT_OP_COS,
  LT_OP_TANH,
  LT_OP_SIGMOID,
  LT_OP_GELU,
  LT_OP_ERF,
  LT_OP_NOT,  /* logical not, bool result */
  LT_OP_CAST, /* to the node's dtype */
  /* binary elementwise, numpy broadcasting inside the op; both operands carry
   * the same (promoted) dtype */
  LT_OP_ADD,
  LT_OP_SUB,
  LT_OP_MUL,
  LT_OP_DIV,
  LT_OP_POW,
  LT_OP_MAXIMUM,
  LT_OP_MINIMUM,
  LT_OP_EQ,
  LT_OP_NE,
  LT_OP_LT,
  LT_OP_LE,
  LT_OP_GT,
  LT_OP_GE,
  LT_OP_AND,
  LT_OP_OR,
  LT_OP_WHERE, /* operands: cond (bool), a, b; broadcast all three */
  /* reductions: attrs[0] = bit mask of reduced axes (input axes), attrs[1] = keepdim */
  LT_OP_SUM,
  LT_OP_MEAN,
  LT_OP_MAX,
  LT_OP_MIN,
  LT_OP_PROD,
  LT_OP_LOGSUMEXP,
  LT_OP_ARGMAX, /* attrs[0] = axis, attrs[1] = keepdim */
  LT_OP_ARGMIN,
  LT_OP_SOFTMAX, /* attrs[0] = axis */
  LT_OP_LOG_SOFTMAX,
  /* contraction: operands [..., n, k] and [..., k, m] (rank >= 2), batch dims broadcast */
  LT_OP_MATMUL,
  /* shape */
  LT_OP_RESHAPE,      /* to the node's shape, row-major order kept */
  LT_OP_PERMUTE,      /* attrs = perm (ndim entries): out axis i is input axis perm[i] */
  LT_OP_EXPAND,       /* numpy broadcast of the operand to the node's shape */
  LT_OP_SLICE,        /* attrs[0..ndim) = starts, attrs[ndim..2ndim) = steps (> 0) */
  LT_OP_CONCAT,       /* attrs[0] = axis; any number of operands */
  LT_OP_PAD,          /* attrs = before/after pairs per axis; fattr = value */
  LT_OP_GATHER,       /* operands: a, index (i32/i64, same rank); attrs[0] = axis */
  LT_OP_INDEX_SELECT, /* operands: a, index (1-d i32/i64); attrs[0] = axis */
  LT_OP_ONE_HOT,      /* operand: integer indices; attrs[0] = num_classes */
  /* random: operand 0 is the op's seed (i64 0-d, from the device's seed chain);
   * element k of the result is a function of (seed, k) only (counter-based) */
  LT_OP_RNG_UNIFORM, /* [0, 1) in the node's float dtype */
  LT_OP_RNG_NORMAL,  /* standard normal in the node's float dtype */
  LT_OP_RANDPERM,    /* a permutation of 0..n-1 (n = node shape[0]), integer dtype */
  /* gradients of indexing ops (made by autograd) */
  LT_OP_SCATTER_ADD, /* operands: src, index (same shape as src); attrs[0] = axis; out =
                        zeros of the node's shape with src added at index along axis
                        (the transpose of GATHER) */
  LT_OP_INDEX_ADD,   /* operands: src, index (1-d); attrs[0] = axis; out = zeros of the node's
                        shape with src's slices added at index (transpose of INDEX_SELECT) */
  LT_OP_UNSLICE,     /* operand: src; attrs as SLICE (starts, steps); out = zeros of the
                        node's shape with src placed at the sliced positions */
  LT_OP_COUNT
} lt_op;

typedef struct lt_node lt_node;

typedef struct lt_operand {
  lt_node *node;
  uint32_t index; /* output index; every op has one output today */
} lt_operand;

struct lt_node {
  int refs;
  uint16_t op;
  uint8_t dtype;
  uint8_t ndim;
  uint16_t noperands;
  uint16_t nattrs;
  uint32_t visit; /* walk epoch mark, owned by the executor */
  int32_t order;  /* position in the current post-order walk */
  uint64_t hash;
  double fattr;
  struct lt_buffer *data; /* LT_OP_DATA only: a reference on the buffer */
  int64_t grad_id;        /* id of the requires-grad tensor whose value this is, or 0 */
  int64_t shape[LT_MAX_DIMS];
  lt_operand *operands;
  int64_t *attrs;
};

const char *lt__op_name(lt_op op);

/* Creates a node. Takes new references on the operands (and on data for
 * LT_OP_DATA). Returns NULL on allocation failure with the error recorded. */
lt_node *lt__node_new(lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                      lt_node *const *operands, int noperands, const int64_t *attrs, int nattrs,
                      double fattr);
lt_node *lt__node_data(struct lt_buffer *buf);
lt_node *lt__node_const(lt_dtype dt, const int64_t *shape, int ndim, double value);

static inline lt_node *lt__node_retain(lt_node *n) {
  if (n) n->refs++;
  return n;
}
void lt__node_release(lt_node *n);

int64_t lt__numel(const int64_t *shape, int ndim);

/* A fresh mark for a walk over nodes (node->visit == mark: seen). Walks by
 * different threads never share nodes: a graph belongs to one device. */
uint32_t lt__node_epoch(void);

#endif
