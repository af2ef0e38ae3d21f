"""torch.nn.MultiheadAttention (torch 1.13's constructor, forward, parameter
names and init), built from lazytensor's ops: the projections through
F.linear, the attention through the library's fused
scaled_dot_product_attention when no weights are asked for, else spelled out
(the weights are an output then).

Parameter names are torch's, so a torch state_dict loads as it is:
in_proj_weight [3E, E] (or q_proj_weight [E, E], k_proj_weight [E, kdim],
v_proj_weight [E, vdim] when kdim or vdim differ from E), in_proj_bias [3E],
out_proj.weight [E, E] and out_proj.bias [E]. Init as torch's: in_proj
weights xavier_uniform_, in_proj_bias and out_proj.bias zero, out_proj.weight
as nn.Linear's.

Masks as torch's MultiheadAttention (the opposite of
scaled_dot_product_attention's bool convention): a bool attn_mask or
key_padding_mask is True where attention is NOT allowed; a float mask is
added to the scores. attn_mask is [L, S] or [N * num_heads, L, S],
key_padding_mask [N, S] ([S] for an unbatched input). A query row that can
see no key gives NaN, as torch.
"""
import math

from ..tensor import BOOL, F32, U8, Tensor, _dtype_code, zeros
from . import functional as F
from .modules import Linear, Module, Parameter, _device_ok


def _xavier_uniform(shape, dtype):
    fan_out, fan_in = shape
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return Parameter(zeros(*shape, dtype=dtype).uniform_(-bound, bound))


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention. add_bias_kv and add_zero_attn are not
    supported (NotImplementedError)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        _device_ok("MultiheadAttention", device)
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not "
                                      "supported by lazytensor")
        dt = _dtype_code(dtype or F32)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _xavier_uniform((3 * embed_dim, embed_dim), dt)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = _xavier_uniform((embed_dim, embed_dim), dt)
            self.k_proj_weight = _xavier_uniform((embed_dim, self.kdim), dt)
            self.v_proj_weight = _xavier_uniform((embed_dim, self.vdim), dt)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * embed_dim, dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dt)
        if bias:  # torch zeroes it after Linear's init
            self.out_proj.bias = Parameter(zeros(embed_dim, dtype=dt))
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False

    def _projections(self):
        """(weight, bias) of q, k and v: slices of in_proj, or the separate ones."""
        e, b = self.embed_dim, self.in_proj_bias
        bs = [None] * 3 if b is None else [b[i * e:(i + 1) * e] for i in range(3)]
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            ws = [w[i * e:(i + 1) * e] for i in range(3)]
        else:
            ws = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        return list(zip(ws, bs))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True):
        """query [L, N, E] (batch_first: [N, L, E]; unbatched: [L, E]), key
        and value [S, N, kdim / vdim] likewise. Returns (output as query,
        weights [N, L, S] averaged over the heads, [N, H, L, S] with
        average_attn_weights=False, unbatched without N; None when
        need_weights is False)."""
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError("MultiheadAttention: %s must be a lazytensor.Tensor, got %s"
                                % (name, type(t).__name__))
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise AssertionError("query, key and value should all be 2-D (unbatched) or 3-D "
                                 "(batched), got %d-D, %d-D and %d-D"
                                 % (query.ndim, key.ndim, value.ndim))
        if not batched:  # one batch entry; key_padding_mask [S]
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:  # torch's layout inside is [L, N, E]
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise AssertionError("was expecting embedding dimension of %d, but got %d"
                                 % (self.embed_dim, E))
        if tuple(key.shape[:2]) != (S, N) or tuple(value.shape[:2]) != (S, N):
            raise AssertionError("key shape %s does not match value shape %s or the batch of "
                                 "query %s" % (list(key.shape), list(value.shape),
                                               list(query.shape)))
        H, hd = self.num_heads, self.head_dim
        (wq, bq), (wk, bk), (wv, bv) = self._projections()

        def heads(x, w, b, n):  # [n, N, *] -> [N, H, n, hd]
            return F.linear(x, w, b).reshape(n, N, H, hd).permute(1, 2, 0, 3)

        q, k, v = heads(query, wq, bq, L), heads(key, wk, bk, S), heads(value, wv, bv, S)
        mask = self._mask(attn_mask, key_padding_mask, q.dtype, L, S, N)
        p = self.dropout if self.training else 0.0
        if not need_weights and p == 0.0:
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
        else:
            scores = (q * (1.0 / math.sqrt(hd))) @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores + mask
            weights = scores.softmax(-1)
            out = F.dropout(weights, p, True) @ v if p > 0.0 else weights @ v
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(L, N, E))  # [L, N, E]
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out = out.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, (weights if need_weights else None)

    def _mask(self, attn_mask, key_padding_mask, dtype, L, S, N):
        """One float mask added to the scores [N, H, L, S] (broadcasting), or None."""
        H = self.num_heads
        total = None
        if attn_mask is not None:
            m = _as_float_mask("attn_mask", attn_mask, dtype)
            if m.ndim == 2:
                if tuple(m.shape) != (L, S):
                    raise RuntimeError("The shape of the 2D attn_mask is %s, but should be %s."
                                       % (list(m.shape), (L, S)))
            elif m.ndim == 3:
                if tuple(m.shape) != (N * H, L, S):
                    raise RuntimeError("The shape of the 3D attn_mask is %s, but should be %s."
                                       % (list(m.shape), (N * H, L, S)))
                m = m.reshape(N, H, L, S)
            else:
                raise RuntimeError("attn_mask's dimension %d is not supported" % m.ndim)
            total = m
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise AssertionError("expecting key_padding_mask shape of %s, but got %s"
                                     % ((N, S), list(key_padding_mask.shape)))
            m = _as_float_mask("key_padding_mask", key_padding_mask, dtype).reshape(N, 1, 1, S)
            total = m if total is None else total + m
        return total



def _as_float_mask(name, mask, dtype):
    """torch's conversion: bool (or uint8) True -> -inf, else 0; a float mask
    in the scores' dtype."""
    if mask.dtype in (BOOL, U8):
        return zeros(*mask.shape, dtype=dtype).masked_fill(mask.to(BOOL), float("-inf"))
    if not mask.is_floating_point():
        raise AssertionError("MultiheadAttention: only float, byte, and bool types are supported "
                             "for %s, not %s" % (name, mask.dtype))
    return mask.to(dtype)


__all__ = ["MultiheadAttention"]
