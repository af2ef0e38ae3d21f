#!/usr/bin/python3
"""Writes tests/torch_bf16_cases.h: PyTorch 1.13's CPU bf16 results for
tests/test_torch_bf16.c. Run with a Python that has torch 1.13:
    /usr/bin/python3 tests/gen/torch_bf16_cases.py > tests/torch_bf16_cases.h
Each case is a name (the C test builds the same op by that name), the torch
expression, the result's dtype and values (bf16 values as f32 decimals), and
the bf16 ulps allowed (0: torch's value is exact math rounded once)."""
import torch
import torch.nn.functional as F

bf = torch.bfloat16
A = torch.tensor([[0.5, -1.25, 2.0], [3.140625, -0.0078125, 1.5]], dtype=bf)
B = torch.tensor([[1.75, 0.3125, -2.5], [0.8515625, 4.0, -0.6640625]], dtype=bf)
P = torch.tensor([[0.25, 1.5, 7.0], [0.0625, 3.0, 100.0]], dtype=bf)  # positive
Fv = torch.tensor([[0.1, -0.2, 0.3], [1e-3, 2.5, -7.7]], dtype=torch.float32)
I = torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int64)
W = torch.tensor([[0.5, -1.0, 0.25, 2.0], [1.5, 0.125, -0.75, 1.0], [-2.0, 0.625, 3.0, -0.5]],
                 dtype=bf)
LW = torch.tensor([1.5, -0.5, 2.0], dtype=bf)
LB = torch.tensor([0.25, 0.0, -1.0], dtype=bf)
T = torch.tensor([2, 0])
X4 = torch.tensor([0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, 0.125, -2.0], dtype=bf).reshape(1, 1, 3, 3)
K4 = torch.tensor([1.0, -0.5, 0.25, 2.0], dtype=bf).reshape(1, 1, 2, 2)

# name, torch expression (evaluated), ulps
FORWARD = [
    ("add", "A + B", 0), ("sub", "A - B", 0), ("mul", "A * B", 0), ("div", "A / B", 0),
    ("add_f32", "A + Fv", 0), ("add_i64", "A + I", 0), ("maximum", "torch.maximum(A, B)", 0),
    ("neg", "-A", 0), ("exp", "torch.exp(A)", 0), ("log", "torch.log(P)", 0),
    ("sqrt", "torch.sqrt(P)", 0), ("tanh", "torch.tanh(A)", 0),
    ("sigmoid", "torch.sigmoid(A)", 0), ("relu", "torch.relu(A)", 0),
    ("gelu", "F.gelu(A)", 1), ("cast_f32_bf16", "Fv.to(torch.bfloat16)", 0),
    ("cast_bf16_f32", "A.float()", 0),
    ("sum", "A.sum()", 0), ("sum_ax1", "A.sum(1)", 0), ("mean_ax1", "A.mean(1)", 0),
    ("max_ax1", "A.amax(1)", 0), ("logsumexp_ax1", "torch.logsumexp(A, 1)", 1),
    ("var", "A.var()", 0), ("norm", "torch.linalg.vector_norm(A)", 0),
    ("matmul", "A @ W", 0), ("softmax", "F.softmax(A, 1)", 1),
    ("log_softmax", "F.log_softmax(A, 1)", 1), ("log_softmax_ax0", "F.log_softmax(A, 0)", 1),
    ("layer_norm", "F.layer_norm(A, (3,), LW, LB)", 1),
    ("cross_entropy", "F.cross_entropy(A, T)", 1),
    ("conv2d", "F.conv2d(X4, K4)", 0),
]

# name, expression of a scalar loss of the bf16 leaf A (and W), ulps for the gradients
GRADS = [
    # 0: torch's fused kernels rounded once, as ours; layer_norm and
    # cross_entropy: see RAND_CASES (torch's layer_norm backward and
    # log_softmax forward round in between)
    ("g_tanh_mul", "(torch.tanh(A) * B).sum()", 0),
    ("g_matmul", "(A @ W).sum()", 0),
    ("g_softmax", "(F.softmax(A, 1) * B).sum()", 0),
    ("g_layer_norm", "(F.layer_norm(A, (3,), LW, LB) * B).sum()", 12),
    ("g_cross_entropy", "F.cross_entropy(A, T)", 2),
]

