"""Fake transformer_engine.pytorch: te.Linear / LayerNorm / RMSNorm are torch modules with TE's constructor
signatures that, like the real ones, are not torch.nn.Linear / LayerNorm subclasses (so class tests must name them);
they build on the CPU. FAKE_TE_API=legacy removes the TE >= 2.9 names (autocast, is_fp8_available, the per-recipe
checks), as TE before 2.9 lacks them; FAKE_TE_MXFP8=0 makes is_mxfp8_available say no. Autocast entries and TE layer
calls are recorded in CALLS."""
import contextlib
import os

import torch
import torch.nn.functional as F

CALLS = []
_FP8 = []


def _check_device(device):
    return "cpu" if device in (None, "cuda") else device


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, bias=True, params_dtype=None, device="cuda", init_method=None,
                 parallel_mode=None, tp_group=None, tp_size=1, sequence_parallel=False, return_bias=False, **kwargs):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.use_bias, self.return_bias, self.parallel_mode = bias, return_bias, parallel_mode
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, device=_check_device(device), dtype=params_dtype))
        torch.nn.init.normal_(self.weight, std=0.023)
        self.bias = torch.nn.Parameter(torch.zeros(out_features, device=_check_device(device), dtype=params_dtype)) if bias else None

    def forward(self, inp, is_first_microbatch=None):
        # TE's activation dtype: torch.autocast's where it is on (weights and input cast to it), else the input's, and
        # then every parameter must have it (TE's set_activation_dtype asserts; it casts nothing).
        weight, bias = self.weight, self.bias
        if torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled():
            dtype = torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else torch.get_autocast_cpu_dtype()
            inp, weight = inp.to(dtype), weight.to(dtype)
            bias = None if bias is None else bias.to(dtype)
        else:
            for name, param in self.named_parameters():
                assert inp.dtype == param.dtype, (
                    "Data types for parameters must match when outside of autocasted region. "
                    " Found input dtype: %s and %r dtype: %s" % (inp.dtype, name, param.dtype))
        if _FP8 and _FP8[-1]:
            rows = inp.numel() // inp.shape[-1]
            if rows % 8 or inp.shape[-1] % 16:
                raise ValueError("FP8 execution requires the product of all dimensions except the last to be divisible by 8 and the last dimension to be divisible by 16, but got tensor with dims=%s" % list(inp.shape))
            # The backward's weight-gradient GEMM reduces over the rows: with gradients, rows must be a multiple of 16.
            # and the input-gradient GEMM reduces over out_features (TE: "Leading dimension requirement ... must pad").
            if torch.is_grad_enabled() and (inp.requires_grad or self.weight.requires_grad):
                if rows % 16:
                    raise ValueError("FP8 weight-gradient GEMM requires the rows (%d) to be divisible by 16" % rows)
                if self.out_features % 16:
                    raise ValueError("FP8 input-gradient GEMM requires out_features (%d) to be divisible by 16" % self.out_features)
            CALLS.append("linear")
        return F.linear(inp, weight, bias)


class LayerNorm(torch.nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, sequence_parallel=None, params_dtype=None,
                 zero_centered_gamma=False, device="cuda", dtype=None):
        super().__init__()
        self.eps, self.zero_centered_gamma = eps, zero_centered_gamma
        # zero_centered_gamma as TE has it: the weight starts at zeros and the norm scales by (1 + weight).
        init = torch.zeros if zero_centered_gamma else torch.ones
        self.weight = torch.nn.Parameter(init(normalized_shape, device=_check_device(device), dtype=dtype or params_dtype))
        self.bias = torch.nn.Parameter(torch.zeros(normalized_shape, device=_check_device(device), dtype=dtype or params_dtype))

    def forward(self, x):
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return F.layer_norm(x, self.weight.shape, gamma, self.bias, self.eps)


class RMSNorm(torch.nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, sequence_parallel=None, params_dtype=None,
                 zero_centered_gamma=False, device="cuda", dtype=None):
        super().__init__()
        self.eps, self.zero_centered_gamma = eps, zero_centered_gamma
        init = torch.zeros if zero_centered_gamma else torch.ones
        self.weight = torch.nn.Parameter(init(normalized_shape, device=_check_device(device), dtype=dtype or params_dtype))

    def forward(self, x):
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * gamma


