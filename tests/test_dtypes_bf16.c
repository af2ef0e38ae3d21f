/* bf16 (torch.bfloat16) through the host interfaces and the formats that
 * store dtype ids: f32 arrays in (rounded to nearest even) and out (exact),
 * raw 16-bit values, lt_item, creation values (lt_full, lt_scalar, lt_arange,
 * lt_eye), parameter files, saved programs, the persistent cache (whose key
 * tells bf16 from f32) and executable instruction heads. Expected values are
 * PyTorch 1.13's, each with the torch expression that gave it; graphs run on
 * both backends (ref and cpu, tests/test_backends.h). */
#include "test_util.h"
#include "test_backends.h"

#include "lazytensor_nn.h"
#include "../src/backend/bytes.h"
#include "../src/backend/instr.h"
#include "../src/core/lt_alloc.h"
#include "../src/core/lt_node.h"

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static lt_tensor *bf16_bits(const int64_t *shape, int ndim, const uint16_t *bits) {
  return lt_from_data(CPU0, LT_BF16, shape, ndim, bits);
}

/* t's raw 16-bit values (n of them), failing the test on error. */
static void read_bits(lt_tensor *t, uint16_t *out, size_t n) {
  if (!t) fail_msg("tensor is NULL: %s", lt_last_error());
  assert_int_equal(lt_get_dtype(t), LT_BF16);
  assert_int_equal(lt_numel(t), (int64_t)n);
  if (lt_to_data(t, out, n * sizeof *out) != LT_OK) fail_msg("lt_to_data: %s", lt_last_error());
}

static void expect_bits(lt_tensor *t, const uint16_t *want, size_t n) {
  uint16_t got[64];
  assert_true(n <= 64);
  read_bits(t, got, n);
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("element %zu: bits 0x%04x, want 0x%04x", i, (unsigned)got[i], (unsigned)want[i]);
}

/* ---- f32 in and out ---------------------------------------------------------------------- */

/* The f32 inputs, by bits, and what torch makes of them:
 *   torch.tensor(X, dtype=torch.float32).bfloat16().view(torch.int16)
 * except for NaN, where the vectorized conversion of torch 1.13 gives 0xFFFF
 * and its scalar one (c10::BFloat16, torch.tensor(float('nan'),
 * dtype=torch.bfloat16)) 0x7FC0: this library's is the latter, for every NaN. */
static const uint32_t kIn[] = {
    0x3F808000, /* 1 + 2^-8: a tie, to even (down) */
    0x3F818000, /* 1 + 3 * 2^-8: a tie, to even (up) */
    0x3F808001, /* just above the tie: up */
    0x7FC00000, /* NaN */
    0x7F800000, /* +inf */
    0xFF800000, /* -inf */
    0x7F7FFFFF, /* f32's max rounds beyond bf16's: inf */
    0x7F7F7FFF, /* just below the tie under bf16's max: bf16's max */
    0x00018000, /* a subnormal tie, to even: 0x0002 */
    0x80000000, /* -0 */
    0xFFC00001, /* a NaN with a payload and the sign: 0x7FC0 */
    0x7F800001, /* a signalling NaN: 0x7FC0 */
    0x3F800000, /* 1 */
    0xC0400000, /* -3 */
};
static const uint16_t kOut[] = {0x3F80, 0x3F82, 0x3F81, 0x7FC0, 0x7F80, 0xFF80, 0x7F80,
                                0x7F7F, 0x0002, 0x8000, 0x7FC0, 0x7FC0, 0x3F80, 0xC040};
enum { kN = sizeof kIn / sizeof kIn[0] };
_Static_assert(sizeof kOut / sizeof kOut[0] == kN, "one output per input");

