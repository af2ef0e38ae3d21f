"""nn.MultiheadAttention against a numpy transcription of torch 1.13's
F.multi_head_attention_forward (heads laid out as torch's N * H, masks as
torch's: bool True = not allowed, float added), with torch's parameter names
so that a torch state_dict (as numpy arrays) loads."""
import math

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn

RNG = np.random.default_rng(11)


def mha_ref(q, k, v, sd, H, mask=None, average=True):
    """q [L, N, E], k/v [S, N, E]; mask a float array broadcasting to
    [N * H, L, S]. Returns (out [L, N, E], weights [N, L, S] or [N, H, L, S])."""
    L, N, E = q.shape
    S, hd = k.shape[0], E // H
    w, b = sd["in_proj_weight"], sd["in_proj_bias"]

    def proj(x, i, n):  # [n, N, E] -> [N * H, n, hd]
        y = x @ w[i * E:(i + 1) * E].T + b[i * E:(i + 1) * E]
        return y.reshape(n, N * H, hd).transpose(1, 0, 2)

    Q, K, V = proj(q, 0, L), proj(k, 1, S), proj(v, 2, S)
    s = (Q / math.sqrt(hd)) @ K.transpose(0, 2, 1)
    if mask is not None:
        s = s + mask
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    o = (p @ V).transpose(1, 0, 2).reshape(L, N, E)
    out = o @ sd["out_proj.weight"].T + sd["out_proj.bias"]
    p = p.reshape(N, H, L, S)
    return out, (p.mean(1) if average else p)


def torch_like_state(E, dtype=np.float32):
    return {"in_proj_weight": RNG.standard_normal((3 * E, E)).astype(dtype) * 0.5,
            "in_proj_bias": RNG.standard_normal(3 * E).astype(dtype) * 0.1,
            "out_proj.weight": RNG.standard_normal((E, E)).astype(dtype) * 0.5,
            "out_proj.bias": RNG.standard_normal(E).astype(dtype) * 0.1}


def close(t, want, tol=1e-5):
    np.testing.assert_allclose(t.numpy(), want, rtol=tol, atol=tol)


def test_parameters_names_shapes_and_init_are_torchs():
    lt.manual_seed(0)
    m = nn.MultiheadAttention(8, 2)
    sd = m.state_dict()
    assert [(k, tuple(v.shape)) for k, v in sd.items()] == [
        ("in_proj_weight", (24, 8)), ("in_proj_bias", (24,)), ("out_proj.weight", (8, 8)),
        ("out_proj.bias", (8,))]
    w = sd["in_proj_weight"].numpy()
    bound = math.sqrt(6.0 / (8 + 24))  # xavier_uniform_ on [3E, E]
    assert np.abs(w).max() <= bound and w.std() > bound / 3
    assert not sd["in_proj_bias"].numpy().any() and not sd["out_proj.bias"].numpy().any()
    assert np.abs(sd["out_proj.weight"].numpy()).max() <= 1 / math.sqrt(8)  # Linear's init
    assert [n for n, _ in nn.MultiheadAttention(8, 2, bias=False).named_parameters()] == [
        "in_proj_weight", "out_proj.weight"]
    names = [(n, tuple(p.shape)) for n, p in
             nn.MultiheadAttention(8, 2, kdim=3, vdim=5).named_parameters()]
    assert names == [("q_proj_weight", (8, 8)), ("k_proj_weight", (8, 3)),
                     ("v_proj_weight", (8, 5)), ("in_proj_bias", (24,)),
                     ("out_proj.weight", (8, 8)), ("out_proj.bias", (8,))]
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(5, 2)


def test_outputs_and_weights_match_torchs_formula():
    E, H, L, S, N = 8, 2, 3, 5, 2
    sd = torch_like_state(E)
    m = nn.MultiheadAttention(E, H)
    m.load_state_dict(sd)
    q = RNG.standard_normal((L, N, E)).astype(np.float32)
    k = RNG.standard_normal((S, N, E)).astype(np.float32)
    v = RNG.standard_normal((S, N, E)).astype(np.float32)
    tq, tk, tv = lt.from_numpy(q), lt.from_numpy(k), lt.from_numpy(v)
    out, w = m(tq, tk, tv)
    ro, rw = mha_ref(q, k, v, sd, H)
    close(out, ro)
    close(w, rw)
    out, w = m(tq, tk, tv, average_attn_weights=False)
    assert w.shape == (N, H, L, S)
    close(w, mha_ref(q, k, v, sd, H, average=False)[1])
    # no weights: the fused attention, the same output
    out, w = m(tq, tk, tv, need_weights=False)
    assert w is None
    close(out, ro)
    # self-attention, batch_first
    mb = nn.MultiheadAttention(E, H, batch_first=True)
    mb.load_state_dict(sd)
    xb = RNG.standard_normal((N, L, E)).astype(np.float32)
    x = xb.transpose(1, 0, 2)
    out, w = mb(lt.from_numpy(xb), lt.from_numpy(xb), lt.from_numpy(xb))
    ro, rw = mha_ref(x, x, x, sd, H)
    close(out, ro.transpose(1, 0, 2))
    close(w, rw)
    # unbatched: [L, E] in, [L, E] and [L, S] out
    out, w = m(tq[:, 0], tk[:, 0], tv[:, 0])
    ro, rw = mha_ref(q[:, :1], k[:, :1], v[:, :1], sd, H)
    assert out.shape == (L, E) and w.shape == (L, S)
    close(out, ro[:, 0])
    close(w, rw[0])


