"""Environment probe: Python, torch, CUDA, GPUs, Transformer Engine, FP8 support and recipes.

The rules here are pure functions of (compute capability, CUDA version) so they can be tested on a CPU machine.
"""
import importlib
import platform
import socket
import sys

# Recipe requirements (FP8-FACTS.md, "Recipes and GPUs").
RECIPES = ("DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling", "NVFP4BlockScaling")
FP8_MIN_CAPABILITY = (8, 9)
FP8_REASON_LOW_CC = "Device compute capability 8.9 or higher required for FP8 execution."


def parse_version(text):
    """'2.10.0.dev0+abc' -> (2, 10, 0); None/garbage -> None."""
    if not text:
        return None
    parts = []
    for piece in str(text).split("+")[0].split("."):
        digits = ""
        for ch in piece:
            if ch.isdigit():
                digits += ch
            else:
                break
        if digits == "":
            break
        parts.append(int(digits))
    return tuple(parts) if parts else None


def sm_name(cap):
    return "sm_%d%d" % (cap[0], cap[1]) if cap else None


def fp8_capability_rule(cap, cuda_version=None):
    """FP8 without TE: SM >= 8.9 (Ada also needs CUDA >= 12.1). Returns (available, reason)."""
    if cap is None:
        return False, "no CUDA device"
    cap = tuple(cap)
    if cap < FP8_MIN_CAPABILITY:
        return False, "%s (this GPU is %s)" % (FP8_REASON_LOW_CC, sm_name(cap))
    cv = parse_version(cuda_version)
    if cap == (8, 9) and cv is not None and cv < (12, 1):
        return False, "FP8 on Ada (sm_89) needs CUDA 12.1 or newer (PyTorch built with CUDA %s)" % cuda_version
    return True, "%s supports FP8 (compute capability >= 8.9)" % sm_name(cap)


def recipe_support(cap, cuda_version=None):
    """Which TE recipes this GPU supports, by the documented rules. {name: {"supported": bool, "reason": str}}."""
    out = {}
    cv = parse_version(cuda_version)
    ok8, why8 = fp8_capability_rule(cap, cuda_version)
    for name in ("DelayedScaling", "Float8CurrentScaling"):
        out[name] = {"supported": ok8, "reason": why8 if not ok8 else "SM >= 8.9"}
    if cap is None:
        for name in ("Float8BlockScaling", "MXFP8BlockScaling", "NVFP4BlockScaling"):
            out[name] = {"supported": False, "reason": "no CUDA device"}
        return out
    cap = tuple(cap)
    if cap < (9, 0):
        out["Float8BlockScaling"] = {"supported": False, "reason": "needs SM >= 9.0 (this GPU is %s)" % sm_name(cap)}
    elif cv is not None and cv < (12, 9):
        out["Float8BlockScaling"] = {"supported": False, "reason": "needs CUDA >= 12.9 (have %s)" % cuda_version}
    elif cv is None:
        out["Float8BlockScaling"] = {"supported": False, "reason": "needs CUDA >= 12.9 (CUDA version unknown)"}
    else:
        out["Float8BlockScaling"] = {"supported": True, "reason": "SM >= 9.0 and CUDA >= 12.9"}
    if cap[0] == 10:
        out["MXFP8BlockScaling"] = {"supported": True, "reason": "SM 10.x (Blackwell)"}
    else:
        out["MXFP8BlockScaling"] = {"supported": False, "reason": "needs SM 10.x (this GPU is %s)" % sm_name(cap)}
    if cap >= (10, 0):
        out["NVFP4BlockScaling"] = {"supported": True, "reason": "SM >= 10.0"}
    else:
        out["NVFP4BlockScaling"] = {"supported": False, "reason": "needs SM >= 10.0 (this GPU is %s)" % sm_name(cap)}
    return out


_TE_CACHE = {}


