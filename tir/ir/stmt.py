"""Statements: stores, loops, sequences, conditionals, blocks."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from tir.ir.buffer import Buffer, BufferRegion, IterVar, MatchBufferRegion
from tir.ir.expr import PrimExpr, Var, const
from tir.ir.node import Node


class Stmt(Node):
    """Base of all statements."""

    def __str__(self) -> str:
        from tir.script.printer import stmt_to_str

        return stmt_to_str(self)


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    THREAD_BINDING = "thread_binding"


#: Thread tags a loop may be bound to.
THREAD_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread.x",
    "vthread.y",
    "vthread.z",
)


@dataclass(frozen=True, eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``. A ``Ramp`` index makes a vector store."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.indices, tuple):
            object.__setattr__(self, "indices", tuple(self.indices))

    def __repr__(self) -> str:
        return f"BufferStore({self.buffer.name}, {self.value!r}, {list(self.indices)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    """``for loop_var in [min, min + extent)`` of a kind; thread-bound loops carry a tag."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_tag: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.kind is ForKind.THREAD_BINDING) != (self.thread_tag is not None):
            raise ValueError("a For loop has a thread_tag exactly when its kind is THREAD_BINDING")

    def __repr__(self) -> str:
        return f"For({self.loop_var.name}, {self.min!r}, {self.extent!r}, {self.kind.name})"


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    """Statements run in order."""

    stmts: tuple[Stmt, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.stmts, tuple):
            object.__setattr__(self, "stmts", tuple(self.stmts))

    def __repr__(self) -> str:
        return f"SeqStmt({len(self.stmts)} stmts)"


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None

    def __repr__(self) -> str:
        return f"IfThenElse({self.condition!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (a call)."""

    value: PrimExpr

    def __repr__(self) -> str:
        return f"Evaluate({self.value!r})"


@dataclass(frozen=True, eq=False, repr=False)
class LetStmt(Stmt):
    """``body`` with ``var`` bound to ``value``."""

    var: Var
    value: PrimExpr
    body: Stmt

    def __repr__(self) -> str:
        return f"LetStmt({self.var.name})"


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """Post-lowering: storage for ``buffer`` lives for ``body``.

    ``storage`` is where it lives: ``"stack"`` (small, fixed size) or ``"heap"`` (large or
    symbolic size); the allocation-planning pass decides. ``data``, when given, is the
    buffer's constant contents in row-major order (``T.allocate_const``): nothing writes such a
    buffer, no pass moves or shrinks it, and a backend places it in read-only memory.
    """

    buffer: Buffer
    body: Stmt
    storage: str = "stack"
    data: tuple[int | float, ...] | None = None

    def __post_init__(self) -> None:
        if self.storage not in ("stack", "heap"):
            raise ValueError(f"Allocate storage must be 'stack' or 'heap', got {self.storage!r}")

    def __repr__(self) -> str:
        return f"Allocate({self.buffer.name}, {self.storage})"


@dataclass(frozen=True, eq=False, repr=False)
class Block(Stmt):
    """A block: a signature (iterators, read and write regions) and a body.

    ``init`` runs on the first iteration of the reduction iterators, before ``body``.
    ``alloc_buffers`` live for the block; ``match_buffers`` are views of outer regions.
    """

    name: str
    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    match_buffers: tuple[MatchBufferRegion, ...] = ()
    annotations: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("iter_vars", "reads", "writes", "alloc_buffers", "match_buffers"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    def __repr__(self) -> str:
        return f"Block({self.name!r})"


@dataclass(frozen=True, eq=False, repr=False)
class BlockRealize(Stmt):
    """A block instance: iterator bindings (one per iter var) and a predicate."""

    iter_values: tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block

    def __post_init__(self) -> None:
        if not isinstance(self.iter_values, tuple):
            object.__setattr__(self, "iter_values", tuple(self.iter_values))
        if len(self.iter_values) != len(self.block.iter_vars):
            raise ValueError(
                f"block {self.block.name!r} has {len(self.block.iter_vars)} iterators "
                f"but {len(self.iter_values)} bindings"
            )

    def __repr__(self) -> str:
        return f"BlockRealize({self.block.name!r})"


def seq(*stmts: Stmt) -> Stmt:
    """A sequence, flattened; a single statement stands for itself."""
    flat: list[Stmt] = []
    for stmt in stmts:
        if isinstance(stmt, SeqStmt):
            flat.extend(stmt.stmts)
        else:
            flat.append(stmt)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def true() -> PrimExpr:
    return const(True)
