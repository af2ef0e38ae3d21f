/* The GPT's training pieces (model.h): the trainer (model, AdamW with
 * per-parameter weight decay, clipping, random windows from a host RNG), the
 * learning-rate schedule, the fixed-window evaluation and the fixed-shape
 * generation step. lazytensor-train --model gpt (train_gpt.c),
 * bench/train_step --model gpt and tests/test_gpt.c share them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"
#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "model.h"

enum { EVAL_CHUNK = 32 };

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 bits */
static double uniform01(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1.0p-53; }

double gpt_lr_at(double lr, int64_t s, int64_t steps, int64_t warmup) {
  if (s < warmup) return lr * (double)(s + 1) / (double)warmup;
  int64_t span = steps - warmup - 1;
  double p = span > 0 ? (double)(s - warmup) / (double)span : 1.0;
  if (p > 1) p = 1;
  return lr * (0.1 + 0.9 * 0.5 * (1.0 + cos(3.14159265358979323846 * p)));
}

void gpt_trainer_free(gpt_trainer *tr) {
  if (!tr) return;
  lt_nn_optim_free(tr->opt);
  if (tr->m.free) tr->m.free(&tr->m);
  memset(tr, 0, sizeof *tr);
}

int gpt_trainer_init(gpt_trainer *tr, lt_device dev, const lt_nn_text *text, const gpt_config *c,
                     int64_t batch, double lr, double weight_decay, double clip, uint64_t seed) {
  memset(tr, 0, sizeof *tr);
  if (!text || !c || batch < 1 || text->n_train < c->context + 2) {
    fprintf(stderr, "gpt: the training split (%lld tokens) is shorter than a window (%lld + 1)\n",
            text ? (long long)text->n_train : 0LL, c ? (long long)c->context : 0LL);
    return LT_EINVAL;
  }
  tr->text = text;
  tr->dev = dev;
  tr->batch = batch;
  tr->clip = clip;
  tr->c = *c;
  tr->rng = seed ^ 0x5DEECE66Dull; /* the windows' stream, apart from generation's */
  int rc = model_gpt_init(&tr->m, dev, c);
  if (rc != LT_OK) {
    if (rc == LT_EINVAL)
      fprintf(stderr,
              "gpt: bad configuration: vocab %lld, context %lld, width %lld (a multiple of the "
              "%lld heads), %lld layers (at most %d), mlp ratio %lld\n",
              (long long)c->vocab, (long long)c->context, (long long)c->width, (long long)c->heads,
              (long long)c->layers, (MODEL_MAX_TENSORS - 6) / 12, (long long)c->mlp_ratio);
    gpt_trainer_free(tr);
    return rc;
  }
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAMW);
  oc.lr = lr;
  oc.weight_decay = weight_decay;
  tr->opt = lt_nn_optim_create(&oc, tr->m.params, tr->m.nparams);
  rc = tr->opt ? LT_OK : lt_last_status() ? lt_last_status() : LT_ENOMEM;
  for (int i = 0; rc == LT_OK && i < tr->m.nparams; i++)
    if (!model_gpt_decays(&tr->m, i)) rc = lt_nn_optim_set_param_weight_decay(tr->opt, i, 0.0);
  if (rc != LT_OK) {
    gpt_trainer_free(tr);
    return rc;
  }
  return LT_OK;
}

int gpt_trainer_set_lr(gpt_trainer *tr, double lr) { return lt_nn_optim_set_lr(tr->opt, lr); }

/* Mean token cross-entropy of the model on windows x, y [B, T], traced
 * under the model's precision. */
static lt_tensor *window_loss(const train_model *m, lt_device dev, lt_tensor *x, lt_tensor *y,
                              bool train) {
  if (model_precision_begin(m, dev) != LT_OK) return NULL;
  lt_tensor *logits = m->forward(m, x, train), *loss = NULL;
  if (logits && y) {
    int64_t v = lt_dim(logits, -1);
    loss = lt_nn_cross_entropy(lt_reshape(logits, (const int64_t[]){-1, v}, 2),
                               lt_reshape(y, (const int64_t[]){-1}, 1));
  }
  model_precision_end(m, dev);
  return loss;
}

/* Draws the next size x batch windows (every replica the same draws, and
 * one process at batch size x b the same as well) and traces the forward and
 * backward of rows [rank x b, (rank + 1) x b): the mean loss, or NULL. */
static lt_tensor *shard_backward(gpt_trainer *tr, int rank, int size) {
  int64_t t = tr->c.context, b = tr->batch;
  int64_t starts[4096];
  if (b * size > 4096) return NULL;
  /* a window of t + 1 tokens inside the training split */
  uint64_t span = (uint64_t)(tr->text->n_train - t);
  for (int64_t i = 0; i < b * size; i++) starts[i] = (int64_t)(splitmix64(&tr->rng) % span);
  lt_tensor *x, *y;
  if (lt_nn_text_windows(tr->text, tr->dev, starts + rank * b, b, t, &x, &y) != LT_OK) return NULL;
  lt_tensor *loss = window_loss(&tr->m, tr->dev, x, y, true);
  return loss && lt_backward(loss) == LT_OK ? loss : NULL;
}

lt_tensor *gpt_trainer_step(gpt_trainer *tr) {
  lt_tensor *loss = shard_backward(tr, 0, 1);
  if (!loss) return NULL;
  if (tr->clip > 0 && lt_nn_clip_grad_norm(tr->m.params, tr->m.nparams, tr->clip, 2.0, NULL))
    return NULL;
  return lt_nn_optim_step(tr->opt) == LT_OK ? loss : NULL;
}

