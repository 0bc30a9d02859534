"""--mode ab: the user's project before (ORIG) and after (CONV) Precision Lens's conversion, in one process.

CONV is a copy of ORIG where `precision-lens check CONV --fix --unsafe-fixes` converted nn.Linear / norms to te.*
through the generated fallback module (`fp8_fallback.py`: `fp8_linear`, `fp8_autocast_context`, `fp8_available`).
The same workload function (module:function, see workloads.build_user_workload) is resolved in both folders; the arms
run through runner.py in order, each on a fresh model, with the same batches, steps, seed, lr and compile setting:

- `original`: ORIG's model under torch.autocast(bfloat16), the bf16 backend's loop;
- `converted`: CONV's model with the original's initial weights loaded (only TE `_extra_state` keys may differ),
  forward + loss under CONV's own `fp8_autocast_context()` (the context the generated code uses; no torch.autocast
  added by the harness); the te.* GEMM modules are counted, and a forward pre-hook on each counts the forwards that
  ran with TE's FP8 enabled (`fp8_gemms`);
- `torchao-original` (--peer torchao; the default when torchao's float8 training imports): ORIG's model with torchao
  `convert_to_float8_training` (tensorwise), the conversion plan as filter, under bf16 autocast.

Both folders hold modules of the same names (model.py, wl.py...): `Projects.activate(folder)` puts that folder first
on sys.path and takes every module loaded from the other one out of sys.modules (kept aside and put back when its
folder is active again, so a function always sees the module objects it was imported with, and the converted arm's
context comes from the very fallback module the converted model was built with).
"""
import contextlib
import importlib
import io
import os
import sys
import time
import traceback

import torch

from . import backends as backend_specs
from . import envprobe, fp8_torchao, runner, workloads
from .protocol import BenchError, log

ARMS = ("original", "converted", "torchao-original")
PEER_BACKEND = "torchao-tensorwise"
TE_GEMM_CLASSES = ("Linear", "LayerNormLinear", "LayerNormMLP", "GroupedLinear")
TE_NORM_CLASSES = ("LayerNorm", "RMSNorm")
# Where TE keeps FP8GlobalStateManager: transformer_engine.pytorch.quantization (TE >= 2.9), .fp8 before.
TE_STATE_MODULES = ("transformer_engine.pytorch.quantization", "transformer_engine.pytorch.fp8")
# Folders never searched for the fallback module, nor purged between the two copies.
SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "dist-packages", "venv", "env", "build", "dist"}
FALLBACK_LINES = ("Running in FP8 mode", "Running in BF16 fallback", "FP8 autocast falls back", "FP8: ")
BENCH_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


# --------------------------------------------------------------------------------------------------------------
# Arguments and the fallback module

def validate_args(args):
    """Usage checks that need no torch (before the env event). Returns (orig, conv) as real paths."""
    if not args.converted:
        raise BenchError("usage", "--mode ab needs --converted CONV: the copy of your project that Precision Lens "
                         "converted", "python3 bench/benchmark.py --mode ab --workload module:function "
                         "--workspace ORIG --converted CONV")
    conv = os.path.realpath(args.converted)
    if not os.path.isdir(conv):
        raise BenchError("usage", "--converted %s is not a folder" % args.converted,
                         "point --converted at the converted copy of your project")
    orig = os.path.realpath(args.workspace or os.getcwd())
    if not os.path.isdir(orig):
        raise BenchError("usage", "--workspace %s is not a folder" % args.workspace,
                         "point --workspace at your project as it is (ORIG)")
    if orig == conv:
        raise BenchError("usage", "--workspace and --converted are the same folder (%s)" % orig,
                         "copy the project, run `precision-lens check COPY --fix --unsafe-fixes` on the copy and "
                         "pass it as --converted")
    if ":" not in args.workload:
        raise BenchError("usage", "--mode ab runs your own workload (--workload module:function), not the preset %r"
                         % args.workload, "for example --workload train:build_for_benchmark")
    args.fallback_module = name = fallback_module_name(args.fallback_module)
    if not name or any(not part.isidentifier() for part in name.split(".")):
        raise BenchError("usage", "--fallback-module %r is not a module name" % args.fallback_module,
                         "the default is fp8_fallback (the [tool.precision-lens] fallback-module setting)")
    return orig, conv


