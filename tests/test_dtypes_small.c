/* The small integer dtypes u8 and i8 (torch.uint8, torch.int8): ids and
 * names, promotion against every dtype (torch.promote_types / result_type,
 * written down below), wrap-around arithmetic, casts both ways, reductions,
 * comparisons, index ops, clamp, creation values, and the formats that store
 * dtype ids (lt_to_data, parameter files, the persistent cache, executable
 * instruction heads). Value tests run on both backends (ref and cpu, picked
 * with lt__backend_force as test_cpu_differential.c does) against values
 * computed by hand with PyTorch's rules. */
#include "test_util.h"
#include "test_backends.h"

#include "lazytensor_nn.h"
#include "../src/backend/bytes.h"
#include "../src/backend/instr.h"
#include "../src/core/lt_alloc.h"
#include "../src/core/lt_node.h"

#define VALS(...) ((const double[]){__VA_ARGS__})

static lt_tensor *u8(const int64_t *shape, int ndim, const uint8_t *v) {
  return lt_from_data(CPU0, LT_U8, shape, ndim, v);
}
static lt_tensor *i8(const int64_t *shape, int ndim, const int8_t *v) {
  return lt_from_data(CPU0, LT_I8, shape, ndim, v);
}

/* ---- ids and names ---------------------------------------------------------------------- */

static void test_ids_names_sizes(void **state) {
  (void)state;
  /* The first five keep the ids that files already hold. */
  assert_int_equal(LT_BOOL, 0);
  assert_int_equal(LT_I32, 1);
  assert_int_equal(LT_I64, 2);
  assert_int_equal(LT_F32, 3);
  assert_int_equal(LT_F64, 4);
  assert_int_equal(LT_U8, 5);
  assert_int_equal(LT_I8, 6);
  assert_int_equal(LT_BF16, 7);
  assert_int_equal(LT_NUM_DTYPES, 8);
  assert_string_equal(lt_dtype_name(LT_BF16), "bf16");
  assert_int_equal(lt_dtype_size(LT_BF16), 2);
  assert_string_equal(lt_dtype_name(LT_U8), "u8");
  assert_string_equal(lt_dtype_name(LT_I8), "i8");
  assert_string_equal(lt_dtype_name(LT_NUM_DTYPES), "?");
  assert_int_equal(lt_dtype_size(LT_U8), 1);
  assert_int_equal(lt_dtype_size(LT_I8), 1);
  assert_int_equal(lt_dtype_size(LT_NUM_DTYPES), 0);
  lt_tensor *a = lt_zeros(CPU0, LT_U8, SHAPE(2, 3), 2);
  assert_int_equal(lt_get_dtype(a), LT_U8);
  /* each form names itself */
  TU_EXPECT_ERROR(lt_zeros(CPU0, LT_NUM_DTYPES, SHAPE(2), 1), LT_EDTYPE, "lt_zeros: invalid dtype");
  TU_EXPECT_ERROR(lt_ones(CPU0, LT_NUM_DTYPES, SHAPE(2), 1), LT_EDTYPE, "lt_ones: invalid dtype");
  TU_EXPECT_ERROR(lt_full(CPU0, LT_NUM_DTYPES, SHAPE(2), 1, 2.0), LT_EDTYPE,
                  "lt_full: invalid dtype");
}

/* ---- promotion -------------------------------------------------------------------------- */

enum { kNumAll = 8 };
static const lt_dtype kAll[kNumAll] = {LT_BOOL, LT_U8,  LT_I8,  LT_I32,
                                       LT_I64,  LT_F32, LT_F64, LT_BF16};

/* torch.promote_types(kAll[i], kAll[j]), as PyTorch 2.x prints it, with one
 * change: uint8 with int8 is int16 in torch, i32 here (the smallest dtype that
 * holds both; lazytensor.h says so). */
#define B LT_BOOL
#define U LT_U8
#define S LT_I8
#define H LT_BF16
static const lt_dtype kPromote[kNumAll][kNumAll] = {
    /*          bool    u8      i8      i32     i64     f32     f64     bf16 */
    /* bool */ {B, U, S, LT_I32, LT_I64, LT_F32, LT_F64, H},
    /* u8   */ {U, U, LT_I32, LT_I32, LT_I64, LT_F32, LT_F64, H},
    /* i8   */ {S, LT_I32, S, LT_I32, LT_I64, LT_F32, LT_F64, H},
    /* i32  */ {LT_I32, LT_I32, LT_I32, LT_I32, LT_I64, LT_F32, LT_F64, H},
    /* i64  */ {LT_I64, LT_I64, LT_I64, LT_I64, LT_I64, LT_F32, LT_F64, H},
    /* f32  */ {LT_F32, LT_F32, LT_F32, LT_F32, LT_F32, LT_F32, LT_F64, LT_F32},
    /* f64  */ {LT_F64, LT_F64, LT_F64, LT_F64, LT_F64, LT_F64, LT_F64, LT_F64},
    /* bf16 */ {H, H, H, H, H, LT_F32, LT_F64, H},
};
#undef H
#undef B
#undef U
#undef S

