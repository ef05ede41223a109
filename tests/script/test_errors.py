"""Malformed scripts raise ``ScriptError`` at the offending sub-expression, with a hint.

Every decorated function below is broken on the line that carries an ``# E:<tag>`` comment;
``location(tag, snippet)`` finds that line in this file and the column of ``snippet`` in it,
so the expected ``file:line:col`` are the true ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tir
import tir.script as T
from tir.script import ScriptError

THIS_FILE = Path(__file__)
SOURCE_LINES = THIS_FILE.read_text().splitlines()


def location(tag: str, snippet: str) -> tuple[int, int]:
    """(line, 1-based column) of ``snippet`` on the one line of this file tagged ``# E:<tag>``."""
    hits = [n for n, line in enumerate(SOURCE_LINES, 1) if line.rstrip().endswith(f"# E:{tag}")]
    assert len(hits) == 1, f"tag {tag} found {len(hits)} times"
    line = SOURCE_LINES[hits[0] - 1]
    return hits[0], line.index(snippet) + 1


def check(err: ScriptError, tag: str, snippet: str, message: str, expected: str) -> None:
    line, col = location(tag, snippet)
    assert (err.lineno, err.offset) == (line, col)
    assert err.filename == str(THIS_FILE)
    assert err.message == message
    text = str(err).splitlines()
    assert text[0] == f"{THIS_FILE}:{line}:{col}: error: {message}"
    assert text[1] == SOURCE_LINES[line - 1]
    assert text[2] == " " * (col - 1) + "^" * len(snippet)  # the caret underlines just the snippet
    assert text[3] == f"expected {expected}" if not expected.startswith("expected") else expected


def test_unknown_name() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("b"):
                    vi = T.spatial_axis(4, i)
                    A[vi] = foo(A[vi])  # noqa: F821  # E:unknown

    check(
        info.value, "unknown", "foo", "unknown name 'foo'",
        "a name defined in the function, its module, or tir.script",
    )  # fmt: skip


def test_wrong_arity_of_a_math_call() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = T.exp(A[i], A[i])  # E:arity

    check(info.value, "arity", "T.exp(A[i], A[i])", "T.exp takes 1 argument but 2 were given", "T.exp(x)")


def test_grid_without_extents() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in T.grid():  # E:grid
                A[i] = 0.0

    check(
        info.value, "grid", "T.grid()", "T.grid takes at least 1 argument but 0 were given", "for i, j in T.grid(n, m):"
    )


def test_loop_variable_used_outside_its_loop() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = 0.0
            A[i] = 1.0  # E:outside

    check(
        info.value, "outside", "i", "loop variable 'i' is used outside its loop",
        "'i' only inside the body of its for loop",
    )  # fmt: skip


def test_wrong_number_of_indices() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4, 4), "float32")):
            for i in range(4):
                A[i, i, 0] = 0.0  # E:ndim

    check(
        info.value, "ndim", "A[i, i, 0]", "buffer 'A' has 2 dimensions but is indexed with 3 indices",
        "2 indices, one per dimension",
    )  # fmt: skip


def test_iterator_defined_twice() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("b"):
                    vi = T.spatial_axis(4, i)
                    vi = T.spatial_axis(4, i)  # E:twice
                    A[vi] = 0.0

    check(info.value, "twice", "vi", "block iterator 'vi' is defined twice in block 'b'", "one definition per iterator")


def test_remap_with_a_mismatched_count() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4, 4), "float32")):
            for i, j, k in T.grid(4, 4, 4):
                with T.block("b"):
                    vi, vj = T.remap("SSR", i, j, k)  # E:remapcount
                    A[vi, vj] = 0.0

    check(
        info.value, "remapcount", "vi, vj", "T.remap binds 3 iterators but 2 names are assigned",
        'vi, vj, vk = T.remap("SSR", i, j, k)',
    )  # fmt: skip


def test_block_without_a_name() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block():  # E:noname
                    A[i] = 0.0

    check(info.value, "noname", "T.block()", "a block needs a name", 'with T.block("name"):')


def test_float_loop_extent() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for _i in range(2.5):  # E:floatext
                A[0] = 0.0

    check(info.value, "floatext", "2.5", "loop extent must be an integer, got 2.5", "an integer loop extent")


def test_float_expression_as_loop_extent() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for _i in T.serial(A[0] * 2.0):  # E:floatexpr
                A[0] = 0.0

    check(
        info.value, "floatexpr", "A[0] * 2.0", "loop extent must be an integer expression, got float32",
        'an integer loop extent; use T.cast(x, "int32")',
    )  # fmt: skip


