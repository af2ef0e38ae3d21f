/* Saved programs: lt_program_save / lt_program_load round trips (same
 * process, another process), the compile environment rule (saved code used
 * only under the environment that wrote it, the IR compiled otherwise), and
 * the loader's rejection of every damaged or foreign file. */
#include <fcntl.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "test_util.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_node.h"
#include "../src/backend/backend.h"
#include "../src/exec/cache.h"
#include "../src/exec/program_file.h"

extern char **environ;

static char g_dir[128];
static char g_path[192], g_bad[192];

/* ---- the model: a two-layer MLP with captured weights and a scalar --------------- */

enum { B = 4, IN = 6, HID = 8, OUT = 3 };

static float g_w1[IN * HID], g_b1[HID], g_w2[HID * OUT];

static void init_weights(void) {
  for (int i = 0; i < IN * HID; i++) g_w1[i] = tu_wave_at(1, i) * 0.5f;
  for (int i = 0; i < HID; i++) g_b1[i] = tu_wave_at(2, i) * 0.1f;
  for (int i = 0; i < HID * OUT; i++) g_w2[i] = tu_wave_at(3, i) * 0.5f;
}

static lt_tensor *make_input(int seed) {
  float x[B * IN];
  for (int i = 0; i < B * IN; i++) x[i] = tu_wave_at(seed, i);
  return tu_f32(SHAPE(B, IN), 2, x);
}

/* probs = softmax(relu(x W1 + b1) W2 * 0.75), and their row sums. */
static void trace_model(lt_tensor *x, lt_tensor **probs, lt_tensor **rows) {
  lt_tensor *w1 = tu_f32(SHAPE(IN, HID), 2, g_w1), *b1 = tu_f32(SHAPE(HID), 1, g_b1);
  lt_tensor *w2 = tu_f32(SHAPE(HID, OUT), 2, g_w2);
  lt_tensor *h = lt_relu(lt_add(lt_matmul(x, w1), b1));
  lt_tensor *logits = lt_mul(lt_matmul(h, w2), lt_scalar(CPU0, LT_F32, 0.75));
  *probs = lt_softmax(logits, 1);
  *rows = lt_sum(*probs, (const int[]){1}, 1, false);
}

/* The host oracle of the first output. */
static void oracle(int seed, float *probs) {
  for (int b = 0; b < B; b++) {
    double h[HID], l[OUT], mx = -1e30, z = 0;
    for (int j = 0; j < HID; j++) {
      double s = g_b1[j];
      for (int i = 0; i < IN; i++) s += (double)tu_wave_at(seed, b * IN + i) * g_w1[i * HID + j];
      h[j] = s > 0 ? s : 0;
    }
    for (int o = 0; o < OUT; o++) {
      double s = 0;
      for (int j = 0; j < HID; j++) s += h[j] * g_w2[j * OUT + o];
      l[o] = s * 0.75;
      if (l[o] > mx) mx = l[o];
    }
    for (int o = 0; o < OUT; o++) z += exp(l[o] - mx);
    for (int o = 0; o < OUT; o++) probs[b * OUT + o] = (float)(exp(l[o] - mx) / z);
  }
}

/* A program over the model, with input x (kept by the caller). */
static lt_program *make_program(lt_tensor *x) {
  lt_tensor *probs, *rows;
  trace_model(x, &probs, &rows);
  lt_tensor *outs[2] = {probs, rows};
  lt_program *p = lt_program_create(outs, 2, &x, 1);
  assert_non_null(p);
  return p;
}

/* Runs p on input seed; the outputs' bytes (B*OUT floats, then B floats). */
static void run_bytes(lt_program *p, int seed, float *out) {
  lt_tensor *x = make_input(seed);
  lt_tensor *outs[2] = {NULL, NULL};
  assert_int_equal(lt_program_run(p, &x, 1, outs), LT_OK);
  assert_int_equal(lt_to_data(outs[0], out, B * OUT * sizeof(float)), LT_OK);
  assert_int_equal(lt_to_data(outs[1], out + B * OUT, B * sizeof(float)), LT_OK);
  lt_release(outs[0]);
  lt_release(outs[1]);
  lt_release(x);
}