def compile_conversion(conv, fallback_path):
    """The file of CONV that hands its model to torch.compile through the fallback's fp8_for_compile (the PL306 fix:
    FP8 through torchao where the script compiles), or None: the te.* conversion under fp8_autocast_context."""
    import ast
    for path in _project_files(conv):
        if not path.endswith(".py") or os.path.realpath(path) == os.path.realpath(fallback_path):
            continue
        try:
            with open(path, "rb") as f:
                text = f.read()
            if b"fp8_for_compile" not in text:
                continue
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "fp8_for_compile":
                return path
    return None


def fallback_module_name(text):
    """`fp8_fallback`, `pkg.fp8_fallback`, or the setting's relative path form (`src/utils/fp8_fallback.py`) as a
    dotted module name."""
    text = (text or "").strip().replace("\\", "/")
    if text.endswith(".py"):
        text = text[:-3]
    return ".".join(p for p in text.split("/") if p and p != ".")


def _skip_dir(name, path):
    return name.startswith(".") or name in SKIP_DIRS or os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def _project_files(folder):
    """Every file below FOLDER, in a stable order, virtual environments, dot folders and node_modules skipped."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not _skip_dir(d, os.path.join(root, d)))
        for f in sorted(files):
            yield os.path.join(root, f)


def find_fallback(conv, name):
    """The fallback module's files in CONV, nearest first: CONV/a/b/name.py for a dotted name, else any */name.py
    below CONV (virtual environments, dot folders and node_modules skipped). Raises no_fallback."""
    rel = name.replace(".", os.sep) + ".py"
    found = []
    direct = os.path.join(conv, rel)
    if os.path.isfile(direct):
        found.append(os.path.realpath(direct))
    else:
        for path in _project_files(conv):
            if (os.sep + path).endswith(os.sep + rel):
                found.append(os.path.realpath(path))
        found.sort(key=lambda p: (p.count(os.sep), p))
    short = os.path.basename(rel)
    if not found:
        raise BenchError("no_fallback", "%s has no %s: run `precision-lens check %s --fix --unsafe-fixes` first"
                         % (conv, short, conv),
                         "the converted copy imports its FP8 layers and context from the generated %s; pass "
                         "--fallback-module NAME if the project names it otherwise" % short)
    for path in found:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        if "def fp8_autocast_context" in text:
            return path, found
    raise BenchError("no_fallback", "%s defines no fp8_autocast_context: not the fallback module Precision Lens "
                     "writes" % found[0],
                     "run `precision-lens check %s --fix --unsafe-fixes` on the converted copy" % conv)


# --------------------------------------------------------------------------------------------------------------
# Two copies of one project in one interpreter

class Projects(object):
    """ORIG and CONV on sys.path one at a time. A module belongs to the folder that holds its file (the deepest one,
    where one folder is inside the other); installed packages (site-packages, a virtual environment in the project)
    and the benchmark's own modules belong to neither and are never touched."""

    def __init__(self, folders):
        self.folders = dict(folders)        # name -> real path
        self.saved = {n: {} for n in folders}
        self.active = None

    def owner(self, mod):
        files = []
        f = getattr(mod, "__file__", None)
        if f:
            files.append(f)
        elif getattr(mod, "__path__", None) is not None:  # namespace package
            try:
                files.extend(list(mod.__path__))
            except Exception:
                pass
        best = None
        for f in files:
            try:
                real = os.path.realpath(f)
            except (TypeError, ValueError):
                continue
            parts = real.split(os.sep)
            if "site-packages" in parts or "dist-packages" in parts or real.startswith(BENCH_DIR + os.sep):
                continue
            for name, folder in self.folders.items():
                if real.startswith(folder + os.sep) and (best is None or len(folder) > len(self.folders[best])):
                    best = name
        return best

    def activate(self, name):
        folder = self.folders[name]
        for modname, mod in list(sys.modules.items()):
            if mod is None:
                continue
            who = self.owner(mod)
            if who is not None and who != name:
                self.saved[who][modname] = sys.modules.pop(modname)
        for other in self.folders.values():
            while other in sys.path:
                sys.path.remove(other)
        sys.path.insert(0, folder)
        sys.modules.update(self.saved[name])
        self.saved[name] = {}
        importlib.invalidate_caches()
        self.active = name

    def loaded(self, path):
        """The module object loaded from this file, where one is (active folder)."""
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and os.path.realpath(f) == path:
                return mod
        return None


