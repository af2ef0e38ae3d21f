/* The graph executor, first cut: collect the tensors to sync, walk their
 * pending graph in post-order (device-data leaves become parameters), compute
 * the graph key, find or compile the executable, run it, and install the
 * results as the tensors' device buffers. */
#include <string.h>
#include <xxhash.h>

#include "../core/lt_alloc.h"
#include "../core/lt_device.h"
#include "../core/lt_error.h"
#include "../core/lt_tensor.h"
#include "cache.h"
#include "metrics.h"

/* Scratch arrays reused across syncs on a thread: a cache-hit sync allocates
 * nothing here. */
typedef struct scratch {
  void *p;
  size_t cap; /* bytes */
} scratch;

static _Thread_local scratch tl_nodes, tl_param_of, tl_stack, tl_params, tl_roots, tl_key,
    tl_tensors;

static void *scratch_get(scratch *s, size_t bytes) {
  if (bytes <= s->cap) return s->p;
  size_t ncap = s->cap ? s->cap : 1024;
  while (ncap < bytes) ncap *= 2;
  void *p = lt__realloc(s->p, s->cap, ncap);
  if (!p) return NULL;
  s->p = p;
  s->cap = ncap;
  return p;
}

static _Atomic uint32_t g_epoch;

typedef struct walk_frame {
  lt_node *node;
  int next;
} walk_frame;

typedef struct post_order {
  lt_node **nodes;
  int *param_of;
  int nnodes;
  lt_buffer **params;
  int nparams;
} post_order;

static int grow(scratch *s, size_t elem, int need, void **p) {
  void *q = scratch_get(s, elem * (size_t)need);
  if (!q) return LT_ENOMEM;
  *p = q;
  return LT_OK;
}

/* Iterative DFS so that deep graphs cannot overflow the stack. Parameters are
 * numbered in first-visit order, one per distinct buffer. */
static int walk(lt_node *const *roots, int nroots, post_order *po) {
  uint32_t epoch = atomic_fetch_add(&g_epoch, 1) + 1;
  int cap_nodes = 256, cap_stack = 64, cap_params = 16, sp = 0;
  walk_frame *stack;
  if (grow(&tl_nodes, sizeof(lt_node *), cap_nodes, (void **)&po->nodes) ||
      grow(&tl_param_of, sizeof(int), cap_nodes, (void **)&po->param_of) ||
      grow(&tl_stack, sizeof(walk_frame), cap_stack, (void **)&stack) ||
      grow(&tl_params, sizeof(lt_buffer *), cap_params, (void **)&po->params))
    return LT_ENOMEM;
  cap_nodes = (int)(tl_nodes.cap / sizeof(lt_node *));
  if ((int)(tl_param_of.cap / sizeof(int)) < cap_nodes)
    cap_nodes = (int)(tl_param_of.cap / sizeof(int));
  cap_stack = (int)(tl_stack.cap / sizeof(walk_frame));
  cap_params = (int)(tl_params.cap / sizeof(lt_buffer *));
  po->nnodes = po->nparams = 0;
  for (int r = 0; r < nroots; r++) {
    if (roots[r]->visit == epoch) continue;
    roots[r]->visit = epoch;
    stack[sp++] = (walk_frame){roots[r], 0};
    while (sp) {
      walk_frame *top = &stack[sp - 1];
      if (top->next < top->node->noperands) {
        lt_node *child = top->node->operands[top->next++].node;
        if (child->visit == epoch) continue;
        child->visit = epoch;
        if (sp == cap_stack) {
          if (grow(&tl_stack, sizeof(walk_frame), cap_stack * 2, (void **)&stack)) return LT_ENOMEM;
          cap_stack *= 2;
        }
        stack[sp++] = (walk_frame){child, 0};
        continue;
      }
      lt_node *n = top->node;
      sp--;
      if (po->nnodes == cap_nodes) {
        if (grow(&tl_nodes, sizeof(lt_node *), cap_nodes * 2, (void **)&po->nodes) ||
            grow(&tl_param_of, sizeof(int), cap_nodes * 2, (void **)&po->param_of))
          return LT_ENOMEM;
        cap_nodes *= 2;
      }
      int idx = po->nnodes++;
      n->order = idx;
      po->nodes[idx] = n;
      po->param_of[idx] = -1;
      if (n->op == LT_OP_DATA) {
        lt_buffer *b = n->data;
        if (b->param_mark != epoch) { /* one buffer read twice is one parameter */
          if (po->nparams == cap_params) {
            if (grow(&tl_params, sizeof(lt_buffer *), cap_params * 2, (void **)&po->params))
              return LT_ENOMEM;
            cap_params *= 2;
          }
          b->param_mark = epoch;
          b->param_index = po->nparams;
          po->params[po->nparams++] = b;
        }
        po->param_of[idx] = b->param_index;
      }
    }
  }
  return LT_OK;
}

