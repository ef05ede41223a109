"""loop_partition: golden, numerics, replay, refusals (TVM's test_loop_partition cases)."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def elementwise(A: T.Buffer((16, 16, 8), "float32"), B: T.Buffer((16, 16, 8), "float32")):
    for i, j, k in T.grid(16, 16, 8):
        with T.block("B"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            B[vi, vj, vk] = A[vi, vj, vk] * 2.0


@T.script
def matmul(A: T.Buffer((8, 12), "float32"), B: T.Buffer((12, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 12):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_loop_partition_nested(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's case0: [2, 1, 8] of 16 gives parts 2, 1, 8 and the 5 left; then a part's inner loop.
    sch = Schedule(elementwise, debug=True)
    i, _, _ = sch.get_loops(sch.get_block("B"))
    parts = sch.loop_partition(i, factors=[2, 1, 8])
    assert len(parts) == 4
    _, j, _ = sch.get_loops(sch.get_block("B_i0"))
    sch.loop_partition(j, factors=[4, None])
    check_schedule(sch, elementwise, golden, "schedule/loop_partition_nested")


def test_loop_partition_with_an_inferred_factor_in_the_middle() -> None:
    sch = Schedule(elementwise, debug=True)
    _, _, k = sch.get_loops(sch.get_block("B"))
    sch.loop_partition(k, factors=[1, None, 3])
    assert [sch.get(loop).extent.value for loop in sch.get_loops(sch.get_block("B_k1"))][-1] == 4
    check_numerics(elementwise, sch.func)
    check_replay(sch, elementwise)


def test_loop_partition_takes_integer_constant_factors() -> None:
    # As split does: IntImm(1, "int64") stands for 1, and the trace records the int.
    from tir.ir import IntImm

    sch = Schedule(elementwise, debug=True)
    _, _, k = sch.get_loops(sch.get_block("B"))
    sch.loop_partition(k, factors=[IntImm(1, "int64"), None, IntImm(3, "int32")])
    assert sch.trace.instructions[-1].kwargs["factors"] == [1, None, 3]
    check_numerics(elementwise, sch.func)
    check_replay(sch, elementwise)


def test_loop_partition_of_a_spatial_loop_of_a_reduction() -> None:
    sch = Schedule(matmul, debug=True)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.loop_partition(i, factors=[3, None])
    check_numerics(matmul, sch.func)


def test_loop_partition_refuses_a_reduction_loop() -> None:
    sch = Schedule(matmul)
    _, _, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="the loop drives the reduction iterator vk of block 'C'"):
        sch.loop_partition(k, factors=[5, None])


@pytest.mark.parametrize(
    ("factors", "message"),
    [
        ([None, None], "at most one None"),
        ([0, 4], "positive integers"),
        ([10, 10], "add up to 20, past the extent 16"),
    ],
)
def test_loop_partition_refuses(factors: list[object], message: str) -> None:
    sch = Schedule(elementwise)
    i, _, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=message):
        sch.loop_partition(i, factors=factors)  # type: ignore[arg-type]
    assert sch.func is elementwise


def test_loop_partition_refuses_a_thread_bound_loop() -> None:
    sch = Schedule(elementwise)
    i, _, _ = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="bound to blockIdx.x; partition it before binding"):
        sch.loop_partition(i, factors=[4, None])


def test_loop_partition_refuses_a_part_past_a_predicate() -> None:
    sch = Schedule(elementwise)
    i, _, _ = sch.get_loops(sch.get_block("B"))
    outer, _ = sch.split(i, [5, 4])  # 5 x 4 with T.where(i_0 * 4 + i_1 < 16): i_0 = 4 runs nothing
    with pytest.raises(ScheduleError, match=r"the part \[4, 5\) runs no instance of block 'B'"):
        sch.loop_partition(outer, factors=[4, 1])
