"""Batched matrix multiplication: ``C[b] = A[b] @ B[b]`` for every batch index ``b``.

The batch axis is one more spatial axis (``"SSSR"``): nothing else changes from matmul.

Run it with ``python examples/batch_matmul.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

BATCH, M, N, K = 3, 8, 6, 10


@T.script
def batch_matmul(
    A: T.Buffer((BATCH, M, K), "float32"),
    B: T.Buffer((BATCH, K, N), "float32"),
    C: T.Buffer((BATCH, M, N), "float32"),
):
    for b, i, j, k in T.grid(BATCH, M, N, K):
        with T.block("C"):
            vb, vi, vj, vk = T.remap("SSSR", b, i, j, k)
            with T.init():
                C[vb, vi, vj] = 0.0
            C[vb, vi, vj] += A[vb, vi, vk] * B[vb, vk, vj]


KERNEL = batch_matmul
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((BATCH, M, K), dtype=np.float32)
    b = rng.standard_normal((BATCH, K, N), dtype=np.float32)
    return [a, b, np.zeros((BATCH, M, N), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": np.matmul(a.astype(np.float64), b.astype(np.float64))}


def main() -> None:
    run_example(batch_matmul, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
