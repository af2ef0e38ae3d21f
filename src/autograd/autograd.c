/* Reverse-mode differentiation over the IR. lt_backward walks the loss's
 * pending graph in post-order, marks the nodes that lie between a
 * requires-grad tensor's value and the loss, and sweeps them in reverse,
 * asking each op's rule (ag_*.c) for its operands' gradients. Gradients are
 * IR nodes: nothing runs until the step is synced. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../core/lt_alloc.h"
#include "../core/lt_device.h"
#include "../exec/exec_internal.h"
#include "ag.h"
#include "ag_nograd.h"

/* The requires-grad tensors of the process, by id: backward finds its leaves
 * through the ids stamped on graph nodes, and takes a reference only on a
 * tensor that is still alive (another thread may be releasing its own). */
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_tensor **g_reg;
static int g_reg_n, g_reg_cap;

static void ag_forget(lt_tensor *t);

static int reg_add(lt_tensor *t) {
  /* A requires-grad tensor that dies must leave the registry: core calls back
   * through this hook (it cannot call autograd itself). */
  lt__tensor_set_release_hook(ag_forget);
  pthread_mutex_lock(&g_reg_lock);
  int rc = LT_OK;
  if (g_reg_n == g_reg_cap) {
    int ncap = g_reg_cap ? g_reg_cap * 2 : 64;
    lt_tensor **g = lt__realloc(g_reg, (size_t)g_reg_cap * sizeof *g, (size_t)ncap * sizeof *g);
    if (g) {
      g_reg = g;
      g_reg_cap = ncap;
    } else {
      rc = LT_ENOMEM;
    }
  }
  if (rc == LT_OK) g_reg[g_reg_n++] = t;
  pthread_mutex_unlock(&g_reg_lock);
  return rc;
}

static void ag_forget(lt_tensor *t) {
  pthread_mutex_lock(&g_reg_lock);
  for (int i = 0; i < g_reg_n; i++)
    if (g_reg[i] == t) {
      g_reg[i] = g_reg[--g_reg_n];
      break;
    }
  pthread_mutex_unlock(&g_reg_lock);
}

/* A new reference on the live requires-grad tensor with this id, or NULL. */
static lt_tensor *reg_get(int64_t id) {
  lt_tensor *found = NULL;
  pthread_mutex_lock(&g_reg_lock);
  for (int i = 0; i < g_reg_n && !found; i++) {
    lt_tensor *t = g_reg[i];
    if (t->id != id) continue;
    int r = atomic_load(&t->refs);
    while (r > 0 && !atomic_compare_exchange_weak(&t->refs, &r, r + 1)) {
    }
    if (r > 0) found = t;
  }
  pthread_mutex_unlock(&g_reg_lock);
  return found;
}

int lt_set_requires_grad(lt_tensor *t, bool on) {
  if (lt__tensor_check("lt_set_requires_grad", t) != LT_OK) return LT_EINVAL;
  if (on && !lt__is_float((lt_dtype)t->dtype))
    return lt__err(LT_EDTYPE, "lt_set_requires_grad: only floating tensors have gradients (got %s)",
                   lt_dtype_name((lt_dtype)t->dtype));
  if (on == t->requires_grad) return LT_OK;
  if (on) {
    int rc = reg_add(t);
    if (rc != LT_OK) return lt__err(rc, "lt_set_requires_grad: out of memory");
    t->requires_grad = true;
    lt_node *n = t->ir ? t->ir : t->data_node; /* a value already read by graphs */
    if (n) n->grad_id = t->id;
  } else {
    ag_forget(t);
    t->requires_grad = false;
  }
  return LT_OK;
}

bool lt_get_requires_grad(const lt_tensor *t) {
  return t && lt__tensor_check("lt_get_requires_grad", t) == LT_OK && t->requires_grad;
}

lt_tensor *lt_grad(lt_tensor *t) {
  return t && lt__tensor_check("lt_grad", t) == LT_OK ? t->grad : NULL;
}

int lt_zero_grad(lt_tensor *t) {
  if (lt__tensor_check("lt_zero_grad", t) != LT_OK) return LT_EINVAL;
  lt_release(t->grad);
  t->grad = NULL;
  return LT_OK;
}

