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


# --------------------------------------------------------------------------------------------------------------
# Fused blocks: norm + QKV as te.LayerNormLinear, norm + MLP as te.LayerNormMLP

MLP_SHAPES = {  # attribute names of the two projections -> TE activation
    ("fc", "proj"): "gelu",   # GELU (tanh approximation, as TE's "gelu")
    ("w13", "w2"): "swiglu",  # gate and up fused in one weight, gate first (TE's swiglu: silu(first) * second)
}


def _norm_kind(m):
    if isinstance(m, nn.LayerNorm):
        if len(tuple(m.normalized_shape)) != 1 or m.weight is None or m.bias is None:
            return None, "a LayerNorm without weight and bias over the last dim cannot be fused"
        return "LayerNorm", None
    if _is_rmsnorm(m) and getattr(m, "weight", None) is not None and m.weight.dim() == 1:
        return "RMSNorm", None
    return None, "%s is neither LayerNorm nor RMSNorm" % type(m).__name__


def _mlp_kind(mlp):
    for (a, b), act in MLP_SHAPES.items():
        if isinstance(getattr(mlp, a, None), nn.Linear) and isinstance(getattr(mlp, b, None), nn.Linear):
            return act, getattr(mlp, a), getattr(mlp, b)
    return None, None, None


def _te_shape_ok(lin):
    return lin.in_features % 16 == 0 and lin.out_features % 8 == 0


def fusion_plan(model, high_precision):
    """[{"name", "action": fuse|skip, "reason", "norm", "activation"}] for every pre-norm block. A block is fused only
    when its class declares the pattern (`fusion_pattern = "pre-norm"`: x + attn(norm1(x)); x + mlp(norm2(x)), with
    attn.qkv the first GEMM), because only then is dropping norm1/norm2 into TE's fused modules the same function."""
    plan = []
    for name, m in model.named_modules():
        if getattr(type(m), "fusion_pattern", None) != "pre-norm":
            continue
        item = {"name": name, "action": "skip", "reason": None, "norm": None, "activation": None}
        plan.append(item)
        n1, why1 = _norm_kind(m.norm1)
        n2, why2 = _norm_kind(m.norm2)
        act, up, down = _mlp_kind(m.mlp)
        qkv = getattr(m.attn, "qkv", None)
        inner = [name + "." + s for s in ("norm1", "norm2", "attn.qkv")]
        if n1 is None or n2 is None or n1 != n2:
            item["reason"] = why1 or why2 or "the two norms differ"
        elif act is None or not isinstance(qkv, nn.Linear):
            item["reason"] = "no attn.qkv Linear or no (fc, proj) / (w13, w2) MLP"
        elif any(n in high_precision for n in inner) or any(n.startswith(name + ".mlp") for n in high_precision):
            item["reason"] = "a layer of the block is kept in high precision"
        elif not all(_te_shape_ok(l) for l in (qkv, up, down)):
            item["reason"] = "a GEMM breaks the FP8 shape rule"
        elif act == "swiglu" and up.out_features != 2 * down.in_features:
            item["reason"] = "the gate+up weight is not twice the MLP width"
        elif (up.bias is None) != (down.bias is None):
            item["reason"] = "te.LayerNormMLP has one bias setting for both GEMMs"
        else:
            item.update(action="fuse", reason="te.LayerNormLinear + te.LayerNormMLP", norm=n1, activation=act)
    return plan


def _copy(dst, src):
    with torch.no_grad():
        dst.copy_(src)


def fuse_block(te, blk, norm, activation):
    """Replace norm1 + attn.qkv by te.LayerNormLinear and norm2 + mlp by te.LayerNormMLP (weights copied)."""
    qkv, n1, n2 = blk.attn.qkv, blk.norm1, blk.norm2
    _, up, down = _mlp_kind(blk.mlp)
    w = qkv.weight
    common = dict(_dtype_kwargs(te.LayerNormLinear, w.dtype, ("params_dtype",)), **_device_kwargs(te.LayerNormLinear, w.device))
    lnl = te.LayerNormLinear(qkv.in_features, qkv.out_features, eps=n1.eps, bias=qkv.bias is not None,
                             normalization=norm, **common)
    _copy(lnl.layer_norm_weight, n1.weight)
    if norm == "LayerNorm":
        _copy(lnl.layer_norm_bias, n1.bias)
    _copy(lnl.weight, qkv.weight)
    if qkv.bias is not None:
        _copy(lnl.bias, qkv.bias)
    mlp = te.LayerNormMLP(up.in_features, down.in_features, eps=n2.eps, bias=up.bias is not None,
                          normalization=norm, activation=activation, **common)
    _copy(mlp.layer_norm_weight, n2.weight)
    if norm == "LayerNorm":
        _copy(mlp.layer_norm_bias, n2.bias)
    _copy(mlp.fc1_weight, up.weight)
    _copy(mlp.fc2_weight, down.weight)
    if up.bias is not None:
        _copy(mlp.fc1_bias, up.bias)
        _copy(mlp.fc2_bias, down.bias)
    for mod in (lnl, mlp):
        mod.train(blk.training)
    blk.attn.qkv, blk.mlp = lnl, mlp
    blk.norm1, blk.norm2 = nn.Identity(), nn.Identity()


