/* Optimizers against torch.optim (1.13) for three steps on a 3-element
 * parameter with given grads; the expected values were produced by
 * torch.optim in f64 (SGD's first row checks by hand: 1 - 0.1 * 0.1 = 0.99). */
#include "test_util.h"
#include "lazytensor_nn.h"
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

static const double kG[3][3] = {{0.1, -0.2, 0.3}, {0.5, 0.5, -0.5}, {-1.0, 0.0, 2.0}};
static const double kP0[3] = {1.0, -2.0, 3.0};

/* tu_setup_fresh: each test counts its own compiles. */
#define OTEST(f) cmocka_unit_test_setup_teardown(f, tu_setup_fresh, tu_teardown_wait)

/* Three steps with cfg in dtype dt; lrs (or NULL) sets the lr before each
 * step; compares with want[step] and checks that the steps compiled once. */
static void run3(lt_nn_optim_config cfg, lt_dtype dt, const double want[3][3], const double *lrs,
                 double tol) {
  lt_tensor *p =
      dt == LT_F64 ? tu_f64(SHAPE(3), 1, kP0) : tu_f32(SHAPE(3), 1, ((float[]){1.0f, -2.0f, 3.0f}));
  assert_non_null(p);
  assert_int_equal(lt_set_requires_grad(p, true), LT_OK);
  lt_nn_optim *o = lt_nn_optim_create(&cfg, &p, 1);
  if (!o) fail_msg("create: %s", lt_last_error());
  assert_int_equal(lt_mark_step(CPU0), LT_OK); /* parameter and state become device data */
  int64_t compiles = tu_counter("UncachedCompile");
  for (int s = 0; s < 3; s++) {
    lt_scope_begin();
    if (lrs) assert_int_equal(lt_nn_optim_set_lr(o, lrs[s]), LT_OK);
    lt_tensor *g = lt_cast(tu_f64(SHAPE(3), 1, kG[s]), dt);
    assert_int_equal(lt_nn_optim_step_grads(o, &g), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    tu_expect(p, dt, SHAPE(3), 1, want[s], tol);
  }
  assert_int_equal(lt_nn_optim_steps(o), 3);
  assert_int_equal(tu_counter("UncachedCompile") - compiles, 1);
  lt_nn_optim_free(o);
}

static void test_sgd(void **state) {
  (void)state;
  static const double want[3][3] = {{0.99, -1.98, 2.97}, {0.94, -2.03, 3.02}, {1.04, -2.03, 2.82}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 0.1;
  run3(c, LT_F64, want, NULL, 1e-12);
  run3(c, LT_F32, want, NULL, 1e-6);
}

static void test_sgd_momentum(void **state) {
  (void)state;
  static const double want[3][3] = {
      {0.99, -1.98, 2.97}, {0.931, -2.012, 2.993}, {0.9779, -2.0408, 2.8137}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 0.1;
  c.momentum = 0.9;
  run3(c, LT_F64, want, NULL, 1e-12);
}

static void test_sgd_nesterov(void **state) {
  (void)state;
  static const double want[3][3] = {
      {0.981, -1.962, 2.943}, {0.8779, -2.0408, 3.0137}, {1.02011, -2.06672, 2.65233}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 0.1;
  c.momentum = 0.9;
  c.nesterov = true;
  run3(c, LT_F64, want, NULL, 1e-12);
}

static void test_sgd_weight_decay(void **state) {
  (void)state;
  static const double want[3][3] = {{0.989, -1.978, 2.967},
                                    {0.928111, -2.006222, 2.984333},
                                    {0.972382789, -2.029615578, 2.796948367}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 0.1;
  c.momentum = 0.9;
  c.weight_decay = 0.01;
  run3(c, LT_F64, want, NULL, 1e-12);
}

static void test_adam(void **state) {
  (void)state;
  static const double want[3][3] = {{0.90000000999999896, -1.9000000049999999, 2.9000000033333331},
                                    {0.81389538618078494, -1.944221530217233, 2.929356123098128},
                                    {0.84058905397529349, -1.9784048971759303, 2.8743727872024438}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAM);
  c.lr = 0.1;
  run3(c, LT_F64, want, NULL, 1e-12);
  run3(c, LT_F32, want, NULL, 1e-6);
}

/* This process's resident memory, in bytes. */
static int64_t resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long size = 0, resident = 0;
  if (!f || fscanf(f, "%lld %lld", &size, &resident) != 2) fail_msg("cannot read /proc/self/statm");
  fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

/* Adam's state (m and v, zeros shaped like the parameter: 128 MiB here) is
 * made of pages nobody has written: creating the optimizer writes no zeros
 * (lt__calloc takes the C library's calloc), so the process grows by far
 * less than the state's size until a step uses it. Valgrind's calloc writes
 * its zeros; ASan maps shadow (an eighth of the state). */
static void test_adam_state_costs_no_memory_until_used(void **state) {
  (void)state;
  if (RUNNING_ON_VALGRIND) skip();
  const int64_t n = 16 << 20; /* f32: 64 MiB */
  lt_tensor *p = lt_zeros(CPU0, LT_F32, &n, 1);
  assert_non_null(p);
  assert_int_equal(lt_set_requires_grad(p, true), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  int64_t before = resident_bytes();
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_nn_optim *o = lt_nn_optim_create(&c, &p, 1);
  if (!o) fail_msg("create: %s", lt_last_error());
  int64_t grown = resident_bytes() - before;
  lt_nn_optim_free(o);
  lt_release(p);
  if (grown >= n * 4)
    fail_msg("creating Adam over 64 MiB grew the process by %lld bytes", (long long)grown);
}

static void test_adam_weight_decay(void **state) {
  (void)state;
  static const double want[3][3] = {{0.90000000499999977, -1.9000000024999999, 2.9000000016666667},
                                    {0.80801986384822033, -1.892645493092959, 2.8613529972101515},
                                    {0.82103511016239683, -1.8649277661693324, 2.7918062670377011}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAM);
  c.lr = 0.1;
  c.weight_decay = 0.1;
  run3(c, LT_F64, want, NULL, 1e-12);
}

static void test_adamw(void **state) {
  (void)state;
  static const double want[3][3] = {{0.89000000999999895, -1.8800000049999999, 2.8700000033333328},
                                    {0.7949953860807849, -1.905421530167233, 2.8706561230647942},
                                    {0.81373910001448557, -1.9205506818242579, 2.7869662259384622}};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAMW);
  c.lr = 0.1;
  c.weight_decay = 0.1;
  run3(c, LT_F64, want, NULL, 1e-12);
}

/* The lr changes every step (and the bias corrections do anyway): one compile. */
static void test_changing_lr_compiles_once(void **state) {
  (void)state;
  static const double want[3][3] = {{0.900000009999999, -1.9000000049999999, 2.900000003333333},
                                    {0.856947698090392, -1.9221107676086164, 2.9146780632157308},
                                    {0.8596170648698428, -1.9255291043044862, 2.909179729626162}};
  static const double lrs[3] = {0.1, 0.05, 0.01};
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAM);
  run3(c, LT_F64, want, lrs, 1e-12);
  /* lr 1 and then 0 would be IR constants through lt_scalar: still one graph */
  static const double lrs2[3] = {0.5, 1.0, 0.0};
  lt_nn_optim_config s = lt_nn_optim_defaults(LT_NN_SGD);
  static const double want2[3][3] = {{0.95, -1.9, 2.85}, {0.45, -2.4, 3.35}, {0.45, -2.4, 3.35}};
  run3(s, LT_F64, want2, lrs2, 1e-12);
}

/* lt_nn_optim_step reads the grads of lt_backward and drops them. */
static void test_step_from_backward(void **state) {
  (void)state;
  lt_tensor *p = tu_f64(SHAPE(3), 1, kP0);
  lt_set_requires_grad(p, true);
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 0.1;
  lt_nn_optim *o = lt_nn_optim_create(&c, &p, 1);
  assert_non_null(o);
  lt_tensor *loss = lt_sum(lt_mul(p, tu_f64(SHAPE(3), 1, kG[0])), NULL, 0, false);
  if (lt_backward(loss) != LT_OK) fail_msg("backward: %s", lt_last_error());
  assert_non_null(lt_grad(p));
  assert_int_equal(lt_nn_optim_step(o), LT_OK);
  assert_null(lt_grad(p));
  tu_expect(p, LT_F64, SHAPE(3), 1, (double[]){0.99, -1.98, 2.97}, 1e-12);
  /* no grad: skipped, as PyTorch */
  assert_int_equal(lt_nn_optim_step(o), LT_OK);
  tu_expect(p, LT_F64, SHAPE(3), 1, (double[]){0.99, -1.98, 2.97}, 1e-12);
  lt_nn_optim_free(o);
}

static void test_errors(void **state) {
  (void)state;
  lt_tensor *p = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_tensor *i = tu_i32(SHAPE(2), 1, ((int32_t[]){1, 2}));
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.nesterov = true;
  assert_null(lt_nn_optim_create(&c, &p, 1));
  assert_non_null(strstr(lt_last_error(), "nesterov"));
  c = lt_nn_optim_defaults(LT_NN_ADAM);
  c.beta1 = 1.0;
  assert_null(lt_nn_optim_create(&c, &p, 1));
  assert_non_null(strstr(lt_last_error(), "betas"));
  c = lt_nn_optim_defaults(LT_NN_ADAM);
  c.lr = -1;
  assert_null(lt_nn_optim_create(&c, &p, 1));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  assert_null(lt_nn_optim_create(&c, &i, 1));
  c = lt_nn_optim_defaults(LT_NN_ADAM);
  assert_null(lt_nn_optim_create(&c, &i, 1));
  assert_int_equal(lt_last_status(), LT_EDTYPE);
  lt_nn_optim *o = lt_nn_optim_create(&c, &p, 1);
  assert_non_null(o);
  lt_tensor *bad = tu_f32(SHAPE(3), 1, ((float[]){1, 2, 3}));
  assert_int_equal(lt_nn_optim_step_grads(o, &bad), LT_ESHAPE);
  assert_non_null(strstr(lt_last_error(), "[3]"));
  assert_int_equal(lt_nn_optim_steps(o), 0);
  assert_int_equal(lt_nn_optim_set_lr(o, NAN), LT_EINVAL);
  lt_nn_optim_free(o);
}

/* ---- per-parameter weight decay ---- */

/* torch.optim's update of one element (x, its state m and v, step t) by grad g with weight
 * decay wd, in double: the oracle of the per-parameter weight decay tests. */
static double ref_update(const lt_nn_optim_config *c, double wd, double x, double g, double *m,
                         double *v, int t) {
  if (c->kind == LT_NN_SGD) {
    g += wd * x;
    *m = c->momentum * *m + g; /* the buffer starts at 0: its first value is g */
    return x - c->lr * *m;
  }
  if (c->kind == LT_NN_ADAMW)
    x *= 1 - c->lr * wd;
  else
    g += wd * x;
  *m = c->beta1 * *m + (1 - c->beta1) * g;
  *v = c->beta2 * *v + (1 - c->beta2) * g * g;
  double bc1 = 1 - pow(c->beta1, t), bc2 = 1 - pow(c->beta2, t);
  return x - c->lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + c->eps);
}

/* Parameters a (its own weight decay, changed every step, through 0 and 1)
 * and b (the config's), lr changing too: values against ref_update, and the
 * steps after the first reuse its executable. */
static void per_param_wd(lt_nn_optim_kind kind, lt_dtype dt, double tol) {
  static const double kWd[3] = {0.1, 0.0, 1.0}, kLr[3] = {0.1, 0.05, 1.0};
  lt_nn_optim_config c = lt_nn_optim_defaults(kind);
  c.momentum = kind == LT_NN_SGD ? 0.9 : 0;
  c.weight_decay = 0.05;
  double xa[3] = {1.0, -2.0, 3.0}, xb[2] = {0.5, -0.25};
  double ma[3] = {0}, va[3] = {0}, mb[2] = {0}, vb[2] = {0};
  /* host data of dt itself: a cast would leave a second holder of the buffer, which then
   * could not be donated in the first step (another executable) */
  float fa[3] = {1.0f, -2.0f, 3.0f}, fb[2] = {0.5f, -0.25f};
  lt_tensor *ps[2] = {dt == LT_F64 ? tu_f64(SHAPE(3), 1, xa) : tu_f32(SHAPE(3), 1, fa),
                      dt == LT_F64 ? tu_f64(SHAPE(2), 1, xb) : tu_f32(SHAPE(2), 1, fb)};
  lt_nn_optim *o = lt_nn_optim_create(&c, ps, 2);
  if (!o) fail_msg("create: %s", lt_last_error());
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  int64_t compiles = 0;
  for (int s = 0; s < 3; s++) {
    assert_int_equal(lt_nn_optim_set_param_weight_decay(o, 0, kWd[s]), LT_OK);
    assert_int_equal(lt_nn_optim_set_lr(o, kLr[s]), LT_OK);
    c.lr = kLr[s];
    lt_scope_begin();
    lt_tensor *gs[2] = {lt_cast(tu_f64(SHAPE(3), 1, kG[s]), dt),
                        lt_cast(tu_f64(SHAPE(2), 1, kG[2 - s]), dt)};
    assert_int_equal(lt_nn_optim_step_grads(o, gs), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    for (int k = 0; k < 3; k++)
      xa[k] = ref_update(&c, kWd[s], xa[k], kG[s][k], &ma[k], &va[k], s + 1);
    for (int k = 0; k < 2; k++)
      xb[k] = ref_update(&c, c.weight_decay, xb[k], kG[2 - s][k], &mb[k], &vb[k], s + 1);
    tu_expect(ps[0], dt, SHAPE(3), 1, xa, tol);
    tu_expect(ps[1], dt, SHAPE(2), 1, xb, tol);
    if (s == 0) compiles = tu_counter("UncachedCompile");
  }
  assert_int_equal(tu_counter("UncachedCompile"), compiles);
  lt_nn_optim_free(o);
}

static void test_per_param_weight_decay(void **state) {
  (void)state;
  for (int kind = LT_NN_SGD; kind <= LT_NN_ADAMW; kind++) {
    per_param_wd((lt_nn_optim_kind)kind, LT_F64, 1e-12);
    per_param_wd((lt_nn_optim_kind)kind, LT_F32, 1e-5);
  }
}

static void test_per_param_weight_decay_errors(void **state) {
  (void)state;
  lt_tensor *p = tu_f32(SHAPE(2), 1, ((float[]){1, 2}));
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAMW);
  lt_nn_optim *o = lt_nn_optim_create(&c, &p, 1);
  assert_non_null(o);
  assert_int_equal(lt_nn_optim_set_param_weight_decay(NULL, 0, 0.1), LT_EINVAL);
  assert_int_equal(lt_nn_optim_set_param_weight_decay(o, 1, 0.1), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "out of range"));
  assert_int_equal(lt_nn_optim_set_param_weight_decay(o, -1, 0.1), LT_EINVAL);
  assert_int_equal(lt_nn_optim_set_param_weight_decay(o, 0, -0.1), LT_EINVAL);
  assert_int_equal(lt_nn_optim_set_param_weight_decay(o, 0, NAN), LT_EINVAL);
  assert_int_equal(lt_nn_optim_set_param_weight_decay(o, 0, INFINITY), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "weight_decay"));
  assert_int_equal(lt_nn_optim_set_param_weight_decay(o, 0, 0), LT_OK);
  lt_nn_optim_free(o);
}

/* Two f64 parameters a = b = 1, lr 0.1, grad 0.5: step 1 gives a a grad and
 * b none, step 2 gives both. Checks a and b after step 2, the step counts,
 * and that a third step, with other counts, reuses step 2's executable. */
static void skip_then_both(lt_nn_optim_config cfg, double want_a, double want_b) {
  lt_tensor *a = tu_f64(SHAPE(1), 1, ((double[]){1})), *b = tu_f64(SHAPE(1), 1, ((double[]){1}));
  lt_tensor *g = tu_f64(SHAPE(1), 1, ((double[]){0.5}));
  lt_tensor *ps[2] = {a, b};
  lt_nn_optim *o = lt_nn_optim_create(&cfg, ps, 2);
  if (!o) fail_msg("create: %s", lt_last_error());
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_nn_optim_step_grads(o, (lt_tensor *[]){g, NULL}), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_nn_optim_step_grads(o, (lt_tensor *[]){g, g}), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  tu_expect(a, LT_F64, SHAPE(1), 1, &want_a, 1e-12);
  tu_expect(b, LT_F64, SHAPE(1), 1, &want_b, 1e-12);
  assert_int_equal(lt_nn_optim_steps(o), 2);
  assert_int_equal(lt_nn_optim_param_steps(o, 0), 2);
  assert_int_equal(lt_nn_optim_param_steps(o, 1), 1);
  int64_t compiles = tu_counter("UncachedCompile");
  assert_int_equal(lt_nn_optim_step_grads(o, (lt_tensor *[]){g, g}), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(tu_counter("UncachedCompile"), compiles); /* counts are data */
  assert_int_equal(lt_nn_optim_param_steps(o, 0), 3);
  assert_int_equal(lt_nn_optim_param_steps(o, 1), 2);
  assert_int_equal(lt_nn_optim_param_steps(o, 2), -1);
  assert_int_equal(lt_last_status(), LT_EINVAL);
  lt_nn_optim_free(o);
}

/* Issue 12, item 2: each parameter has its own step count (torch.optim keeps
 * state["step"] per parameter and advances it only when the parameter had a
 * grad). Expected values from torch's update rules by hand:
 *   b's only update is its step t = 1: m = (1 - 0.9) * 0.5 = 0.05,
 *     v = (1 - 0.999) * 0.25 = 0.00025, step_size = lr / (1 - 0.9^1) = 1,
 *     denom = sqrt(v) / sqrt(1 - 0.999^1) + eps = 0.5 + 1e-8,
 *     b = 1 - 1 * 0.05 / (0.5 + 1e-8) = 1 - 0.1 / (1 + 2e-8) = 1 - 0.099999998 = 0.900000002;
 *   a's step 1 is the same (0.900000002); its step 2 (t = 2):
 *     m = 0.9 * 0.05 + 0.1 * 0.5 = 0.095, v = 0.999 * 0.00025 + 0.001 * 0.25 = 0.00049975,
 *     step_size = 0.1 / (1 - 0.81) = 0.1 / 0.19,
 *     denom = sqrt(0.00049975) / sqrt(1 - 0.998001) + 1e-8 = sqrt(0.25) + 1e-8 = 0.5 + 1e-8,
 *     a = 0.900000002 - (0.1 / 0.19) * 0.095 / (0.5 + 1e-8) = 0.900000002 - 0.099999998
 *       = 0.800000004.
 * One counter for both (t = 2 for b's first update) gave b = 0.925586. */
static void test_adam_per_parameter_steps(void **state) {
  (void)state;
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAM);
  c.lr = 0.1;
  skip_then_both(c, 0.800000004, 0.900000002);
}

/* AdamW, weight decay 0.1: a parameter's decay p *= 1 - lr * wd = 0.99 comes
 * only with its updates, before the Adam step (whose terms are as above):
 *   b = 1 * 0.99 - 0.099999998 = 0.890000002;
 *   a = 0.890000002 * 0.99 - 0.099999998 = 0.88110000198 - 0.099999998 = 0.78110000398.
 * One counter gave b = 0.99 - 0.0744142 = 0.915586. */
static void test_adamw_per_parameter_steps(void **state) {
  (void)state;
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_ADAMW);
  c.lr = 0.1;
  c.weight_decay = 0.1;
  skip_then_both(c, 0.78110000398, 0.890000002);
}

