/* The MPI world (lazytensor_dist.h: lt_world_mpi): one replica per process
 * on CPU:0, its collectives through MPI.
 *
 * Each call runs in two stages, both non-blocking MPI collectives polled with
 * MPI_Test against the world's deadline (MPI's own collectives never time
 * out, and a dead peer on the shared-memory path gives no error at all):
 *   check  an all-gather of every rank's description of its call (kind,
 *          reduction, dtype, shape, axis, root, sequence number and the
 *          fingerprint of the graph around it), so ranks that disagree fail, all of
 *          them at that call, with both descriptions instead of mixing
 *          values or hanging in mismatched MPI calls
 *   data   the collective itself, among the ranks of the call's replica
 *          group when it names one (on the group's communicator, split
 *          from the world's once: group_comm), on buffers this transport
 *          owns: the caller's input is copied in (packed chunk-major for a
 *          gather or scatter along axis != 0) and the result copied out;
 *          large float sums and means run as a ring of exchanges instead
 *          (below)
 * Owning the buffers matters on failure: a request that timed out cannot be
 * cancelled, and MPI may still write into it if the peer comes back, so
 * the buffers of a failed call are abandoned (leaked), never the executor's.
 * A failure breaks the world for good, as in-process.
 *
 * Waiting is apart from liveness (world_mpi_live.h): a wait fails at once
 * when a peer that has not joined the call left the world or went silent
 * (heartbeats), and otherwise lasts up to the world's deadline, long by
 * default, since a live peer may be busy for minutes.
 *
 * Threads: the executor's worker thread (or a reading caller) issues the
 * calls, one at a time per device; a mutex serialises them anyway, so
 * MPI_THREAD_SERIALIZED is enough. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/lt_alloc.h"
#include "../core/lt_dtype.h"
#include "../core/lt_error.h"
#include "exec_internal.h"
#include "lt_metrics.h"
#include "world_internal.h"

#ifdef LT_HAVE_MPI
#include <mpi.h>

#include "world_mpi_lib.h"
#include "world_mpi_live.h"

/* A call's description: kind, redop, dtype, ndim, axis, root, seq, graph,
 * group size and stride, then the shape, then all_to_all's concat axis and a
 * permute's sources (one byte per rank, 8 to a word). */
enum {
  DESC_SHAPE = 10,
  DESC_EXTRA = DESC_SHAPE + LT_MAX_DIMS,
  DESC_FROM = DESC_EXTRA + 1,
  DESC_LEN = DESC_FROM + 8,
  MAX_GROUPS = 8
};

/* A replica group's communicator (MPI_Comm_split of the world's), made the
 * first time a call names the group, kept until the world is freed. */
typedef struct mpi_group {
  int gsize, gstride;
  MPI_Comm comm;
} mpi_group;

typedef struct mpi_state {
  MPI_Comm comm;
  int size;
  MPI_Op fmax, fmin; /* NaN-propagating max and min of floats (torch.maximum) */
  bool we_init;      /* lt_world_mpi initialised MPI: lt_world_free finalises it */
  pthread_mutex_t lock;
  int64_t timeout_ms;
  int broken;
  char broken_msg[1024];
  void *send, *recv; /* staging buffers, grown as needed */
  size_t send_cap, recv_cap;
  bool abandoned;    /* a failed call left requests with MPI */
  uint64_t posted;   /* collectives whose check this rank has posted */
  lt_mpi_live *live; /* the peers' heartbeats (NULL: none) */
  mpi_group groups[MAX_GROUPS];
  int ngroups;
  /* The communicator of the call's data stage (under lock): the world's,
   * or its replica group's; the ring exchanges use it, their rank and size
   * being the group's, and name this rank by its world rank, me. */
  MPI_Comm dcomm;
  int me;
} mpi_state;

/* ---- NaN-propagating max and min (MPI_MAX ignores NaN order) ---- */

#define MINMAX_FN(name, T, CMP)                                         \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) { \
    (void)dt;                                                           \
    const T *a = in;                                                    \
    T *b = inout;                                                       \
    for (int i = 0; i < *len; i++) {                                    \
      if (b[i] != b[i]) continue;                                       \
      if (a[i] != a[i] || a[i] CMP b[i]) b[i] = a[i];                   \
    }                                                                   \
  }
MINMAX_FN(max_f32, float, >)
MINMAX_FN(min_f32, float, <)
MINMAX_FN(max_f64, double, >)
MINMAX_FN(min_f64, double, <)

/* One op for both float dtypes: dispatch on the datatype. */
static void fmax_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  if (*dt == lt__mpi.t_float)
    max_f32(in, inout, len, dt);
  else
    max_f64(in, inout, len, dt);
}
static void fmin_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
  if (*dt == lt__mpi.t_float)
    min_f32(in, inout, len, dt);
  else
    min_f64(in, inout, len, dt);
}

/* A case per dtype and no default: a new dtype without its MPI type here
 * fails the build (-Wswitch, part of -Wall). The float reductions below
 * (fmax_op, fmin_op, RING_ADD) have loops for f32 and f64 only. */
