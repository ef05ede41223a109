"""Schedule primitive: rolling_buffer.

A producer moved under a tile loop of its consumers (``compute_at``) computes, per tile, a
window of its buffer; consecutive tiles' windows overlap (a 3-tap stencil over 4-row tiles
needs 6 rows, 2 of them the previous tile's). ``rolling_buffer`` (TVM's) keeps only one
window: the buffer shrinks to the window's extent along one dimension, every access indexes
it modulo that extent (a ring), and the producer skips what the previous tile already
computed.

TVM trusts the schedule for most of this; here every fact the rewrite relies on is proved or
the primitive refuses. The argument, per iteration ``o`` of the loops down to the lowest loop
``L`` around the producer ``P`` and all its consumers:

- ``P`` writes exactly the box ``W(o)``: per dimension ``[m(o), m(o) + E)``, ``m`` of the form
  ``x * s`` or ``(x * s) // d`` (plus a constant) for one loop ``x`` (or constant), each
  offset one loop of ``P``'s own nest sweeping its whole range, cut only by bounds on the
  element (``T.where`` of an imperfect split). ``P`` is the only writer of the buffer, writes
  nothing else, computes each element from its index alone (its iterators are its output's
  indices, its reductions run inside ``L``, its inputs do not change while the loops run), and
  runs before the consumers.
- Every read of the buffer in iteration ``o`` (the consumers', ``P``'s own) lies in ``W(o)``:
  checked at every point of the loops down to ``L`` (constant extents), with interval bounds
  over the loops inside.
- The ring dimension's window moves with its loop only, so one iteration's accesses, all in
  one window of extent ``E``, never share a ring slot; and an element in the first
  ``E - ceil(s / d)`` positions of a window, when its loop ``x`` is past its first iteration,
  lay in the window of iteration ``x - 1``, computed there, and no write since (all in windows
  holding that element) reached its slot. So it is skipped, not recomputed.

An input of ``P`` that a block before it writes in the same tile (the next stage of a cascade)
must be written, per tile, as a whole box holding what ``P`` reads; where that writer is itself
a ring (an earlier ``rolling_buffer``), the elements it skips are taken to be in its ring, as
that earlier step proved. Unlike TVM, every iterator bound to a loop whose window overlaps
becomes opaque, not only the ring dimension's: ``parallel`` or ``reorder`` of such a loop would
break the skipping, and opaque iterators make those primitives refuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tir.analysis.tree import TreeIndex
from tir.arith import Analyzer
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
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IntImm,
    IRMutator,
    IRVisitor,
    IterVar,
    Max,
    Min,
    Mul,
    Or,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    free_vars,
    replace_buffers,
    substitute,
)
from tir.ir import Add as AddExpr
from tir.ir import post_order_visit as _visit
from tir.ir.expr import IterKind, const
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import block_target, doc_from, find_block

_PRIMITIVE = "rolling_buffer"

#: The most points of the loops down to the common loop that the containment checks visit.
_MAX_GRID = 1 << 20

# Per-point inclusive intervals, numpy arrays (or ints) over the grid of outer loop values.
_Interval = tuple[np.ndarray | int, np.ndarray | int]


@dataclass(frozen=True)
class _Dim:
    """One dimension of the producer's per-iteration window: ``[start, start + extent)``,
    ``start`` = ``(var * stride) // divisor + c`` (``var`` None: a constant ``start``), ``offset``
    the loop of the producer's nest that sweeps it (None for extent 1)."""

    start: PrimExpr
    extent: int
    var: Var | None
    stride: int
    divisor: int
    offset: Var | None

    @property
    def overlap(self) -> int:
        """How many leading positions of a window the previous iteration's window holds."""
        if self.var is None:
            return 0
        return self.extent - math.ceil(self.stride / self.divisor)


