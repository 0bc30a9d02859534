"""ViT (lucidrains style): every size is a constructor parameter, set where the model is built (bottom of the file)."""
import torch
import torch.nn as nn


# precision-lens: fp8 fallback
# FP8 through Transformer Engine where this machine supports it, BF16 everywhere else (no TE, no GPU, A100...).
# fp8_linear / fp8_layernorm / fp8_rmsnorm build te.* layers or their torch.nn twins; run the forward pass and the
# loss under `with fp8_autocast_context():` and call backward() after the block.
import contextlib
import os
import sys

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

# The recipe, defined once: every FP8 autocast region uses it unless given another.
FP8_RECIPE = te_recipe.DelayedScaling(fp8_format=te_recipe.Format.HYBRID, amax_history_len=16, amax_compute_algo="max") if te_recipe is not None else None
_PL_FP8_STATE = None
_PL_RECIPE_STATE = {}
_PL_KEPT = []


class _PLNotTE(torch.nn.Module):
    """Stands in for a te.* class where Transformer Engine is absent: no module is an instance of it."""


if te is not None:
    TE_LINEAR, TE_LAYERNORM = te.Linear, te.LayerNorm
    TE_RMSNORM = getattr(te, "RMSNorm", _PLNotTE)
else:
    TE_LINEAR = TE_LAYERNORM = TE_RMSNORM = _PLNotTE


def _pl_cuda_at_least(major, minor):
    try:
        return tuple(int(p) for p in str(torch.version.cuda).split(".")[:2]) >= (major, minor)
    except ValueError:  # no CUDA build
        return False


# What each recipe needs beyond FP8 itself: TE's own check where this TE has it, else the documented requirement.
_PL_RECIPE_NEEDS = {
    "MXFP8BlockScaling": ("is_mxfp8_available", lambda cc: (10, 0) <= cc < (12, 0), "MXFP8 needs compute capability 10.x"),
    "Float8BlockScaling": ("is_fp8_block_scaling_available", lambda cc: cc >= (9, 0) and _pl_cuda_at_least(12, 9),
                           "FP8 block scaling needs compute capability 9.0 and CUDA 12.9"),
    "NVFP4BlockScaling": ("is_nvfp4_available", lambda cc: cc >= (10, 0), "NVFP4 needs compute capability 10.0"),
}


def _pl_recipe_support(recipe):
    """(True, "") when this GPU runs the recipe, else (False, reason)."""
    name = type(recipe).__name__
    if recipe is None or name not in _PL_RECIPE_NEEDS:
        return True, ""
    if name not in _PL_RECIPE_STATE:
        check, needs, why = _PL_RECIPE_NEEDS[name]
        try:
            if getattr(te, check, None) is not None:
                ok, reason = getattr(te, check)(return_reason=True)
            else:
                ok, reason = needs(torch.cuda.get_device_capability()), why
        except Exception as err:  # a driver or runtime mismatch must not stop training: fall back to BF16
            ok, reason = False, "recipe check failed: %s" % err
        _PL_RECIPE_STATE[name] = (bool(ok), "" if ok else "%s is not supported here: %s" % (name, reason or why))
    return _PL_RECIPE_STATE[name]


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
    if not ok:
        return False, str(reason or "FP8 not supported on this GPU")
    return _pl_recipe_support(FP8_RECIPE)


def fp8_available():
    """(True, "") when this process runs FP8 through Transformer Engine, else (False, reason). Logs the choice once."""
    global _PL_FP8_STATE
    if _PL_FP8_STATE is None:
        _PL_FP8_STATE = _pl_fp8_support()
        if _PL_FP8_STATE[0]:
            major, minor = torch.cuda.get_device_capability()
            label = type(FP8_RECIPE).__name__
            label = "DelayedScaling/HYBRID" if label == "DelayedScaling" else label
            print("Running in FP8 mode on %s (sm_%d%d), recipe %s" % (torch.cuda.get_device_name(), major, minor, label), flush=True)
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


def _pl_caller():
    """file:line of the code that called the factory (where the layer is built), for the log."""
    try:
        frame = sys._getframe(2)
        return "%s:%d" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno)
    except (AttributeError, ValueError):
        return "?"


def _pl_shape_problem(in_features, out_features):
    """Why te.Linear(in_features, out_features) cannot run its GEMMs in FP8, or "" when it can."""
    if not isinstance(in_features, int) or not isinstance(out_features, int):
        return ""
    bad = ["in_features %d is not a multiple of 16" % in_features] if in_features % 16 else []
    if out_features % 8:
        bad.append("out_features %d is not a multiple of 8" % out_features)
    return ", ".join(bad)


def _pl_pad_rows(module, args):
    """FP8 GEMMs need the input's leading dimensions to multiply to a multiple of 8: pad the rows with zeros."""
    x = args[0] if args else None
    if not torch.is_tensor(x) or x.dim() == 0 or x.shape[-1] == 0:
        return None
    rows = x.numel() // x.shape[-1]
    if rows % 8 == 0:
        return None
    module._pl_rows = (tuple(x.shape[:-1]), rows)
    flat = x.reshape(rows, x.shape[-1])
    return (torch.cat([flat, flat.new_zeros((-rows) % 8, x.shape[-1])]),) + tuple(args[1:])