static lt_tensor *make(lt_dtype dt, int ndim, double v) {
  return ndim == 0 ? lt_scalar(CPU0, dt, v) : lt_full(CPU0, dt, SHAPE(2), 1, v);
}

static void test_promotion_table(void **state) {
  (void)state;
  for (int i = 0; i < kNumAll; i++) {
    for (int j = 0; j < kNumAll; j++) {
      lt_dtype want = kPromote[i][j];
      assert_int_equal(kPromote[j][i], want); /* the table is symmetric */
      lt_tensor *a = make(kAll[i], 1, 1), *b = make(kAll[j], 1, 1);
      print_message("%s, %s -> %s\n", lt_dtype_name(kAll[i]), lt_dtype_name(kAll[j]),
                    lt_dtype_name(want));
      tu_expect(lt_mul(a, b), want, SHAPE(2), 1, VALS(1, 1), 0);
      tu_expect(lt_maximum(a, b), want, SHAPE(2), 1, VALS(1, 1), 0);
      /* two 0-d tensors promote the same way */
      tu_expect(lt_mul(make(kAll[i], 0, 1), make(kAll[j], 0, 1)), want, NULL, 0, VALS(1), 0);
      /* comparisons give bool; true division keeps a float result's dtype and
       * gives f32 (torch's default dtype) for integers and bool */
      tu_expect(lt_eq(a, b), LT_BOOL, SHAPE(2), 1, VALS(1, 1), 0);
      tu_expect(lt_div(a, b), lt__is_float(want) ? want : LT_F32, SHAPE(2), 1, VALS(1, 1), 0);
    }
  }
}

static void test_promotion_zero_dim(void **state) {
  (void)state;
  /* torch.result_type(tensor of dtype dim, 0-d tensor of dtype zero): the 0-d
   * operand matters only when its category (bool < integer < float) is higher. */
  static const struct {
    lt_dtype dim, zero, want;
  } cases[] = {
      {LT_U8, LT_I64, LT_U8},      {LT_U8, LT_I8, LT_U8},      {LT_I8, LT_U8, LT_I8},
      {LT_I8, LT_I64, LT_I8},      {LT_BOOL, LT_U8, LT_U8},    {LT_BOOL, LT_I8, LT_I8},
      {LT_U8, LT_BOOL, LT_U8},     {LT_U8, LT_F64, LT_F64},    {LT_I8, LT_F32, LT_F32},
      {LT_I32, LT_U8, LT_I32},     {LT_F32, LT_U8, LT_F32},    {LT_I64, LT_I8, LT_I64},
      {LT_U8, LT_U8, LT_U8},       {LT_I8, LT_I32, LT_I8},     {LT_F64, LT_I8, LT_F64},
      {LT_BF16, LT_F32, LT_BF16},  {LT_BF16, LT_F64, LT_BF16}, {LT_I64, LT_BF16, LT_BF16},
      {LT_BOOL, LT_BF16, LT_BF16}, {LT_F32, LT_BF16, LT_F32},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    lt_tensor *a = make(cases[k].dim, 1, 1), *b = make(cases[k].zero, 0, 1);
    tu_expect(lt_add(a, b), cases[k].want, SHAPE(2), 1,
              cases[k].want == LT_BOOL ? VALS(1, 1) : VALS(2, 2), 0);
    tu_expect(lt_add(b, a), cases[k].want, SHAPE(2), 1,
              cases[k].want == LT_BOOL ? VALS(1, 1) : VALS(2, 2), 0);
  }
}

/* ---- arithmetic ------------------------------------------------------------------------- */

