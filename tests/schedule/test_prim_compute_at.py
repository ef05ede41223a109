"""compute_at: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError
from tir.schedule.primitives.compute_location import compute_location_candidates

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
from conv2d_nhwc import conv2d_nhwc  # noqa: E402


@T.script
def stencil(A: T.Buffer((17,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(17):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + B[vi + 1]


@T.script
def chain(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def matmul_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    As = T.alloc_buffer((16, 16), "float32")
    C = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("As"):
            vi, vj = T.remap("SS", i, j)
            As[vi, vj] = A[vi, vj] * 2.0
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += As[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)


# ---------------------------------------------------------------- positive


def test_compute_at_stencil_recomputes_overlap(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(stencil)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    check_schedule(sch, stencil, golden, "schedule/compute_at_stencil")
    assert sch.get_loop_node(sch.get_loops(sch.get_block("B"))[1]).extent.value == 2


def test_compute_at_inner_loop_drops_unit_loops(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(chain)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j)
    check_schedule(sch, chain, golden, "schedule/compute_at_chain_inner")
    assert len(sch.get_loops(sch.get_block("B"))) == 2


def test_compute_at_preserve_unit_loops(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(chain)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j, preserve_unit_loops=True)
    check_schedule(sch, chain, golden, "schedule/compute_at_chain_unit_loops")
    assert len(sch.get_loops(sch.get_block("B"))) == 4


def test_compute_at_elementwise_producer_of_matmul(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("As"), i)
    check_schedule(sch, matmul_relu, golden, "schedule/compute_at_matmul_row")


def test_compute_at_reduction_producer_keeps_its_reduction_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    _, j = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), j)
    sch.compute_at(sch.get_block("As"), j)
    check_schedule(sch, matmul_relu, golden, "schedule/compute_at_matmul_reduction")
    # The reduction loop is regenerated inside, over the whole reduction domain.
    loops = sch.get_loops(sch.get_block("C"))
    assert [sch.get_loop_node(loop).extent.value for loop in loops] == [16, 16, 16]


def test_compute_at_split_loop_clips_to_the_domain(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    _, i1 = sch.split(i, [None, 5])
    sch.compute_at(sch.get_block("As"), i1)
    check_schedule(sch, matmul_relu, golden, "schedule/compute_at_split_predicate")
    assert "T.where(i_0 * 5 + i_1 < 16)" in sch.func.script()


def test_compute_at_moves_deeper_twice(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    block = sch.get_block("As")
    sch.compute_at(block, i)
    sch.compute_at(block, j)
    check_schedule(sch, matmul_relu, golden, "schedule/compute_at_twice")


def test_compute_at_conv_padding(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv2d_nhwc)
    _, _, w, *_ = sch.get_loops(sch.get_block("conv"))
    sch.compute_at(sch.get_block("pad"), w)
    check_schedule(sch, conv2d_nhwc, golden, "schedule/compute_at_conv_pad", rtol=1e-4)


@T.script
def nested_scope(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for io in range(4):
        with T.block("outer"):
            vo = T.remap("S", io)
            for ii in range(4):
                with T.block("B"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    B[vi] = A[vi] * 2.0
            for ii in range(4):
                with T.block("C"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    C[vi] = B[vi] + 1.0


def test_compute_at_inside_a_nested_scope(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(nested_scope)
    (ii,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), ii)
    check_schedule(sch, nested_scope, golden, "schedule/compute_at_nested_scope")


def test_compute_location_candidates() -> None:
    names = [v.name for v in compute_location_candidates(matmul_relu, "As")]
    assert names == ["i", "j", "k"]  # the loops of C; D does not read As
    names = [v.name for v in compute_location_candidates(matmul_relu, "C")]
    assert names == ["i", "j"]
    names = [v.name for v in compute_location_candidates(matmul_relu, "D", reverse=True)]
    assert names == ["i", "j", "k"]


@pytest.mark.parametrize("func", [stencil, matmul_relu, nested_scope, conv2d_nhwc], ids=lambda f: f.name)
def test_every_candidate_location_keeps_the_result(func: PrimFunc) -> None:
    # What sample_compute_location relies on: a loop the checks accept gives a right program,
    # for both directions and every block, also after a split that leaves a remainder.
    base = Schedule(func)
    last = [r.block.name for r in base.index.blocks.values()][-1]
    for loop in base.get_loops(base.get_block(last))[:2]:
        if base.get_loop_node(loop).extent.value > 3:
            base.split(loop, [None, 3])
    for program in (func, base.func):
        for name in [r.block.name for r in Schedule(program).index.blocks.values()][1:]:
            for reverse in (False, True):
                for var in compute_location_candidates(program, name, reverse):
                    sch = Schedule(program)
                    move = sch.reverse_compute_at if reverse else sch.compute_at
                    move(sch.get_block(name), sch.loop_rv(var))
                    check_numerics(func, sch.func, llvm=False, rtol=1e-4)


# ---------------------------------------------------------------- negative


@T.script
def inner_loop(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4), "float32")
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            for j in range(4):
                B[vi, j] = A[vi, j] * 2.0
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def two_outputs(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    B2 = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
            B2[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + B2[vi]


@T.script
def param_producer(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + 1.0


@T.script
def read_outside_scope(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for io in range(4):
        with T.block("outer"):
            vo = T.remap("S", io)
            for ii in range(4):
                with T.block("B"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    B[vi] = A[vi] * 2.0
            for ii in range(4):
                with T.block("C"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    C[vi] = B[vi] + 1.0
    for i in range(16):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = B[vi]


@T.script
def two_writers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(8):
        with T.block("B0"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(8):
        with T.block("B1"):
            vi = T.spatial_axis(16, i + 8)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def no_consumer(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi]


@T.script
def two_consumers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]
    for i in range(16):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = B[vi]


@T.script
def input_overwritten(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    X = T.alloc_buffer((16,), "float32")
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("X0"):
            vi = T.remap("S", i)
            X[vi] = A[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = X[vi] * 2.0
    for i in range(16):
        with T.block("X1"):
            vi = T.remap("S", i)
            X[vi] = 0.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + X[vi]


@T.script
def accumulate_no_init(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i, k in T.grid(16, 4):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def self_reading(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = B[vi] + A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def opaque_iter(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.opaque_axis(16, i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def restricting_predicate(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.spatial_axis(16, i * 4 + j)
            T.where(j < 2)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def partial_last_vector(A: T.Buffer((4, 10), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4), "float32")
    for i, k0, k1 in T.grid(4, 3, 4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            vl = T.spatial_axis(4, k1)
            vk = T.reduce_axis(3, k0)
            T.where(k0 * 4 + k1 < 10)
            with T.init():
                B[vi, vl] = 0.0
            B[vi, vl] = B[vi, vl] + A[vi, vk * 4 + vl]
    for i, lane in T.grid(4, 4):
        with T.block("C"):
            vi, vl = T.remap("SS", i, lane)
            C[vi, vl] = B[vi, vl] * 2.0


@T.script
def strided_write(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((32,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi * 2] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi * 2]


@T.script
def many_to_one(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i, j in T.grid(16, 4):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi] = A[vi, vj]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def reduce_in_index(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 4), "float32")
    for i, k in T.grid(16, 4):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi, vk] = 0.0
            B[vi, vk] = B[vi, vk] + A[vi, vk]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi, 0]


@T.script
def symbolic_extent(a: T.handle, c: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    C = T.match_buffer(c, (n, n), "float32")
    B = T.alloc_buffer((n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i, j in T.grid(n, n):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vj]


@T.script
def guarded(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), n: T.int32):
    B = T.alloc_buffer((16,), "float32")
    if n > 0:
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


def _loop(sch: Schedule, block: str, position: int):  # type: ignore[no-untyped-def]
    return sch.get_loops(sch.get_block(block))[position]


@pytest.mark.parametrize(
    "func,block,loop_block,loop_position,message",
    [
        (stencil, "B", "B", 0, r"compute_at: block 'B': the block is already under the loop i"),
        (stencil, "C", "B", 0, r"the loop i comes before the block; .* use reverse_compute_at"),
        (two_outputs, "B", "C", 0, r"the block must write exactly one buffer, it writes \['B', 'B2'\]"),
        (param_producer, "B", "C", 0, r"the block writes the function parameter B"),
        (read_outside_scope, "B", "C", 0, r"buffer B is also read by block 'D' outside the block's scope"),
        (two_writers, "B0", "C", 0, r"block 'B1' also writes buffer B"),
        (no_consumer, "B", "C", 0, r"the block has no consumer of B in its scope"),
        (two_consumers, "B", "C", 0, r"consumer block 'D' is not under the loop i"),
        (input_overwritten, "B", "C", 0, r"block 'X1' writes buffer X, which the block reads, and would run before"),
        (accumulate_no_init, "B", "C", 0, r"the block is a reduction without T.init"),
        (self_reading, "B", "C", 0, r"the block reads a buffer it writes"),
        (opaque_iter, "B", "C", 0, r"the block has an opaque iterator \(vi\)"),
        (restricting_predicate, "B", "C", 0, r"the block's predicate \(T.where\) restricts more than its iterator"),
        (strided_write, "B", "C", 0, r"dimension 0 of the write index of B is not one iterator plus an offset"),
        (many_to_one, "B", "C", 0, r"the iterator vj does not appear in the write index of B"),
        (reduce_in_index, "B", "C", 0, r"the reduction iterator vk appears in the write index of B"),
        (guarded, "B", "C", 0, r"the block and its loops are the only statement of their parent"),
    ],
)
def test_compute_at_refuses(func: PrimFunc, block: str, loop_block: str, loop_position: int, message: str) -> None:
    sch = Schedule(func)
    loop = _loop(sch, loop_block, loop_position)
    with pytest.raises(ScheduleError, match=message):
        sch.compute_at(sch.get_block(block), loop)
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


def test_compute_at_keeps_a_predicate_over_its_iterators(golden) -> None:
    """Lane partials of a row sum over 10 = 2 x 4 + 2 (``k0 * 4 + k1 < 10`` skips the last
    vector's missing lanes): computed per row under C's loop, the gap is kept over the
    iterators, so the missing lanes are still skipped."""
    sch = Schedule(partial_last_vector)
    sch.compute_at(sch.get_block("B"), _loop(sch, "C", 0))
    check_schedule(sch, partial_last_vector, golden, "schedule/compute_at_partial_last_vector")
    assert "T.where(ax1 * 4 + ax0 < 10)" in sch.func.script()


def test_compute_at_refuses_a_loop_inside_the_block() -> None:
    sch = Schedule(inner_loop)
    inner = sch.get_child_blocks(sch.get_block("B"))
    assert inner == []
    (j,) = [
        sch.loop_rv(node.loop_var)
        for node in sch.index.loops.values()
        if node.loop_var.name == "j" and sch.index.scope_block(node) is sch.index.blocks["B"]
    ]
    with pytest.raises(ScheduleError, match=r"compute_at: block 'B': the loop j is inside the block itself"):
        sch.compute_at(sch.get_block("B"), j)
    assert tir.structural_equal(sch.func, inner_loop)


def test_compute_at_refuses_a_loop_of_another_scope() -> None:
    sch = Schedule(inner_loop)
    (j,) = [
        sch.loop_rv(node.loop_var)
        for node in sch.index.loops.values()
        if node.loop_var.name == "j" and sch.index.scope_block(node) is sch.index.blocks["B"]
    ]
    with pytest.raises(ScheduleError, match=r"block 'C': the block and the loop j are in different block scopes"):
        sch.compute_at(sch.get_block("C"), j)
    assert tir.structural_equal(sch.func, inner_loop)


def test_compute_at_refuses_a_removed_loop() -> None:
    sch = Schedule(stencil)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, 4])
    with pytest.raises(ScheduleError, match=r"compute_at: loop i: no such loop in the current program"):
        sch.compute_at(sch.get_block("B"), i)


def test_compute_at_symbolic_region_gives_a_loop_of_that_extent() -> None:
    # A region whose extent is a size (n) no loop changes becomes `for ax0 in range(n)` (issue 18).
    sch = Schedule(symbolic_extent, debug=True)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    assert "for ax0 in range(n):" in sch.mod.script()
    a, c = np.arange(5, dtype="float32"), np.zeros((5, 5), "float32")
    tir.build(sch.mod)(a, c, 5)
    np.testing.assert_array_equal(c, np.broadcast_to(a, (5, 5)))


# ---------------------------------------------------------------- results that verify (issue 17 C)


@T.script
def strided_gather(A: T.Buffer((31,), "float32"), B: T.Buffer((10,), "float32")):
    R = T.alloc_buffer((31,), "float32")
    for i in range(31):
        with T.block("R"):
            vi = T.spatial_axis(31, i)
            R[vi] = A[30 - vi]
    for i in range(10):
        with T.block("B"):
            vi = T.spatial_axis(10, i)
            B[vi] = R[vi * 3 + 1]


@T.script
def clamped_gather(A: T.Buffer((8,), "float32"), B: T.Buffer((12,), "float32")):
    R = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("R"):
            vi = T.spatial_axis(8, i)
            R[vi] = A[vi] * 2.0
    for i in range(12):
        with T.block("B"):
            vi = T.spatial_axis(12, i)
            B[vi] = R[T.min(vi, 7)]


@pytest.mark.parametrize(
    "func,message",
    [
        (strided_gather, r"the block would be bound as vi = i \* 3 \+ 1, which is not quasi-affine"),
        (clamped_gather, r"the block would be bound as vi = T.min\(i, 7\), which is not quasi-affine"),
    ],
    ids=["strided", "clamped"],
)
def test_compute_at_refuses_bindings_that_do_not_verify(func: PrimFunc, message: str) -> None:
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=message):
        sch.compute_at(sch.get_block("R"), i)
    assert tir.structural_equal(sch.func, func)
    assert compute_location_candidates(func, "R") == []


@T.script
def row_sum_stencil(A: T.Buffer((17, 8), "float32"), D: T.Buffer((16,), "float32")):
    S = T.alloc_buffer((17,), "float32")
    for i, k in T.grid(17, 8):
        with T.block("S"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 0.0
            S[vi] += A[vi, vk]
    for i in range(16):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = S[vi] + S[vi + 1]


def test_decompose_reduction_after_compute_at_with_a_recomputed_halo() -> None:
    """compute_at of a reduction under a stencil's loop recomputes S[i + 1] at the next
    iteration; hoisting the init above the loop would sum it twice, so decompose_reduction
    refuses there and is correct inside."""
    sch = Schedule(row_sum_stencil, debug=True)
    (i,) = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("S"), i)
    check_numerics(row_sum_stencil, sch.func)
    loops = sch.get_loops(sch.get_block("S"))
    assert len(loops) == 3
    with pytest.raises(ScheduleError, match=r"decompose_reduction: block 'S'"):
        sch.decompose_reduction(sch.get_block("S"), loops[0])
    sch.decompose_reduction(sch.get_block("S"), loops[1])
    check_numerics(row_sum_stencil, sch.func)


# ---------------------------------------------------------------- blockized producers (TVM's test_compute_at_blockized_2)


@T.script
def blockized_producer(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32), "float32")
    for i_o, j_o in T.grid(4, 4):
        with T.block("B_outer"):
            vio, vjo = T.remap("SS", i_o, j_o)
            for i_i, j_i in T.grid(8, 8):
                with T.block("B_inner"):
                    vi = T.spatial_axis(32, vio * 8 + i_i)
                    vj = T.spatial_axis(32, vjo * 8 + j_i)
                    B[vi, vj] = A[vi, vj] * 2.0
    for i_o, j_o, i_i, j_i in T.grid(2, 2, 16, 16):
        with T.block("C"):
            vi = T.spatial_axis(32, i_o * 16 + i_i)
            vj = T.spatial_axis(32, j_o * 16 + j_i)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def overlapping_tiles(A: T.Buffer((40,), "float32"), C: T.Buffer((36,), "float32")):
    B = T.alloc_buffer((40,), "float32")
    for i_o in range(8):
        with T.block("B_outer"):
            vio = T.remap("S", i_o)
            T.reads(A[vio * 4 : vio * 4 + 8])
            T.writes(B[vio * 4 : vio * 4 + 8])
            for i_i in range(8):
                with T.block("B_inner"):
                    vi = T.spatial_axis(40, vio * 4 + i_i)
                    B[vi] = A[vi] * 2.0
    for i_o, i_i in T.grid(4, 9):
        with T.block("C"):
            vi = T.spatial_axis(36, i_o * 9 + i_i)
            C[vi] = B[vi] + 1.0


def test_compute_at_a_blockized_producer_computes_whole_tiles(golden) -> None:  # type: ignore[no-untyped-def]
    # Each 16x16 tile of C needs 2x2 of B's 8x8 tiles: the outer block's iterators get ranges
    # of tiles, and its inner block stays as it is.
    sch = Schedule(blockized_producer, debug=True)
    _, j_o, _, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B_outer"), j_o)
    check_schedule(sch, blockized_producer, golden, "schedule/compute_at_blockized_producer")
    assert "for ax0, ax1 in T.grid(2, 2):" in sch.func.script()


def test_compute_at_refuses_overlapping_tiles() -> None:
    sch = Schedule(overlapping_tiles)
    before = sch.func
    i_o, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"dimension 0 of that region is not a tile \[c \* v \+ offset"):
        sch.compute_at(sch.get_block("B_outer"), i_o)
    assert sch.func is before


def test_compute_at_a_block_that_writes_a_row_per_instance() -> None:
    # The row B[vi, 0:4] is a tile of width 1 in its first dimension: under C's i loop one
    # instance computes the row, under the j loop the row is recomputed per element.
    for position in (0, 1):
        sch = Schedule(inner_loop, debug=True)
        loops = sch.get_loops(sch.get_block("C"))
        sch.compute_at(sch.get_block("B"), loops[position])
        check_numerics(inner_loop, sch.func)


# ---------------------------------------------------------------- reversed write index


@T.script
def reversed_write(X: T.Buffer((10, 10), "float32"), Z: T.Buffer((10, 10), "float32")):
    Y = T.alloc_buffer((10, 10), "float32")
    for i, j in T.grid(10, 10):
        with T.block("b0"):
            vi, vj = T.remap("SS", i, j)
            Y[9 - vi, 9 - vj] = X[vi, vj] + 1.0
    for i, j in T.grid(10, 10):
        with T.block("b1"):
            vi, vj = T.remap("SS", i, j)
            Z[vi, vj] = Y[vj, vi] + 2.0


def test_compute_at_reversed_write_index(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_compute_at_rev_iter: column i of Y is written by vj = 9 - i.
    sch = Schedule(reversed_write)
    i, _ = sch.get_loops(sch.get_block("b1"))
    sch.compute_at(sch.get_block("b0"), i)
    check_schedule(sch, reversed_write, golden, "schedule/compute_at_reversed_write")
    assert "T.spatial_axis(10, 9 - i)" in sch.func.script()


# ---------------------------------------------------------------- index: where under the loop


@T.script
def side_statement(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32"), E: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i in range(16):
        with T.block("E"):
            vi = T.remap("S", i)
            E[vi] = A[vi, 0] - 1.0
        for j in range(8):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = B[vi, vj] + 1.0


def test_compute_at_to_index() -> None:
    # index=1: after E (which does not read B), before C.
    sch = Schedule(side_statement)
    (i,) = sch.get_loops(sch.get_block("E"))
    sch.compute_at(sch.get_block("B"), i, index=1)
    check_numerics(side_statement, sch.func)
    check_replay(sch, side_statement)
    script = sch.func.script()
    assert script.index('T.block("E")') < script.index('T.block("B")') < script.index('T.block("C")')


def test_compute_at_refuses_an_index_after_a_consumer() -> None:
    sch = Schedule(side_statement)
    (i,) = sch.get_loops(sch.get_block("E"))
    with pytest.raises(ScheduleError, match=r"index=2: statement 1 of the loop i reads what the block writes"):
        sch.compute_at(sch.get_block("B"), i, index=2)
    assert tir.structural_equal(sch.func, side_statement)


@pytest.mark.parametrize(("index", "order"), [(-1, ("E", "B", "C")), (-2, ("B", "E", "C"))])
def test_compute_at_default_index_is_the_last_point_before_a_consumer(index: int, order: tuple[str, ...]) -> None:
    # TVM's meaning: -1 the last point the dependences allow (just before C, the first statement
    # reading B), -2 the first (no statement writes what B reads: the start).
    sch = Schedule(side_statement)
    (i,) = sch.get_loops(sch.get_block("E"))
    sch.compute_at(sch.get_block("B"), i, index=index)
    check_numerics(side_statement, sch.func)
    script = sch.func.script()
    positions = [script.index(f'T.block("{name}")') for name in order]
    assert positions == sorted(positions)


# ---------------------------------------------------------------- shared memory under thread loops


@T.script
def shared_tile(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    A_shared = T.alloc_buffer((64, 64), "float32", scope="shared")
    for i, j in T.grid(64, 64):
        with T.block("A_shared"):
            vi, vj = T.remap("SS", i, j)
            A_shared[vi, vj] = A[vi, vj]
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(4, thread="threadIdx.x"):
            for i, j in T.grid(4, 64):
                with T.block("C"):
                    vi = T.spatial_axis(64, bx * 16 + tx * 4 + i)
                    vj = T.spatial_axis(64, j)
                    C[vi, vj] = A_shared[vi, vj] + 1.0


def test_compute_at_shared_buffer_covers_every_thread_of_the_block(golden) -> None:  # type: ignore[no-untyped-def]
    # Under threadIdx.x, one copy of A_shared serves the block's 4 threads: each iteration
    # computes their 16 rows (TVM's storage-scope relaxation), not the thread's own 4.
    sch = Schedule(shared_tile)
    (tx,) = [loop for loop in sch.get_loops(sch.get_block("C")) if sch.get(loop).thread_tag == "threadIdx.x"]
    sch.compute_at(sch.get_block("A_shared"), tx)
    # GPU loops: the interpreter runs them (no LLVM build)
    check_schedule(sch, shared_tile, golden, "schedule/compute_at_shared_under_threads", llvm=False)
    check_replay(sch, shared_tile)
    script = sch.func.script()
    assert "for ax0, ax1 in T.grid(16, 64):" in script, script
    assert "T.spatial_axis(64, bx * 16 + ax0)" in script, script
