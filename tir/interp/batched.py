"""Whole-nest batching for the reference interpreter: a loop nest around one block, run as numpy
array operations instead of one Python step per instance.

The interpreter runs a block instance per loop point, a few hundred nanoseconds each: a
2048^3 matrix product would take hours. Most programs a schedule test runs are nests like::

    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]

Such a nest runs here with the loops that drive only spatial iterators as numpy axes (each loop
variable an ``arange`` along its own axis, broadcast), and the loops that drive reduction
iterators as Python loops around them, in their order. Every output element then sees exactly
the scalar interpreter's sequence of operations (its init, then its updates in the reduction
loops' order, each rounded in the element's dtype), because different spatial points write
different elements (checked at run time) and the block reads its output only at the element it
writes (checked when planning): the results are bit-identical.

When the spatial loops map one-to-one onto a box of the spatial iterators (however they were
split, reordered or bound to GPU threads), the numpy axes are the iterators themselves, so
``A[vi, vk]`` is a slice rather than a gather; lanes then run in cache-sized chunks, each
through every reduction step, when the stores are proved distinct. A block whose body is loops
around one store, and loops around a bare store, count as such a nest too. Nests that hold
copies into or out of shared memory reach this shape through ``tir.interp.distribute``.

``plan(loop)`` decides statically whether a nest qualifies (one block, one store, nothing the
batched evaluator cannot express); ``run(plan, env)`` then checks at run time what only the
values tell (store indices distinct, indices in bounds, iterators in their domains, the batch
not tiny) and returns False without writing anything when a check fails: the caller then runs
the scalar code, which reports the error exactly as before. Set ``TIR_INTERP_BATCH=0`` to turn
batching (and distribution) off.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tir.arith.iter_map import detect_iter_map, determined_vars
from tir.interp import runtime
from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    IterKind,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Range,
    Select,
    Stmt,
    Sub,
    Var,
    buffer_loads,
    const,
    free_vars,
    post_order_visit,
    substitute,
)
from tir.ir.ops import BITWISE
from tir.ir.structural import structural_equal

#: The most lanes one batch holds (numpy arrays of this many elements per operation).
MAX_LANES = 1 << 22
#: Lanes per chunk when a nest runs over its iterators (arrays that stay in cache).
CHUNK_LANES = 1 << 20
#: Fewer lanes than this are not worth the numpy overhead: the scalar code runs.
MIN_LANES = 32

#: Calls that only compute a value from their arguments (no memory read or written): the ones the
#: batched evaluator expresses, and the ones loop distribution lets a function contain.
PURE_CALLS = frozenset(runtime.MATH_F64) | {"abs", "isnan", "if_then_else", "fma", *BITWISE}

_CMP = {LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal, EQ: np.equal, NE: np.not_equal}
_BITWISE_UFUNCS = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


def enabled() -> bool:
    return os.environ.get("TIR_INTERP_BATCH", "1") != "0"


class _Unsupported(Exception):
    """The nest has something the batched evaluator does not express: the scalar code runs."""


class _Fallback(Exception):
    """A run-time check failed: nothing was written, the scalar code runs (and reports)."""


@dataclass(frozen=True)
class Plan:
    """A nest the batched evaluator runs: its loops (outermost first), which of them drive
    reduction iterators, the block, and the variables and buffers it needs from outside."""

    loops: tuple[For, ...]
    reduction_loops: frozenset[int]  # positions in ``loops``
    realize: BlockRealize
    free_vars: tuple[Var, ...]
    buffers: tuple[Buffer, ...]
    #: Proved when planning: different spatial loop points store to different elements.
    distinct_stores: bool = False
    #: When the spatial loops map one-to-one onto a box of the spatial iterators (a bijective
    #: iter map, every bound constant, no predicate): that box, ``(start, extent)`` per block
    #: iterator (None for reduction ones). The nest then runs over the iterators directly,
    #: however its loops split, reorder or bind them to threads: an index such as
    #: ``A[vi, vk]`` becomes a slice instead of a gather.
    iterator_box: tuple[tuple[int, int] | None, ...] | None = None


def loop_chain(stmt: Stmt) -> tuple[list[For], Stmt]:
    """The loops of the perfect nest rooted at ``stmt`` (outermost first) and what they hold."""
    loops: list[For] = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def plan(loop: For) -> Plan | None:
    """The batching plan of the nest rooted at ``loop``, or None when it does not qualify."""
    loops, node = loop_chain(loop)
    if isinstance(node, BufferStore):
        # Loops around a bare store (inside a block, or lowered code): a block with no
        # iterators stands for it, so the nest runs like any other.
        node = BlockRealize((), const(1, "bool"), Block("", (), (), (), node))
    if not isinstance(node, BlockRealize):
        return None
    node = _loops_out_of_block(node, loops)
    try:
        return _plan(loops, node)
    except _Unsupported:
        return None


def _loops_out_of_block(realize: BlockRealize, loops: list[For]) -> BlockRealize:
    """A block whose body is a loop nest around one store (TVM's copy blocks) as the same loops
    around a block of that store: appended to ``loops``, returns that block. The interpreter
    runs both the same way (a block with no init, no buffers of its own: an instance is its
    loops' stores in order, its iterators and predicate the same at each). Loops whose bounds
    use the block's iterators stay inside (and the plan then refuses the block)."""
    block = realize.block
    if block.init is not None or block.alloc_buffers or block.match_buffers:
        return realize
    inner, node = loop_chain(block.body)
    if not inner or not isinstance(node, BufferStore):
        return realize
    own = {id(iv.var) for iv in block.iter_vars}
    if any(_uses(e, dict.fromkeys(own, 0)) for loop in inner for e in (loop.min, loop.extent)):
        return realize
    loops.extend(inner)
    return BlockRealize(realize.iter_values, realize.predicate, replace(block, body=node))


def _plan(loops: list[For], realize: BlockRealize) -> Plan:
    block = realize.block
    if block.alloc_buffers or block.match_buffers or not isinstance(block.body, BufferStore):
        raise _Unsupported
    store = block.body
    init = block.init
    if init is not None and not (
        isinstance(init, BufferStore)
        and init.buffer is store.buffer
        and all(structural_equal(a, b) for a, b in zip(init.indices, store.indices))
    ):
        raise _Unsupported
    loop_vars = {id(loop.loop_var): k for k, loop in enumerate(loops)}
    for loop in loops:
        # Thread-bound loops run in order like serial ones (the scalar interpreter's reading):
        # batching them is as exact as batching any spatial loop.
        if _uses(loop.min, loop_vars) or _uses(loop.extent, loop_vars):
            raise _Unsupported  # a nest whose bounds move with its own loops
    spatial_loops: set[int] = set()
    reduction_loops: set[int] = set()
    for iter_var, value in zip(block.iter_vars, realize.iter_values):
        used = {loop_vars[id(v)] for v in free_vars(value) if id(v) in loop_vars}
        if iter_var.kind is IterKind.SPATIAL:
            spatial_loops |= used
        elif iter_var.kind is IterKind.REDUCE:
            reduction_loops |= used
        else:
            raise _Unsupported
    if spatial_loops & reduction_loops:
        raise _Unsupported  # a loop driving both kinds cannot be split into axes and steps
    batchable = [loop for k, loop in enumerate(loops) if k not in reduction_loops]
    if not batchable:
        raise _Unsupported
    if all(isinstance(loop.extent, IntImm) for loop in batchable):
        if math.prod(loop.extent.value for loop in batchable) < MIN_LANES:  # type: ignore[attr-defined]
            raise _Unsupported  # never worth it: the scalar code runs without the attempt
    reduce_vars = {id(iv.var) for iv in block.iter_vars if iv.kind is IterKind.REDUCE}
    if any(id(v) in reduce_vars for index in store.indices for v in free_vars(index)):
        raise _Unsupported  # the output moves with the reduction: not one element per spatial point
    # The block reads its output only in its value, at the element it writes: no lane depends
    # on another. And the nest can run again from the start (a fallback after a failed check
    # does): a block that reads its output is a reduction whose init restarts each element.
    parts: list[PrimExpr] = [store.value, realize.predicate, *store.indices, *realize.iter_values]
    if init is not None:
        parts.append(init.value)
    reads_output = False
    for k, part in enumerate(parts):
        for load in buffer_loads(part):
            if load.buffer is not store.buffer:
                continue
            reads_output = True
            if k != 0 or not all(structural_equal(a, b) for a, b in zip(load.indices, store.indices)):
                raise _Unsupported
        _check_expr(part)
    if reads_output and (init is None or not reduction_loops):
        raise _Unsupported
    buffers: dict[int, Buffer] = {}
    for part in parts:
        for load in buffer_loads(part):
            buffers[id(load.buffer)] = load.buffer
    buffers[id(store.buffer)] = store.buffer
    for buffer in buffers.values():
        if buffer.dtype.lanes != 1 or buffer.dtype.kind == "bfloat" or buffer.strides or buffer.elem_offset is not None:
            raise _Unsupported
    defined = {id(loop.loop_var) for loop in loops} | {id(iv.var) for iv in block.iter_vars}
    free: dict[int, Var] = {}
    exprs = [*parts, *[e for loop in loops for e in (loop.min, loop.extent)]]
    exprs += [e for iv in block.iter_vars for e in (iv.dom.min, iv.dom.extent)]
    for expr in exprs:
        for var in free_vars(expr):
            if id(var) not in defined:
                free[id(var)] = var
    return Plan(
        tuple(loops),
        frozenset(reduction_loops),
        realize,
        tuple(free.values()),
        tuple(buffers.values()),
        _distinct_stores(loops, reduction_loops, realize),
        _iterator_box(loops, reduction_loops, realize),
    )


def _iterator_box(
    loops: list[For], reduction_loops: set[int], realize: BlockRealize
) -> tuple[tuple[int, int] | None, ...] | None:
    """The box the spatial iterators sweep when the spatial loops map one-to-one onto it
    (``detect_iter_map``, "bijective": every loop digit used, no overlap), else None.

    Running over that box instead of the loops visits the same block instances (each once),
    and each output element still sees its reduction steps in the reduction loops' order:
    the results stay bit-identical."""
    block = realize.block
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value):
        return None
    loop_ids = {id(loop.loop_var) for loop in loops}
    store = block.body
    assert isinstance(store, BufferStore)
    body_parts = [store.value, *store.indices] + ([block.init.value] if isinstance(block.init, BufferStore) else [])
    if any(id(v) in loop_ids for part in body_parts for v in free_vars(part)):
        return None  # the body names a loop variable itself, not only through the iterators
    spatial = [loop for k, loop in enumerate(loops) if k not in reduction_loops]
    if not all(isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm) for loop in spatial):
        return None
    values = [value for iv, value in zip(block.iter_vars, realize.iter_values) if iv.kind is IterKind.SPATIAL]
    if not values:
        return None
    found = detect_iter_map(
        values, {loop.loop_var: Range(loop.min, loop.extent) for loop in spatial}, check_level="bijective"
    )
    if not found.ok or not all(found.exact) or found.unused_vars:
        return None
    box: list[tuple[int, int] | None] = []
    ranges = iter(found.ranges)
    for iv in block.iter_vars:
        if iv.kind is not IterKind.SPATIAL:
            box.append(None)
            continue
        rng = next(ranges)
        if not (isinstance(rng.min, IntImm) and isinstance(rng.extent, IntImm)):
            return None
        box.append((rng.min.value, rng.extent.value))
    return tuple(box)


