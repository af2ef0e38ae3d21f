/* Sharding (lazytensor_dist.h, docs/SCALE_OUT.md "Sharding"): SPMD at trace
 * time. Every replica runs the same program; a sharded tensor's node and
 * buffer are its local chunk (t->shape), its sharding (axis, world size) and
 * global shape sit beside them (lt_tensor.h). The builders that know
 * shardings (elementwise, matmul, sum/mean/max/min, assign) call the
 * helpers below, which reason on global shapes, bring the operands to
 * compatible local values through the SPMD collectives (shard,
 * spmd_all_gather, spmd_all_reduce, spmd_copy) and let the builder make
 * local nodes; every other builder refuses a sharded operand
 * (lt__check_operands).
 *
 * Graph identity: every rank traces the same nodes; the rank enters only at
 * run time, inside the collective runner (backend/coll_instr.c), so one
 * executable serves all replicas. */
#include <string.h>

#include "lazytensor_collective.h"
#include "lt_ops.h"
#include "../core/lt_alloc.h"
#include "../core/lt_collective.h"

/* ---- nodes ------------------------------------------------------------------------------ */

static lt_node *spmd_node(lt_op op, lt_node *x, const int64_t *shape, const int64_t *attrs,
                          int nattrs) {
  if (!x) return NULL;
  return lt__node_make(op, (lt_dtype)x->dtype, shape, x->ndim, &x, 1, attrs, nattrs, 0.0);
}

/* chunk `rank` of x along axis, x split in n */
static lt_node *shard_node(lt_node *x, int axis, int n) {
  if (!x) return NULL;
  int64_t shape[LT_MAX_DIMS], attrs[2] = {axis, n};
  memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
  shape[axis] /= n;
  return spmd_node(LT_OP_SHARD, x, shape, attrs, 2);
}

static lt_node *gather_node(lt_node *x, int axis, int n) {
  if (!x) return NULL;
  int64_t shape[LT_MAX_DIMS], attrs[2] = {axis, n};
  memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
  shape[axis] *= n;
  return spmd_node(LT_OP_SPMD_ALL_GATHER, x, shape, attrs, 2);
}

static lt_node *reduce_node(lt_node *x, int redop, int n) {
  if (!x) return NULL;
  int64_t attrs[2] = {redop, n};
  return spmd_node(LT_OP_SPMD_ALL_REDUCE, x, x->shape, attrs, 2);
}

/* Whether a replicated t may need a gradient: then its use by rank-dependent
 * work goes through spmd_copy, whose adjoint sums the ranks' parts. */
static bool wants_grad(lt_tensor *t) {
  if (!lt__is_float((lt_dtype)t->dtype) || lt_get_no_grad()) return false;
  if (t->requires_grad) return true;
  const lt_node *n = t->ir ? t->ir : t->data_node; /* eager values keep their history there */
  return n && lt__carries_grad(n);
}

/* A tensor over node that no scope owns (a temporary of one builder). */
static lt_tensor *temp(lt_device dev, lt_node *node, int axis, int n) {
  lt_tensor *t = lt__tensor_new_unscoped(dev, node);
  if (t) lt__tensor_set_sharding(t, axis, n);
  return t;
}

/* ---- the resolving context of one builder ------------------------------------------------ */

static int keep(lt_shard_ctx *c, lt_tensor *t) {
  if (!t) return lt_last_status() ? lt_last_status() : LT_ENOMEM;
  if (c->ntmp == (int)(sizeof c->tmp / sizeof c->tmp[0])) { /* not reached: 2 per operand */
    lt_release(t);
    return lt__err(LT_EINVAL, "sharding: too many temporaries");
  }
  c->tmp[c->ntmp++] = t;
  return LT_OK;
}

static void ctx_release(lt_shard_ctx *c) {
  for (int i = 0; i < c->ntmp; i++) lt_release(c->tmp[i]);
  c->ntmp = 0;
  if (c->aware) lt__shard_aware_pop();
  c->aware = false;
}

