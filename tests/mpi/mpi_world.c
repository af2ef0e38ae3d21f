/* The MPI world (lt_world_mpi) under `mpirun -np 2`, run by tests/mpi/run.sh
 * from ctest. One program, one mode per ctest (argv[1]):
 *   collectives  every collective, reduction and dtype against hand values
 *   dp           2 ranks x batch B for 20 Adam steps end with the parameters
 *                of 1 device x batch 2B (computed here on CPU:1, outside the
 *                world) within 1e-5 relative
 *   dp_zero      the same with the optimizer's state sharded over the 2 ranks
 *                (lt_dp_options.shard_optimizer): the same parameters within
 *                1e-5 relative, each rank holding half the state (chunks of
 *                ceil(numel / 2): the 3-element bias is padded)
 *   tp           a 2-way tensor-parallel MLP (W1 column-split, b1 split, W2
 *                row-split, b2 replicated; lt_mark_sharding) for 20 Adam
 *                steps ends with the parameters of the same MLP on 1 device
 *                (CPU:1, outside the world) within 1e-5 relative
 *   read         lt_to_data, lt_item and lt_to_f32 of tensors sharded over
 *                the 2 processes (every dtype, both axes, pending and after
 *                the step) return the whole value on both ranks
 *   kill         rank 1 kills itself (SIGKILL) after one collective; rank 0's
 *                next collective must fail within 10 s, naming rank 1
 *   kill_ring    the same, rank 1 killed by a timer during ring all-reduces
 *   stop         rank 1 stops itself (SIGSTOP) after one collective; rank 0's
 *                next collective must fail within 10 s, naming rank 1
 *   leave        rank 1 frees its world after one collective; rank 0's next
 *                collective must fail within 10 s, naming rank 1, and rank
 *                1's lt_world_free report collectives unmatched
 *   extra        rank 1 runs one more all-reduce (same shape, its own sync)
 *                than rank 0, which frees its world: rank 1's extra call
 *                fails within 10 s naming rank 0, and rank 0's lt_world_free
 *                reports collectives unmatched
 *   graph        both ranks all-reduce f32[4], in different graphs: both fail
 *                at that call, with a message naming both ranks' graphs
 *   ring N       (N ranks) the ring all-reduce, reduce-scatter and all-gather
 *                of the MPI transport against exact values
 *   busy         rank 0 is busy for 60 s (away from MPI) while rank 1 waits
 *                in an all-reduce: no failure
 *   mesh         (4 ranks) collectives over the rows and columns of a 2 x 2
 *                mesh (lt_*_over) against hand values, the rings (all-reduce,
 *                reduce-scatter, all-gather) included
 *   mesh_gpt     (4 ranks) a GPT on a 2 x 2 data x model mesh
 *                (tests/mesh_gpt.h): the losses of 20 steps within 1e-4 of
 *                the same GPT on one device (CPU:1, outside the world)
 *   exchange N   (N ranks) all_to_all (8 dtypes, every axis pair that
 *                splits), collective_permute (a rotation, one leaving a rank
 *                without a source, none) and bool any / all / sum / max / min
 *                (all_reduce and reduce_scatter) against values computed
 *                here, and the gradients of all_to_all and permute
 *   mismatch     rank 0 runs all_to_all, rank 1 all_gather of the same
 *                input: both fail at that call, naming both sides
 *   mismatch_pairs  both run collective_permute, with other pairs: the same
 * Each rank prints "rank <r>: ok" when what it saw is right (a killed or
 * stopped rank prints nothing; tests/mpi/run.sh counts the lines) and exits
 * 0, or 1 on a failure. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "../dp_mlp.h"
#include "../mesh_gpt.h"
#include "../../src/core/lt_dtype.h" /* the dtype table: element load / store */

static int g_rank = -1, g_fail = 0;

#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "rank %d: %s:%d: ", g_rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, " (last error: %s)\n", lt_last_error());         \
      g_fail = 1;                                                      \
    }                                                                  \
  } while (0)

/* ---- typed buffers through double (integers cast, so sums wrap as the dtype) ---- */
static void put(void *p, lt_dtype dt, int i, double v) {
  if (lt__is_float(dt))
    lt__store_f64(dt, p, i, v);
  else
    lt__store_i64(dt, p, i, (int64_t)v);
}
static double get(const void *p, lt_dtype dt, int i) { return lt__load_f64(dt, p, i); }

/* Each rank's 6 values and the hand-computed reductions over the 2 ranks. */
typedef struct vals {
  double in[2][6], sum[6], max[6], min[6];
} vals;
static const vals kSigned = {{{1, -2, 3, 4, -5, 6}, {10, 20, -30, 40, 50, -60}},
                             {11, 18, -27, 44, 45, -54},
                             {10, 20, 3, 40, 50, 6},
                             {1, -2, -30, 4, -5, -60}};
/* u8: no negatives; sums past 255 wrap (200 + 100 = 44, 5 + 255 = 4) */
static const vals kU8 = {{{1, 2, 200, 4, 5, 6}, {10, 100, 100, 0, 255, 7}},
                         {11, 102, 300, 4, 260, 13},
                         {10, 100, 200, 4, 255, 7},
                         {1, 2, 100, 0, 5, 6}};
/* i8: 100 + 100 wraps to -56, 6 + -128 = -122 */
static const vals kI8 = {{{1, -2, 3, 100, -5, 6}, {10, 20, -30, 100, 50, -128}},
                         {11, 18, -27, 200, 45, -122},
                         {10, 20, 3, 100, 50, 6},
                         {1, -2, -30, 100, -5, -128}};
static const vals kBool = {{{1, 0, 1, 0, 0, 1}, {0, 0, 1, 1, 0, 1}}, {0}, {0}, {0}};

static const vals *vals_of(lt_dtype dt) {
  return dt == LT_U8 ? &kU8 : dt == LT_I8 ? &kI8 : dt == LT_BOOL ? &kBool : &kSigned;
}

static lt_tensor *input(lt_dtype dt, const int64_t *shape, int ndim) {
  unsigned char buf[6 * 8];
  for (int i = 0; i < 6; i++) put(buf, dt, i, vals_of(dt)->in[g_rank][i]);
  return lt_from_data(lt_cpu(0), dt, shape, ndim, buf);
}

/* Reads t (n elements of dt) and compares with want (cast to dt first). */
static void expect(lt_tensor *t, lt_dtype dt, const double *want, int n, const char *what) {
  unsigned char got[12 * 8], w[12 * 8];
  CHECK(t != NULL, "%s %s: no tensor", what, lt_dtype_name(dt));
  if (!t) return;
  int rc = lt_to_data(t, got, (size_t)n * lt_dtype_size(dt));
  CHECK(rc == LT_OK, "%s %s: read failed", what, lt_dtype_name(dt));
  if (rc != LT_OK) return;
  for (int i = 0; i < n; i++) {
    put(w, dt, i, want[i]);
    CHECK(get(got, dt, i) == get(w, dt, i), "%s %s [%d]: got %g, want %g", what, lt_dtype_name(dt),
          i, get(got, dt, i), get(w, dt, i));
  }
}

