"""``default_schedule``: a schedule with zero trials -- the tuner's design space (sketch rules and
postprocessors) replayed with fixed, sensible decisions instead of sampled ones.

Decisions, per tiled block: the innermost spatial loop's register tile is the vector width
(the largest divisor of its extent up to 2 vectors), the largest other spatial loop gets a
register tile of up to 4 rows, the middle tiles are 1 and the outer tile takes the rest (the
parallel postprocessor fuses outer tiles, so the parallel extent covers the cores); reductions
run whole inside the tile. Unrolling: the second choice (16). Sketches are tried in order of
preference (no inlined padding, then epilogue fused into the tile); the first that replays and verifies wins, and
the unscheduled program is returned when none does.

    fast = default_schedule(func, "llvm")
"""

from __future__ import annotations

from typing import Any

from tir.ir import PrimFunc
from tir.schedule import Trace
from tir.target import Target

__all__ = ["default_decisions", "default_schedule"]


def _divisor_at_most(extent: int, limit: int, prefer: int = 1) -> int:
    """The divisor of ``extent`` up to ``limit`` that is a multiple of ``prefer`` (else of 8,
    else of 4), the largest such."""
    divisors = [d for d in range(1, min(extent, limit) + 1) if extent % d == 0]
    return max(divisors, key=lambda d: (d % prefer == 0, d % 8 == 0, d % 4 == 0, d))


def _vector_lanes(target: str | Target) -> int:
    parsed = Target.parse(target)
    text = " ".join(str(x) for x in (parsed.text, getattr(parsed, "llvm_features", lambda: "")()))
    if "avx512" in text:
        return 16
    return 8


def default_decisions(sketch: Trace, target: str | Target = "llvm") -> dict[int, Any]:
    """Fixed decisions for ``sketch``'s sampling instructions (see the module docstring)."""
    lanes = _vector_lanes(target)
    decisions: dict[int, Any] = {}
    tiles: list[tuple[int, Any]] = [
        (pos, inst) for pos, inst in enumerate(sketch.instructions) if inst.kind == "sample_perfect_tile"
    ]
    # Runs of tile samples of one block: spatial samples (n >= 3) followed by reduction ones (n == 2).
    runs: list[list[tuple[int, Any]]] = []
    previous = None
    for pos, inst in tiles:
        n = inst.kwargs.get("n", 2)
        if previous is None or pos - previous > 2 or (n > 2 and runs and runs[-1][-1][1].kwargs.get("n", 2) == 2):
            runs.append([])
        runs[-1].append((pos, inst))
        previous = pos
    max_parallel = 32
    for inst in sketch.instructions:
        if inst.kind == "annotate" and inst.kwargs.get("ann_key") == "meta_schedule.parallel":
            max_parallel = int(inst.kwargs["ann_val"])
    for run in runs:
        budget = max_parallel
        spatial = [(pos, inst) for pos, inst in run if inst.kwargs.get("n", 2) > 2]
        reduce = [(pos, inst) for pos, inst in run if inst.kwargs.get("n", 2) == 2]
        extents = {pos: _product(inst.decision) for pos, inst in run}
        vector_pos = spatial[-1][0] if spatial else None
        others = [pos for pos, _ in spatial[:-1]]
        row_pos = max(others, key=lambda p: extents[p], default=None)
        for pos, inst in spatial:
            n = inst.kwargs["n"]
            extent = extents[pos]
            limit = int(inst.kwargs.get("max_innermost_factor", 64))
            if pos == vector_pos:
                inner = _divisor_at_most(extent, min(2 * lanes, limit), prefer=lanes)
            elif pos == row_pos:
                inner = _divisor_at_most(extent, min(4, limit))
            else:
                inner = 1
            # The parallel postprocessor fuses outer tiles while their product fits max_parallel:
            # the outer tiles take what fits, the next level the rest.
            rest = extent // inner
            outer = _divisor_at_most(rest, max(budget, 1))
            budget //= outer
            middle = [rest // outer] + [1] * (n - 3) if n >= 3 else []
            decisions[pos] = [outer] + middle + [inner]
        for pos, inst in reduce:
            extent = extents[pos]
            limit = int(inst.kwargs.get("max_innermost_factor", 64))
            inner = _divisor_at_most(extent, limit)
            decisions[pos] = [extent // inner, inner]
    for pos, inst in enumerate(sketch.instructions):
        if inst.kind == "sample_categorical":
            candidates = inst.args[0] if inst.args else []
            decisions[pos] = 1 if len(candidates) > 1 else 0
        elif inst.kind == "sample_compute_location":
            decisions[pos] = inst.decision
    return decisions


def _product(values: Any) -> int:
    total = 1
    for v in values or [1]:
        total *= int(v)
    return total


def _preference(sketch: Trace) -> tuple[bool, bool]:
    """Sorting key, best first: padding kept as its own stage (inlined, its bounds checks land
    in the innermost loop and stop vectorization), then the epilogue fused into the tile."""
    kinds = {inst.kind for inst in sketch.instructions}
    return ("compute_inline" in kinds, "reverse_compute_at" not in kinds)


def default_schedule(func: PrimFunc, target: str | Target = "llvm", space: Any = None) -> PrimFunc:
    """``func`` scheduled by the default rules with fixed decisions; ``func`` itself when no
    sketch replays and verifies."""
    from metasched.search.candidate import Rejected, make_candidate
    from metasched.space.generator import SpaceGenerator

    space = space or SpaceGenerator()
    target_text = Target.parse(target).text
    try:
        sketches = space.generate(func, target_text)
    except Exception:  # a rule that refuses this program: run it unscheduled rather than fail
        return func
    postprocs = space.postprocs_for(target_text)
    order = sorted(range(len(sketches)), key=lambda i: _preference(sketches[i]))
    for index in order:
        sketch = sketches[index]
        try:
            candidate = make_candidate(func, sketch, index, default_decisions(sketch, target_text), postprocs, seed=0)
        except Rejected:
            continue
        except Exception:
            continue
        return candidate.func
    return func
