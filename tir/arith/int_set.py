"""Symbolic interval analysis: which values an index expression takes as variables sweep.

``eval_interval(vi * 4 + ii, {ii: Range(0, 4)})`` is ``(vi * 4, vi * 4 + 3)``: the variables
of the domain map are relaxed over their ranges, every other variable stays symbolic. The
interval is always sound (a superset of the values) and exact for sums of constant-scaled
variables, divisions by positive constants, min / max and constants. Ends are simplified.

``relax_region`` turns the indices of one access into a region (one ``Range`` per dimension),
``union_regions`` merges two regions of one buffer into their hull.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tir.arith.simplify import Analyzer
from tir.ir.buffer import BufferRegion, Range
from tir.ir.dtype import DataType
from tir.ir.expr import (
    Add,
    Broadcast,
    Call,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from tir.ir.functor import substitute

__all__ = ["RangeRelaxer", "eval_interval", "relax_range", "relax_region", "union_regions"]

# An interval end; None means unbounded on that side.
_End = PrimExpr | None


def _const(value: int, dtype: DataType) -> IntImm:
    return IntImm(value, dtype)


class _IntervalEvaluator:
    """Intervals of expressions over one domain map (shared analyzer and memo tables)."""

    def __init__(self, dom_map: Mapping[Var, Range]) -> None:
        self.dom_map = dict(dom_map)
        self.analyzer = Analyzer()
        for var, dom in self.dom_map.items():
            self.analyzer.bind(var, dom)
        self._uses_memo: dict[int, tuple[PrimExpr, bool]] = {}
        self._resolving: set[Var] = set()
        # Intervals of domain variables, computed outside any other variable's resolution (so
        # they do not depend on which query asked first).
        self._var_memo: dict[Var, tuple[_End, _End]] = {}

    # ------------------------------------------------------------ helpers

    def uses_domain(self, expr: PrimExpr) -> bool:
        """Whether ``expr`` mentions a variable of the domain map."""
        hit = self._uses_memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        if isinstance(expr, Var):
            result = expr in self.dom_map
        else:
            result = False
            for name in type(expr).child_fields():
                value = getattr(expr, name)
                if isinstance(value, PrimExpr):
                    result = self.uses_domain(value)
                elif isinstance(value, tuple):
                    result = any(isinstance(item, PrimExpr) and self.uses_domain(item) for item in value)
                if result:
                    break
        self._uses_memo[id(expr)] = (expr, result)
        return result

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        return self.analyzer.simplify(expr)

    def _constant_fallback(self, expr: PrimExpr) -> tuple[_End, _End]:
        """The constant bound of ``expr`` over the domain: sound for anything we cannot follow."""
        bound = self.analyzer.const_int_bound(expr)
        dtype = expr.dtype.element
        # A bound reaching the dtype's limits says nothing an index could use: unbounded.
        low = _const(int(bound.min_value), dtype) if bound.min_value > dtype.min_value() else None
        high = _const(int(bound.max_value), dtype) if bound.max_value < dtype.max_value() else None
        return low, high

    # ------------------------------------------------------------ public entry

    def interval(self, expr: PrimExpr) -> tuple[_End, _End]:
        """Simplified ends of ``expr``'s interval (None where unbounded)."""
        low, high = self._interval(self.simplify(expr))
        return (None if low is None else self.simplify(low)), (None if high is None else self.simplify(high))

    # ------------------------------------------------------------ rules

    def _interval(self, expr: PrimExpr) -> tuple[_End, _End]:
        # Vectors first: a ramp spans its lanes even when nothing in it is relaxed.
        if isinstance(expr, Ramp):
            return self._ramp_interval(expr)
        if isinstance(expr, Broadcast):
            return self._interval(expr.value)
        if not self.uses_domain(expr):
            if expr.dtype.lanes == 1:
                return expr, expr
            # Ends are scalars: a vector index (``v * 4 + T.ramp(0, 1, 32) % 4``) is bounded
            # over its lanes, through sums and differences, by constants below them.
            if isinstance(expr, (Add, Sub)):
                (la, ha), (lb, hb) = self._interval(expr.a), self._interval(expr.b)
                return (_add(la, lb), _add(ha, hb)) if isinstance(expr, Add) else (_sub(la, hb), _sub(ha, lb))
            return self._constant_fallback(expr)
        if isinstance(expr, Var):
            return self._var_interval(expr)
        if isinstance(expr, Add):
            (la, ha), (lb, hb) = self._interval(expr.a), self._interval(expr.b)
            return _add(la, lb), _add(ha, hb)
        if isinstance(expr, Sub):
            (la, ha), (lb, hb) = self._interval(expr.a), self._interval(expr.b)
            return _sub(la, hb), _sub(ha, lb)
        if isinstance(expr, Mul):
            return self._mul_interval(expr)
        if isinstance(expr, FloorDiv) or (isinstance(expr, Div) and expr.dtype.is_integer):
            return self._div_interval(expr)
        if isinstance(expr, FloorMod):
            return self._mod_interval(expr)
        if isinstance(expr, (Min, Max)):
            (la, ha), (lb, hb) = self._interval(expr.a), self._interval(expr.b)
            if isinstance(expr, Min):
                # An unbounded lower end stays unbounded; an unbounded upper end drops out.
                low = None if la is None or lb is None else Min(la, lb)
                high = hb if ha is None else ha if hb is None else Min(ha, hb)
            else:
                low = lb if la is None else la if lb is None else Max(la, lb)
                high = None if ha is None or hb is None else Max(ha, hb)
            return low, high
        if isinstance(expr, Select):
            return self._hull(expr.true_value, expr.false_value)
        if isinstance(expr, Call) and expr.op == "if_then_else" and len(expr.args) == 3:
            return self._hull(expr.args[1], expr.args[2])
        if isinstance(expr, Cast) and expr.dtype.is_int and expr.value.dtype.is_int:
            if expr.dtype.bits >= expr.value.dtype.bits:
                low, high = self._interval(expr.value)
                return (None if low is None else Cast(expr.dtype, low)), (
                    None if high is None else Cast(expr.dtype, high)
                )
        if isinstance(expr, Let):
            return self._interval(self.simplify(substitute(expr.body, {expr.var: expr.value})))
        return self._constant_fallback(expr)

    def _var_interval(self, var: Var) -> tuple[_End, _End]:
        hit = self._var_memo.get(var)
        if hit is not None:
            return hit
        dom = self.dom_map[var]
        if var in self._resolving:  # a range defined in terms of itself: give up soundly
            return self._constant_fallback(var)
        top_level = not self._resolving
        self._resolving.add(var)
        try:
            low, _ = self._interval(dom.min)
            last = dom.min if isinstance(dom.extent, IntImm) and dom.extent.value == 1 else dom.min + dom.extent - 1
            _, high = self._interval(self.simplify(last))
        finally:
            self._resolving.discard(var)
        if top_level:
            self._var_memo[var] = (low, high)
        return low, high

    def _hull(self, a: PrimExpr, b: PrimExpr) -> tuple[_End, _End]:
        (la, ha), (lb, hb) = self._interval(a), self._interval(b)
        low = None if la is None or lb is None else Min(la, lb)
        high = None if ha is None or hb is None else Max(ha, hb)
        return low, high

    def _sign(self, expr: PrimExpr) -> int | None:
        """+1 / -1 / 0 when ``expr`` is provably >= 0 / <= 0 / both; None when unknown."""
        bound = self.analyzer.const_int_bound(expr)
        if bound.min_value >= 0 and bound.max_value <= 0:
            return 0
        if bound.min_value >= 0:
            return 1
        if bound.max_value <= 0:
            return -1
        return None

    def _mul_interval(self, expr: Mul) -> tuple[_End, _End]:
        a, b = expr.a, expr.b
        if self.uses_domain(a) and not self.uses_domain(b):
            varying, factor = a, b
        elif self.uses_domain(b) and not self.uses_domain(a):
            varying, factor = b, a
        else:
            # Both factors vary: the four corner products bound the product.
            (la, ha), (lb, hb) = self._interval(a), self._interval(b)
            if la is None or ha is None or lb is None or hb is None:
                return self._constant_fallback(expr)
            corners = [Mul(la, lb), Mul(la, hb), Mul(ha, lb), Mul(ha, hb)]
            return _reduce(Min, corners), _reduce(Max, corners)
        low, high = self._interval(varying)
        sign = self._sign(factor)
        if sign is not None and sign >= 0:
            return _mul(low, factor), _mul(high, factor)
        if sign == -1:
            return _mul(high, factor), _mul(low, factor)
        if low is None or high is None:
            return self._constant_fallback(expr)
        # The factor is one (unknown-signed) value: the smaller of the two end products is exact.
        return Min(Mul(low, factor), Mul(high, factor)), Max(Mul(low, factor), Mul(high, factor))

    def _div_interval(self, expr: FloorDiv | Div) -> tuple[_End, _End]:
        divisor = expr.b
        if self.uses_domain(divisor):
            return self._constant_fallback(expr)
        sign = self._sign(divisor)
        if sign is None or sign == 0 or (isinstance(divisor, IntImm) and divisor.value == 0):
            return self._constant_fallback(expr)
        low, high = self._interval(expr.a)
        cls = type(expr)
        if isinstance(expr, Div):
            # Truncating division is monotone too, but only floor semantics are exact on both signs.
            numerator_bound = self.analyzer.const_int_bound(expr.a)
            if numerator_bound.min_value < 0:
                return self._constant_fallback(expr)
        if sign > 0:
            return (None if low is None else cls(low, divisor)), (None if high is None else cls(high, divisor))
        return (None if high is None else cls(high, divisor)), (None if low is None else cls(low, divisor))

    def _mod_interval(self, expr: FloorMod) -> tuple[_End, _End]:
        divisor = expr.b
        if isinstance(divisor, IntImm) and divisor.value > 0:
            low, high = self._interval(expr.a)
            if low is not None and high is not None:
                # Inside one period the remainder is the value shifted by a constant multiple.
                if self.analyzer.can_prove_equal(FloorDiv(low, divisor), FloorDiv(high, divisor)):
                    return FloorMod(low, divisor), Sub(high, Mul(FloorDiv(low, divisor), divisor))
            fallback_low, fallback_high = self._constant_fallback(expr)
            return (
                fallback_low if fallback_low is not None else _const(0, expr.dtype),
                fallback_high if fallback_high is not None else _const(divisor.value - 1, expr.dtype),
            )
        return self._constant_fallback(expr)

    def _ramp_interval(self, expr: Ramp) -> tuple[_End, _End]:
        low, high = self._interval(expr.base)
        stride = expr.stride
        if self.uses_domain(stride):
            return self._constant_fallback(expr)
        span = Mul(stride, _const(expr.lanes - 1, stride.dtype))
        sign = self._sign(stride)
        if sign is not None and sign >= 0:
            return low, _add(high, span)
        if sign == -1:
            return _add(low, span), high
        low = None if low is None else Min(low, Add(low, span))
        high = None if high is None else Max(high, Add(high, span))
        return low, high