static void check_against_oracle(const float *got, int seed) {
  float want[B * OUT];
  oracle(seed, want);
  for (int i = 0; i < B * OUT; i++)
    if (!tu_near(got[i], want[i], 1e-5)) fail_msg("output %d: %g, want %g", i, got[i], want[i]);
  for (int b = 0; b < B; b++) assert_true(tu_near(got[B * OUT + b], 1.0, 1e-5));
}

/* Saves the model's program to g_path; its outputs on seed 7 in out. */
static void save_model(float *out) {
  lt_tensor *x = make_input(5);
  lt_program *p = make_program(x);
  lt_release(x);
  run_bytes(p, 7, out);
  assert_int_equal(lt_program_save(p, g_path), LT_OK);
  lt_program_free(p);
}

static const lt_backend *backend_of(int i) { return i == 0 ? &lt__ref_backend : &lt__cpu_backend; }

static int setup(void **state) {
  (void)state;
  init_weights();
  tu_mkdtemp(g_dir, sizeof g_dir, "lt-program-file");
  snprintf(g_path, sizeof g_path, "%s/model.ltp", g_dir);
  snprintf(g_bad, sizeof g_bad, "%s/bad.ltp", g_dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  lt__backend_force(NULL);
  lt__program_file_set_env_salt(0);
  lt__op_table_set_text(NULL);
  tu_rm_tree(g_dir);
  return 0;
}

/* ---- round trips ------------------------------------------------------------------ */

static void test_round_trip_uses_saved_code(void **state) {
  (void)state;
  for (int bi = 0; bi < tu_nbackends(); bi++) {
    lt__backend_force(backend_of(bi));
    float before[B * OUT + B], after[B * OUT + B];
    save_model(before);
    check_against_oracle(before, 7);
    lt__cache_clear();
    lt_counters_reset();
    lt_program *q = lt_program_load(g_path);
    if (!q) fail_msg("load: %s", lt_last_error());
    run_bytes(q, 7, after);
    assert_memory_equal(before, after, sizeof before);
    /* the saved code was used: nothing compiled */
    assert_int_equal(tu_counter("UncachedCompile"), 0);
    float other[B * OUT + B];
    run_bytes(q, 9, other); /* new inputs, no retrace */
    check_against_oracle(other, 9);
    lt_program_free(q);
    lt__backend_force(NULL);
  }
}

/* Another CPU or compiler (the environment key), and another op table: the
 * code is not used, the IR is compiled, the values are the same. */
static void test_other_environment_recompiles(void **state) {
  (void)state;
  for (int bi = 0; bi < tu_nbackends(); bi++) {
    for (int how = 0; how < 2; how++) {
      lt__backend_force(backend_of(bi));
      float before[B * OUT + B], after[B * OUT + B];
      save_model(before);
      if (how == 0)
        lt__program_file_set_env_salt(0x5eed);
      else
        lt__op_table_set_text("a library with another op set\n");
      lt__cache_clear();
      lt_counters_reset();
      lt_program *q = lt_program_load(g_path);
      if (!q) fail_msg("load: %s", lt_last_error());
      assert_int_equal(tu_counter("UncachedCompile"), 1);
      run_bytes(q, 7, after);
      assert_memory_equal(before, after, sizeof before);
      lt_program_free(q);
      lt__program_file_set_env_salt(0);
      lt__op_table_set_text(NULL);
      lt__backend_force(NULL);
    }
  }
}

/* A program whose output is one of its inputs unchanged, and one with no inputs. */
static void test_edge_programs(void **state) {
  (void)state;
  lt_tensor *x = make_input(3);
  lt_tensor *y = lt_add(x, lt_scalar(CPU0, LT_F32, 0.0));
  lt_tensor *k = lt_mul(tu_f32(SHAPE(2), 1, ((float[]){1.5f, -2.0f})), lt_scalar(CPU0, LT_F32, 3));
  lt_tensor *outs[2] = {y, k};
  lt_program *p = lt_program_create(outs, 2, &x, 1);
  assert_non_null(p);
  assert_int_equal(lt_program_save(p, g_path), LT_OK);
  lt_program_free(p);
  lt_program *q = lt_program_load(g_path);
  if (!q) fail_msg("load: %s", lt_last_error());
  lt_tensor *got[2];
  assert_int_equal(lt_program_run(q, &x, 1, got), LT_OK);
  float a[B * IN], b[2];
  assert_int_equal(lt_to_data(got[0], a, sizeof a), LT_OK);
  assert_int_equal(lt_to_data(got[1], b, sizeof b), LT_OK);
  for (int i = 0; i < B * IN; i++) assert_true(a[i] == tu_wave_at(3, i));
  assert_true(b[0] == 4.5f && b[1] == -6.0f);
  lt_release(got[0]);
  lt_release(got[1]);
  /* wrong input shape: refused as for any program */
  lt_tensor *small = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  assert_int_equal(lt_program_run(q, &small, 1, got), LT_ESHAPE);
  lt_release(small);
  lt_program_free(q);
  lt_release(x);
  lt_release(y);
  lt_release(k);
}

/* ---- another process ---------------------------------------------------------------- */

/* Child: loads argv[3], runs it on seed 7, writes the output bytes to argv[4]. */
static int child_main(char **argv) {
  init_weights();
  lt_program *q = lt_program_load(argv[2]);
  if (!q) {
    fprintf(stderr, "child: load: %s\n", lt_last_error());
    return 2;
  }
  float out[B * OUT + B];
  lt_tensor *x = make_input(7);
  lt_tensor *outs[2] = {NULL, NULL};
  if (lt_program_run(q, &x, 1, outs) != LT_OK ||
      lt_to_data(outs[0], out, B * OUT * sizeof(float)) != LT_OK ||
      lt_to_data(outs[1], out + B * OUT, B * sizeof(float)) != LT_OK) {
    fprintf(stderr, "child: run: %s\n", lt_last_error());
    return 3;
  }
  int64_t compiles = -1;
  lt_get_counter("UncachedCompile", &compiles);
  FILE *f = fopen(argv[3], "wb");
  if (!f || fwrite(out, sizeof out, 1, f) != 1 || fwrite(&compiles, sizeof compiles, 1, f) != 1)
    return 4;
  fclose(f);
  lt_release(outs[0]);
  lt_release(outs[1]);
  lt_release(x);
  lt_program_free(q);
  return 0;
}

static void test_other_process_bit_identical(void **state) {
  (void)state;
  for (int bi = 0; bi < tu_nbackends(); bi++) {
    lt__backend_force(backend_of(bi));
    float before[B * OUT + B];
    save_model(before);
    lt__backend_force(NULL);
    char self[512], out[256], backend[64];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(len > 0);
    self[len] = '\0';
    snprintf(out, sizeof out, "%s/child.out", g_dir);
    snprintf(backend, sizeof backend, "LT_BACKEND=%s", backend_of(bi)->name);
    int n = 0;
    while (environ[n]) n++;
    char **envp = calloc((size_t)n + 2, sizeof *envp);
    int k = 0;
    for (int i = 0; i < n; i++)
      if (strncmp(environ[i], "LT_BACKEND=", 11) != 0 &&
          strncmp(environ[i], "LT_PERSISTENT_CACHE_", 20) != 0)
        envp[k++] = environ[i];
    envp[k++] = backend;
    char *const argv[] = {"test_program_file", "--child", g_path, out, NULL};
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
      execve(self, argv, envp);
      _exit(127);
    }
    free(envp);
    assert_true(pid > 0);
    assert_int_equal(tu_wait_child(pid), 0);
    size_t got_n;
    uint8_t *got = tu_read_file(out, &got_n);
    assert_int_equal(got_n, sizeof before + sizeof(int64_t));
    assert_memory_equal(got, before, sizeof before);
    int64_t compiles;
    memcpy(&compiles, got + sizeof before, sizeof compiles);
    assert_int_equal(compiles, 0); /* same machine and library: the saved code ran */
    free(got);
  }
}

