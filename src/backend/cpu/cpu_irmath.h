/* Emitting LLVM IR text one instruction at a time, and the float math that
 * must vectorize: exp, log, tanh, sigmoid, erf for f32 as branch-free
 * polynomial code (selects only), which the loop vectorizer turns into vector
 * code after inlining. f64 transcendentals call libm (scalar, exact as ref). */
#ifndef LT_CPU_IRMATH_H
#define LT_CPU_IRMATH_H

#include "cpu.h"

typedef struct cpu_ir {
  lt_strbuf *sb;
  int next; /* SSA counter */
  int err;  /* the first failure (an op without a case), recorded: the kernel is refused */
} cpu_ir;

/* An operand: "%v12" or a literal. */
typedef struct irv {
  char s[40];
} irv;

irv lt__ir_op(cpu_ir *ir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
irv lt__ir_f32(double x); /* rounded to float */
irv lt__ir_f64(double x);
irv lt__ir_int(int64_t x);
irv lt__ir_fresh(cpu_ir *ir);

/* f32 math within 1.3 ulp (sigmoid 2.5) on the whole range, subnormals
 * included; NaN propagates, tanh and erf keep the sign of zero. */
irv lt__ir_expf(cpu_ir *ir, irv x);
irv lt__ir_logf(cpu_ir *ir, irv x);
irv lt__ir_tanhf(cpu_ir *ir, irv x);
irv lt__ir_sigmoidf(cpu_ir *ir, irv x);
irv lt__ir_erff(cpu_ir *ir, irv x);

/* Declarations of the intrinsics and libm functions the kernels may call. */
void lt__ir_declarations(lt_strbuf *sb);

#endif
