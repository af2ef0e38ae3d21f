/* Autocast (op_autocast.c): the dtype an op computes in while a scope opened
 * by lt_autocast_begin is active on the calling thread for the op's device.
 * The ops that autocast are the rows of LT_AUTOCAST_OPS, each with its class:
 *   LOWER  f32 operands are cast to the scope's dtype (bf16); f64 stays f64
 *   FP32   operands of the scope's dtype are cast to f32
 * Every other op runs in its operands' own dtype. */
#ifndef LT_OP_AUTOCAST_H
#define LT_OP_AUTOCAST_H

#include "lazytensor.h"

/* X(ENUM, CLASS): torch 1.13's CPU autocast lists (see op_autocast.c). */
#define LT_AUTOCAST_OPS(X)                                                          \
  X(MATMUL, LOWER)          /* lt_matmul, lt_nn_linear_forward (mm, bmm, linear) */ \
  X(CONV2D, LOWER)          /* lt_conv2d */                                         \
  X(ATTENTION, LOWER)       /* lt_scaled_dot_product_attention */                   \
  X(CONV_TRANSPOSE2D, FP32) /* lt_conv_transpose2d */                               \
  X(PROD, FP32)             /* lt_prod */                                           \
  X(MSE_LOSS, FP32)         /* lt_nn_mse_loss */                                    \
  X(NLL_LOSS, FP32)         /* lt_nn_nll_loss */                                    \
  X(CROSS_ENTROPY, FP32)    /* lt_nn_cross_entropy, lt_nn_cross_entropy_ex */       \
  X(BCE_WITH_LOGITS, FP32)  /* lt_nn_bce_with_logits */

#define LT_AUTOCAST_ENUM(e, cls) LT_AUTOCAST_##e,
typedef enum lt_autocast_op {
  LT_AUTOCAST_OPS(LT_AUTOCAST_ENUM) LT_AUTOCAST_OP_COUNT
} lt_autocast_op;
#undef LT_AUTOCAST_ENUM

/* The dtype op computes in on dev for operands whose promoted dtype is dt:
 * dt itself outside a scope, for a non-floating dt, or for an op the scope
 * leaves alone. */
lt_dtype lt__autocast_dtype(lt_device dev, lt_autocast_op op, lt_dtype dt);

#endif