def rolling_buffer(func: PrimFunc, block_name: str, write_buffer_index: int) -> PrimFunc:
    """Turn the buffer ``block.writes[write_buffer_index]`` into a ring buffer along one
    dimension: it keeps one tile's window, indexed modulo the window's extent, and the block
    skips the elements the previous tile computed.

    The dimension is the one whose window moves with the outermost loop (between the
    allocation and the lowest loop around the block and all its consumers) and overlaps
    itself from one iteration to the next. Iterators of the block and its consumers bound to
    the loops whose windows overlap become opaque: those loops now carry a dependency.

    Preconditions (each refused with its reason): the buffer is allocated by a block and has
    one writer, this block, a leaf block that writes nothing else; the block and its readers
    share a loop (``compute_at`` the block under a loop of its consumers first), and the loops
    down to that loop are serial with constant bounds starting at 0; the block runs before its
    consumers under that loop; its output indices are its spatial iterators, its reductions
    run inside the common loop, its predicate only bounds the output element; every
    dimension's window starts at ``x * s``, ``(x * s) // d`` (plus a constant) or a constant
    and is swept by one loop of the block's nest; some window overlaps its predecessor; every
    read of the buffer lies in the window of its iteration; the block's inputs are not changed
    under the loops except by blocks before it in the same iteration.

    Before (``rolling_buffer(B, 0)``, after ``compute_at(B, i_0)``)::

        B = T.alloc_buffer((10,), "int32")
        for i_0 in range(2):
            for ax0, ax1 in T.grid(6, 3):
                with T.block("B"):
                    vi = T.spatial_axis(10, i_0 * 4 + ax0)
                    vk = T.reduce_axis(3, ax1)
                    with T.init():
                        B[vi] = 0
                    B[vi] = B[vi] + A[vi + vk]
            for i_1, k in T.grid(4, 3):
                with T.block("C"):
                    vi = T.spatial_axis(8, i_0 * 4 + i_1)
                    vk = T.reduce_axis(3, k)
                    with T.init():
                        C[vi] = 0
                    C[vi] = C[vi] + B[vi + vk]

    After::

        B = T.alloc_buffer((6,), "int32")
        for i_0 in range(2):
            for ax0, ax1 in T.grid(6, 3):
                with T.block("B"):
                    vi = T.opaque_axis(10, i_0 * 4 + ax0)
                    vk = T.reduce_axis(3, ax1)
                    T.where(i_0 < 1 or 2 <= ax0)
                    with T.init():
                        B[vi % 6] = 0
                    B[vi % 6] = B[vi % 6] + A[vi + vk]
            for i_1, k in T.grid(4, 3):
                with T.block("C"):
                    vi = T.opaque_axis(8, i_0 * 4 + i_1)
                    vk = T.reduce_axis(3, k)
                    with T.init():
                        C[vi] = 0
                    C[vi] = C[vi] + B[(vi + vk) % 6]
    """
    index = TreeIndex(func)
    producer = find_block(index, block_name, _PRIMITIVE)
    target = block_target(producer)
    block = producer.block
    if isinstance(write_buffer_index, bool) or not 0 <= write_buffer_index < len(block.writes):
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"write_buffer_index {write_buffer_index} is out of range: the block writes {len(block.writes)} buffer(s)",
        )
    buffer = block.writes[write_buffer_index].buffer
    name = buffer.name
    alloc_realize = _allocating_block(func, index, buffer, target)
    if buffer.strides or buffer.elem_offset is not None or buffer.axis_separators or buffer.dim_align:
        raise ScheduleError(_PRIMITIVE, target, f"{name} has an explicit layout (strides, offset); it cannot shrink")

    accesses = _accesses_of(func, buffer)
    writers = [r for r, stores in accesses.items() if stores[1]]
    others = [r for r in writers if r is not producer]
    if others:
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"{name} has other writers ({', '.join(repr(r.block.name) for r in others)}): "
            "a rolling buffer needs one producer (only read-after-write dependences)",
            others[0],
        )
    consumers = [r for r in accesses if r is not producer]
    if not consumers:
        raise ScheduleError(_PRIMITIVE, target, f"nothing else reads {name}: there is no window to keep")
    for realize in [producer, *consumers]:
        if realize is alloc_realize or index.child_blocks(realize):
            raise ScheduleError(
                _PRIMITIVE,
                block_target(realize),
                f"{name} is accessed in a block with child blocks; only leaf blocks may touch a rolling buffer",
                realize,
            )
    if any(region.buffer is not buffer for region in block.writes):
        raise ScheduleError(
            _PRIMITIVE, target, f"the block writes buffers besides {name}; skipping its instances would lose them"
        )

    # The lowest loop around the producer and every consumer, and the loops down to it.
    common = _common_loop(index, producer, consumers, alloc_realize, name, target)
    outer = [node for node in reversed(list(index.ancestors(common))) if _below(index, node, alloc_realize)]
    outer_loops = [node for node in outer if isinstance(node, For)] + [common]
    for loop in outer_loops:
        _check_outer_loop(loop, name, target)
    position = _positions(index, common, producer, consumers, target)
    grid = _Grid(outer_loops, target)

    # The producer's window per iteration, and what it is.
    inner = _inner_loops(index, producer, common)
    dims, bounds = _producer_window(producer, buffer, outer_loops, inner, target)
    candidates = [k for k, dim in enumerate(dims) if dim.overlap > 0]
    if not candidates:
        shown = ", ".join(f"[{d.start}, {d.start} + {d.extent})" for d in dims)
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"no dimension of {name}'s window per iteration ({shown}) overlaps the previous iteration's "
            "(a start x * s or (x * s) // d with an extent above the step): there is nothing to roll",
            producer,
        )
    loop_order = {id(loop.loop_var): k for k, loop in enumerate(outer_loops)}
    ring = min(candidates, key=lambda k: loop_order[id(dims[k].var)])
    _check_reads(consumers, buffer, dims, bounds, grid, index, common, target)
    _check_inputs(func, index, producer, buffer, common, outer_loops, position, grid, target, set())

    skip_vars = {id(dims[k].var) for k in candidates}
    return _rewrite(func, producer, consumers, buffer, dims, ring, candidates, skip_vars)


# ---------------------------------------------------------------- finding things


