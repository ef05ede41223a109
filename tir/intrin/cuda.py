"""Built-in NVIDIA tensor intrinsics (isa ``"cuda"``), registered on import.

WMMA m16n16k16 (``nvcuda::wmma``, sm_70+), one warp per call, on 16 x 16 tiles:

``wmma_load_16x16x16_f16_a`` / ``wmma_load_16x16x16_f16_b``
    copy a 16 x 16 float16 tile from shared memory into a ``wmma.matrix_a`` / ``wmma.matrix_b``
    fragment (row-major; the leading dimension is the source buffer's row stride).
``wmma_fill_16x16x16_f32`` / ``wmma_fill_16x16x16_f16``
    set a ``wmma.accumulator`` tile to zero.
``wmma_sync_16x16x16_f16f16f32`` / ``wmma_sync_16x16x16_f16f16f16``
    ``C[0:16, 0:16] += A[0:16, 0:16] @ B[0:16, 0:16]`` (float16 inputs; float32 / float16
    accumulator; the products are exact in float32, the sums rounded by the hardware).
``wmma_store_16x16x16_f32_shared`` / ``..._global`` (and ``_f16_``)
    copy an accumulator tile to a shared or global buffer (row-major).

``mma.sync`` m16n8k16 (inline PTX, sm_80+), one warp per call:

``mma_ldmatrix_16x16_f16_a``
    ``ldmatrix.sync.aligned.m8n8.x4.shared.b16``: a 16 x 16 float16 tile of A (row-major, in
    shared memory) into an ``m16n8k16.matrixA`` fragment.
``mma_ldmatrix_16x8_f16_b``
    ``ldmatrix...x2.trans``: a 16 (k) x 8 (n) tile of B (row-major ``[k, n]``) into an
    ``m16n8k16.matrixB`` fragment.
``mma_fill_16x8_f32``, ``mma_sync_16x8x16_f16f16f32``, ``mma_store_16x8_f32_global`` /
``_shared``: zero, ``C[0:16, 0:8] += A[0:16, 0:16] @ B[0:16, 0:8]``, and the store.

Every desc is the plain computation over the tile; every impl is one tile-op call
(``tir.ir.ops``: ``T.wmma_*`` / ``T.ptx_*``) whose buffer loads name the tiles' first elements.
The source and destination parameters have a symbolic row stride (``s0``), bound by tensorize
to the actual buffer's; the impl passes it as the leading dimension.
"""

from __future__ import annotations

import tir.script as T
from tir.analysis.verify import register_warp_level_op
from tir.intrin import TensorIntrin
from tir.ir import PrimFunc

__all__ = [
    "MMA_FILL_F32",
    "MMA_LDMATRIX_A",
    "MMA_LDMATRIX_B",
    "MMA_STORE_F32_GLOBAL",
    "MMA_STORE_F32_SHARED",
    "MMA_SYNC_F16F16F32",
    "WMMA_FILL_F16",
    "WMMA_FILL_F32",
    "WMMA_LOAD_A",
    "WMMA_LOAD_B",
    "WMMA_STORE_F16_GLOBAL",
    "WMMA_STORE_F16_SHARED",
    "WMMA_STORE_F32_GLOBAL",
    "WMMA_STORE_F32_SHARED",
    "WMMA_SYNC_F16F16F16",
    "WMMA_SYNC_F16F16F32",
]

WMMA_LOAD_A = "wmma_load_16x16x16_f16_a"
WMMA_LOAD_B = "wmma_load_16x16x16_f16_b"
WMMA_FILL_F32 = "wmma_fill_16x16x16_f32"
WMMA_FILL_F16 = "wmma_fill_16x16x16_f16"
WMMA_SYNC_F16F16F32 = "wmma_sync_16x16x16_f16f16f32"
WMMA_SYNC_F16F16F16 = "wmma_sync_16x16x16_f16f16f16"
WMMA_STORE_F32_SHARED = "wmma_store_16x16x16_f32_shared"
WMMA_STORE_F32_GLOBAL = "wmma_store_16x16x16_f32_global"
WMMA_STORE_F16_SHARED = "wmma_store_16x16x16_f16_shared"
WMMA_STORE_F16_GLOBAL = "wmma_store_16x16x16_f16_global"
MMA_LDMATRIX_A = "mma_ldmatrix_16x16_f16_a"
MMA_LDMATRIX_B = "mma_ldmatrix_16x8_f16_b"
MMA_FILL_F32 = "mma_fill_16x8_f32"
MMA_SYNC_F16F16F32 = "mma_sync_16x8x16_f16f16f32"
MMA_STORE_F32_GLOBAL = "mma_store_16x8_f32_global"
MMA_STORE_F32_SHARED = "mma_store_16x8_f32_shared"

