"""Measuring on many machines with dask.distributed: the builds and runs are dask tasks, while the
search, the cost model and the database stay with the client.

    from distributed import Client
    client = Client("tcp://scheduler:8786")     # any dask cluster; or Client(LocalCluster())
    metasched.tune(func, "llvm", trials=1000, executor=client)

``Measurer`` wraps a ``distributed.Client`` in a ``DaskExecutor``; a batch is then measured so:

- **Measuring machines** take one chunk of candidates at a time: a chunk's measuring processes
  (``LocalPool``, one per core, at most 8) build it in parallel, then time the candidates one
  at a time, so that a timing never shares the machine with a build or another timing. Which
  workers measure (``measuring_groups``):

  - any dask cluster as it is: when no worker declares the ``measure`` resource, every worker
    may measure, and the workers are grouped by machine (the kernel's boot id, which two
    containers of one host share; else the host name, else the host of the worker's address).
    The client deals at most one chunk at a time to each machine, to the first idle worker of
    it (by address) that serves the target, so the many workers of one ``LocalCluster`` or of
    one big host measure one chunk at a time, not one each;
  - the option: when some workers declare ``measure`` (``metasched worker`` declares
    ``measure=1``; or ``dask worker --resources measure=1``), those alone measure, each on its
    own, and each chunk is a dask task that also takes one unit of the resource (so tuners
    sharing the cluster take turns too; two tuners on a cluster without the resource may
    measure on one machine at once).

  ``log`` says how many machines measure, and again whenever that changes. Builds and runs
  happen on the same machine (a timing waits for the builds anyway), so no artifact travels:
  only the pickled programs go out and plain results come back. Each measuring process keeps a
  build cache keyed by structural hash and target (``builder.build_job``). A worker's own
  threads do not matter: the chunk's measurements run in the pool's processes.
- **Threads** are pinned: a candidate runs with the ``Measurer``'s ``num_threads``, or, when
  that is None, with the client machine's core count (what ``"llvm"`` asks for there); a worker
  with fewer cores than that does not serve the target.
- **Heterogeneous workers**: each worker describes its machine once (triple, CPU, features,
  cores, whether it has the AArch64 cross toolchain and qemu). A chunk goes only to workers
  that serve its target: the same triple and every feature the target names (for a target
  without ``-mtriple``/``-mcpu``/``-mattr``, i.e. the client's own machine: the same CPU and
  features, so the code built there is the code the client would build); an AArch64 target
  also to x86-64 workers that declare a ``qemu_aarch64`` resource and have the tools, whose
  timings come back marked ``emulated``. No worker serving a target is ``NoWorkerError``,
  naming each worker and why it does not serve (``serves``).
- **Faults**: chunks are dealt to idle machines by the client, each pinned to its worker. A
  worker that dies or disconnects loses only the chunk it was measuring: that chunk is measured
  once more on another worker (of the same machine or another), and if it is lost again its
  candidates are recorded as ``crash`` ("lost with dask workers A and B"); the batch goes on
  with the remaining workers, and ``log`` says so. A scheduler that goes away raises ``SchedulerLostError``, which stops the
  tune (every finished measurement is already in the database).
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from metasched.measure.builder import Job, first_line
from metasched.measure.executors import measure_batch

__all__ = [
    "MEASURE_RESOURCE",
    "QEMU_RESOURCE",
    "DaskExecutor",
    "NoWorkerError",
    "SchedulerLostError",
    "WorkerMachine",
    "describe_machine",
    "describe_measuring",
    "is_dask_client",
    "measure_chunk",
    "measuring_groups",
    "serves",
]

#: The resource that, when some workers declare it, names the measuring workers (one unit: one chunk
#: measured at a time); without it every worker may measure, one chunk at a time per machine.
MEASURE_RESOURCE = "measure"
#: The resource an x86-64 worker declares to measure AArch64 targets under qemu.
QEMU_RESOURCE = "qemu_aarch64"

#: Seconds between looks at the scheduler's list of workers while a batch is in flight.
_POLL_SECONDS = 0.5
#: Seconds the client may be disconnected from the scheduler before the run stops.
_SCHEDULER_GRACE = 10.0
#: Times a chunk is sent out at most (the first try and one retry elsewhere).
_TRIES = 2


class NoWorkerError(RuntimeError):
    """No dask worker can measure a target (the cluster has none, or none matches the target)."""


class SchedulerLostError(RuntimeError):
    """The dask scheduler went away: the tune stops (its database keeps every finished measurement)."""


def is_dask_client(executor: Any) -> bool:
    """Whether ``executor`` is a ``distributed.Client`` (checked without importing dask)."""
    return any(
        cls.__name__ == "Client" and cls.__module__.split(".")[0] == "distributed" for cls in type(executor).__mro__
    )


@dataclass(frozen=True)
class WorkerMachine:
    """What a worker is: its address, machine and declared resources."""

    address: str
    triple: str
    cpu: str
    features: frozenset[str]
    cores: int
    resources: dict[str, float]
    aarch64_tools: bool  # the AArch64 cross compiler, its C library and qemu-aarch64 are installed
    machine: str = ""  # what tells machines apart ("boot:<kernel boot id>" or "host:<name>"); "" unknown

    @property
    def isa(self) -> str:
        return self.triple.split("-", 1)[0]

    @property
    def host(self) -> str:
        """The host part of the worker's address (``tcp://10.0.0.5:40123`` -> ``10.0.0.5``; a worker
        in the client's process, ``inproc://10.0.0.5/812/3``, -> ``10.0.0.5``)."""
        scheme, _, rest = self.address.rpartition("://")
        if scheme == "inproc":
            return rest.split("/", 1)[0]
        return rest.rpartition(":")[0].strip("[]") or rest

    @property
    def declares_measure(self) -> bool:
        return self.resources.get(MEASURE_RESOURCE, 0) >= 1