TU_BOTH(test_from_f32_rounds_to_nearest_even) {
  float in[kN];
  for (int i = 0; i < kN; i++) in[i] = f32_of(kIn[i]);
  lt_tensor *t = lt_from_f32(CPU0, LT_BF16, SHAPE(2, 7), 2, in);
  assert_non_null(t);
  assert_int_equal(lt_get_dtype(t), LT_BF16);
  expect_bits(t, kOut, kN);
  /* through a computation on the backend (two transposes: the identity), the
   * bits come back as they went in */
  lt_tensor *r = lt_reshape(lt_transpose(lt_transpose(t, 0, 1), 0, 1), SHAPE(kN), 1);
  expect_bits(r, kOut, kN);
  /* lt_to_f32 widens exactly: the bits shifted up by 16 */
  float back[kN + 1];
  back[kN] = 42.0f; /* past the end: untouched */
  assert_int_equal(lt_to_f32(r, back, kN), LT_OK);
  for (int i = 0; i < kN; i++) assert_int_equal(f32_bits(back[i]), (uint32_t)kOut[i] << 16);
  assert_true(back[kN] == 42.0f);
  /* lt_item: the same value as a double */
  for (int i = 0; i < kN; i++) {
    double v;
    assert_int_equal(lt_item(r, i, &v), LT_OK);
    float w = f32_of((uint32_t)kOut[i] << 16);
    assert_true(isnan(w) ? isnan(v) : v == (double)w);
  }
}

/* Every 16-bit pattern in through lt_from_data and out through lt_to_data
 * unchanged; lt_to_f32 widens each exactly; lt_from_f32 of that gives the
 * pattern back (a bf16 value is an f32 value: no rounding), NaNs aside. */
static void test_raw_bits_every_pattern(void **state) {
  (void)state;
  enum { N = 1 << 16 };
  uint16_t *bits = malloc(N * sizeof *bits), *back = malloc(N * sizeof *back);
  float *wide = malloc(N * sizeof *wide);
  for (int i = 0; i < N; i++) bits[i] = (uint16_t)i;
  lt_tensor *t = bf16_bits(SHAPE(256, 256), 2, bits);
  assert_int_equal(lt_to_data(t, back, N * sizeof *back), LT_OK);
  assert_memory_equal(back, bits, N * sizeof *bits);
  assert_int_equal(lt_to_f32(t, wide, N), LT_OK);
  int nans = 0;
  for (int i = 0; i < N; i++) assert_int_equal(f32_bits(wide[i]), (uint32_t)i << 16);
  lt_tensor *u = lt_from_f32(CPU0, LT_BF16, SHAPE(N), 1, wide);
  assert_int_equal(lt_to_data(u, back, N * sizeof *back), LT_OK);
  for (int i = 0; i < N; i++) {
    bool nan = isnan(wide[i]);
    nans += nan;
    assert_int_equal(back[i], nan ? 0x7FC0 : i);
  }
  assert_int_equal(nans, 2 * 127); /* exponent all ones, mantissa not 0, either sign */
  free(bits);
  free(back);
  free(wide);
}

