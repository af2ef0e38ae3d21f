/* lazytensor_dist: replicas, collectives in the graph and data-parallel
 * training, on top of lazytensor.h and lazytensor_nn.h.
 *
 * A world is a group of replicas, each running the same program on its own
 * device. lt_world_local(n) makes the devices CPU:0..CPU:n-1 of this process
 * its ranks 0..n-1, collectives going through shared memory; lt_world_mpi
 * makes the processes of an MPI job its ranks, one replica per process on
 * its CPU:0, collectives going through MPI (docs/SCALE_OUT.md).
 *
 * Collectives are IR ops: lt_all_reduce and the others only record a node,
 * which runs when its graph does, like any other op. Every replica must trace
 * the same collectives in the same order (in practice: the same program, as
 * under torch.distributed): the k-th collective run by each rank is matched
 * with the k-th of every other rank. Replicas that disagree (another op,
 * dtype, shape, or the same call in another graph) fail at that call with a
 * message naming both; a replica that is gone (its replica function
 * returned; over MPI: it left the world, or sent no heartbeat for 5 s)
 * makes the others fail at once, and one that is alive but does not come
 * makes them fail after the world's deadline (LT_COLLECTIVE_TIMEOUT_MS, whole
 * milliseconds, default 600000: a live replica may be busy for minutes)
 * instead of waiting forever. A world whose collective failed
 * stays failed (its replicas no longer agree on the order): free it.
 *
 * Errors are as in lazytensor.h: a status and lt_last_error(); a collective
 * on a device of no world fails at trace time with LT_EDEVICE. */
#ifndef LAZYTENSOR_DIST_H
#define LAZYTENSOR_DIST_H

#include "lazytensor.h"
#include "lazytensor_nn.h"

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

/* ---- collectives (IR ops) ---------------------------------------------------------------- */
typedef enum lt_reduce_op {
  LT_REDUCE_SUM = 0,
  LT_REDUCE_MEAN = 1, /* float dtypes only */
  LT_REDUCE_MAX = 2,  /* NaN wins, as torch.maximum */
  LT_REDUCE_MIN = 3,
} lt_reduce_op;

/* Each element reduced over the ranks (in rank order; floats accumulate in
 * double), the result on every rank: t's shape and dtype. Integer dtypes
 * (u8, i8, i32, i64: sums wrap) and floats; bool is refused (LT_EDTYPE).
 * Gradient: sum -> all_reduce(g, sum); mean -> all_reduce(g, mean); max and
 * min have none (lt_backward fails with LT_EINVAL). */
LT_API lt_tensor *lt_all_reduce(lt_tensor *t, lt_reduce_op op);
/* The ranks' tensors concatenated along axis in rank order (torch's
 * all_gather_into_tensor): t's shape with that axis times the world size.
 * Every dtype; t has rank >= 1. Gradient: reduce_scatter(g, sum, axis). */
LT_API lt_tensor *lt_all_gather(lt_tensor *t, int axis);
/* Reduces over the ranks as lt_all_reduce, then keeps chunk `rank` of the
 * result along axis (whose size must divide by the world size, else
 * LT_ESHAPE). Gradient: sum -> all_gather(g, axis); mean -> all_gather(g,
 * axis) / size; max and min have none. */
LT_API lt_tensor *lt_reduce_scatter(lt_tensor *t, lt_reduce_op op, int axis);
/* Rank root's t on every rank (the other ranks' values are ignored, their
 * shapes and dtypes must agree). Every dtype. No gradient (it is meant for
 * setting values up, outside a differentiated graph). */
LT_API lt_tensor *lt_broadcast(lt_tensor *t, int root);

