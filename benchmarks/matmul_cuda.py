"""The hand-scheduled float16 Tensor Core matmul (4096^3, float32 accumulation) against cuBLAS.

The kernel is the one of examples/matmul_tensorcore.py, built for ``cuda -arch=sm_80``; cuBLAS
runs through torch (``torch.matmul`` on CUDA float16 tensors) where torch is installed. Both are
timed with CUDA events around the kernels only. Without a GPU (or without torch) it says why and
ends with ``{"ratio_vs_cublas": null, "device": null, "reason": ...}``, exiting 0.

Run: python benchmarks/matmul_cuda.py       (prints the timings, then one JSON line)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from _harness import report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import matmul_tensorcore  # noqa: E402

N = 4096


def _give_up(reason: str) -> None:
    print(f"not measured: {reason}")
    report({"ratio_vs_cublas": None, "device": None, "reason": reason})


def _cublas_seconds(torch: Any, a: np.ndarray, b: np.ndarray) -> float:
    x, y = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    for _ in range(3):
        torch.matmul(x, y)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(10):
        start.record()
        torch.matmul(x, y)
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 1000.0)
    return float(np.median(samples))


def main() -> None:
    from tir.runtime.cuda import CUDADeviceError, device_missing_reason

    missing = device_missing_reason()
    if missing is not None:
        _give_up(missing)
        return
    try:
        import torch
    except ImportError:
        _give_up("torch is not installed: cuBLAS is measured through torch.matmul")
        return
    if not torch.cuda.is_available():
        _give_up("torch sees no CUDA device")
        return
    module = matmul_tensorcore.build(N)
    args = matmul_tensorcore.make_args(np.random.default_rng(0), N)
    try:
        module(*args)  # type: ignore[operator]
        ours = module.time(*args, repeat=10, warmup=2)  # type: ignore[attr-defined]
    except CUDADeviceError as error:
        _give_up(str(error))
        return
    want = matmul_tensorcore.reference(*args)["C"]
    error = float(np.abs(args[2] - want).max())
    cublas = _cublas_seconds(torch, args[0], args[1])
    flops = 2.0 * N**3
    device = torch.cuda.get_device_name()
    print(f"{device}: {N}^3 float16 -> float32 (max abs error vs numpy {error:.3g})")
    print(f"  ours   {ours * 1e3:8.3f} ms  {flops / ours / 1e12:7.2f} TFLOP/s")
    print(f"  cuBLAS {cublas * 1e3:8.3f} ms  {flops / cublas / 1e12:7.2f} TFLOP/s (torch.matmul, float16 out)")
    report({"ratio_vs_cublas": cublas / ours, "device": device, "max_abs_error": error})


if __name__ == "__main__":
    main()
