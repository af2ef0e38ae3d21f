/* The convolutions of the cpu backend (see cpu_conv.h): oneDNN primitives.
 *
 * User data stays plain (nchw, oihw / goihw); each primitive is created with
 * its formats left to oneDNN (format_tag any), which picks the blocked
 * layouts its vector kernels want, and the operands are reordered into them
 * and the result out of them around the run: the reorders move each element
 * once while the convolution touches it kh * kw * C / g times, and the
 * blocked kernels ran 2x faster than the plain-layout ones (im2col + GEMM) on
 * the CNN's 32 -> 64 conv. An activation with fewer than BLOCK_MIN channels
 * stays plain (blocking would pad its channels to 16).
 *
 * Creating a primitive costs 0.05-3 ms, so primitives (with their reorders
 * and scratchpad sizes) are kept in a small cache keyed by the whole
 * problem. Entries are reference counted: eviction and lt__cpu_conv_cleanup free
 * an entry when its last run ends, so both are safe at any time. Nothing
 * runs at exit (the process's memory goes with it; a destructor could race
 * with threads still running) and nothing is created ahead of use.
 *
 * The batch is cut into slices: small enough that a slice's reordered
 * activations stay in cache (SLICE_BYTES), and, above PAR_MIN multiply-adds,
 * whole rounds of the pool's threads, each slice one oneDNN run on one
 * OpenMP thread (the policy of cpu_gemm.c). Forward and backward-data write
 * disjoint slices of the result; backward-weights sums the slices' partial
 * gradients in slice order afterwards, so its rounding depends on the slice
 * count (hence on the thread count). The scratchpad is the caller's
 * (scratchpad_mode user), one per run, so one primitive runs on several
 * threads at once.
 *
 * bf16 (operands and result): where oneDNN has bf16 instructions
 * (cpu_dnnl.h) the primitives read bf16 and sum in f32, forward and
 * backward-data writing bf16 results rounded once; backward-weights writes
 * f32 partial gradients, summed over the slices in f32 and rounded to bf16
 * once at the end (torch gives a bf16 weight a bf16 gradient). Elsewhere
 * (or when oneDNN declines the bf16 problem) the operands are widened to
 * f32, the f32 convolution runs and its result is rounded once: the same
 * sums on f32 arithmetic. */
#define _GNU_SOURCE
#include "cpu_conv.h"

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/lt_dtype.h"
#include "cpu.h"
#include "cpu_dnnl.h"

#define DECLINE CPU_NATIVE_DECLINED
#define CACHE_MAX 64        /* cached primitives */
#define PAR_MIN (1 << 22)   /* multiply-adds below which the calling thread runs alone */
#define DIM_MAX (1LL << 31) /* any size or attribute at or above: declined */
#define ALIGN 64
#define SLICE_BYTES (1 << 20)    /* reordered activations of one slice */
#define PARTIAL_BYTES (16 << 20) /* backward-weights' partial gradients, beyond one per thread */
#define BLOCK_MIN 16             /* channels below which a tensor keeps the plain layout */

enum { FWD, BWD_DATA, BWD_WEIGHT };

/* A problem, all int64 so that it compares with memcmp (the cache key). */
typedef struct geom {
  int64_t kind, n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, g;
  int64_t bias; /* FWD of CONV2D_BIAS: the primitive adds operand 2, [O], to each channel */
  int64_t dt;   /* LT_F32 or LT_BF16 (then backward-weights' result is f32: conv_run) */
} geom;

/* ---- checking the instruction ------------------------------------------------------------- */

/* b is a 4-d buffer of dtype dt whose numel and storage agree with its shape. */
static bool dims4(const lt_buffer *b, int64_t d[4], int dt) {
  if (!b || b->ndim != 4 || b->dtype != dt) return false;
  int64_t n = 1;
  for (int i = 0; i < 4; i++) {
    if (b->shape[i] < 0 || b->shape[i] >= DIM_MAX) return false;
    d[i] = b->shape[i];
    if (__builtin_mul_overflow(n, d[i], &n)) return false;
  }
  return n == b->numel && (n == 0 || b->data);
}

