/* The cpu backend's per-dtype code against the dtype table
 * (src/core/lt_dtype.h):
 *  - the hand-written kernels that store a value (pad's fill, one_hot's one)
 *    store it as the table does, bytes equal to the ref kernel's, for every
 *    dtype and for fill values outside an integer dtype's range;
 *  - the kernels that pick a loop by dtype run every table dtype (bytes
 *    equal to ref) and refuse a dtype that is not a row with LT_EDTYPE and a
 *    message naming the op and the dtype, rather than running another
 *    dtype's loop over its bytes;
 *  - the LLVM type of each dtype (lt__ops_type) has the table's width, and a
 *    CONST node's IR value is the value the table stores.
 * The kernels are called directly, on buffers made here (no JIT). */
#include "test_util.h"

#include "../src/backend/cpu/cpu_irmath.h"
#include "../src/backend/cpu/cpu_native_kernels.h"
#include "../src/backend/cpu/cpu_ops.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_buffer.h"

enum { MAXN = 64 };

/* A buffer of dtype dt and shape s over data (no backend, not owned). */
static void mkbuf(lt_buffer *b, int dt, const int64_t *s, int nd, void *data) {
  memset(b, 0, sizeof *b);
  b->dtype = (uint8_t)dt;
  b->ndim = (uint8_t)nd;
  b->numel = 1;
  for (int d = 0; d < nd; d++) b->shape[d] = s[d], b->numel *= s[d];
  b->nbytes = (size_t)b->numel * lt_dtype_size((lt_dtype)dt);
  b->data = data;
}

static void mkins(lt_instr *ins, int op, int dt, const int64_t *s, int nd, int nops, int64_t *attrs,
                  int nattrs, double fattr) {
  memset(ins, 0, sizeof *ins);
  ins->op = (uint16_t)op;
  ins->dtype = (uint8_t)dt;
  ins->ndim = (uint8_t)nd;
  for (int d = 0; d < nd; d++) ins->shape[d] = s[d];
  ins->noperands = nops;
  ins->attrs = attrs;
  ins->nattrs = nattrs;
  ins->fattr = fattr;
}

/* n elements of dtype dt with varied values (negatives, zeros, repeats). */
static void fill_values(int dt, void *p, int n) {
  static const double v[] = {3, -1, 0, 7.5, -2.25, 0, 120, -128, 1, 3};
  for (int i = 0; i < n; i++) lt__store_f64(dt, p, i, v[i % 10] + (i / 10));
}

/* The cpu kernel fn and ref's kernel on the same instruction: both LT_OK
 * and the same bytes. */
static void check_as_ref(cpu_native_fn fn, const lt_instr *ins, int out_dt, const int64_t *os,
                         int ond, lt_buffer *const *in, const char *what) {
  _Alignas(8) unsigned char got[MAXN * 8], want[MAXN * 8];
  memset(got, 0xA5, sizeof got);
  memset(want, 0x5A, sizeof want);
  lt_buffer gb, wb;
  mkbuf(&gb, out_dt, os, ond, got);
  mkbuf(&wb, out_dt, os, ond, want);
  int rc = fn(ins, &gb, in);
  if (rc != LT_OK) fail_msg("%s in %s: cpu kernel returned %d", what, lt_dtype_name(out_dt), rc);
  assert_int_equal(lt__ref_backend.run_instr(ins, &wb, in), LT_OK);
  if (memcmp(got, want, gb.nbytes) != 0)
    fail_msg("%s in %s: cpu bytes differ from ref's", what, lt_dtype_name(out_dt));
}

/* ---- stores: pad's fill and one_hot's one --------------------------------------------------- */

/* torch.nn.functional.pad(x, (1, 2), value=v) in each dtype; values outside
 * i32 / i64 / u8 / i8 and NaN included: lt_pad rounds the value through the
 * table first, but an instruction may carry any double, and the kernel must
 * store it as ref's (saturating i32 / i64, wrapping u8 / i8, NaN 0). */
