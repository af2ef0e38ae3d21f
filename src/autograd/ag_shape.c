/* Gradient rules of matmul, the shape ops and the index ops, and of the ops
 * that autograd itself makes for them (UNSLICE, SCATTER_ADD, INDEX_ADD), so
 * that a gradient can be differentiated again.
 *
 * Shape ops move elements without computing, so each rule moves g back: the
 * inverse reshape or permutation, a sum over broadcast axes, zeros around a
 * slice, a slice of a concatenation or padding, and scatter-adds for the
 * gathers. Index operands get no gradient. */
#include <string.h>

#include "ag.h"

#define G(g) ag_ref(g)

static const lt_node *operand(const lt_node *n, int k) { return n->operands[k].node; }

static int done1(lt_node **out, lt_node *ga) {
  out[0] = ga;
  return ga ? LT_OK : LT_ENOMEM;
}

/* A one-operand node over x (consumed) in x's dtype; a constant folds into a
 * constant of the new shape. */
static lt_node *unary_node(lt_op op, lt_node *x, const int64_t *shape, int ndim,
                           const int64_t *attrs, int nattrs) {
  if (!x) return NULL;
  if (x->op == LT_OP_CONST && op != LT_OP_UNSLICE) {
    lt_node *c = lt__ag_const((lt_dtype)x->dtype, shape, ndim, x->fattr);
    lt__node_release(x);
    return c;
  }
  return lt__node_make(op, (lt_dtype)x->dtype, shape, ndim, &x, 1, attrs, nattrs, 0.0);
}

/* ---- matmul ------------------------------------------------------------------ */

/* x (consumed) with its last two axes swapped. */
static lt_node *transpose_last(lt_node *x) {
  if (!x) return NULL;
  int nd = x->ndim;
  int64_t perm[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  for (int d = 0; d < nd; d++) perm[d] = d;
  perm[nd - 2] = nd - 1;
  perm[nd - 1] = nd - 2;
  for (int d = 0; d < nd; d++) shape[d] = x->shape[perm[d]];
  return unary_node(LT_OP_PERMUTE, x, shape, nd, perm, nd);
}

/* x @ y (consumed) for rank >= 2 operands, batch dims broadcast, with a
 * result of dtype dt (the operands', or f32 sums of bf16: LT_RES_ACC). */
static lt_node *matmul_as(lt_node *x, lt_node *y, lt_dtype dt) {
  if (!x || !y) {
    lt__node_release(x);
    lt__node_release(y);
    return NULL;
  }
  int64_t shape[LT_MAX_DIMS];
  int nd;
  if (lt__broadcast("lt_backward", x->shape, x->ndim - 2, y->shape, y->ndim - 2, shape, &nd) !=
      LT_OK) {
    lt__node_release(x);
    lt__node_release(y);
    return NULL;
  }
  shape[nd++] = x->shape[x->ndim - 2];
  shape[nd++] = y->shape[y->ndim - 1];
  lt_node *ops[2] = {x, y};
  return lt__node_make(LT_OP_MATMUL, dt, shape, nd, ops, 2, NULL, 0, 0.0);
}

/* x @ y (consumed) in the operands' dtype. */
static lt_node *matmul(lt_node *x, lt_node *y) {
  return matmul_as(x, y, x ? (lt_dtype)x->dtype : LT_F32);
}

static lt_node *rows_of(lt_node *x);

/* x @ y (consumed) as f32 sums: of the bf16 operands themselves when both
 * are bf16 (a bf16 product whose sums stay unrounded, LT_RES_ACC), else of
 * both widened to f32. */
static lt_node *matmul_acc(lt_node *x, lt_node *y) {
  if (x && y && (x->dtype != LT_BF16 || y->dtype != LT_BF16)) {
    x = lt__node_cast(x, LT_F32);
    y = lt__node_cast(y, LT_F32);
  }
  return matmul_as(x, y, LT_F32);
}

/* g (an f32 gradient) as bf16 when that loses nothing: g widened from a bf16
 * node (as a linear's gradient arrives, through the cast of its bf16
 * result) gives that node; any other g stays f32. A new reference. */
static lt_node *narrow_exact(lt_node *g) {
  if (g->op == LT_OP_CAST && g->noperands == 1 && g->operands[0].node->dtype == LT_BF16)
    return ag_ref(g->operands[0].node);
  return ag_ref(g);
}

/* The rule of a product of bf16 operands with an f32 result (the sums kept
 * unrounded, LT_RES_ACC): each operand's gradient is an f32 sum rounded once
 * to bf16, from bf16 products where g is exactly bf16. */
static int matmul_acc_rule(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0), *b = operand(n, 1);
  lt_node *ga = matmul_acc(narrow_exact(g), transpose_last(ag_arg(n, 1)));
  out[0] = lt__node_cast(lt__ag_reduce_to(ga, a->shape, a->ndim), (lt_dtype)a->dtype);
  lt_node *gb;
  if (b->ndim == 2 && a->ndim > 2)
    gb = matmul_acc(transpose_last(rows_of(ag_arg(n, 0))), rows_of(narrow_exact(g)));
  else
    gb = lt__ag_reduce_to(matmul_acc(transpose_last(ag_arg(n, 0)), narrow_exact(g)), b->shape,
                          b->ndim);
  out[1] = lt__node_cast(gb, (lt_dtype)b->dtype);
  return out[0] && out[1] ? LT_OK : LT_ENOMEM;
}

