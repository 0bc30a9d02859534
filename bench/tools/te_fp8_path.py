#!/usr/bin/env python3
"""The generated code's FP8 path on real Transformer Engine, and the TE facts the rules state, checked on the GPU.

    python3 bench/tools/te_fp8_path.py path CONVERTED [--arch gpt|llama|vit] [--steps 60] [--json-out FILE]
    python3 bench/tools/te_fp8_path.py facts [--json-out FILE]

`path`: CONVERTED is a model file after the extension's own fixes (test/python/convert-example.ts: "Convert all
eligible layers", "Insert FP8 fallback wrapper"), or a folder holding one as model.py: GPT style (examples/gpt: class
GPT + GPTConfig), Llama style (test/fixtures/fixes/exec_llama.py: class Llama) or ViT style
(test/fixtures/facets/vit_site.py: class ViT, trained as a classifier on learnable synthetic images); `--arch` picks
one, else the file's classes do. The same file is trained twice from the same weights
on the same learnable batches: once with its fallback forced (BF16, torch.nn layers) and once on TE (the wrapper's
own mode line, its recipe). During the FP8 run every TE GEMM is recorded (operand types: Float8 tensors or not), and
the te.* modules' FP8 metadata is read afterwards (recipe, amax history / scales, quantizer types). Loading the BF16
weights into the TE model shows the `_extra_state` keys (PL501).

`facts`: PL305 (DelayedScaling with torch.compile, autocast outside and inside the compiled function), PL110 (the
error for a bad shape, eager and compiled), PL501 (strict loading across TE and torch.nn), MXFP8 on Hopper, the
default init of te.Linear and the default recipe. Each check prints one line "FACT name: outcome".
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.nn as nn


def log(*a):
    print(*a, flush=True)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------------------------------------------
# Which GEMMs ran in FP8

class GemmRecorder(object):
    """Wraps general_gemm where TE's modules call it; counts calls whose operands are TE quantized (FP8) tensors."""

    MODULES = ("transformer_engine.pytorch.module.linear", "transformer_engine.pytorch.module.layernorm_linear",
               "transformer_engine.pytorch.module.layernorm_mlp")

    def __init__(self):
        from transformer_engine.pytorch.quantized_tensor import QuantizedTensorStorage
        self.qtype = QuantizedTensorStorage
        self.calls = {"fp8": 0, "high_precision": 0}
        self.operand_types = {}
        self.saved = []

    def _wrap(self, fn):
        def wrapped(*args, **kwargs):
            ops = args[:2]
            kind = "fp8" if ops and all(isinstance(o, self.qtype) for o in ops) else "high_precision"
            self.calls[kind] += 1
            key = "/".join(type(o).__name__ for o in ops)
            self.operand_types[key] = self.operand_types.get(key, 0) + 1
            return fn(*args, **kwargs)
        return wrapped

    def __enter__(self):
        for name in self.MODULES:
            mod = sys.modules.get(name) or importlib.import_module(name)
            if hasattr(mod, "general_gemm"):
                self.saved.append((mod, mod.general_gemm))
                mod.general_gemm = self._wrap(mod.general_gemm)
        return self

    def __exit__(self, *exc):
        for mod, fn in self.saved:
            mod.general_gemm = fn
        return False


def te_metadata(model):
    """Per te.* module: the recipe it last ran with, FP8 flag, amax/scale (DelayedScaling) or quantizer types."""
    out = []
    for name, m in model.named_modules():
        if not type(m).__module__.startswith("transformer_engine.pytorch.module"):
            continue
        item = {"name": name, "type": type(m).__name__, "fp8": bool(getattr(m, "fp8", False))}
        meta = getattr(m, "fp8_meta", None) or {}
        rec = meta.get("recipe")
        item["recipe"] = type(rec).__name__ if rec is not None else None
        fwd = meta.get("scaling_fwd")
        if fwd is not None and hasattr(fwd, "amax_history"):
            item["amax_history_max"] = float(fwd.amax_history.abs().max())
            item["scale_min"] = float(fwd.scale.min())
            item["scale_max"] = float(fwd.scale.max())
        q = getattr(m, "quantizers", None) or {}
        item["quantizers_fwd"] = sorted({type(x).__name__ for x in q.get("scaling_fwd", []) if x is not None})
        out.append(item)
    return out


