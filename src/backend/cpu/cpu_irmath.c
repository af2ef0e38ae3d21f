/* IR emission helpers and vectorizable f32 math (see cpu_irmath.h).
 *
 * Each function is a straight line of float and integer operations and
 * selects (no branch, no call, no f64), so that a loop of them vectorizes at
 * the machine's width; and short, since a fused elementwise chain is worth
 * running only while its math stays under the memory time (one 512-bit
 * tanh: about 25 vector operations and a division). Range reduction by
 * powers of two as Cephes; polynomials are minimax fits (Remez, then
 * rounded to f32) of the reduced ranges. Largest errors over every 7th f32
 * (tests/test_cpu_math.c checks a sample): exp 0.99 ulp, log 0.82, tanh
 * 1.07, erf 1.24, sigmoid 2.33 (three roundings). */
#include <stdarg.h>
#include <string.h>

#include "cpu_irmath.h"

irv lt__ir_fresh(cpu_ir *ir) {
  irv v;
  snprintf(v.s, sizeof v.s, "%%v%d", ir->next++);
  return v;
}

irv lt__ir_op(cpu_ir *ir, const char *fmt, ...) {
  irv v = lt__ir_fresh(ir);
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  lt__sb_printf(ir->sb, "  %s = %s\n", v.s, line);
  return v;
}

irv lt__ir_f64(double x) {
  irv v;
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  snprintf(v.s, sizeof v.s, "0x%016llX", (unsigned long long)bits);
  return v;
}

irv lt__ir_f32(double x) { return lt__ir_f64((double)(float)x); }

irv lt__ir_int(int64_t x) {
  irv v;
  snprintf(v.s, sizeof v.s, "%lld", (long long)x);
  return v;
}

#define OP(...) lt__ir_op(ir, __VA_ARGS__)

static irv fmaf_(cpu_ir *ir, irv a, irv b, irv c) {
  return OP("call float @llvm.fma.f32(float %s, float %s, float %s)", a.s, b.s, c.s);
}

/* Horner: c[0] * x^(n-1) + ... + c[n-1]. */
static irv horner(cpu_ir *ir, irv x, const double *c, int n) {
  irv p = lt__ir_f32(c[0]);
  for (int i = 1; i < n; i++) p = fmaf_(ir, p, x, lt__ir_f32(c[i]));
  return p;
}

/* ---- exp's pieces ----
 * exp(x) = 2^n exp(r) with n = round(x / ln 2), r = x - n ln 2 in
 * [-ln2/2, ln2/2]. n comes from adding 1.5 * 2^23 (kMagic), which rounds to
 * an integer and leaves n in the low mantissa bits: bits(t) = 0x4B400000 + n,
 * so that bits(t) << 23 is n << 23, an exponent ready to add. No rounding
 * instruction, no float-to-int conversion. Polynomials are minimax fits of
 * this range (relative error below 3e-9, 2^-28). */
#define kMagic 12582912.0
#define kLog2e 1.44269504088896341
#define kTwo23 8388608 /* 1 << 23 */

static irv fsel(cpu_ir *ir, irv c, irv a, irv b) {
  return OP("select i1 %s, float %s, float %s", c.s, a.s, b.s);
}

/* x clamped to [lo, hi], NaN kept: ordered compares select the bound only
 * for a number beyond it (x86: one maxps / minps each). */
static irv clamp_keep_nan(cpu_ir *ir, irv x, double lo, double hi) {
  irv c = OP("fcmp olt float %s, %s", x.s, lt__ir_f32(lo).s);
  irv y = fsel(ir, c, lt__ir_f32(lo), x);
  c = OP("fcmp ogt float %s, %s", y.s, lt__ir_f32(hi).s);
  return fsel(ir, c, lt__ir_f32(hi), y);
}

typedef struct exp_red {
  irv t; /* kMagic + n */
  irv r; /* x - n ln 2 */
} exp_red;

/* The reduction of x (|x| below 2^21). Two-part ln 2 (Cody-Waite, exact
 * products) for a full-accuracy exp; one fma when |n| < 32 and the caller
 * damps exp's error: ln 2 in f32 is off by 2e-9, n times that in r. */
static exp_red exp_reduce(cpu_ir *ir, irv x, bool exact) {
  exp_red e;
  e.t = fmaf_(ir, x, lt__ir_f32(kLog2e), lt__ir_f32(kMagic));
  irv n = OP("fsub float %s, %s", e.t.s, lt__ir_f32(kMagic).s);
  irv nn = OP("fneg float %s", n.s);
  if (exact) {
    e.r = fmaf_(ir, nn, lt__ir_f32(0.693359375), x);
    e.r = fmaf_(ir, nn, lt__ir_f32(-2.12194440E-4), e.r);
  } else {
    e.r = fmaf_(ir, nn, lt__ir_f32(0.693147180559945309), x);
  }
  return e;
}