/* Each op's rule, from the op table's GRAD column. */
#define AG_RULE_ROW(E, name, fam, arity, res, grad, ref, cpu) [LT_OP_##E] = lt__ag_rule_##grad,
static const ag_vjp_fn kRules[LT_OP_COUNT] = {LT_OP_TABLE(AG_RULE_ROW)};
#undef AG_RULE_ROW

ag_vjp_fn lt__ag_rule(lt_op op) { return op < LT_OP_COUNT ? kRules[op] : NULL; }

/* Leaves: nodes stamped with the id of a requires-grad tensor (its value
 * where a graph read it). The lookup list holds a reference on each tensor. */
typedef struct leaf_set {
  int64_t *ids;
  lt_tensor **ts;
  int n, cap;
} leaf_set;

static lt_tensor *leaf_of(lt_node *n, leaf_set *ls) {
  if (!n->grad_id) return NULL;
  for (int i = 0; i < ls->n; i++)
    if (ls->ids[i] == n->grad_id) return ls->ts[i];
  if (ls->n == ls->cap) {
    int ncap = ls->cap ? ls->cap * 2 : 16;
    int64_t *ids = lt__realloc(ls->ids, (size_t)ls->cap * sizeof *ids, (size_t)ncap * sizeof *ids);
    if (!ids) return NULL;
    ls->ids = ids;
    lt_tensor **ts = lt__realloc(ls->ts, (size_t)ls->cap * sizeof *ts, (size_t)ncap * sizeof *ts);
    if (!ts) return NULL;
    ls->ts = ts;
    ls->cap = ncap;
  }
  lt_tensor *t = reg_get(n->grad_id); /* NULL: that tensor is gone, an ordinary value */
  ls->ids[ls->n] = n->grad_id;
  ls->ts[ls->n++] = t;
  return t;
}

static void leaf_set_free(leaf_set *ls) {
  for (int i = 0; i < ls->n; i++) lt_release(ls->ts[i]);
  lt__free(ls->ids, (size_t)ls->cap * sizeof *ls->ids);
  lt__free(ls->ts, (size_t)ls->cap * sizeof *ls->ts);
}

typedef struct ag_state {
  lt_node **nodes; /* post-order */
  int n, cap;
  lt_node **grads;  /* per node, NEW refs */
  lt_tensor **leaf; /* per node, the requires-grad tensor it is the value of */
  bool *needed;     /* per node: on a path from a leaf to the loss */
} ag_state;

static int push(ag_state *s, lt_node *n) {
  if (s->n == s->cap) {
    int ncap = s->cap ? s->cap * 2 : 256;
    lt_node **g = lt__realloc(s->nodes, (size_t)s->cap * sizeof *g, (size_t)ncap * sizeof *g);
    if (!g) return LT_ENOMEM;
    s->nodes = g;
    s->cap = ncap;
  }
  n->order = s->n;
  s->nodes[s->n++] = n;
  return LT_OK;
}

/* The node an operand stands for. A value computed in eager mode is read as
 * a data leaf, which remembers the node that computed it (lt_node.origin):
 * differentiation goes on through that node, as if the graph had not been
 * cut, unless the leaf is a requires-grad tensor's value or a constant to
 * autograd (stamped). */
static lt_node *through(lt_node *c) {
  while (c->op == LT_OP_DATA && c->origin && c->grad_id == 0) c = c->origin;
  return c;
}

/* Iterative post-order over the loss graph; a node that is a requires-grad
 * tensor's value is a leaf: its operands are not differentiated through. */
static int post_order(ag_state *s, lt_node *root, leaf_set *ls) {
  uint32_t epoch = lt__node_epoch();
  typedef struct frame {
    lt_node *node;
    int next;
  } frame;
  int sp = 0, cap = 64, rc = LT_OK;
  frame *stack = lt__malloc((size_t)cap * sizeof *stack);
  if (!stack) return LT_ENOMEM;
  root->visit = epoch;
  stack[sp++] = (frame){root, 0};
  while (sp && rc == LT_OK) {
    frame *top = &stack[sp - 1];
    bool is_leaf = top->next == 0 && top->node != root &&
                   (lt__ag_nograd_stops(top->node) || leaf_of(top->node, ls));
    if (!is_leaf && top->next < top->node->noperands) {
      lt_node *c = through(top->node->operands[top->next++].node);
      if (c->visit == epoch) continue;
      c->visit = epoch;
      if (sp == cap) {
        frame *g = lt__realloc(stack, (size_t)cap * sizeof *g, (size_t)cap * 2 * sizeof *g);
        if (!g) {
          rc = LT_ENOMEM;
          break;
        }
        stack = g;
        cap *= 2;
      }
      stack[sp++] = (frame){c, 0};
      continue;
    }
    sp--;
    rc = push(s, top->node);
  }
  lt__free(stack, (size_t)cap * sizeof *stack);
  return rc;
}

