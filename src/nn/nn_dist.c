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

/* The mean over the replicas of the k grads g[idx[0..k-1]] (one dtype, each
 * under LT_DP_SMALL_GRAD_BYTES), into avg[idx[i]]: one all-reduce of their
 * concatenation. Each all-reduce pays the network's latency 2 (p - 1)
 * times whatever its size, so many small ones (biases, norm scales: most
 * of a transformer's tensors) cost far more than their bytes; copying them
 * into one buffer costs little. Large grads go alone: copying them would
 * cost a pass over most of the bytes for one latency saved. */
static int average_small(lt_tensor **g, const int *idx, int k, lt_tensor **avg) {
  lt_tensor *flat[64] = {0};
  int64_t at = 0;
  for (int i = 0; i < k; i++) {
    int64_t n = lt_numel(g[idx[i]]);
    if (!(flat[i] = lt_reshape(g[idx[i]], &n, 1))) return lt_last_status();
  }
  lt_tensor *mean = lt_all_reduce(lt_concat(flat, k, 0), LT_REDUCE_MEAN);
  if (!mean) return lt_last_status();
  for (int i = 0; i < k; i++) {
    int64_t stop = at + lt_numel(g[idx[i]]);
    lt_tensor *part = lt_slice(mean, &at, &stop, NULL);
    avg[idx[i]] = nn_keep(part ? lt_reshape(part, lt_shape(g[idx[i]]), lt_ndim(g[idx[i]])) : NULL);
    if (!avg[idx[i]]) return lt_last_status();
    at = stop;
  }
  return LT_OK;
}

static bool is_small(lt_tensor *g) {
  return (size_t)lt_numel(g) * lt_dtype_size(lt_get_dtype(g)) < LT_DP_SMALL_GRAD_BYTES;
}

int lt_dp_optim_step(lt_nn_optim *o) {
  if (!o) return lt__err(LT_EINVAL, "lt_dp_optim_step: optimizer is NULL");
  size_t n = (size_t)o->n + 1;
  lt_tensor **avg = lt__calloc(n * sizeof *avg), **g = lt__calloc(n * sizeof *g);
  int *idx = lt__calloc(n * sizeof *idx);
  int rc = avg && g && idx ? LT_OK : lt__err(LT_ENOMEM, "lt_dp_optim_step: out of memory");
  nn_own_begin();
  for (int i = 0; i < o->n && rc == LT_OK; i++) g[i] = lt_grad(o->params[i]);
  /* large grads alone, in parameter order; then the small ones of each
   * dtype (in order of first appearance) in buckets of at most 64 tensors:
   * the same calls in the same order on every replica */
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    if (!g[i] || is_small(g[i])) continue; /* none: skipped, as lt_nn_optim_step skips it */
    avg[i] = nn_keep(lt_all_reduce(g[i], LT_REDUCE_MEAN));
    if (!avg[i]) rc = lt_last_status();
  }
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    if (!g[i] || avg[i] || !is_small(g[i])) continue;
    int k = 0;
    for (int j = i; j < o->n && k < 64; j++)
      if (g[j] && !avg[j] && is_small(g[j]) && lt_get_dtype(g[j]) == lt_get_dtype(g[i]))
        idx[k++] = j;
    if (k == 1) {
      avg[i] = nn_keep(lt_all_reduce(g[i], LT_REDUCE_MEAN));
      rc = avg[i] ? LT_OK : lt_last_status();
    } else {
      rc = average_small(g, idx, k, avg);
    }
  }
  nn_own_end();
  if (rc == LT_OK) rc = lt_nn_optim_step_grads(o, avg);
  for (int i = 0; avg && i < o->n; i++) {
    lt_release(avg[i]);
    if (rc == LT_OK) lt_zero_grad(o->params[i]);
  }
  lt__free(avg, n * sizeof *avg);
  lt__free(g, n * sizeof *g);
  lt__free(idx, n * sizeof *idx);
  return rc;
}
