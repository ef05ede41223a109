"""Helpers the lowering passes share: applying a function pass to a module, buffer queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tir.ir import (
    Allocate,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    DataType,
    Evaluate,
    For,
    IntImm,
    IRModule,
    IRMutator,
    IRVisitor,
    Let,
    LetStmt,
    Node,
    PrimExpr,
    PrimFunc,
    Ramp,
    Stmt,
    Var,
    free_vars,
)
from tir.ir.stmt import SeqStmt

FuncPass = Callable[[PrimFunc], PrimFunc]


def as_module(func_or_mod: PrimFunc | IRModule) -> IRModule:
    """``func_or_mod`` as an IRModule (a PrimFunc becomes a module of one function)."""
    if isinstance(func_or_mod, IRModule):
        return func_or_mod
    if isinstance(func_or_mod, PrimFunc):
        return IRModule({func_or_mod.name: func_or_mod})
    raise TypeError(f"expected a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")


def apply_to_module(pass_fn: FuncPass, mod: IRModule, **kwargs: Any) -> IRModule:
    """Run a function pass on every function of ``mod``; the same module when nothing changes."""
    functions = {name: pass_fn(func, **kwargs) for name, func in mod.functions.items()}
    if all(functions[name] is mod.functions[name] for name in functions):
        return mod
    return mod.replace(functions=functions)


def cast_to(expr: PrimExpr, dtype: DataType) -> PrimExpr:
    """``expr`` as an integer expression of scalar ``dtype`` (constants re-typed, others cast)."""
    if expr.dtype.element == dtype:
        return expr
    if isinstance(expr, IntImm):
        return IntImm(expr.value, dtype)
    if isinstance(expr, Ramp):
        return Ramp(cast_to(expr.base, dtype), cast_to(expr.stride, dtype), expr.lanes)
    if isinstance(expr, Broadcast):
        return Broadcast(cast_to(expr.value, dtype), expr.lanes)
    return Cast(dtype.with_lanes(expr.dtype.lanes), expr)


def widest_int(exprs: list[PrimExpr]) -> DataType:
    """The widest scalar integer dtype among ``exprs`` (int32 when there are none)."""
    return max((e.dtype.element for e in exprs), key=lambda d: d.bits, default=DataType.parse("int32"))


def no_op() -> Stmt:
    """The statement that does nothing."""
    return Evaluate(IntImm(0))


def is_no_op(stmt: Stmt) -> bool:
    return isinstance(stmt, Evaluate) and isinstance(stmt.value, IntImm)


def make_seq(stmts: list[Stmt]) -> Stmt:
    """A sequence without nested sequences or no-ops; one statement stands for itself."""
    flat: list[Stmt] = []
    for stmt in stmts:
        items = stmt.stmts if isinstance(stmt, SeqStmt) else (stmt,)
        flat.extend(item for item in items if not is_no_op(item))
    if not flat:
        return no_op()
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


class _BufferUse(IRVisitor):
    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.found = False

    def visit(self, node: Any) -> None:
        if not self.found:
            super().visit(node)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        if node.buffer is self.buffer:
            self.found = True
        else:
            self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        if node.buffer is self.buffer:
            self.found = True
        else:
            self.generic_visit(node)

    def visit_Allocate(self, node: Allocate) -> None:
        self.visit(node.body)

    def visit_Buffer(self, node: Buffer) -> None:
        pass


def uses_buffer(node: Node, buffer: Buffer) -> bool:
    """Whether ``node`` loads from or stores to ``buffer``."""
    visitor = _BufferUse(buffer)
    visitor.visit(node)
    return visitor.found


class LoweringError(ValueError):
    """A program a lowering pass cannot lower; the message names the pass and the construct."""


def uses_var(node: Node, var: Var) -> bool:
    """Whether ``node`` uses ``var``."""
    return var in free_vars(node)


class FreshDefinitions(IRMutator):
    """A copy of a statement whose loop variables, let variables and allocations are new objects.

    Copies of a body (an unrolled loop's, a partitioned loop's) then define each variable and
    buffer once, as every other statement of a lowered program does.
    """

    def __init__(self) -> None:
        self.vars: dict[Var, Var] = {}
        self.buffers: dict[Buffer, Buffer] = {}

    def visit_Var(self, var: Var) -> Var:
        return self.vars.get(var, var)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.buffers.get(buffer, buffer)

    def fresh_var(self, var: Var) -> Var:
        new = Var(var.name, var.dtype, span=var.span)
        self.vars[var] = new
        return new

    def visit_For(self, loop: For) -> Stmt:
        start, extent = self.visit(loop.min), self.visit(loop.extent)
        return loop.replace(
            loop_var=self.fresh_var(loop.loop_var), min=start, extent=extent, body=self.visit(loop.body)
        )

    def visit_LetStmt(self, stmt: LetStmt) -> Stmt:
        value = self.visit(stmt.value)
        return stmt.replace(var=self.fresh_var(stmt.var), value=value, body=self.visit(stmt.body))

    def visit_Let(self, expr: Let) -> PrimExpr:
        value = self.visit(expr.value)
        return expr.replace(var=self.fresh_var(expr.var), value=value, body=self.visit(expr.body))

    def visit_Allocate(self, stmt: Allocate) -> Stmt:
        buffer = stmt.buffer
        shape = tuple(self.visit(extent) for extent in buffer.shape)
        new = Buffer(
            buffer.name,
            shape,
            buffer.dtype,
            buffer.scope,
            tuple(self.visit(s) for s in buffer.strides),
            None if buffer.elem_offset is None else self.visit(buffer.elem_offset),
            buffer.align,
            buffer.offset_factor,
            span=buffer.span,
        )
        self.buffers[buffer] = new
        return stmt.replace(buffer=new, body=self.visit(stmt.body))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        return load.replace(buffer=self.visit_Buffer(load.buffer), indices=self.visit(load.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        return store.replace(
            buffer=self.visit_Buffer(store.buffer), value=self.visit(store.value), indices=self.visit(store.indices)
        )
