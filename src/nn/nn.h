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
  /* ZeRO stage 1 (lt_dp_optim_create, nn_zero.c): 0 when the state is whole;
   * else the world's size, s1 and s2 holding only this replica's chunk of
   * each parameter's state, flat [nn_optim_shard_len] (which chunk is the
   * rank the step reads when it runs: one graph for every replica) */
  int shard_size;
};

/* Elements of a parameter's shard over size replicas: numel / size rounded
 * up (the last shards padded), at least 1 so that an empty parameter's
 * shards still have a shape. */
static inline int64_t nn_optim_shard_len(lt_tensor *p, int size) {
  int64_t len = (lt_numel(p) + size - 1) / size;
  return len > 0 ? len : 1;
}

/* lt_nn_optim_create, fn naming the public caller; with shard_size > 0 the
 * state is made as shards (see shard_size above). */
lt_nn_optim *lt__nn_optim_create(const char *fn, const lt_nn_optim_config *cfg,
                                 lt_tensor *const *params, int n, int shard_size);
/* The new values out[3i..3i+2] (parameter, s1, s2) of each parameter i with
 * g[i] != NULL, computed from p[i] and g[i] (the whole parameter, or its
 * shard when o's state is sharded: then p[i], g[i] and the state share the
 * shard's shape) and o's state; nothing is assigned. Call inside
 * nn_own_begin/nn_own_end. */
int lt__nn_optim_build(const lt_nn_optim *o, lt_tensor *const *p, lt_tensor *const *g,
                       lt_tensor **out);
/* lt_dp_optim_step of an optimizer whose state is sharded (nn_zero.c). */
int lt__nn_zero_step(lt_nn_optim *o);
/* Counts a successful step that updated the parameters with grads[i] != NULL. */
void lt__nn_optim_count_step(lt_nn_optim *o, lt_tensor *const *grads);

/* State tensors per parameter: 0 (plain SGD), 1 (SGD momentum) or 2 (Adam). */
static inline int nn_optim_nstate(const lt_nn_optim *o) {
  return o->cfg.kind != LT_NN_SGD ? 2 : o->cfg.momentum != 0 ? 1 : 0;
}

/* Checks an optimizer configuration; fn names the caller in the message. */
int lt__nn_optim_check_config(const char *fn, const lt_nn_optim_config *c);

#endif
