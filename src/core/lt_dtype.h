/* The dtype table: the one place that says what each dtype is (its C storage
 * type, size, kind, names, limits and how one element converts to and from
 * double and int64), and PyTorch-style promotion. Everything else reads it:
 * lt_dtype_name / lt_dtype_size, the kind tests (lt__is_float, lt__is_int),
 * every backend's and the world's element access, and the tests.
 *
 * X(ENUM, "name", "torch name", CTYPE, KIND, F2I, MIN, MAX, REP)
 *   ENUM   the lt_dtype (LT_<ENUM> in lazytensor.h); rows are in id order
 *   CTYPE  the C type one element is stored as (bool: one byte, 0 or 1)
 *   KIND   BOOL, SINT (signed integer), UINT (unsigned integer) or FLOAT
 *   F2I    how a float becomes this integer dtype (CAST, stores from double):
 *          both truncate toward zero, NaN gives 0; SAT saturates at the
 *          dtype's range, WRAP saturates at int64's range and keeps the low
 *          bits (two's complement). NONE for bool and float rows
 *   MIN, MAX  the finite range of the dtype (floats: -max .. max)
 *   REP    how CTYPE holds a value: NAT, as C converts to and from it; BF16,
 *          the upper half of an f32's bits (C has no bfloat16 arithmetic
 *          type), converted by lt__bf16_to_f32 / lt__f32_to_bf16
 *
 * docs/ADDING_A_DTYPE.md says what a new dtype touches. */
#ifndef LT_DTYPE_H
#define LT_DTYPE_H

#include <float.h>
#include <stdint.h>

#include "lazytensor.h"

/* Code that truly differs per dtype (a typed loop, an LLVM or MPI type)
 * switches on the dtype as
 *
 *   switch ((lt_dtype)dt) {
 *   case LT_F32: ...
 *   ...one case per row...
 *   case LT_NUM_DTYPES: break;   (not a dtype: refused after the switch)
 *   }
 *
 * with no default label, so a row added to the table and forgotten in such a
 * switch is a build error ("enumeration value 'LT_BF16' not handled in
 * switch": -Wswitch, made an error here), never another dtype's loop. */
#pragma GCC diagnostic error "-Wswitch"

/* clang-format off */
#define LT_BF16_MAX 3.38953138925153547590470800371487866880e+38 /* 0x7F7F: (2 - 2^-7) * 2^127 */
#define LT_DTYPE_TABLE(X) \
  X(BOOL, "bool", "bool",     uint8_t,  BOOL,  NONE, 0,            1,           NAT)  \
  X(I32,  "i32",  "int32",    int32_t,  SINT,  SAT,  INT32_MIN,    INT32_MAX,   NAT)  \
  X(I64,  "i64",  "int64",    int64_t,  SINT,  SAT,  INT64_MIN,    INT64_MAX,   NAT)  \
  X(F32,  "f32",  "float32",  float,    FLOAT, NONE, -FLT_MAX,     FLT_MAX,     NAT)  \
  X(F64,  "f64",  "float64",  double,   FLOAT, NONE, -DBL_MAX,     DBL_MAX,     NAT)  \
  X(U8,   "u8",   "uint8",    uint8_t,  UINT,  WRAP, 0,            UINT8_MAX,   NAT)  \
  X(I8,   "i8",   "int8",     int8_t,   SINT,  WRAP, INT8_MIN,     INT8_MAX,    NAT)  \
  X(BF16, "bf16", "bfloat16", uint16_t, FLOAT, NONE, -LT_BF16_MAX, LT_BF16_MAX, BF16)
/* clang-format on */

typedef enum lt_dtype_kind { LT_DK_BOOL, LT_DK_SINT, LT_DK_UINT, LT_DK_FLOAT } lt_dtype_kind;
typedef enum lt_f2i_rule { LT_F2I_NONE, LT_F2I_SAT, LT_F2I_WRAP } lt_f2i_rule;

/* A row out of range of the enum, or a dtype without a row, fails the build
 * here (row i must be dtype id i). */
