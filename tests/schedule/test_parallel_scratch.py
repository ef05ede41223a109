"""A packed tile computed under a parallel loop is per-iteration scratch: parallel accepts it,
lowering gives each iteration its own copy, and the result is right with several threads."""

from __future__ import annotations

import numpy as np
import pytest

import tir
import tir.script as T
from tir.ir import Allocate, post_order_visit
from tir.schedule import Schedule, ScheduleError
from tir.transform import lower


@T.script
def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def packed_schedule() -> Schedule:
    sch = Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [4, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, k, j1)
    packed = sch.cache_read(block, 2, "global")
    sch.compute_at(packed, j0)
    return sch


def test_parallel_accepts_a_tile_packed_under_the_loop() -> None:
    sch = packed_schedule()
    i0 = sch.get_loops(sch.get_block("C"))[0]
    sch.parallel(i0)
    lowered = lower(sch.func)
    allocations: list[Allocate] = []
    for func in lowered.functions.values():
        post_order_visit(func.body, lambda n: allocations.append(n) if isinstance(n, Allocate) else None)
    # The pack moved inside the loop (into the outlined parallel body) and shrank to one panel.
    assert [a.buffer.shape[0].value for a in allocations] == [64 * 16]  # type: ignore[attr-defined]
    module = tir.build(sch.func)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64), dtype=np.float32)
    b = rng.standard_normal((64, 64), dtype=np.float32)
    for threads in (1, 2, 3):
        c = np.zeros((64, 64), np.float32)
        module.set_num_threads(threads)
        module(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@T.script
def shared_scratch(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32"), D: T.Buffer((16,), "float32")):
    S = T.alloc_buffer((16,), "float32")
    for i in range(4):
        for j in range(16):
            with T.block("S"):
                vj = T.spatial_axis(16, j)
                S[vj] = A[0, vj] * 2.0
        for j in range(16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = S[vj] + A[vi, vj]
    for j in range(16):
        with T.block("D"):
            vj = T.spatial_axis(16, j)
            D[vj] = S[vj]


def test_parallel_refuses_scratch_that_is_also_read_outside_the_loop() -> None:
    sch = Schedule(shared_scratch)
    (i, _) = sch.get_loops(sch.get_block("S"))
    with pytest.raises(ScheduleError, match="different iterations run different instances of block 'S'"):
        sch.parallel(i)
    assert tir.structural_equal(sch.func, shared_scratch)
