/* IR emission helpers and vectorizable f32 math (see cpu_irmath.h).
 *
 * exp and log follow Cephes (expf, logf): range reduction by powers of two and
 * a short polynomial, about 1 ulp. erf is Eigen's rational approximation on
 * [-4, 4] (3.4e-7 relative at worst). tanh uses an odd polynomial below 0.625
 * and 1 - 2 / (exp(2|x|) + 1) above; sigmoid uses exp(-|x|) only. */
#include <stdarg.h>
#include <string.h>

#include "cpu_irmath.h"

irv ir_fresh(cpu_ir *ir) {
  irv v;
  snprintf(v.s, sizeof v.s, "%%v%d", ir->next++);
  return v;
}

irv ir_op(cpu_ir *ir, const char *fmt, ...) {
  irv v = ir_fresh(ir);
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  lt__sb_printf(ir->sb, "  %s = %s\n", v.s, line);
  return v;
}

irv ir_f64(double x) {
  irv v;
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  snprintf(v.s, sizeof v.s, "0x%016llX", (unsigned long long)bits);
  return v;
}

irv ir_f32(double x) { return ir_f64((double)(float)x); }

irv ir_int(int64_t x) {
  irv v;
  snprintf(v.s, sizeof v.s, "%lld", (long long)x);
  return v;
}

#define OP(...) ir_op(ir, __VA_ARGS__)

static irv fmaf_(cpu_ir *ir, irv a, irv b, irv c) {
  return OP("call float @llvm.fma.f32(float %s, float %s, float %s)", a.s, b.s, c.s);
}

/* Horner: c[0] * x^(n-1) + ... + c[n-1]. */
static irv horner(cpu_ir *ir, irv x, const double *c, int n) {
  irv p = ir_f32(c[0]);
  for (int i = 1; i < n; i++) p = fmaf_(ir, p, x, ir_f32(c[i]));
  return p;
}

