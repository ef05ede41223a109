"""Task schedulers: which task gets the next batch of trials.

- ``RoundRobin``: tasks in turn.
- ``Gradient`` (Ansor, section 6): after every task has had a first batch, the task whose next
  trials are expected to cut the weighted total latency the most: a mix of its recent
  improvement per trial (the backward gradient) and its optimistic remaining gain (best latency
  over trials so far), weighted by the task's occurrences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Gradient", "RoundRobin", "TaskProgress", "make_scheduler"]


@dataclass
class TaskProgress:
    """What a scheduler knows of one task: its weight and best latency after each batch."""

    weight: float
    trials: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)  # (trials so far, best seconds)
    done: bool = False  # the design space is exhausted

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
    def __init__(self, backward_window: int = 3, alpha: float = 0.2) -> None:
        self.window = backward_window
        self.alpha = alpha
        self._warmup = RoundRobin()

    def pick(self, tasks: Sequence[TaskProgress]) -> int | None:
        live = [i for i, t in enumerate(tasks) if not t.done]
        if not live:
            return None
        untouched = [i for i in live if not tasks[i].history or not math.isfinite(tasks[i].best)]
        if untouched:  # coverage first: every task gets a measured candidate before any exploits
            return untouched[0]
        return max(live, key=lambda i: self._gain(tasks[i]))

    def _gain(self, task: TaskProgress) -> float:
        history = task.history
        trials, best = history[-1]
        backward = 0.0
        if len(history) > self.window:
            past_trials, past_best = history[-1 - self.window]
            if trials > past_trials:
                backward = (past_best - best) / (trials - past_trials)
        forward = best / max(trials, 1)  # optimistic: the next trials could gain as much as the average
        return task.weight * ((1 - self.alpha) * backward + self.alpha * forward)


def make_scheduler(name: str) -> RoundRobin | Gradient:
    if name == "round-robin":
        return RoundRobin()
    if name == "gradient":
        return Gradient()
    raise ValueError(f"unknown task scheduler {name!r}; use 'gradient' or 'round-robin'")