/* exp(r) as 1 + r + r^2 P(r): the last two roundings on small terms
 * (about 1 ulp with the reduction). */
static irv exp_poly(cpu_ir *ir, irv r) {
  static const double P[] = {1.381461275741458e-3, 8.368710055947304e-3, 4.166838899254799e-2,
                             1.666652113199234e-1, 4.999999403953552e-1};
  irv p = horner(ir, r, P, 5);
  irv r2 = OP("fmul float %s, %s", r.s, r.s);
  irv y = fmaf_(ir, p, r2, r);
  return OP("fadd float %s, %s", y.s, lt__ir_f32(1.0).s);
}

/* exp(r) as 1 + r Q(r): one operation fewer, half an ulp more; for callers
 * whose result damps exp's error (tanh, erf). */
static irv exp_poly_short(cpu_ir *ir, irv r) {
  static const double Q[] = {1.3843653723597527e-3, 8.37415549904108e-3,  4.166800156235695e-2,
                             1.6666431725025177e-1, 4.999999403953552e-1, 1.0};
  return fmaf_(ir, horner(ir, r, Q, 6), r, lt__ir_f32(1.0));
}

/* y 2^n (n in t's bits, -150..128) as y 2^floor(n/2) 2^(n - floor(n/2)):
 * both factors are normal, so a subnormal or overflowing result rounds
 * once. A NaN y stays NaN. */
static irv scale_wide(cpu_ir *ir, irv y, irv t) {
  irv u = OP("bitcast float %s to i32", t.s);
  irv nb = OP("shl i32 %s, 23", u.s); /* n << 23 */
  irv h = OP("lshr i32 %s, 1", u.s);  /* 0x25A00000 + floor(n/2) */
  h = OP("shl i32 %s, 23", h.s);      /* floor(n/2) << 23 */
  irv e2 = OP("sub i32 %s, %s", nb.s, h.s);
  irv e1 = OP("add i32 %s, %d", h.s, 127 * kTwo23);
  e2 = OP("add i32 %s, %d", e2.s, 127 * kTwo23);
  irv s1 = OP("bitcast i32 %s to float", e1.s), s2 = OP("bitcast i32 %s to float", e2.s);
  irv y1 = OP("fmul float %s, %s", y.s, s1.s);
  return OP("fmul float %s, %s", y1.s, s2.s);
}

/* y 2^n for y in [0.5, 2) and a normal result (n in t's bits): n added to
 * y's exponent field. Not for a NaN y (its bits would change). */
static irv scale_narrow(cpu_ir *ir, irv y, irv t) {
  irv u = OP("bitcast float %s to i32", t.s);
  irv nb = OP("shl i32 %s, 23", u.s);
  irv yb = OP("bitcast float %s to i32", y.s);
  irv b = OP("add i32 %s, %s", yb.s, nb.s);
  return OP("bitcast i32 %s to float", b.s);
}

/* exp: below -104 the result rounds to 0, above 89 to inf. Below -104 the
 * polynomial runs on 0 instead and 0 is selected: the clamped -104 made a
 * product underflow in every lane of a masked (-inf) score, and x86 takes a
 * slow microcode path for each (a causal softmax ran 2-3x slower). */
irv lt__ir_expf(cpu_ir *ir, irv x) {
  irv xc = clamp_keep_nan(ir, x, -104.0, 89.0);
  irv low = OP("fcmp olt float %s, %s", x.s, lt__ir_f32(-104.0).s);
  xc = fsel(ir, low, lt__ir_f32(0.0), xc);
  exp_red e = exp_reduce(ir, xc, true);
  return fsel(ir, low, lt__ir_f32(0.0), scale_wide(ir, exp_poly(ir, e.r), e.t));
}

/* log: x = 2^e m with m in [sqrt(1/2), sqrt 2) read off the bits (x's bits
 * less those of sqrt(1/2): e in the top bits, m's mantissa in the low ones),
 * subnormals scaled by 2^23 first; then Cephes' polynomial in f = m - 1 and
 * e ln 2 in two parts. */