/* x (consumed) as the matrix [rows of all its batch entries, last dim]. */
static lt_node *rows_of(lt_node *x) {
  if (!x) return NULL;
  int64_t shape[2] = {lt__numel(x->shape, x->ndim - 1), x->shape[x->ndim - 1]};
  return lt__node_reshape(x, shape, 2);
}

/* out = a @ b: ga = g @ b^T and gb = a^T @ g, each summed back over the batch
 * dims its operand broadcast along. A matrix b under batched a (a linear
 * layer's weight under x [B, T, C]) gets its sum over the batch as one
 * product of every row at once, a^T [k, B*n] @ g [B*n, m], instead of B
 * small products and a reduction. */
int lt__ag_rule_matmul(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0), *b = operand(n, 1);
  if (a->dtype != n->dtype) return matmul_acc_rule(n, g, out);
  out[0] = lt__ag_reduce_to(matmul(G(g), transpose_last(ag_arg(n, 1))), a->shape, a->ndim);
  if (b->ndim == 2 && b->op == LT_OP_PERMUTE && b->attrs[0] == 1) {
    /* b = w^T (torch's linear, weight [out, in]): w's gradient (a^T g)^T is
     * made as g^T a, in w's own layout, and handed back transposed, so that
     * the permute's rule cancels the two and w's gradient (and the
     * optimizer's update that reads it) is contiguous, not a strided view. */
    out[1] = transpose_last(matmul(transpose_last(rows_of(G(g))), rows_of(ag_arg(n, 0))));
  } else if (b->ndim == 2 && a->ndim > 2)
    out[1] = matmul(transpose_last(rows_of(ag_arg(n, 0))), rows_of(G(g)));
  else
    out[1] = lt__ag_reduce_to(matmul(transpose_last(ag_arg(n, 0)), G(g)), b->shape, b->ndim);
  return out[0] && out[1] ? LT_OK : LT_ENOMEM;
}

/* ---- shape ops --------------------------------------------------------------- */

int lt__ag_rule_reshape(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0);
  return done1(out, lt__node_reshape(G(g), a->shape, a->ndim));
}

