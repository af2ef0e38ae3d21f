/* Cost analysis (cost.h, docs/COST.md): FLOPs and bytes counted from the IR.
 *
 * Only the products count as FLOPs, 2 per multiply-add, as the field counts
 * them for MFU: the rest of a training step is memory-bound work, counted
 * in bytes. The switch below lists every op of the MATMUL and CONV families
 * by hand and the rest through the op table, so an op added to either family
 * is a build error here until it says what it costs. */
#include "cost.h"

#include "../core/lt_error.h"
#include "../core/lt_op_switch.h"
#include "exec_internal.h"
#include "lt_metrics.h"

static int64_t numel(const lt_node *n) { return lt__numel(n->shape, n->ndim); }

static const lt_node *operand(const lt_node *n, int k) { return n->operands[k].node; }

/* A convolution's products: each element of its output y [N, O, OH, OW] is a
 * dot product of (C / groups) kh kw terms of the weight w [O, C/g, kh, kw].
 * Its input and weight gradients do the same products, transposed. */
static int64_t conv_flops(const lt_node *y, const lt_node *w) {
  return 2 * numel(y) * w->shape[1] * w->shape[2] * w->shape[3];
}

int64_t lt__node_flops(const lt_node *n) {
  switch ((lt_op)n->op) {
  case LT_OP_MATMUL: /* [..., n, k] x [..., k, m]: k multiply-adds per result */
    return 2 * numel(n) * operand(n, 0)->shape[operand(n, 0)->ndim - 1];
  case LT_OP_ATTENTION: {
    /* q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]: the
     * scores q k^T (L S E per batch) and the weighted sum p v (L S Ev).
     * A causal or masked attention counts in full, as FlopCounterMode does. */
    const lt_node *k = operand(n, 1);
    int64_t s = k->shape[k->ndim - 2];
    return 2 * s * (numel(operand(n, 0)) + numel(n));
  }
  case LT_OP_CONV2D:
  case LT_OP_CONV2D_BIAS: /* the bias adds are not products */
    return conv_flops(n, operand(n, 1));
  case LT_OP_CONV2D_GRAD_INPUT: /* (gy, w) */
    return conv_flops(operand(n, 0), operand(n, 1));
  case LT_OP_CONV2D_GRAD_WEIGHT: /* (x, gy) -> the weight's shape */
    return conv_flops(operand(n, 1), n);
  case LT_OP_MAX_POOL2D_ARGMAX: /* pooling compares and moves */
  case LT_OP_POOL_GATHER:
  case LT_OP_POOL_SCATTER_ADD:
    LT_OP_CASES_OUTSIDE_MATMUL_CONV
    return 0;
  }
  return 0;
}

static int64_t value_bytes(const lt_node *n) {
  return numel(n) * (int64_t)lt_dtype_size((lt_dtype)n->dtype);
}

int64_t lt__node_bytes(const lt_node *n) {
  if (lt__op_family(n->op) == LT_FAM_LEAF || lt__op_cpu_path(n->op) == LT_CPU_VIEW) return 0;
  int64_t b = value_bytes(n);
  for (int k = 0; k < n->noperands; k++) b += value_bytes(operand(n, k));
  return b;
}

void lt__graph_cost(const lt_graph *g, int64_t *flops, int64_t *bytes) {
  int64_t f = 0, b = 0;
  for (int i = 0; i < g->nnodes; i++) {
    f += lt__node_flops(g->nodes[i]);
    b += lt__node_bytes(g->nodes[i]);
  }
  *flops = f;
  *bytes = b;
}

/* The last executed graph's cost per device. The two halves are stored
 * apart: a reader racing an execution may see one graph's FLOPs and the
 * next one's bytes, so lt_get_last_cost is read after the device is idle. */
static _Atomic int64_t g_last[LT_MAX_DEVICES][2];

void lt__cost_executed(int dev, int64_t flops, int64_t bytes) {
  lt__count(LT_CTR_EXECUTED_FLOPS, flops);
  lt__count(LT_CTR_EXECUTED_BYTES, bytes);
  if (dev < 0 || dev >= LT_MAX_DEVICES) return;
  atomic_store_explicit(&g_last[dev][0], flops, memory_order_relaxed);
  atomic_store_explicit(&g_last[dev][1], bytes, memory_order_relaxed);
}

int lt_get_last_cost(lt_device dev, lt_cost *out) {
  const char *fn = "lt_get_last_cost";
  if (!out) return lt__err(LT_EINVAL, "%s: out is NULL", fn);
  if (!lt__exec_dev(fn, dev)) return LT_EDEVICE;
  out->flops = (double)atomic_load_explicit(&g_last[dev.index][0], memory_order_relaxed);
  out->bytes = (double)atomic_load_explicit(&g_last[dev.index][1], memory_order_relaxed);
  return LT_OK;
}

int lt_get_executed_cost(lt_cost *out) {
  if (!out) return lt__err(LT_EINVAL, "lt_get_executed_cost: out is NULL");
  out->flops = (double)atomic_load(&lt__counters[LT_CTR_EXECUTED_FLOPS]);
  out->bytes = (double)atomic_load(&lt__counters[LT_CTR_EXECUTED_BYTES]);
  return LT_OK;
}
