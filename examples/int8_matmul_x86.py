"""Quantized matmul on x86-64, tensorized with the AVX2 int8 dot-product intrinsic.

``C = A @ B`` with ``A`` uint8 (activations), ``B`` int8 (weights), ``C`` int32. The program
is the textbook triple loop; the schedule makes it use ``x86_avx2_u7s8s32_dot_8x4``
(tir/intrin/x86.py), which adds four uint8 x int8 products into each of eight int32 lanes
with ``vpmaddubsw`` + ``vpmaddwd``:

1. ``cache_read`` + ``transform_layout``: B is copied into the layout the intrinsic reads, 8 x 4
   tiles of (8 columns, 4 depths) stored as 32 contiguous bytes:
   ``B_packed[n // 8, k // 4, n % 8 * 4 + k % 4] = B[k, n]``;
2. ``split`` / ``reorder``: a register tile of 4 rows x 2 eight-column panels, the depth loop in
   steps of 4 around it, one 8 x 4 dot-product step innermost;
3. ``decompose_reduction``: C is zeroed before the depth loop, so the step has no branch;
4. ``tensorize``: each 8 x 4 step becomes one call of the intrinsic's implementation.

THE INPUT CONTRACT: every value of A must be below 128 (7-bit activations). ``vpmaddubsw``
saturates pair sums to int16, so larger values give wrong (saturated) results; see
``x86_avx2_u7s8s32_dot_8x4``. ``make_args`` draws A from [0, 127], ``main`` checks it with
``check_u7_operand``. (On a CPU with AVX-512 VNNI, ``x86_avx512vnni_u8s8s32_dot_8x4`` takes the
same schedule and the full uint8 range.)

``python examples/int8_matmul_x86.py`` prints and interprets the small scheduled kernel, then
builds M = N = K = 512 for this CPU, checks it against numpy (exactly) and times it.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir
import tir.script as T
from tir.intrin import TensorIntrin
from tir.intrin.x86 import AVX2_U7S8_DOT, check_u7_operand
from tir.target import Target

#: The size of KERNEL, which the test suite interprets; main() also runs BIG natively.
M, N, K = 8, 32, 16
BIG = 512

#: The CPU the intrinsic needs: tests that build every example for another target skip this one.
TARGET = "llvm"


def make_int8_matmul(m: int, n: int, k: int, name: str = "int8_matmul") -> tir.PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``: uint8 x int8 -> int32, widened before the multiply."""

    @T.script
    def int8_matmul(A: T.Buffer((m, k), "uint8"), B: T.Buffer((k, n), "int8"), C: T.Buffer((m, n), "int32")):
        for i, j, r in T.grid(m, n, k):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, r)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    return int8_matmul.replace(name=name)


def schedule_int8_matmul(
    func: tir.PrimFunc, intrin: str = AVX2_U7S8_DOT, rows: int = 4, panels: int = 2, parallel: bool = True
) -> tir.Schedule:
    """Tensorize ``func`` (from :func:`make_int8_matmul`) with an 8-lane x 4-deep dot product.

    The register tile is ``rows`` x ``panels`` eight-column panels (8 accumulators by default);
    M must be a multiple of ``rows``, N of ``8 * panels``, K of 4.
    """
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    # 1. Pack B: a copy in the intrinsic's layout, read by the matmul instead of B.
    packed = sch.cache_read(block, 2, "global")  # reads are (C, A, B): B is index 2
    sch.transform_layout(packed, ("write", 0), lambda k, n: (n // 8, k // 4, n % 8 * 4 + k % 4))
    k_axis, n_axis = sch.get_loops(packed)
    n_tile, n_lane = sch.split(n_axis, [None, 8])
    k_tile, k_lane = sch.split(k_axis, [None, 4])
    sch.reorder(n_tile, k_tile, n_lane, k_lane)  # write the packed copy in order
    # 2. Tile: rows x panels x (8 columns), the depth in steps of 4.
    i, j, k = sch.get_loops(block)
    i_tile, i_row = sch.split(i, [None, rows])
    j_tile, j_panel, j_lane = sch.split(j, [None, panels, 8])
    k_step, k_lane = sch.split(k, [None, 4])
    sch.reorder(i_tile, j_tile, k_step, i_row, j_panel, j_lane, k_lane)
    # 3. Zero C before the depth loop.
    init = sch.decompose_reduction(block, k_step)
    sch.vectorize(sch.get_loops(init)[-1])
    # 4. The 8 x 4 step -> the intrinsic; the register tile unrolled around it.
    sch.tensorize(j_lane, intrin)
    sch.unroll(j_panel)
    sch.unroll(i_row)
    if parallel:
        sch.parallel(i_tile)
    return sch


KERNEL = schedule_int8_matmul(make_int8_matmul(M, N, K, "int8_matmul_x86")).func
ATOL = 0.0  # integer arithmetic: exact


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.integers(0, 128, (M, K), dtype=np.uint8)  # the 7-bit contract of the intrinsic
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, :2], b[:2, 0] = 127, -128  # the largest pair sum in magnitude, 2 * 127 * -128, is there
    return [a, b, np.zeros((M, N), np.int32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.int32) @ b.astype(np.int32)}


def main() -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    if not TensorIntrin.get(AVX2_U7S8_DOT).available(Target.host()):
        print(f"{AVX2_U7S8_DOT}: this CPU cannot run it; skipping the {BIG}^3 run")
        return
    sch = schedule_int8_matmul(make_int8_matmul(BIG, BIG, BIG, "int8_matmul_x86_512"))
    module = tir.build(sch.func, "llvm")
    module.set_num_threads(1)  # the time below is for one core
    rng = np.random.default_rng(0)
    a = rng.integers(0, 128, (BIG, BIG), dtype=np.uint8)
    b = rng.integers(-128, 128, (BIG, BIG), dtype=np.int8)
    c = np.zeros((BIG, BIG), np.int32)
    check_u7_operand(a, "A")
    module(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    seconds = module.time(a, b, c, repeat=10)
    print(
        f"int8 matmul {BIG}^3 (uint8 x int8 -> int32) via {AVX2_U7S8_DOT}: equals numpy exactly; "
        f"{seconds * 1e3:.2f} ms on 1 thread ({2 * BIG**3 / seconds / 1e9:.0f} GOP/s)"
    )


if __name__ == "__main__":
    main()
