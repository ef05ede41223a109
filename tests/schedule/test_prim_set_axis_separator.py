"""set_axis_separator (TVM's): buffers carry axis separators; TVM's cases in all three argument
styles (set_axis_separator, transform_layout by name and by Buffer with IndexMap.AXIS_SEPARATOR),
golden, numerics (the backends flatten across separators), replay, refusals, round trip."""

from __future__ import annotations

from typing import Any

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import Buffer
from tir.schedule import Schedule, ScheduleError
from tir.schedule.index_map import IndexMap
from tir.script.diagnostics import ScriptError


@T.script
def element_wise(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def element_wise_set_axis_separator(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32", axis_separators=[1])
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def element_wise_set_axis_separator_input_buffer(
    A: T.Buffer((128, 128), "float32", axis_separators=(1,)), C: T.Buffer((128, 128), "float32")
):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def element_wise_subregion_match(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B_subregion0 = T.match_buffer(B[vi, vj], (), offset_factor=1)
            B_subregion0[()] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            B_subregion1 = T.match_buffer(B[vi, vj], (), offset_factor=1)
            C[vi, vj] = B_subregion1[()] + 1.0


@T.script
def element_wise_subregion_match_set_axis_separator(
    A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")
):
    B = T.alloc_buffer((128, 128), "float32", axis_separators=[1])
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B_subregion0 = T.match_buffer(B[vi, vj], (), offset_factor=1, axis_separators=[0])
            B_subregion0[()] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            B_subregion1 = T.match_buffer(B[vi, vj], (), offset_factor=1, axis_separators=[0])
            C[vi, vj] = B_subregion1[()] + 1.0


STYLES = ["set_axis_separator", "transform_layout_named", "transform_layout_buffer_object"]


def apply_style(sch: Schedule, style: str, kind: str, name: str) -> None:
    """Separator [1] on the buffer ``name`` of block B, the way ``style`` says (TVM's three)."""
    block = sch.get_block("B")
    if style == "set_axis_separator":
        sch.set_axis_separator(block, (kind, 0), [1])
        return
    buffer: Any = name
    if style == "transform_layout_buffer_object":
        regions = sch.get(block).reads if kind == "read" else sch.get(block).writes  # type: ignore[union-attr]
        buffer = regions[0].buffer
        assert isinstance(buffer, Buffer) and buffer.name == name
    sch.transform_layout(block, buffer, lambda i, j: [i, IndexMap.AXIS_SEPARATOR, j])


@pytest.mark.parametrize("style", STYLES)
def test_set_axis_separator(style: str, golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(element_wise, debug=True)
    apply_style(sch, style, "write", "B")
    tir.assert_structural_equal(sch.func, element_wise_set_axis_separator)
    if style == "set_axis_separator":
        check_schedule(sch, element_wise, golden, "schedule/set_axis_separator")
    else:
        check_numerics(element_wise, sch.func)
        check_replay(sch, element_wise)


@pytest.mark.parametrize("style", STYLES)
def test_set_axis_separator_input_buffer(style: str, golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(element_wise, debug=True)
    apply_style(sch, style, "read", "A")
    tir.assert_structural_equal(sch.func, element_wise_set_axis_separator_input_buffer)
    if style == "set_axis_separator":
        check_schedule(sch, element_wise, golden, "schedule/set_axis_separator_input_buffer")
    else:
        check_numerics(element_wise, sch.func)
        check_replay(sch, element_wise)


@pytest.mark.parametrize("style", STYLES)
def test_set_axis_separator_subregion(style: str, golden) -> None:  # type: ignore[no-untyped-def]
    # A match_buffer view follows its buffer; a 0-D view of a 2-D buffer gets its one
    # separator at 0 (as many physical dimensions as the buffer, TVM's rule).
    sch = Schedule(element_wise_subregion_match, debug=True)
    apply_style(sch, style, "write", "B")
    tir.assert_structural_equal(sch.func, element_wise_subregion_match_set_axis_separator)
    if style == "set_axis_separator":
        check_schedule(sch, element_wise_subregion_match, golden, "schedule/set_axis_separator_subregion")
    else:
        check_numerics(element_wise_subregion_match, sch.func)
        check_replay(sch, element_wise_subregion_match)


def test_set_scope_fail_on_index_out_of_bound() -> None:
    sch = Schedule(element_wise, debug=True)
    with pytest.raises(ScheduleError, match="write buffer index 1 is out of range"):
        sch.set_axis_separator(sch.get_block("B"), ("write", 1), [1])
    with pytest.raises(ScheduleError, match="read buffer index -1 is out of range"):
        sch.set_axis_separator(sch.get_block("B"), ("read", -1), [1])
    assert sch.func is element_wise


@T.script
def indexed_lookup():
    A = T.alloc_buffer((4, 4), "int32")
    B = T.alloc_buffer((1, 1), "int32")
    for j in range(4):
        with T.block("block"):
            A[B[0, 0], j] = 0


@T.script
def indexed_lookup_expected():
    A = T.alloc_buffer((4, 4), "int32")
    B = T.alloc_buffer((1, 1), "int32", axis_separators=[1])
    for j in range(4):
        with T.block("block"):
            A[B[0, 0], j] = 0


def test_indexed_lookup() -> None:
    # A buffer read only inside another's index, named by a string; the program reads B
    # before anything writes it (TVM's case as written), so it is not run, only compared.
    sch = Schedule(indexed_lookup)
    sch.set_axis_separator("block", "B", [1])
    tir.assert_structural_equal(sch.func, indexed_lookup_expected)
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    check_replay(sch, indexed_lookup)


def test_int_buffer_index_takes_the_kind_from_buffer_index_type() -> None:
    sch = Schedule(element_wise)
    sch.set_axis_separator(sch.get_block("B"), 0, [1], buffer_index_type="read")
    tir.assert_structural_equal(sch.func, element_wise_set_axis_separator_input_buffer)
    sch = Schedule(element_wise)
    sch.set_axis_separator(sch.get_block("B"), 0, [1])
    tir.assert_structural_equal(sch.func, element_wise_set_axis_separator)
    # And back to none.
    sch.set_axis_separator(sch.get_block("B"), 0, [])
    tir.assert_structural_equal(sch.func, element_wise)


def test_refuses_separators_out_of_range_or_out_of_order() -> None:
    sch = Schedule(element_wise)
    with pytest.raises(ScheduleError, match=r"axis separators \[3\] must lie in \[0, 2\]"):
        sch.set_axis_separator(sch.get_block("B"), ("write", 0), [3])
    with pytest.raises(ScheduleError, match="non-decreasing"):
        sch.set_axis_separator(sch.get_block("B"), ("write", 0), [2, 1])
    with pytest.raises(ScheduleError, match="must be a list of integers"):
        sch.set_axis_separator(sch.get_block("B"), ("write", 0), 1)  # type: ignore[arg-type]
    assert sch.func is element_wise and "set_axis_separator" not in sch.trace.as_python()


def test_refuses_a_match_buffer_view() -> None:
    view_writer = tir.parse(
        """
@T.script
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("C"):
            vo = T.remap("S", io)
            Cv = T.match_buffer(C[vo * 4 : vo * 4 + 4], (4,), "float32")
            T.reads(A[vo * 4 : vo * 4 + 4])
            T.writes(Cv[0:4])
            for ii in range(4):
                Cv[ii] = A[vo * 4 + ii] + 1.0
"""
    )
    sch = Schedule(view_writer)
    with pytest.raises(ScheduleError, match="Cv is a match_buffer view of C; set the axis separators of C"):
        sch.set_axis_separator(sch.get_block("C"), ("write", 0), [1])


def test_transform_layout_keeps_or_drops_separators() -> None:
    sch = Schedule(element_wise, debug=True)
    block = sch.get_block("B")
    sch.transform_layout(block, "B", lambda i, j: [i // 16, IndexMap.AXIS_SEPARATOR, j, i % 16])
    buffer = sch.get(block).writes[0].buffer  # type: ignore[union-attr]
    assert buffer.const_shape() == (8, 128, 16) and buffer.axis_separators == (1,)
    sch.transform_layout(block, "B", lambda a, b, c: (a, c, b))  # same number of dimensions: kept
    assert sch.get(block).writes[0].buffer.axis_separators == (1,)  # type: ignore[union-attr]
    sch.transform_layout(block, "B", lambda a, b, c: (a * 16 + b, c))  # 2-D again: dropped
    assert sch.get(block).writes[0].buffer.axis_separators == ()  # type: ignore[union-attr]
    check_numerics(element_wise, sch.func)
    check_replay(sch, element_wise)


def test_script_round_trip_and_parse_errors() -> None:
    text = element_wise_set_axis_separator_input_buffer.script()
    assert 'T.Buffer((128, 128), "float32", axis_separators=(1,))' in text
    assert "axis_separators=[0]" in element_wise_subregion_match_set_axis_separator.script()
    for func in (
        element_wise_set_axis_separator,
        element_wise_set_axis_separator_input_buffer,
        element_wise_subregion_match_set_axis_separator,
    ):
        tir.assert_structural_equal(tir.parse(func.script()), func)
    # Separators take part in equality and hashing.
    assert not tir.structural_equal(element_wise, element_wise_set_axis_separator)
    assert tir.structural_hash(element_wise) != tir.structural_hash(element_wise_set_axis_separator)
    bad = 'B = T.alloc_buffer((4, 4), "float32", axis_separators=[3])'
    with pytest.raises(ScriptError, match=r"axis separators \[3\] must lie in \[0, 2\]"):
        tir.parse(f"@T.script\ndef f():\n    {bad}\n")
