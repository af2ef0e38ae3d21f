/* All-reduce latency and bandwidth over MPI, and the cost model of
 * data-parallel training they feed (bench/cost_model.h, docs/COST_MODEL.md).
 *
 * 1. The program runs itself under `mpirun --oversubscribe --bind-to none
 *    -np 2` (MPIRUN overrides the command) twice: with Open MPI's default
 *    transports (shared memory between the two processes of this host), then
 *    with its TCP transport over loopback (`--mca pml ob1 --mca btl tcp,self
 *    --mca btl_tcp_if_include lo`), closer to a network. Rank 0 times, for
 *    f32 messages of 4 B .. 64 MiB (powers of 4), lt_all_reduce(sum) through
 *    the graph (trace, lt_mark_step, lt_wait_device_ops on an lt_world_mpi
 *    world) and raw MPI_Allreduce on the same data, each repeat after two
 *    barriers, median of the repeats:
 *
 *      bench allreduce_<bytes> <us> us ratio <mpi_us / ours> vs mpi_allreduce
 *      bench allreduce_tcp_<bytes> ...
 *
 *    then fits t(S) = a + S b to each series (relative least squares):
 *
 *      bench allreduce_model alpha_us <a> beta_ns_per_byte <b>
 *      bench allreduce_model_mpi ..., allreduce_tcp_model, allreduce_tcp_model_mpi
 *
 *    and times one more 4-byte all-reduce inside a graph (9 chained in one
 *    graph against one alone; ratio: MPI's fitted a over it):
 *
 *      bench allreduce_in_graph <us> us ratio <r> vs mpi_allreduce
 *      bench allreduce_tcp_in_graph ...
 *
 *    The tables below take ring alpha = that / 2 and beta = our fitted b.
 *
 * 2. One process (1 thread unless --threads N) times a training step of the
 *    MLP (784-512-512-10, Adam, batch 128), lazytensor-train's CNN (batch
 *    128) and its GPT (context 64, width 128, 4 layers, 4 heads, batch 32),
 *    counts their parameters, and prints the model's step time, samples/s
 *    and efficiency for 2..64 hosts on the measured networks and on two
 *    stated Ethernet ones (markdown tables).
 * 3. --check: runs the sibling bench/data_parallel (2 processes, the MLP) and
 *    prints its measured step beside the model's p = 2 prediction:
 *
 *      bench allreduce_check_p2 <model ms> ms ratio <measured / model> vs data_parallel_measured
 *
 * --max-bytes N caps the message size (quick runs); --no-mpi skips part 1
 * (the tables then use the stated networks only). Without mpirun, or in a
 * build without MPI, part 1 is skipped as by --no-mpi. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_mlp.h"
#include "cost_model.h"
#include "lazytensor_dist.h"
#include "model.h"

#ifdef LT_HAVE_MPI
#include <mpi.h>
#endif

enum {
  MAX_POINTS = 16,
  IN_GRAPH = 9,
  FIRST_WARMUP = 200,
  WARMUP = 3,
  STEPS = 10,
  CNN_BATCH = 128,
  GPT_BATCH = 32,
  MLP_BATCH = 128
};

static void die(const char *what) {
  fprintf(stderr, "bench allreduce: %s: %s\n", what, lt_last_error());
  exit(1);
}

/* ---- part 1: the MPI ranks ------------------------------------------------------------------ */
#ifdef LT_HAVE_MPI
/* Repeats per size: enough for a median of small messages, few of the
 * large ones (the run must stay short on a shared machine). */
static int repeats_for(int64_t bytes) {
  int64_t r = ((int64_t)64 << 20) / bytes;
  return r > 40 ? 40 : r < 7 ? 7 : (int)r;
}

/* Two barriers: the ranks leave one barrier up to ~100 us apart here (the
 * last to arrive leaves late), which a small message's time would take in;
 * leaving the second they are close. */
static void sync_ranks(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
}

