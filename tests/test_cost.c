/* Cost analysis (docs/COST.md): the FLOPs of the products (matmul,
 * attention, convolutions and their gradients, 2 per multiply-add) and the
 * bytes each op moves, counted from the IR, against hand counts: one op at a
 * time, then the training steps of lazytensor-train's three models (MLP, CNN,
 * GPT) as they execute; and the multiply-add peak MFU divides by. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "../src/ops/op_attention.h"
#include "model.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
static bool under_valgrind(void) { return RUNNING_ON_VALGRIND != 0; }
#else
static bool under_valgrind(void) { return false; }
#endif

#define CTEST(f) cmocka_unit_test_setup_teardown(f, tu_setup_fresh, tu_teardown_wait)

static lt_cost graph_cost(lt_tensor *const *ts, int n) {
  lt_cost c = {-1, -1};
  if (lt_get_graph_cost(ts, n, &c) != LT_OK) fail_msg("lt_get_graph_cost: %s", lt_last_error());
  return c;
}

static double executed_flops(void) {
  lt_cost c = {-1, -1};
  assert_int_equal(lt_get_executed_cost(&c), LT_OK);
  int64_t ctr = -1; /* the counter behind it */
  assert_int_equal(lt_get_counter("ExecutedFlops", &ctr), LT_OK);
  assert_true(c.flops == (double)ctr);
  return c.flops;
}

/* Syncs ts and checks that what ran cost what the pending graph said it
 * would: the device's last cost and the executed totals. */
static void expect_executed(lt_tensor **ts, int n, lt_cost want) {
  lt_cost before = {0, 0}, last = {-1, -1};
  assert_int_equal(lt_get_executed_cost(&before), LT_OK);
  assert_int_equal(lt_sync(ts, n, true), LT_OK);
  assert_int_equal(lt_get_last_cost(CPU0, &last), LT_OK);
  assert_true(last.flops == want.flops && last.bytes == want.bytes);
  lt_cost after = {0, 0};
  assert_int_equal(lt_get_executed_cost(&after), LT_OK);
  assert_true(after.flops - before.flops == want.flops);
  assert_true(after.bytes - before.bytes == want.bytes);
}

static lt_tensor *ones(const int64_t *shape, int ndim) {
  return lt_full(CPU0, LT_F32, shape, ndim, 1.0);
}

/* [m, k] x [k, n] = 2 m k n; the bytes: both operands read and the result
 * written once (the data leaves move nothing themselves). */
static void test_matmul(void **state) {
  (void)state;
  lt_tensor *a = tu_wave_f32(1, (int64_t[]){3, 4}, 2), *b = tu_wave_f32(2, (int64_t[]){4, 5}, 2);
  lt_tensor *y = lt_matmul(a, b);
  lt_cost c = graph_cost(&y, 1);
  assert_true(c.flops == 2.0 * 3 * 4 * 5);
  assert_true(c.bytes == 4.0 * (3 * 4 + 4 * 5 + 3 * 5));
  expect_executed(&y, 1, c);
  /* batch dims broadcast: [2, 1, 3, 4] x [5, 4, 6] -> [2, 5, 3, 6], each of
   * the 2 x 5 products 2 x 3 x 4 x 6 */
  lt_tensor *p = tu_wave_f32(3, (int64_t[]){2, 1, 3, 4}, 4);
  lt_tensor *q = tu_wave_f32(4, (int64_t[]){5, 4, 6}, 3);
  lt_tensor *z = lt_matmul(p, q);
  assert_true(graph_cost(&z, 1).flops == 2.0 * 2 * 5 * 3 * 4 * 6);
  /* a data tensor has no pending graph: nothing to count */
  assert_true(graph_cost(&a, 1).flops == 0 && graph_cost(&a, 1).bytes == 0);
}

/* Elementwise ops and reductions count bytes, never FLOPs. */
static void test_memory_bound_ops(void **state) {
  (void)state;
  lt_tensor *a = tu_wave_f32(1, (int64_t[]){6, 7}, 2);
  lt_tensor *y = lt_sum(lt_exp(a), (const int[]){1}, 1, false);
  lt_cost c = graph_cost(&y, 1);
  assert_true(c.flops == 0);
  /* exp reads and writes 42 floats, sum reads them and writes 6 */
  assert_true(c.bytes == 4.0 * (42 + 42) + 4.0 * (42 + 6));
  expect_executed(&y, 1, c);
}

