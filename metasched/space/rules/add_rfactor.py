"""Add-rfactor: a reduction with little spatial parallelism is split in two stages.

Fits a reduction block bound 1:1 to a perfect loop nest whose reduction loops are innermost,
whose spatial extent (the outputs) is below the parallel extent the target wants (cores x 16)
and whose reduction extent is at least 64: ``sum(A[i, k] for k)`` over 4 rows of 4096 has 4
outputs for 2 cores and a serial chain of 4096 adds per output.

The reduction loops are fused and split in two sampled tiles ``k0, k1``; ``rfactor`` of one of
them gives a block of partial results ``rf[i, k1] = sum(A[i, k0 * K1 + k1] for k0)`` (parallel
and vectorizable over ``k1``) followed by a small reduction of the partials. Sketches: the block
unchanged, ``rfactor(k1)``, ``rfactor(k0)``.
"""

from __future__ import annotations

from metasched.space.analysis import TILED, block_info
from metasched.space.rules import SketchRule, try_on_copy
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV
from tir.target import Target

__all__ = ["AddRFactor"]


class AddRFactor(SketchRule):
    name = "add_rfactor"

    def __init__(self, target: str | Target = "llvm", max_jobs_per_core: int = 16, min_reduce_extent: int = 64) -> None:
        parsed = Target.parse(target)
        self.max_parallel_extent = parsed.num_cores * max_jobs_per_core
        self.min_reduce_extent = min_reduce_extent

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = block_info(sch, block)
        if not info.is_reduction or info.loops is None or TILED in info.block.annotations:
            return [sch]
        if info.spatial_extent >= self.max_parallel_extent or info.reduce_extent < self.min_reduce_extent:
            return [sch]
        nest = sch.index.loops_above(info.realize)
        reduce_loops = [info.loops[v] for v in info.reduce]
        # The reduction loops must be the innermost ones, so fusing them keeps the nest perfect.
        if {id(loop) for loop in nest[len(nest) - len(reduce_loops) :]} != {id(loop) for loop in reduce_loops}:
            return [sch]
        extent = info.reduce_extent
        inner = next((f for f in (64, 32, 16, 8, 4, 2) if extent % f == 0 and f < extent), None)
        if inner is None:
            return [sch]
        first_draw = [extent // inner, inner]
        results = [sch]
        for which in (1, 0):

            def step(s: Schedule, which: int = which) -> None:
                loops = s.get_loops(block)
                reduce = loops[len(loops) - len(reduce_loops) :]
                fused = s.fuse(*reduce) if len(reduce) > 1 else reduce[0]
                # The sketch's own draw avoids unit tiles (rfactor refuses a loop that drives
                # nothing), so the sketch exists whatever the seed; replays sample afresh.
                sizes = s.sample_perfect_tile(fused, n=2, max_innermost_factor=64, decision=first_draw)
                parts = s.split(fused, sizes)
                s.rfactor(parts[which], 0)

            made = try_on_copy(sch, step)
            if made is not None:
                results.append(made)
        return results
