/* cpu kernels of the random ops (ref: ref_random.c): LT_OP_RNG_NORMAL and
 * LT_OP_RANDPERM, through core/lt_philox.h as ref. randperm's swaps run in
 * ref's order; only the draws, pure functions of their step, are computed in
 * parallel. */
#include "../../core/lt_alloc.h"
#include "../../core/lt_philox.h"
#include "cpu_native_kernels.h"

typedef struct rng_ctx {
  uint64_t seed;
  void *y;
  bool f64, wide;
  int64_t first; /* randperm: the step of draws[0] */
  uint64_t *draws;
} rng_ctx;

/* The seed operand (0-d i64), as ref reads it; false when it is not one. */
static bool seed_of(const lt_buffer *s, uint64_t *seed) {
  if (s->dtype != LT_I64 || s->numel < 1) return false;
  *seed = (uint64_t)((const int64_t *)s->data)[0];
  return true;
}

static void normal_chunk(void **slots, int64_t lo, int64_t hi) {
  const rng_ctx *c = slots[0];
  if (c->f64)
    for (int64_t k = lo; k < hi; k++) ((double *)c->y)[k] = lt_philox_normal(c->seed, (uint64_t)k);
  else
    for (int64_t k = lo; k < hi; k++)
      ((float *)c->y)[k] = (float)lt_philox_normal(c->seed, (uint64_t)k);
}

int lt__cpu_native_normal(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  rng_ctx c = {.y = out->data, .f64 = out->dtype == LT_F64};
  if (ins->noperands != 1 || !seed_of(in[0], &c.seed)) return DECLINE;
  if (out->dtype != LT_F32 && out->dtype != LT_F64) return DECLINE;
  par(normal_chunk, &c, out->numel, 16);
  return LT_OK;
}

static void iota_chunk(void **slots, int64_t lo, int64_t hi) {
  const rng_ctx *c = slots[0];
  if (c->wide)
    for (int64_t k = lo; k < hi; k++) ((int64_t *)c->y)[k] = k;
  else
    for (int64_t k = lo; k < hi; k++) ((int32_t *)c->y)[k] = (int32_t)k;
}

/* Fisher-Yates steps first + [lo, hi): each one's draw in [0, step]. */
static void draw_chunk(void **slots, int64_t lo, int64_t hi) {
  const rng_ctx *c = slots[0];
  for (int64_t t = lo; t < hi; t++) {
    uint64_t step = (uint64_t)(c->first + t);
    c->draws[t] = lt_philox_below(c->seed, step, step);
  }
}

/* ref's Fisher-Yates from the end; the draws of a block of steps computed
 * at once (they depend on the step only), the swaps in ref's order. */
int lt__cpu_native_randperm(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  rng_ctx c = {.y = out->data, .wide = out->dtype == LT_I64};
  if (ins->noperands != 1 || !seed_of(in[0], &c.seed)) return DECLINE;
  if (out->dtype != LT_I64 && out->dtype != LT_I32) return DECLINE;
  int64_t n = out->numel;
  enum { STEPS = 1 << 16 };
  size_t bytes = (size_t)min64(n, STEPS) * sizeof(uint64_t);
  if (n > 1 && !(c.draws = lt__malloc(bytes))) return DECLINE;
  par(iota_chunk, &c, n, 1);
  for (int64_t hi = n - 1; hi >= 1; hi -= STEPS) {
    c.first = hi - STEPS + 1 > 1 ? hi - STEPS + 1 : 1;
    par(draw_chunk, &c, hi - c.first + 1, 16);
    for (int64_t i = hi; i >= c.first; i--) {
      int64_t j = (int64_t)c.draws[i - c.first];
      if (c.wide) {
        int64_t *y = c.y, t = y[i];
        y[i] = y[j];
        y[j] = t;
      } else {
        int32_t *y = c.y, t = y[i];
        y[i] = y[j];
        y[j] = t;
      }
    }
  }
  if (c.draws) lt__free(c.draws, bytes);
  return LT_OK;
}
