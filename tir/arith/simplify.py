"""A simplifier for integer index expressions, and the ``Analyzer`` that wraps it.

Integer index expressions (scalar int32 / int64) are brought to a canonical sum of products:
like terms are collected, constants are folded and put last, multiplications by constants
are distributed. Terms keep the order in which they first appear (positive terms before
subtracted ones), so printed programs stay close to what the user wrote and are stable.

On top of the sums, ``FloorDiv`` / ``FloorMod`` by positive constants use the known ranges
of variables (``(i * 16 + j) // 16 -> i`` when ``0 <= j < 16``), ``Min`` / ``Max`` whose
order is provable disappear, comparisons are decided when bounds prove them, and boolean
logic and ``Select`` are folded. Every other expression (float math, loads, calls) keeps its
structure; only its integer sub-expressions are simplified, and constants of every dtype are
folded (integers wrap to their dtype, floats round to theirs).

The simplifier never guesses: when a rule's precondition is not proved, the expression is
kept. Index arithmetic is assumed not to overflow (as in every compiler of this kind); the
algebraic rules are therefore applied to int32 / int64 only, not to int8 / int16 / uint8
data arithmetic, where overflow is realistic.

Simplifying an expression that is already simple returns the very same object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tir.arith.bound import INF, BoundEvaluator, ConstIntBound, bound_add, bound_scale
from tir.arith.const_fold import CMP_FOLD, fold_cast, fold_float_binary, fold_int_binary, widens, wrap_int
from tir.ir.buffer import Buffer, Range
from tir.ir.dtype import BOOL, DataType
from tir.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Call,
    Cast,
    CmpOp,
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
    Select,
    StringImm,
    Sub,
    Var,
)
from tir.ir.node import Node

__all__ = ["Analyzer", "ConstIntBound", "StructuralKeys", "is_index_dtype", "simplify"]


_CMP_NEGATION: dict[type, type] = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}

_SUM_KINDS = (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max)


def is_index_dtype(dtype: DataType) -> bool:
    """Whether the algebraic (no-overflow) rules apply: scalar int32 / int64."""
    return dtype.kind == "int" and dtype.bits >= 32 and dtype.lanes == 1


def _true() -> IntImm:
    return IntImm(1, BOOL)


def _false() -> IntImm:
    return IntImm(0, BOOL)


# ---------------------------------------------------------------- canonical sums


class _Sum:
    """``const + sum(coeff * atom)``: atoms are simplified expressions that are not sums.

    ``terms`` maps an atom's structural key to ``(atom, coeff)`` in first-seen order. A
    ``_Sum`` is never changed after it is built (they are memoized).
    """

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[int, tuple[PrimExpr, int]] | None = None, const: int = 0) -> None:
        self.terms: dict[int, tuple[PrimExpr, int]] = terms if terms is not None else {}
        self.const = const

    @property
    def is_const(self) -> bool:
        return not self.terms

    def single_atom(self) -> PrimExpr | None:
        """The atom when the sum is exactly ``1 * atom``."""
        if self.const == 0 and len(self.terms) == 1:
            ((atom, coeff),) = self.terms.values()
            if coeff == 1:
                return atom
        return None


def _sum_add(a: _Sum, b: _Sum, scale_b: int = 1) -> _Sum:
    """``a + scale_b * b``."""
    if not b.terms:
        return _Sum(a.terms, a.const + scale_b * b.const) if b.const else a
    terms = dict(a.terms)
    for key, (atom, coeff) in b.terms.items():
        old = terms.get(key)
        new_coeff = coeff * scale_b + (old[1] if old is not None else 0)
        if new_coeff == 0:
            terms.pop(key, None)
        else:
            terms[key] = (old[0] if old is not None else atom, new_coeff)
    return _Sum(terms, a.const + scale_b * b.const)


def _sum_scale(a: _Sum, factor: int) -> _Sum:
    if factor == 1:
        return a
    if factor == 0:
        return _Sum()
    return _Sum({key: (atom, coeff * factor) for key, (atom, coeff) in a.terms.items()}, a.const * factor)


def _sum_content(a: _Sum) -> int:
    """The gcd of all coefficients and the constant (0 for the zero sum)."""
    content = abs(a.const)
    for _, coeff in a.terms.values():
        content = math.gcd(content, coeff)
    return content


class StructuralKeys:
    """Small ints equal for structurally identical expressions (free variables by identity).

    Keys are interned; the memo keeps the nodes it saw alive, so their ids stay unique: use one
    instance for one analysis, not for a process's lifetime."""

    def __init__(self) -> None:
        self._key_memo: dict[int, tuple[Any, int]] = {}
        self._interned: dict[Any, int] = {}

    def key(self, expr: Any) -> int:
        """An int equal for structurally identical expressions."""
        hit = self._key_memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        if isinstance(expr, Var):
            struct: Any = ("var", id(expr))
        elif isinstance(expr, IntImm):
            struct = ("int", expr.value, expr.dtype)
        elif isinstance(expr, FloatImm):
            struct = ("float", "nan" if math.isnan(expr.value) else expr.value, expr.dtype)
        elif isinstance(expr, Buffer):
            struct = ("buffer", id(expr))
        elif isinstance(expr, Node):
            struct = (type(expr), *(self._field_key(getattr(expr, name)) for name in type(expr).child_fields()))
        else:
            struct = ("value", expr)
        result = self._interned.setdefault(struct, len(self._interned))
        self._key_memo[id(expr)] = (expr, result)
        return result

    def _field_key(self, value: Any) -> Any:
        if isinstance(value, Node):
            return self.key(value)
        if isinstance(value, tuple):
            return tuple(self._field_key(item) for item in value)
        if isinstance(value, dict):
            return ("dict", id(value))
        return value


