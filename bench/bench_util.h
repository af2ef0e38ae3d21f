/* Pieces every benchmark uses. */
#ifndef LT_BENCH_UTIL_H
#define LT_BENCH_UTIL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"

/* The shell words that start a PyTorch peer, before the python arguments:
 * the python3 that imports torch (Debian's python3-torch lives beside
 * /usr/bin/python3, which may not be the python3 first on PATH), in the
 * environment of its best kernels. These machines set OPENBLAS_CORETYPE
 * (Haswell, the AVX2 kernels, on AVX-512 machines too) and OPENBLAS_L2_SIZE
 * for every process: the peer gets both unset. PyTorch 1.13 runs its AVX2
 * kernels on an AVX-512 machine unless ATEN_CPU_CAPABILITY says avx512: the
 * peer gets the best that this processor has. $py is left set for a caller
 * that checks whether torch imported. */
#define BENCH_PY_FIND \
  "for py in /usr/bin/python3 python3; do $py -c 'import torch' 2>/dev/null && break; done; "
#define BENCH_PY_BEST "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ATEN_CPU_CAPABILITY="
static inline const char *bench_torch_python(void) {
  /* LT_CPU_ISA=avx2 measures what an AVX2-only machine runs: the peer too,
   * with the AVX2 kernels such a machine's OpenBLAS and PyTorch would pick */
  const char *isa = getenv("LT_CPU_ISA");
  if (isa && strcmp(isa, "avx2") == 0)
    return BENCH_PY_FIND
        "env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 $py";
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx512 ? BENCH_PY_FIND BENCH_PY_BEST "avx512 $py"
         : avx2 ? BENCH_PY_FIND BENCH_PY_BEST "avx2 $py"
                : BENCH_PY_FIND BENCH_PY_BEST "default $py";
}
#undef BENCH_PY_FIND
#undef BENCH_PY_BEST

/* A counter's value (-1 for an unknown name). */
static inline long long counter(const char *name) {
  int64_t v = -1;
  lt_get_counter(name, &v);
  return (long long)v;
}

/* qsort's comparison of doubles. */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n-1] (sorts v). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

#endif
