"""Quantized matrix multiplication: int8 x int8 -> int32.

Each operand is widened with ``T.cast`` before the multiply, so products (up to 128 * 128 =
16384) and their sums are computed in int32. Multiplying the int8 values directly would wrap
around: the inputs span the whole int8 range, so the result would be wrong.

Run it with ``python examples/int8_matmul.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

M, N, K = 8, 8, 64


@T.script
def int8_matmul(
    A: T.Buffer((M, K), "int8"),
    B: T.Buffer((K, N), "int8"),
    C: T.Buffer((M, N), "int32"),
):
    for i, j, k in T.grid(M, N, K):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] += T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


KERNEL = int8_matmul
ATOL = 0.0  # integer arithmetic: exact


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, 0], b[0, 0] = -128, -128  # the largest product, 16384, is certainly there
    return [a, b, np.zeros((M, N), np.int32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.int32) @ b.astype(np.int32)}


def main() -> None:
    run_example(int8_matmul, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
