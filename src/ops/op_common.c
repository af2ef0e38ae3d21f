/* Helpers shared by every op builder: operand values, node construction that
 * consumes its operands, casts, reshapes and scalars. */
#include <pthread.h>
#include <string.h>

#include "lt_metrics.h"
#include "lt_ops.h"
#include "op_nograd.h"

lt_node *lt__ir_as(lt_tensor *t, lt_dtype dt) {
  lt_node *n = lt__tensor_ir(t);
  if (!n) return NULL;
  return lt__node_cast(lt__node_retain(n), dt);
}

/* A small per-device cache of scalar buffers keyed by dtype and value, as in
 * the reference: a training loop's constant scalars (0.5, 1e-8, ...) are
 * uploaded once. Cached buffers are never donated: the cache holds them. */
enum { kScalarCacheSize = 32 };
typedef struct scalar_slot {
  lt_buffer *buf;
  uint8_t dtype;
  double value;
} scalar_slot;
static scalar_slot g_scalars[LT_MAX_DEVICES][kScalarCacheSize];
static unsigned g_scalar_next[LT_MAX_DEVICES];
static pthread_mutex_t g_scalar_lock = PTHREAD_MUTEX_INITIALIZER;

static lt_buffer *scalar_cached(lt_device dev, lt_dtype dt, double v) {
  lt_buffer *b = NULL;
  pthread_mutex_lock(&g_scalar_lock);
  for (int i = 0; i < kScalarCacheSize && !b; i++) {
    scalar_slot *s = &g_scalars[dev.index][i];
    if (s->buf && s->dtype == dt && memcmp(&s->value, &v, sizeof v) == 0)
      b = lt__buffer_retain(s->buf);
  }
  pthread_mutex_unlock(&g_scalar_lock);
  return b;
}

static void scalar_remember(lt_device dev, lt_dtype dt, double v, lt_buffer *b) {
  pthread_mutex_lock(&g_scalar_lock);
  scalar_slot *s = &g_scalars[dev.index][g_scalar_next[dev.index]++ % kScalarCacheSize];
  lt_buffer *old = s->buf;
  s->buf = lt__buffer_retain(b);
  s->dtype = (uint8_t)dt;
  s->value = v;
  pthread_mutex_unlock(&g_scalar_lock);
  lt__buffer_release(old);
}

lt_node *lt__scalar_node(lt_device dev, lt_dtype dt, double value) {
  double v = lt__dtype_round(dt, value);
  /* docs/DESIGN.md, rule 1: only 0 and +-1 are baked into the graph. */
  if (v == 0.0 || v == 1.0 || v == -1.0) return lt__node_const(dt, NULL, 0, v);
  if (!lt__device_ctx_ok(dev)) return NULL;
  lt_buffer *b = scalar_cached(dev, dt, v);
  if (b) {
    lt__count(LT_CTR_SCALAR_CACHE_HIT, 1);
  } else {
    const lt_backend *be = lt__backend_for(dev);
    if (lt__buffer_alloc(be, dev, dt, NULL, 0, &b) != LT_OK) return NULL;
    union { /* room and alignment for one element of any dtype */
      int64_t i64;
      double f64;
    } u;
    lt__store_f64(dt, &u, 0, v); /* v is in range (lt__dtype_round) */
    if (be->to_device(b, &u, lt_dtype_size(dt)) != LT_OK) {
      lt__buffer_release(b);
      return NULL;
    }
    lt__count(LT_CTR_TRANSFER_TO_DEVICE, 1);
    scalar_remember(dev, dt, v, b);
  }
  lt_node *n = lt__node_data(b);
  lt__buffer_release(b);
  return n;
}

lt_tensor *lt__wrap(lt_device dev, lt_node *node) {
  node = lt__no_grad_mark(node); /* inside lt_no_grad_begin/end: a constant to autograd */
  lt_tensor *t = lt__tensor_from_node(dev, node);
  /* Eager mode: run each op as it is traced (one cached executable per op
   * signature, op_eager.c). */
  if (t && t->ir && lt_get_eager() && lt__eager_run(t) != LT_OK) {
    lt__tensor_discard(t);
    return NULL;
  }
  return t;
}

lt_tensor *lt__make(lt_device dev, lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                    lt_node **operands, int noperands, const int64_t *attrs, int nattrs,
                    double fattr) {
  return lt__wrap(dev,
                  lt__node_make(op, dt, shape, ndim, operands, noperands, attrs, nattrs, fattr));
}

bool lt__device_ctx_ok(lt_device dev) { return lt__device_ctx("lt_scalar", dev) != NULL; }

/* Whether the value of n depends on a requires-grad tensor, so that autograd
 * may need its history. The walk stops at data leaves and at values made
 * constant by lt_detach or a no-grad scope. Past a budget of nodes the answer is
 * yes (eager graphs are an op over a few leaves; a yes only keeps some
 * history, or picks a training form, that was not needed). No node marks: another thread's walk may
 * be marking shared nodes (the RNG chain) meanwhile. */
bool lt__carries_grad(const lt_node *n) {
  enum { kBudget = 256 };
  const lt_node *stack[kBudget];
  int sp = 0, seen = 0;
  stack[sp++] = n;
  while (sp) {
    const lt_node *cur = stack[--sp];
    if (++seen > kBudget) return true;
    if (cur->grad_id == LT__GRAD_ID_CONST) continue;
    if (cur->grad_id > 0) return true;
    if (cur->op == LT_OP_DATA) {
      if (cur->origin) return true;
      continue;
    }
    for (int i = 0; i < cur->noperands; i++) {
      if (sp == kBudget) return true;
      stack[sp++] = cur->operands[i].node;
    }
  }
  return false;
}