/* SGD's per-parameter state is its momentum buffer: b's first update starts
 * it from the grad (torch: buf = clone(grad)), whatever a did before:
 *   b = 1 - 0.1 * 0.5 = 0.95; a: buf 0.5 then 0.9 * 0.5 + 0.5 = 0.95,
 *   a = 1 - 0.05 - 0.095 = 0.855. (This one passed before the fix too: SGD
 * has no step count.) */
static void test_sgd_momentum_per_parameter_state(void **state) {
  (void)state;
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 0.1;
  c.momentum = 0.9;
  skip_then_both(c, 0.855, 0.95);
}

/* ---- gradient clipping ----------------------------------------------------------------- */

/* a [2] and b [1] get grads {3, 4} and {12} from sum(a * {3, 4}) + sum(b * 12)
 * (dtypes da, db); c requires grad but gets none. */
static void grads_3_4_12(lt_dtype da, lt_dtype db, lt_tensor *ps[3]) {
  ps[0] = lt_cast(tu_f64(SHAPE(2), 1, ((double[]){1, 1})), da);
  ps[1] = lt_cast(tu_f64(SHAPE(1), 1, ((double[]){1})), db);
  ps[2] = tu_f64(SHAPE(1), 1, ((double[]){1}));
  for (int i = 0; i < 3; i++) assert_int_equal(lt_set_requires_grad(ps[i], true), LT_OK);
  lt_tensor *la =
      lt_sum(lt_mul(ps[0], lt_cast(tu_f64(SHAPE(2), 1, ((double[]){3, 4})), da)), NULL, 0, false);
  lt_tensor *lb = lt_sum(lt_mul(ps[1], lt_scalar(CPU0, db, 12)), NULL, 0, false);
  if (lt_backward(lt_add(lt_cast(la, LT_F64), lt_cast(lb, LT_F64))) != LT_OK)
    fail_msg("backward: %s", lt_last_error());
  assert_null(lt_grad(ps[2]));
}