irv ir_expf(cpu_ir *ir, irv x) {
  static const double P[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  irv xc = OP("call float @llvm.maxnum.f32(float %s, float %s)", x.s, ir_f32(-104.0).s);
  xc = OP("call float @llvm.minnum.f32(float %s, float %s)", xc.s, ir_f32(89.0).s);
  irv t = OP("fmul float %s, %s", xc.s, ir_f32(1.44269504088896341).s);
  irv n = OP("call float @llvm.roundeven.f32(float %s)", t.s);
  irv nn = OP("fneg float %s", n.s);
  irv r = fmaf_(ir, nn, ir_f32(0.693359375), xc);
  r = fmaf_(ir, nn, ir_f32(-2.12194440E-4), r);
  irv p = horner(ir, r, P, 6);
  irv r2 = OP("fmul float %s, %s", r.s, r.s);
  irv y = fmaf_(ir, p, r2, r);
  y = OP("fadd float %s, %s", y.s, ir_f32(1.0).s);
  /* y * 2^n in two steps so that neither factor over- or underflows early. */
  irv ni = OP("fptosi float %s to i32", n.s);
  irv n1 = OP("ashr i32 %s, 1", ni.s);
  irv n2 = OP("sub i32 %s, %s", ni.s, n1.s);
  irv e1 = OP("add i32 %s, 127", n1.s);
  e1 = OP("shl i32 %s, 23", e1.s);
  irv s1 = OP("bitcast i32 %s to float", e1.s);
  irv e2 = OP("add i32 %s, 127", n2.s);
  e2 = OP("shl i32 %s, 23", e2.s);
  irv s2 = OP("bitcast i32 %s to float", e2.s);
  y = OP("fmul float %s, %s", y.s, s1.s);
  y = OP("fmul float %s, %s", y.s, s2.s);
  irv isnan = OP("fcmp uno float %s, 0.0", x.s);
  return OP("select i1 %s, float %s, float %s", isnan.s, x.s, y.s);
}

irv ir_logf(cpu_ir *ir, irv x) {
  static const double P[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
                             -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
                             2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
  /* Subnormals: scale by 2^23 first. */
  irv sub = OP("fcmp olt float %s, %s", x.s, ir_f32(1.17549435e-38).s);
  irv xs0 = OP("fmul float %s, %s", x.s, ir_f32(8388608.0).s);
  irv xs = OP("select i1 %s, float %s, float %s", sub.s, xs0.s, x.s);
  irv eadj = OP("select i1 %s, i32 -23, i32 0", sub.s);
  irv bits = OP("bitcast float %s to i32", xs.s);
  irv ex = OP("lshr i32 %s, 23", bits.s);
  ex = OP("and i32 %s, 255", ex.s);
  ex = OP("sub i32 %s, 126", ex.s);
  ex = OP("add i32 %s, %s", ex.s, eadj.s);
  irv mb = OP("and i32 %s, -2139095041", bits.s); /* 0x807fffff */
  mb = OP("or i32 %s, 1056964608", mb.s);         /* 0x3f000000: m in [0.5, 1) */
  irv m = OP("bitcast i32 %s to float", mb.s);
  irv lo = OP("fcmp olt float %s, %s", m.s, ir_f32(0.707106781186547524).s);
  irv exi = OP("select i1 %s, i32 1, i32 0", lo.s);
  ex = OP("sub i32 %s, %s", ex.s, exi.s);
  irv m2 = OP("fadd float %s, %s", m.s, m.s);
  irv mm = OP("select i1 %s, float %s, float %s", lo.s, m2.s, m.s);
  irv f = OP("fsub float %s, %s", mm.s, ir_f32(1.0).s);
  irv e = OP("sitofp i32 %s to float", ex.s);
  irv z = OP("fmul float %s, %s", f.s, f.s);
  irv y = horner(ir, f, P, 9);
  y = OP("fmul float %s, %s", y.s, f.s);
  y = OP("fmul float %s, %s", y.s, z.s);
  y = fmaf_(ir, e, ir_f32(-2.12194440e-4), y);
  y = fmaf_(ir, z, ir_f32(-0.5), y);
  irv r = OP("fadd float %s, %s", f.s, y.s);
  r = fmaf_(ir, e, ir_f32(0.693359375), r);
  /* Special values: +inf -> +inf, 0 -> -inf, negative or NaN -> NaN. */
  irv isinf = OP("fcmp oeq float %s, 0x7FF0000000000000", x.s);
  r = OP("select i1 %s, float %s, float %s", isinf.s, x.s, r.s);
  irv iszero = OP("fcmp oeq float %s, 0.0", x.s);
  r = OP("select i1 %s, float 0xFFF0000000000000, float %s", iszero.s, r.s);
  irv bad = OP("fcmp ult float %s, 0.0", x.s);
  return OP("select i1 %s, float 0x7FF8000000000000, float %s", bad.s, r.s);
}

irv ir_tanhf(cpu_ir *ir, irv x) {
  static const double P[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                             1.33314422036E-1, -3.33332819422E-1};
  irv a = OP("call float @llvm.fabs.f32(float %s)", x.s);
  irv z = OP("fmul float %s, %s", x.s, x.s);
  irv p = horner(ir, z, P, 5);
  p = OP("fmul float %s, %s", p.s, z.s);
  irv small = fmaf_(ir, p, x, x);
  irv a2 = OP("fadd float %s, %s", a.s, a.s);
  irv e = ir_expf(ir, a2);
  irv d = OP("fadd float %s, %s", e.s, ir_f32(1.0).s);
  irv q = OP("fdiv float %s, %s", ir_f32(2.0).s, d.s);
  irv t = OP("fsub float %s, %s", ir_f32(1.0).s, q.s);
  irv big = OP("call float @llvm.copysign.f32(float %s, float %s)", t.s, x.s);
  irv sel = OP("fcmp olt float %s, %s", a.s, ir_f32(0.625).s);
  return OP("select i1 %s, float %s, float %s", sel.s, small.s, big.s);
}

irv ir_sigmoidf(cpu_ir *ir, irv x) {
  irv a = OP("call float @llvm.fabs.f32(float %s)", x.s);
  irv na = OP("fneg float %s", a.s);
  irv e = ir_expf(ir, na);
  irv d = OP("fadd float %s, %s", e.s, ir_f32(1.0).s);
  irv pos = OP("fdiv float %s, %s", ir_f32(1.0).s, d.s);
  irv neg = OP("fdiv float %s, %s", e.s, d.s);
  irv ge = OP("fcmp oge float %s, 0.0", x.s);
  return OP("select i1 %s, float %s, float %s", ge.s, pos.s, neg.s);
}

irv ir_erff(cpu_ir *ir, irv x) {
  static const double A[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                             -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                             -1.60960333262415e-02};
  static const double B[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                             -7.37332916720468e-03, -1.42647390514189e-02};
  irv c = OP("call float @llvm.maxnum.f32(float %s, float %s)", x.s, ir_f32(-4.0).s);
  c = OP("call float @llvm.minnum.f32(float %s, float %s)", c.s, ir_f32(4.0).s);
  irv x2 = OP("fmul float %s, %s", c.s, c.s);
  irv p = horner(ir, x2, A, 7);
  p = OP("fmul float %s, %s", p.s, c.s);
  irv q = horner(ir, x2, B, 5);
  irv r = OP("fdiv float %s, %s", p.s, q.s);
  irv isnan = OP("fcmp uno float %s, 0.0", x.s);
  return OP("select i1 %s, float %s, float %s", isnan.s, x.s, r.s);
}

void ir_declarations(lt_strbuf *sb) {
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
}