def _allocating_block(func: PrimFunc, index: TreeIndex, buffer: Buffer, target: str) -> BlockRealize:
    if any(param is buffer for param in func.params):
        raise ScheduleError(
            _PRIMITIVE, target, f"{buffer.name} is a function parameter (an output); only an allocated buffer can roll"
        )
    found: list[Block] = []
    viewed = False

    class Find(IRVisitor):
        def visit_Block(self, node: Block) -> None:
            nonlocal viewed
            if any(b is buffer for b in node.alloc_buffers):
                found.append(node)
            viewed = viewed or any(m.source.buffer is buffer for m in node.match_buffers)
            self.generic_visit(node)

    Find().visit(func.body)
    if not found:
        raise ScheduleError(_PRIMITIVE, target, f"{buffer.name} is not allocated by a block (a match_buffer view?)")
    if viewed:
        raise ScheduleError(_PRIMITIVE, target, f"{buffer.name} is viewed through a match_buffer; it cannot shrink")
    parent = index.parent_of(found[0])
    assert isinstance(parent, BlockRealize)
    return parent


def _accesses_of(func: PrimFunc, buffer: Buffer) -> dict[BlockRealize, tuple[bool, bool]]:
    """The innermost block of every load and store of ``buffer``: (loads, stores)."""
    found: dict[BlockRealize, tuple[bool, bool]] = {}
    stack: list[BlockRealize] = []

    class Walk(IRVisitor):
        def visit_BlockRealize(self, node: BlockRealize) -> None:
            stack.append(node)
            self.generic_visit(node)
            stack.pop()

        def visit_BufferLoad(self, node: BufferLoad) -> None:
            if node.buffer is buffer:
                loads, stores = found.get(stack[-1], (False, False))
                found[stack[-1]] = (True, stores)
            self.generic_visit(node)

        def visit_BufferStore(self, node: BufferStore) -> None:
            if node.buffer is buffer:
                loads, stores = found.get(stack[-1], (False, False))
                found[stack[-1]] = (loads, True)
            self.generic_visit(node)

    Walk().visit(func.body)
    return found


def _below(index: TreeIndex, node: Stmt, ancestor: Stmt) -> bool:
    return index.is_ancestor(ancestor, node)


def _common_loop(
    index: TreeIndex,
    producer: BlockRealize,
    consumers: list[BlockRealize],
    alloc_realize: BlockRealize,
    name: str,
    target: str,
) -> For:
    paths = [[producer, *index.ancestors(producer)]] + [[c, *index.ancestors(c)] for c in consumers]
    common_ids = set.intersection(*({id(node) for node in path} for path in paths))
    lowest = next(node for node in paths[0] if id(node) in common_ids)
    while isinstance(lowest, SeqStmt):  # the loop around a sequence holding them
        parent = index.parent_of(lowest)
        assert parent is not None
        lowest = parent
    readers = ", ".join(repr(c.block.name) for c in consumers)
    if not isinstance(lowest, For):
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"the block and the readers of {name} ({readers}) share no loop: compute_at the block under a loop "
            "of its consumers first, so that a tile of the consumers has a window of the producer",
        )
    # Between the allocation and each access only loops and sequences: no branch, no block.
    for path in paths:
        for node in path[1:]:
            if node is alloc_realize.block:
                break
            if not isinstance(node, (For, SeqStmt)):
                raise ScheduleError(
                    _PRIMITIVE,
                    target,
                    f"a {type(node).__name__} lies between the allocation of {name} and block "
                    f"{path[0].block.name!r}; only loops may",
                    node,
                )
    return lowest


def _check_outer_loop(loop: For, name: str, target: str) -> None:
    if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or loop.thread_tag:
        raise ScheduleError(
            _PRIMITIVE,
            f"loop {loop.loop_var.name}",
            f"the loops around the producer and the consumers of {name} must run in order (serial or unrolled): "
            "a rolling buffer carries values from one iteration to the next",
        )
    if any("software_pipeline" in key for key in loop.annotations):
        raise ScheduleError(
            _PRIMITIVE,
            f"loop {loop.loop_var.name}",
            f"the loop is software-pipelined: its stages would not run in the order the ring of {name} needs",
        )
    if not (isinstance(loop.min, IntImm) and loop.min.value == 0 and isinstance(loop.extent, IntImm)):
        raise ScheduleError(
            _PRIMITIVE,
            f"loop {loop.loop_var.name}",
            f"the loops around the producer and the consumers of {name} need constant extents and start at 0",
        )


def _positions(
    index: TreeIndex, common: For, producer: BlockRealize, consumers: list[BlockRealize], target: str
) -> dict[int, int]:
    """Which statement of the common loop's body holds each block; the producer's comes first."""
    body = common.body
    items = body.stmts if isinstance(body, SeqStmt) else (body,)

    def position(realize: BlockRealize) -> int:
        chain = [realize, *index.ancestors(realize)]
        return next(k for k, item in enumerate(items) if any(node is item for node in chain))

    found = {id(producer): position(producer)}
    for consumer in consumers:
        found[id(consumer)] = position(consumer)
        if found[id(consumer)] <= found[id(producer)]:
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"block {consumer.block.name!r} reads the buffer before the producer runs in the same iteration "
                f"of loop {common.loop_var.name}",
            )
    return found


