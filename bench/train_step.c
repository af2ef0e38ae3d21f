/* bench/train_step: median step time of the default MLP (784-512-512-10,
 * ReLU, Adam lr 1e-3, cross-entropy, batch 128) over 30 steps after 5 of
 * warm-up, on the first batches of Fashion-MNIST's test set (synthetic data
 * when absent), beside PyTorch's (bench/train_step_torch.py: same model,
 * data and settings, torch.set_num_threads equal to ours) run in the same
 * invocation. Prints
 *   bench train_step <ms> ms ratio <torch_ms / ours> vs torch
 *   bench train_step_peak_rss <MiB> MiB ratio <torch / ours> vs torch
 * (ratio > 1: lazytensor is better); without torch, our figures alone. The
 * peer runs at its best kernels: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset,
 * ATEN_CPU_CAPABILITY the processor's best (bench_torch_python, printed as
 * `# torch peer: ...`).
 * Threads: --threads N, else $LT_NUM_THREADS, else every CPU this process may
 * run on (the library's default), exported to both. PyTorch also runs at
 * each thread count from 1 to ours, and its fastest is the second peer:
 *   bench train_step_best <ms> ms ratio <torch_best_ms / ours> vs torch_best
 * --model cnn times lazytensor-train's CNN instead (tools/train/model_cnn.c:
 * conv / batch norm / ReLU / max-pool twice, linear, dropout, linear; training
 * mode), against the same CNN in torch, and prints the same three lines named
 * train_step_cnn, train_step_cnn_best and train_step_cnn_peak_rss.
 * --model gpt times lazytensor-train's GPT step (tools/train/train_gpt.c:
 * forward, cross-entropy over [B*T, V], backward, clipping, AdamW; batch 32
 * random windows of 64 characters of Debian's fortunes, random bytes when
 * absent) as train_step_gpt, train_step_gpt_best and train_step_gpt_peak_rss,
 * and the trace of one step against its execution:
 *   bench train_step_gpt_trace <ms> ms ratio <trace / execute> vs exec
 * trace: from the step's first op to lt_mark_step's return (tracing, graph
 * hashing, the cache lookup, queueing), measured on steps that start with the
 * device idle; exec: the executions' mean ExecuteTime over those steps.
 * After those lines, each model prints its model FLOPs utilisation:
 *   bench train_step_<model>_mfu <GFLOP/s> ratio <mfu> vs fma_peak
 * (<model>: mlp, cnn or gpt): the FLOPs of a step from the executor's cost
 * analysis (the ExecutedFlops counter over the run's steps, docs/COST.md)
 * per median step time, in GFLOP/s, and that over the FMA peak of the
 * threads used (lt_get_fma_peak: threads x one core's measured peak).
 * --precision bf16 times the same step with its forward and loss under
 * autocast (bf16 products and convolutions, f32 parameters and optimizer
 * state; lazytensor-train --precision bf16), against the f32 step measured
 * in a child process of this program (same model, threads and data; its own
 * process so that each peak RSS is its own), and prints instead of the lines
 * above
 *   bench train_step_<model>_bf16 <ms> ms ratio <f32_ms / bf16_ms> vs f32 isa <isa>
 *   bench train_step_<model>_bf16_peak_rss <MiB> MiB ratio <f32 / bf16> vs f32
 * (train_step_gpt_bf16, train_step_cnn_bf16, train_step_mlp_bf16)
 * (<isa>: lt_get_isa(dev, LT_BF16), the instruction set of the bf16
 * products: e.g. avx512_core_amx, or "avx2 (bf16 converted to f32)" where
 * the processor has no bf16 arithmetic). No torch peer runs then.
 * --no-peer: no torch peer (the f32 child runs so).
 * Backend: --backend ref|cpu, else $LT_BACKEND. A step's time is the wall
 * time between successive lt_mark_step returns: with asynchronous execution
 * that is the steady-state cost of a step (tracing overlaps the last one). */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_mlp.h"