/* Output size along one axis, or -1 when the window does not fit. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t num = in + 2 * p - d * (k - 1) - 1;
  return num < 0 ? -1 : num / s + 1;
}

/* The problem of a conv instruction, when everything about it agrees. */
static bool read_geom(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in, int kind,
                      geom *g) {
  bool bias = kind == FWD && ins && ins->op == LT_OP_CONV2D_BIAS;
  if (!ins || !out || !in || ins->nattrs != 7 || !ins->attrs || ins->noperands != (bias ? 3 : 2) ||
      (ins->dtype != LT_F32 && ins->dtype != LT_BF16) || ins->ndim != 4)
    return false;
  int dt = ins->dtype;
  int64_t a[3][4];
  if (!dims4(in[0], a[0], dt) || !dims4(in[1], a[1], dt) || !dims4(out, a[2], dt)) return false;
  for (int d = 0; d < 4; d++)
    if (ins->shape[d] != a[2][d]) return false;
  const int64_t *x = a[0], *wt = a[1], *y = a[2];
  if (kind == BWD_DATA) x = a[2], y = a[0];
  if (kind == BWD_WEIGHT) wt = a[2], y = a[1];
  const int64_t *at = ins->attrs;
  for (int i = 0; i < 7; i++)
    if (at[i] < (i == 2 || i == 3 ? 0 : 1) || at[i] >= DIM_MAX) return false;
  *g = (geom){.kind = kind,
              .n = x[0],
              .c = x[1],
              .h = x[2],
              .w = x[3],
              .o = wt[0],
              .kh = wt[2],
              .kw = wt[3],
              .oh = y[2],
              .ow = y[3],
              .sh = at[0],
              .sw = at[1],
              .ph = at[2],
              .pw = at[3],
              .dh = at[4],
              .dw = at[5],
              .g = at[6],
              .bias = bias,
              .dt = dt};
  if (bias && (!in[2] || in[2]->dtype != dt || in[2]->ndim != 1 || in[2]->shape[0] != g->o ||
               in[2]->numel != g->o || (g->o && !in[2]->data)))
    return false;
  return y[0] == g->n && y[1] == g->o && g->c % g->g == 0 && g->o % g->g == 0 &&
         wt[1] * g->g == g->c && g->kh >= 1 && g->kw >= 1 &&
         out_size(g->h, g->kh, g->sh, g->ph, g->dh) == g->oh &&
         out_size(g->w, g->kw, g->sw, g->pw, g->dw) == g->ow;
}

/* ---- primitives and their cache ----------------------------------------------------------- */

/* A created problem: the convolution, and for each of its three tensors
 * (operand 0, operand 1, result: the instruction's order) the user's plain
 * layout, the layout the primitive wants and the reorder between them
 * (NULL when they are the same). */
typedef struct conv_prim {
  geom key;
  int refs;    /* runs holding it (under g_lock) */
  bool cached; /* in g_cache; when not, the last release frees it */
  uint64_t used;
  dnnl_primitive_desc_t pd, hint;
  dnnl_primitive_t prim, reorder[3];
  int arg[3];
  dnnl_memory_desc_t user_md[3], md[3], scratch_md[4]; /* [0] the conv's, [1 + i] reorder i's */
  dnnl_memory_desc_t bias_md;                          /* plain [O], read where it is (key.bias) */
  size_t tmp[3], scratch; /* bytes of the reordered copies; the largest scratchpad */
} conv_prim;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static conv_prim *g_cache[CACHE_MAX];
static int g_count;
static uint64_t g_tick;

static void prim_free(conv_prim *p) {
  if (!p) return;
  for (int i = 0; i < 3; i++)
    if (p->reorder[i]) dnnl_primitive_destroy(p->reorder[i]);
  if (p->prim) dnnl_primitive_destroy(p->prim);
  if (p->pd) dnnl_primitive_desc_destroy(p->pd);
  if (p->hint) dnnl_primitive_desc_destroy(p->hint);
  free(p);
}

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t scratch_of(const_dnnl_primitive_desc_t pd, dnnl_memory_desc_t *md) {
  const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (!q) {
    memset(md, 0, sizeof *md);
    return 0;
  }
  *md = *q;
  return dnnl_memory_desc_get_size(md);
}