def _distinct_stores(loops: list[For], reduction_loops: set[int], realize: BlockRealize) -> bool:
    """Whether the store index, as a function of the spatial loops, is one-to-one
    (``determined_vars``): then no run-time check is needed."""
    store = realize.block.body
    assert isinstance(store, BufferStore)
    bindings = {iv.var: value for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    exprs = [substitute(index, bindings) for index in store.indices]
    spatial = [loop for k, loop in enumerate(loops) if k not in reduction_loops]
    dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in spatial}
    if not exprs:
        return False
    found = {id(var) for var in determined_vars(exprs, dom)}
    return all(id(loop.loop_var) in found for loop in spatial)


def _uses(expr: PrimExpr, ids: dict[int, int]) -> bool:
    return any(id(v) in ids for v in free_vars(expr))


_SUPPORTED = (
    Var, IntImm, FloatImm, Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max,
    And, Or, Not, Select, Cast, BufferLoad, Call, *_CMP,
)  # fmt: skip


def _check_expr(expr: PrimExpr) -> None:
    """Refuse (``_Unsupported``) an expression the evaluator cannot express exactly."""

    def visit(node: Any) -> None:
        if not isinstance(node, PrimExpr):
            return
        if not isinstance(node, _SUPPORTED) or node.dtype.lanes != 1 or node.dtype.kind == "bfloat":
            raise _Unsupported
        if isinstance(node, Call):
            op = node.op
            if op not in PURE_CALLS or (op in runtime.MATH_F64 and not node.dtype.is_float):
                raise _Unsupported

    post_order_visit(expr, visit)


