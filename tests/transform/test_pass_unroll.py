"""unroll_loops: small constant-extent unroll loops are replicated; others stay serial with a hint."""

from __future__ import annotations

import pytest
from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.ir import Allocate, For, ForKind
from tir.transform import unroll_loops


def _unroll(func: tir.PrimFunc) -> tir.PrimFunc:
    return unroll_loops(lower_before(func, "unroll_loops"))


def _loops(func: tir.PrimFunc) -> list[For]:
    return [n for n in nodes_of(func.body) if isinstance(n, For)]


@pytest.mark.parametrize("name", ["unrolled", "symbolic_declared"])
def test_golden(name: str, golden) -> None:
    unrolled = _unroll(PROGRAMS[name][0])
    assert not any(loop.kind is ForKind.UNROLLED for loop in _loops(unrolled))
    golden.check(f"transform/unroll_{name}", unrolled.script())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    assert_same_results(func, _unroll(func), make_args)


def test_symbolic_extent_becomes_serial_with_hint() -> None:
    unrolled = _unroll(PROGRAMS["unrolled"][0])
    (serial,) = [loop for loop in _loops(unrolled) if loop.loop_var.name == "k"]
    assert serial.kind is ForKind.SERIAL and serial.annotations["pragma_unroll"] is True


NESTED = """
@T.prim_func
def f(A: T.Buffer((4, 4), "float32")):
    for i in T.unroll(4):
        for j in T.unroll(4):
            A[i, j] = A[i, j] + 1.0
    for k in T.unroll(100):
        A[0, 0] = A[0, 0] + 1.0
"""


def test_nested_and_capped() -> None:
    func = tir.parse(NESTED)
    unrolled = unroll_loops(func)
    loops = _loops(unrolled)
    assert [loop.loop_var.name for loop in loops] == ["k"]
    assert loops[0].kind is ForKind.SERIAL
    text = unrolled.script()
    assert "A[3, 3] = A[3, 3] + 1.0" in text
    capped = unroll_loops(func, max_statements=8)
    assert [loop.loop_var.name for loop in _loops(capped)] == ["i", "k"]


def test_nothing_to_do_keeps_the_function() -> None:
    func = lower_before(PROGRAMS["matmul_init"][0], "unroll_loops")
    assert unroll_loops(func) is func


def test_copies_define_their_own_variables_and_buffers() -> None:
    unrolled = _unroll(PROGRAMS["unrolled_alloc"][0])
    allocations = [n.buffer for n in nodes_of(unrolled.body) if isinstance(n, Allocate)]
    loop_vars = [loop.loop_var for loop in _loops(unrolled)]
    assert len(allocations) == 4 and len({id(b) for b in allocations}) == 4
    assert len(loop_vars) == 4 and len({id(v) for v in loop_vars}) == 4


HUGE = """
@T.prim_func
def f(A: T.Buffer((8, 64, 64), "float32")):
    for i in T.unroll(8):
        for j in T.unroll(64):
            for k in T.unroll(64):
                A[i, j, k] = A[i, j, k] + 1.0
"""


def test_a_loop_too_large_for_the_backend_gets_no_hint() -> None:
    """j x k (4096 statements) is left to LLVM; i around it (32768) would take LLVM minutes to
    unroll, so it stays a plain serial loop."""
    unrolled = unroll_loops(tir.parse(HUGE))
    kinds = {loop.loop_var.name: (loop.kind, bool(loop.annotations.get("pragma_unroll"))) for loop in _loops(unrolled)}
    assert kinds["i"] == (ForKind.SERIAL, False)
    assert kinds["j"] == (ForKind.SERIAL, True)


REGISTER_TILE = """
@T.prim_func
def f(A: T.Buffer((7, 64), "float32"), W: T.Buffer((64, 16), "float32"), C: T.Buffer((7, 16), "float32")):
    for k in range(64):
        for i in T.unroll(7):
            for j in T.unroll(2):
                for v in T.vectorized(8):
                    C[i, j * 8 + v] = C[i, j * 8 + v] + A[i, k] * W[k, j * 8 + v]
"""


def test_the_cpu_pipeline_replicates_a_register_tile() -> None:
    # Left to LLVM (llvm.loop.unroll.full), a 7 x 2 tile of accumulators like this one was
    # register-allocated far worse -- values rotated through registers and spilled at every step
    # of k; ResNet-50's 7x7 layers ran 1.5x slower -- so the CPU pipeline copies it here.
    lowered = lower_before(tir.parse(REGISTER_TILE))
    loops = _loops(lowered)
    assert [loop.loop_var.name for loop in loops] == ["k"]
    assert not loops[0].annotations.get("pragma_unroll")
    assert lowered.script().count("C[") == 2 * 14  # 14 vector statements, each reading and writing C
