/* Scalar IR for one elementwise op with ref's exact semantics (see
 * ref_elementwise.c): conversions, unary and binary ops, where. The loop
 * vectorizer widens it. */
#ifndef LT_CPU_OPS_H
#define LT_CPU_OPS_H

#include "cpu_irmath.h"

/* The IR type of an element of dtype dt in memory (i8 i32 i64 float double;
 * bf16: i16, its bits), and of its values in a loop (bf16: float, see
 * cpu_ops.c; the others as stored). */
const char *lt__ops_type(int dt);
const char *lt__ops_ctype(int dt);
bool lt__ops_is_float(int dt);
/* Whether the loops compute in dt; and in n's dtype and each operand's. */
bool lt__ops_dtype_ok(int dt);
bool lt__ops_node_dtypes_ok(const lt_node *n);
/* Value v (compute type of dtype from) converted as ref's CAST; to bf16
 * rounds (lt__f32_to_bf16). */
irv lt__ops_conv(cpu_ir *ir, irv v, int from, int to);
/* bf16 bits (i16) widened to their f32 value (exact), and a bf16 value's
 * bits: the high half of its f32 (a value the loops hold is already rounded). */
irv lt__ops_bf16_widen(cpu_ir *ir, irv bits);
irv lt__ops_bf16_bits(cpu_ir *ir, irv v);
irv lt__ops_exp(cpu_ir *ir, irv v, int dt); /* float dtypes */
/* Value of node n (dtype n->dtype) from its operands' values (dtypes in dts). */
irv lt__ops_emit(cpu_ir *ir, const lt_node *n, const irv *args, const int *dts);
/* Element k (i64, the flat index in the node's own shape) of a uniform [0, 1)
 * draw of float dtype dt under seed (i64), bit for bit as ref (lt_philox.h):
 * a call of the module's function for dt, which lt__ops_uniform_defs defines.
 * RNG_UNIFORM nodes go here, not to lt__ops_emit. */
irv lt__ops_uniform(cpu_ir *ir, irv seed, irv k, int dt);
/* The module's uniform functions for the dtypes its kernels draw (with their
 * vector variants and the call sites' attributes); nothing when neither. */
void lt__ops_uniform_defs(lt_strbuf *sb, bool f32, bool f64);
/* Whether lt__ops_emit (or, for RNG_UNIFORM, lt__ops_uniform) handles n. */
bool lt__ops_supported(const lt_node *n);

#endif
