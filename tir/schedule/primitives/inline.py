"""Schedule primitives: compute_inline, reverse_compute_inline.

``compute_inline`` folds a spatial block ``B[v...] = e`` into its readers: every load
``B[x...]`` becomes ``e`` with the iterators replaced by ``x...``, and the block, the loops
that hold only it and the buffer's allocation disappear. ``reverse_compute_inline`` folds a
spatial consumer ``C[f(v)] = g(B[h(v)])`` into its producer ``B[p] = e``, which becomes
``C[f(h^-1(p))] = g(e)``.

Blocks whose bodies change get their read and write regions inferred again
(``tir.analysis.infer_block_access``), and so do the blocks around them (the root block's
signature is never inferred and stays as it is).
"""

from __future__ import annotations

import math

from tir.analysis import infer_block_access
from tir.analysis.tree import TreeIndex
from tir.arith import Analyzer, simplify
from tir.arith.int_set import eval_interval
from tir.arith.iter_map import IterMapResult, detect_iter_map, inverse_iter_map
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    FloorDiv,
    FloorMod,
    IntImm,
    IRMutator,
    IRVisitor,
    PrimExpr,
    PrimFunc,
    Ramp,
    Range,
    SeqStmt,
    Stmt,
    Var,
    free_vars,
    post_order_visit,
    substitute,
)
from tir.ir.expr import conjunction
from tir.ir.structural import structural_equal
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._location_util import (
    DimMap,
    blocks_in_order,
    check_domain_predicate,
    conjuncts,
    context_dom,
    detachable_nest,
    image_ranges,
    instance_ranges,
    is_true,
    iter_kinds,
    point_index_map,
    reads_buffer,
    shares_loop,
    swept_image,
    writes_buffer,
)


def compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    """Inline a spatial block into every block that reads its buffer, and remove it.

    Preconditions (each refused with a ScheduleError, nothing changed):

    - the block is spatial (no reduction or opaque iterator, and no ``T.init`` unless, with no
      reduction iterator, it runs at every instance and folds into the store: ``B[p] = 0``
      then ``B[p] = B[p] + e`` is ``B[p] = 0 + e``);
    - its body is one store ``B[v0, v1, ...] = value`` whose index is a permutation of its
      iterators (each exactly once), with no buffer allocated or matched in the block;
    - ``value`` does not read ``B``; ``B`` is not a function parameter (its writes are the
      function's result) and no other block writes it;
    - no block reads ``B`` before the block, reads it with a vector index, or views it through
      ``T.match_buffer``;
    - the buffers ``value`` reads keep their values from the block to the end of the program:
      every block writing one comes before the block and shares no loop with it (so inlining
      reads the same values later);
    - every block that reads ``B`` can see the buffers ``value`` reads (a cache allocated
      inside a blockized block exists only there);
    - the block and its loops can be taken out of a statement sequence.

    Before (``compute_inline(B)``)::

        B = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0
        for i in range(16):
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = B[vi] + 1.0

    After::

        for i in range(16):
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = A[vi] * 2.0 + 1.0
    """
    primitive = "compute_inline"
    index = TreeIndex(func)
    realize = _inlinable_block(index, block_name, primitive)
    block = realize.block
    target = block_target(realize)
    store = _single_store(primitive, realize)
    buffer = store.buffer
    own = [iv.var for iv in block.iter_vars]
    if not (
        len(store.indices) == len(own)
        and all(isinstance(i, Var) for i in store.indices)
        and {id(i) for i in store.indices} == {id(v) for v in own}
    ):
        raise ScheduleError(
            primitive,
            target,
            f"the store index of {buffer.name} is not a permutation of the block's iterators",
            store,
        )
    if any(param is buffer for param in func.params):
        raise ScheduleError(
            primitive, target, f"the block writes the function parameter {buffer.name}; its writes cannot be removed"
        )
    if _loads_of(store.value, buffer):
        raise ScheduleError(primitive, target, f"the stored value reads {buffer.name} itself", store)

    order = blocks_in_order(index)
    position = next(k for k, other in enumerate(order) if other is realize)
    others = [
        (k, other) for k, other in enumerate(order) if other is not realize and not index.is_ancestor(other, realize)
    ]
    for _, other in others:
        if writes_buffer(other.block, buffer):
            raise ScheduleError(primitive, target, f"block {other.block.name!r} also writes buffer {buffer.name}")
    for k, other in others:
        if k < position and reads_buffer(other.block, buffer):
            raise ScheduleError(
                primitive, target, f"block {other.block.name!r} reads buffer {buffer.name} before the block writes it"
            )
    inputs = _loaded_buffers(store.value)
    _check_inputs_stable(primitive, index, target, realize, position, others, inputs)
    _check_inputs_visible(primitive, index, target, inputs, buffer)
    _check_plain_loads(primitive, index, target, buffer)
    nest = detachable_nest(index, realize, primitive)

    def inline_load(load: BufferLoad, indices: tuple[PrimExpr, ...]) -> PrimExpr:
        vmap: dict[Var, PrimExpr] = {var: value for var, value in zip(store.indices, indices)}  # type: ignore[misc]
        return simplify(substitute(store.value, vmap))

    rewriter = _Rewriter(func, drop=nest, buffer=buffer, inline_load=inline_load)
    return _checked_result(primitive, target, func.replace(body=rewriter.visit(func.body)), buffer)