def test_store_of_a_mismatched_dtype() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int32")):
            for i in range(4):
                A[i] = B[i] + 1  # E:store

    check(
        info.value, "store", "B[i] + 1", "cannot store an int32 value in the float32 buffer 'A'",
        'a float32 value; convert with T.cast(value, "float32")',
    )  # fmt: skip


def test_float_literal_into_an_int_buffer() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(B: T.Buffer((4,), "int32")):
            for i in range(4):
                B[i] = 2.5  # E:storelit

    check(
        info.value, "storelit", "2.5", "the float literal 2.5 cannot be stored in the int32 buffer 'B'",
        'an integer value, or T.cast(x, "int32")',
    )  # fmt: skip


def test_remap_kind_with_a_bad_letter() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4, 4), "float32")):
            for i, j in T.grid(4, 4):
                with T.block("b"):
                    vi, vj = T.remap("SX", i, j)  # E:letter
                    A[vi, vj] = 0.0

    check(
        info.value, "letter", "X", "T.remap kind 'X' is not one of S, R, O",
        'one letter per iterator: S (spatial), R (reduce), O (opaque), e.g. "SSR"',
    )  # fmt: skip


def test_remap_of_something_that_is_not_a_loop_variable() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4, 4), "float32")):
            for i, j in T.grid(4, 4):
                with T.block("b"):
                    vi, vj = T.remap("SS", i, j + 1)  # E:notloop
                    A[vi, vj] = 0.0

    check(
        info.value, "notloop", "j + 1",
        "T.remap binds iterators to loop variables; this expression is not the variable of an enclosing loop",
        "a variable of an enclosing for loop; use T.spatial_axis(extent, expr) for other bindings",
    )  # fmt: skip


def test_unknown_dtype() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "flaot32")):  # E:dtype
            A[0] = 0.0

    check(
        info.value, "dtype", '"flaot32"', "unknown dtype 'flaot32'",
        "one of bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32, float64 "
        "(optionally with xLANES, e.g. float32x8)",
    )  # fmt: skip


def test_true_division_of_integers() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "int32")):
            for i in range(4):
                A[i] = A[i] / 2  # E:div

    check(
        info.value, "div", "A[i] / 2", "'/' on integers (int32)",
        "`//` for floor division (or T.truncdiv(a, b) for C division)",
    )  # fmt: skip


def test_slice_where_a_value_is_expected() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            A[0] = A[0:2]  # E:slice

    check(
        info.value, "slice", "0:2", "a slice where a value is expected",
        "one index per dimension; slices only appear in T.reads, T.writes and T.match_buffer regions",
    )  # fmt: skip


def test_while_loop() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            while A[0] < 1.0:  # E:while
                A[0] = 0.0

    check(
        info.value, "while", "while", "while loops are not supported in the script dialect",
        "for i in range(n): with an extent known before the loop",
    )  # fmt: skip


def test_lambda() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            A[0] = (lambda v: v)(1.0)  # E:lambda

    check(
        info.value, "lambda", "lambda v: v", "lambda expressions are not supported in the script dialect",
        "an expression over numbers, buffers and T.* calls",
    )  # fmt: skip


def test_operands_of_different_dtypes() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "int64"), n: T.int32):
            A[0] = T.cast(B[0] + n, "float32")  # E:mixed

    check(
        info.value, "mixed", "B[0] + n", "operands of '+' have different dtypes: int64 and int32",
        'operands of one dtype; convert one side with T.cast(x, "int64")',
    )  # fmt: skip


def test_alloc_buffer_inside_a_loop() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                S = T.alloc_buffer((4,), "float32")  # E:alloc
                S[i] = A[i]

    check(
        info.value, "alloc", 'T.alloc_buffer((4,), "float32")',
        "T.alloc_buffer must be at the top level of the function, not inside a loop or branch",
        "T.alloc_buffer directly in the block's body",
    )  # fmt: skip


def test_loop_marker_used_as_a_value() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            A[0] = T.grid(4)  # E:marker

    check(
        info.value, "marker", "T.grid(4)", "T.grid(...) is only valid as the iterable of a for loop",
        "for i in T.grid(...):",
    )  # fmt: skip


def test_unknown_dialect_name() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            A[0] = T.expp(A[0])  # E:attr

    check(
        info.value, "attr", "T.expp", "tir.script has no attribute 'expp'",
        "a name of the dialect, e.g. T.grid, T.block, T.exp",
    )  # fmt: skip


