#!/usr/bin/env bash
# Installs code-server 4.100.3 (VS Code 1.100.3 server + web workbench) into .vscode-test/code-server, offline-safe:
# its own postinstall downloads ripgrep/kerberos prebuilds, so scripts are skipped and only the native modules the
# extension host needs are built from source (needs g++, make, python3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.vscode-test/code-server"
entry="$dest/node_modules/code-server/out/node/entry.js"
marker="$dest/.installed-4.100.3"
if [ -f "$marker" ] && [ -f "$entry" ]; then
  echo "code-server 4.100.3 already installed in $dest"
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
