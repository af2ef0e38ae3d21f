/* lazytensor-train's CNN (issue #14): conv 3x3 1->32 (padding 1), batch
 * norm, ReLU, max-pool 2; conv 3x3 32->64 (padding 1), batch norm, ReLU,
 * max-pool 2; flatten; linear 64 (rows/4) (cols/4) -> 128, ReLU, dropout
 * 0.25; linear 128 -> classes. PyTorch's layer defaults throughout. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

enum { C1 = 32, C2 = 64, HIDDEN = 128 };
#define DROPOUT 0.25

typedef struct cnn {
  lt_nn_conv2d conv1, conv2;
  lt_nn_batchnorm2d bn1, bn2;
  lt_nn_linear fc1, fc2;
  int64_t rows, cols, classes;
} cnn;

/* conv, batch norm, ReLU, max-pool 2 */
static lt_tensor *block(const lt_nn_conv2d *conv, const lt_nn_batchnorm2d *bn, lt_tensor *x,
                        bool train) {
  lt_tensor *h = lt_nn_batchnorm2d_forward(bn, lt_nn_conv2d_forward(conv, x), train);
  return lt_nn_max_pool2d_n(lt_nn_relu(h), (const int64_t[]){2, 2}, 2, NULL, 0, NULL, 0);
}

static lt_tensor *cnn_forward(const train_model *m, lt_tensor *x, bool train) {
  const cnn *p = m->impl;
  if (!x) return NULL;
  /* the loader's rows of pixels as [B, 1, rows, cols] images */
  lt_tensor *h = lt_reshape(x, (const int64_t[]){lt_dim(x, 0), 1, p->rows, p->cols}, 4);
  h = block(&p->conv2, &p->bn2, block(&p->conv1, &p->bn1, h, train), train);
  h = lt_nn_relu(lt_nn_linear_forward(&p->fc1, lt_flatten(h, 1, -1)));
  return lt_nn_linear_forward(&p->fc2, lt_nn_dropout(h, DROPOUT, train));
}

static void cnn_describe(const train_model *m, FILE *f) {
  const cnn *p = m->impl;
  fprintf(f, "cnn %lldx%lld conv3x3-%d-bn-pool2 conv3x3-%d-bn-pool2 %lld-%d-dropout%g-%lld",
          (long long)p->rows, (long long)p->cols, C1, C2, (long long)p->fc1.in, HIDDEN, DROPOUT,
          (long long)p->classes);
}

static void cnn_free(train_model *m) {
  cnn *p = m->impl;
  if (!p) return;
  lt_nn_conv2d_free(&p->conv1);
  lt_nn_conv2d_free(&p->conv2);
  lt_nn_batchnorm2d_free(&p->bn1);
  lt_nn_batchnorm2d_free(&p->bn2);
  lt_nn_linear_free(&p->fc1);
  lt_nn_linear_free(&p->fc2);
  free(p);
  m->impl = NULL;
  m->nparams = m->nstate = 0;
}

int model_cnn_init(train_model *m, lt_device dev, int64_t rows, int64_t cols, int64_t classes) {
  memset(m, 0, sizeof *m);
  m->forward = cnn_forward;
  m->describe = cnn_describe;
  m->free = cnn_free;
  /* The whole test set's activations in one graph would take gigabytes
   * (10000 x 32 x 28 x 28 floats per layer output). */
  m->eval_chunk = 1000;
  if (rows < 4 || cols < 4) return LT_EINVAL; /* two poolings by 2 */
  cnn *p = calloc(1, sizeof *p);
  if (!p) return LT_ENOMEM;
  m->impl = p;
  p->rows = rows;
  p->cols = cols;
  p->classes = classes;
  const int64_t k3[2] = {3, 3}, pad1[2] = {1, 1};
  int64_t flat = C2 * (rows / 2 / 2) * (cols / 2 / 2);
  int rc =
      lt_nn_conv2d_init_n(&p->conv1, dev, LT_F32, 1, C1, k3, 2, NULL, 0, pad1, 2, NULL, 0, 1, true);
  if (rc == LT_OK) rc = lt_nn_batchnorm2d_init(&p->bn1, dev, LT_F32, C1, true);
  if (rc == LT_OK)
    rc = lt_nn_conv2d_init_n(&p->conv2, dev, LT_F32, C1, C2, k3, 2, NULL, 0, pad1, 2, NULL, 0, 1,
                             true);
  if (rc == LT_OK) rc = lt_nn_batchnorm2d_init(&p->bn2, dev, LT_F32, C2, true);
  if (rc == LT_OK) rc = lt_nn_linear_init(&p->fc1, dev, LT_F32, flat, HIDDEN, true);
  if (rc == LT_OK) rc = lt_nn_linear_init(&p->fc2, dev, LT_F32, HIDDEN, classes, true);
  if (rc != LT_OK) return rc;
  /* The parameters in the layers' order, then the buffers. */
  lt_tensor *params[] = {p->conv1.weight, p->conv1.bias, p->bn1.weight, p->bn1.bias,
                         p->conv2.weight, p->conv2.bias, p->bn2.weight, p->bn2.bias,
                         p->fc1.weight,   p->fc1.bias,   p->fc2.weight, p->fc2.bias};
  for (size_t i = 0; i < sizeof params / sizeof *params; i++) model_add_param(m, params[i]);
  model_add_buffer(m, p->bn1.running_mean);
  model_add_buffer(m, p->bn1.running_var);
  model_add_buffer(m, p->bn2.running_mean);
  model_add_buffer(m, p->bn2.running_var);
  return LT_OK;
}
