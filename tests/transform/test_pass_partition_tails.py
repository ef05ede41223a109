"""partition_tails: loops whose last iterations alone fail a guard are cut; full tiles run unguarded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.ir import For, ForKind, IfThenElse
from tir.transform import partition_tails


def _partition(func: tir.PrimFunc) -> tir.PrimFunc:
    return partition_tails(lower_before(func, "partition_tails"))


def _loops(func: tir.PrimFunc, name: str) -> list[For]:
    return [n for n in nodes_of(func.body) if isinstance(n, For) and n.loop_var.name == name]


def _guards(node) -> list[IfThenElse]:  # type: ignore[no-untyped-def]
    return [n for n in nodes_of(node) if isinstance(n, IfThenElse)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    assert_same_results(func, _partition(func), make_args)


def test_split_tail_is_cut_off() -> None:
    """``io * 4 + ii < 10`` over io < 3, ii < 4: provable for io < 2; the tail keeps its guard
    only where it is not settled (ii < 2 runs, ii >= 2 is gone)."""
    cut = _partition(PROGRAMS["split_predicate"][0])
    head, tail = _loops(cut, "io")
    assert (head.min.value, head.extent.value) == (0, 2) and not _guards(head)
    assert (tail.min.value, tail.extent.value) == (2, 1)
    (inner,) = [loop for loop in nodes_of(tail) if isinstance(loop, For) and loop is not tail]
    assert (inner.min.value, inner.extent.value) == (0, 2) and not _guards(inner)
    assert head.loop_var is not tail.loop_var


REGISTER_TILE = """
@T.prim_func
def f(A: T.Buffer((28, 64), "float32"), C: T.Buffer((28,), "float32")):
    for i_0, k in T.grid(10, 64):
        for i_1 in T.unroll(3):
            if i_0 * 3 + i_1 < 28:
                C[i_0 * 3 + i_1] = C[i_0 * 3 + i_1] + A[i_0 * 3 + i_1, k]
"""


def test_register_tile_under_a_reduction() -> None:
    """The docstring's example: the cut is above the reduction loop, whose copy in the tail
    runs a tile of one."""
    func = tir.parse(REGISTER_TILE)
    cut = partition_tails(func)
    head, tail = _loops(cut, "i_0")
    assert head.extent.value == 9 and not _guards(head)
    assert tail.min.value == 9 and tail.extent.value == 1 and not _guards(tail)
    (tile,) = [loop for loop in nodes_of(tail) if isinstance(loop, For) and loop.loop_var.name == "i_1"]
    assert tile.extent.value == 1 and tile.kind is ForKind.UNROLLED
    rng = np.random.default_rng(0)
    a = rng.standard_normal((28, 64)).astype(np.float32)
    want, got = np.zeros(28, np.float32), np.zeros(28, np.float32)
    tir.build(func, "llvm")(a, want)
    tir.build(cut, "llvm")(a, got)
    np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got, want)


HEAD_GUARD = """
@T.prim_func
def f(A: T.Buffer((10,), "float32")):
    for i in range(10):
        if i >= 2:
            A[i] = 1.0
"""

DATA_GUARD = """
@T.prim_func
def f(A: T.Buffer((10,), "float32")):
    for i in range(10):
        if A[i] < 0.0:
            A[i] = 0.0
"""

PARALLEL = """
@T.prim_func
def f(A: T.Buffer((10,), "float32")):
    for io in T.parallel(3):
        for ii in range(4):
            if io * 4 + ii < 10:
                A[io * 4 + ii] = 1.0
"""

DEAD_TAIL = """
@T.prim_func
def f(A: T.Buffer((10,), "float32")):
    for i in range(10):
        if i < 3:
            A[i] = 1.0
"""


@pytest.mark.parametrize("program", [HEAD_GUARD, DATA_GUARD])
def test_guards_that_are_no_tail_are_left_alone(program: str) -> None:
    func = tir.parse(program)
    assert partition_tails(func) is func


def test_a_parallel_loop_tests_once_per_iteration() -> None:
    """Not cut (its iterations are the threads' work): its body becomes ``if io * 4 + 3 < 10``
    (the guard at the inner loop's last value, which the analyzer proves is its worst case):
    unguarded stores, else the guarded original."""
    func = tir.parse(PARALLEL)
    cut = partition_tails(func)
    (outer,) = _loops(cut, "io")
    assert outer.kind is ForKind.PARALLEL and outer.extent.value == 3
    assert isinstance(outer.body, IfThenElse)
    assert not _guards(outer.body.then_case) and _guards(outer.body.else_case)
    got, want = np.zeros(10, np.float32), np.zeros(10, np.float32)
    tir.build(func, "llvm")(want)
    tir.build(cut, "llvm")(got)
    np.testing.assert_array_equal(got, want)
    assert got.sum() == 10


def test_a_tail_that_never_runs_goes() -> None:
    cut = partition_tails(tir.parse(DEAD_TAIL))
    (loop,) = _loops(cut, "i")
    assert loop.extent.value == 3 and not _guards(cut)


def test_in_the_pipeline_after_compaction_before_allocation_planning() -> None:
    from tir.transform import PASS_NAMES

    position = PASS_NAMES.index("partition_tails")
    assert PASS_NAMES[position - 1] == "compact_allocations"
    assert PASS_NAMES[position + 1] == "plan_allocations"


ROW_SUMS = """
@T.prim_func
def f(A: T.Buffer((23, 19, 16), "float32"), C: T.Buffer((23, 19), "float32")):
    for i, j, k in T.grid(23, 19, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vj, vk]
"""


@settings(max_examples=12, deadline=None)
@given(
    st.integers(2, 9),
    st.integers(2, 9),
    st.integers(2, 5),
    st.booleans(),
    st.sampled_from(["serial", "parallel", "unroll"]),
)
def test_random_imperfect_tiles_compute_the_same(
    i_tile: int, j_tile: int, j_outer: int, reduction_inside: bool, outer_kind: str
) -> None:
    """Imperfect splits of both pixel loops (two levels for j), the reduction between the tile
    loops or outside them, the outermost loop parallel, unrolled or serial: the lowered program
    (cut and unswitched tails) computes what the unscheduled one does."""
    func = tir.parse(ROW_SUMS)
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, i_tile])
    j0, j1, j2 = sch.split(j, [None, j_outer, j_tile])
    order = [i0, j0, k, j1, i1, j2] if reduction_inside else [k, i0, j0, j1, i1, j2]
    sch.reorder(*order)
    if outer_kind == "parallel" and reduction_inside:
        sch.parallel(i0)
    elif outer_kind == "unroll":
        sch.unroll(j2)
    rng = np.random.default_rng(i_tile * 100 + j_tile)
    a = rng.standard_normal((23, 19, 16)).astype(np.float32)
    got = np.zeros((23, 19), np.float32)
    tir.build(sch.func, "llvm")(a, got)
    np.testing.assert_allclose(got, a.sum(axis=2), rtol=1e-4, atol=1e-4)
