"""``insert_bounds_checks``: every buffer access checked at run time (``tir.build(..., checked=True)``).

Runs on lowered functions (1-D buffers). Before each statement, every access the statement
makes is tested, in evaluation order (the loads inside an index before the access itself), and
one that leaves ``[0, extent)`` ends the function with a status code ``>= FIRST_CODE``. The
runtime (``LLVMModule._check_status``) turns the code into an ``IndexError`` naming the buffer
and the index, through ``attrs["bounds_checks"]`` (code -> message). An access in a branch of
``T.if_then_else`` is tested only when its branch is taken (padding reads stay legal). Before::

    for i in range(4):
        B[i] = A[i + 1]

After::

    for i in range(4):
        if not (0 <= i + 1 and i + 1 < 4):
            T.evaluate(T.bounds_error(1000))
        if not (0 <= i and i < 4):
            T.evaluate(T.bounds_error(1001))
        B[i] = A[i + 1]

Contiguous vector accesses (``T.ramp`` of a constant stride) test their first and last lane; an
index that is another vector expression (a gather) and accesses inside ``T.let`` bodies are not
tested. The code generator lowers ``tir.bounds_error(code)`` to ``return code``, so heap
allocations made before the failing access are not freed (a checked build is for debugging).
"""

from __future__ import annotations

from tir.ir import (
    GE,
    LT,
    Allocate,
    And,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    DataType,
    Evaluate,
    For,
    IfThenElse,
    IntImm,
    IRMutator,
    Let,
    LetStmt,
    Not,
    PrimExpr,
    PrimFunc,
    Ramp,
    SeqStmt,
    Stmt,
)
from tir.transform._common import cast_to

__all__ = ["BOUNDS_CHECKS_ATTR", "BOUNDS_ERROR_OP", "FIRST_CODE", "insert_bounds_checks"]

#: ``tir.bounds_error(code)``: the function returns ``code`` (the code generator's ``ret``).
BOUNDS_ERROR_OP = "tir.bounds_error"
#: ``attrs`` key: ``{status code: message}`` of the function's checks.
BOUNDS_CHECKS_ATTR = "bounds_checks"
#: The smallest status a failed check returns (-1 is a failed heap allocation).
FIRST_CODE = 1000

_BOOL = DataType("bool", 1)
_TRUE = IntImm(1, _BOOL)


def _lazy_and(guard: PrimExpr | None, condition: PrimExpr) -> PrimExpr:
    """``condition`` where ``guard`` holds, true elsewhere; ``condition`` is evaluated only
    where ``guard`` holds (it may load what is valid only then)."""
    if guard is None:
        return condition
    return Call(_BOOL, "if_then_else", (guard, condition, _TRUE))


def _index_ends(index: PrimExpr) -> list[PrimExpr] | None:
    """Scalar expressions whose range is the index's (its lanes' extremes), or None."""
    if index.dtype.lanes == 1:
        return [index]
    if isinstance(index, Broadcast):
        return [index.value]
    if isinstance(index, Ramp) and isinstance(index.stride, IntImm):
        last = index.base + IntImm(index.stride.value * (index.lanes - 1), index.base.dtype)
        return [index.base, last]
    return None


class _Checks:
    """Collects ``(condition, message)`` for the accesses of one statement, in order."""

    def __init__(self) -> None:
        self.found: list[tuple[PrimExpr, str]] = []

    def expr(self, expr: PrimExpr, guard: PrimExpr | None) -> None:
        if isinstance(expr, BufferLoad):
            for index in expr.indices:
                self.expr(index, guard)
            self.access(expr.buffer, expr.indices, guard)
            return
        if isinstance(expr, Call) and expr.op == "if_then_else" and len(expr.args) == 3:
            condition, then_value, else_value = expr.args
            self.expr(condition, guard)
            if condition.dtype.lanes != 1:
                return  # lanes may take either side: not tested
            self.expr(then_value, _lazy_and(guard, condition) if guard is not None else condition)
            self.expr(else_value, _lazy_and(guard, Not(condition)) if guard is not None else Not(condition))
            return
        if isinstance(expr, Let):
            self.expr(expr.value, guard)
            return  # the body may use the bound variable, which a check before the statement lacks
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, PrimExpr):
                    self.expr(item, guard)

    def access(self, buffer: Buffer, indices: tuple[PrimExpr, ...], guard: PrimExpr | None) -> None:
        if len(indices) != len(buffer.shape):
            return
        conditions: list[PrimExpr] = []
        for index, extent in zip(indices, buffer.shape):
            ends = _index_ends(index)
            if ends is None:
                continue
            for end in ends:
                conditions.append(And(GE(end, IntImm(0, end.dtype)), LT(end, cast_to(extent, end.dtype))))
        if not conditions:
            return
        condition = conditions[0]
        for more in conditions[1:]:
            condition = And(condition, more)
        shown = ", ".join(str(index) for index in indices)
        shape = ", ".join(str(extent) for extent in buffer.shape)
        message = f"{buffer.name}[{shown}] is outside buffer {buffer.name} of shape ({shape})"
        self.found.append((_lazy_and(guard, condition), message))


class _Insert(IRMutator):
    def __init__(self, first_code: int) -> None:
        self.next_code = first_code
        self.messages: dict[int, str] = {}

    def guarded(self, stmt: Stmt, *exprs: PrimExpr, store: BufferStore | None = None) -> Stmt:
        """``stmt`` after tests of the accesses of ``exprs`` (and of ``store`` itself, last)."""
        checks = _Checks()
        for expr in exprs:
            checks.expr(expr, None)
        if store is not None:
            checks.access(store.buffer, store.indices, None)
        if not checks.found:
            return stmt
        tests: list[Stmt] = []
        for condition, message in checks.found:
            code = self.next_code
            self.next_code += 1
            self.messages[code] = message
            fail = Evaluate(Call(DataType("int", 32), BOUNDS_ERROR_OP, (IntImm(code),)))
            tests.append(IfThenElse(Not(condition), fail, None))
        return SeqStmt((*tests, stmt))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        return self.guarded(store, *store.indices, store.value, store=store)

    def visit_Evaluate(self, stmt: Evaluate) -> Stmt:
        return self.guarded(stmt, stmt.value)

    def visit_IfThenElse(self, stmt: IfThenElse) -> Stmt:
        visited = stmt.replace(
            then_case=self.visit(stmt.then_case),
            else_case=self.visit(stmt.else_case) if stmt.else_case is not None else None,
        )
        return self.guarded(visited, stmt.condition)

    def visit_LetStmt(self, stmt: LetStmt) -> Stmt:
        return self.guarded(stmt.replace(body=self.visit(stmt.body)), stmt.value)

    def visit_For(self, loop: For) -> Stmt:
        return self.guarded(loop.replace(body=self.visit(loop.body)), loop.min, loop.extent)

    def visit_Allocate(self, stmt: Allocate) -> Stmt:
        return stmt.replace(body=self.visit(stmt.body))


def insert_bounds_checks(func: PrimFunc, first_code: int = FIRST_CODE) -> PrimFunc:
    """``func`` with every access tested before it runs (see the module docstring); its
    ``attrs["bounds_checks"]`` maps the status codes from ``first_code`` on to messages."""
    mutator = _Insert(first_code)
    body = mutator.visit(func.body)
    if not mutator.messages:
        return func
    return func.replace(body=body, attrs={**func.attrs, BOUNDS_CHECKS_ATTR: dict(mutator.messages)})
