/* Losses of lazytensor_nn.h against values worked out by hand from
 * torch.nn.functional's (1.13) formulas (each derivation is in the comment
 * above its numbers), their reductions and error cases, and their gradients
 * against central differences. */
#include "test_grad_util.h"
#include "lazytensor_nn.h"

#define MEAN LT_NN_REDUCTION_MEAN
#define SUM LT_NN_REDUCTION_SUM
#define NONE LT_NN_REDUCTION_NONE
#define LTEST(f) cmocka_unit_test_setup_teardown(f, tu_setup, tu_teardown_wait)

/* ---- MSE ------------------------------------------------------------------------------- */

/* input {1, 2, 3, 4}, target {1, 0, 5, 2.5}: differences 0, 2, -2, 1.5,
 * squares 0, 4, 4, 2.25: sum 10.25, mean 10.25 / 4 = 2.5625. A target {1, 1}
 * broadcast over the rows: differences 0, 1, 2, 3, mean (0+1+4+9)/4 = 3.5. */
static void test_mse_values(void **state) {
  (void)state;
  lt_tensor *x = tu_f64(SHAPE(2, 2), 2, ((double[]){1, 2, 3, 4}));
  lt_tensor *y = tu_f64(SHAPE(2, 2), 2, ((double[]){1, 0, 5, 2.5}));
  tu_expect(lt_nn_mse_loss(x, y, MEAN), LT_F64, NULL, 0, (double[]){2.5625}, 1e-15);
  tu_expect(lt_nn_mse_loss(x, y, SUM), LT_F64, NULL, 0, (double[]){10.25}, 1e-15);
  tu_expect(lt_nn_mse_loss(x, y, NONE), LT_F64, SHAPE(2, 2), 2, (double[]){0, 4, 4, 2.25}, 1e-15);
  lt_tensor *row = tu_f64(SHAPE(2), 1, ((double[]){1, 1}));
  tu_expect(lt_nn_mse_loss(x, row, MEAN), LT_F64, NULL, 0, (double[]){3.5}, 1e-15);
  /* f32 with f64 promotes, as torch */
  lt_tensor *xf = tu_f32(SHAPE(2, 2), 2, ((float[]){1, 2, 3, 4}));
  tu_expect(lt_nn_mse_loss(xf, xf, SUM), LT_F32, NULL, 0, (double[]){0}, 0);
  tu_expect(lt_nn_mse_loss(xf, y, MEAN), LT_F64, NULL, 0, (double[]){2.5625}, 1e-15);
}

static void test_mse_errors(void **state) {
  (void)state;
  lt_tensor *x = tu_f64(SHAPE(2, 2), 2, ((double[]){1, 2, 3, 4}));
  TU_EXPECT_ERROR(lt_nn_mse_loss(x, tu_f64(SHAPE(3), 1, ((double[]){1, 2, 3})), MEAN), LT_ESHAPE,
                  "lt_nn_mse_loss");
  TU_EXPECT_ERROR(lt_nn_mse_loss(x, tu_i64(SHAPE(2), 1, ((int64_t[]){1, 2})), MEAN), LT_EDTYPE,
                  "f32 or f64");
  TU_EXPECT_ERROR(lt_nn_mse_loss(x, x, (lt_nn_reduction)7), LT_EINVAL, "reduction 7");
  TU_EXPECT_ERROR(lt_nn_mse_loss(NULL, x, MEAN), LT_EINVAL, "lt_nn_mse_loss");
}

static lt_tensor *mse_fn(lt_tensor *const *in, void *ud) {
  return lt_nn_mse_loss(in[0], in[1], *(lt_nn_reduction *)ud);
}

static void test_mse_grad(void **state) {
  (void)state;
  static const double x[6] = {0.3, -1.2, 2.0, 0.7, -0.4, 1.1}, y[3] = {0.5, 0.1, -0.9};
  tg_input in[2] = {{SHAPE(2, 3), 2, x, true, LT_F64}, {SHAPE(3), 1, y, true, LT_F64}};
  lt_nn_reduction r[3] = {MEAN, SUM, NONE};
  for (int i = 0; i < 3; i++) tg_check("mse", mse_fn, &r[i], in, 2, 1e-6);
}

/* ---- NLL ------------------------------------------------------------------------------- */

/* logp = log of the rows {0.2, 0.3, 0.5}, {0.6, 0.3, 0.1}, {0.25, 0.25, 0.5};
 * torch: loss_n = -logp[n, target_n], 0 where target_n == ignore_index, and
 * the mean divides by the number of non-ignored targets. */
