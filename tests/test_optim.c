/* Optimizers against torch.optim (1.13) for three steps on a 3-element
 * parameter with given grads; the expected values were produced by
 * torch.optim in f64 (SGD's first row checks by hand: 1 - 0.1 * 0.1 = 0.99). */
#include "test_util.h"
#include "lazytensor_nn.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      OTEST(test_sgd),
      OTEST(test_sgd_momentum),
      OTEST(test_sgd_nesterov),
      OTEST(test_sgd_weight_decay),
      OTEST(test_adam),
      OTEST(test_adam_weight_decay),
      OTEST(test_adamw),
      OTEST(test_changing_lr_compiles_once),
      OTEST(test_step_from_backward),
      OTEST(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
