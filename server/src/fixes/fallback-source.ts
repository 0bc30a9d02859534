/**
 * The Python source of the FP8 fallback (DESIGN.md, "The FP8 fallback module"): one module per project, or an inline
 * block for a file outside any workspace folder; both are this text between the same marker lines. What it provides,
 * under stable names that generated code imports:
 *
 * - `fp8_available()`: (True, "") when FP8 runs here, else (False, reason); TE imported, the GPU supports FP8 and the
 *   selected recipe (MXFP8 needs SM 10.x, block scaling SM 9.0 + CUDA 12.9, NVFP4 SM 10). Logs the mode once.
 * - `fp8_linear` / `fp8_layernorm` / `fp8_rmsnorm`: te.* when FP8 runs, torch.nn otherwise; fp8_linear keeps torch.nn
 *   for a layer whose shape cannot train in FP8 (in % 16, and out % 16 for the backward's input-gradient GEMM) and
 *   pads the rows of an input whose leading dimensions do not multiply to a multiple of 16 (8 for the forward GEMM;
 *   the backward's weight-gradient GEMM reduces over the rows, and a GEMM's reduced dimension must be a multiple of
 *   16). Both te.Linear factories cast an input whose dtype is not the layer's parameters' to theirs and the output
 *   back, outside torch.autocast: te.Linear requires them equal there (TE's "Data types for parameters must match"),
 *   where torch.nn under autocast would cast. `fp8_parallel_linear` builds the source library's tensor-parallel layer
 *   (a callable) when FP8 does not run, so the shards stay the same. `fp8_linear_from` / `fp8_layernorm_from` /
 *   `fp8_rmsnorm_from` build a layer whose class is chosen at run time (`norm_layer(dim)` from a parameter,
 *   `linear_layer(d, h)` after `linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear`): te.*
 *   when that class is the one the code was checked with (`fp8_is_class`), the class as written otherwise.
 * - `fp8_autocast_context()`: where FP8 runs, TE autocast with the recipe inside BF16 torch.autocast (TE autocast alone
 *   leaves every non-TE op in the parameters' FP32: 0.57x of BF16 on nanoGPT, nested 1.24x); inside the script's own
 *   autocast (`inside_autocast=True`, or one active) TE autocast only. Elsewhere BF16 torch.autocast, or nothing inside
 *   the script's own.
 * - `TE_LINEAR`, `TE_LAYERNORM`, `TE_RMSNORM`: the te.* classes (a class nothing is an instance of when TE is absent),
 *   for isinstance tests and optimizer parameter groups.
 * - `fp8_checkpoint(function, *args, **kwargs)`: torch.utils.checkpoint.checkpoint, through TE's checkpoint where FP8
 *   runs, so the backward's recompute runs the te.* layers in FP8 again (PL701).
 * - `fp8_checkpoint_sequential(functions, segments, input, ...)`: torch's checkpoint_sequential, its segments through
 *   fp8_checkpoint where FP8 runs (TE has no sequential form); torch's as called elsewhere.
 * - `fp8_for_compile(model, keep=())` (the module only, not the inline block): for a model a training script compiles
 *   (PL306), torchao's convert_to_float8_training where the GPU has FP8 and torchao is installed, the lm-head and
 *   layers too small or off the multiple-of-16 rule kept in BF16; the model unchanged elsewhere; the mode logged.
 */
import type { PrecisionLensSettings } from '../../../common/settings';
import { FUSE_FACTORIES, LIKE_FACTORY, WRAPPER_END_MARKER, WRAPPER_MARKER } from '../analysis/known';
import { recipeExpression, recipeLabel } from './te-api';

export const CONTEXT_FACTORY = 'fp8_autocast_context';

/** Factory per te.* class. */
export const FACTORY_BY_TE_CLASS: Record<string, string> = { Linear: 'fp8_linear', LayerNorm: 'fp8_layernorm', RMSNorm: 'fp8_rmsnorm' };

/** The stable names of the te.* classes, per te.* class. */
export const TE_CLASS_NAME: Record<string, string> = { Linear: 'TE_LINEAR', LayerNorm: 'TE_LAYERNORM', RMSNorm: 'TE_RMSNORM' };

export const PARALLEL_FACTORY = 'fp8_parallel_linear';

/** Fuses a norm into the te.Linear it feeds (te.LayerNormLinear where FP8 runs), and the stable name of that class. */
export const FUSE_FACTORY = FUSE_FACTORIES.norm;
export const FUSED_CLASS_NAME = 'TE_LAYERNORM_LINEAR';
/** Fuses a norm and the MLP it feeds (te.Linears) into te.LayerNormMLP where FP8 runs. */
export const FUSE_MLP_FACTORY = FUSE_FACTORIES.mlp;

/** The factory for transformers' Conv1D (a Linear whose weight is stored [in, out]): te.Linear in a wrapper that keeps
 *  Conv1D's checkpoint keys and layout where FP8 runs, the Conv1D as written elsewhere. */
export const CONV1D_FACTORY = 'fp8_conv1d_or';
/** Wraps the model a training script hands to torch.compile: torchao's float8 training where FP8 runs. */
export const COMPILE_FACTORY = 'fp8_for_compile';
/** torch's scaled_dot_product_attention, run by TE's fused attention where FP8 runs (te.DotProductAttention, BF16). */
export const ATTENTION_FACTORY = 'fp8_attention';
/** torch.utils.checkpoint.checkpoint, through TE's checkpoint where FP8 runs (its recompute runs in FP8 again, PL701). */
export const CHECKPOINT_FACTORY = 'fp8_checkpoint';
/** torch.utils.checkpoint.checkpoint_sequential, its segments through fp8_checkpoint where FP8 runs (PL701). */
export const CHECKPOINT_SEQUENTIAL_FACTORY = 'fp8_checkpoint_sequential';
/** A Hugging Face model whose gradient checkpointing goes through fp8_checkpoint (PL701). */
export const HF_CHECKPOINT_FACTORY = 'fp8_gradient_checkpointing';

/** Factories that build te.* where FP8 runs and the model's own class (behind a lambda) elsewhere, per layer kind. */
export const KEEP_CLASS_FACTORY: Record<'linear' | 'layernorm' | 'rmsnorm', string> = {
  linear: PARALLEL_FACTORY, layernorm: 'fp8_layernorm_or', rmsnorm: 'fp8_rmsnorm_or',
};

/**
 * Factories for a norm whose class is passed in (`norm_layer(dim)`, the parameter defaulting to a norm class that
 * converts): te.* where FP8 runs and the class passed is that default (or torch.nn's), the class as written otherwise.
 */
/** A Linear returned by a function the file does not show (an imported make_linear): te.Linear with its weights where FP8 runs. */
export const LINEAR_LIKE_FACTORY = LIKE_FACTORY;

export const CLASS_PARAM_FACTORY: Record<'linear' | 'layernorm' | 'rmsnorm', string> = {
  linear: 'fp8_linear_from', layernorm: 'fp8_layernorm_from', rmsnorm: 'fp8_rmsnorm_from',
};

