/* Loop nests as LLVM IR text (see cpu_codegen.h).
 *
 * A kernel has G loop dims (for an elementwise kernel, the root's dims; for a
 * reduction, the operand's dims reordered as kept then reduced). Every access
 * (each leaf view and the output) has a stride per loop dim. Adjacent dims
 * that every access walks contiguously are merged and size-1 dims dropped, so
 * an elementwise chain over same-shaped tensors becomes one flat loop.
 *
 * Functions are void f(ptr slots, i64 lo, i64 hi): the range is of flat
 * elements (a 1-d elementwise kernel) or of rows (outer iterations). Loop
 * variables and accumulators live in allocas that mem2reg promotes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_dtype.h"
#include "../../core/lt_error.h"
#include "../../core/lt_op_switch.h"
#include "../../core/lt_shape.h"
#include "cpu_codegen.h"
#include "cpu_ops.h"

#define MAX_LEAVES 512
#define OP(...) lt__ir_op(&k->ir, __VA_ARGS__)

typedef struct leaf {
  int slot;
  uint8_t dtype;
  int64_t offset;
  int64_t gs[LT_MAX_DIMS]; /* per loop dim */
  irv val;                 /* loaded value in the current pass */
  bool loaded;
  bool hoisted;  /* one element for the whole kernel: loaded once, at entry (val) */
  int8_t member; /* the output whose value first loads it */
  /* A uniform draw (RNG_UNIFORM node rng_node, fused): no slot; gs are the
   * strides of its element index k (row-major in its own shape) per loop
   * dim, so that collapsing loop dims keeps k affine in the loop variables. */
  bool rng;
  int rng_node;
} leaf;

typedef struct memo {
  int node;
  int8_t dm[LT_MAX_DIMS];
  irv v;
} memo;

/* Innermost loops with at least INTERLEAVE_MIN_OPS operations in their body
 * and a trip count that is a literal multiple of the vectors it takes ask the
 * vectorizer for several vectors per iteration (loop metadata): such a body
 * is one long dependency chain per element (a bf16 node rounds its result, a
 * chain of integer operations after each arithmetic one), and a single
 * vector's chain left the core waiting on latencies. Independent chains fill
 * it: the bf16 tanh-GELU backward (2048 x 512 elements, Zen 5, one thread)
 * took 3.1 ms with one vector per iteration, 2.1 with two, 1.5-1.65 with
 * four. Four where AVX-512's 32 vector registers hold them, else two (AVX2
 * has 16). Short bodies gained nothing, and a trip count that is not a
 * multiple of the vectors would leave a longer scalar remainder (the
 * vectorized epilogue is off: cpu_jit.c). */
#define INTERLEAVE_MIN_OPS 100
#define INTERLEAVE_LANES 16 /* f32 lanes of a vector, at the widest */

static int interleave_count(void) { return lt__cpu_isa()->avx512 ? 4 : 2; }

#define MAX_TRACKED_LOOPS 64

typedef struct kgen {
  const cg_ctx *c;
  /* the kernel's outputs: evaluated as expressions even when they are views */
  int nmem;
  int mem[CG_MAX_OUTS];
  int8_t cur; /* the output being evaluated */
  int G;
  int64_t S[LT_MAX_DIMS];
  int nleaves;
  leaf *leaves;
  int nmemo, capmemo;
  memo *memo;
  bool emit;
  cpu_ir ir;
  lt_strbuf body, allocas;
  int nloops;
  /* per loop (below MAX_TRACKED_LOOPS): the SSA counter and loop count at its
   * start, and whether its trip count is a literal multiple of the
   * interleaved vectors' lanes (see loop_end_by) */
  int loop_next[MAX_TRACKED_LOOPS], loop_inner[MAX_TRACKED_LOOPS];
  bool loop_whole[MAX_TRACKED_LOOPS];
  lt_strbuf meta; /* the loop metadata nodes the body refers to */
  /* collapsed dims */
  int nd, nk;
  int64_t D[LT_MAX_DIMS];
  int glast[LT_MAX_DIMS]; /* innermost loop dim of each collapsed dim */
  irv var[LT_MAX_DIMS];
  int64_t out_gs[LT_MAX_DIMS];
  bool pf_pass;           /* the next innermost reduced loop prefetches (pf_loop) */
  const cpu_view *pf_out; /* and this output with the operand (or NULL) */
  int err;
} kgen;

bool lt__cg_elementwise_ok(const lt_node *n) { return lt__ops_supported(n); }

bool lt__cg_reduce_ok(const lt_node *n) {
  if (lt__op_cpu_path(n->op) != LT_CPU_REDUCE || !lt__ops_node_dtypes_ok(n)) return false;
  if (n->noperands != 1 || n->nattrs < 1) return false;
  int dx = n->operands[0].node->dtype, dn = n->dtype;
  /* bf16: sums, products, max and min (in f32 or double, one rounding at the
   * end); logsumexp and softmax store and reread values in the operand's
   * dtype, which in bf16 would round twice, so they take the fallback */
  if (dx == LT_BF16 &&
      (n->op == LT_OP_LOGSUMEXP || n->op == LT_OP_SOFTMAX || n->op == LT_OP_LOG_SOFTMAX))
    return false;
  if (lt__ops_is_float(dn)) return dx == dn;
  return !lt__ops_is_float(dx) &&
         (n->op == LT_OP_SUM || n->op == LT_OP_PROD || n->op == LT_OP_MAX || n->op == LT_OP_MIN);
}

/* ---- expression traversal ---- */

/* The leaf of slot view v, or (v NULL) of uniform draw rng_node, accessed
 * with loop strides gs: found, or added in pass 1; -1 when there is none. */
static int leaf_find(kgen *k, const cpu_view *v, int rng_node, const int64_t *gs) {
  for (int i = 0; i < k->nleaves; i++) {
    leaf *l = &k->leaves[i];
    bool same = v ? !l->rng && l->slot == v->slot && l->dtype == v->dtype && l->offset == v->offset
                  : l->rng && l->rng_node == rng_node;
    if (same && memcmp(l->gs, gs, (size_t)k->G * sizeof *gs) == 0) return i;
  }
  if (k->emit || k->nleaves == MAX_LEAVES) return -1;
  leaf *l = &k->leaves[k->nleaves];
  memset(l, 0, sizeof *l);
  if (v) {
    l->slot = v->slot;
    l->dtype = v->dtype;
    l->offset = v->offset;
  } else {
    l->slot = -1;
    l->rng = true;
    l->rng_node = rng_node;
  }
  memcpy(l->gs, gs, (size_t)k->G * sizeof *gs);
  l->member = k->cur;
  return k->nleaves++;
}

