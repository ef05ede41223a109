"""Schedule primitives: compute_at, reverse_compute_at.

Both move a block of one block scope under a loop of the same scope and regenerate its loops
from a region analysis:

- ``compute_at`` puts a producer at the start of the loop's body. At each iteration it
  computes the region of its buffer that the consumers under the loop read in that iteration
  (their read regions, relaxed over the loops inside the target loop; the target loop and the
  loops around it stay symbolic), mapped back to the producer's iterators through its write
  index. A buffer in ``shared`` memory is relaxed over the thread loops around the target loop
  too (``threadIdx``, ``vthread``): the threads of a block share it, so each iteration
  computes what all of them read, as TVM does.
- ``reverse_compute_at`` puts a consumer at the end of the loop's body. At each iteration it
  computes every instance whose read window of the produced buffer meets what the producers
  under the loop wrote in that iteration. An instance is thus computed (again) at the last
  iteration that writes one of its inputs, when all of them are final; an earlier computation
  of it (a stencil window only partly written, a reduction loop as the target) is
  overwritten then.

Both recompute an instance when regions of two iterations overlap, which is why the moved
block must be idempotent: spatial and not reading what it writes, or a reduction with
``T.init`` (its reduction loops are regenerated whole inside the new loops, so a recomputed
instance starts again from its init).

The rules are conservative: the moved block must write (compute_at) or read
(reverse_compute_at) its buffer at ``iterator + offset`` per dimension (compute_at also
``offset - iterator``; reverse_compute_at also any one-to-one quasi-affine index, inverted with
``inverse_iter_map``; reverse_compute_at:
each buffer produced under the loop, and those buffers must feed the same instances per
iteration; an iterator found only in other index forms is accepted over dimensions each
iteration writes whole); a ``T.where`` must bound iterators to their domains
(expressed through one binding each) or skip instances over loops that are iterators' whole
bindings (a partial last vector: ``k_0 * 16 + k_1 < 750``), which is kept over the
iterators. Coverage in reverse_compute_at is checked on the hull of the producers' writes,
so a producer that leaves holes inside that hull is trusted to leave them unread.

Regenerated loops are named ``ax0, ax1, ...``, one per block iterator in the block's iterator
order; a loop of extent 1 is left out unless ``preserve_unit_loops``. A spatial iterator runs
over ``region.min + ax``; where the region may leave the iterator's domain (or its extent is
symbolic and only bounded), a ``T.where`` keeps the instances inside.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from tir.analysis.tree import TreeIndex, child_stmts, replace_stmt
from tir.analysis.verify._context import Program, is_shared_scope, is_thread_idx
from tir.analysis.verify.binding import size_vars
from tir.arith import Analyzer, eval_interval, relax_range, union_regions
from tir.arith.iter_map import detect_iter_map, inverse_iter_map
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    FloorDiv,
    For,
    ForKind,
    IntImm,
    IterKind,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    const,
    free_vars,
    substitute,
)
from tir.ir.expr import conjunction
from tir.ir.stmt import seq
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, LoopRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._init_order_util import check_init_order
from tir.schedule.primitives._location_util import (
    DimMap,
    blocks_in_order,
    context_dom,
    detachable_nest,
    is_true,
    iter_kinds,
    iterator_predicate,
    point_index_map,
    reads_buffer,
    region_point_indices,
    writes_buffer,
)
from tir.schedule.primitives.annotate import check_parallel_loops_above, with_annotations

# An iterator's new range: (min, extent), or None for its whole domain.
IterRange = tuple[PrimExpr, PrimExpr] | None


@dataclass
class _Plan:
    """Everything a checked compute_at / reverse_compute_at needs to rewrite the program."""

    realize: BlockRealize
    loop: For
    nest: Stmt  # the block's current loop nest, to take out
    ranges: list[IterRange]  # one per block iterator
    outer_dom: dict[Var, Range]  # the target loop and every loop around it
    kept: PrimExpr  # the predicate's gaps over the block's iterators (``iterator_predicate``)


def compute_at(
    func: PrimFunc,
    block_name: str,
    loop_var: Var,
    preserve_unit_loops: bool = False,
    index: int = -1,
    *,
    crossing: Collection[str] = (),
) -> PrimFunc:
    """Move a producer block under a loop of its consumers, computing at each iteration of the
    loop exactly the region of its buffer that the consumers under the loop read there.

    Preconditions (each refused with a ScheduleError, nothing changed):

    - the loop is not inside the block, the block is not already under the loop, and both are
      in the same block scope; the loop comes after the block in program order;
    - the block writes exactly one buffer; that buffer is not a function parameter (every
      element of an output must stay computed) and is read by no block outside the scope; no
      other block of the scope writes it;
    - the block has consumers in the scope and all of them are under the loop;
    - no block between the block and the loop, and no block under the loop, writes a buffer
      the block reads (it would read newer values once moved);
    - the block is idempotent: spatial and not reading its buffer, or a reduction with
      ``T.init``; it has no opaque iterator; its ``T.where`` (if any) only bounds iterators to
      their domains;
    - its write index is one iterator plus an offset (or an offset minus one iterator, ``Y[9 -
      vi]``) per dimension (free of other iterators), each spatial iterator in exactly one
      dimension, no reduction iterator in it; or, for a
      block that writes a tile per instance (a blockized one, or a row), each dimension of its
      write region is a tile ``[c * v + offset, c * v + offset + c)`` of one spatial iterator
      ``v`` or free of iterators, each spatial iterator in exactly one dimension;
    - the extent of every needed region is a constant or has a constant bound;
    - the new bindings are quasi-affine, independent and without gaps over the loops (what
      ``tir.analysis.verify`` asks): a strided read ``R[vi * 3 + 1]`` or a clamped one
      ``R[T.min(vi, 7)]`` would bind the block to ``i * 3 + 1`` or ``T.min(i, 7)``;
    - a parallel loop above the new position keeps independent iterations (as ``parallel``
      checks them);
    - a reduction's init still runs before every update of the same output element (its reduce
      iterators get loops of their own inside the target loop, so this holds unless the target
      loop itself fuses spatial with reduce iterators out of order; see ``reorder``);
    - ``index`` (TVM's): -1 puts the block just before the first statement of the loop's body
      that reads what it writes, -2 just after the last one that writes what it reads, ``k >= 0``
      before statement ``k`` (``len(body)``: after all), between those two.

    ``crossing`` (not a Schedule argument): names of blocks that may now run before the block
    although they write what it reads -- ``reindex_cache_read`` moves a copy made before the
    statement past that statement's writers, on purpose.

    Before (``compute_at(B, i)``)::

        for i in range(17):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0
        for i in range(16):
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = B[vi] + B[vi + 1]

    After::

        for i in range(16):
            for ax0 in range(2):
                with T.block("B"):
                    vi = T.spatial_axis(17, i + ax0)
                    B[vi] = A[vi] * 2.0
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = B[vi] + B[vi + 1]
    """
    tree = TreeIndex(func)
    plan = _plan(tree, block_name, loop_var, reverse=False, crossing=frozenset(crossing))
    position = _insertion_point("compute_at", plan, index)
    result = _rewrite(tree, plan, preserve_unit_loops, position)
    check_parallel_loops_above(result, block_name, "compute_at")
    check_init_order("compute_at", block_target(plan.realize), func, result, [block_name])
    return result


def reverse_compute_at(
    func: PrimFunc,
    block_name: str,
    loop_var: Var,
    preserve_unit_loops: bool = False,
    index: int = -1,
    *,
    crossing: Collection[str] = (),
) -> PrimFunc:
    """Move a consumer block under a loop of its producers, computing at each iteration of the
    loop the instances whose input the producers under the loop have just written.

    Preconditions (each refused with a ScheduleError, nothing changed):

    - the loop is not inside the block, the block is not already under the loop, and both are
      in the same block scope; the loop comes before the block in program order;
    - the block has producers in the scope, all of them under the loop, writing one buffer
      that the block reads (one produced buffer only);
    - no block under the loop or between the loop and the block reads or writes a buffer the
      block writes (it would see the block's results early);
    - the block is idempotent: spatial and not reading what it writes, or a reduction with
      ``T.init``; it has no opaque iterator; its ``T.where`` (if any) only bounds iterators to
      their domains;
    - it reads the produced buffer at one element per instance, each spatial iterator being
      ``iterator + offset`` in some dimension or absent from the index; or the index is a
      one-to-one quasi-affine map of the spatial iterators it uses (``temp[v // 16, v % 16]``,
      a layout change), which is inverted over what one iteration writes, the iterators'
      instances being their whole domains and the map's whole image being produced;
    - the producers under the loop write (over all its iterations) every element the block
      reads, and the extent of every region is a constant or has a constant bound;
    - a reduction block: along every dimension it reads through a reduction iterator, one
      iteration of the loop writes all the producers ever write (its whole reduction runs at
      each iteration, so it must not read elements not produced yet); or the reduction is
      split across the loop: the iterator is read at one point ``vk + offset`` of a dimension
      of which each iteration writes the next tile of a constant size (only this loop moves
      it, the tiles making up the iterator's domain), so each iteration runs the part of the
      reduction it has just produced, the init at the first. The loop is then serial or bound
      to ``threadIdx.x``; for the latter the block is annotated ``{"cross_thread_reduction":
      True}`` (as ``bind`` annotates one) and GPU lowering combines the threads or refuses;
    - the new bindings are quasi-affine, independent and without gaps over the loops;
    - a parallel loop above the new position keeps independent iterations (as ``parallel``
      checks them);
    - a reduction's init still runs before every update of the same output element (see
      ``compute_at``);
    - ``index`` (TVM's): -1 puts the block just before the first statement of the loop's body
      that reads what it writes (after all of them when none does), -2 just after the last one
      that writes what it reads, ``k >= 0`` before statement ``k``, between those two.

    ``crossing`` (not a Schedule argument): names of blocks that may now run after the block
    although they read what it writes -- ``reindex_cache_write`` moves a copy back made after
    the statement before that statement's readers, on purpose.

    Before (``reverse_compute_at(D, i)``)::

        for i, j in T.grid(16, 16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
        for i, j in T.grid(16, 16):
            with T.block("D"):
                vi, vj = T.remap("SS", i, j)
                D[vi, vj] = T.max(B[vi, vj], 0.0)

    After::

        for i in range(16):
            for j in range(16):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = A[vi, vj] * 2.0
            for ax0 in range(16):
                with T.block("D"):
                    vi, vj = T.remap("SS", i, ax0)
                    D[vi, vj] = T.max(B[vi, vj], 0.0)
    """
    tree = TreeIndex(func)
    plan = _plan(tree, block_name, loop_var, reverse=True, crossing=frozenset(crossing))
    position = _insertion_point("reverse_compute_at", plan, index)
    result = _rewrite(tree, plan, preserve_unit_loops, position)
    split = any(
        rng is not None and iv.kind is IterKind.REDUCE for iv, rng in zip(plan.realize.block.iter_vars, plan.ranges)
    )
    if split and plan.loop.kind is ForKind.THREAD_BINDING:
        # The loop's threads each run a part of the reduction (_split_reduction): a cross-thread
        # reduction, as ``bind`` marks one.
        moved_tree = TreeIndex(result)
        moved = moved_tree.blocks[block_name]
        result = with_annotations(moved_tree, moved, {**moved.block.annotations, "cross_thread_reduction": True})
    check_parallel_loops_above(result, block_name, "reverse_compute_at")
    check_init_order("reverse_compute_at", block_target(plan.realize), func, result, [block_name])
    return result


def check_compute_at(
    func: PrimFunc, block_name: str, loop_var: Var, reverse: bool = False, index: TreeIndex | None = None
) -> None:
    """Raise the ``ScheduleError`` that ``compute_at`` (``reverse_compute_at`` when ``reverse``)
    of ``block_name`` at ``loop_var`` would raise, running only its checks (the program is built
    only under a parallel loop, whose independence is checked on the result). ``index``: the
    program's ``TreeIndex`` when the caller has one."""
    index = index if index is not None else TreeIndex(func)
    _plan(index, block_name, loop_var, reverse)
    loop = index.loops[id(loop_var)]
    if loop.kind is ForKind.PARALLEL or any(
        isinstance(node, For) and node.kind is ForKind.PARALLEL for node in index.ancestors(loop)
    ):
        (reverse_compute_at if reverse else compute_at)(func, block_name, loop_var)


def scope_loops(func: PrimFunc, block_name: str, index: TreeIndex | None = None) -> list[Var]:
    """The loop variables of the loops in ``block_name``'s scope (not inside nested blocks), in
    program order: the positions ``sample_compute_location`` decisions name."""
    index = index if index is not None else TreeIndex(func)
    realize = index.blocks.get(block_name)
    if realize is None:
        return []
    return [loop.loop_var for loop in _loops_in_order(index, index.scope_block(realize))]


def compute_location_candidates(func: PrimFunc, block_name: str, reverse: bool = False) -> list[Var]:
    """The loop variables of the loops that ``compute_at`` (``reverse_compute_at`` when
    ``reverse``) of ``block_name`` accepts, in program order."""
    index = TreeIndex(func)
    found = []
    for loop_var in scope_loops(func, block_name, index):
        try:
            check_compute_at(func, block_name, loop_var, reverse, index)
        except ScheduleError:
            continue
        found.append(loop_var)
    return found


def _loops_in_order(index: TreeIndex, scope: BlockRealize | None) -> list[For]:
    """Loops of ``scope`` (not inside a nested block), in program order."""
    loops: list[For] = []

    def walk(node: Stmt) -> None:
        if isinstance(node, BlockRealize):
            return
        if isinstance(node, For):
            loops.append(node)
        for child in child_stmts(node):
            walk(child)

    if scope is None:
        return loops
    walk(scope.block.body)
    return loops


# ---------------------------------------------------------------- checks


def _plan(
    index: TreeIndex, block_name: str, loop_var: Var, reverse: bool, crossing: frozenset[str] = frozenset()
) -> _Plan:
    primitive = "reverse_compute_at" if reverse else "compute_at"
    realize = find_block(index, block_name, primitive)
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError(primitive, f"loop {loop_var.name}", "no such loop")
    block = realize.block
    target = block_target(realize)

    # Where the block and the loop are.
    if index.is_ancestor(realize, loop):
        raise ScheduleError(primitive, target, f"the loop {loop_var.name} is inside the block itself", loop)
    scope = index.scope_block(realize)
    if index.scope_block(loop) is not scope:
        raise ScheduleError(
            primitive, target, f"the block and the loop {loop_var.name} are in different block scopes", loop
        )
    assert scope is not None
    if index.is_ancestor(loop, realize):
        raise ScheduleError(primitive, target, f"the block is already under the loop {loop_var.name}", loop)
    siblings = index.child_blocks(scope)
    position = next(k for k, sibling in enumerate(siblings) if sibling is realize)
    under = [k for k, sibling in enumerate(siblings) if index.is_ancestor(loop, sibling)]
    if under and not reverse and under[0] < position:
        raise ScheduleError(
            primitive,
            target,
            f"the loop {loop_var.name} comes before the block; compute_at moves a block (a producer) later, "
            f"under its consumer's loop: to move this block earlier, under its producer's loop, use "
            f"reverse_compute_at",
        )
    if under and reverse and under[-1] > position:
        raise ScheduleError(
            primitive,
            target,
            f"the loop {loop_var.name} comes after the block; reverse_compute_at moves a block (a consumer) "
            f"earlier, under its producer's loop: to move this block later, under its consumer's loop, use "
            f"compute_at",
        )

    kept = _check_movable_block(primitive, index, realize)

    if reverse:
        ranges = _reverse_ranges(primitive, index, realize, loop, siblings, position, under, crossing)
    else:
        ranges = _forward_ranges(primitive, index, realize, loop, siblings, position, under, crossing)
    nest = detachable_nest(index, realize, primitive)
    outer_dom = context_dom(index, loop)
    outer_dom[loop.loop_var] = Range(loop.min, loop.extent)
    _check_extents(primitive, target, block, ranges, outer_dom)
    plan = _Plan(realize, loop, nest, ranges, outer_dom, kept)
    _check_new_bindings(primitive, target, index, plan)
    return plan


def _check_movable_block(primitive: str, index: TreeIndex, realize: BlockRealize) -> PrimExpr:
    """Idempotent, no opaque iterator, a predicate that bounds the domain or skips instances by
    their iterators' values; returns the latter part over the iterators (``iterator_predicate``)."""
    block = realize.block
    target = block_target(realize)
    _, reduce, opaque = iter_kinds(block)
    if opaque:
        raise ScheduleError(
            primitive, target, f"the block has an opaque iterator ({opaque[0].name}); its loops cannot be regenerated"
        )
    written = [region.buffer for region in block.writes]
    if reduce and block.init is None:
        raise ScheduleError(
            primitive,
            target,
            "the block is a reduction without T.init, so recomputing an instance would accumulate twice",
        )
    if not reduce and any(reads_buffer(block, buffer) for buffer in written):
        raise ScheduleError(
            primitive,
            target,
            "the block reads a buffer it writes, so recomputing an instance would change the result",
        )
    return iterator_predicate(primitive, realize, context_dom(index, realize))


def _forward_ranges(
    primitive: str,
    index: TreeIndex,
    realize: BlockRealize,
    loop: For,
    siblings: list[BlockRealize],
    position: int,
    under: list[int],
    crossing: frozenset[str] = frozenset(),
) -> list[IterRange]:
    block = realize.block
    target = block_target(realize)
    if len(block.writes) != 1:
        names = [region.buffer.name for region in block.writes]
        raise ScheduleError(primitive, target, f"the block must write exactly one buffer, it writes {names}")
    buffer = block.writes[0].buffer
    func = index.func
    if any(param is buffer for param in func.params):
        raise ScheduleError(
            primitive,
            target,
            f"the block writes the function parameter {buffer.name}, an output whose every element must stay computed",
        )
    scope = index.scope_block(realize)
    assert scope is not None
    for other in blocks_in_order(index):
        if other is scope or index.is_ancestor(other, scope) or index.is_ancestor(scope, other):
            continue
        if reads_buffer(other.block, buffer):
            raise ScheduleError(
                primitive,
                target,
                f"buffer {buffer.name} is also read by block {other.block.name!r} outside the block's scope",
            )
    for other in siblings:
        if other is not realize and writes_buffer(other.block, buffer):
            raise ScheduleError(
                primitive, target, f"block {other.block.name!r} also writes buffer {buffer.name}", other.block.name
            )
    consumers = [other for other in siblings[position + 1 :] if reads_buffer(other.block, buffer)]
    if not consumers:
        raise ScheduleError(primitive, target, f"the block has no consumer of {buffer.name} in its scope")
    for consumer in consumers:
        if not index.is_ancestor(loop, consumer):
            raise ScheduleError(
                primitive,
                target,
                f"consumer block {consumer.block.name!r} is not under the loop {loop.loop_var.name}",
            )
    # Blocks that now run before the moved block must not write what it reads.
    inputs = [region.buffer for region in block.reads if region.buffer is not buffer]
    between = siblings[position + 1 : under[0]] + [siblings[k] for k in under]
    for other in (b for b in between if b.block.name not in crossing):
        for written in inputs:
            if writes_buffer(other.block, written):
                raise ScheduleError(
                    primitive,
                    target,
                    f"block {other.block.name!r} writes buffer {written.name}, which the block reads, "
                    "and would run before it once moved",
                )

    # The write index, inverted.
    analyzer = Analyzer()
    indices = region_point_indices(block.writes[0])
    if indices is None:
        # A blockized block writes a tile per instance: [c * v + offset, c * v + offset + c).
        return _forward_tile_ranges(primitive, target, index, realize, loop, consumers, buffer)
    simple, complex_dims = point_index_map(indices, block, analyzer)
    # A dimension written reversed, ``offset - v`` (``Y[9 - vi]``), inverts as well.
    reversed_dims: list[DimMap] = []
    own = {iv.var for iv in block.iter_vars}
    for dim in complex_dims:
        used = set(free_vars(indices[dim])) & own
        var = next(iter(used)) if len(used) == 1 else None
        offset = analyzer.simplify(indices[dim] + var) if var is not None else None
        if var is None or offset is None or set(free_vars(offset)) & own:
            raise ScheduleError(
                primitive,
                target,
                f"dimension {dim} of the write index of {buffer.name} is not one iterator plus an offset "
                "(or an offset minus one iterator)",
                indices[dim],
            )
        reversed_dims.append(DimMap(dim, var, offset))
    spatial, reduce, _ = iter_kinds(block)
    by_var: dict[Var, list[int]] = {}
    for entry in [*simple, *reversed_dims]:
        by_var.setdefault(entry.var, []).append(entry.dim)
    for var in reduce:
        if var in by_var:
            raise ScheduleError(
                primitive, target, f"the reduction iterator {var.name} appears in the write index of {buffer.name}"
            )
    for var in spatial:
        dims = by_var.get(var, [])
        if len(dims) != 1:
            where = "does not appear in" if not dims else "appears more than once in"
            raise ScheduleError(
                primitive,
                target,
                f"the iterator {var.name} {where} the write index of {buffer.name}, so the write is not invertible",
            )

    needed = _consumed_region(index, loop, consumers, buffer)
    offsets = {entry.var: (entry.dim, entry.offset) for entry in simple}
    reversed_offsets = {entry.var: (entry.dim, entry.offset) for entry in reversed_dims}
    ranges: list[IterRange] = []
    for iter_var in block.iter_vars:
        if iter_var.var in offsets:
            dim, offset = offsets[iter_var.var]
            ranges.append((needed[dim].min - offset, needed[dim].extent))
        elif iter_var.var in reversed_offsets:
            # offset - v in [min, min + extent)  <=>  v in [offset - min - extent + 1, offset - min].
            dim, offset = reversed_offsets[iter_var.var]
            ranges.append((offset - needed[dim].min - needed[dim].extent + 1, needed[dim].extent))
        else:
            ranges.append(None)
    return ranges


def _forward_tile_ranges(
    primitive: str,
    target: str,
    index: TreeIndex,
    realize: BlockRealize,
    loop: For,
    consumers: list[BlockRealize],
    buffer: Buffer,
) -> list[IterRange]:
    """The ranges of the iterators of a block that writes a tile of ``buffer`` per instance,
    each dimension ``[c * v + offset, c * v + offset + c)`` for one spatial iterator ``v``
    (``c`` a positive constant; tiles side by side, no gap, no overlap), covering what the
    consumers read in one iteration of ``loop``."""
    block = realize.block
    region = block.writes[0]
    spatial, reduce, _ = iter_kinds(block)
    own = {iv.var for iv in block.iter_vars}
    analyzer = Analyzer()
    tiles: dict[Var, tuple[int, int, PrimExpr]] = {}
    for dim, rng in enumerate(region.region):
        used = set(free_vars(rng.min)) & own
        step = rng.extent
        var = next(iter(used)) if len(used) == 1 else None
        offset = analyzer.simplify(substitute(rng.min, {var: IntImm(0, var.dtype)})) if var is not None else None
        ok = (
            var is not None
            and offset is not None
            and isinstance(step, IntImm)
            and step.value >= 1
            and not (set(free_vars(rng.extent)) & own)
            and analyzer.can_prove_equal(rng.min, var * step.value + offset)
        )
        if not used:
            continue
        if not ok or var in tiles:
            raise ScheduleError(
                primitive,
                target,
                f"the block writes more than one element of {buffer.name} per instance, and dimension {dim} of "
                "that region is not a tile [c * v + offset, c * v + offset + c) of one iterator v",
                region,
            )
        assert var is not None and offset is not None and isinstance(step, IntImm)
        tiles[var] = (dim, step.value, offset)
    for var in reduce:
        if var in tiles:
            raise ScheduleError(
                primitive, target, f"the reduction iterator {var.name} appears in the write region of {buffer.name}"
            )
    for var in spatial:
        if var not in tiles:
            raise ScheduleError(
                primitive,
                target,
                f"the iterator {var.name} does not appear in the write region of {buffer.name}, so the write is not "
                "invertible",
            )
    needed = _consumed_region(index, loop, consumers, buffer)
    ranges: list[IterRange] = []
    for iter_var in block.iter_vars:
        if iter_var.var not in tiles:
            ranges.append(None)
            continue
        dim, step, offset = tiles[iter_var.var]
        first = FloorDiv(needed[dim].min - offset, IntImm(step, offset.dtype))
        last = FloorDiv(needed[dim].min + needed[dim].extent - 1 - offset, IntImm(step, offset.dtype))
        ranges.append((first, last - first + 1))
    return ranges


def _consumed_region(index: TreeIndex, loop: For, consumers: list[BlockRealize], buffer: Buffer) -> tuple[Range, ...]:
    """The hull of what ``consumers`` read of ``buffer`` in one iteration of ``loop``."""
    region: tuple[Range, ...] | None = None
    shared_threads = _shared_thread_dom(index, loop, buffer)
    for consumer in consumers:
        bindings = dict(zip((iv.var for iv in consumer.block.iter_vars), consumer.iter_values))
        inner = {**shared_threads, **_inner_dom(index, loop, consumer)}
        for access in consumer.block.reads:
            if access.buffer is not buffer:
                continue
            relaxed = _relax(access.region, bindings, inner, buffer)
            region = relaxed if region is None else _union(region, relaxed, buffer)
    assert region is not None
    return region


def _shared_thread_dom(index: TreeIndex, loop: For, buffer: Buffer) -> dict[Var, Range]:
    """Ranges of the thread loops (``threadIdx.*``, ``vthread*``) at and around ``loop``, whose
    threads share one copy of ``buffer`` when it is in shared memory; none otherwise."""
    if not is_shared_scope(buffer):
        return {}
    return {
        node.loop_var: Range(node.min, node.extent) for node in [loop, *index.loops_above(loop)] if is_thread_idx(node)
    }


def _inner_dom(index: TreeIndex, loop: For, stmt: Stmt) -> dict[Var, Range]:
    """Ranges of the loops strictly between ``loop`` and ``stmt``."""
    dom: dict[Var, Range] = {}
    for node in index.ancestors(stmt):
        if node is loop:
            break
        if isinstance(node, For):
            dom[node.loop_var] = Range(node.min, node.extent)
    return dom


def _relax(
    region: tuple[Range, ...], bindings: dict[Var, PrimExpr], dom: dict[Var, Range], buffer: Buffer
) -> tuple[Range, ...]:
    return tuple(
        relax_range(Range(substitute(rng.min, bindings), substitute(rng.extent, bindings)), dom, buffer.shape[dim])
        for dim, rng in enumerate(region)
    )


def _union(a: tuple[Range, ...], b: tuple[Range, ...], buffer: Buffer) -> tuple[Range, ...]:
    merged = union_regions(a, b, buffer.shape)
    assert isinstance(merged, tuple)
    return merged


def _reverse_ranges(
    primitive: str,
    index: TreeIndex,
    realize: BlockRealize,
    loop: For,
    siblings: list[BlockRealize],
    position: int,
    under: list[int],
    crossing: frozenset[str] = frozenset(),
) -> list[IterRange]:
    block = realize.block
    target = block_target(realize)
    read_buffers: list[Buffer] = []
    for region in block.reads:
        if not any(region.buffer is seen for seen in read_buffers):
            read_buffers.append(region.buffer)
    producers = [
        other for other in siblings[:position] if any(writes_buffer(other.block, buffer) for buffer in read_buffers)
    ]
    if not producers:
        raise ScheduleError(primitive, target, "the block has no producer in its scope")
    for producer in producers:
        if not index.is_ancestor(loop, producer):
            raise ScheduleError(
                primitive,
                target,
                f"producer block {producer.block.name!r} is not under the loop {loop.loop_var.name}",
            )
    produced = [buffer for buffer in read_buffers if any(writes_buffer(p.block, buffer) for p in producers)]
    # Blocks that now run after the moved block must not touch what it writes.
    outputs = [region.buffer for region in block.writes]
    between = [siblings[k] for k in under] + siblings[under[-1] + 1 : position]
    for other in (b for b in between if b.block.name not in crossing):
        for output in outputs:
            if reads_buffer(other.block, output) or writes_buffer(other.block, output):
                raise ScheduleError(
                    primitive,
                    target,
                    f"block {other.block.name!r} accesses buffer {output.name}, which the block writes, "
                    "and would run after it once moved",
                )
    # Several produced buffers (a softmax's exponentials read the scores and the row maxima):
    # each gives the instances its iteration's writes feed; they must agree on every iterator
    # both constrain (else some instance would run before one of its inputs is written).
    merged: list[IterRange] = [None] * len(block.iter_vars)
    context = Analyzer()  # the loop's context: what the ranges are proved in
    for var, dom in context_dom(index, loop).items():
        context.bind(var, dom)
    for buffer in produced:
        ranges = _ranges_for(primitive, index, realize, loop, producers, buffer, target, context)
        for k, rng in enumerate(ranges):
            if rng is None:
                continue
            if merged[k] is None:
                merged[k] = rng
            elif not all(context.can_prove_equal(a, b) for a, b in zip(merged[k], rng, strict=True)):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the buffers it reads ({', '.join(b.name for b in produced)}) are written under the "
                    f"loop {loop.loop_var.name} for different instances of {block.iter_vars[k].var.name}",
                )
    return merged


def _ranges_for(
    primitive: str,
    index: TreeIndex,
    realize: BlockRealize,
    loop: For,
    producers: list[BlockRealize],
    buffer: Buffer,
    target: str,
    coverage: Analyzer,
) -> list[IterRange]:
    """The block's instances (a range per iterator, None: unconstrained) that read what one
    iteration of ``loop`` writes of ``buffer``; ``coverage`` knows the loop's context."""
    block = realize.block
    accesses = [access for access in block.reads if access.buffer is buffer]
    if len(accesses) != 1:
        raise ScheduleError(primitive, target, f"the block reads {buffer.name} through {len(accesses)} regions")
    access = accesses[0]
    own = {iv.var for iv in block.iter_vars}
    mins = [rng.min for rng in access.region]
    analyzer = Analyzer()
    simple, complex_dims = point_index_map(mins, block, analyzer)
    spatial, _, _ = iter_kinds(block)
    # A dimension read as [v + offset, v + offset + width) with a width free of iterators
    # constrains v; other dimensions constrain nothing (instances are then computed more often
    # than needed, never less).
    offsets: dict[Var, tuple[int, PrimExpr, PrimExpr]] = {}
    complex_vars: set[Var] = set()
    for dim in complex_dims:
        complex_vars |= set(free_vars(mins[dim])) & own
    for entry in simple:
        width = access.region[entry.dim].extent
        if set(free_vars(width)) & own:
            complex_vars.add(entry.var)
            continue
        offsets.setdefault(entry.var, (entry.dim, entry.offset, width))
    written = _produced_region(index, loop, producers, buffer, over_loop=False)
    whole = _produced_region(index, loop, producers, buffer, over_loop=True)
    # Every element the block reads (its iterators sweeping their bindings, within their
    # domains) must be written under the loop at some iteration.
    sweep = {lp.loop_var: Range(lp.min, lp.extent) for lp in index.loops_above(realize)}
    for var in spatial:
        if var not in offsets and var in complex_vars:
            # Unconstrained is still exact when every dimension it indexes is written whole by
            # each iteration (a row reduction's lane partials, ``j0 * 16 + j1``, after a tile
            # of whole rows).
            dims = [d for d, index_min in enumerate(mins) if var in free_vars(index_min)]
            if not all(
                coverage.can_prove_equal(written[d].min, 0) and coverage.can_prove_equal(written[d].extent, extent)
                for d, extent in ((d, buffer.shape[d]) for d in dims)
            ):
                inverted = _inverted_ranges(index, realize, access, written, whole, coverage)
                if inverted is not None:
                    _check_whole_reduction(primitive, target, loop, block, access, written, whole, coverage)
                    return inverted
                raise ScheduleError(
                    primitive,
                    target,
                    f"the iterator {var.name} appears in the read region of {buffer.name} only in a form that "
                    "cannot be inverted",
                    access,
                )
    split = _split_reduction(loop, block, offsets, written, whole, coverage, set(context_dom(index, loop)))
    _check_whole_reduction(primitive, target, loop, block, access, written, whole, coverage, frozenset(split))
    ranges: list[IterRange] = []
    for iter_var, binding in zip(block.iter_vars, realize.iter_values):
        if iter_var.var in split:
            ranges.append(split[iter_var.var])
            continue
        if iter_var.var not in offsets or iter_var.var not in spatial:
            ranges.append(None)
            continue
        dim, offset, width = offsets[iter_var.var]
        low, high = eval_interval(binding, sweep)
        dom_low, dom_high = iter_var.dom.min, iter_var.dom.min + iter_var.dom.extent - 1
        # max(low, dom_low) .. min(high, dom_high), or a provable superset of it.
        low = low if coverage.can_prove(low >= dom_low) else dom_low
        high = high if coverage.can_prove(high <= dom_high) else dom_high
        total = whole[dim]
        if not (
            coverage.can_prove(total.min <= low + offset)
            and coverage.can_prove(high + offset + width <= total.min + total.extent)
        ):
            raise ScheduleError(
                primitive,
                target,
                f"the producers under the loop {loop.loop_var.name} do not write every element of "
                f"{buffer.name} the block reads (dimension {dim})",
            )
        # Every instance whose read region meets what this iteration wrote.
        ranges.append((written[dim].min - offset - width + 1, written[dim].extent + width - 1))
    return ranges


def _inverted_ranges(
    index: TreeIndex,
    realize: BlockRealize,
    access: BufferRegion,
    written: tuple[Range, ...],
    whole: tuple[Range, ...],
    coverage: Analyzer,
) -> list[IterRange] | None:
    """The instances that read what one iteration writes, for a one-element read whose index
    is a one-to-one quasi-affine map of the spatial iterators it uses (``temp[v // 16, v %
    16]``, a layout change): each iterator is the inverse map evaluated over the written box,
    which holds every instance whose element this iteration writes (an instance whose element
    comes later is recomputed then). None when the read is not such a map, when the
    iterators' instances are not their whole domains, or when the producers do not write the
    whole image of the map."""
    block = realize.block
    indices = region_point_indices(access)
    if indices is None:
        return None
    spatial, _, _ = iter_kinds(block)
    used = set().union(*(free_vars(i) for i in indices))
    own = {iv.var for iv in block.iter_vars}
    if (used & own) - set(spatial):
        return None  # a reduction iterator's digits would be mixed into spatial ones
    dom = {iv.var: iv.dom for iv in block.iter_vars if iv.var in used}
    if not dom:
        return None
    detected = detect_iter_map(indices, dom, True, "bijective")
    if not detected.ok:
        return None
    # The read elements (the whole image box) must all be written under the loop.
    for image, total in zip(detected.ranges, whole, strict=True):
        if not (
            coverage.can_prove(total.min <= image.min)
            and coverage.can_prove(image.min + image.extent <= total.min + total.extent)
        ):
            return None
    # The ranges below are clipped to the domains only, so the block's instances must be
    # its iterators' whole domains (as its loops sweep them).
    sweep = {lp.loop_var: Range(lp.min, lp.extent) for lp in index.loops_above(realize)}
    for iter_var, binding in zip(block.iter_vars, realize.iter_values):
        if iter_var.var not in dom:
            continue
        low, high = eval_interval(binding, sweep)
        if not (
            coverage.can_prove_equal(low, iter_var.dom.min)
            and coverage.can_prove_equal(high, iter_var.dom.min + iter_var.dom.extent - 1)
        ):
            return None
    outputs = [Var(f"index{dim}", index_expr.dtype) for dim, index_expr in enumerate(indices)]
    inverse = inverse_iter_map(detected, outputs)
    box = dict(zip(outputs, written, strict=True))
    ranges: list[IterRange] = []
    for iter_var in block.iter_vars:
        if iter_var.var not in dom:
            ranges.append(None)
            continue
        low, high = eval_interval(inverse[iter_var.var], box)
        ranges.append((low, high - low + 1))
    return ranges


def _split_reduction(
    loop: For,
    block: Block,
    offsets: dict[Var, tuple[int, PrimExpr, PrimExpr]],
    written: tuple[Range, ...],
    whole: tuple[Range, ...],
    analyzer: Analyzer,
    outer_vars: set[Var],
) -> dict[Var, tuple[PrimExpr, PrimExpr]]:
    """The reduce iterators whose reduction can be split across the loop's iterations, each
    with the part one iteration runs: ``{vk: (min, extent)}``.

    A reduce iterator ``vk`` read at one point ``vk + offset`` of a dimension of which one
    iteration of the loop writes the tile ``[c * loop + d, +c)`` (only the loop moves it, by
    exactly its extent ``c``), the tiles over the loop making up the iterator's whole domain:
    then every instance runs exactly once, in the order of ``vk``, the init at the first one
    (``check_init_order`` checks that on the result), and what an iteration reads is what it
    has just written. This is the reduction an rfactor write-back computes under the loop of
    its partials. The loop must run its iterations one after another: serial, or ``threadIdx.x``,
    whose threads lowering combines as a cross-thread reduction (the caller annotates the
    block); bound to other threads, parallel or vectorized it would race on the output."""
    if loop.kind is not ForKind.SERIAL and not (
        loop.kind is ForKind.THREAD_BINDING and loop.thread_tag == "threadIdx.x"
    ):
        return {}
    _, reduce, _ = iter_kinds(block)
    doms = {iv.var: iv.dom for iv in block.iter_vars}
    split: dict[Var, tuple[PrimExpr, PrimExpr]] = {}
    for var in reduce:
        if var not in offsets:
            continue
        dim, offset, width = offsets[var]
        if not (isinstance(width, IntImm) and width.value == 1):
            continue
        part, total, dom = written[dim], whole[dim], doms[var]
        step = analyzer.simplify(substitute(part.min, {loop.loop_var: loop.loop_var + 1}) - part.min)
        if not (isinstance(part.extent, IntImm) and analyzer.can_prove_equal(step, part.extent)):
            continue
        if set(free_vars(part.min)) & outer_vars:
            continue  # a loop around it moves the tile too: its tiles might overlap
        if any(loop.loop_var in free_vars(rng.min) for d, rng in enumerate(written) if d != dim):
            continue  # the loop walks another dimension too: some instances would never run
        if not (
            analyzer.can_prove_equal(total.min, dom.min + offset)
            and analyzer.can_prove_equal(total.extent, dom.extent)
            and analyzer.can_prove_equal(loop.extent * part.extent, dom.extent)
            and analyzer.can_prove(part.extent < total.extent)
        ):
            continue
        split[var] = (part.min - offset, part.extent)
    return split


def _check_whole_reduction(
    primitive: str,
    target: str,
    loop: For,
    block: Block,
    access: BufferRegion,
    written: tuple[Range, ...],
    whole: tuple[Range, ...],
    analyzer: Analyzer,
    split: frozenset[Var] = frozenset(),
) -> None:
    """A reduction moved under the loop runs its whole reduction (from ``T.init``) at every
    iteration that writes some of its input. Along a dimension it reads through a reduction
    iterator, one iteration must therefore write everything the producers ever write: where
    it writes less (the loop walks that dimension), the reduction would sum elements not yet
    produced, unless ``_split_reduction`` found the reduction can be split across the loop
    (the iterators in ``split``)."""
    _, reduce, _ = iter_kinds(block)
    if not reduce:
        return
    reduce_set = set(reduce) - split
    for dim, rng in enumerate(access.region):
        if not (set(free_vars((rng.min, rng.extent))) & reduce_set):
            continue
        got, total = written[dim], whole[dim]
        if analyzer.can_prove(got.min <= total.min) and analyzer.can_prove(
            total.min + total.extent <= got.min + got.extent
        ):
            continue
        part = f"[{analyzer.simplify(got.min)}, {analyzer.simplify(got.min + got.extent)})"
        every = f"[{analyzer.simplify(total.min)}, {analyzer.simplify(total.min + total.extent)})"
        # Splitting the reduction across the loop's iterations instead (each reducing its own
        # part) is exact only for a serial loop; bound to threads, they would all accumulate
        # into the same outputs at once.
        concurrent = (
            f"; splitting it across the iterations instead would have the threads of {loop.thread_tag} "
            f"accumulate into {', '.join(w.buffer.name for w in block.writes)} concurrently"
            if loop.thread_tag
            else ""
        )
        raise ScheduleError(
            primitive,
            target,
            f"the block is a reduction over dimension {dim} of {access.buffer.name}, but one iteration of the loop "
            f"{loop.loop_var.name} produces only part of that dimension ({part} of {every}); the reduction would read elements not produced yet"
            f"{concurrent}. Move it under a loop outside that dimension",
            access,
        )


def _produced_region(
    index: TreeIndex, loop: For, producers: list[BlockRealize], buffer: Buffer, over_loop: bool
) -> tuple[Range, ...]:
    """The hull of what ``producers`` write of ``buffer`` in one iteration of ``loop``; with
    ``over_loop``, over every iteration of it and of the loops around it in the scope."""
    region: tuple[Range, ...] | None = None
    for producer in producers:
        bindings = dict(zip((iv.var for iv in producer.block.iter_vars), producer.iter_values))
        dom = _inner_dom(index, loop, producer)
        if over_loop:
            for outer in [*index.loops_above(loop), loop]:
                dom[outer.loop_var] = Range(outer.min, outer.extent)
        for access in producer.block.writes:
            if access.buffer is not buffer:
                continue
            relaxed = _relax(access.region, bindings, dom, buffer)
            region = relaxed if region is None else _union(region, relaxed, buffer)
    assert region is not None
    return region


def _check_extents(
    primitive: str, target: str, block: Block, ranges: list[IterRange], outer_dom: dict[Var, Range]
) -> None:
    analyzer = Analyzer()
    for var, dom in outer_dom.items():
        analyzer.bind(var, dom)
    for iter_var, rng in zip(block.iter_vars, ranges):
        extent = iter_var.dom.extent if rng is None else rng[1]
        # A symbolic extent that no loop changes (a size, ``n``) gives a loop of that extent.
        if _extent_bound(analyzer, extent) is None and set(free_vars(extent)) & set(outer_dom):
            raise ScheduleError(
                primitive,
                target,
                f"the region of iterator {iter_var.var.name} has extent {extent}, which has no constant bound",
            )


def _extent_bound(analyzer: Analyzer, extent: PrimExpr) -> int | None:
    extent = analyzer.simplify(extent)
    if isinstance(extent, IntImm):
        return extent.value
    bound = analyzer.const_int_bound(extent)
    if not bound.is_bounded:
        return None
    return max(int(bound.max_value), 0)


# ---------------------------------------------------------------- rewrite


def _body_items(loop: For) -> tuple[Stmt, ...]:
    """The statements of a loop's body, in order (one when it is not a sequence)."""
    return loop.body.stmts if isinstance(loop.body, SeqStmt) else (loop.body,)


def _insertion_point(primitive: str, plan: _Plan, index: int) -> int:
    """Where among the statements of the loop's body the block goes, from TVM's ``index``. The
    dependences allow the points from just after the last statement that writes what the block
    reads (its producers) to just before the first statement that reads what it writes (its
    consumers): -1 (the default) is the last of them, -2 the first, ``k >= 0`` the point before
    statement ``k`` (``len(body)``: after all), which must lie between the two. A point outside
    them is refused: the block would run after its consumer, or before its producer."""
    items = _body_items(plan.loop)
    block = plan.realize.block
    target = block_target(plan.realize)
    outputs = [region.buffer for region in block.writes]
    inputs = [region.buffer for region in block.reads]

    def feeds(stmt: Stmt) -> bool:  # holds a block that reads what the moved block writes
        return any(any(reads_buffer(b, out) for out in outputs) for b in _blocks_within(stmt))

    def fed_by(stmt: Stmt) -> bool:  # holds a block that writes what the moved block reads
        return any(any(writes_buffer(b, inp) for inp in inputs) for b in _blocks_within(stmt))

    first = max((k + 1 for k, item in enumerate(items) if fed_by(item)), default=0)
    last = min((k for k, item in enumerate(items) if feeds(item)), default=len(items))
    loop_name = plan.loop.loop_var.name
    if first > last:
        raise ScheduleError(
            primitive,
            target,
            f"in the body of the loop {loop_name}, statement {last} reads what the block writes and statement "
            f"{first - 1} writes what it reads: no point in between",
            plan.loop,
        )
    if index == -1:
        return last
    if index == -2:
        return first
    if not 0 <= index <= len(items):
        raise ScheduleError(
            primitive,
            f"index={index!r}",
            f"the body of the loop {loop_name} has {len(items)} statements: the index must be -1, "
            f"-2 or in [0, {len(items)}]",
            plan.loop,
        )
    if index > last:
        raise ScheduleError(
            primitive,
            target,
            f"index={index}: statement {last} of the loop {loop_name} reads what the block writes, so the block "
            f"must go before it (index in [{first}, {last}])",
            items[last],
        )
    if index < first:
        raise ScheduleError(
            primitive,
            target,
            f"index={index}: statement {first - 1} of the loop {loop_name} writes what the block reads, so the "
            f"block must go after it (index in [{first}, {last}])",
            items[first - 1],
        )
    return index


def _blocks_within(stmt: Stmt) -> list[Block]:
    """Every block in ``stmt``, nested ones included."""
    found: list[Block] = []

    def walk(node: Stmt) -> None:
        if isinstance(node, BlockRealize):
            found.append(node.block)
            if node.block.init is not None:
                walk(node.block.init)
            walk(node.block.body)
            return
        for child in child_stmts(node):
            walk(child)

    walk(stmt)
    return found


def _rewrite(tree: TreeIndex, plan: _Plan, preserve_unit_loops: bool, position: int) -> PrimFunc:
    """The program with the block's nest taken out and rebuilt before statement ``position``
    of the loop's body."""
    nest = _make_nest(plan, preserve_unit_loops)
    func = replace_stmt(tree, plan.nest, None)
    tree = TreeIndex(func)
    loop = tree.loops[id(plan.loop.loop_var)]
    items = _body_items(loop)
    body = seq(*items[:position], nest, *items[position:])
    return replace_stmt(tree, loop, loop.replace(body=body))


def _make_nest(plan: _Plan, preserve_unit_loops: bool) -> Stmt:
    """The block under new loops ``ax0, ax1, ...`` that sweep ``plan.ranges``."""
    loops, new = _nest_parts(plan, preserve_unit_loops)
    for axis, loop_extent in reversed(loops):
        new = For(axis, const(0, axis.dtype), loop_extent, ForKind.SERIAL, new)
    return new


def _nest_parts(plan: _Plan, preserve_unit_loops: bool) -> tuple[list[tuple[Var, PrimExpr]], BlockRealize]:
    """The new loops (variable, extent), outermost first, and the block rebound to them."""
    realize = plan.realize
    analyzer = Analyzer()
    for var, dom in plan.outer_dom.items():
        analyzer.bind(var, dom)
    loops: list[tuple[Var, PrimExpr]] = []
    values: list[PrimExpr] = []
    clips: list[tuple[PrimExpr, PrimExpr, PrimExpr, PrimExpr]] = []  # (value, lo, extent, dom end)
    conditions: list[PrimExpr] = []
    for iter_var, rng in zip(realize.block.iter_vars, plan.ranges):
        dom = iter_var.dom
        lo, extent = (dom.min, dom.extent) if rng is None else rng
        lo = analyzer.simplify(lo)
        extent = analyzer.simplify(extent)
        if all(isinstance(e, IntImm) for e in (lo, extent, dom.min, dom.extent)):
            # A constant range that overshoots the domain (the consumer's last vector reads
            # 752 of 750) is cut to it: exact loops, no clipping predicate.
            start = max(lo.value, dom.min.value)
            stop = min(lo.value + extent.value, dom.min.value + dom.extent.value)
            if stop > start:
                lo, extent = const(start, lo.dtype), const(stop - start, extent.dtype)
        bound = _extent_bound(analyzer, extent)
        # None: a loop-invariant symbolic extent (checked in _plan), swept exactly.
        exact = isinstance(extent, IntImm) or bound is None
        dtype = iter_var.var.dtype
        if bound == 1 and exact and not preserve_unit_loops:
            value = lo
        else:
            axis = Var(f"ax{len(loops)}", dtype)
            loop_extent = extent if bound is None else const(bound, dtype)
            loops.append((axis, loop_extent))
            analyzer.bind(axis, Range(const(0, dtype), loop_extent))
            value = lo + axis
            if not exact:
                conditions.append(axis < extent)
        if bound == 1 and exact and preserve_unit_loops:
            # The kept unit loop stays in the binding (``lo + ax``), as TVM writes it: simplifying
            # would drop the variable the caller asked to keep.
            values.append(Analyzer().simplify(analyzer.simplify(lo) + loops[-1][0]))  # the loop's range unknown here
        else:
            values.append(analyzer.simplify(value))
        if rng is not None:
            clips.append((values[-1], lo, extent, dom.min + dom.extent))
            if not analyzer.can_prove(lo >= dom.min):
                conditions.append(dom.min <= values[-1])
    for value, lo, extent, end in clips:
        if not analyzer.can_prove(lo + extent <= end):
            conditions.append(value < end)
    if not is_true(plan.kept):
        conditions.append(substitute(plan.kept, {iv.var: v for iv, v in zip(realize.block.iter_vars, values)}))
    simplified = [analyzer.simplify(condition) for condition in conditions]
    predicate = conjunction([c for c in simplified if not (isinstance(c, IntImm) and c.value != 0)])
    return loops, realize.replace(iter_values=tuple(values), predicate=predicate)


def _check_new_bindings(primitive: str, target: str, index: TreeIndex, plan: _Plan) -> None:
    """Refuse a move whose new bindings are not quasi-affine, independent and without gaps
    over the loops of the scope (what ``tir.analysis.verify`` asks of every block): a consumer
    reading ``R[vi * 3 + 1]`` would bind the moved block to ``i * 3 + 1``, one reading
    ``R[T.min(vi, 7)]`` to ``T.min(i, 7)``."""
    loops, new = _nest_parts(plan, preserve_unit_loops=False)
    sweep = {lp.loop_var: Range(lp.min, lp.extent) for lp in [*index.loops_above(plan.loop), plan.loop]}
    for axis, extent in loops:
        sweep[axis] = Range(const(0, axis.dtype), extent)
    # Sizes of parameter buffers count as at least 1, as the verifier assumes (a nest over a
    # size-0 buffer runs nothing): a fused ``n * 32`` loop's ``// n`` is then a division by a
    # positive divisor.
    sizes = size_vars(Program(index.func))
    known = {**sizes, **{var: dom for var, dom in plan.outer_dom.items() if var not in sweep}}
    judged = [value for iv, value in zip(new.block.iter_vars, new.iter_values) if iv.kind is not IterKind.OPAQUE]
    if not judged:
        return
    result = detect_iter_map(judged, sweep, new.predicate, "surjective", known)
    if not result.ok:
        bindings = ", ".join(f"{iv.var.name} = {value}" for iv, value in zip(new.block.iter_vars, new.iter_values))
        raise ScheduleError(
            primitive,
            target,
            f"at the loop {plan.loop.loop_var.name} the block would be bound as {bindings}, which is not "
            "quasi-affine and independent without gaps (" + "; ".join(result.errors) + ")",
            plan.loop,
        )


# ---------------------------------------------------------------- Schedule methods


class ComputeLocationPrimitives:
    """Schedule methods for compute_at, reverse_compute_at."""

    @doc_from(compute_at)
    def compute_at(  # type: ignore[misc]
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
    ) -> None:
        realize = self.resolve_block(block, "compute_at")  # type: ignore[attr-defined]
        for_node = self.resolve_loop(loop, "compute_at")  # type: ignore[attr-defined]
        name, var, keep, at = realize.block.name, for_node.loop_var, bool(preserve_unit_loops), int(index)
        self._apply(  # type: ignore[attr-defined]
            "compute_at",
            (block, loop),
            {"preserve_unit_loops": keep, **({"index": at} if at != -1 else {})},
            lambda func: compute_at(func, name, var, keep, at),
        )

    @doc_from(reverse_compute_at)
    def reverse_compute_at(  # type: ignore[misc]
        self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False, index: int = -1
    ) -> None:
        realize = self.resolve_block(block, "reverse_compute_at")  # type: ignore[attr-defined]
        for_node = self.resolve_loop(loop, "reverse_compute_at")  # type: ignore[attr-defined]
        name, var, keep, at = realize.block.name, for_node.loop_var, bool(preserve_unit_loops), int(index)
        self._apply(  # type: ignore[attr-defined]
            "reverse_compute_at",
            (block, loop),
            {"preserve_unit_loops": keep, **({"index": at} if at != -1 else {})},
            lambda func: reverse_compute_at(func, name, var, keep, at),
        )


__all__ = [
    "ComputeLocationPrimitives",
    "check_compute_at",
    "compute_at",
    "compute_location_candidates",
    "reverse_compute_at",
    "scope_loops",
]
