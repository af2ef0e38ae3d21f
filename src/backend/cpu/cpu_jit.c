/* LLVM through its C API: one ORC LLJIT per process, built for the host CPU
 * (name and features detected by LLVM).
 *
 * Compiling: each kernel is a module of its own (IR text), so that kernels
 * compile in parallel and are cached one by one. lt__cpu_jit_compile hands the
 * modules to up to lt__cpu_jit_threads() threads (the caller and threads started
 * for the call); each thread has a target machine of its own (kept for the
 * next compile) and parses every module into a fresh LLVMContext (contexts
 * are not thread-safe; one per module also frees its memory at once). A
 * module is optimized by the pipeline below and emitted as an object file in
 * memory.
 *
 * The kernel cache: a loaded kernel (cpu_kcode) is named by its key, the hash
 * of its module's text under the environment hash (cpu_backend.c), and its
 * symbol is lt_h<key>: the name says what the code is, so every kernel of
 * every executable lives in the LLJIT's main JITDylib, each object under a
 * resource tracker of its own. A table keyed by the key finds a loaded kernel
 * for any executable that has one of the same structure (the eval graph
 * after the train graph: its forward kernels); references are counted, and
 * the last one removes the code. So the cache holds exactly the kernels of
 * live executables: lt_cache_clear, which frees every executable, leaves
 * nothing, and the persistent cache keeps each executable's own object code.
 * libm symbols resolve from the process.
 *
 * LT_DUMP_KERNELS=dir writes each module before (<symbol>.ll) and after
 * (<symbol>.opt.ll) optimization. */
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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "cpu.h"

#define MAX_COMPILE_THREADS 64

/* The optimisation pipeline (its description is part of every key, through
 * lt__cpu_jit_pipeline). Not default<O3>: our kernels are loop nests that need
 * promotion of their allocas, clean-up, loop rotation and invariant motion,
 * then the vectorizers; the rest of O3 (inlining heuristics, GVN, loop
 * unswitching, ...) found nothing to do in them and took half of the
 * optimiser's time (bench/kernels' compile_100 and the train step's kernels:
 * the same run times). always-inline first: each kernel's loops are an
 * internal function with noalias arguments (cpu_codegen.c). */
#define CPU_JIT_PASSES                                                                 \
  "always-inline,function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg," \
  "loop-mssa(loop-rotate,licm),loop(indvars),loop-vectorize,slp-vectorizer,"           \
  "instcombine<no-verify-fixpoint>,simplifycfg)"
/* The code generator's level changed neither compile time nor run time. */
static const LLVMCodeGenOptLevel kCodeGenLevel = LLVMCodeGenLevelAggressive;

/* ---- set-up ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static LLVMOrcLLJITRef g_jit;
static LLVMTargetRef g_target;
static char *g_cpu, *g_features, *g_triple, *g_layout;
static char g_init_err[512];

static void set_err_from(LLVMErrorRef err, const char *what) {
  char *m = LLVMGetErrorMessage(err);
  snprintf(g_init_err, sizeof g_init_err, "%s: %s", what, m);
  LLVMDisposeErrorMessage(m);
}

static LLVMTargetMachineRef new_tm(void) {
  return LLVMCreateTargetMachine(g_target, g_triple, g_cpu, g_features, kCodeGenLevel,
                                 LLVMRelocDefault, LLVMCodeModelJITDefault);
}

/* LT_CPU_ISA=avx2: every AVX-512 and AMX feature of the host's list turned
 * off in place ("+avx512f" -> "-avx512f"; LLVM turns off what depends on
 * them), so that the loops are generated as for an AVX2 machine. */
static void cap_features_at_avx2(char *features) {
  static const char *const kOff[] = {"+avx512", "+amx", "+evex512", "+avx10"};
  for (size_t i = 0; i < sizeof kOff / sizeof kOff[0]; i++)
    for (char *p = features; (p = strstr(p, kOff[i])) != NULL; p++) *p = '-';
}

/* LLVM makes some of its global state on first use: every pass run builds
 * timing instrumentation whose TimerGroup registers in a global list under a
 * lock that is itself created lazily, and published with atomics that
 * ThreadSanitizer cannot see in an uninstrumented libLLVM. One empty pass
 * run here, inside the once-only init, creates that state before two
 * compiles can run at once (replicas of a world compiling graphs of their
 * own), so the later runs are ordered after it through pthread_once. */
