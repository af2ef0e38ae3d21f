/* lt_scaled_dot_product_attention: values against a plain C loop (double
 * math) and against the library's own composition (matmul, mask, softmax),
 * on ref and cpu; mask kinds, causal, broadcast batch dims, odd and unequal
 * sequence lengths, large scores, rows that see nothing; gradients against
 * finite differences; bad input. */
#include "test_grad_util.h"
#include "test_backends.h"

#include "../src/ops/lt_ops.h"
#include "../src/ops/op_attention.h"

enum { MASK_NONE = 0, MASK_BOOL = 1, MASK_ADD = 2 };

/* ---- the oracle --------------------------------------------------------------------- */

/* out[b, i, :] = softmax_j(scale q_i . k_j + bias_ij) v_j over flat [B, L, E],
 * [B, S, E], [B, S, Ev], mask [B, L, S] (a bool mask holds 0 / 1). A row whose
 * every bias is -inf is NaN (torch's math). */
static void oracle(const double *q, const double *k, const double *v, const double *mask, int kind,
                   bool causal, double scale, int64_t B, int64_t L, int64_t S, int64_t E,
                   int64_t Ev, double *out) {
  double *s = malloc(sizeof(double) * (size_t)(S + 1));
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < L; i++) {
      double m = -INFINITY;
      for (int64_t j = 0; j < S; j++) {
        double d = 0;
        for (int64_t e = 0; e < E; e++) d += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
        d *= scale;
        double mv = mask ? mask[(b * L + i) * S + j] : 0;
        if (kind == MASK_BOOL && mv == 0) d = -INFINITY;
        if (kind == MASK_ADD) d += mv;
        if (causal && j > i) d = -INFINITY;
        s[j] = d;
        if (d > m) m = d;
      }
      double *o = out + (b * L + i) * Ev;
      if (m == -INFINITY) {
        for (int64_t e = 0; e < Ev; e++) o[e] = NAN;
        continue;
      }
      double sum = 0;
      for (int64_t j = 0; j < S; j++) sum += s[j] = exp(s[j] - m);
      for (int64_t e = 0; e < Ev; e++) {
        double acc = 0;
        for (int64_t j = 0; j < S; j++) acc += s[j] * v[(b * S + j) * Ev + e];
        o[e] = acc / sum;
      }
    }
  free(s);
}

/* ---- helpers ------------------------------------------------------------------------ */

/* n values in about [-amp, amp] from seed (deterministic). */
static double *vals(int64_t n, double seed, double amp) {
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = amp * sin(1.3 * (double)i + seed) * cos(0.7 * (double)i);
  return v;
}

/* A tensor of dtype dt holding v (f64 values). */
static lt_tensor *mk(lt_dtype dt, const int64_t *shape, int nd, const double *v) {
  lt_tensor *t = lt_from_data(CPU0, LT_F64, shape, nd, v);
  return dt == LT_F64 ? t : lt_cast(t, dt);
}

/* got (tensor) against want (n values), NaN matching NaN. */
static void expect_near(const char *what, lt_tensor *t, const double *want, int64_t n, double tol) {
  if (!t) fail_msg("%s: NULL: %s", what, lt_last_error());
  assert_int_equal(lt_numel(t), n);
  double *got = tu_values(t);
  for (int64_t i = 0; i < n; i++) {
    if (isnan(want[i]) && isnan(got[i])) continue;
    if (!tu_near(got[i], want[i], tol))
      fail_msg("%s: element %lld: got %.9g, want %.9g", what, (long long)i, got[i], want[i]);
  }
  free(got);
}

/* got against want, both n values. */
static void expect_near_arrays(const char *what, const double *got, const double *want, int64_t n,
                               double tol) {
  for (int64_t i = 0; i < n; i++)
    if (!tu_near(got[i], want[i], tol))
      fail_msg("%s: element %lld: got %.9g, want %.9g", what, (long long)i, got[i], want[i]);
}

/* The attention as the library's own composition of public ops. */
static lt_tensor *composed(lt_tensor *q, lt_tensor *k, lt_tensor *v, lt_tensor *mask, bool causal,
                           double scale) {
  lt_tensor *s =
      lt_mul(lt_matmul(q, lt_transpose(k, -2, -1)), lt_scalar(CPU0, lt_get_dtype(q), scale));
  int64_t L = lt_dim(q, -2), S = lt_dim(k, -2);
  if (causal) {
    uint8_t *keep = malloc((size_t)(L * S + 1));
    for (int64_t i = 0; i < L; i++)
      for (int64_t j = 0; j < S; j++) keep[i * S + j] = j <= i;
    mask = tu_bool(SHAPE(L, S), 2, keep);
    free(keep);
  }
  lt_tensor *ninf = lt_scalar(CPU0, lt_get_dtype(q), -INFINITY);
  if (mask) s = lt_get_dtype(mask) == LT_BOOL ? lt_where(mask, s, ninf) : lt_add(s, mask);
  return lt_matmul(lt_softmax(s, -1), v);
}

