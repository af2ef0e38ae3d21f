/* Products through oneDNN's matmul primitive, one primitive per shape and
 * dtype, kept for the life of the process: every bf16 product where oneDNN
 * has bf16 instructions (cpu_dnnl.h), f32 batches that do not fold into
 * one product (one batched primitive per range of entries; cpu_gemm.c
 * batch_prim), and single f32 products with LT_CPU_MATMUL=primitive (the
 * default, sgemm, leaves them to cpu_gemm.c's dnnl_sgemm).
 *
 * bf16: the primitive reads bf16 operands, accumulates in f32 and rounds
 * each result to bf16 once (round to nearest even), as torch's CPU bf16
 * matmul through the same library does.
 *
 * Why: dnnl_sgemm's first call in a process generates every kernel of its
 * GEMM driver at once, about 31 ms on a 2-core AVX-512 machine, the largest
 * part of a warm process's time to its first result (bench/cache_warm_start).
 * A matmul primitive generates only the kernels of its own shape: about 2 ms
 * from nothing to a first 128x512x784 product. Why not by default: in the
 * steady state the primitives were faster on some shapes and slower on
 * others (the GPT step 8% slower, its K = 128 products and its per-head
 * products with their copies; docs/ARCHITECTURE.md).
 *
 * A product that gets no primitive (the cache full, oneDNN offering only its
 * sgemm-based implementation, as on a machine without AVX-512, memory)
 * returns false, and its caller uses dnnl_sgemm. */
#define _GNU_SOURCE
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_dnnl.h"

/* Distinct shapes kept; a GPT step has a few dozen (its products and the
 * per-thread blocks of the shared ones). Beyond it, products use sgemm. */
#define PRIM_MAX 256

typedef struct prim_key { /* a dense product: lda, ldb, ldc follow from these */
  int64_t nb;             /* batch entries, each dense after the one before; 1: one matrix */
  int64_t n, m, k;
  int64_t dt;  /* the operands': LT_F32 or LT_BF16 */
  int64_t cdt; /* the result's: dt, or LT_F32 (bf16 operands' unrounded sums) */
  bool ta, tb;
} prim_key;

typedef struct matmul_prim {
  prim_key key;
  dnnl_primitive_t prim; /* NULL: oneDNN declined this shape (remembered, not retried) */
  dnnl_memory_desc_t a, b, c, scratch;
  size_t scratch_bytes;
} matmul_prim;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* the shared engine (cpu_dnnl.c); NULL when none could be made */
static dnnl_engine_t g_engine;
static bool g_f32; /* LT_CPU_MATMUL=primitive: f32 products too */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static matmul_prim *g_prims[PRIM_MAX];
static int g_count;

static void prim_init(void) {
  const char *e = getenv("LT_CPU_MATMUL");
  g_f32 = e && strcmp(e, "primitive") == 0;
  g_engine = lt__cpu_dnnl_engine();
}

