"""The measurer: candidates build and run in spawned workers; a failing candidate is a result with
its kind (build, run, crash, timeout, wrong) while the rest of the batch is measured."""

from __future__ import annotations

import concurrent.futures
import pickle
import subprocess
import sys
import textwrap
import time

import pytest

import tir
from metasched.measure import MeasureInput, Measurer
from metasched.measure.builder import decode_program, encode_program
from metasched.measure.executors import LocalPool, close_local_pools
from tir.ir import Var
from tir.ir.functor import post_order_visit

GOOD = """
import tir.script as T
@T.script
def scale(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for i, j in T.grid(64, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
"""
REFERENCE = tir.parse(GOOD)
WRONG = tir.parse(GOOD.replace("* 2.0", "* 2.5"))
# Reads A at an index computed from the data at run time (no validator can see it): segfaults.
CRASH = tir.parse(
    GOOD.replace("B[vi, vj] = A[vi, vj] * 2.0", 'B[vi, vj] = A[T.cast(A[vi, vj] * 1000000000.0, "int32"), vj] * 2.0')
)
# 2^31 - 1 repetitions of the whole program: far past any timeout.
HANG = tir.parse(GOOD.replace("for i, j in T.grid(64, 64):", "for r, i, j in T.grid(2147483647, 64, 64):"))


@pytest.fixture(scope="module")
def measurer():  # noqa: ANN201 - one pool for the tests below: workers start once (a second or two each)
    with Measurer("llvm", num_threads=1, timeout=1.0, repeat=3, reference_timeout=1.0, workers=2) as shared:
        yield shared
    close_local_pools()  # the pools the executor tests left in this process


def test_each_kind_of_failure_is_recorded_while_the_batch_goes_on(measurer: Measurer) -> None:
    scheduled = tir.Schedule(REFERENCE)
    i, _ = scheduled.get_loops(scheduled.get_block("B"))
    scheduled.parallel(i)
    results = measurer.measure(
        [
            MeasureInput(REFERENCE, "llvm", reference=REFERENCE),
            MeasureInput(CRASH, "llvm"),
            MeasureInput(WRONG, "llvm", reference=REFERENCE),
            MeasureInput(HANG, "llvm"),
            MeasureInput(scheduled.func, "llvm", reference=REFERENCE),
            MeasureInput(CRASH, "llvm"),  # workers die three times: lost modules are rebuilt each time
            MeasureInput(REFERENCE, "llvm", reference=REFERENCE),
        ]
    )
    kinds = [r.error_kind for r in results]
    assert kinds == [None, "crash", "wrong", "timeout", None, "crash", None], [
        (r.error_kind, r.error_msg) for r in results
    ]
    assert "SIGSEGV" in results[1].error_msg
    assert "more than 1 s" in results[3].error_msg
    assert "differs from the unscheduled program" in results[2].error_msg
    assert all(r.seconds and r.seconds > 0 for r in (results[0], results[4], results[6]))
    # (the last is the first program again: its builder's cache may have it, build_seconds 0)
    assert all(r.build_seconds > 0 for r in results[:6])
    # The pool recovered: the next batch measures normally.
    again = measurer.measure([MeasureInput(REFERENCE, "llvm", reference=REFERENCE)])
    assert again[0].error_kind is None


def test_a_run_far_slower_than_the_best_is_stopped_early() -> None:
    # Once a best time is known, a run may take 20x it (at least 1 s) on top of twice the
    # workload's shortest run, not the whole timeout.
    with Measurer("llvm", num_threads=1, timeout=60.0, workers=2) as measurer:
        start = time.monotonic()
        results = measurer.measure(
            [MeasureInput(REFERENCE, "llvm", reference=REFERENCE), MeasureInput(HANG, "llvm")]
            + [MeasureInput(REFERENCE, "llvm", reference=REFERENCE)] * 4
        )
        elapsed = time.monotonic() - start
    kinds = [r.error_kind for r in results]
    assert kinds == [None, "timeout", None, None, None, None], [(r.error_kind, r.error_msg) for r in results]
    assert "shortest run and 20x the best so far" in results[1].error_msg
    assert elapsed < 30, elapsed


