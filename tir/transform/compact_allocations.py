"""``compact_allocations``: each ``Allocate`` moves down to where its buffer is used, and shrinks.

The allocation moves to the innermost statement that encloses every access of its buffer:
into the one statement of a sequence that uses it, the branch of an ``if`` that uses it, the
body of a ``LetStmt``, and into a loop body only when no value can flow from one iteration to
the next through the buffer: when different iterations touch disjoint parts of it, when each
iteration writes what it reads before reading it (unconditional stores over whole loop ranges,
covering the later reads), or when the loop runs once. It never moves into a ``vectorized``
loop, nor into a thread-bound loop unless the buffer's scope lives there (``threadIdx``:
``local`` and fragments; ``blockIdx`` / ``vthread``: those and ``shared``).

There the buffer shrinks to the region its accesses touch (relaxed over the loops inside the
new position): a dimension whose region has a constant extent, or an extent bounded by a
constant, shrinks to it and its indices are shifted by the region's start; a dimension that
cannot be bounded, or whose region start reads memory, keeps its size. A buffer with explicit
strides shrinks its shape; strides ``storage_align`` padded (``Buffer.dim_align``) are padded
again by the same rule for the shrunk shape (a (32, 64) tile aligned with factor 32 and offset
8 gets row stride 72), other explicit strides are kept; a buffer with an element offset moves
but keeps its layout. A ``blockIdx`` loop is always entered (but by ``global`` buffers): each
thread block has its own shared and local memory, so no value flows between its iterations.
Before::

    C = T.allocate((16, 16), "float32")
    for i in range(16):
        for j in range(16):
            C[i, j] = A[i, j] * 2.0
        for j in range(16):
            B[i, j] = C[i, j] + 1.0

After (iteration ``i`` touches row ``i`` only)::

    for i in range(16):
        C = T.allocate((1, 16), "float32")
        for j in range(16):
            C[0, j] = A[i, j] * 2.0
        for j in range(16):
            B[i, j] = C[0, j] + 1.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tir.arith import Analyzer, relax_region, union_regions
from tir.arith.evaluate import evaluate_int
from tir.arith.simplify import StructuralKeys
from tir.ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    IRVisitor,
    LetStmt,
    PrimExpr,
    PrimFunc,
    Ramp,
    Range,
    SeqStmt,
    Stmt,
    Var,
    substitute,
)
from tir.ir.functor import contains, free_vars
from tir.ir.ops import tile_accesses
from tir.transform._common import uses_buffer, uses_var
from tir.transform.convert_blocks import STRIDE_OP

__all__ = ["compact_allocations"]


@dataclass
class _Access:
    indices: tuple[PrimExpr, ...]
    dom_map: dict[Var, Range]  # the loops around the access, inside the statement examined


class _CollectAccesses(IRVisitor):
    """Accesses of one buffer inside a statement, with let-bound variables inlined."""

    def __init__(self, buffer: Buffer, loads: bool = True, stores: bool = True) -> None:
        self.buffer = buffer
        self.loads, self.stores = loads, stores
        self.loops: dict[Var, Range] = {}
        self.lets: dict[Var, PrimExpr] = {}
        self.accesses: list[_Access] = []

    def record(self, indices: tuple[PrimExpr, ...]) -> None:
        self.accesses.append(_Access(tuple(substitute(i, self.lets) for i in indices), dict(self.loops)))

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if load.buffer is self.buffer and self.loads:
            self.record(load.indices)
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if store.buffer is self.buffer and self.stores:
            self.record(store.indices)
        self.generic_visit(store)

    def visit_Call(self, call: Call) -> None:
        if call.op == STRIDE_OP:
            return  # names the buffer's layout; touches no element
        # A CUDA tile op's reference ``B[r, c]`` touches a whole tile from there: record its
        # first and last elements, so the hull covers the tile; a reference the op only
        # writes (the target of a fill or load) is a store, not a load.
        tiles = dict(tile_accesses(call))
        if not tiles:
            self.generic_visit(call)
            return
        reads = _tile_read_positions(call)
        for position, arg in enumerate(call.args):
            if position not in tiles or not isinstance(arg, BufferLoad):
                self.visit(arg)
                continue
            for index in arg.indices:
                self.visit(index)
            wanted = self.loads if position in reads else self.stores
            if arg.buffer is not self.buffer or not wanted or not arg.indices:
                continue
            rows, cols = tiles[position]
            last = list(arg.indices)
            if len(last) >= 2:
                last[-2] = last[-2] + (rows - 1)
            last[-1] = last[-1] + (cols - 1)
            self.record(arg.indices)
            self.record(tuple(last))

    def visit_For(self, loop: For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        self.loops[loop.loop_var] = Range(substitute(loop.min, self.lets), substitute(loop.extent, self.lets))
        self.visit(loop.body)
        self.loops.pop(loop.loop_var, None)

    def visit_LetStmt(self, stmt: LetStmt) -> None:
        self.visit(stmt.value)
        self.lets[stmt.var] = substitute(stmt.value, self.lets)
        self.visit(stmt.body)
        self.lets.pop(stmt.var, None)


#: Argument positions tile ops read (the others they only write).
_TILE_READS = {
    "wmma_load_matrix_sync": (1,),
    "ptx_ldmatrix": (1,),
    "wmma_store_matrix_sync": (1,),
    "ptx_mma_store": (1,),
    "wmma_mma_sync": (1, 2, 3),
    "ptx_mma_sync": (1, 2, 3),
}


def _tile_read_positions(call: Call) -> tuple[int, ...]:
    return _TILE_READS.get(call.op, ())


#: Loops up to this many iterations may have their iterations' boxes compared one by one.
_MAX_ENUMERATED_ITERATIONS = 64


def _reads_buffer(stmt: Stmt, buffer: Buffer) -> bool:
    collector = _CollectAccesses(buffer, loads=True, stores=False)
    collector.visit(stmt)
    return bool(collector.accesses)


def _touched_region(
    stmt: Stmt, buffer: Buffer, loads: bool = True, stores: bool = True, lets: dict[Var, PrimExpr] | None = None
) -> tuple[Range, ...] | None:
    """The hull of the buffer region ``stmt`` accesses, relaxed over the loops inside ``stmt``.

    None when there is no such access.
    """
    collector = _CollectAccesses(buffer, loads, stores)
    collector.lets = dict(lets or {})
    collector.visit(stmt)
    region: tuple[Range, ...] | None = None
    # An accumulation reads and writes one element (``C[i] = C[i] + ...``), an unrolled tile
    # repeats its accesses: each distinct access under the same loops is relaxed once.
    keys = StructuralKeys()
    seen: set[tuple[Any, ...]] = set()
    for access in collector.accesses:
        signature = (
            tuple(keys.key(index) for index in access.indices),
            tuple((id(var), id(dom)) for var, dom in access.dom_map.items()),
        )
        if signature in seen:
            continue
        seen.add(signature)
        ranges = relax_region(access.indices, access.dom_map, buffer.shape)
        region = ranges if region is None else union_regions(region, ranges)  # type: ignore[assignment]
    return region


class _ExactWrites(IRVisitor):
    """Boxes of the buffer that a statement surely writes completely (whenever it runs).

    A store counts when no ``if`` encloses it inside the statement, every enclosing loop surely
    runs, and each index is loop-invariant or one loop variable plus an invariant offset, each
    loop variable indexing at most one dimension: then the store covers the box exactly.
    """

    def __init__(self, buffer: Buffer, analyzer: Analyzer, lets: dict[Var, PrimExpr]) -> None:
        self.buffer = buffer
        self.analyzer = analyzer
        self.lets = dict(lets)
        self.loops: dict[Var, Range] = {}
        self.boxes: list[tuple[Range, ...]] = []

    def visit_IfThenElse(self, stmt: IfThenElse) -> None:
        pass  # a conditional write may not happen

    def visit_For(self, loop: For) -> None:
        start, extent = substitute(loop.min, self.lets), substitute(loop.extent, self.lets)
        if set(free_vars((start, extent))) & self.loops.keys():
            return  # not a rectangular nest
        if not self.analyzer.can_prove(extent >= 1):
            return  # the loop may not run
        self.loops[loop.loop_var] = Range(start, extent)
        self.visit(loop.body)
        self.loops.pop(loop.loop_var, None)

    def visit_LetStmt(self, stmt: LetStmt) -> None:
        self.lets[stmt.var] = substitute(stmt.value, self.lets)
        self.visit(stmt.body)
        self.lets.pop(stmt.var, None)

    def visit_Allocate(self, stmt: Allocate) -> None:
        self.visit(stmt.body)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if store.buffer is not self.buffer:
            return
        box = self.box(store.indices, (1,) * len(store.indices))
        if box is not None:
            self.boxes.append(box)

    def visit_Evaluate(self, stmt: Evaluate) -> None:
        # A CUDA tile op writing a whole tile (fill, load) writes its box exactly.
        call = stmt.value
        if not isinstance(call, Call):
            return
        reads = _tile_read_positions(call)
        for position, (rows, cols) in tile_accesses(call):
            ref = call.args[position]
            if position in reads or not isinstance(ref, BufferLoad) or ref.buffer is not self.buffer:
                continue
            units = (1,) * (len(ref.indices) - 2) + (rows, cols)
            box = self.box(ref.indices, units)
            if box is not None:
                self.boxes.append(box)

    def box(self, indices: tuple[PrimExpr, ...], units: tuple[int, ...]) -> tuple[Range, ...] | None:
        """The box ``indices`` cover over the loops, each point widened to ``units``; None
        unless every index is ``offset + sum(var * coefficient)`` with the loop variables
        nesting exactly (the smallest coefficient is the unit, each next one the previous
        coefficient times its loop's extent), each loop variable in one dimension only."""
        box: list[Range] = []
        used: set[Var] = set()
        for index, unit in zip(indices, units):
            index = self.analyzer.simplify(substitute(index, self.lets))
            if index.dtype.lanes != 1 or _reads_memory(index):
                return None
            used_here = free_vars(index)
            inner = [v for v in self.loops if v in used_here]
            if any(v in used for v in inner) or any(v.dtype != index.dtype for v in inner):
                return None
            terms: list[tuple[int, Var]] = []
            offset = index
            for var in inner:
                coefficient = self.analyzer.simplify(substitute(index, {var: var + 1}) - index)
                if not isinstance(coefficient, IntImm) or coefficient.value <= 0:
                    return None
                terms.append((coefficient.value, var))
                offset = offset - var * coefficient
            offset = self.analyzer.simplify(offset)
            if set(free_vars(offset)) & set(inner):
                return None
            terms.sort(key=lambda t: t[0])
            expected = unit
            start: PrimExpr = offset
            for coefficient, var in terms:
                dom = self.loops[var]
                if coefficient != expected or not isinstance(dom.extent, IntImm):
                    return None
                start = start + dom.min * coefficient
                expected = coefficient * dom.extent.value
            used.update(inner)
            box.append(Range(self.analyzer.simplify(start), IntImm(expected, index.dtype)))
        return tuple(box)


def _contains(analyzer: Analyzer, box: tuple[Range, ...], region: tuple[Range, ...]) -> bool:
    return all(
        analyzer.can_prove(outer.min <= inner.min)
        and analyzer.can_prove(inner.min + inner.extent <= outer.min + outer.extent)
        for outer, inner in zip(box, region)
    )


def _reads_memory(expr: PrimExpr) -> bool:
    return contains(expr, (BufferLoad, Call))


class _Shift(IRMutator):
    """Accesses of ``old`` become accesses of ``new`` at ``index - start``."""

    def __init__(self, old: Buffer, new: Buffer, starts: tuple[PrimExpr, ...], analyzer: Analyzer) -> None:
        self.old, self.new, self.starts, self.analyzer = old, new, starts, analyzer

    def shift(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        out = []
        for index, start in zip(indices, self.starts):
            if isinstance(start, IntImm) and start.value == 0:
                out.append(index)
            elif isinstance(index, Ramp):
                out.append(Ramp(self.analyzer.simplify(index.base - start), index.stride, index.lanes))
            else:
                out.append(self.analyzer.simplify(index - start))
        return tuple(out)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if load.buffer is not self.old:
            return load
        return BufferLoad(self.new, self.shift(load.indices), span=load.span)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        if store.buffer is not self.old:
            return store
        return BufferStore(self.new, store.value, self.shift(store.indices), span=store.span)


def _lives_inside(scope: str, thread_tag: str) -> bool:
    """Whether memory of ``scope`` may be allocated inside a loop bound to ``thread_tag``."""
    if thread_tag.startswith("threadIdx"):
        return scope not in ("global", "shared", "shared.dyn")  # per-thread memory only
    return scope != "global"  # blockIdx / vthread: per-block memory as well


class _Placer:
    """Finds the new home of one allocation and builds the shrunk ``Allocate`` there."""

    def __init__(self, alloc: Allocate) -> None:
        self.alloc = alloc
        self.buffer = alloc.buffer
        self.outer = Analyzer()  # ranges of the loops the allocation moved into
        # _touched_region is pure and costly, and placing an allocation asks about the same
        # statements again at every loop level it descends: (statement, step) -> region.
        self._regions: dict[tuple[int, int], tuple[Stmt, tuple[Range, ...] | None]] = {}
        # Bodies whose reads are covered: asked again when the allocation enters the loops a
        # deeper question already went through; a yes stays a yes as outer loops are bound.
        self._covered: dict[int, Stmt] = {}

    def _region(self, stmt: Stmt, step: int, compute: Callable[[], tuple[Range, ...] | None]) -> Any:
        key = (id(stmt), step)
        cached = self._regions.get(key)
        if cached is None or cached[0] is not stmt:
            cached = (stmt, compute())
            self._regions[key] = cached
        return cached[1]

    def place(self, stmt: Stmt) -> Stmt:
        buffer = self.buffer
        if isinstance(stmt, SeqStmt):
            users = [k for k, item in enumerate(stmt.stmts) if uses_buffer(item, buffer)]
            if len(users) == 1:
                k = users[0]
                return stmt.replace(stmts=(*stmt.stmts[:k], self.place(stmt.stmts[k]), *stmt.stmts[k + 1 :]))
        elif isinstance(stmt, For):
            if not uses_buffer(stmt.min, buffer) and not uses_buffer(stmt.extent, buffer) and self.can_enter(stmt):
                self.outer.bind(stmt.loop_var, Range(stmt.min, stmt.extent))
                return stmt.replace(body=self.place(stmt.body))
        elif isinstance(stmt, IfThenElse):
            if not uses_buffer(stmt.condition, buffer):
                then_uses = uses_buffer(stmt.then_case, buffer)
                else_uses = stmt.else_case is not None and uses_buffer(stmt.else_case, buffer)
                if then_uses and not else_uses:
                    return stmt.replace(then_case=self.place(stmt.then_case))
                if else_uses and not then_uses:
                    assert stmt.else_case is not None
                    return stmt.replace(else_case=self.place(stmt.else_case))
        elif isinstance(stmt, LetStmt):
            if not uses_buffer(stmt.value, buffer):
                return stmt.replace(body=self.place(stmt.body))
        elif isinstance(stmt, Allocate):
            return stmt.replace(body=self.place(stmt.body))
        return self.allocate(stmt)

    # ------------------------------------------------------------ entering loops

    def can_enter(self, loop: For) -> bool:
        if loop.kind is ForKind.VECTORIZED:
            return False
        if loop.kind is ForKind.THREAD_BINDING:
            tag = loop.thread_tag or ""
            if not _lives_inside(self.buffer.scope, tag):
                return False
            if tag.startswith("blockIdx"):
                return True  # each thread block has its own copy: nothing flows between them
        if isinstance(loop.extent, IntImm) and loop.extent.value == 1:
            return True
        if self._covered.get(id(loop.body)) is loop.body:
            return True  # answered on the way down from an outer loop
        return self.iterations_disjoint(loop) or self.reads_covered(loop.body)

    def reads_covered(self, body: Stmt) -> bool:
        """Whether each iteration writes every element it reads before reading it.

        The body is taken as a sequence of steps; the reads of a step must lie inside one box
        that an earlier step surely wrote (see ``_ExactWrites``).
        """
        original = body  # the lets below are a function of it: the region cache's key
        if self._covered.get(id(original)) is original:
            return True
        lets: dict[Var, PrimExpr] = {}
        while isinstance(body, (LetStmt, Allocate)):
            if isinstance(body, LetStmt):
                lets[body.var] = substitute(body.value, lets)
            body = body.body
        steps = body.stmts if isinstance(body, SeqStmt) else (body,)
        boxes: list[tuple[Range, ...]] = []
        for position, step in enumerate(steps):
            if boxes:
                reads = self._region(
                    original, position, lambda step=step: _touched_region(step, self.buffer, stores=False, lets=lets)
                )
                covered = reads is None or any(_contains(self.outer, box, reads) for box in boxes)
            else:
                # Nothing written yet: only whether the step reads matters, not where.
                covered = not _reads_buffer(step, self.buffer)
            if not covered and not self.self_sufficient(step):
                return False
            if position + 1 < len(steps):
                writes = _ExactWrites(self.buffer, self.outer, lets)
                writes.visit(step)
                boxes.extend(writes.boxes)
        self._covered[id(original)] = original
        return True

    def self_sufficient(self, step: Stmt) -> bool:
        """Whether ``step`` is a loop each of whose iterations writes what it reads first.

        Then the step needs no earlier writes: what an iteration reads was written by that same
        iteration (a packed tile computed and used under one tile loop, for example).
        """
        if not isinstance(step, For) or step.kind is ForKind.VECTORIZED:
            return False
        return self.reads_covered(step.body)

    def iterations_disjoint(self, loop: For) -> bool:
        """Whether different iterations of ``loop`` touch disjoint parts of the buffer."""
        region = self._region(loop.body, -1, lambda: _touched_region(loop.body, self.buffer))
        assert region is not None
        var = loop.loop_var
        analyzer = Analyzer()
        # Comparing iteration v with v + 1 for v up to the second-to-last iteration.
        analyzer.bind(var, Range(loop.min, analyzer.simplify(loop.extent - 1)))
        for rng in region:
            if _reads_memory(rng.min) or _reads_memory(rng.extent):
                continue
            extent = rng.extent
            if uses_var(extent, var):
                bound = analyzer.const_int_bound(extent)
                if math.isinf(bound.max_value):
                    continue
                extent = IntImm(int(bound.max_value), extent.dtype)
            step = analyzer.simplify(substitute(rng.min, {var: var + 1}) - rng.min)
            if analyzer.can_prove(step >= extent) or analyzer.can_prove(step <= -extent):
                return True
        return self.iterations_disjoint_by_value(loop, region)

    def iterations_disjoint_by_value(self, loop: For, region: tuple[Range, ...]) -> bool:
        """The same question for a short loop whose iterations do not step evenly (a fused
        loop indexes ``v // 8`` and ``v % 8``): each iteration's box, as offsets from the first
        iteration's, is compared with every other's."""
        extent, first = loop.extent, loop.min
        if not isinstance(extent, IntImm) or not isinstance(first, IntImm):
            return False
        if not 1 < extent.value <= _MAX_ENUMERATED_ITERATIONS:
            return False
        var = loop.loop_var
        values = {id(var): first.value + np.arange(extent.value, dtype=np.int64)}
        starts: list[np.ndarray] = []  # per dimension, each iteration's start minus the first's
        sizes: list[int] = []
        for rng in region:
            if not uses_var(rng.min, var) or _reads_memory(rng.min) or _reads_memory(rng.extent):
                continue
            size = self.outer.const_int_bound(rng.extent).max_value
            if math.isinf(size):
                continue
            # Outer loop variables cancel out of the offset: (v // 8 * 14 + i) - (0 + i).
            offset = self.outer.simplify(rng.min - substitute(rng.min, {var: first}))
            evaluated = evaluate_int(offset, values)
            if evaluated is None:
                continue
            starts.append(np.broadcast_to(np.asarray(evaluated, dtype=np.int64), (extent.value,)))
            sizes.append(int(size))
        if not starts:
            return False
        # Iterations a and b are disjoint when some dimension's starts are a box size apart.
        apart = np.zeros((extent.value, extent.value), dtype=bool)
        for start, size in zip(starts, sizes):
            apart |= np.abs(start[:, None] - start[None, :]) >= size
        np.fill_diagonal(apart, True)
        return bool(apart.all())

    # ------------------------------------------------------------ the allocation

    def allocate(self, stmt: Stmt) -> Stmt:
        buffer = self.buffer
        if buffer.elem_offset is not None:
            return self.alloc.replace(body=stmt)
        # Often the body of the loop entered last, whose region that loop's check computed.
        region = self._region(stmt, -1, lambda: _touched_region(stmt, buffer))
        assert region is not None
        starts: list[PrimExpr] = []
        shape: list[PrimExpr] = []
        for rng, extent in zip(region, buffer.shape):
            size = self.constant_extent(rng)
            original = extent.value if isinstance(extent, IntImm) else None
            if size is None or (original is not None and size >= original):
                starts.append(IntImm(0, rng.min.dtype))
                shape.append(extent)
            else:
                starts.append(rng.min)
                shape.append(IntImm(size, extent.dtype))
        if all(a is b for a, b in zip(shape, buffer.shape)):
            return self.alloc.replace(body=stmt)
        new = buffer.replace(shape=tuple(shape))
        if buffer.strides and buffer.dim_align:
            new = new.replace(strides=_aligned_strides(tuple(shape), buffer.dim_align))
        body = _Shift(buffer, new, tuple(starts), self.outer).visit(stmt)
        return self.alloc.replace(buffer=new, body=body)

    def constant_extent(self, rng: Range) -> int | None:
        """A constant bound on the region's extent, when its start can serve as an offset."""
        if _reads_memory(rng.min) or _reads_memory(rng.extent):
            return None
        if isinstance(rng.extent, IntImm):
            return max(rng.extent.value, 1)
        bound = self.outer.const_int_bound(rng.extent)
        if math.isinf(bound.max_value) or bound.max_value < 1:
            return None
        return int(bound.max_value)


def _aligned_strides(shape: tuple[PrimExpr, ...], rules: tuple[tuple[int, int, int], ...]) -> tuple[PrimExpr, ...]:
    """Row-major strides for ``shape``, the stride of each ``(axis, factor, offset)`` rule padded
    to the smallest value at least what the inner dimensions span with ``stride % factor == offset``
    (the rule ``storage_align`` applied to the unshrunk buffer)."""
    padding = {axis: (factor, offset) for axis, factor, offset in rules}
    analyzer = Analyzer()
    strides: list[PrimExpr] = [IntImm(1, shape[-1].dtype)]
    for dim in range(len(shape) - 2, -1, -1):
        needed = analyzer.simplify(shape[dim + 1] * strides[0])
        if dim in padding:
            factor, offset = padding[dim]
            needed = analyzer.simplify(
                needed + FloorMod(IntImm(offset, needed.dtype) - needed, IntImm(factor, needed.dtype))
            )
        strides.insert(0, needed)
    return tuple(strides)


class _Compact(IRMutator):
    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        body = self.visit(alloc.body)
        if alloc.data is not None or not uses_buffer(body, alloc.buffer):
            return alloc.replace(body=body)  # a constant keeps its place and every value
        return _Placer(alloc.replace(body=body)).place(body)


def compact_allocations(func: PrimFunc) -> PrimFunc:
    """Move every allocation next to its uses and shrink it there (see the module docstring)."""
    return func.replace(body=_Compact().visit(func.body))
