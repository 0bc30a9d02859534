"""Training-step timing for one backend, the roofline GEMMs and the harness-overhead check."""
import contextlib
import gc
import math
import time
import traceback

import torch

from . import backends, fp8_torch, fp8_torchao, te_convert, trace
from .protocol import BenchError, log
from .workloads import is_oom

LABELS = {name: spec["label"] for name, spec in backends.BACKENDS.items()}


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    pos = (len(v) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def step_stats(step_ms):
    med = percentile(step_ms, 50)
    p90 = percentile(step_ms, 90)
    return {
        "median": med, "p90": p90, "mean": sum(step_ms) / len(step_ms), "min": min(step_ms), "max": max(step_ms),
        "p90_over_median": (p90 / med) if med else None,
    }


class Clock(object):
    """CUDA events on the GPU (no per-step sync), perf_counter on the CPU (harness tests)."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def ms(self, a, b):
        if self.cuda:
            return a.elapsed_time(b)
        return (b - a) * 1000.0


def free_memory(device):
    gc.collect()
    dyn = getattr(torch, "_dynamo", None)
    if dyn is not None and hasattr(dyn, "reset"):
        try:
            dyn.reset()
        except Exception:
            pass
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


EVAL_BATCH_BASE = 1000000
# The A/B's warm start (--warm-start-steps) trains on batches from here: none of the measured steps' (0, 1, ...), none
# of the eval batches' (EVAL_BATCH_BASE and up).
WARM_START_BATCH_BASE = 500000


def warm_start(model, wl, steps, lr, device, clip=1.0):
    """Trains model in place for `steps` BF16 steps before an A/B's arms start from its weights: AdamW at lr with a
    linear warm-up over all the steps, gradient clipping, batches from WARM_START_BATCH_BASE. The first steps from a
    random init are where two runs part most (a loss spike at step 2-6 turns an ULP of difference into a different
    trajectory: llama2.c's FP8 and BF16 eval losses after 200 steps from scratch spread -5 % to +2 % over three seeds,
    2026-12-05-loss-lr); past them, the arms compare FP8's effect on training rather than that chaos. The optimizer is
    dropped after: every arm starts its own. Returns the losses."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1.0) / steps))
    losses = []
    for i in range(steps):
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = wl.loss(model, wl.batch_fn(WARM_START_BATCH_BASE + i))
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach().float())
        if (i + 1) % max(1, steps // 4) == 0 or i + 1 == steps:
            log("[warm start] step %d/%d, loss %.4f" % (i + 1, steps, float(losses[-1].item())))
    del opt, sched
    free_memory(device)
    return torch.stack(losses).cpu().tolist() if losses else []


def lr_factor(args, total):
    """The learning rate's multiplier at optimizer step i (0-based) of `total`: linear warm-up over --lr-warmup steps,
    then constant or cosine down to 0.1 at the last step (--lr-schedule). None when both are off."""
    warm, cosine = getattr(args, "lr_warmup", 0), getattr(args, "lr_schedule", "constant") == "cosine"
    if not warm and not cosine:
        return None

    def factor(i):
        if i < warm:
            return (i + 1) / float(warm)
        if not cosine:
            return 1.0
        span = max(1, total - warm - 1)
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * min(1.0, (i - warm) / float(span))))
    return factor


# GPT-3's learning rates by model size (Brown et al. 2020, table 2.1): parameters -> AdamW peak learning rate.
LR_BY_PARAMS = ((125e6, 6e-4), (350e6, 3e-4), (760e6, 2.5e-4), (1.3e9, 2e-4), (2.7e9, 1.6e-4), (6.7e9, 1.2e-4),
                (13e9, 1e-4), (175e9, 6e-5))


def lr_for_params(n):
    """--lr auto: the learning rate of a model of n parameters, interpolated in log-log between GPT-3's sizes and held
    at the table's ends. A fixed lr too large for the model makes two runs of the same seed drift apart (GPU
    nondeterminism amplified: BF16 against itself up to 4 % after 200 steps at 6e-4 on 0.7 B parameters, 0.02 % at
    2.5e-4; bench/results/h200/2026-12-05-loss-lr), so a loss comparison could no longer resolve 1 %."""
    table = LR_BY_PARAMS
    if n <= table[0][0]:
        return table[0][1]
    for (n0, lr0), (n1, lr1) in zip(table, table[1:]):
        if n <= n1:
            t = (math.log(n) - math.log(n0)) / (math.log(n1) - math.log(n0))
            return float("%.3g" % math.exp(math.log(lr0) + t * (math.log(lr1) - math.log(lr0))))
    return table[-1][1]


