"""rolling_buffer (TVM's): a producer computed per tile of its consumers keeps one window of its
buffer, indexed modulo the window's extent, and skips what the previous tile computed. TVM's
cases, re-expressed; each result is checked against the unscheduled program (interpreter and
LLVM) and replayed from its trace."""

from __future__ import annotations

import random

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.ir import IterKind
from tir.schedule import Schedule, ScheduleError
from tir.schedule.handles import LoopRV


def _tile(sch: Schedule, block: str, sizes: list[int]) -> list[LoopRV]:
    """Split each loop of ``block`` by its size, outer loops first; the outer loops."""
    outer, inner = [], []
    for loop, size in zip(sch.get_loops(sch.get_block(block)), sizes):
        o, i = sch.split(loop, [None, size])
        outer.append(o)
        inner.append(i)
    sch.reorder(*outer, *inner)
    return outer


@T.script
def conv_1d_twice(A: T.Buffer((4, 12), "int32"), C: T.Buffer((4, 8), "int32")):
    B = T.alloc_buffer((4, 10), "int32")
    for c in range(4):
        for i, k in T.grid(10, 3):
            with T.block("B"):
                cc, vi, vk = T.remap("SSR", c, i, k)
                with T.init():
                    B[cc, vi] = 0
                B[cc, vi] = B[cc, vi] + A[cc, vi + vk]
        for i, k in T.grid(8, 3):
            with T.block("C"):
                cc, vi, vk = T.remap("SSR", c, i, k)
                with T.init():
                    C[cc, vi] = 0
                C[cc, vi] = C[cc, vi] + B[cc, vi + vk]


