/* The cpu backend (see cpu.h): host buffers as ref's (so that buffers move
 * freely between the two), an environment hash over everything that changes
 * generated code, compile = lower + JIT, execute = run the kernels.
 *
 * Compiling a graph: lowering gives the kernels and each loop kernel's
 * function as IR text that names no slot of the graph (it takes its own
 * slots as arguments) and whose symbol is a placeholder. Each function
 * becomes a module of its own; its key is the hash of that module's text
 * under the environment hash. Functions of equal key share one compiled
 * kernel: within the graph, and with every live executable (the kernel cache
 * of cpu_jit.c), so a graph compiles only kernels no live executable has.
 * Those compile in parallel (lt__cpu_jit_compile); then all are linked. */
#define _GNU_SOURCE /* memmem */
#include <llvm-c/Core.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "../../core/lt_metrics.h"
#include "../../core/lt_shape.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_irmath.h"
#include "cpu_openblas.h"
#include "cpu_ops.h"

/* ---- small shared helpers ---- */

void lt__cpu_view_init(cpu_view *v, int slot, int dtype, const int64_t *shape_in, int ndim) {
  int64_t shape[LT_MAX_DIMS];
  if (ndim) memcpy(shape, shape_in, (size_t)ndim * sizeof *shape); /* shape may be v's own */
  memset(v, 0, sizeof *v);
  v->slot = slot;
  v->dtype = (uint8_t)dtype;
  v->ndim = (uint8_t)ndim;
  if (ndim) memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
  lt__row_major_strides(v->shape, ndim, v->strides);
}

bool lt__cpu_view_contiguous(const cpu_view *v) {
  int64_t s = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->strides[d] != s) return false;
    s *= v->shape[d];
  }
  return true;
}

/* ---- the function table that lowering fills ---- */

static void meta_push(cpu_fntab *t, int64_t v) {
  if (t->oom) return;
  if (t->nmeta == t->meta_cap) {
    size_t nc = t->meta_cap ? 2 * t->meta_cap : 256;
    int64_t *m = lt__realloc(t->meta, t->meta_cap * sizeof *m, nc * sizeof *m);
    if (!m) {
      t->oom = true;
      return;
    }
    t->meta = m;
    t->meta_cap = nc;
  }
  t->meta[t->nmeta++] = v;
}

void lt__cpu_fntab_begin(cpu_fntab *t, int fn_index) {
  if (fn_index != t->n) t->misordered = true;
  t->begun = t->text.len;
  lt__sb_printf(&t->text, "; lazytensor cpu kernel\n");
  lt__ir_declarations(&t->text);
  lt__sb_printf(&t->text, "attributes #0 = { nounwind \"prefer-vector-width\"=\"512\" }\n");
}

void lt__cpu_fntab_end(cpu_fntab *t, const int *args, int nargs) {
  if (t->text.oom) return;
  const char *f = t->text.s + t->begun;
  size_t len = t->text.len - t->begun;
  lt__ops_uniform_defs(&t->text, memmem(f, len, "@lt_uniform_f32(", 16) != NULL,
                       memmem(f, len, "@lt_uniform_f64(", 16) != NULL);
  meta_push(t, (int64_t)t->begun);
  meta_push(t, (int64_t)t->text.len);
  meta_push(t, nargs);
  for (int i = 0; i < nargs; i++) meta_push(t, args[i]);
  t->n++;
}

void lt__cpu_fntab_reset(cpu_fntab *t) {
  lt__sb_truncate(&t->text, 0);
  t->n = 0;
  t->nmeta = 0;
  t->oom = t->misordered = false;
}

void lt__cpu_fntab_free(cpu_fntab *t) {
  lt__sb_free(&t->text);
  lt__free(t->meta, t->meta_cap * sizeof *t->meta);
  memset(t, 0, sizeof *t);
}

/* ---- the backend ---- */

