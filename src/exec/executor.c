/* The graph executor: collect the tensors to sync, walk their pending graph
 * in post-order (device-data leaves become parameters), choose donors, compute
 * the graph key, find or compile the executable, and run it, synchronously or
 * on the device's worker with placeholders installed so tracing goes on. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../core/lt_alloc.h"
#include "../core/lt_dtype.h"
#include "../core/lt_error.h"
#include "cost.h"
#include "debug.h"
#include "disk_cache.h"
#include "exec_internal.h"
#include "lt_metrics.h"
#include "rng.h"

/* ---- settings and test hooks ---- */
static _Atomic int g_aliasing = -1; /* -1: not read from the environment yet */
static _Atomic int g_eager = -1;
static _Atomic int g_fault_skip[2] = {-1, -1};
static _Atomic int64_t g_exec_delay_us;

static bool env_flag(const char *name, bool dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  return !(strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "off") == 0);
}

bool lt_get_param_aliasing(void) {
  int v = atomic_load(&g_aliasing);
  if (v < 0) atomic_store(&g_aliasing, v = env_flag("LT_ENABLE_PARAM_ALIASING", true));
  return v;
}
void lt_set_param_aliasing(bool on) { atomic_store(&g_aliasing, on); }

bool lt_get_eager(void) {
  int v = atomic_load(&g_eager);
  if (v < 0) atomic_store(&g_eager, v = env_flag("LT_EAGER", false));
  return v;
}
void lt_set_eager(bool on) { atomic_store(&g_eager, on); }

void lt_inject_fault(lt_fault kind, int skip) {
  if (kind == LT_FAULT_EXECUTE || kind == LT_FAULT_COMPILE) atomic_store(&g_fault_skip[kind], skip);
}

bool lt__fault_fire(lt_fault kind) {
  int v = atomic_load(&g_fault_skip[kind]);
  while (v >= 0) {
    if (atomic_compare_exchange_weak(&g_fault_skip[kind], &v, v - 1)) return v == 0;
  }
  return false;
}

void lt_set_execute_delay_us(int64_t us) { atomic_store(&g_exec_delay_us, us > 0 ? us : 0); }
int64_t lt__execute_delay_us(void) { return atomic_load(&g_exec_delay_us); }

/* ---- scratch arrays reused across syncs on a thread ---- */
typedef struct scratch {
  void *p;
  size_t cap; /* bytes */
} scratch;

/* One set per thread, freed when the thread exits. */
typedef struct exec_scratch {
  scratch nodes, param_of, stack, params, roots, key, tensors, donors;
} exec_scratch;

static _Thread_local exec_scratch *tl_scratch;
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free_all(void *p) {
  exec_scratch *s = p;
  scratch *all[] = {&s->nodes, &s->param_of, &s->stack,   &s->params,
                    &s->roots, &s->key,      &s->tensors, &s->donors};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lt__free(all[i]->p, all[i]->cap);
  lt__free(s, sizeof *s);
}

static void scratch_key_init(void) { pthread_key_create(&g_scratch_key, scratch_free_all); }

static exec_scratch *scratch_self(void) {
  if (!tl_scratch) {
    pthread_once(&g_scratch_once, scratch_key_init);
    exec_scratch *s = lt__calloc(sizeof *s);
    if (!s) return NULL;
    pthread_setspecific(g_scratch_key, s);
    tl_scratch = s;
  }
  return tl_scratch;
}

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

/* ---- post-order walk ---- */

typedef struct walk_frame {
  lt_node *node;
  int next;
} walk_frame;

typedef struct post_order {
  lt_node **nodes;
  int *param_of;
  int nnodes;
  int nedges;  /* operands over all nodes, and */
  int nleaves; /* data leaves (one buffer may be read by several): the key's size */
  lt_buffer **params;
  int nparams;
} post_order;

static int reserve(scratch *s, size_t elem, int need, int *cap, void **p) {
  if (need <= *cap) return LT_OK;
  int ncap = *cap ? *cap * 2 : 64;
  while (ncap < need) ncap *= 2;
  void *q = scratch_get(s, elem * (size_t)ncap);
  if (!q) return LT_ENOMEM;
  *p = q;
  *cap = (int)(s->cap / elem);
  return LT_OK;
}

/* Iterative DFS, so deep graphs cannot overflow the stack. Parameters are
 * numbered in first-visit order, one per distinct buffer; graph_refs counts
 * the distinct leaves of this graph that hold each. */
