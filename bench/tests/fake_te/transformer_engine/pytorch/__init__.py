"""Fake transformer_engine.pytorch: te.Linear/LayerNorm/RMSNorm are torch modules with TE's constructor
signatures; autocast records the recipes it was entered with."""
import contextlib
import os
import warnings

import torch
import torch.nn as nn

AUTOCAST_LOG = []


class Linear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, params_dtype=None, device="cuda", init_method=None,
                 **kwargs):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=params_dtype)

    def forward(self, x):
        if AUTOCAST_LOG and os.environ.get("FAKE_TE_MARK"):
            AUTOCAST_LOG.append("linear")
        return super().forward(x)


class LayerNorm(nn.LayerNorm):
    # zero_centered_gamma as TE has it: the weight starts at zeros and the norm scales by (1 + weight).
    def __init__(self, normalized_shape, eps=1e-5, sequence_parallel=None, params_dtype=None,
                 zero_centered_gamma=False, device="cuda", dtype=None):
        super().__init__(normalized_shape, eps=eps, device=device, dtype=dtype or params_dtype)
        self.zero_centered_gamma = zero_centered_gamma
        if zero_centered_gamma:
            with torch.no_grad():
                self.weight.zero_()

    def forward(self, x):
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return nn.functional.layer_norm(x, self.normalized_shape, gamma, self.bias, self.eps)


class RMSNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, sequence_parallel=None, params_dtype=None,
                 zero_centered_gamma=False, device="cuda", dtype=None):
        super().__init__()
        self.eps = eps
        self.zero_centered_gamma = zero_centered_gamma
        init = torch.zeros if zero_centered_gamma else torch.ones
        self.weight = nn.Parameter(init(normalized_shape, device=device, dtype=dtype or params_dtype))

    def forward(self, x):
        xf = x.float()
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * gamma


class DotProductAttention(nn.Module):
    """TE's constructor signature; causal attention over (b, s, heads, d) inputs, GQA by repeating the kv heads,
    output (b, s, heads * d) as TE returns it for qkv_format="bshd"."""

    def __init__(self, num_attention_heads, kv_channels, num_gqa_groups=None, attention_dropout=0.0,
                 qkv_format="sbhd", attn_mask_type="causal", **kwargs):
        super().__init__()
        assert qkv_format == "bshd" and attn_mask_type == "causal"
        self.heads, self.groups = num_attention_heads, num_gqa_groups or num_attention_heads

    def forward(self, q, k, v):
        from plbench.workloads import causal_attention
        b, s, h, d = q.shape
        r = self.heads // self.groups
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        k, v = (t.repeat_interleave(r, dim=1) for t in (k, v))
        return causal_attention(q, k, v).transpose(1, 2).reshape(b, s, h * d)


@contextlib.contextmanager
def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None):
    AUTOCAST_LOG.append(("autocast", type(recipe).__name__))
    yield


@contextlib.contextmanager
def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None):
    warnings.warn("fp8_autocast is deprecated and will be removed in a future release. Use autocast(...)",
                  DeprecationWarning)
    AUTOCAST_LOG.append(("fp8_autocast", type(fp8_recipe).__name__))
    yield


def is_fp8_available(return_reason=False):
    ok = os.environ.get("FAKE_TE_FP8", "1") == "1"
    reason = "" if ok else "Device compute capability 8.9 or higher required for FP8 execution."
    return (ok, reason) if return_reason else ok


def _norm(x, weight, bias, eps, normalization):
    xf = x.float()
    if normalization == "RMSNorm":
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    else:
        y = (xf - xf.mean(-1, keepdim=True)) * torch.rsqrt(xf.var(-1, unbiased=False, keepdim=True) + eps)
    y = y.type_as(x) * weight
    return y + bias if bias is not None else y


