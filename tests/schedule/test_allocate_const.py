"""Constant buffers (``T.allocate_const``): parsed, printed, run by the interpreter and LLVM, and
kept intact by schedule primitives (TVM's cases: cache_read / cache_write beside constants,
compute_at / reverse_compute_at / compute_inline of a block reading one). A step that would write
or replace a constant is refused: its values would be lost."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_testing import check_numerics, check_schedule

import tir
import tir.script as T
from tir.analysis import verify
from tir.interp import interpret
from tir.schedule import Schedule, ScheduleError
from tir.script import ScriptError


@T.script
def add_table(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.allocate_const([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "float32", [8])
    for i in range(8):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + B[vi]


@T.script
def two_tables(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float16")):
    B = T.alloc_buffer((16, 16), "float32")
    scale_table = T.allocate_const([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "float32", [8])
    scale = T.decl_buffer([8], "float32", data=scale_table)  # TVM's spelling: another name for it
    shift_table = T.allocate_const([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "float32", [8])
    shift = T.Buffer([8], "float32", data=shift_table)
    for i, j in T.grid(16, 16):
        for x in range(8):
            with T.block("B"):
                vi, vj, vx = T.remap("SSR", i, j, x)
                with T.init():
                    B[vi, vj] = 0.0
                B[vi, vj] = B[vi, vj] + A[vi, vj] * scale[vx] + shift[vx]
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = T.cast(B[vi, vj] + 1.0, "float16")


@T.script
def offset_rows(A: T.Buffer((4, 256), "float32"), C: T.Buffer((4, 256), "float32")):
    B = T.alloc_buffer((4,), "float32")
    offset_ptr = T.allocate_const([1.0, 2.0, 3.0, 4.0], dtype="float32", extents=[4])
    offset = T.decl_buffer([4], data=offset_ptr)
    for i in range(4):
        with T.block("compute_B"):
            vi = T.remap("S", i)
            B[vi] = 10.0 * T.cast(vi, "float32") + offset[vi]
    for i, j in T.grid(4, 256):
        with T.block("compute_C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi] + A[vi, vj] + 100.0 * T.cast(vj, "float32")


@T.script
def integer_table(A: T.Buffer((2, 3), "int32"), C: T.Buffer((2, 3), "int64")):
    LUT = T.allocate_const([[-128, 0, 127], [1, -1, 5]], "int8", [2, 3])
    BIG = T.allocate_const([0, 255, 200], "uint8", [3])
    WIDE = T.allocate_const([-9223372036854775808, 9223372036854775807, 3], "int64", [3])
    for i, j in T.grid(2, 3):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = (
                T.cast(A[vi, vj] * T.cast(LUT[vi, vj], "int32"), "int64")
                + T.cast(BIG[vj], "int64")
                + WIDE[vj] % T.int64(1000)
            )


def test_a_constant_prints_parses_back_and_runs_everywhere() -> None:
    text = add_table.script()
    assert 'B = T.allocate_const([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "float32", [8])' in text
    tir.assert_structural_equal(tir.parse(text), add_table)
    assert verify(add_table) == []
    a = np.arange(8, dtype="float32")
    expected = a + np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], dtype="float32")
    for run in ("interp", "llvm"):
        c = np.zeros(8, "float32")
        if run == "interp":
            interpret(add_table, a, c)
        else:
            tir.build(add_table, target="llvm")(a, c)
        np.testing.assert_array_equal(c, expected)
    assert "allocate_const" in tir.transform.lower(add_table).script()  # the lowered program keeps the values


def test_integer_constants_keep_their_exact_values() -> None:
    a = np.arange(6, dtype="int32").reshape(2, 3) - 2
    lut = np.array([[-128, 0, 127], [1, -1, 5]], dtype="int8")
    big = np.array([0, 255, 200], dtype="uint8")
    wide = np.array([-(2**63), 2**63 - 1, 3], dtype="int64")
    expected = (a * lut.astype("int32")).astype("int64") + big.astype("int64") + np.mod(wide, 1000)  # % is floor modulo
    for run in ("interp", "llvm"):
        c = np.zeros((2, 3), "int64")
        if run == "interp":
            interpret(integer_table, a, c)
        else:
            tir.build(integer_table, target="llvm")(a, c)
        np.testing.assert_array_equal(c, expected)
    tir.assert_structural_equal(tir.parse(integer_table.script()), integer_table)


def test_cache_read_beside_a_constant(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(add_table, debug=True)
    block = sch.get_block("C")
    sch.cache_read(block, 1, "global")  # the constant copied like any buffer read
    sch.cache_read(block, 0, "global")
    check_schedule(sch, add_table, golden, "schedule/allocate_const_cache_read")


def test_cache_write_in_a_function_with_constants(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(two_tables, debug=True)
    sch.cache_read(sch.get_block("B"), 1, "global")  # reads B (the sum), A, scale_table, shift_table
    sch.cache_write(sch.get_block("C"), 0, "global")
    check_schedule(sch, two_tables, golden, "schedule/allocate_const_cache_write", rtol=1e-3)


@pytest.mark.parametrize("step", ["compute_at", "reverse_compute_at", "compute_inline"])
def test_moving_and_inlining_a_block_that_reads_a_constant(golden, step: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(offset_rows, debug=True)
    if step == "compute_at":
        sch.compute_at(sch.get_block("compute_B"), sch.get_loops(sch.get_block("compute_C"))[0])
    elif step == "reverse_compute_at":
        sch.reverse_compute_at(sch.get_block("compute_C"), sch.get_loops(sch.get_block("compute_B"))[0])
    else:
        sch.compute_inline(sch.get_block("compute_B"))
    check_schedule(sch, offset_rows, golden, f"schedule/allocate_const_{step}")


@pytest.mark.parametrize("debug", [True, False])
def test_a_step_that_would_replace_a_constant_is_refused(debug: bool) -> None:
    sch = Schedule(add_table, debug=debug)
    with pytest.raises(ScheduleError, match=r"B.*constant \(T\.allocate_const\)"):
        sch.transform_layout(sch.get_block("C"), ("read", 1), lambda i: (i // 4, i % 4))
    tir.assert_structural_equal(sch.func, add_table)  # a refused step changes nothing
    check_numerics(add_table, sch.func)


def test_a_block_writing_a_constant_fails_validation() -> None:
    @T.script
    def writes_table(A: T.Buffer((4,), "float32")):
        B = T.allocate_const([1.0, 2.0, 3.0, 4.0], "float32", [4])
        for i in range(4):
            with T.block("W"):
                vi = T.remap("S", i)
                B[vi] = A[vi]

    problems = verify(writes_table)
    assert [p.rule for p in problems] == ["well-formed"]
    assert "writes B, a constant (T.allocate_const)" in problems[0].message


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('T.allocate_const([1.0, 2.0], "float32", [3])', "2 values for a buffer of shape (3,) (3 elements)"),
        ('T.allocate_const([1.5], "int32", [1])', "1.5 is not an integer, as a int32 value must be"),
        ('T.allocate_const([300], "int8", [1])', "300 is outside the range of int8 [-128, 127]"),
        ('T.allocate_const([1e39], "float32", [1])', "1e+39 is not a finite float32 value"),
        ('T.allocate_const([1], "bool", [1])', "a constant buffer of dtype bool is not supported"),
        ('T.allocate_const([x], "float32", [1])', "the data of a constant must be literal numbers"),
    ],
)
def test_bad_constants_are_reported_at_their_data(source: str, message: str) -> None:
    text = (
        "@T.script\n"
        'def f(A: T.Buffer((1,), "float32")):\n'
        f"    B = {source}\n"
        "    for i in range(1):\n"
        '        with T.block("A"):\n'
        '            vi = T.remap("S", i)\n'
        "            A[vi] = 0.0\n"
    )
    with pytest.raises(ScriptError) as caught:
        tir.parse(text)
    assert message in caught.value.message
    assert caught.value.lineno == 3


def test_a_view_of_a_constant_must_match_it() -> None:
    text = (
        "@T.script\n"
        'def f(A: T.Buffer((4,), "float32")):\n'
        '    table = T.allocate_const([1.0, 2.0, 3.0, 4.0], "float32", [4])\n'
        '    view = T.decl_buffer([2, 2], "float32", data=table)\n'
        "    for i in range(4):\n"
        '        with T.block("A"):\n'
        '            vi = T.remap("S", i)\n'
        "            A[vi] = table[vi]\n"
    )
    with pytest.raises(ScriptError, match="must have its shape and dtype"):
        tir.parse(text)


def test_a_constant_inside_a_block_is_refused() -> None:
    text = (
        "@T.script\n"
        'def f(A: T.Buffer((4,), "float32")):\n'
        "    for i in range(4):\n"
        '        with T.block("A"):\n'
        '            vi = T.remap("S", i)\n'
        '            table = T.allocate_const([1.0, 2.0, 3.0, 4.0], "float32", [4])\n'
        "            A[vi] = table[vi]\n"
    )
    with pytest.raises(ScriptError, match="belongs at the function level"):
        tir.parse(text)
