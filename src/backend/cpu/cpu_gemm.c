/* Matrix products of the cpu backend (CK_BLAS kernels).
 *
 * f32 goes to oneDNN's sgemm, which generates AVX-512 (or AVX2, ...) kernels
 * for the CPU it runs on (or, with LT_CPU_MATMUL=primitive, to a oneDNN
 * matmul primitive per shape: cpu_matmul_prim.c), except batches of small
 * entries that do not fold into one product (attention's heads), which run
 * as one batched matmul primitive per thread; f64 goes to OpenBLAS's
 * dgemm, as oneDNN has no f64 GEMM (loaded at the first f64 product:
 * cpu_openblas.c; plain loops without it). bf16 (result = each sum in f32 of the
 * products, rounded to bf16 once, as torch's CPU bf16 matmul) goes to a
 * bf16 matmul primitive where oneDNN has bf16 instructions (AVX512-BF16 or
 * AMX: "native"); elsewhere, or when no primitive can be had, the operands
 * are converted to f32, the f32 product runs, and its result is rounded
 * once ("converted"): the same sums, on f32 arithmetic. Both libraries run on one thread per
 * call: the backend's own pool cuts a product into blocks of output rows or
 * columns (or whole batch entries) and runs one block per thread. The
 * process then has a single set of worker threads, which sleep when idle,
 * instead of three (ours, OpenMP's and OpenBLAS's) competing for the cores
 * and spinning between calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <string.h>

#include "../../core/lt_dtype.h"
#include "../../core/lt_error.h"
#include "../../core/lt_shape.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_openblas.h"

/* Below this many multiply-adds a product runs on the calling thread: waking
 * the pool costs more than it saves. */
#define GEMM_PAR_MIN (1 << 20)
/* A block never gets narrower than this (one AVX-512 row of f32 is 16). */
#define GEMM_MIN_BLOCK 16

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void (*g_omp_set_num_threads)(int);
static __thread bool t_omp_single;

/* The OpenMP thread count is per thread: set once on every thread that
 * runs a product. */
static void single_threaded_libraries(void) {
  if (t_omp_single) return;
  if (g_omp_set_num_threads) g_omp_set_num_threads(1);
  t_omp_single = true;
}

static void gemm_init(void) {
  /* oneDNN's OpenMP runtime is loaded with it; one thread per call keeps
   * it from starting a team inside each of our workers. */
  g_omp_set_num_threads = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  /* LT_CPU_ISA=avx2: oneDNN's kernels too, before it makes its first one */
  if (lt__cpu_isa()->capped) dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
  /* OpenBLAS is loaded (and set to one thread) at the first f64 product */
}

void lt__cpu_gemm_init(void) { pthread_once(&g_once, gemm_init); }

void lt__cpu_gemm_one_thread(void) {
  pthread_once(&g_once, gemm_init);
  single_threaded_libraries();
}

/* One product C[n x m] = op(A)[n x k] op(B)[k x m], row-major, ldc = m. */
typedef struct gemm_block {
  uint8_t dt;  /* LT_F32, LT_F64 or LT_BF16: the operands */
  uint8_t cdt; /* the result: dt, or LT_F32 for bf16 operands' unrounded sums */
  bool ta, tb;
  int64_t n, m, k, lda, ldb, ldc;
  const void *a, *b;
  void *c;
} gemm_block;

/* C = op(A) op(B) in plain loops, summing in the operands' type T. f32: as
 * the library does, what a product falls back to when oneDNN fails (its
 * packing buffers are its own allocations); slow, but it allocates nothing
 * and cannot fail, so that no product can fail: an executable then may write
 * a donated buffer before its products without copying the donor's value
 * aside first (cpu_exec.c). f64: the products without OpenBLAS (it could not
 * be loaded: cpu_openblas.c). */