# ----------------------------------------------------------------------------------------------------------------
# path

def batches(vocab, batch, seq, n, seed):
    """Learnable: t[i+1] = (31 t[i] + 7 + noise(0..3)) mod vocab (as the benchmark's presets)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        t = torch.empty(batch, seq + 1, dtype=torch.long)
        t[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
        noise = torch.randint(0, 4, (batch, seq), generator=g)
        for i in range(seq):
            t[:, i + 1] = (t[:, i] * 31 + 7 + noise[:, i]) % vocab
        out.append((t[:, :-1].contiguous().cuda(), t[:, 1:].contiguous().cuda()))
    return out


def image_batches(classes, batch, image, n, seed):
    """Learnable images: a fixed random prototype per class plus noise; the label is the class."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(classes, 3, image, image, generator=g)
    out = []
    for _ in range(n):
        y = torch.randint(0, classes, (batch,), generator=g)
        x = protos[y] + 0.5 * torch.randn(batch, 3, image, image, generator=g)
        out.append((x.cuda(), y.cuda()))
    return out


def lm_loss(model, batch):
    return model(*batch)[1]


def cls_loss(model, batch):
    return torch.nn.functional.cross_entropy(model(batch[0]).float(), batch[1])


def arch_gpt(mod, a):
    cfg = mod.GPTConfig(block_size=a.seq, vocab_size=a.vocab, n_layer=a.layers, n_head=a.heads, n_embd=a.width, bias=True)
    return (lambda: mod.GPT(cfg)), batches(a.vocab, a.batch, a.seq, a.steps, 7), lm_loss


def arch_llama(mod, a):
    build = lambda: mod.Llama(vocab_size=a.vocab, dim=a.width, n_head=a.heads, n_layer=a.layers, hidden=3 * a.width)
    return build, batches(a.vocab, a.batch, a.seq, a.steps, 7), lm_loss


