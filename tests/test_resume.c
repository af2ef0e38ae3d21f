/* Resuming training from a parameter file with optimizer state, and that
 * file's format.
 *
 * The resume test: a child process trains N Adam (or AdamW) steps and saves
 * the parameters with the optimizer's state (lt_nn_checkpoint_save) and the RNG
 * state (lt_get_rng_state); a second child process builds the model afresh
 * (other init, another lr), loads both and trains M more; this process trains
 * N + M steps in one go. The two final files (parameters, moments, step
 * counts, lr) and RNG states must be equal byte for byte. The steps use
 * dropout, gradient clipping and a parameter that gets no grad on some steps,
 * so every piece of state matters; a control run that loads the parameters
 * alone must differ. The children are this binary run again (--child). */
#include "test_util.h"
#include "lazytensor_nn.h"

enum { N_FIRST = 4, M_MORE = 3, BATCH = 16, FEAT = 6, HID = 8, CLS = 3 };

/* ---- the training run (parent and children alike) ------------------------------------ */

typedef struct run {
  lt_nn_linear l1, l2;
  lt_tensor *params[4];
  lt_nn_optim *opt;
  lt_tensor *x, *y;
} run;

static void run_init(run *r, lt_nn_optim_kind kind, uint64_t seed, double lr) {
  lt_set_seed(CPU0, seed);
  if (lt_nn_linear_init(&r->l1, CPU0, LT_F32, FEAT, HID, true) != LT_OK ||
      lt_nn_linear_init(&r->l2, CPU0, LT_F32, HID, CLS, true) != LT_OK)
    fail_msg("init: %s", lt_last_error());
  lt_tensor *ps[4] = {r->l1.weight, r->l1.bias, r->l2.weight, r->l2.bias};
  memcpy(r->params, ps, sizeof ps);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(kind);
  cfg.lr = lr;
  r->opt = lt_nn_optim_create(&cfg, r->params, 4);
  if (!r->opt) fail_msg("optim: %s", lt_last_error());
  float xv[BATCH * FEAT];
  int64_t yv[BATCH];
  for (int i = 0; i < BATCH * FEAT; i++) xv[i] = tu_wave_at(3, i);
  for (int i = 0; i < BATCH; i++) yv[i] = (xv[i * FEAT] > 0) + (xv[i * FEAT + 1] > 0.5f);
  lt_scope_begin(); /* x and y are the run's, whether or not a scope is open */
  r->x = lt_retain(tu_f32(SHAPE(BATCH, FEAT), 2, xv));
  r->y = lt_retain(tu_i64(SHAPE(BATCH), 1, yv));
  lt_scope_end();
}

static void run_free(run *r) {
  lt_nn_optim_free(r->opt);
  lt_nn_linear_free(&r->l1);
  lt_nn_linear_free(&r->l2);
  lt_release(r->x);
  lt_release(r->y);
}

/* Training step number s: forward with dropout, backward, clipping, and an
 * update in which the last bias gets no grad on every third step. */
static void run_step(run *r, int s) {
  lt_scope_begin();
  lt_tensor *h = lt_dropout(lt_nn_relu(lt_nn_linear_forward(&r->l1, r->x)), 0.25, true);
  lt_tensor *loss = lt_nn_cross_entropy_ex(lt_nn_linear_forward(&r->l2, h), r->y,
                                           LT_NN_REDUCTION_MEAN, -100, 0.05);
  if (!loss || lt_backward(loss) != LT_OK) fail_msg("backward: %s", lt_last_error());
  if (lt_nn_clip_grad_norm(r->params, 4, 1.0, 2.0, NULL) != LT_OK)
    fail_msg("clip: %s", lt_last_error());
  lt_tensor *g[4];
  for (int i = 0; i < 4; i++) g[i] = lt_grad(r->params[i]);
  if (s % 3 == 0) g[3] = NULL;
  if (lt_nn_optim_step_grads(r->opt, g) != LT_OK) fail_msg("step: %s", lt_last_error());
  for (int i = 0; i < 4; i++) lt_zero_grad(r->params[i]);
  lt_scope_end();
  if (lt_mark_step(CPU0) != LT_OK) fail_msg("mark_step: %s", lt_last_error());
}

