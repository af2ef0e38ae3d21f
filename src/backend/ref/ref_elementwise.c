/* ref kernels for elementwise ops: every unary op, CAST, every binary op
 * (arithmetic, comparisons, AND/OR) and WHERE, with numpy broadcasting.
 *
 * Domains: an op computes in double when its operands (or, for unary ops, its
 * result) have a float dtype, else in int64 (bool and integers). Integer
 * arithmetic wraps around (two's complement, done in uint64 so that overflow is
 * defined) and is then stored into the result dtype (i32 keeps the low bits).
 *
 * Defined results where C would trap or be undefined:
 *  - integer DIV (the builder never emits it: ints divide in f32) truncates, and
 *    x / 0 gives 0;
 *  - integer POW with a negative exponent gives 1 / a^-b truncated: 1 for a == 1,
 *    +-1 for a == -1, else 0 (also for a == 0), as PyTorch;
 *  - CAST of a float to an integer truncates toward zero, saturates at the
 *    dtype's range and maps NaN to 0 (u8 / i8: saturates at int64's range,
 *    then keeps the low 8 bits, ref_setf); to bool it is v != 0 (NaN is true).
 * Float MAXIMUM/MINIMUM propagate NaN (as torch.maximum); SIGN of NaN and of
 * -0.0 is 0; RELU of NaN is NaN. */
#include <math.h>
#include <stdint.h>

#include "../../core/lt_error.h"
#include "../../core/lt_op_switch.h"
#include "ref.h"

/* ---- element conversions ----
 * A float into an integer or bool buffer converts as CAST (see above):
 * ref_setf, the dtype table's store (core/lt_dtype.h, column F2I). */

/* Reads element i of b as a truth value (non-zero, NaN included, is true). */
static bool get_truth(const lt_buffer *b, int64_t i) {
  return ref_is_float(b->dtype) ? ref_getf(b, i) != 0 : ref_geti(b, i) != 0;
}

/* ---- unary ---- */