def test_the_relative_limit_counts_the_workloads_fixed_costs() -> None:
    # A GPU GEMM's run costs seconds whatever its kernel's speed (copying and checking the
    # operands): the limit adds twice the shortest run of that workload, and a workload with no
    # run yet gets the whole timeout.
    pool = LocalPool(workers=1, timeout=60.0)
    assert pool._run_limit("gemm", best=0.0005) == 60.0
    pool._note_run("gemm", 1.6)
    pool._note_run("gemm", 1.5)
    assert pool._run_limit("gemm", best=0.0005) == pytest.approx(2 * 1.5 + 1.0)
    assert pool._run_limit("gemm", best=0.2) == pytest.approx(2 * 1.5 + 20 * 0.2)
    assert pool._run_limit("conv", best=0.0005) == 60.0
    pool._note_run("conv", 40.0)
    assert pool._run_limit("conv", best=0.5) == 60.0  # never beyond the timeout


def test_a_cold_first_run_does_not_pass_for_a_slow_candidate(measurer: Measurer) -> None:
    # The second candidate is compared with the first's time; its own first run is cold (a
    # hundred times slower for a kernel of a microsecond) and must not be taken as its time.
    first, second = measurer.measure([MeasureInput(REFERENCE, "llvm"), MeasureInput(REFERENCE, "llvm")])
    assert second.seconds < 10 * first.seconds and first.seconds < 10 * second.seconds, (first, second)


def test_a_build_error_is_a_result(measurer: Measurer) -> None:
    bad = tir.parse(
        GOOD.replace(
            "A[vi, vj] * 2.0",
            'A[vi, vj] * 2.0 + T.call_llvm_pure_intrin("float32", "llvm.x86.avx512.nonexistent", A[vi, vj])',
        )
    )
    (result,) = measurer.measure([MeasureInput(bad, "llvm")])
    assert result.error_kind == "build" and result.seconds is None and result.error_msg


def test_any_executor_runs_the_batches() -> None:
    # Both executor tests measure with the same options: the second reuses this process's pool.
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        measurer = Measurer("llvm", executor=executor, num_threads=2, timeout=2.0, workers=1)
        results = measurer.measure([MeasureInput(REFERENCE, "llvm", reference=REFERENCE), MeasureInput(CRASH, "llvm")])
    assert [r.error_kind for r in results] == [None, "crash"]
    assert 0 < results[0].seconds < 1  # with 2 threads


def test_any_executor_runs_the_batches_in_chunks() -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as executor:
        measurer = Measurer("llvm", executor=executor, num_threads=2, timeout=2.0, workers=1, chunk_size=1)
        results = measurer.measure([MeasureInput(WRONG, "llvm", reference=REFERENCE), MeasureInput(REFERENCE, "llvm")])
    assert [r.error_kind for r in results] == ["wrong", None]


# Accumulates into its output without an init: the output is read before it is written, so the
# outputs of the reference and of the candidates start from random values instead of NaN.
ACCUMULATE = """
import tir.script as T
@T.script
def accumulate(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]
"""


def test_a_reference_that_reads_its_output_is_checked_from_random_outputs(measurer: Measurer) -> None:
    reference = tir.parse(ACCUMULATE)
    scheduled = tir.Schedule(reference)
    _, k = scheduled.get_loops(scheduled.get_block("B"))
    scheduled.unroll(k)
    wrong = tir.parse(ACCUMULATE.replace("+ A[vi, vk]", "+ A[vi, vk] * 2.0"))
    results = measurer.measure(
        [MeasureInput(f, "llvm", reference=reference) for f in (reference, scheduled.func, wrong)]
    )
    assert [r.error_kind for r in results] == [None, None, "wrong"], [r.error_msg for r in results]


