/* Scalar IR of the elementwise ops (see cpu_ops.h).
 *
 * Domains as ref: a float operand or result computes in floating point, else
 * in int64 with wrap-around, then converts to the result dtype as ref's CAST
 * does (llvm.fptosi.sat is exactly ref's saturating, NaN-to-0 truncation; u8
 * and i8 saturate to i64 and keep the low byte). bool, u8 and i8 all live in
 * i8: u8 (and bool) widen with zext / uitofp, i8 with sext / sitofp.
 * When operands and result are all f32, ops compute in f32: + - * / sqrt and
 * comparisons give the same bits as ref's double-then-round; exp, log, tanh,
 * sigmoid, erf, gelu use the polynomial code of cpu_irmath.c (within 1.3
 * ulp, sigmoid 2.5). rsqrt, log1p, sin, cos and pow go through double
 * (pow, log1p, sin, cos through libm, scalar). f64 transcendentals call
 * libm.
 * bf16 lives in memory as its 16 bits (i16, lt__ops_type) and computes in
 * f32 (lt__ops_ctype): a load widens exactly, and each bf16 node computes as
 * f32 from its operands' f32 values and is rounded to bf16 once (as torch's
 * CPU kernels, and ref's one store per op), so a fused consumer sees the
 * rounded value. Every bf16 value in a loop is thus an f32 whose low 16 bits
 * are 0 (NaN: 0x7FC00000, or a loaded NaN's own bits), and a store keeps its
 * high half. f32 math on exactly widened values gives the bits of ref's
 * double for + - * / sqrt and comparisons (53 >= 2 * 24 + 2), so those bf16
 * ops match ref exactly; the f32 polynomials may be 1 bf16 ulp off.
 * Uniform draws (RNG_UNIFORM) are Philox4x32-10 in integer IR, the bits of
 * core/lt_philox.h, in functions of the module that kernels call (below);
 * not in bf16 (the fallback draws those). */
#include "cpu_ops.h"

#include <string.h>

#include "../../core/lt_dtype.h"
#include "../../core/lt_error.h"
#include "../../core/lt_op_switch.h"
#include "../../core/lt_philox.h"

#define OP(...) lt__ir_op(ir, __VA_ARGS__)

/* An op that a switch below has no case for: the switches list every lt_op
 * (lt_op_switch.h), so a table row forgotten here fails the build; anything
 * else that arrives is recorded in ir->err, naming the op, and the kernel is
 * refused at compile time rather than computing NaN. */
static irv no_case(cpu_ir *ir, const char *kind, int op) {
  if (!ir->err)
    ir->err = lt__err(LT_ECOMPILE, "cpu: no %s code for op %s", kind, lt__op_name((lt_op)op));
  return (irv){"poison"};
}

/* A case per dtype and no default: a new dtype without its type here fails
 * the build (-Wswitch, part of -Wall); tests/test_cpu_dtype_kernels.c checks
 * each type's width against the dtype table. */
const char *lt__ops_type(int dt) {
  switch ((lt_dtype)dt) {
  case LT_BOOL:
  case LT_U8:
  case LT_I8:
    return "i8";
  case LT_I32:
    return "i32";
  case LT_I64:
    return "i64";
  case LT_F32:
    return "float";
  case LT_F64:
    return "double";
  case LT_BF16: /* its bits; it computes in f32 (lt__ops_ctype) */
    return "i16";
  case LT_NUM_DTYPES:
    break;
  }
  return "void"; /* not a dtype: IR that LLVM refuses, never another dtype's type */
}

/* The dtype whose IR a value of dtype dt computes in: f32 for bf16. */
static int cdt(int dt) { return lt__dtype_compute(dt); }

const char *lt__ops_ctype(int dt) { return lt__ops_type(cdt(dt)); }

/* Whether the generated loops compute in dtype dt (each dtype listed: a new
 * one is refused until its IR is written here). */
bool lt__ops_dtype_ok(int dt) {
  switch ((lt_dtype)dt) {
  case LT_BOOL:
  case LT_I32:
  case LT_I64:
  case LT_F32:
  case LT_F64:
  case LT_U8:
  case LT_I8:
  case LT_BF16:
    return true;
  case LT_NUM_DTYPES:
    break;
  }
  return false;
}

bool lt__ops_node_dtypes_ok(const lt_node *n) {
  if (!lt__ops_dtype_ok(n->dtype)) return false;
  for (int i = 0; i < n->noperands; i++)
    if (!lt__ops_dtype_ok(n->operands[i].node->dtype)) return false;
  return true;
}

bool lt__ops_is_float(int dt) { return lt__is_float(dt); }

static const char *fsuf(int dt) { return dt == LT_F32 ? "f32" : "f64"; }
static int width(int dt) { return 8 * (int)lt_dtype_size((lt_dtype)dt); }

