"""Quickstart: write a kernel, print it, run it, check it against numpy.

    python examples/quickstart.py

The kernel is a matrix multiplication followed by ReLU (docs/design.md section 4). ``@T.script``
does not run the function: it reads its source and builds a ``tir.PrimFunc``, a program of
loops and blocks that later steps schedule, compile and tune. ``tir.interpret`` runs it on
numpy arrays, slowly and simply, as the reference every other backend is checked against.
"""

from __future__ import annotations

import numpy as np

import tir
import tir.script as T


@T.script
def matmul_relu(
    A: T.Buffer((32, 16), "float32"),
    B: T.Buffer((16, 24), "float32"),
    D: T.Buffer((32, 24), "float32"),
):
    C = T.alloc_buffer((32, 24), "float32")  # an intermediate, local to the function
    for i, j, k in T.grid(32, 24, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)  # two spatial axes, one reduction axis
            with T.init():
                C[vi, vj] = 0.0  # runs on the first iteration of vk
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(32, 24):
        with T.block("D"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)


# What the test suite needs to check this file like every other example.
KERNEL = matmul_relu
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((32, 16), dtype=np.float32)
    b = rng.standard_normal((16, 24), dtype=np.float32)
    return [a, b, np.zeros((32, 24), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
    return {"D": np.maximum(a @ b, 0.0)}


def main() -> None:
    # 1. The program, as the printer writes it: reads and writes of every block are explicit.
    print(matmul_relu.script())

    # 2. Run it. Outputs are written in place, like a C function filling its arguments.
    a, b, d = make_args(np.random.default_rng(0))
    tir.interpret(matmul_relu, a, b, d)

    # 3. Compare with numpy.
    error = float(np.abs(d - reference(a, b, d)["D"]).max())
    if error > ATOL:
        raise SystemExit(f"mismatch: max abs error {error:.3g} (tolerance {ATOL:g})")
    print(f"OK: the interpreter agrees with numpy on relu(A @ B) (max abs error {error:.1e})")

    # 4. Compile it for this CPU with the LLVM backend and run the native code.
    module = tir.build(matmul_relu, "llvm")
    d_native = np.zeros_like(d)
    module(a, b, d_native)
    error = float(np.abs(d_native - d).max())
    if error > ATOL:
        raise SystemExit(f"mismatch: LLVM build vs interpreter, max abs error {error:.3g}")
    print(f"OK: the LLVM build agrees too, {module.time(a, b, d_native) * 1e6:.1f} us per call")


if __name__ == "__main__":
    main()
