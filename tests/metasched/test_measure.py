"""The measurer: candidates build and run in spawned workers; a failing candidate is a result with
its kind (build, run, crash, timeout, wrong) while the rest of the batch is measured."""

from __future__ import annotations

import concurrent.futures

import pytest

import tir
from metasched.measure import MeasureInput, Measurer

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


def test_each_kind_of_failure_is_recorded_while_the_batch_goes_on() -> None:
    scheduled = tir.Schedule(REFERENCE)
    i, _ = scheduled.get_loops(scheduled.get_block("B"))
    scheduled.parallel(i)
    with Measurer("llvm", num_threads=1, timeout=2.0, repeat=3) as measurer:
        results = measurer.measure(
            [
                MeasureInput(REFERENCE, "llvm", reference=REFERENCE),
                MeasureInput(CRASH, "llvm"),
                MeasureInput(WRONG, "llvm", reference=REFERENCE),
                MeasureInput(HANG, "llvm"),
                MeasureInput(scheduled.func, "llvm", reference=REFERENCE),
            ]
        )
        kinds = [r.error_kind for r in results]
        assert kinds == [None, "crash", "wrong", "timeout", None], [(r.error_kind, r.error_msg) for r in results]
        assert "signal" in results[1].error_msg
        assert "differs from the unscheduled program" in results[2].error_msg
        assert all(r.seconds and r.seconds > 0 for r in (results[0], results[4]))
        assert all(r.build_seconds > 0 for r in results)
        # The pool recovered: the next batch measures normally.
        again = measurer.measure([MeasureInput(REFERENCE, "llvm", reference=REFERENCE)])
        assert again[0].error_kind is None


def test_a_build_error_is_a_result() -> None:
    bad = tir.parse(
        GOOD.replace(
            "A[vi, vj] * 2.0",
            'A[vi, vj] * 2.0 + T.call_llvm_pure_intrin("float32", "llvm.x86.avx512.nonexistent", A[vi, vj])',
        )
    )
    with Measurer("llvm", num_threads=1) as measurer:
        (result,) = measurer.measure([MeasureInput(bad, "llvm")])
    assert result.error_kind == "build" and result.seconds is None and result.error_msg


def test_any_executor_runs_the_batches() -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        measurer = Measurer("llvm", executor=executor, num_threads=1, timeout=2.0)
        results = measurer.measure([MeasureInput(REFERENCE, "llvm", reference=REFERENCE), MeasureInput(CRASH, "llvm")])
    assert [r.error_kind for r in results] == [None, "crash"]


@pytest.mark.parametrize("threads", [1, 2])
def test_timings_are_positive_and_pinned(threads: int) -> None:
    with Measurer("llvm", num_threads=threads, repeat=2) as measurer:
        (result,) = measurer.measure([MeasureInput(REFERENCE, "llvm")])
    assert result.error_kind is None and 0 < result.seconds < 1
