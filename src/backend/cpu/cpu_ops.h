/* Scalar IR for one elementwise op with ref's exact semantics (see
 * ref_elementwise.c): conversions, unary and binary ops, where. The loop
 * vectorizer widens it. */
#ifndef LT_CPU_OPS_H
#define LT_CPU_OPS_H

#include "cpu_irmath.h"

const char *ops_type(int dt); /* i8 i32 i64 float double */
bool ops_is_float(int dt);
irv ops_conv(cpu_ir *ir, irv v, int from, int to);
irv ops_exp(cpu_ir *ir, irv v, int dt); /* float dtypes */
/* Value of node n (dtype n->dtype) from its operands' values (dtypes in dts). */
irv ops_emit(cpu_ir *ir, const lt_node *n, const irv *args, const int *dts);
/* Whether ops_emit handles n. */
bool ops_supported(const lt_node *n);

#endif
