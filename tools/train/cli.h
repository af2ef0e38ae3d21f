/* What the three commands of lazytensor-train (train.c, train_gpt.c,
 * train_dp.c) share: splitting an option into name and value, parsing of
 * numeric options, a monotonic clock, the start-up checks of output paths and
 * of an MPI launch, and the loss watch. */
#ifndef LT_TRAIN_CLI_H
#define LT_TRAIN_CLI_H

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A whole decimal integer >= lo (nothing after it, no overflow). */
static inline bool cli_parse_i64(const char *s, int64_t lo, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo) return false;
  *out = v;
  return true;
}

/* A whole finite number >= 0. */
static inline bool cli_parse_f64(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

/* An option "--name=value" or "--name": its name (the part before '=', or all
 * of it) into name; returns the value after '=', or NULL (then the value, if
 * the option takes one, is the next argument). */
static inline const char *cli_option_name(const char *a, char *name, size_t size) {
  const char *eq = strchr(a, '=');
  snprintf(name, size, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
  return eq ? eq + 1 : NULL;
}

/* The value of option argv[*i] given as the next argument, *i moving past
 * it; NULL, after a message (ending in hint), when no argument is left. */
static inline const char *cli_next_value(int argc, char **argv, int *i, const char *hint) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "lazytensor-train: %s needs a value%s\n", argv[*i], hint);
    return NULL;
  }
  return argv[++*i];
}

/* Says that option name's value val is not one it takes; returns -1, the
 * parser's answer for it. */
static inline int cli_bad_value(const char *name, const char *val) {
  fprintf(stderr, "lazytensor-train: bad value '%s' for %s\n", val, name);
  return -1;
}

static inline double cli_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Before a run starts: whether the file that option (--save, --export, --log,
 * --plot) writes at path can be written, so that a typo is caught before
 * the training, not after it. Its directory must exist and be writable, and
 * path must not be a directory (nor an existing file we may not write).
 * False after a message naming the option and the path. */
static inline bool cli_check_output(const char *opt, const char *path) {
  if (!path) return true;
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!*path || strlen(path) >= sizeof dir) {
    fprintf(stderr, "lazytensor-train: %s '%s': not a usable file name\n", opt, path);
    return false;
  }
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == path)
    snprintf(dir, sizeof dir, "/");
  else
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "lazytensor-train: %s %s: directory %s does not exist\n", opt, path, dir);
    return false;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    fprintf(stderr, "lazytensor-train: %s %s: directory %s is not writable\n", opt, path, dir);
    return false;
  }
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      fprintf(stderr, "lazytensor-train: %s %s: is a directory\n", opt, path);
      return false;
    }
    if (access(path, W_OK) != 0) {
      fprintf(stderr, "lazytensor-train: %s %s: %s\n", opt, path, strerror(errno));
      return false;
    }
  }
  return true;
}

/* The size of the MPI job that started this process (mpirun sets these in
 * every process it starts: Open MPI, then MPICH and PMIx launchers), 0 when
 * none did. */
static inline int64_t cli_mpi_job_size(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    int64_t n;
    if (v && cli_parse_i64(v, 1, &n)) return n;
  }
  return 0;
}

/* Warns about a diverging run, once: a cross-entropy loss that is not
 * finite, or over kCliLossBlowup times that of the uniform guess, ln(classes)
 * (where every run starts, near enough, and which training only lowers). The
 * run goes on (the user may stop it); the warning says where to look. */
enum { kCliLossBlowup = 100 };
typedef struct cli_loss_watch {
  double uniform; /* ln(classes): the loss of predicting every class alike */
  bool warned;
} cli_loss_watch;

static inline cli_loss_watch cli_loss_watch_for(int64_t classes) {
  cli_loss_watch w = {log((double)(classes > 2 ? classes : 2)), false};
  return w;
}

static inline void cli_loss_check(cli_loss_watch *w, int64_t step, double loss) {
  if (w->warned || (isfinite(loss) && loss <= kCliLossBlowup * w->uniform)) return;
  fflush(stdout);
  fprintf(stderr,
          "lazytensor-train: warning: the training loss is %g at step %lld (%s %d times "
          "%.3g, the loss of a uniform guess): training diverges; lower --lr?\n",
          loss, (long long)step, isfinite(loss) ? "over" : "not finite; a healthy run stays under",
          (int)kCliLossBlowup, w->uniform);
  w->warned = true;
}

#endif
