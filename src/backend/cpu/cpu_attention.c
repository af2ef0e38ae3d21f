/* The cpu backend's attention kernel (LT_OP_ATTENTION, f32): a blocked
 * online softmax, so that the L x S scores are never stored in full.
 *
 * One task is a batch entry and a block of QB query rows. It streams the
 * keys in blocks of KB: the block's scores (QB x KB, in L1) are scale * q k^T
 * with the mask or the causal triangle applied; each row keeps its running
 * maximum m, sum l and output accumulator, which a new maximum rescales by
 * exp(m_old - m_new) before the block's exp(s - m_new) and exp(s - m_new) v
 * are added. Blocks wholly above a causal diagonal are skipped. At the end
 * each row is acc / l: a row that saw nothing has l = 0, and is NaN, as
 * ref's (torch's math path).
 *
 * The two block products run through oneDNN's sgemm, which generates
 * AVX-512 (AVX2, ...) code for the machine at run time; the row loops
 * between them (bias, maximum, exp, rescale) are plain C the compiler
 * vectorises, built for the generic target the rest of the backend uses and,
 * on x86-64, also as AVX2 and AVX-512 copies picked by what the CPU reports
 * (pick_softmax). Results match ref within f32 rounding, not bit for bit (as for
 * GEMM): sums run in f32, in blocks. */
#include "cpu_attention.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../attn_plan.h"
#include "cpu.h"

/* Query rows per task and keys per block: a block's scores, its keys and
 * values and the accumulators stay in L1 / L2 for E, Ev up to about 128. */
#define QB 32
#define KB 64 /* a multiple of 16 (block_softmax pads rows to one) */

/* exp(x) for x <= 0 (scores minus their row's maximum): 2^n e^r with
 * n = round(x / ln 2), |r| <= ln 2 / 2, e^r by a degree-6 Taylor polynomial
 * (relative error below 2e-7); below -87 (-inf included) 0, NaN stays NaN.
 * Branch-free and without float selects (which GCC will not if-convert
 * under its default trapping math): the rounding adds and subtracts
 * 1.5 * 2^23, 2^n is built in the exponent bits, and the cut-off is a bit
 * mask, so the loops calling it vectorise. */