class _Tee(io.TextIOBase):
    """sys.stdout for the converted copy's code: the text still goes where stdout goes (stderr: protocol.take_stdout),
    and the fallback's mode lines are kept."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.lines = []
        self._buf = ""

    def writable(self):
        return True

    def write(self, s):
        self.inner.write(s)
        self._buf += s
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.startswith(FALLBACK_LINES):
                self.lines.append(line)
        return len(s)

    def flush(self):
        self.inner.flush()


@contextlib.contextmanager
def keep_fallback_lines(lines):
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    if tee._buf.startswith(FALLBACK_LINES):
        tee.lines.append(tee._buf)
    lines.extend(tee.lines)


# --------------------------------------------------------------------------------------------------------------
# FP8 proof: te.* modules and the forwards that ran with FP8 enabled

def te_module():
    te = sys.modules.get("transformer_engine.pytorch")
    if te is None:
        info = envprobe.load_te()
        te = info.get("te")
    return te


def fp8_enabled_probe():
    """(FP8GlobalStateManager.is_fp8_enabled, where it was found) or (None, None)."""
    for name in TE_STATE_MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        mgr = getattr(mod, "FP8GlobalStateManager", None)
        if mgr is not None and callable(getattr(mgr, "is_fp8_enabled", None)):
            return mgr.is_fp8_enabled, "%s.FP8GlobalStateManager.is_fp8_enabled" % name
    return None, None


def _classes(te, names):
    if te is None:
        return ()
    return tuple(c for c in (getattr(te, n, None) for n in names) if isinstance(c, type))


def _gemm_modules(model, classes):
    """(name, module) of every te.* GEMM module the model runs: its registered modules, and those a module holds outside
    its children (the fallback's fused te.LayerNormMLP sits in its MLP's __dict__, so it adds no checkpoint key)."""
    out, seen = [], set()
    for name, m in model.named_modules():
        held = [(k, v) for k, v in vars(m).items() if isinstance(v, classes)]
        for n, g in ([(name, m)] if isinstance(m, classes) else []) + [("%s.%s" % (name, k) if name else k, v) for k, v in held]:
            if id(g) not in seen:
                seen.add(id(g))
                out.append((n, g))
    return out


class Fp8Counter(object):
    def __init__(self, model, te, compiling):
        gemms = _gemm_modules(model, _classes(te, TE_GEMM_CLASSES)) if te is not None else []
        self.gemm = [(n, type(m).__name__) for n, m in gemms]
        self.norms = sum(1 for m in model.modules() if isinstance(m, _classes(te, TE_NORM_CLASSES)))
        self.enabled, self.source = fp8_enabled_probe() if self.gemm else (None, None)
        self.total = 0
        self.fp8 = 0
        self.handles = []
        hook = self._hook
        if compiling:  # run the counter eagerly: TE's modules break the graph anyway
            disable = getattr(getattr(torch, "compiler", None), "disable", None) or \
                getattr(getattr(torch, "_dynamo", None), "disable", None)
            if disable is not None:
                hook = disable(hook)
        for _, m in gemms:
            self.handles.append(m.register_forward_pre_hook(hook))

    def _hook(self, module, args):
        self.total += 1
        if self.enabled is not None and self.enabled():
            self.fp8 += 1

    def report(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        kinds = {}
        for _, k in self.gemm:
            kinds[k] = kinds.get(k, 0) + 1
        return {"modules": len(self.gemm), "forwards_fp8": self.fp8 if self.enabled is not None else None,
                "forwards_total": self.total, "module_types": kinds, "norm_modules": self.norms,
                "state_check": self.source,
                "counted": "forward calls of the te.* GEMM modules over the warm-up and measured steps"}


# --------------------------------------------------------------------------------------------------------------
# The run

def _fingerprint(batch):
    out = []

    def walk(x):
        if torch.is_tensor(x):
            out.append((tuple(x.shape), str(x.dtype), float(x.detach().double().sum().cpu())))
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                walk(x[k])
    walk(batch)
    return out


ROUNDED_ARM = "original-rounded"


def round_to_bf16(model):
    """Rounds every floating-point parameter wider than BF16 to its nearest BF16 value, in place: what storing the
    initial checkpoint in BF16 does. Returns how many values there were, how many changed and the largest relative
    change (at most 2^-8: BF16 keeps 8 significant bits)."""
    total, changed, max_rel = 0, 0, 0.0
    with torch.no_grad():
        for p in model.parameters():
            if not p.is_floating_point() or p.dtype == torch.bfloat16 or p.numel() == 0:
                continue
            r = p.to(torch.bfloat16).to(p.dtype)
            diff = (r - p).abs()
            total += p.numel()
            changed += int((diff > 0).sum())
            nz = p != 0
            if bool(nz.any()):
                max_rel = max(max_rel, float((diff[nz] / p[nz].abs()).max()))
            p.copy_(r)
    return {"values": total, "changed": changed, "max_rel": max_rel,
            "what": "each floating-point parameter rounded once to BF16 before the first step"}


def _cpu_state(model):
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items() if torch.is_tensor(v)}


def _extra_state(key):
    return key == "_extra_state" or key.endswith("._extra_state")


def load_original_weights(model, state, conv):
    """Loads the original arm's initial weights into the converted model. Only TE's `_extra_state` may be missing or
    unexpected; anything else (a renamed or reshaped parameter) is a weights_mismatch error."""
    try:
        res = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # size mismatch
        raise BenchError("weights_mismatch", "the converted model cannot take the original's weights: %s"
                         % str(exc).strip().replace("\n", " ")[:800],
                         "the A/B compares the same model before and after the conversion: %s must build the same "
                         "parameters as the original (te.* layers of the same shapes)" % conv)
    missing = [k for k in res.missing_keys if not _extra_state(k)]
    unexpected = [k for k in res.unexpected_keys if not _extra_state(k)]
    if missing or unexpected:
        def few(keys):
            return ", ".join(keys[:8]) + (" (+%d more)" % (len(keys) - 8) if len(keys) > 8 else "")
        raise BenchError("weights_mismatch", "the converted model's parameters do not match the original's: %s%s%s"
                         % ("missing in the converted model: %s" % few(missing) if missing else "",
                            "; " if missing and unexpected else "",
                            "only in the original: %s" % few(unexpected) if unexpected else ""),
                         "only Transformer Engine's _extra_state may differ; was %s converted from this ORIG?" % conv,
                         missing_keys=missing[:50], unexpected_keys=unexpected[:50])
    return {"missing_extra_state": len(res.missing_keys), "unexpected_extra_state": len(res.unexpected_keys)}


def run(session, args, env, device, te_installed):
    from . import cli
    emitter = session.emitter
    orig, conv = validate_args(args)
    session.state["phase"] = "workload"
    fallback_name = args.fallback_module.strip()
    fallback_path, fallback_files = find_fallback(conv, fallback_name)
    kind, spec = workloads.parse_workload_spec(args.workload)
    if kind != "user":
        raise BenchError("usage", "--mode ab runs your own workload (module:function)", None)
    if args.fp8_lm_head:
        log("note: --fp8-lm-head does not apply to --mode ab (the converted copy decides its own layers)")
        args.fp8_lm_head = False
    args.compile_scope = "model"  # the whole model, every arm alike

    compile_path = compile_conversion(conv, fallback_path)
    projects = Projects({"original": orig, "converted": conv})
    fns = {}
    lines = []
    for name, folder in (("original", orig), ("converted", conv)):
        projects.activate(name)
        try:
            with keep_fallback_lines(lines if name == "converted" else []):
                fns[name] = workloads.resolve_user_function(spec[0], spec[1], folder)
        except BenchError as err:
            err.message = "%s copy (%s): %s" % (name, folder, err.message)
            raise

    def builder(name):
        def build():
            projects.activate(name)
            with keep_fallback_lines(lines if name == "converted" else []):
                return workloads.build_user_workload(spec, fns[name], batch=args.batch, seq=args.seq, device=device,
                                                     seed=args.seed)
        return build

    shared = {"state": None, "fingerprint": None, "counter": None, "fallback": None}
    cpu_note = " [CPU: harness test, not a benchmark]" if device == "cpu" else ""

    def capture_original(model, wl, result):
        if wl.description:
            log("[original] workload: %s" % wl.description)
        n = getattr(args, "warm_start_steps", 0) or 0
        if n > 0:
            log("[original] warm start: %d BF16 steps before the arms, every arm from the weights they leave" % n)
            losses = runner.warm_start(model, wl, n, result["lr"], device, clip=1.0)
            shared["warm_start"] = {"steps": n, "lr": result["lr"], "first_loss": losses[0], "last_loss": losses[-1],
                                    "batches_from": runner.WARM_START_BATCH_BASE,
                                    "what": "the original trained in BF16 before every arm started from its weights"}
        if shared.get("warm_start"):
            result["warm_start"] = shared["warm_start"]
        shared["state"] = _cpu_state(model)
        shared["fingerprint"] = _fingerprint(wl.batch_fn(0))
        _label(result)

    def load_into(strict):
        def after_build(model, wl, result):
            if shared["state"] is None:
                raise BenchError("weights_mismatch", "the original arm did not run, so there are no weights to load",
                                 "see the original arm's error")
            if strict:
                model.load_state_dict(shared["state"], strict=True)
                result["weights"] = "the original arm's initial weights (strict load)"
            else:
                result["weights_loaded"] = load_original_weights(model, shared["state"], conv)
                result["weights"] = "the original arm's initial weights (only TE _extra_state may differ)"
            if shared.get("warm_start"):
                result["warm_start"] = shared["warm_start"]
            result["batches_match_original"] = _fingerprint(wl.batch_fn(0)) == shared["fingerprint"]
            if not result["batches_match_original"]:
                log("WARNING: [%s] batch_factory(0) differs from the original's: the arms see different data"
                    % result["backend"])
            _label(result)
        return after_build

    def _label(result):
        if device == "cpu":
            result["emulated"] = True
            result["not_a_benchmark"] = True

    def prepare_converted(rc, model, hp, result):
        projects.activate("converted")
        fb = projects.loaded(fallback_path)
        used = fb is not None
        if fb is None:  # the model never imported it: import it from CONV
            rel = os.path.relpath(fallback_path, conv)[:-3].replace(os.sep, ".")
            try:
                with keep_fallback_lines(lines):
                    fb = importlib.import_module(rel)
            except Exception as exc:
                traceback.print_exc()
                raise BenchError("no_fallback", "%s failed to import: %s: %s" % (fallback_path, type(exc).__name__, exc),
                                 "fix the converted copy's fallback module (traceback on stderr)")
        if compile_path:
            return prepare_compile_path(rc, fb, model, result)
        if not callable(getattr(fb, "fp8_autocast_context", None)):
            raise BenchError("no_fallback", "%s defines no fp8_autocast_context" % fallback_path,
                             "run `precision-lens check %s --fix --unsafe-fixes` first" % conv)
        ok, reason = None, None
        if callable(getattr(fb, "fp8_available", None)):
            with keep_fallback_lines(lines):
                state = fb.fp8_available()
            try:
                ok, reason = bool(state[0]), str(state[1] or "")
            except (TypeError, IndexError):
                ok, reason = bool(state), ""
        te = te_module() if te_installed or "transformer_engine.pytorch" in sys.modules else None
        shared["counter"] = Fp8Counter(model, te, bool(args.compile) and hasattr(torch, "compile"))
        shared["fb"] = fb
        recipe = getattr(fb, "FP8_RECIPE", None)
        mode_line = next((l for l in lines if l.startswith(("Running in FP8 mode", "Running in BF16 fallback"))), None)
        shared["fallback"] = result["fallback"] = {
            "module": fb.__name__, "file": fallback_path, "files_found": fallback_files, "used_by_model": used,
            "fp8_available": ok, "reason": reason, "mode": "fp8" if ok else "bf16-fallback",
            "mode_line": mode_line, "log": lines[:20],
            "recipe": type(recipe).__name__ if recipe is not None else None,
        }
        result["fallback_mode"] = "fp8" if ok else "bf16-fallback"
        result["recipe"] = ("%s (the converted copy's FP8_RECIPE)" % type(recipe).__name__) if ok and recipe is not None \
            else "BF16 autocast: the fallback's own (%s)" % (reason or "FP8 not available")
        result["precision"] = "%s.fp8_autocast_context() from the converted copy, fp32 master weights" % fb.__name__
        result["te_version"] = env.get("te", {}).get("version")
        log("[converted] %s: %s" % (fb.__name__, mode_line or ("FP8" if ok else "BF16 fallback: %s" % reason)))
        return [fb.fp8_autocast_context]

    def prepare_compile_path(rc, fb, model, result):
        """The converted script hands its model to torch.compile through fp8_for_compile (PL306): the arm does the same
        where it compiles, under the script's own BF16 autocast; eager, the script runs the model as it is (BF16)."""
        if not callable(getattr(fb, "fp8_for_compile", None)):
            raise BenchError("no_fallback", "%s defines no fp8_for_compile, which %s calls" % (fallback_path, compile_path),
                             "delete the fallback module and run `precision-lens check %s --fix --unsafe-fixes` again" % conv)
        compiled = runner.wants_compile(rc, "converted") and hasattr(torch, "compile")
        if compiled:
            with keep_fallback_lines(lines):
                fb.fp8_for_compile(model)
        kinds = {}
        for m in model.modules():
            if type(m).__name__ == "Float8Linear":
                kinds["Float8Linear"] = kinds.get("Float8Linear", 0) + 1
        mode_line = next((l for l in lines if l.startswith(("Running in FP8 mode", "Running in BF16 fallback"))), None)
        ok = bool(kinds)
        shared["compile_path"] = {"modules": kinds.get("Float8Linear", 0), "forwards_fp8": None, "forwards_total": None,
                                  "module_types": kinds, "norm_modules": 0, "state_check": None,
                                  "counted": "torchao Float8Linear modules after fp8_for_compile (each of their forwards "
                                             "runs its GEMM in FP8; forwards are not hooked, which would break the graph)"}
        shared["fallback"] = result["fallback"] = {
            "module": fb.__name__, "file": fallback_path, "files_found": fallback_files, "used_by_model": False,
            "fp8_available": ok, "reason": None if ok else (mode_line or "eager: fp8_for_compile is applied with torch.compile only"),
            "mode": "fp8" if ok else "bf16-fallback", "mode_line": mode_line, "log": lines[:20], "recipe": None,
            "path": "fp8_for_compile (torchao float8 training under torch.compile)", "called_in": compile_path,
        }
        result["fallback_mode"] = "fp8" if ok else "bf16-fallback"
        result["recipe"] = "torchao float8 training, tensorwise (fp8_for_compile)" if ok else \
            "BF16 autocast: %s" % (mode_line or "eager, as the converted script runs without torch.compile")
        result["precision"] = "torch.autocast(bfloat16) with %s.fp8_for_compile(model) before torch.compile, as %s does" % (
            fb.__name__, os.path.relpath(compile_path, conv))
        log("[converted] %s: %s" % (fb.__name__, mode_line or "eager: fp8_for_compile applies under torch.compile only"))
        dev_type = "cuda" if device == "cuda" else "cpu"
        return [lambda: torch.autocast(dev_type, dtype=torch.bfloat16)]

    def finish_converted(model, result):
        if shared.get("compile_path") is not None:
            result["fp8_gemms"] = shared.pop("compile_path")
            log("[converted] torchao Float8Linear modules %d" % result["fp8_gemms"]["modules"])
            return
        c = shared.pop("counter", None)
        shared["counter"] = None
        attention = attention_report(shared.pop("fb", None))
        if attention is not None:
            result["attention"] = attention
            log("[converted] attention: %s" % attention["summary"])
        result["fp8_gemms"] = c.report() if c is not None else {"modules": 0, "forwards_fp8": None,
                                                                 "forwards_total": 0}
        g = result["fp8_gemms"]
        log("[converted] te.* GEMM modules %d, forwards with FP8 enabled %s of %d" % (
            g["modules"], g["forwards_fp8"], g["forwards_total"]))

    arms = [
        runner.Arm("original", "original: %s as it is, forward + loss under torch.autocast(bfloat16)%s" % (orig, cpu_note),
                   builder("original"), impl="bf16", after_build=capture_original),
        runner.Arm("converted", ("converted: %s, the original's weights, forward + loss under its %s."
                                 "fp8_autocast_context()%s" % (conv, fallback_name, cpu_note)) if not compile_path else
                   ("converted: %s, the original's weights, %s.fp8_for_compile(model) under torch.compile as %s "
                    "does, forward + loss under torch.autocast(bfloat16)%s"
                    % (conv, fallback_name, os.path.relpath(compile_path, conv), cpu_note)),
                   builder("converted"), autocast=False, prepare=prepare_converted, after_build=load_into(False),
                   finish=finish_converted),
    ]

    if getattr(args, "repeat_original", False):
        # The noise floor: the original once more, from the same weights and batches; the difference between the two
        # BF16 runs is what FP8's difference is measured against.
        arms.append(runner.Arm("original-repeat", "original-repeat: the original arm again (same weights and batches), "
                               "the noise floor of the loss comparison%s" % cpu_note, builder("original"), impl="bf16",
                               after_build=load_into(True)))

    if getattr(args, "rounded_original", False):
        # The run's sensitivity to its start: the original from its weights rounded once to BF16. Where two runs that
        # differ by far less than FP8's rounding part as much as FP8 does, the training itself is that sensitive.
        def rounded_start(model, wl, result):
            load_into(True)(model, wl, result)
            result["perturbation"] = round_to_bf16(model)
            result["weights"] = "the original arm's initial weights, each floating-point parameter rounded once to BF16"

        arms.append(runner.Arm(ROUNDED_ARM, "%s: the original arm from its initial weights rounded once to BF16 (same "
                               "batches): how far this training moves from a change far smaller than FP8's%s"
                               % (ROUNDED_ARM, cpu_note), builder("original"), impl="bf16", after_build=rounded_start))

    # The peer: torchao on the original model
    peer = {"name": "torchao-original", "requested": args.peer, "ran": False, "reason": None}
    ao_info = {}
    if args.peer in ("auto", "torchao"):
        ao_info = fp8_torchao.load_torchao()
        env_ao = dict(env)
        env_ao["torchao"] = fp8_torchao.env_info(ao_info)
        runnable, errs = cli.gate_backends([PEER_BACKEND], env_ao, device)
        if PEER_BACKEND in runnable and not errs:
            peer_compile = {"on": True, "off": False}.get(getattr(args, "peer_compile", "same"))
            if peer_compile and not hasattr(torch, "compile"):
                log("note: torch %s has no torch.compile: the torchao peer runs eager" % torch.__version__)
                peer_compile = False
            compiled = bool(args.compile) if peer_compile is None else peer_compile
            peer["compile"] = compiled
            arms.append(runner.Arm("torchao-original", "torchao-original: %s with torchao convert_to_float8_training "
                                   "(tensorwise), lm-head and embeddings in BF16, under torch.autocast(bfloat16)%s%s"
                                   % (orig, ", torch.compile" if compiled else ", eager", cpu_note),
                                   builder("original"), impl=PEER_BACKEND, after_build=load_into(True),
                                   compile=peer_compile))
        else:
            peer["reason"] = errs[0].message if errs else "torchao cannot run here"
            if args.peer == "torchao":
                for err in errs:
                    err.backend = "torchao-original"
                    err.extra["backends"] = ["torchao-original"]
                    if "reasons" in err.extra:
                        err.extra["reasons"] = {"torchao-original": v for v in err.extra["reasons"].values()}
                    session.error(err)
            else:
                log("note: no torchao peer: %s" % peer["reason"])
    else:
        peer["reason"] = "--peer none"

    info = envprobe.load_te() if te_installed else {}
    rc = runner.RunContext(args, emitter, env, device, builder("original"), te_info=info, state=session.state,
                           ao_info=ao_info)
    rc.arms = {a.name: a for a in arms}
    results = {}
    t0 = time.time()
    for a in arms:
        session.state["phase"] = "backend"
        log("== %s: %s, %d warm-up + %d measured steps, compile=%s" % (a.name, args.workload, args.warmup,
                                                                        args.steps, runner.wants_compile(rc, a.name)))
        try:
            res = runner.run_backend(rc, a.name)
        except BenchError as err:
            if err.code == "bad_workload":
                err.message = "%s copy: %s" % (a.name, err.message)
                err.fatal = True
                raise
            session.error(err)
            if a.name == "original":  # nothing to compare against: stop here
                break
            continue
        finally:
            shared["counter"] = None
        res["compile_requested"] = runner.wants_compile(rc, a.name)
        res["arm"] = a.name
        results[a.name] = res
        emitter.emit("result", **res)
        if a.name == "torchao-original":
            peer["ran"] = True

    roof = cli.measure_roofline(rc, args, device, session, env)
    summary = cli.make_summary(results, session.errors, roof, args, time.time() - t0, baseline="original")
    summary["mode"] = "ab"
    summary["ab"] = ab_summary(results, orig, conv, fallback_name, shared.get("fallback"), peer, device)
    summary["ab"]["warm_start"] = shared.get("warm_start")
    emitter.emit("summary", **summary)
    cli.print_table(results, summary)
    a = summary["ab"]
    if a.get("eval_loss_rel") is not None:
        log("A/B: converted eval loss %+.3f %% vs original%s" % (
            100.0 * a["eval_loss_rel"], "" if a.get("noise_floor_eval_rel") is None else
            "; the original run again: %+.3f %% (noise floor)" % (100.0 * a["noise_floor_eval_rel"])))
    if a.get("sensitivity_eval_rel") is not None:
        log("A/B: the original from its weights rounded once to BF16: eval loss %+.3f %% vs original (how far this "
            "training moves from a change far smaller than FP8's)" % (100.0 * a["sensitivity_eval_rel"]))
    if a.get("loss_rel_final") is not None:
        log("A/B: converted final loss %+.3f %% vs original; FP8 GEMM forwards %s of %s; %s" % (
            100.0 * a["loss_rel_final"], a["fp8_gemms"].get("forwards_fp8"), a["fp8_gemms"].get("forwards_total"),
            a.get("fallback_mode")))
    vp = a.get("converted_vs_peer")
    if vp:
        log("A/B: converted %.3fx the tokens/s of torchao on the original (%s, same process)" % (
            vp["tokens_per_s_ratio"], "compiled" if vp["peer_compiled"] else "eager"))
    return summary["exit_code"]


