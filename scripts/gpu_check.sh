#!/bin/bash
# One prepared run of every GPU check, for a machine with an NVIDIA GPU (an H100/H200 lent
# through the device tool, or your own). Run from the repository root:
#
#     bash scripts/gpu_check.sh [stages]      # stages: env,tests,example,bench,space,tune (default: all)
#
# Each stage has its own limit below; together they run in about 5 minutes on an H200 (at most
# 10.5 if every stage ran to its limit), within one call of a lent GPU's 10-minute command limit.
#
# Nothing is installed: the repository is put on PYTHONPATH and the machine's Python must
# already have numpy, llvmlite, cuda-python (cuda.bindings) and torch (cuBLAS/cuDNN are timed
# through it). Wheels in .whl/ (e.g. xgboost-cpu for the tune stage) go to /tmp/site first.
# A cubin cache in .gpucache/tir (nvcc's outputs, keyed by source; fill it on a CPU machine
# with the same nvcc by running the stages there) saves the compile time on the GPU machine.
# Each stage's output goes to $OUT/<stage>.log (OUT defaults to ./gpu_check_out); the end of
# each log is printed, and $OUT/summary.json holds each stage's exit status, seconds and result
# (the last JSON line of its log).
set -u
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
STAGES=${1:-env,tests,example,bench,space,tune}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TIR_CACHE_DIR=${TIR_CACHE_DIR:-$PWD/.gpucache/tir}
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi

stage() {  # stage NAME SECONDS COMMAND...: run when NAME is asked for, log to $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    case ",$STAGES," in *",$name,"*) ;; *) return ;; esac
    echo "== $name: $*"
    local start=$SECONDS
    timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    tail -n "${TAIL:-12}" "$OUT/$name.log"
    echo "== $name: exit $rc after $((SECONDS - start)) s"
    RESULTS="$RESULTS $name:$rc:$((SECONDS - start))"
}
RESULTS=""

env_report() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    nvcc --version | tail -n 2
    python3 -c "import sys, numpy, llvmlite; print(sys.version.split()[0], 'numpy', numpy.__version__, 'llvmlite', llvmlite.__version__)"
    python3 -c "import cuda.bindings; print('cuda.bindings', cuda.bindings.__version__)"
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
    python3 -c "from tir.runtime.cuda import device_missing_reason as r; print('device_missing_reason:', r())"
}

export -f env_report
PARALLEL=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
stage env 30 bash -c env_report
stage tests 120 python3 -m pytest -q -p no:cacheprovider -m "slow or not slow" $PARALLEL -rfs \
    tests/cuda tests/metasched/test_space_cuda.py
stage example 40 python3 examples/matmul_tensorcore.py
stage bench 150 python3 benchmarks/matmul_cuda.py
stage space 100 python3 benchmarks/cuda_space_check.py --samples "${SAMPLES:-12}" --workloads gemm,conv --out "$OUT/space"
stage tune 200 python3 benchmarks/tune_cuda.py --trials "${TRIALS:-64}" --seconds "${TUNE_SECONDS:-70}"
if [ -d "$OUT/space" ]; then  # one file back instead of many
    tar czf "$OUT/space.tgz" -C "$OUT" space && rm -rf "$OUT/space"
fi
# One JSON summary: per stage its exit status, seconds and the last JSON line of its log.
python3 - "$OUT" $RESULTS <<'PY'
import json, pathlib, sys

out, summary = pathlib.Path(sys.argv[1]), {}
for item in sys.argv[2:]:
    name, rc, seconds = item.split(":")
    entry = {"exit": int(rc), "seconds": int(seconds)}
    lines = [l for l in (out / f"{name}.log").read_text(errors="replace").splitlines() if l.startswith("{")]
    try:
        entry["result"] = json.loads(lines[-1]) if lines else None
    except ValueError:
        entry["result"] = None
    summary[name] = entry
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print("== summary:", out / "summary.json")
PY
