"""Random compute location: where an untiled producer is computed is a sampled decision.

Fits a block that is not the root, not tiled by another rule, writes a buffer that stays in the
program (its consumers read it) and sits at the root scope: a padding stage kept apart from its
convolution, the max and sum stages of a softmax, the mean of a layer norm. The sketch samples
a location (``sample_compute_location``: one of the loops where ``compute_at`` accepts it, the
root, or inline) and applies it (``apply_compute_location``); the search changes the decision.
A row reduction's lane partials (``AddRFactor``'s "lanes" block, read by this block only) get
a location of their own right after, so they can follow it under the consumer's loops.

The sketch's own decision, which the default schedule keeps, is ``exact_location``: the
deepest loop where the block is computed next to its consumers without computing anything
twice (a softmax's max, exponentials and sum per row, while the row is in cache), or in place
when there is none (a convolution's padding: neighbouring tiles overlap).
"""

from __future__ import annotations

import math
from typing import cast

from metasched.space.analysis import TILED, block_info, is_output, kinds_driven, readers_of
from metasched.space.rules import SketchRule, try_on_copy
from metasched.space.rules.add_rfactor import LANES_STRUCTURE
from tir.analysis.tree import TreeIndex
from tir.ir import BlockRealize, For, IntImm, IterKind, PrimFunc, post_order_visit
from tir.schedule import Schedule, ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives.compute_location import compute_at, scope_loops

__all__ = ["RandomComputeLocation", "exact_location"]


class RandomComputeLocation(SketchRule):
    name = "random_compute_location"

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = block_info(sch, block)
        if info.name == "root" or TILED in info.block.annotations or info.opaque:
            return [sch]
        scope = sch.index.scope_block(info.realize)
        if scope is None or sch.index.scope_block(scope) is not None:
            return [sch]  # only blocks directly under the root
        if any(is_output(sch.func, region.buffer) for region in info.block.writes):
            return [sch]
        if not _readers(sch, info.name):
            return [sch]
        partials = _lane_partials(sch, info.name)

        def step(s: Schedule) -> None:
            location = s.sample_compute_location(block, decision=exact_location(s.func, info.name))
            s.apply_compute_location(block, location)
            if partials is not None:
                rf = s.get_block(partials)
                location = s.sample_compute_location(rf, decision=exact_location(s.func, partials))
                s.apply_compute_location(rf, location)

        placed = try_on_copy(sch, step)
        return [placed] if placed is not None else [sch]


def _readers(sch: Schedule, name: str) -> list[str]:
    """The other blocks that read what block ``name`` writes."""
    writes = sch.index.blocks[name].block.writes
    return [r for r in dict.fromkeys(r for w in writes for r in readers_of(sch, w.buffer)) if r != name]


def _lane_partials(sch: Schedule, name: str) -> str | None:
    """The "lanes" rfactor block whose only reader is block ``name`` (a row reduction's
    partials, made by ``AddRFactor``), if there is one."""
    block = sch.index.blocks[name].block
    for other_name, other in sch.index.blocks.items():
        if other.block.annotations.get(TILED) != LANES_STRUCTURE:
            continue
        feeds = any(r.buffer is w.buffer for r in block.reads for w in other.block.writes)
        if feeds and _readers(sch, other_name) == [name]:
            return other_name
    return None


def exact_location(func: PrimFunc, block_name: str) -> int:
    """The ``sample_compute_location`` decision that computes ``block_name`` under its
    consumers' loops as deep as possible without computing any instance twice: the deepest
    loop of constant extent above 1, driving no reduction (a row sum's partials are computed
    beside it, not per lane), where ``compute_at`` accepts the block and the loops around it
    then run it exactly as often as now; -1 (in place) when there is none.

    A softmax's row maximum, its exponentials and their sum, computed at the output's row loop,
    are read back from L1 instead of from a whole-tensor buffer (Whisper's 4 x 750 x 750
    scores: 2.3 ms in four whole-tensor passes); a convolution's padding has no such loop
    (neighbouring output tiles read overlapping windows) and stays in place, a pass of its own
    that the convolution's parallel loops do not wrap."""
    index = TreeIndex(func)
    before = _instances(index, block_name)
    if before is None:
        return -1
    best, best_depth = -1, 0
    for position, loop_var in enumerate(scope_loops(func, block_name, index)):
        loop = index.loops[id(loop_var)]
        if not isinstance(loop.extent, IntImm) or loop.extent.value <= 1:
            continue
        depth = len(index.loops_above(loop)) + 1
        if depth <= best_depth or _drives_reduction(loop):
            continue
        try:
            moved = compute_at(func, block_name, loop_var)
        except ScheduleError:
            continue
        if _instances(TreeIndex(moved), block_name) == before:
            best, best_depth = position, depth
    return best


def _instances(index: TreeIndex, block_name: str) -> int | None:
    """How many times the loops around ``block_name`` run it (None for a symbolic extent)."""
    extents = [loop.extent for loop in index.loops_above(index.blocks[block_name])]
    if not all(isinstance(e, IntImm) for e in extents):
        return None
    return math.prod(cast(IntImm, e).value for e in extents)


def _drives_reduction(loop: For) -> bool:
    """Whether some block under ``loop`` binds a reduction iterator to it."""
    realizes: list[BlockRealize] = []
    post_order_visit(loop.body, lambda node: realizes.append(node) if isinstance(node, BlockRealize) else None)
    return any(IterKind.REDUCE in kinds_driven(loop, realize) for realize in realizes)
