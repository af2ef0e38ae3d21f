/* Tensors: lifetime (reference counts and scopes), accessors, and the IR value
 * a tensor contributes when used as an operand. */
#include <stdatomic.h>
#include <string.h>

#include "lt_buffer.h"
#include "lt_metrics.h"
#include "lt_alloc.h"
#include "lt_device.h"
#include "lt_error.h"
#include "lt_tensor.h"

static _Atomic int64_t g_next_id = 1;

/* Ids are unique, not ordered: each thread takes them from the shared counter
 * a block at a time, so making a tensor costs no atomic operation. */
enum { kIdBlock = 1024 };
static _Thread_local int64_t tl_id_next, tl_id_end;

static int64_t next_id(void) {
  if (tl_id_next == tl_id_end) {
    tl_id_next = atomic_fetch_add_explicit(&g_next_id, kIdBlock, memory_order_relaxed);
    tl_id_end = tl_id_next + kIdBlock;
  }
  return tl_id_next++;
}

/* ---- scopes: a thread-local stack of owned tensors plus frame marks ---- */
static _Thread_local lt_tensor **tl_items;
static _Thread_local size_t tl_nitems, tl_cap;
static _Thread_local size_t *tl_marks;
static _Thread_local size_t tl_nmarks, tl_mark_cap;

static int scope_push(lt_tensor *t) {
  if (tl_nitems == tl_cap) {
    size_t ncap = tl_cap ? tl_cap * 2 : 256;
    lt_tensor **grown = lt__realloc(tl_items, tl_cap * sizeof *grown, ncap * sizeof *grown);
    if (!grown) return LT_ENOMEM;
    tl_items = grown;
    tl_cap = ncap;
  }
  tl_items[tl_nitems++] = t;
  return LT_OK;
}

void lt_scope_begin(void) {
  if (tl_nmarks == tl_mark_cap) {
    size_t ncap = tl_mark_cap ? tl_mark_cap * 2 : 16;
    size_t *grown = lt__realloc(tl_marks, tl_mark_cap * sizeof *grown, ncap * sizeof *grown);
    if (!grown) {
      /* Defensive: without a mark the scope simply merges into its parent;
       * nothing leaks, tensors live a little longer. */
      return;
    }
    tl_marks = grown;
    tl_mark_cap = ncap;
  }
  tl_marks[tl_nmarks++] = tl_nitems;
}

void lt_scope_end(void) {
  if (tl_nmarks == 0) return;
  size_t mark = tl_marks[--tl_nmarks];
  while (tl_nitems > mark) lt_release(tl_items[--tl_nitems]);
  if (tl_nmarks == 0) { /* give the memory back when the outermost scope closes */
    lt__free(tl_items, tl_cap * sizeof *tl_items);
    lt__free(tl_marks, tl_mark_cap * sizeof *tl_marks);
    tl_items = NULL;
    tl_marks = NULL;
    tl_cap = tl_mark_cap = 0;
  }
}

/* ---- lifetime ---- */
static const lt_tensor kFreshTensor;

static lt_tensor *tensor_alloc_in(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                                  bool scoped) {
  lt_device_ctx *ctx = lt__device_ctx("lt_tensor", dev);
  if (!ctx) return NULL;
  lt_tensor *t = lt__slab_alloc(sizeof *t);
  if (!t) return NULL;
  *t = kFreshTensor; /* a constant-size copy: vector stores, not a string instruction */
  atomic_init(&t->refs, 1);
  t->dtype = (uint8_t)dt;
  t->ndim = (uint8_t)ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->dev = dev;
  t->id = next_id();
  if (scoped && tl_nmarks > 0 && scope_push(t) != LT_OK) {
    lt__slab_free(t, sizeof *t);
    return NULL;
  }
  lt__device_add_live(ctx, t);
  lt__count(LT_CTR_CREATE_TENSOR, 1);
  return t;
}

void lt__tensor_discard(lt_tensor *t) {
  if (!t) return;
  if (tl_nitems > 0 && tl_items[tl_nitems - 1] == t) tl_nitems--; /* the scope's reference */
  lt_release(t);
}

static lt_tensor *tensor_alloc(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim) {
  return tensor_alloc_in(dev, dt, shape, ndim, true);
}

lt_tensor *lt__tensor_new_unscoped(lt_device dev, lt_node *node) {
  if (!node) return NULL;
  lt_tensor *t = tensor_alloc_in(dev, (lt_dtype)node->dtype, node->shape, node->ndim, false);
  if (!t) {
    lt__node_release(node);
    return NULL;
  }
  lt__tensor_set_ir(t, node);
  return t;
}

lt_tensor *lt__tensor_from_node(lt_device dev, lt_node *node) {
  if (!node) return NULL;
  lt_tensor *t = tensor_alloc(dev, (lt_dtype)node->dtype, node->shape, node->ndim);
  if (!t) {
    lt__node_release(node);
    return NULL;
  }
  if (node->op == LT_OP_DATA) { /* a bare data leaf is a device value, no compute */
    t->buf = lt__buffer_retain(node->data);
    t->data_node = node;
    return t;
  }
  t->ir = node;
  return t;
}

lt_tensor *lt__tensor_from_buffer(lt_device dev, lt_buffer *buf) {
  lt_tensor *t = tensor_alloc(dev, (lt_dtype)buf->dtype, buf->shape, buf->ndim);
  if (!t) {
    lt__buffer_release(buf);
    return NULL;
  }
  t->buf = buf;
  return t;
}

