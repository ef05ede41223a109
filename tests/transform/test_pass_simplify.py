"""simplify: expressions simplified with loop ranges known, vectors folded, trivial statements gone."""

from __future__ import annotations

import pytest
from lowering_programs import PROGRAMS, assert_same_results, lower_before

import tir
from tir.ir import Broadcast, IntImm, Ramp, Var
from tir.transform import simplify
from tir.transform.simplify import fold_vectors

SOURCE = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(4):
        for j in range(1):
            B[T.ramp(i * 16 + j * 4, 1, 4) + T.broadcast(2, 4)] = A[T.ramp(i * 4, 1, 4) * T.broadcast(4, 4)]
        if i < 16:
            B[(i * 16 + 15) // 16] = A[i % 4 + 0]
        else:
            B[0] = 0.0
        for k in range(0):
            B[k] = 1.0
"""


def test_golden(golden) -> None:
    simplified = simplify(tir.parse(SOURCE))
    golden.check("transform/simplify", simplified.script())
    text = simplified.script()
    assert "for j" not in text and "for k" not in text and "else" not in text
    assert "B[i] = A[i]" in text


def test_keeps_identity_when_nothing_changes() -> None:
    func = simplify(tir.parse(SOURCE))
    assert simplify(func) is func


def test_fold_vectors() -> None:
    i = Var("i")
    folded = fold_vectors(Ramp(i, IntImm(1), 4) * Broadcast(IntImm(3), 4) + Broadcast(IntImm(5), 4))
    assert isinstance(folded, Ramp) and folded.lanes == 4
    assert str(folded) == "T.ramp(i * 3 + 5, 3, 4)"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    assert_same_results(func, simplify(lower_before(func, "simplify")), make_args)
