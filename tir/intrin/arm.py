"""Built-in AArch64 tensor intrinsics (isa ``"aarch64"``), registered on import.

``aarch64_neon_fma_f32_4x16x4``
    ``C[0:4, 0:16] += A[0:4, 0:4] @ B[0:4, 0:16]`` in float32: per k, four broadcasts of A,
    four 4-wide loads of B and sixteen ``llvm.fma.v4f32`` (``fmla``). Needs ``neon``. Each step
    is rounded once (fused), so results match the desc up to float32 rounding.

``aarch64_neon_s8s8s32_sdot_4x4``
    ``C[0, i] += sum_{k<4} A[0, k] * B[0, 0, 4*i + k]`` for i < 4: int8 ``A`` (four values of a
    row, shared by all four lanes) times int8 ``B`` (a 4 x 4 tile of a packed 3-D buffer, stored
    row by row: 16 contiguous bytes), accumulated in int32, with one ``sdot`` (``llvm.aarch64.neon.sdot.v4i32.v16i8``: per int32
    lane, the sum of four int8 x int8 products; exact, int32 wraps like the desc). Needs
    ``neon`` and ``dotprod``. B must be packed like the x86 dot products' B, in 4 x 4 tiles:
    ``B_packed[n // 4, k // 4, (n % 4) * 4 + k % 4] = B[k, n]`` (examples/int8_matmul_sdot.py).
    The parameter ranks (shapes (1, 4), (1, 1, 16), (1, 4)) are those of a 2-D matmul's A and C
    and of that packed B, because ``tensorize`` matches a buffer of the same rank only.
"""

from __future__ import annotations

import tir.script as T
from tir.intrin import TensorIntrin
from tir.intrin._templates import fma_f32_tile

__all__ = ["NEON_FMA_F32", "NEON_SDOT"]

NEON_FMA_F32 = "aarch64_neon_fma_f32_4x16x4"
NEON_SDOT = "aarch64_neon_s8s8s32_sdot_4x4"

_fma_desc, _fma_impl = fma_f32_tile(NEON_FMA_F32, rows=4, cols=16, depth=4, lanes=4, fma="llvm.fma.v4f32")


@T.script
def _sdot_desc(A: T.Buffer((1, 4), "int8"), B: T.Buffer((1, 1, 16), "int8"), C: T.Buffer((1, 4), "int32")):
    with T.block("root"):
        T.reads(C[0, 0:4], A[0, 0:4], B[0, 0, 0:16])
        T.writes(C[0, 0:4])
        for i, k in T.grid(4, 4):
            with T.block("update"):
                vi, vk = T.remap("SR", i, k)
                C[0, vi] = C[0, vi] + T.cast(A[0, vk], "int32") * T.cast(B[0, 0, vi * 4 + vk], "int32")


@T.script
def _sdot_impl(A: T.Buffer((1, 4), "int8"), B: T.Buffer((1, 1, 16), "int8"), C: T.Buffer((1, 4), "int32")):
    with T.block("root"):
        T.reads(C[0, 0:4], A[0, 0:4], B[0, 0, 0:16])
        T.writes(C[0, 0:4])
        # A[0:4] repeated four times: LLVM loads it as one 32-bit lane and duplicates it.
        C[0, T.ramp(0, 1, 4)] = T.call_llvm_pure_intrin(
            "int32x4",
            "llvm.aarch64.neon.sdot.v4i32.v16i8",
            C[0, T.ramp(0, 1, 4)],
            A[0, T.ramp(0, 1, 16) % 4],
            B[0, 0, T.ramp(0, 1, 16)],
        )


TensorIntrin.register(
    NEON_FMA_F32,
    _fma_desc,
    _fma_impl,
    isa="aarch64",
    required_features=("neon",),
    doc="float32 C[4, 16] += A[4, 4] @ B[4, 16] with broadcast + fused multiply-add (NEON fmla)",
    builtin=True,
)
TensorIntrin.register(
    NEON_SDOT,
    _sdot_desc,
    _sdot_impl,
    isa="aarch64",
    required_features=("neon", "dotprod"),
    doc="int32 C[4] += int8 A[4] . int8 B[4, 4] (sdot); exact",
    builtin=True,
)
