/* Text corpora (lt_nn_text_*): a small directory the test writes, with the
 * kinds of entries the fortunes directory holds (index files, links,
 * subdirectories), and the errors. */
#include <sys/stat.h>
#include <unistd.h>

#include "lazytensor_nn.h"
#include "test_util.h"

static char g_dir[64];

static void write_text(const char *dir, const char *name, const char *text) {
  char path[320]; /* room for any g_dir and name: no truncation */
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fwrite(text, 1, strlen(text), f);
  fclose(f);
}

static int group_setup(void **state) {
  (void)state;
  return tu_mkdtemp(g_dir, sizeof g_dir, "lt_test_text_") ? 0 : -1;
}
static int group_teardown(void **state) {
  (void)state;
  return tu_rm_tree(g_dir);
}

static int setup(void **state) {
  lt_wait_device_ops(CPU0);
  return tu_setup(state);
}
#define DTEST(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown_wait)

/* Files in name order, skipping .dat, .u8 links, hidden files and
 * subdirectories; the vocabulary, ids and split. */
static void test_load(void **state) {
  (void)state;
  char dir[128], path[192], sub[192];
  snprintf(dir, sizeof dir, "%s/corpus", g_dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  write_text(dir, "b", "cab\n");
  write_text(dir, "a", "%\nzz");
  write_text(dir, "a.dat", "XXXX");
  write_text(dir, ".hidden", "YYYY");
  snprintf(path, sizeof path, "%s/b.u8", dir);
  assert_int_equal(symlink("b", path), 0);
  snprintf(path, sizeof path, "%s/c", dir);
  assert_int_equal(symlink("b", path), 0); /* a link without a suffix: skipped too */
  snprintf(sub, sizeof sub, "%s/off", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  write_text(sub, "x", "QQQQ");

  lt_nn_text t;
  if (lt_nn_text_load(dir, &t) != LT_OK) fail_msg("%s", lt_last_error());
  const char *want = "%\nzzcab\n";
  assert_int_equal(t.n, (int64_t)strlen(want));
  assert_int_equal(t.files, 2);
  assert_memory_equal(t.bytes, want, strlen(want));
  /* distinct bytes sorted: '\n' '%' 'a' 'b' 'c' 'z' */
  const uint8_t vocab[] = {'\n', '%', 'a', 'b', 'c', 'z'};
  assert_int_equal(t.vocab_size, 6);
  assert_memory_equal(t.vocab, vocab, sizeof vocab);
  for (int64_t i = 0; i < t.n; i++) assert_int_equal(t.vocab[t.ids[i]], t.bytes[i]);
  assert_int_equal(t.n_train, 8 * 9 / 10);

  /* windows: x the tokens, y the next ones */
  lt_scope_begin();
  lt_tensor *x, *y;
  const int64_t starts[2] = {0, 4};
  assert_int_equal(lt_nn_text_windows(&t, CPU0, starts, 2, 3, &x, &y), LT_OK);
  assert_int_equal(lt_ndim(x), 2);
  assert_int_equal(lt_dim(x, 0), 2);
  assert_int_equal(lt_dim(x, 1), 3);
  assert_int_equal(lt_get_dtype(y), LT_I64);
  int64_t xv[6], yv[6];
  assert_int_equal(lt_to_data(x, xv, sizeof xv), LT_OK);
  assert_int_equal(lt_to_data(y, yv, sizeof yv), LT_OK);
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 3; j++) {
      assert_int_equal(t.vocab[xv[r * 3 + j]], want[starts[r] + j]);
      assert_int_equal(t.vocab[yv[r * 3 + j]], want[starts[r] + j + 1]);
    }
  /* the last window that fits, and one past it */
  const int64_t last = t.n - 4, past = t.n - 3;
  assert_int_equal(lt_nn_text_windows(&t, CPU0, &last, 1, 3, &x, &y), LT_OK);
  assert_int_equal(lt_nn_text_windows(&t, CPU0, &past, 1, 3, &x, &y), LT_EINVAL);
  assert_null(x);
  assert_non_null(strstr(lt_last_error(), "leave the corpus"));
  assert_int_equal(lt_nn_text_windows(&t, CPU0, starts, 0, 3, &x, &y), LT_EINVAL);
  lt_scope_end();
  lt_nn_text_free(&t);
  lt_nn_text_free(&t); /* twice: cleared the first time */
  lt_nn_text_free(NULL);
}

static void test_errors(void **state) {
  (void)state;
  lt_nn_text t;
  assert_int_equal(lt_nn_text_load("/nonexistent/fortunes", &t), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "/nonexistent/fortunes");
  assert_null(t.bytes);
  assert_int_equal(lt_nn_text_load(g_dir, NULL), LT_EINVAL);
  /* a directory without text */
  char dir[128];
  snprintf(dir, sizeof dir, "%s/empty", g_dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  write_text(dir, "only.dat", "abc");
  assert_int_equal(lt_nn_text_load(dir, &t), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "no text file");
  write_text(dir, "one", "a");
  assert_int_equal(lt_nn_text_load(dir, &t), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "at least 2");
}

/* The default directory: the package is named when it is missing. */
static void test_fortunes_if_installed(void **state) {
  (void)state;
  lt_nn_text t;
  if (access(LT_NN_FORTUNES_DIR, R_OK) != 0) {
    assert_int_equal(lt_nn_text_load(NULL, &t), LT_EINVAL);
    tu_expect_substr(lt_last_error(), "`fortunes`");
    printf("# %s absent: only the message checked\n", LT_NN_FORTUNES_DIR);
    return;
  }
  if (lt_nn_text_load(NULL, &t) != LT_OK) fail_msg("%s", lt_last_error());
  assert_true(t.n > 1000000);
  assert_true(t.vocab_size > 60 && t.vocab_size <= 256);
  assert_int_equal(t.n_train, t.n * 9 / 10);
  lt_nn_text_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      DTEST(test_load),
      DTEST(test_errors),
      DTEST(test_fortunes_if_installed),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