/* The reorder of tensor i between the user's layout and the primitive's. */
static bool make_reorder(conv_prim *p, int i, const_dnnl_primitive_attr_t attr) {
  if (dnnl_memory_desc_equal(&p->user_md[i], &p->md[i])) return true;
  bool into = i < 2; /* operands go into the primitive's layout, the result out of it */
  dnnl_primitive_desc_t rpd;
  if (dnnl_reorder_primitive_desc_create(&rpd, into ? &p->user_md[i] : &p->md[i],
                                         lt__cpu_dnnl_engine(), into ? &p->md[i] : &p->user_md[i],
                                         lt__cpu_dnnl_engine(), attr) != dnnl_success)
    return false;
  size_t s = scratch_of(rpd, &p->scratch_md[1 + i]);
  if (s > p->scratch) p->scratch = s;
  p->tmp[i] = round_up(dnnl_memory_desc_get_size(&p->md[i]));
  dnnl_status_t st = dnnl_primitive_create(&p->reorder[i], rpd);
  dnnl_primitive_desc_destroy(rpd);
  return st == dnnl_success;
}

static conv_prim *prim_create(const geom *k) {
  if (!lt__cpu_dnnl_engine()) return NULL;
  conv_prim *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->key = *k;
  dnnl_dims_t xd = {k->n, k->c, k->h, k->w}, yd = {k->n, k->o, k->oh, k->ow};
  dnnl_dims_t wd = {k->g, k->o / k->g, k->c / k->g, k->kh, k->kw};
  dnnl_dims_t st = {k->sh, k->sw}, dil = {k->dh - 1, k->dw - 1}, pl = {k->ph, k->pw};
  /* right padding: what makes oneDNN's size rule give oh exactly */
  dnnl_dims_t pr = {(k->oh - 1) * k->sh + (k->kh - 1) * k->dh + 1 - k->h - k->ph,
                    (k->ow - 1) * k->sw + (k->kw - 1) * k->dw + 1 - k->w - k->pw};
  bool grouped = k->g > 1;
  const dnnl_dim_t *wdims = grouped ? wd : wd + 1;
  int wnd = grouped ? 5 : 4;
  dnnl_format_tag_t wtag = grouped ? dnnl_goihw : dnnl_oihw;
  dnnl_memory_desc_t x, y, w, xa, ya, wa, b;
  dnnl_dims_t bd = {k->o};
  dnnl_data_type_t dt = k->dt == LT_BF16 ? dnnl_bf16 : dnnl_f32;
  /* backward-weights' result: f32 partial gradients (conv_run rounds the sum) */
  dnnl_data_type_t wt = k->kind == BWD_WEIGHT ? dnnl_f32 : dt;
  bool ok = (!k->bias || dnnl_memory_desc_init_by_tag(&b, 1, bd, dt, dnnl_a) == dnnl_success) &&
            dnnl_memory_desc_init_by_tag(&x, 4, xd, dt, dnnl_nchw) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&y, 4, yd, dt, dnnl_nchw) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&w, wnd, wdims, wt, wtag) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&xa, 4, xd, dt, dnnl_format_tag_any) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&ya, 4, yd, dt, dnnl_format_tag_any) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&wa, wnd, wdims, wt, dnnl_format_tag_any) == dnnl_success;
  /* Blocked layouts pad channels to a multiple of 16: a side with few
   * channels stays plain (measured on the CNN's first conv, C = 1: its
   * backward-data runs 10x faster into plain nchw than into nChw16c). */
  if (k->c < BLOCK_MIN) xa = x;
  if (k->o < BLOCK_MIN) ya = y;
  dnnl_primitive_attr_t attr = NULL;
  ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
       dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
  dnnl_convolution_desc_t fd, cd;
  dnnl_memory_desc_t wh;    /* the hint's weights: of the activations' dtype */
  if (ok && k->kind != FWD) /* the backward primitives want the forward one as a hint */
    ok = dnnl_memory_desc_init_by_tag(&wh, wnd, wdims, dt, dnnl_format_tag_any) == dnnl_success &&
         dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                    dnnl_convolution_direct, &xa, &wh, NULL, &ya,
                                                    st, dil, pl, pr) == dnnl_success &&
         dnnl_primitive_desc_create(&p->hint, &fd, NULL, lt__cpu_dnnl_engine(), NULL) ==
             dnnl_success;
  if (ok) {
    dnnl_status_t s;
    if (k->kind == FWD) {
      s = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                     dnnl_convolution_direct, &xa, &wa,
                                                     k->bias ? &b : NULL, &ya, st, dil, pl, pr);
      if (k->bias) p->bias_md = b;
      p->arg[0] = DNNL_ARG_SRC, p->arg[1] = DNNL_ARG_WEIGHTS, p->arg[2] = DNNL_ARG_DST;
      p->user_md[0] = x, p->user_md[1] = w, p->user_md[2] = y;
    } else if (k->kind == BWD_DATA) {
      s = dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &xa, &wa,
                                                           &ya, st, dil, pl, pr);
      p->arg[0] = DNNL_ARG_DIFF_DST, p->arg[1] = DNNL_ARG_WEIGHTS, p->arg[2] = DNNL_ARG_DIFF_SRC;
      p->user_md[0] = y, p->user_md[1] = w, p->user_md[2] = x;
    } else {
      s = dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &xa,
                                                              &wa, NULL, &ya, st, dil, pl, pr);
      p->arg[0] = DNNL_ARG_SRC, p->arg[1] = DNNL_ARG_DIFF_DST, p->arg[2] = DNNL_ARG_DIFF_WEIGHTS;
      p->user_md[0] = x, p->user_md[1] = y, p->user_md[2] = w;
    }
    ok = s == dnnl_success && dnnl_primitive_desc_create(&p->pd, &cd, attr, lt__cpu_dnnl_engine(),
                                                         p->hint) == dnnl_success;
  }
  for (int i = 0; ok && i < 3; i++) {
    const dnnl_memory_desc_t *q =
        dnnl_primitive_desc_query_md(p->pd, dnnl_query_exec_arg_md, p->arg[i]);
    ok = q != NULL;
    if (ok) p->md[i] = *q;
  }
  if (ok) {
    p->scratch = scratch_of(p->pd, &p->scratch_md[0]);
    /* bf16: not oneDNN's reference loops (far slower than converting) */
    const char *name = "";
    ok = k->dt != LT_BF16 ||
         (dnnl_primitive_desc_query(p->pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success &&
          strncmp(name, "ref", 3) != 0);
    ok = ok && dnnl_primitive_create(&p->prim, p->pd) == dnnl_success;
  }
  for (int i = 0; ok && i < 3; i++) ok = make_reorder(p, i, attr);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (!ok) {
    prim_free(p);
    return NULL;
  }
  p->scratch = round_up(p->scratch);
  return p;
}

