/* The cpu backend's attention kernel (LT_OP_ATTENTION, f32): a blocked
 * online softmax, so that the L x S scores are never stored in full.
 *
 * One task is a batch entry and a block of QB query rows. It streams the
 * keys in blocks of KB: the block's scores (QB x KB, in L1) are scale * q k^T
 * with the mask or the causal triangle applied; each row keeps its running
 * maximum m and sum l and its output accumulator, which a new maximum
 * rescales by exp(m_old - m_new) before the block's exp(s - m_new) v is
 * added. Blocks wholly above a causal diagonal are skipped. At the end each
 * row is acc / l: a row that saw nothing has l = 0 and acc = 0, so 0 / 0 =
 * NaN, as ref's (torch's math path).
 *
 * The two block products (q k^T and p v) run through oneDNN's sgemm, which
 * generates AVX-512 (AVX2, ...) code for the machine at run time, where the
 * rest of this file is compiled for the generic target; the exp is a
 * branch-free polynomial the compiler vectorises (libm's expf is a call per
 * element). Results match ref within f32 rounding, not bit for bit (as for
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
#define QB 64
#define KB 64

/* exp(x) for x <= 0 (scores minus their row's maximum; -inf gives 0):
 * 2^n e^r with n = round(x / ln 2), |r| <= ln 2 / 2, e^r by a degree-6
 * Taylor-like polynomial (relative error below 2e-7). Branch-free: the
 * rounding adds and subtracts 1.5 * 2^23, 2^n is built in the exponent bits. */
static inline float exp_neg(float x) {
  const float lo = -87.0f;
  float xc = x < lo ? lo : x;
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
  int32_t bits;
  memcpy(&bits, &t, sizeof bits);
  /* the low bits of t hold n (two's complement within the mantissa) */
  int32_t e = (bits - 0x4B400000 + 127) << 23;
  float scale;
  memcpy(&scale, &e, sizeof scale);
  float y = p * scale;
  return x < lo ? 0.0f : y;
}

typedef struct attn_job {
  attn_plan p;
  const float *q, *k, *v, *mask; /* mask: additive */
  const uint8_t *keep;           /* mask: bool */
  float *out;
  int64_t nqb; /* query blocks per batch entry */
  atomic_int failed;
} attn_job;

/* C[n x m] (+)= A[n x k] op(B), row-major, on this thread. */
static void sgemm(bool tb, int64_t n, int64_t m, int64_t k, const float *a, int64_t lda,
                  const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  dnnl_sgemm('N', tb ? 'T' : 'N', n, m, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

/* Rows [i0, i0 + nq) of batch entry b; scratch: s [QB x KB], acc [QB x Ev],
 * m and l [QB]. */
static void attn_block(const attn_job *j, int64_t b, int64_t i0, int64_t nq, float *s, float *acc,
                       float *m, float *l) {
  const attn_plan *p = &j->p;
  const int64_t S = p->S, E = p->E, Ev = p->Ev;
  const float scale = (float)p->scale;
  const float *q = j->q + (b * p->L + i0) * E;
  const float *k = j->k + b * S * E, *v = j->v + b * S * Ev;
  for (int64_t i = 0; i < nq; i++) {
    m[i] = -INFINITY;
    l[i] = 0;
  }
  memset(acc, 0, sizeof(float) * (size_t)(nq * Ev));
  /* causal: rows up to i0 + nq - 1 see keys up to that index */
  int64_t send = p->causal && i0 + nq < S ? i0 + nq : S;
  for (int64_t j0 = 0; j0 < send; j0 += KB) {
    int64_t nk = send - j0 < KB ? send - j0 : KB;
    /* s = q k^T for this block (scaled below, with the bias) */
    if (E > 0)
      sgemm(true, nq, nk, E, q, E, k + j0 * E, E, 0.0f, s, KB);
    else
      for (int64_t i = 0; i < nq; i++) memset(s + i * KB, 0, sizeof(float) * (size_t)nk);
    for (int64_t i = 0; i < nq; i++) {
      float *si = s + i * KB;
      int64_t row = b * p->L + i0 + i;
      for (int64_t c = 0; c < nk; c++) si[c] *= scale;
      if (j->mask) {
        const float *mi = j->mask + row * S + j0;
        for (int64_t c = 0; c < nk; c++) si[c] += mi[c];
      } else if (j->keep) {
        const uint8_t *ki = j->keep + row * S + j0;
        for (int64_t c = 0; c < nk; c++) si[c] = ki[c] ? si[c] : -INFINITY;
      }
      if (p->causal) /* keys after the row's own index are hidden */
        for (int64_t c = i0 + i + 1 - j0 < 0 ? 0 : i0 + i + 1 - j0; c < nk; c++) si[c] = -INFINITY;
      float mb = -INFINITY;
      bool nan = false;
      for (int64_t c = 0; c < nk; c++) {
        mb = si[c] > mb ? si[c] : mb;
        nan |= si[c] != si[c];
      }
      float mnew = m[i] > mb ? m[i] : mb;
      float *ai = acc + i * Ev;
      if (nan || isnan(m[i])) { /* a NaN score makes the row NaN, as softmax's */
        m[i] = NAN;
        for (int64_t c = 0; c < nk; c++) si[c] = 0;
        continue;
      }
      if (mnew == -INFINITY) { /* nothing seen yet: the block adds nothing */
        for (int64_t c = 0; c < nk; c++) si[c] = 0;
        continue;
      }
      float alpha = exp_neg(m[i] - mnew), sum = 0;
      for (int64_t c = 0; c < nk; c++) {
        float e = exp_neg(si[c] - mnew);
        si[c] = e;
        sum += e;
      }
      if (alpha != 1.0f)
        for (int64_t c = 0; c < Ev; c++) ai[c] *= alpha;
      l[i] = l[i] * alpha + sum;
      m[i] = mnew;
    }
    /* acc += p v for this block */
    if (Ev > 0) sgemm(false, nq, Ev, nk, s, KB, v + j0 * Ev, Ev, 1.0f, acc, Ev);
  }
  float *o = j->out + (b * p->L + i0) * Ev;
  for (int64_t i = 0; i < nq; i++) {
    /* l = 0: the row saw nothing */
    float inv = isnan(m[i]) || l[i] == 0 ? NAN : 1.0f / l[i];
    for (int64_t c = 0; c < Ev; c++) o[i * Ev + c] = acc[i * Ev + c] * inv;
  }
}

static void attn_chunk(void **slots, int64_t lo, int64_t hi) {
  attn_job *j = slots[0];
  cpu_gemm_one_thread();
  size_t n = (size_t)(QB * KB + QB * j->p.Ev + 2 * QB);
  float *scratch = lt__malloc(sizeof(float) * n);
  if (!scratch) {
    atomic_store(&j->failed, 1);
    return;
  }
  float *s = scratch, *acc = s + QB * KB, *m = acc + QB * j->p.Ev, *l = m + QB;
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / j->nqb, i0 = t % j->nqb * QB;
    int64_t nq = j->p.L - i0 < QB ? j->p.L - i0 : QB;
    attn_block(j, b, i0, nq, s, acc, m, l);
  }
  lt__free(scratch, sizeof(float) * n);
}

int cpu_attention(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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
  atomic_init(&j.failed, 0);
  void *slots[1] = {&j};
  int64_t rows = j.p.L < QB ? j.p.L : QB;
  cpu_pool_run(attn_chunk, slots, j.p.B * j.nqb, rows * j.p.S * (j.p.E + j.p.Ev));
  return atomic_load(&j.failed) ? CPU_NATIVE_DECLINED : LT_OK;
}
