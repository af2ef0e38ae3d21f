/* Data-parallel helpers (lazytensor_dist.h): parameters made equal from rank
 * 0, and optimizer steps on gradients averaged over the replicas inside the
 * step graph (so the all-reduce is one more node of the step, compiled with
 * it, rather than a separate exchange). */
#include "lazytensor_dist.h"
#include "nn.h"

int lt_dp_broadcast_params(lt_tensor *const *params, int n) {
  if (n < 0 || (n > 0 && !params))
    return lt__err(LT_EINVAL, "lt_dp_broadcast_params: bad parameter list");
  int rc = LT_OK;
  nn_own_begin();
  for (int i = 0; i < n && rc == LT_OK; i++) {
    if (!params[i]) {
      rc = lt__err(LT_EINVAL, "lt_dp_broadcast_params: parameter %d is NULL", i);
      break;
    }
    lt_tensor *b = lt_broadcast(params[i], 0);
    rc = b ? lt_assign(params[i], b) : lt_last_status();
  }
  nn_own_end();
  return rc;
}

int lt_dp_optim_step(lt_nn_optim *o) {
  if (!o) return lt__err(LT_EINVAL, "lt_dp_optim_step: optimizer is NULL");
  lt_tensor **avg = lt__calloc((size_t)(o->n + 1) * sizeof *avg);
  if (!avg) return lt__err(LT_ENOMEM, "lt_dp_optim_step: out of memory");
  int rc = LT_OK;
  nn_own_begin();
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    lt_tensor *g = lt_grad(o->params[i]);
    if (!g) continue; /* skipped, as lt_nn_optim_step skips it */
    avg[i] = nn_keep(lt_all_reduce(g, LT_REDUCE_MEAN));
    if (!avg[i]) rc = lt_last_status();
  }
  nn_own_end();
  if (rc == LT_OK) rc = lt_nn_optim_step_grads(o, avg);
  for (int i = 0; i < o->n; i++) {
    lt_release(avg[i]);
    if (rc == LT_OK) lt_zero_grad(o->params[i]);
  }
  lt__free(avg, (size_t)(o->n + 1) * sizeof *avg);
  return rc;
}
