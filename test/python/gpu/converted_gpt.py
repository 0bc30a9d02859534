"""A small GPT-style model and a three-step training loop: the execution test converts it with the real fixes."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


# precision-lens: fp8 fallback
# FP8 through Transformer Engine where this machine supports it, BF16 everywhere else (no TE, no GPU, A100...).
# fp8_linear / fp8_layernorm / fp8_rmsnorm build te.* layers or their torch.nn twins; run the forward pass and the
# loss under `with fp8_autocast_context():` and call backward() after the block.
import contextlib

try:
    import transformer_engine.pytorch as te
    from transformer_engine.common import recipe as te_recipe
except ImportError as _pl_error:  # not installed, or a build that does not match this torch/CUDA
    te = None
    te_recipe = None
    _PL_TE_MISSING = (
        "Transformer Engine not installed" if isinstance(_pl_error, ModuleNotFoundError)
        else "Transformer Engine failed to import: %s" % _pl_error
    )
else:
    _PL_TE_MISSING = None

# The recipe, defined once: every FP8 autocast region of this file uses it unless given another.
FP8_RECIPE = te_recipe.DelayedScaling(fp8_format=te_recipe.Format.HYBRID, amax_history_len=16, amax_compute_algo="max") if te_recipe is not None else None
_PL_FP8_STATE = None


def _pl_fp8_support():
    if te is None:
        if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
            return False, _PL_TE_MISSING + " (this GPU supports FP8: pip install transformer_engine[pytorch])"
        return False, _PL_TE_MISSING
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
        ok, reason = te.is_fp8_available(return_reason=True)
    except Exception as err:  # a driver or runtime mismatch must not stop training: fall back to BF16
        return False, "FP8 check failed: %s" % err
    return bool(ok), str(reason or "")


def fp8_available():
    """(True, "") when this process runs FP8 through Transformer Engine, else (False, reason). Logs the choice once."""
    global _PL_FP8_STATE
    if _PL_FP8_STATE is None:
        _PL_FP8_STATE = _pl_fp8_support()
        if _PL_FP8_STATE[0]:
            major, minor = torch.cuda.get_device_capability()
            print("Running in FP8 mode on %s (sm_%d%d), recipe DelayedScaling/HYBRID" % (torch.cuda.get_device_name(), major, minor), flush=True)
        else:
            print("Running in BF16 fallback: %s" % _PL_FP8_STATE[1], flush=True)
    return _PL_FP8_STATE


def _pl_torch_kwargs(kwargs):
    """te.* keyword arguments as torch.nn takes them: params_dtype is dtype there, TE-only options have no twin."""
    out = {k: v for k, v in kwargs.items() if k in ("device", "dtype")}
    if kwargs.get("params_dtype") is not None:
        out["dtype"] = kwargs["params_dtype"]
    return out


def _pl_norm_kwargs(kwargs):
    """te.LayerNorm / te.RMSNorm (TE >= 2.9) take dtype= where te.Linear takes params_dtype=."""
    kwargs = dict(kwargs)
    if "params_dtype" in kwargs:
        kwargs["dtype"] = kwargs.pop("params_dtype")
    return kwargs


def fp8_linear(in_features, out_features, bias=True, **kwargs):
    """te.Linear when FP8 runs here, else torch.nn.Linear of the same shape."""
    if fp8_available()[0]:
        return te.Linear(in_features, out_features, bias=bias, **kwargs)
    return torch.nn.Linear(in_features, out_features, bias=bias, **_pl_torch_kwargs(kwargs))


def fp8_layernorm(normalized_shape, eps=1e-5, **kwargs):
    """te.LayerNorm when FP8 runs here, else torch.nn.LayerNorm."""
    if fp8_available()[0]:
        return te.LayerNorm(normalized_shape, eps=eps, **_pl_norm_kwargs(kwargs))
    return torch.nn.LayerNorm(normalized_shape, eps=eps, **_pl_torch_kwargs(kwargs))


class _PLRMSNorm(torch.nn.Module):
    """RMSNorm for torch < 2.4 (no torch.nn.RMSNorm) and for the (1 + weight) variant."""

    def __init__(self, normalized_shape, eps=1e-5, zero_centered_gamma=False, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.zero_centered_gamma = zero_centered_gamma
        init = torch.zeros if zero_centered_gamma else torch.ones
        self.weight = torch.nn.Parameter(init(shape, device=device, dtype=dtype))

    def forward(self, x):
        dims = tuple(range(-self.weight.dim(), 0))
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + self.eps) * gamma


def fp8_rmsnorm(normalized_shape, eps=1e-5, **kwargs):
    """te.RMSNorm when FP8 runs here, else torch.nn.RMSNorm (or a built-in one on older torch)."""
    if fp8_available()[0]:
        return te.RMSNorm(normalized_shape, eps=eps, **_pl_norm_kwargs(kwargs))
    zero_centered = bool(kwargs.get("zero_centered_gamma", False))
    if hasattr(torch.nn, "RMSNorm") and not zero_centered:
        return torch.nn.RMSNorm(normalized_shape, eps=eps, **_pl_torch_kwargs(kwargs))
    return _PLRMSNorm(normalized_shape, eps=eps, zero_centered_gamma=zero_centered, **_pl_torch_kwargs(kwargs))


def fp8_autocast_context(enabled=True, recipe=None):
    """TE FP8 autocast when FP8 runs here, else BF16 torch.autocast. enabled=False keeps a region out of FP8."""
    if fp8_available()[0]:
        return te.autocast(enabled=enabled, recipe=recipe or FP8_RECIPE)
    if not enabled:
        return contextlib.nullcontext()
    if torch.cuda.is_available():
        # GPUs without BF16 (V100, T4) get FP16 autocast rather than an error.
        return torch.autocast("cuda", dtype=torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return torch.autocast("cpu", dtype=torch.bfloat16)
# precision-lens: end of fp8 fallback


class RMSNorm(nn.Module):
    """Root-mean-square norm (no mean subtraction, weight only)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = fp8_layernorm(n_embd, eps=1e-5)
        self.c_attn = fp8_linear(n_embd, 3 * n_embd, bias=True)  # fused q, k, v
        self.c_proj = fp8_linear(n_embd, n_embd)
        self.ln_2 = fp8_rmsnorm(n_embd, eps=1e-6)
        self.c_fc = fp8_linear(n_embd, 4 * n_embd, params_dtype=torch.float32)
        self.mlp_proj = fp8_linear(4 * n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab_size=256, n_embd=64, n_head=4, n_layer=2, block_size=32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = fp8_layernorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))
        return logits, loss


def train(steps=3):
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for step in range(steps):
        idx = torch.randint(0, 256, (4, 32), device=device)
        targets = torch.roll(idx, -1, dims=1)
        optimizer.zero_grad(set_to_none=True)
        with fp8_autocast_context():
            logits, loss = model(idx, targets)
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    train()
