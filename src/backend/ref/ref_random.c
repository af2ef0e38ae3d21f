/* ref kernels for random ops: RNG_UNIFORM, RNG_NORMAL and RANDPERM. Operand 0
 * is the op's seed (0-d i64). Element k is a function of (seed, k) only, by
 * Philox4x32-10 with the mapping documented in core/lt_philox.h: keyed by the
 * seed, counter = k (uniform f32: four elements per block). RANDPERM is Fisher-Yates
 * from the end: for i = n-1 down to 1, swap element i with element j, j drawn
 * uniformly in [0, i] from block i of the seed's stream. */
#include <string.h>

#include "../../core/lt_error.h"
#include "../../core/lt_philox.h"
#include "ref.h"

/* Uniform f32, the bits of lt_philox_uniform_f32 element by element: 16
 * blocks (64 elements) at a time, the rounds written over lanes so that
 * compilers vectorize them (a model's initialisation draws millions of these;
 * block by block in scalar code they were most of a warm start's init step).
 * The cpu backend generates its own vector code for these (cpu_ops.c). */
static void uniform_f32(float *out, int64_t n, uint64_t seed) {
  enum { L = 16 };
  const uint32_t key0 = (uint32_t)seed, key1 = (uint32_t)(seed >> 32);
  for (int64_t base = 0; base < n; base += 4 * L) {
    uint32_t c0[L], c1[L], c2[L], c3[L];
    for (int l = 0; l < L; l++) {
      uint64_t j = (uint64_t)(base / 4) + (uint64_t)l; /* the block */
      c0[l] = (uint32_t)j;
      c1[l] = (uint32_t)(j >> 32);
      c2[l] = c3[l] = 0;
    }
    uint32_t k0 = key0, k1 = key1;
    for (int r = 0; r < 10; r++) {
      if (r > 0) {
        k0 += LT_PHILOX_W0;
        k1 += LT_PHILOX_W1;
      }
      for (int l = 0; l < L; l++) {
        uint64_t p0 = (uint64_t)LT_PHILOX_M0 * c0[l], p1 = (uint64_t)LT_PHILOX_M1 * c2[l];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
        c1[l] = (uint32_t)p1;
        c3[l] = (uint32_t)p0;
        c0[l] = n0;
        c2[l] = n2;
      }
    }
    float v[4 * L];
    for (int l = 0; l < L; l++) {
      v[4 * l] = lt_philox_u24(c0[l]);
      v[4 * l + 1] = lt_philox_u24(c1[l]);
      v[4 * l + 2] = lt_philox_u24(c2[l]);
      v[4 * l + 3] = lt_philox_u24(c3[l]);
    }
    int64_t m = n - base < 4 * L ? n - base : 4 * L;
    memcpy(out + base, v, (size_t)m * sizeof *v);
  }
}

int ref_random(const ref_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  uint64_t seed = (uint64_t)ref_geti(in[0], 0);
  int64_t n = out->numel;
  switch (ins->op) {
  case LT_OP_RNG_UNIFORM:
    if (out->dtype == LT_F32)
      uniform_f32((float *)out->data, n, seed);
    else
      for (int64_t k = 0; k < n; k++) ref_setf(out, k, lt_philox_uniform_f64(seed, (uint64_t)k));
    return LT_OK;
  case LT_OP_RNG_NORMAL:
    for (int64_t k = 0; k < n; k++) ref_setf(out, k, lt_philox_normal(seed, (uint64_t)k));
    return LT_OK;
  case LT_OP_RANDPERM:
    for (int64_t k = 0; k < n; k++) ref_seti(out, k, k);
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)lt_philox_below(seed, (uint64_t)i, (uint64_t)i);
      int64_t vi = ref_geti(out, i), vj = ref_geti(out, j);
      ref_seti(out, i, vj);
      ref_seti(out, j, vi);
    }
    return LT_OK;
  default:
    return lt__err(LT_EEXEC, "ref: no kernel for op %s", lt__op_name((lt_op)ins->op));
  }
}