static void test_pad_fill_as_ref(void **state) {
  (void)state;
  static const double fills[] = {0, 1, -1.5, 300.7, -129, 1e10, -1e10, 1e19, -1e19, NAN};
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++)
    for (size_t k = 0; k < sizeof fills / sizeof *fills; k++) {
      _Alignas(8) unsigned char x[4 * 8];
      fill_values(dt, x, 4);
      lt_buffer xb;
      mkbuf(&xb, dt, SHAPE(4), 1, x);
      int64_t attrs[2] = {1, 2};
      lt_instr ins;
      mkins(&ins, LT_OP_PAD, dt, SHAPE(7), 1, 1, attrs, 2, fills[k]);
      lt_buffer *in[1] = {&xb};
      char what[64];
      snprintf(what, sizeof what, "pad value %g", fills[k]);
      check_as_ref(lt__cpu_native_pad, &ins, dt, SHAPE(7), 1, in, what);
    }
}

/* torch.nn.functional.one_hot(tensor([2, 0, 1]), 3) in each dtype. */
static void test_one_hot_as_ref(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    int64_t idx[3] = {2, 0, 1};
    lt_buffer ib;
    mkbuf(&ib, LT_I64, SHAPE(3), 1, idx);
    int64_t attrs[1] = {3};
    lt_instr ins;
    mkins(&ins, LT_OP_ONE_HOT, dt, SHAPE(3, 3), 2, 1, attrs, 1, 0.0);
    lt_buffer *in[1] = {&ib};
    check_as_ref(lt__cpu_native_one_hot, &ins, dt, SHAPE(3, 3), 2, in, "one_hot");
  }
}

/* ---- the kernels that pick a loop by dtype ----------------------------------------------------
 */

/* One run of a kernel over a [2, 5] operand of dtype dt (and an index for
 * scatter_add), as built by case k: what ref runs too. */
typedef struct kcase {
  const char *what;
  int op;
  cpu_native_fn fn;
  bool i64_out; /* the result is i64 (arg reductions, argsort) */
} kcase;

static const kcase k_cases[] = {
    {"argmax", LT_OP_ARGMAX, lt__cpu_native_argext, true},
    {"argmin", LT_OP_ARGMIN, lt__cpu_native_argext, true},
    {"argsort", LT_OP_ARGSORT, lt__cpu_native_argsort, true},
    {"cumsum", LT_OP_CUMSUM, lt__cpu_native_cumsum, false},
    {"scatter_add", LT_OP_SCATTER_ADD, lt__cpu_native_scatter, false},
    {"index_add", LT_OP_INDEX_ADD, lt__cpu_native_scatter, false},
    {"unslice", LT_OP_UNSLICE, lt__cpu_native_unslice, false},
    {"pad", LT_OP_PAD, lt__cpu_native_pad, false},
    {"one_hot", LT_OP_ONE_HOT, lt__cpu_native_one_hot, false},
};
enum { NCASES = sizeof k_cases / sizeof k_cases[0] };

typedef struct krun {
  lt_instr ins;
  int64_t attrs[4];
  lt_buffer xb, ib;
  lt_buffer *in[2];
  int out_dt, ond;
  int64_t os[2];
  _Alignas(8) unsigned char x[10 * 8];
  int64_t idx[10];
} krun;

/* The instruction and operands of case c with value dtype dt (the operand's
 * and, unless the result is i64, the result's). */
