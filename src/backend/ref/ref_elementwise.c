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
#include "ref.h"

/* ---- element conversions ---- */

/* Float to int64 without undefined behaviour: truncate, saturate, NaN -> 0. */
static int64_t f2i(double v) {
  if (isnan(v)) return 0;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  return (int64_t)v;
}

/* Stores float v into an integer or bool buffer (see CAST above). */
static void set_from_float(lt_buffer *out, int64_t i, double v) {
  switch (out->dtype) {
  case LT_BOOL:
    ref_seti(out, i, v != 0);
    break; /* NaN != 0 */
  case LT_I32: {
    int64_t x = f2i(v);
    ref_seti(out, i, x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : x);
    break;
  }
  case LT_I64:
    ref_seti(out, i, f2i(v));
    break;
  default:
    ref_setf(out, i, v);
    break;
  }
}

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

static double unary_f(int op, double x) {
  switch (op) {
  case LT_OP_NEG:
    return -x;
  case LT_OP_ABS:
    return fabs(x);
  case LT_OP_SIGN:
    return (double)((0 < x) - (x < 0));
  case LT_OP_RELU:
    return isnan(x) ? x : x > 0 ? x : 0.0;
  case LT_OP_FLOOR:
    return floor(x);
  case LT_OP_CEIL:
    return ceil(x);
  case LT_OP_ROUND:
    return nearbyint(x); /* default rounding mode: half to even */
  case LT_OP_EXP:
    return exp(x);
  case LT_OP_LOG:
    return log(x);
  case LT_OP_LOG1P:
    return log1p(x);
  case LT_OP_SQRT:
    return sqrt(x);
  case LT_OP_RSQRT:
    return 1.0 / sqrt(x);
  case LT_OP_SIN:
    return sin(x);
  case LT_OP_COS:
    return cos(x);
  case LT_OP_TANH:
    return tanh(x);
  case LT_OP_SIGMOID:
    return sigmoid(x);
  case LT_OP_GELU:
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case LT_OP_GELU_TANH: /* torch's approximate='tanh' formula as written (NaN at -inf, as torch) */
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  case LT_OP_ERF:
    return erf(x);
  default:
    return NAN;
  }
}

/* Integer unary ops; the others never reach the int domain (see ref_unary). */
static int64_t unary_i(int op, int64_t x) {
  uint64_t u = (uint64_t)x;
  switch (op) {
  case LT_OP_NEG:
    return (int64_t)(0 - u);
  case LT_OP_ABS:
    return x < 0 ? (int64_t)(0 - u) : x;
  case LT_OP_SIGN:
    return (0 < x) - (x < 0);
  case LT_OP_RELU:
    return x > 0 ? x : 0;
  default:
    return x; /* FLOOR, CEIL, ROUND: integers are already integral */
  }
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
        set_from_float(out, i, ref_getf(a, i));
      else
        ref_seti(out, i, ref_geti(a, i));
    }
    return LT_OK;
  }
  /* A float operand or result means the op is computed in double. */
  if (ref_is_float(a->dtype) || ref_is_float(out->dtype)) {
    for (int64_t i = 0; i < n; i++) {
      double r = unary_f(ins->op, ref_getf(a, i));
      if (ref_is_float(out->dtype))
        ref_setf(out, i, r);
      else
        set_from_float(out, i, r);
    }
    return LT_OK;
  }
  for (int64_t i = 0; i < n; i++) ref_seti(out, i, unary_i(ins->op, ref_geti(a, i)));
  return LT_OK;
}

/* ---- binary ---- */

static double binary_f(int op, double a, double b) {
  switch (op) {
  case LT_OP_ADD:
    return a + b;
  case LT_OP_SUB:
    return a - b;
  case LT_OP_MUL:
    return a * b;
  case LT_OP_DIV:
    return a / b;
  case LT_OP_POW:
    return pow(a, b);
  case LT_OP_FMOD:
    return fmod(a, b);
  case LT_OP_MAXIMUM:
    return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case LT_OP_MINIMUM:
    return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case LT_OP_EQ:
    return a == b;
  case LT_OP_NE:
    return a != b;
  case LT_OP_LT:
    return a < b;
  case LT_OP_LE:
    return a <= b;
  case LT_OP_GT:
    return a > b;
  case LT_OP_GE:
    return a >= b;
  case LT_OP_AND:
    return a != 0 && b != 0;
  case LT_OP_OR:
    return a != 0 || b != 0;
  default:
    return NAN;
  }
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

static int64_t binary_i(int op, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case LT_OP_ADD:
    return (int64_t)(ua + ub);
  case LT_OP_SUB:
    return (int64_t)(ua - ub);
  case LT_OP_MUL:
    return (int64_t)(ua * ub);
  /* Not emitted by the builder (ints divide in f32); guarded against SIGFPE. */
  case LT_OP_DIV:
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - ua); /* INT64_MIN / -1 would trap */
    return a / b;
  case LT_OP_POW:
    return ipow(a, b);
  /* Not emitted by the builders (integer remainders divide); guarded as DIV. */
  case LT_OP_FMOD:
    return b == 0 || b == -1 ? 0 : a % b;
  case LT_OP_MAXIMUM:
    return a > b ? a : b;
  case LT_OP_MINIMUM:
    return a < b ? a : b;
  case LT_OP_EQ:
    return a == b;
  case LT_OP_NE:
    return a != b;
  case LT_OP_LT:
    return a < b;
  case LT_OP_LE:
    return a <= b;
  case LT_OP_GT:
    return a > b;
  case LT_OP_GE:
    return a >= b;
  case LT_OP_AND:
    return a != 0 && b != 0;
  case LT_OP_OR:
    return a != 0 || b != 0;
  default:
    return 0;
  }
}

static int ref_binary(const lt_instr *ins, lt_buffer *out, const lt_buffer *a, const lt_buffer *b) {
  int64_t coords[LT_MAX_DIMS];
  /* Comparisons compute in the operands' domain; arithmetic in the result's
   * (both agree when the builder cast the operands to the result dtype). */
  bool in_float = ref_is_float(a->dtype) || ref_is_float(b->dtype) || ref_is_float(out->dtype);
  for (int64_t i = 0; i < out->numel; i++) {
    lt__unravel(i, out->shape, out->ndim, coords);
    int64_t ia = lt__bcast_ravel(a->shape, a->ndim, coords, out->ndim);
    int64_t ib = lt__bcast_ravel(b->shape, b->ndim, coords, out->ndim);
    if (in_float) {
      double r = binary_f(ins->op, ref_getf(a, ia), ref_getf(b, ib));
      if (ref_is_float(out->dtype))
        ref_setf(out, i, r);
      else
        set_from_float(out, i, r);
    } else {
      ref_seti(out, i, binary_i(ins->op, ref_geti(a, ia), ref_geti(b, ib)));
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
    else if (ref_is_float(out->dtype))
      ref_setf(out, i, ref_getf(src, j));
    else
      set_from_float(out, i, ref_getf(src, j));
  }
  return LT_OK;
}

int ref_elementwise(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
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
