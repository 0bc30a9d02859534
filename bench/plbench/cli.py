"""Command line and orchestration. See bench/README.md for the protocol and exit codes."""
import argparse
import datetime
import json
import os
import signal
import sys
import time
import traceback

from . import PROTOCOL_VERSION, __version__
from .protocol import (BenchError, Emitter, EXIT_CANCELLED, EXIT_INTERNAL, EXIT_OK, NO_CUDA_MESSAGE,
                       TE_MISSING_MESSAGE, log, take_stdout)

from . import backends as backend_specs

BACKENDS = tuple(backend_specs.BACKENDS)
# Short names for the env event's `backends` (the editor's form); the spec's label is the description.
SHORT_LABELS = {
    "bf16": "BF16", "te": "FP8 (Transformer Engine)", "te-delayed": "FP8 (TE, DelayedScaling)",
    "te-current": "FP8 (TE, Float8CurrentScaling)", "te-fused": "FP8 (TE, fused LayerNormLinear/MLP)",
    "torchao-tensorwise": "FP8 (torchao, tensorwise)", "torchao-rowwise": "FP8 (torchao, rowwise)",
    "torch-fp8": "FP8 (torch._scaled_mm, fallback)", "bf16-tedpa": "BF16 (TE attention)",
    "te-fused-delayed": "FP8 (TE, fused, DelayedScaling)", "te-dpa": "FP8 (TE, FP8 attention)",
    "te-fused-dpa": "FP8 (TE, fused, FP8 attention)", "te-fused-tedpa-bf16": "FP8 (TE, fused, TE attention in BF16)",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BenchError("usage", "usage error: %s" % message, "run `python3 bench/benchmark.py --help`")


def _lr(text):
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("--lr takes a number or auto, not %r" % text)


def build_parser():
    p = _Parser(prog="benchmark.py", description="BF16 vs FP8 training benchmark (Precision Lens). "
                "JSON lines on stdout, human text on stderr.")
    p.add_argument("--workload", default="gpt-125m", help="preset name (--list-workloads) or module:function")
    p.add_argument("--workspace", default=None, help="folder put on sys.path for module:function (default: cwd)")
    p.add_argument("--backends", default="auto",
                   help="comma list of %s (torchao = torchao-tensorwise), or all; auto = bf16 + te if "
                        "Transformer Engine is installed, else bf16 + torch-fp8 (the no-dependency fallback)"
                        % ",".join(BACKENDS))
    p.add_argument("--steps", type=int, default=30, help="measured steps per backend")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps (compilation happens in the first)")
    p.add_argument("--batch", type=int, default=None, help="sequences per step (default: the preset's)")
    p.add_argument("--seq", type=int, default=None, help="tokens per sequence (default: the preset's)")
    p.add_argument("--layers", type=int, default=None, help="transformer blocks (presets only)")
    p.add_argument("--compile", dest="compile", action="store_true", default=None,
                   help="torch.compile every backend (default where torch.compile exists)")
    p.add_argument("--no-compile", dest="compile", action="store_false", help="run eager")
    p.add_argument("--compile-scope", choices=("blocks", "model"), default="blocks",
                   help="blocks: compile each transformer block and the lm-head+loss separately (presets); "
                        "model: one torch.compile of the whole model")
    p.add_argument("--te-recipe", choices=("auto", "delayed", "current"), default="auto",
                   help="auto: Float8CurrentScaling when compiling (TE >= 2.16 rejects DelayedScaling under "
                        "torch.compile), else DelayedScaling(HYBRID)")
    p.add_argument("--fp8-lm-head", action="store_true",
                   help="also run an untied lm-head in FP8 (te, torchao, torch-fp8), to measure what keeping it in "
                        "BF16 buys: final loss, logit magnitude and z-loss are reported for every backend")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after the measured steps, profile N more (torch.profiler) and report GPU time per kernel "
                        "family (GEMM, FP8 casts, attention, norms, optimizer...)")
    p.add_argument("--lr", type=_lr, default=1e-4,
                   help="AdamW's learning rate, or auto: the one of the model's size (GPT-3's table, interpolated), "
                        "which a loss comparison needs to tell FP8 from the run-to-run spread")
    p.add_argument("--lr-warmup", type=int, default=0,
                   help="raise the learning rate linearly over the first N steps (warm-up steps count), as training "
                        "scripts do (nanoGPT, llama2.c): without it a loss comparison starts with a spike")
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                   help="after the warm-up: constant, or cosine decay to lr/10 at the last step (nanoGPT's schedule)")
    p.add_argument("--clip-grad", type=float, default=0.0,
                   help="clip the gradient norm to this before each optimizer step (0: off; nanoGPT and llama2.c use 1.0)")
    p.add_argument("--eval-loss-batches", type=int, default=0,
                   help="train / ab: after the measured steps, the mean loss (no grad, same forward context) over N batches the "
                        "steps never trained on (batch indices from 1,000,000): the loss comparison of the A/B")
    p.add_argument("--repeat-original", action="store_true",
                   help="ab mode: run the original arm a second time from the same weights and batches, so the "
                        "loss difference between two BF16 runs (the noise floor) is measured next to FP8's")
    p.add_argument("--rounded-original", action="store_true",
                   help="ab mode: run the original arm once more from its initial weights each rounded once to BF16 "
                        "(at most 2^-8 of each weight, far less than FP8's rounding): how far this training's loss "
                        "moves from a tiny change of its start, next to FP8's difference")
    p.add_argument("--warm-start-steps", type=int, default=0,
                   help="ab mode: first train the original N steps in BF16 (AdamW at the run's learning rate, warm-up "
                        "over all N, clipping 1.0, batches no measured step uses); every arm then starts from those "
                        "weights with its own optimizer, so the loss comparison begins past the first steps' spikes, "
                        "where two runs of one seed part most (0: from the initial weights)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json-out", default=None, help="also write all events and results to this JSON file")
    p.add_argument("--probe", action="store_true", help="print the env event and exit")
    p.add_argument("--list-workloads", action="store_true", help="print the presets and exit")
    p.add_argument("--measure-overhead", action="store_true",
                   help="after the first backend, time a bare loop of the same steps and report the harness overhead")
    p.add_argument("--no-roofline", dest="roofline", action="store_false", default=True,
                   help="skip the BF16/FP8 GEMM roofline measurement")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cpu runs the harness on the CPU (tests only; not a benchmark, FP8 emulated)")
    p.add_argument("--mode", choices=("train", "inference", "ab"), default="train",
                   help="train: BF16 vs FP8 training steps; inference: prefill/decode tokens/s and accuracy vs BF16 "
                        "(backends bf16,torchao,te,torch-fp8,modelopt; presets only); ab: your project as it is "
                        "(--workspace ORIG) against the copy Precision Lens converted (--converted CONV)")
    p.add_argument("--converted", default=None,
                   help="ab: the converted copy of the project (precision-lens check CONV --fix --unsafe-fixes)")
    p.add_argument("--fallback-module", default="fp8_fallback",
                   help="ab: the converted copy's FP8 fallback module (default fp8_fallback)")
    p.add_argument("--peer", choices=("auto", "torchao", "none"), default="auto",
                   help="ab: also run the original model through torchao float8 training (auto: when torchao imports)")
    p.add_argument("--peer-compile", choices=("same", "on", "off"), default="same",
                   help="ab: the torchao peer under torch.compile (on), eager (off) or as the other arms (same, the "
                        "default); 'on' beside eager arms compares against torchao's best configuration in one process")
    p.add_argument("--prompt-len", type=int, default=512, help="inference: prompt tokens per sequence (prefill)")
    p.add_argument("--new-tokens", type=int, default=64, help="inference: tokens decoded per sequence")
    p.add_argument("--eval-batches", type=int, default=4, help="inference: held-out prompt batches for accuracy")
    p.add_argument("--calib-batches", type=int, default=4, help="inference: calibration batches (modelopt)")
    p.add_argument("--repeats", type=int, default=5, help="inference: timed repetitions (median)")
    p.add_argument("--version", action="version", version="precision-lens-bench %s" % __version__)
    return p