static void test_collectives(void) {
  static const lt_dtype kAll[] = {LT_F32, LT_F64, LT_I32, LT_I64, LT_U8, LT_I8, LT_BOOL};
  const int64_t s23[2] = {2, 3}, s32[2] = {3, 2};
  for (size_t d = 0; d < sizeof kAll / sizeof *kAll; d++) {
    lt_dtype dt = kAll[d];
    const vals *v = vals_of(dt);
    bool fl = dt == LT_F32 || dt == LT_F64;
    lt_scope_begin();
    if (dt != LT_BOOL) {
      expect(lt_all_reduce(input(dt, s23, 2), LT_REDUCE_SUM), dt, v->sum, 6, "all_reduce sum");
      expect(lt_all_reduce(input(dt, s23, 2), LT_REDUCE_MAX), dt, v->max, 6, "all_reduce max");
      expect(lt_all_reduce(input(dt, s23, 2), LT_REDUCE_MIN), dt, v->min, 6, "all_reduce min");
      if (fl) {
        double mean[6];
        for (int i = 0; i < 6; i++) mean[i] = v->sum[i] / 2;
        expect(lt_all_reduce(input(dt, s23, 2), LT_REDUCE_MEAN), dt, mean, 6, "all_reduce mean");
      }
      /* reduce_scatter along axis 0 of [2, 3]: row `rank` of the sum */
      expect(lt_reduce_scatter(input(dt, s23, 2), LT_REDUCE_SUM, 0), dt, v->sum + 3 * g_rank, 3,
             "reduce_scatter sum axis 0");
      /* along axis 1 of [3, 2]: column `rank` of the sum */
      double col[3], colmax[3];
      for (int i = 0; i < 3; i++) {
        col[i] = v->sum[i * 2 + g_rank];
        colmax[i] = v->max[i * 2 + g_rank];
      }
      expect(lt_reduce_scatter(input(dt, s32, 2), LT_REDUCE_SUM, 1), dt, col, 3,
             "reduce_scatter sum axis 1");
      expect(lt_reduce_scatter(input(dt, s32, 2), LT_REDUCE_MAX, 1), dt, colmax, 3,
             "reduce_scatter max axis 1");
    }
    /* all_gather along axis 0 of [2, 3]: rank 0's rows, then rank 1's */
    double g0[12], g1[12];
    for (int i = 0; i < 6; i++) {
      g0[i] = v->in[0][i];
      g0[6 + i] = v->in[1][i];
    }
    expect(lt_all_gather(input(dt, s23, 2), 0), dt, g0, 12, "all_gather axis 0");
    /* along axis 1: each row is rank 0's row then rank 1's */
    for (int r = 0; r < 2; r++)
      for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) g1[r * 6 + k * 3 + j] = v->in[k][r * 3 + j];
    expect(lt_all_gather(input(dt, s23, 2), 1), dt, g1, 12, "all_gather axis 1");
    expect(lt_broadcast(input(dt, s23, 2), 1), dt, v->in[1], 6, "broadcast root 1");
    expect(lt_broadcast(input(dt, s23, 2), 0), dt, v->in[0], 6, "broadcast root 0");
    lt_scope_end();
  }
  /* NaN wins max and min, whichever rank holds it (torch.maximum) */
  lt_scope_begin();
  float x[2] = {g_rank == 0 ? NAN : 1.0f, g_rank == 1 ? NAN : 2.0f}, got[2] = {0, 0};
  const int64_t s2[1] = {2};
  lt_tensor *m = lt_all_reduce(lt_from_data(lt_cpu(0), LT_F32, s2, 1, x), LT_REDUCE_MAX);
  CHECK(m && lt_to_data(m, got, sizeof got) == LT_OK, "max with NaN");
  CHECK(isnan(got[0]) && isnan(got[1]), "max with NaN: got %g %g", got[0], got[1]);
  m = lt_all_reduce(lt_from_data(lt_cpu(0), LT_F32, s2, 1, x), LT_REDUCE_MIN);
  CHECK(m && lt_to_data(m, got, sizeof got) == LT_OK, "min with NaN");
  CHECK(isnan(got[0]) && isnan(got[1]), "min with NaN: got %g %g", got[0], got[1]);
  lt_scope_end();
}

/* ---- collectives over the replica groups of a 2 x 2 mesh (mpirun -np 4) ----
 * Rank r's element i is 10 r + i (exact in every dtype here); for each mesh
 * axis, the group's members are computed here and every op compared with
 * the values made from them. A float sum of 20011 elements takes the ring
 * (>= 64 KiB) over the group's communicator. */
