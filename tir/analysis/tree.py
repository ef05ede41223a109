"""Finding things in a PrimFunc and replacing statements in it, for schedule primitives and
lowering passes.

IR nodes are immutable, so a primitive (or pass) rebuilds the path from the statement it changes up to
the root. ``TreeIndex`` records every statement's parent once per program version, which makes
looking up a block by name, a loop by its variable, the loops above a block and the block
scope around a statement cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tir.ir import Block, BlockRealize, For, IRVisitor, Node, PrimFunc, Stmt, Var

#: The indexes of the last few programs, by identity: a schedule step indexes the program it
#: starts from several times (handles, the primitive, its checks); the program and its index are
#: immutable, so one index serves them all.
_RECENT: dict[int, TreeIndex] = {}
_RECENT_SIZE = 8


class TreeIndex(IRVisitor):
    """Parents of every statement of ``func``, blocks by name and loops by loop variable.

    ``TreeIndex(func)`` of a program indexed a moment ago returns that index (read-only)."""

    def __new__(cls, func: PrimFunc) -> TreeIndex:
        hit = _RECENT.get(id(func))
        if hit is not None and hit.func is func and type(hit) is cls:
            return hit
        return super().__new__(cls)

    def __init__(self, func: PrimFunc) -> None:
        if getattr(self, "func", None) is func:
            return  # a remembered index (see __new__)
        self.func = func
        self.parent: dict[int, Stmt | None] = {}
        self.blocks: dict[str, BlockRealize] = {}
        self.loops: dict[int, For] = {}
        self._stack: list[Stmt] = []
        self.parent[id(func.body)] = None
        self.visit(func.body)
        if len(_RECENT) >= _RECENT_SIZE:
            _RECENT.pop(next(iter(_RECENT)), None)
        _RECENT[id(func)] = self

    def visit(self, node: Any) -> None:
        assert isinstance(node, Stmt)
        if self._stack:
            self.parent[id(node)] = self._stack[-1]
        if isinstance(node, BlockRealize):
            self.blocks.setdefault(node.block.name, node)
        elif isinstance(node, For):
            self.loops[id(node.loop_var)] = node
        self._stack.append(node)
        self.generic_visit(node)
        self._stack.pop()

    # Statements only: expressions hold no statements, so the walk skips them.
    def generic_visit(self, node: Node) -> None:
        for name in type(node).child_fields():
            value = getattr(node, name)
            if isinstance(value, Stmt):
                self.visit(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], Stmt):
                for item in value:
                    self.visit(item)

    # ---------------------------------------------------------------- queries

    def parent_of(self, stmt: Stmt) -> Stmt | None:
        return self.parent.get(id(stmt))

    def ancestors(self, stmt: Stmt) -> Iterator[Stmt]:
        """Parents of ``stmt``, innermost first."""
        node = self.parent.get(id(stmt))
        while node is not None:
            yield node
            node = self.parent.get(id(node))

    def loops_above(self, stmt: Stmt) -> list[For]:
        """The loops between ``stmt`` and its enclosing block, outermost first."""
        loops: list[For] = []
        for node in self.ancestors(stmt):
            if isinstance(node, Block):
                break
            if isinstance(node, For):
                loops.append(node)
        return loops[::-1]

    def scope_block(self, stmt: Stmt) -> BlockRealize | None:
        """The realize of the block whose body contains ``stmt`` (None for the root)."""
        for node in self.ancestors(stmt):
            if isinstance(node, Block):
                parent = self.parent.get(id(node))
                assert isinstance(parent, BlockRealize)
                return parent
        return None

    def child_blocks(self, stmt: Stmt) -> list[BlockRealize]:
        """Block realizes under ``stmt`` that are not inside another block, in program order."""
        found: list[BlockRealize] = []

        def walk(node: Stmt) -> None:
            if isinstance(node, BlockRealize):
                found.append(node)
                return
            for child in child_stmts(node):
                walk(child)

        body = stmt.block.body if isinstance(stmt, BlockRealize) else stmt
        if isinstance(stmt, BlockRealize) and stmt.block.init is not None:
            walk(stmt.block.init)
        walk(body)
        return found

    def is_ancestor(self, ancestor: Stmt, stmt: Stmt) -> bool:
        return any(node is ancestor for node in self.ancestors(stmt))


def child_stmts(stmt: Stmt) -> list[Stmt]:
    """Direct statement children of ``stmt`` (a block realize's child is its block)."""
    children: list[Stmt] = []
    for name in type(stmt).child_fields():
        value = getattr(stmt, name)
        if isinstance(value, Stmt):
            children.append(value)
        elif isinstance(value, tuple):
            children.extend(item for item in value if isinstance(item, Stmt))
    return children


def replace_child(parent: Node, old: Stmt, new: Stmt | None) -> Node:
    """``parent`` with its child ``old`` (by identity) replaced by ``new``.

    ``new=None`` removes ``old`` from a statement sequence.
    """
    for name in type(parent).child_fields():
        value = getattr(parent, name)
        if value is old:
            if new is None:
                raise ValueError(f"cannot remove the only {name} of {type(parent).__name__}")
            return parent.replace(**{name: new})
        if isinstance(value, tuple) and any(item is old for item in value):
            from tir.ir import SeqStmt

            if isinstance(parent, SeqStmt) and isinstance(new, SeqStmt):
                # A sequence in a sequence is spliced: the printer and parser know only flat ones.
                spliced = tuple(piece for item in value for piece in (new.stmts if item is old else (item,)))
                return parent.replace(**{name: spliced})
            items = tuple(new if item is old else item for item in value)
            if new is None:
                items = tuple(item for item in items if item is not None)
            return parent.replace(**{name: items})
    raise ValueError(f"{type(old).__name__} is not a child of {type(parent).__name__}")


def replace_stmt(index: TreeIndex, old: Stmt, new: Stmt | None) -> PrimFunc:
    """The function of ``index`` with ``old`` replaced by ``new`` (rebuilding its ancestors).

    A sequence left with one statement collapses to it; ``new=None`` deletes ``old``.
    """
    from tir.ir import SeqStmt

    current_old: Stmt = old
    current_new: Stmt | None = new
    for parent in index.ancestors(old):
        rebuilt = replace_child(parent, current_old, current_new)
        if isinstance(rebuilt, SeqStmt) and len(rebuilt.stmts) == 1:
            rebuilt = rebuilt.stmts[0]
        current_old, current_new = parent, rebuilt  # type: ignore[assignment]
        if current_new is None:
            raise ValueError("cannot delete a statement that is the whole body of its parent")
    if current_new is None:
        raise ValueError("cannot delete the function body")
    return index.func.replace(body=current_new)


def find_loop_var(index: TreeIndex, var: Var) -> For | None:
    return index.loops.get(id(var))