def parse_backends(text, te_installed):
    return backend_specs.parse(text, te_installed)


class Session(object):
    def __init__(self, emitter):
        self.emitter = emitter
        self.state = {"phase": "start", "backend": None}
        self.errors = []
        self.json_out = None
        self.argv = list(sys.argv)

    def error(self, err):
        self.errors.append(err)
        self.emitter.error(err)
        log("error [%s]: %s%s" % (err.code, err.message, (" (hint: %s)" % err.hint) if err.hint else ""))

    def write_json(self, extra=None):
        if not self.json_out:
            return
        doc = {"protocol": PROTOCOL_VERSION, "command": self.argv, "events": self.emitter.events,
               # When the run ended (UTC): an imported file keeps its real date, not the checkout's mtime.
               "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        for ev in self.emitter.events:
            if ev["event"] == "env":
                doc["env"] = ev
            elif ev["event"] == "summary":
                doc["summary"] = ev
        doc["results"] = [e for e in self.emitter.events if e["event"] == "result"]
        doc["errors"] = [e for e in self.emitter.events if e["event"] == "error"]
        if extra:
            doc.update(extra)
        tmp = self.json_out + ".tmp"
        d = os.path.dirname(os.path.abspath(self.json_out))
        os.makedirs(d, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, self.json_out)


def install_signal_handlers(session):
    def handler(signum, frame):
        name = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}.get(signum, str(signum))
        try:
            session.emitter.emit("cancelled", code="cancelled", signal=name, phase=session.state.get("phase"),
                                 backend=session.state.get("backend"), exit_code=EXIT_CANCELLED,
                                 message="benchmark cancelled (%s)" % name)
            log("cancelled by %s" % name)
        except BaseException as exc:  # never let the handler fail to exit
            try:
                sys.stderr.write("cancel handler: %s: %s\n" % (type(exc).__name__, exc))
            except BaseException:
                pass
        finally:
            # Prompt exit: no unwinding through compiled code or CUDA teardown. The driver frees the GPU memory.
            os._exit(EXIT_CANCELLED)

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass


def main(argv=None):
    emitter = Emitter(take_stdout())
    session = Session(emitter)
    install_signal_handlers(session)
    try:
        code = _main(session, argv)
    except BenchError as err:
        session.error(err)
        code = err.exit_code
    except SystemExit as exc:  # --help / --version
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException as exc:
        traceback.print_exc()
        err = BenchError("internal", "internal error: %s: %s" % (type(exc).__name__, exc),
                         "please report this with the stderr log")
        session.error(err)
        code = EXIT_INTERNAL
    try:
        session.write_json()
    except Exception as exc:
        log("could not write --json-out: %s" % exc)
    return code


def _main(session, argv):
    emitter = session.emitter
    args = build_parser().parse_args(argv)
    session.json_out = args.json_out
    if args.steps < 1 or args.warmup < 0 or args.profile_steps < 0:
        raise BenchError("usage", "--steps must be >= 1, --warmup and --profile-steps >= 0", None)
    if args.lr_warmup < 0 or args.clip_grad < 0 or args.eval_loss_batches < 0 or args.warm_start_steps < 0:
        raise BenchError("usage", "--lr-warmup, --clip-grad, --eval-loss-batches and --warm-start-steps must be >= 0", None)
    if args.warm_start_steps and args.mode != "ab":
        log("note: --warm-start-steps applies to --mode ab only (the arms start from the original's warm-started "
            "weights); ignored in --mode %s" % args.mode)
    if args.warmup < 1 and args.compile:
        log("note: --warmup 0 with compilation puts the compile time in the measured steps")
    if args.mode == "ab" and not args.probe and not args.list_workloads:
        from . import ab
        ab.validate_args(args)  # usage errors before anything heavy
    mode = {"mode": "ab"} if args.mode == "ab" else {}
    if args.list_workloads:
        from .presets import list_presets
        emitter.emit("workloads", workloads=list_presets())
        return EXIT_OK

    try:
        import torch
    except ImportError as exc:
        from . import envprobe
        env = envprobe.probe(None, with_te=False)
        env["backends"] = backend_report(env)
        from . import inference_report
        env["inference_backends"] = inference_report.backend_report(env)
        emitter.emit("env", protocol=PROTOCOL_VERSION, bench_version=__version__, **dict(env, **mode))
        raise BenchError("no_torch", "PyTorch is not installed in %s (%s)" % (sys.executable, exc),
                         "select a Python interpreter that has torch (pip install torch), or set precisionLens.pythonPath")

    from . import envprobe
    session.state["phase"] = "probe"
    env = envprobe.probe(torch, with_te=True)
    env["backends"] = backend_report(env)
    from . import inference_report
    env["inference_backends"] = inference_report.backend_report(env)
    emitter.emit("env", protocol=PROTOCOL_VERSION, bench_version=__version__, **dict(env, **mode))
    log("torch %s, CUDA %s, GPU %s (%s), TE %s, FP8: %s (%s)" % (
        env["torch"], env["cuda"], env["gpu_name"], env["sm"], env["te"]["version"] or "not installed",
        "yes" if env["fp8"]["available"] else "no", env["fp8"]["reason"]))
    if args.probe:
        return EXIT_OK

    if args.device == "cpu":
        device = "cpu"
        log("WARNING: --device cpu runs the harness on the CPU for testing; the figures are not a benchmark")
    elif env["cuda_available"] and env["device_count"] > 0:
        device = "cuda"
    else:
        raise BenchError("no_cuda", NO_CUDA_MESSAGE,
                         "run it where an NVIDIA GPU and a CUDA build of PyTorch are available (for example over "
                         "Remote-SSH); %s" % ("this PyTorch %s is a CPU-only build" % env["torch"] if not env["cuda"]
                                              else "PyTorch %s (CUDA %s) sees no GPU" % (env["torch"], env["cuda"])))
    if args.compile is None:
        args.compile = hasattr(torch, "compile") and device == "cuda"

    te_installed = env["te"]["installed"] and not env["te"]["error"]
    if args.mode == "inference":
        return _inference(session, args, env, device, te_installed)
    if args.mode == "ab":
        from . import ab
        return ab.run(session, args, env, device, te_installed)
    backends = parse_backends(args.backends, te_installed)

    runnable, gate_errors = gate_backends(backends, env, device)
    for err in gate_errors:
        session.error(err)

    # Workload: validate before anything heavy (a bad module:function fails here, fast)
    from . import workloads
    session.state["phase"] = "workload"
    kind, spec = workloads.parse_workload_spec(args.workload)
    if kind == "user":
        fn = workloads.resolve_user_function(spec[0], spec[1], args.workspace)

        def builder():
            return workloads.build_user_workload(spec, fn, batch=args.batch, seq=args.seq, device=device,
                                                 seed=args.seed)
        if args.layers:
            log("note: --layers applies to presets only; ignored for %s" % args.workload)
    else:
        def builder():
            return workloads.build_preset(spec, batch=args.batch, seq=args.seq, layers=args.layers,
                                          device=device, seed=args.seed, n_batches=args.warmup + args.steps)

    from . import fp8_torchao, runner
    families = {backend_specs.family(b) for b in runnable}
    info = envprobe.load_te() if any(backend_specs.needs_te(b) for b in runnable) else {}
    ao_info = fp8_torchao.load_torchao() if "torchao" in families else {}
    rc = runner.RunContext(args, emitter, env, device, builder, te_info=info, state=session.state, ao_info=ao_info)
    results = {}
    t0 = time.time()
    for b in runnable:
        session.state["phase"] = "backend"
        log("== %s: %s, %d warm-up + %d measured steps, compile=%s" % (b, args.workload, args.warmup, args.steps,
                                                                        args.compile))
        try:
            res = runner.run_backend(rc, b)
        except BenchError as err:
            if err.code == "bad_workload":
                err.fatal = True
                raise
            session.error(err)
            continue
        res["compile_requested"] = bool(args.compile)
        results[b] = res
        emitter.emit("result", **res)

    roof = measure_roofline(rc, args, device, session, env)
    summary = make_summary(results, session.errors, roof, args, time.time() - t0)
    emitter.emit("summary", **summary)
    print_table(results, summary)
    return summary["exit_code"]


