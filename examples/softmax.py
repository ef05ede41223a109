"""Row-wise softmax: ``B[i, :] = exp(A[i, :] - max(A[i, :])) / sum(exp(A[i, :] - max(A[i, :])))``.

Three blocks: a max reduction (initialised to -inf with ``T.float32("-inf")``), a sum of
exponentials, and an elementwise normalisation. Subtracting the row maximum keeps ``exp``
from overflowing on large inputs.

Run it with ``python examples/softmax.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

M, N = 8, 16  # rows, row length


@T.script
def softmax(A: T.Buffer((M, N), "float32"), B: T.Buffer((M, N), "float32")):
    row_max = T.alloc_buffer((M,), "float32")
    row_sum = T.alloc_buffer((M,), "float32")
    for i, k in T.grid(M, N):
        with T.block("row_max"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                row_max[vi] = T.float32("-inf")
            row_max[vi] = T.max(row_max[vi], A[vi, vk])
    for i, k in T.grid(M, N):
        with T.block("row_sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                row_sum[vi] = 0.0
            row_sum[vi] += T.exp(A[vi, vk] - row_max[vi])
    for i, j in T.grid(M, N):
        with T.block("normalize"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = T.exp(A[vi, vj] - row_max[vi]) / row_sum[vi]


KERNEL = softmax
ATOL = 1e-5


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    # Large logits: without the max subtraction, exp would overflow float32.
    a = (rng.standard_normal((M, N)) * 40.0).astype(np.float32)
    return [a, np.zeros((M, N), np.float32)]


def reference(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    shifted = a.astype(np.float64) - a.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return {"B": e / e.sum(axis=1, keepdims=True)}


def main() -> None:
    run_example(softmax, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