@T.script
def max_pool_twice(A: T.Buffer((1, 12, 12, 16), "int8"), C: T.Buffer((1, 8, 8, 16), "int8")):
    B = T.alloc_buffer((1, 10, 10, 16), "int8")
    for n, h, w, c, rh, rw in T.grid(1, 10, 10, 16, 3, 3):
        with T.block("B"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                B[vn, vh, vw, vc] = T.int8(-128)
            B[vn, vh, vw, vc] = T.max(B[vn, vh, vw, vc], A[vn, vh + vrh, vw + vrw, vc])
    for n, h, w, c, rh, rw in T.grid(1, 8, 8, 16, 3, 3):
        with T.block("C"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                C[vn, vh, vw, vc] = T.int8(-128)
            C[vn, vh, vw, vc] = T.max(C[vn, vh, vw, vc], B[vn, vh + vrh, vw + vrw, vc])


@T.script
def max_pool_three_strided(A: T.Buffer((1, 24, 24, 16), "int8"), C: T.Buffer((1, 8, 8, 16), "int8")):
    B_0 = T.alloc_buffer((1, 22, 22, 16), "int8")
    B_1 = T.alloc_buffer((1, 10, 10, 16), "int8")
    for n, h, w, c, rh, rw in T.grid(1, 22, 22, 16, 3, 3):
        with T.block("B_0"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                B_0[vn, vh, vw, vc] = T.int8(-128)
            B_0[vn, vh, vw, vc] = T.max(B_0[vn, vh, vw, vc], A[vn, vh + vrh, vw + vrw, vc])
    for n, h, w, c, rh, rw in T.grid(1, 10, 10, 16, 3, 3):
        with T.block("B_1"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                B_1[vn, vh, vw, vc] = T.int8(-128)
            B_1[vn, vh, vw, vc] = T.max(B_1[vn, vh, vw, vc], B_0[vn, vh * 2 + vrh, vw * 2 + vrw, vc])
    for n, h, w, c, rh, rw in T.grid(1, 8, 8, 16, 3, 3):
        with T.block("C"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                C[vn, vh, vw, vc] = T.int8(-128)
            C[vn, vh, vw, vc] = T.max(C[vn, vh, vw, vc], B_1[vn, vh + vrh, vw + vrw, vc])


# A max pool followed by a 2x nearest upscale and a max pool, the producer already placed per
# 5 x 5 output tile: its windows start at (5 * tile) // 2.
@T.script
def upscale(A: T.Buffer((1, 16, 16, 16), "int8"), C: T.Buffer((1, 24, 24, 16), "int8")):
    B = T.alloc_buffer((1, 14, 14, 16), "int8")
    for n_0, h_0, w_0, c_0 in T.grid(1, 5, 5, 1):
        for ax0, ax1, ax2, ax3, ax4 in T.grid(5, 5, 16, 3, 3):
            with T.block("B"):
                vn = T.spatial_axis(1, 0)
                vh = T.spatial_axis(14, h_0 * 5 // 2 + ax0)
                vw = T.spatial_axis(14, w_0 * 5 // 2 + ax1)
                vc = T.spatial_axis(16, ax2)
                vrh = T.reduce_axis(3, ax3)
                vrw = T.reduce_axis(3, ax4)
                T.where(h_0 * 5 // 2 + ax0 < 14 and w_0 * 5 // 2 + ax1 < 14)
                with T.init():
                    B[vn, vh, vw, vc] = T.int8(-128)
                B[vn, vh, vw, vc] = T.max(B[vn, vh, vw, vc], A[vn, vh + vrh, vw + vrw, vc])
        for n_1, h_1, w_1, c_1, rh, rw in T.grid(1, 5, 5, 16, 3, 3):
            with T.block("C"):
                vn = T.spatial_axis(1, n_0 + n_1)
                vh = T.spatial_axis(24, h_0 * 5 + h_1)
                vw = T.spatial_axis(24, w_0 * 5 + w_1)
                vc = T.spatial_axis(16, c_0 * 16 + c_1)
                vrh = T.reduce_axis(3, rh)
                vrw = T.reduce_axis(3, rw)
                T.where(h_0 * 5 + h_1 < 24 and w_0 * 5 + w_1 < 24)
                with T.init():
                    C[vn, vh, vw, vc] = T.int8(-128)
                C[vn, vh, vw, vc] = T.max(C[vn, vh, vw, vc], B[vn, vh // 2 + vrh, vw // 2 + vrw, vc])


def _opaque(sch: Schedule, block: str) -> list[str]:
    return [iv.var.name for iv in sch.get_block_node(sch.get_block(block)).iter_vars if iv.kind is IterKind.OPAQUE]


def test_1d_rolling_buffer(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv_1d_twice, debug=True)
    _, i, _ = sch.get_loops(sch.get_block("C"))
    i_0, _ = sch.split(i, [2, 4])
    sch.compute_at(sch.get_block("B"), i_0)
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert [int(s.value) for s in sch.func.body.block.alloc_buffers[0].shape] == [4, 6]
    check_schedule(sch, conv_1d_twice, golden, "schedule/rolling_buffer_1d")


@pytest.mark.parametrize(
    ("sizes", "window", "name"),
    [
        ([1, 8, 4, 16], [1, 10, 6, 16], "w_tiled"),
        ([1, 4, 8, 16], [1, 6, 10, 16], "h_tiled"),
        ([1, 4, 4, 8], [1, 6, 10, 16], "h_w_c_tiled"),
        ([1, 6, 6, 16], [1, 8, 10, 16], "non_perfect_tiled"),
    ],
)
def test_cascade_max_pool2d(golden, sizes: list[int], window: list[int], name: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(max_pool_twice, debug=True)
    outer = _tile(sch, "C", sizes)
    sch.compute_at(sch.get_block("B"), outer[-1])
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert [int(s.value) for s in sch.func.body.block.alloc_buffers[0].shape] == window
    check_schedule(sch, max_pool_twice, golden, f"schedule/rolling_buffer_max_pool2d_{name}")


def test_cascade_3_max_pool2d_with_stride(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(max_pool_three_strided, debug=True)
    outer = _tile(sch, "C", [1, 4, 4, 16])
    sch.compute_at(sch.get_block("B_1"), outer[-1])
    sch.compute_at(sch.get_block("B_0"), outer[-1])
    sch.rolling_buffer(sch.get_block("B_0"), 0)
    sch.rolling_buffer(sch.get_block("B_1"), 0)
    shapes = [[int(s.value) for s in b.shape] for b in sch.func.body.block.alloc_buffers]
    assert shapes == [[1, 13, 22, 16], [1, 6, 10, 16]]
    check_schedule(sch, max_pool_three_strided, golden, "schedule/rolling_buffer_max_pool2d_3_strided")


def test_upscale(golden) -> None:  # type: ignore[no-untyped-def]
    # Not debug: the validator calls the producer's bindings (overlapping windows of
    # h_0 * 5 // 2) not quasi-affine and independent, before and after alike.
    sch = Schedule(upscale)
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert [int(s.value) for s in sch.func.body.block.alloc_buffers[0].shape] == [1, 5, 14, 16]
    # The windows move by 2 or 3 rows; 2 of 5 are skipped (a third is recomputed, harmlessly).
    check_schedule(sch, upscale, golden, "schedule/rolling_buffer_upscale")


# ---------------------------------------------------------------- refusals (TVM's three first)


@T.script
def two_writers(A: T.Buffer((1, 12, 12, 16), "int8"), C: T.Buffer((1, 12, 12, 16), "int8")):
    B = T.alloc_buffer((1, 12, 12, 16), "int8")
    for n, h_0, w_0, c_0 in T.grid(1, 3, 3, 1):
        for ax0, ax1, ax2 in T.grid(6, 6, 16):
            with T.block("B_writer_0"):
                vn = T.spatial_axis(1, n)
                vh = T.spatial_axis(12, h_0 * 4 + ax0)
                vw = T.spatial_axis(12, w_0 * 4 + ax1)
                vc = T.spatial_axis(16, ax2)
                T.where(h_0 * 4 + ax0 < 12 and w_0 * 4 + ax1 < 12)
                B[vn, vh, vw, vc] = A[vn, vh, vw, vc] + T.int8(1)
        for ax0, ax1, ax2 in T.grid(6, 6, 16):
            with T.block("B_writer_1"):
                vn = T.spatial_axis(1, n)
                vh = T.spatial_axis(12, h_0 * 4 + ax0)
                vw = T.spatial_axis(12, w_0 * 4 + ax1)
                vc = T.spatial_axis(16, ax2)
                T.where(h_0 * 4 + ax0 < 12 and w_0 * 4 + ax1 < 12)
                B[vn, vh, vw, vc] = B[vn, vh, vw, vc] + A[vn, vh, vw, vc] * T.int8(2)
        for ax0, ax1, ax2, ax3, ax4, ax5 in T.grid(1, 4, 4, 16, 3, 3):
            with T.block("C"):
                vn = T.spatial_axis(1, n + ax0)
                vh = T.spatial_axis(12, h_0 * 4 + ax1)
                vw = T.spatial_axis(12, w_0 * 4 + ax2)
                vc = T.spatial_axis(16, c_0 * 16 + ax3)
                vrh = T.reduce_axis(3, ax4)
                vrw = T.reduce_axis(3, ax5)
                with T.init():
                    C[vn, vh, vw, vc] = T.int8(-128)
                C[vn, vh, vw, vc] = T.max(C[vn, vh, vw, vc], B[vn, T.min(vh + vrh, 11), T.min(vw + vrw, 11), vc])


def test_fail_rolling_buffer_multi_writers() -> None:
    sch = Schedule(two_writers)
    with pytest.raises(ScheduleError, match=r"B has other writers \('B_writer_1'\).*one producer"):
        sch.rolling_buffer(sch.get_block("B_writer_0"), 0)
    assert sch.func is two_writers


@T.script
def tiles_without_overlap(A: T.Buffer((1, 12, 12, 16), "int8"), C: T.Buffer((1, 12, 12, 16), "int8")):
    B = T.alloc_buffer((1, 12, 12, 16), "int8")
    for n_0, h_0, w_0, c_0 in T.grid(1, 3, 3, 1):
        for ax0, ax1, ax2 in T.grid(4, 4, 16):
            with T.block("B"):
                vn = T.spatial_axis(1, 0)
                vh = T.spatial_axis(12, h_0 * 4 + ax0)
                vw = T.spatial_axis(12, w_0 * 4 + ax1)
                vc = T.spatial_axis(16, ax2)
                B[vn, vh, vw, vc] = A[vn, vh, vw, vc]
        for n_1, h_1, w_1, c_1, rh, rw in T.grid(1, 4, 4, 16, 1, 1):
            with T.block("C"):
                vn = T.spatial_axis(1, n_0 + n_1)
                vh = T.spatial_axis(12, h_0 * 4 + h_1)
                vw = T.spatial_axis(12, w_0 * 4 + w_1)
                vc = T.spatial_axis(16, c_0 * 16 + c_1)
                vrh = T.reduce_axis(1, rh)
                vrw = T.reduce_axis(1, rw)
                with T.init():
                    C[vn, vh, vw, vc] = T.int8(-128)
                C[vn, vh, vw, vc] = T.max(C[vn, vh, vw, vc], B[vn, vh + vrh, vw + vrw, vc])


def test_fail_rolling_buffer_not_match() -> None:
    sch = Schedule(tiles_without_overlap, debug=True)
    with pytest.raises(ScheduleError, match="overlaps the previous iteration's .* nothing to roll"):
        sch.rolling_buffer(sch.get_block("B"), 0)


def test_fail_rolling_buffer_injection_invalid() -> None:
    # B is tiled but not moved under C's tiles: no loop holds both.
    sch = Schedule(max_pool_twice, debug=True)
    _tile(sch, "C", [1, 4, 8, 16])
    _tile(sch, "B", [1, 4, 8, 16])
    with pytest.raises(ScheduleError, match=r"readers of B \('C'\) share no loop: compute_at the block"):
        sch.rolling_buffer(sch.get_block("B"), 0)


# ---------------------------------------------------------------- refusals (ours)


def _conv_1d_tiled() -> Schedule:
    sch = Schedule(conv_1d_twice, debug=True)
    _, i, _ = sch.get_loops(sch.get_block("C"))
    i_0, _ = sch.split(i, [2, 4])
    sch.compute_at(sch.get_block("B"), i_0)
    return sch


def test_rolling_buffer_refuses_a_bad_index_and_an_output() -> None:
    sch = _conv_1d_tiled()
    with pytest.raises(ScheduleError, match="write_buffer_index 1 is out of range"):
        sch.rolling_buffer(sch.get_block("B"), 1)
    with pytest.raises(ScheduleError, match="C is a function parameter"):
        sch.rolling_buffer(sch.get_block("C"), 0)


def test_rolling_buffer_refuses_parallel_tile_loops() -> None:
    sch = _conv_1d_tiled()
    c, i_0 = sch.get_loops(sch.get_block("C"))[:2]
    sch.parallel(c)
    with pytest.raises(ScheduleError, match="loop c: .* must run in order"):
        sch.rolling_buffer(sch.get_block("B"), 0)


def test_rolled_loops_are_not_parallel_any_more() -> None:
    sch = _conv_1d_tiled()
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert _opaque(sch, "B") == ["vi"] and _opaque(sch, "C") == ["vi"]
    with pytest.raises(ScheduleError):
        sch.parallel(sch.get_loops(sch.get_block("C"))[1])


def test_rolled_loops_keep_their_order() -> None:
    sch = Schedule(max_pool_twice, debug=True)
    outer = _tile(sch, "C", [1, 4, 4, 8])
    sch.compute_at(sch.get_block("B"), outer[-1])
    sch.rolling_buffer(sch.get_block("B"), 0)
    # Both tile loops whose windows overlap now carry values from one iteration to the next.
    assert _opaque(sch, "B") == ["vh", "vw"] and _opaque(sch, "C") == ["vh", "vw"]
    _, h_0, w_0, _ = sch.get_loops(sch.get_block("C"))[:4]
    with pytest.raises(ScheduleError, match="opaque iterator is bound to a moved loop"):
        sch.reorder(w_0, h_0)
    with pytest.raises(ScheduleError, match="opaque iterator cannot be parallelized"):
        sch.parallel(w_0)
    sch.fuse(h_0, w_0)  # same order
    check_numerics(max_pool_twice, sch.func)
    check_replay(sch, max_pool_twice)


# The producer's window has 6 rows per 4-row tile, but C reads 4 taps: 7 rows.
@T.script
def reads_past_the_window(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((11,), "int32")
    for i_0 in range(2):
        for ax0, ax1 in T.grid(6, 3):
            with T.block("B"):
                vi = T.spatial_axis(11, i_0 * 4 + ax0)
                vk = T.reduce_axis(3, ax1)
                with T.init():
                    B[vi] = 0
                B[vi] = B[vi] + A[vi + vk]
        for i_1, k in T.grid(4, 4):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(4, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[vi + vk]


def test_rolling_buffer_refuses_reads_outside_the_window() -> None:
    sch = Schedule(reads_past_the_window)
    with pytest.raises(ScheduleError, match=r"block 'C' reads B\[vi \+ vk\], not proved inside the producer's window"):
        sch.rolling_buffer(sch.get_block("B"), 0)


# D rewrites the producer's input A after each tile: a skipped element computed in the previous
# tile came from the old A.
@T.script
def input_changes(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in range(2):
        for ax0, ax1 in T.grid(6, 3):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                vk = T.reduce_axis(3, ax1)
                with T.init():
                    B[vi] = 0
                B[vi] = B[vi] + A[vi + vk]
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(3, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[vi + vk]
        for j in range(12):
            with T.block("D"):
                vj = T.spatial_axis(12, j)
                A[vj] = A[vj] + 1


def test_rolling_buffer_refuses_inputs_changed_under_the_tiles() -> None:
    sch = Schedule(input_changes)
    with pytest.raises(ScheduleError, match=r"reads A, which is written under the tile loops by 'D'"):
        sch.rolling_buffer(sch.get_block("B"), 0)


@T.script
def consumer_first(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in range(2):
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(3, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[vi + vk]
        for ax0, ax1 in T.grid(6, 3):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                vk = T.reduce_axis(3, ax1)
                with T.init():
                    B[vi] = 0
                B[vi] = B[vi] + A[vi + vk]


def test_rolling_buffer_refuses_a_consumer_before_the_producer() -> None:
    sch = Schedule(consumer_first)
    with pytest.raises(ScheduleError, match="block 'C' reads the buffer before the producer runs"):
        sch.rolling_buffer(sch.get_block("B"), 0)


# The producer writes every other row of its window: the box is not written whole.
@T.script
def strided_producer(A: T.Buffer((24,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((20,), "int32")
    for i_0 in range(2):
        for ax0 in range(6):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                B[vi * 2] = A[vi * 2]
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(3, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[(vi + vk) * 2]


def test_rolling_buffer_refuses_a_producer_not_indexed_by_its_iterators() -> None:
    sch = Schedule(strided_producer)
    with pytest.raises(
        ScheduleError, match=r"B is written at \[vi \* 2\]; each index must be its own spatial iterator"
    ):
        sch.rolling_buffer(sch.get_block("B"), 0)


@T.script
def reads_shifted(A: T.Buffer((13,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((11,), "int32")
    for i, k in T.grid(11, 3):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0
            B[vi] = B[vi] + A[vi + vk] * 2
    for i, k in T.grid(8, 3):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                C[vi] = 0
            C[vi] = C[vi] + B[vi + vk + 1]


def test_rolling_buffer_window_starting_past_a_multiple() -> None:
    # Beyond TVM's patterns: the window starts at i_0 * 4 + 1; the constant moves nothing.
    sch = Schedule(reads_shifted, debug=True)
    i_0, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [2, 4])
    sch.compute_at(sch.get_block("B"), i_0)
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert [int(s.value) for s in sch.func.body.block.alloc_buffers[0].shape] == [6]
    check_numerics(reads_shifted, sch.func)
    check_replay(sch, reads_shifted)


def test_rolling_buffer_refuses_a_window_moved_by_two_loops() -> None:
    sch = Schedule(conv_1d_twice, debug=True)
    _, i, _ = sch.get_loops(sch.get_block("C"))
    _, i_1, _ = sch.split(i, [2, 2, 2])
    sch.compute_at(sch.get_block("B"), i_1)
    with pytest.raises(ScheduleError, match=r"starts at i_0 \* 4 \+ i_1 \* 2; a rolling window starts at x \* s"):
        sch.rolling_buffer(sch.get_block("B"), 0)


# The predicate drops a tap of the reduction.
@T.script
def two_taps(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in range(2):
        for ax0, ax1 in T.grid(6, 3):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                vk = T.reduce_axis(3, ax1)
                T.where(ax1 < 2)
                with T.init():
                    B[vi] = 0
                B[vi] = B[vi] + A[vi + vk]
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(3, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[vi + vk]


def test_rolling_buffer_refuses_a_predicate_beyond_output_bounds() -> None:
    sch = Schedule(two_taps)
    with pytest.raises(ScheduleError, match="loop ax1 drives a reduce iterator and a spatial one or the predicate"):
        sch.rolling_buffer(sch.get_block("B"), 0)


@T.script
def two_outputs(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32"), D: T.Buffer((10,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in range(2):
        for ax0 in range(6):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                B[vi] = A[vi] * 2
                D[vi] = A[vi] + 1
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(3, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[vi + vk]


def test_rolling_buffer_refuses_a_block_with_other_outputs() -> None:
    sch = Schedule(two_outputs)
    with pytest.raises(ScheduleError, match="writes buffers besides B; skipping its instances would lose them"):
        sch.rolling_buffer(sch.get_block("B"), 0)


# The predicate cuts each tile's window, not the buffer: the window is not what the loops say.
@T.script
def cut_tiles(A: T.Buffer((12,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((10,), "int32")
    for i_0 in range(2):
        for ax0 in range(6):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                T.where(ax0 < 5)
                B[vi] = A[vi] * 2
        for i_1, k in T.grid(4, 2):
            with T.block("C"):
                vi = T.spatial_axis(8, i_0 * 4 + i_1)
                vk = T.reduce_axis(2, k)
                with T.init():
                    C[vi] = 0
                C[vi] = C[vi] + B[vi + vk]


def test_rolling_buffer_refuses_a_predicate_that_is_no_bound_on_the_output() -> None:
    sch = Schedule(cut_tiles)
    with pytest.raises(
        ScheduleError, match="predicate term ax0 < 5 is not a constant bound on one index of its output"
    ):
        sch.rolling_buffer(sch.get_block("B"), 0)


# ---------------------------------------------------------------- random tilings


def test_rolling_buffer_random_tilings_are_refused_or_correct() -> None:
    """Tile sizes, tile loop orders and compute_at depths drawn at random (fixed seed): every
    rolling_buffer either refuses or keeps the result (interpreter)."""
    rng = random.Random(0)
    accepted = 0
    for _ in range(16):
        func = rng.choice([max_pool_twice, max_pool_three_strided])
        sch = Schedule(func)
        sizes = [1, rng.choice([2, 3, 4, 5]), rng.choice([2, 3, 4, 5]), rng.choice([4, 8, 16])]
        outer, inner = [], []
        for loop, size in zip(sch.get_loops(sch.get_block("C")), sizes):
            o, i = sch.split(loop, [None, size])
            outer.append(o)
            inner.append(i)
        rng.shuffle(outer)
        sch.reorder(*outer, *inner)
        producers = ["B"] if func is max_pool_twice else ["B_1", "B_0"]
        at = outer[rng.randrange(1, 4)]
        for name in producers:
            sch.compute_at(sch.get_block(name), at)
        try:
            for name in producers[:: rng.choice([1, -1])]:
                sch.rolling_buffer(sch.get_block(name), 0)
                accepted += 1
        except ScheduleError as error:
            assert "nothing to roll" in error.rule, error
        check_numerics(func, sch.func, llvm=False)
    assert accepted >= 8