static MPI_Datatype mpi_type(int dt) {
  switch ((lt_dtype)dt) {
  case LT_F32:
    return lt__mpi.t_float;
  case LT_F64:
    return lt__mpi.t_double;
  case LT_I32:
    return lt__mpi.t_int32;
  case LT_I64:
    return lt__mpi.t_int64;
  case LT_I8:
    return lt__mpi.t_int8;
  case LT_BOOL:
  case LT_U8:
  case LT_BF16:       /* moved as bytes or refused (mpi_run_locked) */
  case LT_NUM_DTYPES: /* not a dtype: its size is 0, nothing moves */
    break;
  }
  return lt__mpi.t_uint8;
}

static int64_t numel(const int64_t *shape, int ndim) {
  int64_t m = 1;
  for (int d = 0; d < ndim; d++) m *= shape[d];
  return m;
}

/* "all_reduce(sum) f32[2, 3]" */
static void describe_desc(const int64_t *d, char *buf, size_t n) {
  char shape[96];
  int64_t sh[LT_MAX_DIMS];
  int nd = (int)d[3] < 0 || (int)d[3] > LT_MAX_DIMS ? 0 : (int)d[3];
  for (int k = 0; k < nd; k++) sh[k] = d[DESC_SHAPE + k];
  lt__shape_str(sh, nd, shape, sizeof shape);
  char extra[40] = "";
  if (d[0] == LT_COLL_ALL_REDUCE || d[0] == LT_COLL_REDUCE_SCATTER)
    snprintf(extra, sizeof extra, "(%s)", lt__coll_redop_name((int)d[1]));
  char where[400] = "";
  if (d[0] == LT_COLL_ALL_GATHER || d[0] == LT_COLL_REDUCE_SCATTER)
    snprintf(where, sizeof where, " axis %d", (int)d[4]);
  else if (d[0] == LT_COLL_BROADCAST)
    snprintf(where, sizeof where, " root %d", (int)d[5]);
  else if (d[0] == LT_COLL_ALL_TO_ALL)
    snprintf(where, sizeof where, " split %d concat %d", (int)d[4], (int)d[DESC_EXTRA]);
  else if (d[0] == LT_COLL_PERMUTE) {
    int8_t from[LT_MAX_DEVICES];
    memcpy(from, d + DESC_FROM, sizeof from);
    lt__coll_pairs_str(from, where, sizeof where);
  }
  char group[48] = "";
  if (d[8]) snprintf(group, sizeof group, " in groups of %d (stride %d)", (int)d[8], (int)d[9]);
  snprintf(buf, n, "%s%s%s%s %s%s", lt__coll_kind_name((int)d[0]), extra, where, group,
           lt_dtype_name((lt_dtype)d[2]), shape);
}

/* "all_reduce(sum) f32[2, 3] #3 graph 1a2b3c4d5e6f7a8b" */
static void describe_full(const int64_t *d, char *buf, size_t n) {
  char what[160];
  describe_desc(d, what, sizeof what);
  snprintf(buf, n, "%s #%lld graph %016llx", what, (long long)d[6], (unsigned long long)d[7]);
}

static void make_desc(const lt_coll_call *c, int64_t *d) {
  memset(d, 0, DESC_LEN * sizeof *d);
  d[0] = c->kind;
  d[1] = (c->kind == LT_COLL_ALL_REDUCE || c->kind == LT_COLL_REDUCE_SCATTER) ? c->redop : 0;
  d[2] = c->dtype;
  d[3] = c->ndim;
  d[4] = (c->kind == LT_COLL_ALL_GATHER || c->kind == LT_COLL_REDUCE_SCATTER ||
          c->kind == LT_COLL_ALL_TO_ALL)
             ? c->axis
             : 0;
  d[5] = c->kind == LT_COLL_BROADCAST ? c->root : 0;
  d[6] = (int64_t)c->seq;
  d[7] = (int64_t)c->graph;
  d[8] = c->gsize;
  d[9] = c->gsize ? c->gstride : 0;
  for (int k = 0; k < c->ndim; k++) d[DESC_SHAPE + k] = c->in_shape[k];
  if (c->kind == LT_COLL_ALL_TO_ALL) d[DESC_EXTRA] = c->concat_axis;
  if (c->kind == LT_COLL_PERMUTE) memcpy(d + DESC_FROM, c->from, sizeof c->from);
}

/* Under s->lock: breaks the world with msg and returns its status. */
static int breakdown(mpi_state *s, const char *msg) {
  if (!s->broken) {
    s->broken = LT_EEXEC;
    snprintf(s->broken_msg, sizeof s->broken_msg, "%s", msg);
  }
  return lt__err(s->broken, "%s", s->broken_msg);
}

/* Polls req until done, an MPI error or the deadline. On failure the staging
 * buffers are abandoned (the request may still use them). */
