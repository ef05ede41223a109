"""Constant integer bounds of expressions, by interval arithmetic.

``const_int_bound(i * 4 + j, {i: Range(0, 8), j: Range(0, 4)})`` is ``ConstIntBound(0, 31)``.
A bound is always sound (every value the expression can take lies inside it) and is exact
for sums of independent variables. Unknown ends are ``-inf`` / ``+inf`` (Python floats);
known ends are Python ints.

Leaves that are not constants (variables without a range, buffer loads, calls) take the range
of their dtype when it is narrower than 32 bits (an int8 load lies in [-128, 127]); a wider
leaf is unknown, reported as infinite, so that no bound ever rests on the 32-bit limits.
Integer overflow is not modelled: index arithmetic is assumed not to wrap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from tir.ir.buffer import Range
from tir.ir.dtype import DataType
from tir.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)

INF = float("inf")
Bound = int | float


@dataclass(frozen=True)
class ConstIntBound:
    """The inclusive interval ``[min_value, max_value]``; ends may be ``-inf`` / ``+inf``."""

    min_value: Bound
    max_value: Bound

    @staticmethod
    def everything() -> ConstIntBound:
        return ConstIntBound(-INF, INF)

    @property
    def is_const(self) -> bool:
        """Whether the interval holds exactly one (finite) value."""
        return self.min_value == self.max_value and not math.isinf(self.min_value)

    @property
    def is_bounded(self) -> bool:
        """Whether both ends are finite."""
        return not math.isinf(self.min_value) and not math.isinf(self.max_value)

    def union(self, other: ConstIntBound) -> ConstIntBound:
        return ConstIntBound(min(self.min_value, other.min_value), max(self.max_value, other.max_value))

    def __repr__(self) -> str:
        return f"ConstIntBound({self.min_value}, {self.max_value})"


_EVERYTHING = ConstIntBound(-INF, INF)
_BOOL_BOUND = ConstIntBound(0, 1)


def dtype_bound(dtype: DataType) -> ConstIntBound:
    """The values a leaf of ``dtype`` may hold (32/64-bit integers and floats: unknown)."""
    if dtype.is_bool:
        return _BOOL_BOUND
    if dtype.is_integer and dtype.bits < 32:
        return ConstIntBound(dtype.min_value(), dtype.max_value())
    if dtype.is_uint:
        return ConstIntBound(0, INF)
    return _EVERYTHING


def _mul(a: Bound, b: Bound) -> Bound:
    # 0 * inf is 0 here: a zero factor pins the product whatever the other side is.
    if a == 0 or b == 0:
        return 0
    return a * b


def _floordiv(a: Bound, b: Bound) -> Bound:
    """floor(a / b) for b != 0, with infinite ends."""
    if math.isinf(b):
        if math.isinf(a):
            return INF if (a > 0) == (b > 0) else -INF
        return 0 if a == 0 or (a > 0) == (b > 0) else -1
    if math.isinf(a):
        return a if b > 0 else -a
    return int(a) // int(b)


def _truncdiv(a: Bound, b: Bound) -> Bound:
    """a / b rounded towards zero, for b != 0, with infinite ends."""
    if math.isinf(b):
        if math.isinf(a):
            return INF if (a > 0) == (b > 0) else -INF
        return 0
    if math.isinf(a):
        return a if b > 0 else -a
    quotient = abs(int(a)) // abs(int(b))
    return quotient if (a >= 0) == (b > 0) else -quotient


def _corners(op, a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:  # type: ignore[no-untyped-def]
    values = [
        op(a.min_value, b.min_value),
        op(a.min_value, b.max_value),
        op(a.max_value, b.min_value),
        op(a.max_value, b.max_value),
    ]
    return ConstIntBound(min(values), max(values))


def bound_add(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    return ConstIntBound(a.min_value + b.min_value, a.max_value + b.max_value)


def bound_sub(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    return ConstIntBound(a.min_value - b.max_value, a.max_value - b.min_value)


def bound_mul(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    return _corners(_mul, a, b)


def bound_scale(a: ConstIntBound, factor: int) -> ConstIntBound:
    if factor >= 0:
        return ConstIntBound(_mul(a.min_value, factor), _mul(a.max_value, factor))
    return ConstIntBound(_mul(a.max_value, factor), _mul(a.min_value, factor))


def bound_floordiv(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    if b.min_value > 0 or b.max_value < 0:
        # With the divisor's sign fixed, floordiv is monotone in each argument: corners suffice.
        return _corners(_floordiv, a, b)
    return _EVERYTHING


def bound_truncdiv(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    if b.min_value > 0 or b.max_value < 0:
        return _corners(_truncdiv, a, b)
    return _EVERYTHING


def bound_floormod(a: ConstIntBound, b: ConstIntBound) -> ConstIntBound:
    if b.min_value > 0:
        if b.is_const:
            divisor = int(b.min_value)
            # Inside one period the remainder is the value shifted by a multiple of the divisor.
            if a.is_bounded and _floordiv(a.min_value, divisor) == _floordiv(a.max_value, divisor):
                shift = _floordiv(a.min_value, divisor) * divisor
                return ConstIntBound(a.min_value - shift, a.max_value - shift)
        upper = b.max_value - 1
        if a.min_value >= 0:
            upper = min(upper, a.max_value)
        return ConstIntBound(0, upper)
    if b.max_value < 0:
        return ConstIntBound(b.min_value + 1, 0)
    return _EVERYTHING


class BoundEvaluator:
    """Computes ``ConstIntBound`` s of expressions under known variable ranges.

    ``var_bounds`` are direct bounds of variables; ``var_ranges`` are ranges whose ends may
    themselves be expressions of other variables (evaluated lazily). Results are memoized
    per node until ``clear_memo``.
    """

    def __init__(
        self,
        var_bounds: Mapping[Var, ConstIntBound] | None = None,
        var_ranges: Mapping[Var, Range] | None = None,
    ) -> None:
        self.var_bounds: dict[Var, ConstIntBound] = dict(var_bounds or {})
        self.var_ranges: dict[Var, Range] = dict(var_ranges or {})
        self._memo: dict[int, tuple[PrimExpr, ConstIntBound]] = {}
        self._resolving: set[Var] = set()
        #: Set once a ``Let`` body was bounded under a temporary bound of its variable: the
        #: memo then holds results valid only in that scope.
        self.scoped_memo = False

    def clear_memo(self) -> None:
        self._memo.clear()

    def bound(self, expr: PrimExpr) -> ConstIntBound:
        """The bound of ``expr`` (memoized)."""
        hit = self._memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        result = self._compute(expr)
        self._memo[id(expr)] = (expr, result)
        return result

    def var_bound(self, var: Var) -> ConstIntBound:
        known = self.var_bounds.get(var)
        if known is not None:
            return known
        dom = self.var_ranges.get(var)
        if dom is None or var in self._resolving:
            return dtype_bound(var.dtype)
        self._resolving.add(var)
        try:
            low = self.bound(dom.min)
            extent = self.bound(dom.extent)
            # The last value is min + extent - 1 for the largest min and largest extent.
            result = ConstIntBound(low.min_value, low.max_value + extent.max_value - 1)
        finally:
            self._resolving.discard(var)
        self.var_bounds[var] = result
        return result

    def _compute(self, expr: PrimExpr) -> ConstIntBound:
        if isinstance(expr, IntImm):
            return ConstIntBound(expr.value, expr.value)
        if isinstance(expr, Var):
            return self.var_bound(expr)
        if isinstance(expr, FloatImm):
            return _EVERYTHING
        dtype = expr.dtype
        if dtype.is_float:
            return _EVERYTHING
        if isinstance(expr, Add):
            return bound_add(self.bound(expr.a), self.bound(expr.b))
        if isinstance(expr, Sub):
            return bound_sub(self.bound(expr.a), self.bound(expr.b))
        if isinstance(expr, Mul):
            return bound_mul(self.bound(expr.a), self.bound(expr.b))
        if isinstance(expr, FloorDiv):
            return bound_floordiv(self.bound(expr.a), self.bound(expr.b))
        if isinstance(expr, FloorMod):
            return bound_floormod(self.bound(expr.a), self.bound(expr.b))
        if isinstance(expr, Div):
            return bound_truncdiv(self.bound(expr.a), self.bound(expr.b))
        if isinstance(expr, Min):
            a, b = self.bound(expr.a), self.bound(expr.b)
            return ConstIntBound(min(a.min_value, b.min_value), min(a.max_value, b.max_value))
        if isinstance(expr, Max):
            a, b = self.bound(expr.a), self.bound(expr.b)
            return ConstIntBound(max(a.min_value, b.min_value), max(a.max_value, b.max_value))
        if isinstance(expr, (EQ, NE, LT, LE, GT, GE, And, Or, Not)):
            return _BOOL_BOUND
        if isinstance(expr, Select):
            return self.bound(expr.true_value).union(self.bound(expr.false_value))
        if isinstance(expr, Call) and expr.op == "if_then_else" and len(expr.args) == 3:
            return self.bound(expr.args[1]).union(self.bound(expr.args[2]))
        if isinstance(expr, Call) and expr.op == "abs" and len(expr.args) == 1:
            inner = self.bound(expr.args[0])
            if inner.min_value >= 0:
                return inner
            if inner.max_value <= 0:
                return ConstIntBound(-inner.max_value, -inner.min_value)
            return ConstIntBound(0, max(-inner.min_value, inner.max_value))
        if isinstance(expr, Cast):
            return self._cast_bound(expr)
        if isinstance(expr, Let):
            self.scoped_memo = True
            saved = self.var_bounds.get(expr.var)
            self.var_bounds[expr.var] = self.bound(expr.value)
            try:
                return self._compute(expr.body)
            finally:
                if saved is None:
                    self.var_bounds.pop(expr.var, None)
                else:
                    self.var_bounds[expr.var] = saved
        if isinstance(expr, Ramp):
            base, stride = self.bound(expr.base), self.bound(expr.stride)
            return bound_add(base, bound_mul(stride, ConstIntBound(0, expr.lanes - 1)))
        if isinstance(expr, Broadcast):
            return self.bound(expr.value)
        return dtype_bound(dtype.element)

    def _cast_bound(self, expr: Cast) -> ConstIntBound:
        target = dtype_bound(expr.dtype.element)
        source = expr.value.dtype
        if not (source.is_integer or source.is_bool or source.is_float):
            return target
        inner = self.bound(expr.value)
        low, high = inner.min_value, inner.max_value
        if source.is_float:
            # Conversion truncates towards zero; floor/ceil of the ends is a sound superset.
            low = low if math.isinf(low) else math.floor(low)
            high = high if math.isinf(high) else math.ceil(high)
        if expr.dtype.is_bool:
            return _BOOL_BOUND
        if low >= target.min_value and high <= target.max_value:
            return ConstIntBound(low, high)
        return target


def const_int_bound(expr: PrimExpr, dom_map: Mapping[Var, Range] | None = None) -> ConstIntBound:
    """Constant bounds of ``expr`` as the variables of ``dom_map`` sweep their ranges."""
    return BoundEvaluator(var_ranges=dom_map).bound(expr)