/* Flat index base + sum of the current loop variables times their strides gs
 * (per loop dim; a collapsed dim steps by the stride of its innermost one). */
static irv loop_index(kgen *k, int64_t base, const int64_t *gs) {
  irv idx = lt__ir_int(base);
  for (int c = 0; c < k->nd; c++) {
    int64_t s = gs[k->glast[c]];
    if (!s) continue;
    irv t = OP("mul i64 %s, %lld", k->var[c].s, (long long)s);
    idx = OP("add i64 %s, %s", idx.s, t.s);
  }
  return idx;
}

/* Flat index of leaf l at the current loop variables. */
static irv leaf_index(kgen *k, const leaf *l) { return loop_index(k, l->offset, l->gs); }

/* A fused uniform draw (RNG_UNIFORM node n, index `node`) at dm: element k
 * of its own row-major shape, k from the loop variables like a contiguous
 * leaf of that shape. */
static irv rng_value(kgen *k, const lt_node *n, int node, const int8_t *dm, irv seed) {
  irv none = {{0}};
  int64_t gs[LT_MAX_DIMS] = {0}, s = 1;
  for (int e = n->ndim - 1; e >= 0; e--) {
    if (dm[e] >= 0) gs[dm[e]] += s;
    s *= n->shape[e];
  }
  int li = leaf_find(k, NULL, node, gs);
  if (li < 0) {
    k->err = lt__err(LT_ECOMPILE, "cpu: a kernel reads more than %d views", MAX_LEAVES);
    return none;
  }
  if (!k->emit) return none;
  return lt__ops_uniform(&k->ir, seed, leaf_index(k, &k->leaves[li]), n->dtype);
}

static irv leaf_load(kgen *k, leaf *l) {
  if (l->loaded || l->hoisted) return l->val;
  irv idx = leaf_index(k, l);
  const char *t = lt__ops_type(l->dtype);
  irv p = OP("getelementptr inbounds %s, ptr %%p%d, i64 %s", t, l->slot, idx.s);
  l->val = OP("load %s, ptr %s", t, p.s);
  if (l->dtype == LT_BF16) l->val = lt__ops_bf16_widen(&k->ir, l->val);
  l->loaded = true;
  return l->val;
}

static memo *memo_find(kgen *k, int node, const int8_t *dm, int nd) {
  for (int i = k->nmemo - 1; i >= 0; i--)
    if (k->memo[i].node == node && memcmp(k->memo[i].dm, dm, (size_t)nd) == 0) return &k->memo[i];
  return NULL;
}

static void memo_add(kgen *k, int node, const int8_t *dm, int nd, irv v) {
  if (k->nmemo == k->capmemo) {
    int nc = k->capmemo ? 2 * k->capmemo : 64;
    memo *m = lt__realloc(k->memo, (size_t)k->capmemo * sizeof *m, (size_t)nc * sizeof *m);
    if (!m) {
      k->err = LT_ENOMEM;
      return;
    }
    k->memo = m;
    k->capmemo = nc;
  }
  memo *m = &k->memo[k->nmemo++];
  memset(m, 0, sizeof *m);
  m->node = node;
  memcpy(m->dm, dm, (size_t)nd);
  m->v = v;
}

static bool is_member(const kgen *k, int node) {
  for (int i = 0; i < k->nmem; i++)
    if (k->mem[i] == node) return true;
  return false;
}

static irv visit(kgen *k, int node, const int8_t *dm) {
  irv none = {{0}};
  if (k->err) return none;
  const lt_node *n = k->c->g->nodes[node];
  memo *m = memo_find(k, node, dm, n->ndim);
  if (m) return m->v;
  irv v = none;
  if (k->c->kind[node] == CG_VIEW && !is_member(k, node)) {
    const cpu_view *vw = &k->c->view[node];
    int64_t gs[LT_MAX_DIMS] = {0};
    for (int e = 0; e < n->ndim; e++)
      if (dm[e] >= 0) gs[dm[e]] += vw->strides[e];
    int li = leaf_find(k, vw, -1, gs);
    if (li < 0) {
      k->err = lt__err(LT_ECOMPILE, "cpu: a kernel reads more than %d views", MAX_LEAVES);
      return none;
    }
    if (k->emit) v = leaf_load(k, &k->leaves[li]);
  } else {
    irv args[3];
    int dts[3];
    if (n->noperands > 3) {
      k->err = lt__err(LT_ECOMPILE, "cpu: op %s has %d operands", lt__op_name(n->op), n->noperands);
      return none;
    }
    for (int j = 0; j < n->noperands; j++) {
      const lt_node *y = n->operands[j].node;
      int8_t dy[LT_MAX_DIMS];
      for (int e = 0; e < y->ndim; e++) dy[e] = y->shape[e] == 1 ? -1 : dm[e + n->ndim - y->ndim];
      args[j] = visit(k, y->order, dy);
      dts[j] = y->dtype;
    }
    if (k->err) return none;
    if (n->op == LT_OP_RNG_UNIFORM)
      v = rng_value(k, n, node, dm, args[0]);
    else if (k->emit)
      v = lt__ops_emit(&k->ir, n, args, dts);
    if (k->ir.err) k->err = k->ir.err; /* an op without a case: named, kernel refused */
    if (k->err) return none;
  }
  memo_add(k, node, dm, n->ndim, v);
  return v;
}

/* Resets the per-pass memo (values are only valid in the block they were made). */
static void pass_reset(kgen *k) {
  k->nmemo = 0;
  for (int i = 0; i < k->nleaves; i++) k->leaves[i].loaded = false;
}

/* Leaves that read one element for the whole kernel (every loop stride 0)
 * are loaded once at entry, unless the kernel writes their slot: fewer
 * pointers in the loop leave the vectorizer fewer runtime alias checks. Not
 * when the loops are empty (the slot may then hold no element). */
static void hoist_scalars(kgen *k, const cpu_view *outs, int nouts) {
  for (int j = 0; j < k->G; j++)
    if (k->S[j] == 0) return;
  for (int i = 0; i < k->nleaves; i++) {
    leaf *l = &k->leaves[i];
    bool zero = !l->rng, written = false;
    for (int j = 0; j < k->G; j++) zero &= l->gs[j] == 0;
    for (int o = 0; o < nouts; o++) written |= outs[o].slot == l->slot;
    if (!zero || written) continue;
    l->hoisted = true;
    snprintf(l->val.s, sizeof l->val.s, "%%h%d", i);
  }
}

/* ---- collapse ---- */

