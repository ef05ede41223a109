"""Quasi-affine iterator maps: detection, independence, simplification and inversion.

A block binds its iterators to expressions of the loops around it. TensorIR asks those
bindings to be *quasi-affine* and *independent*: each binding is a sum of scaled pieces of
loop iterators, and no piece of a loop iterator feeds two bindings. This module decides that.

Vocabulary
----------
- An ``IterMark`` is a source of iteration with values ``0 .. extent - 1``: a loop variable
  (its value shifted by the loop's start) or a *fused* sum of splits (``i * 8 + j`` with
  ``0 <= j < 8`` is one mark of extent ``8 * extent(i)``).
- An ``IterSplit`` is a *digit* of a mark, scaled: ``mark // lower_factor % extent * scale``.
  Its digit positions are ``[lower_factor, lower_factor * extent)`` in the mark's mixed radix;
  a split that reaches the mark's top has no ``% extent`` (``extent`` is then the ceiling).
- An ``IterSum`` is ``sum(args) + base``: the normal form of one binding. ``base`` does not
  depend on the iterators (it may use outer variables).

``detect_iter_map(bindings, dom_map, predicate=True, check_level="surjective", var_ranges=None)``
    Rewrites every binding as an ``IterSum`` over the loop variables of ``dom_map`` and checks
    (``var_ranges``: known ranges of other variables, such as symbolic sizes, for proofs):

    * every binding is quasi-affine: built from ``+``, ``-``, ``*`` by an iterator-free
      factor, and ``//`` / ``%`` by a positive iterator-free divisor, where the dividend can be
      fused into one mark (its splits form a mixed-radix chain: scales ``1, e0, e0*e1, ...``);
    * *independence*: the digit positions the bindings use on each loop variable are pairwise
      disjoint (``v1 = i, v2 = i * 2`` use the same digits of ``i``: rejected;
      ``v1 = i // 4, v2 = i % 4`` use ``[4, ..)`` and ``[1, 4)``: accepted);
    * for ``"surjective"``: each binding's values form one interval without gaps (``i * 4 +
      j`` with ``j`` of extent 6 overlaps itself: allowed, the instances are recomputed), and
      the digits used of one mark combine freely (lower digits end below the next digit and
      a top digit that the predicate cuts starts at a divisor of the cut); loop digits may
      be left unused (the instances repeat);
    * for ``"bijective"``: additionally every binding is an exact mixed-radix chain (no
      overlap) and every digit of every loop variable of extent > 1 is used: the loop points
      that satisfy the predicate map one-to-one onto the box of the bindings' ranges.

    The predicate (a conjunction; ``T.where``) may bound a sum of iterators from above:
    ``i0 * 32 + i1 < 100`` makes the fused mark ``i0 * 32 + i1`` count as extent 100, which
    is how splits by non-dividing factors stay exact. Bounds are read until they settle (one
    bound can change the form of another conjunct), carried into the sums that contain a
    bounded chain, and down to the digits they pin. A conjunct that is not such a bound, or a
    bound on a sum the bindings are not made of (a binding simplified out of the predicate's
    form), makes ``"bijective"`` detection fail; in ``"surjective"`` mode it is ignored and
    the result says so (``predicate_applied`` is False: ``ranges`` are then supersets).

    The result, an ``IterMapResult``, has ``indices`` (one ``IterSum`` per binding, or None
    when detection failed), ``errors`` (why it failed), ``ranges`` (the interval of values of
    each binding, predicate bounds applied), ``exact`` (per binding: a chain without
    overlap), ``binding_vars`` (per binding: the loop variables it uses),
    ``unused_vars`` (loop variables some digits of which no binding uses) and
    ``predicate_applied``.

``normalize_iter_map(bindings, dom_map, predicate=True)``
    The bindings rebuilt from their ``IterSum`` s and simplified: ``i // 4 * 4 + i % 4``
    becomes ``i``. Bindings that are not quasi-affine come back simplified only.

``inverse_iter_map(result, outputs)``
    For a bijective ``IterMapResult``, each loop variable as an expression of ``outputs``
    (one expression standing for each binding's value): the inverse of ``i -> (i // 4, i %
    4)`` is ``i = o0 * 4 + o1``. Raises ``ValueError`` when the map is not bijective.

Extents may be symbolic; facts about them are decided with ``tir.arith.Analyzer``, and a
fact that cannot be proved makes detection fail with a reason (never a guess).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tir.arith.simplify import Analyzer
from tir.ir.buffer import Range
from tir.ir.dtype import INT32
from tir.ir.expr import (
    GE,
    GT,
    LE,
    LT,
    Add,
    And,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    PrimExpr,
    Sub,
    Var,
)
from tir.ir.functor import free_vars, substitute

__all__ = [
    "CheckLevel",
    "IterMapResult",
    "IterMark",
    "IterSplit",
    "IterSum",
    "detect_iter_map",
    "determined_vars",
    "inverse_iter_map",
    "normalize_iter_map",
]

CheckLevel = Literal["bijective", "surjective"]


# ---------------------------------------------------------------- structures


@dataclass(frozen=True, eq=False)
class IterMark:
    """Values ``0 .. extent - 1`` of a loop variable (minus ``offset``) or of a fused sum."""

    source: Var | IterSum
    extent: PrimExpr
    offset: PrimExpr | None = None  # the loop start, for a loop-variable source

    def value_expr(self) -> PrimExpr:
        """The mark's value as an expression of the loop variables."""
        if isinstance(self.source, Var):
            if self.offset is None or _is_int(self.offset, 0):
                return self.source
            return self.source - self.offset
        return self.source.to_expr()

    def __str__(self) -> str:
        return f"mark({self.value_expr()}, extent={self.extent})"


@dataclass(frozen=True, eq=False)
class IterSplit:
    """``mark // lower_factor % extent * scale``."""

    mark: IterMark
    lower_factor: PrimExpr
    extent: PrimExpr
    scale: PrimExpr

    def to_expr(self) -> PrimExpr:
        value = self.mark.value_expr()
        if not _is_int(self.lower_factor, 1):
            value = FloorDiv(value, _like(self.lower_factor, value))
        top = _prove_le(self.mark.extent, self.lower_factor * self.extent)
        if not top:
            value = FloorMod(value, _like(self.extent, value))
        if not _is_int(self.scale, 1):
            value = Mul(value, _like(self.scale, value))
        return value

    def __str__(self) -> str:
        return str(self.to_expr())


@dataclass(frozen=True, eq=False)
class IterSum:
    """``sum(args) + base``; ``base`` does not depend on the iterators."""

    args: tuple[IterSplit, ...]
    base: PrimExpr

    def to_expr(self) -> PrimExpr:
        result: PrimExpr | None = None
        for arg in self.args:
            term = arg.to_expr()
            result = term if result is None else Add(result, _like(term, result))
        if result is None:
            return self.base
        if _is_int(self.base, 0):
            return result
        return Add(result, _like(self.base, result))

    def loop_vars(self) -> list[Var]:
        """The loop variables this sum depends on, outermost split first."""
        found: list[Var] = []
        for arg in self.args:
            for var in _mark_vars(arg.mark):
                if not any(var is seen for seen in found):
                    found.append(var)
        return found

    def __str__(self) -> str:
        return str(self.to_expr())


def _mark_vars(mark: IterMark) -> list[Var]:
    if isinstance(mark.source, Var):
        return [mark.source]
    return mark.source.loop_vars()


