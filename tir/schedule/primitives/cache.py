"""Caching and storage: cache_read, cache_write, set_scope, storage_align.

``cache_read`` / ``cache_write`` put a copy of a buffer in another storage scope between a block
and the rest of the program; ``set_scope`` moves an allocated buffer to another scope in place;
``storage_align`` pads the strides of an allocated buffer. Each is a pure ``PrimFunc ->
PrimFunc`` function with its preconditions checked before anything changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tir.arith import Analyzer, eval_interval, relax_range, simplify, union_regions
from tir.ir import (
    GE,
    GT,
    KNOWN_SCOPES,
    LE,
    LT,
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Cast,
    FloorMod,
    For,
    ForKind,
    IntImm,
    IRMutator,
    IRVisitor,
    IterKind,
    IterVar,
    LetStmt,
    Max,
    Min,
    Mul,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    const,
    replace_buffers,
    substitute,
)
from tir.ir.stmt import seq
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import (
    block_target,
    body_stmts,
    buffer_names,
    doc_from,
    find_block,
    top_position,
    unique_name,
)
from tir.schedule.tree import TreeIndex, replace_stmt

# ---------------------------------------------------------------- shared helpers


def check_scope_name(primitive: str, target: str, scope: str) -> None:
    """Refuse a storage scope the backends do not know."""
    if scope not in KNOWN_SCOPES:
        raise ScheduleError(
            primitive, target, f"unknown storage scope {scope!r}; known scopes: {', '.join(KNOWN_SCOPES)}"
        )


def _region_buffer(primitive: str, realize: BlockRealize, field: str, position: int) -> Buffer:
    """The buffer of ``block.reads[position]`` (``field="reads"``) or ``block.writes[position]``."""
    regions: tuple[BufferRegion, ...] = getattr(realize.block, field)
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < len(regions):
        names = [region.buffer.name for region in regions]
        raise ScheduleError(
            primitive,
            block_target(realize),
            f"buffer index {position!r} is out of range: the block {field} {len(regions)} buffer(s) {names}",
        )
    return regions[position].buffer


def _sanitize(name: str) -> str:
    return re.sub(r"\W", "_", name)


class _ReplaceRealizes(IRMutator):
    """Block realizes (by identity) replaced by new statements."""

    def __init__(self, replacements: Mapping[int, Stmt]) -> None:
        self.replacements = replacements

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        new = self.replacements.get(id(realize))
        if new is not None:
            return new
        rebuilt = self.generic_visit(realize)
        assert isinstance(rebuilt, Stmt)
        return rebuilt


def _check_visible(
    func: PrimFunc, index: TreeIndex, scope: BlockRealize, buffer: Buffer, primitive: str, target: str
) -> None:
    """Refuse unless ``buffer`` is defined at the top of ``scope``'s body: a parameter, or a
    buffer that ``scope`` or a block around it allocates or matches."""
    if any(param is buffer for param in func.params):
        return
    for node in [scope.block, *index.ancestors(scope.block)]:
        if isinstance(node, Block) and (
            any(b is buffer for b in node.alloc_buffers) or any(m.buffer is buffer for m in node.match_buffers)
        ):
            return
    raise ScheduleError(
        primitive,
        target,
        f"{buffer.name} is not defined in the scope of block {scope.block.name!r} "
        "(a match_buffer view or allocation of the block itself?)",
    )


def _path_to_scope(
    index: TreeIndex, realize: BlockRealize, scope: BlockRealize, stop: Stmt | None = None
) -> list[Stmt]:
    """Statements strictly between ``realize`` and the block of ``scope`` (or ``stop``, a
    statement inside it), innermost first."""
    path = []
    for node in index.ancestors(realize):
        if node is scope.block or node is stop:
            break
        path.append(node)
    return path


class _Accesses(IRVisitor):
    """Whether a statement reads / writes a buffer: loads, stores, and the read/write regions and
    match_buffer sources of the blocks in it. Block realizes in ``skip`` are left out."""

    def __init__(self, buffer: Buffer, skip: frozenset[int] = frozenset()) -> None:
        self.buffer = buffer
        self.skip = skip
        self.reads = False
        self.writes = False

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        if id(realize) not in self.skip:
            self.generic_visit(realize)

    def visit_Block(self, block: Block) -> None:
        if any(region.buffer is self.buffer for region in block.reads):
            self.reads = True
        if any(region.buffer is self.buffer for region in block.writes):
            self.writes = True
        if any(match.source.buffer is self.buffer for match in block.match_buffers):
            self.reads = True
        self.visit(block.init)
        self.visit(block.body)

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if load.buffer is self.buffer:
            self.reads = True
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if store.buffer is self.buffer:
            self.writes = True
        self.generic_visit(store)


def _accesses(node: Stmt | PrimExpr | None, buffer: Buffer, skip: frozenset[int] = frozenset()) -> _Accesses:
    visitor = _Accesses(buffer, skip)
    visitor.visit(node)
    return visitor


def _uses_vars(expr: PrimExpr, variables: Sequence[Var] | set[Var]) -> set[Var]:
    wanted = set(variables)
    found: set[Var] = set()

    class Find(IRVisitor):
        def visit_Var(self, var: Var) -> None:
            if var in wanted:
                found.add(var)

    Find().visit(expr)
    return found


def _as_dtype(expr: PrimExpr, like: PrimExpr) -> PrimExpr:
    if expr.dtype == like.dtype:
        return expr
    if isinstance(expr, IntImm):
        return IntImm(expr.value, like.dtype)
    return Cast(like.dtype, expr)


def _is_zero(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0


def _copy_nest(name: str, source: Buffer, target: Buffer, region: Sequence[Range]) -> Stmt:
    """``for ax...: with T.block(name): target[v...] = source[v...]`` over ``region``.

    The block iterators are spatial over the whole buffer dimension, bound to ``min + ax``; the
    loops run over the region's extents.
    """
    loop_vars: list[Var] = []
    iter_vars: list[IterVar] = []
    bindings: list[PrimExpr] = []
    for dim, (rng, extent) in enumerate(zip(region, source.shape)):
        loop_var = Var(f"ax{dim}", extent.dtype)
        loop_vars.append(loop_var)
        iter_vars.append(IterVar(Var(f"v{dim}", extent.dtype), Range(const(0, extent.dtype), extent), IterKind.SPATIAL))
        start = _as_dtype(rng.min, extent)
        bindings.append(loop_var if _is_zero(start) else simplify(start + loop_var))
    point = tuple(iv.var for iv in iter_vars)
    block = Block(
        name,
        tuple(iter_vars),
        reads=(BufferRegion.point(source, point),),
        writes=(BufferRegion.point(target, point),),
        body=BufferStore(target, BufferLoad(source, point), point),
    )
    stmt: Stmt = BlockRealize(tuple(bindings), const(True), block)
    for loop_var, rng, extent in reversed(list(zip(loop_vars, region, source.shape))):
        stmt = For(loop_var, const(0, extent.dtype), _as_dtype(rng.extent, extent), ForKind.SERIAL, stmt)
    return stmt


def _cache_buffer_and_block_names(func: PrimFunc, index: TreeIndex, buffer: Buffer, scope: str) -> tuple[str, str]:
    base = _sanitize(f"{buffer.name}_{scope}")
    return unique_name(base, buffer_names(func)), unique_name(base, set(index.blocks))


def _outer_analyzer(index: TreeIndex, scope: BlockRealize, within: Stmt | None = None) -> Analyzer:
    """An analyzer that knows the ranges of the loops and block iterators around ``scope``'s body
    (or around ``within``, a statement inside it)."""
    analyzer = Analyzer()
    start = scope.block if within is None else within
    for node in [start, *index.ancestors(start)]:
        if isinstance(node, For):
            analyzer.bind(node.loop_var, Range(node.min, node.extent))
        elif isinstance(node, Block):
            for iter_var in node.iter_vars:
                analyzer.bind(iter_var.var, iter_var.dom)
    return analyzer


def _clamp(region: Sequence[Range], shape: Sequence[PrimExpr], analyzer: Analyzer) -> tuple[Range, ...]:
    """``region`` intersected with the buffer's bounds ``[0, shape)``."""
    clamped = []
    for rng, extent in zip(region, shape):
        low, end = rng.min, analyzer.simplify(rng.min + rng.extent)
        if not analyzer.can_prove(low >= 0):
            low = analyzer.simplify(Max(low, const(0, low.dtype)))
        if not analyzer.can_prove(end <= _as_dtype(extent, end)):
            end = analyzer.simplify(Min(end, _as_dtype(extent, end)))
        if low is rng.min and analyzer.can_prove_equal(end, rng.min + rng.extent):
            clamped.append(rng)
        else:
            clamped.append(Range(low, analyzer.simplify(end - low)))
    return tuple(clamped)


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
    takes their names as ``consumer_names``) then read the copy. Returns the new block (a
    ``BlockRV``; the pure function returns its name). Move the copy with ``compute_at`` to make
    it tile-local.

    Preconditions: the index names a buffer the block reads; the scope is known; every consumer
    reads the buffer, none writes it, all are in the same block scope (not the root, not an
    init) where the buffer is defined, the region read is expressible there, and nothing writes
    the buffer between the copy and the last consumer (the copy would be stale).

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
    buffer = _region_buffer(primitive, realize, "reads", read_buffer_index)
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
        if _accesses(consumer.block, buffer).writes:
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
    _check_visible(func, index, scope, buffer, primitive, target)
    first, last = min(positions), max(positions)  # type: ignore[type-var]
    stmts = body_stmts(scope.block)
    assert first is not None and last is not None
    # The copy goes right before the statement that holds the first consumer. Where that
    # statement also writes the buffer (its producer runs in the same loop, as a tile at a
    # time), the copy goes deeper: after the producer, inside the loops around both, copying
    # per iteration what the consumers read in it.
    within: SeqStmt | None = None
    while True:
        stale = next((stmt for stmt in stmts[first : last + 1] if _accesses(stmt, buffer).writes), None)
        if stale is None:
            break
        inner = _loop_nest_body(stmts[first]) if first == last else None
        if not isinstance(inner, SeqStmt) or any(_accesses(c.block, buffer).writes for c in consumers):
            raise ScheduleError(
                primitive,
                target,
                f"{buffer.name} is written between the place of the copy and the last consumer; "
                "the consumers would read a stale copy",
                stale,
            )
        within = inner
        stmts = list(inner.stmts)
        positions = [_child_position(index, inner, consumer) for consumer in consumers]
        first, last = min(positions), max(positions)  # type: ignore[type-var]

    region = _read_region(index, scope, consumers, buffer, primitive, within)
    cache_name, block_name_new = _cache_buffer_and_block_names(func, index, buffer, storage_scope)
    cache = Buffer(cache_name, buffer.shape, buffer.dtype, storage_scope)
    replacements = {id(c): c.replace(block=replace_buffers(c.block, {buffer: cache})) for c in consumers}
    rewritten = [_ReplaceRealizes(replacements).visit(stmt) for stmt in stmts[first : last + 1]]
    copy = _copy_nest(block_name_new, buffer, cache, region)
    body = seq(*stmts[:first], copy, *rewritten, *stmts[last + 1 :])
    if within is not None:
        func = replace_stmt(index, within, body)
        index = TreeIndex(func)
        scope = index.blocks[scope.block.name]
        body = scope.block.body
    new_scope = scope.block.replace(body=body, alloc_buffers=(*scope.block.alloc_buffers, cache))
    return replace_stmt(index, scope, scope.replace(block=new_scope)), block_name_new


