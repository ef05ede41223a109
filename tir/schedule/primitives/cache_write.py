"""cache_write: a block writes a cache in another storage scope, and a new block copies what it
wrote back; named consumers may read the cache directly."""

from __future__ import annotations

from collections.abc import Sequence

from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer, simplify
from tir.ir import (
    GE,
    GT,
    LE,
    LT,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IntImm,
    IRVisitor,
    IterKind,
    LetStmt,
    Max,
    Min,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    const,
    replace_buffers,
    substitute,
)
from tir.ir.stmt import seq
from tir.schedule.errors import ScheduleError
from tir.schedule.primitives._cache_util import (
    ReplaceRealizes,
    access_region,
    accesses,
    as_dtype,
    cache_buffer_and_block_names,
    check_scope_name,
    check_visible,
    child_position,
    copy_nest,
    direct_access,
    first_not_contained,
    has_load,
    linear_form,
    loop_nest_body,
    outer_analyzer,
    path_to_scope,
    redirect_blocks,
    region_buffer,
    show_range,
    union_over_loops,
    uses_vars,
)
from tir.schedule.primitives._common import (
    block_target,
    body_stmts,
    find_block,
    top_position,
)


def cache_write(
    func: PrimFunc,
    block_name: str,
    write_buffer_index: int,
    storage_scope: str,
    consumer_names: Sequence[str] | None = None,
) -> tuple[PrimFunc, str]:
    """Write ``block.writes[write_buffer_index]`` through a copy in ``storage_scope``.

    The block writes (and reads) a new buffer ``<C>_<scope>`` instead of ``C``; a new block of
    the same name, right after the top-level statement of the scope that holds the block, copies
    what the block wrote back into ``C``, so later readers of ``C`` see the same values. Where
    that statement also touches ``C`` (a reader in the same loop, a tile at a time), the copy back
    goes right after the block's own loops inside the loops around both, per iteration. An init
    (``T.init()``) targets the cache too. The blocks of ``consumer_blocks`` (handles or names;
    the pure function takes their names as ``consumer_names``) read the cache instead of ``C``;
    the copy back then only needs to come before the other readers. Returns the new block's
    name.

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
    - or the block's whole body is one child block (neither with an init) that meets the
      rules above for one element; the child's ``T.where`` then limits which instances write
      it (each conjunct an upper bound on one index, or true at the first iteration of the
      loops that feed no index), and the copy back covers only those elements;
    - or else every instance writes a tile (a blockized block, ``C[vo * 16 : vo * 16 + 16]``;
      or one element its child blocks compute), without a ``T.where``: the tiles' starts are
      sums of loop variables times constants whose union is one box (each loop stepping by at
      most what the loops inside it cover); inside the block (its init, if it has one) a child
      block that meets the point rules above, or a nest of loops around one store, writes the
      whole tile before anything else touches ``C``, after which the block reads only that
      tile; with an init, the first instance to touch each tile runs it (the reduction
      iterators are at their start at the first iteration of the loops that feed no index);
    - ``C`` is defined in the block's scope (not a view or allocation of the block itself),
      and nothing else in the loop nest the copy back follows touches it;
    - each consumer reads ``C``, does not write it, is in the block's scope and comes after
      the block in a statement sequence they share, nothing but the block writes ``C`` from
      the block to it, and it reads only elements the block wrote in the same iteration of
      the loops around that sequence (the cache holds nothing else).

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
    buffer = region_buffer(primitive, realize, "writes", write_buffer_index)
    check_scope_name(primitive, target, storage_scope)
    scope = index.scope_block(realize)
    if scope is None:
        raise ScheduleError(primitive, target, "the root block has no scope to put the copy in")
    position = top_position(index, scope, realize)
    if position is None:
        raise ScheduleError(primitive, target, f"the block is inside the init of {scope.block.name!r}")
    check_visible(func, index, scope, buffer, primitive, target)
    consumers = _write_consumers(index, realize, scope, buffer, consumer_names or [], primitive)
    written = [region for region in block.writes if region.buffer is buffer]
    if len(written) != 1:
        raise ScheduleError(primitive, target, f"the block lists {len(written)} write regions of {buffer.name}")
    region = written[0]
    for node in path_to_scope(index, realize, scope):
        if not isinstance(node, (For, SeqStmt)):
            kind = {"IfThenElse": "an if", "LetStmt": "a let"}.get(type(node).__name__, type(node).__name__)
            raise ScheduleError(
                primitive,
                target,
                f"the block is under {kind} inside its scope; cannot prove which elements it writes",
                node,
            )
    # A predicate of a lone child block the block wraps (``T.where(vi < 10)`` inside it),
    # in the block's loop variables: it limits which elements the instances write.
    child_predicate: PrimExpr | None = None
    wrapped = _wrapped_point_write(primitive, realize, buffer)
    if wrapped is not None:
        region, child_predicate = wrapped
        by_init = False
    elif _is_point(region) and not any(
        accesses(child.block, buffer).reads or accesses(child.block, buffer).writes
        for stmt in (block.init, block.body)
        if stmt is not None
        for child in index.child_blocks(stmt)
    ):
        by_init = _point_write_init(primitive, realize, buffer, region)
    else:
        # A tile per instance, or one element that child blocks compute (a blockized reduction).
        by_init = _check_tile_write(index, realize, region, primitive)
    # The copy back goes right after the statement that holds the block. Where that statement
    # also touches the buffer (its consumers run in the same loop, a tile at a time), the copy
    # goes deeper: right after the block's own loops, inside the loops around it and them,
    # copying per iteration what the block wrote in it. Consumers that read the cache do not
    # count.
    redirected = frozenset({id(realize), *(id(c) for c in consumers)})
    stmts = body_stmts(scope.block)
    within: SeqStmt | None = None
    while True:
        others = accesses(stmts[position], buffer, skip=redirected)
        if not (others.reads or others.writes):
            break
        inner = loop_nest_body(stmts[position])
        if not isinstance(inner, SeqStmt):
            raise ScheduleError(
                primitive,
                target,
                f"another statement in the block's loop nest touches {buffer.name}; it would run before the copy back",
                stmts[position],
            )
        within = inner
        stmts = list(inner.stmts)
        position = child_position(index, inner, realize)
    copy_region = _copy_back_box(index, scope, realize, region, primitive, by_init, within, child_predicate)
    for consumer in consumers:
        _check_reads_written(index, scope, realize, consumer, region, primitive, by_init, child_predicate)

    cache_name, block_name_new = cache_buffer_and_block_names(func, index, buffer, storage_scope)
    cache = Buffer(cache_name, buffer.shape, buffer.dtype, storage_scope)
    new_realize = realize.replace(block=replace_buffers(block, {buffer: cache}))
    rewritten = ReplaceRealizes({id(realize): new_realize}).visit(stmts[position])
    copy = copy_nest(block_name_new, cache, buffer, copy_region)
    body = seq(*stmts[:position], rewritten, copy, *stmts[position + 1 :])
    if within is not None:
        func = replace_stmt(index, within, body)
        index = TreeIndex(func)
        scope = index.blocks[scope.block.name]
        body = scope.block.body
    new_scope = scope.block.replace(body=body, alloc_buffers=(*scope.block.alloc_buffers, cache))
    func = replace_stmt(index, scope, scope.replace(block=new_scope))
    return redirect_blocks(func, [c.block.name for c in consumers], buffer, cache), block_name_new


def _wrapped_point_write(primitive: str, realize: BlockRealize, buffer: Buffer) -> tuple[BufferRegion, PrimExpr] | None:
    """For a block without an init whose whole body is one child block without an init that
    writes one element of ``buffer`` (meeting the point rules): the element, in the block's
    iterators, and the child's predicate, in the loop variables around the block. The block
    then writes that element exactly in the instances where the child's predicate holds (TVM
    builds such blocks, ``T.where`` inside an outer block). None for any other block."""
    block = realize.block
    child = block.body
    if block.init is not None or not isinstance(child, BlockRealize) or child.block.init is not None:
        return None
    if any(match.source.buffer is buffer for match in block.match_buffers):
        return None
    regions = [w for w in child.block.writes if w.buffer is buffer]
    if len(regions) != 1 or not _is_point(regions[0]):
        return None
    _point_write_init(primitive, child, buffer, regions[0])
    child_bindings = {iv.var: value for iv, value in zip(child.block.iter_vars, child.iter_values)}
    region = BufferRegion(
        buffer,
        tuple(
            Range(simplify(substitute(rng.min, child_bindings)), simplify(substitute(rng.extent, child_bindings)))
            for rng in regions[0].region
        ),
    )
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    return region, simplify(substitute(child.predicate, bindings))


def _is_point(region: BufferRegion) -> bool:
    return all(isinstance(rng.extent, IntImm) and rng.extent.value == 1 for rng in region.region)


def _write_consumers(
    index: TreeIndex,
    realize: BlockRealize,
    scope: BlockRealize,
    buffer: Buffer,
    names: Sequence[str],
    primitive: str,
) -> list[BlockRealize]:
    """The consumer blocks ``names`` of a cache_write, checked to read ``buffer`` without
    writing it, in the block's scope."""
    consumers = []
    for name in dict.fromkeys(names):
        consumer = find_block(index, name, primitive)
        target = block_target(consumer)
        if consumer is realize:
            raise ScheduleError(primitive, target, f"consumer block {name!r} is the block itself", consumer.block)
        if not any(region.buffer is buffer for region in consumer.block.reads):
            raise ScheduleError(
                primitive, target, f"consumer block {name!r} does not read {buffer.name}", consumer.block
            )
        if accesses(consumer.block, buffer).writes:
            raise ScheduleError(
                primitive,
                target,
                f"consumer block {name!r} writes {buffer.name} as well; it cannot move to the cache",
                consumer.block,
            )
        if index.scope_block(consumer) is not scope:
            raise ScheduleError(
                primitive,
                target,
                f"consumer block {name!r} is not in the block scope of {realize.block.name!r} ({scope.block.name!r})",
            )
        if top_position(index, scope, consumer) is None:
            raise ScheduleError(primitive, target, f"the consumer is inside the init of {scope.block.name!r}")
        consumers.append(consumer)
    return consumers


