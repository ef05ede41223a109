"""``vectorize_loops``: a ``vectorized`` loop of constant extent becomes vector statements.

The loop variable ``v`` of ``for v in T.vectorized(L)`` (starting at ``m``) becomes the vector
``T.ramp(m, 1, L)``; an index linear in ``v`` (``base + c * v``) becomes ``T.ramp(base + c*m, c,
L)``, making loads and stores vector accesses; scalars used next to vectors are broadcast, and
every operation (arithmetic, comparisons, ``Select``, ``Cast``, math calls) is widened to ``L``
lanes. Before::

    for i in range(4):
        for j in T.vectorized(8):
            B[i * 8 + j] = A[i * 8 + j] * 2.0 + C[i]

After::

    for i in range(4):
        B[T.ramp(i * 8, 1, 8)] = A[T.ramp(i * 8, 1, 8)] * T.broadcast(2.0, 8) + T.broadcast(C[i], 8)

A loop whose body this cannot express exactly stays a ``serial`` loop with its body unchanged:
a nested loop, a ``LetStmt`` or ``Allocate``, an ``if`` whose condition depends on ``v``, a store
whose index does not move with ``v`` (``C[i] = C[i] + A[i, k]`` vectorized over ``k``), an index
not linear in ``v``, a call other than an elementwise math function, a buffer written in the
loop and accessed there at another index (a dependence between lanes), or more than
``MAX_LANES`` lanes. ``target`` is accepted for width hints only; the result is correct on any
target.
"""

from __future__ import annotations

from tir.arith import Analyzer
from tir.ir import (
    Add,
    BinaryOp,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    Mul,
    Not,
    PrimExpr,
    PrimFunc,
    Ramp,
    Range,
    Select,
    SeqStmt,
    Stmt,
    StringImm,
    Sub,
    Var,
)
from tir.ir.ops import BITWISE, FLOAT_UNARY
from tir.ir.structural import structural_equal
from tir.target import Target

__all__ = ["MAX_LANES", "vectorize_loops"]

#: The widest vector a loop becomes; wider vectorized loops stay serial.
MAX_LANES = 64

#: Calls that apply lane by lane and have no side effects.
_ELEMENTWISE_CALLS = frozenset(FLOAT_UNARY) | {"abs", "pow", "fma", "isnan"} | frozenset(BITWISE)


class _CannotVectorize(Exception):
    """The body has something this pass does not vectorize; the loop stays serial."""


def _uses(expr: PrimExpr, var: Var) -> bool:
    if expr is var:
        return True
    for name in type(expr).child_fields():
        value = getattr(expr, name)
        if isinstance(value, PrimExpr) and _uses(value, var):
            return True
        if isinstance(value, tuple) and any(isinstance(item, PrimExpr) and _uses(item, var) for item in value):
            return True
    return False


def _broadcast(expr: PrimExpr, lanes: int) -> PrimExpr:
    return expr if expr.dtype.lanes == lanes else Broadcast(expr, lanes)