static void create_llvm_statics(LLVMTargetMachineRef tm) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("lt_init", ctx);
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(mod, "verify", tm, opts);
  if (err) LLVMConsumeError(err);
  LLVMDisposePassBuilderOptions(opts);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
}

static void jit_init(void) {
  /* Smaller loops, faster compiles: no vectorized epilogue after the main
   * vector loop (the scalar remainder stays); no loop strength reduction in
   * the code generator (a fifth of its time; the same run times, our loops'
   * addresses being simple already). */
  const char *argv[] = {"lazytensor", "-enable-epilogue-vectorization=false", "-disable-lsr"};
  LLVMParseCommandLineOptions(3, argv, NULL);
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  g_cpu = LLVMGetHostCPUName();
  g_features = LLVMGetHostCPUFeatures();
  if (lt__cpu_isa()->bad_env) {
    snprintf(g_init_err, sizeof g_init_err, "LT_CPU_ISA=%s: not avx2 or native",
             getenv("LT_CPU_ISA"));
    return;
  }
  if (lt__cpu_isa()->capped) cap_features_at_avx2(g_features);
  g_triple = LLVMGetDefaultTargetTriple();
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(g_triple, &g_target, &msg)) {
    snprintf(g_init_err, sizeof g_init_err, "no LLVM target for %s: %s", g_triple, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return;
  }
  LLVMTargetMachineRef tm = new_tm();
  create_llvm_statics(tm);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  g_layout = LLVMCopyStringRepOfTargetData(td);
  LLVMDisposeTargetData(td);
  LLVMOrcJITTargetMachineBuilderRef jtmb =
      LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm);
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
    LLVMOrcDisposeLLJIT(g_jit);
    g_jit = NULL;
    return;
  }
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(g_jit), gen);
}

int lt__cpu_jit_host(const char **cpu, const char **features) {
  pthread_once(&g_once, jit_init);
  if (cpu) *cpu = g_cpu ? g_cpu : "?";
  if (features) *features = g_features ? g_features : "";
  if (!g_jit) return lt__err(LT_ECOMPILE, "cpu: LLVM JIT unavailable: %s", g_init_err);
  return LT_OK;
}

const char *lt__cpu_jit_pipeline(void) {
  return "passes " CPU_JIT_PASSES
         " no-unroll -enable-epilogue-vectorization=false -disable-lsr "
         "codegen aggressive";
}

void lt__cpu_kernel_symbol(char *buf, size_t n, cpu_kkey key) {
  snprintf(buf, n, "lt_h%016llx%016llx", (unsigned long long)key.hi, (unsigned long long)key.lo);
}

int lt__cpu_jit_threads(void) {
  const char *s = getenv("LT_COMPILE_THREADS");
  int n = s && *s ? atoi(s) : 0;
  if (n <= 0) n = lt__cpu_pool_threads();
  return n < 1 ? 1 : n > MAX_COMPILE_THREADS ? MAX_COMPILE_THREADS : n;
}

/* ---- target machines: one per compiling thread, kept between compiles ---- */

static pthread_mutex_t g_tm_lock = PTHREAD_MUTEX_INITIALIZER;
static LLVMTargetMachineRef g_free_tms[MAX_COMPILE_THREADS];
static int g_nfree_tms;

static LLVMTargetMachineRef tm_take(void) {
  LLVMTargetMachineRef tm = NULL;
  pthread_mutex_lock(&g_tm_lock);
  if (g_nfree_tms) tm = g_free_tms[--g_nfree_tms];
  pthread_mutex_unlock(&g_tm_lock);
  return tm ? tm : new_tm();
}

static void tm_give(LLVMTargetMachineRef tm) {
  pthread_mutex_lock(&g_tm_lock);
  if (g_nfree_tms < MAX_COMPILE_THREADS) {
    g_free_tms[g_nfree_tms++] = tm;
    tm = NULL;
  }
  pthread_mutex_unlock(&g_tm_lock);
  if (tm) LLVMDisposeTargetMachine(tm);
}

/* ---- compiling ---- */

static double ms_between(const struct timespec *a, const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) * 1e-6;
}

static void dump(const char *dir, const char *sym, const char *suffix, const char *text,
                 size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%s", dir, sym, suffix);
  FILE *f = fopen(path, "w");
  if (!f) return;
  fwrite(text, 1, len, f);
  fclose(f);
}