def _point_write_init(primitive: str, realize: BlockRealize, buffer: Buffer, region: BufferRegion) -> bool:
    """Check that the block touches ``buffer`` only at the element it writes and writes it
    before anything else there; whether its init is what writes it first."""
    block = realize.block
    target = block_target(realize)
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
    return by_init is True


def _check_tile_write(index: TreeIndex, realize: BlockRealize, region: BufferRegion, primitive: str) -> bool:
    """Check that each instance of a block writing a tile of ``region.buffer`` writes all of it
    (through a child block that meets the point rules, or a nest of loops around one store)
    before anything else in the block touches the buffer, and reads no element of it outside
    that tile afterwards; with an init, the init does so and the body reads only the tile.
    Returns whether there is an init."""
    block = realize.block
    buffer = region.buffer
    target = block_target(realize)
    if any(match.source.buffer is buffer for match in block.match_buffers):
        raise ScheduleError(primitive, target, f"the block views {buffer.name} through T.match_buffer", block)
    init_stmts = [] if block.init is None else _stmts_of(block.init)
    stmts = body_stmts(block)
    # The statements that write the whole tile first: the init's, else the body's.
    first = init_stmts or stmts
    where = "its init" if init_stmts else "its body"
    touching = [k for k, stmt in enumerate(first) if accesses(stmt, buffer).reads or accesses(stmt, buffer).writes]
    if not touching:
        raise ScheduleError(primitive, target, f"{where} does not write {buffer.name}", block)
    writer = first[touching[0]]
    analyzer = outer_analyzer(index, realize)
    tile = _store_nest_box(writer, buffer, analyzer)
    for stmt in (*init_stmts, *stmts):
        if stmt is not writer or tile is None:
            if direct_access(stmt, buffer):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the block writes a tile of {buffer.name} and accesses it outside a child block (other than "
                    "a nest of loops around one store that writes it first); cannot prove it writes the whole "
                    "tile (the copy back would copy elements it did not write)",
                    stmt,
                )
    if tile is None:
        tile, child_name = _child_tile(index, realize, writer, buffer, where, primitive)
        name = f"its child block {child_name!r}"
    else:
        name = "the loop nest that stores to it first"
    dim = first_not_contained(tile, region.region, analyzer)
    if dim is not None:
        raise ScheduleError(
            primitive,
            target,
            f"cannot prove {name} writes all of the tile of {buffer.name}: dimension {dim} is "
            f"{show_range(region.region[dim])}, it writes {show_range(tile[dim])}",
            block,
        )
    after = [*first[touching[0] + 1 :], *(stmts if init_stmts else [])]
    readers = [
        r for stmt in after for r in index.child_blocks(stmt) if any(read.buffer is buffer for read in r.block.reads)
    ]
    if readers:
        read = access_region(index, realize, readers, buffer, primitive)
        dim = first_not_contained(tile, read, analyzer)
        if dim is not None:
            raise ScheduleError(
                primitive,
                target,
                f"the block reads {show_range(read[dim])} of dimension {dim} of {buffer.name}, outside the tile "
                f"{show_range(tile[dim])} "
                f"{name} writes first; the cache would not hold those values",
                block,
            )
    return bool(init_stmts)


