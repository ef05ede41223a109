"""The hand-scheduled float16 Tensor Core matmul (4096^3, float32 accumulation) against cuBLAS.

The kernels are examples/matmul_tensorcore.py's schedule under each tiling of ``TILINGS`` (WMMA
and mma.sync + ldmatrix; block tiles 64 x 128 to 256 x 128, 4 or 8 warps; cp.async pipelines of
2 to 4 stages, fragment double-buffering, blocks rasterized in groups of 8 row tiles, copies
interleaved across rows), built for the GPU's own architecture. Each is checked against numpy
(output poisoned with NaN first) and timed with CUDA events around the kernel only; cuBLAS runs
through torch (``torch.matmul`` on CUDA float16 tensors, float16 output) in the same run.
Without a GPU (or without torch) it says why and ends with ``{"ratio_vs_cublas": null, "device":
null, "reason": ...}``, exiting 0.

Run: python benchmarks/matmul_cuda.py       (prints a table, then one JSON line)
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

T = matmul_tensorcore.Tiling
#: The tilings timed: the example's default first. Tiles over 48 KB of shared memory (deep
#: pipelines, k tiles of 64, 128 x 256 blocks) take it as dynamic shared memory.
TILINGS = [
    T(),
    *(
        T(bm, bn, wm, wn, kt, mma, stages)
        for mma in (False, True)
        for bm, bn, wm, wn, kt, stages in [
            (128, 128, 2, 2, 32, 2),
            (128, 128, 2, 2, 32, 3),
            (128, 128, 2, 2, 32, 4),
            (128, 128, 2, 2, 64, 3),
            (128, 256, 2, 4, 32, 3),
            (128, 256, 2, 4, 32, 4),
        ]
    ),
    T(256, 128, 4, 2, 32, True, 3),
    T(128, 128, 2, 4, 32, True, 3),
    T(64, 128, 2, 2, 32, True, 3),
    T(128, 128, 2, 2, 32, False, 2, interleave=True),
    T(128, 128, 2, 2, 32, False, 4, raster=8, interleave=True),
    T(128, 128, 2, 2, 32, True, 4, raster=8, interleave=True),
    T(128, 128, 2, 2, 32, False, 2, raster=8),
    T(128, 128, 2, 2, 32, False, 4, raster=8),
    T(128, 128, 2, 2, 32, True, 4, raster=8),
    *(
        T(bm, bn, wm, wn, kt, True, 3, fragment_pipeline=True)
        for bm, bn, wm, wn, kt in [
            (128, 128, 2, 2, 32),
            (128, 128, 2, 2, 64),
            (128, 256, 2, 4, 32),
        ]
    ),
]


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
    from tir.runtime.cuda_driver import _driver

    target = f"cuda -arch={_driver().arch()}"
    args = matmul_tensorcore.make_args(np.random.default_rng(0), N)
    want = matmul_tensorcore.reference(*args)["C"]
    flops = 2.0 * N**3
    rows = []
    for tiling in TILINGS:
        module = matmul_tensorcore.build(N, target, tiling)
        args[2][:] = np.nan
        try:
            module(*args)  # type: ignore[operator]
        except CUDADeviceError as error:
            if tiling == TILINGS[0]:
                _give_up(str(error))
                return
            print(f"{tiling.name}: {error}")
            continue
        error = float(np.abs(np.nan_to_num(args[2], nan=np.inf) - want).max())
        seconds = module.time(*args, repeat=10, warmup=2)  # type: ignore[attr-defined]
        rows.append((tiling, seconds, error))
    cublas = _cublas_seconds(torch, args[0], args[1])
    device = torch.cuda.get_device_name()
    print(
        f"{device} ({target}): {N}^3 float16 -> float32; cuBLAS {cublas * 1e3:.3f} ms, {flops / cublas / 1e12:.1f} TFLOP/s"
    )
    print(f"  {'tiling':36} {'ms':>8} {'TFLOP/s':>8} {'/cuBLAS':>8} {'max error':>10}")
    for tiling, seconds, error in rows:
        print(
            f"  {tiling.name:36} {seconds * 1e3:8.3f} {flops / seconds / 1e12:8.1f} {cublas / seconds:8.3f} {error:10.2g}"
        )
    correct = [row for row in rows if row[2] < 1e-2]
    best = min(correct, key=lambda row: row[1])
    by_kind = {
        kind: min((r for r in correct if r[0].mma == mma), key=lambda r: r[1], default=None)
        for kind, mma in (("wmma", False), ("mma", True))
    }
    report(
        {
            "ratio_vs_cublas": cublas / best[1],
            "best": best[0].name,
            "ratio_wmma": by_kind["wmma"] and cublas / by_kind["wmma"][1],
            "ratio_mma": by_kind["mma"] and cublas / by_kind["mma"][1],
            "wrong": [row[0].name for row in rows if row not in correct],
            "device": device,
        }
    )


if __name__ == "__main__":
    main()