lt_tensor *lt__tensor_from_host(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                                void *host, size_t nbytes) {
  lt_tensor *t = tensor_alloc(dev, dt, shape, ndim);
  if (!t) return NULL;
  t->host = host;
  t->host_bytes = nbytes;
  return t;
}

lt_tensor *lt_retain(lt_tensor *t) {
  if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  return t;
}

static void clear_value(lt_tensor *t) {
  lt__node_release(t->ir);
  lt__node_release(t->data_node);
  lt__buffer_release(t->buf);
  lt__free(t->host, t->host_bytes);
  t->ir = t->data_node = NULL;
  t->buf = NULL;
  t->host = NULL;
  t->host_bytes = 0;
}

/* Installed by autograd when the first tensor requires grad: core reaches the
 * higher layer only through this pointer. */
static void (*_Atomic g_release_hook)(lt_tensor *t);

void lt__tensor_set_release_hook(void (*fn)(lt_tensor *t)) { atomic_store(&g_release_hook, fn); }

void lt_release(lt_tensor *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  if (t->requires_grad) {
    void (*hook)(lt_tensor *) = atomic_load(&g_release_hook);
    if (hook) hook(t);
  }
  lt__device_remove_live(lt__device_ctx("lt_release", t->dev), t);
  clear_value(t);
  lt_release(t->grad);
  lt__count(LT_CTR_DESTROY_TENSOR, 1);
  lt__slab_free(t, sizeof *t);
}

void lt__tensor_set_buffer(lt_tensor *t, lt_buffer *buf) {
  clear_value(t);
  t->buf = buf;
  buf->owner_id = t->id;
}

void lt__tensor_set_ir(lt_tensor *t, lt_node *node) {
  if (node->op == LT_OP_DATA) {
    lt_buffer *b = lt__buffer_retain(node->data);
    clear_value(t);
    t->buf = b;
    if (node->origin && t->requires_grad) {
      /* A requires-grad tensor is a leaf: a value assigned to it (an
       * optimizer's update in eager mode) brings no history along, or each
       * step's update would keep the one before it alive. Its data leaf is
       * made afresh when a graph reads it. */
      lt__node_release(node);
      return;
    }
    t->data_node = node;
    return;
  }
  clear_value(t);
  t->ir = node;
}

static _Thread_local int tl_shard_aware;
void lt__shard_aware_push(void) { tl_shard_aware++; }
void lt__shard_aware_pop(void) { tl_shard_aware--; }
int lt__shard_aware_depth(void) { return tl_shard_aware; }

void lt__tensor_set_sharding(lt_tensor *t, int axis, int n) {
  t->shard_n = (uint8_t)(n > 0 ? n : 0);
  t->shard_axis = (int8_t)(n > 0 ? axis : -1);
  for (int d = 0; d < t->ndim; d++) t->gshape[d] = t->shape[d] * (n > 0 && d == axis ? n : 1);
}

void lt__tensor_copy_sharding(lt_tensor *dst, const lt_tensor *src) {
  lt__tensor_set_sharding(dst, src->shard_axis, src->shard_n);
}

int lt__check_operands(const char *fn, lt_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    if (!ts[i]) return lt__err_null(fn);
  /* Computing on a local chunk as if it were the whole value would give a
   * wrong answer silently: only sharding-aware builders accept shards. */
  for (int i = 0; i < n && tl_shard_aware == 0; i++)
    if (ts[i]->shard_n)
      return lt__err(LT_EINVAL,
                     "%s: operand %d is sharded along axis %d (lt_mark_sharding) and %s does "
                     "not propagate shardings; call lt_unshard on it first",
                     fn, i, (int)ts[i]->shard_axis, fn);
  for (int i = 1; i < n; i++) {
    if (!lt__device_equal(ts[i]->dev, ts[0]->dev)) {
      char a[32], b[32];
      lt_device_str(ts[0]->dev, a, sizeof a);
      lt_device_str(ts[i]->dev, b, sizeof b);
      return lt__err(LT_EDEVICE, "%s: operands on different devices (%s and %s)", fn, a, b);
    }
  }
  return LT_OK;
}

/* ---- accessors ---- */
int64_t lt_id(const lt_tensor *t) { return t ? t->id : -1; }
lt_dtype lt_get_dtype(const lt_tensor *t) { return t ? (lt_dtype)t->dtype : LT_NUM_DTYPES; }
int lt_ndim(const lt_tensor *t) { return t ? t->ndim : -1; }
/* The logical (global) shape: a sharded tensor's value is only its chunk. */
const int64_t *lt_shape(const lt_tensor *t) {
  return t ? (t->shard_n ? t->gshape : t->shape) : NULL;
}
int64_t lt_numel(const lt_tensor *t) { return t ? lt__numel(lt_shape(t), t->ndim) : -1; }
lt_device lt_get_device(const lt_tensor *t) { return t ? t->dev : lt_cpu(-1); }

int64_t lt_dim(const lt_tensor *t, int axis) {
  if (!t) return -1;
  int a = axis < 0 ? axis + t->ndim : axis;
  if (a < 0 || a >= t->ndim) return -1;
  return lt_shape(t)[a];
}

lt_state lt_get_state(const lt_tensor *t) {
  if (t && t->ir) return LT_STATE_PENDING;
  if (t && t->host) return LT_STATE_HOST;
  return LT_STATE_DEVICE;
}

bool lt_ready(const lt_tensor *t) {
  if (!t || t->ir) return false;
  return t->host || atomic_load(&t->buf->state) != LT_BUF_PENDING;
}