# The tile ops run collectively on one warp: the validator checks where they sit.
register_warp_level_op("wmma_", prefix=True, builtin=True)
register_warp_level_op("ptx_", prefix=True, builtin=True)


def _copy(
    rows: int, cols: int, dtype: str, src_scope: str, dst_scope: str, op: str, extra: tuple
) -> tuple[PrimFunc, PrimFunc]:
    """desc: a copy block ``D = S`` over a rows x cols tile; impl: one tile-op call."""

    @T.script
    def desc(S: T.Buffer((rows, cols), dtype, scope=src_scope), D: T.Buffer((rows, cols), dtype, scope=dst_scope)):
        with T.block("root"):
            T.reads(S[0:rows, 0:cols])
            T.writes(D[0:rows, 0:cols])
            for i, j in T.grid(rows, cols):
                with T.block("copy"):
                    vi, vj = T.remap("SS", i, j)
                    D[vi, vj] = S[vi, vj]

    return desc, _copy_impl(rows, cols, dtype, src_scope, dst_scope, op, extra)


def _copy_impl(rows: int, cols: int, dtype: str, src_scope: str, dst_scope: str, op: str, extra: tuple) -> PrimFunc:
    fragment_is_dst = src_scope in ("shared", "global")
    if fragment_is_dst and op == "wmma_load_matrix_sync":

        @T.script
        def load(s: T.handle, d: T.handle):
            s0 = T.int32()
            S = T.match_buffer(s, (rows, cols), dtype, scope=src_scope, strides=(s0, 1))
            D = T.match_buffer(d, (rows, cols), dtype, scope=dst_scope)
            with T.block("root"):
                T.reads(S[0:rows, 0:cols])
                T.writes(D[0:rows, 0:cols])
                T.evaluate(T.wmma_load_matrix_sync("handle", D[0, 0], S[0, 0], s0))

        return load
    if fragment_is_dst:
        trans = extra[0]

        @T.script
        def ldmatrix(s: T.handle, d: T.handle):
            s0 = T.int32()
            S = T.match_buffer(s, (rows, cols), dtype, scope=src_scope, strides=(s0, 1))
            D = T.match_buffer(d, (rows, cols), dtype, scope=dst_scope)
            with T.block("root"):
                T.reads(S[0:rows, 0:cols])
                T.writes(D[0:rows, 0:cols])
                T.evaluate(T.ptx_ldmatrix("handle", D[0, 0], S[0, 0], s0, trans))

        return ldmatrix
    if op == "wmma_store_matrix_sync":

        @T.script
        def store(s: T.handle, d: T.handle):
            s0 = T.int32()
            S = T.match_buffer(s, (rows, cols), dtype, scope=src_scope)
            D = T.match_buffer(d, (rows, cols), dtype, scope=dst_scope, strides=(s0, 1))
            with T.block("root"):
                T.reads(S[0:rows, 0:cols])
                T.writes(D[0:rows, 0:cols])
                T.evaluate(T.wmma_store_matrix_sync("handle", D[0, 0], S[0, 0], s0))

        return store

    @T.script
    def mma_store(s: T.handle, d: T.handle):
        s0 = T.int32()
        S = T.match_buffer(s, (rows, cols), dtype, scope=src_scope)
        D = T.match_buffer(d, (rows, cols), dtype, scope=dst_scope, strides=(s0, 1))
        with T.block("root"):
            T.reads(S[0:rows, 0:cols])
            T.writes(D[0:rows, 0:cols])
            T.evaluate(T.ptx_mma_store("handle", D[0, 0], S[0, 0], s0))

    return mma_store


def _fill(rows: int, cols: int, dtype: str, scope: str, op: str) -> tuple[PrimFunc, PrimFunc]:
    @T.script
    def desc(C: T.Buffer((rows, cols), dtype, scope=scope)):
        with T.block("root"):
            T.reads()
            T.writes(C[0:rows, 0:cols])
            for i, j in T.grid(rows, cols):
                with T.block("init"):
                    vi, vj = T.remap("SS", i, j)
                    C[vi, vj] = T.cast(0, dtype)

    if op == "wmma_fill_fragment":

        @T.script
        def impl(C: T.Buffer((rows, cols), dtype, scope=scope)):
            with T.block("root"):
                T.reads()
                T.writes(C[0:rows, 0:cols])
                T.evaluate(T.wmma_fill_fragment("handle", C[0, 0], T.cast(0, dtype)))

        return desc, impl

    @T.script
    def mma_impl(C: T.Buffer((rows, cols), dtype, scope=scope)):
        with T.block("root"):
            T.reads()
            T.writes(C[0:rows, 0:cols])
            T.evaluate(T.ptx_mma_fill("handle", C[0, 0], T.cast(0, dtype)))

    return desc, mma_impl