#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "model.h"

#ifndef LT_SOURCE_DIR
#define LT_SOURCE_DIR "."
#endif

enum { WARMUP = 5, STEPS = 30, BATCH = 128, GPT_BATCH = 32, TRACE_STEPS = 7 };

static int die(const char *what) {
  fprintf(stderr, "train_step: %s: %s\n", what, lt_last_error());
  return 1;
}

typedef struct torch_run {
  double ms, rss_kb, loss;
  int threads;
} torch_run;

/* bench/train_step_torch.py at a thread count, at its best kernels
 * (bench_torch_python); ms < 0 when torch is absent. */
static torch_run run_torch(const char *threads, int64_t hidden, const char *data, const char *model,
                           const char *text) {
  torch_run r = {-1, -1, NAN, atoi(threads)};
  char cmd[1400];
  bool gpt = !strcmp(model, "gpt");
  snprintf(cmd, sizeof cmd,
           "%s '%s/bench/train_step_torch.py' --threads %s --hidden %lld --model %s%s "
           "%s%s%s%s 2>/dev/null",
           bench_torch_python(), LT_SOURCE_DIR, threads, (long long)hidden, model,
           gpt ? " --batch 32" : "", data && !gpt ? "--data " : "", data && !gpt ? data : "",
           text ? "--text " : "", text ? text : "");
  FILE *p = popen(cmd, "r");
  if (!p) return r;
  char line[256];
  while (fgets(line, sizeof line, p)) {
    sscanf(line, "median_ms %lf", &r.ms);
    sscanf(line, "peak_rss_kb %lf", &r.rss_kb);
    sscanf(line, "final_loss %lf", &r.loss);
  }
  pclose(p);
  return r;
}

/* The bench lines of a step against torch at the same thread count (peer)
 * and at its best one; ours alone when torch is absent (peer->ms < 0). */
static void print_step_lines(const char *name, double ours, double our_rss, const torch_run *peer,
                             const torch_run *best, const char *threads) {
  if (peer->ms > 0) {
    printf("bench %s %.3f ms ratio %.2f vs torch\n", name, ours, peer->ms / ours);
    printf("bench %s_best %.3f ms ratio %.2f vs torch_best\n", name, ours, best->ms / ours);
    if (peer->rss_kb > 0)
      printf("bench %s_peak_rss %.1f MiB ratio %.2f vs torch\n", name, our_rss,
             peer->rss_kb / 1024.0 / our_rss);
    printf(
        "# torch: %.3f ms per step at %s threads, best %.3f ms at %d, peak RSS %.1f MiB, "
        "final loss %.4f\n",
        peer->ms, threads, best->ms, best->threads, peer->rss_kb / 1024.0, peer->loss);
    printf("# torch peer: %s\n", strstr(bench_torch_python(), "env "));
  } else {
    printf("bench %s %.3f ms\n", name, ours);
    printf("bench %s_peak_rss %.1f MiB\n", name, our_rss);
    printf("# torch not importable by python3: no peer figure\n");
  }
}

/* The f32 step of the same model, threads and data, timed by this program
 * in a child process (--precision f32 --no-peer): its median ms and peak
 * RSS (MiB) from its bench lines; ms < 0 when it failed. */
static void f32_child(const char *threads, const char *model, int64_t hidden, const char *data,
                      double *ms, double *rss) {
  *ms = *rss = -1;
  char cmd[1400];
  snprintf(cmd, sizeof cmd,
           "/proc/%d/exe --model %s --threads %s --hidden %lld --precision f32 --no-peer%s%s",
           (int)getpid(), model, threads, (long long)hidden, data ? " --data " : "",
           data ? data : "");
  FILE *p = popen(cmd, "r");
  if (!p) return;
  char line[256], name[96];
  double v;
  while (fgets(line, sizeof line, p)) {
    if (sscanf(line, "bench %95s %lf", name, &v) != 2) continue;
    if (strstr(name, "peak_rss"))
      *rss = v;
    else if (!strstr(name, "_mfu") && !strstr(name, "_trace"))
      *ms = v;
  }
  if (pclose(p) != 0) *ms = -1;
}