#define GEMM_PLAIN(name, T)                                      \
  static void name(const gemm_block *g) {                        \
    const T *a = g->a, *b = g->b;                                \
    T *c = g->c;                                                 \
    for (int64_t i = 0; i < g->n; i++)                           \
      for (int64_t j = 0; j < g->m; j++) {                       \
        T s = 0;                                                 \
        for (int64_t p = 0; p < g->k; p++)                       \
          s += (g->ta ? a[p * g->lda + i] : a[i * g->lda + p]) * \
               (g->tb ? b[j * g->ldb + p] : b[p * g->ldb + j]);  \
        c[i * g->ldc + j] = s;                                   \
      }                                                          \
  }
GEMM_PLAIN(sgemm_plain, float)
GEMM_PLAIN(dgemm_plain, double)
#undef GEMM_PLAIN

/* f64 C = op(A) op(B) by OpenBLAS's dgemm, else plain loops. */
static void dgemm_any(const gemm_block *g) {
  const cpu_openblas *ob = lt__cpu_openblas();
  if (!ob) {
    dgemm_plain(g);
    return;
  }
  ob->dgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
            (blasint)g->n, (blasint)g->m, (blasint)g->k, 1.0, g->a, (blasint)g->lda, g->b,
            (blasint)g->ldb, 0.0, g->c, (blasint)g->ldc);
}

/* f32 C = op(A) op(B) by oneDNN's sgemm, else (it failed) plain loops. */
static void sgemm_any(const gemm_block *g) {
  dnnl_status_t st = dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->n, g->m, g->k, 1.0f, g->a,
                                g->lda, g->b, g->ldb, 0.0f, g->c, g->ldc);
  if (st != dnnl_success) sgemm_plain(g);
}

/* bf16 in plain loops, summing in f32: what a converted product falls back
 * to without memory for its f32 copies (so that it cannot fail either). */
static void bgemm_plain(const gemm_block *g) {
  const uint16_t *a = g->a, *b = g->b;
  for (int64_t i = 0; i < g->n; i++)
    for (int64_t j = 0; j < g->m; j++) {
      float s = 0;
      for (int64_t p = 0; p < g->k; p++)
        s += lt__bf16_to_f32(g->ta ? a[p * g->lda + i] : a[i * g->lda + p]) *
             lt__bf16_to_f32(g->tb ? b[j * g->ldb + p] : b[p * g->ldb + j]);
      if (g->cdt == LT_F32)
        ((float *)g->c)[i * g->ldc + j] = s;
      else
        ((uint16_t *)g->c)[i * g->ldc + j] = lt__f32_to_bf16(s);
    }
}

/* Widens rows x cols bf16 elements, rows ld apart, into dense f32. */
static void widen_rows(float *dst, const uint16_t *src, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = lt__bf16_to_f32(src[r * ld + c]);
}

/* A bf16 product without bf16 instructions: the operands widened to f32
 * (exactly), the f32 product, each result rounded to bf16 once (or, for an
 * f32 result, written as it is). */
static void bgemm_converted(const gemm_block *g) {
  int64_t a_rows = g->ta ? g->k : g->n, a_cols = g->ta ? g->n : g->k;
  int64_t b_rows = g->tb ? g->m : g->k, b_cols = g->tb ? g->k : g->m;
  bool f32_out = g->cdt == LT_F32;
  size_t a_n = (size_t)(a_rows * a_cols), b_n = (size_t)(b_rows * b_cols),
         c_n = f32_out ? 0 : (size_t)(g->n * g->m);
  a_n = (a_n + 15) / 16 * 16; /* 64-byte aligned parts */
  b_n = (b_n + 15) / 16 * 16;
  float *buf = lt__cpu_thread_scratch(CPU_SCRATCH_CONVERT, (a_n + b_n + c_n) * sizeof(float));
  if (!buf) {
    bgemm_plain(g);
    return;
  }
  float *fa = buf, *fb = buf + a_n, *fc = buf + a_n + b_n;
  widen_rows(fa, g->a, g->lda, a_rows, a_cols);
  widen_rows(fb, g->b, g->ldb, b_rows, b_cols);
  gemm_block f = *g;
  f.dt = f.cdt = LT_F32;
  f.a = fa;
  f.b = fb;
  f.c = f32_out ? g->c : fc;
  f.lda = a_cols;
  f.ldb = b_cols;
  f.ldc = f32_out ? g->ldc : g->m;
  sgemm_any(&f);
  if (f32_out) return;
  uint16_t *c = g->c;
  for (int64_t i = 0; i < g->n; i++)
    for (int64_t j = 0; j < g->m; j++) c[i * g->ldc + j] = lt__f32_to_bf16(fc[i * g->m + j]);
}