def load_te(force=False):
    """Import Transformer Engine once. Returns dict: installed, version, api, error, te (module), recipe (module)."""
    if _TE_CACHE and not force:
        return _TE_CACHE
    info = {"installed": False, "version": None, "api": None, "error": None, "te": None, "recipe": None}
    try:
        te = importlib.import_module("transformer_engine.pytorch")
    except ImportError as exc:
        info["error"] = "%s: %s" % (type(exc).__name__, exc)
        _TE_CACHE.clear()
        _TE_CACHE.update(info)
        return _TE_CACHE
    except Exception as exc:  # broken install (missing shared library, CUDA mismatch...)
        info["installed"] = True
        info["error"] = "Transformer Engine is installed but failed to import: %s: %s" % (type(exc).__name__, exc)
        _TE_CACHE.clear()
        _TE_CACHE.update(info)
        return _TE_CACHE
    info["installed"] = True
    info["te"] = te
    version = None
    try:
        root = importlib.import_module("transformer_engine")
        version = getattr(root, "__version__", None)
    except Exception:
        pass
    if version is None:
        try:
            from importlib import metadata
            for dist in ("transformer_engine", "transformer-engine", "transformer_engine_torch"):
                try:
                    version = metadata.version(dist)
                    break
                except Exception:
                    continue
        except Exception:
            pass
    info["version"] = version
    info["api"] = te_api(te, version)
    try:
        info["recipe"] = importlib.import_module("transformer_engine.common.recipe")
    except Exception as exc:
        info["error"] = "transformer_engine.common.recipe failed to import: %s" % exc
    _TE_CACHE.clear()
    _TE_CACHE.update(info)
    return _TE_CACHE


def te_api(te, version):
    """'autocast' (TE >= 2.9: te.autocast(recipe=...)) or 'fp8_autocast' (older: te.fp8_autocast(fp8_recipe=...))."""
    v = parse_version(version)
    if v is not None:
        if v >= (2, 9) and hasattr(te, "autocast"):
            return "autocast"
        if hasattr(te, "fp8_autocast"):
            return "fp8_autocast"
    return "autocast" if hasattr(te, "autocast") else "fp8_autocast"


def te_fp8_check(te, version):
    """TE's own answer: (available, reason, how)."""
    v = parse_version(version)
    if hasattr(te, "is_fp8_available") and (v is None or v >= (2, 9)):
        try:
            res = te.is_fp8_available(return_reason=True)
        except TypeError:
            res = te.is_fp8_available()
        if isinstance(res, tuple):
            return bool(res[0]), str(res[1] or ""), "te.is_fp8_available(return_reason=True)"
        return bool(res), "", "te.is_fp8_available()"
    try:
        fp8mod = importlib.import_module("transformer_engine.pytorch.fp8")
        ok, reason = fp8mod.check_fp8_support()
        return bool(ok), str(reason or ""), "transformer_engine.pytorch.fp8.check_fp8_support()"
    except Exception as exc:
        if hasattr(te, "is_fp8_available"):
            res = te.is_fp8_available()
            if isinstance(res, tuple):
                return bool(res[0]), str(res[1] or ""), "te.is_fp8_available()"
            return bool(res), "", "te.is_fp8_available()"
        return False, "could not ask Transformer Engine: %s" % exc, "none"


def _te_recipe_checks(te, recipes):
    """Refine the capability rules with TE's own checks where this TE has them."""
    checks = {
        "Float8BlockScaling": "is_fp8_block_scaling_available",
        "MXFP8BlockScaling": "is_mxfp8_available",
        "NVFP4BlockScaling": "is_nvfp4_available",
    }
    for name, fn in checks.items():
        f = getattr(te, fn, None)
        if f is None:
            continue
        try:
            try:
                res = f(return_reason=True)
            except TypeError:
                res = f()
            if isinstance(res, tuple):
                recipes[name] = {"supported": bool(res[0]), "reason": str(res[1] or "") or recipes[name]["reason"],
                                 "source": "te.%s" % fn}
            else:
                recipes[name] = {"supported": bool(res), "reason": recipes[name]["reason"], "source": "te.%s" % fn}
        except Exception:
            pass
    return recipes