def convert_to_te_fused(model, te, high_precision):
    """te-fused: fuse the blocks fusion_plan allows, then convert the remaining layers as convert_to_te does.
    Returns the report, with the fused blocks as kind layernorm_linear / layernorm_mlp and a `fusion` list."""
    fplan = fusion_plan(model, high_precision)
    fused = []
    if not (hasattr(te, "LayerNormLinear") and hasattr(te, "LayerNormMLP")):
        for item in fplan:
            item.update(action="skip", reason="this Transformer Engine has no LayerNormLinear / LayerNormMLP")
    for item in fplan:
        if item["action"] != "fuse":
            continue
        blk = model.get_submodule(item["name"])
        qkv, (_, up, down) = blk.attn.qkv, _mlp_kind(blk.mlp)
        fused.append({"name": item["name"] + ".attn.qkv", "kind": "layernorm_linear",
                      "in_features": qkv.in_features, "out_features": qkv.out_features})
        fused.append({"name": item["name"] + ".mlp", "kind": "layernorm_mlp",
                      "in_features": up.in_features, "out_features": down.in_features})
        fuse_block(te, blk, item["norm"], item["activation"])
    rep = convert_to_te(model, te, high_precision=high_precision)
    rep["converted"] = fused + rep["converted"]
    rep["counts"]["converted"] += len(fused)
    rep["fusion"] = [{"name": i["name"], "action": i["action"], "reason": i["reason"]} for i in fplan]
    return rep


def use_te_attention(model, te):
    """Every preset attention (a module with `core`, `heads`, `kv_heads`, `head_dim`) gets te.DotProductAttention as
    its kernel: causal, bshd layout, GQA native. Returns the names of the attentions changed."""
    if not hasattr(te, "DotProductAttention"):
        raise AttributeError("this Transformer Engine has no DotProductAttention")
    names = []
    for name, m in model.named_modules():
        if all(hasattr(m, a) for a in ("core", "heads", "kv_heads", "head_dim")):
            m.core = te.DotProductAttention(m.heads, m.head_dim, num_gqa_groups=m.kv_heads, qkv_format="bshd",
                                            attn_mask_type="causal")
            names.append(name)
    return names


def make_recipe(recipe_mod, kind, fp8_dpa=False):
    """kind: 'delayed' -> DelayedScaling(HYBRID, amax_history_len=16, 'max'); 'current' -> Float8CurrentScaling(HYBRID).
    fp8_dpa: te.DotProductAttention runs in FP8 too (its inputs cast to FP8, output in BF16: fp8_mha stays off)."""
    fmt = recipe_mod.Format.HYBRID
    extra, extra_text = ({"fp8_dpa": True}, ", fp8_dpa=True") if fp8_dpa else ({}, "")
    if kind == "delayed":
        return recipe_mod.DelayedScaling(fp8_format=fmt, amax_history_len=16, amax_compute_algo="max", **extra), \
            "DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo='max'%s)" % extra_text
    if not hasattr(recipe_mod, "Float8CurrentScaling"):
        raise AttributeError("this Transformer Engine has no Float8CurrentScaling (needs TE >= 2.2)")
    return recipe_mod.Float8CurrentScaling(fp8_format=fmt, **extra), \
        "Float8CurrentScaling(fp8_format=Format.HYBRID%s)" % extra_text


def te_autocast(te, api, recipe):
    """The forward-pass FP8 region in this TE's API."""
    if api == "autocast":
        return te.autocast(enabled=True, recipe=recipe)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)
