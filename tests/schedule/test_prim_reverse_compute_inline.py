"""reverse_compute_inline: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import re

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError


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
            D[vi, vj] = T.max(C[vi, vj], 0.0)


@T.script
def shifted_transpose(A: T.Buffer((17, 8), "float32"), C: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((17, 8), "float32")
    for i, j in T.grid(17, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vj + 1, vi] + 1.0


@T.script
def row_pick(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 4), "float32")
    for i, j in T.grid(16, 4):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi, 2] * B[vi, 2]


@T.script
def matmul_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    C = T.alloc_buffer((16, 16), "float32")
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)


# ---------------------------------------------------------------- positive


def test_reverse_compute_inline_chain(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(chain)
    sch.reverse_compute_inline(sch.get_block("D"))
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, chain, golden, "schedule/reverse_compute_inline_chain")
    assert [r.block.name for r in sch.index.blocks.values()] == ["root", "B"]


def test_reverse_compute_inline_inverts_shift_and_transpose(golden) -> None:  # type: ignore[no-untyped-def]
    # Producer instance (p0, p1) is consumer instance (p1, p0 - 1): row 0 of B maps outside
    # the consumer's domain, so the producer gets a predicate.
    sch = Schedule(shifted_transpose)
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, shifted_transpose, golden, "schedule/reverse_compute_inline_shift_transpose")
    assert "T.where" in sch.func.script()


def test_reverse_compute_inline_constant_index_masks_producer(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(row_pick)
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, row_pick, golden, "schedule/reverse_compute_inline_row_pick")


def test_reverse_compute_inline_after_split(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(chain)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 5])
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, chain, golden, "schedule/reverse_compute_inline_after_split")


# ---------------------------------------------------------------- negative


@T.script
def two_stores(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]
            C[vi] = C[vi] + 1.0


@T.script
def self_reading(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = C[vi] + B[vi]


@T.script
def restricting_predicate(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            T.where(i < 8)
            C[vi] = B[vi]


@T.script
def no_producer(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + 1.0


@T.script
def two_produced(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    E = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("E"):
            vi = T.remap("S", i)
            E[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + E[vi]


@T.script
def two_writers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B0"):
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
def producer_after(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]


@T.script
def other_scope(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for io in range(4):
        with T.block("outer"):
            vo = T.remap("S", io)
            for ii in range(4):
                with T.block("C"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    C[vi] = B[vi]
            for ii in range(4):
                with T.block("C2"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    C[vi] = C[vi] * 2.0


@T.script
def param_intermediate(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def two_readers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
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
def producer_with_loop(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16, 4), "float32")):
    B = T.alloc_buffer((16, 4), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            for j in range(4):
                B[vi, j] = A[vi, j]
    for i, j in T.grid(16, 4):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj]


@T.script
def producer_reads_itself(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
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
def two_indices(A: T.Buffer((17,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(17):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + B[vi + 1]


@T.script
def broadcast(A: T.Buffer((16,), "float32"), C: T.Buffer((16, 4), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i, j in T.grid(16, 4):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi]


@T.script
def output_read_between(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("X"):
            vi = T.remap("S", i)
            D[vi] = C[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def guarded(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), n: T.int32):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    if n > 0:
        for i in range(16):
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = B[vi]


@pytest.mark.parametrize(
    "func,block,message",
    [
        (matmul_relu, "C", r"reverse_compute_inline: block 'C': the block is a reduction"),
        (two_stores, "C", r"the block's body is not a single BufferStore"),
        (self_reading, "C", r"the block reads C, which it writes"),
        (restricting_predicate, "C", r"the block's predicate \(T.where\) restricts more than its iterator domains"),
        (no_producer, "C", r"no block writes a buffer the block reads: it has no producer"),
        (two_produced, "C", r"the block reads more than one buffer written by other blocks: \['B', 'E'\]"),
        (two_writers, "C", r"buffer B is written by more than one block: \['B0', 'B1'\]"),
        (producer_after, "C", r"the producer 'B' of B comes after the block"),
        (other_scope, "C", r"the block and its producer 'B' are in different block scopes"),
        (param_intermediate, "C", r"buffer B is a function parameter"),
        (two_readers, "C", r"block 'D' also reads buffer B"),
        (matmul_relu, "D", r"the producer 'C' is a reduction"),
        (producer_with_loop, "C", r"the body of the producer 'B' is not a single store"),
        (producer_reads_itself, "C", r"the producer 'B' must store to B once and not read it"),
        (vector_read, "C", r"the block reads B with a vector index"),
        (two_indices, "C", r"the block reads B at more than one index"),
        (broadcast, "C", r"the read index of B is not an invertible map of the block's iterators"),
        (output_read_between, "C", r"block 'X', between the producer and the block, accesses buffer C"),
        (guarded, "C", r"the block and its loops are the only statement of their parent"),
    ],
)
def test_reverse_compute_inline_refuses(func: PrimFunc, block: str, message: str) -> None:
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_inline(sch.get_block(block))
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


# ---------------------------------------------------------------- coverage (issue 17 A.1)


@T.script
def pad_1d(A: T.Buffer((6,), "float32"), P: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((6,), "float32")
    for i in range(6):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(8):
        with T.block("P"):
            vi = T.remap("S", i)
            P[vi] = T.if_then_else(1 <= vi and vi < 7, B[vi - 1], T.float32(0))


@T.script
def partial_consumer(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(8):
        with T.block("C"):
            vi = T.spatial_axis(16, i + 4)
            C[vi] = B[vi] + 1.0


@T.script
def small_matmul(A: T.Buffer((10, 7), "float32"), B: T.Buffer((7, 12), "float32"), C: T.Buffer((10, 12), "float32")):
    for i, j, k in T.grid(10, 12, 7):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def test_reverse_compute_inline_refuses_consumer_wider_than_producer() -> None:
    sch = Schedule(pad_1d)
    message = (
        r"the block's domain is not covered by its producer 'B': the block reads B at dimension 0 "
        r"for vi in \[0, 8\), the producer writes only \[0, 6\) there"
    )
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_inline(sch.get_block("P"))
    assert tir.structural_equal(sch.func, pad_1d)


def test_reverse_compute_inline_keeps_the_zero_border_of_pad_einsum() -> None:
    """cache_read + pad_einsum gives a padding block wider than the cache: inlining it into
    the cache would lose the zero border, so it is refused; the program stays correct."""
    sch = Schedule(small_matmul, debug=True)
    block = sch.get_block("C")
    sch.cache_read(block, 1, "global")
    sch.pad_einsum(block, [4, 12, 8])
    with pytest.raises(ScheduleError, match=r"not covered by its producer 'A_global'"):
        sch.reverse_compute_inline(sch.get_block("A_global_pad"))
    check_numerics(small_matmul, sch.func)


def test_reverse_compute_inline_masks_the_producer_to_the_instances_the_consumer_runs() -> None:
    """The consumer runs only vi in [4, 12) of its domain: the other elements of C must stay
    as they were, so the producer is masked to those instances, not to the domain."""
    sch = Schedule(partial_consumer, debug=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "T.where(4 <= i and i < 12)" in sch.func.script()
    check_numerics(partial_consumer, sch.func)
    check_replay(sch, partial_consumer)


def test_reverse_compute_inline_under_a_shared_loop() -> None:
    """Producer and consumer under one loop (after compute_at): coverage is compared per
    iteration of it."""
    sch = Schedule(chain, debug=True)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    sch.reverse_compute_inline(sch.get_block("C"))
    check_numerics(chain, sch.func)
    check_replay(sch, chain)


def test_reverse_compute_inline_refuses_a_producer_that_runs_in_some_iterations_only() -> None:
    """After compute_at, B runs where 0 <= i - 1 < 6 only, inside P's loop of 8: P's border
    iterations would lose their store."""
    sch = Schedule(pad_1d)
    (i,) = sch.get_loops(sch.get_block("P"))
    sch.compute_at(sch.get_block("B"), i)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"the instances of the producer 'B' \(its bindings and T.where\)"):
        sch.reverse_compute_inline(sch.get_block("P"))
    assert sch.func is before


@T.script
def concat(A: T.Buffer((5, 6), "float32"), B: T.Buffer((7, 6), "float32"), C: T.Buffer((12, 6), "float32")):
    for i, j in T.grid(12, 6):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = T.if_then_else(vi < 5, A[T.min(vi, 4), vj], B[T.max(vi - 5, 0), vj])


def test_reverse_compute_inline_refuses_a_producer_iterator_left_indexing_nothing() -> None:
    """blockize + cache_read: the inner block reads the cache row A_local[T.min(vi_o, 4), vj]
    at an index free of its own iterators, so the cache's v0 would index nothing written."""
    sch = Schedule(concat, debug=True)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.blockize(j)
    sch.cache_read(sch.get_block("C"), 0, "local")
    before = sch.func
    with pytest.raises(ScheduleError, match=r"the iterator v0 of the producer 'A_local' would index nothing"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before
    check_numerics(concat, sch.func)


# ---------------------------------------------------------------- affine read indices (TVM's cases)
#
# A consumer that reads its producer through a fused and re-split index (a reshape) is inlined
# by inverting the index as an iterator map; where the map is onto a box only once an extent is
# rounded up (127 rows read in tiles of 16), the producer is masked to the instances that run.


@T.script
def reshape_read(A: T.Buffer((16, 16), "float32"), C: T.Buffer((2, 4, 4, 8), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j, k, m in T.grid(2, 4, 4, 8):
        with T.block("C"):
            vi, vj, vk, vl = T.remap("SSSS", i, j, k, m)
            C[vi, vj, vk, vl] = B[(((vi * 4 + vj) * 4 + vk) * 8 + vl) // 16, (((vi * 4 + vj) * 4 + vk) * 8 + vl) % 16]


@T.script
def unit_iter_read(
    A: T.Buffer((16, 8), "float32"), B: T.Buffer((4, 4, 1), "float32"), D: T.Buffer((1, 4, 4, 8), "float32")
):
    C = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = A[vi, vj] * 2.0
    for i, j, k, m in T.grid(1, 4, 4, 8):
        with T.block("C"):
            vi, vj, vk, vl = T.remap("SSSS", i, j, k, m)
            D[vi, vj, vk, vl] = C[vj * 4 + vk, vl] + B[vj, vk, vi]


@T.script
def affine_chain(A: T.Buffer((16, 8), "float32"), D: T.Buffer((1, 4, 4, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    C = T.alloc_buffer((4, 4, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j, k in T.grid(4, 4, 8):
        with T.block("C"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            C[vi, vj, vk] = B[vi * 4 + vj, vk] + 1.0
    for i, j, k, m in T.grid(1, 4, 4, 8):
        with T.block("D"):
            vi, vj, vk, vl = T.remap("SSSS", i, j, k, m)
            D[vi, vj, vk, vl] = C[vj, vk, vl]


@T.script
def tiles_to_rows(A: T.Buffer((16, 16), "float32"), C: T.Buffer((15, 15), "float32")):
    B = T.alloc_buffer((4, 4, 4, 4), "float32")
    for i0, j0, i1, j1 in T.grid(4, 4, 4, 4):
        with T.block("B"):
            vi, vj, vm, vn = T.remap("SSSS", i0, j0, i1, j1)
            B[vi, vj, vm, vn] = A[vi * 4 + vm, vj * 4 + vn] * 2.0
    for i, j in T.grid(15, 15):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi // 4, vj // 4, vi % 4, vj % 4] + 1.0


@T.script
def diagonal_read(A: T.Buffer((16, 16), "float32"), C: T.Buffer((4, 4, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j, k in T.grid(4, 4, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            C[vi, vj, vk] = B[vi * 4 + vj, vi * 4 + vj]


@T.script
def reshape_past_producer(A: T.Buffer((8, 16), "float32"), C: T.Buffer((2, 4, 4, 8), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j, k, m in T.grid(2, 4, 4, 8):
        with T.block("C"):
            vi, vj, vk, vl = T.remap("SSSS", i, j, k, m)
            C[vi, vj, vk, vl] = B[(((vi * 4 + vj) * 4 + vk) * 8 + vl) // 16, (((vi * 4 + vj) * 4 + vk) * 8 + vl) % 16]


def test_reverse_compute_inline_inverts_a_reshape(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(reshape_read, debug=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, reshape_read, golden, "schedule/reverse_compute_inline_reshape")
    assert "T.where" not in sch.func.script()


def test_reverse_compute_inline_pins_a_unit_iterator(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(unit_iter_read, debug=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, unit_iter_read, golden, "schedule/reverse_compute_inline_unit_iter")


@pytest.mark.parametrize("order", [("C", "D"), ("D", "C")])
def test_reverse_compute_inline_affine_chain_in_either_order(order: tuple[str, str]) -> None:
    sch = Schedule(affine_chain, debug=True)
    for name in order:
        sch.reverse_compute_inline(sch.get_block(name))
    check_numerics(affine_chain, sch.func)
    check_replay(sch, affine_chain)
    assert [r.block.name for r in sch.index.blocks.values()] == ["root", "B"]
    assert "D[0, vi // 4, vi % 4, vj] = A[vi, vj] * 2.0 + 1.0" in sch.func.script()


def test_reverse_compute_inline_masks_tiles_past_a_partial_consumer(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(tiles_to_rows, debug=True)
    sch.reverse_compute_inline(sch.get_block("C"))
    check_schedule(sch, tiles_to_rows, golden, "schedule/reverse_compute_inline_tiles_to_rows")
    assert "T.where" in sch.func.script()


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (diagonal_read, "not every iteration of vk is used"),
        (reshape_past_producer, "the producer writes only [0, 8) there"),
    ],
)
def test_reverse_compute_inline_refuses_affine_reads(func: PrimFunc, message: str) -> None:
    sch = Schedule(func)
    before = sch.func
    with pytest.raises(ScheduleError, match=re.escape(message)):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before


# ---------------------------------------------------------------- an init without reduction iterators (TVM's test_inline_with_reduction)


@T.script
def batch_matmul_unit_reduction(
    softmax_norm: T.Buffer((T.int64(6), T.int64(1), T.int64(1)), "float32"),
    reshape: T.Buffer((T.int64(6), T.int64(1), T.int64(64)), "float32"),
    transpose: T.Buffer((T.int64(1), T.int64(1), T.int64(6), T.int64(64)), "float32"),
):
    bmm_out = T.alloc_buffer((T.int64(6), T.int64(1), T.int64(64)), "float32")
    for ax0, ax1 in T.grid(T.int64(6), T.int64(64)):
        with T.block("bmm"):
            v0, v1 = T.remap("SS", ax0, ax1)
            with T.init():
                bmm_out[v0, T.int64(0), v1] = 0.0
            bmm_out[v0, T.int64(0), v1] = (
                bmm_out[v0, T.int64(0), v1] + softmax_norm[v0, T.int64(0), T.int64(0)] * reshape[v0, T.int64(0), v1]
            )
    for ax0, ax1 in T.grid(T.int64(6), T.int64(64)):
        with T.block("transpose"):
            v0, v1 = T.remap("SS", ax0, ax1)
            transpose[T.int64(0), T.int64(0), v0, v1] = bmm_out[v0, T.int64(0), v1]


def test_inline_with_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    # The producer has a T.init but only spatial iterators: the init runs at every instance,
    # so the block is the one store bmm_out[p] = 0.0 + a * b, which takes the transpose in.
    sch = Schedule(batch_matmul_unit_reduction, debug=True)
    sch.reverse_compute_inline(sch.get_block("transpose"))
    check_schedule(sch, batch_matmul_unit_reduction, golden, "schedule/reverse_compute_inline_unit_reduction")


@T.script
def unit_reduction_other_index(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[(vi + 1) % 16] + A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] * 2.0


@T.script
def unit_reduction_init_reads(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            with T.init():
                B[vi] = B[vi] * 0.0
            B[vi] = B[vi] + A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] * 2.0


@pytest.mark.parametrize("func", [unit_reduction_other_index, unit_reduction_init_reads], ids=["index", "init_reads"])
def test_reverse_compute_inline_refuses_an_init_that_does_not_fold(func: PrimFunc) -> None:
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=r"the producer 'B' is a reduction"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert tir.structural_equal(sch.func, func)
