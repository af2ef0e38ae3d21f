/* The ref backend: a plain interpreter that runs one node at a time with simple
 * loops. It is the oracle every other backend is tested against, so it favours
 * being obviously right over being fast: every element is read as a double (float
 * dtypes) or an int64 (bool and integer dtypes), computed, and stored back. */
#ifndef LT_REF_H
#define LT_REF_H

#include "../../core/lt_dtype.h"
#include "../../core/lt_shape.h"
#include "ref_api.h"

/* Kernels: fill out (allocated with the instruction's dtype and shape) from the
 * operand buffers in. Return LT_OK, or a negative status with lt__err set
 * (e.g. an index out of range). One function per op family (the op table's REF
 * column names it), each in its own file. */
int lt__ref_leaf(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* Whether a family kernel that switches on the op has a case for op (the
 * compile step refuses an op without one, naming it). */
bool lt__ref_elementwise_has_case(lt_op op);
bool lt__ref_reduce_has_case(lt_op op);
int lt__ref_elementwise(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_reduce(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_matmul(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_shape(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_index(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_random(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_grad_ops(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
int lt__ref_scan(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in); /* ref_scan.c */
int lt__ref_sort(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in); /* ref_scan.c */
int lt__ref_conv(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in); /* ref_conv.c */
/* ref_attention.c */
int lt__ref_attention(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* ref_collective.c */
int lt__ref_collective(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

/* ---- element access: the dtype table's load / store (core/lt_dtype.h) ---- */
static inline bool ref_is_float(int dt) { return lt__is_float(dt); }

static inline double ref_getf(const lt_buffer *b, int64_t i) {
  return lt__load_f64(b->dtype, b->data, i);
}
/* Floats truncate toward zero (NaN 0, saturating at int64's range). */
static inline int64_t ref_geti(const lt_buffer *b, int64_t i) {
  return lt__load_i64(b->dtype, b->data, i);
}
/* Stores v converted to the buffer's dtype as CAST does (bool: v != 0;
 * integers truncate toward zero, i32 / i64 saturate, u8 / i8 keep the low
 * byte of the int64). */
static inline void ref_setf(lt_buffer *b, int64_t i, double v) {
  lt__store_f64(b->dtype, b->data, i, v);
}
/* Stores v converted to the buffer's dtype: integers keep the low bits (wrap
 * around), bool is v != 0. */
static inline void ref_seti(lt_buffer *b, int64_t i, int64_t v) {
  lt__store_i64(b->dtype, b->data, i, v);
}

#endif