/* torch.nn.utils.clip_grad_norm_: total = norm of the per-grad norms, coef =
 * max_norm / (total + 1e-6) clamped to 1, every grad times coef.
 *   2-norm: norms 5 and 12, total sqrt(25 + 144) = 13; max_norm 6.5:
 *     coef = 6.5 / 13.000001 = 0.49999996153846454, grads {3, 4, 12} * coef;
 *   inf-norm: total max(4, 12) = 12, max_norm 6: coef 6 / 12.000001;
 *   1-norm: total 7 + 12 = 19; 3-norm: (27 + 64 + 1728)^(1/3) = 12.207054953820636;
 *   max_norm 100 > 13: coef clamps to 1, grads unchanged. */
static void test_clip_grad_norm_values(void **state) {
  (void)state;
  struct {
    double max_norm, norm_type, total, coef;
  } cases[] = {
      {6.5, 2, 13, 6.5 / (13 + 1e-6)},
      {6, INFINITY, 12, 6 / (12 + 1e-6)},
      {10, 1, 19, 10 / (19 + 1e-6)},
      {10, 3, 12.207054953820636, 10 / (12.207054953820636 + 1e-6)},
      {100, 2, 13, 1},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    lt_scope_begin();
    lt_tensor *ps[3];
    grads_3_4_12(LT_F64, LT_F64, ps);
    int64_t execs = tu_counter("ExecuteComputation"), syncs = tu_counter("SyncTensors");
    lt_tensor *total = NULL;
    assert_int_equal(lt_nn_clip_grad_norm(ps, 3, cases[k].max_norm, cases[k].norm_type, &total),
                     LT_OK);
    /* lazy: nothing ran, the grads and the norm are pending */
    assert_int_equal(tu_counter("ExecuteComputation"), execs);
    assert_int_equal(tu_counter("SyncTensors"), syncs);
    assert_int_equal(lt_get_state(lt_grad(ps[0])), LT_STATE_PENDING);
    assert_int_equal(lt_get_state(total), LT_STATE_PENDING);
    assert_null(lt_grad(ps[2]));
    tu_expect(total, LT_F64, NULL, 0, &cases[k].total, 1e-12);
    double c = cases[k].coef;
    tu_expect(lt_grad(ps[0]), LT_F64, SHAPE(2), 1, (double[]){3 * c, 4 * c}, 1e-12);
    tu_expect(lt_grad(ps[1]), LT_F64, SHAPE(1), 1, (double[]){12 * c}, 1e-12);
    lt_scope_end();
  }
  /* f32 grads: an f32 norm; f32 with f64: f64, each grad keeps its dtype */
  lt_tensor *ps[3], *total = NULL;
  grads_3_4_12(LT_F32, LT_F32, ps);
  assert_int_equal(lt_nn_clip_grad_norm(ps, 3, 6.5, 2, &total), LT_OK);
  tu_expect(total, LT_F32, NULL, 0, (double[]){13}, 1e-6);
  tu_expect(lt_grad(ps[1]), LT_F32, SHAPE(1), 1, (double[]){6}, 1e-6);
  grads_3_4_12(LT_F32, LT_F64, ps);
  assert_int_equal(lt_nn_clip_grad_norm(ps, 3, 6.5, 2, &total), LT_OK);
  tu_expect(total, LT_F64, NULL, 0, (double[]){13}, 1e-6);
  tu_expect(lt_grad(ps[0]), LT_F32, SHAPE(2), 1, (double[]){1.5, 2}, 1e-6);
  /* no grad at all: norm 0 (torch.tensor(0.)), nothing changes */
  assert_int_equal(lt_nn_clip_grad_norm(ps + 2, 1, 1.0, 2, &total), LT_OK);
  tu_expect(total, LT_F32, NULL, 0, (double[]){0}, 0);
  assert_int_equal(lt_nn_clip_grad_norm(NULL, 0, 1.0, 2, NULL), LT_OK);
}

