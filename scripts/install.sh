#!/usr/bin/env bash
# Install tensorir into the current Python (3.11+), editable.
#   bash scripts/install.sh          the package and its runtime dependencies
#   bash scripts/install.sh --test   also the test tools and dask.distributed, and (as root, on Debian/Ubuntu) the
#                                    AArch64 cross toolchain and qemu-user for the AArch64 tests
#   bash scripts/install.sh --zoo    also torch (a CPU build where one is at hand), torchvision, transformers and
#                                    onnxscript: what benchmarks/model_zoo.py exports its models with
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
want_zoo=0
for arg in "$@"; do
    case "$arg" in
        --test) want_test=1 ;;
        --zoo) want_zoo=1 ;;
        *) echo "usage: bash scripts/install.sh [--test] [--zoo]" >&2; exit 2 ;;
    esac
done

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"tensorir needs Python 3.11 or newer; this is {sys.version.split()[0]}")
PY

export PIP_ROOT_USER_ACTION=ignore
pip_flags=(-q --disable-pip-version-check)
if [ "$want_test" = 1 ]; then
    python3 -m pip install "${pip_flags[@]}" -e '.[test,bench,dask]'
else
    python3 -m pip install "${pip_flags[@]}" -e .
fi

if [ "$want_test" = 1 ]; then
    need_apt=()
    command -v qemu-aarch64 >/dev/null 2>&1 || need_apt+=(qemu-user)
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need_apt+=(gcc-aarch64-linux-gnu)
    [ -e /usr/aarch64-linux-gnu/include/stdio.h ] || need_apt+=(libc6-dev-arm64-cross)
    if [ "${#need_apt[@]}" -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "installing ${need_apt[*]} (for the AArch64 tests)"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq >/dev/null
            apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
        else
            echo "note: ${need_apt[*]} missing and not root/apt: the AArch64 tests will be skipped" >&2
        fi
    fi
fi
if [ "$want_zoo" = 1 ]; then
    # A CPU-only torch wheel from pip's find-links folders when one is there (PyPI's Linux torch
    # brings gigabytes of CUDA libraries); torchvision is taken in the release made for that torch.
    torch_spec=torch
    for folder in $(python3 -m pip config list 2>/dev/null | sed -n "s/^.*find-links='\(.*\)'$/\1/p") /opt/wheels; do
        found=$(ls "$folder"/torch-*+cpu-cp3*.whl 2>/dev/null | head -n 1 || true)
        if [ -n "$found" ]; then torch_spec="$found"; break; fi
    done
    python3 -m pip install "${pip_flags[@]}" "$torch_spec"
    torch_minor=$(python3 -c 'import torch; print(torch.__version__.split("+")[0].rsplit(".", 1)[0])')
    vision_minor=$(python3 -c "major, minor = '$torch_minor'.split('.'); print(f'0.{int(minor) + 15}')")
    python3 -m pip install "${pip_flags[@]}" "torchvision==${vision_minor}.*" transformers onnxscript
fi
echo "tensorir installed ($(python3 -c 'import tir; print(tir.__file__.rsplit("/", 2)[0])'))"
# pip puts the metasched script beside this Python's executables, which may not be on PATH
# (a --user install, say); python3 -m metasched works regardless.
if ! command -v metasched >/dev/null 2>&1; then
    scripts_dir="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
    echo "note: the metasched command is in $scripts_dir, which is not on PATH: add it, or run python3 -m metasched" >&2
fi