static void collapse(kgen *k, int nkept) {
  k->nd = k->nk = 0;
  int prev_part = -1;
  for (int j = 0; j < k->G; j++) {
    if (k->S[j] == 1) continue;
    int part = j < nkept ? 0 : 1;
    bool merge = k->nd > 0 && part == prev_part;
    if (merge) {
      int pj = k->glast[k->nd - 1];
      if (k->out_gs[pj] != k->out_gs[j] * k->S[j]) merge = false;
      for (int l = 0; l < k->nleaves && merge; l++)
        if (k->leaves[l].gs[pj] != k->leaves[l].gs[j] * k->S[j]) merge = false;
    }
    if (merge) {
      k->D[k->nd - 1] *= k->S[j];
      k->glast[k->nd - 1] = j;
    } else {
      k->D[k->nd] = k->S[j];
      k->glast[k->nd] = j;
      k->nd++;
      if (part == 0) k->nk++;
    }
    prev_part = part;
  }
}

/* ---- loops and emission helpers ---- */

/* Whether v is the literal integer x (loop bounds known at compile time). */
static bool literal_int(irv v, int64_t *x) {
  char *end;
  long long n = strtoll(v.s, &end, 10);
  if (end == v.s || *end) return false;
  *x = n;
  return true;
}

static irv loop_begin(kgen *k, irv lo, irv hi, int *id) {
  *id = k->nloops++;
  if (*id < MAX_TRACKED_LOOPS) {
    int64_t l, h;
    k->loop_next[*id] = k->ir.next;
    k->loop_inner[*id] = k->nloops;
    k->loop_whole[*id] = literal_int(lo, &l) && literal_int(hi, &h) && l == 0 && h > 0 &&
                         h % (INTERLEAVE_LANES * interleave_count()) == 0;
  }
  lt__sb_printf(&k->allocas, "  %%i%d = alloca i64\n", *id);
  lt__sb_printf(&k->body, "  store i64 %s, ptr %%i%d\n  br label %%L%d.c\nL%d.c:\n", lo.s, *id, *id,
                *id);
  irv v = OP("load i64, ptr %%i%d", *id);
  irv c = OP("icmp slt i64 %s, %s", v.s, hi.s);
  lt__sb_printf(&k->body, "  br i1 %s, label %%L%d.b, label %%L%d.e\nL%d.b:\n", c.s, *id, *id, *id);
  return v;
}

static void loop_end_by(kgen *k, irv var, irv step, int id) {
  irv n = OP("add i64 %s, %s", var.s, step.s);
  int64_t by;
  bool interleave = id < MAX_TRACKED_LOOPS && k->loop_whole[id] &&
                    k->loop_inner[id] == k->nloops && /* no loop inside */
                    literal_int(step, &by) && by == 1 &&
                    k->ir.next - k->loop_next[id] >= INTERLEAVE_MIN_OPS;
  lt__sb_printf(&k->body, "  store i64 %s, ptr %%i%d\n  br label %%L%d.c", n.s, id, id);
  if (interleave) {
    /* a distinct loop id per loop, numbered after the loop */
    lt__sb_printf(&k->body, ", !llvm.loop !%d", 2 * id);
    lt__sb_printf(&k->meta,
                  "!%d = distinct !{!%d, !%d}\n!%d = !{!\"llvm.loop.interleave.count\", i32 %d}\n",
                  2 * id, 2 * id, 2 * id + 1, 2 * id + 1, interleave_count());
  }
  lt__sb_printf(&k->body, "\nL%d.e:\n", id);
}

static void loop_end(kgen *k, irv var, int id) { loop_end_by(k, var, lt__ir_int(1), id); }

/* Unravels outer index o over the kept collapsed dims into k->var[0..nk). */
static void unravel_outer(kgen *k, irv o) {
  for (int c = k->nk - 1; c >= 0; c--) {
    if (c == 0) {
      k->var[0] = o;
      break;
    }
    k->var[c] = OP("urem i64 %s, %lld", o.s, (long long)k->D[c]);
    o = OP("udiv i64 %s, %lld", o.s, (long long)k->D[c]);
  }
}

/* Flat index of the output element at the current loop variables. */
static irv out_index(kgen *k) { return loop_index(k, 0, k->out_gs); }

/* A bf16 value is stored as its high half: every bf16 value a loop holds is
 * rounded already (a node's result, a constant, a reduction's end) or a
 * widened load (a copy then keeps the bits, NaN payloads included). */
static void store_out(kgen *k, const cpu_view *out, irv idx, irv v) {
  const char *t = lt__ops_type(out->dtype);
  if (out->dtype == LT_BF16) v = lt__ops_bf16_bits(&k->ir, v);
  irv p = OP("getelementptr inbounds %s, ptr %%p%d, i64 %s", t, out->slot, idx.s);
  lt__sb_printf(&k->body, "  store %s %s, ptr %s\n", t, v.s, p.s);
}

typedef struct acc {
  int id;
  const char *t;
} acc;

static acc acc_new(kgen *k, const char *t, irv init) {
  acc a = {k->nloops++, t};
  lt__sb_printf(&k->allocas, "  %%a%d = alloca %s\n", a.id, t);
  lt__sb_printf(&k->body, "  store %s %s, ptr %%a%d\n", t, init.s, a.id);
  return a;
}
static irv acc_get(kgen *k, acc a) { return OP("load %s, ptr %%a%d", a.t, a.id); }
static void acc_set(kgen *k, acc a, irv v) {
  lt__sb_printf(&k->body, "  store %s %s, ptr %%a%d\n", a.t, v.s, a.id);
}

typedef void (*inner_fn)(kgen *k, void *ud);

/* ---- loops that stream memory: blocks with software prefetch ----
 * A thread streaming memory has only as many loads in flight as its reorder
 * window holds; with the math of a long fused chain (tanh, exp) in the loop
 * that is a few lines per stream, and the math then adds to the memory time
 * instead of hiding under it (one thread: 0.55 of a plain a + b loop's
 * bandwidth with one tanh). So the loop of a kernel that streams enough
 * bytes runs in blocks of kPfBlock bytes of its widest stream, each block
 * first prefetching, per stream, its lines kPfAhead bytes further on: memory
 * then arrives while the block computes. A block is short so that its
 * prefetches come a few at a time, not in bursts that fill the line-fill
 * buffers. The flat elementwise loop does this, and the exp pass of a
 * softmax or logsumexp over rows (see reduced_loops). */
enum { kPfBlock = 256, kPfAhead = 2048, kPfLine = 64, kPfMinBytes = 1 << 18, kPfStreams = 16 };

/* A stream of a loop: a slot walked at `bytes` per iteration. */
typedef struct pf_stream {
  int slot;
  uint8_t dtype;
  bool write;
  int64_t offset, bytes;
  const int64_t *gs; /* strides per loop dim */
} pf_stream;

