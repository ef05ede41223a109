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


@T.script
def scale_symbolic(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (16, n), "float32")
    B = T.match_buffer(b, (16, n), "float32")
    for i, k in T.grid(16, n):
        with T.block("B"):
            vi, vk = T.remap("SS", i, k)
            B[vi, vk] = A[vi, vk] * 2.0


@pytest.mark.parametrize("func", [scale, scale_symbolic], ids=["constant", "symbolic"])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_split_takes_integer_constant_factors(func: tir.PrimFunc, dtype: str) -> None:
    # TVM's test_split_int64_factors passes IntImm(10, "int64"): the same split as 10.
    from schedule_testing import check_numerics, check_replay

    from tir.ir import IntImm

    by_constant, by_int = Schedule(func, debug=True), Schedule(func, debug=True)
    by_constant.split(by_constant.get_loops(by_constant.get_block("B"))[1], [IntImm(3, dtype), None])
    by_int.split(by_int.get_loops(by_int.get_block("B"))[1], [3, None])
    tir.assert_structural_equal(by_constant.func, by_int.func)
    assert by_constant.trace.instructions[-1].kwargs["factors"] == [3, None]  # recorded as an int
    check_replay(by_constant, func)
    if func is scale:
        check_numerics(func, by_constant.func)


@pytest.mark.parametrize("factor", ["bool", "float"])
def test_split_refuses_constants_that_are_not_integers(factor: str) -> None:
    from tir.ir import FloatImm, IntImm

    constant = IntImm(1, "bool") if factor == "bool" else FloatImm(2.0, "float32")
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"split: .*expected an integer \(an int or an integer IntImm\)"):
        sch.split(i, [constant, None])
    assert tir.structural_equal(sch.func, scale)


def test_split_disable_predication_of_an_exact_split(golden) -> None:  # type: ignore[no-untyped-def]
    # An exact split has no predicate, so disable_predication changes nothing (TVM's test_split[True]).
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [5, 4, 5], disable_predication=True)
    sch.split(j, [2, None], disable_predication=True)
    check_schedule(sch, scale, golden, "schedule/split_three_way")
    assert "T.where" not in sch.func.script()


@pytest.mark.parametrize("factors", [[None, 32], [3, 32], [7, 15]])
def test_split_disable_predication_refuses_an_inexact_split(factors: list) -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"split: loop i: disable_predication=True needs the factors"):
        sch.split(i, factors, disable_predication=True)
    assert tir.structural_equal(sch.func, scale)
