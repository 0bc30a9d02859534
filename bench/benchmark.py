#!/usr/bin/env python3
"""Precision Lens benchmark: BF16 vs FP8 training throughput on this machine's GPU.

    python3 bench/benchmark.py --workload gpt-125m --backends bf16,te,torch-fp8 --steps 30 --json-out run.json

JSON lines on stdout (events env, progress, result, summary, error, cancelled), human text on stderr.
Protocol and exit codes: bench/README.md.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from plbench.cli import main  # noqa: E402  (standard library only: torch is imported inside main)

if __name__ == "__main__":
    sys.exit(main())