/* The bf16 lines, named name (train_step_gpt_bf16, ...): ours against the
 * f32 child's. */
static int print_bf16_lines(const char *name, double ours, double our_rss, double f32_ms,
                            double f32_rss, lt_device dev) {
  const char *isa = lt_get_isa(dev, LT_BF16);
  if (f32_ms <= 0) {
    fprintf(stderr, "train_step: the f32 child failed\n");
    return 1;
  }
  printf("bench %s %.3f ms ratio %.2f vs f32 isa %s\n", name, ours, f32_ms / ours, isa ? isa : "?");
  printf("bench %s_peak_rss %.1f MiB ratio %.2f vs f32\n", name, our_rss, f32_rss / our_rss);
  printf("# f32 (child process): %.3f ms per step, peak RSS %.1f MiB\n", f32_ms, f32_rss);
  return 0;
}

/* The executor's FLOPs so far (the cost analysis of every graph run). */
static double executed_flops(void) {
  lt_cost c = {0, 0};
  lt_get_executed_cost(&c);
  return c.flops;
}

/* The MFU line of a step of step_flops FLOPs and a median of ms. */
static void print_mfu(const char *model, double step_flops, double ms, const char *threads) {
  double peak = 0, one = 0;
  if (lt_get_fma_peak(atoi(threads), &peak) != LT_OK || lt_get_fma_peak(1, &one) != LT_OK) {
    printf("# no fma_peak: %s\n", lt_last_error());
    return;
  }
  double gflops = step_flops / (ms * 1e-3) / 1e9;
  printf("bench train_step_%s_mfu %.1f ratio %.3f vs fma_peak\n", model, gflops, gflops / peak);
  printf(
      "# mfu: %.3f GFLOP a step (cost analysis), %.1f GFLOP/s achieved; fma_peak %.1f GFLOP/s "
      "(%s thread(s) x one core's %.1f)\n",
      step_flops / 1e9, gflops, peak, threads, one);
}

/* One training step of the CNN (training mode: batch statistics, dropout);
 * the loss (owned by the open scope) or NULL. */
static lt_tensor *cnn_step(train_model *m, lt_nn_optim *opt, lt_tensor *x, lt_tensor *y) {
  lt_device dev = lt_get_device(x);
  if (model_precision_begin(m, dev) != LT_OK) return NULL;
  lt_tensor *loss = lt_nn_cross_entropy(m->forward(m, x, true), y);
  model_precision_end(m, dev);
  if (!loss || lt_backward(loss) != LT_OK || lt_nn_optim_step(opt) != LT_OK) return NULL;
  return loss;
}

/* A stand-in corpus when the fortunes are absent: random bytes of 96
 * values (the timing does not depend on the text). */
static int synthetic_text(lt_nn_text *t) {
  memset(t, 0, sizeof *t);
  int64_t n = 1 << 16;
  t->bytes = malloc((size_t)n);
  t->ids = malloc((size_t)n);
  if (!t->bytes || !t->ids) return LT_ENOMEM;
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t->ids[i] = (uint8_t)(x % 96);
    t->bytes[i] = (uint8_t)(32 + t->ids[i]);
  }
  for (int i = 0; i < 96; i++) t->vocab[i] = (uint8_t)(32 + i);
  t->vocab_size = 96;
  t->n = n;
  t->n_train = n * 9 / 10;
  t->files = 0;
  return LT_OK;
}

/* bench/train_step --model gpt: the step time, then the trace of a step
 * against its execution. */