irv lt__ops_bf16_widen(cpu_ir *ir, irv bits) {
  irv w = OP("zext i16 %s to i32", bits.s);
  irv u = OP("shl i32 %s, 16", w.s);
  return OP("bitcast i32 %s to float", u.s);
}

irv lt__ops_bf16_bits(cpu_ir *ir, irv v) {
  irv u = OP("bitcast float %s to i32", v.s);
  irv h = OP("lshr i32 %s, 16", u.s);
  return OP("trunc i32 %s to i16", h.s);
}

/* f32 value v rounded to bf16, as an f32: lt__f32_to_bf16's integer rounding
 * (add just under half an ulp plus the kept half's lowest bit, drop the low
 * half; the add wraps as C's uint32_t, only for NaN bits), NaN 0x7FC0. */
static irv bf16_round(cpu_ir *ir, irv v) {
  irv u = OP("bitcast float %s to i32", v.s);
  irv h = OP("lshr i32 %s, 16", u.s);
  irv lsb = OP("and i32 %s, 1", h.s);
  irv half = OP("add i32 %s, 32767", lsb.s);
  irv s = OP("add i32 %s, %s", u.s, half.s);
  irv r = OP("and i32 %s, -65536", s.s);
  irv nan = OP("fcmp uno float %s, 0.0", v.s);
  irv b = OP("select i1 %s, i32 2143289344, i32 %s", nan.s, r.s); /* 0x7FC00000 */
  return OP("bitcast i32 %s to float", b.s);
}

/* v from compute dtype from to compute dtype to (neither bf16). */
static irv conv(cpu_ir *ir, irv v, int from, int to) {
  if (from == to) return v;
  if (lt__ops_is_float(from) && lt__ops_is_float(to))
    return from == LT_F32 ? OP("fpext float %s to double", v.s)
                          : OP("fptrunc double %s to float", v.s);
  if (lt__ops_is_float(from)) {
    if (to == LT_BOOL) {
      irv c = OP("fcmp une %s %s, 0.0", lt__ops_type(from), v.s);
      return OP("zext i1 %s to i8", c.s);
    }
    if (width(to) == 8) { /* u8 / i8 as ref: saturate to i64, keep the low byte */
      irv w = OP("call i64 @llvm.fptosi.sat.i64.%s(%s %s)", fsuf(from), lt__ops_type(from), v.s);
      return OP("trunc i64 %s to i8", w.s);
    }
    return OP("call %s @llvm.fptosi.sat.%s.%s(%s %s)", lt__ops_type(to), lt__ops_type(to),
              fsuf(from), lt__ops_type(from), v.s);
  }
  if (lt__ops_is_float(to))
    return OP("%s %s %s to %s", lt__is_unsigned(from) ? "uitofp" : "sitofp", lt__ops_type(from),
              v.s, lt__ops_type(to));
  if (to == LT_BOOL) {
    irv c = OP("icmp ne %s %s, 0", lt__ops_type(from), v.s);
    return OP("zext i1 %s to i8", c.s);
  }
  if (width(to) > width(from))
    return OP("%s %s %s to %s", lt__is_unsigned(from) ? "zext" : "sext", lt__ops_type(from), v.s,
              lt__ops_type(to));
  if (width(to) == width(from)) return v; /* bool, u8, i8: the same i8 bits */
  return OP("trunc %s %s to %s", lt__ops_type(from), v.s, lt__ops_type(to));
}

irv lt__ops_conv(cpu_ir *ir, irv v, int from, int to) {
  if (from == to) return v;
  irv r = conv(ir, v, cdt(from), cdt(to));
  return to == LT_BF16 ? bf16_round(ir, r) : r;
}

static irv from_i1(cpu_ir *ir, irv c, int to) {
  return OP("%s i1 %s to %s", lt__ops_is_float(to) ? "uitofp" : "zext", c.s, lt__ops_type(to));
}

static irv truth(cpu_ir *ir, irv v, int dt) {
  return lt__ops_is_float(dt) ? OP("fcmp une %s %s, 0.0", lt__ops_type(dt), v.s)
                              : OP("icmp ne %s %s, 0", lt__ops_type(dt), v.s);
}

static irv libm1(cpu_ir *ir, const char *fn, irv x, int dt) {
  irv d = conv(ir, x, dt, LT_F64);
  irv r = OP("call double @%s(double %s)", fn, d.s);
  return conv(ir, r, LT_F64, dt);
}

irv lt__ops_exp(cpu_ir *ir, irv v, int dt) {
  return dt == LT_F32 ? lt__ir_expf(ir, v) : OP("call double @exp(double %s)", v.s);
}

