"""Inputs at the edges: huge expressions and negative sizes get clear errors (issue 17 F)."""

from __future__ import annotations

import dataclasses

import pytest

import tir
from tir.ir import IntImm
from tir.ir.functor import IRMutator
from tir.script.diagnostics import ScriptError

HEADER = """
import tir.script as T
@T.script
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
"""


def test_an_expression_of_thousands_of_terms_is_a_script_error_not_a_recursion_error() -> None:
    terms = " + ".join(["A[0]"] * 3000)
    with pytest.raises(ScriptError, match="nests too deeply") as info:
        tir.parse(HEADER + f"            B[vi] = {terms}\n")
    assert "<string>:8:" in str(info.value)


def test_a_long_but_parsable_expression_still_parses() -> None:
    terms = " + ".join(["A[0]"] * 200)
    func = tir.parse(HEADER + f"            B[vi] = {terms}\n")
    assert isinstance(func, tir.PrimFunc)


@pytest.mark.parametrize(
    "text",
    [
        'def f(A: T.Buffer((4, -3), "float32")):\n    pass\n',
        'def f(A: T.Buffer((4,), "float32")):\n    C = T.alloc_buffer((-1,), "float32")\n',
    ],
)
def test_negative_buffer_dimensions_are_refused_by_the_parser(text: str) -> None:
    with pytest.raises(ScriptError, match="must not be negative"):
        tir.parse("import tir.script as T\n@T.script\n" + text)


def test_negative_buffer_dimensions_are_reported_by_the_validator() -> None:
    func = tir.parse(HEADER + "            B[vi] = A[vi]\n")
    a = func.params[0]
    bad = dataclasses.replace(a, shape=(IntImm(-3),))

    class Swap(IRMutator):
        def visit_Buffer(self, buffer):  # noqa: ANN001, ANN202
            return bad if buffer is a else buffer

    broken = func.replace(params=(bad, func.params[1]), body=Swap().visit(func.body))
    messages = [v.message for v in tir.analysis.verify(broken)]
    assert "buffer A has a negative dimension (-3)" in messages


def test_the_interpreter_runs_loop_nests_deeper_than_pythons_indentation_limit() -> None:
    import numpy as np

    func = tir.parse(HEADER + "            B[vi] = A[vi] * 2.0\n")
    sch = tir.Schedule(func)
    (loop,) = sch.get_loops(sch.get_block("B"))
    sch.split(loop, [None] + [1] * 130)  # 131 nested loops
    a = np.arange(4, dtype=np.float32)
    b = np.zeros(4, np.float32)
    tir.interpret(sch.func, a, b)
    np.testing.assert_array_equal(b, a * 2)
    b[:] = 0
    tir.build(sch.func, "llvm")(a, b)
    np.testing.assert_array_equal(b, a * 2)