/* conv2d: 2 N O OH OW (C / groups) kh kw, and its input and weight
 * gradients the same products each. */
static void conv_case(int64_t n, int64_t c, int64_t h, int64_t o, int64_t k, int64_t stride,
                      int64_t pad, int64_t groups, int64_t oh) {
  lt_tensor *x = tu_wave_f32(5, (int64_t[]){n, c, h, h}, 4);
  lt_tensor *w = tu_wave_f32(6, (int64_t[]){o, c / groups, k, k}, 4);
  assert_int_equal(lt_set_requires_grad(x, true), LT_OK);
  assert_int_equal(lt_set_requires_grad(w, true), LT_OK);
  lt_tensor *y = lt_conv2d_n(x, w, NULL, (int64_t[]){stride, stride}, 2, (int64_t[]){pad, pad}, 2,
                             NULL, 0, groups);
  assert_non_null(y);
  assert_int_equal(lt_dim(y, 2), oh);
  double fwd = 2.0 * n * o * oh * oh * (c / groups) * k * k;
  assert_true(graph_cost(&y, 1).flops == fwd);
  lt_tensor *loss = lt_sum(y, NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_tensor *ts[3] = {loss, lt_grad(x), lt_grad(w)};
  assert_non_null(ts[1]);
  assert_non_null(ts[2]);
  /* a sum's gradient needs no y: the grads alone are the two backward convolutions */
  assert_true(graph_cost(ts + 1, 1).flops == fwd);
  assert_true(graph_cost(ts + 2, 1).flops == fwd);
  lt_cost all = graph_cost(ts, 3);
  assert_true(all.flops == 3 * fwd);
  expect_executed(ts, 3, all);
}

static void test_conv2d(void **state) {
  (void)state;
  conv_case(2, 3, 9, 4, 3, 2, 1, 1, 5); /* [2,3,9,9] * [4,3,3,3], stride 2, padding 1 */
  conv_case(2, 4, 8, 6, 3, 1, 1, 2, 8); /* groups 2: [6,2,3,3] */
  conv_case(1, 2, 5, 3, 1, 1, 0, 1, 5); /* 1x1 */
}

/* attention q [B, L, E], k [B, S, E], v [B, S, Ev]: q k^T is B L S E
 * multiply-adds, p v B L S Ev. Its gradient is made of matmuls: the scores
 * again (q k^T), then p^T g, g v^T, ds k and ds^T q. */
static void test_attention(void **state) {
  (void)state;
  lt__attn_set_fused_always(true); /* the ATTENTION node, not the composite */
  int64_t B = 2, L = 5, S = 7, E = 8, Ev = 6;
  lt_tensor *q = tu_wave_f32(7, (int64_t[]){B, L, E}, 3);
  lt_tensor *k = tu_wave_f32(8, (int64_t[]){B, S, E}, 3);
  lt_tensor *v = tu_wave_f32(9, (int64_t[]){B, S, Ev}, 3);
  lt_tensor *ins[3] = {q, k, v};
  for (int i = 0; i < 3; i++) assert_int_equal(lt_set_requires_grad(ins[i], true), LT_OK);
  lt_tensor *o = lt_scaled_dot_product_attention(q, k, v, NULL, false, NAN);
  assert_non_null(o);
  double fwd = 2.0 * B * L * S * E + 2.0 * B * L * S * Ev;
  assert_true(graph_cost(&o, 1).flops == fwd);
  /* causal: counted in full, as FlopCounterMode counts it */
  lt_tensor *oc = lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN);
  assert_true(graph_cost(&oc, 1).flops == fwd);
  lt_tensor *loss = lt_sum(o, NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_tensor *ts[4] = {loss, lt_grad(q), lt_grad(k), lt_grad(v)};
  double bwd = 2.0 * B * L * S * E    /* scores */
               + 2.0 * B * L * S * Ev /* dv = p^T g */
               + 2.0 * B * L * S * Ev /* g v^T */
               + 2.0 * B * L * S * E  /* dq = ds k */
               + 2.0 * B * L * S * E; /* dk = ds^T q */
  lt_cost all = graph_cost(ts, 4);
  lt__attn_set_fused_always(false);
  assert_true(all.flops == fwd + bwd);
  expect_executed(ts, 4, all);
}

/* A program's runs count as the sync they replace. */
static void test_program_run(void **state) {
  (void)state;
  lt_tensor *a = tu_wave_f32(1, (int64_t[]){4, 6}, 2), *b = tu_wave_f32(2, (int64_t[]){6, 3}, 2);
  lt_tensor *y = lt_matmul(a, b);
  lt_tensor *ins[2] = {a, b};
  lt_program *p = lt_program_create(&y, 1, ins, 2);
  assert_non_null(p);
  double before = executed_flops();
  lt_tensor *out = NULL;
  assert_int_equal(lt_program_run(p, ins, 2, &out), LT_OK);
  lt_cost last = {-1, -1};
  assert_int_equal(lt_get_last_cost(CPU0, &last), LT_OK);
  assert_true(last.flops == 2.0 * 4 * 6 * 3);
  assert_true(executed_flops() - before == 2.0 * 4 * 6 * 3);
  lt_release(out);
  lt_program_free(p);
}

/* ---- the training steps of lazytensor-train's models ---- */

/* The FLOPs that one training step of m executes: step traces forward,
 * loss, backward and the optimizer; the step barrier runs it. */
static double step_flops(lt_device dev, lt_tensor *(*step)(void *), void *ctx) {
  assert_int_equal(lt_mark_step(dev), LT_OK); /* the model's initialisation */
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  double before = executed_flops();
  lt_scope_begin();
  lt_tensor *loss = step(ctx);
  if (!loss) fail_msg("step: %s", lt_last_error());
  lt_scope_end();
  assert_int_equal(lt_mark_step(dev), LT_OK);
  assert_int_equal(lt_wait_device_ops(dev), LT_OK);
  return executed_flops() - before;
}

typedef struct image_step {
  train_model *m;
  lt_nn_optim *opt;
  int64_t batch, features, classes;
} image_step;

static lt_tensor *run_image_step(void *p) {
  image_step *s = p;
  float *x = malloc((size_t)(s->batch * s->features) * sizeof *x);
  int64_t *y = malloc((size_t)s->batch * sizeof *y);
  for (int64_t i = 0; i < s->batch * s->features; i++) x[i] = (float)((i % 17) * 0.05);
  for (int64_t i = 0; i < s->batch; i++) y[i] = i % s->classes;
  lt_tensor *xt = tu_f32((int64_t[]){s->batch, s->features}, 2, x);
  lt_tensor *yt = tu_i64((int64_t[]){s->batch}, 1, y);
  free(x);
  free(y);
  lt_tensor *loss = lt_nn_cross_entropy(s->m->forward(s->m, xt, true), yt);
  if (!loss || lt_backward(loss) != LT_OK || lt_nn_optim_step(s->opt) != LT_OK) return NULL;
  return loss;
}

static double image_step_flops(train_model *m, int64_t batch, int64_t features, int64_t classes) {
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  lt_nn_optim *opt = lt_nn_optim_create(&oc, m->params, m->nparams);
  assert_non_null(opt);
  image_step s = {m, opt, batch, features, classes};
  double f = step_flops(CPU0, run_image_step, &s);
  lt_nn_optim_free(opt);
  m->free(m);
  return f;
}

/* A linear layer [B, in] -> [B, out] is 2 B in out forward; its backward
 * computes the weight's gradient (the same products) and the input's
 * gradient (again the same) when the input needs one: the first layer's,
 * fed by the images, does not. */
static double linear(int64_t batch, int64_t in, int64_t out, bool input_grad) {
  return 2.0 * batch * in * out * (input_grad ? 3 : 2);
}

/* bench/train_step's MLP (784-512-512-10) at batch 16: about 0.41 GFLOP at
 * its batch of 128. */
static void test_mlp_step(void **state) {
  (void)state;
  int64_t B = 16;
  train_model m;
  assert_int_equal(model_mlp_init(&m, CPU0, 784, 512, 2, 10), LT_OK);
  double want = linear(B, 784, 512, false) + linear(B, 512, 512, true) + linear(B, 512, 10, true);
  double got = image_step_flops(&m, B, 784, 10);
  if (got != want) fail_msg("mlp step: %.0f FLOPs, hand count %.0f", got, want);
}

/* A 3x3 convolution with padding 1 keeps h x w: 2 B cout h w cin 9 forward,
 * the weight's gradient the same, and the input's gradient the same when the
 * input needs one (the first convolution's, of the images, does not). */
static double conv3x3(int64_t batch, int64_t cin, int64_t cout, int64_t hw, bool input_grad) {
  return 2.0 * batch * cout * hw * hw * cin * 9 * (input_grad ? 3 : 2);
}

/* lazytensor-train's CNN on 28 x 28 images, batch 4 (3.20 GFLOP at the
 * bench's 128): conv 1->32 at 28x28, pool, conv 32->64 at 14x14, pool,
 * linear 64*7*7 -> 128, linear 128 -> 10. Batch norm, ReLU, pooling and
 * dropout do no products. */
static void test_cnn_step(void **state) {
  (void)state;
  int64_t B = 4;
  train_model m;
  assert_int_equal(model_cnn_init(&m, CPU0, 28, 28, 10), LT_OK);
  double want = conv3x3(B, 1, 32, 28, false) + conv3x3(B, 32, 64, 14, true) +
                linear(B, 64 * 7 * 7, 128, true) + linear(B, 128, 10, true);
  double got = image_step_flops(&m, B, 28 * 28, 10);
  if (got != want) fail_msg("cnn step: %.0f FLOPs, hand count %.0f", got, want);
}

static lt_tensor *run_gpt_step(void *p) { return gpt_trainer_step(p); }

/* The GPT step of lazytensor-train (and bench/train_step --model gpt) at a
 * small size. Per block, with N = B T tokens of width C and MLP ratio r: the
 * linear layers qkv (C -> 3C), proj (C -> C), fc (C -> rC) and fc2 (rC -> C)
 * are 2 N (4 + 2r) C^2 forward and twice that backward (every input needs its
 * gradient: the embeddings train). Causal attention over B x heads is
 * 4 B T^2 C forward (q k^T and p v, counted in full); backward, the
 * composite that training builds at short contexts takes 8 B T^2 C (two
 * gradients of each product), the ATTENTION node's rule 10 B T^2 C (the
 * scores again, then four products). The head (C -> V) adds 6 N C V. At the
 * bench's size (B 32, T 64, C 128, 4 blocks, composite attention) that is
 * 10.47 G + 1.57 M V: 10.65 G with the fortunes' 114 bytes. */
static void gpt_step_case(bool fused) {
  lt__attn_set_fused_always(fused);
  lt_nn_text text = {0};
  int64_t n = 4096;
  text.bytes = malloc((size_t)n);
  text.ids = malloc((size_t)n);
  uint64_t r = 88172645463325252ull;
  for (int64_t i = 0; i < n; i++) {
    text.ids[i] = (uint8_t)(tu_xorshift(&r) % 40);
    text.bytes[i] = (uint8_t)(48 + text.ids[i]);
  }
  for (int i = 0; i < 40; i++) text.vocab[i] = (uint8_t)(48 + i);
  text.vocab_size = 40;
  text.n = n;
  text.n_train = n * 9 / 10;
  int64_t B = 3, T = 16, C = 32, L = 2, H = 2, R = 4, V = 40;
  gpt_config c = {V, T, C, L, H, R, false};
  gpt_trainer tr;
  assert_int_equal(gpt_trainer_init(&tr, CPU0, &text, &c, B, 1e-3, 0.1, 1.0, 1), LT_OK);
  double got = step_flops(CPU0, run_gpt_step, &tr);
  gpt_trainer_free(&tr);
  lt_nn_text_free(&text);
  lt__attn_set_fused_always(false);
  double N = (double)(B * T);
  double attention = (fused ? 14.0 : 12.0) * B * T * T * C;
  double want = L * (6.0 * N * (4 + 2 * R) * C * C + attention) + 6.0 * N * C * V;
  if (got != want)
    fail_msg("gpt step (%s attention): %.0f FLOPs, hand count %.0f", fused ? "fused" : "composite",
             got, want);
}

static void test_gpt_step(void **state) {
  (void)state;
  gpt_step_case(false); /* as the trainer builds it at this context */
  gpt_step_case(true);  /* the ATTENTION node and its gradient rule */
}

/* ---- the peak, and bad input ---- */

/* lt_get_fma_peak(threads) in a child whose LT_PEAK_GFLOPS is env (the
 * peak is read once per process): exits 0 when the status is want_rc and,
 * on success, the peak want. */
static void peak_child(const char *env, int threads, int want_rc, double want) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("LT_PEAK_GFLOPS", env, 1);
    double got = -1;
    int rc = lt_get_fma_peak(threads, &got);
    bool ok = rc == want_rc && (rc != LT_OK || got == want) &&
              (rc == LT_OK || strstr(lt_last_error(), "LT_PEAK_GFLOPS"));
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("LT_PEAK_GFLOPS=%s, %d threads: not status %d, peak %g", env, threads, want_rc, want);
}

