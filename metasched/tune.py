"""``metasched.tune``: the stages wired together (docs/metasched.md).

    result = metasched.tune(matmul, target="llvm", trials=64, work_dir="tune/")
    result.best_func                      # the fastest program found (checked against the original)
    result.tasks[0].best_seconds
    tuned = metasched.apply_database(matmul, result.database, "llvm")

Coverage first: before any exploration, every task's default schedule
(``metasched.space.default``) is measured as its first candidate, so each task has a measured,
checked program at least as good as what ``compile`` would use without tuning; a budget too small
for that is reported (``TuneResult.uncovered``) and those tasks keep their default schedule.

Then per batch: the task scheduler picks a task, its search strategy proposes candidates
(replayed, post-processed and verified sketches, ranked by the cost model), the measurer builds
and runs them in worker processes and checks their outputs against the unscheduled program, every
result goes to the database, and the cost model learns from it. ``on_progress`` receives a
``TuneStatus`` after every batch (the command line's live table is drawn from it).

An AArch64 target on an x86-64 machine runs end to end: candidates are cross-compiled and run
under qemu (``metasched.measure``), checked like any other; their timings are marked emulated in
the database, in ``TaskResult.emulated`` and in every line printed, since they rank schedules by
how fast this machine emulates them, not by AArch64 speed.
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from metasched.measure.noise import is_busy
from metasched.scheduler import TaskProgress, make_scheduler
from metasched.search import Candidate, EvolutionarySearch, ReplaySearch, SearchStrategy
from metasched.task import Task, extract_tasks, workload_hash
from tir.ir import IRModule, PrimFunc
from tir.schedule import Schedule, Trace
from tir.target import Target

__all__ = ["EMULATED_NOTE", "NoProgramError", "TaskResult", "TuneResult", "TuneStatus", "apply_database", "tune"]

#: Printed after a latency timed under an emulator.
EMULATED_NOTE = "(emulated under qemu: not the target's speed)"


@dataclass
class TaskResult:
    """One task's outcome. ``best_func`` is None when no candidate ran correctly."""

    name: str
    func: PrimFunc
    target: str
    weight: float
    flops: float
    trials: int = 0
    best_seconds: float | None = None
    best_trace: Trace | None = None
    best_func: PrimFunc | None = None
    errors: Counter[str] = field(default_factory=Counter)  # measured failures by kind
    rejects: Counter[str] = field(default_factory=Counter)  # candidates dropped before measuring, by reason
    default_seconds: float | None = None  # the default schedule's measured latency (coverage)
    known_trials: int = 0  # measurements of this task already in the database when the run began
    emulated: bool = False  # best_seconds was timed under an emulator (qemu), not on the target's hardware
    first_errors: dict[str, str] = field(default_factory=dict)  # measured failure kind -> its first message
    busy_trials: int = 0  # valid timings of this run taken while other processes used the CPU
    # Whether best_seconds rests on timings no other process disturbed: True, False (only busy
    # timings: the ranking may not hold on a quiet machine), None (not counted on this system).
    quiet: bool | None = None

    def failure_stages(self) -> list[tuple[str, int, str]]:
        """Where this task's candidates fell out, in pipeline order: (stage, how many, the first
        reason) for the candidates rejected while being made (replay, each postprocessor, the
        validator) and those that failed their measurement (build, run, crash, timeout, wrong)."""
        stages: dict[str, list[Any]] = {}
        for key, count in self.rejects.items():  # "stage: reason", in the order first seen
            raw, _, reason = key.partition(": ")
            reason = reason.removeprefix(f"{raw}: ")  # a PostprocError names its postprocessor too
            stage = _STAGE_NAMES.get(raw, f"postprocessor {raw}")
            entry = stages.setdefault(stage, [0, reason])
            entry[0] += count
        for kind, count in self.errors.items():
            stages[kind] = [count, self.first_errors.get(kind, "")]
        order = ["replay", *sorted(s for s in stages if s.startswith("postprocessor ")), "validator", *_MEASURE_STAGES]
        ranked = sorted(stages, key=lambda stage: order.index(stage) if stage in order else len(order))
        return [(stage, stages[stage][0], stages[stage][1]) for stage in ranked]

    def failure_text(self) -> str:
        """``failure_stages`` in one line: "256 rejected at replay (first: ...); 3 failed build (first: ...)"."""
        parts = []
        for stage, count, reason in self.failure_stages():
            verb = "rejected at" if stage not in _MEASURE_STAGES else "failed:"
            parts.append(f"{count} {verb} {stage}" + (f" (first: {reason})" if reason else ""))
        return "; ".join(parts) if parts else "no candidate was made"

    @property
    def gflops(self) -> float | None:
        return self.flops / self.best_seconds / 1e9 if self.best_seconds else None

    @property
    def covered(self) -> bool:
        """Whether the task has a measured valid program (the default schedule, or better)."""
        return self.best_seconds is not None

    @property
    def gain(self) -> float | None:
        """How many times faster the best program is than the default schedule."""
        if self.best_seconds and self.default_seconds:
            return self.default_seconds / self.best_seconds
        return None


