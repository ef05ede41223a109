"""``SpaceGenerator``: the sketches of a program, from the sketch rules.

Every rule runs on every block, blocks in post order (consumers first, the root last), rules in
their order; a rule that branches multiplies the schedules. A sketch is the trace of one
resulting schedule: its sampling instructions are the decisions the search makes.

    space = SpaceGenerator()
    sketches = space.generate(func, "llvm")          # list[Trace]
    sch = Schedule(func, seed=1)
    sketches[0].apply_to(sch)                         # fresh samples
    for postproc in space.postprocs_for("llvm"):
        postproc.apply(sch)
"""

from __future__ import annotations

from collections.abc import Sequence

from metasched.space.analysis import blocks_post_order
from metasched.space.postproc import Postproc, default_postprocs
from metasched.space.rules import SketchRule, default_rules
from tir.ir import PrimFunc
from tir.schedule import Schedule, Trace
from tir.schedule.handles import BlockRV
from tir.target import Target

__all__ = ["SpaceGenerator"]


class SpaceGenerator:
    """Sketches from ``rules`` (default: ``default_rules(target, intrinsics)``); ``postprocs``
    (default: ``default_postprocs(target)``) finish each candidate. ``intrinsics``: the tensor
    intrinsics the default rules tensorize with (the blocks they fit get only tensorized
    sketches); default: the target's own (``multi_level_tiling_intrin.default_intrinsics``)."""

    def __init__(
        self,
        rules: Sequence[SketchRule] | None = None,
        postprocs: Sequence[Postproc] | None = None,
        max_sketches: int = 64,
        seed: int = 0,
        intrinsics: Sequence[str] | None = None,
    ) -> None:
        self.rules = list(rules) if rules is not None else None
        self._postprocs = list(postprocs) if postprocs is not None else None
        self.max_sketches = max_sketches
        self.seed = seed
        self.intrinsics = list(intrinsics) if intrinsics is not None else None

    def rules_for(self, target: str | Target) -> list[SketchRule]:
        return self.rules if self.rules is not None else default_rules(Target.parse(target), self.intrinsics)

    def postprocs_for(self, target: str | Target) -> list[Postproc]:
        return self._postprocs if self._postprocs is not None else default_postprocs(Target.parse(target))

    @property
    def postprocs(self) -> list[Postproc]:
        """The postprocessors for the host target when none were given."""
        return self.postprocs_for("llvm")

    def generate_schedules(self, func: PrimFunc, target: str | Target = "llvm") -> list[Schedule]:
        """The sketches as schedules (their sampling decisions are one draw of each)."""
        rules = self.rules_for(target)
        states = [Schedule(func, seed=self.seed)]
        for name in blocks_post_order(func):
            # One handle per schedule and block: copies made by a rule share it.
            pairs = [(sch, sch.get_block(name) if name in sch.index.blocks else None) for sch in states]
            for rule in rules:
                following: list[tuple[Schedule, BlockRV | None]] = []
                for sch, block in pairs:
                    if block is None or name not in sch.index.blocks:
                        following.append((sch, None))  # inlined or folded by an earlier rule
                        continue
                    following.extend((made, block) for made in rule.apply(sch, block))
                pairs = following[: self.max_sketches]
            states = [sch for sch, _ in pairs]
        return states

    def generate(self, func: PrimFunc, target: str | Target = "llvm") -> list[Trace]:
        """The sketches: traces with sampling instructions, replayable on ``Schedule(func)``."""
        return [sch.trace for sch in self.generate_schedules(func, target)]
