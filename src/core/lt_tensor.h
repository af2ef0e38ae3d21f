/* Tensors: a handle with an id, device, dtype and shape whose value lives in
 * exactly one place: a device buffer, a pending IR value, or host data. */
#ifndef LT_TENSOR_H
#define LT_TENSOR_H

#include <stdatomic.h>

#include "lazytensor.h"
#include "lt_node.h"

struct lt_buffer;

/* A header's magic says whether it is a tensor the program may use. A
 * released header is kept (see lt__tensor_check) with LT_TENSOR_RELEASED, so a
 * stale pointer reads a valid header that says so instead of freed memory. */
enum { LT_TENSOR_LIVE = 0x4c54564cu, LT_TENSOR_RELEASED = 0x4c544445u };

struct lt_tensor {
  atomic_int refs; /* atomic: autograd's registry may retain another thread's tensor */
  uint8_t dtype;
  uint8_t ndim;
  atomic_bool scope_owned; /* one of refs is held by the creating thread's open scope */
  uint32_t mark;           /* executor collect epoch */
  uint32_t magic;          /* LT_TENSOR_LIVE or LT_TENSOR_RELEASED */
  int64_t id;
  lt_device dev;
  int64_t shape[LT_MAX_DIMS];
  lt_node *ir;           /* pending value, or NULL */
  struct lt_buffer *buf; /* device value, or NULL */
  void *host;            /* host value, or NULL */
  size_t host_bytes;
  lt_node *data_node; /* cached LT_OP_DATA leaf over buf (a cache, not state) */
  bool requires_grad;
  lt_tensor *grad;                  /* accumulated gradient, or NULL */
  lt_tensor *live_prev, *live_next; /* device context's weak list */
  /* Sharding (lazytensor_dist.h, docs/SCALE_OUT.md): shard_n > 0 when the
   * value is this rank's chunk of a global value split in shard_n equal
   * chunks along shard_axis. shape (and the node, the buffer) is the local
   * chunk's, gshape the global one, which the public accessors report. */
  uint8_t shard_n;
  int8_t shard_axis;
  int64_t gshape[LT_MAX_DIMS];
};

/* A tensor whose value is the node (the tensor takes the caller's reference on
 * node, also on failure). Registers it with the device and the open scope. */
lt_tensor *lt__tensor_from_node(lt_device dev, lt_node *node);
lt_tensor *lt__tensor_from_buffer(lt_device dev, struct lt_buffer *buf); /* takes ref */
/* A tensor holding host data (takes ownership of host, nbytes long). */
lt_tensor *lt__tensor_from_host(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                                void *host, size_t nbytes);
/* Zero-filled host data, device data at its first use (not an IR constant: a
 * graph that reads it equals one reading any other data). */
lt_tensor *lt__zeros_data(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim);

/* A tensor over node (consumed) that no scope owns: the caller holds the only
 * reference (used for gradients, which belong to their tensor). */
lt_tensor *lt__tensor_new_unscoped(lt_device dev, lt_node *node);

/* Releases a tensor this thread has just created, taking it back from the
 * open scope (for failure paths after creation). */
void lt__tensor_discard(lt_tensor *t);

/* Replaces t's value by a device buffer (takes the reference). */
void lt__tensor_set_buffer(lt_tensor *t, struct lt_buffer *buf);
/* Replaces t's value by a pending node (takes the reference). */
void lt__tensor_set_ir(lt_tensor *t, lt_node *node);

/* Called by lt_release for a dying tensor that requires grad, before its
 * value is dropped. Autograd installs it (its registry of requires-grad
 * tensors forgets the tensor); core calls no higher layer directly. */
void lt__tensor_set_release_hook(void (*fn)(lt_tensor *t));

/* Lifetime misuse detection at the API boundary. LT_OK when t is a live
 * tensor; otherwise records LT_EINVAL naming fn (a NULL operand keeps the
 * error already recorded, as lt__err_null does) and returns it. A released
 * tensor's header stays readable: each thread keeps its last
 * LT_TENSOR_QUARANTINE released headers (marked LT_TENSOR_RELEASED) before
 * giving them back to the allocator, so a use within that window is reported,
 * not a read of freed memory. */
enum { LT_TENSOR_QUARANTINE = 1024 };
int lt__tensor_bad(const char *fn, const lt_tensor *t);
static inline int lt__tensor_check(const char *fn, const lt_tensor *t) {
  return t && t->magic == LT_TENSOR_LIVE ? LT_OK : lt__tensor_bad(fn, t);
}
/* Gives this thread's quarantined headers back to the allocator (before the
 * allocator changes: they go back to the one that made them). */
void lt__tensor_quarantine_flush(void);

/* Checks that a tensor op's operands are non-NULL and on one device; records
 * the error naming fn otherwise. */
int lt__check_operands(const char *fn, lt_tensor *const *ts, int n);

/* Sharding bookkeeping. set: t's local value is chunk `rank` of n along axis
 * (n == 0: replicated); gshape follows. copy: dst gets src's sharding. */
void lt__tensor_set_sharding(lt_tensor *t, int axis, int n);
void lt__tensor_copy_sharding(lt_tensor *dst, const lt_tensor *src);
static inline bool lt__is_sharded(const lt_tensor *t) { return t && t->shard_n > 0; }
/* While > 0 on this thread, lt__check_operands lets sharded operands through:
 * a sharding-aware builder (ops/op_shard.c) has resolved them to local
 * values and builds local nodes. Every other op refuses them. */
void lt__shard_aware_push(void);
void lt__shard_aware_pop(void);
int lt__shard_aware_depth(void);

#endif
