"""``unroll_loops``: an ``unroll`` loop of constant extent is replaced by copies of its body.

(``max_extent=0`` makes every unroll loop a ``pragma_unroll`` hint that LLVM unrolls: cheaper
to build, as no later pass walks the copies, but LLVM's register allocator then handled some
register tiles badly -- ResNet-50's 7 x 2 tiles of 14 accumulators ran 1.5x slower -- so both
pipelines replicate small loops here.)

Copy ``k`` has the loop variable replaced by ``min + k`` and its own loop variables, let
variables and allocations (new objects, so each is defined once). Inner loops are unrolled first. A
loop is replicated only while it stays small: at most ``max_extent`` iterations (64) and at
most ``max_statements`` statements in all (1024, counting the statements of the copies);
a larger loop, or one of symbolic extent, becomes a serial loop carrying the annotation
``{"pragma_unroll": True}`` for the backend: LLVM code generation marks it
``llvm.loop.unroll.full`` and LLVM unrolls it (a constant trip count; copying large bodies in
C++ is much cheaper than here), CUDA emits ``#pragma unroll``. A loop that would unroll to
more than 4096 statements (inner hinted loops multiplied out) stays a plain serial loop: its
build would take minutes. Before::

    for j in T.unroll(3):
        B[i * 3 + j] = A[i * 3 + j] * 2.0

After::

    B[i * 3] = A[i * 3] * 2.0
    B[i * 3 + 1] = A[i * 3 + 1] * 2.0
    B[i * 3 + 2] = A[i * 3 + 2] * 2.0
"""

from __future__ import annotations

from tir.arith import simplify as simplify_expr
from tir.ir import (
    Allocate,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    substitute,
)
from tir.transform._common import FreshDefinitions, make_seq, no_op

__all__ = ["MAX_BACKEND_UNROLL_STATEMENTS", "MAX_UNROLL_EXTENT", "MAX_UNROLL_STATEMENTS", "unroll_loops"]

MAX_UNROLL_EXTENT = 64
MAX_UNROLL_STATEMENTS = 1024
# Past this many statements (after unrolling, inner hinted loops included) a loop gets no
# unroll hint at all: LLVM would spend minutes on it (a tuner candidate that unrolled loops
# around a whole 3x3x64 convolution tile took over two minutes to build).
MAX_BACKEND_UNROLL_STATEMENTS = 4096


class _Unroll(IRMutator):
    def __init__(self, max_extent: int, max_statements: int) -> None:
        self.max_extent = max_extent
        self.max_statements = max_statements

    def visit_For(self, loop: For) -> Stmt:
        body = self.visit(loop.body)
        if loop.kind is not ForKind.UNROLLED:
            return loop.replace(body=body)
        extent = loop.extent
        if isinstance(extent, IntImm) and extent.value <= 0:
            return no_op()
        if (
            isinstance(extent, IntImm)
            and extent.value <= self.max_extent
            and extent.value * _unrolled_size(body) <= self.max_statements
        ):
            copies = []
            for k in range(extent.value):
                value = simplify_expr(loop.min + IntImm(k, loop.loop_var.dtype))
                if k == 0:
                    copies.append(substitute(body, {loop.loop_var: value}))
                else:
                    # One walk substitutes and renews the definitions (two walks per copy
                    # were a good part of lowering a heavily unrolled tuner candidate).
                    fresh = FreshDefinitions()
                    fresh.vars[loop.loop_var] = value  # type: ignore[assignment]
                    copies.append(fresh.visit(body))
            return make_seq(copies)
        if isinstance(extent, IntImm) and extent.value * _unrolled_size(body) > MAX_BACKEND_UNROLL_STATEMENTS:
            # Unrolled, it would be tens of thousands of statements: LLVM would take minutes.
            return loop.replace(kind=ForKind.SERIAL, body=body)
        annotations = {**loop.annotations, "pragma_unroll": True}
        return loop.replace(kind=ForKind.SERIAL, body=body, annotations=annotations)


def _unrolled_size(stmt: Stmt) -> int:
    """Statements of ``stmt`` once the backend unrolled its ``pragma_unroll`` loops (copying a
    loop here copies what the backend will unroll inside it too)."""
    if isinstance(stmt, SeqStmt):
        return sum(_unrolled_size(s) for s in stmt.stmts)
    if isinstance(stmt, For):
        inner = 1 + _unrolled_size(stmt.body)
        if stmt.annotations.get("pragma_unroll") and isinstance(stmt.extent, IntImm):
            return stmt.extent.value * inner
        return inner
    if isinstance(stmt, IfThenElse):
        return 1 + _unrolled_size(stmt.then_case) + (_unrolled_size(stmt.else_case) if stmt.else_case else 0)
    if isinstance(stmt, (LetStmt, Allocate)):
        return 1 + _unrolled_size(stmt.body)
    return 1


def unroll_loops(
    func: PrimFunc, max_extent: int = MAX_UNROLL_EXTENT, max_statements: int = MAX_UNROLL_STATEMENTS
) -> PrimFunc:
    """Replicate the body of every small constant-extent ``unroll`` loop (module docstring)."""
    return func.replace(body=_Unroll(max_extent, max_statements).visit(func.body))
