"""Precision Lens benchmark: BF16 vs FP8 training throughput on the local GPU.

Standard library + torch; NVIDIA Transformer Engine is optional. Nothing in this package imports torch at module
import time except the modules that need it (workloads, fp8_torch, te_convert, runner), so the entry point can report
a missing torch as a protocol error event rather than a traceback.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