class LayerNormLinear(nn.Module):
    """TE's parameter names and semantics: norm (LayerNorm or RMSNorm) then Linear."""

    def __init__(self, in_features, out_features, eps=1e-5, bias=True, normalization="LayerNorm", params_dtype=None,
                 device="cuda", init_method=None, zero_centered_gamma=False, **kwargs):
        super().__init__()
        assert normalization in ("LayerNorm", "RMSNorm"), "Unsupported normalization type!"
        self.eps, self.normalization, self.zero_centered_gamma = eps, normalization, zero_centered_gamma
        kw = {"device": device, "dtype": params_dtype}
        self.layer_norm_weight = nn.Parameter((torch.zeros if zero_centered_gamma else torch.ones)(in_features, **kw))
        self.layer_norm_bias = nn.Parameter(torch.zeros(in_features, **kw)) if normalization == "LayerNorm" else None
        self.weight = nn.Parameter(torch.empty(out_features, in_features, **kw).normal_(0, 0.023))
        self.bias = nn.Parameter(torch.zeros(out_features, **kw)) if bias else None

    def forward(self, x):
        gamma = self.layer_norm_weight + 1 if self.zero_centered_gamma else self.layer_norm_weight
        y = _norm(x, gamma, self.layer_norm_bias, self.eps, self.normalization)
        return nn.functional.linear(y, self.weight, self.bias)


class LayerNormMLP(nn.Module):
    """TE's parameter names and semantics: norm, fc1, activation (gelu: tanh approximation; swiglu: silu of the
    first half times the second half), fc2."""

    def __init__(self, hidden_size, ffn_hidden_size, eps=1e-5, bias=True, normalization="LayerNorm",
                 activation="gelu", params_dtype=None, device="cuda", init_method=None, zero_centered_gamma=False, **kwargs):
        super().__init__()
        assert normalization in ("LayerNorm", "RMSNorm"), "Unsupported normalization type!"
        self.eps, self.normalization, self.activation = eps, normalization, activation
        self.zero_centered_gamma = zero_centered_gamma
        kw = {"device": device, "dtype": params_dtype}
        fc1_out = 2 * ffn_hidden_size if activation == "swiglu" else ffn_hidden_size
        self.layer_norm_weight = nn.Parameter((torch.zeros if zero_centered_gamma else torch.ones)(hidden_size, **kw))
        self.layer_norm_bias = nn.Parameter(torch.zeros(hidden_size, **kw)) if normalization == "LayerNorm" else None
        self.fc1_weight = nn.Parameter(torch.empty(fc1_out, hidden_size, **kw).normal_(0, 0.023))
        self.fc2_weight = nn.Parameter(torch.empty(hidden_size, ffn_hidden_size, **kw).normal_(0, 0.023))
        self.fc1_bias = nn.Parameter(torch.zeros(fc1_out, **kw)) if bias else None
        self.fc2_bias = nn.Parameter(torch.zeros(hidden_size, **kw)) if bias else None

    def forward(self, x):
        gamma = self.layer_norm_weight + 1 if self.zero_centered_gamma else self.layer_norm_weight
        y = _norm(x, gamma, self.layer_norm_bias, self.eps, self.normalization)
        h = nn.functional.linear(y, self.fc1_weight, self.fc1_bias)
        if self.activation == "swiglu":
            gate, up = h.chunk(2, dim=-1)
            h = nn.functional.silu(gate) * up
        else:
            h = nn.functional.gelu(h, approximate="tanh")
        return nn.functional.linear(h, self.fc2_weight, self.fc2_bias)


def is_mxfp8_available(return_reason=False):
    """Real TE 2.20.2 on an H200 answers (False, this reason)."""
    ok = os.environ.get("FAKE_TE_MXFP8", "0") == "1"
    reason = "" if ok else "Device compute capability 10.0 or higher required for MXFP8 execution."
    return (ok, reason) if return_reason else ok


def is_fp8_block_scaling_available(return_reason=False):
    ok = os.environ.get("FAKE_TE_FP8_BLOCK", "1") == "1"
    reason = "" if ok else "FP8 block scaled GEMM requires compute capability 9.0 or higher and CUDA >= 12.9."
    return (ok, reason) if return_reason else ok