static int wait_reqs(mpi_state *s, MPI_Request *req, int nreq, int64_t deadline_ns, int rank,
                     uint64_t seq, const char *what, const char *stage) {
  char msg[1024], why[256];
  int64_t t0 = lt__now_ns();
  uint64_t idx = s->posted - 1; /* this call, among the ones this rank posted */
  for (long spins = 0;; spins++) {
    int flag = 0;
    int rc = lt__mpi.Testall(nreq, req, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      char es[MPI_MAX_ERROR_STRING];
      int len = 0;
      lt__mpi.Error_string(rc, es, &len);
      /* a peer's death may reach MPI first: give the heartbeats the time
       * to say which rank it was */
      int64_t until = lt__now_ns() + (int64_t)(LT_LIVE_SILENCE_MS + 1000) * 1000000;
      bool named = false;
      while (s->live && !(named = lt__live_lost(s->live, idx, why, sizeof why)) &&
             lt__now_ns() < until) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
      }
      if (!named) snprintf(why, sizeof why, "a peer process that died?");
      snprintf(msg, sizeof msg,
               "collective #%llu (%s): rank %d: MPI failed during the %s: %s (%s); the world is "
               "broken",
               (unsigned long long)seq, what, rank, stage, es, why);
      break;
    }
    if (flag) return LT_OK;
    if ((spins & 63) == 0 && lt__live_lost(s->live, idx, why, sizeof why)) {
      snprintf(msg, sizeof msg,
               "collective #%llu (%s): rank %d waits during the %s, but %s; the world is broken",
               (unsigned long long)seq, what, rank, stage, why);
      break;
    }
    int64_t now = lt__now_ns();
    if (now > deadline_ns) {
      snprintf(msg, sizeof msg,
               "collective #%llu (%s): rank %d waited %lld ms (the world's deadline) for the "
               "other processes during the %s; %s; the world is broken",
               (unsigned long long)seq, what, rank, (long long)s->timeout_ms, stage,
               s->live ? "they are alive (heartbeats come) but did not join it: a peer busy for "
                         "longer, or running other collectives"
                       : "a peer stopped, died, is busy or skipped a collective");
      break;
    }
    /* Latency first, then leave the core to the others: the peer may be
     * computing on this very core (oversubscribed hosts, --oversubscribe),
     * and a wait past 100 ms is for a busy peer: poll gently. */
    if (now - t0 > 100000000) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    } else if (spins > 2000) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    } else if (spins > 100) {
      sched_yield();
    }
  }
  s->send = s->recv = NULL; /* abandoned to MPI */
  s->send_cap = s->recv_cap = 0;
  s->abandoned = true;
  return breakdown(s, msg);
}

static bool grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return true;
  void *q = realloc(*p, need);
  if (!q) return false;
  *p = q;
  *cap = need;
  return true;
}

/* ---- ring all-reduce of floats (sum, mean) ----
 * MPI's non-blocking all-reduce over shared memory is several times slower
 * than an exchange of the same bytes (its schedule moves the whole buffer
 * each round), and a data-parallel step spends its communication here. A
 * ring moves 2(p-1)/p of the buffer per rank in 2(p-1) point-to-point
 * exchanges (the cost model of docs/SCALE_OUT.md): p-1 steps of
 * reduce-scatter, each rank adding the chunk it receives into its output,
 * then p-1 steps of all-gather passing the finished chunks on. Sends read
 * the caller's input and output and the gather steps receive straight into
 * the output: no copy in or out. Only the reduce steps receive into a
 * chunk-sized staging buffer, which the add reads. A call that fails with a
 * request pending marks the execution abandoned (lt__coll_abandon): the
 * backend then leaks its memory rather than reuse it, so that MPI can never
 * touch memory the executor has handed to something else. Each chunk is summed
 * once, so every rank ends with the same bits; mean divides as the last sum
 * is made. */
enum { RING_MIN_BYTES = 1 << 16 };

typedef struct ring_chunks {
  int64_t base, rem;
} ring_chunks;
static int64_t ring_off(ring_chunks k, int c) { return c * k.base + (c < k.rem ? c : k.rem); }
static int64_t ring_len(ring_chunks k, int c) { return k.base + (c < k.rem ? 1 : 0); }

/* out = (a + b) / div (div 0: no division). A division by a power of two
 * is a multiplication by its exact inverse, the same value with no divide
 * instruction (those would bound this loop: p = 2 is the common case). */
#define RING_ADD(T)                                                              \
  static void ring_add_##T(T *out, const T *a, const T *b, int64_t n, int div) { \
    if (div == 0) {                                                              \
      for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];                      \
    } else if ((div & (div - 1)) == 0) {                                         \
      T inv = (T)(1.0 / div);                                                    \
      for (int64_t i = 0; i < n; i++) out[i] = (a[i] + b[i]) * inv;              \
    } else {                                                                     \
      for (int64_t i = 0; i < n; i++) out[i] = (T)((double)(a[i] + b[i]) / div); \
    }                                                                            \
  }
RING_ADD(float)
RING_ADD(double)