def _te_missing(te_env, backends):
    msg = TE_MISSING_MESSAGE if not te_env.get("installed") else \
        "Transformer Engine could not be loaded: %s" % te_env.get("error")
    hint = "pip install transformer_engine[pytorch] (needs CUDA 12+ and an FP8 GPU); the other backends still run"
    if "torch-fp8" not in backends:
        hint += "; --backends bf16,torch-fp8 measures FP8 without Transformer Engine"
    return msg, hint


def _inference(session, args, env, device, te_installed):
    """--mode inference (plbench/inference.py): presets only, since decoding reads the preset's modules."""
    from . import envprobe, inference, workloads
    kind, spec = workloads.parse_workload_spec(args.workload)
    if kind == "user":
        raise BenchError("usage", "--mode inference runs the presets (--list-workloads), not module:function",
                         "pick a preset with --workload, e.g. gpt-125m")
    if args.prompt_len < 1 or args.new_tokens < 0 or args.eval_batches < 1 or args.repeats < 1:
        raise BenchError("usage", "--prompt-len, --eval-batches and --repeats must be >= 1, --new-tokens >= 0", None)

    def builder():
        return workloads.build_preset(spec, batch=args.batch, seq=args.prompt_len + args.new_tokens,
                                      layers=args.layers, device=device, seed=args.seed, n_batches=1)
    te_info = envprobe.load_te() if te_installed else {}
    return inference.run(session, args, env, device, builder, te_info)