/* ---- damaged and foreign files ------------------------------------------------------- */

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void fix_checksum(uint8_t *b, size_t n) {
  put_u64(b + n - LT_PGM_CHECKSUM_BYTES, XXH3_64bits(b, n - LT_PGM_CHECKSUM_BYTES));
}

static void write_bytes(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Loading b[0..n) fails with LT_EINVAL, a message holding needle (NULL: any),
 * and leaves the cache and the live tensors as they were. */
static void expect_rejected(const uint8_t *b, size_t n, const char *needle, const char *what) {
  write_bytes(g_bad, b, n);
  int64_t entries = lt_cache_entries();
  int64_t live = 0, peak = 0;
  lt_device_memory(CPU0, &live, &peak);
  lt_clear_error();
  lt_program *q = lt_program_load(g_bad);
  if (q) fail_msg("%s: loaded", what);
  if (lt_last_status() != LT_EINVAL)
    fail_msg("%s: status %d (%s)", what, lt_last_status(), lt_last_error());
  if (needle && !strstr(lt_last_error(), needle))
    fail_msg("%s: error '%s' lacks '%s'", what, lt_last_error(), needle);
  assert_int_equal(lt_cache_entries(), entries);
  int64_t live2 = 0;
  lt_device_memory(CPU0, &live2, &peak);
  assert_int_equal(live2, live);
}

/* The offsets where the sections start (after the header). */
static int section_starts(const uint8_t *b, size_t n, size_t *at) {
  size_t pos = LT_PGM_HEADER_BYTES;
  for (int i = 0; i < LT_PGM_NSECTIONS; i++) {
    at[i] = pos;
    pos += 16 + get_u64(b + pos + 8);
    assert_true(pos <= n - LT_PGM_CHECKSUM_BYTES);
  }
  assert_int_equal(pos, n - LT_PGM_CHECKSUM_BYTES);
  return LT_PGM_NSECTIONS;
}

/* The model's program saved to g_path (before: its outputs), read back whole
 * into *n bytes, with at[] its sections' starts. */
static uint8_t *saved_model_file(float *before, size_t *n, size_t *at) {
  save_model(before);
  uint8_t *good = tu_read_file(g_path, n);
  section_starts(good, *n, at);
  return good;
}

static void test_rejects_damaged_files(void **state) {
  (void)state;
  float before[B * OUT + B];
  size_t n, at[LT_PGM_NSECTIONS];
  uint8_t *good = saved_model_file(before, &n, at);
  uint8_t *b = malloc(n + 64);
  char what[96];

  write_bytes(g_bad, NULL, 0);
  expect_rejected(good, 0, "bad magic", "empty file");
  /* truncation: at every section boundary, a byte either side, inside the
   * header, and every 13th byte */
  for (size_t cut = 1; cut < n; cut++) {
    bool boundary = cut % 13 == 0 || cut < LT_PGM_HEADER_BYTES + 2;
    for (int i = 0; i < LT_PGM_NSECTIONS; i++) boundary |= cut + 1 >= at[i] && cut <= at[i] + 17;
    boundary |= cut + 9 >= n;
    if (!boundary) continue;
    snprintf(what, sizeof what, "truncated at %zu of %zu", cut, n);
    expect_rejected(good, cut, cut < 4 ? "bad magic" : "truncated", what);
  }
  /* a flipped bit in every section (and in the header, the checksum) */
  size_t flips[] = {LT_PGM_OFF_ENV + 3, LT_PGM_OFF_KEY,      at[0] + 20, at[1] + 30,
                    at[2] + 40,         (at[2] + at[3]) / 2, at[3] + 20, n - 3};
  for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
    memcpy(b, good, n);
    b[flips[i]] ^= 0x04;
    snprintf(what, sizeof what, "bit flip at %zu", flips[i]);
    expect_rejected(b, n, "checksum", what);
  }
  /* foreign: another magic; another format version (checksum kept right) */
  memcpy(b, good, n);
  memcpy(b, "LTXC", 4);
  expect_rejected(b, n, "bad magic", "disk cache magic");
  memcpy(b, good, n);
  b[LT_PGM_OFF_VERSION] = 2;
  fix_checksum(b, n);
  expect_rejected(b, n, "format version 2", "version 2");
  /* trailing bytes, as they are and with the length and checksum made consistent */
  memcpy(b, good, n);
  memset(b + n, 0xab, 16);
  expect_rejected(b, n + 16, "trailing bytes", "16 trailing bytes");
  memcpy(b, good, n - LT_PGM_CHECKSUM_BYTES);
  memset(b + n - LT_PGM_CHECKSUM_BYTES, 0, 16);
  put_u64(b + LT_PGM_OFF_LENGTH, n + 16);
  fix_checksum(b, n + 16);
  expect_rejected(b, n + 16, "after the last section", "bytes after the sections");
  /* an op this library does not know (as from a newer library): named in the error */
  memcpy(b, good, n);
  size_t name_at = at[1] + 16 + 12 + 3; /* section header, counts, first op's number and length */
  b[name_at] = 'Z';
  fix_checksum(b, n);
  expect_rejected(b, n, "unknown to this library", "unknown op name");
  /* a text file */
  const char *text = "hello, this is not a program\n";
  expect_rejected((const uint8_t *)text, strlen(text), "bad magic", "text");
  /* a missing file */
  assert_null(lt_program_load("/nonexistent/lt/program.ltp"));
  assert_int_equal(lt_last_status(), LT_ENOTFOUND);
  assert_null(lt_program_load(NULL));
  /* the good file still loads after all that */
  lt_program *q = lt_program_load(g_path);
  assert_non_null(q);
  lt_program_free(q);
  free(b);
  free(good);
}

