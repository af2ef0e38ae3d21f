/* lazytensor_collective: collectives as IR ops and sharding (SPMD), the part
 * of lazytensor_dist.h (read it first) that the ops define. Programs include
 * lazytensor_dist.h; this header stands alone for the library's layers below
 * nn. */
#ifndef LAZYTENSOR_COLLECTIVE_H
#define LAZYTENSOR_COLLECTIVE_H

#include "lazytensor.h"
#include "lazytensor_world.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- collectives (IR ops) ---------------------------------------------------------------- */
typedef enum lt_reduce_op {
  LT_REDUCE_SUM = 0,
  LT_REDUCE_MEAN = 1, /* float dtypes only */
  LT_REDUCE_MAX = 2,  /* NaN wins, as torch.maximum */
  LT_REDUCE_MIN = 3,
  LT_REDUCE_ANY = 4, /* bool only: logical or (torch's MAX on bool) */
  LT_REDUCE_ALL = 5, /* bool only: logical and (torch's MIN on bool) */
} lt_reduce_op;

/* Each element reduced over the ranks (in rank order; floats accumulate in
 * double), the result on every rank: t's shape and dtype. Integer dtypes
 * (u8, i8, i32, i64: sums wrap) and floats. Bool tensors take any (or) and
 * all (and), and, as torch.distributed's NCCL group treats bool, sum and
 * max as any, min as all; mean of bool is refused (LT_EDTYPE), and so are
 * any and all of other dtypes.
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
/* torch.distributed's all_to_all (XLA's AllToAll): each rank splits t along
 * split_axis into world-size chunks, sends chunk j to rank j, and
 * concatenates the chunks it receives (in rank order) along concat_axis.
 * The result has t's shape with split_axis divided and concat_axis
 * multiplied by the world size (the same axis: t's shape). split_axis's size
 * must divide by the world size (LT_ESHAPE). Every dtype; t has rank >= 1.
 * Gradient: all_to_all(g, concat_axis, split_axis). */
LT_API lt_tensor *lt_all_to_all(lt_tensor *t, int split_axis, int concat_axis);
/* XLA's CollectivePermute: pairs holds npairs (source, target) rank pairs,
 * flattened {s0, t0, s1, t1, ...}; each source sends t to its target. A rank
 * that is some pair's target gets its source's t, any other rank zeros (t's
 * shape and dtype). Each rank is a source at most once and a target at most
 * once, every rank in range, else LT_EINVAL; every rank must pass the same
 * pairs. npairs may be 0 (all zeros). Every dtype. Gradient: the inverse
 * permutation of g (targets back to sources). */
LT_API lt_tensor *lt_collective_permute(lt_tensor *t, const int *pairs, int npairs);

/* The same four within replica groups: the ranks of t's world that differ
 * from t's rank on mesh axis mesh_axis only (lazytensor_world.h: a row or a
 * column of a 2-d mesh), each group on its own, as if it were the world.
 * The sizes above (gather, scatter) are the axis's size, and a broadcast's
 * root is a coordinate along the axis (its rank within the group). Every
 * rank of the world still calls the collective (it is matched like the
 * others, one call for all the groups). Gradients as above, over the same
 * groups. LT_EINVAL for a NULL mesh or a bad axis; LT_EDEVICE when t's
 * device is not one of the mesh's world's. */
LT_API lt_tensor *lt_all_reduce_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                                     lt_reduce_op op);
LT_API lt_tensor *lt_all_gather_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis, int axis);
LT_API lt_tensor *lt_reduce_scatter_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis,
                                         lt_reduce_op op, int axis);
LT_API lt_tensor *lt_broadcast_over(lt_tensor *t, const lt_mesh *mesh, int mesh_axis, int root);

/* ---- sharding (SPMD) ------------------------------------------------------------------------
 * A mesh is a world (a 1-d mesh of its ranks). Every replica runs the same
 * program; a sharded tensor holds, on each rank, only its chunk of one
 * global value split in equal chunks along one axis (a tensor still holding
 * host data keeps only its chunk, so each replica uploads only that). lt_shape, lt_dim and
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
 * it were the whole value. Reads (lt_to_data, lt_to_f32, lt_item) of a
 * sharded tensor return its whole (global) value, as torch_xla moves a
 * sharded tensor to the host: an all-gather in a graph of its own, so every
 * replica must read it (a collective); the tensor stays sharded. Gradients
 * are those of the global program: the replicated loss's gradient reaches
 * each shard's chunk. */

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

#ifdef __cplusplus
}
#endif

#endif