def _sync(n: int, acc: str, scopes: tuple[str, str, str], op: str) -> tuple[PrimFunc, PrimFunc]:
    sa, sb, sc = scopes

    @T.script
    def desc(
        A: T.Buffer((16, 16), "float16", scope=sa),
        B: T.Buffer((16, n), "float16", scope=sb),
        C: T.Buffer((16, n), acc, scope=sc),
    ):
        with T.block("root"):
            T.reads(C[0:16, 0:n], A[0:16, 0:16], B[0:16, 0:n])
            T.writes(C[0:16, 0:n])
            for i, j, k in T.grid(16, n, 16):
                with T.block("update"):
                    vi, vj, vk = T.remap("SSR", i, j, k)
                    C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], acc) * T.cast(B[vk, vj], acc)

    if op == "wmma_mma_sync":

        @T.script
        def impl(
            A: T.Buffer((16, 16), "float16", scope=sa),
            B: T.Buffer((16, n), "float16", scope=sb),
            C: T.Buffer((16, n), acc, scope=sc),
        ):
            with T.block("root"):
                T.reads(C[0:16, 0:n], A[0:16, 0:16], B[0:16, 0:n])
                T.writes(C[0:16, 0:n])
                T.evaluate(T.wmma_mma_sync("handle", C[0, 0], A[0, 0], B[0, 0], C[0, 0]))

        return desc, impl

    @T.script
    def mma_impl(
        A: T.Buffer((16, 16), "float16", scope=sa),
        B: T.Buffer((16, n), "float16", scope=sb),
        C: T.Buffer((16, n), acc, scope=sc),
    ):
        with T.block("root"):
            T.reads(C[0:16, 0:n], A[0:16, 0:16], B[0:16, 0:n])
            T.writes(C[0:16, 0:n])
            T.evaluate(T.ptx_mma_sync("handle", C[0, 0], A[0, 0], B[0, 0], C[0, 0]))

    return desc, mma_impl


def _register(name: str, pair: tuple[PrimFunc, PrimFunc], doc: str, min_cc: int = 70) -> None:
    TensorIntrin.register(
        name,
        pair[0],
        pair[1],
        isa="cuda",
        doc=doc,
        override=True,
        extra_check=lambda t: t.compute_capability >= min_cc,
        builtin=True,
    )


_register(
    WMMA_LOAD_A, _copy(16, 16, "float16", "shared", "wmma.matrix_a", "wmma_load_matrix_sync", ()), "A tile -> fragment"
)
_register(
    WMMA_LOAD_B, _copy(16, 16, "float16", "shared", "wmma.matrix_b", "wmma_load_matrix_sync", ()), "B tile -> fragment"
)
_register(
    WMMA_FILL_F32, _fill(16, 16, "float32", "wmma.accumulator", "wmma_fill_fragment"), "zero a float32 accumulator"
)
_register(
    WMMA_FILL_F16, _fill(16, 16, "float16", "wmma.accumulator", "wmma_fill_fragment"), "zero a float16 accumulator"
)
_WMMA_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
_register(WMMA_SYNC_F16F16F32, _sync(16, "float32", _WMMA_SCOPES, "wmma_mma_sync"), "C += A @ B, float32 accumulate")
_register(WMMA_SYNC_F16F16F16, _sync(16, "float16", _WMMA_SCOPES, "wmma_mma_sync"), "C += A @ B, float16 accumulate")
for _name, _dtype, _scope in (
    (WMMA_STORE_F32_SHARED, "float32", "shared"),
    (WMMA_STORE_F32_GLOBAL, "float32", "global"),
    (WMMA_STORE_F16_SHARED, "float16", "shared"),
    (WMMA_STORE_F16_GLOBAL, "float16", "global"),
):
    _register(_name, _copy(16, 16, _dtype, "wmma.accumulator", _scope, "wmma_store_matrix_sync", ()), "store a tile")

_register(
    MMA_LDMATRIX_A, _copy(16, 16, "float16", "shared", "m16n8k16.matrixA", "ptx_ldmatrix", (0,)), "ldmatrix x4", 80
)
_register(
    MMA_LDMATRIX_B, _copy(16, 8, "float16", "shared", "m16n8k16.matrixB", "ptx_ldmatrix", (1,)), "ldmatrix x2.trans", 80
)
_register(MMA_FILL_F32, _fill(16, 8, "float32", "m16n8k16.matrixC", "ptx_mma_fill"), "zero a 16x8 accumulator", 80)
_MMA_SCOPES = ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.matrixC")
_register(MMA_SYNC_F16F16F32, _sync(8, "float32", _MMA_SCOPES, "ptx_mma_sync"), "mma.sync m16n8k16", 80)
for _name, _scope in ((MMA_STORE_F32_GLOBAL, "global"), (MMA_STORE_F32_SHARED, "shared")):
    _register(_name, _copy(16, 8, "float32", "m16n8k16.matrixC", _scope, "ptx_mma_store", ()), "store 16x8", 80)