/** Every name the fallback defines for other code (what a file may import from the module). */
export const FALLBACK_EXPORTS = [
  'fp8_available', 'fp8_linear', 'fp8_layernorm', 'fp8_rmsnorm', PARALLEL_FACTORY, 'fp8_layernorm_or', 'fp8_rmsnorm_or',
  'fp8_linear_from', 'fp8_layernorm_from', 'fp8_rmsnorm_from', 'fp8_is_class', LINEAR_LIKE_FACTORY, CONV1D_FACTORY, CONTEXT_FACTORY, 'FP8_RECIPE',
  'TE_LINEAR', 'TE_LAYERNORM', 'TE_RMSNORM', FUSE_FACTORY, FUSE_MLP_FACTORY, FUSED_CLASS_NAME, 'te', 'te_recipe',
  COMPILE_FACTORY, ATTENTION_FACTORY, CHECKPOINT_FACTORY, CHECKPOINT_SEQUENTIAL_FACTORY, HF_CHECKPOINT_FACTORY,
] as const;

export interface FallbackSourceOptions {
  api: 'modern' | 'legacy';
  settings: PrecisionLensSettings;
  /** The local name TE is bound to (`te`, or `te_pytorch` where the file uses `te` for something else). */
  teName: string;
  /** Inline block: the file's own bare TE imports, now guarded in the try block, and the names they bind. */
  movedImports?: string[];
  movedNames?: string[];
  /** The file imports torch / contextlib / sys already (inline block). */
  hasTorch?: boolean;
  hasContextlib?: boolean;
  /** A module of its own: a docstring and the standard imports. */
  module?: boolean;
}

function header(o: FallbackSourceOptions): string {
  const intro = o.module
    ? `"""FP8 through Transformer Engine where this machine supports it, BF16 everywhere else (no TE, no GPU, A100...).

Written by Precision Lens once for the project; every file that builds FP8 layers or runs FP8 autocast imports it, so
the project has one FP8 state and logs its mode once. Build layers with fp8_linear / fp8_layernorm / fp8_rmsnorm, run
the forward pass and the loss under \`with ${CONTEXT_FACTORY}():\` and call backward() after the block. TE_LINEAR,
TE_LAYERNORM and TE_RMSNORM name the te.* classes for isinstance tests and optimizer parameter groups. A script that
compiles its model hands it over as torch.compile(${COMPILE_FACTORY}(model)): torchao's float8 training, which compiles.
"""
`
    : `# FP8 through Transformer Engine where this machine supports it, BF16 everywhere else (no TE, no GPU, A100...).
# fp8_linear / fp8_layernorm / fp8_rmsnorm build te.* layers or their torch.nn twins; run the forward pass and the
# loss under \`with ${CONTEXT_FACTORY}():\` and call backward() after the block.
`;
  const std = [o.hasContextlib ? '' : 'import contextlib\n', 'import os\n', 'import sys\n'].join('');
  return `${WRAPPER_MARKER}\n${intro}${std}\n${o.hasTorch ? '' : 'import torch\n\n'}`;
}

function tryImport(o: FallbackSourceOptions): string {
  const te = o.teName;
  const lines = [`import transformer_engine.pytorch as ${te}`, 'from transformer_engine.common import recipe as te_recipe', ...(o.movedImports ?? [])]
    .filter((l, i, all) => all.indexOf(l) === i);
  const none = [te, 'te_recipe', ...(o.movedNames ?? [])].filter((n, i, all) => all.indexOf(n) === i);
  return `try:
${lines.map((l) => `    ${l}`).join('\n')}
except ImportError as _pl_error:  # not installed, or a build that does not match this torch/CUDA
${none.map((n) => `    ${n} = None`).join('\n')}
    _PL_TE_MISSING = (
        "Transformer Engine not installed" if isinstance(_pl_error, ModuleNotFoundError)
        else "Transformer Engine failed to import: %s" % _pl_error
    )
else:
    _PL_TE_MISSING = None
`;
}

function support(o: FallbackSourceOptions): string {
  const te = o.teName;
  const check = o.api === 'modern'
    ? `        ok, reason = ${te}.is_fp8_available(return_reason=True)`
    : '        from transformer_engine.pytorch.fp8 import check_fp8_support\n\n        ok, reason = check_fp8_support()';
  return `
# The recipe, defined once: every FP8 autocast region uses it unless given another.
FP8_RECIPE = ${recipeExpression(o.settings, 'te_recipe')} if te_recipe is not None else None
_PL_FP8_STATE = None
_PL_RECIPE_STATE = {}
_PL_KEPT = []


class _PLNotTE(torch.nn.Module):
    """Stands in for a te.* class where Transformer Engine is absent: no module is an instance of it."""


if ${te} is not None:
    TE_LINEAR, TE_LAYERNORM = ${te}.Linear, ${te}.LayerNorm
    TE_RMSNORM = getattr(${te}, "RMSNorm", _PLNotTE)
    ${FUSED_CLASS_NAME} = getattr(${te}, "LayerNormLinear", _PLNotTE)
else:
    TE_LINEAR = TE_LAYERNORM = TE_RMSNORM = ${FUSED_CLASS_NAME} = _PLNotTE


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
            if getattr(${te}, check, None) is not None:
                ok, reason = getattr(${te}, check)(return_reason=True)
            else:
                ok, reason = needs(torch.cuda.get_device_capability()), why
        except Exception as err:  # a driver or runtime mismatch must not stop training: fall back to BF16
            ok, reason = False, "recipe check failed: %s" % err
        _PL_RECIPE_STATE[name] = (bool(ok), "" if ok else "%s is not supported here: %s" % (name, reason or why))
    return _PL_RECIPE_STATE[name]


def _pl_fp8_support():
    if ${te} is None:
        if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
            return False, _PL_TE_MISSING + " (this GPU supports FP8: pip install transformer_engine[pytorch])"
        return False, _PL_TE_MISSING
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
${check}
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
            label = "${recipeLabel(o.settings)}" if label == "${o.settings.te.recipe}" else label
            print("Running in FP8 mode on %s (sm_%d%d), recipe %s" % (torch.cuda.get_device_name(), major, minor, label), flush=True)
        else:
            print("Running in BF16 fallback: %s" % _PL_FP8_STATE[1], flush=True)
    return _PL_FP8_STATE
`;
}

