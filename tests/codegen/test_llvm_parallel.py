"""Parallel loops: the lower_parallel pass and GOMP_parallel launches."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_kernels import run_interp

import tir
import tir.script as T
from tir.ir import (
    Buffer,
    BufferStore,
    Call,
    Evaluate,
    For,
    ForKind,
    IntImm,
    IRModule,
    PrimFunc,
    StringImm,
    Var,
    post_order_visit,
)
from tir.transform.lower_parallel import LAUNCH_OP, OUTLINED_ATTR, lower_parallel


@T.script
def row_scale(A: T.Buffer((64, 16), "float32"), B: T.Buffer((64, 16), "float32"), n: T.int32):
    for i in T.parallel(64):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * T.cast(n, "float32") + T.float32(1)


def _thread_ids(extent: int) -> PrimFunc:
    """``Out[i] = omp_get_thread_num()`` in a parallel loop."""
    out = Buffer("Out", (extent,), "int32")
    i = Var("i")
    value = Call("int32", "call_extern", (StringImm("omp_get_thread_num"),))
    return PrimFunc(
        "thread_ids", (out,), For(i, IntImm(0), IntImm(extent), ForKind.PARALLEL, BufferStore(out, value, (i,)))
    )


def test_lower_parallel_outlines_the_loop() -> None:
    lowered = tir.transform.lower(row_scale, "llvm")
    assert list(lowered.functions) == ["row_scale", "row_scale_parallel_0"]
    outlined = lowered["row_scale_parallel_0"]
    assert outlined.attrs[OUTLINED_ATTR] == "row_scale"
    names = [p.name for p in outlined.params]
    assert names[:2] == ["begin", "end"] and sorted(names[2:]) == ["A", "B", "n"]
    entry = lowered["row_scale"]
    assert isinstance(entry.body, Evaluate) and entry.body.value.op == LAUNCH_OP
    assert entry.body.value.args[0].value == "row_scale_parallel_0"


def test_nested_parallel_loops_become_serial() -> None:
    out = Buffer("Out", (8, 8), "int32")
    i, j = Var("i"), Var("j")
    inner = For(j, IntImm(0), IntImm(8), ForKind.PARALLEL, BufferStore(out, i * 8 + j, (i, j)))
    f = PrimFunc("nested", (out,), For(i, IntImm(0), IntImm(8), ForKind.PARALLEL, inner))
    mod = lower_parallel(f)
    assert len(mod) == 2
    kinds: list[ForKind] = []
    post_order_visit(mod["nested_parallel_0"].body, lambda n: kinds.append(n.kind) if isinstance(n, For) else None)
    assert kinds == [ForKind.SERIAL, ForKind.SERIAL]
    result = np.zeros((8, 8), np.int32)
    tir.build(f)(result)
    np.testing.assert_array_equal(result, np.arange(64).reshape(8, 8))


def test_lower_parallel_without_parallel_loops_is_the_identity() -> None:
    mod = IRModule({"f": _thread_ids(4).replace(body=Evaluate(IntImm(0)))})
    assert lower_parallel(mod) is mod


def test_parallel_loop_matches_the_interpreter() -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((64, 16)).astype(np.float32), np.zeros((64, 16), np.float32), 3]
    expected = run_interp(row_scale, args)[1]
    m = tir.build(row_scale)
    got = np.zeros((64, 16), np.float32)
    m(args[0], got, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)  # a * b + c may be fused


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_loop_uses_the_requested_threads(threads: int) -> None:
    m = tir.build(_thread_ids(30))
    m.set_num_threads(threads)
    ids = np.full(30, -1, np.int32)
    m(ids)
    assert sorted(set(ids.tolist())) == list(range(threads))
    # A static schedule: each thread runs one contiguous chunk, in thread order.
    assert ids.tolist() == sorted(ids.tolist())


def test_num_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    m = tir.build(_thread_ids(16))
    monkeypatch.setenv("TIR_NUM_THREADS", "4")
    assert m.num_threads == 4
    ids = np.full(16, -1, np.int32)
    m(ids)
    assert sorted(set(ids.tolist())) == [0, 1, 2, 3]
    m.set_num_threads(2)  # the module's own setting wins
    m(ids)
    assert sorted(set(ids.tolist())) == [0, 1]
    monkeypatch.setenv("TIR_NUM_THREADS", "zero")
    m.set_num_threads(None)
    with pytest.raises(ValueError, match="TIR_NUM_THREADS"):
        m(ids)


def test_more_threads_than_iterations() -> None:
    m = tir.build(_thread_ids(3))
    m.set_num_threads(8)
    ids = np.full(3, -1, np.int32)
    m(ids)
    assert ids.tolist() == [0, 1, 2]


def _symbolic_parallel() -> PrimFunc:
    """``for o in range(2): for i in parallel(n): Out[o*n + i] = o * 100 + i + off`` (captured o, off)."""
    n, off = Var("n"), Var("off")
    out = Buffer("Out", (64,), "int32")
    o, i = Var("o"), Var("i")
    store = BufferStore(out, o * 100 + i + off, (o * n + i,))
    inner = For(i, IntImm(0), n, ForKind.PARALLEL, store)
    return PrimFunc("sym", (out, n, off), For(o, IntImm(0), IntImm(2), ForKind.SERIAL, inner))


@pytest.mark.parametrize("n", [0, 1, 5, 32])
def test_parallel_loop_with_symbolic_extent_and_captured_scalars(n: int) -> None:
    f = _symbolic_parallel()
    out = np.full(64, -7, np.int32)
    m = tir.build(f)
    m.set_num_threads(2)
    m(out, n, 1000)
    expected = np.full(64, -7, np.int32)
    tir.interpret(f, expected, n, 1000)
    np.testing.assert_array_equal(out, expected)


@T.script
def parallel_with_local(A: T.Buffer((32, 8), "float32"), B: T.Buffer((32,), "float32")):
    for i in T.parallel(32):
        with T.block("row"):
            vi = T.spatial_axis(32, i)
            tmp = T.alloc_buffer((8,), "float32")
            for j in range(8):
                with T.block("square"):
                    vj = T.spatial_axis(8, j)
                    tmp[vj] = A[vi, vj] * A[vi, vj]
            for j in range(8):
                with T.block("sum"):
                    vj = T.reduce_axis(8, j)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + tmp[vj]


def test_parallel_body_with_a_per_thread_allocation() -> None:
    a = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32)
    expected = run_interp(parallel_with_local, [a, np.zeros(32, np.float32)])[1]
    m = tir.build(parallel_with_local)
    m.set_num_threads(4)
    got = np.zeros(32, np.float32)
    m(a, got)
    np.testing.assert_array_equal(got, expected)
    assert "GOMP_parallel" in m.get_source("ll")


def test_scratch_buffer_shared_by_parallel_iterations_is_refused() -> None:
    from tir.transform._common import LoweringError

    @T.script
    def racy(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32")):
        S = T.alloc_buffer((16,), "float32")
        for j in range(16):
            S[j] = 0.0
        for i in T.parallel(4):
            for j in range(16):
                S[j] = S[j] + A[i, j]  # accumulates across iterations: they would race on S
                B[i, j] = S[j]

    with pytest.raises(LoweringError, match="every iteration of the parallel loop 'i' writes the same elements of 'S'"):
        tir.build(racy)