static void test_clip_grad_norm_errors(void **state) {
  (void)state;
  lt_tensor *ps[3], *total = NULL;
  grads_3_4_12(LT_F64, LT_F64, ps);
  const double bad_types[] = {0, -1, NAN, -INFINITY};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(lt_nn_clip_grad_norm(ps, 3, 1.0, bad_types[i], &total), LT_EINVAL);
    assert_non_null(strstr(lt_last_error(), "norm_type"));
  }
  assert_int_equal(lt_nn_clip_grad_norm(ps, 3, NAN, 2, &total), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "max_norm"));
  assert_int_equal(lt_nn_clip_grad_norm(ps, 3, -1, 2, &total), LT_EINVAL);
  lt_tensor *withnull[2] = {ps[0], NULL};
  assert_int_equal(lt_nn_clip_grad_norm(withnull, 2, 1, 2, &total), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "parameter 1 is NULL"));
  assert_null(total);
  /* the failed calls left the grads alone */
  tu_expect(lt_grad(ps[0]), LT_F64, SHAPE(2), 1, (double[]){3, 4}, 0);
}

/* Clipping inside a training step: backward, clip, SGD; the step compiles
 * once. Step 1 by hand: loss sum(p^2) / 2 with p {3, 4} has grad p, norm 5,
 * coef 0.5 / 5.000001; lr 1: p = {3, 4} * (1 - 0.5 / 5.000001) = {2.70000006, 3.60000008}. */