def attention_report(fb):
    """What the converted copy's fp8_attention (PL107) ran, from the fallback module's own state after the arm: the
    te.DotProductAttention modules it built (one per shape: attention ran in TE's fused kernel) and the reasons it
    logged for calls it left to torch's scaled_dot_product_attention. None for a module without fp8_attention."""
    cores = getattr(fb, "_PL_ATTENTION", None)
    if not isinstance(cores, dict):
        return None
    kept = sorted(str(r) for r in (getattr(fb, "_PL_ATTENTION_LOGGED", None) or ()))
    if cores:
        summary = "te.DotProductAttention (fused, BF16), %d shape%s" % (len(cores), "" if len(cores) == 1 else "s")
    else:
        summary = "torch's scaled_dot_product_attention"
    if kept:
        summary += "; torch's for: %s" % "; ".join(kept)
    return {"te_modules": len(cores), "torch_reasons": kept, "summary": summary,
            "counted": "te.DotProductAttention modules fp8_attention built (one per shape), and the reasons it logged "
                       "for the calls it left to torch"}


def ab_summary(results, orig, conv, fallback_name, fallback, peer, device):
    o, c = results.get("original"), results.get("converted")
    out = {"original": orig, "converted": conv, "fallback_module": fallback_name,
           "fallback_file": (fallback or {}).get("file"), "fallback_mode": (fallback or {}).get("mode"),
           "fp8_available": (fallback or {}).get("fp8_available"), "fallback_reason": (fallback or {}).get("reason"),
           "fp8_gemms": (c or {}).get("fp8_gemms") or {"modules": 0, "forwards_fp8": None, "forwards_total": 0},
           "attention": (c or {}).get("attention"),
           "loss_rel_final": None, "loss_first_diff": None, "peak_memory_ratio": None, "tokens_per_s_ratio": None,
           "step_time_ratio": None, "batches_match": (c or {}).get("batches_match_original"), "peer": peer,
           "not_a_benchmark": device == "cpu", "workload_description": (o or {}).get("workload_description")}

    def rel(arm, key):
        """arm's key (eval_loss, final_loss) relative to the original's, or None where either is missing."""
        x = results.get(arm)
        if not (o and x and o.get(key) and x.get(key) is not None):
            return None
        return x[key] / o[key] - 1.0

    out["eval_loss_rel"], out["loss_rel_final"] = rel("converted", "eval_loss"), rel("converted", "final_loss")
    out["noise_floor_eval_rel"] = rel("original-repeat", "eval_loss")
    out["noise_floor_final_rel"] = rel("original-repeat", "final_loss")
    out["sensitivity_eval_rel"] = rel(ROUNDED_ARM, "eval_loss")
    out["sensitivity_final_rel"] = rel(ROUNDED_ARM, "final_loss")
    if o and c:
        if o.get("losses") and c.get("losses"):
            out["loss_first_diff"] = c["losses"][0] - o["losses"][0]
        if o.get("peak_memory_bytes") and c.get("peak_memory_bytes"):
            out["peak_memory_ratio"] = c["peak_memory_bytes"] / o["peak_memory_bytes"]
        if o.get("tokens_per_s"):
            out["tokens_per_s_ratio"] = c["tokens_per_s"] / o["tokens_per_s"]
        if o["step_ms"]["median"]:
            out["step_time_ratio"] = c["step_ms"]["median"] / o["step_ms"]["median"]
    t = results.get("torchao-original")
    out["converted_vs_peer"] = None
    if c and t and t.get("tokens_per_s"):
        # The converted project against torchao on the original in the same process (issue 21: at least torchao's
        # best configuration): > 1 means the conversion is ahead.
        out["converted_vs_peer"] = {"tokens_per_s_ratio": c["tokens_per_s"] / t["tokens_per_s"],
                                    "peer_compiled": bool(t.get("compile")),
                                    "peak_memory_ratio": (c["peak_memory_bytes"] / t["peak_memory_bytes"]
                                                          if t.get("peak_memory_bytes") and c.get("peak_memory_bytes")
                                                          else None)}
    return out
