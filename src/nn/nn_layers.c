/* Layers and losses: linear and embedding (PyTorch's default inits from the
 * device RNG), activations, cross-entropy from logits and accuracy. */
#include <math.h>

#include "lt_caller.h"
#include "lt_dtype.h"
#include "nn.h"
#include "ops/op_autocast.h"
#include "ops/op_matmul.h"

int lt__nn_init_weight_bias(lt_device dev, lt_dtype dt, const int64_t *wshape, int wnd, bool bias,
                            int64_t nbias, double bound, lt_tensor **w, lt_tensor **b) {
  nn_own_begin();
  *w = nn_keep(lt_rand_uniform(dev, dt, wshape, wnd, -bound, bound));
  *b = bias ? nn_keep(lt_rand_uniform(dev, dt, &nbias, 1, -bound, bound)) : NULL;
  nn_own_end();
  int rc = LT_OK;
  if (!*w || (bias && !*b)) rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
  if (rc == LT_OK) rc = lt_set_requires_grad(*w, true);
  if (rc == LT_OK && *b) rc = lt_set_requires_grad(*b, true);
  if (rc != LT_OK) {
    lt_release(*w);
    lt_release(*b);
    *w = *b = NULL;
  }
  return rc;
}

int lt_nn_linear_init(lt_nn_linear *l, lt_device dev, lt_dtype dt, int64_t in, int64_t out,
                      bool bias) {
  if (!l) return lt__err(LT_EINVAL, "lt_nn_linear_init: layer is NULL");
  l->weight = l->bias = NULL;
  l->in = l->out = 0;
  if (in <= 0 || out <= 0)
    return lt__err(LT_EINVAL, "lt_nn_linear_init: in and out must be > 0 (got %lld, %lld)",
                   (long long)in, (long long)out);
  if (dt != LT_F32 && dt != LT_F64)
    return lt__err(LT_EDTYPE, "lt_nn_linear_init: dtype %s is not accepted (f32 or f64)",
                   lt_dtype_name(dt));
  /* kaiming_uniform_(a = sqrt 5) gives bound gain * sqrt(3 / fan_in) with
   * gain sqrt(2 / (1 + 5)): 1 / sqrt(fan_in); the bias uses the same bound. */
  double bound = 1.0 / sqrt((double)in);
  lt_tensor *w, *b;
  int rc = lt__nn_init_weight_bias(dev, dt, (int64_t[]){in, out}, 2, bias, out, bound, &w, &b);
  if (rc != LT_OK) return rc;
  l->weight = w;
  l->bias = b;
  l->in = in;
  l->out = out;
  return LT_OK;
}

void lt_nn_linear_free(lt_nn_linear *l) {
  if (!l) return;
  lt_release(l->weight);
  lt_release(l->bias);
  l->weight = l->bias = NULL;
}

lt_tensor *lt_nn_linear_forward(const lt_nn_linear *l, lt_tensor *x) {
  if (!l || !l->weight) {
    lt__err(LT_EINVAL, "lt_nn_linear_forward: layer is NULL or not initialised");
    return NULL;
  }
  if (!x) {
    lt__err_null("lt_nn_linear_forward");
    return NULL;
  }
  if (lt_ndim(x) < 1 || lt_dim(x, -1) != l->in) {
    char buf[128];
    lt__err(LT_ESHAPE, "lt_nn_linear_forward: x has shape %s, expected [..., %lld]",
            lt__shape_str(lt_shape(x), lt_ndim(x), buf, sizeof buf), (long long)l->in);
    return NULL;
  }
  if (!l->bias) return lt_matmul(x, l->weight);
  /* One op with its bias (rounded once in bf16, as torch's linear) unless an
   * operand is sharded: the sharded forms are lt_matmul's. */
  if (!x->shard_n && !l->weight->shard_n && !l->bias->shard_n)
    return lt__linear("lt_nn_linear_forward", x, l->weight, l->bias);
  /* Composite: the intermediate is ours, only the result lands in the
   * caller's scope (or is the caller's reference). */
  nn_own_begin();
  lt_tensor *y = nn_keep(lt_matmul(x, l->weight));
  nn_own_end();
  lt_tensor *r = lt_add(y, l->bias);
  lt_release(y);
  return r;
}

int lt_nn_embedding_init(lt_nn_embedding *l, lt_device dev, lt_dtype dt, int64_t num, int64_t dim) {
  if (!l) return lt__err(LT_EINVAL, "lt_nn_embedding_init: layer is NULL");
  l->weight = NULL;
  l->num = l->dim = 0;
  if (num <= 0 || dim <= 0)
    return lt__err(LT_EINVAL, "lt_nn_embedding_init: num and dim must be > 0 (got %lld, %lld)",
                   (long long)num, (long long)dim);
  if (dt != LT_F32 && dt != LT_F64)
    return lt__err(LT_EDTYPE, "lt_nn_embedding_init: dtype %s is not accepted (f32 or f64)",
                   lt_dtype_name(dt));
  /* torch.nn.Embedding: normal_(0, 1), a pending draw of dev's RNG. */
  nn_own_begin();
  lt_tensor *w = nn_keep(lt_rand_normal(dev, dt, (int64_t[]){num, dim}, 2, 0.0, 1.0));
  nn_own_end();
  int rc = w ? LT_OK : lt_last_status() ? lt_last_status() : LT_ENOMEM;
  if (rc == LT_OK) rc = lt_set_requires_grad(w, true);
  if (rc != LT_OK) {
    lt_release(w);
    return rc;
  }
  l->weight = w;
  l->num = num;
  l->dim = dim;
  return LT_OK;
}