typedef struct fwd_case {
  int64_t B, L, S, E, Ev;
  int kind;
  bool causal;
  double scale; /* passed as given; NaN: the default */
  double amp;   /* magnitude of q and k */
} fwd_case;

/* The f32 tolerance of case c (tu_near's, the outputs being at most 1): a
 * score sums E products of at most amp^2 * scale (and the additive mask, at
 * most 2); an error d in the scores moves the softmax weights by a factor
 * within e^(2d), so the output, a weighted mean of v (|v| <= 1), by up to 2d
 * more besides its own sum of S products. Holds for any summation order
 * (matmul, softmax, the cpu kernel's blocks), compared with the f64 oracle or
 * the f32 composition. */
static double f32_tol(const fwd_case *c, double scale) {
  double d = tu_f32_sum_tol(c->E + 1, fmax(c->amp * c->amp * fabs(scale), 2.0));
  return 2.5 * d + tu_f32_sum_tol(c->S, 1.0);
}

/* One case on one backend and dtype: the op against the oracle and the
 * composition. */
static void run_case(const fwd_case *c, lt_dtype dt) {
  int64_t B = c->B, L = c->L, S = c->S, E = c->E, Ev = c->Ev;
  double *q = vals(B * L * E, 0.3, c->amp), *k = vals(B * S * E, 1.1, c->amp),
         *v = vals(B * S * Ev, 2.2, 1.0);
  double *m = NULL;
  if (c->kind == MASK_BOOL) {
    m = malloc(sizeof(double) * (size_t)(B * L * S));
    for (int64_t i = 0; i < B * L * S; i++) m[i] = (i * 7 + i / S) % 3 != 0;
  } else if (c->kind == MASK_ADD) {
    m = vals(B * L * S, 4.0, 2.0);
  }
  double scale = isnan(c->scale) || c->scale <= 0 ? 1.0 / sqrt((double)E) : c->scale;
  double *want = malloc(sizeof(double) * (size_t)(B * L * Ev + 1));
  oracle(q, k, v, m, c->kind, c->causal, scale, B, L, S, E, Ev, want);

  lt_scope_begin();
  lt_tensor *tq = mk(dt, SHAPE(B, L, E), 3, q), *tk = mk(dt, SHAPE(B, S, E), 3, k),
            *tv = mk(dt, SHAPE(B, S, Ev), 3, v), *tm = NULL;
  if (c->kind == MASK_BOOL)
    tm = lt_cast(mk(LT_F64, SHAPE(B, L, S), 3, m), LT_BOOL);
  else if (c->kind == MASK_ADD)
    tm = mk(dt, SHAPE(B, L, S), 3, m);
  lt_tensor *o = lt_scaled_dot_product_attention(tq, tk, tv, tm, c->causal, c->scale);
  char what[128];
  snprintf(what, sizeof what, "B%lld L%lld S%lld E%lld Ev%lld mask %d causal %d %s", (long long)B,
           (long long)L, (long long)S, (long long)E, (long long)Ev, c->kind, c->causal,
           lt_dtype_name(dt));
  if (!o) fail_msg("%s: %s", what, lt_last_error());
  assert_int_equal(lt_get_dtype(o), dt);
  assert_int_equal(lt_ndim(o), 3);
  assert_int_equal(lt_dim(o, 0), B);
  assert_int_equal(lt_dim(o, 1), L);
  assert_int_equal(lt_dim(o, 2), Ev);
  double tol = dt == LT_F32 ? f32_tol(c, scale) : 1e-11;
  expect_near(what, o, want, B * L * Ev, tol);
  lt_tensor *ref = composed(tq, tk, tv, tm, c->causal, scale);
  double *rv = tu_values(ref);
  expect_near(what, o, rv, B * L * Ev, tol);
  free(rv);
  lt_scope_end();
  free(q), free(k), free(v), free(m), free(want);
}

static void test_forward(void **state) {
  (void)state;
  const fwd_case cases[] = {
      {2, 4, 4, 3, 3, MASK_NONE, false, NAN, 1.0},
      {2, 4, 4, 3, 5, MASK_NONE, true, NAN, 1.0},
      {3, 5, 7, 4, 2, MASK_BOOL, false, NAN, 1.0},
      {3, 7, 5, 4, 2, MASK_ADD, false, 0.5, 1.0},
      {1, 1, 9, 5, 3, MASK_NONE, false, NAN, 1.0},
      {1, 1, 1, 1, 1, MASK_NONE, true, NAN, 1.0},
      {2, 9, 3, 2, 4, MASK_NONE, true, 0, 1.0},
      {2, 6, 11, 3, 3, MASK_NONE, true, 2.0, 1.0},
      {2, 33, 47, 5, 7, MASK_NONE, true, NAN, 1.0},
      {2, 40, 70, 8, 6, MASK_BOOL, false, NAN, 1.0},
      {1, 17, 65, 8, 9, MASK_ADD, false, NAN, 1.0},
      {2, 5, 6, 3, 3, MASK_NONE, false, NAN, 100.0},
      {2, 64, 64, 32, 32, MASK_NONE, true, NAN, 1.0},
      /* several query and key blocks of the cpu kernel (32 x 64): the
       * running maximum and sum are rescaled from block to block */
      {1, 70, 150, 8, 8, MASK_NONE, true, NAN, 1.0},
      {1, 66, 130, 4, 5, MASK_ADD, false, NAN, 1.0},
      {2, 33, 129, 3, 2, MASK_BOOL, false, NAN, 1.0},
      {1, 150, 70, 5, 3, MASK_NONE, true, NAN, 1.0},
  };
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      run_case(&cases[i], LT_F32);
      run_case(&cases[i], LT_F64);
    }
    lt__backend_force(NULL);
  }
}

