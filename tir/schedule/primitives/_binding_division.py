"""Binding division, what ``blockize`` needs: one block binding as ``outer * factor + inner +
base``, where ``outer`` uses only loops outside the blockized loop and ``inner`` only loops from
it inward, found through ``tir.arith.iter_map.detect_iter_map``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tir.arith import Analyzer, eval_interval
from tir.arith.iter_map import IterMark, IterSplit, IterSum, detect_iter_map
from tir.ir import IntImm, PrimExpr, Range, Var, const
from tir.schedule.primitives._expr_util import analyzer_for, is_int, prove_equal, var_ids


class DivisionError(Exception):
    """A binding cannot be divided into an outer and an inner part; the message says why."""


@dataclass
class Division:
    """A block binding divided at a loop: ``value == outer * factor + inner + base``.

    ``kind`` is ``"outer"`` (the binding uses no loop from the blockized loop inward: it moves
    to the outer block, ``inner`` is None), ``"inner"`` (it uses only those loops: it stays
    on the inner block with the original iterator, ``outer`` is None) or ``"both"``.
    ``outer_dom`` / ``inner_dom`` are the domains of the new iterators.
    """

    kind: str
    outer: PrimExpr | None
    outer_dom: Range | None
    inner: PrimExpr | None
    inner_dom: Range | None
    factor: PrimExpr
    base: PrimExpr


@dataclass
class _Atom:
    """One digit of a binding: ``scale * expr`` with ``0 <= expr < extent``."""

    expr: PrimExpr
    extent: PrimExpr
    scale: PrimExpr
    inner: bool


def _digit(mark: IterMark, lower_factor: PrimExpr, extent: PrimExpr, dtype: Any) -> PrimExpr:
    return IterSplit(mark, lower_factor, extent, const(1, dtype)).to_expr()


def _mark_vars(mark: IterMark) -> list[Var]:
    if isinstance(mark.source, Var):
        return [mark.source]
    return mark.source.loop_vars()


class _Divider:
    def __init__(self, inner_ids: set[int], dom: Mapping[Var, Range], dtype: Any, show: str) -> None:
        self.inner_ids = inner_ids
        self.dom = dom
        self.dtype = dtype
        self.show = show

    def side(self, variables: Sequence[Var]) -> bool | None:
        """True: all inner; False: all outer; None: mixed."""
        flags = {id(v) in self.inner_ids for v in variables}
        if len(flags) == 1:
            return flags.pop()
        return None if flags else False

    def atoms(self, split: IterSplit, scale: PrimExpr) -> list[_Atom]:
        total = _mul(split.scale, scale)
        mark = split.mark
        side = self.side(_mark_vars(mark))
        if side is not None:
            return [_Atom(_digit(mark, split.lower_factor, split.extent, self.dtype), split.extent, total, side)]
        assert isinstance(mark.source, IterSum)
        return self.fused_atoms(split, mark, mark.source, total)

    def fused_atoms(self, split: IterSplit, mark: IterMark, source: IterSum, total: PrimExpr) -> list[_Atom]:
        """A split of a fused mark that mixes outer and inner loops, decomposed into splits of
        the marks it is fused from (possible when its digit positions align with theirs)."""
        refuse = DivisionError(
            f"{self.show} mixes loops outside and inside the blockized loop in `{split.to_expr()}`, "
            "which is not a sum of an outer and an inner part"
        )
        chain = sorted(source.args, key=lambda s: s.scale.value if isinstance(s.scale, IntImm) else -1)
        if not is_int(source.base, 0) or not all(is_int(s.scale) and is_int(s.extent) for s in chain):
            raise refuse
        bounds = [1]
        for item in chain:
            if item.scale.value != bounds[-1]:  # type: ignore[attr-defined]
                raise refuse
            bounds.append(bounds[-1] * item.extent.value)  # type: ignore[attr-defined]
        if not (is_int(split.lower_factor) and is_int(split.extent)):
            raise refuse
        low = split.lower_factor.value  # type: ignore[attr-defined]
        high = low * split.extent.value  # type: ignore[attr-defined]
        if is_int(mark.extent) and mark.extent.value <= high:  # type: ignore[attr-defined]
            high = bounds[-1]  # the top digit: no modulo
        high = min(high, bounds[-1])
        result: list[_Atom] = []
        for item, start, stop in zip(chain, bounds, bounds[1:]):
            piece_low, piece_high = max(low, start), min(high, stop)
            if piece_low >= piece_high:
                continue
            quotient = piece_low // start
            width = piece_high // piece_low
            digits = stop // start
            aligned = (
                piece_low % start == 0
                and piece_high % piece_low == 0
                and piece_low % low == 0
                and digits % quotient == 0
                and (piece_high == stop or (digits // quotient) % width == 0)
            )
            if not aligned:
                raise refuse
            lower = _mul(item.lower_factor, const(quotient, self.dtype))
            width_expr = const(width, self.dtype)
            piece = IterSplit(item.mark, lower, width_expr, const(piece_low // low, self.dtype))
            result.extend(self.atoms(piece, total))
        return result


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if is_int(a) and is_int(b):
        return IntImm(a.value * b.value, a.dtype)  # type: ignore[attr-defined]
    if is_int(a, 1):
        return b
    if is_int(b, 1):
        return a
    return a * b


def _sum(atoms: Sequence[_Atom], divisor: PrimExpr | None, base: PrimExpr | None, dtype: Any) -> PrimExpr:
    result: PrimExpr | None = None
    for atom in atoms:
        scale = atom.scale
        if divisor is not None:
            scale = (
                IntImm(scale.value // divisor.value, dtype)  # type: ignore[attr-defined]
                if is_int(scale) and is_int(divisor)
                else scale // divisor
            )
        term = atom.expr if is_int(scale, 1) else atom.expr * scale
        result = term if result is None else result + term
    if base is not None and not is_int(base, 0):
        result = base if result is None else result + base
    return result if result is not None else const(0, dtype)


def divide_binding(
    value: PrimExpr, dom: Range, inner_loops: Sequence[Var], loop_dom: Mapping[Var, Range], show: str
) -> Division:
    """Divide one binding (see ``Division``); ``loop_dom`` holds the ranges of the loops of the
    block's scope (outside and inside), ``show`` names the binding in error messages."""
    inner_ids = {id(v) for v in inner_loops}
    used = var_ids(value)
    loop_ids = {id(v) for v in loop_dom}
    uses_inner = bool(used & inner_ids)
    uses_outer = bool((used & loop_ids) - inner_ids)
    dtype = value.dtype
    zero, one = const(0, dtype), const(1, dtype)
    if not uses_inner:
        return Division("outer", value, dom, None, None, one, zero)
    if not uses_outer:
        return Division("inner", None, None, value, dom, one, zero)
    result = detect_iter_map([value], loop_dom)
    if not result.ok or result.indices is None:
        raise DivisionError(f"{show} is not an affine map of the loops: {'; '.join(result.errors)}")
    iter_sum = result.indices[0]
    divider = _Divider(inner_ids, loop_dom, dtype, show)
    atoms: list[_Atom] = []
    for split in iter_sum.args:
        atoms.extend(divider.atoms(split, one))
    inner = [a for a in atoms if a.inner]
    outer = [a for a in atoms if not a.inner]
    analyzer = analyzer_for(loop_dom)
    if not outer:
        division = Division(
            "inner", None, None, analyzer.simplify(_sum(inner, None, iter_sum.base, dtype)), dom, one, zero
        )
    elif not inner:
        division = Division(
            "outer", analyzer.simplify(_sum(outer, None, iter_sum.base, dtype)), dom, None, None, one, zero
        )
    else:
        division = _divide_both(inner, outer, iter_sum.base, dtype, loop_dom, analyzer, show)
    if not _reconstructs(division, value, analyzer):
        raise DivisionError(f"{show}: could not prove that `{value}` equals its division into outer and inner parts")
    return division


