#!/usr/bin/env bash
# The real projects of issue 21 as the A/B wants them (bench/realproj/README.md):
#
#   bench/realproj/prepare.sh FAMILY [NAME] [-- CLI FLAGS...]
#
# FAMILY is nanogpt or llama2c; .realproj/FAMILY/orig/ must hold the published model.py and train.py (read with the
# search tool's read_file, never committed; README.md says which commits). Makes .realproj/NAME (default FAMILY):
#   orig/  the published files + this folder's pl_workload.py and textdata.py
#   conv/  a copy converted by ONE command: node out/cli.js check conv --fix --unsafe-fixes [CLI FLAGS]
#          (the workload files are copied in after the conversion, so they are never edited by it)
# Prints the conversion's summary and the diff's size; run `npm run build` first.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd); here=$root/bench/realproj
fam=${1:?FAMILY (nanogpt or llama2c)}; shift
name=$fam; if [ $# -gt 0 ] && [ "$1" != "--" ]; then name=$1; shift; fi
[ "${1:-}" = "--" ] && shift
src=$root/.realproj/$fam/orig; dst=$root/.realproj/$name
[ -f "$here/$fam/pl_workload.py" ] || { echo "no workload for $fam in $here" >&2; exit 2; }
for f in model.py train.py; do [ -f "$src/$f" ] || { echo "missing $src/$f (see bench/realproj/README.md)" >&2; exit 2; }; done
[ -f "$root/out/cli.js" ] || { echo "run npm run build first" >&2; exit 2; }
if [ "$dst" != "$root/.realproj/$fam" ]; then rm -rf "$dst"; mkdir -p "$dst/orig"; cp "$src/model.py" "$src/train.py" "$dst/orig/"; fi
rm -rf "$dst/conv"; mkdir -p "$dst/conv"; cp "$dst/orig/model.py" "$dst/orig/train.py" "$dst/conv/"
set +e; node "$root/out/cli.js" check "$dst/conv" --fix --unsafe-fixes "$@"; rc=$?; set -e
echo "precision-lens exit $rc (1 = findings left, as linters do)"
[ $rc -le 1 ] || exit $rc
for d in orig conv; do cp "$here/textdata.py" "$here/$fam/pl_workload.py" "$dst/$d/"; done
for f in model.py train.py; do
  n=$( (diff -u "$dst/orig/$f" "$dst/conv/$f" || true) | grep -c '^[-+][^-+]' || true)
  echo "$f: $n lines changed"
done