/* One compile of several modules, shared by its threads. Errors are kept as
 * text: lt__err's status is per thread, the caller raises the first. */
typedef struct crun {
  cpu_kjob *jobs;
  int n, limit; /* jobs [0, limit) may be taken now */
  atomic_int next;
  atomic_bool stop;
  pthread_mutex_t mu;
  int rc;
  char err[512];
  double opt_ms, cg_ms; /* summed over threads */
} crun;

static int job_fail(char *err, size_t n, int rc, const char *what, const char *msg) {
  snprintf(err, n, "cpu: %s: %s", what, msg ? msg : "?");
  return rc;
}

static int compile_one(LLVMTargetMachineRef tm, cpu_kjob *j, char *err, size_t errlen,
                       double *opt_ms, double *cg_ms) {
  const char *dir = getenv("LT_DUMP_KERNELS");
  char sym[sizeof CPU_SYM_PLACEHOLDER];
  lt__cpu_kernel_symbol(sym, sizeof sym, j->key);
  if (dir && *dir) dump(dir, sym, ".ll", j->ir, j->len);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(j->ir, j->len, sym);
  LLVMModuleRef mod = NULL;
  char *msg = NULL;
  if (LLVMParseIRInContext(ctx, buf, &mod, &msg)) { /* takes buf */
    int rc = job_fail(err, errlen, LT_ECOMPILE, "generated IR does not parse", msg);
    LLVMDisposeMessage(msg);
    LLVMContextDispose(ctx);
    return rc;
  }
  LLVMSetTarget(mod, g_triple);
  LLVMSetDataLayout(mod, g_layout);
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
  /* The vectorizer still interleaves; full unrolling on top roughly doubled
   * compile time (100-node graph: ~1000 -> ~700 ms) for no measured gain. */
  LLVMPassBuilderOptionsSetLoopUnrolling(opts, 0);
  struct timespec t0, t1, t2;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  LLVMErrorRef lerr = LLVMRunPasses(mod, CPU_JIT_PASSES, tm, opts);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  LLVMDisposePassBuilderOptions(opts);
  LLVMMemoryBufferRef objbuf = NULL;
  int rc = LT_OK;
  if (lerr) {
    char *m = LLVMGetErrorMessage(lerr);
    rc = job_fail(err, errlen, LT_ECOMPILE, "optimizer", m);
    LLVMDisposeErrorMessage(m);
  } else {
    if (dir && *dir) {
      char *s = LLVMPrintModuleToString(mod);
      dump(dir, sym, ".opt.ll", s, strlen(s));
      LLVMDisposeMessage(s);
    }
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &objbuf)) {
      rc = job_fail(err, errlen, LT_ECOMPILE, "code generation", msg);
      LLVMDisposeMessage(msg);
      objbuf = NULL;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t2);
  *opt_ms += ms_between(&t0, &t1);
  *cg_ms += ms_between(&t1, &t2);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  if (!objbuf) return rc;
  j->buf = objbuf;
  j->obj = LLVMGetBufferStart(objbuf);
  j->obj_len = LLVMGetBufferSize(objbuf);
  return LT_OK;
}

void lt__cpu_jit_release(cpu_kjob *jobs, int n) {
  for (int i = 0; i < n; i++) {
    if (jobs[i].buf) LLVMDisposeMemoryBuffer(jobs[i].buf);
    jobs[i].buf = NULL;
    jobs[i].obj = NULL;
    jobs[i].obj_len = 0;
  }
}

static void run_jobs(crun *r) {
  LLVMTargetMachineRef tm = tm_take();
  double opt = 0, cg = 0;
  char err[512] = "";
  int rc = tm ? LT_OK : job_fail(err, sizeof err, LT_ECOMPILE, "no target machine", g_cpu);
  while (rc == LT_OK && !atomic_load(&r->stop)) {
    int i = atomic_fetch_add(&r->next, 1);
    if (i >= r->limit) break;
    rc = compile_one(tm, &r->jobs[i], err, sizeof err, &opt, &cg);
  }
  if (tm) tm_give(tm);
  pthread_mutex_lock(&r->mu);
  r->opt_ms += opt;
  r->cg_ms += cg;
  if (rc != LT_OK && r->rc == LT_OK) {
    r->rc = rc;
    memcpy(r->err, err, sizeof r->err);
  }
  pthread_mutex_unlock(&r->mu);
  if (rc != LT_OK) atomic_store(&r->stop, true);
}

