/* Lowering: a post-order graph becomes kernels over slots (see cpu.h).
 *
 * Each node gets a value: CG_VIEW (an affine view of a slot: parameters,
 * kernel outputs, and the shape ops RESHAPE of a contiguous view, PERMUTE,
 * EXPAND, SLICE, which cost nothing) or CG_EXPR (an elementwise node fused
 * into every kernel that reads it, never stored; uniform draws are such
 * nodes, computed per element from their seed and index). An elementwise
 * node is stored only when it is a root, when a user cannot fuse it (shape ops,
 * matmul, ops run by ref), or when a user broadcasts it to more elements
 * (storing the small value beats recomputing it per element).
 *
 * Groups: a stored elementwise node whose every reader (through fused
 * expressions of its shape) is a stored elementwise node of one kernel joins
 * that kernel, which then stores several values per element in one loop (an
 * optimizer's new state and parameter: one pass, each input read once).
 *
 * Donors: lowering runs once, pairs donors with roots where the update is
 * safe in place (the root's kernel is a loop that reads the parameter only at
 * the element it writes, and no later kernel reads it), then runs again with
 * those roots stored in their parameters' slots. */
#include <stdlib.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "../../core/lt_shape.h"
#include "cpu_codegen.h"
#include "cpu_ops.h"

typedef struct lw {
  const lt_graph *g;
  lt_executable *e;
  cg_ctx cg;
  uint8_t *kind;
  cpu_view *view;
  bool *mat;
  int *group;    /* per stored elementwise node: the node whose kernel stores it, else -1 */
  int *gnext;    /* per group member: the next member in node order, or -1 */
  int *ghead;    /* per group leader: its first member */
  int *own_slot; /* per node: the slot its kernel wrote, or -1 */
  int nk, capk;
  cpu_kernel *k;
  cg_info *info; /* per kernel: what it reads */
  int nslots, capslots;
  cpu_slot *slots;
  int nfns;
  const int *alias; /* per root: the parameter whose slot it takes, or -1 */
} lw;

static bool fusible(const lt_node *n) { return lt__cg_elementwise_ok(n); }

static bool is_view_op(int op) { return lt__op_cpu_path(op) == LT_CPU_VIEW; }

/* Products of f32, f64 and bf16 (bf16: f32 sums rounded once, cpu_gemm.c),
 * both operands of the result's dtype; or bf16 operands with an f32 result
 * (the sums unrounded: LT_RES_ACC). */
static bool blas_ok(const lt_node *n) {
  if (n->op != LT_OP_MATMUL || n->noperands != 2 || n->ndim < 2) return false;
  if (n->dtype != LT_F32 && n->dtype != LT_F64 && n->dtype != LT_BF16) return false;
  int dt = n->operands[0].node->dtype;
  return (dt == n->dtype || (dt == LT_BF16 && n->dtype == LT_F32)) &&
         n->operands[1].node->dtype == dt && n->operands[0].node->ndim >= 2 &&
         n->operands[1].node->ndim >= 2;
}

static int add_slot(lw *w, size_t nbytes) {
  if (w->nslots == w->capslots) {
    int nc = w->capslots ? 2 * w->capslots : 32;
    cpu_slot *s = lt__realloc(w->slots, (size_t)w->capslots * sizeof *s, (size_t)nc * sizeof *s);
    if (!s) return LT_ENOMEM;
    w->slots = s;
    w->capslots = nc;
  }
  cpu_slot *s = &w->slots[w->nslots];
  memset(s, 0, sizeof *s);
  s->nbytes = nbytes;
  s->first = s->last = -1;
  return w->nslots++;
}

static cpu_kernel *add_kernel(lw *w, cpu_kind kind, int out_slot) {
  if (w->nk == w->capk) {
    int nc = w->capk ? 2 * w->capk : 16;
    cpu_kernel *k = lt__realloc(w->k, (size_t)w->capk * sizeof *k, (size_t)nc * sizeof *k);
    if (!k) return NULL;
    w->k = k;
    cg_info *in = lt__realloc(w->info, (size_t)w->capk * sizeof *in, (size_t)nc * sizeof *in);
    if (!in) return NULL;
    w->info = in;
    w->capk = nc;
  }
  cpu_kernel *k = &w->k[w->nk];
  memset(k, 0, sizeof *k);
  memset(&w->info[w->nk], 0, sizeof w->info[w->nk]);
  k->kind = kind;
  k->out_slot = out_slot;
  w->info[w->nk].nouts = 1;
  w->info[w->nk].outs[0] = out_slot;
  w->nk++;
  return k;
}