def arch_vit(mod, a):
    build = lambda: mod.ViT(image_size=32, patch_size=4, num_classes=16, dim=a.width, depth=a.layers, heads=a.heads,
                            mlp_dim=3 * a.width, dim_head=a.width // a.heads)
    return build, image_batches(16, a.batch * 4, 32, a.steps, 7), cls_loss  # 64 patches an image


ARCHS = {"gpt": ("GPT", arch_gpt), "llama": ("Llama", arch_llama), "vit": ("ViT", arch_vit)}


def load_converted(path, arch):
    """The converted module and its arch name (from --arch or the classes the file defines)."""
    file = path if path.endswith(".py") else os.path.join(path, "model.py")
    mod = load_module(file, "converted_model")
    if arch is None:
        arch = next((k for k, (cls, _) in ARCHS.items() if hasattr(mod, cls)), None)
        if arch is None:
            raise SystemExit("%s defines none of %s: pass --arch" % (file, ", ".join(c for c, _ in ARCHS.values())))
    return mod, arch


def train(mod, model, data, lr, loss_fn):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses, t0 = [], time.perf_counter()
    for batch in data:
        with mod.fp8_autocast_context():
            loss = loss_fn(model, batch)
        loss.backward()  # outside the region, as the wrapper's comment says
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    torch.cuda.synchronize()
    return [float(v) for v in losses], time.perf_counter() - t0


def cmd_path(args):
    mod, arch = load_converted(args.dir, args.arch)
    build, data, loss_fn = ARCHS[arch][1](mod, args)
    doc = {"dir": args.dir, "arch": arch, "config": vars(args), "te": te_version()}

    # The reference: the same file with its fallback forced (what it runs without TE), same seed.
    mod._PL_FP8_STATE = (False, "reference run of the same file with FP8 off")
    torch.manual_seed(0)
    ref = build().cuda()
    ref_state = {k: v.detach().clone() for k, v in ref.state_dict().items()}

    mod._PL_FP8_STATE = None
    ok, reason = mod.fp8_available()  # prints the wrapper's own mode line
    doc["mode"] = {"fp8": ok, "reason": reason, "recipe": repr(mod.FP8_RECIPE)}
    torch.manual_seed(0)
    fp8m = build().cuda()
    doc["te_modules"] = sorted({type(m).__name__ for m in fp8m.modules() if type(m).__module__.startswith("transformer_engine")})
    res = fp8m.load_state_dict(ref_state, strict=False)
    doc["load_bf16_into_te"] = {"missing": list(res.missing_keys), "unexpected": list(res.unexpected_keys)}
    log("load BF16 weights into the TE model (strict=False): missing %d (%s...), unexpected %d" % (
        len(res.missing_keys), ", ".join(res.missing_keys[:2]), len(res.unexpected_keys)))

    mod._PL_FP8_STATE = (False, "reference")
    ref_losses, ref_s = train(mod, ref, data, args.lr, loss_fn)
    mod._PL_FP8_STATE = (ok, reason)
    with GemmRecorder() as rec:
        fp8_losses, fp8_s = train(mod, fp8m, data, args.lr, loss_fn)
    doc["gemms"] = {"calls": rec.calls, "operand_types": rec.operand_types}
    doc["metadata"] = te_metadata(fp8m)
    doc["losses"] = {"bf16_fallback": ref_losses, "fp8": fp8_losses}
    doc["seconds"] = {"bf16_fallback": ref_s, "fp8": fp8_s}
    rel = [abs(a - b) / abs(b) for a, b in zip(fp8_losses, ref_losses)]
    doc["loss_rel_diff"] = {"final": (fp8_losses[-1] - ref_losses[-1]) / ref_losses[-1], "max": max(rel),
                            "last10_mean_fp8": sum(fp8_losses[-10:]) / 10, "last10_mean_bf16": sum(ref_losses[-10:]) / 10}
    for i in sorted(set([0, 1, 2, 5, 10, 20, 40] + [len(data) - 1])):
        if i < len(data):
            log("step %3d  loss bf16-fallback %.4f  fp8 %.4f" % (i, ref_losses[i], fp8_losses[i]))
    log("FP8 GEMMs: %s; operand types %s" % (rec.calls, rec.operand_types))
    for item in doc["metadata"][:4]:
        log("te module %s" % json.dumps(item))
    log("RESULT path %s (%s): mode fp8=%s recipe=%s final loss bf16 %.4f fp8 %.4f (%+.2f %%), fp8 GEMM calls %d of %d" % (
        args.dir, arch, ok, type(mod.FP8_RECIPE).__name__, ref_losses[-1], fp8_losses[-1],
        100 * doc["loss_rel_diff"]["final"], rec.calls["fp8"], rec.calls["fp8"] + rec.calls["high_precision"]))
    return doc


def te_version():
    try:
        from importlib import metadata
        return {d: metadata.version(d) for d in ("transformer_engine", "transformer_engine_cu13", "transformer_engine_torch")}
    except Exception as exc:
        return {"error": str(exc)}


# ----------------------------------------------------------------------------------------------------------------
# facts

def attempt(name, fn, facts):
    try:
        out = fn()
        facts[name] = {"ok": True, "result": out}
        log("FACT %s: ok: %s" % (name, json.dumps(out)[:600]))
    except Exception as exc:
        msg = "%s: %s" % (type(exc).__name__, str(exc).strip())
        facts[name] = {"ok": False, "error": msg[:2000]}
        log("FACT %s: raised %s" % (name, msg[:600].replace("\n", " | ")))


def _delayed(R):
    return R.DelayedScaling(fp8_format=R.Format.HYBRID, amax_history_len=16, amax_compute_algo="max")


def facts_pl305(te, R, x, facts):
    """DelayedScaling and torch.compile: the autocast outside a compiled module, and inside a compiled function."""
    def compiled_module_autocast_outside(recipe):
        lin = te.Linear(256, 256).cuda()
        c = torch.compile(lin)
        for _ in range(3):
            with te.autocast(enabled=True, recipe=recipe):
                y = c(x)
            y.sum().backward()
        torch.cuda.synchronize()
        meta = lin.fp8_meta.get("scaling_fwd")
        return {"amax_history_max": float(meta.amax_history.abs().max()) if meta is not None and hasattr(meta, "amax_history") else None}

    def compiled_step_autocast_inside(recipe):
        lin = te.Linear(256, 256).cuda()

        @torch.compile
        def step(inp):
            with te.autocast(enabled=True, recipe=recipe):
                return lin(inp).sum()
        for _ in range(2):
            step(x).backward()
        torch.cuda.synchronize()
        return "ran"

    def fullgraph_step(recipe):
        lin = te.Linear(256, 256).cuda()

        @torch.compile(fullgraph=True)
        def step(inp):
            with te.autocast(enabled=True, recipe=recipe):
                return lin(inp).sum()
        for _ in range(2):
            step(x).backward()
        torch.cuda.synchronize()
        return "ran"

    attempt("PL305 DelayedScaling, torch.compile(te.Linear), autocast outside", lambda: compiled_module_autocast_outside(_delayed(R)), facts)
    attempt("PL305 DelayedScaling, autocast inside torch.compile(fullgraph=True)", lambda: fullgraph_step(_delayed(R)), facts)
    attempt("PL305 Float8CurrentScaling, autocast inside torch.compile(fullgraph=True)",
            lambda: fullgraph_step(R.Float8CurrentScaling(fp8_format=R.Format.HYBRID)), facts)
    attempt("PL305 DelayedScaling, autocast inside a compiled function", lambda: compiled_step_autocast_inside(_delayed(R)), facts)
    attempt("PL305 Float8CurrentScaling, autocast inside a compiled function",
            lambda: compiled_step_autocast_inside(R.Float8CurrentScaling(fp8_format=R.Format.HYBRID)), facts)


def facts_pl110(te, R, facts):
    """The error for a shape that breaks the FP8 GEMM rule: input, weight, rows; eager and compiled."""
    def bad_shape(in_f, out_f, rows, compiled=False):
        lin = te.Linear(in_f, out_f).cuda()
        f = torch.compile(lin) if compiled else lin
        with te.autocast(enabled=True, recipe=_delayed(R) if not compiled else R.Float8CurrentScaling()):
            y = f(torch.randn(rows, in_f, device="cuda"))
        torch.cuda.synchronize()
        return list(y.shape)

    attempt("PL110 te.Linear(4100, 1000), 8 rows", lambda: bad_shape(4100, 1000, 8), facts)
    attempt("PL110 te.Linear(4096, 1000), 8 rows", lambda: bad_shape(4096, 1000, 8), facts)
    attempt("PL110 te.Linear(4096, 1004), 8 rows", lambda: bad_shape(4096, 1004, 8), facts)
    attempt("PL110 te.Linear(4096, 4096), 6 rows", lambda: bad_shape(4096, 4096, 6), facts)
    attempt("PL110 te.Linear(4100, 1000), 8 rows, compiled", lambda: bad_shape(4100, 1000, 8, compiled=True), facts)


def facts_pl501(te, R, x, facts):
    """Checkpoints across TE and torch.nn: the _extra_state keys, strict loading both ways, pickled extra state."""
    def te_model():
        return nn.Sequential(te.Linear(256, 256), te.LayerNorm(256)).cuda()

    def plain_model():
        return nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256)).cuda()

    def te_state():
        m = te_model()
        with te.autocast(enabled=True, recipe=_delayed(R)):
            m(x)
        return m.state_dict()

    def load(into, state, strict):
        r = into.load_state_dict(state, strict=strict)
        return {"missing": list(r.missing_keys), "unexpected": list(r.unexpected_keys)}

    def extra_state_type():
        return {k: type(v).__name__ + (" %d bytes" % v.numel() if torch.is_tensor(v) else "")
                for k, v in te_state().items() if k.endswith("_extra_state")}

    def torch_save_roundtrip():
        import io
        buf = io.BytesIO()
        torch.save(te_state(), buf)
        buf.seek(0)
        te_model().load_state_dict(torch.load(buf, weights_only=True))
        return "torch.load(weights_only=True) + strict load into TE: ok"

    attempt("PL501 keys of a TE state_dict (_extra_state)", extra_state_type, facts)
    attempt("PL501 TE checkpoint into torch.nn, strict=True", lambda: load(plain_model(), te_state(), True), facts)
    attempt("PL501 torch.nn checkpoint into TE, strict=True", lambda: load(te_model(), plain_model().state_dict(), True), facts)
    attempt("PL501 torch.nn checkpoint into TE, strict=False", lambda: load(te_model(), plain_model().state_dict(), False), facts)
    attempt("PL501 TE checkpoint through torch.save/torch.load(weights_only=True)", torch_save_roundtrip, facts)


