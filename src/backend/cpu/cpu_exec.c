/* Execution of a cpu executable: the slot table (parameters, outputs,
 * temporaries in one arena), then each kernel in order. */
#include <cblas.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "../../core/lt_shape.h"
#include "cpu.h"

static lt_buffer view_buffer(const cpu_view *v, void **table) {
  lt_buffer b;
  memset(&b, 0, sizeof b);
  b.dtype = v->dtype;
  b.ndim = v->ndim;
  memcpy(b.shape, v->shape, sizeof b.shape);
  b.numel = lt__numel(v->shape, v->ndim);
  b.nbytes = (size_t)b.numel * lt_dtype_size((lt_dtype)v->dtype);
  b.data = (char *)table[v->slot] + (size_t)v->offset * lt_dtype_size((lt_dtype)v->dtype);
  atomic_init(&b.state, LT_BUF_READY);
  return b;
}

static int run_fallback(const cpu_kernel *k, void **table) {
  lt_buffer out = view_buffer(&k->out, table);
  lt_buffer bufs[8], *in_small[8];
  lt_buffer *bs = bufs, **in = in_small;
  int n = k->ins.noperands;
  if (n > 8) {
    bs = lt__malloc((size_t)n * sizeof *bs);
    in = lt__malloc((size_t)n * sizeof *in);
    if (!bs || !in) {
      if (bs != bufs) lt__free(bs, (size_t)n * sizeof *bs);
      if (in != in_small) lt__free(in, (size_t)n * sizeof *in);
      return LT_ENOMEM;
    }
  }
  for (int j = 0; j < n; j++) {
    bs[j] = view_buffer(&k->in[j], table);
    in[j] = &bs[j];
  }
  /* Ops without a cpu path (and nodes whose dtypes the fused loops do not
   * cover) run on the executor's fallback backend. */
  int rc = lt__backend_run_fallback(&k->ins, &out, in);
  if (bs != bufs) lt__free(bs, (size_t)n * sizeof *bs);
  if (in != in_small) lt__free(in, (size_t)n * sizeof *in);
  return rc;
}

static void run_blas(const cpu_matmul *mm, const void *abase, const void *bbase, void *out) {
  int nd = mm->nbatch_dims;
  int64_t nbatch = 1;
  for (int d = 0; d < nd; d++) nbatch *= mm->batch_shape[d];
  size_t es = mm->f64 ? 8 : 4;
  if (mm->k == 0) {
    memset(out, 0, (size_t)(nbatch * mm->n * mm->m) * es);
    return;
  }
  if (nbatch == 0 || mm->n == 0 || mm->m == 0) return;
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t ao = mm->a.offset + lt__unravel_offset(bi, mm->batch_shape, mm->a_bstride, nd);
    int64_t bo = mm->b.offset + lt__unravel_offset(bi, mm->batch_shape, mm->b_bstride, nd);
    const char *a = (const char *)abase + (size_t)ao * es;
    const char *b = (const char *)bbase + (size_t)bo * es;
    char *c = (char *)out + (size_t)(bi * mm->n * mm->m) * es;
    enum CBLAS_TRANSPOSE ta = mm->ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = mm->tb ? CblasTrans : CblasNoTrans;
    if (mm->f64)
      cblas_dgemm(CblasRowMajor, ta, tb, (blasint)mm->n, (blasint)mm->m, (blasint)mm->k, 1.0,
                  (const double *)a, (blasint)mm->lda, (const double *)b, (blasint)mm->ldb, 0.0,
                  (double *)c, (blasint)mm->m);
    else
      cblas_sgemm(CblasRowMajor, ta, tb, (blasint)mm->n, (blasint)mm->m, (blasint)mm->k, 1.0f,
                  (const float *)a, (blasint)mm->lda, (const float *)b, (blasint)mm->ldb, 0.0f,
                  (float *)c, (blasint)mm->m);
  }
}

int cpu_run(const lt_executable *e, lt_buffer *const *args, lt_buffer *const *outs) {
  void *small[64];
  void **table = small;
  if (e->nslots > 64) {
    table = lt__malloc((size_t)e->nslots * sizeof *table);
    if (!table) return LT_ENOMEM;
  }
  char *arena_raw = NULL, *arena = NULL;
  int rc = LT_OK;
  for (int p = 0; p < e->nparams; p++) table[p] = args[p]->data;
  /* Every allocation comes before any donated storage is taken: a failure
   * here leaves the donors whole, so their tensors keep their values. */
  for (int r = 0; r < e->nroots && rc == LT_OK; r++)
    if (e->alias[r] < 0) rc = lt__buffer_materialize(outs[r]);
  if (rc == LT_OK && e->arena_bytes) {
    arena_raw = lt__malloc(e->arena_bytes + 64);
    if (!arena_raw) rc = LT_ENOMEM;
    arena = arena_raw + ((64 - ((uintptr_t)arena_raw & 63)) & 63);
  }
  /* outputs: a donated parameter's storage, or the fresh one above */
  for (int r = 0; r < e->nroots && rc == LT_OK; r++) {
    if (e->alias[r] >= 0) {
      lt__buffer_take_data(outs[r], args[e->alias[r]]);
      table[e->alias[r]] = outs[r]->data;
    }
    table[e->nparams + r] = outs[r]->data;
  }
  for (int s = e->nparams + e->nroots; s < e->nslots && rc == LT_OK; s++)
    table[s] = arena ? arena + e->slots[s].offset : NULL; /* no arena: every temporary is empty */
  for (int i = 0; i < e->nkernels && rc == LT_OK; i++) {
    const cpu_kernel *k = &e->kernels[i];
    switch (k->kind) {
    case CK_LOOP:
      cpu_pool_run(k->fn, table, k->extent, k->unit_cost);
      break;
    case CK_BLAS:
      run_blas(&k->mm, table[k->mm.a.slot], table[k->mm.b.slot], table[k->out_slot]);
      break;
    case CK_REF:
      rc = run_fallback(k, table);
      break;
    case CK_MEMCPY:
      if (k->nbytes) memcpy(table[k->out_slot], table[k->src.slot], k->nbytes);
      break;
    }
  }
  if (arena_raw) lt__free(arena_raw, e->arena_bytes + 64);
  if (table != small) lt__free(table, (size_t)e->nslots * sizeof *table);
  return rc;
}
