"""Which layers an FP8 backend converts, and the conversion to Transformer Engine modules.

Selection is shared by the `te` and `torch-fp8` backends:
- the lm-head and embeddings stay in high precision (found by name, by weight tying and by vocabulary size);
- linears must satisfy the FP8 GEMM shape rule (TE: in % 16 == 0 and out % 8 == 0; torch._scaled_mm: both % 16);
  the others are left alone and reported;
- LayerNorm/RMSNorm become te.LayerNorm/te.RMSNorm (TE runs norms in high precision; the swap keeps TE's fused
  kernels in play) unless they have no affine weight or no bias, which TE's modules cannot express.
The TE module namespace is passed in, so this logic is testable with a fake `te` where TE is not installed.
"""
import inspect

import torch
import torch.nn as nn

LM_HEAD_NAMES = ("lm_head", "output", "decoder", "output_projection", "output_layer", "embed_out")


def _is_rmsnorm(m):
    if hasattr(nn, "RMSNorm") and isinstance(m, nn.RMSNorm):
        return True
    return "rmsnorm" in type(m).__name__.lower() and isinstance(getattr(m, "weight", None), torch.Tensor)


def find_high_precision(model, extra=()):
    """{module name: reason} for modules every FP8 backend keeps in high precision."""
    keep = {}
    emb_weights = {}
    vocab = 0  # the largest embedding is the token embedding; positional tables are smaller
    for name, m in model.named_modules():
        if isinstance(m, nn.Embedding):
            keep[name] = "embedding (never FP8: TE has no embedding module; lookups are not GEMMs)"
            emb_weights[id(m.weight)] = name
            vocab = max(vocab, m.num_embeddings)
    for name, m in model.named_modules():
        if not isinstance(m, nn.Linear) and type(m).__name__ not in ("Fp8Linear",):
            continue
        w = getattr(m, "weight", None)
        last = name.rsplit(".", 1)[-1]
        if w is not None and id(w) in emb_weights:
            keep[name] = "lm-head (weights tied to the embedding %s): kept in BF16" % emb_weights[id(w)]
        elif last in LM_HEAD_NAMES:
            keep[name] = "lm-head (by name): kept in BF16, the last layer is precision-sensitive"
        elif vocab and getattr(m, "out_features", None) == vocab and m.out_features > getattr(m, "in_features", 0):
            keep[name] = "lm-head (output size equals the vocabulary, %d): kept in BF16" % m.out_features
    for name in extra:
        keep.setdefault(name, "kept in high precision by the workload")
    return keep


def plan_conversion(model, high_precision=None, rule="te", kinds=("linear", "layernorm", "rmsnorm")):
    """List of {"name", "kind", "in_features", "out_features", "action": convert|keep|skip, "reason"}."""
    if high_precision is None:
        high_precision = find_high_precision(model)
    plan = []
    for name, m in model.named_modules():
        if name == "":
            continue
        kind = None
        if type(m).__module__.startswith("transformer_engine"):
            continue
        if isinstance(m, nn.Linear):
            kind = "linear"
        elif isinstance(m, nn.LayerNorm):
            kind = "layernorm"
        elif _is_rmsnorm(m):
            kind = "rmsnorm"
        elif isinstance(m, nn.Embedding):
            kind = "embedding"
        if kind is None:
            continue
        item = {"name": name, "kind": kind, "in_features": None, "out_features": None}
        if kind == "linear":
            item["in_features"], item["out_features"] = m.in_features, m.out_features
        if name in high_precision:
            item.update(action="keep", reason=high_precision[name])
        elif kind == "embedding":
            item.update(action="keep", reason="embedding (never FP8)")
        elif kind not in kinds:
            item.update(action="keep", reason="%s is not converted by this backend" % kind)
        elif kind == "linear":
            i, o = m.in_features, m.out_features
            if rule == "te":
                ok = i % 16 == 0 and o % 8 == 0
                need = "in_features % 16 == 0 and out_features % 8 == 0"
            else:
                ok = i % 16 == 0 and o % 16 == 0
                need = "in_features % 16 == 0 and out_features % 16 == 0"
            if ok:
                item.update(action="convert", reason="FP8 GEMM")
            else:
                item.update(action="skip", reason="shape %dx%d breaks the FP8 GEMM rule (%s): left in BF16" % (o, i, need))
        elif kind == "layernorm":
            shape = tuple(m.normalized_shape)
            if len(shape) != 1:
                item.update(action="skip", reason="normalized_shape %s: te.LayerNorm normalizes the last dim only" % (shape,))
            elif not m.elementwise_affine or m.weight is None:
                item.update(action="skip", reason="no affine weight (elementwise_affine=False): te.LayerNorm always has weight and bias")
            elif getattr(m, "bias", None) is None:
                item.update(action="skip", reason="bias=False: te.LayerNorm always has a bias")
            else:
                item.update(action="convert", reason="te.LayerNorm")
        elif kind == "rmsnorm":
            w = getattr(m, "weight", None)
            if w is None or w.dim() != 1:
                item.update(action="skip", reason="no 1-D weight: te.RMSNorm needs one")
            else:
                item.update(action="convert", reason="te.RMSNorm")
        plan.append(item)
    return plan


