#!/usr/bin/env bash
# Creates .venv-ptq (git-ignored) with torch CPU, torchao and nvidia-modelopt pinned in test/python/ptq-requirements.txt,
# for the tests that run the generated FP8 post-training quantization code. Idempotent: an existing venv whose pins
# match is kept. Exits non-zero, with the reason, when the packages cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
req=test/python/ptq-requirements.txt
venv=.venv-ptq
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
  echo "ptq-venv: $venv is up to date"
  exit 0
fi
python=${PTQ_BASE_PYTHON:-python3}
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
"$venv/bin/python" -c 'import torch, torchao, modelopt.torch.quantization; print("ptq-venv: torch", torch.__version__, "torchao", torchao.__version__)'
cp "$req" "$stamp"