function factories(o: FallbackSourceOptions): string {
  const te = o.teName;
  const modern = o.api === 'modern';
  // TE >= 2.9 names the norms' dtype argument `dtype` (params_dtype is a deprecated alias); older TE only knows params_dtype.
  const normKwargs = modern ? '_pl_norm_kwargs(kwargs)' : 'kwargs';
  const normHelper = modern
    ? `

def _pl_norm_kwargs(kwargs):
    """te.LayerNorm / te.RMSNorm (TE >= 2.9) take dtype= where te.Linear takes params_dtype=."""
    kwargs = dict(kwargs)
    if "params_dtype" in kwargs:
        kwargs["dtype"] = kwargs.pop("params_dtype")
    return kwargs
`
    : '';
  return `

def _pl_torch_kwargs(kwargs):
    """te.* keyword arguments as torch.nn takes them: params_dtype is dtype there, TE-only options have no twin."""
    out = {k: v for k, v in kwargs.items() if k in ("device", "dtype")}
    if kwargs.get("params_dtype") is not None:
        out["dtype"] = kwargs["params_dtype"]
    return out
${normHelper}

def _pl_caller():
    """file:line of the code that called the factory (where the layer is built), for the log."""
    try:
        frame = sys._getframe(2)
        return "%s:%d" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno)
    except (AttributeError, ValueError):
        return "?"


def _pl_shape_problem(in_features, out_features):
    """Why te.Linear(in_features, out_features) cannot train in FP8, or "" when it can: every GEMM's reduced dimension
    must be a multiple of 16, in_features in the forward GEMM and out_features in the backward's input-gradient GEMM."""
    if not isinstance(in_features, int) or not isinstance(out_features, int):
        return ""
    bad = ["in_features %d is not a multiple of 16" % in_features] if in_features % 16 else []
    if out_features % 16:
        bad.append("out_features %d is not a multiple of 16" % out_features)
    return ", ".join(bad)


def _pl_param_dtype(module):
    for p in module.parameters():
        return p.dtype if p.is_floating_point() else None
    source = module.__dict__.get("_pl_weights_of")  # a fused te.LayerNormMLP reads its parameters from its Linears
    return None if source is None else _pl_param_dtype(source)


def _pl_pad_rows(module, args):
    """Before te.Linear's forward. Outside torch.autocast te.Linear computes in its input's dtype and requires its
    parameters to have it (an FP32 model fed BF16 activations, or the reverse, fails; torch.nn under autocast casts):
    cast the input to the parameters' dtype, the output back after. FP8 GEMMs need the input's rows (its leading
    dimensions multiplied) to be a multiple of 8 in the forward GEMM and of 16 in the backward's weight-gradient GEMM,
    which reduces over them: pad the rows with zeros to 16."""
    x = args[0] if args else None
    if not torch.is_tensor(x) or x.dim() == 0 or x.shape[-1] == 0:
        return None
    dtype = _pl_param_dtype(module)
    cast = x.is_floating_point() and dtype is not None and x.dtype != dtype and not torch.is_autocast_enabled()
    rows = x.numel() // x.shape[-1]
    if rows % 16 == 0 and not cast:
        return None
    module._pl_rows = (tuple(x.shape[:-1]), rows if rows % 16 else None, x.dtype if cast else None)
    if cast:
        x = x.to(dtype)
    if rows % 16:
        flat = x.reshape(rows, x.shape[-1])
        x = torch.cat([flat, flat.new_zeros((-rows) % 16, x.shape[-1])])
    return (x,) + tuple(args[1:])


def _pl_unpad_rows(module, args, output):
    if getattr(module, "_pl_rows", None) is None:
        return None
    shape, rows, dtype = module._pl_rows
    module._pl_rows = None

    def back(y):
        if rows is not None:  # padded
            y = y[:rows].reshape(shape + (y.shape[-1],))
        return y.to(dtype) if dtype is not None and y.is_floating_point() else y
    if isinstance(output, tuple):  # return_bias=True: (output, bias)
        return (back(output[0]),) + tuple(t.to(dtype) if dtype is not None and torch.is_tensor(t) else t for t in output[1:])
    return back(output)


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
            return _pl_guard_rows(${te}.Linear(in_features, out_features, bias=bias, **kwargs))
        _PL_KEPT.append("%s Linear(%s, %s): %s" % (_pl_caller(), in_features, out_features, problem))
    return torch.nn.Linear(in_features, out_features, bias=bias, **_pl_torch_kwargs(kwargs))


def ${LINEAR_LIKE_FACTORY}(module):
    """te.Linear holding module's own initialised weight and bias when FP8 runs here, module is a plain torch.nn.Linear
    (not a subclass: a LoRA, quantized or reparametrised layer keeps its class) without hooks, and the shape allows
    it; else module as it is. For a Linear built by a function this file does not show (an imported make_linear):
    whatever that function initialised is kept, and anything else it returns is left alone."""
    if not fp8_available()[0] or type(module) is not torch.nn.Linear or module._forward_hooks or module._forward_pre_hooks:
        return module
    problem = _pl_shape_problem(module.in_features, module.out_features)
    if problem:
        _PL_KEPT.append("%s Linear(%s, %s): %s" % (_pl_caller(), module.in_features, module.out_features, problem))
        return module
    layer = ${te}.Linear(module.in_features, module.out_features, bias=module.bias is not None, params_dtype=module.weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(module.weight)
        if module.bias is not None:
            layer.bias.copy_(module.bias)
    return _pl_guard_rows(layer)


def _pl_linear_from(cls, classes, args, kwargs):
    """(in_features, out_features, bias, te keyword arguments) when cls(*args, **kwargs) builds a plain Linear of one of
    classes (its sizes, bias, device and dtype only), else None: then the class is built as written."""
    if not fp8_is_class(cls, *classes):
        return None
    _, args, kw = _pl_call_arguments(cls, args, kwargs)
    names = ("in_features", "out_features", "bias")
    if len(args) > len(names) or any(n in kw for n in names[:len(args)]):
        return None
    kw.update(zip(names, args))
    if "in_features" not in kw or "out_features" not in kw or set(kw) - set(names) - {"device", "dtype"}:
        return None
    out = {("params_dtype" if k == "dtype" else k): v for k, v in kw.items() if k not in names and v is not None}
    return kw["in_features"], kw["out_features"], kw.get("bias", True), out


def fp8_linear_from(cls, default, *args, **kwargs):
    """te.Linear when FP8 runs here, cls (a class chosen at run time, e.g. partial(nn.Conv2d, kernel_size=1) if
    use_conv else nn.Linear) is default, the class the code was checked with, or torch.nn.Linear, built plainly, and
    the shape allows it; else cls(*args, **kwargs) as written. Also a torch.nn.Linear passed **kwargs whose names the
    code does not show: they are checked here, and a Linear built with others is kept and logged."""
    plan = _pl_linear_from(cls, (default, torch.nn.Linear), args, kwargs) if fp8_available()[0] else None
    if plan is None:
        if fp8_available()[0] and fp8_is_class(cls, default, torch.nn.Linear):
            _, _, kw = _pl_call_arguments(cls, args, kwargs)
            _PL_KEPT.append("%s Linear: built as written, with arguments te.Linear is not given here (%s)" % (_pl_caller(), ", ".join(sorted(kw)) or "positional"))
        return cls(*args, **kwargs)
    in_features, out_features, bias, te_kwargs = plan
    problem = _pl_shape_problem(in_features, out_features)
    if problem:
        _PL_KEPT.append("%s Linear(%s, %s): %s" % (_pl_caller(), in_features, out_features, problem))
        return cls(*args, **kwargs)
    return _pl_guard_rows(${te}.Linear(in_features, out_features, bias=bias, **te_kwargs))


def ${PARALLEL_FACTORY}(fallback, in_features, out_features, bias=True, **kwargs):
    """te.Linear(parallel_mode=...) when FP8 runs here and the shape allows it, else fallback(): the library's own layer."""
    if fp8_available()[0]:
        problem = _pl_shape_problem(in_features, out_features)
        if not problem:
            return _pl_guard_rows(${te}.Linear(in_features, out_features, bias=bias, **kwargs))
        _PL_KEPT.append("%s parallel Linear(%s, %s): %s" % (_pl_caller(), in_features, out_features, problem))
    return fallback()


def fp8_layernorm(normalized_shape, eps=1e-5, **kwargs):
    """te.LayerNorm when FP8 runs here, else torch.nn.LayerNorm."""
    if fp8_available()[0]:
        return ${te}.LayerNorm(normalized_shape, eps=eps, **${normKwargs})
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
        return ${te}.RMSNorm(normalized_shape, eps=eps, **${normKwargs})
    zero_centered = bool(kwargs.get("zero_centered_gamma", False))
    if hasattr(torch.nn, "RMSNorm") and not zero_centered:
        return torch.nn.RMSNorm(normalized_shape, eps=eps, **_pl_torch_kwargs(kwargs))
    return _PLRMSNorm(normalized_shape, eps=eps, zero_centered_gamma=zero_centered, **_pl_torch_kwargs(kwargs))


def _pl_keep_weight_name(layer, name):
    """A te.* norm standing in for a class that names its weight parameter name (torchtune's and k-diffusion's RMSNorm:
    scale). te.* names it weight and its kernels read self.weight, so the parameter stays weight and state-dict hooks
    keep the checkpoint key: state_dict() saves prefix + "weight" as prefix + name, and load_state_dict() (strict or
    not; torch.distributed.checkpoint and safetensors' load_model call it too) reads prefix + name into weight and
    reports a missing one under that name. A state_dict with either key loads. layer.<name> reads the weight (an
    alias, not a second parameter). A loader that sets parameters by name without load_state_dict finds no parameter
    name on the te.* norm and reports it, rather than leaving the weight at its initial value. No name: the layer
    as it is."""
    if not name:
        return layer
    import functools
    layer._register_state_dict_hook(functools.partial(_pl_named_save, name))
    layer._register_load_state_dict_pre_hook(functools.partial(_pl_named_load, name), with_module=True)
    layer.register_load_state_dict_post_hook(functools.partial(_pl_named_loaded, name))
    layer.__dict__[name] = layer.weight
    return layer


# _pl_keep_weight_name's hooks, module-level (with functools.partial) so that a model holding them pickles.
def _pl_named_save(name, module, state, prefix, local_metadata):
    if prefix + "weight" in state:
        state[prefix + name] = state.pop(prefix + "weight")
    return state


def _pl_named_load(name, module, state, prefix, *args):
    module.__dict__["_pl_prefix"] = prefix
    if prefix + name in state and prefix + "weight" not in state:
        state[prefix + "weight"] = state.pop(prefix + name)


def _pl_named_loaded(name, module, incompatible):
    prefix = module.__dict__.pop("_pl_prefix", "")
    keys = incompatible.missing_keys
    keys[:] = [prefix + name if k == prefix + "weight" else k for k in keys]
    module.__dict__[name] = module.weight  # load_state_dict(assign=True) replaces the parameter


def fp8_layernorm_or(fallback, normalized_shape, eps=1e-5, when=True, weight_name=None, **kwargs):
    """te.LayerNorm when FP8 runs here and when holds, else fallback(): the model's own norm as written. when is a
    flag the code decides at run time that te.LayerNorm needs (bias=config.bias: te.LayerNorm always has a bias);
    weight_name is the name the class gives its weight, a checkpoint key the te.* norm then keeps (see
    _pl_keep_weight_name)."""
    if when and fp8_available()[0]:
        return _pl_keep_weight_name(${te}.LayerNorm(normalized_shape, eps=eps, **${normKwargs}), weight_name)
    return fallback()


def fp8_rmsnorm_or(fallback, normalized_shape, eps=1e-5, when=True, weight_name=None, **kwargs):
    """te.RMSNorm when FP8 runs here and when holds, else fallback(): the model's own norm as written. when is a
    flag the code decides at run time that te.RMSNorm needs (elementwise_affine=affine: te.RMSNorm always has a weight);
    weight_name is the name the class gives its weight, a checkpoint key the te.* norm then keeps (see
    _pl_keep_weight_name)."""
    if when and fp8_available()[0]:
        return _pl_keep_weight_name(${te}.RMSNorm(normalized_shape, eps=eps, **${normKwargs}), weight_name)
    return fallback()


class _PLConv1D(torch.nn.Module):
    """te.Linear standing in for transformers' Conv1D(nf, nx) (GPT-2's c_attn, c_proj, c_fc): Conv1D stores its weight
    [nx, nf] ([in, out]) and computes x @ weight + bias, te.Linear stores [out, in]. The te.Linear is the child
    .linear, so its parameters are prefix + "linear.weight" ([nf, nx]) and "linear.bias". State-dict hooks keep
    Conv1D's checkpoint: state_dict() saves prefix + "weight" transposed back to [nx, nf], prefix + "bias" and
    te.Linear's prefix + "_extra_state" (the key every te.Linear conversion adds); load_state_dict() (strict or not;
    torch.distributed.checkpoint and safetensors' load_model call it too) reads them into .linear, transposing the
    weight, and reports a missing one under Conv1D's key. A loader that sets parameters by name without
    load_state_dict finds no parameter prefix + "weight" here (only linear.weight) and reports it: a square weight
    (embed x embed) can never load untransposed without an error. .weight and .bias read Conv1D's view of them (the
    weight transposed, [nx, nf], in the te.Linear's storage: an in-place init or copy writes through it); assigning
    either raises."""

    def __init__(self, nf, nx, linear):
        super().__init__()
        self.nf, self.nx = nf, nx
        self.linear = linear
        self._register_state_dict_hook(_pl_conv1d_save)
        self._register_load_state_dict_pre_hook(_pl_conv1d_load, with_module=True)
        self.register_load_state_dict_post_hook(_pl_conv1d_loaded)

    @property
    def weight(self):
        return self.linear.weight.t()

    @property
    def bias(self):
        return self.linear.bias

    def forward(self, x):
        return self.linear(x)


def _pl_conv1d_save(module, state, prefix, local_metadata):
    inner = prefix + "linear."
    for key in [k for k in state if k.startswith(inner)]:
        value = state.pop(key)
        name = key[len(inner):]
        state[prefix + name] = value.t().contiguous() if name == "weight" else value
    return state


def _pl_conv1d_load(module, state, prefix, *args):
    module.__dict__["_pl_prefix"] = prefix
    for name in ("weight", "bias", "_extra_state"):
        if prefix + name in state and prefix + "linear." + name not in state:
            value = state.pop(prefix + name)
            state[prefix + "linear." + name] = value.t().contiguous() if name == "weight" and torch.is_tensor(value) else value


def _pl_conv1d_loaded(module, incompatible):
    prefix = module.__dict__.pop("_pl_prefix", "")
    inner = prefix + "linear."
    keys = incompatible.missing_keys
    keys[:] = [prefix + k[len(inner):] if k.startswith(inner) else k for k in keys]


def ${CONV1D_FACTORY}(fallback, nf, nx):
    """te.Linear(nx, nf) inside _PLConv1D (Conv1D's checkpoint keys and weight layout kept, see there) when FP8 runs
    here and the shape allows it, else fallback(): the Conv1D as written."""
    if fp8_available()[0]:
        problem = _pl_shape_problem(nx, nf)
        if not problem:
            return _PLConv1D(nf, nx, _pl_guard_rows(${te}.Linear(nx, nf)))
        _PL_KEPT.append("%s Conv1D(%s, %s): %s" % (_pl_caller(), nf, nx, problem))
    return fallback()


def _pl_call_arguments(cls, args, kwargs):
    """(class, positional, keyword arguments) that cls(*args, **kwargs) builds with, under its functools.partials."""
    import functools
    args, kw = tuple(args), {}
    while isinstance(cls, functools.partial):
        args, kw = tuple(cls.args) + args, {**(cls.keywords or {}), **kw}
        cls = cls.func
    kw.update(kwargs)
    return cls, args, kw


def fp8_is_class(cls, *classes):
    """Whether cls, a class passed in (norm_layer=...) or a functools.partial of one, is one of classes."""
    import functools
    while isinstance(cls, functools.partial):
        cls = cls.func
    return any(c is not None and cls is c for c in classes)


def _pl_norm_from(cls, classes, args, kwargs, default_eps):
    """(normalized_shape, eps, te keyword arguments) when cls(*args, **kwargs) builds a plain norm of one of classes
    (its shape, eps, device and dtype only; weight and bias on), else None: then the class is built as written."""
    import inspect
    if not fp8_is_class(cls, *classes):
        return None
    base, args, kw = _pl_call_arguments(cls, args, kwargs)
    if len(args) != 1:
        return None
    eps = kw.pop("eps", None)
    if eps is None:
        try:
            eps = inspect.signature(base).parameters["eps"].default
        except (KeyError, TypeError, ValueError):
            eps = default_eps
    if not isinstance(eps, (int, float)):  # nn.RMSNorm's eps=None: the input dtype's epsilon, not te's fixed one
        return None
    for flag in ("elementwise_affine", "affine", "bias"):
        if kw.pop(flag, True) is not True:
            return None
    if set(kw) - {"device", "dtype"}:
        return None
    out = {("params_dtype" if k == "dtype" else k): v for k, v in kw.items() if v is not None}
    return args[0], eps, out


def fp8_layernorm_from(cls, default, *args, **kwargs):
    """te.LayerNorm when FP8 runs here and cls (a norm class passed in) is default, the class the code was checked
    with, or torch.nn.LayerNorm, built plainly; else cls(*args, **kwargs) as written."""
    plan = _pl_norm_from(cls, (default, torch.nn.LayerNorm), args, kwargs, 1e-5) if fp8_available()[0] else None
    if plan is None:
        return cls(*args, **kwargs)
    shape, eps, kwargs = plan
    return ${te}.LayerNorm(shape, eps=eps, **${normKwargs})


def fp8_rmsnorm_from(cls, default, *args, **kwargs):
    """te.RMSNorm when FP8 runs here and cls (a norm class passed in) is default, the class the code was checked
    with, or torch.nn.RMSNorm, built plainly; else cls(*args, **kwargs) as written."""
    plan = _pl_norm_from(cls, (default, getattr(torch.nn, "RMSNorm", None)), args, kwargs, None) if fp8_available()[0] else None
    if plan is None:
        return cls(*args, **kwargs)
    shape, eps, kwargs = plan
    return ${te}.RMSNorm(shape, eps=eps, **${normKwargs})
`;
}