static void *compile_thread(void *arg) {
  run_jobs(arg);
  return NULL;
}

int lt__cpu_jit_compile(cpu_kjob *jobs, int n) {
  int rc = lt__cpu_jit_host(NULL, NULL);
  if (rc != LT_OK || n <= 0) return rc;
  for (int i = 0; i < n; i++) {
    jobs[i].buf = NULL;
    jobs[i].obj = NULL;
    jobs[i].obj_len = 0;
  }
  crun r;
  memset(&r, 0, sizeof r);
  r.jobs = jobs;
  r.n = r.limit = n;
  atomic_init(&r.next, 0);
  atomic_init(&r.stop, false);
  pthread_mutex_init(&r.mu, NULL);
  int want = lt__cpu_jit_threads();
  if (want > n) want = n;
  pthread_t th[MAX_COMPILE_THREADS];
  int started = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* The process's first compile does its first module alone: LLVM makes
   * some of its globals (pass timers, registries) at first use, and the
   * threads started afterwards then find them made (which is also what a
   * race detector, blind to LLVM's own synchronisation, can see). */
  static atomic_bool first_done;
  r.limit = want > 1 && !atomic_load(&first_done) ? 1 : n;
  if (r.limit == 1) {
    run_jobs(&r);
    atomic_store(&first_done, r.rc == LT_OK);
    atomic_store(&r.next, r.rc == LT_OK ? 1 : n);
    r.limit = n;
  }
  while (r.rc == LT_OK && started + 1 < want &&
         pthread_create(&th[started], NULL, compile_thread, &r) == 0)
    started++; /* a thread that cannot start leaves its share to the others */
  run_jobs(&r);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_mutex_destroy(&r.mu);
  if (getenv("LT_CPU_DEBUG"))
    fprintf(stderr,
            "jit: %d kernels on %d threads in %.1f ms (opt %.1f ms, codegen %.1f ms summed)\n", n,
            started + 1, ms_between(&t0, &t1), r.opt_ms, r.cg_ms);
  if (r.rc == LT_OK) return LT_OK;
  lt__cpu_jit_release(jobs, n);
  return lt__err(r.rc, "%s", r.err);
}

/* ---- loaded kernels ---- */

struct cpu_kcode {
  cpu_kkey key;
  char sym[sizeof CPU_SYM_PLACEHOLDER];
  int refs;   /* under g_lock */
  bool fresh; /* being loaded by lt__cpu_kcode_get, not yet in the table */
  cpu_kernel_fn fn;
  LLVMOrcResourceTrackerRef rt;
  struct cpu_kcode *next; /* in its bucket */
  size_t obj_len;
  unsigned char obj[]; /* its object code, kept for serialize */
};

/* The JIT and the table of loaded kernels (a power-of-two bucket array). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_kcode **g_buckets;
static size_t g_nbuckets, g_nkcodes;

static size_t bucket_of(cpu_kkey k, size_t nb) { return (size_t)(k.lo ^ (k.hi >> 7)) & (nb - 1); }

static bool key_eq(cpu_kkey a, cpu_kkey b) { return a.lo == b.lo && a.hi == b.hi; }

static cpu_kcode *table_find(cpu_kkey k) {
  if (!g_nbuckets) return NULL;
  for (cpu_kcode *c = g_buckets[bucket_of(k, g_nbuckets)]; c; c = c->next)
    if (key_eq(c->key, k)) return c;
  return NULL;
}

/* Doubles the buckets when full; keeps the old ones when out of memory. */
static void table_grow(void) {
  if (g_nkcodes < g_nbuckets) return;
  size_t nb = g_nbuckets ? 2 * g_nbuckets : 256;
  cpu_kcode **b = lt__calloc(nb * sizeof *b);
  if (!b) return;
  for (size_t i = 0; i < g_nbuckets; i++)
    for (cpu_kcode *c = g_buckets[i], *next; c; c = next) {
      next = c->next;
      size_t j = bucket_of(c->key, nb);
      c->next = b[j];
      b[j] = c;
    }
  lt__free(g_buckets, g_nbuckets * sizeof *g_buckets);
  g_buckets = b;
  g_nbuckets = nb;
}

static void table_remove(cpu_kcode *c) {
  for (cpu_kcode **p = &g_buckets[bucket_of(c->key, g_nbuckets)]; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      g_nkcodes--;
      return;
    }
}

cpu_kcode *lt__cpu_kcode_find(cpu_kkey key) {
  pthread_mutex_lock(&g_lock);
  cpu_kcode *c = table_find(key);
  if (c) c->refs++;
  pthread_mutex_unlock(&g_lock);
  return c;
}

cpu_kernel_fn lt__cpu_kcode_fn(const cpu_kcode *c) { return c->fn; }
cpu_kkey lt__cpu_kcode_key(const cpu_kcode *c) { return c->key; }
const void *lt__cpu_kcode_object(const cpu_kcode *c, size_t *len) {
  *len = c->obj_len;
  return c->obj;
}

/* Removes c's code from the JIT and frees it (under g_lock). */
static void kcode_destroy(cpu_kcode *c) {
  bool removed = true;
  if (c->rt) {
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(c->rt);
    if (err) {
      LLVMConsumeError(err);
      removed = false;
    }
    LLVMOrcReleaseResourceTracker(c->rt);
  }
  /* Not removed: its symbol may still be defined, so a later load of this
   * kernel fails to link (an error, never stale code); c leaks. */
  if (removed) lt__free(c, sizeof *c + c->obj_len);
}

void lt__cpu_kcode_release(cpu_kcode *c) {
  if (!c) return;
  pthread_mutex_lock(&g_lock);
  if (--c->refs == 0) {
    table_remove(c);
    kcode_destroy(c);
  }
  pthread_mutex_unlock(&g_lock);
}

typedef struct lookup_ctx {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  char err[512];
  cpu_kcode **fresh;
  int nfresh, found;
} lookup_ctx;

static void lookup_done(LLVMErrorRef err, LLVMOrcCSymbolMapPairs res, size_t n, void *arg) {
  lookup_ctx *c = arg;
  pthread_mutex_lock(&c->mu);
  if (err) {
    char *m = LLVMGetErrorMessage(err);
    snprintf(c->err, sizeof c->err, "%s", m);
    LLVMDisposeErrorMessage(m);
  } else {
    for (size_t i = 0; i < n; i++) {
      const char *name = LLVMOrcSymbolStringPoolEntryStr(res[i].Name);
      for (int f = 0; f < c->nfresh; f++) {
        if (c->fresh[f]->fn || strcmp(c->fresh[f]->sym, name) != 0) continue;
        c->fresh[f]->fn = (cpu_kernel_fn)(uintptr_t)res[i].Sym.Address;
        c->found++;
        break;
      }
    }
  }
  c->done = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Finds the symbols of fresh[0..n) (their objects added; set has room for
 * n): LT_OK, or a status with its message in err. */
static int link_fresh(cpu_kcode **fresh, int n, LLVMOrcCLookupSetElement *set, char *err,
                      size_t errlen) {
  for (int i = 0; i < n; i++) {
    set[i].Name = LLVMOrcLLJITMangleAndIntern(g_jit, fresh[i]->sym); /* the lookup takes it */
    set[i].LookupFlags = LLVMOrcSymbolLookupFlagsRequiredSymbol;
  }
  lookup_ctx c;
  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.mu, NULL);
  pthread_cond_init(&c.cv, NULL);
  c.fresh = fresh;
  c.nfresh = n;
  LLVMOrcCJITDylibSearchOrderElement order = {LLVMOrcLLJITGetMainJITDylib(g_jit),
                                              LLVMOrcJITDylibLookupFlagsMatchAllSymbols};
  LLVMOrcExecutionSessionLookup(LLVMOrcLLJITGetExecutionSession(g_jit), LLVMOrcLookupKindStatic,
                                &order, 1, set, (size_t)n, lookup_done, &c);
  pthread_mutex_lock(&c.mu);
  while (!c.done) pthread_cond_wait(&c.cv, &c.mu);
  pthread_mutex_unlock(&c.mu);
  pthread_mutex_destroy(&c.mu);
  pthread_cond_destroy(&c.cv);
  if (c.err[0]) {
    snprintf(err, errlen, "%s", c.err);
    return LT_ECOMPILE;
  }
  if (c.found != n) {
    snprintf(err, errlen, "%d of %d kernels found", c.found, n);
    return LT_ECOMPILE;
  }
  return LT_OK;
}

/* A fresh entry for key with its object added to the JIT (under g_lock). */
static int kcode_add(cpu_kkey key, const void *obj, size_t len, cpu_kcode **out, char *err,
                     size_t errlen) {
  if (!obj || !len) {
    snprintf(err, errlen, "a kernel has no object code");
    return LT_EINVAL;
  }
  cpu_kcode *c = lt__malloc(sizeof *c + len);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return LT_ENOMEM;
  }
  memset(c, 0, sizeof *c);
  memcpy(c->obj, obj, len);
  c->key = key;
  lt__cpu_kernel_symbol(c->sym, sizeof c->sym, key);
  c->refs = 1;
  c->fresh = true;
  c->obj_len = len;
  c->rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(g_jit));
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, len, "lt_kernel.o");
  LLVMErrorRef lerr = LLVMOrcLLJITAddObjectFileWithRT(g_jit, c->rt, buf); /* takes buf */
  if (lerr) {
    char *m = LLVMGetErrorMessage(lerr);
    snprintf(err, errlen, "adding object code: %s", m);
    LLVMDisposeErrorMessage(m);
    kcode_destroy(c);
    return LT_ECOMPILE;
  }
  *out = c;
  return LT_OK;
}

