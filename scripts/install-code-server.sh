#!/usr/bin/env bash
# Installs code-server 4.100.3 (VS Code 1.100.3 server + web workbench) into .vscode-test/code-server, offline-safe:
# its own postinstall downloads ripgrep/kerberos prebuilds, so scripts are skipped and only the native modules the
# extension host needs are built from source (needs g++, make, python3).
# ripgrep: code-server's search (Quick Open, Find in Files, and `workspaceContains` activation events) spawns
# @vscode/ripgrep/bin/rg, whose download is skipped; the system's rg (Debian: apt-get install -y ripgrep) is linked
# there instead. Idempotent: run it again at any time (npm run demo does when the link is missing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.vscode-test/code-server"
entry="$dest/node_modules/code-server/out/node/entry.js"
marker="$dest/.installed-4.100.3"
rg_dir="$dest/node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin"

link_ripgrep() {
  if [ -x "$rg_dir/rg" ] && "$rg_dir/rg" --version >/dev/null 2>&1; then
    return 0
  fi
  local rg
  rg="$(command -v rg || true)"
  if [ -z "$rg" ]; then
    echo "warning: ripgrep (rg) is not installed: in code-server (npm run demo) Quick Open and Find in Files will not work." >&2
    echo "         Install it (Debian/Ubuntu: apt-get install -y ripgrep), then run: bash scripts/install-code-server.sh" >&2
    return 0
  fi
  mkdir -p "$rg_dir"
  ln -sfn "$rg" "$rg_dir/rg"
  echo "ripgrep: linked $rg as $rg_dir/rg ($("$rg" --version | head -1))"
}

if [ -f "$marker" ] && [ -f "$entry" ]; then
  echo "code-server 4.100.3 already installed in $dest"
  link_ripgrep
  exit 0
fi
mkdir -p "$dest"
cd "$dest"
[ -f package.json ] || echo '{"name":"vscode-test-code-server","private":true}' > package.json
npm install --ignore-scripts --no-audit --no-fund --save-exact code-server@4.100.3
npm rebuild argon2 --build-from-source
cd node_modules/code-server/lib/vscode
npm install --omit=dev --ignore-scripts --no-audit --no-fund
npm rebuild @vscode/spdlog native-watchdog
touch "$marker"
echo "code-server 4.100.3 installed in $dest"
link_ripgrep
