"""Helpers shared by the primitive modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tir.analysis.tree import TreeIndex
from tir.arith import simplify
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    For,
    IRMutator,
    IRVisitor,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    substitute,
)
from tir.schedule.errors import ScheduleError


class _SubstituteAndSimplify(IRMutator):
    """Substitute variables, then simplify block bindings, predicates and loop bounds."""

    def __init__(self, vmap: Mapping[Var, PrimExpr], dom_map: dict[Var, Range]) -> None:
        self.vmap = vmap
        self.dom_map = dom_map

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.vmap.get(var, var)

    def visit_For(self, loop: For) -> Stmt:
        self.dom_map[loop.loop_var] = Range(loop.min, loop.extent)
        try:
            new = self.generic_visit(loop)
        finally:
            del self.dom_map[loop.loop_var]
        assert isinstance(new, For)
        return new.replace(min=simplify(new.min, self.dom_map), extent=simplify(new.extent, self.dom_map))

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        values = tuple(simplify(substitute(v, dict(self.vmap)), self.dom_map) for v in realize.iter_values)
        predicate = simplify(substitute(realize.predicate, dict(self.vmap)), self.dom_map)
        # The block body refers to its own iterators, not to outer loop variables (unless the
        # program is unusual); substitute there too, without simplifying.
        block = substitute(realize.block, dict(self.vmap))
        return realize.replace(iter_values=_same_tuple(values, realize.iter_values), predicate=predicate, block=block)


def _same_tuple(new: tuple, old: tuple) -> tuple:
    return old if all(a is b for a, b in zip(new, old)) else new


def substitute_and_simplify(stmt: Stmt, vmap: Mapping[Var, PrimExpr], dom_map: dict[Var, Range]) -> Stmt:
    """``stmt`` with ``vmap`` applied; bindings, predicates and loop bounds simplified under
    ``dom_map`` (the ranges of the loops around ``stmt``, extended with inner loops as it goes)."""
    return _SubstituteAndSimplify(vmap, dict(dom_map)).visit(stmt)


def loop_dom_map(index: TreeIndex, stmt: Stmt) -> dict[Var, Range]:
    """Ranges of every loop enclosing ``stmt`` (across block boundaries)."""
    dom: dict[Var, Range] = {}
    for node in index.ancestors(stmt):
        if isinstance(node, For):
            dom[node.loop_var] = Range(node.min, node.extent)
    return dom


def const_extent(loop: For, primitive: str) -> int:
    from tir.ir import IntImm

    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        raise ScheduleError(
            primitive, f"loop {loop.loop_var.name}", "the loop needs a constant min and extent here", loop
        )
    return loop.extent.value


def loop_target(loop: For) -> str:
    return f"loop {loop.loop_var.name}"


def block_target(realize: BlockRealize) -> str:
    return f"block {realize.block.name!r}"


F = TypeVar("F", bound=Callable[..., Any])


def doc_from(pure_function: Callable[..., Any]) -> Callable[[F], F]:
    """Give a Schedule method the docstring (before/after example) of its pure function."""

    def decorate(method: F) -> F:
        method.__doc__ = pure_function.__doc__
        return method

    return decorate


# ---------------------------------------------------------------- blocks, names and scopes


def find_block(index: TreeIndex, name: str, primitive: str) -> BlockRealize:
    realize = index.blocks.get(name)
    if realize is None:
        raise ScheduleError(primitive, f"block {name!r}", "no such block")
    return realize


def buffer_names(func: PrimFunc) -> set[str]:
    """Names of every buffer of ``func``: parameters, allocations, match_buffer views."""
    names = {param.name for param in func.params if isinstance(param, Buffer)}

    class Collect(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            names.update(buffer.name for buffer in block.alloc_buffers)
            names.update(match.buffer.name for match in block.match_buffers)
            self.generic_visit(block)

    Collect().visit(func.body)
    return names


def unique_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first not in ``taken``."""
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


def body_stmts(block: Block) -> list[Stmt]:
    return list(block.body.stmts) if isinstance(block.body, SeqStmt) else [block.body]


def top_position(index: TreeIndex, scope: BlockRealize, stmt: Stmt) -> int | None:
    """Which top-level statement of ``scope``'s body holds ``stmt`` (None: it is in the init)."""
    chain = [stmt, *index.ancestors(stmt)]
    at = next(k for k, node in enumerate(chain) if node is scope.block)
    below = chain[at - 1]
    if below is not scope.block.body:
        return None
    body = scope.block.body
    if not isinstance(body, SeqStmt):
        return 0
    top = chain[at - 2]
    return next(k for k, item in enumerate(body.stmts) if item is top)
