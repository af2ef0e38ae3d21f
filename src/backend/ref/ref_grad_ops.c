/* Placeholder: kernels of the gradient ops land with the autograd helper. */
#include "../../core/lt_error.h"
#include "ref.h"

int ref_grad_ops(const ref_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  (void)out;
  (void)in;
  return lt__err(LT_EEXEC, "ref: no kernel for op %s", lt__op_name((lt_op)ins->op));
}
