/* Data-parallel training over MPI: the MLP of bench_mlp.h (784-512-512-10,
 * Adam) stepped by 2 processes x 1 thread at batch 128 per rank (gradients
 * averaged by all-reduces in the step graph) against 1 process x 1 thread
 * at batch 128, and the optimizer state that sharding it (ZeRO stage 1,
 * lt_dp_options.shard_optimizer) saves:
 *
 *   bench data_parallel_mlp <samples/s> samples/s ratio <r> vs one_process
 *   bench data_parallel_mlp_sharded_state <samples/s> samples/s ratio <r> vs one_process
 *   bench dp_optimizer_state_bytes <bytes> ratio <r> vs replicated (<where>)
 *   bench dp_sharded_vs_replicated max_abs_param_diff <d> after <k> steps (<where>)
 *
 * r = (samples/s of the 2 ranks together) / (samples/s of one process); 2 is
 * perfect scaling. The state bytes are those one replica's device holds
 * (lt_device_memory's live bytes before and after the optimizer's state is
 * made), ratio = replicated / sharded (2 is the most 2 ranks can save);
 * the parameter difference is between two copies of the model trained side
 * by side on each replica, with replicated and with sharded state. The
 * state lines come from 2 ranks in this process (lt_world_local), then
 * from the MPI run. The program measures one process itself, then runs
 * itself under `mpirun --oversubscribe -np 2` (MPIRUN overrides the
 * command) as the workers; rank 0 reports. Without mpirun (or a build
 * without MPI) it prints the one-process and in-process numbers only. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "bench_mlp.h"
#include "lazytensor_dist.h"

enum { BATCH = 128, HIDDEN = 512, WARMUP = 5, STEPS = 100, CHECK_STEPS = 5 };
/* How a run steps: one process alone, or a replica with replicated or
 * sharded optimizer state. */
typedef enum mode { ONE_PROCESS, DP_REPLICATED, DP_SHARDED } mode;

static void die(const char *what) {
  fprintf(stderr, "bench data_parallel: %s: %s\n", what, lt_last_error());
  exit(1);
}

/* A batch of BATCH rows, other rows on each rank (seed). */
static float *make_batch(uint32_t s, int64_t *y) {
  float *x = malloc((size_t)BATCH * MLP_FEATURES * sizeof *x);
  for (int i = 0; i < BATCH * MLP_FEATURES; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 24) / 255.0f;
  }
  for (int i = 0; i < BATCH; i++) y[i] = i % MLP_CLASSES;
  return x;
}

/* m's optimizer replaced by one for data parallelism (sharded or not). */
static void dp_optimizer(bench_mlp *m, bool sharded) {
  lt_nn_optim_free(m->opt);
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_dp_options opts = {.shard_optimizer = sharded};
  if (!(m->opt = lt_dp_optim_create(&oc, m->params, 6, &opts))) die("optimizer");
}

/* Traces one step of m on the batch (x, y) and runs it. */
static void step(bench_mlp *m, lt_device dev, mode md, const float *x, const int64_t *y) {
  const int64_t xs[2] = {BATCH, MLP_FEATURES}, ys[1] = {BATCH};
  lt_scope_begin();
  lt_tensor *h = lt_from_data(dev, LT_F32, xs, 2, x);
  lt_tensor *yt = lt_from_data(dev, LT_I64, ys, 1, y);
  for (int k = 0; k < 3; k++) {
    h = lt_nn_linear_forward(&m->layer[k], h);
    if (k < 2) h = lt_nn_relu(h);
  }
  lt_tensor *loss = lt_nn_cross_entropy(h, yt);
  int rc = loss ? lt_backward(loss) : lt_last_status();
  if (rc == LT_OK) rc = md == ONE_PROCESS ? lt_nn_optim_step(m->opt) : lt_dp_optim_step(m->opt);
  lt_scope_end();
  if (rc == LT_OK) rc = lt_mark_step(dev);
  if (rc != LT_OK) die("step");
}

/* samples/s of STEPS steps on dev at BATCH rows. */
static double run_steps(lt_device dev, mode md) {
  int64_t y[BATCH];
  float *x = make_batch(7, y);
  bench_mlp m;
  lt_set_seed(dev, 1);
  if (bench_mlp_init(&m, dev, HIDDEN) != LT_OK) die("init");
  if (md != ONE_PROCESS) dp_optimizer(&m, md == DP_SHARDED);
  if ((md != ONE_PROCESS && lt_dp_broadcast_params(m.params, 6)) || lt_mark_step(dev) != LT_OK)
    die("init");
  double t0 = 0;
  for (int i = 0; i < WARMUP + STEPS; i++) {
    if (i == WARMUP) {
      lt_wait_device_ops(dev);
      t0 = bench_now_ms();
    }
    step(&m, dev, md, x, y);
  }
  if (lt_wait_device_ops(dev) != LT_OK) {
    fprintf(stderr, "bench data_parallel: %s\n", lt_last_error());
    exit(1);
  }
  double ms = bench_now_ms() - t0;
  bench_mlp_free(&m);
  free(x);
  return (double)STEPS * BATCH / (ms / 1e3);
}

/* One replica's optimizer state, replicated and sharded, and how far the
 * two trainings part. */
typedef struct state_check {
  int64_t replicated, sharded; /* device bytes */
  double max_diff;             /* max |difference| of the parameters */
} state_check;

static int64_t live_bytes(lt_device dev) {
  int64_t live = 0;
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK ||
      lt_device_memory(dev, &live, NULL) != LT_OK)
    die("memory");
  return live;
}

/* Two copies of the model from one seed, a with replicated state and b with
 * sharded state, CHECK_STEPS steps each on this rank's batches. */
