"""Helpers of the layout primitives (reindex, transform_layout, transform_block_layout,
pad_einsum): finding blocks, buffers and their accesses, checking loop nests, deciding whether
an index map is a bijection onto a box."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tir.analysis.tree import TreeIndex
from tir.arith import Analyzer
from tir.arith.evaluate import evaluate_int
from tir.arith.int_set import eval_interval
from tir.arith.iter_map import detect_iter_map, determined_vars
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
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
    const,
    is_const_int,
)
from tir.ir.functor import contains, free_vars
from tir.schedule.errors import ScheduleError
from tir.schedule.index_map import IndexMap
from tir.schedule.primitives._common import (  # noqa: F401  (re-exported for layout.py)
    block_target,
    body_stmts,
    buffer_names,
    find_block,
    top_position,
    unique_name,
)

#: Largest number of points an index map is enumerated over when iter_map cannot decide it.
ENUMERATION_LIMIT = 1 << 16


# ---------------------------------------------------------------- blocks, scopes, buffers


def scope_of(index: TreeIndex, realize: BlockRealize, primitive: str) -> BlockRealize:
    scope = index.scope_block(realize)
    if scope is None:
        raise ScheduleError(primitive, block_target(realize), "the root block cannot be transformed by this primitive")
    return scope


def region_buffer(realize: BlockRealize, kind: str, position: int, primitive: str) -> Buffer:
    """The buffer of the block's ``position``-th read (``kind="read"``) or write."""
    field = {"read": "reads", "write": "writes"}.get(kind)
    if field is None:
        raise ScheduleError(
            primitive, block_target(realize), f'the buffer kind must be "read" or "write", got {kind!r}'
        )
    regions: tuple[BufferRegion, ...] = getattr(realize.block, field)
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < len(regions):
        names = [region.buffer.name for region in regions]
        raise ScheduleError(
            primitive,
            block_target(realize),
            f"{kind} buffer index {position!r} is out of range: the block {field} {len(regions)} buffer(s) {names}",
        )
    return regions[position].buffer


def normalize_buffer_arg(realize: BlockRealize, buffer: Any, primitive: str) -> tuple[str, int]:
    """``("read"|"write", i)`` from that pair (tuple or list, as JSON gives it back), a buffer
    name or a Buffer the block reads or writes (a buffer both read and written is taken as
    written, as TVM does)."""
    target = block_target(realize)
    if isinstance(buffer, (tuple, list)):
        if len(buffer) != 2:
            raise ScheduleError(primitive, target, f'expected ("read" | "write", index), got {buffer!r}')
        kind, position = buffer
        region_buffer(realize, kind, position, primitive)
        return str(kind), int(position)
    block = realize.block
    if isinstance(buffer, (str, Buffer)):
        found: dict[int, tuple[str, int]] = {}
        for kind, regions in (("write", block.writes), ("read", block.reads)):
            for position, region in enumerate(regions):
                if (isinstance(buffer, Buffer) and region.buffer is buffer) or (
                    isinstance(buffer, str) and region.buffer.name == buffer
                ):
                    found.setdefault(id(region.buffer), (kind, position))
        name = buffer if isinstance(buffer, str) else buffer.name
        if not found:
            raise ScheduleError(primitive, target, f"the block neither reads nor writes a buffer {name!r}")
        if len(found) > 1:
            raise ScheduleError(
                primitive, target, f'the block accesses several buffers named {name!r}; use ("read" | "write", index)'
            )
        return next(iter(found.values()))
    raise ScheduleError(
        primitive, target, f'expected ("read" | "write", index), a buffer name or a Buffer, got {buffer!r}'
    )


