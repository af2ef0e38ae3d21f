/* In-process worlds (lazytensor_dist.h): n replicas on CPU:0..n-1, their
 * collectives through shared memory, and lt_world_run's replica threads.
 *
 * The shared-memory transport is a rendezvous per collective, in two phases:
 *   arrive   each rank posts its call (buffers and description) and waits,
 *            at most the world's timeout, for the others; the last to come
 *            checks that the calls agree and opens the round
 *   compute  every rank does its share of the work on all ranks' buffers at
 *            once (those of its replica group only, when the call names one:
 *            the group is then a world of its own for this step): an all-reduce is cut into n
 * slices of elements, rank r reducing slice r over the inputs and writing it into every output (a
 * reduce-scatter and an all-gather in one pass); an all-gather rank r copies its input into every
 * output; a reduce-scatter rank r reduces its own chunk; a broadcast rank r copies root's input
 * into its own output leave    a rank returns only when every rank is done: the others read its
 * input and write its output until then Only arrival waits on other replicas' progress, so only it
 * is bounded; the compute phase is bounded by the work itself. A rank known to be gone (its
 * lt_world_run function returned) fails the wait at once. A timeout, a gone
 * rank or a disagreement
 * breaks the world for good (its ranks' sequences no longer line up), and
 * every later collective fails at once with that message. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lazytensor_world.h"
#include "../core/lt_alloc.h"
#include "../core/lt_collective.h"
#include "../core/lt_dtype.h"
#include "../core/lt_error.h"
#include "exec_internal.h"
#include "world_internal.h"
#include "lt_metrics.h"

/* Elements go through double (floats) or int64 (integers, which wrap as the
 * dtype does): the dtype table's load / store (core/lt_dtype.h). */

/* out[io] = reduce over ranks k of in_k[ii] (rank order). */
static void reduce_one(lt_coll_call *const *s, int n, int redop, int dt, int64_t ii, void *out,
                       int64_t io) {
  if (lt__is_float(dt)) {
    double acc = lt__load_f64(dt, s[0]->in, ii);
    for (int k = 1; k < n; k++) {
      double v = lt__load_f64(dt, s[k]->in, ii);
      if (redop == LT_COLL_SUM || redop == LT_COLL_MEAN)
        acc += v;
      else if (acc != acc || v != v) /* NaN propagates, as torch.maximum */
        acc = acc != acc ? acc : v;
      else if (redop == LT_COLL_MAX)
        acc = v > acc ? v : acc;
      else
        acc = v < acc ? v : acc;
    }
    if (redop == LT_COLL_MEAN) acc /= n;
    lt__store_f64(dt, out, io, acc);
    return;
  }
  int64_t acc = lt__load_i64(dt, s[0]->in, ii);
  for (int k = 1; k < n; k++) {
    int64_t v = lt__load_i64(dt, s[k]->in, ii);
    if (redop == LT_COLL_SUM)
      acc = (int64_t)((uint64_t)acc + (uint64_t)v); /* wraps, never undefined */
    else if (redop == LT_COLL_MAX)
      acc = v > acc ? v : acc;
    else
      acc = v < acc ? v : acc;
  }
  lt__store_i64(dt, out, io, acc);
}

static int64_t numel(const int64_t *shape, int ndim) {
  int64_t m = 1;
  for (int d = 0; d < ndim; d++) m *= shape[d];
  return m;
}

