"""The random-schedule fuzzer: sequences of random primitives over the corpus, every result checked.

Invariant, after every primitive attempted on a kernel of ``tests/fuzz/kernels.py``:

- either it refused with ``ScheduleError`` and the program and trace are unchanged,
- or the result verifies (``tir.analysis.verify`` finds nothing), its printed script parses
  back structurally equal, and the interpreter and the LLVM build (``tir.build(f, "llvm")``)
  both compute what the unscheduled program computes, on guard-paged arrays
  (``tests/fuzz/guarded.py``) so that an out-of-bounds access faults;
- at the end of each sequence, the trace replays through JSON to the same program.

A break of the invariant is a failure of one class:

``wrong_result``    the interpreter or LLVM computes something else (or the interpreter raises)
``crash``           the process died of a signal (or wrote before an array: the canary)
``llvm_rejection``  ``tir.build`` raised on a program the schedule accepted
``invalid``         accepted, but the result does not verify, print-parse or replay, or a
                    refusal changed the program
``other_exception`` a raw Python error (not ``ScheduleError``) from inside a primitive
``timeout``         a step ran past ``STEP_TIMEOUT`` seconds

Work runs in spawned worker processes (libgomp does not survive fork), so a segfault is counted,
not fatal: before it runs compiled code, a worker sends the supervisor a checkpoint (kernel and
trace); when the worker dies, the checkpoint becomes the crash's reproducer and a fresh worker
takes over. Every failure keeps its kernel name and trace JSON; ``minimize`` drops the
instructions the failure does not need (greedily, each candidate checked in a worker).
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `tests.` imports work under plain `pytest` and in spawned workers

import tir  # noqa: E402
from tests.fuzz.actions import ACTIONS, Call, Drawer, draw_action, focus_of  # noqa: E402
from tests.fuzz.guarded import GuardedArrays  # noqa: E402
from tests.fuzz.kernels import KERNELS  # noqa: E402
from tests.schedule.schedule_testing import random_args  # noqa: E402
from tir.analysis import verify  # noqa: E402
from tir.ir import Buffer, PrimFunc  # noqa: E402
from tir.schedule import Schedule, ScheduleError, Trace  # noqa: E402

CLASSES = ("wrong_result", "crash", "llvm_rejection", "invalid", "other_exception", "timeout")

#: Seconds a worker may stay silent (one step, or one minimization check) before it is killed.
STEP_TIMEOUT = 60.0

#: Reductions reordered by split / rfactor / decompose round differently.
FLOAT_TOLERANCE = 1e-4

#: A worker is replaced after this many sequences: built modules and JIT engines accumulate in
#: a process (about 0.5 MB a step), and a fresh one costs about a second.
RECYCLE_AFTER = 150

#: The longest primitive sequence drawn (lengths are uniform in 1..MAX_SEQUENCE).
MAX_SEQUENCE = 10


@dataclass
class Failure:
    """One break of the invariant, with what reproduces it."""

    cls: str
    primitive: str
    kernel: str
    message: str
    trace_json: str
    sequence: int = -1
    step: int = -1

    def signature(self) -> tuple[str, str, str]:
        """Failures with the same class, primitive and message shape count as one defect."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        shape = re.sub(r"'[^']*'", "'_'", first)
        shape = re.sub(r"[0-9]+", "#", shape)
        return self.cls, self.primitive, shape[:90]