static double sigmoid(double x) {
  /* exp of a negative number only, so large |x| neither overflows nor gives NaN. */
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/* The per-op scalar functions below return false for an op they have no
 * case for; their switches list every lt_op (lt_op_switch.h), so a row added
 * to the table and forgotten here fails the build, and anything else that
 * reaches them is reported by name instead of computed as NaN or 0. */

/* *r = op(x) in double. */
static bool unary_f(int op, double x, double *r) {
  double v = 0; /* each case sets it (gcc -O2 cannot see that an op outside the enum returns) */
  if ((unsigned)op >= LT_OP_COUNT) return false;
  switch ((lt_op)op) {
  case LT_OP_NEG:
    v = -x;
    break;
  case LT_OP_ABS:
    v = fabs(x);
    break;
  case LT_OP_SIGN:
    v = (double)((0 < x) - (x < 0));
    break;
  case LT_OP_RELU:
    v = isnan(x) ? x : x > 0 ? x : 0.0;
    break;
  case LT_OP_FLOOR:
    v = floor(x);
    break;
  case LT_OP_CEIL:
    v = ceil(x);
    break;
  case LT_OP_ROUND: /* default rounding mode: half to even */
    v = nearbyint(x);
    break;
  case LT_OP_EXP:
    v = exp(x);
    break;
  case LT_OP_LOG:
    v = log(x);
    break;
  case LT_OP_LOG1P:
    v = log1p(x);
    break;
  case LT_OP_SQRT:
    v = sqrt(x);
    break;
  case LT_OP_RSQRT:
    v = 1.0 / sqrt(x);
    break;
  case LT_OP_SIN:
    v = sin(x);
    break;
  case LT_OP_COS:
    v = cos(x);
    break;
  case LT_OP_TANH:
    v = tanh(x);
    break;
  case LT_OP_SIGMOID:
    v = sigmoid(x);
    break;
  case LT_OP_GELU:
    v = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    break;
  case LT_OP_GELU_TANH: /* torch's approximate='tanh' formula as written (NaN at -inf, as torch) */
    v = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    break;
  case LT_OP_ERF:
    v = erf(x);
    break;
  case LT_OP_SOFTSIGN: /* torch's formula as written: NaN at +-inf */
    v = x / (1.0 + fabs(x));
    break;
  case LT_OP_NOT: /* ref_unary's own loops */
  case LT_OP_CAST:
    LT_OP_CASES_OUTSIDE(UNARY)
    return false;
  }
  *r = v;
  return true;
}

/* *r = op(x) for integers (and bool); false also for the ops that only
 * have a float domain (the builder gives them a float operand or result). */
static bool unary_i(int op, int64_t x, int64_t *r) {
  uint64_t u = (uint64_t)x;
  switch ((lt_op)op) {
  case LT_OP_NEG:
    *r = (int64_t)(0 - u);
    return true;
  case LT_OP_ABS:
    *r = x < 0 ? (int64_t)(0 - u) : x;
    return true;
  case LT_OP_SIGN:
    *r = (0 < x) - (x < 0);
    return true;
  case LT_OP_RELU:
    *r = x > 0 ? x : 0;
    return true;
  case LT_OP_FLOOR: /* integers are already integral */
  case LT_OP_CEIL:
  case LT_OP_ROUND:
    *r = x;
    return true;
    LT_OP_CASES_NOT_INTEGER_UNARY
    LT_OP_CASES_OUTSIDE(UNARY)
    return false;
  }
  return false;
}

static int no_case(const char *kind, int op, lt_dtype dt) {
  return lt__err(LT_EEXEC, "ref: the elementwise kernel has no %s case for op %s (dtype %s)", kind,
                 lt__op_name((lt_op)op), lt_dtype_name(dt));
}

static int ref_unary(const lt_instr *ins, lt_buffer *out, const lt_buffer *a) {
  int64_t n = out->numel;
  if (ins->op == LT_OP_NOT) {
    for (int64_t i = 0; i < n; i++) ref_seti(out, i, !get_truth(a, i));
    return LT_OK;
  }
  if (ins->op == LT_OP_CAST) {
    for (int64_t i = 0; i < n; i++) {
      if (ref_is_float(a->dtype))
        ref_setf(out, i, ref_getf(a, i));
      else
        ref_seti(out, i, ref_geti(a, i));
    }
    return LT_OK;
  }
  /* A float operand or result means the op is computed in double. The
   * probe call rejects an op without a case before any element is written. */
  if (ref_is_float(a->dtype) || ref_is_float(out->dtype)) {
    double r;
    if (!unary_f(ins->op, 0.0, &r)) return no_case("unary", ins->op, (lt_dtype)out->dtype);
    for (int64_t i = 0; i < n; i++) {
      unary_f(ins->op, ref_getf(a, i), &r);
      ref_setf(out, i, r);
    }
    return LT_OK;
  }
  int64_t r;
  if (!unary_i(ins->op, 0, &r)) return no_case("integer unary", ins->op, (lt_dtype)out->dtype);
  for (int64_t i = 0; i < n; i++) {
    unary_i(ins->op, ref_geti(a, i), &r);
    ref_seti(out, i, r);
  }
  return LT_OK;
}

/* ---- binary ---- */

/* Comparisons and logic give 0 or 1 the same way in both domains, so one
 * list of cases serves binary_f and binary_i; each expands it in its own type
 * (int64 operands compared as doubles would lose the bits above 2^53). */
#define REF_COMPARE_LOGIC_CASES(v, a, b) \
  case LT_OP_EQ:                         \
    v = a == b;                          \
    break;                               \
  case LT_OP_NE:                         \
    v = a != b;                          \
    break;                               \
  case LT_OP_LT:                         \
    v = a < b;                           \
    break;                               \
  case LT_OP_LE:                         \
    v = a <= b;                          \
    break;                               \
  case LT_OP_GT:                         \
    v = a > b;                           \
    break;                               \
  case LT_OP_GE:                         \
    v = a >= b;                          \
    break;                               \
  case LT_OP_AND:                        \
    v = a != 0 && b != 0;                \
    break;                               \
  case LT_OP_OR:                         \
    v = a != 0 || b != 0;                \
    break;

/* *r = op(a, b) in double (comparisons and logic give 0 or 1). */
static bool binary_f(int op, double a, double b, double *r) {
  double v = 0; /* each case sets it (gcc -O2 cannot see that an op outside the enum returns) */
  if ((unsigned)op >= LT_OP_COUNT) return false;
  switch ((lt_op)op) {
  case LT_OP_ADD:
    v = a + b;
    break;
  case LT_OP_SUB:
    v = a - b;
    break;
  case LT_OP_MUL:
    v = a * b;
    break;
  case LT_OP_DIV:
    v = a / b;
    break;
  case LT_OP_POW:
    v = pow(a, b);
    break;
  case LT_OP_FMOD:
    v = fmod(a, b);
    break;
  case LT_OP_MAXIMUM:
    v = isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    break;
  case LT_OP_MINIMUM:
    v = isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    break;
    REF_COMPARE_LOGIC_CASES(v, a, b)
    LT_OP_CASES_OUTSIDE_BINARY_COMPARE
    return false;
  }
  *r = v;
  return true;
}

/* a ** b for integers by repeated squaring, wrapping on overflow. */
static int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b % 2) ? -1 : 1;
    return 0;
  }
  uint64_t base = (uint64_t)a, r = 1;
  while (b > 0) {
    if (b & 1) r *= base;
    base *= base;
    b >>= 1;
  }
  return (int64_t)r;
}

