"""Built-in x86-64 tensor intrinsics (isa ``"x86_64"``), registered on import.

``x86_avx2_fma_f32_4x16x4``
    ``C[0:4, 0:16] += A[0:4, 0:4] @ B[0:4, 0:16]`` in float32: per k, four broadcasts of A,
    two 8-wide loads of B and eight ``llvm.fma.v8f32``. Needs ``avx2`` and ``fma``. Each step
    is rounded once (fused), so results match the desc up to float32 rounding.

``x86_avx2_u7s8s32_dot_8x4``
    ``C[0, i] += sum_{k<4} A[0, k] * B[0, 0, 4*i + k]`` for i < 8: uint8 ``A`` (four values of a
    row, shared by all eight lanes) times int8 ``B`` (an 8 x 4 tile of a packed 3-D buffer, stored
    row by row: 32 contiguous bytes), accumulated in int32 (``C``: eight values of a row).
    Implementation: ``vpmaddubsw`` (``llvm.x86.avx2.pmadd.ub.sw``, u8 x s8 products summed in
    pairs into int16) then ``vpmaddwd`` with ones (``llvm.x86.avx2.pmadd.wd``, int16 pairs
    summed into int32), added to C. Needs ``avx2``.

    THE CONTRACT (the ``u7`` in the name): every value of ``A`` must be below 128. ``vpmaddubsw``
    SATURATES each pair sum ``A[2m]*B[2m] + A[2m+1]*B[2m+1]`` to int16: with uint8 values up to
    255 the sum reaches 2 * 255 * 128 = 65280 > 32767 and is clamped, so the result is wrong.
    With ``A < 128`` the pair sum is at most 2 * 127 * 128 = 32512 in magnitude: exact. A desc
    cannot state a value range, so tensorize matches any uint8 x int8 dot; the registration
    states it instead (``operand_ranges={"A": (0, 127)}``), and the tuner picks this intrinsic
    only for a program that declares its operand fits (``T.func_attr({"value_ranges": {"A":
    (0, 127)}})``; ``tir.intrin.ranges.check_operand_ranges``). By hand, the caller keeps the
    contract (quantize activations to [0, 127], as int8 inference libraries do for this
    instruction) and can check data with :func:`check_u7_operand`. A violating input gives the
    saturated result :func:`u7s8_dot_reference` computes (the interpreter computes it too).

``x86_avx2_s8s8s32_dot_8x4`` and ``x86_avx2_u8s8s32_dot_8x4``
    The same desc (int8 ``A`` for the first, uint8 for the second), EXACT for every input, on
    AVX2 alone: the 32 bytes of B are sign-extended to int16 in two halves (``vpmovsxbw``), A's
    four values widened the same way (sign- or zero-extended), and each half goes through
    ``vpmaddwd`` (``llvm.x86.avx2.pmadd.wd``): int16 x int16 products, summed in pairs into
    int32 with no saturation (a pair sum is at most 2 * 128 * 128 = 32768 in magnitude, and
    2 * 255 * 128 for uint8 A). Each lane of C needs two pair sums: ``vphaddd``
    (``llvm.x86.avx2.phadd.d``) adds them, leaving the lanes in the order 0 1 4 5 2 3 6 7 (it
    works within 128-bit halves), which ``vpermd`` (``llvm.x86.avx2.permd``) puts back before
    the add into C. About twice the instructions of the u7 form per step: use these for
    full-range data (quantized models with int8 activations, or uint8 beyond 127). Need
    ``avx2``.

``x86_avx512vnni_u8s8s32_dot_8x4``
    The same desc, the full uint8 range: one ``vpdpbusd`` (``llvm.x86.avx512.vpdpbusd.256``,
    four u8 x s8 products summed into each int32 lane without intermediate saturation). Needs
    ``avx512vnni`` + ``avx512vl`` (e.g. ``-mcpu=icelake-server``); the codegen's feature check
    refuses it, with a ``CodegenError``, for a target without them (AVX-VNNI-only CPUs have the
    instruction too, but a registration has one feature list: they are not listed).

The int8 intrinsics read the 8 x 4 tile of B as one 32-byte vector, so B must be packed: the
matmul examples store ``B_packed[n // 8, k // 4, (n % 8) * 4 + k % 4] = B[k, n]``. The
parameters have the ranks of a 2-D matmul's A and C and of that 3-D packed B (shapes (1, 4),
(1, 1, 32), (1, 8)) because ``tensorize`` matches a buffer of the same rank only.
"""

from __future__ import annotations

import numpy as np

import tir.script as T
from tir.intrin import IntrinError, TensorIntrin
from tir.intrin._templates import fma_f32_tile
from tir.ir import PrimFunc

__all__ = [
    "AVX2_FMA_F32",
    "AVX2_S8S8_DOT",
    "AVX2_U7S8_DOT",
    "AVX2_U8S8_DOT",
    "VNNI_U8S8_DOT",
    "check_u7_operand",
    "u7s8_dot_reference",
]

