/* The persistent compilation cache (src/exec/disk_cache.c): warm starts in
 * this process and in other processes, and every fault it must survive (a
 * corrupted, truncated, foreign or stale entry, a read-only setting or
 * directory, a full disk, writers racing on one key, the size bound). Each
 * case checks the computed values against the host, the counters, the files
 * left in the directory and, where there is one, the message on stderr.
 *
 * Other processes are this binary run again (fork + exec of /proc/self/exe
 * with --child), configured through LT_PERSISTENT_CACHE_PATH. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "test_util.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_alloc.h"
#include "../src/exec/disk_cache.h"

extern char **environ;

enum { kCols = 8, kOut = 3 };

static char g_dir[64];

/* ---- the graph: out = sum(relu(x @ w + b)^2, axis 1), x [rows, 8] -------------------- */

static float x_at(int seed, int i, int k) { return (float)sin(seed + i * kCols + k); }
static float w_at(int seed, int k, int j) { return (float)(cos(seed * 3 + k * kOut + j) / 2); }
static float b_at(int j) { return 0.1f * (float)j - 0.1f; }

/* Runs the graph on values drawn from seed; 0 when every output is right. */
static int run_graph(int rows, int seed) {
  float x[16 * kCols], w[kCols * kOut], b[kOut], got[16];
  if (rows > 16) return -1;
  for (int i = 0; i < rows; i++)
    for (int k = 0; k < kCols; k++) x[i * kCols + k] = x_at(seed, i, k);
  for (int k = 0; k < kCols; k++)
    for (int j = 0; j < kOut; j++) w[k * kOut + j] = w_at(seed, k, j);
  for (int j = 0; j < kOut; j++) b[j] = b_at(j);
  lt_scope_begin();
  lt_tensor *tx = lt_from_data(CPU0, LT_F32, SHAPE(rows, kCols), 2, x);
  lt_tensor *tw = lt_from_data(CPU0, LT_F32, SHAPE(kCols, kOut), 2, w);
  lt_tensor *tb = lt_from_data(CPU0, LT_F32, SHAPE(kOut), 1, b);
  lt_tensor *y = lt_relu(lt_add(lt_matmul(tx, tw), tb));
  lt_tensor *out = lt_sum(lt_mul(y, y), (const int[]){1}, 1, false);
  int rc = out ? lt_to_data(out, got, sizeof(float) * (size_t)rows) : -1;
  lt_scope_end();
  if (rc != LT_OK) {
    fprintf(stderr, "run_graph: %s\n", lt_last_error());
    return -1;
  }
  for (int i = 0; i < rows; i++) {
    double want = 0;
    for (int j = 0; j < kOut; j++) {
      double v = b[j];
      for (int k = 0; k < kCols; k++) v += (double)x[i * kCols + k] * w[k * kOut + j];
      if (v > 0) want += v * v;
    }
    if (fabs(got[i] - want) > 1e-4 * (1 + fabs(want))) {
      fprintf(stderr, "run_graph: row %d: got %.9g, want %.9g\n", i, got[i], want);
      return -1;
    }
  }
  return 0;
}

/* ---- files --------------------------------------------------------------------------- */

/* Entries (*.ltx) and temporary files (.*.tmp.*) in dir; the first entry's path. */
static int scan_dir(const char *dir, int *ntmp, char *first, size_t n) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int entries = 0, tmps = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t len = strlen(de->d_name);
    if (strstr(de->d_name, ".tmp.")) {
      tmps++;
    } else if (len > 4 && strcmp(de->d_name + len - 4, ".ltx") == 0) {
      if (entries++ == 0 && first) snprintf(first, n, "%s/%s", dir, de->d_name);
    }
  }
  closedir(d);
  if (ntmp) *ntmp = tmps;
  return entries;
}

static int count_entries(void) {
  int tmps;
  int n = scan_dir(g_dir, &tmps, NULL, 0);
  assert_int_equal(tmps, 0); /* never a temporary file left behind */
  return n;
}

static void the_entry(char *path, size_t n) {
  int tmps;
  assert_int_equal(scan_dir(g_dir, &tmps, path, n), 1);
  assert_int_equal(tmps, 0);
}

