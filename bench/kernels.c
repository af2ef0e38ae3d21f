/* The cpu backend's kernels against machine limits measured in the same run.
 *
 *   bench fused_chain_16M <GB/s> GB/s ratio <r> vs c_add_loop
 *       8 fused elementwise ops (one tanh) over two 16M f32 inputs, one output;
 *       bytes = 3 x 64 MB, against a plain c[i] = a[i] + b[i] loop (this file is
 *       compiled -O3 -march=native) over the same bytes
 *   bench matmul_mlp <GFLOP/s> GFLOP/s ratio <r> vs cblas_sgemm
 *   bench matmul_1024 <GFLOP/s> GFLOP/s ratio <r> vs cblas_sgemm
 *       128x512x784 (the MLP's first layer) and 1024^3, f32, lt_matmul with
 *       its sync against OpenBLAS's cblas_sgemm on the same thread count
 *   bench matmul_mlp_of_peak / matmul_1024_of_peak <GFLOP/s> ... vs fma_peak
 *       the same against the multiply-add peak of the cores used (16 chains
 *       of the widest vector FMA, measured here)
 *   bench matmul_bhtd <GFLOP/s> GFLOP/s ratio <r> vs cblas_sgemm
 *       attention's batched products over [B, H, T, D] = [32, 4, 64, 32] operands,
 *       f32: q k^T, p v and the four of their backward (transposed operands),
 *       q, k, v being [B, T, H, D] activations permuted to [B, H, T, D] (views,
 *       as a model makes them), in one graph, against a loop of cblas_sgemm
 *       calls over contiguous copies doing the same products
 *   bench softmax_4096 <GB/s> GB/s ratio <r> vs c_add_loop
 *       row softmax of a 4096 x 4096 f32 matrix, bytes = in + out
 *   bench compile_100 <ms> ms
 *       cold compile (lowering, LLVM O3, JIT link) of a 100-node graph
 *
 * Each figure is the median of several runs. The library runs on
 * LT_NUM_THREADS threads (default: all cores of the process); the C loops run
 * on one thread; the thread count is printed. mallopt keeps freed outputs in
 * the heap, so that a step does not pay the kernel's page faults for a fresh
 * 64 MB mapping each time (glibc's mmap threshold tops out at 32 MB). */
#define _GNU_SOURCE
#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "lazytensor.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define REPS 9
#define N16M (16 * 1024 * 1024)

static void check(int rc, const char *what) {
  if (rc != LT_OK) {
    fprintf(stderr, "%s: %s\n", what, lt_last_error());
    exit(1);
  }
}

static __attribute__((noinline)) void c_add(const float *restrict a, const float *restrict b,
                                            float *restrict c, long n) {
  for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
}

static lt_tensor *chain8(lt_tensor *a, lt_tensor *b, lt_tensor *half) {
  lt_tensor *x = lt_add(a, b); /* 1 */
  x = lt_mul(x, a);            /* 2 */
  x = lt_sub(x, b);            /* 3 */
  x = lt_relu(x);              /* 4 */
  x = lt_mul(x, half);         /* 5 */
  x = lt_maximum(x, b);        /* 6 */
  x = lt_tanh(x);              /* 7 */
  return lt_add(x, a);         /* 8 */
}

