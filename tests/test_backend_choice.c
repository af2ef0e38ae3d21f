/* Choosing the backend from the program (lt_set_backend / lt_get_backend;
 * issue #30: the Python binding reaches it too): the default is LT_BACKEND's,
 * a bad name is refused with the known names and changes nothing, the next
 * graph runs on the chosen backend with executables kept apart per backend,
 * tensors alive cross a switch both ways with their values and storage
 * intact, and a switch to a backend that cannot read host storage is refused
 * while tensors are alive. */
#include "test_util.h"

#include "../src/backend/ref/ref_api.h"

/* The backend the process started with, restored after every test. */
static char g_initial[32];

static int setup(void **state) {
  tu_reset_executor();
  return tu_setup(state);
}
static int teardown(void **state) {
  int rc = tu_teardown_wait(state);
  if (lt_set_backend(g_initial) != LT_OK) fail_msg("restoring %s: %s", g_initial, lt_last_error());
  return rc;
}
#define BTEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* LT_BACKEND's choice, else cpu (an unknown name falls back to cpu). */
static const char *expected_default(void) {
  const char *env = getenv("LT_BACKEND");
  return env && (strcmp(env, "ref") == 0 || strcmp(env, "cpu") == 0) ? env : "cpu";
}

static void test_default_is_environment(void **state) {
  (void)state;
  assert_string_equal(g_initial, expected_default());
}

static void test_bad_name_refused(void **state) {
  (void)state;
  const char *before = lt_get_backend();
  assert_int_equal(lt_set_backend("gpu"), LT_EINVAL);
  const char *msg = lt_last_error();
  if (!strstr(msg, "lt_set_backend") || !strstr(msg, "'gpu'") || !strstr(msg, "ref, cpu"))
    fail_msg("message: %s", msg);
  assert_string_equal(lt_get_backend(), before);
  assert_int_equal(lt_set_backend(NULL), LT_EINVAL);
  if (!strstr(lt_last_error(), "lt_set_backend") || !strstr(lt_last_error(), "NULL"))
    fail_msg("message: %s", lt_last_error());
  assert_int_equal(lt_set_backend(""), LT_EINVAL);
  assert_string_equal(lt_get_backend(), before);
}

