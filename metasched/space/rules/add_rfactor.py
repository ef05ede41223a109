"""Add-rfactor: a reduction with little spatial parallelism is split in two stages.

Fits a reduction block bound 1:1 to a perfect loop nest whose reduction loops are innermost,
whose spatial extent (the outputs) is below the parallel extent the target wants (cores x 16)
and whose reduction extent is at least 64: ``sum(A[i, k] for k)`` over 4 rows of 4096 has 4
outputs for 2 cores and a serial chain of 4096 adds per output.

The reduction loops are fused and split in two sampled tiles ``k0, k1``; ``rfactor`` of one of
them gives a block of partial results ``rf[i, k1] = sum(A[i, k0 * K1 + k1] for k0)`` (parallel
and vectorizable over ``k1``) followed by a small reduction of the partials. Sketches: the block
unchanged, ``rfactor(k1)``, ``rfactor(k0)``.

A row reduction with many outputs whose innermost reduction loop every read walks
contiguously (a softmax's max and sum, a LayerNorm's moments) gets a sketch in vector lanes
instead (``_in_lanes``): the loop split by the vector width, ``rfactor`` of the inner part into
lane partials ``rf[..., l]``, vectorized, then a 16-wide reduction of the partials.
"""

from __future__ import annotations

from typing import Any

from metasched.space.analysis import TILED, block_info, input_regions, loads_of, region_vars, vars_of
from metasched.space.rules import SketchRule, try_on_copy
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV
from tir.target import Target

__all__ = ["LANES_STRUCTURE", "AddRFactor"]

#: The tiling annotation of a row reduction's lane partials (``AddRFactor._in_lanes``).
LANES_STRUCTURE = "lanes"


class AddRFactor(SketchRule):
    name = "add_rfactor"

    def __init__(self, target: Target, max_jobs_per_core: int = 16, min_reduce_extent: int = 64) -> None:
        self.max_parallel_extent = target.num_cores * max_jobs_per_core
        self.min_reduce_extent = min_reduce_extent
        self.lanes = max(4, target.vector_bytes // 4)

    def _in_lanes(self, sch: Schedule, block: BlockRV, info: Any) -> Schedule | None:
        """The row reduction in vector lanes: its innermost reduction loop, which every read
        walks contiguously (the last index, alone), split by the vector width and factored
        (``rfactor``) into lane partials ``rf[..., l]`` -- the lanes innermost and spatial, so
        vectorized -- and a reduction of the partials. A softmax's or a LayerNorm's rows
        otherwise reduce in scalar code: 3000 rows of 750 summed at 1 thread on an AVX-512 Xeon,
        2.9 ms scalar, 0.35 ms in lanes. The last vector may be partial (750 = 46 x 16 + 14)."""
        if len(info.reduce) != 1:
            return None
        var = info.reduce[0]
        extent = info.extents.get(var)
        if not isinstance(extent, int) or extent < 2 * self.lanes:
            return None
        nest = sch.index.loops_above(info.realize)
        if not nest or nest[-1] is not info.loops[var]:
            return None
        # Data reuse (a matrix product with a transposed operand also walks its reduction
        # contiguously) is the multi-level tiling's: lanes would lose its register tile.
        wide = {v for v in info.spatial if info.extents.get(v, 2) > 1}
        if any(wide - region_vars(region) for region in input_regions(info.block)):
            return None
        walked = False
        for load in loads_of(info.block):
            if any(var in vars_of(index) for index in load.indices[:-1]):
                return None  # strided along the reduction: no contiguous vector
            if load.indices and var in vars_of(load.indices[-1]):
                if load.indices[-1] is not var:
                    return None
                walked = True
        if not walked:
            return None
        ndim = len(info.block.writes[0].buffer.shape)
        lanes = self.lanes

        def step(s: Schedule) -> None:
            _, inner = s.split(s.get_loops(block)[-1], [None, lanes])
            partial = s.rfactor(inner, ndim)
            s.annotate(partial, TILED, LANES_STRUCTURE)

        return try_on_copy(sch, step)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = block_info(sch, block)
        if not info.is_reduction or info.loops is None or TILED in info.block.annotations:
            return [sch]
        lanes = self._in_lanes(sch, block, info)
        in_lanes = [] if lanes is None else [lanes]
        if info.spatial_extent >= self.max_parallel_extent or info.reduce_extent < self.min_reduce_extent:
            return [sch, *in_lanes]
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
        return results + in_lanes
