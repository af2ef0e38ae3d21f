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
#include "lt_op_table.h"

struct lt_buffer;

/* The IR ops, one per row of the op table (lt_op_table.h). */
#define LT_OP_ENUM_ROW(E, name, fam, arity, res, grad, ref, cpu) LT_OP_##E,
typedef enum lt_op { LT_OP_TABLE(LT_OP_ENUM_ROW) LT_OP_COUNT } lt_op;
#undef LT_OP_ENUM_ROW

/* Op groups (the table's FAMILY column). */
typedef enum lt_op_family {
  LT_FAM_LEAF,    /* data and constants: no operands */
  LT_FAM_UNARY,   /* elementwise, one operand */
  LT_FAM_BINARY,  /* elementwise, two operands broadcast */
  LT_FAM_COMPARE, /* elementwise comparisons: bool result */
  LT_FAM_TERNARY, /* where */
  LT_FAM_REDUCE,  /* reductions over axes, arg reductions, softmax */
  LT_FAM_MATMUL,
  LT_FAM_SHAPE,      /* data movement without arithmetic */
  LT_FAM_INDEX,      /* reads at computed positions */
  LT_FAM_RANDOM,     /* counter-based draws from a seed operand */
  LT_FAM_SCATTER,    /* writes at computed positions (indexing transposes) */
  LT_FAM_CONV,       /* convolutions and their gradients, pooling windows (NCHW) */
  LT_FAM_COLLECTIVE, /* exchanges between the replicas of a world (lt_collective.h) */
} lt_op_family;

/* Result dtype rules (the table's RESULT column). */
typedef enum lt_op_result {
  LT_RES_SAME,  /* the dtype of the value operand (operand 1 for where, else 0) */
  LT_RES_BOOL,  /* bool */
  LT_RES_INDEX, /* i64 */
  LT_RES_NODE,  /* chosen by the builder */
  LT_RES_ACC,   /* as SAME, or f32 from bf16 operands when the builder asks for it: the
                 * sums in f32 kept unrounded (matmul: a linear's bias is added before
                 * the one rounding to bf16, as torch's addmm) */
} lt_op_result;

/* How the cpu backend runs an op (the table's CPU column). */
typedef enum lt_op_cpu_path {
  LT_CPU_LEAF,     /* a parameter or constant */
  LT_CPU_LOOP,     /* fused into an elementwise loop nest */
  LT_CPU_REDUCE,   /* fused reduction */
  LT_CPU_GEMM,     /* a GEMM library call */
  LT_CPU_VIEW,     /* a strided view of its operand, no copy */
  LT_CPU_RNG,      /* a draw fused into a loop */
  LT_CPU_NATIVE,   /* a hand-written cpu kernel on contiguous operands */
  LT_CPU_FALLBACK, /* the executor's fallback: the ref kernel, one node at a time */
} lt_op_cpu_path;

/* One row of the op table, as data. */
typedef struct lt_op_info {
  const char *name;
  uint8_t family;   /* lt_op_family */
  int8_t arity;     /* operands; -1: one or more */
  uint8_t result;   /* lt_op_result */
  uint8_t cpu;      /* lt_op_cpu_path */
  const char *grad; /* autograd rule token (ag_rule_<grad>) */
  const char *ref;  /* ref kernel token (ref_<ref>) */
} lt_op_info;

extern const lt_op_info lt__op_info[LT_OP_COUNT];

/* Reads of the table (op must be < LT_OP_COUNT). */
#define lt__op_family(op) ((lt_op_family)lt__op_info[(op)].family)
#define lt__op_result(op) ((lt_op_result)lt__op_info[(op)].result)
#define lt__op_cpu_path(op) ((lt_op_cpu_path)lt__op_info[(op)].cpu)
#define lt__op_is_elementwise(op)                                             \
  (lt__op_family(op) == LT_FAM_UNARY || lt__op_family(op) == LT_FAM_BINARY || \
   lt__op_family(op) == LT_FAM_COMPARE || lt__op_family(op) == LT_FAM_TERNARY)

/* False when the table declares op not differentiable (GRAD `none`). */
bool lt__op_has_grad(int op);

/* The result dtype that the table's rule gives a node of op whose own dtype
 * is own: operand_dt is the dtype of operand lt__op_dtype_operand(op) (the
 * one a SAME result copies; a node of no operands passes own). */
lt_dtype lt__op_result_dtype(int op, lt_dtype operand_dt, lt_dtype own);
#define lt__op_dtype_operand(op) (lt__op_family(op) == LT_FAM_TERNARY ? 1 : 0)

/* Whether op may be given n operands (kernels index them unchecked, so
 * decoders of serialized executables check this first). */
bool lt__op_arity_ok(int op, uint32_t n);

/* A hash of the op table's text: part of every compile environment key. */
uint64_t lt__op_table_hash(void);
/* The table's text (one line per op), and a test hook that makes
 * lt__op_table_hash hash other text instead (NULL: the real table again), as
 * a library built with a changed table would. */
const char *lt__op_table_text(void);
void lt__op_table_set_text(const char *text);

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
  /* LT_OP_DATA made by eager mode only: the node whose execution computed the
   * buffer (a reference), so that autograd can differentiate through values
   * that were computed one op at a time. NULL otherwise. Not hashed. */
  struct lt_node *origin;
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

/* Makes origin (a new reference is taken) the node that computed data's
 * buffer (data: an LT_OP_DATA node without an origin yet). */
void lt__node_set_origin(lt_node *data, lt_node *origin);

static inline lt_node *lt__node_retain(lt_node *n) {
  if (n) n->refs++;
  return n;
}
void lt__node_release(lt_node *n);

/* Node constructor that CONSUMES its operands (released also on failure; a NULL
 * operand makes it fail). Returns a new reference or NULL. */
lt_node *lt__node_make(lt_op op, lt_dtype dt, const int64_t *shape, int ndim, lt_node **operands,
                       int noperands, const int64_t *attrs, int nattrs, double fattr);
/* n converted to dt (consumes n; returns it unchanged when already dt). */
lt_node *lt__node_cast(lt_node *n, lt_dtype dt);
/* n reshaped (consumes n; returns it unchanged when the shape is equal). */
lt_node *lt__node_reshape(lt_node *n, const int64_t *shape, int ndim);
/* Expression helpers for code that builds graphs from nodes (composite ops,
 * gradient rules). Each CONSUMES its node arguments (NULL ones make it fail)
 * and returns a new reference, or NULL with the error recorded. */
/* Elementwise unary op: a's shape; a's dtype (bool for the table's BOOL rows). */
lt_node *lt__node_un(lt_op op, lt_node *a);
/* Elementwise binary op with numpy broadcasting, computed in a's dtype (b is
 * cast to it; AND and OR in bool); comparisons give bool. */
lt_node *lt__node_bin(lt_op op, lt_node *a, lt_node *b);
/* cond ? a : b, broadcasting all three, in a's dtype. */
lt_node *lt__node_where(lt_node *cond, lt_node *a, lt_node *b);
/* Reduction op (SUM, MEAN, MAX, ...) over the axes in mask, keepdim or not. */
lt_node *lt__node_reduce(lt_op op, lt_node *x, int64_t mask, bool keepdim);

int64_t lt__numel(const int64_t *shape, int ndim);

/* A fresh mark for a walk over nodes (node->visit == mark: seen). Walks by
 * different threads never share nodes: a graph belongs to one device. */
uint32_t lt__node_epoch(void);

#endif