static void add_read_at(lw *w, int kernel, int slot) {
  cg_info *in = &w->info[kernel];
  if (in->nreads == (int)(sizeof in->reads / sizeof *in->reads)) {
    in->reads_full = true;
    return;
  }
  cg_read *rd = &in->reads[in->nreads++];
  memset(rd, 0, sizeof *rd);
  rd->slot = slot;
}

static void add_read(lw *w, int slot) { add_read_at(w, w->nk - 1, slot); }

/* A slot for node i's value: its root's output (or the donated parameter)
 * when i is a root whose slot is still free, else a temporary. */
static int value_slot(lw *w, int i) {
  const lt_node *n = w->g->nodes[i];
  for (int r = 0; r < w->g->nroots; r++) {
    if (w->g->roots[r] != i || w->e->root_slot[r] >= 0) continue;
    int s = w->alias[r] >= 0 ? w->alias[r] : w->e->nparams + r;
    w->e->root_slot[r] = s;
    w->own_slot[i] = s;
    return s;
  }
  int s = add_slot(w, (size_t)lt__numel(n->shape, n->ndim) * lt_dtype_size((lt_dtype)n->dtype));
  if (s >= 0) w->own_slot[i] = s;
  return s;
}

static int emit_loop(lw *w, int node, bool copy, int slot, const cpu_view *src_shape) {
  cpu_view out;
  const lt_node *n = w->g->nodes[node];
  (void)src_shape;
  lt__cpu_view_init(&out, slot, n->dtype, n->shape, n->ndim);
  cpu_kernel *k = add_kernel(w, CK_LOOP, slot);
  if (!k) return LT_ENOMEM;
  k->fn_index = w->nfns++;
  cg_info *info = &w->info[w->nk - 1];
  bool red = !copy && lt__cg_reduce_ok(n) && w->kind[node] != CG_VIEW;
  int rc = red ? lt__cg_reduce(&w->cg, node, &out, k->fn_index, info)
               : lt__cg_elem(&w->cg, &node, 1, copy, &out, k->fn_index, info);
  k->extent = info->extent;
  k->unit_cost = info->unit_cost;
  return rc;
}

/* The kernel of group leader i: every member's value into its slot. */
static int emit_group(lw *w, int leader) {
  int nodes[CG_MAX_OUTS], n = 0;
  cpu_view outs[CG_MAX_OUTS];
  for (int j = w->ghead[leader]; j >= 0 && n < CG_MAX_OUTS; j = w->gnext[j]) {
    const lt_node *m = w->g->nodes[j];
    nodes[n] = j;
    lt__cpu_view_init(&outs[n++], w->own_slot[j], m->dtype, m->shape, m->ndim);
  }
  cpu_kernel *k = add_kernel(w, CK_LOOP, w->own_slot[leader]);
  if (!k) return LT_ENOMEM;
  k->fn_index = w->nfns++;
  cg_info *info = &w->info[w->nk - 1];
  int rc = lt__cg_elem(&w->cg, nodes, n, false, outs, k->fn_index, info);
  k->extent = info->extent;
  k->unit_cost = info->unit_cost;
  return rc;
}

/* Stores the view of node i into a fresh contiguous slot; i's view becomes it. */
static int materialize_copy(lw *w, int i) {
  int slot = add_slot(w, (size_t)lt__numel(w->view[i].shape, w->view[i].ndim) *
                             lt_dtype_size((lt_dtype)w->view[i].dtype));
  if (slot < 0) return LT_ENOMEM;
  int rc = emit_loop(w, i, true, slot, NULL);
  if (rc != LT_OK) return rc;
  lt__cpu_view_init(&w->view[i], slot, w->view[i].dtype, w->view[i].shape, w->view[i].ndim);
  return LT_OK;
}

