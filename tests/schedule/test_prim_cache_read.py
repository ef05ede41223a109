"""cache_read: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_testing import (
    assert_same_outputs,
    check_numerics,
    check_replay,
    check_schedule,
    run_interp,
    run_llvm,
)

import tir
import tir.script as T
from tir.analysis.tree import TreeIndex
from tir.ir import Allocate, IRVisitor
from tir.schedule import Schedule, ScheduleError
from tir.transform import lower


@T.script
def pipeline(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
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
def matmul(A: T.Buffer((32, 24), "float32"), B: T.Buffer((24, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 24):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def window(A: T.Buffer((16, 20), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj + 2] + A[vi, vj + 4]


@T.script
def scale(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


@T.script
def two_readers(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + 1.0


@T.script
def tiles(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("outer"):
            vo = T.remap("S", io)
            for ii in range(4):
                with T.block("B"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + 1.0


@T.script
def overwrite_between(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("W"):
            vi = T.remap("S", i)
            A[vi] = 0.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + 1.0


@T.script
def in_place(A: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("A"):
            vi = T.remap("S", i)
            A[vi] = A[vi] * 2.0


@T.script
def init_nested(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("outer"):
            vi = T.remap("S", i)
            for k in range(8):
                with T.block("red"):
                    vk = T.remap("R", k)
                    with T.init():
                        for z in range(1):
                            with T.block("zero"):
                                vz = T.spatial_axis(1, z)  # noqa: F841 - the block needs an iterator
                                B[vi] = A[vi, 0] * 0.0
                    B[vi] = B[vi] + A[vi, vk]


@T.script
def let_bound(A: T.Buffer((32,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        x = i * 2
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            vx = T.spatial_axis(32, x)
            B[vi] = A[vx]


@T.script
def root_reads(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    with T.block("root"):
        T.reads(A[0:16])
        T.writes(B[0:16])
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0


@T.script
def view_reader(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("C"):
            vo = T.remap("S", io)
            Av = T.match_buffer(A[vo * 4 : vo * 4 + 4], (4,), "float32")
            T.reads(Av[0:4])
            T.writes(C[vo * 4 : vo * 4 + 4])
            for ii in range(4):
                C[vo * 4 + ii] = Av[ii] + 1.0


@T.script
def gather(A: T.Buffer((16,), "float32"), Idx: T.Buffer((4,), "int32"), B: T.Buffer((4, 4), "float32")):
    for o in range(4):
        with T.block("outer"):
            vo = T.remap("S", o)
            for i in range(4):
                with T.block("B"):
                    vi = T.remap("S", i)
                    B[vo, vi] = A[Idx[vo] + vi]


@T.script
def partial_producer(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(10):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + 1.0


def read_buffers(sch: Schedule, name: str) -> list[str]:
    """The buffers block ``name`` reads (looked up without recording anything in the trace)."""
    return [region.buffer.name for region in TreeIndex(sch.func).blocks[name].block.reads]


def loop_extents(sch: Schedule, name: str) -> list[int]:
    """The extents of the loops around block ``name`` in its scope."""
    index = TreeIndex(sch.func)
    return [loop.extent.value for loop in index.loops_above(index.blocks[name])]


# ---------------------------------------------------------------- goldens and numerics


def test_cache_read_of_an_intermediate_goes_between_producer_and_consumer(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline)
    cache = sch.cache_read(sch.get_block("C"), 0, "local")
    assert cache.block_name == "B_local"
    assert read_buffers(sch, "C") == ["B_local"]
    check_schedule(sch, pipeline, golden, "schedule/cache_read_intermediate")


def test_cache_read_both_matmul_operands(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    assert read_buffers(sch, "C") == ["C", "A", "B"]
    sch.cache_read(block, 1, "global")
    sch.cache_read(block, 2, "shared")
    assert read_buffers(sch, "C") == ["C", "A_global", "B_shared"]
    check_schedule(sch, matmul, golden, "schedule/cache_read_matmul")


def test_cache_read_and_cache_write_take_a_buffer_by_name() -> None:
    """TVM's ``cache_read("C", "A", "global")``: block and buffer by name, the same program and a
    trace that replays; a name the block does not read is refused with the names it does."""
    by_index, by_name = Schedule(matmul), Schedule(matmul)
    by_index.cache_read(by_index.get_block("C"), 1, "global")
    by_index.cache_write(by_index.get_block("C"), 0, "local")
    by_name.cache_read("C", "A", "global")
    by_name.cache_write("C", "C", "local")
    tir.assert_structural_equal(by_name.func, by_index.func)
    check_replay(by_name, matmul)
    with pytest.raises(ScheduleError, match=r"buffer index 'D' is out of range: the block reads 3 buffer\(s\)"):
        Schedule(matmul).cache_read("C", "D", "global")


def test_cache_read_copies_only_the_region_read(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(window)
    sch.cache_read(sch.get_block("B"), 0, "global")
    assert loop_extents(sch, "A_global") == [16, 18]
    check_schedule(sch, window, golden, "schedule/cache_read_window")


def test_cache_read_region_is_clamped_to_the_buffer(golden) -> None:  # type: ignore[no-untyped-def]
    # After split(i, [None, 32]) the loops sweep 128 rows; the T.where keeps 100 of them.
    sch = Schedule(scale)
    block = sch.get_block("B")
    i, _ = sch.get_loops(block)
    sch.split(i, [None, 32])
    sch.cache_read(block, 0, "local")
    assert loop_extents(sch, "A_local") == [100, 8]
    check_schedule(sch, scale, golden, "schedule/cache_read_clamped")


def test_cache_read_region_honours_the_predicate_of_a_split_loop() -> None:
    # After split(i, [None, 4]) the loops sweep vi over 0..11 and the T.where keeps 0..9. The
    # copy must read B[0:10], what the producer wrote; B[10:12] is inside the buffer but
    # written by no block (the fuzzer's cache_read of a cache_read, reverse_gather kernel).
    sch = Schedule(partial_producer)
    block = sch.get_block("C")
    (i,) = sch.get_loops(block)
    sch.split(i, [None, 4])
    sch.cache_read(block, 0, "local")
    assert loop_extents(sch, "B_local") == [10]
    assert not tir.analysis.verify(sch.func)
    check_numerics(partial_producer, sch.func)
    check_replay(sch, partial_producer)


def test_cache_read_redirects_only_the_named_consumers(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(two_readers)
    sch.cache_read(sch.get_block("B"), 0, "global")
    assert read_buffers(sch, "B") == ["A_global"]
    assert read_buffers(sch, "C") == ["A"]  # by default only the given block reads the copy

    sch = Schedule(two_readers)
    b, c = sch.get_block("B"), sch.get_block("C")
    sch.cache_read(b, 0, "global", consumer_blocks=[b, c])
    assert read_buffers(sch, "B") == ["A_global"]
    assert read_buffers(sch, "C") == ["A_global"]
    check_schedule(sch, two_readers, golden, "schedule/cache_read_two_consumers")


def test_cache_read_inside_a_nested_block_scope(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(tiles)
    sch.cache_read(sch.get_block("B"), 0, "local")
    outer = TreeIndex(sch.func).blocks["outer"].block
    assert [buffer.name for buffer in outer.alloc_buffers] == ["A_local"]
    assert loop_extents(sch, "A_local") == [4]
    check_schedule(sch, tiles, golden, "schedule/cache_read_nested_scope")


def test_cache_read_of_a_data_dependent_region_copies_the_whole_dimension() -> None:
    # The region A[Idx[vo]:Idx[vo] + 4] depends on memory; the copy takes all of A instead.
    sch = Schedule(gather)
    sch.cache_read(sch.get_block("B"), 0, "local")
    assert loop_extents(sch, "A_local") == [16]
    args = [np.arange(16, dtype="float32"), np.array([0, 3, 12, 5], dtype="int32"), np.zeros((4, 4), "float32")]
    expected = run_interp(gather, args)
    assert_same_outputs(expected, run_interp(sch.func, args), gather)
    assert_same_outputs(expected, run_llvm(sch.func, args), gather)
    check_replay(sch, gather)


def test_cache_read_names_stay_unique() -> None:
    sch = Schedule(two_readers)
    first = sch.cache_read(sch.get_block("B"), 0, "global")
    second = sch.cache_read(sch.get_block("C"), 0, "global")
    assert (first.block_name, second.block_name) == ("A_global", "A_global_1")
    assert read_buffers(sch, "C") == ["A_global_1"]
    assert "A_global_1 = T.alloc_buffer" in sch.func.script()


def test_cache_read_then_compute_at_packs_a_tile(golden) -> None:  # type: ignore[no-untyped-def]
    # The classic packing pattern: copy the panel of B one column tile of C needs, per tile.
    sch = Schedule(matmul)
    block = sch.get_block("C")
    _, j, _ = sch.get_loops(block)
    j_outer, _ = sch.split(j, [None, 8])
    i, _, j_inner, k = sch.get_loops(block)
    sch.reorder(j_outer, i, j_inner, k)
    pack = sch.cache_read(block, 2, "global")
    sch.compute_at(pack, j_outer)
    assert loop_extents(sch, "B_global") == [4, 24, 8]
    check_schedule(sch, matmul, golden, "schedule/cache_read_packing")
    # Lowering shrinks the packed buffer to one 24 x 8 panel.
    sizes = []

    class Sizes(IRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            sizes.append((node.buffer.name, node.buffer.shape[0].value))
            self.generic_visit(node)

    Sizes().visit(lower(sch.func)["matmul"].body)
    assert sizes == [("B_global", 24 * 8)]


# ---------------------------------------------------------------- preconditions


def refused(sch: Schedule, original: tir.PrimFunc, message: str, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScheduleError, match=message):
        sch.cache_read(*args, **kwargs)
    assert tir.structural_equal(sch.func, original)  # a refused primitive changes nothing


def test_cache_read_rejects_a_buffer_index_out_of_range() -> None:
    sch = Schedule(pipeline)
    refused(sch, pipeline, r"cache_read: block 'C': buffer index 1 is out of range", sch.get_block("C"), 1, "local")


def test_cache_read_rejects_an_unknown_scope() -> None:
    sch = Schedule(pipeline)
    refused(sch, pipeline, r"unknown storage scope 'texture'", sch.get_block("C"), 0, "texture")


def test_cache_read_rejects_a_consumer_that_does_not_read_the_buffer() -> None:
    sch = Schedule(pipeline)
    b, c = sch.get_block("B"), sch.get_block("C")
    refused(sch, pipeline, r"consumer block 'C' does not read A", b, 0, "local", consumer_blocks=[b, c])


def test_cache_read_rejects_a_consumer_that_writes_the_buffer() -> None:
    sch = Schedule(in_place)
    refused(sch, in_place, r"consumer block 'A' writes A as well", sch.get_block("A"), 0, "local")


def test_cache_read_rejects_consumers_in_different_scopes() -> None:
    sch = Schedule(tiles)
    b, c = sch.get_block("B"), sch.get_block("C")
    refused(sch, tiles, r"consumer blocks must be in one block scope", b, 0, "local", consumer_blocks=[b, c])


def test_cache_read_rejects_a_write_between_copy_and_consumers() -> None:
    sch = Schedule(overwrite_between)
    b, c = sch.get_block("B"), sch.get_block("C")
    refused(
        sch,
        overwrite_between,
        r"A is written between the place of the copy and the last consumer",
        b,
        0,
        "global",
        consumer_blocks=[b, c],
    )


def test_cache_read_rejects_a_consumer_inside_an_init() -> None:
    sch = Schedule(init_nested)
    refused(sch, init_nested, r"the consumer is inside the init of 'red'", sch.get_block("zero"), 0, "global")


def test_cache_read_rejects_an_empty_consumer_list() -> None:
    sch = Schedule(pipeline)
    refused(sch, pipeline, r"consumer_blocks is empty", sch.get_block("C"), 0, "local", consumer_blocks=[])


def test_cache_read_rejects_a_region_it_cannot_express_outside_the_loops() -> None:
    sch = Schedule(let_bound)
    refused(
        sch, let_bound, r"cannot express the region of A it reads outside its loops", sch.get_block("B"), 0, "local"
    )


def test_cache_read_rejects_the_root_block() -> None:
    sch = Schedule(root_reads)
    refused(sch, root_reads, r"the root block has no scope to put the copy in", sch.get_block("root"), 0, "global")


def test_cache_read_rejects_a_buffer_not_defined_in_the_scope() -> None:
    sch = Schedule(view_reader)
    refused(sch, view_reader, r"Av is not defined in the scope of block 'root'", sch.get_block("C"), 0, "local")


# ---------------------------------------------------------------- int64 shapes (TVM's elementwise_shape_int64)


@T.script
def shape_int64(A: T.Buffer((T.int64(16), T.int64(8)), "float32"), C: T.Buffer((T.int64(16), T.int64(8)), "float32")):
    B = T.alloc_buffer((T.int64(16), T.int64(8)), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


def test_cache_read_of_an_int64_shaped_buffer_read_with_int32_indices(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(shape_int64, debug=True)
    sch.cache_read(sch.get_block("B"), 0, "global")
    sch.cache_read(sch.get_block("C"), 0, "local")
    check_schedule(sch, shape_int64, golden, "schedule/cache_read_int64_shape")


# ---------------------------------------------------------------- placement next to the producer (TVM's cache_read_location)


@T.script
def tile_producer(X: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    A = T.alloc_buffer((64,), "float32")
    for i in range(4):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(64, i * 16 + j)
                A[vi] = X[vi] + 1.0
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(64, i * 16 + j)
                B[vi] = A[vi] * 2.0
    for i in range(64):
        with T.block("C"):
            vi = T.spatial_axis(64, i)
            C[vi] = A[vi] + 3.0


def test_cache_read_goes_after_a_producer_in_the_same_loop(golden) -> None:  # type: ignore[no-untyped-def]
    # A is produced a tile at a time in loop i, and B reads each tile right after: the copy
    # goes between them, per iteration; C keeps reading A.
    sch = Schedule(tile_producer, debug=True)
    sch.cache_read(sch.get_block("B"), 0, "global")
    check_schedule(sch, tile_producer, golden, "schedule/cache_read_after_tile_producer")


def test_cache_read_for_a_consumer_after_the_loop_goes_before_it() -> None:
    sch = Schedule(tile_producer, debug=True)
    sch.cache_read(sch.get_block("B"), 0, "global", consumer_blocks=[sch.get_block("C")])
    check_numerics(tile_producer, sch.func)
    text = sch.func.script()
    assert text.index('T.block("A_global")') > text.index('T.block("B")')


def test_cache_read_for_consumers_on_both_sides_of_the_producer_loop_end(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_cache_read_location, consumer_blocks=[B, C] (also what TVM does by default):
    # the copy goes after the producer inside loop i, copying one tile per iteration; B reads
    # it in the same iteration, C after the loop, when the copies of all iterations together
    # hold all of A (each tile is copied after its last write, and the tiles cover A[0:64]).
    sch = Schedule(tile_producer, debug=True)
    sch.cache_read(sch.get_block("B"), 0, "global", consumer_blocks=[sch.get_block("B"), sch.get_block("C")])
    assert read_buffers(sch, "B") == read_buffers(sch, "C") == ["A_global"]
    assert loop_extents(sch, "A_global") == [4, 16]
    check_schedule(sch, tile_producer, golden, "schedule/cache_read_both_sides_of_tile_producer")


@T.script
def tile_producer_cached(X: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    A = T.alloc_buffer((64,), "float32")
    A_global = T.alloc_buffer((64,), "float32")
    for i in range(4):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(64, i * 16 + j)
                A[vi] = X[vi] + 1.0
        for ax0 in range(16):
            with T.block("A_global"):
                v0 = T.spatial_axis(64, i * 16 + ax0)
                A_global[v0] = A[v0]
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(64, i * 16 + j)
                B[vi] = A_global[vi] * 2.0
    for i in range(64):
        with T.block("C"):
            vi = T.spatial_axis(64, i)
            C[vi] = A_global[vi] + 3.0


@pytest.mark.parametrize("use_block_name", [False, True], ids=["block_obj", "block_name"])
def test_cache_read_location(use_block_name: bool) -> None:
    # TVM's test_cache_read_location, all three schedules, with handles and with names.
    def blocks(sch: Schedule, *names: str) -> list:  # type: ignore[type-arg]
        return list(names) if use_block_name else [sch.get_block(name) for name in names]

    sch = Schedule(tile_producer, debug=True)
    (b,) = blocks(sch, "B")
    sch.cache_read(b, 0, "global")  # ours redirects only B by default; TVM's default is [B, C]
    assert read_buffers(sch, "B") == ["A_global"] and read_buffers(sch, "C") == ["A"]
    check_numerics(tile_producer, sch.func)
    check_replay(sch, tile_producer)

    sch = Schedule(tile_producer, debug=True)
    b, c = blocks(sch, "B", "C")
    sch.cache_read(b, 0, "global", consumer_blocks=[c])
    assert read_buffers(sch, "B") == ["A"] and read_buffers(sch, "C") == ["A_global"]
    assert loop_extents(sch, "A_global") == [64]
    check_numerics(tile_producer, sch.func)
    check_replay(sch, tile_producer)

    sch = Schedule(tile_producer, debug=True)
    b, c = blocks(sch, "B", "C")
    sch.cache_read(b, 0, "global", consumer_blocks=[b, c])
    tir.assert_structural_equal(sch.func, tile_producer_cached)
    check_numerics(tile_producer, sch.func)
    check_replay(sch, tile_producer)


@T.script
def rewritten_after_copy(X: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    A = T.alloc_buffer((64,), "float32")
    for i in range(4):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(64, i * 16 + j)
                A[vi] = X[vi] + 1.0
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(64, i * 16 + j)
                B[vi] = A[vi] * 2.0
        for j in range(16):
            with T.block("A2"):
                vi = T.spatial_axis(64, i * 16 + j)
                A[vi] = A[vi] + 5.0
    for i in range(64):
        with T.block("C"):
            vi = T.spatial_axis(64, i)
            C[vi] = A[vi] + 3.0


@T.script
def strided_tiles(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    for i in range(4):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(128, i * 32 + j)
                A[vi] = A[vi] + 1.0
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(128, i * 32 + j)
                B[vi] = A[vi] * 2.0
    for i in range(128):
        with T.block("C"):
            vi = T.spatial_axis(128, i)
            C[vi] = A[vi] + 3.0


@T.script
def short_tiles(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32"), C: T.Buffer((128,), "float32")):
    for i in range(4):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(128, i * 16 + j)
                A[vi] = A[vi] + 1.0
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(128, i * 16 + j)
                B[vi] = A[vi] * 2.0
    for i in range(128):
        with T.block("C"):
            vi = T.spatial_axis(128, i)
            C[vi] = A[vi] + 3.0


@T.script
def parallel_tiles(X: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    A = T.alloc_buffer((64,), "float32")
    for i in T.parallel(4):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(64, i * 16 + j)
                A[vi] = X[vi] + 1.0
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(64, i * 16 + j)
                B[vi] = A[vi] * 2.0
    for i in range(64):
        with T.block("C"):
            vi = T.spatial_axis(64, i)
            C[vi] = A[vi] + 3.0


@pytest.mark.parametrize(
    "program,message",
    [
        (rewritten_after_copy, r"A is written in the loop nest of the copy after the copy; 'C', after the nest"),
        (strided_tiles, r"cannot prove the copies in the loop nest cover what 'C' read of A after it \(loop i steps"),
        (short_tiles, r"the copies in the loop nest cover .* of dimension 0 of A, but 'C' after it read"),
        (parallel_tiles, r"loop i around the copy is parallel; 'C', after it, read what the last iteration copied"),
    ],
    ids=["written_after_copy", "gap", "not_covered", "parallel"],
)
def test_cache_read_refuses_a_consumer_after_the_loop_it_cannot_prove(program: tir.PrimFunc, message: str) -> None:
    sch = Schedule(program)
    b, c = sch.get_block("B"), sch.get_block("C")
    refused(sch, program, message, b, 0, "global", consumer_blocks=[b, c])
