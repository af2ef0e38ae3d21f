/* Cost analysis of graphs (docs/COST.md): the FLOPs and bytes an executable
 * does, counted from its IR as XLA's cost_analysis() and PyTorch's
 * FlopCounterMode count them, and the machine's multiply-add peak that MFU
 * divides by. */
#ifndef LT_EXEC_COST_H
#define LT_EXEC_COST_H

#include <stdint.h>

#include "../backend/backend.h"
#include "../core/lt_node.h"

/* The FLOPs of one node: 2 per multiply-add of the products (matmul,
 * attention, convolutions and their gradients); every other op does none
 * that MFU counts. */
int64_t lt__node_flops(const lt_node *n);
/* The bytes one node moves: it reads each operand and writes its result
 * once; leaves and strided views move nothing themselves. */
int64_t lt__node_bytes(const lt_node *n);
/* Both, summed over the nodes of g. */
void lt__graph_cost(const lt_graph *g, int64_t *flops, int64_t *bytes);

/* Records one successful execution of a graph of this cost on device index
 * dev: the counters ExecutedFlops and ExecutedBytes, and the device's last
 * cost (lt_get_last_cost). */
void lt__cost_executed(int dev, int64_t flops, int64_t bytes);

#endif
