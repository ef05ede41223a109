"""add_unit_loop: golden, numerics, replay, and one negative test per precondition."""

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


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def scalar(A: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):
    with T.block("B"):
        B[0] = A[0] + 1.0


def test_add_unit_loop_above_a_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    unit = sch.add_unit_loop(sch.get_block("C"))
    node = sch.get_loop_node(unit)
    assert node.extent.value == 1 and node.loop_var.name == "u"
    check_schedule(sch, matmul, golden, "schedule/add_unit_loop_block")


def test_add_unit_loop_above_a_loop_then_fuse(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    _, j = sch.get_loops(sch.get_block("B"))
    unit = sch.add_unit_loop(j)
    assert [sch.get_loop_node(x).loop_var.name for x in [unit, j]] == ["u", "j"]
    # The unit loop fuses away: the binding of vj stays the plain fused loop.
    sch.fuse(unit, j)
    check_schedule(sch, scale, golden, "schedule/add_unit_loop_loop_fuse")


def test_add_unit_loop_gives_a_loopless_block_a_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scalar)
    block = sch.get_block("B")
    assert sch.get_loops(block) == []
    unit = sch.add_unit_loop(block)
    assert [x.loop_var for x in sch.get_loops(block)] == [unit.loop_var]
    check_schedule(sch, scalar, golden, "schedule/add_unit_loop_loopless")


def test_add_unit_loop_refuses_the_root_block() -> None:
    sch = Schedule(scale)
    with pytest.raises(ScheduleError, match=r"add_unit_loop: block 'root': cannot add a loop above the root block"):
        sch.add_unit_loop(sch.get_block("root"))
    assert sch.func is scale


def test_add_unit_loop_refuses_a_block_that_is_gone() -> None:
    sch = Schedule(scale)
    with pytest.raises(ScheduleError, match=r"add_unit_loop: block 'X': no such block in the current program"):
        sch.add_unit_loop(sch.block_rv("X"))
    assert sch.func is scale


def test_add_unit_loop_refuses_a_loop_that_is_gone() -> None:
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.fuse(i, j)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"add_unit_loop: loop j: no such loop in the current program"):
        sch.add_unit_loop(j)
    assert sch.func is before
    assert tir.structural_equal(before, sch.func)