def allocating_block(func: PrimFunc, buffer: Buffer) -> Block | None:
    """The block that allocates ``buffer`` (None for parameters and unknown buffers)."""
    found: list[Block] = []

    class Find(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            if any(b is buffer for b in block.alloc_buffers):
                found.append(block)
            self.generic_visit(block)

    Find().visit(func.body)
    return found[0] if found else None


def defined_in_scope(func: PrimFunc, index: TreeIndex, scope: BlockRealize, buffer: Buffer) -> bool:
    """Whether ``buffer`` is a parameter or allocated / matched by ``scope`` or a block around it."""
    if any(param is buffer for param in func.params):
        return True
    for node in [scope.block, *index.ancestors(scope.block)]:
        if isinstance(node, Block) and (
            any(b is buffer for b in node.alloc_buffers) or any(m.buffer is buffer for m in node.match_buffers)
        ):
            return True
    return False


def outer_vars(func: PrimFunc, index: TreeIndex, scope: BlockRealize) -> set[int]:
    """Variables defined at the top of ``scope``'s body (by id): scalar parameters, and the
    loops, lets and block iterators around (and of) the scope."""
    found = {id(param) for param in func.params if isinstance(param, Var)}
    for node in [scope.block, *index.ancestors(scope.block)]:
        if isinstance(node, For):
            found.add(id(node.loop_var))
        elif isinstance(node, LetStmt):
            found.add(id(node.var))
        elif isinstance(node, Block):
            found.update(id(iv.var) for iv in node.iter_vars)
    return found


def path_to_scope(index: TreeIndex, realize: BlockRealize, scope: BlockRealize) -> list[Stmt]:
    """Statements strictly between ``realize`` and the top level of ``scope``'s body (the
    scope's top-level statement sequence left out), innermost first."""
    path = []
    for node in index.ancestors(realize):
        if node is scope.block:
            break
        path.append(node)
    if path and path[-1] is scope.block.body and isinstance(path[-1], SeqStmt):
        path.pop()
    return path


class ReplaceStmts(IRMutator):
    """Statements (by identity) replaced by new ones."""

    def __init__(self, replacements: Mapping[int, Stmt]) -> None:
        self.replacements = replacements

    def visit(self, node: Any) -> Any:
        if isinstance(node, Stmt):
            new = self.replacements.get(id(node))
            if new is not None:
                return new
        return super().visit(node)


# ---------------------------------------------------------------- accesses


@dataclass
class Access:
    """One load or store of a buffer."""

    node: BufferLoad | BufferStore
    is_store: bool

    @property
    def indices(self) -> tuple[PrimExpr, ...]:
        return self.node.indices


class _CollectAccesses(IRVisitor):
    def __init__(self, buffer: Buffer | None) -> None:
        self.buffer = buffer
        self.found: list[Access] = []
        self.nested_blocks: list[Block] = []

    def visit_Block(self, block: Block) -> None:
        self.nested_blocks.append(block)
        self.generic_visit(block)

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if self.buffer is None or load.buffer is self.buffer:
            self.found.append(Access(load, False))
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if self.buffer is None or store.buffer is self.buffer:
            self.found.append(Access(store, True))
        self.generic_visit(store)


def block_accesses(block: Block, buffer: Buffer | None = None) -> tuple[list[Access], list[Block]]:
    """Loads and stores (of ``buffer``, or of every buffer) in the block's init and body, and
    the blocks nested in them."""
    visitor = _CollectAccesses(buffer)
    visitor.visit(block.init)
    visitor.visit(block.body)
    return visitor.found, visitor.nested_blocks


def accesses_in(node: Stmt | None, buffer: Buffer | None) -> list[Access]:
    """Loads and stores (of ``buffer``, or of every buffer) in ``node``."""
    visitor = _CollectAccesses(buffer)
    visitor.visit(node)
    return visitor.found


class _Touches(IRVisitor):
    """Whether a statement reads / writes a buffer (loads, stores, block regions, match_buffer
    sources), leaving out the block realizes in ``skip``."""

    def __init__(self, buffer: Buffer, skip: frozenset[int]) -> None:
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
            self.reads = self.writes = True
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


def touches(stmt: Stmt, buffer: Buffer, skip: Sequence[Stmt] = ()) -> tuple[bool, bool]:
    """``(reads, writes)`` of ``buffer`` in ``stmt``, the realizes in ``skip`` left out."""
    visitor = _Touches(buffer, frozenset(id(s) for s in skip))
    visitor.visit(stmt)
    return visitor.reads, visitor.writes


def stores_unconditionally(stmt: Stmt | None, buffer: Buffer) -> bool:
    """Whether ``stmt`` always stores to ``buffer`` (a store not under an if or a loop)."""
    if isinstance(stmt, BufferStore):
        return stmt.buffer is buffer
    if isinstance(stmt, SeqStmt):
        return any(stores_unconditionally(item, buffer) for item in stmt.stmts)
    if isinstance(stmt, LetStmt):
        return stores_unconditionally(stmt.body, buffer)
    return False


def is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1 and expr.dtype.is_bool


# ---------------------------------------------------------------- loop nests


def trivial_loop_nest(
    index: TreeIndex, realize: BlockRealize, scope: BlockRealize, primitive: str, serial_only: bool
) -> list[For]:
    """The loops between the block's scope and the block, one per iterator (in iterator order).

    Refused unless those statements are loops only (nothing else under them), each iterator is
    bound to exactly one of them, the loop of an iterator runs over the iterator's domain from
    0, and (``serial_only``) the loops are serial without annotations.
    """
    target = block_target(realize)
    block = realize.block
    path = path_to_scope(index, realize, scope)
    loops: list[For] = []
    for node in path:
        if not isinstance(node, For):
            kind = {"SeqStmt": "a sequence with other statements", "IfThenElse": "an if", "LetStmt": "a let"}.get(
                type(node).__name__, type(node).__name__
            )
            raise ScheduleError(
                primitive,
                target,
                f"the loops around the block must hold the block alone, but it is under {kind} inside its scope",
                node,
            )
        loops.append(node)
    by_var = {id(loop.loop_var): loop for loop in loops}
    bound: list[For] = []
    analyzer = Analyzer()
    for iter_var, value in zip(block.iter_vars, realize.iter_values):
        loop = by_var.get(id(value)) if isinstance(value, Var) else None
        if loop is None:
            raise ScheduleError(
                primitive,
                target,
                f"every iterator must be bound to a loop variable of its own loop nest; "
                f"{iter_var.var.name} is bound to {value}",
                block_header(realize),
            )
        if any(b is loop for b in bound):
            raise ScheduleError(
                primitive,
                target,
                f"loop {loop.loop_var.name} is bound to two iterators; each iterator needs its own loop",
                block_header(realize),
            )
        if not (
            is_const_int(loop.min, 0)
            and analyzer.can_prove_equal(iter_var.dom.min, 0)
            and analyzer.can_prove_equal(loop.extent, iter_var.dom.extent)
        ):
            raise ScheduleError(
                primitive,
                target,
                f"loop {loop.loop_var.name} must run over the domain of {iter_var.var.name} from 0 "
                f"(the loop is {range_text(Range(loop.min, loop.extent))}, the domain {range_text(iter_var.dom)})",
                block_header(realize),
            )
        bound.append(loop)
    for loop in loops:
        if not any(b is loop for b in bound):
            raise ScheduleError(
                primitive,
                target,
                f"loop {loop.loop_var.name} binds no iterator of the block; only the block's own loops may "
                "be around it in its scope",
                block_header(realize),
            )
        if serial_only and (loop.kind.value != "serial" or loop.annotations):
            raise ScheduleError(
                primitive,
                target,
                f"loop {loop.loop_var.name} is {loop.kind.value}"
                f"{' with annotations' if loop.annotations else ''}; the loops are replaced, so they must be "
                "serial without annotations (parallelize, vectorize, bind or annotate afterwards)",
            )
    return bound


def range_text(rng: Range) -> str:
    """``[lo, hi)`` of a range, folded when its ends are constants."""
    if isinstance(rng.min, IntImm) and isinstance(rng.extent, IntImm):
        return f"[{rng.min.value}, {rng.min.value + rng.extent.value})"
    if is_const_int(rng.min, 0):
        return f"[0, {rng.extent})"
    return f"[{rng.min}, {rng.min} + {rng.extent})"


def block_header(realize: BlockRealize) -> str:
    """The block as printed, without its body (for error messages)."""
    text = str(realize).splitlines()
    return "\n".join(text[: 2 + len(realize.block.iter_vars)])


# ---------------------------------------------------------------- index maps


@dataclass
class BoxImage:
    """What an index map does to a box ``[0, extents)``: the image's shape, and whether the
    map was decided with iter_map (else by enumeration)."""

    shape: list[PrimExpr]
    by_iter_map: bool
    result: Any = None
    #: Every point of the box is an image point (False: the rest is padding).
    exact_cover: bool = True


def bijective_box_image(
    index_map: IndexMap, domain: Sequence[Range], primitive: str, target: str, what: str, padding: bool = False
) -> BoxImage:
    """The image of the box ``domain`` under ``index_map``, refused unless the map sends the box
    one-to-one onto a box starting at 0.

    iter_map decides quasi-affine maps (symbolic extents too); other maps of small constant
    boxes are enumerated. With ``padding``, a one-to-one map onto part of a box from 0 is
    accepted too (``i -> (i // 4, i % 4)`` on 14 elements fills 14 of a 4 x 4 box): the image
    is that bounding box, and its other points are padding no index reaches.
    """
    dom_map = dict(zip(index_map.params, domain))
    result = detect_iter_map(list(index_map.results), dom_map, True, "bijective")
    reasons = list(result.errors)
    analyzer = Analyzer()
    if not result.ok and padding:
        padded = _padded_box_image(index_map, dom_map, analyzer)
        if padded is not None:
            return padded
    if result.ok:
        shape = []
        for k, rng in enumerate(result.ranges):
            if not analyzer.can_prove_equal(rng.min, 0):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the index map {index_map} sends {what} onto a box that does not start at 0 "
                    f"(index {k} ranges over {range_text(rng)})",
                )
            shape.append(analyzer.simplify(rng.extent))
        return BoxImage(shape, True, result)
    extents = [rng.extent.value if isinstance(rng.extent, IntImm) else None for rng in domain]
    starts = [rng.min.value if isinstance(rng.min, IntImm) else None for rng in domain]
    if None not in extents and None not in starts and math.prod(extents) <= ENUMERATION_LIMIT:  # type: ignore[arg-type]
        shape_or_reason = _enumerate_box(index_map, starts, extents, padding)  # type: ignore[arg-type]
        if isinstance(shape_or_reason, list):
            dtype = index_map.results[0].dtype
            exact = math.prod(shape_or_reason) == math.prod(extents)  # type: ignore[arg-type]
            return BoxImage([const(e, dtype) for e in shape_or_reason], False, exact_cover=exact)
        reasons = [shape_or_reason]
    raise ScheduleError(
        primitive,
        target,
        f"the index map {index_map} must send {what} one-to-one onto a box starting at 0: " + "; ".join(reasons),
    )