static int walk(lt_node *const *roots, int nroots, post_order *po) {
  exec_scratch *S = scratch_self();
  if (!S) return LT_ENOMEM;
  uint32_t epoch = lt__node_epoch();
  int cap_nodes = 0, cap_pof = 0, cap_stack = 0, cap_params = 0, sp = 0;
  walk_frame *stack = NULL;
  po->nnodes = po->nparams = po->nedges = po->nleaves = 0;
  if (reserve(&S->stack, sizeof *stack, 64, &cap_stack, (void **)&stack) ||
      reserve(&S->nodes, sizeof(lt_node *), 256, &cap_nodes, (void **)&po->nodes) ||
      reserve(&S->param_of, sizeof(int), 256, &cap_pof, (void **)&po->param_of) ||
      reserve(&S->params, sizeof(lt_buffer *), 16, &cap_params, (void **)&po->params))
    return LT_ENOMEM;
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
        if (reserve(&S->stack, sizeof *stack, sp + 1, &cap_stack, (void **)&stack))
          return LT_ENOMEM;
        stack[sp++] = (walk_frame){child, 0};
        continue;
      }
      lt_node *n = top->node;
      sp--;
      int idx = po->nnodes;
      if (reserve(&S->nodes, sizeof(lt_node *), idx + 1, &cap_nodes, (void **)&po->nodes) ||
          reserve(&S->param_of, sizeof(int), idx + 1, &cap_pof, (void **)&po->param_of))
        return LT_ENOMEM;
      po->nnodes++;
      po->nedges += n->noperands;
      n->order = idx;
      po->nodes[idx] = n;
      po->param_of[idx] = -1;
      if (n->op != LT_OP_DATA) continue;
      po->nleaves++;
      lt_buffer *b = n->data;
      if (b->param_mark != epoch) { /* one buffer read twice is one parameter */
        if (reserve(&S->params, sizeof(lt_buffer *), po->nparams + 1, &cap_params,
                    (void **)&po->params))
          return LT_ENOMEM;
        b->param_mark = epoch;
        b->param_index = po->nparams;
        b->graph_refs = 0;
        po->params[po->nparams++] = b;
      }
      b->graph_refs++;
      po->param_of[idx] = b->param_index;
    }
  }
  return LT_OK;
}

/* Parameters whose storage may be reused by an output: at a step barrier
 * (force) or when the user marked them, and only when nothing outside this
 * graph holds them, so no one can observe the overwrite. */
static int choose_donors(const post_order *po, bool force, int **donors) {
  int n = 0;
  if (!lt_get_param_aliasing()) return 0;
  exec_scratch *S = scratch_self();
  if (!S) return -1;
  int *d = scratch_get(&S->donors, (size_t)(po->nparams + 1) * sizeof(int));
  if (!d) return -1;
  for (int p = 0; p < po->nparams; p++) {
    lt_buffer *b = po->params[p];
    if ((force || b->user_donate) && atomic_load(&b->refs) == b->graph_refs) d[n++] = p;
  }
  *donors = d;
  return n;
}

/* docs/DESIGN.md, rule 2: the key folds the compile environment, the force-data flag,
 * the roots, the graph's shape as a DAG and the parameter and donor sequences.
 * Node hashes are data-free and describe a node's expression as a tree, so
 * same-shaped leaves hash alike and g*a, g*b have one hash: two graphs can
 * share every root hash yet compute different values (which leaf a node reads,
 * which nodes are shared). The key therefore names every edge by its operand's
 * post-order position, and every root by its node's position. A node's hash
 * says whether it is a data leaf and how many operands it has, so each node
 * is its hash, its parameter index if a leaf, then its edges. */
static int graph_key(const lt_backend *be, bool force, lt_node *const *roots, int nroots,
                     const post_order *po, const int *donors, int ndonors, lt_graph_key *out) {
  size_t nwords = 6 + (size_t)nroots + (size_t)po->nnodes + (size_t)po->nleaves +
                  (size_t)po->nedges + (size_t)ndonors;
  exec_scratch *S = scratch_self();
  if (!S) return LT_ENOMEM;
  uint64_t *w = scratch_get(&S->key, nwords * sizeof *w);
  if (!w) return LT_ENOMEM;
  size_t k = 0;
  w[k++] = lt__backend_env_key(be);
  w[k++] = force;
  w[k++] = (uint64_t)po->nnodes;
  for (int i = 0; i < po->nnodes; i++) {
    const lt_node *n = po->nodes[i];
    w[k++] = n->hash;
    if (po->param_of[i] >= 0) w[k++] = (uint64_t)po->param_of[i];
    for (int j = 0; j < n->noperands; j++)
      w[k++] = (uint64_t)n->operands[j].index << 32 | (uint32_t)n->operands[j].node->order;
  }
  w[k++] = (uint64_t)nroots;
  for (int r = 0; r < nroots; r++) w[k++] = (uint64_t)roots[r]->order;
  w[k++] = (uint64_t)po->nparams;
  w[k++] = (uint64_t)ndonors;
  for (int i = 0; i < ndonors; i++) w[k++] = (uint64_t)donors[i];
  XXH128_hash_t h = XXH3_128bits(w, k * sizeof *w);
  out->lo = h.low64;
  out->hi = h.high64;
  return LT_OK;
}

/* Keys being compiled now. Replicas trace one graph at once and look it up
 * together: the first compiles it, the others wait for it and find it in the
 * cache (one compile for the world, as one executable serves every cpu
 * device). A key that does not fit the table compiles without this. */