def gate_backends(backends, env, device):
    """Which requested backends can run here. Returns (runnable, [BenchError]). A missing library is one error per
    library (te_missing, torchao_missing) naming the backends it blocks; FP8 backends on a GPU without FP8 are
    replaced by a BF16-only run with one fp8_unsupported error that says why."""
    runnable, errors, fp8_blocked, missing = [], [], [], {}
    te_env = env.get("te") or {}
    ao_env = env.get("torchao") or {}
    for b in backends:
        fam = backend_specs.family(b)
        if backend_specs.needs_te(b) and (not te_env.get("installed") or te_env.get("error")):
            missing.setdefault("te_missing", []).append(b)
        elif fam == "bf16":
            runnable.append(b)
        elif fam == "torchao" and not ao_env.get("float8_training"):
            missing.setdefault("torchao_missing", []).append(b)
        elif fam == "torch-fp8" and device == "cpu":
            runnable.append(b)  # fp32 emulation, labelled as such: a harness test
        elif fam == "torch-fp8" and not env["torch_fp8"]["available"]:
            fp8_blocked.append((b, env["torch_fp8"]["reason"]))
        elif fam == "te" and device == "cuda" and not env["fp8"]["available"]:
            fp8_blocked.append((b, env["fp8"]["reason"]))
        elif fam == "torchao" and device == "cuda" and not env["torch_fp8"]["available"]:
            fp8_blocked.append((b, env["torch_fp8"]["reason"]))
        else:
            runnable.append(b)
    if "te_missing" in missing:
        msg, hint = _te_missing(te_env, backends)
        errors.append(BenchError("te_missing", msg, hint, fatal=False, backend=missing["te_missing"][0],
                                 backends=missing["te_missing"]))
    if "torchao_missing" in missing:
        names = missing["torchao_missing"]
        errors.append(BenchError("torchao_missing", fp8_torchao_reason(ao_env),
                                 "pip install torchao (a release built for this PyTorch); skipped: %s; the other "
                                 "backends still run" % ", ".join(names),
                                 fatal=False, backend=names[0], backends=names))
    if fp8_blocked:
        names = ", ".join(b for b, _ in fp8_blocked)
        gpu = env.get("gpu_name") or "this machine"
        if "bf16" not in runnable:
            runnable.insert(0, "bf16")
        errors.append(BenchError("fp8_unsupported", "FP8 is not supported on %s: %s" % (gpu, fp8_blocked[0][1]),
                                 "running BF16 only (skipped: %s); FP8 training needs an Ada, Hopper or Blackwell "
                                 "GPU (compute capability >= 8.9)" % names,
                                 fatal=False, backends=[b for b, _ in fp8_blocked],
                                 reasons={b: why for b, why in fp8_blocked}))
    return runnable, errors


def fp8_torchao_reason(ao_env):
    if not ao_env.get("installed"):
        return "torchao not installed"
    return ao_env.get("error") or "torchao has no float8 training API"


def backend_report(env):
    """Every backend this benchmark offers, with whether it can run in this environment and why not: the same
    gate as a run (gate_backends), so the editor disables exactly what a run would skip. A list of
    {id, label, description, available, reason}."""
    report = []
    for b in BACKENDS:
        label, description = SHORT_LABELS.get(b, b), backend_specs.label(b)
        if env.get("torch") is None:
            ok, reason = False, "PyTorch is not installed in this interpreter"
        elif not (env.get("cuda_available") and env.get("gpus")):
            ok, reason = False, "no CUDA device"
        else:
            runnable, errors = gate_backends([b], env, "cuda")
            blocked = [e for e in errors if e.backend == b or b in (e.extra.get("backends") or ())]
            ok = b in runnable and not blocked
            reason = ((blocked[0].extra.get("reasons") or {}).get(b) or blocked[0].message) if blocked else None
        report.append({"id": b, "label": label, "description": description, "available": ok, "reason": reason})
    return report