static void ctx_begin(lt_shard_ctx *c) {
  c->aware = true;
  lt__shard_aware_push();
}

lt_tensor *lt__shard_finish(lt_shard_ctx *c, lt_tensor *r) {
  bool set = c->aware && c->n > 0;
  ctx_release(c);
  if (r && set) lt__tensor_set_sharding(r, c->axis, c->n);
  return r;
}

/* t replicated, as a temporary (spmd_all_gather of its chunks). */
static int gathered(lt_shard_ctx *c, lt_tensor **t) {
  lt_tensor *x = *t;
  int rc =
      keep(c, temp(x->dev, gather_node(lt__ir_as(x, (lt_dtype)x->dtype), x->shard_axis, x->shard_n),
                   -1, 0));
  if (rc == LT_OK) *t = c->tmp[c->ntmp - 1];
  return rc;
}

/* Replicated t's chunk along axis, as a temporary sharded there. */
static int sharded(lt_shard_ctx *c, lt_tensor **t, int axis, int n) {
  lt_tensor *x = *t;
  int rc = keep(c, temp(x->dev, shard_node(lt__ir_as(x, (lt_dtype)x->dtype), axis, n), axis, n));
  if (rc == LT_OK) *t = c->tmp[c->ntmp - 1];
  return rc;
}

/* Replicated t used as it is by rank-dependent work: spmd_copy when it may
 * need a gradient. */
static int fanned(lt_shard_ctx *c, lt_tensor **t, int n) {
  lt_tensor *x = *t;
  if (!wants_grad(x)) return LT_OK;
  int64_t attrs[1] = {n};
  lt_node *v = lt__ir_as(x, (lt_dtype)x->dtype);
  int rc =
      keep(c, temp(x->dev, v ? spmd_node(LT_OP_SPMD_COPY, v, v->shape, attrs, 1) : NULL, -1, 0));
  if (rc == LT_OK) *t = c->tmp[c->ntmp - 1];
  return rc;
}

/* The world size shared by the sharded operands; LT_EINVAL when they differ. */
static int world_n(const char *fn, lt_tensor *const *ts, int k, int *n) {
  *n = 0;
  for (int i = 0; i < k; i++) {
    if (!ts[i] || !ts[i]->shard_n) continue;
    if (*n && *n != ts[i]->shard_n)
      return lt__err(LT_EINVAL, "%s: operands are sharded over worlds of %d and %d replicas", fn,
                     *n, (int)ts[i]->shard_n);
    *n = ts[i]->shard_n;
  }
  return LT_OK;
}

static bool needs_resolving(lt_tensor *const *ts, int k) {
  if (lt__shard_aware_depth() > 0) return false;
  for (int i = 0; i < k; i++)
    if (!ts[i]) return false; /* the builder reports it */
  for (int i = 0; i < k; i++)
    if (ts[i]->shard_n) return true;
  return false;
}

int lt__shard_elementwise(const char *fn, lt_tensor **ts, int k, lt_shard_ctx *c) {
  memset(c, 0, sizeof *c);
  if (!needs_resolving(ts, k)) return LT_OK;
  int n, rc = world_n(fn, ts, k, &n);
  if (rc != LT_OK) return rc;
  /* The global shapes must broadcast: the error names them, not the chunks. */
  int64_t shape[LT_MAX_DIMS];
  int outnd = 0;
  for (int i = 0; i < k; i++) {
    int64_t s[LT_MAX_DIMS];
    int snd = 0;
    rc = lt__broadcast(fn, shape, outnd, lt_shape(ts[i]), ts[i]->ndim, s, &snd);
    if (rc != LT_OK) return rc;
    memcpy(shape, s, sizeof s);
    outnd = snd;
  }
  int target = -1; /* the sharded axis of the result, in its coordinates */
  for (int i = 0; i < k && target < 0; i++)
    if (ts[i]->shard_n) target = ts[i]->shard_axis + outnd - ts[i]->ndim;
  for (int i = 0; i < k && rc == LT_OK; i++) {
    int off = outnd - ts[i]->ndim;
    if (ts[i]->shard_n && ts[i]->shard_axis + off == target) continue;
    if (ts[i]->shard_n) rc = gathered(c, &ts[i]);
    if (rc != LT_OK) break;
    int pos = target - off;
    if (pos >= 0 && ts[i]->shape[pos] > 1)
      rc = sharded(c, &ts[i], pos, n);
    else
      rc = fanned(c, &ts[i], n);
  }
  if (rc != LT_OK) {
    ctx_release(c);
    return rc;
  }
  c->axis = target;
  c->n = n;
  ctx_begin(c);
  return LT_OK;
}

