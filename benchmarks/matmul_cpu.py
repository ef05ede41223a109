"""The hand-scheduled float32 matmul (M = N = K = 1024) against numpy (OpenBLAS), side by side.

The schedule is the one of examples/matmul_schedule.py. Both sides run with the same thread
count (numpy's BLAS pinned with threadpoolctl), at 1 thread and at 2 threads; the goal is at
least 80% of numpy's GFLOP/s at each. Also reports ``trace_replay_ms``: replaying the
schedule's trace on a fresh schedule, validation off (the tuner does this constantly).

Run: python benchmarks/matmul_cpu.py       (prints a table, then one JSON line)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from _harness import blas_threads, median_seconds, report

import tir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from matmul_schedule import make_matmul, schedule_matmul  # noqa: E402

N = 1024
ROUNDS = 5  # alternate ours and numpy, keep each side's best median: less noise from the machine


def main() -> None:
    func = make_matmul(N)
    sch = schedule_matmul(func)
    module = tir.build(sch.func, "llvm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((N, N), dtype=np.float32)
    b = rng.standard_normal((N, N), dtype=np.float32)
    c = np.zeros((N, N), np.float32)
    module(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)

    flops = 2.0 * N**3
    figures: dict[str, float] = {}
    for threads in (1, 2):
        module.set_num_threads(threads)
        ours, theirs = [], []
        with blas_threads(threads):
            for _ in range(ROUNDS):
                ours.append(module.time(a, b, c, repeat=5))
                theirs.append(median_seconds(lambda: a @ b, repeat=5))
        figures[f"tir_gflops_{threads}t"] = flops / min(ours) / 1e9
        figures[f"numpy_gflops_{threads}t"] = flops / min(theirs) / 1e9
        figures[f"ratio_vs_numpy_{threads}t"] = min(theirs) / min(ours)

    replay_times = []
    for _ in range(20):
        fresh = tir.Schedule(func)
        start = time.perf_counter()
        sch.trace.apply_to(fresh)
        replay_times.append(time.perf_counter() - start)
    figures["trace_replay_ms"] = 1e3 * float(np.median(replay_times))
    figures["trace_instructions"] = float(len(sch.trace))

    print(f"matmul {N}^3 float32")
    for threads in (1, 2):
        print(
            f"  {threads} thread(s): tir {figures[f'tir_gflops_{threads}t']:6.1f} GFLOP/s   "
            f"numpy {figures[f'numpy_gflops_{threads}t']:6.1f} GFLOP/s   ratio {figures[f'ratio_vs_numpy_{threads}t']:.2f}"
        )
    print(f"  trace replay: {figures['trace_replay_ms']:.2f} ms for {len(sch.trace)} instructions")
    report(
        {
            "ratio_vs_numpy_1t": figures["ratio_vs_numpy_1t"],
            "ratio_vs_numpy_2t": figures["ratio_vs_numpy_2t"],
            "tir_gflops_1t": figures["tir_gflops_1t"],
            "tir_gflops_2t": figures["tir_gflops_2t"],
            "numpy_gflops_1t": figures["numpy_gflops_1t"],
            "numpy_gflops_2t": figures["numpy_gflops_2t"],
            "trace_replay_ms": figures["trace_replay_ms"],
        }
    )


if __name__ == "__main__":
    main()