/* Scores of about 1e4: exp must see them minus the row's maximum. */
static void test_large_scores(void **state) {
  (void)state;
  const fwd_case cases[] = {
      {2, 5, 6, 2, 3, MASK_NONE, false, 1.0, 70.0},
      {2, 5, 6, 2, 3, MASK_NONE, true, 1.0, 70.0},
      {1, 3, 37, 1, 2, MASK_ADD, false, 1.0, 100.0},
      {1, 5, 140, 2, 3, MASK_NONE, false, 1.0, 70.0},
      {1, 70, 140, 2, 3, MASK_NONE, true, 1.0, 70.0},
  };
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      run_case(&cases[i], LT_F32);
      run_case(&cases[i], LT_F64);
    }
    lt__backend_force(NULL);
  }
}

/* A row that sees no position is NaN; the others are unaffected. */
static void test_fully_masked_rows(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (int dti = 0; dti < 2; dti++) {
      lt_dtype dt = dti ? LT_F64 : LT_F32;
      lt_scope_begin();
      double q[2 * 2] = {1, 2, 3, 4}, k[3 * 2] = {1, 0, 0, 1, 1, 1}, v[3] = {1, 2, 3};
      double mb[2 * 3] = {0, 0, 0, 1, 0, 1};
      double ma[2 * 3] = {0, 0, 0, -INFINITY, -INFINITY, -INFINITY};
      double want[2];
      oracle(q, k, v, mb, MASK_BOOL, false, 0.5, 1, 2, 3, 2, 1, want);
      assert_true(isnan(want[0]) && !isnan(want[1]));
      lt_tensor *tq = mk(dt, SHAPE(2, 2), 2, q), *tk = mk(dt, SHAPE(3, 2), 2, k),
                *tv = mk(dt, SHAPE(3, 1), 2, v);
      lt_tensor *bm = lt_cast(mk(LT_F64, SHAPE(2, 3), 2, mb), LT_BOOL);
      expect_near("bool", lt_scaled_dot_product_attention(tq, tk, tv, bm, false, 0.5), want, 2,
                  1e-6);
      oracle(q, k, v, ma, MASK_ADD, false, 0.5, 1, 2, 3, 2, 1, want);
      assert_true(!isnan(want[0]) && isnan(want[1]));
      expect_near(
          "additive",
          lt_scaled_dot_product_attention(tq, tk, tv, mk(dt, SHAPE(2, 3), 2, ma), false, 0.5), want,
          2, 1e-6);
      lt_scope_end();
    }
    lt__backend_force(NULL);
  }
}

/* Rows whose first visible key lies in a later key block of the cpu kernel
 * (the running maximum starts at -inf there), or only in the first and the
 * last. */
static void test_mask_in_later_block(void **state) {
  (void)state;
  const int64_t L = 3, S = 130, E = 2, Ev = 3;
  double *q = vals(L * E, 0.2, 3), *k = vals(S * E, 1.2, 3), *v = vals(S * Ev, 2.2, 1);
  double *m = calloc((size_t)(L * S), sizeof(double));
  m[0 * S + 100] = 1;
  m[1 * S + 0] = m[1 * S + 129] = 1;
  for (int64_t j = 64; j < S; j++) m[2 * S + j] = 1;
  double want[3 * 3];
  oracle(q, k, v, m, MASK_BOOL, false, 0.9, 1, L, S, E, Ev, want);
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    lt_tensor *o = lt_scaled_dot_product_attention(
        mk(LT_F32, SHAPE(L, E), 2, q), mk(LT_F32, SHAPE(S, E), 2, k),
        mk(LT_F32, SHAPE(S, Ev), 2, v), lt_cast(mk(LT_F64, SHAPE(L, S), 2, m), LT_BOOL), false,
        0.9);
    expect_near("later block", o, want, L * Ev,
                f32_tol(&(fwd_case){.S = S, .E = E, .amp = 3}, 0.9));
    lt_scope_end();
    lt__backend_force(NULL);
  }
  free(q), free(k), free(v), free(m);
}