/* Counts a stream of strides gs when it walks memory along dim g, and
 * keeps it while st (kPfStreams) has room. */
static void pf_add(pf_stream *st, int *n, int slot, int dtype, bool write, int64_t offset,
                   const int64_t *gs, int g) {
  if (!gs[g]) return;
  int64_t s = gs[g] < 0 ? -gs[g] : gs[g];
  if (*n < kPfStreams)
    st[*n] = (pf_stream){
        slot, (uint8_t)dtype, write, offset, s * (int64_t)lt_dtype_size((lt_dtype)dtype), gs};
  (*n)++;
}

/* The streams of the loop over collapsed dim c (st holds kPfStreams): the
 * leaves that walk memory along it, and the outputs; their count, or 0 when
 * the loop is not worth prefetching (in cache, a stride beyond a line, more
 * than kPfStreams streams). *widest: the largest bytes per iteration. */
static int pf_streams(const kgen *k, int c, const cpu_view *outs, int nouts, pf_stream *st,
                      int64_t *widest) {
  int n = 0, g = k->glast[c];
  for (int l = 0; l < k->nleaves; l++) {
    const leaf *lf = &k->leaves[l];
    if (!lf->rng && !lf->hoisted) pf_add(st, &n, lf->slot, lf->dtype, false, lf->offset, lf->gs, g);
  }
  for (int o = 0; o < nouts; o++)
    pf_add(st, &n, outs[o].slot, outs[o].dtype, true, 0, k->out_gs, g);
  *widest = 0;
  if (n > kPfStreams) return 0;
  int64_t iters = 1, total = 0;
  for (int d = 0; d < k->nd; d++) iters *= k->D[d];
  for (int i = 0; i < n; i++) {
    *widest = st[i].bytes > *widest ? st[i].bytes : *widest;
    total += st[i].bytes * iters;
  }
  return *widest > kPfLine || total < kPfMinBytes ? 0 : n;
}

/* Prefetches, per stream, of the lines of iterations [j, j + block) of the
 * loop over collapsed dim c (the other loop variables as they are). A plain
 * GEP: the lines ahead may lie past a slot's end (a prefetch never faults). */
static void pf_block(kgen *k, int c, irv j, int64_t block, const pf_stream *st, int n) {
  irv saved = k->var[c];
  for (int i = 0; i < n; i++) {
    int64_t per_line = kPfLine / st[i].bytes; /* iterations per line, >= 1 */
    for (int64_t e = 0; e < block; e += per_line) {
      k->var[c] = e ? OP("add i64 %s, %lld", j.s, (long long)e) : j;
      irv idx = loop_index(k, st[i].offset, st[i].gs);
      irv p =
          OP("getelementptr %s, ptr %%p%d, i64 %s", lt__ops_type(st[i].dtype), st[i].slot, idx.s);
      lt__sb_printf(&k->body, "  call void @llvm.prefetch.p0(ptr %s, i32 %d, i32 3, i32 1)\n", p.s,
                    st[i].write);
    }
  }
  k->var[c] = saved;
}

/* The loop of collapsed dim c over [lo, hi) in blocks that prefetch the
 * streams st (n of them, widest bytes per iteration) ahead; fn per
 * iteration, k->var[c] the iteration. */
static void pf_loop(kgen *k, int c, irv lo, irv hi, const pf_stream *st, int n, int64_t widest,
                    int64_t ahead, inner_fn fn, void *ud) {
  int64_t block = kPfBlock / widest;
  if (!ahead) ahead = kPfAhead / widest;
  int id, ie;
  irv b = loop_begin(k, lo, hi, &id);
  pf_block(k, c, OP("add i64 %s, %lld", b.s, (long long)ahead), block, st, n);
  irv end = OP("add i64 %s, %lld", b.s, (long long)block);
  end = OP("call i64 @llvm.smin.i64(i64 %s, i64 %s)", end.s, hi.s);
  k->var[c] = loop_begin(k, b, end, &ie);
  irv i = k->var[c];
  fn(k, ud);
  loop_end(k, i, ie);
  loop_end_by(k, b, lt__ir_int(block), id);
}

/* Runs body over the reduced collapsed dims [nk, nd) (nested loops). With
 * k->pf_pass, the innermost loop prefetches the operand, and the output when
 * it walks the reduced dims (softmax), one row ahead (the next row when
 * rows are contiguous): logsumexp's and softmax's exp pass, the one with
 * math, so that the next row's passes find it in cache. Not a first pass
 * (max, sum): a light reduction streams well alone, and blocks would cost
 * it a horizontal reduction each. */
static void reduced_loops(kgen *k, int c, inner_fn fn, void *ud) {
  if (c == k->nd) {
    fn(k, ud);
    return;
  }
  int id;
  if (c == k->nd - 1 && k->pf_pass) {
    k->pf_pass = false;
    pf_stream st[kPfStreams];
    int64_t widest;
    int n = pf_streams(k, c, k->pf_out, k->pf_out ? 1 : 0, st, &widest);
    if (n) {
      pf_loop(k, c, lt__ir_int(0), lt__ir_int(k->D[c]), st, n, widest, k->D[c], fn, ud);
      return;
    }
  }
  k->var[c] = loop_begin(k, lt__ir_int(0), lt__ir_int(k->D[c]), &id);
  irv saved = k->var[c];
  reduced_loops(k, c + 1, fn, ud);
  loop_end(k, saved, id);
}

/* The argument number of slot s: its index in args, added when new (-1
 * when args is full). */
static int arg_index(int *args, int *nargs, int cap, int s) {
  for (int i = 0; i < *nargs; i++)
    if (args[i] == s) return i;
  if (*nargs == cap) return -1;
  args[*nargs] = s;
  return (*nargs)++;
}

/* Appends text to out with each slot pointer %p<slot> renamed %p<argument>;
 * false when it names a slot not among args. */
static bool append_renamed(lt_strbuf *out, const char *text, size_t len, const int *args,
                           int nargs) {
  size_t from = 0;
  for (size_t i = 0; i + 2 < len; i++) {
    if (text[i] != '%' || text[i + 1] != 'p' || text[i + 2] < '0' || text[i + 2] > '9') continue;
    size_t j = i + 2;
    long slot = 0;
    while (j < len && text[j] >= '0' && text[j] <= '9' && slot <= INT32_MAX)
      slot = slot * 10 + (text[j++] - '0');
    int a = 0;
    while (a < nargs && args[a] != slot) a++;
    if (a == nargs) return false;
    lt__sb_append(out, text + from, i - from);
    lt__sb_printf(out, "%%p%d", a);
    from = j;
    i = j - 1;
  }
  lt__sb_append(out, text + from, len - from);
  return true;
}

