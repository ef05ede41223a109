"""An ``Analyzer`` reuses its simplifier's memo tables between queries (until the next
``bind``), and ``RangeRelaxer`` shares one between ranges: the answers must be exactly those of
a fresh analyzer per query."""

from __future__ import annotations

from arith_expr_gen import domains, int_exprs
from hypothesis import given, settings
from hypothesis import strategies as st

import tir
from tir.arith import Analyzer, RangeRelaxer, relax_range
from tir.ir import IntImm, Let, Range, Var

X, Y, Z = Var("x", "int32"), Var("y", "int32"), Var("z", "int32")


def _range(lo: int, extent: int) -> Range:
    return Range(IntImm(lo, "int32"), IntImm(extent, "int32"))


def _fresh(bounds: list[tuple[int, int]]) -> Analyzer:
    analyzer = Analyzer()
    for var, (lo, extent) in zip((X, Y), bounds):
        analyzer.bind(var, _range(lo, extent))
    return analyzer


@settings(max_examples=100)
@given(st.lists(int_exprs([X, Y, Z], max_leaves=8), min_size=2, max_size=5), domains(2))
def test_reused_analyzer_answers_like_fresh_ones(exprs: list, bounds: list[tuple[int, int]]) -> None:
    shared = _fresh(bounds)
    for expr in exprs + exprs:  # the second round hits the memo tables
        tir.assert_structural_equal(shared.simplify(expr), _fresh(bounds).simplify(expr))
        assert shared.const_int_bound(expr) == _fresh(bounds).const_int_bound(expr)
    for a, b in zip(exprs, exprs[1:]):
        assert shared.can_prove_equal(a, b) == _fresh(bounds).can_prove_equal(a, b)


def test_bind_starts_afresh() -> None:
    analyzer = Analyzer()
    analyzer.bind(X, _range(0, 8))
    assert tir.structural_equal(analyzer.simplify(X // 8), IntImm(0, "int32"))
    analyzer.bind(X, _range(0, 16))
    assert tir.structural_equal(analyzer.simplify(X // 8), X // 8)


def test_a_let_scoped_result_is_not_reused_by_another_let() -> None:
    """Two lets bind the same variable differently around one shared body node."""
    body = Z // 8
    analyzer = Analyzer()
    analyzer.bind(Y, _range(0, 4))
    first = analyzer.simplify(Let(Z, Y * 2, body))  # z in [0, 6]: the body folds to 0
    second = analyzer.simplify(Let(Z, Y * 4 + 8, body))  # z in [8, 20]: it does not
    assert tir.structural_equal(first.body, IntImm(0, "int32"))
    assert tir.structural_equal(second.body, body)
    # the bound evaluator's memo is scoped the same way
    analyzer = Analyzer()
    analyzer.bind(Y, _range(0, 4))
    assert analyzer.const_int_bound(Let(Z, Y * 2, body)).max_value == 0
    assert analyzer.const_int_bound(Let(Z, Y * 4 + 8, body)).max_value == 2


@settings(max_examples=60)
@given(st.lists(int_exprs([X, Y, Z], max_leaves=6, nonlinear=False), min_size=1, max_size=4), domains(2))
def test_range_relaxer_matches_relax_range(mins: list, bounds: list[tuple[int, int]]) -> None:
    dom_map = {var: _range(lo, extent) for var, (lo, extent) in zip((X, Y), bounds)}
    relaxer = RangeRelaxer(dom_map)
    for expr in mins + mins:
        for extent in (IntImm(1, "int32"), IntImm(3, "int32")):
            shared = relaxer.relax(Range(expr, extent), IntImm(64, "int32"))
            alone = relax_range(Range(expr, extent), dom_map, IntImm(64, "int32"))
            tir.assert_structural_equal(shared.min, alone.min)
            tir.assert_structural_equal(shared.extent, alone.extent)