/* One product; it cannot fail (OpenBLAS's dgemm reports nothing, a missing
 * OpenBLAS is replaced by plain loops, and a
 * failed oneDNN call is redone in plain loops), so neither can anything
 * below built on it. */
static void gemm_one(const gemm_block *g) {
  pthread_once(&g_once, gemm_init);
  single_threaded_libraries();
  if (g->n == 0 || g->m == 0) return;
  switch ((lt_dtype)g->dt) {
  case LT_F64:
    dgemm_any(g);
    return;
  case LT_F32:
    if (!lt__cpu_gemm_prim(LT_F32, LT_F32, g->ta, g->tb, g->n, g->m, g->k, g->a, g->lda, g->b,
                           g->ldb, g->c, g->ldc))
      sgemm_any(g);
    return;
  case LT_BF16: {
    bool native = lt__cpu_gemm_prim(LT_BF16, g->cdt, g->ta, g->tb, g->n, g->m, g->k, g->a, g->lda,
                                    g->b, g->ldb, g->c, g->ldc);
    if (!native) bgemm_converted(g);
    lt__cpu_bf16_count(false, native);
    return;
  }
  case LT_BOOL:
  case LT_U8:
  case LT_I8:
  case LT_I32:
  case LT_I64:
  case LT_NUM_DTYPES:
    break; /* never lowered to a product (blas_ok), nor loaded (cpu_serial.c) */
  }
}

/* Block i of a product cut along its rows (split_rows) or columns. */
typedef struct gemm_job {
  gemm_block whole;
  bool split_rows;
  int64_t block;
  const cpu_kernel *epi; /* a loop run over each block of rows after its product, or NULL */
  void **table;
  int64_t epi_per_row; /* the loop's iterations per row of the product */
} gemm_job;

static void gemm_part(void **ctx, int64_t lo, int64_t hi) {
  gemm_job *j = (gemm_job *)ctx;
  size_t es = lt_dtype_size((lt_dtype)j->whole.dt), ces = lt_dtype_size((lt_dtype)j->whole.cdt);
  for (int64_t i = lo; i < hi; i++) {
    gemm_block g = j->whole;
    int64_t total = j->split_rows ? g.n : g.m;
    int64_t from = i * j->block, len = total - from < j->block ? total - from : j->block;
    if (len <= 0) continue;
    if (j->split_rows) {
      /* rows of op(A): rows of A, or columns of a transposed A */
      g.a = (const char *)g.a + (size_t)(g.ta ? from : from * g.lda) * es;
      g.c = (char *)g.c + (size_t)(from * g.ldc) * ces;
      g.n = len;
    } else {
      g.b = (const char *)g.b + (size_t)(g.tb ? from * g.ldb : from) * es;
      g.c = (char *)g.c + (size_t)from * ces;
      g.m = len;
    }
    gemm_one(&g);
    if (j->epi)
      j->epi->fn(cpu_loop_args(j->epi, j->table), from * j->epi_per_row,
                 (from + len) * j->epi_per_row);
  }
}

/* One product, on the pool when it is big enough to share; then its
 * epilogue, if any: per block of rows when the product is cut along rows,
 * else over the whole product afterwards. */
