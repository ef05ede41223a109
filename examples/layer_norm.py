"""Layer normalisation over the last axis, with a learned scale (gamma) and shift (beta).

``Y[i, j] = (X[i, j] - mean_i) / sqrt(var_i + EPS) * gamma[j] + beta[j]``. Two reductions
compute the mean and the (biased) variance of each row; the last block normalises with
``T.rsqrt``. ``INV_N`` and ``EPS`` are Python floats the kernel reads as constants.

Run it with ``python examples/layer_norm.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

M, N = 8, 16  # rows, normalised length
INV_N = 1.0 / N  # 0.0625, exact in float32
EPS = 1e-5


@T.script
def layer_norm(
    X: T.Buffer((M, N), "float32"),
    gamma: T.Buffer((N,), "float32"),
    beta: T.Buffer((N,), "float32"),
    Y: T.Buffer((M, N), "float32"),
):
    mean = T.alloc_buffer((M,), "float32")
    var = T.alloc_buffer((M,), "float32")
    for i, k in T.grid(M, N):
        with T.block("mean"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                mean[vi] = 0.0
            mean[vi] += X[vi, vk] * INV_N
    for i, k in T.grid(M, N):
        with T.block("var"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                var[vi] = 0.0
            var[vi] += (X[vi, vk] - mean[vi]) * (X[vi, vk] - mean[vi]) * INV_N
    for i, j in T.grid(M, N):
        with T.block("normalize"):
            vi, vj = T.remap("SS", i, j)
            Y[vi, vj] = (X[vi, vj] - mean[vi]) * T.rsqrt(var[vi] + EPS) * gamma[vj] + beta[vj]


KERNEL = layer_norm
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    x = (rng.standard_normal((M, N)) * 3.0 + 1.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, N).astype(np.float32)
    beta = rng.standard_normal(N).astype(np.float32)
    return [x, gamma, beta, np.zeros((M, N), np.float32)]


def reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    return {"Y": (x64 - mean) / np.sqrt(var + EPS) * gamma + beta}


def main() -> None:
    run_example(layer_norm, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
