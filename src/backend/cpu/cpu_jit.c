/* LLVM through its C API: one ORC LLJIT per process, built for the host CPU
 * (name and features detected by LLVM). Compiling an executable parses its
 * module from IR text, optimizes it with default<O3> and emits an object file
 * in memory, both by a target machine for the same CPU; the executable keeps
 * those bytes (the persistent cache stores them). Loading adds an object to
 * the LLJIT in a JITDylib of the executable's own, under a resource tracker,
 * so freeing the executable frees its code. libm symbols resolve from the
 * process.
 *
 * LT_DUMP_KERNELS=dir writes each module before (<uid>.ll) and after
 * (<uid>.opt.ll) optimization. */
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "cpu.h"

struct cpu_jit_module {
  LLVMOrcJITDylibRef jd;
  LLVMOrcResourceTrackerRef rt;
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static LLVMOrcLLJITRef g_jit;
static LLVMTargetMachineRef g_tm;
static char *g_cpu, *g_features, *g_triple;
static char g_init_err[512];

static void set_err_from(LLVMErrorRef err, const char *what) {
  char *m = LLVMGetErrorMessage(err);
  snprintf(g_init_err, sizeof g_init_err, "%s: %s", what, m);
  LLVMDisposeErrorMessage(m);
}

static void jit_init(void) {
  /* Smaller loops, faster compiles: no vectorized epilogue after the main
   * vector loop (the scalar remainder stays). */
  const char *argv[] = {"lazytensor", "-enable-epilogue-vectorization=false"};
  LLVMParseCommandLineOptions(2, argv, NULL);
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  g_cpu = LLVMGetHostCPUName();
  g_features = LLVMGetHostCPUFeatures();
  g_triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(g_triple, &target, &msg)) {
    snprintf(g_init_err, sizeof g_init_err, "no LLVM target for %s: %s", g_triple, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return;
  }
  g_tm = LLVMCreateTargetMachine(target, g_triple, g_cpu, g_features, LLVMCodeGenLevelAggressive,
                                 LLVMRelocDefault, LLVMCodeModelJITDefault);
  LLVMOrcJITTargetMachineBuilderRef jtmb = LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(
      LLVMCreateTargetMachine(target, g_triple, g_cpu, g_features, LLVMCodeGenLevelAggressive,
                              LLVMRelocDefault, LLVMCodeModelJITDefault));
  LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(b, jtmb);
  LLVMErrorRef err = LLVMOrcCreateLLJIT(&g_jit, b);
  if (err) {
    set_err_from(err, "LLJIT");
    g_jit = NULL;
    return;
  }
  LLVMOrcDefinitionGeneratorRef gen;
  err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(g_jit), NULL, NULL);
  if (err) {
    set_err_from(err, "process symbols");
    return;
  }
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(g_jit), gen);
}

int cpu_jit_host(const char **cpu, const char **features) {
  pthread_once(&g_once, jit_init);
  if (cpu) *cpu = g_cpu ? g_cpu : "?";
  if (features) *features = g_features ? g_features : "";
  if (!g_jit) return lt__err(LT_ECOMPILE, "cpu: LLVM JIT unavailable: %s", g_init_err);
  return LT_OK;
}

static void dump(const char *dir, uint64_t uid, const char *suffix, const char *text, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/kernels_%llu%s", dir, (unsigned long long)uid, suffix);
  FILE *f = fopen(path, "w");
  if (!f) return;
  fwrite(text, 1, len, f);
  fclose(f);
}

static int fail(LLVMErrorRef err, const char *what) {
  char *m = LLVMGetErrorMessage(err);
  int rc = lt__err(LT_ECOMPILE, "cpu: %s: %s", what, m);
  LLVMDisposeErrorMessage(m);
  return rc;
}

static double ms_between(const struct timespec *a, const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) * 1e-6;
}