static int lower_view_op(lw *w, int i) {
  const lt_node *n = w->g->nodes[i];
  int o = n->operands[0].node->order;
  if (n->op == LT_OP_RESHAPE && !lt__cpu_view_contiguous(&w->view[o])) {
    int rc = materialize_copy(w, o);
    if (rc != LT_OK) return rc;
  }
  const cpu_view *v = &w->view[o];
  cpu_view *nv = &w->view[i];
  *nv = *v;
  nv->ndim = n->ndim;
  memcpy(nv->shape, n->shape, sizeof nv->shape);
  switch (n->op) {
  case LT_OP_RESHAPE:
    lt__row_major_strides(n->shape, n->ndim, nv->strides);
    break;
  case LT_OP_PERMUTE:
    for (int d = 0; d < n->ndim; d++) nv->strides[d] = v->strides[n->attrs[d]];
    break;
  case LT_OP_EXPAND:
    for (int d = 0; d < n->ndim; d++) {
      int e = d - (n->ndim - v->ndim);
      nv->strides[d] = e < 0 || (v->shape[e] == 1 && n->shape[d] != 1) ? 0 : v->strides[e];
    }
    break;
  case LT_OP_SLICE:
    for (int d = 0; d < n->ndim; d++) {
      nv->offset += n->attrs[d] * v->strides[d];
      nv->strides[d] = v->strides[d] * n->attrs[n->ndim + d];
    }
    break;
  default: /* a VIEW row of the op table without a case here: refused, named */
    return lt__err(LT_ECOMPILE, "cpu: no view lowering for op %s", lt__op_name((lt_op)n->op));
  }
  w->kind[i] = CG_VIEW;
  return LT_OK;
}

/* Matrix operand: transposed or not, leading dimension; false when the view
 * is neither (it is copied first). */
static bool mat_layout(const cpu_view *v, bool *trans, int64_t *ld) {
  int nd = v->ndim;
  int64_t rows = v->shape[nd - 2], cols = v->shape[nd - 1];
  int64_t sr = v->strides[nd - 2], sc = v->strides[nd - 1];
  if ((cols <= 1 || sc == 1) && (rows <= 1 || sr >= cols)) {
    *trans = false;
    *ld = rows <= 1 ? (cols > 1 ? cols : 1) : sr;
    if (*ld < cols) *ld = cols;
    return true;
  }
  if ((rows <= 1 || sr == 1) && (cols <= 1 || sc >= rows)) {
    *trans = true;
    *ld = cols <= 1 ? (rows > 1 ? rows : 1) : sc;
    if (*ld < rows) *ld = rows;
    return true;
  }
  return false;
}

static int lower_matmul(lw *w, int i) {
  const lt_node *n = w->g->nodes[i];
  int ia = n->operands[0].node->order, ib = n->operands[1].node->order;
  cpu_matmul mm;
  memset(&mm, 0, sizeof mm);
  int rc;
  if (!mat_layout(&w->view[ia], &mm.ta, &mm.lda)) {
    if ((rc = materialize_copy(w, ia)) != LT_OK) return rc;
    mat_layout(&w->view[ia], &mm.ta, &mm.lda);
  }
  if (!mat_layout(&w->view[ib], &mm.tb, &mm.ldb)) {
    if ((rc = materialize_copy(w, ib)) != LT_OK) return rc;
    mat_layout(&w->view[ib], &mm.tb, &mm.ldb);
  }
  const cpu_view *a = &w->view[ia], *b = &w->view[ib];
  int nb = n->ndim - 2;
  mm.f64 = n->dtype == LT_F64;
  mm.acc_f32 = n->dtype == LT_F32 && a->dtype == LT_BF16;
  mm.n = n->shape[nb];
  mm.m = n->shape[nb + 1];
  mm.k = a->shape[a->ndim - 1];
  mm.nbatch_dims = nb;
  for (int d = 0; d < nb; d++) {
    mm.batch_shape[d] = n->shape[d];
    int ea = d - (nb - (a->ndim - 2)), eb = d - (nb - (b->ndim - 2));
    mm.a_bstride[d] = ea < 0 || a->shape[ea] == 1 ? 0 : a->strides[ea];
    mm.b_bstride[d] = eb < 0 || b->shape[eb] == 1 ? 0 : b->strides[eb];
  }
  mm.a = *a;
  mm.b = *b;
  int slot = value_slot(w, i);
  if (slot < 0) return LT_ENOMEM;
  cpu_kernel *k = add_kernel(w, CK_BLAS, slot);
  if (!k) return LT_ENOMEM;
  k->mm = mm;
  add_read(w, a->slot);
  add_read(w, b->slot);
  lt__cpu_view_init(&w->view[i], slot, n->dtype, n->shape, n->ndim);
  w->kind[i] = CG_VIEW;
  return LT_OK;
}