/* Writes function fn_index from k's body and allocas into the function table.
 * The function takes its slots as arguments: entry i of its pointer argument
 * is the i-th slot it touches (outputs first, then the leaves), so its text
 * names no slot of this executable and equal kernels of different graphs
 * have equal text, hence one key and one compiled copy (cpu_loop_args).
 *
 * The loops are an internal function of one noalias pointer per slot, which
 * the exported one calls (always inlined): distinct slots of a kernel never
 * overlap (the buffer plan keeps temporaries that are live at once apart;
 * parameters are distinct buffers; a slot updated in place is one argument),
 * and saying so spares the vectorizer its run-time alias checks and the
 * scalar copy of each loop they guard. */
static void finish_function(kgen *k, int fn_index, const cpu_view *outs, int nouts) {
  enum { kCap = MAX_LEAVES + CG_MAX_OUTS };
  int args[kCap], nargs = 0;
  for (int l = -nouts; l < k->nleaves; l++)
    if (l < 0 || !k->leaves[l].rng)
      arg_index(args, &nargs, kCap, l < 0 ? outs[nouts + l].slot : k->leaves[l].slot);
  cpu_fntab *t = k->c->fns;
  lt_strbuf *ir = &t->text;
  lt__cpu_fntab_begin(t, fn_index);
  lt__sb_printf(ir, "\ndefine internal void @lt_loops(");
  for (int i = 0; i < nargs; i++) lt__sb_printf(ir, "ptr noalias %%p%d, ", i);
  lt__sb_printf(ir, "i64 %%lo, i64 %%hi) #0 alwaysinline {\nentry:\n");
  if (k->allocas.len) lt__sb_append(ir, k->allocas.s, k->allocas.len);
  for (int l = 0; l < k->nleaves; l++) {
    const leaf *lf = &k->leaves[l];
    if (!lf->hoisted) continue;
    const char *ty = lt__ops_type(lf->dtype);
    lt__sb_printf(ir, "  %%hp%d = getelementptr inbounds %s, ptr %%p%d, i64 %lld\n", l, ty,
                  arg_index(args, &nargs, kCap, lf->slot), (long long)lf->offset);
    if (lf->dtype == LT_BF16) { /* widened as leaf_load does */
      lt__sb_printf(ir, "  %%hb%d = load i16, ptr %%hp%d\n", l, l);
      lt__sb_printf(ir, "  %%hz%d = zext i16 %%hb%d to i32\n", l, l);
      lt__sb_printf(ir, "  %%hs%d = shl i32 %%hz%d, 16\n", l, l);
      lt__sb_printf(ir, "  %s = bitcast i32 %%hs%d to float\n", lf->val.s, l);
      continue;
    }
    lt__sb_printf(ir, "  %s = load %s, ptr %%hp%d\n", lf->val.s, ty, l);
  }
  lt__sb_printf(ir, "  br label %%body\nbody:\n");
  if (!append_renamed(ir, k->body.s ? k->body.s : "", k->body.len, args, nargs))
    k->err = lt__err(LT_ECOMPILE, "cpu: a kernel's loops use a slot it does not take");
  lt__sb_printf(ir, "  ret void\n}\n\ndefine void @%s(ptr %%S, i64 %%lo, i64 %%hi) #0 {\nentry:\n",
                CPU_SYM_PLACEHOLDER);
  /* One pointer per slot, loaded once, so that a load and a store of the same
   * slot (an update in place) visibly share their base. */
  for (int i = 0; i < nargs; i++) {
    lt__sb_printf(ir, "  %%q%d = getelementptr inbounds ptr, ptr %%S, i64 %d\n", i, i);
    lt__sb_printf(ir, "  %%p%d = load ptr, ptr %%q%d\n", i, i);
  }
  lt__sb_printf(ir, "  call void @lt_loops(");
  for (int i = 0; i < nargs; i++) lt__sb_printf(ir, "ptr %%p%d, ", i);
  lt__sb_printf(ir, "i64 %%lo, i64 %%hi)\n  ret void\n}\n");
  if (k->meta.len) lt__sb_append(ir, k->meta.s, k->meta.len);
  lt__cpu_fntab_end(t, args, nargs);
}

static int kgen_init(kgen *k, const cg_ctx *c, const int *mem, int nmem) {
  memset(k, 0, sizeof *k);
  k->c = c;
  k->nmem = nmem;
  for (int i = 0; i < nmem; i++) k->mem[i] = mem[i];
  k->leaves = lt__malloc(MAX_LEAVES * sizeof *k->leaves);
  if (!k->leaves) return LT_ENOMEM;
  k->ir.sb = &k->body;
  return LT_OK;
}

static void kgen_free(kgen *k) {
  lt__free(k->leaves, MAX_LEAVES * sizeof *k->leaves);
  lt__free(k->memo, (size_t)k->capmemo * sizeof *k->memo);
  lt__sb_free(&k->body);
  lt__sb_free(&k->allocas);
  lt__sb_free(&k->meta);
}

static void fill_info(kgen *k, const cpu_view *outs, int nouts, cg_info *info) {
  info->nreads = 0;
  info->reads_full = false;
  info->nouts = nouts;
  for (int o = 0; o < nouts; o++) info->outs[o] = outs[o].slot;
  for (int l = 0; l < k->nleaves; l++) {
    if (k->leaves[l].rng) continue;
    if (info->nreads == (int)(sizeof info->reads / sizeof *info->reads)) {
      info->reads_full = true;
      break;
    }
    const leaf *lf = &k->leaves[l];
    bool id = lf->offset == 0 && memcmp(lf->gs, k->out_gs, (size_t)k->G * sizeof *lf->gs) == 0;
    cg_read *rd = &info->reads[info->nreads++];
    rd->slot = lf->slot;
    rd->identity = id;
    rd->dtype = lf->dtype;
    rd->member = lf->member;
  }
}

/* ---- elementwise kernels ---- */

/* Evaluates each output at the current element and stores it. */
static void store_members(kgen *k, const int *roots, int nroots, const cpu_view *outs,
                          const int8_t *dm) {
  irv idx = out_index(k);
  for (int i = 0; i < nroots; i++) {
    k->cur = (int8_t)i;
    irv v = visit(k, roots[i], dm);
    if (k->err) return;
    store_out(k, &outs[i], idx, v);
  }
}

typedef struct members {
  const int *roots;
  int nroots;
  const cpu_view *outs;
  const int8_t *dm;
} members;

static void store_members_fn(kgen *k, void *ud) {
  const members *m = ud;
  store_members(k, m->roots, m->nroots, m->outs, m->dm);
}