static void write_file(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Recomputes the trailing checksum, so that only the field edited is wrong. */
static void fix_checksum(uint8_t *b, size_t n) {
  put_u64(b + n - LT_DISK_CHECKSUM_BYTES, XXH3_64bits(b, n - LT_DISK_CHECKSUM_BYTES));
}

static void set_age(const char *path, time_t seconds_ago) {
  struct timespec ts[2] = {{time(NULL) - seconds_ago, 0}, {time(NULL) - seconds_ago, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static time_t mtime_of(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return st.st_mtime;
}

/* ---- stderr capture ------------------------------------------------------------------- */

/* One tu_capture at a time; its text is kept in a static buffer (the cases
 * need not free it). */
static tu_capture g_capture;
static char g_captured[8192];

static void capture_begin(void) { tu_capture_begin(&g_capture, "lt_disk_err"); }

/* What was written to stderr since capture_begin (also echoed there). */
static const char *capture_end(void) {
  char *text = tu_capture_read(&g_capture);
  tu_capture_end(&g_capture);
  snprintf(g_captured, sizeof g_captured, "%s", text);
  free(text);
  fputs(g_captured, stderr);
  return g_captured;
}

/* ---- child processes ------------------------------------------------------------------- */

/* The child's side: runs the graph with the cache configured from the
 * environment. mode "cached": must compile nothing; "any": may compile;
 * "write-fail": must fail to write its entry. Exit 0 when all holds. */
static int child_main(int argc, char **argv) {
  if (argc < 5) return 2;
  const char *mode = argv[2];
  int seed = atoi(argv[3]), gofd = atoi(argv[4]);
  lt__backend_force(&lt__ref_backend);
  if (gofd >= 0) { /* wait for the parent's go: the write end closing */
    char c;
    while (read(gofd, &c, 1) < 0 && errno == EINTR) {
    }
  }
  int rc = run_graph(4, seed);
  long long uncached = tu_counter("UncachedCompile"), hit = tu_counter("PersistentCacheHit"),
            wfail = tu_counter("PersistentCacheWriteFailure");
  printf(
      "child %d: values %s, UncachedCompile %lld, PersistentCacheHit %lld, "
      "PersistentCacheWriteFailure %lld\n",
      (int)getpid(), rc == 0 ? "right" : "WRONG", uncached, hit, wfail);
  if (rc != 0) return 1;
  if (strcmp(mode, "cached") == 0 && (uncached != 0 || hit != 1)) return 1;
  if (strcmp(mode, "write-fail") == 0 && (uncached != 1 || wfail != 1)) return 1;
  return 0;
}

/* Starts this binary as a child on g_dir. uid > 0: run as that user (the
 * read-only directory test when root). out: its stdout and stderr, or NULL. */
static pid_t spawn_child(const char *mode, int seed, int gofd, int uid, const char *out,
                         const char *extra_env) {
  static char var[128], self[512];
  /* The binary's real path: /proc/self/exe is closed to a process that setuid'd. */
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  snprintf(var, sizeof var, "LT_PERSISTENT_CACHE_PATH=%s", g_dir);
  int n = 0;
  while (environ[n]) n++;
  char **envp = calloc((size_t)n + 3, sizeof *envp);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (strncmp(environ[i], "LT_PERSISTENT_CACHE_", 20) != 0 &&
        strncmp(environ[i], "LT_BACKEND=", 11) != 0)
      envp[k++] = environ[i];
  envp[k++] = var;
  if (extra_env) envp[k++] = (char *)extra_env;
  char seedbuf[16], fdbuf[16];
  snprintf(seedbuf, sizeof seedbuf, "%d", seed);
  snprintf(fdbuf, sizeof fdbuf, "%d", gofd);
  char *const argv[] = {"test_disk_cache", "--child", (char *)mode, seedbuf, fdbuf, NULL};
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (out) {
      int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
      if (fd < 0) _exit(125);
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    if (uid > 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0))
      _exit(126);
    execve(self, argv, envp);
    _exit(127);
  }
  free(envp);
  assert_true(pid > 0);
  return pid;
}

/* ---- fixtures -------------------------------------------------------------------------- */

static int setup(void **state) {
  lt__backend_force(&lt__ref_backend); /* the serializable backend, whatever LT_BACKEND says */
  tu_reset_executor();
  lt__disk_cache_fail_next_write(0);
  lt__disk_cache_set_max_bytes(0);
  assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "lt_disk_cache"));
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  return tu_setup(state);
}

static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt_set_persistent_cache(NULL, false);
  lt__disk_cache_fail_next_write(0);
  lt__disk_cache_set_max_bytes(0);
  lt_cache_clear();
  tu_rm_tree(g_dir);
  return rc;
}
#define DTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

