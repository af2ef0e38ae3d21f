/* lt_matmul: numpy.matmul semantics built from one LT_OP_MATMUL node.
 *
 * The MATMUL node only knows rank >= 2 operands [..., n, k] @ [..., k, m] with
 * broadcast batch dims. 1-d operands are reshaped to [1, k] (left) or [k, 1]
 * (right) before the node and the added dim is removed by a reshape after it,
 * so 1-d @ 1-d is a dot product with a 0-d result. */
#include "lt_ops.h"
#include "op_autocast.h"
#include "op_matmul.h"

/* a @ b (+ bias, broadcast over the last axis, when given), checked as fn. */
static lt_tensor *matmul_build(const char *fn, lt_tensor *a, lt_tensor *b, lt_tensor *bias) {
  lt_tensor *ts[3] = {a, b, bias};
  int nts = bias ? 3 : 2;
  if (lt__check_operands(fn, ts, nts) != LT_OK) return NULL;

  char sa[128], sb[128];
  lt__shape_str(a->shape, a->ndim, sa, sizeof sa);
  lt__shape_str(b->shape, b->ndim, sb, sizeof sb);
  /* torch rejects 0-d operands too: there is no contraction dim. */
  if (a->ndim == 0 || b->ndim == 0) {
    lt__err(LT_ESHAPE, "%s: operands must have at least 1 dim, got shapes %s and %s", fn, sa, sb);
    return NULL;
  }
  if (a->dtype == LT_BOOL || b->dtype == LT_BOOL) {
    lt__err(LT_EDTYPE, "%s: bool is not accepted (dtypes %s and %s)", fn,
            lt_dtype_name((lt_dtype)a->dtype), lt_dtype_name((lt_dtype)b->dtype));
    return NULL;
  }

  /* Operand shapes as the node sees them (rank >= 2). */
  int64_t as[LT_MAX_DIMS + 1], bs[LT_MAX_DIMS + 1];
  int an = a->ndim, bn = b->ndim;
  if (an == 1) {
    as[0] = 1;
    as[1] = a->shape[0];
    an = 2;
  } else {
    for (int i = 0; i < an; i++) as[i] = a->shape[i];
  }
  if (bn == 1) {
    bs[0] = b->shape[0];
    bs[1] = 1;
    bn = 2;
  } else {
    for (int i = 0; i < bn; i++) bs[i] = b->shape[i];
  }
  int64_t n = as[an - 2], k = as[an - 1], m = bs[bn - 1];
  /* Node shape: broadcast batch dims + [n, m] (the IR's rule, lt_node_rules.h). */
  int64_t shape[LT_MAX_DIMS];
  int nd = 0;
  switch (lt__matmul_shape(as, an, bs, bn, shape, &nd)) {
  case LT_MM_CONTRACTION:
    lt__err(LT_ESHAPE, "%s: shapes %s and %s do not fit: contraction dims %lld and %lld differ", fn,
            sa, sb, (long long)k, (long long)bs[bn - 2]);
    return NULL;
  case LT_MM_BATCH:
  case LT_MM_RANK: /* not reached: both have rank >= 2 here */
    lt__err(LT_ESHAPE, "%s: batch dims of shapes %s and %s do not broadcast", fn, sa, sb);
    return NULL;
  case LT_MM_OK:
    break;
  }
  /* Operands within the size limit can still give a result beyond it. */
  if (!lt__shape_fits(shape, nd)) {
    char so[LT_SHAPE_STR_MAX];
    lt__err(LT_ESHAPE,
            "%s: shapes %s and %s give a result of shape %s, which is too large (more "
            "than %lld elements)",
            fn, sa, sb, lt__shape_str(shape, nd, so, sizeof so), (long long)LT_MAX_NUMEL);
    return NULL;
  }

  /* Final shape: drop the dims added for 1-d operands. */
  int64_t fshape[LT_MAX_DIMS];
  int fnd = 0;
  for (int i = 0; i < nd - 2; i++) fshape[fnd++] = shape[i];
  if (a->ndim > 1) fshape[fnd++] = n;
  if (b->ndim > 1) fshape[fnd++] = m;

  lt_dtype dt = lt__autocast_dtype(a->dev, LT_AUTOCAST_MATMUL,
                                   lt__promote((const lt_tensor *const *)ts, nts));
  /* bf16 with a bias: the product's f32 sums stay unrounded (a product of
   * bf16 operands with an f32 result, the op table's ACC rule) and the bias
   * is added before the one rounding to bf16, as torch's linear (addmm)
   * does. */
  lt_dtype acc = bias ? lt__dtype_compute(dt) : dt;
  lt_node *ops[2];
  ops[0] = lt__node_reshape(lt__ir_as(a, dt), as, an);
  ops[1] = lt__node_reshape(lt__ir_as(b, dt), bs, bn);
  lt_node *mm = lt__node_reshape(lt__node_make(LT_OP_MATMUL, acc, shape, nd, ops, 2, NULL, 0, 0.0),
                                 fshape, fnd);
  if (bias) mm = lt__node_bin(LT_OP_ADD, mm, lt__node_cast(lt__ir_as(bias, dt), acc));
  return lt__wrap(a->dev, lt__node_cast(mm, dt));
}

lt_tensor *lt_matmul(lt_tensor *a, lt_tensor *b) {
  /* sharded operands: column-/row-parallel forms (op_shard.c) */
  if (a && b && (a->shard_n || b->shard_n) && lt__shard_aware_depth() == 0)
    return lt__shard_matmul(a, b);
  return matmul_build("lt_matmul", a, b, NULL);
}

lt_tensor *lt__linear(const char *fn, lt_tensor *x, lt_tensor *w, lt_tensor *bias) {
  if (!bias || !w || w->ndim != 2) {
    lt__err(LT_EINVAL, "%s: needs a 2-d weight and a bias", fn);
    return NULL;
  }
  if (bias->ndim != 1 || bias->shape[0] != w->shape[1]) {
    char sb[LT_SHAPE_STR_MAX];
    lt__err(LT_ESHAPE, "%s: bias of shape %s does not match the weight's %lld outputs", fn,
            lt__shape_str(bias->shape, bias->ndim, sb, sizeof sb), (long long)w->shape[1]);
    return NULL;
  }
  return matmul_build(fn, x, w, bias);
}
