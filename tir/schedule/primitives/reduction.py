"""Schedule primitives: decompose_reduction, merge_reduction, rfactor.

All three work on *reduction blocks*: blocks whose iterators are spatial or reduce (at least one
reduce), whose ``T.init()`` is one or more buffer stores, and whose outputs are indexed by the
spatial iterators alone, one element per spatial point (see ``_reduction_util``). They assume
what the validator checks: a block's instances, as its loops and predicate enumerate them, cover
its iteration domain exactly once.
"""

from __future__ import annotations

from tir.analysis import infer_block_access
from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer, simplify
from tir.arith.iter_map import determined_vars
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    free_vars,
    is_const_int,
    substitute,
)
from tir.ir.expr import conjunction
from tir.ir.structural import structural_equal
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, LoopRV
from tir.schedule.primitives._combiner_util import match_combiner, take_apart
from tir.schedule.primitives._common import block_target, const_extent, doc_from, find_block, loop_dom_map, loop_target
from tir.schedule.primitives._init_order_util import check_init_order
from tir.schedule.primitives._reduction_util import (
    ReductionShape,
    conjuncts,
    init_stores,
    insert_next_to,
    is_true,
    loop_copy,
    other_user,
    unique_block_name,
    unique_buffer_name,
)


def _with_access(block: Block) -> Block:
    reads, writes = infer_block_access(block)
    return block.replace(reads=tuple(reads), writes=tuple(writes))


def _check_runs_once(shape: ReductionShape, realize: BlockRealize, inner: list[For], index: TreeIndex) -> None:
    """From the decomposition loop inward, every loop point must run a different instance.

    A loop that the bindings do not use, or use with overlap (``i + ax0``, as ``compute_at``
    leaves a recomputed halo), repeats instances: with ``T.init`` inside the block each
    repetition starts the reduction again, but with the init hoisted before the loop each
    one would accumulate once more."""
    dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in inner}
    known = {var: rng for var, rng in loop_dom_map(index, inner[0]).items() if var not in dom}
    determined = determined_vars(list(realize.iter_values), dom, realize.predicate, known)
    for loop in inner:
        if loop.loop_var not in determined and not (isinstance(loop.extent, IntImm) and loop.extent.value == 1):
            raise shape.fail(
                f"loop {loop.loop_var.name} repeats instances of the block (the bindings do not tell its "
                "iterations apart), so with the init before the loop the reduction would accumulate once per "
                f"iteration; decompose at a loop inside loop {loop.loop_var.name}",
                loop,
            )


def _init_predicate(
    predicate: PrimExpr, at_min: list[For], vmap: dict[Var, PrimExpr], dom: dict[Var, Range]
) -> PrimExpr:
    """The predicate of the instance where the loops ``at_min`` start, renamed by ``vmap``,
    conjunct by conjunct simplified (conjuncts that always hold are dropped)."""
    full = dict(vmap)
    for loop in at_min:
        full[loop.loop_var] = substitute(loop.min, vmap)
    parts = []
    for part in conjuncts(predicate):
        simplified = simplify(substitute(part, full), dom)
        if not is_true(simplified):
            parts.append(simplified)
    return conjunction(parts)


# ===================================================================== decompose_reduction