#define MAX_INFLIGHT 64
static pthread_mutex_t g_inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_inflight_cond = PTHREAD_COND_INITIALIZER;
static lt_graph_key g_inflight[MAX_INFLIGHT];
static int g_ninflight;

static int inflight_find(lt_graph_key key) {
  for (int i = 0; i < g_ninflight; i++)
    if (g_inflight[i].lo == key.lo && g_inflight[i].hi == key.hi) return i;
  return -1;
}

/* After a miss: waits while another thread compiles key, then returns its
 * entry (referenced) if it landed in the cache; else claims key (*claimed)
 * and returns NULL. */
static lt_cache_entry *inflight_claim(lt_graph_key key, bool *claimed) {
  *claimed = false;
  pthread_mutex_lock(&g_inflight_lock);
  while (inflight_find(key) >= 0) pthread_cond_wait(&g_inflight_cond, &g_inflight_lock);
  /* again: it may have been compiled between the caller's miss and now */
  lt_cache_entry *e = lt__cache_get(key);
  if (!e && g_ninflight < MAX_INFLIGHT) {
    g_inflight[g_ninflight++] = key;
    *claimed = true;
  }
  pthread_mutex_unlock(&g_inflight_lock);
  return e;
}

static void inflight_done(lt_graph_key key) {
  pthread_mutex_lock(&g_inflight_lock);
  int i = inflight_find(key);
  if (i >= 0) g_inflight[i] = g_inflight[--g_ninflight];
  pthread_cond_broadcast(&g_inflight_cond);
  pthread_mutex_unlock(&g_inflight_lock);
}

static lt_cache_entry *compile_miss(const lt_backend *be, lt_graph_key key, const lt_graph *g);

/* The cost of e's graph, g, once per entry (an executable loaded from a
 * program file enters the cache before any graph is at hand). */
static lt_cache_entry *with_cost(lt_cache_entry *e, const lt_graph *g) {
  if (e && !atomic_load(&e->costed)) {
    int64_t flops, bytes;
    lt__graph_cost(g, &flops, &bytes);
    atomic_store(&e->flops, flops);
    atomic_store(&e->bytes, bytes);
    atomic_store(&e->costed, true);
  }
  return e;
}

/* Compiles on a miss; returns a referenced cache entry or NULL with the error set. */
static lt_cache_entry *find_or_compile(const lt_backend *be, lt_graph_key key, const lt_graph *g,
                                       const char *reason, int dev) {
  lt_cache_entry *e = lt__cache_get(key);
  bool claimed = false;
  if (!e) e = inflight_claim(key, &claimed);
  lt__value_add(LT_VALUE_GRAPH_SIZE, g->nnodes);
  lt__debug_graph(g, key, reason, e == NULL, dev);
  if (e) {
    lt__count(LT_CTR_CACHED_COMPILE, 1);
    return with_cost(e, g);
  }
  e = compile_miss(be, key, g);
  if (claimed) inflight_done(key);
  return with_cost(e, g);
}

static lt_cache_entry *compile_miss(const lt_backend *be, lt_graph_key key, const lt_graph *g) {
  lt_executable *exe = NULL;
  if (lt__disk_cache_enabled(be) && lt__disk_cache_load(be, key, &exe) == LT_OK)
    return lt__cache_put(key, be, exe); /* compiled by an earlier process */
  int64_t t0 = lt__now_ns();
  int rc = lt__fault_fire(LT_FAULT_COMPILE)
               ? lt__err(LT_ECOMPILE, "compile failed: injected fault (lt_inject_fault)")
               : be->compile(g, &exe);
  lt__timer_add(LT_TIMER_COMPILE, lt__now_ns() - t0);
  if (rc != LT_OK) {
    lt__count(LT_CTR_COMPILE_FAILURE, 1);
    if (rc != LT_ENOMEM && rc != LT_ECOMPILE)
      lt__err(LT_ECOMPILE, "compile failed: %s", lt_last_error());
    return NULL;
  }
  lt__count(LT_CTR_UNCACHED_COMPILE, 1);
  lt__count(LT_CTR_NODES_COMPILED, g->nnodes);
  lt__value_add(LT_VALUE_ALIAS_COUNT, g->ndonors);
  if (lt__disk_cache_enabled(be)) lt__disk_cache_store(be, key, exe);
  return lt__cache_put(key, be, exe);
}

/* A job for the collected roots: placeholders, retained parameters. */
static lt_exec_job *make_job(lt_exec_dev *ctx, lt_cache_entry *e, const post_order *po,
                             lt_tensor *const *sel, int nsel) {
  lt_exec_job *job = lt__calloc(sizeof *job);
  if (!job) return NULL;
  job->ctx = ctx;
  job->entry = e;
  job->params = lt__calloc((size_t)(po->nparams + 1) * sizeof *job->params);
  job->outs = lt__calloc((size_t)nsel * sizeof *job->outs);
  if (!job->params || !job->outs) goto fail;
  for (int p = 0; p < po->nparams; p++)
    job->params[job->nparams++] = lt__buffer_retain(po->params[p]);
  const lt_backend *be = e->backend;
  for (int i = 0; i < nsel; i++) {
    lt_tensor *t = sel[i];
    lt_buffer *b = lt__buffer_new(be, t->dev, (lt_dtype)t->dtype, t->shape, t->ndim);
    if (!b) goto fail;
    b->owner_id = t->id;
    job->outs[job->nouts++] = b;
  }
  return job;
fail:
  job->entry = NULL; /* the caller still owns e */
  lt__job_free(job);
  return NULL;
}