def _pl_unpad_rows(module, args, output):
    if getattr(module, "_pl_rows", None) is None:
        return None
    shape, rows = module._pl_rows
    module._pl_rows = None
    cut = lambda y: y[:rows].reshape(shape + (y.shape[-1],))
    return (cut(output[0]),) + tuple(output[1:]) if isinstance(output, tuple) else cut(output)


def _pl_guard_rows(layer):
    layer._pl_rows = None
    layer.register_forward_pre_hook(_pl_pad_rows)
    layer.register_forward_hook(_pl_unpad_rows)
    return layer


def fp8_linear(in_features, out_features, bias=True, **kwargs):
    """te.Linear when FP8 runs here and the shape allows it, else torch.nn.Linear of the same shape."""
    if fp8_available()[0]:
        problem = _pl_shape_problem(in_features, out_features)
        if not problem:
            return _pl_guard_rows(te.Linear(in_features, out_features, bias=bias, **kwargs))
        _PL_KEPT.append("%s Linear(%s, %s): %s" % (_pl_caller(), in_features, out_features, problem))
    return torch.nn.Linear(in_features, out_features, bias=bias, **_pl_torch_kwargs(kwargs))


def fp8_parallel_linear(fallback, in_features, out_features, bias=True, **kwargs):
    """te.Linear(parallel_mode=...) when FP8 runs here and the shape allows it, else fallback(): the library's own layer."""
    if fp8_available()[0]:
        problem = _pl_shape_problem(in_features, out_features)
        if not problem:
            return _pl_guard_rows(te.Linear(in_features, out_features, bias=bias, **kwargs))
        _PL_KEPT.append("%s parallel Linear(%s, %s): %s" % (_pl_caller(), in_features, out_features, problem))
    return fallback()


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


def _pl_bf16_autocast():
    if torch.cuda.is_available():
        # GPUs without BF16 (V100, T4) get FP16 autocast rather than an error.
        return torch.autocast("cuda", dtype=torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return torch.autocast("cpu", dtype=torch.bfloat16)


def fp8_autocast_context(enabled=True, recipe=None):
    """TE FP8 autocast when FP8 runs here, else BF16 torch.autocast. enabled=False keeps a region out of FP8."""
    if fp8_available()[0]:
        if _PL_KEPT:
            print("FP8: %d layer(s) kept in high precision by the FP8 shape rule: %s" % (len(_PL_KEPT), "; ".join(_PL_KEPT)), flush=True)
            del _PL_KEPT[:]
        recipe = recipe or FP8_RECIPE
        ok, reason = _pl_recipe_support(recipe)
        if ok or not enabled:
            return te.autocast(enabled=enabled, recipe=recipe)
        if not _PL_RECIPE_STATE.get(("logged", reason)):
            _PL_RECIPE_STATE[("logged", reason)] = True
            print("FP8 autocast falls back to BF16: %s" % reason, flush=True)
    elif not enabled:
        return contextlib.nullcontext()
    return _pl_bf16_autocast()
# precision-lens: end of fp8 fallback


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.net = nn.Sequential(
            fp8_layernorm(dim),
            fp8_linear(dim, hidden_dim),
            nn.GELU(),
            fp8_linear(hidden_dim, dim),
        )

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = fp8_layernorm(dim)
        self.to_qkv = fp8_linear(dim, inner_dim * 3, bias=False)
        self.to_out = fp8_linear(inner_dim, dim)

    def forward(self, x):
        x = self.norm(x)
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2) * self.scale).softmax(-1)
        return self.to_out((att @ v).transpose(1, 2).reshape(b, n, -1))


class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim):
        super().__init__()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([Attention(dim, heads=heads, dim_head=dim_head), FeedForward(dim, mlp_dim)]))
        self.norm = fp8_layernorm(dim)

    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.norm(x)


class ViT(nn.Module):
    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, channels=3, dim_head=64):
        super().__init__()
        self.patch_size = patch_size
        num_patches = (image_size // patch_size) ** 2
        patch_dim = channels * patch_size * patch_size
        self.to_patch_embedding = fp8_linear(patch_dim, dim)
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches, dim))
        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim)
        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        b, c, h, w = img.shape
        p = self.patch_size
        x = img.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(b, (h // p) * (w // p), c * p * p)
        x = self.to_patch_embedding(x) + self.pos_embedding
        return self.mlp_head(self.transformer(x).mean(dim=1))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ViT(image_size=32, patch_size=8, num_classes=10, dim=256, depth=2, heads=4, mlp_dim=512)
    img = torch.randn(2, 3, 32, 32)
    out = model(img)
    loss = out.pow(2).mean()
    loss.backward()
    grad = sum(p.grad.double().pow(2).sum() for p in model.parameters() if p.grad is not None)
    print("RESULT %.8e %.8e" % (out.double().sum().item(), grad.item()))