static int worker(int64_t max_bytes) {
  lt_world *w = NULL;
  if (lt_world_mpi(&w) != LT_OK) die("lt_world_mpi");
  lt_device dev = lt_cpu(0);
  int rank = lt_world_rank(w);
  for (int64_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    int64_t n = bytes / 4;
    float *host = malloc((size_t)bytes), *out = malloc((size_t)bytes);
    if (!host || !out) die("malloc");
    for (int64_t i = 0; i < n; i++) host[i] = (float)(i % 97) + (float)rank;
    lt_tensor *x = lt_from_data(dev, LT_F32, &n, 1, host);
    if (!x || lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) die("upload");
    int reps = repeats_for(bytes);
    /* The first ~100 calls of a TCP run here took ~200 us each, later ones
     * ~25 us (connections and buffers warming up): the first size warms up
     * longer. */
    int warm = bytes == 4 ? FIRST_WARMUP : WARMUP;
    double ours[64], mpi[64];
    for (int r = -warm; r < reps; r++) {
      /* ours: trace, step, wait (the first one compiles: warm-up) */
      sync_ranks();
      double t0 = bench_now_ms();
      lt_scope_begin();
      lt_tensor *y = lt_all_reduce(x, LT_REDUCE_SUM);
      int rc = y ? lt_mark_step(dev) : lt_last_status();
      if (rc == LT_OK) rc = lt_wait_device_ops(dev);
      lt_scope_end();
      double t1 = bench_now_ms();
      if (rc != LT_OK) die("all_reduce");
      /* the peer: the same sum by MPI itself */
      sync_ranks();
      double t2 = bench_now_ms();
      if (MPI_Allreduce(host, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        die("MPI_Allreduce");
      double t3 = bench_now_ms();
      if (r >= 0) ours[r] = (t1 - t0) * 1e3, mpi[r] = (t3 - t2) * 1e3;
    }
    /* the sum is 2 (i mod 97) + 1: host + 1 on rank 0, host - 1 on rank 1 (a
     * broken transport must not be timed) */
    if (fabsf(out[n - 1] - (2 * host[n - 1] + (rank ? -1.0f : 1.0f))) > 0) {
      fprintf(stderr, "bench allreduce: MPI_Allreduce gave %g\n", (double)out[n - 1]);
      return 1;
    }
    if (rank == 0)
      printf("point %lld %.3f %.3f\n", (long long)bytes, bench_median(ours, reps),
             bench_median(mpi, reps));
    fflush(stdout);
    lt_release(x);
    free(host);
    free(out);
  }
  /* Inside a graph: a training step's all-reduces are nodes of its one
   * graph, so they do not each pay a trace and a dispatch. A chain of
   * IN_GRAPH 4-byte all-reduces against a single one: the difference per
   * extra call is what one more collective in a step costs. */
  float one = 1;
  int64_t n1 = 1;
  lt_tensor *x = lt_from_data(dev, LT_F32, &n1, 1, &one);
  if (!x || lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) die("upload");
  double chain[2][40];
  for (int r = -WARMUP; r < 40; r++)
    for (int c = 0; c < 2; c++) {
      sync_ranks();
      double t0 = bench_now_ms();
      lt_scope_begin();
      lt_tensor *y = x;
      for (int k = 0; k < (c ? IN_GRAPH : 1) && y; k++) y = lt_all_reduce(y, LT_REDUCE_SUM);
      int rc = y ? lt_mark_step(dev) : lt_last_status();
      if (rc == LT_OK) rc = lt_wait_device_ops(dev);
      lt_scope_end();
      if (rc != LT_OK) die("all_reduce chain");
      if (r >= 0) chain[c][r] = (bench_now_ms() - t0) * 1e3;
    }
  if (rank == 0)
    printf("chain %.3f %.3f\n", bench_median(chain[0], 40), bench_median(chain[1], 40));
  lt_release(x);
  lt_world_free(w);
  return 0;
}

/* Runs the ranks with extra mpirun options; the points of rank 0 (n of
 * them), false when the run failed. */
static bool run_ranks(const char *self, const char *mca, int64_t max_bytes, double *bytes,
                      double *ours, double *mpi, int *n, double chain[2]) {
  char cmd[2 * PATH_MAX + 512];
  const char *mpirun = getenv("MPIRUN") ? getenv("MPIRUN") : "mpirun";
  snprintf(cmd, sizeof cmd,
           "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s --oversubscribe "
           "--bind-to none -np 2 %s '%s' --worker %lld 2>&1",
           mpirun, mca, self, (long long)max_bytes);
  FILE *p = popen(cmd, "r");
  char line[512];
  *n = 0;
  while (p && fgets(line, sizeof line, p)) {
    double b, o, m;
    if (sscanf(line, "point %lf %lf %lf", &b, &o, &m) == 3 && *n < MAX_POINTS)
      bytes[*n] = b, ours[*n] = o, mpi[*n] = m, (*n)++;
    else if (sscanf(line, "chain %lf %lf", &chain[0], &chain[1]) == 2)
      continue;
    else
      fputs(line, stderr);
  }
  return p && pclose(p) == 0 && *n >= 2;
}

/* Prints one transport's points and fits; sets the measured network of the
 * tables: the fitted per-byte term, and as latency the cost of one more
 * all-reduce inside a graph (a step's all-reduces are nodes of its graph;
 * the fitted intercept also holds a graph's trace and dispatch, which a
 * step pays once, in its compute time). */
static bool measure(const char *self, const char *label, const char *mca, int64_t max_bytes,
                    cost_net *net) {
  double S[MAX_POINTS], ours[MAX_POINTS], mpi[MAX_POINTS], chain[2] = {-1, -1};
  int n = 0;
  if (!run_ranks(self, mca, max_bytes, S, ours, mpi, &n, chain)) {
    printf("# %s: no MPI run (mpirun missing or failed, or the build has no MPI)\n",
           *label ? label : "shared memory");
    return false;
  }
  const char *tag = *label ? "_" : "";
  for (int i = 0; i < n; i++)
    printf("bench allreduce%s%s_%.0f %.1f us ratio %.2f vs mpi_allreduce\n", tag, label, S[i],
           ours[i], mpi[i] / ours[i]);
  double a, b, am, bm;
  if (!cost_fit_line(S, ours, n, &a, &b) || !cost_fit_line(S, mpi, n, &am, &bm)) return false;
  printf("bench allreduce%s%s_model alpha_us %.2f beta_ns_per_byte %.4f\n", tag, label, a, b * 1e3);
  printf("bench allreduce%s%s_model_mpi alpha_us %.2f beta_ns_per_byte %.4f\n", tag, label, am,
         bm * 1e3);
  if (!(b > 0)) { /* a quick run's few small sizes under noise */
    printf("# %s: the fit gave no positive per-byte term: not tabulated\n",
           *label ? label : "shared memory");
    return false;
  }
  double call = (chain[1] - chain[0]) / (IN_GRAPH - 1);
  if (chain[0] > 0 && call > 0) {
    printf("bench allreduce%s%s_in_graph %.2f us ratio %.2f vs mpi_allreduce\n", tag, label, call,
           am / call);
    printf(
        "# %s: one more 4-byte all-reduce in a graph: %.2f us (%d chained in one graph %.1f "
        "us, one alone %.1f us); mpi's fitted alpha %.2f us\n",
        *label ? label : "shared memory", call, IN_GRAPH, chain[1], chain[0], am);
  } else {
    call = a; /* no chain measured: the whole intercept, an over-estimate */
  }
  printf(
      "# %s: the tables use ring alpha = %.2f / 2 = %.2f us per step and beta = %.4f ns/byte "
      "(%.2f GB/s)\n",
      *label ? label : "shared memory", call, call / 2, b * 1e3, 1e-3 / b);
  *net = cost_net_from_fit(*label ? "loopback tcp, ours" : "shared memory, ours", call, b);
  return true;
}

#endif

/* ---- part 2: one process's steps ------------------------------------------------------------ */
static double params_bytes(lt_tensor *const *p, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)lt_numel(p[i]) * 4;
  return s;
}

/* The all-reduces lt_dp_optim_step makes for these f32 parameters: one per
 * gradient of LT_DP_SMALL_GRAD_BYTES or more, and one per 64 smaller ones
 * (concatenated). Sets w's calls and its last bucket: the first parameter
 * (the first layer's weight, produced last by backward) when it goes alone,
 * plus the small gradients' buckets, which wait for the first layer's bias. */
static void dp_calls(cost_workload *w, lt_tensor *const *p, int n) {
  int large = 0, small = 0;
  double small_bytes = 0;
  for (int i = 0; i < n; i++) {
    double b = (double)lt_numel(p[i]) * 4;
    if (b >= LT_DP_SMALL_GRAD_BYTES) {
      large++;
    } else {
      small++;
      small_bytes += b;
    }
  }
  int buckets = (small + 63) / 64;
  bool first_alone = n > 0 && (double)lt_numel(p[0]) * 4 >= LT_DP_SMALL_GRAD_BYTES;
  w->calls = large + buckets;
  w->last_calls = buckets + (first_alone ? 1 : 0);
  w->last_bytes = small_bytes + (first_alone ? (double)lt_numel(p[0]) * 4 : 0);
}

/* Median step time (us) of `step` after WARMUP: the time between successive
 * lt_mark_step returns, the steady-state cost with asynchronous execution. */
typedef lt_tensor *(*step_fn)(void *ctx);
static double time_steps(lt_device dev, step_fn step, void *ctx) {
  double t[WARMUP + STEPS], last = bench_now_ms();
  for (int s = 0; s < WARMUP + STEPS; s++) {
    lt_scope_begin();
    lt_tensor *loss = step(ctx);
    lt_scope_end();
    if (!loss || lt_mark_step(dev) != LT_OK) die("step");
    double now = bench_now_ms();
    t[s] = now - last;
    last = now;
  }
  if (lt_wait_device_ops(dev) != LT_OK) die("wait");
  return bench_median(t + WARMUP, STEPS) * 1e3;
}

typedef struct image_ctx {
  bench_mlp *mlp;
  train_model *cnn;
  lt_nn_optim *opt;
  lt_tensor *x, *y;
} image_ctx;

static lt_tensor *mlp_step(void *c) {
  image_ctx *k = c;
  return bench_mlp_step(k->mlp, k->x, k->y);
}

static lt_tensor *cnn_step(void *c) {
  image_ctx *k = c;
  lt_tensor *loss = lt_nn_cross_entropy(k->cnn->forward(k->cnn, k->x, true), k->y);
  if (!loss || lt_backward(loss) != LT_OK || lt_nn_optim_step(k->opt) != LT_OK) return NULL;
  return loss;
}

static lt_tensor *gpt_step(void *c) { return gpt_trainer_step(c); }

/* Pseudo-random pixels and labels of `batch` images on dev (the step time
 * does not depend on the data). */
static void image_batch(lt_device dev, int batch, lt_tensor **x, lt_tensor **y) {
  float *px = malloc((size_t)batch * MLP_FEATURES * sizeof *px);
  int64_t *py = malloc((size_t)batch * sizeof *py);
  if (!px || !py) die("malloc");
  uint32_t s = 7;
  for (int i = 0; i < batch * MLP_FEATURES; i++) {
    s = s * 1664525u + 1013904223u;
    px[i] = (float)(s >> 24) / 255.0f;
  }
  for (int i = 0; i < batch; i++) py[i] = i % MLP_CLASSES;
  const int64_t xs[2] = {batch, MLP_FEATURES}, ys[1] = {batch};
  *x = lt_from_data(dev, LT_F32, xs, 2, px);
  *y = lt_from_data(dev, LT_I64, ys, 1, py);
  free(px);
  free(py);
  if (!*x || !*y) die("batch");
}

/* Random bytes of 96 values standing in for the fortunes when absent. */
static void stand_in_text(lt_nn_text *t) {
  memset(t, 0, sizeof *t);
  t->n = 1 << 16;
  t->bytes = malloc((size_t)t->n);
  t->ids = malloc((size_t)t->n);
  if (!t->bytes || !t->ids) die("malloc");
  uint64_t r = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < t->n; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    t->ids[i] = (uint8_t)((r >> 33) % 96);
    t->bytes[i] = (uint8_t)(32 + t->ids[i]);
  }
  for (int i = 0; i < 96; i++) t->vocab[i] = (uint8_t)(32 + i);
  t->vocab_size = 96;
  t->n_train = t->n * 9 / 10;
}

