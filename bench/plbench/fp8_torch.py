"""The `torch-fp8` backend: nn.Linear -> a per-tensor dynamically scaled FP8 linear on torch._scaled_mm.

Forward operands (activations, weights) in E4M3, gradients in E5M2, one scale per tensor computed from the
tensor's current amax (no history). Written as a custom autograd.Function so torch.compile can trace and fuse the
amax/scale/cast kernels with their neighbours: uncompiled, those kernels eat the GEMM gain (FP8-FACTS.md).
It is not Transformer Engine: results are labelled `torch-fp8`.

Float8 dtypes are looked up with getattr so this module imports on torch 1.13 (CPU tests), where the same math runs
in an fp32 emulation (values rounded to the FP8 grids) for testing.
"""
import torch
import torch.nn as nn

from .te_convert import parent_module

E4M3_MAX = 448.0
E5M2_MAX = 57344.0
# (mantissa bits, smallest normal exponent, largest finite value)
FORMATS = {"e4m3": (3, -6, E4M3_MAX), "e5m2": (2, -14, E5M2_MAX)}
FP8_DTYPES = {"e4m3": getattr(torch, "float8_e4m3fn", None), "e5m2": getattr(torch, "float8_e5m2", None)}
EPS = 1e-12


def has_native_fp8():
    return FP8_DTYPES["e4m3"] is not None and FP8_DTYPES["e5m2"] is not None and hasattr(torch, "_scaled_mm")


def fp8_shape_ok(in_features, out_features):
    """_scaled_mm needs both GEMM dims of the weight divisible by 16 (the converters' rule)."""
    return in_features % 16 == 0 and out_features % 16 == 0


def compute_scale(amax, fmt):
    """Scale that maps the tensor's amax onto the format's largest value: q = x * scale, x ~= q / scale."""
    fmax = FORMATS[fmt][2]
    return fmax / torch.clamp(amax.float(), min=EPS)


def round_to_fp8_grid(x, fmt):
    """fp32 emulation of a cast to FP8 (round to nearest even, saturating; subnormals kept). x is fp32."""
    mbits, emin, fmax = FORMATS[fmt]
    x = torch.clamp(x, -fmax, fmax)
    a = x.abs()
    exp = torch.floor(torch.log2(torch.clamp(a, min=2.0 ** (emin - mbits - 1))))
    exp = torch.clamp(exp, min=float(emin))
    step = torch.pow(torch.tensor(2.0, dtype=x.dtype, device=x.device), exp - mbits)
    q = torch.round(a / step) * step
    q = torch.clamp(q, max=fmax)
    return torch.where(a == 0, torch.zeros_like(x), torch.sign(x) * q)


def quantize(x, fmt, emulate):
    """Per-tensor dynamic scaling. Returns (q, inv_scale): q in FP8 (or fp32 on the FP8 grid when emulating),
    inv_scale the fp32 dequantization factor (x ~= q * inv_scale)."""
    amax = x.detach().abs().amax()
    scale = compute_scale(amax, fmt)
    fmax = FORMATS[fmt][2]
    y = torch.clamp(x.float() * scale, -fmax, fmax)
    q = round_to_fp8_grid(y, fmt) if emulate else y.to(FP8_DTYPES[fmt])
    return q, scale.reciprocal()


def _mm(a, b_t, inv_a, inv_b, out_dtype, emulate, bias=None, fast_accum=False):
    """a [M,K] (row-major) @ b_t [K,N] (column-major for _scaled_mm), dequantized, in out_dtype.
    fast_accum: Hopper's faster FP8 accumulation, used for the forward GEMM only (torchao's default split)."""
    if emulate:
        with torch.autocast(device_type=a.device.type, enabled=False):
            out = torch.matmul(a.float() * inv_a, b_t.float() * inv_b)
            if bias is not None:
                out = out + bias.float()
        return out.to(out_dtype)
    if bias is not None:
        bias = bias.to(out_dtype)
    return torch._scaled_mm(a, b_t, scale_a=inv_a, scale_b=inv_b, bias=bias, out_dtype=out_dtype,
                            use_fast_accum=fast_accum)


class Fp8LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, out_dtype, emulate):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        xq, x_inv = quantize(x2, "e4m3", emulate)
        wq, w_inv = quantize(weight, "e4m3", emulate)
        out = _mm(xq, wq.t(), x_inv, w_inv, out_dtype, emulate, bias, fast_accum=True)
        ctx.save_for_backward(xq, wq, x_inv, w_inv)
        ctx.x_dtype = x.dtype
        ctx.w_dtype = weight.dtype
        ctx.has_bias = bias is not None
        ctx.emulate = emulate
        ctx.x_shape = shape
        return out.reshape(*shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad_out):
        xq, wq, x_inv, w_inv = ctx.saved_tensors
        emulate = ctx.emulate
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        gq, g_inv = quantize(g2, "e5m2", emulate)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            # dX [M,K] = dY [M,N] @ W [N,K]; _scaled_mm wants the second operand column-major
            grad_x = _mm(gq, wq.t().contiguous().t(), g_inv, w_inv, ctx.x_dtype, emulate)
            grad_x = grad_x.reshape(ctx.x_shape)
        if ctx.needs_input_grad[1]:
            # dW [N,K] = dY^T [N,M] @ X [M,K]
            grad_w = _mm(gq.t().contiguous(), xq.t().contiguous().t(), g_inv, x_inv, ctx.w_dtype, emulate)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.float().sum(0).to(ctx.w_dtype)
        return grad_x, grad_w, grad_b, None, None


class Fp8Linear(nn.Module):
    """Drop-in for nn.Linear that shares the original Parameters (same init, same optimizer order)."""

    def __init__(self, linear, out_dtype=torch.bfloat16, emulate=False):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.out_dtype = out_dtype
        self.emulate = emulate

    def forward(self, x):
        return Fp8LinearFunction.apply(x, self.weight, self.bias, self.out_dtype, self.emulate)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s, fp8=%s" % (
            self.in_features, self.out_features, self.bias is not None,
            "emulated-e4m3/e5m2" if self.emulate else "e4m3/e5m2 per-tensor dynamic")


def convert_to_torch_fp8(model, plan, out_dtype=torch.bfloat16, emulate=False):
    """Swap the linears the plan marks 'convert' (see te_convert.plan_conversion)."""
    converted = []
    for item in plan:
        if item["action"] != "convert" or item["kind"] != "linear":
            continue
        parent, attr = parent_module(model, item["name"])
        old = getattr(parent, attr)
        setattr(parent, attr, Fp8Linear(old, out_dtype=out_dtype, emulate=emulate))
        converted.append(item["name"])
    return converted
