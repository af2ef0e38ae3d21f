/* Normalisation layers: batch norm over channels (parameters and running
 * statistics) and layer norm. */
#include <string.h>

#include "nn.h"

/* A tensor of shape filled with v, left pending (as the random draws of
 * lt_nn_linear_init) so that the model's init graph (lt_nn_params_sync or
 * the next step barrier) makes it device data with everything else. */
static lt_tensor *filled(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double v) {
  return lt_full(dev, dt, shape, ndim, v);
}

/* Affine weight (ones) and bias (zeros) of shape, requires-grad set, into
 * *w and *b (owned by the caller); a status. */
static int affine_init(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, lt_tensor **w,
                       lt_tensor **b) {
  nn_own_begin();
  *w = nn_keep(filled(dev, dt, shape, ndim, 1.0));
  *b = nn_keep(filled(dev, dt, shape, ndim, 0.0));
  nn_own_end();
  int rc = *w && *b ? LT_OK : lt_last_status() ? lt_last_status() : LT_ENOMEM;
  if (rc == LT_OK) rc = lt_set_requires_grad(*w, true);
  if (rc == LT_OK) rc = lt_set_requires_grad(*b, true);
  if (rc != LT_OK) {
    lt_release(*w);
    lt_release(*b);
    *w = *b = NULL;
  }
  return rc;
}

static int check_float(const char *fn, lt_dtype dt) {
  if (dt != LT_F32 && dt != LT_F64)
    return lt__err(LT_EDTYPE, "%s: dtype %s is not accepted (f32 or f64)", fn, lt_dtype_name(dt));
  return LT_OK;
}

int lt_nn_batchnorm2d_init(lt_nn_batchnorm2d *l, lt_device dev, lt_dtype dt, int64_t num_features,
                           bool affine) {
  static const char fn[] = "lt_nn_batchnorm2d_init";
  if (!l) return lt__err(LT_EINVAL, "%s: layer is NULL", fn);
  memset(l, 0, sizeof *l);
  if (num_features <= 0)
    return lt__err(LT_EINVAL, "%s: num_features must be > 0 (got %lld)", fn,
                   (long long)num_features);
  int rc = check_float(fn, dt);
  if (rc != LT_OK) return rc;
  lt_tensor *w = NULL, *b = NULL;
  if (affine && (rc = affine_init(dev, dt, &num_features, 1, &w, &b)) != LT_OK) return rc;
  nn_own_begin();
  lt_tensor *rm = nn_keep(filled(dev, dt, &num_features, 1, 0.0));
  lt_tensor *rv = nn_keep(filled(dev, dt, &num_features, 1, 1.0));
  nn_own_end();
  if (!rm || !rv) {
    rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
    lt_release(w);
    lt_release(b);
    lt_release(rm);
    lt_release(rv);
    return rc;
  }
  l->weight = w;
  l->bias = b;
  l->running_mean = rm;
  l->running_var = rv;
  l->num_features = num_features;
  l->momentum = 0.1;
  l->eps = 1e-5;
  return LT_OK;
}

void lt_nn_batchnorm2d_free(lt_nn_batchnorm2d *l) {
  if (!l) return;
  lt_release(l->weight);
  lt_release(l->bias);
  lt_release(l->running_mean);
  lt_release(l->running_var);
  l->weight = l->bias = l->running_mean = l->running_var = NULL;
}

lt_tensor *lt_nn_batchnorm2d_forward(const lt_nn_batchnorm2d *l, lt_tensor *x, bool train) {
  if (!l || !l->running_mean) {
    lt__err(LT_EINVAL, "lt_nn_batchnorm2d_forward: layer is NULL or not initialised");
    return NULL;
  }
  if (!x) {
    lt__err_null("lt_nn_batchnorm2d_forward");
    return NULL;
  }
  if (lt_ndim(x) != 4 || lt_dim(x, 1) != l->num_features) {
    char buf[128];
    lt__err(LT_ESHAPE, "lt_nn_batchnorm2d_forward: x has shape %s, expected [N, %lld, H, W]",
            lt__shape_str(lt_shape(x), lt_ndim(x), buf, sizeof buf), (long long)l->num_features);
    return NULL;
  }
  return lt_batch_norm(x, l->running_mean, l->running_var, l->weight, l->bias, train, l->momentum,
                       l->eps);
}

int lt_nn_layernorm_init(lt_nn_layernorm *l, lt_device dev, lt_dtype dt,
                         const int64_t *normalized_shape, int nnorm, bool elementwise_affine) {
  static const char fn[] = "lt_nn_layernorm_init";
  if (!l) return lt__err(LT_EINVAL, "%s: layer is NULL", fn);
  memset(l, 0, sizeof *l);
  if (nnorm < 1 || nnorm > LT_MAX_DIMS || !normalized_shape)
    return lt__err(LT_EINVAL, "%s: normalized_shape must have 1 to %d entries (got %d)", fn,
                   LT_MAX_DIMS, nnorm);
  for (int i = 0; i < nnorm; i++)
    if (normalized_shape[i] <= 0)
      return lt__err(LT_EINVAL, "%s: normalized_shape[%d] must be > 0 (got %lld)", fn, i,
                     (long long)normalized_shape[i]);
  int rc = check_float(fn, dt);
  if (rc != LT_OK) return rc;
  if (elementwise_affine &&
      (rc = affine_init(dev, dt, normalized_shape, nnorm, &l->weight, &l->bias)) != LT_OK)
    return rc;
  memcpy(l->normalized_shape, normalized_shape, (size_t)nnorm * sizeof *normalized_shape);
  l->nnorm = nnorm;
  l->eps = 1e-5;
  return LT_OK;
}

void lt_nn_layernorm_free(lt_nn_layernorm *l) {
  if (!l) return;
  lt_release(l->weight);
  lt_release(l->bias);
  l->weight = l->bias = NULL;
  l->nnorm = 0;
}

lt_tensor *lt_nn_layernorm_forward(const lt_nn_layernorm *l, lt_tensor *x) {
  if (!l || l->nnorm < 1) {
    lt__err(LT_EINVAL, "lt_nn_layernorm_forward: layer is NULL or not initialised");
    return NULL;
  }
  return lt_layer_norm(x, l->normalized_shape, l->nnorm, l->weight, l->bias, l->eps);
}
