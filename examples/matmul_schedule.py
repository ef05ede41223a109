"""Scheduling a matmul by hand, one primitive at a time, into a fast CPU kernel.

The program never changes what it computes; each step changes how: the loop nest is tiled for
the caches and registers, B is packed into contiguous 16-column panels (``cache_read`` +
``transform_layout``), the zeroing of C is split off the reduction (``decompose_reduction``), and the innermost loops
become vector instructions (``vectorize``), straight-line code (``unroll``) and threads
(``parallel``). The program is printed after every step; the schedule itself is replayable
Python (``sch.trace.show()``).

The micro-kernel keeps a 4 x 16 tile of C in eight AVX2 registers: per step of k it loads 16
floats of packed B (two vectors), broadcasts 4 floats of A, and issues 8 fused multiply-adds.

    python examples/matmul_schedule.py          # walk through at N=1024, then time it
    python examples/matmul_schedule.py --quiet  # just the timing
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import run_example

import tir
import tir.script as T


def make_matmul(n: int, name: str = "matmul") -> tir.PrimFunc:
    """The textbook float32 matmul of size n x n x n."""

    @T.script
    def matmul(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    return matmul.replace(name=name)


def schedule_matmul(
    func: tir.PrimFunc, row_block: int = 128, depth_block: int = 1024, verbose: bool = False
) -> tir.Schedule:
    """The hand schedule. ``row_block`` rows of A and ``depth_block`` of k form the cache tile;
    the register tile is 4 x 16."""

    sch = tir.Schedule(func)

    def step(title: str) -> None:
        if verbose:
            print(f"\n# --- {title}")
            sch.show()

    step("the program as written")
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    # Tiles: i -> (row blocks, 4-row groups, 4 rows), j -> (16-column panels, 16 columns),
    # k -> (depth blocks, depth).
    i_block, i_group, i_row = sch.split(i, [None, row_block // 4, 4])
    j_panel, j_col = sch.split(j, [None, 16])
    k_block, k_step = sch.split(k, [None, depth_block])
    step("split i, j and k into tiles")
    sch.reorder(i_block, k_block, j_panel, i_group, k_step, i_row, j_col)
    step("reorder: the 4 x 16 register tile innermost, the k step around it")
    packed_b = sch.cache_read(block, 2, "global")  # reads are (C, A, B): B is index 2
    step("cache_read: a copy of B, read by the matmul instead of B")
    sch.transform_layout(packed_b, ("write", 0), lambda k, j: (j // 16, k, j % 16))
    step("transform_layout: the copy stores B as 16-column panels, each contiguous in k")
    pack_k, pack_j = sch.get_loops(packed_b)
    _, pack_col = sch.split(pack_j, [None, 16])
    sch.vectorize(pack_col)
    sch.parallel(pack_k)
    step("the packing runs on all cores, 16 floats at a time")
    init = sch.decompose_reduction(block, i_block)
    step("decompose_reduction: zero C in its own loop nest, so the accumulation has no branch")
    sch.vectorize(j_col)
    sch.unroll(i_row)
    sch.vectorize(sch.get_loops(init)[-1])
    step("vectorize the 16 columns, unroll the 4 rows")
    sch.parallel(i_block)
    step("parallel: row blocks run on all cores")
    return sch


# What the test suite checks like every other example: the schedule applied at a small size,
# so the interpreter runs it quickly (the walkthrough below uses N = 1024).
SMALL = 64
KERNEL = schedule_matmul(make_matmul(SMALL, "matmul_schedule"), row_block=32, depth_block=32).func
ATOL = 1e-3


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((SMALL, SMALL), dtype=np.float32)
    b = rng.standard_normal((SMALL, SMALL), dtype=np.float32)
    return [a, b, np.zeros((SMALL, SMALL), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a @ b}


def gflops(n: int, seconds: float) -> float:
    return 2.0 * n**3 / seconds / 1e9


def main() -> None:
    quiet = "--quiet" in sys.argv
    if not quiet:
        run_example(KERNEL, make_args, reference, ATOL)  # the small scheduled kernel, interpreted
    n = 1024
    sch = schedule_matmul(make_matmul(n), verbose=not quiet)
    if not quiet:
        print("\n# --- the schedule, as replayable Python")
        sch.trace.show()
    module = tir.build(sch.func, "llvm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    module(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    ours = module.time(a, b, c, repeat=5)
    start = time.perf_counter()
    a @ b
    theirs = time.perf_counter() - start
    print(
        f"\nmatmul {n}^3 float32, {module.num_threads} threads: {gflops(n, ours):.1f} GFLOP/s "
        f"(numpy, threads as configured: {gflops(n, theirs):.1f}); see benchmarks/matmul_cpu.py for a fair comparison"
    )


if __name__ == "__main__":
    main()
