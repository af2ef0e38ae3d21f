/* Internal helpers of the nn module (layers, optimizers, data, files). */
#ifndef LT_NN_H
#define LT_NN_H

#include "lazytensor_nn.h"
#include "lt_alloc.h"
#include "lt_error.h"
#include "lt_tensor.h"

/* Tensors made inside an nn_own_begin()/nn_own_end() pair and passed to
 * nn_keep() belong to the caller (one reference), whether or not a user scope
 * is open; every other tensor made between the two is released. */
static inline void nn_own_begin(void) { lt_scope_begin(); }
static inline void nn_own_end(void) { lt_scope_end(); }
static inline lt_tensor *nn_keep(lt_tensor *t) { return t ? lt_retain(t) : NULL; }

/* A 0-d tensor holding v as device data whatever v is (lt_from_data: never an
 * IR constant, unlike lt_scalar for 0 and +-1), for values that change from
 * step to step. */
static inline lt_tensor *nn_step_scalar(lt_device dev, lt_dtype dt, double v) {
  if (dt == LT_F64) return lt_from_data(dev, dt, NULL, 0, &v);
  float f = (float)v;
  return lt_from_data(dev, LT_F32, NULL, 0, &f);
}

/* A layer's weight of wshape and, when bias, its bias [nbias], drawn from
 * U(-bound, bound) on dev's RNG (left pending) with requires-grad set, as
 * PyTorch's default init of Linear and Conv2d. *w and *b get one reference
 * each; on failure both are NULL and the status is returned (nn_layers.c). */
int lt__nn_init_weight_bias(lt_device dev, lt_dtype dt, const int64_t *wshape, int wnd, bool bias,
                            int64_t nbias, double bound, lt_tensor **w, lt_tensor **b);

/* The optimizer (nn_optim.c); nn_io.c writes and reads its state. */
struct lt_nn_optim {
  lt_nn_optim_config cfg;
  int n;
  lt_device dev;
  lt_tensor **params; /* n, retained */
  lt_tensor **s1;     /* SGD momentum buffer or Adam's exp_avg (NULL when unused) */
  lt_tensor **s2;     /* Adam's exp_avg_sq */
  int64_t *pstep;     /* n: updates of each parameter (PyTorch's per-parameter state["step"]) */
  double *pwd;        /* n: parameter i's own weight decay, NaN until set (the config's) */
  int64_t steps;      /* successful step calls */
};

/* State tensors per parameter: 0 (plain SGD), 1 (SGD momentum) or 2 (Adam). */
static inline int nn_optim_nstate(const lt_nn_optim *o) {
  return o->cfg.kind != LT_NN_SGD ? 2 : o->cfg.momentum != 0 ? 1 : 0;
}

/* Checks an optimizer configuration; fn names the caller in the message. */
int lt__nn_optim_check_config(const char *fn, const lt_nn_optim_config *c);

#endif