/* The replicated spmd_all_reduce(redop: 0 sum, 1 mean) of the ranks' partial
 * values p, which it replaces (p was the last tensor the builder made). */
static lt_tensor *summed(lt_tensor *p, int redop, int n) {
  lt_device dev = p->dev;
  lt_node *x = reduce_node(lt__ir_as(p, (lt_dtype)p->dtype), redop, n);
  lt__tensor_discard(p); /* before the result enters the scope after it */
  return lt__wrap(dev, x);
}

/* ---- matmul ----------------------------------------------------------------------------- */

lt_tensor *lt__shard_matmul(lt_tensor *a, lt_tensor *b) {
  static const char *fn = "lt_matmul";
  lt_tensor *ts[2] = {a, b};
  lt_shard_ctx c;
  memset(&c, 0, sizeof c);
  int n, rc = world_n(fn, ts, 2, &n);
  if (rc != LT_OK) return NULL;
  int sa = a->shard_n ? a->shard_axis : -1, sb = b->shard_n ? b->shard_axis : -1;
  if (a->ndim != 2 || b->ndim != 2) {
    /* batched and 1-d operands: replicated first */
    if (sa >= 0) rc = gathered(&c, &ts[0]);
    if (rc == LT_OK && sb >= 0) rc = gathered(&c, &ts[1]);
    if (rc != LT_OK) return lt__shard_finish(&c, NULL);
    ctx_begin(&c);
    return lt__shard_finish(&c, lt_matmul(ts[0], ts[1]));
  }
  if (lt_shape(a)[1] != lt_shape(b)[0]) {
    char s1[96], s2[96];
    lt__err(LT_ESHAPE, "%s: shapes %s and %s do not fit (global shapes of sharded operands)", fn,
            lt__shape_str(lt_shape(a), 2, s1, sizeof s1),
            lt__shape_str(lt_shape(b), 2, s2, sizeof s2));
    return NULL;
  }
  /* Bring (sa, sb) to one of (R,1), (0,R), (1,0), (R,R). */
  if (sa == 0 && sb >= 0) { /* (0,0), (0,1): b replicated */
    rc = gathered(&c, &ts[1]);
    sb = -1;
  } else if (sa == 1 && sb == 1) { /* a replicated */
    rc = gathered(&c, &ts[0]);
    sa = -1;
  }
  if (rc == LT_OK && sa < 0 && sb == 0) { /* row-parallel with a split here */
    rc = sharded(&c, &ts[0], 1, n);
    sa = 1;
  } else if (rc == LT_OK && sa == 1 && sb < 0) {
    rc = sharded(&c, &ts[1], 0, n);
    sb = 0;
  }
  if (rc == LT_OK && sa < 0 && sb == 1) rc = fanned(&c, &ts[0], n); /* column-parallel */
  if (rc == LT_OK && sa == 0 && sb < 0) rc = fanned(&c, &ts[1], n);
  if (rc != LT_OK) return lt__shard_finish(&c, NULL);
  ctx_begin(&c);
  lt_tensor *r = lt_matmul(ts[0], ts[1]);
  if (r && sa == 1 && sb == 0) {
    r = summed(r, 0, n); /* each rank holds a partial sum over its K chunk */
  } else if (r) {
    c.axis = sb == 1 ? 1 : sa == 0 ? 0 : -1;
    c.n = c.axis >= 0 ? n : 0;
  }
  return lt__shard_finish(&c, r);
}