def facts_recipes(te, R, x, facts):
    """Which recipes this GPU runs (TE's own checks), MXFP8 in autocast, the default recipe, init and legacy API."""
    attempt("MXFP8 te.is_mxfp8_available(return_reason=True)", lambda: list(te.is_mxfp8_available(return_reason=True)), facts)
    attempt("Float8BlockScaling te.is_fp8_block_scaling_available", lambda: list(te.is_fp8_block_scaling_available(return_reason=True)), facts)
    attempt("NVFP4 te.is_nvfp4_available", lambda: list(te.is_nvfp4_available(return_reason=True)), facts)
    attempt("FP8 te.is_fp8_available", lambda: list(te.is_fp8_available(return_reason=True)), facts)

    def mxfp8_forward():
        lin = te.Linear(256, 256).cuda()
        with te.autocast(enabled=True, recipe=R.MXFP8BlockScaling()):
            lin(x)
        return "ran"

    def default_init():
        lin = te.Linear(4096, 4096)
        ln = te.LayerNorm(4096)
        return {"te.Linear weight std": float(lin.weight.detach().float().std()), "bias abs max": float(lin.bias.detach().abs().max()),
                "weight device": str(lin.weight.device), "weight dtype": str(lin.weight.dtype),
                "te.LayerNorm weight/bias": [float(ln.weight.detach().mean()), float(ln.bias.detach().abs().max())]}

    def legacy_api():
        import warnings
        lin = te.Linear(256, 256).cuda()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with te.fp8_autocast(enabled=True, fp8_recipe=_delayed(R)):
                lin(x)
        return [str(i.message)[:200] for i in w if issubclass(i.category, DeprecationWarning)]

    attempt("MXFP8 te.autocast(recipe=MXFP8BlockScaling()) forward on this GPU", mxfp8_forward, facts)
    attempt("default recipe te.get_default_recipe()", lambda: repr(te.get_default_recipe()), facts)
    attempt("init te.Linear(4096, 4096) defaults", default_init, facts)
    attempt("legacy te.fp8_autocast warning", legacy_api, facts)


def cmd_facts(args):
    import transformer_engine.pytorch as te
    from transformer_engine.common import recipe as R
    facts = {"te": te_version(), "torch": torch.__version__}
    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    groups = {"PL305": lambda: facts_pl305(te, R, x, facts), "PL110": lambda: facts_pl110(te, R, facts),
              "PL501": lambda: facts_pl501(te, R, x, facts), "recipes": lambda: facts_recipes(te, R, x, facts)}
    for name, run in groups.items():
        if not args.only or name in args.only.split(","):
            run()
    return facts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("path")
    p.add_argument("dir", help="the converted model file, or a folder with model.py")
    p.add_argument("--arch", choices=sorted(ARCHS), default=None, help="default: from the classes the file defines")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--json-out")
    f = sub.add_parser("facts")
    f.add_argument("--json-out")
    f.add_argument("--only", default=None, help="comma-separated groups: PL305,PL110,PL501,recipes (default: all)")
    args = ap.parse_args()
    try:
        doc = cmd_path(args) if args.cmd == "path" else cmd_facts(args)
    except Exception:
        traceback.print_exc()
        return 1
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
