"""The JSON-lines protocol: one JSON object per line on stdout, human text on stderr.

Events (see bench/README.md): env, workloads, progress, result, summary, error, cancelled.

`--mode ab` (plbench/ab.py: the user's project as it is, ORIG, against the copy Precision Lens converted, CONV) uses the
same events: `env` gains `mode: "ab"`; `progress` and `result` carry the arm's name in `backend` (`original`,
`converted`, `torchao-original`), results have the training metrics plus `arm`, and the converted arm `fallback`
{`module`, `file`, `fp8_available`, `reason`, `mode` "fp8"/"bf16-fallback", `mode_line`, `recipe`...}, `fallback_mode`
and `fp8_gemms` {`modules`, `forwards_fp8`, `forwards_total`, `module_types`, `norm_modules`, `state_check`}; the
`summary` has `baseline: "original"`, `mode: "ab"` and `ab` {`original`, `converted`, `fallback_module`,
`fallback_file`, `fallback_mode`, `fp8_available`, `fallback_reason`, `fp8_gemms`, `loss_rel_final` (converted final
loss / original final loss - 1), `loss_first_diff`, `peak_memory_ratio`, `tokens_per_s_ratio`, `step_time_ratio`,
`batches_match`, `peer` {`name`, `requested`, `ran`, `reason`}, `not_a_benchmark`}. Its own errors: `no_fallback`
(CONV has no fallback module, exit 11) and `weights_mismatch` (the converted model does not take the original's
weights, exit 12); a bad --converted is `usage`.
"""
import json
import math
import os
import sys

from . import PROTOCOL_VERSION

# Exit codes (stable: the extension maps them to messages). Documented in bench/README.md.
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NO_TORCH = 3
EXIT_NO_CUDA = 4
EXIT_FP8_UNSUPPORTED = 5
EXIT_TE_MISSING = 6
EXIT_OOM = 7
EXIT_BAD_WORKLOAD = 8
EXIT_BACKEND_FAILED = 9
EXIT_TORCHAO_MISSING = 10
EXIT_NO_FALLBACK = 11       # --mode ab: the converted copy has no fallback module
EXIT_WEIGHTS_MISMATCH = 12  # --mode ab: the converted model does not take the original's weights
EXIT_CANCELLED = 130

ERROR_EXIT_CODES = {
    "internal": EXIT_INTERNAL,
    "usage": EXIT_USAGE,
    "no_torch": EXIT_NO_TORCH,
    "no_cuda": EXIT_NO_CUDA,
    "fp8_unsupported": EXIT_FP8_UNSUPPORTED,
    "te_missing": EXIT_TE_MISSING,
    "oom": EXIT_OOM,
    "bad_workload": EXIT_BAD_WORKLOAD,
    "backend_failed": EXIT_BACKEND_FAILED,
    "torchao_missing": EXIT_TORCHAO_MISSING,
    "no_fallback": EXIT_NO_FALLBACK,
    "weights_mismatch": EXIT_WEIGHTS_MISMATCH,
    "cancelled": EXIT_CANCELLED,
}

NO_CUDA_MESSAGE = "no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes"
TE_MISSING_MESSAGE = "Transformer Engine not installed"


class BenchError(Exception):
    """An error that becomes one `error` event. fatal: the run stops (exit with the code's exit status)."""

    def __init__(self, code, message, hint=None, fatal=True, backend=None, **extra):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.fatal = fatal
        self.backend = backend
        self.extra = extra

    @property
    def exit_code(self):
        return ERROR_EXIT_CODES.get(self.code, EXIT_INTERNAL)

    def to_event(self):
        ev = {"code": self.code, "message": self.message, "hint": self.hint, "fatal": self.fatal,
              "exit_code": self.exit_code}
        if self.backend is not None:
            ev["backend"] = self.backend
        ev.update(self.extra)
        return ev


def sanitize(obj):
    """JSON has no NaN/Infinity (JSON.parse rejects them): map them to null, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    return obj


class Emitter:
    """Writes protocol events straight to a file descriptor with os.write: no buffered writer, so a signal
    handler that emits `cancelled` while another event is being written cannot hit a re-entrant buffer (it starts
    a fresh line instead). `fd` must be private to the protocol: see `take_stdout()`."""

    def __init__(self, fd):
        if hasattr(fd, "fileno"):
            fd.flush()
            fd = fd.fileno()
        self.fd = fd
        self._writing = False
        self.events = []  # kept for --json-out (progress events are not kept)

    def emit(self, event, **fields):
        obj = {"event": event}
        obj.update(fields)
        obj = sanitize(obj)
        line = json.dumps(obj, separators=(",", ":"))
        if event != "progress":
            self.events.append(obj)
        self._write(line)
        return obj

    def _write(self, line):
        data = (("\n" if self._writing else "") + line + "\n").encode("utf-8")
        self._writing = True
        try:
            while data:
                n = os.write(self.fd, data)
                data = data[n:]
        finally:
            self._writing = False

    def error(self, err):
        return self.emit("error", **err.to_event())


def take_stdout():
    """Reserve the real stdout for the protocol and send everything else written to fd 1 (prints in user model
    code, library chatter) to stderr, so stdout carries JSON lines only. Returns the protocol's file descriptor."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return fd


def log(msg):
    """Human-readable text: stderr only."""
    try:
        sys.stderr.write(msg.rstrip("\n") + "\n")
        sys.stderr.flush()
    except Exception:  # pragma: no cover
        pass
