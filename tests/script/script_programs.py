"""Script programs covering the dialect, shared by the parser, printer and round-trip tests."""

from __future__ import annotations

import tir.script as T
from tir.script import block, grid, init, reduce_axis, script, spatial_axis

SIZE = 16  # a module constant read by the kernels


@T.script
def matmul_relu(
    A: T.Buffer((128, 128), "float32"),
    B: T.Buffer((128, 128), "float32"),
    D: T.Buffer((128, 128), "float32"),
):
    C = T.alloc_buffer((128, 128), "float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("D"):
            vi = T.spatial_axis(128, i)
            vj = T.spatial_axis(128, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)


@script
def bare_names(A: T.Buffer((SIZE, SIZE), "float32"), C: T.Buffer((SIZE,), "float32")):
    for i, k in grid(SIZE, SIZE):
        with block("C"):
            vi = spatial_axis(SIZE, i)
            vk = reduce_axis(SIZE, k)
            with init():
                C[vi] = 0.0
            C[vi] += A[vi, vk]


@T.script
def split_where(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32")):
    for i in T.parallel(250):
        for ii in T.vectorized(4, annotations={"pragma_auto_unroll": 16, "note": "x"}):
            with T.block("B"):
                vi = T.spatial_axis(1000, i * 4 + ii)
                T.where(i * 4 + ii < 1000)
                B[vi] = A[vi] * 2.0 + 1.0


@T.script
def loop_kinds(A: T.Buffer((64, 64), "float16"), n: T.int32):
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(2, 10, thread="threadIdx.x"):
            for k in T.unroll(4, annotations={"pragma_unroll_explicit": True}):
                for j in T.serial(2, 10):
                    for m in range(1, n):
                        with T.block("X"):
                            vi = T.spatial_axis((2, 10), j)
                            vj = T.reduce_axis(n, m)
                            vk = T.opaque_axis(64, bx * 8 + tx - 2)
                            A[vi, vk] = A[vi, vk] + T.float16(0.5) * A[vj, vk] + T.float16(k)


@T.script
def nested_blocks(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "int8")):
    T.func_attr({"global_symbol": "nested_blocks", "tir.noalias": True})
    with T.block("outer"):
        T.reads(A[0:16, 0:16])
        T.writes(B[0:16])
        T.block_attr({"meta_schedule.tiling_structure": "SSRSRS", "sizes": [1, 2.5, "a"], "one": (3,)})
        S = T.alloc_buffer((4, 4), "float32", scope="local")
        for i in range(4):
            with T.block("inner"):
                vi = T.spatial_axis(4, i)
                Asub = T.match_buffer(A[vi * 4 : vi * 4 + 4, 0:4], (4, 4), "float32", offset_factor=1)
                S[vi, 0] = Asub[0, 0]
                if vi < 2:
                    B[vi] = T.int8(3)
                elif vi == 2:
                    B[vi] = -5
                else:
                    x = vi * 2
                    y: T.int64 = T.cast(x, "int64")
                    B[T.truncdiv(vi, 2) + x // 3 % 2] = T.cast(y, "int8")


@T.script
def vector_ops(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((8, 8), "int32")):
    for i in range(8):
        with T.block("v"):
            vi = T.spatial_axis(8, i)
            B[T.ramp(vi * 8, 1, 8)] = A[T.ramp(vi * 8, 1, 8)] * T.broadcast(2.0, 8) + T.call_llvm_pure_intrin(
                "float32x8", "llvm.fma.v8f32", A[T.ramp(vi * 8, 1, 8)], A[T.ramp(0, 1, 8)], T.broadcast(1.0, 8)
            )
            C[vi, T.ramp(0, 1, 8)] = T.broadcast(vi, 8)
            T.evaluate(T.call_extern("int32", "printf", "row %d", vi))
            T.call_llvm_intrin("int32", "llvm.donothing")


@T.script
def math_dtypes(
    A: T.Buffer((16,), "float32"),
    B: T.Buffer((16,), "float64"),
    H: T.Buffer((16,), "float16"),
    Il: T.Buffer((16,), "int64"),
    U: T.Buffer((16,), "uint8"),
    Bo: T.Buffer((16,), "bool"),
    Bf: T.Buffer((16,), "bfloat16"),
    I8: T.Buffer((16,), "int8"),
    I16: T.Buffer((16,), "int16"),
):
    for i in range(16):
        with T.block("m"):
            vi = T.spatial_axis(16, i)
            A[vi] = T.exp(A[vi]) + T.sqrt(A[vi]) - T.tanh(A[vi]) * T.erf(A[vi]) / T.sigmoid(A[vi]) + T.pow(A[vi], 2.0)
            A[vi] = T.fma(A[vi], A[vi], 1.0) + T.abs(-A[vi]) + T.log2(T.ceil(A[vi])) - T.rsqrt(T.floor(A[vi]))
            A[vi] = T.if_then_else(vi < 8, A[vi], T.float32("inf")) + T.select(vi % 2 == 0, 1.0, T.float32("-inf"))
            B[vi] = T.log(B[vi]) + T.float64(1.5) + T.cast(A[vi], "float64") + T.float64("nan")
            H[vi] = H[vi] * T.float16(0.5) + T.float16(2)
            Il[vi] = Il[vi] + T.int64(1) + T.cast(vi, "int64") * 3
            U[vi] = U[vi] + T.uint8(255) - 1
            Bo[vi] = not Bo[vi] and (vi > 3 or T.isnan(A[vi])) or True
            Bf[vi] = Bf[vi] + T.bfloat16(1.0)
            I8[vi] = T.int8(-128) + I8[vi]
            I16[vi] = T.min(I16[vi], T.int16(7)) + T.max(I16[vi], 3) + T.min(T.int16(2), T.int16(5))
            A[vi] = T.float32(3) + 4.0
            A[vi] = -(A[vi] + 1.0) * (A[vi] - (A[vi] - 2.0)) / (A[vi] / 3.0)
            Il[vi] = T.truncdiv(Il[vi], T.int64(3)) + (Il[vi] // 2) % 5 - (0 - Il[vi]) + T.floormod(Il[vi], 4)


@T.script
def handle_style(a: T.handle, n: T.int32, m: T.int64):
    A = T.match_buffer(a, (n, 4), "float32", strides=(4, 1), elem_offset=0, align=64, offset_factor=4)
    for i, j in T.grid(n, 4):
        with T.block("s"):
            vi, vj = T.remap("SS", i, j)
            A[vi, vj] = A[vi, vj] + 1.0
    for k in range(m):
        with T.block("t"):
            vk = T.spatial_axis(m, k)
            A[0, 0] = T.cast(vk, "float32")


@T.script
def symbolic_shape(A: T.Buffer((n, n * 2), "float32"), n: T.int32):  # noqa: F821 - n is a later parameter
    for i, j in T.grid(n, n * 2):
        with T.block("s"):
            vi, vj = T.remap("SS", i, j)
            A[vi, vj] = 0.0


@T.script
def declared_var(a: T.handle):
    k = T.int32()
    A = T.match_buffer(a, (k,), "float32")
    for i in range(k):
        with T.block("s"):
            vi = T.spatial_axis(k, i)
            A[vi] = 0.0


@T.script
def explicit_root(A: T.Buffer((4,), "float32")):
    with T.block("root"):
        T.reads()
        T.writes(A[0:4])
        T.block_attr({"k": 1})
        B = T.alloc_buffer((4,), "float32")
        for i in range(4):
            with T.block("b"):
                vi = T.spatial_axis(4, i)
                B[vi] = 1.0
                A[vi] = B[vi]


@T.script
def int64_loops(A: T.Buffer((T.int64(8), T.int64(8)), "float32")):
    for i, j in T.grid(T.int64(8), T.int64(8)):
        with T.block("a"):
            vi, vj = T.remap("SS", i, j)
            A[vi, vj] = A[vi + T.int64(0), vj] + 1.0
    for i in range(T.int64(2), T.int64(6)):
        with T.block("b"):
            vi = T.spatial_axis((T.int64(2), T.int64(6)), i)
            A[vi, 0] = 1.0


@T.script
def lets_and_branches(A: T.Buffer((8,), "float32")):
    for i in range(8):
        x = i + 1
        y = x * 2
        if x > 3 and not y == 4:
            A[i] = 1.0
        else:
            pass
        A[y % 8] = 2.0 if i < 2 else 3.0


@T.script
def partial_signature(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("rowsum"):
            vi, vk = T.remap("SR", i, k)
            T.reads(A[vi, 0:8])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def empty_body(A: T.Buffer((1,), "float32")):
    pass


@T.script
def gpu_shared(A: T.Buffer((64, 64), "float16"), C: T.Buffer((64, 64), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("tile"):
                vb = T.spatial_axis(4, bx)
                vt = T.spatial_axis(16, tx)
                S = T.alloc_buffer((16, 64), "float16", scope="shared")
                for k in T.serial(64):
                    with T.block("load"):
                        vk = T.spatial_axis(64, k)
                        S[vt, vk] = A[vb * 16 + vt, vk]
                for k in T.unroll(64):
                    C[vb * 16 + vt, k] = T.cast(S[vt, k], "float32")


ALL_PROGRAMS = [
    matmul_relu,
    bare_names,
    split_where,
    loop_kinds,
    nested_blocks,
    vector_ops,
    math_dtypes,
    handle_style,
    symbolic_shape,
    declared_var,
    explicit_root,
    int64_loops,
    lets_and_branches,
    partial_signature,
    empty_body,
    gpu_shared,
]