static uint64_t cpu_env_hash(void) {
  static _Atomic uint64_t cached;
  uint64_t h = atomic_load(&cached);
  if (h) return h;
  const char *cpu, *features;
  lt__cpu_jit_host(&cpu, &features);
  unsigned maj = 0, min = 0, pat = 0;
  LLVMGetVersion(&maj, &min, &pat);
  lt_strbuf sb = {0};
  lt__sb_printf(&sb, "lazytensor-cpu %s %s llvm %u.%u.%u cpu %s features %s pipeline %s",
                LT_VERSION_STRING, CPU_BACKEND_VERSION, maj, min, pat, cpu, features,
                lt__cpu_jit_pipeline());
  h = sb.s ? XXH3_64bits(sb.s, sb.len) : 1;
  lt__sb_free(&sb);
  if (!h) h = 1;
  atomic_store(&cached, h);
  return h;
}

/* Ops with a path of their own (the op table's CPU column); every other op
 * runs on the executor's fallback, one node at a time. */
static bool cpu_supports_op(lt_op op) {
  return op < LT_OP_COUNT && lt__op_cpu_path(op) != LT_CPU_FALLBACK;
}

static size_t fn_block_bytes(int nfns, int nargs) {
  return (size_t)nfns * (sizeof(cpu_kcode *) + sizeof(cpu_fn)) + (size_t)nargs * sizeof(int);
}

int lt__cpu_executable_fn_block(lt_executable *e, int nfns, int nargs) {
  char *b = lt__calloc(fn_block_bytes(nfns, nargs));
  if (!b) return LT_ENOMEM;
  e->nfns = nfns;
  e->nargs = nargs;
  e->codes = (cpu_kcode **)b; /* pointers first: the block's alignment */
  e->fns = (cpu_fn *)(b + (size_t)nfns * sizeof(cpu_kcode *));
  e->args = (int *)(b + (size_t)nfns * (sizeof(cpu_kcode *) + sizeof(cpu_fn)));
  return LT_OK;
}

void lt__cpu_executable_free(lt_executable *e) {
  if (!e) return;
  for (int c = 0; c < e->ncodes; c++) lt__cpu_kcode_release(e->codes[c]);
  if (e->codes) lt__free(e->codes, fn_block_bytes(e->nfns, e->nargs));
  if (e->kernels) lt__cpu_kernels_free(e->kernels, e->nkernels);
  lt__free(e->kernels, (size_t)e->kernels_cap * sizeof *e->kernels);
  lt__free(e->slots, (size_t)e->slots_cap * sizeof *e->slots);
  lt__free(e->root_slot, (size_t)e->nroots * sizeof(int) + 1);
  lt__free(e->alias, (size_t)e->nroots * sizeof(int) + 1);
  lt__free(e, sizeof *e);
}

void lt__cpu_executable_link(lt_executable *e) {
  for (int i = 0; i < e->nkernels; i++) {
    cpu_kernel *k = &e->kernels[i];
    if (k->kind != CK_LOOP) continue;
    const cpu_fn *f = &e->fns[k->fn_index];
    k->fn = lt__cpu_kcode_fn(e->codes[f->code]);
    k->arg_base = e->nslots + f->arg0;
  }
}

/* Scratch of build_functions, one block: per function its key, per job
 * (a kernel to compile) the job, its code and its object. */
typedef struct build_scratch {
  cpu_kkey *keys;
  cpu_kjob *jobs;
  int *job_code;
  cpu_kobj *objs;
  cpu_kcode **got;
} build_scratch;

static size_t scratch_bytes(int n) {
  return (size_t)n * (sizeof(cpu_kkey) + sizeof(cpu_kjob) + sizeof(cpu_kobj) + sizeof(cpu_kcode *) +
                      sizeof(int));
}

static void *scratch_new(build_scratch *b, int n) {
  char *p = lt__malloc(scratch_bytes(n)); /* the 8-byte aligned parts first */
  if (!p) return NULL;
  b->keys = (cpu_kkey *)p;
  b->jobs = (cpu_kjob *)(b->keys + n);
  b->objs = (cpu_kobj *)(b->jobs + n);
  b->got = (cpu_kcode **)(b->objs + n);
  b->job_code = (int *)(b->got + n);
  return p;
}

/* Function i's key (the hash of its module under the environment hash),
 * with the module's placeholder symbol made the key's. */