static void gemm_run(const gemm_block *g, const cpu_kernel *epi, void **table) {
  int nt = lt__cpu_pool_threads();
  gemm_job j;
  memset(&j, 0, sizeof j);
  j.whole = *g;
  int64_t parts = 0;
  if (nt > 1 && g->n * g->m * g->k >= GEMM_PAR_MIN) {
    /* an epilogue wants rows (when there are enough), else the longer side */
    j.split_rows = epi && g->n / GEMM_MIN_BLOCK >= nt ? true : g->n >= g->m;
    int64_t total = j.split_rows ? g->n : g->m;
    parts = total / GEMM_MIN_BLOCK < nt ? total / GEMM_MIN_BLOCK : nt;
  }
  if (parts < 2) {
    gemm_one(g);
    if (epi) lt__cpu_loop_run(epi, table);
    return;
  }
  int64_t total = j.split_rows ? g->n : g->m;
  /* equal blocks, rounded up to whole vectors */
  j.block = (total + parts - 1) / parts;
  j.block = (j.block + GEMM_MIN_BLOCK - 1) / GEMM_MIN_BLOCK * GEMM_MIN_BLOCK;
  parts = (total + j.block - 1) / j.block;
  if (epi && j.split_rows) {
    j.epi = epi;
    j.table = table;
    j.epi_per_row = epi->extent / g->n;
  }
  lt__cpu_pool_run_parts(gemm_part, (void **)&j, parts);
  if (epi && !j.epi) lt__cpu_loop_run(epi, table);
}

/* Whole batch entries per thread, when there are enough of them. */
typedef struct batch_job {
  const cpu_matmul *mm;
  const void *abase, *bbase;
  void *out;
  int64_t nbatch, nparts; /* batch_split: parts of whole entry ranges */
} batch_job;

static gemm_block batch_entry(const cpu_matmul *mm, const void *abase, const void *bbase, void *out,
                              int64_t bi) {
  size_t es = lt_dtype_size((lt_dtype)mm->a.dtype);
  lt_dtype cdt = mm->acc_f32 ? LT_F32 : (lt_dtype)mm->a.dtype;
  int nd = mm->nbatch_dims;
  int64_t ao = mm->a.offset + lt__unravel_offset(bi, mm->batch_shape, mm->a_bstride, nd);
  int64_t bo = mm->b.offset + lt__unravel_offset(bi, mm->batch_shape, mm->b_bstride, nd);
  gemm_block g = {
      .dt = mm->a.dtype,
      .cdt = (uint8_t)cdt,
      .ta = mm->ta,
      .tb = mm->tb,
      .n = mm->n,
      .m = mm->m,
      .k = mm->k,
      .lda = mm->lda,
      .ldb = mm->ldb,
      .ldc = mm->m,
      .a = (const char *)abase + (size_t)ao * es,
      .b = (const char *)bbase + (size_t)bo * es,
      .c = (char *)out + (size_t)(bi * mm->n * mm->m) * lt_dtype_size(cdt),
  };
  return g;
}

/* rows x cols elements of es bytes, rows ld apart at src, packed at dst. */
static char *pack_rows(char *dst, const char *src, int64_t rows, int64_t cols, int64_t ld,
                       size_t es) {
  for (int64_t r = 0; r < rows; r++, dst += (size_t)cols * es)
    memcpy(dst, src + (size_t)(r * ld) * es, (size_t)cols * es);
  return dst;
}

/* Whether the entries [lo, hi) of an operand (rows x cols, rows ld apart,
 * entry bi at base + offset(bi)) lie densely one after the other: then the
 * batched primitive reads them where they are. */
static bool entries_dense(const cpu_matmul *mm, const int64_t *bstride, int64_t rows, int64_t cols,
                          int64_t ld, int64_t lo, int64_t hi) {
  if (ld != cols && rows > 1) return false;
  int nd = mm->nbatch_dims;
  int64_t first = lt__unravel_offset(lo, mm->batch_shape, bstride, nd);
  for (int64_t bi = lo + 1; bi < hi; bi++)
    if (lt__unravel_offset(bi, mm->batch_shape, bstride, nd) != first + (bi - lo) * rows * cols)
      return false;
  return true;
}

/* Entries [lo, hi) of a batch that does not fold through one batched
 * primitive, whose cost does not grow with the entry count as one call per
 * small entry does (attention's heads: 128 sgemm calls of 64x64x32 ran at a
 * third of the FMA peak). oneDNN 2.6's own batched matmul (brgemm) takes
 * dense entries one after the other only (any other stride, a broadcast
 * included, gets its sgemm or its reference loops), so an operand whose
 * entries are not (a view of heads, rows 3C apart; a broadcast) is packed
 * densely first, transposed or not as it is. False when it did not run. */