int lt__cpu_kcode_get(const cpu_kobj *objs, int n, cpu_kcode **out, int *nshared) {
  int rc = lt__cpu_jit_host(NULL, NULL);
  if (rc != LT_OK) return rc;
  *nshared = 0;
  if (n <= 0) return LT_OK;
  /* the entries loaded here, and the lookup of their symbols: one block */
  size_t bytes = (size_t)n * (sizeof(LLVMOrcCLookupSetElement) + sizeof(cpu_kcode *));
  LLVMOrcCLookupSetElement *set = lt__malloc(bytes);
  if (!set) return lt__err(LT_ENOMEM, "cpu: out of memory loading kernels");
  cpu_kcode **fresh = (cpu_kcode **)(set + n);
  memset(out, 0, (size_t)n * sizeof *out);
  int nfresh = 0, shared = 0;
  char err[600] = "";
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < n && rc == LT_OK; i++) {
    cpu_kcode *c = table_find(objs[i].key);
    for (int f = 0; f < nfresh && !c; f++)
      if (key_eq(fresh[f]->key, objs[i].key)) c = fresh[f]; /* twice in this batch */
    if (c) {
      c->refs++;
      out[i] = c;
      shared += !c->fresh;
      continue;
    }
    rc = kcode_add(objs[i].key, objs[i].obj, objs[i].len, &out[i], err, sizeof err);
    if (rc == LT_OK) fresh[nfresh++] = out[i];
  }
  if (rc == LT_OK && nfresh) rc = link_fresh(fresh, nfresh, set, err, sizeof err);
  if (rc == LT_OK) {
    for (int f = 0; f < nfresh; f++) {
      table_grow();
      if (!g_nbuckets) {
        rc = LT_ENOMEM;
        snprintf(err, sizeof err, "out of memory");
        break;
      }
      cpu_kcode *c = fresh[f];
      size_t b = bucket_of(c->key, g_nbuckets);
      c->next = g_buckets[b];
      g_buckets[b] = c;
      c->fresh = false;
      g_nkcodes++;
    }
  }
  if (rc != LT_OK) { /* nothing kept: shared entries lose the reference, fresh ones go */
    for (int i = 0; i < n; i++)
      if (out[i] && !out[i]->fresh) {
        if (--out[i]->refs == 0) { /* inserted above before a later failure */
          table_remove(out[i]);
          kcode_destroy(out[i]);
        }
      }
    for (int f = 0; f < nfresh; f++)
      if (fresh[f]->fresh) kcode_destroy(fresh[f]);
    memset(out, 0, (size_t)n * sizeof *out);
  }
  pthread_mutex_unlock(&g_lock);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  lt__free(set, bytes);
  if (rc != LT_OK) {
    if (rc == LT_ENOMEM) return lt__err(rc, "cpu: out of memory loading kernels");
    return lt__err(rc, "cpu: linking kernels: %s", err);
  }
  if (getenv("LT_CPU_DEBUG"))
    fprintf(stderr, "jit: link %.1f ms (%d kernels loaded, %d shared)\n", ms_between(&t0, &t1),
            nfresh, shared);
  *nshared = shared;
  return LT_OK;
}
