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


@T.script
def pad_then_pool(x: T.Buffer((12,), "float32"), y: T.Buffer((12,), "float32")):
    p = T.alloc_buffer((14,), "float32")
    for i in range(14):
        with T.block("pad"):
            vi = T.remap("S", i)
            p[vi] = T.if_then_else(1 <= vi and vi < 13, x[vi - 1], T.float32(0))
    for i, k in T.grid(12, 3):
        with T.block("pool"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                y[vi] = 0.0
            y[vi] = y[vi] + p[vi + vk]


def test_decompose_padding_at_a_loop_that_also_holds_the_consumer(golden) -> None:  # type: ignore[no-untyped-def]
    # After compute_at, the pad block shares loop io with the pool: the fill copies io (the
    # path) and goes before it; the pool stays where it is (TVM's "tiled and lift pad").
    sch = Schedule(pad_then_pool, debug=True)
    pool = sch.get_block("pool")
    i, _ = sch.get_loops(pool)
    io, _ = sch.split(i, [3, 4])
    sch.compute_at(sch.get_block("pad"), io)
    pad = sch.get_block("pad")
    fill = sch.decompose_padding(pad, sch.get_loops(pad)[0])
    text = sch.func.script()
    assert text.index('T.block("pad_pad_const")') < text.index('T.block("pad")') < text.index('T.block("pool")')
    assert sch.get(fill).name == "pad_pad_const"
    check_schedule(sch, pad_then_pool, golden, "schedule/decompose_padding_lifted_past_a_consumer")


@T.script
def pad_overwritten(x: T.Buffer((12,), "float32"), y: T.Buffer((14,), "float32")):
    p = T.alloc_buffer((14,), "float32")
    for i in range(14):
        with T.block("pad"):
            vi = T.remap("S", i)
            p[vi] = T.if_then_else(1 <= vi and vi < 13, x[vi - 1], T.float32(0))
        with T.block("mark"):
            vi = T.remap("S", i)
            p[vi] = p[vi] + 1.0
        with T.block("out"):
            vi = T.remap("S", i)
            y[vi] = p[vi]


def test_decompose_padding_refuses_another_writer_under_the_loop() -> None:
    sch = Schedule(pad_overwritten)
    pad = sch.get_block("pad")
    with pytest.raises(ScheduleError, match="block 'mark' under loop i also writes p"):
        sch.decompose_padding(pad, sch.get_loops(pad)[0])