static void body_u8_arith(void) {
  lt_tensor *a = u8(SHAPE(5), 1, (uint8_t[]){250, 0, 255, 128, 16});
  lt_tensor *b = u8(SHAPE(5), 1, (uint8_t[]){10, 1, 1, 128, 16});
  tu_expect(lt_add(a, b), LT_U8, SHAPE(5), 1, VALS(4, 1, 0, 0, 32), 0);
  tu_expect(lt_sub(a, b), LT_U8, SHAPE(5), 1, VALS(240, 255, 254, 0, 0), 0);
  tu_expect(lt_mul(a, b), LT_U8, SHAPE(5), 1, VALS(196, 0, 255, 0, 0), 0);
  tu_expect(lt_maximum(a, b), LT_U8, SHAPE(5), 1, VALS(250, 1, 255, 128, 16), 0);
  tu_expect(lt_minimum(a, b), LT_U8, SHAPE(5), 1, VALS(10, 0, 1, 128, 16), 0);
  /* torch: neg of uint8 wraps; abs and relu are identities; sign is 0 or 1 */
  tu_expect(lt_neg(a), LT_U8, SHAPE(5), 1, VALS(6, 0, 1, 128, 240), 0);
  tu_expect(lt_abs(a), LT_U8, SHAPE(5), 1, VALS(250, 0, 255, 128, 16), 0);
  tu_expect(lt_relu(a), LT_U8, SHAPE(5), 1, VALS(250, 0, 255, 128, 16), 0);
  tu_expect(lt_sign(a), LT_U8, SHAPE(5), 1, VALS(1, 0, 1, 1, 1), 0);
  /* true division of integers is f32 */
  tu_expect(lt_div(a, b), LT_F32, SHAPE(5), 1, VALS(25, 0, 255, 1, 1), 0);
  lt_tensor *p = u8(SHAPE(3), 1, (uint8_t[]){2, 3, 0});
  lt_tensor *e = u8(SHAPE(3), 1, (uint8_t[]){8, 5, 0});
  tu_expect(lt_pow(p, e), LT_U8, SHAPE(3), 1, VALS(0, 243, 1), 0);
  /* a Python-like scalar (0-d i64) keeps u8: torch.tensor([250], dtype=torch.uint8) + 10 */
  tu_expect(lt_add(a, lt_scalar(CPU0, LT_I64, 10)), LT_U8, SHAPE(5), 1, VALS(4, 10, 9, 138, 26), 0);
  /* each op wraps before the next reads it (a fused loop must not keep 260) */
  lt_tensor *s = lt_add(a, b);
  tu_expect(lt_gt(s, lt_scalar(CPU0, LT_I64, 100)), LT_BOOL, SHAPE(5), 1, VALS(0, 0, 0, 0, 0), 0);
  tu_expect(lt_div(s, lt_scalar(CPU0, LT_U8, 2)), LT_F32, SHAPE(5), 1, VALS(2, 0.5, 0, 0, 16), 0);
  /* constants baked into the graph (0, 1) and 0 - 1 */
  lt_tensor *z = lt_zeros(CPU0, LT_U8, SHAPE(2), 1);
  tu_expect(lt_sub(z, lt_ones(CPU0, LT_U8, SHAPE(2), 1)), LT_U8, SHAPE(2), 1, VALS(255, 255), 0);
}

static void body_i8_arith(void) {
  lt_tensor *x = i8(SHAPE(5), 1, (int8_t[]){127, -128, -1, 64, -7});
  lt_tensor *y = i8(SHAPE(5), 1, (int8_t[]){1, 1, -1, 2, 2});
  tu_expect(lt_add(x, y), LT_I8, SHAPE(5), 1, VALS(-128, -127, -2, 66, -5), 0);
  tu_expect(lt_sub(x, y), LT_I8, SHAPE(5), 1, VALS(126, 127, 0, 62, -9), 0);
  tu_expect(lt_mul(x, y), LT_I8, SHAPE(5), 1, VALS(127, -128, 1, -128, -14), 0);
  tu_expect(lt_neg(x), LT_I8, SHAPE(5), 1, VALS(-127, -128, 1, -64, 7), 0);
  tu_expect(lt_abs(x), LT_I8, SHAPE(5), 1, VALS(127, -128, 1, 64, 7), 0);
  tu_expect(lt_sign(x), LT_I8, SHAPE(5), 1, VALS(1, -1, -1, 1, -1), 0);
  tu_expect(lt_relu(x), LT_I8, SHAPE(5), 1, VALS(127, 0, 0, 64, 0), 0);
  tu_expect(lt_maximum(x, y), LT_I8, SHAPE(5), 1, VALS(127, 1, -1, 64, 2), 0);
  tu_expect(lt_div(x, y), LT_F32, SHAPE(5), 1, VALS(127, -128, 1, 32, -3.5), 0);
  tu_expect(lt_pow(y, lt_scalar(CPU0, LT_I64, 7)), LT_I8, SHAPE(5), 1, VALS(1, 1, -1, -128, -128),
            0);
}

static void body_mixed_arith(void) {
  lt_tensor *a = u8(SHAPE(2), 1, (uint8_t[]){255, 200});
  lt_tensor *x = i8(SHAPE(2), 1, (int8_t[]){127, -100});
  /* u8 + i8 -> i32 (torch: int16): no wrap at 8 bits, u8 read unsigned */
  tu_expect(lt_add(a, x), LT_I32, SHAPE(2), 1, VALS(382, 100), 0);
  tu_expect(lt_mul(a, lt_from_data(CPU0, LT_I32, SHAPE(2), 1, (int32_t[]){1000, -1})), LT_I32,
            SHAPE(2), 1, VALS(255000, -200), 0);
  tu_expect(lt_add(a, tu_f32(SHAPE(2), 1, (float[]){0.5f, -0.5f})), LT_F32, SHAPE(2), 1,
            VALS(255.5, 199.5), 0);
  tu_expect(lt_sub(x, tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0})), LT_I8, SHAPE(2), 1, VALS(126, -100),
            0);
}

