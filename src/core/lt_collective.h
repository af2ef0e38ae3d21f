/* Collectives below the executor: what a collective kernel (ref or cpu) asks
 * for, the transport interface that answers it, and which world each device
 * belongs to.
 *
 * A kernel does not know its device (an executable runs on any cpu device),
 * so the executor names the device whose job it is running on this thread
 * (lt__coll_set_current), and lt__coll_run finds that device's binding: a
 * transport, its state and the device's rank. A transport is a table of
 * functions: the shared-memory one of an in-process world (src/exec/world.c)
 * today; an MPI one (one replica per process) can bind the process's device
 * the same way. Kernels never name a transport.
 *
 * Matching: every replica runs the same executable, so its collectives come
 * in the same program order; a transport pairs the k-th call of each rank
 * (call->seq, counted per device since it joined its world) and checks that
 * the calls agree (kind, reduction, dtype, shapes, axis, root, and the key
 * of the graph around them: call->graph). */
#ifndef LT_COLLECTIVE_H
#define LT_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "lazytensor.h"

typedef enum lt_coll_kind {
  LT_COLL_ALL_REDUCE = 0,
  LT_COLL_ALL_GATHER = 1,
  LT_COLL_REDUCE_SCATTER = 2,
  LT_COLL_BROADCAST = 3,
  LT_COLL_ALL_TO_ALL = 4,
  LT_COLL_PERMUTE = 5,
} lt_coll_kind;

/* Reductions (the values of the public lt_reduce_op). */
typedef enum lt_coll_redop {
  LT_COLL_SUM = 0,
  LT_COLL_MEAN = 1,
  LT_COLL_MAX = 2,
  LT_COLL_MIN = 3,
} lt_coll_redop;

/* One rank's part of one collective. Buffers are contiguous, row-major.
 *   all_reduce      out = reduce over ranks of in (shapes equal)
 *   all_gather      out = concat over ranks of in along axis
 *   reduce_scatter  out = chunk `rank` (along axis) of reduce over ranks of in
 *   broadcast       out = root's in
 *   all_to_all      out = concat along concat_axis over ranks j of chunk
 *                   `rank` (along axis) of rank j's in
 *   permute         out = in of the rank whose target is this rank (its
 *                   source, from[rank]), zeros when none */
typedef struct lt_coll_call {
  uint8_t kind;  /* lt_coll_kind */
  uint8_t redop; /* lt_coll_redop (all_reduce, reduce_scatter) */
  uint8_t dtype; /* lt_dtype of in and out */
  uint8_t ndim;  /* of in (out has the same rank) */
  int axis;      /* all_gather, reduce_scatter */
  int root;      /* broadcast: the root's rank within the group */
  /* The replica group (a row or column of a mesh: lt_mesh): gsize ranks
   * gstride apart, the one holding this rank (lt__coll_group). gsize 0: the
   * whole world. Every rank of the world joins the call (one rendezvous or
   * check for all); only the group's ranks combine their values. */
  int gsize, gstride;
  int64_t in_shape[LT_MAX_DIMS];
  int64_t out_shape[LT_MAX_DIMS];
  const void *in;
  void *out;
  uint64_t seq;   /* filled by lt__coll_run: this device's count of collectives */
  uint64_t graph; /* filled by lt__coll_run: the fingerprint of the graph being
                   * executed (src/exec/coll_fingerprint.h; 0: not known), so
                   * that ranks whose calls agree in kind and shape but come
                   * from different programs still fail at that call */
  /* all_to_all: the axis it concatenates along (it splits along axis) */
  int concat_axis;
  /* permute: the source of each rank (-1: none); ranks past the world's
   * size are -1 */
  int8_t from[LT_MAX_DEVICES];
} lt_coll_call;

/* The group of `rank` for a call with gsize ranks gstride apart (gsize 0:
 * the whole world of n): its first rank (*base) and this rank's place in it
 * (*grank); returns the group's size. Groups tile the world: the world size
 * divides by gsize * gstride (checked where the call is made). */
static inline int lt__coll_group(int rank, int n, int gsize, int gstride, int *base, int *grank) {
  if (gsize <= 0) {
    *base = 0;
    *grank = rank;
    return n;
  }
  *grank = (rank / gstride) % gsize;
  *base = rank - *grank * gstride;
  return gsize;
}

/* Copies a box of box[0..ndim) elements from src (shape sshape) starting at
 * index soff along saxis (0 along the others) to dst (shape dshape) starting
 * at doff along daxis: the chunk moves of all_to_all, rows of box[ndim-1]
 * contiguous elements at a time. */
void lt__coll_copy_box(void *dst, const int64_t *dshape, int daxis, int64_t doff, const void *src,
                       const int64_t *sshape, int saxis, int64_t soff, const int64_t *box, int ndim,
                       size_t esz);

typedef struct lt_transport {
  const char *name;
  /* Runs rank's part of call (blocking until every rank has joined it, or
   * failing after the transport's timeout). LT_OK, or a negative status
   * with the error recorded (lt__err) naming the collective and the rank. */
  int (*run)(void *state, int rank, lt_coll_call *call);
  /* Whether all of the world's ranks live in this process (their devices
   * then share its cores: the cpu backend gives each its share). */
  bool in_process;
} lt_transport;

/* A device's membership of a world. */
typedef struct lt_coll_binding {
  const lt_transport *transport;
  void *state;
  int rank, size;
} lt_coll_binding;

/* Binds device index dev to a world as rank of size (LT_EINVAL when it is
 * bound already), or unbinds it. */
int lt__coll_bind(int dev, const lt_transport *t, void *state, int rank, int size);
void lt__coll_unbind(int dev);
/* Whether dev belongs to a world; *out (may be NULL) gets its binding. */
bool lt__coll_binding(int dev, lt_coll_binding *out);
/* Whether any device belongs to a world. */
bool lt__coll_any_bound(void);

/* A transport that gives up on a call while MPI may still read its input or
 * write its output (a request that timed out cannot be cancelled) calls
 * lt__coll_abandon on the executing thread; the backend running the
 * executable then takes the mark (lt__coll_take_abandoned, which clears it)
 * and leaks, rather than frees or reuses, the memory of that execution:
 * its temporaries, arguments and outputs. The world is broken by then. */
void lt__coll_abandon(void);
bool lt__coll_take_abandoned(void);

/* The collectives device dev has run since it joined its world (tests). */
uint64_t lt__coll_count(int dev);

/* The device whose execution runs on this thread (-1: none), set by the
 * executor around each execution. */
void lt__coll_set_current(int dev);
int lt__coll_current(void);
/* The fingerprint of the graph whose execution runs on this thread (0: not
 * known), set by the executor next to the current device; lt__coll_run
 * carries it. */
void lt__coll_set_graph(uint64_t fp);

/* Runs call for the current device through its world's transport; fn names
 * the op in errors (LT_EEXEC when no device is current or it has no world). */
int lt__coll_run(const char *fn, lt_coll_call *call);

/* " pairs {0->1, 1->0}" (sources of targets 0, 1, ...) into buf (n bytes);
 * the characters written, for messages of permutes. */
int lt__coll_pairs_str(const int8_t *from, char *buf, size_t n);

/* Names of kinds and reductions, for messages. */
const char *lt__coll_kind_name(int kind);
const char *lt__coll_redop_name(int redop);

#endif