int lt__ag_rule_permute(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0);
  int64_t inv[LT_MAX_DIMS];
  for (int d = 0; d < n->ndim; d++) inv[n->attrs[d]] = d;
  if (g->op == LT_OP_PERMUTE) { /* g a permute that this one undoes: its operand */
    bool undone = true;
    for (int d = 0; d < n->ndim; d++) undone = undone && g->attrs[inv[d]] == d;
    if (undone) return done1(out, G(g->operands[0].node));
  }
  return done1(out, unary_node(LT_OP_PERMUTE, G(g), a->shape, a->ndim, inv, a->ndim));
}

int lt__ag_rule_expand(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0);
  return done1(out, lt__ag_reduce_to(G(g), a->shape, a->ndim));
}

int lt__ag_rule_slice(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0);
  return done1(out, unary_node(LT_OP_UNSLICE, G(g), a->shape, a->ndim, n->attrs, n->nattrs));
}

/* The block of x (consumed) of the given shape at starts, step 1; the slice's
 * canonical attrs as lt_slice_n records them. */
static lt_node *block(lt_node *x, const int64_t *starts, const int64_t *shape, int ndim) {
  if (!x) return NULL;
  if (x->ndim == ndim && memcmp(x->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0) return x;
  int64_t attrs[2 * LT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    attrs[d] = shape[d] ? starts[d] : 0;
    attrs[ndim + d] = 1;
  }
  return unary_node(LT_OP_SLICE, x, shape, ndim, attrs, 2 * ndim);
}

int lt__ag_rule_concat(const lt_node *n, lt_node *g, lt_node **out) {
  int axis = (int)n->attrs[0];
  int64_t starts[LT_MAX_DIMS] = {0};
  int rc = LT_OK;
  for (int k = 0; k < n->noperands; k++) {
    const lt_node *a = operand(n, k);
    out[k] = block(G(g), starts, a->shape, a->ndim);
    if (!out[k]) rc = LT_ENOMEM;
    starts[axis] += a->shape[axis];
  }
  return rc;
}

int lt__ag_rule_pad(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0);
  int64_t starts[LT_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) starts[d] = n->attrs[2 * d];
  return done1(out, block(G(g), starts, a->shape, a->ndim));
}

/* ---- index ops --------------------------------------------------------------- */

/* op(src, index) (consumed) into shape, along attrs[0] of n. */
static lt_node *indexed(lt_op op, const lt_node *n, lt_node *src, lt_node *index,
                        const lt_node *like) {
  if (!src || !index) {
    lt__node_release(src);
    lt__node_release(index);
    return NULL;
  }
  lt_node *ops[2] = {src, index};
  return lt__node_make(op, (lt_dtype)src->dtype, like->shape, like->ndim, ops, 2, n->attrs, 1, 0.0);
}

/* GATHER -> SCATTER_ADD, INDEX_SELECT -> INDEX_ADD, and back. The index
 * (operand 1) gets no gradient. */
int lt__ag_rule_indexed(const lt_node *n, lt_node *g, lt_node **out) {
  lt_op t;
  switch ((lt_op)n->op) {
  case LT_OP_GATHER:
    t = LT_OP_SCATTER_ADD;
    break;
  case LT_OP_SCATTER_ADD:
    t = LT_OP_GATHER;
    break;
  case LT_OP_INDEX_SELECT:
    t = LT_OP_INDEX_ADD;
    break;
  case LT_OP_INDEX_ADD:
    t = LT_OP_INDEX_SELECT;
    break;
  default:
    return lt__err(LT_EINVAL, "lt_backward: the indexed gradient rule has no case for op %s",
                   lt__op_name((lt_op)n->op));
  }
  return done1(out, indexed(t, n, G(g), ag_arg(n, 1), operand(n, 0)));
}

/* UNSLICE's transpose is the slice it undid. */
int lt__ag_rule_unslice(const lt_node *n, lt_node *g, lt_node **out) {
  const lt_node *a = operand(n, 0);
  return done1(out, unary_node(LT_OP_SLICE, G(g), a->shape, a->ndim, n->attrs, n->nattrs));
}