static void build(krun *r, const kcase *c, int dt) {
  memset(r, 0, sizeof *r);
  fill_values(lt__dtype_valid(dt) ? dt : LT_U8, r->x, 10);
  mkbuf(&r->xb, dt, SHAPE(2, 5), 2, r->x);
  r->in[0] = &r->xb;
  r->out_dt = c->i64_out ? LT_I64 : dt;
  r->ond = 2;
  r->os[0] = 2, r->os[1] = 5;
  int nops = 1, nattrs = 2;
  r->attrs[0] = 1; /* axis */
  switch (c->op) {
  case LT_OP_ARGMAX:
  case LT_OP_ARGMIN:
    r->ond = 1;
    r->os[0] = 2;
    nattrs = 1;
    break;
  case LT_OP_ARGSORT: /* attrs[1]: descending */
  case LT_OP_CUMSUM:  /* attrs[1]: reverse */
    r->attrs[1] = 0;
    break;
  case LT_OP_SCATTER_ADD: /* src [2, 5] into [2, 5] along axis 1, repeated positions */
    for (int i = 0; i < 10; i++) r->idx[i] = (i * 3) % 5 == 4 ? 0 : (i * 3) % 5;
    mkbuf(&r->ib, LT_I64, SHAPE(2, 5), 2, r->idx);
    nops = 2, nattrs = 1;
    break;
  case LT_OP_INDEX_ADD: /* src [2, 5] into [2, 3] along axis 1 by slices */
    for (int i = 0; i < 5; i++) r->idx[i] = (i * 2) % 3;
    mkbuf(&r->ib, LT_I64, SHAPE(5), 1, r->idx);
    r->os[1] = 3;
    nops = 2, nattrs = 1;
    break;
  case LT_OP_UNSLICE: /* [2, 5] into [3, 11]: starts (1, 0), steps (1, 2) */
    r->attrs[0] = 1, r->attrs[1] = 0, r->attrs[2] = 1, r->attrs[3] = 2;
    r->os[0] = 3, r->os[1] = 11;
    nattrs = 4;
    break;
  case LT_OP_PAD: /* (0, 0) and (1, 2) */
    r->attrs[0] = 0, r->attrs[1] = 0, r->attrs[2] = 1, r->attrs[3] = 2;
    r->os[1] = 8;
    nattrs = 4;
    break;
  case LT_OP_ONE_HOT: /* index [2, 5] of i64, 3 classes: the result has dtype dt */
    for (int i = 0; i < 10; i++) r->idx[i] = i % 3;
    mkbuf(&r->ib, LT_I64, SHAPE(2, 5), 2, r->idx);
    r->in[0] = &r->ib;
    r->attrs[0] = 3;
    r->ond = 3;
    nattrs = 1;
    break;
  }
  if (nops == 2) r->in[1] = &r->ib;
  int64_t os3[3] = {2, 5, 3};
  mkins(&r->ins, c->op, r->out_dt, r->ond == 3 ? os3 : r->os, r->ond, nops, r->attrs, nattrs, 0.0);
}

/* Whether the cpu declines op in dtype dt to the fallback: cumsum in bool,
 * u8 and i8; bf16 wherever it would compute (argmax / argmin, cumsum,
 * scatter_add / index_add), not where it only moves or compares bits. */
static bool declines(int op, int dt) {
  if (op == LT_OP_CUMSUM && lt_dtype_size((lt_dtype)dt) == 1) return true;
  return dt == LT_BF16 && (op == LT_OP_ARGMAX || op == LT_OP_ARGMIN || op == LT_OP_CUMSUM ||
                           op == LT_OP_SCATTER_ADD || op == LT_OP_INDEX_ADD);
}

/* Every table dtype runs through a loop of its own (or is declined to the
 * fallback, as declines() lists) with ref's bytes. */
static void test_every_dtype_has_its_loop(void **state) {
  (void)state;
  for (int k = 0; k < NCASES; k++)
    for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
      const kcase *c = &k_cases[k];
      krun r;
      build(&r, c, dt);
      int64_t os3[3] = {2, 5, 3};
      const int64_t *os = r.ond == 3 ? os3 : r.os;
      if (declines(c->op, dt)) {
        _Alignas(8) unsigned char y[30 * 8];
        lt_buffer yb;
        mkbuf(&yb, dt, os, r.ond, y);
        assert_int_equal(c->fn(&r.ins, &yb, r.in), CPU_NATIVE_DECLINED);
        continue;
      }
      check_as_ref(c->fn, &r.ins, r.out_dt, os, r.ond, r.in, c->what);
    }
}

/* A dtype that is not a row (an instruction from bad bytes) is refused:
 * LT_EDTYPE, naming the op and the dtype; the kernel does not run another
 * dtype's loop over it. */
static void test_unknown_dtype_refused(void **state) {
  (void)state;
  static const int bad[] = {LT_NUM_DTYPES, 200};
  for (int k = 0; k < NCASES; k++)
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
      const kcase *c = &k_cases[k];
      krun r;
      build(&r, c, bad[b]);
      if (c->op == LT_OP_ONE_HOT) r.out_dt = bad[b]; /* the result's dtype is the bad one */
      r.ins.dtype = (uint8_t)r.out_dt;
      int64_t os3[3] = {2, 5, 3};
      _Alignas(8) unsigned char y[30 * 8];
      memset(y, 0xA5, sizeof y);
      lt_buffer yb;
      mkbuf(&yb, r.out_dt, r.ond == 3 ? os3 : r.os, r.ond, y);
      lt_clear_error();
      int rc = c->fn(&r.ins, &yb, r.in);
      if (rc != LT_EDTYPE)
        fail_msg("%s of dtype %d: returned %d, expected LT_EDTYPE", c->what, bad[b], rc);
      char want_dt[32];
      snprintf(want_dt, sizeof want_dt, "dtype %d", bad[b]);
      const char *msg = lt_last_error();
      if (!msg || !strstr(msg, c->what) || !strstr(msg, want_dt))
        fail_msg("%s of dtype %d: message '%s'", c->what, bad[b], msg ? msg : "(none)");
      lt_clear_error();
    }
}