def test_a_failing_reference_is_reported_on_its_candidates_only(measurer: Measurer) -> None:
    # The unscheduled program gets its own time limit (it may be far slower than any candidate).
    results = measurer.measure([MeasureInput(REFERENCE, "llvm", reference=HANG), MeasureInput(REFERENCE, "llvm")])
    assert [r.error_kind for r in results] == ["run", None]
    assert "cannot be checked" in results[0].error_msg and "more than 1 s" in results[0].error_msg


def test_an_interrupted_batch_leaves_no_stale_replies(measurer: Measurer, monkeypatch) -> None:  # noqa: ANN001
    from metasched.measure.executors import LocalPool

    def interrupted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(LocalPool, "_run", interrupted)
        with pytest.raises(KeyboardInterrupt):
            measurer.measure([MeasureInput(REFERENCE, "llvm")])
    results = measurer.measure([MeasureInput(WRONG, "llvm", reference=REFERENCE), MeasureInput(REFERENCE, "llvm")])
    assert [r.error_kind for r in results] == ["wrong", None]


def test_candidates_travel_pickled_and_printed_programs_still_decode() -> None:
    data = encode_program(CRASH)
    copy = pickle.loads(data)
    assert isinstance(data, bytes) and tir.structural_equal(copy, CRASH)

    def variables(func: tir.PrimFunc) -> tuple[int, int]:  # (uses, distinct objects)
        found: list[int] = []
        post_order_visit(func.body, lambda node: found.append(id(node)) if isinstance(node, Var) else None)
        return len(found), len(set(found))

    assert variables(copy) == variables(CRASH)  # a variable's uses are still one object
    assert tir.structural_equal(decode_program(CRASH.script()), CRASH)


