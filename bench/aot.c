/* The MLP's inference (784-512-512-10, ReLU) at batch 1 and 128: a saved
 * program run by the JIT (lt_program_run, read back each time) against the
 * same program as an AOT object (lazytensor-aot; plain C loops, cc -O2):
 *
 *   bench aot_infer_b<B> <images/s> images/s ratio <aot / jit> vs jit
 *
 * The AOT object has no BLAS: at batch 128 its triple loops are expected to
 * lose to the JIT's GEMM, and the ratio says by how much. Needs a C compiler
 * (CC, default cc) and lazytensor-aot next to the bench directory. */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "bench_mlp.h"

static const double kSeconds = 0.5;

static double jit_images_per_s(lt_program *p, lt_tensor *x, int64_t batch) {
  float *out = malloc((size_t)batch * MLP_CLASSES * sizeof *out);
  double t0 = 0;
  long iters = 0;
  for (int i = -3;; i++) { /* three warm-up runs */
    if (i == 0) t0 = bench_now_ms();
    lt_tensor *y = NULL;
    if (lt_program_run(p, &x, 1, &y) != LT_OK ||
        lt_to_data(y, out, (size_t)batch * MLP_CLASSES * sizeof *out) != LT_OK) {
      fprintf(stderr, "bench aot: %s\n", lt_last_error());
      exit(1);
    }
    lt_release(y);
    if (i >= 0) iters++;
    if (i >= 0 && bench_now_ms() - t0 > kSeconds * 1e3) break;
  }
  free(out);
  return (double)iters * (double)batch / ((bench_now_ms() - t0) / 1e3);
}

/* The AOT side: lazytensor-aot, a driver that times NAME_run, its output. */
static double aot_images_per_s(const char *dir, const char *aot, const char *file, int64_t batch) {
  const char *cc = getenv("CC") ? getenv("CC") : "cc";
  char name[64], cmd[4 * PATH_MAX], path[PATH_MAX];
  snprintf(name, sizeof name, "mlp_b%lld", (long long)batch);
  snprintf(cmd, sizeof cmd, "'%s' '%s' -o '%s/%s' --cc '%s' >/dev/null", aot, file, dir, name, cc);
  if (system(cmd) != 0) return -1;
  snprintf(path, sizeof path, "%s/driver_%s.c", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(
      f,
      "#define _POSIX_C_SOURCE 199309L\n#include <stdio.h>\n#include <stdlib.h>\n#include "
      "<time.h>\n#include \"%s.h\"\n"
      "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);\n"
      "  return t.tv_sec + 1e-9 * t.tv_nsec; }\n"
      "int main(void) {\n"
      "  float *x = calloc(%s_INPUT_NUMEL, sizeof *x), *y = malloc(sizeof *y * %s_OUTPUT_NUMEL);\n"
      "  for (long i = 0; i < %s_INPUT_NUMEL; i++) x[i] = (float)((i * 7919) %% 256) / 255.0f;\n"
      "  for (int i = 0; i < 3; i++) %s_run(x, y);\n"
      "  double t0 = now(); long n = 0;\n"
      "  do { %s_run(x, y); n++; } while (now() - t0 < %g);\n"
      "  printf(\"%%.17g\\n\", n * %lld.0 / (now() - t0) + 0 * y[0]);\n"
      "  return 0;\n}\n",
      name, name, name, name, name, name, kSeconds, (long long)batch);
  fclose(f);
  snprintf(cmd, sizeof cmd, "'%s' -std=c11 -O2 -I'%s' '%s' '%s/%s.o' -lm -o '%s/driver_%s'", cc,
           dir, path, dir, name, dir, name);
  if (system(cmd) != 0) return -1;
  snprintf(cmd, sizeof cmd, "'%s/driver_%s'", dir, name);
  FILE *pp = popen(cmd, "r");
  double v = -1;
  if (!pp || fscanf(pp, "%lf", &v) != 1) v = -1;
  if (pp) pclose(pp);
  return v;
}

int main(void) {
  char self[PATH_MAX], aot[PATH_MAX + 32], dir[] = "/tmp/lt-bench-aot.XXXXXX";
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0 || !mkdtemp(dir)) return 1;
  self[len] = '\0';
  *strrchr(self, '/') = '\0'; /* .../build/bench */
  snprintf(aot, sizeof aot, "%s/../lazytensor-aot", self);
  lt_device dev = lt_cpu(0);
  bench_mlp m;
  lt_nn_dataset ds;
  bench_synthetic(&ds, 128);
  if (bench_mlp_init(&m, dev, 512) != LT_OK || lt_mark_step(dev) != LT_OK) {
    fprintf(stderr, "bench aot: %s\n", lt_last_error());
    return 1;
  }
  int status = 0;
  int64_t batches[2] = {1, 128};
  for (int b = 0; b < 2; b++) {
    int64_t batch = batches[b];
    lt_tensor *x = lt_nn_dataset_images(&ds, dev, 0, batch);
    lt_tensor *h = lt_relu(lt_nn_linear_forward(&m.layer[0], x));
    h = lt_relu(lt_nn_linear_forward(&m.layer[1], h));
    lt_tensor *logits = lt_nn_linear_forward(&m.layer[2], h);
    lt_program *p = logits ? lt_program_create(&logits, 1, &x, 1) : NULL;
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/mlp_b%lld.ltp", dir, (long long)batch);
    if (!p || lt_program_save(p, file) != LT_OK) {
      fprintf(stderr, "bench aot: %s\n", lt_last_error());
      return 1;
    }
    double jit = jit_images_per_s(p, x, batch);
    double ahead = aot_images_per_s(dir, aot, file, batch);
    if (ahead <= 0) {
      fprintf(stderr, "bench aot: the AOT object could not be built or run (%s)\n", aot);
      status = 1;
    } else {
      printf("bench aot_infer_b%lld %.1f images/s ratio %.3f vs jit (%.1f images/s)\n",
             (long long)batch, ahead, ahead / jit, jit);
    }
    lt_program_free(p);
  }
  char rm[64];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) status = 1;
  lt_nn_dataset_free(&ds);
  return status;
}
