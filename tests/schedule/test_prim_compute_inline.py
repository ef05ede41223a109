"""compute_inline: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from schedule_testing import check_numerics, check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
from conv2d_nhwc import conv2d_nhwc  # noqa: E402


@T.script
def chain(A: T.Buffer((16, 8), "float32"), D: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    C = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0
    for i, j in T.grid(16, 8):
        with T.block("D"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = C[vi, vj] * B[vi, vj]


@T.script
def transpose_stencil(A: T.Buffer((8, 17), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((17, 8), "float32")
    for i, j in T.grid(8, 17):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vj, vi] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + B[vi + 1, vj]


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


def test_compute_inline_chain(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(chain)
    sch.compute_inline(sch.get_block("B"))
    sch.compute_inline(sch.get_block("C"))
    check_schedule(sch, chain, golden, "schedule/compute_inline_chain")
    assert [r.block.name for r in sch.index.blocks.values()] == ["root", "D"]
    assert sch.func.root_block is not None and sch.func.root_block.alloc_buffers == ()


def test_compute_inline_permuted_index_into_stencil(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(transpose_stencil)
    sch.compute_inline(sch.get_block("B"))
    check_schedule(sch, transpose_stencil, golden, "schedule/compute_inline_transpose_stencil")


def test_compute_inline_into_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    sch.compute_inline(sch.get_block("As"))
    check_schedule(sch, matmul_relu, golden, "schedule/compute_inline_matmul")


def test_compute_inline_conv_padding(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv2d_nhwc)
    sch.compute_inline(sch.get_block("pad"))
    check_schedule(sch, conv2d_nhwc, golden, "schedule/compute_inline_conv_pad", rtol=1e-4)


def test_compute_inline_after_compute_at(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(chain)
    _, j = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), j)
    sch.compute_inline(sch.get_block("C"))
    check_schedule(sch, chain, golden, "schedule/compute_inline_after_compute_at")


# ---------------------------------------------------------------- negative


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
def two_stores(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
            B[vi] = B[vi] + 1.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def shifted_store(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi + 1] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi + 1]


@T.script
def param_output(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
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
def two_writers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(8):
        with T.block("B1"):
            vi = T.remap("S", i)
            B[vi] = 0.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def read_before(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = B[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def input_written_after(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
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
def input_written_in_shared_loop(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    X = T.alloc_buffer((4,), "float32")
    B = T.alloc_buffer((4, 4), "float32")
    for t in range(4):
        for i in range(4):
            with T.block("X"):
                vt, vi = T.remap("SS", t, i)
                X[vi] = A[vt, vi]
        for i in range(4):
            with T.block("B"):
                vt, vi = T.remap("SS", t, i)
                B[vt, vi] = X[vi] * 2.0
    for t, i in T.grid(4, 4):
        with T.block("C"):
            vt, vi = T.remap("SS", t, i)
            C[vt, vi] = B[vt, vi]


@T.script
def vector_read(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(4):
        with T.block("C"):
            vi = T.remap("S", i)
            C[T.ramp(vi * 4, 1, 4)] = B[T.ramp(vi * 4, 1, 4)]


@T.script
def match_view(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(4):
        with T.block("C"):
            vi = T.remap("S", i)
            Bv = T.match_buffer(B[vi * 4 : vi * 4 + 4], (4,), "float32")
            for j in range(4):
                C[vi * 4 + j] = Bv[j]


@T.script
def guarded(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), n: T.int32):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("C0"):
            vi = T.remap("S", i)
            C[vi] = 0.0
    if n > 0:
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@pytest.mark.parametrize(
    "func,block,message",
    [
        (matmul_relu, "C", r"compute_inline: block 'C': the block is a reduction"),
        (matmul_relu, "root", r"compute_inline: block 'root': the root block cannot be inlined"),
        (opaque_iter, "B", r"the block has an opaque iterator \(vi\)"),
        (two_stores, "B", r"the block's body is not a single BufferStore"),
        (shifted_store, "B", r"the store index of B is not a permutation of the block's iterators"),
        (param_output, "B", r"the block writes the function parameter B; its writes cannot be removed"),
        (self_reading, "B", r"the stored value reads B itself"),
        (two_writers, "B", r"block 'B1' also writes buffer B"),
        (read_before, "B", r"block 'D' reads buffer B before the block writes it"),
        (input_written_after, "B", r"block 'X1' writes buffer X, which the block reads, after the block"),
        (input_written_in_shared_loop, "B", r"block 'X' writes buffer X, which the block reads, inside a loop"),
        (vector_read, "B", r"buffer B is read with a vector index"),
        (match_view, "B", r"block 'C' views buffer B through T.match_buffer"),
        (guarded, "B", r"the block and its loops are the only statement of their parent"),
    ],
)
def test_compute_inline_refuses(func: PrimFunc, block: str, message: str) -> None:
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        sch.compute_inline(sch.get_block(block))
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


def test_compute_inline_refuses_a_removed_block() -> None:
    sch = Schedule(chain)
    block = sch.get_block("B")
    sch.compute_inline(block)
    with pytest.raises(ScheduleError, match=r"compute_inline: block 'B': no such block in the current program"):
        sch.compute_inline(block)


# ---------------------------------------------------------------- buffers in scope (issue 17 C)


@T.script
def scaled_chain(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


def test_compute_inline_refuses_to_carry_a_cache_out_of_the_block_that_allocates_it() -> None:
    """blockize + cache_read put A_shared inside B_o; inlining B into C would make C read
    A_shared where it does not exist (the printed script would not parse)."""
    sch = Schedule(scaled_chain, debug=True)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.blockize(i)
    sch.cache_read(sch.get_block("B"), 0, "shared")
    before = sch.func
    message = r"the block reads A_shared, which block 'B_o' allocates, but block 'C', which reads B, is outside it"
    with pytest.raises(ScheduleError, match=message):
        sch.compute_inline(sch.get_block("B"))
    assert sch.func is before


# ---------------------------------------------------------------- an init without reduction iterators


@T.script
def scaled_unit_reduction(
    A: T.Buffer((8, 16), "float32"), S: T.Buffer((8,), "float32"), C: T.Buffer((16, 8), "float32")
):
    B = T.alloc_buffer((8, 16), "float32")
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            with T.init():
                B[vi, vj] = 1.0
            B[vi, vj] = B[vi, vj] * S[vi] + A[vi, vj]
    for j, i in T.grid(16, 8):
        with T.block("C"):
            vj, vi = T.remap("SS", j, i)
            C[vj, vi] = B[vi, vj] * 2.0


def test_compute_inline_of_a_block_whose_init_runs_at_every_instance(golden) -> None:  # type: ignore[no-untyped-def]
    # The reverse of TVM's test_inline_with_reduction: the block's init, with no reduction
    # iterator, runs at every instance and folds into its store (B = 1.0 * S + A).
    sch = Schedule(scaled_unit_reduction, debug=True)
    sch.compute_inline(sch.get_block("B"))
    check_schedule(sch, scaled_unit_reduction, golden, "schedule/compute_inline_unit_reduction")


# ---------------------------------------------------------------- a data guard in the consumer's T.where


@T.script
def guarded_consumer(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            T.where(B[i, j] < 10.0)
            C[vi, vj] = B[vi, vj] + 1.0


def test_compute_inline_into_a_data_guard(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_compute_inline_predicate: the guard T.where(B[i, j] < 10.0) reads what B
    # computes; inlining rewrites it too (A[i, j] * 2.0 < 10.0), and the program validates.
    sch = Schedule(guarded_consumer, debug=True)
    sch.compute_inline(sch.get_block("B"))
    assert "T.where(A[i, j] * 2.0 < 10.0)" in sch.func.script()
    check_schedule(sch, guarded_consumer, golden, "schedule/compute_inline_into_a_data_guard")


@pytest.mark.parametrize(
    "step",
    [
        lambda s: s.compute_at(s.get_block("B"), s.get_loops(s.get_block("C"))[1]),
        lambda s: s.split(s.get_loops(s.get_block("C"))[1], [None, 4]),
        lambda s: s.fuse(*s.get_loops(s.get_block("C"))),
        lambda s: s.blockize(s.get_loops(s.get_block("C"))[1]),
    ],
)
def test_a_data_guard_survives_loop_changes(step) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(guarded_consumer, debug=True)
    step(sch)
    check_numerics(guarded_consumer, sch.func)
