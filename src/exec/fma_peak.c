/* The f32 multiply-add peak MFU divides by (lt_get_fma_peak, docs/COST.md).
 *
 * One core's peak is measured once per process: independent chains of the
 * widest vector FMA the cpu backend uses (AVX-512, else AVX2's 256-bit FMA:
 * LT_CPU_ISA=avx2 caps it as it caps the kernels, cpu_isa.c), enough
 * chains to cover the FMA latency on every FMA port (latency 4 x 2 ports
 * needs 8 in flight; 16 with AVX-512's 32 registers, 12 with AVX2's 16, so
 * that the two constants stay in registers too). The kernel runs a few
 * milliseconds and keeps its fastest repetition: a preempted or throttled
 * repetition can only be slower. The peak of T threads is T times one
 * core's (the cores are alike and each has its own FMA units).
 * LT_PEAK_GFLOPS, when set, is one core's peak instead, in GFLOP/s. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/cpu/cpu.h"
#include "../core/lt_error.h"
#include "lazytensor.h"
#include "lt_metrics.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FMA_X86 1
#endif

enum { REPS = 8, ITERS = 1 << 17 };

#ifdef FMA_X86
/* Each function times REPS repetitions of ITERS rounds over its chains and
 * returns the fastest in GFLOP/s. The chains' sum is returned through *sink
 * so that the compiler keeps them. */
#define FMA_KERNEL(NAME, TARGET, VEC, LANES, CHAINS, SET1, FMADD, FIRST)             \
  __attribute__((target(TARGET), noinline)) static double NAME(float *sink) {        \
    VEC acc[CHAINS], m = SET1(0.999f), x = SET1(0.001f);                             \
    for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);                        \
    double best = 0;                                                                 \
    for (int r = -1; r < REPS; r++) { /* one repetition first: the clock ramps up */ \
      int64_t t0 = lt__now_ns();                                                     \
      for (int it = 0; it < ITERS; it++)                                             \
        for (int i = 0; i < CHAINS; i++) acc[i] = FMADD(acc[i], m, x);               \
      double ns = (double)(lt__now_ns() - t0);                                       \
      double gflops = 2.0 * LANES * CHAINS * (double)ITERS / (ns > 0 ? ns : 1);      \
      if (r >= 0 && gflops > best) best = gflops;                                    \
    }                                                                                \
    float s = 0;                                                                     \
    for (int i = 0; i < CHAINS; i++) s += FIRST(acc[i]);                             \
    *sink = s;                                                                       \
    return best;                                                                     \
  }
FMA_KERNEL(peak_avx512, "avx512f", __m512, 16, 16, _mm512_set1_ps, _mm512_fmadd_ps,
           _mm512_cvtss_f32)
FMA_KERNEL(peak_avx2, "avx2,fma", __m256, 8, 12, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
#undef FMA_KERNEL
#endif

/* One core's peak in GFLOP/s: > 0, 0 with no FMA unit, < 0 for a bad
 * LT_PEAK_GFLOPS. */
static double g_core_peak;
static char g_bad_env[64];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void measure(void) {
  const char *env = getenv("LT_PEAK_GFLOPS");
  if (env && *env) {
    char *end;
    double v = strtod(env, &end);
    if (*end || !(v > 0) || !isfinite(v)) {
      snprintf(g_bad_env, sizeof g_bad_env, "%s", env);
      g_core_peak = -1;
    } else {
      g_core_peak = v;
    }
    return;
  }
  float sink = 0;
#ifdef FMA_X86
  if (lt__cpu_isa()->avx512) /* the instruction set the cpu backend uses (LT_CPU_ISA) */
    g_core_peak = peak_avx512(&sink);
  else if (lt__cpu_isa()->avx2)
    g_core_peak = peak_avx2(&sink);
#endif
  if (sink == 12345.0f) g_core_peak += 0; /* the chains' result is used */
}

int lt_get_fma_peak(int threads, double *gflops) {
  const char *fn = "lt_get_fma_peak";
  if (!gflops) return lt__err(LT_EINVAL, "%s: gflops is NULL", fn);
  if (threads < 0) return lt__err(LT_EINVAL, "%s: threads %d is negative", fn, threads);
  pthread_once(&g_once, measure);
  if (g_core_peak < 0)
    return lt__err(LT_EINVAL, "%s: LT_PEAK_GFLOPS='%s' is not a positive number of GFLOP/s", fn,
                   g_bad_env);
  if (g_core_peak == 0)
    return lt__err(LT_ENOTFOUND,
                   "%s: this CPU has no vector FMA to measure; set LT_PEAK_GFLOPS (one core's "
                   "peak in GFLOP/s)",
                   fn);
  if (threads == 0) threads = lt__cpu_pool_threads_planned();
  *gflops = g_core_peak * threads;
  return LT_OK;
}
