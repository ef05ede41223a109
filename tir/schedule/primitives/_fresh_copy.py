"""``Instantiator``: a fresh copy of a statement, with new loop variables, iterators, let
variables and allocated buffers. ``tensorize`` copies an intrinsic's implementation body, its
buffer parameters replaced by views of the block's regions; ``merge`` and ``partition`` copy
loop nests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    For,
    IRMutator,
    IterVar,
    Let,
    LetStmt,
    MatchBufferRegion,
    PrimExpr,
    Stmt,
    Var,
    substitute,
)


class Instantiator(IRMutator):
    """A fresh copy of an implementation body: loop variables, iterators, let variables and
    allocated buffers are new objects; ``buffer_map`` replaces the parameters; nested block
    names go through ``rename``."""

    def __init__(self, buffer_map: dict[int, Buffer], rename: Callable[[str], str]) -> None:
        self.buffers = dict(buffer_map)
        self.vars: dict[Var, PrimExpr] = {}
        self.rename = rename

    def fresh_var(self, var: Var) -> Var:
        new = Var(var.name, var.dtype)
        self.vars[var] = new
        return new

    def fresh_buffer(self, buffer: Buffer) -> Buffer:
        for expr in (*buffer.shape, *buffer.strides, buffer.elem_offset):
            if isinstance(expr, Var) and expr not in self.vars:
                self.fresh_var(expr)
        new = Buffer(
            buffer.name,
            tuple(substitute(s, self.vars) for s in buffer.shape),
            buffer.dtype,
            buffer.scope,
            tuple(substitute(s, self.vars) for s in buffer.strides),
            None if buffer.elem_offset is None else substitute(buffer.elem_offset, self.vars),
            buffer.align,
            buffer.offset_factor,
            axis_separators=buffer.axis_separators,
        )
        self.buffers[id(buffer)] = new
        return new

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.vars.get(var, var)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.buffers.get(id(buffer), buffer)

    def visit_For(self, loop: For) -> Stmt:
        new_var = self.fresh_var(loop.loop_var)
        return For(
            new_var,
            self.visit(loop.min),
            self.visit(loop.extent),
            loop.kind,
            self.visit(loop.body),
            loop.thread_tag,
            dict(loop.annotations),
            span=loop.span,
        )

    def visit_IterVar(self, iv: IterVar) -> IterVar:
        return IterVar(self.fresh_var(iv.var), self.visit(iv.dom), iv.kind, span=iv.span)

    def visit_LetStmt(self, stmt: LetStmt) -> Stmt:
        value = self.visit(stmt.value)
        return LetStmt(self.fresh_var(stmt.var), value, self.visit(stmt.body), span=stmt.span)

    def visit_Let(self, expr: Let) -> PrimExpr:
        value = self.visit(expr.value)
        return Let(self.fresh_var(expr.var), value, self.visit(expr.body), span=expr.span)

    def visit_Block(self, block: Block) -> Stmt:
        allocs = tuple(self.fresh_buffer(b) for b in block.alloc_buffers)
        iter_vars = tuple(self.visit_IterVar(iv) for iv in block.iter_vars)
        matches = tuple(
            MatchBufferRegion(self.fresh_buffer(m.buffer), self.visit(m.source), span=m.span)
            for m in block.match_buffers
        )
        return block.replace(
            name=self.rename(block.name),
            iter_vars=iter_vars,
            reads=self.visit(block.reads),
            writes=self.visit(block.writes),
            body=self.visit(block.body),
            init=None if block.init is None else self.visit(block.init),
            alloc_buffers=allocs,
            match_buffers=matches,
        )

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        values = tuple(self.visit(v) for v in realize.iter_values)
        predicate = self.visit(realize.predicate)
        block = self.visit(realize.block)
        return BlockRealize(values, predicate, block, span=realize.span)

    def visit_Allocate(self, stmt: Any) -> Stmt:
        new = self.fresh_buffer(stmt.buffer)
        return stmt.replace(buffer=new, body=self.visit(stmt.body))