AVX2_FMA_F32 = "x86_avx2_fma_f32_4x16x4"
AVX2_U7S8_DOT = "x86_avx2_u7s8s32_dot_8x4"
VNNI_U8S8_DOT = "x86_avx512vnni_u8s8s32_dot_8x4"
AVX2_S8S8_DOT = "x86_avx2_s8s8s32_dot_8x4"
AVX2_U8S8_DOT = "x86_avx2_u8s8s32_dot_8x4"

#: The largest uint8 value the AVX2 dot product is exact for (2 * 127 * 128 <= 32767).
U7_MAX = 127


# ---------------------------------------------------------------- float32 FMA tile

_fma_desc, _fma_impl = fma_f32_tile(AVX2_FMA_F32, rows=4, cols=16, depth=4, lanes=8, fma="llvm.fma.v8f32")


# ---------------------------------------------------------------- uint8 x int8 -> int32 dot products


@T.script
def _dot_u8s8_desc(A: T.Buffer((1, 4), "uint8"), B: T.Buffer((1, 1, 32), "int8"), C: T.Buffer((1, 8), "int32")):
    with T.block("root"):
        T.reads(C[0, 0:8], A[0, 0:4], B[0, 0, 0:32])
        T.writes(C[0, 0:8])
        for i, k in T.grid(8, 4):
            with T.block("update"):
                vi, vk = T.remap("SR", i, k)
                C[0, vi] = C[0, vi] + T.cast(A[0, vk], "int32") * T.cast(B[0, 0, vi * 4 + vk], "int32")


@T.script
def _dot_u7s8_avx2_impl(A: T.Buffer((1, 4), "uint8"), B: T.Buffer((1, 1, 32), "int8"), C: T.Buffer((1, 8), "int32")):
    with T.block("root"):
        T.reads(C[0, 0:8], A[0, 0:4], B[0, 0, 0:32])
        T.writes(C[0, 0:8])
        # A[0:4] repeated eight times (LLVM makes it one 32-bit broadcast); u8 x s8 pairs -> int16
        # (saturating), then int16 pairs x 1 -> int32: four products per int32 lane.
        C[0, T.ramp(0, 1, 8)] = C[0, T.ramp(0, 1, 8)] + T.call_llvm_pure_intrin(
            "int32x8",
            "llvm.x86.avx2.pmadd.wd",
            T.call_llvm_pure_intrin(
                "int16x16", "llvm.x86.avx2.pmadd.ub.sw", A[0, T.ramp(0, 1, 32) % 4], B[0, 0, T.ramp(0, 1, 32)]
            ),
            T.broadcast(T.int16(1), 16),
        )


@T.script
def _dot_u8s8_vnni_impl(A: T.Buffer((1, 4), "uint8"), B: T.Buffer((1, 1, 32), "int8"), C: T.Buffer((1, 8), "int32")):
    with T.block("root"):
        T.reads(C[0, 0:8], A[0, 0:4], B[0, 0, 0:32])
        T.writes(C[0, 0:8])
        C[0, T.ramp(0, 1, 8)] = T.call_llvm_pure_intrin(
            "int32x8",
            "llvm.x86.avx512.vpdpbusd.256",
            C[0, T.ramp(0, 1, 8)],
            A[0, T.ramp(0, 1, 32) % 4],
            B[0, 0, T.ramp(0, 1, 32)],
        )


def _widening_dot_desc_impl(name: str, a_dtype: str) -> tuple[PrimFunc, PrimFunc]:
    """The exact 8 x 4 dot product of ``a_dtype`` A and int8 B into int32 C (the u8s8 desc's
    shapes): widen to int16, ``vpmaddwd`` per half of B, ``vphaddd`` + ``vpermd`` to finish."""

    @T.script
    def desc(A: T.Buffer((1, 4), a_dtype), B: T.Buffer((1, 1, 32), "int8"), C: T.Buffer((1, 8), "int32")):
        with T.block("root"):
            T.reads(C[0, 0:8], A[0, 0:4], B[0, 0, 0:32])
            T.writes(C[0, 0:8])
            for i, k in T.grid(8, 4):
                with T.block("update"):
                    vi, vk = T.remap("SR", i, k)
                    C[0, vi] = C[0, vi] + T.cast(A[0, vk], "int32") * T.cast(B[0, 0, vi * 4 + vk], "int32")

    @T.script
    def impl(A: T.Buffer((1, 4), a_dtype), B: T.Buffer((1, 1, 32), "int8"), C: T.Buffer((1, 8), "int32")):
        with T.block("root"):
            T.reads(C[0, 0:8], A[0, 0:4], B[0, 0, 0:32])
            T.writes(C[0, 0:8])
            # Lanes 0-3 of C from the first 16 bytes of B, lanes 4-7 from the last 16: per half,
            # int32 lane j holds the pair sum of C lane j // 2 (products k = 0, 1 or k = 2, 3).
            # vphaddd adds the pairs within 128-bit halves: lanes come out as 0 1 4 5 2 3 6 7,
            # and vpermd with those positions puts them back in order.
            C[0, T.ramp(0, 1, 8)] = C[0, T.ramp(0, 1, 8)] + T.call_llvm_pure_intrin(
                "int32x8",
                "llvm.x86.avx2.permd",
                T.call_llvm_pure_intrin(
                    "int32x8",
                    "llvm.x86.avx2.phadd.d",
                    T.call_llvm_pure_intrin(
                        "int32x8",
                        "llvm.x86.avx2.pmadd.wd",
                        T.cast(B[0, 0, T.ramp(0, 1, 16)], "int16x16"),
                        T.cast(A[0, T.ramp(0, 1, 16) % 4], "int16x16"),
                    ),
                    T.call_llvm_pure_intrin(
                        "int32x8",
                        "llvm.x86.avx2.pmadd.wd",
                        T.cast(B[0, 0, T.ramp(16, 1, 16)], "int16x16"),
                        T.cast(A[0, T.ramp(0, 1, 16) % 4], "int16x16"),
                    ),
                ),
                T.ramp(0, 1, 8) % 2 + T.ramp(0, 1, 8) // 4 * 2 + T.ramp(0, 1, 8) // 2 % 2 * 4,
            )

    return desc.replace(name=f"{name}_desc"), impl.replace(name=f"{name}_impl")