/* The library's thread count: LT_NUM_THREADS, else the CPUs we may run on. */
static int threads_used(void) {
  const char *s = getenv("LT_NUM_THREADS");
  if (s && atoi(s) > 0) return atoi(s);
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

static double g_peak; /* one core's, times the threads used */

/* C[M x N] = A[M x K] B[K x N], f32, through lt_matmul against OpenBLAS's
 * cblas_sgemm on as many threads as the library uses, and against the
 * cores' multiply-add peak. */
static void bench_matmul(lt_device dev, const char *name, int M, int N, int K) {
  float *ma = malloc((size_t)M * K * 4), *mb = malloc((size_t)K * N * 4),
        *mc = malloc((size_t)M * N * 4);
  for (long i = 0; i < (long)M * K; i++) ma[i] = (float)((i % 13) * 0.1 - 0.6);
  for (long i = 0; i < (long)K * N; i++) mb[i] = (float)((i % 7) * 0.1 - 0.3);
  double flops = 2.0 * M * N * K, t[REPS];
  int reps = (int)(2e9 / flops) + 1; /* about 2 GFLOP per timing */
  openblas_set_num_threads(threads_used());
  for (int r = -1; r < REPS; r++) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, ma, K, mb, N, 0.0f, mc,
                  N);
    if (r >= 0) t[r] = (now_s() - t0) / reps;
  }
  double blas = flops / bench_median(t, REPS) / 1e9;
  lt_tensor *A = lt_from_data(dev, LT_F32, (int64_t[]){M, K}, 2, ma);
  lt_tensor *B = lt_from_data(dev, LT_F32, (int64_t[]){K, N}, 2, mb);
  for (int r = -2; r < REPS; r++) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++) {
      lt_scope_begin();
      lt_tensor *y = lt_matmul(A, B);
      check(lt_sync(&y, 1, true), "matmul");
      lt_scope_end();
    }
    if (r >= 0) t[r] = (now_s() - t0) / reps;
  }
  double mm = flops / bench_median(t, REPS) / 1e9;
  printf("bench %s %.1f GFLOP/s ratio %.2f vs cblas_sgemm\n", name, mm, mm / blas);
  if (g_peak > 0) /* no peak line without a vector FMA (lt_get_fma_peak refuses) */
    printf("bench %s_of_peak %.1f GFLOP/s ratio %.2f vs fma_peak\n", name, mm, mm / g_peak);
  lt_release(A);
  lt_release(B);
  free(ma);
  free(mb);
  free(mc);
}

/* One entry's product in the cblas loop of bench_matmul_bhtd. */
typedef struct bhtd_gemm {
  bool ta, tb;
  int n, m, k;
  const float *a, *b;
  float *c;
} bhtd_gemm;

/* The six products of attention's forward and backward, [B, H] batches of
 * [T, D] and [T, T] matrices (see the header). */
