/* lazytensor-soak: trains a small MLP (32-64-10, Adam, batch 32, synthetic
 * data) for many steps with a loss read every 100 steps, and checks that the
 * process's resident memory (RSS, /proc/self/statm) and the device's live
 * tensor count stay flat after warm-up.
 *
 *   lazytensor-soak [steps (20000)] [max RSS growth in KiB (4096)]
 *
 * The backend is the library's (LT_BACKEND). Prints one line of figures;
 * exits 1 when RSS grew by more than the bound or live tensors grew at all
 * between the warm-up mark (step 1000, or steps / 10 when fewer) and the end,
 * and 2 when a library call fails (set-up or a training step: a failure of
 * the backend, never "backend unavailable"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"

enum { IN = 32, HID = 64, OUT = 10, BATCH = 32, NBATCH = 8, NPARAM = 4 };

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A counter's value (-1 for an unknown name). */
static long long counter(const char *name) {
  int64_t v = -1;
  lt_get_counter(name, &v);
  return (long long)v;
}

static int die(const char *what) {
  fprintf(stderr, "soak: %s: %s\n", what, lt_last_error());
  return 2;
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf(
        "usage: lazytensor-soak [STEPS (20000) [MAX_RSS_GROWTH_KIB (4096)]]\n"
        "Trains a small MLP for STEPS steps and fails (1) when RSS or the live\n"
        "tensor count grows after warm-up.\n");
    return 0;
  }
  long steps = argc > 1 ? atol(argv[1]) : 20000;
  long max_growth = argc > 2 ? atol(argv[2]) : 4096;
  if (steps < 10) steps = 10;
  long mark = steps >= 10000 ? 1000 : steps / 10;
  const char *backend = getenv("LT_BACKEND") ? getenv("LT_BACKEND") : "default";
  lt_device dev = lt_cpu(0);

  static float x[NBATCH][BATCH * IN];
  static int64_t y[NBATCH][BATCH];
  uint32_t s = 42;
  for (int b = 0; b < NBATCH; b++) {
    for (int i = 0; i < BATCH * IN; i++) {
      s = s * 1664525u + 1013904223u;
      x[b][i] = (float)((s >> 8) & 0xffff) / 65536.0f;
    }
    for (int i = 0; i < BATCH; i++) { /* a learnable label: the argmax of the first 10 */
      int best = 0;
      for (int k = 1; k < OUT; k++)
        if (x[b][i * IN + k] > x[b][i * IN + best]) best = k;
      y[b][i] = best;
    }
  }

  lt_set_seed(dev, 1);
  lt_nn_linear l1, l2;
  if (lt_nn_linear_init(&l1, dev, LT_F32, IN, HID, true) != LT_OK ||
      lt_nn_linear_init(&l2, dev, LT_F32, HID, OUT, true) != LT_OK)
    return die("init");
  lt_tensor *params[NPARAM] = {l1.weight, l1.bias, l2.weight, l2.bias};
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 1e-3;
  lt_nn_optim *opt = lt_nn_optim_create(&cfg, params, NPARAM);
  if (!opt || lt_nn_params_sync(params, NPARAM) != LT_OK) return die("optimizer");

  long rss0 = 0;
  int64_t live0 = 0;
  float first_loss = -1, last_loss = -1;
  double t0 = now_s(), t_mark = t0;
  for (long step = 1; step <= steps; step++) {
    const int b = (int)(step % NBATCH);
    lt_scope_begin();
    lt_tensor *xt = lt_from_data(dev, LT_F32, (int64_t[]){BATCH, IN}, 2, x[b]);
    lt_tensor *yt = lt_from_data(dev, LT_I64, (int64_t[]){BATCH}, 1, y[b]);
    lt_tensor *logits = lt_nn_linear_forward(&l2, lt_nn_relu(lt_nn_linear_forward(&l1, xt)));
    lt_tensor *loss = lt_nn_cross_entropy(logits, yt);
    int rc = loss ? LT_OK : lt_last_status();
    if (rc == LT_OK) rc = lt_backward(loss);
    if (rc == LT_OK) rc = lt_nn_optim_step(opt);
    if (rc == LT_OK) rc = lt_mark_step(dev);
    if (rc == LT_OK && step % 100 == 0) {
      rc = lt_to_data(loss, &last_loss, sizeof last_loss);
      if (first_loss < 0) first_loss = last_loss;
    }
    lt_scope_end();
    if (rc != LT_OK) return die("step");
    if (step == mark) {
      if (lt_wait_device_ops(dev) != LT_OK) return die("wait");
      rss0 = rss_kib();
      live0 = lt_device_live_tensors(dev);
      t_mark = now_s();
    }
  }
  if (lt_wait_device_ops(dev) != LT_OK) return die("wait");
  double t1 = now_s();
  long rss1 = rss_kib();
  int64_t live1 = lt_device_live_tensors(dev);
  printf("soak: backend %s, %ld steps (%.1f us/step after warm-up), loss %.4f -> %.4f\n", backend,
         steps, (t1 - t_mark) / (double)(steps - mark) * 1e6, first_loss, last_loss);
  printf("soak: RSS at step %ld: %ld KiB, at the end: %ld KiB (growth %ld KiB, bound %ld)\n", mark,
         rss0, rss1, rss1 - rss0, max_growth);
  printf("soak: live tensors at step %ld: %lld, at the end: %lld\n", mark, (long long)live0,
         (long long)live1);
  printf("soak: compiles %lld (cached %lld)\n", counter("UncachedCompile"),
         counter("CachedCompile"));
  lt_nn_optim_free(opt);
  lt_nn_linear_free(&l1);
  lt_nn_linear_free(&l2);
  int bad = 0;
  if (rss1 - rss0 > max_growth) {
    fprintf(stderr, "soak: FAIL: RSS grew by %ld KiB after warm-up\n", rss1 - rss0);
    bad = 1;
  }
  if (live1 > live0) {
    fprintf(stderr, "soak: FAIL: live tensors grew from %lld to %lld\n", (long long)live0,
            (long long)live1);
    bad = 1;
  }
  return bad;
}
