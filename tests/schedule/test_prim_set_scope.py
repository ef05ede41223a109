"""set_scope: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_schedule

import tir
import tir.script as T
from tir.analysis.tree import TreeIndex
from tir.schedule import Schedule, ScheduleError


@T.script
def pipeline(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
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
def viewed(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for io in range(4):
        with T.block("C"):
            vo = T.remap("S", io)
            Bv = T.match_buffer(B[vo * 4 : vo * 4 + 4], (4,), "float32")
            for ii in range(4):
                C[vo * 4 + ii] = Bv[ii] + 1.0


@T.script
def view_writer(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("C"):
            vo = T.remap("S", io)
            Cv = T.match_buffer(C[vo * 4 : vo * 4 + 4], (4,), "float32")
            T.reads(A[vo * 4 : vo * 4 + 4])
            T.writes(Cv[0:4])
            for ii in range(4):
                Cv[ii] = A[vo * 4 + ii] + 1.0


def scopes(sch: Schedule) -> dict[str, str]:
    """Buffer name -> scope, for every buffer a block of the program touches."""
    found: dict[str, str] = {}
    for realize in TreeIndex(sch.func).blocks.values():
        block = realize.block
        for region in (*block.reads, *block.writes):
            found[region.buffer.name] = region.buffer.scope
        for buffer in block.alloc_buffers:
            found[buffer.name] = buffer.scope
        for match in block.match_buffers:
            found[match.source.buffer.name] = match.source.buffer.scope
            found[match.buffer.name] = match.buffer.scope
    return found


def test_set_scope_of_an_intermediate(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline)
    sch.set_scope(sch.get_block("B"), 0, "shared")
    assert scopes(sch)["B"] == "shared"
    # One buffer object everywhere: the allocation, the producer's write, the consumer's read.
    index = TreeIndex(sch.func)
    allocated = index.blocks["root"].block.alloc_buffers[0]
    assert index.blocks["B"].block.writes[0].buffer is allocated
    assert index.blocks["C"].block.reads[0].buffer is allocated
    check_schedule(sch, pipeline, golden, "schedule/set_scope_intermediate")


def test_set_scope_of_a_cache_and_a_match_buffer_source(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(viewed)
    cache = sch.cache_read(sch.get_block("B"), 0, "global")
    sch.set_scope(cache, 0, "local")
    sch.set_scope(sch.get_block("B"), 0, "shared")
    assert scopes(sch) == {"A": "global", "A_global": "local", "B": "shared", "Bv": "shared", "C": "global"}
    check_schedule(sch, viewed, golden, "schedule/set_scope_cache_and_view")


def test_set_scope_to_the_same_scope_changes_nothing() -> None:
    sch = Schedule(pipeline)
    sch.set_scope(sch.get_block("B"), 0, "global")
    assert sch.func is pipeline
    assert "set_scope" in sch.trace.as_python()


def refused(
    sch: Schedule, original: tir.PrimFunc, block: str, message: str, index: int = 0, scope: str = "shared"
) -> None:
    with pytest.raises(ScheduleError, match=message):
        sch.set_scope(sch.get_block(block), index, scope)
    assert tir.structural_equal(sch.func, original)  # a refused primitive changes nothing


def test_set_scope_rejects_a_buffer_index_out_of_range() -> None:
    refused(Schedule(pipeline), pipeline, "B", r"set_scope: block 'B': buffer index 1 is out of range", index=1)


def test_set_scope_rejects_an_unknown_scope() -> None:
    refused(Schedule(pipeline), pipeline, "B", r"unknown storage scope 'L2'", scope="L2")


def test_set_scope_rejects_a_parameter() -> None:
    refused(Schedule(pipeline), pipeline, "C", r"C is a function parameter; only buffers a block allocates can change")


def test_set_scope_rejects_a_buffer_no_block_allocates() -> None:
    refused(Schedule(view_writer), view_writer, "C", r"Cv is not allocated by a block")
