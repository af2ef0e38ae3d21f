/* lazytensor-train's GPT (tools/train/model_gpt.c, train_gpt.c) at a tiny
 * size on a 2 KB corpus the test writes: the loss falls, the training step
 * compiles once while the rate changes, evaluation and generation compile
 * once, generation is deterministic under a seed, and the schedule's values. */
#include <math.h>
#include <sys/stat.h>

#include "model.h"
#include "test_util.h"

static char g_dir[64];
static lt_nn_text g_text;

static int group_setup(void **state) {
  (void)state;
  if (!tu_mkdtemp(g_dir, sizeof g_dir, "lt_test_gpt_")) return -1;
  /* a learnable text: a few short lines in a pseudo-random order */
  static const char *const lines[] = {"the cat sat on the mat.\n", "a dog ate the hat.\n",
                                      "the sun is hot.\n", "we sat in the sun.\n"};
  char path[128];
  snprintf(path, sizeof path, "%s/text", g_dir);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint64_t s = 7;
  for (int written = 0; written < 2048;) {
    const char *l = lines[tu_xorshift(&s) % 4];
    fputs(l, f);
    written += (int)strlen(l);
  }
  fclose(f);
  return lt_nn_text_load(g_dir, &g_text) == LT_OK ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  lt_nn_text_free(&g_text);
  return tu_rm_tree(g_dir);
}

static int setup(void **state) {
  lt_wait_device_ops(CPU0);
  return tu_setup(state);
}
#define DTEST(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown_wait)

static gpt_config tiny(void) { return (gpt_config){g_text.vocab_size, 8, 16, 1, 2, 4, false}; }

/* One step traced and queued; its loss (the caller's reference), read
 * later so that tracing overlaps the executions as in a run. */
static lt_tensor *step(gpt_trainer *tr) {
  lt_scope_begin();
  lt_tensor *loss = gpt_trainer_step(tr);
  if (!loss) fail_msg("step: %s", lt_last_error());
  lt_retain(loss);
  lt_scope_end();
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  return loss;
}

static double take(lt_tensor *loss) {
  double v = NAN;
  assert_int_equal(lt_item(loss, 0, &v), LT_OK);
  lt_release(loss);
  return v;
}

static void test_loss_falls_and_step_compiles_once(void **state) {
  (void)state;
  gpt_config c = tiny();
  gpt_trainer tr;
  assert_int_equal(gpt_trainer_init(&tr, CPU0, &g_text, &c, 8, 1e-2, 0.1, 1.0, 3), LT_OK);
  /* 2 + 12 + 4 parameters; the linear weights decay */
  assert_int_equal(tr.m.nparams, 18);
  int decaying = 0;
  for (int i = 0; i < tr.m.nparams; i++) decaying += model_gpt_decays(&tr.m, i);
  assert_int_equal(decaying, 5); /* qkv, proj, fc, fc2, head */
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  enum { STEPS = 24 };
  lt_tensor *losses[STEPS];
  double loss[STEPS];
  int64_t after_first = 0;
  for (int s = 0; s < STEPS; s++) {
    assert_int_equal(gpt_trainer_set_lr(&tr, gpt_lr_at(1e-2, s, STEPS, 3)), LT_OK);
    losses[s] = step(&tr);
    if (s == 0) after_first = tu_counter("UncachedCompile");
  }
  for (int s = 0; s < STEPS; s++) {
    loss[s] = take(losses[s]);
    assert_true(isfinite(loss[s]));
  }
  /* every step after the first ran the first one's executable */
  assert_int_equal(tu_counter("UncachedCompile"), after_first);
  double head = (loss[0] + loss[1] + loss[2]) / 3;
  double tail = (loss[STEPS - 1] + loss[STEPS - 2] + loss[STEPS - 3]) / 3;
  if (!(tail < head - 0.5)) fail_msg("loss %.4f at the start, %.4f at the end", head, tail);

  /* evaluation: one graph for both splits (16 windows each: one chunk
   * shape), read twice the same */
  double v1, v2, t1;
  assert_int_equal(gpt_evaluate(&tr, true, 16, &v1), LT_OK);
  int64_t compiled = tu_counter("UncachedCompile");
  assert_int_equal(gpt_evaluate(&tr, true, 16, &v2), LT_OK);
  assert_int_equal(gpt_evaluate(&tr, false, 16, &t1), LT_OK);
  assert_int_equal(tu_counter("UncachedCompile"), compiled);
  assert_true(v1 == v2);
  assert_true(isfinite(t1) && t1 < head);
  gpt_trainer_free(&tr);
}

