/* lazytensor_world: worlds of replicas and running a function on each of
 * them, the part of lazytensor_dist.h (read it first) that the executor
 * defines. Programs include lazytensor_dist.h; this header stands alone for
 * the library's layers below the ops. */
#ifndef LAZYTENSOR_WORLD_H
#define LAZYTENSOR_WORLD_H

#include "lazytensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- worlds ------------------------------------------------------------------------------ */
typedef struct lt_world lt_world;

/* A world of n replicas (1 <= n <= LT_MAX_DEVICES) in this process: rank r
 * runs on CPU:r. LT_EINVAL when n is out of range or one of the devices
 * belongs to another world already. The cores are shared out: each replica's
 * parallel kernels run on a cpu thread pool of its own of LT_NUM_THREADS / n
 * threads (at least 1). */
LT_API int lt_world_local(int n, lt_world **out);
/* A world of processes over MPI (Open MPI 4.1; the library must have been
 * built with it, else LT_EINVAL saying so). liblazytensor does not link
 * libmpi: the first call loads it (the libmpi found at build time, or the
 * file LT_MPI_LIBRARY names), and fails with LT_EINVAL saying why when it
 * cannot, so programs that use no MPI world need no MPI. One replica per
 * process, rank and size those of MPI_COMM_WORLD, this process's replica
 * on CPU:0 (which must belong to no other world). Run the program under
 * mpirun. Initialises
 * MPI (MPI_THREAD_MULTIPLE requested, at least MPI_THREAD_SERIALIZED
 * required: the executor's worker thread issues the calls) unless the
 * program did; lt_world_free then finalises it. Collectives are MPI's
 * non-blocking ones on a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN,
 * polled until the world's deadline, and a heartbeat thread (which needs
 * MPI_THREAD_MULTIPLE) tells live peers from gone ones: a peer that died,
 * was stopped or left makes this one fail within seconds with LT_EEXEC and
 * a message naming it, instead of hanging. Every rank
 * checks that the others run the same collective before any data moves.
 * lt_world_device(w, r) is CPU:0 for this process's rank and
 * {LT_DEVICE_CPU, -1} for the others'. */
LT_API int lt_world_mpi(lt_world **out);
/* This process's rank: its MPI rank in an MPI world, 0 in an in-process
 * world (whose ranks all live here; rank 0 is the one that prints), -1 for
 * NULL. */
LT_API int lt_world_rank(const lt_world *w);
/* The number of replicas (0 for NULL). */
LT_API int lt_world_size(const lt_world *w);
/* The device of rank r; {LT_DEVICE_CPU, -1} for a bad rank or NULL world. */
LT_API lt_device lt_world_device(const lt_world *w, int rank);
/* The rank of dev in whatever world it belongs to, or -1 when none. */
LT_API int lt_world_rank_of(lt_device dev);
/* How long a replica waits in a collective for live others before failing
 * (1..10^12 ms; the default is LT_COLLECTIVE_TIMEOUT_MS or 600000). */
LT_API int lt_world_set_timeout_ms(lt_world *w, int64_t ms);

/* The work of one replica: trace (and step) on dev. Returns LT_OK or a
 * negative status with lt_last_error() set. */
typedef int (*lt_replica_fn)(int rank, lt_device dev, void *ctx);
/* Runs fn(rank, device, ctx) for every rank at once, each on a thread of its
 * own, and waits for all of them (in an MPI world: this process's rank only,
 * on the calling thread). LT_OK when every replica returned LT_OK;
 * else the status of the replica that failed first, with its message
 * prefixed by "rank <r>: ". A replica whose fn has returned (and whose
 * device has run what it queued) joins no more collectives: the others'
 * collectives that wait for it fail at once instead of at the timeout. */
LT_API int lt_world_run(lt_world *w, lt_replica_fn fn, void *ctx);
/* Waits for the work in flight on the world's devices (without taking their
 * errors: they stay for the next sync), then frees the world; its devices
 * belong to no world again. An MPI world first tells its peers that this
 * rank leaves (their collectives that wait for it fail at once) and waits
 * for them to leave too (or go silent, or the deadline); when the ranks ran
 * different numbers of collectives it says so on stderr and in
 * lt_last_error ("the world ended with collectives unmatched"). It then
 * finalises MPI if lt_world_mpi initialised it, except when a failed
 * collective left requests with MPI or a peer is gone (MPI could hang: the
 * process then exits without it). NULL is accepted. Not while lt_world_run runs.
 */
LT_API void lt_world_free(lt_world *w);

/* ---- meshes ------------------------------------------------------------------------------
 * A mesh arranges a world's ranks in a grid of up to LT_MESH_MAX_DIMS axes,
 * row-major (the last axis varies fastest), each axis named: a world of 4 as
 * {2, 2} named {"data", "model"} puts ranks 0, 1 in data row 0 and 0, 2 in
 * model column 0. The replica group of a rank along mesh axis a is the
 * ranks whose coordinates differ from its own on axis a only: along "model",
 * {0, 1} and {2, 3}; along "data", {0, 2} and {1, 3}. The collectives
 * lt_all_reduce_over and the others (lazytensor_collective.h) run within
 * such groups. A mesh describes ranks only: it holds no device and is
 * freed apart from its world (free it first: it points to the world). */
#define LT_MESH_MAX_DIMS 4
#define LT_MESH_NAME_MAX 31
typedef struct lt_mesh lt_mesh;

/* A mesh of w's ranks with ndim axes (1..LT_MESH_MAX_DIMS) of the given
 * sizes (each >= 1, their product the world's size) and names (distinct,
 * 1..LT_MESH_NAME_MAX characters; names may be NULL: "0", "1", ...).
 * LT_EINVAL, saying which, otherwise. */
LT_API int lt_mesh_new(const lt_world *w, int ndim, const int *shape, const char *const *names,
                       lt_mesh **out);
/* NULL is accepted. */
LT_API void lt_mesh_free(lt_mesh *m);
/* The mesh's world (NULL for NULL). */
LT_API const lt_world *lt_mesh_world(const lt_mesh *m);
/* The number of axes (0 for NULL). */
LT_API int lt_mesh_ndim(const lt_mesh *m);
/* The size of axis a (0 for a bad axis or NULL). */
LT_API int lt_mesh_size(const lt_mesh *m, int axis);
/* The index of the axis named name, or -1 with LT_EINVAL recorded. */
LT_API int lt_mesh_axis(const lt_mesh *m, const char *name);
/* The coordinate of rank along axis (its place in its group along that
 * axis), or -1 for a bad rank, axis or NULL. */
LT_API int lt_mesh_coord(const lt_mesh *m, int rank, int axis);

#ifdef __cplusplus
}
#endif

#endif
