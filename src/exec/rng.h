/* The per-device random state (docs/DESIGN.md, rule 6).
 *
 * Each device has a base seed (0 until lt_set_seed) and, within a step, a
 * running seed: random op k of the step uses seed_k = 2531011 + 214013 *
 * seed_(k-1) (uint64 wrapping), with seed_0 the base seed.
 *  - Lazy mode: the chain lives in the IR. seed_0 is a 0-d i64 DATA leaf (a
 *    parameter) and each seed_k is ADD(CONST 2531011, MUL(CONST 214013,
 *    seed_(k-1))), so a step's graph is the same from step to step and only the
 *    value of the leaf changes.
 *  - Eager mode: seed_k is computed on the host and handed out as a fresh DATA
 *    leaf; no chain. Both modes give the same numbers for the same seed.
 *  - lt_mark_step advances the base seed with a second generator, base =
 *    1012031 + 7012063 * base, as torch::lazy's MarkStep does, and restarts the
 *    chain. (Advancing with the op generator would make draw k + 1 of a step
 *    equal to draw k of the next one.)
 * A host mirror of the running seed is always kept, so switching between lazy
 * and eager mode within a step changes nothing in the numbers drawn. */
#ifndef LT_RNG_H
#define LT_RNG_H

#include "../core/lt_node.h"
#include "lazytensor.h"

#define LT_RNG_SEED_MUL 214013u
#define LT_RNG_SEED_ADD 2531011u
#define LT_RNG_STEP_MUL 7012063u
#define LT_RNG_STEP_ADD 1012031u

/* The seed node for the next random op on dev: a NEW reference to a 0-d i64
 * node (see above). NULL with the error recorded (naming fn) on failure, and
 * the state does not advance then. */
lt_node *lt__rng_next_seed(const char *fn, lt_device dev);

/* Advances the device's base seed at a step barrier (called by lt_mark_step
 * after the step's graph is cut) and restarts the chain. */
void lt__rng_on_mark_step(lt_device dev);

#endif