/* Rank r's share of the round (every slot is valid and they agree). */
static void compute(lt_coll_call *const *s, int n, int r) {
  const lt_coll_call *c = s[r];
  int dt = c->dtype;
  size_t esz = lt_dtype_size((lt_dtype)dt);
  int64_t inner = 1, outer = 1;
  if (c->kind == LT_COLL_ALL_GATHER || c->kind == LT_COLL_REDUCE_SCATTER) {
    for (int d = 0; d < c->axis; d++) outer *= c->in_shape[d];
    for (int d = c->axis + 1; d < c->ndim; d++) inner *= c->in_shape[d];
  }
  switch (c->kind) {
  case LT_COLL_ALL_REDUCE: {
    int64_t m = numel(c->in_shape, c->ndim), lo = m * r / n, hi = m * (r + 1) / n;
    if (dt == LT_F32 && (c->redop == LT_COLL_SUM || c->redop == LT_COLL_MEAN)) {
      /* the common case (gradients): the same sums as reduce_one, without
       * its per-element dispatch */
      for (int64_t i = lo; i < hi; i++) {
        double acc = ((const float *)s[0]->in)[i];
        for (int k = 1; k < n; k++) acc += ((const float *)s[k]->in)[i];
        float v = (float)(c->redop == LT_COLL_MEAN ? acc / n : acc);
        for (int k = 0; k < n; k++) ((float *)s[k]->out)[i] = v;
      }
      break;
    }
    for (int64_t i = lo; i < hi; i++) {
      reduce_one(s, n, c->redop, dt, i, s[0]->out, i);
      for (int k = 1; k < n; k++)
        memcpy((char *)s[k]->out + i * esz, (char *)s[0]->out + i * esz, esz);
    }
    break;
  }
  case LT_COLL_ALL_GATHER: {
    size_t chunk = (size_t)(c->in_shape[c->axis] * inner) * esz;
    for (int k = 0; k < n; k++)
      for (int64_t o = 0; o < outer; o++)
        if (chunk)
          memcpy((char *)s[k]->out + ((size_t)o * n + (size_t)r) * chunk,
                 (const char *)c->in + (size_t)o * chunk, chunk);
    break;
  }
  case LT_COLL_REDUCE_SCATTER: {
    int64_t len = c->in_shape[c->axis], blk = len / n * inner;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < blk; j++)
        reduce_one(s, n, c->redop, dt, o * len * inner + r * blk + j, c->out, o * blk + j);
    break;
  }
  case LT_COLL_BROADCAST: {
    size_t bytes = (size_t)numel(c->in_shape, c->ndim) * esz;
    if (bytes && c->out != s[c->root]->in) memcpy(c->out, s[c->root]->in, bytes);
    break;
  }
  case LT_COLL_ALL_TO_ALL: {
    /* rank r pulls chunk r (along axis) of every rank j's input into block
     * j (along concat_axis) of its own output */
    int64_t box[LT_MAX_DIMS];
    memcpy(box, c->in_shape, (size_t)c->ndim * sizeof *box);
    box[c->axis] /= n;
    for (int j = 0; j < n; j++)
      lt__coll_copy_box(c->out, c->out_shape, c->concat_axis, j * box[c->concat_axis], s[j]->in,
                        c->in_shape, c->axis, r * box[c->axis], box, c->ndim, esz);
    break;
  }
  case LT_COLL_PERMUTE: {
    /* rank r pulls its source's input, or writes zeros */
    size_t bytes = (size_t)numel(c->in_shape, c->ndim) * esz;
    int src = c->from[r];
    if (!bytes) break;
    if (src < 0)
      memset(c->out, 0, bytes);
    else if (c->out != s[src]->in)
      memcpy(c->out, s[src]->in, bytes);
    break;
  }
  }
}

/* "all_reduce(sum) f32[2, 3]" */
static void describe(const lt_coll_call *c, char *buf, size_t n) {
  char shape[96];
  lt__shape_str(c->in_shape, c->ndim, shape, sizeof shape);
  int k = snprintf(buf, n, "%s", lt__coll_kind_name(c->kind));
  if (k < 0 || (size_t)k >= n) return;
  if (c->kind == LT_COLL_ALL_REDUCE || c->kind == LT_COLL_REDUCE_SCATTER)
    k += snprintf(buf + k, n - (size_t)k, "(%s)", lt__coll_redop_name(c->redop));
  if (k < 0 || (size_t)k >= n) return;
  if (c->kind == LT_COLL_ALL_GATHER || c->kind == LT_COLL_REDUCE_SCATTER)
    k += snprintf(buf + k, n - (size_t)k, " axis %d", c->axis);
  else if (c->kind == LT_COLL_BROADCAST)
    k += snprintf(buf + k, n - (size_t)k, " root %d", c->root);
  else if (c->kind == LT_COLL_ALL_TO_ALL)
    k += snprintf(buf + k, n - (size_t)k, " split %d concat %d", c->axis, c->concat_axis);
  else if (c->kind == LT_COLL_PERMUTE)
    k += lt__coll_pairs_str(c->from, buf + k, n - (size_t)k);
  if (k < 0 || (size_t)k >= n) return;
  if (k < 0 || (size_t)k >= n) return;
  if (c->gsize)
    k += snprintf(buf + k, n - (size_t)k, " in groups of %d (stride %d)", c->gsize, c->gstride);
  if (k < 0 || (size_t)k >= n) return;
  snprintf(buf + k, n - (size_t)k, " %s%s", lt_dtype_name((lt_dtype)c->dtype), shape);
}

