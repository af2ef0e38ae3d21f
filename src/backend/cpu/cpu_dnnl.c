/* The oneDNN engine and execution arguments shared by the cpu backend's
 * primitives (cpu_dnnl.h). */
#include <pthread.h>

#include "cpu.h"
#include "cpu_dnnl.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine; /* lives as long as the process */

static void engine_init(void) {
  /* oneDNN's settings first (cpu_gemm.c: LT_CPU_ISA's cap must precede the
   * first primitive, as the first sgemm) */
  lt__cpu_gemm_init();
  if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) g_engine = NULL;
}

dnnl_engine_t lt__cpu_dnnl_engine(void) {
  pthread_once(&g_once, engine_init);
  return g_engine;
}

bool lt__cpu_dnnl_arg(dnnl_exec_arg_t *args, int *n, int arg, const dnnl_memory_desc_t *md,
                      const void *data, dnnl_memory_t *keep, int *nkeep) {
  dnnl_memory_t m;
  if (dnnl_memory_create(&m, md, lt__cpu_dnnl_engine(), (void *)data) != dnnl_success) return false;
  keep[(*nkeep)++] = m;
  args[*n].arg = arg;
  args[*n].memory = m;
  (*n)++;
  return true;
}