def _inner_loops(index: TreeIndex, realize: BlockRealize, common: For) -> list[For]:
    loops: list[For] = []
    for node in index.ancestors(realize):
        if node is common:
            break
        if isinstance(node, For):
            loops.append(node)
    return loops[::-1]


def _var_ids(node: object) -> set[int]:
    """Ids of the variables ``node`` uses (the callers hold loop variables by id)."""
    return {id(v) for v in free_vars(node)}


# ---------------------------------------------------------------- the producer's window


def _producer_window(
    producer: BlockRealize, buffer: Buffer, outer_loops: list[For], inner: list[For], target: str
) -> tuple[list[_Dim], list[tuple[int | None, int | None]]]:
    """The window of each dimension, and the element bounds of the predicate (low, high)."""
    block = producer.block
    name = buffer.name
    indices = _output_indices(block, buffer, target)
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, producer.iter_values)}
    _check_deterministic(producer, outer_loops, inner, target)
    outer_ids = {id(loop.loop_var) for loop in outer_loops}
    inner_by_id = {id(loop.loop_var): loop for loop in inner}
    analyzer = Analyzer()
    for loop in [*outer_loops, *inner]:
        analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
    dims: list[_Dim] = []
    used_offsets: set[int] = set()
    used_vars: set[int] = set()
    for k, idx in enumerate(indices):
        value = analyzer.simplify(substitute(idx, bindings))
        start = analyzer.simplify(substitute(value, {loop.loop_var: const(0, loop.loop_var.dtype) for loop in inner}))
        offset = analyzer.simplify(value - start)
        problem = f"dimension {k} of {name}'s window ({value})"
        if isinstance(offset, IntImm) and offset.value == 0:
            extent, offset_var = 1, None
        elif isinstance(offset, Var) and id(offset) in inner_by_id and id(offset) not in used_offsets:
            loop = inner_by_id[id(offset)]
            if not (isinstance(loop.min, IntImm) and loop.min.value == 0 and isinstance(loop.extent, IntImm)):
                raise ScheduleError(_PRIMITIVE, target, f"{problem}: its loop needs constant bounds from 0")
            extent, offset_var = loop.extent.value, offset
            used_offsets.add(id(offset))
        else:
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"{problem} is not swept by one loop of the block's own nest: the window is not proved written whole",
                producer,
            )
        if _var_ids(start) - outer_ids:
            raise ScheduleError(
                _PRIMITIVE, target, f"{problem} starts at {start}, which depends on more than the tile loops"
            )
        form = _start_form(start, outer_ids)
        if form is None:
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"{problem} starts at {start}; a rolling window starts at x * s or (x * s) // d, plus a constant, "
                "or at a constant (x one loop, s and d positive constants)",
                producer,
            )
        var, stride, divisor = form
        if var is not None:
            if id(var) in used_vars:
                raise ScheduleError(_PRIMITIVE, target, f"{problem}: loop {var.name} moves two dimensions' windows")
            used_vars.add(id(var))
        dims.append(_Dim(start, extent, var, stride, divisor, offset_var))
    bounds = _predicate_bounds(producer, indices, bindings, analyzer, target)
    return dims, bounds


def _output_indices(block: Block, buffer: Buffer, target: str) -> tuple[PrimExpr, ...]:
    """The indices every store (and the block's own loads) of ``buffer`` use: distinct spatial
    iterators or constants, covering every spatial iterator."""
    found: list[tuple[PrimExpr, ...]] = []
    _visit(
        (block.init, block.body),
        lambda n: found.append(n.indices) if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buffer else None,
    )
    first = found[0]
    if any(len(ind) != len(first) or any(not _same_index(a, b) for a, b in zip(ind, first)) for ind in found):
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"the block touches {buffer.name} at more than one index; its element is not its instance",
        )
    # Opaque iterators (a rolled consumer's, say) must index the output like spatial ones.
    spatial = {id(iv.var): iv for iv in block.iter_vars if iv.kind is not IterKind.REDUCE}
    seen: set[int] = set()
    for idx in first:
        if isinstance(idx, IntImm):
            continue
        if not isinstance(idx, Var) or id(idx) not in spatial or id(idx) in seen:
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"{buffer.name} is written at [{', '.join(map(str, first))}]; "
                "each index must be its own spatial iterator",
            )
        seen.add(id(idx))
    missing = [iv.var.name for key, iv in spatial.items() if key not in seen and not _unit(iv.dom)]
    if missing:
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"spatial iterator(s) {', '.join(missing)} do not index {buffer.name}: instances would share elements",
        )
    return first


def _same_index(a: PrimExpr, b: PrimExpr) -> bool:
    """The same index expression: one variable (by identity), one constant, or one operation
    on the same operands."""
    if a is b:
        return True
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    if type(a) is type(b) and isinstance(a, (AddExpr, Sub, Mul, FloorDiv, FloorMod)):
        return _same_index(a.a, b.a) and _same_index(a.b, b.b)  # type: ignore[attr-defined]
    return False


def _unit(dom: Range) -> bool:
    return isinstance(dom.extent, IntImm) and dom.extent.value == 1