static int64_t ctr(const char *name) { return tu_counter(name); }

/* A first run in a fresh directory: one compile, one entry. */
static void populate(void) {
  assert_int_equal(run_graph(4, 1), 0);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("PersistentCacheMiss"), 1);
  assert_int_equal(count_entries(), 1);
}

/* ---- warm starts ------------------------------------------------------------------------- */

static void test_cold_then_warm_in_process(void **state) {
  (void)state;
  populate();
  assert_int_equal(ctr("PersistentCacheHit"), 0);
  assert_int_equal(ctr("PersistentCacheWriteFailure"), 0);
  lt_metric_stats compile, load;
  assert_int_equal(lt_get_metric("CompileTime", &compile), LT_OK);

  /* A fresh memory cache, other values, the same graph: the entry comes from disk. */
  lt_cache_clear();
  assert_int_equal(run_graph(4, 2), 0);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("PersistentCacheMiss"), 1);
  assert_int_equal(lt_get_metric("PersistentCacheLoadTime", &load), LT_OK);
  assert_int_equal(load.count, 1);
  print_message("cold compile %.1f us, load from disk %.1f us\n", compile.total / 1e3,
                load.total / 1e3);

  assert_int_equal(run_graph(4, 3), 0); /* now the memory cache answers */
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("CachedCompile"), 1);
  assert_int_equal(count_entries(), 1);
}

static void test_second_process_compiles_nothing(void **state) {
  (void)state;
  populate();
  char out[96];
  snprintf(out, sizeof out, "%s.child", g_dir);
  int rc = tu_wait_child(spawn_child("cached", 5, -1, 0, out, NULL));
  size_t n;
  uint8_t *text = tu_read_file(out, &n);
  unlink(out);
  text[n] = '\0';
  print_message("%s", (char *)text);
  if (rc != 0) fail_msg("child exited %d:\n%s", rc, (char *)text);
  assert_non_null(strstr((char *)text, "UncachedCompile 0, PersistentCacheHit 1"));
  free(text);
  assert_int_equal(count_entries(), 1);
}

/* ---- bad entries --------------------------------------------------------------------------- */

typedef enum corruption {
  FLIP_BYTE,
  TRUNCATE_HALF,
  TRUNCATE_TINY,
  EMPTY_FILE,
  BAD_MAGIC,
  WRONG_VERSION,
  WRONG_ENV,
  WRONG_BACKEND,
  BAD_PAYLOAD,
} corruption;

static void corrupt(const char *path, corruption kind) {
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  switch (kind) {
  case FLIP_BYTE:
    b[LT_DISK_HEADER_BYTES + (n - LT_DISK_HEADER_BYTES) / 2] ^= 0x10;
    break;
  case TRUNCATE_HALF:
    n /= 2;
    break;
  case TRUNCATE_TINY:
    n = 10;
    break;
  case EMPTY_FILE:
    n = 0;
    break;
  case BAD_MAGIC:
    b[0] = 'X';
    fix_checksum(b, n);
    break;
  case WRONG_VERSION:
    b[LT_DISK_OFF_VERSION] = 99;
    fix_checksum(b, n);
    break;
  case WRONG_ENV: /* as if another library version or CPU had written it */
    put_u64(b + LT_DISK_OFF_ENV, get_u64(b + LT_DISK_OFF_ENV) ^ 0x5a5a);
    fix_checksum(b, n);
    break;
  case WRONG_BACKEND:
    memcpy(b + LT_DISK_OFF_BACKEND, "cpu\0", 4);
    fix_checksum(b, n);
    break;
  case BAD_PAYLOAD:                     /* a valid envelope around bytes the backend rejects: */
    b[LT_DISK_HEADER_BYTES + 8] = 0xff; /* an instruction count beyond the bytes */
    b[LT_DISK_HEADER_BYTES + 11] = 0x7f;
    fix_checksum(b, n);
    break;
  }
  write_file(path, b, n);
  free(b);
}