class _BrokenExecutor(concurrent.futures.Executor):
    def submit(self, fn, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_exception(ConnectionError("the scheduler went away"))
        return future


def test_a_failing_executor_task_is_a_result() -> None:
    (result,) = Measurer("llvm", executor=_BrokenExecutor()).measure([MeasureInput(REFERENCE, "llvm")])
    assert result.error_kind == "crash" and "the scheduler went away" in result.error_msg


def test_a_script_without_a_main_guard_measures(tmp_path) -> None:  # noqa: ANN001
    # Workers are fresh interpreters: they do not re-run the caller's script.
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import tir
            from metasched.measure import MeasureInput, Measurer
            print("script ran", flush=True)
            func = tir.parse({GOOD!r})
            print(Measurer("llvm", num_threads=1, workers=1).measure([MeasureInput(func, "llvm")])[0].error_kind)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["script", "ran", "None"], done.stderr[-2000:]


DENSE_WITH_WEIGHTS = """
@T.prim_func
def dense(X: T.Buffer((4, 8), "float32"), W: T.Buffer((8, 16), "float32"), bias: T.Buffer((16,), "float32"),
          Y: T.Buffer((4, 16), "float32")):
    T.func_attr({"layout_free_buffers": [1, "bias"]})
    for i, j, k in T.grid(4, 16, 8):
        with T.block("Y"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                Y[vi, vj] = bias[vj]
            Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vk, vj]
"""


def test_cold_timing_reads_the_activations_back(monkeypatch) -> None:  # noqa: ANN001
    """With ``flush_cache`` only the weights (layout-free, by position or name) start cold: the
    other inputs are read back after each eviction, the outputs are not."""
    from metasched.measure import builder, runner

    func = tir.parse(DENSE_WITH_WEIGHTS)
    arrays, outputs = runner.make_arguments(func)
    warmed = runner._activations(func, arrays, outputs)
    assert [id(a) for a in warmed] == [id(arrays[0])]
    read = []
    monkeypatch.setattr(runner, "_activations", lambda f, a, o: [_Spy(read)])
    monkeypatch.setattr(runner, "evict_caches", lambda: read.append("evict"))
    job = builder.Job(encode_program(func), "llvm", None, None, num_threads=1, repeat=3, flush_cache=True)
    assert "error_kind" not in builder.build_job(12, job)
    assert runner.run_job(12, job, None)["seconds"] > 0
    assert read == ["evict", "read"] * 3


class _Spy:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def sum(self) -> None:
        self.log.append("read")


def test_flush_cache_times_every_run_after_an_eviction(monkeypatch) -> None:  # noqa: ANN001
    """``flush_cache``: each timed run follows an eviction of the caches (run here in-process;
    the Measurer passes the flag to its workers in the Job)."""
    from metasched.measure import builder, runner

    evictions = []
    monkeypatch.setattr(runner, "evict_caches", lambda: evictions.append(1))
    job = builder.Job(encode_program(REFERENCE), "llvm", None, None, num_threads=1, repeat=4, flush_cache=True)
    assert "error_kind" not in builder.build_job(11, job)
    reply = runner.run_job(11, job, None)
    assert reply["seconds"] > 0 and len(evictions) == 4
    assert Measurer("llvm", flush_cache=True).flush_cache
    assert runner.last_level_cache_bytes() >= 1 << 20
    monkeypatch.undo()
    runner.evict_caches()  # the real one: reads a buffer twice the last-level cache
    assert runner._EVICTION is not None and runner._EVICTION.nbytes >= 16 << 20


def test_reference_of_a_gpu_target_is_computed_on_the_host() -> None:
    """The unscheduled program binds no thread, so it cannot build for a GPU: the reference a
    CUDA candidate is checked against comes from the host CPU (default schedule), and equals
    the unscheduled program's outputs there."""
    import numpy as np

    import tir.script as T
    from metasched.measure.runner import compute_reference, make_arguments

    @T.script
    def gemm(A: T.Buffer((64, 64), "float16"), B: T.Buffer((64, 64), "float16"), C: T.Buffer((64, 64), "float32")):
        for i, j, k in T.grid(64, 64, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "float32") * T.cast(B[vk, vj], "float32")

    reference = compute_reference(encode_program(gemm), "cuda -arch=sm_80")
    arrays, _ = make_arguments(gemm, nan_outputs=True)
    want = arrays[0].astype(np.float32) @ arrays[1].astype(np.float32)
    np.testing.assert_allclose(reference.outputs[0], want, rtol=1e-5, atol=1e-5)


def test_the_best_time_that_cuts_a_run_short_is_the_same_workloads(measurer: Measurer, monkeypatch) -> None:  # noqa: ANN001
    """The tuner's first batch holds every task's default schedule: a fast task's time must not
    make another task's candidate "far slower" and timed once (cold)."""
    other = tir.parse(GOOD.replace("(64, 64)", "(128, 64)").replace("T.grid(64, 64)", "T.grid(128, 64)"))
    bests: list[tuple[str | None, float | None]] = []
    real_run = LocalPool._run

    def watched(self, worker, index, job, limit):  # noqa: ANN001, ANN202
        bests.append((job.reference_key, job.best))
        return real_run(self, worker, index, job, limit)

    monkeypatch.setattr(LocalPool, "_run", watched)
    results = measurer.measure(
        [
            MeasureInput(REFERENCE, "llvm", reference=REFERENCE),
            MeasureInput(other, "llvm", reference=other),
            MeasureInput(REFERENCE, "llvm", reference=REFERENCE),
        ]
    )
    assert all(r.error_kind is None for r in results)
    (first_key, first_best), (other_key, other_best), (again_key, again_best) = bests
    assert first_key != other_key and first_key == again_key
    assert first_best is None and other_best is None  # the other workload starts with no best
    assert again_best == results[0].seconds  # the same workload's best so far
