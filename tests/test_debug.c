/* Graph dumps (LT_SAVE_GRAPHS, text and dot) and compile explanations
 * (LT_DEBUG=1). The library reads these variables once per process, so each
 * scenario runs in a child forked before this process makes any lazytensor
 * call: the child sets the environment, sends its stderr to a file, syncs
 * some graphs and exits; the parent checks the files. */
#include <sys/wait.h>
#include <unistd.h>

#include "lazytensor_world.h"
#include "test_util.h"

/* ---- the child side -------------------------------------------------------------------- */

#define CHILD_CHECK(cond)                                                            \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      printf("child: %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, lt_last_error()); \
      fflush(stdout);                                                                \
      _exit(1);                                                                      \
    }                                                                                \
  } while (0)

static lt_tensor *vec(lt_dtype dt, int64_t n, double fill) {
  double v[16];
  float f[16];
  for (int64_t i = 0; i < n; i++) v[i] = f[i] = (float)(fill + (double)i);
  return lt_from_data(CPU0, dt, SHAPE(n), 1, dt == LT_F64 ? (const void *)v : (const void *)f);
}

/* Reads t and checks its first element. */
static void read_expect(lt_tensor *t, double want) {
  CHILD_CHECK(t != NULL);
  double out;
  CHILD_CHECK(lt_item(t, 0, &out) == LT_OK);
  CHILD_CHECK(fabs(out - want) < 1e-5);
}

/* Every case the compile explanation names, one graph each. */
static void scenario_explain(void) {
  lt_scope_begin();
  read_expect(lt_add(vec(LT_F32, 4, 1), vec(LT_F32, 4, 2)), 3);  /* A: first of its kind */
  read_expect(lt_add(vec(LT_F32, 8, 1), vec(LT_F32, 8, 2)), 3);  /* shape [4] vs [8] */
  read_expect(lt_add(vec(LT_F32, 4, 5), vec(LT_F32, 4, 5)), 10); /* A again: a cache hit */
  read_expect(lt_mul(vec(LT_F32, 4, 2), vec(LT_F32, 4, 3)), 6);  /* op add vs mul */
  read_expect(lt_add(vec(LT_F32, 4, 1), lt_scalar(CPU0, LT_F32, 1)), 2);
  read_expect(lt_add(vec(LT_F32, 4, 1), lt_scalar(CPU0, LT_F32, -1)), 0); /* constant */
  read_expect(lt_add(vec(LT_F64, 4, 1), vec(LT_F64, 4, 2)), 3);           /* dtype */
  read_expect(lt_exp(lt_add(vec(LT_F32, 4, 0), vec(LT_F32, 4, 0))), 1);   /* node count */
  lt_tensor *two[2] = {lt_neg(vec(LT_F32, 4, 1)), lt_abs(vec(LT_F32, 4, -1))};
  CHILD_CHECK(lt_sync(two, 2, true) == LT_OK); /* the first graph with 2 roots */
  read_expect(two[0], -1);
  read_expect(two[1], 1);
  lt_scope_end();
}

/* Two graphs that differ in shape. */
static void scenario_two_shapes(void) {
  lt_scope_begin();
  read_expect(lt_add(vec(LT_F32, 4, 1), vec(LT_F32, 4, 2)), 3);
  read_expect(lt_add(vec(LT_F32, 8, 1), vec(LT_F32, 8, 2)), 3);
  lt_scope_end();
}

/* Each replica of an in-process world of 2 reads a graph of its own value
 * (the same graph on both: one key), then a graph only rank 1 runs. */
static int replica_reads(int rank, lt_device dev, void *ctx) {
  (void)ctx;
  lt_scope_begin();
  float v[4] = {1, 2, 3, (float)rank};
  lt_tensor *x = lt_from_data(dev, LT_F32, SHAPE(4), 1, v);
  double out = -1;
  int rc = lt_item(lt_add(x, x), 3, &out);
  if (rc == LT_OK && out != 2.0 * rank) rc = LT_EINVAL; /* a wrong value */
  if (rc == LT_OK && rank == 1) rc = lt_item(lt_exp(x), 0, &out);
  lt_scope_end();
  return rc;
}

static void scenario_world(void) {
  lt_world *w = NULL;
  CHILD_CHECK(lt_world_local(2, &w) == LT_OK);
  CHILD_CHECK(lt_world_run(w, replica_reads, NULL) == LT_OK);
  lt_world_free(w);
  read_expect(lt_add(vec(LT_F32, 4, 1), vec(LT_F32, 4, 2)), 3); /* outside any world */
}

typedef struct env_var {
  const char *name, *value;
} env_var;

/* Runs scenario in a child with env set and stderr sent to stderr_path;
 * asserts that it exited with 0. */