/* The flat loop over the elements [lo, hi): in prefetching blocks when it
 * streams memory (see pf_loop). */
static void flat_loop(kgen *k, const int *roots, int nroots, const cpu_view *outs,
                      const int8_t *dm) {
  members m = {roots, nroots, outs, dm};
  pf_stream st[kPfStreams];
  int64_t widest;
  int n = pf_streams(k, 0, outs, nroots, st, &widest);
  if (n) {
    pf_loop(k, 0, (irv){"%lo"}, (irv){"%hi"}, st, n, widest, 0, store_members_fn, &m);
    return;
  }
  int id;
  k->var[0] = loop_begin(k, (irv){"%lo"}, (irv){"%hi"}, &id);
  store_members_fn(k, &m);
  loop_end(k, k->var[0], id);
}

int lt__cg_elem(const cg_ctx *c, const int *roots, int nroots, bool copy, const cpu_view *outs,
                int fn_index, cg_info *info) {
  kgen kk, *k = &kk;
  if (nroots < 1 || nroots > CG_MAX_OUTS || (copy && nroots != 1))
    return lt__err(LT_ECOMPILE, "cpu: a loop kernel with %d outputs", nroots);
  int rc = kgen_init(k, c, roots, copy ? 0 : nroots);
  if (rc != LT_OK) return rc;
  const lt_node *n = c->g->nodes[roots[0]];
  k->G = n->ndim;
  /* size-1 dims read index 0, as when an operand is visited: the memo then
   * finds an output that a later output reads */
  int8_t dm[LT_MAX_DIMS];
  lt__row_major_strides(n->shape, n->ndim, k->out_gs);
  for (int d = 0; d < n->ndim; d++) {
    k->S[d] = n->shape[d];
    dm[d] = n->shape[d] == 1 ? -1 : (int8_t)d;
  }
  for (int i = 0; i < nroots && !k->err; i++) { /* pass 1: the leaves */
    k->cur = (int8_t)i;
    visit(k, roots[i], dm);
  }
  if (k->err) goto done;
  collapse(k, k->G);
  if (k->nd == 0) { /* one element */
    k->D[0] = 1;
    k->glast[0] = 0;
    k->nd = k->nk = 1;
    if (k->G == 0) {
      k->G = 1;
      k->S[0] = 1;
      k->out_gs[0] = 0;
    }
  }
  hoist_scalars(k, outs, nroots);
  pass_reset(k);
  k->emit = true;
  int id;
  if (k->nd == 1) { /* flat: [lo, hi) are elements */
    flat_loop(k, roots, nroots, outs, dm);
    info->extent = k->D[0];
    info->unit_cost = 1;
  } else { /* rows over the outer dims, an inner loop over the last */
    k->nk = k->nd - 1;
    irv o = loop_begin(k, (irv){"%lo"}, (irv){"%hi"}, &id);
    unravel_outer(k, o);
    int id2;
    k->var[k->nd - 1] = loop_begin(k, lt__ir_int(0), lt__ir_int(k->D[k->nd - 1]), &id2);
    irv j = k->var[k->nd - 1];
    store_members(k, roots, nroots, outs, dm);
    loop_end(k, j, id2);
    loop_end(k, o, id);
    info->extent = 1;
    for (int d = 0; d < k->nd - 1; d++) info->extent *= k->D[d];
    info->unit_cost = k->D[k->nd - 1];
  }
  if (k->err) goto done;
  fill_info(k, outs, nroots, info);
  finish_function(k, fn_index, outs, nroots);
  if (c->fns->text.oom || c->fns->oom) k->err = LT_ENOMEM;
done:
  rc = k->err ? k->err : (k->body.oom || k->allocas.oom ? LT_ENOMEM : LT_OK);
  kgen_free(k);
  return rc;
}

/* ---- reductions ---- */

typedef struct rstate {
  int op, dx, dn;
  int operand;
  const int8_t *dm;
  acc a;
  irv shift; /* max pass result (logsumexp / softmax) */
  irv inv;   /* softmax: 1 / sum; log_softmax: log(sum), in dx */
  const cpu_view *out;
  /* a block of outputs (see sum_blocked) */
  int blk;       /* its accumulators: alloca %b<blk> */
  irv base, len; /* its first index along the last kept dim, its length */
} rstate;

static irv operand_value(kgen *k, rstate *r) {
  pass_reset(k);
  return visit(k, r->operand, r->dm);
}

static void body_max(kgen *k, void *ud) {
  rstate *r = ud;
  irv v = operand_value(k, r);
  const char *t = lt__ops_ctype(r->dx), *s = r->dx == LT_F64 ? "f64" : "f32";
  irv m = acc_get(k, r->a);
  bool mx = r->op != LT_OP_MIN;
  acc_set(
      k, r->a,
      OP("call %s @llvm.%s.%s(%s %s, %s %s)", t, mx ? "maximum" : "minimum", s, t, m.s, t, v.s));
}

static void body_sum(kgen *k, void *ud) { /* float sums in double */
  rstate *r = ud;
  irv v = lt__ops_conv(&k->ir, operand_value(k, r), r->dx, LT_F64);
  irv s = acc_get(k, r->a);
  acc_set(k, r->a, OP("%s reassoc double %s, %s", r->op == LT_OP_PROD ? "fmul" : "fadd", s.s, v.s));
}

/* The accumulators of a block of outputs += the operand at one reduced
 * index: an inner loop over contiguous outputs (vectorizable). */
static void body_sum_block(kgen *k, void *ud) {
  rstate *r = ud;
  int id, c = k->nk - 1;
  irv t = loop_begin(k, lt__ir_int(0), r->len, &id);
  k->var[c] = OP("add i64 %s, %s", r->base.s, t.s);
  irv v = lt__ops_conv(&k->ir, operand_value(k, r), r->dx, LT_F64);
  irv p = OP("getelementptr inbounds double, ptr %%b%d, i64 %s", r->blk, t.s);
  irv s = OP("load double, ptr %s", p.s);
  irv n = OP("%s double %s, %s", r->op == LT_OP_PROD ? "fmul" : "fadd", s.s, v.s);
  lt__sb_printf(&k->body, "  store double %s, ptr %s\n", n.s, p.s);
  loop_end(k, t, id);
}

/* Whether a float sum / mean / product walks the operand better with the
 * reduced dims outside a block of outputs: the operand is contiguous along
 * the last kept dim (of a vector's length at least) and not along the last
 * reduced one (column sums). */