def _loop_nest_body(stmt: Stmt) -> Stmt:
    """The statement under a nest of loops (``stmt`` itself when it is no loop)."""
    while isinstance(stmt, For):
        stmt = stmt.body
    return stmt


def _child_position(index: TreeIndex, sequence: SeqStmt, stmt: Stmt) -> int:
    """Which statement of ``sequence`` holds ``stmt``."""
    chain = [stmt, *index.ancestors(stmt)]
    at = next(k for k, node in enumerate(chain) if node is sequence)
    return next(k for k, item in enumerate(sequence.stmts) if item is chain[at - 1])


def _has_load(expr: PrimExpr) -> bool:
    found = False

    class Find(IRVisitor):
        def visit_BufferLoad(self, load: BufferLoad) -> None:
            nonlocal found
            found = True

    Find().visit(expr)
    return found


def _full_if_loaded(rng: Range, extent: PrimExpr) -> Range:
    """``rng``, or the whole dimension when its bounds read memory (which may change before the
    consumers run)."""
    if _has_load(rng.min) or _has_load(rng.extent):
        return Range(const(0, extent.dtype), extent)
    return rng


def _iterator_ranges(consumer: BlockRealize, dom: Mapping[Var, Range], analyzer: Analyzer) -> dict[Var, Range]:
    """The range of each iterator of ``consumer`` as the loops of ``dom`` sweep: its binding's
    values cut to its domain (the block runs only where every binding is in its domain). An
    iterator whose binding uses no loop of ``dom`` keeps its binding (a point)."""
    ranges: dict[Var, Range] = {}
    for iter_var, binding in zip(consumer.block.iter_vars, consumer.iter_values):
        if not _uses_vars(binding, set(dom)):
            ranges[iter_var.var] = Range(binding, const(1, binding.dtype))
            continue
        low, high = eval_interval(binding, dom)
        dom_low = iter_var.dom.min
        dom_high = analyzer.simplify(iter_var.dom.min + iter_var.dom.extent - 1)
        # max(low, dom_low) .. min(high, dom_high), or a provable superset of it.
        low = low if analyzer.can_prove(low >= dom_low) else dom_low
        high = high if analyzer.can_prove(high <= dom_high) else dom_high
        ranges[iter_var.var] = Range(low, analyzer.simplify(high - low + 1))
    return ranges