/* *r = op(a, b) for integers, wrapping around. */
static bool binary_i(int op, int64_t a, int64_t b, int64_t *r) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int64_t v = 0; /* each case sets it (gcc -O2 cannot see that an op outside the enum returns) */
  if ((unsigned)op >= LT_OP_COUNT) return false;
  switch ((lt_op)op) {
  case LT_OP_ADD:
    v = (int64_t)(ua + ub);
    break;
  case LT_OP_SUB:
    v = (int64_t)(ua - ub);
    break;
  case LT_OP_MUL:
    v = (int64_t)(ua * ub);
    break;
  /* Not emitted by the builder (ints divide in f32); guarded against SIGFPE. */
  case LT_OP_DIV:
    v = b == 0 ? 0 : b == -1 ? (int64_t)(0 - ua) /* INT64_MIN / -1 would trap */ : a / b;
    break;
  case LT_OP_POW:
    v = ipow(a, b);
    break;
  case LT_OP_FMOD: /* never built for integers; guarded against SIGFPE */
    v = b == 0 || b == -1 ? 0 : a % b;
    break;
  case LT_OP_MAXIMUM:
    v = a > b ? a : b;
    break;
  case LT_OP_MINIMUM:
    v = a < b ? a : b;
    break;
    REF_COMPARE_LOGIC_CASES(v, a, b)
    LT_OP_CASES_OUTSIDE_BINARY_COMPARE
    return false;
  }
  *r = v;
  return true;
}
#undef REF_COMPARE_LOGIC_CASES

static int ref_binary(const lt_instr *ins, lt_buffer *out, const lt_buffer *a, const lt_buffer *b) {
  int64_t coords[LT_MAX_DIMS];
  /* Comparisons compute in the operands' domain; arithmetic in the result's
   * (both agree when the builder cast the operands to the result dtype). */
  bool in_float = ref_is_float(a->dtype) || ref_is_float(b->dtype) || ref_is_float(out->dtype);
  double rf;
  int64_t ri;
  if (in_float ? !binary_f(ins->op, 1, 1, &rf) : !binary_i(ins->op, 1, 1, &ri))
    return no_case("binary", ins->op, (lt_dtype)out->dtype);
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, out->shape, out->ndim, coords);
    int64_t ia = lt__bcast_ravel(a->shape, a->ndim, coords, out->ndim);
    int64_t ib = lt__bcast_ravel(b->shape, b->ndim, coords, out->ndim);
    if (in_float) {
      binary_f(ins->op, ref_getf(a, ia), ref_getf(b, ib), &rf);
      ref_setf(out, i, rf);
    } else {
      binary_i(ins->op, ref_geti(a, ia), ref_geti(b, ib), &ri);
      ref_seti(out, i, ri);
    }
  }
  return LT_OK;
}

/* ---- where ---- */

static int ref_where(lt_buffer *out, const lt_buffer *c, const lt_buffer *a, const lt_buffer *b) {
  int64_t coords[LT_MAX_DIMS];
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, out->shape, out->ndim, coords);
    const lt_buffer *src =
        get_truth(c, lt__bcast_ravel(c->shape, c->ndim, coords, out->ndim)) ? a : b;
    int64_t j = lt__bcast_ravel(src->shape, src->ndim, coords, out->ndim);
    if (!ref_is_float(src->dtype))
      ref_seti(out, i, ref_geti(src, j));
    else
      ref_setf(out, i, ref_getf(src, j));
  }
  return LT_OK;
}

int lt__ref_elementwise(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  /* The op table's family says which loop runs it; the per-op scalar function
   * (unary_f, binary_f, ...) says what it computes. */
  lt_op_family fam = ins->op < LT_OP_COUNT ? lt__op_family(ins->op) : LT_FAM_LEAF;
  if (fam == LT_FAM_UNARY && ins->noperands == 1) return ref_unary(ins, out, in[0]);
  if ((fam == LT_FAM_BINARY || fam == LT_FAM_COMPARE) && ins->noperands == 2)
    return ref_binary(ins, out, in[0], in[1]);
  if (fam == LT_FAM_TERNARY && ins->noperands == 3) return ref_where(out, in[0], in[1], in[2]);
  return lt__err(LT_EEXEC, "ref: elementwise kernel cannot run op %s with %d operands",
                 lt__op_name((lt_op)ins->op), ins->noperands);
}

bool lt__ref_elementwise_has_case(lt_op op) {
  double r;
  if (op >= LT_OP_COUNT) return false;
  switch (lt__op_family(op)) {
  case LT_FAM_UNARY:
    return op == LT_OP_NOT || op == LT_OP_CAST || unary_f(op, 0.0, &r);
  case LT_FAM_BINARY:
  case LT_FAM_COMPARE:
    return binary_f(op, 1, 1, &r);
  case LT_FAM_TERNARY:
    return op == LT_OP_WHERE;
  default:
    return false;
  }
}