def _accepts(cls, name):
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return False
    return name in sig.parameters or any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def _dtype_kwargs(cls, dtype, prefer=("params_dtype", "dtype")):
    for key in prefer:
        if _accepts(cls, key):
            return {key: dtype}
    return {}


def _device_kwargs(cls, device):
    return {"device": device} if _accepts(cls, "device") else {}


def make_te_module(te, m, kind):
    w = m.weight
    if kind == "linear":
        cls = te.Linear
        kw = {"bias": m.bias is not None}
        kw.update(_dtype_kwargs(cls, w.dtype, ("params_dtype", "dtype")))
        kw.update(_device_kwargs(cls, w.device))
        new = cls(m.in_features, m.out_features, **kw)
    elif kind == "layernorm":
        cls = te.LayerNorm
        kw = {"eps": m.eps}
        kw.update(_dtype_kwargs(cls, w.dtype, ("params_dtype", "dtype")))
        kw.update(_device_kwargs(cls, w.device))
        new = cls(m.normalized_shape[0], **kw)
    elif kind == "rmsnorm":
        cls = te.RMSNorm
        eps = getattr(m, "eps", None)
        if eps is None:
            eps = getattr(m, "variance_epsilon", 1e-5)
        kw = {"eps": eps if eps is not None else 1e-5}
        kw.update(_dtype_kwargs(cls, w.dtype, ("params_dtype", "dtype")))
        kw.update(_device_kwargs(cls, w.device))
        new = cls(w.shape[0], **kw)
    else:
        raise ValueError(kind)
    with torch.no_grad():
        new.weight.copy_(m.weight)
        if getattr(m, "bias", None) is not None and getattr(new, "bias", None) is not None:
            new.bias.copy_(m.bias)
        elif kind == "layernorm" and getattr(new, "bias", None) is not None:
            new.bias.zero_()
    new.train(m.training)
    return new


def convert_to_te(model, te, plan=None, high_precision=None):
    """Replace the modules the plan marks 'convert' with te.* modules (weights copied). Returns a report."""
    if plan is None:
        plan = plan_conversion(model, high_precision=high_precision, rule="te")
    converted, skipped, kept = [], [], []
    for item in plan:
        if item["action"] == "convert":
            if item["kind"] == "rmsnorm" and not hasattr(te, "RMSNorm"):
                skipped.append(dict(item, action="skip", reason="this Transformer Engine has no te.RMSNorm"))
                continue
            parent, attr = parent_module(model, item["name"])
            old = getattr(parent, attr)
            setattr(parent, attr, make_te_module(te, old, item["kind"]))
            converted.append(item)
        elif item["action"] == "skip":
            skipped.append(item)
        else:
            kept.append(item)
    return report(converted, skipped, kept)


def report(converted, skipped, kept):
    return {
        "converted": [{"name": i["name"], "kind": i["kind"], "in_features": i["in_features"],
                       "out_features": i["out_features"]} for i in converted],
        "skipped": [{"name": i["name"], "kind": i["kind"], "reason": i["reason"]} for i in skipped],
        "kept_high_precision": [{"name": i["name"], "kind": i["kind"], "reason": i["reason"]} for i in kept],
        "counts": {"converted": len(converted), "skipped": len(skipped), "kept_high_precision": len(kept)},
    }


def parent_module(model, name):
    """The module that holds the submodule at dotted `name`, and the attribute name there."""
    parts = name.split(".")
    mod = model
    for p in parts[:-1]:
        mod = getattr(mod, p)
    return mod, parts[-1]


def make_recipe(recipe_mod, kind):
    """kind: 'delayed' -> DelayedScaling(HYBRID, amax_history_len=16, 'max'); 'current' -> Float8CurrentScaling(HYBRID)."""
    fmt = recipe_mod.Format.HYBRID
    if kind == "delayed":
        return recipe_mod.DelayedScaling(fp8_format=fmt, amax_history_len=16, amax_compute_algo="max"), \
            "DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo='max')"
    if not hasattr(recipe_mod, "Float8CurrentScaling"):
        raise AttributeError("this Transformer Engine has no Float8CurrentScaling (needs TE >= 2.2)")
    return recipe_mod.Float8CurrentScaling(fp8_format=fmt), "Float8CurrentScaling(fp8_format=Format.HYBRID)"


def te_autocast(te, api, recipe):
    """The forward-pass FP8 region in this TE's API."""
    if api == "autocast":
        return te.autocast(enabled=True, recipe=recipe)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)
