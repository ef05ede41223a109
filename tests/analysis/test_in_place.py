"""``in_place_pairs``: which outputs may be written over an input, and the refusals."""

from __future__ import annotations

import numpy as np

import tir
import tir.script as T
from tir.analysis import in_place_pairs
from tir.schedule import Schedule


@T.script
def matmul_residual(
    A: T.Buffer((16, 8), "float32"),
    B: T.Buffer((8, 32), "float32"),
    R: T.Buffer((16, 32), "float32"),
    Y: T.Buffer((16, 32), "float32"),
):
    C = T.alloc_buffer((16, 32), "float32")
    for i, j, k in T.grid(16, 32, 8):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 32):
        with T.block("Y"):
            vi, vj = T.remap("SS", i, j)
            Y[vi, vj] = T.max(C[vi, vj] + R[vi, vj], 0.0)


@T.script
def shifted_residual(R: T.Buffer((16, 32), "float32"), Y: T.Buffer((16, 32), "float32")):
    for i, j in T.grid(16, 32):
        with T.block("Y"):
            vi, vj = T.remap("SS", i, j)
            Y[vi, vj] = R[vi, (vj + 1) % 32] + 1.0


@T.script
def output_read_back(R: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32"), Z: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("Y"):
            vi = T.remap("S", i)
            Y[vi] = R[vi] * 2.0
    for i in range(16):
        with T.block("Z"):
            vi = T.remap("S", i)
            Z[vi] = Y[vi] + 1.0


@T.script
def input_read_twice(R: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32"), Z: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("Y"):
            vi = T.remap("S", i)
            Y[vi] = R[vi] * 2.0
    for i in range(16):
        with T.block("Z"):
            vi = T.remap("S", i)
            Z[vi] = R[vi] + 1.0


@T.script
def each_element_twice(R: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32")):
    for _pass, i in T.grid(2, 16):
        with T.block("Y"):
            vi = T.spatial_axis(16, i)
            Y[vi] = R[vi] * 2.0


def test_residual_epilogue_may_write_over_its_input() -> None:
    assert in_place_pairs(matmul_residual) == [(2, 3)]


def test_refusals() -> None:
    assert in_place_pairs(shifted_residual) == []  # reads a neighbour another instance overwrote
    assert in_place_pairs(output_read_back) == []  # Y is read back; Z reads Y, but Y is written too
    assert in_place_pairs(input_read_twice) == []  # R read by two blocks
    assert in_place_pairs(each_element_twice) == []  # the second pass would read what the first wrote


def test_epilogue_per_tile_after_scheduling_and_the_result_written_over_the_input() -> None:
    sch = Schedule(matmul_residual)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [4, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(sch.get_block("Y"), j0)
    assert in_place_pairs(sch.func) == [(2, 3)]
    # Run with Y and R one buffer: the result equals the separate-buffer one.
    rng = np.random.default_rng(0)
    a, b, r = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (8, 32), (16, 32)))
    expected = np.maximum(a @ b + r, 0.0)
    module = tir.build(sch.func, "llvm")
    shared = r.copy()
    values = module.check_arguments([a, b, shared, np.empty_like(shared)])
    values[3] = values[2]  # the public call refuses arrays that share memory; a model's plan does this
    module._run(module.entry_name, values)
    np.testing.assert_allclose(shared, expected, rtol=1e-5, atol=1e-5)


@T.script
def batch_of_one(R: T.Buffer((1, 16), "float32"), Y: T.Buffer((1, 16), "float32")):
    for n, i in T.grid(1, 16):
        with T.block("Y"):
            vn, vi = T.remap("SS", n, i)
            Y[vn, vi] = R[0, vi] + 1.0


def test_an_iterator_of_extent_one_is_its_minimum() -> None:
    assert in_place_pairs(batch_of_one) == [(0, 1)]