def _tighter(first: Range, second: Range, inner_vars: Sequence[Var], analyzer: Analyzer) -> Range:
    """Per end, the tighter of two hulls of one region, where provable; ``first`` otherwise.
    A ``second`` that names a loop inside the scope (an iterator domain that does) is not used."""
    if _uses_vars(second.min, inner_vars) or _uses_vars(second.extent, inner_vars):
        return first
    first_end = analyzer.simplify(first.min + first.extent)
    second_end = analyzer.simplify(second.min + second.extent)
    low = second.min if analyzer.can_prove(second.min > first.min) else first.min
    end = second_end if analyzer.can_prove(second_end < first_end) else first_end
    if low is first.min and end is first_end:
        return first
    return Range(low, analyzer.simplify(end - low))


def _read_region(
    index: TreeIndex,
    scope: BlockRealize,
    consumers: list[BlockRealize],
    buffer: Buffer,
    primitive: str,
    within: Stmt | None = None,
) -> tuple[Range, ...]:
    """The hull of what ``consumers`` read of ``buffer``, over the loops inside ``scope`` (or
    inside ``within``, a statement sequence in it: the loops around it stay symbolic).

    Each dimension is the tighter of two hulls of the read region: with the bindings
    substituted and the loops swept (exact where the bindings are correlated), and with each
    iterator swept over its binding's values cut to its domain. The second honours the
    ``T.where`` of a split loop whose last tile runs past the iterator's extent: the block
    never runs there, so nothing it would read there was written (``region-cover``)."""
    region: tuple[Range, ...] | None = None
    outer = _outer_analyzer(index, scope, within)
    for consumer in consumers:
        dom: dict[Var, Range] = {}
        inner_vars: list[Var] = []
        for node in _path_to_scope(index, consumer, scope, within):
            if isinstance(node, For):
                dom[node.loop_var] = Range(node.min, node.extent)
                inner_vars.append(node.loop_var)
            elif isinstance(node, LetStmt):
                inner_vars.append(node.var)
        bindings = {iv.var: value for iv, value in zip(consumer.block.iter_vars, consumer.iter_values)}
        iter_dom = _iterator_ranges(consumer, dom, outer)
        for read in consumer.block.reads:
            if read.buffer is not buffer:
                continue
            ranges = tuple(
                _full_if_loaded(
                    _tighter(
                        relax_range(
                            Range(substitute(rng.min, bindings), substitute(rng.extent, bindings)), dom, extent
                        ),
                        relax_range(rng, iter_dom, extent),
                        inner_vars,
                        outer,
                    ),
                    extent,
                )
                for rng, extent in zip(read.region, buffer.shape)
            )
            for rng in ranges:
                if _uses_vars(rng.min, inner_vars) or _uses_vars(rng.extent, inner_vars):
                    raise ScheduleError(
                        primitive,
                        block_target(consumer),
                        f"cannot express the region of {buffer.name} it reads outside its loops",
                        read,
                    )
            if region is None:
                region = ranges
            else:
                merged = union_regions(region, ranges, buffer.shape)
                assert isinstance(merged, tuple)
                region = merged
    assert region is not None
    return _clamp(region, buffer.shape, outer)


