"""Timings taken on a busy machine do not decide the best program (``metasched.measure.noise``)."""

from __future__ import annotations

import importlib
import random
import time

import pytest

import metasched
import tir
import tir.script as T
from metasched.database import Database, TuningRecord
from metasched.measure import MeasureInput, Measurer, MeasureResult
from metasched.measure.noise import BUSY_LOAD, SampleWatch, ThreadWaits, is_busy, quiet_estimate, undisturbed

# The module (``metasched.tune`` the attribute is the function).
tune_module = importlib.import_module("metasched.tune")
settle_module = importlib.import_module("metasched.settle")


@T.script
def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def is_parallel(func: tir.PrimFunc) -> bool:
    """Half the programs of this simulation run on every core, the other half on one."""
    return tir.structural_hash(func) % 2 == 0


def true_seconds(func: tir.PrimFunc) -> float:
    """A program's latency on the quiet machine of this simulation (fixed per program): the
    parallel ones are the faster."""
    spread = (tir.structural_hash(func) // 2 % 997) / 997
    return 1e-3 * ((0.5 + 0.5 * spread) if is_parallel(func) else (1.0 + spread))


class NoisyMeasurer:
    """Quiet timings within 0.5% of the true latency. While ``busy()`` says so, another job
    takes a core: a parallel program waits for its slowest thread (2-4x slower, reported with
    the load the real runner would count); a serial one runs on the free core, undisturbed.
    On a busy machine the serial programs look the fastest."""

    def __init__(self, busy: object, seed: int = 0) -> None:
        self.busy = busy
        self.rng = random.Random(seed)

    def measure(self, inputs: list[MeasureInput], best_seconds: float | None = None) -> list[MeasureResult]:
        out = []
        for item in inputs:
            seconds = true_seconds(item.func) * self.rng.uniform(0.995, 1.005)
            if self.busy() and is_parallel(item.func):  # type: ignore[operator]
                slowdown = self.rng.uniform(2.0, 4.0)
                out.append(MeasureResult(seconds * slowdown, load=0.9, stall=1 - 1 / slowdown))
            else:
                out.append(MeasureResult(seconds, load=0.001, stall=0.0))
        return out

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settle_module, "_QUIET_PAUSE", 0.01)


def test_a_tune_busy_until_its_end_keeps_the_program_a_quiet_timing_ranks_best(tmp_path) -> None:  # noqa: ANN001
    phase = {"settling": False}
    measurer = NoisyMeasurer(busy=lambda: not phase["settling"])

    def on_progress(status: tune_module.TuneStatus) -> None:
        phase["settling"] = status.phase == "settle"

    result = metasched.tune(
        matmul,
        "llvm",
        trials=64,
        batch_size=16,
        work_dir=str(tmp_path),
        measurer=measurer,
        search_workers=1,
        log=lambda line: None,
        on_progress=on_progress,
    )
    task = result.tasks[0]
    assert task.busy_trials > 10  # the search really ran on a busy machine
    # The best is chosen by quiet timings: among every program that has one, none is faster.
    database = Database(tmp_path)
    quiet = {r.trace_json for r in database.records(matmul, "llvm") if r.is_valid and not r.busy}
    assert task.best_trace is not None and task.best_trace.to_json() in quiet
    quiet_programs = [settle_module._replay(matmul, tir.schedule.Trace.from_json(t)) for t in quiet]
    assert true_seconds(task.best_func) == min(true_seconds(f) for f in quiet_programs)
    # And it is the fastest program measured at all: the busy timings' quiet estimates chose
    # the leaders to re-time, so one measured only under load was not lost.
    measured = {r.trace_json for r in database.records(matmul, "llvm") if r.is_valid}
    every_program = [settle_module._replay(matmul, tir.schedule.Trace.from_json(t)) for t in measured]
    assert true_seconds(task.best_func) == min(true_seconds(f) for f in every_program)
    assert task.quiet is True and result.trustworthy
    assert "every task's best was timed again on a quiet machine" in result.noise_summary()


def test_a_tune_busy_to_the_end_says_it_is_untrustworthy(tmp_path) -> None:  # noqa: ANN001
    result = metasched.tune(
        matmul,
        "llvm",
        trials=32,
        batch_size=16,
        work_dir=str(tmp_path),
        measurer=NoisyMeasurer(busy=lambda: True),
        search_workers=1,
        log=lambda line: None,
    )
    task = result.tasks[0]
    # The parallel programs, faster on a quiet machine, were only ever timed on a busy one:
    # whatever was kept, the choice cannot be confirmed.
    assert task.quiet is False and not result.trustworthy
    assert "UNTRUSTWORTHY" in result.noise_summary() and "UNTRUSTWORTHY" in result.summary()