/* A NaN score makes its row NaN (softmax's), and only its row. */
static void test_nan_scores(void **state) {
  (void)state;
  const int64_t L = 3, S = 70, E = 2, Ev = 2;
  double *q = vals(L * E, 0.5, 1), *k = vals(S * E, 1.5, 1), *v = vals(S * Ev, 2.5, 1);
  k[66 * E] = NAN; /* key 66: every row's score there is NaN (in the second key block) */
  q[1 * E] = -NAN; /* row 1: all its scores are NaN, with the sign bit */
  double want[3 * 2];
  oracle(q, k, v, NULL, MASK_NONE, false, 0.5, 1, L, S, E, Ev, want);
  k[66 * E] = 0.25;
  double want2[3 * 2];
  oracle(q, k, v, NULL, MASK_NONE, true, 0.5, 1, L, S, E, Ev, want2);
  assert_true(isnan(want[0]) && isnan(want[2]) && isnan(want[4]));
  assert_true(isnan(want2[2]) && !isnan(want2[0]) && !isnan(want2[4]));
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    k[66 * E] = NAN;
    expect_near("nan key",
                lt_scaled_dot_product_attention(mk(LT_F32, SHAPE(L, E), 2, q),
                                                mk(LT_F32, SHAPE(S, E), 2, k),
                                                mk(LT_F32, SHAPE(S, Ev), 2, v), NULL, false, 0.5),
                want, L * Ev, f32_tol(&(fwd_case){.S = S, .E = E, .amp = 1}, 0.5));
    k[66 * E] = 0.25;
    expect_near("nan query row",
                lt_scaled_dot_product_attention(mk(LT_F32, SHAPE(L, E), 2, q),
                                                mk(LT_F32, SHAPE(S, E), 2, k),
                                                mk(LT_F32, SHAPE(S, Ev), 2, v), NULL, true, 0.5),
                want2, L * Ev, f32_tol(&(fwd_case){.S = S, .E = E, .amp = 1}, 0.5));
    lt_scope_end();
    lt__backend_force(NULL);
  }
  free(q), free(k), free(v);
}

/* Batch dims broadcast among q, k, v; the mask broadcasts to the scores. The
 * oracle runs on the operands expanded by hand. */
static void test_broadcast(void **state) {
  (void)state;
  const int64_t L = 3, S = 5, E = 2, Ev = 3;
  double *q = vals(2 * 3 * L * E, 0.1, 1), *k = vals(3 * S * E, 0.5, 1),
         *v = vals(2 * S * Ev, 0.9, 1), *m = vals(L * S, 1.7, 1);
  const int64_t B = 6;
  double *qe = malloc(sizeof(double) * B * L * E), *ke = malloc(sizeof(double) * B * S * E),
         *ve = malloc(sizeof(double) * B * S * Ev), *me = malloc(sizeof(double) * B * L * S);
  for (int64_t a = 0; a < 2; a++)
    for (int64_t h = 0; h < 3; h++) {
      int64_t b = a * 3 + h;
      memcpy(qe + b * L * E, q + b * L * E, sizeof(double) * L * E);
      memcpy(ke + b * S * E, k + h * S * E, sizeof(double) * S * E);
      memcpy(ve + b * S * Ev, v + a * S * Ev, sizeof(double) * S * Ev);
      memcpy(me + b * L * S, m, sizeof(double) * L * S);
    }
  double want[6 * 3 * 3];
  oracle(qe, ke, ve, me, MASK_ADD, false, 0.7, B, L, S, E, Ev, want);
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    lt_scope_begin();
    /* q [2, 3, L, E], k [3, S, E], v [2, 1, S, Ev], mask [L, S] */
    lt_tensor *o = lt_scaled_dot_product_attention(
        mk(LT_F32, SHAPE(2, 3, L, E), 4, q), mk(LT_F32, SHAPE(3, S, E), 3, k),
        mk(LT_F32, SHAPE(2, 1, S, Ev), 4, v), mk(LT_F32, SHAPE(L, S), 2, m), false, 0.7);
    assert_non_null(o);
    assert_int_equal(lt_ndim(o), 4);
    assert_int_equal(lt_dim(o, 0), 2);
    assert_int_equal(lt_dim(o, 1), 3);
    assert_int_equal(lt_dim(o, 2), L);
    assert_int_equal(lt_dim(o, 3), Ev);
    expect_near("broadcast", o, want, B * L * Ev,
                f32_tol(&(fwd_case){.S = S, .E = E, .amp = 1}, 0.7));
    lt_scope_end();
    lt__backend_force(NULL);
  }
  free(q), free(k), free(v), free(m), free(qe), free(ke), free(ve), free(me);
}

