"""Symbolic dimensions of the model path: an ONNX ``dim_param`` kept as a shape variable.

    graph = from_onnx("m.onnx", symbolic={"N": 8})   # batch N stays symbolic, tuned for N = 8
    compiled = msm.compile(graph)                     # one build
    compiled.run({"x": x1}); compiled.run({"x": x16}) # any N

A dimension is an ``int`` or, when it depends on a symbolic ``dim_param``, a tir ``PrimExpr``
over int32 ``Var``s named after the ``dim_param`` (``N``, ``W``, and derived extents such as a
strided convolution's ``(W - 3) // 2 + 1``). Operators do arithmetic on dimensions with Python
operators, which build (unsimplified) expressions; ``dim`` normalizes one (simplified, an
``int`` when it is constant). Deciding something about a symbolic dimension in Python
(``if extent > 1``) raises ``TypeError`` (``PrimExpr`` has no truth value): the lowering turns
that into a refusal naming the operator, never a wrong guess. ``dims_equal`` and ``dim_max``
decide what can be proven and keep the rest symbolic.

Shapes are saved in the compiled plan as small JSON trees (``to_json``) and evaluated per call
(``evaluate``) with the sizes bound from the inputs, so the runtime needs no tir.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tir.arith import Analyzer, simplify
from tir.ir import Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var
from tir.ir.expr import max_expr

__all__ = [
    "Dim",
    "SymbolicShapeError",
    "dim",
    "dim_max",
    "dims_equal",
    "evaluate",
    "free_vars",
    "is_symbolic",
    "prod",
    "shape_text",
    "substitute",
    "to_json",
]

Dim = int | PrimExpr


class SymbolicShapeError(ValueError):
    """A symbolic dimension where a construct needs a constant one."""


def is_symbolic(value: Dim | Sequence[Dim]) -> bool:
    """Whether a dimension (or any dimension of a shape) is an expression."""
    if isinstance(value, (tuple, list)):
        return any(isinstance(d, PrimExpr) and not isinstance(d, IntImm) for d in value)
    return isinstance(value, PrimExpr) and not isinstance(value, IntImm)


def dim(value: Any) -> Dim:
    """A dimension in normal form: ``int`` when constant, else a simplified expression."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, IntImm):
        return int(value.value)
    if isinstance(value, PrimExpr):
        simplified = simplify(value)
        return int(simplified.value) if isinstance(simplified, IntImm) else simplified
    raise TypeError(f"a dimension must be an int or an integer expression, got {type(value).__name__} {value!r}")


def prod(dims: Iterable[Dim]) -> Dim:
    total: Dim = 1
    for d in dims:
        total = total * d
    return dim(total)


def dims_equal(a: Dim, b: Dim) -> bool:
    """Whether two dimensions are provably equal (a symbolic one never equals a constant)."""
    if not is_symbolic(a) and not is_symbolic(b):
        return int(dim(a)) == int(dim(b))  # type: ignore[arg-type]
    difference = dim(a - b)  # type: ignore[operator]
    return isinstance(difference, int) and difference == 0


def dim_max(a: Dim, b: Dim) -> Dim:
    """``max(a, b)``: decided when provable, else the symbolic ``Max`` (a valid extent)."""
    if not is_symbolic(a) and not is_symbolic(b):
        return max(int(dim(a)), int(dim(b)))  # type: ignore[arg-type]
    analyzer = Analyzer()
    difference = dim(a - b)  # type: ignore[operator]
    if isinstance(difference, int):
        return a if difference >= 0 else b
    if analyzer.can_prove(difference >= 0):
        return dim(a)
    if analyzer.can_prove(difference <= 0):
        return dim(b)
    return dim(max_expr(a, b))


def free_vars(values: Iterable[Dim]) -> dict[str, Var]:
    """The shape variables the dimensions use, by name, in order of first use."""
    found: dict[str, Var] = {}
    for value in values:
        if is_symbolic(value):
            found.update({k: v for k, v in _collect(value).items() if k not in found})  # type: ignore[arg-type]
    return found


def _collect(expr: PrimExpr) -> dict[str, Var]:
    if isinstance(expr, Var):
        return {expr.name: expr}
    found: dict[str, Var] = {}
    for child in (getattr(expr, "a", None), getattr(expr, "b", None)):
        if isinstance(child, PrimExpr):
            for k, v in _collect(child).items():
                found.setdefault(k, v)
    return found


def substitute(value: Dim, env: Mapping[str, int]) -> int:
    """The dimension's value for the given sizes (every variable it uses must be in ``env``)."""
    return evaluate(to_json(value), env)


def shape_text(shape: Sequence[Dim]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# ---------------------------------------------------------------- the plan's JSON form

_OPS: dict[type, str] = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%", Min: "min", Max: "max"}


def to_json(value: Dim) -> Any:
    """An int, a variable's name, or ``[op, a, b]`` with op in + - * // % min max."""
    value = dim(value)
    if isinstance(value, int):
        return value
    return _expr_json(value)


def _expr_json(expr: PrimExpr) -> Any:
    if isinstance(expr, IntImm):
        return int(expr.value)
    if isinstance(expr, Var):
        return expr.name
    op = _OPS.get(type(expr))
    if op is None:
        raise SymbolicShapeError(f"the dimension {expr} uses {type(expr).__name__}, which a shape cannot")
    return [op, _expr_json(expr.a), _expr_json(expr.b)]  # type: ignore[attr-defined]


def evaluate(tree: Any, env: Mapping[str, int]) -> int:
    """The value of a ``to_json`` tree for the sizes in ``env``."""
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        return int(env[tree])
    op, a, b = tree[0], evaluate(tree[1], env), evaluate(tree[2], env)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    raise ValueError(f"unknown operator {op!r} in a saved shape")
