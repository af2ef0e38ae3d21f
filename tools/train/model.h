/* The models lazytensor-train trains: a small interface so that the training
 * loop, evaluation and parameter files do not depend on the architecture. */
#ifndef LT_TRAIN_MODEL_H
#define LT_TRAIN_MODEL_H

#include <stdbool.h>
#include <stdio.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "driver.h"

enum { MODEL_MAX_TENSORS = 128 };

typedef struct train_model train_model;
struct train_model {
  /* Trainable parameters (the optimizer's list). */
  lt_tensor *params[MODEL_MAX_TENSORS];
  int nparams;
  /* Everything a parameter file holds: the parameters, then the buffers
   * (batch norm's running statistics), which change in training but get no
   * gradient. */
  lt_tensor *state[MODEL_MAX_TENSORS];
  int nstate;
  /* Test images per evaluation graph: 0 evaluates the whole test set in one
   * graph; otherwise chunks of this size, the last one padded, so that the
   * evaluation compiles one graph whatever the test set's size. */
  int64_t eval_chunk;
  /* Logits [B, classes] of images x [B, features] (inside the caller's
   * scope). train: training mode (batch statistics, dropout), else eval mode:
   * two graphs, each compiled once. */
  lt_tensor *(*forward)(const train_model *m, lt_tensor *x, bool train);
  /* Prints the architecture, e.g. "mlp 784-512-512-10". */
  void (*describe)(const train_model *m, FILE *f);
  void (*free)(train_model *m);
  void *impl;
  /* LT_BF16: the forward and the loss are traced under autocast (bf16
   * products and convolutions, f32 parameters and optimizer state, as
   * torch.autocast("cpu", dtype=torch.bfloat16)); anything else: f32 */
  lt_dtype precision;
};

/* The scope of m's precision around a forward and its loss on dev (the
 * caller ends it before lt_backward, as torch's autocast scope ends before
 * backward()): LT_OK, or the error of lt_autocast_begin. */
static inline int model_precision_begin(const train_model *m, lt_device dev) {
  return m->precision == LT_BF16 ? lt_autocast_begin(dev, LT_BF16) : LT_OK;
}
static inline void model_precision_end(const train_model *m, lt_device dev) {
  if (m->precision == LT_BF16) lt_autocast_end(dev);
}

/* Adds a parameter (also to state) or a buffer (state only); false when full. */
static inline bool model_add_param(train_model *m, lt_tensor *t) {
  if (!t || m->nparams >= MODEL_MAX_TENSORS || m->nstate >= MODEL_MAX_TENSORS) return false;
  m->params[m->nparams++] = t;
  m->state[m->nstate++] = t;
  return true;
}
static inline bool model_add_buffer(train_model *m, lt_tensor *t) {
  if (!t || m->nstate >= MODEL_MAX_TENSORS) return false;
  m->state[m->nstate++] = t;
  return true;
}

/* The MLP: features-hidden x layers-classes, ReLU between the layers. */
int model_mlp_init(train_model *m, lt_device dev, int64_t features, int64_t hidden, int64_t layers,
                   int64_t classes);
/* The CNN of issue #14 on rows x cols single-channel images: two blocks of
 * conv 3x3 (padding 1) / batch norm / ReLU / max-pool 2 (32 and 64
 * channels), flatten, linear to 128, ReLU, dropout 0.25, linear to classes. */
int model_cnn_init(train_model *m, lt_device dev, int64_t rows, int64_t cols, int64_t classes);

/* The character-level GPT of issue #15 (model_gpt.c): learned token and
 * position embeddings, `layers` pre-norm blocks x + attn(ln1(x)) and
 * x + mlp(ln2(x)) (causal self-attention over `heads` heads, one [C, 3C]
 * projection for q, k, v and one [C, C] out; MLP C-4C-C with tanh gelu), a
 * final layer norm and a linear head to the vocabulary (no weight tying).
 * PyTorch's default inits. Its forward takes token ids [B, T] (i64, T <=
 * context) and gives logits [B, T, vocab]; `train` changes nothing (no
 * dropout). */
typedef struct gpt_config {
  int64_t vocab, context, width, layers, heads, mlp_ratio;
  /* Build the embedding lookup (index_select), attention (an additive
   * causal mask, matmul, softmax) and the tanh gelu (its formula) from
   * other ops instead of lt_embedding, lt_scaled_dot_product_attention and
   * lt_gelu_tanh: the oracle of the fused ops (tests/test_gpt.c). */
  bool composite;
} gpt_config;
int model_gpt_init(train_model *m, lt_device dev, const gpt_config *c);
/* Whether parameter i of a GPT is a weight matrix of a linear layer (the
 * parameters AdamW decays; not biases, norms or embeddings). */