# ---------------------------------------------------------------- cache_write


def cache_write(func: PrimFunc, block_name: str, write_buffer_index: int, storage_scope: str) -> tuple[PrimFunc, str]:
    """Write ``block.writes[write_buffer_index]`` through a copy in ``storage_scope``.

    The block writes (and reads) a new buffer ``<C>_<scope>`` instead of ``C``; a new block of
    the same name, right after the top-level statement of the scope that holds the block, copies
    what the block wrote back into ``C``, so later readers of ``C`` see the same values. Where
    that statement also touches ``C`` (a reader in the same loop, a tile at a time), the copy back
    goes right after the block's own loops inside the loops around both, per iteration. An init
    (``T.init()``) targets the cache too. Returns the new block's name.

    Preconditions (the copy back must write exactly the elements the block wrote, with the
    values the block left there):

    - the index names a buffer the block writes, and the scope is known;
    - every instance writes one element, ``C[...]`` at indices that are sums of loop variables
      times constants forming a dense box (``vi``, ``vi_0 * 32 + vi_1`` from ``split``), one
      loop feeding one dimension; a ``T.where`` may only cap such an index (``x < n``) or hold
      at the first iteration of the other loops; no ``if`` or ``let`` between the block and its
      scope;
    - the block touches ``C`` only at the element it writes, and writes it unconditionally
      before reading it (its first statement touching ``C``, or its init's, is a store); with
      an init, the first iteration of the loops that feed no index has the reduction
      iterators at their start (so the first instance of each element runs the init);
    - ``C`` is defined in the block's scope (not a view or allocation of the block itself),
      and nothing else in the loop nest the copy back follows touches it.

    Before (``cache_write(C, 0, "local")``)::

        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    After::

        C_local = T.alloc_buffer((16, 16), "float32", scope="local")
        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C_local[vi, vj] = 0.0
                C_local[vi, vj] += A[vi, vk] * B[vk, vj]
        for ax0, ax1 in T.grid(16, 16):
            with T.block("C_local"):
                v0, v1 = T.remap("SS", ax0, ax1)
                C[v0, v1] = C_local[v0, v1]
    """
    primitive = "cache_write"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    block = realize.block
    buffer = _region_buffer(primitive, realize, "writes", write_buffer_index)
    check_scope_name(primitive, target, storage_scope)
    scope = index.scope_block(realize)
    if scope is None:
        raise ScheduleError(primitive, target, "the root block has no scope to put the copy in")
    position = top_position(index, scope, realize)
    if position is None:
        raise ScheduleError(primitive, target, f"the block is inside the init of {scope.block.name!r}")
    _check_visible(func, index, scope, buffer, primitive, target)
    written = [region for region in block.writes if region.buffer is buffer]
    if len(written) != 1:
        raise ScheduleError(primitive, target, f"the block lists {len(written)} write regions of {buffer.name}")
    region = written[0]
    if not all(isinstance(rng.extent, IntImm) and rng.extent.value == 1 for rng in region.region):
        raise ScheduleError(
            primitive,
            target,
            f"each instance must write one element of {buffer.name}, but the block writes a region "
            "(the copy back could not tell which elements were written)",
            block,
        )
    for node in _path_to_scope(index, realize, scope):
        if not isinstance(node, (For, SeqStmt)):
            kind = {"IfThenElse": "an if", "LetStmt": "a let"}.get(type(node).__name__, type(node).__name__)
            raise ScheduleError(
                primitive,
                target,
                f"the block is under {kind} inside its scope; cannot prove which elements it writes",
                node,
            )
    point = tuple(rng.min for rng in region.region)
    if not _only_at(block, buffer, point):
        raise ScheduleError(
            primitive,
            target,
            f"the block touches {buffer.name} elsewhere than the element it writes, "
            f"{buffer.name}[{', '.join(map(str, point))}]; the cache would not hold those values",
            block,
        )
    by_init = _first_access_is_store(block.init, buffer)
    if by_init is None and _first_access_is_store(block.body, buffer) is not True:
        raise ScheduleError(
            primitive,
            target,
            f"the block must store to {buffer.name} unconditionally before anything else touches it "
            f"(it reads {buffer.name} first, or writes it only conditionally), "
            "so the cache would miss values the block reads",
            block.body,
        )
    if by_init is False:
        raise ScheduleError(
            primitive,
            target,
            f"its init must store to {buffer.name} unconditionally before anything else touches it",
            block.init,
        )
    # The copy back goes right after the statement that holds the block. Where that statement
    # also touches the buffer (its consumers run in the same loop, a tile at a time), the copy
    # goes deeper: right after the block's own loops, inside the loops around it and them,
    # copying per iteration what the block wrote in it.
    stmts = body_stmts(scope.block)
    within: SeqStmt | None = None
    while True:
        others = _accesses(stmts[position], buffer, skip=frozenset({id(realize)}))
        if not (others.reads or others.writes):
            break
        inner = _loop_nest_body(stmts[position])
        if not isinstance(inner, SeqStmt):
            raise ScheduleError(
                primitive,
                target,
                f"another statement in the block's loop nest touches {buffer.name}; it would run before the copy back",
                stmts[position],
            )
        within = inner
        stmts = list(inner.stmts)
        position = _child_position(index, inner, realize)
    copy_region = _written_box(index, scope, realize, region, primitive, by_init is True, within)

    cache_name, block_name_new = _cache_buffer_and_block_names(func, index, buffer, storage_scope)
    cache = Buffer(cache_name, buffer.shape, buffer.dtype, storage_scope)
    new_realize = realize.replace(block=replace_buffers(block, {buffer: cache}))
    rewritten = _ReplaceRealizes({id(realize): new_realize}).visit(stmts[position])
    copy = _copy_nest(block_name_new, cache, buffer, copy_region)
    body = seq(*stmts[:position], rewritten, copy, *stmts[position + 1 :])
    if within is not None:
        func = replace_stmt(index, within, body)
        index = TreeIndex(func)
        scope = index.blocks[scope.block.name]
        body = scope.block.body
    new_scope = scope.block.replace(body=body, alloc_buffers=(*scope.block.alloc_buffers, cache))
    return replace_stmt(index, scope, scope.replace(block=new_scope)), block_name_new


