"""What a tune returns and reports: each task's outcome (``TaskResult``), the whole run's
(``TuneResult``), the status handed to ``on_progress`` after every batch (``TuneStatus``), and the
error raised when a task ends with no valid program (``NoProgramError``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from metasched.database import Database
from tir.ir import PrimFunc
from tir.schedule import Trace

__all__ = ["EMULATED_NOTE", "NoProgramError", "TaskResult", "TuneResult", "TuneStatus"]

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
    database: Database
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