int cpu_jit_compile(const char *ir, size_t len, uint64_t uid, void **obj, size_t *obj_len) {
  int rc = cpu_jit_host(NULL, NULL);
  if (rc != LT_OK) return rc;
  const char *dir = getenv("LT_DUMP_KERNELS");
  if (dir && *dir) dump(dir, uid, ".ll", ir, len);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, len, "lt_kernels");
  LLVMModuleRef mod = NULL;
  char *msg = NULL;
  if (LLVMParseIRInContext(ctx, buf, &mod, &msg)) { /* takes buf */
    rc = lt__err(LT_ECOMPILE, "cpu: generated IR does not parse: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    LLVMContextDispose(ctx);
    return rc;
  }
  LLVMSetTarget(mod, g_triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(g_tm);
  LLVMSetModuleDataLayout(mod, td);
  LLVMDisposeTargetData(td);
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
  /* The vectorizer still interleaves; full unrolling on top roughly doubled
   * compile time (100-node graph: ~1000 -> ~700 ms) for no measured gain. */
  LLVMPassBuilderOptionsSetLoopUnrolling(opts, 0);
  /* One compile at a time: the target machine is shared. */
  pthread_mutex_lock(&g_lock);
  struct timespec t0, t1, t2;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  LLVMErrorRef err = LLVMRunPasses(mod, "default<O3>", g_tm, opts);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  LLVMDisposePassBuilderOptions(opts);
  LLVMMemoryBufferRef objbuf = NULL;
  if (err) {
    rc = fail(err, "optimizer");
  } else {
    if (dir && *dir) {
      char *s = LLVMPrintModuleToString(mod);
      dump(dir, uid, ".opt.ll", s, strlen(s));
      LLVMDisposeMessage(s);
    }
    if (LLVMTargetMachineEmitToMemoryBuffer(g_tm, mod, LLVMObjectFile, &msg, &objbuf)) {
      rc = lt__err(LT_ECOMPILE, "cpu: code generation: %s", msg ? msg : "?");
      LLVMDisposeMessage(msg);
      objbuf = NULL;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t2);
  pthread_mutex_unlock(&g_lock);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  if (!objbuf) return rc;
  size_t n = LLVMGetBufferSize(objbuf);
  void *copy = n ? lt__malloc(n) : NULL;
  if (n && !copy) {
    LLVMDisposeMemoryBuffer(objbuf);
    return lt__err(LT_ENOMEM, "cpu: out of memory keeping object code");
  }
  if (n) memcpy(copy, LLVMGetBufferStart(objbuf), n);
  LLVMDisposeMemoryBuffer(objbuf);
  if (getenv("LT_CPU_DEBUG"))
    fprintf(stderr, "jit: opt %.1f ms, codegen %.1f ms, object %zu bytes\n", ms_between(&t0, &t1),
            ms_between(&t1, &t2), n);
  *obj = copy;
  *obj_len = n;
  return LT_OK;
}

/* ---- loading objects: one JITDylib per live executable ----
 * An executable's symbols are named by its uid, which is unique only within
 * the process that compiled it; an object loaded from the persistent cache
 * may carry the names of a live executable. Each executable therefore gets
 * a JITDylib of its own (with the process's symbols behind it), and freeing
 * it empties the dylib through its resource tracker and returns the dylib to
 * a free list: ORC's C API cannot remove a JITDylib. */
static LLVMOrcJITDylibRef *g_free_jds;
static int g_nfree_jds, g_free_jds_cap;
static uint64_t g_jd_count;

static int take_dylib(LLVMOrcJITDylibRef *out) { /* under g_lock */
  if (g_nfree_jds) {
    *out = g_free_jds[--g_nfree_jds];
    return LT_OK;
  }
  char name[64];
  snprintf(name, sizeof name, "lt_exe_%llu", (unsigned long long)++g_jd_count);
  LLVMOrcExecutionSessionRef es = LLVMOrcLLJITGetExecutionSession(g_jit);
  LLVMOrcJITDylibRef jd;
  LLVMErrorRef err = LLVMOrcExecutionSessionCreateJITDylib(es, &jd, name);
  if (err) return fail(err, "creating a JITDylib");
  LLVMOrcDefinitionGeneratorRef gen;
  err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(g_jit), NULL, NULL);
  if (err) return fail(err, "process symbols");
  LLVMOrcJITDylibAddGenerator(jd, gen);
  *out = jd;
  return LT_OK;
}

static void give_dylib(LLVMOrcJITDylibRef jd) { /* under g_lock; on OOM the dylib leaks */
  if (g_nfree_jds == g_free_jds_cap) {
    int nc = g_free_jds_cap ? 2 * g_free_jds_cap : 16;
    LLVMOrcJITDylibRef *p =
        lt__realloc(g_free_jds, (size_t)g_free_jds_cap * sizeof *p, (size_t)nc * sizeof *p);
    if (!p) return;
    g_free_jds = p;
    g_free_jds_cap = nc;
  }
  g_free_jds[g_nfree_jds++] = jd;
}

typedef struct lookup_ctx {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  char err[512];
  uint64_t uid;
  int nfns, found;
  cpu_kernel_fn *fns;
} lookup_ctx;

static void lookup_done(LLVMErrorRef err, LLVMOrcCSymbolMapPairs res, size_t n, void *arg) {
  lookup_ctx *c = arg;
  pthread_mutex_lock(&c->mu);
  if (err) {
    char *m = LLVMGetErrorMessage(err);
    snprintf(c->err, sizeof c->err, "%s", m);
    LLVMDisposeErrorMessage(m);
  } else {
    char want[64];
    for (size_t i = 0; i < n; i++) {
      const char *name = LLVMOrcSymbolStringPoolEntryStr(res[i].Name);
      const char *us = strrchr(name, '_');
      long idx = us ? strtol(us + 1, NULL, 10) : -1;
      if (idx < 0 || idx >= c->nfns) continue;
      cpu_fn_name(want, sizeof want, c->uid, (int)idx);
      if (strcmp(want, name) != 0 || c->fns[idx]) continue;
      c->fns[idx] = (cpu_kernel_fn)(uintptr_t)res[i].Sym.Address;
      c->found++;
    }
  }
  c->done = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

int cpu_jit_load(const void *obj, size_t len, uint64_t uid, int nfns, cpu_kernel_fn *fns,
                 cpu_jit_module **out) {
  int rc = cpu_jit_host(NULL, NULL);
  if (rc != LT_OK) return rc;
  cpu_jit_module *m = lt__calloc(sizeof *m);
  LLVMOrcCLookupSetElement *set = lt__calloc((size_t)nfns * sizeof *set + 1);
  if (!m || !set) {
    lt__free(m, sizeof *m);
    lt__free(set, (size_t)nfns * sizeof *set + 1);
    return lt__err(LT_ENOMEM, "cpu: out of memory loading object code");
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_mutex_lock(&g_lock);
  if ((rc = take_dylib(&m->jd)) != LT_OK) goto out;
  m->rt = LLVMOrcJITDylibCreateResourceTracker(m->jd);
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, len, "lt_kernels.o");
  LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(g_jit, m->rt, buf); /* takes buf */
  if (err) {
    rc = fail(err, "adding object code");
    goto out;
  }
  for (int i = 0; i < nfns; i++) {
    char name[64];
    cpu_fn_name(name, sizeof name, uid, i);
    set[i].Name = LLVMOrcLLJITMangleAndIntern(g_jit, name); /* the lookup takes it */
    set[i].LookupFlags = LLVMOrcSymbolLookupFlagsRequiredSymbol;
  }
  lookup_ctx c;
  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.mu, NULL);
  pthread_cond_init(&c.cv, NULL);
  c.uid = uid;
  c.nfns = nfns;
  c.fns = fns;
  memset(fns, 0, (size_t)nfns * sizeof *fns);
  LLVMOrcCJITDylibSearchOrderElement order = {m->jd, LLVMOrcJITDylibLookupFlagsMatchAllSymbols};
  LLVMOrcExecutionSessionLookup(LLVMOrcLLJITGetExecutionSession(g_jit), LLVMOrcLookupKindStatic,
                                &order, 1, set, (size_t)nfns, lookup_done, &c);
  pthread_mutex_lock(&c.mu);
  while (!c.done) pthread_cond_wait(&c.cv, &c.mu);
  pthread_mutex_unlock(&c.mu);
  pthread_mutex_destroy(&c.mu);
  pthread_cond_destroy(&c.cv);
  if (c.err[0])
    rc = lt__err(LT_ECOMPILE, "cpu: linking kernels: %s", c.err);
  else if (c.found != nfns)
    rc = lt__err(LT_ECOMPILE, "cpu: linking kernels: %d of %d found", c.found, nfns);
out:
  pthread_mutex_unlock(&g_lock);
  lt__free(set, (size_t)nfns * sizeof *set + 1);
  if (rc != LT_OK) {
    cpu_jit_free(m);
    return rc;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (getenv("LT_CPU_DEBUG"))
    fprintf(stderr, "jit: link %.1f ms (%zu bytes, %d kernels)\n", ms_between(&t0, &t1), len, nfns);
  *out = m;
  return LT_OK;
}

void cpu_jit_free(cpu_jit_module *m) {
  if (!m) return;
  if (m->jd) {
    pthread_mutex_lock(&g_lock);
    bool empty = true;
    if (m->rt) {
      LLVMErrorRef err = LLVMOrcResourceTrackerRemove(m->rt);
      if (err) {
        LLVMConsumeError(err);
        empty = false;
      }
      LLVMOrcReleaseResourceTracker(m->rt);
    }
    if (empty) give_dylib(m->jd); /* else it leaks: it may still hold symbols */
    pthread_mutex_unlock(&g_lock);
  }
  lt__free(m, sizeof *m);
}
