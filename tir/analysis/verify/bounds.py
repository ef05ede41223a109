"""Rule ``out-of-bounds``: no access provably misses its buffer.

For every load and store that runs unconditionally in its block (not under an ``if`` nor in a
branch of ``T.if_then_else``, which guard padding reads such as
``T.if_then_else(1 <= vi, A[vi - 1], 0)``), the range of each index is taken over the block's
iterator domains and the loops around the access (symbolic sizes stay symbolic). The access is
reported when, in some dimension, that whole range lies outside ``[0, extent)``: then every
instance of the block touches memory outside the buffer (in built code, a segfault or silent
corruption). Ranges are over-approximations, so what is reported is certain; an access only
partly outside, or one the analysis cannot bound, is not judged here (``tir.build(...,
checked=True)`` checks every access at run time). Loops of extent 0 never run and are skipped.

Before::

    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            B[vi] = A[vi + 100000000]          # A has 4 elements

reports ``[out-of-bounds] block 'B': reads A[vi + 100000000]: index 0 ranges over
[100000000, 100000003], outside A's extent 4``.

``tir.build`` runs this rule (``check_bounds``) before code generation.
"""

from __future__ import annotations

from tir.analysis.verify._context import Violation, fragment
from tir.arith.int_set import eval_interval
from tir.arith.simplify import Analyzer
from tir.ir.buffer import Buffer, Range
from tir.ir.expr import BufferLoad, Call, IntImm, Let, PrimExpr, Var
from tir.ir.function import PrimFunc
from tir.ir.stmt import Block, BlockRealize, BufferStore, For, IfThenElse, LetStmt, SeqStmt, Stmt

__all__ = ["RULE", "check_bounds"]

RULE = "out-of-bounds"


class _BoundsChecker:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.ranges: dict[Var, Range] = {}
        self.block: Block | None = None
        self.statement: Stmt | None = None
        self.violations: list[Violation] = []

    # ------------------------------------------------------------ statements

    def stmt(self, stmt: Stmt | None, guarded: bool) -> None:
        if stmt is None:
            return
        if isinstance(stmt, SeqStmt):
            for item in stmt.stmts:
                self.stmt(item, guarded)
        elif isinstance(stmt, For):
            self.exprs(guarded, stmt.min, stmt.extent)
            if isinstance(stmt.extent, IntImm) and stmt.extent.value <= 0:
                return  # never runs
            self.ranges[stmt.loop_var] = Range(stmt.min, stmt.extent)
            self.stmt(stmt.body, guarded)
            self.ranges.pop(stmt.loop_var, None)
        elif isinstance(stmt, BlockRealize):
            self.exprs(guarded, stmt.predicate, *stmt.iter_values)
            self.stmt(stmt.block, guarded)
        elif isinstance(stmt, Block):
            outer = self.block
            self.block = stmt
            for iv in stmt.iter_vars:
                self.ranges[iv.var] = iv.dom
            # A block's own instances run whatever guards its realize sits under: judging its
            # accesses over its iterator domains is exact (bindings stay inside the domains).
            self.stmt(stmt.init, False)
            self.stmt(stmt.body, False)
            for iv in stmt.iter_vars:
                self.ranges.pop(iv.var, None)
            self.block = outer
        elif isinstance(stmt, IfThenElse):
            self.exprs(guarded, stmt.condition)
            self.stmt(stmt.then_case, True)
            self.stmt(stmt.else_case, True)
        elif isinstance(stmt, LetStmt):
            self.exprs(guarded, stmt.value)
            self.stmt(stmt.body, guarded)
        elif isinstance(stmt, BufferStore):
            self.statement = stmt
            self.access(stmt.buffer, stmt.indices, "writes", guarded)
            self.exprs(guarded, stmt.value, *stmt.indices)
        else:
            for name in type(stmt).child_fields():
                value = getattr(stmt, name)
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, PrimExpr):
                        self.statement = stmt
                        self.exprs(guarded, item)
                    elif isinstance(item, Stmt):
                        self.stmt(item, guarded)

    # ------------------------------------------------------------ expressions

    def exprs(self, guarded: bool, *exprs: PrimExpr) -> None:
        for expr in exprs:
            self.expr(expr, guarded)

    def expr(self, expr: PrimExpr, guarded: bool) -> None:
        if isinstance(expr, BufferLoad):
            self.access(expr.buffer, expr.indices, "reads", guarded)
        if isinstance(expr, Call) and expr.op == "if_then_else" and len(expr.args) == 3:
            self.expr(expr.args[0], guarded)
            self.expr(expr.args[1], True)
            self.expr(expr.args[2], True)
            return
        if isinstance(expr, Let):
            self.expr(expr.value, guarded)
            self.expr(expr.body, guarded)  # the bound variable stays symbolic: not judged
            return
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, PrimExpr):
                    self.expr(item, guarded)

    def access(self, buffer: Buffer, indices: tuple[PrimExpr, ...], verb: str, guarded: bool) -> None:
        if guarded or len(indices) != len(buffer.shape):
            return
        analyzer: Analyzer | None = None
        for dim, (index, extent) in enumerate(zip(indices, buffer.shape)):
            try:
                low, high = eval_interval(index, self.ranges)
            except Exception:  # an index the interval analysis does not know: not judged
                continue
            if analyzer is None:
                analyzer = Analyzer()
                for var, dom in self.ranges.items():
                    analyzer.bind(var, dom)
            try:
                outside = analyzer.can_prove(high < IntImm(0, high.dtype)) or (
                    low.dtype == extent.dtype and analyzer.can_prove(low >= extent)
                )
            except Exception:
                continue
            if outside:
                self.report(buffer, indices, verb, dim, analyzer.simplify(low), analyzer.simplify(high))
                return

    def report(
        self, buffer: Buffer, indices: tuple[PrimExpr, ...], verb: str, dim: int, low: PrimExpr, high: PrimExpr
    ) -> None:
        where = f"block {self.block.name!r}" if self.block is not None else f"function {self.func.name!r}"
        shown = ", ".join(str(index) for index in indices)
        shape = ", ".join(str(extent) for extent in buffer.shape) + ("," if len(buffer.shape) == 1 else "")
        message = (
            f"{verb} {buffer.name}[{shown}]: index {dim} ranges over [{low}, {high}], outside "
            f"{buffer.name}'s extent {buffer.shape[dim]} (shape ({shape})) for every instance"
        )
        self.violations.append(Violation(RULE, where, message, fragment(self.statement)))


def check_bounds(func: PrimFunc) -> list[Violation]:
    """Every access of ``func`` provably outside its buffer (see the module docstring)."""
    checker = _BoundsChecker(func)
    checker.stmt(func.body, False)
    return checker.violations
