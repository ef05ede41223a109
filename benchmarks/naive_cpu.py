"""Baseline: unscheduled (naive) kernels built with the LLVM backend against numpy (OpenBLAS).

Prints GFLOP/s for float32 matmul M=N=K=1024 and conv2d NHWC (N=1, 56x56, 64->64, 3x3, pad 1),
both at one thread, and ends with one JSON line. The schedule issue improves on these numbers.

Run: python benchmarks/naive_cpu.py
"""

from __future__ import annotations

import numpy as np
from _harness import blas_threads, median_seconds, report

import tir
import tir.script as T

M = N = K = 1024
H = W = 56
CI = CO = 64


@T.script
def matmul(A: T.Buffer((M, K), "float32"), B: T.Buffer((K, N), "float32"), C: T.Buffer((M, N), "float32")):
    for i, j, k in T.grid(M, N, K):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def conv2d(
    data: T.Buffer((1, H, W, CI), "float32"),
    weight: T.Buffer((3, 3, CI, CO), "float32"),
    out: T.Buffer((1, H, W, CO), "float32"),
):
    padded = T.alloc_buffer((1, H + 2, W + 2, CI), "float32")
    for n, h, w, c in T.grid(1, H + 2, W + 2, CI):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh and vh < H + 1 and 1 <= vw and vw < W + 1, data[vn, vh - 1, vw - 1, vc], 0.0
            )
    for n, h, w, co, rh, rw, ci in T.grid(1, H, W, CO, 3, 3, CI):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                out[vn, vh, vw, vco] = 0.0
            out[vn, vh, vw, vco] += padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


def numpy_conv2d(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # n h w c kh kw
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(H * W, 9 * CI)
    return (cols @ weight.reshape(9 * CI, CO)).reshape(1, H, W, CO)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    c = np.zeros((M, N), np.float32)
    data = rng.random((1, H, W, CI), dtype=np.float32)
    weight = rng.random((3, 3, CI, CO), dtype=np.float32)
    out = np.zeros((1, H, W, CO), np.float32)

    matmul_mod = tir.build(matmul, "llvm")
    conv_mod = tir.build(conv2d, "llvm")
    matmul_mod.set_num_threads(1)
    conv_mod.set_num_threads(1)
    matmul_mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3)
    conv_mod(data, weight, out)
    np.testing.assert_allclose(out, numpy_conv2d(data, weight), rtol=1e-3)

    matmul_flops = 2.0 * M * N * K
    conv_flops = 2.0 * H * W * CO * 9 * CI
    with blas_threads(1):
        figures = {
            "matmul_naive_gflops": matmul_flops / matmul_mod.time(a, b, c, repeat=3) / 1e9,
            "matmul_numpy_gflops": matmul_flops / median_seconds(lambda: a @ b, repeat=10) / 1e9,
            "conv2d_naive_gflops": conv_flops / conv_mod.time(data, weight, out, repeat=3) / 1e9,
            "conv2d_numpy_gflops": conv_flops / median_seconds(lambda: numpy_conv2d(data, weight), repeat=10) / 1e9,
        }
    figures["matmul_ratio_vs_numpy"] = figures["matmul_naive_gflops"] / figures["matmul_numpy_gflops"]
    figures["conv2d_ratio_vs_numpy"] = figures["conv2d_naive_gflops"] / figures["conv2d_numpy_gflops"]
    print("one thread, float32")
    for name, value in figures.items():
        print(f"  {name:>24}: {value:8.3f}")
    report(figures)


if __name__ == "__main__":
    main()
