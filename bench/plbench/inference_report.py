"""What `--mode inference` offers in this environment, for the env event's `inference_backends` (the editor's
inference tab): each backend with whether it can run here and why not. No torch import: the probe reports this even
where PyTorch is missing."""
import importlib.util

INFERENCE_BACKENDS = ("bf16", "torchao", "te", "torch-fp8", "modelopt")
LABELS = {
    "bf16": "BF16 (eval, no grad)",
    "torchao": "torchao Float8DynamicActivationFloat8WeightConfig (E4M3, dynamic per-tensor scales)",
    "te": "Transformer Engine te.* layers under TE autocast (eval)",
    "torch-fp8": "torch._scaled_mm per-tensor FP8 linear (this harness)",
    "modelopt": "Model Optimizer FP8_DEFAULT_CFG fake-quant: ACCURACY REFERENCE ONLY, its speed is not FP8 speed",
}


SHORT_LABELS = {"bf16": "BF16 (eval)", "torchao": "FP8 (torchao dynamic act + weight)", "te": "FP8 (TE, eval)",
                "torch-fp8": "FP8 (torch._scaled_mm, fallback)", "modelopt": "ModelOpt fake-quant (accuracy only)"}


def _importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _inference_reason(backend, env):
    """None when `backend` can run in --mode inference here, else the reason (the same gates as the backends)."""
    if env.get("torch") is None:
        return "PyTorch is not installed in this interpreter"
    if not (env.get("cuda_available") and env.get("gpus")):
        return "no CUDA device"
    te, ao = env.get("te") or {}, env.get("torchao") or {}
    fp8, torch_fp8 = env.get("fp8") or {}, env.get("torch_fp8") or {}
    if backend == "torchao":
        if not ao.get("installed"):
            return "torchao not installed"
        return None if torch_fp8.get("available") else (torch_fp8.get("reason") or "no FP8 on this GPU")
    if backend == "te":
        if not te.get("installed"):
            return "Transformer Engine not installed"
        if te.get("error"):
            return te["error"]
        return None if fp8.get("available") else (fp8.get("reason") or "no FP8 on this GPU")
    if backend == "torch-fp8":
        return None if torch_fp8.get("available") else (torch_fp8.get("reason") or "torch._scaled_mm FP8 unavailable")
    if backend == "modelopt":
        return None if _importable("modelopt") else "nvidia-modelopt not installed"
    return None


def backend_report(env):
    """Every --mode inference backend with whether it can run here and why not: {id, label, description,
    available, reason}, as cli.backend_report does for training."""
    out = []
    for b in INFERENCE_BACKENDS:
        reason = _inference_reason(b, env)
        out.append({"id": b, "label": SHORT_LABELS[b], "description": LABELS[b], "available": reason is None,
                    "reason": reason, "reference_only": b == "modelopt"})
    return out