# ---------------------------------------------------------------- running a plan


def run(plan_: Plan, env: dict[Var, Any], arrays: dict[Buffer, np.ndarray]) -> bool:
    """Run the nest batched, or return False (having written nothing) for the scalar code."""
    try:
        return _Runner(plan_, env, arrays).run()
    except _Fallback:
        return False


def evaluate_over_box(exprs: list[PrimExpr], box: dict[Var, tuple[int, int]]) -> list[np.ndarray] | None:
    """The values of integer ``exprs`` at every point of ``box`` (each variable over
    ``[start, start + extent)`` along its own axis, broadcast), or None when an expression
    reads memory or is something the evaluator does not express."""
    env = {
        id(var): _axis_values(var, start, extent, k, len(box)) for k, (var, (start, extent)) in enumerate(box.items())
    }
    try:
        for expr in exprs:
            if buffer_loads(expr):
                return None
            _check_expr(expr)
        with np.errstate(all="ignore"):
            return [np.asarray(_Evaluator(env, {}).eval(expr, None)) for expr in exprs]
    except (_Unsupported, _Fallback):
        return None


def run_tuples(plan_: Plan, values: tuple[Any, ...], arrays: tuple[np.ndarray, ...]) -> bool:
    """``run`` with the free variables' values and the buffers' arrays in the plan's order."""
    return run(plan_, dict(zip(plan_.free_vars, values)), dict(zip(plan_.buffers, arrays)))