def eval_loss(wl, model, fwd_ctx, n):
    """The mean loss over n batches the steps never see (batch indices from EVAL_BATCH_BASE), without gradients."""
    vals = []
    with torch.no_grad():
        for k in range(n):
            with fwd_ctx():
                vals.append(wl.loss(model, wl.batch_fn(EVAL_BATCH_BASE + k)).detach().float())
    return float(torch.stack(vals).mean().item()) if vals else None


def make_optimizer(params, lr, device):
    params = [p for p in params if p.requires_grad]
    if device == "cuda":
        try:
            return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=True), "AdamW(fused)"
        except (TypeError, RuntimeError, ValueError):
            pass
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, foreach=True), "AdamW(foreach)"
    except (TypeError, RuntimeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0), "AdamW"


def compile_model(model, regions, scope):
    """scope 'blocks': compile each region (transformer block, lm-head+loss) separately; identical blocks share one
    compiled graph, so compile time does not grow with depth. scope 'model': one torch.compile of the whole model."""
    dyn = getattr(torch, "_dynamo", None)
    if dyn is not None:
        for key in ("cache_size_limit", "recompile_limit"):
            if hasattr(dyn.config, key):
                setattr(dyn.config, key, max(64, getattr(dyn.config, key)))
    if scope == "model" or not regions:
        return torch.compile(model), "model"
    for name in regions:
        parent, attr = te_convert.parent_module(model, name)
        mod = getattr(parent, attr)
        if hasattr(mod, "compile") and callable(getattr(mod, "compile")):
            mod.compile()
        else:
            setattr(parent, attr, torch.compile(mod))
    return model, "blocks"


def model_flops_per_token(info):
    """6 x (GEMM parameters: blocks + lm-head) + causal attention (6 * layers * width * seq). Presets only."""
    try:
        d, L, f, seq, V = info["hidden"], info["layers"], info["ffn"], info["seq"], info["vocab"]
        h, hk = info["heads"], info["kv_heads"]
        hd = d // h
        qkv = d * (h + 2 * hk) * hd
        mlp = 3 * d * f if info["arch"] == "llama" else 2 * d * f
        n = L * (qkv + d * d + mlp) + d * V
        return 6.0 * n + 6.0 * L * d * seq
    except (KeyError, TypeError):
        return None


class Arm(object):
    """A named run that is not one of the backends (--mode ab, plbench/ab.py): it goes through this runner under its
    own name (result `backend`, progress `backend`, error `backend`) with its own workload builder. `impl`: the backend
    whose conversion it applies (bf16: none, torchao-tensorwise...), unless `prepare(rc, model, hp, result)` is given,
    which returns the forward-context factories itself. `autocast`: whether the harness adds torch.autocast(bf16)
    around the forward. `after_build(model, wl, result)` runs on the freshly built model before any conversion (weight
    capture or loading), `finish(model, result)` after the measured steps. `compile`: None follows --compile, True or
    False overrides it for this arm alone (the torchao peer compiled beside eager arms: torchao's best configuration)."""

    def __init__(self, name, label, builder, impl="bf16", autocast=True, prepare=None, after_build=None, finish=None,
                 compile=None):
        self.name, self.label, self.builder, self.impl = name, label, builder, impl
        self.autocast, self.prepare, self.after_build, self.finish = autocast, prepare, after_build, finish
        self.compile = compile


def wants_compile(rc, backend):
    """Whether this run compiles: the arm's own setting where it has one, else --compile."""
    arm = _arm(rc, backend)
    if arm is not None and arm.compile is not None:
        return bool(arm.compile)
    return bool(rc.args.compile)


def _arm(rc, backend):
    return (getattr(rc, "arms", None) or {}).get(backend)


