"""Tensorize with an intrinsic of your own: the TensorIR paper's 4 x 4 x 4 matmul.

A tensor intrinsic is two ``@T.script`` functions with the same buffer parameters: a
*description* of what it computes (ordinary loops and blocks) and an *implementation* (how:
vector code, LLVM intrinsics, ...). ``TensorIntrin.register`` names the pair; no compiler change
is needed. Here the description is ``C[0:4, 0:4] += A[0:4, 0:4] @ B[0:4, 0:4]`` and the
implementation computes each output as one 4-element dot product, ``C[i, j] += A[i, 0:4] .
B[0:4, j]``, four outputs of a row at a time (a vectorized loop).

The 64 x 64 x 64 matmul is cut into 4 x 4 x 4 tiles (``split``), the tile's loops are moved
innermost (``reorder``), and the tile is replaced by the intrinsic (``tensorize``): the tile
becomes a block whose body is the implementation, reading and writing views
(``T.match_buffer``) of the tile's regions of A, B and C. The zeroing of C stays the block's
``T.init()``, run on the first tile of each row of C's tiles.

Run it with ``python examples/tensorize_custom.py``: it prints the tensorized program, checks it
with the interpreter, prints the program before scheduling and the schedule, then builds it
with LLVM and checks it again.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir
import tir.script as T
from tir.intrin import TensorIntrin

N = 64
INTRIN = "example_dot_4x4x4"


# The tensorize tests register this desc / impl pair under names of their own (the paper's
# intrinsic is defined once, here): keep the two names.
@T.script
def dot_4x4x4_desc(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.block("update"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.script
def dot_4x4x4_impl(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i in range(4):
            for j in T.vectorized(4):
                C[i, j] = C[i, j] + (A[i, 0] * B[0, j] + A[i, 1] * B[1, j] + A[i, 2] * B[2, j] + A[i, 3] * B[3, j])


# override=True: importing the example twice (the tests do) registers the same pair again.
TensorIntrin.register(INTRIN, dot_4x4x4_desc, dot_4x4x4_impl, doc="4x4x4 float32 matmul by dot products", override=True)


@T.script
def matmul(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")):
    for i, j, k in T.grid(N, N, N):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def schedule(func: tir.PrimFunc) -> tir.Schedule:
    """Tile by 4 x 4 x 4 and tensorize the tile."""
    sch = tir.Schedule(func, debug=True)  # debug: every step is validated
    i, j, k = sch.get_loops(sch.get_block("C"))
    i_tile, i_in = sch.split(i, [None, 4])
    j_tile, j_in = sch.split(j, [None, 4])
    k_tile, k_in = sch.split(k, [None, 4])
    sch.reorder(i_tile, j_tile, k_tile, i_in, j_in, k_in)
    sch.tensorize(i_in, INTRIN)  # blockizes the tile under i_in, matches it, swaps in the impl
    return sch


SCHEDULE = schedule(matmul)
KERNEL = SCHEDULE.func.replace(name="tensorize_custom")
# The impl sums each dot product before adding it to C: another rounding order than the loop.
ATOL = 1e-3


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((N, N), dtype=np.float32)
    b = rng.standard_normal((N, N), dtype=np.float32)
    return [a, b, np.zeros((N, N), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.float64) @ b.astype(np.float64)}


def main() -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    print("\n# --- before: the matmul as written")
    matmul.show()
    print("\n# --- the schedule, as replayable Python")
    SCHEDULE.trace.show()
    args = make_args(np.random.default_rng(0))
    expected = reference(*args)["C"]
    tir.build(KERNEL, "llvm")(*args)
    error = float(np.abs(args[2] - expected).max())
    assert error <= ATOL, f"LLVM build: max abs error {error:.3g}"
    print(f"{KERNEL.name}: LLVM build matches numpy (max abs error {error:.2g})")


if __name__ == "__main__":
    main()