/* Promotion (f32 with f64 is f64), 2-d operands, empty results. */
static void test_dtypes_and_shapes(void **state) {
  (void)state;
  double q[2 * 2] = {1, 2, 3, 4}, k[3 * 2] = {1, 0, 0, 1, 1, 1}, v[3 * 2] = {1, 2, 3, 4, 5, 6};
  double want[2 * 2];
  oracle(q, k, v, NULL, MASK_NONE, true, 1 / sqrt(2.0), 1, 2, 3, 2, 2, want);
  lt_tensor *o =
      lt_scaled_dot_product_attention(mk(LT_F32, SHAPE(2, 2), 2, q), mk(LT_F64, SHAPE(3, 2), 2, k),
                                      mk(LT_F32, SHAPE(3, 2), 2, v), NULL, true, NAN);
  tu_expect(o, LT_F64, SHAPE(2, 2), 2, want, 1e-7);
  /* no key: the sum of nothing; no query: an empty result */
  lt_tensor *z = lt_scaled_dot_product_attention(
      mk(LT_F32, SHAPE(2, 2), 2, q), lt_zeros(CPU0, LT_F32, SHAPE(0, 2), 2),
      lt_zeros(CPU0, LT_F32, SHAPE(0, 3), 2), NULL, false, NAN);
  tu_expect(z, LT_F32, SHAPE(2, 3), 2, (double[]){0, 0, 0, 0, 0, 0}, 0);
  lt_tensor *e = lt_scaled_dot_product_attention(lt_zeros(CPU0, LT_F32, SHAPE(4, 0, 2), 3),
                                                 mk(LT_F32, SHAPE(3, 2), 2, k),
                                                 mk(LT_F32, SHAPE(3, 2), 2, v), NULL, true, NAN);
  assert_non_null(e);
  assert_int_equal(lt_numel(e), 0);
  assert_int_equal(lt_dim(e, 0), 4);
}

static void test_errors(void **state) {
  (void)state;
  lt_tensor *q = lt_zeros(CPU0, LT_F32, SHAPE(2, 3, 4), 3);
  lt_tensor *k = lt_zeros(CPU0, LT_F32, SHAPE(2, 5, 4), 3);
  lt_tensor *v = lt_zeros(CPU0, LT_F32, SHAPE(2, 5, 6), 3);
  lt_tensor *bm = lt_zeros(CPU0, LT_BOOL, SHAPE(3, 5), 2);
#define SDPA lt_scaled_dot_product_attention
  TU_EXPECT_ERROR(SDPA(NULL, k, v, NULL, false, NAN), LT_EINVAL, "NULL");
  TU_EXPECT_ERROR(SDPA(lt_zeros(CPU0, LT_F32, SHAPE(4), 1), k, v, NULL, false, NAN), LT_ESHAPE,
                  "at least 2 dims");
  TU_EXPECT_ERROR(SDPA(q, lt_zeros(CPU0, LT_F32, SHAPE(2, 5, 3), 3), v, NULL, false, NAN),
                  LT_ESHAPE, "last dim");
  TU_EXPECT_ERROR(SDPA(q, k, lt_zeros(CPU0, LT_F32, SHAPE(2, 4, 6), 3), NULL, false, NAN),
                  LT_ESHAPE, "sequence dim");
  TU_EXPECT_ERROR(SDPA(q, k, v, bm, true, NAN), LT_EINVAL, "causal");
  TU_EXPECT_ERROR(SDPA(q, k, v, lt_zeros(CPU0, LT_I64, SHAPE(3, 5), 2), false, NAN), LT_EDTYPE,
                  "mask");
  TU_EXPECT_ERROR(SDPA(q, k, v, lt_zeros(CPU0, LT_BOOL, SHAPE(5, 3), 2), false, NAN), LT_ESHAPE,
                  "mask");
  TU_EXPECT_ERROR(SDPA(q, k, v, lt_zeros(CPU0, LT_F32, SHAPE(4, 3, 5), 3), false, NAN), LT_ESHAPE,
                  "mask");
  TU_EXPECT_ERROR(SDPA(lt_zeros(CPU0, LT_I32, SHAPE(2, 3, 4), 3), k, v, NULL, false, NAN),
                  LT_EDTYPE, "floating");
  TU_EXPECT_ERROR(SDPA(q, k, lt_zeros(CPU0, LT_BOOL, SHAPE(2, 5, 6), 3), NULL, false, NAN),
                  LT_EDTYPE, "floating");
  TU_EXPECT_ERROR(SDPA(q, lt_zeros(CPU0, LT_F32, SHAPE(3, 5, 4), 3), v, NULL, false, NAN),
                  LT_ESHAPE, "broadcast");
#undef SDPA
}

/* ---- gradients ------------------------------------------------------------------------ */

typedef struct grad_case {
  int kind;
  bool causal;
  double scale;
} grad_case;

static lt_tensor *apply_sdpa(lt_tensor *const *in, void *ud) {
  const grad_case *c = ud;
  lt_tensor *m = NULL;
  if (c->kind == MASK_BOOL) m = lt_cast(in[3], LT_BOOL);
  if (c->kind == MASK_ADD) m = in[3];
  return lt_scaled_dot_product_attention(in[0], in[1], in[2], m, c->causal, c->scale);
}