static void state_free(ag_state *s) {
  for (int i = 0; i < s->n && s->grads; i++) lt__node_release(s->grads[i]);
  lt__free(s->grads, (size_t)s->cap * sizeof *s->grads);
  lt__free(s->leaf, (size_t)s->cap * sizeof *s->leaf);
  lt__free(s->needed, (size_t)s->cap * sizeof *s->needed);
  lt__free(s->nodes, (size_t)s->cap * sizeof *s->nodes);
}

/* grads[i] += g (consumes g). */
static int accumulate(ag_state *s, int i, lt_node *g) {
  if (!g) return LT_ENOMEM;
  const lt_node *n = s->nodes[i];
  if (g->ndim != n->ndim || memcmp(g->shape, n->shape, (size_t)n->ndim * sizeof(int64_t)) ||
      g->dtype != n->dtype) {
    char a[128], b[128];
    lt__node_release(g);
    return lt__err(LT_ESHAPE, "lt_backward: internal: gradient %s for a %s value of %s",
                   lt__shape_str(g->shape, g->ndim, a, sizeof a),
                   lt__shape_str(n->shape, n->ndim, b, sizeof b), lt__op_name((lt_op)n->op));
  }
  lt_node *merged = s->grads[i] ? lt__ag_merge_blocks(s->grads[i], g) : NULL;
  if (merged)
    s->grads[i] = merged;
  else
    s->grads[i] = s->grads[i] ? lt__node_bin(LT_OP_ADD, s->grads[i], g) : g;
  return s->grads[i] ? LT_OK : LT_ENOMEM;
}

/* Adds node g (consumed) to t's gradient tensor. */
static int add_to_grad(lt_tensor *t, lt_node *g) {
  if (t->grad) {
    lt_node *old = lt__tensor_ir(t->grad);
    if (!old) {
      lt__node_release(g);
      return lt_last_status();
    }
    g = lt__node_bin(LT_OP_ADD, lt__node_retain(old), g);
    if (!g) return LT_ENOMEM;
    lt__tensor_set_ir(t->grad, g);
    return LT_OK;
  }
  /* The grad tensor belongs to t, not to the caller's scope. */
  lt_tensor *gt = lt__tensor_new_unscoped(t->dev, g);
  if (!gt) return LT_ENOMEM;
  lt__tensor_copy_sharding(gt, t); /* a shard's gradient is the same chunk of the global one */
  t->grad = gt;
  return LT_OK;
}

/* Runs the pending gradients of the leaves (eager mode). */
static int sync_grads(leaf_set *ls) {
  lt_tensor **gs = lt__malloc((size_t)(ls->n + 1) * sizeof *gs);
  if (!gs) return LT_ENOMEM;
  int n = 0;
  for (int i = 0; i < ls->n; i++)
    if (ls->ts[i] && ls->ts[i]->grad && ls->ts[i]->grad->ir) gs[n++] = ls->ts[i]->grad;
  int rc = n ? lt__sync_internal(gs, n, false, false, "eager") : LT_OK;
  lt__free(gs, (size_t)(ls->n + 1) * sizeof *gs);
  return rc;
}

