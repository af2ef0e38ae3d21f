/* Sharded optimizer state (ZeRO stage 1; lazytensor_dist.h, lt_dp_options):
 * lt_dp_optim_create, and the step lt_dp_optim_step takes for such an
 * optimizer. The whole step is traced into the step graph: one
 * reduce-scatter of the grads of a bucket, the optimizer's usual update
 * (lt__nn_optim_build) on this replica's chunks, one all-gather of the new
 * chunks.
 *
 * Layout: parameter i (numel N, chunk length S = ceil(N / size)) is seen as
 * its flattened value padded with zeros to size * S and reshaped to
 * [size, S]; rank r owns row r. A bucket of parameters lays their grids
 * side by side ([size, S_1 + S_2 + ...]), so one reduce-scatter along axis
 * 0 hands each replica its row of every grad at once ([1, sum S]) and one
 * all-gather brings every row of every new parameter back. The padding's
 * grads are zero, so its state and values stay zero and are cut off. */
#include "lazytensor_dist.h"
#include "nn.h"
#include "../core/lt_collective.h"
#include "../ops/lt_ops.h"

enum { BUCKET = 64 }; /* grads a collective carries at most, as lt_dp_average_grads */

lt_nn_optim *lt_dp_optim_create(const lt_nn_optim_config *cfg, lt_tensor *const *params, int n,
                                const lt_dp_options *opts) {
  const char *fn = "lt_dp_optim_create";
  if (!opts || !opts->shard_optimizer) return lt__nn_optim_create(fn, cfg, params, n, 0);
  if (!cfg || n <= 0 || !params || !params[0]) /* the full checks are lt__nn_optim_create's */
    return lt__nn_optim_create(fn, cfg, params, n, 0);
  lt_device dev = lt_get_device(params[0]);
  lt_coll_binding b;
  if (dev.type != LT_DEVICE_CPU || !lt__coll_binding(dev.index, &b)) {
    char s[32];
    lt_device_str(dev, s, sizeof s);
    lt__err(LT_EDEVICE,
            "%s: sharding the optimizer's state needs a world: %s belongs to none "
            "(lt_world_local, lt_world_mpi)",
            fn, s);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (params[i] && lt_sharding_axis(params[i]) >= 0) {
      lt__err(LT_EINVAL,
              "%s: parameter %d is sharded (lt_mark_sharding): its state is split already; "
              "shard_optimizer is for replicated parameters",
              fn, i);
      return NULL;
    }
  return lt__nn_optim_create(fn, cfg, params, n, b.size);
}

/* t (a parameter or its grad, numel N) as the [size, S] grid of the layout
 * above. */
static lt_tensor *as_grid(lt_tensor *t, int size, int64_t len) {
  int64_t numel = lt_numel(t), pads[2] = {0, size * len - numel}, grid[2] = {size, len};
  lt_tensor *flat = lt_reshape(t, &numel, 1);
  if (flat && pads[1]) flat = lt_pad_n(flat, pads, 2, 0.0);
  return flat ? lt_reshape(flat, grid, 2) : NULL;
}

/* Columns [at, at + len) of the 2-d x. */
static lt_tensor *columns(lt_tensor *x, int64_t at, int64_t len) {
  int64_t start[2] = {0, at}, stop[2] = {lt_shape(x)[0], at + len};
  return lt_slice_n(x, start, stop, NULL, 2);
}

/* The mean over the replicas of this replica's row of each grad of the
 * bucket ix[0..k-1]: gs[ix[j]] = [S]. */
static int scatter_grads(const lt_nn_optim *o, const int *ix, int k, lt_tensor *const *g,
                         lt_tensor **gs) {
  lt_tensor *grids[BUCKET];
  int64_t len[BUCKET];
  for (int j = 0; j < k; j++) {
    len[j] = nn_optim_shard_len(o->params[ix[j]], o->shard_size);
    if (!(grids[j] = as_grid(g[ix[j]], o->shard_size, len[j]))) return lt_last_status();
  }
  lt_tensor *row = lt_reduce_scatter(k == 1 ? grids[0] : lt_concat(grids, k, 1), LT_REDUCE_MEAN,
                                     0); /* [1, sum S] */
  for (int j = 0, at = 0; j < k && row; at += (int)len[j], j++)
    if (!(gs[ix[j]] = lt_reshape(columns(row, at, len[j]), &len[j], 1))) return lt_last_status();
  return row ? LT_OK : lt_last_status();
}

/* The whole new values of the bucket's parameters from every replica's new
 * rows: full[ix[j]], shaped as the parameter. */
static int gather_params(const lt_nn_optim *o, const int *ix, int k, lt_tensor *const *out,
                         lt_tensor **full) {
  lt_tensor *rows[BUCKET];
  int64_t len[BUCKET];
  for (int j = 0; j < k; j++) {
    len[j] = nn_optim_shard_len(o->params[ix[j]], o->shard_size);
    int64_t shape[2] = {1, len[j]};
    if (!(rows[j] = lt_reshape(out[3 * ix[j]], shape, 2))) return lt_last_status();
  }
  lt_tensor *all = lt_all_gather(k == 1 ? rows[0] : lt_concat(rows, k, 1), 0); /* [size, sum S] */
  for (int j = 0, at = 0; j < k && all; at += (int)len[j], j++) {
    lt_tensor *p = o->params[ix[j]];
    int64_t padded = o->shard_size * len[j], zero = 0, numel = lt_numel(p);
    lt_tensor *flat = lt_reshape(columns(all, at, len[j]), &padded, 1);
    flat = padded == numel ? flat : lt_slice_n(flat, &zero, &numel, NULL, 1);
    if (!(full[ix[j]] = lt_reshape(flat, lt_shape(p), lt_ndim(p)))) return lt_last_status();
  }
  return all ? LT_OK : lt_last_status();
}

static bool is_small(lt_tensor *g) {
  return (size_t)lt_numel(g) * lt_dtype_size(lt_get_dtype(g)) < LT_DP_SMALL_GRAD_BYTES;
}

/* Checks the grads and groups the parameters that have one into buckets as
 * lt_dp_average_grads does, for the same reason (a collective's latency
 * against a pass over the bytes): each grad of LT_DP_SMALL_GRAD_BYTES or
 * more alone (its grid is then a reshape, no copy, when its size divides),
 * in parameter order, then the smaller ones of each dtype, up to BUCKET a
 * bucket, in order of first appearance: the same order on every replica.
 * order gets the indices bucket by bucket, starts[b] where bucket b begins. */
static int plan_buckets(const lt_nn_optim *o, lt_tensor *const *g, int *order, int *starts,
                        int *nb) {
  const char *fn = "lt_dp_optim_step";
  for (int i = 0; i < o->n; i++)
    if (g[i] && lt_get_dtype(g[i]) != lt_get_dtype(o->params[i]))
      return lt__err(LT_EDTYPE, "%s: grad %d has dtype %s, its parameter %s", fn, i,
                     lt_dtype_name(lt_get_dtype(g[i])), lt_dtype_name(lt_get_dtype(o->params[i])));
  bool *done = lt__calloc((size_t)o->n * sizeof *done);
  if (!done) return lt__err(LT_ENOMEM, "%s: out of memory", fn);
  int placed = 0;
  *nb = 0;
  for (int i = 0; i < o->n; i++) {
    done[i] = !g[i];
    if (g[i] && !is_small(g[i])) {
      done[i] = true;
      starts[(*nb)++] = placed;
      order[placed++] = i;
    }
  }
  for (int i = 0; i < o->n; i++) {
    if (done[i]) continue;
    starts[(*nb)++] = placed;
    for (int j = i, k = 0; j < o->n && k < BUCKET; j++)
      if (!done[j] && lt_get_dtype(g[j]) == lt_get_dtype(g[i])) {
        done[j] = true;
        order[placed++] = j;
        k++;
      }
  }
  starts[*nb] = placed;
  lt__free(done, (size_t)o->n * sizeof *done);
  return LT_OK;
}

/* The per-parameter arrays of one sharded step. */
typedef struct zero_step {
  lt_tensor **g, **gs, **ps, **full, **out; /* n each, out 3n */
  int *order, *starts;                      /* n, n + 1 */
} zero_step;

static void zero_step_free(zero_step *z, int n) {
  size_t arr = (size_t)n * sizeof(lt_tensor *);
  lt__free(z->g, arr);
  lt__free(z->gs, arr);
  lt__free(z->ps, arr);
  lt__free(z->full, arr);
  lt__free(z->out, 3 * arr);
  lt__free(z->order, (size_t)n * sizeof(int));
  lt__free(z->starts, (size_t)(n + 1) * sizeof(int));
}

/* Traces the whole step: scatter every bucket's grads, update the chunks,
 * gather every bucket's parameters, and only then assign (a failure leaves
 * parameters and state as they were). */
static int trace_step(lt_nn_optim *o, zero_step *z) {
  int nb = 0, rc = plan_buckets(o, z->g, z->order, z->starts, &nb);
  for (int b = 0; b < nb && rc == LT_OK; b++)
    rc = scatter_grads(o, z->order + z->starts[b], z->starts[b + 1] - z->starts[b], z->g, z->gs);
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    if (!z->g[i]) continue;
    int64_t len = nn_optim_shard_len(o->params[i], o->shard_size);
    /* row `rank` of the grid, taken when the step runs: one graph, and one
     * compile, for every replica */
    lt_tensor *row = lt__shard_chunk(as_grid(o->params[i], o->shard_size, len), 0, o->shard_size);
    if (!(z->ps[i] = lt_reshape(row, &len, 1))) rc = lt_last_status();
  }
  if (rc == LT_OK) rc = lt__nn_optim_build(o, z->ps, z->gs, z->out);
  for (int b = 0; b < nb && rc == LT_OK; b++)
    rc =
        gather_params(o, z->order + z->starts[b], z->starts[b + 1] - z->starts[b], z->out, z->full);
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    if (!z->g[i]) continue;
    lt_tensor *dst[3] = {o->params[i], o->s1[i], o->s2[i]};
    lt_tensor *src[3] = {z->full[i], z->out[3 * i + 1], z->out[3 * i + 2]};
    for (int j = 0; j < 3 && rc == LT_OK; j++)
      if (dst[j] && src[j]) rc = lt_assign(dst[j], src[j]);
  }
  return rc;
}

int lt__nn_zero_step(lt_nn_optim *o) {
  int n = o->n;
  size_t arr = (size_t)n * sizeof(lt_tensor *);
  zero_step z = {lt__calloc(arr),
                 lt__calloc(arr),
                 lt__calloc(arr),
                 lt__calloc(arr),
                 lt__calloc(3 * arr),
                 lt__calloc((size_t)n * sizeof(int)),
                 lt__calloc((size_t)(n + 1) * sizeof(int))};
  int rc = z.g && z.gs && z.ps && z.full && z.out && z.order && z.starts
               ? LT_OK
               : lt__err(LT_ENOMEM, "lt_dp_optim_step: out of memory");
  if (rc == LT_OK) {
    for (int i = 0; i < n; i++) z.g[i] = lt_grad(o->params[i]);
    lt_clear_error();
    nn_own_begin();
    rc = trace_step(o, &z);
    nn_own_end();
  }
  if (rc == LT_OK) {
    lt__nn_optim_count_step(o, z.g);
    for (int i = 0; i < n; i++)
      if (z.g[i]) lt_zero_grad(o->params[i]);
  }
  zero_step_free(&z, n);
  return rc;
}
