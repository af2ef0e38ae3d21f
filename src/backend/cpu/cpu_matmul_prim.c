/* f32 products through oneDNN's matmul primitive, one primitive per shape,
 * kept for the life of the process: with LT_CPU_MATMUL=primitive (the
 * default, sgemm, leaves every product to cpu_gemm.c's dnnl_sgemm).
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
  int64_t n, m, k;
  bool ta, tb;
} prim_key;

typedef struct matmul_prim {
  prim_key key;
  dnnl_primitive_t prim; /* NULL: oneDNN declined this shape (remembered, not retried) */
  dnnl_memory_desc_t a, b, c, scratch;
  size_t scratch_bytes;
} matmul_prim;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* the shared engine (cpu_dnnl.c) once LT_CPU_MATMUL=primitive is read; NULL
 * while the option is off (or nothing could be made): products use sgemm */
static dnnl_engine_t g_engine;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static matmul_prim *g_prims[PRIM_MAX];
static int g_count;
/* Each thread's scratchpad, grown as needed, freed when the thread ends. */
static pthread_key_t g_scratch_key;
typedef struct scratch_buf {
  void *p;
  size_t cap;
} scratch_buf;

static void scratch_free(void *v) {
  scratch_buf *s = v;
  free(s->p);
  free(s);
}

static void prim_init(void) {
  const char *e = getenv("LT_CPU_MATMUL");
  if (!e || strcmp(e, "primitive") != 0) return; /* nothing made: no engine, no key */
  g_engine = pthread_key_create(&g_scratch_key, scratch_free) == 0 ? lt__cpu_dnnl_engine() : NULL;
}

static void *thread_scratch(size_t bytes) {
  scratch_buf *s = pthread_getspecific(g_scratch_key);
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return NULL;
    if (pthread_setspecific(g_scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->cap < bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    free(s->p);
    s->p = p;
    s->cap = bytes;
  }
  return s->p;
}

/* The primitive of one shape; every step can fail (NULL prim). */
static void prim_make(matmul_prim *p) {
  const prim_key *k = &p->key;
  dnnl_dims_t ad = {k->n, k->k}, bd = {k->k, k->m}, cd = {k->n, k->m};
  /* op(A) is n x k: rows lda apart, or (transposed) columns lda apart */
  dnnl_dims_t as = {k->ta ? 1 : k->k, k->ta ? k->n : 1};
  dnnl_dims_t bs = {k->tb ? 1 : k->m, k->tb ? k->k : 1};
  dnnl_dims_t cs = {k->m, 1};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_matmul_desc_t md;
  bool ok =
      dnnl_memory_desc_init_by_strides(&p->a, 2, ad, dnnl_f32, as) == dnnl_success &&
      dnnl_memory_desc_init_by_strides(&p->b, 2, bd, dnnl_f32, bs) == dnnl_success &&
      dnnl_memory_desc_init_by_strides(&p->c, 2, cd, dnnl_f32, cs) == dnnl_success &&
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
    /* oneDNN's fallback implementation is its sgemm ("gemm:jit"): then the
     * caller calls that directly, without this file's copies */
    const char *name = "";
    bool own = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success &&
               strncmp(name, "gemm", 4) != 0;
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

/* Copies rows x cols floats, rows src_ld apart in src and dst_ld in dst. */
static void copy_rows(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows,
                      int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    memcpy(dst + r * dst_ld, src + r * src_ld, (size_t)cols * sizeof *dst);
}

bool lt__cpu_sgemm_prim(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const float *a,
                        int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
  pthread_once(&g_once, prim_init);
  if (!g_engine) return false;
  /* oneDNN's brgemm matmul (2.6) takes dense operands only, and gives any
   * other stride to its sgemm: a block of a product cut over the pool is
   * copied densely first (a pass over one operand, against k passes of
   * arithmetic over it). The primitive is of the dense shape. */
  int64_t a_rows = ta ? k : n, a_cols = ta ? n : k, b_rows = tb ? m : k, b_cols = tb ? k : m;
  bool a_copy = lda != a_cols, b_copy = ldb != b_cols, c_copy = ldc != m;
  prim_key key;
  memset(&key, 0, sizeof key); /* compared with memcmp: padding too */
  key.n = n;
  key.m = m;
  key.k = k;
  key.ta = ta;
  key.tb = tb;
  const matmul_prim *p = prim_get(&key);
  if (!p) return false;
  size_t scratch_bytes = (p->scratch_bytes + 63) / 64 * 64;
  size_t a_bytes = a_copy ? (size_t)(a_rows * a_cols) * 4 : 0,
         b_bytes = b_copy ? (size_t)(b_rows * b_cols) * 4 : 0;
  size_t a_at = scratch_bytes, b_at = a_at + (a_bytes + 63) / 64 * 64,
         c_at = b_at + (b_bytes + 63) / 64 * 64;
  size_t total = c_at + (c_copy ? (size_t)(n * m) * 4 : 0);
  char *buf = total ? thread_scratch(total) : NULL;
  if (total && !buf) return false;
  if (a_copy) {
    copy_rows((float *)(buf + a_at), a_cols, a, lda, a_rows, a_cols);
    a = (const float *)(buf + a_at);
  }
  if (b_copy) {
    copy_rows((float *)(buf + b_at), b_cols, b, ldb, b_rows, b_cols);
    b = (const float *)(buf + b_at);
  }
  float *dst = c_copy ? (float *)(buf + c_at) : c;
  dnnl_stream_t stream = NULL;
  dnnl_memory_t keep[4];
  dnnl_exec_arg_t args[4];
  int nargs = 0, nkeep = 0;
  bool ok = dnnl_stream_create(&stream, g_engine, dnnl_stream_default_flags) == dnnl_success &&
            lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_SRC, &p->a, a, keep, &nkeep) &&
            lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_WEIGHTS, &p->b, b, keep, &nkeep) &&
            lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_DST, &p->c, dst, keep, &nkeep) &&
            (!p->scratch_bytes ||
             lt__cpu_dnnl_arg(args, &nargs, DNNL_ARG_SCRATCHPAD, &p->scratch, buf, keep, &nkeep)) &&
            dnnl_primitive_execute(p->prim, stream, nargs, args) == dnnl_success &&
            dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < nkeep; i++) dnnl_memory_destroy(keep[i]);
  if (stream) dnnl_stream_destroy(stream);
  if (ok && c_copy) copy_rows(c, ldc, dst, m, n, m);
  return ok;
}
