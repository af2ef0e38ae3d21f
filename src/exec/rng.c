/* The per-device random state: base seed, running seed and the step's seed
 * chain in the IR (see rng.h for the scheme). One mutex guards the array; its
 * critical sections are short (a few node allocations at most). */
#include <pthread.h>
#include <string.h>

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

/* The blob of lt_rng_state, little-endian whatever the host: "LTRS", u32
 * version, u64 base seed, u64 running seed, 8 zero bytes. The chain is not
 * stored: it is the IR form of the running seed, rebuilt from it by the next
 * draw, so a restored state draws the same numbers in lazy and eager mode. */
#define RNG_BLOB_MAGIC "LTRS"
#define RNG_BLOB_VERSION 1u

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

int lt_get_rng_state(lt_device dev, lt_rng_state *out) {
  if (!out) return lt__err(LT_EINVAL, "lt_get_rng_state: out is NULL");
  if (!lt__device_ctx("lt_get_rng_state", dev)) return LT_EDEVICE;
  pthread_mutex_lock(&g_lock);
  uint64_t base = g_rng[dev.index].base, running = g_rng[dev.index].running;
  pthread_mutex_unlock(&g_lock);
  memset(out, 0, sizeof *out);
  memcpy(out->bytes, RNG_BLOB_MAGIC, 4);
  put_le(out->bytes + 4, RNG_BLOB_VERSION, 4);
  put_le(out->bytes + 8, base, 8);
  put_le(out->bytes + 16, running, 8);
  return LT_OK;
}

int lt_set_rng_state(lt_device dev, const lt_rng_state *state) {
  if (!state) return lt__err(LT_EINVAL, "lt_set_rng_state: state is NULL");
  if (!lt__device_ctx("lt_set_rng_state", dev)) return LT_EDEVICE;
  const uint8_t *b = state->bytes;
  if (memcmp(b, RNG_BLOB_MAGIC, 4) != 0)
    return lt__err(LT_EINVAL, "lt_set_rng_state: not a state from lt_get_rng_state (bad magic)");
  uint32_t ver = (uint32_t)get_le(b + 4, 4);
  if (ver != RNG_BLOB_VERSION)
    return lt__err(LT_EINVAL, "lt_set_rng_state: state version %u; this build reads %u", ver,
                   RNG_BLOB_VERSION);
  if (get_le(b + 24, 8) != 0)
    return lt__err(LT_EINVAL, "lt_set_rng_state: corrupt state (reserved bytes are not zero)");
  pthread_mutex_lock(&g_lock);
  rng_state *s = &g_rng[dev.index];
  s->base = get_le(b + 8, 8);
  s->running = get_le(b + 16, 8);
  lt_node *old = s->chain;
  s->chain = NULL;
  pthread_mutex_unlock(&g_lock);
  lt__node_release(old);
  return LT_OK;
}
