"""fuse_reduction_epilogue: TVM's cases (int8 and float32 matmul + bias), a transposed epilogue,
and one refusal per precondition (TVM accepts a second reader of the sum and leaves it reading
a buffer nothing writes any more; here that is refused)."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul_bias(
    A: T.Buffer((16, 16), "int8"),
    B: T.Buffer((16, 16), "int8"),
    C: T.Buffer((16, 16), "int32"),
    D: T.Buffer((16, 16), "int32"),
):
    temp = T.alloc_buffer((16, 16), "int32")
    for i, j, k in T.grid(16, 16, 16):
        with T.block("multiply"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                temp[vi, vj] = 0
            temp[vi, vj] = temp[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vj, vk], "int32")
    for i, j in T.grid(16, 16):
        with T.block("add"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = temp[vi, vj] + C[vi, vj]


@T.script
def matmul_bias_t(
    A: T.Buffer((8, 12), "float32"),
    B: T.Buffer((12, 16), "float32"),
    bias: T.Buffer((8,), "float32"),
    D: T.Buffer((16, 8), "float32"),
):
    temp = T.alloc_buffer((8, 16), "float32")
    for i, j, k in T.grid(8, 16, 12):
        with T.block("matmul"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                temp[vi, vj] = 0.0
            temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vk, vj]
    for j, i in T.grid(16, 8):
        with T.block("bias"):
            vj, vi = T.remap("SS", j, i)
            D[vj, vi] = bias[vi] + temp[vi, vj]


@T.script
def two_readers(
    A: T.Buffer((8, 8), "float32"),
    C: T.Buffer((8,), "float32"),
    D: T.Buffer((8,), "float32"),
    E: T.Buffer((8,), "float32"),
):
    temp = T.alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 8):
        with T.block("sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                temp[vi] = 0.0
            temp[vi] = temp[vi] + A[vi, vk]
    for i in range(8):
        with T.block("add"):
            vi = T.remap("S", i)
            D[vi] = temp[vi] + C[vi]
    for i in range(8):
        with T.block("add2"):
            vi = T.remap("S", i)
            E[vi] = temp[vi] + C[vi]


@T.script
def partial_epilogue(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32"), D: T.Buffer((6,), "float32")):
    temp = T.alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 8):
        with T.block("sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                temp[vi] = 0.0
            temp[vi] = temp[vi] + A[vi, vk]
    for i in range(6):
        with T.block("add"):
            vi = T.remap("S", i)
            D[vi] = temp[vi] + C[vi]


@T.script
def scaled_epilogue(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    temp = T.alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 8):
        with T.block("sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                temp[vi] = 0.0
            temp[vi] = temp[vi] + A[vi, vk]
    for i in range(8):
        with T.block("add"):
            vi = T.remap("S", i)
            D[vi] = temp[vi] * C[vi]


def test_fuse_reduction_epilogue_int8(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_bias, debug=True)
    sch.fuse_reduction_epilogue("multiply", "add")
    assert [r.block.name for r in sch.index.blocks.values()] == ["root", "multiply"]
    assert "temp" not in sch.func.script()
    check_schedule(sch, matmul_bias, golden, "schedule/fuse_reduction_epilogue")


def test_fuse_reduction_epilogue_transposed_float32() -> None:
    sch = Schedule(matmul_bias_t, debug=True)
    sch.fuse_reduction_epilogue("matmul", "bias")
    assert "D[vj, vi] = bias[vi]" in sch.func.script()
    check_numerics(matmul_bias_t, sch.func, rtol=1e-4)  # the bias is added first now
    check_replay(sch, matmul_bias_t)


@pytest.mark.parametrize(
    ("func", "blocks", "message"),
    [
        (two_readers, ("sum", "add"), "block 'add2' reads temp too"),
        (partial_epilogue, ("sum", "add"), "does not run exactly over the elements the reduction writes"),
        (scaled_epilogue, ("sum", "add"), r"the epilogue must be temp\[...\] \+ X"),
    ],
)
def test_fuse_reduction_epilogue_refuses(func: PrimFunc, blocks: tuple[str, str], message: str) -> None:
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        sch.fuse_reduction_epilogue(*blocks)
    assert sch.func is func