class LayerNormLinear(Linear):
    """Norm then Linear, as TE builds it: the norm's parameters registered as layer_norm_weight / layer_norm_bias
    (TE sets layer_norm_bias = None for RMSNorm) and read from those attributes at every call."""

    def __init__(self, in_features, out_features, eps=1e-5, bias=True, normalization="LayerNorm", params_dtype=None,
                 device="cuda", zero_centered_gamma=False, **kwargs):
        super().__init__(in_features, out_features, bias=bias, params_dtype=params_dtype, device=device, **kwargs)
        assert normalization in ("LayerNorm", "RMSNorm"), "Unsupported normalization type!"
        self.eps, self.normalization, self.zero_centered_gamma = eps, normalization, zero_centered_gamma
        kw = {"device": _check_device(device), "dtype": params_dtype}
        self.register_parameter("layer_norm_weight", torch.nn.Parameter(torch.ones(in_features, **kw)))
        if normalization == "LayerNorm":
            self.register_parameter("layer_norm_bias", torch.nn.Parameter(torch.zeros(in_features, **kw)))
        else:
            self.layer_norm_bias = None
        with torch.no_grad():  # TE's reset_parameters reads them back by attribute
            self.layer_norm_weight.fill_(0.0 if zero_centered_gamma else 1.0)

    def forward(self, inp, is_first_microbatch=None):
        weight = self.layer_norm_weight + 1 if self.zero_centered_gamma else self.layer_norm_weight
        if self.normalization == "LayerNorm":
            y = F.layer_norm(inp, weight.shape, weight, self.layer_norm_bias, self.eps)
        else:
            y = inp * torch.rsqrt(inp.pow(2).mean(-1, keepdim=True) + self.eps) * weight
        if _FP8 and _FP8[-1]:
            CALLS.append("layernorm_linear")
        return super().forward(y, is_first_microbatch)


_ACTIVATIONS = {"gelu": lambda t: F.gelu(t, approximate="tanh"), "relu": F.relu, "silu": F.silu,
                "qgelu": lambda t: t * torch.sigmoid(1.702 * t)}
_GATED = {"geglu": "gelu", "reglu": "relu", "swiglu": "silu", "qgeglu": "qgelu"}


class LayerNormMLP(torch.nn.Module):
    """Norm, fc1, activation, fc2 as TE builds it: layer_norm_weight / layer_norm_bias (None for RMSNorm), fc1_weight
    of 2 * ffn_hidden_size rows for a gated activation (TE's activation on the first half times the second),
    fc1_bias / fc2_bias empty tensors without bias; forward reads them by attribute at every call, as TE's does."""

    def __init__(self, hidden_size, ffn_hidden_size, eps=1e-5, bias=True, normalization="LayerNorm", activation="gelu",
                 params_dtype=None, device="cuda", zero_centered_gamma=False, **kwargs):
        super().__init__()
        assert normalization in ("LayerNorm", "RMSNorm"), "Unsupported normalization type!"
        if activation not in _ACTIVATIONS and activation not in _GATED:
            raise NotImplementedError("Activation type " + activation + " is not supported!")
        self.eps, self.normalization, self.activation = eps, normalization, activation
        self.use_bias, self.zero_centered_gamma = bias, zero_centered_gamma
        kw = {"device": _check_device(device), "dtype": params_dtype}
        rows = 2 * ffn_hidden_size if activation in _GATED else ffn_hidden_size
        self.register_parameter("layer_norm_weight", torch.nn.Parameter(torch.ones(hidden_size, **kw)))
        if normalization == "LayerNorm":
            self.register_parameter("layer_norm_bias", torch.nn.Parameter(torch.zeros(hidden_size, **kw)))
        else:
            self.layer_norm_bias = None
        self.register_parameter("fc1_weight", torch.nn.Parameter(torch.randn(rows, hidden_size, **kw) * 0.02))
        if bias:
            self.register_parameter("fc1_bias", torch.nn.Parameter(torch.zeros(rows, **kw)))
        else:
            self.fc1_bias = torch.Tensor().to(**kw)
        self.register_parameter("fc2_weight", torch.nn.Parameter(torch.randn(hidden_size, ffn_hidden_size, **kw) * 0.02))
        if bias:
            self.register_parameter("fc2_bias", torch.nn.Parameter(torch.zeros(hidden_size, **kw)))
        else:
            self.fc2_bias = torch.Tensor().to(**kw)

    def _get_weight_tensors(self):
        return [self.fc1_weight, self.fc2_weight]

    def forward(self, inp, is_first_microbatch=None):
        fc1_weight, fc2_weight = self._get_weight_tensors()
        fc1_bias = self.fc1_bias if self.use_bias else None
        fc2_bias = self.fc2_bias if self.use_bias else None
        gamma = self.layer_norm_weight + 1 if self.zero_centered_gamma else self.layer_norm_weight
        if self.normalization == "LayerNorm":
            y = F.layer_norm(inp, gamma.shape, gamma, self.layer_norm_bias, self.eps)
        else:
            y = inp * torch.rsqrt(inp.pow(2).mean(-1, keepdim=True) + self.eps) * gamma
        if torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled():
            dtype = torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else torch.get_autocast_cpu_dtype()
            y, fc1_weight, fc2_weight = y.to(dtype), fc1_weight.to(dtype), fc2_weight.to(dtype)
            fc1_bias = None if fc1_bias is None else fc1_bias.to(dtype)
            fc2_bias = None if fc2_bias is None else fc2_bias.to(dtype)
        if _FP8 and _FP8[-1]:
            CALLS.append("layernorm_mlp")
        h = F.linear(y, fc1_weight, fc1_bias)
        if self.activation in _GATED:
            a, b = h.chunk(2, dim=-1)
            h = _ACTIVATIONS[_GATED[self.activation]](a) * b
        else:
            h = _ACTIVATIONS[self.activation](h)
        return F.linear(h, fc2_weight, fc2_bias)


