#!/usr/bin/env bash
# The control arm for PL107's share of the te.* conversion's gain (bench/realproj/README.md):
#
#   bench/realproj/attention-control.sh FAMILY [NAME]
#
# Makes .realproj/NAME (default FAMILY-attn): orig/ the published files, conv/ the published files with ONLY the
# attention call renamed fp8_attention (imported from the project's fallback module, which the CLI writes for the te.*
# conversion; its Linears and norms stay torch.nn, nothing runs in FP8). `bench/tools/h200_ab.sh ab` on it measures
# what TE's fused attention gives a BF16 step by itself, beside the full conversion's run (prepare.sh ... PL306=off).
# Run `npm run build` first.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd); here=$root/bench/realproj
fam=${1:?FAMILY (nanogpt or llama2c)}; name=${2:-$fam-attn}
src=$root/.realproj/$fam/orig; dst=$root/.realproj/$name
[ -f "$here/$fam/pl_workload.py" ] || { echo "no workload for $fam in $here" >&2; exit 2; }
for f in model.py train.py; do [ -f "$src/$f" ] || { echo "missing $src/$f (see bench/realproj/README.md)" >&2; exit 2; }; done
[ -f "$root/out/cli.js" ] || { echo "run npm run build first" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$src/model.py" "$src/train.py" "$tmp/"
# The fallback module as the te.* conversion writes it (the conversion itself is thrown away).
set +e; node "$root/out/cli.js" check "$tmp" --fix --unsafe-fixes --convert-losing-layers --rule PL306=off > "$tmp/cli.log" 2>&1; rc=$?; set -e
[ $rc -le 1 ] && [ -f "$tmp/fp8_fallback.py" ] || { cat "$tmp/cli.log" >&2; echo "the CLI wrote no fp8_fallback.py (exit $rc)" >&2; exit 2; }
grep -q '^def fp8_attention(' "$tmp/fp8_fallback.py" || { echo "fp8_fallback.py has no fp8_attention" >&2; exit 2; }
rm -rf "$dst"; mkdir -p "$dst/orig" "$dst/conv"
cp "$src/model.py" "$src/train.py" "$dst/orig/"; cp "$src/model.py" "$src/train.py" "$tmp/fp8_fallback.py" "$dst/conv/"
python3 - "$dst/conv/model.py" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
text, n = re.subn(r"\b(?:torch\.nn\.functional|F)\.scaled_dot_product_attention\(", "fp8_attention(", text)
if n == 0:
    sys.exit("no torch scaled_dot_product_attention call in %s" % path)
lines = text.split("\n")
last = max(i for i, line in enumerate(lines) if re.match(r"(import \S|from \S+ import \S)", line) and not line.rstrip().endswith("("))
lines.insert(last + 1, "from fp8_fallback import fp8_attention")
open(path, "w").write("\n".join(lines))
print("model.py: %d attention call(s) through fp8_attention, nothing else changed" % n)
PY
for d in orig conv; do cp "$here/textdata.py" "$here/$fam/pl_workload.py" "$dst/$d/"; done
n=$( (diff -u "$dst/orig/model.py" "$dst/conv/model.py" || true) | grep -c '^[-+][^-+]' || true)
echo "model.py: $n lines changed; .realproj/$name ready"