static cpu_kkey module_key(char *m, size_t len) {
  XXH128_hash_t h = XXH3_128bits_withSeed(m, len, cpu_env_hash());
  cpu_kkey key = {h.low64, h.high64};
  char *p = memmem(m, len, CPU_SYM_PLACEHOLDER, sizeof CPU_SYM_PLACEHOLDER - 1);
  char sym[sizeof CPU_SYM_PLACEHOLDER];
  lt__cpu_kernel_symbol(sym, sizeof sym, key);
  if (p) memcpy(p, sym, sizeof sym - 1);
  return key;
}

/* e's functions from lowering's table: their slots, and for each distinct
 * key a compiled kernel, shared when loaded already, else compiled here. */
static int build_functions(lt_executable *e, cpu_fntab *t) {
  int n = t->n, nargs = (int)(t->nmeta - 3 * (size_t)n);
  if (!n) return LT_OK;
  build_scratch b;
  void *scratch = scratch_new(&b, n);
  if (!scratch || lt__cpu_executable_fn_block(e, n, nargs) != LT_OK) {
    lt__free(scratch, scratch_bytes(n));
    return LT_ENOMEM;
  }
  int ncodes = 0, njobs = 0, nshared = 0, arg = 0;
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    size_t start = (size_t)t->meta[at], end = (size_t)t->meta[at + 1];
    int na = (int)t->meta[at + 2];
    for (int a = 0; a < na; a++) e->args[arg + a] = (int)t->meta[at + 3 + a];
    at += 3 + (size_t)na;
    e->fns[i].arg0 = arg;
    e->fns[i].nargs = na;
    arg += na;
    char *m = t->text.s + start;
    b.keys[i] = module_key(m, end - start);
    int c = 0;
    while (c < i && !(b.keys[c].lo == b.keys[i].lo && b.keys[c].hi == b.keys[i].hi)) c++;
    if (c < i) { /* a kernel of the same structure earlier in this graph */
      e->fns[i].code = e->fns[c].code;
      continue;
    }
    e->fns[i].code = ncodes;
    e->codes[ncodes] = lt__cpu_kcode_find(b.keys[i]);
    if (!e->codes[ncodes]) {
      b.jobs[njobs] = (cpu_kjob){m, end - start, b.keys[i], NULL, NULL, 0};
      b.job_code[njobs++] = ncodes;
    }
    e->ncodes = ++ncodes; /* the missing ones stay NULL until loaded */
  }
  int rc = lt__cpu_jit_compile(b.jobs, njobs);
  if (rc == LT_OK) {
    for (int j = 0; j < njobs; j++)
      b.objs[j] = (cpu_kobj){b.jobs[j].key, b.jobs[j].obj, b.jobs[j].obj_len};
    rc = lt__cpu_kcode_get(b.objs, njobs, b.got, &nshared);
    lt__cpu_jit_release(b.jobs, njobs);
  }
  if (rc == LT_OK) {
    for (int j = 0; j < njobs; j++) e->codes[b.job_code[j]] = b.got[j];
    lt__count(LT_CTR_KERNEL_COMPILE, njobs);
    lt__count(LT_CTR_KERNEL_CACHE_HIT, n - njobs);
  }
  lt__free(scratch, scratch_bytes(n));
  return rc;
}

static int cpu_compile(const lt_graph *g, lt_executable **out) {
  static _Atomic uint64_t next_uid;
  lt_executable *e = lt__calloc(sizeof *e);
  if (!e) return LT_ENOMEM;
  e->uid = atomic_fetch_add(&next_uid, 1) + 1;
  e->nparams = g->nparams;
  e->nroots = g->nroots;
  e->root_slot = lt__malloc((size_t)g->nroots * sizeof(int) + 1);
  e->alias = lt__malloc((size_t)g->nroots * sizeof(int) + 1);
  cpu_fntab fns;
  memset(&fns, 0, sizeof fns);
  int rc = LT_ENOMEM;
  if (!e->root_slot || !e->alias) goto fail;
  if ((rc = lt__cpu_lower(g, e, &fns)) != LT_OK) goto fail;
  if (fns.oom || fns.text.oom) {
    rc = LT_ENOMEM;
    goto fail;
  }
  if ((rc = build_functions(e, &fns)) != LT_OK) goto fail;
  lt__cpu_executable_link(e);
  lt__cpu_fntab_free(&fns);
  lt__cpu_pool_threads(); /* starts the pool (and sets BLAS's threads) before any run */
  *out = e;
  return LT_OK;
fail:
  lt__cpu_fntab_free(&fns);
  lt__cpu_executable_free(e);
  if (rc == LT_ENOMEM) return lt__err(LT_ENOMEM, "cpu: out of memory compiling a graph");
  return rc;
}

