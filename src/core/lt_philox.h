/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC 2011): a counter-based generator. A block of four 32-bit words is a pure
 * function of a 128-bit counter and a 64-bit key, so element k of a random
 * tensor can be computed anywhere, in any order, by any backend.
 *
 * How lazytensor uses it (every backend must produce these exact bits, so that
 * backends can be compared against ref):
 *  - key     = the op's 64-bit seed: {low 32 bits, high 32 bits};
 *  - counter = {low 32 bits of k, high 32 bits of k, 0, 0} for element k:
 *    one block per element (simple to vectorise, no cross-lane state),
 *    except uniform f32, which takes all four words of block j for its
 *    elements 4j .. 4j+3 (a model's initialisation draws millions of these);
 *  - uniform f32: element k is the top 24 bits of word k % 4 of block k / 4,
 *    times 2^-24: [0, 1);
 *  - uniform f64: the top 53 bits of (word 0 << 32 | word 1), times 2^-53;
 *  - normal:   Box-Muller in double from u1 = f64 uniform of words 0-1 and
 *    u2 = f64 uniform of words 2-3: sqrt(-2 log(1 - u1)) cos(2 pi u2)
 *    (1 - u1 is in (0, 1], so the log is finite), rounded to the dtype;
 *  - randperm: Fisher-Yates from the end (see lt_philox_below).
 * Self-contained (stdint and math only) so that code generators can include it. */
#ifndef LT_PHILOX_H
#define LT_PHILOX_H

#include <math.h>
#include <stdint.h>

#define LT_PHILOX_M0 0xD2511F53u
#define LT_PHILOX_M1 0xCD9E8D57u
#define LT_PHILOX_W0 0x9E3779B9u /* golden ratio */
#define LT_PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

typedef struct lt_philox_block {
  uint32_t w[4];
} lt_philox_block;

/* The Philox4x32 block function with 10 rounds (Random123's philox4x32_10). */
static inline lt_philox_block lt_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += LT_PHILOX_W0;
      k1 += LT_PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)LT_PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)LT_PHILOX_M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  lt_philox_block b = {{c0, c1, c2, c3}};
  return b;
}

/* The block of element k under seed (the mapping described above). */
static inline lt_philox_block lt_philox_at(uint64_t seed, uint64_t k) {
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t ctr[4] = {(uint32_t)k, (uint32_t)(k >> 32), 0, 0};
  return lt_philox4x32_10(ctr, key);
}

/* [0, 1) from the top 24 bits of one word (exact in float). */
static inline float lt_philox_u24(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }

/* [0, 1) from the top 53 bits of (hi << 32 | lo) (exact in double). */
static inline double lt_philox_u53(uint32_t hi, uint32_t lo) {
  uint64_t x = ((uint64_t)hi << 32 | lo) >> 11;
  return (double)x * 0x1p-53;
}

/* Element k of a uniform [0, 1) tensor. */
static inline float lt_philox_uniform_f32(uint64_t seed, uint64_t k) {
  return lt_philox_u24(lt_philox_at(seed, k >> 2).w[k & 3]);
}
static inline double lt_philox_uniform_f64(uint64_t seed, uint64_t k) {
  lt_philox_block b = lt_philox_at(seed, k);
  return lt_philox_u53(b.w[0], b.w[1]);
}

/* Element k of a standard normal tensor, in double (f32 rounds the result). */
static inline double lt_philox_normal(uint64_t seed, uint64_t k) {
  lt_philox_block b = lt_philox_at(seed, k);
  double u1 = lt_philox_u53(b.w[0], b.w[1]);
  double u2 = lt_philox_u53(b.w[2], b.w[3]);
  const double two_pi = 6.283185307179586476925286766559;
  return sqrt(-2.0 * log(1.0 - u1)) * cos(two_pi * u2);
}

/* A uniform integer in [0, bound] (bound < 2^63) for step k of a stream: the
 * 64 bits (word 0 << 32 | word 1) modulo bound + 1. The modulo bias is below
 * (bound + 1) / 2^64, i.e. under 2^-32 for any bound under 2^32. */
static inline uint64_t lt_philox_below(uint64_t seed, uint64_t k, uint64_t bound) {
  lt_philox_block b = lt_philox_at(seed, k);
  uint64_t x = (uint64_t)b.w[0] << 32 | b.w[1];
  return x % (bound + 1);
}

#endif