static void test_grad(void **state) {
  (void)state;
  const int64_t B = 2, L = 3, S = 4, E = 2, Ev = 3;
  double mb[2 * 3 * 4];
  for (int i = 0; i < 24; i++) mb[i] = (i % 5) != 1; /* every row sees something */
  tg_input in[4] = {
      {SHAPE(B, L, E), 3, tg_vals(B * L * E, 0.2), true, LT_F64},
      {SHAPE(B, S, E), 3, tg_vals(B * S * E, 1.3), true, LT_F64},
      {SHAPE(B, S, Ev), 3, tg_vals(B * S * Ev, 2.4), true, LT_F64},
      {SHAPE(B, L, S), 3, NULL, false, LT_F64},
  };
  const grad_case plain = {MASK_NONE, false, NAN}, causal = {MASK_NONE, true, 0.8},
                  boolm = {MASK_BOOL, false, NAN}, addm = {MASK_ADD, false, 1.5};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    tg_check("plain", apply_sdpa, (void *)&plain, in, 3, 1e-6);
    tg_check("causal", apply_sdpa, (void *)&causal, in, 3, 1e-6);
    in[3].values = mb;
    tg_check("bool mask", apply_sdpa, (void *)&boolm, in, 4, 1e-6);
    in[3].values = tg_vals(B * L * S, 3.5);
    in[3].differentiable = true;
    tg_check("additive mask", apply_sdpa, (void *)&addm, in, 4, 1e-6);
    in[3].differentiable = false;
    lt__backend_force(NULL);
  }
}

/* Broadcast batch dims and a broadcast mask: gradients sum back over them. */
static lt_tensor *apply_bcast(lt_tensor *const *in, void *ud) {
  (void)ud;
  return lt_scaled_dot_product_attention(in[0], in[1], in[2], in[3], false, NAN);
}

static void test_grad_broadcast(void **state) {
  (void)state;
  tg_input in[4] = {
      {SHAPE(2, 1, 2, 3), 4, tg_vals(12, 0.7), true, LT_F64},
      {SHAPE(2, 3, 3), 3, tg_vals(18, 1.9), true, LT_F64},
      {SHAPE(1, 3, 2), 3, tg_vals(6, 2.9), true, LT_F64},
      {SHAPE(1, 3), 2, tg_vals(3, 0.4), true, LT_F64},
  };
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    tg_check("broadcast", apply_bcast, NULL, in, 4, 1e-6);
    lt__backend_force(NULL);
  }
}

/* As a model uses it: f32 heads split from one projection by reshape and
 * permute (non-contiguous operands), causal, trained through a loss; values
 * and gradients equal those of the library's own composition. */
static void test_model_like_f32(void **state) {
  (void)state;
  const int64_t B = 2, T = 9, H = 2, D = 4, C = H * D;
  double *x = vals(B * T * 3 * C, 0.8, 1.5);
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    double *got[2] = {NULL, NULL}, *grads[2] = {NULL, NULL};
    for (int fused = 0; fused < 2; fused++) {
      lt_scope_begin();
      lt_tensor *qkv = mk(LT_F32, SHAPE(B, T, 3 * C), 3, x);
      lt_set_requires_grad(qkv, true);
      /* [B, T, 3, H, D] -> [3, B, H, T, D] */
      lt_tensor *heads =
          lt_permute(lt_reshape(qkv, SHAPE(B, T, 3, H, D), 5), (int[]){2, 0, 3, 1, 4}, 5);
      lt_tensor *parts[3];
      assert_int_equal(lt_chunk(heads, 3, 0, parts, 3), 3);
      lt_tensor *q = lt_squeeze(parts[0], 0), *k = lt_squeeze(parts[1], 0),
                *v = lt_squeeze(parts[2], 0);
      lt_tensor *o = fused ? lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN)
                           : composed(q, k, v, NULL, true, 1 / sqrt((double)D));
      lt_tensor *y = lt_reshape(lt_permute(o, (int[]){0, 2, 1, 3}, 4), SHAPE(B, T, C), 3);
      assert_int_equal(lt_backward(lt_sum(lt_mul(y, lt_sin(y)), NULL, 0, false)), LT_OK);
      got[fused] = tu_values(y);
      grads[fused] = tu_values(lt_grad(qkv));
      lt_scope_end();
    }
    expect_near_arrays("model-like values", got[1], got[0], B * T * C, 2e-5);
    expect_near_arrays("model-like gradients", grads[1], grads[0], B * T * 3 * C, 2e-4);
    for (int i = 0; i < 2; i++) free(got[i]), free(grads[i]);
    lt__backend_force(NULL);
  }
  free(x);
}

/* The op under reshapes of its result. */
static int result_op(lt_tensor *o) {
  const lt_node *n = lt__tensor_ir(o);
  while (n && n->op == LT_OP_RESHAPE) n = n->operands[0].node;
  return n ? n->op : -1;
}

/* Training at short sequences builds the composite (the probabilities kept
 * for the backward); inference, long sequences and the tests' switch keep
 * the ATTENTION node. Both forms give the same values and gradients. */
