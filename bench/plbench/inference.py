"""`--mode inference`: prefill and decode throughput of a preset model, BF16 against FP8 inference backends, with
the accuracy cost of each FP8 backend measured against BF16 on held-out synthetic batches.

Backends (each on a fresh copy of the same seeded model, lm-head and embeddings kept in high precision):
- `bf16`: the model in bfloat16, eval, no grad: the baseline;
- `torchao`: torchao `quantize_(model, Float8DynamicActivationFloat8WeightConfig())` (E4M3 weights and activations,
  dynamic per-tensor scales; needs SM >= 8.9), with a filter_fn that leaves the high-precision layers alone;
- `te`: the model's layers as te.* modules, run under TE autocast in eval (TE's FP8 inference path);
- `torch-fp8`: this harness's own per-tensor scaled `torch._scaled_mm` linear (fp32 emulation on the CPU: tests);
- `modelopt`: NVIDIA Model Optimizer FP8_DEFAULT_CFG calibrated on held-out batches. ModelOpt quantization is
  fake-quant (it simulates FP8 in BF16), so its speed is no FP8 speed: it is an accuracy reference, labelled so.

Decoding uses a KV cache built from the preset's own modules (attention qkv/proj, norms, MLPs, lm-head), so every
backend runs the same arithmetic apart from its linears. Figures: prefill tokens/s (batch x prompt tokens per forward),
decode tokens/s (batch tokens per step), peak memory, and against BF16 the max / mean |logit difference| and the
next-token agreement (argmax equality over every position of the held-out prompts).
"""
import contextlib
import copy
import math
import time
import traceback

import torch
import torch.nn.functional as F

from . import workloads
from .inference_report import INFERENCE_BACKENDS, LABELS
from .protocol import BenchError, log


# --------------------------------------------------------------------------------------------------------------
# A KV-cache forward over a preset TransformerLM (workloads.py): the same modules, one token at a time after prefill

def _attend(attn, x, cache, layer):
    """Attention of x (b, s, hidden) over the cached keys/values of `layer` plus its own; appends to the cache."""
    b, s, _ = x.shape
    h, hk, d = attn.heads, attn.kv_heads, attn.head_dim
    q, k, v = attn.qkv(x).split([h * d, hk * d, hk * d], dim=-1)
    q = q.view(b, s, h, d).transpose(1, 2)
    k = k.view(b, s, hk, d).transpose(1, 2)
    v = v.view(b, s, hk, d).transpose(1, 2)
    if layer in cache:
        pk, pv = cache[layer]
        k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
    cache[layer] = (k, v)
    t = k.shape[2]
    if hk != h:
        r = h // hk
        k = k[:, :, None].expand(b, hk, r, t, d).reshape(b, h, t, d)
        v = v[:, :, None].expand(b, hk, r, t, d).reshape(b, h, t, d)
    y = _cached_attention(q, k, v)
    return attn.proj(y.transpose(1, 2).reshape(b, s, h * d))


def _cached_attention(q, k, v):
    """q (b, h, s, d) over k, v (b, h, t, d), t >= s, the last s positions being q's own: causal within the new
    tokens, every cached position visible. SDPA (flash / memory-efficient kernels) where torch has it: a prefill
    is plain causal attention, a one-token decode step needs no mask."""
    s, t = q.shape[2], k.shape[2]
    if workloads.HAS_SDPA:
        if s == t:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if s == 1:
            return F.scaled_dot_product_attention(q, k, v)
        visible = torch.ones(s, t, dtype=torch.bool, device=q.device).tril(t - s)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=visible)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if s > 1:
        mask = torch.ones(s, t, dtype=torch.bool, device=q.device).triu(t - s + 1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores.float(), dim=-1).to(v.dtype), v)


def forward_logits(model, tokens, cache, start):
    """Logits (b, s, vocab) of `tokens` at positions start.., extending `cache` (a dict, empty for a prefill)."""
    x = model.tok_emb(tokens)
    if model.pos_emb is not None:
        x = x + model.pos_emb(torch.arange(start, start + tokens.shape[1], device=tokens.device))
    for i, blk in enumerate(model.blocks):
        x = x + _attend(blk.attn, blk.norm1(x), cache, i)
        x = x + blk.mlp(blk.norm2(x))
    return model.head.lm_head(model.head.norm(x))