static lt_tensor *mulc(lt_tensor *t, double c) { return lt_mul(t, lt_scalar(CPU0, LT_F32, c)); }
static lt_tensor *addc(lt_tensor *t, double c) { return lt_add(t, lt_scalar(CPU0, LT_F32, c)); }
/* Exact: small integers in f32. */
#define assert_value(v, want)                                    \
  do {                                                           \
    double v_ = (v), w_ = (want);                                \
    if (v_ != w_) fail_msg("%s is %g, expected %g", #v, v_, w_); \
  } while (0)

/* sum(x * 3 + 1) of a fresh x: the same graph each call. */
static double run_graph(void) {
  lt_scope_begin();
  lt_tensor *x = tu_f32(SHAPE(4), 1, ((float[]){1, 2, 3, 4}));
  lt_tensor *y = lt_sum(addc(mulc(x, 3), 1), NULL, 0, false);
  float v = 0;
  if (!y || lt_to_data(y, &v, sizeof v) != LT_OK) fail_msg("run: %s", lt_last_error());
  lt_scope_end();
  return v;
}

static void test_next_graph_runs_on_choice(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  assert_int_equal(lt_set_backend("cpu"), LT_OK);
  assert_string_equal(lt_get_backend(), "cpu");
  assert_string_not_equal(lt_get_isa(CPU0, LT_F32), "ref"); /* oneDNN's set */
  assert_value(run_graph(), 34.0);
  int64_t cpu_entries = lt_cache_entries();

  assert_int_equal(lt_set_backend("ref"), LT_OK);
  assert_string_equal(lt_get_backend(), "ref");
  assert_string_equal(lt_get_isa(CPU0, LT_F32), "ref");
  assert_value(run_graph(), 34.0);
  /* ref compiled its own executable: cpu's was not reused */
  assert_int_equal(lt_cache_entries(), cpu_entries + 1);

  assert_int_equal(lt_set_backend("cpu"), LT_OK);
  assert_value(run_graph(), 34.0);
  assert_int_equal(lt_cache_entries(), cpu_entries + 1); /* cpu's found again */
}

static void read4(lt_tensor *t, float *v) {
  if (!t || lt_to_data(t, v, 4 * sizeof *v) != LT_OK) fail_msg("read: %s", lt_last_error());
}

/* Values made by one backend read and combined by the other, both ways. */
static void cross_once(void) {
  lt_scope_begin();
  assert_int_equal(lt_set_backend("cpu"), LT_OK);
  lt_tensor *x = tu_f32(SHAPE(4), 1, ((float[]){1, 2, 3, 4}));
  lt_tensor *a = mulc(x, 2); /* made by cpu */
  float v[4];
  read4(a, v);
  assert_int_equal(lt_set_backend("ref"), LT_OK);
  assert_string_equal(lt_get_backend(), "ref");
  lt_tensor *b = addc(a, 1); /* ref reads cpu's buffer */
  read4(b, v);
  for (int i = 0; i < 4; i++) assert_value(v[i], 2 * (i + 1) + 1);
  lt_tensor *c = mulc(x, 10); /* a pending graph traced before the switch back */
  assert_int_equal(lt_set_backend("cpu"), LT_OK);
  lt_tensor *d = lt_mul(b, a); /* cpu reads ref's buffer and its own */
  read4(d, v);
  for (int i = 0; i < 4; i++) assert_value(v[i], (2 * (i + 1) + 1) * 2 * (i + 1));
  read4(c, v);
  for (int i = 0; i < 4; i++) assert_value(v[i], 10 * (i + 1));
  read4(a, v); /* the first value, untouched */
  for (int i = 0; i < 4; i++) assert_value(v[i], 2 * (i + 1));
  lt_scope_end();
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
}

static void test_tensors_cross_switch(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  int64_t live0 = lt_device_live_tensors(CPU0), bytes[2];
  for (int run = 0; run < 2; run++) {
    cross_once();
    assert_int_equal(lt_device_live_tensors(CPU0), live0);
    assert_int_equal(lt_device_memory(CPU0, &bytes[run], NULL), LT_OK);
  }
  /* each buffer went back through its own backend: a second round leaves
   * no more storage behind than the first (whose executables keep their
   * constants) */
  assert_int_equal(bytes[1], bytes[0]);
}

/* ref's entry points over storage that is not host memory (as a GPU's would
 * be): nothing runs on it here, the test only chooses it. */
static lt_backend g_devmem;

static void test_foreign_storage_refused_while_alive(void **state) {
  (void)state;
  g_devmem = lt__ref_backend;
  g_devmem.name = "devmem";
  g_devmem.host_storage = false;
  assert_int_equal(lt__backend_register(&g_devmem), LT_OK);
  const char *before = lt_get_backend();
  lt_tensor *x = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_retain(x);
  int64_t n = lt_device_live_tensors(CPU0);
  assert_true(n >= 1);
  assert_int_equal(lt_set_backend("devmem"), LT_EINVAL);
  char want[96];
  snprintf(want, sizeof want, "%lld tensors are alive on CPU:0; release them first", (long long)n);
  if (!strstr(lt_last_error(), "lt_set_backend") || !strstr(lt_last_error(), want))
    fail_msg("message: %s", lt_last_error());
  assert_string_equal(lt_get_backend(), before);
  float v[2];
  assert_int_equal(lt_to_data(x, v, sizeof v), LT_OK); /* still served by the old one */
  assert_value(v[1], 2);
  lt_release(x); /* the scope's reference and ours */
  lt_scope_end();
  assert_int_equal(lt_device_live_tensors(CPU0), 0);
  assert_int_equal(lt_set_backend("devmem"), LT_OK);
  assert_string_equal(lt_get_backend(), "devmem");
  /* the names listed now include it */
  assert_int_equal(lt_set_backend("tpu"), LT_EINVAL);
  if (!strstr(lt_last_error(), "ref, cpu, devmem")) fail_msg("message: %s", lt_last_error());
  assert_int_equal(lt_set_backend(g_initial), LT_OK);
  lt_scope_begin(); /* for the teardown's scope_end */
}

int main(void) {
  const char *initial = lt_get_backend();
  if (!initial) {
    fprintf(stderr, "lt_get_backend: %s\n", lt_last_error());
    return 1;
  }
  snprintf(g_initial, sizeof g_initial, "%s", initial);
  const struct CMUnitTest tests[] = {
      BTEST(test_default_is_environment),
      BTEST(test_bad_name_refused),
      BTEST(test_next_graph_runs_on_choice),
      BTEST(test_tensors_cross_switch),
      BTEST(test_foreign_storage_refused_while_alive), /* last: it registers a backend */
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