def decompose_reduction(func: PrimFunc, block_name: str, loop_var: Var) -> tuple[PrimFunc, str]:
    """Move a reduction block's ``T.init()`` into a block of its own, ``"<name>_init"``, placed
    right before ``loop`` (an ancestor of the block). The init block gets copies of the loops
    from ``loop`` inward that drive spatial iterators; loops that drive reduce iterators are not
    copied. The update block keeps its name and loses its init. Returns the init block.

    Preconditions (each refused with a ScheduleError): the block has an init; it is a reduction
    (spatial and reduce iterators only, at least one reduce) whose bindings are quasi-affine and
    independent (the validator's ``binding`` rule, checked even without ``debug``); ``loop`` lies between the block and
    its enclosing block; no loop above ``loop`` drives a reduce iterator (the init would run
    once per iteration of that loop); no loop from ``loop`` inward drives both a spatial and a
    reduce iterator; only loops lie between ``loop`` and the block; the copied loops' bounds do
    not depend on the loops left out; the init is buffer stores that use no reduce iterator and
    no buffer of the block's own; each output element is indexed by the spatial iterators, one
    element per spatial point, and the body accesses it at exactly those indices (or, for a
    blockized reduction whose init is a nest of blocks, the init writes one tile per spatial
    point, disjoint from the others' by a dimension that starts at ``c * v`` and is at most
    ``|c|`` wide for each spatial iterator ``v``, and the body stays inside its tile); nothing else
    under ``loop`` accesses the output buffers; each reduce iterator is at its minimum when its
    loops start (so the init ran first); from ``loop`` inward no loop repeats instances (a loop
    the bindings do not use, or overlapping ones as a recomputed halo): each repetition would
    accumulate again once the init is hoisted. The init block's predicate is the block's predicate at
    the first iteration of the reduce loops.

    Before (``decompose_reduction(C, k)``)::

        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    After::

        for i, j in T.grid(16, 16):
            with T.block("C_init"):
                vi_init, vj_init = T.remap("SS", i, j)
                C[vi_init, vj_init] = 0.0
            for k in range(16):
                with T.block("C"):
                    vi, vj, vk = T.remap("SSR", i, j, k)
                    C[vi, vj] += A[vi, vk] * B[vk, vj]

    Decomposing at ``i`` instead gives the init block its own ``i_init, j_init`` loops before
    the whole nest.
    """
    primitive = "decompose_reduction"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    block = realize.block
    shape = ReductionShape(primitive, index, realize)
    loops = shape.loops
    position = next((k for k, loop in enumerate(loops) if loop.loop_var is loop_var), None)
    if position is None:
        raise ScheduleError(
            primitive,
            f"loop {loop_var.name}",
            f"the loop is not above block {block_name!r} (between the block and its enclosing block)",
            realize,
        )
    top = loops[position]
    shape.check_kinds()
    shape.check_bindings()
    # A blockized reduction's init is a nest of blocks that starts a tile per instance.
    stores = init_stores(block)
    tiled = stores is None and _holds_blocks(block.init)
    if not tiled:
        stores = shape.check_init_stores(stores)
    for loop in loops[:position]:
        if loop.loop_var in shape.reduce_loop_vars:
            raise shape.fail(
                f"loop {loop.loop_var.name} above loop {top.loop_var.name} drives a reduce iterator, so the init "
                f"would run once per iteration of it; decompose at loop {loop.loop_var.name} or above it",
                top,
            )
    inner = loops[position:]
    mixed = shape.mixed_loop(inner)
    if mixed is not None:
        raise shape.fail(
            f"loop {mixed.loop_var.name} drives both spatial and reduce iterators; the init cannot copy it", mixed
        )
    shape.check_path_is_loops(top)
    chosen = [loop for loop in inner if loop.loop_var in shape.spatial_loop_vars]
    left_out = [loop for loop in inner if loop.loop_var not in shape.spatial_loop_vars]
    left_out_vars = {loop.loop_var for loop in left_out}
    for loop in chosen:
        used = set(free_vars((loop.min, loop.extent))) & left_out_vars
        if used:
            raise shape.fail(
                f"the bounds of loop {loop.loop_var.name} use loops {sorted(v.name for v in used)} that drive "
                "reduce iterators, so the init block cannot copy it",
                loop,
            )
    if tiled:
        outputs = shape.check_tile_outputs()
    else:
        assert stores is not None
        shape.check_outputs(stores)
        outputs = [s.buffer for s in stores]
    reduce_vars = {block.iter_vars[k].var for k in shape.reduce}
    assert block.init is not None
    used = set(free_vars(block.init)) & reduce_vars
    if used:
        raise shape.fail(f"the init uses reduce iterators {sorted(v.name for v in used)}", block.init)
    own = {id(b) for b in block.alloc_buffers} | {id(m.buffer) for m in block.match_buffers}
    if _buffer_ids(block.init) & own:
        raise shape.fail("the init uses a buffer the block allocates or matches", block.init)
    clash = other_user(top, realize, outputs)
    if clash is not None:
        raise shape.fail(
            f"something else under loop {top.loop_var.name} accesses the output {clash.name}; running the init "
            "before the loop would change what it sees",
            top,
        )
    shape.check_first_instance_inits(left_out)
    _check_runs_once(shape, realize, inner, index)

    # Build the init block and its loops.
    copies: dict[Var, PrimExpr] = {
        loop.loop_var: Var(f"{loop.loop_var.name}_init", loop.loop_var.dtype) for loop in chosen
    }
    iter_vars: list[IterVar] = []
    bindings: list[PrimExpr] = []
    rename: dict[Var, PrimExpr] = {}
    for k in shape.spatial:
        iv = block.iter_vars[k]
        var = Var(f"{iv.var.name}_init", iv.var.dtype)
        rename[iv.var] = var
        iter_vars.append(IterVar(var, iv.dom, IterKind.SPATIAL))
        bindings.append(substitute(realize.iter_values[k], copies))
    dom = loop_dom_map(index, top)
    for loop in chosen:
        copy = copies[loop.loop_var]
        assert isinstance(copy, Var)
        dom[copy] = Range(substitute(loop.min, copies), substitute(loop.extent, copies))
    predicate = _init_predicate(realize.predicate, left_out, copies, dom)
    init_name = unique_block_name(index, f"{block.name}_init")
    init_block = _with_access(Block(init_name, tuple(iter_vars), (), (), substitute(block.init, rename)))
    nest: Stmt = BlockRealize(tuple(bindings), predicate, init_block)
    for loop in reversed(chosen):
        copy = copies[loop.loop_var]
        assert isinstance(copy, Var)
        nest = loop_copy(loop, copy, nest, copies)

    updated = replace_stmt(index, realize, realize.replace(block=block.replace(init=None)))
    index = TreeIndex(updated)
    return insert_next_to(index, index.loops[id(loop_var)], nest, after=False), init_name


