/* Data-parallel training throughput over MPI: the MLP of bench_mlp.h
 * (784-512-512-10, Adam) stepped by 2 processes x 1 thread at batch 128 per
 * rank (gradients averaged by all-reduces in the step graph) against 1
 * process x 1 thread at batch 128:
 *
 *   bench data_parallel_mlp <samples/s> samples/s ratio <r> vs one_process
 *
 * r = (samples/s of the 2 ranks together) / (samples/s of one process); 2 is
 * perfect scaling. The program measures one process itself, then runs itself
 * under `mpirun --oversubscribe -np 2` (MPIRUN overrides the command) as the
 * workers; rank 0 reports. Without mpirun (or a build without MPI) it prints
 * the one-process number only. */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "bench_mlp.h"
#include "lazytensor_dist.h"

enum { BATCH = 128, HIDDEN = 512, WARMUP = 5, STEPS = 100 };

/* samples/s of STEPS steps on dev at BATCH rows (dp: lt_dp_optim_step). */
static double run_steps(lt_device dev, bool dp) {
  float *x = malloc((size_t)BATCH * MLP_FEATURES * sizeof *x);
  int64_t y[BATCH];
  uint32_t s = 7;
  for (int i = 0; i < BATCH * MLP_FEATURES; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 24) / 255.0f;
  }
  for (int i = 0; i < BATCH; i++) y[i] = i % MLP_CLASSES;
  bench_mlp m;
  lt_set_seed(dev, 1);
  if (bench_mlp_init(&m, dev, HIDDEN) != LT_OK || (dp && lt_dp_broadcast_params(m.params, 6)) ||
      lt_mark_step(dev) != LT_OK) {
    fprintf(stderr, "bench data_parallel: %s\n", lt_last_error());
    exit(1);
  }
  const int64_t xs[2] = {BATCH, MLP_FEATURES}, ys[1] = {BATCH};
  double t0 = 0;
  for (int i = 0; i < WARMUP + STEPS; i++) {
    if (i == WARMUP) {
      lt_wait_device_ops(dev);
      t0 = bench_now_ms();
    }
    lt_scope_begin();
    lt_tensor *xt = lt_from_data(dev, LT_F32, xs, 2, x);
    lt_tensor *yt = lt_from_data(dev, LT_I64, ys, 1, y);
    lt_tensor *h = xt;
    for (int k = 0; k < 3; k++) {
      h = lt_nn_linear_forward(&m.layer[k], h);
      if (k < 2) h = lt_nn_relu(h);
    }
    lt_tensor *loss = lt_nn_cross_entropy(h, yt);
    int rc = loss ? lt_backward(loss) : lt_last_status();
    if (rc == LT_OK) rc = dp ? lt_dp_optim_step(m.opt) : lt_nn_optim_step(m.opt);
    lt_scope_end();
    if (rc == LT_OK) rc = lt_mark_step(dev);
    if (rc != LT_OK) {
      fprintf(stderr, "bench data_parallel: step %d: %s\n", i, lt_last_error());
      exit(1);
    }
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

static int worker(void) {
  lt_world *w = NULL;
  if (lt_world_mpi(&w) != LT_OK) {
    fprintf(stderr, "bench data_parallel: %s\n", lt_last_error());
    return 1;
  }
  double per_rank = run_steps(lt_cpu(0), true);
  /* every rank steps the same count in lockstep: rank 0's rate times the size */
  if (lt_world_rank(w) == 0) printf("dp_samples_per_s %.3f\n", per_rank * lt_world_size(w));
  fflush(stdout);
  lt_world_free(w);
  return 0;
}

int main(void) {
  setenv("LT_NUM_THREADS", "1", 1);
  if (getenv("OMPI_COMM_WORLD_SIZE")) return worker();
  double one = run_steps(lt_cpu(0), false);
  char self[PATH_MAX], cmd[2 * PATH_MAX + 128];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  const char *mpirun = getenv("MPIRUN") ? getenv("MPIRUN") : "mpirun";
  double dp = -1;
  if (n > 0) {
    self[n] = 0;
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %s --oversubscribe "
             "--bind-to none -np 2 '%s' 2>&1",
             mpirun, self);
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof line, p))
      if (sscanf(line, "dp_samples_per_s %lf", &dp) != 1) fputs(line, stderr);
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
  return 0;
}