# ---------------------------------------------------------------- the rewriter


class _Rewriter:
    """One simplification run: memo tables keyed by node identity, plus variable knowledge."""

    def __init__(self, bounds: BoundEvaluator, var_values: Mapping[Var, PrimExpr]) -> None:
        self.bounds = bounds
        self.var_values = var_values
        # Structural keys are interned to small ints; the memo keeps nodes alive so ids stay unique.
        self._keys = StructuralKeys()
        self.key = self._keys.key
        self._simplify_memo: dict[int, tuple[PrimExpr, PrimExpr]] = {}
        self._sum_memo: dict[int, tuple[PrimExpr, _Sum]] = {}
        # Set once a ``Let`` body was simplified under a temporary bound of its variable: the
        # memo tables then hold results valid only in that scope (see ``Analyzer``).
        self.scoped_memo = False

    # ------------------------------------------------------------ structural keys

    def same(self, a: PrimExpr, b: PrimExpr) -> bool:
        return a is b or self.key(a) == self.key(b)

    def reuse(self, new: PrimExpr, old: PrimExpr | None) -> PrimExpr:
        """``old`` when ``new`` is structurally identical to it (edits that change nothing)."""
        # Nodes of different classes never have equal keys: skip computing them.
        if old is not None and new is not old and type(new) is type(old) and self.key(new) == self.key(old):
            return old
        return new

    # ------------------------------------------------------------ entry

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        hit = self._simplify_memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        result = self.reuse(self._simplify(expr), expr)
        self._simplify_memo[id(expr)] = (expr, result)
        return result

    def _simplify(self, expr: PrimExpr) -> PrimExpr:
        if isinstance(expr, (IntImm, FloatImm, StringImm)):
            return expr
        if isinstance(expr, Var):
            value = self.var_values.get(expr)
            return expr if value is None else self.simplify(value)
        dtype = expr.dtype
        if isinstance(expr, _SUM_KINDS) and is_index_dtype(dtype):
            return self.from_sum(self.to_sum(expr), dtype)
        if isinstance(expr, Div) and is_index_dtype(dtype):
            return self._index_truncdiv(expr)
        if isinstance(expr, CmpOp):
            return self._compare(expr)
        if isinstance(expr, (And, Or)):
            return self._logic(expr)
        if isinstance(expr, Not):
            return self._not(expr)
        if isinstance(expr, BinaryOp):
            return self._other_binary(expr)
        if isinstance(expr, Select):
            return self._select(expr, expr.condition, expr.true_value, expr.false_value)
        if isinstance(expr, Call) and expr.op == "if_then_else" and len(expr.args) == 3:
            return self._select(expr, *expr.args)
        if isinstance(expr, Cast):
            return self._cast(expr)
        if isinstance(expr, Let):
            return self._let(expr)
        return self._children(expr)

    def _children(self, expr: Node) -> Node:
        """``expr`` with its expression children simplified, structure kept."""
        changes: dict[str, Any] = {}
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            if isinstance(value, PrimExpr):
                new_value: Any = self.simplify(value)
            elif isinstance(value, tuple) and value and all(isinstance(item, PrimExpr) for item in value):
                items = tuple(self.simplify(item) for item in value)
                new_value = value if all(a is b for a, b in zip(items, value)) else items
            else:
                continue
            if new_value is not value:
                changes[name] = new_value
        return expr.replace(**changes) if changes else expr

    # ------------------------------------------------------------ sums

    def atom_sum(self, atom: PrimExpr) -> _Sum:
        if isinstance(atom, IntImm):
            return _Sum(const=atom.value)
        return _Sum({self.key(atom): (atom, 1)})

    def to_sum(self, expr: PrimExpr) -> _Sum:
        """The canonical sum of an index expression (memoized; the result is shared)."""
        hit = self._sum_memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        result = self._to_sum(expr)
        self._sum_memo[id(expr)] = (expr, result)
        return result

    def _to_sum(self, expr: PrimExpr) -> _Sum:
        if isinstance(expr, IntImm):
            return _Sum(const=expr.value)
        if isinstance(expr, Add):
            return _sum_add(self.to_sum(expr.a), self.to_sum(expr.b))
        if isinstance(expr, Sub):
            return _sum_add(self.to_sum(expr.a), self.to_sum(expr.b), -1)
        if isinstance(expr, Mul):
            return self._mul(expr)
        if isinstance(expr, (FloorDiv, FloorMod)):
            return self._div_mod(expr)
        if isinstance(expr, (Min, Max)):
            return self._min_max(type(expr), self.to_sum(expr.a), self.to_sum(expr.b), expr.dtype, expr)
        simplified = self.simplify(expr)
        if simplified is not expr and isinstance(simplified, (IntImm, *_SUM_KINDS)):
            return self.to_sum(simplified)
        return self.atom_sum(simplified)

    def sum_bound(self, s: _Sum) -> ConstIntBound:
        result = ConstIntBound(s.const, s.const)
        for atom, coeff in s.terms.values():
            result = bound_add(result, bound_scale(self.bounds.bound(atom), coeff))
            if result.min_value == -INF and result.max_value == INF:
                break
        return result

    def from_sum(self, s: _Sum, dtype: DataType) -> PrimExpr:
        """Build the expression of a canonical sum: positive terms, subtracted terms, constant."""
        s = self._merge_div_mod(s, dtype)
        positive = [(atom, coeff) for atom, coeff in s.terms.values() if coeff > 0]
        negative = [(atom, -coeff) for atom, coeff in s.terms.values() if coeff < 0]
        const = s.const
        if not positive and not negative:
            return IntImm(wrap_int(const, dtype), dtype)
        result: PrimExpr | None = None
        for atom, coeff in positive:
            term = self._term(atom, coeff, dtype)
            result = term if result is None else Add(result, term)
        if result is None:
            # Nothing positive to lead with: a positive constant leads (``4 - i``), else 0.
            result = IntImm(wrap_int(max(const, 0), dtype), dtype)
            const = min(const, 0)
        for atom, coeff in negative:
            result = Sub(result, self._term(atom, coeff, dtype))
        if const > 0:
            result = Add(result, IntImm(wrap_int(const, dtype), dtype))
        elif const < 0:
            result = Sub(result, IntImm(wrap_int(-const, dtype), dtype))
        return result

    @staticmethod
    def _term(atom: PrimExpr, coeff: int, dtype: DataType) -> PrimExpr:
        return atom if coeff == 1 else Mul(atom, IntImm(wrap_int(coeff, dtype), dtype))

    def _mul(self, expr: Mul) -> _Sum:
        a, b = self.to_sum(expr.a), self.to_sum(expr.b)
        if a.is_const:
            return _sum_scale(b, a.const)
        if b.is_const:
            return _sum_scale(a, b.const)
        # A product of two non-constant sums stays one atom; the constant content of each
        # factor is pulled out so that ``(i * 4) * j`` and ``(i * j) * 4`` agree.
        dtype = expr.dtype
        content_a, content_b = _sum_content(a), _sum_content(b)
        if content_a > 1:
            a = _Sum({k: (atom, c // content_a) for k, (atom, c) in a.terms.items()}, a.const // content_a)
        if content_b > 1:
            b = _Sum({k: (atom, c // content_b) for k, (atom, c) in b.terms.items()}, b.const // content_b)
        product = self.reuse(Mul(self.from_sum(a, dtype), self.from_sum(b, dtype)), expr)
        return _sum_scale(self.atom_sum(product), max(content_a, 1) * max(content_b, 1))

    def _div_mod(self, expr: FloorDiv | FloorMod) -> _Sum:
        dtype = expr.dtype
        numerator, divisor = self.to_sum(expr.a), self.to_sum(expr.b)
        if divisor.is_const and divisor.const != 0:
            c = divisor.const
            if isinstance(expr, FloorDiv):
                # floor(a / c) == floor(-a / -c): a negative divisor becomes a positive one.
                return self.floordiv_sum(numerator if c > 0 else _sum_scale(numerator, -1), abs(c), dtype, expr)
            if c > 0:
                return self.floormod_sum(numerator, c, dtype, expr)
            # a mod c == -((-a) mod -c) for c < 0.
            return _sum_scale(self.floormod_sum(_sum_scale(numerator, -1), -c, dtype, None), -1)
        if numerator.is_const and divisor.is_const:
            return self.atom_sum(type(expr)(IntImm(numerator.const, dtype), IntImm(0, dtype)))
        atom = type(expr)(self.from_sum(numerator, dtype), self.from_sum(divisor, dtype))
        return self.atom_sum(self.reuse(atom, expr))

    def floordiv_sum(self, s: _Sum, c: int, dtype: DataType, original: PrimExpr | None = None) -> _Sum:
        """``s // c`` for a constant ``c > 0``."""
        if s.is_const:
            return _Sum(const=s.const // c)
        if c == 1:
            return s
        # floor((c * q + r) / c) == q + floor(r / c): terms divisible by c leave the division.
        quotient: dict[int, tuple[PrimExpr, int]] = {}
        rest: dict[int, tuple[PrimExpr, int]] = {}
        for key, (atom, coeff) in s.terms.items():
            if coeff % c == 0:
                quotient[key] = (atom, coeff // c)
            else:
                rest[key] = (atom, coeff)
        q = _Sum(quotient)
        r = _Sum(rest, s.const)
        if not rest:
            return _Sum(quotient, s.const // c)
        bound = self.sum_bound(r)
        if bound.is_bounded:
            low, high = int(bound.min_value) // c, int(bound.max_value) // c
            if low == high:
                return _Sum(quotient, low)
        split = self._split_small_part(r, c)
        if split is not None:
            # floor((g * x + s) / (g * c')) == floor(x / c') when 0 <= s < g.
            factor, large, _ = split
            return _sum_add(q, self.floordiv_sum(large, c // factor, dtype))
        atom = r.single_atom()
        if isinstance(atom, FloorDiv) and isinstance(atom.b, IntImm) and atom.b.value > 0:
            # (x // a) // c == x // (a * c)
            return _sum_add(q, self.floordiv_sum(self.to_sum(atom.a), atom.b.value * c, dtype))
        if isinstance(atom, FloorMod) and isinstance(atom.b, IntImm) and atom.b.value > 0 and atom.b.value % c == 0:
            # (x % (c * m)) // c == (x // c) % m
            inner = self.floordiv_sum(self.to_sum(atom.a), c, dtype)
            return _sum_add(q, self.floormod_sum(inner, atom.b.value // c, dtype))
        division = FloorDiv(self.from_sum(r, dtype), IntImm(c, dtype))
        if not quotient:
            division = self.reuse(division, original)
        return _sum_add(q, self.atom_sum(division))

    def floormod_sum(self, s: _Sum, c: int, dtype: DataType, original: PrimExpr | None = None) -> _Sum:
        """``s % c`` for a constant ``c > 0``."""
        if s.is_const:
            return _Sum(const=s.const % c)
        if c == 1:
            return _Sum()
        rest = {key: (atom, coeff) for key, (atom, coeff) in s.terms.items() if coeff % c != 0}
        r = _Sum(rest, s.const % c)
        if not rest:
            return r
        bound = self.sum_bound(r)
        if bound.is_bounded:
            period = int(bound.min_value) // c
            if period == int(bound.max_value) // c:
                return _Sum(rest, r.const - period * c)
        split = self._split_small_part(r, c)
        if split is not None:
            # (g * x + s) % (g * c') == (x % c') * g + s when 0 <= s < g.
            factor, large, small = split
            return _sum_add(_sum_scale(self.floormod_sum(large, c // factor, dtype), factor), small)
        atom = r.single_atom()
        if isinstance(atom, FloorMod) and isinstance(atom.b, IntImm) and atom.b.value > 0 and atom.b.value % c == 0:
            # (x % (c * m)) % c == x % c
            return self.floormod_sum(self.to_sum(atom.a), c, dtype)
        modulo = FloorMod(self.from_sum(r, dtype), IntImm(c, dtype))
        return self.atom_sum(self.reuse(modulo, original))

    def _split_small_part(self, r: _Sum, c: int) -> tuple[int, _Sum, _Sum] | None:
        """Write ``r`` as ``g * large + small`` with ``g`` a proper divisor of ``c`` and
        ``0 <= small < g``; returns ``(g, large, small)``, or None when no such split exists.

        This is how split loops look from a coarser division: ``(i * 4 + j) // 8`` with
        ``0 <= j < 4`` is ``i // 2``.
        """
        candidates = sorted({math.gcd(coeff, c) for _, coeff in r.terms.values()} - {1, c}, reverse=True)
        for factor in candidates:
            large = {key: (atom, coeff // factor) for key, (atom, coeff) in r.terms.items() if coeff % factor == 0}
            small = _Sum({key: value for key, value in r.terms.items() if key not in large}, r.const)
            bound = self.sum_bound(small)
            if large and bound.min_value >= 0 and bound.max_value < factor:
                return factor, _Sum(large), small
        return None

    def _merge_div_mod(self, s: _Sum, dtype: DataType) -> _Sum:
        """Undo splits: ``(x // c) * c + x % c -> x`` and its relatives, until none applies."""
        if len(s.terms) < 2 or not any(isinstance(atom, (FloorDiv, FloorMod)) for atom, _ in s.terms.values()):
            return s
        changed = True
        while changed:
            changed = False
            mods: dict[tuple[int, int], int] = {}
            for key, (atom, _) in s.terms.items():
                if isinstance(atom, FloorMod) and isinstance(atom.b, IntImm) and atom.b.value > 0:
                    mods[(self.key(atom.a), atom.b.value)] = key
            for key, (atom, coeff) in list(s.terms.items()):
                merged = self._merge_one(s, key, atom, coeff, mods, dtype)
                if merged is not None:
                    s, changed = merged, True
                    break
        return s

    def _merge_one(
        self, s: _Sum, key: int, atom: PrimExpr, coeff: int, mods: dict[tuple[int, int], int], dtype: DataType
    ) -> _Sum | None:
        if isinstance(atom, FloorDiv) and isinstance(atom.b, IntImm) and atom.b.value > 0:
            c = atom.b.value
            if coeff % c:
                return None
            k = coeff // c
            mod_key = mods.get((self.key(atom.a), c))
            if mod_key is not None and s.terms[mod_key][1] == k:
                # (x // c) * (k * c) + (x % c) * k == x * k
                rest = _Sum({t: v for t, v in s.terms.items() if t not in (key, mod_key)}, s.const)
                return _sum_add(rest, self.to_sum(atom.a), k)
            # x * k - (x // c) * (k * c) == (x % c) * k, when every term of x * k is present.
            numerator = self.to_sum(atom.a)
            k = -k
            if numerator.terms and all(
                t in s.terms and s.terms[t][1] == k * c_t for t, (_, c_t) in numerator.terms.items()
            ):
                rest = _Sum(
                    {t: v for t, v in s.terms.items() if t != key and t not in numerator.terms},
                    s.const - k * numerator.const,
                )
                return _sum_add(rest, self.floormod_sum(numerator, c, dtype), k)
            return None
        if isinstance(atom, FloorMod) and isinstance(atom.b, IntImm) and atom.b.value > 0:
            inner = atom.a
            if isinstance(inner, FloorDiv) and isinstance(inner.b, IntImm) and inner.b.value > 0:
                c, m = inner.b.value, atom.b.value
                if coeff % c:
                    return None
                k = coeff // c
                mod_key = mods.get((self.key(inner.a), c))
                if mod_key is not None and s.terms[mod_key][1] == k:
                    # ((x // c) % m) * (k * c) + (x % c) * k == (x % (c * m)) * k
                    rest = _Sum({t: v for t, v in s.terms.items() if t not in (key, mod_key)}, s.const)
                    return _sum_add(rest, self.floormod_sum(self.to_sum(inner.a), c * m, dtype), k)
        return None

    def _min_max(self, cls: type, a: _Sum, b: _Sum, dtype: DataType, original: PrimExpr | None) -> _Sum:
        is_min = cls is Min
        if a.is_const and b.is_const:
            return _Sum(const=min(a.const, b.const) if is_min else max(a.const, b.const))
        difference = self.sum_bound(_sum_add(a, b, -1))
        if difference.max_value <= 0:
            return a if is_min else b
        if difference.min_value >= 0:
            return b if is_min else a
        # Terms both sides share leave the min/max: min(x + t, y + t) == min(x, y) + t.
        common = {key: value for key, value in a.terms.items() if b.terms.get(key, (None, None))[1] == value[1]}
        if common or (a.const == b.const and a.const != 0):
            common_sum = _Sum(common, a.const if a.const == b.const else 0)
            inner = self._min_max(cls, _sum_add(a, common_sum, -1), _sum_add(b, common_sum, -1), dtype, None)
            return _sum_add(common_sum, inner)
        if a.is_const and not b.is_const:
            a, b = b, a  # the constant goes second: min(x, 4)
        nested = a.single_atom()
        if b.is_const and isinstance(nested, cls) and isinstance(nested.b, IntImm):
            # min(min(x, c1), c2) == min(x, min(c1, c2))
            limit = min(nested.b.value, b.const) if is_min else max(nested.b.value, b.const)
            return self._min_max(cls, self.to_sum(nested.a), _Sum(const=limit), dtype, None)
        result = cls(self.from_sum(a, dtype), self.from_sum(b, dtype))
        return self.atom_sum(self.reuse(result, original))

    # ------------------------------------------------------------ other integer division

    def _index_truncdiv(self, expr: Div) -> PrimExpr:
        a, b = self.simplify(expr.a), self.simplify(expr.b)
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            value = fold_int_binary(Div, a.value, b.value, expr.dtype)
            if value is not None:
                return IntImm(value, expr.dtype)
        if isinstance(b, IntImm) and b.value > 0:
            if b.value == 1:
                return a
            # Truncation equals floor for a non-negative numerator.
            if self.bounds.bound(a).min_value >= 0:
                return self.from_sum(self.floordiv_sum(self.to_sum(a), b.value, expr.dtype), expr.dtype)
        return expr.replace(a=a, b=b)

    # ------------------------------------------------------------ non-index arithmetic

    def _other_binary(self, expr: BinaryOp) -> PrimExpr:
        a, b = self.simplify(expr.a), self.simplify(expr.b)
        cls, dtype = type(expr), expr.dtype
        if isinstance(a, IntImm) and isinstance(b, IntImm) and (dtype.is_integer or dtype.is_bool):
            value = fold_int_binary(cls, a.value, b.value, dtype)
            if value is not None:
                return IntImm(value, dtype)
        if isinstance(a, FloatImm) and isinstance(b, FloatImm):
            folded = fold_float_binary(cls, a.value, b.value, dtype)
            if folded is not None:
                return FloatImm(folded, dtype)
        if dtype.is_integer and dtype.lanes == 1:
            # Identities that hold under wrap-around arithmetic too.
            if cls in (Add, Sub) and isinstance(b, IntImm) and b.value == 0:
                return a
            if cls is Add and isinstance(a, IntImm) and a.value == 0:
                return b
            if cls is Mul and isinstance(b, IntImm) and b.value == 1:
                return a
            if cls is Mul and isinstance(a, IntImm) and a.value == 1:
                return b
        if dtype.is_float and dtype.lanes == 1:
            # Exact in IEEE arithmetic (x + 0.0 is not: -0.0 + 0.0 is +0.0).
            if cls in (Mul, Div) and isinstance(b, FloatImm) and b.value == 1.0:
                return a
            if cls is Mul and isinstance(a, FloatImm) and a.value == 1.0:
                return b
            if cls is Sub and isinstance(b, FloatImm) and b.value == 0.0 and math.copysign(1.0, b.value) > 0:
                return a
        return expr.replace(a=a, b=b)

    # ------------------------------------------------------------ comparisons and logic

    def _compare(self, expr: CmpOp) -> PrimExpr:
        a, b = self.simplify(expr.a), self.simplify(expr.b)
        cls = type(expr)
        if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)) and a.dtype.lanes == 1:
            return IntImm(int(CMP_FOLD[cls](a.value, b.value)), BOOL)
        if is_index_dtype(a.dtype):
            decided = self.decide_compare(cls, self.to_sum(a), self.to_sum(b))
            if decided is not None:
                return IntImm(int(decided), BOOL)
        elif (a.dtype.is_integer or a.dtype.is_bool) and a.dtype.lanes == 1 and self.same(a, b):
            return IntImm(int(cls in (LE, GE, EQ)), BOOL)
        return expr.replace(a=a, b=b)

    def decide_compare(self, cls: type, a: _Sum, b: _Sum) -> bool | None:
        """Whether ``cls(a, b)`` always / never holds, from the bound of ``a - b``; None if unknown."""
        gap = _sum_add(a, b, -1)
        difference = self.sum_bound(gap)
        expanded = self._expand_floordiv_multiples(gap)
        if expanded is not None:
            # ``c * (x // c)`` bounded alone loses that it is ``x`` minus at most ``c - 1``:
            # rewritten as ``x - x % c`` it cancels against ``x`` (``n <= (n + 3) // 4 * 4``).
            tighter = self.sum_bound(expanded)
            difference = ConstIntBound(
                max(difference.min_value, tighter.min_value), min(difference.max_value, tighter.max_value)
            )
        low, high = difference.min_value, difference.max_value
        if cls is LT:
            return True if high < 0 else False if low >= 0 else None
        if cls is LE:
            return True if high <= 0 else False if low > 0 else None
        if cls is GT:
            return True if low > 0 else False if high <= 0 else None
        if cls is GE:
            return True if low >= 0 else False if high < 0 else None
        if cls is EQ:
            return True if low == high == 0 else False if low > 0 or high < 0 else None
        if cls is NE:
            return False if low == high == 0 else True if low > 0 or high < 0 else None
        return None

    def _expand_floordiv_multiples(self, s: _Sum) -> _Sum | None:
        """``s`` with every term ``k * (x // c)`` (``k`` a multiple of constant ``c > 0``)
        rewritten as ``(k / c) * (x - x % c)``; None when there is no such term."""
        result = s
        for atom, coeff in s.terms.values():
            if not isinstance(atom, FloorDiv) or not isinstance(atom.b, IntImm) or atom.b.value <= 0:
                continue
            divisor = atom.b.value
            if coeff % divisor:
                continue
            scale = coeff // divisor
            result = _sum_add(result, self.atom_sum(atom), -coeff)
            result = _sum_add(result, self.to_sum(atom.a), scale)
            result = _sum_add(result, self.to_sum(FloorMod(atom.a, atom.b)), -scale)
        return None if result is s else result

    def _logic(self, expr: And | Or) -> PrimExpr:
        a, b = self.simplify(expr.a), self.simplify(expr.b)
        is_and = isinstance(expr, And)
        if expr.dtype.lanes == 1:
            for first, second in ((a, b), (b, a)):
                if isinstance(first, IntImm):
                    if bool(first.value) == is_and:
                        return second  # True and x, False or x
                    return first  # False and x, True or x
            if self.same(a, b):
                return a
            if self._contradicts(a, b):
                # p and not p, p or not p
                return _false() if is_and else _true()
        return expr.replace(a=a, b=b)

    def _contradicts(self, a: PrimExpr, b: PrimExpr) -> bool:
        """Whether ``b`` is the negation of ``a`` (``Not(p)`` / ``p``, ``x < y`` / ``x >= y``)."""
        for first, second in ((a, b), (b, a)):
            if isinstance(first, Not) and self.same(first.a, second):
                return True
        if isinstance(a, CmpOp) and isinstance(b, CmpOp) and (a.a.dtype.is_integer or a.a.dtype.is_bool):
            return _CMP_NEGATION[type(a)] is type(b) and self.same(a.a, b.a) and self.same(a.b, b.b)
        return False

    def _not(self, expr: Not) -> PrimExpr:
        a = self.simplify(expr.a)
        if isinstance(a, IntImm):
            return IntImm(1 - a.value, BOOL)
        if isinstance(a, Not):
            return a.a
        if isinstance(a, CmpOp) and (a.a.dtype.is_integer or a.a.dtype.is_bool):
            # For integers !(x < y) is x >= y; for floats NaN breaks this, so only integers.
            return _CMP_NEGATION[type(a)](a.a, a.b)
        return expr.replace(a=a)

    def _select(self, expr: PrimExpr, condition: PrimExpr, true_value: PrimExpr, false_value: PrimExpr) -> PrimExpr:
        condition = self.simplify(condition)
        if isinstance(condition, IntImm):
            return self.simplify(true_value if condition.value else false_value)
        true_value, false_value = self.simplify(true_value), self.simplify(false_value)
        if self.same(true_value, false_value):
            return true_value
        if isinstance(expr, Select):
            return expr.replace(condition=condition, true_value=true_value, false_value=false_value)
        assert isinstance(expr, Call)
        args = (condition, true_value, false_value)
        return expr if all(x is y for x, y in zip(args, expr.args)) else expr.replace(args=args)

    def _cast(self, expr: Cast) -> PrimExpr:
        value = self.simplify(expr.value)
        target = expr.dtype
        if value.dtype == target:
            return value
        if isinstance(value, (IntImm, FloatImm)) and target.lanes == 1:
            folded = fold_cast(value, target)
            if folded is not None:
                return folded
        if isinstance(value, Cast) and value.value.dtype == target and widens(value.dtype, target):
            return value.value  # a round trip through a wider integer type changes nothing
        return expr.replace(value=value)

    def _let(self, expr: Let) -> PrimExpr:
        value = self.simplify(expr.value)
        if isinstance(value, (IntImm, FloatImm, Var)):
            # Binding a constant or a variable: substitute it (in a fresh run, whose memo
            # tables know about the substitution).
            return _Rewriter(self.bounds, {**self.var_values, expr.var: value}).simplify(expr.body)
        saved_bound = self.bounds.var_bounds.get(expr.var)
        self.scoped_memo = True
        self.bounds.var_bounds[expr.var] = self.bounds.bound(value)
        try:
            body = self.simplify(expr.body)
        finally:
            if saved_bound is None:
                self.bounds.var_bounds.pop(expr.var, None)
            else:
                self.bounds.var_bounds[expr.var] = saved_bound
        return expr.replace(value=value, body=body)


# ---------------------------------------------------------------- public API


class Analyzer:
    """Knowledge about variables (ranges, values) and the queries that use it.

    >>> ana = Analyzer()
    >>> ana.bind(j, Range(0, 16))
    >>> ana.simplify((i * 16 + j) // 16)   # -> i
    >>> ana.can_prove(j < 16)              # -> True
    """

    def __init__(self) -> None:
        self._var_ranges: dict[Var, Range] = {}
        self._var_bounds: dict[Var, ConstIntBound] = {}
        self._var_values: dict[Var, PrimExpr] = {}
        # One rewriter serves every query until the next ``bind``: its memo tables (keyed by
        # node identity) then carry over between queries about the same expressions.
        self._rewriter: _Rewriter | None = None

    def bind(self, var: Var, value: Range | PrimExpr | int) -> None:
        """Record that ``var`` ranges over ``value`` (a Range) or equals it (an expression).

        A range of extent 1 binds the variable to its start.
        """
        # A new binding replaces whatever was known about the variable.
        self._rewriter = None
        self._var_ranges.pop(var, None)
        self._var_bounds.pop(var, None)
        self._var_values.pop(var, None)
        if isinstance(value, Range):
            if isinstance(value.extent, IntImm) and value.extent.value == 1:
                self._var_values[var] = value.min
            else:
                self._var_ranges[var] = value
            return
        if isinstance(value, int):
            value = IntImm(value, var.dtype)
        self._var_values[var] = value

    def _evaluator(self) -> BoundEvaluator:
        evaluator = BoundEvaluator(self._var_bounds, self._var_ranges)
        for var, value in self._var_values.items():
            evaluator.var_bounds[var] = evaluator.bound(value)
        return evaluator

    def _current_rewriter(self) -> _Rewriter:
        # A rewriter that simplified under a ``Let`` is not reused: the same variable may be
        # bound differently by another ``Let`` of a later query.
        if self._rewriter is None or self._rewriter.scoped_memo or self._rewriter.bounds.scoped_memo:
            self._rewriter = _Rewriter(self._evaluator(), self._var_values)
        return self._rewriter

    def simplify(self, expr: PrimExpr) -> PrimExpr:
        """``expr`` simplified under what is known; the same object when nothing changes."""
        return self._current_rewriter().simplify(expr)

    def const_int_bound(self, expr: PrimExpr) -> ConstIntBound:
        """Constant bounds of ``expr`` (of its simplified form when that is tighter)."""
        rewriter = self._current_rewriter()
        evaluator = rewriter.bounds
        direct = evaluator.bound(expr)
        if direct.is_const or not (expr.dtype.is_integer and expr.dtype.lanes == 1):
            return direct
        simplified = rewriter.simplify(expr)
        if simplified is expr:
            return direct
        other = evaluator.bound(simplified)
        return ConstIntBound(max(direct.min_value, other.min_value), min(direct.max_value, other.max_value))

    def can_prove(self, condition: PrimExpr | bool) -> bool:
        """Whether ``condition`` holds for every value of the variables (False when unsure)."""
        if isinstance(condition, bool):
            return condition
        simplified = self.simplify(condition)
        return isinstance(simplified, IntImm) and simplified.value != 0

    def can_prove_equal(self, a: PrimExpr | int, b: PrimExpr | int) -> bool:
        """Whether ``a`` and ``b`` are always equal (False when unsure)."""
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if isinstance(a, int):
            a = IntImm(a, b.dtype)  # type: ignore[union-attr]
        if isinstance(b, int):
            b = IntImm(b, a.dtype)
        if a is b:
            return True
        if a.dtype != b.dtype:
            return False
        rewriter = self._current_rewriter()
        if is_index_dtype(a.dtype):
            difference = _sum_add(rewriter.to_sum(a), rewriter.to_sum(b), -1)
            if difference.is_const:
                return difference.const == 0
            return rewriter.decide_compare(EQ, difference, _Sum()) is True
        return rewriter.same(rewriter.simplify(a), rewriter.simplify(b))


def simplify(expr: PrimExpr, dom_map: Mapping[Var, Range] | None = None) -> PrimExpr:
    """Simplify ``expr``, knowing that each variable of ``dom_map`` lies in its range."""
    analyzer = Analyzer()
    for var, dom in (dom_map or {}).items():
        analyzer.bind(var, dom)
    return analyzer.simplify(expr)


def is_multiple(expr: PrimExpr, factor: int) -> bool:
    """Whether ``expr`` is provably a multiple of ``factor`` for every value of its variables
    (an address offset that a vector access of ``factor`` elements may take as aligned)."""
    if factor == 1:
        return True
    rest = simplify(FloorMod(expr, IntImm(factor, expr.dtype)))
    return isinstance(rest, IntImm) and rest.value == 0