@dataclass
class IterMapResult:
    """What ``detect_iter_map`` found. ``indices`` is None exactly when ``errors`` is not empty."""

    indices: list[IterSum] | None
    errors: list[str]
    ranges: list[Range] = field(default_factory=list)
    exact: list[bool] = field(default_factory=list)
    binding_vars: list[list[Var]] = field(default_factory=list)
    unused_vars: list[Var] = field(default_factory=list)
    #: False when some predicate conjunct could not be related to the bindings: ``ranges``
    #: are then supersets of the values (only in "surjective" mode; "bijective" fails instead).
    predicate_applied: bool = True
    check_level: str = "surjective"
    dom_map: dict[Var, Range] = field(default_factory=dict)
    # The detector and its digit bookkeeping, kept for ``inverse_iter_map``.
    _detector: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.indices is not None

    def __bool__(self) -> bool:
        return self.ok


# ---------------------------------------------------------------- small helpers


def _is_int(expr: Any, value: int | None = None) -> bool:
    return isinstance(expr, IntImm) and (value is None or expr.value == value)


def _like(expr: PrimExpr, other: PrimExpr) -> PrimExpr:
    """``expr`` in ``other``'s dtype (constants re-typed, others cast)."""
    if expr.dtype == other.dtype:
        return expr
    if isinstance(expr, IntImm):
        return IntImm(expr.value, other.dtype)
    return Cast(other.dtype, expr)


def _prove_le(a: PrimExpr, b: PrimExpr) -> bool:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value <= b.value
    try:
        return Analyzer().can_prove(a <= _like(b, a))
    except TypeError:
        return False


def _key(expr: Any) -> Any:
    """A hashable key of an expression's structure; variables by identity."""
    if isinstance(expr, IntImm):
        return ("i", expr.value)
    if isinstance(expr, Var):
        return ("v", id(expr))
    if isinstance(expr, PrimExpr):
        items: list[Any] = [type(expr).__name__]
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            if isinstance(value, tuple):
                items.append(tuple(_key(item) for item in value))
            else:
                items.append(_key(value) if isinstance(value, PrimExpr) else repr(value))
        return tuple(items)
    return repr(expr)


def _factors(expr: PrimExpr) -> tuple[int, list[Any]]:
    """``expr`` as (constant coefficient, sorted factor keys) when it is a product, so that
    ``n * m`` and ``m * n`` compare equal; a non-product is its own single factor."""
    coefficient = 1
    keys: list[Any] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Mul):
            stack.extend((node.a, node.b))
        elif isinstance(node, IntImm):
            coefficient *= node.value
        else:
            keys.append(_key(node))
    return coefficient, sorted(keys, key=repr)


def _product_terms(expr: PrimExpr) -> tuple[int, list[PrimExpr]]:
    """``expr`` as (constant coefficient, the other factors) when it is a product."""
    coefficient = 1
    terms: list[PrimExpr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Mul):
            stack.extend((node.b, node.a))
        elif isinstance(node, IntImm):
            coefficient *= node.value
        else:
            terms.append(node)
    return coefficient, terms


