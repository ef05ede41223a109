"""Candidates: a sketch plus its sampling decisions, replayed into a checked program.

A candidate is made the same way everywhere (search, database warm start, ``apply_database``):

    sch = Schedule(task.func, seed=seed)
    sketch.apply_to(sch, decisions)      # missing or None decisions are sampled afresh
    for postproc in postprocs: postproc.apply(sch)
    verify(sch.func) must be empty

so its full trace (postprocessor steps included) replays to the same program.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from tir.analysis import verify
from tir.ir import PrimFunc
from tir.ir.structural import structural_hash
from tir.schedule import Schedule, ScheduleError, Trace
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.primitives.annotate import check_independent_loops, deferred_independence_checks
from tir.schedule.trace import SAMPLING_PRIMITIVES

__all__ = [
    "Candidate",
    "Rejected",
    "decision_key",
    "finish_candidate",
    "make_candidate",
    "sampling_positions",
    "sketch_of",
]


class Rejected(Exception):
    """A candidate that could not be made: ``stage`` is where (replay, a postprocessor's name,
    verify), ``reason`` the first line of why. The search counts these by stage and reason."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"{stage}: {reason}")
        self.stage = stage
        self.reason = reason


@dataclass
class Candidate:
    """A checked program of one sketch: what the search ranks and the measurer runs."""

    sketch_index: int
    decisions: dict[int, Any]  # sampling position in the sketch -> decision taken
    sch: Schedule  # or anything with .func and .trace (a MadeProgram, made in another process)
    score: float = 0.0
    features: Any = None
    hash: int = field(default=0)
    #: False for a candidate made lazily (``make_candidate(lazy=True)``): not yet proved valid,
    #: to be ranked only; ``finish_candidate`` checks it before it may be measured.
    checked: bool = True

    @property
    def func(self) -> PrimFunc:
        return self.sch.func

    @property
    def trace(self) -> Trace:
        return self.sch.trace

    @property
    def key(self) -> tuple[int, tuple[tuple[int, Any], ...]]:
        return (self.sketch_index, decision_key(self.decisions))


def sampling_positions(sketch: Trace) -> list[int]:
    """Positions of the sketch's sampling instructions, in order."""
    return [i for i, inst in enumerate(sketch.instructions) if inst.kind in SAMPLING_PRIMITIVES]


def decision_key(decisions: dict[int, Any]) -> tuple[tuple[int, Any], ...]:
    """A hashable form of a decision dict (lists become tuples)."""
    return tuple(sorted((pos, tuple(d) if isinstance(d, list) else d) for pos, d in decisions.items()))


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def make_candidate(
    func: PrimFunc,
    sketch: Trace,
    sketch_index: int,
    decisions: dict[int, Any] | None,
    postprocs: Sequence[Any],
    seed: int,
    check: bool = True,
    lazy: bool = False,
) -> Candidate:
    """Replay ``sketch`` on ``func`` with ``decisions`` (others sampled with ``seed``), run the
    postprocessors and the validator. Raises ``Rejected`` saying at which stage and why.

    ``lazy``: leave out the proofs -- that parallel and vectorized loops have independent
    iterations (``deferred_independence_checks``) and the checking postprocessors and
    validator -- and return an unchecked candidate (``checked`` False) that the search may rank
    but must pass through ``finish_candidate`` before it is measured. A search makes several
    candidates per one it measures, and those proofs are about half of making one."""
    sch = Schedule(func, seed=seed)
    positions = sampling_positions(sketch)
    # Trace.apply_to keeps a recorded decision unless told None: every position not decided
    # here is sampled afresh.
    chosen = {pos: (decisions or {}).get(pos) for pos in positions}
    with deferred_independence_checks() if lazy else nullcontext():
        try:
            sketch.apply_to(sch, chosen)
        except (ScheduleError, ValueError) as error:
            raise Rejected("replay", _first_line(error)) from None
        taken = {pos: sch.trace.instructions[pos].decision for pos in positions}
        for postproc in postprocs:
            if not (lazy and getattr(postproc, "checks_only", False)):
                _apply_postproc(postproc, sch)
    if lazy:
        return Candidate(sketch_index, taken, sch, hash=structural_hash(sch.func), checked=False)
    if check:
        _validate(sch.func, postprocs)
    return Candidate(sketch_index, taken, sch, hash=structural_hash(sch.func))


def _apply_postproc(postproc: Any, sch: Any) -> None:
    try:
        postproc.apply(sch)
    except (ScheduleError, ValueError) as error:
        raise Rejected(getattr(postproc, "name", type(postproc).__name__), _first_line(error)) from None


def _validate(func: PrimFunc, postprocs: Sequence[Any]) -> None:
    """The validator runs once: as the last postprocessor when the space has one, else here."""
    if not any(getattr(p, "name", "") == "verify" for p in postprocs):
        problems = verify(func)
        if problems:
            raise Rejected("verify", _first_line(Exception(str(problems[0]))))


def finish_candidate(
    candidate: Candidate, func: PrimFunc, sketch: Trace, postprocs: Sequence[Any], check: bool = True
) -> Candidate:
    """``candidate`` checked: what a lazy make left out, proved on its finished program. When a
    parallel or vectorized loop's proof fails, the candidate is made again with every check in
    place (the postprocessors then take fewer loops, as they would have), which may give another
    program; raises ``Rejected`` as ``make_candidate`` does."""
    if candidate.checked:
        return candidate
    try:
        check_independent_loops(candidate.func)
    except ScheduleError:
        return make_candidate(func, sketch, candidate.sketch_index, candidate.decisions, postprocs, seed=0, check=check)
    for postproc in postprocs:
        if getattr(postproc, "checks_only", False):
            _apply_postproc(postproc, candidate.sch)
    if check:
        _validate(candidate.func, postprocs)
    candidate.checked = True
    return candidate


def sketch_of(trace: Trace, sketches: Sequence[Trace]) -> tuple[int, dict[int, Any]] | None:
    """Which sketch a recorded (full) trace was made from, and its decisions; None if none fits.

    A candidate's trace starts with its sketch's instructions (postprocessor steps follow), so
    the sketch is the one whose instruction kinds are a prefix of the trace's."""
    shapes = [_shape(inst) for inst in trace.instructions]
    for index, sketch in enumerate(sketches):
        sketch_shapes = [_shape(inst) for inst in sketch.instructions]
        if shapes[: len(sketch_shapes)] == sketch_shapes:
            return index, {pos: trace.instructions[pos].decision for pos in sampling_positions(sketch)}
    return None


def _shape(inst: Any) -> tuple[Any, ...]:
    """An instruction without its handles' names and its decision: what two replays of one sketch
    have in common."""
    return (inst.kind, _plain(inst.args), _plain(tuple(sorted(inst.kwargs.items()))))


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (BlockRV, LoopRV, ExprRV)):
        return type(value).__name__
    return value