/* TraceTime: from the end of the device's last sync to the start of this
 * one (t_call), less the waits for the device lock in between, which are
 * DeviceLockWait's (lt_wait_device_ops, say). This sync's own wait, from
 * t_call on, is DeviceLockWait's too: the time between two syncs is all one
 * or the other. Called by the lock holder. */
static void record_trace(lt_exec_dev *ctx, int64_t t_call) {
  if (!ctx->last_sync_end_ns) return;
  int64_t waits = ctx->lock_wait_ns - ctx->last_wait_ns - ctx->lock_wait_at_sync_end;
  int64_t ns = t_call - ctx->last_sync_end_ns - waits;
  lt__timer_add(LT_TIMER_TRACE, ns > 0 ? ns : 0);
}

static void end_sync(lt_exec_dev *ctx) {
  ctx->last_sync_end_ns = lt__now_ns();
  ctx->lock_wait_at_sync_end = ctx->lock_wait_ns;
}

/* Collects the tensors of ts that hold a pending graph, once each, into sel
 * and their nodes into roots; upload: host data is uploaded too (a step
 * barrier). Returns how many, or -1 with the error set. */
static int collect(lt_tensor *const *ts, int n, bool upload, lt_tensor **sel, lt_node **roots) {
  uint32_t mark = lt__node_epoch();
  int nsel = 0;
  for (int i = 0; i < n; i++) {
    lt_tensor *t = ts[i];
    if (upload && t->host && !lt__tensor_ir(t)) return -1;
    if (!t->ir || t->mark == mark) continue;
    t->mark = mark;
    roots[nsel] = t->ir;
    sel[nsel++] = t;
  }
  return nsel;
}

/* The executable a sync of roots runs (referenced), found or compiled: walks
 * their graph into po, chooses the donors and computes the key. NULL with the
 * error set (naming fn). The caller holds the device lock. */
static lt_cache_entry *plan(lt_exec_dev *ctx, lt_device dev, lt_node *const *roots, int *root_index,
                            int nroots, bool force, const char *fn, const char *reason,
                            post_order *po) {
  lt_cache_entry *e = NULL;
  int *donors = NULL, ndonors = 0;
  lt_graph_key key;
  const lt_backend *be = lt__backend_for(dev);
  lt__graph_lock(ctx);
  if (walk(roots, nroots, po) != LT_OK) goto oom;
  for (int p = 0; p < po->nparams; p++) /* an input whose own step failed */
    if (atomic_load(&po->params[p]->state) != LT_BUF_READY &&
        lt__buffer_wait(po->params[p]) != LT_OK)
      goto out;
  if ((ndonors = choose_donors(po, force, &donors)) < 0) goto oom;
  if (graph_key(be, force, roots, nroots, po, donors, ndonors, &key) != LT_OK) goto oom;
  for (int i = 0; i < nroots; i++) root_index[i] = roots[i]->order;
  lt_graph g = {po->nodes,  po->nnodes, po->param_of, po->nparams,
                root_index, nroots,     donors,       ndonors};
  e = find_or_compile(be, key, &g, reason, dev.index);
  goto out;
oom:
  lt__err(LT_ENOMEM, "%s: out of memory", fn);
out:
  lt__graph_unlock(ctx);
  return e;
}

