"""Buffers of more than 2**31 elements index in 64 bits (issue 17 D).

A 50000 x 50000 buffer's flat index ``i * 50000 + j`` does not fit int32: computed in 32 bits it
wrapped and the built code wrote far outside the array (SIGSEGV). Each case runs in a child
process, so a regression fails the test instead of killing pytest. The arrays are
``numpy.zeros`` (pages the kernel does not touch are never allocated), so a 2.5 GB buffer costs
a few pages of memory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tir
import tir.script as T
import tir.transform
from tir.ir import Buffer, BufferLoad, BufferStore, Cast, DataType, IntImm, Var, post_order_visit

N = 50000  # N * N = 2.5e9 > 2**31


def run_isolated(case: str) -> str:
    """Run ``case`` of this file in a fresh interpreter; a signal or an assertion fails here."""
    result = subprocess.run([sys.executable, str(Path(__file__)), case], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        died = f"killed by signal {-result.returncode}" if result.returncode < 0 else f"exit {result.returncode}"
        pytest.fail(f"{case} {died}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


@T.script
def write_corner(A: T.Buffer((50000, 50000), "int8")):
    for i in range(4):
        with T.block("W"):
            vi = T.spatial_axis(4, i)
            A[49999 - vi, 49999 - vi] = T.int8(vi + 1)


@T.script
def read_tail(A: T.Buffer((2147483664,), "int8"), B: T.Buffer((16,), "int8")):
    for i in range(16):
        with T.block("R"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[T.int64(2147483648) + T.cast(vi, "int64")]


@T.script
def symbolic_last_row(a: T.handle, b: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n, m), "int8")
    B = T.match_buffer(b, (4,), "int8")
    for j in range(4):
        with T.block("R"):
            vj = T.spatial_axis(4, j)
            B[vj] = A[n - 1, m - 1 - vj]


@T.script
def big_scratch(B: T.Buffer((2,), "int8")):
    S = T.alloc_buffer((50000, 50000), "int8")
    for i in range(2):
        with T.block("S"):
            vi = T.spatial_axis(2, i)
            S[49999, 49998 + vi] = T.int8(vi + 5)
    for i in range(2):
        with T.block("B"):
            vi = T.spatial_axis(2, i)
            B[vi] = S[49999, 49998 + vi]


def case_write_corner() -> None:
    for run in (tir.interpret, tir.build(write_corner, "llvm")):
        a = np.zeros((N, N), np.int8)
        if run is tir.interpret:
            run(write_corner, a)
        else:
            run(a)
        assert [int(a[N - 1 - k, N - 1 - k]) for k in range(4)] == [1, 2, 3, 4], run
        a[N - 4 :, N - 4 :] = 0
        assert not a[N - 8 :, N - 8 :].any() and not a[:8, :8].any()


def case_read_tail() -> None:
    a = np.zeros(2**31 + 16, np.int8)
    a[2**31 :] = np.arange(16, dtype=np.int8) + 1
    for backend in ("interp", "llvm"):
        b = np.zeros(16, np.int8)
        if backend == "interp":
            tir.interpret(read_tail, a, b)
        else:
            tir.build(read_tail, "llvm")(a, b)
        assert b.tolist() == list(range(1, 17)), backend


def case_symbolic() -> None:
    module = tir.build(symbolic_last_row, "llvm")
    for shape in ((8, 8), (N, N)):
        a = np.zeros(shape, np.int8)
        a[-1, -4:] = [4, 3, 2, 1]
        b = np.zeros(4, np.int8)
        module(a, b)
        assert b.tolist() == [1, 2, 3, 4], shape


def case_big_scratch() -> None:
    b = np.zeros(2, np.int8)
    tir.build(big_scratch, "llvm")(b)
    assert b.tolist() == [5, 6]


def test_write_past_two_gigaelements_2d() -> None:
    run_isolated("write_corner")


def test_read_past_two_gigaelements_1d() -> None:
    run_isolated("read_tail")


def test_symbolic_shape_indexes_in_64_bits() -> None:
    run_isolated("symbolic")


def test_allocation_past_two_gigaelements() -> None:
    run_isolated("big_scratch")


def _index_dtypes(func: tir.PrimFunc) -> set[DataType]:
    dtypes: set[DataType] = set()

    def visit(node: object) -> None:
        if isinstance(node, (BufferLoad, BufferStore)):
            dtypes.update(index.dtype for index in node.indices)

    post_order_visit(func.body, visit)
    return dtypes


def test_big_buffer_flattens_to_int64() -> None:
    lowered = tir.transform.lower(write_corner, "llvm")
    func = next(iter(lowered.functions.values()))
    (param,) = func.params
    assert isinstance(param, Buffer) and [(e.value, e.dtype) for e in param.shape] == [(N * N, DataType("int", 64))]
    assert _index_dtypes(func) == {DataType("int", 64)}


def test_small_buffer_keeps_int32_indices() -> None:
    """The common case pays nothing: a 128 x 128 buffer keeps 32-bit index arithmetic."""

    @T.script
    def small(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
        for i, j in T.grid(128, 128):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] + 1.0

    func = next(iter(tir.transform.lower(small, "llvm").functions.values()))
    assert _index_dtypes(func) == {DataType("int", 32)}
    casts: list[Cast] = []
    post_order_visit(func.body, lambda node: casts.append(node) if isinstance(node, Cast) else None)
    assert not casts


def test_one_dimensional_shape_variable_keeps_int32() -> None:
    """A 1-D buffer of an int32 extent cannot span more than 2**31 - 1 elements."""
    from tir.transform.flatten_buffers import index_dtype

    n = Var("n")
    assert index_dtype(Buffer("A", (n,), "float32")) == DataType("int", 32)
    assert index_dtype(Buffer("A", (n, IntImm(4)), "float32")) == DataType("int", 64)
    assert index_dtype(Buffer("A", (IntImm(46340), IntImm(46340)), "float32")) == DataType("int", 32)
    assert index_dtype(Buffer("A", (IntImm(46341), IntImm(46341)), "float32")) == DataType("int", 64)


if __name__ == "__main__":
    globals()[f"case_{sys.argv[1]}"]()