function fusion(o: FallbackSourceOptions): string {
  const te = o.teName;
  return `

def _pl_pass_through(x, *args, **kwargs):
    """The forward of a norm fused into the te.LayerNormLinear it feeds: that layer normalises its input itself."""
    return x


def _pl_absorbed(name, read):
    """A te.* module's attribute read at every call from the modules it absorbed (read(self, parts)); while TE builds
    the module (nothing absorbed yet), its own parameter, or what TE set it to."""
    def get(self):
        parts = self.__dict__.get("_pl_parts")
        if parts is None:
            if name in self.__dict__.get("_pl_set", {}):
                return self.__dict__["_pl_set"][name]
            raise AttributeError(name)  # torch.nn.Module.__getattr__: the parameter TE registered
        return read(self, parts)

    def put(self, value):  # TE's own self.layer_norm_bias = None for RMSNorm, self.fc1_bias = torch.Tensor() without bias
        self.__dict__.setdefault("_pl_set", {})[name] = value
    return property(get, put)


def _pl_norm_bias(self, parts):
    return parts["norm"].bias if self.normalization == "LayerNorm" else None


def _pl_stacked(name):
    """fc1's weight or bias as te.LayerNormMLP holds it: for a gated activation the up projection's stacked under the
    activated one's (TE applies the activation to the first half and multiplies by the second)."""
    def read(self, parts):
        if name == "bias" and not self.use_bias:
            return self.__dict__.get("_pl_set", {}).get("fc1_bias")
        first, up = getattr(parts["fc1"], name), parts["up"]
        return first if up is None else torch.cat([first, getattr(up, name)], 0)
    return read


if ${te} is not None and hasattr(${te}, "LayerNormLinear"):
    class _PLNormLinear(${te}.LayerNormLinear):
        """te.LayerNormLinear whose norm weight and bias stay in the norm module it absorbed, which keeps them, their
        checkpoint keys and their optimizer group: they are read from that module at every call."""
        layer_norm_weight = _pl_absorbed("layer_norm_weight", lambda self, parts: parts["norm"].weight)
        layer_norm_bias = _pl_absorbed("layer_norm_bias", _pl_norm_bias)
else:
    _PLNormLinear = None

if ${te} is not None and hasattr(${te}, "LayerNormMLP"):
    class _PLNormMLP(${te}.LayerNormMLP):
        """te.LayerNormMLP over a norm and the Linears of the MLP it feeds, which keep their parameters, checkpoint keys
        and optimizer groups: the norm's weight and bias, fc1's (stacked with the up projection's) and fc2's are read
        from those modules at every call."""
        layer_norm_weight = _pl_absorbed("layer_norm_weight", lambda self, parts: parts["norm"].weight)
        layer_norm_bias = _pl_absorbed("layer_norm_bias", _pl_norm_bias)
        fc1_weight = _pl_absorbed("fc1_weight", _pl_stacked("weight"))
        fc1_bias = _pl_absorbed("fc1_bias", _pl_stacked("bias"))
        fc2_weight = _pl_absorbed("fc2_weight", lambda self, parts: parts["fc2"].weight)
        fc2_bias = _pl_absorbed("fc2_bias", lambda self, parts: parts["fc2"].bias if self.use_bias else self.__dict__.get("_pl_set", {}).get("fc2_bias"))
else:
    _PLNormMLP = None


def _pl_fusable_norm(norm):
    """(normalization, eps, zero_centered_gamma) when norm is a plain te.* or torch.nn LayerNorm / RMSNorm over the last
    dimension with its weight (and a LayerNorm's bias), which TE's fused modules compute exactly; else None."""
    weight = getattr(norm, "weight", None)
    if norm._forward_hooks or norm._forward_pre_hooks or weight is None or weight.dim() != 1:
        return None
    kind = type(norm)
    if kind is ${te}.LayerNorm or kind is getattr(${te}, "RMSNorm", None):
        return ("LayerNorm" if kind is ${te}.LayerNorm else "RMSNorm"), norm.eps, bool(getattr(norm, "zero_centered_gamma", False))
    if kind is torch.nn.LayerNorm and norm.bias is not None:
        return "LayerNorm", norm.eps, False
    if kind is getattr(torch.nn, "RMSNorm", None) and norm.eps is not None:
        return "RMSNorm", norm.eps, False
    return None


def _pl_plain_linear(layer):
    return type(layer) is ${te}.Linear and getattr(layer, "parallel_mode", None) is None and not getattr(layer, "return_bias", False)


def _pl_absorb(fused, parts, dropped):
    """fused reads the parameters named in dropped from parts at every call (its own, allocated by TE, are dropped);
    the norm passes its input through."""
    for name in dropped:
        fused._parameters.pop(name, None)
        getattr(fused, "param_init_meta", {}).pop(name, None)
    fused.__dict__["_pl_parts"] = parts
    parts["norm"].forward = _pl_pass_through
    _pl_guard_rows(fused)
    return fused


def ${FUSE_FACTORY}(norm, module, attr=None, returns="module"):
    """module.<attr> (module itself without attr), a te.Linear whose input is only norm's output, becomes one
    te.LayerNormLinear that normalises and casts to FP8 in one pass, and norm passes its input through: the model
    computes the same, its parameters and checkpoint keys stay where they were. Where FP8 does not run, or the layers
    are not a plain norm and a plain te.Linear of matching size and dtype, both stay as built. Returns module, or norm
    with returns="norm" (the fix wraps whichever of the two is built later)."""
    kept = norm if returns == "norm" else module
    linear = getattr(module, attr) if attr else module
    # Returning the norm, the fused layer must take the Linear's place in module: without attr it would have none.
    if _PLNormLinear is None or not fp8_available()[0] or not _pl_plain_linear(linear) or (returns == "norm" and not attr):
        return kept
    plan = _pl_fusable_norm(norm)
    if plan is None or norm.weight.shape[0] != linear.in_features or norm.weight.dtype != linear.weight.dtype \\
            or norm.weight.device != linear.weight.device:
        return kept
    normalization, eps, zero_centered = plan
    bias = linear.bias is not None and linear.bias.numel() > 0
    fused = _PLNormLinear(linear.in_features, linear.out_features, eps=eps, bias=bias, normalization=normalization,
                          zero_centered_gamma=zero_centered, params_dtype=linear.weight.dtype, device=linear.weight.device)
    with torch.no_grad():
        fused.weight.copy_(linear.weight)
        if bias:
            fused.bias.copy_(linear.bias)
    _pl_absorb(fused, {"norm": norm}, ("layer_norm_weight", "layer_norm_bias"))
    if attr is None:
        return fused
    setattr(module, attr, fused)
    return kept


def _pl_te_activation(act, gated):
    """TE's name for the activation module act (a config's choice, ACT2FN[...]) where TE computes the same function:
    SiLU, ReLU, GELU's tanh approximation (TE's gelu; transformers' gelu_pytorch_tanh, gelu_new, gelu_fast write the
    same formula), x * sigmoid(1.702 x) (TE's qgelu, transformers' quick_gelu); else None (the exact GELU among them)."""
    if act is None or getattr(act, "_forward_hooks", None) or getattr(act, "_forward_pre_hooks", None):
        return None
    name = type(act).__name__
    if name in ("SiLU", "SiLUActivation"):
        base = "silu"
    elif name == "ReLU":
        base = "relu"
    elif name in ("PytorchGELUTanh", "GELUTanh", "NewGELUActivation", "FastGELUActivation") \\
            or (name == "GELU" and getattr(act, "approximate", None) == "tanh"):
        base = "gelu"
    elif name == "QuickGELUActivation":
        base = "qgelu"
    else:
        return None
    return {"silu": "swiglu", "relu": "reglu", "gelu": "geglu", "qgelu": "qgeglu"}[base] if gated else base


def _pl_mlp_forward(module, x):
    """The forward of an MLP fused into te.LayerNormMLP: the fused module, then the MLP's own dropout if it had one.
    Where one of its Linears was replaced after the fusion (an adapter, a swapped layer), the fused module would read
    the old one: the norm (which passes its input through) and the MLP's own forward then run as written instead."""
    fused = module.__dict__["_pl_mlp"]
    parts = fused.__dict__["_pl_parts"]
    names = module.__dict__["_pl_mlp_names"]
    if any(name and getattr(module, name, None) is not parts[key] for key, name in names.items()):
        norm = parts["norm"]
        return type(module).forward(module, type(norm).forward(norm, x))
    y = fused(x)
    dropout = module.__dict__.get("_pl_mlp_dropout")
    return getattr(module, dropout)(y) if dropout else y


def ${FUSE_MLP_FACTORY}(norm, module, fc1, fc2, up=None, activation=None, dropout=None, returns="module", activation_from=None):
    """module's forward, proved by Precision Lens to compute [module.<dropout>](fc2(act(fc1(x)) [* up(x)])) on norm's
    output alone, becomes one te.LayerNormMLP where FP8 runs (norm, FP8 casts and activation fused; TE's "swiglu" is
    silu(first half) * second half, so fc1's weight is stacked over up's; activation_from names the module attribute
    whose activation the config chose, mapped to TE's name here): the same computation, and every parameter
    stays in the layer that had it, under its checkpoint key and in its optimizer group (the fused module reads them at
    each call; fc1 and up are stacked then). Where FP8 does not run, or the layers are not a plain norm and plain
    te.Linears of matching sizes, dtype and device, everything stays as built. Returns module, or norm with
    returns="norm" (the fix wraps whichever of the two is built later)."""
    kept = norm if returns == "norm" else module
    if _PLNormMLP is None or not fp8_available()[0]:
        return kept
    if activation_from is not None:
        activation = _pl_te_activation(getattr(module, activation_from, None), gated=up is not None)
    if activation is None:
        return kept
    first, second = getattr(module, fc1, None), getattr(module, fc2, None)
    upper = getattr(module, up, None) if up else None
    linears = [l for l in (first, upper, second) if l is not None]
    plan = _pl_fusable_norm(norm)
    if plan is None or len(linears) != (3 if up else 2) or not all(_pl_plain_linear(l) for l in linears):
        return kept
    hidden, ffn = first.in_features, first.out_features
    biases = {l.bias is not None and l.bias.numel() > 0 for l in linears}
    sizes_ok = norm.weight.shape[0] == hidden and (second.in_features, second.out_features) == (ffn, hidden) \\
        and (upper is None or (upper.in_features, upper.out_features) == (hidden, ffn))
    if len(biases) != 1 or not sizes_ok or len({(p.dtype, p.device) for p in [norm.weight] + [l.weight for l in linears]}) != 1 \\
            or (dropout and not isinstance(getattr(module, dropout, None), torch.nn.Dropout)):
        return kept
    normalization, eps, zero_centered = plan
    try:
        fused = _PLNormMLP(hidden, ffn, eps=eps, bias=biases.pop(), normalization=normalization, activation=activation,
                           zero_centered_gamma=zero_centered, params_dtype=first.weight.dtype, device=first.weight.device)
    except (NotImplementedError, AssertionError, ValueError):  # an activation this TE does not have
        return kept
    _pl_absorb(fused, {"norm": norm, "fc1": first, "up": upper, "fc2": second},
               ("layer_norm_weight", "layer_norm_bias", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"))
    fused.__dict__["_pl_weights_of"] = first
    import functools
    module.__dict__["_pl_mlp"], module.__dict__["_pl_mlp_dropout"] = fused, dropout  # not a child: no new checkpoint key
    module.__dict__["_pl_mlp_names"] = {"fc1": fc1, "up": up, "fc2": fc2}
    module.forward = functools.partial(_pl_mlp_forward, module)
    return kept
`;
}