int lt__sync_internal(lt_tensor *const *ts, int n, bool force, bool wait, const char *reason) {
  if (n <= 0) return LT_OK;
  int64_t t_call = lt__now_ns();
  for (int i = 0; i < n; i++)
    if (lt__tensor_check("lt_sync", ts[i]) != LT_OK) return LT_EINVAL;
  lt_device dev = ts[0]->dev;
  for (int i = 1; i < n; i++)
    if (!lt__device_equal(ts[i]->dev, dev))
      return lt__err(LT_EDEVICE, "lt_sync: tensors on different devices");
  lt_exec_dev *ctx = lt__exec_dev("lt_sync", dev);
  if (!ctx) return LT_EDEVICE;
  int rc = lt__device_acquire_since(ctx, true, t_call);
  if (rc != LT_OK) return rc;
  record_trace(ctx, t_call);

  exec_scratch *S = scratch_self();
  if (!S) goto oom;
  lt_tensor **sel = scratch_get(&S->tensors, (size_t)n * sizeof *sel);
  lt_node **roots = scratch_get(&S->roots, (size_t)n * (sizeof(lt_node *) + sizeof(int)));
  if (!sel || !roots) goto oom;
  int *root_index = (int *)(roots + n);
  int nsel = collect(ts, n, force, sel, roots);
  if (nsel < 0) goto fail;
  if (nsel == 0) {
    end_sync(ctx);
    lt__device_release(ctx);
    return LT_OK;
  }
  lt__count(LT_CTR_SYNC_TENSORS, 1);

  post_order po;
  lt_cache_entry *e = plan(ctx, dev, roots, root_index, nsel, force, "lt_sync", reason, &po);
  if (!e) goto fail;
  lt_exec_job *job = make_job(ctx, e, &po, sel, nsel);
  if (!job) {
    lt__cache_entry_release(e);
    goto oom;
  }
  if (wait) {
    /* Placeholders are installed only after success: on failure every tensor
     * keeps its pending graph. */
    rc = lt__job_run_sync(job);
    if (rc == LT_OK)
      for (int i = 0; i < nsel; i++) lt__tensor_set_buffer(sel[i], lt__buffer_retain(job->outs[i]));
    lt__job_free(job);
    end_sync(ctx);
    lt__device_release(ctx);
    return rc;
  }
  for (int i = 0; i < nsel; i++) lt__tensor_set_buffer(sel[i], lt__buffer_retain(job->outs[i]));
  end_sync(ctx);
  return lt__job_run_async(job); /* the worker releases the device */
oom:
  lt__err(LT_ENOMEM, "lt_sync: out of memory");
fail:
  rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
  end_sync(ctx);
  lt__device_release(ctx);
  return rc;
}

/* ---- public entry points ---- */
int lt_sync(lt_tensor *const *ts, int n, bool wait) {
  if (n < 0 || (n > 0 && !ts)) return lt__err(LT_EINVAL, "lt_sync: bad tensor list");
  int rc = lt__sync_internal(ts, n, false, wait, "sync");
  if (rc != LT_OK || !wait) return rc;
  for (int i = 0; i < n; i++) /* values computed by an earlier async step */
    if (ts[i]->buf && (rc = lt__buffer_wait(ts[i]->buf)) != LT_OK) return rc;
  return LT_OK;
}

int lt_mark_step(lt_device dev) {
  lt_exec_dev *ctx = lt__exec_dev("lt_mark_step", dev);
  if (!ctx) return LT_EDEVICE;
  int n = 0;
  lt_tensor **live = lt__device_live_snapshot(ctx->core, &n);
  if (!live) return LT_ENOMEM;
  int rc = LT_OK;
  if (n > 0) {
    rc = lt__sync_internal(live, n, true, false, "mark_step");
  } else {
    rc = lt__device_acquire(ctx, true); /* still reports an earlier failure */
    if (rc == LT_OK) lt__device_release(ctx);
  }
  for (int i = 0; i < n; i++) lt_release(live[i]);
  lt__free(live, (size_t)n * sizeof *live);
  if (rc != LT_OK) return rc;
  lt__rng_on_mark_step(dev);
  lt__count(LT_CTR_MARK_STEP, 1);
  lt__metrics_on_step();
  return LT_OK;
}

int lt_wait_device_ops(lt_device dev) {
  lt_exec_dev *ctx = lt__exec_dev("lt_wait_device_ops", dev);
  if (!ctx) return LT_EDEVICE;
  int rc = lt__device_acquire(ctx, true);
  if (rc == LT_OK) lt__device_release(ctx);
  return rc;
}

int lt__compile_roots(lt_device dev, lt_node *const *roots, int nroots, const char *reason,
                      lt_graph_key *key, lt_buffer ***params, int *nparams,
                      lt_cache_entry **entry) {
  lt_exec_dev *ctx = lt__exec_dev(reason, dev); /* known: the caller holds its lock */
  if (!ctx) return LT_EDEVICE;
  int *root_index = lt__malloc((size_t)(nroots + 1) * sizeof(int));
  if (!root_index) return LT_ENOMEM;
  post_order po;
  const lt_backend *be = lt__backend_for(dev); /* once: the key and the compile agree */
  lt__graph_lock(ctx);
  int rc = walk(roots, nroots, &po);
  if (rc == LT_OK) rc = graph_key(be, false, roots, nroots, &po, NULL, 0, key);
  if (rc == LT_OK) {
    for (int i = 0; i < nroots; i++) root_index[i] = roots[i]->order;
    lt_graph g = {po.nodes, po.nnodes, po.param_of, po.nparams, root_index, nroots, NULL, 0};
    *entry = find_or_compile(be, *key, &g, reason, dev.index);
    if (!*entry) rc = lt_last_status() ? lt_last_status() : LT_ECOMPILE;
    *params = po.params;
    *nparams = po.nparams;
  }
  lt__graph_unlock(ctx);
  lt__free(root_index, (size_t)(nroots + 1) * sizeof(int));
  return rc;
}

/* Compiles what lt_mark_step will run when ts are the device's pending
 * tensors: roots in the order the step collects them (the device's live
 * list), the step barrier's flag and its donors, so that the key is the one
 * the step looks up. Nothing is uploaded or run. The caller holds the device
 * lock. */