static void test_peak_from_env(void **state) {
  (void)state;
  peak_child("100", 3, LT_OK, 300); /* one core's peak, times the threads */
  peak_child("12.5", 1, LT_OK, 12.5);
  peak_child("fast", 1, LT_EINVAL, 0);
  peak_child("-4", 2, LT_EINVAL, 0);
  peak_child("1e999", 2, LT_EINVAL, 0);
}

static void test_peak(void **state) {
  (void)state;
  double one = 0, two = 0, all = 0;
  int rc = lt_get_fma_peak(1, &one);
  if (rc == LT_ENOTFOUND) { /* a CPU without vector FMA: nothing measured */
    print_message("  no vector FMA here: %s\n", lt_last_error());
    return;
  }
  assert_int_equal(rc, LT_OK);
  /* any core of the last decade: at least one 128-bit FMA a cycle at 1 GHz
   * (8 GFLOP/s), at most two 512-bit ones at 6 GHz (384 GFLOP/s) */
  print_message("  one core's f32 FMA peak: %.1f GFLOP/s\n", one);
  /* valgrind runs the kernel on its emulated CPU, far below any real core's rate */
  if (!(one >= 8 && one <= 384) && !under_valgrind()) fail_msg("one core's peak %.1f GFLOP/s", one);
  assert_int_equal(lt_get_fma_peak(2, &two), LT_OK);
  assert_true(two == 2 * one); /* measured once: the same core figure */
  assert_int_equal(lt_get_fma_peak(0, &all), LT_OK);
  assert_true(all >= one && fmod(all / one, 1.0) == 0);
  double keep = 7;
  assert_int_equal(lt_get_fma_peak(-1, &keep), LT_EINVAL);
  assert_true(keep == 7);
  assert_non_null(strstr(lt_last_error(), "lt_get_fma_peak"));
  assert_int_equal(lt_get_fma_peak(1, NULL), LT_EINVAL);
}

