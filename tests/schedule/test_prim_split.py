"""split: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_schedule

import tir
import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def scale(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


def test_split_with_inferred_factor_adds_predicate(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(i, [None, 32])
    assert sch.get_loop_node(outer).extent.value == 4
    assert sch.get_loop_node(inner).extent.value == 32
    check_schedule(sch, scale, golden, "schedule/split_inferred")


def test_split_exact_three_way(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [5, 4, 5])
    sch.split(j, [2, None])
    check_schedule(sch, scale, golden, "schedule/split_three_way")
    assert "T.where" not in sch.func.script()


def test_split_handle_of_replaced_loop_is_invalid() -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [10, 10])
    with pytest.raises(ScheduleError, match=r"split: loop i: no such loop in the current program"):
        sch.split(i, [2, 50])


@pytest.mark.parametrize(
    "factors,message",
    [
        ([None, None], "at most one factor may be None"),
        ([0, 100], "factors must be positive integers"),
        ([], "needs at least one factor"),
    ],
)
def test_split_rejects_bad_factors(factors: list, message: str) -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=message):
        sch.split(i, factors)
    assert tir.structural_equal(sch.func, scale)  # a refused primitive changes nothing


def test_split_refuses_a_parallel_loop() -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    with pytest.raises(ScheduleError, match="only a serial loop without annotations can be split"):
        sch.split(i, [10, 10])