static int gpt_main(const char *threads, const char *be, torch_run peer, torch_run best,
                    lt_dtype precision, double f32_ms, double f32_rss) {
  lt_device dev = lt_cpu(0);
  lt_set_seed(dev, 1);
  lt_nn_text text;
  bool real = lt_nn_text_load(NULL, &text) == LT_OK;
  if (!real && synthetic_text(&text) != LT_OK) return die("synthetic text");
  gpt_config c = {text.vocab_size, 64, 128, 4, 4, 4, false};
  gpt_trainer tr;
  if (gpt_trainer_init(&tr, dev, &text, &c, GPT_BATCH, 1e-3, 0.1, 1.0, 1) != LT_OK)
    return die("model");
  tr.m.precision = precision;
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) return die("init");
  double flops0 = executed_flops();
  double times[WARMUP + STEPS], last = bench_now_ms();
  lt_tensor *loss_keep = NULL;
  for (int s = 0; s < WARMUP + STEPS; s++) {
    lt_scope_begin();
    lt_tensor *loss = gpt_trainer_step(&tr);
    if (!loss) return die("step");
    lt_release(loss_keep);
    loss_keep = lt_retain(loss);
    lt_scope_end();
    if (lt_mark_step(dev) != LT_OK) return die("mark_step");
    double t = bench_now_ms();
    times[s] = t - last;
    last = t;
  }
  /* The trace alone: each step starts with the device idle, so that no wait
   * for the step before counts as tracing. */
  double trace[TRACE_STEPS];
  lt_metric_stats e0, e1;
  if (lt_wait_device_ops(dev) != LT_OK) return die("wait");
  double step_flops = (executed_flops() - flops0) / (WARMUP + STEPS);
  lt_get_metric("ExecuteTime", &e0);
  for (int s = 0; s < TRACE_STEPS; s++) {
    double t0 = bench_now_ms();
    lt_scope_begin();
    lt_tensor *loss = gpt_trainer_step(&tr);
    if (!loss) return die("step");
    lt_release(loss_keep);
    loss_keep = lt_retain(loss);
    lt_scope_end();
    if (lt_mark_step(dev) != LT_OK) return die("mark_step");
    trace[s] = bench_now_ms() - t0;
    if (lt_wait_device_ops(dev) != LT_OK) return die("wait");
  }
  lt_get_metric("ExecuteTime", &e1);
  double exec_ms =
      e1.count > e0.count ? (e1.total - e0.total) / 1e6 / (double)(e1.count - e0.count) : NAN;
  double trace_ms = bench_median(trace, TRACE_STEPS);
  double final_loss = NAN;
  lt_item(loss_keep, 0, &final_loss);
  lt_release(loss_keep);
  double ours = bench_median(times + WARMUP, STEPS);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double our_rss = (double)ru.ru_maxrss / 1024.0;
  printf(
      "# train_step: %s, backend %s, threads %s, model gpt (context 64, width 128, 4 layers, 4 "
      "heads, batch %d), uncached compiles %lld, final loss %.4f\n",
      real ? "fortunes" : "synthetic text", be && *be ? be : "default", threads, GPT_BATCH,
      counter("UncachedCompile"), final_loss);
  gpt_trainer_free(&tr);
  lt_nn_text_free(&text);
  if (precision == LT_BF16)
    return print_bf16_lines("train_step_gpt_bf16", ours, our_rss, f32_ms, f32_rss, dev);
  const char *name = "train_step_gpt";
  print_step_lines(name, ours, our_rss, &peer, &best, threads);
  printf("bench %s_trace %.3f ms ratio %.3f vs exec\n", name, trace_ms, trace_ms / exec_ms);
  printf("# trace: median of %d steps started on an idle device; exec: mean ExecuteTime %.3f ms\n",
         TRACE_STEPS, exec_ms);
  print_mfu("gpt", step_flops, ours, threads);
  return 0;
}

