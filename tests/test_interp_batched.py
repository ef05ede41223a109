"""Whole-nest batching in the interpreter (tir.interp.batched): bit-identical to the scalar
interpreter on every fuzz kernel (scheduled at random too), falls back for what it cannot
prove, reports errors as the scalar code does, and runs TVM-sized programs in seconds."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tir
import tir.script as T
from tir.interp import batched

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fuzz.actions import ACTIONS  # noqa: E402
from tests.fuzz.kernels import KERNELS  # noqa: E402
from tests.schedule.schedule_testing import random_args  # noqa: E402
from tir.schedule import Schedule, ScheduleError  # noqa: E402


def _run(func: tir.PrimFunc, args: list[object], batch: bool, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    monkeypatch.setenv("TIR_INTERP_BATCH", "1" if batch else "0")
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.interpret(func, *copies)
    return copies


def _assert_identical(func: tir.PrimFunc, monkeypatch: pytest.MonkeyPatch, seed: int = 0) -> None:
    args = random_args(func, seed)
    scalar = _run(func, args, False, monkeypatch)
    fast = _run(func, args, True, monkeypatch)
    for want, got in zip(scalar, fast):
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)  # bit for bit, NaN where NaN


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_batched_is_bit_identical_on_every_fuzz_kernel(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_identical(KERNELS[name], monkeypatch)


@pytest.mark.parametrize("seed", range(12))
def test_batched_is_bit_identical_after_random_schedules(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    name = rng.choice(sorted(KERNELS))
    sch = Schedule(KERNELS[name], seed=seed)
    kinds = sorted(ACTIONS)
    for _ in range(8):
        call = ACTIONS[rng.choice(kinds)](sch, rng)
        if call is None:
            continue
        try:
            call.run(sch)
        except (ScheduleError, TypeError, ValueError, IndexError):
            continue
    _assert_identical(sch.func, monkeypatch, seed)


@T.script
def collide(A: T.Buffer((64,), "float32"), B: T.Buffer((32,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi // 2] = A[vi]


@T.script
def past_the_end(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi + 1]


@T.script
def padded(A: T.Buffer((62,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = T.if_then_else(1 <= vi and vi < 63, A[vi - 1], T.float32(0))


def test_lanes_writing_one_element_fall_back_to_the_scalar_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # The last write of each element wins, as in the scalar code: lanes cannot be batched.
    _assert_identical(collide, monkeypatch)
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(32, np.float32)
    tir.interpret(collide, a, b)
    np.testing.assert_array_equal(b, a[1::2])


def test_an_out_of_bounds_read_is_reported_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIR_INTERP_BATCH", "1")
    with pytest.raises(IndexError, match="A"):
        tir.interpret(past_the_end, np.zeros(64, np.float32), np.zeros(64, np.float32))


def test_only_the_taken_side_of_if_then_else_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_identical(padded, monkeypatch)


def test_plan_refuses_a_block_reading_its_output_elsewhere() -> None:
    @T.script
    def shift(A: T.Buffer((64,), "float32")):
        for i in range(63):
            with T.block("A"):
                vi = T.remap("S", i)
                A[vi + 1] = A[vi] + 1.0

    loop = shift.body.block.body
    assert batched.plan(loop) is None


def test_a_large_matmul_runs_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    # TVM's schedule tests use programs of this size: one Python step per instance would take
    # minutes (about 0.5 us each: 2^27 instances).
    @T.script
    def matmul(A: T.Buffer((512, 512), "float32"), B: T.Buffer((512, 512), "float32"), C: T.Buffer((512, 512), "float32")):
        for i, j, k in T.grid(512, 512, 512):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    monkeypatch.setenv("TIR_INTERP_BATCH", "1")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 512, 512), dtype=np.float32)
    c = np.zeros((512, 512), np.float32)
    start = time.perf_counter()
    tir.interpret(matmul, a, b, c)
    elapsed = time.perf_counter() - start
    expected = np.zeros((512, 512), np.float32)
    for k in range(512):  # the interpreter's order: k ascending, rounded in float32 each step
        expected = expected + np.outer(a[:, k], b[k, :]).astype(np.float32)
    np.testing.assert_array_equal(c, expected)
    assert elapsed < 30.0, f"512^3 took {elapsed:.1f} s"


def test_chunked_lanes_keep_the_scalar_order_when_two_points_share_an_element(monkeypatch: pytest.MonkeyPatch) -> None:
    # vi and vi + 64 write one element, and the reduction loop is outermost: the scalar order
    # interleaves their inits and updates. Run in chunks of rows, each chunk through all its
    # reduction steps, the element would end with another value. Such a nest is not chunked,
    # and its run-time check sends it to the scalar code.
    @T.script
    def folded(A: T.Buffer((128, 4, 16), "float32"), C: T.Buffer((64, 4), "float32")):
        for k, i, j in T.grid(16, 128, 4):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi % 64, vj] = 0.0
                C[vi % 64, vj] = C[vi % 64, vj] + A[vi, vj, vk] * 1.5

    monkeypatch.setattr(batched, "CHUNK_LANES", 32)
    _assert_identical(folded, monkeypatch)


def test_a_nest_bound_to_gpu_threads_runs_over_its_iterators_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    @T.script
    def tiled(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
        for by in T.thread_binding(2, thread="blockIdx.y"):
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                for k0, i, j, k1 in T.grid(8, 32, 8, 8):
                    with T.block("C"):
                        vi = T.spatial_axis(64, by * 32 + i)
                        vj = T.spatial_axis(64, tx * 8 + j)
                        vk = T.reduce_axis(64, k0 * 8 + k1)
                        with T.init():
                            C[vi, vj] = 0.0
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    loop = tiled.body.block.body
    found = batched.plan(loop)
    assert found is not None and found.iterator_box == ((0, 64), (0, 64), None)
    monkeypatch.setattr(batched, "CHUNK_LANES", 256)  # four chunks of 16 rows
    _assert_identical(tiled, monkeypatch)