static void test_clip_grad_norm_in_step(void **state) {
  (void)state;
  lt_tensor *p = tu_f64(SHAPE(2), 1, ((double[]){3, 4}));
  assert_int_equal(lt_set_requires_grad(p, true), LT_OK);
  lt_nn_optim_config c = lt_nn_optim_defaults(LT_NN_SGD);
  c.lr = 1;
  lt_nn_optim *o = lt_nn_optim_create(&c, &p, 1);
  assert_non_null(o);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  int64_t compiles = 0;
  for (int s = 0; s < 4; s++) {
    lt_scope_begin();
    lt_tensor *loss = lt_mul(lt_sum(lt_mul(p, p), NULL, 0, false), lt_scalar(CPU0, LT_F64, 0.5));
    assert_int_equal(lt_backward(loss), LT_OK);
    assert_int_equal(lt_nn_clip_grad_norm(&p, 1, 0.5, 2.0, NULL), LT_OK);
    assert_int_equal(lt_nn_optim_step(o), LT_OK);
    lt_scope_end();
    assert_int_equal(lt_mark_step(CPU0), LT_OK);
    if (s == 0) {
      double k = 1 - 0.5 / (5 + 1e-6);
      tu_expect(p, LT_F64, SHAPE(2), 1, (double[]){3 * k, 4 * k}, 1e-12);
      compiles = tu_counter("UncachedCompile");
    }
  }
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(tu_counter("UncachedCompile"), compiles);
  lt_nn_optim_free(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      OTEST(test_sgd),
      OTEST(test_sgd_momentum),
      OTEST(test_sgd_nesterov),
      OTEST(test_sgd_weight_decay),
      OTEST(test_adam),
      OTEST(test_adam_state_costs_no_memory_until_used),
      OTEST(test_adam_weight_decay),
      OTEST(test_adamw),
      OTEST(test_changing_lr_compiles_once),
      OTEST(test_step_from_backward),
      OTEST(test_errors),
      OTEST(test_adam_per_parameter_steps),
      OTEST(test_adamw_per_parameter_steps),
      OTEST(test_sgd_momentum_per_parameter_state),
      OTEST(test_clip_grad_norm_values),
      OTEST(test_clip_grad_norm_errors),
      OTEST(test_clip_grad_norm_in_step),
      OTEST(test_per_param_weight_decay),
      OTEST(test_per_param_weight_decay_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