static int lower_ref(lw *w, int i) {
  const lt_node *n = w->g->nodes[i];
  for (int j = 0; j < n->noperands; j++) {
    int o = n->operands[j].node->order;
    if (!lt__cpu_view_contiguous(&w->view[o])) {
      int rc = materialize_copy(w, o);
      if (rc != LT_OK) return rc;
    }
  }
  int slot = value_slot(w, i);
  if (slot < 0) return LT_ENOMEM;
  cpu_kernel *k = add_kernel(w, CK_REF, slot);
  if (!k) return LT_ENOMEM;
  lt_instr *in = &k->ins;
  in->op = n->op;
  in->dtype = n->dtype;
  in->ndim = n->ndim;
  memcpy(in->shape, n->shape, sizeof in->shape);
  in->fattr = n->fattr;
  in->param = -1;
  in->noperands = n->noperands;
  in->nattrs = n->nattrs;
  if (n->nattrs) {
    in->attrs = lt__malloc((size_t)n->nattrs * sizeof(int64_t));
    if (!in->attrs) return LT_ENOMEM;
    memcpy(in->attrs, n->attrs, (size_t)n->nattrs * sizeof(int64_t));
  }
  if (n->noperands) {
    k->in = lt__malloc((size_t)n->noperands * sizeof *k->in);
    if (!k->in) return LT_ENOMEM;
    for (int j = 0; j < n->noperands; j++) {
      k->in[j] = w->view[n->operands[j].node->order];
      add_read(w, k->in[j].slot);
    }
  }
  lt__cpu_view_init(&k->out, slot, n->dtype, n->shape, n->ndim);
  lt__cpu_view_init(&w->view[i], slot, n->dtype, n->shape, n->ndim);
  w->kind[i] = CG_VIEW;
  return LT_OK;
}

static int lower_node(lw *w, int i) {
  const lt_node *n = w->g->nodes[i];
  if (n->op == LT_OP_DATA) {
    lt__cpu_view_init(&w->view[i], w->g->param_of[i], n->dtype, n->shape, n->ndim);
    w->kind[i] = CG_VIEW;
    return LT_OK;
  }
  if (fusible(n)) {
    w->kind[i] = CG_EXPR;
    if (!w->mat[i]) return LT_OK;
    int slot = value_slot(w, i);
    if (slot < 0) return LT_ENOMEM;
    int rc = LT_OK;
    /* a member before its leader: stored by the leader's kernel, which comes
     * before any other reader */
    if (w->group[i] < 0) /* a constant */
      rc = emit_loop(w, i, false, slot, NULL);
    else if (w->group[i] == i)
      rc = emit_group(w, i);
    lt__cpu_view_init(&w->view[i], slot, n->dtype, n->shape, n->ndim);
    w->kind[i] = CG_VIEW;
    return rc;
  }
  if (is_view_op(n->op)) return lower_view_op(w, i);
  if (lt__cg_reduce_ok(n)) {
    int slot = value_slot(w, i);
    if (slot < 0) return LT_ENOMEM;
    w->kind[i] = CG_EXPR;
    int rc = emit_loop(w, i, false, slot, NULL);
    lt__cpu_view_init(&w->view[i], slot, n->dtype, n->shape, n->ndim);
    w->kind[i] = CG_VIEW;
    return rc;
  }
  if (blas_ok(n)) return lower_matmul(w, i);
  return lower_ref(w, i);
}

