"""fuse: golden, numerics, replay, split/fuse round trips, and one negative test per precondition."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_testing import check_replay, check_schedule

import tir
import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def scale(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def triangle(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i + 1):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vj = T.spatial_axis(8, j)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def offset(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i in range(2, 16):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def wide_index(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i in range(T.int64(16)):
        for j in range(8):
            with T.block("B"):
                vi = T.spatial_axis(16, T.cast(i, "int32"))
                vj = T.spatial_axis(8, j)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def two_nests(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i in range(16):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
        for j in range(8):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = B[vi, vj] + 1.0


def test_fuse_two_loops(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    node = sch.get_loop_node(fused)
    assert node.loop_var.name == "i_j_fused" and node.extent.value == 800
    check_schedule(sch, scale, golden, "schedule/fuse_two_loops")


def test_fuse_matmul_three_loops_with_init(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j, k)
    check_schedule(sch, matmul, golden, "schedule/fuse_matmul_three_loops")


def test_split_then_fuse_gives_back_the_original() -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(i, [4, 25])
    sch.fuse(outer, inner)
    # Only the loop name differs: the binding is the fused loop itself again.
    tir.assert_structural_equal(sch.func, scale)
    assert "T.remap" in sch.func.script()
    check_replay(sch, scale)


def test_fuse_then_split_gives_clean_bindings(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    sch.split(fused, [None, 8])
    text = sch.func.script()
    assert "//" not in text and "%" not in text
    check_schedule(sch, scale, golden, "schedule/fuse_then_split")


def test_fuse_split_loops_across_the_original_boundary(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    _, i1 = sch.split(i, [4, 4])
    j0, _ = sch.split(j, [2, 8])
    sch.fuse(i1, j0)
    check_schedule(sch, matmul, golden, "schedule/fuse_split_loops")


def test_fuse_symbolic_extents(golden) -> None:  # type: ignore[no-untyped-def]
    func = tir.parse(
        """
@T.script
def symbolic(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + 1.0
"""
    )
    sch = Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.fuse(i, j)
    text = sch.func.script()
    golden.check("schedule/fuse_symbolic", f"# before\n{func.script()}\n# after\n{text}")
    tir.assert_structural_equal(tir.parse(text), sch.func)
    a = np.random.default_rng(0).uniform(-1, 1, size=(5, 3)).astype("float32")
    b_interp, b_llvm = np.zeros_like(a), np.zeros_like(a)
    tir.interpret(sch.func, a, b_interp, 5, 3)
    tir.build(sch.func, "llvm")(a, b_llvm, 5, 3)
    np.testing.assert_allclose(b_interp, a + 1.0)
    np.testing.assert_allclose(b_llvm, a + 1.0)
    check_replay(sch, func)


def test_fuse_single_loop_is_a_no_op() -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    same = sch.fuse(i)
    assert same.loop_var is i.loop_var
    assert sch.func is scale


# ---------------------------------------------------------------- refusals


def _refused(func: tir.PrimFunc, block: str, pick, message: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(func)
    loops = sch.get_loops(sch.get_block(block))
    with pytest.raises(ScheduleError, match=message):
        sch.fuse(*pick(loops))
    assert sch.func is func  # a refused primitive changes nothing
    assert tir.structural_equal(sch.func, func)


def test_fuse_refuses_loops_that_are_not_directly_nested() -> None:
    _refused(matmul, "C", lambda ls: [ls[0], ls[2]], r"fuse: loop k: the loops must be directly nested")


def test_fuse_refuses_loops_given_inner_first() -> None:
    _refused(scale, "B", lambda ls: [ls[1], ls[0]], r"fuse: loop i: the loops must be directly nested")


def test_fuse_refuses_a_loop_with_a_sibling() -> None:
    sch = Schedule(two_nests)
    i, j = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"loop j is not the only statement in the body of loop i"):
        sch.fuse(i, j)
    assert sch.func is two_nests


def test_fuse_refuses_a_parallel_loop() -> None:
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    before = sch.func
    with pytest.raises(
        ScheduleError,
        match=r"fuse: loop i: only serial loops without annotations can be fused; "
        r"this loop is parallel",
    ):
        sch.fuse(i, j)
    assert sch.func is before


def test_fuse_refuses_an_annotated_loop() -> None:
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.annotate(j, "pragma", 1)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"fuse: loop j: .*this loop has annotations \{'pragma': 1\}"):
        sch.fuse(i, j)
    assert sch.func is before


def test_fuse_refuses_a_loop_not_starting_at_zero() -> None:
    _refused(offset, "B", lambda ls: ls, r"fuse: loop i: the loops must start at 0; this one starts at 2")


def test_fuse_refuses_mixed_dtypes() -> None:
    _refused(wide_index, "B", lambda ls: ls, r"fuse: loop j: the loops must share one dtype: int32 is not int64")


def test_fuse_refuses_an_extent_depending_on_a_fused_loop() -> None:
    _refused(
        triangle,
        "B",
        lambda ls: ls,
        r"fuse: loop j: the extent of loop j depends on loop i\n    for j in range\(i \+ 1\):",
    )
    # The printer keeps such loops apart (a T.grid extent cannot name the grid's own variables).
    tir.assert_structural_equal(tir.parse(triangle.script()), triangle)


def test_fuse_refuses_a_loop_given_twice() -> None:
    _refused(scale, "B", lambda ls: [ls[0], ls[0]], r"fuse: loop i: each loop may be given only once")


def test_fuse_refuses_no_loops() -> None:
    _refused(scale, "B", lambda ls: [], r"fuse: no loops: needs at least one loop")


def test_fuse_refuses_a_replaced_loop() -> None:
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.fuse(i, j)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"fuse: loop i: no such loop in the current program"):
        sch.fuse(i, j)
    assert sch.func is before
