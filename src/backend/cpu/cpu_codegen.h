/* Loop-nest generation for the kernels that lowering forms (cpu_lower.c).
 *
 * A kernel evaluates an expression: a tree of fused elementwise nodes whose
 * leaves are views of slots (parameters, temporaries, roots). Each node is
 * evaluated at the kernel's loop coordinates through a dim map (numpy
 * broadcasting: a size-1 dim reads index 0), so broadcasts, expands,
 * permutes and slices of leaves are folded into the leaves' strides.
 *
 * RNG_UNIFORM is an elementwise node too: its value at the loop coordinates
 * is a function of its seed (a scalar) and of its element's flat index in its
 * own shape, which the loops walk as they walk a contiguous leaf of that
 * shape (so merging loop dims keeps the index right). */
#ifndef LT_CPU_CODEGEN_H
#define LT_CPU_CODEGEN_H

#include "cpu.h"

enum { CG_EXPR = 0, CG_VIEW = 1 }; /* per node: fused into its users, or stored */

/* A kernel stores up to CG_MAX_OUTS values of one shape (a group of
 * elementwise nodes, see cpu_lower.c), each in its own slot, in one loop. */
#define CG_MAX_OUTS 8

typedef struct cg_read {
  int slot;
  bool identity; /* reads element k where the kernel writes element k */
  uint8_t dtype; /* as read */
  int8_t member; /* the first output (index) whose value loads it; the loaded
                    value serves every later output of the same iteration */
} cg_read;

typedef struct cg_info {
  int64_t extent, unit_cost;
  int nouts;
  int outs[CG_MAX_OUTS]; /* output slots, in the order they are stored per element */
  int nreads;
  cg_read reads[64]; /* leaves beyond 64 are still read; the list is then marked full */
  bool reads_full;
} cg_info;

typedef struct cg_ctx {
  const lt_graph *g;
  const uint8_t *kind;  /* per node: CG_EXPR / CG_VIEW */
  const cpu_view *view; /* per node, for CG_VIEW */
  cpu_fntab *fns;       /* each kernel's function goes here */
} cg_ctx;

/* Whether codegen handles node as a fused elementwise op / a reduction whose
 * operand it fuses. */
bool lt__cg_elementwise_ok(const lt_node *n);
bool lt__cg_reduce_ok(const lt_node *n);

/* Function fn_index: for each i < nroots (1 with copy; at most CG_MAX_OUTS),
 * outs[i] (contiguous, roots[i]'s dtype and shape; every root has the same
 * shape) = node roots[i], computed from its operands, or (copy) read from its
 * view. Per element the roots are stored in order; a root that reads an
 * earlier one (directly or through fused expressions) uses its value. */
int lt__cg_elem(const cg_ctx *c, const int *roots, int nroots, bool copy, const cpu_view *outs,
                int fn_index, cg_info *info);
/* Function fn_index: out = reduction node (its operand fused). */
int lt__cg_reduce(const cg_ctx *c, int node, const cpu_view *out, int fn_index, cg_info *info);

#endif