static lt_tensor *logp33(void) {
  double p[9] = {0.2, 0.3, 0.5, 0.6, 0.3, 0.1, 0.25, 0.25, 0.5};
  for (int i = 0; i < 9; i++) p[i] = log(p[i]);
  return tu_f64(SHAPE(3, 3), 2, p);
}

static void test_nll_values(void **state) {
  (void)state;
  lt_tensor *lp = logp33();
  /* targets {2, 0, -100}: -log 0.5 = 0.693147181, -log 0.6 = 0.510825624, 0;
   * sum 1.203972804, mean over the 2 kept = 0.601986402 */
  lt_tensor *t = tu_i64(SHAPE(3), 1, ((int64_t[]){2, 0, -100}));
  tu_expect(lt_nn_nll_loss(lp, t, NONE, -100), LT_F64, SHAPE(3), 1,
            (double[]){0.6931471805599453, 0.5108256237659907, 0}, 1e-15);
  tu_expect(lt_nn_nll_loss(lp, t, SUM, -100), LT_F64, NULL, 0, (double[]){1.203972804325936},
            1e-15);
  tu_expect(lt_nn_nll_loss(lp, t, MEAN, LT_NN_IGNORE_INDEX_DEFAULT), LT_F64, NULL, 0,
            (double[]){0.601986402162968}, 1e-15);
  /* i32 targets {2, 0, 1}, ignore_index 0: -log 0.5, 0, -log 0.25 = 1.386294361;
   * mean (0.693147181 + 1.386294361) / 2 = 1.039720771 */
  lt_tensor *t32 = tu_i32(SHAPE(3), 1, ((int32_t[]){2, 0, 1}));
  tu_expect(lt_nn_nll_loss(lp, t32, MEAN, 0), LT_F64, NULL, 0, (double[]){1.0397207708399179},
            1e-15);
  /* every target ignored: 0 / 0 = NaN, as torch */
  lt_tensor *all = tu_i64(SHAPE(3), 1, ((int64_t[]){-1, -1, -1}));
  tu_expect(lt_nn_nll_loss(lp, all, MEAN, -1), LT_F64, NULL, 0, (double[]){NAN}, 0);
  tu_expect(lt_nn_nll_loss(lp, all, SUM, -1), LT_F64, NULL, 0, (double[]){0}, 0);
  /* [N, C, d]: logp[0, :, 0] = log{0.3, 0.7}, logp[0, :, 1] = log{0.9, 0.1},
   * target [[1, 0]]: -log 0.7 = 0.356674944, -log 0.9 = 0.105360516, mean 0.231017730 */
  double kd[4] = {log(0.3), log(0.9), log(0.7), log(0.1)};
  lt_tensor *lpk = tu_f64(SHAPE(1, 2, 2), 3, kd);
  lt_tensor *tk = tu_i64(SHAPE(1, 2), 2, ((int64_t[]){1, 0}));
  tu_expect(lt_nn_nll_loss(lpk, tk, NONE, -100), LT_F64, SHAPE(1, 2), 2,
            (double[]){0.35667494393873245, 0.10536051565782628}, 1e-15);
  tu_expect(lt_nn_nll_loss(lpk, tk, MEAN, -100), LT_F64, NULL, 0, (double[]){0.23101772979827936},
            1e-15);
  /* [C] with a 0-d target 1: -log 0.3 = 1.203972804 */
  double c3[3] = {log(0.2), log(0.3), log(0.5)};
  tu_expect(lt_nn_nll_loss(tu_f64(SHAPE(3), 1, c3), tu_i64(NULL, 0, ((int64_t[]){1})), MEAN, -100),
            LT_F64, NULL, 0, (double[]){1.2039728043259361}, 1e-15);
  /* -inf at a class other than the target's: the loss stays finite (a one-hot
   * product would give 0 * -inf = NaN); f32 */
  lt_tensor *inf = tu_f32(SHAPE(1, 2), 2, ((float[]){-INFINITY, 0}));
  tu_expect(lt_nn_nll_loss(inf, tu_i64(SHAPE(1), 1, ((int64_t[]){1})), MEAN, -100), LT_F32, NULL, 0,
            (double[]){0}, 0);
}