/**
 * fp8_attention: a drop-in for torch.nn.functional.scaled_dot_product_attention, [batch, heads, seq, head_dim] in and
 * out. Where FP8 runs it hands the call to te.DotProductAttention (cuDNN's fused attention, in BF16: FP8 attention did
 * not pay on the H200, bench/results/h200 2026-12-02), which took 55-61 ms where torch's flash attention took 98 ms on
 * the 7B slice; the same softmax(q k^T * scale) v with the same causal mask. Whatever TE's kernel does not take the
 * same way (a mask, dropout, FP32 inputs, a CPU tensor, unequal lengths under a causal mask, a head size off its rules,
 * a compiled region, which fuses torch's own) goes to torch's function with the arguments as given, the reason logged
 * once.
 */
function attention(o: FallbackSourceOptions): string {
  const te = o.teName;
  return `

_PL_ATTENTION = {}
_PL_ATTENTION_LOGGED = set()


def _pl_compiling():
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return compiler.is_compiling()
    dynamo = getattr(torch, "_dynamo", None)
    return bool(dynamo is not None and hasattr(dynamo, "is_compiling") and dynamo.is_compiling())


def _pl_attention_problem(q, k, v, attn_mask, dropout_p, is_causal, kwargs):
    """Why te.DotProductAttention would not compute this call as torch's function does, or None."""
    if ${te} is None or not hasattr(${te}, "DotProductAttention"):
        return "this Transformer Engine has no DotProductAttention"
    if _pl_compiling():
        return "a compiled region (torch.compile fuses torch's attention)"
    if attn_mask is not None:
        return "an attention mask"
    if dropout_p:
        return "attention dropout %s" % dropout_p
    if set(kwargs) - {"enable_gqa"}:
        return "arguments %s" % ", ".join(sorted(set(kwargs) - {"enable_gqa"}))
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "inputs of %d dimensions (TE takes batch, heads, seq, head_dim)" % q.dim()
    if q.dtype not in (torch.bfloat16, torch.float16) or k.dtype != q.dtype or v.dtype != q.dtype:
        return "%s inputs (TE's kernel takes BF16 or FP16: run it under autocast)" % q.dtype
    b, h, s, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[-1] != d or h % k.shape[1]:
        return "query %s, key %s and value %s shapes" % (tuple(q.shape), tuple(k.shape), tuple(v.shape))
    if k.shape[1] != h and not kwargs.get("enable_gqa"):
        return "fewer key heads than query heads without enable_gqa"
    if is_causal and k.shape[2] != s:
        return "a causal mask over unequal query and key lengths"
    if d % 8 or d > 256:
        return "head size %d (TE's fused attention takes multiples of 8 up to 256)" % d
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return "tensors not on a GPU"
    return None


def ${ATTENTION_FACTORY}(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    """torch.nn.functional.scaled_dot_product_attention(q, k, v, ...), q, k and v [batch, heads, seq, head_dim], run by
    Transformer Engine's fused attention (te.DotProductAttention, BF16) where FP8 runs: the same result, a faster
    kernel. Elsewhere, and for whatever that kernel does not take the same way (a mask, dropout, FP32 inputs, a CPU
    tensor, a compiled region), torch's function with the arguments as given; the reason is logged once."""
    problem = _pl_attention_problem(q, k, v, attn_mask, dropout_p, is_causal, kwargs) if fp8_available()[0] else ""
    if problem is None:
        b, h, s, d = q.shape
        key = (h, k.shape[1], d, bool(is_causal), scale, q.device)
        core = _PL_ATTENTION.get(key)
        if core is None:
            if not _PL_ATTENTION:
                print("FP8: attention through te.DotProductAttention (fused, BF16), %d heads of %d" % (h, d), flush=True)
            core = _PL_ATTENTION[key] = ${te}.DotProductAttention(
                h, d, num_gqa_groups=k.shape[1], attention_dropout=0.0, qkv_format="bshd",
                attn_mask_type="causal" if is_causal else "no_mask", softmax_scale=scale)
        # bshd views of the bhsd tensors (no copy where the caller transposed from bshd, as most models do).
        out = core(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.view(b, s, h, d).transpose(1, 2)
    if problem and problem not in _PL_ATTENTION_LOGGED:
        _PL_ATTENTION_LOGGED.add(problem)
        print("FP8: attention stays torch's scaled_dot_product_attention here: %s" % problem, flush=True)
    if scale is not None:
        kwargs["scale"] = scale
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                                            is_causal=is_causal, **kwargs)
`;
}