/* A bad entry: counted, reported, removed, recompiled with right values, and
 * replaced by a good entry that the next process-like start loads. */
static void bad_entry_case(corruption kind, const char *needle) {
  populate();
  char path[512];
  the_entry(path, sizeof path);
  corrupt(path, kind);
  lt_cache_clear();
  capture_begin();
  int rc = run_graph(4, 7);
  const char *err = capture_end();
  assert_int_equal(rc, 0);
  assert_int_equal(ctr("PersistentCacheDeserializeFailure"), 1);
  assert_int_equal(ctr("PersistentCacheHit"), 0);
  assert_int_equal(ctr("PersistentCacheMiss"), 2);
  assert_int_equal(ctr("UncachedCompile"), 2);
  tu_expect_substr(err, "lazytensor: persistent cache: ignoring");
  tu_expect_substr(err, needle);
  tu_expect_substr(err, "removed, compiling instead");
  /* the recompile stored a good entry under the same name */
  assert_int_equal(count_entries(), 1);
  lt_cache_clear();
  assert_int_equal(run_graph(4, 8), 0);
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("UncachedCompile"), 2);
}

static void test_flipped_byte(void **state) {
  (void)state;
  bad_entry_case(FLIP_BYTE, "checksum mismatch");
}
static void test_truncated_file(void **state) {
  (void)state;
  bad_entry_case(TRUNCATE_HALF, "truncated");
}
static void test_truncated_inside_header(void **state) {
  (void)state;
  bad_entry_case(TRUNCATE_TINY, "truncated");
}
static void test_empty_file(void **state) {
  (void)state;
  bad_entry_case(EMPTY_FILE, "truncated");
}
static void test_bad_magic(void **state) {
  (void)state;
  bad_entry_case(BAD_MAGIC, "not a lazytensor cache entry");
}
static void test_wrong_format_version(void **state) {
  (void)state;
  bad_entry_case(WRONG_VERSION, "format version 99");
}
static void test_wrong_environment(void **state) {
  (void)state;
  bad_entry_case(WRONG_ENV, "different compile environment");
}
static void test_wrong_backend(void **state) {
  (void)state;
  bad_entry_case(WRONG_BACKEND, "written by backend 'cpu'");
}
static void test_undeserializable_payload(void **state) {
  (void)state;
  bad_entry_case(BAD_PAYLOAD, "the backend cannot read it");
}

/* An entry copied under another key's name (a valid file of the wrong graph)
 * must not run: it would compute the wrong function. */
static void test_entry_of_another_key(void **state) {
  (void)state;
  populate(); /* rows = 4 */
  char four[512], two[512];
  the_entry(four, sizeof four);
  assert_int_equal(run_graph(2, 1), 0);
  assert_int_equal(count_entries(), 2);
  char first[512];
  DIR *d = opendir(g_dir);
  struct dirent *de;
  two[0] = '\0';
  while ((de = readdir(d)) != NULL) {
    snprintf(first, sizeof first, "%s/%s", g_dir, de->d_name);
    if (strstr(de->d_name, ".ltx") && strcmp(first, four) != 0)
      snprintf(two, sizeof two, "%s", first);
  }
  closedir(d);
  assert_true(two[0] != '\0');
  size_t n;
  uint8_t *b = tu_read_file(four, &n);
  write_file(two, b, n); /* the rows = 2 key now holds the rows = 4 executable */
  free(b);
  lt_cache_clear();
  capture_begin();
  int rc = run_graph(2, 9);
  const char *err = capture_end();
  assert_int_equal(rc, 0);
  tu_expect_substr(err, "holds a different graph key");
  assert_int_equal(ctr("PersistentCacheDeserializeFailure"), 1);
  assert_int_equal(ctr("UncachedCompile"), 3);
}

/* ---- read-only ---------------------------------------------------------------------------- */