static void test_mesh(lt_world *w) {
  CHECK(lt_world_size(w) == 4, "world size %d, want 4 (mpirun -np 4)", lt_world_size(w));
  if (g_fail) return;
  lt_mesh *m = NULL;
  const char *names[2] = {"data", "model"};
  CHECK(lt_mesh_new(w, 2, (const int[]){2, 2}, names, &m) == LT_OK, "lt_mesh_new");
  if (!m) return;
  enum { N = 20011 };
  static const lt_dtype kDt[] = {LT_F32, LT_I32, LT_F64, LT_BF16};
  const int64_t s23[2] = {2, 3}, big[1] = {N};
  for (int a = 0; a < 2; a++) {
    int g = lt_mesh_coord(m, g_rank, a), stride = a == 0 ? 2 : 1;
    int mem[2] = {g_rank - g * stride, g_rank - g * stride + stride};
    for (size_t d = 0; d < sizeof kDt / sizeof *kDt; d++) {
      lt_dtype dt = kDt[d];
      unsigned char buf[6 * 8];
      double sum[6], mx[6], gat0[12], gat1[12], bc[6];
      for (int i = 0; i < 6; i++) {
        put(buf, dt, i, 10.0 * g_rank + i);
        sum[i] = 20.0 * (mem[0] + mem[1]) / 2 + 2 * i; /* 10 m0 + i + 10 m1 + i */
        mx[i] = 10.0 * mem[1] + i;
        bc[i] = 10.0 * mem[1] + i;
        for (int k = 0; k < 2; k++) gat0[k * 6 + i] = 10.0 * mem[k] + i;
      }
      for (int r = 0; r < 2; r++) /* along axis 1 of [2, 3]: each row, member 0's then 1's */
        for (int k = 0; k < 2; k++)
          for (int j = 0; j < 3; j++) gat1[r * 6 + k * 3 + j] = 10.0 * mem[k] + r * 3 + j;
      lt_scope_begin();
#define IN() lt_from_data(lt_cpu(0), dt, s23, 2, buf)
      if (dt != LT_BF16) { /* bf16 reductions do not run over MPI */
        expect(lt_all_reduce_over(IN(), m, a, LT_REDUCE_SUM), dt, sum, 6, "mesh all_reduce sum");
        expect(lt_all_reduce_over(IN(), m, a, LT_REDUCE_MAX), dt, mx, 6, "mesh all_reduce max");
        /* reduce_scatter along axis 0: row g of the group's sum */
        expect(lt_reduce_scatter_over(IN(), m, a, LT_REDUCE_SUM, 0), dt, sum + 3 * g, 3,
               "mesh reduce_scatter sum");
      }
      expect(lt_all_gather_over(IN(), m, a, 0), dt, gat0, 12, "mesh all_gather axis 0");
      expect(lt_all_gather_over(IN(), m, a, 1), dt, gat1, 12, "mesh all_gather axis 1");
      expect(lt_broadcast_over(IN(), m, a, 1), dt, bc, 6, "mesh broadcast root 1");
#undef IN
      lt_scope_end();
    }
    /* the ring, within the group */
    float *in = malloc(N * sizeof *in), *got = malloc(N * sizeof *got);
    for (int i = 0; in && i < N; i++) in[i] = (float)(i % 1000) + 0.5f * (float)g_rank;
    lt_scope_begin();
    lt_tensor *r =
        lt_all_reduce_over(lt_from_data(lt_cpu(0), LT_F32, big, 1, in), m, a, LT_REDUCE_SUM);
    int rc = r && got ? lt_to_data(r, got, N * sizeof *got) : lt_last_status();
    CHECK(rc == LT_OK, "mesh ring axis %d", a);
    for (int i = 0, bad = 0; rc == LT_OK && i < N; i++) {
      float want = 2.0f * (float)(i % 1000) + 0.5f * (float)(mem[0] + mem[1]);
      if (got[i] != want && bad++ < 3)
        CHECK(0, "mesh ring axis %d [%d]: got %g, want %g", a, i, got[i], want);
    }
    lt_scope_end();
    /* the ring reduce-scatter and all-gather (contiguous chunks), within the group */
    float *big2 = malloc(2 * N * sizeof *big2); /* the scatter's input, the gather's result */
    for (int i = 0; big2 && i < 2 * N; i++) big2[i] = (float)(i % 1000) + 0.5f * (float)g_rank;
    lt_scope_begin();
    const int64_t two[1] = {2 * (N - 1)}; /* an even length: 2 chunks */
    lt_tensor *rs = lt_reduce_scatter_over(lt_from_data(lt_cpu(0), LT_F32, two, 1, big2), m, a,
                                           LT_REDUCE_SUM, 0);
    lt_tensor *ag = lt_all_gather_over(lt_from_data(lt_cpu(0), LT_F32, big, 1, in), m, a, 0);
    rc = rs && ag && got && big2 ? lt_to_data(rs, got, (N - 1) * sizeof *got) : lt_last_status();
    if (rc == LT_OK) rc = lt_to_data(ag, big2, 2 * N * sizeof *big2);
    CHECK(rc == LT_OK, "mesh ring scatter / gather axis %d", a);
    for (int i = 0, bad = 0; rc == LT_OK && i < N - 1; i++) {
      int gi = g * (N - 1) + i;
      float want = 2.0f * (float)(gi % 1000) + 0.5f * (float)(mem[0] + mem[1]);
      if (got[i] != want && bad++ < 3)
        CHECK(0, "mesh ring reduce_scatter axis %d [%d]: got %g, want %g", a, i, got[i], want);
    }
    for (int i = 0, bad = 0; rc == LT_OK && i < 2 * N; i++) {
      float want = (float)(i % N % 1000) + 0.5f * (float)mem[i / N];
      if (big2[i] != want && bad++ < 3)
        CHECK(0, "mesh ring all_gather axis %d [%d]: got %g, want %g", a, i, big2[i], want);
    }
    lt_scope_end();
    free(big2);
    free(in);
    free(got);
  }
  lt_mesh_free(m);
}

/* ---- a GPT on a 2 x 2 mesh of 4 processes (tests/mesh_gpt.h) ----
 * Each process trains the one-device GPT on CPU:1 (outside the world) and
 * its rank's part of the mesh GPT on CPU:0: the losses of every step within
 * 1e-4. */
static void test_mesh_gpt(lt_world *w) {
  CHECK(lt_world_size(w) == 4, "world size %d, want 4 (mpirun -np 4)", lt_world_size(w));
  if (g_fail) return;
  static mg_problem pb;
  mg_make_problem(&pb);
  double want[MG_STEPS], got[MG_STEPS];
  CHECK(mg_train(lt_cpu(1), &pb, NULL, 0, want) == LT_OK, "one device");
  lt_mesh *m = NULL;
  const char *names[2] = {"data", "model"};
  CHECK(lt_mesh_new(w, 2, (const int[]){2, 2}, names, &m) == LT_OK, "lt_mesh_new");
  if (!g_fail) CHECK(mg_train(lt_cpu(0), &pb, m, g_rank, got) == LT_OK, "mesh");
  double worst = 0;
  for (int t = 0; t < MG_STEPS && !g_fail; t++) {
    double d = fabs(got[t] - want[t]);
    CHECK(d <= 1e-4, "step %d: loss %.7f on the mesh, %.7f on one device", t, got[t], want[t]);
    if (d > worst) worst = d;
  }
  CHECK(want[MG_STEPS - 1] < want[0] - 0.1, "the GPT did not train");
  if (!g_fail && g_rank == 0)
    printf("losses %.5f -> %.5f; largest difference from one device %.2g\n", want[0],
           want[MG_STEPS - 1], worst);
  lt_mesh_free(m);
  mg_free_problem(&pb);
}

/* ---- all-reduces large enough for the ring (>= 64 KiB), any world size ----
 * Values are small integers and halves, so every summation order gives the
 * same exact sum and the expected values are exact. The length is not a
 * multiple of the world size (unequal chunks). */
static void test_ring(int size) {
  enum { N = 20011 };
  static const lt_dtype kFloat[] = {LT_F32, LT_F64};
  const int64_t shape[1] = {N};
  for (int d = 0; d < 2; d++) {
    lt_dtype dt = kFloat[d];
    size_t esz = lt_dtype_size(dt);
    unsigned char *in = malloc(N * esz), *got = malloc(N * esz);
    for (int i = 0; i < N; i++) put(in, dt, i, (double)(i % 1000 - 300) + 0.5 * g_rank);
    for (int mean = 0; mean < 2 && in && got; mean++) {
      lt_scope_begin();
      lt_tensor *t = lt_from_data(lt_cpu(0), dt, shape, 1, in);
      lt_tensor *r = lt_all_reduce(t, mean ? LT_REDUCE_MEAN : LT_REDUCE_SUM);
      int rc = r ? lt_to_data(r, got, N * esz) : lt_last_status();
      CHECK(rc == LT_OK, "ring %s %s: %s", lt_dtype_name(dt), mean ? "mean" : "sum",
            lt_last_error());
      int bad = 0;
      for (int i = 0; rc == LT_OK && i < N; i++) {
        double sum = (double)size * (i % 1000 - 300) + 0.25 * size * (size - 1);
        unsigned char w[8];
        put(w, dt, 0, mean ? sum / size : sum);
        if (get(got, dt, i) != get(w, dt, 0) && bad++ < 3)
          CHECK(0, "ring %s %s [%d]: got %g, want %g", lt_dtype_name(dt), mean ? "mean" : "sum", i,
                get(got, dt, i), get(w, dt, 0));
      }
      lt_scope_end();
    }
    free(in);
    free(got);
  }
}