static bool batch_prim(const batch_job *j, int64_t lo, int64_t hi) {
  const cpu_matmul *mm = j->mm;
  if ((mm->a.dtype != LT_BF16 && mm->a.dtype != LT_F32) || hi - lo < 2) return false;
  /* f32 with a transposed A: no faster than sgemm per entry in the GPT step
   * (its 32x64x64 and 64x32x64 backward products, by LT_CPU_PROFILE) */
  if (mm->a.dtype == LT_F32 && mm->ta) return false;
  size_t es = lt_dtype_size((lt_dtype)mm->a.dtype);
  int64_t a_rows = mm->ta ? mm->k : mm->n, a_cols = mm->ta ? mm->n : mm->k;
  int64_t b_rows = mm->tb ? mm->m : mm->k, b_cols = mm->tb ? mm->k : mm->m;
  bool a_pack = !entries_dense(mm, mm->a_bstride, a_rows, a_cols, mm->lda, lo, hi);
  bool b_pack = !entries_dense(mm, mm->b_bstride, b_rows, b_cols, mm->ldb, lo, hi);
  size_t a_bytes = (size_t)(a_rows * a_cols) * es, b_bytes = (size_t)(b_rows * b_cols) * es;
  size_t n = (size_t)(hi - lo), a_all = a_pack ? (n * a_bytes + 63) / 64 * 64 : 0;
  size_t total = a_all + (b_pack ? n * b_bytes : 0);
  char *buf = total ? lt__cpu_thread_scratch(CPU_SCRATCH_BATCH, total) : NULL;
  if (total && !buf) return false;
  gemm_block first = batch_entry(mm, j->abase, j->bbase, j->out, lo);
  const void *a = a_pack ? buf : first.a, *b = b_pack ? buf + a_all : first.b;
  char *pa = buf, *pb = buf + a_all;
  for (int64_t bi = lo; bi < hi && (a_pack || b_pack); bi++) {
    gemm_block g = batch_entry(mm, j->abase, j->bbase, j->out, bi);
    if (a_pack) pa = pack_rows(pa, g.a, a_rows, a_cols, g.lda, es);
    if (b_pack) pb = pack_rows(pb, g.b, b_rows, b_cols, g.ldb, es);
  }
  bool ok = lt__cpu_gemm_prim_batch(mm->a.dtype, first.cdt, mm->ta, mm->tb, hi - lo, mm->n, mm->m,
                                    mm->k, a, b, first.c);
  if (ok && mm->a.dtype == LT_BF16) lt__cpu_bf16_count(false, true);
  return ok;
}

static void batch_part(void **ctx, int64_t lo, int64_t hi) {
  batch_job *j = (batch_job *)ctx;
  if (batch_prim(j, lo, hi)) return;
  for (int64_t bi = lo; bi < hi; bi++) {
    gemm_block g = batch_entry(j->mm, j->abase, j->bbase, j->out, bi);
    gemm_one(&g);
  }
}

/* Parts [lo, hi) of nparts equal ranges of the batch's entries. */
static void batch_split(void **ctx, int64_t lo, int64_t hi) {
  batch_job *j = (batch_job *)ctx;
  for (int64_t q = lo; q < hi; q++)
    batch_part(ctx, q * j->nbatch / j->nparts, (q + 1) * j->nbatch / j->nparts);
}

/* Whether the batch of mm is one product with nbatch times the rows: b the
 * same matrix for every entry (a broadcast weight, as x [B, T, C] @ w [C, C']
 * of a linear layer) and the entries of a (not transposed) following each
 * other at n rows of lda apart, so that the rows of all of them are evenly
 * spaced. The output's entries are contiguous anyway. One big GEMM then
 * replaces nbatch small ones, which run far below the library's speed. */
