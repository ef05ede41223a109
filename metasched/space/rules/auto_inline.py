"""Auto-inline: injective blocks disappear into their neighbours.

- An injective producer (elementwise, broadcast, padding, layout change) whose result stays
  inside the program is inlined into its consumers (``compute_inline``): its expression is
  recomputed where it is read, and its buffer disappears -- unless it calls a transcendental
  function (exp, tanh, erf, ...) and several blocks read it: a softmax's exponentials, read by
  its sum and its quotient, stay computed once, in vectors. A producer with a condition in its
  body (padding) is a choice: inlined, or kept as a stage of its own for random-compute-location
  to place.
- An injective block writing an output, whose only producer is itself injective, is folded into
  that producer (``reverse_compute_inline``): an elementwise chain becomes one loop nest.

A primitive that refuses leaves the schedule as it was. Example, an elementwise chain
``B = A * 2; C = B + 1`` becomes one block computing ``C = A * 2 + 1``.
"""

from __future__ import annotations

from typing import Any

from metasched.space.analysis import block_info, is_output, readers_of
from metasched.space.rules import SketchRule, try_on_copy
from tir.ir import Call
from tir.ir.functor import post_order_visit
from tir.ir.ops import FLOAT_UNARY
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV

__all__ = ["AutoInline"]


def _transcendental(block: Any) -> bool:
    """Whether the block's value calls a math function other than the cheap ones."""
    found = False

    def visit(node: Any) -> None:
        nonlocal found
        if isinstance(node, Call) and node.op in FLOAT_UNARY and node.op not in _CHEAP:
            found = True

    post_order_visit(block.body, visit)
    return found


#: Math calls as cheap as an arithmetic operation (one instruction or close).
_CHEAP = frozenset({"fabs", "abs", "floor", "ceil", "trunc", "round", "sqrt", "nearbyint"})


class AutoInline(SketchRule):
    name = "auto_inline"

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = block_info(sch, block)
        if info.name == "root" or not info.is_injective:
            return [sch]
        buffer = info.block.writes[0].buffer
        if not is_output(sch.func, buffer):
            if _transcendental(info.block) and len(readers_of(sch, buffer)) > 1:
                return [sch]  # inlined, each reader would compute its exp / tanh / erf again
            inlined = try_on_copy(sch, lambda s: s.compute_inline(block))
            if inlined is None:
                return [sch]
            # Padding: inlining puts a condition in the consumer's innermost loop; keeping it
            # as a stage (placed by random-compute-location) may be faster. Let the search say.
            return [inlined, sch] if info.has_conditional else [inlined]
        producers = _producers(sch, info.block)
        if len(producers) != 1:
            return [sch]
        producer = block_info(sch, producers[0])
        if not producer.is_injective:
            return [sch]
        folded = try_on_copy(sch, lambda s: s.reverse_compute_inline(block))
        return [folded] if folded is not None else [sch]


def _producers(sch: Schedule, block: object) -> list[str]:
    """Names of the blocks that write a buffer ``block`` reads (without recording a trace step)."""
    wanted = {id(region.buffer) for region in block.reads}  # type: ignore[attr-defined]
    names = []
    for name, realize in sch.index.blocks.items():
        if name == "root" or realize.block is block:
            continue
        if any(id(region.buffer) in wanted for region in realize.block.writes):
            names.append(name)
    return names
