#!/usr/bin/env bash
# Creates .venv-pre-commit (git-ignored) with PyPI's pre-commit, for test/unit/pre-commit.test.ts (pre-commit try-repo
# against this clone). Idempotent; exits non-zero, with the reason, when it cannot be installed (the test then skips).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-pre-commit
if [ -x "$venv/bin/pre-commit" ]; then
  echo "pre-commit-venv: $("$venv/bin/pre-commit" --version)"
  exit 0
fi
rm -rf "$venv"
"${PRE_COMMIT_BASE_PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check pre-commit
echo "pre-commit-venv: $("$venv/bin/pre-commit" --version)"