/* ---- sharding (SPMD) ------------------------------------------------------------------------
 * A mesh is a world (a 1-d mesh of its ranks). Every replica runs the same
 * program; a sharded tensor holds, on each rank, only its chunk of one
 * global value split in equal chunks along one axis. lt_shape, lt_dim and
 * lt_numel report the GLOBAL shape. The ops below propagate shardings at
 * trace time, inserting collectives (docs/SCALE_OUT.md, "Sharding"):
 *   - elementwise ops (unary, casts, binary, lt_where): operands brought to
 *     one layout (a replicated operand is split where it has that axis, or
 *     used as it is where it broadcasts; one sharded on another axis is
 *     gathered first), result sharded;
 *   - lt_matmul of 2-d operands: replicated @ column-split -> split on 1;
 *     row-split @ replicated -> split on 0; split on 1 @ split on 0
 *     (row-parallel) -> partial sums all-reduced, replicated; other layouts
 *     gather or split an operand into one of these; batched or 1-d operands
 *     are gathered;
 *   - lt_sum, lt_mean over axes without the split one: local, result split
 *     on the renumbered axis; with it: local then all-reduced, replicated;
 *     lt_max, lt_min (and prod, logsumexp) over it: gathered first;
 *   - lt_softmax, lt_log_softmax: local along an unsplit axis (split
 *     alike), gathered along the split one;
 *   - lt_transpose, lt_permute: local, the split moving with its axis;
 *     lt_reshape (global target): local when the split axis's chunks are
 *     chunks of one axis of the new shape (an axis with as many elements
 *     before it, whose size the world size divides: [4,6] split on 1 ->
 *     [4,2,3] split on 1), else on the gathered value;
 *   - lt_assign: the destination keeps its sharding; lt_nn_linear_forward
 *     and the lt_nn_optim_* optimizers work on sharded parameters (their
 *     grads and states are sharded alike).
 * Every other op given a sharded operand fails with LT_EINVAL naming the
 * op ("call lt_unshard on it first"); nothing is computed on a chunk as if
 * it were the whole value. Reads (lt_to_data, lt_item) of a sharded tensor
 * fail the same way: read lt_unshard(t). Gradients are those of the global
 * program: the replicated loss's gradient reaches each shard's chunk. */

/* Splits t, whose value is replicated (equal on every replica), along axis
 * over the ranks of mesh: t's value becomes its chunk `rank` (no data moves
 * between replicas). Like lt_assign, t keeps its identity (parameters stay
 * parameters, requires_grad is kept). axis -1 on a 0-d tensor (replicated)
 * is accepted and changes nothing. LT_ESHAPE when the axis's size does not
 * divide by the mesh's size; LT_EDEVICE when t's device is none of mesh's;
 * LT_EINVAL when t is sharded already another way (the same way: LT_OK).
 * Every replica must mark its own copy of the tensor, in the same order. */
LT_API int lt_mark_sharding(lt_tensor *t, const lt_world *mesh, int axis);
/* The axis t is split along, -1 when it is replicated (or NULL). */
LT_API int lt_sharding_axis(const lt_tensor *t);
/* The whole value of t, replicated on every replica (an all-gather when t
 * is sharded; a new tensor over t's value when it is not). Differentiable. */
LT_API lt_tensor *lt_unshard(lt_tensor *t);

/* ---- data-parallel training --------------------------------------------------------------- */
/* Sets each of the n parameters to rank 0's value (lt_assign of a
 * broadcast): call it on every replica after the parameters are made and
 * before the first step, then step (lt_mark_step) so that they are equal. */
LT_API int lt_dp_broadcast_params(lt_tensor *const *params, int n);
/* Replaces the grad of each of the n parameters (those that have one) by
 * its mean over the replicas, in place, through all-reduces traced into the
 * step graph: each grad of LT_DP_SMALL_GRAD_BYTES or more alone, the
 * smaller ones of a dtype concatenated, up to 64 an all-reduce (every
 * all-reduce pays the network's latency; copying small tensors costs
 * little; the values are the same). Call it after lt_backward and before
 * anything that reads the grads as the global batch's (clipping by norm,
 * then the optimizer). Every replica must hold grads on the same
 * parameters (its all-reduces must match the others'). */
LT_API int lt_dp_average_grads(lt_tensor *const *params, int n);
/* lt_dp_average_grads of o's parameters, then lt_nn_optim_step. With every
 * replica taking the mean loss of its shard of equal size, the parameters
 * follow those of one replica taking the whole batch. */
LT_API int lt_dp_optim_step(lt_nn_optim *o);
/* The size under which lt_dp_average_grads buckets grads (bytes). */
#define LT_DP_SMALL_GRAD_BYTES 65536

#ifdef __cplusplus
}
#endif

#endif
