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

Where things live: ``tune`` below reads top to bottom as its phases (coverage, search, settle);
the state is ``metasched.context`` (a ``TuneContext`` per task; the ``Tuning`` they share, whose
``commit`` is the one place a measurement is recorded and learned from); the choice of
each task's program at the end is ``metasched.settle``; the result types ``metasched.result``;
the contracts of the plug-ins (space, search strategy, cost model, measurer)
``metasched.protocols``.

An AArch64 target on an x86-64 machine runs end to end: candidates are cross-compiled and run
under qemu (``metasched.measure``), checked like any other; their timings are marked emulated in
the database, in ``TaskResult.emulated`` and in every line printed, since they rank schedules by
how fast this machine emulates them, not by AArch64 speed.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from metasched.context import Budget, TuneContext, Tuning
from metasched.cost import make_cost_model
from metasched.database import Database
from metasched.protocols import CostModel, Measurer, SpaceGenerator
from metasched.result import EMULATED_NOTE, NoProgramError, TaskResult, TuneResult, TuneStatus
from metasched.scheduler import TaskScheduler, make_scheduler
from metasched.search import Candidate
from metasched.settle import DEFAULT_MARGIN, apply_database, settle_best
from metasched.space.postproc import Postproc
from metasched.task import Task, extract_tasks
from tir.ir import IRModule, PrimFunc
from tir.schedule import Schedule, Trace
from tir.target import Target

__all__ = [
    "DEFAULT_MARGIN",
    "EMULATED_NOTE",
    "NoProgramError",
    "TaskResult",
    "TuneResult",
    "TuneStatus",
    "apply_database",
    "tune",
]