/* The environment's settings, as a new process reads them. */
static void test_environment_settings(void **state) {
  (void)state;
  char out[96];
  snprintf(out, sizeof out, "%s.child", g_dir);
  /* LT_PERSISTENT_CACHE_READ_ONLY=1: computes, writes nothing, says nothing. */
  assert_int_equal(
      tu_wait_child(spawn_child("any", 1, -1, 0, out, "LT_PERSISTENT_CACHE_READ_ONLY=1")), 0);
  size_t n;
  uint8_t *text = tu_read_file(out, &n);
  text[n] = '\0';
  assert_null(strstr((char *)text, "persistent cache"));
  free(text);
  assert_int_equal(count_entries(), 0);
  /* LT_PERSISTENT_CACHE_MAX_BYTES below one entry: nothing kept, one message. */
  assert_int_equal(
      tu_wait_child(spawn_child("write-fail", 1, -1, 0, out, "LT_PERSISTENT_CACHE_MAX_BYTES=100")),
      0);
  text = tu_read_file(out, &n);
  text[n] = '\0';
  tu_expect_substr((char *)text, "exceed the size bound (100 bytes)");
  free(text);
  assert_int_equal(count_entries(), 0);
  /* With a k suffix, room for the entry: the next process finds it. */
  assert_int_equal(
      tu_wait_child(spawn_child("any", 1, -1, 0, out, "LT_PERSISTENT_CACHE_MAX_BYTES=64k")), 0);
  assert_int_equal(count_entries(), 1);
  assert_int_equal(tu_wait_child(spawn_child("cached", 2, -1, 0, out, NULL)), 0);
  unlink(out);
}

static void test_read_only_setting(void **state) {
  (void)state;
  /* An empty read-only cache: compiles, writes nothing, reports nothing. */
  assert_int_equal(lt_set_persistent_cache(g_dir, true), LT_OK);
  capture_begin();
  int rc = run_graph(4, 1);
  const char *err = capture_end();
  assert_int_equal(rc, 0);
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("PersistentCacheMiss"), 1);
  assert_int_equal(ctr("PersistentCacheWriteFailure"), 0);
  assert_int_equal(count_entries(), 0);
  assert_null(strstr(err, "persistent cache"));

  /* An entry written earlier loads, and a hit does not touch it. */
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  lt_cache_clear();
  assert_int_equal(run_graph(4, 1), 0);
  assert_int_equal(ctr("UncachedCompile"), 2);
  char path[512];
  the_entry(path, sizeof path);
  set_age(path, 1000);
  time_t before = mtime_of(path);
  assert_int_equal(lt_set_persistent_cache(g_dir, true), LT_OK);
  lt_cache_clear();
  assert_int_equal(run_graph(4, 2), 0);
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("UncachedCompile"), 2);
  assert_int_equal(mtime_of(path), before);

  /* A bad entry is counted and ignored, but kept: the directory is not ours to change. */
  corrupt(path, FLIP_BYTE);
  size_t n0;
  uint8_t *bad = tu_read_file(path, &n0);
  lt_cache_clear();
  capture_begin();
  rc = run_graph(4, 3);
  err = capture_end();
  assert_int_equal(rc, 0);
  assert_int_equal(ctr("PersistentCacheDeserializeFailure"), 1);
  assert_int_equal(ctr("UncachedCompile"), 3);
  tu_expect_substr(err, "kept (read-only)");
  size_t n1;
  uint8_t *after = tu_read_file(path, &n1);
  assert_true(n0 == n1 && memcmp(bad, after, n0) == 0);
  free(bad);
  free(after);
}

/* Writes into a read-only directory fail: counted, reported, nothing left. */
static void test_read_only_directory(void **state) {
  (void)state;
  assert_int_equal(chmod(g_dir, 0555), 0);
  if (geteuid() != 0) {
    capture_begin();
    int rc = run_graph(4, 1);
    const char *err = capture_end();
    assert_int_equal(rc, 0);
    assert_int_equal(ctr("PersistentCacheWriteFailure"), 1);
    tu_expect_substr(err, "Permission denied");
    assert_int_equal(count_entries(), 0);
    return;
  }
  /* Root ignores permission bits, so a child drops to user nobody (65534) to
   * meet the real EACCES. Where it cannot (no exec permission for nobody on
   * the build tree), the injected failure stands in for it. */
  char out[96];
  snprintf(out, sizeof out, "%s.child", g_dir);
  int rc = tu_wait_child(spawn_child("write-fail", 1, -1, 65534, out, NULL));
  size_t n;
  uint8_t *text = tu_read_file(out, &n);
  unlink(out);
  text[n] = '\0';
  print_message("%s", (char *)text);
  if (rc == 126 || rc == 127) {
    print_message("cannot run as nobody (exit %d): injecting the write failure instead\n", rc);
    lt__disk_cache_fail_next_write(1);
    capture_begin();
    int r = run_graph(4, 1);
    const char *err = capture_end();
    assert_int_equal(r, 0);
    assert_int_equal(ctr("PersistentCacheWriteFailure"), 1);
    tu_expect_substr(err, "cannot write");
  } else {
    if (rc != 0) fail_msg("child exited %d:\n%s", rc, (char *)text);
    tu_expect_substr((char *)text, "creating a temporary file: Permission denied");
    tu_expect_substr((char *)text, "the computation goes on without it");
  }
  free(text);
  assert_int_equal(count_entries(), 0);
}

