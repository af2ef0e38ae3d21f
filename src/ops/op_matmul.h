/* The matmul builders' internal entry (op_matmul.c). */
#ifndef LT_OP_MATMUL_H
#define LT_OP_MATMUL_H

#include "lazytensor.h"

/* x @ w + bias for a 2-d weight w [in, out] and a bias [out] (torch's linear
 * with the weight transposed), checked as fn. The bias is part of the
 * product: in bf16 (autocast included) the sum is rounded once, as torch's
 * addmm. Operands must not be sharded (the caller takes lt_matmul and lt_add
 * for those). */
lt_tensor *lt__linear(const char *fn, lt_tensor *x, lt_tensor *w, lt_tensor *bias);

#endif
