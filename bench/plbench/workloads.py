"""Workloads: preset transformer stacks shaped like real models, and user models given as module:function.

Every preset has a token embedding and an lm-head over a 32000-token vocabulary, kept in high precision by every
FP8 backend. The model's forward takes (tokens, targets) and returns the mean cross-entropy loss, so the lm-head and
the loss can be compiled as one region.
"""
import importlib
import inspect
import math
import os
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

from .protocol import BenchError

from .presets import PRESETS, VOCAB, Preset, list_presets  # noqa: F401


# --------------------------------------------------------------------------------------------------------------
# Model

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.normalized_shape = (dim,)
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.type_as(x) * self.weight


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def causal_attention(q, k, v):
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # torch < 2.0 (CPU tests): plain attention with a causal mask
    s = q.shape[-2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores.float(), dim=-1).to(v.dtype), v)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, bias, device=None):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=bias, device=device)
        self.proj = nn.Linear(heads * self.head_dim, hidden, bias=bias, device=device)
        # The attention kernel: None = SDPA (causal_attention); te_convert.use_te_attention sets a
        # te.DotProductAttention (bshd layout, GQA native, causal), run in FP8 where the recipe says fp8_dpa.
        self.core = None

    def forward(self, x):
        b, s, _ = x.shape
        h, hk, d = self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv(x)
        q, k, v = qkv.split([h * d, hk * d, hk * d], dim=-1)
        if self.core is not None:
            y = self.core(q.view(b, s, h, d), k.view(b, s, hk, d), v.view(b, s, hk, d))
            return self.proj(y.reshape(b, s, h * d))
        q = q.view(b, s, h, d).transpose(1, 2)
        k = k.view(b, s, hk, d).transpose(1, 2)
        v = v.view(b, s, hk, d).transpose(1, 2)
        if hk != h:
            r = h // hk
            k = k[:, :, None].expand(b, hk, r, s, d).reshape(b, h, s, d)
            v = v[:, :, None].expand(b, hk, r, s, d).reshape(b, h, s, d)
        y = causal_attention(q, k, v)
        y = y.transpose(1, 2).reshape(b, s, h * d)
        return self.proj(y)


class GeluMLP(nn.Module):
    def __init__(self, hidden, ffn, device=None):
        super().__init__()
        self.fc = nn.Linear(hidden, ffn, device=device)
        self.proj = nn.Linear(ffn, hidden, device=device)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class SwiGLUMLP(nn.Module):
    """gate and up projections fused in one GEMM (w13), as Megatron and many training stacks do."""

    def __init__(self, hidden, ffn, device=None):
        super().__init__()
        self.w13 = nn.Linear(hidden, 2 * ffn, bias=False, device=device)
        self.w2 = nn.Linear(ffn, hidden, bias=False, device=device)

    def forward(self, x):
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)


class Block(nn.Module):
    # forward is x + attn(norm1(x)); x + mlp(norm2(x)) with attn.qkv the first GEMM: the te-fused backend may fold
    # norm1 into attn.qkv (te.LayerNormLinear) and norm2 + mlp into te.LayerNormMLP (te_convert.fusion_plan).
    fusion_pattern = "pre-norm"

    def __init__(self, p, device=None):
        super().__init__()
        if p.arch == "gpt":
            self.norm1 = nn.LayerNorm(p.hidden, device=device)
            self.norm2 = nn.LayerNorm(p.hidden, device=device)
            self.attn = Attention(p.hidden, p.heads, p.kv_heads, True, device)
            self.mlp = GeluMLP(p.hidden, p.ffn, device)
        else:
            self.norm1 = RMSNorm(p.hidden, device=device)
            self.norm2 = RMSNorm(p.hidden, device=device)
            self.attn = Attention(p.hidden, p.heads, p.kv_heads, False, device)
            self.mlp = SwiGLUMLP(p.hidden, p.ffn, device)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class LMHeadLoss(nn.Module):
    """Final norm + lm-head + cross-entropy: one compile region."""

    def __init__(self, p, device=None):
        super().__init__()
        self.norm = nn.LayerNorm(p.hidden, device=device) if p.arch == "gpt" else RMSNorm(p.hidden, device=device)
        self.lm_head = nn.Linear(p.hidden, p.vocab, bias=False, device=device)

    def forward(self, x, targets):
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


class TransformerLM(nn.Module):
    def __init__(self, p, layers=None, seq=None, device=None):
        super().__init__()
        self.preset = p
        n = p.layers if layers is None else layers
        self.tok_emb = nn.Embedding(p.vocab, p.hidden, device=device)
        self.pos_emb = nn.Embedding(seq or p.seq, p.hidden, device=device) if p.arch == "gpt" else None
        self.blocks = nn.ModuleList([Block(p, device) for _ in range(n)])
        self.head = LMHeadLoss(p, device)
        if p.arch == "gpt":
            self.head.lm_head.weight = self.tok_emb.weight  # GPT-2 ties the lm-head to the token embedding
        self._init(n)

    def _init(self, n):
        std = 0.02
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                s = std / math.sqrt(2 * n) if name.endswith(("attn.proj", "mlp.proj", "mlp.w2")) else std
                if m.weight.device.type != "meta":
                    nn.init.normal_(m.weight, 0.0, s)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding) and m.weight.device.type != "meta":
                nn.init.normal_(m.weight, 0.0, std)

    def forward(self, tokens, targets):
        x = self.tok_emb(tokens)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(x, targets)