/* ---- full disk ----------------------------------------------------------------------------- */

static void test_full_disk(void **state) {
  (void)state;
  lt__disk_cache_fail_next_write(2); /* ENOSPC halfway through the temporary file */
  capture_begin();
  int rc = run_graph(4, 1);
  const char *err = capture_end();
  assert_int_equal(rc, 0);
  assert_int_equal(ctr("PersistentCacheWriteFailure"), 1);
  tu_expect_substr(err, "No space left on device");
  tu_expect_substr(err, "the computation goes on without it");
  assert_int_equal(count_entries(), 0); /* and no temporary file (count_entries checks) */

  /* A second failure is counted, not reported again. */
  lt_cache_clear();
  capture_begin();
  rc = run_graph(4, 2);
  err = capture_end();
  assert_int_equal(rc, 0);
  assert_int_equal(ctr("PersistentCacheWriteFailure"), 2);
  assert_null(strstr(err, "persistent cache"));
  assert_int_equal(count_entries(), 0);

  /* Space again: the next compile is stored and loads. */
  lt_cache_clear();
  assert_int_equal(run_graph(4, 3), 0);
  assert_int_equal(count_entries(), 1);
  lt_cache_clear();
  assert_int_equal(run_graph(4, 4), 0);
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("UncachedCompile"), 3);
}

/* ---- concurrent writers -------------------------------------------------------------------- */

static void test_processes_compile_same_key_at_once(void **state) {
  (void)state;
  enum { kChildren = 4 };
  int go[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(fcntl(go[1], F_SETFD, FD_CLOEXEC), 0); /* only the parent holds the write end */
  pid_t pids[kChildren];
  for (int i = 0; i < kChildren; i++) pids[i] = spawn_child("any", 10 + i, go[0], 0, NULL, NULL);
  close(go[0]);
  usleep(100 * 1000); /* let them all reach the start line */
  close(go[1]);       /* go */
  for (int i = 0; i < kChildren; i++) assert_int_equal(tu_wait_child(pids[i]), 0);
  assert_int_equal(count_entries(), 1); /* one whole entry, no temporary file */
  char path[512];
  the_entry(path, sizeof path);
  assert_int_equal(run_graph(4, 20), 0); /* and it loads here */
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("UncachedCompile"), 0);
  assert_int_equal(ctr("PersistentCacheDeserializeFailure"), 0);
}

/* ---- size bound ------------------------------------------------------------------------------ */

/* The entry written by the last store: the newest file. */
static void newest_entry(char *path, size_t n) {
  DIR *d = opendir(g_dir);
  struct dirent *de;
  time_t best = -1;
  long long best_ns = -1;
  while ((de = readdir(d)) != NULL) {
    if (!strstr(de->d_name, ".ltx") || strstr(de->d_name, ".tmp.")) continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    if (st.st_mtim.tv_sec > best || (st.st_mtim.tv_sec == best && st.st_mtim.tv_nsec > best_ns)) {
      best = st.st_mtim.tv_sec;
      best_ns = st.st_mtim.tv_nsec;
      snprintf(path, n, "%s", p);
    }
  }
  closedir(d);
}