static bool sum_blocked_ok(const kgen *k) {
  if (k->nk < 1 || k->nd <= k->nk || k->D[k->nk - 1] < 16) return false;
  int kc = k->glast[k->nk - 1], rc = k->glast[k->nd - 1];
  if (k->out_gs[kc] != 1) return false;
  bool gain = false;
  for (int l = 0; l < k->nleaves; l++) {
    const leaf *lf = &k->leaves[l];
    if (lf->gs[kc] != 0 && lf->gs[kc] != 1) return false;
    if (lf->gs[kc] == 1 && lf->gs[rc] != 1) gain = true;
  }
  return gain;
}

/* The function's outputs [lo, hi) in blocks of at most kBlock along the last
 * kept dim: per block, double accumulators (each output summed in the order
 * of the reduced indices, as the one-output loop does), then the stores. */
static void sum_blocked(kgen *k, rstate *r, int64_t inner) {
  enum { kBlock = LT_CPU_SUM_BLOCK };
  int c = k->nk - 1;
  r->blk = k->nloops++;
  lt__sb_printf(&k->allocas, "  %%b%d = alloca [%d x double], align 64\n", r->blk, kBlock);
  int id, it;
  irv o = loop_begin(k, (irv){"%lo"}, (irv){"%hi"}, &id);
  unravel_outer(k, o);
  irv base = k->var[c];
  irv rem = OP("sub i64 %lld, %s", (long long)k->D[c], base.s);
  irv left = OP("sub i64 %%hi, %s", o.s);
  irv n1 = OP("call i64 @llvm.smin.i64(i64 %s, i64 %s)", rem.s, left.s);
  r->len = OP("call i64 @llvm.smin.i64(i64 %s, i64 %d)", n1.s, kBlock);
  r->base = base;
  irv init = lt__ir_f64(r->op == LT_OP_PROD ? 1.0 : 0.0);
  irv t = loop_begin(k, lt__ir_int(0), r->len, &it);
  irv p = OP("getelementptr inbounds double, ptr %%b%d, i64 %s", r->blk, t.s);
  lt__sb_printf(&k->body, "  store double %s, ptr %s\n", init.s, p.s);
  loop_end(k, t, it);
  reduced_loops(k, k->nk, body_sum_block, r);
  t = loop_begin(k, lt__ir_int(0), r->len, &it);
  k->var[c] = OP("add i64 %s, %s", base.s, t.s);
  p = OP("getelementptr inbounds double, ptr %%b%d, i64 %s", r->blk, t.s);
  irv v = OP("load double, ptr %s", p.s);
  if (r->op == LT_OP_MEAN) v = OP("fdiv double %s, %s", v.s, lt__ir_f64((double)inner).s);
  store_out(k, r->out, out_index(k), lt__ops_conv(&k->ir, v, LT_F64, r->dn));
  loop_end(k, t, it);
  loop_end_by(k, o, r->len, id);
}

/* Sums exp(x - shift) in the operand's float type (reassociated: partial sums
 * per vector lane); softmax also stores each exp for the scaling pass. */
static void body_expsum(kgen *k, void *ud) {
  rstate *r = ud;
  irv v = operand_value(k, r);
  const char *t = lt__ops_ctype(r->dx);
  irv z = OP("fsub %s %s, %s", t, v.s, r->shift.s);
  irv e = lt__ops_exp(&k->ir, z, r->dx);
  if (r->op == LT_OP_SOFTMAX) store_out(k, r->out, out_index(k), e);
  irv s = acc_get(k, r->a);
  acc_set(k, r->a, OP("fadd reassoc %s %s, %s", t, s.s, e.s));
}

static void body_scale_out(kgen *k, void *ud) {
  rstate *r = ud;
  const char *t = lt__ops_type(r->dx);
  irv idx = out_index(k);
  irv p = OP("getelementptr inbounds %s, ptr %%p%d, i64 %s", t, r->out->slot, idx.s);
  irv e = OP("load %s, ptr %s", t, p.s);
  irv o = OP("fmul %s %s, %s", t, e.s, r->inv.s);
  lt__sb_printf(&k->body, "  store %s %s, ptr %s\n", t, o.s, p.s);
}

static void body_int(kgen *k, void *ud) {
  rstate *r = ud;
  irv v = lt__ops_conv(&k->ir, operand_value(k, r), r->dx, LT_I64);
  irv s = acc_get(k, r->a);
  irv n;
  switch (r->op) {
  case LT_OP_SUM:
    n = OP("add i64 %s, %s", s.s, v.s);
    break;
  case LT_OP_PROD:
    n = OP("mul i64 %s, %s", s.s, v.s);
    break;
  case LT_OP_MAX:
    n = OP("call i64 @llvm.smax.i64(i64 %s, i64 %s)", s.s, v.s);
    break;
  case LT_OP_MIN:
    n = OP("call i64 @llvm.smin.i64(i64 %s, i64 %s)", s.s, v.s);
    break;
  default: /* lt__cg_reduce_ok admits no other integer reduction */
    if (!k->err)
      k->err = lt__err(LT_ECOMPILE, "cpu: no integer reduction code for op %s",
                       lt__op_name((lt_op)r->op));
    n = s;
    break;
  }
  acc_set(k, r->a, n);
}

static void body_softmax_out(kgen *k, void *ud) {
  rstate *r = ud;
  irv v = operand_value(k, r);
  const char *t = lt__ops_ctype(r->dx);
  irv z = OP("fsub %s %s, %s", t, v.s, r->shift.s);
  irv o = r->op == LT_OP_SOFTMAX
              ? OP("fmul %s %s, %s", t, lt__ops_exp(&k->ir, z, r->dx).s, r->inv.s)
              : OP("fsub %s %s, %s", t, z.s, r->inv.s);
  store_out(k, r->out, out_index(k), o);
}

/* The reductions lt__cg_reduce has code for; the switch lists every lt_op
 * (lt_op_switch.h), so a REDUCE row added to the table fails the build until
 * it is sorted in here. */
static bool reduce_has_case(lt_op op) {
  switch (op) {
  case LT_OP_SUM:
  case LT_OP_MEAN:
  case LT_OP_MAX:
  case LT_OP_MIN:
  case LT_OP_PROD:
  case LT_OP_LOGSUMEXP:
  case LT_OP_SOFTMAX:
  case LT_OP_LOG_SOFTMAX:
    return true;
  case LT_OP_ARGMAX: /* native kernels (cpu_native.c) */
  case LT_OP_ARGMIN:
  case LT_OP_CUMSUM:
  case LT_OP_ARGSORT:
    LT_OP_CASES_OUTSIDE(REDUCE)
    return false;
  }
  return false;
}