#define LT__DT_ROW(E, ...) LT__DT_ROW_##E,
enum { LT_DTYPE_TABLE(LT__DT_ROW) LT__DT_ROWS };
#undef LT__DT_ROW
_Static_assert((int)LT__DT_ROWS == (int)LT_NUM_DTYPES,
               "every lt_dtype needs a row in LT_DTYPE_TABLE");
#define LT__DT_ORDER(E, ...) \
  _Static_assert(LT__DT_ROW_##E == (int)LT_##E, "LT_DTYPE_TABLE rows must be in id order");
LT_DTYPE_TABLE(LT__DT_ORDER)
#undef LT__DT_ORDER

/* ---- conversions every row's load and store share ---- */

/* A float truncated toward zero to int64, saturating at its range, NaN 0:
 * the first step of every float-to-integer conversion (no undefined behaviour). */
static inline int64_t lt__f2i64(double v) {
  if (v != v) return 0;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  return (int64_t)v;
}
/* v wrapped into [lo, hi], a range of 2^n values: its low n bits, read as
 * the range does (two's complement for a signed one). Done in uint64, where
 * overflow is defined. */
static inline int64_t lt__wrap_range(int64_t v, int64_t lo, int64_t hi) {
  if (lo == INT64_MIN && hi == INT64_MAX) return v;
  uint64_t off = ((uint64_t)v - (uint64_t)lo) & ((uint64_t)hi - (uint64_t)lo);
  return lo + (int64_t)off;
}
static inline int64_t lt__f2int(double v, int64_t lo, int64_t hi, lt_f2i_rule rule) {
  int64_t x = lt__f2i64(v);
  if (rule == LT_F2I_WRAP) return lt__wrap_range(x, lo, hi);
  return x < lo ? lo : x > hi ? hi : x;
}

/* bf16 <-> f32, as torch's c10::BFloat16: widening is exact (the bits
 * shifted up); narrowing rounds to nearest, ties to even, by adding just
 * under half an ulp plus the kept half's lowest bit, so that a carry rounds
 * up (a finite value past the largest becomes inf); any NaN becomes the
 * quiet NaN 0x7FC0. */
static inline float lt__bf16_to_f32(uint16_t h) {
  union {
    uint32_t u;
    float f;
  } v = {.u = (uint32_t)h << 16};
  return v.f;
}
static inline uint16_t lt__f32_to_bf16(float f) {
  union {
    float f;
    uint32_t u;
  } v = {.f = f};
  if (f != f) return 0x7FC0;
  return (uint16_t)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16);
}

/* One element in the C type that holds its value (REP NAT: CTYPE; BF16:
 * float), and one stored from a value of any arithmetic type. */
#define LT__ELEM_NAT(T, base, i) (((const T *)(base))[i])
#define LT__ELEM_BF16(T, base, i) lt__bf16_to_f32(((const T *)(base))[i])
#define LT__PUT_NAT(T, base, i, x) (((T *)(base))[i] = (T)(x))
#define LT__PUT_BF16(T, base, i, x) (((T *)(base))[i] = lt__f32_to_bf16((float)(x)))

#define LT__TO_I64_BOOL(x) ((int64_t)(x))
#define LT__TO_I64_SINT(x) ((int64_t)(x))
#define LT__TO_I64_UINT(x) ((int64_t)(x))
#define LT__TO_I64_FLOAT(x) lt__f2i64((double)(x))
#define LT__FROM_F64_BOOL(v, F2I, MIN, MAX) ((v) != 0) /* NaN is true */
#define LT__FROM_F64_SINT(v, F2I, MIN, MAX) lt__f2int(v, MIN, MAX, LT_F2I_##F2I)
#define LT__FROM_F64_UINT(v, F2I, MIN, MAX) lt__f2int(v, MIN, MAX, LT_F2I_##F2I)
#define LT__FROM_F64_FLOAT(v, F2I, MIN, MAX) (v)
#define LT__FROM_I64_BOOL(v, MIN, MAX) ((v) != 0)
#define LT__FROM_I64_SINT(v, MIN, MAX) lt__wrap_range(v, MIN, MAX)
#define LT__FROM_I64_UINT(v, MIN, MAX) lt__wrap_range(v, MIN, MAX)
#define LT__FROM_I64_FLOAT(v, MIN, MAX) (v)