static void save_rng(const char *path) {
  lt_rng_state st;
  assert_int_equal(lt_get_rng_state(CPU0, &st), LT_OK);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(st.bytes, 1, sizeof st.bytes, f), sizeof st.bytes);
  assert_int_equal(fclose(f), 0);
}

static void load_rng(const char *path) {
  size_t n = 0;
  uint8_t *b = tu_read_file(path, &n);
  lt_rng_state st;
  assert_int_equal(n, sizeof st.bytes);
  memcpy(st.bytes, b, sizeof st.bytes);
  free(b);
  if (lt_set_rng_state(CPU0, &st) != LT_OK) fail_msg("set rng: %s", lt_last_error());
}

/* Saves the parameters with the optimizer state to path, the RNG state to
 * path.rng. */
static void save_all(run *r, const char *path) {
  char rng[512];
  snprintf(rng, sizeof rng, "%s.rng", path);
  if (lt_nn_checkpoint_save(r->params, 4, r->opt, path) != LT_OK)
    fail_msg("save: %s", lt_last_error());
  save_rng(rng);
}

/* ---- children ---------------------------------------------------------------------------- */

/* --child first KIND OUT: N steps from seed 11, saved to OUT.
 * --child resume KIND IN OUT [params-only]: a fresh model (seed 99, lr 0.5),
 *   IN loaded, M steps, saved to OUT. */
static int child_main(int argc, char **argv) {
  if (argc < 5) return 2;
  lt_nn_optim_kind kind = (lt_nn_optim_kind)atoi(argv[3]);
  run r;
  if (strcmp(argv[2], "first") == 0) {
    run_init(&r, kind, 11, 0.01);
    if (lt_mark_step(CPU0) != LT_OK) return 3;
    for (int s = 0; s < N_FIRST; s++) run_step(&r, s);
    save_all(&r, argv[4]);
  } else if (strcmp(argv[2], "resume") == 0 && argc >= 6) {
    bool params_only = argc >= 7 && strcmp(argv[6], "params-only") == 0;
    run_init(&r, kind, 99, 0.5);
    int rc = params_only ? lt_nn_params_load(r.params, 4, argv[4])
                         : lt_nn_checkpoint_load(r.params, 4, r.opt, argv[4]);
    if (rc != LT_OK) {
      fprintf(stderr, "load: %s\n", lt_last_error());
      return 4;
    }
    if (lt_mark_step(CPU0) != LT_OK) return 3;
    char rng[512];
    snprintf(rng, sizeof rng, "%s.rng", argv[4]);
    load_rng(rng);
    for (int s = N_FIRST; s < N_FIRST + M_MORE; s++) run_step(&r, s);
    save_all(&r, argv[5]);
  } else {
    return 2;
  }
  run_free(&r);
  return lt_wait_device_ops(CPU0) == LT_OK ? 0 : 5;
}

/* Runs this binary with --child and the given arguments; its exit status. */
static int spawn(const char *const *args, int nargs) {
  static char self[512];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  char *argv[12] = {"test_resume", "--child"};
  assert_true(nargs <= 9);
  for (int i = 0; i < nargs; i++) argv[2 + i] = (char *)args[i];
  argv[2 + nargs] = NULL;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    execv(self, argv);
    _exit(127);
  }
  assert_true(pid > 0);
  return tu_wait_child(pid);
}

/* ---- tests ------------------------------------------------------------------------------- */

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", g_dir, name);
}

static void expect_same_file(const char *a, const char *b, bool same) {
  size_t na, nb;
  uint8_t *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
  bool eq = na == nb && memcmp(x, y, na) == 0;
  free(x);
  free(y);
  if (eq != same) fail_msg("%s and %s are %s", a, b, eq ? "equal" : "different");
}

