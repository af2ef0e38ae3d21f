/* Convolution layer (PyTorch's default init from the device RNG) and the
 * pooling conveniences of torch.nn's defaults. */
#include <math.h>
#include <string.h>

#include "nn.h"

/* A {h, w} pair from p, or both def when p is NULL; false when a value is
 * below lo. */
static bool pair_or(const int64_t *p, int64_t def, int64_t lo, int64_t out[2]) {
  out[0] = p ? p[0] : def;
  out[1] = p ? p[1] : def;
  return out[0] >= lo && out[1] >= lo;
}

int lt_nn_conv2d_init(lt_nn_conv2d *l, lt_device dev, lt_dtype dt, int64_t in, int64_t out,
                      const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups, bool bias) {
  static const char fn[] = "lt_nn_conv2d_init";
  if (!l) return lt__err(LT_EINVAL, "%s: layer is NULL", fn);
  memset(l, 0, sizeof *l);
  if (in <= 0 || out <= 0)
    return lt__err(LT_EINVAL, "%s: in and out must be > 0 (got %lld, %lld)", fn, (long long)in,
                   (long long)out);
  if (groups < 1 || in % groups || out % groups)
    return lt__err(LT_EINVAL, "%s: groups %lld must be >= 1 and divide in %lld and out %lld", fn,
                   (long long)groups, (long long)in, (long long)out);
  if (!kernel) return lt__err(LT_EINVAL, "%s: kernel is NULL", fn);
  int64_t k[2], s[2], p[2], d[2];
  /* every pair filled before the check: the message prints them all */
  bool ok = pair_or(kernel, 1, 1, k);
  ok &= pair_or(stride, 1, 1, s);
  ok &= pair_or(padding, 0, 0, p);
  ok &= pair_or(dilation, 1, 1, d);
  if (!ok)
    return lt__err(LT_EINVAL,
                   "%s: kernel {%lld, %lld}, stride {%lld, %lld} and dilation {%lld, %lld} must "
                   "be >= 1, padding {%lld, %lld} >= 0",
                   fn, (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                   (long long)d[0], (long long)d[1], (long long)p[0], (long long)p[1]);
  if (dt != LT_F32 && dt != LT_F64)
    return lt__err(LT_EDTYPE, "%s: dtype %s is not accepted (f32 or f64)", fn, lt_dtype_name(dt));
  /* kaiming_uniform_(a = sqrt 5) over fan_in = in / groups * kh * kw gives
   * the bound 1 / sqrt(fan_in), which Conv2d also uses for the bias. */
  double bound = 1.0 / sqrt((double)(in / groups * k[0] * k[1]));
  int64_t wshape[4] = {out, in / groups, k[0], k[1]};
  lt_tensor *w, *b;
  int rc = lt__nn_init_weight_bias(dev, dt, wshape, 4, bias, out, bound, &w, &b);
  if (rc != LT_OK) return rc;
  l->weight = w;
  l->bias = b;
  l->in = in;
  l->out = out;
  l->groups = groups;
  for (int i = 0; i < 2; i++) {
    l->kernel[i] = k[i];
    l->stride[i] = s[i];
    l->padding[i] = p[i];
    l->dilation[i] = d[i];
  }
  return LT_OK;
}

void lt_nn_conv2d_free(lt_nn_conv2d *l) {
  if (!l) return;
  lt_release(l->weight);
  lt_release(l->bias);
  l->weight = l->bias = NULL;
}

lt_tensor *lt_nn_conv2d_forward(const lt_nn_conv2d *l, lt_tensor *x) {
  if (!l || !l->weight) {
    lt__err(LT_EINVAL, "lt_nn_conv2d_forward: layer is NULL or not initialised");
    return NULL;
  }
  if (!x) {
    lt__err_null("lt_nn_conv2d_forward");
    return NULL;
  }
  if (lt_ndim(x) != 4 || lt_dim(x, 1) != l->in) {
    char buf[128];
    lt__err(LT_ESHAPE, "lt_nn_conv2d_forward: x has shape %s, expected [N, %lld, H, W]",
            lt__shape_str(lt_shape(x), lt_ndim(x), buf, sizeof buf), (long long)l->in);
    return NULL;
  }
  /* lt_conv2d adds the bias itself: one op result lands in the caller's scope. */
  return lt_conv2d(x, l->weight, l->bias, l->stride, l->padding, l->dilation, l->groups);
}

lt_tensor *lt_nn_max_pool2d(lt_tensor *x, const int64_t *kernel, const int64_t *stride,
                            const int64_t *padding) {
  return lt_max_pool2d(x, kernel, stride, padding, NULL, false);
}

lt_tensor *lt_nn_avg_pool2d(lt_tensor *x, const int64_t *kernel, const int64_t *stride,
                            const int64_t *padding) {
  return lt_avg_pool2d(x, kernel, stride, padding, false, true, 0);
}
