"""Measurement: build and time candidates in worker processes, so no candidate can hurt the tuner.

    measurer = Measurer("llvm", num_threads=2)
    results = measurer.measure([MeasureInput(func, "llvm", reference=unscheduled)])
    results[0].seconds          # median run time, or None with .error_kind / .error_msg
    measurer.close()

Each candidate is built (``tir.build``; ``build_seconds`` recorded), run once on deterministic
random inputs and checked against the unscheduled program's outputs when ``reference`` is given,
then timed with the thread count pinned: the median of ``repeat`` runs after that checked one
(fewer for a candidate clearly slower than the best so far). Every
failure is a result, never an exception: a build error ("build"), an exception while running
("run"), a worker killed by a signal, a segfault say ("crash"), a run past ``timeout`` seconds
("timeout"), outputs that differ from the unscheduled program's ("wrong").

Stages: ``builder`` (the plain data a candidate travels as, and building), ``runner`` (inputs,
the check, the timing), ``executors`` (the local pool of worker processes, and
``measure_batch``, the unit of work of any ``concurrent.futures.Executor``).

An AArch64 target on an x86-64 machine is measured under ``qemu-aarch64 -cpu max``
(``tir.runtime.aarch64``): candidates are cross-compiled, checked against the unscheduled
program like any other, and their timings come back with ``emulated=True`` -- good for
correctness and for the tuner's plumbing, not for ranking schedules by AArch64 speed (measure on
an ARM machine through an executor for that). A local ``Measurer`` for such a target checks the
cross toolchain and qemu at once: a missing tool is an ``AArch64ToolchainError`` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from metasched.measure.builder import Job, encode_program, first_line
from metasched.measure.dask_executor import NoWorkerError, SchedulerLostError, is_dask_client
from metasched.measure.executors import LocalPool, measure_batch
from metasched.measure.noise import is_busy
from metasched.task import workload_hash
from tir.ir import PrimFunc
from tir.registrations import RegistrationError, capture
from tir.target import Target

__all__ = ["MeasureInput", "MeasureResult", "Measurer", "measure_batch"]


@dataclass(frozen=True)
class MeasureInput:
    func: PrimFunc  # the scheduled program (before lowering)
    target: str | Target
    reference: PrimFunc | None = None  # the unscheduled program: the output is checked against it


@dataclass(frozen=True)
class MeasureResult:
    seconds: float | None  # median run time; None on error
    error_kind: str | None = None  # None | "build" | "run" | "crash" | "timeout" | "wrong"
    error_msg: str = ""
    build_seconds: float = 0.0
    emulated: bool = False  # timed under an emulator (an AArch64 target on a qemu worker)
    # Other processes' disturbance of the timing (``metasched.measure.noise``); None: not counted.
    load: float | None = None  # run-queue waiting of the timed threads, in cores
    stall: float | None = None  # the most-delayed thread's share of the timing spent waiting

    @property
    def busy(self) -> bool:
        """Timed while other processes used the CPU (``noise.BUSY_LOAD``)."""
        return is_busy(self.load)

    @staticmethod
    def of(outcome: Any) -> MeasureResult:
        """A measurer's outcome as a ``MeasureResult``: a user's measurer may return any object
        with ``seconds``, ``error_kind`` and ``error_msg`` (``metasched.protocols.Outcome``);
        what it leaves out (``build_seconds``, ``emulated``, ``load``, ``stall``) is not known."""
        if isinstance(outcome, MeasureResult):
            return outcome
        return MeasureResult(
            seconds=outcome.seconds,
            error_kind=outcome.error_kind,
            error_msg=outcome.error_msg,
            build_seconds=getattr(outcome, "build_seconds", 0.0),
            emulated=bool(getattr(outcome, "emulated", False)),
            load=getattr(outcome, "load", None),
            stall=getattr(outcome, "stall", None),
        )


def _check_local_tools(resolved: Target) -> None:
    """Raise ``AArch64ToolchainError`` (one line, naming what is missing) when this machine
    cannot run ``target``'s code under qemu, ``CUDADeviceError`` (one line) for a CUDA target
    on a machine without a usable GPU; nothing for a target it runs natively."""
    if resolved.is_cuda:
        from tir.runtime.cuda import CUDADeviceError, device_missing_reason

        reason = device_missing_reason()
        if reason is not None:
            raise CUDADeviceError(
                f"cannot measure target {resolved.text!r} on this machine: {reason}; measuring needs an NVIDIA "
                "GPU (the design space still generates, verifies and compiles here: metasched.space.SpaceGenerator, "
                "tir.build)"
            )
        return
    if resolved.isa != "aarch64" or Target.host().isa == "aarch64":
        return
    from tir.runtime.aarch64 import AArch64ToolchainError, find_toolchain

    try:
        find_toolchain()
    except AArch64ToolchainError as error:
        raise AArch64ToolchainError(f"cannot measure target {resolved.text!r} on this machine: {error}") from None


def _default_workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


class Measurer:
    """Builds and times candidates in worker processes (see the module docstring).

    ``executor``: any ``concurrent.futures.Executor``, or a ``distributed.Client`` (measured as
    ``dask_executor`` describes: chunks over the measuring workers that serve the target; a
    cluster that cannot serve it raises ``NoWorkerError``, a lost scheduler ``SchedulerLostError``).
    Each task an executor runs is ``measure_batch``
    on plain data (``chunk_size`` candidates, default the whole batch, whose runs then stay one
    at a time), which measures in worker processes where the executor runs it, so a crashing
    candidate cannot take the executor's worker down. Default: a local pool.
    ``num_threads``: threads each candidate runs with (default: the module's default);
    ``timeout``: seconds for one candidate's checked run and timing; ``repeat``: timed runs
    (the median is reported), fewer for a candidate slower than ``budget`` seconds in all;
    ``workers``: processes building at once (default: the cores, at most 8);
    ``build_timeout``: seconds for one build; ``reference_timeout``: seconds for the
    unscheduled program's one checked run (computed once per pool); ``flush_cache``: time
    every run with cold caches (``runner.evict_caches`` first), as a model's kernels run: each
    layer's weights come from memory. Warm timing favours schedules that re-read a weight
    panel many times (20-50% slower cold on BERT's matmuls). The inputs not declared
    layout-free (the activations, which the layer before just wrote) are read back into the
    caches after the eviction, so only the weights start cold.
    """

    def __init__(
        self,
        target: str | Target,
        executor: Executor | None = None,
        num_threads: int | None = None,
        timeout: float = 10.0,
        repeat: int = 5,
        workers: int | None = None,
        build_timeout: float = 30.0,
        reference_timeout: float = 300.0,
        budget: float = 1.0,
        chunk_size: int | None = None,
        flush_cache: bool = False,
    ) -> None:
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.target = Target.parse(target)
        if isinstance(executor, str):
            raise TypeError(
                f"executor={executor!r}: give an Executor object, e.g. distributed.Client({executor!r}) for a dask "
                "scheduler (the command line's --executor takes addresses)"
            )
        if executor is None:
            _check_local_tools(self.target)
        if is_dask_client(executor):
            from metasched.measure.dask_executor import DaskExecutor

            executor = DaskExecutor(executor, threads=num_threads)
        self.executor = executor
        self.num_threads = num_threads
        self.timeout = timeout
        self.repeat = repeat
        self.workers = workers if workers is not None else _default_workers()
        self.build_timeout = build_timeout
        self.reference_timeout = reference_timeout
        self.budget = budget
        self.chunk_size = chunk_size
        self.flush_cache = flush_cache
        self._pool: LocalPool | None = None
        self._references: dict[int, tuple[PrimFunc, str, bytes | str]] = {}  # id -> (func, key, encoded)

    def _reference(self, func: PrimFunc | None) -> tuple[str | None, bytes | str | None]:
        """(structural hash, encoded program) of a reference, once per reference object (the
        tuner passes the same one with every candidate of a task)."""
        if func is None:
            return None, None
        found = self._references.get(id(func))
        if found is None or found[0] is not func:
            if len(self._references) > 64:
                self._references.clear()
            found = self._references[id(func)] = (func, workload_hash(func), encode_program(func))
        return found[1], found[2]

    def measure(self, inputs: Sequence[MeasureInput], best_seconds: float | None = None) -> list[MeasureResult]:
        """Results in the order of ``inputs``. ``best_seconds`` (the best so far) lets a
        candidate several times slower be reported after one run instead of ``repeat``."""
        if not inputs:
            return []
        registrations = capture()
        jobs = [
            Job(
                encode_program(item.func),
                str(item.target),  # a job is plain data: the target travels as its text
                *self._reference(item.reference),
                self.num_threads,
                self.repeat,
                best_seconds,
                self.budget,
                self.flush_cache,
                registrations,
            )
            for item in inputs
        ]
        options = (self.workers, self.timeout, self.build_timeout, self.reference_timeout)
        if self.executor is not None:
            replies = self._on_executor(jobs, options)
        else:
            if self._pool is None:
                self._pool = LocalPool(*options)
            replies = self._pool.measure(jobs)
        return [
            MeasureResult(
                seconds=reply.get("seconds") if reply.get("error_kind") is None else None,
                error_kind=reply.get("error_kind"),
                error_msg=reply.get("error_msg", ""),
                build_seconds=reply.get("build_seconds", 0.0),
                emulated=bool(reply.get("emulated", False)),
                load=reply.get("load"),
                stall=reply.get("stall"),
            )
            for reply in replies
        ]

    def _on_executor(self, jobs: list[Job], options: tuple[Any, ...]) -> list[dict[str, Any]]:
        assert self.executor is not None
        size = self.chunk_size or len(jobs)
        chunks = [jobs[start : start + size] for start in range(0, len(jobs), size)]
        futures = [self.executor.submit(measure_batch, chunk, *options) for chunk in chunks]
        replies: list[dict[str, Any]] = []
        for chunk, future in zip(chunks, futures):
            try:
                replies.extend(future.result())
            except (NoWorkerError, SchedulerLostError, RegistrationError):
                raise  # the cluster or the registrations, not a candidate, are at fault: the tune stops
            except Exception as error:  # noqa: BLE001 - a lost executor task is a result too
                failure = {"error_kind": "crash", "error_msg": f"the executor's task failed: {first_line(error)}"}
                replies.extend(dict(failure) for _ in chunk)
        return replies

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
