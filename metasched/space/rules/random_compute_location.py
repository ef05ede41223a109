"""Random compute location: where an untiled producer is computed is a sampled decision.

Fits a block that is not the root, not tiled by another rule, writes a buffer that stays in the
program (its consumers read it) and sits at the root scope: a padding stage kept apart from its
convolution, the max and sum stages of a softmax, the mean of a layer norm. The sketch samples
a location (``sample_compute_location``: one of the loops where ``compute_at`` accepts it, the
root, or inline) and applies it (``apply_compute_location``); the search changes the decision.
"""

from __future__ import annotations

from metasched.space.analysis import TILED, block_info, is_output
from metasched.space.rules import SketchRule, try_on_copy
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV

__all__ = ["RandomComputeLocation"]


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
        if not any(
            name not in ("root", info.name)
            and any(r.buffer is w.buffer for r in other.block.reads for w in info.block.writes)
            for name, other in sch.index.blocks.items()
        ):
            return [sch]

        def step(s: Schedule) -> None:
            location = s.sample_compute_location(block)
            s.apply_compute_location(block, location)

        placed = try_on_copy(sch, step)
        return [placed] if placed is not None else [sch]