static void bench_matmul_bhtd(lt_device dev) {
  enum { B = 32, H = 4, T = 64, D = 32, BH = B * H };
  size_t nx = (size_t)BH * T * D, np = (size_t)BH * T * T;
  float *hq = malloc(nx * 4), *hk = malloc(nx * 4), *hv = malloc(nx * 4), *hdo = malloc(nx * 4);
  float *hp = malloc(np * 4), *hds = malloc(np * 4), *out = malloc(6 * np * 4);
  for (size_t i = 0; i < nx; i++) {
    hq[i] = (float)((i % 13) * 0.1 - 0.6);
    hk[i] = (float)((i % 7) * 0.1 - 0.3);
    hv[i] = (float)((i % 11) * 0.05 - 0.25);
    hdo[i] = (float)((i % 5) * 0.1 - 0.2);
  }
  for (size_t i = 0; i < np; i++) {
    hp[i] = (float)((i % 17) * 0.01);
    hds[i] = (float)((i % 9) * 0.02 - 0.08);
  }
  /* C = op(A) op(B) per entry: s = q k^T, o = p v, dp = do v^T, dv = p^T do, dq = ds k,
   * dk = ds^T q (contiguous [T, D] and [T, T] entries) */
  const struct {
    bool ta, tb;
    int n, m, k;
    const float *a, *b;
    int sa, sb; /* entry sizes */
  } kinds[6] = {{false, true, T, T, D, hq, hk, T * D, T * D},
                {false, false, T, D, T, hp, hv, T * T, T * D},
                {false, true, T, T, D, hdo, hv, T * D, T * D},
                {true, false, T, D, T, hp, hdo, T * T, T * D},
                {false, false, T, D, T, hds, hk, T * T, T * D},
                {true, false, T, D, T, hds, hq, T * T, T * D}};
  double flops = 6.0 * BH * 2.0 * T * T * D, t[REPS];
  int reps = (int)(1e9 / flops) + 1;
  openblas_set_num_threads(threads_used());
  for (int r = -1; r < REPS; r++) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
      for (int c = 0; c < 6; c++)
        for (int e = 0; e < BH; e++) {
          bhtd_gemm g = {kinds[c].ta,
                         kinds[c].tb,
                         kinds[c].n,
                         kinds[c].m,
                         kinds[c].k,
                         kinds[c].a + (size_t)e * kinds[c].sa,
                         kinds[c].b + (size_t)e * kinds[c].sb,
                         out + (size_t)c * np + (size_t)e * T * T};
          cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans,
                      g.tb ? CblasTrans : CblasNoTrans, g.n, g.m, g.k, 1.0f, g.a, g.ta ? g.n : g.k,
                      g.b, g.tb ? g.k : g.m, 0.0f, g.c, g.m);
        }
    if (r >= 0) t[r] = (now_s() - t0) / reps;
  }
  double blas = flops / bench_median(t, REPS) / 1e9;
  /* q, k, v, do as a model has them: [B, T, H * D] rows, viewed as [B, H, T, D] */
  const int perm[4] = {0, 2, 1, 3};
  lt_tensor *x[4], *hd[4];
  float *src[4] = {hq, hk, hv, hdo};
  for (int i = 0; i < 4; i++) {
    x[i] = lt_from_data(dev, LT_F32, (int64_t[]){B, T, H * D}, 3, src[i]);
    hd[i] = NULL;
  }
  lt_tensor *P = lt_from_data(dev, LT_F32, (int64_t[]){B, H, T, T}, 4, hp);
  lt_tensor *dS = lt_from_data(dev, LT_F32, (int64_t[]){B, H, T, T}, 4, hds);
  for (int r = -2; r < REPS; r++) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++) {
      lt_scope_begin();
      for (int j = 0; j < 4; j++)
        hd[j] = lt_permute(lt_reshape(x[j], (int64_t[]){B, T, H, D}, 4), perm, 4);
      lt_tensor *q = hd[0], *k = hd[1], *v = hd[2], *dO = hd[3];
      lt_tensor *y[6] = {lt_matmul(q, lt_transpose(k, 2, 3)),
                         lt_matmul(P, v),
                         lt_matmul(dO, lt_transpose(v, 2, 3)),
                         lt_matmul(lt_transpose(P, 2, 3), dO),
                         lt_matmul(dS, k),
                         lt_matmul(lt_transpose(dS, 2, 3), q)};
      check(lt_sync(y, 6, true), "matmul_bhtd");
      lt_scope_end();
    }
    if (r >= 0) t[r] = (now_s() - t0) / reps;
  }
  double mm = flops / bench_median(t, REPS) / 1e9;
  printf("bench matmul_bhtd %.1f GFLOP/s ratio %.2f vs cblas_sgemm\n", mm, mm / blas);
  for (int i = 0; i < 4; i++) lt_release(x[i]);
  lt_release(P);
  lt_release(dS);
  free(hq), free(hk), free(hv), free(hdo), free(hp), free(hds), free(out);
}