static void mark_materialized(lw *w) {
  const lt_graph *g = w->g;
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    bool fuses = fusible(n) || lt__cg_reduce_ok(n);
    for (int j = 0; j < n->noperands; j++) {
      const lt_node *y = n->operands[j].node;
      if (!fuses) w->mat[y->order] = true;
      if (fusible(n) && y->op != LT_OP_CONST &&
          lt__numel(n->shape, n->ndim) > lt__numel(y->shape, y->ndim))
        w->mat[y->order] = true;
    }
  }
  for (int r = 0; r < g->nroots; r++) w->mat[g->roots[r]] = true;
  /* A value read by a reduction and by anything else is stored once rather
   * than recomputed by each; and no fused expression grows past kMaxExpr
   * nodes (counted as a tree), which bounds code size and recomputation. */
  enum { kMaxExpr = 48 };
  int *users = lt__calloc((size_t)g->nnodes * sizeof *users);
  bool *red_user = lt__calloc((size_t)g->nnodes * sizeof *red_user);
  int *cost = lt__calloc((size_t)g->nnodes * sizeof *cost);
  if (!users || !red_user || !cost) { /* without memory: store every value */
    for (int i = 0; i < g->nnodes; i++) w->mat[i] = true;
  } else {
    for (int i = 0; i < g->nnodes; i++)
      for (int j = 0; j < g->nodes[i]->noperands; j++) {
        int y = g->nodes[i]->operands[j].node->order;
        users[y]++;
        if (lt__cg_reduce_ok(g->nodes[i])) red_user[y] = true;
      }
    for (int i = 0; i < g->nnodes; i++) {
      const lt_node *n = g->nodes[i];
      if (!fusible(n) || n->op == LT_OP_CONST) continue;
      if (red_user[i] && users[i] > 1) w->mat[i] = true;
      int c = 1;
      for (int j = 0; j < n->noperands; j++) {
        int y = n->operands[j].node->order;
        if (fusible(g->nodes[y]) && !w->mat[y]) c += cost[y];
      }
      if (c > kMaxExpr) {
        w->mat[i] = true;
        c = 1;
      }
      cost[i] = c;
    }
  }
  lt__free(users, (size_t)g->nnodes * sizeof *users);
  lt__free(red_user, (size_t)g->nnodes * sizeof *red_user);
  lt__free(cost, (size_t)g->nnodes * sizeof *cost);
}

/* Groups (see the file comment). Nodes are taken in decreasing order, so
 * every user of a node is placed before the node: rd[i] is the group that
 * reads node i's value (-1: no reader yet, -2: several, or a reader that is
 * not in a group of i's shape). A fused expression passes on the group of its
 * own readers. */
static int plan_groups(lw *w) {
  const lt_graph *g = w->g;
  int n = g->nnodes;
  int *rd = lt__malloc((size_t)n * sizeof *rd + 1),
      *size = lt__calloc((size_t)n * sizeof *size + 1);
  if (!rd || !size) {
    lt__free(rd, (size_t)n * sizeof *rd + 1);
    lt__free(size, (size_t)n * sizeof *size + 1);
    return LT_ENOMEM;
  }
  for (int i = 0; i < n; i++) rd[i] = -1;
  for (int i = n - 1; i >= 0; i--) {
    const lt_node *u = g->nodes[i];
    int through = -2; /* what u passes on to its operands */
    w->group[i] = w->gnext[i] = w->ghead[i] = -1;
    if (fusible(u) && u->op != LT_OP_CONST) {
      if (w->mat[i]) {
        int l = rd[i] >= 0 && size[rd[i]] < CG_MAX_OUTS ? rd[i] : i;
        w->group[i] = l;
        size[l]++;
        w->gnext[i] = l == i ? -1 : w->ghead[l];
        w->ghead[l] = i;
        through = l;
      } else {
        through = rd[i];
      }
    }
    for (int j = 0; j < u->noperands; j++) {
      const lt_node *y = u->operands[j].node;
      int t = through;
      if (y->ndim != u->ndim || memcmp(y->shape, u->shape, (size_t)u->ndim * sizeof *u->shape))
        t = -2;
      int *r = &rd[y->order];
      if (t == -1) continue;
      *r = *r == -1 || *r == t ? t : -2;
    }
  }
  lt__free(rd, (size_t)n * sizeof *rd + 1);
  lt__free(size, (size_t)n * sizeof *size + 1);
  return LT_OK;
}

static int lower_roots(lw *w) {
  const lt_graph *g = w->g;
  lt_executable *e = w->e;
  for (int r = 0; r < g->nroots; r++) {
    if (e->root_slot[r] >= 0) continue;
    int i = g->roots[r];
    int slot = w->alias[r] >= 0 ? w->alias[r] : e->nparams + r;
    e->root_slot[r] = slot;
    if (w->own_slot[i] >= 0) { /* a second root of the same node */
      cpu_kernel *k = add_kernel(w, CK_MEMCPY, slot);
      if (!k) return LT_ENOMEM;
      lt__cpu_view_init(&k->src, w->own_slot[i], w->view[i].dtype, w->view[i].shape,
                        w->view[i].ndim);
      k->nbytes = w->slots[slot].nbytes;
      add_read(w, w->own_slot[i]);
    } else { /* a parameter or a view: copied */
      int rc = emit_loop(w, i, true, slot, NULL);
      if (rc != LT_OK) return rc;
    }
  }
  return LT_OK;
}