class _Vectorizer:
    """Widens the body of one loop ``for var in [start, start + lanes)``."""

    def __init__(self, var: Var, start: PrimExpr, lanes: int) -> None:
        self.var = var
        self.start = start
        self.lanes = lanes
        self.analyzer = Analyzer()
        self.analyzer.bind(var, Range(start, IntImm(lanes, var.dtype)))
        #: Every access of the body: buffer -> widened index tuples; and the buffers written.
        self.accesses: dict[Buffer, list[tuple[PrimExpr, ...]]] = {}
        self.written: set[Buffer] = set()

    # ------------------------------------------------------------ indices

    def linear(self, expr: PrimExpr) -> tuple[PrimExpr, PrimExpr] | None:
        """``(value at var = start, coefficient of var)`` when ``expr`` is linear in var, else None."""
        if not _uses(expr, self.var):
            return expr, IntImm(0, expr.dtype)
        if expr is self.var:
            return self.start, IntImm(1, expr.dtype)
        if isinstance(expr, (Add, Sub)):
            a, b = self.linear(expr.a), self.linear(expr.b)
            if a is None or b is None:
                return None
            return type(expr)(a[0], b[0]), type(expr)(a[1], b[1])
        if isinstance(expr, Mul):
            for x, y in ((expr.a, expr.b), (expr.b, expr.a)):
                if not _uses(y, self.var):
                    inner = self.linear(x)
                    if inner is None:
                        return None
                    return inner[0] * y, inner[1] * y
            return None
        if isinstance(expr, Cast) and expr.dtype.is_integer and expr.value.dtype.is_integer:
            inner = self.linear(expr.value)
            if inner is None:
                return None
            return Cast(expr.dtype, inner[0]), Cast(expr.dtype, inner[1])
        return None

    def index(self, index: PrimExpr, for_store: bool) -> PrimExpr:
        """The widened index: a Ramp when it moves with the loop variable, else unchanged."""
        if not _uses(index, self.var):
            return self.expr(index)
        if index.dtype.lanes != 1:
            raise _CannotVectorize("an index that is already a vector")
        found = self.linear(self.analyzer.simplify(index))
        if found is None:
            raise _CannotVectorize("an index not linear in the loop variable")
        base, coeff = (self.analyzer.simplify(part) for part in found)
        if _uses(base, self.var) or _uses(coeff, self.var):
            raise _CannotVectorize("an index not linear in the loop variable")
        if for_store and not (isinstance(coeff, IntImm) and coeff.value != 0):
            raise _CannotVectorize("a store whose lanes may overlap")
        if isinstance(coeff, IntImm) and coeff.value == 0:
            return base
        return Ramp(base, coeff, self.lanes)

    def access(self, buffer: Buffer, indices: tuple[PrimExpr, ...], for_store: bool) -> tuple[PrimExpr, ...]:
        widened = tuple(self.index(index, for_store) for index in indices)
        if sum(1 for index in widened if index.dtype.lanes > 1) > 1:
            raise _CannotVectorize("an access moving in more than one dimension")
        if for_store and all(index.dtype.lanes == 1 for index in widened):
            raise _CannotVectorize("a store to a location that does not move with the loop variable")
        self.accesses.setdefault(buffer, []).append(widened)
        if for_store:
            self.written.add(buffer)
        return widened

    # ------------------------------------------------------------ expressions

    def expr(self, expr: PrimExpr) -> PrimExpr:
        if expr is self.var:
            return Ramp(self.start, IntImm(1, self.var.dtype), self.lanes)
        if isinstance(expr, (IntImm, FloatImm, StringImm, Var)):
            return expr
        if expr.dtype.lanes != 1:
            raise _CannotVectorize("a vector expression in the body")
        if isinstance(expr, BufferLoad):
            return expr.replace(indices=self.access(expr.buffer, expr.indices, for_store=False))
        if isinstance(expr, BinaryOp):
            a, b = self.expr(expr.a), self.expr(expr.b)
            lanes = max(a.dtype.lanes, b.dtype.lanes)
            if a is expr.a and b is expr.b:
                return expr
            return type(expr)(_broadcast(a, lanes), _broadcast(b, lanes))
        if isinstance(expr, Not):
            return expr.replace(a=self.expr(expr.a))
        if isinstance(expr, Select):
            parts = [self.expr(expr.condition), self.expr(expr.true_value), self.expr(expr.false_value)]
            lanes = max(part.dtype.lanes for part in parts)
            return Select(*(_broadcast(part, lanes) for part in parts))
        if isinstance(expr, Cast):
            value = self.expr(expr.value)
            return expr if value is expr.value else Cast(expr.dtype.with_lanes(value.dtype.lanes), value)
        if isinstance(expr, Call):
            return self.call(expr)
        raise _CannotVectorize(f"a {type(expr).__name__} expression")

    def call(self, call: Call) -> PrimExpr:
        if call.op == "if_then_else":
            condition = call.args[0]
            if _uses(condition, self.var):
                # Lanes could disagree, and a vector if_then_else evaluates both sides.
                raise _CannotVectorize("an if_then_else whose condition depends on the loop variable")
            condition = self.expr(condition)
            branches = [self.expr(arg) for arg in call.args[1:]]
            lanes = max(branch.dtype.lanes for branch in branches)
            if lanes == 1:
                return call.replace(args=(condition, *branches))
            return Call(call.dtype.with_lanes(lanes), call.op, (condition, *(_broadcast(b, lanes) for b in branches)))
        if call.op not in _ELEMENTWISE_CALLS:
            raise _CannotVectorize(f"a call of {call.op}")
        args = [self.expr(arg) for arg in call.args]
        lanes = max(arg.dtype.lanes for arg in args)
        if lanes == 1:
            return call.replace(args=tuple(args))
        return Call(call.dtype.with_lanes(lanes), call.op, tuple(_broadcast(arg, lanes) for arg in args))

    # ------------------------------------------------------------ statements

    def stmt(self, stmt: Stmt) -> Stmt:
        if isinstance(stmt, BufferStore):
            indices = self.access(stmt.buffer, stmt.indices, for_store=True)
            value = _broadcast(self.expr(stmt.value), self.lanes)
            return BufferStore(stmt.buffer, value, indices, span=stmt.span)
        if isinstance(stmt, SeqStmt):
            return SeqStmt(tuple(self.stmt(item) for item in stmt.stmts))
        if isinstance(stmt, IfThenElse):
            if _uses(stmt.condition, self.var):
                raise _CannotVectorize("an if whose condition depends on the loop variable")
            condition = self.expr(stmt.condition)
            else_case = None if stmt.else_case is None else self.stmt(stmt.else_case)
            return IfThenElse(condition, self.stmt(stmt.then_case), else_case, span=stmt.span)
        if isinstance(stmt, Evaluate) and isinstance(stmt.value, (IntImm, FloatImm)):
            return stmt
        raise _CannotVectorize(f"a {type(stmt).__name__} statement")

    def check_lanes_independent(self) -> None:
        """Every buffer the loop writes is accessed at one index only: lane k touches its own element."""
        for buffer in self.written:
            first, *others = self.accesses[buffer]
            for other in others:
                if not all(structural_equal(a, b) for a, b in zip(first, other)):
                    raise _CannotVectorize(f"buffer {buffer.name} is written and accessed at another index")


def vectorize_loop(loop: For) -> Stmt:
    """One vectorized loop as vector statements, or as a serial loop when that is not possible."""
    serial = loop.replace(kind=ForKind.SERIAL)
    extent = loop.extent
    if not isinstance(extent, IntImm) or extent.value > MAX_LANES:
        return serial
    if extent.value <= 1:
        return serial
    vectorizer = _Vectorizer(loop.loop_var, loop.min, extent.value)
    try:
        body = vectorizer.stmt(loop.body)
        vectorizer.check_lanes_independent()
    except _CannotVectorize:
        return serial
    return body


class _VectorizeLoops(IRMutator):
    def visit_For(self, loop: For) -> Stmt:
        loop = self.generic_visit(loop)
        if loop.kind is not ForKind.VECTORIZED:
            return loop
        return vectorize_loop(loop)


def vectorize_loops(func: PrimFunc, target: Target | None = None) -> PrimFunc:
    """Turn every ``vectorized`` loop into vector statements where exact (module docstring)."""
    del target  # correctness never depends on the target; no width hint is needed yet
    return func.replace(body=_VectorizeLoops().visit(func.body))