def _padded_box_image(index_map: IndexMap, dom_map: dict[Var, Range], analyzer: Analyzer) -> BoxImage | None:
    """The bounding box from 0 of a map proved one-to-one on ``dom_map`` (every variable
    determined by the results, ``determined_vars``), or None."""
    determined = {id(var) for var in determined_vars(list(index_map.results), dom_map)}
    if not all(id(var) in determined for var in dom_map):
        return None
    for var, rng in dom_map.items():
        analyzer.bind(var, rng)
    shape = []
    for result in index_map.results:
        low, high = eval_interval(result, dom_map)
        if not analyzer.can_prove_equal(low, 0) or not analyzer.can_prove(high >= 0):
            return None
        shape.append(analyzer.simplify(high + 1))
    return BoxImage(shape, False, exact_cover=False)


def _enumerate_box(
    index_map: IndexMap, starts: list[int], extents: list[int], padding: bool = False
) -> list[int] | str:
    axes = [np.arange(s, s + e, dtype=np.int64) for s, e in zip(starts, extents)]
    grids = np.meshgrid(*axes, indexing="ij") if axes else []
    env = {id(param): grid.ravel() for param, grid in zip(index_map.params, grids)}
    count = math.prod(extents)
    values = []
    for result in index_map.results:
        value = evaluate_int(result, env)
        if value is None:
            params = {id(param) for param in index_map.params}
            outside = [var.name for var in free_vars(result) if id(var) not in params]
            if outside:
                # TVM accepts such a map by assuming the variable is positive; the program
                # itself assumes nothing of it, so the new layout would fail where it ran.
                return (
                    f"{result} uses {', '.join(outside)}, a variable whose value is not known here: "
                    "the new shape would depend on it, and for some of its values the map divides "
                    "by zero or is not one-to-one onto a box from 0"
                )
            return f"cannot evaluate {result}"
        values.append(np.broadcast_to(np.asarray(value, dtype=np.int64), (count,)))
    shape = []
    for k, value in enumerate(values):
        low = int(value.min()) if count else 0
        if low != 0:
            return f"index {k} starts at {low}, not 0"
        shape.append(int(value.max()) + 1 if count else 0)
    if math.prod(shape) != count and not padding:
        return f"the image has {count} points but its bounding box [0, {shape}) has {math.prod(shape)}"
    flat = np.zeros(count, dtype=np.int64)
    for value, extent in zip(values, shape):
        flat = flat * extent + value
    if len(np.unique(flat)) != count:
        return "two points map to the same index (the map is not one-to-one)"
    return shape


def has_ramp(indices: Sequence[PrimExpr]) -> bool:
    return any(contains(index, Ramp) for index in indices)