static void free_kernels(cpu_kernel *k, int n) {
  for (int i = 0; i < n; i++) {
    if (k[i].kind != CK_REF) continue;
    lt__free(k[i].ins.attrs, (size_t)k[i].ins.nattrs * sizeof(int64_t));
    lt__free(k[i].in, (size_t)k[i].ins.noperands * sizeof(cpu_view));
  }
}

static void lw_free(lw *w) {
  if (w->k) free_kernels(w->k, w->nk);
  lt__free(w->k, (size_t)w->capk * sizeof *w->k);
  lt__free(w->info, (size_t)w->capk * sizeof *w->info);
  lt__free(w->slots, (size_t)w->capslots * sizeof *w->slots);
  w->k = NULL;
  w->info = NULL;
  w->slots = NULL;
  w->nk = w->capk = w->nslots = w->capslots = 0;
}

/* A GEMM's epilogue: the loop kernel right after it, when that loop reads the
 * product only element for element (bias, activation, residual) and covers
 * the product's rows in order, so that each block of rows can go through the
 * loop as soon as the block's product is written, while it is in cache (and
 * without a second wake-up of the pool). The blocks of the product still read
 * its operands while earlier blocks' loops run: the loop is made to read them
 * too, which keeps their storage from being reused for its outputs. */
static void mark_epilogues(lw *w) {
  for (int i = 0; i + 1 < w->nk; i++) {
    cpu_kernel *g = &w->k[i], *l = &w->k[i + 1];
    cg_info *in = &w->info[i + 1];
    /* None after a product with a bf16 result (its loop then runs after
     * the whole product, as any other kernel); an f32 result of bf16
     * operands (a linear's sums before its bias) takes one as f32 does. */
    if (g->kind != CK_BLAS || l->kind != CK_LOOP || g->mm.nbatch_dims != 0 || in->reads_full ||
        (g->mm.a.dtype == LT_BF16 && !g->mm.acc_f32))
      continue;
    int64_t rows = g->mm.n, elems = g->mm.n * g->mm.m;
    if (rows < 1 || l->extent * l->unit_cost != elems || l->extent % rows) continue;
    bool reads_product = false, ok = in->nreads + 2 <= (int)(sizeof in->reads / sizeof *in->reads);
    for (int q = 0; q < in->nreads && ok; q++)
      if (in->reads[q].slot == g->out_slot) {
        reads_product = true;
        ok = in->reads[q].identity;
      }
    for (int o = 0; o < in->nouts && ok; o++)
      ok = in->outs[o] != g->mm.a.slot && in->outs[o] != g->mm.b.slot && in->outs[o] != g->out_slot;
    if (!ok || !reads_product) continue;
    g->epilogue = true;
    add_read_at(w, i + 1, g->mm.a.slot);
    add_read_at(w, i + 1, g->mm.b.slot);
  }
}

static int lower_once(lw *w) {
  const lt_graph *g = w->g;
  lt_executable *e = w->e;
  for (int r = 0; r < g->nroots; r++) e->root_slot[r] = -1;
  for (int i = 0; i < g->nnodes; i++) w->own_slot[i] = -1;
  /* parameter and root slots first */
  for (int p = 0; p < g->nparams; p++)
    if (add_slot(w, 0) < 0) return LT_ENOMEM;
  for (int i = 0; i < g->nnodes; i++) { /* their sizes: execute checks the arguments */
    const lt_node *n = g->nodes[i];
    if (n->op == LT_OP_DATA && g->param_of[i] >= 0 && g->param_of[i] < g->nparams)
      w->slots[g->param_of[i]].nbytes =
          (size_t)lt__numel(n->shape, n->ndim) * lt_dtype_size((lt_dtype)n->dtype);
  }
  for (int r = 0; r < g->nroots; r++) {
    const lt_node *n = g->nodes[g->roots[r]];
    if (add_slot(w, (size_t)lt__numel(n->shape, n->ndim) * lt_dtype_size((lt_dtype)n->dtype)) < 0)
      return LT_ENOMEM;
  }
  for (int i = 0; i < g->nnodes; i++) {
    int rc = lower_node(w, i);
    if (rc != LT_OK) return rc;
  }
  int rc = lower_roots(w);
  if (rc == LT_OK) mark_epilogues(w);
  return rc;
}