static inline __attribute__((always_inline)) float exp_neg(float x) {
  const float lo = -87.0f;
  int32_t keep = -(int32_t) !(x < lo); /* all ones for x >= lo and for NaN */
  int32_t xb, lb;
  memcpy(&xb, &x, sizeof xb);
  memcpy(&lb, &lo, sizeof lb);
  int32_t cb = (xb & keep) | (lb & ~keep);
  float xc;
  memcpy(&xc, &cb, sizeof xc);
  float t = xc * 1.44269504f + 12582912.0f;
  float n = t - 12582912.0f;
  float r = xc - n * 0.693145752f; /* ln 2, high bits */
  r = r - n * 1.42860677e-06f;     /* ln 2, low bits */
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t tb;
  memcpy(&tb, &t, sizeof tb);
  /* the low bits of t hold n; 2^n, or 0 below the cut-off */
  int32_t e = (int32_t)((uint32_t)(tb - 0x4B400000 + 127) << 23) & keep;
  float scale;
  memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

typedef struct attn_job attn_job;
/* One online-softmax step (block_softmax), as built for one instruction set. */
typedef void (*softmax_fn)(const attn_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0,
                           int64_t nk, float *s, float *acc, float *m, float *l);

struct attn_job {
  attn_plan p;
  const float *q, *k, *v, *mask; /* mask: additive */
  const uint8_t *keep;           /* mask: bool */
  float *out;
  int64_t nqb; /* query blocks per batch entry */
  softmax_fn softmax;
  atomic_int failed;
};

/* C[n x m] = alpha A[n x k] op(B) + beta C, row-major, on this thread. */
static void sgemm(bool tb, int64_t n, int64_t m, int64_t k, float alpha, const float *a,
                  int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  dnnl_sgemm('N', tb ? 'T' : 'N', n, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The largest of x[0 .. n) (-inf for none), as integers: a float's bits
 * with the magnitude bits flipped for negative values order as the floats
 * do, and an integer maximum is exact and associative, so the loop
 * vectorises (a float maximum does not, under strict IEEE semantics). A
 * positive NaN is the largest key, which makes the row's maximum NaN and so
 * the whole row NaN, as softmax's; a negative one is below -inf and
 * propagates through its own exp. */
static inline __attribute__((always_inline)) float row_max(const float *x, int64_t n) {
  int32_t best = INT32_MIN;
  for (int64_t c = 0; c < n; c++) {
    int32_t bits;
    memcpy(&bits, &x[c], sizeof bits);
    int32_t key = bits ^ ((bits >> 31) & 0x7FFFFFFF);
    best = key > best ? key : best;
  }
  if (best == INT32_MIN) return -INFINITY;
  int32_t bits = best ^ ((best >> 31) & 0x7FFFFFFF);
  float r;
  memcpy(&r, &bits, sizeof r);
  return r;
}

/* Scratch of one task: the block's scores / probabilities s [QB x KB], the
 * accumulators acc [QB x Ev], the running maxima m and sums l [QB]. */
typedef struct attn_scratch {
  float *s, *acc, *m, *l;
} attn_scratch;

static size_t scratch_floats(int64_t Ev) { return (size_t)(QB * KB + QB * Ev + 2 * QB); }

static inline __attribute__((always_inline)) void block_softmax(const attn_job *j, int64_t b,
                                                                int64_t i0, int64_t nq, int64_t j0,
                                                                int64_t nk, float *s, float *acc,
                                                                float *m, float *l) {
  const attn_plan *p = &j->p;
  const int64_t S = p->S, W = p->Ev, npad = (nk + 15) / 16 * 16; /* <= KB */
  for (int64_t i = 0; i < nq; i++) {
    float *si = s + i * KB;
    int64_t row = b * p->L + i0 + i;
    if (j->mask) {
      const float *mi = j->mask + row * S + j0;
      for (int64_t c = 0; c < nk; c++) si[c] += mi[c];
    } else if (j->keep) {
      const uint8_t *ki = j->keep + row * S + j0;
      for (int64_t c = 0; c < nk; c++) si[c] = ki[c] ? si[c] : -INFINITY;
    }
    /* causal: keys after the row's own index are hidden. The row is padded
     * to whole groups of 16 with hidden columns (the product reads only the
     * first nk), so the loops below run in full vectors, with no scalar
     * remainder. */
    int64_t seen = p->causal && i0 + i + 1 - j0 < nk ? i0 + i + 1 - j0 : nk;
    if (seen < 0) seen = 0;
    for (int64_t c = seen; c < npad; c++) si[c] = -INFINITY;
    /* A NaN score is left to propagate: its exp is NaN, and so become the
     * row's accumulators and sum. */
    float mb = row_max(si, npad), mnew = m[i] > mb ? m[i] : mb;
    if (mnew == -INFINITY) { /* nothing seen yet: the block adds nothing */
      memset(si, 0, sizeof(float) * (size_t)nk);
      continue;
    }
    float alpha = exp_neg(m[i] - mnew), part[16] = {0};
    /* the sum in 16 lanes: vector adds, one horizontal sum per row */
    for (int64_t c = 0; c < npad; c += 16)
      for (int u = 0; u < 16; u++) {
        float e = exp_neg(si[c + u] - mnew);
        si[c + u] = e;
        part[u] += e;
      }
    float sum = 0;
    for (int u = 0; u < 16; u++) sum += part[u];
    if (alpha != 1.0f)
      for (int64_t c = 0; c < W; c++) acc[i * W + c] *= alpha;
    l[i] = l[i] * alpha + sum;
    m[i] = mnew;
  }
}

/* block_softmax built for the generic target the rest of the backend uses
 * and, on x86-64 with GCC or clang, also for AVX2 and AVX-512: lt__cpu_attention
 * picks one by what the CPU reports. (Plain functions and a pointer rather
 * than target_clones: an ifunc resolver runs during relocation, before a
 * sanitizer's runtime is set up, and crashes instrumented builds.) */
static void softmax_generic(const attn_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0,
                            int64_t nk, float *s, float *acc, float *m, float *l) {
  block_softmax(j, b, i0, nq, j0, nk, s, acc, m, l);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ATTN_X86_VARIANTS 1
__attribute__((target("avx2,fma"))) static void softmax_avx2(const attn_job *j, int64_t b,
                                                             int64_t i0, int64_t nq, int64_t j0,
                                                             int64_t nk, float *s, float *acc,
                                                             float *m, float *l) {
  block_softmax(j, b, i0, nq, j0, nk, s, acc, m, l);
}

__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) static void softmax_avx512(
    const attn_job *j, int64_t b, int64_t i0, int64_t nq, int64_t j0, int64_t nk, float *s,
    float *acc, float *m, float *l) {
  block_softmax(j, b, i0, nq, j0, nk, s, acc, m, l);
}
#endif

static softmax_fn pick_softmax(void) {
#ifdef ATTN_X86_VARIANTS
  if (lt__cpu_isa()->avx512) return softmax_avx512; /* unless LT_CPU_ISA=avx2 */
  if (lt__cpu_isa()->avx2) return softmax_avx2;
#endif
  return softmax_generic;
}

/* Rows [i0, i0 + nq) of batch entry b. */
static void attn_block(const attn_job *j, int64_t b, int64_t i0, int64_t nq,
                       const attn_scratch *w) {
  const attn_plan *p = &j->p;
  const int64_t S = p->S, E = p->E, Ev = p->Ev;
  const float scale = (float)p->scale;
  const float *q = j->q + (b * p->L + i0) * E;
  const float *k = j->k + b * S * E, *v = j->v + b * S * Ev;
  float *s = w->s, *acc = w->acc, *m = w->m, *l = w->l;
  for (int64_t i = 0; i < nq; i++) {
    m[i] = -INFINITY;
    l[i] = 0;
  }
  memset(acc, 0, sizeof(float) * (size_t)(nq * Ev));
  /* causal: rows up to i0 + nq - 1 see keys up to that index */
  int64_t send = p->causal && i0 + nq < S ? i0 + nq : S;
  for (int64_t j0 = 0; j0 < send; j0 += KB) {
    int64_t nk = send - j0 < KB ? send - j0 : KB;
    /* s = scale q k^T for this block (the bias is applied below) */
    if (E > 0)
      sgemm(true, nq, nk, E, scale, q, E, k + j0 * E, E, 0.0f, s, KB);
    else
      for (int64_t i = 0; i < nq; i++) memset(s + i * KB, 0, sizeof(float) * (size_t)nk);
    j->softmax(j, b, i0, nq, j0, nk, s, acc, m, l);
    /* acc += p v for this block */
    if (Ev > 0) sgemm(false, nq, Ev, nk, 1.0f, s, KB, v + j0 * Ev, Ev, 1.0f, acc, Ev);
  }
  float *o = j->out + (b * p->L + i0) * Ev;
  for (int64_t i = 0; i < nq; i++) {
    float inv = l[i] == 0 ? NAN : 1.0f / l[i]; /* l = 0: the row saw nothing */
    for (int64_t c = 0; c < Ev; c++) o[i * Ev + c] = acc[i * Ev + c] * inv;
  }
}

static void attn_chunk(void **slots, int64_t lo, int64_t hi) {
  attn_job *j = slots[0];
  lt__cpu_gemm_one_thread();
  size_t n = scratch_floats(j->p.Ev);
  float *mem = lt__malloc(sizeof(float) * n);
  if (!mem) {
    atomic_store(&j->failed, 1);
    return;
  }
  attn_scratch w = {mem, mem + QB * KB, NULL, NULL};
  w.m = w.acc + QB * j->p.Ev;
  w.l = w.m + QB;
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / j->nqb, i0 = t % j->nqb * QB;
    int64_t nq = j->p.L - i0 < QB ? j->p.L - i0 : QB;
    attn_block(j, b, i0, nq, &w);
  }
  lt__free(mem, sizeof(float) * n);
}

int lt__cpu_attention(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  attn_job j;
  if (attn_plan_make(ins, out, in, &j.p) != LT_OK || out->dtype != LT_F32)
    return CPU_NATIVE_DECLINED; /* the fallback reports what is wrong */
  if (out->numel == 0) return LT_OK;
  j.q = in[0]->data;
  j.k = in[1]->data;
  j.v = in[2]->data;
  j.mask = j.p.mask_kind == 2 ? in[3]->data : NULL;
  j.keep = j.p.mask_kind == 1 ? in[3]->data : NULL;
  j.out = out->data;
  j.nqb = (j.p.L + QB - 1) / QB;
  j.softmax = pick_softmax();
  atomic_init(&j.failed, 0);
  void *slots[1] = {&j};
  int64_t rows = j.p.L < QB ? j.p.L : QB;
  lt__cpu_pool_run(attn_chunk, slots, j.p.B * j.nqb, rows * j.p.S * (j.p.E + j.p.Ev));
  return atomic_load(&j.failed) ? CPU_NATIVE_DECLINED : LT_OK;
}
