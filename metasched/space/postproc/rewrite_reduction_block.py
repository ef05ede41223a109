"""Rewrite-reduction-block: split each reduction's init into a loop nest of its own.

``decompose_reduction`` at the outermost loop that drives a reduction iterator: the init then
runs once per output element, before the reduction loops, in copies of the spatial loops
inside (the register tile of a tiled matmul), which the next postprocessor vectorizes like any
other loop nest; the update block loses its branch on "first iteration". When that loop is
refused, loops further out are tried; a block whose init cannot be moved keeps it (the program
is still correct, lowering handles an init).

Before (tiled matmul, the tile loops abbreviated)::

    for i0, j0, k0, i1, j1 in ...:
        with T.block("C"):
            ...
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]

After::

    for i0, j0:
        for i1, j1 in ...:
            with T.block("C_init"):
                C[vi, vj] = 0.0
        for k0, i1, j1 in ...:
            with T.block("C"):
                C[vi, vj] += A[vi, vk] * B[vk, vj]

A row reduction's lane partials (``AddRFactor``'s "lanes" block) computed under a consumer's
loop get their loops in iterator order from ``compute_at``: the lanes outside the reduction.
They are put back innermost first (``reorder``), so the init is one vector and the update
vectorizes.
"""

from __future__ import annotations

from metasched.space.analysis import TILED, kinds_driven, vars_of
from metasched.space.postproc import Postproc
from metasched.space.rules.add_rfactor import LANES_STRUCTURE
from tir.ir import IterKind
from tir.schedule import Schedule, ScheduleError

__all__ = ["RewriteReductionBlock"]


class RewriteReductionBlock(Postproc):
    name = "rewrite_reduction_block"

    def apply(self, sch: Schedule) -> None:
        names = [name for name, realize in sch.index.blocks.items() if realize.block.init is not None]
        for name in names:
            _lanes_innermost(sch, name)
            realize = sch.index.blocks[name]
            loops = sch.index.loops_above(realize)
            reduce_vars: set = set()
            for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                if iv.kind is IterKind.REDUCE:
                    reduce_vars |= vars_of(value)
            first = next((i for i, loop in enumerate(loops) if loop.loop_var in reduce_vars), None)
            if first is None:
                continue  # no reduction loop: the init runs with the only update anyway
            block = sch.get_block(name)
            handles = sch.get_loops(block)
            for position in range(first, -1, -1):
                try:
                    sch.decompose_reduction(block, handles[position])
                    break
                except ScheduleError:
                    continue


def _lanes_innermost(sch: Schedule, name: str) -> None:
    """Swap a lane-partials block's two innermost loops when the inner one runs the reduction
    and the outer one only the lanes."""
    realize = sch.index.blocks[name]
    if realize.block.annotations.get(TILED) != LANES_STRUCTURE:
        return
    loops = sch.index.loops_above(realize)
    if len(loops) < 2 or loops[-2].body is not loops[-1]:
        return
    if kinds_driven(loops[-1], realize) == {IterKind.REDUCE} and kinds_driven(loops[-2], realize) == {IterKind.SPATIAL}:
        handles = sch.get_loops(sch.get_block(name))
        try:
            sch.reorder(handles[-1], handles[-2])
        except ScheduleError:
            pass  # left as it is: correct, only scalar