static int ring_all_reduce(mpi_state *s, int rank, int p, lt_coll_call *c, int64_t m,
                           int64_t deadline, const char *what) {
  bool f64 = c->dtype == LT_F64;
  size_t esz = lt_dtype_size((lt_dtype)c->dtype);
  ring_chunks k = {m / p, m % p};
  if (!grow(&s->recv, &s->recv_cap, (size_t)(k.base + 1) * esz))
    return lt__err(LT_ENOMEM, "collective %s: out of memory", what);
  MPI_Datatype ty = f64 ? lt__mpi.t_double : lt__mpi.t_float;
  int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  int own = (rank + 1) % p; /* the chunk this rank finishes */
  const char *in = c->in;
  char *out = c->out;
  for (int step = 0; step < 2 * (p - 1); step++) {
    bool gather = step >= p - 1;
    int j = gather ? step - (p - 1) : step;
    int from = gather ? own : rank;
    int sc = ((from - j) % p + p) % p, rc = ((from - j - 1) % p + p) % p;
    /* what goes out: the input's chunk first, then chunks summed here */
    const char *src = (step == 0 ? in : out) + ring_off(k, sc) * esz;
    MPI_Request q[2];
    void *dst = gather ? (void *)(out + ring_off(k, rc) * esz) : s->recv;
    int r1 = lt__mpi.Irecv(dst, (int)ring_len(k, rc), ty, prev, step, s->dcomm, &q[0]);
    int r2 = r1 == MPI_SUCCESS
                 ? lt__mpi.Isend(src, (int)ring_len(k, sc), ty, next, step, s->dcomm, &q[1])
                 : r1;
    int st = r2 == MPI_SUCCESS
                 ? wait_reqs(s, q, 2, deadline, s->me, c->seq, what, "ring transfer")
                 : breakdown(s, "an MPI transfer failed to start; the world is broken");
    if (st != LT_OK) {
      /* MPI may still read the caller's input or write its output: the
       * backend must never free or reuse that memory */
      lt__coll_abandon();
      return st;
    }
    if (gather) continue;
    int64_t off = ring_off(k, rc), len = ring_len(k, rc);
    /* the last reduce step finishes chunk `own` (mean divides it) */
    int div = step == p - 2 ? (c->redop == LT_COLL_MEAN ? p : 1) : 0;
    if (f64)
      ring_add_double((double *)out + off, (const double *)in + off, s->recv, len, div);
    else
      ring_add_float((float *)out + off, (const float *)in + off, s->recv, len, div);
  }
  return LT_OK;
}

/* One ring exchange: count elements of src to the next rank, as many from
 * the previous one into dst; on failure the execution is abandoned, as in
 * ring_all_reduce. */
static int ring_exchange(mpi_state *s, int rank, int p, const lt_coll_call *c, MPI_Datatype ty,
                         const void *src, void *dst, int64_t count, int step, int64_t deadline,
                         const char *what) {
  int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  MPI_Request q[2];
  int r1 = lt__mpi.Irecv(dst, (int)count, ty, prev, step, s->dcomm, &q[0]);
  int r2 = r1 == MPI_SUCCESS
               ? lt__mpi.Isend((void *)src, (int)count, ty, next, step, s->dcomm, &q[1])
               : r1;
  int st = r2 == MPI_SUCCESS ? wait_reqs(s, q, 2, deadline, s->me, c->seq, what, "ring transfer")
                             : breakdown(s, "an MPI transfer failed to start; the world is broken");
  if (st != LT_OK) lt__coll_abandon();
  return st;
}

/* Reduce-scatter (sum or mean of floats) whose chunks are contiguous (no
 * axis before the split one has more than 1 element): the reduce half of
 * ring_all_reduce, numbered so that rank r finishes chunk r, p - 1
 * exchanges of one chunk each way instead of MPI_Ireduce_scatter_block's
 * schedule. The partial sums live in the send buffer; the last add writes
 * the output (mean divides it there). blk: elements per chunk. */
static int ring_reduce_scatter(mpi_state *s, int rank, int p, lt_coll_call *c, int64_t blk,
                               int64_t deadline, const char *what) {
  bool f64 = c->dtype == LT_F64;
  size_t esz = lt_dtype_size((lt_dtype)c->dtype);
  if (!grow(&s->recv, &s->recv_cap, (size_t)blk * esz + 1) ||
      !grow(&s->send, &s->send_cap, (size_t)(p * blk) * esz + 1))
    return lt__err(LT_ENOMEM, "collective %s: out of memory", what);
  MPI_Datatype ty = f64 ? lt__mpi.t_double : lt__mpi.t_float;
  const char *in = c->in;
  char *acc = s->send;
  for (int j = 0; j < p - 1; j++) {
    /* send chunk rank - 1 - j (the input's at first, then the one summed
     * at the last step), receive chunk rank - 2 - j */
    int sc = ((rank - 1 - j) % p + p) % p, rc = ((rank - 2 - j) % p + p) % p;
    const char *src = (j == 0 ? in : acc) + (size_t)(sc * blk) * esz;
    int st = ring_exchange(s, rank, p, c, ty, src, s->recv, blk, j, deadline, what);
    if (st != LT_OK) return st;
    bool last = j == p - 2; /* rc is rank: the result */
    int div = last ? (c->redop == LT_COLL_MEAN ? p : 1) : 0;
    void *dst = last ? c->out : (void *)(acc + (size_t)(rc * blk) * esz);
    const char *mine = in + (size_t)(rc * blk) * esz;
    if (f64)
      ring_add_double(dst, (const double *)mine, s->recv, blk, div);
    else
      ring_add_float(dst, (const float *)mine, s->recv, blk, div);
  }
  return LT_OK;
}

/* All-gather whose chunks are contiguous in the output (no axis before the
 * gathered one has more than 1 element): this rank's chunk copied into
 * place, then p - 1 ring exchanges passing the chunks on, each received
 * straight into the output. blk: elements per chunk. */
static int ring_all_gather(mpi_state *s, int rank, int p, lt_coll_call *c, int64_t blk,
                           int64_t deadline, const char *what) {
  size_t esz = lt_dtype_size((lt_dtype)c->dtype);
  MPI_Datatype ty = mpi_type(c->dtype);
  char *out = c->out;
  memcpy(out + (size_t)(rank * blk) * esz, c->in, (size_t)blk * esz);
  for (int j = 0; j < p - 1; j++) {
    int sc = ((rank - j) % p + p) % p, rc = ((rank - j - 1) % p + p) % p;
    int st = ring_exchange(s, rank, p, c, ty, out + (size_t)(sc * blk) * esz,
                           out + (size_t)(rc * blk) * esz, blk, j, deadline, what);
    if (st != LT_OK) return st;
  }
  return LT_OK;
}

