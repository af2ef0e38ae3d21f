/* The dtype table (src/core/lt_dtype.h): every row against its C type and
 * against the rules the library documents for conversions. Rows are visited
 * through the table's own X-macro, so a new dtype is checked here without
 * touching this file. */
#include "test_util.h"

/* A dtype without a row fails the build in lt_dtype.h; the same count here,
 * from the rows this test visits. */
#define COUNT_ROW(...) +1
_Static_assert(0 LT_DTYPE_TABLE(COUNT_ROW) == LT_NUM_DTYPES, "a dtype without a table row");
_Static_assert(sizeof lt__dtype_infos / sizeof lt__dtype_infos[0] == LT_NUM_DTYPES,
               "the info array has one entry per dtype");

/* Size and kind agree with the C type the row names: size is its sizeof, a
 * float type holds 0.5, a signed one -1, an unsigned one (bool too) wraps -1
 * to its largest value. A row whose CTYPE holds bits, not values (REP BF16),
 * is checked through its own load and store instead. */
#define NAT_HOLDS(T, x, v) ((T)(x) == (T)(v))
#define REP_HOLDS_NAT(T, d, x) ((T)(x) != 0)
#define REP_HOLDS_BF16(T, d, x) (via_row(d, x) != 0)
#define REP_SIGNED_NAT(T, d) ((T)-1 < (T)0)
#define REP_SIGNED_BF16(T, d) (via_row(d, -1) < 0)
static double via_row(const lt_dtype_info *d, double v) {
  int64_t elem[2] = {0};
  d->store_f64(elem, 0, v);
  return d->load_f64(elem, 0);
}
static void test_rows_match_c_types(void **state) {
  (void)state;
#define CHECK_TYPE(E, NAME, TORCH, T, KIND, F2I, MIN, MAX, REP)                               \
  do {                                                                                        \
    const lt_dtype_info *d = lt__dtype_info(LT_##E);                                          \
    assert_non_null(d);                                                                       \
    assert_int_equal(d->size, sizeof(T));                                                     \
    assert_int_equal(lt_dtype_size(LT_##E), sizeof(T));                                       \
    assert_int_equal(d->kind, LT_DK_##KIND);                                                  \
    assert_true(REP_HOLDS_##REP(T, d, 0.5) == (d->kind == LT_DK_FLOAT));                      \
    assert_true(!REP_SIGNED_##REP(T, d) == (d->kind == LT_DK_BOOL || d->kind == LT_DK_UINT)); \
    assert_true(lt__is_float(LT_##E) == (d->kind == LT_DK_FLOAT));                            \
    assert_true(lt__is_int(LT_##E) == (d->kind == LT_DK_SINT || d->kind == LT_DK_UINT));      \
    assert_true(lt__is_unsigned(LT_##E) == (d->kind == LT_DK_BOOL || d->kind == LT_DK_UINT)); \
    assert_int_equal(lt__dtype_category(LT_##E), d->kind == LT_DK_BOOL    ? 0                 \
                                                 : d->kind == LT_DK_FLOAT ? 2                 \
                                                                          : 1);               \
  } while (0);
  LT_DTYPE_TABLE(CHECK_TYPE)
#undef CHECK_TYPE
  assert_null(lt__dtype_info(-1));
  assert_null(lt__dtype_info(LT_NUM_DTYPES));
  assert_int_equal(lt_dtype_size((lt_dtype)LT_NUM_DTYPES), 0);
}

/* The limits are those of the size and kind: integers 2^(bits-1) (signed) or
 * 2^bits (unsigned) values each side, bool 0 and 1, floats the largest finite
 * value of the type (twice it is out of range). */
static void test_limits(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    const lt_dtype_info *d = lt__dtype_info(dt);
    int bits = 8 * (int)d->size;
    switch (d->kind) {
    case LT_DK_BOOL:
      assert_true(d->min_i64 == 0 && d->max_i64 == 1);
      break;
    case LT_DK_UINT:
      assert_true(d->min_i64 == 0);
      assert_true((uint64_t)d->max_i64 == (bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1));
      break;
    case LT_DK_SINT:
      assert_true((uint64_t)d->max_i64 == (UINT64_C(1) << (bits - 1)) - 1);
      assert_true(d->min_i64 == -d->max_i64 - 1);
      break;
    case LT_DK_FLOAT: {
      unsigned char elem[16];
      assert_true(d->min_i64 == INT64_MIN && d->max_i64 == INT64_MAX);
      assert_true(isfinite(d->max_f64) && d->min_f64 == -d->max_f64);
      d->store_f64(elem, 0, d->max_f64 * 2);
      assert_true(isinf(d->load_f64(elem, 0)));
      break;
    }
    }
    if (d->kind != LT_DK_FLOAT) {
      assert_true(d->min_f64 == (double)d->min_i64);
      assert_true(d->max_f64 == (double)d->max_i64);
    }
  }
}

/* Each row's limits survive a store and a load, as double and as int64, both
 * through the row's function pointers and through the switches that hot loops
 * use; the two ways agree on every value tried. */
static void test_limits_round_trip(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    const lt_dtype_info *d = lt__dtype_info(dt);
    int64_t elem[2] = {0}; /* room and alignment for any element */
    const double fv[] = {d->min_f64, d->max_f64, 0, 1, -1, 2.75, -2.75, 300.5, 1e300, -1e300, NAN};
    for (size_t k = 0; k < sizeof fv / sizeof fv[0]; k++) {
      d->store_f64(elem, 0, fv[k]);
      double a = d->load_f64(elem, 0);
      int64_t ai = d->load_i64(elem, 0);
      lt__store_f64(dt, elem, 0, fv[k]);
      double b = lt__load_f64(dt, elem, 0);
      assert_memory_equal(&a, &b, sizeof a); /* NaN too */
      assert_true(ai == lt__load_i64(dt, elem, 0));
      if (k < 2) assert_true(a == fv[k]); /* the limits themselves */
    }
    const int64_t iv[] = {d->min_i64, d->max_i64, 0, 1, -1, 300, -300, INT64_MIN, INT64_MAX};
    for (size_t k = 0; k < sizeof iv / sizeof iv[0]; k++) {
      d->store_i64(elem, 0, iv[k]);
      int64_t a = d->load_i64(elem, 0);
      lt__store_i64(dt, elem, 0, iv[k]);
      assert_true(a == lt__load_i64(dt, elem, 0));
      if (k < 2) assert_true(a == iv[k]); /* the limits themselves */
    }
  }
}

/* Conversions follow the documented rules (lazytensor.h, lt_dtype): a float
 * into an integer truncates toward zero, NaN gives 0; u8 / i8 keep the low
 * byte of the int64 (u8 of 300.7 is 44, of -1.5 255; i8 of 200 is -56); i32
 * and i64 saturate (as llvm.fptosi.sat); int64 into an integer wraps; bool is
 * v != 0 (NaN is true). */
static double via_f64(lt_dtype dt, double v) {
  int64_t elem[2] = {0};
  lt__store_f64(dt, elem, 0, v);
  return lt__load_f64(dt, elem, 0);
}
static int64_t via_i64(lt_dtype dt, int64_t v) {
  int64_t elem[2] = {0};
  lt__store_i64(dt, elem, 0, v);
  return lt__load_i64(dt, elem, 0);
}
static void test_conversions(void **state) {
  (void)state;
  assert_true(via_f64(LT_U8, 300.7) == 44);
  assert_true(via_f64(LT_U8, -1.5) == 255);
  assert_true(via_f64(LT_U8, INFINITY) == 255);
  assert_true(via_f64(LT_U8, -INFINITY) == 0);
  assert_true(via_f64(LT_I8, 200) == -56);
  assert_true(via_f64(LT_I8, NAN) == 0);
  assert_true(via_f64(LT_I32, 3e9) == INT32_MAX);
  assert_true(via_f64(LT_I32, -3e9) == INT32_MIN);
  assert_true(via_f64(LT_I32, -2.9) == -2);
  assert_true(via_f64(LT_I64, 1e300) == (double)INT64_MAX);
  assert_true(via_f64(LT_BOOL, NAN) == 1);
  assert_true(via_f64(LT_BOOL, 0.0) == 0);
  assert_true(via_f64(LT_F32, 0.1) == (double)0.1f);
  assert_true(via_i64(LT_U8, 256 + 7) == 7);
  assert_true(via_i64(LT_I8, 128) == -128);
  assert_true(via_i64(LT_I32, INT64_C(1) << 32 | 5) == 5);
  assert_true(via_i64(LT_I32, INT32_MAX + INT64_C(1)) == INT32_MIN);
  assert_true(via_i64(LT_BOOL, 2) == 1);
  assert_true(via_i64(LT_F64, -3) == -3);
  int64_t elem[2] = {0};
  lt__store_f64(LT_F64, elem, 0, 1e300);
  assert_true(lt__load_i64(LT_F64, elem, 0) == INT64_MAX); /* saturates, no UB */
  lt__store_f64(LT_F32, elem, 0, -7.9);
  assert_true(lt__load_i64(LT_F32, elem, 0) == -7);
  /* the same rules through the exported helpers */
  assert_true(lt__int_wrap(LT_I8, 200) == -56);
  assert_true(lt__int_wrap(LT_F32, 200) == 200);
  assert_true(lt__dtype_round(LT_U8, -1.5) == 255);
  assert_true(lt__dtype_round(LT_F32, 0.1) == (double)0.1f);
}

/* bf16 is the upper half of an f32, rounded to nearest with ties to even, as
 * torch's c10::BFloat16 (round_to_nearest_even): values worked out by hand
 * from the bits. 1 + 2^-8 lies half-way between 1 and 1 + 2^-7 and goes to
 * the even 1; 1 + 3 * 2^-8 goes up to 1 + 2^-6; anything past the half goes
 * up. A double is rounded to f32 first (torch's path), so 1 + 2^-8 + 2^-40,
 * which f32 rounds to 1 + 2^-8, ends at 1. NaN of either sign is 0x7FC0; the
 * largest finite value is 0x7F7F, and the first f32 past its half-way point
 * rounds to inf. int64 into bf16 goes through f32 too. */
static uint16_t bf16_bits(double v) {
  uint16_t h = 0;
  lt__store_f64(LT_BF16, &h, 0, v);
  return h;
}
static void test_bf16_rounding(void **state) {
  (void)state;
  assert_int_equal(bf16_bits(1.0), 0x3F80);
  assert_int_equal(bf16_bits(-2.0), 0xC000);
  assert_int_equal(bf16_bits(1.0 + 0x1p-8), 0x3F80);           /* tie: to even (down) */
  assert_int_equal(bf16_bits(1.0 + 3 * 0x1p-8), 0x3F82);       /* tie: to even (up) */
  assert_int_equal(bf16_bits(1.0 + 0x1p-8 + 0x1p-20), 0x3F81); /* past the half: up */
  assert_int_equal(bf16_bits(1.0 + 0x1p-8 + 0x1p-40), 0x3F80); /* f32 first: a tie again */
  assert_int_equal(bf16_bits(1.0 + 0x1p-8 - 0x1p-20), 0x3F80); /* under the half: down */
  assert_int_equal(bf16_bits(0.1), 0x3DCD);
  assert_int_equal(bf16_bits(NAN), 0x7FC0);
  assert_int_equal(bf16_bits(-NAN), 0x7FC0);
  assert_int_equal(bf16_bits(INFINITY), 0x7F80);
  assert_int_equal(bf16_bits(-INFINITY), 0xFF80);
  assert_int_equal(bf16_bits(LT_BF16_MAX), 0x7F7F);
  assert_int_equal(bf16_bits(-0.0), 0x8000);
  assert_int_equal(bf16_bits(0x1p-133), 0x0001); /* the smallest subnormal */
  /* half-way between 0x7F7F and inf, in f32: rounds up (0x7F7F is odd) */
  assert_int_equal(bf16_bits((double)(LT_BF16_MAX + 0x1p120)), 0x7F80);
  assert_true(via_f64(LT_BF16, 3.0) == 3.0);
  assert_true(via_f64(LT_BF16, 257.0) == 256.0); /* 8 significant bits: a tie, to even */
  assert_true(via_f64(LT_BF16, 259.0) == 260.0);
  assert_true(via_f64(LT_BF16, -7.9) == -7.90625); /* 253 / 32 */
  assert_true(via_i64(LT_BF16, 1000) == 1000);
  assert_true(via_i64(LT_BF16, 1001) == 1000);
  assert_true(via_i64(LT_BF16, INT64_MAX) == INT64_MAX); /* 2^63: loads back saturated */
  int16_t elem = 0;
  lt__store_f64(LT_BF16, &elem, 0, -7.9);
  assert_true(lt__load_i64(LT_BF16, &elem, 0) == -7);
  assert_true(lt__dtype_round(LT_BF16, 0.1) == 0.10009765625);
  /* bf16 computes in f32; every other row in itself */
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
    assert_int_equal(lt__dtype_compute(dt), dt == LT_BF16 ? LT_F32 : dt);
  /* the two conversions through every bf16 value: widening then narrowing
   * is the identity on every non-NaN pattern */
  for (uint32_t h = 0; h <= 0xFFFF; h++) {
    float f = lt__bf16_to_f32((uint16_t)h);
    if (f == f) assert_int_equal(lt__f32_to_bf16(f), h);
  }
}

/* Each dtype's names find it again; anything else finds none. */
static void test_names_round_trip(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    const lt_dtype_info *d = lt__dtype_info(dt);
    assert_string_equal(lt_dtype_name((lt_dtype)dt), d->name);
    assert_int_equal(lt__dtype_from_name(d->name), dt);
    assert_int_equal(lt__dtype_from_name(d->torch_name), dt);
    for (int o = 0; o < dt; o++) { /* names are unique */
      assert_string_not_equal(d->name, lt__dtype_info(o)->name);
      assert_string_not_equal(d->torch_name, lt__dtype_info(o)->torch_name);
    }
  }
  assert_string_equal(lt_dtype_name(LT_U8), "u8");
  assert_string_equal(lt__dtype_info(LT_F32)->torch_name, "float32");
  assert_int_equal(lt__dtype_from_name("bfloat16"), LT_BF16);
  assert_string_equal(lt_dtype_name((lt_dtype)-1), "?");
  assert_int_equal(lt__dtype_from_name("f16"), -1);
  assert_int_equal(lt__dtype_from_name(""), -1);
  assert_int_equal(lt__dtype_from_name(NULL), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows_match_c_types), cmocka_unit_test(test_limits),
      cmocka_unit_test(test_limits_round_trip),  cmocka_unit_test(test_conversions),
      cmocka_unit_test(test_names_round_trip),   cmocka_unit_test(test_bf16_rounding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