/* Unary op in float dtype dt (f32 or f64) on x. */
static irv unary_float(cpu_ir *ir, int op, irv x, int dt) {
  const char *t = lt__ops_type(dt), *s = fsuf(dt);
  bool f32 = dt == LT_F32;
  switch ((lt_op)op) {
  case LT_OP_NEG:
    return OP("fneg %s %s", t, x.s);
  case LT_OP_ABS:
    return OP("call %s @llvm.fabs.%s(%s %s)", t, s, t, x.s);
  case LT_OP_SIGN: {
    irv gt = OP("fcmp ogt %s %s, 0.0", t, x.s), lt = OP("fcmp olt %s %s, 0.0", t, x.s);
    irv m = OP("select i1 %s, %s -1.0, %s 0.0", lt.s, t, t);
    return OP("select i1 %s, %s 1.0, %s %s", gt.s, t, t, m.s);
  }
  case LT_OP_RELU: {
    irv c = OP("fcmp ugt %s %s, 0.0", t, x.s);
    return OP("select i1 %s, %s %s, %s 0.0", c.s, t, x.s, t);
  }
  case LT_OP_FLOOR:
    return OP("call %s @llvm.floor.%s(%s %s)", t, s, t, x.s);
  case LT_OP_CEIL:
    return OP("call %s @llvm.ceil.%s(%s %s)", t, s, t, x.s);
  case LT_OP_ROUND:
    return OP("call %s @llvm.roundeven.%s(%s %s)", t, s, t, x.s);
  case LT_OP_SQRT:
    return OP("call %s @llvm.sqrt.%s(%s %s)", t, s, t, x.s);
  case LT_OP_RSQRT: {
    irv d = conv(ir, x, dt, LT_F64);
    irv q = OP("call double @llvm.sqrt.f64(double %s)", d.s);
    irv r = OP("fdiv double 1.0, %s", q.s);
    return conv(ir, r, LT_F64, dt);
  }
  case LT_OP_EXP:
    return f32 ? lt__ir_expf(ir, x) : libm1(ir, "exp", x, dt);
  case LT_OP_LOG:
    return f32 ? lt__ir_logf(ir, x) : libm1(ir, "log", x, dt);
  case LT_OP_TANH:
    return f32 ? lt__ir_tanhf(ir, x) : libm1(ir, "tanh", x, dt);
  case LT_OP_ERF:
    return f32 ? lt__ir_erff(ir, x) : libm1(ir, "erf", x, dt);
  case LT_OP_LOG1P:
    return libm1(ir, "log1p", x, dt);
  case LT_OP_SIN:
    return libm1(ir, "sin", x, dt);
  case LT_OP_COS:
    return libm1(ir, "cos", x, dt);
  case LT_OP_SIGMOID: {
    if (f32) return lt__ir_sigmoidf(ir, x);
    /* ref: x >= 0 ? 1 / (1 + exp(-x)) : e / (1 + e) with e = exp(x); both use exp(-|x|). */
    irv a = OP("call double @llvm.fabs.f64(double %s)", x.s);
    irv na = OP("fneg double %s", a.s);
    irv e = OP("call double @exp(double %s)", na.s);
    irv d = OP("fadd double 1.0, %s", e.s);
    irv pos = OP("fdiv double 1.0, %s", d.s), neg = OP("fdiv double %s, %s", e.s, d.s);
    irv ge = OP("fcmp oge double %s, 0.0", x.s);
    return OP("select i1 %s, double %s, double %s", ge.s, pos.s, neg.s);
  }
  case LT_OP_GELU: {
    if (f32) {
      irv y = OP("fmul float %s, %s", x.s, lt__ir_f32(0.70710678118654752).s);
      irv e = lt__ir_erff(ir, y);
      irv h = OP("fmul float %s, 0.5", x.s);
      irv one = OP("fadd float %s, 1.0", e.s);
      return OP("fmul float %s, %s", h.s, one.s);
    }
    irv y = OP("fdiv double %s, %s", x.s, lt__ir_f64(1.4142135623730951).s);
    irv e = OP("call double @erf(double %s)", y.s);
    irv h = OP("fmul double 0.5, %s", x.s);
    irv one = OP("fadd double 1.0, %s", e.s);
    return OP("fmul double %s, %s", h.s, one.s);
  }
  case LT_OP_GELU_TANH: {
    /* ref's formula and order of operations: x/2 (1 + tanh(b (x + k x^3))); f32 through the
     * polynomial tanh, so the chain stays vectorizable. */
    irv x2 = OP("fmul %s %s, %s", t, x.s, x.s);
    irv x3 = OP("fmul %s %s, %s", t, x2.s, x.s);
    irv kx3 = OP("fmul %s %s, %s", t, f32 ? lt__ir_f32(0.044715).s : lt__ir_f64(0.044715).s, x3.s);
    irv in = OP("fadd %s %s, %s", t, x.s, kx3.s);
    irv u = OP("fmul %s %s, %s", t,
               f32 ? lt__ir_f32(0.7978845608028654).s : lt__ir_f64(0.7978845608028654).s, in.s);
    irv th = f32 ? lt__ir_tanhf(ir, u) : libm1(ir, "tanh", u, dt);
    irv one = OP("fadd %s %s, 1.0", t, th.s);
    irv h = OP("fmul %s %s, 0.5", t, x.s);
    return OP("fmul %s %s, %s", t, h.s, one.s);
  }
  case LT_OP_SOFTSIGN: { /* ref's x / (1 + |x|), in dt as torch */
    irv a = OP("call %s @llvm.fabs.%s(%s %s)", t, s, t, x.s);
    irv d = OP("fadd %s 1.0, %s", t, a.s);
    return OP("fdiv %s %s, %s", t, x.s, d.s);
  }
  case LT_OP_NOT: /* lt__ops_emit's own code */
  case LT_OP_CAST:
    LT_OP_CASES_OUTSIDE(UNARY)
    break;
  }
  return no_case(ir, "float unary", op);
}

