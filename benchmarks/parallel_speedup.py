"""A parallel loop speeds up an embarrassingly parallel kernel: 1 thread vs all cores.

The kernel applies an arithmetic-heavy elementwise function to 4M floats; the outer loop is
``T.parallel``. Prints both timings and the speedup, then one JSON line.

Run: python benchmarks/parallel_speedup.py
"""

from __future__ import annotations

import os

import numpy as np
from _harness import report

import tir
import tir.script as T

ROWS, COLS = 2048, 2048


@T.script
def heavy(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS, COLS), "float32")):
    for i in T.parallel(ROWS):
        for j in range(COLS):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = T.tanh(A[vi, vj]) * T.exp(A[vi, vj] * 0.5) + T.sqrt(A[vi, vj] + 1.0)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((ROWS, COLS), dtype=np.float32)
    b = np.zeros_like(a)
    mod = tir.build(heavy, "llvm")
    cores = os.cpu_count() or 1
    mod.set_num_threads(1)
    one = mod.time(a, b, repeat=5)
    expected = np.tanh(a) * np.exp(a * 0.5) + np.sqrt(a + 1.0)
    np.testing.assert_allclose(b, expected, rtol=1e-5)
    mod.set_num_threads(cores)
    many = mod.time(a, b, repeat=5)
    np.testing.assert_allclose(b, expected, rtol=1e-5)
    print(f"1 thread: {one * 1e3:.2f} ms   {cores} threads: {many * 1e3:.2f} ms   speedup {one / many:.2f}x")
    report({"threads": cores, "time_1t_ms": one * 1e3, "time_nt_ms": many * 1e3, "speedup": one / many})


if __name__ == "__main__":
    main()