/* Reduce-scatter and all-gather large enough for the transport's rings
 * (chunks along axis 0): every rank's chunk against exact values (halves
 * and integers: any order of the sums gives the same bits). */
static void test_ring_scatter_gather(int size) {
  enum { M = 20011 }; /* per rank: 80 KB of f32 */
  lt_dtype dts[2] = {LT_F32, LT_F64};
  for (int d = 0; d < 2 && !g_fail; d++) {
    lt_dtype dt = dts[d];
    size_t esz = lt_dtype_size(dt);
    int64_t n = (int64_t)size * M;
    unsigned char *in = malloc((size_t)n * esz), *got = malloc((size_t)n * esz);
    for (int64_t i = 0; i < n; i++) put(in, dt, (int)i, (double)(i % 1000 - 300) + 0.5 * g_rank);
    for (int mean = 0; mean < 2 && !g_fail; mean++) {
      lt_scope_begin();
      lt_tensor *t = lt_from_data(lt_cpu(0), dt, &n, 1, in);
      lt_tensor *r = lt_reduce_scatter(t, mean ? LT_REDUCE_MEAN : LT_REDUCE_SUM, 0);
      int rc = r ? lt_to_data(r, got, (size_t)M * esz) : lt_last_status();
      CHECK(rc == LT_OK, "ring reduce_scatter: %s", lt_last_error());
      for (int i = 0, bad = 0; rc == LT_OK && i < M; i++) {
        int64_t g = (int64_t)g_rank * M + i;
        double sum = (double)size * (double)(g % 1000 - 300) + 0.25 * size * (size - 1);
        unsigned char w[8];
        put(w, dt, 0, mean ? sum / size : sum);
        if (get(got, dt, i) != get(w, dt, 0) && bad++ < 3)
          CHECK(0, "ring reduce_scatter %s %s [%d]: got %g, want %g", lt_dtype_name(dt),
                mean ? "mean" : "sum", i, get(got, dt, i), get(w, dt, 0));
      }
      lt_scope_end();
    }
    lt_scope_begin();
    int64_t m = M;
    lt_tensor *t = lt_from_data(lt_cpu(0), dt, &m, 1, in);
    lt_tensor *a = lt_all_gather(t, 0);
    int rc = a ? lt_to_data(a, got, (size_t)n * esz) : lt_last_status();
    CHECK(rc == LT_OK, "ring all_gather: %s", lt_last_error());
    for (int64_t k = 0, bad = 0; rc == LT_OK && k < n; k++) {
      int q = (int)(k / M), i = (int)(k % M);
      double want = (double)(i % 1000 - 300) + 0.5 * q;
      if (get(got, dt, (int)k) != want && bad++ < 3)
        CHECK(0, "ring all_gather %s [%lld]: got %g, want %g", lt_dtype_name(dt), (long long)k,
              get(got, dt, (int)k), want);
    }
    lt_scope_end();
    free(in);
    free(got);
  }
}

/* ---- data parallel: the MLP of tests/dp_mlp.h ---- */
static void test_dp(bool shard) {
  static problem pb;
  make_problem(&pb);
  static float want[NP][IN * HID], got[NP][IN * HID];
  /* one device of no world (CPU:1), whole batches */
  model solo = {0};
  lt_device d1 = lt_cpu(1), d0 = lt_cpu(0);
  CHECK(model_init(&solo, d1, &pb, 0.0f) == LT_OK, "solo init");
  for (int t = 0; t < STEPS && !g_fail; t++) {
    lt_scope_begin();
    CHECK(forward_backward(&solo, d1, &pb, t, 0, 2 * B) == LT_OK, "solo step %d", t);
    CHECK(lt_nn_optim_step(solo.o) == LT_OK, "solo optim %d", t);
    lt_scope_end();
    CHECK(lt_mark_step(d1) == LT_OK, "solo mark_step %d", t);
  }
  for (int k = 0; k < NP; k++)
    CHECK(lt_to_data(solo.p[k], want[k], sizeof want[k]) == LT_OK, "read");
  /* this rank's half of every batch; rank 1 starts elsewhere: the broadcast fixes it */
  model m = {0};
  CHECK(model_init(&m, d0, &pb, g_rank == 0 ? 0.0f : 0.25f) == LT_OK, "dp init");
  if (shard && !g_fail) {
    lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
    cfg.lr = 1e-2; /* model_init's */
    lt_dp_options opts = {.shard_optimizer = true};
    lt_nn_optim_free(m.o);
    m.o = lt_dp_optim_create(&cfg, m.p, NP, &opts);
    CHECK(m.o != NULL, "sharded optimizer: %s", lt_last_error());
    int64_t half = 0;
    for (int k = 0; k < NP; k++) half += (kShapes[k][0] * kShapes[k][1] + 1) / 2 * 2 * 4;
    CHECK(lt_nn_optim_state_bytes(m.o) == half, "state bytes %lld, want %lld",
          (long long)lt_nn_optim_state_bytes(m.o), (long long)half);
  }
  CHECK(lt_dp_broadcast_params(m.p, NP) == LT_OK, "broadcast");
  CHECK(lt_mark_step(d0) == LT_OK, "mark_step after broadcast");
  for (int t = 0; t < STEPS && !g_fail; t++) {
    lt_scope_begin();
    CHECK(forward_backward(&m, d0, &pb, t, g_rank * B, B) == LT_OK, "dp step %d", t);
    CHECK(lt_dp_optim_step(m.o) == LT_OK, "dp optim %d", t);
    lt_scope_end();
    CHECK(lt_mark_step(d0) == LT_OK, "dp mark_step %d", t);
  }
  for (int k = 0; k < NP && !g_fail; k++) {
    CHECK(lt_to_data(m.p[k], got[k], sizeof got[k]) == LT_OK, "read");
    for (int i = 0; i < kShapes[k][0] * kShapes[k][1]; i++)
      CHECK(fabs((double)got[k][i] - want[k][i]) <= 1e-5 * fabs(want[k][i]) + 1e-7,
            "param %d[%d]: 2 ranks %.9g, one device %.9g", k, i, got[k][i], want[k][i]);
  }
  CHECK(fabs(got[0][0] - pb.init[0][0]) > 1e-3, "training did not move the parameters");
  lt_nn_optim_free(m.o);
  lt_nn_optim_free(solo.o);
  for (int k = 0; k < NP; k++) {
    lt_release(m.p[k]);
    lt_release(solo.p[k]);
  }
}