def synthetic_batches(vocab, batch, seq, n_batches, seed, device):
    """A learnable next-token task: t[i+1] = (31 * t[i] + 7 + noise) % vocab, noise uniform in 0..3, so the
    best achievable loss is ln 4 = 1.386. Generated on the CPU with a seeded generator: identical for every backend."""
    g = torch.Generator()
    g.manual_seed(seed)
    rows = n_batches * batch
    toks = torch.empty(rows, seq + 1, dtype=torch.long)
    toks[:, 0] = torch.randint(0, vocab, (rows,), generator=g)
    noise = torch.randint(0, 4, (rows, seq), generator=g)
    for i in range(seq):
        toks[:, i + 1] = (toks[:, i] * 31 + 7 + noise[:, i]) % vocab
    toks = toks.view(n_batches, batch, seq + 1).to(device)
    return [(toks[j, :, :-1].contiguous(), toks[j, :, 1:].contiguous()) for j in range(n_batches)]


# --------------------------------------------------------------------------------------------------------------
# Workload objects

class Workload(object):
    """What the runner needs: a fresh model (same seed -> same weights), batches, and how to compute the loss."""

    def __init__(self, name, model, batch_fn, tokens_per_step, loss_fn=None, regions=None, high_precision=(),
                 description="", info=None):
        self.name = name
        self.model = model
        self.batch_fn = batch_fn          # step -> batch
        self.loss_fn = loss_fn            # (model, batch) -> scalar loss
        self.tokens_per_step = tokens_per_step
        self.regions = regions            # list of submodule names to compile separately; None: the whole model
        self.high_precision = set(high_precision)
        self.description = description
        self.info = info or {}

    def loss(self, model, batch):
        if self.loss_fn is not None:
            return self.loss_fn(model, batch)
        return default_loss(model, batch)


def default_loss(model, batch):
    if isinstance(batch, dict):
        out = model(**batch)
        targets = None
    elif isinstance(batch, (tuple, list)) and len(batch) == 2:
        inputs, targets = batch
        out = model(inputs)
    else:
        out = model(batch)
        targets = None
    if isinstance(out, dict):
        out = out.get("loss", out.get("logits"))
    elif hasattr(out, "loss") and getattr(out, "loss") is not None:
        out = out.loss
    elif isinstance(out, (tuple, list)):
        out = out[0]
    if out.dim() == 0:
        return out
    if targets is None:
        raise BenchError("bad_workload", "the model returned a %d-D tensor and the batch has no targets" % out.dim(),
                         "return (inputs, targets) from batch_factory, or make the model return a scalar loss")
    return F.cross_entropy(out.float().reshape(-1, out.shape[-1]), targets.reshape(-1))


def build_preset(name, batch=None, seq=None, layers=None, device="cpu", seed=1234, n_batches=8):
    """n_batches: distinct batches, cycled. Give at least warm-up + measured steps: a batch seen twice is partly
    memorized, and the loss curve then measures memorization rather than learning."""
    p = PRESETS[name]
    batch = batch or p.batch
    seq = seq or p.seq
    torch.manual_seed(seed)
    model = TransformerLM(p, layers=layers, seq=seq, device=device)
    batches = synthetic_batches(p.vocab, batch, seq, max(1, n_batches), seed + 1, device) if device != "meta" else []
    n = len(model.blocks)
    regions = ["blocks.%d" % i for i in range(n)] + ["head"]
    info = p.describe()
    info.update({"layers": n, "batch": batch, "seq": seq,
                 "params": sum(t.numel() for t in model.parameters())})
    return Workload(
        name=name, model=model, batch_fn=(lambda step: batches[step % len(batches)]) if batches else None,
        tokens_per_step=batch * seq, loss_fn=lambda m, b: m(b[0], b[1]), regions=regions,
        high_precision=("tok_emb", "pos_emb", "head.lm_head"), description=p.description, info=info)


def parse_workload_spec(spec):
    """'gpt-125m' -> ('preset', name); 'pkg.mod:func' -> ('user', (module, func))."""
    if ":" in spec:
        mod, _, fn = spec.partition(":")
        if not mod or not fn:
            raise BenchError("bad_workload", "bad workload %r: expected NAME or module:function" % spec,
                             "for example --workload models.gpt:build_for_benchmark")
        return "user", (mod.strip(), fn.strip())
    if spec in PRESETS:
        return "preset", spec
    raise BenchError("bad_workload", "unknown workload %r" % spec,
                     "use one of: %s, or module:function from your workspace" % ", ".join(
                         n for n, p in PRESETS.items() if not p.hidden_test))