def _only_at(block: Block, buffer: Buffer, point: tuple[PrimExpr, ...]) -> bool:
    """Whether every load and store of ``buffer`` in ``block`` (nested blocks: none) is at ``point``."""
    analyzer = Analyzer()
    ok = True

    class Check(IRVisitor):
        def at_point(self, indices: tuple[PrimExpr, ...]) -> bool:
            return len(indices) == len(point) and all(analyzer.can_prove_equal(a, b) for a, b in zip(indices, point))

        def visit_Block(self, nested: Block) -> None:
            nonlocal ok
            if nested is not block and _accesses(nested, buffer).reads | _accesses(nested, buffer).writes:
                ok = False
            elif nested is block:
                if any(match.source.buffer is buffer for match in block.match_buffers):
                    ok = False
                self.visit(nested.init)
                self.visit(nested.body)

        def visit_BufferLoad(self, load: BufferLoad) -> None:
            nonlocal ok
            if load.buffer is buffer and not self.at_point(load.indices):
                ok = False
            self.generic_visit(load)

        def visit_BufferStore(self, store: BufferStore) -> None:
            nonlocal ok
            if store.buffer is buffer and not self.at_point(store.indices):
                ok = False
            self.generic_visit(store)

    Check().visit(block)
    return ok


def _first_access_is_store(stmt: Stmt | None, buffer: Buffer) -> bool | None:
    """Whether the first statement (in order) touching ``buffer`` is an unconditional store to it
    that does not read it; None when nothing touches it."""
    if stmt is None:
        return None
    if isinstance(stmt, SeqStmt):
        for item in stmt.stmts:
            result = _first_access_is_store(item, buffer)
            if result is not None:
                return result
        return None
    if isinstance(stmt, LetStmt):
        if _accesses(stmt.value, buffer).reads:
            return False
        return _first_access_is_store(stmt.body, buffer)
    if isinstance(stmt, BufferStore) and stmt.buffer is buffer:
        return not any(_accesses(expr, buffer).reads for expr in (stmt.value, *stmt.indices))
    found = _accesses(stmt, buffer)
    return False if (found.reads or found.writes) else None