/* The primitive of problem k, held until release; NULL when oneDNN does not
 * take it (or memory is short). */
static conv_prim *acquire(const geom *k) {
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_count; i++)
    if (memcmp(&g_cache[i]->key, k, sizeof *k) == 0) {
      conv_prim *p = g_cache[i];
      p->refs++;
      p->used = ++g_tick;
      pthread_mutex_unlock(&g_lock);
      return p;
    }
  pthread_mutex_unlock(&g_lock);
  conv_prim *p = prim_create(k); /* outside the lock: it is slow */
  if (!p) return NULL;
  conv_prim *victim = NULL;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_count; i++)
    if (memcmp(&g_cache[i]->key, k, sizeof *k) == 0) { /* another thread made it meanwhile */
      victim = p;
      p = g_cache[i];
      break;
    }
  if (!victim) {
    int slot = g_count < CACHE_MAX ? g_count++ : -1;
    for (int i = 0; slot < 0 && i < g_count; i++) /* the least recently used idle entry */
      if (g_cache[i]->refs == 0 && (!victim || g_cache[i]->used < victim->used))
        victim = g_cache[i];
    if (victim) {
      for (int i = 0; i < g_count; i++)
        if (g_cache[i] == victim) slot = i;
      victim->cached = false;
    }
    if (slot >= 0) {
      g_cache[slot] = p;
      p->cached = true;
    } /* else every entry is running: p is used once and freed */
  }
  p->refs++;
  p->used = ++g_tick;
  pthread_mutex_unlock(&g_lock);
  prim_free(victim);
  return p;
}

static void release(conv_prim *p) {
  if (!p) return;
  pthread_mutex_lock(&g_lock);
  bool last = --p->refs == 0 && !p->cached;
  pthread_mutex_unlock(&g_lock);
  if (last) prim_free(p);
}