def _machine_identity() -> str:
    """What tells this machine from others: the kernel's boot id (two containers on one host share
    it, and share its cores), else the host name."""
    import socket

    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            boot_id = file.read().strip()
    except OSError:  # not Linux
        boot_id = ""
    return f"boot:{boot_id}" if boot_id else f"host:{socket.gethostname()}"


def describe_machine() -> dict[str, Any]:
    """The machine this runs on (a dask worker runs it for the client): triple, CPU, features,
    cores (its CPU affinity), whether it can run AArch64 code under qemu, and its identity
    (``machine``: workers with the same one take turns measuring)."""
    import os

    from tir.target import Target

    host = Target.host()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        from tir.runtime.aarch64 import find_toolchain

        find_toolchain()
        aarch64_tools = True
    except Exception:  # noqa: BLE001 - any missing piece means no qemu runner
        aarch64_tools = False
    return {
        "triple": host.triple,
        "cpu": host.cpu,
        "features": sorted(host.features),
        "cores": cores,
        "aarch64_tools": aarch64_tools,
        "python": sys.version.split()[0],
        "machine": _machine_identity(),
    }


def _group_key(worker: WorkerMachine) -> str:
    return worker.machine or f"address:{worker.host}"


def measuring_groups(workers: Iterable[WorkerMachine]) -> dict[str, list[WorkerMachine]]:
    """The workers that may measure, in groups that measure one chunk at a time each (their
    workers sorted by address).

    When some workers declare the ``measure`` resource, those alone, each its own group (keyed
    by its address). Otherwise every worker, grouped by machine: the same ``machine`` identity,
    or for a worker that gave none, the same host in its address."""
    workers = sorted(workers, key=lambda worker: worker.address)
    declaring = [worker for worker in workers if worker.declares_measure]
    if declaring:
        return {worker.address: [worker] for worker in declaring}
    groups: dict[str, list[WorkerMachine]] = {}
    for worker in workers:
        groups.setdefault(_group_key(worker), []).append(worker)
    return groups