def measure_roofline(rc, args, device, session, env):
    """The BF16 vs FP8 GEMM rates of the run's largest shapes (CUDA, --roofline), or {"error"} when they fail."""
    if not (device == "cuda" and args.roofline and rc.gemm_shapes):
        return None
    from . import runner
    session.state["phase"] = "roofline"
    runner.free_memory(device)
    try:
        return runner.roofline(rc, env["torch_fp8"]["available"])
    except Exception as exc:
        traceback.print_exc()
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def make_summary(results, errors, roof, args, elapsed, baseline="bf16"):
    base_name = baseline if baseline in results else None
    base = results.get(base_name) if base_name else None
    ratios = {}
    for name, r in results.items():
        if name == base_name or base is None:
            continue
        ratio = {
            "tokens_per_s": r["tokens_per_s"] / base["tokens_per_s"] if base["tokens_per_s"] else None,
            "step_time_median": (r["step_ms"]["median"] / base["step_ms"]["median"]) if base["step_ms"]["median"] else None,
            "peak_memory": (r["peak_memory_bytes"] / base["peak_memory_bytes"])
            if r.get("peak_memory_bytes") and base.get("peak_memory_bytes") else None,
        }
        fl, bl = r.get("final_loss"), base.get("final_loss")
        if fl is not None and bl is not None:
            ratio["final_loss_diff"] = fl - bl
            ratio["final_loss_rel_diff"] = (fl - bl) / bl if bl else None
        fa, ba = r.get("final_loss_avg5"), base.get("final_loss_avg5")
        if fa is not None and ba:
            ratio["final_loss_avg5_rel_diff"] = (fa - ba) / ba
        la, lb = r.get("losses") or [], base.get("losses") or []
        m = min(len(la), len(lb))
        start = min(r.get("loss_measured_from", 0), m)
        rel = [abs(la[i] - lb[i]) / abs(lb[i]) for i in range(start, m)
               if la[i] is not None and lb[i] is not None and lb[i]]
        ratio["max_step_loss_rel_diff_measured"] = max(rel) if rel else None
        ratio["loss_within_2pct"] = (abs(ratio.get("final_loss_rel_diff") or 0.0) <= 0.02) \
            if ratio.get("final_loss_rel_diff") is not None else None
        ratios[name] = ratio
    codes = [e.code for e in errors]
    exit_code = errors[0].exit_code if errors else EXIT_OK
    overhead = None
    for r in results.values():
        if r.get("overhead"):
            overhead = dict(r["overhead"], backend=r["backend"])
            break
    return {
        "baseline": base_name, "workload": args.workload, "backends": list(results.keys()),
        "ratios": ratios, "roofline": roof, "overhead": overhead,
        "tokens_per_s": {k: v["tokens_per_s"] for k, v in results.items()},
        "peak_memory_bytes": {k: v.get("peak_memory_bytes") for k, v in results.items()},
        "final_loss": {k: v.get("final_loss") for k, v in results.items()},
        "step_spread_p90_over_median": {k: v["step_ms"]["p90_over_median"] for k, v in results.items()},
        "errors": codes, "exit_code": exit_code, "elapsed_s": elapsed,
        "compile": bool(args.compile), "steps": args.steps, "warmup": args.warmup,
    }


def print_table(results, summary):
    if not results:
        return
    log("")
    log("%-19s %14s %8s %10s %10s %8s %10s %10s" % ("backend", "tokens/s", "ratio", "median ms", "p90 ms",
                                                    "p90/med", "peak GiB", "final loss"))
    for name, r in results.items():
        ratio = summary["ratios"].get(name, {}).get("tokens_per_s")
        log("%-19s %14.0f %8s %10.2f %10.2f %8.3f %10s %10.4f" % (
            name, r["tokens_per_s"], ("%.3f" % ratio) if ratio else "1.000" if name == summary["baseline"] else "-",
            r["step_ms"]["median"], r["step_ms"]["p90"], r["step_ms"]["p90_over_median"] or 0,
            ("%.1f" % r["peak_memory_gib"]) if r.get("peak_memory_gib") is not None else "n/a",
            r["final_loss"] if r["final_loss"] is not None else float("nan")))
    roof = summary.get("roofline") or {}
    for key in ("largest", "lm_head"):
        g = roof.get(key)
        if g:
            log("GEMM %s %dx%dx%d: BF16 %.0f TFLOP/s, FP8 %s TFLOP/s%s" % (
                g.get("layer"), g["m"], g["n"], g["k"], g["bf16_tflops"],
                ("%.0f" % g["fp8_tflops"]) if g.get("fp8_tflops") else "n/a",
                (" (%.2fx)" % g["ratio"]) if g.get("ratio") else ""))
    if summary.get("overhead"):
        log("harness overhead: %+.2f %%" % summary["overhead"]["overhead_pct"])
    for name, r in results.items():
        prof = r.get("profile")
        if prof:
            log("profile %-19s %7.1f ms/step: %s" % (name, prof["total_ms_per_step"], ", ".join(
                "%s %.1f" % kv for kv in prof["families_ms_per_step"].items())))
