"""Search: which candidates of a task's design space to measure next (docs/metasched.md)."""

from __future__ import annotations

from metasched.search.candidate import Candidate, Rejected, make_candidate, sampling_positions, sketch_of
from metasched.search.evolutionary import EvolutionarySearch, ReplaySearch, SearchStrategy
from metasched.search.mutators import (
    MutateCategorical,
    MutateComputeLocation,
    MutateTileSize,
    Mutator,
    default_mutators,
)

__all__ = [
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
    "make_candidate",
    "sampling_positions",
    "sketch_of",
]