static void resume_case(lt_nn_optim_kind kind) {
  char kbuf[8], first[128], resumed[128], control[128], ref[128], rng1[160], rng2[160];
  snprintf(kbuf, sizeof kbuf, "%d", (int)kind);
  path_in(first, sizeof first, "first");
  path_in(resumed, sizeof resumed, "resumed");
  path_in(control, sizeof control, "control");
  path_in(ref, sizeof ref, "ref");
  const char *a1[] = {"first", kbuf, first};
  assert_int_equal(spawn(a1, 3), 0);
  const char *a2[] = {"resume", kbuf, first, resumed};
  assert_int_equal(spawn(a2, 4), 0);
  const char *a3[] = {"resume", kbuf, first, control, "params-only"};
  assert_int_equal(spawn(a3, 5), 0);
  /* N + M steps in this process */
  lt_scope_begin();
  run r;
  run_init(&r, kind, 11, 0.01);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  for (int s = 0; s < N_FIRST + M_MORE; s++) run_step(&r, s);
  save_all(&r, ref);
  assert_int_equal(lt_nn_optim_param_steps(r.opt, 0), N_FIRST + M_MORE);
  assert_int_equal(lt_nn_optim_param_steps(r.opt, 3), N_FIRST + M_MORE - 3); /* steps 0, 3, 6 */
  run_free(&r);
  lt_scope_end();
  expect_same_file(ref, resumed, true);
  snprintf(rng1, sizeof rng1, "%s.rng", ref);
  snprintf(rng2, sizeof rng2, "%s.rng", resumed);
  expect_same_file(rng1, rng2, true);
  /* the comparison can fail: without the optimizer's state it does */
  expect_same_file(ref, control, false);
}

static void test_adam_resumes_bit_exactly(void **state) {
  (void)state;
  resume_case(LT_NN_ADAM);
}

static void test_adamw_resumes_bit_exactly(void **state) {
  (void)state;
  resume_case(LT_NN_ADAMW);
}

/* ---- the file format ---------------------------------------------------------------- */

