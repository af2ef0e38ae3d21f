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

#endif