def test_busy_timings_rank_only_where_no_quiet_timing_exists(tmp_path) -> None:  # noqa: ANN001
    database = Database(tmp_path)
    key = database.commit_workload(matmul)

    def record(trace: str, seconds: float, load: float | None, stall: float | None = None) -> None:
        database.commit_record(TuningRecord(key, "llvm", trace, seconds, load=load, stall=stall))

    record("serial", 2.0e-3, 0.0)
    record("parallel", 2.5e-3, 0.9, stall=0.5)  # timed while a core was taken: half its time waiting
    record("old", 3.0e-3, None)  # an older record without the counters counts as quiet
    record("lucky", 1.0e-3, 0.0)
    record("lucky", 4.0e-3, 0.9, stall=0.1)  # busy, and the program has a quiet timing: not counted
    # A program timed only on a busy machine counts at its quiet estimate (1.25 ms).
    ranked = database.get_top_k(matmul, "llvm", 5)
    assert [r.trace_json for r in ranked] == ["lucky", "parallel", "serial", "old"]
    assert ranked[0].seconds == pytest.approx(1.0e-3) and ranked[1].seconds == pytest.approx(1.25e-3)
    # Reloaded from disk, the counters are still there.
    again = Database(tmp_path).records(matmul, "llvm")
    assert [(r.load, r.stall) for r in again][:3] == [(0.0, None), (0.9, 0.5), (None, None)]


def test_quiet_estimate_and_threshold() -> None:
    assert quiet_estimate(2.0, 0.5) == pytest.approx(1.0)
    assert quiet_estimate(2.0, None) == 2.0
    assert not is_busy(None) and not is_busy(BUSY_LOAD / 2) and is_busy(BUSY_LOAD)


def test_thread_waits_count_competing_processes() -> None:
    """As many spinning processes as this process has CPUs, and a spinning thread here: it
    waits for a CPU part of the time, and the waits show up (skipped where Linux does not
    count them)."""
    import os
    import subprocess
    import sys

    if ThreadWaits.start() is None:
        pytest.skip("this system does not count run-queue waits")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass"])
        for _ in os.sched_getaffinity(0)
    ]
    try:
        time.sleep(0.3)  # the hogs are running
        watch = ThreadWaits.start()
        assert watch is not None
        end = time.perf_counter() + 0.8
        while time.perf_counter() < end:
            pass
        load, stall = watch.stop()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert load > BUSY_LOAD and 0 < stall <= 1


def test_the_real_runner_reports_the_load_of_each_timing() -> None:
    with Measurer("llvm", num_threads=1, repeat=2) as measurer:
        (outcome,) = measurer.measure([MeasureInput(matmul, "llvm")])
    assert outcome.error_kind is None
    if ThreadWaits.start() is not None:
        assert outcome.load is not None and outcome.load >= 0 and 0 <= (outcome.stall or 0) <= 1


def _spinning_processes(count: int, seconds: float) -> list:  # noqa: ANN401
    import subprocess
    import sys

    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def test_a_window_knows_whether_another_task_took_its_cpu() -> None:
    """Spinning beside as many spinning processes as there are CPUs, a thread waits for its CPU
    for a large share of the window: not an undisturbed sample."""
    import os

    if ThreadWaits.start() is None:
        pytest.skip("this system does not count run-queue waits")
    hogs = _spinning_processes(len(os.sched_getaffinity(0)), 5)
    try:
        time.sleep(0.3)
        watch = SampleWatch.start()
        began = time.perf_counter()
        while time.perf_counter() < began + 0.5:
            pass
        assert not undisturbed(time.perf_counter() - began, watch.longest_wait())
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_a_short_kernel_timed_beside_another_job_is_timed_quietly() -> None:
    """One core taken by another job for the whole timing, a two-thread kernel far shorter than
    the scheduler's time slice: the samples no other task disturbed are its timing, reported as
    quiet and close to the quiet machine's (before, every sample counted and the timing was
    busy)."""
    import os

    if ThreadWaits.start() is None or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs and a system that counts run-queue waits")
    sch = tir.Schedule(matmul)  # 0.15 ms at two threads on a 2-core Xeon
    i, _j, _k = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    func = sch.func
    with Measurer("llvm", num_threads=2, repeat=20) as measurer:
        (quiet,) = measurer.measure([MeasureInput(func, "llvm")])
        hogs = _spinning_processes(len(os.sched_getaffinity(0)) - 1, 20)
        try:
            time.sleep(0.3)
            (busy,) = measurer.measure([MeasureInput(func, "llvm")])
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    assert quiet.error_kind is None and busy.error_kind is None
    assert not is_busy(busy.load), busy
    assert busy.seconds < 1.5 * quiet.seconds, (busy.seconds, quiet.seconds)


def test_a_cold_first_run_is_no_sample_of_a_fast_kernel(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A fresh measuring worker's first run (its thread pool, its pages) took milliseconds for a
    kernel of tens of microseconds; counted as a sample, with one call per sample after it, the
    short samples were all "disturbed" by a woken thread's wait and the cold run was reported."""
    from metasched.measure import runner
    from metasched.measure.builder import Job, build_program, encode_program

    @T.script
    def scale(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.block("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] * 2.0

    built = build_program(scale, "llvm")
    real_time = built.module.time
    calls: list[int] = []

    def time_with_a_cold_start(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs.get("number", 1))
        if len(calls) == 1:
            return 0.03  # the first run, cold
        return real_time(*args, **kwargs)

    monkeypatch.setattr(built.module, "time", time_with_a_cold_start)
    monkeypatch.setattr(runner, "undisturbed", lambda seconds, wait: seconds > 1e-3)  # as the VM's waits made it
    job = Job(encode_program(scale), "llvm", None, None, 1, 5)
    reply = runner._run_built(built, job, None)
    assert reply["seconds"] < 0.01, reply
    assert max(calls) > 1  # the calls per sample follow from a warm run