static void test_nll_errors(void **state) {
  (void)state;
  lt_tensor *lp = logp33();
  lt_tensor *t = tu_i64(SHAPE(3), 1, ((int64_t[]){2, 0, 1}));
  TU_EXPECT_ERROR(lt_nn_nll_loss(lp, tu_i64(SHAPE(2), 1, ((int64_t[]){0, 1})), MEAN, -100),
                  LT_ESHAPE, "[2]");
  TU_EXPECT_ERROR(lt_nn_nll_loss(lp, tu_f64(SHAPE(3), 1, ((double[]){0, 1, 2})), MEAN, -100),
                  LT_EDTYPE, "target must be i32 or i64");
  TU_EXPECT_ERROR(lt_nn_nll_loss(tu_i64(SHAPE(3), 1, ((int64_t[]){0, 1, 2})), t, MEAN, -100),
                  LT_EDTYPE, "lt_nn_nll_loss");
  TU_EXPECT_ERROR(lt_nn_nll_loss(lp, t, (lt_nn_reduction)-1, -100), LT_EINVAL, "reduction");
  TU_EXPECT_ERROR(lt_nn_nll_loss(lp, NULL, MEAN, -100), LT_EINVAL, "lt_nn_nll_loss");
  /* a class index out of range that is not ignore_index fails when it runs */
  tu_expect_exec_error(lt_nn_nll_loss(lp, tu_i64(SHAPE(3), 1, ((int64_t[]){2, 3, 0})), SUM, -100),
                       "out of range");
}

typedef struct class_case {
  lt_nn_reduction r;
  int64_t ignore;
  double smoothing; /* < 0: nll of the input as log-probabilities */
} class_case;

static lt_tensor *class_fn(lt_tensor *const *in, void *ud) {
  const class_case *c = ud;
  if (c->smoothing < 0) return lt_nn_nll_loss(in[0], in[1], c->r, c->ignore);
  return lt_nn_cross_entropy_ex(in[0], in[1], c->r, c->ignore, c->smoothing);
}

/* Gradients of nll and cross-entropy (each reduction, ignored targets,
 * smoothing) on [4, 3] and on [2, 3, 2] against central differences. */