/* The primitive of one shape; every step can fail (NULL prim). */
static void prim_make(matmul_prim *p) {
  const prim_key *k = &p->key;
  dnnl_data_type_t dt = k->dt == LT_BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_data_type_t cdt = k->cdt == LT_BF16 ? dnnl_bf16 : dnnl_f32;
  /* op(A) is n x k: rows lda apart, or (transposed) columns lda apart; a
   * batch (nb > 1) is a leading dimension over dense entries */
  int nd = k->nb > 1 ? 3 : 2, o = nd - 2;
  dnnl_dims_t ad = {0}, bd = {0}, cd = {0}, as = {0}, bs = {0}, cs = {0};
  ad[0] = bd[0] = cd[0] = k->nb;
  as[0] = k->n * k->k;
  bs[0] = k->k * k->m;
  cs[0] = k->n * k->m;
  ad[o] = k->n, ad[o + 1] = k->k, bd[o] = k->k, bd[o + 1] = k->m, cd[o] = k->n, cd[o + 1] = k->m;
  as[o] = k->ta ? 1 : k->k, as[o + 1] = k->ta ? k->n : 1;
  bs[o] = k->tb ? 1 : k->m, bs[o + 1] = k->tb ? k->k : 1;
  cs[o] = k->m, cs[o + 1] = 1;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_matmul_desc_t md;
  bool ok =
      dnnl_memory_desc_init_by_strides(&p->a, nd, ad, dt, as) == dnnl_success &&
      dnnl_memory_desc_init_by_strides(&p->b, nd, bd, dt, bs) == dnnl_success &&
      dnnl_memory_desc_init_by_strides(&p->c, nd, cd, cdt, cs) == dnnl_success &&
      dnnl_matmul_desc_init(&md, &p->a, &p->b, NULL, &p->c) == dnnl_success &&
      dnnl_primitive_attr_create(&attr) == dnnl_success &&
      /* the scratchpad is ours (one per thread), so that two threads
       * may run the same primitive at once */
      dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &md, attr, g_engine, NULL) == dnnl_success;
  if (ok) {
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (sm) p->scratch = *sm;
    p->scratch_bytes = sm ? dnnl_memory_desc_get_size(sm) : 0;
    /* f32: oneDNN's fallback implementation is its sgemm ("gemm:jit"):
     * then the caller calls that directly, without this file's copies.
     * bf16: its reference loops ("ref:any"), far slower than converting
     * to f32 (which the caller then does). */
    const char *name = "";
    bool own = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success &&
               strncmp(name, k->dt == LT_BF16 ? "ref" : "gemm", k->dt == LT_BF16 ? 3 : 4) != 0;
    if (!own || dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = NULL;
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
}

/* The cached primitive of key, made on first use; NULL when there is none. */
static const matmul_prim *prim_get(const prim_key *key) {
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_count; i++)
    if (memcmp(&g_prims[i]->key, key, sizeof *key) == 0) {
      matmul_prim *p = g_prims[i];
      pthread_mutex_unlock(&g_lock);
      return p->prim ? p : NULL;
    }
  matmul_prim *p = NULL;
  /* made under the lock: a shape is made once, and making one is rare */
  if (g_count < PRIM_MAX && (p = calloc(1, sizeof *p)) != NULL) {
    p->key = *key;
    prim_make(p);
    g_prims[g_count++] = p;
  }
  pthread_mutex_unlock(&g_lock);
  return p && p->prim ? p : NULL;
}

/* Copies rows x cols elements of es bytes, rows src_ld apart in src and
 * dst_ld in dst. */
static void copy_rows(char *dst, int64_t dst_ld, const char *src, int64_t src_ld, int64_t rows,
                      int64_t cols, size_t es) {
  for (int64_t r = 0; r < rows; r++)
    memcpy(dst + (size_t)(r * dst_ld) * es, src + (size_t)(r * src_ld) * es, (size_t)cols * es);
}

/* The cache key of a dense product (compared with memcmp: zeroed padding). */
static prim_key key_of(int64_t nb, int64_t n, int64_t m, int64_t k, int dt, int cdt, bool ta,
                       bool tb) {
  prim_key key;
  memset(&key, 0, sizeof key);
  key.nb = nb;
  key.n = n;
  key.m = m;
  key.k = k;
  key.dt = dt;
  key.cdt = cdt;
  key.ta = ta;
  key.tb = tb;
  return key;
}

/* One run of p on dense operands, with its scratchpad at scratch (at least
 * p->scratch_bytes, unless that is 0). */
static bool run_dense(const matmul_prim *p, const void *a, const void *b, void *c, void *scratch) {
  dnnl_stream_t stream = NULL;
  dnnl_memory_t keep[4];
  dnnl_exec_arg_t args[4];
  int nargs = 0, nkeep = 0;
  bool ok = dnnl_stream_create(&stream, g_engine, dnnl_stream_default_flags) == dnnl_success &&
            lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_SRC, &p->a, (void *)a, keep, &nkeep) &&
            lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_WEIGHTS, &p->b, (void *)b, keep, &nkeep) &&
            lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_DST, &p->c, c, keep, &nkeep) &&
            (!p->scratch_bytes || lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_SCRATCHPAD, &p->scratch,
                                                   scratch, keep, &nkeep)) &&
            dnnl_primitive_execute(p->prim, stream, nargs, args) == dnnl_success &&
            dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < nkeep; i++) dnnl_memory_destroy(keep[i]);
  if (stream) dnnl_stream_destroy(stream);
  return ok;
}