static void check_state(lt_device dev, int rank, state_check *out) {
  bench_mlp a, b;
  lt_set_seed(dev, 1);
  if (bench_mlp_init(&a, dev, HIDDEN) != LT_OK) die("init");
  lt_set_seed(dev, 1);
  if (bench_mlp_init(&b, dev, HIDDEN) != LT_OK) die("init");
  lt_nn_optim_free(a.opt); /* never made on the device: its state was pending */
  lt_nn_optim_free(b.opt);
  a.opt = b.opt = NULL;
  if (lt_dp_broadcast_params(a.params, 6) || lt_dp_broadcast_params(b.params, 6)) die("init");
  int64_t before = live_bytes(dev);
  dp_optimizer(&a, false);
  int64_t mid = live_bytes(dev);
  dp_optimizer(&b, true);
  out->replicated = mid - before;
  out->sharded = live_bytes(dev) - mid;
  int64_t y[BATCH];
  for (int t = 0; t < CHECK_STEPS; t++) {
    float *x = make_batch(100u * (uint32_t)t + (uint32_t)rank, y);
    step(&a, dev, DP_REPLICATED, x, y);
    step(&b, dev, DP_SHARDED, x, y);
    free(x);
  }
  out->max_diff = 0;
  for (int k = 0; k < 6; k++) {
    int64_t n = lt_numel(a.params[k]);
    float *va = malloc((size_t)n * sizeof *va), *vb = malloc((size_t)n * sizeof *vb);
    if (lt_to_data(a.params[k], va, (size_t)n * sizeof *va) ||
        lt_to_data(b.params[k], vb, (size_t)n * sizeof *vb))
      die("read");
    for (int64_t i = 0; i < n; i++)
      if (fabs((double)va[i] - vb[i]) > out->max_diff) out->max_diff = fabs((double)va[i] - vb[i]);
    free(va);
    free(vb);
  }
  bench_mlp_free(&a);
  bench_mlp_free(&b);
}

static void print_state(const state_check *c, const char *where) {
  printf("bench dp_optimizer_state_bytes %lld ratio %.2f vs replicated (%s; replicated %lld)\n",
         (long long)c->sharded, (double)c->replicated / (double)c->sharded, where,
         (long long)c->replicated);
  printf("bench dp_sharded_vs_replicated max_abs_param_diff %.3g after %d steps (%s)\n",
         c->max_diff, CHECK_STEPS, where);
}

static int local_replica(int rank, lt_device dev, void *arg) {
  check_state(dev, rank, (state_check *)arg + rank);
  return LT_OK;
}

/* The state check on 2 ranks of this process. */
static void check_in_process(void) {
  lt_world *w = NULL;
  state_check c[2];
  if (lt_world_local(2, &w) != LT_OK || lt_world_run(w, local_replica, c) != LT_OK)
    die("in-process world");
  lt_world_free(w);
  if (c[1].max_diff > c[0].max_diff) c[0].max_diff = c[1].max_diff;
  print_state(&c[0], "2 ranks in process");
}

static int worker(void) {
  lt_world *w = NULL;
  if (lt_world_mpi(&w) != LT_OK) {
    fprintf(stderr, "bench data_parallel: %s\n", lt_last_error());
    return 1;
  }
  double per_rank = run_steps(lt_cpu(0), DP_REPLICATED);
  double sharded = run_steps(lt_cpu(0), DP_SHARDED);
  state_check c;
  check_state(lt_cpu(0), lt_world_rank(w), &c);
  /* every rank steps the same count in lockstep: rank 0's rate times the size */
  if (lt_world_rank(w) == 0) {
    printf("dp_samples_per_s %.3f %.3f\n", per_rank * lt_world_size(w), sharded * lt_world_size(w));
    printf("dp_state %lld %lld %.9g\n", (long long)c.replicated, (long long)c.sharded, c.max_diff);
  }
  fflush(stdout);
  lt_world_free(w);
  return 0;
}

int main(void) {
  setenv("LT_NUM_THREADS", "1", 1);
  if (getenv("OMPI_COMM_WORLD_SIZE")) return worker();
  double one = run_steps(lt_cpu(0), ONE_PROCESS);
  check_in_process();
  fflush(stdout);
  char self[PATH_MAX], cmd[2 * PATH_MAX + 128];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  const char *mpirun = getenv("MPIRUN") ? getenv("MPIRUN") : "mpirun";
  double dp = -1, dp_sharded = -1;
  state_check mpi = {0, 0, 0};
  long long rep = 0, sh = 0;
  if (n > 0) {
    self[n] = 0;
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s --oversubscribe "
             "--bind-to none -np 2 '%s' 2>&1",
             mpirun, self);
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof line, p))
      if (sscanf(line, "dp_samples_per_s %lf %lf", &dp, &dp_sharded) == 2) {
      } else if (sscanf(line, "dp_state %lld %lld %lf", &rep, &sh, &mpi.max_diff) == 3) {
        mpi.replicated = rep;
        mpi.sharded = sh;
      } else {
        fputs(line, stderr);
      }
    if (p && pclose(p) != 0) dp = -1;
  }
  if (dp <= 0) {
    printf(
        "bench data_parallel_one_process %.1f samples/s (no MPI run: mpirun missing, or "
        "the build has no MPI)\n",
        one);
    return 0;
  }
  printf("bench data_parallel_mlp %.1f samples/s ratio %.2f vs one_process\n", dp, dp / one);
  printf("bench data_parallel_mlp_sharded_state %.1f samples/s ratio %.2f vs one_process\n",
         dp_sharded, dp_sharded / one);
  if (mpi.sharded > 0) print_state(&mpi, "mpirun -np 2");
  return 0;
}