def _child_tile(
    index: TreeIndex, realize: BlockRealize, writer: Stmt, buffer: Buffer, where: str, primitive: str
) -> tuple[list[Range], str]:
    """The box the one child block in ``writer`` that touches ``buffer`` writes over its loops
    in the block of ``realize``, checked to write one element per instance before touching
    anything else of ``buffer``."""
    target = block_target(realize)
    writers = [
        w for w in index.child_blocks(writer) if accesses(w.block, buffer).reads or accesses(w.block, buffer).writes
    ]
    if len(writers) != 1 or not any(w.buffer is buffer for w in writers[0].block.writes):
        raise ScheduleError(
            primitive,
            target,
            f"the block writes a tile of {buffer.name}; the first of the statements of {where} to touch "
            f"{buffer.name} must be one child block that writes it",
            realize.block,
        )
    child = writers[0]
    child_regions = [w for w in child.block.writes if w.buffer is buffer]
    if len(child_regions) != 1 or not _is_point(child_regions[0]):
        raise ScheduleError(
            primitive,
            target,
            f"child block {child.block.name!r} must write one element of {buffer.name} per instance",
            child.block,
        )
    for node in path_to_scope(index, child, realize):
        if not isinstance(node, (For, SeqStmt)):
            raise ScheduleError(
                primitive, target, f"child block {child.block.name!r} is under a {type(node).__name__}", node
            )
    child_by_init = _point_write_init(primitive, child, buffer, child_regions[0])
    return _written_box(index, realize, child, child_regions[0], primitive, child_by_init), child.block.name


