"""Choosing each task's program from the database: the leaders re-timed at the end of a tune
(``settle_best``), and the recorded best applied to a program (``apply_database``).

The fastest of hundreds of noisy measurements is often a lucky one, and a busy machine slows
parallel programs more than serial ones, so the choice is made by the median of each program's
measurements, preferring quiet timings (``metasched.measure.noise``), and the task's default
schedule stays unless a tuned program beats it clearly (``DEFAULT_MARGIN``).
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence

from metasched.database import Database, TuningRecord
from metasched.measure import MeasureResult
from metasched.protocols import Measurer
from metasched.result import TaskResult
from metasched.task import Task
from tir.ir import PrimFunc
from tir.schedule import Schedule, Trace
from tir.target import Target

__all__ = ["DEFAULT_MARGIN", "apply_database", "record_of", "settle_best"]


def settle_best(
    task: Task,
    result: TaskResult,
    database: Database,
    target: Target,
    measurer: Measurer,
    log: Callable[[str], None],
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
    def skipped(reason: str) -> None:
        log(f"[{task.name}] a recorded program no longer replays on this program, skipped: {reason}")

    replayed = []
    for record in leaders.values():
        func = _replay(task.func, record.trace_json, skipped)
        if func is not None:
            replayed.append((record, func))
    failed: set[str] = set()
    todo = replayed
    for attempt in range(_SETTLE_ROUNDS):
        if attempt:
            if deadline is None or time.perf_counter() + _QUIET_PAUSE >= deadline:
                break
            time.sleep(_QUIET_PAUSE)  # let the other job's burst pass
        inputs = [MeasureInput(func, target, reference=task.func) for _, func in todo]
        outcomes = [MeasureResult.of(outcome) for outcome in measurer.measure(inputs)]
        busy = []
        for (record, func), outcome in zip(todo, outcomes):
            is_default = default is not None and record.trace_json == default.trace_json
            database.commit_record(
                record_of(record.workload_hash, target, record.trace_json, outcome, default=is_default)
            )
            if outcome.error_kind is not None:
                failed.add(record.trace_json)
                log(f"[{task.name}] a recorded best candidate fails its check ({outcome.error_kind}): skipped")
            elif outcome.busy:
                busy.append((record, func))
        # Programs timed only on a busy machine whose quiet estimate beats the best so far
        # (by more than the noise margin) are contenders: timed now too.
        contenders: list[tuple[TuningRecord, PrimFunc]] = []
        current = database.records(task.func, target)
        best = next(
            (r for r in database.get_top_k(task.func, target, len(current)) if r.trace_json not in failed), None
        )
        if best is not None:
            timed = {record.trace_json for record, _ in replayed}
            for record in _unconfirmed(current, best):
                if len(contenders) >= _BUSY_LEADERS:
                    break
                func = _replay(task.func, record.trace_json, skipped) if record.trace_json not in timed else None
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


def record_of(workload: str, target: Target, trace_json: str, outcome: MeasureResult, default: bool = False) -> TuningRecord:
    """The database record of one measurement."""
    return TuningRecord(
        default=default,
        workload_hash=workload,
        target=target.text,
        trace_json=trace_json,
        seconds=outcome.seconds,
        error_kind=outcome.error_kind,
        error_msg=outcome.error_msg,
        timestamp=time.time(),
        emulated=outcome.emulated,
        load=outcome.load,
        stall=outcome.stall,
    )


def _timed(record: TuningRecord) -> float:
    """The seconds of a valid record (one that ran and was timed)."""
    assert record.seconds is not None, "a failed record has no timing"
    return record.seconds


def _unconfirmed(records: Sequence[TuningRecord], best: TuningRecord) -> list[TuningRecord]:
    """Programs timed only on a busy machine whose quiet estimate beats ``best`` by more than
    ``_NOISE_MARGIN``: each might be the real best (one record each, by estimate, best first)."""
    from metasched.measure.noise import quiet_estimate

    by_program: dict[str, list[TuningRecord]] = {}
    for record in records:
        if record.is_valid:
            by_program.setdefault(record.trace_json, []).append(record)
    found = []
    for timings in by_program.values():
        if all(r.busy for r in timings):
            estimate = min(quiet_estimate(_timed(r), r.stall) for r in timings)
            if estimate * (1 + _NOISE_MARGIN) < _timed(best):
                found.append((estimate, timings[0]))
    return [record for _, record in sorted(found, key=lambda pair: pair[0])]


def _rests_on_quiet_timings(records: Sequence[TuningRecord], best: TuningRecord) -> bool | None:
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

def _replay(func: PrimFunc, trace: Trace | str, on_failure: Callable[[str], None] | None = None) -> PrimFunc | None:
    """``func`` scheduled by ``trace`` (a ``Trace`` or its JSON); None when the trace no longer
    replays on it (a record written by another version, or a hand-edited database), after
    ``on_failure`` is told why: such a record is skipped, never fatal, and never silently."""
    sch = Schedule(func)
    try:
        (Trace.from_json(trace) if isinstance(trace, str) else trace).apply_to(sch)
    except Exception as error:  # noqa: BLE001 - any failure of a stored trace is a skipped record
        if on_failure is not None:
            reason = str(error).splitlines()[0][:200] if str(error) else ""
            on_failure(f"{type(error).__name__}: {reason}")
        return None
    return sch.func


def _warn_unreplayable(reason: str) -> None:
    warnings.warn(f"apply_database: a recorded program no longer replays, skipped: {reason}", stacklevel=3)


#: A tuned program replaces the default schedule only when its fastest timing is at least this
#: much lower than the default's: isolated timings (cold caches, noise of tens of percent on a
#: VM) rank near-equal programs at random, and in the model the default often runs better.
DEFAULT_MARGIN = 0.1


def _default_unless_clearly_beaten(records: Sequence[TuningRecord], best: Sequence[TuningRecord]) -> list[TuningRecord]:
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
    by_trace = [_timed(r) for r in records if r.trace_json == best[0].trace_json and r.is_valid]
    if not by_trace:
        return []
    # The fastest timing of each: interference only ever slows a run down, and a default
    # timed first (cold) can read 30x its cost once (a 0.1 ms pooling timed at 3.5 ms).
    if min(by_trace) <= min(_timed(r) for r in defaults) * (1 - DEFAULT_MARGIN):
        return []
    return [next(r for r in defaults)]


def apply_database(func: PrimFunc, database: Database | str, target: str | Target = "llvm") -> PrimFunc | None:
    """The fastest recorded schedule of ``func`` for ``target`` applied to it; None when the
    database has no valid record for this program and target (or none replays).

    Fastest by the median of each program's measurements, programs measured more than once
    first: those are the ones a tune re-timed at its end and chose from, and a program measured
    once may rank above them on one lucky measurement (a busy machine makes many). The task's
    default schedule, when the database has its timings, is kept unless the fastest beats it by
    ``DEFAULT_MARGIN``."""
    if not isinstance(database, Database):
        database = Database(database)
    target_text = Target.parse(target).text
    records = database.records(func, target_text)
    measured = Counter(r.trace_json for r in records if r.is_valid)
    ranked = database.get_top_k(func, target_text, len(records))
    ranked.sort(key=lambda record: measured[record.trace_json] < 2)  # stable: by median within each
    # The default schedule stays unless the best beats it clearly (DEFAULT_MARGIN).
    for record in _default_unless_clearly_beaten(records, ranked[:1]) + ranked[:5]:
        tuned = _replay(func, record.trace_json, _warn_unreplayable)
        if tuned is not None:
            return tuned
    return None
