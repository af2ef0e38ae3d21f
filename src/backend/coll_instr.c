/* Collective instructions (coll_instr.h): the node's attributes checked (an
 * instruction may come from bytes of the persistent cache), then one call of
 * the world's transport.
 *
 * Node layout (lt_op_table.h): ALL_REDUCE {redop[, size, stride]};
 * ALL_GATHER {axis, size[, stride]}; REDUCE_SCATTER {redop, axis, size[,
 * stride]}; BROADCAST {root[, size, stride]} (with a stride: over replica
 * groups of size ranks stride apart, core/lt_collective.h); ALL_TO_ALL
 * {split_axis, concat_axis, size} and COLLECTIVE_PERMUTE {size, s0, t0,
 * ...} (the whole world); the SPMD rows
 * SHARD and SPMD_ALL_GATHER {axis, size}, SPMD_ALL_REDUCE {redop, size},
 * SPMD_COPY {size}. The world size the node was traced for is in its
 * attributes (and its shape): a world of another size fails here rather than
 * write out of bounds.
 *
 * SHARD and SPMD_COPY move no data between ranks: they run here, on the
 * rank's own buffers, without the transport and without taking a sequence
 * number (the other ranks' transports never see them). */
#include <string.h>

#include "coll_instr.h"
#include "../core/lt_collective.h"
#include "../core/lt_error.h"

static int bad(const lt_instr *ins, const char *why) {
  return lt__err(LT_EEXEC, "%s: %s", lt__op_name((lt_op)ins->op), why);
}

/* The current device's binding, checked against the world size the node
 * was traced for. */
static int current_world(const lt_instr *ins, int64_t size, lt_coll_binding *b) {
  int dev = lt__coll_current();
  if (!lt__coll_binding(dev, b))
    return lt__err(LT_EEXEC, "%s: the executing device (CPU:%d) belongs to no world",
                   lt__op_name((lt_op)ins->op), dev);
  if (b->size != size)
    return lt__err(LT_EEXEC, "%s: traced for a world of %lld replicas, run in one of %d",
                   lt__op_name((lt_op)ins->op), (long long)size, b->size);
  return LT_OK;
}