def _store_nest_box(stmt: Stmt, buffer: Buffer, analyzer: Analyzer) -> list[Range] | None:
    """The box ``stmt`` writes when it is a nest of loops around one store to ``buffer`` that
    does not read it (``for j in range(32): C[vi_o, j] = 0.0``, the init ``blockize`` makes),
    whose indices sweep a dense box; None otherwise."""
    loops = []
    node = stmt
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    if not isinstance(node, BufferStore) or node.buffer is not buffer:
        return None
    if any(accesses(expr, buffer).reads for expr in (node.value, *node.indices)):
        return None
    points = [Range(index, const(1, index.dtype)) for index in node.indices]
    union = union_over_loops(points, loops, analyzer)
    return None if isinstance(union, str) else union


def _stmts_of(stmt: Stmt) -> list[Stmt]:
    return list(stmt.stmts) if isinstance(stmt, SeqStmt) else [stmt]


def _copy_back_box(
    index: TreeIndex,
    scope: BlockRealize,
    realize: BlockRealize,
    region: BufferRegion,
    primitive: str,
    by_init: bool,
    within: Stmt | None = None,
    child_predicate: PrimExpr | None = None,
) -> list[Range]:
    """The exact box of elements the instances of ``realize`` write over the loops inside
    ``scope`` (or inside ``within``): ``_written_box`` for one element per instance, the union
    of the tiles for a tile per instance. With ``by_init`` (a tile written first by the
    init), the instances that touch an element are those of some values of the loops that
    feed the tile's start, with every other loop free: the first of them runs the init when
    the reduction iterators are at their start at the first iteration of those other loops."""
    if _is_point(region):
        return _written_box(index, scope, realize, region, primitive, by_init, within, child_predicate)
    target = block_target(realize)
    if within is None:
        loops = index.loops_above(realize)
    else:
        loops = [node for node in reversed(path_to_scope(index, realize, scope, within)) if isinstance(node, For)]
    if not _is_true(realize.predicate):
        raise ScheduleError(
            primitive,
            target,
            f"the block writes a tile of {region.buffer.name} under a T.where; cannot prove which tiles it writes",
            realize,
        )
    bindings = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    tiles = [
        Range(simplify(substitute(rng.min, bindings)), simplify(substitute(rng.extent, bindings)))
        for rng in region.region
    ]
    analyzer = outer_analyzer(index, scope, within)
    union = union_over_loops(tiles, loops, analyzer)
    if isinstance(union, str):
        raise ScheduleError(
            primitive,
            target,
            f"cannot prove the instances write a dense box of {region.buffer.name} ({union})",
            realize,
        )
    if by_init:
        fed = set().union(*(uses_vars(tile.min, [loop.loop_var for loop in loops]) for tile in tiles))
        at_first = {loop.loop_var: loop.min for loop in loops if loop.loop_var not in fed}
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
            if iter_var.kind is not IterKind.REDUCE:
                continue
            if uses_vars(value, fed) or not analyzer.can_prove_equal(
                simplify(substitute(value, at_first)), iter_var.dom.min
            ):
                raise ScheduleError(
                    primitive,
                    target,
                    f"cannot prove the first instance to touch each tile of {region.buffer.name} runs the init "
                    f"(reduction iterator {iter_var.var.name} = {value} is not {iter_var.dom.min} at the first "
                    "iteration of the loops that feed no index)",
                )
    return union


