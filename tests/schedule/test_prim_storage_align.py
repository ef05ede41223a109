"""storage_align: golden, numerics, replay, lowering, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_schedule

import tir
import tir.script as T
from tir.analysis.tree import TreeIndex
from tir.ir import Allocate, Buffer, IRVisitor
from tir.schedule import Schedule, ScheduleError
from tir.transform import lower
from tir.transform.plan_allocations import buffer_bytes


@T.script
def pipeline(A: T.Buffer((16, 32), "float32"), C: T.Buffer((16, 32), "float32")):
    B = T.alloc_buffer((16, 32), "float32")
    for i, j in T.grid(16, 32):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 32):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def cube(A: T.Buffer((4, 6, 8), "float32"), C: T.Buffer((4, 6, 8), "float32")):
    B = T.alloc_buffer((4, 6, 8), "float32")
    for i, j, k in T.grid(4, 6, 8):
        with T.block("B"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            B[vi, vj, vk] = A[vi, vj, vk] * 2.0
    for i, j, k in T.grid(4, 6, 8):
        with T.block("C"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            C[vi, vj, vk] = B[vi, vj, vk] - 1.0


@T.script
def matmul(A: T.Buffer((32, 24), "float32"), B: T.Buffer((24, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 24):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def allocated(sch: Schedule, name: str) -> Buffer:
    for realize in TreeIndex(sch.func).blocks.values():
        for buffer in realize.block.alloc_buffers:
            if buffer.name == name:
                return buffer
    raise KeyError(name)


def strides(sch: Schedule, name: str) -> list[int]:
    return [stride.value for stride in allocated(sch, name).strides]


def allocations(func: tir.PrimFunc) -> dict[str, int]:
    """Buffer name -> flat extent of every allocation in the lowered program."""
    sizes: dict[str, int] = {}

    class Sizes(IRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            sizes[node.buffer.name] = node.buffer.shape[0].value
            self.generic_visit(node)

    Sizes().visit(lower(func)[func.name].body)
    return sizes


def test_storage_align_pads_the_row_stride(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline)
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=32, offset=1)
    assert strides(sch, "B") == [33, 1]
    check_schedule(sch, pipeline, golden, "schedule/storage_align_rows")
    assert allocations(sch.func) == {"B": 15 * 33 + 32}


def test_padded_buffers_are_sized_by_their_strides() -> None:
    # plan_allocations decides stack or heap from the bytes the strides span.
    padded = Buffer("B", (16, 32), "float32", strides=(33, 1))
    assert buffer_bytes(padded) == (15 * 33 + 32) * 4
    assert buffer_bytes(Buffer("B", (16, 32), "float32")) == 16 * 32 * 4


def test_storage_align_of_an_aligned_stride_keeps_it_explicitly() -> None:
    sch = Schedule(pipeline)
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=16, offset=0)
    assert strides(sch, "B") == [32, 1]


def test_storage_align_inner_axis_then_outer_axis(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(cube)
    block = sch.get_block("B")
    sch.storage_align(block, 0, axis=1, factor=4, offset=1)  # 8 -> 9; axis 0 follows: 6 * 9
    assert strides(sch, "B") == [54, 9, 1]
    sch.storage_align(block, 0, axis=0, factor=8, offset=0)  # 54 -> 56
    assert strides(sch, "B") == [56, 9, 1]
    sch.storage_align(block, 0, axis=1, factor=4, offset=1)  # already so: nothing changes
    assert strides(sch, "B") == [56, 9, 1]
    check_schedule(sch, cube, golden, "schedule/storage_align_two_axes")


def test_storage_align_of_a_packed_tile_shrinks_with_its_strides(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    _, j, _ = sch.get_loops(block)
    j_outer, _ = sch.split(j, [None, 8])
    i, _, j_inner, k = sch.get_loops(block)
    sch.reorder(j_outer, i, j_inner, k)
    pack = sch.cache_read(block, 2, "global")
    sch.compute_at(pack, j_outer)
    sch.storage_align(pack, 0, axis=0, factor=8, offset=1)
    assert strides(sch, "B_global") == [33, 1]
    check_schedule(sch, matmul, golden, "schedule/storage_align_packed")
    # Compaction shrinks to the 24 x 8 panel and pads its row again by the rule: 8 -> 9.
    assert allocations(sch.func) == {"B_global": 23 * 9 + 8}


def refused(sch: Schedule, original: tir.PrimFunc, message: str, block: str = "B", index: int = 0, **kwargs) -> None:  # type: ignore[no-untyped-def]
    arguments = {"axis": 0, "factor": 8, "offset": 0, **kwargs}
    with pytest.raises(ScheduleError, match=message):
        sch.storage_align(sch.get_block(block), index, **arguments)
    assert tir.structural_equal(sch.func, original)  # a refused primitive changes nothing


def test_storage_align_rejects_a_buffer_index_out_of_range() -> None:
    refused(Schedule(pipeline), pipeline, r"storage_align: block 'B': buffer index 1 is out of range", index=1)


def test_storage_align_rejects_a_parameter() -> None:
    refused(Schedule(pipeline), pipeline, r"C is a function parameter", block="C")


@pytest.mark.parametrize("axis", [2, -1])
def test_storage_align_rejects_an_axis_out_of_range(axis: int) -> None:
    refused(Schedule(pipeline), pipeline, rf"axis {axis} is out of range for the 2-D buffer B", axis=axis)


@pytest.mark.parametrize("factor", [0, -4])
def test_storage_align_rejects_a_factor_that_is_not_positive(factor: int) -> None:
    refused(Schedule(pipeline), pipeline, rf"factor must be a positive integer, got {factor}", factor=factor)


@pytest.mark.parametrize("offset", [8, -1])
def test_storage_align_rejects_an_offset_outside_the_factor(offset: int) -> None:
    refused(Schedule(pipeline), pipeline, rf"offset must be in \[0, factor\) = \[0, 8\), got {offset}", offset=offset)


def test_storage_align_rejects_outgrowing_an_earlier_padding() -> None:
    sch = Schedule(cube)
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=4)  # 48 -> 52
    before = sch.func
    with pytest.raises(ScheduleError, match=r"the stride 52 of axis 0, padded by an earlier storage_align"):
        sch.storage_align(sch.get_block("B"), 0, axis=1, factor=32, offset=1)  # 8 -> 33: 6 * 33 > 52
    assert sch.func is before
