/* ref kernel for LT_OP_ATTENTION: per batch entry b and query row i,
 *   s_j = scale * (q_i . k_j) + bias_ij,   out_i = sum_j softmax(s)_j v_j,
 * bias_ij = -inf where a bool mask is false or, causal, where j > i, the
 * additive mask's value otherwise. Everything in double; exp sees s_j minus
 * the row's maximum, so large scores do not overflow. A row whose every s_j
 * is -inf is NaN, as softmax of such a row is (torch's math path). */
#include <math.h>

#include "../../core/lt_alloc.h"
#include "../attn_plan.h"
#include "ref.h"

int lt__ref_attention(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  attn_plan p = {0};
  int rc = attn_plan_make(ins, out, in, &p);
  if (rc != LT_OK) return rc;
  if (out->numel == 0) return LT_OK;
  const lt_buffer *q = in[0], *k = in[1], *v = in[2], *m = p.mask_kind ? in[3] : NULL;
  size_t nbytes = sizeof(double) * (size_t)(p.S + 1);
  double *s = lt__malloc(nbytes);
  if (!s) return lt__err(LT_ENOMEM, "attention: out of memory");
  for (int64_t b = 0; b < p.B; b++)
    for (int64_t i = 0; i < p.L; i++) {
      int64_t row = b * p.L + i;
      double mx = -INFINITY;
      for (int64_t j = 0; j < p.S; j++) {
        double d = 0;
        for (int64_t e = 0; e < p.E; e++)
          d += ref_getf(q, row * p.E + e) * ref_getf(k, (b * p.S + j) * p.E + e);
        d *= p.scale;
        if (p.mask_kind == 1 && !ref_geti(m, row * p.S + j)) d = -INFINITY;
        if (p.mask_kind == 2) d += ref_getf(m, row * p.S + j);
        if (p.causal && j > i) d = -INFINITY;
        s[j] = d;
        if (d > mx || isnan(d)) mx = isnan(mx) ? mx : d;
      }
      double sum = 0;
      for (int64_t j = 0; j < p.S; j++) sum += s[j] = exp(s[j] - mx);
      for (int64_t e = 0; e < p.Ev; e++) {
        double acc = 0;
        for (int64_t j = 0; j < p.S; j++) acc += s[j] * ref_getf(v, (b * p.S + j) * p.Ev + e);
        ref_setf(out, row * p.Ev + e, acc / sum); /* -inf row: exp(NaN) makes NaN */
      }
    }
  lt__free(s, nbytes);
  return LT_OK;
}