def _holds_blocks(node: Stmt | None) -> bool:
    from tir.ir import post_order_visit

    found: list[bool] = []
    if node is not None:
        post_order_visit(node, lambda n: found.append(True) if isinstance(n, BlockRealize) else None)
    return bool(found)


def _buffer_ids(node: Stmt) -> set[int]:
    from tir.ir import post_order_visit

    found: set[int] = set()
    post_order_visit(node, lambda n: found.add(id(n)) if isinstance(n, Buffer) else None)
    return found


# ===================================================================== merge_reduction


def merge_reduction(func: PrimFunc, init_name: str, update_name: str) -> PrimFunc:
    """Put an init block back into the reduction block it initializes, as its ``T.init()``:
    the inverse of ``decompose_reduction``. The init block and its loops disappear; the update
    block keeps its name. Right after ``decompose_reduction`` it gives back the original program.

    Preconditions (each refused with a ScheduleError):

    - the init block has only spatial iterators, no init, allocates and matches no buffer, and
      its body is buffer stores; the update block has no init and is a reduction (spatial and
      reduce iterators only, at least one reduce) whose bindings are quasi-affine and independent
      (the validator's ``binding`` rule, checked even without ``debug``);
    - the two are in the same scope, and the init block's loop nest (only loops around the init
      block) is immediately followed, in the same statement sequence, by the update block or a
      loop ``L`` above it;
    - no loop above ``L`` drives a reduce iterator of the update (the init ran once per
      iteration of it, the merged init would run once), no loop from ``L`` inward drives both
      spatial and reduce iterators, only loops lie between ``L`` and the update;
    - the init loops match, in order and with equal bounds, the loops from ``L`` inward that
      drive the update's spatial iterators;
    - every init iterator has the domain and (with those loops matched) the binding of one
      spatial iterator of the update, one to one, covering all of them;
    - the init predicate equals the update predicate at the first iteration of its reduce loops;
    - with iterators matched, the init stores are the update's init: it writes those buffers,
      indexed by the spatial iterators one element per spatial point, and the update body
      accesses them at those indices only; nothing else under ``L`` accesses them; each reduce
      iterator is at its minimum when its loops start;
    - put back, the init runs before every update of its output element (checked on the result
      as ``reorder`` checks it).

    Before (``merge_reduction(C_init, C)``)::

        for i, j in T.grid(16, 16):
            with T.block("C_init"):
                vi_init, vj_init = T.remap("SS", i, j)
                C[vi_init, vj_init] = 0.0
            for k in range(16):
                with T.block("C"):
                    vi, vj, vk = T.remap("SSR", i, j, k)
                    C[vi, vj] += A[vi, vk] * B[vk, vj]

    After::

        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]
    """
    primitive = "merge_reduction"
    index = TreeIndex(func)
    init_realize = find_block(index, init_name, primitive)
    update_realize = find_block(index, update_name, primitive)
    init_block = init_realize.block
    if init_realize is update_realize:
        raise ScheduleError(primitive, block_target(init_realize), "the init block and the update block are the same")

    def init_fail(rule: str, fragment: object = init_realize) -> ScheduleError:
        return ScheduleError(primitive, f"init block {init_name!r}", rule, fragment)

    if any(iv.kind is not IterKind.SPATIAL for iv in init_block.iter_vars):
        raise init_fail("the init block must have only spatial iterators")
    if init_block.init is not None:
        raise init_fail("the init block has a T.init() of its own")
    if init_block.alloc_buffers or init_block.match_buffers:
        raise init_fail("the init block allocates or matches buffers")
    body_stores = init_stores(init_block.replace(init=init_block.body))
    if body_stores is None:
        raise init_fail("the init block's body must be a buffer store (or a sequence of them)", init_block.body)

    update = update_realize.block
    shape = ReductionShape(primitive, index, update_realize)
    if update.init is not None:
        raise shape.fail("the update block already has a T.init()", update_realize)
    shape.check_kinds(need_init=False)
    shape.check_bindings()
    if index.scope_block(init_realize) is not index.scope_block(update_realize):
        raise init_fail(f"the init block is not in the same scope as block {update_name!r}")

    # The init nest: the loops right around the init block, up to a statement sequence.
    top: Stmt = init_realize
    parent = index.parent_of(top)
    while isinstance(parent, For):
        top = parent
        parent = index.parent_of(top)
    follower = None
    if isinstance(parent, SeqStmt):
        position = next(k for k, s in enumerate(parent.stmts) if s is top)
        if position + 1 < len(parent.stmts):
            follower = parent.stmts[position + 1]
    if follower is None or not (
        follower is update_realize or (isinstance(follower, For) and index.is_ancestor(follower, update_realize))
    ):
        raise init_fail(
            f"the init block's loop nest must be followed directly by block {update_name!r} or a loop above it",
            parent if isinstance(parent, SeqStmt) else top,
        )
    init_loops = index.loops_above(init_realize)
    if isinstance(top, For):
        init_loops = init_loops[next(k for k, loop in enumerate(init_loops) if loop is top) :]
    else:
        init_loops = []

    loops = shape.loops
    position = len(loops) if follower is update_realize else next(k for k, lp in enumerate(loops) if lp is follower)
    anchor: Stmt = follower
    for loop in loops[:position]:
        if loop.loop_var in shape.reduce_loop_vars:
            raise shape.fail(
                f"loop {loop.loop_var.name}, above the init block, drives a reduce iterator: the init runs once per "
                "iteration of it, the merged init would run once",
                loop,
            )
    inner = loops[position:]
    mixed = shape.mixed_loop(inner)
    if mixed is not None:
        raise shape.fail(f"loop {mixed.loop_var.name} drives both spatial and reduce iterators", mixed)
    if isinstance(follower, For):
        shape.check_path_is_loops(follower)
    chosen = [loop for loop in inner if loop.loop_var in shape.spatial_loop_vars]
    left_out = [loop for loop in inner if loop.loop_var not in shape.spatial_loop_vars]

    # Match the loops.
    def names(items: list[For]) -> str:
        return ", ".join(loop.loop_var.name for loop in items) or "none"

    if len(chosen) != len(init_loops):
        raise init_fail(
            f"the init block's loops ({names(init_loops)}) do not match the loops that drive the spatial "
            f"iterators of {update_name!r} ({names(chosen)})"
        )
    loop_map: dict[Var, PrimExpr] = {}
    analyzer = Analyzer()
    for var, rng in loop_dom_map(index, update_realize).items():
        analyzer.bind(var, rng)
    for mine, theirs in zip(init_loops, chosen):
        same = analyzer.can_prove_equal(substitute(mine.min, loop_map), theirs.min) and analyzer.can_prove_equal(
            substitute(mine.extent, loop_map), theirs.extent
        )
        if not same:
            raise init_fail(
                f"init loop {mine.loop_var.name} does not have the bounds of loop {theirs.loop_var.name}", mine
            )
        loop_map[mine.loop_var] = theirs.loop_var

    # Match the iterators.
    iv_map: dict[Var, PrimExpr] = {}
    taken: set[int] = set()
    for iv, binding in zip(init_block.iter_vars, init_realize.iter_values):
        mapped = substitute(binding, loop_map)
        match = None
        for k in shape.spatial:
            if k in taken:
                continue
            other = update.iter_vars[k]
            if (
                other.var.dtype == iv.var.dtype
                and analyzer.can_prove_equal(iv.dom.min, other.dom.min)
                and analyzer.can_prove_equal(iv.dom.extent, other.dom.extent)
                and analyzer.can_prove_equal(mapped, update_realize.iter_values[k])
            ):
                match = k
                break
        if match is None:
            raise init_fail(
                f"init iterator {iv.var.name} (bound to {binding}) matches no spatial iterator of {update_name!r}"
            )
        taken.add(match)
        iv_map[iv.var] = update.iter_vars[match].var
    missing = [update.iter_vars[k].var.name for k in shape.spatial if k not in taken]
    if missing:
        raise init_fail(f"spatial iterators {missing} of {update_name!r} have no init iterator")
    stray = set(free_vars(init_block.body)) & {loop.loop_var for loop in init_loops}
    if stray:
        raise init_fail("the init block's body uses its loop variables directly", init_block.body)

    # The predicate.
    dom = loop_dom_map(index, update_realize)
    expected = _init_predicate(update_realize.predicate, left_out, {}, dom)
    got = _init_predicate(init_realize.predicate, [], loop_map, dom)
    if not (structural_equal(expected, got) or analyzer.can_prove_equal(expected, got)):
        raise init_fail(
            f"the init block's predicate {got} is not the update's predicate at the start of its reduce loops "
            f"({expected})"
        )

    # The stores.
    init_stmt = substitute(init_block.body, iv_map)
    merged = update.replace(init=init_stmt)
    stores = init_stores(merged)
    assert stores is not None
    merged_shape = ReductionShape(primitive, index, update_realize, block=merged)
    written = {id(region.buffer) for region in update.writes}
    for store in stores:
        if id(store.buffer) not in written:
            raise init_fail(f"block {update_name!r} does not write {store.buffer.name}, which the init block writes")
    merged_shape.check_outputs(stores)
    clash = other_user(anchor, update_realize, [s.buffer for s in stores])
    if clash is not None:
        raise shape.fail(
            f"something else inside the update's loops accesses the output {clash.name}; moving the init into "
            "the update would change what it sees",
            anchor,
        )
    shape.check_first_instance_inits(left_out)

    reads = list(update.reads)
    for region in init_block.reads:
        mapped_region = substitute(region, iv_map)
        if not any(structural_equal(mapped_region, r) for r in reads):
            reads.append(mapped_region)
    merged = merged.replace(reads=tuple(reads))
    updated = replace_stmt(index, update_realize, update_realize.replace(block=merged))
    result = replace_stmt(TreeIndex(updated), top, None)
    check_init_order(primitive, block_target(update_realize), func, result, {update_name: None})
    return result


