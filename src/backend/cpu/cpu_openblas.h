/* OpenBLAS, loaded at its first use (cpu_openblas.c): f64 products. */
#ifndef LT_CPU_OPENBLAS_H
#define LT_CPU_OPENBLAS_H

#include <cblas.h>

/* The functions the backend calls, with the prototypes of OpenBLAS's header. */
typedef struct cpu_openblas {
  __typeof__(cblas_dgemm) *dgemm;
  __typeof__(openblas_set_num_threads) *set_num_threads;
  __typeof__(openblas_get_corename) *get_corename;
} cpu_openblas;

/* Loads OpenBLAS on the first call (any thread; LT_OPENBLAS_LIBRARY names
 * another file to load) and sets it to one thread per call; NULL when it
 * cannot be loaded (f64 products then run in plain loops). */
const cpu_openblas *lt__cpu_openblas(void);
/* The f64 products' ISA for lt_get_isa: "openblas <core>", or "plain loops
 * (why OpenBLAS is not loaded)"; loads it as lt__cpu_openblas does. */
const char *lt__cpu_openblas_isa(void);

#endif