static irv unary_int(cpu_ir *ir, int op, irv x) {
  switch ((lt_op)op) {
  case LT_OP_NEG:
    return OP("sub i64 0, %s", x.s);
  case LT_OP_ABS: {
    irv n = OP("sub i64 0, %s", x.s), c = OP("icmp slt i64 %s, 0", x.s);
    return OP("select i1 %s, i64 %s, i64 %s", c.s, n.s, x.s);
  }
  case LT_OP_SIGN: {
    irv gt = OP("icmp sgt i64 %s, 0", x.s), lt = OP("icmp slt i64 %s, 0", x.s);
    irv m = OP("select i1 %s, i64 -1, i64 0", lt.s);
    return OP("select i1 %s, i64 1, i64 %s", gt.s, m.s);
  }
  case LT_OP_RELU:
    return OP("call i64 @llvm.smax.i64(i64 %s, i64 0)", x.s);
  case LT_OP_FLOOR: /* integers are already integral */
  case LT_OP_CEIL:
  case LT_OP_ROUND:
    return x;
    LT_OP_CASES_NOT_INTEGER_UNARY
    LT_OP_CASES_OUTSIDE(UNARY)
    break;
  }
  return no_case(ir, "integer unary", op);
}

static bool is_compare(int op) { return lt__op_family(op) == LT_FAM_COMPARE; }

static irv binary_float(cpu_ir *ir, int op, irv a, irv b, int dt) {
  const char *t = lt__ops_type(dt);
  switch ((lt_op)op) {
  case LT_OP_ADD:
    return OP("fadd %s %s, %s", t, a.s, b.s);
  case LT_OP_SUB:
    return OP("fsub %s %s, %s", t, a.s, b.s);
  case LT_OP_MUL:
    return OP("fmul %s %s, %s", t, a.s, b.s);
  case LT_OP_DIV:
    return OP("fdiv %s %s, %s", t, a.s, b.s);
  case LT_OP_POW: {
    irv da = conv(ir, a, dt, LT_F64), db = conv(ir, b, dt, LT_F64);
    irv r = OP("call double @pow(double %s, double %s)", da.s, db.s);
    return conv(ir, r, LT_F64, dt);
  }
  case LT_OP_FMOD: /* LLVM's frem is C's fmod (exact) */
    return OP("frem %s %s, %s", t, a.s, b.s);
  case LT_OP_MAXIMUM: /* NaN propagates, ties give b as ref */
  case LT_OP_MINIMUM: {
    irv nan = OP("fcmp uno %s %s, %s", t, a.s, b.s);
    irv c = OP("fcmp %s %s %s, %s", op == LT_OP_MAXIMUM ? "ogt" : "olt", t, a.s, b.s);
    irv r = OP("select i1 %s, %s %s, %s %s", c.s, t, a.s, t, b.s);
    return OP("select i1 %s, %s 0x7FF8000000000000, %s %s", nan.s, t, t, r.s);
  }
  case LT_OP_AND: /* lt__ops_emit's own code */
  case LT_OP_OR:
    LT_OP_CASES_OUTSIDE(BINARY)
    break;
  }
  return no_case(ir, "float binary", op);
}

