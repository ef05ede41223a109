"""Caching and storage: cache_read, cache_write, set_scope, storage_align.

``cache_read`` / ``cache_write`` put a copy of a buffer in another storage scope between a block
and the rest of the program; ``set_scope`` moves an allocated buffer to another scope in place;
``storage_align`` pads the strides of an allocated buffer. Each is a pure ``PrimFunc ->
PrimFunc`` function with its preconditions checked before anything changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer, simplify, union_regions
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    FloorMod,
    For,
    ForKind,
    IRVisitor,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    const,
    replace_buffers,
)
from tir.ir.stmt import seq
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._cache_util import (
    ReplaceRealizes,
    access_region,
    accesses,
    cache_buffer_and_block_names,
    check_scope_name,
    check_visible,
    child_position,
    clamp_region,
    copy_nest,
    direct_access,
    first_not_contained,
    loop_nest_body,
    outer_analyzer,
    redirect_blocks,
    region_buffer,
    show_range,
    union_over_loops,
    writes_outside,
)
from tir.schedule.primitives._common import (
    block_target,
    body_stmts,
    doc_from,
    find_block,
    top_position,
)
from tir.schedule.primitives.cache_write import cache_write

__all__ = ["CachePrimitives", "cache_read", "cache_write", "check_scope_name", "set_scope", "storage_align"]

# ---------------------------------------------------------------- cache_read


def cache_read(
    func: PrimFunc,
    block_name: str,
    read_buffer_index: int,
    storage_scope: str,
    consumer_names: Sequence[str] | None = None,
) -> tuple[PrimFunc, str]:
    """Read ``block.reads[read_buffer_index]`` through a copy in ``storage_scope``.

    A new buffer ``<A>_<scope>`` (the shape of ``A``) is allocated in the block scope of the
    consumers, and a new block of the same name copies into it the part of ``A`` the consumers
    read (their read regions, relaxed over the loops of that scope with each iterator kept in its
    domain, so the ``T.where`` of a split loop is honoured; kept inside the buffer; a dimension
    whose bounds read memory is copied whole). The copy goes right before
    the top-level statement of the scope that holds the first consumer, or, when that statement
    also writes the buffer (a producer that runs a tile at a time in the consumers' loop), right
    before the consumers inside the loops around both, copying per iteration what they read in
    it (as TVM places it: after the producer); the consumers (by
    default the block itself, else ``consumer_blocks``: handles or names; the pure function
    takes their names as ``consumer_names``) then read the copy. Consumers after the loops of
    that producer (TVM's default: every reader) read what the iterations copied: the copy then
    also takes what the producer wrote in the iteration. Returns the new block (a
    ``BlockRV``; the pure function returns its name). Move the copy with ``compute_at`` to make
    it tile-local.

    Preconditions: the index names a buffer the block reads; the scope is known; every consumer
    reads the buffer, none writes it, all are in the same block scope (not the root, not an
    init) where the buffer is defined, the region read is expressible there, and nothing writes
    the buffer between the copy and the last consumer (the copy would be stale). For consumers
    after the producer's loops: nothing in those loops writes the buffer after the copy, the
    loops are serial (the last copy of each element is taken after its last write), and the
    boxes copied in all iterations together cover what those consumers read (each loop
    stepping by at most what the loops inside it cover).

    Before (``cache_read(C, 0, "local")``)::

        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = A[vi, vj] * 2.0

    After::

        A_local = T.alloc_buffer((16, 16), "float32", scope="local")
        for ax0, ax1 in T.grid(16, 16):
            with T.block("A_local"):
                v0, v1 = T.remap("SS", ax0, ax1)
                A_local[v0, v1] = A[v0, v1]
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = A_local[vi, vj] * 2.0
    """
    primitive = "cache_read"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    buffer = region_buffer(primitive, realize, "reads", read_buffer_index)
    check_scope_name(primitive, target, storage_scope)
    names = [block_name] if consumer_names is None else list(dict.fromkeys(consumer_names))
    if not names:
        raise ScheduleError(primitive, target, "consumer_blocks is empty; name at least one block")
    consumers = []
    for name in names:
        consumer = find_block(index, name, primitive)
        if not any(region.buffer is buffer for region in consumer.block.reads):
            raise ScheduleError(
                primitive,
                block_target(consumer),
                f"consumer block {name!r} does not read {buffer.name}",
                consumer.block,
            )
        if accesses(consumer.block, buffer).writes:
            raise ScheduleError(
                primitive,
                block_target(consumer),
                f"consumer block {name!r} writes {buffer.name} as well; its reads cannot come from a copy",
                consumer.block,
            )
        consumers.append(consumer)
    scope = index.scope_block(consumers[0])
    if scope is None:
        raise ScheduleError(primitive, target, "the root block has no scope to put the copy in")
    for consumer in consumers[1:]:
        if index.scope_block(consumer) is not scope:
            raise ScheduleError(
                primitive,
                block_target(consumer),
                f"consumer blocks must be in one block scope; {consumer.block.name!r} is not in "
                f"{scope.block.name!r}, where {consumers[0].block.name!r} is",
            )
    positions = [top_position(index, scope, consumer) for consumer in consumers]
    for consumer, position in zip(consumers, positions):
        if position is None:
            raise ScheduleError(
                primitive, block_target(consumer), f"the consumer is inside the init of {scope.block.name!r}"
            )
    check_visible(func, index, scope, buffer, primitive, target)
    first, last = min(positions), max(positions)  # type: ignore[type-var]
    stmts = body_stmts(scope.block)
    assert first is not None and last is not None
    # The copy goes right before the statement that holds the first consumer. Where that
    # statement also writes the buffer (its producer runs in the same loop, as a tile at a
    # time), the copy goes deeper: after the producer, inside the loops around both, copying
    # per iteration what the consumers read in it. Consumers after that loop nest (at any
    # level of the descent) then read what the last iterations copied: see _cover_later.
    within: SeqStmt | None = None
    inside = consumers
    later: list[tuple[SeqStmt | None, Stmt, list[BlockRealize]]] = []
    while True:
        stale = next((stmt for stmt in stmts[first : last + 1] if accesses(stmt, buffer).writes), None)
        if stale is None:
            break
        inner = loop_nest_body(stmts[first])
        if not isinstance(inner, SeqStmt) or any(accesses(stmt, buffer).writes for stmt in stmts[first + 1 : last + 1]):
            raise ScheduleError(
                primitive,
                target,
                f"{buffer.name} is written between the place of the copy and the last consumer; "
                "the consumers would read a stale copy",
                stale,
            )
        after = [c for c, at in zip(inside, positions) if at != first]
        if after:
            later.append((within, stmts[first], after))
        inside = [c for c, at in zip(inside, positions) if at == first]
        within = inner
        stmts = list(inner.stmts)
        positions = [child_position(index, inner, consumer) for consumer in inside]
        first, last = min(positions), max(positions)  # type: ignore[type-var]

    region = access_region(index, scope, inside, buffer, primitive, within, clamp=not later)
    if later:
        assert within is not None
        region = _cover_later(index, scope, buffer, primitive, within, stmts[:first], region, later)
    cache_name, block_name_new = cache_buffer_and_block_names(func, index, buffer, storage_scope)
    cache = Buffer(cache_name, buffer.shape, buffer.dtype, storage_scope)
    replacements = {id(c): c.replace(block=replace_buffers(c.block, {buffer: cache})) for c in consumers}
    rewritten = [ReplaceRealizes(replacements).visit(stmt) for stmt in stmts[first : last + 1]]
    copy = copy_nest(block_name_new, buffer, cache, region)
    body = seq(*stmts[:first], copy, *rewritten, *stmts[last + 1 :])
    if within is not None:
        func = replace_stmt(index, within, body)
        index = TreeIndex(func)
        scope = index.blocks[scope.block.name]
        body = scope.block.body
    new_scope = scope.block.replace(body=body, alloc_buffers=(*scope.block.alloc_buffers, cache))
    func = replace_stmt(index, scope, scope.replace(block=new_scope))
    return redirect_blocks(func, [c.block.name for _, _, after in later for c in after], buffer, cache), block_name_new


def _cover_later(
    index: TreeIndex,
    scope: BlockRealize,
    buffer: Buffer,
    primitive: str,
    within: SeqStmt,
    before: Sequence[Stmt],
    region: tuple[Range, ...],
    later: Sequence[tuple[SeqStmt | None, Stmt, list[BlockRealize]]],
) -> tuple[Range, ...]:
    """The region to copy per iteration of the loops around ``within`` (where the copy goes,
    after the statements ``before``) when consumers after a loop nest around it read the copy
    too: ``region`` (what the consumers inside read) widened to what ``before`` writes.

    The consumers after the nest read, for each element, what the last iteration that copied
    it copied. That is the buffer's final value when (1) every element written in an
    iteration is copied in that iteration, after the write (``before`` is all that writes
    the buffer in the nest, and the copy covers what it writes); (2) the iterations run in
    order (serial loops); and (3) the copies of all iterations together cover what the
    later consumers read: per dimension, each loop steps by at most what the loops inside it
    cover, so the union of the copied boxes is one box. Anything else is refused.
    """
    writers: list[BlockRealize] = []
    for stmt in before:
        if direct_access(stmt, buffer):
            raise ScheduleError(
                primitive, block_target(scope), f"{buffer.name} is accessed outside a block before the copy", stmt
            )
        writers += [r for r in index.child_blocks(stmt) if any(w.buffer is buffer for w in r.block.writes)]
    hull = region
    if writers:
        written = access_region(index, scope, writers, buffer, primitive, within, clamp=False, field="writes")
        merged = union_regions(region, written, buffer.shape)
        assert isinstance(merged, tuple)
        hull = merged
    skip = frozenset(id(stmt) for stmt in before)
    outer = outer_analyzer(index, scope, within)
    for level, nest, after in later:
        names = ", ".join(repr(c.block.name) for c in after)
        target = block_target(after[0])
        if writes_outside(nest, buffer, skip):
            raise ScheduleError(
                primitive,
                target,
                f"{buffer.name} is written in the loop nest of the copy after the copy; {names}, after the "
                "nest, would read a stale copy",
                nest,
            )
        loops = []
        for node in [within, *index.ancestors(within)]:
            if isinstance(node, For):
                loops.append(node)
            if node is nest:
                break
        for loop in loops:
            if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
                raise ScheduleError(
                    primitive,
                    target,
                    f"loop {loop.loop_var.name} around the copy is {loop.kind.value}; {names}, after it, read what "
                    "the last iteration copied, which needs the iterations in order",
                    loop,
                )
        union = union_over_loops(hull, loops, outer)
        if isinstance(union, str):
            raise ScheduleError(
                primitive,
                target,
                f"cannot prove the copies in the loop nest cover what {names} read of {buffer.name} after it ({union})",
            )
        wanted = access_region(index, scope, after, buffer, primitive, level)
        dim = first_not_contained(union, wanted, outer_analyzer(index, scope, level))
        if dim is not None:
            raise ScheduleError(
                primitive,
                target,
                f"the copies in the loop nest cover {show_range(union[dim])} of dimension {dim} of {buffer.name}, "
                f"but {names} after it read {show_range(wanted[dim])}",
            )
    return clamp_region(hull, buffer.shape, outer)


# ---------------------------------------------------------------- set_scope / storage_align


def _allocated_buffer(func: PrimFunc, index: TreeIndex, block_name: str, buffer_index: int, primitive: str) -> Buffer:
    """The buffer ``block.writes[buffer_index]``, which a block must allocate."""
    realize = find_block(index, block_name, primitive)
    buffer = region_buffer(primitive, realize, "writes", buffer_index)
    target = block_target(realize)
    if any(param is buffer for param in func.params):
        raise ScheduleError(
            primitive, target, f"{buffer.name} is a function parameter; only buffers a block allocates can change"
        )
    allocated = False

    class Find(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            nonlocal allocated
            allocated = allocated or any(b is buffer for b in block.alloc_buffers)
            self.generic_visit(block)

    Find().visit(func.body)
    if not allocated:
        raise ScheduleError(primitive, target, f"{buffer.name} is not allocated by a block (a match_buffer view?)")
    return buffer


def _replace_buffer(func: PrimFunc, old: Buffer, new: Buffer) -> PrimFunc:
    return func.replace(body=replace_buffers(func.body, {old: new}))


def set_scope(func: PrimFunc, block_name: str, buffer_index: int, storage_scope: str) -> PrimFunc:
    """Move the buffer ``block.writes[buffer_index]`` to ``storage_scope``.

    The buffer must be allocated by a block (not a function parameter). Every reference to it
    (loads, stores, regions, the allocation, match_buffer sources) uses the new buffer;
    match_buffer views of it move to the scope as well.

    Before (``set_scope(B, 0, "shared")``)::

        B = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] + 1.0

    After::

        B = T.alloc_buffer((16,), "float32", scope="shared")
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] + 1.0
    """
    primitive = "set_scope"
    index = TreeIndex(func)
    buffer = _allocated_buffer(func, index, block_name, buffer_index, primitive)
    check_scope_name(primitive, block_target(index.blocks[block_name]), storage_scope)
    if buffer.scope == storage_scope:
        return func
    # match_buffer views of the buffer (and views of those) live in its scope too.
    moved = {buffer: buffer.replace(scope=storage_scope)}
    views = _match_views(func)
    pending = [buffer]
    while pending:
        source = pending.pop()
        for view in views.get(source, []):
            if view not in moved and view.scope != storage_scope:
                moved[view] = view.replace(scope=storage_scope)
                pending.append(view)
    return func.replace(body=replace_buffers(func.body, moved))


def _match_views(func: PrimFunc) -> dict[Buffer, list[Buffer]]:
    """Source buffer -> the match_buffer views of it."""
    views: dict[Buffer, list[Buffer]] = {}

    class Collect(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            for match in block.match_buffers:
                views.setdefault(match.source.buffer, []).append(match.buffer)
            self.generic_visit(block)

    Collect().visit(func.body)
    return views


def storage_align(func: PrimFunc, block_name: str, buffer_index: int, axis: int, factor: int, offset: int) -> PrimFunc:
    """Pad the strides of the buffer ``block.writes[buffer_index]`` so that
    ``strides[axis] % factor == offset`` (``strides[axis] = k * factor + offset`` for some k).

    The buffer must be allocated by a block. Strides are in elements; the innermost is 1 and
    each outer one is the smallest value at least the extent of the inner dimension times its
    stride, padded on ``axis``. The buffer then carries explicit ``strides``; strides an earlier
    ``storage_align`` padded stay (align inner axes first if you align several).

    Before (``storage_align(B, 0, axis=0, factor=32, offset=1)``)::

        B = T.alloc_buffer((16, 32), "float32")

    After (32 padded to 33 = 1 * 32 + 1)::

        B = T.alloc_buffer((16, 32), "float32", strides=(33, 1))
    """
    primitive = "storage_align"
    index = TreeIndex(func)
    buffer = _allocated_buffer(func, index, block_name, buffer_index, primitive)
    target = block_target(index.blocks[block_name])
    ndim = buffer.ndim
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < ndim:
        raise ScheduleError(primitive, target, f"axis {axis!r} is out of range for the {ndim}-D buffer {buffer.name}")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor <= 0:
        raise ScheduleError(primitive, target, f"factor must be a positive integer, got {factor!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < factor:
        raise ScheduleError(primitive, target, f"offset must be in [0, factor) = [0, {factor}), got {offset!r}")
    analyzer = Analyzer()
    old = _strides_of(buffer)
    new: list[PrimExpr] = list(old)
    for dim in range(ndim - 1, -1, -1):
        dtype = buffer.shape[dim].dtype
        needed = const(1, dtype) if dim == ndim - 1 else analyzer.simplify(buffer.shape[dim + 1] * new[dim + 1])
        if dim == axis:
            pad = FloorMod(const(offset, dtype) - needed, const(factor, dtype))
            new[dim] = analyzer.simplify(needed + pad)
        elif dim < axis:
            if analyzer.can_prove_equal(old[dim], buffer.shape[dim + 1] * old[dim + 1]):
                new[dim] = needed
            elif not analyzer.can_prove(old[dim] >= needed):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the stride {old[dim]} of axis {dim}, padded by an earlier storage_align, is smaller than "
                    f"the {needed} elements axis {dim + 1} now spans; align inner axes first",
                )
    if all(a is b for a, b in zip(new, old)) and buffer.strides:
        return func
    # Recorded so that lowering can redo the padding when it shrinks the buffer.
    rules = (*(rule for rule in buffer.dim_align if rule[0] != axis), (axis, factor, offset))
    return _replace_buffer(func, buffer, buffer.replace(strides=tuple(new), dim_align=rules))


def _strides_of(buffer: Buffer) -> list[PrimExpr]:
    if buffer.strides:
        return list(buffer.strides)
    strides: list[PrimExpr] = []
    for dim in range(buffer.ndim - 1, -1, -1):
        dtype = buffer.shape[dim].dtype
        strides.append(const(1, dtype) if dim == buffer.ndim - 1 else simplify(buffer.shape[dim + 1] * strides[-1]))
    return strides[::-1]


# ---------------------------------------------------------------- Schedule methods


class CachePrimitives:
    """Schedule methods for cache_read, cache_write, set_scope, storage_align."""

    @doc_from(cache_read)
    def cache_read(  # type: ignore[misc]
        self,
        block: BlockRV,
        read_buffer_index: int,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV | str] | None = None,
    ) -> BlockRV:
        realize = self.resolve_block(block, "cache_read")  # type: ignore[attr-defined]
        consumer_names = None
        if consumer_blocks is not None:
            resolve = self.resolve_block  # type: ignore[attr-defined]
            consumer_names = [resolve(c, "cache_read").block.name for c in consumer_blocks]
        kwargs: dict[str, object] = {"read_buffer_index": read_buffer_index, "storage_scope": storage_scope}
        if consumer_blocks is not None:
            kwargs["consumer_blocks"] = list(consumer_blocks)
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "cache_read",
            (block,),
            kwargs,
            lambda func: cache_read(func, realize.block.name, read_buffer_index, storage_scope, consumer_names),
        )

    @doc_from(cache_write)
    def cache_write(  # type: ignore[misc]
        self,
        block: BlockRV,
        write_buffer_index: int,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV | str] | None = None,
    ) -> BlockRV:
        realize = self.resolve_block(block, "cache_write")  # type: ignore[attr-defined]
        consumer_names = None
        if consumer_blocks is not None:
            resolve = self.resolve_block  # type: ignore[attr-defined]
            consumer_names = [resolve(c, "cache_write").block.name for c in consumer_blocks]
        kwargs: dict[str, object] = {"write_buffer_index": write_buffer_index, "storage_scope": storage_scope}
        if consumer_blocks is not None:
            kwargs["consumer_blocks"] = list(consumer_blocks)
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "cache_write",
            (block,),
            kwargs,
            lambda func: cache_write(func, realize.block.name, write_buffer_index, storage_scope, consumer_names),
        )

    @doc_from(set_scope)
    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:  # type: ignore[misc]
        realize = self.resolve_block(block, "set_scope")  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            "set_scope",
            (block,),
            {"buffer_index": buffer_index, "storage_scope": storage_scope},
            lambda func: set_scope(func, realize.block.name, buffer_index, storage_scope),
        )

    @doc_from(storage_align)
    def storage_align(  # type: ignore[misc]
        self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int
    ) -> None:
        realize = self.resolve_block(block, "storage_align")  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            "storage_align",
            (block,),
            {"buffer_index": buffer_index, "axis": axis, "factor": factor, "offset": offset},
            lambda func: storage_align(func, realize.block.name, buffer_index, axis, factor, offset),
        )
