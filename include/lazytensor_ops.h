/* The public elementwise and reduction ops of lazytensor.h, one row each.
 *
 * These rows are the only list of them. lazytensor.h declares the functions
 * from them; the library builds the plain ones (NODE rows) from them and
 * hands the names to bindings (lt_unary_op_name, ...); the Python binding,
 * the fuzzer and the differential and gradient tests take their op lists
 * from them. So a new op is a row here, plus (for a new IR op) its row in
 * the op table and its ref, cpu and gradient code (docs/ADDING_AN_OP.md).
 *
 * LT_UNARY_OPS(X): X(name, BUILD, IR, DTYPE, DOMAIN, GRAD) declares
 *   lt_tensor *lt_<name>(lt_tensor *a).
 *   BUILD   NODE: the library's builder is one IR node IR of a's shape (a
 *           generated one-liner); OWN: a builder of its own (IR then names
 *           the main IR op it records, or NONE for a composite)
 *   DTYPE   the result dtype: KEEP a's; INTEGRAL a's, and the identity on
 *           bool and integers (floor, ceil, round); FLOAT a's when floating,
 *           else f32; BOOL bool
 *   DOMAIN  the finite inputs with a non-NaN result: REAL all of them,
 *           NONNEG x >= 0 (NaN below 0: log, sqrt), ABOVE_M1 x >= -1 (log1p)
 *   GRAD    DIFF: differentiable (gradients checked by finite differences
 *           inside DOMAIN); NODIFF: a constant to autograd (a bool result)
 *
 * LT_BINARY_OPS(X): X(name, BUILD, IR, KIND, DOMAIN, GRAD) declares
 *   lt_tensor *lt_<name>(lt_tensor *a, lt_tensor *b).
 *   KIND    ELEMENTWISE (broadcasting, dtypes promoted) or CONTRACTION
 *   DOMAIN  the finite operands with a NaN result: NONE (no such operands),
 *           ZERO_OVER_ZERO (a == 0 and b == 0), FRACTIONAL_POWER (a < 0 and
 *           b not an integer), ZERO_DIVISOR (b == 0)
 *
 * LT_REDUCE_OPS(X): X(name, BUILD, IR) declares lt_tensor *lt_<name>(
 *   lt_tensor *a, const int *axes, int naxes, bool keepdim) (see "reductions"
 *   in lazytensor.h for the axes rules).
 *
 * Row order is the order bindings and tests list the ops in; it is not part
 * of any ABI. Notes on single ops are beside their rows. */
#ifndef LAZYTENSOR_OPS_H
#define LAZYTENSOR_OPS_H

/* clang-format off */
#define LT_UNARY_OPS(X) \
  /* neg of a bool tensor is LT_EDTYPE (use logical_not) */ \
  X(neg,         OWN,  NEG,       KEEP,     REAL,     DIFF)   \
  X(abs,         NODE, ABS,       KEEP,     REAL,     DIFF)   \
  X(sign,        NODE, SIGN,      KEEP,     REAL,     DIFF)   \
  X(relu,        NODE, RELU,      KEEP,     REAL,     DIFF)   \
  X(floor,       NODE, FLOOR,     INTEGRAL, REAL,     DIFF)   \
  X(ceil,        NODE, CEIL,      INTEGRAL, REAL,     DIFF)   \
  /* half to even */ \
  X(round,       NODE, ROUND,     INTEGRAL, REAL,     DIFF)   \
  X(exp,         NODE, EXP,       FLOAT,    REAL,     DIFF)   \
  X(log,         NODE, LOG,       FLOAT,    NONNEG,   DIFF)   \
  X(log1p,       NODE, LOG1P,     FLOAT,    ABOVE_M1, DIFF)   \
  X(sqrt,        NODE, SQRT,      FLOAT,    NONNEG,   DIFF)   \
  X(rsqrt,       NODE, RSQRT,     FLOAT,    NONNEG,   DIFF)   \
  X(sin,         NODE, SIN,       FLOAT,    REAL,     DIFF)   \
  X(cos,         NODE, COS,       FLOAT,    REAL,     DIFF)   \
  X(tanh,        NODE, TANH,      FLOAT,    REAL,     DIFF)   \
  X(sigmoid,     NODE, SIGMOID,   FLOAT,    REAL,     DIFF)   \
  /* exact: x (1 + erf(x / sqrt 2)) / 2 */ \
  X(gelu,        NODE, GELU,      FLOAT,    REAL,     DIFF)   \
  /* torch's gelu(approximate='tanh'): x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2 */ \
  X(gelu_tanh,   NODE, GELU_TANH, FLOAT,    REAL,     DIFF)   \
  X(erf,         NODE, ERF,       FLOAT,    REAL,     DIFF)   \
  /* torch.nn.functional.softsign: x / (1 + |x|), NaN at +-inf as torch's \
   * formula; bool inputs give f32 here (torch has no abs of bool) */ \
  X(softsign,    NODE, SOFTSIGN,  FLOAT,    REAL,     DIFF)   \
  /* non-zero (NaN too) is true */ \
  X(logical_not, OWN,  NOT,       BOOL,     REAL,     NODIFF) \
  /* NaN; +-inf; neither (torch.isnan, isinf, isfinite); integer and bool \
   * inputs are always finite */ \
  X(isnan,       OWN,  NONE,      BOOL,     REAL,     NODIFF) \
  X(isinf,       OWN,  NONE,      BOOL,     REAL,     NODIFF) \
  X(isfinite,    OWN,  NONE,      BOOL,     REAL,     NODIFF)

