/* Loop-nest generation for the kernels that lowering forms (cpu_lower.c).
 *
 * A kernel evaluates an expression: a tree of fused elementwise nodes whose
 * leaves are views of slots (parameters, temporaries, roots). Each node is
 * evaluated at the kernel's loop coordinates through a dim map (numpy
 * broadcasting: a size-1 dim reads index 0), so broadcasts, expands,
 * permutes and slices of leaves are folded into the leaves' strides. */
#ifndef LT_CPU_CODEGEN_H
#define LT_CPU_CODEGEN_H

#include "cpu.h"

enum { CG_EXPR = 0, CG_VIEW = 1 }; /* per node: fused into its users, or stored */

typedef struct cg_read {
  int slot;
  bool identity; /* reads element k where the kernel writes element k */
} cg_read;

typedef struct cg_info {
  int64_t extent, unit_cost;
  int nreads;
  cg_read reads[64]; /* leaves beyond 64 are still read; the list is then marked full */
  bool reads_full;
} cg_info;

typedef struct cg_ctx {
  const lt_graph *g;
  const uint8_t *kind;  /* per node: CG_EXPR / CG_VIEW */
  const cpu_view *view; /* per node, for CG_VIEW */
  cpu_sb *ir;
  uint64_t uid;
} cg_ctx;

/* Whether codegen handles node as a fused elementwise op / a reduction whose
 * operand it fuses. */
bool cg_elementwise_ok(const lt_node *n);
bool cg_reduce_ok(const lt_node *n);

/* Function fn_index: out (contiguous, root's dtype and shape) = node root,
 * computed from its operands, or (copy) read from root's view. */
int cg_elem(const cg_ctx *c, int root, bool copy, const cpu_view *out, int fn_index, cg_info *info);
/* Function fn_index: out = reduction node (its operand fused). */
int cg_reduce(const cg_ctx *c, int node, const cpu_view *out, int fn_index, cg_info *info);

#endif
