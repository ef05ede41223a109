"""``partition_tails``: a loop whose last iterations alone fail a condition is cut in two.

A split whose factors do not divide the extent (``split(i, [10, 3])`` of a loop of 28) guards
its blocks with a predicate, ``if i_0 * 3 + i_1 < 28``. Left in place, the test runs in the
innermost loop of every tile, and the guarded accumulator updates of a register tile keep LLVM
from holding them in registers. Here a serial or unrolled loop of constant bounds is cut where
such a condition stops being provable: the first part runs the iterations for which the
analyzer proves the condition for every value of the loops inside (the test disappears), the
second part, the tail, keeps it, and inside the tail the inner loops are cut the same way
(where the condition is provably false, the guarded statement goes). Before::

    for i_0, k in T.grid(10, 64):
        for i_1 in T.unroll(3):
            if i_0 * 3 + i_1 < 28:
                C[i_0 * 3 + i_1] = C[i_0 * 3 + i_1] + A[i_0 * 3 + i_1, k]

After::

    for i_0, k in T.grid(9, 64):
        for i_1 in T.unroll(3):
            C[i_0 * 3 + i_1] = C[i_0 * 3 + i_1] + A[i_0 * 3 + i_1, k]
    for i_0 in range(9, 10):
        for k in range(64):
            for i_1 in T.unroll(1):
                C[i_0 * 3 + i_1] = C[i_0 * 3 + i_1] + A[i_0 * 3 + i_1, k]

A parallel loop is not cut (its iterations are the threads' work); when the guards of its
variable hold for every value of the loops inside as soon as a condition C on the enclosing
loops holds -- the guard with each inner loop at its last value, once the analyzer proves that
this is the worst case -- its body becomes ``if C: <body without those guards> else: <body>``,
one test per iteration (a tile loop fused into the parallel loop).

Only comparisons (``<``, ``<=``, ``>``, ``>=``) of the loop variable are cut on; a condition
is dropped or a statement removed only where the analyzer proves it, over the ranges of every
enclosing loop, so the program computes what it did. A loop is cut only when its first part is
at least as long as its tail (a tail, not a head) or when the guard is provably false over the
whole tail (which then disappears); vectorized and thread-bound loops are left as they are.
Every copy of a body gets its own loop variables (``FreshDefinitions``).
"""

from __future__ import annotations

from tir.arith import Analyzer
from tir.ir import (
    GE,
    GT,
    LE,
    LT,
    And,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    IRVisitor,
    LetStmt,
    Not,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    free_vars,
    substitute,
)
from tir.ir.expr import conjunction
from tir.ir.structural import structural_equal
from tir.transform._common import FreshDefinitions, is_no_op, make_seq, no_op, uses_var

__all__ = ["partition_tails"]

_CUTTABLE = (ForKind.SERIAL, ForKind.UNROLLED)
_COMPARISONS = (LT, LE, GT, GE)


def _conjuncts(condition: PrimExpr) -> list[PrimExpr]:
    if isinstance(condition, And):
        return _conjuncts(condition.a) + _conjuncts(condition.b)
    return [condition]


class _Context:
    """What is known where a statement stands: the ranges of the enclosing loops and the values
    of the enclosing ``LetStmt`` variables."""

    def __init__(self) -> None:
        self.ranges: dict[Var, Range] = {}
        self.values: dict[Var, PrimExpr] = {}

    def analyzer(self, extra: dict[Var, Range] | None = None) -> Analyzer:
        analyzer = Analyzer()
        for var, value in self.values.items():
            analyzer.bind(var, value)
        for var, dom in {**self.ranges, **(extra or {})}.items():
            analyzer.bind(var, dom)
        return analyzer


class _Guards(IRVisitor):
    """The comparisons of ``var`` that guard statements under a loop, each with the ranges and
    let values of the statements between the loop and the guard."""

    def __init__(self, var: Var) -> None:
        self.var = var
        self.ranges: dict[Var, Range] = {}
        self.values: dict[Var, PrimExpr] = {}
        self.found: list[tuple[PrimExpr, dict[Var, Range], dict[Var, PrimExpr]]] = []

    def visit_For(self, loop: For) -> None:
        self.ranges[loop.loop_var] = Range(loop.min, loop.extent)
        self.visit(loop.body)
        del self.ranges[loop.loop_var]

    def visit_LetStmt(self, stmt: LetStmt) -> None:
        self.values[stmt.var] = stmt.value
        self.visit(stmt.body)
        del self.values[stmt.var]

    def visit_IfThenElse(self, stmt: IfThenElse) -> None:
        for term in _conjuncts(stmt.condition):
            if isinstance(term, _COMPARISONS) and uses_var(term, self.var):
                self.found.append((term, dict(self.ranges), dict(self.values)))
        self.visit(stmt.then_case)
        if stmt.else_case is not None:
            self.visit(stmt.else_case)