def _add(a: _End, b: _End) -> _End:
    return None if a is None or b is None else Add(a, b)


def _sub(a: _End, b: _End) -> _End:
    return None if a is None or b is None else Sub(a, b)


def _mul(a: _End, factor: PrimExpr) -> _End:
    return None if a is None else Mul(a, factor)


def _reduce(cls: type, items: list[PrimExpr]) -> PrimExpr:
    result = items[0]
    for item in items[1:]:
        result = cls(result, item)
    return result


def _dtype_extremes(dtype: DataType) -> tuple[PrimExpr, PrimExpr]:
    scalar = dtype.element
    return _const(int(scalar.min_value()), scalar), _const(int(scalar.max_value()), scalar)


def eval_interval(expr: PrimExpr, dom_map: Mapping[Var, Range]) -> tuple[PrimExpr, PrimExpr]:
    """Inclusive ``(min, max)`` of integer ``expr`` as the variables of ``dom_map`` sweep.

    Variables outside ``dom_map`` stay symbolic. A side that cannot be bounded is the
    dtype's extreme value. A ``Ramp`` covers all its lanes.
    """
    low, high = _IntervalEvaluator(dom_map).interval(expr)
    extreme_low, extreme_high = _dtype_extremes(expr.dtype)
    return (extreme_low if low is None else low), (extreme_high if high is None else high)


