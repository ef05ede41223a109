"""Desc / impl pairs shared by the built-in intrinsics of several targets.

Only shapes and instruction names differ between the x86-64 and AArch64 float32 FMA tiles, so
one function writes both; the target modules register what it returns.
"""

from __future__ import annotations

import tir.script as T
from tir.ir import PrimFunc


def fma_f32_tile(name: str, rows: int, cols: int, depth: int, lanes: int, fma: str) -> tuple[PrimFunc, PrimFunc]:
    """``C[0:rows, 0:cols] += A[0:rows, 0:depth] @ B[0:depth, 0:cols]`` in float32.

    The desc is the plain loop nest (i, j, k), k the reduction. The impl, for each k, broadcasts
    ``A[i, k]`` and issues one ``fma`` (the LLVM intrinsic ``fma``, e.g. ``llvm.fma.v8f32``) per
    ``lanes`` columns of row i: ``C[i, j:j+lanes] = fma(A[i, k], B[k, j:j+lanes], C[i, j:j+lanes])``.
    Each element sums over k in the same order as the desc, but every step is rounded once (a
    fused multiply-add) instead of twice: results agree with the desc up to float32 rounding.
    """
    if cols % lanes:
        raise ValueError(f"fma_f32_tile {name}: {cols} columns are not a multiple of {lanes} lanes")
    vector = f"float32x{lanes}"

    @T.script
    def desc(
        A: T.Buffer((rows, depth), "float32"),
        B: T.Buffer((depth, cols), "float32"),
        C: T.Buffer((rows, cols), "float32"),
    ):
        with T.block("root"):
            T.reads(C[0:rows, 0:cols], A[0:rows, 0:depth], B[0:depth, 0:cols])
            T.writes(C[0:rows, 0:cols])
            for i, j, k in T.grid(rows, cols, depth):
                with T.block("update"):
                    vi, vj, vk = T.remap("SSR", i, j, k)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.script
    def impl(
        A: T.Buffer((rows, depth), "float32"),
        B: T.Buffer((depth, cols), "float32"),
        C: T.Buffer((rows, cols), "float32"),
    ):
        with T.block("root"):
            T.reads(C[0:rows, 0:cols], A[0:rows, 0:depth], B[0:depth, 0:cols])
            T.writes(C[0:rows, 0:cols])
            for k in T.unroll(depth):
                for i in T.unroll(rows):
                    for v in T.unroll(cols // lanes):
                        C[i, T.ramp(v * lanes, 1, lanes)] = T.call_llvm_pure_intrin(
                            vector,
                            fma,
                            T.broadcast(A[i, k], lanes),
                            B[k, T.ramp(v * lanes, 1, lanes)],
                            C[i, T.ramp(v * lanes, 1, lanes)],
                        )

    return desc.replace(name=f"{name}_desc"), impl.replace(name=f"{name}_impl")