# Random inputs for the gradient cases of the bigger graphs (a fixed seed; the
# values are written into the header, so the C test reads the same ones).
R_ROWS, R_COLS, R_OUT = 4, 37, 5
torch.manual_seed(20240613)
RAND = {
    "X": torch.randn(R_ROWS, R_COLS).to(bf),
    "S": torch.randn(R_ROWS, R_COLS).to(bf),  # the upstream gradient, through (f(X) * S).sum()
    "P": (torch.rand(R_ROWS, R_COLS) * 4 + 0.05).to(bf),  # positive
    "E": (torch.randn(R_ROWS, R_COLS) * 2).to(bf),  # exponents
    "M": torch.randn(R_COLS, R_OUT).to(bf),
    "S5": torch.randn(R_ROWS, R_OUT).to(bf),
    "S1": torch.randn(R_ROWS).to(bf),
    "LW": torch.randn(R_COLS).to(bf),
    "LB": torch.randn(R_COLS).to(bf),
    "T": torch.randint(0, R_COLS, (R_ROWS,)),
    # attention: q, k, v [2, 6, 8] and the upstream gradient of its output
    "Q": torch.randn(2, 6, 8).to(bf),
    "K": torch.randn(2, 6, 8).to(bf),
    "V": torch.randn(2, 6, 8).to(bf),
    "SA": torch.randn(2, 6, 8).to(bf),
}
# causal attention written as torch 1.13's math (it has no fused kernel):
# scores in bf16, scaled, masked, softmax, times v
CAUSAL = torch.ones(6, 6, dtype=torch.bool).tril()
ATTN = ("(torch.softmax(((Q @ K.transpose(-2, -1)) * 8 ** -0.5).masked_fill(~CAUSAL, "
        "float('-inf')), -1) @ V * SA).sum()")
# name, expression, the leaves whose gradients are compared (none: the value
# itself), bf16 ulps allowed:
#  0  torch's result is computed with the same roundings as ours: one bf16 op
#     on exact inputs (exp' = g y, log' = g / x, sqrt' = g / (2 y), div,
#     sum, mean, amax, matmul's dX), a chain of bf16 ops rounding where
#     torch's do (log1p', floor_divide, remainder);
#  1  the same roundings, but an f32 value in between comes from a
#     transcendental or a sum whose f32 result depends on the implementation
#     or the order (tanh, sigmoid, gelu, softmax: torch's fused kernels in f32;
#     erf, sin, pow, gelu_tanh: bf16 chains through exp, cos, pow, log, tanh):
#     an f32 ulp apart moves the bf16 result by one ulp on a rounding boundary;
#     (log_softmax along the last axis and logsumexp: ref rounds where torch's
#     bf16 kernels do, the row sum and its log for the one, every op of the
#     composite for the other; log_softmax along another axis rounds once);
#  more, where torch's forward is not the exact value rounded once (its bf16
#     rsqrt kernel rounds intermediates: 6 % of its outputs differ from ours
#     by an ulp) and the gradient is built on that output, or where torch's
#     bf16 backward kernel itself
#     rounds in between in ways not matched (layer_norm: 55 % of its gradient
#     differs from the f32 gradient rounded once). Each is the worst seen, on
#     elements where the formula cancels (g - exp(y) sum g).
# torch's dM of X @ M (a transposed-A GEMM) accumulates in bf16 at every
# step; ours rounds once: not compared (dX is, at 0).
RAND_CASES = [
    ("r_tanh", "(torch.tanh(X) * S).sum()", "X", 1),
    ("r_sigmoid", "(torch.sigmoid(X) * S).sum()", "X", 1),
    ("r_gelu", "(F.gelu(X) * S).sum()", "X", 1),
    ("r_gelu_tanh", "(F.gelu(X, approximate='tanh') * S).sum()", "X", 1),
    ("r_erf", "(torch.erf(X) * S).sum()", "X", 1),
    ("r_exp", "(torch.exp(X) * S).sum()", "X", 0),
    ("r_log", "(torch.log(P) * S).sum()", "P", 0),
    ("r_log1p", "(torch.log1p(P) * S).sum()", "P", 0),
    ("r_sin", "(torch.sin(X) * S).sum()", "X", 1),
    ("r_sqrt", "(torch.sqrt(P) * S).sum()", "P", 0),
    ("r_rsqrt", "(torch.rsqrt(P) * S).sum()", "P", 6),
    ("r_div", "(X / P * S).sum()", "XP", 0),
    ("r_pow", "(torch.pow(P, E) * S).sum()", "PE", 1),
    ("r_softmax", "(F.softmax(X, 1) * S).sum()", "X", 1),
    ("r_log_softmax", "(F.log_softmax(X, 1) * S).sum()", "X", 1),
    ("r_log_softmax_ax0", "(F.log_softmax(X, 0) * S).sum()", "X", 1),
    ("r_logsumexp", "(torch.logsumexp(X, 1) * S1).sum()", "X", 1),
    ("r_layer_norm", "(F.layer_norm(X, (R_COLS,), LW, LB) * S).sum()", "X", 28),
    ("r_cross_entropy", "F.cross_entropy(X, T)", "X", 4),
    ("r_matmul", "((X @ M) * S5).sum()", "X", 0),
    ("r_sum", "(X.sum(1) * S1).sum()", "X", 0),
    ("r_mean", "(X.mean(1) * S1).sum()", "X", 0),
    ("r_max", "(X.amax(1) * S1).sum()", "X", 0),
    ("r_floor_divide", "torch.floor_divide(X * 16, P)", "", 0),
    ("r_remainder", "torch.remainder(X * 16, P)", "", 0),
    # attention: ours rounds the scores, the probabilities and the output as
    # torch's math path does, but differentiates its softmax in f32 from the
    # unrounded probabilities (torch's bf16 softmax backward rounds the row
    # sum and reads the rounded ones); the worst seen, on gradient elements
    # where dS = P (dP - sum) cancels: 30, 64 and 10 ulps for dq, dk, dv
    ("r_attention", ATTN, "QKV", 64),
]