def _check_deterministic(realize: BlockRealize, outer_loops: list[For], inner: list[For], target: str) -> None:
    """Each instance computes its element from its iterators alone, its reduction whole."""
    block = realize.block
    loop_ids = {id(loop.loop_var) for loop in [*outer_loops, *inner]}
    outer_ids = {id(loop.loop_var) for loop in outer_loops}
    if _var_ids((block.init, block.body)) & loop_ids:
        raise ScheduleError(_PRIMITIVE, target, "the block's body uses loop variables, not only its iterators")
    reduce_loops: set[int] = set()
    spatial_loops: set[int] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        (reduce_loops if iv.kind is IterKind.REDUCE else spatial_loops).update(_var_ids(value))
    if reduce_loops & outer_ids:
        raise ScheduleError(
            _PRIMITIVE, target, "a reduce iterator is bound to a tile loop: each tile computes part of a reduction"
        )
    shared = reduce_loops & (spatial_loops | _var_ids(realize.predicate)) & loop_ids
    if shared:
        loop = next(lp for lp in [*outer_loops, *inner] if id(lp.loop_var) in shared)
        raise ScheduleError(
            _PRIMITIVE,
            target,
            f"loop {loop.loop_var.name} drives a reduce iterator and a spatial one or the predicate: "
            "an element's reduction is not whole in every instance",
        )


def _start_form(start: PrimExpr, outer_ids: set[int]) -> tuple[Var | None, int, int] | None:
    """``start`` as ``(var, stride, divisor)``: ``(var * stride) // divisor`` plus a constant
    (which moves no window); a constant: (None, 0, 1)."""
    if isinstance(start, IntImm):
        return None, 0, 1
    if isinstance(start, (AddExpr, Sub)) and isinstance(start.b, IntImm):
        start = start.a
    elif isinstance(start, AddExpr) and isinstance(start.a, IntImm):
        start = start.b
    divisor = 1
    if isinstance(start, FloorDiv) and isinstance(start.b, IntImm) and start.b.value > 0:
        start, divisor = start.a, start.b.value
    stride = 1
    if isinstance(start, Mul):
        a, b = (start.a, start.b) if isinstance(start.b, IntImm) else (start.b, start.a)
        if not isinstance(b, IntImm):
            return None
        start, stride = a, b.value
    if not isinstance(start, Var) or id(start) not in outer_ids or stride <= 0:
        return None
    return start, stride, divisor


def _predicate_bounds(
    producer: BlockRealize,
    indices: tuple[PrimExpr, ...],
    bindings: dict[Var, PrimExpr],
    analyzer: Analyzer,
    target: str,
) -> list[tuple[int | None, int | None]]:
    """The predicate as bounds on the output element per dimension (low, high inclusive);
    anything else is refused."""
    values = [analyzer.simplify(substitute(idx, bindings)) for idx in indices]
    bounds: list[tuple[int | None, int | None]] = [(None, None)] * len(indices)
    for atom in _conjuncts(producer.predicate):
        if isinstance(atom, IntImm) and atom.value:
            continue
        parsed = _bound_atom(atom)
        dim = None
        if parsed is not None:
            side = analyzer.simplify(parsed[0])
            dim = next((k for k, v in enumerate(values) if analyzer.can_prove_equal(v, side)), None)
        if parsed is None or dim is None:
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"the block's predicate term {atom} is not a constant bound on one index of its output",
                producer,
            )
        _, low, high = parsed
        old_low, old_high = bounds[dim]
        bounds[dim] = (
            low if old_low is None else max(old_low, low) if low is not None else old_low,
            high if old_high is None else min(old_high, high) if high is not None else old_high,
        )
    return bounds


def _conjuncts(expr: PrimExpr) -> list[PrimExpr]:
    if isinstance(expr, And):
        return _conjuncts(expr.a) + _conjuncts(expr.b)
    return [expr]


def _bound_atom(atom: PrimExpr) -> tuple[PrimExpr, int | None, int | None] | None:
    """``e < c`` and friends as ``(e, low, high)``."""
    if isinstance(atom, (LT, LE, GT, GE)):
        if isinstance(atom.b, IntImm):
            side, c, flip = atom.a, atom.b.value, False
        elif isinstance(atom.a, IntImm):
            side, c, flip = atom.b, atom.a.value, True
        else:
            return None
        kind = type(atom)
        if flip:
            kind = {LT: GT, LE: GE, GT: LT, GE: LE}[kind]
        if kind is LT:
            return side, None, c - 1
        if kind is LE:
            return side, None, c
        if kind is GT:
            return side, c + 1, None
        return side, c, None
    return None


# ---------------------------------------------------------------- checks at every tile


class _Grid:
    """Every point of the loops down to the common loop, as broadcastable numpy arrays."""

    def __init__(self, loops: list[For], target: str) -> None:
        sizes = [loop.extent.value for loop in loops]  # type: ignore[attr-defined]
        if math.prod(sizes) > _MAX_GRID:
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"the tile loops have {math.prod(sizes)} points; the window checks visit at most {_MAX_GRID}",
            )
        self.env: dict[int, _Interval] = {}
        for k, (loop, size) in enumerate(zip(loops, sizes)):
            shape = [1] * len(loops)
            shape[k] = size
            values = np.arange(size, dtype=np.int64).reshape(shape)
            self.env[id(loop.loop_var)] = (values, values)

    def interval(self, expr: PrimExpr, ranges: dict[int, _Interval]) -> _Interval | None:
        return _interval(expr, {**self.env, **ranges})


