#!/usr/bin/env python3
"""The measured table behind the FP8 gain prediction (issue 22; server/src/analysis/gain.ts reads it, docs/gain.md).

For a grid of (tokens M, in_features K, out_features N) it times one Linear's training step (forward, then backward:
dgrad + wgrad) per backend, INCLUDING the casts each backend adds, against BF16 nn.Linear in the same process:

  bf16                 nn.Linear(K, N, bias=False), FP32 master weight, under torch.autocast(bfloat16)  (the baseline)
  te-delayed           te.Linear, forward under torch.autocast(bf16) + te.autocast(DelayedScaling(HYBRID, 16, "max"))
  te-current           te.Linear, the same with Float8CurrentScaling(HYBRID)
  torchao-tensorwise   torchao convert_to_float8_training, Float8LinearConfig.from_recipe_name("tensorwise")
  torchao-rowwise      the same, "rowwise"
  torch-fp8            bench/plbench/fp8_torch.py's per-tensor torch._scaled_mm Linear (no TE, no torchao)

Eager by default (the te-* rows: TE's fused kernels need no compiler, and DelayedScaling refuses torch.compile).
--compile measures the way torchao is run: every layer (bf16 and FP8 alike, so the ratio compares like with like)
wrapped in torch.compile (Inductor), compiled before it is timed; the compile time is logged, not timed. Shapes
(--compile-shapes): "dynamic" (default) compiles each backend's layer once for the whole grid, before it, at
8192 x 4096 x 4096 with every input and parameter dim marked dynamic (one shape-generic graph serves every (M, K, N)); "per-kn" once per (K, N) column with
the tokens M marked dynamic; "static" once per cell (dynamic=False: what a fixed-shape model compiles, 3 x 180
compiles for the full grid: longer than the budget). Dynamo is reset between columns for per-kn / static, the
recompile limits are raised so no cell silently falls back to eager. In dynamic / per-kn mode a few cells are
measured again compiled static at the end (--static-check N) and listed beside the grid's figure
(static_check): how far the shape-generic kernels are from a fixed-shape model's. --compile writes
gemm-table-compiled.json (+ -log.txt) with "compiled": true, no block table and no host fit (those are in the eager
table); bench/tools/gain_data.py merges it into the shipped table (docs/gain.md).

Every backend runs the same thing: x [M, K] bf16 (requires grad), y = layer(x) in the forward region, y.backward(dy)
outside it, the gradients set to None before each iteration. Per iteration three CUDA events (before the forward,
after it, after the backward), no synchronisation inside the loop (so a launch-bound small layer is timed as it runs
in an eager model: CPU gaps count); median over the repeats after warm-up. The cells of one (M, K, N) run back to back
for every backend, so their ratio compares like with like. ratio = BF16 time / backend time (> 1: FP8 is faster).

Also, per (M, width H): the non-GEMM time of a transformer block (two LayerNorms, causal SDPA attention with head dim
128 (64 where H % 128), GELU on 4H, SwiGLU's silu(a) * b on 4H, two residual adds; forward + backward, bf16 autocast),
the BF16 lm-head GEMM (H -> vocab) and the cross-entropy over the vocabulary, and AdamW's time per parameter: what a
model-level estimate adds to the GEMMs (docs/gain.md).

    python3 bench/tools/gemm_table.py --out DIR [--quick] [--device cuda|cpu] [--budget-s 240] [--backends LIST]
    python3 bench/tools/gemm_table.py --compile --out DIR [--budget-s 180] [--compile-shapes dynamic|per-kn|static]

Writes DIR/gemm-table.json and DIR/gemm-table-log.txt (--compile: DIR/gemm-table-compiled.json, -compiled-log.txt). --device cpu runs a tiny grid on the CPU for the tests: the JSON
says "not_a_benchmark": true and its ratios mean nothing. A missing library (TE, torchao) marks its backends
unavailable with the reason; the others still run. A failing cell is null with the error in the backend's errors[].
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

SCHEMA = "precision-lens/gemm-table"
SCHEMA_VERSION = 2
ALL_BACKENDS = ("bf16", "te-delayed", "te-current", "torchao-tensorwise", "torchao-rowwise", "torch-fp8")
GRID_FULL = {"m": [128, 512, 2048, 8192, 32768], "k": [768, 1024, 2048, 4096, 8192, 14336],
             "n": [768, 1024, 2048, 4096, 8192, 14336]}
GRID_QUICK_CUDA = {"m": [512, 8192], "k": [1024, 4096], "n": [1024, 4096]}
GRID_CPU = {"m": [16, 32], "k": [16, 32], "n": [16, 32]}
WIDTHS_FULL = [768, 1024, 2048, 4096, 8192]
WIDTHS_QUICK_CUDA = [1024, 4096]
WIDTHS_CPU = [16, 32]


class Log(object):
    def __init__(self, path):
        self.f = open(path, "w") if path else None
        self.t0 = time.time()

    def __call__(self, *parts):
        line = "[%7.1fs] %s" % (time.time() - self.t0, " ".join(str(p) for p in parts))
        print(line, file=sys.stderr, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


def parse_list(text):
    return [int(v) for v in text.split(",") if v.strip()]


# ---------------------------------------------------------------------------------------------------------- backends

# Tests only: let the fake TE / torchao packages of bench/tests run on the CPU, to exercise those code paths.
FAKES_ON_CPU = os.environ.get("PL_GEMM_TABLE_TEST_FAKES") == "1"


def load_te(torch, device):
    """(te, recipe module, api, version, reason): reason is None when te.Linear can run in FP8 here."""
    if device != "cuda" and not FAKES_ON_CPU:
        return None, None, None, None, "Transformer Engine needs a CUDA GPU (this run is --device %s)" % device
    try:
        import transformer_engine
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe as recipe_mod
    except Exception as exc:
        return None, None, None, None, "Transformer Engine not importable: %s: %s" % (type(exc).__name__, exc)
    version = getattr(transformer_engine, "__version__", None)
    try:
        from plbench.envprobe import te_api
        api = te_api(te, version)  # TE >= 2.9: te.autocast(recipe=...); older: te.fp8_autocast(fp8_recipe=...)
    except Exception:
        api = "autocast" if hasattr(te, "autocast") else "fp8_autocast"
    try:
        if hasattr(te, "is_fp8_available"):
            ok = te.is_fp8_available(return_reason=True)
        else:
            from transformer_engine.pytorch.fp8 import check_fp8_support
            ok = check_fp8_support()
        ok, why = (ok if isinstance(ok, tuple) else (bool(ok), ""))
        if not ok:
            return te, recipe_mod, api, version, "FP8 not available on this GPU: %s" % why
    except Exception as exc:
        return te, recipe_mod, api, version, "TE's FP8 check failed: %s: %s" % (type(exc).__name__, exc)
    return te, recipe_mod, api, version, None


def load_torchao(device):
    try:
        from plbench import fp8_torchao
        info = fp8_torchao.load_torchao()
    except Exception as exc:
        return None, None, "torchao loader failed: %s: %s" % (type(exc).__name__, exc)
    reason = fp8_torchao.unavailable_reason(info)
    if reason is None and device != "cuda" and not FAKES_ON_CPU:
        reason = "torchao float8 training needs a CUDA GPU with FP8 (this run is --device %s)" % device
    return info, info.get("version"), reason


class Backends(object):
    """Builds one Linear per backend and gives its forward region."""

    def __init__(self, torch, device, wanted, log, compiler=None):
        import contextlib
        self.torch, self.device, self.log = torch, device, log
        self.compiler = compiler
        self.nullcontext = contextlib.nullcontext
        self.info = {}
        if compiler is not None:  # a compiled run measures no TE backend: TE is not even imported
            te, recipe_mod, api, te_version, te_reason = None, None, None, None, "not asked for (--backends)"
        else:
            te, recipe_mod, api, te_version, te_reason = load_te(torch, device)
        self.te, self.te_api, self.te_version = te, api, te_version
        self.recipes = {}
        for name, kind in (("te-delayed", "delayed"), ("te-current", "current")):
            reason, text = te_reason, None
            if reason is None:
                try:
                    from plbench.te_convert import make_recipe
                    self.recipes[name], text = make_recipe(recipe_mod, kind)
                except Exception as exc:
                    reason = "recipe failed: %s: %s" % (type(exc).__name__, exc)
            self.info[name] = {"available": reason is None, "reason": reason, "recipe": text,
                               "library": "transformer_engine %s" % te_version if te_version else None}
        ao, ao_version, ao_reason = load_torchao(device)
        self.ao, self.ao_version = ao, ao_version
        for name in ("torchao-tensorwise", "torchao-rowwise"):
            self.info[name] = {"available": ao_reason is None, "reason": ao_reason,
                               "recipe": "Float8LinearConfig.from_recipe_name(%r)" % name.split("-")[1],
                               "library": "torchao %s" % ao_version if ao_version else None}
        fp8_reason = None
        try:
            from plbench import fp8_torch
            self.fp8_torch = fp8_torch
            if device == "cuda" and not fp8_torch.has_native_fp8():
                fp8_reason = "torch._scaled_mm with float8 needs torch >= 2.1 and a GPU with SM >= 8.9"
        except Exception as exc:
            self.fp8_torch = None
            fp8_reason = "plbench.fp8_torch failed to import: %s: %s" % (type(exc).__name__, exc)
        self.info["torch-fp8"] = {"available": fp8_reason is None, "reason": fp8_reason,
                                  "recipe": "per-tensor dynamic scaling, E4M3 forward, E5M2 gradients" + (
                                      " (emulated in fp32 on the CPU)" if device != "cuda" else ""),
                                  "library": None}
        self.info["bf16"] = {"available": True, "reason": None, "recipe": None, "library": None}
        for name in ALL_BACKENDS:
            if name not in wanted:
                self.info[name].update(available=False, reason="not asked for (--backends)")
        for name in ALL_BACKENDS:
            i = self.info[name]
            log("backend %-19s %s" % (name, "ok" if i["available"] else "UNAVAILABLE: %s" % i["reason"]))

    def build(self, name, k, n, compiled=False, static=False):
        """The backend's Linear(K, N); compiled=True wraps it in torch.compile where this run is --compile."""
        mod = self._build(name, k, n)
        if compiled and self.compiler is not None:
            # Every backend compiled as the same wrapper (torchao's conversion needs a parent module): dynamo keeps a
            # compiled module's own parameters at static shapes, a child's follow force_parameter_static_shapes.
            if not isinstance(mod, self.torch.nn.Sequential):
                mod = self.torch.nn.Sequential(mod)
            if type(mod[0]) is self.torch.nn.Linear:
                # dynamo keeps the parameters of torch.nn's own modules at static shapes (a graph per (K, N));
                # torchao's Float8Linear, a subclass, follows force_parameter_static_shapes. The same for bf16: the
                # same forward, in a subclass.
                mod[0].__class__ = _linear_subclass(self.torch)
            if self.compiler.shapes == "dynamic" and not static:
                for p in mod.parameters():
                    self.compiler.mark_all(p)
            mod = self.compiler.wrap(mod, static=static)
        return mod

    def _build(self, name, k, n):
        torch = self.torch
        if name in ("te-delayed", "te-current"):
            return self.te.Linear(k, n, bias=False, params_dtype=torch.float32, device=self.device)
        lin = torch.nn.Linear(k, n, bias=False).to(self.device)
        if name.startswith("torchao-"):
            config = self.ao["config_cls"].from_recipe_name(name.split("-")[1])
            wrapper = torch.nn.Sequential(lin)
            wrapper = self.ao["convert"](wrapper, config=config) or wrapper
            return wrapper
        if name == "torch-fp8":
            return self.fp8_torch.Fp8Linear(lin, out_dtype=torch.bfloat16, emulate=self.device != "cuda")
        return lin

    def region(self, name):
        """The forward region: bf16 autocast, and TE's FP8 autocast inside it for te-*."""
        torch = self.torch
        outer = torch.autocast(self.device, dtype=torch.bfloat16)
        if name in self.recipes:
            te, recipe = self.te, self.recipes[name]
            inner = te.autocast(enabled=True, recipe=recipe) if self.te_api == "autocast" else \
                te.fp8_autocast(enabled=True, fp8_recipe=recipe)
            return _Both(outer, inner)
        return outer


