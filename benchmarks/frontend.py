"""Front-end speeds: parsing, printing, structural hashing, and the reference interpreter.

Run: python benchmarks/frontend.py   (prints a table and one JSON line)
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import numpy as np

import tir
import tir.script as T


@T.script
def matmul64(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((64, 64), dtype=np.float32)
    b = rng.random((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    text = matmul64.script()
    figures = {
        "interpret_matmul64_s": median_seconds(lambda: tir.interpret(matmul64, a, b, c), 5),
        "parse_ms": 1e3 * median_seconds(lambda: tir.parse(text), 20),
        "print_ms": 1e3 * median_seconds(matmul64.script, 20),
        "structural_hash_ms": 1e3 * median_seconds(lambda: tir.structural_hash(matmul64), 20),
    }
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    for name, value in figures.items():
        print(f"{name:>24}: {value:.4g}")
    print(json.dumps({name: round(value, 5) for name, value in figures.items()}))


if __name__ == "__main__":
    main()