/* The three workloads: measured compute, counted parameters, and the
 * all-reduces lt_dp_optim_step makes of them (dp_calls). */
static void measure_workloads(cost_workload w[3]) {
  lt_device dev = lt_cpu(0);
  lt_set_seed(dev, 1);
  image_ctx k = {0};
  bench_mlp mlp;
  if (bench_mlp_init(&mlp, dev, 512) != LT_OK) die("mlp");
  image_batch(dev, MLP_BATCH, &k.x, &k.y);
  if (lt_mark_step(dev) != LT_OK) die("init");
  k.mlp = &mlp;
  w[0] = (cost_workload){.name = "mlp",
                         .compute_us = time_steps(dev, mlp_step, &k),
                         .grad_bytes = params_bytes(mlp.params, 6),
                         .tensors = 6,
                         .batch = MLP_BATCH};
  dp_calls(&w[0], mlp.params, 6);
  bench_mlp_free(&mlp);

  train_model cnn;
  if (model_cnn_init(&cnn, dev, 28, 28, MLP_CLASSES) != LT_OK) die("cnn");
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  if (!(k.opt = lt_nn_optim_create(&oc, cnn.params, cnn.nparams))) die("optimizer");
  if (lt_mark_step(dev) != LT_OK) die("init");
  k.cnn = &cnn;
  w[1] = (cost_workload){.name = "cnn",
                         .compute_us = time_steps(dev, cnn_step, &k),
                         .grad_bytes = params_bytes(cnn.params, cnn.nparams),
                         .tensors = cnn.nparams,
                         .batch = CNN_BATCH};
  dp_calls(&w[1], cnn.params, cnn.nparams);
  lt_nn_optim_free(k.opt);
  cnn.free(&cnn);
  lt_release(k.x);
  lt_release(k.y);

  lt_nn_text text;
  if (lt_nn_text_load(NULL, &text) != LT_OK) stand_in_text(&text);
  gpt_config c = {text.vocab_size, 64, 128, 4, 4, 4, false};
  gpt_trainer tr;
  if (gpt_trainer_init(&tr, dev, &text, &c, GPT_BATCH, 1e-3, 0.1, 1.0, 1) != LT_OK) die("gpt");
  if (lt_mark_step(dev) != LT_OK) die("init");
  w[2] = (cost_workload){.name = "gpt",
                         .compute_us = time_steps(dev, gpt_step, &tr),
                         .grad_bytes = params_bytes(tr.m.params, tr.m.nparams),
                         .tensors = tr.m.nparams,
                         .batch = GPT_BATCH};
  dp_calls(&w[2], tr.m.params, tr.m.nparams);
  gpt_trainer_free(&tr);
  lt_nn_text_free(&text);
}