def _interval(expr: PrimExpr, env: dict[int, _Interval]) -> _Interval | None:
    """Inclusive bounds of integer ``expr`` per grid point; None for what is not followed."""
    if isinstance(expr, IntImm):
        return expr.value, expr.value
    if isinstance(expr, Var):
        return env.get(id(expr))
    if isinstance(expr, (AddExpr, Sub, Mul, FloorDiv, FloorMod, Min, Max)):
        a, b = _interval(expr.a, env), _interval(expr.b, env)
        if a is None or b is None:
            return None
        if isinstance(expr, AddExpr):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(expr, Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(expr, Min):
            return np.minimum(a[0], b[0]), np.minimum(a[1], b[1])
        if isinstance(expr, Max):
            return np.maximum(a[0], b[0]), np.maximum(a[1], b[1])
        if isinstance(expr, Mul):
            corners = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
            return np.minimum.reduce(np.broadcast_arrays(*corners)), np.maximum.reduce(np.broadcast_arrays(*corners))
        if not isinstance(expr.b, IntImm) or expr.b.value <= 0:
            return None
        c = expr.b.value
        if isinstance(expr, FloorDiv):
            return np.floor_divide(a[0], c), np.floor_divide(a[1], c)
        whole = np.floor_divide(a[0], c) == np.floor_divide(a[1], c)
        return np.where(whole, np.mod(a[0], c), 0), np.where(whole, np.mod(a[1], c), c - 1)
    return None


def _iter_ranges(
    realize: BlockRealize, grid: _Grid, inner: list[For], cut_to_domains: bool = False
) -> dict[int, _Interval] | None:
    """Each iterator's values per grid point: its binding over the inner loops, cut by the
    predicate's constant bounds on bindings (an instance runs only where they hold) and, for a
    writer (``cut_to_domains``: claiming less written is safe), to its domain."""
    loops = {
        id(loop.loop_var): (loop.min.value, loop.min.value + loop.extent.value - 1)
        for loop in inner
        if isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)
    }
    if len(loops) != len(inner):
        return None
    analyzer = Analyzer()
    atoms = [parsed for parsed in map(_bound_atom, _conjuncts(realize.predicate)) if parsed is not None]
    ranges: dict[int, _Interval] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        found = grid.interval(value, loops)
        if found is None:
            return None
        low, high = found
        for side, at_least, at_most in atoms:
            if analyzer.can_prove_equal(side, value):
                low = low if at_least is None else np.maximum(low, at_least)
                high = high if at_most is None else np.minimum(high, at_most)
        if cut_to_domains:
            if not isinstance(iv.dom.min, IntImm) or not isinstance(iv.dom.extent, IntImm):
                return None
            low = np.maximum(low, iv.dom.min.value)
            high = np.minimum(high, iv.dom.min.value + iv.dom.extent.value - 1)
        ranges[id(iv.var)] = (low, high)
    return ranges


def _loads(realize: BlockRealize, buffer: Buffer) -> list[tuple[PrimExpr, ...]]:
    found: list[tuple[PrimExpr, ...]] = []
    block = realize.block
    _visit(
        (block.init, block.body),
        lambda n: found.append(n.indices) if isinstance(n, BufferLoad) and n.buffer is buffer else None,
    )
    return found


def _check_reads(
    consumers: list[BlockRealize],
    buffer: Buffer,
    dims: list[_Dim],
    bounds: list[tuple[int | None, int | None]],
    grid: _Grid,
    index: TreeIndex,
    common: For,
    target: str,
) -> None:
    """Every consumer read lies, at every tile, in what the producer wrote in that tile."""
    for consumer in consumers:
        ranges = _iter_ranges(consumer, grid, _inner_loops(index, consumer, common))
        for indices in _loads(consumer, buffer):
            for k, (idx, dim) in enumerate(zip(indices, dims)):
                found = None if ranges is None else grid.interval(idx, ranges)
                start = grid.interval(dim.start, {})
                ok = found is not None and start is not None
                if ok:
                    assert found is not None and start is not None
                    low, high = bounds[k]
                    ok = bool(np.all(found[0] >= start[0]) and np.all(found[1] <= start[0] + dim.extent - 1))
                    ok = ok and (low is None or bool(np.all(found[0] >= low)))
                    ok = ok and (high is None or bool(np.all(found[1] <= high)))
                if not ok:
                    raise ScheduleError(
                        _PRIMITIVE,
                        target,
                        f"block {consumer.block.name!r} reads {buffer.name}[{', '.join(map(str, indices))}], "
                        "not proved "
                        f"inside the producer's window [{dim.start}, {dim.start} + {dim.extent}) of dimension {k} "
                        "at every tile",
                        consumer,
                    )