static irv binary_int(cpu_ir *ir, int op, irv a, irv b) {
  switch ((lt_op)op) {
  case LT_OP_ADD:
    return OP("add i64 %s, %s", a.s, b.s);
  case LT_OP_SUB:
    return OP("sub i64 %s, %s", a.s, b.s);
  case LT_OP_MUL:
    return OP("mul i64 %s, %s", a.s, b.s);
  case LT_OP_DIV: {
    irv z = OP("icmp eq i64 %s, 0", b.s), m1 = OP("icmp eq i64 %s, -1", b.s);
    irv bad = OP("or i1 %s, %s", z.s, m1.s);
    irv d = OP("select i1 %s, i64 1, i64 %s", bad.s, b.s);
    irv q = OP("sdiv i64 %s, %s", a.s, d.s);
    irv n = OP("sub i64 0, %s", a.s);
    irv r = OP("select i1 %s, i64 0, i64 %s", z.s, q.s);
    return OP("select i1 %s, i64 %s, i64 %s", m1.s, n.s, r.s);
  }
  case LT_OP_MAXIMUM:
    return OP("call i64 @llvm.smax.i64(i64 %s, i64 %s)", a.s, b.s);
  case LT_OP_MINIMUM:
    return OP("call i64 @llvm.smin.i64(i64 %s, i64 %s)", a.s, b.s);
  case LT_OP_POW:  /* integer pow takes the fallback (lt__ops_supported) */
  case LT_OP_FMOD: /* integer fmod too */
  case LT_OP_AND:  /* lt__ops_emit's own code */
  case LT_OP_OR:
    LT_OP_CASES_OUTSIDE(BINARY)
    break;
  }
  return no_case(ir, "integer binary", op);
}

/* The predicate of comparison op, or NULL for an op without a case. */
static const char *fcmp_pred(int op) {
  switch ((lt_op)op) {
  case LT_OP_EQ:
    return "oeq";
  case LT_OP_NE:
    return "une";
  case LT_OP_LT:
    return "olt";
  case LT_OP_LE:
    return "ole";
  case LT_OP_GT:
    return "ogt";
  case LT_OP_GE:
    return "oge";
    LT_OP_CASES_OUTSIDE(COMPARE)
    break;
  }
  return NULL;
}
static const char *icmp_pred(int op) {
  switch ((lt_op)op) {
  case LT_OP_EQ:
    return "eq";
  case LT_OP_NE:
    return "ne";
  case LT_OP_LT:
    return "slt";
  case LT_OP_LE:
    return "sle";
  case LT_OP_GT:
    return "sgt";
  case LT_OP_GE:
    return "sge";
    LT_OP_CASES_OUTSIDE(COMPARE)
    break;
  }
  return NULL;
}

bool lt__ops_supported(const lt_node *n) {
  if (!lt__ops_node_dtypes_ok(n)) return false;
  if (n->op == LT_OP_CONST) return true;
  if (n->op == LT_OP_RNG_UNIFORM) {
    if (n->noperands != 1 || (n->dtype != LT_F32 && n->dtype != LT_F64)) return false;
    const lt_node *s = n->operands[0].node;
    return s->dtype == LT_I64 && lt__numel(s->shape, s->ndim) == 1;
  }
  if (lt__op_cpu_path(n->op) != LT_CPU_LOOP) return false;
  /* Integer FMOD (never built) runs ref's guarded kernel. */
  if (n->op == LT_OP_FMOD) return lt__ops_is_float(n->dtype);
  if (n->op == LT_OP_POW) {
    int da = n->operands[0].node->dtype, db = n->operands[1].node->dtype;
    return lt__ops_is_float(da) || lt__ops_is_float(db) || lt__ops_is_float(n->dtype);
  }
  return true;
}

/* v as an element of dtype dt holds it (the dtype table's store, as ref's
 * CONST fills), in dt's compute IR type. */
static irv const_value(cpu_ir *ir, int dt, double v) {
  switch ((lt_dtype)dt) {
  case LT_F32:
    return lt__ir_f32(v);
  case LT_F64:
    return lt__ir_f64(v);
  case LT_BOOL:
  case LT_I32:
  case LT_I64:
  case LT_U8:
  case LT_I8: {
    lt_dtype_elem e;
    lt__store_f64(dt, &e, 0, v);
    int64_t x = lt__load_i64(dt, &e, 0);
    return lt__ir_int(width(dt) == 8 ? lt__int_wrap(LT_I8, x) : x); /* i8: the bits, signed */
  }
  case LT_BF16: { /* the table's rounded value, as the f32 it computes in */
    lt_dtype_elem e;
    lt__store_f64(dt, &e, 0, v);
    return lt__ir_f32(lt__load_f64(dt, &e, 0));
  }
  case LT_NUM_DTYPES:
    break;
  }
  if (!ir->err) ir->err = lt__err(LT_ECOMPILE, "cpu: no constant code for dtype %d", dt);
  return (irv){"poison"};
}

/* Op `op` with operands args of compute dtypes dts (none bf16), in compute
 * dtype dn. */