/* SHARD: chunk `rank` of in along axis; SPMD_COPY: in itself. */
static int run_local(const lt_instr *ins, lt_buffer *out, const lt_buffer *a) {
  bool shard = ins->op == LT_OP_SHARD;
  if (ins->nattrs != (shard ? 2 : 1)) return bad(ins, "bad attributes");
  int64_t size = ins->attrs[shard ? 1 : 0], axis = shard ? ins->attrs[0] : 0;
  if (size < 1 || size > LT_MAX_DEVICES || axis < 0 || (shard && axis >= a->ndim))
    return bad(ins, "bad attributes");
  if (a->dtype != ins->dtype || a->ndim != ins->ndim) return bad(ins, "operand does not fit");
  for (int d = 0; d < a->ndim; d++) {
    int64_t want = shard && d == axis ? a->shape[d] / size : a->shape[d];
    if (ins->shape[d] != want || (shard && d == axis && a->shape[d] % size))
      return bad(ins, "result shape does not fit the operand and world size");
  }
  lt_coll_binding b;
  int rc = current_world(ins, size, &b);
  if (rc != LT_OK) return rc;
  size_t esz = lt_dtype_size((lt_dtype)a->dtype);
  if (!shard) {
    if (a->numel) memcpy(out->data, a->data, (size_t)a->numel * esz);
    return LT_OK;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= a->shape[d];
  for (int d = (int)axis + 1; d < a->ndim; d++) inner *= a->shape[d];
  int64_t full = a->shape[axis], chunk = full / size;
  size_t row = (size_t)(chunk * inner) * esz;
  const unsigned char *src = a->data;
  unsigned char *dst = out->data;
  for (int64_t o = 0; o < outer && row; o++)
    memcpy(dst + (size_t)o * row, src + ((size_t)(o * full + b.rank * chunk) * (size_t)inner) * esz,
           row);
  return LT_OK;
}

int lt__coll_run_instr(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (ins->noperands != 1 || !in[0]) return bad(ins, "takes one operand");
  const lt_buffer *a = in[0];
  if (ins->op == LT_OP_SHARD || ins->op == LT_OP_SPMD_COPY) return run_local(ins, out, a);
  lt_coll_call c;
  memset(&c, 0, sizeof c);
  c.dtype = ins->dtype;
  c.ndim = ins->ndim;
  if (a->dtype != ins->dtype || a->ndim != ins->ndim) return bad(ins, "operand does not fit");
  memcpy(c.in_shape, a->shape, (size_t)a->ndim * sizeof(int64_t));
  memcpy(c.out_shape, ins->shape, (size_t)ins->ndim * sizeof(int64_t));
  c.in = a->data;
  c.out = out->data;
  int64_t size = 0, stride = 0; /* stride > 0: a replica group of size ranks */
  switch (ins->op) {
  case LT_OP_ALL_REDUCE:
  case LT_OP_SPMD_ALL_REDUCE: {
    c.kind = LT_COLL_ALL_REDUCE;
    bool spmd = ins->op == LT_OP_SPMD_ALL_REDUCE;
    if ((spmd ? ins->nattrs != 2 : ins->nattrs != 1 && ins->nattrs != 3) || ins->attrs[0] < 0 ||
        ins->attrs[0] > LT_COLL_MIN)
      return bad(ins, "bad attributes");
    c.redop = (uint8_t)ins->attrs[0];
    if (ins->nattrs >= 2) {
      size = ins->attrs[1];
      if (size < 1 || size > LT_MAX_DEVICES) return bad(ins, "bad attributes");
    }
    if (ins->nattrs == 3) stride = ins->attrs[2];
    if (memcmp(c.in_shape, c.out_shape, (size_t)c.ndim * sizeof(int64_t)) != 0)
      return bad(ins, "result shape differs from the operand's");
    break;
  }
  case LT_OP_BROADCAST:
    c.kind = LT_COLL_BROADCAST;
    if ((ins->nattrs != 1 && ins->nattrs != 3) || ins->attrs[0] < 0 ||
        ins->attrs[0] >= LT_MAX_DEVICES)
      return bad(ins, "bad attributes");
    c.root = (int)ins->attrs[0];
    if (ins->nattrs == 3) {
      size = ins->attrs[1];
      stride = ins->attrs[2];
      if (size < 1 || c.root >= size) return bad(ins, "bad attributes");
    }
    if (memcmp(c.in_shape, c.out_shape, (size_t)c.ndim * sizeof(int64_t)) != 0)
      return bad(ins, "result shape differs from the operand's");
    break;
  case LT_OP_ALL_GATHER:
  case LT_OP_SPMD_ALL_GATHER:
  case LT_OP_REDUCE_SCATTER: {
    bool gather = ins->op != LT_OP_REDUCE_SCATTER;
    c.kind = gather ? LT_COLL_ALL_GATHER : LT_COLL_REDUCE_SCATTER;
    int base = gather ? 0 : 1;
    bool spmd = ins->op == LT_OP_SPMD_ALL_GATHER;
    if (ins->nattrs != base + 2 && (spmd || ins->nattrs != base + 3))
      return bad(ins, "bad attributes");
    if (ins->nattrs == base + 3) stride = ins->attrs[base + 2];
    if (!gather) {
      if (ins->attrs[0] < 0 || ins->attrs[0] > LT_COLL_MIN) return bad(ins, "bad attributes");
      c.redop = (uint8_t)ins->attrs[0];
    }
    int64_t axis = ins->attrs[base];
    size = ins->attrs[base + 1];
    if (axis < 0 || axis >= c.ndim || size < 1 || size > LT_MAX_DEVICES)
      return bad(ins, "bad attributes");
    c.axis = (int)axis;
    for (int d = 0; d < c.ndim; d++) {
      int64_t want = d != axis ? c.in_shape[d]
                     : gather  ? c.in_shape[d] * size
                               : c.in_shape[d] / size;
      if (c.out_shape[d] != want || (!gather && d == axis && c.in_shape[d] % size))
        return bad(ins, "result shape does not fit the operand and world size");
    }
    break;
  }
  case LT_OP_ALL_TO_ALL: {
    c.kind = LT_COLL_ALL_TO_ALL;
    if (ins->nattrs != 3) return bad(ins, "bad attributes");
    int64_t sa = ins->attrs[0], ca = ins->attrs[1];
    size = ins->attrs[2];
    if (sa < 0 || sa >= c.ndim || ca < 0 || ca >= c.ndim || size < 1 || size > LT_MAX_DEVICES)
      return bad(ins, "bad attributes");
    c.axis = (int)sa;
    c.concat_axis = (int)ca;
    for (int d = 0; d < c.ndim; d++) {
      int64_t want = d == sa ? c.in_shape[d] / size : c.in_shape[d];
      if (d == ca) want *= size;
      if (c.out_shape[d] != want || (d == sa && c.in_shape[d] % size))
        return bad(ins, "result shape does not fit the operand and world size");
    }
    break;
  }
  case LT_OP_COLLECTIVE_PERMUTE: {
    c.kind = LT_COLL_PERMUTE;
    if (ins->nattrs < 1 || ins->nattrs % 2 != 1) return bad(ins, "bad attributes");
    size = ins->attrs[0];
    if (size < 1 || size > LT_MAX_DEVICES || (ins->nattrs - 1) / 2 > size)
      return bad(ins, "bad attributes");
    memset(c.from, -1, sizeof c.from);
    for (int k = 1; k + 1 < ins->nattrs; k += 2) {
      int64_t src = ins->attrs[k], dst = ins->attrs[k + 1];
      if (src < 0 || src >= size || dst < 0 || dst >= size || c.from[dst] >= 0)
        return bad(ins, "bad attributes");
      c.from[dst] = (int8_t)src;
    }
    /* each source once: no two targets name the same source */
    bool seen[LT_MAX_DEVICES] = {0};
    for (int r = 0; r < size; r++) {
      if (c.from[r] < 0) continue;
      if (seen[c.from[r]]) return bad(ins, "bad attributes");
      seen[c.from[r]] = true;
    }
    if (memcmp(c.in_shape, c.out_shape, (size_t)c.ndim * sizeof(int64_t)) != 0)
      return bad(ins, "result shape differs from the operand's");
    break;
  }
  default:
    return bad(ins, "not a collective");
  }
  lt_coll_binding b;
  if (stride) { /* a replica group: groups of size ranks, stride apart, tile the world */
    if (stride < 1 || size > LT_MAX_DEVICES / stride) return bad(ins, "bad attributes");
    if (lt__coll_binding(lt__coll_current(), &b) && b.size % (size * stride))
      return lt__err(LT_EEXEC,
                     "%s: traced for replica groups of %lld ranks %lld apart, run in a world of "
                     "%d replicas",
                     lt__op_name((lt_op)ins->op), (long long)size, (long long)stride, b.size);
    c.gsize = (int)size;
    c.gstride = (int)stride;
    return lt__coll_run(lt__op_name((lt_op)ins->op), &c);
  }
  if (size && lt__coll_binding(lt__coll_current(), &b) && b.size != size)
    return lt__err(LT_EEXEC, "%s: traced for a world of %lld replicas, run in one of %d",
                   lt__op_name((lt_op)ins->op), (long long)size, b.size);
  if (c.kind == LT_COLL_BROADCAST && lt__coll_binding(lt__coll_current(), &b) && c.root >= b.size)
    return lt__err(LT_EEXEC, "broadcast: root %d, in a world of %d replicas", c.root, b.size);
  return lt__coll_run(lt__op_name((lt_op)ins->op), &c);
}