def describe_measuring(groups: dict[str, list[WorkerMachine]], serving: Iterable[str] | None = None) -> str:
    """One line for the log: how many machines measure (only those with a worker in ``serving``,
    the addresses that serve a target, when given) and how they were chosen."""
    chosen = set(serving) if serving is not None else None
    kept = [g for g in groups.values() if chosen is None or any(w.address in chosen for w in g)]
    if any(worker.declares_measure for group in kept for worker in group):
        verb = "declares" if len(kept) == 1 else "declare"
        return (
            f"measuring on {_count(len(kept), 'dask worker')} that {verb} the {MEASURE_RESOURCE!r} resource "
            "(one chunk at a time each)"
        )
    hosts = []
    for group in kept:
        names = sorted({worker.host for worker in group})
        hosts.append(f"{_count(len(group), 'worker')} on {'/'.join(names)}")
    return (
        f"measuring on {_count(len(kept), 'machine')} (dask workers grouped by host: {', '.join(hosts) or 'none'}; "
        f"none declares the {MEASURE_RESOURCE!r} resource: one chunk at a time per machine)"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _names_host(target_text: str) -> bool:
    """Whether a CPU target string means "the machine parsing it" (no triple, CPU or features)."""
    return not any(word in target_text for word in ("-mtriple", "-mcpu", "-mattr"))


def serves(worker: WorkerMachine, target_text: str, threads: int | None) -> tuple[str | None, bool]:
    """(why ``worker`` cannot measure candidates for ``target_text`` at ``threads`` threads, or
    None when it can; whether its timings are emulated). ``target_text`` is parsed here, on the
    client: ``"llvm"`` means the client's machine. (Whether the worker measures at all is
    ``measuring_groups``'s question.)"""
    from tir.target import Target

    target = Target.parse(target_text)
    if not target.is_cpu:
        return f"measures CPU targets only, not {target_text!r}", False
    if threads is not None and worker.cores < threads:
        return f"has {worker.cores} cores, fewer than the {threads} threads a candidate runs with", False
    if target.triple != worker.triple:
        if target.isa == "aarch64" and worker.isa == "x86_64":
            if worker.resources.get(QEMU_RESOURCE, 0) < 1:
                return f"is {worker.isa} and does not declare the {QEMU_RESOURCE!r} resource (a qemu runner)", False
            if not worker.aarch64_tools:
                return f"declares {QEMU_RESOURCE!r} but lacks qemu-aarch64 or the AArch64 cross toolchain", False
            return None, True
        return f"is {worker.triple}, the target is {target.triple}", False
    missing = sorted(target.features - worker.features)
    if missing:
        return f"lacks CPU feature(s) {', '.join(missing)}", False
    if _names_host(target_text) and (worker.cpu, worker.features) != (target.cpu, target.features):
        extra = sorted(worker.features - target.features)
        return (
            f"is a {worker.cpu} (extra features: {', '.join(extra[:6]) or 'none'}), not the client's {target.cpu}; "
            "give an explicit target (-mcpu=..., -mattr=...) to measure on other CPUs"
        ), False
    return None, False


def measure_chunk(
    jobs: Sequence[Job],
    workers: int,
    timeout: float,
    build_timeout: float,
    reference_timeout: float,
    emulated: bool = False,
) -> list[dict[str, Any]]:
    """The dask task: ``measure_batch`` in this worker's pool of measuring processes; each
    reply names the worker and whether its timing is emulated."""
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):
        address = "local"
    replies = measure_batch(jobs, workers, timeout, build_timeout, reference_timeout)
    for reply in replies:
        reply["worker"] = address
        if emulated:
            reply["emulated"] = True
    return replies


@dataclass
class _Chunk:
    indices: list[int]  # positions in the batch
    emulated_on: set[str]  # addresses whose timings of this target are emulated
    eligible: list[str]  # addresses that serve its target (the first idle one of an idle machine takes it)
    target: str
    lost_on: list[str]  # addresses it was lost with