static irv emit_compute(cpu_ir *ir, int op, const irv *args, const int *dts, int dn) {
  lt_op_family fam = op < LT_OP_COUNT ? lt__op_family(op) : LT_FAM_LEAF;
  if (op == LT_OP_NOT) {
    irv t = truth(ir, args[0], dts[0]);
    irv nt = OP("xor i1 %s, true", t.s);
    return from_i1(ir, nt, dn);
  }
  if (op == LT_OP_CAST) return conv(ir, args[0], dts[0], dn);
  if (fam == LT_FAM_UNARY) {
    int da = dts[0];
    if (lt__ops_is_float(da) && da == dn) return unary_float(ir, op, args[0], dn);
    if (lt__ops_is_float(da) || lt__ops_is_float(dn)) {
      irv x = conv(ir, args[0], da, LT_F64);
      return conv(ir, unary_float(ir, op, x, LT_F64), LT_F64, dn);
    }
    irv x = conv(ir, args[0], da, LT_I64);
    return conv(ir, unary_int(ir, op, x), LT_I64, dn);
  }
  if (op == LT_OP_WHERE) {
    irv c = truth(ir, args[0], dts[0]);
    irv a = conv(ir, args[1], dts[1], dn), b = conv(ir, args[2], dts[2], dn);
    return OP("select i1 %s, %s %s, %s %s", c.s, lt__ops_type(dn), a.s, lt__ops_type(dn), b.s);
  }
  if (fam != LT_FAM_BINARY && fam != LT_FAM_COMPARE) return no_case(ir, "elementwise", op);
  int da = dts[0], db = dts[1];
  if (op == LT_OP_AND || op == LT_OP_OR) {
    irv ta = truth(ir, args[0], da), tb = truth(ir, args[1], db);
    irv r = OP("%s i1 %s, %s", op == LT_OP_AND ? "and" : "or", ta.s, tb.s);
    return from_i1(ir, r, dn);
  }
  bool in_float =
      lt__ops_is_float(da) || lt__ops_is_float(db) || (!is_compare(op) && lt__ops_is_float(dn));
  if (is_compare(op)) {
    irv r;
    const char *pred = in_float ? fcmp_pred(op) : icmp_pred(op);
    if (!pred) return no_case(ir, "comparison", op);
    if (in_float) {
      int ct = da == db && lt__ops_is_float(da) ? da : LT_F64;
      irv a = conv(ir, args[0], da, ct), b = conv(ir, args[1], db, ct);
      r = OP("fcmp %s %s %s, %s", pred, lt__ops_type(ct), a.s, b.s);
    } else {
      irv a = conv(ir, args[0], da, LT_I64), b = conv(ir, args[1], db, LT_I64);
      r = OP("icmp %s i64 %s, %s", pred, a.s, b.s);
    }
    return from_i1(ir, r, dn);
  }
  if (in_float) {
    if (da == db && da == dn) return binary_float(ir, op, args[0], args[1], dn);
    irv a = conv(ir, args[0], da, LT_F64), b = conv(ir, args[1], db, LT_F64);
    return conv(ir, binary_float(ir, op, a, b, LT_F64), LT_F64, dn);
  }
  irv a = conv(ir, args[0], da, LT_I64), b = conv(ir, args[1], db, LT_I64);
  return conv(ir, binary_int(ir, op, a, b), LT_I64, dn);
}

irv lt__ops_emit(cpu_ir *ir, const lt_node *n, const irv *args, const int *dts) {
  if (n->op == LT_OP_CONST) return const_value(ir, n->dtype, n->fattr);
  int cd[3];
  if (n->noperands > 3) return no_case(ir, "elementwise", n->op);
  for (int i = 0; i < n->noperands; i++) cd[i] = cdt(dts[i]);
  irv v = emit_compute(ir, n->op, args, cd, cdt(n->dtype));
  /* a bf16 node: computed in f32, rounded once (a CAST from bf16 too: ref
   * stores every NaN as 0x7FC0) */
  return n->dtype == LT_BF16 ? bf16_round(ir, v) : v;
}

/* ---- uniform draws ----
 * One scalar function per module and dtype, @lt_uniform_f32 / _f64 (seed,
 * k), and vector variants of 8 and 16 lanes that the loop vectorizer calls
 * in their place (vector-function-abi-variant, the seed uniform): a kernel's
 * loop holds a call, so the Philox rounds are compiled once per module, not
 * once per kernel (and per vector and remainder loop). */

/* Types and constants of a function over `n` lanes (0: scalar). */
typedef struct lanes {
  int n;
  char i64[24], i32[24], i1[24], f32[24], f64[24];
} lanes;

static lanes lanes_of(int n) {
  lanes L = {.n = n};
  const char *t[5] = {"i64", "i32", "i1", "float", "double"};
  char *d[5] = {L.i64, L.i32, L.i1, L.f32, L.f64};
  for (int i = 0; i < 5; i++)
    if (n)
      snprintf(d[i], sizeof L.i64, "<%d x %s>", n, t[i]);
    else
      snprintf(d[i], sizeof L.i64, "%s", t[i]);
  return L;
}