static void cpu_signature(const lt_executable *e, int *nparams, int *nroots) {
  *nparams = e->nparams;
  *nroots = e->nroots;
}

static int cpu_execute(lt_executable *e, lt_buffer *const *args, int nargs, lt_buffer *const *outs,
                       int nouts) {
  /* The executor checked the counts and that every argument is READY. The
   * plan's bounds hold for buffers of the sizes it was made for. */
  for (int a = 0; a < nargs; a++)
    if (args[a]->nbytes != e->slots[a].nbytes)
      return lt__err(LT_EEXEC, "cpu: argument %d has %zu bytes, the executable takes %zu", a,
                     args[a]->nbytes, e->slots[a].nbytes);
  for (int r = 0; r < nouts; r++)
    if (outs[r]->nbytes != e->slots[e->nparams + r].nbytes)
      return lt__err(LT_EEXEC, "cpu: result %d has %zu bytes, the executable gives %zu", r,
                     outs[r]->nbytes, e->slots[e->nparams + r].nbytes);
  return lt__cpu_run(e, args, outs);
}

/* The JIT (LLVM's target set-up, ORC) and the thread pool take a few ms to
 * start; a thread of their own starts them while the program traces its
 * first graph. Whoever needs them first waits in pthread_once, so a thread
 * that could not be made costs only the overlap. */
static void *prepare_main(void *arg) {
  (void)arg;
  lt__cpu_jit_host(NULL, NULL);
  lt__cpu_pool_threads();
  return NULL;
}

static pthread_t g_prepare_thread;

/* At exit, before LLVM's static destructors (registered earlier, so run
 * later): a program that ends at once must not tear LLVM down under it. */
static void join_prepare(void) { pthread_join(g_prepare_thread, NULL); }

static void cpu_prepare(void) {
  if (pthread_create(&g_prepare_thread, NULL, prepare_main, NULL) != 0) return;
  if (atexit(join_prepare) != 0) pthread_detach(g_prepare_thread);
}

/* lt_get_isa: where each dtype's products go (lower_matmul, cpu_native.c). */
static const char *cpu_isa_of(lt_dtype dt) {
  switch (dt) {
  case LT_F32:
    return lt__cpu_dnnl_isa_name();
  case LT_BF16:
    return lt__cpu_bf16_isa_name();
  case LT_F64: /* matmul through OpenBLAS (convolutions on the fallback) */
    return lt__cpu_openblas_isa();
  case LT_BOOL:
  case LT_U8:
  case LT_I8:
  case LT_I32:
  case LT_I64:
    return "ref"; /* integer products run on the ref fallback */
  case LT_NUM_DTYPES:
    break;
  }
  return NULL; /* lt_get_isa checked dt */
}

const lt_backend lt__cpu_backend = {
    .isa = cpu_isa_of,
    .prepare = cpu_prepare,
    .name = "cpu",
    .env_hash = cpu_env_hash,
    .supports_op = cpu_supports_op,
    .data_alloc = lt__host_data_alloc,
    .data_free = lt__host_data_free,
    .to_device = lt__host_to_device,
    .host_storage = true,
    .from_device = lt__host_from_device,
    .compile = cpu_compile,
    .signature = cpu_signature,
    .execute = cpu_execute,
    .executable_free = lt__cpu_executable_free,
    .serialize = lt__cpu_serialize,
    .deserialize = lt__cpu_deserialize,
};