DTYPES = {torch.bfloat16: "LT_BF16", torch.float32: "LT_F32", torch.int64: "LT_I64"}


def vals(t):
    return ", ".join(repr(float(v)) for v in t.detach().float().reshape(-1).tolist())


def main():
    print("/* Generated by tests/gen/torch_bf16_cases.py with torch %s (CPU): do not edit. */"
          % torch.__version__)
    print("/* clang-format off */")  # generated tables, one value list per line
    print("typedef struct bf16_case {\n  const char *name, *expr;\n  lt_dtype dtype;\n"
          "  int n, ulps;\n  const float *want;\n} bf16_case;")
    rows = []
    for name, expr, ulps in FORWARD:
        r = eval(expr)
        print("/* %s = %s */" % (expr, vals(r)))
        print("static const float k_%s[] = {%s};" % (name, vals(r) or "0"))
        rows.append('  {"%s", "%s", %s, %d, %d, k_%s},' % (name, expr, DTYPES[r.dtype], r.numel(),
                                                         ulps, name))
    print("static const bf16_case kForward[] = {\n%s\n};" % "\n".join(rows))
    rows = []
    for name, expr, ulps in GRADS:
        global A, W
        a, w = A.clone().requires_grad_(), W.clone().requires_grad_()
        A0, W0 = A, W
        A, W = a, w
        eval(expr).backward()
        A, W = A0, W0
        print("/* d/dA of %s = %s */" % (expr, vals(a.grad)))
        print("static const float k_%s_a[] = {%s};" % (name, vals(a.grad)))
        print("static const float k_%s_w[] = {%s};" % (name, vals(w.grad) if w.grad is not None else "0"))
        assert a.grad.dtype == torch.bfloat16
        rows.append('  {"%s", "%s", LT_BF16, %d, %d, k_%s_a},' % (name, expr, a.grad.numel(), ulps, name))
        rows.append('  {"%s_w", "%s", LT_BF16, %d, %d, k_%s_w},' % (
            name, expr, w.grad.numel() if w.grad is not None else 0, ulps, name))
    print("static const bf16_case kGrads[] = {\n%s\n};" % "\n".join(rows))
    print("#define R_ROWS %d\n#define R_COLS %d\n#define R_OUT %d" % (R_ROWS, R_COLS, R_OUT))
    for name, t in RAND.items():
        ctype = "int64_t" if t.dtype == torch.int64 else "float"
        print("static const %s k_in_%s[] = {%s};" % (ctype, name, ", ".join(
            str(int(v)) if ctype == "int64_t" else repr(float(v)) for v in t.reshape(-1).tolist())))
    print("typedef struct bf16_rand_case {\n  const char *name, *expr;\n  char leaf; /* 0: the value */\n"
          "  int n, ulps;\n  const float *want;\n} bf16_rand_case;")
    rows = []
    for name, expr, leaves, ulps in RAND_CASES:
        env = {k: (v.clone().requires_grad_() if v.is_floating_point() and k in leaves else v)
               for k, v in RAND.items()}
        env.update(torch=torch, F=F, R_COLS=R_COLS, CAUSAL=CAUSAL)
        r = eval(expr, env)
        if not leaves:
            print("static const float k_%s[] = {%s};" % (name, vals(r)))
            rows.append('  {"%s", "%s", 0, %d, %d, k_%s},' % (name, expr, r.numel(), ulps, name))
            continue
        r.backward()
        for leaf in leaves:
            grad = env[leaf].grad
            assert grad.dtype == torch.bfloat16
            print("static const float k_%s_%s[] = {%s};" % (name, leaf, vals(grad)))
            rows.append('  {"%s", "%s", \'%s\', %d, %d, k_%s_%s},' % (name, expr, leaf, grad.numel(),
                                                               ulps, name, leaf))
    print("static const bf16_rand_case kRand[] = {\n%s\n};" % "\n".join(rows))
    print("/* clang-format on */")


main()