static void run_child(void (*scenario)(void), const env_var *env, int nenv,
                      const char *stderr_path) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    for (int i = 0; i < nenv; i++) setenv(env[i].name, env[i].value, 1);
    if (!freopen(stderr_path, "w", stderr)) _exit(2);
    scenario();
    lt_wait_device_ops(CPU0);
    fflush(NULL);
    _exit(0);
  }
  assert_int_equal(tu_wait_child(pid), 0);
}

/* ---- the parent side ------------------------------------------------------------------- */

typedef struct tmpfile_t {
  char path[64];
} tmpfile_t;

static void tmp_make(tmpfile_t *t, const char *tag) {
  snprintf(t->path, sizeof t->path, "/tmp/lt_debug_%s_XXXXXX", tag);
  tu_mkstemp(t->path);
}

/* The key of the k-th "graph " header of a text dump (32 hex digits). */
static void header_key(const char *text, int k, char key[33]) {
  const char *p = text;
  for (int i = 0;; i++) {
    p = strstr(p, "graph ");
    assert_non_null(p);
    if (p == text || p[-1] == '\n') {
      if (i == k) break;
    } else {
      i--;
    }
    p++;
  }
  p += strlen("graph ");
  for (int i = 0; i < 32; i++) {
    if (!strchr("0123456789abcdef", p[i]) || !p[i]) fail_msg("bad key in '%.60s'", p);
    key[i] = p[i];
  }
  key[32] = '\0';
  assert_int_equal(p[32], ' ');
}

static void test_text_dump_and_explanations(void **state) {
  (void)state;
  tmpfile_t dump, err;
  tmp_make(&dump, "dump");
  tmp_make(&err, "stderr");
  env_var env[] = {{"LT_SAVE_GRAPHS", dump.path}, {"LT_DEBUG", "1"}};
  run_child(scenario_explain, env, 2, err.path);
  char *text = tu_read_file(dump.path, NULL), *log = tu_read_file(err.path, NULL);

  /* One graph per sync, each with its header and its nodes in post-order. */
  assert_int_equal(tu_occurrences(text, "\ngraph ") + (strncmp(text, "graph ", 6) == 0), 9);
  tu_expect_substr(text,
                   " reason=\"value read\" nodes=3 params=2 roots=1\n"
                   "  0 data f32[4] param 0\n"
                   "  1 data f32[4] param 1\n"
                   "  2 add f32[4] (0, 1) root 0\n\n");
  tu_expect_substr(text, "  0 data f32[8] param 0\n");
  tu_expect_substr(text, "  2 mul f32[4] (0, 1) root 0\n");
  tu_expect_substr(text, "  1 const f32[] value=-1\n");
  tu_expect_substr(text, "  0 data f64[4] param 0\n");
  tu_expect_substr(text, "  3 exp f32[4] (2) root 0\n");
  tu_expect_substr(text, " nodes=4 params=2 roots=2\n");
  tu_expect_substr(text, " root 1\n");
  char k0[33], k1[33], k2[33];
  header_key(text, 0, k0);
  header_key(text, 1, k1);
  header_key(text, 2, k2);
  assert_string_not_equal(k0, k1); /* another shape, another key */
  assert_string_equal(k0, k2);     /* the same graph on new data */

  /* LT_DEBUG=1: why each graph compiled, and a line per cache hit. */
  assert_int_equal(tu_occurrences(log, "lazytensor: compile "), 8);
  char line[128];
  snprintf(line, sizeof line, "lazytensor: compile %s (value read): 3 nodes, 2 params, 1 root\n",
           k0);
  tu_expect_substr(log, line);
  tu_expect_substr(log, "the first graph with 1 root:");
  tu_expect_substr(log, "node 0 (data): shape [4] vs [8]");
  tu_expect_substr(log, "node 2 (add): shape [4] vs [8]");
  snprintf(line, sizeof line, "closest earlier graph %s (value read): 3 of 3 nodes differ", k0);
  tu_expect_substr(log, line);
  snprintf(line, sizeof line, "lazytensor: sync: cache hit, 3 nodes, value read, key %s\n", k0);
  tu_expect_substr(log, line);
  assert_int_equal(tu_occurrences(log, "cache hit"), 1);
  tu_expect_substr(log, "1 of 3 nodes differ");
  tu_expect_substr(log, "node 2 (mul): op add vs mul");
  tu_expect_substr(log, "node 1 (const): constant 1 vs -1");
  tu_expect_substr(log, "dtype f32 vs f64");
  tu_expect_substr(log, "node count 3 vs 4");
  tu_expect_substr(log, "the first graph with 2 roots:");
  free(text);
  free(log);
  unlink(dump.path);
  unlink(err.path);
}