int main(int argc, char **argv) {
  const char *threads = getenv("LT_NUM_THREADS"), *backend = NULL, *data = NULL;
  int64_t hidden = 512;
  bool cnn = false, gpt = false, no_peer = false;
  lt_dtype precision = LT_F32;
  for (int i = 1; i < argc; i += 2) {
    if (!strcmp(argv[i], "--no-peer")) {
      no_peer = true;
      i--;
      continue;
    }
    if (i + 1 >= argc)
      argv[i] = "?"; /* an option without its value: the usage below */
    else if (!strcmp(argv[i], "--precision") &&
             (!strcmp(argv[i + 1], "f32") || !strcmp(argv[i + 1], "bf16"))) {
      precision = !strcmp(argv[i + 1], "bf16") ? LT_BF16 : LT_F32;
      continue;
    }
    if (!strcmp(argv[i], "--threads"))
      threads = argv[i + 1];
    else if (!strcmp(argv[i], "--backend"))
      backend = argv[i + 1];
    else if (!strcmp(argv[i], "--data"))
      data = argv[i + 1];
    else if (!strcmp(argv[i], "--hidden"))
      hidden = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--model") &&
             (!strcmp(argv[i + 1], "mlp") || !strcmp(argv[i + 1], "cnn") ||
              !strcmp(argv[i + 1], "gpt"))) {
      cnn = !strcmp(argv[i + 1], "cnn");
      gpt = !strcmp(argv[i + 1], "gpt");
    } else {
      fprintf(stderr,
              "usage: train_step [--threads N] [--backend ref|cpu] [--data DIR] "
              "[--hidden N] [--model mlp|cnn|gpt] [--precision f32|bf16] [--no-peer]\n");
      return 2;
    }
  }
  char all_cpus[16];
  if (!threads || atoi(threads) < 1) {
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    snprintf(all_cpus, sizeof all_cpus, "%d", n > 0 ? n : 1);
    threads = all_cpus;
  }
  setenv("LT_NUM_THREADS", threads, 1);
  if (backend) setenv("LT_BACKEND", backend, 1);
  if (!data) data = getenv("LT_DATA_DIR");
  if (!data) data = LT_NN_FASHION_MNIST_DIR;
  const char *be = getenv("LT_BACKEND");

  char probe[1024];
  snprintf(probe, sizeof probe, "%s/t10k-images-idx3-ubyte.gz", data);
  bool have_data = access(probe, R_OK) == 0;
  const char *model = gpt ? "gpt" : cnn ? "cnn" : "mlp";
  const char *text = gpt && access(LT_NN_FORTUNES_DIR, R_OK) == 0 ? LT_NN_FORTUNES_DIR : NULL;
  /* The peers first, in child processes, while none of our threads exist:
   * torch's f32 step, or for bf16 our own f32 step. */
  double f32_ms = -1, f32_rss = -1;
  if (precision == LT_BF16) {
    f32_child(threads, model, hidden, have_data ? data : NULL, &f32_ms, &f32_rss);
    no_peer = true;
  }
  torch_run peer = {-1, -1, NAN, atoi(threads)};
  if (!no_peer) peer = run_torch(threads, hidden, have_data ? data : NULL, model, text);
  torch_run best = peer;
  for (int t = 1; !no_peer && t < atoi(threads); t++) {
    char tb[16];
    snprintf(tb, sizeof tb, "%d", t);
    torch_run r = run_torch(tb, hidden, have_data ? data : NULL, model, text);
    if (r.ms > 0 && (best.ms <= 0 || r.ms < best.ms)) best = r, best.threads = t;
  }
  if (gpt) return gpt_main(threads, be, peer, best, precision, f32_ms, f32_rss);
  lt_device dev = lt_cpu(0);
  lt_set_seed(dev, 1);
  lt_nn_dataset ds;
  bool real = lt_nn_fashion_mnist(data, false, &ds) == LT_OK;
  if (!real) bench_synthetic(&ds, (WARMUP + STEPS) * BATCH);
  /* The model, Adam, and a loader in data order over the first batches. */
  bench_mlp m;
  train_model cm;
  lt_nn_optim *copt = NULL;
  if (cnn) {
    if (model_cnn_init(&cm, dev, ds.rows, ds.cols, MLP_CLASSES) != LT_OK) return die("model");
    cm.precision = precision;
    lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
    if (!(copt = lt_nn_optim_create(&oc, cm.params, cm.nparams))) return die("optimizer");
  } else if (bench_mlp_init(&m, dev, hidden) != LT_OK)
    return die("model");
  m.precision = precision;
  lt_nn_loader *loader = lt_nn_loader_create(&ds, dev, BATCH, false);
  if (!loader) return die("setup");
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) return die("init");
  int64_t nb = lt_nn_loader_epoch(loader);
  int64_t limit = (WARMUP + STEPS) < nb ? (WARMUP + STEPS) : nb;
  /* The batches are made before the timed loop, as the torch peer converts its
   * data to float tensors before its loop: both sides time the step alone. */
  lt_tensor *bx[WARMUP + STEPS], *by[WARMUP + STEPS];
  for (int64_t b = 0; b < limit; b++)
    if (lt_nn_loader_next(loader, &bx[b], &by[b]) != 1) return die("batch");
  /* host data: this step barrier uploads them all */
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) return die("upload");
  double flops0 = executed_flops();
  double times[WARMUP + STEPS], last = bench_now_ms();
  lt_tensor *loss_keep = NULL;
  for (int s = 0; s < WARMUP + STEPS; s++) {
    lt_scope_begin();
    lt_tensor *x = bx[s % limit], *y = by[s % limit];
    lt_tensor *loss = cnn ? cnn_step(&cm, copt, x, y) : bench_mlp_step(&m, x, y);
    if (!loss) return die("step");
    lt_release(loss_keep);
    loss_keep = lt_retain(loss);
    lt_scope_end();
    if (lt_mark_step(dev) != LT_OK) return die("mark_step");
    double t = bench_now_ms();
    times[s] = t - last;
    last = t;
  }
  if (lt_wait_device_ops(dev) != LT_OK) return die("wait");
  double step_flops = (executed_flops() - flops0) / (WARMUP + STEPS);
  double final_loss = NAN;
  lt_item(loss_keep, 0, &final_loss);
  lt_release(loss_keep);
  qsort(times + WARMUP, STEPS, sizeof(double), bench_cmp_double);
  double ours = times[WARMUP + STEPS / 2];
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double our_rss = (double)ru.ru_maxrss / 1024.0;
  if (cnn)
    printf(
        "# train_step: %s data, backend %s, threads %s, model cnn, uncached compiles %lld, "
        "final loss %.4f\n",
        real ? "Fashion-MNIST" : "synthetic", be && *be ? be : "default", threads,
        counter("UncachedCompile"), final_loss);
  else
    printf(
        "# train_step: %s data, backend %s, threads %s, hidden %lld, uncached compiles %lld, "
        "final loss %.4f\n",
        real ? "Fashion-MNIST" : "synthetic", be && *be ? be : "default", threads,
        (long long)hidden, counter("UncachedCompile"), final_loss);
  for (int64_t b = 0; b < limit; b++) {
    lt_release(bx[b]);
    lt_release(by[b]);
  }
  lt_nn_loader_free(loader);
  if (cnn) {
    lt_nn_optim_free(copt);
    cm.free(&cm);
  } else
    bench_mlp_free(&m);
  lt_nn_dataset_free(&ds);

  if (precision == LT_BF16)
    return print_bf16_lines(cnn ? "train_step_cnn_bf16" : "train_step_mlp_bf16", ours, our_rss,
                            f32_ms, f32_rss, dev);
  const char *name = cnn ? "train_step_cnn" : "train_step";
  print_step_lines(name, ours, our_rss, &peer, &best, threads);
  print_mfu(cnn ? "cnn" : "mlp", step_flops, ours, threads);
  return 0;
}