/* The communicator of c's replica group (the world's when it names none),
 * this rank's rank in it and its size. A group's communicator is split from
 * the world's the first time a call names it: MPI_Comm_split is a blocking
 * collective of the whole world, made right after the check, which every
 * rank has just passed with the same call, so every rank makes it. */
static int group_comm(mpi_state *s, int rank, const lt_coll_call *c, MPI_Comm *comm, int *grank,
                      int *gn, const char *what) {
  int base;
  *gn = lt__coll_group(rank, s->size, c->gsize, c->gstride, &base, grank);
  *comm = s->comm;
  if (!c->gsize) return LT_OK;
  for (int k = 0; k < s->ngroups; k++)
    if (s->groups[k].gsize == c->gsize && s->groups[k].gstride == c->gstride) {
      *comm = s->groups[k].comm;
      return LT_OK;
    }
  if (s->ngroups == MAX_GROUPS)
    return lt__err(LT_EINVAL, "collective %s: more than %d kinds of replica groups in one world",
                   what, MAX_GROUPS);
  mpi_group *g = &s->groups[s->ngroups];
  if (lt__mpi.Comm_split(s->comm, base, *grank, &g->comm) != MPI_SUCCESS)
    return breakdown(s, "MPI_Comm_split of a replica group failed; the world is broken");
  lt__mpi.Comm_set_errhandler(g->comm, lt__mpi.errors_return);
  g->gsize = c->gsize;
  g->gstride = c->gstride;
  s->ngroups++;
  *comm = g->comm;
  return LT_OK;
}

/* all_to_all and collective_permute: elements only move, so every dtype
 * travels as bytes. all_to_all packs chunk j (along axis) into block j of
 * the send buffer, runs MPI_Ialltoall and unpacks block j of the receive
 * buffer into block j (along concat_axis) of the output. A permute sends
 * this rank's input to its target and receives its source's (point to
 * point); a rank with no source writes zeros. Both on the staging buffers,
 * as the other collectives, so a failure abandons only those. */
enum { PERMUTE_TAG = 1000 }; /* apart from the ring's step tags */

static int mpi_exchange(mpi_state *s, int rank, int size, lt_coll_call *c, int64_t deadline,
                        const char *what) {
  size_t esz = lt_dtype_size((lt_dtype)c->dtype);
  int64_t m = numel(c->in_shape, c->ndim);
  if ((int64_t)((size_t)m * esz) > 0x7fffffff)
    return breakdown(s, "collective larger than 2^31 bytes: not supported over MPI");
  if (!grow(&s->send, &s->send_cap, (size_t)m * esz + 1) ||
      !grow(&s->recv, &s->recv_cap, (size_t)m * esz + 1))
    return lt__err(LT_ENOMEM, "collective %s: out of memory", what);
  MPI_Request req[2];
  int nreq = 0, rc = MPI_SUCCESS;
  if (c->kind == LT_COLL_ALL_TO_ALL) {
    int64_t box[LT_MAX_DIMS];
    memcpy(box, c->in_shape, (size_t)c->ndim * sizeof *box);
    box[c->axis] /= size;
    int64_t blk = m / size; /* elements per block */
    for (int j = 0; j < size; j++) {
      /* block j of send, seen as a box-shaped tensor with its chunk at 0 */
      lt__coll_copy_box((char *)s->send + (size_t)(j * blk) * esz, box, 0, 0, c->in, c->in_shape,
                        c->axis, j * box[c->axis], box, c->ndim, esz);
    }
    int cnt = (int)((size_t)blk * esz);
    rc = lt__mpi.Ialltoall(s->send, cnt, lt__mpi.t_uint8, s->recv, cnt, lt__mpi.t_uint8, s->comm,
                           &req[nreq]);
    if (rc == MPI_SUCCESS) nreq++;
  } else {
    int src = c->from[rank], dst = -1;
    for (int r = 0; r < size; r++)
      if (c->from[r] == rank) dst = r;
    int cnt = (int)((size_t)m * esz);
    if (src >= 0) {
      rc = lt__mpi.Irecv(s->recv, cnt, lt__mpi.t_uint8, src, PERMUTE_TAG, s->comm, &req[nreq]);
      if (rc == MPI_SUCCESS) nreq++;
    }
    if (dst >= 0 && rc == MPI_SUCCESS) {
      if (cnt) memcpy(s->send, c->in, (size_t)cnt);
      rc = lt__mpi.Isend(s->send, cnt, lt__mpi.t_uint8, dst, PERMUTE_TAG, s->comm, &req[nreq]);
      if (rc == MPI_SUCCESS) nreq++;
    }
  }
  if (rc != MPI_SUCCESS) {
    /* a started receive may still land in the staging buffer: abandon it */
    if (nreq) {
      s->send = s->recv = NULL;
      s->send_cap = s->recv_cap = 0;
      s->abandoned = true;
    }
    return breakdown(s, "an MPI transfer failed to start; the world is broken");
  }
  if (nreq && wait_reqs(s, req, nreq, deadline, rank, c->seq, what, "transfer") != LT_OK)
    return s->broken;
  if (c->kind == LT_COLL_ALL_TO_ALL) {
    int64_t box[LT_MAX_DIMS];
    memcpy(box, c->in_shape, (size_t)c->ndim * sizeof *box);
    box[c->axis] /= size;
    int64_t blk = m / size;
    for (int j = 0; j < size; j++)
      lt__coll_copy_box(c->out, c->out_shape, c->concat_axis, j * box[c->concat_axis],
                        (const char *)s->recv + (size_t)(j * blk) * esz, box, 0, 0, box, c->ndim,
                        esz);
  } else if (m) {
    if (c->from[rank] >= 0)
      memcpy(c->out, s->recv, (size_t)m * esz);
    else
      memset(c->out, 0, (size_t)m * esz);
  }
  return LT_OK;
}

