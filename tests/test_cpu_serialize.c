/* Serialization of cpu executables (src/backend/cpu/cpu_serial.c): round
 * trips through the persistent cache for graphs that exercise each part of a
 * plan (fused loops, reductions, softmax, BLAS, donation in place, ref
 * fallbacks), bytes that are truncated or changed (rejected, never a crash:
 * this runs under ASan in CI), and warm starts in other processes whose own
 * executables carry the same JIT symbol names.
 *
 * Other processes are this binary run again (fork + exec of /proc/self/exe
 * with --child MODE DIR). */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "test_util.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/core/lt_alloc.h"
#include "../src/exec/disk_cache.h"

static char g_dir[64];

/* Reads outs (any dtype) into one array of doubles; returns how many. */
static int64_t read_all(lt_tensor **outs, int n, double *vals, int64_t cap) {
  assert_int_equal(lt_sync(outs, n, true), LT_OK);
  int64_t k = 0;
  for (int i = 0; i < n; i++) {
    tu_read(outs[i], vals + k, cap - k);
    k += lt_numel(outs[i]);
  }
  return k;
}

/* ---- the graphs --------------------------------------------------------------------- */

enum { kCap = 4096 };

static int64_t g_elem(double *v) { /* one fused loop */
  lt_tensor *x = tu_wave_f32(1, SHAPE(37, 29), 2);
  lt_tensor *y = lt_sub(
      lt_add(lt_mul(lt_exp(lt_mul(x, lt_scalar(CPU0, LT_F32, 0.5))), lt_scalar(CPU0, LT_F32, 2)),
             lt_sin(x)),
      lt_div(x, lt_scalar(CPU0, LT_F32, 3)));
  return read_all(&y, 1, v, kCap);
}

static double elem_want(int64_t i) {
  double x = tu_wave_at(1, i);
  return exp(x * 0.5) * 2 + sin(x) - x / 3;
}

static int64_t g_small(double *v) { /* the corruption tests' graph */
  lt_tensor *x = tu_wave_f32(2, SHAPE(4, 3), 2);
  lt_tensor *y = lt_mul(lt_add(x, lt_scalar(CPU0, LT_F32, 1)), x);
  return read_all(&y, 1, v, kCap);
}

static int64_t g_reduce(double *v) {
  lt_tensor *x = tu_wave_f32(3, SHAPE(17, 40), 2);
  lt_tensor *outs[2] = {lt_sum(lt_mul(x, x), (const int[]){1}, 1, false),
                        lt_max(x, (const int[]){0}, 1, true)};
  return read_all(outs, 2, v, kCap);
}

static int64_t g_softmax(double *v) {
  lt_tensor *x = tu_wave_f32(4, SHAPE(9, 33), 2);
  lt_tensor *y = lt_softmax(lt_mul(x, lt_scalar(CPU0, LT_F32, 3)), 1);
  return read_all(&y, 1, v, kCap);
}

static int64_t g_matmul(double *v) {
  lt_tensor *x = tu_wave_f32(5, SHAPE(3, 6, 7), 3), *w = tu_wave_f32(6, SHAPE(7, 5), 2);
  lt_tensor *b = tu_wave_f32(7, SHAPE(5), 1), *a = tu_wave_f32(8, SHAPE(8, 6), 2);
  lt_tensor *outs[2] = {lt_relu(lt_add(lt_matmul(x, w), b)),  /* batched, bias fused after */
                        lt_matmul(lt_transpose(a, 0, 1), a)}; /* a transposed operand */
  return read_all(outs, 2, v, kCap);
}

static int64_t g_donate(double *v) { /* three steps writing w in place */
  lt_tensor *w = tu_wave_f32(9, SHAPE(64, 16), 2);
  for (int s = 0; s < 3; s++) {
    lt_tensor *nw = lt_sub(w, lt_mul(lt_scalar(CPU0, LT_F32, 0.1), lt_mul(w, w)));
    assert_int_equal(lt_assign(w, nw), LT_OK);
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
  }
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_metric_stats st;
  assert_int_equal(lt_get_metric("InputOutputAliasCount", &st), LT_OK);
  assert_true(st.count > 0 && st.max > 0); /* the update was written in place */
  return read_all(&w, 1, v, kCap);
}

static int64_t g_ref(double *v) { /* argmax runs as a ref kernel after a fused loop */
  lt_tensor *x = tu_wave_f32(10, SHAPE(12, 21), 2);
  lt_tensor *outs[2] = {lt_argmax(lt_mul(x, lt_cos(x)), 1, false),
                        lt_add(lt_mul(x, x), lt_scalar(CPU0, LT_F32, 1))};
  return read_all(outs, 2, v, kCap);
}