static void test_class_losses_grad(void **state) {
  (void)state;
  static const double x[12] = {0.3, -1.2, 2.0, 0.7, -0.4, 1.1, 0.0, 0.5, -0.8, 1.5, 0.2, -0.3};
  static const double y[4] = {1, -100, 2, 0}, yk[4] = {2, 0, -100, 1};
  tg_input in[2] = {{SHAPE(4, 3), 2, x, true, LT_F64}, {SHAPE(4), 1, y, false, LT_I64}};
  tg_input ink[2] = {{SHAPE(2, 3, 2), 3, x, true, LT_F64}, {SHAPE(2, 2), 2, yk, false, LT_I64}};
  const class_case cases[] = {
      {MEAN, -100, -1},  {SUM, -100, -1},  {NONE, -100, -1},  {MEAN, -100, 0},
      {MEAN, -100, 0.2}, {SUM, -100, 0.3}, {NONE, -100, 0.1}, {MEAN, -100, 1.0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tg_check("class loss [4, 3]", class_fn, (void *)&cases[i], in, 2, 1e-6);
    tg_check("class loss [2, 3, 2]", class_fn, (void *)&cases[i], ink, 2, 1e-6);
  }
}

/* ---- cross-entropy: ignore_index and label smoothing ------------------------------------ */

/* logits {1, 2, 3}, {1, 1, 1}, labels {2, 0}. log_softmax: row 0 is
 * {1, 2, 3} - log(e + e^2 + e^3) = {-2.407605964, -1.407605964, -0.407605964},
 * row 1 is -log 3 = -1.098612289 three times. nll: 0.407605964, 1.098612289.
 * torch's label smoothing eps: (1 - eps) * nll + eps / C * sum_c -logp[c];
 * sum_c -logp: row 0 4.222817893, row 1 3.295836866.
 *   mean, eps 0.1: 0.9 * (0.407605964 + 1.098612289) / 2 + 0.1 / 3 * (4.222817893 +
 *     3.295836866) / 2 = 0.677798214 + 0.125310913 = 0.803109127;
 *   sum, eps 0.1: 0.9 * 1.506218253 + 0.1 / 3 * 7.518654759 = 1.606218253;
 *   labels {2, -100}, mean, eps 0.1: only row 0, divided by 1:
 *     0.9 * 0.407605964 + 0.1 / 3 * 4.222817893 = 0.507605964; none: {0.507605964, 0};
 *   labels {2, -100}, no smoothing: mean = sum = 0.407605964. */
static void test_cross_entropy_ex_values(void **state) {
  (void)state;
  lt_tensor *logits = tu_f64(SHAPE(2, 3), 2, ((double[]){1, 2, 3, 1, 1, 1}));
  lt_tensor *y = tu_i64(SHAPE(2), 1, ((int64_t[]){2, 0}));
  lt_tensor *yi = tu_i64(SHAPE(2), 1, ((int64_t[]){2, -100}));
  /* no ignore_index hit, no smoothing: lt_nn_cross_entropy's value */
  tu_expect(lt_nn_cross_entropy_ex(logits, y, MEAN, -100, 0), LT_F64, NULL, 0,
            (double[]){0.7531091265562448}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, y, NONE, -100, 0), LT_F64, SHAPE(2), 1,
            (double[]){0.40760596444438013, 1.0986122886681096}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, yi, MEAN, -100, 0), LT_F64, NULL, 0,
            (double[]){0.40760596444438013}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, yi, SUM, -100, 0), LT_F64, NULL, 0,
            (double[]){0.40760596444438013}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, y, MEAN, -100, 0.1), LT_F64, NULL, 0,
            (double[]){0.8031091265562449}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, y, SUM, -100, 0.1), LT_F64, NULL, 0,
            (double[]){1.6062182531124898}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, yi, MEAN, -100, 0.1), LT_F64, NULL, 0,
            (double[]){0.5076059644443801}, 1e-15);
  tu_expect(lt_nn_cross_entropy_ex(logits, yi, NONE, -100, 0.1), LT_F64, SHAPE(2), 1,
            (double[]){0.5076059644443801, 0}, 1e-15);
  /* f32, large logits: stable as lt_nn_cross_entropy */
  lt_tensor *big = tu_f32(SHAPE(2, 2), 2, ((float[]){1000, 0, -1000, 0}));
  tu_expect(lt_nn_cross_entropy_ex(big, tu_i32(SHAPE(2), 1, ((int32_t[]){1, 1})), MEAN, -100, 0),
            LT_F32, NULL, 0, (double[]){500}, 1e-6);
  /* errors */
  TU_EXPECT_ERROR(lt_nn_cross_entropy_ex(logits, y, MEAN, -100, 1.5), LT_EINVAL,
                  "label_smoothing must be in [0, 1]");
  TU_EXPECT_ERROR(lt_nn_cross_entropy_ex(logits, y, MEAN, -100, NAN), LT_EINVAL,
                  "lt_nn_cross_entropy_ex");
  TU_EXPECT_ERROR(
      lt_nn_cross_entropy_ex(logits, tu_i64(SHAPE(3), 1, ((int64_t[]){0, 1, 2})), MEAN, -100, 0),
      LT_ESHAPE, "[3]");
}

/* ---- BCE with logits ------------------------------------------------------------------- */

/* torch's stable form max(x, 0) - x y + log1p(exp(-|x|)):
 *   x -2, y 0: log1p(e^-2) = 0.126928011;  x 0, y 1: log 2 = 0.693147181;
 *   x 3, y 1: 3 - 3 + log1p(e^-3) = 0.048587352;
 *   x 100, y 0: 100 + log1p(e^-100) = 100;  x -100, y 1: 0 + 100 + ~0 = 100;
 *   sum 200.868662543, mean 40.173732509. (The naive -log(1 - sigmoid(100))
 *   is inf in f32.) */
