"""How much other processes disturbed a timing: the run-queue wait of this process's threads.

A timing taken while another job uses the CPU is not a property of the program alone, and not
evenly so: a parallel kernel whose threads share a core with someone else's job waits for its
slowest thread (twice as slow on two cores with one taken), while a one-thread kernel finds the
free core and keeps its speed. A tune on a busy machine therefore ranks programs wrongly, and
keeps the ones that only looked fast.

Linux counts, per thread, the time it was ready to run but waited for a CPU
(``/proc/self/task/*/schedstat``, second field, nanoseconds). Over a timing window of ``wall``
seconds:

- ``load``: the waiting of all threads, in cores (sum of waits / wall): 0 on a quiet machine;
  0.5 when a two-thread kernel's threads waited half a core's worth in all;
- ``stall``: the largest one thread's share of the window spent waiting (0 to 1): what the
  critical path lost. ``seconds * (1 - stall)`` estimates the quiet time of a kernel whose
  threads run in lockstep.

A window whose ``load`` is at least ``BUSY_LOAD`` is busy: its timing counts only for a program
with no quiet timing, and then at its quiet estimate (``metasched.database``); the tuner re-times
its leaders until their timings are quiet or its patience ends, and says whether the best rests
on quiet timings (``metasched.tune``). Where the counters
do not exist (another OS, a kernel without schedstats), ``ThreadWaits.start`` gives None and
nothing is judged.

    watch = ThreadWaits.start()
    ...                                    # the timed runs
    load, stall = watch.stop() if watch else (None, None)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["BUSY_LOAD", "ThreadWaits", "is_busy", "quiet_estimate"]

#: Cores of run-queue waiting per second of timing from which a timing counts as busy. A quiet
#: machine shows a few thousandths (the kernel's own work, timer interrupts).
BUSY_LOAD = 0.05

_TASKS = "/proc/self/task"


def _waits() -> dict[str, int] | None:
    """Nanoseconds each thread of this process has waited for a CPU, by thread id."""
    found: dict[str, int] = {}
    try:
        threads = os.listdir(_TASKS)
    except OSError:
        return None
    for thread in threads:
        try:
            with open(f"{_TASKS}/{thread}/schedstat") as handle:
                found[thread] = int(handle.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return found or None


@dataclass
class ThreadWaits:
    """The run-queue waits of this process's threads since ``start``."""

    before: dict[str, int]
    began: float

    @staticmethod
    def start() -> ThreadWaits | None:
        before = _waits()
        return None if before is None else ThreadWaits(before, time.perf_counter())

    def stop(self) -> tuple[float, float]:
        """(load, stall) over the window since ``start`` (see the module docstring)."""
        wall = max(time.perf_counter() - self.began, 1e-9)
        after = _waits() or {}
        # A thread started inside the window (a thread pool's first parallel region) counts
        # from zero.
        waited = [max(0, nanoseconds - self.before.get(thread, 0)) / 1e9 for thread, nanoseconds in after.items()]
        load = sum(waited) / wall
        stall = min(1.0, max(waited, default=0.0) / wall)
        return round(load, 4), round(stall, 4)


def is_busy(load: float | None) -> bool:
    """Whether a timing with this ``load`` was disturbed by other processes (unknown: no)."""
    return load is not None and load >= BUSY_LOAD


def quiet_estimate(seconds: float, stall: float | None) -> float:
    """What a timing would have been without the waiting of its slowest thread."""
    return seconds * (1.0 - min(stall or 0.0, 0.9))
