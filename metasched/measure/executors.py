"""Where candidates are measured: a local pool of worker processes, and the unit of work that
any ``concurrent.futures.Executor`` can run.

Workers are fresh interpreters (``sys.executable -c ...``, a spawn: libgomp does not survive
``fork``) that import the compiler once and are reused across batches. They are started with
``subprocess`` rather than ``multiprocessing``'s spawn context, which would re-import the
caller's main module in every worker: slower, and a script without an ``if __name__ ==
"__main__"`` guard would recurse. A worker dies with its parent (``PR_SET_PDEATHSIG`` on Linux),
so a hanging candidate cannot outlive a killed tuner.

A batch goes in two phases:

1. prepare, on every worker at once (building is single-threaded): the reference outputs of
   each unscheduled program not seen before (once per pool, cached by structural hash), then
   every candidate's build, each worker taking the next task when it is free;
2. run, one candidate at a time, so a timing never shares the machine with a build or another
   run. A worker receives the reference outputs the first time it runs a candidate of them.

Every failure is a result: a worker that dies (a segfault, say) is reported as "crash" with its
signal, a build or run past its time limit as "timeout"; the worker is killed, and replaced when
next needed (not at once: its start-up would disturb the timings in flight). Modules a dying
worker had built are rebuilt on a fresh one.

    pool = LocalPool(workers=2, timeout=10.0)
    replies = pool.measure(jobs)          # one dict per Job: seconds / error_kind, error_msg, build_seconds
    measure_batch(jobs, workers=2)        # the same with a pool kept per process: an executor's unit of work
"""

from __future__ import annotations

import atexit
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from typing import Any

from metasched.measure.builder import Job, build_job, built_modules, first_line
from metasched.measure.noise import FOREIGN_CORES, SystemCpu
from tir.registrations import RegistrationError, install

__all__ = ["LocalPool", "close_local_pools", "measure_batch", "serve", "start_worker_process"]

# What a worker runs: die with the parent, take the parent's import path, serve.
_BOOTSTRAP = """
import signal, sys
if {ignore_sigint}:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
from multiprocessing.connection import Connection
connection = Connection(int(sys.argv[1]))
sys.path[:] = connection.recv()
from {module} import serve
serve(connection)
"""


def start_worker_process(
    module: str, ignore_sigint: bool = False, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Connection]:
    """A fresh interpreter running ``module.serve(connection)`` (see the module docstring: a
    spawn without re-importing the caller's script, dying with this process), and the
    connection to it. ``ignore_sigint``: the worker ignores a terminal's Ctrl-C."""
    parent_end, child_end = socket.socketpair()
    process = subprocess.Popen(
        [sys.executable, "-c", _BOOTSTRAP.format(module=module, ignore_sigint=ignore_sigint), str(child_end.fileno())],
        pass_fds=(child_end.fileno(),),
        stdin=subprocess.DEVNULL,
        env=env,
    )
    child_end.close()
    connection = Connection(parent_end.detach())
    connection.send(list(sys.path))
    return process, connection


#: Seconds a worker may take to start (import the compiler, warm up).
_START_TIMEOUT = 120.0
_DOING = {
    "start": "while starting",
    "reference": "while computing the reference outputs",
    "build": "while building",
}

#: Times a batch's lost modules are rebuilt at most.
_ATTEMPTS = 6

#: Once a best time is known, a run may take this many times it (but at least
#: ``_RELATIVE_FLOOR`` seconds, and never more than the pool's timeout) on top of the run's fixed
#: costs before it is stopped: a random sample can take seconds where the best takes
#: milliseconds, and its exact time teaches the search nothing that "far slower" does not. The
#: fixed costs (making and copying the inputs, checking the outputs, the timing budget a
#: candidate near the best spends) are learned per workload: ``_FIXED_MARGIN`` times the
#: shortest run of that workload that succeeded. Until one has, a run may take the whole
#: timeout: on a GPU, a 4096^3 GEMM's run costs over a second whatever its kernel's speed (160 MB
#: copied and 16M outputs checked), and a fixed 1 s limit stopped 47 of 64 candidates, the best
#: ones among them.
_RELATIVE_TIMEOUT = 20.0
_RELATIVE_FLOOR = 1.0
_FIXED_MARGIN = 2.0

#: Seconds an idle libgomp thread spins before it sleeps, and some (7.7 ms measured on a 2-core
#: Zen 4 with libgomp's default GOMP_SPINCOUNT): a run on another worker waits that long after
#: the last one. A lower GOMP_SPINCOUNT would not do: the threads would then sleep during each
#: cache flush between timed calls, and waking them costs 15-20 us per call.
_SPIN_SETTLE = 0.015

