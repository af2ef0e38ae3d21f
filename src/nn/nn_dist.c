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

/* Replaces the k grads g[0..k-1] (one dtype) by their means over the
 * replicas, in place: one all-reduce of their concatenation (of the grad
 * itself when k is 1). */
static int average_together(lt_tensor *const *g, int k) {
  lt_tensor *flat[64] = {0};
  for (int i = 0; i < k && k > 1; i++) {
    int64_t n = lt_numel(g[i]);
    if (!(flat[i] = lt_reshape(g[i], &n, 1))) return lt_last_status();
  }
  lt_tensor *mean = lt_all_reduce(k == 1 ? g[0] : lt_concat(flat, k, 0), LT_REDUCE_MEAN);
  if (!mean) return lt_last_status();
  if (k == 1) return lt_assign(g[0], mean);
  int64_t at = 0;
  for (int i = 0; i < k; i++) {
    int64_t stop = at + lt_numel(g[i]);
    lt_tensor *part = lt_slice_n(mean, &at, &stop, NULL, 1);
    part = part ? lt_reshape(part, lt_shape(g[i]), lt_ndim(g[i])) : NULL;
    int rc = part ? lt_assign(g[i], part) : lt_last_status();
    if (rc != LT_OK) return rc;
    at = stop;
  }
  return LT_OK;
}

static bool is_small(lt_tensor *g) {
  return (size_t)lt_numel(g) * lt_dtype_size(lt_get_dtype(g)) < LT_DP_SMALL_GRAD_BYTES;
}

/* Each all-reduce pays the network's latency 2 (p - 1) times whatever its
 * size, so many small grads (biases, norm scales: most of a transformer's
 * tensors) cost far more than their bytes, and copying them into one
 * buffer costs little; large grads go alone, since copying them would cost
 * a pass over most of the bytes for one latency saved. The order (large
 * ones in parameter order, then the small ones of each dtype in order of
 * first appearance, up to 64 a bucket) is the same on every replica. */
int lt_dp_average_grads(lt_tensor *const *params, int n) {
  if (n < 0 || (n > 0 && !params))
    return lt__err(LT_EINVAL, "lt_dp_average_grads: bad parameter list");
  size_t cap = (size_t)n + 1;
  lt_tensor **g = lt__calloc(cap * sizeof *g), *bucket[64];
  bool *done = lt__calloc(cap * sizeof *done);
  int rc = g && done ? LT_OK : lt__err(LT_ENOMEM, "lt_dp_average_grads: out of memory");
  nn_own_begin();
  for (int i = 0; i < n && rc == LT_OK; i++) {
    if (!params[i]) rc = lt__err(LT_EINVAL, "lt_dp_average_grads: parameter %d is NULL", i);
    g[i] = rc == LT_OK ? lt_grad(params[i]) : NULL;
    done[i] = !g[i]; /* no grad: nothing to average (the optimizer skips it) */
  }
  for (int i = 0; i < n && rc == LT_OK; i++)
    if (!done[i] && !is_small(g[i])) {
      done[i] = true;
      rc = average_together(&g[i], 1);
    }
  for (int i = 0; i < n && rc == LT_OK; i++) {
    if (done[i]) continue;
    int k = 0;
    for (int j = i; j < n && k < 64; j++)
      if (!done[j] && lt_get_dtype(g[j]) == lt_get_dtype(g[i])) {
        done[j] = true;
        bucket[k++] = g[j];
      }
    rc = average_together(bucket, k);
  }
  nn_own_end();
  lt__free(g, cap * sizeof *g);
  lt__free(done, cap * sizeof *done);
  return rc;
}

int lt_dp_optim_step(lt_nn_optim *o) {
  if (!o) return lt__err(LT_EINVAL, "lt_dp_optim_step: optimizer is NULL");
  if (o->shard_size) return lt__nn_zero_step(o); /* sharded state: nn_zero.c */
  int rc = lt_dp_average_grads(o->params, o->n);
  return rc == LT_OK ? lt_nn_optim_step(o) : rc;
}