def tune(
    func_or_mod: PrimFunc | IRModule | Sequence[Task],
    target: str | Target = "llvm",
    trials: int | None = None,
    time_budget: float | None = None,
    work_dir: str | None = None,
    seed: int = 0,
    num_threads: int | None = None,
    executor: Executor | None = None,
    cost_model: str | CostModel | None = "xgb",
    strategy: str = "evolutionary",
    task_scheduler: str = "gradient",
    batch_size: int = 32,
    space: SpaceGenerator | None = None,
    measurer: Measurer | None = None,
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
    from metasched.search.parallel import shared_maker

    budget = Budget(trials, time_budget)
    target = Target.parse(target)
    if isinstance(func_or_mod, (PrimFunc, IRModule)):
        tasks = extract_tasks(func_or_mod, target)
    else:
        tasks = list(func_or_mod)
    log = log or _print_to_stderr
    database = Database(work_dir if work_dir is not None else tempfile.mkdtemp(prefix="metasched-"))
    model = make_cost_model(cost_model, seed)
    space = _space(space, intrinsics)
    owned = measurer is None
    measurer = measurer or _local_measurer(target, executor, num_threads, log)
    run = Tuning(target, database, measurer, model, log, budget, on_progress)
    maker = shared_maker(search_workers)
    for index, task in enumerate(tasks):
        group = task.pattern or task.name  # similar tasks (one operator pattern) inform each other's priority
        run.add_task(task, space, strategy, seed + 7919 * index, search_options or {}, maker, group)
    try:
        if measure_default:
            _measure_defaults(run, batch_size)
        _search(run, make_scheduler(task_scheduler), batch_size)
        _settle(run)
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            raise
        run.interrupted = True  # every finished measurement is in the database; the batch in flight is lost
        log("interrupted: stopping; every finished measurement is in the database")
    finally:
        for context in run.contexts:
            context.result.rejects = context.search.rejects
        if owned:
            measurer.close()
    return _finish(run, allow_empty)


def _print_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _space(space: SpaceGenerator | None, intrinsics: Sequence[str] | None) -> SpaceGenerator:
    """The design space: ``space``, or the default rules (with ``intrinsics`` when named)."""
    from metasched.space import SpaceGenerator as DefaultSpace

    if intrinsics is None:
        return space or DefaultSpace()
    from tir.intrin import TensorIntrin

    for name in intrinsics:
        TensorIntrin.get(name)  # an unknown name fails now, with the closest names
    if space is not None:
        raise ValueError("pass intrinsics= to the SpaceGenerator given as space=, not to tune")
    return DefaultSpace(intrinsics=intrinsics)


def _local_measurer(target: Target, executor: Executor | None, num_threads: int | None, log: Callable[[str], None]) -> Measurer:
    """The default measurer: worker processes here, or ``executor``'s workers."""
    from metasched.measure import Measurer as DefaultMeasurer
    from metasched.measure.dask_executor import DaskExecutor

    measurer = DefaultMeasurer(target, executor=executor, num_threads=num_threads)
    if isinstance(measurer.executor, DaskExecutor):
        measurer.executor.log = log  # it says which machines measure, and which workers were lost
    if executor is None and target.isa == "aarch64" != Target.host().isa:
        log(
            f"target {target.text!r} is {target.isa}; this machine is {Target.host().isa}: candidates run under "
            "qemu, checked for correctness; their timings are emulated (marked so)"
        )
    return measurer


# ---------------------------------------------------------------- the phases


def _measure_defaults(run: Tuning, batch_size: int) -> None:
    """Coverage: every task's default schedule measured first (see the module docstring)."""
    run.phase = "coverage"
    run.report()
    todo = _default_candidates(run)
    while todo and not run.out_of_budget():
        chunk, todo = todo[: run.batch_size(batch_size)], todo[run.batch_size(batch_size) :]
        outcomes = run.measure([context for context, _ in chunk], [candidate for _, candidate in chunk])
        for (context, candidate), outcome in zip(chunk, outcomes):
            seconds = context.result.default_seconds = run.commit(context, [candidate], [outcome])[0]
            shown = f"{seconds * 1e3:.3f} ms" if seconds is not None else f"failed ({outcome.error_kind})"
            if seconds is not None and outcome.emulated:
                shown += f" {EMULATED_NOTE}"
            run.log(f"[{context.name}] default schedule: {shown}")
            run.report(context)
    if todo:
        names = ", ".join(context.name for context, _ in todo[:5]) + (" ..." if len(todo) > 5 else "")
        run.log(
            f"the budget ran out before {len(todo)} task(s) had their default schedule measured "
            f"({names}); they keep their default schedule"
        )


def _search(run: Tuning, scheduler: TaskScheduler, batch_size: int) -> None:
    """Batches of the task the scheduler picks, until the budget or every design space runs out."""
    run.phase = "search"
    run.report()
    while not run.out_of_budget():
        index = scheduler.pick([context.progress for context in run.contexts])
        if index is None:
            break
        context = run.contexts[index]
        search_start = time.perf_counter()
        batch = context.search.next_batch(run.batch_size(batch_size))
        search_seconds = time.perf_counter() - search_start
        if not batch:
            _exhausted(run, context)
            continue
        measure_start = time.perf_counter()
        outcomes = run.measure([context] * len(batch), batch, best=context.result.best_seconds)
        measure_seconds = time.perf_counter() - measure_start
        run.commit(context, batch, outcomes)
        result, best = context.result, context.result.best_seconds
        shown = f"{best * 1e3:.3f} ms ({context.task.flops / best / 1e9:.1f} GFLOP/s)" if best else "none"
        if best and result.emulated:
            shown += f" {EMULATED_NOTE}"
        disturbed = sum(1 for outcome in outcomes if outcome.busy)
        if disturbed:
            shown += f" [busy machine: {disturbed}/{len(outcomes)} timings disturbed; the leaders are re-timed at the end]"
        trials = run.budget.trials
        run.log(
            f"[{context.name}] trials {result.trials} (total {run.total}{'/' + str(trials) if trials else ''}), "
            f"best {shown}, {run.elapsed:.0f} s (search {search_seconds:.1f} s, measure {measure_seconds:.1f} s)"
        )
        run.report(context)


def _exhausted(run: Tuning, context: TuneContext) -> None:
    """The task's design space has no new valid candidate: done, and the log says why."""
    context.progress.done = True
    result = context.result
    result.rejects = context.search.rejects
    if result.best_seconds is None:
        run.log(
            f"[{context.name}] the design space has no new valid candidate and no candidate ran correctly; "
            f"done: {result.failure_text()}"
        )
    else:
        run.log(f"[{context.name}] the design space has no new valid candidate; done")


def _settle(run: Tuning) -> None:
    """Each task's best chosen from the database (earlier runs included), its leaders re-timed
    (``metasched.settle``); the default's latency taken the same way, so the gain compares like
    with like."""
    run.phase = "settle"
    run.report()
    # Re-timing busy leaders again waits for a quiet moment at most this long in all.
    deadline = time.perf_counter() + min(_QUIET_WAIT, max(5.0, 0.1 * run.elapsed))
    for context in run.contexts:
        settle_best(context.task, context.result, run.database, run.target, run.measurer, run.log, deadline)
    for context in run.contexts:
        if context.default_trace is None:
            continue
        records = run.database.records(context.task.func, run.target)
        valid = [r.seconds for r in records if r.trace_json == context.default_trace and r.is_valid]
        if valid:
            context.result.default_seconds = statistics.median(valid)  # type: ignore[type-var]


def _finish(run: Tuning, allow_empty: bool) -> TuneResult:
    """The result; ``NoProgramError`` when a task ended with no valid program (unless allowed)."""
    run.phase = "stopped" if run.interrupted else "done"
    run.report()
    results = [context.result for context in run.contexts]
    outcome = TuneResult(run.database, results, run.total, run.elapsed, run.build_seconds, run.interrupted)
    empty = [r for r in results if r.best_func is None and (r.trials or r.rejects)]
    for task_result in empty:
        run.log(f"[{task_result.name}] no valid program: {task_result.failure_text()}")
    if empty and not run.interrupted and not allow_empty:
        first = empty[0]
        others = f" (and {len(empty) - 1} more task(s))" if len(empty) > 1 else ""
        raise NoProgramError(
            f"task {first.name!r} ended with no valid program{others}: {first.failure_text()}", outcome
        )
    return outcome


#: Seconds the settle phase may spend waiting for quiet re-timings, at most (less for a short tune).
_QUIET_WAIT = 30.0


def _default_candidates(run: Tuning) -> list[tuple[TuneContext, Candidate]]:
    """(context, candidate) of each task's default schedule not yet measured for the target;
    every context's ``default_trace`` is set on the way.

    A task whose default schedule was measured in an earlier run gets its latency from the
    database instead (the median of its valid measurements)."""
    todo = []
    for context in run.contexts:
        search = context.search
        candidate = _default_in_space(context.task, search.sketches, search.postprocs, run.target)
        if candidate is None:
            run.log(f"[{context.name}] the default schedule is not in the design space: not measured first")
            continue
        trace_json = context.default_trace = candidate.trace.to_json()
        earlier = [r for r in run.database.records(context.task.func, run.target) if r.trace_json == trace_json]
        if earlier:
            valid = [r.seconds for r in earlier if r.is_valid]
            context.result.default_seconds = statistics.median(valid) if valid else None  # type: ignore[type-var]
            continue
        todo.append((context, candidate))
    return todo


def _default_in_space(
    task: Task, sketches: Sequence[Trace], postprocs: Sequence[Postproc], target: Target
) -> Candidate | None:
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


