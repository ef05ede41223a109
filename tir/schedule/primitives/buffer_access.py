"""Schedule primitive: annotate_buffer_access.

A block's declared read or write region, given by the user as ranges of its iterators, in
place of the inferred one: what ``compute_at``, ``cache_read`` and the validator take the block
to touch. TVM takes the user's word; here the new region must contain every access the block
makes, proved symbolically or, for a domain of at most ``MAX_CHECKED_POINTS`` iterator values,
by evaluating the indices at every one. A region that contains the accesses is a safe
statement (primitives then move or copy at most a little more); one that does not would make
them compute too little, so it is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer
from tir.ir import Block, BufferLoad, BufferRegion, BufferStore, IntImm, PrimExpr, PrimFunc, Range, Var, convert
from tir.ir import post_order_visit as _visit
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._layout_util import region_buffer

#: The most iterator values checked one by one when the region cannot be proved symbolically.
MAX_CHECKED_POINTS = 1 << 22

_ANNOTATION = {"read": "explicit_read_region", "write": "explicit_write_region"}


def annotate_buffer_access(
    func: PrimFunc, block_name: str, buffer_index: int, buf_type: str, gen_new_ranges: Callable[..., Any] | str
) -> PrimFunc:
    """Declare the region the block reads (``buf_type="read"``) or writes of its
    ``buffer_index``-th such buffer: ``gen_new_ranges`` takes the block's iterators and gives,
    per dimension, a point or a ``(start, end)`` pair. The block is annotated
    ``{"explicit_read_region": [i]}`` (or ``..._write_...``) as TVM does.

    Preconditions: one entry per dimension of the buffer; every access of the buffer in the
    block lies in the new region for every value of the iterators (proved, or checked at every
    point of a domain of at most ``MAX_CHECKED_POINTS`` values); no nested block accesses it.

    Before (``annotate_buffer_access(B, 0, "read", lambda vi, vj: ((vi - 1, vi + 2), (vj - 1, vj + 2)))``)::

        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0

    After::

        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            T.reads(A[vi - 1:vi + 2, vj - 1:vj + 2])
            T.writes(B[vi, vj])
            T.block_attr({"explicit_read_region": [0]})
            B[vi, vj] = A[vi, vj] * 2.0
    """
    primitive = "annotate_buffer_access"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    block = realize.block
    target = block_target(realize)
    if buf_type not in _ANNOTATION:
        raise ScheduleError(primitive, target, f'buf_type must be "read" or "write", got {buf_type!r}')
    buffer = region_buffer(realize, buf_type, buffer_index, primitive)
    region = _new_region(primitive, target, block, buffer.ndim, gen_new_ranges)
    accesses = _accesses(block, buffer, buf_type == "write")
    if accesses is None:
        raise ScheduleError(primitive, target, f"a nested block accesses {buffer.name}; annotate that block instead")
    if not _contains(block, region, accesses):
        shown = ", ".join(f"{r.min}:{r.min + r.extent}" for r in region)
        raise ScheduleError(
            primitive,
            target,
            f"the region {buffer.name}[{shown}] does not contain every {buf_type} of {buffer.name} the block makes "
            "(checked at every iterator value, or not provable): primitives that trust it would compute too little",
            block,
        )
    regions = list(block.reads if buf_type == "read" else block.writes)
    regions[buffer_index] = BufferRegion(buffer, tuple(region))
    key = _ANNOTATION[buf_type]
    marked = sorted({*block.annotations.get(key, []), buffer_index})
    annotations = {**block.annotations, key: marked}
    field = "reads" if buf_type == "read" else "writes"
    new_block = block.replace(**{field: tuple(regions)}, annotations=annotations)
    return replace_stmt(index, realize, realize.replace(block=new_block))


def _new_region(
    primitive: str, target: str, block: Block, ndim: int, gen_new_ranges: Callable[..., Any] | str
) -> list[Range]:
    from tir.schedule.index_map import IndexMap, IndexMapError

    iter_vars = [iv.var for iv in block.iter_vars]
    if isinstance(gen_new_ranges, str):
        try:
            flat = IndexMap.parse(gen_new_ranges, [v.dtype for v in iter_vars])
        except IndexMapError as exc:
            raise ScheduleError(primitive, target, f"bad ranges: {exc}") from exc
        values = list(flat.apply(iter_vars))
        if len(values) != 2 * ndim:
            raise ScheduleError(primitive, target, f"bad ranges {gen_new_ranges!r}: expected {ndim} (start, end) pairs")
        pairs: list[Any] = [(values[2 * k], values[2 * k + 1]) for k in range(ndim)]
    else:
        try:
            pairs = list(gen_new_ranges(*iter_vars))
        except Exception as exc:  # the user's function
            raise ScheduleError(
                primitive, target, f"calling gen_new_ranges failed: {type(exc).__name__}: {exc}"
            ) from exc
    if len(pairs) != ndim:
        raise ScheduleError(primitive, target, f"gen_new_ranges gave {len(pairs)} entries for a {ndim}-d buffer")
    region = []
    dtype = iter_vars[0].dtype if iter_vars else None
    for pair in pairs:
        if isinstance(pair, (tuple, list)):
            if len(pair) != 2:
                raise ScheduleError(primitive, target, f"a range is a (start, end) pair, got {pair!r}")
            start, end = (convert(p, dtype) for p in pair)
            region.append(Range(start, Analyzer().simplify(end - start)))
        else:
            point = convert(pair, dtype)
            region.append(Range(point, IntImm(1, point.dtype)))
    return region


def _accesses(block: Block, buffer: Any, writes: bool) -> list[tuple[PrimExpr, ...]] | None:
    found: list[tuple[PrimExpr, ...]] = []
    nested = False

    def note(node: object) -> None:
        nonlocal nested
        if isinstance(node, Block) and node is not block:
            regions = node.writes if writes else node.reads
            nested = nested or any(r.buffer is buffer for r in regions)
        if writes and isinstance(node, BufferStore) and node.buffer is buffer:
            found.append(node.indices)
        if not writes and isinstance(node, BufferLoad) and node.buffer is buffer:
            found.append(node.indices)

    for part in (block.body, block.init):
        if part is not None:
            _visit(part, note)
    return None if nested else found


def _contains(block: Block, region: list[Range], accesses: list[tuple[PrimExpr, ...]]) -> bool:
    analyzer = Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    pending: list[tuple[PrimExpr, Range]] = []
    for indices in accesses:
        for index_expr, rng in zip(indices, region):
            low_ok = analyzer.can_prove(rng.min <= index_expr)
            high_ok = analyzer.can_prove(index_expr < rng.min + rng.extent)
            if not (low_ok and high_ok):
                pending.append((index_expr, rng))
    if not pending:
        return True
    return _checked_at_every_point(block, pending)


def _checked_at_every_point(block: Block, pending: Sequence[tuple[PrimExpr, Range]]) -> bool:
    from tir.interp.batched import evaluate_over_box

    box: dict[Var, tuple[int, int]] = {}
    for iv in block.iter_vars:
        if not (isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)):
            return False
        box[iv.var] = (iv.dom.min.value, iv.dom.extent.value)
    if math.prod(extent for _, extent in box.values()) > MAX_CHECKED_POINTS:
        return False
    exprs: list[PrimExpr] = []
    for index_expr, rng in pending:
        exprs += [index_expr, rng.min, rng.min + rng.extent]
    values = evaluate_over_box(exprs, box)
    if values is None:
        return False
    for k in range(0, len(values), 3):
        index_value, start, end = values[k : k + 3]
        if not (np.all(start <= index_value) and np.all(index_value < end)):
            return False
    return True


class BufferAccessPrimitives:
    """Schedule method for annotate_buffer_access."""

    @doc_from(annotate_buffer_access)
    def annotate_buffer_access(  # type: ignore[misc]
        self, block: BlockRV | str, buffer_index: int, buf_type: str, gen_new_ranges: Callable[..., Any] | str
    ) -> None:
        realize = self.resolve_block(block, "annotate_buffer_access")  # type: ignore[attr-defined]
        name = realize.block.name
        ranges = gen_new_ranges
        if callable(gen_new_ranges):
            # The trace keeps the ranges as text: "lambda vi, vj: (s0, e0, s1, e1)".
            region = _new_region(
                "annotate_buffer_access",
                block_target(realize),
                realize.block,
                region_buffer(realize, buf_type, buffer_index, "annotate_buffer_access").ndim,
                gen_new_ranges,
            )
            params = [iv.var for iv in realize.block.iter_vars]
            from tir.schedule.index_map import IndexMap

            flat = [e for rng in region for e in (rng.min, Analyzer().simplify(rng.min + rng.extent))]
            ranges = str(IndexMap(tuple(params), tuple(flat)))
        self._apply(  # type: ignore[attr-defined]
            "annotate_buffer_access",
            (block, buffer_index, buf_type, ranges),
            {},
            lambda func: annotate_buffer_access(func, name, buffer_index, buf_type, ranges),
        )


__all__ = ["MAX_CHECKED_POINTS", "BufferAccessPrimitives", "annotate_buffer_access"]
