"""``insert_syncthreads``: block-wide barriers around shared-memory hazards in CUDA kernels.

Threads of a block share ``shared`` buffers; a thread may read what another wrote only after
a ``__syncthreads()`` separates the two, and may overwrite what others still read only after
one too. The pass walks each kernel (``attrs["kernel"]``) in program order, keeping the
shared buffers written and read since the last barrier, and inserts
``T.cuda_syncthreads("handle")`` before a statement that

- reads a buffer written since the last barrier (read after write), or
- writes a buffer read since the last barrier (write after read).

A serial loop is walked twice, the second time entering with what its body leaves pending,
so a hazard between the end of one iteration and the start of the next gets a barrier at the
top of the body: the classic k-loop gets both of its barriers::

    for k in range(K // 32):
        T.cuda_syncthreads("handle")      # the last iteration's readers are done
        A_shared[...] = A[...]            # cooperative copy
        T.cuda_syncthreads("handle")      # the copy is complete
        C_local[...] += A_shared[...] * ...

Barriers go only where every thread of the block reaches them: never into an ``if`` or into a
thread-bound loop narrower than the launch (it runs under a thread-index guard); such a
statement is treated as a whole, and the barrier goes before it. The analysis is by buffer,
not by element: it may add a barrier that a finer analysis would prove unneeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tir.ir import (
    Allocate,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    For,
    ForKind,
    IntImm,
    IRVisitor,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)
from tir.ir.dtype import as_dtype
from tir.ir.ops import is_tile_op
from tir.transform._common import make_seq

__all__ = ["SYNC_OP", "insert_syncthreads", "syncthreads"]

SYNC_OP = "cuda_syncthreads"
_SHARED = ("shared", "shared.dyn")

#: Tile ops and the argument positions they write (others are read).
_TILE_WRITES = {"wmma_store_matrix_sync": (0,), "ptx_mma_store": (0,)}


def syncthreads() -> Stmt:
    """The barrier statement ``T.cuda_syncthreads("handle")``."""
    return Evaluate(Call(as_dtype("handle"), SYNC_OP, ()))


def _is_sync(stmt: Stmt) -> bool:
    return isinstance(stmt, Evaluate) and isinstance(stmt.value, Call) and stmt.value.op == SYNC_OP


class _SharedAccesses(IRVisitor):
    """Names of the shared buffers a statement reads and writes (by object)."""

    def __init__(self) -> None:
        self.reads: set[int] = set()
        self.writes: set[int] = set()

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        if node.buffer.scope in _SHARED:
            self.reads.add(id(node.buffer))
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        if node.buffer.scope in _SHARED:
            self.writes.add(id(node.buffer))
        self.generic_visit(node)

    def visit_Call(self, node: Call) -> None:
        if is_tile_op(node.op):
            for position in _TILE_WRITES.get(node.op, ()):
                ref = node.args[position]
                if isinstance(ref, BufferLoad) and ref.buffer.scope in _SHARED:
                    self.writes.add(id(ref.buffer))
        self.generic_visit(node)


@dataclass
class _Pending:
    writes: set[int] = field(default_factory=set)
    reads: set[int] = field(default_factory=set)

    def copy(self) -> _Pending:
        return _Pending(set(self.writes), set(self.reads))

    def union(self, other: _Pending) -> _Pending:
        return _Pending(self.writes | other.writes, self.reads | other.reads)


class _Inserter:
    def __init__(self, launch: dict[str, int | None]) -> None:
        self.launch = launch

    def leaf(self, stmt: Stmt, state: _Pending) -> tuple[Stmt, _Pending]:
        accesses = _SharedAccesses()
        accesses.visit(stmt)
        hazard = self.hazard(stmt, state)
        if hazard:
            state = _Pending()
        state = _Pending(state.writes | accesses.writes, state.reads | accesses.reads)
        return (make_seq([syncthreads(), stmt]) if hazard else stmt), state

    def full_width(self, loop: For) -> bool:
        launch = self.launch.get(loop.thread_tag or "")
        return isinstance(loop.extent, IntImm) and launch is not None and loop.extent.value == launch

    def visit(self, stmt: Stmt, state: _Pending) -> tuple[Stmt, _Pending]:
        if _is_sync(stmt):
            return stmt, _Pending()
        if isinstance(stmt, SeqStmt):
            out = []
            for item in stmt.stmts:
                new, state = self.visit(item, state)
                out.append(new)
            return make_seq(out), state
        if isinstance(stmt, (Allocate, LetStmt)):
            body, state = self.visit(stmt.body, state)
            return stmt.replace(body=body), state
        if isinstance(stmt, For):
            # A loop whose accesses conflict with what is pending gets its barrier before it,
            # not inside it (once, rather than once per iteration).
            hoisted = self.hazard(stmt, state)
            if hoisted:
                state = _Pending()
            new, state = self.visit_loop(stmt, state)
            return (make_seq([syncthreads(), new]) if hoisted else new), state
        return self.leaf(stmt, state)

    def hazard(self, stmt: Stmt, state: _Pending) -> bool:
        accesses = _SharedAccesses()
        accesses.visit(stmt)
        return bool((accesses.reads & state.writes) or (accesses.writes & state.reads))

    def visit_loop(self, stmt: For, state: _Pending) -> tuple[Stmt, _Pending]:
        if stmt.kind is ForKind.THREAD_BINDING:
            if not self.full_width(stmt):
                return self.leaf(stmt, state)
            body, state = self.visit(stmt.body, state)
            return stmt.replace(body=body), state
        # Once to learn what an iteration leaves pending, then again entering with it.
        _, after_one = self.visit(stmt.body, state.copy())
        body, after = self.visit(stmt.body, state.union(after_one))
        runs = isinstance(stmt.extent, IntImm) and stmt.extent.value >= 1
        return stmt.replace(body=body), (after if runs else after.union(state))


def insert_syncthreads(func: PrimFunc) -> PrimFunc:
    """Insert barriers into a kernel (see the module docstring); other functions are unchanged."""
    if not func.attrs.get("kernel"):
        return func
    launch = {
        tag: (extent.value if isinstance(extent, IntImm) else None)
        for tag, extent in func.attrs.get("thread_extents", {}).items()
    }
    body, _ = _Inserter(launch).visit(func.body, _Pending())
    return func if body is func.body else func.replace(body=body)
