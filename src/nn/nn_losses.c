/* Losses with PyTorch's reductions (torch.nn.functional 1.13): MSE, NLL with
 * ignore_index, cross-entropy with ignore_index and label smoothing, and
 * binary cross-entropy with logits. Each is a composite of existing ops, so
 * autograd differentiates it with no rule of its own. */
#include <math.h>

#include "lt_caller.h"
#include "lt_dtype.h"
#include "lt_shape.h"
#include "nn.h"
#include "ops/op_autocast.h"

static int check_reduction(const char *fn, lt_nn_reduction r) {
  if (r == LT_NN_REDUCTION_MEAN || r == LT_NN_REDUCTION_SUM || r == LT_NN_REDUCTION_NONE)
    return LT_OK;
  return lt__err(LT_EINVAL, "%s: unknown reduction %d (mean, sum or none)", fn, (int)r);
}

/* The dtype a loss of op computes in for an input of dtype dt, with *out
 * the dtype of its result: f32 under autocast (the losses are on its f32
 * list); otherwise bf16 computes in f32 and is rounded once at the end, as
 * torch's CPU kernels (a composite in bf16 would round after every part). */
static lt_dtype loss_dtype(lt_device dev, lt_autocast_op op, lt_dtype dt, lt_dtype *out) {
  *out = lt__autocast_dtype(dev, op, dt);
  return lt__dtype_compute(*out);
}

/* The reduction of per-element losses l (owned by the open nn scope). */
static lt_tensor *reduce(lt_tensor *l, lt_nn_reduction r) {
  if (r == LT_NN_REDUCTION_NONE) return l;
  return r == LT_NN_REDUCTION_SUM ? lt_sum(l, NULL, 0, false) : lt_mean(l, NULL, 0, false);
}

/* Closes the nn scope a loss was built in and hands its result r to the
 * caller's scope (or the caller): a reshape to r's own shape is a new tensor
 * over r's node, with no node added. */
static lt_tensor *own_result(lt_tensor *r) {
  lt_tensor *k = nn_keep(r);
  nn_own_end();
  if (!k) return NULL;
  lt_tensor *out = lt_reshape(k, lt_shape(k), lt_ndim(k));
  lt_release(k);
  return out;
}

lt_tensor *lt_nn_mse_loss(lt_tensor *input, lt_tensor *target, lt_nn_reduction reduction) {
  const char *fn = "lt_nn_mse_loss";
  if (!input || !target) {
    lt__err_null(fn);
    return NULL;
  }
  if (check_reduction(fn, reduction) != LT_OK) return NULL;
  if (!lt__is_float(lt_get_dtype(input)) || !lt__is_float(lt_get_dtype(target))) {
    lt__err(LT_EDTYPE, "%s: input and target must be f32 or f64 (got %s and %s)", fn,
            lt_dtype_name(lt_get_dtype(input)), lt_dtype_name(lt_get_dtype(target)));
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS];
  int nd = 0;
  if (lt__broadcast(fn, lt_shape(input), lt_ndim(input), lt_shape(target), lt_ndim(target), shape,
                    &nd) != LT_OK)
    return NULL;
  /* torch broadcasts the operands before the loss, so a 0-d target is no
   * longer 0-d and promotes as a tensor: f32 input, 0-d f64 target is f64
   * (lt_sub alone would keep f32, torch's rule for a 0-d operand). */
  lt_dtype dt = lt_get_dtype(input) == LT_F64 || lt_get_dtype(target) == LT_F64     ? LT_F64
                : lt_get_dtype(input) == LT_BF16 && lt_get_dtype(target) == LT_BF16 ? LT_BF16
                                                                                    : LT_F32;
  dt = lt__autocast_dtype(lt_get_device(input), LT_AUTOCAST_MSE_LOSS, dt);
  if (dt == LT_BF16) { /* torch 1.13: "mse_cpu" not implemented for 'BFloat16' */
    lt__err(LT_EDTYPE, "%s: bf16 input and target are not accepted (as torch); cast to f32", fn);
    return NULL;
  }
  nn_own_begin();
  lt_tensor *d = lt_sub(lt_cast(input, dt), lt_cast(target, dt));
  return own_result(reduce(lt_mul(d, d), reduction));
}

/* Checks log-probabilities (or logits) [C], [N, C] or [N, C, d1, ...] and
 * integer targets of that shape without the class axis (axis 1; axis 0 for
 * [C], whose target is 0-d); *cls gets the class axis. */
