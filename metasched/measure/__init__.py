"""Measurement: build and time candidates in worker processes, so no candidate can hurt the tuner.

    measurer = Measurer("llvm", num_threads=2)
    results = measurer.measure([MeasureInput(func, "llvm", reference=unscheduled)])
    results[0].seconds          # median run time, or None with .error_kind / .error_msg
    measurer.close()

Workers are fresh processes (libgomp does not survive ``fork``) that import the compiler once
and are reused across batches. A batch is built first, on every worker at once (builds are
single-threaded), then run one candidate at a time, so a timing never shares the machine with
a build or another run. Every failure is a result: a build error ("build"), an exception while
running ("run"), a worker killed by a signal, a segfault say ("crash"; the worker is replaced),
a build or run past ``timeout`` seconds ("timeout"; the worker is killed and replaced), outputs
that differ from the unscheduled program's ("wrong"). Modules a dying worker had built are
rebuilt on a fresh one.

``executor=`` takes any ``concurrent.futures.Executor`` (a dask client's, for one): each batch is
then one task, ``measure_batch(jobs, ...)``, which runs the same isolated pool where the executor
runs it, so a crashing candidate still cannot take the executor's worker down.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from metasched.measure.worker import Job
from tir.ir import PrimFunc

__all__ = ["MeasureInput", "MeasureResult", "Measurer", "measure_batch"]


@dataclass(frozen=True)
class MeasureInput:
    func: PrimFunc
    target: str
    reference: PrimFunc | None = None


@dataclass(frozen=True)
class MeasureResult:
    seconds: float | None
    error_kind: str | None = None
    error_msg: str = ""
    build_seconds: float = 0.0


class _Worker:
    """One worker process and the connection to it.

    The worker is a fresh interpreter (``python -c``) talking over a socket pair, not a
    ``multiprocessing`` child: a spawned child re-runs the parent's ``__main__`` module, which
    would re-run a user's script that calls ``metasched.tune`` at its top level, and a forked
    one inherits libgomp's threads, which do not survive ``fork``.
    """

    def __init__(self) -> None:
        parent, child = socket.socketpair()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", f"from metasched.measure.worker import serve_fd; serve_fd({child.fileno()})"],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        finally:
            child.close()
        self.connection = Connection(parent.detach())
        self.built: set[int] = set()

    def call(self, message: tuple[Any, ...], timeout: float) -> dict[str, Any]:
        """Send and wait; a dead worker or a timeout is reported as a result."""
        try:
            self.connection.send(message)
            if not self.connection.poll(timeout):
                self.kill()
                return {"error_kind": "timeout", "error_msg": f"no answer within {timeout:.1f} s"}
            return self.connection.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            try:
                code = self.process.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
            signal = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            self.kill()
            return {"error_kind": "crash", "error_msg": f"the measuring process died ({signal})"}

    @property
    def alive(self) -> bool:
        return self.process.poll() is None and not self.connection.closed

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
            pass
        if not self.connection.closed:
            self.connection.close()


class _Pool:
    """Workers that build in parallel and run one at a time (see the module docstring)."""

    def __init__(self, workers: int, timeout: float, build_timeout: float) -> None:
        self.size = max(1, workers)
        self.timeout = timeout
        self.build_timeout = build_timeout
        self.workers: list[_Worker] = []

    def _worker(self, index: int) -> _Worker:
        while len(self.workers) <= index:
            self.workers.append(_Worker())
        if not self.workers[index].alive:
            self.workers[index] = _Worker()
        return self.workers[index]

    def measure(self, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(jobs)
        pending = list(range(len(jobs)))
        # Runs are sequential: the best time so far, this batch included, lets a far slower
        # candidate be timed once (see worker.run_job).
        best = min((job.best for job in jobs if job.best is not None), default=None)
        for _attempt in range(2):  # a second attempt for modules lost with a crashed worker
            built = self._build(jobs, pending, results)
            lost: list[int] = []
            for index, worker_index in built:
                worker = self._worker(worker_index) if self.workers[worker_index].alive else None
                if worker is None or index not in worker.built:
                    lost.append(index)
                    continue
                worker.built.discard(index)
                job = jobs[index] if best is None else replace(jobs[index], best=best)
                reply = worker.call(("run", index, job), self.timeout)
                if reply.get("seconds") is not None and reply.get("error_kind") is None:
                    best = reply["seconds"] if best is None else min(best, reply["seconds"])
                results[index] = {**results[index], **reply}  # type: ignore[dict-item]
                if not worker.alive:
                    worker.built.clear()
            pending = lost
            if not pending:
                break
        for index in pending:
            results[index] = {"error_kind": "crash", "error_msg": "built twice, lost with a crashed worker each time"}
        return [r if r is not None else {"error_kind": "crash", "error_msg": "not measured"} for r in results]

    def _build(
        self, jobs: Sequence[Job], pending: list[int], results: list[dict[str, Any] | None]
    ) -> list[tuple[int, int]]:
        """Build ``pending`` jobs over the workers at once; returns (job, worker) of the built."""
        queues = [pending[w :: self.size] for w in range(self.size)]
        cursors = [0] * self.size
        waiting: dict[int, tuple[int, float]] = {}  # worker -> (job, start)
        built: list[tuple[int, int]] = []
        while True:
            for w in range(self.size):
                if w not in waiting and cursors[w] < len(queues[w]):
                    job_index = queues[w][cursors[w]]
                    cursors[w] += 1
                    worker = self._worker(w)
                    try:
                        worker.connection.send(("build", job_index, jobs[job_index]))
                    except OSError:
                        worker.kill()
                        results[job_index] = {"error_kind": "crash", "error_msg": "the measuring process died"}
                        continue
                    waiting[w] = (job_index, time.monotonic())
            if not waiting:
                return built
            for w, (job_index, start) in list(waiting.items()):
                worker = self.workers[w]
                remaining = self.build_timeout - (time.monotonic() - start)
                try:
                    ready = worker.connection.poll(min(0.005, max(remaining, 0)))
                except (EOFError, OSError):
                    ready = True
                if ready:
                    try:
                        reply = worker.connection.recv()
                    except (EOFError, OSError):
                        worker.kill()
                        reply = {"error_kind": "crash", "error_msg": "the measuring process died while building"}
                    del waiting[w]
                    results[job_index] = reply
                    if "error_kind" not in reply:
                        worker.built.add(job_index)
                        built.append((job_index, w))
                elif remaining <= 0:
                    worker.kill()
                    del waiting[w]
                    results[job_index] = {
                        "error_kind": "timeout",
                        "error_msg": f"the build took more than {self.build_timeout:.0f} s",
                    }
                    # Modules this worker held are gone with it: they will be rebuilt.
                    worker.built.clear()

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()
        self.workers.clear()


_local_pools: dict[tuple[int, float, float], _Pool] = {}


def measure_batch(
    jobs: Sequence[Job], workers: int = 2, timeout: float = 10.0, build_timeout: float = 120.0
) -> list[dict[str, Any]]:
    """Measure ``jobs`` with an isolated pool in this process (an executor's unit of work). The
    pool is kept for the next batch sent to the same process."""
    key = (workers, timeout, build_timeout)
    pool = _local_pools.get(key)
    if pool is None:
        pool = _local_pools[key] = _Pool(workers, timeout, build_timeout)
    return pool.measure(jobs)


class Measurer:
    """Builds and times candidates in spawned workers (see the module docstring).

    ``num_threads``: threads each candidate runs with (default: the module's default);
    ``timeout``: seconds for one candidate's checked run and timing; ``repeat``: timed runs
    (the median is reported); ``workers``: processes building at once.
    """

    def __init__(
        self,
        target: str,
        executor: Executor | None = None,
        num_threads: int | None = None,
        timeout: float = 10.0,
        repeat: int = 5,
        workers: int = 2,
        build_timeout: float = 120.0,
    ) -> None:
        self.target = target
        self.executor = executor
        self.num_threads = num_threads
        self.timeout = timeout
        self.repeat = repeat
        self.workers = workers
        self.build_timeout = build_timeout
        self._pool: _Pool | None = None

    def measure(self, inputs: Sequence[MeasureInput], best_seconds: float | None = None) -> list[MeasureResult]:
        """Results in the order of ``inputs``. ``best_seconds`` (the best so far) lets a
        candidate several times slower be reported after one run instead of ``repeat``."""
        if not inputs:
            return []
        jobs = [
            Job(
                item.func.script(),
                item.target,
                item.reference.script() if item.reference is not None else None,
                self.num_threads,
                self.repeat,
                best_seconds,
            )
            for item in inputs
        ]
        if self.executor is not None:
            replies = self.executor.submit(measure_batch, jobs, self.workers, self.timeout, self.build_timeout).result()
        else:
            if self._pool is None:
                self._pool = _Pool(self.workers, self.timeout, self.build_timeout)
            replies = self._pool.measure(jobs)
        return [
            MeasureResult(
                seconds=reply.get("seconds") if reply.get("error_kind") is None else None,
                error_kind=reply.get("error_kind"),
                error_msg=reply.get("error_msg", ""),
                build_seconds=reply.get("build_seconds", 0.0),
            )
            for reply in replies
        ]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