static void test_host_io_errors(void **state) {
  (void)state;
  TU_EXPECT_ERROR(lt_from_f32(CPU0, LT_BF16, SHAPE(2), 1, NULL), LT_EINVAL,
                  "lt_from_f32: data is NULL");
  TU_EXPECT_ERROR(lt_from_f32(CPU0, LT_NUM_DTYPES, SHAPE(1), 1, (float[]){1}), LT_EDTYPE,
                  "lt_from_f32: invalid dtype 8");
  TU_EXPECT_ERROR(lt_from_f32(CPU0, (lt_dtype)-1, SHAPE(1), 1, (float[]){1}), LT_EDTYPE,
                  "lt_from_f32: invalid dtype -1");
  /* no elements: NULL data is fine */
  lt_tensor *e = lt_from_f32(CPU0, LT_BF16, SHAPE(0), 1, NULL);
  assert_non_null(e);
  assert_int_equal(lt_to_f32(e, NULL, 0), LT_OK);
  lt_tensor *t = lt_from_f32(CPU0, LT_BF16, SHAPE(3), 1, (float[]){1, 2, 3});
  float two[2] = {-1, -1};
  lt_clear_error();
  assert_int_equal(lt_to_f32(t, two, 2), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_to_f32: destination holds 2 elements, the tensor has 3");
  assert_true(two[0] == -1 && two[1] == -1); /* nothing written */
  assert_int_equal(lt_to_f32(t, NULL, 3), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_to_f32: destination is NULL");
  assert_int_equal(lt_to_f32(NULL, two, 2), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_to_f32");
  /* raw reads need two bytes an element */
  uint16_t raw[3];
  assert_int_equal(lt_to_data(t, raw, sizeof raw - 1), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_to_data");
  double v;
  assert_int_equal(lt_item(t, 3, &v), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt_item: index 3 out of range for 3 elements");
  /* the tensor is fine after all that */
  float all[3];
  assert_int_equal(lt_to_f32(t, all, 3), LT_OK);
  assert_true(all[0] == 1 && all[1] == 2 && all[2] == 3);
}

/* ---- creation values ------------------------------------------------------------------- */

TU_BOTH(test_creation_values) {
  /* torch.arange(0, 3, 0.1, dtype=torch.bfloat16).view(torch.int16) */
  static const uint16_t arange_bits[30] = {0,     15821, 15949, 16026, 16077, 16128, 16154, 16179,
                                           16205, 16230, 16256, 16269, 16282, 16294, 16307, 16320,
                                           16333, 16346, 16358, 16371, 16384, 16390, 16397, 16403,
                                           16410, 16416, 16422, 16429, 16435, 16442};
  expect_bits(lt_arange(CPU0, LT_BF16, 0, 3, 0.1), arange_bits, 30);
  /* torch.arange(-2.5, 2.5, 0.75, dtype=torch.bfloat16): every value exact */
  tu_expect(lt_arange(CPU0, LT_BF16, -2.5, 2.5, 0.75), LT_BF16, SHAPE(7), 1,
            ((const double[]){-2.5, -1.75, -1.0, -0.25, 0.5, 1.25, 2.0}), 0);
  /* torch.arange(256, 260, 1, dtype=torch.bfloat16): 257 and 259 are ties */
  tu_expect(lt_arange(CPU0, LT_BF16, 256, 260, 1), LT_BF16, SHAPE(4), 1,
            ((const double[]){256, 256, 258, 260}), 0);
  /* torch.full((2,), 0.1, dtype=torch.bfloat16).view(torch.int16): 0x3DCD;
   * torch.full((1,), 1/3, ...): 0x3EAB; torch.full((1,), -1e-40, ...): 0x8001 */
  expect_bits(lt_full(CPU0, LT_BF16, SHAPE(2), 1, 0.1), (const uint16_t[]){0x3DCD, 0x3DCD}, 2);
  expect_bits(lt_full(CPU0, LT_BF16, SHAPE(1), 1, 1.0 / 3), (const uint16_t[]){0x3EAB}, 1);
  expect_bits(lt_full(CPU0, LT_BF16, SHAPE(1), 1, -1e-40), (const uint16_t[]){0x8001}, 1);
  /* lt_scalar: 0 and 1 are IR constants, 1/3 device data; the same bits.
   * torch.tensor(1 + 2**-8 + 2**-30, dtype=torch.bfloat16) is 0x3F80: the double
   * rounds to f32 first (the tie 1 + 2^-8), which goes to even */
  expect_bits(lt_reshape(lt_scalar(CPU0, LT_BF16, 1.0 / 3), SHAPE(1), 1),
              (const uint16_t[]){0x3EAB}, 1);
  expect_bits(lt_reshape(lt_scalar(CPU0, LT_BF16, 1.0 + 0x1p-8 + 0x1p-30), SHAPE(1), 1),
              (const uint16_t[]){0x3F80}, 1);
  expect_bits(lt_reshape(lt_scalar(CPU0, LT_BF16, 1), SHAPE(1), 1), (const uint16_t[]){0x3F80}, 1);
  expect_bits(lt_zeros(CPU0, LT_BF16, SHAPE(2), 1), (const uint16_t[]){0, 0}, 2);
  expect_bits(lt_ones(CPU0, LT_BF16, SHAPE(2), 1), (const uint16_t[]){0x3F80, 0x3F80}, 2);
  /* torch.eye(2, 3).bfloat16().view(torch.int16) (torch 1.13 has no bf16 eye) */
  expect_bits(lt_reshape(lt_eye(CPU0, LT_BF16, 2, 3), SHAPE(6), 1),
              (const uint16_t[]){0x3F80, 0, 0, 0, 0x3F80, 0}, 6);
}

/* ---- parameter files ------------------------------------------------------------------- */

static void test_param_file(void **state) {
  (void)state;
  char path[] = "/tmp/lt_dtypes_bf16_XXXXXX";
  tu_mkstemp(path);
  /* every kind of value, NaN payloads included: the file holds the bits */
  static const uint16_t bits[6] = {0x3F81, 0x7FC1, 0xFF80, 0x0001, 0x8000, 0xC040};
  lt_tensor *a = bf16_bits(SHAPE(2, 3), 2, bits);
  lt_tensor *x = lt_full(CPU0, LT_F32, SHAPE(2), 1, 0.5);
  if (lt_nn_params_save((lt_tensor *[]){a, x}, 2, path) != LT_OK) fail_msg("%s", lt_last_error());
  lt_tensor *a2 = lt_zeros(CPU0, LT_BF16, SHAPE(2, 3), 2),
            *x2 = lt_zeros(CPU0, LT_F32, SHAPE(2), 1);
  if (lt_nn_params_load((lt_tensor *[]){a2, x2}, 2, path) != LT_OK) fail_msg("%s", lt_last_error());
  expect_bits(lt_reshape(a2, SHAPE(6), 1), bits, 6);
  tu_expect(x2, LT_F32, SHAPE(2), 1, ((const double[]){0.5, 0.5}), 0);
  /* the dtype id is checked: bf16 data does not load into an f32 tensor */
  lt_tensor *w1 = lt_zeros(CPU0, LT_F32, SHAPE(2, 3), 2), *w2 = lt_zeros(CPU0, LT_F32, SHAPE(2), 1);
  assert_int_equal(lt_nn_params_load((lt_tensor *[]){w1, w2}, 2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "tensor 0 is bf16 [2, 3], the model's is f32 [2, 3]");
  tu_expect(w1, LT_F32, SHAPE(2, 3), 2, ((const double[]){0, 0, 0, 0, 0, 0}), 0); /* untouched */
  /* the file holds id 7; the first id after bf16 is refused */
  size_t n;
  uint8_t *b = tu_read_file(path, &n);
  assert_int_equal(b[16], LT_BF16); /* u32 dtype of tensor 0, after the 16-byte header */
  b[16] = LT_NUM_DTYPES;
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
  free(b);
  assert_int_equal(lt_nn_params_load((lt_tensor *[]){a2, x2}, 2, path), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "tensor 0 is ? [2, 3]");
  expect_bits(lt_reshape(a2, SHAPE(6), 1), bits, 6); /* untouched */
  unlink(path);
}

/* ---- saved programs -------------------------------------------------------------------- */

static char g_dir[64];

/* The graph of the program: y = x * x + x * c (bf16, c a captured bf16 value),
 * z = x + w (f32, by promotion), s = sum(x) (bf16, as torch's sum). */
static void trace(lt_tensor *x, lt_tensor *w, lt_tensor **outs) {
  lt_tensor *c = lt_scalar(CPU0, LT_BF16, 0.3);
  outs[0] = lt_add(lt_mul(x, x), lt_mul(x, c));
  outs[1] = lt_add(x, w);
  outs[2] = lt_sum(x, NULL, 0, false);
}

static lt_tensor *input_x(int seed) {
  float v[4];
  for (int i = 0; i < 4; i++) v[i] = tu_wave_at(seed, i) * 3;
  return lt_from_f32(CPU0, LT_BF16, SHAPE(4), 1, v);
}

/* y's value by hand: each op rounds its f32 result to bf16 once. */
static void oracle_y(lt_tensor *x, uint16_t *want) {
  float xv[4];
  assert_int_equal(lt_to_f32(x, xv, 4), LT_OK);
  float c = lt__bf16_to_f32(lt__f32_to_bf16(0.3f));
  for (int i = 0; i < 4; i++) {
    float sq = lt__bf16_to_f32(lt__f32_to_bf16(xv[i] * xv[i]));
    float xc = lt__bf16_to_f32(lt__f32_to_bf16(xv[i] * c));
    want[i] = lt__f32_to_bf16(sq + xc);
  }
}

TU_BOTH(test_saved_program) {
  char path[96];
  snprintf(path, sizeof path, "%s/bf16.ltp", g_dir);
  lt_tensor *x = input_x(1),
            *w = lt_from_f32(CPU0, LT_F32, SHAPE(4), 1, (const float[]){0.25f, -1, 2, 1e-3f});
  lt_tensor *outs[3];
  trace(x, w, outs);
  lt_program *p = lt_program_create(outs, 3, (lt_tensor *[]){x, w}, 2);
  if (!p) fail_msg("lt_program_create: %s", lt_last_error());
  assert_int_equal(lt_program_save(p, path), LT_OK);
  lt_program_free(p);
  lt_cache_clear();
  lt_program *q = lt_program_load(path);
  if (!q) fail_msg("lt_program_load: %s", lt_last_error());
  /* the signature: bf16 [4] and f32 [4] in; bf16 [4], f32 [4], bf16 [] out */
  static const lt_dtype want_in[2] = {LT_BF16, LT_F32}, want_out[3] = {LT_BF16, LT_F32, LT_BF16};
  assert_int_equal(lt_program_count(q, false), 2);
  assert_int_equal(lt_program_count(q, true), 3);
  for (int k = 0; k < 5; k++) {
    bool out = k >= 2;
    int i = out ? k - 2 : k;
    lt_dtype dt = LT_NUM_DTYPES;
    int64_t shape[LT_MAX_DIMS];
    int ndim = -1;
    assert_int_equal(lt_program_signature(q, out, i, &dt, shape, &ndim), LT_OK);
    assert_int_equal(dt, out ? want_out[i] : want_in[i]);
    assert_int_equal(ndim, out && i == 2 ? 0 : 1);
  }
  /* run on a new input: the same bits as the graph traced directly, and y as
   * the oracle rounds it */
  lt_tensor *x2 = input_x(2), *got[3] = {NULL, NULL, NULL}, *direct[3];
  assert_int_equal(lt_program_run(q, (lt_tensor *[]){x2, w}, 2, got), LT_OK);
  trace(x2, w, direct);
  uint16_t a[4], b[4], want[4];
  read_bits(got[0], a, 4);
  read_bits(direct[0], b, 4);
  assert_memory_equal(a, b, sizeof a);
  oracle_y(x2, want);
  assert_memory_equal(a, want, sizeof a);
  float fa[4], fb[4];
  assert_int_equal(lt_get_dtype(got[1]), LT_F32);
  assert_int_equal(lt_to_data(got[1], fa, sizeof fa), LT_OK);
  assert_int_equal(lt_to_data(direct[1], fb, sizeof fb), LT_OK);
  assert_memory_equal(fa, fb, sizeof fa);
  read_bits(got[2], a, 1);
  read_bits(direct[2], b, 1);
  assert_int_equal(a[0], b[0]);
  /* an f32 input where the program takes bf16 is refused */
  lt_tensor *xf = lt_full(CPU0, LT_F32, SHAPE(4), 1, 1), *bad[3] = {NULL, NULL, NULL};
  lt_clear_error();
  assert_true(lt_program_run(q, (lt_tensor *[]){xf, w}, 2, bad) < 0);
  tu_expect_substr(lt_last_error(), "lt_program_run");
  for (int i = 0; i < 3; i++) lt_release(got[i]);
  lt_program_free(q);
  unlink(path);
}

/* ---- the persistent cache -------------------------------------------------------------- */

/* (x + x) * x: no scalar, so that the bf16 and the f32 graphs have the same
 * nodes and edges and differ only in their dtypes. */
static lt_tensor *cache_graph(lt_dtype dt) {
  lt_tensor *x = lt_from_f32(CPU0, dt, SHAPE(4), 1, (const float[]){1.5f, -0.1f, 3.3f, 250.7f});
  return lt_mul(lt_add(x, x), x);
}

TU_BOTH(test_persistent_cache) {
  /* a bf16 graph: compiled and stored, then (memory cache cleared) loaded from
   * disk, with the same bits */
  uint16_t first[4], again[4];
  lt_counters_reset();
  read_bits(cache_graph(LT_BF16), first, 4);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_true(tu_counter("UncachedCompile") >= 1);
  assert_int_equal(tu_counter("PersistentCacheHit"), 0);
  lt_cache_clear();
  lt_counters_reset();
  read_bits(cache_graph(LT_BF16), again, 4);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_true(tu_counter("PersistentCacheHit") >= 1);
  assert_int_equal(tu_counter("UncachedCompile"), 0);
  assert_int_equal(tu_counter("PersistentCacheDeserializeFailure"), 0);
  assert_memory_equal(first, again, sizeof first);
  /* the same graph over an f32 input is another key: it compiles (no hit on
   * the bf16 entry) and gives f32 values */
  lt_cache_clear();
  lt_counters_reset();
  lt_tensor *f = cache_graph(LT_F32);
  float fv[4];
  assert_int_equal(lt_get_dtype(f), LT_F32);
  assert_int_equal(lt_to_data(f, fv, sizeof fv), LT_OK);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(tu_counter("PersistentCacheHit"), 0);
  assert_true(tu_counter("UncachedCompile") >= 1);
  assert_true(fv[3] == (250.7f + 250.7f) * 250.7f);
  /* and back to bf16: the disk entry is still the bf16 one */
  lt_cache_clear();
  lt_counters_reset();
  read_bits(cache_graph(LT_BF16), again, 4);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_true(tu_counter("PersistentCacheHit") >= 1);
  assert_memory_equal(first, again, sizeof first);
}

/* A linear under autocast: a product of bf16 operands with f32 sums (the
 * op table's ACC rule, a kind of its own in the cpu backend's saved
 * executables) followed by its bias and the cast to bf16 (its epilogue).
 * Saved, then loaded from disk with the memory cache cleared: the same
 * bits. */
static lt_tensor *linear_graph(void) {
  float xv[6 * 8], wv[8 * 5], bv[5];
  for (int i = 0; i < 6 * 8; i++) xv[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
  for (int i = 0; i < 8 * 5; i++) wv[i] = (float)((i * 11) % 17) / 9.0f - 0.9f;
  for (int i = 0; i < 5; i++) bv[i] = 0.25f * (float)i - 0.3f;
  lt_tensor *x = lt_from_f32(CPU0, LT_F32, SHAPE(6, 8), 2, xv);
  lt_nn_linear l = {lt_from_f32(CPU0, LT_F32, SHAPE(8, 5), 2, wv),
                    lt_from_f32(CPU0, LT_F32, SHAPE(5), 1, bv), 8, 5};
  assert_int_equal(lt_autocast_begin(CPU0, LT_BF16), LT_OK);
  lt_tensor *y = lt_nn_linear_forward(&l, x);
  assert_int_equal(lt_autocast_end(CPU0), LT_OK);
  lt_release(l.weight);
  lt_release(l.bias);
  assert_non_null(y);
  assert_int_equal(lt_get_dtype(y), LT_BF16);
  return y;
}

TU_BOTH(test_persistent_cache_linear) {
  uint16_t first[30], again[30];
  lt_cache_clear();
  lt_counters_reset();
  read_bits(linear_graph(), first, 30);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  lt_cache_clear();
  lt_counters_reset();
  read_bits(linear_graph(), again, 30);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_true(tu_counter("PersistentCacheHit") >= 1);
  assert_int_equal(tu_counter("UncachedCompile"), 0);
  assert_int_equal(tu_counter("PersistentCacheDeserializeFailure"), 0);
  assert_memory_equal(first, again, sizeof first);
}

/* ---- instruction heads ----------------------------------------------------------------- */

/* Both backends' executables start each instruction with this head: bf16's id
 * is kept, the first id after it refused. */
static void test_instr_head(void **state) {
  (void)state;
  const int ids[2] = {LT_BF16, LT_NUM_DTYPES};
  for (int k = 0; k < 2; k++) {
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
      assert_int_equal(back.dtype, LT_BF16);
    }
    lt__free(bytes, nbytes);
  }
}

static int group_setup(void **state) {
  (void)state;
  assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "lt_dtypes_bf16"));
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  tu_reset_executor();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  lt_set_persistent_cache(NULL, false);
  lt_cache_clear();
  tu_rm_tree(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_from_f32_rounds_to_nearest_even),
      TU_TEST(test_raw_bits_every_pattern),
      TU_TEST(test_host_io_errors),
      TU_TEST(test_creation_values),
      TU_TEST(test_param_file),
      TU_TEST(test_saved_program),
      TU_TEST(test_persistent_cache),
      TU_TEST(test_persistent_cache_linear),
      TU_TEST(test_instr_head),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
