/* The models lazytensor-train trains: a small interface so that the training
 * loop, evaluation and parameter files do not depend on the architecture. */
#ifndef LT_TRAIN_MODEL_H
#define LT_TRAIN_MODEL_H

#include <stdbool.h>
#include <stdio.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"

enum { MODEL_MAX_TENSORS = 64 };

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
};

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

#endif