void lt__cpu_conv_cleanup(void) {
  conv_prim *idle[CACHE_MAX];
  int nidle = 0;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_count; i++) {
    g_cache[i]->cached = false;
    if (g_cache[i]->refs == 0) idle[nidle++] = g_cache[i];
  }
  g_count = 0;
  pthread_mutex_unlock(&g_lock);
  for (int i = 0; i < nidle; i++) prim_free(idle[i]);
}

int lt__cpu_conv_cached(void) {
  pthread_mutex_lock(&g_lock);
  int n = g_count;
  pthread_mutex_unlock(&g_lock);
  return n;
}

/* ---- running ------------------------------------------------------------------------------ */

/* One run of p: result = conv(a, b) (+ bias), on the calling thread. */
static int prim_run(const conv_prim *p, const void *a, const void *b, const void *bias, void *res) {
  lt__cpu_gemm_one_thread();
  void *user[3] = {(void *)a, (void *)b, res};
  size_t total = p->scratch + p->tmp[0] + p->tmp[1] + p->tmp[2];
  char *block = NULL;
  if (total && posix_memalign((void **)&block, ALIGN, total) != 0) return DECLINE;
  char *scratch = block, *tmp[3];
  tmp[0] = block + p->scratch;
  tmp[1] = tmp[0] + p->tmp[0];
  tmp[2] = tmp[1] + p->tmp[1];
  dnnl_stream_t stream = NULL;
  dnnl_memory_t keep[13];
  int nkeep = 0;
  bool ok =
      dnnl_stream_create(&stream, lt__cpu_dnnl_engine(), dnnl_stream_default_flags) == dnnl_success;
  dnnl_exec_arg_t cargs[5];
  int nc = 0;
  if (ok && p->scratch_md[0].ndims)
    ok =
        lt__cpu_dnnl_arg(cargs, &nc, DNNL_ARG_SCRATCHPAD, &p->scratch_md[0], scratch, keep, &nkeep);
  if (ok && p->key.bias)
    ok = lt__cpu_dnnl_arg(cargs, &nc, DNNL_ARG_BIAS, &p->bias_md, (void *)bias, keep, &nkeep);
  for (int i = 0; ok && i < 3; i++) {
    void *data = p->reorder[i] ? tmp[i] : user[i];
    ok = lt__cpu_dnnl_arg(cargs, &nc, p->arg[i], &p->md[i], data, keep, &nkeep);
  }
  /* operands into the primitive's layouts, the convolution, the result out */
  for (int step = 0; ok && step < 4; step++) {
    int i = step < 2 ? step : 2;
    if (step == 2) {
      ok = dnnl_primitive_execute(p->prim, stream, nc, cargs) == dnnl_success;
      continue;
    }
    if (!p->reorder[i]) continue;
    dnnl_exec_arg_t rargs[3];
    int nr = 0;
    int from = i < 2 ? DNNL_ARG_FROM : DNNL_ARG_TO;
    ok = lt__cpu_dnnl_arg(rargs, &nr, from, &p->user_md[i], user[i], keep, &nkeep) &&
         lt__cpu_dnnl_arg(rargs, &nr, i < 2 ? DNNL_ARG_TO : DNNL_ARG_FROM, &p->md[i], tmp[i], keep,
                          &nkeep) &&
         (!p->scratch_md[1 + i].ndims ||
          lt__cpu_dnnl_arg(rargs, &nr, DNNL_ARG_SCRATCHPAD, &p->scratch_md[1 + i], scratch, keep,
                           &nkeep));
    ok = ok && dnnl_primitive_execute(p->reorder[i], stream, nr, rargs) == dnnl_success;
  }
  if (ok) ok = dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < nkeep; i++) dnnl_memory_destroy(keep[i]);
  if (stream) dnnl_stream_destroy(stream);
  free(block);
  return ok ? LT_OK : DECLINE;
}

/* The batch cut into slices: the first `rem` of base + 1 entries, the rest of
 * base; prim[0] runs the longer ones, prim[1] the others. */
typedef struct slice_job {
  const geom *g;
  conv_prim *prim[2];
  int64_t base, rem;
  const char *a, *b; /* operands: x or gy, w or gy (dtype g->dt) */
  const void *bias;
  char *res;      /* the result (bf16 backward-weights: f32, conv_run rounds it) */
  float *partial; /* partial: backward-weights' slices 1.. */
  atomic_int rc;
} slice_job;

