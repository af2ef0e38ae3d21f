/* lazytensor_dist: replicas, collectives in the graph and data-parallel
 * training, on top of lazytensor.h and lazytensor_nn.h.
 *
 * A world is a group of replicas, each running the same program on its own
 * device. lt_world_local(n) makes the devices CPU:0..CPU:n-1 of this process
 * its ranks 0..n-1, collectives going through shared memory; lt_world_mpi
 * makes the processes of an MPI job its ranks, one replica per process on
 * its CPU:0, collectives going through MPI (docs/SCALE_OUT.md). A mesh
 * (lt_mesh_new) arranges a world's ranks in a named grid (data x model), and
 * the lt_*_over collectives run within its rows or columns.
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
 * The API comes in three headers, one per layer that defines it, so that the
 * library's own layers compile against what they may use (docs/ARCHITECTURE.md,
 * "Source layers"): lazytensor_world.h (worlds: the executor),
 * lazytensor_collective.h (collectives and sharding: the ops) and this one
 * (data-parallel training: nn, hence lazytensor_nn.h). Programs include this
 * header, which includes the other two.
 *
 * Errors are as in lazytensor.h: a status and lt_last_error(); a collective
 * on a device of no world fails at trace time with LT_EDEVICE. */
#ifndef LAZYTENSOR_DIST_H
#define LAZYTENSOR_DIST_H

#include "lazytensor.h"
#include "lazytensor_collective.h"
#include "lazytensor_nn.h"
#include "lazytensor_world.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* lt_dp_average_grads of o's parameters, then lt_nn_optim_step; for an
 * optimizer whose state is sharded (lt_dp_options.shard_optimizer), the
 * reduce-scatter, update of this replica's chunks and all-gather described
 * there, the grads dropped after (lt_zero_grad) in both cases. With every
 * replica taking the mean loss of its shard of equal size, the parameters
 * follow those of one replica taking the whole batch. */
LT_API int lt_dp_optim_step(lt_nn_optim *o);
/* The size under which lt_dp_average_grads buckets grads (bytes). */
#define LT_DP_SMALL_GRAD_BYTES 65536

/* Options of lt_dp_optim_create; zero-initialised (or NULL) means the
 * defaults: replicated optimizer state. */
typedef struct lt_dp_options {
  /* ZeRO stage 1 (torch's ZeroRedundancyOptimizer; the sharded optimizer
   * state of torch_xla's FSDP): each replica keeps only its chunk of every
   * parameter's optimizer state (SGD's momentum buffer, Adam's and AdamW's
   * two moments), so that the state's memory per replica is divided by the
   * world size. Parameter i (numel N) is split into chunks of ceil(N / size)
   * elements of its flattened value, rank r holding chunk r; the last
   * chunks are padded with zeros (which the update keeps at zero). Each
   * lt_dp_optim_step then reduce-scatters the grads (their means over the
   * replicas, each replica receiving only its chunk), updates its chunk of
   * each parameter and of its state, and all-gathers the new parameters,
   * all inside the step graph: the parameters end equal on every replica
   * and follow those of the replicated optimizer (the same elementwise
   * arithmetic on the same means). The parameters, their grads and the
   * step's transient values stay whole; only the state is split. Grads are
   * bucketed as by lt_dp_average_grads: each of LT_DP_SMALL_GRAD_BYTES or
   * more alone, the smaller ones of a dtype up to 64 a reduce-scatter and
   * all-gather. To clip by the global norm, call lt_dp_average_grads and
   * the clip first (the reduce-scatter's mean of equal grads is those
   * grads, up to rounding). Step such an optimizer with lt_dp_optim_step only
   * (lt_nn_optim_step refuses it), and it cannot be saved in a checkpoint
   * (the files hold whole states). */
  bool shard_optimizer;
} lt_dp_options;

/* lt_nn_optim_create for data-parallel training on the world of the
 * parameters' device, with opts (NULL: the defaults). Every replica creates
 * its optimizer with the same configuration, options and parameter shapes.
 * With shard_optimizer: LT_EDEVICE when the device belongs to no world,
 * LT_EINVAL when a parameter is sharded by lt_mark_sharding (its state is
 * split already). */
LT_API lt_nn_optim *lt_dp_optim_create(const lt_nn_optim_config *cfg, lt_tensor *const *params,
                                       int n, const lt_dp_options *opts);

#ifdef __cplusplus
}
#endif

#endif