static void test_u8_arith(void **state) {
  (void)state;
  tu_on_both(body_u8_arith);
}
static void test_i8_arith(void **state) {
  (void)state;
  tu_on_both(body_i8_arith);
}
static void test_mixed_arith(void **state) {
  (void)state;
  tu_on_both(body_mixed_arith);
}

/* ---- casts and creation ----------------------------------------------------------------- */

static void body_casts(void) {
  /* float -> u8 / i8: truncate toward zero to int64 (saturating, NaN 0), keep the low byte */
  lt_tensor *f = tu_f32(SHAPE(11), 1,
                        (float[]){300.7f, -1.5f, 2.9f, -0.5f, 255.9f, 256.0f, NAN, INFINITY,
                                  -INFINITY, 1e20f, -1e20f});
  tu_expect(lt_cast(f, LT_U8), LT_U8, SHAPE(11), 1, VALS(44, 255, 2, 0, 255, 0, 0, 255, 0, 255, 0),
            0);
  lt_tensor *g =
      tu_f64(SHAPE(8), 1, (double[]){200, -129, 127.9, -128.9, 1000, NAN, INFINITY, -INFINITY});
  tu_expect(lt_cast(g, LT_I8), LT_I8, SHAPE(8), 1, VALS(-56, 127, 127, -128, -24, 0, -1, 0), 0);
  tu_expect(lt_cast(tu_f64(SHAPE(2), 1, (double[]){511.99, -256.5}), LT_U8), LT_U8, SHAPE(2), 1,
            VALS(255, 0), 0);
  /* u8 / i8 -> float: u8 reads unsigned */
  lt_tensor *a = u8(SHAPE(4), 1, (uint8_t[]){0, 127, 128, 255});
  lt_tensor *x = i8(SHAPE(3), 1, (int8_t[]){-128, -1, 127});
  tu_expect(lt_cast(a, LT_F32), LT_F32, SHAPE(4), 1, VALS(0, 127, 128, 255), 0);
  tu_expect(lt_cast(x, LT_F64), LT_F64, SHAPE(3), 1, VALS(-128, -1, 127), 0);
  /* between integers: widen (zext u8, sext i8), narrow (low bits) */
  tu_expect(lt_cast(a, LT_I8), LT_I8, SHAPE(4), 1, VALS(0, 127, -128, -1), 0);
  tu_expect(lt_cast(x, LT_U8), LT_U8, SHAPE(3), 1, VALS(128, 255, 127), 0);
  tu_expect(lt_cast(a, LT_I32), LT_I32, SHAPE(4), 1, VALS(0, 127, 128, 255), 0);
  tu_expect(lt_cast(x, LT_I64), LT_I64, SHAPE(3), 1, VALS(-128, -1, 127), 0);
  lt_tensor *w = lt_from_data(CPU0, LT_I32, SHAPE(3), 1, (int32_t[]){300, -1, 256});
  tu_expect(lt_cast(w, LT_U8), LT_U8, SHAPE(3), 1, VALS(44, 255, 0), 0);
  lt_tensor *v = tu_i64(SHAPE(2), 1, (int64_t[]){1000, -129});
  tu_expect(lt_cast(v, LT_I8), LT_I8, SHAPE(2), 1, VALS(-24, 127), 0);
  /* bool both ways */
  tu_expect(lt_cast(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), LT_U8), LT_U8, SHAPE(2), 1, VALS(1, 0),
            0);
  tu_expect(lt_cast(u8(SHAPE(3), 1, (uint8_t[]){0, 2, 255}), LT_BOOL), LT_BOOL, SHAPE(3), 1,
            VALS(0, 1, 1), 0);
  tu_expect(lt_cast(i8(SHAPE(2), 1, (int8_t[]){-1, 0}), LT_BOOL), LT_BOOL, SHAPE(2), 1, VALS(1, 0),
            0);
  /* a cast inside a computation (fused on cpu) */
  tu_expect(lt_add(lt_cast(a, LT_F32), tu_f32(SHAPE(1), 1, (float[]){0.5f})), LT_F32, SHAPE(4), 1,
            VALS(0.5, 127.5, 128.5, 255.5), 0);
}