static void test_generation_compiles_once_and_is_seeded(void **state) {
  (void)state;
  gpt_config c = tiny();
  gpt_trainer tr;
  assert_int_equal(gpt_trainer_init(&tr, CPU0, &g_text, &c, 4, 1e-2, 0.1, 1.0, 5), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  for (int s = 0; s < 3; s++) take(step(&tr));
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  enum { N = 20 }; /* past the context of 8: the window slides */
  char a[N], b[N], g[N];
  int64_t before = tu_counter("UncachedCompile");
  assert_int_equal(gpt_generate(&tr.m, &g_text, "the ", N, 0.8, 11, a), LT_OK);
  assert_int_equal(tu_counter("UncachedCompile"), before + 1);
  assert_int_equal(gpt_generate(&tr.m, &g_text, "the ", N, 0.8, 11, b), LT_OK);
  assert_memory_equal(a, b, N);
  /* greedy decoding and another prompt: the same executable */
  assert_int_equal(gpt_generate(&tr.m, &g_text, "x", N, 0.0, 11, g), LT_OK);
  assert_int_equal(tu_counter("UncachedCompile"), before + 1);
  for (int i = 0; i < N; i++) {
    bool in_vocab = false;
    for (int k = 0; k < g_text.vocab_size; k++) in_vocab |= g_text.vocab[k] == (uint8_t)a[i];
    assert_true(in_vocab);
  }
  assert_int_equal(gpt_generate(&tr.m, &g_text, "", N, -1.0, 11, g), LT_EINVAL);
  gpt_trainer_free(&tr);
}

/* Logits and parameter grads of the loss on ids [2, t], read into host
 * arrays (logits: 2 t V floats; grads: wte's and the first block's qkv
 * weight's). */
static void forward_backward(train_model *m, const int64_t *ids, int64_t t, float *logits,
                             float *g_wte, float *g_qkv) {
  lt_scope_begin();
  lt_tensor *x = lt_from_data(CPU0, LT_I64, SHAPE(2, t), 2, ids);
  lt_tensor *out = m->forward(m, x, true);
  assert_non_null(out);
  int64_t v = lt_dim(out, -1);
  /* a loss that weighs every logit differently, so that each gets a grad */
  lt_tensor *w =
      lt_sin(lt_reshape(lt_arange(CPU0, LT_F32, 0, (double)(2 * t * v), 1), SHAPE(2, t, v), 3));
  lt_tensor *loss = lt_sum(lt_mul(out, w), NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  assert_int_equal(lt_to_data(out, logits, (size_t)(2 * t * v) * sizeof(float)), LT_OK);
  lt_tensor *gw = lt_grad(m->params[0]), *gq = lt_grad(m->params[4]);
  assert_non_null(gw);
  assert_non_null(gq);
  assert_int_equal(lt_to_data(gw, g_wte, (size_t)lt_numel(gw) * sizeof(float)), LT_OK);
  assert_int_equal(lt_to_data(gq, g_qkv, (size_t)lt_numel(gq) * sizeof(float)), LT_OK);
  lt_scope_end();
  for (int i = 0; i < m->nparams; i++) lt_zero_grad(m->params[i]);
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
  return d;
}

/* The fused ops (lt_embedding, lt_scaled_dot_product_attention causal,
 * lt_gelu_tanh) against their compositions of other ops: the same logits
 * and grads, at the full context and at a shorter one (sliced positions and
 * mask). */
static void test_fused_ops_match_composite(void **state) {
  (void)state;
  gpt_config c = tiny();
  c.layers = 2;
  train_model m;
  assert_int_equal(model_gpt_init(&m, CPU0, &c), LT_OK);
  assert_int_equal(lt_nn_params_sync(m.params, m.nparams), LT_OK);
  assert_int_equal(model_gpt_config(&m)->context, c.context);
  const int64_t ids[16] = {0, 3, 3, 1, 5, 2, 0, 4, 6, 6, 1, 0, 2, 5, 3, 1};
  int64_t v = c.vocab, w = c.width;
  float *l1 = calloc((size_t)(16 * v), 4), *l2 = calloc((size_t)(16 * v), 4);
  float *e1 = calloc((size_t)(v * w), 4), *e2 = calloc((size_t)(v * w), 4);
  float *q1 = calloc((size_t)(3 * w * w), 4), *q2 = calloc((size_t)(3 * w * w), 4);
  for (int64_t t = 8; t >= 5; t -= 3) { /* context 8, then 5 of it */
    int64_t sub[16];
    for (int r = 0; r < 2; r++)
      for (int64_t j = 0; j < t; j++) sub[r * t + j] = ids[r * 8 + j];
    model_gpt_set_composite(&m, false);
    forward_backward(&m, sub, t, l1, e1, q1);
    model_gpt_set_composite(&m, true);
    forward_backward(&m, sub, t, l2, e2, q2);
    double dl = max_diff(l1, l2, 2 * t * v), de = max_diff(e1, e2, v * w),
           dq = max_diff(q1, q2, 3 * w * w);
    if (dl > 1e-4 || de > 1e-4 || dq > 1e-4)
      fail_msg("t %lld: logits differ by %g, wte grads by %g, qkv grads by %g", (long long)t, dl,
               de, dq);
    /* the grads are not all zero: the comparison means something */
    assert_true(max_diff(e1, e1 + 1, v * w - 1) > 1e-3);
  }
  free(l1), free(l2), free(e1), free(e2), free(q1), free(q2);
  m.free(&m);
}

static void test_lr_schedule(void **state) {
  (void)state;
  /* warm-up 10 of 111 steps, then a half cosine over steps 10..110 */
  assert_true(tu_near(gpt_lr_at(1.0, 0, 111, 10), 0.1, 1e-12));
  assert_true(tu_near(gpt_lr_at(1.0, 9, 111, 10), 1.0, 1e-12));
  assert_true(tu_near(gpt_lr_at(1.0, 10, 111, 10), 1.0, 1e-12));
  assert_true(tu_near(gpt_lr_at(1.0, 60, 111, 10), 0.55, 1e-12));
  assert_true(tu_near(gpt_lr_at(1.0, 110, 111, 10), 0.1, 1e-12));
  assert_true(tu_near(gpt_lr_at(2.0, 0, 5, 0), 2.0, 1e-12));
}

static void test_bad_config(void **state) {
  (void)state;
  gpt_trainer tr;
  gpt_config c = tiny();
  c.heads = 3; /* 16 is not a multiple of 3 */
  assert_int_equal(gpt_trainer_init(&tr, CPU0, &g_text, &c, 4, 1e-3, 0.1, 1.0, 1), LT_EINVAL);
  c = tiny();
  c.context = g_text.n_train; /* no window fits the split */
  assert_int_equal(gpt_trainer_init(&tr, CPU0, &g_text, &c, 4, 1e-3, 0.1, 1.0, 1), LT_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      DTEST(test_loss_falls_and_step_compiles_once),
      DTEST(test_generation_compiles_once_and_is_seeded),
      DTEST(test_fused_ops_match_composite),
      DTEST(test_lr_schedule),
      DTEST(test_bad_config),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