/* ---- reductions ------------------------------------------------------------------------- */

lt_tensor *lt__shard_reduce(const char *fn, lt_op op, lt_tensor *a, const int *axes, int naxes,
                            bool keepdim, lt_shard_reduce_fn build) {
  lt_shard_ctx c;
  memset(&c, 0, sizeof c);
  if (naxes < 0 || (naxes > 0 && !axes)) {
    lt__err(LT_EINVAL, "%s: bad axes argument (axes %s, naxes %d)", fn, axes ? "given" : "NULL",
            naxes);
    return NULL;
  }
  int64_t mask = 0;
  for (int i = 0; i < naxes; i++) {
    int ax;
    if (lt__norm_axis(fn, axes[i], a->ndim, &ax) != LT_OK) return NULL;
    mask |= (int64_t)1 << ax;
  }
  if (naxes == 0) mask = ((int64_t)1 << a->ndim) - 1;
  int axis = a->shard_axis, n = a->shard_n;
  if (!(mask & ((int64_t)1 << axis))) {
    /* the sharded axis survives: a local reduction, renumbered */
    int below = 0;
    for (int d = 0; d < axis; d++) below += (int)((mask >> d) & 1);
    c.axis = keepdim ? axis : axis - below;
    c.n = n;
    ctx_begin(&c);
    return lt__shard_finish(&c, build(fn, op, a, axes, naxes, keepdim));
  }
  if (op != LT_OP_SUM && op != LT_OP_MEAN) {
    /* max, min and the others over the sharded axis: on the whole value */
    lt_tensor *t = a;
    if (gathered(&c, &t) != LT_OK) return lt__shard_finish(&c, NULL);
    ctx_begin(&c);
    return lt__shard_finish(&c, build(fn, op, t, axes, naxes, keepdim));
  }
  /* sum: of the chunks' sums; mean: of the chunks' means (equal chunks) */
  ctx_begin(&c);
  lt_tensor *p = build(fn, op, a, axes, naxes, keepdim);
  return lt__shard_finish(&c, p ? summed(p, op == LT_OP_SUM ? 0 : 1, n) : NULL);
}

/* ---- one-axis ops of the operand's shape (softmax, log_softmax) ---------------------------- */

int lt__shard_one_axis(const char *fn, lt_tensor **a, int axis, lt_shard_ctx *c) {
  memset(c, 0, sizeof *c);
  if (!needs_resolving(a, 1)) return LT_OK;
  int ax;
  if (lt__norm_axis(fn, axis, (*a)->ndim, &ax) != LT_OK) return lt_last_status();
  if (ax == (*a)->shard_axis) {
    /* along the split axis: on the whole value */
    int rc = gathered(c, a);
    if (rc != LT_OK) {
      ctx_release(c);
      return rc;
    }
  } else {
    c->axis = (*a)->shard_axis; /* each row along ax lies in one chunk */
    c->n = (*a)->shard_n;
  }
  ctx_begin(c);
  return LT_OK;
}

/* ---- shape ops that move the split axis (permute, transpose, reshape) ----------------------- */

int lt__shard_layout(lt_tensor **a, int out_axis, lt_shard_ctx *c) {
  memset(c, 0, sizeof *c);
  if (!needs_resolving(a, 1)) return LT_OK;
  if (out_axis < 0) {
    int rc = gathered(c, a);
    if (rc != LT_OK) {
      ctx_release(c);
      return rc;
    }
  } else {
    c->axis = out_axis;
    c->n = (*a)->shard_n;
  }
  ctx_begin(c);
  return LT_OK;
}

