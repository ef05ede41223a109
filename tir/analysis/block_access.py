"""Read and write regions of a block, inferred from its body.

``infer_block_access(block)`` returns ``(reads, writes)``: one ``BufferRegion`` per buffer, in
the order the buffers are first accessed, each the hull of every access to that buffer.

- A ``BufferLoad`` reads, a ``BufferStore`` writes (``C[i] += x`` reads ``C[i]`` as well,
  through the load in the stored value). The ``init`` statement counts like the body.
- Variables of loops inside the block are relaxed over their ranges; ``LetStmt`` / ``Let``
  variables are substituted; the block's own iterators and outer variables stay symbolic.
- A nested block contributes its declared signature, not its body: its iterators are
  replaced by their bindings, then the loops between the two blocks are relaxed.
- Buffers the block allocates are local and left out; an access to a ``match_buffer`` view
  counts as an access to the whole region it views.
"""

from __future__ import annotations

from tir.arith.int_set import relax_range, relax_region, union_regions
from tir.ir.buffer import Buffer, BufferRegion, Range
from tir.ir.expr import BufferLoad, Let, PrimExpr, Var
from tir.ir.functor import substitute
from tir.ir.node import Node
from tir.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

__all__ = ["infer_block_access"]


class _AccessCollector:
    """Walks one block's init and body, gathering relaxed access regions per buffer."""

    def __init__(self, block: Block) -> None:
        self.local_buffers: set[Buffer] = set(block.alloc_buffers)
        self.views: dict[Buffer, BufferRegion] = {match.buffer: match.source for match in block.match_buffers}
        self.loop_doms: dict[Var, Range] = {}
        self.let_values: dict[Var, PrimExpr] = {}
        # Buffer -> regions seen so far; dicts keep the first-seen order.
        self.reads: dict[Buffer, list[tuple[Range, ...]]] = {}
        self.writes: dict[Buffer, list[tuple[Range, ...]]] = {}

    # ------------------------------------------------------------ recording

    def _resolve_view(self, buffer: Buffer) -> BufferRegion | None:
        """The source region when ``buffer`` is a match_buffer view of this block."""
        seen: set[Buffer] = set()
        source = self.views.get(buffer)
        while source is not None and source.buffer in self.views and source.buffer not in seen:
            seen.add(source.buffer)
            source = self.views[source.buffer]
        return source

    def _record(self, table: dict[Buffer, list[tuple[Range, ...]]], buffer: Buffer, region: tuple[Range, ...]) -> None:
        source = self._resolve_view(buffer)
        if source is not None:
            buffer, region = source.buffer, source.region
        if buffer in self.local_buffers:
            return
        table.setdefault(buffer, []).append(region)

    def _access(
        self, table: dict[Buffer, list[tuple[Range, ...]]], buffer: Buffer, indices: tuple[PrimExpr, ...]
    ) -> None:
        if buffer in self.local_buffers:
            return
        if buffer in self.views:
            self._record(table, buffer, ())
            return
        region = relax_region([self._subst(index) for index in indices], self.loop_doms, buffer.shape)
        self._record(table, buffer, region)

    def _signature_region(
        self, table: dict[Buffer, list[tuple[Range, ...]]], region: BufferRegion, bindings: dict[Var, PrimExpr]
    ) -> None:
        buffer = region.buffer
        if buffer in self.local_buffers:
            return
        if buffer in self.views:
            self._record(table, buffer, ())
            return
        relaxed = []
        for dim, dom in enumerate(region.region):
            bound_dom = Range(self._subst(substitute(dom.min, bindings)), self._subst(substitute(dom.extent, bindings)))
            relaxed.append(relax_range(bound_dom, self.loop_doms, buffer.shape[dim]))
        self._record(table, buffer, tuple(relaxed))

    def _subst(self, expr: PrimExpr) -> PrimExpr:
        return substitute(expr, self.let_values) if self.let_values else expr

    # ------------------------------------------------------------ statements

    def visit_stmt(self, stmt: Stmt | None) -> None:
        if stmt is None:
            return
        if isinstance(stmt, SeqStmt):
            for item in stmt.stmts:
                self.visit_stmt(item)
        elif isinstance(stmt, BufferStore):
            self.visit_expr(stmt.value)
            for index in stmt.indices:
                self.visit_expr(index)
            self._access(self.writes, stmt.buffer, stmt.indices)
        elif isinstance(stmt, For):
            self.visit_expr(stmt.min)
            self.visit_expr(stmt.extent)
            saved = self.loop_doms.get(stmt.loop_var)
            self.loop_doms[stmt.loop_var] = Range(self._subst(stmt.min), self._subst(stmt.extent))
            self.visit_stmt(stmt.body)
            if saved is None:
                del self.loop_doms[stmt.loop_var]
            else:
                self.loop_doms[stmt.loop_var] = saved
        elif isinstance(stmt, LetStmt):
            self.visit_expr(stmt.value)
            self.let_values[stmt.var] = self._subst(stmt.value)
            self.visit_stmt(stmt.body)
            del self.let_values[stmt.var]
        elif isinstance(stmt, IfThenElse):
            self.visit_expr(stmt.condition)
            self.visit_stmt(stmt.then_case)
            self.visit_stmt(stmt.else_case)
        elif isinstance(stmt, Evaluate):
            self.visit_expr(stmt.value)
        elif isinstance(stmt, Allocate):
            added = stmt.buffer not in self.local_buffers
            self.local_buffers.add(stmt.buffer)
            self.visit_stmt(stmt.body)
            if added:
                self.local_buffers.discard(stmt.buffer)
        elif isinstance(stmt, BlockRealize):
            for value in stmt.iter_values:
                self.visit_expr(value)
            self.visit_expr(stmt.predicate)
            bindings = {iv.var: self._subst(value) for iv, value in zip(stmt.block.iter_vars, stmt.iter_values)}
            self._child_block(stmt.block, bindings)
        elif isinstance(stmt, Block):
            self._child_block(stmt, {})
        else:
            self._generic(stmt)

    def _child_block(self, block: Block, bindings: dict[Var, PrimExpr]) -> None:
        for region in block.reads:
            self._signature_region(self.reads, region, bindings)
        for region in block.writes:
            self._signature_region(self.writes, region, bindings)

    def _generic(self, node: Node) -> None:
        for name in type(node).child_fields():
            value = getattr(node, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, PrimExpr):
                    self.visit_expr(item)
                elif isinstance(item, Stmt):
                    self.visit_stmt(item)

    # ------------------------------------------------------------ expressions

    def visit_expr(self, expr: PrimExpr) -> None:
        if isinstance(expr, BufferLoad):
            self._access(self.reads, expr.buffer, expr.indices)
            for index in expr.indices:
                self.visit_expr(index)
            return
        if isinstance(expr, Let):
            self.visit_expr(expr.value)
            self.visit_expr(substitute(expr.body, {expr.var: expr.value}))
            return
        if isinstance(expr, Var):
            return
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            if isinstance(value, PrimExpr):
                self.visit_expr(value)
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, PrimExpr):
                        self.visit_expr(item)

    # ------------------------------------------------------------ result

    def regions(self, table: dict[Buffer, list[tuple[Range, ...]]]) -> tuple[BufferRegion, ...]:
        result = []
        for buffer, regions in table.items():
            merged = regions[0]
            for region in regions[1:]:
                hull = union_regions(merged, region, buffer.shape)
                assert isinstance(hull, tuple)
                merged = hull
            result.append(BufferRegion(buffer, merged))
        return tuple(result)


def infer_block_access(block: Block) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """``(reads, writes)`` of ``block``, inferred from its init and body (see module docstring)."""
    collector = _AccessCollector(block)
    collector.visit_stmt(block.init)
    collector.visit_stmt(block.body)
    return collector.regions(collector.reads), collector.regions(collector.writes)
