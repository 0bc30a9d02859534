#!/usr/bin/env bash
# Creates .venv-torch/ (git-ignored): a venv with a current CPU PyTorch, pytest and numpy, for the Python test layer
# (npm run test:python runs the benchmark's tests and the generated-code execution tests with it, and with Debian's
# python3-torch as the oldest supported torch). Idempotent: an existing venv with the pinned torch is kept.
#
# Only the CPU build is accepted: the pin carries the local version `+cpu`, which PyPI does not publish, so pip can
# only satisfy it from a CPU wheel on this machine's disk (this kind of machine carries torch 2.13.0+cpu) or a CPU
# index in the pip configuration, never by downloading a multi-GB CUDA build. torch's own dependencies come from PyPI.
#   TORCH_VENV=/path   another location        PYTHON=python3.11   the interpreter that creates the venv
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${TORCH_VENV:-$root/.venv-torch}"
torch_pin="torch==2.13.0+cpu"
python="${PYTHON:-python3}"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, pytest, numpy; assert torch.__version__ == "2.13.0+cpu"' 2>/dev/null; then
  echo "setup-torch-venv: $venv already has torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
  exit 0
fi
if ! command -v "$python" >/dev/null; then
  echo "setup-torch-venv: $python not found; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
echo "setup-torch-venv: creating $venv with $("$python" --version 2>&1) and $torch_pin (CPU build only)"
rm -rf "$venv"
"$python" -m venv "$venv"
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "$torch_pin" pytest numpy; then
  echo "setup-torch-venv: could not install $torch_pin. It must come from a CPU wheel on this machine" >&2
  echo "  (pip's find-links, e.g. /opt/wheels/torch-2.13.0+cpu-cp311-*.whl, for Python 3.11) or a CPU package index." >&2
  echo "  Nothing else is tried: PyPI's plain torch is a CUDA build of several GB." >&2
  rm -rf "$venv"
  exit 1
fi
"$venv/bin/python" -c 'import torch, pytest; print("setup-torch-venv: ready: torch", torch.__version__, "pytest", pytest.__version__)'