/* Whether root r may be written over parameter p (see the file comment): 0
 * no, 1 yes, 2 yes and r is computed from p (an update of p). In a kernel of
 * several outputs, p's value must be loaded by r's output (member mr) or an
 * earlier one of the same element, before mr stores it. */
static int in_place_safe(const lw *w, int r, int p) {
  int slot = w->e->root_slot[r], kr = -1, mr = -1;
  for (int j = 0; j < w->nk; j++)
    for (int o = 0; o < w->info[j].nouts; o++)
      if (w->info[j].outs[o] == slot) {
        kr = j;
        mr = o;
      }
  if (kr < 0 || w->k[kr].kind != CK_LOOP) return 0;
  int dt = w->g->nodes[w->g->roots[r]]->dtype, safe = 1;
  for (int j = kr; j < w->nk; j++) {
    const cg_info *in = &w->info[j];
    if (in->reads_full) return 0;
    for (int q = 0; q < in->nreads; q++) {
      const cg_read *rd = &in->reads[q];
      if (rd->slot != p) continue;
      if (j > kr || !rd->identity || rd->dtype != dt || rd->member > mr) return 0;
      if (rd->member == mr) safe = 2;
    }
  }
  return safe;
}

/* Donors go first to roots that update them, then to any root that fits. */
static void pair_donors(const lw *w, int *alias) {
  const lt_graph *g = w->g;
  for (int r = 0; r < g->nroots; r++) alias[r] = -1;
  for (int k = 0; k < 2 * g->ndonors; k++) {
    int p = g->donors[k % g->ndonors], d = -1, need = k < g->ndonors ? 2 : 1;
    bool paired = false;
    for (int r = 0; r < g->nroots; r++) paired |= alias[r] == p;
    if (paired) continue;
    for (int i = 0; i < g->nnodes && d < 0; i++)
      if (g->nodes[i]->op == LT_OP_DATA && g->param_of[i] == p) d = i;
    if (d < 0) continue;
    const lt_node *dn = g->nodes[d];
    for (int r = 0; r < g->nroots; r++) {
      const lt_node *rn = g->nodes[g->roots[r]];
      bool taken = false;
      for (int q = 0; q < g->nroots; q++) taken |= alias[q] >= 0 && g->roots[q] == g->roots[r];
      if (alias[r] >= 0 || taken || rn->dtype != dn->dtype || rn->ndim != dn->ndim ||
          memcmp(rn->shape, dn->shape, (size_t)rn->ndim * sizeof(int64_t)) != 0)
        continue;
      if (in_place_safe(w, r, p) < need) continue;
      alias[r] = p;
      break;
    }
  }
}

/* Buffer plan: first fit of each temporary into an arena, reusing the room
 * of values whose last reader has run. */
static void plan_buffers(lw *w) {
  lt_executable *e = w->e;
  int first_temp = e->nparams + e->nroots;
  for (int j = 0; j < w->nk; j++) {
    const cg_info *in = &w->info[j];
    for (int o = 0; o < in->nouts; o++) {
      cpu_slot *s = &w->slots[in->outs[o]];
      if (s->first < 0) s->first = j;
      if (s->last < j) s->last = j;
    }
    for (int q = 0; q < in->nreads; q++) {
      cpu_slot *r = &w->slots[in->reads[q].slot];
      if (r->last < j) r->last = j;
    }
    if (in->reads_full) /* unknown readers: keep everything alive to the end */
      for (int t = first_temp; t < w->nslots; t++) w->slots[t].last = w->nk;
  }
  size_t arena = 0;
  for (int t = first_temp; t < w->nslots; t++) {
    cpu_slot *s = &w->slots[t];
    size_t need = (s->nbytes + 63) & ~(size_t)63, off = 0;
    bool moved = true;
    while (moved) { /* lowest offset that overlaps no live slot */
      moved = false;
      for (int u = first_temp; u < t; u++) {
        const cpu_slot *o = &w->slots[u];
        if (o->last < s->first || s->last < o->first) continue; /* disjoint lifetimes */
        size_t oend = o->offset + ((o->nbytes + 63) & ~(size_t)63);
        if (off < oend && o->offset < off + need) {
          off = oend;
          moved = true;
        }
      }
    }
    s->offset = off;
    if (off + need > arena) arena = off + need;
  }
  e->arena_bytes = arena;
}