/* ---- per row: element i of an array at base, as double and as int64 ----
 * load_i64 of a float truncates as lt__f2i64; store_f64 converts as CAST
 * (F2I above, bool: v != 0); store_i64 wraps integers (bool: v != 0). */
#define LT__DT_ACCESS(E, NAME, TORCH, T, KIND, F2I, MIN, MAX, REP)         \
  static inline double lt__load_f64_##E(const void *base, int64_t i) {     \
    return (double)LT__ELEM_##REP(T, base, i);                             \
  }                                                                        \
  static inline int64_t lt__load_i64_##E(const void *base, int64_t i) {    \
    return LT__TO_I64_##KIND(LT__ELEM_##REP(T, base, i));                  \
  }                                                                        \
  static inline void lt__store_f64_##E(void *base, int64_t i, double v) {  \
    LT__PUT_##REP(T, base, i, LT__FROM_F64_##KIND(v, F2I, MIN, MAX));      \
  }                                                                        \
  static inline void lt__store_i64_##E(void *base, int64_t i, int64_t v) { \
    LT__PUT_##REP(T, base, i, LT__FROM_I64_##KIND(v, MIN, MAX));           \
  }
LT_DTYPE_TABLE(LT__DT_ACCESS)
#undef LT__DT_ACCESS

/* One element of any dtype: a scratch element, as large and as aligned as
 * every row's C type, for a value stored once and then copied by its bytes. */
#define LT__DT_MEMBER(E, NAME, TORCH, T, ...) T e_##E;
typedef union lt_dtype_elem {
  LT_DTYPE_TABLE(LT__DT_MEMBER)
} lt_dtype_elem;
#undef LT__DT_MEMBER

/* ---- the traits of one dtype ---- */
typedef struct lt_dtype_info {
  const char *name;       /* "f32" (lt_dtype_name) */
  const char *torch_name; /* "float32" (torch.float32) */
  size_t size;            /* bytes per element */
  lt_dtype_kind kind;
  lt_f2i_rule f2i;
  double min_f64, max_f64;  /* the range as doubles (i64's max reads 2^63) */
  int64_t min_i64, max_i64; /* integers and bool: the range; floats: int64's */
  double (*load_f64)(const void *base, int64_t i);
  int64_t (*load_i64)(const void *base, int64_t i);
  void (*store_f64)(void *base, int64_t i, double v);
  void (*store_i64)(void *base, int64_t i, int64_t v);
} lt_dtype_info;

extern const lt_dtype_info lt__dtype_infos[LT_NUM_DTYPES];

static inline bool lt__dtype_valid(int dt) { return dt >= 0 && dt < LT_NUM_DTYPES; }
/* The row of dt; NULL when dt is not a dtype. */
static inline const lt_dtype_info *lt__dtype_info(int dt) {
  return lt__dtype_valid(dt) ? &lt__dtype_infos[dt] : NULL;
}
/* The dtype named name ("f32" or "float32"); -1 when none is. */
int lt__dtype_from_name(const char *name);