#define LT_BINARY_OPS(X) \
  X(add,           NODE, ADD,     ELEMENTWISE, NONE,             DIFF)   \
  X(sub,           NODE, SUB,     ELEMENTWISE, NONE,             DIFF)   \
  X(mul,           NODE, MUL,     ELEMENTWISE, NONE,             DIFF)   \
  /* true division: bool and integer operands give f32 */ \
  X(div,           NODE, DIV,     ELEMENTWISE, ZERO_OVER_ZERO,   DIFF)   \
  X(pow,           NODE, POW,     ELEMENTWISE, FRACTIONAL_POWER, DIFF)   \
  X(maximum,       NODE, MAXIMUM, ELEMENTWISE, NONE,             DIFF)   \
  X(minimum,       NODE, MINIMUM, ELEMENTWISE, NONE,             DIFF)   \
  /* comparisons give bool */ \
  X(eq,            NODE, EQ,      ELEMENTWISE, NONE,             NODIFF) \
  X(ne,            NODE, NE,      ELEMENTWISE, NONE,             NODIFF) \
  X(lt,            NODE, LT,      ELEMENTWISE, NONE,             NODIFF) \
  X(le,            NODE, LE,      ELEMENTWISE, NONE,             NODIFF) \
  X(gt,            NODE, GT,      ELEMENTWISE, NONE,             NODIFF) \
  X(ge,            NODE, GE,      ELEMENTWISE, NONE,             NODIFF) \
  /* logical ops treat non-zero as true and give bool */ \
  X(logical_and,   NODE, AND,     ELEMENTWISE, NONE,             NODIFF) \
  X(logical_or,    NODE, OR,      ELEMENTWISE, NONE,             NODIFF) \
  /* torch.remainder and torch.floor_divide: see lt_remainder in lazytensor.h */ \
  X(remainder,     OWN,  NONE,    ELEMENTWISE, ZERO_DIVISOR,     DIFF)   \
  X(floor_divide,  OWN,  NONE,    ELEMENTWISE, ZERO_OVER_ZERO,   NODIFF) \
  /* see lt_matmul in lazytensor.h */ \
  X(matmul,        OWN,  MATMUL,  CONTRACTION, NONE,             DIFF)

#define LT_REDUCE_OPS(X) \
  X(sum,       NODE, SUM)       \
  X(mean,      NODE, MEAN)      \
  X(max,       NODE, MAX)       \
  X(min,       NODE, MIN)       \
  X(prod,      NODE, PROD)      \
  X(logsumexp, NODE, LOGSUMEXP) \
  /* see lt_any in lazytensor.h */ \
  X(any,       OWN,  NONE)      \
  X(all,       OWN,  NONE)
/* clang-format on */

#endif