static int warm_step(lt_exec_dev *ctx, lt_device dev, lt_tensor *const *ts, int n, const char *fn) {
  int nlive = 0;
  lt_tensor **live = lt__device_live_snapshot(ctx->core, &nlive);
  exec_scratch *S = scratch_self();
  lt_tensor **sel = S ? scratch_get(&S->tensors, (size_t)(n + 1) * sizeof *sel) : NULL;
  lt_node **roots =
      S ? scratch_get(&S->roots, (size_t)(n + 1) * (sizeof(lt_node *) + sizeof(int))) : NULL;
  int rc = live && sel && roots ? LT_OK : lt__err(LT_ENOMEM, "%s: out of memory", fn);
  if (rc == LT_OK) {
    uint32_t mark = lt__node_epoch();
    for (int i = 0; i < n; i++) ts[i]->mark = mark;
    int k = 0; /* ts in live-list order */
    for (int i = 0; i < nlive && k < n; i++)
      if (live[i]->mark == mark) sel[k++] = live[i];
    int *root_index = (int *)(roots + n + 1);
    int nsel = collect(sel, k, false, sel, roots); /* in place: it keeps a prefix */
    post_order po;
    lt_cache_entry *e = NULL;
    if (nsel > 0) e = plan(ctx, dev, roots, root_index, nsel, true, fn, "warm-up", &po);
    if (nsel > 0 && !e) rc = lt_last_status() ? lt_last_status() : LT_ECOMPILE;
    lt__cache_entry_release(e);
  }
  for (int i = 0; i < nlive; i++) lt_release(live[i]);
  lt__free(live, (size_t)nlive * sizeof *live);
  return rc;
}

/* Compiles what reading ts compiles: lt_sync(ts, n) and, for one tensor,
 * lt_to_data: the roots in ts's order, no step barrier, and the donors such
 * a sync chooses (tensors marked by lt_set_donatable). Nothing is uploaded
 * or run. The caller holds the device lock. */
static int warm_read(lt_exec_dev *ctx, lt_device dev, lt_tensor *const *ts, int n, const char *fn) {
  exec_scratch *S = scratch_self();
  lt_tensor **sel = S ? scratch_get(&S->tensors, (size_t)n * sizeof *sel) : NULL;
  lt_node **roots =
      S ? scratch_get(&S->roots, (size_t)n * (sizeof(lt_node *) + sizeof(int))) : NULL;
  if (!sel || !roots) return lt__err(LT_ENOMEM, "%s: out of memory", fn);
  int *root_index = (int *)(roots + n);
  int nsel = collect(ts, n, false, sel, roots);
  if (nsel <= 0) return LT_OK; /* nothing pending: a read compiles nothing */
  post_order po;
  lt_cache_entry *e = plan(ctx, dev, roots, root_index, nsel, false, fn, "warm-up", &po);
  if (!e) return lt_last_status() ? lt_last_status() : LT_ECOMPILE;
  lt__cache_entry_release(e);
  return LT_OK;
}

/* A caller's tensor list: each a live tensor, all on one device (*dev; n > 0). */
static int check_tensor_list(lt_tensor *const *ts, int n, const char *fn, lt_device *dev) {
  if (n < 0 || (n > 0 && !ts)) return lt__err(LT_EINVAL, "%s: bad tensor list", fn);
  for (int i = 0; i < n; i++)
    if (lt__tensor_check(fn, ts[i]) != LT_OK) return LT_EINVAL;
  if (n == 0) return LT_OK;
  *dev = ts[0]->dev;
  for (int i = 1; i < n; i++)
    if (!lt__device_equal(ts[i]->dev, *dev))
      return lt__err(LT_EDEVICE, "%s: tensors on different devices", fn);
  return LT_OK;
}

static int warmup(lt_tensor *const *ts, int n, bool step, const char *fn) {
  lt_device dev;
  int rc = check_tensor_list(ts, n, fn, &dev);
  if (rc != LT_OK || n == 0) return rc;
  lt_exec_dev *ctx = lt__exec_dev(fn, dev);
  if (!ctx) return LT_EDEVICE;
  rc = lt__device_acquire(ctx, false);
  if (rc != LT_OK) return rc;
  rc = step ? warm_step(ctx, dev, ts, n, fn) : warm_read(ctx, dev, ts, n, fn);
  lt__device_release(ctx);
  return rc;
}

/* lt_get_graph_cost: the pending graph of ts walked as a sync would walk
 * it, nothing compiled or run. */
