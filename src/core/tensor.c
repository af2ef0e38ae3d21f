/* Tensors: lifetime (reference counts and scopes), accessors, and the IR value
 * a tensor contributes when used as an operand. */
#include <pthread.h>
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

static void release_ref(lt_tensor *t);

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
  while (tl_nitems > mark) {
    lt_tensor *t = tl_items[--tl_nitems];
    atomic_store_explicit(&t->scope_owned, false, memory_order_release);
    release_ref(t);
  }
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
  atomic_init(&t->scope_owned, false);
  t->magic = LT_TENSOR_LIVE;
  t->dtype = (uint8_t)dt;
  t->ndim = (uint8_t)ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->dev = dev;
  t->id = next_id();
  if (scoped && tl_nmarks > 0) {
    if (scope_push(t) != LT_OK) {
      lt__slab_free(t, sizeof *t);
      return NULL;
    }
    atomic_init(&t->scope_owned, true);
  }
  lt__device_add_live(ctx, t);
  lt__count(LT_CTR_CREATE_TENSOR, 1);
  return t;
}

void lt__tensor_discard(lt_tensor *t) {
  if (!t) return;
  if (tl_nitems > 0 && tl_items[tl_nitems - 1] == t) { /* the scope's reference */
    tl_nitems--;
    atomic_store_explicit(&t->scope_owned, false, memory_order_release);
    release_ref(t);
    return;
  }
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
  if (!t) return NULL;
  if (t->magic != LT_TENSOR_LIVE) {
    lt__tensor_bad("lt_retain", t);
    return NULL; /* an op given it reports NULL; nothing is resurrected */
  }
  atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
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

/* ---- released headers: a per-thread FIFO quarantine ----
 * A released header is not given back to the allocator at once: it waits,
 * marked LT_TENSOR_RELEASED, behind the thread's last LT_TENSOR_QUARANTINE
 * released ones. A stale pointer used in that window reads a valid header
 * that says "released" (defined behaviour: ASan and valgrind stay quiet), so
 * the public call reports the misuse instead of reading freed memory. The
 * window bounds the memory: a long run recycles headers as it always did,
 * one release later than the window. The link is live_next, unused once a
 * tensor has left its device's list. */
typedef struct quarantine {
  lt_tensor *head, *tail; /* oldest, newest */
  int n;
  int state; /* QUAR_NEW, QUAR_LIVE (drained at thread exit), QUAR_DEAD (exiting) */
} quarantine;
enum { QUAR_NEW = 0, QUAR_LIVE = 1, QUAR_DEAD = 2 };

static _Thread_local quarantine tl_quar;
static pthread_key_t g_quar_key;
static pthread_once_t g_quar_once = PTHREAD_ONCE_INIT;
static bool g_quar_key_ok;

static void quarantine_drain(quarantine *q) {
  while (q->head) {
    lt_tensor *t = q->head;
    q->head = t->live_next;
    lt__slab_free(t, sizeof *t);
  }
  q->tail = NULL;
  q->n = 0;
}

static void quarantine_thread_exit(void *p) {
  quarantine *q = p;
  quarantine_drain(q);
  q->state = QUAR_DEAD; /* releases by later destructors free at once */
}

static void quarantine_key_init(void) {
  g_quar_key_ok = pthread_key_create(&g_quar_key, quarantine_thread_exit) == 0;
}

/* Registers the thread's quarantine for draining at its exit; false when it
 * cannot be (then headers are freed at once, as before). */
static bool quarantine_register(quarantine *q) {
  if (q->state == QUAR_DEAD) return false;
  pthread_once(&g_quar_once, quarantine_key_init);
  if (!g_quar_key_ok || pthread_setspecific(g_quar_key, q) != 0) {
    q->state = QUAR_DEAD;
    return false;
  }
  q->state = QUAR_LIVE;
  return true;
}

static void quarantine_put(lt_tensor *t) {
  quarantine *q = &tl_quar;
  if (q->state != QUAR_LIVE && !quarantine_register(q)) {
    lt__slab_free(t, sizeof *t);
    return;
  }
  t->live_next = NULL;
  if (q->tail)
    q->tail->live_next = t;
  else
    q->head = t;
  q->tail = t;
  if (++q->n > LT_TENSOR_QUARANTINE) {
    lt_tensor *old = q->head;
    q->head = old->live_next;
    q->n--;
    lt__slab_free(old, sizeof *old);
  }
}

void lt__tensor_quarantine_flush(void) { quarantine_drain(&tl_quar); }

int lt__tensor_bad(const char *fn, const lt_tensor *t) {
  if (!t) return lt__err_null(fn);
  if (t->magic == LT_TENSOR_RELEASED)
    return lt__err(LT_EINVAL,
                   "%s: tensor %lld was released (its last reference went with lt_release, or "
                   "with lt_scope_end of the scope that created it); lt_retain a tensor to keep "
                   "it past its scope",
                   fn, (long long)t->id);
  return lt__err(LT_EINVAL,
                 "%s: %p is not a live tensor (a pointer lazytensor did not return, or a "
                 "tensor released long before)",
                 fn, (const void *)t);
}

/* Drops one reference; the last one destroys the tensor. */
static void release_ref(lt_tensor *t) {
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  if (t->requires_grad) {
    void (*hook)(lt_tensor *) = atomic_load(&g_release_hook);
    if (hook) hook(t);
  }
  lt__device_remove_live(lt__device_ctx("lt_release", t->dev), t);
  clear_value(t);
  lt_tensor *grad = t->grad;
  t->grad = NULL;
  if (grad) release_ref(grad); /* a gradient belongs to its tensor alone */
  lt__count(LT_CTR_DESTROY_TENSOR, 1);
  t->magic = LT_TENSOR_RELEASED;
  quarantine_put(t);
}

void lt_release(lt_tensor *t) {
  if (!t) return;
  if (t->magic != LT_TENSOR_LIVE) {
    lt__tensor_bad("lt_release", t); /* a second release: the first one already freed it */
    return;
  }
  /* The scope's reference is the scope's to drop: dropping it here would free
   * the tensor under the scope, which would release it again at its end. */
  if (atomic_load_explicit(&t->scope_owned, memory_order_acquire) &&
      atomic_load_explicit(&t->refs, memory_order_acquire) == 1) {
    lt__err(LT_EINVAL,
            "lt_release: tensor %lld belongs to the open scope that created it, which "
            "releases it at lt_scope_end; lt_retain it first to hold a reference of your own",
            (long long)t->id);
    return;
  }
  release_ref(t);
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
    if (lt__tensor_check(fn, ts[i]) != LT_OK) return LT_EINVAL;
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

/* ---- accessors ----
 * NULL answers the "none" value quietly, as it always did; a released tensor
 * answers it too and records why. */
static inline bool readable(const char *fn, const lt_tensor *t) {
  if (!t) return false;
  if (t->magic == LT_TENSOR_LIVE) return true;
  lt__tensor_bad(fn, t);
  return false;
}

int64_t lt_id(const lt_tensor *t) { return readable("lt_id", t) ? t->id : -1; }
lt_dtype lt_get_dtype(const lt_tensor *t) {
  return readable("lt_get_dtype", t) ? (lt_dtype)t->dtype : LT_NUM_DTYPES;
}
int lt_ndim(const lt_tensor *t) { return readable("lt_ndim", t) ? t->ndim : -1; }
/* The logical (global) shape: a sharded tensor's value is only its chunk. */
static const int64_t *shape_of(const lt_tensor *t) { return t->shard_n ? t->gshape : t->shape; }
const int64_t *lt_shape(const lt_tensor *t) { return readable("lt_shape", t) ? shape_of(t) : NULL; }
int64_t lt_numel(const lt_tensor *t) {
  return readable("lt_numel", t) ? lt__numel(shape_of(t), t->ndim) : -1;
}
lt_device lt_get_device(const lt_tensor *t) {
  return readable("lt_get_device", t) ? t->dev : lt_cpu(-1);
}

int64_t lt_dim(const lt_tensor *t, int axis) {
  if (!readable("lt_dim", t)) return -1;
  int a = axis < 0 ? axis + t->ndim : axis;
  if (a < 0 || a >= t->ndim) return -1;
  return shape_of(t)[a];
}

lt_state lt_get_state(const lt_tensor *t) {
  if (!readable("lt_get_state", t)) return LT_STATE_DEVICE;
  if (t->ir) return LT_STATE_PENDING;
  if (t->host) return LT_STATE_HOST;
  return LT_STATE_DEVICE;
}

bool lt_ready(const lt_tensor *t) {
  if (!readable("lt_ready", t) || t->ir) return false;
  return t->host || atomic_load(&t->buf->state) != LT_BUF_PENDING;
}
