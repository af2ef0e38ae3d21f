/* Finite-difference gradient checks for the autograd tests (f64). */
#ifndef LT_TEST_GRAD_UTIL_H
#define LT_TEST_GRAD_UTIL_H

#include "test_util.h"

/* Builds the output of the op under test from its inputs. */
typedef lt_tensor *(*tg_fn)(lt_tensor *const *in, void *ud);

typedef struct tg_input {
  const int64_t *shape;
  int ndim;
  const double *values; /* numel values */
  bool differentiable;  /* false: held fixed (e.g. an index or a mask) */
  lt_dtype dtype;       /* LT_F64 unless an index */
} tg_input;

/* loss(x) = sum(f(x) * R) with fixed pseudo-random weights R, so that
 * gradients that cancel under a plain sum are still checked. */
static inline lt_tensor *tg_loss(tg_fn f, void *ud, lt_tensor *const *in, double **weights) {
  lt_tensor *y = f(in, ud);
  if (!y) return NULL;
  int64_t n = lt_numel(y);
  if (!*weights) {
    *weights = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) (*weights)[i] = 0.5 + 0.37 * (double)((i * 7919) % 13) / 13.0;
  }
  lt_tensor *r = lt_from_data(CPU0, LT_F64, lt_shape(y), lt_ndim(y), *weights);
  return lt_sum(lt_mul(lt_cast(y, LT_F64), r), NULL, 0, false);
}

static inline lt_tensor *tg_make(const tg_input *in) {
  lt_dtype dt = in->dtype ? in->dtype : LT_F64;
  int64_t n = 1;
  for (int d = 0; d < in->ndim; d++) n *= in->shape[d];
  if (dt == LT_F64) return lt_from_data(CPU0, LT_F64, in->shape, in->ndim, in->values);
  int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) iv[i] = (int64_t)in->values[i];
  lt_tensor *t = lt_cast(lt_from_data(CPU0, LT_I64, in->shape, in->ndim, iv), dt);
  free(iv);
  return t;
}

static inline double tg_eval(tg_fn f, void *ud, const tg_input *ins, int nin, double **w) {
  lt_scope_begin();
  lt_tensor *in[16];
  for (int i = 0; i < nin; i++) in[i] = tg_make(&ins[i]);
  double v = NAN;
  lt_tensor *loss = tg_loss(f, ud, in, w);
  if (!loss || lt_item(loss, 0, &v) != LT_OK) fail_msg("tg_eval: %s", lt_last_error());
  lt_scope_end();
  return v;
}

/* Compares backward's gradients with central differences (step h) within
 * tu_near(analytic, numeric, tol). */
static inline void tg_check(const char *name, tg_fn f, void *ud, const tg_input *ins, int nin,
                            double tol) {
  double *w = NULL;
  lt_scope_begin();
  lt_tensor *in[16];
  for (int i = 0; i < nin; i++) {
    in[i] = tg_make(&ins[i]);
    if (ins[i].differentiable) assert_int_equal(lt_set_requires_grad(in[i], true), LT_OK);
  }
  lt_tensor *loss = tg_loss(f, ud, in, &w);
  if (!loss) fail_msg("%s: %s", name, lt_last_error());
  if (lt_backward(loss) != LT_OK) fail_msg("%s: lt_backward: %s", name, lt_last_error());
  for (int i = 0; i < nin; i++) {
    if (!ins[i].differentiable) continue;
    int64_t n = lt_numel(in[i]);
    double *ga = calloc((size_t)n + 1, sizeof(double));
    lt_tensor *g = lt_grad(in[i]);
    if (g) tu_read(g, ga, n); /* no gradient at all means zeros */
    for (int64_t j = 0; j < n; j++) {
      double h = 1e-6 * (1 + fabs(ins[i].values[j]));
      tg_input pert[16];
      double *vals = malloc(sizeof(double) * (size_t)n);
      memcpy(vals, ins[i].values, sizeof(double) * (size_t)n);
      for (int k = 0; k < nin; k++) pert[k] = ins[k];
      pert[i].values = vals;
      vals[j] = ins[i].values[j] + h;
      double up = tg_eval(f, ud, pert, nin, &w);
      vals[j] = ins[i].values[j] - h;
      double down = tg_eval(f, ud, pert, nin, &w);
      free(vals);
      double num = (up - down) / (2 * h);
      if (!tu_near(ga[j], num, tol))
        fail_msg("%s: d/d input %d [%lld]: backward %.9g, finite difference %.9g", name, i,
                 (long long)j, ga[j], num);
    }
    free(ga);
  }
  lt_scope_end();
  free(w);
}

/* n (at most 256) distinct values in about [-2, 2], none near 0, from seed:
 * inputs whose gradients are neither tied nor at a kink. The pool keeps the
 * last 8 results alive, so a test may hold several at once. */
static inline double *tg_vals(int n, double seed) {
  static double pool[8][256];
  static int next;
  double *v = pool[next++ % 8];
  for (int i = 0; i < n; i++) {
    double x = 2.0 * sin(1.7 * i + seed) + 0.013 * i;
    v[i] = fabs(x) < 0.1 ? x + 0.3 : x;
  }
  return v;
}

#endif