/* Checksum made right again: a changed byte in the signature or the graph
 * (what a buggy or malicious writer could produce) still fails cleanly or
 * loads a program; never crashes. */
static void test_consistent_checksum_bad_fields(void **state) {
  (void)state;
  lt__backend_force(&lt__ref_backend);
  float before[B * OUT + B];
  size_t n, at[LT_PGM_NSECTIONS];
  uint8_t *good = saved_model_file(before, &n, at);
  uint8_t *b = malloc(n);
  int loaded = 0, rejected = 0;
  for (size_t pos = at[0]; pos < at[2]; pos++) {
    for (int v = 0; v < 2; v++) {
      memcpy(b, good, n);
      b[pos] = v ? (uint8_t)(b[pos] + 1) : 0xff;
      if (b[pos] == good[pos]) continue;
      fix_checksum(b, n);
      write_bytes(g_bad, b, n);
      lt_program *q = lt_program_load(g_bad);
      if (q) {
        loaded++;
        lt_program_free(q);
      } else {
        rejected++;
      }
      lt_clear_error();
    }
  }
  print_message("consistent-checksum edits: %d loaded, %d rejected\n", loaded, rejected);
  assert_true(rejected > 0);
  free(b);
  free(good);
  lt__backend_force(NULL);
}

/* ---- nodes that disagree with their operands ----------------------------------------- */