static void test_bce_with_logits_values(void **state) {
  (void)state;
  static const double want[5] = {0.1269280110429725, 0.6931471805599453, 0.04858735157374206, 100,
                                 100};
  lt_tensor *x = tu_f64(SHAPE(5), 1, ((double[]){-2, 0, 3, 100, -100}));
  lt_tensor *y = tu_f64(SHAPE(5), 1, ((double[]){0, 1, 1, 0, 1}));
  tu_expect(lt_nn_bce_with_logits(x, y, NULL, NONE), LT_F64, SHAPE(5), 1, want, 1e-15);
  tu_expect(lt_nn_bce_with_logits(x, y, NULL, SUM), LT_F64, NULL, 0, (double[]){200.86866254317664},
            1e-15);
  tu_expect(lt_nn_bce_with_logits(x, y, NULL, MEAN), LT_F64, NULL, 0,
            (double[]){40.173732508635325}, 1e-15);
  lt_tensor *xf = tu_f32(SHAPE(5), 1, ((float[]){-2, 0, 3, 100, -100}));
  lt_tensor *yf = tu_f32(SHAPE(5), 1, ((float[]){0, 1, 1, 0, 1}));
  tu_expect(lt_nn_bce_with_logits(xf, yf, NULL, NONE), LT_F32, SHAPE(5), 1, want, 1e-6);
  /* pos_weight [2] over the last axis; torch: (1 - y) x + (1 + (pw - 1) y) softplus(-x):
   *   x 0.5, y 1, pw 2: 2 softplus(-0.5) = 2 * 0.474076984 = 0.948153968;
   *   x -1, y 0, pw 0.5: -1 + softplus(1) = -1 + 1.313261688 = 0.313261688;
   *   x 2, y 0, pw 2: 2 + softplus(-2) = 2.126928011;
   *   x 0, y 1, pw 0.5: 0.5 log 2 = 0.346573590; mean 0.933729314 */
  lt_tensor *x2 = tu_f64(SHAPE(2, 2), 2, ((double[]){0.5, -1, 2, 0}));
  lt_tensor *y2 = tu_f64(SHAPE(2, 2), 2, ((double[]){1, 0, 0, 1}));
  lt_tensor *pw = tu_f64(SHAPE(2), 1, ((double[]){2, 0.5}));
  tu_expect(
      lt_nn_bce_with_logits(x2, y2, pw, NONE), LT_F64, SHAPE(2, 2), 2,
      (double[]){0.9481539683602134, 0.3132616875182228, 2.1269280110429727, 0.34657359027997264},
      1e-15);
  tu_expect(lt_nn_bce_with_logits(x2, y2, pw, MEAN), LT_F64, NULL, 0,
            (double[]){0.9337293143003453}, 1e-15);
  /* errors */
  TU_EXPECT_ERROR(lt_nn_bce_with_logits(x2, y, NULL, MEAN), LT_ESHAPE, "[5]");
  TU_EXPECT_ERROR(lt_nn_bce_with_logits(x2, y2, tu_f64(SHAPE(3), 1, ((double[]){1, 2, 3})), MEAN),
                  LT_ESHAPE, "pos_weight [3]");
  TU_EXPECT_ERROR(lt_nn_bce_with_logits(tu_i64(SHAPE(2), 1, ((int64_t[]){0, 1})),
                                        tu_i64(SHAPE(2), 1, ((int64_t[]){0, 1})), NULL, MEAN),
                  LT_EDTYPE, "lt_nn_bce_with_logits");
  TU_EXPECT_ERROR(lt_nn_bce_with_logits(x2, y2, NULL, (lt_nn_reduction)3), LT_EINVAL, "reduction");
}

typedef struct bce_case {
  lt_nn_reduction r;
  bool pos_weight;
} bce_case;

static lt_tensor *bce_fn(lt_tensor *const *in, void *ud) {
  const bce_case *c = ud;
  return lt_nn_bce_with_logits(in[0], in[1], c->pos_weight ? in[2] : NULL, c->r);
}

/* Gradients in x (x = 0 among them: max(x, 0) has a kink there, the loss
 * does not), in the target and in pos_weight. */
static void test_bce_with_logits_grad(void **state) {
  (void)state;
  static const double x[6] = {0.0, -1.3, 2.2, 0.4, -0.05, 3.0};
  static const double y[6] = {1, 0, 0.3, 1, 0.5, 0}, pw[3] = {2.0, 0.5, 1.5};
  tg_input in[3] = {{SHAPE(2, 3), 2, x, true, LT_F64},
                    {SHAPE(2, 3), 2, y, true, LT_F64},
                    {SHAPE(3), 1, pw, true, LT_F64}};
  const bce_case cases[] = {{MEAN, false}, {SUM, false}, {NONE, false}, {MEAN, true}, {NONE, true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    tg_check("bce_with_logits", bce_fn, (void *)&cases[i], in, cases[i].pos_weight ? 3 : 2, 1e-6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      LTEST(test_mse_values),
      LTEST(test_mse_errors),
      LTEST(test_mse_grad),
      LTEST(test_nll_values),
      LTEST(test_nll_errors),
      LTEST(test_class_losses_grad),
      LTEST(test_cross_entropy_ex_values),
      LTEST(test_bce_with_logits_values),
      LTEST(test_bce_with_logits_grad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
