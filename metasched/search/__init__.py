"""Search: which candidates of a task's design space to measure next (docs/metasched.md).

A strategy is a class with the ``metasched.protocols.SearchStrategy`` methods, constructed as
``cls(task, sketches, postprocs, cost_model, seed=..., maker=..., **options)``; to add one,
write it in a module of this package and name it in ``STRATEGIES`` (``tune(strategy=NAME)``
then finds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metasched.search.candidate import Candidate, Rejected, make_candidate, sampling_positions, sketch_of
from metasched.search.evolutionary import EvolutionarySearch, ReplaySearch, SearchStrategy
from metasched.search.mutators import (
    MutateCategorical,
    MutateComputeLocation,
    MutateTileSize,
    Mutator,
    default_mutators,
)
from metasched.task import Task
from tir.schedule import Trace

if TYPE_CHECKING:
    from metasched.protocols import CostModel
    from metasched.search.parallel import CandidateMaker
    from metasched.space.postproc import Postproc

__all__ = [
    "STRATEGIES",
    "Candidate",
    "EvolutionarySearch",
    "MutateCategorical",
    "MutateComputeLocation",
    "MutateTileSize",
    "Mutator",
    "Rejected",
    "ReplaySearch",
    "SearchStrategy",
    "default_mutators",
    "make_strategy",
    "make_candidate",
    "sampling_positions",
    "sketch_of",
]

#: The search strategies ``tune(strategy=NAME)`` makes, by name.
STRATEGIES: dict[str, type[SearchStrategy]] = {"evolutionary": EvolutionarySearch, "replay": ReplaySearch}


def make_strategy(
    name: str,
    task: Task,
    sketches: Sequence[Trace],
    postprocs: Sequence[Postproc],
    cost_model: CostModel | None,
    seed: int,
    maker: CandidateMaker | None = None,
    **options: Any,
) -> SearchStrategy:
    """The strategy registered as ``name`` for one task; ``options``: its own keyword arguments
    (``population``, ``generations``, ...)."""
    cls = STRATEGIES.get(name)
    if cls is None:
        known = " or ".join(repr(known) for known in STRATEGIES)
        raise ValueError(f"unknown strategy {name!r}; use {known}")
    return cls(task, sketches, postprocs, cost_model, seed=seed, maker=maker, **options)