def relax_range(dom: Range, dom_map: Mapping[Var, Range], extent_limit: PrimExpr | None = None) -> Range:
    """The hull of ``[dom.min, dom.min + dom.extent)`` as the variables of ``dom_map`` sweep.

    When an end cannot be bounded, ``extent_limit`` (a buffer dimension) gives the full range
    ``[0, extent_limit)``; without it, ``[0, dtype max)`` (as in ``relax_region``).
    """
    return RangeRelaxer(dom_map).relax(dom, extent_limit)


class RangeRelaxer:
    """``relax_range`` for many ranges over one domain map: the ranges share one simplifier
    and its memo tables, which is much cheaper than a ``relax_range`` call per range.

    >>> relaxer = RangeRelaxer({ii: Range(0, 4)})
    >>> relaxer.relax(Range(vi * 4 + ii, 1))   # -> Range(vi * 4, 4)
    """

    def __init__(self, dom_map: Mapping[Var, Range]) -> None:
        self._evaluator = _IntervalEvaluator(dom_map)

    def relax(self, dom: Range, extent_limit: PrimExpr | None = None) -> Range:
        """What ``relax_range(dom, dom_map, extent_limit)`` returns."""
        evaluator = self._evaluator
        low, _ = evaluator.interval(dom.min)
        last = dom.min if isinstance(dom.extent, IntImm) and dom.extent.value == 1 else dom.min + dom.extent - 1
        _, high = evaluator.interval(last)
        return _range_from_ends(low, high, dom.min.dtype, extent_limit, evaluator)