bool lt__cpu_gemm_prim(int dt, int cdt, bool ta, bool tb, int64_t n, int64_t m, int64_t k,
                       const void *a, int64_t lda, const void *b, int64_t ldb, void *c,
                       int64_t ldc) {
  pthread_once(&g_once, prim_init);
  if (!g_engine || (dt == LT_F32 && !g_f32) || (dt != LT_F32 && dt != LT_BF16)) return false;
  if (cdt != dt && !(dt == LT_BF16 && cdt == LT_F32)) return false;
  if (dt == LT_BF16 && !lt__cpu_bf16_native()) return false;
  size_t es = lt_dtype_size((lt_dtype)dt), ces = lt_dtype_size((lt_dtype)cdt);
  /* oneDNN's brgemm matmul (2.6) takes dense operands only, and gives any
   * other stride to its sgemm: a block of a product cut over the pool is
   * copied densely first (a pass over one operand, against k passes of
   * arithmetic over it). The primitive is of the dense shape. */
  int64_t a_rows = ta ? k : n, a_cols = ta ? n : k, b_rows = tb ? m : k, b_cols = tb ? k : m;
  bool a_copy = lda != a_cols, b_copy = ldb != b_cols, c_copy = ldc != m;
  prim_key key = key_of(1, n, m, k, dt, cdt, ta, tb);
  const matmul_prim *p = prim_get(&key);
  if (!p) return false;
  size_t scratch_bytes = (p->scratch_bytes + 63) / 64 * 64;
  size_t a_bytes = a_copy ? (size_t)(a_rows * a_cols) * es : 0,
         b_bytes = b_copy ? (size_t)(b_rows * b_cols) * es : 0;
  size_t a_at = scratch_bytes, b_at = a_at + (a_bytes + 63) / 64 * 64,
         c_at = b_at + (b_bytes + 63) / 64 * 64;
  size_t total = c_at + (c_copy ? (size_t)(n * m) * ces : 0);
  char *buf = total ? lt__cpu_thread_scratch(CPU_SCRATCH_PRIM, total) : NULL;
  if (total && !buf) return false;
  if (a_copy) {
    copy_rows(buf + a_at, a_cols, a, lda, a_rows, a_cols, es);
    a = buf + a_at;
  }
  if (b_copy) {
    copy_rows(buf + b_at, b_cols, b, ldb, b_rows, b_cols, es);
    b = buf + b_at;
  }
  void *dst = c_copy ? buf + c_at : c;
  bool ok = run_dense(p, a, b, dst, buf);
  if (ok && c_copy) copy_rows(c, ldc, dst, m, n, m, ces);
  return ok;
}

bool lt__cpu_gemm_prim_batch(int dt, int cdt, bool ta, bool tb, int64_t nb, int64_t n, int64_t m,
                             int64_t k, const void *a, const void *b, void *c) {
  pthread_once(&g_once, prim_init);
  /* f32 batches too, whatever LT_CPU_MATMUL says: their one call beats
   * one sgemm call per small entry (cpu_gemm.c batch_prim) */
  if (!g_engine || nb < 2) return false;
  if (dt == LT_F32 ? cdt != LT_F32
                   : dt != LT_BF16 || !lt__cpu_bf16_native() || (cdt != LT_BF16 && cdt != LT_F32))
    return false;
  /* one primitive over dense entries one after the other: many small
   * products (attention's heads) cost one call, not one each */
  prim_key key = key_of(nb, n, m, k, dt, cdt, ta, tb);
  const matmul_prim *p = prim_get(&key);
  if (!p) return false;
  size_t scratch_bytes = (p->scratch_bytes + 63) / 64 * 64;
  char *scratch = scratch_bytes ? lt__cpu_thread_scratch(CPU_SCRATCH_PRIM, scratch_bytes) : NULL;
  return (!scratch_bytes || scratch) && run_dense(p, a, b, c, scratch);
}