_LINEAR_SUBCLASS = []


def _linear_subclass(torch):
    if not _LINEAR_SUBCLASS:
        class BenchLinear(torch.nn.Linear):
            """nn.Linear as is (its forward), outside torch.nn: dynamo treats its parameters as torchao's."""
        _LINEAR_SUBCLASS.append(BenchLinear)
    return _LINEAR_SUBCLASS[0]


class _Both(object):
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __enter__(self):
        self.a.__enter__()
        try:
            self.b.__enter__()
        except BaseException:
            self.a.__exit__(*sys.exc_info())
            raise

    def __exit__(self, *exc):
        try:
            self.b.__exit__(*exc)
        finally:
            self.a.__exit__(*exc)
        return False


# ----------------------------------------------------------------------------------------------------------- compile

COMPILE_SHAPES = ("dynamic", "per-kn", "static")
# Backends the compiled table measures: torchao is meant to be compiled (eager it costs 90-180 ms of host time per
# call on the H200), torch-fp8 too. TE is not: its kernels are fused already and DelayedScaling refuses torch.compile.
COMPILED_BACKENDS = ("bf16", "torchao-tensorwise", "torchao-rowwise", "torch-fp8")
COMPILED_DEFAULT = ("bf16", "torchao-tensorwise", "torchao-rowwise")
# Recompiles allowed per code object (dynamo's default 8 would send later cells back to eager without a word).
RECOMPILE_LIMIT = 256