static int mpi_run_locked(mpi_state *s, int rank, int size, lt_coll_call *c) {
  if (s->broken) return lt__err(s->broken, "%s", s->broken_msg);
  char what[160];
  int64_t mine[DESC_LEN];
  make_desc(c, mine);
  describe_desc(mine, what, sizeof what);
  int64_t deadline = lt__now_ns() + s->timeout_ms * 1000000;

  /* check: every rank runs the same collective */
  size_t dbytes = (size_t)size * DESC_LEN * sizeof(int64_t);
  if (!grow(&s->recv, &s->recv_cap, dbytes) || !grow(&s->send, &s->send_cap, sizeof mine))
    return lt__err(LT_ENOMEM, "collective %s: out of memory", what);
  memcpy(s->send, mine, sizeof mine);
  MPI_Request req;
  int rc = lt__mpi.Iallgather(s->send, DESC_LEN, lt__mpi.t_int64, s->recv, DESC_LEN,
                              lt__mpi.t_int64, s->comm, &req);
  if (rc != MPI_SUCCESS) return breakdown(s, "MPI_Iallgather failed to start; the world is broken");
  s->posted++;
  if (wait_reqs(s, &req, 1, deadline, rank, c->seq, what, "check of the ranks' calls") != LT_OK)
    return s->broken;
  const int64_t *all = s->recv;
  for (int k = 0; k < size; k++) {
    const int64_t *theirs = all + (size_t)k * DESC_LEN;
    bool fp_known = theirs[7] && mine[7]; /* 0: a graph fingerprint not known */
    if (memcmp(theirs, mine, 7 * sizeof *mine) == 0 && (!fp_known || theirs[7] == mine[7]) &&
        memcmp(theirs + 8, mine + 8, (DESC_LEN - 8) * sizeof *mine) == 0)
      continue;
    /* every rank sees the same descriptions: all fail here, naming both sides */
    char a[200], b[200], msg[1024];
    int lo = k < rank ? k : rank, hi = k < rank ? rank : k; /* lower rank first */
    describe_full(all + (size_t)lo * DESC_LEN, a, sizeof a);
    describe_full(all + (size_t)hi * DESC_LEN, b, sizeof b);
    snprintf(msg, sizeof msg,
             "collective #%llu: the ranks disagree: rank %d runs %s; rank %d runs %s; every rank "
             "must trace the same collectives, in the same graphs, in the same order",
             (unsigned long long)c->seq, lo, a, hi, b);
    return breakdown(s, msg);
  }

  /* data, among the ranks of this rank's group (the world when none):
   * from here on rank and size are those within it, and comm its
   * communicator (s->dcomm for the rings) */
  MPI_Comm comm;
  int world_rank = rank;
  int st = group_comm(s, world_rank, c, &comm, &rank, &size, what);
  if (st != LT_OK) return st;
  s->dcomm = comm;
  s->me = world_rank;
  if (c->kind == LT_COLL_ALL_TO_ALL || c->kind == LT_COLL_PERMUTE) /* the whole world */
    return mpi_exchange(s, rank, size, c, deadline, what);
  int dt = c->dtype;
  /* MPI has no bf16 type and our reductions no bf16 loops: bf16 reductions
   * are refused (every rank refuses the same call here, so no rank waits for
   * another); gathers and broadcasts only move elements, so bf16 travels as
   * bytes (`per` MPI elements to one of ours) */
  bool bytes_only = dt == LT_BF16;
  if (bytes_only && (c->kind == LT_COLL_ALL_REDUCE || c->kind == LT_COLL_REDUCE_SCATTER))
    return lt__err(LT_EDTYPE,
                   "collective %s: bf16 reductions do not run over MPI; cast to f32 first", what);
  size_t esz = lt_dtype_size((lt_dtype)dt);
  int64_t per = bytes_only ? (int64_t)esz : 1;
  int64_t m = numel(c->in_shape, c->ndim), mo = numel(c->out_shape, c->ndim);
  if (m * per > 0x7fffffff || mo * per > 0x7fffffff)
    return breakdown(s, "collective larger than 2^31 elements: not supported over MPI");
  int64_t outer = 1, inner = 1;
  if (c->kind == LT_COLL_ALL_GATHER || c->kind == LT_COLL_REDUCE_SCATTER) {
    for (int d = 0; d < c->axis; d++) outer *= c->in_shape[d];
    for (int d = c->axis + 1; d < c->ndim; d++) inner *= c->in_shape[d];
  }
  if (c->kind == LT_COLL_ALL_REDUCE && size > 1 && lt__is_float(dt) &&
      (c->redop == LT_COLL_SUM || c->redop == LT_COLL_MEAN) && (size_t)m * esz >= RING_MIN_BYTES)
    return ring_all_reduce(s, rank, size, c, m, deadline, what);
  /* the sharded optimizer's collectives (grids split along axis 0): rings too */
  bool contiguous = outer == 1 && size > 1;
  if (contiguous && c->kind == LT_COLL_REDUCE_SCATTER && lt__is_float(dt) &&
      (c->redop == LT_COLL_SUM || c->redop == LT_COLL_MEAN) && (size_t)m * esz >= RING_MIN_BYTES)
    return ring_reduce_scatter(s, rank, size, c, mo, deadline, what);
  if (contiguous && c->kind == LT_COLL_ALL_GATHER && (size_t)mo * esz >= RING_MIN_BYTES)
    return ring_all_gather(s, rank, size, c, m, deadline, what);
  if (!grow(&s->send, &s->send_cap, (size_t)m * esz + 1) ||
      !grow(&s->recv, &s->recv_cap, (size_t)(c->kind == LT_COLL_BROADCAST ? m : mo) * esz + 1))
    return lt__err(LT_ENOMEM, "collective %s: out of memory", what);
  MPI_Datatype ty = bytes_only ? lt__mpi.t_uint8 : mpi_type(dt);
  bool fl = lt__is_float(dt);
  MPI_Op op = lt__mpi.op_sum;
  if (c->redop == LT_COLL_MAX) op = fl ? s->fmax : lt__mpi.op_max;
  if (c->redop == LT_COLL_MIN) op = fl ? s->fmin : lt__mpi.op_min;
  switch (c->kind) {
  case LT_COLL_ALL_REDUCE:
    memcpy(s->send, c->in, (size_t)m * esz);
    rc = lt__mpi.Iallreduce(s->send, s->recv, (int)m, ty, op, comm, &req);
    break;
  case LT_COLL_ALL_GATHER:
    memcpy(s->send, c->in, (size_t)m * esz);
    rc = lt__mpi.Iallgather(s->send, (int)(m * per), ty, s->recv, (int)(m * per), ty, comm, &req);
    break;
  case LT_COLL_REDUCE_SCATTER: {
    /* chunk-major: block q of the send buffer is chunk q along axis */
    int64_t len = c->in_shape[c->axis], blk = len / size * inner;
    for (int q = 0; q < size; q++)
      for (int64_t o = 0; o < outer; o++)
        memcpy((char *)s->send + (size_t)((q * outer + o) * blk) * esz,
               (const char *)c->in + (size_t)(o * len * inner + q * blk) * esz, (size_t)blk * esz);
    rc = lt__mpi.Ireduce_scatter_block(s->send, s->recv, (int)mo, ty, op, comm, &req);
    break;
  }
  default: /* broadcast */
    if (rank == c->root) memcpy(s->recv, c->in, (size_t)m * esz);
    rc = lt__mpi.Ibcast(s->recv, (int)(m * per), ty, c->root, comm, &req);
    break;
  }
  if (rc != MPI_SUCCESS)
    return breakdown(s, "an MPI collective failed to start; the world is broken");
  if (wait_reqs(s, &req, 1, deadline, world_rank, c->seq, what, "transfer") != LT_OK)
    return s->broken;

  if (c->kind == LT_COLL_ALL_GATHER && outer > 1) {
    /* recv is rank-major [size][outer][chunk]; out is [outer][size][chunk] */
    size_t chunk = (size_t)(c->in_shape[c->axis] * inner) * esz;
    for (int q = 0; q < size; q++)
      for (int64_t o = 0; o < outer; o++)
        memcpy((char *)c->out + ((size_t)o * (size_t)size + (size_t)q) * chunk,
               (const char *)s->recv + ((size_t)q * (size_t)outer + (size_t)o) * chunk, chunk);
  } else {
    size_t bytes = (size_t)(c->kind == LT_COLL_BROADCAST ? m : mo) * esz;
    if (bytes) memcpy(c->out, s->recv, bytes);
  }
  if (c->redop == LT_COLL_MEAN &&
      (c->kind == LT_COLL_ALL_REDUCE || c->kind == LT_COLL_REDUCE_SCATTER)) {
    for (int64_t i = 0; i < mo; i++) {
      if (dt == LT_F32)
        ((float *)c->out)[i] = (float)((double)((float *)c->out)[i] / size);
      else
        ((double *)c->out)[i] /= size;
    }
  }
  return LT_OK;
}

