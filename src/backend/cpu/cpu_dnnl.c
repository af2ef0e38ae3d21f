/* The oneDNN engine, execution arguments and per-thread scratch shared by
 * the cpu backend's primitives, and the choice between native and converted
 * bf16 products (cpu_dnnl.h). */
#include "cpu_dnnl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../core/lt_metrics.h"
#include "cpu.h"

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

/* ---- per-thread scratch ---- */

typedef struct scratch_buf {
  void *p;
  size_t cap;
} scratch_buf;

static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_scratch_key;
static bool g_key_ok;

static void scratch_free(void *v) {
  scratch_buf *s = v;
  for (int i = 0; i < CPU_SCRATCH_COUNT; i++) free(s[i].p);
  free(s);
}

static void key_init(void) { g_key_ok = pthread_key_create(&g_scratch_key, scratch_free) == 0; }

void *lt__cpu_thread_scratch(int which, size_t bytes) {
  pthread_once(&g_key_once, key_init);
  if (!g_key_ok || which < 0 || which >= CPU_SCRATCH_COUNT) return NULL;
  scratch_buf *s = pthread_getspecific(g_scratch_key);
  if (!s) {
    if (!(s = calloc(CPU_SCRATCH_COUNT, sizeof *s))) return NULL;
    if (pthread_setspecific(g_scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  scratch_buf *b = &s[which];
  if (b->cap < bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    free(b->p);
    b->p = p;
    b->cap = bytes;
  }
  return b->p;
}

/* ---- bf16: native or converted ---- */

static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;
static dnnl_cpu_isa_t g_isa;
static bool g_bf16_native;

static void isa_init(void) {
  lt__cpu_gemm_init(); /* LT_CPU_ISA's cap first: the effective set is below it */
  g_isa = dnnl_get_effective_cpu_isa();
  /* the sets are bit masks, each containing the ones below it */
  g_bf16_native = (g_isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

bool lt__cpu_bf16_native(void) {
  pthread_once(&g_isa_once, isa_init);
  return g_bf16_native;
}

const char *lt__cpu_dnnl_isa_name(void) {
  pthread_once(&g_isa_once, isa_init);
  switch (g_isa) {
  case dnnl_cpu_isa_all:
    return "all";
  case dnnl_cpu_isa_sse41:
    return "sse41";
  case dnnl_cpu_isa_avx:
    return "avx";
  case dnnl_cpu_isa_avx2:
    return "avx2";
  case dnnl_cpu_isa_avx512_mic:
    return "avx512_mic";
  case dnnl_cpu_isa_avx512_mic_4ops:
    return "avx512_mic_4ops";
  case dnnl_cpu_isa_avx512_core:
    return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni:
    return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16:
    return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx:
    return "avx512_core_amx";
  case dnnl_cpu_isa_avx2_vnni:
    return "avx2_vnni";
  }
  return "unknown"; /* a set this oneDNN header does not name */
}

static pthread_once_t g_name_once = PTHREAD_ONCE_INIT;
static char g_bf16_name[64];

static void name_init(void) {
  if (lt__cpu_bf16_native())
    snprintf(g_bf16_name, sizeof g_bf16_name, "%s", lt__cpu_dnnl_isa_name());
  else
    snprintf(g_bf16_name, sizeof g_bf16_name, "%s (bf16 converted to f32)",
             lt__cpu_dnnl_isa_name());
}

const char *lt__cpu_bf16_isa_name(void) {
  pthread_once(&g_name_once, name_init);
  return g_bf16_name;
}

void lt__cpu_bf16_count(bool conv, bool native) {
  lt__count(conv ? (native ? LT_CTR_BF16_CONV_NATIVE : LT_CTR_BF16_CONV_CONVERTED)
                 : (native ? LT_CTR_BF16_GEMM_NATIVE : LT_CTR_BF16_GEMM_CONVERTED),
            1);
  lt__metrics_set_bf16_isa(lt__cpu_bf16_isa_name());
}