static bool same_call(const lt_coll_call *a, const lt_coll_call *b) {
  if (a->kind != b->kind || a->dtype != b->dtype || a->ndim != b->ndim || a->seq != b->seq ||
      (a->graph && b->graph && a->graph != b->graph)) /* another program (0: not known) */
    return false;
  if ((a->kind == LT_COLL_ALL_REDUCE || a->kind == LT_COLL_REDUCE_SCATTER) && a->redop != b->redop)
    return false;
  if ((a->kind == LT_COLL_ALL_GATHER || a->kind == LT_COLL_REDUCE_SCATTER) && a->axis != b->axis)
    return false;
  if (a->kind == LT_COLL_BROADCAST && a->root != b->root) return false;
  if (a->gsize != b->gsize || (a->gsize && a->gstride != b->gstride)) return false;
  if (a->kind == LT_COLL_ALL_TO_ALL && (a->axis != b->axis || a->concat_axis != b->concat_axis))
    return false;
  if (a->kind == LT_COLL_PERMUTE && memcmp(a->from, b->from, sizeof a->from) != 0) return false;
  return memcmp(a->in_shape, b->in_shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* Breaks w (under its lock) with a message; every waiter wakes up. */
static void breakdown(lt_world *w, int status, const char *msg) {
  if (!w->broken) {
    w->broken = status;
    snprintf(w->broken_msg, sizeof w->broken_msg, "%s", msg);
  }
  pthread_cond_broadcast(&w->cond);
}

static int fail_broken(lt_world *w) {
  int st = w->broken;
  char msg[sizeof w->broken_msg];
  memcpy(msg, w->broken_msg, sizeof msg);
  pthread_mutex_unlock(&w->lock);
  return lt__err(st, "%s", msg);
}

/* Under w's lock: breaks w when a rank that has not joined this round is
 * gone (its replica function returned), so the waiters fail now rather than
 * at the timeout. */
static bool fail_if_gone(lt_world *w, int rank, const lt_coll_call *call, uint64_t round) {
  char gone[200] = "", d[160], msg[1024];
  size_t k = 0;
  for (int q = 0; q < w->n && k < sizeof gone - 8; q++)
    if (w->gone[q] && !w->slot[q])
      k += (size_t)snprintf(gone + k, sizeof gone - k, "%s%d", k ? ", " : "", q);
  if (!k) return false;
  describe(call, d, sizeof d);
  snprintf(msg, sizeof msg,
           "collective #%llu (%s): rank %d waits for rank(s) %s, whose replica function returned "
           "without joining it (a replica that failed or skipped a collective); the world is "
           "broken",
           (unsigned long long)round, d, rank, gone);
  w->slot[rank] = NULL;
  w->arrived--;
  breakdown(w, LT_EEXEC, msg);
  return true;
}

static int shm_run(void *state, int rank, lt_coll_call *call) {
  lt_world *w = state;
  pthread_mutex_lock(&w->lock);
  if (w->broken) return fail_broken(w);
  while (w->open && !w->broken) /* defensive: the last round is still leaving */
    pthread_cond_wait(&w->cond, &w->lock);
  if (w->broken) return fail_broken(w);
  uint64_t round = w->round;
  w->slot[rank] = call;
  if (++w->arrived == w->n) {
    for (int k = 0; k < w->n; k++) {
      if (same_call(w->slot[k], call)) continue;
      char a[160], b[160], msg[1024];
      describe(w->slot[k], a, sizeof a);
      describe(call, b, sizeof b);
      snprintf(msg, sizeof msg,
               "collective #%llu: the replicas disagree: rank %d runs %s (its #%llu, graph "
               "%016llx), rank %d runs %s (its #%llu, graph %016llx); every replica must trace "
               "the same collectives, in the same graphs, in the same order",
               (unsigned long long)round, k, a, (unsigned long long)w->slot[k]->seq,
               (unsigned long long)w->slot[k]->graph, rank, b, (unsigned long long)call->seq,
               (unsigned long long)call->graph);
      breakdown(w, LT_EEXEC, msg);
      return fail_broken(w);
    }
    w->open = true;
    pthread_cond_broadcast(&w->cond);
  } else {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    int64_t ns = deadline.tv_nsec + (w->timeout_ms % 1000) * 1000000;
    deadline.tv_sec += (time_t)(w->timeout_ms / 1000 + ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
    while (!w->open && !w->broken) {
      if (fail_if_gone(w, rank, call, round)) return fail_broken(w);
      if (pthread_cond_timedwait(&w->cond, &w->lock, &deadline) != 0 && !w->open && !w->broken) {
        char missing[200] = "", d[160], msg[1024];
        size_t k = 0;
        for (int q = 0; q < w->n && k < sizeof missing - 8; q++)
          if (!w->slot[q])
            k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%d", k ? ", " : "", q);
        describe(call, d, sizeof d);
        snprintf(msg, sizeof msg,
                 "collective #%llu (%s): rank %d waited %lld ms for the other replicas; rank(s) "
                 "%s never joined it (a replica that stopped, failed or skipped a collective); "
                 "the world is broken",
                 (unsigned long long)round, d, rank, (long long)w->timeout_ms, missing);
        w->slot[rank] = NULL;
        w->arrived--;
        breakdown(w, LT_EEXEC, msg);
        return fail_broken(w);
      }
    }
    if (!w->open) {
      w->slot[rank] = NULL;
      w->arrived--;
      return fail_broken(w);
    }
  }
  pthread_mutex_unlock(&w->lock);

  /* a replica group computes among its own ranks, as a world of its own */
  int base, grank, gn = lt__coll_group(rank, w->n, call->gsize, call->gstride, &base, &grank);
  lt_coll_call *group[LT_MAX_DEVICES];
  int step = call->gsize ? call->gstride : 1;
  for (int j = 0; j < gn; j++) group[j] = w->slot[base + j * step];
  compute(group, gn, grank);

  pthread_mutex_lock(&w->lock);
  if (++w->done == w->n) {
    w->arrived = w->done = 0;
    w->open = false;
    memset(w->slot, 0, sizeof w->slot);
    w->round++;
    pthread_cond_broadcast(&w->cond);
  } else {
    while (w->round == round) pthread_cond_wait(&w->cond, &w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return LT_OK;
}

static const lt_transport kShm = {"shared-memory", shm_run, true};

/* ---- worlds ---- */

int64_t lt__coll_env_timeout_ms(const char *fn) {
  const char *s = getenv("LT_COLLECTIVE_TIMEOUT_MS");
  if (!s || !*s) return LT_COLL_DEFAULT_TIMEOUT_MS;
  /* whole milliseconds only: "2s" is not 2 ms, nor "abc" the default */
  char *end = NULL;
  errno = 0;
  long long v = s[0] >= '0' && s[0] <= '9' ? strtoll(s, &end, 10) : -1;
  if (v <= 0 || !end || *end || errno || v > LT_COLL_MAX_TIMEOUT_MS) {
    lt__err(LT_EINVAL,
            "%s: LT_COLLECTIVE_TIMEOUT_MS=\"%s\" is not a whole number of milliseconds in "
            "1..%lld (for 2 s write 2000)",
            fn, s, (long long)LT_COLL_MAX_TIMEOUT_MS);
    return -1;
  }
  return (int64_t)v;
}

int lt_world_local(int n, lt_world **out) {
  if (!out) return lt__err(LT_EINVAL, "lt_world_local: out is NULL");
  *out = NULL;
  if (n < 1 || n > LT_MAX_DEVICES)
    return lt__err(LT_EINVAL, "lt_world_local: %d replicas; a world has 1..%d", n, LT_MAX_DEVICES);
  for (int r = 0; r < n; r++) /* the executor's state of every device, up front */
    if (!lt__exec_dev("lt_world_local", lt_cpu(r))) return LT_EDEVICE;
  int64_t timeout_ms = lt__coll_env_timeout_ms("lt_world_local");
  if (timeout_ms < 0) return LT_EINVAL;
  lt_world *w = lt__calloc(sizeof *w);
  if (!w) return lt__err(LT_ENOMEM, "lt_world_local: out of memory");
  w->n = n;
  w->self = -1;
  w->timeout_ms = timeout_ms;
  pthread_mutex_init(&w->lock, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &attr);
  pthread_condattr_destroy(&attr);
  for (int r = 0; r < n; r++) {
    if (lt__coll_bind(r, &kShm, w, r, n) != LT_OK) {
      char why[256]; /* the message is rewritten below: copy it out first */
      snprintf(why, sizeof why, "%s", lt_last_error());
      while (r-- > 0) lt__coll_unbind(r);
      pthread_cond_destroy(&w->cond);
      pthread_mutex_destroy(&w->lock);
      lt__free(w, sizeof *w);
      return lt__err(LT_EINVAL, "lt_world_local: %s", why);
    }
  }
  *out = w;
  return LT_OK;
}

int lt_world_size(const lt_world *w) { return w ? w->n : 0; }

lt_device lt_world_device(const lt_world *w, int rank) {
  if (!w || rank < 0 || rank >= w->n) return (lt_device){LT_DEVICE_CPU, -1};
  if (w->mpi) return rank == w->self ? lt_cpu(0) : (lt_device){LT_DEVICE_CPU, -1};
  return lt_cpu(rank);
}

int lt_world_rank(const lt_world *w) {
  if (!w) return -1;
  return w->mpi ? w->self : 0;
}

int lt_world_rank_of(lt_device dev) {
  lt_coll_binding b;
  if (dev.type != LT_DEVICE_CPU || !lt__coll_binding(dev.index, &b)) return -1;
  return b.rank;
}

int lt_world_set_timeout_ms(lt_world *w, int64_t ms) {
  if (!w) return lt__err(LT_EINVAL, "lt_world_set_timeout_ms: world is NULL");
  if (ms <= 0 || ms > LT_COLL_MAX_TIMEOUT_MS)
    return lt__err(LT_EINVAL, "lt_world_set_timeout_ms: %lld ms; must be in 1..%lld", (long long)ms,
                   (long long)LT_COLL_MAX_TIMEOUT_MS);
  if (w->mpi) return lt__mpi_set_timeout_ms(w, ms);
  pthread_mutex_lock(&w->lock);
  w->timeout_ms = ms;
  pthread_mutex_unlock(&w->lock);
  return LT_OK;
}

void lt_world_free(lt_world *w) {
  if (!w) return;
  if (w->mpi) {
    lt__mpi_free(w);
    return;
  }
  for (int r = 0; r < w->n; r++) {
    lt_exec_dev *ctx = lt__exec_dev("lt_world_free", lt_cpu(r));
    if (ctx && lt__device_acquire(ctx, false) == LT_OK) lt__device_release(ctx);
    lt__coll_unbind(r);
  }
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  lt__free(w, sizeof *w);
}

/* ---- replica threads ---- */

typedef struct replica {
  lt_world *w;
  lt_replica_fn fn;
  void *ctx;
  int rank, status;
  int64_t failed_at; /* lt__now_ns of its failure */
  char msg[512];
  pthread_t thread;
  bool started;
} replica;

static void *replica_main(void *arg) {
  replica *r = arg;
  r->status = r->fn(r->rank, lt_cpu(r->rank), r->ctx);
  if (r->status != LT_OK) {
    r->failed_at = lt__now_ns();
    snprintf(r->msg, sizeof r->msg, "%s", lt_last_error());
  }
  /* Its queued steps may still run collectives: it is gone once they are done
   * (waited for without taking their errors, which stay for the next sync). */
  lt_exec_dev *ctx = lt__exec_dev("lt_world_run", lt_cpu(r->rank));
  if (ctx && lt__device_acquire(ctx, false) == LT_OK) lt__device_release(ctx);
  pthread_mutex_lock(&r->w->lock);
  r->w->gone[r->rank] = true;
  pthread_cond_broadcast(&r->w->cond);
  pthread_mutex_unlock(&r->w->lock);
  return NULL;
}

int lt_world_run(lt_world *w, lt_replica_fn fn, void *ctx) {
  if (!w || !fn) return lt__err(LT_EINVAL, "lt_world_run: NULL world or function");
  if (w->mpi) { /* this process's replica only, on the calling thread */
    int st = fn(w->self, lt_cpu(0), ctx);
    if (st == LT_OK) return LT_OK;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", lt_last_error());
    return lt__err(st, "rank %d: %s", w->self, msg);
  }
  replica *rs = lt__calloc((size_t)w->n * sizeof *rs);
  if (!rs) return lt__err(LT_ENOMEM, "lt_world_run: out of memory");
  int rc = LT_OK;
  pthread_mutex_lock(&w->lock);
  memset(w->gone, 0, sizeof w->gone);
  pthread_mutex_unlock(&w->lock);
  for (int r = 0; r < w->n; r++) {
    rs[r] = (replica){.w = w, .fn = fn, .ctx = ctx, .rank = r};
    if (pthread_create(&rs[r].thread, NULL, replica_main, &rs[r]) != 0) {
      rs[r].status = LT_ENOMEM;
      rs[r].failed_at = lt__now_ns();
      snprintf(rs[r].msg, sizeof rs[r].msg, "could not start its thread");
      /* the others would wait for it in their collectives */
      pthread_mutex_lock(&w->lock);
      w->gone[r] = true;
      pthread_cond_broadcast(&w->cond);
      pthread_mutex_unlock(&w->lock);
      continue;
    }
    rs[r].started = true;
  }
  int first = -1;
  for (int r = 0; r < w->n; r++) {
    if (rs[r].started) pthread_join(rs[r].thread, NULL);
    if (rs[r].status != LT_OK && (first < 0 || rs[r].failed_at < rs[first].failed_at)) first = r;
  }
  if (first >= 0) rc = lt__err(rs[first].status, "rank %d: %s", first, rs[first].msg);
  lt__free(rs, (size_t)w->n * sizeof *rs);
  return rc;
}