def _is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value != 0


def _check_reads_written(
    index: TreeIndex,
    scope: BlockRealize,
    realize: BlockRealize,
    consumer: BlockRealize,
    region: BufferRegion,
    primitive: str,
    by_init: bool,
    child_predicate: PrimExpr | None = None,
) -> None:
    """Check that ``consumer`` can read the cache: it comes after the block in a statement
    sequence they share, nothing else writes the buffer from the block to it, and in each
    iteration of the loops around that sequence it reads only what the block wrote in it."""
    buffer = region.buffer
    target = block_target(consumer)
    name = consumer.block.name
    around = {id(node) for node in [consumer, *index.ancestors(consumer)]}
    common = next(node for node in index.ancestors(realize) if id(node) in around)
    if not isinstance(common, SeqStmt):
        raise ScheduleError(
            primitive, target, f"consumer block {name!r} is not after the block in a statement sequence", consumer
        )
    at_block, at_consumer = child_position(index, common, realize), child_position(index, common, consumer)
    if at_consumer < at_block:
        raise ScheduleError(
            primitive,
            target,
            f"consumer block {name!r} runs before the block; it would read the cache before the block writes it",
        )
    between = common.stmts[at_block : at_consumer + 1]
    if any(accesses(stmt, buffer, skip=frozenset({id(realize)})).writes for stmt in between):
        raise ScheduleError(
            primitive,
            target,
            f"{buffer.name} is written between the block and consumer block {name!r}; the cache would not hold "
            "what it reads",
        )
    written = _copy_back_box(index, scope, realize, region, primitive, by_init, common, child_predicate)
    read = access_region(index, scope, [consumer], buffer, primitive, common)
    dim = first_not_contained(written, read, outer_analyzer(index, scope, common))
    if dim is not None:
        raise ScheduleError(
            primitive,
            target,
            f"cannot prove consumer block {name!r} reads only elements of {buffer.name} the block wrote before it: "
            f"it reads {show_range(read[dim])} of dimension {dim}, the block writes {show_range(written[dim])} there",
        )