/* Kernels, slots and the text of the JIT functions into fns (each kernel's
 * module, with the uniform functions it calls, is made by cpu_backend.c). */
int lt__cpu_lower(const lt_graph *g, lt_executable *e, cpu_fntab *fns) {
  lw w;
  memset(&w, 0, sizeof w);
  w.g = g;
  w.e = e;
  int rc = LT_ENOMEM;
  int n = g->nnodes;
  w.kind = lt__calloc((size_t)n);
  w.view = lt__calloc((size_t)n * sizeof *w.view);
  w.mat = lt__calloc((size_t)n * sizeof *w.mat);
  w.own_slot = lt__malloc((size_t)n * sizeof *w.own_slot);
  w.group = lt__malloc((size_t)n * sizeof *w.group);
  w.gnext = lt__malloc((size_t)n * sizeof *w.gnext);
  w.ghead = lt__malloc((size_t)n * sizeof *w.ghead);
  int *alias = lt__malloc((size_t)g->nroots * sizeof *alias + 1);
  if (!w.kind || !w.view || !w.mat || !w.own_slot || !w.group || !w.gnext || !w.ghead || !alias)
    goto out;
  for (int r = 0; r < g->nroots; r++) alias[r] = -1;
  w.alias = alias;
  w.cg = (cg_ctx){g, w.kind, w.view, fns};
  mark_materialized(&w);
  if ((rc = plan_groups(&w)) != LT_OK) goto out;
  lt__cpu_fntab_reset(fns);
  if ((rc = lower_once(&w)) != LT_OK) goto out;
  if (g->ndonors) {
    pair_donors(&w, alias);
    bool any = false;
    for (int r = 0; r < g->nroots; r++) any |= alias[r] >= 0;
    if (any) { /* again, with those roots in their parameters' slots */
      lw_free(&w);
      lt__cpu_fntab_reset(fns);
      w.nfns = 0;
      if ((rc = lower_once(&w)) != LT_OK) goto out;
    }
  }
  if (fns->oom || fns->text.oom) {
    rc = LT_ENOMEM;
    goto out;
  }
  if (fns->misordered || fns->n != w.nfns) { /* each loop kernel made its function, in turn */
    rc =
        lt__err(LT_ECOMPILE, "cpu: lowering made %d functions for %d loop kernels", fns->n, w.nfns);
    goto out;
  }
  plan_buffers(&w);
  if (getenv("LT_CPU_DEBUG")) {
    for (int j = 0; j < w.nk; j++)
      fprintf(stderr, "kernel %d kind %d out %d (of %d) extent %lld reads %d\n", j, w.k[j].kind,
              w.k[j].out_slot, w.info[j].nouts, (long long)w.k[j].extent, w.info[j].nreads);
    for (int s = 0; s < w.nslots; s++)
      fprintf(stderr, "slot %d bytes %zu off %zu life %d..%d\n", s, w.slots[s].nbytes,
              w.slots[s].offset, w.slots[s].first, w.slots[s].last);
  }
  memcpy(e->alias, alias, (size_t)g->nroots * sizeof *alias);
  lt__free(w.info, (size_t)w.capk * sizeof *w.info);
  w.info = NULL;
  e->nslots = w.nslots;
  e->slots_cap = w.capslots;
  e->slots = w.slots;
  e->nkernels = w.nk;
  e->kernels_cap = w.capk;
  e->kernels = w.k;
  w.slots = NULL;
  w.k = NULL;
  w.capslots = w.capk = 0;
  rc = LT_OK;
out:
  lw_free(&w);
  lt__free(w.kind, (size_t)n);
  lt__free(w.view, (size_t)n * sizeof *w.view);
  lt__free(w.mat, (size_t)n * sizeof *w.mat);
  lt__free(w.own_slot, (size_t)n * sizeof *w.own_slot);
  lt__free(w.group, (size_t)n * sizeof *w.group);
  lt__free(w.gnext, (size_t)n * sizeof *w.gnext);
  lt__free(w.ghead, (size_t)n * sizeof *w.ghead);
  lt__free(alias, (size_t)g->nroots * sizeof *alias + 1);
  return rc;
}

void lt__cpu_kernels_free(cpu_kernel *k, int n) { free_kernels(k, n); }