class DaskExecutor(Executor):
    """A ``concurrent.futures.Executor`` over a ``distributed.Client`` for ``Measurer``: a
    ``measure_batch`` submitted here is split into chunks over the measuring machines that serve
    its target (the module docstring); other functions go to ``client.submit`` as they are.

    ``log`` receives how many machines measure and what happens to workers (default: stderr);
    ``worker_wait``: seconds to wait for a serving worker to (re)join when none is left before
    giving up with ``NoWorkerError``.
    """

    def __init__(
        self,
        client: Any,
        log: Callable[[str], None] | None = None,
        worker_wait: float = 60.0,
        threads: int | None = None,
    ) -> None:
        self.client = client
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.worker_wait = worker_wait
        self.grace = _SCHEDULER_GRACE  # seconds cut from the scheduler before the run stops
        self.default_threads = threads  # candidates' threads when a job leaves them open
        self.machines: dict[str, WorkerMachine] = {}  # every worker described, by address
        self.groups: dict[str, list[WorkerMachine]] = {}  # measuring_groups of them
        self._group_of: dict[str, str] = {}  # a measuring worker's address -> its group
        self.lost_workers: list[str] = []  # every worker that left while measuring, in order
        self._told: dict[tuple[str, int | None], str] = {}  # the last measuring line logged per target
        self._not_measuring = 0  # workers left out because others declare the resource
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dask-measure")
        self._address: str | None = None
        _ = self.address

    @property
    def address(self) -> str:
        """The scheduler's address (kept from the start: a lost scheduler forgets it)."""
        if self._address is None:
            scheduler = getattr(self.client, "scheduler", None)
            self._address = getattr(scheduler, "address", None)
        return str(self._address)

    # ------------------------------------------------------------ the Executor interface

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if fn is measure_batch:
            return self._thread.submit(self.measure, *args, **kwargs)
        return self.client.submit(fn, *args, pure=False, **kwargs)  # type: ignore[no-any-return]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._thread.shutdown(wait=wait, cancel_futures=cancel_futures)

    # ------------------------------------------------------------ workers

    def _check_connected(self) -> None:
        """Return once the client is connected to the scheduler; raise ``SchedulerLostError``
        when it is closed, or cut from the scheduler for longer than ``grace`` seconds."""
        disconnected = None
        while True:
            status = str(getattr(self.client, "status", "running"))
            if status == "running":
                return
            if status in ("closed", "closing") or (
                disconnected is not None and time.monotonic() - disconnected > self.grace
            ):
                raise SchedulerLostError(self._lost_message())
            disconnected = disconnected or time.monotonic()
            time.sleep(_POLL_SECONDS)

    def _scheduler_workers(self) -> dict[str, dict[str, Any]]:
        self._check_connected()
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # an older distributed: every worker by default
            info = self.client.scheduler_info()
        except Exception as error:  # noqa: BLE001 - any failure to ask means the scheduler is gone
            raise SchedulerLostError(self._lost_message(error)) from None
        return dict(info.get("workers", {}))

    def _lost_message(self, error: BaseException | None = None) -> str:
        why = f" ({first_line(error)})" if error is not None else ""
        return (
            f"the dask scheduler at {self.address} went away{why}: the tune stops here; every finished "
            "measurement is in its database"
        )

    def refresh(self) -> dict[str, WorkerMachine]:
        """The measuring workers now connected, described (new ones asked once); ``groups``
        says which of them share a machine."""
        workers = self._scheduler_workers()
        if any(w.get("resources", {}).get(MEASURE_RESOURCE, 0) >= 1 for w in workers.values()):
            measuring = {a: w for a, w in workers.items() if w.get("resources", {}).get(MEASURE_RESOURCE, 0) >= 1}
        else:
            measuring = workers
        self._not_measuring = len(workers) - len(measuring)
        new = [address for address in measuring if address not in self.machines]
        if new:
            try:
                described = self.client.run(describe_machine, workers=new, on_error="return")
            except Exception as error:  # noqa: BLE001 - the scheduler, not one worker, failed
                raise SchedulerLostError(self._lost_message(error)) from None
            for address, found in described.items():
                if isinstance(found, BaseException) or not isinstance(found, dict):
                    self.log(f"dask worker {address} cannot describe its machine ({found!r}): not used")
                    continue
                self.machines[address] = WorkerMachine(
                    address,
                    found["triple"],
                    found["cpu"],
                    frozenset(found["features"]),
                    int(found["cores"]),
                    dict(measuring[address].get("resources", {})),
                    bool(found["aarch64_tools"]),
                    str(found.get("machine", "")),
                )
        for address in list(self.machines):
            if address not in measuring:
                del self.machines[address]
        self.groups = measuring_groups(self.machines.values())
        self._group_of = {worker.address: key for key, group in self.groups.items() for worker in group}
        return {address: self.machines[address] for address in self._group_of}

    def serving(self, target_text: str, threads: int | None) -> tuple[list[str], set[str], list[str]]:
        """(measuring workers that serve the target, by address; those of them that emulate it;
        why each other one does not)."""
        eligible, emulated, refusals = [], set(), []
        for address, machine in sorted(self.refresh().items()):
            reason, emulates = serves(machine, target_text, threads)
            if reason is None:
                eligible.append(address)
                if emulates:
                    emulated.add(address)
            else:
                refusals.append(f"{address} {reason}")
        return eligible, emulated, refusals

    def _no_worker(self, target_text: str, refusals: list[str]) -> NoWorkerError:
        if not refusals:
            return NoWorkerError(
                f"no dask worker at {self.address} can measure {target_text!r}: the scheduler has no workers; "
                f"start some with `metasched worker {self.address}` (or `dask worker {self.address}`)"
            )
        unused = (
            f" ({_count(self._not_measuring, 'other worker')} not used: once some workers declare the "
            f"{MEASURE_RESOURCE!r} resource, only those measure)"
            if self._not_measuring
            else ""
        )
        return NoWorkerError(
            f"no dask worker at {self.address} can measure target {target_text!r}: " + "; ".join(refusals) + unused
        )

    def _tell(self, target_text: str, threads: int | None, eligible: list[str]) -> None:
        """Log how many machines measure this target, when that is news."""
        line = describe_measuring(self.groups, eligible)
        if self._told.get((target_text, threads)) != line:
            self._told[(target_text, threads)] = line
            self.log(line if len(self._told) == 1 else f"{line} for {target_text!r}")

    # ------------------------------------------------------------ a batch

    def measure(
        self,
        jobs: Sequence[Job],
        workers: int | None = None,
        timeout: float = 10.0,
        build_timeout: float = 30.0,
        reference_timeout: float = 300.0,
    ) -> list[dict[str, Any]]:
        """One reply per job, in order (``measure_batch``'s contract). ``workers`` (the client's
        build processes) is ignored: each worker builds with its own cores, at most 8."""
        import os

        from distributed import wait

        del workers
        jobs = list(jobs)
        threads = self.default_threads or len(os.sched_getaffinity(0))
        jobs = [job if job.num_threads is not None else _with_threads(job, threads) for job in jobs]
        replies: list[dict[str, Any] | None] = [None] * len(jobs)
        queue: deque[_Chunk] = deque()
        by_target: dict[tuple[str, int | None], list[int]] = {}
        for index, job in enumerate(jobs):
            by_target.setdefault((job.target, job.num_threads), []).append(index)
        for (target_text, job_threads), indices in by_target.items():
            eligible, emulated, refusals = self.serving(target_text, job_threads)
            if not eligible:
                raise self._no_worker(target_text, refusals)
            self._tell(target_text, job_threads, eligible)
            # One chunk per serving machine: each builds its share in parallel, then times it.
            count = min(len({self._group_of[address] for address in eligible}), len(indices))
            size = math.ceil(len(indices) / count)
            for start in range(0, len(indices), size):
                queue.append(_Chunk(indices[start : start + size], emulated, eligible, target_text, []))
        options = (timeout, build_timeout, reference_timeout)
        in_flight: dict[Any, tuple[_Chunk, str, str]] = {}  # future -> (chunk, worker address, its machine)
        waiting_since: float | None = None
        while queue or in_flight:
            # One chunk at a time per machine (per worker where workers declare the resource).
            busy = {group for _, _, group in in_flight.values()}
            # Deal chunks to idle serving machines (each chunk pinned to one worker of its machine).
            for chunk in list(queue):
                candidates = [a for a in chunk.eligible if a in self._group_of and self._group_of[a] not in busy]
                fresh = [a for a in candidates if a not in chunk.lost_on]
                address = (fresh or candidates or cast("list[str | None]", [None]))[0]
                if address is None:
                    continue
                queue.remove(chunk)
                busy.add(self._group_of[address])
                machine = self.machines[address]
                future = self.client.submit(
                    measure_chunk,
                    [jobs[i] for i in chunk.indices],
                    max(1, min(machine.cores, 8)),
                    *options,
                    address in chunk.emulated_on,
                    workers=[address],
                    allow_other_workers=False,
                    resources={MEASURE_RESOURCE: 1} if machine.declares_measure else None,
                    pure=False,
                )
                in_flight[future] = (chunk, address, self._group_of[address])
            if not in_flight:
                # Chunks left and no serving worker: wait for one to join, then give up.
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since > self.worker_wait:
                    chunk = queue[0]
                    _, _, refusals = self.serving(chunk.target, jobs[chunk.indices[0]].num_threads)
                    raise self._no_worker(chunk.target, refusals or ["every serving worker left"])
                time.sleep(_POLL_SECONDS)
                self._requeue_for_new_workers(queue, jobs)
                continue
            waiting_since = None
            self._wait(wait, list(in_flight))
            present = set(self._scheduler_workers())
            if queue and present - set(self.machines):
                self._requeue_for_new_workers(queue, jobs)
            for future, (chunk, address, _) in list(in_flight.items()):
                if future.status == "finished":
                    try:
                        results = future.result()
                    except Exception as error:  # noqa: BLE001 - a failed task loses its chunk like a dead worker
                        del in_flight[future]
                        self._lost(chunk, address, first_line(error), queue, replies)
                        continue
                    del in_flight[future]
                    for index, reply in zip(chunk.indices, results):
                        replies[index] = reply
                elif future.status in ("error", "cancelled", "lost") or address not in present:
                    del in_flight[future]
                    why = "it left the cluster" if address not in present else f"its task ended as {future.status}"
                    future.cancel()
                    self._lost(chunk, address, why, queue, replies)
        return [
            reply if reply is not None else {"error_kind": "crash", "error_msg": "not measured"} for reply in replies
        ]

    def _wait(self, wait: Callable[..., Any], futures: list[Any]) -> None:
        """Wait a little for any future to finish; raise ``SchedulerLostError`` once the client has
        been cut from the scheduler for longer than the grace period."""
        while True:
            self._check_connected()
            try:
                wait(futures, timeout=_POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
            except Exception as error:  # noqa: BLE001 - a comm failure: judged by the status above
                if getattr(self.client, "status", "running") == "running":
                    raise SchedulerLostError(self._lost_message(error)) from None
                continue
            return

    def _lost(
        self, chunk: _Chunk, address: str, why: str, queue: deque[_Chunk], replies: list[dict[str, Any] | None]
    ) -> None:
        chunk.lost_on.append(address)
        if address not in self.lost_workers:
            self.lost_workers.append(address)
        self.machines.pop(address, None)  # asked again should it come back
        self._group_of.pop(address, None)
        if len(chunk.lost_on) < _TRIES:
            self.log(
                f"dask worker {address} was lost while measuring {len(chunk.indices)} candidate(s) ({why}); "
                "they are measured again on another worker, and the run goes on with the remaining workers"
            )
            queue.appendleft(chunk)
            return
        self.log(
            f"dask worker {address} was lost while measuring {len(chunk.indices)} candidate(s) ({why}); "
            f"lost twice, they are recorded as failed (crash)"
        )
        message = f"not measured: lost with dask workers {' and '.join(chunk.lost_on)} ({why})"
        for index in chunk.indices:
            replies[index] = {"error_kind": "crash", "error_msg": message}

    def _requeue_for_new_workers(self, queue: deque[_Chunk], jobs: list[Job]) -> None:
        """Workers may have joined (a nanny restarts a killed worker under a new address):
        recompute who serves each waiting chunk."""
        for chunk in queue:
            eligible, emulated, _ = self.serving(chunk.target, jobs[chunk.indices[0]].num_threads)
            chunk.eligible, chunk.emulated_on = eligible, emulated


def _with_threads(job: Job, threads: int) -> Job:
    from dataclasses import replace

    return replace(job, num_threads=threads)
