"""Rewrite-tensor-core: the reduction init and the update of a Tensor Core sketch, tensorized.

The Tensor Core tiling rule leaves its update block annotated ``meta_schedule.tensor_core``
with ``"<update intrinsic>,<fill intrinsic>"``. Here, with the tile sizes known:
``decompose_reduction`` at the block's outermost reduction loop (the k tile loop ``ko``; the
accumulator tiles are zeroed once, before it), ``tensorize`` of the update's three innermost
loops (one intrinsic tile) and of the init's two innermost loops. It is a postprocessor because
the init's loop nest leaves out the loops of extent 1, so its shape depends on the sampled
sizes, and a sketch's trace must replay the same way for any decisions.

Before (the update, with its init, under the tiled loops)::

    for bm, bn, ko, warps, ki, tm, tn, i, j, k in ...:
        with T.block("C"):
            T.block_attr({"meta_schedule.tensor_core": "wmma_sync_...,wmma_fill_..."})
            with T.init(): ...

After::

    for bm, bn:
        for warps, tm, tn:
            with T.block("C_init_o"): T.wmma_fill_fragment(...)
        for ko, warps, ki, tm, tn:
            with T.block("C_o"): T.wmma_mma_sync(...)
"""

from __future__ import annotations

from metasched.space.analysis import vars_of
from metasched.space.postproc import Postproc, PostprocError
from tir.ir import IterKind
from tir.schedule import Schedule

__all__ = ["TENSOR_CORE", "RewriteTensorCore"]

#: Annotation on a Tensor Core sketch's update block: "<update intrinsic>,<fill intrinsic>".
TENSOR_CORE = "meta_schedule.tensor_core"


class RewriteTensorCore(Postproc):
    name = "rewrite_tensor_core"

    def apply(self, sch: Schedule) -> None:
        names = [n for n, r in sch.index.blocks.items() if TENSOR_CORE in r.block.annotations]
        for name in names:
            realize = sch.index.blocks[name]
            sync, fill = str(realize.block.annotations[TENSOR_CORE]).split(",")
            reduce_vars: set = set()
            for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                if iv.kind is IterKind.REDUCE:
                    reduce_vars |= vars_of(value)
            nest = sch.index.loops_above(realize)
            first = next((i for i, loop in enumerate(nest) if loop.loop_var in reduce_vars), None)
            if first is None or len(nest) < 3:
                raise PostprocError(self.name, f"block {name!r} has no reduction loop to decompose at")
            block = sch.get_block(name)
            loops = sch.get_loops(block)
            sch.unannotate(block, TENSOR_CORE)
            init = sch.decompose_reduction(block, loops[first])
            sch.tensorize(loops[-3], sync)
            sch.tensorize(sch.get_loops(init)[-2], fill)