def _divide_both(
    inner: list[_Atom],
    outer: list[_Atom],
    base: PrimExpr,
    dtype: Any,
    loop_dom: Mapping[Var, Range],
    analyzer: Analyzer,
    show: str,
) -> Division:
    everything = inner + outer
    constant = all(is_int(a.scale) and is_int(a.extent) for a in everything)
    if constant:
        if any(a.scale.value <= 0 for a in everything):  # type: ignore[attr-defined]
            raise DivisionError(f"{show} has a negatively scaled loop; it cannot be divided into outer and inner parts")
        inner_range = 1 + sum(a.scale.value * (a.extent.value - 1) for a in inner)  # type: ignore[attr-defined]
        factor_value = math.gcd(*(a.scale.value for a in outer))  # type: ignore[attr-defined]
        if inner_range > factor_value:
            raise DivisionError(
                f"{show}: its inner part `{_sum(inner, None, None, dtype)}` takes {inner_range} values, more than the "
                f"step {factor_value} of its outer part `{_sum(outer, None, None, dtype)}`, so it is not "
                "`outer * step + inner`"
            )
        factor: PrimExpr = const(factor_value, dtype)
        outer_extent = 1 + sum(a.scale.value // factor_value * (a.extent.value - 1) for a in outer)  # type: ignore[attr-defined]
        outer_dom = Range(const(0, dtype), const(outer_extent, dtype))
        inner_dom = Range(const(0, dtype), const(inner_range, dtype))
    else:
        if len(inner) != 1 or not prove_equal(analyzer, inner[0].scale, const(1, dtype)):
            raise DivisionError(f"{show}: its inner part is not a single loop of unit scale (symbolic extents)")
        factor = inner[0].extent
        for atom in outer:
            quotient = analyzer.simplify(atom.scale // factor)
            if not prove_equal(analyzer, quotient * factor, atom.scale):
                raise DivisionError(f"{show}: the scale {atom.scale} of its outer part is not a multiple of {factor}")
        inner_dom = Range(const(0, dtype), factor)
        outer_dom = None  # computed below
    outer_value = analyzer.simplify(_sum(outer, factor, None, dtype))
    inner_value = analyzer.simplify(_sum(inner, None, None, dtype))
    if outer_dom is None:
        low, high = eval_interval(outer_value, loop_dom)
        outer_dom = Range(low, analyzer.simplify(high - low + 1))
    return Division("both", outer_value, outer_dom, inner_value, inner_dom, factor, base)


def _reconstructs(division: Division, value: PrimExpr, analyzer: Analyzer) -> bool:
    total: PrimExpr = division.base
    if division.outer is not None:
        total = total + division.outer * division.factor
    if division.inner is not None:
        total = total + division.inner
    return prove_equal(analyzer, total, value)


def rebuilt(division: Division, outer_var: PrimExpr | None, inner_var: PrimExpr | None) -> PrimExpr:
    """The original iterator's value from the new outer and inner iterators."""
    parts: list[PrimExpr] = []
    if outer_var is not None:
        parts.append(outer_var if is_int(division.factor, 1) else outer_var * division.factor)
    if inner_var is not None:
        parts.append(inner_var)
    if not is_int(division.base, 0):
        parts.append(division.base)
    result = parts[0]
    for part in parts[1:]:
        result = result + part
    return result
