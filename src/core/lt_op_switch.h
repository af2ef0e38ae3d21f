/* Exhaustive switches over one op family, checked by the compiler.
 *
 * A kernel, lowering or gradient rule that serves a family (UNARY, BINARY,
 * COMPARE, REDUCE, ...) switches on the op. Written as
 *
 *   switch ((lt_op)op) {
 *   case LT_OP_NEG: ...
 *   ...one case per op of the family...
 *   LT_OP_CASES_OUTSIDE(UNARY)
 *     return missing(op);
 *   }
 *
 * with no default label, the switch lists every lt_op: the family's ops by
 * hand, every other op (and LT_OP_COUNT) through LT_OP_CASES_OUTSIDE, which
 * the op table generates. A row added to the table in that family and
 * forgotten in the switch is then a build error ("enumeration value
 * 'LT_OP_FOO' not handled in switch": -Wswitch, made an error below), not a
 * NaN or a NULL at run time. LT_OP_CASES_OUTSIDE2(F, G) does the same for a
 * switch that serves two families (binary arithmetic and comparisons).
 *
 * The family test is done by the preprocessor: LT__SAME_F_G expands to a
 * "probe" (two tokens) exactly when F and G are the same family name. */
#ifndef LT_OP_SWITCH_H
#define LT_OP_SWITCH_H

#include "lt_node.h"

#pragma GCC diagnostic error "-Wswitch"

#define LT__PP_CAT(a, b) LT__PP_CAT_(a, b)
#define LT__PP_CAT_(a, b) a##b
#define LT__PP_SECOND(a, b, ...) b
#define LT__PP_IS_PROBE(...) LT__PP_SECOND(__VA_ARGS__, 0, 0)
#define LT__PP_OR(a, b) LT__PP_CAT(LT__PP_OR_, LT__PP_CAT(a, b))
#define LT__PP_OR_00 0
#define LT__PP_OR_01 1
#define LT__PP_OR_10 1
#define LT__PP_OR_11 1
/* x when c is 0 (the op is outside the families), nothing when c is 1 */
#define LT__PP_UNLESS(c, x) LT__PP_CAT(LT__PP_UNLESS_, c)(x)
#define LT__PP_UNLESS_0(x) x
#define LT__PP_UNLESS_1(x)

#define LT__SAME_LEAF_LEAF ~, 1
#define LT__SAME_UNARY_UNARY ~, 1
#define LT__SAME_BINARY_BINARY ~, 1
#define LT__SAME_COMPARE_COMPARE ~, 1
#define LT__SAME_TERNARY_TERNARY ~, 1
#define LT__SAME_REDUCE_REDUCE ~, 1
#define LT__SAME_MATMUL_MATMUL ~, 1
#define LT__SAME_SHAPE_SHAPE ~, 1
#define LT__SAME_INDEX_INDEX ~, 1
#define LT__SAME_RANDOM_RANDOM ~, 1
#define LT__SAME_SCATTER_SCATTER ~, 1
#define LT__SAME_CONV_CONV ~, 1
#define LT__SAME_COLLECTIVE_COLLECTIVE ~, 1
#define LT__IN_FAMILY(F, fam) LT__PP_IS_PROBE(LT__SAME_##F##_##fam)

/* One row macro per family a switch serves (a row macro cannot take the
 * wanted family as an argument). */
#define LT__OUTSIDE_ROW(F, E, fam) LT__PP_UNLESS(LT__IN_FAMILY(F, fam), case LT_OP_##E:)
#define LT__OUTSIDE2_ROW(F, G, E, fam) \
  LT__PP_UNLESS(LT__PP_OR(LT__IN_FAMILY(F, fam), LT__IN_FAMILY(G, fam)), case LT_OP_##E:)
#define LT__NOT_UNARY(E, name, fam, ...) LT__OUTSIDE_ROW(UNARY, E, fam)
#define LT__NOT_BINARY(E, name, fam, ...) LT__OUTSIDE_ROW(BINARY, E, fam)
#define LT__NOT_COMPARE(E, name, fam, ...) LT__OUTSIDE_ROW(COMPARE, E, fam)
#define LT__NOT_REDUCE(E, name, fam, ...) LT__OUTSIDE_ROW(REDUCE, E, fam)
#define LT__NOT_BINARY_COMPARE(E, name, fam, ...) LT__OUTSIDE2_ROW(BINARY, COMPARE, E, fam)
#define LT__NOT_MATMUL_CONV(E, name, fam, ...) LT__OUTSIDE2_ROW(MATMUL, CONV, E, fam)

/* The case labels of every op outside family F (UNARY, BINARY, COMPARE or
 * REDUCE), and of LT_OP_COUNT. */
#define LT_OP_CASES_OUTSIDE(F) LT_OP_TABLE(LT__NOT_##F) case LT_OP_COUNT:
/* The same outside binary arithmetic and comparisons together. */
#define LT_OP_CASES_OUTSIDE_BINARY_COMPARE LT_OP_TABLE(LT__NOT_BINARY_COMPARE) case LT_OP_COUNT:
/* The same outside contractions and convolutions (the cost analysis: every
 * op of those families says whether it does multiply-adds). */
#define LT_OP_CASES_OUTSIDE_MATMUL_CONV LT_OP_TABLE(LT__NOT_MATMUL_CONV) case LT_OP_COUNT:

/* The unary ops that never reach an integer kernel: the builders give the
 * floating ones (DTYPE FLOAT in LT_UNARY_OPS, lazytensor_ops.h) a float
 * operand (an integer one is cast first), NOT takes bools and CAST has
 * kernels of its own. An integer unary switch lists them with
 * LT_OP_CASES_OUTSIDE(UNARY) to reject them. */
#define LT__FLOAT_UNARY_NODE_FLOAT(ir) case LT_OP_##ir:
#define LT__FLOAT_UNARY_NODE_KEEP(ir)
#define LT__FLOAT_UNARY_NODE_INTEGRAL(ir)
#define LT__FLOAT_UNARY_NODE_BOOL(ir)
#define LT__FLOAT_UNARY_OWN_FLOAT(ir)
#define LT__FLOAT_UNARY_OWN_KEEP(ir)
#define LT__FLOAT_UNARY_OWN_INTEGRAL(ir)
#define LT__FLOAT_UNARY_OWN_BOOL(ir)
#define LT__FLOAT_UNARY(name, build, ir, dtype, ...) LT__FLOAT_UNARY_##build##_##dtype(ir)
#define LT_OP_CASES_NOT_INTEGER_UNARY \
  LT_UNARY_OPS(LT__FLOAT_UNARY)       \
  case LT_OP_NOT:                     \
  case LT_OP_CAST:

#endif