static void body_creation(void) {
  /* creation values convert as a cast from double does */
  tu_expect(lt_full(CPU0, LT_U8, SHAPE(2), 1, 300), LT_U8, SHAPE(2), 1, VALS(44, 44), 0);
  tu_expect(lt_full(CPU0, LT_U8, SHAPE(2), 1, -1), LT_U8, SHAPE(2), 1, VALS(255, 255), 0);
  tu_expect(lt_full(CPU0, LT_U8, SHAPE(2), 1, 2.7), LT_U8, SHAPE(2), 1, VALS(2, 2), 0);
  tu_expect(lt_full(CPU0, LT_I8, SHAPE(2), 1, -1), LT_I8, SHAPE(2), 1, VALS(-1, -1), 0);
  tu_expect(lt_scalar(CPU0, LT_I8, 200), LT_I8, NULL, 0, VALS(-56), 0);
  tu_expect(lt_scalar(CPU0, LT_U8, 255), LT_U8, NULL, 0, VALS(255), 0);
  tu_expect(lt_ones(CPU0, LT_I8, SHAPE(2), 1), LT_I8, SHAPE(2), 1, VALS(1, 1), 0);
  tu_expect(lt_eye(CPU0, LT_U8, 2, 2), LT_U8, SHAPE(2, 2), 2, VALS(1, 0, 0, 1), 0);
  /* a constant in a fused loop: the i8 bits of -1 */
  lt_tensor *x = i8(SHAPE(2), 1, (int8_t[]){5, -128});
  tu_expect(lt_add(x, lt_full(CPU0, LT_I8, SHAPE(2), 1, -1)), LT_I8, SHAPE(2), 1, VALS(4, 127), 0);
}

static void test_casts(void **state) {
  (void)state;
  tu_on_both(body_casts);
}
static void test_creation(void **state) {
  (void)state;
  tu_on_both(body_creation);
}

/* ---- reductions and comparisons --------------------------------------------------------- */

static void body_reductions(void) {
  lt_tensor *a = u8(SHAPE(2, 3), 2, (uint8_t[]){3, 200, 100, 1, 128, 255});
  /* sum and prod of u8 / i8 give i64 (torch.sum of uint8 is int64): no wrap */
  tu_expect(lt_sum(a, NULL, 0, false), LT_I64, NULL, 0, VALS(687), 0);
  tu_expect(lt_sum(a, (const int[]){1}, 1, false), LT_I64, SHAPE(2), 1, VALS(303, 384), 0);
  tu_expect(lt_prod(a, (const int[]){0}, 1, false), LT_I64, SHAPE(3), 1, VALS(3, 25600, 25500), 0);
  /* max / min keep u8 and compare unsigned; argmax / argmin give i64 */
  tu_expect(lt_max(a, (const int[]){1}, 1, false), LT_U8, SHAPE(2), 1, VALS(200, 255), 0);
  tu_expect(lt_min(a, (const int[]){1}, 1, true), LT_U8, SHAPE(2, 1), 2, VALS(3, 1), 0);
  tu_expect(lt_max(a, NULL, 0, false), LT_U8, NULL, 0, VALS(255), 0);
  tu_expect(lt_argmax(a, 1, false), LT_I64, SHAPE(2), 1, VALS(1, 2), 0);
  tu_expect(lt_argmin(a, 1, false), LT_I64, SHAPE(2), 1, VALS(0, 0), 0);
  lt_tensor *x = i8(SHAPE(2, 3), 2, (int8_t[]){-128, 127, -1, 5, -7, 3});
  tu_expect(lt_sum(x, NULL, 0, false), LT_I64, NULL, 0, VALS(-1), 0);
  tu_expect(lt_sum(x, (const int[]){1}, 1, false), LT_I64, SHAPE(2), 1, VALS(-2, 1), 0);
  tu_expect(lt_prod(x, (const int[]){1}, 1, false), LT_I64, SHAPE(2), 1, VALS(16256, -105), 0);
  tu_expect(lt_max(x, (const int[]){1}, 1, false), LT_I8, SHAPE(2), 1, VALS(127, 5), 0);
  tu_expect(lt_min(x, (const int[]){1}, 1, false), LT_I8, SHAPE(2), 1, VALS(-128, -7), 0);
  tu_expect(lt_argmax(x, 1, false), LT_I64, SHAPE(2), 1, VALS(1, 0), 0);
  tu_expect(lt_argmin(x, 0, false), LT_I64, SHAPE(3), 1, VALS(0, 1, 0), 0);
  /* a reduction of a wrapped value: sum(a + a) sums the u8 results */
  tu_expect(lt_sum(lt_add(a, a), NULL, 0, false), LT_I64, NULL, 0,
            VALS(6 + 144 + 200 + 2 + 0 + 254), 0);
}

