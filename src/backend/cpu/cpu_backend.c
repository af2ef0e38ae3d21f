/* The cpu backend (see cpu.h): host buffers as ref's (so that buffers move
 * freely between the two), an environment hash over everything that changes
 * generated code, compile = lower + JIT, execute = run the kernels. */
#include <llvm-c/Core.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "../../core/lt_shape.h"
#include "cpu.h"
#include "cpu_irmath.h"

/* ---- small shared helpers ---- */

void cpu_view_init(cpu_view *v, int slot, int dtype, const int64_t *shape_in, int ndim) {
  int64_t shape[LT_MAX_DIMS];
  if (ndim) memcpy(shape, shape_in, (size_t)ndim * sizeof *shape); /* shape may be v's own */
  memset(v, 0, sizeof *v);
  v->slot = slot;
  v->dtype = (uint8_t)dtype;
  v->ndim = (uint8_t)ndim;
  if (ndim) memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
  lt__row_major_strides(v->shape, ndim, v->strides);
}

bool cpu_view_contiguous(const cpu_view *v) {
  int64_t s = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->strides[d] != s) return false;
    s *= v->shape[d];
  }
  return true;
}

void cpu_fn_name(char *buf, size_t n, uint64_t uid, int i) {
  snprintf(buf, n, "lt_k%llu_%d", (unsigned long long)uid, i);
}

/* ---- the backend ---- */

static uint64_t cpu_env_hash(void) {
  static _Atomic uint64_t cached;
  uint64_t h = atomic_load(&cached);
  if (h) return h;
  const char *cpu, *features;
  cpu_jit_host(&cpu, &features);
  unsigned maj = 0, min = 0, pat = 0;
  LLVMGetVersion(&maj, &min, &pat);
  lt_strbuf sb = {0};
  lt__sb_printf(&sb, "lazytensor-cpu %s %s llvm %u.%u.%u cpu %s features %s", LT_VERSION_STRING,
                CPU_BACKEND_VERSION, maj, min, pat, cpu, features);
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

void cpu_executable_free(lt_executable *e) {
  if (!e) return;
  cpu_jit_free(e->jit);
  if (e->kernels) cpu_kernels_free(e->kernels, e->nkernels);
  lt__free(e->kernels, (size_t)e->kernels_cap * sizeof *e->kernels);
  lt__free(e->slots, (size_t)e->slots_cap * sizeof *e->slots);
  lt__free(e->root_slot, (size_t)e->nroots * sizeof(int) + 1);
  lt__free(e->alias, (size_t)e->nroots * sizeof(int) + 1);
  lt__free(e->obj, e->obj_len);
  lt__free(e, sizeof *e);
}

int cpu_executable_link(lt_executable *e) {
  if (!e->nfns) return LT_OK;
  cpu_kernel_fn *fns = lt__calloc((size_t)e->nfns * sizeof *fns);
  if (!fns) return lt__err(LT_ENOMEM, "cpu: out of memory linking kernels");
  int rc = cpu_jit_load(e->obj, e->obj_len, e->uid, e->nfns, fns, &e->jit);
  if (rc == LT_OK)
    for (int i = 0; i < e->nkernels; i++)
      if (e->kernels[i].kind == CK_LOOP) e->kernels[i].fn = fns[e->kernels[i].fn_index];
  lt__free(fns, (size_t)e->nfns * sizeof *fns);
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
  lt_strbuf ir = {0};
  int nfns = 0, rc = LT_ENOMEM;
  if (!e->root_slot || !e->alias) goto fail;
  lt__sb_printf(&ir, "; lazytensor cpu kernels, executable %llu\n", (unsigned long long)e->uid);
  ir_declarations(&ir);
  lt__sb_printf(&ir, "attributes #0 = { nounwind \"prefer-vector-width\"=\"512\" }\n");
  if ((rc = cpu_lower(g, e, &ir, &nfns)) != LT_OK) goto fail;
  if (ir.oom) {
    rc = LT_ENOMEM;
    goto fail;
  }
  e->nfns = nfns;
  if (nfns) {
    if ((rc = cpu_jit_compile(ir.s, ir.len, e->uid, &e->obj, &e->obj_len)) != LT_OK) goto fail;
    if ((rc = cpu_executable_link(e)) != LT_OK) goto fail;
  }
  lt__sb_free(&ir);
  cpu_pool_threads(); /* starts the pool (and sets BLAS's threads) before any run */
  *out = e;
  return LT_OK;
fail:
  lt__sb_free(&ir);
  cpu_executable_free(e);
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
  return cpu_run(e, args, outs);
}

/* The JIT (LLVM's target set-up, ORC) and the thread pool take a few ms to
 * start; a thread of their own starts them while the program traces its
 * first graph. Whoever needs them first waits in pthread_once, so a thread
 * that could not be made costs only the overlap. */
static void *prepare_main(void *arg) {
  (void)arg;
  cpu_jit_host(NULL, NULL);
  cpu_pool_threads();
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

const lt_backend lt__cpu_backend = {
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
    .executable_free = cpu_executable_free,
    .serialize = cpu_serialize,
    .deserialize = cpu_deserialize,
};