/* ---- the LLVM type and constants of a dtype ----------------------------------------------------
 */

/* An element's IR type has the table's width: i<bits> for bool and integers
 * (bool, u8 and i8 share i8), float / double for 4- and 8-byte floats, and
 * i16 for bf16 (its bits); values compute in lt__ops_ctype: f32 for bf16,
 * the stored type for every other dtype. */
static void test_ops_type_matches_table(void **state) {
  (void)state;
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    const lt_dtype_info *t = lt__dtype_info(dt);
    char want[16];
    if (t->kind == LT_DK_FLOAT)
      snprintf(want, sizeof want, "%s",
               t->size == 4   ? "float"
               : t->size == 8 ? "double"
               : t->size == 2 ? "i16"
                              : "?");
    else
      snprintf(want, sizeof want, "i%zu", 8 * t->size);
    if (strcmp(lt__ops_type(dt), want) != 0)
      fail_msg("%s: IR type %s, expected %s", t->name, lt__ops_type(dt), want);
    const char *cwant = dt == LT_BF16 ? "float" : want;
    if (strcmp(lt__ops_ctype(dt), cwant) != 0)
      fail_msg("%s: compute IR type %s, expected %s", t->name, lt__ops_ctype(dt), cwant);
    assert_true(sizeof(lt_dtype_elem) >= t->size);
  }
  assert_string_equal(lt__ops_type(LT_NUM_DTYPES), "void");
}

/* A CONST node's value is what an element of its dtype stores (as ref's
 * CONST fills): i32 / i64 saturate, u8 / i8 wrap (written as i8 bits), NaN
 * is 0, bool is v != 0; bf16 is the table's rounded value (as the f32 it
 * computes in), which past bf16's largest is inf. */
static void test_const_as_table(void **state) {
  (void)state;
  static const double vals[] = {0,    1,     -1.5, 300.7, -129, 1e10,      -1e10,
                                1e19, -1e19, NAN,  0.1,   1e39, 1.00390625};
  for (int dt = 0; dt < LT_NUM_DTYPES; dt++) {
    if (lt__is_float(dt) && dt != LT_BF16) continue;
    for (size_t k = 0; k < sizeof vals / sizeof *vals; k++) {
      lt_node n;
      memset(&n, 0, sizeof n);
      n.op = LT_OP_CONST;
      n.dtype = (uint8_t)dt;
      n.fattr = vals[k];
      cpu_ir ir = {0};
      irv got = lt__ops_emit(&ir, &n, NULL, NULL);
      assert_int_equal(ir.err, 0);
      lt_dtype_elem e;
      lt__store_f64(dt, &e, 0, vals[k]);
      char want[40];
      if (dt == LT_BF16) { /* an f32 literal, written as LLVM's double hex */
        double w = (double)lt__bf16_to_f32(*(uint16_t *)&e);
        uint64_t bits;
        memcpy(&bits, &w, sizeof bits);
        snprintf(want, sizeof want, "0x%016llX", (unsigned long long)bits);
      } else {
        int64_t x = lt__load_i64(dt, &e, 0);
        if (lt_dtype_size((lt_dtype)dt) == 1) x = (int8_t)(uint8_t)x; /* i8 IR: signed bits */
        snprintf(want, sizeof want, "%lld", (long long)x);
      }
      if (strcmp(got.s, want) != 0)
        fail_msg("%s const %g: IR %s, expected %s", lt_dtype_name(dt), vals[k], got.s, want);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pad_fill_as_ref),          cmocka_unit_test(test_one_hot_as_ref),
      cmocka_unit_test(test_every_dtype_has_its_loop), cmocka_unit_test(test_unknown_dtype_refused),
      cmocka_unit_test(test_ops_type_matches_table),   cmocka_unit_test(test_const_as_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