int lt__shard_reshape_axis(const lt_tensor *a, const int64_t *shape, int ndim, int64_t *local) {
  if (!a || !a->shard_n || ndim < 1 || ndim > LT_MAX_DIMS || !shape) return -1;
  int64_t total = lt__numel(a->gshape, a->ndim), known = 1, h[LT_MAX_DIMS];
  int infer = -1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1 && infer < 0) {
      infer = i;
      continue;
    }
    if (shape[i] <= 0) return -1; /* bad, or empty: the whole value reports or handles it */
    known *= shape[i];
    if (known > total) return -1;
  }
  for (int i = 0; i < ndim; i++) h[i] = i == infer ? (known ? total / known : 0) : shape[i];
  if (lt__numel(h, ndim) != total || total == 0) return -1;
  /* Chunk r of the split axis s is, inside each index of the axes before s,
   * the r-th n-th of the block of the axes from s on. In the new shape that
   * block starts at the axis t whose preceding axes hold the same number of
   * elements, and its r-th n-th is the r-th chunk of axis t when n divides
   * h[t]: then the local reshape is the chunk of the global one. */
  int64_t before = 1, pre = 1;
  for (int d = 0; d < a->shard_axis; d++) before *= a->gshape[d];
  for (int t = 0; t < ndim && pre <= before; pre *= h[t], t++) {
    if (pre != before || h[t] % a->shard_n) continue;
    for (int i = 0; i < ndim; i++) local[i] = i == t ? h[i] / a->shard_n : h[i];
    return t;
  }
  return -1;
}

/* ---- assign ----------------------------------------------------------------------------- */

int lt__shard_assign(lt_tensor *dst, lt_tensor *src) {
  static const char *fn = "lt_assign";
  lt_shard_ctx c;
  memset(&c, 0, sizeof c);
  lt_tensor *ts[2] = {dst, src};
  int n, rc = world_n(fn, ts, 2, &n);
  if (rc != LT_OK) return rc;
  if (!lt__broadcastable(lt_shape(src), src->ndim, lt_shape(dst), dst->ndim)) {
    char a[128], b[128];
    return lt__err(LT_ESHAPE, "%s: source shape %s does not broadcast to %s", fn,
                   lt__shape_str(lt_shape(src), src->ndim, a, sizeof a),
                   lt__shape_str(lt_shape(dst), dst->ndim, b, sizeof b));
  }
  /* dst keeps its sharding (its identity): src is brought to it */
  lt_tensor *s = src;
  int off = dst->ndim - src->ndim;
  if (s->shard_n && (!dst->shard_n || s->shard_axis + off != dst->shard_axis))
    rc = gathered(&c, &s);
  if (rc == LT_OK && dst->shard_n && !s->shard_n) {
    int pos = dst->shard_axis - off;
    if (pos >= 0 && s->shape[pos] > 1) rc = sharded(&c, &s, pos, n);
  }
  if (rc == LT_OK) {
    ctx_begin(&c);
    rc = lt_assign(dst, s);
  }
  lt__shard_finish(&c, NULL);
  return rc;
}

lt_tensor *lt__shard_chunk(lt_tensor *x, int axis, int n) {
  if (!x) return NULL;
  if (axis < 0 || axis >= x->ndim || n <= 0 || x->shape[axis] % n != 0) {
    lt__err(LT_ESHAPE, "shard chunk: axis %d of a %d-d tensor does not split in %d", axis,
            (int)x->ndim, n);
    return NULL;
  }
  return lt__wrap(x->dev, shard_node(lt__ir_as(x, (lt_dtype)x->dtype), axis, n));
}

/* t's host data (not uploaded yet) cut to chunk `rank` of n along ax: the
 * tensor's value becomes its chunk as data of its own, so that each replica
 * uploads only its part instead of the whole value (the reference feeds
 * each device its shard). The graph is the same leaf on every replica, so
 * the key is too. */
