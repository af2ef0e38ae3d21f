/* Convolution layer (PyTorch's default init from the device RNG) and the
 * pooling conveniences of torch.nn's defaults. */
#include <math.h>
#include <string.h>

#include "nn.h"

/* The count of an {h, w} argument, as lazytensor.h's rule has it: 2 is
 * {h, w}, 1 one value for both axes, 0 not given (refused when required).
 * Checked here so that the message names the nn function called. */
static int pair_count(const char *fn, const char *what, const int64_t *p, int n, bool required) {
  if (n < (required ? 1 : 0) || n > 2)
    return lt__err(LT_EINVAL, "%s: %s has %d entries; it takes 2 ({h, w}), 1 (both axes)%s", fn,
                   what, n, required ? "" : " or 0 (the default)");
  if (n > 0 && !p) return lt__err(LT_EINVAL, "%s: %s is NULL with %d entries", fn, what, n);
  return LT_OK;
}

/* A {h, w} pair from p's n entries (pair_count), or both def when n is 0;
 * false when a value is below lo. */
static bool pair_or(const int64_t *p, int n, int64_t def, int64_t lo, int64_t out[2]) {
  out[0] = n > 0 ? p[0] : def;
  out[1] = n == 2 ? p[1] : out[0];
  return out[0] >= lo && out[1] >= lo;
}

int lt_nn_conv2d_init_n(lt_nn_conv2d *l, lt_device dev, lt_dtype dt, int64_t in, int64_t out,
                        const int64_t *kernel, int nkernel, const int64_t *stride, int nstride,
                        const int64_t *padding, int npadding, const int64_t *dilation,
                        int ndilation, int64_t groups, bool bias) {
  static const char fn[] = "lt_nn_conv2d_init_n";
  if (!l) return lt__err(LT_EINVAL, "%s: layer is NULL", fn);
  memset(l, 0, sizeof *l);
  if (in <= 0 || out <= 0)
    return lt__err(LT_EINVAL, "%s: in and out must be > 0 (got %lld, %lld)", fn, (long long)in,
                   (long long)out);
  if (groups < 1 || in % groups || out % groups)
    return lt__err(LT_EINVAL, "%s: groups %lld must be >= 1 and divide in %lld and out %lld", fn,
                   (long long)groups, (long long)in, (long long)out);
  if (pair_count(fn, "kernel", kernel, nkernel, true) != LT_OK ||
      pair_count(fn, "stride", stride, nstride, false) != LT_OK ||
      pair_count(fn, "padding", padding, npadding, false) != LT_OK ||
      pair_count(fn, "dilation", dilation, ndilation, false) != LT_OK)
    return LT_EINVAL;
  int64_t k[2], s[2], p[2], d[2];
  /* every pair filled before the check: the message prints them all */
  bool ok = pair_or(kernel, nkernel, 1, 1, k);
  ok &= pair_or(stride, nstride, 1, 1, s);
  ok &= pair_or(padding, npadding, 0, 0, p);
  ok &= pair_or(dilation, ndilation, 1, 1, d);
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
  /* lt_conv2d_n adds the bias itself: one op result lands in the caller's scope. */
  return lt_conv2d_n(x, l->weight, l->bias, l->stride, 2, l->padding, 2, l->dilation, 2, l->groups);
}

/* The counts of a pooling convenience, checked under its own name. */
static int pool_counts(const char *fn, const int64_t *kernel, int nkernel, const int64_t *stride,
                       int nstride, const int64_t *padding, int npadding) {
  if (pair_count(fn, "kernel", kernel, nkernel, true) != LT_OK ||
      pair_count(fn, "stride", stride, nstride, false) != LT_OK ||
      pair_count(fn, "padding", padding, npadding, false) != LT_OK)
    return LT_EINVAL;
  return LT_OK;
}

lt_tensor *lt_nn_max_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel,
                              const int64_t *stride, int nstride, const int64_t *padding,
                              int npadding) {
  if (pool_counts("lt_nn_max_pool2d_n", kernel, nkernel, stride, nstride, padding, npadding) !=
      LT_OK)
    return NULL;
  return lt_max_pool2d_n(x, kernel, nkernel, stride, nstride, padding, npadding, NULL, 0, false);
}

lt_tensor *lt_nn_avg_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel,
                              const int64_t *stride, int nstride, const int64_t *padding,
                              int npadding) {
  if (pool_counts("lt_nn_avg_pool2d_n", kernel, nkernel, stride, nstride, padding, npadding) !=
      LT_OK)
    return NULL;
  return lt_avg_pool2d_n(x, kernel, nkernel, stride, nstride, padding, npadding, false, true, 0);
}