def reverse_compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    """Inline a spatial consumer into the block that produces its input, and remove it.

    Preconditions (each refused with a ScheduleError, nothing changed):

    - the block is spatial (no reduction or opaque iterator, no ``T.init`` but one that folds
      as for the producer below), its body is one
      store that does not read what it stores to, and its ``T.where`` (if any) only bounds its
      iterators to their domains;
    - among the buffers it reads, exactly one (``B``) is written by a block of the program:
      its producer, which is the only writer of ``B``, comes before it in the same block
      scope, and is itself spatial with one store ``B[...] = e`` that does not read ``B``
      (a ``T.init`` with no reduction iterator runs at every instance: ``B[p] = 0`` then
      ``B[p] = B[p] + e`` folds to ``B[p] = 0 + e``);
    - ``B`` is not a function parameter and no block but the consumer reads it;
    - the consumer reads ``B`` at one index, with no vector index, that can be inverted: each
      dimension one of its iterators plus an offset (or free of its iterators), each iterator
      in exactly one dimension; or else a bijective iterator map of its iterators onto a box
      of ``B`` (a reshape, ``B[(i * 8 + j) // 16, (i * 8 + j) % 16]``), where an iterator may
      first be widened to the next multiple of the index's divisors (``B[i // 16, i % 16]``
      for ``i`` in ``[0, 127)``) and iterators of extent 1 may go unused;
    - no block between the producer and the consumer accesses what the consumer writes;
    - the consumer and its loops can be taken out of a statement sequence;
    - every instance the consumer runs is produced: the bindings of both blocks are boxes of
      iterator values (quasi-affine, independent, without gaps), and, in each iteration of
      the loops around both, the consumer's instances read elements the producer writes
      (a padding consumer wider than its producer would lose its border).

    Where an instance of the producer maps to no instance the consumer runs (outside its
    loops' range), the producer gets a ``T.where``.

    Before (``reverse_compute_inline(C)``)::

        B = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0
        for i in range(16):
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = B[vi] + 1.0

    After::

        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                C[vi] = A[vi] * 2.0 + 1.0
    """
    primitive = "reverse_compute_inline"
    index = TreeIndex(func)
    realize = _inlinable_block(index, block_name, primitive)
    block = realize.block
    target = block_target(realize)
    store = _single_store(primitive, realize)
    output = store.buffer
    if _loads_of(store.value, output) or any(_loads_of(i, output) for i in store.indices):
        raise ScheduleError(primitive, target, f"the block reads {output.name}, which it writes", store)
    check_domain_predicate(primitive, realize, context_dom(index, realize))

    order = blocks_in_order(index)
    position = next(k for k, other in enumerate(order) if other is realize)

    def writers(buffer: Buffer) -> list[tuple[int, BlockRealize]]:
        found = [
            (k, other)
            for k, other in enumerate(order)
            if other is not realize and not _is_around(index, other, realize) and writes_buffer(other.block, buffer)
        ]
        # A block around a writer declares its writes too; the innermost writers are the ones.
        return [(k, other) for k, other in found if not any(_is_around(index, other, o) for _, o in found)]

    loaded = _loaded_buffers(store.value)
    produced = [buffer for buffer in loaded if writers(buffer)]
    if not produced:
        raise ScheduleError(primitive, target, "no block writes a buffer the block reads: it has no producer")
    if len(produced) > 1:
        names = [buffer.name for buffer in produced]
        raise ScheduleError(primitive, target, f"the block reads more than one buffer written by other blocks: {names}")
    buffer = produced[0]
    producer_entries = writers(buffer)
    if len(producer_entries) != 1:
        names = [other.block.name for _, other in producer_entries]
        raise ScheduleError(primitive, target, f"buffer {buffer.name} is written by more than one block: {names}")
    producer_position, producer = producer_entries[0]
    if producer_position > position:
        raise ScheduleError(
            primitive, target, f"the producer {producer.block.name!r} of {buffer.name} comes after the block"
        )
    if index.scope_block(producer) is not index.scope_block(realize):
        raise ScheduleError(
            primitive, target, f"the block and its producer {producer.block.name!r} are in different block scopes"
        )
    if any(param is buffer for param in func.params):
        raise ScheduleError(
            primitive, target, f"buffer {buffer.name} is a function parameter; the producer's writes to it must stay"
        )
    for other in order:
        if other is realize or other is producer or _is_around(index, other, realize):
            continue
        if reads_buffer(other.block, buffer):
            raise ScheduleError(primitive, target, f"block {other.block.name!r} also reads buffer {buffer.name}")

    producer_target = f"producer {producer.block.name!r}"
    _, reduce, opaque = iter_kinds(producer.block)
    folded = _folded_init_store(producer.block)
    if reduce or opaque or (producer.block.init is not None and folded is None):
        raise ScheduleError(
            primitive,
            target,
            f"the {producer_target} is a reduction (or has opaque iterators); only a spatial "
            "producer can take the block in",
        )
    if not isinstance(producer.block.body, BufferStore) or producer.block.alloc_buffers or producer.block.match_buffers:
        raise ScheduleError(primitive, target, f"the body of the {producer_target} is not a single store", producer)
    # An init without reduction iterators runs at every instance: folded into the one store.
    producer_store = producer.block.body if folded is None else folded
    if producer_store.buffer is not buffer or _loads_of(producer_store.value, buffer):
        raise ScheduleError(
            primitive, target, f"the {producer_target} must store to {buffer.name} once and not read it", producer_store
        )

    # The consumer's read index of B, inverted.
    loads = _loads_of(store.value, buffer)
    first = loads[0]
    if any(_is_vector(load) for load in loads):
        raise ScheduleError(primitive, target, f"the block reads {buffer.name} with a vector index", store)
    if any(not all(structural_equal(a, b) for a, b in zip(load.indices, first.indices)) for load in loads[1:]):
        raise ScheduleError(primitive, target, f"the block reads {buffer.name} at more than one index", store)
    analyzer = Analyzer()
    simple, complex_dims = point_index_map(first.indices, block, analyzer)
    used = [entry.var for entry in simple]
    own = [iv.var for iv in block.iter_vars]
    # Each iterator plus an offset, once each, inverts dimension by dimension; any other index
    # (a fused and re-split one, C[i, j, k, l] = B[(i*256 + j*8 + k) // 128, ...]) must be a
    # bijective iterator map, inverted digit by digit.
    affine = None
    if complex_dims or len(set(used)) != len(used) or set(used) != set(own):
        affine = _affine_read_map(primitive, target, first, block)
        simple = []

    # Blocks between the producer and the consumer must not see the consumer's writes early.
    outputs = [region.buffer for region in block.writes]
    for k in range(producer_position + 1, position):
        other = order[k]
        if _is_around(index, other, realize) or _is_around(index, other, producer):
            continue
        for out in outputs:
            if reads_buffer(other.block, out) or writes_buffer(other.block, out):
                raise ScheduleError(
                    primitive,
                    target,
                    f"block {other.block.name!r}, between the producer and the block, accesses buffer {out.name}",
                )
    nest = detachable_nest(index, realize, primitive)

    # v = p[d] - offset for the producer's store index p; producer instances that map to no
    # instance the consumer runs (outside its loops' range, a constant dimension that does not
    # match) are masked by a predicate.
    point = producer_store.indices
    consumer_ranges = _check_covered(primitive, index, target, realize, producer, first.indices, simple, buffer)
    conditions: list[PrimExpr] = []
    if affine is None:
        inverse: dict[Var, PrimExpr] = {entry.var: simplify(point[entry.dim] - entry.offset) for entry in simple}
        mapped = {entry.dim for entry in simple}
        for dim, index_expr in enumerate(first.indices):
            if dim not in mapped:
                conditions.append(point[dim].equal(index_expr))
    else:
        # The inverse holds for points of the map's image, a box: points outside it (and
        # inside the producer's writes) map to no instance.
        inverse = {var: simplify(value) for var, value in inverse_iter_map(affine, point).items()}
        for value, rng in zip(point, affine.ranges):
            conditions.append(rng.min <= value)
            conditions.append(value < rng.min + rng.extent)
    for iter_var, rng in zip(block.iter_vars, consumer_ranges):
        value = inverse[iter_var.var]
        conditions.append(rng.min <= value)
        conditions.append(value < rng.min + rng.extent)
    producer_dom = Analyzer()
    for iv in producer.block.iter_vars:
        producer_dom.bind(iv.var, iv.dom)
    needed = [c for c in (producer_dom.simplify(c) for c in conditions) if not is_true(c)]
    bindings = {iv.var: value for iv, value in zip(producer.block.iter_vars, producer.iter_values)}
    loop_dom = context_dom(index, producer)
    predicate_parts = [] if is_true(producer.predicate) else conjuncts(producer.predicate)
    predicate_parts += [simplify(substitute(c, bindings), loop_dom) for c in needed]
    kept: list[PrimExpr] = []
    for condition in predicate_parts:
        if not is_true(condition) and not any(structural_equal(condition, other) for other in kept):
            kept.append(condition)
    predicate = conjunction(kept)

    class ReplaceLoad(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
            if load.buffer is buffer:
                return producer_store.value
            return self.generic_visit(load)  # type: ignore[return-value]

    new_value = simplify(substitute(ReplaceLoad().visit(store.value), inverse))
    new_indices = tuple(simplify(substitute(i, inverse)) for i in store.indices)
    if is_true(predicate):
        # Without a predicate to pin it, a producer iterator the new store does not index would
        # make its instances write the same element (a cache block whose row the consumer picks
        # with an index free of its own iterators, after blockize).
        indexed = set().union(*(free_vars(i) for i in new_indices)) if new_indices else set()
        for iv, value in zip(producer.block.iter_vars, producer.iter_values):
            extent = iv.dom.extent
            if isinstance(extent, IntImm) and extent.value == 1 or not free_vars(value) or iv.var in indexed:
                continue
            raise ScheduleError(
                primitive,
                target,
                f"the iterator {iv.var.name} of the {producer_target} would index nothing the merged block "
                f"writes ({output.name}[{', '.join(str(i) for i in new_indices)}]): the block reads {buffer.name} at an index that "
                f"does not depend on its iterators where {iv.var.name} varies",
                producer,
            )
    new_block = producer.block.replace(init=None, body=BufferStore(output, new_value, new_indices))
    reads, writes = infer_block_access(new_block)
    new_block = new_block.replace(reads=reads, writes=writes)
    new_producer = producer.replace(block=new_block, predicate=predicate)
    rewriter = _Rewriter(func, drop=nest, buffer=buffer, replace={id(producer): new_producer})
    return _checked_result(primitive, target, func.replace(body=rewriter.visit(func.body)), buffer)


# ---------------------------------------------------------------- checks


def _inlinable_block(index: TreeIndex, name: str, primitive: str) -> BlockRealize:
    """The block named ``name``; the root block is refused (it has no producer or consumer to
    be inlined into)."""
    realize = find_block(index, name, primitive)
    if realize is index.func.body:
        raise ScheduleError(primitive, f"block {name!r}", "the root block cannot be inlined")
    return realize


def _single_store(primitive: str, realize: BlockRealize) -> BufferStore:
    """The block's one store; a ``T.init`` without reduction iterators folded into it."""
    block = realize.block
    target = block_target(realize)
    _, reduce, opaque = iter_kinds(block)
    if reduce or (block.init is not None and _folded_init_store(block) is None):
        raise ScheduleError(
            primitive, target, "the block is a reduction (T.init or reduction iterators); only spatial blocks inline"
        )
    if opaque:
        raise ScheduleError(primitive, target, f"the block has an opaque iterator ({opaque[0].name})")
    if not isinstance(block.body, BufferStore) or block.alloc_buffers or block.match_buffers:
        raise ScheduleError(
            primitive, target, "the block's body is not a single BufferStore (with no allocation or match_buffer)"
        )
    folded = _folded_init_store(block)
    return block.body if folded is None else folded


def _folded_init_store(block: Block) -> BufferStore | None:
    """For a block with a ``T.init`` but no reduction iterator (the init runs at every
    instance: every reduction iterator, of which there are none, is at its start), the one
    store it amounts to: ``B[p] = init`` then ``B[p] = f(B[p])`` is ``B[p] = f(init)``.

    None unless the init and the body are single stores to the same element, the init's value
    does not read that buffer and the body reads it only at that element (TVM's
    test_inline_with_reduction: a batch matmul over a unit reduction written as all-spatial).
    """
    init, body = block.init, block.body
    _, reduce, opaque = iter_kinds(block)
    if reduce or opaque or not isinstance(init, BufferStore) or not isinstance(body, BufferStore):
        return None
    buffer = init.buffer
    if body.buffer is not buffer or len(init.indices) != len(body.indices):
        return None
    if not all(structural_equal(a, b) for a, b in zip(init.indices, body.indices)):
        return None
    if _loads_of(init.value, buffer) or any(_loads_of(i, buffer) for i in (*init.indices, *body.indices)):
        return None
    for load in _loads_of(body.value, buffer):
        if len(load.indices) != len(body.indices) or not all(
            structural_equal(a, b) for a, b in zip(load.indices, body.indices)
        ):
            return None

    class Fold(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
            if load.buffer is buffer:
                return init.value
            return self.generic_visit(load)  # type: ignore[return-value]

    value = Fold().visit(body.value)
    assert isinstance(value, PrimExpr)
    return BufferStore(buffer, value, body.indices)


def _is_around(index: TreeIndex, outer: BlockRealize, inner: BlockRealize) -> bool:
    return index.is_ancestor(outer, inner)


def _loads_of(expr: PrimExpr, buffer: Buffer) -> list[BufferLoad]:
    found: list[BufferLoad] = []

    def visit(node: object) -> None:
        if isinstance(node, BufferLoad) and node.buffer is buffer:
            found.append(node)

    post_order_visit(expr, visit)
    return found


def _loaded_buffers(expr: PrimExpr) -> list[Buffer]:
    found: list[Buffer] = []

    def visit(node: object) -> None:
        if isinstance(node, BufferLoad) and not any(b is node.buffer for b in found):
            found.append(node.buffer)

    post_order_visit(expr, visit)
    return found


def _check_covered(
    primitive: str,
    index: TreeIndex,
    target: str,
    consumer: BlockRealize,
    producer: BlockRealize,
    read_index: tuple[PrimExpr, ...],
    simple: list[DimMap],
    buffer: Buffer,
) -> list[Range]:
    """Refuse unless every instance the consumer runs is produced: the consumer's instances
    must lie in the image of the producer's instances under the inverted read index, in each
    iteration of the loops around both. Returns the ranges of the consumer's iterators (its
    instances, per iteration of those loops), which the caller uses to mask the producer.

    Inlining runs the consumer's store once per producer instance, so a consumer instance
    that no producer instance maps to (a border the producer does not write, as a padding
    block's) would never run.
    """
    shared_ids = {id(loop) for loop in index.loops_above(producer)}
    shared = [loop for loop in index.loops_above(consumer) if id(loop) in shared_ids]
    consumer_ranges = instance_ranges(index, consumer, shared)
    if consumer_ranges is None:
        raise ScheduleError(
            primitive,
            target,
            "the block's instances (its bindings and T.where) are not a box of iterator values (quasi-affine, "
            "independent, without gaps) in each iteration of the loops around it and its producer, so they "
            "cannot be compared with what the producer writes",
            consumer,
        )
    producer_ranges = instance_ranges(index, producer, shared)
    producer_target = f"producer {producer.block.name!r}"
    store = producer.block.body
    assert isinstance(store, BufferStore)
    # What stays symbolic: everything outside the scope and the loops around both blocks.
    known = context_dom(index, producer)
    for loop in index.loops_above(producer):
        if id(loop) not in {id(s) for s in shared}:
            known.pop(loop.loop_var, None)
    written: list[Range] | None = None
    if producer_ranges is not None:
        producer_dom = {iv.var: rng for iv, rng in zip(producer.block.iter_vars, producer_ranges)}
        written = image_ranges(store.indices, producer_dom, known)
    else:
        # Instances that are no box (a tile grid cut by T.where) may still write one.
        bindings = {iv.var: value for iv, value in zip(producer.block.iter_vars, producer.iter_values)}
        written = swept_image(index, producer, [substitute(i, bindings) for i in store.indices], shared)
    if producer_ranges is None and written is None:
        raise ScheduleError(
            primitive,
            target,
            f"the instances of the {producer_target} (its bindings and T.where) are not a box of iterator "
            "values in each iteration of the loops around both blocks, so what it writes of "
            f"{buffer.name} cannot be compared with what the block reads",
            producer,
        )
    if written is None:
        raise ScheduleError(
            primitive,
            target,
            f"the store index of the {producer_target} does not write a box of {buffer.name} "
            "(an index with gaps, or an iterator in two dimensions)",
            store,
        )
    analyzer = Analyzer()
    for var, dom in known.items():
        analyzer.bind(var, dom)

    def inside(low: PrimExpr, last: PrimExpr, rng: Range) -> bool:
        return analyzer.can_prove(rng.min <= low) and analyzer.can_prove(last <= rng.min + rng.extent - 1)

    by_dim = {entry.dim: entry for entry in simple}
    ranges_of = {iv.var: rng for iv, rng in zip(consumer.block.iter_vars, consumer_ranges)}
    for dim, index_expr in enumerate(read_index):
        entry = by_dim.get(dim)
        if entry is None and set(free_vars(index_expr)) & set(ranges_of):
            low, last = eval_interval(index_expr, ranges_of)
            what = f"index {index_expr} in [{analyzer.simplify(low)}, {analyzer.simplify(last + 1)})"
        elif entry is None:
            low = last = index_expr
            what = f"index {index_expr}"
        else:
            rng = ranges_of[entry.var]
            low = rng.min + entry.offset
            last = rng.min + rng.extent - 1 + entry.offset
            what = f"{entry.var.name} in [{analyzer.simplify(rng.min)}, {analyzer.simplify(rng.min + rng.extent)})"
        if not inside(low, last, written[dim]):
            end = analyzer.simplify(written[dim].min + written[dim].extent)
            span = f"[{analyzer.simplify(written[dim].min)}, {end})"
            raise ScheduleError(
                primitive,
                target,
                f"the block's domain is not covered by its {producer_target}: the block reads {buffer.name} "
                f"at dimension {dim} for {what}, the producer writes only {span} there, so instances "
                "of the block would never run",
                consumer,
            )
    return consumer_ranges


def _affine_read_map(primitive: str, target: str, load: BufferLoad, block: Block) -> IterMapResult:
    """The consumer's read index as a bijective iterator map from its iterators onto a box of
    the buffer, or a refusal naming why.

    An iterator whose extent a divisor of the index does not divide (``v // 16, v % 16`` for
    ``v`` in ``[0, 127)``) is first taken at the next multiple: the map is then a bijection of
    the wider domain, and the instances the block does not run are masked by the caller.
    """
    dom = {iv.var: iv.dom for iv in block.iter_vars}
    result = detect_iter_map(list(load.indices), dom, True, "bijective")
    if result.ok:
        return result
    divisors: set[int] = set()

    def note(node: object) -> None:
        if isinstance(node, (FloorDiv, FloorMod)) and isinstance(node.b, IntImm) and node.b.value > 1:
            divisors.add(node.b.value)

    for index_expr in load.indices:
        post_order_visit(index_expr, note)
    step = math.lcm(*divisors) if divisors else 1
    padded = dict(dom)
    for var, rng in dom.items():
        extent = rng.extent
        if isinstance(extent, IntImm) and extent.value % step:
            padded[var] = Range(rng.min, IntImm(-(-extent.value // step) * step, extent.dtype))
    if padded != dom:
        wider = detect_iter_map(list(load.indices), padded, True, "bijective")
        if wider.ok:
            return wider
    raise ScheduleError(
        primitive,
        target,
        f"the read index of {load.buffer.name} is not an invertible map of the block's iterators "
        f"(each iterator plus an offset, once each, or a bijective iterator map: {result.errors[0]})",
        load,
    )


def _is_vector(load: BufferLoad) -> bool:
    return load.dtype.lanes > 1 or any(isinstance(i, Ramp) for i in load.indices)


def _check_inputs_stable(
    primitive: str,
    index: TreeIndex,
    target: str,
    realize: BlockRealize,
    position: int,
    others: list[tuple[int, BlockRealize]],
    inputs: list[Buffer],
) -> None:
    """The buffers the inlined value reads hold the same values from the block on."""
    for k, other in others:
        for buffer in inputs:
            if not writes_buffer(other.block, buffer):
                continue
            if k > position:
                raise ScheduleError(
                    primitive,
                    target,
                    f"block {other.block.name!r} writes buffer {buffer.name}, which the block reads, after the block",
                )
            if shares_loop(index, other, realize):
                raise ScheduleError(
                    primitive,
                    target,
                    f"block {other.block.name!r} writes buffer {buffer.name}, which the block reads, inside a loop "
                    "around the block too",
                )


def _check_inputs_visible(primitive: str, index: TreeIndex, target: str, inputs: list[Buffer], buffer: Buffer) -> None:
    """Every block that loads ``buffer`` can see the buffers the inlined value reads: one
    allocated (or matched) in a block, as a cache inside a blockized block, exists only there."""
    owners: dict[int, BlockRealize] = {}
    for other in blocks_in_order(index):
        if other is index.func.body:
            continue  # the root's buffers are visible everywhere
        for own in (*other.block.alloc_buffers, *(match.buffer for match in other.block.match_buffers)):
            owners[id(own)] = other
    for reader in blocks_in_order(index):
        if not _loads_directly(reader.block, buffer):
            continue
        for needed in inputs:
            owner = owners.get(id(needed))
            if owner is None or owner is reader or index.is_ancestor(owner, reader):
                continue
            raise ScheduleError(
                primitive,
                target,
                f"the block reads {needed.name}, which block {owner.block.name!r} allocates, but block "
                f"{reader.block.name!r}, which reads {buffer.name}, is outside it and cannot see {needed.name}",
            )


def _loads_directly(block: Block, buffer: Buffer) -> bool:
    """Whether the block's own statements (not a nested block's) load ``buffer``."""
    found = False

    class Finder(IRVisitor):
        def visit_BlockRealize(self, realize: BlockRealize) -> None:
            pass  # a nested block's loads are its own

        def visit_BufferLoad(self, load: BufferLoad) -> None:
            nonlocal found
            found = found or load.buffer is buffer
            self.generic_visit(load)

    finder = Finder()
    for stmt in (block.init, block.body):
        if stmt is not None:
            finder.visit(stmt)
    return found


def _check_plain_loads(primitive: str, index: TreeIndex, target: str, buffer: Buffer) -> None:
    """Every access to ``buffer`` is a scalar load: no vector index, no match_buffer view."""
    problems: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, BufferLoad) and node.buffer is buffer and _is_vector(node):
            problems.append(f"buffer {buffer.name} is read with a vector index")
        elif isinstance(node, Block) and any(match.source.buffer is buffer for match in node.match_buffers):
            problems.append(f"block {node.name!r} views buffer {buffer.name} through T.match_buffer")

    post_order_visit(index.func.body, visit)
    if problems:
        raise ScheduleError(primitive, target, problems[0])


def _checked_result(primitive: str, target: str, func: PrimFunc, buffer: Buffer) -> PrimFunc:
    """``func``, once nothing in it refers to the removed ``buffer`` any more (a use other than
    a load, such as an opaque call, would be left dangling)."""
    leftover: list[object] = []

    def visit(node: object) -> None:
        if node is buffer:
            leftover.append(node)

    post_order_visit(func.body, visit)
    if leftover:
        raise ScheduleError(
            primitive, target, f"buffer {buffer.name} is used in a way other than loads and stores; it cannot go away"
        )
    return func


# ---------------------------------------------------------------- rewrite


class _Rewriter(IRMutator):
    """Drop a statement, replace statements by identity, inline loads of a buffer, free the
    buffer's allocation, and infer again the signature of every (non-root) block that
    changed."""

    def __init__(
        self,
        func: PrimFunc,
        drop: Stmt,
        buffer: Buffer,
        inline_load: object = None,
        replace: dict[int, Stmt] | None = None,
    ) -> None:
        self.root = func.body
        self.drop = drop
        self.buffer = buffer
        self.inline_load = inline_load
        self.replacements = replace or {}

    def visit(self, node: object) -> object:
        replacement = self.replacements.get(id(node))
        if replacement is not None:
            return replacement
        return super().visit(node)

    def visit_SeqStmt(self, stmt: SeqStmt) -> Stmt:
        items = [self.visit(item) for item in stmt.stmts if item is not self.drop]
        if len(items) == 1:
            return items[0]  # type: ignore[return-value]
        if len(items) == len(stmt.stmts) and all(a is b for a, b in zip(items, stmt.stmts)):
            return stmt
        return SeqStmt(tuple(items))  # type: ignore[arg-type]

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        if load.buffer is self.buffer and self.inline_load is not None:
            indices = tuple(self.visit(i) for i in load.indices)
            return self.inline_load(load, indices)  # type: ignore[operator]
        return self.generic_visit(load)  # type: ignore[return-value]

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        new = self.generic_visit(realize)
        assert isinstance(new, BlockRealize)
        if realize is self.root:
            block = new.block
            if any(b is self.buffer for b in block.alloc_buffers):
                block = block.replace(alloc_buffers=tuple(b for b in block.alloc_buffers if b is not self.buffer))
                new = new.replace(block=block)
            return new
        block = new.block
        if new is realize and not any(region.buffer is self.buffer for region in (*block.reads, *block.writes)):
            return realize
        if any(b is self.buffer for b in block.alloc_buffers):
            block = block.replace(alloc_buffers=tuple(b for b in block.alloc_buffers if b is not self.buffer))
        reads, writes = infer_block_access(block)
        return new.replace(block=block.replace(reads=reads, writes=writes))


# ---------------------------------------------------------------- Schedule methods


class InlinePrimitives:
    """Schedule methods for compute_inline, reverse_compute_inline."""

    @doc_from(compute_inline)
    def compute_inline(self, block: BlockRV) -> None:  # type: ignore[misc]
        realize = self.resolve_block(block, "compute_inline")  # type: ignore[attr-defined]
        name = realize.block.name
        self._apply("compute_inline", (block,), {}, lambda func: compute_inline(func, name))  # type: ignore[attr-defined]

    @doc_from(reverse_compute_inline)
    def reverse_compute_inline(self, block: BlockRV) -> None:  # type: ignore[misc]
        realize = self.resolve_block(block, "reverse_compute_inline")  # type: ignore[attr-defined]
        name = realize.block.name
        self._apply(  # type: ignore[attr-defined]
            "reverse_compute_inline", (block,), {}, lambda func: reverse_compute_inline(func, name)
        )


__all__ = ["InlinePrimitives", "compute_inline", "reverse_compute_inline"]
