#!/usr/bin/env bash
# Transformer Engine + torchao on the H200 device machine (bench/results/h200/README.md, "Bringing TE there").
#
#   bench/tools/te_install.sh fetch   DEST       # development machine: download the wheels and the sdist (PyPI)
#   bench/tools/te_install.sh install WHEELS     # device: pip install --target /tmp/site (prints the PYTHONPATH)
#   bench/tools/te_install.sh build   SDIST OUT  # device: build transformer_engine_torch for sm_90, all cores
#
# fetch also writes the sm_90-only core wheel (te_prune_core.py): the published one is 264 MiB, one call carries 64.
set -uo pipefail
TE_VERSION=${TE_VERSION:-2.20.2}
TORCHAO_VERSION=${TORCHAO_VERSION:-0.18.0}
SITE=${SITE:-/tmp/site}
here=$(cd "$(dirname "$0")" && pwd)
stamp() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(stamp)" -v what="$2" 'BEGIN { printf "TIME %-34s %7.1f s\n", what, b - a }'; }

case "${1:-}" in
  fetch)
    dest=${2:?destination folder}; mkdir -p "$dest/full" "$dest/carry"
    plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64"
    plat="$plat --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
    t=$(stamp)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat \
      -d "$dest/full" "transformer_engine_cu13==$TE_VERSION" "transformer_engine==$TE_VERSION" \
      "torchao==$TORCHAO_VERSION" pydantic==2.12.5 pydantic-core==2.41.5 annotated-types==0.7.0 \
      typing-inspection==0.4.2 typing-extensions==4.15.0 nvdlfw-inspect==0.2.2 || exit
    took "$t" "pip download (wheels)"
    # pip download of an sdist runs its setup.py (which needs torch): take the file pip resolves, as pip would.
    t=$(stamp)
    url=$(python3 -m pip download -vvv --no-deps --no-binary=:all: --no-build-isolation -d "$dest/full" \
            "transformer_engine_torch==$TE_VERSION" 2>&1 | grep -oE "https://[^ #]*transformer_engine_torch-$TE_VERSION.tar.gz" | head -1)
    [ -n "$url" ] && curl -sSfL -o "$dest/full/transformer_engine_torch-$TE_VERSION.tar.gz" "$url" || exit
    took "$t" "sdist download"
    t=$(stamp)
    python3 "$here/te_prune_core.py" "$dest/full/transformer_engine_cu13-$TE_VERSION-"*.whl "$dest/carry" || exit
    took "$t" "prune core wheel to sm_90"
    for f in "$dest/full/"*; do case $f in *transformer_engine_cu13-*) ;; *) cp "$f" "$dest/carry/" ;; esac; done
    ls -l "$dest/carry"; du -sh "$dest/carry"
    ;;
  install)
    dir=${2:?wheel folder}; t=$(stamp)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$dir"/*.whl || exit
    took "$t" "pip install --target $SITE"
    echo "export PYTHONPATH=$SITE"
    ;;
  build)
    sdist=${2:?sdist}; out=${3:?output folder}; mkdir -p "$out" /tmp/tebuild
    t=$(stamp)
    tar xzf "$sdist" -C /tmp/tebuild || exit
    cd /tmp/tebuild/transformer_engine_torch-* || exit
    # sm_90 only, every core; the core library and its headers come from the installed transformer_engine_cu13.
    export NVTE_FRAMEWORK=pytorch NVTE_CUDA_ARCHS=90 MAX_JOBS=${MAX_JOBS:-$(nproc)} NVTE_PYTORCH_FORCE_BUILD=TRUE
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    # cudnn.h, nccl.h ... come with torch's nvidia-* wheels, not with the toolkit: put their include dirs on CPATH.
    inc=$(python3 -c "import glob, os, nvidia; print(':'.join(d for p in nvidia.__path__ for d in sorted(glob.glob(os.path.join(p, '*', 'include')) + glob.glob(os.path.join(p, 'cu13', 'include')))))")
    export CPATH=$inc${CPATH:+:$CPATH}
    echo "CPATH=$CPATH"; echo "cores: $(nproc), MAX_JOBS=$MAX_JOBS"; nvcc --version | tail -2
    python3 -m pip wheel -v --no-build-isolation --no-deps --no-index -w "$out" . || exit
    took "$t" "build transformer_engine_torch"
    ls -l "$out"
    ;;
  *) sed -n 2,9p "$0"; exit 2 ;;
esac