def error_text(exc):
    """An exception in one line: its type and its first two non-empty lines (torch's compile errors put the cause on
    the second), 300 characters at most."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()][:2]
    return ("%s: %s" % (type(exc).__name__, " ".join(lines)))[:300]


def compile_unavailable(torch):
    """None when torch.compile can run here, else why not."""
    if not hasattr(torch, "compile"):
        return "torch.compile needs torch >= 2.0 (this is torch %s)" % torch.__version__
    try:
        import torch._dynamo  # noqa: F401
    except Exception as exc:
        return "torch._dynamo failed to import: %s: %s" % (type(exc).__name__, exc)
    return None


class Compiler(object):
    """torch.compile for the grid's layers: which shapes are dynamic, when dynamo is reset, how many graphs it made."""

    def __init__(self, torch, backend, mode, shapes, log):
        import torch._dynamo as dynamo
        self.torch, self.dynamo, self.backend, self.mode, self.shapes, self.log = torch, dynamo, backend, mode, shapes, log
        cfg = dynamo.config
        self.limits = {}
        # recompile_limit / accumulated_recompile_limit (torch >= 2.6); cache_size_limit / accumulated_cache_size_limit before.
        for names, value in ((("recompile_limit", "cache_size_limit"), RECOMPILE_LIMIT),
                             (("accumulated_recompile_limit", "accumulated_cache_size_limit"), 16 * RECOMPILE_LIMIT)):
            for attr in names:
                if hasattr(cfg, attr):
                    setattr(cfg, attr, max(getattr(cfg, attr) or 0, value))
                    self.limits[attr] = getattr(cfg, attr)
                    break
        if shapes == "dynamic" and hasattr(cfg, "force_parameter_static_shapes"):
            # dynamic=True leaves a module's parameter shapes static (a graph per (K, N)): not here.
            cfg.force_parameter_static_shapes = False
            self.limits["force_parameter_static_shapes"] = False
        self.seconds = 0.0
        self.resets = 0
        self.failed = {}  # backend -> why its shape-generic compile failed: static per cell from then on
        self.failed_logged = {}

    def graphs(self):
        """Graphs dynamo has compiled in this process (its own counter; survives resets)."""
        try:
            from torch._dynamo.utils import counters
            return int(counters["stats"]["unique_graphs"])
        except Exception:
            return None

    def wrap(self, mod, static=False):
        dynamic = False if (static or self.shapes == "static") else (True if self.shapes == "dynamic" else None)
        kw = {"backend": self.backend, "dynamic": dynamic}
        if self.mode:
            kw["mode"] = self.mode
        return self.torch.compile(mod, **kw)

    def mark_input(self, x):
        """per-kn: the tokens M of the input are dynamic (one graph per (K, N) column serves every M); dynamic: every
        dim (compiled shape-generic from the first call, with that call's sizes as Inductor's hints)."""
        if self.shapes == "per-kn":
            self.dynamo.mark_dynamic(x, 0)
        elif self.shapes == "dynamic":
            self.mark_all(x)

    def mark_all(self, t):
        mark = getattr(self.dynamo, "maybe_mark_dynamic", None)  # no error where the code specialises a size
        if mark is not None:
            for d in range(t.dim()):
                mark(t, d)

    def new_column(self):
        """per-kn / static: a fresh cache per (K, N) column, so guards never pile up (their check is host time)."""
        if self.shapes != "dynamic":
            self.reset()

    def reset(self):
        self.dynamo.reset()
        self.resets += 1

    def prime(self, phases, sync):
        """Runs one iteration (compiling what is not compiled yet) outside the timing. Returns (seconds, new graphs)."""
        g0 = self.graphs()
        t = time.time()
        for ph in phases:
            ph()
        sync()
        dt = time.time() - t
        self.seconds += dt
        g1 = self.graphs()
        return dt, (g1 - g0 if g0 is not None and g1 is not None else None)

    def describe(self):
        return {"backend": self.backend, "mode": self.mode, "shapes": self.shapes, "limits": dict(self.limits),
                "compile_seconds": round(self.seconds, 1), "graphs": self.graphs(), "resets": self.resets}


# ------------------------------------------------------------------------------------------------------------ timing

class Timer(object):
    """Per-iteration phase times in ms.

    On the GPU the device time is measured with the CPU running ahead: a spin kernel (torch.cuda._sleep) is queued first,
    long enough for the host to enqueue every measured iteration behind it, so the CUDA events between phases time the
    kernels back to back, without the host's launch gaps. That is what a layer costs inside a model whose host work
    overlaps the GPU (any model that is not launch-bound). The host's own time per iteration (Python, autograd, the
    library's bookkeeping: what a launch-bound model pays) is measured apart, as the wall time of enqueueing. A model
    estimate takes the larger of the two sums (docs/gain.md). ran_ahead says whether the GPU was still busy with the
    spin when the host finished enqueueing (if not, host gaps may have leaked into the device times: the run is
    retried once with a longer spin). On the CPU both are time.perf_counter.
    """

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device == "cuda"
        self.cycles_per_ms = None
        self.last_host_ms = None
        self.last_ran_ahead = None
        self.not_ahead = 0

    def _calibrate(self):
        torch = self.torch
        if self.cycles_per_ms is None:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            torch.cuda._sleep(1000000)  # warm the kernel
            a.record()
            torch.cuda._sleep(20000000)
            b.record()
            torch.cuda.synchronize()
            self.cycles_per_ms = 20000000 / max(a.elapsed_time(b), 1e-3)
        return self.cycles_per_ms

    def _enqueue(self, phases, iters, spin_ms):
        torch = self.torch
        marks = [[torch.cuda.Event(enable_timing=True) for _ in range(len(phases) + 1)] for _ in range(iters)]
        after_spin = torch.cuda.Event()
        torch.cuda.synchronize()
        if spin_ms > 0:
            torch.cuda._sleep(int(spin_ms * self._calibrate()))
        after_spin.record()
        t = time.perf_counter()
        for it in range(iters):
            ev = marks[it]
            ev[0].record()
            for i, ph in enumerate(phases):
                ph()
                ev[i + 1].record()
        host_ms = (time.perf_counter() - t) * 1e3
        ahead = not after_spin.query()  # the spin still running: the GPU never waited for the host
        torch.cuda.synchronize()
        gpu = [[marks[it][i].elapsed_time(marks[it][i + 1]) for it in range(iters)] for i in range(len(phases))]
        return gpu, host_ms, ahead

    def run(self, phases, iters, host_estimate_ms=None):
        """phases: callables run in order each iteration. Returns per-phase lists of device ms; self.last_host_ms is
        the host's ms per iteration."""
        torch = self.torch
        if self.cuda:
            if host_estimate_ms is None:  # no estimate: a short unspun pass gives one
                _, h, _ = self._enqueue(phases, 1, 0)
                host_estimate_ms = h
            spin = min(8000.0, 2.0 + 1.5 * host_estimate_ms * iters)
            gpu, host, ahead = self._enqueue(phases, iters, spin)
            # The spin ended before the host finished: harmless where the GPU had more work per iteration than the host
            # (it never waited), else the host's gaps may be in the device times: once more with a longer spin.
            gpu_bound = lambda g, h: sum(statistics.median(p) for p in g) >= h / max(iters, 1)  # noqa: E731
            if not ahead and not gpu_bound(gpu, host):
                gpu, host, ahead = self._enqueue(phases, iters, min(16000.0, 4.0 * spin))
                ahead = ahead or gpu_bound(gpu, host)
            if not ahead:
                self.not_ahead += 1
            self.last_host_ms, self.last_ran_ahead = host / max(iters, 1), ahead
            return gpu
        out = [[] for _ in phases]
        t0 = time.perf_counter()
        for _ in range(iters):
            for i, ph in enumerate(phases):
                t = time.perf_counter()
                ph()
                out[i].append((time.perf_counter() - t) * 1e3)
        self.last_host_ms, self.last_ran_ahead = (time.perf_counter() - t0) * 1e3 / max(iters, 1), True
        return out

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def linear_step(torch, mods, region, x, dy):
    """One iteration over a group of identical-shape layers: each applied to x inside ONE forward region (as the
    layers of a model share the step's autocast), then one backward through all of them."""
    state = {}
    if not isinstance(mods, (list, tuple)):
        mods = [mods]
    params = [p for mod in mods for p in mod.parameters()]

    def fwd():
        for p in params:
            p.grad = None
        x.grad = None
        with region():
            state["y"] = [mod(x) for mod in mods]

    def bwd():
        torch.autograd.backward(state.pop("y"), [dy] * len(mods))
    return [fwd, bwd]


