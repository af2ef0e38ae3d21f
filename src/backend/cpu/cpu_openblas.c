/* OpenBLAS, loaded with dlopen at the first f64 product (or the first
 * lt_get_isa of f64), not linked: a process that links the library does not
 * pay for it at start. Loading it runs OpenBLAS's constructor, which starts
 * its threads and maps its buffers (about 8 ms on the 2-core machines of
 * bench/cache_warm_start), and only f64 products use it. Without it (not
 * installed, or LT_OPENBLAS_LIBRARY names something that will not load) f64
 * products run in plain loops (cpu_gemm.c) and the f64 ISA says why. The
 * prototypes are OpenBLAS's own (cblas.h); the library stays loaded for the
 * process's life. */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_openblas.h"

#ifndef LT_OPENBLAS_SONAME /* CMake passes the soname of the libopenblas it found */
#define LT_OPENBLAS_SONAME "libopenblas.so.0"
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cpu_openblas g_api;
static bool g_loaded;
static char g_isa[160];

/* Address of name in h (object to function pointer: POSIX allows it). */
static bool need(void *h, const char *name, void *fnp, size_t size) {
  void *p = dlsym(h, name);
  if (p) memcpy(fnp, &p, size);
  return p != NULL;
}

static void load(void) {
  const char *env = getenv("LT_OPENBLAS_LIBRARY");
  const char *lib = env && *env ? env : LT_OPENBLAS_SONAME;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(g_isa, sizeof g_isa, "plain loops (cannot load %s: %s)", lib, e ? e : "dlopen failed");
    return;
  }
  cpu_openblas api;
  if (!need(h, "cblas_dgemm", &api.dgemm, sizeof api.dgemm) ||
      !need(h, "openblas_set_num_threads", &api.set_num_threads, sizeof api.set_num_threads) ||
      !need(h, "openblas_get_corename", &api.get_corename, sizeof api.get_corename)) {
    snprintf(g_isa, sizeof g_isa, "plain loops (%s lacks OpenBLAS's functions)", lib);
    dlclose(h);
    return;
  }
  /* one thread per call: the backend's pool cuts the products (cpu_gemm.c) */
  api.set_num_threads(1);
  const char *core = api.get_corename();
  snprintf(g_isa, sizeof g_isa, "openblas %s", core ? core : "");
  g_api = api;
  g_loaded = true;
}

const cpu_openblas *lt__cpu_openblas(void) {
  pthread_once(&g_once, load);
  return g_loaded ? &g_api : NULL;
}

const char *lt__cpu_openblas_isa(void) {
  pthread_once(&g_once, load);
  return g_isa;
}