class _Runner:
    def __init__(self, plan_: Plan, env: dict[Var, Any], arrays: dict[Buffer, np.ndarray]) -> None:
        self.plan = plan_
        self.env: dict[int, Any] = {id(var): value for var, value in env.items()}
        self.arrays = {id(buffer): array for buffer, array in arrays.items()}
        self.runs: frozenset[int] = frozenset()

    def scalar(self, expr: PrimExpr) -> int:
        value = _Evaluator(self.env, self.arrays).eval(expr, None)
        return int(value)

    def run(self) -> bool:
        loops = self.plan.loops
        ranges = []
        for loop in loops:
            start, extent = self.scalar(loop.min), self.scalar(loop.extent)
            ranges.append((start, max(extent, 0)))
        if any(extent == 0 for _, extent in ranges):
            return True  # no iteration runs
        spatial = [k for k in range(len(loops)) if k not in self.plan.reduction_loops]
        box = self.plan.iterator_box
        if box is not None and MIN_LANES <= math.prod(extent for _, extent in filter(None, box)) <= MAX_LANES:
            self.run_over_iterators(ranges, box)
            return True
        # Batch the innermost spatial loops that fit; the others run as Python loops.
        batched: list[int] = []
        lanes = 1
        for k in reversed(spatial):
            if lanes * ranges[k][1] > MAX_LANES:
                break
            batched.insert(0, k)
            lanes *= ranges[k][1]
        if lanes < MIN_LANES:
            return False
        stepped = [k for k in range(len(loops)) if k not in batched]
        stepped_spatial = [position for position, k in enumerate(stepped) if k not in self.plan.reduction_loops]
        for position, k in enumerate(batched):
            self.env[id(loops[k].loop_var)] = _axis_values(loops[k].loop_var, *ranges[k], position, len(batched))
        batch_shape = tuple(ranges[k][1] for k in batched)
        distinct_checked: set[tuple[int, ...]] = set()
        for values in np.ndindex(*(ranges[k][1] for k in stepped)):
            self.set_loops(stepped, values, ranges)
            # The store indices depend on the spatial loops only: check them once per batch of those.
            spatial_values = tuple(values[position] for position in stepped_spatial)
            self.step(batch_shape, spatial_values not in distinct_checked)
            distinct_checked.add(spatial_values)
        return True

    def set_loops(self, positions: list[int], offsets: tuple[int, ...], ranges: list[tuple[int, int]]) -> None:
        """The loops at ``positions`` at their ``offsets`` from their starts (scalars)."""
        for k, offset in zip(positions, offsets):
            var = self.plan.loops[k].loop_var
            self.env[id(var)] = runtime.STORAGE_TYPES[str(var.dtype)](ranges[k][0] + offset)

    def run_over_iterators(self, ranges: list[tuple[int, int]], box: tuple[tuple[int, int] | None, ...]) -> None:
        """The nest as its block's spatial iterators over ``box`` (one numpy axis each) and the
        reduction loops stepped in their order (see ``Plan.iterator_box``)."""
        block = self.plan.realize.block
        spans = [(iter_var.var, span) for iter_var, span in zip(block.iter_vars, box) if span is not None]
        extents = [extent for _, (_, extent) in spans]
        spatial_values = {id(var): _axis_values(var, *span, axis, len(spans)) for axis, (var, span) in enumerate(spans)}
        reduction = sorted(self.plan.reduction_loops)
        # Lanes never read each other's elements (the plan's condition), so a chunk of them can
        # run through every reduction step before the next chunk starts: the same operations
        # per element, on arrays that stay in cache.
        first_var = id(spans[0][0])
        rows = spatial_values[first_var]
        per_row = math.prod(extents) // extents[0]
        # Chunks need stores proved distinct: the run-time check sees one chunk at a time.
        chunk = max(1, CHUNK_LANES // per_row) if self.plan.distinct_stores else extents[0]
        for begin in range(0, extents[0], chunk):
            spatial_values[first_var] = rows[begin : begin + chunk]
            batch_shape = (len(spatial_values[first_var]), *extents[1:])
            self.runs = frozenset(id(value) for value in spatial_values.values())
            first = True
            for values in np.ndindex(*(ranges[k][1] for k in reduction)):
                self.set_loops(reduction, values, ranges)
                self.step(batch_shape, first, bound_values=spatial_values)
                first = False

    def step(
        self, batch_shape: tuple[int, ...], check_distinct: bool, bound_values: dict[int, np.ndarray] | None = None
    ) -> None:
        realize = self.plan.realize
        block = realize.block
        evaluator = _Evaluator(self.env, self.arrays, self.runs)
        mask = None
        if not (isinstance(realize.predicate, IntImm) and realize.predicate.value):
            mask = np.broadcast_to(np.asarray(evaluator.eval(realize.predicate, None), dtype=bool), batch_shape)
            if not mask.any():
                return
            if mask.all():
                mask = None
        # Bind the iterators; an executed instance must bind each inside its domain.
        init_mask = mask
        init_never = False
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            bound = None if bound_values is None else bound_values.get(id(iter_var.var))
            if bound is None:
                bound = evaluator.eval(value, mask)
            low, extent = evaluator.eval(iter_var.dom.min, None), evaluator.eval(iter_var.dom.extent, None)
            inside = (bound >= low) & (bound < low + extent)
            if not _all(inside, mask):
                raise _Fallback
            self.env[id(iter_var.var)] = bound
            if iter_var.kind is IterKind.REDUCE:
                at_start = np.asarray(bound == low)
                if at_start.ndim == 0:  # one value for every lane (stepped reduction loops)
                    init_never = init_never or not bool(at_start)
                    continue
                at_start = np.broadcast_to(at_start, batch_shape)
                init_mask = at_start if init_mask is None else (init_mask & at_start)
        store = block.body
        assert isinstance(store, BufferStore)
        array = self.arrays[id(store.buffer)]
        index = evaluator.indices(store.buffer, store.indices, mask, batch_shape)
        if check_distinct and not self.plan.distinct_stores:
            # Different lanes must write different elements (else lane order would matter).
            flat = np.ravel_multi_index(tuple(np.broadcast_to(i, batch_shape).ravel() for i in index), array.shape)
            if mask is not None:
                flat = flat[mask.ravel()]
            if flat.size and np.bincount(flat, minlength=array.size).max() > 1:
                raise _Fallback
        if init_mask is not None and init_mask.all():
            init_mask = None  # every lane starts its reduction here (the usual first step)
        if block.init is not None and not init_never and (init_mask is None or init_mask.any()):
            value = evaluator.eval(block.init.value, init_mask)
            _store(array, index, value, init_mask, store.buffer.dtype, batch_shape)
        if not self._accumulated(store, array, index, mask, batch_shape, evaluator):
            value = evaluator.eval(store.value, mask)
            _store(array, index, value, mask, store.buffer.dtype, batch_shape)
        for iter_var in block.iter_vars:
            self.env.pop(id(iter_var.var), None)

    @staticmethod
    def _accumulated(
        store: BufferStore,
        array: np.ndarray,
        index: tuple[np.ndarray, ...],
        mask: np.ndarray | None,
        batch_shape: tuple[int, ...],
        evaluator: _Evaluator,
    ) -> bool:
        """``C[i] = C[i] + x`` on a slice of ``C``, done in place (one pass over the output
        instead of a load, an add and a store). The same additions in the same dtype: exact.
        False (nothing done) for any other store."""
        value = store.value
        if mask is not None or not isinstance(value, Add) or value.dtype != store.buffer.dtype:
            return False
        own = [side for side in (value.a, value.b) if isinstance(side, BufferLoad) and side.buffer is store.buffer]
        if not own:
            return False  # (the plan admits loads of the output only at the stored element)
        rest = value.b if own[0] is value.a else value.a
        view = _slice_view(array, index, len(batch_shape), evaluator.runs)
        if view is None or view.shape != batch_shape:
            return False
        addend = np.asarray(evaluator.eval(rest, None))
        np.add(view, addend, out=view, casting="unsafe")
        return True


def _axis_values(var: Var, start: int, extent: int, axis: int, axes: int) -> np.ndarray:
    """``var`` over ``[start, start + extent)`` along ``axis`` of ``axes`` (size 1 elsewhere)."""
    shape = [1] * axes
    shape[axis] = extent
    dtype = runtime.STORAGE_TYPES[str(var.dtype)]
    return (np.arange(extent, dtype=dtype) + dtype(start)).reshape(shape)


def _all(condition: Any, mask: np.ndarray | None) -> bool:
    condition = np.asarray(condition)
    if mask is None:
        return bool(condition.all())
    return bool(np.broadcast_to(condition, mask.shape)[mask].all())


def _store(
    array: np.ndarray,
    index: tuple[np.ndarray, ...],
    value: Any,
    mask: np.ndarray | None,
    dtype: Any,
    batch_shape: tuple[int, ...],
) -> None:
    value = np.broadcast_to(np.asarray(value, dtype=runtime.STORAGE_TYPES[str(dtype)]), batch_shape)
    if mask is None:
        view = _slice_view(array, index, len(batch_shape))
        if view is not None and view.shape == batch_shape:
            view[...] = value
            return
        array[tuple(np.broadcast_to(i, batch_shape) for i in index)] = value
    else:
        array[tuple(np.broadcast_to(i, batch_shape)[mask] for i in index)] = value[mask]


def _slice_view(
    array: np.ndarray, index: tuple[Any, ...], axes: int, runs: frozenset[int] = frozenset()
) -> np.ndarray | None:
    """A view of ``array[index]`` laid out along the batch axes when each index is a scalar or
    a run of consecutive values along one batch axis (a loop variable plus an offset): basic
    slicing instead of a gather. None when an index is anything else."""
    items: list[Any] = []
    placed: list[int] = []
    for value, size in zip(index, array.shape):
        value = np.asarray(value)
        if value.size == 1:
            point = int(value.reshape(()))
            if not 0 <= point < size:
                return None  # the checked gather reports it
            items.append(point)
            continue
        moving = [axis for axis, extent in enumerate(value.shape) if extent != 1]
        if value.ndim != axes or len(moving) != 1 or moving[0] in placed:
            return None
        run = value.reshape(-1)
        start = int(run[0])
        if start < 0 or start + run.size > size:
            return None
        if id(value) not in runs and not np.array_equal(run, np.arange(start, start + run.size)):
            return None
        items.append(slice(start, start + run.size))
        placed.append(moving[0])
    view = array[tuple(items)]
    view = view.transpose(np.argsort(placed)) if placed else view
    for axis in range(axes):
        if axis not in placed:
            view = np.expand_dims(view, axis)
    return view


class _Evaluator:
    """Evaluates expressions on broadcast numpy arrays with the scalar interpreter's semantics.

    ``mask`` (None: every lane) marks the lanes that execute: indices are checked on those only,
    and the others read a clipped, in-bounds element whose value is never used.
    """

    def __init__(self, env: dict[int, Any], arrays: dict[int, np.ndarray], runs: frozenset[int] = frozenset()) -> None:
        self.env = env
        self.arrays = arrays
        #: ids of arrays known to hold consecutive integers (the iterators' ``arange`` s).
        self.runs = runs

    def indices(
        self, buffer: Buffer, indices: tuple[PrimExpr, ...], mask: np.ndarray | None, batch_shape: tuple[int, ...]
    ) -> tuple[np.ndarray, ...]:
        """The store index, checked in bounds on the executing lanes (not broadcast: the
        caller broadcasts to ``batch_shape`` where it needs to)."""
        array = self.arrays[id(buffer)]
        values = [np.asarray(self.eval(index, mask)) for index in indices]
        return self._bounded(array, values, mask)

    def _bounded(self, array: np.ndarray, values: list[np.ndarray], mask: np.ndarray | None) -> tuple[np.ndarray, ...]:
        result = []
        for value, size in zip(values, array.shape):
            if mask is None:
                inside = value.size == 0 or (int(value.min()) >= 0 and int(value.max()) < size)
            else:
                inside = _all((value >= 0) & (value < size), mask)
            if not inside:
                raise _Fallback  # the scalar code raises IndexError naming the access
            result.append(value if mask is None else np.clip(value, 0, max(size - 1, 0)))
        return tuple(result)

    def eval(self, expr: PrimExpr, mask: np.ndarray | None) -> Any:
        method = getattr(self, "_" + type(expr).__name__, None)
        if method is None:
            if type(expr) in _CMP:
                return _CMP[type(expr)](self.eval(expr.a, mask), self.eval(expr.b, mask))  # type: ignore[attr-defined]
            raise _Fallback
        return method(expr, mask)

    def _typed(self, value: Any, dtype: Any) -> Any:
        return np.asarray(value).astype(runtime.STORAGE_TYPES[str(dtype)], copy=False)

    def _Var(self, var: Var, mask: np.ndarray | None) -> Any:
        value = self.env.get(id(var))
        if value is None:
            raise _Fallback
        if isinstance(value, (bool, int, float)):
            return runtime.STORAGE_TYPES[str(var.dtype)](value)
        return value

    def _IntImm(self, imm: IntImm, mask: np.ndarray | None) -> Any:
        if imm.dtype.is_bool:
            return np.bool_(imm.value)
        return runtime.STORAGE_TYPES[str(imm.dtype)](imm.value)

    def _FloatImm(self, imm: FloatImm, mask: np.ndarray | None) -> Any:
        return runtime.FLOAT_ROUNDERS[str(imm.dtype)](imm.value)

    def _Add(self, expr: Add, mask: np.ndarray | None) -> Any:
        return self._typed(self.eval(expr.a, mask) + self.eval(expr.b, mask), expr.dtype)

    def _Sub(self, expr: Sub, mask: np.ndarray | None) -> Any:
        return self._typed(self.eval(expr.a, mask) - self.eval(expr.b, mask), expr.dtype)

    def _Mul(self, expr: Mul, mask: np.ndarray | None) -> Any:
        return self._typed(self.eval(expr.a, mask) * self.eval(expr.b, mask), expr.dtype)

    def _Div(self, expr: Div, mask: np.ndarray | None) -> Any:
        a, b = self.eval(expr.a, mask), self.eval(expr.b, mask)
        if expr.dtype.is_float:
            return self._typed(a / b, expr.dtype)
        return self._typed(runtime.trunc_div(np.asarray(a), np.asarray(b)), expr.dtype)

    def _FloorDiv(self, expr: FloorDiv, mask: np.ndarray | None) -> Any:
        a, b = self.eval(expr.a, mask), self.eval(expr.b, mask)
        if expr.dtype.is_float:
            return self._typed(runtime.float_floordiv(a, b), expr.dtype)
        return self._typed(np.floor_divide(a, b), expr.dtype)  # 0 for a zero divisor, as numpy

    def _FloorMod(self, expr: FloorMod, mask: np.ndarray | None) -> Any:
        a, b = self.eval(expr.a, mask), self.eval(expr.b, mask)
        if expr.dtype.is_float:
            return self._typed(runtime.float_floormod(a, b), expr.dtype)
        return self._typed(np.remainder(a, b), expr.dtype)

    def _Min(self, expr: Min, mask: np.ndarray | None) -> Any:
        a, b = self.eval(expr.a, mask), self.eval(expr.b, mask)
        return self._typed(np.where(a < b, a, b), expr.dtype)  # a NaN operand gives b, as fmin

    def _Max(self, expr: Max, mask: np.ndarray | None) -> Any:
        a, b = self.eval(expr.a, mask), self.eval(expr.b, mask)
        return self._typed(np.where(a > b, a, b), expr.dtype)

    def _And(self, expr: And, mask: np.ndarray | None) -> Any:
        return np.logical_and(self.eval(expr.a, mask), self.eval(expr.b, mask))

    def _Or(self, expr: Or, mask: np.ndarray | None) -> Any:
        return np.logical_or(self.eval(expr.a, mask), self.eval(expr.b, mask))

    def _Not(self, expr: Not, mask: np.ndarray | None) -> Any:
        return np.logical_not(self.eval(expr.a, mask))

    def _Select(self, expr: Select, mask: np.ndarray | None) -> Any:
        condition = self.eval(expr.condition, mask)
        true_value, false_value = self.eval(expr.true_value, mask), self.eval(expr.false_value, mask)
        return self._typed(np.where(condition, true_value, false_value), expr.dtype)

    def _Cast(self, expr: Cast, mask: np.ndarray | None) -> Any:
        value = np.asarray(self.eval(expr.value, mask))
        source, target = expr.value.dtype, expr.dtype
        if target.is_bool:
            return value != 0
        if target.is_float:
            return self._typed(value, target)  # int -> float and float -> float round to nearest
        if source.is_float:
            return self._typed(runtime.float_to_int(value, str(target)), target)
        return self._typed(value, target)  # int -> int wraps, bool -> int is 0 / 1

    def _BufferLoad(self, load: BufferLoad, mask: np.ndarray | None) -> Any:
        array = self.arrays[id(load.buffer)]
        values = [np.asarray(self.eval(index, mask)) for index in load.indices]
        if not values:
            return array[()]
        shape = np.broadcast_shapes(*(v.shape for v in values))
        if mask is not None:
            shape = np.broadcast_shapes(shape, mask.shape)
        if mask is None and len(shape) > 0:
            view = _slice_view(array, tuple(values), len(shape), self.runs)
            if view is not None:
                return view
        values = [np.broadcast_to(v, shape) for v in values]
        local_mask = None if mask is None else np.broadcast_to(mask, shape)
        return array[self._bounded(array, values, local_mask)]

    def _Call(self, call: Call, mask: np.ndarray | None) -> Any:
        op = call.op
        if op == "if_then_else":
            condition = np.asarray(self.eval(call.args[0], mask))
            taken = condition if mask is None else (condition & mask)
            not_taken = ~condition if mask is None else (~condition & mask)
            shape = np.broadcast_shapes(taken.shape, not_taken.shape)
            storage = runtime.STORAGE_TYPES[str(call.dtype)]
            # Only the side some executing lane takes is evaluated, and only there checked.
            true_value = self.eval(call.args[1], np.broadcast_to(taken, shape)) if taken.any() else storage(0)
            false_value = self.eval(call.args[2], np.broadcast_to(not_taken, shape)) if not_taken.any() else storage(0)
            return self._typed(np.where(condition, true_value, false_value), call.dtype)
        args = [self.eval(arg, mask) for arg in call.args]
        if op in _BITWISE_UFUNCS:
            return self._typed(_BITWISE_UFUNCS[op](args[0], args[1]), call.dtype)
        if op == "bitwise_not":
            return self._typed(np.invert(args[0]), call.dtype)
        if op == "abs":
            return self._typed(np.abs(args[0]), call.dtype)
        if op == "isnan":
            return np.isnan(args[0])
        if op == "fma":
            return self._typed(runtime.fma(*args, str(call.dtype)), call.dtype)
        function = runtime.MATH_F64.get(op)
        if function is None:
            raise _Fallback
        return self._typed(function(*(runtime.f64(a) for a in args)), call.dtype)


__all__ = [
    "MAX_LANES",
    "MIN_LANES",
    "PURE_CALLS",
    "Plan",
    "enabled",
    "evaluate_over_box",
    "loop_chain",
    "plan",
    "run",
    "run_tuples",
]