int main(void) {
  setenv("LT_BACKEND", "cpu", 0);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  lt_device dev = lt_cpu(0);
  const char *nt = getenv("LT_NUM_THREADS");
  printf("# backend %s, LT_NUM_THREADS=%s\n", getenv("LT_BACKEND"), nt ? nt : "(all cores)");

  /* ---- c_add baseline ---- */
  float *ha = malloc((size_t)N16M * 4), *hb = malloc((size_t)N16M * 4),
        *hc = malloc((size_t)N16M * 4);
  for (long i = 0; i < N16M; i++) {
    ha[i] = (float)((i % 1000) * 0.001 - 0.5);
    hb[i] = (float)((i % 777) * 0.002 - 0.7);
  }
  double t[REPS];
  c_add(ha, hb, hc, N16M);
  for (int r = 0; r < REPS; r++) {
    double t0 = now_s();
    c_add(ha, hb, hc, N16M);
    t[r] = now_s() - t0;
  }
  double bytes = 3.0 * N16M * 4;
  double base_bw = bytes / bench_median(t, REPS) / 1e9;
  printf("bench c_add_loop_16M %.2f GB/s\n", base_bw);

  /* ---- fused chain ---- */
  int64_t shape16[1] = {N16M};
  lt_tensor *a = lt_from_data(dev, LT_F32, shape16, 1, ha);
  lt_tensor *b = lt_from_data(dev, LT_F32, shape16, 1, hb);
  lt_tensor *half = lt_scalar(dev, LT_F32, 0.5);
  for (int r = -2; r < REPS; r++) {
    lt_scope_begin();
    double t0 = now_s();
    lt_tensor *y = chain8(a, b, half);
    check(lt_sync(&y, 1, true), "chain");
    if (r >= 0) t[r] = now_s() - t0;
    lt_scope_end();
  }
  double bw = bytes / bench_median(t, REPS) / 1e9;
  printf("bench fused_chain_16M %.2f GB/s ratio %.2f vs c_add_loop\n", bw, bw / base_bw);

  /* ---- matmul ---- */
  /* the library's own measurement (lt_get_fma_peak), the one MFU divides by
   * everywhere: fastest of short repetitions, so that a time-sliced core
   * cannot halve it */
  if (lt_get_fma_peak(threads_used(), &g_peak) != LT_OK) g_peak = NAN;
  printf("# fma_peak %.1f GFLOP/s (%d thread(s) x one core's peak)\n", g_peak, threads_used());
  bench_matmul(dev, "matmul_mlp", 128, 512, 784); /* the MLP's first layer */
  bench_matmul(dev, "matmul_1024", 1024, 1024, 1024);
  bench_matmul_bhtd(dev);

  /* ---- softmax ---- */
  enum { S = 4096 };
  lt_tensor *X = lt_from_data(dev, LT_F32, (int64_t[]){S, S}, 2, ha); /* first 16M floats */
  for (int r = -2; r < REPS; r++) {
    lt_scope_begin();
    double t0 = now_s();
    lt_tensor *y = lt_softmax(X, 1);
    check(lt_sync(&y, 1, true), "softmax");
    if (r >= 0) t[r] = now_s() - t0;
    lt_scope_end();
  }
  double sbw = 2.0 * S * S * 4 / bench_median(t, REPS) / 1e9;
  printf("bench softmax_4096 %.2f GB/s ratio %.2f vs c_add_loop\n", sbw, sbw / base_bw);

  /* ---- cold compile of a 100-node graph ---- */
  float small[64 * 64];
  for (int i = 0; i < 64 * 64; i++) small[i] = (float)(i % 17) * 0.05f;
  lt_tensor *p = lt_from_data(dev, LT_F32, (int64_t[]){64, 64}, 2, small);
  lt_tensor *q = lt_from_data(dev, LT_F32, (int64_t[]){64}, 1, small);
  double tc[5];
  for (int r = 0; r < 5; r++) {
    lt_cache_clear();
    lt_scope_begin();
    double t0 = now_s();
    lt_tensor *x = p;
    for (int i = 0; i < 100; i++) { /* 100 nodes: elementwise, broadcasts, reductions */
      switch (i % 10) {
      case 0:
        x = lt_add(x, q);
        break;
      case 1:
        x = lt_tanh(x);
        break;
      case 2:
        x = lt_mul(x, p);
        break;
      case 3:
        x = lt_sub(x, lt_max(x, (int[]){1}, 1, true));
        break;
      case 4:
        x = lt_exp(x);
        break;
      case 5:
        x = lt_div(x, lt_add(lt_abs(q), p));
        break;
      case 6:
        x = lt_softmax(x, 0);
        break;
      case 7:
        x = lt_maximum(x, q);
        break;
      case 8:
        x = lt_sigmoid(x);
        break;
      default:
        x = lt_add(x, lt_sum(x, (int[]){0}, 1, true));
        break;
      }
    }
    check(lt_sync(&x, 1, true), "compile graph");
    tc[r] = (now_s() - t0) * 1e3;
    lt_scope_end();
  }
  printf("bench compile_100 %.1f ms\n", bench_median(tc, 5));
  return 0;
}