def _product_quotient(value: PrimExpr, divisor: PrimExpr) -> PrimExpr | None:
    """``value / divisor`` when both are products and ``divisor`` divides ``value`` factor by
    factor (``n * 16384 / (n * 128)`` is 128: a fused symbolic extent), else None."""
    divisor_coefficient, divisor_terms = _product_terms(divisor)
    value_coefficient, value_terms = _product_terms(value)
    if divisor_coefficient <= 0 or value_coefficient % divisor_coefficient:
        return None
    remaining = [(_key(term), term) for term in value_terms]
    for term in divisor_terms:
        key = _key(term)
        position = next((k for k, (other, _) in enumerate(remaining) if other == key), None)
        if position is None:
            return None
        del remaining[position]
    result: PrimExpr = IntImm(value_coefficient // divisor_coefficient, value.dtype)
    for _, term in remaining:
        result = term if _is_int(result, 1) else Mul(result, _like(term, result))
    return result


def _product_divides(divisor: PrimExpr, value: PrimExpr) -> bool:
    """Whether the product ``divisor`` divides the product ``value`` factor by factor:
    ``n * 128`` divides ``n * 16384`` (a fused symbolic extent), ``n`` divides ``4 * n * m``."""
    return _product_quotient(value, divisor) is not None


class _Fail(Exception):
    """Detection of one binding failed; the message says why."""


# ---------------------------------------------------------------- detection


class _Detector:
    """Rewrites expressions into ``IterSum`` s over one domain and checks their digits."""

    def __init__(self, dom_map: Mapping[Var, Range], dtype: Any, var_ranges: Mapping[Var, Range] | None = None) -> None:
        self.dom_map: dict[Var, Range] = dict(dom_map)
        self.dtype = dtype
        self.analyzer = Analyzer()
        for var, dom in (var_ranges or {}).items():
            if var not in self.dom_map:
                self.analyzer.bind(var, dom)
        for var, dom in self.dom_map.items():
            self.analyzer.bind(var, dom)
        self.var_marks: dict[Var, IterMark] = {}
        self.fused_marks: dict[Any, IterMark] = {}
        # Predicate bounds: key of a sum's args -> exclusive upper bound of the sum minus its base.
        self.upper: dict[Any, PrimExpr] = {}
        self.lower: dict[Any, PrimExpr] = {}
        self._extent_memo: dict[Any, tuple[IterMark, PrimExpr]] = {}
        # Chains of splits the predicate bounds: sums containing one are regrouped around it.
        self.bounded_chains: dict[Any, list[IterSplit]] = {}
        # Bound keys some conversion or check relied on (a bijective map must use every cut).
        self.consulted: set[Any] = set()
        # Upper-bound keys the last reading of the predicate stored to (earlier readings may
        # have left keys of forms the bounds since simplified away).
        self.touched: set[Any] = set()
        for var, dom in self.dom_map.items():
            for bound in (dom.min, dom.extent):
                if any(self._is_iter_var(v) for v in free_vars(bound)):
                    raise _Fail(f"the range of {var.name} depends on another iterator (non-rectangular loop nest)")

    # ------------------------------------------------------------ arithmetic on extents

    def const(self, value: int) -> IntImm:
        return IntImm(value, self.dtype)

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        return self.analyzer.simplify(expr)

    def norm(self, expr: PrimExpr | int) -> PrimExpr:
        """Python ints and constants of another integer dtype as constants of the map's dtype."""
        if isinstance(expr, int):
            return self.const(expr)
        if isinstance(expr, IntImm) and expr.dtype != self.dtype:
            return self.const(expr.value)
        return expr

    def mul(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(a.value * b.value, a.dtype)
        return self.simplify(Mul(a, _like(b, a)))

    def add(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(a.value + b.value, a.dtype)
        return self.simplify(Add(a, _like(b, a)))

    def sub(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(a.value - b.value, a.dtype)
        return self.simplify(Sub(a, _like(b, a)))

    def floordiv(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(a.value // b.value, a.dtype)
        if _is_int(a, 0) or _is_int(b, 1):
            return a
        quotient = self._quotient(a, b)
        if quotient is not None:
            return self.simplify(quotient)
        return self.simplify(FloorDiv(a, _like(b, a)))

    def _quotient(self, value: PrimExpr, divisor: PrimExpr) -> PrimExpr | None:
        """``value / divisor`` when ``value`` is structurally a multiple of it, else None."""
        if isinstance(divisor, IntImm):
            return None
        if self.eq(value, divisor):
            return self.norm(1)
        if isinstance(value, Mul):
            left = self._quotient(value.a, divisor)
            if left is not None:
                return Mul(left, _like(value.b, left))
            right = self._quotient(value.b, divisor)
            if right is not None:
                return Mul(value.a, _like(right, value.a))
            return _product_quotient(value, divisor)
        if isinstance(value, (Add, Sub)):
            left, right = self._quotient(value.a, divisor), self._quotient(value.b, divisor)
            if left is None or right is None:
                return None
            return type(value)(left, _like(right, left))
        return _product_quotient(value, divisor)

    def floormod(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(a.value % b.value, a.dtype)
        return self.simplify(FloorMod(a, _like(b, a)))

    def ceildiv(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(-(-a.value // b.value), a.dtype)
        if self._quotient(a, b) is not None or _is_int(b, 1):
            return self.floordiv(a, b)
        return self.floordiv(self.add(a, self.sub(b, self.norm(1))), b)

    def eq(self, a: PrimExpr, b: PrimExpr) -> bool:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return a.value == b.value
        if _factors(a) == _factors(b):
            return True
        return self.analyzer.can_prove_equal(a, _like(b, a))

    def le(self, a: PrimExpr, b: PrimExpr) -> bool:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return a.value <= b.value
        if _factors(a) == _factors(b):
            return True
        return self.analyzer.can_prove(a <= _like(b, a))

    def lt(self, a: PrimExpr, b: PrimExpr) -> bool:
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return a.value < b.value
        return self.analyzer.can_prove(a < _like(b, a))

    def divides(self, divisor: PrimExpr, value: PrimExpr) -> bool:
        """Whether ``divisor`` provably divides ``value``."""
        if isinstance(divisor, IntImm) and isinstance(value, IntImm):
            return divisor.value != 0 and value.value % divisor.value == 0
        if _is_int(divisor, 1) or self._is_multiple(value, divisor) or _product_divides(divisor, value):
            return True
        return self.eq(self.floormod(value, divisor), self.norm(0))

    def _is_multiple(self, value: PrimExpr, divisor: PrimExpr) -> bool:
        """Structural divisibility: ``value`` is ``divisor`` times something, or a sum of such."""
        if self.eq(value, divisor) or _is_int(value, 0):
            return True
        if isinstance(value, Mul):
            return self._is_multiple(value.a, divisor) or self._is_multiple(value.b, divisor)
        if isinstance(value, (Add, Sub)):
            return self._is_multiple(value.a, divisor) and self._is_multiple(value.b, divisor)
        return False

    def emin(self, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if self.le(a, b):
            return a
        if self.le(b, a):
            return b
        return self.simplify(Min(a, _like(b, a)))

    # ------------------------------------------------------------ marks and keys

    def _is_iter_var(self, var: Var) -> bool:
        return var in self.dom_map

    def uses_iters(self, expr: PrimExpr) -> bool:
        return any(self._is_iter_var(v) for v in free_vars(expr))

    def var_mark(self, var: Var) -> IterMark:
        mark = self.var_marks.get(var)
        if mark is None:
            dom = self.dom_map[var]
            mark = IterMark(var, dom.extent, dom.min)
            self.var_marks[var] = mark
        return mark

    def split_key(self, split: IterSplit) -> Any:
        return (id(split.mark), _key(split.lower_factor), _key(split.extent), _key(split.scale))

    def args_key(self, args: Sequence[IterSplit]) -> Any:
        return frozenset(self.split_key(s) for s in args)

    def mark_key(self, mark: IterMark) -> Any:
        """The key of the sum whose values the mark takes (predicates are stored under it)."""
        if isinstance(mark.source, IterSum):
            return self.args_key(mark.source.args)
        return self.args_key([IterSplit(mark, self.norm(1), mark.extent, self.norm(1))])

    def effective_extent(self, mark: IterMark) -> PrimExpr:
        """The mark's extent, cut by an upper bound from the predicate.

        A bound on the upper digits of a fused mark cuts it too: with ``g = i * 2 + j < 3``,
        the mark ``i * 6 + j * 3 + k`` (``k < 3``) stays below ``3 * 3``.
        """
        memo_key = (id(mark), len(self.upper), tuple(self.upper.values()))
        cached = self._extent_memo.get(memo_key)
        if cached is not None and cached[0] is mark:
            return cached[1]
        extent = mark.extent
        bound = self.upper.get(self.mark_key(mark))
        if bound is not None:
            self.consulted.add(self.mark_key(mark))
            extent = self.emin(extent, bound)
        if isinstance(mark.source, IterSum) and len(mark.source.args) > 1 and self.upper:
            ordered = list(reversed(mark.source.args))  # scale 1 first
            total: PrimExpr = self.norm(1)
            for split in ordered:
                total = self.mul(total, self.split_extent(split))
            extent = self.emin(extent, total)
            below: PrimExpr = self.norm(1)
            for k in range(1, len(ordered)):
                below = self.mul(below, ordered[k - 1].extent)
                upper_part = [
                    IterSplit(s.mark, s.lower_factor, s.extent, self.floordiv(s.scale, below)) for s in ordered[k:]
                ]
                part_key = self.args_key(upper_part)
                if len(upper_part) == 1 and self._is_whole(upper_part[0]):
                    part_key = self.mark_key(upper_part[0].mark)
                part_bound = self.upper.get(part_key)
                if part_bound is not None:
                    self.consulted.add(part_key)
                    extent = self.emin(extent, self.mul(part_bound, below))
        self._extent_memo[memo_key] = (mark, extent)
        return extent

    def is_top(self, split: IterSplit) -> bool:
        return self.le(self.effective_extent(split.mark), self.mul(split.lower_factor, split.extent))

    def split_extent(self, split: IterSplit) -> PrimExpr:
        """How many values the digit takes (a top digit is cut by the mark's effective extent,
        any digit by a bound the predicate puts on it)."""
        extent = split.extent
        if self.is_top(split):
            extent = self.ceildiv(self.effective_extent(split.mark), split.lower_factor)
        if self.upper:
            key = self.unit_key(split)
            bound = self.upper.get(key)
            if bound is not None:
                self.consulted.add(key)
                extent = self.emin(extent, bound)
        return extent

    # ------------------------------------------------------------ sums

    def make_sum(self, args: Sequence[IterSplit], base: PrimExpr) -> IterSum:
        """Collect like splits, drop zero terms, merge adjacent digits of one mark."""
        merged: list[IterSplit] = []
        for split in args:
            if _is_int(split.scale, 0) or _is_int(split.extent, 1) or _is_int(self.split_extent(split), 1):
                continue  # zero terms, and digits the predicate pins to 0
            for k, other in enumerate(merged):
                if (
                    other.mark is split.mark
                    and self.eq(other.lower_factor, split.lower_factor)
                    and self.eq(other.extent, split.extent)
                ):
                    scale = self.add(other.scale, split.scale)
                    merged[k] = IterSplit(other.mark, other.lower_factor, other.extent, scale)
                    break
            else:
                merged.append(split)
        merged = [self.unwrap(s) for s in merged if not _is_int(s.scale, 0)]
        changed = True
        while changed:
            changed = False
            for a in merged:
                for b in merged:
                    joined = None if a is b else self.join(a, b)
                    if joined is not None:
                        merged = [s for s in merged if s is not a and s is not b] + [self.unwrap(joined)]
                        changed = True
                        break
                if changed:
                    break
        if self.bounded_chains and len(merged) > 1:
            merged = self.regroup(merged)
        merged.sort(key=lambda s: -s.scale.value if isinstance(s.scale, IntImm) else 0)
        return IterSum(tuple(merged), base)

    def regroup(self, args: list[IterSplit]) -> list[IterSplit]:
        """Replace a scaled copy of a bounded chain among ``args`` by its fused mark.

        ``s3 * 3 + s5 * 2 + s6`` with ``s5 * 2 + s6 < 3`` known is ``s3 * 3 + g`` where ``g``
        (extent 3) is the fused ``s5 * 2 + s6``: a chain again.
        """
        for chain in self.bounded_chains.values():
            if len(chain) > len(args):
                continue
            picked: list[IterSplit] = []
            factor: PrimExpr | None = None
            for part in chain:
                match = next(
                    (
                        a
                        for a in args
                        if a.mark is part.mark
                        and self.eq(a.lower_factor, part.lower_factor)
                        and self.eq(a.extent, part.extent)
                    ),
                    None,
                )
                if match is None:
                    break
                if factor is None:
                    factor = match.scale  # the chain's first scale is 1
                elif not self.eq(match.scale, self.mul(factor, part.scale)):
                    break
                picked.append(match)
            else:
                assert factor is not None
                fused = self.fuse(chain, "a bounded sum")
                rest = [a for a in args if all(a is not p for p in picked)]
                return [*rest, IterSplit(fused.mark, fused.lower_factor, fused.extent, factor)]
        return args

    def wrapped_digit(self, mark: IterMark) -> IterSplit | None:
        """The digit a wrapped mark stands for (see ``wrap``), or None."""
        source = mark.source
        if isinstance(source, IterSum) and len(source.args) == 1 and _is_int(source.args[0].scale, 1):
            return source.args[0]
        return None

    def unwrap(self, split: IterSplit) -> IterSplit:
        """A whole wrapped mark, scaled, is its digit, scaled."""
        digit = self.wrapped_digit(split.mark)
        if digit is not None and _is_int(split.lower_factor, 1) and self.le(split.mark.extent, split.extent):
            return IterSplit(digit.mark, digit.lower_factor, digit.extent, split.scale)
        return split

    def join(self, a: IterSplit, b: IterSplit) -> IterSplit | None:
        """``a + b`` as one split when ``b`` holds the digits just above ``a``'s, else None."""
        if not self.eq(b.scale, self.mul(a.scale, a.extent)):
            return None
        if a.mark is b.mark:
            if self.eq(b.lower_factor, self.mul(a.lower_factor, a.extent)):
                return IterSplit(a.mark, a.lower_factor, self.mul(a.extent, b.extent), a.scale)
            return None
        # x % c (a digit of the mark wrapping x) plus x // c (a digit of x's own mark) is x.
        digit = self.wrapped_digit(a.mark)
        if digit is None or b.mark is not digit.mark or not _is_int(a.lower_factor, 1):
            return None
        if not self.eq(b.lower_factor, self.mul(digit.lower_factor, a.extent)):
            return None
        if self.is_top(b) or self.eq(self.mul(b.lower_factor, b.extent), self.mul(digit.lower_factor, digit.extent)):
            return IterSplit(digit.mark, digit.lower_factor, digit.extent, a.scale)
        return None

    def scale_sum(self, value: IterSum, factor: PrimExpr) -> IterSum:
        args = [IterSplit(s.mark, s.lower_factor, s.extent, self.mul(s.scale, factor)) for s in value.args]
        return self.make_sum(args, self.mul(value.base, factor))

    def chain(self, args: Sequence[IterSplit]) -> list[IterSplit] | None:
        """``args`` ordered as a mixed-radix chain (scales 1, e0, e0*e1, ...), or None."""
        remaining = list(args)
        expected: PrimExpr = self.norm(1)
        ordered: list[IterSplit] = []
        while remaining:
            found = next((s for s in remaining if self.eq(s.scale, expected)), None)
            if found is None:
                return None
            ordered.append(found)
            remaining.remove(found)
            expected = self.mul(expected, self.split_extent(found))
        return ordered

    def fuse(self, args: Sequence[IterSplit], what: str) -> IterSplit:
        """The sum of ``args`` as one digit with scale 1 (a new fused mark when needed)."""
        if len(args) == 1 and _is_int(args[0].scale, 1):
            digit = args[0]
            if not self._is_whole(digit) and self.args_key([digit]) in self.upper:
                # The predicate bounds this digit: go through a mark that knows the bound.
                wrapped = self.wrap(digit)
                return IterSplit(wrapped, self.norm(1), wrapped.extent, self.norm(1))
            return digit
        ordered = self.chain(args)
        if ordered is None:
            shown = " + ".join(str(s) for s in args)
            raise _Fail(f"cannot fuse {shown} into one iterator for {what}: the scales do not form a mixed-radix chain")
        key = self.args_key(ordered)
        mark = self.fused_marks.get(key)
        if mark is None:
            extent = self.norm(1)
            for split in ordered:
                extent = self.mul(extent, self.split_extent(split))
            mark = IterMark(IterSum(tuple(reversed(ordered)), self.norm(0)), extent)
            self.fused_marks[key] = mark
        return IterSplit(mark, self.norm(1), mark.extent, self.norm(1))

    def wrap(self, split: IterSplit) -> IterMark:
        """A mark whose values are one (unscaled) digit of another mark."""
        key = self.args_key([split])
        mark = self.fused_marks.get(key)
        if mark is None:
            mark = IterMark(IterSum((split,), self.norm(0)), split.extent)
            self.fused_marks[key] = mark
        return mark

    # ------------------------------------------------------------ expressions -> sums

    def convert(self, expr: PrimExpr) -> IterSum:
        if not self.uses_iters(expr):
            return IterSum((), expr if isinstance(expr, (IntImm, Var)) else self.simplify(expr))
        if isinstance(expr, Var):
            dom = self.dom_map[expr]
            if _is_int(dom.extent, 1):
                return IterSum((), dom.min)
            mark = self.var_mark(expr)
            return IterSum((IterSplit(mark, self.norm(1), dom.extent, self.norm(1)),), dom.min)
        if isinstance(expr, Add):
            a, b = self.convert(expr.a), self.convert(expr.b)
            return self.make_sum(a.args + b.args, self.add(a.base, b.base))
        if isinstance(expr, Sub):
            a, b = self.convert(expr.a), self.scale_sum(self.convert(expr.b), self.norm(-1))
            return self.make_sum(a.args + b.args, self.add(a.base, b.base))
        if isinstance(expr, Mul):
            if self.uses_iters(expr.a) and self.uses_iters(expr.b):
                raise _Fail(f"{expr} multiplies two iterator expressions (not affine)")
            varying, factor = (expr.a, expr.b) if self.uses_iters(expr.a) else (expr.b, expr.a)
            return self.scale_sum(self.convert(varying), factor)
        if isinstance(expr, (FloorDiv, FloorMod)):
            if self.uses_iters(expr.b):
                raise _Fail(f"{expr} divides by an iterator expression")
            if not self.lt(self.norm(0), expr.b):
                raise _Fail(f"{expr} divides by {expr.b}, which is not provably positive")
            dividend = self.convert(expr.a)
            if isinstance(expr, FloorDiv):
                return self.divide(dividend, expr.b, str(expr))
            return self.modulo(dividend, expr.b, str(expr))
        if isinstance(expr, Cast) and expr.dtype.is_int and expr.value.dtype.is_int:
            return self.convert(expr.value)
        if isinstance(expr, Let):
            return self.convert(substitute(expr.body, {expr.var: expr.value}))
        raise _Fail(f"{expr} is not quasi-affine ({type(expr).__name__} of iterators)")

    def _common_scale(self, value: IterSum, divisor: PrimExpr) -> int:
        """The gcd of the constant scales when it divides a constant divisor and the base."""
        scales = [s.scale.value for s in value.args if isinstance(s.scale, IntImm)]
        if len(scales) != len(value.args) or not isinstance(divisor, IntImm):
            return 1
        g = 0
        for scale in scales:
            g = math.gcd(g, abs(scale))
        if g > 1 and divisor.value % g == 0 and self.divides(self.norm(g), value.base):
            return g
        return 1

    def divide(self, value: IterSum, divisor: PrimExpr, what: str) -> IterSum:
        divisor = self.norm(divisor)
        if not value.args:
            return IterSum((), self.floordiv(value.base, divisor))
        if all(self.divides(divisor, s.scale) for s in value.args):
            args = [IterSplit(s.mark, s.lower_factor, s.extent, self.floordiv(s.scale, divisor)) for s in value.args]
            return self.make_sum(args, self.floordiv(value.base, divisor))
        g = self._common_scale(value, divisor)
        if g > 1:
            gc = self.norm(g)
            value = self.make_sum(
                [IterSplit(s.mark, s.lower_factor, s.extent, self.floordiv(s.scale, gc)) for s in value.args],
                self.floordiv(value.base, gc),
            )
            divisor = self.floordiv(divisor, gc)
        digit = self.fuse(value.args, what)
        if not self.divides(divisor, value.base):
            raise _Fail(f"{what}: the offset {value.base} is not a multiple of {divisor}")
        return self.make_sum([self.split_div(digit, divisor)], self.floordiv(value.base, divisor))

    def split_div(self, digit: IterSplit, divisor: PrimExpr) -> IterSplit:
        mark, lower = digit.mark, self.mul(digit.lower_factor, divisor)
        if self.divides(divisor, self.split_extent(digit)):
            return IterSplit(mark, lower, self.floordiv(self.split_extent(digit), divisor), self.norm(1))
        if self.is_top(digit):
            return IterSplit(mark, lower, self.ceildiv(self.split_extent(digit), divisor), self.norm(1))
        wrapped = self.wrap(digit)
        return IterSplit(wrapped, divisor, self.ceildiv(digit.extent, divisor), self.norm(1))

    def modulo(self, value: IterSum, divisor: PrimExpr, what: str) -> IterSum:
        divisor = self.norm(divisor)
        if not value.args:
            return IterSum((), self.floormod(value.base, divisor))
        if all(self.divides(divisor, s.scale) for s in value.args):
            return IterSum((), self.floormod(value.base, divisor))
        g = self._common_scale(value, divisor)
        if g > 1:
            gc = self.norm(g)
            inner = self.make_sum(
                [IterSplit(s.mark, s.lower_factor, s.extent, self.floordiv(s.scale, gc)) for s in value.args],
                self.floordiv(value.base, gc),
            )
            return self.scale_sum(self.modulo(inner, self.floordiv(divisor, gc), what), gc)
        digit = self.fuse(value.args, what)
        if not self.divides(divisor, value.base):
            raise _Fail(f"{what}: the offset {value.base} is not a multiple of {divisor}")
        return self.make_sum([self.split_mod(digit, divisor)], self.norm(0))

    def split_mod(self, digit: IterSplit, divisor: PrimExpr) -> IterSplit:
        extent = self.split_extent(digit)
        if self.le(extent, divisor):
            return digit
        if self.divides(divisor, extent) or self.is_top(digit):
            # mark // lower % divisor: exact when the divisor divides the digit's extent, and
            # always for a top digit (it has no "% extent" of its own).
            return IterSplit(digit.mark, digit.lower_factor, divisor, self.norm(1))
        wrapped = self.wrap(digit)
        return IterSplit(wrapped, self.norm(1), divisor, self.norm(1))

    # ------------------------------------------------------------ predicate

    def add_predicate(self, predicate: PrimExpr, strict: bool) -> int:
        """Record the bounds the predicate puts on iterator sums.

        A bound can change how another conjunct normalizes (``f % 5`` is a plain digit once
        ``f < 5`` is known), so the conjuncts are read again until the bounds settle.
        """
        conjuncts = [c for c in _conjuncts(predicate) if self.uses_iters(c)]
        for _ in range(6):
            before = (dict(self.upper), dict(self.lower), set(self.bounded_chains))
            self.touched = set()
            unsupported = []
            for conjunct in conjuncts:
                if not self._add_bound(conjunct):
                    unsupported.append(conjunct)
            if (self.upper, self.lower, set(self.bounded_chains)) == before:
                break
        if strict and unsupported:
            raise _Fail(f"the predicate {unsupported[0]} is not an upper bound of an iterator sum")
        return len(unsupported)

    def _add_bound(self, conjunct: PrimExpr) -> bool:
        if not isinstance(conjunct, (LT, LE, GT, GE)):
            return False
        a, b = conjunct.a, conjunct.b
        if isinstance(conjunct, (GT, GE)):
            a, b = b, a  # now a < b or a <= b
        inclusive = isinstance(conjunct, (LE, GE))
        if self.uses_iters(a) and not self.uses_iters(b):
            value = _convert_with_fallback(self, a)
            if not value.args:
                return True
            bound = self.sub(self.add(b, self.norm(1)) if inclusive else b, value.base)
            return self._record(value, bound, self.upper)
        if self.uses_iters(b) and not self.uses_iters(a):
            value = _convert_with_fallback(self, b)  # a < b: lower bound on b
            if not value.args:
                return True
            bound = self.sub(self.add(a, self.norm(0 if inclusive else 1)), value.base)
            self._record(value, bound, self.lower)
            return False  # lower bounds only cut ranges; they do not make maps exact
        return False

    def _is_whole(self, split: IterSplit) -> bool:
        """Whether ``split`` is its whole mark, unscaled."""
        return (
            _is_int(split.scale, 1)
            and _is_int(split.lower_factor, 1)
            and self.le(self.effective_extent(split.mark), split.extent)
        )

    def unit_key(self, split: IterSplit) -> Any:
        """The key bounds on the (unscaled) digit ``split`` are stored under."""
        if _is_int(split.lower_factor, 1) and self.le(split.mark.extent, split.extent):
            return self.mark_key(split.mark)
        return self.args_key([IterSplit(split.mark, split.lower_factor, split.extent, self.norm(1))])

    def _record(self, value: IterSum, bound: PrimExpr, table: dict[Any, PrimExpr]) -> bool:
        """Record ``value - value.base < bound`` (upper table) or ``>= bound`` (lower table)."""
        if any(not _is_int(s.scale) or s.scale.value < 0 for s in value.args):  # type: ignore[union-attr]
            return False
        ordered = self.chain(value.args)
        if table is self.upper and ordered is not None:
            self._bound_chain(ordered, bound)
            return True
        args = ordered if ordered is not None else list(value.args)
        key = self.args_key(args)
        if len(args) == 1 and self._is_whole(args[0]):
            key = self.mark_key(args[0].mark)
        self._store(key, bound, table)
        return True

    def _bound_chain(self, ordered: list[IterSplit], bound: PrimExpr) -> None:
        """An upper bound on a chain sum (``ordered``: scale 1 first).

        A bound that only cuts the top digit (``bound`` a multiple of the digits below) is
        a bound on that digit, so the chain stays a box; a bound of 1 pins every digit.
        """
        if _is_int(bound) and bound.value <= 0:  # type: ignore[union-attr]
            shown = " + ".join(str(s) for s in ordered)
            raise _Fail(f"the predicate bounds {shown} below its smallest value: it is never true")
        if len(ordered) == 1:
            self._bound_digit(ordered[0], bound)
            return
        below: PrimExpr = self.norm(1)
        for split in ordered[:-1]:
            below = self.mul(below, self.split_extent(split))
        if self.le(self.mul(below, self.split_extent(ordered[-1])), bound):
            return  # the bound cuts nothing
        if _is_int(bound, 1):
            for split in ordered:
                self._bound_digit(split, bound)
        elif self.divides(below, bound):
            self._bound_digit(ordered[-1], self.floordiv(bound, below))
        else:
            key = self.args_key(ordered)
            self.bounded_chains[key] = ordered
            self._store(key, bound, self.upper)

    def _bound_digit(self, split: IterSplit, bound: PrimExpr) -> None:
        """An upper bound on the (unscaled) value of one digit."""
        unit = IterSplit(split.mark, split.lower_factor, split.extent, self.norm(1))
        mark = split.mark
        # Compare with the extent before bounds: the bound may be this very one, read again.
        raw = split.extent
        if self.le(mark.extent, self.mul(split.lower_factor, split.extent)):
            raw = self.ceildiv(mark.extent, split.lower_factor)
        if self.le(raw, bound):
            return
        if self.is_top(unit):
            # A bound on the top digit bounds the whole mark.
            mark_bound = self.mul(bound, unit.lower_factor)
            if isinstance(mark.source, IterSum) and len(mark.source.args) > 1:
                self._bound_chain(list(reversed(mark.source.args)), mark_bound)
            else:
                self._store(self.mark_key(mark), mark_bound, self.upper)
        else:
            self._store(self.unit_key(unit), bound, self.upper)

    def _store(self, key: Any, bound: PrimExpr, table: dict[Any, PrimExpr]) -> None:
        if table is self.upper:
            self.touched.add(key)
        old = table.get(key)
        if old is not None:
            bound = self.emin(old, bound) if table is self.upper else self.simplify(Max(old, _like(bound, old)))
        table[key] = bound

    # ------------------------------------------------------------ ranges

    def value_range(self, value: IterSum) -> tuple[PrimExpr, PrimExpr, bool]:
        """``(min, extent, exact)`` of the values of ``value``; raises when they have gaps."""
        if not value.args:
            return value.base, self.norm(1), True
        for split in value.args:
            if not isinstance(split.scale, IntImm) and not self.lt(self.norm(0), split.scale):
                raise _Fail(f"the scale {split.scale} of {split} is not provably positive")
        low = value.base
        terms: list[tuple[PrimExpr, PrimExpr]] = []  # (|scale|, extent)
        for split in value.args:
            extent = self.split_extent(split)
            if _is_int(extent, 1):
                continue  # a digit the predicate pins to 0
            scale = split.scale
            if isinstance(scale, IntImm) and scale.value < 0:
                low = self.add(low, self.mul(scale, self.sub(extent, self.norm(1))))
                scale = self.norm(-scale.value)
            terms.append((scale, extent))
        remaining = list(terms)
        reach: PrimExpr = self.norm(1)  # values 0 .. reach - 1 are reachable so far
        exact = True
        while remaining:
            found = next((t for t in remaining if self.eq(t[0], reach)), None)
            if found is None:
                found = next((t for t in remaining if self.le(t[0], reach)), None)
                exact = False
            if found is None:
                shown = " + ".join(str(s) for s in value.args)
                raise _Fail(f"the values of {shown} have gaps (not surjective onto an interval)")
            remaining.remove(found)
            reach = self.add(reach, self.mul(found[0], self.sub(found[1], self.norm(1))))
        extent = reach
        key = self.args_key(value.args)
        if len(value.args) == 1 and self._is_whole(value.args[0]):
            key = self.mark_key(value.args[0].mark)
        upper = self.upper.get(key)
        lower = self.lower.get(key)
        if upper is not None:
            self.consulted.add(key)
        # Bounds are on the sum minus its base, whose smallest value is low - base.
        shift = self.sub(low, value.base)
        if upper is not None:
            extent = self.emin(extent, self.sub(upper, shift))
        if lower is not None:
            start = self.sub(lower, shift)
            if self.lt(self.norm(0), start) and self.le(start, extent):
                extent = self.sub(extent, start)
                low = self.add(low, start)
        return low, extent, exact


def _conjuncts(expr: PrimExpr) -> list[PrimExpr]:
    if isinstance(expr, And):
        return _conjuncts(expr.a) + _conjuncts(expr.b)
    return [expr]


# ---------------------------------------------------------------- digit bookkeeping


@dataclass
class _Use:
    """Digit positions ``[low, high)`` of a mark (high None: to the top) used by ``owners``."""

    low: PrimExpr
    high: PrimExpr | None
    owners: frozenset[int]


class _Digits:
    """Which digits of which marks the bindings use, followed from fused marks to loops.

    Marks are processed parents first (a fused mark before the marks in its source). At each
    mark the uses must be disjoint and combine freely; then the runs of contiguous uses of a
    fused mark become uses of its source digits (owned by every binding of the run).
    """

    def __init__(self, det: _Detector) -> None:
        self.det = det
        self.uses: dict[int, list[_Use]] = {}
        self.marks: dict[int, IterMark] = {}

    def add_split(self, split: IterSplit, owner: int) -> None:
        det = self.det
        if _is_int(det.split_extent(split), 1):
            return
        high = None if det.is_top(split) else det.mul(split.lower_factor, split.extent)
        self._add(split.mark, _Use(split.lower_factor, high, frozenset([owner])))

    def _add(self, mark: IterMark, use: _Use) -> None:
        if _is_int(self.det.effective_extent(mark), 1):
            return  # the predicate pins the mark to 0: it carries no digits
        self.marks[id(mark)] = mark
        self.uses.setdefault(id(mark), []).append(use)

    def _order(self) -> list[IterMark]:
        """Every mark reachable from the used ones, each fused mark before its sources."""
        order: list[IterMark] = []
        visited: set[int] = set()

        def visit(mark: IterMark) -> None:
            if id(mark) in visited:
                return
            visited.add(id(mark))
            if isinstance(mark.source, IterSum):
                for split in mark.source.args:
                    visit(split.mark)
            order.append(mark)

        for mark in list(self.marks.values()):
            visit(mark)
        for var, dom in self.det.dom_map.items():
            if not _is_int(dom.extent, 1):
                visit(self.det.var_mark(var))
        return list(reversed(order))

    def check(self, bijective: bool, describe: Any) -> tuple[list[str], list[Var]]:
        """Overlap, combination and (bijective) coverage errors, and partly unused loop vars."""
        errors: list[str] = []
        unused: list[Var] = []
        for mark in self._order():
            uses = self._sorted(self.uses.get(id(mark), []))
            name = mark.source.name if isinstance(mark.source, Var) else str(mark.value_expr())
            problem = self._check_mark(uses, self.det.effective_extent(mark), name, describe)
            if problem:
                errors.append(problem)
                continue
            if isinstance(mark.source, IterSum):
                # Widening at unaligned positions loses precision: check fused marks themselves.
                fused = len(mark.source.args) > 1
                if bijective and fused and uses and not self._covers(uses, self.det.effective_extent(mark), mark):
                    errors.append(f"not every value of {name} is used: the map is not injective")
                    continue
                for run in self._runs(uses):
                    self._propagate(mark, run)
            elif not self._covers(uses, self.det.effective_extent(mark), mark):
                if bijective:
                    errors.append(f"not every iteration of {name} is used: the map is not injective")
                unused.append(mark.source)
        return errors, unused

    def _sorted(self, uses: list[_Use]) -> list[_Use]:
        det = self.det
        ordered: list[_Use] = []
        for use in uses:
            position = len(ordered)
            for k, other in enumerate(ordered):
                if det.lt(use.low, other.low) or (det.le(use.low, other.low) and not det.le(other.low, use.low)):
                    position = k
                    break
            ordered.insert(position, use)
        return ordered

    def _check_mark(self, uses: list[_Use], effective: PrimExpr, name: str, describe: Any) -> str | None:
        det = self.det
        for first, second in zip(uses, uses[1:]):
            if first.high is None or not det.le(first.high, second.low):
                a, b = min(first.owners), min(second.owners)
                if a != b:
                    return f"{name} is used by two bindings ({describe(a)} and {describe(b)}): they are not independent"
                return f"{describe(a)} uses the same digits of {name} twice"
        if len(uses) > 1:
            for first, second in zip(uses, uses[1:]):
                assert first.high is not None
                if not det.divides(first.high, second.low):
                    return f"the digits of {name} used by the bindings do not combine freely"
            top = uses[-1]
            if (top.high is None or not det.le(top.high, effective)) and not det.divides(top.low, effective):
                return (
                    f"{name} (extent {effective}) is split at {top.low}, which does not divide it: "
                    "the bindings do not cover a box"
                )
        return None

    def _pinned(self, mark: IterMark | None, low: PrimExpr, high: PrimExpr) -> bool:
        """Whether the predicate pins the digits ``[low, high)`` of ``mark`` to 0."""
        det = self.det
        if mark is None or not det.lt(low, high) or not det.divides(low, high):
            return False
        digit = IterSplit(mark, low, det.floordiv(high, low), det.norm(1))
        return _is_int(det.split_extent(digit), 1)

    def _runs(self, uses: list[_Use]) -> list[_Use]:
        """Contiguous uses merged into one (their owners together)."""
        runs: list[_Use] = []
        for use in uses:
            last = runs[-1] if runs else None
            if last is not None and last.high is not None and self.det.eq(last.high, use.low):
                runs[-1] = _Use(last.low, use.high, last.owners | use.owners)
            else:
                runs.append(use)
        return runs

    def _propagate(self, mark: IterMark, use: _Use) -> None:
        """Uses of the source digits of a fused mark that ``use`` depends on."""
        det = self.det
        assert isinstance(mark.source, IterSum)
        ordered = list(reversed(mark.source.args))  # scale 1 first
        bounds: list[PrimExpr] = [det.norm(1)]
        for split in ordered[:-1]:
            bounds.append(det.mul(bounds[-1], det.split_extent(split)))
        # Positions not aligned with the source digits widen the use (conservatively).
        low = use.low
        for k, boundary in enumerate(bounds):
            upper = bounds[k + 1] if k + 1 < len(bounds) else None
            inside = det.le(boundary, low) and (upper is None or det.lt(low, upper))
            if inside and not (det.divides(boundary, low) and (upper is None or det.divides(low, upper))):
                low = boundary
        high = use.high
        if high is not None:
            for k, boundary in enumerate(bounds):
                upper = bounds[k + 1] if k + 1 < len(bounds) else None
                inside = det.lt(boundary, high) and (upper is None or det.lt(high, upper))
                if inside and not (det.divides(boundary, high) and (upper is None or det.divides(high, upper))):
                    high = upper
        for k, split in enumerate(ordered):
            boundary = bounds[k]
            upper = bounds[k + 1] if k + 1 < len(bounds) else None
            part_low = low if det.le(boundary, low) else boundary
            if high is None:
                part_high = upper
            elif upper is None:
                part_high = high
            else:
                part_high = high if det.le(high, upper) else upper
            if part_high is not None and not det.lt(part_low, part_high):
                continue
            if upper is not None and not det.lt(part_low, upper):
                continue
            inner_low = det.mul(split.lower_factor, det.floordiv(part_low, boundary))
            if part_high is None or (upper is not None and det.le(upper, part_high)):
                inner_high = None if det.is_top(split) else det.mul(split.lower_factor, split.extent)
            else:
                inner_high = det.mul(split.lower_factor, det.floordiv(part_high, boundary))
            self._add(split.mark, _Use(inner_low, inner_high, use.owners))

    def _covers(self, uses: list[_Use], effective: PrimExpr, mark: IterMark | None = None) -> bool:
        det = self.det
        position: PrimExpr = det.norm(1)
        for use in uses:
            if not det.eq(use.low, position) and not self._pinned(mark, position, use.low):
                return False
            if use.high is None:
                return True
            position = use.high
        return det.le(effective, position)


# ---------------------------------------------------------------- public entry points


def detect_iter_map(
    bindings: Sequence[PrimExpr],
    dom_map: Mapping[Var, Range],
    predicate: PrimExpr | bool = True,
    check_level: CheckLevel = "surjective",
    var_ranges: Mapping[Var, Range] | None = None,
) -> IterMapResult:
    """Express each binding as an ``IterSum`` over ``dom_map`` and check independence.

    See the module docstring for what ``"surjective"`` and ``"bijective"`` accept.
    ``var_ranges`` are known ranges of other variables (outer iterators, symbolic sizes):
    they stay symbolic in the result but help proofs (a divisor ``m`` is positive when
    ``m`` ranges over ``[1, ...)``).
    """
    if check_level not in ("bijective", "surjective"):
        raise ValueError(f"check_level must be 'bijective' or 'surjective', got {check_level!r}")
    bijective = check_level == "bijective"
    exprs = list(bindings)
    dtype = exprs[0].dtype.element if exprs else INT32
    unsupported = 0
    try:
        det = _Detector(dom_map, dtype, var_ranges)
        if not isinstance(predicate, bool):
            unsupported = det.add_predicate(predicate, strict=bijective)
        elif not predicate:
            raise _Fail("the predicate is False")
        det.consulted.clear()
    except _Fail as exc:
        return IterMapResult(None, [str(exc)], check_level=check_level, dom_map=dict(dom_map))
    errors: list[str] = []
    sums: list[IterSum] = []
    ranges: list[Range] = []
    exact: list[bool] = []

    def describe(k: int) -> str:
        return f"binding {k} ({exprs[k]})"

    for k, expr in enumerate(exprs):
        try:
            value = _convert_with_fallback(det, expr)
            low, extent, is_exact = det.value_range(value)
        except _Fail as exc:
            errors.append(f"{describe(k)}: {exc}")
            continue
        if bijective and not is_exact:
            errors.append(f"{describe(k)}: its values overlap (the map is not injective)")
        sums.append(value)
        # The detector works in the first binding's type; a binding's range is in its own
        # (an int32 iterator next to int64 loops ranges over int32 values).
        ranges.append(Range(_like(low, expr), _like(extent, expr)))
        exact.append(is_exact)
    if errors:
        return IterMapResult(None, errors, check_level=check_level, dom_map=dict(dom_map))
    digits = _Digits(det)
    try:
        for k, value in enumerate(sums):
            for split in value.args:
                digits.add_split(split, k)
        digit_errors, unused = digits.check(bijective, describe)
    except _Fail as exc:
        return IterMapResult(None, [str(exc)], check_level=check_level, dom_map=dict(dom_map))
    unrelated = any(key not in det.consulted for key in det.touched)
    if bijective and unrelated:
        digit_errors.append(
            "the predicate bounds a sum of iterators that no binding is made of: the bindings may not cover a box"
        )
    if digit_errors:
        return IterMapResult(None, digit_errors, check_level=check_level, dom_map=dict(dom_map))
    return IterMapResult(
        sums,
        [],
        ranges=ranges,
        exact=exact,
        binding_vars=[value.loop_vars() for value in sums],
        unused_vars=unused,
        predicate_applied=not unrelated and not unsupported,
        check_level=check_level,
        dom_map=dict(dom_map),
        _detector=(det, digits),
    )


def _convert_with_fallback(det: _Detector, expr: PrimExpr) -> IterSum:
    """Convert the expression as written (its form matches the predicate's); when that
    fails, convert it simplified."""
    try:
        return det.convert(expr)
    except _Fail:
        simplified = det.simplify(expr)
        if simplified is expr:
            raise
    return det.convert(simplified)


def normalize_iter_map(
    bindings: Sequence[PrimExpr],
    dom_map: Mapping[Var, Range],
    predicate: PrimExpr | bool = True,
    var_ranges: Mapping[Var, Range] | None = None,
) -> list[PrimExpr]:
    """The bindings rebuilt from their iterator sums and simplified (see module docstring)."""
    analyzer = Analyzer()
    for var, dom in {**(var_ranges or {}), **dom_map}.items():
        analyzer.bind(var, dom)
    exprs = list(bindings)
    if not exprs:
        return []
    try:
        det = _Detector(dom_map, exprs[0].dtype.element, var_ranges)
        if not isinstance(predicate, bool):
            det.add_predicate(predicate, strict=False)
    except _Fail:
        return [analyzer.simplify(e) for e in exprs]
    result = []
    for expr in exprs:
        try:
            value = _convert_with_fallback(det, expr)
        except _Fail:
            result.append(analyzer.simplify(expr))
            continue
        rebuilt = _like(value.to_expr(), expr)
        result.append(analyzer.simplify(rebuilt))
    return result


def inverse_iter_map(result: IterMapResult, outputs: Sequence[PrimExpr]) -> dict[Var, PrimExpr]:
    """Each loop variable of a bijective map as an expression of the bindings' values.

    ``outputs[k]`` stands for the value of binding ``k``. Loop variables of extent 1 map to
    their start.
    """
    if not result.ok or result.indices is None:
        raise ValueError("inverse_iter_map needs a detected map; detection failed: " + "; ".join(result.errors))
    if result.check_level != "bijective":
        raise ValueError("inverse_iter_map needs a map detected with check_level='bijective'")
    if len(outputs) != len(result.indices):
        raise ValueError(f"inverse_iter_map: {len(outputs)} outputs for {len(result.indices)} bindings")
    det: _Detector = result._detector[0]
    # How many digit values each mark waits for: one per binding split on it, one per fused
    # mark (reachable from the bindings) whose source has a split on it.
    expected: dict[int, int] = {}
    marks: dict[int, IterMark] = {}
    stack: list[IterMark] = []
    for value in result.indices:
        for split in value.args:
            expected[id(split.mark)] = expected.get(id(split.mark), 0) + 1
            stack.append(split.mark)
    seen: set[int] = set()
    while stack:
        mark = stack.pop()
        marks[id(mark)] = mark
        if id(mark) in seen:
            continue
        seen.add(id(mark))
        if isinstance(mark.source, IterSum):
            for split in mark.source.args:
                expected[id(split.mark)] = expected.get(id(split.mark), 0) + 1
                stack.append(split.mark)
    # Digit values found so far: mark id -> [(lower factor, value)].
    digits: dict[int, list[tuple[PrimExpr, PrimExpr]]] = {}

    def record(split: IterSplit, value: PrimExpr) -> None:
        digits.setdefault(id(split.mark), []).append((split.lower_factor, value))

    for value, output, dom in zip(result.indices, outputs, result.ranges):
        if not value.args:
            continue
        offset = det.simplify(_like(output, dom.min) - dom.min)
        terms = []
        for split in value.args:
            scale = split.scale
            negative = isinstance(scale, IntImm) and scale.value < 0
            magnitude = det.norm(-scale.value) if negative else scale  # type: ignore[union-attr]
            terms.append((magnitude, det.split_extent(split), negative, split))
        terms.sort(key=lambda t: t[0].value if isinstance(t[0], IntImm) else 0)
        for k, (scale, extent, negative, split) in enumerate(terms):
            digit = offset if _is_int(scale, 1) else FloorDiv(offset, _like(scale, offset))
            if k + 1 < len(terms):
                digit = FloorMod(digit, _like(extent, digit))
            if negative:
                digit = _like(extent, digit) - 1 - digit
            record(split, det.simplify(digit))
    resolved: dict[Var, PrimExpr] = {}
    progress = True
    while progress:
        progress = False
        for mark_id in list(digits):
            if len(digits[mark_id]) < expected.get(mark_id, 0):
                continue
            progress = True
            mark = marks[mark_id]
            total: PrimExpr | None = None
            for lower, value in digits.pop(mark_id):
                term = value if _is_int(lower, 1) else Mul(value, _like(lower, value))
                total = term if total is None else Add(total, _like(term, total))
            assert total is not None
            if isinstance(mark.source, Var):
                start = mark.offset if mark.offset is not None else det.norm(0)
                resolved[mark.source] = det.simplify(_like(total, start) + start)
                continue
            ordered = list(reversed(mark.source.args))
            for k, split in enumerate(ordered):
                digit = total if _is_int(split.scale, 1) else FloorDiv(total, _like(split.scale, total))
                if k + 1 < len(ordered):
                    digit = FloorMod(digit, _like(det.split_extent(split), digit))
                record(split, det.simplify(digit))
    for var, dom in result.dom_map.items():
        if var not in resolved:
            # A bijective map uses every digit that can vary: this variable is pinned.
            resolved[var] = dom.min
    return resolved


# ---------------------------------------------------------------- injectivity


def determined_vars(
    bindings: Sequence[PrimExpr],
    dom_map: Mapping[Var, Range],
    predicate: PrimExpr | bool = True,
    var_ranges: Mapping[Var, Range] | None = None,
) -> list[Var]:
    """The loop variables of ``dom_map`` whose value the bindings' values determine, over the
    loop points that satisfy ``predicate`` (variables of extent 1 included).

    This is the injectivity half of a bijective map, per variable: two loop points that give
    every binding the same value agree on the variables returned. Parallel and vectorized loops
    need it for the loops they change only, while loops inside may repeat instances (a
    reduction's loops) or be used in part. Each binding whose values are an exact mixed radix of
    its digits (no overlap) gives its digits; a run of digits of a fused mark gives the digits
    of the mark's sources exactly when its ends fall on their digit boundaries (``f // 56``
    with ``f = o * 16 + i`` does not give ``o``'s digits, but ``f % 56`` with ``f // 56`` gives
    all of ``f``), or when the run covers the whole mark; a variable is determined when its
    digits are all given. ``o // 62500, (o * 16 + i) // 1000 % 1000, (o * 16 + i) % 1000``
    (``o < 62500000``, ``i < 16``: a fused 1000^3 nest split by 16) determines ``o`` and ``i``.
    A binding that is not quasi-affine or whose values overlap or have gaps gives nothing;
    nothing is ever claimed without proof.
    """
    exprs = list(bindings)
    dtype = exprs[0].dtype.element if exprs else INT32
    try:
        det = _Detector(dom_map, dtype, var_ranges)
        if not isinstance(predicate, bool):
            det.add_predicate(predicate, strict=False)
        elif not predicate:
            return list(dom_map)  # no loop point runs: nothing to tell apart
    except _Fail:
        return [var for var, dom in dom_map.items() if _is_int(dom.extent, 1)]
    digits = _Determined(det)
    for expr in exprs:
        try:
            value = _convert_with_fallback(det, expr)
            _, _, exact = det.value_range(value)
        except _Fail:
            continue
        if exact:
            for split in value.args:
                digits.add_split(split, 0)
    try:
        return digits.determined()
    except _Fail:
        return [var for var, dom in dom_map.items() if _is_int(dom.extent, 1)]


class _Determined(_Digits):
    """Digit bookkeeping for ``determined_vars``: uses are followed from fused marks to their
    sources only where that is exact, and a loop variable counts when its uses cover it."""

    def determined(self) -> list[Var]:
        det = self.det
        found: list[Var] = []
        for mark in self._order():
            uses = self._sorted(self.uses.get(id(mark), []))
            effective = det.effective_extent(mark)
            covered = _is_int(effective, 1) or (bool(uses) and self._covers(uses, effective, mark))
            if isinstance(mark.source, Var):
                if covered:
                    found.append(mark.source)
                continue
            if covered:
                self._propagate(mark, _Use(det.norm(1), None, frozenset([0])))
                continue
            for run in self._runs(uses):
                if not (self._aligned(mark, run.low) and (run.high is None or self._aligned(mark, run.high))):
                    continue  # the run mixes digits of two sources: it gives none of them exactly
                self._propagate(mark, run)
        for var, dom in det.dom_map.items():
            if _is_int(dom.extent, 1) and not any(var is v for v in found):
                found.append(var)
        return found

    def _aligned(self, mark: IterMark, position: PrimExpr) -> bool:
        """Whether digit ``position`` of the fused ``mark`` falls on a digit boundary of its
        sources: inside the part of source ``k`` (positions ``[b_k, b_k+1)``, ``b_k+1 = b_k *``
        its extent), ``b_k`` divides it and it divides ``b_k+1`` (the last source too, unless
        it is the top digit of its own mark: ``(v % 4) % 3`` gives no digit of ``v``)."""
        det = self.det
        assert isinstance(mark.source, IterSum)
        ordered = list(reversed(mark.source.args))  # scale 1 first
        boundary: PrimExpr = det.norm(1)
        for k, split in enumerate(ordered):
            upper = det.mul(boundary, det.split_extent(split))
            last = k + 1 == len(ordered)
            if last or det.lt(position, upper):
                if not (det.le(boundary, position) and det.divides(boundary, position)):
                    return False
                return (last and det.is_top(split)) or det.divides(position, upper)
            boundary = upper
        return False
