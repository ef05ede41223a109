"""Matrix multiplication followed by ReLU: the program of docs/design.md section 4, at 16 x 16.

Two blocks: ``C`` reduces into an intermediate buffer allocated with ``T.alloc_buffer``,
``D`` applies ``max(x, 0)``. The first block binds its axes with ``T.remap``; the second
spells each axis out with ``T.spatial_axis(extent, loop_var)``.

Run it with ``python examples/matmul_relu.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T


@T.script
def matmul_relu(
    A: T.Buffer((16, 16), "float32"),
    B: T.Buffer((16, 16), "float32"),
    D: T.Buffer((16, 16), "float32"),
):
    C = T.alloc_buffer((16, 16), "float32")
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi = T.spatial_axis(16, i)
            vj = T.spatial_axis(16, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)


KERNEL = matmul_relu
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((16, 16), dtype=np.float32)
    b = rng.standard_normal((16, 16), dtype=np.float32)
    return [a, b, np.zeros((16, 16), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
    return {"D": np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0.0)}


def main() -> None:
    run_example(matmul_relu, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