static void test_training_form(void **state) {
  (void)state;
  const int64_t B = 2, H = 2, T = 7, D = 3;
  double *x = vals(B * H * T * D * 3, 0.4, 1.2);
  double *got[2], *grads[2];
  for (int fused = 0; fused < 2; fused++) {
    lt__attn_set_fused_always(fused);
    lt_scope_begin();
    lt_tensor *qkv = mk(LT_F32, SHAPE(3, B, T, H, D), 5, x);
    lt_set_requires_grad(qkv, true);
    lt_tensor *parts[3];
    assert_int_equal(lt_chunk(lt_transpose(qkv, 2, 3), 3, 0, parts, 3), 3);
    lt_tensor *q = lt_squeeze(parts[0], 0), *k = lt_squeeze(parts[1], 0),
              *v = lt_squeeze(parts[2], 0);
    lt_tensor *o = lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN);
    assert_int_equal(result_op(o), fused ? LT_OP_ATTENTION : LT_OP_MATMUL);
    assert_int_equal(lt_backward(lt_sum(lt_mul(o, lt_cos(o)), NULL, 0, false)), LT_OK);
    got[fused] = tu_values(o);
    grads[fused] = tu_values(lt_grad(qkv));
    /* no autograd: the fused node */
    lt_no_grad_begin();
    lt_tensor *inf = lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN);
    lt_no_grad_end();
    assert_int_equal(result_op(inf), LT_OP_ATTENTION);
    lt_scope_end();
  }
  lt__attn_set_fused_always(false);
  expect_near_arrays("training form values", got[1], got[0], B * H * T * D,
                     f32_tol(&(fwd_case){.S = T, .E = D, .amp = 1.2}, 1 / sqrt((double)D)));
  expect_near_arrays("training form gradients", grads[1], grads[0], 3 * B * H * T * D, 1e-4);
  /* long sequences: the fused node also in training (more than 128 x 128
   * scores a batch entry) */
  lt_scope_begin();
  lt_tensor *lq = lt_full(CPU0, LT_F32, SHAPE(1, 129, 1), 3, 0.5);
  lt_set_requires_grad(lq, true);
  lt_tensor *lo = lt_scaled_dot_product_attention(lq, lq, lq, NULL, true, NAN);
  assert_int_equal(result_op(lo), LT_OP_ATTENTION);
  lt_scope_end();
  lt__attn_set_fused_always(true);
  for (int i = 0; i < 2; i++) free(got[i]), free(grads[i]);
  free(x);
}

/* Eager mode: the op runs at once, and autograd still reaches its operands. */
static void test_eager(void **state) {
  (void)state;
  const int64_t L = 3, S = 4, E = 2, Ev = 2;
  double *q = vals(L * E, 0.3, 1), *k = vals(S * E, 1.3, 1), *v = vals(S * Ev, 2.3, 1);
  double want[3 * 2];
  oracle(q, k, v, NULL, MASK_NONE, true, 1 / sqrt(2.0), 1, L, S, E, Ev, want);
  double *grads[2];
  for (int eager = 0; eager < 2; eager++) {
    lt_set_eager(eager);
    lt_scope_begin();
    lt_tensor *tq = mk(LT_F32, SHAPE(L, E), 2, q);
    lt_set_requires_grad(tq, true);
    lt_tensor *o = lt_scaled_dot_product_attention(tq, mk(LT_F32, SHAPE(S, E), 2, k),
                                                   mk(LT_F32, SHAPE(S, Ev), 2, v), NULL, true, NAN);
    /* backward before reading o: a read cuts a lazy graph */
    assert_int_equal(lt_backward(lt_sum(lt_mul(o, o), NULL, 0, false)), LT_OK);
    expect_near("eager", o, want, L * Ev,
                f32_tol(&(fwd_case){.S = S, .E = E, .amp = 1}, 1 / sqrt(2.0)));
    grads[eager] = tu_values(lt_grad(tq));
    lt_scope_end();
    lt_set_eager(false);
  }
  /* eager runs op by op, lazy fuses: each gradient element sums about
   * S * (Ev + 2) terms of at most 2 (dO = 2 o, |o|, |v|, |k| <= 1) */
  expect_near_arrays("eager gradient", grads[1], grads[0], L * E,
                     tu_f32_sum_tol(S * (Ev + 2), 2.0));
  free(grads[0]), free(grads[1]), free(q), free(k), free(v);
}

/* Second order: the gradient rule is made of differentiable ops. The
 * gradient of an inner loss with respect to q (k, v, the mask) is checked as
 * a function of its inputs by finite differences. */
static lt_tensor *grad_of(lt_tensor *const *in, void *ud) {
  const grad_case *c = ud;
  int wrt = c->kind == MASK_ADD ? 3 : 0;
  lt_tensor *x = in[wrt];
  lt_set_requires_grad(x, true);
  lt_tensor *y = apply_sdpa(in, ud);
  lt_tensor *w = lt_sin(lt_mul(y, y)); /* not linear */
  if (lt_backward(lt_sum(w, NULL, 0, false)) != LT_OK) return NULL;
  lt_tensor *g = lt_mul(lt_grad(x), lt_scalar(CPU0, LT_F64, 1.0));
  /* the outer check reads every input's gradient: the inner one's go */
  for (int i = 0; i < (c->kind == MASK_ADD ? 4 : 3); i++) lt_zero_grad(in[i]);
  return g;
}