static void body_comparisons(void) {
  lt_tensor *a = u8(SHAPE(4), 1, (uint8_t[]){200, 3, 255, 0});
  lt_tensor *b = u8(SHAPE(4), 1, (uint8_t[]){100, 100, 255, 1});
  tu_expect(lt_lt(a, b), LT_BOOL, SHAPE(4), 1, VALS(0, 1, 0, 1), 0);
  tu_expect(lt_le(a, b), LT_BOOL, SHAPE(4), 1, VALS(0, 1, 1, 1), 0);
  tu_expect(lt_gt(a, b), LT_BOOL, SHAPE(4), 1, VALS(1, 0, 0, 0), 0);
  tu_expect(lt_ge(a, b), LT_BOOL, SHAPE(4), 1, VALS(1, 0, 1, 0), 0);
  tu_expect(lt_eq(a, b), LT_BOOL, SHAPE(4), 1, VALS(0, 0, 1, 0), 0);
  tu_expect(lt_ne(a, b), LT_BOOL, SHAPE(4), 1, VALS(1, 1, 0, 1), 0);
  tu_expect(lt_gt(a, lt_scalar(CPU0, LT_I64, 100)), LT_BOOL, SHAPE(4), 1, VALS(1, 0, 1, 0), 0);
  lt_tensor *x = i8(SHAPE(3), 1, (int8_t[]){-1, 5, -128});
  lt_tensor *y = i8(SHAPE(3), 1, (int8_t[]){1, 5, 127});
  tu_expect(lt_lt(x, y), LT_BOOL, SHAPE(3), 1, VALS(1, 0, 1), 0);
  tu_expect(lt_ge(x, y), LT_BOOL, SHAPE(3), 1, VALS(0, 1, 0), 0);
  /* u8 against i8 compares values (in i32), not bytes: 200 != -56, 255 > -1 */
  lt_tensor *c = u8(SHAPE(2), 1, (uint8_t[]){200, 255});
  lt_tensor *d = i8(SHAPE(2), 1, (int8_t[]){-56, -1});
  tu_expect(lt_eq(c, d), LT_BOOL, SHAPE(2), 1, VALS(0, 0), 0);
  tu_expect(lt_gt(c, d), LT_BOOL, SHAPE(2), 1, VALS(1, 1), 0);
  tu_expect(lt_gt(c, tu_f32(SHAPE(2), 1, (float[]){199.5f, 255.5f})), LT_BOOL, SHAPE(2), 1,
            VALS(1, 0), 0);
  /* where promotes its two values (u8, i8 -> i32); logical ops read non-zero */
  tu_expect(lt_where(tu_bool(SHAPE(2), 1, (uint8_t[]){1, 0}), c, d), LT_I32, SHAPE(2), 1,
            VALS(200, -1), 0);
  tu_expect(lt_logical_not(u8(SHAPE(2), 1, (uint8_t[]){0, 2})), LT_BOOL, SHAPE(2), 1, VALS(1, 0),
            0);
  tu_expect(lt_logical_and(c, d), LT_BOOL, SHAPE(2), 1, VALS(1, 1), 0);
}

static void test_reductions(void **state) {
  (void)state;
  tu_on_both(body_reductions);
  lt_tensor *a = u8(SHAPE(2), 1, (uint8_t[]){1, 2});
  TU_EXPECT_ERROR(lt_mean(a, NULL, 0, false), LT_EDTYPE, "needs a floating dtype, got u8");
  tu_expect(lt_logsumexp(a, NULL, 0, false), LT_F32, NULL, 0, VALS(log(exp(1.0) + exp(2.0))), 1e-6);
}
static void test_comparisons(void **state) {
  (void)state;
  tu_on_both(body_comparisons);
}

/* ---- index ops, clamp, shape ops -------------------------------------------------------- */