static int check_class_target(const char *fn, lt_tensor *x, lt_tensor *target, int *cls) {
  if (!x || !target) return lt__err_null(fn);
  lt_dtype xd = lt_get_dtype(x), yd = lt_get_dtype(target);
  if (!lt__is_float(xd))
    return lt__err(LT_EDTYPE, "%s: input must be floating (f32, f64, bf16), got %s", fn,
                   lt_dtype_name(xd));
  if (yd != LT_I32 && yd != LT_I64)
    return lt__err(LT_EDTYPE, "%s: target must be i32 or i64 class indices, got %s", fn,
                   lt_dtype_name(yd));
  int nd = lt_ndim(x);
  *cls = nd == 1 ? 0 : 1;
  bool fits = nd >= 1 && lt_ndim(target) == nd - 1 && lt_dim(x, *cls) > 0;
  for (int d = 0, k = 0; fits && d < nd; d++)
    if (d != *cls) fits = lt_shape(target)[k++] == lt_shape(x)[d];
  if (!fits) {
    char b1[LT_SHAPE_STR_MAX], b2[LT_SHAPE_STR_MAX];
    return lt__err(LT_ESHAPE,
                   "%s: input %s and target %s do not fit ([C] and [], or [N, C, ...] and "
                   "[N, ...], with C > 0)",
                   fn, lt__shape_str(lt_shape(x), nd, b1, sizeof b1),
                   lt__shape_str(lt_shape(target), lt_ndim(target), b2, sizeof b2));
  }
  return LT_OK;
}

/* The per-element terms of the class-index losses, in the open nn scope:
 * *valid (bool, target's shape) marks targets other than ignore_index, *nll
 * is -logp[target] there and 0 elsewhere. gather picks the entry (a one-hot
 * product would turn a -inf elsewhere in the row into NaN); ignored targets
 * read class 0 instead, which is in range. */
static void nll_terms(lt_tensor *logp, lt_tensor *target, int cls, int64_t ignore_index,
                      lt_tensor **valid, lt_tensor **nll) {
  lt_device dev = lt_get_device(logp);
  lt_dtype dt = lt_get_dtype(logp);
  /* compared in i64, so that any ignore_index works with i32 targets */
  *valid = lt_ne(lt_cast(target, LT_I64), lt_scalar(dev, LT_I64, (double)ignore_index));
  lt_tensor *safe = lt_where(*valid, target, lt_scalar(dev, lt_get_dtype(target), 0));
  lt_tensor *picked = lt_squeeze(lt_gather(logp, cls, lt_unsqueeze(safe, cls)), cls);
  *nll = lt_where(*valid, lt_neg(picked), lt_scalar(dev, dt, 0));
}

/* l reduced; the mean divides by the number of valid elements (PyTorch's
 * total weight), NaN when there is none. */
static lt_tensor *reduce_valid(lt_tensor *l, lt_tensor *valid, lt_nn_reduction r) {
  if (r != LT_NN_REDUCTION_MEAN) return reduce(l, r);
  lt_tensor *count = lt_sum(lt_cast(valid, lt_get_dtype(l)), NULL, 0, false);
  return lt_div(lt_sum(l, NULL, 0, false), count);
}

lt_tensor *lt_nn_nll_loss(lt_tensor *logp, lt_tensor *target, lt_nn_reduction reduction,
                          int64_t ignore_index) {
  const char *fn = "lt_nn_nll_loss";
  int cls = 0;
  if (check_class_target(fn, logp, target, &cls) != LT_OK ||
      check_reduction(fn, reduction) != LT_OK)
    return NULL;
  lt_dtype out,
      cd = loss_dtype(lt_get_device(logp), LT_AUTOCAST_NLL_LOSS, lt_get_dtype(logp), &out);
  nn_own_begin();
  lt_tensor *valid = NULL, *nll = NULL;
  int caller = lt__caller_begin(LT_CALLER_NN_NLL_LOSS); /* a bad target names this loss */
  nll_terms(lt_cast(logp, cd), target, cls, ignore_index, &valid, &nll);
  lt__caller_end(caller);
  if (!nll) return own_result(NULL); /* eager mode: a bad target's error stays the one reported */
  return own_result(lt_cast(reduce_valid(nll, valid, reduction), out));
}

lt_tensor *lt_nn_cross_entropy_ex(lt_tensor *logits, lt_tensor *target, lt_nn_reduction reduction,
                                  int64_t ignore_index, double label_smoothing) {
  const char *fn = "lt_nn_cross_entropy_ex";
  int cls = 0;
  if (check_class_target(fn, logits, target, &cls) != LT_OK ||
      check_reduction(fn, reduction) != LT_OK)
    return NULL;
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
    lt__err(LT_EINVAL, "%s: label_smoothing must be in [0, 1] (got %g)", fn, label_smoothing);
    return NULL;
  }
  lt_device dev = lt_get_device(logits);
  lt_dtype out, dt = loss_dtype(dev, LT_AUTOCAST_CROSS_ENTROPY, lt_get_dtype(logits), &out);
  nn_own_begin();
  lt_tensor *logp = lt_log_softmax(lt_cast(logits, dt), cls), *valid = NULL, *nll = NULL;
  int caller = lt__caller_begin(LT_CALLER_NN_CROSS_ENTROPY_EX); /* a bad target names this loss */
  nll_terms(logp, target, cls, ignore_index, &valid, &nll);
  lt__caller_end(caller);
  if (!nll) return own_result(NULL); /* eager mode: a bad target's error stays the one reported */
  lt_tensor *loss = reduce_valid(nll, valid, reduction);
  if (label_smoothing > 0) {
    /* PyTorch: (1 - eps) * nll + eps / C * sum_c -logp[c], each term reduced
     * alike, ignored elements 0 in both */
    int64_t c = lt_dim(logits, cls);
    lt_tensor *smooth = lt_neg(lt_sum(logp, &cls, 1, false));
    smooth = reduce_valid(lt_where(valid, smooth, lt_scalar(dev, dt, 0)), valid, reduction);
    loss = lt_add(lt_mul(loss, lt_scalar(dev, dt, 1.0 - label_smoothing)),
                  lt_mul(smooth, lt_scalar(dev, dt, label_smoothing / (double)c)));
  }
  return own_result(lt_cast(loss, out));
}

