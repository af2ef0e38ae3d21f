/* The instruction set the cpu backend uses: the host's, or AVX2 with
 * LT_CPU_ISA=avx2 on an AVX-512 machine, so that one machine can run (and
 * measure) what an AVX2-only one runs. The cap reaches every place that
 * picks code by the processor: the LLVM JIT's features (cpu_jit.c), oneDNN's
 * kernels (dnnl_set_max_cpu_isa, before its first one: cpu_gemm.c), the
 * attention's softmax (cpu_attention.c) and the FMA peak MFU divides by
 * (exec/fma_peak.c). OpenBLAS (f64 products) picks its kernels when it is
 * loaded, by OPENBLAS_CORETYPE. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cpu_isa g_isa;

static void isa_init(void) {
  const char *e = getenv("LT_CPU_ISA");
  if (e && *e && strcmp(e, "native") != 0) {
    if (strcmp(e, "avx2") == 0)
      g_isa.capped = true;
    else
      g_isa.bad_env = true;
  }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  g_isa.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  g_isa.avx512 = g_isa.avx2 && !g_isa.capped && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq");
#endif
}

const cpu_isa *lt__cpu_isa(void) {
  pthread_once(&g_once, isa_init);
  return &g_isa;
}