static bool batch_folds(const cpu_matmul *mm) {
  if (mm->ta || mm->nbatch_dims == 0) return false;
  int64_t next = mm->n * mm->lda; /* where the following entry must start */
  for (int d = mm->nbatch_dims - 1; d >= 0; d--) {
    if (mm->batch_shape[d] == 1) continue;
    if (mm->b_bstride[d] != 0 || mm->a_bstride[d] != next) return false;
    next *= mm->batch_shape[d];
  }
  return true;
}

/* Whether kernel `next` can run as the epilogue of product mm (cpu_lower.c
 * marks it; checked again here, as a loaded file may not be trusted). */
static bool epilogue_fits(const cpu_matmul *mm, const cpu_kernel *next) {
  return next && next->kind == CK_LOOP && next->fn && mm->nbatch_dims == 0 && mm->n > 0 &&
         (mm->a.dtype != LT_BF16 || mm->acc_f32) && /* f32 results only (mark_epilogues) */
         next->extent * next->unit_cost == mm->n * mm->m && next->extent % mm->n == 0;
}

int lt__cpu_gemm(const cpu_kernel *k, const cpu_kernel *next, void **table) {
  const cpu_matmul *mm = &k->mm;
  const void *abase = table[mm->a.slot], *bbase = table[mm->b.slot];
  void *out = table[k->out_slot];
  const cpu_kernel *epi = k->epilogue && epilogue_fits(mm, next) ? next : NULL;
  int64_t nbatch = 1;
  for (int d = 0; d < mm->nbatch_dims; d++) nbatch *= mm->batch_shape[d];
  size_t es = lt_dtype_size(mm->acc_f32 ? LT_F32 : (lt_dtype)mm->a.dtype); /* the result's */
  if (nbatch == 0 || mm->n == 0 || mm->m == 0) return LT_OK;
  if (mm->k == 0) { /* an empty sum (+0 in every dtype's bits) */
    memset(out, 0, (size_t)(nbatch * mm->n * mm->m) * es);
    if (epi) lt__cpu_loop_run(epi, table);
    return LT_OK;
  }
  if (nbatch > 1 && batch_folds(mm)) {
    gemm_block g = batch_entry(mm, abase, bbase, out, 0);
    g.n = nbatch * mm->n;
    gemm_run(&g, epi, table);
    return LT_OK;
  }
  int nt = lt__cpu_pool_threads();
  if (nbatch >= nt && nt > 1 && nbatch * mm->n * mm->m * mm->k >= GEMM_PAR_MIN) {
    batch_job j = {
        .mm = mm, .abase = abase, .bbase = bbase, .out = out, .nbatch = nbatch, .nparts = nt};
    /* f32 and bf16: one range of entries per thread, each one batched call;
     * f64 (no primitive): an entry at a time */
    if (mm->a.dtype != LT_F64)
      lt__cpu_pool_run_parts(batch_split, (void **)&j, nt);
    else
      lt__cpu_pool_run_parts(batch_part, (void **)&j, nbatch);
    return LT_OK;
  }
  /* a batch on the calling thread: bf16 always; f32 when the pool would not
   * share it anyway (fewer entries than threads but big ones: each entry
   * cut over the pool below, as before f32 batches took primitives) */
  bool alone = nt == 1 || nbatch * mm->n * mm->m * mm->k < GEMM_PAR_MIN;
  if (nbatch > 1 && (mm->a.dtype == LT_BF16 || (mm->a.dtype == LT_F32 && alone))) {
    batch_job j = {.mm = mm, .abase = abase, .bbase = bbase, .out = out};
    batch_part((void **)&j, 0, nbatch);
    return LT_OK;
  }
  for (int64_t bi = 0; bi < nbatch; bi++) {
    gemm_block g = batch_entry(mm, abase, bbase, out, bi);
    gemm_run(&g, epi, table);
  }
  return LT_OK;
}

bool lt__cpu_gemm_takes_next(const cpu_kernel *k, const cpu_kernel *next) {
  return k->kind == CK_BLAS && k->epilogue && epilogue_fits(&k->mm, next);
}