/* Constant v of scalar type t over L's lanes (v as printed by fmt). */
static irv cst(const lanes *L, const char *t, const char *v) {
  irv r;
  if (L->n)
    snprintf(r.s, sizeof r.s, "splat (%.8s %.20s)", t, v);
  else
    snprintf(r.s, sizeof r.s, "%.20s", v);
  return r;
}
static irv cstu(const lanes *L, uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return cst(L, "i64", b);
}

#define LO32 4294967295u

/* Philox4x32-10 (core/lt_philox.h) of counter {lo32(j), hi32(j), 0, 0} under
 * key {k0, k1}: the four words into w. Words live in i64 lanes (below 2^32,
 * as the optimizer would rewrite zext / trunc pairs anyway); round 0's zero
 * words fold away. */
static void philox_block(cpu_ir *ir, const lanes *L, irv j, irv k0, irv k1, irv w[4]) {
  const char *t = L->i64;
  irv lo = cstu(L, LO32), s32 = cstu(L, 32), zero = L->n ? (irv){"zeroinitializer"} : lt__ir_int(0);
  irv c0 = OP("and %s %s, %s", t, j.s, lo.s);
  irv c1 = OP("lshr %s %s, %s", t, j.s, s32.s);
  irv c2 = zero, c3 = zero;
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      irv a0 = OP("add %s %s, %s", t, k0.s, cstu(L, LT_PHILOX_W0).s);
      irv a1 = OP("add %s %s, %s", t, k1.s, cstu(L, LT_PHILOX_W1).s);
      k0 = OP("and %s %s, %s", t, a0.s, lo.s);
      k1 = OP("and %s %s, %s", t, a1.s, lo.s);
    }
    irv p0 = OP("mul nuw %s %s, %s", t, c0.s, cstu(L, LT_PHILOX_M0).s);
    irv p1 = OP("mul nuw %s %s, %s", t, c2.s, cstu(L, LT_PHILOX_M1).s);
    irv hi0 = OP("lshr %s %s, %s", t, p0.s, s32.s), hi1 = OP("lshr %s %s, %s", t, p1.s, s32.s);
    irv x0 = OP("xor %s %s, %s", t, hi1.s, c1.s), x2 = OP("xor %s %s, %s", t, hi0.s, c3.s);
    c0 = OP("xor %s %s, %s", t, x0.s, k0.s);
    c1 = OP("and %s %s, %s", t, p1.s, lo.s);
    c2 = OP("xor %s %s, %s", t, x2.s, k1.s);
    c3 = OP("and %s %s, %s", t, p0.s, lo.s);
  }
  w[0] = c0;
  w[1] = c1;
  w[2] = c2;
  w[3] = c3;
}

/* Element k of a uniform draw of dtype dt under seed, over L's lanes (seed
 * and k of type L->i64). */
static irv uniform_lanes(cpu_ir *ir, const lanes *L, irv seed, irv k, int dt) {
  const char *t = L->i64;
  irv k0 = OP("and %s %s, %s", t, seed.s, cstu(L, LO32).s);
  irv k1 = OP("lshr %s %s, %s", t, seed.s, cstu(L, 32).s);
  irv w[4];
  if (dt == LT_F32) { /* word k % 4 of block k / 4, top 24 bits */
    irv j = OP("lshr %s %s, %s", t, k.s, cstu(L, 2).s);
    philox_block(ir, L, j, k0, k1, w);
    irv zero = L->n ? (irv){"zeroinitializer"} : lt__ir_int(0);
    irv q1 = OP("and %s %s, %s", t, k.s, cstu(L, 1).s);
    irv q2 = OP("and %s %s, %s", t, k.s, cstu(L, 2).s);
    irv odd = OP("icmp ne %s %s, %s", t, q1.s, zero.s);
    irv high = OP("icmp ne %s %s, %s", t, q2.s, zero.s);
    irv w01 = OP("select %s %s, %s %s, %s %s", L->i1, odd.s, t, w[1].s, t, w[0].s);
    irv w23 = OP("select %s %s, %s %s, %s %s", L->i1, odd.s, t, w[3].s, t, w[2].s);
    irv x = OP("select %s %s, %s %s, %s %s", L->i1, high.s, t, w23.s, t, w01.s);
    irv sh = OP("lshr %s %s, %s", t, x.s, cstu(L, 8).s);
    irv x32 = OP("trunc %s %s to %s", t, sh.s, L->i32);
    irv f = OP("sitofp %s %s to %s", L->i32, x32.s, L->f32); /* below 2^24: exact */
    return OP("fmul %s %s, %s", L->f32, f.s, cst(L, "float", lt__ir_f32(0x1p-24).s).s);
  }
  philox_block(ir, L, k, k0, k1, w); /* block k: (word 0 << 32 | word 1), top 53 bits */
  irv hs = OP("shl %s %s, %s", t, w[0].s, cstu(L, 32).s);
  irv x = OP("or %s %s, %s", t, hs.s, w[1].s);
  irv sh = OP("lshr %s %s, %s", t, x.s, cstu(L, 11).s);
  irv f = OP("sitofp %s %s to %s", t, sh.s, L->f64); /* below 2^53: exact */
  return OP("fmul %s %s, %s", L->f64, f.s, cst(L, "double", lt__ir_f64(0x1p-53).s).s);
}