lt_tensor *lt_nn_bce_with_logits(lt_tensor *x, lt_tensor *target, lt_tensor *pos_weight,
                                 lt_nn_reduction reduction) {
  const char *fn = "lt_nn_bce_with_logits";
  if (!x || !target) {
    lt__err_null(fn);
    return NULL;
  }
  if (check_reduction(fn, reduction) != LT_OK) return NULL;
  lt_dtype xd = lt_get_dtype(x), yd = lt_get_dtype(target);
  lt_dtype pd = pos_weight ? lt_get_dtype(pos_weight) : xd;
  if (!lt__is_float(xd) || !lt__is_float(yd) || !lt__is_float(pd)) {
    lt__err(LT_EDTYPE, "%s: input, target and pos_weight must be floating (got %s, %s, %s)", fn,
            lt_dtype_name(xd), lt_dtype_name(yd), lt_dtype_name(pd));
    return NULL;
  }
  char b1[LT_SHAPE_STR_MAX], b2[LT_SHAPE_STR_MAX];
  bool same = lt_ndim(x) == lt_ndim(target);
  for (int d = 0; same && d < lt_ndim(x); d++) same = lt_shape(x)[d] == lt_shape(target)[d];
  if (!same) {
    lt__err(LT_ESHAPE, "%s: target %s must have the shape of the input %s", fn,
            lt__shape_str(lt_shape(target), lt_ndim(target), b1, sizeof b1),
            lt__shape_str(lt_shape(x), lt_ndim(x), b2, sizeof b2));
    return NULL;
  }
  if (pos_weight &&
      !lt__broadcastable(lt_shape(pos_weight), lt_ndim(pos_weight), lt_shape(x), lt_ndim(x))) {
    lt__err(LT_ESHAPE, "%s: pos_weight %s does not broadcast to the input %s", fn,
            lt__shape_str(lt_shape(pos_weight), lt_ndim(pos_weight), b1, sizeof b1),
            lt__shape_str(lt_shape(x), lt_ndim(x), b2, sizeof b2));
    return NULL;
  }
  lt_device dev = lt_get_device(x);
  lt_dtype out, cd = loss_dtype(dev, LT_AUTOCAST_BCE_WITH_LOGITS, xd, &out);
  nn_own_begin();
  x = lt_cast(x, cd);
  /* bf16 operands compute in f32 (see loss_dtype) */
  if (yd == LT_BF16) target = lt_cast(target, LT_F32);
  if (pos_weight && pd == LT_BF16) pos_weight = lt_cast(pos_weight, LT_F32);
  lt_tensor *zero = lt_scalar(dev, cd, 0), *one = lt_scalar(dev, cd, 1);
  /* log(1 + exp(-|x|)) never overflows; maximum's gradient at a tie (x = 0)
   * is half to each side, which makes the whole gradient sigmoid(x) - y
   * there too */
  lt_tensor *tail = lt_log1p(lt_exp(lt_neg(lt_abs(x))));
  lt_tensor *l;
  if (!pos_weight) {
    l = lt_add(lt_sub(lt_maximum(x, zero), lt_mul(x, target)), tail);
  } else {
    /* (1 - y) x + (1 + (pw - 1) y) softplus(-x), softplus(-x) = max(-x, 0) + tail */
    lt_tensor *lw = lt_add(one, lt_mul(lt_sub(pos_weight, one), target));
    lt_tensor *sp = lt_add(lt_maximum(lt_neg(x), zero), tail);
    l = lt_add(lt_mul(lt_sub(one, target), x), lt_mul(lw, sp));
  }
  /* the result's dtype: torch promotes input and target (and the weight) */
  lt_dtype res = out;
  if (yd == LT_F64 || pd == LT_F64)
    res = LT_F64;
  else if (res == LT_BF16 && (yd == LT_F32 || pd == LT_F32))
    res = LT_F32;
  return own_result(lt_cast(reduce(l, reduction), res));
}
