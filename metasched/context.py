"""The state of a tune: one ``TuneContext`` per task, and the ``Tuning`` they share.

A ``TuneContext`` holds what belongs to one task: the task, its parsed target, its search
strategy (which holds the task's sketches and postprocessors), its result so far and the task
scheduler's view of its progress. A ``Tuning`` holds what the tasks share -- the database, the
measurer, the cost model, the budget, the log -- and is the one place where a measurement
becomes knowledge: ``commit`` records it in the database, folds it into the task's result,
teaches the cost model and the search, and updates the progress the scheduler reads.

    run = Tuning(target, database, measurer, model, log, Budget(trials=64))
    context = run.add_task(task, space, "evolutionary", seed=0, options={})
    batch = context.search.next_batch(run.batch_size(32))
    seconds = run.commit(context, batch, run.measure([context] * len(batch), batch))
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metasched.database import Database
from metasched.measure import MeasureInput, MeasureResult
from metasched.measure.noise import is_busy
from metasched.protocols import CostModel, Measurer, SearchStrategy, SpaceGenerator
from metasched.result import TaskResult, TuneStatus
from metasched.scheduler import TaskProgress
from metasched.search import Candidate, make_strategy
from metasched.settle import record_of
from metasched.task import Task
from tir.schedule import Trace
from tir.target import Target

if TYPE_CHECKING:
    from metasched.search.parallel import CandidateMaker

__all__ = ["Budget", "TuneContext", "Tuning"]


@dataclass(frozen=True)
class Budget:
    """When a tune stops: after ``trials`` measured candidates or ``seconds`` of wall time,
    whichever comes first (at least one is given)."""

    trials: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.trials is None and self.seconds is None:
            raise ValueError("give trials= or time_budget= (or both)")
        if self.trials is not None and self.trials < 1:
            raise ValueError(f"trials must be at least 1, got {self.trials}")


@dataclass
class TuneContext:
    """One task of a tune (see the module docstring)."""

    index: int
    task: Task
    target: Target
    search: SearchStrategy
    result: TaskResult
    progress: TaskProgress
    default_trace: str | None = None  # the JSON of the default schedule's trace, once known

    @property
    def name(self) -> str:
        return self.task.name


@dataclass
class Tuning:
    """What the tasks of a tune share, and the bookkeeping of every measurement."""

    target: Target
    database: Database
    measurer: Measurer
    model: CostModel | None
    log: Callable[[str], None]
    budget: Budget
    on_progress: Callable[[TuneStatus], None] | None = None
    contexts: list[TuneContext] = field(default_factory=list)
    phase: str = "coverage"
    total: int = 0  # candidates measured in this run
    build_seconds: list[float] = field(default_factory=list)
    interrupted: bool = False
    start: float = field(default_factory=time.perf_counter)

    # ---------------------------------------------------------------- tasks

    def add_task(
        self,
        task: Task,
        space: SpaceGenerator,
        strategy: str,
        seed: int,
        options: dict[str, Any],
        maker: CandidateMaker | None = None,
        group: str = "",
    ) -> TuneContext:
        """A context for ``task``: its sketches, and its search (the strategy registered as
        ``strategy``, made with ``seed`` and its ``options``), warm-started from the database's
        earlier records of the task. ``maker`` makes candidates in worker processes; ``group``:
        tasks of one kind for the task scheduler."""
        self.database.commit_workload(task.func)
        sketches = space.generate(task.func, self.target)
        postprocs = list(space.postprocs_for(self.target))
        search = make_strategy(strategy, task, sketches, postprocs, self.model, seed, maker, **options)
        result = TaskResult(task.name, task.func, task.target.text, task.weight, task.flops)
        progress = TaskProgress(task.weight, flops=task.flops, group=group)
        context = TuneContext(len(self.contexts), task, self.target, search, result, progress)
        self.contexts.append(context)
        known = [(Trace.from_json(r.trace_json), r.seconds) for r in self.database.records(task.func, self.target) if r.trace_json]
        result.known_trials = len(known)
        if known:
            remade = search.warm_start(known)
            if remade and self.model is not None:
                self.model.update(task.key, self.features(remade), [s for _, s in known][: len(remade)])
            best = self.database.get_top_k(task.func, self.target, 1)
            if best:
                progress.history.append((0, best[0].seconds))  # type: ignore[arg-type]
                result.best_seconds = best[0].seconds
                result.emulated = best[0].emulated
            self.log(f"[{task.name}] warm start from {len(known)} records in the database")
        self.log(f"[{task.name}] {len(sketches)} sketches, {task.flops / 1e9:.3f} GFLOP per run")
        return context

    # ---------------------------------------------------------------- budget and progress

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def batch_size(self, wanted: int) -> int:
        """``wanted``, or what is left of the trial budget when that is less."""
        return wanted if self.budget.trials is None else min(wanted, self.budget.trials - self.total)

    def out_of_budget(self) -> bool:
        if self.budget.trials is not None and self.total >= self.budget.trials:
            return True
        return self.budget.seconds is not None and self.elapsed >= self.budget.seconds

    def report(self, context: TuneContext | None = None) -> None:
        """Hand the status to ``on_progress`` (after a batch of ``context``, or a phase change)."""
        if self.on_progress is not None:
            results = [c.result for c in self.contexts]
            index = None if context is None else context.index
            budget = self.budget
            self.on_progress(TuneStatus(self.phase, results, self.total, self.elapsed, budget.trials, budget.seconds, index))

    # ---------------------------------------------------------------- measuring

    def features(self, candidates: Sequence[Candidate]) -> list:
        """The cost model's features of each candidate (computed once, kept on the candidate)."""
        from metasched.cost import extract_features

        for candidate in candidates:
            if candidate.features is None:
                candidate.features = extract_features(candidate.func, self.target)
        return [c.features for c in candidates]

    def measure(self, contexts: Sequence[TuneContext], candidates: Sequence[Candidate], best: float | None = None) -> list[MeasureResult]:
        """Build, check and time ``candidates`` (the ``i``-th a candidate of ``contexts[i]``)."""
        inputs = [MeasureInput(c.func, self.target, reference=ctx.task.func) for ctx, c in zip(contexts, candidates)]
        outcomes = self.measurer.measure(inputs, best_seconds=best)
        return [MeasureResult.of(outcome) for outcome in outcomes]

    def commit(self, context: TuneContext, candidates: Sequence[Candidate], outcomes: Sequence[MeasureResult]) -> list[float | None]:
        """Everything a measurement teaches, in one place: each one recorded in the database and
        folded into the task's result, then the cost model and the search told, then the
        progress the scheduler reads. The seconds of each (None: it failed)."""
        seconds = [self._record(context, c, outcome) for c, outcome in zip(candidates, outcomes)]
        if self.model is not None:
            self.model.update(context.task.key, self.features(candidates), seconds)
        context.search.notify(candidates, seconds)
        context.result.trials += len(candidates)
        self.total += len(candidates)
        best = context.result.best_seconds
        context.progress.trials = context.result.trials
        context.progress.history.append((context.result.trials, best if best is not None else math.inf))
        return seconds

    def _record(self, context: TuneContext, candidate: Candidate, outcome: MeasureResult) -> float | None:
        task, result = context.task, context.result
        trace_json = candidate.trace.to_json()
        default = trace_json == context.default_trace
        self.database.commit_record(record_of(task.key, self.target, trace_json, outcome, default=default))
        if outcome.build_seconds:
            self.build_seconds.append(outcome.build_seconds)
        if outcome.error_kind is not None:
            result.errors[outcome.error_kind] += 1
            result.first_errors.setdefault(outcome.error_kind, outcome.error_msg)
            return None
        if is_busy(outcome.load):
            result.busy_trials += 1
        if outcome.seconds is not None and (result.best_seconds is None or outcome.seconds < result.best_seconds):
            result.best_seconds = outcome.seconds
            result.best_trace = candidate.trace
            result.best_func = candidate.func
            result.emulated = outcome.emulated
        return outcome.seconds