#: Reference outputs a worker keeps (each as large as the program's outputs).
_WORKER_REFERENCES = 4
#: Reference outputs (or their failures) a pool keeps between batches.
_POOL_REFERENCES = 16
#: Programs whose builder the pool remembers (a worker's build cache holds 32 modules).
_REMEMBERED_BUILDERS = 256


def _program_key(job: Job) -> int:
    return hash((job.program, job.target))


def serve(connection: Connection) -> None:
    """A worker's loop, until its connection closes. Messages: ("build", key, job),
    ("run", key, job), ("reference", ref_key, program, target), ("register", registrations),
    ("set_reference", ref_key, reference), ("drop", key). Every message but the last two gets
    one reply."""
    from metasched.measure.runner import compute_reference, run_job

    _warm_up()
    connection.send({"ready": True})  # time limits start now, not during the start-up

    references: OrderedDict[str, Any] = OrderedDict()

    def keep(key: str, reference: Any) -> None:
        references[key] = reference
        while len(references) > _WORKER_REFERENCES:
            references.popitem(last=False)

    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        try:
            if kind == "build":
                reply = build_job(message[1], message[2])
            elif kind == "run":
                job: Job = message[2]
                reference = None
                if job.reference_key is not None:
                    reference = references.get(job.reference_key)
                    if reference is None:
                        connection.send({"need_reference": True})
                        continue
                    references.move_to_end(job.reference_key)
                reply = run_job(message[1], job, reference)
            elif kind == "reference":
                start = time.perf_counter()
                try:
                    reference = compute_reference(message[2], message[3])
                except Exception as error:  # noqa: BLE001 - recorded, never fatal
                    reply = {"error_kind": "run", "error_msg": first_line(error)}
                else:
                    keep(message[1], reference)
                    reply = {"reference": reference, "seconds": time.perf_counter() - start}
            elif kind == "register":
                try:
                    install(message[1])
                    reply = {"registered": True}
                except RegistrationError as error:
                    reply = {"error_kind": "registration", "error_msg": str(error)}
            elif kind == "set_reference":
                keep(message[1], message[2])
                continue
            elif kind == "drop":
                built_modules.pop(message[1], None)
                continue
            else:
                return
        except Exception as error:  # noqa: BLE001 - a bug here must not hang the parent
            reply = {"error_kind": "run", "error_msg": f"in the measuring worker: {first_line(error)}"}
        connection.send(reply)


_TINY = """
import tir.script as T
@T.script
def warm_up(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("A"):
            vi = T.spatial_axis(4, i)
            A[vi] = A[vi] + 1.0
"""


def _warm_up() -> None:
    """Import the compiler and build a tiny program once, so that neither the imports nor
    LLVM's one-time set-up (about 0.25 s) are charged to the first candidate's build."""
    import tir

    try:
        tir.build(tir.parse(_TINY), "llvm")
    except Exception:  # noqa: BLE001 - only a warm-up: the first real build reports any problem
        pass


class _Worker:
    """One worker process and the connection to it."""

    def __init__(self) -> None:
        self.process, self.connection = start_worker_process("metasched.measure.executors")
        self.built: set[int] = set()  # keys of modules built here and not yet run
        self.ready = False  # started up (imports and warm-up done)
        self.registered: str | None = None  # digest of the run-time registrations installed here

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: tuple[Any, ...]) -> bool:
        try:
            self.connection.send(message)
            return True
        except OSError:
            return False

    def request(self, message: tuple[Any, ...], timeout: float, doing: str) -> dict[str, Any]:
        """Send and wait for the reply; death and timeout come back as results."""
        if not self.send(message):
            return self.died(doing)
        try:
            ready = self.connection.poll(timeout)
        except (EOFError, OSError):
            return self.died(doing)
        if not ready:
            self.kill()
            return {"error_kind": "timeout", "error_msg": f"{doing} took more than {timeout:g} s"}
        return self.receive(doing)

    def receive(self, doing: str) -> dict[str, Any]:
        try:
            return self.connection.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            return self.died(doing)

    def died(self, doing: str) -> dict[str, Any]:
        try:
            code = self.process.wait(2.0)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is not None and code < 0:
            try:
                how = f"signal {-code}, {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        else:
            how = f"exit code {code}"
        return {"error_kind": "crash", "error_msg": f"the measuring process died {doing} ({how})"}

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
        self.connection.close()
        self.built.clear()