static void test_errors(void **state) {
  (void)state;
  lt_cost c = {7, 7};
  assert_int_equal(lt_get_graph_cost(NULL, 1, &c), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_get_graph_cost"));
  assert_int_equal(lt_get_graph_cost(NULL, -1, &c), LT_EINVAL);
  lt_tensor *a = ones((int64_t[]){2}, 1);
  assert_int_equal(lt_get_graph_cost(&a, 1, NULL), LT_EINVAL);
  assert_true(c.flops == 7 && c.bytes == 7);
  assert_int_equal(lt_get_last_cost(lt_cpu(LT_MAX_DEVICES), &c), LT_EDEVICE);
  assert_int_equal(lt_get_last_cost(CPU0, NULL), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "lt_get_last_cost"));
  assert_int_equal(lt_get_executed_cost(NULL), LT_EINVAL);
  assert_true(c.flops == 7 && c.bytes == 7);
  assert_int_equal(lt_get_graph_cost(&a, 0, &c), LT_OK);
  assert_true(c.flops == 0 && c.bytes == 0);
}

/* The counters are in the metrics report, and lt_counters_reset zeroes them. */
static void test_report_and_reset(void **state) {
  (void)state;
  lt_tensor *a = tu_wave_f32(1, (int64_t[]){2, 3}, 2), *b = tu_wave_f32(2, (int64_t[]){3, 2}, 2);
  lt_tensor *y = lt_matmul(a, b);
  assert_int_equal(lt_sync(&y, 1, true), LT_OK);
  char buf[16384];
  lt_metrics_report(buf, sizeof buf);
  assert_non_null(strstr(buf, "Counter: ExecutedFlops\n  Value: 24\n"));
  assert_non_null(strstr(buf, "Counter: ExecutedBytes\n  Value: 64\n"));
  lt_counters_reset();
  assert_true(executed_flops() == 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      CTEST(test_peak_from_env), /* before the parent's own peak: forks copy it */
      CTEST(test_matmul),        CTEST(test_memory_bound_ops), CTEST(test_conv2d),
      CTEST(test_attention),     CTEST(test_mlp_step),         CTEST(test_cnn_step),
      CTEST(test_gpt_step),      CTEST(test_program_run),      CTEST(test_peak),
      CTEST(test_errors),        CTEST(test_report_and_reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
