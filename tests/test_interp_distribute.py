"""Loop distribution in the interpreter (tir.interp.distribute): copies hoisted and copy-backs
sunk out of GPU-style nests so the batched evaluator sees whole nests; bit-identical to the
scalar interpreter, and refused where a read could see a different value."""

from __future__ import annotations

import numpy as np
import pytest

import tir
import tir.script as T
from tir.interp import batched, distribute
from tir.ir import For
from tir.schedule import Schedule


def _matmul(n: int) -> tir.PrimFunc:
    @T.script
    def matmul(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return matmul


def _gpu_tiled(n: int) -> Schedule:
    """TVM's cuda_matmul tiling (blockIdx, vthread, threadIdx, k split by 8) with A and B read
    at k0 into shared memory and C written back through shared memory at the thread loop."""
    sch = Schedule(_matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    by, vy, ty, i3 = sch.split(i, [None, 2, 8, 4])
    bx, vx, tx, j3 = sch.split(j, [None, 2, 8, 4])
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(by, bx, vy, vx, ty, tx, k0, k1, i3, j3)
    for loop, tag in [(by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread.y"), (vx, "vthread.x")]:
        sch.bind(loop, tag)
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.read_at(k0, block, 1, "shared")
    sch.read_at(k0, block, 2, "shared")
    sch.write_at(tx, block, 0, "shared")
    return sch


def _run(func: tir.PrimFunc, args: list[np.ndarray], batch: bool, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    monkeypatch.setenv("TIR_INTERP_BATCH", "1" if batch else "0")
    copies = [a.copy() for a in args]
    tir.interpret(func, *copies)
    return copies[-1]


def _batched_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """From now on, what each batched run returns (True: it ran; False: the scalar code did)."""
    results: list[bool] = []
    run_tuples = batched.run_tuples

    def counted(*args: object) -> bool:
        results.append(run_tuples(*args))  # type: ignore[arg-type]
        return results[-1]

    monkeypatch.setattr(batched, "run_tuples", counted)
    return results


def test_a_gpu_tiled_matmul_runs_as_whole_nests_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    func = _gpu_tiled(64).func
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 64, 64), dtype=np.float32)
    args = [a, b, np.zeros((64, 64), np.float32)]
    scalar = _run(func, args, False, monkeypatch)
    fast = _run(func, args, True, monkeypatch)
    np.testing.assert_array_equal(fast, scalar)
    np.testing.assert_allclose(fast, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # Every block (two copies in, the product, the copy out) runs as one batched nest, and no
    # scalar fallback is reached: four batched runs, each accepted.
    results = _batched_runs(monkeypatch)
    _run(func, args, True, monkeypatch)
    assert results == [True] * 4


def _outer_loop(func: tir.PrimFunc) -> For:
    node = func.body.block.body
    assert isinstance(node, For)
    return node


def test_a_read_outside_what_the_copy_wrote_that_iteration_keeps_the_nest() -> None:
    # X[0:4] is copied each iteration, but the reader reads X[i] for i up to 7: an element
    # never written. Hoisting would hand it a value; the nest stays, and the read is met as
    # the scalar interpreter meets it.
    @T.script
    def overread(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        X = T.alloc_buffer((8,), "float32")
        for i in range(8):
            for j in range(4):
                with T.block("X"):
                    vj = T.remap("S", j)
                    X[vj] = A[vj]
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = X[vi]

    facts = distribute.function_facts(overread)
    assert distribute.distribute(_outer_loop(overread), facts) is None


def test_a_copy_within_what_is_read_that_iteration_is_hoisted() -> None:
    @T.script
    def tiles(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
        X = T.alloc_buffer((8, 4), "float32")
        for i in range(8):
            for j in range(4):
                with T.block("X"):
                    vi, vj = T.remap("SS", i, j)
                    X[vi, vj] = A[vi, vj]
            for j in range(4):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = X[vi, vj] * 2.0

    parts = distribute.distribute(_outer_loop(tiles), distribute.function_facts(tiles))
    assert parts is not None and len(parts) == 2


def test_a_copy_whose_source_is_written_is_not_hoisted() -> None:
    # A is written inside the nest: the copy's values would depend on when it runs.
    @T.script
    def source_changes(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
        X = T.alloc_buffer((8, 4), "float32")
        for i in range(8):
            for j in range(4):
                with T.block("X"):
                    vi, vj = T.remap("SS", i, j)
                    X[vi, vj] = A[vi, vj]
            for j in range(4):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, j)
                    B[vi, vj] = X[vi, vj] * 2.0
            for j in range(4):
                with T.block("A"):
                    vi, vj = T.remap("SS", i, j)
                    A[(vi + 1) % 8, vj] = B[vi, vj]

    assert distribute.distribute(_outer_loop(source_changes), distribute.function_facts(source_changes)) is None


def test_a_last_statement_reading_what_a_later_iteration_writes_is_not_sunk() -> None:
    # Iteration i writes X[i + 1]; the last statement reads X[i], written by iteration i - 1:
    # run after the whole loop it would still see it, but the proof asks that each read lie in
    # what the same iteration writes, and refuses.
    @T.script
    def shifted(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        X = T.alloc_buffer((9,), "float32")
        for i in range(8):
            with T.block("X"):
                vi = T.remap("S", i)
                X[vi + 1] = A[vi] + 1.0
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = X[vi]

    assert distribute.distribute(_outer_loop(shifted), distribute.function_facts(shifted)) is None


@T.script
def tvm_write_at_c(
    A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")
):
    # TVM's own form of the schedule above (its test_read_write_at expected program, one 64x64
    # tile): copy blocks with loops inside, and every thread writing the whole tile back.
    A_shared = T.alloc_buffer((64, 64), "float32", scope="shared")
    B_shared = T.alloc_buffer((64, 64), "float32", scope="shared")
    C_shared = T.alloc_buffer((64, 64), "float32", scope="shared")
    for vy in T.thread_binding(2, thread="vthread.y"):
        for vx in T.thread_binding(2, thread="vthread.x"):
            for ty in T.thread_binding(8, thread="threadIdx.y"):
                for tx in T.thread_binding(8, thread="threadIdx.x"):
                    for k0 in range(8):
                        with T.block("A_shared"):
                            v1 = T.remap("S", k0)
                            T.reads(A[0:64, v1 * 8 : v1 * 8 + 8])
                            T.writes(A_shared[0:64, v1 * 8 : v1 * 8 + 8])
                            for ax0, ax1 in T.grid(64, 8):
                                A_shared[ax0, v1 * 8 + ax1] = A[ax0, v1 * 8 + ax1]
                        with T.block("B_shared"):
                            v0 = T.remap("S", k0)
                            T.reads(B[v0 * 8 : v0 * 8 + 8, 0:64])
                            T.writes(B_shared[v0 * 8 : v0 * 8 + 8, 0:64])
                            for ax0, ax1 in T.grid(8, 64):
                                B_shared[v0 * 8 + ax0, ax1] = B[v0 * 8 + ax0, ax1]
                        for k1, i, j in T.grid(8, 4, 4):
                            with T.block("C"):
                                vi = T.spatial_axis(64, vy * 32 + ty * 4 + i)
                                vj = T.spatial_axis(64, vx * 32 + tx * 4 + j)
                                vk = T.reduce_axis(64, k0 * 8 + k1)
                                with T.init():
                                    C_shared[vi, vj] = 0.0
                                C_shared[vi, vj] = C_shared[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
                    with T.block("C_shared"):
                        T.reads(C_shared[0:64, 0:64])
                        T.writes(C[0:64, 0:64])
                        for ax0, ax1 in T.grid(64, 64):
                            C[ax0, ax1] = C_shared[ax0, ax1]


def test_tvm_copy_blocks_and_a_whole_tile_copy_back_run_batched_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 64, 64), dtype=np.float32)
    args = [a, b, np.zeros((64, 64), np.float32)]
    scalar = _run(tvm_write_at_c, args, False, monkeypatch)
    results = _batched_runs(monkeypatch)
    fast = _run(tvm_write_at_c, args, True, monkeypatch)
    np.testing.assert_array_equal(fast, scalar)
    np.testing.assert_allclose(fast, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    # The copy-back runs once after the tile's threads (its last execution is the one that
    # shows), then every block as one batched nest.
    assert results == [True] * 4


@pytest.mark.parametrize("seed", range(16))
def test_copies_placed_at_random_loops_run_bit_identical(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fuzz kernels tiled at random, then copies (cache_read / cache_write at a random loop,
    # read_at / write_at) in random scopes: what distribution and batching run must equal the
    # scalar interpreter bit for bit, errors included.
    import random
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from tests.fuzz.actions import ACTIONS
    from tests.fuzz.kernels import KERNELS
    from tests.schedule.schedule_testing import random_args
    from tir.schedule import ScheduleError

    rng = random.Random(seed)
    name = rng.choice(sorted(KERNELS))
    sch = Schedule(KERNELS[name], seed=seed)
    for _ in range(3):
        try:
            ACTIONS[rng.choice(["split", "reorder", "sample_perfect_tile+split", "fuse"])](sch, rng)
        except ScheduleError:
            pass
    for _ in range(4):
        names = [part.split('"')[0] for part in sch.func.script().split('T.block("')[1:]]
        block = sch.get_block(rng.choice(names))
        loops = sch.get_loops(block)
        if not loops:
            continue
        loop, scope = rng.choice(loops), rng.choice(["shared", "local", "global"])
        try:
            kind = rng.choice(["read", "write", "read_at", "write_at"])
            if kind == "read":
                sch.compute_at(sch.cache_read(block, rng.randrange(2), scope), loop)
            elif kind == "write":
                sch.reverse_compute_at(sch.cache_write(block, 0, scope), loop)
            elif kind == "read_at":
                sch.read_at(loop, block, rng.randrange(2), scope)
            else:
                sch.write_at(loop, block, 0, scope)
        except (ScheduleError, IndexError):
            pass
    args = random_args(sch.func, seed)

    def outcome(batch: bool) -> object:
        monkeypatch.setenv("TIR_INTERP_BATCH", "1" if batch else "0")
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        try:
            tir.interpret(sch.func, *copies)
        except Exception as error:  # the same error both ways
            return f"{type(error).__name__}: {error}"
        return copies

    scalar, fast = outcome(False), outcome(True)
    if isinstance(scalar, str) or isinstance(fast, str):
        assert fast == scalar
        return
    for want, got in zip(scalar, fast):  # type: ignore[call-overload]
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)
