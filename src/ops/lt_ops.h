/* Building blocks shared by the op builders (op_*.c).
 *
 * Ownership: functions taking `lt_node *` operands CONSUME those references
 * (they are released also on failure, and NULL operands are accepted and make
 * the call fail), and return a NEW reference or NULL with the error recorded.
 * Composite ops (clamp, stack, transpose, ...) are built from nodes, never
 * from public API calls, so that no temporary tensor reaches the user's scope. */
#ifndef LT_OPS_H
#define LT_OPS_H

#include "../exec/exec_internal.h"
#include "../core/lt_dtype.h"
#include "../core/lt_error.h"
#include "../core/lt_node.h"
#include "../core/lt_node_rules.h"
#include "../core/lt_shape.h"
#include "../core/lt_tensor.h"

/* The IR value of t converted to dtype dt (a CAST node when needed). NEW reference. */
lt_node *lt__ir_as(lt_tensor *t, lt_dtype dt);

/* A 0-d scalar on dev: CONST for 0 and +-1, else device data (uploaded now),
 * so that changing values never change the graph. */
lt_node *lt__scalar_node(lt_device dev, lt_dtype dt, double value);

/* Whether value v converts to dt as torch 1.13 allows a fill value (no
 * overflow; op_mask.c), with *out the value as dt holds it. */
bool lt__fill_value(lt_dtype dt, double v, double *out);

/* True when dev names a known device; records LT_EDEVICE otherwise. */
bool lt__device_ctx_ok(lt_device dev);

/* Wraps node (consumed) into a new tensor on dev; NULL node gives NULL. In
 * eager mode the new value is computed at once (its failure is the op's). */
lt_tensor *lt__wrap(lt_device dev, lt_node *node);

/* Whether node n's value depends on a requires-grad tensor (op_common.c;
 * a bounded walk that answers yes past its budget). */
bool lt__carries_grad(const lt_node *n);

/* Eager mode: queues t's pending value for execution at once (op_eager.c),
 * keeping the history autograd needs. */
int lt__eager_run(lt_tensor *t);

/* lt__node_make + lt__wrap. */
lt_tensor *lt__make(lt_device dev, lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                    lt_node **operands, int noperands, const int64_t *attrs, int nattrs,
                    double fattr);

/* ---- sharding (op_shard.c) ----
 * A sharding-aware builder resolves its operands first: with no sharded
 * operand (or inside another aware builder) nothing happens; otherwise the
 * operands are replaced by local values (temporaries held by the context)
 * and the thread is marked aware (lt__check_operands then lets shards
 * through) until lt__shard_finish, which gives the result its sharding,
 * releases the temporaries and returns r. */
typedef struct lt_shard_ctx {
  lt_tensor *tmp[8];
  int ntmp;
  int axis, n; /* the result's sharding (n == 0: replicated) */
  bool aware;
} lt_shard_ctx;
/* Elementwise ops over k broadcasting operands (ts[] is updated in place). */
int lt__shard_elementwise(const char *fn, lt_tensor **ts, int k, lt_shard_ctx *c);
lt_tensor *lt__shard_finish(lt_shard_ctx *c, lt_tensor *r);
/* This replica's chunk of replicated x, split in n along axis (n must
 * divide it), as a plain tensor of its own (not marked sharded): a SHARD
 * node, which reads the replica's rank when it runs, so that every replica
 * traces the same graph (a slice at the rank's offset would be a graph, and
 * a compile, per replica). Rank-dependent work such as a sharded
 * optimizer's update uses it. */
lt_tensor *lt__shard_chunk(lt_tensor *x, int axis, int n);
/* LT_OK when axis ax of t splits into n equal chunks (one per replica);
 * else LT_ESHAPE naming fn, what ("axis", "split axis") and t's shape. */
int lt__axis_divides(const char *fn, const char *what, const lt_tensor *t, int ax, int n);
/* lt_matmul with a sharded operand (column-, row-parallel, ...). */
lt_tensor *lt__shard_matmul(lt_tensor *a, lt_tensor *b);
/* An axis-set reduction of sharded a, through the plain builder. */
typedef lt_tensor *(*lt_shard_reduce_fn)(const char *fn, lt_op op, lt_tensor *a, const int *axes,
                                         int naxes, bool keepdim);
lt_tensor *lt__shard_reduce(const char *fn, lt_op op, lt_tensor *a, const int *axes, int naxes,
                            bool keepdim, lt_shard_reduce_fn build);
/* An op along one axis whose result has a's shape (softmax): local when
 * the axis is not the split one (result split alike), else on the gathered
 * value (replicated). *a is updated in place. */
int lt__shard_one_axis(const char *fn, lt_tensor **a, int axis, lt_shard_ctx *c);
/* A one-operand op that moves the split axis (permute, reshape): with
 * out_axis >= 0 it runs on the local chunk and the result is split along
 * out_axis; with -1 on the gathered value (*a is updated), replicated. */
int lt__shard_layout(lt_tensor **a, int out_axis, lt_shard_ctx *c);
/* The axis along which reshaping sharded a to shape (its global target;
 * one -1 allowed) keeps it split, with the local target in local; -1 when
 * it cannot (the reshape then runs on the gathered value). */
int lt__shard_reshape_axis(const lt_tensor *a, const int64_t *shape, int ndim, int64_t *local);
/* lt_assign where dst or src is sharded: dst keeps its sharding. */
int lt__shard_assign(lt_tensor *dst, lt_tensor *src);

#endif