irv lt__ir_logf(cpu_ir *ir, irv x) {
  static const double P[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
                             -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
                             2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
  enum { kSqrtHalf = 0x3F3504F3 }; /* bits of sqrt(1/2) rounded down */
  irv sub = OP("fcmp olt float %s, %s", x.s, lt__ir_f32(1.17549435e-38).s);
  irv xs0 = OP("fmul float %s, %s", x.s, lt__ir_f32(8388608.0).s);
  irv xs = fsel(ir, sub, xs0, x);
  irv bits = OP("bitcast float %s to i32", xs.s);
  irv u = OP("sub i32 %s, %d", bits.s, kSqrtHalf);
  irv ex = OP("ashr i32 %s, 23", u.s);
  irv mb = OP("and i32 %s, 8388607", u.s);
  mb = OP("add i32 %s, %d", mb.s, kSqrtHalf);
  irv m = OP("bitcast i32 %s to float", mb.s);
  irv f = OP("fsub float %s, %s", m.s, lt__ir_f32(1.0).s);
  irv e = OP("sitofp i32 %s to float", ex.s);
  e = OP("fsub float %s, %s", e.s, fsel(ir, sub, lt__ir_f32(23.0), lt__ir_f32(0.0)).s);
  irv z = OP("fmul float %s, %s", f.s, f.s);
  irv y = horner(ir, f, P, 9);
  y = OP("fmul float %s, %s", y.s, f.s);
  y = OP("fmul float %s, %s", y.s, z.s);
  y = fmaf_(ir, e, lt__ir_f32(-2.12194440e-4), y);
  y = fmaf_(ir, z, lt__ir_f32(-0.5), y);
  irv r = OP("fadd float %s, %s", f.s, y.s);
  r = fmaf_(ir, e, lt__ir_f32(0.693359375), r);
  /* Special values: +inf and NaN give x, 0 gives -inf, a negative x NaN. */
  irv big = OP("fcmp uge float %s, 0x7FF0000000000000", x.s);
  r = fsel(ir, big, x, r);
  irv iszero = OP("fcmp oeq float %s, 0.0", x.s);
  r = OP("select i1 %s, float 0xFFF0000000000000, float %s", iszero.s, r.s);
  irv neg = OP("fcmp olt float %s, 0.0", x.s);
  return OP("select i1 %s, float 0x7FF8000000000000, float %s", neg.s, r.s);
}

/* tanh: below kTanhSplit an odd polynomial, |x| + |x|^3 P(x^2); above,
 * 1 - 2 / (exp(2|x|) + 1), which damps exp's error (by 0.4 at the split,
 * less beyond), so a short exp; 2|x| stops at 20 (tanh rounds to 1 from
 * |x| = 9.01 on).
 * Both on |x|, the sign copied last (tanh(-0) = -0). NaN takes the
 * polynomial. */
#define kTanhSplit 0.75
irv lt__ir_tanhf(cpu_ir *ir, irv x) {
  static const double P[] = {1.723780413158238e-3,  -7.644927129149437e-3, 2.145165018737316e-2,
                             -5.389517918229103e-2, 1.333276480436325e-1,  -3.3333319425582886e-1};
  irv a = OP("call float @llvm.fabs.f32(float %s)", x.s);
  irv z = OP("fmul float %s, %s", a.s, a.s);
  irv p = OP("fmul float %s, %s", horner(ir, z, P, 6).s, z.s);
  irv small = fmaf_(ir, p, a, a);
  irv a2 = OP("fadd float %s, %s", a.s, a.s);
  a2 = OP("call float @llvm.minnum.f32(float %s, float %s)", a2.s, lt__ir_f32(20.0).s);
  exp_red e = exp_reduce(ir, a2, false);
  irv ex = scale_narrow(ir, exp_poly_short(ir, e.r), e.t);
  irv d = OP("fadd float %s, %s", ex.s, lt__ir_f32(1.0).s);
  irv q = OP("fdiv float %s, %s", lt__ir_f32(2.0).s, d.s);
  irv big = OP("fsub float %s, %s", lt__ir_f32(1.0).s, q.s);
  irv far = OP("fcmp oge float %s, %s", a.s, lt__ir_f32(kTanhSplit).s);
  irv t = fsel(ir, far, big, small);
  return OP("call float @llvm.copysign.f32(float %s, float %s)", t.s, x.s);
}

/* sigmoid: e = exp(-|x|), then 1 / (1 + e) for x >= 0 and e / (1 + e)
 * below, as one division of a selected numerator. */
irv lt__ir_sigmoidf(cpu_ir *ir, irv x) {
  irv a = OP("call float @llvm.fabs.f32(float %s)", x.s);
  irv na = OP("fneg float %s", a.s);
  irv lo = OP("fcmp olt float %s, %s", na.s, lt__ir_f32(-104.0).s);
  na = fsel(ir, lo, lt__ir_f32(-104.0), na);
  exp_red r = exp_reduce(ir, na, true);
  irv e = scale_wide(ir, exp_poly(ir, r.r), r.t);
  irv d = OP("fadd float %s, %s", e.s, lt__ir_f32(1.0).s);
  irv ge = OP("fcmp oge float %s, 0.0", x.s);
  irv num = fsel(ir, ge, lt__ir_f32(1.0), e);
  return OP("fdiv float %s, %s", num.s, d.s);
}

/* erf: below kErfSplit, x + x P(x^2); above, 1 - exp(R(|x|)) with R a
 * polynomial fit of log(erfc) on [kErfSplit, 4] (erf rounds to 1 from 3.92
 * on; fit to erf's absolute error, erfc times R's). Minimax fits, about 1
 * ulp in all. NaN takes the polynomial. */
#define kErfSplit 0.9277
irv lt__ir_erff(cpu_ir *ir, irv x) {
  static const double S[] = {-5.964254960417747e-4, 4.988004453480244e-3,   -2.6763124391436577e-2,
                             1.1281721293926239e-1, -3.7612485885620117e-1, 1.2837915122509003e-1};
  static const double R[] = {-1.618327951291576e-5, 3.658940258901566e-4,   -3.7743740249425173e-3,
                             2.3888245224952698e-2, -1.0606864839792252e-1, -6.356443762779236e-1,
                             -1.1282365322113037,   -1.195517907035537e-4};
  irv a = OP("call float @llvm.fabs.f32(float %s)", x.s);
  irv s = OP("fmul float %s, %s", x.s, x.s);
  irv small = fmaf_(ir, horner(ir, s, S, 6), x, x);
  irv t = OP("call float @llvm.minnum.f32(float %s, float %s)", a.s, lt__ir_f32(4.0).s);
  exp_red e = exp_reduce(ir, horner(ir, t, R, 8), false);
  irv ec = scale_narrow(ir, exp_poly_short(ir, e.r), e.t); /* erfc(|x|) */
  irv big = OP("fsub float %s, %s", lt__ir_f32(1.0).s, ec.s);
  big = OP("call float @llvm.copysign.f32(float %s, float %s)", big.s, x.s);
  irv far = OP("fcmp oge float %s, %s", a.s, lt__ir_f32(kErfSplit).s);
  return fsel(ir, far, big, small);
}

void lt__ir_declarations(lt_strbuf *sb) {
  static const char *const kTypes[] = {"f32", "f64"};
  static const char *const kC[] = {"float", "double"};
  static const char *const kUnary[] = {"fabs", "floor", "ceil", "roundeven", "sqrt", "exp", "log"};
  static const char *const kBinary[] = {"maxnum", "minnum", "maximum", "minimum", "copysign"};
  for (int t = 0; t < 2; t++) {
    for (size_t i = 0; i < sizeof kUnary / sizeof *kUnary; i++)
      lt__sb_printf(sb, "declare %s @llvm.%s.%s(%s)\n", kC[t], kUnary[i], kTypes[t], kC[t]);
    for (size_t i = 0; i < sizeof kBinary / sizeof *kBinary; i++)
      lt__sb_printf(sb, "declare %s @llvm.%s.%s(%s, %s)\n", kC[t], kBinary[i], kTypes[t], kC[t],
                    kC[t]);
    lt__sb_printf(sb, "declare %s @llvm.fma.%s(%s, %s, %s)\n", kC[t], kTypes[t], kC[t], kC[t],
                  kC[t]);
    lt__sb_printf(sb, "declare i32 @llvm.fptosi.sat.i32.%s(%s)\n", kTypes[t], kC[t]);
    lt__sb_printf(sb, "declare i64 @llvm.fptosi.sat.i64.%s(%s)\n", kTypes[t], kC[t]);
  }
  static const char *const kLibm[] = {"exp", "log", "log1p", "sin", "cos", "tanh", "erf"};
  for (size_t i = 0; i < sizeof kLibm / sizeof *kLibm; i++)
    lt__sb_printf(sb, "declare double @%s(double)\n", kLibm[i]);
  lt__sb_printf(sb, "declare double @pow(double, double)\n");
  lt__sb_printf(sb, "declare i64 @llvm.smax.i64(i64, i64)\ndeclare i64 @llvm.smin.i64(i64, i64)\n");
  lt__sb_printf(sb, "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)\n");
}
