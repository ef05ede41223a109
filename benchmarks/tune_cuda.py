"""Tune fp16 GEMM and conv2d NHWC with the Tensor Core space on a GPU, against cuBLAS / cuDNN.

Workloads (float16 operands, float32 accumulation and output):
- ``gemm``: C = A @ B, ``--gemm-size`` cubed (default 4096);
- ``conv``: N=16, 56x56 output, 64 -> 64 channels, 3x3, stride 1, NHWC (input given padded).

Each is tuned with ``metasched.tune`` for ``cuda -arch=<this GPU's>`` (``--trials`` candidates,
XGBoost cost model when xgboost is installed, else random), every candidate checked against the
host CPU's result; the best is built again and timed with CUDA events, side by side with torch's
``matmul`` (cuBLAS, float16 output) and ``conv2d`` on channels-last float16 tensors (cuDNN).
Without a GPU or torch it says why and exits 0.

    python benchmarks/tune_cuda.py --trials 64 [--seconds 90] [--workloads gemm,conv] [--gemm-size 4096]

Prints the timings, then one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _harness import report

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_space_check  # noqa: E402 - the workloads and their references

#: Each timed sample (ours and the peer's) spans at least this long: back-to-back calls between
#: two events, so that a 40 us kernel's launch gaps and the clock's ramp weigh alike on both
#: sides (one call per sample timed cuDNN's conv at 0.031 to 0.063 ms in three runs of a day).
SAMPLE_SECONDS = 2e-3


def _calls_per_sample(seconds: float) -> int:
    return max(1, min(1000, int(np.ceil(SAMPLE_SECONDS / max(seconds, 1e-9)))))


def _torch_seconds(torch: Any, run: Any) -> float:
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    number = _calls_per_sample(start.elapsed_time(end) / 1000.0)
    samples = []
    for _ in range(20):
        start.record()
        for _ in range(number):
            run()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 1000.0 / number)
    return float(np.median(samples))


def _peer_seconds(torch: Any, workload: str, args: list[np.ndarray]) -> float:
    if workload == "gemm":
        a, b = (torch.from_numpy(x).cuda() for x in args[:2])
        return _torch_seconds(torch, lambda: torch.matmul(a, b))
    x = torch.from_numpy(args[0]).cuda().permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels last
    w = torch.from_numpy(args[1]).cuda().permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
    torch.backends.cudnn.benchmark = True
    return _torch_seconds(torch, lambda: torch.nn.functional.conv2d(x, w))


def tune_one(
    workload: str, target: str, trials: int, gemm_size: int, log: Any, seconds: float | None = None
) -> dict[str, Any]:
    import metasched
    import tir

    func = cuda_space_check.make_gemm(gemm_size) if workload == "gemm" else cuda_space_check.make_conv2d_nhwc()
    cost_model = "xgb" if importlib.util.find_spec("xgboost") else "random"
    started = time.perf_counter()
    result = metasched.tune(
        func,
        target,
        trials=trials,
        time_budget=seconds,
        work_dir=tempfile.mkdtemp(prefix=f"tune-{workload}-"),
        cost_model=cost_model,
        log=log,
    )
    wall = time.perf_counter() - started
    errors: dict[str, int] = {}
    first_messages: dict[str, str] = {}
    for record in result.database.records(func, target):
        if record.error_kind is not None:
            errors[record.error_kind] = errors.get(record.error_kind, 0) + 1
            first_messages.setdefault(record.error_kind, record.error_msg[:300])
    for kind, count in sorted(errors.items()):
        print(f"[{workload}] {count} measurements failed ({kind}), the first: {first_messages[kind]}")
    best = result.best_func
    if best is None:
        return {"workload": workload, "trials": result.trials, "tune_seconds": wall, "best": None, "errors": errors}
    module = tir.build(best, target)
    rng = np.random.default_rng(7)
    if workload == "gemm":
        args = cuda_space_check.gemm_inputs(rng, gemm_size)
        want = cuda_space_check.gemm_reference(*args[:2])
        flops = 2.0 * gemm_size**3
    else:
        args = cuda_space_check.conv_inputs(rng)
        want = cuda_space_check.conv_reference(*args[:2])
        flops = 2.0 * 16 * 56 * 56 * 64 * 9 * 64
    module(*args)
    error = float(np.linalg.norm(args[2] - want) / np.linalg.norm(want))
    ours = module.time(*args, repeat=20, number=_calls_per_sample(module.time(*args, repeat=3, warmup=3)), warmup=3)
    return {
        "workload": workload,
        "trials": result.trials,
        "tune_seconds": round(wall, 1),
        "cost_model": cost_model,
        "errors": errors,
        "rel_error": error,
        "ours_ms": ours * 1e3,
        "ours_tflops": flops / ours / 1e12,
        "args": args,
        "flops": flops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--workloads", default="gemm,conv")
    parser.add_argument("--gemm-size", type=int, default=4096)
    parser.add_argument("--seconds", type=float, help="time budget of each workload's search (default: none)")
    options = parser.parse_args()
    from tir.runtime.cuda_driver import _driver, device_missing_reason

    missing = device_missing_reason()
    if missing is not None:
        print(f"not measured: {missing}")
        report({"device": None, "reason": missing})
        return
    import torch

    target = f"cuda -arch={_driver().arch()}"
    device = torch.cuda.get_device_name()
    summary: dict[str, Any] = {"device": device, "target": target}
    for workload in options.workloads.split(","):
        outcome = tune_one(
            workload,
            target,
            options.trials,
            options.gemm_size,
            log=lambda line: print(line, flush=True),
            seconds=options.seconds,
        )
        if outcome.get("ours_ms") is None:
            print(f"{workload}: no valid candidate in {outcome['trials']} trials")
            summary[workload] = {"trials": outcome["trials"], "best": None}
            continue
        peer = _peer_seconds(torch, workload, outcome.pop("args"))
        flops = outcome.pop("flops")
        library = "cuBLAS" if workload == "gemm" else "cuDNN"
        print(
            f"{device} {workload}: tuned {outcome['trials']} trials in {outcome['tune_seconds']} s; ours "
            f"{outcome['ours_ms']:.3f} ms ({outcome['ours_tflops']:.1f} TFLOP/s, rel. error {outcome['rel_error']:.1e}), "
            f"{library} {peer * 1e3:.3f} ms ({flops / peer / 1e12:.1f} TFLOP/s): ratio {peer * 1e3 / outcome['ours_ms']:.3f}"
        )
        outcome.update(peer_ms=peer * 1e3, ratio=peer * 1e3 / outcome["ours_ms"], peer=library)
        summary[workload] = outcome
    report(summary)


if __name__ == "__main__":
    main()