def _margin(term: PrimExpr) -> PrimExpr | None:
    """An integer ``m`` with ``term`` true exactly when ``m > 0``, for integer comparisons."""
    if not isinstance(term, _COMPARISONS) or not term.a.dtype.is_integer or term.a.dtype.lanes != 1:
        return None
    one = IntImm(1, term.a.dtype)
    if isinstance(term, LT):
        return term.b - term.a
    if isinstance(term, LE):
        return term.b - term.a + one
    if isinstance(term, GT):
        return term.a - term.b
    return term.a - term.b + one


class _DropTerms(IRMutator):
    """A body without the guard terms in ``implied`` (by identity): the then-branch of an
    unswitched loop, where the conditions those terms imply hold."""

    def __init__(self, implied: set[int]) -> None:
        self.implied = implied

    def visit_IfThenElse(self, stmt: IfThenElse) -> Stmt:
        terms = _conjuncts(stmt.condition)
        kept = [term for term in terms if id(term) not in self.implied]
        then_case = self.visit(stmt.then_case)
        else_case = None if stmt.else_case is None else self.visit(stmt.else_case)
        if not kept:
            return then_case
        if len(kept) == len(terms) and then_case is stmt.then_case and else_case is stmt.else_case:
            return stmt
        return stmt.replace(condition=conjunction(kept), then_case=then_case, else_case=else_case)