/* Where node fields sit in the graph section (docs/DEPLOY.md): per node its
 * op, dtype and rank, and the offsets of its shape and attrs. */
typedef struct node_at {
  char op[32];
  size_t at, shape_at, attrs_at;
  int ndim, nattrs;
} node_at;

static uint32_t get_u32(const uint8_t *p) { return (uint32_t)get_u64(p) & 0xffffffffu; }

/* The first node of op name `want` in the graph section starting at sec. */
static node_at find_node(const uint8_t *b, size_t sec, const char *want) {
  size_t pos = sec + 16;
  uint32_t nnodes = get_u32(b + pos), nused = get_u32(b + pos + 8);
  pos += 12;
  char names[LT_OP_COUNT][32];
  uint16_t nums[LT_OP_COUNT];
  for (uint32_t k = 0; k < nused; k++) {
    nums[k] = (uint16_t)(b[pos] | b[pos + 1] << 8);
    uint8_t len = b[pos + 2];
    snprintf(names[k], sizeof names[k], "%.*s", (int)len, (const char *)b + pos + 3);
    pos += 3 + len;
  }
  for (uint32_t i = 0; i < nnodes; i++) {
    node_at n = {.at = pos};
    uint16_t num = (uint16_t)(b[pos] | b[pos + 1] << 8);
    for (uint32_t k = 0; k < nused; k++)
      if (nums[k] == num) memcpy(n.op, names[k], sizeof n.op); /* both 32 bytes */
    n.ndim = b[pos + 3];
    int nops = b[pos + 4] | b[pos + 5] << 8;
    n.nattrs = b[pos + 6] | b[pos + 7] << 8;
    n.shape_at = pos + 16;
    n.attrs_at = n.shape_at + 8 * (size_t)n.ndim + 4 * (size_t)nops;
    pos = n.attrs_at + 8 * (size_t)n.nattrs + (strcmp(n.op, "data") == 0 ? 4 : 0);
    if (strcmp(n.op, want) == 0) return n;
  }
  fail_msg("no %s node", want);
  return (node_at){0};
}