_s8s8_desc, _s8s8_impl = _widening_dot_desc_impl(AVX2_S8S8_DOT, "int8")
_u8s8_desc, _u8s8_impl = _widening_dot_desc_impl(AVX2_U8S8_DOT, "uint8")


def check_u7_operand(values: np.ndarray, name: str = "A") -> None:
    """Raise ``IntrinError`` unless every value of ``values`` (the uint8 operand of
    ``x86_avx2_u7s8s32_dot_8x4``) is below 128, the range in which the intrinsic is exact."""
    array = np.asarray(values)
    if array.dtype != np.uint8:
        raise IntrinError(f"{AVX2_U7S8_DOT}: operand {name} must be uint8, got {array.dtype}")
    if array.size and int(array.max()) > U7_MAX:
        position = tuple(int(i) for i in np.unravel_index(int(array.argmax()), array.shape))
        raise IntrinError(
            f"{AVX2_U7S8_DOT}: operand {name} holds {int(array.max())} at {position}; the intrinsic is "
            f"exact only for values <= {U7_MAX} (vpmaddubsw saturates pair sums to int16)"
        )


def u7s8_dot_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """What ``x86_avx2_u7s8s32_dot_8x4`` computes for ANY uint8 ``a`` (4 values), int8 ``b``
    (32), int32 ``c`` (8), in the parameters' shapes or flat: ``c`` plus, per lane, the two
    int16-SATURATED pair sums. Returned in ``c``'s shape."""
    products = a.astype(np.int64).reshape(4)[np.arange(32) % 4] * b.astype(np.int64).reshape(32)
    pairs = np.clip(products.reshape(16, 2).sum(axis=1), -32768, 32767)
    return (c.astype(np.int64).reshape(8) + pairs.reshape(8, 2).sum(axis=1)).astype(np.int32).reshape(c.shape)


# ---------------------------------------------------------------- registration

TensorIntrin.register(
    AVX2_FMA_F32,
    _fma_desc,
    _fma_impl,
    isa="x86_64",
    required_features=("avx2", "fma"),
    doc="float32 C[4, 16] += A[4, 4] @ B[4, 16] with broadcast + fused multiply-add (AVX2/FMA)",
    builtin=True,
)
TensorIntrin.register(
    AVX2_U7S8_DOT,
    _dot_u8s8_desc,
    _dot_u7s8_avx2_impl,
    isa="x86_64",
    required_features=("avx2",),
    doc="int32 C[8] += uint8 A[4] . int8 B[8, 4] (vpmaddubsw + vpmaddwd); exact only for A < 128",
    operand_ranges={"A": (0, U7_MAX)},
    builtin=True,
)
TensorIntrin.register(
    VNNI_U8S8_DOT,
    _dot_u8s8_desc.replace(name="_dot_u8s8_desc_vnni"),
    _dot_u8s8_vnni_impl,
    isa="x86_64",
    required_features=("avx512vnni", "avx512vl"),
    doc="int32 C[8] += uint8 A[4] . int8 B[8, 4] (vpdpbusd, 256-bit); exact for all inputs",
    builtin=True,
)
TensorIntrin.register(
    AVX2_S8S8_DOT,
    _s8s8_desc,
    _s8s8_impl,
    isa="x86_64",
    required_features=("avx2",),
    doc="int32 C[8] += int8 A[4] . int8 B[8, 4] (int16 widening + vpmaddwd + vphaddd); exact for all inputs",
    builtin=True,
)
TensorIntrin.register(
    AVX2_U8S8_DOT,
    _u8s8_desc,
    _u8s8_impl,
    isa="x86_64",
    required_features=("avx2",),
    doc="int32 C[8] += uint8 A[4] . int8 B[8, 4] (int16 widening + vpmaddwd + vphaddd); exact for all inputs",
    builtin=True,
)