typedef int64_t (*graph_fn)(double *v);

/* ---- fixtures ----------------------------------------------------------------------- */

static int setup(void **state) {
  lt__backend_force(&lt__cpu_backend);
  assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "lt_cpu_ser"));
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  tu_reset_executor();
  return tu_setup(state);
}

static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  lt_set_persistent_cache(NULL, false);
  lt_cache_clear();
  tu_rm_tree(g_dir);
  lt__backend_force(NULL);
  return rc;
}

/* Calls fn(payload, len) for each entry of the directory; returns the count. */
static int each_entry(void (*fn)(const uint8_t *, size_t)) {
  DIR *d = opendir(g_dir);
  assert_non_null(d);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l < 4 || strcmp(de->d_name + l - 4, ".ltx") != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, de->d_name);
    size_t len;
    uint8_t *b = tu_read_file(path, &len);
    assert_true(len > LT_DISK_HEADER_BYTES + LT_DISK_CHECKSUM_BYTES);
    assert_memory_equal(b + LT_DISK_OFF_BACKEND, "cpu", 4);
    fn(b + LT_DISK_HEADER_BYTES, len - LT_DISK_HEADER_BYTES - LT_DISK_CHECKSUM_BYTES);
    free(b);
    n++;
  }
  closedir(d);
  return n;
}

/* deserialize then serialize gives the same bytes. */
static void same_bytes_again(const uint8_t *p, size_t n) {
  lt_executable *e = NULL;
  assert_int_equal(lt__cpu_backend.deserialize(p, n, &e), LT_OK);
  void *again;
  size_t alen;
  assert_int_equal(lt__cpu_backend.serialize(e, &again, &alen), LT_OK);
  assert_true(alen == n && memcmp(again, p, n) == 0);
  lt__free(again, alen);
  lt__cpu_backend.executable_free(e);
}

/* Cold (compiles, writes), then from disk after lt_cache_clear: nothing
 * compiled, every value equal to the cold run's. */
static void round_trip(graph_fn g, const char *name) {
  static double a[kCap], b[kCap];
  int64_t na = g(a);
  long long uncached = tu_counter("UncachedCompile");
  assert_true(uncached >= 1);
  assert_int_equal(tu_counter("PersistentCacheHit"), 0);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  int entries = each_entry(same_bytes_again);
  assert_true(entries >= 1);
  lt_cache_clear();
  int64_t nb = g(b);
  assert_int_equal(na, nb);
  assert_int_equal(tu_counter("UncachedCompile"), uncached);
  assert_true(tu_counter("PersistentCacheHit") >= 1);
  assert_int_equal(tu_counter("PersistentCacheDeserializeFailure"), 0);
  for (int64_t i = 0; i < na; i++)
    if (memcmp(&a[i], &b[i], sizeof a[i]) != 0)
      fail_msg("%s: value %lld: %.17g from disk, %.17g compiled", name, (long long)i, b[i], a[i]);
  print_message("%s: %lld values, %d entries, %lld compiles, %lld loaded from disk\n", name,
                (long long)na, entries, uncached, (long long)tu_counter("PersistentCacheHit"));
}

static void test_elementwise(void **s) {
  (void)s;
  static double v[kCap];
  int64_t n = g_elem(v);
  for (int64_t i = 0; i < n; i++) assert_true(fabs(v[i] - elem_want(i)) < 1e-5 * (1 + fabs(v[i])));
  tu_reset_executor();
  lt_cache_clear();
  tu_rm_tree(g_dir);
  assert_int_equal(mkdir(g_dir, 0700), 0);
  round_trip(g_elem, "fused elementwise");
}
static void test_reduce(void **s) {
  (void)s;
  round_trip(g_reduce, "reductions");
}
static void test_softmax(void **s) {
  (void)s;
  round_trip(g_softmax, "softmax");
}
static void test_matmul(void **s) {
  (void)s;
  round_trip(g_matmul, "matmul");
}
static void test_donate(void **s) {
  (void)s;
  round_trip(g_donate, "donation in place");
}
static void test_ref_fallback(void **s) {
  (void)s;
  round_trip(g_ref, "ref fallback");
}

/* ---- bad bytes ---------------------------------------------------------------------- */

static uint8_t *g_payload;
static size_t g_plen;

static void keep_payload(const uint8_t *p, size_t n) {
  g_payload = malloc(n);
  memcpy(g_payload, p, n);
  g_plen = n;
}

static void reseal(uint8_t *m, size_t n) {
  uint64_t h = XXH3_64bits(m, n - 8);
  for (int i = 0; i < 8; i++) m[n - 8 + i] = (uint8_t)(h >> (8 * i));
}