def torch_fp8_support(torch, cap):
    """The torch-fp8 backend needs float8 dtypes, torch._scaled_mm and an FP8 GPU."""
    if torch is None:
        return False, "PyTorch is not installed"
    missing = [n for n in ("float8_e4m3fn", "float8_e5m2", "_scaled_mm") if not hasattr(torch, n)]
    if missing:
        return False, "PyTorch %s has no %s (needs PyTorch >= 2.1)" % (torch.__version__, ", ".join("torch." + m for m in missing))
    if cap is None:
        return False, "no CUDA device"
    ok, why = fp8_capability_rule(cap, getattr(torch.version, "cuda", None))
    if not ok:
        return False, why
    return True, "torch._scaled_mm with per-tensor dynamic scaling on %s" % sm_name(cap)


def probe(torch=None, with_te=True):
    """Everything the env event carries."""
    env = {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "torch": None,
        "cuda": None,
        "cudnn": None,
        "cuda_available": False,
        "device_count": 0,
        "gpus": [],
        "gpu_name": None,
        "capability": None,
        "sm": None,
        "memory_total_bytes": None,
        "compile_available": False,
    }
    cap = None
    if with_te and torch is not None:
        # Before torch loads cuDNN: TE loads the system/toolkit cuDNN first and the Python wheel's only as a fallback;
        # once torch has loaded the wheel's, TE's system libcudnn_heuristic meets the wheel's libcudnn_graph (seen on
        # the H200: "undefined symbol: _ZTVN5cudnn7backend12OperationSetE, version libcudnn_graph.so.9").
        load_te()
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = getattr(torch.version, "cuda", None)
        env["compile_available"] = hasattr(torch, "compile")
        try:
            env["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        except Exception:
            env["cudnn"] = None
        try:
            avail = bool(torch.cuda.is_available())
        except Exception:
            avail = False
        env["cuda_available"] = avail
        if avail:
            n = torch.cuda.device_count()
            env["device_count"] = n
            for i in range(n):
                p = torch.cuda.get_device_properties(i)
                c = (p.major, p.minor)
                env["gpus"].append({
                    "index": i, "name": p.name, "capability": "%d.%d" % c, "sm": sm_name(c),
                    "memory_total_bytes": int(p.total_memory),
                    "multiprocessors": int(getattr(p, "multi_processor_count", 0)),
                })
            if n:
                g = env["gpus"][0]
                cap = tuple(int(x) for x in g["capability"].split("."))
                env["gpu_name"] = g["name"]
                env["capability"] = g["capability"]
                env["sm"] = g["sm"]
                env["memory_total_bytes"] = g["memory_total_bytes"]
    cuda_version = env["cuda"]
    recipes = recipe_support(cap, cuda_version)
    te_env = {"installed": False, "version": None, "api": None, "error": None}
    fp8 = {}
    if with_te and torch is not None:
        info = load_te()
        te_env = {k: info[k] for k in ("installed", "version", "api", "error")}
        if info["te"] is not None:
            if cap is None:
                fp8 = {"available": False, "reason": "no CUDA device", "source": "transformer_engine"}
            else:
                try:
                    ok, reason, how = te_fp8_check(info["te"], info["version"])
                    fp8 = {"available": ok, "reason": reason or ("FP8 available" if ok else "FP8 unavailable"),
                           "source": how}
                except Exception as exc:
                    fp8 = {"available": False, "reason": "Transformer Engine check failed: %s" % exc, "source": "transformer_engine"}
                recipes = _te_recipe_checks(info["te"], recipes)
    if not fp8:
        ok, reason = fp8_capability_rule(cap, cuda_version)
        fp8 = {"available": ok, "reason": reason, "source": "capability rule (SM >= 8.9; Transformer Engine absent)"}
    env["te"] = te_env
    from . import fp8_torchao
    env["torchao"] = fp8_torchao.env_info(fp8_torchao.load_torchao()) if torch is not None else \
        {"installed": False, "version": None, "error": "PyTorch is not installed", "float8_training": False}
    env["fp8"] = fp8
    ok, why = torch_fp8_support(torch, cap)
    env["torch_fp8"] = {"available": ok, "reason": why}
    env["recipes"] = recipes
    return env