def test_masks_as_torchs():
    E, H, L, S, N = 4, 2, 3, 4, 2
    sd = torch_like_state(E)
    m = nn.MultiheadAttention(E, H)
    m.load_state_dict(sd)
    q = RNG.standard_normal((L, N, E)).astype(np.float32)
    k = RNG.standard_normal((S, N, E)).astype(np.float32)
    tq, tk = lt.from_numpy(q), lt.from_numpy(k)
    # bool attn_mask [L, S]: True is NOT allowed (the opposite of sdpa's)
    causal = np.triu(np.ones((L, S), bool), 1)
    add = np.where(causal, -np.inf, 0.0).astype(np.float32)
    for need in (True, False):
        out, w = m(tq, tk, tk, attn_mask=lt.tensor(causal), need_weights=need)
        ro, rw = mha_ref(q, k, k, sd, H, mask=add)
        close(out, ro)
        if need:
            close(w, rw)
            assert (w.numpy()[:, causal] == 0).all()
    # a float 3-d mask [N * H, L, S] is added, head by head
    fm = RNG.standard_normal((N * H, L, S)).astype(np.float32)
    out, w = m(tq, tk, tk, attn_mask=lt.from_numpy(fm), average_attn_weights=False)
    ro, rw = mha_ref(q, k, k, sd, H, mask=fm, average=False)
    close(out, ro)
    close(w, rw)
    # key_padding_mask [N, S]: True keys are ignored, per batch entry
    kpm = np.array([[False, False, True, True], [False] * 4])
    kadd = np.where(kpm, -np.inf, 0.0).astype(np.float32)[:, None, None, :]
    kadd = np.broadcast_to(kadd, (N, H, 1, S)).reshape(N * H, 1, S)
    for need in (True, False):
        out, w = m(tq, tk, tk, key_padding_mask=lt.tensor(kpm), need_weights=need)
        ro, rw = mha_ref(q, k, k, sd, H, mask=kadd)
        close(out, ro)
        if need:
            close(w, rw)
    # both: summed; a row that sees no key is NaN, as torch
    out, w = m(tq, tk, tk, attn_mask=lt.tensor(np.ones((L, S), bool)))
    assert np.isnan(out.numpy()).all() and np.isnan(w.numpy()).all()
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is \[2, 4\], but "
                       r"should be \(3, 4\)"):
        m(tq, tk, tk, attn_mask=lt.tensor(np.ones((2, 4), bool)))
    with pytest.raises(AssertionError, match="only float, byte, and bool types"):
        m(tq, tk, tk, attn_mask=lt.tensor(np.ones((L, S), np.int64)))
    with pytest.raises(AssertionError, match="key_padding_mask shape"):
        m(tq, tk, tk, key_padding_mask=lt.tensor(np.ones((N, S + 1), bool)))


def test_gradients_match_finite_differences():
    E, H, L, N = 4, 2, 3, 2
    sd = torch_like_state(E, np.float64)
    m = nn.MultiheadAttention(E, H, dtype=lt.float64)
    m.load_state_dict(sd)
    x = RNG.standard_normal((L, N, E))
    g = RNG.standard_normal((L, N, E))
    tx = lt.from_numpy(x)
    out, _ = m(tx, tx, tx, need_weights=False)
    (out * lt.from_numpy(g)).sum().backward()

    def f(state):
        return (mha_ref(x, x, x, state, H)[0] * g).sum()

    for name in ("in_proj_weight", "in_proj_bias", "out_proj.weight"):
        param = dict(m.named_parameters())[name]
        grad = param.grad.numpy()
        assert grad.shape == sd[name].shape
        for idx in [(0,) * sd[name].ndim, tuple(s - 1 for s in sd[name].shape)]:
            hi, lo = dict(sd), dict(sd)
            hi[name], lo[name] = sd[name].copy(), sd[name].copy()
            hi[name][idx] += 1e-6
            lo[name][idx] -= 1e-6
            np.testing.assert_allclose(grad[idx], (f(hi) - f(lo)) / 2e-6, rtol=1e-4, atol=1e-6)
