/* The per-device random state: base seed, running seed and the step's seed
 * chain in the IR (see rng.h for the scheme). One mutex guards the array; its
 * critical sections are short (a few node allocations at most). */
#include <pthread.h>

#include "exec_internal.h"
#include "../core/lt_device.h"
#include "../core/lt_error.h"
#include "../core/lt_node.h"
#include "lt_metrics.h"
#include "rng.h"

typedef struct rng_state {
  uint64_t base;    /* the seed of the current step */
  uint64_t running; /* the seed of the last random op of the step (base when none) */
  lt_node *chain;   /* lazy: the IR value of `running`, or NULL before the first draw */
} rng_state;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static rng_state g_rng[LT_MAX_DEVICES]; /* zero: base seed 0, as torch's default */

static uint64_t next_op_seed(uint64_t s) { return LT_RNG_SEED_ADD + LT_RNG_SEED_MUL * s; }
static uint64_t next_step_seed(uint64_t s) { return LT_RNG_STEP_ADD + LT_RNG_STEP_MUL * s; }

/* A 0-d i64 DATA leaf holding v (never a CONST, whatever v is: the seed must be
 * a parameter so that the graph does not depend on it). */
static lt_node *seed_leaf(lt_device dev, uint64_t v) {
  const lt_backend *be = lt__backend_for(dev);
  lt_buffer *b = NULL;
  if (lt__buffer_alloc(be, dev, LT_I64, NULL, 0, &b) != LT_OK) return NULL;
  int64_t x = (int64_t)v;
  if (be->to_device(b, &x, sizeof x) != LT_OK) {
    lt__buffer_release(b);
    return NULL;
  }
  lt__count(LT_CTR_TRANSFER_TO_DEVICE, 1);
  lt_node *n = lt__node_data(b);
  lt__buffer_release(b);
  return n;
}

/* seed' = ADD + MUL * seed as IR (consumes seed). */
static lt_node *chain_link(lt_node *seed) {
  lt_node *mul[2] = {lt__node_const(LT_I64, NULL, 0, (double)LT_RNG_SEED_MUL), seed};
  lt_node *prod = lt__node_make(LT_OP_MUL, LT_I64, NULL, 0, mul, 2, NULL, 0, 0.0);
  lt_node *add[2] = {lt__node_const(LT_I64, NULL, 0, (double)LT_RNG_SEED_ADD), prod};
  return lt__node_make(LT_OP_ADD, LT_I64, NULL, 0, add, 2, NULL, 0, 0.0);
}

lt_node *lt__rng_next_seed(const char *fn, lt_device dev) {
  if (!lt__device_ctx(fn, dev)) return NULL;
  bool eager = lt_get_eager();
  pthread_mutex_lock(&g_lock);
  rng_state *s = &g_rng[dev.index];
  uint64_t next = next_op_seed(s->running);
  lt_node *out = NULL;
  if (eager) {
    out = seed_leaf(dev, next);
    if (out) {
      /* The chain (if lazy draws came first) no longer matches `running`. */
      lt__node_release(s->chain);
      s->chain = NULL;
    }
  } else {
    lt_node *prev = s->chain ? lt__node_retain(s->chain) : seed_leaf(dev, s->running);
    out = chain_link(prev);
    if (out) {
      lt__node_release(s->chain);
      s->chain = lt__node_retain(out);
    }
  }
  if (out) s->running = next;
  pthread_mutex_unlock(&g_lock);
  return out;
}

void lt__rng_on_mark_step(lt_device dev) {
  if (dev.type != LT_DEVICE_CPU || dev.index < 0 || dev.index >= LT_MAX_DEVICES) return;
  pthread_mutex_lock(&g_lock);
  rng_state *s = &g_rng[dev.index];
  s->base = s->running = next_step_seed(s->base);
  lt_node *old = s->chain;
  s->chain = NULL;
  pthread_mutex_unlock(&g_lock);
  lt__node_release(old);
}

int lt_set_seed(lt_device dev, uint64_t seed) {
  if (!lt__device_ctx("lt_set_seed", dev)) return LT_EDEVICE;
  pthread_mutex_lock(&g_lock);
  rng_state *s = &g_rng[dev.index];
  s->base = s->running = seed;
  lt_node *old = s->chain;
  s->chain = NULL;
  pthread_mutex_unlock(&g_lock);
  lt__node_release(old);
  return LT_OK;
}
