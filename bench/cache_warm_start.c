/* bench/cache_warm_start: the persistent compilation cache across processes.
 * The default MLP train step (784-512-512-10, ReLU, Adam, cross-entropy,
 * batch 128, synthetic data) runs in a child process twice, both with
 * LT_PERSISTENT_CACHE_PATH set to one fresh temporary directory: cold
 * (compiles, writes the entries), then warm (a second process: loads them).
 * For each it reports UncachedCompile, PersistentCacheHit, the CompileTime
 * total and the time to first result: from just before the child is started
 * to its first loss read (model init, one step, the loss on the host). Prints
 *   bench cache_cold_compile <ms> ms
 *   bench cache_warm_first_result <ms> ms ratio <cold_compile / warm_first_result> vs cold_compile
 * Before them, each child's phases, in ms, in the order they are spent:
 *   # child <cold|warm|warm_primitive> phases start <fork to main: exec, the loader, static
 *   constructors> setup <device, model and optimizer built, traced> init <the
 *   parameters' first step: cache load or compile, execution> trace <the first
 *   train step traced> mark <lt_mark_step: hash, lookup, queue> run <the
 *   step's execution to the loss on the host>
 * A third child, warm_primitive, is the warm one again with
 * LT_CPU_MATMUL=primitive (f32 products through oneDNN matmul primitives
 * made per shape, instead of the sgemm whose first call generates all its
 * kernels at once):
 *   bench cache_warm_first_result_matmul_primitive <ms> ms ratio <r> vs cold_compile
 * (r: cold_compile / that). The warm children exit non-zero unless
 * UncachedCompile == 0 and PersistentCacheHit > 0, and so does this program.
 * The target: a ratio of at least 5. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_mlp.h"
#include "lazytensor.h"
#include "lazytensor_nn.h"

enum { BATCH = 128, HIDDEN = 512 };

static int die(const char *what) {
  fprintf(stderr, "cache_warm_start: %s: %s\n", what, lt_last_error());
  return 1;
}

static double metric_ms(const char *name) {
  lt_metric_stats st;
  return lt_get_metric(name, &st) == LT_OK ? st.total / 1e6 : 0;
}

/* One child: init, one train step, the loss read; then a second step (the
 * steady state compiles nothing more). started: the parent's clock just
 * before fork. */
static int child(const char *mode, double started) {
  double t_main = bench_now_ms();
  lt_device dev = lt_cpu(0);
  lt_set_seed(dev, 1);
  lt_nn_dataset ds;
  bench_synthetic(&ds, 2 * BATCH);
  bench_mlp m;
  if (bench_mlp_init(&m, dev, HIDDEN) != LT_OK) return die("model");
  lt_nn_loader *loader = lt_nn_loader_create(&ds, dev, BATCH, false);
  if (!loader) return die("setup");
  double t_setup = bench_now_ms();
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) return die("init");
  double t_init = bench_now_ms();
  lt_nn_loader_epoch(loader);
  double first_ms = -1, first_loss = 0, t_traced = 0, t_marked = 0;
  for (int s = 0; s < 2; s++) {
    lt_scope_begin();
    lt_tensor *x, *y;
    if (lt_nn_loader_next(loader, &x, &y) != 1) return die("batch");
    lt_tensor *loss = bench_mlp_step(&m, x, y);
    if (!loss) return die("step");
    lt_tensor *keep = lt_retain(loss);
    lt_scope_end();
    if (s == 0) t_traced = bench_now_ms();
    if (lt_mark_step(dev) != LT_OK) return die("mark_step");
    if (s == 0) t_marked = bench_now_ms();
    double v; /* the read waits for the step */
    if (lt_item(keep, 0, &v) != LT_OK) return die("reading the loss");
    lt_release(keep);
    if (s == 0) {
      first_ms = bench_now_ms() - started;
      first_loss = v;
    }
  }
  /* Where the first result's time went, in the order it was spent. */
  printf("child %s phases start %.3f setup %.3f init %.3f trace %.3f mark %.3f run %.3f\n", mode,
         t_main - started, t_setup - t_main, t_init - t_setup, t_traced - t_init,
         t_marked - t_traced, started + first_ms - t_marked);
  if (lt_wait_device_ops(dev) != LT_OK) return die("wait");
  long long uc = counter("UncachedCompile"), hit = counter("PersistentCacheHit"),
            fail = counter("PersistentCacheDeserializeFailure");
  printf(
      "child %s uncached %lld hit %lld deserialize_failures %lld compile_ms %.3f load_ms %.3f "
      "first_result_ms %.3f first_loss %.6f\n",
      mode, uc, hit, fail, metric_ms("CompileTime"), metric_ms("PersistentCacheLoadTime"), first_ms,
      first_loss);
  lt_nn_loader_free(loader);
  bench_mlp_free(&m);
  lt_nn_dataset_free(&ds);
  if (strncmp(mode, "warm", 4) == 0 && (uc != 0 || hit <= 0)) {
    fprintf(stderr, "cache_warm_start: the warm process compiled %lld graphs, loaded %lld\n", uc,
            hit);
    return 3;
  }
  return 0;
}

