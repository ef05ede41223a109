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

Waiting has other causes than other processes: two threads of the kernel placed on one CPU
for a moment, a sleeping thread woken on an idle virtual CPU. So a batch's timings count as
disturbed only when other processes really used the CPU while they were taken:
``SystemCpu.foreign_cores`` over the batch's runs (``/proc/stat`` less this process tree's own
time) of at least ``FOREIGN_CORES``; otherwise their ``load`` and ``stall`` are reported as 0.

The runner also watches each timed sample on its own (``SampleWatch``, ``undisturbed``: the
threads the sample kept runnable, not a worker's idle helpers): on a machine where another job holds a core, a kernel shorter than the
scheduler's time slice still runs many samples with every thread on a CPU of its own (beside a
spinning process, a 0.15 ms kernel timed 0.15 ms in most samples and 2-8 ms in the others). Those samples are quiet timings, and a candidate
with enough of them is reported quiet (``load`` and ``stall`` 0) from them alone; only a kernel
no sample of which escaped the other job is reported busy.

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

__all__ = [
    "BUSY_LOAD",
    "FOREIGN_CORES",
    "SampleWatch",
    "SystemCpu",
    "ThreadWaits",
    "is_busy",
    "quiet_estimate",
    "undisturbed",
]

#: Cores of run-queue waiting per second of timing from which a timing counts as busy. A quiet
#: machine shows a few thousandths (the kernel's own work, timer interrupts).
BUSY_LOAD = 0.05
#: Cores' worth of CPU other processes must use during a batch's runs for its waits to count.
FOREIGN_CORES = 0.05

#: A timed sample whose threads each waited at most this long for a CPU, or at most this share of
#: the sample, counts as undisturbed (``undisturbed``): on a quiet VM the longest wait in a
#: 0.15 ms sample was 17 us, in a 14 ms one 0.76 ms; beside a spinning process the disturbed
#: samples waited 4 ms and more (its time slice).
NEGLIGIBLE_WAIT = 5e-5
NEGLIGIBLE_SHARE = 0.06

_TASKS = "/proc/self/task"


def _waits() -> dict[str, tuple[int, int]] | None:
    """Per thread of this process, by thread id: nanoseconds it has waited for a CPU, and how
    often it was preempted (involuntary context switches)."""
    found: dict[str, tuple[int, int]] = {}
    for thread, _ran, waited in _thread_times():
        try:
            with open(f"{_TASKS}/{thread}/status") as handle:
                preempted = next(
                    int(line.split()[1]) for line in handle if line.startswith("nonvoluntary_ctxt_switches")
                )
        except (OSError, IndexError, ValueError, StopIteration):
            continue  # a thread that ended meanwhile
        found[thread] = (waited, preempted)
    return found or None


def _thread_times() -> list[tuple[str, int, int]]:
    """Per thread of this process: nanoseconds it has run and waited for a CPU (``schedstat``
    alone: cheap enough to read around every timed sample; ``_waits`` adds preemptions)."""
    found: list[tuple[str, int, int]] = []
    try:
        threads = os.listdir(_TASKS)
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"{_TASKS}/{thread}/schedstat") as handle:
                fields = handle.read().split()
            found.append((thread, int(fields[0]), int(fields[1])))
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return found


@dataclass
class SampleWatch:
    """The run and wait times of this process's threads since ``start``: which threads ran a
    timed call, and how long the most-delayed of them waited for a CPU."""

    before: dict[str, tuple[int, int]]
    began: float

    @staticmethod
    def start() -> SampleWatch:
        return SampleWatch({thread: (ran, waited) for thread, ran, waited in _thread_times()}, time.perf_counter())

    def _deltas(self) -> list[tuple[str, int, int]]:
        deltas = []
        for thread, ran, waited in _thread_times():
            ran_before, waited_before = self.before.get(thread, (0, 0))
            deltas.append((thread, ran - ran_before, waited - waited_before))
        return deltas

    def runnable_threads(self, share: float = 0.5) -> set[str]:
        """The threads that ran or waited to run for at least ``share`` of the window: the ones
        a kernel call kept busy (the caller and its thread pool), not a worker's idle helpers
        (a dask worker's event loop wakes now and then and may wait for a CPU the kernel holds)."""
        window = max(time.perf_counter() - self.began, 1e-9) * 1e9
        return {thread for thread, ran, waited in self._deltas() if ran + waited >= share * window}

    def longest_wait(self, threads: set[str] | None = None) -> float:
        """Seconds the most-delayed of ``threads`` (default: every thread) waited for a CPU."""
        waits = [waited for thread, _ran, waited in self._deltas() if threads is None or thread in threads]
        return max(waits, default=0) / 1e9