def measure_repeats(timer, phases, warmup, repeats, group=1):
    """Median device ms per phase and host ms per iteration, each divided by the group size (ms per layer)."""
    timer.run(phases, warmup)
    host_est = timer.last_host_ms
    times = timer.run(phases, repeats, host_estimate_ms=host_est)
    meds = [statistics.median(t) / group for t in times]
    return meds, timer.last_host_ms / group


def repeats_for(est_ms, per_cell_ms, lo, hi):
    if est_ms <= 0:
        return hi
    return int(max(lo, min(hi, per_cell_ms // est_ms)))


# -------------------------------------------------------------------------------------------------------- the tables

def nested(shape, fill=None):
    if len(shape) == 1:
        return [fill] * shape[0]
    return [nested(shape[1:], fill) for _ in range(shape[0])]


def add_ratios(out, names, shape):
    """ratio / ratio_fwd / ratio_bwd = BF16 time / backend time of the same cell (None where either is missing)."""
    base = out.get("bf16")
    for name in names:
        cell = out[name]
        for key, src in (("ratio", "total_ms"), ("ratio_fwd", "fwd_ms"), ("ratio_bwd", "bwd_ms")):
            r = nested(shape)
            for a in range(shape[0]):
                for b_ in range(shape[1]):
                    for c in range(shape[2]):
                        t = cell[src][a][b_][c]
                        t0 = base[src][a][b_][c] if base else None
                        r[a][b_][c] = round(t0 / t, 4) if (t and t0) else None
            cell[key] = r


def linear_table(torch, be, timer, grid, names, args, log, budget_end, checkpoint=None):
    m_list, k_list, n_list = grid["m"], grid["k"], grid["n"]
    shape = (len(m_list), len(k_list), len(n_list))
    out = {}
    comp = be.compiler
    for name in names:
        out[name] = {"fwd_ms": nested(shape), "bwd_ms": nested(shape), "total_ms": nested(shape),
                     "host_ms": nested(shape), "repeats": nested(shape), "group": nested(shape), "errors": []}
        if comp:  # seconds the cell's first iteration took (compiling what was new), and the graphs it made
            out[name].update(compile_s=nested(shape), graphs=nested(shape))
    dev = be.device
    # Calibration: the BF16 step at the grid's corners; a cost model (ms per GFLOP plus a floor) scales the repeats.
    est = {}
    cal = []
    for (m, k, n) in sorted({(m_list[0], k_list[0], n_list[0]), (m_list[-1], k_list[-1], n_list[-1]),
                             (m_list[len(m_list) // 2], k_list[len(k_list) // 2], n_list[len(n_list) // 2])}):
        try:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
            dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
            mod = be.build("bf16", k, n)  # eager, also in a compiled run: it only scales the repeats
            phases = linear_step(torch, mod, lambda: be.region("bf16"), x, dy)
            (f, b), _ = measure_repeats(timer, phases, 1, 3)
            cal.append((6.0 * m * k * n / 1e9, f + b))
            log("calibration bf16 M=%d K=%d N=%d: %.3f ms" % (m, k, n, f + b))
            del x, dy, mod
        except Exception as exc:
            log("calibration M=%d K=%d N=%d failed: %s: %s" % (m, k, n, type(exc).__name__, exc))
    floor = min([t for _, t in cal] or [0.1])
    slope = max([(t - floor) / g for g, t in cal if g > 0] or [1.0 / 700.0])
    slope = max(slope, 1e-9)
    for m in m_list:
        for k in k_list:
            for n in n_list:
                est[(m, k, n)] = floor + slope * 6.0 * m * k * n / 1e9
    if comp and comp.shapes == "dynamic":
        # One graph per backend serves the grid. dynamo compiles the first shapes it sees static and the first that
        # differ shape-generic (automatic dynamic shapes), and Inductor tunes its kernels for the sizes it compiles
        # with: so each backend is compiled at two typical training layers near the middle of the grid (every dim
        # different, M, K, N distinct so none is tied to another), not at the grid's first and smallest cells. Before
        # the repeats are set: the compile time comes out of the budget.
        first = representative_cell(grid)
        for name in names:
            out[name]["compile_prime"] = []
            for (m, k, n) in [first] + [c for c in [second_cell(grid, first)] if c]:
                try:
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
                    comp.mark_input(x)
                    cs, ng = comp.prime(linear_step(torch, be.build(name, k, n, compiled=True), (lambda nm=name: be.region(nm)),
                                                    x, dy), timer.sync)
                    out[name]["compile_prime"].append({"m": m, "k": k, "n": n, "compile_s": round(cs, 3), "graphs": ng})
                    log("compiled %s at M=%d K=%d N=%d: %.1f s, %s graph(s)" % (name, m, k, n, cs, ng))
                    del x, dy
                except Exception as exc:  # the grid's cells compile this backend static (static_fallback)
                    log("compiling %s at M=%d K=%d N=%d failed: %s" % (name, m, k, n, error_text(exc)))
                    comp.failed[name] = error_text(exc)
                    break
    n_avail = len(names)
    # Every backend costs about the BF16 time or less (FP8 GEMMs, plus casts); budget ~ sum(est) * backends * iters.
    total_est = sum(est.values()) * n_avail
    left = max(1.0, budget_end - time.time())
    iters = max(args.min_repeats + args.warmup, min(args.max_repeats + args.warmup, int(left * 1e3 * 0.6 / max(total_est, 1e-6))))
    per_cell_ms = max(total_est / len(est) / n_avail, 1e-3) * iters
    log("cost model: %.3f ms + %.4f ms/GFLOP; grid estimate %.1f s per iteration of every backend; ~%d iterations a cell"
        % (floor, slope, total_est / 1e3, iters))
    for k_i, k in enumerate(k_list):
        for n_i, n in enumerate(n_list):
            mods = {}
            if comp:
                comp.new_column()
            # A group of identical layers per forward region (ms per layer = group time / group): the per-region cost
            # of an autocast is shared as in a model. Big cells need no sharing (and memory): fewer layers there.
            g_kn = max(1, min(args.group, int(args.group_target_ms // max(est[(m_list[0], k, n)], 1e-6))))
            for name in names:
                try:
                    mods[name] = [be.build(name, k, n, compiled=True) for _ in range(g_kn)]
                except Exception as exc:
                    out[name]["errors"].append({"m": None, "k": k, "n": n, "error": "build: %s: %s" % (type(exc).__name__, exc)})
                    log("%s build K=%d N=%d failed: %s: %s" % (name, k, n, type(exc).__name__, exc))
            for m_i, m in enumerate(m_list):
                hurry = time.time() > budget_end
                g = max(1, min(g_kn, int(args.group_target_ms // max(est[(m, k, n)], 1e-6))))
                reps = args.min_repeats if hurry else repeats_for(est[(m, k, n)] * g, per_cell_ms, args.min_repeats, args.max_repeats)
                try:
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
                    dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
                    if comp:
                        comp.mark_input(x)
                except Exception as exc:
                    for name in names:
                        out[name]["errors"].append({"m": m, "k": k, "n": n, "error": "inputs: %s" % exc})
                    continue
                line = []
                for name in names:
                    if name not in mods:
                        continue
                    try:
                        phases = linear_step(torch, mods[name][:g], (lambda nm=name: be.region(nm)), x, dy)
                        cell = out[name]
                        if comp:
                            try:
                                if name in comp.failed:
                                    raise RuntimeError(comp.failed[name])
                                cs, ng = comp.prime(phases, timer.sync)
                            except Exception as exc:
                                if comp.shapes == "static":
                                    raise
                                # Shape-generic compiling failed (torchao's subclasses have had dynamic-shape bugs):
                                # this cell, and the backend's later ones, compiled static instead, and said so (an
                                # emergency path: its graphs pile up in dynamo's cache, whose guard checks are host time).
                                msg = comp.failed.get(name) or error_text(exc)
                                cell.setdefault("static_fallback", []).append({"m": m, "k": k, "n": n, "error": msg})
                                if not comp.failed_logged.get(name):
                                    log("%s M=%d K=%d N=%d: %s compile failed (%s): compiled static from here on" % (
                                        name, m, k, n, comp.shapes, msg))
                                    comp.failed_logged[name] = True
                                comp.failed[name] = msg
                                one = [be.build(name, k, n, compiled=True, static=True) for _ in range(g)]
                                xs = x.detach().clone().requires_grad_(True)  # without x's dynamic marks
                                phases = linear_step(torch, one, (lambda nm=name: be.region(nm)), xs, dy)
                                cs, ng = comp.prime(phases, timer.sync)
                            cell["compile_s"][m_i][k_i][n_i] = round(cs, 3)
                            cell["graphs"][m_i][k_i][n_i] = ng
                        (f, b), host = measure_repeats(timer, phases, args.warmup, reps, group=g)
                        cell["fwd_ms"][m_i][k_i][n_i] = round(f, 5)
                        cell["bwd_ms"][m_i][k_i][n_i] = round(b, 5)
                        cell["total_ms"][m_i][k_i][n_i] = round(f + b, 5)
                        cell["host_ms"][m_i][k_i][n_i] = round(host, 5)
                        cell["repeats"][m_i][k_i][n_i] = reps
                        cell["group"][m_i][k_i][n_i] = g
                        line.append("%s %.3f/%.3f" % (name, f + b, host))
                    except Exception as exc:
                        msg = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")
                        out[name]["errors"].append({"m": m, "k": k, "n": n, "error": msg})
                        line.append("%s FAILED" % name)
                        log("%s M=%d K=%d N=%d failed: %s" % (name, m, k, n, msg))
                        if dev == "cuda" and "out of memory" in msg.lower():
                            torch.cuda.empty_cache()
                base = out.get("bf16", {}).get("total_ms")
                ratios = []
                if base and base[m_i][k_i][n_i]:
                    for name in names:
                        t = out[name]["total_ms"][m_i][k_i][n_i]
                        if name != "bf16" and t:
                            ratios.append("%s %.2fx" % (name, base[m_i][k_i][n_i] / t))
                log("M=%-6d K=%-6d N=%-6d x%-3d g%d ms gpu/host: %s | %s" % (m, k, n, reps, g, ", ".join(line), ", ".join(ratios)))
                del x, dy
            del mods
            if dev == "cuda":
                torch.cuda.empty_cache()
            if checkpoint:  # a timeout still leaves every finished (K, N) column in the JSON
                add_ratios(out, names, shape)
                checkpoint(out)
    add_ratios(out, names, shape)
    return out


STATIC_CHECK_CELLS = ((8192, 4096, 4096), (32768, 8192, 8192), (2048, 1024, 1024), (8192, 2048, 8192))


def representative_cell(grid):
    """A typical training layer of the grid: 8192 x 4096 x 4096 where the grid has it, else its middle cell."""
    c = STATIC_CHECK_CELLS[0]
    if c[0] in grid["m"] and c[1] in grid["k"] and c[2] in grid["n"]:
        return c
    return grid["m"][len(grid["m"]) // 2], grid["k"][len(grid["k"]) // 2], grid["n"][len(grid["n"]) // 2]


def second_cell(grid, first):
    """The grid cell nearest `first` (in log space) whose M, K, N all differ from first's and from each other; the
    larger on a tie. None if the grid has none."""
    best = None
    for m in grid["m"]:
        for k in grid["k"]:
            for n in grid["n"]:
                if m == first[0] or k == first[1] or n == first[2] or len({m, k, n}) < 3:
                    continue
                d = sum(math.log(a / b) ** 2 for a, b in zip((m, k, n), first))
                key = (d, -m * k * n)
                if best is None or key < best[0]:
                    best = (key, (m, k, n))
    return best[1] if best else None


def static_check(torch, be, timer, grid, names, tables, args, log, budget_end):
    """In a dynamic / per-kn compiled run: a few cells again with every backend compiled static (dynamic=False, as a
    fixed-shape model compiles them), beside the grid's figure: how far the shape-generic kernels are."""
    comp = be.compiler
    cells = [c for c in STATIC_CHECK_CELLS if c[0] in grid["m"] and c[1] in grid["k"] and c[2] in grid["n"]]
    if not cells:
        cells = [representative_cell(grid)]
    out = []
    dev = be.device
    for (m, k, n) in cells[:args.static_check]:
        if time.time() > budget_end:
            log("static check: out of time before M=%d K=%d N=%d" % (m, k, n))
            break
        comp.reset()
        mi, ki, ni = grid["m"].index(m), grid["k"].index(k), grid["n"].index(n)
        row = {"m": m, "k": k, "n": n, "static_ms": {}, "grid_ms": {}, "static_ratio": {}, "grid_ratio": {}, "errors": {}}
        try:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
            dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
        except Exception as exc:
            log("static check M=%d K=%d N=%d: inputs failed: %s" % (m, k, n, exc))
            continue
        for name in names:
            try:
                g = tables[name]["group"][mi][ki][ni] or 1  # as many layers per region as the grid's cell
                mods = [be.build(name, k, n, compiled=True, static=True) for _ in range(g)]
                phases = linear_step(torch, mods, (lambda nm=name: be.region(nm)), x, dy)
                comp.prime(phases, timer.sync)
                (f, b), _ = measure_repeats(timer, phases, args.warmup, args.max_repeats, group=g)
                row["static_ms"][name] = round(f + b, 5)
                row["grid_ms"][name] = tables[name]["total_ms"][mi][ki][ni]
                del mods
            except Exception as exc:
                row["errors"][name] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")
        base_s, base_g = row["static_ms"].get("bf16"), row["grid_ms"].get("bf16")
        for name in names:
            if name != "bf16":
                t_s, t_g = row["static_ms"].get(name), row["grid_ms"].get(name)
                row["static_ratio"][name] = round(base_s / t_s, 4) if base_s and t_s else None
                row["grid_ratio"][name] = round(base_g / t_g, 4) if base_g and t_g else None
        log("static check M=%d K=%d N=%d ms static/grid: %s | ratio static/grid: %s%s" % (
            m, k, n, ", ".join("%s %s/%s" % (nm, row["static_ms"].get(nm), row["grid_ms"].get(nm)) for nm in names),
            ", ".join("%s %s/%s" % (nm, row["static_ratio"][nm], row["grid_ratio"][nm]) for nm in row["static_ratio"]),
            (" | errors: %s" % row["errors"]) if row["errors"] else ""))
        out.append(row)
        del x, dy
        if dev == "cuda":
            torch.cuda.empty_cache()
    return out


def host_fit(torch, be, timer, names, args, log):
    """The host's cost split into a part per forward region (autocast enter/exit; for TE the scaling bookkeeping of the
    step) and a part per layer: host ms per iteration with G = 1, 2, 4, 8, 16 identical layers in one region, a least
    squares line host = per_region + G * per_layer, per backend, at M tokens and K = N = each of --host-fit-widths.
    A model pays per_region once per step and per_layer for each layer (docs/gain.md)."""
    dev = be.device
    groups = [1, 2, 4, 8, 16] if dev == "cuda" else [1, 2, 4]
    m = 2048 if dev == "cuda" else 16
    widths = [1024, 2048] if dev == "cuda" else [16]
    out = {}
    for name in names:
        pts = []
        try:
            for w in widths:
                mods = [be.build(name, w, w) for _ in range(groups[-1])]
                x = torch.randn(m, w, device=dev, dtype=torch.bfloat16, requires_grad=True)
                dy = torch.randn(m, w, device=dev, dtype=torch.bfloat16)
                for g in groups:
                    _, host = measure_repeats(timer, linear_step(torch, mods[:g], (lambda nm=name: be.region(nm)), x, dy),
                                              args.warmup, args.block_repeats, group=1)
                    pts.append((w, g, round(host, 5)))
                del mods, x, dy
            n = len(pts)
            gx = [p[1] for p in pts]
            hy = [p[2] for p in pts]
            mx, my = sum(gx) / n, sum(hy) / n
            sxx = sum((v - mx) ** 2 for v in gx)
            slope = sum((gx[i] - mx) * (hy[i] - my) for i in range(n)) / sxx if sxx else 0.0
            icpt = my - slope * mx
            out[name] = {"per_region_ms": round(max(icpt, 0.0), 5), "per_layer_ms": round(max(slope, 0.0), 5),
                         "points": [{"width": w, "group": g, "host_ms": h} for w, g, h in pts], "m": m}
            log("host fit %-19s per region %.3f ms + per layer %.3f ms (M=%d, widths %s, groups %s)"
                % (name, icpt, slope, m, widths, groups))
        except Exception as exc:
            out[name] = {"error": "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")}
            log("host fit %s failed: %s" % (name, out[name]["error"]))
        if dev == "cuda":
            torch.cuda.empty_cache()
    return out


def attention(torch, F, q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def hand_rmsnorm(torch, dim, eps=1e-5):
    """The RMSNorm models write out (Llama's reference code, llama2.c): x * rsqrt(mean(x^2) + eps) in fp32, cast
    back, times the weight. Built here because torch is imported in main."""
    class HandRMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def forward(self, x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight
    return HandRMSNorm()


def block_table(torch, be, timer, m_list, widths, args, log):
    """Non-GEMM time of a block per (M, H), the lm-head GEMM and the loss per (M, H) / M, AdamW ns per parameter."""
    F = torch.nn.functional
    dev = be.device
    shape = (len(m_list), len(widths))
    comps = {c: nested(shape) for c in ("norm_ms", "attention_ms", "gelu_ms", "swiglu_ms", "residual_ms", "lm_head_ms",
                                        "rmsnorm_eager_ms", "te_layernorm_ms", "te_rmsnorm_ms")}
    te_ok = be.te is not None and any(be.info[n]["available"] for n in ("te-delayed", "te-current"))
    loss_ms = [None] * len(m_list)
    errors = []
    region = lambda: torch.autocast(dev, dtype=torch.bfloat16)  # noqa: E731

    host = {c: nested(shape) for c in comps}
    loss_host = [None] * len(m_list)
    last = {}

    def timed(phases):
        (f, b), h = measure_repeats(timer, phases, args.warmup, args.block_repeats)
        last["host"] = round(h, 5)
        return round(f + b, 5)

    def fb(fn, *inputs):
        """Forward fn(*inputs) under bf16 autocast, backward with a gradient of the output's shape; the inputs' and
        (for a module) the parameters' gradients set to None first, so no accumulation is timed."""
        st = {}
        resets = list(inputs) + (list(fn.parameters()) if hasattr(fn, "parameters") else [])

        def fwd():
            for t in resets:
                t.grad = None
            with region():
                st["y"] = fn(*inputs)

        def bwd():
            y = st.pop("y")
            y.backward(torch.ones_like(y))
        return [fwd, bwd]

    for mi, m in enumerate(m_list):
        seq = min(m, args.seq)
        batch = max(1, m // seq)
        for wi, h in enumerate(widths):
            hd = 128 if h % 128 == 0 and h >= 1024 else 64
            heads = max(1, h // hd) if h >= hd else 1
            hd = h // heads
            x = torch.randn(m, h, device=dev, dtype=torch.bfloat16, requires_grad=True)

            def norm_phases():
                norm = torch.nn.LayerNorm(h).to(dev)
                try:
                    ph = fb(norm, x)
                    timer.run(ph, 1)
                except RuntimeError:  # CPU autocast of an old torch: no mixed bf16 input / fp32 weight layer_norm
                    ph = fb(norm.to(torch.bfloat16), x)
                return ph

            def att_phases():
                qkv = torch.randn(batch, seq, 3, heads, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)

                def att(t):
                    q, k, v = t.unbind(2)
                    o = attention(torch, F, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
                    return o.transpose(1, 2).reshape(batch * seq, heads * hd)
                return fb(att, qkv)

            def gelu_phases():
                return fb(F.gelu, torch.randn(m, 4 * h, device=dev, dtype=torch.bfloat16, requires_grad=True))

            def swiglu_phases():
                gu = torch.randn(m, 8 * h, device=dev, dtype=torch.bfloat16, requires_grad=True)
                return fb(lambda t: F.silu(t[:, :4 * h]) * t[:, 4 * h:], gu)

            def rms_eager_phases():
                # The RMSNorm models write out (Llama's reference code, llama2.c, nanoGPT forks): fp32 math, 6+ kernels.
                return fb(hand_rmsnorm(torch, h).to(dev), x)

            def te_norm_phases(cls):
                def make():
                    if not te_ok:
                        return None
                    return fb(getattr(be.te, cls)(h, eps=1e-5, params_dtype=torch.float32, device=dev), x)
                return make

            def residual_phases():
                return fb(lambda a, b: a + b, x, torch.randn(m, h, device=dev, dtype=torch.bfloat16, requires_grad=True))

            def head_phases():
                return fb(torch.nn.Linear(h, args.vocab, bias=False).to(dev), x)

            parts = []
            for comp, make in (("norm_ms", norm_phases), ("attention_ms", att_phases), ("gelu_ms", gelu_phases),
                               ("swiglu_ms", swiglu_phases), ("residual_ms", residual_phases),
                               ("lm_head_ms", head_phases), ("rmsnorm_eager_ms", rms_eager_phases),
                               ("te_layernorm_ms", te_norm_phases("LayerNorm")), ("te_rmsnorm_ms", te_norm_phases("RMSNorm"))):
                try:
                    phases = make()
                    if phases is None:  # TE's norms: only where TE runs
                        continue
                    comps[comp][mi][wi] = timed(phases)
                    host[comp][mi][wi] = last["host"]
                    parts.append("%s %.3f" % (comp[:-3], comps[comp][mi][wi]))
                except Exception as exc:
                    msg = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:300] if str(exc) else "")
                    errors.append({"m": m, "h": h, "component": comp[:-3], "error": msg})
                    parts.append("%s FAILED (%s)" % (comp[:-3], msg))
                    if dev == "cuda" and "out of memory" in msg.lower():
                        torch.cuda.empty_cache()
            del x
            log("block M=%d H=%d (batch %d x seq %d, %d heads of %d) ms: %s" % (m, h, batch, seq, heads, hd, ", ".join(parts)))
            if dev == "cuda":
                torch.cuda.empty_cache()
        try:
            logits = torch.randn(m, args.vocab, device=dev, dtype=torch.bfloat16, requires_grad=True)
            tgt = torch.randint(0, args.vocab, (m,), device=dev)
            loss_ms[mi] = timed(fb(lambda z: F.cross_entropy(z, tgt), logits))
            loss_host[mi] = last["host"]
            log("loss M=%d vocab %d: %.3f ms" % (m, args.vocab, loss_ms[mi]))
            del logits
        except Exception as exc:
            errors.append({"m": m, "h": None, "error": "loss: %s: %s" % (type(exc).__name__, exc)})
    non_gemm = nested(shape)
    non_gemm_host = nested(shape)
    for mi in range(shape[0]):
        for wi in range(shape[1]):
            for src, dst in ((comps, non_gemm), (host, non_gemm_host)):
                parts = [src["norm_ms"][mi][wi], src["attention_ms"][mi][wi], src["gelu_ms"][mi][wi],
                         src["residual_ms"][mi][wi]]
                if all(p is not None for p in parts):
                    dst[mi][wi] = round(2 * parts[0] + parts[1] + parts[2] + 2 * parts[3], 5)
    # AdamW over a flat set of FP32 parameters (fused where this torch has it): time per parameter.
    adamw = None
    try:
        nparam = args.adamw_params
        ps = [torch.nn.Parameter(torch.randn(nparam // 4, device=dev)) for _ in range(4)]
        for p in ps:
            p.grad = torch.randn_like(p)
        kw = {"fused": True} if dev == "cuda" else {}
        try:
            opt = torch.optim.AdamW(ps, lr=1e-4, **kw)
        except (TypeError, RuntimeError):
            kw = {}
            opt = torch.optim.AdamW(ps, lr=1e-4)
        (t,), h = measure_repeats(timer, [opt.step], args.warmup, args.block_repeats)
        adamw = {"ns_per_param": round(t * 1e6 / nparam, 6), "params": nparam, "step_ms": round(t, 5),
                 "host_ms": round(h, 5),
                 "fused": bool(kw)}
        log("AdamW %d params: %.3f ms (%.4f ns/param, fused %s)" % (nparam, t, t * 1e6 / nparam, bool(kw)))
        del ps, opt
    except Exception as exc:
        errors.append({"m": None, "h": None, "error": "adamw: %s: %s" % (type(exc).__name__, exc)})
    return {
        "m": list(m_list), "widths": list(widths), "seq": args.seq, "vocab": args.vocab,
        "what": "forward + backward under bf16 autocast, median ms; non_gemm_ms = 2 x norm + attention + gelu + "
                "2 x residual (a GPT block; a Llama block: swap gelu for swiglu, LayerNorm for RMSNorm ~ same); "
                "rmsnorm_eager_ms: a written-out RMSNorm (fp32 math); te_layernorm_ms / te_rmsnorm_ms: TE's fused norms (where TE runs); "
                "attention: causal SDPA at batch = M / seq x seq (seq = min(M, --seq)), head dim 128 (64 below 1024 "
                "or where H % 128); lm_head_ms: BF16 H -> vocab GEMM; loss_ms: cross-entropy over M x vocab bf16 logits",
        **comps, "non_gemm_ms": non_gemm, "loss_ms": loss_ms, "adamw": adamw, "errors": errors,
        "host_ms": {**{c: host[c] for c in comps}, "non_gemm_ms": non_gemm_host, "loss_ms": loss_host},
    }


# -------------------------------------------------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/h200/gemm", help="folder for gemm-table.json and gemm-table-log.txt")
    ap.add_argument("--quick", action="store_true", help="a small grid (a smoke test, not the table)")
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--backends", default="all", help="comma list of %s, or all" % ",".join(ALL_BACKENDS))
    ap.add_argument("--m", help="tokens list, e.g. 512,2048"); ap.add_argument("--k"); ap.add_argument("--n")
    ap.add_argument("--widths", help="block widths for the non-GEMM table")
    ap.add_argument("--budget-s", type=float, default=240.0, help="target seconds for the Linear grid (repeats scale)")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--min-repeats", type=int, default=None)
    ap.add_argument("--max-repeats", type=int, default=None)
    ap.add_argument("--block-repeats", type=int, default=None)
    ap.add_argument("--seq", type=int, default=2048, help="sequence length of the attention in the block table")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--adamw-params", type=int, default=None)
    ap.add_argument("--no-block", action="store_true", help="skip the non-GEMM table")
    ap.add_argument("--no-host-fit", action="store_true", help="skip the host cost split (per region / per layer)")
    ap.add_argument("--only-block", action="store_true", help="only the non-GEMM table (the Linear grid is not measured)")
    ap.add_argument("--group", type=int, default=4, help="identical layers per forward region (host cost shared)")
    ap.add_argument("--group-target-ms", type=float, default=20.0,
                    help="fewer layers in a group where one BF16 layer already takes about this long")
    ap.add_argument("--compile", action="store_true",
                    help="compiled table: every layer in torch.compile, bf16 as compiled as the FP8 backends (default "
                         "backends %s; writes gemm-table-compiled.json)" % ",".join(COMPILED_DEFAULT))
    ap.add_argument("--compile-shapes", choices=COMPILE_SHAPES, default="dynamic",
                    help="dynamic: one graph per backend for the grid; per-kn: one per (K, N), M dynamic; static: one per cell")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend (the tests use aot_eager)")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (default: torch's default)")
    ap.add_argument("--static-check", type=int, default=3,
                    help="--compile with dynamic / per-kn shapes: cells measured again compiled static (0: none)")
    args = ap.parse_args(argv)

    os.makedirs(args.out, exist_ok=True)
    stem = "gemm-table-compiled" if args.compile else "gemm-table"
    log = Log(os.path.join(args.out, stem + "-log.txt"))
    out_path = os.path.join(args.out, stem + ".json")
    try:
        import torch
    except Exception as exc:
        log("torch is not importable: %s: %s (nothing measured)" % (type(exc).__name__, exc))
        return 3
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        log("--device cuda but torch.cuda.is_available() is False")
        return 3
    cpu = device == "cpu"
    grid = dict(GRID_CPU if cpu else (GRID_QUICK_CUDA if args.quick else GRID_FULL))
    widths = list(WIDTHS_CPU if cpu else (WIDTHS_QUICK_CUDA if args.quick else WIDTHS_FULL))
    for key in ("m", "k", "n"):
        if getattr(args, key):
            grid[key] = parse_list(getattr(args, key))
    if args.widths:
        widths = parse_list(args.widths)
    if cpu:
        args.vocab = min(args.vocab, 512)
        args.seq = min(args.seq, 16)
    defaults = (1, 2, 3, 3, 4096) if cpu else ((2, 3, 10, 5, 1 << 24) if args.quick else (3, 5, 30, 10, 1 << 28))
    for attr, val in zip(("warmup", "min_repeats", "max_repeats", "block_repeats", "adamw_params"), defaults):
        if getattr(args, attr) is None:
            setattr(args, attr, val)
    if args.compile and args.backends == "all":
        args.backends = ",".join(COMPILED_DEFAULT)
    wanted = ALL_BACKENDS if args.backends == "all" else tuple(b.strip() for b in args.backends.split(",") if b.strip())
    unknown = [b for b in wanted if b not in ALL_BACKENDS]
    if unknown:
        log("unknown backend(s): %s (known: %s)" % (", ".join(unknown), ", ".join(ALL_BACKENDS)))
        return 2
    compiler = None
    if args.compile:
        eager_only = [b for b in wanted if b not in COMPILED_BACKENDS]
        if eager_only:
            log("--compile measures %s; %s run eager (the table without --compile): DelayedScaling refuses "
                "torch.compile and TE's kernels are fused already" % (", ".join(COMPILED_BACKENDS), ", ".join(eager_only)))
            return 2
        why = compile_unavailable(torch)
        if why:
            log("--compile: %s (nothing measured)" % why)
            return 3
        args.no_block = args.no_host_fit = True  # in the eager table; the compiled one is the Linear grid only
        compiler = Compiler(torch, args.compile_backend, args.compile_mode, args.compile_shapes, log)
    if "bf16" not in wanted:
        wanted = ("bf16",) + tuple(wanted)

    gpu = {"name": None, "capability": None, "memory_total_bytes": None}
    if not cpu:
        p = torch.cuda.get_device_properties(0)
        gpu = {"name": p.name, "capability": "%d.%d" % (p.major, p.minor), "memory_total_bytes": p.total_memory}
    if cpu:
        log("--device cpu: NOT A BENCHMARK (a tiny grid for the tests; the ratios mean nothing)")
    log("torch %s, device %s %s, grid M=%s K=%s N=%s, widths %s" % (torch.__version__, device, gpu["name"] or platform.processor(),
                                                                  grid["m"], grid["k"], grid["n"], widths))
    be = Backends(torch, device, wanted, log, compiler)
    names = [n for n in ALL_BACKENDS if be.info[n]["available"]]
    timer = Timer(torch, device)
    torch.manual_seed(1234)
    t0 = time.time()
    doc = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "not_a_benchmark": cpu, "quick": bool(args.quick),
        "note": "CPU run for the tests: not a benchmark, the ratios mean nothing" if cpu else (
            "quick grid: a smoke test, not the table" if args.quick else None),
        "compiled": bool(args.compile),
        "compile": compiler.describe() if compiler else None,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": [os.path.basename(sys.argv[0])] + list(sys.argv[1:] if argv is None else argv),
        "device": device, "gpu": gpu,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": getattr(torch.version, "cuda", None), "transformer_engine": be.te_version,
                     "te_api": be.te_api, "torchao": be.ao_version},
        "method": {"layer": "Linear(K, N, bias=False), FP32 master weight, x [M, K] bf16 requiring grad; forward under "
                            "torch.autocast(bfloat16) (+ TE autocast for te-*), backward(dy) outside; grads set to None"
                            + ("; every layer (bf16 too) in torch.compile(backend=%s, %s shapes), compiled by one "
                               "untimed iteration before it is timed" % (args.compile_backend, args.compile_shapes)
                               if args.compile else ""),
                   "timing": ("device: CUDA events per phase with the host running ahead (a spin kernel queued first), "
                              "so no launch gaps; host: wall time of enqueueing an iteration (host_ms)") if not cpu
                             else "time.perf_counter",
                   "group": "up to --group identical layers per forward region, times per layer (group in the cell)",
                   "statistic": "median", "warmup": args.warmup, "min_repeats": args.min_repeats,
                   "max_repeats": args.max_repeats, "ratio": "bf16 total_ms / backend total_ms (> 1: faster than BF16)",
                   "flops_per_cell": "6 M K N (forward, dgrad, wgrad)"},
        "grid": {"m": list(grid["m"]), "k": list(grid["k"]), "n": list(grid["n"]),
                 "index": "backends[name].<table>[i_m][i_k][i_n]"},
        "backends": {},
        "block": None,
        "incomplete": True,
    }

    def write():
        with open(out_path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(out_path + ".tmp", out_path)

    for name in ALL_BACKENDS:
        doc["backends"][name] = dict(be.info[name])
    write()
    def checkpoint(tables):
        for name in names:
            doc["backends"][name].update(tables[name])
        write()

    names_all = list(names)
    if args.only_block:
        names = ["bf16"]
        grid = dict(grid, m=list(grid["m"]), k=[grid["k"][0]], n=[grid["n"][0]])
        doc["grid"].update(k=grid["k"], n=grid["n"])
        doc["note"] = (doc["note"] + "; " if doc["note"] else "") + "--only-block: the Linear grid is one bf16 column"
    tables = linear_table(torch, be, timer, grid, names, args, log, t0 + args.budget_s, checkpoint)
    for name in names:
        doc["backends"][name].update(tables[name])
        if tables[name]["errors"]:
            log("%s: %d failed cell(s)" % (name, len(tables[name]["errors"])))
    doc["linear_seconds"] = round(time.time() - t0, 1)
    if compiler:
        doc["compile"] = compiler.describe()
        log("compiled: %d graph(s) in %.1f s of compiling (%s shapes, backend %s)" % (
            doc["compile"]["graphs"] or 0, compiler.seconds, args.compile_shapes, args.compile_backend))
    write()
    if compiler and args.compile_shapes != "static" and args.static_check > 0 and not args.only_block:
        doc["static_check"] = static_check(torch, be, timer, grid, names, tables, args, log, t0 + args.budget_s * 1.3)
        doc["compile"] = compiler.describe()
        write()
    if not args.no_host_fit:
        doc["host_model"] = host_fit(torch, be, timer, [n for n in names_all if n in ("bf16", "te-delayed", "te-current")],
                                     args, log)
        write()
    if not args.no_block:
        t1 = time.time()
        try:
            doc["block"] = block_table(torch, be, timer, grid["m"], widths, args, log)
        except Exception as exc:
            log("block table failed: %s: %s" % (type(exc).__name__, exc))
            traceback.print_exc()
        doc["block_seconds"] = round(time.time() - t1, 1)
    doc["not_ran_ahead"] = timer.not_ahead
    doc["incomplete"] = False
    doc["elapsed_s"] = round(time.time() - t0, 1)
    write()
    summary(doc, log)
    log("wrote %s" % out_path)
    return 0


def summary(doc, log):
    g = doc["grid"]
    for name, b in doc["backends"].items():
        if name == "bf16" or not b.get("available") or "ratio" not in b:
            continue
        log("== %s (%s): ratio BF16/FP8 time, rows M, columns K=N where K == N" % (name, b.get("recipe")))
        diag = [k for k in g["k"] if k in g["n"]]
        log("   M \\ K=N " + " ".join("%7d" % k for k in diag))
        for mi, m in enumerate(g["m"]):
            cells = []
            for k in diag:
                r = b["ratio"][mi][g["k"].index(k)][g["n"].index(k)]
                cells.append("%7s" % ("-" if r is None else "%.2f" % r))
            log("   %7d " % m + " ".join(cells))
        host = b.get("host_ms")
        if host:
            log("   host ms per layer (K=N, M=%d): %s (bf16 %s)" % (g["m"][-1], " ".join(
                "%.3f" % v if v else "-" for v in (host[-1][g["k"].index(k)][g["n"].index(k)] for k in diag)), " ".join(
                "%.3f" % v if v else "-" for v in (doc["backends"]["bf16"]["host_ms"][-1][g["k"].index(k)][g["n"].index(k)]
                                                   for k in diag))))
    log("device times with the host not running ahead (retried, still not): %s" % doc.get("not_ran_ahead"))


if __name__ == "__main__":
    sys.exit(main())