/**
 * fp8_checkpoint: a drop-in for torch.utils.checkpoint.checkpoint (PL701). torch's recomputes the checkpointed forward
 * during the backward, outside TE's autocast: the te.* layers recompute in BF16. Where FP8 runs it is TE's checkpoint,
 * which enters the forward's FP8 autocast and recipe again for the recompute; its keywords are torch's (use_reentrant,
 * context_fn, determinism_check, debug) except preserve_rng_state, as TE restores the RNG states itself. Elsewhere
 * torch's checkpoint, called as written.
 */
function checkpoint(o: FallbackSourceOptions): string {
  const te = o.teName;
  return `

def ${CHECKPOINT_FACTORY}(function, *args, **kwargs):
    """torch.utils.checkpoint.checkpoint(function, *args, **kwargs), through Transformer Engine's checkpoint where FP8
    runs: its recompute in the backward runs the te.* layers in FP8 with the forward's recipe, where torch's runs them
    outside the FP8 autocast, in BF16. Elsewhere torch's checkpoint, called as written."""
    te_checkpoint = getattr(getattr(${te}, "distributed", None), "checkpoint", None) if ${te} is not None else None
    if te_checkpoint is not None and fp8_available()[0]:
        kwargs.pop("preserve_rng_state", None)  # TE restores the CPU and CUDA RNG states itself
        return te_checkpoint(function, *args, **kwargs)
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
    return torch_checkpoint(function, *args, **kwargs)


def ${CHECKPOINT_SEQUENTIAL_FACTORY}(functions, segments, input, use_reentrant=None, **kwargs):
    """torch.utils.checkpoint.checkpoint_sequential(functions, segments, input, ...), its segments checkpointed with
    ${CHECKPOINT_FACTORY} where FP8 runs (the same split: every segment but the last checkpointed, the last run as is), so
    their recompute runs the te.* layers in FP8 again. Elsewhere torch's checkpoint_sequential, called as written."""
    if use_reentrant is not None:
        kwargs["use_reentrant"] = use_reentrant
    te_checkpoint = getattr(getattr(${te}, "distributed", None), "checkpoint", None) if ${te} is not None else None
    if te_checkpoint is None or not fp8_available()[0]:
        from torch.utils.checkpoint import checkpoint_sequential
        return checkpoint_sequential(functions, segments, input, **kwargs)
    if isinstance(functions, torch.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)

    def run(part):
        def forward(x):
            for f in part:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = ${CHECKPOINT_FACTORY}(run(functions[start:end + 1]), input, **kwargs)
    return run(functions[end + 1:])(input)


def _pl_checkpoint_through_fp8(model):
    """Each module's _gradient_checkpointing_func that is torch's checkpoint (Hugging Face's, bound with its
    arguments by gradient_checkpointing_enable) becomes fp8_checkpoint with the same arguments."""
    import functools
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
    for module in model.modules():
        func = module.__dict__.get("_gradient_checkpointing_func")
        if isinstance(func, functools.partial) and func.func is torch_checkpoint:
            module._gradient_checkpointing_func = functools.partial(${CHECKPOINT_FACTORY}, *func.args, **func.keywords)
        elif func is torch_checkpoint:
            module._gradient_checkpointing_func = ${CHECKPOINT_FACTORY}


def _pl_gradient_checkpointing_enable(model, *args, **kwargs):
    out = type(model).gradient_checkpointing_enable(model, *args, **kwargs)
    _pl_checkpoint_through_fp8(model)
    return out


def ${HF_CHECKPOINT_FACTORY}(model):
    """model (a Hugging Face model) with its gradient checkpointing through ${CHECKPOINT_FACTORY}: TE's checkpoint
    where FP8 runs, whose recompute runs the te.* layers in FP8 again, where torch's (which Hugging Face installs)
    recomputes them outside the FP8 autocast, in BF16; torch's elsewhere. It applies to what is enabled already and
    to every later model.gradient_checkpointing_enable(...) (Trainer's included). Returns model."""
    import functools
    if callable(getattr(type(model), "gradient_checkpointing_enable", None)):
        model.gradient_checkpointing_enable = functools.partial(_pl_gradient_checkpointing_enable, model)
    _pl_checkpoint_through_fp8(model)
    return model
`;
}