static void print_table(const cost_workload *w, const cost_net *nets, int nnets) {
  printf(
      "\n### %s: %.0f parameters (%.2f MB of f32 gradients) in %d tensors, %d all-reduces per "
      "step; last bucket %.3f MB; compute %.2f ms per step of %d samples\n\n",
      w->name, w->grad_bytes / 4, w->grad_bytes / 1e6, w->tensors, w->calls, w->last_bytes / 1e6,
      w->compute_us / 1e3, w->batch);
  printf(
      "| network | p | step ms | samples/s | efficiency | fused: step ms | eff. | overlap: "
      "step ms | eff. |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int k = 0; k < nnets; k++)
    for (int p = 2; p <= 64; p *= 2) {
      double s = cost_step_us(w, &nets[k], p, COST_NO_OVERLAP);
      double f = cost_step_us(w, &nets[k], p, COST_FUSED);
      double o = cost_step_us(w, &nets[k], p, COST_OVERLAP);
      printf("| %s | %d | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", nets[k].name, p,
             s / 1e3, cost_samples_per_s(w, p, s), cost_efficiency(w, s), f / 1e3,
             cost_efficiency(w, f), o / 1e3, cost_efficiency(w, o));
    }
}

/* bench/data_parallel beside this program: its 2-process MLP throughput. */
static void check_p2(const char *self, const cost_workload *mlp, const cost_net *shm) {
  char cmd[PATH_MAX + 64], dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", self);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  snprintf(cmd, sizeof cmd, "'%s/data_parallel' 2>&1", dir);
  FILE *p = popen(cmd, "r");
  char line[512];
  double dp = -1;
  while (p && fgets(line, sizeof line, p))
    if (sscanf(line, "bench data_parallel_mlp %lf", &dp) != 1) fputs(line, stderr);
  if (p) pclose(p);
  if (dp <= 0) {
    printf("# check: bench/data_parallel gave no 2-process figure\n");
    return;
  }
  /* its ranks step 128 samples each: 256 per step of the pair */
  double measured = 2.0 * MLP_BATCH / dp * 1e6,
         predicted = cost_step_us(mlp, shm, 2, COST_NO_OVERLAP);
  printf(
      "bench allreduce_check_p2 %.3f ms ratio %.2f vs data_parallel_measured (model: %.3f ms, "
      "measured %.3f ms per step)\n",
      predicted / 1e3, measured / predicted, predicted / 1e3, measured / 1e3);
}

int main(int argc, char **argv) {
  setenv("LT_NUM_THREADS", "1", 1);
  int64_t max_bytes = (int64_t)64 << 20;
  bool no_mpi = false, check = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--worker") && i + 1 < argc) {
#ifdef LT_HAVE_MPI
      return worker(atoll(argv[i + 1]));
#else
      return 1;
#endif
    } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
      max_bytes = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      setenv("LT_NUM_THREADS", argv[++i], 1);
    } else if (!strcmp(argv[i], "--no-mpi")) {
      no_mpi = true;
    } else if (!strcmp(argv[i], "--check")) {
      check = true;
    } else {
      fprintf(stderr, "usage: allreduce [--max-bytes N] [--threads N] [--no-mpi] [--check]\n");
      return 2;
    }
  }
  if (max_bytes < 16) max_bytes = 16;
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    no_mpi = true;
  else
    self[len] = 0;
  /* the stated networks: 1 / bandwidth per byte, a typical TCP latency */
  const cost_net stated[2] = {{"10 GbE (alpha 50 us)", 50, 8.0 / 10e9 * 1e6},
                              {"100 GbE (alpha 20 us)", 20, 8.0 / 100e9 * 1e6}};
  cost_net nets[4];
  int nnets = 0;
  cost_net shm_ours = {0}, tcp_ours;
  bool have_shm = false;
#ifdef LT_HAVE_MPI
  if (!no_mpi) {
    /* the tables use our terms: what lt_dp_optim_step's all-reduces cost */
    if ((have_shm = measure(self, "", "", max_bytes, &shm_ours))) nets[nnets++] = shm_ours;
    if (measure(self, "tcp", "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo",
                max_bytes, &tcp_ours))
      nets[nnets++] = tcp_ours;
  }
#else
  (void)tcp_ours, (void)no_mpi;
  printf("# no MPI in this build: stated networks only\n");
#endif
  nets[nnets++] = stated[0], nets[nnets++] = stated[1];
  cost_workload w[3];
  measure_workloads(w);
  printf("# compute: one process, LT_NUM_THREADS=%s, median of %d steps after %d\n",
         getenv("LT_NUM_THREADS"), STEPS, WARMUP);
  for (int i = 0; i < 3; i++) print_table(&w[i], nets, nnets);
  if (check && have_shm) check_p2(self, &w[0], &shm_ours);
  return 0;
}