def generate(model, prompt, new_tokens):
    """Greedy decoding with the KV cache: (prefill logits, [decode logits per step])."""
    cache = {}
    logits = forward_logits(model, prompt, cache, 0)
    nxt = logits[:, -1:].argmax(-1)
    steps = []
    for i in range(new_tokens):
        out = forward_logits(model, nxt, cache, prompt.shape[1] + i)
        steps.append(out)
        nxt = out[:, -1:].argmax(-1)
    return logits, steps


# --------------------------------------------------------------------------------------------------------------
# Accuracy against the baseline

def accuracy(ref_logits, logits):
    """Max and mean |difference| of the logits, and how often the predicted next token is the same."""
    diff = (logits.float() - ref_logits.float()).abs()
    agree = (logits.argmax(-1) == ref_logits.argmax(-1)).float().mean().item()
    return {"max_abs_logit_diff": diff.max().item(), "mean_abs_logit_diff": diff.mean().item(),
            "next_token_agreement": agree}


def merge_accuracy(parts):
    """Combines per-batch accuracy dicts (equal batch sizes): max of maxima, mean of means and agreements."""
    if not parts:
        return None
    return {"max_abs_logit_diff": max(p["max_abs_logit_diff"] for p in parts),
            "mean_abs_logit_diff": sum(p["mean_abs_logit_diff"] for p in parts) / len(parts),
            "next_token_agreement": sum(p["next_token_agreement"] for p in parts) / len(parts)}


# --------------------------------------------------------------------------------------------------------------
# Backends: each turns a fresh bf16 eval model into its inference form

def _high_precision_names(model, extra):
    from . import te_convert
    return te_convert.find_high_precision(model, extra)


def prepare_backend(backend, model, wl, device, te_info=None, calib=None):
    """Converts `model` in place (or returns a new one) for `backend`: (model, context factory, notes dict)."""
    hp = _high_precision_names(model, wl.high_precision)
    notes = {"kept_high_precision": sorted(hp)}
    ctx = contextlib.nullcontext
    if backend == "bf16":
        pass
    elif backend == "torchao":
        model = _torchao(model, hp, device, notes)
    elif backend == "torch-fp8":
        from . import fp8_torch, te_convert
        emulate = device != "cuda" or not fp8_torch.has_native_fp8()
        plan = te_convert.plan_conversion(model, hp, rule="torch", kinds=("linear",))
        fp8_torch.convert_to_torch_fp8(model, plan, out_dtype=torch.bfloat16, emulate=emulate)
        notes["emulated"] = emulate
        notes["converted"] = sum(1 for p in plan if p["action"] == "convert")
    elif backend == "te":
        model, ctx = _te(model, hp, te_info or {}, notes)
    elif backend == "modelopt":
        model = _modelopt(model, hp, calib or [], notes)
    else:
        raise BenchError("usage", "unknown inference backend %r" % backend, "backends: %s" % ",".join(INFERENCE_BACKENDS))
    return model, ctx, notes


def _torchao(model, hp, device, notes):
    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, quantize_
    except ImportError as exc:
        raise BenchError("backend_failed", "torchao is not installed (%s)" % exc, "pip install torchao", fatal=False)
    if device != "cuda":
        raise BenchError("backend_failed", "torchao float8 inference needs a CUDA GPU with SM >= 8.9",
                         "run on an Ada, Hopper or Blackwell GPU", fatal=False)
    quantize_(model, Float8DynamicActivationFloat8WeightConfig(),
              filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn not in hp)
    notes["config"] = "Float8DynamicActivationFloat8WeightConfig()"
    return model