class RunContext(object):
    def __init__(self, args, emitter, env, device, builder, te_info=None, state=None, ao_info=None):
        self.args = args
        self.emitter = emitter
        self.env = env
        self.device = device
        self.builder = builder      # () -> Workload, freshly seeded
        self.te_info = te_info or {}
        self.ao_info = ao_info or {}
        self.state = state if state is not None else {}
        self.gemm_shapes = None
        self.arms = {}              # name -> Arm (--mode ab)


def _progress(rc, backend, phase, step, total, every=1):
    if step == total or step == 1 or (every and step % every == 0):
        rc.emitter.emit("progress", phase=phase, step=step, total=total, backend=backend)


def run_backend(rc, backend):
    """Runs one backend. Returns the result dict or raises BenchError (never fatal for the run). Memory is freed
    before and after, also after a failure (the exception's frames are dropped first, they hold the model)."""
    args = rc.args
    rc.state["backend"] = backend
    free_memory(rc.device)
    err = None
    try:
        return _run_backend(rc, backend)
    except BenchError as e:
        err = e
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        if is_oom(exc):
            batch = rc.state.get("batch") or args.batch or 0
            half = max(1, batch // 2) if batch else None
            hint = ("try --batch %d (half of %d)" % (half, batch)) if batch and batch > 1 else \
                "try a shorter --seq or fewer --layers"
            msg = "out of memory in the %s backend (batch %s, seq %s): %s" % (
                backend, batch or "?", rc.state.get("seq") or "?", str(exc).split("\n")[0][:300])
            err = BenchError("oom", msg, hint, suggested_batch=half)
        else:
            traceback.print_exc()
            err = BenchError("backend_failed", "%s backend failed: %s: %s" % (backend, type(exc).__name__, str(exc)[:500]),
                             "see the traceback on stderr")
    finally:
        rc.state["phase"] = None
    err.__traceback__ = None
    err.__context__ = None
    err.backend = backend
    err.fatal = False
    free_memory(rc.device)
    raise err


def lm_head_names(hp):
    return sorted(n for n, why in hp.items() if why.startswith("lm-head"))


def release_lm_head(hp):
    """--fp8-lm-head: the lm-head joins the FP8 layers unless its weight is tied to the embedding (converting it
    would untie it in TE). Returns (the new high-precision map, what happened to each head)."""
    out, notes = dict(hp), []
    for name in lm_head_names(hp):
        if "tied" in hp[name]:
            notes.append({"name": name, "fp8": False, "reason": "tied to the embedding: stays BF16"})
        else:
            del out[name]
            notes.append({"name": name, "fp8": True, "reason": "--fp8-lm-head"})
    return out, notes


def _prepare_bf16(rc, backend, model, hp, result):
    if backends.BACKENDS[backend].get("attention"):  # bf16-tedpa: TE's attention kernel, no FP8, no TE autocast
        te = rc.te_info.get("te")
        try:
            result["attention"] = {"kernel": "te.DotProductAttention", "fp8": False,
                                   "layers": te_convert.use_te_attention(model, te)}
        except AttributeError as exc:
            raise BenchError("backend_failed", str(exc), "upgrade Transformer Engine")
    return []


def _prepare_torch_fp8(rc, backend, model, hp, result):
    emulate = rc.device != "cuda" or not fp8_torch.has_native_fp8()
    plan = te_convert.plan_conversion(model, hp, rule="torch", kinds=("linear",))
    fp8_torch.convert_to_torch_fp8(model, plan, out_dtype=torch.bfloat16, emulate=emulate)
    result["conversion"] = _plan_report(plan)
    result["emulated"] = emulate
    result["recipe"] = "per-tensor dynamic scaling (amax of the current tensor), E4M3 fwd / E5M2 grad"
    if emulate:
        result["label"] += " [EMULATED in fp32 on %s: harness test, not a benchmark]" % rc.device
    return []


def _plan_report(plan):
    return te_convert.report([i for i in plan if i["action"] == "convert"], [i for i in plan if i["action"] == "skip"],
                             [i for i in plan if i["action"] == "keep"])


def _prepare_torchao(rc, backend, model, hp, result):
    info = rc.ao_info
    recipe = backends.BACKENDS[backend]["recipe"]
    plan = te_convert.plan_conversion(model, hp, rule="torch", kinds=("linear",))
    fp8_torchao.convert(model, info, recipe, plan)
    result["conversion"] = _plan_report(plan)
    result["recipe"] = fp8_torchao.recipe_text(recipe)
    result["torchao_version"] = info.get("version")
    return []


def _prepare_te(rc, backend, model, hp, result):
    te, recipe_mod = rc.te_info.get("te"), rc.te_info.get("recipe")
    if backends.BACKENDS[backend].get("fused"):
        result["conversion"] = te_convert.convert_to_te_fused(model, te, hp)
    else:
        result["conversion"] = te_convert.convert_to_te(model, te, te_convert.plan_conversion(model, hp, rule="te"))
    attention = backends.BACKENDS[backend].get("attention")
    kind = backends.te_recipe_kind(backend, rc.args.te_recipe, wants_compile(rc, backend))
    try:
        if attention:
            result["attention"] = {"kernel": "te.DotProductAttention", "fp8": attention == "te-fp8",
                                   "layers": te_convert.use_te_attention(model, te)}
        recipe, recipe_text = te_convert.make_recipe(recipe_mod, kind, fp8_dpa=attention == "te-fp8")
    except AttributeError as exc:
        raise BenchError("backend_failed", str(exc), "upgrade Transformer Engine or use --no-compile")
    result["recipe"] = recipe_text
    result["te_api"] = api = rc.te_info.get("api")
    result["te_version"] = rc.te_info.get("version")
    return [lambda: te_convert.te_autocast(te, api, recipe)]


PREPARE = {"bf16": _prepare_bf16, "te": _prepare_te, "torchao": _prepare_torchao, "torch-fp8": _prepare_torch_fp8}


def _build(rc, backend):
    """A fresh workload converted for the backend, its optimizer, compiled as asked. Returns (wl, model, result,
    fwd_contexts, optimizer)."""
    args, dev = rc.args, rc.device
    arm = _arm(rc, backend)
    impl = arm.impl if arm else backend
    _progress(rc, backend, "build", 1, 1)
    wl = arm.builder() if arm else rc.builder()
    model = wl.model
    model.train()
    info = wl.info
    if args.lr == "auto":
        # One learning rate for every arm: the first model built (the baseline's) sets it.
        lr = rc.state.setdefault("auto_lr", lr_for_params(sum(p.numel() for p in model.parameters())))
    else:
        lr = args.lr
    rc.state["batch"] = info.get("batch")
    rc.state["seq"] = info.get("seq")
    if rc.gemm_shapes is None:
        rc.gemm_shapes = gemm_shapes(model, wl)
    result = {
        "backend": backend, "label": arm.label if arm else LABELS.get(backend, backend), "workload": wl.name,
        "device": dev,
        "batch": info.get("batch"), "seq": info.get("seq"), "layers": info.get("layers"),
        "tokens_per_step": wl.tokens_per_step, "params": sum(p.numel() for p in model.parameters()),
        "steps": args.steps, "warmup": args.warmup, "seed": args.seed, "lr": lr, "emulated": False,
        "recipe": None, "conversion": None, "precision": "bf16 autocast, fp32 master weights",
        # What the workload says it is (a user workload's "description": for the real projects, how much text there is
        # and what is held out): the evidence a loss comparison needs, kept with every result.
        "workload_description": wl.description or None,
    }
    if arm and arm.after_build:
        arm.after_build(model, wl, result)
    hp = te_convert.find_high_precision(model, wl.high_precision)
    result["lm_head_layers"] = lm_head_names(hp)
    if getattr(args, "fp8_lm_head", False) and backends.family(impl) != "bf16" and not (arm and arm.prepare):
        hp, result["lm_head_fp8"] = release_lm_head(hp)
    if arm and arm.prepare:
        fwd_contexts = arm.prepare(rc, model, hp, result)
    else:
        fwd_contexts = PREPARE[backends.family(impl)](rc, impl, model, hp, result)
    conv = result["conversion"]
    if conv:
        log("[%s] converted %d layers, skipped %d (shape rule), kept %d in high precision" % (
            backend, conv["counts"]["converted"], conv["counts"]["skipped"], conv["counts"]["kept_high_precision"]))
        for s in conv["skipped"]:
            log("[%s]   skipped %s: %s" % (backend, s["name"], s["reason"]))
    opt, result["optimizer"] = make_optimizer(model.parameters(), lr, dev)
    result["compile"] = False
    if wants_compile(rc, backend):
        if not hasattr(torch, "compile"):
            result["compile_note"] = "torch %s has no torch.compile: ran eager" % torch.__version__
        else:
            model, result["compile_scope"] = compile_model(model, wl.regions, args.compile_scope)
            result["compile"] = True
    return wl, model, result, fwd_contexts, opt


def _warmup(rc, backend, step, compiled, result):
    """The warm-up steps (compilation in the first), host-synchronised; returns their losses."""
    n = rc.args.warmup
    losses, warm_ms = [], []
    rc.state["phase"] = "warmup"
    every = max(1, n // 10)
    for i in range(n):
        t0 = time.perf_counter()
        loss = step(i)
        losses.append(float(loss.item()))  # syncs: fine during warm-up
        warm_ms.append((time.perf_counter() - t0) * 1000.0)
        if i == 0:
            log("[%s] first step %.1f s%s" % (backend, warm_ms[0] / 1000.0, " (includes compilation)" if compiled else ""))
        _progress(rc, backend, "compile" if (i == 0 and compiled) else "warmup", i + 1, n, every)
    result["first_step_s"] = warm_ms[0] / 1000.0 if warm_ms else None
    result["warmup_step_ms"] = warm_ms
    return losses


def _measure(rc, backend, step, clock):
    """The measured steps: events around every step, no host sync until the end. Returns (step_ms, span_ms,
    wall_s, losses)."""
    n, start = rc.args.steps, rc.args.warmup
    rc.state["phase"] = "measure"
    every = max(1, n // 20)
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()
    try:
        marks, dev_losses = [], []
        t_wall = time.perf_counter()
        for j in range(n):
            a = clock.mark()
            loss = step(start + j)
            dev_losses.append(loss.detach())
            b = clock.mark()
            marks.append((a, b))
            if (j + 1) % every == 0 or j + 1 == n or j == 0:
                rc.emitter.emit("progress", phase="measure", step=j + 1, total=n, backend=backend)
        clock.sync()
        wall_s = time.perf_counter() - t_wall
    finally:
        if gc_was:
            gc.enable()
    step_ms = [clock.ms(a, b) for a, b in marks]
    measured = torch.stack([l.float() for l in dev_losses]).cpu().tolist() if dev_losses else []
    return step_ms, clock.ms(marks[0][0], marks[-1][1]), wall_s, measured


def _record_memory(result, dev):
    cuda = dev == "cuda"
    result["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated()) if cuda else None
    if cuda:
        result["peak_memory_reserved_bytes"] = int(torch.cuda.max_memory_reserved())
    result["peak_memory_gib"] = result["peak_memory_bytes"] / 2 ** 30 if cuda else None


def _run_backend(rc, backend):
    args, dev = rc.args, rc.device
    wl, model, result, fwd_contexts, opt = _build(rc, backend)
    arm = _arm(rc, backend)
    bf16_autocast = arm.autocast if arm else True

    def fwd_ctx():
        stack = contextlib.ExitStack()
        if bf16_autocast:  # an A/B arm's converted project brings its own context (plbench/ab.py)
            stack.enter_context(torch.autocast(device_type=dev, dtype=torch.bfloat16))
        for f in fwd_contexts:
            stack.enter_context(f())
        return stack

    factor = lr_factor(args, args.warmup + args.steps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor) if factor else None
    clip = getattr(args, "clip_grad", 0.0)
    params = [p for p in model.parameters() if p.requires_grad] if clip else None

    def step(i):
        batch = wl.batch_fn(i)
        with fwd_ctx():
            loss = wl.loss(model, batch)
        loss.backward()  # outside the FP8 autocast region, as TE documents
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        if sched is not None:
            sched.step()
        opt.zero_grad(set_to_none=True)
        return loss

    clock = Clock(dev)
    losses = _warmup(rc, backend, step, result["compile"], result)
    clock.sync()
    n = args.steps
    step_ms, span_ms, wall_s, measured = _measure(rc, backend, step, clock)
    losses.extend(measured)
    stats = step_stats(step_ms)
    result.update({
        "tokens_per_s": wl.tokens_per_step * n / (span_ms / 1000.0),
        "step_ms": stats, "step_times_ms": step_ms,
        "step_time_median_ms": stats["median"], "step_time_p90_ms": stats["p90"],
        "step_spread_p90_over_median": stats["p90_over_median"],
        "measured_span_ms": span_ms, "measured_wall_s": wall_s,
        "losses": losses, "loss_measured_from": args.warmup,
        "final_loss": losses[-1] if losses else None,
        "final_loss_avg5": (sum(losses[-5:]) / len(losses[-5:])) if losses else None,
    })
    result["lr_schedule"] = {"lr": result["lr"], "warmup": getattr(args, "lr_warmup", 0),
                             "schedule": getattr(args, "lr_schedule", "constant"), "clip_grad": clip or None}
    if getattr(args, "eval_loss_batches", 0):
        rc.state["phase"] = "eval"
        result["eval_loss"] = eval_loss(wl, model, fwd_ctx, args.eval_loss_batches)
        result["eval_batches"] = args.eval_loss_batches
        log("[%s] eval loss %.4f over %d batches it never trained on" % (backend, result["eval_loss"], args.eval_loss_batches))
    if arm and arm.finish:
        arm.finish(model, result)
    fpt = model_flops_per_token(wl.info) if "hidden" in wl.info else None
    if fpt:
        result["model_tflops_per_s"] = fpt * result["tokens_per_s"] / 1e12
    _record_memory(result, dev)
    if result["lm_head_layers"]:
        rc.state["phase"] = "logits"
        result["logit_stats"] = logit_stats(model, wl, fwd_ctx, result["lm_head_layers"][0], args.warmup + n - 1)
    if getattr(args, "profile_steps", 0):
        rc.state["phase"] = "profile"
        result["profile"] = profile_steps(step, args.warmup + n, args.profile_steps, dev)
    if args.measure_overhead and rc.state.get("overhead_done") is not True:
        rc.state["phase"] = "overhead"
        rc.state["overhead_done"] = True
        result["overhead"] = measure_overhead(rc, backend, step, args.warmup + n, min(n, 20), span_ms, clock)
    log("[%s] %.0f tokens/s, step median %.2f ms, p90 %.2f ms, peak %s, final loss %.4f" % (
        backend, result["tokens_per_s"], stats["median"], stats["p90"],
        ("%.1f GiB" % result["peak_memory_gib"]) if result["peak_memory_gib"] is not None else "n/a",
        result["final_loss"] if result["final_loss"] is not None else float("nan")))
    return result


@contextlib.contextmanager
def eager(model):
    """Run a compiled model eagerly for one look inside (hooks on inner modules, no recompilation): drops the
    compiled call of every region compiled in place (nn.Module.compile) and unwraps torch.compile(model)."""
    saved = []
    inner = getattr(model, "_orig_mod", model)
    for m in inner.modules():
        if getattr(m, "_compiled_call_impl", None) is not None:
            saved.append((m, m._compiled_call_impl))
            m._compiled_call_impl = None
    try:
        yield inner
    finally:
        for m, impl in saved:
            m._compiled_call_impl = impl


def summarize_logits(logits):
    """abs max, RMS, mean logsumexp and z-loss (mean of logsumexp squared, PaLM's auxiliary loss) over the vocab."""
    x = logits.detach().float().reshape(-1, logits.shape[-1])
    lse = torch.logsumexp(x, dim=-1)
    return {"abs_max": float(x.abs().max()), "rms": float(x.pow(2).mean().sqrt()),
            "mean_logsumexp": float(lse.mean()), "z_loss": float(lse.pow(2).mean()), "rows": int(x.shape[0])}


def logit_stats(model, wl, fwd_ctx, head_name, batch_index):
    """One eager forward (no grad) over a measured batch with a hook on the lm-head: what the lm-head question needs
    (logit magnitude and z-loss), in the backend's own precision. None when the layer is not found."""
    seen = {}
    with eager(model) as inner:
        try:
            head = inner.get_submodule(head_name)
        except AttributeError:
            return None
        handle = head.register_forward_hook(lambda mod, inp, out: seen.__setitem__("out", out))
        try:
            with torch.no_grad(), fwd_ctx():
                loss = wl.loss(inner, wl.batch_fn(batch_index))
        finally:
            handle.remove()
    if "out" not in seen or not isinstance(seen["out"], torch.Tensor):
        return None
    stats = summarize_logits(seen.pop("out"))
    stats.update(layer=head_name, loss=float(loss), layer_type=type(head).__name__)
    return stats


# Kernel families by name (first match wins): where a step's GPU time goes. Approximate: inductor names fused
# kernels after their ops (a cast fused into an elementwise kernel counts as "elementwise / fused").
KERNEL_FAMILIES = (
    ("attention", ("flash", "fmha", "attention", "sdpa")),  # before gemm: flash kernels name cutlass types
    ("gemm", ("gemm", "gemv", "xmma", "cutlass", "nvjet", "cublas", "wgmma", "scaled_mm", "matmul", "_mm_", "aten::mm",
              "aten::addmm", "aten::bmm")),
    ("fp8 cast / amax / transpose", ("fp8", "float8", "amax", "abs_max", "quantize", "cast_transpose", "e4m3", "e5m2")),
    ("norm", ("norm", "rms")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("loss / softmax", ("softmax", "cross_entropy", "nll", "logsumexp")),
    ("elementwise / fused", ("triton", "elementwise", "vectorized", "reduce", "copy", "fill")),
)


def kernel_family(name):
    low = name.lower()
    for family, needles in KERNEL_FAMILIES:
        if any(n in low for n in needles):
            return family
    return "other"


def profile_steps(step, start, n, device):
    """n more training steps under torch.profiler: device time per kernel family (ms per step) and the largest
    kernels. On the CPU (tests) the CPU self time of the ops is summed instead."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    if device == "cuda":
        torch.cuda.synchronize()
    with profile(activities=acts) as prof:
        for j in range(n):
            step(start + j)
        if device == "cuda":
            torch.cuda.synchronize()
    rows = []
    extra = {}
    if device == "cuda":
        # Kernels, copies and memsets from the trace itself: key_averages() summed 14-20 % less device time than
        # the kernels' own durations (plbench/trace.py).
        activity = trace.device_activity(trace.trace_events(prof))
        rows = [(name, ms, calls) for name, (ms, calls) in trace.per_name_ms(activity, n).items()]
        busy, idle = trace.busy_and_idle_us(activity)
        extra = {"busy_ms_per_step": busy / 1000.0 / n, "idle_ms_per_step": idle / 1000.0 / n}
    else:
        for ev in prof.key_averages():
            us = getattr(ev, "self_cpu_time_total", 0)
            if us > 0:
                rows.append((ev.key, us / 1000.0 / n, ev.count))
    families = {}
    for key, ms, _ in rows:
        fam = kernel_family(key)
        families[fam] = families.get(fam, 0.0) + ms
    total = sum(families.values())
    top = sorted(rows, key=lambda r: -r[1])[:30]
    out = {"steps": n, "clock": "device" if device == "cuda" else "cpu", "total_ms_per_step": total,
           "families_ms_per_step": dict(sorted(families.items(), key=lambda kv: -kv[1])),
           "top_kernels": [{"name": k[:160], "ms_per_step": ms, "calls": c} for k, ms, c in top]}
    out.update(extra)
    return out


def measure_overhead(rc, backend, step, start, n, harness_span_ms, clock, rounds=3):
    """Harness overhead: the same training steps timed two ways, alternating `rounds` times so drift cancels:
    a bare loop (one event pair around n steps; nothing per step) and the harness loop (events around every
    step, the loss kept on the device, progress events). overhead = median over rounds of harness / bare - 1."""
    pairs = []
    k = start
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            clock.sync()
            a = clock.mark()
            for j in range(n):
                step(k)
                k += 1
            b = clock.mark()
            clock.sync()
            bare = clock.ms(a, b)
            marks, dev_losses = [], []
            for j in range(n):
                x = clock.mark()
                loss = step(k)
                k += 1
                dev_losses.append(loss.detach())
                y = clock.mark()
                marks.append((x, y))
                if (j + 1) % max(1, n // 20) == 0 or j == 0:
                    rc.emitter.emit("progress", phase="overhead", step=r * n + j + 1, total=rounds * n,
                                    backend=backend)
            clock.sync()
            pairs.append((bare, clock.ms(marks[0][0], marks[-1][1])))
    finally:
        gc.enable()
    pcts = [(h / b - 1.0) * 100.0 for b, h in pairs]
    ov = {
        "rounds": [{"bare_loop_ms": b, "harness_loop_ms": h, "overhead_pct": p} for (b, h), p in zip(pairs, pcts)],
        "steps_per_loop": n,
        "overhead_pct": percentile(pcts, 50),
        "bare_loop_ms": percentile([b for b, _ in pairs], 50),
        "harness_loop_ms": percentile([h for _, h in pairs], 50),
        "method": "bare loop (one CUDA event pair around N steps, no per-step events, no loss kept, no progress "
                  "events) and the harness loop over N further steps of the same model, alternated %d times; "
                  "median of harness/bare - 1" % rounds,
    }
    log("[%s] harness overhead vs bare loop: %+.2f %% (rounds: %s)" % (
        backend, ov["overhead_pct"], ", ".join("%+.2f" % p for p in pcts)))
    return ov


def gemm_shapes(model, wl):
    """The workload's largest FP8-eligible GEMM and its lm-head GEMM, as (M, N, K) with M = tokens per step."""
    hp = te_convert.find_high_precision(model, wl.high_precision)
    best, head = None, None
    for name, m in model.named_modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        shape = (wl.tokens_per_step, m.out_features, m.in_features)
        if name in hp:
            if head is None or m.out_features * m.in_features > head[1][1] * head[1][2]:
                head = (name, shape)
        elif fp8_torch.fp8_shape_ok(m.in_features, m.out_features):
            if best is None or m.out_features * m.in_features > best[1][1] * best[1][2]:
                best = (name, shape)
    return {"largest": best, "lm_head": head}


def _time_op(fn, iters=20, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        times.append((a, b))
    torch.cuda.synchronize()
    return percentile([a.elapsed_time(b) for a, b in times], 50)


def gemm_roofline(m, n, k, fp8_ok):
    """TFLOP/s of Y[M,N] = X[M,K] @ W[N,K]^T: torch.matmul in BF16 and torch._scaled_mm with operands already in
    E4M3 (the tensor-core rate; the cast cost is in the training step, not here). Random data, median of 20."""
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    flops = 2.0 * m * n * k
    ms = _time_op(lambda: torch.matmul(x, w.t()))
    out = {"m": m, "n": n, "k": k, "bf16_ms": ms, "bf16_tflops": flops / ms / 1e9, "fp8_ms": None, "fp8_tflops": None,
           "ratio": None}
    if fp8_ok:
        x8 = x.to(fp8_torch.FP8_DTYPES["e4m3"])
        w8 = w.to(fp8_torch.FP8_DTYPES["e4m3"])
        one = torch.ones((), device="cuda", dtype=torch.float32)
        ms8 = _time_op(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        out.update(fp8_ms=ms8, fp8_tflops=flops / ms8 / 1e9, ratio=ms / ms8)
        del x8, w8
    del x, w
    torch.cuda.empty_cache()
    return out


def roofline(rc, fp8_ok):
    shapes = rc.gemm_shapes or {}
    res = {"method": "Y = X @ W^T, M = tokens per step; torch.matmul (BF16) vs torch._scaled_mm (E4M3 operands, "
                     "per-tensor scales, BF16 out); CUDA events, median of 20 after 5 warm-up runs"}
    for key in ("largest", "lm_head"):
        item = shapes.get(key)
        if not item:
            continue
        name, (m, n, k) = item
        rc.emitter.emit("progress", phase="roofline", step=1 if key == "largest" else 2, total=2, backend=None)
        r = gemm_roofline(m, n, k, fp8_ok)
        r["layer"] = name
        res[key] = r
    return res