@dataclass
class Report:
    steps: int = 0
    sequences: int = 0
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    attempted: Counter[str] = field(default_factory=Counter)
    applied: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    #: (seconds, sequence, kernel) of the slowest sequences, slowest first.
    slowest: list[tuple[float, int, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        found = Counter(f.cls for f in self.failures)
        return {cls: found.get(cls, 0) for cls in CLASSES}

    def unique(self) -> dict[tuple[str, str, str], list[Failure]]:
        groups: dict[tuple[str, str, str], list[Failure]] = {}
        for failure in self.failures:
            groups.setdefault(failure.signature(), []).append(failure)
        return groups

    def summary(self) -> str:
        lines = [f"{self.steps} steps in {self.sequences} sequences, {self.seconds:.0f} s"]
        lines.append("failures per class: " + ", ".join(f"{c} {n}" for c, n in self.counts().items()))
        by_primitive = Counter((f.primitive, f.cls) for f in self.failures)
        for (primitive, cls), count in sorted(by_primitive.items()):
            lines.append(f"  {primitive:28s} {cls:16s} {count}")
        lines.append("primitive                    attempted  applied  refused")
        for kind in sorted(self.attempted):
            lines.append(f"  {kind:28s} {self.attempted[kind]:8d} {self.applied[kind]:8d} {self.refused[kind]:8d}")
        if self.slowest:
            lines.append("slowest sequences: " + ", ".join(f"{k} #{n} {t:.1f} s" for t, n, k in self.slowest[:5]))
        return "\n".join(lines)


# ===================================================================== checks (worker side)


def _short(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:3000]


class Checker:
    """Runs one kernel's programs on fixed random inputs and compares with the unscheduled kernel."""

    def __init__(self, checkpoint: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._inputs: dict[str, list[Any]] = {}
        self._expected: dict[str, list[Any]] = {}
        self.checkpoint = checkpoint or (lambda info: None)

    def _run(self, func: PrimFunc, kernel: str, runner: Callable[[list[Any]], None]) -> tuple[list[Any], list[str]]:
        arrays = GuardedArrays()
        args = [
            arrays.copy_of(a, max(p.align, 1), p.name) if isinstance(a, np.ndarray) and isinstance(p, Buffer) else a
            for p, a in zip(func.params, self._inputs[kernel])
        ]
        runner(args)
        return [a.copy() if isinstance(a, np.ndarray) else a for a in args], arrays.check_canaries()

    def expected(self, kernel: str) -> list[Any]:
        if kernel not in self._expected:
            original = KERNELS[kernel]
            self._inputs[kernel] = random_args(original, seed=0)
            self._expected[kernel], _ = self._run(original, kernel, lambda args: tir.interpret(original, *args))
        return self._expected[kernel]

    def _compare(self, kernel: str, got: list[Any], how: str) -> str | None:
        for param, want, have in zip(KERNELS[kernel].params, self.expected(kernel), got):
            if not isinstance(want, np.ndarray):
                continue
            if want.dtype.kind == "f":
                close = np.isclose(have, want, rtol=FLOAT_TOLERANCE, atol=FLOAT_TOLERANCE, equal_nan=True)
            else:
                close = have == want
            if not close.all():
                where = tuple(int(x) for x in np.argwhere(~close)[0])
                return (
                    f"{how}: buffer {param.name} differs from the unscheduled program at {int((~close).sum())} of "
                    f"{close.size} elements, first {where}: {have[where]!r} instead of {want[where]!r}"
                )
        return None

    def check(self, func: PrimFunc, kernel: str, trace_json: str, primitive: str) -> tuple[str, str] | None:
        """The class and message of the first broken invariant of an accepted result, or None."""
        try:
            problems = verify(func)
        except Exception as error:  # the validator itself failing is the program's problem too
            return "invalid", f"verify raised {_short(error)}"
        if problems:
            return "invalid", "the result does not verify: " + "; ".join(map(str, problems))[:2000]
        try:
            text = func.script()
            parsed = tir.parse(text)
        except Exception as error:
            return "invalid", f"the printed result does not parse back: {_short(error)}"
        if not tir.structural_equal(parsed, func):
            return "invalid", "the printed result parses back to a different program"
        self.expected(kernel)
        self.checkpoint({"kernel": kernel, "trace_json": trace_json, "primitive": primitive, "phase": "interpreter"})
        try:
            got, overwritten = self._run(func, kernel, lambda args: tir.interpret(func, *args))
        except Exception as error:
            return "wrong_result", f"interpreter raised on an accepted result: {_short(error)}"
        if overwritten:
            return "crash", f"interpreter wrote before the start of {overwritten}"
        mismatch = self._compare(kernel, got, "interpreter")
        if mismatch:
            return "wrong_result", mismatch
        self.checkpoint({"kernel": kernel, "trace_json": trace_json, "primitive": primitive, "phase": "llvm"})
        try:
            module = tir.build(func, "llvm")
        except Exception as error:
            return "llvm_rejection", _short(error)
        try:
            got, overwritten = self._run(func, kernel, lambda args: module(*args))
        except Exception as error:
            return "llvm_rejection", f"the built module refused to run: {_short(error)}"
        if overwritten:
            return "crash", f"LLVM build wrote before the start of {overwritten}"
        mismatch = self._compare(kernel, got, "LLVM")
        return ("wrong_result", mismatch) if mismatch else None


def _trace_with(sch: Schedule, call: Call | None) -> str:
    instructions = list(sch.trace.instructions)
    if call is not None:
        instructions.append(call.instruction())
    return Trace(instructions).to_json()


def run_sequence(
    seq_id: int,
    seed: int,
    checker: Checker,
    report: Report,
    kernels: list[str] | None = None,
    weights: dict[str, float] | None = None,
) -> None:
    """Apply one random sequence (drawn from ``(seed, seq_id)``), checking every step.
    ``kernels`` / ``weights``: draw only those kernels, and actions by those weights (a focused
    run; see ``fuzz``)."""
    kernel, sch_seed, length = sequence_plan(seed, seq_id, kernels)
    rng = Drawer(f"fuzz-actions:{seed}:{seq_id}")
    original = KERNELS[kernel]
    sch = Schedule(original, seed=sch_seed)
    report.sequences += 1
    for step in range(length):
        report.steps += 1
        action = draw_action(rng, weights)
        report.attempted[action] += 1
        call: Call | None = None
        func = sch.func
        try:
            call = ACTIONS[action](sch, rng)
            if call is None:
                continue
            func, length_before = sch.func, len(sch.trace)
            call.run(sch)
        except ScheduleError as error:
            report.refused[action] += 1
            if sch.func is not func or (call is not None and len(sch.trace) != length_before):
                report.failures.append(
                    Failure("invalid", action, kernel, f"refused but changed the program or trace: {error}",
                            _trace_with(sch, call), seq_id, step)
                )  # fmt: skip
                return
            continue
        except Exception as error:
            where = "".join(traceback.format_exception(error)[-3:])
            report.failures.append(
                Failure("other_exception", call.kind if call else action, kernel, f"{_short(error)}\n{where}",
                        _trace_with(sch, call), seq_id, step)
            )  # fmt: skip
            return
        report.applied[action] += 1
        rng.focus = focus_of(sch, call) or rng.focus
        if sch.func is func:
            continue
        trace_json = sch.trace.to_json()
        problem = checker.check(sch.func, kernel, trace_json, call.kind)
        if problem is not None:
            report.failures.append(Failure(problem[0], call.kind, kernel, problem[1], trace_json, seq_id, step))
            return
    try:
        again = Schedule(original)
        Trace.from_json(sch.trace.to_json()).apply_to(again)
        replayed = tir.structural_equal(again.func, sch.func)
        message = "the trace replays (through JSON) to a different program"
    except Exception as error:
        replayed, message = False, f"the trace does not replay: {_short(error)}"
    if not replayed:
        report.failures.append(Failure("invalid", "trace replay", kernel, message, sch.trace.to_json(), seq_id, -1))


def sequence_plan(seed: int, seq_id: int, kernels: list[str] | None = None) -> tuple[str, int, int]:
    """Kernel, schedule seed and length of sequence ``seq_id``: a function of the seeds (and of
    ``kernels``, the names to draw from: default the whole corpus) only."""
    rng = random.Random(f"fuzz-plan:{seed}:{seq_id}")
    names = sorted(kernels if kernels is not None else KERNELS)
    return names[rng.randrange(len(names))], rng.randrange(2**31), rng.randint(1, MAX_SEQUENCE)


def classify_trace(kernel: str, trace_json: str, checker: Checker) -> tuple[str, str, str] | None:
    """Replay a reproducer: the class, primitive (its last instruction) and message of the
    failure it shows, or None (the prefix does not replay, or the last step is fine/refused)."""
    instructions = Trace.from_json(trace_json).instructions
    if not instructions:
        return None
    last = instructions[-1].kind
    original = KERNELS[kernel]
    before = Schedule(original)
    try:
        Trace(instructions[:-1]).apply_to(before)
    except Exception:
        return None
    sch = Schedule(original)
    try:
        Trace(instructions).apply_to(sch)
    except ScheduleError as error:
        if not tir.structural_equal(sch.func, before.func):
            return "invalid", last, f"refused but changed the program or trace: {error}"
        return None
    except Exception as error:
        return "other_exception", last, _short(error)
    if tir.structural_equal(sch.func, before.func):
        return None
    problem = checker.check(sch.func, kernel, trace_json, last)
    return None if problem is None else (problem[0], last, problem[1])


# ===================================================================== workers


def _worker_main(conn: multiprocessing.connection.Connection) -> None:
    os.environ.setdefault("TIR_NUM_THREADS", "2")  # parallel loops race only with several threads
    # Idle libgomp threads spin by default: with two workers of two threads each on a busy
    # machine, a barrier then waits for descheduled spinners and a step takes seconds. libgomp
    # reads this when the first build loads it, after this line.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    checker = Checker(lambda info: conn.send(("checkpoint", info)))
    while True:
        request = conn.recv()
        if request[0] == "stop":
            return
        if request[0] == "sequence":
            _, seq_id, seed, kernels, weights = request
            report = Report()
            began = time.monotonic()
            run_sequence(seq_id, seed, checker, report, kernels, weights)
            report.slowest = [(time.monotonic() - began, seq_id, sequence_plan(seed, seq_id, kernels)[0])]
            conn.send(("done", report))
        elif request[0] == "selftest_out_of_bounds":
            # The harness's own check: a write one element past a guarded array kills the worker.
            array = GuardedArrays().empty((3,), np.dtype(np.float32))
            conn.send(
                ("checkpoint", {"kernel": "selftest", "primitive": "selftest", "phase": "an out-of-bounds write"})
            )
            ctypes.c_float.from_address(array.ctypes.data + 3 * 4).value = 1.0
            conn.send(("survived", None))
        elif request[0] == "classify":
            _, kernel, trace_json = request
            try:
                result = classify_trace(kernel, trace_json, checker)
            except Exception as error:  # a malformed candidate: not a reproduction
                result = None
                del error
            conn.send(("classified", result))


class Worker:
    """One spawned worker process; restarted after it dies."""

    def __init__(self) -> None:
        self.process: multiprocessing.process.BaseProcess | None = None
        self.conn: multiprocessing.connection.Connection | None = None
        self.checkpoint: dict[str, Any] | None = None
        self.request: tuple[Any, ...] | None = None
        self.started = 0.0
        self.served = 0

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.conn = parent

    def send(self, request: tuple[Any, ...]) -> None:
        if self.process is not None and self.served >= RECYCLE_AFTER:
            self.stop()
        if self.process is None or not self.process.is_alive():
            self.start()
            self.served = 0
        self.served += 1
        assert self.conn is not None
        self.checkpoint, self.request, self.started = None, request, time.monotonic()
        self.conn.send(request)

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join()
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive():
            assert self.conn is not None
            try:
                self.conn.send(("stop",))
                self.process.join(timeout=5)
            except OSError:
                pass
        self.kill()

    def death(self) -> str:
        """What killed the worker (after its pipe closed)."""
        assert self.process is not None
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is not None and code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def poll(self) -> tuple[str, Any] | None:
        """The next final message (checkpoints are kept), ('died', reason) or ('timeout', None)."""
        assert self.conn is not None
        while True:
            left = STEP_TIMEOUT - (time.monotonic() - self.started)
            if left <= 0:
                self.kill()
                return "timeout", None
            try:
                if not self.conn.poll(min(left, 0.05)):
                    return None
                kind, payload = self.conn.recv()
            except (EOFError, OSError):
                reason = self.death()
                self.process = None
                return "died", reason
            if kind == "checkpoint":
                self.checkpoint, self.started = payload, time.monotonic()
                continue
            return kind, payload

    def wait(self) -> tuple[str, Any]:
        while True:
            message = self.poll()
            if message is not None:
                return message


def _lost_step_failure(worker: Worker, cls: str, reason: str, seq_id: int) -> Failure:
    info = worker.checkpoint or {}
    phase = info.get("phase", "a primitive")
    return Failure(
        cls, info.get("primitive", "unknown"), info.get("kernel", "unknown"), f"{reason} while running {phase}",
        info.get("trace_json", Trace().to_json()), seq_id,
    )  # fmt: skip


def fuzz(
    steps: int | None = 1000,
    seconds: float | None = None,
    seed: int = 0,
    jobs: int = 2,
    progress: Callable[[Report], None] | None = None,
    kernels: list[str] | None = None,
    weights: dict[str, float] | None = None,
) -> Report:
    """Run sequences ``0, 1, 2, ...`` of seed ``seed`` on ``jobs`` workers until ``steps``
    primitive steps are planned (a fixed set of sequences for a seed) or ``seconds`` pass.
    ``kernels`` / ``weights`` focus the run on some kernels and actions (``run_sequence``)."""
    report = Report()
    workers = [Worker() for _ in range(max(jobs, 1))]
    busy: dict[int, int] = {}  # worker index -> sequence id
    planned, next_seq = 0, 0
    start = time.monotonic()
    last_progress = start
    try:
        while True:
            out_of_time = seconds is not None and time.monotonic() - start > seconds
            for index, worker in enumerate(workers):
                if index in busy or out_of_time or (steps is not None and planned >= steps):
                    continue
                planned += sequence_plan(seed, next_seq, kernels)[2]
                worker.send(("sequence", next_seq, seed, kernels, weights))
                busy[index] = next_seq
                next_seq += 1
            if not busy:
                break
            conns = [workers[i].conn for i in busy if workers[i].conn is not None]
            multiprocessing.connection.wait(conns, timeout=0.5)
            for index in list(busy):
                worker = workers[index]
                message = worker.poll()
                if message is None:
                    continue
                seq_id = busy.pop(index)
                kind, payload = message
                if kind == "done":
                    _merge(report, payload)
                    continue
                # The worker died or hung: count the sequence up to its checkpoint.
                report.sequences += 1
                report.steps += 1
                cls = "timeout" if kind == "timeout" else "crash"
                reason = f"no answer in {STEP_TIMEOUT:.0f} s" if kind == "timeout" else payload
                report.failures.append(_lost_step_failure(worker, cls, reason, seq_id))
            if progress is not None and time.monotonic() - last_progress > 10:
                last_progress = time.monotonic()
                report.seconds = last_progress - start
                progress(report)
    finally:
        for worker in workers:
            worker.stop()
    report.seconds = time.monotonic() - start
    return report


def _merge(report: Report, part: Report) -> None:
    report.steps += part.steps
    report.sequences += part.sequences
    report.failures.extend(part.failures)
    report.attempted.update(part.attempted)
    report.applied.update(part.applied)
    report.refused.update(part.refused)
    report.slowest = sorted(report.slowest + part.slowest, reverse=True)[:10]


# ===================================================================== reproducers


def classify_in_worker(worker: Worker, kernel: str, trace_json: str) -> tuple[str, str, str] | None:
    worker.send(("classify", kernel, trace_json))
    kind, payload = worker.wait()
    if kind == "classified":
        return tuple(payload) if payload is not None else None  # type: ignore[return-value]
    if kind == "timeout":
        return "timeout", (worker.checkpoint or {}).get("primitive", "unknown"), "timeout"
    return "crash", (worker.checkpoint or {}).get("primitive", "unknown"), str(payload)


def minimize(failure: Failure, worker: Worker, max_checks: int = 80) -> Failure:
    """Drop instructions (last one kept) while the same class and primitive still show."""
    if failure.cls == "timeout" or failure.primitive == "trace replay":
        return failure
    instructions = json.loads(failure.trace_json)["instructions"]
    checks = 0

    def reproduces(candidate: list[Any]) -> tuple[str, str, str] | None:
        nonlocal checks
        checks += 1
        text = json.dumps({"version": 1, "instructions": candidate})
        result = classify_in_worker(worker, failure.kernel, text)
        if result is not None and result[0] == failure.cls and result[1] == failure.primitive:
            return result
        return None

    confirmed = reproduces(instructions)
    if confirmed is None:
        return failure  # not reproducible on its own (state from an earlier refused call?)
    message = confirmed[2]
    changed = True
    while changed and checks < max_checks:
        changed = False
        for position in range(len(instructions) - 2, -1, -1):
            if checks >= max_checks or position >= len(instructions) - 1:
                break
            candidate = instructions[:position] + instructions[position + 1 :]
            result = reproduces(candidate)
            if result is not None:
                instructions, message, changed = candidate, result[2], True
    trace_json = json.dumps({"version": 1, "instructions": instructions})
    return Failure(failure.cls, failure.primitive, failure.kernel, message, trace_json, failure.sequence, failure.step)


def write_reproducers(report: Report, out_dir: Path, minimize_them: bool = True, budget_s: float = 600.0) -> list[Path]:
    """One JSON reproducer per distinct failure (minimized), every failure in failures.jsonl,
    the summary in summary.txt."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "failures.jsonl", "w") as all_file:
        for failure in report.failures:
            all_file.write(json.dumps(asdict(failure)) + "\n")
    (out_dir / "summary.txt").write_text(report.summary() + "\n")
    written: list[Path] = []
    worker = Worker()
    start = time.monotonic()
    try:
        for number, (_, group) in enumerate(sorted(report.unique().items())):
            failure = group[0]
            if minimize_them and time.monotonic() - start < budget_s:
                failure = minimize(failure, worker)
            trace = Trace.from_json(failure.trace_json)
            safe = re.sub(r"[^A-Za-z0-9_]+", "_", failure.primitive)
            path = out_dir / failure.cls / f"{number:03d}_{safe}_{failure.kernel}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            record = asdict(failure) | {
                "occurrences": len(group),
                "trace": json.loads(failure.trace_json),
                "python": trace.as_python(),
                "program": KERNELS[failure.kernel].script(),
                "replay": f"python -m tests.fuzz.run --replay {path}",
            }
            path.write_text(json.dumps(record, indent=1) + "\n")
            written.append(path)
    finally:
        worker.stop()
    return written


def replay_file(path: Path) -> tuple[str, str, str] | None:
    """Classify a written reproducer again (in a worker): its failure, or None when it is fixed."""
    record = json.loads(Path(path).read_text())
    worker = Worker()
    try:
        return classify_in_worker(worker, record["kernel"], record["trace_json"])
    finally:
        worker.stop()