static void body_index_clamp_shape(void) {
  lt_tensor *a = u8(SHAPE(3), 1, (uint8_t[]){10, 200, 30});
  tu_expect(lt_gather(a, 0, tu_i64(SHAPE(2), 1, (int64_t[]){2, 1})), LT_U8, SHAPE(2), 1,
            VALS(30, 200), 0);
  tu_expect(lt_index_select(a, 0, tu_i32(SHAPE(2), 1, (int32_t[]){1, 1})), LT_U8, SHAPE(2), 1,
            VALS(200, 200), 0);
  tu_expect(lt_one_hot(tu_i64(SHAPE(2), 1, (int64_t[]){0, 2}), 3, LT_U8), LT_U8, SHAPE(2, 3), 2,
            VALS(1, 0, 0, 0, 0, 1), 0);
  /* clamp: bounds outside the dtype's range bind nothing (a u8 bound of -5
   * must not become 251), bounds inside are truncated */
  lt_tensor *c = u8(SHAPE(3), 1, (uint8_t[]){0, 100, 255});
  tu_expect(lt_clamp(c, -5, 300), LT_U8, SHAPE(3), 1, VALS(0, 100, 255), 0);
  tu_expect(lt_clamp(c, 10.9, 200.2), LT_U8, SHAPE(3), 1, VALS(10, 100, 200), 0);
  tu_expect(lt_clamp(c, NAN, -1), LT_U8, SHAPE(3), 1, VALS(0, 0, 0), 0);
  tu_expect(lt_clamp(c, 300, NAN), LT_U8, SHAPE(3), 1, VALS(255, 255, 255), 0);
  lt_tensor *x = i8(SHAPE(3), 1, (int8_t[]){-128, 0, 127});
  tu_expect(lt_clamp(x, -200, 200), LT_I8, SHAPE(3), 1, VALS(-128, 0, 127), 0);
  tu_expect(lt_clamp(x, -5.7, 5.9), LT_I8, SHAPE(3), 1, VALS(-5, 0, 5), 0);
  /* shape ops copy bytes of every value */
  lt_tensor *m = i8(SHAPE(2, 2), 2, (int8_t[]){-1, 2, -128, 127});
  tu_expect(lt_transpose(m, 0, 1), LT_I8, SHAPE(2, 2), 2, VALS(-1, -128, 2, 127), 0);
  tu_expect(lt_concat((lt_tensor *[]){a, lt_reshape(c, SHAPE(3), 1)}, 2, 0), LT_U8, SHAPE(6), 1,
            VALS(10, 200, 30, 0, 100, 255), 0);
  tu_expect(lt_pad_n(a, SHAPE(1, 1), 2, 255), LT_U8, SHAPE(5), 1, VALS(255, 10, 200, 30, 255), 0);
  tu_expect(
      lt_matmul(u8(SHAPE(1, 2), 2, (uint8_t[]){16, 2}), u8(SHAPE(2, 1), 2, (uint8_t[]){16, 3})),
      LT_U8, SHAPE(1, 1), 2, VALS(6), 0); /* 256 + 6 wraps */
}

static void test_index_clamp_shape(void **state) {
  (void)state;
  tu_on_both(body_index_clamp_shape);
  /* u8 / i8 are not index dtypes here (torch's gather takes int64 only) */
  lt_tensor *a = u8(SHAPE(3), 1, (uint8_t[]){10, 200, 30});
  TU_EXPECT_ERROR(lt_gather(a, 0, u8(SHAPE(1), 1, (uint8_t[]){0})), LT_EDTYPE,
                  "index must be i32 or i64, got u8");
  TU_EXPECT_ERROR(lt_index_select(a, 0, i8(SHAPE(1), 1, (int8_t[]){0})), LT_EDTYPE, "got i8");
  TU_EXPECT_ERROR(lt_one_hot(a, 3, LT_F32), LT_EDTYPE, "got u8");
  TU_EXPECT_ERROR(lt_randperm(CPU0, LT_U8, 3), LT_EDTYPE, "i32 or i64");
}

/* ---- formats that hold dtype ids -------------------------------------------------------- */

static void body_data_round_trip(void) {
  uint8_t bytes[256], back[256];
  for (int i = 0; i < 256; i++) bytes[i] = (uint8_t)i;
  for (int k = 0; k < 2; k++) {
    lt_dtype dt = k ? LT_I8 : LT_U8;
    lt_tensor *t = lt_from_data(CPU0, dt, SHAPE(16, 16), 2, bytes);
    /* through a computation, so that the bytes come back from the backend */
    lt_tensor *r = lt_reshape(lt_transpose(lt_transpose(t, 0, 1), 0, 1), SHAPE(256), 1);
    memset(back, 0, sizeof back);
    assert_int_equal(lt_to_data(r, back, sizeof back), LT_OK);
    assert_memory_equal(back, bytes, sizeof bytes);
    assert_true(lt_to_data(r, back, sizeof back - 1) < 0); /* one byte an element */
    double v;
    assert_int_equal(lt_item(r, 255, &v), LT_OK);
    assert_true(v == (k ? -1.0 : 255.0));
    assert_int_equal(lt_item(r, 128, &v), LT_OK);
    assert_true(v == (k ? -128.0 : 128.0));
  }
}

static void test_data_round_trip(void **state) {
  (void)state;
  tu_on_both(body_data_round_trip);
}

