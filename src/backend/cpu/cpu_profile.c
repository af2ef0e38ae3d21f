/* A kernel profile for people tuning the cpu backend: with LT_CPU_PROFILE=1,
 * every kernel's run time is summed per (executable, kernel), and at exit the
 * costliest are printed to stderr with their kind and output shape. Off, it
 * costs one branch per kernel. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/lt_node.h"
#include "cpu.h"

#define PROF_MAX 4096
#define PROF_SHOW 25 /* LT_CPU_PROFILE=N with N > 1 shows N */

typedef struct prof_entry {
  uint64_t uid;
  int kernel;
  cpu_kind kind;
  char what[96];
  uint64_t ns, calls, first_ns; /* first_ns: the first call alone (oneDNN makes its
                                 * kernels then), also counted in ns */
} prof_entry;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_on;
static int g_show = PROF_SHOW;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_entry g_entries[PROF_MAX];
static int g_n;

static int by_time(const void *a, const void *b) {
  const prof_entry *x = a, *y = b;
  return (x->ns < y->ns) - (x->ns > y->ns);
}

static void report(void) {
  static const char *kinds[] = {"loop", "gemm", "ref", "memcpy"};
  pthread_mutex_lock(&g_lock);
  uint64_t total = 0, first = 0;
  for (int i = 0; i < g_n; i++) {
    total += g_entries[i].ns;
    first += g_entries[i].first_ns;
  }
  qsort(g_entries, (size_t)g_n, sizeof *g_entries, by_time);
  fprintf(stderr,
          "# cpu profile: %.3f ms in %d kernels (of which first calls %.3f ms); per call: the "
          "mean of the calls after the first\n",
          (double)total * 1e-6, g_n, (double)first * 1e-6);
  for (int i = 0; i < g_n && i < g_show; i++) {
    const prof_entry *p = &g_entries[i];
    double later = p->calls > 1 ? (double)(p->ns - p->first_ns) * 1e-6 / (double)(p->calls - 1) : 0;
    fprintf(stderr,
            "# %5.1f%% %9.3f ms %7llu calls  first %8.3f ms  per call %8.3f ms  exe %llx k%-3d "
            "%-6s %s\n",
            total ? 100.0 * (double)p->ns / (double)total : 0.0, (double)p->ns * 1e-6,
            (unsigned long long)p->calls, (double)p->first_ns * 1e-6, later,
            (unsigned long long)p->uid, p->kernel, kinds[p->kind], p->what);
  }
  pthread_mutex_unlock(&g_lock);
}

static void init(void) {
  const char *s = getenv("LT_CPU_PROFILE");
  g_on = s && *s && strcmp(s, "0") != 0;
  if (g_on && atoi(s) > 1) g_show = atoi(s);
  if (g_on) atexit(report);
}

bool lt__cpu_profile_on(void) {
  pthread_once(&g_once, init);
  return g_on;
}

uint64_t lt__cpu_profile_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void describe(const cpu_kernel *k, char *buf, size_t n) {
  if (k->kind == CK_BLAS) {
    int64_t nb = 1;
    for (int d = 0; d < k->mm.nbatch_dims; d++) nb *= k->mm.batch_shape[d];
    snprintf(buf, n, "%s%s %lldx%lldx%lld batch %lld%s%s%s", lt_dtype_name((lt_dtype)k->mm.a.dtype),
             k->mm.acc_f32 ? "->f32" : "", (long long)k->mm.n, (long long)k->mm.m,
             (long long)k->mm.k, (long long)nb, k->mm.ta ? " At" : "", k->mm.tb ? " Bt" : "",
             k->epilogue ? " +epilogue" : "");
  } else if (k->kind == CK_REF) {
    snprintf(buf, n, "%s", lt__op_name(k->ins.op));
  } else {
    snprintf(buf, n, "extent %lld x %lld", (long long)k->extent, (long long)k->unit_cost);
  }
}

void lt__cpu_profile_add(const lt_executable *e, int i, uint64_t ns) {
  pthread_mutex_lock(&g_lock);
  int j = 0;
  while (j < g_n && !(g_entries[j].uid == e->uid && g_entries[j].kernel == i)) j++;
  if (j == g_n && g_n < PROF_MAX) {
    prof_entry *p = &g_entries[g_n++];
    memset(p, 0, sizeof *p);
    p->uid = e->uid;
    p->kernel = i;
    p->kind = e->kernels[i].kind;
    describe(&e->kernels[i], p->what, sizeof p->what);
  }
  if (j < g_n) {
    if (g_entries[j].calls == 0) g_entries[j].first_ns = ns;
    g_entries[j].ns += ns;
    g_entries[j].calls++;
  }
  pthread_mutex_unlock(&g_lock);
}