def resolve_user_function(module_name, func_name, workspace):
    ws = os.path.abspath(workspace or os.getcwd())
    if ws not in sys.path:
        sys.path.insert(0, ws)
    try:
        mod = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.split(".")[0] == exc.name.split(".")[0] or exc.name == module_name:
            raise BenchError("bad_workload", "cannot import module %r from the workspace %s" % (module_name, ws),
                             "check the module path (dotted, relative to the workspace folder) and --workspace")
        traceback.print_exc()
        raise BenchError("bad_workload", "module %r failed to import: %s" % (module_name, exc),
                         "install the missing package in the selected interpreter")
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        traceback.print_exc()
        raise BenchError("bad_workload", "module %r raised while importing: %s: %s" % (module_name, type(exc).__name__, exc),
                         "fix the error in your module (traceback on stderr)")
    fn = getattr(mod, func_name, None)
    if fn is None:
        raise BenchError("bad_workload", "module %r has no function %r" % (module_name, func_name),
                         "define %s(batch, seq, device) returning (model, batch_factory) or a dict" % func_name)
    if not callable(fn):
        raise BenchError("bad_workload", "%s:%s is not callable" % (module_name, func_name),
                         "point --workload at a function")
    return fn


def _call_with_supported(fn, kwargs):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn(**kwargs)
    params = sig.parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return fn(**kwargs)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return fn(**{k: v for k, v in kwargs.items() if k in names})


def build_user_workload(spec_tuple, fn, batch=None, seq=None, device="cpu", seed=1234):
    module_name, func_name = spec_tuple
    label = "%s:%s" % (module_name, func_name)
    torch.manual_seed(seed)
    kwargs = {"device": device, "seed": seed}
    if batch:
        kwargs["batch"] = batch
        kwargs["batch_size"] = batch
    if seq:
        kwargs["seq"] = seq
        kwargs["seq_len"] = seq
    try:
        res = _call_with_supported(fn, kwargs)
    except BenchError:
        raise
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        if is_oom(exc):
            raise
        traceback.print_exc()
        raise BenchError("bad_workload", "%s raised: %s: %s" % (label, type(exc).__name__, exc),
                         "fix the error in your function (traceback on stderr)")
    loss_fn = None
    tokens = None
    high = ()
    regions = None
    desc = "user model %s" % label
    if isinstance(res, dict):
        model = res.get("model")
        bf = res.get("batch_factory") or res.get("batches")
        loss_fn = res.get("loss_fn")
        tokens = res.get("tokens_per_step")
        high = res.get("high_precision", ())
        regions = res.get("compile_regions")
        desc = res.get("description", desc)
    elif isinstance(res, (tuple, list)) and len(res) == 2:
        model, bf = res
    else:
        raise BenchError("bad_workload", "%s returned %s; expected (model, batch_factory) or a dict with 'model' and "
                         "'batch_factory'" % (label, type(res).__name__),
                         "return (model, batch_factory) where batch_factory(step) -> (inputs, targets)")
    if not isinstance(model, nn.Module):
        raise BenchError("bad_workload", "%s: 'model' is %s, not a torch.nn.Module" % (label, type(model).__name__),
                         "return the model as the first element")
    if isinstance(bf, (list, tuple)):
        seqs = list(bf)
        if not seqs:
            raise BenchError("bad_workload", "%s: the batch list is empty" % label, "give at least one batch")
        batch_fn = lambda step: seqs[step % len(seqs)]
    elif callable(bf):
        batch_fn = bf
    else:
        raise BenchError("bad_workload", "%s: batch_factory is %s, not callable" % (label, type(bf).__name__),
                         "batch_factory(step) must return (inputs, targets)")
    model = model.to(device)
    if tokens is None:
        try:
            first = batch_fn(0)
        except Exception as exc:
            traceback.print_exc()
            raise BenchError("bad_workload", "%s: batch_factory(0) raised %s: %s" % (label, type(exc).__name__, exc),
                             "fix batch_factory (traceback on stderr)")
        tokens = count_tokens(first)
    info = {"name": label, "params": sum(t.numel() for t in model.parameters()), "tokens_per_step": tokens}
    return Workload(label, model, batch_fn, tokens, loss_fn=loss_fn, regions=regions, high_precision=high,
                    description=desc, info=info)


def count_tokens(batch):
    """Tokens per step: the number of integer targets, else rows * positions of the first input."""
    t = None
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        t = batch[1] if torch.is_tensor(batch[1]) else None
        if t is not None and t.is_floating_point():
            t = None
        if t is None and torch.is_tensor(batch[0]):
            x = batch[0]
            return int(x.shape[0] * (x.shape[1] if x.dim() > 2 or (x.dim() == 2 and not x.is_floating_point()) else 1))
    elif isinstance(batch, dict):
        for key in ("labels", "targets", "input_ids"):
            if torch.is_tensor(batch.get(key)):
                t = batch[key]
                break
    elif torch.is_tensor(batch):
        t = batch
    return int(t.numel()) if t is not None else 1


def is_oom(exc):
    cls = getattr(torch.cuda, "OutOfMemoryError", None)
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if cls is not None and isinstance(exc, cls):
            return True
        text = str(exc)
        if "CUDA out of memory" in text or "CUBLAS_STATUS_ALLOC_FAILED" in text or "out of memory" in text.lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False
