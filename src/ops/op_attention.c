/* lt_scaled_dot_product_attention: softmax(q k^T * scale + bias) v, one
 * ATTENTION node (lt_op_table.h; attrs {causal, mask kind}, fattr = scale).
 *
 * The builder checks and promotes the operands, broadcasts their batch dims
 * and flattens them into one, so that the attention itself only ever sees
 * rank-3 operands q [B, L, E], k [B, S, E], v [B, S, Ev] and a mask
 * [B, L, S]; the result is reshaped back to [batch..., L, Ev].
 *
 * The causal triangle is made in the graph from constants (two cumulative
 * sums of ones give the row and column numbers), so it needs no data leaf
 * and no device: the gradient rule (autograd/ag_attention.c), which rebuilds
 * the probabilities from primitives, makes it with lt__attn_scores. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "op_attention.h"
#include "op_autocast.h"

/* A 0-d constant (broadcasts against anything). */
static lt_node *kc(lt_dtype dt, double v) { return lt__node_const(dt, NULL, 0, v); }

static lt_node *fail2(lt_node *a, lt_node *b) {
  lt__node_release(a);
  lt__node_release(b);
  return NULL;
}

lt_node *lt__attn_transpose(lt_node *x) {
  if (!x) return NULL;
  int nd = x->ndim;
  int64_t perm[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  for (int d = 0; d < nd; d++) perm[d] = d;
  perm[nd - 2] = nd - 1;
  perm[nd - 1] = nd - 2;
  for (int d = 0; d < nd; d++) shape[d] = x->shape[perm[d]];
  return lt__node_make(LT_OP_PERMUTE, (lt_dtype)x->dtype, shape, nd, &x, 1, perm, nd, 0.0);
}

lt_node *lt__attn_matmul(lt_node *x, lt_node *y) {
  if (!x || !y) return fail2(x, y);
  int64_t shape[3] = {x->shape[0], x->shape[1], y->shape[2]};
  lt_node *ops[2] = {x, y};
  return lt__node_make(LT_OP_MATMUL, (lt_dtype)x->dtype, shape, 3, ops, 2, NULL, 0, 0.0);
}

/* [1, L, S] bool: column j <= row i (torch's is_causal, top-left aligned). */
static lt_node *causal_keep(int64_t L, int64_t S) {
  int64_t rows[3] = {1, L, 1}, cols[3] = {1, 1, S};
  int64_t ax_rows[2] = {1, 0}, ax_cols[2] = {2, 0};
  lt_node *r = lt__node_const(LT_I64, rows, 3, 1.0);
  lt_node *c = lt__node_const(LT_I64, cols, 3, 1.0);
  r = r ? lt__node_make(LT_OP_CUMSUM, LT_I64, rows, 3, &r, 1, ax_rows, 2, 0.0) : NULL;
  c = c ? lt__node_make(LT_OP_CUMSUM, LT_I64, cols, 3, &c, 1, ax_cols, 2, 0.0) : NULL;
  return lt__node_bin(LT_OP_LE, c, r);
}

lt_node *lt__attn_scores(lt_node *q, lt_node *k, lt_node *mask, lt_attn_mask_kind kind, bool causal,
                         double scale) {
  if (!q || !k || (kind != LT_ATTN_MASK_NONE && !mask)) {
    lt__node_release(mask);
    return fail2(q, k);
  }
  lt_dtype dt = (lt_dtype)q->dtype;
  int64_t L = q->shape[1], S = k->shape[1];
  lt_node *s = lt__node_bin(LT_OP_MUL, lt__attn_matmul(q, lt__attn_transpose(k)), kc(dt, scale));
  if (kind == LT_ATTN_MASK_BOOL)
    s = lt__node_where(mask, s, kc(dt, -INFINITY));
  else if (kind == LT_ATTN_MASK_ADDITIVE)
    s = lt__node_bin(LT_OP_ADD, s, mask);
  else
    lt__node_release(mask);
  if (causal) s = lt__node_where(causal_keep(L, S), s, kc(dt, -INFINITY));
  return s;
}

/* ---- the builder ---------------------------------------------------------------------- */

/* x (consumed) broadcast to [batch..., rows, cols] and flattened to
 * [B, rows, cols]. */
static lt_node *as_batched(lt_node *x, const int64_t *batch, int nb, int64_t B, int64_t rows,
                           int64_t cols) {
  if (!x) return NULL;
  int64_t full[LT_MAX_DIMS + 2];
  for (int i = 0; i < nb; i++) full[i] = batch[i];
  full[nb] = rows;
  full[nb + 1] = cols;
  if (x->ndim != nb + 2 || memcmp(x->shape, full, sizeof(int64_t) * (size_t)(nb + 2)) != 0) {
    if (x->op == LT_OP_CONST) {
      lt_node *c = lt__node_const((lt_dtype)x->dtype, full, nb + 2, x->fattr);
      lt__node_release(x);
      x = c;
    } else {
      x = lt__node_make(LT_OP_EXPAND, (lt_dtype)x->dtype, full, nb + 2, &x, 1, NULL, 0, 0.0);
    }
  }
  int64_t flat[3] = {B, rows, cols};
  return lt__node_reshape(x, flat, 3);
}

/* Training at short sequences: the scores of one batch entry at most this
 * many (T = 128). */
#define ATTN_COMPOSITE_MAX_SCORES (128 * 128)

static atomic_bool g_fused_always;

void lt__attn_set_fused_always(bool on) { atomic_store(&g_fused_always, on); }

/* Whether to build the attention from primitives (matmul, the mask, softmax,
 * matmul) instead of one ATTENTION node: when autograd may differentiate it
 * and the sequences are short. The gradient of ATTENTION rebuilds the
 * probabilities P from primitives, so a training step pays the forward
 * twice, the fused kernel's and the rebuild's; the composite computes P
 * once and its backward reads it. At T = 64 (the GPT: [128, 64, 32]) that
 * is 4.3 -> 3.0 ms forward + backward, and the composite's products read
 * permuted q, k, v in place where the fused kernel needs copies. Long
 * sequences and inference keep the fused kernel (the scores never exist
 * whole). */
static bool composite_training(lt_tensor *const *ts, int n, const lt_node *q, const lt_node *k,
                               const lt_node *v, const lt_node *mask, int64_t L, int64_t S) {
  if (atomic_load(&g_fused_always) || lt_get_no_grad() || L * S > ATTN_COMPOSITE_MAX_SCORES)
    return false;
  for (int i = 0; i < n; i++)
    if (ts[i]->requires_grad) return true;
  return lt__carries_grad(q) || lt__carries_grad(k) || lt__carries_grad(v) ||
         (mask && lt__carries_grad(mask));
}

static int need_float(const char *fn, const char *what, const lt_tensor *t) {
  if (lt__is_float((lt_dtype)t->dtype)) return LT_OK;
  return lt__err(LT_EDTYPE, "%s: %s must be a floating tensor, got %s (as torch)", fn, what,
                 lt_dtype_name((lt_dtype)t->dtype));
}

lt_tensor *lt_scaled_dot_product_attention(lt_tensor *q, lt_tensor *k, lt_tensor *v,
                                           lt_tensor *mask, bool causal, double scale) {
  static const char *fn = "lt_scaled_dot_product_attention";
  lt_tensor *ts[4] = {q, k, v, mask};
  if (lt__check_operands(fn, ts, mask ? 4 : 3) != LT_OK) return NULL;
  char sq[LT_SHAPE_STR_MAX], sk[LT_SHAPE_STR_MAX], sv[LT_SHAPE_STR_MAX], sm[LT_SHAPE_STR_MAX];
  lt__shape_str(q->shape, q->ndim, sq, sizeof sq);
  lt__shape_str(k->shape, k->ndim, sk, sizeof sk);
  lt__shape_str(v->shape, v->ndim, sv, sizeof sv);
  if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2) {
    lt__err(LT_ESHAPE, "%s: q, k and v need at least 2 dims ([..., L, E]), got shapes %s, %s, %s",
            fn, sq, sk, sv);
    return NULL;
  }
  if (need_float(fn, "q", q) != LT_OK || need_float(fn, "k", k) != LT_OK ||
      need_float(fn, "v", v) != LT_OK)
    return NULL;
  int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1];
  int64_t S = k->shape[k->ndim - 2], Ev = v->shape[v->ndim - 1];
  if (k->shape[k->ndim - 1] != E) {
    lt__err(LT_ESHAPE, "%s: q %s and k %s differ in their last dim (E: %lld and %lld)", fn, sq, sk,
            (long long)E, (long long)k->shape[k->ndim - 1]);
    return NULL;
  }
  if (v->shape[v->ndim - 2] != S) {
    lt__err(LT_ESHAPE, "%s: k %s and v %s differ in their sequence dim (S: %lld and %lld)", fn, sk,
            sv, (long long)S, (long long)v->shape[v->ndim - 2]);
    return NULL;
  }
  if (mask && causal) {
    lt__err(LT_EINVAL, "%s: a mask and causal together are not accepted (as torch)", fn);
    return NULL;
  }

  /* Batch dims: q's, k's and v's broadcast together. */
  int64_t batch[LT_MAX_DIMS], b2[LT_MAX_DIMS];
  int nb = 0, nb2 = 0;
  if (lt__broadcast(fn, q->shape, q->ndim - 2, k->shape, k->ndim - 2, b2, &nb2) != LT_OK ||
      lt__broadcast(fn, b2, nb2, v->shape, v->ndim - 2, batch, &nb) != LT_OK)
    return NULL;
  if (nb + 2 > LT_MAX_DIMS) {
    lt__err(LT_ESHAPE, "%s: batch dims of %s, %s and %s give a result of more than %d dims", fn, sq,
            sk, sv, LT_MAX_DIMS);
    return NULL;
  }
  int64_t out_shape[LT_MAX_DIMS];
  memcpy(out_shape, batch, sizeof(int64_t) * (size_t)nb);
  out_shape[nb] = L;
  out_shape[nb + 1] = Ev;
  if (lt__check_shape(fn, out_shape, nb + 2) != LT_OK) return NULL;

  lt_attn_mask_kind kind = LT_ATTN_MASK_NONE;
  if (mask) {
    lt__shape_str(mask->shape, mask->ndim, sm, sizeof sm);
    if (mask->dtype == LT_BOOL) {
      kind = LT_ATTN_MASK_BOOL;
    } else if (lt__is_float((lt_dtype)mask->dtype)) {
      kind = LT_ATTN_MASK_ADDITIVE;
    } else {
      lt__err(LT_EDTYPE, "%s: the mask must be bool or floating, got %s", fn,
              lt_dtype_name((lt_dtype)mask->dtype));
      return NULL;
    }
    int64_t scores[LT_MAX_DIMS];
    memcpy(scores, batch, sizeof(int64_t) * (size_t)nb);
    scores[nb] = L;
    scores[nb + 1] = S;
    if (!lt__broadcastable(mask->shape, mask->ndim, scores, nb + 2)) {
      char ss[LT_SHAPE_STR_MAX];
      lt__err(LT_ESHAPE, "%s: the mask of shape %s does not broadcast to the scores' shape %s", fn,
              sm, lt__shape_str(scores, nb + 2, ss, sizeof ss));
      return NULL;
    }
  }

  lt_tensor *qkv[3] = {q, k, v};
  lt_dtype rdt = lt__autocast_dtype(q->dev, LT_AUTOCAST_ATTENTION,
                                    lt__promote((const lt_tensor *const *)qkv, 3));
  /* bf16 inference computes in f32 from the bf16 operands (the fused f32
   * kernel) and rounds its result once; bf16 training runs torch's math
   * path as autocast gives it, below */
  lt_dtype dt = lt__dtype_compute(rdt);
  if (!(scale > 0)) scale = 1.0 / sqrt((double)E); /* NaN or <= 0: the default */
  int64_t B = lt__numel(batch, nb);

  /* Nothing to compute: an empty result, or rows over no key (the sum of
   * nothing, as torch's math: softmax over no column, times an empty v). */
  if (lt__numel(out_shape, nb + 2) == 0 || S == 0)
    return lt__wrap(q->dev, lt__node_const(rdt, out_shape, nb + 2, 0.0));

  lt_node *nq = as_batched(lt__ir_as(q, rdt), batch, nb, B, L, E);
  lt_node *nk = as_batched(lt__ir_as(k, rdt), batch, nb, B, S, E);
  lt_node *nv = as_batched(lt__ir_as(v, rdt), batch, nb, B, S, Ev);
  lt_node *nm = NULL;
  if (mask)
    nm = as_batched(lt__ir_as(mask, kind == LT_ATTN_MASK_BOOL ? LT_BOOL : rdt), batch, nb, B, L, S);
  bool train =
      nq && nk && nv && (!mask || nm) && composite_training(ts, mask ? 4 : 3, nq, nk, nv, nm, L, S);
  /* bf16 training is torch's math path under autocast (the two products of
   * the forward and the four of its gradient in bf16, on bf16 kernels; the
   * softmax computed in f32 and rounded once, as torch's bf16 softmax);
   * anything else computes in dt */
  if (!(train && rdt == LT_BF16)) {
    nq = lt__node_cast(nq, dt);
    nk = lt__node_cast(nk, dt);
    nv = lt__node_cast(nv, dt);
    if (nm && kind != LT_ATTN_MASK_BOOL) nm = lt__node_cast(nm, dt);
  }
  lt_node *o;
  if (train) {
    int64_t axis = 2;
    lt_dtype sdt = (lt_dtype)nq->dtype, pdt = lt__dtype_compute(sdt);
    lt_node *s = lt__node_cast(lt__attn_scores(nq, nk, nm, kind, causal, scale), pdt);
    lt_node *p = s ? lt__node_make(LT_OP_SOFTMAX, pdt, s->shape, 3, &s, 1, &axis, 1, 0.0) : NULL;
    o = lt__attn_matmul(lt__node_cast(p, sdt), nv);
  } else {
    lt_node *ops[4] = {nq, nk, nv, nm};
    int64_t attrs[2] = {causal ? 1 : 0, kind};
    int64_t shape3[3] = {B, L, Ev};
    o = lt__node_make(LT_OP_ATTENTION, dt, shape3, 3, ops, mask ? 4 : 3, attrs, 2, scale);
  }
  return lt__wrap(q->dev, lt__node_cast(lt__node_reshape(o, out_shape, nb + 2), rdt));
}