void lt_nn_embedding_free(lt_nn_embedding *l) {
  if (!l) return;
  lt_release(l->weight);
  l->weight = NULL;
}

lt_tensor *lt_nn_embedding_forward(const lt_nn_embedding *l, lt_tensor *indices) {
  if (!l || !l->weight) {
    lt__err(LT_EINVAL, "lt_nn_embedding_forward: layer is NULL or not initialised");
    return NULL;
  }
  return lt_embedding(indices, l->weight);
}

int lt_nn_params_sync(lt_tensor *const *params, int n) {
  if (n < 0 || (n > 0 && !params)) return lt__err(LT_EINVAL, "lt_nn_params_sync: bad list");
  return n ? lt_sync(params, n, true) : LT_OK;
}

lt_tensor *lt_nn_relu(lt_tensor *x) { return lt_relu(x); }
lt_tensor *lt_nn_gelu(lt_tensor *x) { return lt_gelu(x); }
lt_tensor *lt_nn_gelu_tanh(lt_tensor *x) { return lt_gelu_tanh(x); }
lt_tensor *lt_nn_dropout(lt_tensor *x, double p, bool train) { return lt_dropout(x, p, train); }

/* Checks logits [B, C] float and labels [B] integer. */
static int check_logits_labels(const char *fn, lt_tensor *logits, lt_tensor *labels) {
  if (!logits || !labels) return lt__err_null(fn);
  char b1[128], b2[128];
  if (lt_ndim(logits) != 2 || lt_ndim(labels) != 1 || lt_dim(labels, 0) != lt_dim(logits, 0))
    return lt__err(LT_ESHAPE, "%s: logits %s and labels %s do not fit ([B, C] and [B])", fn,
                   lt__shape_str(lt_shape(logits), lt_ndim(logits), b1, sizeof b1),
                   lt__shape_str(lt_shape(labels), lt_ndim(labels), b2, sizeof b2));
  lt_dtype ld = lt_get_dtype(logits), yd = lt_get_dtype(labels);
  if (!lt__is_float(ld))
    return lt__err(LT_EDTYPE, "%s: logits must be floating (f32, f64, bf16), got %s", fn,
                   lt_dtype_name(ld));
  if (yd != LT_I32 && yd != LT_I64)
    return lt__err(LT_EDTYPE, "%s: labels must be i32 or i64, got %s", fn, lt_dtype_name(yd));
  return LT_OK;
}

lt_tensor *lt_nn_cross_entropy(lt_tensor *logits, lt_tensor *labels) {
  if (check_logits_labels("lt_nn_cross_entropy", logits, labels) != LT_OK) return NULL;
  /* on autocast's f32 list; bf16 otherwise computes in f32 and rounds once
   * (as lt_nn_cross_entropy_ex) */
  lt_dtype out =
      lt__autocast_dtype(lt_get_device(logits), LT_AUTOCAST_CROSS_ENTROPY, lt_get_dtype(logits));
  lt_dtype dt = lt__dtype_compute(out);
  nn_own_begin();
  lt_tensor *lsm = lt_log_softmax(lt_cast(logits, dt), 1);
  int caller = lt__caller_begin(LT_CALLER_NN_CROSS_ENTROPY); /* a bad label names this loss */
  lt_tensor *oh = lt_one_hot(labels, lt_dim(logits, 1), dt);
  lt__caller_end(caller);
  lt_tensor *picked = lt_sum(lt_mul(oh, lsm), (int[]){1}, 1, false); /* [B] */
  lt_tensor *m = nn_keep(lt_cast(lt_neg(lt_mean(picked, NULL, 0, false)), out));
  nn_own_end();
  lt_tensor *r = lt_reshape(m, NULL, 0);
  lt_release(m);
  return r;
}

lt_tensor *lt_nn_accuracy(lt_tensor *logits, lt_tensor *labels) {
  if (check_logits_labels("lt_nn_accuracy", logits, labels) != LT_OK) return NULL;
  nn_own_begin();
  lt_tensor *hit = nn_keep(lt_cast(lt_eq(lt_argmax(logits, 1, false), labels), LT_F32));
  nn_own_end();
  lt_tensor *r = lt_mean(hit, NULL, 0, false);
  lt_release(hit);
  return r;
}