/* ---- tensor parallel: the MLP of tests/test_sharding.c ---- */
enum { TIN = 16, THID = 8, TOUT = 4, TB = 6, TNP = 4 };
static const int64_t kTShapes[TNP][2] = {{TIN, THID}, {1, THID}, {THID, TOUT}, {1, TOUT}};
static const int kTSplit[TNP] = {1, 0, 0, -1};

typedef struct tp_problem {
  float init[TNP][TIN * THID];
  float x[STEPS][TB * TIN], y[STEPS][TB * TOUT];
} tp_problem;

/* Trains the MLP on dev, sharded over w (or not, w NULL); params gets the
 * final (unsharded) parameters. */
static void tp_train(lt_world *w, lt_device dev, const tp_problem *pb,
                     float params[TNP][TIN * THID]) {
  lt_nn_linear l1, l2;
  CHECK(lt_nn_linear_init(&l1, dev, LT_F32, TIN, THID, true) == LT_OK, "linear 1");
  CHECK(lt_nn_linear_init(&l2, dev, LT_F32, THID, TOUT, true) == LT_OK, "linear 2");
  if (g_fail) return;
  lt_tensor *p[TNP] = {l1.weight, l1.bias, l2.weight, l2.bias};
  for (int k = 0; k < TNP; k++) {
    bool vec = kTShapes[k][0] == 1;
    lt_tensor *v =
        lt_from_data(dev, LT_F32, vec ? &kTShapes[k][1] : kTShapes[k], vec ? 1 : 2, pb->init[k]);
    CHECK(lt_assign(p[k], v) == LT_OK, "assign %d", k);
    lt_release(v);
    if (w && kTSplit[k] >= 0) CHECK(lt_mark_sharding(p[k], w, kTSplit[k]) == LT_OK, "mark %d", k);
  }
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 1e-2;
  lt_nn_optim *o = lt_nn_optim_create(&cfg, p, TNP);
  CHECK(o != NULL, "optim");
  CHECK(lt_mark_step(dev) == LT_OK, "mark_step");
  const int64_t xs[2] = {TB, TIN}, ys[2] = {TB, TOUT};
  for (int t = 0; t < STEPS && !g_fail; t++) {
    lt_scope_begin();
    lt_tensor *x = lt_from_data(dev, LT_F32, xs, 2, pb->x[t]);
    lt_tensor *y = lt_from_data(dev, LT_F32, ys, 2, pb->y[t]);
    lt_tensor *h = lt_relu(lt_nn_linear_forward(&l1, x));
    CHECK(h && lt_sharding_axis(h) == (w ? 1 : -1), "hidden layout");
    lt_tensor *out = lt_nn_linear_forward(&l2, h);
    lt_tensor *loss = lt_nn_mse_loss(out, y, LT_NN_REDUCTION_MEAN);
    CHECK(loss && lt_backward(loss) == LT_OK, "backward %d", t);
    CHECK(lt_nn_optim_step(o) == LT_OK, "optim %d", t);
    lt_scope_end();
    CHECK(lt_mark_step(dev) == LT_OK, "mark_step %d", t);
  }
  for (int k = 0; k < TNP && !g_fail; k++) {
    lt_scope_begin();
    CHECK(lt_to_data(lt_unshard(p[k]), params[k], sizeof params[k]) == LT_OK, "read %d", k);
    lt_scope_end();
  }
  lt_nn_optim_free(o);
  lt_nn_linear_free(&l1);
  lt_nn_linear_free(&l2);
}

static void test_tp(lt_world *w) {
  static tp_problem pb;
  uint32_t s = 4242;
  for (int k = 0; k < TNP; k++)
    for (int i = 0; i < kTShapes[k][0] * kTShapes[k][1]; i++) pb.init[k][i] = uni(&s);
  for (int t = 0; t < STEPS; t++) {
    for (int i = 0; i < TB * TIN; i++) pb.x[t][i] = 2 * uni(&s);
    for (int i = 0; i < TB * TOUT; i++) pb.y[t][i] = uni(&s);
  }
  static float want[TNP][TIN * THID], got[TNP][TIN * THID];
  tp_train(NULL, lt_cpu(1), &pb, want);
  tp_train(w, lt_cpu(0), &pb, got);
  for (int k = 0; k < TNP && !g_fail; k++)
    for (int i = 0; i < kTShapes[k][0] * kTShapes[k][1]; i++)
      CHECK(fabs((double)got[k][i] - want[k][i]) <= 1e-5 * fabs(want[k][i]) + 1e-7,
            "param %d[%d]: 2 ranks %.9g, one device %.9g", k, i, got[k][i], want[k][i]);
  CHECK(fabs(got[0][0] - pb.init[0][0]) > 1e-3, "training did not move the parameters");
}

/* ---- reads of sharded tensors gather ---- */
static void test_read(lt_world *w) {
  static const lt_dtype kAll[] = {LT_F32, LT_F64, LT_BF16, LT_I32, LT_I64, LT_U8, LT_I8, LT_BOOL};
  enum { M = 4, N = 6 };
  const int64_t shape[2] = {M, N};
  for (size_t k = 0; k < sizeof kAll / sizeof *kAll && !g_fail; k++)
    for (int axis = 0; axis < 2 && !g_fail; axis++) {
      lt_dtype dt = kAll[k];
      const char *dn = lt_dtype_name(dt);
      size_t nbytes = M * N * lt_dtype_size(dt);
      unsigned char want[M * N * 8], got[M * N * 8];
      for (int i = 0; i < M * N; i++)
        put(want, dt, i, dt == LT_BOOL ? i % 3 == 0 : dt == LT_U8 ? (i * 37) % 251 : i % 23 - 11);
      lt_scope_begin();
      lt_tensor *t = lt_from_data(lt_cpu(0), dt, shape, 2, want);
      CHECK(t && lt_mark_sharding(t, w, axis) == LT_OK, "%s: mark axis %d", dn, axis);
      for (int pass = 0; pass < 2 && !g_fail; pass++) { /* pending, then after the step */
        memset(got, 0xA5, sizeof got);
        CHECK(lt_to_data(t, got, nbytes) == LT_OK, "%s axis %d: read", dn, axis);
        CHECK(memcmp(got, want, nbytes) == 0, "%s axis %d pass %d: read differs", dn, axis, pass);
        double d = -1;
        CHECK(lt_item(t, M * N - 1, &d) == LT_OK && d == get(want, dt, M * N - 1),
              "%s: lt_item(last) %g", dn, d);
        float f[M * N];
        CHECK(lt_to_f32(t, f, M * N) == LT_OK && f[1] == (float)get(want, dt, 1), "%s: to_f32", dn);
        CHECK(lt_sharding_axis(t) == axis, "%s: the read changed the sharding", dn);
        if (pass == 0) CHECK(lt_mark_step(lt_cpu(0)) == LT_OK, "mark_step");
      }
      CHECK(lt_to_data(t, got, nbytes / 2) == LT_EINVAL && strstr(lt_last_error(), "lt_to_data"),
            "%s: short destination", dn);
      lt_scope_end();
    }
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Returns true when this process should skip lt_world_free's finalise (a
 * broken world is not finalised anyway). */