class _PartitionTails(IRMutator):
    def __init__(self) -> None:
        self.context = _Context()

    # ------------------------------------------------------------ loops

    def visit_For(self, loop: For) -> Stmt:
        cut = self._cut_point(loop)
        if cut is None:
            return self._visit_loop(self._unswitched(loop))
        start, extent = loop.min.value, loop.extent.value  # type: ignore[attr-defined]
        dtype = loop.loop_var.dtype
        head = loop.replace(extent=IntImm(cut - start, dtype))
        fresh = FreshDefinitions()
        tail = loop.replace(
            loop_var=fresh.fresh_var(loop.loop_var),
            min=IntImm(cut, dtype),
            extent=IntImm(start + extent - cut, dtype),
            body=fresh.visit(loop.body),
        )
        return make_seq([self._visit_loop(head), self._visit_loop(tail)])

    def _unswitched(self, loop: For) -> For:
        """``loop`` with its body as ``if C: <body, guards implied by C dropped> else: <body>``
        when some guards of its variable hold for every value of the loops inside as soon as
        the condition C, on the loop's variable and enclosing ones alone, holds: a parallel
        loop over tiles, where the last tile's guard cannot be cut off, tests once per tile."""
        if loop.kind is not ForKind.PARALLEL:
            return loop  # a serial loop is cut instead; an unrolled or vector one is too small
        guards = _Guards(loop.loop_var)
        guards.visit(loop.body)
        if not guards.found:
            return loop
        self.context.ranges[loop.loop_var] = Range(loop.min, loop.extent)
        try:
            conditions: list[PrimExpr] = []
            implied: set[int] = set()
            unsettled: set[int] = set()  # a term object that also stands where C does not imply it
            for term, ranges, values in guards.found:
                condition = self._outer_condition(term, ranges, values)
                if condition is None:
                    unsettled.add(id(term))
                    continue
                implied.add(id(term))
                if not any(structural_equal(condition, c) for c in conditions):
                    conditions.append(condition)
        finally:
            del self.context.ranges[loop.loop_var]
        if not implied - unsettled:
            return loop
        then_case = _DropTerms(implied - unsettled).visit(loop.body)
        else_case = FreshDefinitions().visit(loop.body)
        return loop.replace(body=IfThenElse(conjunction(conditions), then_case, else_case))

    def _outer_condition(
        self, term: PrimExpr, ranges: dict[Var, Range], values: dict[Var, PrimExpr]
    ) -> PrimExpr | None:
        """A condition on the enclosing loops alone under which ``term`` holds for every value
        of the loops in ``ranges`` (those between the unswitched loop and the guard): ``term``
        with each of them at its last value, when the analyzer proves that this value is the
        worst case (the margin ``term`` keeps only grows as they come down). None otherwise."""
        margin = _margin(term)
        if margin is None or not ranges:
            return None
        last = {var: dom.min + dom.extent - 1 for var, dom in ranges.items()}
        worst = substitute(margin, last)
        analyzer = self.context.analyzer(ranges)
        for var, value in values.items():
            analyzer.bind(var, value)
        if not analyzer.can_prove(GE(margin - worst, IntImm(0, margin.dtype))):
            return None
        outer = self.context.analyzer()
        condition = outer.simplify(GT(worst, IntImm(0, worst.dtype)))
        if any(var in free_vars(condition) for var in (*ranges, *values)):
            return None
        if outer.can_prove(condition) or outer.can_prove(Not(condition)):
            return None  # settled either way: the plain guard pass handles it
        return condition

    def _visit_loop(self, loop: For) -> Stmt:
        ranges = self.context.ranges
        ranges[loop.loop_var] = Range(loop.min, loop.extent)
        body = self.visit(loop.body)
        del ranges[loop.loop_var]
        if is_no_op(body):
            return no_op()
        return loop if body is loop.body else loop.replace(body=body)

    def _cut_point(self, loop: For) -> int | None:
        """Where to cut ``loop``: the end of the longest first part over which some guard of its
        variable is provable (the shortest such part over all guards), or None."""
        if loop.kind not in _CUTTABLE or not isinstance(loop.min, IntImm) or not isinstance(loop.extent, IntImm):
            return None
        start, end = loop.min.value, loop.min.value + loop.extent.value
        if end - start < 2:
            return None
        guards = _Guards(loop.loop_var)
        guards.visit(loop.body)
        cuts = []  # (where, whether the guard is false from there on)
        for guard in guards.found:
            if self._provable(loop, start, end, *guard) or not self._provable(loop, start, start + 1, *guard):
                continue
            low, high = start + 1, end  # provable up to low, not up to high
            while high - low > 1:
                middle = (low + high) // 2
                if self._provable(loop, start, middle, *guard):
                    low = middle
                else:
                    high = middle
            term, ranges, values = guard
            cuts.append((low, self._provable(loop, low, end, Not(term), ranges, values)))
        if not cuts:
            return None
        cut, dead_tail = min(cuts)
        # A tail worth its own copy: short, or never run (its guarded statements go).
        return cut if dead_tail or cut - start >= end - cut else None

    def _provable(
        self, loop: For, begin: int, stop: int, term: PrimExpr, ranges: dict[Var, Range], values: dict[Var, PrimExpr]
    ) -> bool:
        """Whether ``term`` holds while ``loop``'s variable runs over ``[begin, stop)``."""
        dtype = loop.loop_var.dtype
        dom = Range(IntImm(begin, dtype), IntImm(stop - begin, dtype))
        analyzer = self.context.analyzer({**ranges, loop.loop_var: dom})
        for var, value in values.items():
            analyzer.bind(var, value)
        return analyzer.can_prove(term)

    def visit_LetStmt(self, stmt: LetStmt) -> Stmt:
        values = self.context.values
        values[stmt.var] = stmt.value
        body = self.visit(stmt.body)
        del values[stmt.var]
        return stmt if body is stmt.body else stmt.replace(body=body)

    # ------------------------------------------------------------ guards

    def visit_IfThenElse(self, stmt: IfThenElse) -> Stmt:
        terms = _conjuncts(stmt.condition)
        if any(isinstance(term, _COMPARISONS) for term in terms):
            analyzer = self.context.analyzer()
            if any(isinstance(term, _COMPARISONS) and analyzer.can_prove(Not(term)) for term in terms):
                return no_op() if stmt.else_case is None else self.visit(stmt.else_case)
            kept = [term for term in terms if not (isinstance(term, _COMPARISONS) and analyzer.can_prove(term))]
            if not kept:
                return self.visit(stmt.then_case)
            if len(kept) < len(terms):
                stmt = stmt.replace(condition=conjunction(kept))
        then_case = self.visit(stmt.then_case)
        else_case = None if stmt.else_case is None else self.visit(stmt.else_case)
        if is_no_op(then_case) and (else_case is None or is_no_op(else_case)):
            return no_op()
        if then_case is stmt.then_case and else_case is stmt.else_case:
            return stmt
        return stmt.replace(then_case=then_case, else_case=else_case)


class _FindGuard(IRVisitor):
    found = False

    def visit_IfThenElse(self, stmt: IfThenElse) -> None:
        self.found = True


def partition_tails(func: PrimFunc) -> PrimFunc:
    """Cut the loops of ``func`` whose tails alone fail a guard (module docstring)."""
    finder = _FindGuard()
    finder.visit(func.body)
    if not finder.found:
        return func
    body = _PartitionTails().visit(func.body)
    return func if body is func.body else func.replace(body=body)