/* Kind tests, switches over the table (folded where dt is known). */
static inline lt_dtype_kind lt__dtype_kind(int dt) {
  switch (dt) {
#define LT__DT_KIND(E, NAME, TORCH, T, KIND, ...) \
  case LT_##E:                                    \
    return LT_DK_##KIND;
    LT_DTYPE_TABLE(LT__DT_KIND)
#undef LT__DT_KIND
  default:
    return LT_DK_BOOL;
  }
}
static inline bool lt__is_float(int dt) { return lt__dtype_kind(dt) == LT_DK_FLOAT; }
static inline bool lt__is_int(int dt) {
  lt_dtype_kind k = lt__dtype_kind(dt);
  return lt__dtype_valid(dt) && (k == LT_DK_SINT || k == LT_DK_UINT);
}
/* Whether an integer or bool dtype reads its bits as unsigned (bool, u8). */
static inline bool lt__is_unsigned(int dt) {
  lt_dtype_kind k = lt__dtype_kind(dt);
  return k == LT_DK_BOOL || k == LT_DK_UINT;
}
/* 0 bool, 1 integer, 2 floating */
static inline int lt__dtype_category(int dt) {
  return lt__is_float(dt) ? 2 : lt__is_int(dt) ? 1 : 0;
}

/* The dtype a value of dt is computed in: dt itself, or f32 for a row whose
 * C type holds bits rather than a value (REP BF16: torch's kernels compute
 * bf16 in f32 and round once). The one place that says so: the ops'
 * composites, the gradient rules and the cpu loops all read it. */
#define LT__DT_COMPUTE_NAT(E) LT_##E
#define LT__DT_COMPUTE_BF16(E) LT_F32
static inline lt_dtype lt__dtype_compute(int dt) {
  switch (dt) {
#define LT__DT_COMPUTE(E, NAME, TORCH, T, KIND, F2I, MIN, MAX, REP) \
  case LT_##E:                                                      \
    return LT__DT_COMPUTE_##REP(E);
    LT_DTYPE_TABLE(LT__DT_COMPUTE)
#undef LT__DT_COMPUTE
  default:
    return (lt_dtype)dt;
  }
}

/* Element i of the dt array at base, by dtype: switches over the table that
 * inline into the per-row functions, for loops that touch every element. */
#define LT__DT_SWITCH(dt, RET, CALL) \
  switch (dt) {                      \
    LT_DTYPE_TABLE(CALL)             \
  default:                           \
    RET;                             \
  }
#define LT__DT_CASE_LOAD_F64(E, ...) \
  case LT_##E:                       \
    return lt__load_f64_##E(base, i);
#define LT__DT_CASE_LOAD_I64(E, ...) \
  case LT_##E:                       \
    return lt__load_i64_##E(base, i);
#define LT__DT_CASE_STORE_F64(E, ...) \
  case LT_##E:                        \
    lt__store_f64_##E(base, i, v);    \
    return;
#define LT__DT_CASE_STORE_I64(E, ...) \
  case LT_##E:                        \
    lt__store_i64_##E(base, i, v);    \
    return;
static inline double lt__load_f64(int dt, const void *base, int64_t i) {
  LT__DT_SWITCH(dt, return 0, LT__DT_CASE_LOAD_F64)
}
static inline int64_t lt__load_i64(int dt, const void *base, int64_t i) {
  LT__DT_SWITCH(dt, return 0, LT__DT_CASE_LOAD_I64)
}
static inline void lt__store_f64(int dt, void *base, int64_t i, double v) {
  LT__DT_SWITCH(dt, return, LT__DT_CASE_STORE_F64)
}
static inline void lt__store_i64(int dt, void *base, int64_t i,
                                 int64_t v){LT__DT_SWITCH(dt, return, LT__DT_CASE_STORE_I64)}

/* torch.promote_types(a, b); u8 with i8 gives i32 (torch: int16, not a dtype
 * here). The enum order is not the promotion order (u8, i8 come last). */
lt_dtype lt__promote_types(lt_dtype a, lt_dtype b);

/* Result dtype of an op over n operands: tensors with dims decide within a
 * category; 0-d tensors only raise the category. */
lt_dtype lt__promote(const lt_tensor *const *ts, int n);

/* Converts a double to what an element of dtype dt stores, then back. */
double lt__dtype_round(lt_dtype dt, double v);

/* v wrapped to the range of integer dtype dt (its low bits, two's complement):
 * how integer arithmetic and conversions to u8 / i8 / i32 overflow. Other
 * dtypes return v. */
int64_t lt__int_wrap(lt_dtype dt, int64_t v);

#endif
