/* ref kernel for LT_OP_MATMUL: [..., n, k] @ [..., k, m] -> [..., n, m] with
 * numpy broadcasting of the batch dims. A plain triple loop per batch entry:
 * floats accumulate in double, integers in 64-bit two's complement (unsigned
 * arithmetic, so overflow wraps as in torch instead of being undefined). */
#include "ref.h"

int lt__ref_matmul(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_buffer *a = in[0], *b = in[1];
  int nb = ins->ndim - 2;
  int64_t n = ins->shape[nb], m = ins->shape[nb + 1];
  int64_t k = a->shape[a->ndim - 1];
  int64_t nbatch = 1;
  for (int d = 0; d < nb; d++) nbatch *= ins->shape[d];
  bool fl = ref_is_float(out->dtype);

  int64_t coords[LT_MAX_DIMS];
  for (int64_t bi = 0; bi < nbatch; bi++) {
    lt__unravel(bi, ins->shape, nb, coords);
    /* the operands' batch dims (all but their last two) broadcast to the output's */
    int64_t abase = lt__bcast_ravel(a->shape, a->ndim - 2, coords, nb) * n * k;
    int64_t bbase = lt__bcast_ravel(b->shape, b->ndim - 2, coords, nb) * k * m;
    int64_t obase = bi * n * m;
    for (int64_t i = 0; i < n; i++) {
      for (int64_t j = 0; j < m; j++) {
        int64_t ai = abase + i * k, bj = bbase + j;
        if (fl) {
          double acc = 0;
          for (int64_t p = 0; p < k; p++) acc += ref_getf(a, ai + p) * ref_getf(b, bj + p * m);
          ref_setf(out, obase + i * m + j, acc);
        } else {
          uint64_t acc = 0;
          for (int64_t p = 0; p < k; p++)
            acc += (uint64_t)ref_geti(a, ai + p) * (uint64_t)ref_geti(b, bj + p * m);
          ref_seti(out, obase + i * m + j, (int64_t)acc);
        }
      }
    }
  }
  return LT_OK;
}