/* ---- sums of blocks ---------------------------------------------------------- */

/* x as a block of step 1 inside a zero shape: an UNSLICE of step 1 (its
 * source and starts), or a node of the whole shape (itself, starts 0). */
static bool as_block(const lt_node *x, const lt_node **src, const int64_t **starts) {
  static const int64_t zeros[LT_MAX_DIMS];
  if (x->op != LT_OP_UNSLICE) {
    *src = x;
    *starts = zeros;
    return true;
  }
  if (x->noperands != 1 || x->nattrs != 2 * x->ndim) return false;
  for (int d = 0; d < x->ndim; d++)
    if (x->attrs[x->ndim + d] != 1) return false;
  *src = x->operands[0].node;
  *starts = x->attrs;
  return true;
}

/* Whether x is a CONCAT along axis ax, whose operands a merge splices in. */
static bool concat_on(const lt_node *x, int ax) {
  return x->op == LT_OP_CONCAT && x->nattrs == 1 && x->attrs[0] == ax;
}

/* Appends x's parts along axis ax (a CONCAT's operands, else x), retained. */
static int concat_parts(const lt_node *x, int ax, lt_node **parts, int n) {
  if (!concat_on(x, ax)) {
    parts[n] = ag_ref(x);
    return n + 1;
  }
  for (int k = 0; k < x->noperands; k++) parts[n++] = ag_arg(x, k);
  return n;
}

enum { MERGE_MAX_PARTS = 64 };

lt_node *lt__ag_merge_blocks(lt_node *a, lt_node *b) {
  if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim || a->ndim == 0 ||
      (a->op != LT_OP_UNSLICE && b->op != LT_OP_UNSLICE))
    return NULL;
  int nd = a->ndim;
  if (memcmp(a->shape, b->shape, (size_t)nd * sizeof(int64_t))) return NULL;
  const lt_node *sa, *sb;
  const int64_t *pa, *pb;
  if (!as_block(a, &sa, &pa) || !as_block(b, &sb, &pb)) return NULL;
  /* side by side along exactly one axis, equal elsewhere */
  int ax = -1;
  for (int d = 0; d < nd; d++) {
    if (pa[d] == pb[d] && sa->shape[d] == sb->shape[d]) continue;
    if (ax >= 0) return NULL;
    ax = d;
  }
  if (ax < 0 || sa->shape[ax] < 1 || sb->shape[ax] < 1) return NULL;
  const lt_node *first = sa, *second = sb;
  const int64_t *start = pa;
  if (pa[ax] + sa->shape[ax] == pb[ax]) {
  } else if (pb[ax] + sb->shape[ax] == pa[ax]) {
    first = sb, second = sa, start = pb;
  } else {
    return NULL;
  }
  int count = (concat_on(first, ax) ? first->noperands : 1) +
              (concat_on(second, ax) ? second->noperands : 1);
  if (count > MERGE_MAX_PARTS) return NULL;
  lt_node *parts[MERGE_MAX_PARTS];
  int n = concat_parts(second, ax, parts, concat_parts(first, ax, parts, 0));
  int64_t shape[LT_MAX_DIMS], attrs[2 * LT_MAX_DIMS], axis = ax;
  bool whole = true;
  for (int d = 0; d < nd; d++) {
    shape[d] = d == ax ? sa->shape[d] + sb->shape[d] : sa->shape[d];
    attrs[d] = start[d];
    attrs[nd + d] = 1;
    whole = whole && start[d] == 0 && shape[d] == a->shape[d];
  }
  lt_node *cat =
      lt__node_make(LT_OP_CONCAT, (lt_dtype)a->dtype, shape, nd, parts, n, &axis, 1, 0.0);
  lt_node *r = whole ? cat : unary_node(LT_OP_UNSLICE, cat, a->shape, nd, attrs, 2 * nd);
  if (!r) return NULL;
  lt__node_release(a);
  lt__node_release(b);
  return r;
}