typedef struct result {
  long long uncached, hit, failures;
  double compile_ms, load_ms, first_ms, loss;
} result;

static int run(const char *mode, const char *dir, result *r) {
  char self[1024];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return -1;
  self[len] = '\0';
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(stdout);
  char started[64];
  snprintf(started, sizeof started, "%.6f", bench_now_ms());
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    setenv("LT_PERSISTENT_CACHE_PATH", dir, 1);
    unsetenv("LT_PERSISTENT_CACHE_READ_ONLY");
    if (strcmp(mode, "warm_primitive") == 0) setenv("LT_CPU_MATMUL", "primitive", 1);
    execl(self, "cache_warm_start", "--child", mode, started, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  if (pid < 0) return -1;
  FILE *f = fdopen(fds[0], "r");
  char line[1024];
  bool got = false;
  while (f && fgets(line, sizeof line, f)) {
    char m[16];
    if (strstr(line, " phases ")) printf("# %s", line);
    if (sscanf(line,
               "child %15s uncached %lld hit %lld deserialize_failures %lld compile_ms %lf "
               "load_ms %lf first_result_ms %lf first_loss %lf",
               m, &r->uncached, &r->hit, &r->failures, &r->compile_ms, &r->load_ms, &r->first_ms,
               &r->loss) == 8)
      got = true;
  }
  if (f) fclose(f);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return rc == 0 && !got ? -1 : rc;
}

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  char path[1024];
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "--child")) return child(argv[2], atof(argv[3]));
  char dir[] = "/tmp/lt_cache_warm_startXXXXXX";
  if (!mkdtemp(dir)) {
    perror("cache_warm_start: mkdtemp");
    return 1;
  }
  result cold = {0}, warm = {0}, prim = {0};
  int rc = run("cold", dir, &cold);
  if (rc != 0) {
    fprintf(stderr, "cache_warm_start: the cold process failed (%d)\n", rc);
    rm_dir(dir);
    return 1;
  }
  int wrc = run("warm", dir, &warm);
  int prc = wrc == 0 ? run("warm_primitive", dir, &prim) : 0;
  rm_dir(dir);
  if (wrc != 0 || prc != 0) {
    fprintf(stderr, "cache_warm_start: the %s process failed (%d)\n",
            wrc ? "warm" : "warm_primitive", wrc ? wrc : prc);
    return 1;
  }
  const char *be = getenv("LT_BACKEND");
  printf("# cache_warm_start: backend %s, threads %s\n", be && *be ? be : "default",
         getenv("LT_NUM_THREADS") ? getenv("LT_NUM_THREADS") : "default");
  printf(
      "# cold: UncachedCompile %lld, PersistentCacheHit %lld, CompileTime %.1f ms, first result "
      "%.1f ms, loss %.6f\n",
      cold.uncached, cold.hit, cold.compile_ms, cold.first_ms, cold.loss);
  printf(
      "# warm: UncachedCompile %lld, PersistentCacheHit %lld, CompileTime %.1f ms, "
      "PersistentCacheLoadTime %.1f ms, first result %.1f ms, loss %.6f\n",
      warm.uncached, warm.hit, warm.compile_ms, warm.load_ms, warm.first_ms, warm.loss);
  if (cold.loss != warm.loss) printf("# note: the warm loss differs from the cold one\n");
  printf("bench cache_cold_compile %.3f ms\n", cold.compile_ms);
  printf("bench cache_warm_first_result %.3f ms ratio %.2f vs cold_compile\n", warm.first_ms,
         warm.first_ms > 0 ? cold.compile_ms / warm.first_ms : 0);
  printf("bench cache_warm_first_result_matmul_primitive %.3f ms ratio %.2f vs cold_compile\n",
         prim.first_ms, prim.first_ms > 0 ? cold.compile_ms / prim.first_ms : 0);
  return 0;
}