# ===================================================================== rfactor


def rfactor(func: PrimFunc, loop_var: Var, factor_axis: int) -> tuple[PrimFunc, str]:
    """Factor a reduction over ``loop`` out into an intermediate buffer (TVM's ``rfactor``).

    The block under ``loop`` is a reduction whose update rfactor recognizes as a combiner
    (``_combiner_util`` has the details):

    - one output, ``C[s] = C[s] op f(...)`` with ``op`` one of ``+`` (init 0), ``*`` (init 1),
      ``T.max`` (init -inf or the dtype's lowest value), ``T.min`` (init inf or the largest
      value); the new value may be bound to a let first (``v = C[s] + f(...); C[s] = v``);
    - argmax / argmin over an index and a value output, written as TVM writes them: a
      ``T.init()`` of two stores ``(-1, lowest)`` (argmin: ``(-1, largest)``), and a body that
      binds both new values to lets and then stores them. Of equal values, TOPI's form keeps
      the smaller index (``V[s] > v or V[s] == v and I[s] < i``); it is associative and
      commutative, so any reduce loop can be factored. The order-keeping form (``V[s] >= v``,
      argmin ``V[s] <= v``) keeps the equal value met first: it is not commutative, so rfactor
      accepts it only where it keeps the order of the iterations, when every reduce loop
      outside ``loop`` has one iteration (factoring the outermost reduce loop; TVM accepts any
      loop, and then equal values may give another index);
    - several outputs each reduced on its own by one of the scalar forms, in the let form.

    It becomes two blocks:

    - ``"<name>_rf"``, in place, over the same loops: it reduces into new buffers ``C_rf`` (one
      per output), the shape of ``C`` with a dimension of size ``extent(loop)`` inserted at
      ``factor_axis``; the loop's variable drives a *spatial* iterator of it, so the loop can
      then be parallelized or vectorized. Every loop that drove a reduce iterator gets an
      iterator of its own (the old reduce iterators are replaced by their bindings).
    - ``"<name>"`` (the write-back, which keeps the name): the same combiner folding ``C_rf``
      into ``C``, reducing over the new dimension, with the same init. It gets copies of the
      loops that drive spatial iterators and of ``loop``, from the outermost reduce loop
      inward, and goes right after that loop (the copy of ``loop`` is serial). The ``C_rf``
      buffers are allocated in the block's enclosing block.

    Both blocks keep the block's form (its init order, its lets, its store order). Returns the
    ``_rf`` block. Sums are reassociated: float results change in the last bits. Float inputs
    are assumed not to be NaN (with NaN, max, min, argmax and argmin are not associative).

    Preconditions (each refused with a ScheduleError): exactly one block lies under ``loop``;
    it has an init and is a reduction (spatial and reduce iterators only, one or more reduce,
    no buffer of its own, bindings quasi-affine and independent as the validator's ``binding``
    rule asks, checked even without ``debug``) of a form above: the init is buffer stores to different outputs;
    with lets, one let per init store, none using another, then only stores, one per output,
    each storing a different let variable to a buffer the init stores to; the outputs have one
    shape and every store is at the same indices, which use the spatial iterators only (one
    element per spatial point); the init values are the combiner's identity; ``loop`` drives a
    reduce iterator and no spatial iterator (and, for an order-keeping combiner, the reduce
    loops outside it have one iteration); ``-(ndim(C) + 1) <= factor_axis <= ndim(C)`` (a
    negative axis counts from the end: -1 puts it last); ``loop`` has a constant min and
    extent; no loop drives both spatial and reduce iterators; the bounds of the reduce loops
    use no loop or block iterator; only loops lie between the outermost reduce loop and the
    block; the copied loops' bounds do not use the loops left out, nor do the predicate
    conjuncts without a reduce loop (the write-back keeps those); nothing else under the
    outermost reduce loop accesses the outputs; each reduce iterator is at its minimum when
    its loops start; and every predicate conjunct that uses a reduce loop holds whenever the
    reduce loops other than ``loop`` start (so every element of ``C_rf`` gets its init).

    Before (``rfactor(k_1, 0)`` after ``split(k, [None, 4])``)::

        for i, k_0, k_1 in T.grid(8, 4, 4):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(16, k_0 * 4 + k_1)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]

    After::

        B_rf = T.alloc_buffer((4, 8), "float32")
        for i in range(8):
            for k_0, k_1 in T.grid(4, 4):
                with T.block("B_rf"):
                    vi, vk_1, vk_0 = T.remap("SSR", i, k_1, k_0)
                    with T.init():
                        B_rf[vk_1, vi] = 0.0
                    B_rf[vk_1, vi] = B_rf[vk_1, vi] + A[vi, vk_0 * 4 + vk_1]
            for k_1 in range(4):
                with T.block("B"):
                    vi, vk_1 = T.remap("SR", i, k_1)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + B_rf[vk_1, vi]

    An argmax (TOPI's form; ``rfactor(k_1, 1)`` after ``split(k, [None, 4])``)::

        for i, k_0, k_1 in T.grid(8, 4, 4):
            with T.block("M"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(16, k_0 * 4 + k_1)
                with T.init():
                    I[vi] = -1
                    V[vi] = T.min_value("float32")
                v_i = T.select(V[vi] > A[vi, vk] or V[vi] == A[vi, vk] and I[vi] < vk, I[vi], vk)
                v_v = T.select(V[vi] > A[vi, vk], V[vi], A[vi, vk])
                I[vi] = v_i
                V[vi] = v_v

    After (``...`` shortens the ``_rf`` block's selects, which fold in ``A`` as before)::

        I_rf = T.alloc_buffer((8, 4), "int32")
        V_rf = T.alloc_buffer((8, 4), "float32")
        for i in range(8):
            for k_0, k_1 in T.grid(4, 4):
                with T.block("M_rf"):
                    vi, vk_1, vk_0 = T.remap("SSR", i, k_1, k_0)
                    with T.init():
                        I_rf[vi, vk_1] = -1
                        V_rf[vi, vk_1] = T.min_value("float32")
                    v_i_rf = T.select(V_rf[vi, vk_1] > A[vi, vk_0 * 4 + vk_1] or ..., I_rf[vi, vk_1],
                                      vk_0 * 4 + vk_1)
                    v_v_rf = T.select(V_rf[vi, vk_1] > A[vi, vk_0 * 4 + vk_1], ...)
                    I_rf[vi, vk_1] = v_i_rf
                    V_rf[vi, vk_1] = v_v_rf
            for k_1 in range(4):
                with T.block("M"):
                    vi, vk_1 = T.remap("SR", i, k_1)
                    with T.init():
                        I[vi] = -1
                        V[vi] = T.min_value("float32")
                    v_i = T.select(V[vi] > V_rf[vi, vk_1] or V[vi] == V_rf[vi, vk_1] and I[vi] < I_rf[vi, vk_1],
                                   I[vi], I_rf[vi, vk_1])
                    v_v = T.select(V[vi] > V_rf[vi, vk_1], V[vi], V_rf[vi, vk_1])
                    I[vi] = v_i
                    V[vi] = v_v
    """
    primitive = "rfactor"
    index = TreeIndex(func)
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError(primitive, f"loop {loop_var.name}", "no such loop")
    children = index.child_blocks(loop)
    if len(children) != 1:
        raise ScheduleError(
            primitive,
            loop_target(loop),
            f"the loop must hold exactly one block, found {[r.block.name for r in children]}",
            loop,
        )
    realize = children[0]
    block = realize.block
    shape = ReductionShape(primitive, index, realize)
    shape.check_kinds()
    shape.check_bindings()
    if block.alloc_buffers or block.match_buffers:
        raise shape.fail("the block allocates or matches buffers of its own", realize)

    # The form: init stores of an identity, an update that is a known combiner.
    update = take_apart(block.init, block.body, shape.fail)
    combiner = match_combiner(update, shape.fail)
    shape.check_outputs(update.inits)
    outputs = update.outputs
    first = update.inits[0]

    # The loop.
    # A unit loop that drives no iterator at all (what a split by a factor of 1 or a fuse leaves)
    # is factored like a reduce loop of extent 1: the intermediate gets a dimension of one.
    unit_loop = loop_var not in shape.spatial_loop_vars and is_one(loop.extent)
    unit_loop = unit_loop and loop_var not in shape.reduce_loop_vars
    if loop_var not in shape.reduce_loop_vars and not unit_loop:
        raise ScheduleError(
            primitive, loop_target(loop), f"the loop drives no reduce iterator of block {block.name!r}", realize
        )
    if unit_loop:
        real_reduce = [lp for lp in shape.loops if lp.loop_var in shape.reduce_loop_vars]
        if not real_reduce or shape.loops.index(loop) < shape.loops.index(real_reduce[0]):
            raise ScheduleError(
                primitive,
                loop_target(loop),
                f"the loop drives no iterator of block {block.name!r} and is not inside one of its reduce loops",
                realize,
            )
    if loop_var in shape.spatial_loop_vars:
        raise ScheduleError(
            primitive,
            loop_target(loop),
            f"the loop drives a spatial iterator of block {block.name!r} as well as a reduce one",
            realize,
        )
    ndim = len(first.buffer.shape)
    names = "/".join(b.name for b in outputs)
    if isinstance(factor_axis, bool) or not isinstance(factor_axis, int) or not -(ndim + 1) <= factor_axis <= ndim:
        raise ScheduleError(
            primitive,
            loop_target(loop),
            f"factor_axis must be in [{-(ndim + 1)}, {ndim}] for {names} (negative: counted from the end), "
            f"got {factor_axis!r}",
        )
    if factor_axis < 0:
        factor_axis += ndim + 1  # -1: the new dimension goes last, as in TVM
    extent = const_extent(loop, primitive)
    loops = shape.loops
    mixed = shape.mixed_loop(loops)
    if mixed is not None:
        raise shape.fail(f"loop {mixed.loop_var.name} drives both spatial and reduce iterators", mixed)
    reduce_loops = [lp for lp in loops if lp.loop_var in shape.reduce_loop_vars or lp is loop]
    if combiner.ordered:
        outside = [lp for lp in reduce_loops[: reduce_loops.index(loop)] if not is_one(lp.extent)]
        if outside:
            raise ScheduleError(
                primitive,
                loop_target(loop),
                f"block {block.name!r} is an {combiner.name}: of equal values it keeps the one met first, so the "
                f"result depends on the order of the iterations, and factoring loop {loop_var.name} inside reduce "
                f"loop {outside[-1].loop_var.name} changes that order; factor the outermost reduce loop "
                f"{outside[0].loop_var.name}, or write the tie-breaking form that keeps the smaller index "
                "(`V[s] > v or V[s] == v and I[s] < i`)",
                realize,
            )
    outer_reduce = reduce_loops[0]
    defined = {lp.loop_var for lp in index.loops.values()}
    defined |= {iv.var for r in index.blocks.values() for iv in r.block.iter_vars}
    for lp in reduce_loops:
        if set(free_vars((lp.min, lp.extent))) & defined:
            raise shape.fail(
                f"the bounds of reduce loop {lp.loop_var.name} use loop or block iterators, so they cannot be "
                "the domain of an iterator",
                lp,
            )
    shape.check_path_is_loops(outer_reduce)
    start = loops.index(outer_reduce)
    copied = [lp for lp in loops[start:] if lp.loop_var in shape.spatial_loop_vars or lp is loop]
    left_out = {lp.loop_var for lp in loops[start:]} - {lp.loop_var for lp in copied}
    for lp in copied:
        used = set(free_vars((lp.min, lp.extent))) & left_out
        if used:
            raise shape.fail(
                f"the bounds of loop {lp.loop_var.name} use loops {sorted(v.name for v in used)} that the "
                "write-back block does not get",
                lp,
            )
    clash = other_user(outer_reduce, realize, outputs)
    if clash is not None:
        raise shape.fail(
            f"something else under loop {outer_reduce.loop_var.name} accesses the output {clash.name}", outer_reduce
        )
    shape.check_first_instance_inits(reduce_loops)
    reduce_loop_vars = {lp.loop_var for lp in reduce_loops}
    dom = loop_dom_map(index, realize)
    others_at_min: dict[Var, PrimExpr] = {lp.loop_var: lp.min for lp in reduce_loops if lp is not loop}
    spatial_parts: list[PrimExpr] = []
    for part in conjuncts(realize.predicate):
        if not (set(free_vars(part)) & reduce_loop_vars):
            stray = set(free_vars(part)) & left_out
            if stray:
                raise shape.fail(
                    f"the predicate {part} uses loops {sorted(v.name for v in stray)} that the write-back block "
                    "does not get",
                    realize,
                )
            spatial_parts.append(part)
        elif not is_true(simplify(substitute(part, others_at_min), dom)):
            raise shape.fail(
                f"the predicate {part} does not hold at the start of the reduce loops other than "
                f"{loop_var.name}, so some elements of the rfactor buffer would get no init",
                realize,
            )

    # The intermediate buffers, one per output.
    rf_shape = list(first.buffer.shape)
    rf_shape.insert(factor_axis, IntImm(extent, loop_var.dtype))
    rf_buffers: list[Buffer] = []
    for output in outputs:
        name = unique_buffer_name(func, f"{output.name}_rf")
        if any(b.name == name for b in rf_buffers):
            name = f"{name}_{len(rf_buffers)}"
        rf_buffers.append(Buffer(name, tuple(rf_shape), output.dtype, output.scope))

    def rf_indices(indices: tuple[PrimExpr, ...], var: Var) -> tuple[PrimExpr, ...]:
        position = var if is_const_int(loop.min, 0) else var - loop.min
        items = list(indices)
        items.insert(factor_axis, position)
        return tuple(items)

    # The rfactor block, in place.
    rf_var = Var(f"v{loop_var.name}", loop_var.dtype)
    loop_iters: dict[Var, PrimExpr] = {loop_var: rf_var}
    new_reduce: list[tuple[IterVar, PrimExpr]] = []
    for lp in reduce_loops:
        if lp is loop:
            continue
        var = Var(f"v{lp.loop_var.name}", lp.loop_var.dtype)
        loop_iters[lp.loop_var] = var
        new_reduce.append((IterVar(var, Range(lp.min, lp.extent), IterKind.REDUCE), lp.loop_var))
    old_reduce = {block.iter_vars[k].var: substitute(realize.iter_values[k], loop_iters) for k in shape.reduce}
    iter_vars = [block.iter_vars[k] for k in shape.spatial]
    bindings = [realize.iter_values[k] for k in shape.spatial]
    iter_vars.append(IterVar(rf_var, Range(loop.min, loop.extent), IterKind.SPATIAL))
    bindings.append(loop_var)
    for iv, binding in new_reduce:
        iter_vars.append(iv)
        bindings.append(binding)
    rf_index = rf_indices(first.indices, rf_var)
    rf_values = combiner.combine(
        [BufferLoad(b, rf_index) for b in rf_buffers], [substitute(y, old_reduce) for y in combiner.operands]
    )
    rf_init, rf_body = update.rebuild(rf_buffers, rf_index, rf_values, "_rf")
    rf_name = unique_block_name(index, f"{block.name}_rf")
    rf_block = _with_access(
        Block(rf_name, tuple(iter_vars), (), (), rf_body, rf_init, annotations=dict(block.annotations))
    )
    rf_realize = BlockRealize(tuple(bindings), realize.predicate, rf_block)

    # The write-back block and its loops.
    copies: dict[Var, PrimExpr] = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in copied}
    wb_rename: dict[Var, PrimExpr] = {}
    wb_iters: list[IterVar] = []
    wb_bindings: list[PrimExpr] = []
    for k in shape.spatial:
        iv = block.iter_vars[k]
        var = Var(iv.var.name, iv.var.dtype)
        wb_rename[iv.var] = var
        wb_iters.append(IterVar(var, iv.dom, IterKind.SPATIAL))
        wb_bindings.append(substitute(realize.iter_values[k], copies))
    wb_rf_var = Var(f"v{loop_var.name}", loop_var.dtype)
    wb_iters.append(IterVar(wb_rf_var, Range(loop.min, loop.extent), IterKind.REDUCE))
    wb_bindings.append(copies[loop_var])
    wb_index = tuple(substitute(i, wb_rename) for i in first.indices)
    wb_values = combiner.combine(
        [BufferLoad(b, wb_index) for b in outputs], [BufferLoad(b, rf_indices(wb_index, wb_rf_var)) for b in rf_buffers]
    )
    wb_init, wb_body = update.rebuild(list(outputs), wb_index, wb_values, "")
    wb_block = _with_access(Block(block.name, tuple(wb_iters), (), (), wb_body, wb_init))
    wb_predicate = conjunction([substitute(part, copies) for part in spatial_parts])
    nest: Stmt = BlockRealize(tuple(wb_bindings), wb_predicate, wb_block)
    for lp in reversed(copied):
        copy = copies[lp.loop_var]
        assert isinstance(copy, Var)
        copied_loop = loop_copy(lp, copy, nest, copies)
        if lp is loop and copied_loop.kind is not ForKind.SERIAL:
            # In the write-back the factored loop drives a reduce iterator: keep it serial.
            copied_loop = copied_loop.replace(kind=ForKind.SERIAL, thread_tag=None)
        nest = copied_loop

    step = replace_stmt(index, realize, rf_realize)
    index = TreeIndex(step)
    step = insert_next_to(index, index.loops[id(outer_reduce.loop_var)], nest, after=True)
    index = TreeIndex(step)
    scope = index.scope_block(index.blocks[rf_name])
    assert scope is not None
    scope_block = scope.block.replace(alloc_buffers=(*scope.block.alloc_buffers, *rf_buffers))
    return replace_stmt(index, scope, scope.replace(block=scope_block)), rf_name


