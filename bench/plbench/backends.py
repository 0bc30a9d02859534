"""The benchmark's backends as data: which library each needs, its recipe and its label. One source of truth for the
command line (parse), the gate (which can run here) and the runner (how to convert)."""
from collections import OrderedDict

from .protocol import BenchError

# family: bf16 | te | torchao | torch-fp8. te: recipe (None = --te-recipe), fused (te.LayerNormLinear/-MLP) and
# attention (te-fp8: te.DotProductAttention with the recipe's fp8_dpa; te-bf16: te.DotProductAttention in BF16).
BACKENDS = OrderedDict([
    ("bf16", {"family": "bf16",
              "label": "BF16 baseline: torch.autocast(bfloat16), fp32 master weights, AdamW"}),
    ("te", {"family": "te", "recipe": None, "fused": False,
            "label": "Transformer Engine FP8: te.Linear/te.LayerNorm/te.RMSNorm under TE autocast (recipe per "
                     "--te-recipe), lm-head and embedding in BF16"}),
    ("te-delayed", {"family": "te", "recipe": "delayed", "fused": False,
                    "label": "Transformer Engine FP8, DelayedScaling(HYBRID, amax_history_len=16): te.Linear/"
                             "te.LayerNorm/te.RMSNorm, lm-head and embedding in BF16"}),
    ("te-current", {"family": "te", "recipe": "current", "fused": False,
                    "label": "Transformer Engine FP8, Float8CurrentScaling(HYBRID): te.Linear/te.LayerNorm/"
                             "te.RMSNorm, lm-head and embedding in BF16"}),
    ("te-fused", {"family": "te", "recipe": None, "fused": True,
                  "label": "Transformer Engine FP8, fused blocks: norm+QKV as te.LayerNormLinear, norm+MLP as "
                           "te.LayerNormMLP (recipe per --te-recipe), lm-head and embedding in BF16"}),
    ("te-fused-delayed", {"family": "te", "recipe": "delayed", "fused": True,
                          "label": "Transformer Engine FP8, DelayedScaling(HYBRID, amax_history_len=16), fused "
                                   "blocks (te.LayerNormLinear + te.LayerNormMLP), lm-head and embedding in BF16"}),
    ("te-dpa", {"family": "te", "recipe": "delayed", "fused": False, "attention": "te-fp8",
                "label": "Transformer Engine FP8, DelayedScaling(HYBRID, fp8_dpa=True): te.Linear/te.RMSNorm/"
                         "te.LayerNorm and te.DotProductAttention in FP8, lm-head and embedding in BF16"}),
    ("te-fused-dpa", {"family": "te", "recipe": "delayed", "fused": True, "attention": "te-fp8",
                      "label": "Transformer Engine FP8, DelayedScaling(HYBRID, fp8_dpa=True): fused blocks and "
                               "te.DotProductAttention in FP8, lm-head and embedding in BF16"}),
    ("te-fused-tedpa-bf16", {"family": "te", "recipe": "delayed", "fused": True, "attention": "te-bf16",
                             "label": "Transformer Engine FP8 GEMMs (DelayedScaling, fused blocks) with "
                                      "te.DotProductAttention in BF16: isolates TE's attention kernel from FP8 attention"}),
    ("torchao-tensorwise", {"family": "torchao", "recipe": "tensorwise",
                            "label": "torchao float8 training, tensorwise recipe (convert_to_float8_training), "
                                     "lm-head and embedding in BF16"}),
    ("torchao-rowwise", {"family": "torchao", "recipe": "rowwise",
                         "label": "torchao float8 training, rowwise recipe (convert_to_float8_training), "
                                  "lm-head and embedding in BF16"}),
    ("torch-fp8", {"family": "torch-fp8",
                   "label": "torch-fp8, the no-dependency fallback (not Transformer Engine, not torchao): "
                            "nn.Linear on torch._scaled_mm, per-tensor dynamic scaling, E4M3 forward / E5M2 "
                            "gradients, lm-head and embedding in BF16"}),
    # a measurement aid, not a choice users make first: listed last so the view leads with BF16 and the FP8 backends
    ("bf16-tedpa", {"family": "bf16", "attention": "te-bf16",
                    "label": "BF16 with te.DotProductAttention (Transformer Engine's attention kernel, BF16): the "
                             "baseline for the te-*dpa* backends' attention, no FP8 anywhere"}),
])

ALIASES = {"fp8": "torch-fp8", "torchfp8": "torch-fp8", "torch_fp8": "torch-fp8", "torchao": "torchao-tensorwise",
           "te-fp8": "te", "te_delayed": "te-delayed", "te_current": "te-current", "te_fused": "te-fused",
           "te_dpa": "te-dpa", "te_fused_delayed": "te-fused-delayed", "te_fused_dpa": "te-fused-dpa"}

# `--backends all`: every backend, each library's variants once.
ALL = tuple(BACKENDS)


def family(name):
    return BACKENDS[name]["family"]


def needs_te(name):
    """The te family, and any backend that runs te.DotProductAttention."""
    return family(name) == "te" or bool(BACKENDS[name].get("attention"))


def label(name):
    return BACKENDS.get(name, {}).get("label", name)


def parse(text, te_installed):
    """The requested backends in order, without duplicates. 'auto' = bf16 + te if TE imports, else torch-fp8."""
    text = text.strip().lower()
    if text == "auto":
        return ["bf16", "te" if te_installed else "torch-fp8"]
    if text == "all":
        return list(ALL)
    out = []
    for b in text.split(","):
        b = b.strip()
        if not b:
            continue
        b = ALIASES.get(b, b)
        if b not in BACKENDS:
            raise BenchError("usage", "unknown backend %r" % b, "backends: %s (or auto, all)" % ",".join(BACKENDS))
        if b not in out:
            out.append(b)
    if not out:
        raise BenchError("usage", "no backend given", "for example --backends bf16,te,torch-fp8")
    return out


def te_recipe_kind(name, te_recipe_arg, compiling):
    """'delayed' or 'current' for a te-family backend: the variant's own, else --te-recipe (auto: current when
    compiling, since TE >= 2.16 raises for DelayedScaling inside a compiled region, else delayed)."""
    kind = BACKENDS[name].get("recipe") or te_recipe_arg
    if kind == "auto":
        kind = "current" if compiling else "delayed"
    return kind