static void slice_part(void **ctx, int64_t lo, int64_t hi) {
  slice_job *j = (slice_job *)ctx;
  const geom *g = j->g;
  size_t es = lt_dtype_size((lt_dtype)g->dt); /* bytes of an activation element */
  int64_t xs = g->c * g->h * g->w * (int64_t)es, ys = g->o * g->oh * g->ow * (int64_t)es,
          ws = g->o * (g->c / g->g) * g->kh * g->kw;
  for (int64_t i = lo; i < hi; i++) {
    int64_t n0 = i * j->base + (i < j->rem ? i : j->rem);
    const conv_prim *p = j->prim[i < j->rem ? 0 : 1];
    int rc;
    if (g->kind == FWD)
      rc = prim_run(p, j->a + n0 * xs, j->b, j->bias, j->res + n0 * ys);
    else if (g->kind == BWD_DATA)
      rc = prim_run(p, j->a + n0 * ys, j->b, NULL, j->res + n0 * xs);
    else
      rc = prim_run(p, j->a + n0 * xs, j->b + n0 * ys, NULL,
                    i == 0 ? (void *)j->res : (void *)(j->partial + (i - 1) * ws));
    if (rc != LT_OK) atomic_store(&j->rc, rc);
  }
}

/* The convolution of ins in its own dtype (f32, or bf16 where native). */
static int conv_run(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in, int kind) {
  geom g;
  if (!read_geom(ins, out, in, kind, &g)) return DECLINE;
  bool bf16 = g.dt == LT_BF16;
  /* before anything of oneDNN runs here: creating a primitive may open an
   * OpenMP team too, whose threads would then spin beside ours */
  lt__cpu_gemm_one_thread();
  if (out->numel == 0) return LT_OK;
  if (in[0]->numel == 0 || in[1]->numel == 0) { /* an empty sum (or all padding) */
    const char *bias = g.bias ? in[2]->data : NULL;
    size_t es = lt_dtype_size((lt_dtype)g.dt);
    int64_t plane = g.oh * g.ow;             /* kind FWD when bias: y is [N, O, OH, OW] */
    for (int64_t e = 0; e < out->numel; e++) /* the bias's bits, or +0 */
      if (bias)
        memcpy((char *)out->data + e * es, bias + (e / plane % g.o) * es, es);
      else
        memset((char *)out->data + e * es, 0, es);
    return LT_OK;
  }
  int64_t macs = g.n * g.o * g.oh * g.ow; /* < 2^62: each factor < 2^31 and numel fits */
  int64_t per = (g.c / g.g) * g.kh * g.kw;
  macs = macs > INT64_MAX / per ? INT64_MAX : macs * per;
  int nt = lt__cpu_pool_threads();
  bool par = nt > 1 && macs >= PAR_MIN;
  /* Slices small enough that the reordered activations of one stay in cache
   * from their reorder through the convolution (the layout rule of
   * prim_create): measured at one thread on the CNN's shapes, 4x faster for
   * its first conv's forward and 2x for its weight gradient than one slice. */
  int64_t sample =
      ((g.c >= BLOCK_MIN ? g.c * g.h * g.w : 0) + (g.o >= BLOCK_MIN ? g.o * g.oh * g.ow : 0)) *
      (int64_t)lt_dtype_size((lt_dtype)g.dt);
  int64_t fit = sample > 0 ? SLICE_BYTES / sample : g.n;
  if (fit < 1) fit = 1;
  int64_t ns = (g.n + fit - 1) / fit;
  if (kind == BWD_WEIGHT) { /* each slice past the first has a partial gradient */
    int64_t wbytes = out->numel * (int64_t)sizeof(float);
    int64_t cap = 1 + PARTIAL_BYTES / wbytes;
    if (ns > cap) ns = cap;
  }
  if (par) ns = ns < nt ? nt : (ns + nt - 1) / nt * nt; /* whole rounds of the pool */
  if (ns > g.n) ns = g.n;
  slice_job j = {.g = &g,
                 .base = g.n / ns,
                 .rem = g.n % ns,
                 .a = in[0]->data,
                 .b = in[1]->data,
                 .bias = g.bias ? in[2]->data : NULL,
                 .res = out->data};
  atomic_init(&j.rc, LT_OK);
  geom k = g;
  k.n = j.base + 1;
  if (j.rem) j.prim[0] = acquire(&k);
  k.n = j.base;
  j.prim[1] = acquire(&k);
  int rc = !j.prim[1] || (j.rem && !j.prim[0]) ? DECLINE : LT_OK;
  int64_t ws = out->numel;
  float *gw32 = NULL; /* bf16 backward-weights: the f32 gradient, rounded at the end */
  if (rc == LT_OK && kind == BWD_WEIGHT && bf16) {
    if (posix_memalign((void **)&gw32, ALIGN, round_up((size_t)ws * sizeof(float))) != 0) {
      gw32 = NULL;
      rc = DECLINE;
    }
    j.res = (char *)gw32;
  }
  if (rc == LT_OK && kind == BWD_WEIGHT && ns > 1) {
    size_t bytes = round_up((size_t)(ns - 1) * (size_t)ws * sizeof(float));
    if (posix_memalign((void **)&j.partial, ALIGN, bytes) != 0) {
      j.partial = NULL;
      rc = DECLINE;
    }
  }
  if (rc == LT_OK) {
    if (par)
      lt__cpu_pool_run_parts(slice_part, (void **)&j, ns);
    else
      slice_part((void **)&j, 0, ns);
    rc = atomic_load(&j.rc);
  }
  if (rc == LT_OK && j.partial) { /* the slices' gradients, summed in slice order */
    float *gw = kind == BWD_WEIGHT && bf16 ? gw32 : out->data;
    for (int64_t s = 0; s < ns - 1; s++) {
      const float *part = j.partial + s * ws;
      for (int64_t e = 0; e < ws; e++) gw[e] += part[e];
    }
  }
  if (rc == LT_OK && gw32) /* rounded once */
    for (int64_t e = 0; e < ws; e++) ((uint16_t *)out->data)[e] = lt__f32_to_bf16(gw32[e]);
  free(gw32);
  free(j.partial);
  release(j.prim[0]);
  release(j.prim[1]);
  return rc;
}