/* One all-reduce of f32[4] (x: 1, 2, 3, 4) in its own sync: its status. */
static int all_reduce4(void) {
  const int64_t s4[1] = {4};
  float x[4] = {1, 2, 3, 4}, got[4];
  lt_scope_begin();
  lt_tensor *t = lt_all_reduce(lt_from_data(lt_cpu(0), LT_F32, s4, 1, x), LT_REDUCE_SUM);
  int rc = t ? lt_to_data(t, got, sizeof got) : lt_last_status();
  lt_scope_end();
  return rc;
}

/* The survivor's (rank r's) failed call: within 10 s (the liveness bound
 * docs/SCALE_OUT.md promises, with the world's deadline left at its
 * minutes-long default), naming the rank `gone` and saying how. */
static void expect_lost(int rc, int64_t ms, int gone, const char *how) {
  char name[32];
  snprintf(name, sizeof name, "rank %d %s", gone, how);
  CHECK(rc != LT_OK, "the collective succeeded without its peer");
  CHECK(ms < 10000, "the survivor took %lld ms to fail", (long long)ms);
  CHECK(strstr(lt_last_error(), name) != NULL, "message does not say \"%s\": %s", name,
        lt_last_error());
  printf("survivor: failed in %lld ms: %s\n", (long long)ms, lt_last_error());
  fflush(stdout);
}

static int64_t now_ms(void);

/* stop: rank 1 stops itself; rank 0 finds it gone, then kills it (its pid
 * comes through an all-gather first) so that the job ends. */
static void test_stop(void) {
  const int64_t s1[1] = {1};
  int64_t pid = getpid(), pids[2] = {0, 0};
  lt_scope_begin();
  lt_tensor *t = lt_all_gather(lt_from_data(lt_cpu(0), LT_I64, s1, 1, &pid), 0);
  CHECK(t && lt_to_data(t, pids, sizeof pids) == LT_OK, "pids");
  lt_scope_end();
  if (g_fail) return;
  if (g_rank == 1) {
    fflush(stdout);
    raise(SIGSTOP);
    return; /* not reached: rank 0 kills it */
  }
  int64_t t0 = now_ms();
  int rc = all_reduce4();
  expect_lost(rc, now_ms() - t0, 1, "is gone");
  kill((pid_t)pids[1], SIGKILL);
}

/* leave and extra: rank `leaver` frees its world after one collective while
 * the other runs a second one. Returns true when this rank freed w. */
static bool test_leave(lt_world *w, int leaver) {
  CHECK(all_reduce4() == LT_OK, "first all_reduce");
  if (g_fail) return false;
  if (g_rank == leaver) {
    lt_world_free(w);
    /* the other rank ran (and failed) a second collective: unmatched */
    CHECK(strstr(lt_last_error(), "unmatched") != NULL,
          "the leaver's lt_world_free did not report collectives unmatched: %s", lt_last_error());
    printf("leaver: %s\n", lt_last_error());
    return true;
  }
  int64_t t0 = now_ms();
  int rc = all_reduce4();
  expect_lost(rc, now_ms() - t0, leaver, "left the world");
  return false;
}

/* graph: the same all-reduce (f32[4] sum) after x + x on rank 0 and x * x
 * on rank 1, in one sync each: the graphs differ, so both ranks fail at
 * that call and each message names both sides. */
static void test_graph(void) {
  const int64_t s4[1] = {4};
  float x[4] = {1, 2, 3, 4}, got[4];
  lt_scope_begin();
  lt_tensor *a = lt_from_data(lt_cpu(0), LT_F32, s4, 1, x);
  lt_tensor *b = g_rank == 0 ? lt_add(a, a) : lt_mul(a, a);
  lt_tensor *t = lt_all_reduce(b, LT_REDUCE_SUM);
  int rc = t ? lt_to_data(t, got, sizeof got) : lt_last_status();
  lt_scope_end();
  const char *e = lt_last_error();
  CHECK(rc != LT_OK, "all-reduces in different graphs were paired");
  CHECK(strstr(e, "rank 0 runs all_reduce(sum) f32[4]") && strstr(e, "rank 1 runs") &&
            strstr(e, "graph"),
        "message does not name both sides and their graphs: %s", e);
  printf("rank %d: failed at the call: %s\n", g_rank, e);
}

/* busy: rank 0 is away from MPI for 60 s (an evaluation, a checkpoint)
 * while rank 1 waits in an all-reduce: rank 1 keeps waiting, as rank 0's
 * heartbeats keep coming, and the call succeeds. */
static void test_busy(void) {
  if (g_rank == 0) {
    struct timespec ts = {60, 0};
    nanosleep(&ts, NULL);
  }
  int64_t t0 = now_ms();
  CHECK(all_reduce4() == LT_OK, "all_reduce after a 60 s wait");
  printf("rank %d: all_reduce done after %lld ms\n", g_rank, (long long)(now_ms() - t0));
}

static void test_kill(lt_world *w) {
  (void)w;
  const int64_t s4[1] = {4};
  float x[4] = {1, 2, 3, 4}, got[4];
  lt_scope_begin();
  lt_tensor *t = lt_all_reduce(lt_from_data(lt_cpu(0), LT_F32, s4, 1, x), LT_REDUCE_SUM);
  CHECK(t && lt_to_data(t, got, sizeof got) == LT_OK && got[3] == 8, "first all_reduce");
  lt_scope_end();
  if (g_rank == 1) {
    fflush(stdout);
    raise(SIGKILL);
  }
  int64_t t0 = now_ms();
  lt_scope_begin();
  t = lt_all_reduce(lt_from_data(lt_cpu(0), LT_F32, s4, 1, x), LT_REDUCE_SUM);
  int rc = t ? lt_to_data(t, got, sizeof got) : lt_last_status();
  lt_scope_end();
  expect_lost(rc, now_ms() - t0, 1, "is gone");
}

/* Rank 1 dies (SIGKILL from a timer thread) while both ranks run back to
 * back all-reduces large enough for the ring, so that it most likely dies
 * between the exchanges of one: rank 0 must fail with a message, within
 * the timeout, without touching freed memory (the ring retains the buffers
 * a pending request may still use). Which stage it failed in is printed. */
static void *kill_later(void *arg) {
  (void)arg;
  struct timespec ts = {0, 30 * 1000000};
  nanosleep(&ts, NULL);
  fflush(stdout);
  raise(SIGKILL);
  return NULL;
}

