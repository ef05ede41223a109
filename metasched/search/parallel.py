"""Making candidates in worker processes while the search waits for them.

Making a candidate -- replaying its sketch, running the postprocessors and the validator -- is
most of the search's time (0.2-0.7 s each for a conv2d on a 2-core machine; a batch of 32
measured candidates makes about 170). The makes of one round are independent, so
``CandidateMaker`` deals them in chunks to worker processes -- fresh interpreters started with
``subprocess`` as the measurer's are (libgomp does not survive fork; multiprocessing's spawn
would re-import the caller's script) -- and collects the results in order:

    maker = CandidateMaker(workers=2)
    results = maker.make_many(task_func, sketches, postprocs, [(sketch_index, decisions, seed), ...])
    maker.close()

(``shared_maker(workers)`` keeps one for the process: ``metasched.tune`` uses that.) Each result is a ``Candidate`` or a ``Rejected``, the same as ``make_candidate`` in this process
with the same seed gives: the search draws every seed itself, so the candidates do not depend on
the number of workers. The task's program, sketches and postprocessors travel with each chunk as
one pickled payload (tens of kilobytes), unpickled once per worker and kept by its digest. The
payload is pickled with ``cloudpickle``, so postprocessors defined in the user's script travel
too, and it carries what this process registered at run time (``tir.registrations``: a user's
tensor intrinsics, say), installed in the worker before anything is made; a worker that cannot
install or unpickle them raises ``RegistrationError`` here, in one line. A worker process that dies
takes the pool with it: the maker says so once and makes the rest in this process.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import pickle
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from metasched.search.candidate import Candidate, Rejected, finish_candidate, make_candidate
from tir.ir import PrimFunc
from tir.registrations import RegistrationError, capture, install
from tir.schedule import Trace

__all__ = ["CandidateMaker", "FinishJob", "Job", "MadeProgram", "shared_maker"]

log = logging.getLogger(__name__)

#: One make: the sketch's index, its decisions (None or partial: the rest sampled), the seed and
#: whether to make it lazily (unchecked: ``make_candidate(lazy=True)``).
Job = tuple[int, "dict[int, Any] | None", int, bool]
#: One finish (``finish_candidate``) of a lazily made candidate: its sketch's index, its
#: decisions and its program.
FinishJob = tuple[int, "dict[int, Any]", PrimFunc]


@dataclass(frozen=True)
class MadeProgram:
    """What a candidate made in another process carries instead of its live ``Schedule``: the
    scheduled program and its full trace (all the search and the measurer read of it)."""

    func: PrimFunc
    trace: Trace


def make_here(func: PrimFunc, sketches: Sequence[Trace], postprocs: Sequence[Any], job: Job) -> Candidate | Rejected:
    sketch_index, decisions, seed, lazy = job
    try:
        return make_candidate(func, sketches[sketch_index], sketch_index, decisions, postprocs, seed=seed, lazy=lazy)
    except Rejected as rejected:
        return rejected


def finish_here(
    func: PrimFunc, sketches: Sequence[Trace], postprocs: Sequence[Any], candidate: Candidate
) -> Candidate | Rejected:
    try:
        return finish_candidate(candidate, func, sketches[candidate.sketch_index], postprocs)
    except Rejected as rejected:
        return rejected


# ---------------------------------------------------------------- the worker side

_payloads: dict[str, tuple[PrimFunc, list[Trace], list[Any]]] = {}


def _encode(made: Candidate | Rejected, given: Candidate | None = None) -> tuple[Any, ...]:
    if isinstance(made, Rejected):
        return ("rejected", made.stage, made.reason)
    if made is given:
        return ("checked",)  # the search side has the program already
    return ("made", made.sketch_index, made.decisions, made.func, made.trace, made.hash, made.checked)


def _work_chunk(kind: str, digest: str, payload: bytes | None, items: list[Any]) -> list[tuple[Any, ...]]:
    if digest not in _payloads:
        if payload is None:
            return [("unknown",)]  # this worker does not have the task: the search sends it again
        if len(_payloads) >= 4:
            _payloads.pop(next(iter(_payloads)))
        try:
            registrations, task = pickle.loads(payload)
            install(registrations)
            _payloads[digest] = pickle.loads(task)
        except RegistrationError as error:
            return [("error", str(error))]
        except ImportError as error:
            return [
                (
                    "error",
                    f"a candidate-making process cannot import module {error.name!r}, needed by a "
                    "postprocessor or the task given to the search",
                )
            ]
    func, sketches, postprocs = _payloads[digest]
    if kind == "make":
        return [_encode(make_here(func, sketches, postprocs, job)) for job in items]
    out = []
    for sketch_index, decisions, program in items:
        given = Candidate(sketch_index, decisions, MadeProgram(program, None), checked=False)  # type: ignore[arg-type]
        out.append(_encode(finish_here(func, sketches, postprocs, given), given))
    return out


def serve(connection: Connection) -> None:
    """A worker's loop: (kind, digest, payload or None, items) -> the encoded results, until
    the connection closes. ``kind`` is "make" (items: ``Job``) or "finish" (``FinishJob``); the
    payload (task program, sketches, postprocessors) comes only when the worker has not seen
    ``digest``."""
    while True:
        try:
            kind, digest, payload, items = connection.recv()
        except (EOFError, OSError):
            return
        reply = _work_chunk(kind, digest, payload, items)
        try:
            connection.send(reply)
        except (EOFError, OSError):
            return


class _Worker:
    def __init__(self) -> None:
        from metasched.measure.executors import start_worker_process

        # A terminal's Ctrl-C is for the tuner, which ends its makers; they need no thread pools.
        environment = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.process, self.connection = start_worker_process(
            "metasched.search.parallel", ignore_sigint=True, env=environment
        )
        self.digests: set[str] = set()  # tasks sent to it (it keeps the last few)

    def close(self, kill: bool = False) -> None:
        self.connection.close()
        if kill:
            self.process.kill()
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------- the search side


class CandidateMaker:
    """``workers`` processes making candidates (see the module docstring), started on first use.

    ``workers`` <= 1 makes everything in this process. Small rounds (fewer jobs than
    ``min_parallel``) are made here too: shipping them costs more than it saves."""

    def __init__(self, workers: int | None = None, min_parallel: int = 4) -> None:
        if workers is None:
            workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.workers = max(1, workers)
        self.min_parallel = min_parallel
        self._pool: list[_Worker] = []
        self._broken = False
        self._task: tuple[Any, ...] | None = None  # (func, sketches, postprocs, digest, payload, registrations)

    def make_many(
        self, func: PrimFunc, sketches: Sequence[Trace], postprocs: Sequence[Any], jobs: Sequence[Job]
    ) -> list[Candidate | Rejected]:
        """The results of ``jobs``, in order."""
        return self._dispatch("make", func, sketches, postprocs, list(jobs))

    def finish_many(
        self, func: PrimFunc, sketches: Sequence[Trace], postprocs: Sequence[Any], candidates: Sequence[Candidate]
    ) -> list[Candidate | Rejected]:
        """``finish_candidate`` of each (lazily made) candidate, in order: the candidate itself,
        checked, or the one made again with every check, or why it is rejected."""
        candidates = list(candidates)
        items: list[FinishJob] = [(c.sketch_index, c.decisions, c.func) for c in candidates]
        results = self._dispatch("finish", func, sketches, postprocs, items, candidates)
        for candidate, result in zip(candidates, results):
            if result is candidate:
                candidate.checked = True
        return results

    def _here(
        self,
        kind: str,
        func: PrimFunc,
        sketches: Sequence[Trace],
        postprocs: Sequence[Any],
        items: list[Any],
        given: list[Any],
    ) -> list[Candidate | Rejected]:
        if kind == "make":
            return [make_here(func, sketches, postprocs, job) for job in items]
        return [finish_here(func, sketches, postprocs, candidate) for candidate in given]

    def _payload(self, func: PrimFunc, sketches: Sequence[Trace], postprocs: Sequence[Any]) -> tuple[str, bytes]:
        """The task pickled once (the search passes the same objects every round), with this
        process's run-time registrations (made again when they change)."""
        import cloudpickle

        registrations = capture()
        kept = self._task
        if (
            kept is None
            or kept[0] is not func
            or kept[1] is not sketches
            or kept[2] is not postprocs
            or kept[5] is not registrations
        ):
            task = cloudpickle.dumps((func, list(sketches), list(postprocs)), protocol=pickle.HIGHEST_PROTOCOL)
            payload = pickle.dumps((registrations, task), protocol=pickle.HIGHEST_PROTOCOL)
            kept = self._task = (func, sketches, postprocs, hashlib.sha1(payload).hexdigest(), payload, registrations)
        return kept[3], kept[4]

    def _dispatch(
        self,
        kind: str,
        func: PrimFunc,
        sketches: Sequence[Trace],
        postprocs: Sequence[Any],
        items: list[Any],
        given: list[Any] | None = None,
    ) -> list[Candidate | Rejected]:
        given = given if given is not None else items
        if self.workers <= 1 or self._broken or len(items) < self.min_parallel:
            return self._here(kind, func, sketches, postprocs, items, given)
        if not self._pool:
            self._pool = [_Worker() for _ in range(self.workers)]
        digest, payload = self._payload(func, sketches, postprocs)
        # Items dealt round-robin (neighbouring ones often cost alike), one chunk per worker.
        count = min(len(items), len(self._pool))
        replies: dict[int, list[tuple[Any, ...]]] = {}
        failure: str | None = None
        try:
            todo = list(range(count))
            while todo:
                for index in todo:
                    worker = self._pool[index]
                    # The task travels once per worker; one that has since dropped it says so.
                    sent = payload if digest not in worker.digests else None
                    worker.connection.send((kind, digest, sent, items[index::count]))
                    worker.digests.add(digest)
                waiting = {self._pool[index].connection: index for index in todo}
                todo = []
                while waiting:
                    for ready in cast("list[Connection]", wait(list(waiting))):  # waits on connections only
                        index = waiting.pop(ready)
                        reply = ready.recv()
                        if reply and reply[0] == ("unknown",):
                            self._pool[index].digests.discard(digest)
                            todo.append(index)
                        elif reply and reply[0][0] == "error":
                            self._pool[index].digests.discard(digest)
                            failure = reply[0][1]
                        else:
                            replies[index] = reply
        except (EOFError, OSError) as error:
            self._broken = True
            log.warning("a candidate-making process died (%s); making candidates in this process from now on", error)
            self.close(kill=True)
            return self._here(kind, func, sketches, postprocs, items, given)
        except BaseException:
            # Interrupted (Ctrl-C) while replies are due: they would answer the next round.
            self.close(kill=True)
            raise
        if failure is not None:
            raise RegistrationError(failure)
        results: list[Candidate | Rejected | None] = [None] * len(items)
        for index, reply in replies.items():
            for position, item in zip(range(index, len(items), count), reply):
                results[position] = given[position] if item[0] == "checked" else _decode(item)
        return results  # type: ignore[return-value]

    def close(self, kill: bool = False) -> None:
        for worker in self._pool:
            worker.close(kill)
        self._pool = []

    def __enter__(self) -> CandidateMaker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_shared: dict[int, CandidateMaker] = {}


def shared_maker(workers: int | None = None) -> CandidateMaker:
    """A maker kept for this process (one per worker count), so that tune after tune does not
    start its workers again; they end with the process."""
    maker = CandidateMaker(workers)
    kept = _shared.get(maker.workers)
    if kept is None or kept._broken:
        kept = _shared[maker.workers] = maker
        atexit.register(kept.close)
    return kept


def _decode(item: tuple[Any, ...]) -> Candidate | Rejected:
    if item[0] == "rejected":
        return Rejected(item[1], item[2])
    _, sketch_index, decisions, func, trace, structural, checked = item
    return Candidate(sketch_index, decisions, MadeProgram(func, trace), hash=structural, checked=checked)  # type: ignore[arg-type]