#: Reject stages as the search records them -> the names users read.
_STAGE_NAMES = {"replay": "replay", "verify": "validator", "verify-gpu": "validator"}
#: Measured failure kinds (``MeasureResult.error_kind``), in pipeline order.
_MEASURE_STAGES = ["build", "run", "crash", "timeout", "wrong"]


class NoProgramError(RuntimeError):
    """A task's search ran and ended with no valid program; the message says how many candidates
    fell out at each stage, with the first reason of each. ``result`` is the whole ``TuneResult``."""

    def __init__(self, message: str, result: TuneResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class TuneResult:
    database: Any
    tasks: list[TaskResult]
    trials: int
    wall_seconds: float
    build_seconds: list[float] = field(default_factory=list)
    interrupted: bool = False  # stopped by Ctrl-C (``stop_on_interrupt``): bests not re-timed

    @property
    def uncovered(self) -> list[str]:
        """Names of tasks with no measured valid program: the budget ran out first (they keep
        their default schedule)."""
        return [task.name for task in self.tasks if not task.covered]

    @property
    def best_func(self) -> PrimFunc | None:
        """The tuned program when one function was tuned."""
        if len(self.tasks) != 1:
            raise ValueError(f"{len(self.tasks)} tasks were tuned; use result.tasks[i].best_func")
        return self.tasks[0].best_func

    @property
    def busy_trials(self) -> int:
        """Valid timings of this run taken while other processes used the CPU."""
        return sum(task.busy_trials for task in self.tasks)

    @property
    def trustworthy(self) -> bool:
        """Whether every task's best rests on quiet timings (see ``metasched.measure.noise``):
        False when some task's best was only ever timed on a busy machine, whose ranking
        may not hold once it is quiet (tuning again later re-times it from the database)."""
        return not any(task.quiet is False for task in self.tasks)

    def noise_summary(self) -> str:
        """One line on how far other processes disturbed the timings, "" when none did."""
        if not self.busy_trials and self.trustworthy:
            return ""
        valid = sum(task.trials - sum(task.errors.values()) for task in self.tasks)
        line = f"{self.busy_trials} of {valid} timings were taken while other processes used the CPU"
        doubtful = [task.name for task in self.tasks if task.quiet is False]
        if not doubtful:
            return line + "; every task's best was timed again on a quiet machine"
        names = ", ".join(doubtful[:4]) + (" ..." if len(doubtful) > 4 else "")
        return (
            line + f"; UNTRUSTWORTHY: the best of {len(doubtful)} task(s) ({names}) could not be confirmed by quiet "
            "timings (load slows parallel programs more than serial ones, and the machine stayed busy); tune again "
            "when it is quiet (metasched tune takes those tasks up again): the recorded leaders are re-timed first"
        )

    @property
    def trials_per_minute(self) -> float:
        return 60.0 * self.trials / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def summary(self) -> str:
        lines = [f"{self.trials} trials in {self.wall_seconds:.1f} s ({self.trials_per_minute:.0f}/min)"]
        noise = self.noise_summary()
        if noise:
            lines.append(noise)
        for task in self.tasks:
            best = f"{task.best_seconds * 1e3:.3f} ms, {task.gflops:.1f} GFLOP/s" if task.best_seconds else "none valid"
            if task.best_seconds and task.emulated:
                best += f" {EMULATED_NOTE}"
            lines.append(f"  {task.name}: {task.trials} trials, best {best}")
            if task.errors or task.rejects:
                lines.append(f"    fell out: {task.failure_text()}")
        return "\n".join(lines)


@dataclass
class TuneStatus:
    """What ``tune`` reports to ``on_progress``: the phase, the tasks so far (live objects: read,
    do not keep), the trials measured in this run and the seconds since it began.

    ``phase``: "coverage" (measuring default schedules), "search", "settle" (re-timing the best
    programs at the end), "done" or "stopped" (interrupted)."""

    phase: str
    tasks: list[TaskResult]
    trials: int
    elapsed: float
    trials_budget: int | None
    time_budget: float | None
    task_index: int | None = None  # the task of the batch just measured


def _make_cost_model(cost_model: Any, seed: int) -> Any:
    if not isinstance(cost_model, str):
        return cost_model
    if cost_model == "xgb":
        from metasched.cost import XGBModel

        return XGBModel(seed=seed)
    if cost_model == "random":
        from metasched.cost import RandomModel

        return RandomModel(seed=seed)
    raise ValueError(f"unknown cost_model {cost_model!r}; use 'xgb', 'random' or a CostModel object")


def _make_strategy(
    strategy: str, task: Task, sketches: list[Trace], postprocs: list[Any], model: Any, seed: int, options: dict
) -> SearchStrategy:
    if strategy == "evolutionary":
        return EvolutionarySearch(task, sketches, postprocs, model, seed=seed, **options)
    if strategy == "replay":
        return ReplaySearch(task, sketches, postprocs, model, seed=seed, **options)
    raise ValueError(f"unknown strategy {strategy!r}; use 'evolutionary' or 'replay'")


def _features(candidates: Sequence[Candidate], target: str) -> list[Any]:
    from metasched.cost import extract_features

    for candidate in candidates:
        if candidate.features is None:
            candidate.features = extract_features(candidate.func, target)
    return [c.features for c in candidates]


def tune(
    func_or_mod: PrimFunc | IRModule | Sequence[Task],
    target: str | Target = "llvm",
    trials: int | None = None,
    time_budget: float | None = None,
    work_dir: str | None = None,
    seed: int = 0,
    num_threads: int | None = None,
    executor: Executor | None = None,
    cost_model: Any = "xgb",
    strategy: str = "evolutionary",
    task_scheduler: str = "gradient",
    batch_size: int = 32,
    space: Any = None,
    measurer: Any = None,
    search_options: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    measure_default: bool = True,
    on_progress: Callable[[TuneStatus], None] | None = None,
    stop_on_interrupt: bool = False,
    intrinsics: Sequence[str] | None = None,
    search_workers: int | None = None,
    allow_empty: bool = False,
) -> TuneResult:
    """Tune a program (or every function of a module, or a list of ``Task``) for ``target``.

    Stops after ``trials`` measured candidates in total or ``time_budget`` seconds, whichever
    comes first (at least one must be given). ``work_dir`` holds the database (a temporary
    directory when None); records already there warm-start the search and the cost model.
    ``num_threads`` pins the threads a candidate runs with (default: the module default).
    ``executor`` is any ``concurrent.futures.Executor`` for builds and runs (default: a local
    pool of spawned processes). ``cost_model`` is "xgb", "random" or a model object;
    ``strategy`` "evolutionary" or "replay"; ``space`` a ``SpaceGenerator`` (default rules);
    ``search_options`` keyword arguments of the strategy (``population``, ``generations``, ...);
    ``measurer`` an object with ``measure(inputs)``/``close()`` instead of the default ``Measurer``.
    ``log`` receives progress lines (default: printed to stderr; pass ``lambda s: None`` to
    silence). The best candidate of each task is checked against the unscheduled program.
    ``measure_default``: measure every task's default schedule before exploring (coverage
    first; see the module docstring). ``on_progress`` receives a ``TuneStatus`` after every
    batch and phase change. ``stop_on_interrupt``: Ctrl-C (KeyboardInterrupt) ends the run with
    what was measured (``TuneResult.interrupted``) instead of raising; the database keeps every
    finished measurement either way. ``intrinsics``: names of tensor intrinsics
    (``tir.TensorIntrin``); the blocks they fit get only candidates tensorized with them
    (``metasched.tensorize_candidates`` says which blocks fit and why the others do not); by
    default the target's own intrinsics are used (``space`` then keeps its own setting).
    ``search_workers``: processes making candidates for the search (replay, postprocessors,
    validator; default: one per core, 1 = in this process); the candidates are the same either way.

    A task whose candidates were all rejected or all failed their measurement raises
    ``NoProgramError`` at the end, saying how many fell out at each stage (replay, each
    postprocessor, the validator, build, run, ...) with the first reason of each; the log says the
    same as soon as the search runs dry. ``allow_empty=True`` returns such tasks with
    ``best_func`` None instead (a model keeps their default schedule). A task the budget never
    reached is not an error: ``TuneResult.uncovered`` names it.
    """
    from metasched.database import Database
    from metasched.measure import MeasureInput, Measurer
    from metasched.space import SpaceGenerator

    if trials is None and time_budget is None:
        raise ValueError("give trials= or time_budget= (or both)")
    if trials is not None and trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    target_text = Target.parse(target).text
    if isinstance(func_or_mod, (PrimFunc, IRModule)):
        tasks = extract_tasks(func_or_mod, target_text)
    else:
        tasks = list(func_or_mod)
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    start = time.perf_counter()
    database = Database(work_dir if work_dir is not None else tempfile.mkdtemp(prefix="metasched-"))
    model = _make_cost_model(cost_model, seed)
    if intrinsics is not None:
        from tir.intrin import TensorIntrin

        for name in intrinsics:
            TensorIntrin.get(name)  # an unknown name fails now, with the closest names
        if space is not None:
            raise ValueError("pass intrinsics= to the SpaceGenerator given as space=, not to tune")
        space = SpaceGenerator(intrinsics=intrinsics)
    space = space or SpaceGenerator()
    owns_measurer = measurer is None
    measurer = measurer or Measurer(target_text, executor=executor, num_threads=num_threads)
    from metasched.measure.dask_executor import DaskExecutor

    if owns_measurer and isinstance(measurer.executor, DaskExecutor):
        measurer.executor.log = log  # it says which machines measure, and which workers were lost
    resolved = Target.parse(target_text)
    if owns_measurer and executor is None and resolved.isa == "aarch64" != Target.host().isa:
        log(
            f"target {target_text!r} is {resolved.isa}; this machine is {Target.host().isa}: candidates run under "
            "qemu, checked for correctness; their timings are emulated (marked so)"
        )

    from metasched.search.parallel import shared_maker

    maker = shared_maker(search_workers)
    strategies: list[SearchStrategy] = []
    results: list[TaskResult] = []
    progress: list[TaskProgress] = []
    for index, task in enumerate(tasks):
        database.commit_workload(task.func)
        sketches = space.generate(task.func, target_text)
        postprocs = list(space.postprocs_for(target_text)) if hasattr(space, "postprocs_for") else space.postprocs
        search = _make_strategy(strategy, task, sketches, postprocs, model, seed + 7919 * index, search_options or {})
        search.maker = maker
        strategies.append(search)
        result = TaskResult(task.name, task.func, task.target, task.weight, task.flops)
        results.append(result)
        known = [
            (Trace.from_json(r.trace_json), r.seconds) for r in database.records(task.func, target_text) if r.trace_json
        ]
        progress.append(TaskProgress(task.weight, flops=task.flops, group=_group(task.name)))
        result.known_trials = len(known)
        if known:
            remade = search.warm_start(known)
            if remade and model is not None:
                model.update(task.key, _features(remade, target_text), [s for _, s in known][: len(remade)])
            best = database.get_top_k(task.func, target_text, 1)
            if best:
                progress[-1].history.append((0, best[0].seconds))
                result.best_seconds = best[0].seconds
                result.emulated = best[0].emulated
            log(f"[{task.name}] warm start from {len(known)} records in the database")
        log(f"[{task.name}] {len(sketches)} sketches, {task.flops / 1e9:.3f} GFLOP per run")

    scheduler = make_scheduler(task_scheduler)
    total = 0
    build_seconds: list[float] = []
    interrupted = False
    phase = "coverage" if measure_default else "search"
    default_traces: dict[int, str] = {}  # task index -> trace of its default schedule

    def report(task_index: int | None = None) -> None:
        if on_progress is not None:
            elapsed = time.perf_counter() - start
            on_progress(TuneStatus(phase, results, total, elapsed, trials, time_budget, task_index))

    def out_of_budget() -> bool:
        if trials is not None and total >= trials:
            return True
        return time_budget is not None and time.perf_counter() - start >= time_budget

    def record(index: int, candidate: Candidate, outcome: Any) -> float | None:
        """Commit one measurement and fold it into the task's result; its seconds or None."""
        task, result = tasks[index], results[index]
        trace_json = candidate.trace.to_json()
        database.commit_record(
            _record_of(
                workload_hash(task.func),
                target_text,
                trace_json,
                outcome,
                default=trace_json == default_traces.get(index),
            )
        )
        if outcome.build_seconds:
            build_seconds.append(outcome.build_seconds)
        if outcome.error_kind is None and is_busy(getattr(outcome, "load", None)):
            result.busy_trials += 1
        if outcome.error_kind is not None:
            result.errors[outcome.error_kind] += 1
            result.first_errors.setdefault(outcome.error_kind, outcome.error_msg)
            return None
        if outcome.seconds is not None and (result.best_seconds is None or outcome.seconds < result.best_seconds):
            result.best_seconds = outcome.seconds
            result.best_trace = candidate.trace
            result.best_func = candidate.func
            result.emulated = bool(getattr(outcome, "emulated", False))
        return outcome.seconds  # type: ignore[no-any-return]

    try:
        if measure_default:
            report()
            defaults = _default_candidates(tasks, strategies, results, database, target_text, log, default_traces)
            while defaults and not out_of_budget():
                size = batch_size if trials is None else min(batch_size, trials - total)
                chunk, defaults = defaults[:size], defaults[size:]
                inputs = [MeasureInput(c.func, target_text, reference=tasks[i].func) for i, c in chunk]
                for (index, candidate), outcome in zip(chunk, measurer.measure(inputs)):
                    seconds = record(index, candidate, outcome)
                    results[index].default_seconds = seconds
                    results[index].trials += 1
                    total += 1
                    strategies[index].notify([candidate], [seconds])
                    if model is not None:
                        model.update(tasks[index].key, _features([candidate], target_text), [seconds])
                    best = results[index].best_seconds
                    progress[index].trials = results[index].trials
                    progress[index].history.append((results[index].trials, best if best is not None else math.inf))
                    shown = f"{seconds * 1e3:.3f} ms" if seconds is not None else f"failed ({outcome.error_kind})"
                    if seconds is not None and getattr(outcome, "emulated", False):
                        shown += f" {EMULATED_NOTE}"
                    log(f"[{tasks[index].name}] default schedule: {shown}")
                    report(index)
            if defaults:
                names = ", ".join(tasks[i].name for i, _ in defaults[:5]) + (" ..." if len(defaults) > 5 else "")
                log(
                    f"the budget ran out before {len(defaults)} task(s) had their default schedule measured "
                    f"({names}); they keep their default schedule"
                )
        phase = "search"
        report()
        while trials is None or total < trials:
            if time_budget is not None and time.perf_counter() - start >= time_budget:
                break
            index = scheduler.pick(progress)
            if index is None:
                break
            task, search, result = tasks[index], strategies[index], results[index]
            size = batch_size if trials is None else min(batch_size, trials - total)
            search_start = time.perf_counter()
            batch = search.next_batch(size)
            search_seconds = time.perf_counter() - search_start
            if not batch:
                progress[index].done = True
                result.rejects = search.rejects
                if result.best_seconds is None:
                    log(
                        f"[{task.name}] the design space has no new valid candidate and no candidate ran correctly; "
                        f"done: {result.failure_text()}"
                    )
                else:
                    log(f"[{task.name}] the design space has no new valid candidate; done")
                continue
            inputs = [MeasureInput(c.func, target_text, reference=task.func) for c in batch]
            measure_start = time.perf_counter()
            measured = measurer.measure(inputs, best_seconds=result.best_seconds)
            measure_seconds = time.perf_counter() - measure_start
            seconds = [record(index, candidate, outcome) for candidate, outcome in zip(batch, measured)]
            if model is not None:
                model.update(task.key, _features(batch, target_text), seconds)
            search.notify(batch, seconds)
            result.trials += len(batch)
            total += len(batch)
            best = result.best_seconds if result.best_seconds is not None else math.inf
            progress[index].trials = result.trials
            progress[index].history.append((result.trials, best))
            elapsed = time.perf_counter() - start
            shown = f"{best * 1e3:.3f} ms ({task.flops / best / 1e9:.1f} GFLOP/s)" if math.isfinite(best) else "none"
            if math.isfinite(best) and result.emulated:
                shown += f" {EMULATED_NOTE}"
            disturbed = sum(1 for outcome in measured if is_busy(getattr(outcome, "load", None)))
            if disturbed:
                shown += f" [busy machine: {disturbed}/{len(measured)} timings disturbed; the leaders are re-timed at the end]"
            log(
                f"[{task.name}] trials {result.trials} (total {total}{'/' + str(trials) if trials else ''}), "
                f"best {shown}, {elapsed:.0f} s (search {search_seconds:.1f} s, measure {measure_seconds:.1f} s)"
            )
            report(index)
        # Results: the database's best per task (earlier runs included), checked once more.
        phase = "settle"
        report()
        # Re-timing busy leaders again waits for a quiet moment at most this long in all.
        settle_deadline = time.perf_counter() + min(_QUIET_WAIT, max(5.0, 0.1 * (time.perf_counter() - start)))
        for task, result in zip(tasks, results):
            _settle_best(task, result, database, target_text, measurer, log, settle_deadline)
        # The default's latency as the best's: the median of its measurements (it may have
        # been re-timed with the best), so that the gain compares like with like.
        for index, trace_json in default_traces.items():
            valid = [
                r.seconds
                for r in database.records(tasks[index].func, target_text)
                if r.trace_json == trace_json and r.is_valid
            ]
            if valid:
                results[index].default_seconds = statistics.median(valid)
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            raise
        interrupted = True  # every finished measurement is in the database; the batch in flight is lost
        log("interrupted: stopping; every finished measurement is in the database")
    finally:
        for search, result in zip(strategies, results):
            result.rejects = search.rejects
        if owns_measurer:
            measurer.close()
    phase = "stopped" if interrupted else "done"
    report()
    outcome = TuneResult(database, results, total, time.perf_counter() - start, build_seconds, interrupted)
    empty = [r for r in results if r.best_func is None and (r.trials or r.rejects)]
    for task_result in empty:
        log(f"[{task_result.name}] no valid program: {task_result.failure_text()}")
    if empty and not interrupted and not allow_empty:
        first = empty[0]
        others = f" (and {len(empty) - 1} more task(s))" if len(empty) > 1 else ""
        raise NoProgramError(
            f"task {first.name!r} ended with no valid program{others}: {first.failure_text()}", outcome
        )
    return outcome


def _group(task_name: str) -> str:
    """What makes tasks similar for the task scheduler: the operator pattern of a model's task
    name (``g12_conv_relu`` -> ``conv_relu``); a name without a group prefix is its own."""
    prefix, _, rest = task_name.partition("_")
    return rest if rest and prefix[:1] in "gt" and prefix[1:].isdigit() else task_name


def _default_candidates(
    tasks: Sequence[Task],
    strategies: Sequence[SearchStrategy],
    results: Sequence[TaskResult],
    database: Any,
    target: str,
    log: Callable[[str], None],
    traces: dict[int, str],
) -> list[tuple[int, Candidate]]:
    """(task index, candidate) of each task's default schedule not yet measured for ``target``;
    ``traces`` receives every task's default trace (JSON).

    A task whose default schedule was measured in an earlier run gets its latency from the
    database instead (the median of its valid measurements)."""
    todo = []
    for index, (task, search) in enumerate(zip(tasks, strategies)):
        candidate = default_candidate(task, search.sketches, search.postprocs, target)
        if candidate is None:
            log(f"[{task.name}] the default schedule is not in the design space: not measured first")
            continue
        trace_json = traces[index] = candidate.trace.to_json()
        earlier = [r for r in database.records(task.func, target) if r.trace_json == trace_json]
        if earlier:
            valid = [r.seconds for r in earlier if r.is_valid]
            results[index].default_seconds = statistics.median(valid) if valid else None
            continue
        todo.append((index, candidate))
    return todo


def default_candidate(task: Task, sketches: Sequence[Trace], postprocs: Sequence[Any], target: str) -> Candidate | None:
    """The task's default schedule (``metasched.space.default.default_schedule``) as a candidate
    with its trace, so it can be measured and recorded like any other: the sketch whose default
    decisions give a program structurally equal to the default one. The unscheduled program
    (the default when no sketch applies) is the empty trace. None when no sketch gives it."""
    from metasched.search.candidate import Rejected, make_candidate
    from metasched.space.default import default_decisions, default_schedule, light_reduction
    from tir.ir.structural import structural_equal, structural_hash

    default_func = default_schedule(task.func, target)
    if default_func is task.func:
        return Candidate(-1, {}, Schedule(task.func), hash=structural_hash(task.func))
    light = light_reduction(task.func)
    for index, sketch in enumerate(sketches):
        try:
            decisions = default_decisions(sketch, target, light)
            candidate = make_candidate(task.func, sketch, index, decisions, postprocs, seed=0)
        except Rejected:
            continue
        except Exception:  # noqa: BLE001 - a sketch that cannot take the default decisions is not the default
            continue
        if structural_equal(candidate.func, default_func):
            return candidate
    return None


def _settle_best(
    task: Task,
    result: TaskResult,
    database: Any,
    target: str,
    measurer: Any,
    log: Any,
    deadline: float | None = None,
) -> None:
    """Re-time the leading recorded programs (the fastest of hundreds of noisy measurements
    is often a lucky one), record the new measurements, and take the fastest by the median of
    each program's measurements among those that still compute what the unscheduled program
    computes (a program that fails the check is skipped, and said so).

    The leaders are the five best by the database's ranking (a program timed only on a busy
    machine at its quiet estimate, ``noise.quiet_estimate``: a parallel program timed under
    load looks slower than it is), eight when some of the task's timings were busy. A
    re-timing that comes back busy is repeated after a pause until ``deadline``; the ranking
    prefers quiet timings (``Database.get_top_k``), and ``result.quiet`` says whether the best
    rests on them."""
    from metasched.measure import MeasureInput

    records = database.records(task.func, target)
    count = _BUSY_LEADERS if any(r.busy for r in records) else 5
    leaders = {r.trace_json: r for r in database.get_top_k(task.func, target, count)}
    # The default schedule is re-timed beside the leaders: a tuned program is used only when
    # it beats the default clearly (``apply_database``), so both need fresh timings.
    default = next((r for r in records if r.default and r.is_valid), None)
    if default is not None:
        leaders[default.trace_json] = default
    replayed = []
    for record in leaders.values():
        func = _replay(task.func, Trace.from_json(record.trace_json))
        if func is not None:
            replayed.append((record, func))
    failed: set[str] = set()
    todo = replayed
    for attempt in range(_SETTLE_ROUNDS):
        if attempt:
            if deadline is None or time.perf_counter() + _QUIET_PAUSE >= deadline:
                break
            time.sleep(_QUIET_PAUSE)  # let the other job's burst pass
        outcomes = measurer.measure([MeasureInput(func, target, reference=task.func) for _, func in todo])
        busy = []
        for (record, func), outcome in zip(todo, outcomes):
            is_default = default is not None and record.trace_json == default.trace_json
            database.commit_record(
                _record_of(record.workload_hash, target, record.trace_json, outcome, default=is_default)
            )
            if outcome.error_kind is not None:
                failed.add(record.trace_json)
                log(f"[{task.name}] a recorded best candidate fails its check ({outcome.error_kind}): skipped")
            elif is_busy(getattr(outcome, "load", None)):
                busy.append((record, func))
        # Programs timed only on a busy machine whose quiet estimate beats the best so far
        # (by more than the noise margin) are contenders: timed now too.
        contenders = []
        current = database.records(task.func, target)
        best = next(
            (r for r in database.get_top_k(task.func, target, len(current)) if r.trace_json not in failed), None
        )
        if best is not None:
            timed = {record.trace_json for record, _ in replayed}
            for record in _unconfirmed(current, best):
                if len(contenders) >= _BUSY_LEADERS:
                    break
                func = (
                    _replay(task.func, Trace.from_json(record.trace_json)) if record.trace_json not in timed else None
                )
                if func is not None:
                    contenders.append((record, func))
            replayed.extend(contenders)
        if not busy and not contenders:
            break
        if attempt == 0 and busy:
            log(f"[{task.name}] {len(busy)} of {len(todo)} leaders were re-timed on a busy machine: timing them again")
        todo = busy + contenders
    functions = {record.trace_json: func for record, func in replayed}
    # Ranked again by the medians that include the new measurements, among the programs just
    # re-timed: others may now rank above them on a single lucky measurement each.
    every_program = len(database.records(task.func, target))
    ranked = [
        record
        for record in database.get_top_k(task.func, target, every_program)
        if record.trace_json not in failed and record.trace_json in functions
    ]
    keep = _default_unless_clearly_beaten(database.records(task.func, target), ranked[:1])
    for record in keep + ranked:
        if record.trace_json not in functions:
            continue
        result.best_seconds = record.seconds
        result.best_trace = Trace.from_json(record.trace_json)
        result.best_func = functions[record.trace_json]
        result.emulated = record.emulated
        result.quiet = _rests_on_quiet_timings(database.records(task.func, target), record)
        return
    result.best_seconds = result.best_trace = result.best_func = None
    result.emulated = False


def _record_of(workload: str, target: str, trace_json: str, outcome: Any, default: bool = False) -> Any:
    """The database record of one measurement (``MeasureResult``, or a user measurer's result
    with fewer fields)."""
    from metasched.database import TuningRecord

    return TuningRecord(
        default=default,
        workload_hash=workload,
        target=target,
        trace_json=trace_json,
        seconds=outcome.seconds,
        error_kind=outcome.error_kind,
        error_msg=outcome.error_msg,
        timestamp=time.time(),
        emulated=bool(getattr(outcome, "emulated", False)),
        load=getattr(outcome, "load", None),
        stall=getattr(outcome, "stall", None),
    )


def _unconfirmed(records: Sequence[Any], best: Any) -> list[Any]:
    """Programs timed only on a busy machine whose quiet estimate beats ``best`` by more than
    ``_NOISE_MARGIN``: each might be the real best (one record each, by estimate, best first)."""
    from metasched.measure.noise import quiet_estimate

    by_program: dict[str, list[Any]] = {}
    for record in records:
        if record.is_valid:
            by_program.setdefault(record.trace_json, []).append(record)
    found = []
    for timings in by_program.values():
        if all(r.busy for r in timings):
            estimate = min(quiet_estimate(r.seconds, r.stall) for r in timings)
            if estimate * (1 + _NOISE_MARGIN) < best.seconds:
                found.append((estimate, timings[0]))
    return [record for _, record in sorted(found, key=lambda pair: pair[0])]


def _rests_on_quiet_timings(records: Sequence[Any], best: Any) -> bool | None:
    """Whether the choice of ``best`` rests on quiet timings: it has one, and no program timed
    only on a busy machine might beat it (``_unconfirmed``). None where the timings carry no
    load (not counted on this system)."""
    if not any(r.load is not None for r in records if r.is_valid):
        return None
    own = [r for r in records if r.is_valid and r.trace_json == best.trace_json]
    if all(r.busy for r in own):
        return False
    return not _unconfirmed(records, best)


#: A program timed only under load counts as a possible best when its quiet estimate beats the
#: best's time by more than this share: the estimate is rough, and timings differ by a few
#: percent from run to run anyway.
_NOISE_MARGIN = 0.1
#: Programs re-timed (instead of five) when some of the task's timings were busy.
_BUSY_LEADERS = 8
#: Times a leader is re-timed at most while its timings come back busy, and the pause between.
_SETTLE_ROUNDS = 4
_QUIET_PAUSE = 1.0
#: Seconds the settle phase may spend waiting for quiet re-timings, at most (less for a short tune).
_QUIET_WAIT = 30.0


def _replay(func: PrimFunc, trace: Trace) -> PrimFunc | None:
    sch = Schedule(func)
    try:
        trace.apply_to(sch)
    except Exception:  # noqa: BLE001 - a record that no longer replays is skipped, never fatal
        return None
    return sch.func


#: A tuned program replaces the default schedule only when its fastest timing is at least this
#: much lower than the default's: isolated timings (cold caches, noise of tens of percent on a
#: VM) rank near-equal programs at random, and in the model the default often runs better.
DEFAULT_MARGIN = 0.1


def _default_unless_clearly_beaten(records: Sequence[Any], best: Sequence[Any]) -> list[Any]:
    """``[the default's record]`` when the task's default schedule was timed and ``best`` (the
    top-ranked record) does not beat it by ``DEFAULT_MARGIN`` (fastest timing against fastest
    timing); else ``[]``."""
    flagged = next((r for r in records if r.default), None)
    if flagged is None or not best or best[0].trace_json == flagged.trace_json:
        return []
    # Every timing of the default's program counts (re-timings may not carry the flag).
    defaults = [r for r in records if r.trace_json == flagged.trace_json and r.is_valid]
    if not defaults:
        return []
    by_trace = [r.seconds for r in records if r.trace_json == best[0].trace_json and r.is_valid]
    if not by_trace:
        return []
    # The fastest timing of each: interference only ever slows a run down, and a default
    # timed first (cold) can read 30x its cost once (a 0.1 ms pooling timed at 3.5 ms).
    if min(by_trace) <= min(r.seconds for r in defaults) * (1 - DEFAULT_MARGIN):
        return []
    return [next(r for r in defaults)]


def apply_database(func: PrimFunc, database: Any, target: str | Target = "llvm") -> PrimFunc | None:
    """The fastest recorded schedule of ``func`` for ``target`` applied to it; None when the
    database has no valid record for this program and target (or none replays).

    Fastest by the median of each program's measurements, programs measured more than once
    first: those are the ones a tune re-timed at its end and chose from, and a program measured
    once may rank above them on one lucky measurement (a busy machine makes many). The task's
    default schedule, when the database has its timings, is kept unless the fastest beats it by
    ``DEFAULT_MARGIN``."""
    from metasched.database import Database

    if not isinstance(database, Database):
        database = Database(database)
    target_text = Target.parse(target).text
    records = database.records(func, target_text)
    measured = Counter(r.trace_json for r in records if r.is_valid)
    ranked = database.get_top_k(func, target_text, len(records))
    ranked.sort(key=lambda record: measured[record.trace_json] < 2)  # stable: by median within each
    # The default schedule stays unless the best beats it clearly (DEFAULT_MARGIN).
    for record in _default_unless_clearly_beaten(records, ranked[:1]) + ranked[:5]:
        tuned = _replay(func, Trace.from_json(record.trace_json))
        if tuned is not None:
            return tuned
    return None