lt_tensor *gpt_trainer_step_dp(gpt_trainer *tr, int rank, int size) {
  lt_tensor *loss = shard_backward(tr, rank, size);
  /* the grads averaged in place before the clipping, so that it measures
   * the global batch's gradient (as clip_grad_norm_ after DDP's backward) */
  if (!loss || lt_dp_average_grads(tr->m.params, tr->m.nparams) != LT_OK) return NULL;
  if (tr->clip > 0 && lt_nn_clip_grad_norm(tr->m.params, tr->m.nparams, tr->clip, 2.0, NULL))
    return NULL;
  return lt_nn_optim_step(tr->opt) == LT_OK ? loss : NULL;
}

int gpt_evaluate(const gpt_trainer *tr, bool validation, int64_t max_windows, double *loss) {
  const lt_nn_text *text = tr->text;
  int64_t t = tr->c.context;
  int64_t begin = validation ? text->n_train : 0, end = validation ? text->n : text->n_train;
  int64_t windows = (end - begin - 1) / t;
  if (windows > max_windows) windows = max_windows;
  int64_t chunk = windows < EVAL_CHUNK ? windows : EVAL_CHUNK;
  if (chunk < 1) {
    fprintf(stderr, "gpt: the %s split is shorter than a window\n",
            validation ? "validation" : "training");
    return LT_EINVAL;
  }
  windows -= windows % chunk;
  double sum = 0;
  int rc = LT_OK;
  lt_no_grad_begin();
  for (int64_t w = 0; w < windows && rc == LT_OK; w += chunk) {
    int64_t starts[EVAL_CHUNK];
    for (int64_t i = 0; i < chunk; i++) starts[i] = begin + (w + i) * t;
    lt_scope_begin();
    lt_tensor *x, *y;
    rc = lt_nn_text_windows(text, tr->dev, starts, chunk, t, &x, &y);
    lt_tensor *l = rc == LT_OK ? window_loss(&tr->m, tr->dev, x, y, false) : NULL;
    double v = 0;
    if (rc == LT_OK) rc = l ? lt_item(l, 0, &v) : lt_last_status();
    sum += v;
    lt_scope_end();
  }
  lt_no_grad_end();
  if (rc == LT_OK) *loss = sum / (double)(windows / chunk);
  return rc;
}

int gpt_generate(const train_model *m, const lt_nn_text *text, const char *prompt, int64_t n,
                 double temperature, uint64_t seed, char *out) {
  const gpt_config *c = model_gpt_config(m);
  if (!c || !text || n < 0 || !out || !(temperature >= 0)) return LT_EINVAL;
  int64_t t = c->context, v = c->vocab, len = 0,
          cap = n + (prompt ? (int64_t)strlen(prompt) : 0) + 1;
  int64_t *seq = malloc((size_t)cap * sizeof *seq);
  float *probs = malloc((size_t)v * sizeof *probs);
  if (!seq || !probs) {
    free(seq);
    free(probs);
    return LT_ENOMEM;
  }
  int id_of[256];
  for (int i = 0; i < 256; i++) id_of[i] = -1;
  for (int i = 0; i < text->vocab_size; i++) id_of[text->vocab[i]] = i;
  for (const char *p = prompt; p && *p; p++)
    if (id_of[(uint8_t)*p] >= 0) seq[len++] = id_of[(uint8_t)*p];
  if (len == 0) seq[len++] = id_of['\n'] >= 0 ? id_of['\n'] : 0;
  uint64_t rng = seed ^ 0xA0761D6478BD642Full;
  int rc = LT_OK;
  /* The temperature enters as data; greedy decoding reads the plain softmax. */
  float temp = temperature > 0 ? (float)temperature : 1.0f;
  int64_t window[4096];
  if (t > 4096) rc = LT_EINVAL;
  lt_no_grad_begin();
  for (int64_t i = 0; i < n && rc == LT_OK; i++) {
    /* the last t tokens from position 0, zeros after them: causal attention
     * keeps the padding out of the position read */
    int64_t from = len > t ? len - t : 0, used = len - from;
    for (int64_t j = 0; j < t; j++) window[j] = j < used ? seq[from + j] : 0;
    int64_t pos = used - 1;
    lt_scope_begin();
    lt_device dev = lt_get_device(m->params[0]);
    lt_tensor *x = lt_from_data(dev, LT_I64, (const int64_t[]){1, t}, 2, window);
    lt_tensor *at = lt_from_data(dev, LT_I64, (const int64_t[]){1}, 1, &pos);
    lt_tensor *tt = lt_from_data(dev, LT_F32, NULL, 0, &temp);
    lt_tensor *logits = lt_index_select(m->forward(m, x, false), 1, at); /* [1, 1, V] */
    lt_tensor *p = lt_softmax(lt_div(logits, tt), -1);
    rc = p ? lt_to_data(p, probs, (size_t)v * sizeof *probs) : lt_last_status();
    lt_scope_end();
    if (rc != LT_OK) break;
    int64_t pick = 0;
    if (temperature == 0) {
      for (int64_t k = 1; k < v; k++)
        if (probs[k] > probs[pick]) pick = k;
    } else {
      double u = uniform01(&rng), acc = 0;
      pick = v - 1; /* rounding: the sum may fall short of 1 */
      for (int64_t k = 0; k < v; k++) {
        acc += probs[k];
        if (u < acc) {
          pick = k;
          break;
        }
      }
    }
    seq[len++] = pick;
    out[i] = (char)text->vocab[pick];
  }
  lt_no_grad_end();
  free(seq);
  free(probs);
  return rc;
}