static void test_kill_ring(void) {
  enum { N = 1 << 18 };
  const int64_t shape[1] = {N};
  float *x = calloc(N, sizeof *x), *got = calloc(N, sizeof *got);
  pthread_t killer;
  if (g_rank == 1) pthread_create(&killer, NULL, kill_later, NULL);
  int rc = LT_OK, runs = 0;
  int64_t t0 = now_ms();
  while (x && got && rc == LT_OK && runs < 1000000) {
    t0 = now_ms();
    lt_scope_begin();
    lt_tensor *t = lt_all_reduce(lt_from_data(lt_cpu(0), LT_F32, shape, 1, x), LT_REDUCE_MEAN);
    rc = t ? lt_to_data(t, got, N * sizeof *got) : lt_last_status();
    lt_scope_end();
    runs++;
  }
  printf("after %d all-reduces (%s)\n", runs,
         strstr(lt_last_error(), "ring transfer") ? "in the ring" : "before the ring");
  expect_lost(rc, now_ms() - t0, 1, "is gone");
  free(x);
  free(got);
}

/* ---- exchange N: all_to_all, collective_permute, bool reductions ---- */

/* Rank r's element i: every rank can compute every rank's input. */
static double xval(int r, int64_t i, lt_dtype dt) {
  if (dt == LT_BOOL) return (double)((r * 7 + i * 3) % 5 < 2);
  if (lt__is_float(dt)) return (r + 1) * 0.5 + (double)(i % 32) - r; /* exact in bf16 */
  double v = (double)((r * 5 + i * 3) % 13);
  return dt == LT_U8 ? v : v - 6;
}

static lt_tensor *xinput(int r, lt_dtype dt, const int64_t *shape, int ndim) {
  int64_t m = 1;
  for (int d = 0; d < ndim; d++) m *= shape[d];
  unsigned char *buf = calloc((size_t)m + 1, 8);
  for (int64_t i = 0; i < m; i++) put(buf, dt, (int)i, xval(r, i, dt));
  lt_tensor *t = lt_from_data(lt_cpu(0), dt, shape, ndim, buf);
  free(buf);
  return t;
}

/* Reads t (m elements of dt) and compares with want[] exactly (cast to dt). */
static void xexpect(lt_tensor *t, lt_dtype dt, const double *want, int64_t m, const char *what) {
  CHECK(t != NULL, "%s %s: no tensor", what, lt_dtype_name(dt));
  if (!t) return;
  CHECK(lt_numel(t) == m, "%s %s: %lld elements, want %lld", what, lt_dtype_name(dt),
        (long long)lt_numel(t), (long long)m);
  unsigned char *got = calloc((size_t)m + 1, 8), *w = calloc((size_t)m + 1, 8);
  int rc = lt_numel(t) == m ? lt_to_data(t, got, (size_t)m * lt_dtype_size(dt)) : -1;
  CHECK(rc == LT_OK, "%s %s: read failed", what, lt_dtype_name(dt));
  int bad = 0;
  for (int64_t i = 0; rc == LT_OK && i < m && bad < 3; i++) {
    put(w, dt, (int)i, want[i]);
    if (get(got, dt, (int)i) == get(w, dt, (int)i)) continue;
    CHECK(0, "%s %s [%lld]: got %g, want %g", what, lt_dtype_name(dt), (long long)i,
          get(got, dt, (int)i), get(w, dt, (int)i));
    bad++;
  }
  free(got);
  free(w);
}

/* all_to_all over n ranks of [6, 4, 3]: the input element (rank *k, flat
 * index) that lands at element j of rank r's result. */
static int64_t a2a_src(int n, int r, const int64_t *in, int sa, int ca, int64_t j, int *k) {
  int64_t out[3] = {in[0], in[1], in[2]}, idx[3];
  out[sa] /= n;
  int64_t box_c = out[ca];
  out[ca] *= n;
  for (int d = 2; d >= 0; d--) {
    idx[d] = j % out[d];
    j /= out[d];
  }
  *k = (int)(idx[ca] / box_c);
  idx[ca] %= box_c;
  idx[sa] += r * (in[sa] / n);
  return (idx[0] * in[1] + idx[1]) * in[2] + idx[2];
}

static void test_exchange(int n) {
  static const lt_dtype kAll[] = {LT_F32, LT_F64, LT_I32, LT_I64, LT_U8, LT_I8, LT_BOOL, LT_BF16};
  const int64_t shape[3] = {6, 4, 3};
  double want[72];
  char what[96];
  for (size_t d = 0; d < sizeof kAll / sizeof *kAll; d++) {
    lt_dtype dt = kAll[d];
    for (int sa = 0; sa < 3; sa++)
      for (int ca = 0; ca < 3; ca++) {
        if (shape[sa] % n) continue;
        lt_scope_begin();
        for (int64_t j = 0; j < 72; j++) {
          int k;
          int64_t i = a2a_src(n, g_rank, shape, sa, ca, j, &k);
          want[j] = xval(k, i, dt);
        }
        snprintf(what, sizeof what, "all_to_all split %d concat %d", sa, ca);
        xexpect(lt_all_to_all(xinput(g_rank, dt, shape, 3), sa, ca), dt, want, 72, what);
        lt_scope_end();
      }
    /* permutes: r -> r + 1; 1 -> 0 (and n - 1 stays when n > 2): rank 1
     * gets zeros; no pairs: zeros everywhere */
    int rot[2 * 8], part[4] = {1, 0, n - 1, n - 1};
    for (int r = 0; r < n; r++) rot[2 * r] = r, rot[2 * r + 1] = (r + 1) % n;
    for (int which = 0; which < 3; which++) {
      const int *pairs = which == 0 ? rot : which == 1 ? part : NULL;
      int np = which == 0 ? n : which == 1 ? (n > 2 ? 2 : 1) : 0;
      int from = -1;
      for (int k = 0; k < np; k++)
        if (pairs[2 * k + 1] == g_rank) from = pairs[2 * k];
      for (int64_t j = 0; j < 12; j++) want[j] = from < 0 ? 0 : xval(from, j, dt);
      lt_scope_begin();
      snprintf(what, sizeof what, "collective_permute %d", which);
      const int64_t s34[2] = {3, 4};
      xexpect(lt_collective_permute(xinput(g_rank, dt, s34, 2), pairs, np), dt, want, 12, what);
      lt_scope_end();
    }
  }
  /* bool reductions: element i of rank r is bit r of i (every combination
   * over up to 3 ranks) */
  uint8_t bits[8];
  for (int i = 0; i < 8; i++) bits[i] = (uint8_t)(i >> g_rank & 1);
  static const lt_reduce_op kOps[] = {LT_REDUCE_ANY, LT_REDUCE_ALL, LT_REDUCE_SUM, LT_REDUCE_MAX,
                                      LT_REDUCE_MIN};
  for (int k = 0; k < 5; k++) {
    bool is_or = kOps[k] != LT_REDUCE_ALL && kOps[k] != LT_REDUCE_MIN;
    for (int i = 0; i < 8; i++) {
      bool acc = !is_or;
      for (int q = 0; q < n; q++) acc = is_or ? (acc || (i >> q & 1)) : (acc && (i >> q & 1));
      want[i] = acc;
    }
    lt_scope_begin();
    const int64_t s8[1] = {8}, s24[2] = {2, 4};
    snprintf(what, sizeof what, "all_reduce of bool, op %d", (int)kOps[k]);
    xexpect(lt_all_reduce(lt_from_data(lt_cpu(0), LT_BOOL, s8, 1, bits), kOps[k]), LT_BOOL, want, 8,
            what);
    if (n == 2) { /* rank r keeps row r of [2, 4] */
      snprintf(what, sizeof what, "reduce_scatter of bool, op %d", (int)kOps[k]);
      xexpect(lt_reduce_scatter(lt_from_data(lt_cpu(0), LT_BOOL, s24, 2, bits), kOps[k], 0),
              LT_BOOL, want + 4 * g_rank, 4, what);
    }
    lt_scope_end();
  }
  /* gradients: rank r's loss sum(y * w_r), w_r[j] = 1 + r + 0.25 j; x_r[i]
   * gets w_k[j] where it lands as element j of rank k's result */
  for (int kind = 0; kind < 2; kind++) {
    lt_scope_begin();
    lt_tensor *x = xinput(g_rank, LT_F64, shape, 3);
    lt_set_requires_grad(x, true);
    int pairs[4] = {0, 1, 1, 2}; /* 0 -> 1 (and 1 -> 2 for 3 ranks): not its own inverse */
    lt_tensor *y =
        kind == 0 ? lt_all_to_all(x, 0, 2) : lt_collective_permute(x, pairs, n == 2 ? 1 : 2);
    double wv[72];
    for (int j = 0; j < 72; j++) wv[j] = 1 + g_rank + 0.25 * j;
    lt_tensor *loss =
        y ? lt_sum(lt_mul(y, lt_from_data(lt_cpu(0), LT_F64, lt_shape(y), 3, wv)), NULL, 0, false)
          : NULL;
    int rc = loss ? lt_backward(loss) : lt_last_status();
    CHECK(rc == LT_OK, "backward of %s", kind == 0 ? "all_to_all" : "collective_permute");
    for (int64_t i = 0; i < 72; i++) {
      want[i] = 0;
      if (kind == 1) {
        int target = g_rank == 0 ? 1 : g_rank == 1 && n == 3 ? 2 : -1;
        if (target >= 0) want[i] = 1 + target + 0.25 * (double)i;
        continue;
      }
      for (int k = 0; k < n; k++)
        for (int64_t j = 0; j < 72; j++) {
          int from;
          if (a2a_src(n, k, shape, 0, 2, j, &from) == i && from == g_rank)
            want[i] = 1 + k + 0.25 * (double)j;
        }
    }
    if (rc == LT_OK)
      xexpect(lt_grad(x), LT_F64, want, 72, kind == 0 ? "grad all_to_all" : "grad permute");
    lt_scope_end();
  }
}

