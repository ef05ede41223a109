"""Parallel-vectorize-unroll: the "decide later" annotations on the root block.

Applies to the root block only. It sets

- ``meta_schedule.parallel``: the largest parallel extent worth making (cores x 16, so a
  parallel loop has enough chunks to balance);
- ``meta_schedule.vectorize``: the largest vectorized extent (two native vector registers of
  32-bit lanes, e.g. 32 with AVX-512, 16 with AVX2);
- ``meta_schedule.unroll_explicit``: an unroll depth sampled from ``[0, 16, 64]``
  (``sample_categorical``), the product of inner loop extents to unroll.

The postprocessor ``RewriteParallelVectorizeUnroll`` turns them into ``parallel``,
``vectorize`` and ``unroll`` of each block's loops.
"""

from __future__ import annotations

from metasched.space.analysis import PARALLEL, UNROLL, VECTORIZE
from metasched.space.rules import SketchRule
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV
from tir.target import Target

__all__ = ["ParallelVectorizeUnroll"]


class ParallelVectorizeUnroll(SketchRule):
    name = "parallel_vectorize_unroll"

    def __init__(
        self,
        target: Target,
        max_jobs_per_core: int = 16,
        unroll_depths: tuple[int, ...] = (0, 16, 64),
    ) -> None:
        self.max_parallel_extent = target.num_cores * max_jobs_per_core
        self.max_vector_extent = 2 * target.vector_bytes // 4
        self.unroll_depths = unroll_depths

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        realize = sch.resolve_block(block, self.name)
        if sch.index.scope_block(realize) is not None:  # not the root block
            return [sch]
        sch.annotate(block, PARALLEL, self.max_parallel_extent)
        sch.annotate(block, VECTORIZE, self.max_vector_extent)
        depth = sch.sample_categorical(list(self.unroll_depths), [1.0] * len(self.unroll_depths))
        sch.annotate(block, UNROLL, depth)
        return [sch]