def _check_inputs(
    func: PrimFunc,
    index: TreeIndex,
    reader: BlockRealize,
    skip: Buffer | None,
    common: For,
    outer_loops: list[For],
    position: dict[int, int],
    grid: _Grid,
    target: str,
    seen: set[int],
) -> None:
    """What ``reader`` reads (but ``skip``) does not change while the tile loops run, except by
    one block that runs before it in the same iteration of the common loop and writes, per
    tile, a box holding what ``reader`` reads; that block's inputs likewise."""
    if id(reader) in seen:
        return
    seen.add(id(reader))
    top = outer_loops[0]
    read_buffers: list[Buffer] = []
    block = reader.block
    _visit(
        (block.init, block.body),
        lambda n: (
            read_buffers.append(n.buffer)
            if isinstance(n, BufferLoad) and n.buffer is not skip and all(n.buffer is not b for b in read_buffers)
            else None
        ),
    )
    for read in read_buffers:
        writers = [r for r, (_, stores) in _accesses_of(func, read).items() if stores and _below(index, r, top)]
        if not writers:
            continue
        name = read.name
        if len(writers) > 1 or not _below(index, writers[0], common):
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"block {reader.block.name!r} reads {name}, which is written under the tile loops by "
                f"{', '.join(repr(w.block.name) for w in writers)}: the skipped elements would miss the change",
            )
        writer = writers[0]
        chain = [writer, *index.ancestors(writer)]
        items = common.body.stmts if isinstance(common.body, SeqStmt) else (common.body,)
        writer_position = next(k for k, item in enumerate(items) if any(node is item for node in chain))
        if writer_position >= position[id(reader)] or index.child_blocks(writer):
            raise ScheduleError(
                _PRIMITIVE,
                target,
                f"block {reader.block.name!r} reads {name}, which is written under the tile loops by "
                f"{writer.block.name!r}, not before it in the same tile: a skipped element, computed in an earlier "
                "tile, could come from other values",
            )
        inner = _inner_loops(index, writer, common)
        _check_deterministic(writer, outer_loops, inner, target)
        _check_cover(writer, reader, read, grid, inner, _inner_loops(index, reader, common), target)
        _check_inputs(
            func,
            index,
            writer,
            read,
            common,
            outer_loops,
            {**position, id(writer): writer_position},
            grid,
            target,
            seen,
        )


def _logical(idx: PrimExpr) -> tuple[PrimExpr, int | None]:
    """A ring index ``e % c`` as ``(e, c)``; any other as ``(idx, None)``."""
    if isinstance(idx, FloorMod) and isinstance(idx.b, IntImm):
        return idx.a, idx.b.value
    return idx, None


def _check_cover(
    writer: BlockRealize,
    reader: BlockRealize,
    buffer: Buffer,
    grid: _Grid,
    writer_inner: list[For],
    reader_inner: list[For],
    target: str,
) -> None:
    """At every tile, the reader's reads of ``buffer`` lie in the box the writer writes (the
    writer's indices are iterators, or ring indices of iterators, sweeping whole loops)."""
    stores: list[tuple[PrimExpr, ...]] = []
    block = writer.block
    _visit(
        (block.init, block.body),
        lambda n: stores.append(n.indices) if isinstance(n, BufferStore) and n.buffer is buffer else None,
    )
    problem = (
        f"block {reader.block.name!r} reads {buffer.name}, not proved written by block {writer.block.name!r} "
        "in the same tile"
    )
    first = stores[0]
    if any(len(s) != len(first) or any(not _same_index(a, b) for a, b in zip(s, first)) for s in stores):
        raise ScheduleError(_PRIMITIVE, target, problem)
    writer_ranges = _iter_ranges(writer, grid, writer_inner, cut_to_domains=True)
    reader_ranges = _iter_ranges(reader, grid, reader_inner)
    if writer_ranges is None or reader_ranges is None or not _writes_whole_box(writer, first, writer_inner):
        raise ScheduleError(_PRIMITIVE, target, problem)
    for loads in _loads(reader, buffer):
        for store_idx, load_idx in zip(first, loads):
            write, write_ring = _logical(store_idx)
            read, read_ring = _logical(load_idx)
            if write_ring != read_ring:
                raise ScheduleError(_PRIMITIVE, target, problem)
            wrote = grid.interval(write, writer_ranges)
            wanted = grid.interval(read, reader_ranges)
            if wrote is None or wanted is None or not (np.all(wanted[0] >= wrote[0]) and np.all(wanted[1] <= wrote[1])):
                raise ScheduleError(_PRIMITIVE, target, problem)


