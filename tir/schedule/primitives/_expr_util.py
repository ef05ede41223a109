"""Small expression helpers shared by ``blockize``, binding division and tensorize matching:
the variables an expression uses, predicate conjuncts, integer constants, proofs of equality.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tir.arith import Analyzer
from tir.ir import IntImm, PrimExpr, Range, Var, free_vars
from tir.ir.expr import conjuncts  # noqa: F401 - re-exported: schedule modules import it from here


def var_ids(node: Any) -> set[int]:
    """Ids of the variables ``node`` uses (definitions excluded)."""
    if isinstance(node, list):
        node = tuple(node)
    return {id(v) for v in free_vars(node)}


def uses_any(node: Any, variables: Iterable[Var]) -> bool:
    wanted = {id(v) for v in variables}
    return bool(wanted & var_ids(node))


def is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and bool(expr.value)


def is_int(expr: Any, value: int | None = None) -> bool:
    return isinstance(expr, IntImm) and (value is None or expr.value == value)


def analyzer_for(dom: Mapping[Var, Range]) -> Analyzer:
    analyzer = Analyzer()
    for var, rng in dom.items():
        analyzer.bind(var, rng)
    return analyzer


def prove_equal(analyzer: Analyzer, a: PrimExpr, b: PrimExpr) -> bool:
    try:
        if a.dtype != b.dtype:
            if isinstance(b, IntImm):
                b = IntImm(b.value, a.dtype)
            elif isinstance(a, IntImm):
                a = IntImm(a.value, b.dtype)
            else:
                return False
        return bool(analyzer.can_prove_equal(a, b))
    except (TypeError, ValueError):
        return False