bool model_gpt_decays(const train_model *m, int i);
const gpt_config *model_gpt_config(const train_model *m);
void model_gpt_set_composite(train_model *m, bool on); /* gpt_config.composite from now on */

/* GPT training (gpt_trainer.c), shared by lazytensor-train --model gpt,
 * bench/train_step --model gpt and tests/test_gpt.c. AdamW (betas 0.9,
 * 0.999, eps 1e-8) with weight decay on the weight matrices only, gradient
 * clipping by the global 2-norm inside the step graph, batches of random
 * windows of the training split drawn from a host RNG. */
typedef struct gpt_trainer {
  train_model m;
  gpt_config c;
  lt_nn_optim *opt; /* AdamW; decay 0 for the parameters that are no matrices */
  const lt_nn_text *text;
  lt_device dev;
  int64_t batch;
  double clip;  /* max global grad norm; 0: no clipping */
  uint64_t rng; /* the host RNG of the windows (splitmix64 state) */
} gpt_trainer;
/* The model (pending init draws from dev's RNG: the caller's next step
 * barrier runs them) and its optimizer. On failure tr is freed. */
int gpt_trainer_init(gpt_trainer *tr, lt_device dev, const lt_nn_text *text, const gpt_config *c,
                     int64_t batch, double lr, double weight_decay, double clip, uint64_t seed);
void gpt_trainer_free(gpt_trainer *tr);
/* Traces one training step (forward, loss, backward, clipping, AdamW) on
 * the next batch; nothing runs until the caller's step barrier. The mean
 * loss (owned by the open scope), or NULL. */
lt_tensor *gpt_trainer_step(gpt_trainer *tr);
/* The same as replica rank of size data-parallel replicas (train_gpt_dp.c),
 * tr->batch windows per replica: every replica draws the same size x batch
 * windows and takes rows [rank x batch, (rank + 1) x batch); the grads are
 * averaged over the replicas (an all-reduce in the step graph), then
 * clipped and stepped, so that the replicas follow one process at batch
 * size x batch up to rounding. The replica's own mean loss, or NULL. */
lt_tensor *gpt_trainer_step_dp(gpt_trainer *tr, int rank, int size);
/* lazytensor-train --model gpt's options (train_gpt.c parses them; the
 * data-parallel run, train_gpt_dp.c, takes the same ones and refuses those
 * it has no use for). */
typedef struct gpt_options {
  driver_opts d; /* the options of every model (driver.h) */
  int64_t steps, batch, warmup, eval_every, eval_windows, generate, devices;
  gpt_config c;
  double lr, weight_decay, clip, temperature;
  bool mpi; /* --data-parallel */
  const char *prompt;
} gpt_options;
/* 0 on success, 1 after --help, -1 on a bad command line (after a message). */
int gpt_parse(int argc, char **argv, gpt_options *o);
/* The learning rate is graph data: changing it never recompiles. */
int gpt_trainer_set_lr(gpt_trainer *tr, double lr);
/* Step s's rate of a run of `steps`: linear warm-up to lr over `warmup`
 * steps ((s + 1) / warmup), then a half cosine from lr down to lr / 10 at
 * the last step. */
double gpt_lr_at(double lr, int64_t s, int64_t steps, int64_t warmup);
/* The fixed evaluation windows of a split: the first windows of context + 1
 * tokens at stride context from the split's start (validation: n_train;
 * training: 0), at most max_windows, rounded down to a multiple of the chunk
 * min(32, windows) that each graph evaluates. *loss: the mean token loss. */
int gpt_evaluate(const gpt_trainer *tr, bool validation, int64_t max_windows, double *loss);
/* Samples n tokens after prompt (its bytes that are in the vocabulary;
 * none: a newline, or token 0) into out (n bytes): one fixed-shape graph
 * per token, compiled once: the last `context` tokens, right-padded, the
 * position to read and the temperature as data. temperature 0 takes the
 * most likely token. */
int gpt_generate(const train_model *m, const lt_nn_text *text, const char *prompt, int64_t n,
                 double temperature, uint64_t seed, char *out);
/* lazytensor-train --model gpt (train_gpt.c): the whole run (argv as main's). */
int train_gpt_main(int argc, char **argv);

#endif