def _te(model, hp, te_info, notes):
    te, recipe_mod = te_info.get("te"), te_info.get("recipe")
    if te is None:
        raise BenchError("te_missing", "Transformer Engine is not installed", "pip install transformer_engine[pytorch]", fatal=False)
    from . import te_convert
    plan = te_convert.plan_conversion(model, hp, rule="te")
    notes["conversion"] = te_convert.convert_to_te(model, te, plan)
    notes["row_padding"] = pad_te_rows(model, te)
    recipe, notes["recipe"] = te_convert.make_recipe(recipe_mod, "current")
    api = te_info.get("api")
    return model, (lambda: te_convert.te_autocast(te, api, recipe))


ROW_MULTIPLE = 8  # TE's FP8 GEMMs need the input's leading dimensions to multiply to a multiple of 8


def _pad_rows(module, args):
    x = args[0]
    rows = x.numel() // x.shape[-1]
    if rows % ROW_MULTIPLE == 0:
        module._pl_rows = None
        return None
    module._pl_rows = (tuple(x.shape[:-1]), rows)
    flat = x.reshape(rows, x.shape[-1])
    return (torch.cat([flat, flat.new_zeros((-rows) % ROW_MULTIPLE, x.shape[-1])]),) + tuple(args[1:])


def _unpad_rows(module, args, out):
    if module._pl_rows is None:
        return None
    shape, rows = module._pl_rows
    return out[:rows].reshape(shape + (out.shape[-1],))


def pad_te_rows(model, te):
    """Decoding feeds batch x 1 rows to every linear: a batch that is not a multiple of 8 would break TE's FP8 GEMM
    shape rule, so each te.Linear pads its input rows with zeros (and drops them from the output). Returns the count."""
    n = 0
    for m in model.modules():
        if isinstance(m, te.Linear):
            m._pl_rows = None
            m.register_forward_pre_hook(_pad_rows)
            m.register_forward_hook(_unpad_rows)
            n += 1
    return n


def _modelopt(model, hp, calib, notes):
    try:
        import modelopt.torch.quantization as mtq
    except ImportError as exc:
        raise BenchError("backend_failed", "nvidia-modelopt is not installed (%s)" % exc, "pip install nvidia-modelopt", fatal=False)
    cfg = copy.deepcopy(mtq.FP8_DEFAULT_CFG)
    for name in sorted(hp):
        if isinstance(cfg["quant_cfg"], list):
            cfg["quant_cfg"].append({"quantizer_name": "%s.*" % name, "enable": False})
        else:
            cfg["quant_cfg"]["%s.*" % name] = {"enable": False}

    def forward_loop(m):
        with torch.no_grad():
            for prompt in calib:
                forward_logits(m, prompt, {}, 0)

    model = mtq.quantize(model, cfg, forward_loop)
    notes["config"] = "FP8_DEFAULT_CFG, calibrated on %d held-out prompts" % len(calib)
    notes["reference_only"] = True
    return model


# --------------------------------------------------------------------------------------------------------------
# Timing