static void test_size_bound_evicts_least_recently_used(void **state) {
  (void)state;
  char a[512], b[512], c[512], dpath[512];
  assert_int_equal(run_graph(1, 1), 0);
  newest_entry(a, sizeof a);
  set_age(a, 3000);
  assert_int_equal(run_graph(2, 1), 0);
  newest_entry(b, sizeof b);
  set_age(b, 2000);
  struct stat st;
  assert_int_equal(stat(a, &st), 0);
  /* every entry of this graph has this size (only shapes differ) */
  uint64_t size = (uint64_t)st.st_size;
  lt__disk_cache_set_max_bytes(2 * size + size / 2); /* room for two */

  /* A third entry evicts the oldest, a. */
  assert_int_equal(run_graph(3, 1), 0);
  newest_entry(c, sizeof c);
  set_age(c, 1000);
  assert_int_equal(count_entries(), 2);
  assert_int_equal(mtime_of(a), -1);
  assert_true(mtime_of(b) > 0 && mtime_of(c) > 0);

  /* A hit makes b the most recently used: the next store evicts c, not b. */
  lt_cache_clear();
  assert_int_equal(run_graph(2, 5), 0);
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_true(mtime_of(b) > mtime_of(c));
  assert_int_equal(run_graph(5, 1), 0);
  newest_entry(dpath, sizeof dpath);
  assert_int_equal(count_entries(), 2);
  assert_int_equal(mtime_of(c), -1);
  assert_true(mtime_of(b) > 0 && mtime_of(dpath) > 0);

  /* An entry larger than the whole bound is not kept (a write failure, reported). */
  lt__disk_cache_set_max_bytes(size / 2);
  capture_begin();
  int rc = run_graph(6, 1);
  const char *err = capture_end();
  assert_int_equal(rc, 0);
  tu_expect_substr(err, "exceed the size bound");
  assert_int_equal(ctr("PersistentCacheWriteFailure"), 1);
}

/* ---- ref serialization ----------------------------------------------------------------------- */

/* deserialize rejects every truncation and every single-byte change of a
 * real executable's bytes, or accepts it as a structurally valid one. */
static void test_ref_deserialize_rejects_bad_bytes(void **state) {
  (void)state;
  populate();
  char path[512];
  the_entry(path, sizeof path);
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  const uint8_t *payload = b + LT_DISK_HEADER_BYTES;
  size_t plen = n - LT_DISK_HEADER_BYTES - LT_DISK_CHECKSUM_BYTES;
  lt_executable *e = NULL;
  assert_int_equal(lt__ref_backend.deserialize(payload, plen, &e), LT_OK);
  void *again;
  size_t alen;
  assert_int_equal(lt__ref_backend.serialize(e, &again, &alen), LT_OK);
  assert_true(alen == plen && memcmp(again, payload, plen) == 0); /* round trip */
  lt__free(again, alen); /* the caller owns the bytes (lt__free) */
  lt__ref_backend.executable_free(e);
  for (size_t cut = 0; cut < plen; cut++) {
    e = NULL;
    assert_int_equal(lt__ref_backend.deserialize(payload, cut, &e), LT_EINVAL);
    assert_null(e);
  }
  uint8_t *m = malloc(plen);
  int accepted = 0;
  for (size_t i = 0; i < plen; i++) {
    for (int v = 0; v < 256; v += 51) {
      memcpy(m, payload, plen);
      m[i] ^= (uint8_t)(v | 1);
      e = NULL;
      int rc = lt__ref_backend.deserialize(m, plen, &e);
      assert_true(rc == LT_OK || rc == LT_EINVAL);
      if (rc == LT_OK) {
        accepted++;
        lt__ref_backend.executable_free(e);
      }
    }
  }
  print_message("payload %zu bytes: %d of %zu single-byte changes still decode\n", plen, accepted,
                plen * 6);
  free(m);
  free(b);
  lt_clear_error();
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
  const struct CMUnitTest tests[] = {
      DTEST(test_cold_then_warm_in_process),
      DTEST(test_second_process_compiles_nothing),
      DTEST(test_flipped_byte),
      DTEST(test_truncated_file),
      DTEST(test_truncated_inside_header),
      DTEST(test_empty_file),
      DTEST(test_bad_magic),
      DTEST(test_wrong_format_version),
      DTEST(test_wrong_environment),
      DTEST(test_wrong_backend),
      DTEST(test_undeserializable_payload),
      DTEST(test_entry_of_another_key),
      DTEST(test_environment_settings),
      DTEST(test_read_only_setting),
      DTEST(test_read_only_directory),
      DTEST(test_full_disk),
      DTEST(test_processes_compile_same_key_at_once),
      DTEST(test_size_bound_evicts_least_recently_used),
      DTEST(test_ref_deserialize_rejects_bad_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