def _writes_whole_box(writer: BlockRealize, indices: tuple[PrimExpr, ...], inner: list[For]) -> bool:
    """Whether ``writer`` writes, per tile, every element of the box its indices span: each
    index a constant or an iterator (ring index of one) bound to ``start + v``, ``v`` a loop
    of its own nest that no other index uses; its predicate only constant bounds on bindings,
    or the skip terms of an earlier ``rolling_buffer`` (what they skip, the ring holds)."""
    bindings = {id(iv.var): value for iv, value in zip(writer.block.iter_vars, writer.iter_values)}
    inner_ids = {id(loop.loop_var) for loop in inner}
    used: set[int] = set()
    for idx in indices:
        var, _ = _logical(idx)
        if isinstance(var, IntImm):
            continue
        binding = bindings.get(id(var)) if isinstance(var, Var) else None
        if binding is None:
            return False
        sweeping = _var_ids(binding) & inner_ids
        if len(sweeping) > 1 or sweeping & used:
            return False
        used |= sweeping
        if sweeping and not isinstance(binding, Var):
            if not isinstance(binding, AddExpr):
                return False
            parts = [binding.a, binding.b]
            if not any(
                isinstance(p, Var) and id(p) in sweeping and not (_var_ids(q) & inner_ids)
                for p, q in (parts, parts[::-1])
            ):
                return False
    analyzer = Analyzer()
    for atom in _conjuncts(writer.predicate):
        if isinstance(atom, IntImm) and atom.value:
            continue
        parsed = _bound_atom(atom)
        if parsed is not None and any(analyzer.can_prove_equal(parsed[0], v) for v in bindings.values()):
            continue
        if not _is_skip_term(atom):
            return False
    return True


def _is_skip_term(atom: PrimExpr) -> bool:
    """``x < 1 or c <= v``, as ``rolling_buffer`` writes it."""
    return (
        isinstance(atom, Or)
        and isinstance(atom.a, LT)
        and isinstance(atom.a.a, Var)
        and isinstance(atom.a.b, IntImm)
        and atom.a.b.value == 1
        and isinstance(atom.b, LE)
        and isinstance(atom.b.a, IntImm)
        and isinstance(atom.b.b, Var)
    )


# ---------------------------------------------------------------- the rewrite


def _rewrite(
    func: PrimFunc,
    producer: BlockRealize,
    consumers: list[BlockRealize],
    buffer: Buffer,
    dims: list[_Dim],
    ring: int,
    candidates: list[int],
    skip_vars: set[int],
) -> PrimFunc:
    extent = dims[ring].extent
    dtype = buffer.shape[ring].dtype
    shape = list(buffer.shape)
    shape[ring] = IntImm(extent, dtype)
    ringed = buffer.replace(shape=tuple(shape))
    touched = {id(producer), *(id(c) for c in consumers)}

    def ring_index(indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        items = list(indices)
        items[ring] = FloorMod(items[ring], IntImm(extent, items[ring].dtype))
        return tuple(items)

    def ring_region(region: BufferRegion) -> BufferRegion:
        ranges = list(region.region)
        rng = ranges[ring]
        if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
            ranges[ring] = Range(FloorMod(rng.min, IntImm(extent, rng.min.dtype)), rng.extent)
        else:
            ranges[ring] = Range(IntImm(0, rng.min.dtype), IntImm(extent, rng.extent.dtype))
        return BufferRegion(region.buffer, tuple(ranges))

    skip_terms = []
    for k in candidates:
        dim = dims[k]
        assert dim.var is not None and dim.offset is not None
        var, offset = dim.var, dim.offset
        skip_terms.append(Or(LT(var, IntImm(1, var.dtype)), LE(IntImm(dim.overlap, offset.dtype), offset)))

    class Rewrite(IRMutator):
        def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
            new = self.generic_visit(node)
            assert isinstance(new, BufferLoad)
            return new.replace(indices=ring_index(new.indices)) if node.buffer is buffer else new

        def visit_BufferStore(self, node: BufferStore) -> Stmt:
            new = self.generic_visit(node)
            assert isinstance(new, BufferStore)
            return new.replace(indices=ring_index(new.indices)) if node.buffer is buffer else new

        def visit_BlockRealize(self, node: BlockRealize) -> Stmt:
            new = self.generic_visit(node)
            assert isinstance(new, BlockRealize)
            if id(node) not in touched:
                return new
            block = new.block
            iter_vars = tuple(
                IterVar(iv.var, iv.dom, IterKind.OPAQUE) if _var_ids(value) & skip_vars else iv
                for iv, value in zip(block.iter_vars, new.iter_values)
            )
            block = block.replace(
                iter_vars=iter_vars,
                reads=tuple(ring_region(r) if r.buffer is buffer else r for r in block.reads),
                writes=tuple(ring_region(r) if r.buffer is buffer else r for r in block.writes),
            )
            predicate = new.predicate
            if node is producer:
                terms = skip_terms if isinstance(predicate, IntImm) and predicate.value else [predicate, *skip_terms]
                predicate = terms[0]
                for term in terms[1:]:
                    predicate = And(predicate, term)
            return new.replace(block=block, predicate=predicate)

    body = Rewrite().visit(func.body)
    return func.replace(body=replace_buffers(body, {buffer: ringed}))


# ---------------------------------------------------------------- the Schedule method


class RollingBufferPrimitives:
    """Schedule method for rolling_buffer."""

    @doc_from(rolling_buffer)
    def rolling_buffer(self, block: BlockRV, write_buffer_index: int) -> None:  # type: ignore[misc]
        realize = self.resolve_block(block, _PRIMITIVE)  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            _PRIMITIVE,
            (block,),
            {"write_buffer_index": write_buffer_index},
            lambda func: rolling_buffer(func, realize.block.name, write_buffer_index),
        )


__all__ = ["RollingBufferPrimitives", "rolling_buffer"]