/* DESIGN rule 2: the key folds the compile environment, the force-data flag,
 * the roots' structural hashes and the parameter sequence. */
static int graph_key(const lt_backend *be, bool force, lt_node *const *roots, int nroots,
                     const post_order *po, lt_graph_key *out) {
  size_t nwords = 4 + (size_t)nroots + (size_t)po->nnodes;
  uint64_t *w = scratch_get(&tl_key, nwords * sizeof *w);
  if (!w) return LT_ENOMEM;
  size_t k = 0;
  w[k++] = be->env_hash();
  w[k++] = force;
  w[k++] = (uint64_t)nroots;
  for (int r = 0; r < nroots; r++) w[k++] = roots[r]->hash;
  w[k++] = (uint64_t)po->nparams;
  for (int i = 0; i < po->nnodes; i++)
    if (po->param_of[i] >= 0) w[k++] = (uint64_t)po->param_of[i];
  XXH128_hash_t h = XXH3_128bits(w, k * sizeof *w);
  out->lo = h.low64;
  out->hi = h.high64;
  return LT_OK;
}

/* Compiles on a miss; returns a referenced cache entry or NULL with the error set. */
static lt_cache_entry *find_or_compile(const lt_backend *be, lt_graph_key key, const post_order *po,
                                       const int *roots, int nroots) {
  lt_cache_entry *e = lt__cache_get(key);
  if (e) {
    lt__count(LT_CTR_CACHED_COMPILE, 1);
    return e;
  }
  lt_graph g = {po->nodes, po->nnodes, po->param_of, po->nparams, roots, nroots};
  lt_executable *exe = NULL;
  int rc = be->compile(&g, &exe);
  if (rc != LT_OK) {
    lt__count(LT_CTR_COMPILE_FAILURE, 1);
    if (rc == LT_ENOMEM) return NULL;
    lt__err(LT_ECOMPILE, "compile failed: %s", lt_last_error());
    return NULL;
  }
  lt__count(LT_CTR_UNCACHED_COMPILE, 1);
  lt__count(LT_CTR_NODES_COMPILED, po->nnodes);
  return lt__cache_put(key, be, exe);
}

/* Syncs the pending values of ts[0..n) (all on one device). On failure every
 * tensor keeps its pending graph: nothing is lost. */