/* mismatch: rank 0 all_to_all, rank 1 all_gather of the same f32[2, 4]
 * (pairs: both permute, with other pairs): both ranks fail at that call
 * (the check), naming both sides. */
static void test_mismatch(bool pairs) {
  const int64_t s24[2] = {2, 4};
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[16];
  int swap[4] = {0, 1, 1, 0}, one[2] = {0, 1};
  lt_scope_begin();
  lt_tensor *a = lt_from_data(lt_cpu(0), LT_F32, s24, 2, x), *t;
  if (pairs)
    t = g_rank == 0 ? lt_collective_permute(a, swap, 2) : lt_collective_permute(a, one, 1);
  else
    t = g_rank == 0 ? lt_all_to_all(a, 1, 1) : lt_all_gather(a, 1);
  int rc = t ? lt_to_data(t, got, (size_t)lt_numel(t) * sizeof *got) : lt_last_status();
  lt_scope_end();
  const char *e = lt_last_error();
  CHECK(rc != LT_OK, "different collectives were paired");
  const char *want0 = pairs ? "rank 0 runs collective_permute pairs {1->0, 0->1} f32[2, 4]"
                            : "rank 0 runs all_to_all split 1 concat 1 f32[2, 4]";
  const char *want1 = pairs ? "rank 1 runs collective_permute pairs {0->1} f32[2, 4]"
                            : "rank 1 runs all_gather axis 1 f32[2, 4]";
  CHECK(strstr(e, "ranks disagree") && strstr(e, want0) && strstr(e, want1),
        "message does not name both sides: %s", e);
  printf("rank %d: failed at the call: %s\n", g_rank, e);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "collectives";
  lt_world *w = NULL;
  if (lt_world_mpi(&w) != LT_OK) {
    fprintf(stderr, "lt_world_mpi: %s\n", lt_last_error());
    return 1;
  }
  g_rank = lt_world_rank(w);
  bool freed = false;
  bool any_size = strcmp(mode, "ring") == 0 || strcmp(mode, "mesh") == 0 ||
                  strcmp(mode, "mesh_gpt") == 0 || strcmp(mode, "exchange") == 0;
  CHECK(any_size || lt_world_size(w) == 2, "world size %d, want 2 (run under mpirun -np 2)",
        lt_world_size(w));
  CHECK(lt_world_device(w, g_rank).index == 0 &&
            lt_world_device(w, (g_rank + 1) % lt_world_size(w)).index == -1,
        "devices");
  CHECK(lt_world_rank_of(lt_cpu(0)) == g_rank, "rank_of");
  if (!g_fail) {
    if (strcmp(mode, "collectives") == 0)
      test_collectives();
    else if (strcmp(mode, "dp") == 0 || strcmp(mode, "dp_zero") == 0)
      test_dp(strcmp(mode, "dp_zero") == 0);
    else if (strcmp(mode, "tp") == 0)
      test_tp(w);
    else if (strcmp(mode, "read") == 0)
      test_read(w);
    else if (strcmp(mode, "kill") == 0)
      test_kill(w);
    else if (strcmp(mode, "kill_ring") == 0)
      test_kill_ring();
    else if (strcmp(mode, "stop") == 0)
      test_stop();
    else if (strcmp(mode, "leave") == 0)
      freed = test_leave(w, 1);
    else if (strcmp(mode, "extra") == 0)
      freed = test_leave(w, 0);
    else if (strcmp(mode, "graph") == 0)
      test_graph();
    else if (strcmp(mode, "busy") == 0)
      test_busy();
    else if (strcmp(mode, "mesh") == 0)
      test_mesh(w);
    else if (strcmp(mode, "mesh_gpt") == 0)
      test_mesh_gpt(w);
    else if (strcmp(mode, "mismatch") == 0 || strcmp(mode, "mismatch_pairs") == 0)
      test_mismatch(strcmp(mode, "mismatch_pairs") == 0);
    else if (strcmp(mode, "exchange") == 0)
      test_exchange(lt_world_size(w));
    else if (any_size) {
      test_ring(lt_world_size(w));
      test_ring_scatter_gather(lt_world_size(w));
    } else
      CHECK(0, "unknown mode %s", mode);
  }
  if (!freed) lt_world_free(w);
  if (!g_fail) printf("rank %d: ok\n", g_rank);
  fflush(stdout);
  return g_fail;
}