/**
 * fp8_for_compile: FP8 for a model the script compiles, through torchao's float8 training (tensorwise dynamic scaling),
 * whose casts torch.compile fuses into the neighbouring kernels; te.* modules run eager between graphs there (measured
 * on an H200: data/compiled-ab-h200.json). The layers are chosen when it runs, from the model itself: the lm-head (a
 * Linear whose weight is an embedding's, or whose output is a vocabulary) and layers below torchao's own size filter
 * or off the % 16 rule stay in BF16, as do names given in keep. Parameters stay the same objects (an optimizer built
 * before keeps working) and checkpoint keys do not change.
 */
function compiled(): string {
  return `

def _pl_torchao_float8():
    """(convert_to_float8_training, "") where torchao's float8 training imports, else (None, reason)."""
    try:
        from torchao.float8 import convert_to_float8_training
    except ImportError as err:
        return None, "torchao's float8 training is not installed (pip install torchao): %s" % err
    except Exception as err:  # a build for another torch
        return None, "torchao failed to import: %s" % err
    return convert_to_float8_training, ""


def _pl_compile_keep(model, keep):
    """name -> why, for the nn.Linear layers of model that stay in BF16."""
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    tables = {id(m.weight) for m in embeddings}
    vocab = {m.num_embeddings for m in embeddings if m.num_embeddings >= 1000}
    linears = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    # The lm-head by its size: the last Linear with a vocabulary's outputs (a block's may match when width == vocab).
    head = next((name for name, m in reversed(linears) if m.out_features in vocab), None)
    kept = {}
    for name, m in linears:
        if name in keep or name.split(".")[-1] in keep:
            kept[name] = "kept by the caller"
        elif id(m.weight) in tables:
            kept[name] = "lm-head tied to the token embedding"
        elif name == head:
            kept[name] = "lm-head: %d outputs, the vocabulary" % m.out_features
        elif m.in_features % 16 or m.out_features % 16:
            kept[name] = "%d x %d is off the FP8 rule (multiples of 16)" % (m.in_features, m.out_features)
        elif min(m.in_features, m.out_features) < 1024 or (m.in_features <= 4096 and m.out_features <= 1024):
            kept[name] = "%d x %d is too small for FP8 to pay" % (m.in_features, m.out_features)
    return kept


def ${COMPILE_FACTORY}(model, keep=()):
    """model converted to torchao's float8 training where FP8 runs (a GPU of compute capability 8.9 or more, torchao
    installed), to hand to torch.compile: model = torch.compile(${COMPILE_FACTORY}(model)). Elsewhere model as it is,
    in BF16 under the script's autocast. The lm-head, layers off the multiple-of-16 rule and layers too small to gain
    stay in BF16 (embeddings are not Linear layers), and so do the layers named in keep. Logs the mode and the layers
    kept. Returns model."""
    if not torch.cuda.is_available():
        reason = "no CUDA device"
    elif torch.cuda.get_device_capability() < (8, 9):
        major, minor = torch.cuda.get_device_capability()
        reason = "%s (sm_%d%d) has no FP8 GEMMs (compute capability 8.9 or more)" % (torch.cuda.get_device_name(), major, minor)
    else:
        convert, reason = _pl_torchao_float8()
        kept = _pl_compile_keep(model, set(keep)) if convert is not None else {}
        linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        if convert is not None and len(kept) == len(linears):
            reason = "no Linear layer that FP8 pays for (%s)" % ("; ".join("%s: %s" % kv for kv in sorted(kept.items())[:4]) or "none")
        elif convert is not None:
            convert(model, module_filter_fn=lambda module, fqn: fqn not in kept)
            print("Running in FP8 mode for torch.compile: torchao float8 training (tensorwise), %d of %d Linear layers"
                  % (len(linears) - len(kept), len(linears)), flush=True)
            if kept:
                named = ["%s (%s)" % kv for kv in sorted(kept.items())]
                more = " and %d more" % (len(named) - 8) if len(named) > 8 else ""
                print("FP8: %d layer(s) kept in BF16: %s%s" % (len(kept), "; ".join(named[:8]), more), flush=True)
            return model
    print("Running in BF16 fallback (torch.compile): %s" % reason, flush=True)
    return model
`;
}