/* A bf16 convolution with its operands widened to f32 (exactly), the f32
 * convolution, and its result rounded to bf16 once. */
static int conv_converted(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in, int kind) {
  int n = ins->noperands;
  lt_buffer wide[4], *wide_in[3] = {NULL, NULL, NULL};
  float *data[4] = {NULL, NULL, NULL, NULL};
  int rc = LT_OK;
  for (int i = 0; i <= n && rc == LT_OK; i++) { /* operands, then the result (index n) */
    const lt_buffer *b = i < n ? in[i] : out;
    wide[i] = *b;
    wide[i].dtype = LT_F32;
    wide[i].nbytes = (size_t)b->numel * sizeof(float);
    if (!(data[i] = malloc(wide[i].nbytes + 1))) {
      rc = DECLINE;
      break;
    }
    wide[i].data = data[i];
    if (i < n) {
      for (int64_t e = 0; e < b->numel; e++)
        data[i][e] = lt__bf16_to_f32(((const uint16_t *)b->data)[e]);
      wide_in[i] = &wide[i];
    }
  }
  lt_instr f32 = *ins;
  f32.dtype = LT_F32;
  if (rc == LT_OK) rc = conv_run(&f32, &wide[n], wide_in, kind);
  if (rc == LT_OK)
    for (int64_t e = 0; e < out->numel; e++)
      ((uint16_t *)out->data)[e] = lt__f32_to_bf16(data[n][e]);
  for (int i = 0; i <= n; i++) free(data[i]);
  return rc;
}

static int conv_any(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in, int kind) {
  if (!ins || ins->dtype != LT_BF16) return conv_run(ins, out, in, kind);
  geom g;
  if (!read_geom(ins, out, in, kind, &g)) return DECLINE; /* before any conversion */
  if (lt__cpu_bf16_native() && conv_run(ins, out, in, kind) == LT_OK) {
    lt__cpu_bf16_count(true, true);
    return LT_OK;
  }
  int rc = conv_converted(ins, out, in, kind);
  if (rc == LT_OK) lt__cpu_bf16_count(true, false);
  return rc;
}

int lt__cpu_conv2d_fwd(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  return conv_any(ins, out, in, FWD);
}

int lt__cpu_conv2d_bwd_data(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  return conv_any(ins, out, in, BWD_DATA);
}

int lt__cpu_conv2d_bwd_weight(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  return conv_any(ins, out, in, BWD_WEIGHT);
}
