"""``simplify``: every expression of every statement simplified, and trivial statements folded.

Expressions go through ``tir.arith.Analyzer.simplify`` knowing the range of every enclosing
loop variable; vector expressions are folded too (``ramp(b, s, n) + broadcast(c, n)`` is
``ramp(b + c, s, n)``). Statements: an ``if`` whose condition is decided keeps one branch, a
serial loop of extent 1 becomes its body with the variable replaced, a loop of extent 0 and
``T.evaluate(0)`` inside a sequence disappear. Nothing changed -> the very same object.
Before::

    for i in range(4):
        for j in range(1):
            B[T.ramp(i * 4 + j * 4, 1, 4)] = A[T.ramp(i * 4, 1, 4) + T.broadcast(0, 4)]
        if i < 16:
            C[i * 1] = B[i + 0]

After::

    for i in range(4):
        B[T.ramp(i * 4, 1, 4)] = A[T.ramp(i * 4, 1, 4)]
        C[i] = B[i]
"""

from __future__ import annotations

from tir.arith import Analyzer
from tir.ir import (
    Add,
    BinaryOp,
    Broadcast,
    CmpOp,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    Mul,
    PrimExpr,
    PrimFunc,
    Ramp,
    Range,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    substitute,
)
from tir.transform._common import make_seq, no_op

__all__ = ["fold_vectors", "simplify"]


class _FoldVectors(IRMutator):
    """Folds Ramp / Broadcast arithmetic into single Ramp / Broadcast nodes."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.analyzer = analyzer

    def visit_BinaryOp(self, expr: BinaryOp) -> PrimExpr:
        expr = self.generic_visit(expr)
        if expr.dtype.lanes == 1 and expr.a.dtype.lanes == 1:
            return expr
        a, b, simp = expr.a, expr.b, self.analyzer.simplify
        if isinstance(a, Broadcast) and isinstance(b, Broadcast):
            return Broadcast(simp(type(expr)(a.value, b.value)), a.lanes)
        if isinstance(expr, CmpOp) or not (a.dtype.is_integer and isinstance(a, (Ramp, Broadcast))):
            return expr
        if isinstance(expr, (Add, Sub)):
            if isinstance(a, Ramp) and isinstance(b, Broadcast):
                return Ramp(simp(type(expr)(a.base, b.value)), a.stride, a.lanes)
            if isinstance(a, Broadcast) and isinstance(b, Ramp) and isinstance(expr, Add):
                return Ramp(simp(a.value + b.base), b.stride, b.lanes)
            if isinstance(a, Ramp) and isinstance(b, Ramp):
                return Ramp(simp(type(expr)(a.base, b.base)), simp(type(expr)(a.stride, b.stride)), a.lanes)
        if isinstance(expr, Mul):
            if isinstance(a, Ramp) and isinstance(b, Broadcast):
                return Ramp(simp(a.base * b.value), simp(a.stride * b.value), a.lanes)
            if isinstance(a, Broadcast) and isinstance(b, Ramp):
                return Ramp(simp(b.base * a.value), simp(b.stride * a.value), b.lanes)
        return expr

    def visit_Ramp(self, expr: Ramp) -> PrimExpr:
        expr = self.generic_visit(expr)
        if isinstance(expr.stride, IntImm) and expr.stride.value == 0:
            return Broadcast(expr.base, expr.lanes)
        return expr


def fold_vectors(expr: PrimExpr, analyzer: Analyzer | None = None) -> PrimExpr:
    """``expr`` with its Ramp / Broadcast arithmetic folded."""
    return _FoldVectors(analyzer or Analyzer()).visit(expr)  # type: ignore[no-any-return]


class _Simplify(IRMutator):
    def __init__(self) -> None:
        self.analyzer = Analyzer()
        # Variables of the extent-1 loops being removed, replaced in each expression as it is
        # visited: substituting in the whole loop body first walked that body once more per
        # nested extent-1 loop (most of this pass's time on unrolled tuner candidates).
        self.replacements: dict[Var, PrimExpr] = {}

    def visit_PrimExpr(self, expr: PrimExpr) -> PrimExpr:
        if self.replacements:
            expr = substitute(expr, self.replacements)
        simplified = self.analyzer.simplify(expr)
        folded = _FoldVectors(self.analyzer).visit(simplified)
        if folded is not simplified:
            folded = self.analyzer.simplify(folded)
        return folded  # type: ignore[no-any-return]

    def visit_For(self, loop: For) -> Stmt:
        start, extent = self.visit(loop.min), self.visit(loop.extent)
        if isinstance(extent, IntImm) and extent.value <= 0:
            return no_op()
        if isinstance(extent, IntImm) and extent.value == 1 and loop.kind is ForKind.SERIAL and not loop.annotations:
            self.replacements[loop.loop_var] = start
            try:
                return self.visit(loop.body)  # type: ignore[no-any-return]
            finally:
                del self.replacements[loop.loop_var]
        self.analyzer.bind(loop.loop_var, Range(start, extent))
        body = self.visit(loop.body)
        return loop.replace(min=start, extent=extent, body=body)

    def visit_IfThenElse(self, stmt: IfThenElse) -> Stmt:
        condition = self.visit(stmt.condition)
        if isinstance(condition, IntImm):
            if condition.value:
                return self.visit(stmt.then_case)
            return no_op() if stmt.else_case is None else self.visit(stmt.else_case)
        then_case = self.visit(stmt.then_case)
        else_case = None if stmt.else_case is None else self.visit(stmt.else_case)
        return stmt.replace(condition=condition, then_case=then_case, else_case=else_case)

    def visit_SeqStmt(self, stmt: SeqStmt) -> Stmt:
        stmts = tuple(self.visit(item) for item in stmt.stmts)
        if all(a is b for a, b in zip(stmts, stmt.stmts)) and not any(isinstance(s, SeqStmt) for s in stmts):
            return stmt
        return make_seq(list(stmts))


def simplify(func: PrimFunc) -> PrimFunc:
    """Simplify every expression in ``func`` and fold decided statements (module docstring)."""
    return func.replace(body=_Simplify().visit(func.body))