def _linear(expr: PrimExpr, variables: set[Var]) -> tuple[dict[Var, int], PrimExpr] | None:
    """``expr`` as ``base + sum(coeff * var)`` over ``variables`` (None when not of that form)."""
    if not _uses_vars(expr, variables):
        return {}, expr
    if isinstance(expr, Var):
        return {expr: 1}, const(0, expr.dtype)
    if isinstance(expr, (Add, Sub)):
        left, right = _linear(expr.a, variables), _linear(expr.b, variables)
        if left is None or right is None:
            return None
        sign = 1 if isinstance(expr, Add) else -1
        coeffs = dict(left[0])
        for var, coeff in right[0].items():
            coeffs[var] = coeffs.get(var, 0) + sign * coeff
        base = left[1] + right[1] if sign == 1 else left[1] - right[1]
        return {v: c for v, c in coeffs.items() if c != 0}, base
    if isinstance(expr, Mul):
        for scale, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(scale, IntImm):
                inner = _linear(other, variables)
                if inner is None:
                    return None
                return {v: c * scale.value for v, c in inner[0].items() if c * scale.value != 0}, inner[1] * scale
        return None
    return None


def _conjuncts(cond: PrimExpr) -> list[PrimExpr]:
    if isinstance(cond, And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _written_box(
    index: TreeIndex,
    scope: BlockRealize,
    realize: BlockRealize,
    region: BufferRegion,
    primitive: str,
    by_init: bool,
    within: Stmt | None = None,
) -> list[Range]:
    """The exact box of elements the instances of ``realize`` write (see ``cache_write``), over
    the loops inside ``scope`` (or inside ``within``: the loops around it stay symbolic).

    With ``by_init`` the element is first written by the init, so the first instance of each
    element (the first iteration of the loops that feed no index) must run it.
    """
    target = block_target(realize)
    if within is None:
        loops = index.loops_above(realize)
    else:
        loops = [node for node in reversed(_path_to_scope(index, realize, scope, within)) if isinstance(node, For)]
    loop_of = {loop.loop_var: loop for loop in loops}
    loop_vars = set(loop_of)
    analyzer = _outer_analyzer(index, scope, within)
    for loop in loops:
        if _uses_vars(loop.min, loop_vars) or _uses_vars(loop.extent, loop_vars):
            raise ScheduleError(
                primitive, target, f"loop {loop.loop_var.name} has bounds that depend on outer loops", loop
            )
        analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
    bindings = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}

    def not_dense(detail: str) -> ScheduleError:
        return ScheduleError(
            primitive,
            target,
            f"cannot prove the instances write a dense box of {region.buffer.name} ({detail})",
            realize,
        )

    dim_of: dict[Var, int] = {}
    forms: list[tuple[dict[Var, int], PrimExpr]] = []
    box: list[Range] = []
    for dim, rng in enumerate(region.region):
        value = simplify(substitute(rng.min, bindings))
        if _has_load(value):
            raise not_dense(f"index {dim} is {value}, which reads memory")
        form = _linear(value, loop_vars)
        if form is None:
            raise not_dense(f"index {dim} is {value}, not a sum of loop variables times constants")
        coeffs, base = form
        forms.append((coeffs, base))
        expected = 1
        span: PrimExpr = const(1, value.dtype)
        terms = sorted(coeffs.items(), key=lambda item: item[1])
        for k, (var, coeff) in enumerate(terms):
            if var in dim_of:
                raise not_dense(f"loop {var.name} feeds indices {dim_of[var]} and {dim}")
            dim_of[var] = dim
            loop = loop_of[var]
            if coeff != expected:
                raise not_dense(f"index {dim} is {value}: loop {var.name} has coefficient {coeff}, expected {expected}")
            base = base + const(coeff, value.dtype) * _as_dtype(loop.min, value)
            extent = _as_dtype(loop.extent, value)
            if k + 1 < len(terms):
                if not isinstance(extent, IntImm):
                    raise not_dense(f"loop {var.name} has the symbolic extent {extent}")
                expected = coeff * extent.value
            else:
                span = simplify(const(coeff, value.dtype) * extent)
        box.append(Range(simplify(base), span))

    free_loops = [loop for loop in loops if loop.loop_var not in dim_of]
    for loop in free_loops:
        if not analyzer.can_prove(loop.extent >= 1):
            raise not_dense(f"loop {loop.loop_var.name} may run no iteration")
    at_first = {loop.loop_var: loop.min for loop in free_loops}
    if by_init:
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
            if iter_var.kind is not IterKind.REDUCE:
                continue
            if _uses_vars(value, set(dim_of)) or not analyzer.can_prove_equal(
                simplify(substitute(value, at_first)), iter_var.dom.min
            ):
                raise ScheduleError(
                    primitive,
                    target,
                    f"cannot prove the first instance of each element of {region.buffer.name} runs the init "
                    f"(reduction iterator {iter_var.var.name} = {value} is not {iter_var.dom.min} at the first "
                    "iteration of the loops that feed no index)",
                )
    caps: list[PrimExpr | None] = [None] * len(box)
    for cond in _conjuncts(realize.predicate):
        used = _uses_vars(cond, loop_vars)
        dims = {dim_of[var] for var in used if var in dim_of}
        if not dims:
            # Only loops that feed no index (or none at all): it must hold at their first iteration.
            if not analyzer.can_prove(substitute(cond, at_first)):
                raise not_dense(f"the predicate {cond} may not hold at the first iteration of the other loops")
            continue
        found = _cap(cond, loop_vars, forms, dims, used, dim_of)
        if found is None:
            raise not_dense(f"the predicate {cond} is not an upper bound on one index")
        dim, bound = found
        previous = caps[dim]
        caps[dim] = bound if previous is None else Min(previous, bound)
    result = []
    for rng, cap in zip(box, caps):
        if cap is None:
            result.append(rng)
        else:
            end = simplify(Min(rng.min + rng.extent, cap))
            result.append(Range(rng.min, simplify(Max(end - rng.min, const(0, end.dtype)))))
    return result