static uint64_t fnv1a(const uint8_t *b, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* Rewrites path with b (n bytes), the checksum recomputed when fix is set. */
static void write_bytes(const char *path, uint8_t *b, size_t n, bool fix) {
  if (fix) {
    uint64_t h = fnv1a(b, n - 8);
    memcpy(b + n - 8, &h, 8);
  }
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static uint32_t u32_at(const uint8_t *b, size_t at) {
  uint32_t v;
  memcpy(&v, b + at, 4);
  return v;
}

/* Version 1 files (lt_nn_params_save) still load; lt_nn_checkpoint_load wants optimizer
 * state; unknown file and section versions fail naming the version; other
 * sections are skipped; a mismatched optimizer is refused and nothing
 * changes. Layout: header 16 bytes, tensor [2] f32: 8 + 8 + 8 bytes, then
 * (version 2) the section count at 40, the tag at 44, its version at 48. */
static void test_file_versions(void **state) {
  (void)state;
  char path[128];
  path_in(path, sizeof path, "format");
  lt_tensor *p = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  assert_int_equal(lt_set_requires_grad(p, true), LT_OK);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_nn_optim *o = lt_nn_optim_create(&cfg, &p, 1);
  assert_non_null(o);
  lt_tensor *g = tu_f32(SHAPE(2), 1, ((float[]){0.5f, -0.5f}));
  assert_int_equal(lt_nn_optim_step_grads(o, &g), LT_OK);
  /* plain: version 1, loads with lt_nn_params_load, not with lt_nn_checkpoint_load */
  assert_int_equal(lt_nn_params_save(&p, 1, path), LT_OK);
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  assert_int_equal(u32_at(b, 8), 1);
  free(b);
  lt_tensor *q = tu_f32(SHAPE(2), 1, ((float[]){0, 0}));
  assert_int_equal(lt_nn_params_load(&q, 1, path), LT_OK);
  tu_expect(q, LT_F32, SHAPE(2), 1, (double[]){0.999f, 2.001f}, 1e-6);
  assert_int_equal(lt_nn_checkpoint_load(&q, 1, o, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "holds no optimizer state");
  /* with state: version 2; lt_nn_params_load reads its parameters */
  assert_int_equal(lt_nn_checkpoint_save(&p, 1, o, path), LT_OK);
  b = tu_read_file(path, &n);
  assert_int_equal(u32_at(b, 8), 2);
  assert_int_equal(u32_at(b, 40), 1);
  assert_memory_equal(b + 44, "OPTM", 4);
  assert_int_equal(u32_at(b, 48), 1);
  lt_tensor *z = tu_f32(SHAPE(2), 1, ((float[]){0, 0}));
  assert_int_equal(lt_nn_params_load(&z, 1, path), LT_OK);
  tu_expect(z, LT_F32, SHAPE(2), 1, (double[]){0.999f, 2.001f}, 1e-6);
  /* a fresh optimizer takes the step counts, moments and lr */
  lt_nn_optim_config other = cfg;
  other.lr = 0.5;
  lt_nn_optim *o2 = lt_nn_optim_create(&other, &z, 1);
  assert_int_equal(lt_nn_checkpoint_load(&z, 1, o2, path), LT_OK);
  assert_int_equal(lt_nn_optim_steps(o2), 1);
  assert_int_equal(lt_nn_optim_param_steps(o2, 0), 1);
  /* the same step on both: the same result (lr 1e-3 restored, t = 2) */
  assert_int_equal(lt_nn_optim_step_grads(o, &g), LT_OK);
  assert_int_equal(lt_nn_optim_step_grads(o2, &g), LT_OK);
  float vp[2], vz[2];
  assert_int_equal(lt_to_data(p, vp, sizeof vp), LT_OK);
  assert_int_equal(lt_to_data(z, vz, sizeof vz), LT_OK);
  assert_memory_equal(vp, vz, sizeof vp);
  /* an unknown file version */
  uint8_t *bad = malloc(n);
  memcpy(bad, b, n);
  bad[8] = 3;
  write_bytes(path, bad, n, true);
  assert_int_equal(lt_nn_params_load(&z, 1, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "format version 3; this build reads 1 and 2");
  /* an unknown optimizer state version */
  memcpy(bad, b, n);
  bad[48] = 7;
  write_bytes(path, bad, n, true);
  assert_int_equal(lt_nn_checkpoint_load(&z, 1, o2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "optimizer state version 7; this build reads 1");
  /* a section of another tag is skipped */
  memcpy(bad, b, n);
  memcpy(bad + 44, "XTRA", 4);
  write_bytes(path, bad, n, true);
  assert_int_equal(lt_nn_params_load(&z, 1, path), LT_OK);
  assert_int_equal(lt_nn_checkpoint_load(&z, 1, o2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "holds no optimizer state");
  /* a corrupt byte in the state: the checksum */
  memcpy(bad, b, n);
  bad[n - 9] ^= 0x40;
  write_bytes(path, bad, n, false);
  assert_int_equal(lt_nn_checkpoint_load(&z, 1, o2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "checksum");
  /* truncated inside the optimizer section */
  write_bytes(path, b, 60, false);
  assert_int_equal(lt_nn_checkpoint_load(&z, 1, o2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "truncated");
  free(bad);
  /* another kind of optimizer: refused, nothing assigned or changed */
  write_bytes(path, b, n, false);
  free(b);
  lt_nn_optim_config sgd = lt_nn_optim_defaults(LT_NN_SGD);
  sgd.momentum = 0.9;
  lt_tensor *w = tu_f32(SHAPE(2), 1, ((float[]){7, 8}));
  lt_nn_optim *o3 = lt_nn_optim_create(&sgd, &w, 1);
  assert_int_equal(lt_nn_checkpoint_load(&w, 1, o3, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "optimizer kind 1");
  tu_expect(w, LT_F32, SHAPE(2), 1, (double[]){7, 8}, 0);
  assert_int_equal(lt_nn_optim_param_steps(o3, 0), 0);
  /* another parameter shape */
  lt_tensor *v = tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}));
  lt_nn_optim *o4 = lt_nn_optim_create(&cfg, &v, 1);
  lt_tensor *z2 = tu_f32(SHAPE(2), 1, ((float[]){0, 0}));
  assert_int_equal(lt_nn_checkpoint_load(&z2, 1, o4, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "optimizer parameter 0 is f32 [2], the model's is f32 [3]");
  tu_expect(z2, LT_F32, SHAPE(2), 1, (double[]){0, 0}, 0);
  lt_nn_optim_free(o);
  lt_nn_optim_free(o2);
  lt_nn_optim_free(o3);
  lt_nn_optim_free(o4);
}

static int group_setup(void **state) {
  (void)state;
  return tu_mkdtemp(g_dir, sizeof g_dir, "lt_test_resume_") ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  return tu_rm_tree(g_dir);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_adam_resumes_bit_exactly, tu_setup, tu_teardown_wait),
      cmocka_unit_test_setup_teardown(test_adamw_resumes_bit_exactly, tu_setup, tu_teardown_wait),
      cmocka_unit_test_setup_teardown(test_file_versions, tu_setup, tu_teardown_wait),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