class DotProductAttention(torch.nn.Module):
    """TE's constructor signature; softmax(q k^T * scale) v written out in FP32 over (batch, seq, heads, head_dim)
    inputs, grouped key/value heads repeated, output (batch, seq, heads * head_dim) as TE returns it for "bshd"."""

    def __init__(self, num_attention_heads, kv_channels, num_gqa_groups=None, attention_dropout=0.0,
                 qkv_format="sbhd", attn_mask_type="causal", softmax_scale=None, **kwargs):
        super().__init__()
        assert qkv_format == "bshd" and attn_mask_type in ("causal", "no_mask") and attention_dropout == 0.0
        self.heads, self.groups = num_attention_heads, num_gqa_groups or num_attention_heads
        self.head_dim, self.causal = kv_channels, attn_mask_type == "causal"
        self.scale = softmax_scale if softmax_scale is not None else kv_channels ** -0.5

    def forward(self, q, k, v):
        b, s, h, d = q.shape
        assert (h, d) == (self.heads, self.head_dim) and k.shape[2] == self.groups, "shapes differ from the constructor's"
        CALLS.append("dot_product_attention")
        r, dtype = h // self.groups, q.dtype
        q, k, v = (t.transpose(1, 2).float() for t in (q, k, v))
        k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
        scores = q @ k.transpose(-2, -1) * self.scale
        if self.causal:
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return out.to(dtype).transpose(1, 2).reshape(b, s, h * d)


@contextlib.contextmanager
def _region(api, enabled, recipe):
    CALLS.append((api, enabled, type(recipe).__name__))
    _FP8.append(bool(enabled))
    try:
        yield
    finally:
        _FP8.pop()


def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None):
    return _region("fp8_autocast", enabled, fp8_recipe)


def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None):
    return _region("autocast", enabled, recipe)


def is_fp8_available(return_reason=False):
    return (True, "") if return_reason else True


def is_mxfp8_available(return_reason=False):
    ok = os.environ.get("FAKE_TE_MXFP8", "1") == "1"
    reason = "" if ok else "Device compute capability 10.0 or higher required for MXFP8 execution."
    return (ok, reason) if return_reason else ok


if os.environ.get("FAKE_TE_API") == "legacy":
    del autocast, is_fp8_available, is_mxfp8_available


from . import distributed  # noqa: E402  (TE exports te.distributed.checkpoint and te.checkpoint)
from .distributed import checkpoint  # noqa: E402