int lt__sync(lt_tensor *const *ts, int n) {
  if (n <= 0) return LT_OK;
  lt_device dev = ts[0]->dev;
  lt_device_ctx *ctx = lt__device_ctx("lt_sync", dev);
  if (!ctx) return LT_EDEVICE;
  const lt_backend *be = lt__backend_for(dev);

  /* Collect: tensors with pending IR, once per tensor. */
  lt_tensor **sel = scratch_get(&tl_tensors, (size_t)n * sizeof *sel);
  lt_node **roots = scratch_get(&tl_roots, (size_t)n * (sizeof(lt_node *) + sizeof(int)));
  if (!sel || !roots) return LT_ENOMEM;
  int *root_index = (int *)(roots + n);
  uint32_t mark = atomic_fetch_add(&g_epoch, 1) + 1;
  int nsel = 0;
  for (int i = 0; i < n; i++) {
    lt_tensor *t = ts[i];
    if (!t->ir || t->mark == mark) continue;
    if (!lt__device_equal(t->dev, dev))
      return lt__err(LT_EDEVICE, "lt_sync: tensors on different devices");
    t->mark = mark;
    roots[nsel] = t->ir;
    sel[nsel++] = t;
  }
  if (nsel == 0) return LT_OK;
  lt__count(LT_CTR_SYNC_TENSORS, 1);

  pthread_mutex_lock(&ctx->exec_lock);
  post_order po;
  lt_graph_key key;
  int rc = walk(roots, nsel, &po);
  if (rc == LT_OK) rc = graph_key(be, false, roots, nsel, &po, &key);
  if (rc != LT_OK) {
    pthread_mutex_unlock(&ctx->exec_lock);
    return rc;
  }
  for (int i = 0; i < nsel; i++) root_index[i] = roots[i]->order;
  lt_cache_entry *e = find_or_compile(be, key, &po, root_index, nsel);
  if (!e) {
    pthread_mutex_unlock(&ctx->exec_lock);
    return lt_last_status() ? lt_last_status() : LT_ECOMPILE;
  }
  lt_buffer *outs_small[16];
  lt_buffer **outs = nsel <= 16 ? outs_small : lt__malloc((size_t)nsel * sizeof *outs);
  if (!outs) {
    lt__cache_entry_release(e);
    pthread_mutex_unlock(&ctx->exec_lock);
    return LT_ENOMEM;
  }
  rc = be->execute(e->exe, po.params, po.nparams, outs, nsel);
  lt__cache_entry_release(e);
  pthread_mutex_unlock(&ctx->exec_lock);
  if (rc != LT_OK) {
    lt__count(LT_CTR_EXECUTE_FAILURE, 1);
    if (outs != outs_small) lt__free(outs, (size_t)nsel * sizeof *outs);
    return rc;
  }
  lt__count(LT_CTR_EXECUTE_COMPUTATION, 1);
  for (int i = 0; i < nsel; i++) {
    outs[i]->dev = dev;
    lt__tensor_set_buffer(sel[i], outs[i]);
  }
  if (outs != outs_small) lt__free(outs, (size_t)nsel * sizeof *outs);
  return LT_OK;
}

int lt_to_data(lt_tensor *t, void *dst, size_t nbytes) {
  if (!t) return lt__err_null("lt_to_data");
  size_t need = (size_t)lt__numel(t->shape, t->ndim) * lt_dtype_size((lt_dtype)t->dtype);
  if (!dst && need) return lt__err(LT_EINVAL, "lt_to_data: destination is NULL");
  if (nbytes < need)
    return lt__err(LT_EINVAL, "lt_to_data: destination holds %zu bytes, the tensor needs %zu",
                   nbytes, need);
  if (t->host) {
    if (need) memcpy(dst, t->host, need);
    return LT_OK;
  }
  if (t->ir) {
    int rc = lt__sync(&t, 1);
    if (rc != LT_OK) return rc;
  }
  int rc = t->buf->backend->from_device(t->buf, dst, nbytes);
  if (rc == LT_OK) lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
  return rc;
}

int lt_item(lt_tensor *t, int64_t flat_index, double *out) {
  if (!t) return lt__err_null("lt_item");
  int64_t numel = lt__numel(t->shape, t->ndim);
  if (!out) return lt__err(LT_EINVAL, "lt_item: out is NULL");
  if (flat_index < 0 || flat_index >= numel)
    return lt__err(LT_EINVAL, "lt_item: index %lld out of range for %lld elements",
                   (long long)flat_index, (long long)numel);
  size_t sz = lt_dtype_size((lt_dtype)t->dtype), nbytes = (size_t)numel * sz;
  unsigned char *tmp = lt__malloc(nbytes);
  if (!tmp) return LT_ENOMEM;
  int rc = lt_to_data(t, tmp, nbytes);
  if (rc == LT_OK) {
    const unsigned char *p = tmp + (size_t)flat_index * sz;
    switch ((lt_dtype)t->dtype) {
    case LT_BOOL:
      *out = *p;
      break;
    case LT_I32: {
      int32_t v;
      memcpy(&v, p, 4);
      *out = v;
      break;
    }
    case LT_I64: {
      int64_t v;
      memcpy(&v, p, 8);
      *out = (double)v;
      break;
    }
    case LT_F32: {
      float v;
      memcpy(&v, p, 4);
      *out = v;
      break;
    }
    default:
      memcpy(out, p, 8);
      break;
    }
  }
  lt__free(tmp, nbytes);
  return rc;
}
