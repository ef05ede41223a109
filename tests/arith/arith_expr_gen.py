"""Random integer expressions (hypothesis strategies) and a tiny reference evaluator.

The evaluator follows the IR's semantics with Python integers: ``FloorDiv`` / ``FloorMod``
are Python's ``//`` / ``%``, ``Div`` truncates towards zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import strategies as st

from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    Sub,
    Var,
)

_BINARY: dict[type, Callable[[int, int], int]] = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    FloorDiv: lambda a, b: a // b,
    FloorMod: lambda a, b: a % b,
    Min: min,
    Max: max,
    LT: lambda a, b: int(a < b),
    LE: lambda a, b: int(a <= b),
    GT: lambda a, b: int(a > b),
    GE: lambda a, b: int(a >= b),
    EQ: lambda a, b: int(a == b),
    NE: lambda a, b: int(a != b),
    And: lambda a, b: int(bool(a) and bool(b)),
    Or: lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(expr: PrimExpr, env: Mapping[Var, int]) -> int:
    """The value of an integer/bool expression with the variables of ``env`` assigned."""
    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, Var):
        return env[expr]
    if isinstance(expr, Div):
        a, b = evaluate(expr.a, env), evaluate(expr.b, env)
        quotient = abs(a) // abs(b)
        return quotient if (a >= 0) == (b > 0) else -quotient
    operation = _BINARY.get(type(expr))
    if operation is not None:
        return operation(evaluate(expr.a, env), evaluate(expr.b, env))  # type: ignore[attr-defined]
    if isinstance(expr, Not):
        return 1 - evaluate(expr.a, env)
    if isinstance(expr, Select):
        return evaluate(expr.true_value if evaluate(expr.condition, env) else expr.false_value, env)
    if isinstance(expr, Cast):
        return evaluate(expr.value, env)
    raise TypeError(f"cannot evaluate {expr!r}")


def _const(value: int) -> IntImm:
    return IntImm(value)


def int_exprs(variables: Sequence[Var], max_leaves: int = 12, nonlinear: bool = True) -> st.SearchStrategy[PrimExpr]:
    """Integer expressions over ``variables``: + - *, // % and truncating / by non-zero constants,
    min, max, and select on comparisons joined by and / or / not."""
    leaves = st.one_of(st.sampled_from(list(variables)), st.integers(-20, 20).map(_const))
    divisors = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 16, -3, -4]).map(_const)
    scales = st.integers(-6, 8).map(_const)
    comparisons = st.sampled_from([LT, LE, GT, GE, EQ, NE])

    def conditions(children: st.SearchStrategy[PrimExpr]) -> st.SearchStrategy[PrimExpr]:
        compare = st.builds(lambda cmp, a, b: cmp(a, b), comparisons, children, children)
        return st.one_of(
            compare,
            st.builds(And, compare, compare),
            st.builds(Or, compare, compare),
            st.builds(Not, compare),
        )

    def extend(children: st.SearchStrategy[PrimExpr]) -> st.SearchStrategy[PrimExpr]:
        options = [
            st.builds(Add, children, children),
            st.builds(Sub, children, children),
            st.builds(Mul, children, scales),
            st.builds(Mul, scales, children),
            st.builds(FloorDiv, children, divisors),
            st.builds(FloorMod, children, divisors),
            st.builds(Min, children, children),
            st.builds(Max, children, children),
            st.builds(Div, children, divisors),
            st.builds(Select, conditions(children), children, children),
        ]
        if nonlinear:
            options.append(st.builds(Mul, children, children))
        return st.one_of(options)

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def domains(count: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    """``count`` (min, extent) pairs of small ranges."""
    return st.lists(st.tuples(st.integers(-10, 10), st.integers(1, 9)), min_size=count, max_size=count)
