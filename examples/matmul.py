"""Matrix multiplication, C = A @ B, in float32.

The reduction over ``k`` lives in one block: ``T.init()`` zeroes ``C[vi, vj]`` on the first
iteration of the reduce axis ``vk``, and every iteration accumulates one product.

Run it with ``python examples/matmul.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

# Sizes are plain Python ints; the kernel reads them as constants.
M, N, K = 16, 12, 20


@T.script
def matmul(
    A: T.Buffer((M, K), "float32"),
    B: T.Buffer((K, N), "float32"),
    C: T.Buffer((M, N), "float32"),
):
    for i, j, k in T.grid(M, N, K):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


KERNEL = matmul
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    return [a, b, np.zeros((M, N), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.float64) @ b.astype(np.float64)}


def main() -> None:
    run_example(matmul, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