def test_return_statement() -> None:
    with pytest.raises(ScriptError) as info:

        @T.script
        def f(A: T.Buffer((4,), "float32")):
            return A[0]  # E:return

    check(
        info.value, "return", "return", "return statements are not supported in the script dialect",
        "writing results into an output buffer",
    )  # fmt: skip


# ---------------------------------------------------------------------- tir.parse of text


PARSE_CASES = [
    (
        'def f(A: T.Buffer((4,), "float32")):\n    A[0] = B[0]\n',
        "<string>:2:12: error: unknown name 'B'\n"
        "    A[0] = B[0]\n"
        "           ^\n"
        "expected a name defined in the function, its module, or tir.script",
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n    A[0] = T.max(A[0], 1)\n    A[1] = T.sqrt(A[0], 2.0)\n',
        "<string>:3:12: error: T.sqrt takes 1 argument but 2 were given\n"
        "    A[1] = T.sqrt(A[0], 2.0)\n"
        "           ^^^^^^^^^^^^^^^^^\n"
        "expected T.sqrt(x)",
    ),
    (
        'def f(A: T.Buffer((4,), "int8")):\n    A[0] = A[0] + 1000\n',
        "<string>:2:19: error: the constant 1000 does not fit in int8\n"
        "    A[0] = A[0] + 1000\n"
        "                  ^^^^\n"
        "expected a value in [-128, 127]",
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n'
        "    for i in range(4):\n"
        '        with T.block("b"):\n'
        "            T.reads(A[i])\n"
        "            T.reads(A[0])\n"
        "            A[i] = 0.0\n",
        "<string>:5:13: error: T.reads is given twice in block 'b'\n"
        "            T.reads(A[0])\n"
        "            ^^^^^^^^^^^^^\n"
        "expected one T.reads(...) listing every region",
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n    A[0] = T.exp(1.0) if False else T.float32("oops")\n',
        "<string>:2:47: error: T.float32 cannot be made from the string 'oops'\n"
        '    A[0] = T.exp(1.0) if False else T.float32("oops")\n'
        "                                              ^^^^^^\n"
        'expected a number, or "inf" / "-inf" / "nan" for float types',
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n    for i in T.thread_binding(4, thread="threadIdx.w"):\n        A[i] = 0.0\n',
        "<string>:2:41: error: unknown thread tag 'threadIdx.w'\n"
        '    for i in T.thread_binding(4, thread="threadIdx.w"):\n'
        "                                        ^^^^^^^^^^^^^\n"
        "expected one of blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z, "
        "vthread.x, vthread.y, vthread.z",
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n    A[0] = [v for v in range(3)]\n',
        "<string>:2:12: error: list comprehensions are not supported in the script dialect\n"
        "    A[0] = [v for v in range(3)]\n"
        "           ^^^^^^^^^^^^^^^^^^^^^\n"
        "expected an expression over numbers, buffers and T.* calls",
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n    if A[0]:\n        A[0] = 0.0\n',
        "<string>:2:8: error: an if condition must be bool, got float32\n"
        "    if A[0]:\n"
        "       ^^^^\n"
        "expected a comparison such as i < n",
    ),
    (
        'def f(A: T.Buffer((4,), "float32")):\n    A[0] = T.exp(T.int32(3))\n',
        "<string>:2:18: error: T.exp needs a float argument, got int32\n"
        "    A[0] = T.exp(T.int32(3))\n"
        "                 ^^^^^^^^^^\n"
        'expected T.exp(T.cast(x, "float32"))',
    ),
    (
        'def f(A: T.Buffer((4,), "float32")\n    A[0] = 0.0\n',
        "<string>:1:6: error: '(' was never closed\n"
        'def f(A: T.Buffer((4,), "float32")\n'
        "     ^\n"
        "expected valid Python syntax",
    ),
]


@pytest.mark.parametrize(("text", "message"), PARSE_CASES)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ScriptError) as info:
        tir.parse(text)
    assert str(info.value) == message
    assert info.value.filename == "<string>"


def test_script_error_is_a_syntax_error() -> None:
    assert issubclass(ScriptError, SyntaxError)
    with pytest.raises(SyntaxError) as info:
        tir.parse('def f(A: T.Buffer((4,), "float32")):\n    A[0] = foo\n')
    err = info.value
    assert (err.lineno, err.offset, err.end_lineno, err.end_offset) == (2, 12, 2, 15)
    assert err.text == "    A[0] = foo"