int lt__cg_reduce(const cg_ctx *c, int node, const cpu_view *out, int fn_index, cg_info *info) {
  const lt_node *n = c->g->nodes[node];
  if (!reduce_has_case((lt_op)n->op))
    return lt__err(LT_ECOMPILE, "cpu: no reduction code for op %s", lt__op_name((lt_op)n->op));
  kgen kk, *k = &kk;
  int rc = kgen_init(k, c, NULL, 0);
  if (rc != LT_OK) return rc;
  const lt_node *x = n->operands[0].node;
  bool one_axis = n->op == LT_OP_SOFTMAX || n->op == LT_OP_LOG_SOFTMAX;
  bool whole = one_axis;
  int64_t mask = one_axis ? (int64_t)1 << n->attrs[0] : n->attrs[0];
  /* loop order: kept input dims, then reduced ones */
  int perm[LT_MAX_DIMS], pos[LT_MAX_DIMS], G = 0, nkept = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < x->ndim; d++)
      if (((mask >> d) & 1) == pass) {
        pos[d] = G;
        perm[G++] = d;
        if (!pass) nkept++;
      }
  k->G = G;
  int64_t xs[LT_MAX_DIMS], so = 1;
  lt__row_major_strides(x->shape, x->ndim, xs);
  for (int j = 0; j < G; j++) k->S[j] = x->shape[perm[j]];
  /* output strides per loop dim: softmax writes the operand's layout, the
   * others write kept dims row-major (same with or without keepdim) */
  for (int j = G - 1; j >= 0; j--) {
    if (whole) {
      k->out_gs[j] = xs[perm[j]];
    } else if (j < nkept) {
      k->out_gs[j] = so;
      so *= k->S[j];
    } else {
      k->out_gs[j] = 0;
    }
  }
  int8_t dm[LT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) dm[d] = x->shape[d] == 1 ? -1 : (int8_t)pos[d];
  rstate r = {
      .op = n->op, .dx = x->dtype, .dn = n->dtype, .operand = x->order, .dm = dm, .out = out};
  k->pf_out = out;
  visit(k, x->order, dm); /* pass 1 */
  if (k->err) goto done;
  collapse(k, nkept);
  hoist_scalars(k, out, 1);
  int64_t inner = 1, outer = 1;
  for (int c2 = 0; c2 < k->nd; c2++) {
    if (c2 < k->nk)
      outer *= k->D[c2];
    else
      inner *= k->D[c2];
  }
  k->emit = true;
  bool fl = lt__ops_is_float(r.dn);
  if (fl && (r.op == LT_OP_SUM || r.op == LT_OP_MEAN || r.op == LT_OP_PROD) && sum_blocked_ok(k)) {
    sum_blocked(k, &r, inner);
    goto tail;
  }
  int id;
  irv o = loop_begin(k, (irv){"%lo"}, (irv){"%hi"}, &id);
  unravel_outer(k, o);
  const char *t = lt__ops_ctype(r.dx);
  if (!fl) {
    int64_t init = r.op == LT_OP_SUM    ? 0
                   : r.op == LT_OP_PROD ? 1
                   : r.op == LT_OP_MAX  ? INT64_MIN
                                        : INT64_MAX;
    r.a = acc_new(k, "i64", lt__ir_int(init));
    reduced_loops(k, k->nk, body_int, &r);
    irv v = acc_get(k, r.a);
    store_out(k, out, out_index(k), lt__ops_conv(&k->ir, v, LT_I64, r.dn));
  } else if (r.op == LT_OP_SUM || r.op == LT_OP_MEAN || r.op == LT_OP_PROD) {
    r.a = acc_new(k, "double", lt__ir_f64(r.op == LT_OP_PROD ? 1.0 : 0.0));
    reduced_loops(k, k->nk, body_sum, &r);
    irv v = acc_get(k, r.a);
    if (r.op == LT_OP_MEAN) v = OP("fdiv double %s, %s", v.s, lt__ir_f64((double)inner).s);
    store_out(k, out, out_index(k), lt__ops_conv(&k->ir, v, LT_F64, r.dn));
  } else {
    bool mx = r.op != LT_OP_MIN;
    r.a = acc_new(k, t, lt__ir_f64(mx ? -INFINITY : INFINITY));
    reduced_loops(k, k->nk, body_max, &r);
    irv m = acc_get(k, r.a);
    if (r.op == LT_OP_MAX || r.op == LT_OP_MIN) {
      /* bf16: a NaN the maximum kept is stored as ref's 0x7FC0 */
      store_out(k, out, out_index(k), lt__ops_conv(&k->ir, m, lt__dtype_compute(r.dx), r.dn));
    } else {
      /* logsumexp / softmax: a second pass sums exp(x - shift) */
      irv shift = m;
      if (r.op == LT_OP_LOGSUMEXP) {
        irv a = OP("call %s @llvm.fabs.%s(%s %s)", t, r.dx == LT_F32 ? "f32" : "f64", t, m.s);
        irv inf = OP("fcmp oeq %s %s, 0x7FF0000000000000", t, a.s);
        shift = OP("select i1 %s, %s 0.0, %s %s", inf.s, t, t, m.s);
      }
      r.shift = shift;
      r.a = acc_new(k, t, lt__ir_f64(0.0));
      int op = r.op;
      k->pf_pass = true;
      reduced_loops(k, k->nk, body_expsum, &r);
      irv sum = lt__ops_conv(&k->ir, acc_get(k, r.a), r.dx, LT_F64);
      if (op == LT_OP_LOGSUMEXP) {
        irv l = OP("call double @log(double %s)", sum.s);
        irv sh = lt__ops_conv(&k->ir, shift, r.dx, LT_F64);
        irv res = OP("fadd double %s, %s", l.s, sh.s);
        store_out(k, out, out_index(k), lt__ops_conv(&k->ir, res, LT_F64, r.dn));
      } else {
        irv q = op == LT_OP_SOFTMAX ? OP("fdiv double 1.0, %s", sum.s)
                                    : OP("call double @log(double %s)", sum.s);
        r.inv = lt__ops_conv(&k->ir, q, LT_F64, r.dx);
        reduced_loops(k, k->nk, op == LT_OP_SOFTMAX ? body_scale_out : body_softmax_out, &r);
      }
    }
  }
  loop_end(k, o, id);
tail:
  info->extent = outer;
  info->unit_cost = inner ? inner : 1;
  if (k->err) goto done;
  fill_info(k, out, 1, info);
  finish_function(k, fn_index, out, 1);
done:
  rc = k->err
           ? k->err
           : (k->body.oom || k->allocas.oom || c->fns->text.oom || c->fns->oom ? LT_ENOMEM : LT_OK);
  kgen_free(k);
  return rc;
}