class Timer(object):
    """Wall time with CUDA synchronisation around it on the GPU (events would also do; one sync per phase suffices)."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def __call__(self, fn):
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if self.cuda:
            torch.cuda.synchronize()
        return out, time.perf_counter() - t0


def throughput(batch, prompt_len, new_tokens, prefill_s, decode_s):
    """Prefill tokens/s (every prompt token of the batch) and decode tokens/s (one token per sequence per step)."""
    return {"prefill_tokens_per_s": batch * prompt_len / prefill_s if prefill_s > 0 else None,
            "decode_tokens_per_s": batch * new_tokens / decode_s if decode_s > 0 and new_tokens else None}


def measure(model, ctx, prompts, new_tokens, device, repeats):
    """Median prefill time and median decode time (the greedy decode loop alone, after an untimed prefill) over
    `repeats` runs on the first prompt batch, after one warm-up of each."""
    timer = Timer(device)
    prompt = prompts[0]

    def prefill():
        with ctx():
            return forward_logits(model, prompt, {}, 0)

    def decode_once():
        with ctx():
            cache = {}
            nxt = forward_logits(model, prompt, cache, 0)[:, -1:].argmax(-1)

            def loop():
                tok = nxt
                for i in range(new_tokens):
                    tok = forward_logits(model, tok, cache, prompt.shape[1] + i)[:, -1:].argmax(-1)
                return tok
            return timer(loop)[1]

    prefill()
    decode_once()
    pre = sorted(timer(prefill)[1] for _ in range(repeats))
    dec = sorted(decode_once() for _ in range(repeats))
    return pre[len(pre) // 2], dec[len(dec) // 2]


# --------------------------------------------------------------------------------------------------------------
# Orchestration (cli.py dispatches here for --mode inference)

def choose_backends(text, env, device):
    """`auto`: bf16 plus the FP8 inference paths this machine has; on the CPU bf16 + torch-fp8 (emulated)."""
    if text.strip() != "auto":
        out = []
        for b in (x.strip().lower() for x in text.split(",")):
            if b and b not in INFERENCE_BACKENDS:
                raise BenchError("usage", "unknown inference backend %r" % b, "backends: %s" % ",".join(INFERENCE_BACKENDS))
            if b and b not in out:
                out.append(b)
        if not out:
            raise BenchError("usage", "no backend given", "for example --backends bf16,torchao")
        return out
    if device != "cuda":
        return ["bf16", "torch-fp8"]
    out = ["bf16"]
    fp8 = bool(env.get("fp8", {}).get("available")) or bool(env.get("torch_fp8", {}).get("available"))
    for name, module in (("torchao", "torchao"), ("modelopt", "modelopt")):
        if fp8 or name == "modelopt":
            try:
                __import__(module)
                out.append(name)
            except ImportError:
                pass
    te = env.get("te") or {}
    if te.get("installed") and not te.get("error") and env.get("fp8", {}).get("available"):
        out.append("te")
    return out


NOT_COMPILED = {"te": "TE modules under TE autocast run eager", "modelopt": "fake-quant reference, speed not measured"}


def compile_blocks(model, backend):
    """--compile: each block's linears and MLP as separate torch.compile regions (static shapes: one graph for the
    prefill, one for the decode step), as torchao's float8 inference is meant to run; the attention with its
    growing KV cache and the lm-head stay eager. Returns what was done, for the result's notes."""
    if backend in NOT_COMPILED:
        return "no: " + NOT_COMPILED[backend]
    if not hasattr(torch, "compile"):
        return "no: torch %s has no torch.compile" % torch.__version__
    for blk in model.blocks:
        blk.attn.qkv = torch.compile(blk.attn.qkv, dynamic=False)
        blk.attn.proj = torch.compile(blk.attn.proj, dynamic=False)
        blk.mlp = torch.compile(blk.mlp, dynamic=False)
    return "yes: attn.qkv, attn.proj and mlp of every block (dynamic=False)"


def _peak_reset(device):
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _allocated(device):
    return torch.cuda.memory_allocated() if device == "cuda" else None


def _peak(device):
    return torch.cuda.max_memory_allocated() if device == "cuda" else None


def run_one(rc, backend, prompts, calib, baseline):
    """One backend: build, convert, held-out logits (accuracy vs the BF16 baseline), timings, peak memory."""
    args, device = rc["args"], rc["device"]
    _peak_reset(device)
    wl = rc["builder"]()
    model = wl.model.eval().to(torch.bfloat16)
    with torch.no_grad():
        model, ctx, notes = prepare_backend(backend, model, wl, device, rc.get("te_info"), calib)
        notes["compiled"] = compile_blocks(model, backend) if args.compile else "no (--compile not given)"
    notes["model_memory_bytes"] = _allocated(device)
    # The peak of serving, not of building: the preset is built in fp32 and cast, and the conversions copy weights.
    _peak_reset(device)
    with torch.no_grad():
        logits = []
        for p in prompts:
            with ctx():
                logits.append(forward_logits(model, p, {}, 0).float())
        pre_s, dec_s = measure(model, ctx, prompts, args.new_tokens, device, args.repeats)
    batch, prompt_len = prompts[0].shape
    result = {"mode": "inference", "backend": backend, "label": LABELS[backend], "workload": wl.name, "device": device,
              "batch": batch, "prompt_tokens": prompt_len, "new_tokens": args.new_tokens, "repeats": args.repeats,
              "prefill_s": pre_s, "decode_s": dec_s, "peak_memory_bytes": _peak(device),
              "reference_only": backend == "modelopt", "compile": bool(args.compile) and backend not in NOT_COMPILED,
              "notes": notes}
    result.update(throughput(batch, prompt_len, args.new_tokens, pre_s, dec_s))
    if notes.get("emulated"):
        result["label"] += " [EMULATED in fp32 on %s: harness test, not a benchmark]" % device
    if baseline is not None:
        result["accuracy"] = merge_accuracy([accuracy(r, x) for r, x in zip(baseline, logits)])
    del model
    return result, logits