static int keep_host_chunk(const char *fn, lt_tensor *t, int ax, int n, int rank) {
  size_t esz = lt_dtype_size((lt_dtype)t->dtype);
  int64_t outer = 1, rows = t->shape[ax] / n;
  size_t inner = esz;
  for (int d = 0; d < ax; d++) outer *= t->shape[d];
  for (int d = ax + 1; d < t->ndim; d++) inner *= (size_t)t->shape[d];
  size_t run = (size_t)rows * inner, bytes = (size_t)outer * run;
  unsigned char *chunk = lt__malloc(bytes ? bytes : 1);
  if (!chunk) return lt__err(LT_ENOMEM, "%s: out of memory", fn);
  const unsigned char *all = t->host;
  for (int64_t o = 0; o < outer; o++)
    memcpy(chunk + (size_t)o * run,
           all + ((size_t)o * (size_t)t->shape[ax] + (size_t)rank * (size_t)rows) * inner, run);
  lt__free(t->host, t->host_bytes);
  t->host = chunk;
  t->host_bytes = bytes;
  t->shape[ax] = rows;
  lt__tensor_set_sharding(t, ax, n);
  return LT_OK;
}

int lt__axis_divides(const char *fn, const char *what, const lt_tensor *t, int ax, int n) {
  if (t->shape[ax] % n == 0) return LT_OK;
  char s[96];
  return lt__err(LT_ESHAPE, "%s: %s %d of %s does not divide into %d replicas", fn, what, ax,
                 lt__shape_str(t->shape, t->ndim, s, sizeof s), n);
}

/* ---- public ----------------------------------------------------------------------------- */

int lt_mark_sharding(lt_tensor *t, const lt_world *mesh, int axis) {
  static const char *fn = "lt_mark_sharding";
  if (!t || !mesh) return lt__err(LT_EINVAL, "%s: %s is NULL", fn, t ? "mesh" : "tensor");
  int n = lt_world_size(mesh), on = 0;
  for (int r = 0; r < n && !on; r++) on = lt__device_equal(lt_world_device(mesh, r), t->dev);
  if (!on) {
    char d[32];
    lt_device_str(t->dev, d, sizeof d);
    return lt__err(LT_EDEVICE, "%s: the tensor's device %s is not one of the mesh's", fn, d);
  }
  if (axis == -1 && t->ndim == 0) {
    if (t->shard_n) return lt__err(LT_EINVAL, "%s: the tensor is sharded already", fn);
    return LT_OK; /* replicated already */
  }
  int ax;
  if (t->ndim == 0)
    return lt__err(LT_ESHAPE, "%s: a 0-d tensor has no axis to split (axis %d)", fn, axis);
  if (lt__norm_axis(fn, axis, t->ndim, &ax) != LT_OK) return lt_last_status();
  if (t->shard_n) {
    if (t->shard_n == n && t->shard_axis == ax) return LT_OK;
    return lt__err(LT_EINVAL,
                   "%s: the tensor is sharded already (axis %d over %d replicas); lt_unshard "
                   "it and mark the result",
                   fn, (int)t->shard_axis, (int)t->shard_n);
  }
  if (lt__axis_divides(fn, "axis", t, ax, n) != LT_OK) return LT_ESHAPE;
  lt_coll_binding b;
  if (t->host && !t->ir && !t->buf && lt__coll_binding(t->dev.index, &b) && b.size == n)
    return keep_host_chunk(fn, t, ax, n, b.rank);
  lt_node *x = shard_node(lt__ir_as(t, (lt_dtype)t->dtype), ax, n);
  if (!x) return lt_last_status() ? lt_last_status() : LT_ENOMEM;
  lt__tensor_set_ir(t, x); /* t keeps its identity, as lt_assign */
  t->shape[ax] /= n;       /* its value is now the chunk */
  lt__tensor_set_sharding(t, ax, n);
  return LT_OK;
}

int lt_sharding_axis(const lt_tensor *t) { return t && t->shard_n ? t->shard_axis : -1; }

lt_tensor *lt_unshard(lt_tensor *t) {
  if (!t) {
    lt__err_null("lt_unshard");
    return NULL;
  }
  lt_node *x = lt__ir_as(t, (lt_dtype)t->dtype);
  if (x && t->shard_n) x = gather_node(x, t->shard_axis, t->shard_n);
  return lt__wrap(t->dev, x);
}
