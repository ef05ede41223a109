"""Schedule primitives: parallel, vectorize, unroll, bind, annotate, unannotate.

A loop's kind says how lowering and the backends run it: ``parallel`` loops are outlined and
run on OpenMP threads (``lower_parallel``), ``vectorized`` loops become vector code
(``vectorize_loops``; a loop it cannot express exactly stays serial), ``unroll`` loops are
replicated (``unroll_loops``; large ones keep a ``pragma_unroll`` hint), thread-bound loops
are for GPU targets (the interpreter runs them one thread after another; the LLVM CPU backend
refuses them). Annotations are free-form key/value hints on loops and blocks.

Changing a loop's kind to parallel, vectorized or thread-bound lets its iterations run at the
same time, so those primitives check first that they are independent (see
``_loops_util``): no block under the loop binds a reduction or opaque iterator to the loop,
and blocks under the loop that share a buffer touch disjoint parts of it per iteration.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tir.analysis.reduction import match_reduction
from tir.analysis.tree import TreeIndex, child_stmts, replace_stmt
from tir.arith import Analyzer, RangeRelaxer, simplify
from tir.ir import (
    THREAD_TAGS,
    Add,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    ForKind,
    IntImm,
    IterKind,
    Node,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    substitute,
)
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.primitives._common import doc_from, find_block, loop_target
from tir.schedule.primitives._loops_util import (
    BlockSite,
    check_disjoint_footprints,
    check_distinct_instances,
    check_iterator_kinds,
    collect_block_sites,
    loop_header,
    uses_any,
)
from tir.schedule.primitives._reduction_util import ReductionShape, init_stores

_VERB = {
    ForKind.PARALLEL: "parallelized",
    ForKind.VECTORIZED: "vectorized",
    ForKind.THREAD_BINDING: "bound to threads",
}


def _find_loop(index: TreeIndex, loop_var: Var, primitive: str) -> For:
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError(primitive, f"loop {loop_var.name}", "no such loop")
    return loop


def _describe(loop: For) -> str:
    return f"bound to {loop.thread_tag}" if loop.kind is ForKind.THREAD_BINDING else loop.kind.value


def _check_kind(loop: For, kind: ForKind, thread_tag: str | None, primitive: str) -> bool:
    """True when the loop already has the kind (the primitive changes nothing); refuses any
    kind but serial otherwise."""
    if loop.kind is kind and loop.thread_tag == thread_tag:
        return True
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(
            primitive,
            loop_target(loop),
            f"only a serial loop can be changed; this loop is {_describe(loop)}",
            loop_header(loop),
        )
    return False


def _check_independent(
    index: TreeIndex, loop: For, kind: ForKind, primitive: str, scratch: frozenset[Buffer] = frozenset()
) -> None:
    """Iterations of ``loop`` may run at the same time (see the module docstring).

    Blocks that write only ``scratch`` buffers (see ``_iteration_local_buffers``) are exempt
    from the instance and footprint checks: each iteration gets its own copy of such a buffer.
    """
    verb = _VERB[kind]
    target = loop_target(loop)
    sites = collect_block_sites(
        loop.body,
        [loop.loop_var],
        primitive,
        target,
        f"a statement outside every block sits under the loop; without a block nothing says its iterations "
        f"may be {verb}",
    )
    all_sites = sites
    if scratch:
        # Only scratch that each iteration writes before reading it can be a per-iteration copy;
        # through the rest a value could flow from one iteration to another.
        scratch = _written_before_read(index, loop, sites, scratch)
    if scratch:
        sites = [
            site
            for site in sites
            if not site.realize.block.writes or any(r.buffer not in scratch for r in site.realize.block.writes)
        ]
    names = {IterKind.REDUCE: "a reduction iterator", IterKind.OPAQUE: "an opaque iterator"}
    check_iterator_kinds(
        sites,
        [loop.loop_var],
        frozenset({IterKind.SPATIAL}),
        primitive,
        target,
        lambda iter_kind: f"{names[iter_kind]} cannot be {verb}: it is bound to this loop",
    )
    what = {ForKind.PARALLEL: "parallelize", ForKind.VECTORIZED: "vectorize", ForKind.THREAD_BINDING: "bind"}[kind]
    outer = index.loops_above(loop)
    check_distinct_instances(sites, [loop], primitive, target, f"{what} the loop", outer)
    # Every block takes part here (what a scratch writer reads of other buffers counts too);
    # only the accesses of the per-iteration scratch buffers are left out.
    check_disjoint_footprints(
        all_sites, [loop], primitive, target, f"{what} the loop", private_buffers=scratch, outer_loops=outer
    )


def _written_before_read(
    index: TreeIndex, loop: For, sites: list[BlockSite], scratch: frozenset[Buffer]
) -> frozenset[Buffer]:
    """The buffers of ``scratch`` whose every read under ``loop`` lies in a box that an earlier
    block of the same iteration surely wrote completely.

    Then an iteration never reads what another iteration left in the buffer, and giving each
    iteration its own copy changes nothing. The read is a block's declared read region (a
    superset of what it reads); the writer must come earlier in the body of the innermost loop
    the two blocks share (or of ``loop``), so that it ran in the same iteration of every loop
    around the reader.
    """
    covered = set()
    for buffer in scratch:
        ok = True
        for position, reader in enumerate(sites):
            regions = [r for r in reader.realize.block.reads if r.buffer is buffer]
            if regions and not all(
                any(_covers(index, loop, writer, reader, buffer, region) for writer in sites[:position])
                for region in regions
            ):
                ok = False
                break
        if ok:
            covered.add(buffer)
    return frozenset(covered)


def _shared_loops(a: BlockSite, b: BlockSite) -> int:
    count = 0
    for x, y in zip(a.inner_loops, b.inner_loops):
        if x is not y:
            break
        count += 1
    return count


def _covers(
    index: TreeIndex, loop: For, writer: BlockSite, reader: BlockSite, buffer: Buffer, region: BufferRegion
) -> bool:
    """Whether ``writer`` surely writes all of ``region`` (read by ``reader``) each time the
    loops it shares with ``reader`` run an iteration."""
    shared = _shared_loops(writer, reader)
    box = _exact_write_box(index, loop, writer, buffer, shared)
    if box is None:
        return False
    realize = reader.realize
    bindings = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    free = {inner.loop_var: Range(inner.min, inner.extent) for inner in reader.inner_loops[shared:]}
    relaxer = RangeRelaxer(free) if free else None
    analyzer = Analyzer()
    for outer in reader.inner_loops[:shared]:
        analyzer.bind(outer.loop_var, Range(outer.min, outer.extent))
    for dim, (rng, written) in enumerate(zip(region.region, box)):
        read = Range(simplify(substitute(rng.min, bindings)), simplify(substitute(rng.extent, bindings)))
        if relaxer is not None:
            read = relaxer.relax(read, buffer.shape[dim])
        if not (
            analyzer.can_prove(written.min <= read.min)
            and analyzer.can_prove(read.min + read.extent <= written.min + written.extent)
        ):
            return False
    return True


def _exact_write_box(
    index: TreeIndex, loop: For, site: BlockSite, buffer: Buffer, shared: int
) -> tuple[Range, ...] | None:
    """The box of ``buffer`` that the block of ``site`` writes completely while the loops it
    does not share with the reader (its inner loops after the first ``shared``) run, or None
    when that cannot be shown: the block must run unconditionally (only loops and sequences
    between it and ``loop``, no predicate, no init), store ``buffer`` at its top level, and each
    index must be invariant or one of those loops' variables plus an invariant offset (each
    variable in at most one index), over loops of constant bounds that run at least once."""
    realize = site.realize
    block = realize.block
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1) or block.init is not None:
        return None
    for ancestor in index.ancestors(realize):
        if ancestor is loop:
            break
        if not isinstance(ancestor, (For, SeqStmt)):
            return None
    body = block.body.stmts if isinstance(block.body, SeqStmt) else (block.body,)
    store = next((s for s in body if isinstance(s, BufferStore) and s.buffer is buffer), None)
    if store is None:
        return None
    free = site.inner_loops[shared:]
    for free_loop in free:
        if not (
            isinstance(free_loop.min, IntImm) and isinstance(free_loop.extent, IntImm) and free_loop.extent.value >= 1
        ):
            return None
    by_var = {free_loop.loop_var: free_loop for free_loop in free}
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    used: set[Var] = set()
    box = []
    for index_expr in store.indices:
        value = simplify(substitute(index_expr, bindings))
        if not uses_any(value, list(by_var)):
            box.append(Range(value, IntImm(1, value.dtype)))
            continue
        var, offset = _var_plus_offset(value, by_var)
        if var is None or var in used:
            return None
        used.add(var)
        free_loop = by_var[var]
        box.append(Range(simplify(free_loop.min + offset), free_loop.extent))
    return tuple(box)


def _var_plus_offset(value: PrimExpr, by_var: dict[Var, For]) -> tuple[Var | None, PrimExpr]:
    """``(v, c)`` when ``value`` is ``v`` or ``v + c`` / ``c + v`` for a ``v`` of ``by_var``
    and a ``c`` free of them; ``(None, value)`` otherwise."""
    zero = IntImm(0, value.dtype)
    if isinstance(value, Var) and value in by_var:
        return value, zero
    if isinstance(value, Add):
        for var, offset in ((value.a, value.b), (value.b, value.a)):
            if isinstance(var, Var) and var in by_var and not uses_any(offset, list(by_var)):
                return var, offset
    return None, value


_deferral = threading.local()


@contextmanager
def deferred_independence_checks() -> Iterator[None]:
    """Within this block (this thread), ``parallel`` and ``vectorize`` skip their proof that the
    loop's iterations are independent (every other check stays), so they may return a program
    with a race. Only for a caller that proves it afterwards on the finished program with
    ``check_independent_loops`` before the program is used -- the tuner, which makes many more
    candidates than it measures and checks only the ones it picks (the proof costs about a
    third of making a candidate)."""
    previous = getattr(_deferral, "active", False)
    _deferral.active = True
    try:
        yield
    finally:
        _deferral.active = previous


def _checks_deferred() -> bool:
    return getattr(_deferral, "active", False)


def check_independent_loops(func: PrimFunc) -> None:
    """Raise ``ScheduleError`` (as ``parallel`` or ``vectorize`` would) for the first parallel
    or vectorized loop of ``func`` whose iterations are not provably independent: what those
    primitives check when applied, checked on a finished program
    (see ``deferred_independence_checks``)."""
    index = TreeIndex(func)
    for loop in list(index.loops.values()):
        if loop.kind is ForKind.PARALLEL:
            _check_independent(index, loop, ForKind.PARALLEL, "parallel", _iteration_local_buffers(func, loop))
        elif loop.kind is ForKind.VECTORIZED:
            _check_independent(index, loop, ForKind.VECTORIZED, "vectorize")


def check_parallel_loops_above(func: PrimFunc, block_name: str, primitive: str) -> None:
    """Refuse (as ``primitive``) when a parallel loop above block ``block_name`` of ``func`` no
    longer has independent iterations: for primitives that move a block under a loop that may
    already be parallel (``compute_at``, ``reverse_compute_at``)."""
    index = TreeIndex(func)
    realize = index.blocks.get(block_name)
    if realize is None:
        return
    for node in index.ancestors(realize):
        if isinstance(node, For) and node.kind is ForKind.PARALLEL:
            try:
                _check_independent(index, node, ForKind.PARALLEL, "parallel", _iteration_local_buffers(func, node))
            except ScheduleError as error:
                raise ScheduleError(
                    primitive,
                    f"block {block_name!r}",
                    f"the block would run under the parallel loop {node.loop_var.name}, whose iterations would "
                    f"then not be independent: {error.rule}",
                    error.fragment,
                ) from None


def _iteration_local_buffers(func: PrimFunc, loop: For) -> frozenset[Buffer]:
    """Buffers a block allocates (not parameters) that nothing outside ``loop`` touches.

    Such a buffer is scratch space of one iteration, like a packed tile computed under the loop
    by ``cache_read`` + ``compute_at``: lowering gives every iteration its own copy (it moves
    the allocation into the loop when each iteration writes what it reads before reading it)
    and refuses to build a parallel loop whose iterations would share one (``lower_parallel``).
    So redundant writes of the same elements by different iterations are not a race here.
    """
    allocated: set[Buffer] = set()
    outside: set[Buffer] = set()

    def walk(node: object, inside: bool) -> None:
        if isinstance(node, For) and node is loop:
            inside = True
        if isinstance(node, Block):
            allocated.update(node.alloc_buffers)
            if not inside:
                outside.update(region.buffer for region in (*node.reads, *node.writes))
                outside.update(match.source.buffer for match in node.match_buffers)
        if not inside and isinstance(node, (BufferLoad, BufferStore)):
            outside.add(node.buffer)
        if isinstance(node, Node):
            for name in type(node).child_fields():
                value = getattr(node, name)
                if isinstance(value, Node):
                    walk(value, inside)
                elif isinstance(value, tuple):
                    for item in value:
                        if isinstance(item, Node):
                            walk(item, inside)

    walk(func.body, False)
    # The root block's own (empty) regions do not count; its alloc_buffers are function scratch.
    return frozenset(allocated - outside - set(func.buffer_params))


def _set_kind(func: PrimFunc, index: TreeIndex, loop: For, kind: ForKind, thread_tag: str | None = None) -> PrimFunc:
    return replace_stmt(index, loop, loop.replace(kind=kind, thread_tag=thread_tag))


def _unbind(func: PrimFunc, loop_var: Var, primitive: str) -> tuple[PrimFunc, TreeIndex, For]:
    """The program with the loop's thread binding taken off (a serial loop runs the iterations
    the threads ran, in order, which is always right), and the loop again. A block whose
    reduction the loop drove across threads is no longer one: its annotation goes too."""
    index = TreeIndex(func)
    loop = _find_loop(index, loop_var, primitive)
    func = _set_kind(func, index, loop, ForKind.SERIAL)
    index = TreeIndex(func)
    loop = _find_loop(index, loop_var, primitive)
    for realize in list(index.blocks.values()):
        if "cross_thread_reduction" not in realize.block.annotations or not index.is_ancestor(loop, realize):
            continue
        if not any(isinstance(n, For) and n.thread_tag == "threadIdx.x" for n in index.ancestors(realize)):
            annotations = {k: v for k, v in realize.block.annotations.items() if k != "cross_thread_reduction"}
            func = with_annotations(index, realize, annotations)
            index = TreeIndex(func)
    loop = _find_loop(index, loop_var, primitive)
    return func, index, loop


def parallel(func: PrimFunc, loop_var: Var) -> PrimFunc:
    """Make a loop parallel: lowering outlines it and runs chunks of it on OpenMP threads.

    Preconditions: the loop is serial (or already parallel: nothing changes); no loop above or
    below it is parallel (nested parallelism is refused); no block under it binds a reduction
    or opaque iterator to it; no statement under it is outside every block; blocks under it
    that share a buffer one of them writes touch disjoint parts of it in different iterations
    (except scratch buffers used only under the loop, which every iteration gets a copy of).

    Before (``parallel(i)``)::

        for i, j in T.grid(100, 8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i in T.parallel(100):
            for j in range(8):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = A[vi, vj] * 2.0
    """
    index = TreeIndex(func)
    loop = _find_loop(index, loop_var, "parallel")
    if _check_kind(loop, ForKind.PARALLEL, None, "parallel"):
        return func
    for node in index.ancestors(loop):
        if isinstance(node, For) and node.kind is ForKind.PARALLEL:
            raise ScheduleError(
                "parallel",
                loop_target(loop),
                f"nested parallelism: loop {node.loop_var.name} above it is already parallel",
                loop_header(node),
            )
    inner = _find_kind(loop.body, ForKind.PARALLEL)
    if inner is not None:
        raise ScheduleError(
            "parallel",
            loop_target(loop),
            f"nested parallelism: loop {inner.loop_var.name} below it is already parallel",
            loop_header(inner),
        )
    if not _checks_deferred():
        _check_independent(index, loop, ForKind.PARALLEL, "parallel", _iteration_local_buffers(func, loop))
    return _set_kind(func, index, loop, ForKind.PARALLEL)


def _find_kind(stmt: Stmt, kind: ForKind, thread_tag: str | None = None) -> For | None:
    """The first loop of ``kind`` (and tag) in ``stmt``, across block boundaries."""
    if isinstance(stmt, For) and stmt.kind is kind and (thread_tag is None or stmt.thread_tag == thread_tag):
        return stmt
    children = child_stmts(stmt)
    if isinstance(stmt, BlockRealize):
        children = [stmt.block]
    for child in children:
        found = _find_kind(child, kind, thread_tag)
        if found is not None:
            return found
    return None


def vectorize(func: PrimFunc, loop_var: Var) -> PrimFunc:
    """Make a loop vectorized: lowering turns its body into vector operations of ``extent``
    lanes (a body it cannot express exactly stays a serial loop, still correct).

    Preconditions: the loop is serial (or already vectorized: nothing changes); its extent is
    a constant; no block under it binds a reduction or opaque iterator to it; no statement
    under it is outside every block; blocks under it that share a buffer one of them writes
    touch disjoint parts of it in different iterations.

    Before (``vectorize(j)``)::

        for i, j in T.grid(100, 8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i in range(100):
            for j in T.vectorized(8):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = A[vi, vj] * 2.0
    """
    index = TreeIndex(func)
    loop = _find_loop(index, loop_var, "vectorize")
    if _check_kind(loop, ForKind.VECTORIZED, None, "vectorize"):
        return func
    if not isinstance(loop.extent, IntImm):
        raise ScheduleError(
            "vectorize", loop_target(loop), f"the extent must be a constant, got {loop.extent}", loop_header(loop)
        )
    if not _checks_deferred():
        _check_independent(index, loop, ForKind.VECTORIZED, "vectorize")
    return _set_kind(func, index, loop, ForKind.VECTORIZED)


def unroll(func: PrimFunc, loop_var: Var) -> PrimFunc:
    """Mark a loop for unrolling: lowering replaces it by copies of its body when it is small
    (constant extent up to 64, 1024 statements), and keeps it as a serial loop with a
    ``pragma_unroll`` hint otherwise. The iterations keep their order, so any block may be
    under it.

    Any loop may be unrolled: a parallel, vectorized or thread-bound one loses that kind (its
    iterations then run in order, which is always right); an unrolled one stays as it is.

    Before (``unroll(j)``)::

        for i, j in T.grid(100, 8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i in range(100):
            for j in T.unroll(8):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = A[vi, vj] * 2.0
    """
    index = TreeIndex(func)
    loop = _find_loop(index, loop_var, "unroll")
    if loop.kind is ForKind.UNROLLED:
        return func
    if loop.kind is ForKind.THREAD_BINDING:
        func, index, loop = _unbind(func, loop_var, "unroll")
    return _set_kind(func, index, loop, ForKind.UNROLLED)


def bind(func: PrimFunc, loop_var: Var, thread_axis: str) -> PrimFunc:
    """Bind a loop to a GPU thread axis (``blockIdx.x``, ``threadIdx.y``, ``vthread.z``, ...):
    each iteration runs on its own thread. Only GPU targets run such loops; the interpreter
    runs the threads one after another.

    Preconditions: ``thread_axis`` is one of ``tir.ir.stmt.THREAD_TAGS``; the loop is serial,
    bound to another axis (the new binding replaces it) or already bound to that axis (nothing
    changes); no loop above or below it is bound to the
    same axis; no block under it binds a reduction or opaque iterator to it; no statement under
    it is outside every block; blocks under it that share a buffer one of them writes touch
    disjoint parts of it in different iterations. Exception, a cross-thread reduction: a loop
    bound to ``threadIdx.x`` that holds exactly one block, a sum / product / max / min
    reduction with an identity init whose reduce iterators (only) the loop drives, is accepted,
    and the block is annotated ``{"cross_thread_reduction": True}``; GPU lowering combines the
    threads' partial values with warp shuffles (``lower_cross_thread_reduction``).

    Before (``bind(i, "blockIdx.x")``, ``bind(j, "threadIdx.x")``)::

        for i, j in T.grid(100, 8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i in T.thread_binding(100, thread="blockIdx.x"):
            for j in T.thread_binding(8, thread="threadIdx.x"):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = A[vi, vj] * 2.0
    """
    index = TreeIndex(func)
    loop = _find_loop(index, loop_var, "bind")
    if thread_axis not in THREAD_TAGS:
        raise ScheduleError(
            "bind", loop_target(loop), f"unknown thread axis {thread_axis!r}; expected one of {list(THREAD_TAGS)}"
        )
    if loop.kind is ForKind.THREAD_BINDING and loop.thread_tag != thread_axis:
        # Bound again: the new binding replaces the old one and is checked like a first one.
        func, index, loop = _unbind(func, loop_var, "bind")
    if _check_kind(loop, ForKind.THREAD_BINDING, thread_axis, "bind"):
        return func
    above = [n for n in index.ancestors(loop) if isinstance(n, For) and n.thread_tag == thread_axis]
    below = _find_kind(loop.body, ForKind.THREAD_BINDING, thread_axis)
    for other, where in ((above[0] if above else None, "above"), (below, "below")):
        if other is not None:
            raise ScheduleError(
                "bind",
                loop_target(loop),
                f"loop {other.loop_var.name} {where} it is already bound to {thread_axis}",
                loop_header(other),
            )
    reduction = _cross_thread_reduction(loop, thread_axis)
    if reduction is None:
        _check_independent(index, loop, ForKind.THREAD_BINDING, "bind")
    func = _set_kind(func, index, loop, ForKind.THREAD_BINDING, thread_axis)
    if reduction is None:
        return func
    index = TreeIndex(func)
    realize = index.blocks[reduction]
    annotations = {**realize.block.annotations, "cross_thread_reduction": True}
    return with_annotations(index, realize, annotations)


def _cross_thread_reduction(loop: For, thread_axis: str) -> str | None:
    """The name of the block whose reduction ``loop`` may drive across threads, or None.

    That is the case when ``thread_axis`` is ``threadIdx.x``, the loop holds exactly one block
    and nothing else, the block is a sum / product / max / min reduction with an identity init
    (``ReductionShape`` and ``match_reduction``), and the loop drives its reduce iterators only;
    lowering then combines the threads' partial values with warp shuffles
    (``tir.transform.lower_cross_thread_reduction``).
    """
    if thread_axis != "threadIdx.x":
        return None
    try:
        sites = collect_block_sites(loop.body, [loop.loop_var], "bind", loop_target(loop), "")
    except ScheduleError:
        return None
    if len(sites) != 1:
        return None
    realize = sites[0].realize
    block = realize.block
    index = _SubtreeIndex(loop, realize, sites[0].inner_loops)
    shape = ReductionShape("bind", index, realize)  # type: ignore[arg-type]
    try:
        check_iterator_kinds(
            sites, [loop.loop_var], frozenset({IterKind.SPATIAL, IterKind.REDUCE}), "bind", "", lambda kind: ""
        )
        shape.check_kinds()
        shape.check_outputs(shape.check_init_stores(init_stores(block)))
    except ScheduleError:
        return None
    if loop.loop_var in shape.spatial_loop_vars or match_reduction(block) is None:
        return None
    return block.name


class _SubtreeIndex:
    """What ``ReductionShape`` asks of a TreeIndex: the loops above a block, ``loop`` included."""

    def __init__(self, loop: For, realize: BlockRealize, inner: list[For]) -> None:
        self._loops = [loop, *inner]
        self._realize = realize

    def loops_above(self, realize: BlockRealize) -> list[For]:
        return list(self._loops)


# ---------------------------------------------------------------- annotations

_SCALARS = (bool, int, float, str)


def _check_annotation(primitive: str, target: str, key: Any, value: Any) -> None:
    if not isinstance(key, str) or not key:
        raise ScheduleError(primitive, target, f"the annotation key must be a non-empty string, got {key!r}")
    if not _plain_value(value):
        raise ScheduleError(
            primitive,
            target,
            "an annotation value must be an int, float, str, bool, or a list or a dict (with string keys) of "
            f"those, got {value!r}",
        )


def _plain_value(value: Any) -> bool:
    """Data that prints as Python and reads back: scalars, and lists and string-keyed dicts of them."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, list):
        return all(_plain_value(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_value(v) for k, v in value.items())
    return False


def _annotated_stmt(index: TreeIndex, target: str | Var, primitive: str) -> tuple[For | BlockRealize, str]:
    if isinstance(target, Var):
        loop = _find_loop(index, target, primitive)
        return loop, loop_target(loop)
    realize = find_block(index, target, primitive)
    return realize, f"block {target!r}"


def with_annotations(index: TreeIndex, stmt: For | BlockRealize, annotations: dict[str, Any]) -> PrimFunc:
    if isinstance(stmt, For):
        return replace_stmt(index, stmt, stmt.replace(annotations=annotations))
    return replace_stmt(index, stmt, stmt.replace(block=stmt.block.replace(annotations=annotations)))


def annotate(func: PrimFunc, target: str | Var, key: str, value: Any) -> PrimFunc:
    """Set the annotation ``key`` of a loop (by loop variable) or a block (by name) to ``value``
    (an int, float, str, bool or a list of those), replacing an earlier value of that key.

    Before (``annotate(j, "pragma_auto_unroll_max_step", 16)``)::

        for i, j in T.grid(100, 8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i in range(100):
            for j in T.serial(8, annotations={"pragma_auto_unroll_max_step": 16}):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = A[vi, vj] * 2.0

    On a block the annotation is printed as ``T.block_attr({...})``.
    """
    index = TreeIndex(func)
    stmt, where = _annotated_stmt(index, target, "annotate")
    _check_annotation("annotate", where, key, value)
    current = stmt.annotations if isinstance(stmt, For) else stmt.block.annotations
    stored = copy.deepcopy(value) if isinstance(value, (list, dict)) else value
    return with_annotations(index, stmt, {**current, key: stored})


def unannotate(func: PrimFunc, target: str | Var, key: str) -> PrimFunc:
    """Remove the annotation ``key`` of a loop (by loop variable) or a block (by name).

    Precondition: the loop or block has that annotation.

    Before (``unannotate(block "B", "schedule_rule")``)::

        for i in range(100):
            with T.block("B"):
                vi = T.remap("S", i)
                T.block_attr({"schedule_rule": "none"})
                B[vi] = A[vi] * 2.0

    After::

        for i in range(100):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0
    """
    index = TreeIndex(func)
    stmt, where = _annotated_stmt(index, target, "unannotate")
    current = stmt.annotations if isinstance(stmt, For) else stmt.block.annotations
    if key not in current:
        raise ScheduleError("unannotate", where, f"there is no annotation {key!r} (it has {sorted(current)})")
    return with_annotations(index, stmt, {k: v for k, v in current.items() if k != key})


class AnnotationPrimitives:
    """Schedule methods for parallel, vectorize, unroll, bind, annotate, unannotate."""

    @doc_from(parallel)
    def parallel(self, loop: LoopRV) -> None:  # type: ignore[misc]
        node = self.resolve_loop(loop, "parallel")  # type: ignore[attr-defined]
        self._apply("parallel", (loop,), {}, lambda func: parallel(func, node.loop_var))  # type: ignore[attr-defined]

    @doc_from(vectorize)
    def vectorize(self, loop: LoopRV) -> None:  # type: ignore[misc]
        node = self.resolve_loop(loop, "vectorize")  # type: ignore[attr-defined]
        self._apply("vectorize", (loop,), {}, lambda func: vectorize(func, node.loop_var))  # type: ignore[attr-defined]

    @doc_from(unroll)
    def unroll(self, loop: LoopRV) -> None:  # type: ignore[misc]
        node = self.resolve_loop(loop, "unroll")  # type: ignore[attr-defined]
        self._apply("unroll", (loop,), {}, lambda func: unroll(func, node.loop_var))  # type: ignore[attr-defined]

    @doc_from(bind)
    def bind(self, loop: LoopRV, thread_axis: str) -> None:  # type: ignore[misc]
        node = self.resolve_loop(loop, "bind")  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            "bind", (loop,), {"thread_axis": thread_axis}, lambda func: bind(func, node.loop_var, thread_axis)
        )

    @doc_from(annotate)
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:  # type: ignore[misc]
        target = self._annotation_target(block_or_loop, "annotate")
        # The trace keeps its own copy.
        ann_val = copy.deepcopy(ann_val) if isinstance(ann_val, (list, dict)) else ann_val
        # A sampled value (ExprRV) is stored as its integer; the trace keeps the handle, so a
        # replay with another decision annotates with the new sample.
        value = ann_val.value if isinstance(ann_val, ExprRV) else ann_val
        self._apply(  # type: ignore[attr-defined]
            "annotate",
            (block_or_loop,),
            {"ann_key": ann_key, "ann_val": ann_val},
            lambda func: annotate(func, target, ann_key, value),
        )

    @doc_from(unannotate)
    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:  # type: ignore[misc]
        target = self._annotation_target(block_or_loop, "unannotate")
        self._apply(  # type: ignore[attr-defined]
            "unannotate", (block_or_loop,), {"ann_key": ann_key}, lambda func: unannotate(func, target, ann_key)
        )

    def _annotation_target(self, block_or_loop: BlockRV | LoopRV, primitive: str) -> str | Var:
        if isinstance(block_or_loop, LoopRV):
            return self.resolve_loop(block_or_loop, primitive).loop_var  # type: ignore[attr-defined,no-any-return]
        return self.resolve_block(block_or_loop, primitive).block.name  # type: ignore[attr-defined,no-any-return]
