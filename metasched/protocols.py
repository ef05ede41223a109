"""The tuner's plug-in contracts: what ``metasched.tune`` asks of each part, as typed Protocols.

Any object with these methods plugs in; no base class is needed (the project's own classes are
the reference implementations, named below). To add one, write a class and hand it to ``tune``
(``space=``, ``measurer=``, ``cost_model=``) or register it where its kind is chosen by name
(``metasched.search.make_strategy`` for strategies, ``metasched.cost.make_cost_model`` for
models); docs/metasched.md lists each extension point with its one file and one registration.

- ``SpaceGenerator`` (``metasched.space.SpaceGenerator``): the sketches of a program for a
  target, and the postprocessors that finish each candidate.
- ``SearchStrategy`` (``metasched.search.EvolutionarySearch``, ``ReplaySearch``): proposes the
  next candidates of one task and learns which were measured.
- ``CostModel`` (``metasched.cost.XGBModel``, ``RandomModel``): scores candidates from their
  features; learns from measurements.
- ``Measurer`` (``metasched.measure.Measurer``): builds, checks and times candidates; every
  failure is a result (``Outcome.error_kind``), never an exception.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from tir.ir import PrimFunc
from tir.schedule import Trace
from tir.target import Target

if TYPE_CHECKING:
    from metasched.measure import MeasureInput
    from metasched.search.candidate import Candidate
    from metasched.space.postproc import Postproc

__all__ = ["CostModel", "Measurer", "Outcome", "SearchStrategy", "SpaceGenerator"]


@runtime_checkable
class SpaceGenerator(Protocol):
    def generate(self, func: PrimFunc, target: str | Target) -> list[Trace]:
        """The sketches: traces with sampling instructions, replayable on ``Schedule(func)``."""
        ...

    def postprocs_for(self, target: str | Target) -> list[Postproc]:
        """The postprocessors that finish a candidate for ``target``, in order."""
        ...


class SearchStrategy(Protocol):
    sketches: list[Trace]
    postprocs: list[Postproc]
    rejects: Counter[str]  # candidates dropped before measuring, by "stage: reason"

    def warm_start(self, traces_and_seconds: Sequence[tuple[Trace, float | None]]) -> list[Candidate]:
        """Take earlier measurements as known; returns the candidates remade from them."""
        ...

    def next_batch(self, size: int) -> list[Candidate]:
        """Up to ``size`` new checked candidates; empty when the space has no new one."""
        ...

    def notify(self, candidates: Sequence[Candidate], seconds: Sequence[float | None]) -> None:
        """Measured results (None: the candidate failed)."""
        ...


class CostModel(Protocol):
    def update(self, task_key: str, features: Sequence[np.ndarray], seconds: Sequence[float | None]) -> None:
        """Learn from measured candidates of task ``task_key`` (None: the candidate failed)."""
        ...

    def predict(self, task_key: str, features: Sequence[np.ndarray]) -> np.ndarray:
        """One score per candidate, higher = faster."""
        ...


class Outcome(Protocol):
    """One measurement, as a measurer returns it. ``metasched.measure.MeasureResult`` has these
    and more (``build_seconds``, ``emulated``, ``load``, ``stall``), which a user's measurer may
    leave out: ``MeasureResult.of`` reads any outcome as one."""

    @property
    def seconds(self) -> float | None: ...

    @property
    def error_kind(self) -> str | None: ...

    @property
    def error_msg(self) -> str: ...


class Measurer(Protocol):
    def measure(self, inputs: Sequence[MeasureInput], best_seconds: float | None = None) -> Sequence[Outcome]:
        """One outcome per input, in order. ``best_seconds``: the task's best so far (a
        measurer may time clearly slower candidates less)."""
        ...

    def close(self) -> None: ...
