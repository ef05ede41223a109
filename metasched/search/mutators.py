"""Mutators: small changes to a candidate's sampling decisions.

Each mutator looks at the sketch's sampling instructions, picks one it knows how to change, and
returns new decisions (or None when it has nothing to change). The candidate is then replayed
with them; a decision that no longer fits (a compute location that moved away) is refused by
the sampling primitive and the mutant dropped.

- ``MutateTileSize``: move a prime factor between two tile sizes of one ``sample_perfect_tile``
  (the product stays the loop's extent; the innermost stays within its bound).
- ``MutateCategorical``: another choice of a ``sample_categorical`` (unroll depth, parallel
  extent, vector width, a register tile's size, ...); the decisions of sampling instructions
  that act on what the changed value shaped (the tiles of a loop split by it) are sampled
  afresh, as their old ones were made for another loop.
- ``MutateComputeLocation``: resample a ``sample_compute_location`` (its valid choices depend on
  the program before it, so replay samples among them).
"""

from __future__ import annotations

import random
from typing import Any

from tir.schedule import Trace

__all__ = ["MutateCategorical", "MutateComputeLocation", "MutateTileSize", "Mutator", "default_mutators"]


class Mutator:
    name = "mutator"
    kinds: tuple[str, ...] = ()

    def positions(self, sketch: Trace) -> list[int]:
        return [i for i, inst in enumerate(sketch.instructions) if inst.kind in self.kinds]

    def mutate(self, sketch: Trace, decisions: dict[int, Any], rng: random.Random) -> dict[int, Any] | None:
        raise NotImplementedError


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


class MutateTileSize(Mutator):
    name = "tile_size"
    kinds = ("sample_perfect_tile",)

    def mutate(self, sketch: Trace, decisions: dict[int, Any], rng: random.Random) -> dict[int, Any] | None:
        options = [pos for pos in self.positions(sketch) if len(decisions.get(pos) or ()) > 1]
        rng.shuffle(options)
        for pos in options:
            sizes = list(decisions[pos])
            limit = sketch.instructions[pos].kwargs.get("max_innermost_factor", 16)
            sources = [i for i, size in enumerate(sizes) if size > 1]
            if not sources:
                continue
            for _ in range(8):
                src = rng.choice(sources)
                dst = rng.choice([i for i in range(len(sizes)) if i != src])
                factor = rng.choice(_prime_factors(sizes[src]))
                new = list(sizes)
                new[src] //= factor
                new[dst] *= factor
                if new[-1] <= limit:
                    return {**decisions, pos: new}
        return None


class MutateCategorical(Mutator):
    name = "categorical"
    kinds = ("sample_categorical",)

    def mutate(self, sketch: Trace, decisions: dict[int, Any], rng: random.Random) -> dict[int, Any] | None:
        options = [pos for pos in self.positions(sketch) if len(sketch.instructions[pos].args[0]) > 1]
        if not options:
            return None
        pos = rng.choice(options)
        count = len(sketch.instructions[pos].args[0])
        choices = [i for i in range(count) if i != decisions.get(pos)]
        resampled = {later: None for later in _dependent_samples(sketch, pos)}
        return {**decisions, **resampled, pos: rng.choice(choices)}


def _handles(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [handle for item in value for handle in _handles(item)]
    return [value] if hasattr(value, "rv_name") else []


def _dependent_samples(sketch: Trace, pos: int) -> list[int]:
    """Positions of the sampling instructions after ``pos`` that take, directly or through the
    instructions between, a handle made from the value sampled at ``pos``."""
    derived = {handle.rv_name for handle in sketch.instructions[pos].outputs}
    found = []
    for later in range(pos + 1, len(sketch.instructions)):
        inst = sketch.instructions[later]
        inputs = {handle.rv_name for handle in _handles(list(inst.args)) + _handles(list(inst.kwargs.values()))}
        if not inputs & derived:
            continue
        derived |= {handle.rv_name for handle in inst.outputs}
        if inst.kind.startswith("sample_"):
            found.append(later)
    return found


class MutateComputeLocation(Mutator):
    name = "compute_location"
    kinds = ("sample_compute_location",)

    def mutate(self, sketch: Trace, decisions: dict[int, Any], rng: random.Random) -> dict[int, Any] | None:
        options = self.positions(sketch)
        if not options:
            return None
        return {**decisions, rng.choice(options): None}


def default_mutators() -> list[tuple[Mutator, float]]:
    """The mutators and their weights (tile sizes matter most on CPU)."""
    return [(MutateTileSize(), 0.6), (MutateCategorical(), 0.25), (MutateComputeLocation(), 0.15)]