class LocalPool:
    """Worker processes on this machine: build in parallel, run one at a time (module docstring).

    ``timeout``: seconds for one candidate's run (the checked run and the timing);
    ``build_timeout``: seconds for one build; ``reference_timeout``: seconds to build and run an
    unscheduled program once (it may be far slower than any candidate).
    """

    def __init__(
        self, workers: int = 2, timeout: float = 10.0, build_timeout: float = 30.0, reference_timeout: float = 300.0
    ) -> None:
        self.size = max(1, workers)
        self.timeout = timeout
        self.build_timeout = build_timeout
        self.reference_timeout = reference_timeout
        self.workers: list[_Worker] = []
        self.references: OrderedDict[str, Any] = OrderedDict()  # key -> Reference, or an error reply
        self.start_failures = 0  # in a row: a worker that cannot start is the environment's fault
        self.lock = threading.Lock()  # one batch at a time, whatever the threads
        # Which worker built a program last (by its encoded bytes and target): a program measured
        # again (the best re-timed at the end) goes back there, to its build cache.
        self.builders: OrderedDict[int, int] = OrderedDict()
        # The shortest successful run request per workload (its reference key), in seconds.
        self.shortest_runs: OrderedDict[str, float] = OrderedDict()
        self.registrations: Any = None  # of the batch being measured (``tir.registrations``)

    def _worker(self, index: int) -> _Worker:
        while len(self.workers) <= index:
            self.workers.append(_Worker())
        if not self.workers[index].alive:
            self.workers[index].kill()
            self.workers[index] = _Worker()
        return self.workers[index]

    def measure(self, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        """One reply per job, in order: ``seconds`` or ``error_kind``/``error_msg``, and ``build_seconds``."""
        with self.lock:
            try:
                return self._measure(jobs)
            except BaseException:
                # Interrupted (Ctrl-C, say) with replies unread: stale replies must not answer
                # the next batch's requests, so its workers start afresh.
                self.close()
                raise

    def _measure(self, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        # The registrations go to each worker once (``_register``), not with every message.
        self.registrations = next((job.registrations for job in jobs if job.registrations is not None), None)
        jobs = [job if job.registrations is None else replace(job, registrations=None) for job in jobs]
        while len(self.references) > _POOL_REFERENCES:
            self.references.popitem(last=False)
        results: list[dict[str, Any]] = [{} for _ in jobs]
        missing: dict[str, Job] = {}
        for job in jobs:
            if job.reference_key is not None and job.reference_key not in self.references:
                missing.setdefault(job.reference_key, job)
        # Runs are sequential: the best time so far of the same workload, this batch included,
        # lets a far slower candidate be timed once (see runner.run_job). Per workload: the
        # tuner's first batch holds every task's default schedule, and a 10 us pooling kernel's
        # time made a 0.2 ms convolution "far slower", timed once, cold.
        # A job without a key (no reference to check it against) is taken for the batch's one
        # workload: the best of all (None's entry) limits it.
        best_of: dict[str | None, float] = {}

        def improve(key: str | None, seconds: float) -> None:
            for name in {key, None}:
                best_of[name] = min(best_of.get(name, math.inf), seconds)

        for job in jobs:
            if job.best is not None:
                improve(job.reference_key, job.best)
        pending = list(range(len(jobs)))
        # Modules lost with a worker that another candidate killed (crash, timeout) are rebuilt
        # and run in a further attempt; each attempt settles at least the killers.
        for _attempt in range(_ATTEMPTS):
            built = self._prepare(jobs, pending, missing, results)
            missing = {}
            lost: list[int] = []
            # In the batch's order (the search puts its likeliest best first, its exploration
            # last), not the builds' finishing order: an early best stops far slower runs sooner,
            # and a run stopped late in the batch takes fewer built modules with its worker.
            system = SystemCpu.snapshot()
            ran: list[int] = []
            last_worker, last_end = None, 0.0
            batch_shortest: float | None = None  # for jobs without a reference key (one workload a batch)
            for index, worker_index in sorted(built):
                worker = self.workers[worker_index]
                if not worker.alive or index not in worker.built:
                    lost.append(index)
                    continue
                worker.built.discard(index)
                key = jobs[index].reference_key
                best = best_of.get(key)
                limit = self._run_limit(key, best, batch_shortest)
                if last_worker is not None and worker_index != last_worker:
                    # The last worker's libgomp threads spin for some milliseconds after its
                    # run (GOMP_SPINCOUNT): this one's timing would share the cores with them.
                    time.sleep(max(0.0, _SPIN_SETTLE - (time.monotonic() - last_end)))
                started = time.monotonic()
                reply = self._run(
                    worker, index, jobs[index] if best is None else replace(jobs[index], best=best), limit
                )
                last_worker, last_end = worker_index, time.monotonic()
                if reply.get("error_kind") is None:
                    self._note_run(jobs[index].reference_key, last_end - started)
                    batch_shortest = min(batch_shortest or math.inf, last_end - started)
                if reply.get("error_kind") == "timeout" and limit < self.timeout:
                    reply["error_msg"] += (
                        f" (twice this workload's shortest run and {_RELATIVE_TIMEOUT:g}x the best so far, {best:.3g} s)"
                    )
                if reply.get("error_kind") is None and reply.get("seconds") is not None:
                    improve(key, reply["seconds"])
                results[index].update(reply)
                ran.append(index)
            _discount_own_waits(results, ran, system)
            pending = lost
            if not pending:
                break
        for index in pending:
            results[index] = {
                "error_kind": "crash",
                "error_msg": f"not measured: built {_ATTEMPTS} times, lost each time with a worker another candidate killed",
            }
        return results

    def _run_limit(self, key: str | None, best: float | None, batch_shortest: float | None = None) -> float:
        """Seconds one run of the workload ``key`` may take, given the best time so far."""
        shortest = self.shortest_runs.get(key) if key is not None else batch_shortest
        if best is None or shortest is None:
            return self.timeout
        return min(self.timeout, _FIXED_MARGIN * shortest + max(_RELATIVE_FLOOR, _RELATIVE_TIMEOUT * best))

    def _note_run(self, key: str | None, seconds: float) -> None:
        if key is None:
            return
        self.shortest_runs[key] = min(seconds, self.shortest_runs.get(key, seconds))
        self.shortest_runs.move_to_end(key)
        while len(self.shortest_runs) > _POOL_REFERENCES:
            self.shortest_runs.popitem(last=False)

    def _run(self, worker: _Worker, index: int, job: Job, limit: float) -> dict[str, Any]:
        reference = None
        if job.reference_key is not None:
            reference = self.references.get(job.reference_key)
            if isinstance(reference, dict):  # the unscheduled program failed
                worker.send(("drop", index))
                return {
                    "error_kind": "run",
                    "error_msg": "the output cannot be checked: the unscheduled program failed "
                    f"({reference['error_kind']}: {reference['error_msg']})",
                }
        reply = worker.request(("run", index, job), limit, "while running")
        if reply.get("need_reference"):
            worker.send(("set_reference", job.reference_key, reference))
            reply = worker.request(("run", index, job), limit, "while running")
        return reply

    def _prepare(
        self, jobs: Sequence[Job], pending: list[int], missing: dict[str, Job], results: list[dict[str, Any]]
    ) -> list[tuple[int, int]]:
        """Compute the ``missing`` references and build the ``pending`` jobs over all workers;
        returns (job, worker) of the modules built."""
        tasks: deque[tuple[str, Any]] = deque([("reference", key) for key in missing])
        tasks.extend(("build", index) for index in pending)
        waiting: dict[int, tuple[tuple[str, Any], float, float]] = {}  # worker -> (task, start, limit)
        built: list[tuple[int, int]] = []
        while tasks or waiting:
            for w in range(self.size):
                if w in waiting or not tasks:
                    continue
                worker = self._worker(w)
                if not worker.ready:  # wait for its start-up before its first task's clock starts
                    waiting[w] = (("start", None), time.monotonic(), _START_TIMEOUT)
                    continue
                task = self._next_task(tasks, jobs, w)
                if task is None:
                    continue  # what is left goes to the workers that built it before
                self._register(worker)
                if task[0] == "reference":
                    job = missing[task[1]]
                    sent = worker.send(("reference", task[1], job.reference, job.target))
                    limit = self.reference_timeout
                else:
                    sent = worker.send(("build", task[1], jobs[task[1]]))
                    limit = self.build_timeout
                waiting[w] = (task, time.monotonic(), limit)
                if not sent:
                    self._finish(task, worker.died("before its task"), w, results, built, jobs)
                    del waiting[w]
            if not waiting:
                continue
            now = time.monotonic()
            wait_for = max(0.0, min(start + limit - now for _, start, limit in waiting.values()))
            ready = wait([self.workers[w].connection for w in waiting], timeout=wait_for)
            now = time.monotonic()
            for w, (task, start, limit) in list(waiting.items()):
                worker = self.workers[w]
                doing = _DOING[task[0]]
                if worker.connection in ready:
                    reply = worker.receive(doing)
                elif now - start >= limit:
                    worker.kill()
                    reply = {"error_kind": "timeout", "error_msg": f"{doing[6:]} took more than {limit:g} s"}
                else:
                    continue
                del waiting[w]
                self._finish(task, reply, w, results, built, jobs)
        return built

    def _register(self, worker: _Worker) -> None:
        """Install the batch's run-time registrations in ``worker`` unless it has them; a
        worker that cannot is the tuning setup's fault, not a candidate's: RegistrationError."""
        registrations = self.registrations
        if registrations is None or worker.registered == registrations.digest:
            return
        reply = worker.request(("register", registrations), _START_TIMEOUT, "while installing registrations")
        if reply.get("error_kind") == "registration":
            raise RegistrationError(reply["error_msg"])
        if reply.get("registered"):
            worker.registered = registrations.digest

    def _next_task(
        self, tasks: deque[tuple[str, Any]], jobs: Sequence[Job], worker_index: int
    ) -> tuple[str, Any] | None:
        """The first task for this worker: a build it did before (its build cache has it), else
        the first one no other worker did before."""
        owners = [self.builders.get(_program_key(jobs[item])) if kind == "build" else None for kind, item in tasks]
        chosen = next((i for i, owner in enumerate(owners) if owner == worker_index), None)
        if chosen is None:
            chosen = next((i for i, owner in enumerate(owners) if owner is None or owner >= self.size), None)
        if chosen is None:
            return None
        task = tasks[chosen]
        del tasks[chosen]
        return task

    def _finish(
        self,
        task: tuple[str, Any],
        reply: dict[str, Any],
        worker_index: int,
        results: list[dict[str, Any]],
        built: list[tuple[int, int]],
        jobs: Sequence[Job],
    ) -> None:
        kind, item = task
        worker = self.workers[worker_index]
        if kind == "start":
            worker.ready = bool(reply.get("ready"))
            if worker.ready:
                self.start_failures = 0
                return
            worker.kill()
            self.start_failures += 1
            if self.start_failures >= 3:
                raise RuntimeError(
                    f"measuring workers fail to start ({reply.get('error_msg', reply)}); see their output above"
                )
            return
        if kind == "reference":
            self.references[item] = reply.get("reference") or {
                "error_kind": reply.get("error_kind", "run"),
                "error_msg": reply.get("error_msg", ""),
            }
            return
        results[item] = reply
        if reply.get("error_kind") is None:
            worker.built.add(item)
            built.append((item, worker_index))
            key = _program_key(jobs[item])
            self.builders[key] = worker_index
            self.builders.move_to_end(key)
            while len(self.builders) > _REMEMBERED_BUILDERS:
                self.builders.popitem(last=False)

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()
        self.workers.clear()


def _discount_own_waits(results: list[dict[str, Any]], ran: list[int], system: SystemCpu | None) -> None:
    """Zero the runs' ``load``/``stall`` when no other process used the CPU while they ran: their
    waits were the kernel's own threads sharing a CPU, or a virtual CPU waking up
    (``metasched.measure.noise``)."""
    later = SystemCpu.snapshot()
    if system is None or later is None or system.foreign_cores(later) >= FOREIGN_CORES:
        return
    for index in ran:
        if "load" in results[index]:
            results[index]["load"] = results[index]["stall"] = 0.0


_local_pools: dict[tuple[Any, ...], LocalPool] = {}
_local_pools_lock = threading.Lock()


def measure_batch(
    jobs: Sequence[Job],
    workers: int = 2,
    timeout: float = 10.0,
    build_timeout: float = 30.0,
    reference_timeout: float = 300.0,
) -> list[dict[str, Any]]:
    """Measure ``jobs`` with a pool of this process, kept for the next batch sent here: the
    unit of work an executor runs (plain data in, plain data out)."""
    key = (os.getpid(), workers, timeout, build_timeout, reference_timeout)
    with _local_pools_lock:
        pool = _local_pools.get(key)
        if pool is None:
            pool = _local_pools[key] = LocalPool(workers, timeout, build_timeout, reference_timeout)
    return pool.measure(jobs)


@atexit.register
def close_local_pools() -> None:
    """Stop the workers of the pools ``measure_batch`` keeps (at exit, or when asked)."""
    with _local_pools_lock:
        for pool in _local_pools.values():
            pool.close()
        _local_pools.clear()