static void test_dot_dump(void **state) {
  (void)state;
  tmpfile_t dump, err;
  tmp_make(&dump, "dot");
  tmp_make(&err, "stderr");
  env_var env[] = {{"LT_SAVE_GRAPHS", dump.path}, {"LT_SAVE_GRAPHS_FORMAT", "dot"}};
  run_child(scenario_two_shapes, env, 2, err.path);
  char *text = tu_read_file(dump.path, NULL), *log = tu_read_file(err.path, NULL);
  assert_string_equal(log, ""); /* no LT_DEBUG: nothing on stderr */
  assert_int_equal(tu_occurrences(text, "digraph \"graph_"), 2);
  assert_int_equal(tu_occurrences(text, "{"), 2);
  assert_int_equal(tu_occurrences(text, "}"), 2);
  assert_int_equal(tu_occurrences(text, " -> "), 4); /* two operands per add */
  tu_expect_substr(text, "  n0 -> n2 [label=\"0\"];\n");
  tu_expect_substr(text, "  n1 -> n2 [label=\"1\"];\n");
  tu_expect_substr(text, "  n0 [label=\"0: data\\nf32[4]\\nparam 0\"];\n");
  tu_expect_substr(text, "  n2 [label=\"2: add\\nf32[8]\\nroot 0\", style=bold, peripheries=2];\n");
  tu_expect_substr(text, "(value read): 3 nodes, 2 params, 1 root\";\n");
  free(text);
  free(log);
  unlink(dump.path);
  unlink(err.path);
}

/* A path that cannot be written: execution goes on, one warning. */
static void test_dump_write_failure(void **state) {
  (void)state;
  tmpfile_t err;
  tmp_make(&err, "stderr");
  env_var env[] = {{"LT_SAVE_GRAPHS", "/nonexistent-lt-dir/graphs.txt"}};
  run_child(scenario_explain, env, 1, err.path);
  char *log = tu_read_file(err.path, NULL);
  assert_int_equal(tu_occurrences(log, "lazytensor: cannot write LT_SAVE_GRAPHS"), 1);
  assert_int_equal(tu_occurrences(log, "\n"), 1);
  free(log);
  unlink(err.path);
}

/* The replicas of a world write one file each (path.<rank>) and name their
 * rank on stderr, as the reference writes one file per ordinal; a device in
 * no world writes the plain path. */
static void test_per_rank_outputs(void **state) {
  (void)state;
  tmpfile_t dump, err;
  tmp_make(&dump, "dump");
  tmp_make(&err, "stderr");
  env_var env[] = {{"LT_SAVE_GRAPHS", dump.path}, {"LT_DEBUG", "1"}};
  run_child(scenario_world, env, 2, err.path);
  char p0[80], p1[80];
  snprintf(p0, sizeof p0, "%s.0", dump.path);
  snprintf(p1, sizeof p1, "%s.1", dump.path);
  char *plain = tu_read_file(dump.path, NULL), *t0 = tu_read_file(p0, NULL),
       *t1 = tu_read_file(p1, NULL), *log = tu_read_file(err.path, NULL);
  assert_non_null(t0);
  assert_non_null(t1);
  /* rank 0: its read; rank 1: its read and its exp; the plain file: the
   * read made outside the world */
  assert_int_equal(tu_occurrences(t0, " reason=\"value read\""), 1);
  assert_int_equal(tu_occurrences(t1, " reason=\"value read\""), 2);
  assert_int_equal(tu_occurrences(t1, "exp"), 1);
  assert_int_equal(tu_occurrences(t0, "exp"), 0);
  assert_int_equal(tu_occurrences(plain, " reason=\"value read\""), 1);
  /* every explanation line of a replica carries its rank */
  assert_int_equal(tu_occurrences(log, "lazytensor[rank 0]: "), 1);
  assert_int_equal(tu_occurrences(log, "lazytensor[rank 1]: "), 2);
  assert_int_equal(
      tu_occurrences(log, "lazytensor: ") - tu_occurrences(log, "lazytensor: a value was read"), 1);
  free(plain);
  free(t0);
  free(t1);
  free(log);
  unlink(dump.path);
  unlink(p0);
  unlink(p1);
  unlink(err.path);
}

/* Neither variable set (or LT_DEBUG=0): no output at all. */
static void test_quiet_by_default(void **state) {
  (void)state;
  tmpfile_t err;
  tmp_make(&err, "stderr");
  env_var env[] = {{"LT_DEBUG", "0"}, {"LT_SAVE_GRAPHS", ""}};
  run_child(scenario_explain, env, 2, err.path);
  char *log = tu_read_file(err.path, NULL);
  assert_string_equal(log, "");
  free(log);
  unlink(err.path);
}

int main(void) {
  /* This process itself never calls the library: every scenario forks first. */
  unsetenv("LT_DEBUG");
  unsetenv("LT_SAVE_GRAPHS");
  unsetenv("LT_SAVE_GRAPHS_FORMAT");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text_dump_and_explanations), cmocka_unit_test(test_dot_dump),
      cmocka_unit_test(test_dump_write_failure),         cmocka_unit_test(test_quiet_by_default),
      cmocka_unit_test(test_per_rank_outputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