int lt_get_graph_cost(lt_tensor *const *ts, int n, lt_cost *out) {
  const char *fn = "lt_get_graph_cost";
  if (!out) return lt__err(LT_EINVAL, "%s: out is NULL", fn);
  lt_device dev;
  int rc = check_tensor_list(ts, n, fn, &dev);
  if (rc != LT_OK) return rc;
  if (n == 0) {
    *out = (lt_cost){0, 0};
    return LT_OK;
  }
  lt_exec_dev *ctx = lt__exec_dev(fn, dev);
  if (!ctx) return LT_EDEVICE;
  rc = lt__device_acquire(ctx, false); /* the walk marks nodes and buffers */
  if (rc != LT_OK) return rc;
  exec_scratch *S = scratch_self();
  lt_tensor **sel = S ? scratch_get(&S->tensors, (size_t)n * sizeof *sel) : NULL;
  lt_node **roots = S ? scratch_get(&S->roots, (size_t)n * sizeof *roots) : NULL;
  /* no upload: collect cannot fail, and tensors without a pending graph add nothing */
  int nsel = sel && roots ? collect(ts, n, false, sel, roots) : -1;
  post_order po = {.nnodes = 0};
  lt__graph_lock(ctx);
  rc = nsel > 0 ? walk(roots, nsel, &po) : nsel == 0 ? LT_OK : LT_ENOMEM;
  if (rc == LT_ENOMEM) lt__err(LT_ENOMEM, "%s: out of memory", fn);
  if (rc == LT_OK) {
    lt_graph g = {.nodes = po.nodes, .nnodes = po.nnodes};
    int64_t flops, bytes;
    lt__graph_cost(&g, &flops, &bytes);
    *out = (lt_cost){(double)flops, (double)bytes};
  }
  lt__graph_unlock(ctx);
  lt__device_release(ctx);
  return rc;
}

int lt_warmup(lt_tensor *const *ts, int n) { return warmup(ts, n, false, "lt_warmup"); }
int lt_warmup_step(lt_tensor *const *ts, int n) { return warmup(ts, n, true, "lt_warmup_step"); }

int lt_clear_pending(lt_device dev) {
  lt_exec_dev *ctx = lt__exec_dev("lt_clear_pending", dev);
  if (!ctx) return LT_EDEVICE;
  int n = 0, cleared = 0;
  lt_tensor **live = lt__device_live_snapshot(ctx->core, &n);
  if (!live) return LT_ENOMEM;
  for (int i = 0; i < n; i++) {
    lt_tensor *t = live[i];
    if (t->ir) {
      lt_buffer *b =
          lt__buffer_new(lt__backend_for(dev), dev, (lt_dtype)t->dtype, t->shape, t->ndim);
      if (b) {
        lt__buffer_fail(b, LT_EINVAL, "this tensor's pending graph was dropped by lt_clear_pending",
                        0);
        lt__tensor_set_buffer(t, b);
        cleared++;
      }
    }
    lt_release(t);
  }
  lt__free(live, (size_t)n * sizeof *live);
  lt__count(LT_CTR_CLEARED_PENDING, cleared);
  return cleared;
}

int lt_set_donatable(lt_tensor *t, bool on) {
  if (lt__tensor_check("lt_set_donatable", t) != LT_OK) return LT_EINVAL;
  if (t->host && !lt__tensor_ir(t)) return lt_last_status();
  if (!t->buf)
    return lt__err(LT_EINVAL, "lt_set_donatable: tensor %lld holds a pending graph, not a buffer",
                   (long long)t->id);
  t->buf->user_donate = on;
  return LT_OK;
}

int lt_device_memory(lt_device dev, int64_t *live_bytes, int64_t *peak_bytes) {
  if (!lt__exec_dev("lt_device_memory", dev)) return LT_EDEVICE;
  if (live_bytes) *live_bytes = lt__device_bytes_live(dev);
  if (peak_bytes) *peak_bytes = lt__device_bytes_peak(dev);
  return LT_OK;
}

void lt_device_memory_reset_peak(lt_device dev) { lt__device_bytes_reset_peak(dev); }

/* Reads a tensor's buffer once it is ready; a failed one reports its error
 * (and counts as the report of its device's pending error). */
static int wait_value(lt_tensor *t) {
  int rc = lt__buffer_wait(t->buf);
  if (rc != LT_OK && atomic_load(&t->buf->state) == LT_BUF_FAILED) {
    lt_exec_dev *ctx = lt__exec_dev("lt_to_data", t->dev);
    if (ctx) lt__device_error_seen(ctx, t->buf->err_seq);
  }
  return rc;
}

/* The shape a read hands back: a sharded tensor's global one. */
static const int64_t *read_shape(const lt_tensor *t) { return t->shard_n ? t->gshape : t->shape; }

/* A sharded tensor's whole value (lazytensor_collective.h), read as the
 * reference moves a sharded tensor to the host: an all-gather of its chunk
 * in a graph of its own, which every replica runs (it is a collective). t
 * itself is left sharded; its pending graph, if any, is run in the same
 * graph and t keeps its chunk as its value, as a read of any tensor does. */