/* The vector variants' lane counts for dtype dt: what the loop vectorizer
 * picks for a loop of dt values and i64 indices on the host (each variant
 * offered is compiled, used or not). */
static int uniform_vfs(int dt, const int **vfs) {
  static const int k16[] = {16}, k8[] = {8}, k48[] = {4, 8};
  const char *features = NULL;
  lt__cpu_jit_host(NULL, &features);
  if (features && strstr(features, "+avx512f")) {
    *vfs = dt == LT_F32 ? k16 : k8;
    return 1;
  }
  *vfs = k48;
  return 2;
}

static void uniform_defs(lt_strbuf *sb, int dt) {
  const char *sfx = dt == LT_F32 ? "f32" : "f64";
  const int *vfs;
  int nv = uniform_vfs(dt, &vfs);
  for (int v = -1; v < nv; v++) {
    lanes L = lanes_of(v < 0 ? 0 : vfs[v]);
    const char *rt = dt == LT_F32 ? L.f32 : L.f64;
    char name[48];
    if (v < 0)
      snprintf(name, sizeof name, "lt_uniform_%s", sfx);
    else
      snprintf(name, sizeof name, "lt_uniform_%s_v%d", sfx, L.n);
    lt__sb_printf(sb, "\ndefine internal %s @%s(i64 %%seed, %s %%k) #1 {\n", rt, name, L.i64);
    cpu_ir ir = {.sb = sb};
    irv seed = {"%seed"};
    if (L.n) {
      irv one = lt__ir_op(&ir, "insertelement %s poison, i64 %%seed, i64 0", L.i64);
      seed = lt__ir_op(&ir, "shufflevector %s %s, %s poison, <%d x i32> zeroinitializer", L.i64,
                       one.s, L.i64, L.n);
    }
    irv r = uniform_lanes(&ir, &L, seed, (irv){"%k"}, dt);
    lt__sb_printf(sb, "  ret %s %s\n}\n", rt, r.s);
  }
  /* the call sites' attribute: the variants (N<lanes>: unmasked; u: the
   * seed uniform, v: k per lane) */
  lt__sb_printf(sb, "attributes #%d = { \"vector-function-abi-variant\"=\"", dt == LT_F32 ? 2 : 3);
  for (int v = 0; v < nv; v++)
    lt__sb_printf(sb, "%s_ZGV_LLVM_N%duv_lt_uniform_%s(lt_uniform_%s_v%d)", v ? "," : "", vfs[v],
                  sfx, sfx, vfs[v]);
  lt__sb_printf(sb, "\" }\n");
}

void lt__ops_uniform_defs(lt_strbuf *sb, bool f32, bool f64) {
  if (!f32 && !f64) return;
  if (f32) uniform_defs(sb, LT_F32);
  if (f64) uniform_defs(sb, LT_F64);
  const int *vfs[2];
  int nv[2] = {f32 ? uniform_vfs(LT_F32, &vfs[0]) : 0, f64 ? uniform_vfs(LT_F64, &vfs[1]) : 0};
  /* noinline: one copy of the rounds per module; the vector variants are
   * kept alive (only the call sites' attribute names them) */
  lt__sb_printf(sb, "attributes #1 = { noinline nounwind willreturn memory(none) }\n");
  lt__sb_printf(sb, "@llvm.compiler.used = appending global [%d x ptr] [", nv[0] + nv[1]);
  int i = 0;
  for (int d = 0; d < 2; d++)
    for (int v = 0; v < nv[d]; v++)
      lt__sb_printf(sb, "%sptr @lt_uniform_%s_v%d", i++ ? ", " : "", d ? "f64" : "f32", vfs[d][v]);
  lt__sb_printf(sb, "], section \"llvm.metadata\"\n");
}

irv lt__ops_uniform(cpu_ir *ir, irv seed, irv k, int dt) {
  const char *t = dt == LT_F32 ? "float" : "double";
  return OP("call %s @lt_uniform_%s(i64 %s, i64 %s) #%d", t, dt == LT_F32 ? "f32" : "f64", seed.s,
            k.s, dt == LT_F32 ? 2 : 3);
}