static int expect_rejected(const uint8_t *m, size_t n, const char *msg_part) {
  lt_executable *e = NULL;
  int rc = lt__cpu_backend.deserialize(m, n, &e);
  if (rc == LT_OK) {
    lt__cpu_backend.executable_free(e);
    return 1;
  }
  assert_int_equal(rc, LT_EINVAL);
  assert_null(e);
  if (msg_part && !strstr(lt_last_error(), msg_part))
    fail_msg("message '%s' lacks '%s'", lt_last_error(), msg_part);
  return 0;
}

static void test_bad_bytes(void **s) {
  (void)s;
  static double v[kCap];
  g_small(v);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(each_entry(keep_payload), 1);
  const uint8_t *p = g_payload;
  size_t n = g_plen;
  /* where the object code starts: u64 length, then that many bytes, then the checksum */
  size_t olen_at = 0;
  for (size_t q = 8; q + 16 <= n; q++) {
    uint64_t v64 = 0;
    for (int i = 0; i < 8; i++) v64 |= (uint64_t)p[q + i] << (8 * i);
    if (v64 == n - 16 - q) {
      olen_at = q;
      break;
    }
  }
  assert_true(olen_at > 0);
  for (size_t cut = 0; cut < n; cut++) assert_int_equal(expect_rejected(p, cut, NULL), 0);
  uint8_t *m = malloc(n);
  /* every single-byte change: the checksum catches it */
  for (size_t i = 0; i < n; i++)
    for (int x = 1; x < 256; x += 85) {
      memcpy(m, p, n);
      m[i] ^= (uint8_t)x;
      assert_int_equal(expect_rejected(m, n, NULL), 0);
    }
  /* changes to the plan that keep the checksum right: each field is checked */
  int accepted = 0, tried = 0;
  for (size_t i = 8; i < olen_at + 8; i++)
    for (int x = 1; x < 256; x += 51) {
      memcpy(m, p, n);
      m[i] ^= (uint8_t)x;
      reseal(m, n);
      accepted += expect_rejected(m, n, NULL);
      tried++;
    }
  print_message(
      "payload %zu bytes (plan %zu, object %zu): %d of %d resealed plan changes still "
      "decode\n",
      n, olen_at + 8, n - olen_at - 16, accepted, tried);
  memcpy(m, p, n);
  m[4] = 0x7f; /* no version of the format */
  reseal(m, n);
  assert_int_equal(expect_rejected(m, n, "format version"), 0);
  memcpy(m, p, n);
  m[0] ^= 1;
  assert_int_equal(expect_rejected(m, n, "not a cpu executable"), 0);
  assert_int_equal(expect_rejected(p, n - 1, NULL), 0);
  free(m);
  free(g_payload);
  g_payload = NULL;
  lt_clear_error();
}

/* ---- other processes ---------------------------------------------------------------- */

static int child_main(const char *mode, const char *dir) {
  lt__backend_force(&lt__cpu_backend);
  if (lt_set_persistent_cache(dir, false) != LT_OK) return 2;
  static double v[kCap];
  if (strcmp(mode, "read") == 0) {
    /* compiles first: its executable takes uid 1, whose symbol names the
     * cold process's entry also carries */
    lt_set_persistent_cache(NULL, false);
    g_reduce(v);
    if (lt_set_persistent_cache(dir, false) != LT_OK) return 2;
  }
  int64_t n = g_elem(v);
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(v[i] - elem_want(i)) < 1e-5 * (1 + fabs(v[i])))) return 3;
  long long uc = tu_counter("UncachedCompile"), hit = tu_counter("PersistentCacheHit");
  printf("child %s: UncachedCompile %lld, PersistentCacheHit %lld, values right\n", mode, uc, hit);
  if (strcmp(mode, "write") == 0) return uc == 1 && hit == 0 ? 0 : 4;
  return uc == 1 && hit == 1 ? 0 : 5; /* read: only g_reduce compiled */
}

static int run_child(const char *mode) {
  char self[512];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("LT_PERSISTENT_CACHE_PATH");
    unsetenv("LT_PERSISTENT_CACHE_READ_ONLY");
    execl(self, "test_cpu_serialize", "--child", mode, g_dir, (char *)NULL);
    _exit(127);
  }
  assert_true(pid > 0);
  return tu_wait_child(pid);
}

static void test_other_process(void **s) {
  (void)s;
  assert_int_equal(run_child("write"), 0);
  assert_int_equal(run_child("read"), 0);
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "--child") == 0) return child_main(argv[2], argv[3]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_elementwise, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduce, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul, setup, teardown),
      cmocka_unit_test_setup_teardown(test_donate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ref_fallback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_process, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