function context(o: FallbackSourceOptions): string {
  const te = o.teName;
  const autocast = o.api === 'modern'
    ? `${te}.autocast(enabled=enabled, recipe=recipe)`
    : `${te}.fp8_autocast(enabled=enabled, fp8_recipe=recipe)`;
  return `

def _pl_bf16_autocast():
    if torch.cuda.is_available():
        # GPUs without BF16 (V100, T4) get FP16 autocast rather than an error.
        return torch.autocast("cuda", dtype=torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _pl_autocast_active():
    """Whether a torch.autocast region is open here (the script's own: nanoGPT's \`with ctx:\`)."""
    try:
        return torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4 takes no device type
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


@contextlib.contextmanager
def _pl_nested(outer, inner):
    with outer, inner:
        yield


def ${CONTEXT_FACTORY}(enabled=True, recipe=None, inside_autocast=False):
    """Where FP8 runs: TE autocast with the recipe INSIDE BF16 torch.autocast. TE autocast alone changes only te.*
    modules: attention, norms, the lm-head and the loss would run in the parameters' dtype (FP32 in mixed-precision
    training), slower than BF16. Inside an autocast the script already opened (one active when this is called, or
    inside_autocast=True: \`with ctx, ${CONTEXT_FACTORY}(inside_autocast=True):\`) it adds TE autocast only and the
    script's autocast keeps its dtype. Elsewhere BF16 torch.autocast, or nothing inside the script's own autocast.
    enabled=False keeps a region out of FP8."""
    outer = inside_autocast or _pl_autocast_active()
    if fp8_available()[0]:
        if _PL_KEPT:
            print("FP8: %d layer(s) kept in high precision by the FP8 shape rule: %s" % (len(_PL_KEPT), "; ".join(_PL_KEPT)), flush=True)
            del _PL_KEPT[:]
        recipe = recipe or FP8_RECIPE
        ok, reason = _pl_recipe_support(recipe)
        if ok or not enabled:
            fp8 = ${autocast}
            return fp8 if outer or not enabled else _pl_nested(_pl_bf16_autocast(), fp8)
        if not _PL_RECIPE_STATE.get(("logged", reason)):
            _PL_RECIPE_STATE[("logged", reason)] = True
            print("FP8 autocast falls back to BF16: %s" % reason, flush=True)
    elif not enabled:
        return contextlib.nullcontext()
    return contextlib.nullcontext() if outer else _pl_bf16_autocast()
${WRAPPER_END_MARKER}
`;
}

/** The fallback's Python source, from its first marker line to its last (a module of its own, or an inline block). */
export function fallbackSource(o: FallbackSourceOptions): string {
  // fp8_for_compile serves a training script's torch.compile call: the project's module has it, a model file's inline
  // block (a file outside any workspace folder) does not need it.
  return header(o) + tryImport(o) + support(o) + factories(o) + fusion(o) + attention(o) + checkpoint(o) + (o.module ? compiled() : '') + context(o);
}