def undisturbed(seconds: float, longest_wait: float) -> bool:
    """Whether a timed sample of ``seconds`` whose most-delayed thread waited ``longest_wait``
    for a CPU ran as on a quiet machine: waits of a few tens of microseconds (the kernel's own
    work, a virtual CPU waking) happen there too."""
    return longest_wait <= max(NEGLIGIBLE_WAIT, NEGLIGIBLE_SHARE * seconds)


@dataclass
class ThreadWaits:
    """The run-queue waits of this process's threads since ``start``."""

    before: dict[str, tuple[int, int]]
    began: float

    @staticmethod
    def start() -> ThreadWaits | None:
        before = _waits()
        return None if before is None else ThreadWaits(before, time.perf_counter())

    def stop(self, disturbed: bool = False) -> tuple[float, float]:
        """(load, stall) over the window since ``start`` (see the module docstring); both 0
        when no thread was preempted: waiting that no other task caused (a sleeping thread
        woken on an idle virtual CPU can wait a millisecond for the hypervisor) is the
        machine's, a quiet one's too -- unless the caller knows the window was ``disturbed``
        (no sample in it ran undisturbed): a thread woken while another process holds its CPU
        waits without being preempted."""
        wall = max(time.perf_counter() - self.began, 1e-9)
        after = _waits() or {}
        # A thread started inside the window (a thread pool's first parallel region) counts
        # from zero.
        waited, preempted = [], 0
        for thread, (nanoseconds, switches) in after.items():
            start_ns, start_switches = self.before.get(thread, (0, 0))
            waited.append(max(0, nanoseconds - start_ns) / 1e9)
            preempted += max(0, switches - start_switches)
        if not preempted and not disturbed:
            return 0.0, 0.0
        load = sum(waited) / wall
        stall = min(1.0, max(waited, default=0.0) / wall)
        return round(load, 4), round(stall, 4)


@dataclass(frozen=True)
class SystemCpu:
    """CPU time used on this process's CPUs by everyone, and by this process and its
    descendants (the measuring workers), from ``/proc/stat`` and ``/proc/*/stat`` (clock ticks:
    coarse, so meant for windows of a second or more, such as a batch's runs)."""

    wall: float
    busy_ticks: int
    own_ticks: int

    @staticmethod
    def snapshot() -> SystemCpu | None:
        try:
            cpus = {f"cpu{n}" for n in os.sched_getaffinity(0)}
            busy = 0
            with open("/proc/stat") as handle:
                for line in handle:
                    fields = line.split()
                    if fields and fields[0] in cpus:
                        # user nice system idle iowait irq softirq steal
                        busy += sum(int(fields[k]) for k in (1, 2, 3, 6, 7, 8))
            return SystemCpu(time.perf_counter(), busy, _tree_ticks(os.getpid()))
        except (OSError, ValueError, AttributeError, IndexError):
            return None

    def foreign_cores(self, later: SystemCpu) -> float:
        """Cores' worth of CPU that other processes used between the two snapshots."""
        wall = max(later.wall - self.wall, 1e-9)
        foreign = (later.busy_ticks - self.busy_ticks) - (later.own_ticks - self.own_ticks)
        return max(0.0, foreign / _TICKS_PER_SECOND / wall)


_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree_ticks(root: int) -> int:
    """utime + stime of ``root`` and every descendant, in clock ticks."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = int(fields[11]) + int(fields[12])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def is_busy(load: float | None) -> bool:
    """Whether a timing with this ``load`` was disturbed by other processes (unknown: no)."""
    return load is not None and load >= BUSY_LOAD


def quiet_estimate(seconds: float, stall: float | None) -> float:
    """What a timing would have been without the waiting of its slowest thread."""
    return seconds * (1.0 - min(stall or 0.0, 0.9))
