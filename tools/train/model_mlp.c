/* lazytensor-train's MLP: linear layers with ReLU between them. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct mlp {
  lt_nn_linear *layer;
  int n;
} mlp;

static lt_tensor *mlp_forward(const train_model *m, lt_tensor *x, bool train) {
  (void)train; /* no dropout or batch norm: both modes are the same graph */
  const mlp *p = m->impl;
  lt_tensor *h = x;
  for (int i = 0; i < p->n; i++) {
    h = lt_nn_linear_forward(&p->layer[i], h);
    if (i + 1 < p->n) h = lt_nn_relu(h);
  }
  return h;
}

static void mlp_describe(const train_model *m, FILE *f) {
  const mlp *p = m->impl;
  fprintf(f, "mlp %lld", (long long)p->layer[0].in);
  for (int i = 0; i < p->n; i++) fprintf(f, "-%lld", (long long)p->layer[i].out);
}

static void mlp_free(train_model *m) {
  mlp *p = m->impl;
  if (!p) return;
  for (int i = 0; i < p->n; i++) lt_nn_linear_free(&p->layer[i]);
  free(p->layer);
  free(p);
  m->impl = NULL;
  m->nparams = m->nstate = 0;
}

int model_mlp_init(train_model *m, lt_device dev, int64_t features, int64_t hidden, int64_t layers,
                   int64_t classes) {
  memset(m, 0, sizeof *m);
  m->forward = mlp_forward;
  m->describe = mlp_describe;
  m->free = mlp_free;
  if (2 * (layers + 1) > MODEL_MAX_TENSORS) return LT_EINVAL;
  mlp *p = calloc(1, sizeof *p);
  if (p) p->layer = calloc((size_t)layers + 1, sizeof *p->layer);
  if (!p || !p->layer) {
    free(p);
    return LT_ENOMEM;
  }
  m->impl = p;
  for (int64_t i = 0; i <= layers; i++) {
    int64_t a = i == 0 ? features : hidden, b = i == layers ? classes : hidden;
    int rc = lt_nn_linear_init(&p->layer[p->n], dev, LT_F32, a, b, true);
    if (rc != LT_OK) return rc;
    model_add_param(m, p->layer[p->n].weight);
    model_add_param(m, p->layer[p->n].bias);
    p->n++;
  }
  return LT_OK;
}