def is_one(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


# ===================================================================== Schedule methods


class ReductionPrimitives:
    """Schedule methods for decompose_reduction, merge_reduction, rfactor."""

    @doc_from(decompose_reduction)
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:  # type: ignore[misc]
        realize = self.resolve_block(block, "decompose_reduction")  # type: ignore[attr-defined]
        for_node = self.resolve_loop(loop, "decompose_reduction")  # type: ignore[attr-defined]
        name = realize.block.name
        return self._apply(  # type: ignore[attr-defined]
            "decompose_reduction",
            (block, loop),
            {},
            lambda func: decompose_reduction(func, name, for_node.loop_var),
        )

    @doc_from(merge_reduction)
    def merge_reduction(self, init_block: BlockRV, update_block: BlockRV) -> BlockRV:  # type: ignore[misc]
        init_name = self.resolve_block(init_block, "merge_reduction").block.name  # type: ignore[attr-defined]
        update_name = self.resolve_block(update_block, "merge_reduction").block.name  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined]
            "merge_reduction",
            (init_block, update_block),
            {},
            lambda func: (merge_reduction(func, init_name, update_name), update_name),
        )

    @doc_from(rfactor)
    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:  # type: ignore[misc]
        for_node = self.resolve_loop(loop, "rfactor")  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined]
            "rfactor",
            (loop,),
            {"factor_axis": factor_axis},
            lambda func: rfactor(func, for_node.loop_var, factor_axis),
        )