static void test_second_order(void **state) {
  (void)state;
  tg_input in[4] = {
      {SHAPE(1, 3, 2), 3, tg_vals(6, 0.25), true, LT_F64},
      {SHAPE(1, 3, 2), 3, tg_vals(6, 1.35), true, LT_F64},
      {SHAPE(1, 3, 2), 3, tg_vals(6, 2.45), true, LT_F64},
      {SHAPE(1, 3, 3), 3, tg_vals(9, 3.1), true, LT_F64},
  };
  const grad_case causal = {MASK_NONE, true, NAN}, addm = {MASK_ADD, false, 0.9};
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    tg_check("second order causal", grad_of, (void *)&causal, in, 3, 1e-5);
    tg_check("second order additive mask", grad_of, (void *)&addm, in, 4, 1e-5);
    lt__backend_force(NULL);
  }
}

/* ---- the kernels check their instructions ------------------------------------------------ */

/* An ATTENTION node no builder would make: n operands, these attrs, this
 * result shape. */
static lt_tensor *raw(lt_tensor *const *ops, int n, const int64_t *attrs, int nattrs,
                      const int64_t *shape, int nd) {
  lt_node *nodes[4] = {NULL};
  for (int i = 0; i < n; i++) nodes[i] = lt__ir_as(ops[i], lt_get_dtype(ops[i]));
  return lt__make(CPU0, LT_OP_ATTENTION, lt_get_dtype(ops[0]), shape, nd, nodes, n, attrs, nattrs,
                  0.5);
}

/* Attributes and shapes come from decoded bytes too: the kernels refuse
 * what does not fit (LT_EEXEC) rather than read outside their operands. */
static void test_kernels_check_instructions(void **state) {
  (void)state;
  for (int be = 0; be < tu_nbackends(); be++) {
    lt__backend_force(tu_backends[be]);
    for (int dti = 0; dti < 2; dti++) {
      lt_dtype dt = dti ? LT_F64 : LT_F32;
      lt_scope_begin();
      lt_tensor *t[4] = {lt_ones(CPU0, dt, SHAPE(1, 2, 3), 3), lt_ones(CPU0, dt, SHAPE(1, 4, 3), 3),
                         lt_ones(CPU0, dt, SHAPE(1, 4, 2), 3),
                         lt_ones(CPU0, LT_BOOL, SHAPE(1, 2, 4), 3)};
      const int64_t none[2] = {0, 0}, boolm[2] = {0, 1}, causal2[2] = {2, 0}, kind3[2] = {0, 3};
      const int64_t os[3] = {1, 2, 2};
      tu_expect(raw(t, 3, none, 2, os, 3), dt, os, 3, (double[]){1, 1, 1, 1}, 1e-6);
      tu_expect(raw(t, 4, boolm, 2, os, 3), dt, os, 3, (double[]){1, 1, 1, 1}, 1e-6);
      tu_expect_exec_error(raw(t, 3, none, 1, os, 3), "malformed instruction");
      tu_expect_exec_error(raw(t, 3, causal2, 2, os, 3), "malformed instruction");
      tu_expect_exec_error(raw(t, 3, kind3, 2, os, 3), "malformed instruction");
      tu_expect_exec_error(raw(t, 3, boolm, 2, os, 3), "malformed instruction"); /* no mask */
      tu_expect_exec_error(raw(t, 4, none, 2, os, 3), "malformed instruction");  /* extra one */
      tu_expect_exec_error(raw(t, 3, none, 2, SHAPE(1, 2, 3), 3), "shapes do not fit");
      lt_tensor *kbad[3] = {t[0], lt_ones(CPU0, dt, SHAPE(1, 4, 2), 3), t[2]};
      tu_expect_exec_error(raw(kbad, 3, none, 2, os, 3), "shapes do not fit");
      lt_tensor *m2[4] = {t[0], t[1], t[2], lt_ones(CPU0, dt, SHAPE(1, 2, 4), 3)};
      tu_expect_exec_error(raw(m2, 4, boolm, 2, os, 3), "dtypes do not fit");
      lt_tensor *flat[3] = {lt_ones(CPU0, dt, SHAPE(2, 3), 2), t[1], t[2]};
      tu_expect_exec_error(raw(flat, 3, none, 2, os, 3), "rank 3");
      lt_scope_end();
    }
    lt__backend_force(NULL);
  }
}

int main(void) {
  /* the ATTENTION node and its gradient rule everywhere, but in
   * test_training_form */
  lt__attn_set_fused_always(true);
  const struct CMUnitTest tests[] = {
      TU_TEST(test_forward),
      TU_TEST(test_large_scores),
      TU_TEST(test_fully_masked_rows),
      TU_TEST(test_nan_scores),
      TU_TEST(test_mask_in_later_block),
      TU_TEST(test_broadcast),
      TU_TEST(test_dtypes_and_shapes),
      TU_TEST(test_errors),
      TU_TEST(test_grad),
      TU_TEST(test_grad_broadcast),
      TU_TEST(test_model_like_f32),
      TU_TEST(test_training_form),
      TU_TEST(test_eager),
      TU_TEST(test_second_order),
      TU_TEST(test_kernels_check_instructions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
