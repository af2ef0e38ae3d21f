/* LLVM through its C API: one ORC LLJIT per process, built for the host CPU
 * (name and features detected by LLVM); each executable's module is parsed
 * from IR text, optimized with default<O3> by a target machine for the same
 * CPU, and added under its own resource tracker, so freeing the executable
 * frees its code. libm symbols resolve from the process.
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

int cpu_jit_add(const char *ir, size_t len, uint64_t uid, int nfns, cpu_kernel_fn *fns,
                cpu_jit_module **out) {
  int rc = cpu_jit_host(NULL, NULL);
  if (rc != LT_OK) return rc;
  const char *dir = getenv("LT_DUMP_KERNELS");
  if (dir && *dir) dump(dir, uid, ".ll", ir, len);
  cpu_jit_module *m = lt__calloc(sizeof *m);
  if (!m) return LT_ENOMEM;
  LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
  LLVMContextRef ctx = LLVMOrcThreadSafeContextGetContext(tsc);
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, len, "lt_kernels");
  LLVMModuleRef mod = NULL;
  char *msg = NULL;
  if (LLVMParseIRInContext(ctx, buf, &mod, &msg)) {
    rc = lt__err(LT_ECOMPILE, "cpu: generated IR does not parse: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    LLVMOrcDisposeThreadSafeContext(tsc);
    lt__free(m, sizeof *m);
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
  /* One compile at a time: the target machine is shared, and LLJIT's default
   * compiler (one target machine) is not safe to run from several threads. */
  pthread_mutex_lock(&g_lock);
  struct timespec t0, t1, t2;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  LLVMErrorRef err = LLVMRunPasses(mod, "default<O3>", g_tm, opts);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  LLVMDisposePassBuilderOptions(opts);
  if (err) {
    pthread_mutex_unlock(&g_lock);
    LLVMDisposeModule(mod);
    LLVMOrcDisposeThreadSafeContext(tsc);
    lt__free(m, sizeof *m);
    return fail(err, "optimizer");
  }
  if (dir && *dir) {
    char *s = LLVMPrintModuleToString(mod);
    dump(dir, uid, ".opt.ll", s, strlen(s));
    LLVMDisposeMessage(s);
  }
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
  LLVMOrcDisposeThreadSafeContext(tsc);
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(g_jit);
  m->rt = LLVMOrcJITDylibCreateResourceTracker(jd);
  err = LLVMOrcLLJITAddLLVMIRModuleWithRT(g_jit, m->rt, tsm);
  if (err) {
    pthread_mutex_unlock(&g_lock);
    LLVMOrcDisposeThreadSafeModule(tsm);
    rc = fail(err, "adding the module");
    cpu_jit_free(m);
    return rc;
  }
  for (int i = 0; i < nfns; i++) {
    char name[64];
    cpu_fn_name(name, sizeof name, uid, i);
    LLVMOrcExecutorAddress addr = 0;
    err = LLVMOrcLLJITLookup(g_jit, &addr, name);
    if (err) {
      pthread_mutex_unlock(&g_lock);
      rc = fail(err, "linking a kernel");
      cpu_jit_free(m);
      return rc;
    }
    fns[i] = (cpu_kernel_fn)(uintptr_t)addr;
  }
  clock_gettime(CLOCK_MONOTONIC, &t2);
  pthread_mutex_unlock(&g_lock);
  if (getenv("LT_CPU_DEBUG"))
    fprintf(stderr, "jit: opt %.1f ms, codegen+link %.1f ms\n",
            (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6,
            (t2.tv_sec - t1.tv_sec) * 1e3 + (t2.tv_nsec - t1.tv_nsec) * 1e-6);
  *out = m;
  return LT_OK;
}

void cpu_jit_free(cpu_jit_module *m) {
  if (!m) return;
  if (m->rt) {
    pthread_mutex_lock(&g_lock);
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(m->rt);
    if (err) LLVMConsumeError(err);
    LLVMOrcReleaseResourceTracker(m->rt);
    pthread_mutex_unlock(&g_lock);
  }
  lt__free(m, sizeof *m);
}