def run_one_safely(rc, backend, prompts, calib, baseline):
    """run_one, with any failure of one backend (a library bug, a missing dependency, out of memory) turned into a
    non-fatal BenchError naming it, so the other backends still run; memory is freed after a failure."""
    err = None
    try:
        return run_one(rc, backend, prompts, calib, baseline)
    except BenchError as e:
        err = e
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        if workloads.is_oom(exc):
            err = BenchError("oom", "out of memory in the %s inference backend: %s" % (backend, str(exc).split("\n")[0][:300]),
                             "try a smaller --batch or --prompt-len")
        else:
            traceback.print_exc()
            err = BenchError("backend_failed", "%s inference backend failed: %s: %s" % (backend, type(exc).__name__, str(exc)[:500]),
                             "see the traceback on stderr")
    err.__traceback__ = err.__context__ = None
    err.backend, err.fatal = backend, False
    _peak_reset(rc["device"])
    raise err


def summarize(results):
    base = results.get("bf16")
    ratios = {}
    for name, r in results.items():
        if name == "bf16" or base is None:
            continue
        ratios[name] = {k: (r[k] / base[k]) if r.get(k) and base.get(k) else None
                        for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "peak_memory_bytes")}
    return ratios


def run(session, args, env, device, builder, te_info=None):
    """--mode inference: every backend in turn, a result event each, then a summary. Returns the exit code."""
    from .workloads import synthetic_batches
    emitter = session.emitter
    backends = choose_backends(args.backends, env, device)
    if backends[0] != "bf16":
        backends.insert(0, "bf16")  # the accuracy cost is measured against BF16
    probe = builder()
    vocab, batch = probe.model.tok_emb.num_embeddings, probe.info.get("batch")
    del probe
    held_out = synthetic_batches(vocab, batch, args.prompt_len, args.eval_batches + args.calib_batches, args.seed + 7919, device)
    prompts = [x for x, _ in held_out[:args.eval_batches]]
    calib = [x for x, _ in held_out[args.eval_batches:]] or prompts
    rc = {"args": args, "device": device, "builder": builder, "te_info": te_info}
    results, baseline = {}, None
    for b in backends:
        session.state["backend"] = b
        emitter.emit("progress", phase="inference", backend=b, step=len(results) + 1, total=len(backends))
        try:
            res, logits = run_one_safely(rc, b, prompts, calib, baseline)
        except BenchError as err:
            if b == "bf16":
                err.fatal = True
                raise
            session.error(err)
            continue
        if b == "bf16":
            baseline = logits
        results[b] = res
        emitter.emit("result", **res)
        log(format_row(res))
    summary = {"mode": "inference", "baseline": "bf16", "backends": list(results), "ratios": summarize(results),
               "errors": [e.code for e in session.errors], "exit_code": session.errors[0].exit_code if session.errors else 0}
    emitter.emit("summary", **summary)
    return summary["exit_code"]


def format_row(r):
    acc = r.get("accuracy") or {}
    mem = r.get("peak_memory_bytes")
    return "%-10s prefill %10.0f tok/s  decode %9.0f tok/s  peak %s  %s%s" % (
        r["backend"], r.get("prefill_tokens_per_s") or 0, r.get("decode_tokens_per_s") or 0,
        ("%.2f GiB" % (mem / 2 ** 30)) if mem else "n/a",
        ("logits max|d| %.3g mean %.3g, next-token agree %.1f%%" % (
            acc["max_abs_logit_diff"], acc["mean_abs_logit_diff"], 100 * acc["next_token_agreement"])) if acc else "baseline",
        "  (accuracy reference only)" if r.get("reference_only") else "")
