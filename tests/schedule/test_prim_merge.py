"""merge (TVM's): sibling loops of one extent become one; refused where the new order could
change a result (TVM does not check)."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def producer_consumer(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def reads_ahead(A: T.Buffer((17,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi + 1] + 1.0


@T.script
def different_extents(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("A"):
            vi = T.remap("S", i)
            A[vi] = 1.0
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = 2.0


def test_merge_outer_then_inner_loops(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(producer_consumer, debug=True)
    sch.merge(sch.get_loops(sch.get_block("B"))[0], sch.get_loops(sch.get_block("C"))[0])
    sch.merge(sch.get_loops(sch.get_block("B"))[1], sch.get_loops(sch.get_block("C"))[1])
    check_schedule(sch, producer_consumer, golden, "schedule/merge")


def test_merge_refuses_a_consumer_reading_ahead_of_the_producer() -> None:
    # Merged, C at i would read B[i + 1] before the producer's iteration i + 1 writes it.
    sch = Schedule(reads_ahead)
    with pytest.raises(ScheduleError, match="both touch B .* not proved to belong to one iteration each"):
        sch.merge(sch.get_loops(sch.get_block("B"))[0], sch.get_loops(sch.get_block("C"))[0])
    assert sch.func is reads_ahead


def test_merge_refuses_loops_of_different_extents() -> None:
    sch = Schedule(different_extents)
    with pytest.raises(ScheduleError, match="the loops must start at 0 and have one extent"):
        sch.merge(sch.get_loops(sch.get_block("A"))[0], sch.get_loops(sch.get_block("B"))[0])


@T.script
def three(A: T.Buffer((12,), "float32"), B: T.Buffer((12,), "float32"), C: T.Buffer((12,), "float32")):
    for i in range(12):
        with T.block("A"):
            vi = T.remap("S", i)
            A[vi] = T.float32(1) * T.cast(vi, "float32")
    for i in range(12):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(12):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + B[vi]


def test_merge_three_loops() -> None:
    sch = Schedule(three, debug=True)
    loops = [sch.get_loops(sch.get_block(name))[0] for name in "ABC"]
    merged = sch.merge(*loops)
    assert len(sch.get_loops(sch.get_block("C"))) == 1 and sch.get(merged).extent.value == 12
    check_numerics(three, sch.func)
    check_replay(sch, three)


@T.script
def tiled_consumers(
    A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32"), D: T.Buffer((64, 64), "float32")
):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i_0, j_0, i_1, j_1 in T.grid(8, 8, 16, 16):
        with T.block("C"):
            vi = T.axis.spatial(128, i_0 * 16 + i_1)
            vj = T.axis.spatial(128, j_0 * 16 + j_1)
            C[vi, vj] = B[vi, vj] + 1.0
    for i_0, j_0, i_1, j_1 in T.grid(8, 8, 8, 8):
        with T.block("D"):
            vi = T.axis.spatial(64, i_0 * 8 + i_1)
            vj = T.axis.spatial(64, j_0 * 8 + j_1)
            D[vi, vj] = B[vi, vj] + 2.0


def test_merge_nested_loops_merges_their_enclosing_loops(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_merge2: merging the second loops of two perfect nests merges the first ones too.
    sch = Schedule(tiled_consumers, debug=True)
    merged = sch.merge(sch.get_loops(sch.get_block("C"))[1], sch.get_loops(sch.get_block("D"))[1])
    assert [sch.get(lp).extent.value for lp in sch.get_loops(sch.get_block("D"))] == [8, 8, 8, 8]
    assert sch.get(merged) is sch.get(sch.get_loops(sch.get_block("C"))[1])
    check_schedule(sch, tiled_consumers, golden, "schedule/merge_nested")


@T.script
def nested_reads_ahead(A: T.Buffer((9, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((9, 8), "float32")
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi + 1, vj] + 1.0


def test_merge_nested_loops_refuses_a_consumer_reading_ahead_at_an_outer_level() -> None:
    # Merging the j loops merges the i loops too; C at i would read row i + 1 of B before the
    # producer's iteration i + 1 writes it.
    sch = Schedule(nested_reads_ahead)
    with pytest.raises(ScheduleError, match="both touch B .* not proved to belong to one iteration each"):
        sch.merge(sch.get_loops(sch.get_block("B"))[1], sch.get_loops(sch.get_block("C"))[1])
    assert sch.func is nested_reads_ahead


@T.script
def not_only_child(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8), "float32")
    D = T.alloc_buffer((8, 8), "float32")
    for i in range(8):
        for j in range(8):
            with T.block("D"):
                vi, vj = T.remap("SS", i, j)
                D[vi, vj] = A[vi, vj] * 2.0
        for j in range(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + D[vi, vj]


def test_merge_refuses_a_loop_that_is_not_its_parents_only_statement() -> None:
    # TVM's test_merge_fail_not_only_child.
    sch = Schedule(not_only_child)
    with pytest.raises(ScheduleError, match="neither a sibling of the other loops nor the only statement"):
        sch.merge(sch.get_loops(sch.get_block("B"))[1], sch.get_loops(sch.get_block("C"))[1])
