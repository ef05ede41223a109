"""decompose_padding: TVM's 1-D and 2-D cases (golden, numerics, replay) and refusals."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def pad1d(x: T.Buffer((128,), "int32"), y: T.Buffer((140,), "int32")):
    for i in range(140):
        with T.block("block"):
            vi = T.remap("S", i)
            y[vi] = T.if_then_else(vi >= 6 and vi < 134, x[vi - 6], 0)


@T.script
def pad2d(x: T.Buffer((10, 12), "float32"), y: T.Buffer((12, 16), "float32")):
    for i, j in T.grid(12, 16):
        with T.block("block"):
            vi, vj = T.remap("SS", i, j)
            y[vi, vj] = T.if_then_else(1 <= vi and vi < 11 and 2 <= vj and vj < 14, x[vi - 1, vj - 2], T.float32(-1))


@T.script
def data_dependent_pad(x: T.Buffer((8,), "float32"), m: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("block"):
            vi = T.remap("S", i)
            y[vi] = T.if_then_else(m[vi] > 0.0, x[vi], T.float32(0))


def test_decompose_padding_1d(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pad1d, debug=True)
    block = sch.get_block("block")
    fill = sch.decompose_padding(block, sch.get_loops(block)[0])
    assert sch.get(fill).name == "block_pad_const"
    check_schedule(sch, pad1d, golden, "schedule/decompose_padding_1d")


@pytest.mark.parametrize("position", [0, 1])
def test_decompose_padding_2d_at_either_loop(position: int) -> None:
    sch = Schedule(pad2d, debug=True)
    block = sch.get_block("block")
    sch.decompose_padding(block, sch.get_loops(block)[position])
    check_numerics(pad2d, sch.func)
    check_replay(sch, pad2d)


def test_decompose_padding_refuses_a_condition_that_reads_memory() -> None:
    sch = Schedule(data_dependent_pad)
    block = sch.get_block("block")
    with pytest.raises(ScheduleError, match="the condition and the pad value must read no buffer"):
        sch.decompose_padding(block, sch.get_loops(block)[0])