def _cap(
    cond: PrimExpr,
    loop_vars: set[Var],
    forms: list[tuple[dict[Var, int], PrimExpr]],
    dims: set[int],
    used: set[Var],
    dim_of: dict[Var, int],
) -> tuple[int, PrimExpr] | None:
    """``(dim, bound)`` when ``cond`` says ``index[dim] < bound``."""
    if len(dims) != 1 or any(var not in dim_of for var in used):
        return None
    (dim,) = dims
    if isinstance(cond, (LT, LE)):
        side, bound, inclusive = cond.a, cond.b, isinstance(cond, LE)
    elif isinstance(cond, (GT, GE)):
        side, bound, inclusive = cond.b, cond.a, isinstance(cond, GE)
    else:
        return None
    if _uses_vars(bound, loop_vars):
        return None
    form = _linear(side, loop_vars)
    coeffs, base = forms[dim]
    if form is None or form[0] != coeffs:
        return None
    # side = form_base + sum; index = base + sum; side < bound  <=>  index < bound - form_base + base.
    limit = bound - form[1] + base
    if inclusive:
        limit = limit + const(1, limit.dtype)
    return dim, simplify(limit)


# ---------------------------------------------------------------- set_scope / storage_align


def _allocated_buffer(func: PrimFunc, index: TreeIndex, block_name: str, buffer_index: int, primitive: str) -> Buffer:
    """The buffer ``block.writes[buffer_index]``, which a block must allocate."""
    realize = find_block(index, block_name, primitive)
    buffer = _region_buffer(primitive, realize, "writes", buffer_index)
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
    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str) -> BlockRV:  # type: ignore[misc]
        realize = self.resolve_block(block, "cache_write")  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "cache_write",
            (block,),
            {"write_buffer_index": write_buffer_index, "storage_scope": storage_scope},
            lambda func: cache_write(func, realize.block.name, write_buffer_index, storage_scope),
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