def _range_from_ends(
    low: _End, high: _End, dtype: DataType, extent_limit: PrimExpr | None, evaluator: _IntervalEvaluator
) -> Range:
    if low is None or high is None:
        if extent_limit is not None:
            return Range(_const(0, extent_limit.dtype), extent_limit)
        # No buffer shape to fall back to. Indices below 0 are out of bounds anyway, so an
        # unbounded start is 0; an unbounded end runs to the dtype's limit (the extent must
        # stay representable).
        low = _const(0, dtype) if low is None else low
        if high is None:
            return Range(low, evaluator.simplify(_const(int(dtype.max_value()), dtype) - low))
    return Range(low, evaluator.simplify(high - low + 1))


def relax_region(
    indices: Sequence[PrimExpr], dom_map: Mapping[Var, Range], shape: Sequence[PrimExpr] | None = None
) -> tuple[Range, ...]:
    """The region an access ``buffer[indices]`` touches as ``dom_map``'s variables sweep.

    One ``Range(min, extent)`` per index, with ``extent = max - min + 1`` simplified. A
    ``Ramp`` index covers ``[base, base + stride * (lanes - 1)]``. When ``shape`` (the
    buffer's) is given, a dimension that cannot be bounded covers the whole dimension;
    without it, ``[0, dtype max)``.
    """
    evaluator = _IntervalEvaluator(dom_map)
    ranges = []
    for dim, index in enumerate(indices):
        low, high = evaluator.interval(index)
        limit = shape[dim] if shape is not None else None
        ranges.append(_range_from_ends(low, high, index.dtype.element, limit, evaluator))
    return tuple(ranges)


def union_regions(
    a: Sequence[Range] | BufferRegion,
    b: Sequence[Range] | BufferRegion,
    shape: Sequence[PrimExpr] | None = None,
) -> tuple[Range, ...] | BufferRegion:
    """The per-dimension hull of two regions of one buffer.

    Where the ends are symbolic and not comparable the hull uses ``Min`` / ``Max``, or the
    full dimension ``[0, shape[d])`` when ``shape`` is given. Two ``BufferRegion`` s of one
    buffer give a ``BufferRegion`` (the buffer's shape is the fallback).
    """
    if isinstance(a, BufferRegion) or isinstance(b, BufferRegion):
        if not (isinstance(a, BufferRegion) and isinstance(b, BufferRegion)) or a.buffer is not b.buffer:
            raise ValueError("union_regions: two BufferRegions must be of the same buffer")
        ranges = union_regions(a.region, b.region, shape if shape is not None else a.buffer.shape)
        assert isinstance(ranges, tuple)
        return BufferRegion(a.buffer, ranges)
    if len(a) != len(b):
        raise ValueError(f"union_regions: regions of {len(a)} and {len(b)} dimensions")
    analyzer = Analyzer()
    result = []
    for dim, (first, second) in enumerate(zip(a, b)):
        if first is second:
            result.append(first)
            continue
        if first.min.dtype != second.min.dtype:
            # An int64-shaped buffer may be indexed in int32 in one place and int64 in another.
            wide = first.min.dtype if first.min.dtype.bits >= second.min.dtype.bits else second.min.dtype
            first, second = _range_as(first, wide), _range_as(second, wide)
        first_last = analyzer.simplify(first.min + first.extent - 1)
        second_last = analyzer.simplify(second.min + second.extent - 1)
        low = _ordered_end(analyzer, first.min, second.min, take_min=True)
        high = _ordered_end(analyzer, first_last, second_last, take_min=False)
        if low is None or high is None:
            if shape is not None:
                result.append(Range(_const(0, shape[dim].dtype), shape[dim]))
                continue
            low = low if low is not None else analyzer.simplify(Min(first.min, second.min))
            high = high if high is not None else analyzer.simplify(Max(first_last, second_last))
        if low is first.min and high is first_last:
            result.append(first)
        elif low is second.min and high is second_last:
            result.append(second)
        else:
            result.append(Range(low, analyzer.simplify(high - low + 1)))
    return tuple(result)


def _range_as(rng: Range, dtype: DataType) -> Range:
    def cast(expr: PrimExpr) -> PrimExpr:
        if expr.dtype == dtype:
            return expr
        return _const(expr.value, dtype) if isinstance(expr, IntImm) else Cast(dtype, expr)

    return Range(cast(rng.min), cast(rng.extent))


def _ordered_end(analyzer: Analyzer, a: PrimExpr, b: PrimExpr, take_min: bool) -> PrimExpr | None:
    """The smaller (or larger) of ``a`` and ``b`` when provable; None when not comparable."""
    if analyzer.can_prove(a <= b):
        return a if take_min else b
    if analyzer.can_prove(b <= a):
        return b if take_min else a
    return None