/* A node whose shape, dtype or attrs disagree with its operands (checksum
 * made right) is refused at load, naming the node and the field; before,
 * such a matmul or relu loaded and crashed its kernel at run time. */
static void test_node_disagreeing_with_operands(void **state) {
  (void)state;
  float before[B * OUT + B];
  size_t n, at[LT_PGM_NSECTIONS];
  uint8_t *good = saved_model_file(before, &n, at);
  uint8_t *b = malloc(n);
  static const struct {
    const char *op, *field, *needle;
  } cases[] = {
      {"matmul", "shape", "(matmul): shape [4, 9] where the operands and attrs give [4, 8]"},
      {"relu", "shape", "(relu): shape [4, 7] where the operands and attrs give [4, 8]"},
      {"matmul", "dtype", "(matmul): dtype f64 where the op table's rule gives f32"},
      /* bf16's id is a dtype (7), refused only for disagreeing with the rule;
       * the first id after it (LT_NUM_DTYPES) is unknown, on any node */
      {"matmul", "bf16", "(matmul): dtype bf16 where the op table's rule gives f32"},
      {"relu", "past", "(relu): dtype 8 unknown"},
      {"data", "past", "(data): dtype 8 unknown"},
      {"softmax", "attr", "(softmax): attrs[0] (axis) is 2, outside [0, 1]"},
      {"sum", "attr", "(sum): attrs[1] (keepdim) is 2, outside [0, 1]"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memcpy(b, good, n);
    node_at nd = find_node(b, at[1], cases[c].op);
    if (strcmp(cases[c].field, "shape") == 0) {
      uint8_t *last = b + nd.shape_at + 8 * (size_t)(nd.ndim - 1);
      put_u64(last, get_u64(last) + (strcmp(cases[c].op, "relu") == 0 ? (uint64_t)-1 : 1));
    } else if (strcmp(cases[c].field, "dtype") == 0) {
      b[nd.at + 2] = LT_F64;
    } else if (strcmp(cases[c].field, "bf16") == 0) {
      b[nd.at + 2] = LT_BF16;
    } else if (strcmp(cases[c].field, "past") == 0) {
      b[nd.at + 2] = LT_NUM_DTYPES;
    } else {
      assert_true(nd.nattrs >= 1);
      put_u64(b + nd.attrs_at + 8 * (size_t)(nd.nattrs - 1), 2);
    }
    fix_checksum(b, n);
    expect_rejected(b, n, cases[c].needle, cases[c].needle);
  }
  free(b);
  free(good);
}

/* The same damage in the ref backend's saved code (a matmul instruction
 * whose shape disagrees with its operands, checksum made right): the code
 * is refused as it is read, the IR compiled instead, and the values are
 * right. Before, the damaged code was run as it was. */
static void test_damaged_ref_code_recompiles(void **state) {
  (void)state;
  lt__backend_force(&lt__ref_backend);
  float before[B * OUT + B], after[B * OUT + B];
  size_t n, at[LT_PGM_NSECTIONS];
  uint8_t *b = saved_model_file(before, &n, at);
  /* the ref executable: 5 u32 header fields, then per instruction u16 op, u8
   * dtype, u8 ndim, i64 shape[ndim], u64 fattr, i32 param, u32 nops, u32
   * operands[nops], u32 nattrs, i64 attrs[nattrs] */
  size_t pos = at[3] + 16, end = at[3] + 16 + get_u64(b + at[3] + 8);
  uint32_t ninstr = get_u32(b + pos + 8);
  pos += 20;
  bool damaged = false;
  for (uint32_t i = 0; i < ninstr && !damaged && pos < end; i++) {
    int op = b[pos] | b[pos + 1] << 8, nd = b[pos + 3];
    size_t shape_at = pos + 4;
    pos = shape_at + 8 * (size_t)nd + 8 + 4;
    uint32_t nops = get_u32(b + pos);
    pos += 4 + 4 * (size_t)nops;
    uint32_t nattrs = get_u32(b + pos);
    pos += 4 + 8 * (size_t)nattrs;
    if (op == LT_OP_MATMUL) {
      uint8_t *last = b + shape_at + 8 * (size_t)(nd - 1);
      put_u64(last, get_u64(last) + 1);
      damaged = true;
    }
  }
  assert_true(damaged);
  fix_checksum(b, n);
  write_bytes(g_bad, b, n);
  lt__cache_clear();
  lt_counters_reset();
  lt_program *q = lt_program_load(g_bad);
  if (!q) fail_msg("load: %s", lt_last_error());
  assert_int_equal(tu_counter("UncachedCompile"), 1); /* the code was refused */
  run_bytes(q, 7, after);
  assert_memory_equal(before, after, sizeof before);
  lt_program_free(q);
  free(b);
  lt__backend_force(NULL);
}

/* A FIFO (or any file that is not regular) is refused before it is opened:
 * opening one for reading would wait for a writer forever. The alarm turns
 * a regression into a failure instead of a hung test. */
static void test_fifo_refused(void **state) {
  (void)state;
  char fifo[224];
  snprintf(fifo, sizeof fifo, "%s/program.fifo", g_dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  alarm(20);
  lt_clear_error();
  lt_program *q = lt_program_load(fifo);
  alarm(0);
  assert_null(q);
  assert_int_equal(lt_last_status(), LT_EINVAL);
  if (!strstr(lt_last_error(), "lt_program_load") || !strstr(lt_last_error(), "not a regular file"))
    fail_msg("error '%s'", lt_last_error());
  /* a directory too */
  assert_null(lt_program_load(g_dir));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "not a regular file"));
  unlink(fifo);
}

#define PTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "--child") == 0) return child_main(argv);
  const struct CMUnitTest tests[] = {
      PTEST(test_round_trip_uses_saved_code),
      PTEST(test_other_environment_recompiles),
      PTEST(test_edge_programs),
      PTEST(test_other_process_bit_identical),
      PTEST(test_rejects_damaged_files),
      PTEST(test_consistent_checksum_bad_fields),
      PTEST(test_node_disagreeing_with_operands),
      PTEST(test_damaged_ref_code_recompiles),
      PTEST(test_fifo_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