static int mpi_run(void *state, int rank, lt_coll_call *call) {
  mpi_state *s = state;
  pthread_mutex_lock(&s->lock);
  int rc = mpi_run_locked(s, rank, s->size, call);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

static const lt_transport kMpi = {"mpi", mpi_run, false};

int lt_world_mpi(lt_world **out) {
  if (!out) return lt__err(LT_EINVAL, "lt_world_mpi: out is NULL");
  *out = NULL;
  if (!lt__exec_dev("lt_world_mpi", lt_cpu(0))) return LT_EDEVICE;
  if (lt__coll_binding(0, NULL))
    return lt__err(LT_EINVAL, "lt_world_mpi: CPU:0 already belongs to a world");
  char mpi_why[600];
  if (lt__mpi_load(mpi_why, sizeof mpi_why) != 0)
    return lt__err(LT_EINVAL, "lt_world_mpi: %s", mpi_why);
  int inited = 0, provided = 0;
  bool we_init = false;
  lt__mpi.Initialized(&inited);
  if (!inited) {
    if (lt__mpi.Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return lt__err(LT_EINVAL, "lt_world_mpi: MPI_Init_thread failed");
    we_init = true;
  } else {
    int fin = 0;
    lt__mpi.Finalized(&fin);
    if (fin)
      return lt__err(LT_EINVAL, "lt_world_mpi: MPI was finalised already (by lt_world_free?)");
    lt__mpi.Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED)
    return lt__err(LT_EINVAL,
                   "lt_world_mpi: MPI provides thread level %d; the executor's worker thread "
                   "issues the collectives, which needs MPI_THREAD_SERIALIZED or more",
                   provided);
  int64_t timeout_ms = lt__coll_env_timeout_ms("lt_world_mpi");
  if (timeout_ms < 0) return LT_EINVAL;
  mpi_state *s = calloc(1, sizeof *s);
  lt_world *w = lt__calloc(sizeof *w);
  if (!s || !w) {
    free(s);
    lt__free(w, sizeof *w);
    return lt__err(LT_ENOMEM, "lt_world_mpi: out of memory");
  }
  s->we_init = we_init;
  s->timeout_ms = timeout_ms;
  pthread_mutex_init(&s->lock, NULL);
  lt__mpi.Comm_dup(lt__mpi.comm_world, &s->comm);
  lt__mpi.Comm_set_errhandler(s->comm, lt__mpi.errors_return);
  lt__mpi.Op_create(fmax_op, 1, &s->fmax);
  lt__mpi.Op_create(fmin_op, 1, &s->fmin);
  int rank = 0, size = 1;
  lt__mpi.Comm_rank(s->comm, &rank);
  lt__mpi.Comm_size(s->comm, &size);
  s->size = size;
  s->live = lt__live_start(s->comm, rank, size);
  w->n = size;
  w->self = rank;
  w->mpi = s;
  w->timeout_ms = s->timeout_ms;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  if (lt__coll_bind(0, &kMpi, s, rank, size) != LT_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", lt_last_error());
    lt__live_stop(s->live);
    w->mpi = NULL;
    lt__mpi_free(w);
    return lt__err(LT_EINVAL, "lt_world_mpi: %s", why);
  }
  *out = w;
  return LT_OK;
}

int lt__mpi_set_timeout_ms(lt_world *w, int64_t ms) {
  mpi_state *s = w->mpi;
  pthread_mutex_lock(&s->lock);
  s->timeout_ms = w->timeout_ms = ms;
  pthread_mutex_unlock(&s->lock);
  return LT_OK;
}

void lt__mpi_free(lt_world *w) {
  mpi_state *s = w->mpi;
  if (s) {
    lt_exec_dev *ctx = lt__exec_dev("lt_world_free", lt_cpu(0));
    if (ctx && lt__device_acquire(ctx, false) == LT_OK) lt__device_release(ctx);
    lt__coll_unbind(0);
    /* tell the peers at once (a peer waiting for this rank fails now), and
     * wait for them to leave too, as MPI_Finalize would */
    char why[512] = "";
    bool unmatched =
        lt__live_leave(s->live, s->posted, lt__now_ns() + s->timeout_ms * 1000000, why, sizeof why);
    bool gone = lt__live_any_gone(s->live);
    lt__live_stop(s->live);
    /* requests MPI still holds, a peer that is gone, or one that ran calls
     * this rank never joined (its world is broken, so it skips
     * MPI_Finalize): MPI_Finalize, which waits for every rank, could hang */
    if (!s->abandoned && !gone && !unmatched && !(s->broken && !s->live)) {
      lt__mpi.Op_free(&s->fmax);
      lt__mpi.Op_free(&s->fmin);
      for (int k = 0; k < s->ngroups; k++) lt__mpi.Comm_free(&s->groups[k].comm);
      lt__mpi.Comm_free(&s->comm);
      free(s->send);
      free(s->recv);
      if (s->we_init) lt__mpi.Finalize();
    }
    int rank = w->self;
    uint64_t posted = s->posted;
    pthread_mutex_destroy(&s->lock);
    free(s);
    if (unmatched) {
      /* lt_world_free returns nothing: the message goes to stderr and to
       * lt_last_error */
      lt__err(LT_EEXEC,
              "lt_world_free: the world ended with collectives unmatched: rank %d ran %llu, %s",
              rank, (unsigned long long)posted, why);
      fprintf(stderr, "lazytensor: %s\n", lt_last_error());
    }
  }
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  lt__free(w, sizeof *w);
}

#else /* built without MPI */

int lt_world_mpi(lt_world **out) {
  if (out) *out = NULL;
  return lt__err(LT_EINVAL,
                 "lt_world_mpi: this lazytensor was built without MPI (install "
                 "libopenmpi-dev and rebuild: CMake finds it with find_package(MPI))");
}

int lt__mpi_set_timeout_ms(lt_world *w, int64_t ms) {
  (void)w;
  (void)ms;
  return LT_OK;
}

void lt__mpi_free(lt_world *w) { (void)w; }

#endif