static int read_gathered(const char *fn, lt_tensor *t, void *dst, size_t nbytes) {
  lt_node *x = lt__node_retain(lt__tensor_ir(t)); /* uploads host data first */
  if (!x) return lt_last_status() ? lt_last_status() : LT_ENOMEM;
  int64_t attrs[2] = {t->shard_axis, t->shard_n};
  lt_node *g = lt__node_make(LT_OP_SPMD_ALL_GATHER, (lt_dtype)t->dtype, t->gshape, t->ndim, &x, 1,
                             attrs, 2, 0.0);
  lt_tensor *whole = lt__tensor_new_unscoped(t->dev, g); /* consumes g */
  if (!whole) return lt__err(LT_ENOMEM, "%s: out of memory gathering a sharded tensor", fn);
  lt_tensor *ts[2] = {whole, t};
  int rc = lt__sync_internal(ts, t->ir ? 2 : 1, false, true, "value read");
  if (rc == LT_OK) rc = wait_value(whole);
  if (rc == LT_OK) {
    int64_t t0 = lt__now_ns();
    rc = whole->buf->backend->from_device(whole->buf, dst, nbytes);
    lt__timer_add(LT_TIMER_TRANSFER_FROM, lt__now_ns() - t0);
    if (rc == LT_OK) lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
  }
  lt_release(whole);
  return rc;
}

/* lt_to_data under the name of the public function that called it. */
static int read_value(const char *fn, lt_tensor *t, void *dst, size_t nbytes) {
  size_t need = (size_t)lt__numel(read_shape(t), t->ndim) * lt_dtype_size((lt_dtype)t->dtype);
  if (!dst && need) return lt__err(LT_EINVAL, "%s: destination is NULL", fn);
  if (nbytes < need)
    return lt__err(LT_EINVAL, "%s: destination holds %zu bytes, the tensor needs %zu", fn, nbytes,
                   need);
  if (t->shard_n) return read_gathered(fn, t, dst, need);
  if (t->host) {
    if (need) memcpy(dst, t->host, need);
    return LT_OK;
  }
  int rc;
  if (t->ir && (rc = lt__sync_internal(&t, 1, false, true, "value read")) != LT_OK) return rc;
  if ((rc = wait_value(t)) != LT_OK) return rc;
  int64_t t0 = lt__now_ns();
  rc = t->buf->backend->from_device(t->buf, dst, nbytes);
  lt__timer_add(LT_TIMER_TRANSFER_FROM, lt__now_ns() - t0);
  if (rc == LT_OK) lt__count(LT_CTR_TRANSFER_FROM_DEVICE, 1);
  return rc;
}

int lt_to_data(lt_tensor *t, void *dst, size_t nbytes) {
  if (lt__tensor_check("lt_to_data", t) != LT_OK) return LT_EINVAL;
  return read_value("lt_to_data", t, dst, nbytes);
}

int lt_to_f32(lt_tensor *t, float *dst, size_t n) {
  if (lt__tensor_check("lt_to_f32", t) != LT_OK) return LT_EINVAL;
  int64_t numel = lt__numel(read_shape(t), t->ndim);
  if (!dst && numel) return lt__err(LT_EINVAL, "lt_to_f32: destination is NULL");
  if (n < (size_t)numel)
    return lt__err(LT_EINVAL, "lt_to_f32: destination holds %zu elements, the tensor has %lld", n,
                   (long long)numel);
  size_t nbytes = (size_t)numel * lt_dtype_size((lt_dtype)t->dtype);
  unsigned char *tmp = lt__malloc(nbytes ? nbytes : 1);
  if (!tmp) return LT_ENOMEM;
  int rc = read_value("lt_to_f32", t, tmp, nbytes);
  /* as CAST to f32: bit for bit from f32 and bf16 (NaN payloads too, which
   * a trip through double would quiet), rounded from f64 and i64 */
  if (rc == LT_OK && t->dtype == LT_F32)
    memcpy(dst, tmp, nbytes);
  else if (rc == LT_OK && t->dtype == LT_BF16)
    for (int64_t i = 0; i < numel; i++) dst[i] = lt__bf16_to_f32(((const uint16_t *)tmp)[i]);
  else if (rc == LT_OK)
    for (int64_t i = 0; i < numel; i++) dst[i] = (float)lt__load_f64(t->dtype, tmp, i);
  lt__free(tmp, nbytes ? nbytes : 1);
  return rc;
}

int lt_item(lt_tensor *t, int64_t flat_index, double *out) {
  if (lt__tensor_check("lt_item", t) != LT_OK) return LT_EINVAL;
  int64_t numel = lt__numel(read_shape(t), t->ndim);
  if (!out) return lt__err(LT_EINVAL, "lt_item: out is NULL");
  if (flat_index < 0 || flat_index >= numel)
    return lt__err(LT_EINVAL, "lt_item: index %lld out of range for %lld elements",
                   (long long)flat_index, (long long)numel);
  size_t sz = lt_dtype_size((lt_dtype)t->dtype), nbytes = (size_t)numel * sz;
  unsigned char *tmp = lt__malloc(nbytes);
  if (!tmp) return LT_ENOMEM;
  int rc = read_value("lt_item", t, tmp, nbytes);
  if (rc == LT_OK) {
    *out = lt__load_f64(t->dtype, tmp, flat_index);
  }
  lt__free(tmp, nbytes);
  return rc;
}