def _only_at(block: Block, buffer: Buffer, point: tuple[PrimExpr, ...]) -> bool:
    """Whether every load and store of ``buffer`` in ``block`` (nested blocks: none) is at ``point``."""
    analyzer = Analyzer()
    ok = True

    class Check(IRVisitor):
        def at_point(self, indices: tuple[PrimExpr, ...]) -> bool:
            return len(indices) == len(point) and all(analyzer.can_prove_equal(a, b) for a, b in zip(indices, point))

        def visit_Block(self, nested: Block) -> None:
            nonlocal ok
            if nested is not block and accesses(nested, buffer).reads | accesses(nested, buffer).writes:
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
        if accesses(stmt.value, buffer).reads:
            return False
        return _first_access_is_store(stmt.body, buffer)
    if isinstance(stmt, BufferStore) and stmt.buffer is buffer:
        return not any(accesses(expr, buffer).reads for expr in (stmt.value, *stmt.indices))
    found = accesses(stmt, buffer)
    return False if (found.reads or found.writes) else None


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
    child_predicate: PrimExpr | None = None,
) -> list[Range]:
    """The exact box of elements the instances of ``realize`` write (see ``cache_write``), over
    the loops inside ``scope`` (or inside ``within``: the loops around it stay symbolic).
    ``child_predicate`` (in the loop variables) further limits which instances write.

    With ``by_init`` the element is first written by the init, so the first instance of each
    element (the first iteration of the loops that feed no index) must run it.
    """
    target = block_target(realize)
    if within is None:
        loops = index.loops_above(realize)
    else:
        loops = [node for node in reversed(path_to_scope(index, realize, scope, within)) if isinstance(node, For)]
    loop_of = {loop.loop_var: loop for loop in loops}
    loop_vars = set(loop_of)
    analyzer = outer_analyzer(index, scope, within)
    for loop in loops:
        if uses_vars(loop.min, loop_vars) or uses_vars(loop.extent, loop_vars):
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
        if has_load(value):
            raise not_dense(f"index {dim} is {value}, which reads memory")
        form = linear_form(value, loop_vars)
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
            base = base + const(coeff, value.dtype) * as_dtype(loop.min, value)
            extent = as_dtype(loop.extent, value)
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
            if uses_vars(value, set(dim_of)) or not analyzer.can_prove_equal(
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
    predicate = realize.predicate if child_predicate is None else And(realize.predicate, child_predicate)
    for cond in _conjuncts(predicate):
        used = uses_vars(cond, loop_vars)
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
    if uses_vars(bound, loop_vars):
        return None
    form = linear_form(side, loop_vars)
    coeffs, base = forms[dim]
    if form is None or form[0] != coeffs:
        return None
    # side = form_base + sum; index = base + sum; side < bound  <=>  index < bound - form_base + base.
    limit = bound - form[1] + base
    if inclusive:
        limit = limit + const(1, limit.dtype)
    return dim, simplify(limit)
