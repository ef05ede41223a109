"""Auto-inline: injective blocks disappear into their neighbours.

- An injective producer (elementwise, broadcast, padding, layout change) whose result stays
  inside the program is inlined into its consumers (``compute_inline``): its expression is
  recomputed where it is read, and its buffer disappears -- unless it calls a transcendental
  function (exp, tanh, erf, ...) and several blocks read it, or one reads it broadcast: a
  softmax's exponentials, read by its sum and its quotient, stay computed once, in vectors, and
  so does a squeeze-and-excitation gate (a sigmoid per channel, read for every pixel). A producer with a condition in its
  body (padding) is a choice: inlined, or kept as a stage of its own for random-compute-location
  to place.
- An injective block writing an output, whose only producer is itself injective, is folded into
  that producer (``reverse_compute_inline``): an elementwise chain becomes one loop nest.

A primitive that refuses leaves the schedule as it was. Example, an elementwise chain
``B = A * 2; C = B + 1`` becomes one block computing ``C = A * 2 + 1``.
"""

from __future__ import annotations

from metasched.space.analysis import block_info, is_output, readers_of
from metasched.space.rules import SketchRule, try_on_copy
from tir.ir.ops import calls_costly_math
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV

__all__ = ["AutoInline"]


class AutoInline(SketchRule):
    name = "auto_inline"

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = block_info(sch, block)
        if info.name == "root" or not info.is_injective:
            return [sch]
        buffer = info.block.writes[0].buffer
        if not is_output(sch.func, buffer):
            readers = readers_of(sch, buffer)
            if calls_costly_math(info.block.body) and (
                len(readers) > 1 or (readers and _broadcast(sch, readers[0], buffer))
            ):
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


def _broadcast(sch: Schedule, reader: str, buffer: object) -> bool:
    """Whether the block ``reader`` runs more instances than ``buffer`` has elements: it reads
    them broadcast (a squeeze-and-excitation gate, one per channel, times every pixel)."""
    instances = 1
    for iter_var in sch.index.blocks[reader].block.iter_vars:
        extent = getattr(iter_var.dom.extent, "value", None)
        if extent is None:
            return False
        instances *= extent
    elements = 1
    for dim in buffer.shape:  # type: ignore[attr-defined]
        extent = getattr(dim, "value", None)
        if extent is None:
            return False
        elements *= extent
    return instances > elements


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
