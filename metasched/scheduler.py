"""Task schedulers: which task gets the next batch of trials.

- ``RoundRobin``: tasks in turn.
- ``Gradient`` (Ansor, section 6): after every task has a measured program (coverage first),
  the task whose next trials are expected to cut the weighted total latency the most: a mix of
  its recent improvement per trial (the backward gradient) and its optimistic remaining gain,
  weighted by the task's occurrences. The optimistic gain is the larger of its best latency over
  its trials so far and, when similar tasks (same ``group``, e.g. every ``conv_relu``) run at a
  higher throughput, the latency it would lose running at 1/beta of the best of theirs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["SCHEDULERS", "Gradient", "RoundRobin", "TaskProgress", "TaskScheduler", "make_scheduler"]


@dataclass
class TaskProgress:
    """What a scheduler knows of one task: its weight and best latency after each batch."""

    weight: float
    trials: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials so far, best seconds)
    done: bool = False  # the design space is exhausted
    flops: float = 0.0  # of one run; with ``group``, lets similar tasks' throughput bound the gain
    group: str = ""  # tasks of one kind (operator pattern); "" compares with none

    @property
    def best(self) -> float:
        return self.history[-1][1] if self.history else math.inf


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, tasks: Sequence[TaskProgress]) -> int | None:
        for offset in range(len(tasks)):
            index = (self._next + offset) % len(tasks)
            if not tasks[index].done:
                self._next = index + 1
                return index
        return None


class Gradient:
    """``alpha`` weighs the backward gradient against the optimistic forward one (Ansor's 0.2);
    ``beta``: similar tasks' best throughput, divided by ``beta``, is thought within reach."""

    def __init__(self, backward_window: int = 3, alpha: float = 0.2, beta: float = 2.0) -> None:
        self.window = backward_window
        self.alpha = alpha
        self.beta = beta

    def pick(self, tasks: Sequence[TaskProgress]) -> int | None:
        live = [i for i, t in enumerate(tasks) if not t.done]
        if not live:
            return None
        untouched = [i for i in live if not tasks[i].history or not math.isfinite(tasks[i].best)]
        if untouched:  # coverage first: every task gets a measured candidate before any exploits
            return untouched[0]
        peak: dict[str, float] = {}  # group -> best throughput (FLOP/s) among its tasks
        for task in tasks:
            if task.group and task.flops > 0 and math.isfinite(task.best) and task.best > 0:
                peak[task.group] = max(peak.get(task.group, 0.0), task.flops / task.best)
        return max(live, key=lambda i: self._gain(tasks[i], peak.get(tasks[i].group)))

    def _gain(self, task: TaskProgress, peer_throughput: float | None = None) -> float:
        history = task.history
        trials, best = history[-1]
        backward = 0.0
        if len(history) > self.window:
            past_trials, past_best = history[-1 - self.window]
            if trials > past_trials:
                backward = (past_best - best) / (trials - past_trials)
        forward = best / max(trials, 1)  # optimistic: the next trials could gain as much as the average
        if peer_throughput and task.flops > 0:
            # A similar task runs faster per FLOP: this one could too, to within beta.
            forward = max(forward, best - self.beta * task.flops / peer_throughput)
        return task.weight * (self.alpha * backward + (1 - self.alpha) * forward)


class TaskScheduler(Protocol):
    def pick(self, tasks: Sequence[TaskProgress]) -> int | None:
        """The index of the task that gets the next batch; None when every task is done."""
        ...


#: The task schedulers ``tune(task_scheduler=NAME)`` makes, by name.
SCHEDULERS: dict[str, type[TaskScheduler]] = {"gradient": Gradient, "round-robin": RoundRobin}


def make_scheduler(name: str) -> TaskScheduler:
    cls = SCHEDULERS.get(name)
    if cls is None:
        raise ValueError(f"unknown task scheduler {name!r}; use 'gradient' or 'round-robin'")
    return cls()
