/* libFuzzer target: the input bytes are a program of calls through the public
 * API (creation with small random shapes, every dtype, devices CPU:0 and
 * CPU:1; elementwise, reduction, shape, contraction, index and normalisation
 * ops with random axes and arguments; reads, syncs, step barriers,
 * assignments) inside one scope. Every call must end in a result or a clear
 * error (a negative status and a non-empty lt_last_error()); no crash, leak or
 * abort; and once the scope ends no tensor may be left alive on either
 * device. Runs on the ref backend. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"
#include "fuzz_entry.h"

enum { POOL = 16, MAX_OPS = 48, MAX_NUMEL = 4096 };

typedef struct reader {
  const uint8_t *p;
  size_t n, pos;
} reader;

static unsigned u8(reader *r) { return r->pos < r->n ? r->p[r->pos++] : 0; }
static int pick(reader *r, int n) { return n > 0 ? (int)(u8(r) % (unsigned)n) : 0; }
static bool flag(reader *r) { return u8(r) & 1; }
/* A small double: integers, fractions, zero, negatives and a few specials. */
static double value(reader *r) {
  unsigned b = u8(r);
  switch (b % 16) {
  case 0:
    return 0.0;
  case 1:
    return NAN;
  case 2:
    return INFINITY;
  case 3:
    return -1.0;
  case 4:
    return 0.5;
  default:
    return ((int)b - 128) / 8.0;
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("LT_BACKEND", "ref", 1);                /* the LLVM backend compiles slowly */
  setenv("LT_COMPILATION_CACHE_SIZE", "256", 1); /* bound the memory the cache holds */
  return 0;
}

static void failed_clearly(const char *what, int rc) {
  if (rc >= 0 || lt_last_status() >= 0 || lt_last_error()[0] == '\0') {
    fprintf(stderr, "fuzz_ops: %s failed without a clear error (status %d, last %d, '%s')\n", what,
            rc, lt_last_status(), lt_last_error());
    abort();
  }
}

typedef struct state {
  lt_tensor *t[POOL];
  int n;
} state;

static lt_tensor *any(state *s, reader *r) { return s->n ? s->t[pick(r, s->n)] : NULL; }

static void keep(state *s, reader *r, lt_tensor *t, const char *what) {
  if (!t) {
    failed_clearly(what, lt_last_status());
    return;
  }
  if (lt_numel(t) > MAX_NUMEL) return; /* the scope frees it: keep sizes small */
  if (s->n < POOL)
    s->t[s->n++] = t;
  else
    s->t[pick(r, POOL)] = t;
}

static void check_rc(int rc, const char *what) {
  if (rc < 0) failed_clearly(what, rc);
}

static lt_device device(reader *r) { return lt_cpu(pick(r, 2)); }
static lt_dtype dtype(reader *r) { return (lt_dtype)pick(r, LT_NUM_DTYPES); }

static int shape(reader *r, int64_t *sh) {
  int nd = pick(r, 5);
  for (int i = 0; i < nd; i++) sh[i] = pick(r, 6);
  return nd;
}

static int64_t numel(const int64_t *sh, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  return n;
}

static lt_tensor *from_data(reader *r) {
  int64_t sh[LT_MAX_DIMS];
  int nd = shape(r, sh);
  lt_dtype dt = dtype(r);
  int64_t n = numel(sh, nd);
  union {
    uint8_t b[625];
    int32_t i32[625];
    int64_t i64[625];
    float f32[625];
    double f64[625];
  } *buf = calloc(1, sizeof *buf);
  if (!buf) abort();
  for (int64_t i = 0; i < n; i++) {
    double v = value(r);
    switch (dt) {
    case LT_BOOL:
      buf->b[i] = v != 0;
      break;
    case LT_U8:
    case LT_I8: /* any byte: both wrap around */
      buf->b[i] = isfinite(v) && fabs(v) < 1e18 ? (uint8_t)(int64_t)v : 0x81;
      break;
    case LT_I32:
      buf->i32[i] = isfinite(v) ? (int32_t)v : 3;
      break;
    case LT_I64:
      buf->i64[i] = isfinite(v) ? (int64_t)v : -2;
      break;
    case LT_F32:
      buf->f32[i] = (float)v;
      break;
    default:
      buf->f64[i] = v;
      break;
    }
  }
  lt_tensor *t = lt_from_data(device(r), dt, sh, nd, buf);
  free(buf);
  return t;
}

static lt_tensor *create(reader *r) {
  int64_t sh[LT_MAX_DIMS];
  switch (pick(r, 7)) {
  case 0:
    return from_data(r);
  case 1: {
    int nd = shape(r, sh);
    return lt_full(device(r), dtype(r), sh, nd, value(r));
  }
  case 2: {
    int nd = shape(r, sh);
    return flag(r) ? lt_zeros(device(r), dtype(r), sh, nd) : lt_ones(device(r), dtype(r), sh, nd);
  }
  case 3:
    return lt_scalar(device(r), dtype(r), value(r));
  case 4: {
    double start = value(r), stop = value(r), step = value(r);
    if (isfinite(start) && isfinite(stop) && isfinite(step) && step != 0 &&
        fabs((stop - start) / step) > 64)
      return NULL; /* keep it small (a NULL here is no API call: skipped below) */
    return lt_arange(device(r), dtype(r), start, stop, step);
  }
  case 5:
    return lt_eye(device(r), dtype(r), pick(r, 7) - 1, pick(r, 7) - 1);
  default: {
    int nd = shape(r, sh);
    lt_dtype dt = dtype(r);
    return flag(r) ? lt_rand_uniform(device(r), dt, sh, nd, -1, 1)
                   : lt_rand_normal(device(r), dt, sh, nd, 0, 1);
  }
  }
}

typedef lt_tensor *(*unary_fn)(lt_tensor *);
typedef lt_tensor *(*binary_fn)(lt_tensor *, lt_tensor *);
typedef lt_tensor *(*reduce_fn)(lt_tensor *, const int *, int, bool);

/* Every public op of the tables in lazytensor_ops.h. */
#define FN_OF_ROW(name, ...) lt_##name,
static const unary_fn kUnary[] = {LT_UNARY_OPS(FN_OF_ROW)};
static const binary_fn kBinary[] = {LT_BINARY_OPS(FN_OF_ROW)};
static const reduce_fn kReduce[] = {LT_REDUCE_OPS(FN_OF_ROW)};

static int axis(reader *r) { return pick(r, 11) - 5; }

static lt_tensor *shape_op(state *s, reader *r) {
  lt_tensor *a = any(s, r);
  int64_t sh[LT_MAX_DIMS], v[2 * LT_MAX_DIMS], w[LT_MAX_DIMS], x[LT_MAX_DIMS];
  int perm[LT_MAX_DIMS];
  switch (pick(r, 10)) {
  case 0: {
    int nd = shape(r, sh);
    if (nd && flag(r)) sh[pick(r, nd)] = -1;
    return lt_reshape(a, sh, nd);
  }
  case 1: {
    int nd = pick(r, 5);
    for (int i = 0; i < nd; i++) perm[i] = pick(r, 6) - 1;
    return lt_permute(a, perm, nd);
  }
  case 2:
    return lt_transpose(a, axis(r), axis(r));
  case 3: {
    int nd = shape(r, sh);
    for (int i = 0; i < nd; i++)
      if (flag(r)) sh[i] = -1;
    return lt_expand(a, sh, nd);
  }
  case 4:
    return flag(r) ? lt_squeeze(a, axis(r)) : lt_unsqueeze(a, axis(r));
  case 5: {
    int nd = a ? lt_ndim(a) : 0;
    for (int i = 0; i < nd; i++) {
      v[i] = pick(r, 9) - 4;
      w[i] = pick(r, 9) - 3;
      x[i] = pick(r, 4); /* 0 is an error */
    }
    /* now and then a count that is not the rank (an error) */
    int n = pick(r, 8) ? nd : nd + 1;
    return lt_slice_n(a, flag(r) ? v : NULL, flag(r) ? w : NULL, flag(r) ? x : NULL, n);
  }
  case 6:
  case 7: {
    lt_tensor *ts[4];
    int n = pick(r, 4) + 1;
    for (int i = 0; i < n; i++) ts[i] = any(s, r);
    return pick(r, 2) ? lt_concat(ts, n, axis(r)) : lt_stack(ts, n, axis(r));
  }
  case 8: {
    int nd = a ? lt_ndim(a) : 0;
    for (int i = 0; i < 2 * nd; i++) v[i] = pick(r, 5) - 1; /* -1 is an error */
    int n = pick(r, 8) ? 2 * nd : 2 * nd - 1;               /* an odd count is an error */
    return lt_pad_n(a, v, n, value(r));
  }
  default:
    return lt_cast(a, dtype(r));
  }
}

/* The normalisations, with operands drawn from the pool (so often of the
 * wrong shape or dtype), any flags and eps; batch_norm's running statistics
 * may be updated in place. */
static lt_tensor *norm_op(state *s, reader *r) {
  lt_tensor *x = any(s, r), *p[4];
  for (int i = 0; i < 4; i++) p[i] = flag(r) ? any(s, r) : NULL;
  double eps = flag(r) ? value(r) : 1e-5;
  switch (pick(r, 3)) {
  case 0:
    return lt_batch_norm(x, p[0], p[1], p[2], p[3], flag(r), flag(r) ? value(r) : 0.1, eps);
  case 1: { /* mostly x's trailing dims, sometimes other sizes or counts */
    int64_t ns[LT_MAX_DIMS];
    int nd = x ? lt_ndim(x) : 0, nn = pick(r, nd + 2);
    if (nn > LT_MAX_DIMS) nn = LT_MAX_DIMS;
    for (int i = 0; i < nn; i++) {
      int d = nd - nn + i;
      ns[i] = d >= 0 && !flag(r) ? lt_shape(x)[d] : pick(r, 5);
    }
    return lt_layer_norm(x, ns, nn, p[2], p[3], eps);
  }
  default:
    return lt_group_norm(x, pick(r, 5) - 1, p[2], p[3], eps);
  }
}

static lt_tensor *index_op(state *s, reader *r) {
  lt_tensor *a = any(s, r), *b = any(s, r), *v = NULL, *i = NULL;
  switch (pick(r, 16)) {
  case 0:
    return lt_gather(a, axis(r), b);
  case 1:
    return lt_index_select(a, axis(r), b);
  case 2:
    return lt_one_hot(a, pick(r, 8) - 1, dtype(r));
  case 3:
    return lt_where(a, b, any(s, r));
  case 4:
    return flag(r) ? lt_argmax(a, axis(r), flag(r)) : lt_argmin(a, axis(r), flag(r));
  case 5:
    return flag(r) ? lt_softmax(a, axis(r)) : lt_log_softmax(a, axis(r));
  case 6:
    return lt_clamp(a, flag(r) ? NAN : value(r), flag(r) ? NAN : value(r));
  case 7:
    return lt_dropout(a, pick(r, 4) / 4.0, flag(r));
  case 8:
    return flag(r) ? lt_cumsum(a, axis(r)) : lt_argsort(a, axis(r), flag(r));
  case 9: /* one output kept, the other (if asked for) left to the scope */
    if (lt_sort(a, axis(r), flag(r), flag(r) ? &v : NULL, &i) < 0) return NULL;
    return i;
  case 10:
    if (lt_topk(a, pick(r, 8) - 1, axis(r), flag(r), &v, flag(r) ? &i : NULL) < 0) return NULL;
    return v;
  case 11:
    return norm_op(s, r);
  case 12:
    return lt_masked_fill(a, b, value(r));
  case 13: /* diagonals from far below to far above */
    return flag(r) ? lt_tril(a, pick(r, 9) - 4)
                   : lt_triu(a, (int64_t)(pick(r, 9) - 4) * ((int64_t)1 << 40));
  case 14:
    return lt_embedding(a, b);
  default:
    return lt_bernoulli(a);
  }
}

/* Small pairs from -1 to 3 (-1, and 0 where a size must be positive, are
 * errors) with a count *n from -1 to 3 (0: none, NULL or not; -1 and 3 are
 * errors, and so is a kernel with none). */
static const int64_t *pair(reader *r, int64_t *v, int *n) {
  *n = pick(r, 5) - 1;
  if (*n == 0 && flag(r)) return NULL;
  v[0] = pick(r, 5) - 1;
  v[1] = pick(r, 5) - 1;
  return v;
}

static lt_tensor *window_op(state *s, reader *r) {
  lt_tensor *a = any(s, r), *b = any(s, r);
  int64_t k[2], st[2], p[2], d[2], o[2];
  int nk, nst, np, nd, no;
  /* drawn in this order whatever the op, so that an input means one call */
  const int64_t *pk = pair(r, k, &nk), *pst = pair(r, st, &nst), *pp = pair(r, p, &np),
                *pd = pair(r, d, &nd), *po = pair(r, o, &no);
  switch (pick(r, 7)) {
  case 0:
    return lt_conv2d_n(a, b, flag(r) ? any(s, r) : NULL, pst, nst, pp, np, pd, nd, pick(r, 4));
  case 1:
    return lt_conv_transpose2d_n(a, b, flag(r) ? any(s, r) : NULL, pst, nst, pp, np, po, no, pd, nd,
                                 pick(r, 4));
  case 2:
    return lt_max_pool2d_n(a, pk, nk, pst, nst, pp, np, pd, nd, flag(r));
  case 3:
    return lt_avg_pool2d_n(a, pk, nk, pst, nst, pp, np, flag(r), flag(r), pick(r, 4) - 1);
  case 4:
    return lt_adaptive_avg_pool2d_n(a, po, no);
  case 5: /* q, k, v, an optional mask, causal, a scale (NaN: the default) */
    return lt_scaled_dot_product_attention(a, b, any(s, r), flag(r) ? any(s, r) : NULL, flag(r),
                                           flag(r) ? value(r) : NAN);
  default:
    return lt_flatten(a, axis(r), axis(r));
  }
}

static void run(state *s, reader *r) {
  lt_clear_error();
  switch (pick(r, 15)) {
  case 0:
  case 1: {
    lt_tensor *t = create(r);
    if (t || lt_last_status() != LT_OK) keep(s, r, t, "create");
    break;
  }
  case 2:
  case 3:
    keep(s, r, kUnary[pick(r, sizeof kUnary / sizeof *kUnary)](any(s, r)), "unary");
    break;
  case 4:
  case 5:
    keep(s, r, kBinary[pick(r, sizeof kBinary / sizeof *kBinary)](any(s, r), any(s, r)), "binary");
    break;
  case 6: {
    int axes[4], n = pick(r, 4);
    for (int i = 0; i < n; i++) axes[i] = axis(r);
    keep(s, r, kReduce[pick(r, sizeof kReduce / sizeof *kReduce)](any(s, r), axes, n, flag(r)),
         "reduce");
    break;
  }
  case 7:
  case 8:
    keep(s, r, shape_op(s, r), "shape op");
    break;
  case 9:
    keep(s, r, index_op(s, r), "index op");
    break;
  case 10: {
    lt_tensor *t = any(s, r);
    if (!t) break;
    size_t bytes = (size_t)lt_numel(t) * lt_dtype_size(lt_get_dtype(t));
    void *dst = malloc(bytes + 1);
    if (!dst) abort();
    check_rc(lt_to_data(t, dst, bytes - (bytes && flag(r) && flag(r))), "lt_to_data");
    free(dst);
    break;
  }
  case 11: {
    lt_tensor *ts[3];
    int n = pick(r, 3) + 1;
    for (int i = 0; i < n; i++) ts[i] = any(s, r);
    if (s->n) check_rc(lt_sync(ts, n, flag(r)), "lt_sync");
    break;
  }
  case 12:
    check_rc(lt_mark_step(device(r)), "lt_mark_step");
    break;
  case 13:
    keep(s, r, window_op(s, r), "window op");
    break;
  default: {
    lt_tensor *d = any(s, r), *v = any(s, r);
    if (d && v) check_rc(lt_assign(d, v), "lt_assign");
    break;
  }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size, 0};
  state s = {{0}, 0};
  lt_scope_begin();
  for (int i = 0; i < MAX_OPS && r.pos < r.n; i++) run(&s, &r);
  lt_scope_end();
  /* errors of asynchronous steps are reported once: drain them */
  for (int d = 0; d < 2; d++) {
    lt_clear_error();
    int rc = lt_wait_device_ops(lt_cpu(d));
    if (rc < 0) failed_clearly("lt_wait_device_ops", rc);
    if (lt_device_live_tensors(lt_cpu(d)) != 0) {
      fprintf(stderr, "fuzz_ops: %lld tensors left alive on CPU:%d after the scope\n",
              (long long)lt_device_live_tensors(lt_cpu(d)), d);
      abort();
    }
  }
  lt_clear_error();
  return 0;
}
