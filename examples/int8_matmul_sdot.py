"""Quantized matmul for AArch64, tensorized with the NEON ``sdot`` intrinsic, run under qemu.

``C = A @ B`` with ``A`` and ``B`` int8 and ``C`` int32. The schedule makes the textbook triple
loop use ``aarch64_neon_s8s8s32_sdot_4x4`` (tir/intrin/arm.py): one ``sdot`` adds four int8 x
int8 products into each of four int32 lanes, exactly (no saturation, unlike x86's
``vpmaddubsw``, so the whole int8 range is fine):

1. ``cache_read`` + ``transform_layout``: B is copied into 4 x 4 tiles of (4 columns, 4
   depths), 16 contiguous bytes each: ``B_packed[n // 4, k // 4, n % 4 * 4 + k % 4] = B[k, n]``;
2. ``split`` / ``reorder``: a register tile of 4 rows x 4 four-column panels (16 accumulators
   of NEON's 32 vector registers), the depth in steps of 4 around it;
3. ``decompose_reduction``: C is zeroed before the depth loop;
4. ``tensorize``: each 4 x 4 step becomes one ``sdot``.

``python examples/int8_matmul_sdot.py`` prints and interprets the small scheduled kernel, then
builds M = N = K = 512 for ``llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod``, shows
that the assembly uses ``sdot``, runs it under qemu-aarch64 (when installed) and checks it
against numpy exactly. Emulated time says nothing about an AArch64 CPU, so none is printed.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir
import tir.script as T
from tir.intrin.arm import NEON_SDOT
from tir.runtime.aarch64 import toolchain_missing_reason

TARGET = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"

#: The size of KERNEL, which the test suite interprets; main() also runs BIG under qemu.
M, N, K = 8, 32, 16
BIG = 512


def make_int8_matmul(m: int, n: int, k: int, name: str = "int8_matmul") -> tir.PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``: int8 x int8 -> int32, widened before the multiply."""

    @T.script
    def int8_matmul(A: T.Buffer((m, k), "int8"), B: T.Buffer((k, n), "int8"), C: T.Buffer((m, n), "int32")):
        for i, j, r in T.grid(m, n, k):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, r)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    return int8_matmul.replace(name=name)


def schedule_int8_matmul(func: tir.PrimFunc, rows: int = 4, panels: int = 4) -> tir.Schedule:
    """Tensorize ``func`` (from :func:`make_int8_matmul`) with ``sdot``: a register tile of
    ``rows`` x ``panels`` four-column panels; M must be a multiple of ``rows``, N of
    ``4 * panels``, K of 4."""
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    packed = sch.cache_read(block, 2, "global")  # reads are (C, A, B): B is index 2
    sch.transform_layout(packed, ("write", 0), lambda k, n: (n // 4, k // 4, n % 4 * 4 + k % 4))
    k_axis, n_axis = sch.get_loops(packed)
    n_tile, n_lane = sch.split(n_axis, [None, 4])
    k_tile, k_lane = sch.split(k_axis, [None, 4])
    sch.reorder(n_tile, k_tile, n_lane, k_lane)
    i, j, k = sch.get_loops(block)
    i_tile, i_row = sch.split(i, [None, rows])
    j_tile, j_panel, j_lane = sch.split(j, [None, panels, 4])
    k_step, k_lane = sch.split(k, [None, 4])
    sch.reorder(i_tile, j_tile, k_step, i_row, j_panel, j_lane, k_lane)
    init = sch.decompose_reduction(block, k_step)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(j_lane, NEON_SDOT)
    sch.unroll(j_panel)
    sch.unroll(i_row)
    return sch


KERNEL = schedule_int8_matmul(make_int8_matmul(M, N, K, "int8_matmul_sdot")).func
ATOL = 0.0  # integer arithmetic: exact


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    a[0, :4], b[:4, 0] = -128, -128  # the largest products, 4 * 16384 in one sdot lane
    return [a, b, np.zeros((M, N), np.int32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.int32) @ b.astype(np.int32)}


def main() -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    sch = schedule_int8_matmul(make_int8_matmul(BIG, BIG, BIG, "int8_matmul_sdot_512"))
    module = tir.build(sch.func, TARGET)
    sdots = sum(1 for line in module.get_source("asm").splitlines() if line.split()[:1] == ["sdot"])
    print(f"int8 matmul {BIG}^3 for {TARGET!r}: {sdots} sdot instructions in the assembly")
    missing = toolchain_missing_reason()
    if missing is not None:
        print(f"not run: {missing}")
        return
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (BIG, BIG), dtype=np.int8)
    b = rng.integers(-128, 128, (BIG, BIG), dtype=np.int8)
    c = np.zeros((BIG, BIG), np.int32)
    module(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    print(f"int8 matmul {BIG}^3 via {NEON_SDOT}, run under qemu-aarch64: equals numpy exactly")


if __name__ == "__main__":
    main()