int lt_backward(lt_tensor *loss) {
  if (lt__tensor_check("lt_backward", loss) != LT_OK) return LT_EINVAL;
  if (loss->shard_n)
    return lt__err(LT_EINVAL,
                   "lt_backward: the loss is sharded; reduce it to a replicated value "
                   "(lt_sum or lt_mean over the sharded axis) first");
  if (!lt__is_float((lt_dtype)loss->dtype) || lt__numel(loss->shape, loss->ndim) != 1)
    return lt__err(
        LT_EINVAL, "lt_backward: the loss must be one floating element (got %s, %lld elements)",
        lt_dtype_name((lt_dtype)loss->dtype), (long long)lt__numel(loss->shape, loss->ndim));
  /* The loss's graph: its pending node, or in eager mode the history its
   * value keeps. */
  lt_node *root = loss->ir ? loss->ir : loss->data_node ? through(loss->data_node) : NULL;
  if (!root || root->op == LT_OP_DATA)
    return lt__err(LT_EINVAL,
                   "lt_backward: the loss has no pending graph (it was read or synced); call "
                   "lt_backward before reading it");
  if (lt__ag_nograd_check_loss(root) != LT_OK) return LT_EINVAL;
  lt_exec_dev *ctx = lt__exec_dev("lt_backward", loss->dev);
  if (!ctx) return LT_EDEVICE;
  leaf_set ls = {0};
  ag_state s = {0};
  /* The walk marks nodes (visit, order) and the sweep reads the marks: the
   * device's graph lock keeps another thread's sync from re-marking a node
   * the graphs share meanwhile. Not the device lock, which would wait for the
   * step in flight: the execution writes only its own buffers, which nothing
   * here reads; the tensors' fields are written by the tracing threads. */
  lt__graph_lock(ctx);
  int rc = post_order(&s, root, &ls);
  if (rc == LT_OK) {
    s.grads = lt__calloc((size_t)s.cap * sizeof *s.grads);
    s.leaf = lt__calloc((size_t)s.cap * sizeof *s.leaf);
    s.needed = lt__calloc((size_t)s.cap * sizeof *s.needed);
    if (!s.grads || !s.leaf || !s.needed) rc = LT_ENOMEM;
  }
  /* Forward pass: which nodes depend on a leaf. */
  bool any = false;
  for (int i = 0; rc == LT_OK && i < s.n; i++) {
    lt_node *n = s.nodes[i];
    s.leaf[i] = n == root ? NULL : leaf_of(n, &ls);
    bool need = s.leaf[i] != NULL;
    for (int k = 0; !need && !s.leaf[i] && !lt__ag_nograd_stops(n) && k < n->noperands; k++) {
      const lt_node *c = through(n->operands[k].node);
      need = s.needed[c->order] && c->visit == n->visit;
    }
    s.needed[i] = need && lt__is_float((lt_dtype)n->dtype);
    any |= s.leaf[i] != NULL;
  }
  if (rc == LT_OK && !any)
    rc = lt__err(LT_EINVAL,
                 "lt_backward: the loss does not depend on any tensor that requires grad");
  /* Reverse sweep. */
  if (rc == LT_OK)
    rc = accumulate(&s, s.n - 1, lt__ag_const((lt_dtype)loss->dtype, root->shape, root->ndim, 1.0));
  for (int i = s.n - 1; rc == LT_OK && i >= 0; i--) {
    lt_node *n = s.nodes[i], *g = s.grads[i];
    if (!g || !s.needed[i]) continue;
    if (s.leaf[i]) {
      rc = add_to_grad(s.leaf[i], lt__node_retain(g));
      continue;
    }
    ag_vjp_fn f = lt__ag_rule((lt_op)n->op);
    if (!f) {
      rc = lt__err(LT_EINVAL, "lt_backward: no gradient for op %s", lt__op_name((lt_op)n->op));
      break;
    }
    lt_node *out[64] = {0};
    if (n->noperands > 64) {
      rc =
          lt__err(LT_EINVAL, "lt_backward: op %s has too many operands", lt__op_name((lt_op)n->op));
      break;
    }
    rc = f(n, g, out);
    for (int k = 0; k < n->noperands; k++) {
      int src = through(n->operands[k].node)->order;
      if (rc == LT_OK && out[k] && s.needed[src])
        rc = accumulate(&s, src, out[k]);
      else
        lt__node_release(out[k]);
    }
  }
  lt__graph_unlock(ctx);
  state_free(&s);
  /* Eager mode computes the gradients now too (after the graph lock: a sync
   * must not run under it). They are values without history, as torch's
   * grads are: an optimizer's update over them then carries none either. */
  if (rc == LT_OK && lt_get_eager()) rc = sync_grads(&ls);
  leaf_set_free(&ls);
  return rc;
}