static void test_param_file(void **state) {
  (void)state;
  char path[] = "/tmp/lt_dtypes_small_XXXXXX";
  tu_mkstemp(path);
  lt_tensor *a = u8(SHAPE(3), 1, (uint8_t[]){0, 128, 255});
  lt_tensor *x = i8(SHAPE(2), 1, (int8_t[]){-128, 127});
  if (lt_nn_params_save((lt_tensor *[]){a, x}, 2, path) != LT_OK) fail_msg("%s", lt_last_error());
  lt_tensor *a2 = lt_zeros(CPU0, LT_U8, SHAPE(3), 1), *x2 = lt_zeros(CPU0, LT_I8, SHAPE(2), 1);
  if (lt_nn_params_load((lt_tensor *[]){a2, x2}, 2, path) != LT_OK) fail_msg("%s", lt_last_error());
  tu_expect(a2, LT_U8, SHAPE(3), 1, VALS(0, 128, 255), 0);
  tu_expect(x2, LT_I8, SHAPE(2), 1, VALS(-128, 127), 0);
  /* the dtype id is checked: u8 data does not load into an i8 tensor */
  lt_tensor *w1 = lt_zeros(CPU0, LT_I8, SHAPE(3), 1), *w2 = lt_zeros(CPU0, LT_I8, SHAPE(2), 1);
  assert_int_equal(lt_nn_params_load((lt_tensor *[]){w1, w2}, 2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "tensor 0 is u8 [3], the model's is i8 [3]");
  tu_expect(w1, LT_I8, SHAPE(3), 1, VALS(0, 0, 0), 0); /* untouched */
  /* an unknown dtype id (the first past the last dtype) is rejected */
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  assert_int_equal(b[16], LT_U8); /* u32 dtype of tensor 0, after the 16-byte header */
  b[16] = LT_NUM_DTYPES;
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
  free(b);
  assert_int_equal(lt_nn_params_load((lt_tensor *[]){a2, x2}, 2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "tensor 0 is ? [3]");
  tu_expect(a2, LT_U8, SHAPE(3), 1, VALS(0, 128, 255), 0);
  unlink(path);
}

/* Instruction heads (both backends' executables) keep u8 / i8 and reject the
 * first unknown id. */
static void test_instr_head(void **state) {
  (void)state;
  const int ids[3] = {LT_U8, LT_I8, LT_NUM_DTYPES};
  for (int k = 0; k < 3; k++) {
    lt_instr in = {.op = LT_OP_ADD, .dtype = (uint8_t)ids[k], .ndim = 1, .shape = {3}};
    lt_wbuf w = {0};
    lt__instr_write_head(&w, &in);
    void *bytes;
    size_t nbytes;
    assert_int_equal(lt__wb_finish(&w, &bytes, &nbytes, "test"), LT_OK);
    lt_rbuf r = {.p = bytes, .len = nbytes};
    lt_instr back;
    const char *why = lt__instr_read_head(&r, &back);
    if (ids[k] == LT_NUM_DTYPES) {
      assert_non_null(why);
      assert_string_equal(why, "unknown dtype");
    } else {
      assert_null(why);
      assert_int_equal(back.dtype, ids[k]);
    }
    lt__free(bytes, nbytes);
  }
}

/* A u8 / i8 graph compiled, written to the persistent cache, and loaded from
 * it after the in-memory cache is cleared, on each backend: same values. */
static char g_dir[64];

static void body_persistent_cache(void) {
  lt_counters_reset();
  lt_tensor *a = u8(SHAPE(4), 1, (uint8_t[]){250, 3, 128, 7});
  lt_tensor *x = i8(SHAPE(4), 1, (int8_t[]){-1, 100, -128, 5});
  for (int round = 0; round < 2; round++) {
    lt_tensor *y = lt_add(lt_mul(a, lt_scalar(CPU0, LT_U8, 3)), lt_cast(x, LT_U8));
    lt_tensor *z = lt_max(lt_sub(x, lt_scalar(CPU0, LT_I8, 100)), NULL, 0, false);
    tu_expect(y, LT_U8, SHAPE(4), 1, VALS(237, 109, 0, 26), 0);
    tu_expect(z, LT_I8, NULL, 0, VALS(28), 0); /* -128 - 100 wraps to 28 */
    assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
    if (round == 0) {
      assert_true(tu_counter("UncachedCompile") >= 1);
      lt_cache_clear();
    }
  }
  assert_true(tu_counter("PersistentCacheHit") >= 1);
  assert_int_equal(tu_counter("PersistentCacheDeserializeFailure"), 0);
}

static void test_persistent_cache(void **state) {
  (void)state;
  assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "lt_dtypes_small"));
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  tu_reset_executor();
  tu_on_both(body_persistent_cache);
  lt_set_persistent_cache(NULL, false);
  lt_cache_clear();
  tu_rm_tree(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_ids_names_sizes),
      TU_TEST(test_promotion_table),
      TU_TEST(test_promotion_zero_dim),
      TU_TEST(test_u8_arith),
      TU_TEST(test_i8_arith),
      TU_TEST(test_mixed_arith),
      TU_TEST(test_casts),
      TU_TEST(test_creation),
      TU_TEST(test_reductions),
      TU_TEST(test_comparisons),
      TU_TEST(test_index_clamp_shape),
      TU_TEST(test_data_round_trip),
      TU_TEST(test_param_file),
      TU_TEST(test_instr_head),
      TU_TEST(test_persistent_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
