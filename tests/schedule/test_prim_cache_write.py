"""cache_write: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.analysis.tree import TreeIndex
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul(A: T.Buffer((32, 24), "float32"), B: T.Buffer((24, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 24):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


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
def scale(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


@T.script
def tiles(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("outer"):
            vo = T.remap("S", io)
            for ii in range(4):
                with T.block("B"):
                    vi = T.spatial_axis(16, vo * 4 + ii)
                    B[vi] = A[vi] * 2.0


@T.script
def rows(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16, 4), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            for j in range(4):
                B[vi, j] = A[vi, j] * 2.0


@T.script
def guarded(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        if i < 8:
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0


@T.script
def accumulate(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = B[vi] + A[vi]


@T.script
def mirror(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
            B[vi] = B[vi] + B[15 - vi]


@T.script
def conditional_store(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            if A[vi] > 0.0:
                B[vi] = A[vi]


@T.script
def reading_init(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 4):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = B[vi] * 0.5
            B[vi] = B[vi] + A[vi, vk]


@T.script
def reversed_reduction(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 4):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            vk = T.reduce_axis(4, 3 - k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def every_other(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(32, i * 2)
            B[vi] = A[vi]


@T.script
def diagonal(A: T.Buffer((16,), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            vj = T.spatial_axis(16, i)
            B[vi, vj] = A[vi]


@T.script
def halves(A: T.Buffer((16,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(8, i // 2)
            B[vi] = A[vi]


@T.script
def scatter(A: T.Buffer((16,), "float32"), Idx: T.Buffer((16,), "int32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[Idx[vi]] = A[vi]


@T.script
def evens(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            T.where(i % 2 == 0)
            B[vi] = A[vi]


@T.script
def symbolic_reduction(A: T.Buffer((16, n), "float32"), B: T.Buffer((16,), "float32"), n: T.int32):  # noqa: F821
    for i, k in T.grid(16, n):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += A[vi, vk]


@T.script
def triangle(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        for j in range(i):
            with T.block("B"):
                vi = T.spatial_axis(16, i)
                vj = T.spatial_axis(16, j)
                B[vi, vj] = A[vi, vj]


@T.script
def same_nest(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + 1.0


@T.script
def two_regions(A: T.Buffer((16,), "float32"), B: T.Buffer((32,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            T.writes(B[vi], B[vi + 16])
            B[vi] = A[vi]
            B[vi + 16] = A[vi]


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
def root_writes(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    with T.block("root"):
        T.reads(A[0:16])
        T.writes(B[0:16])
        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0


@T.script
def view_writer(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("B"):
            vo = T.remap("S", io)
            Bv = T.match_buffer(B[vo * 4 : vo * 4 + 4], (4,), "float32")
            T.reads(A[vo * 4])
            T.writes(Bv[0])
            Bv[0] = A[vo * 4] + 1.0


def block_node(sch: Schedule, name: str) -> tir.ir.Block:
    """The block named ``name`` (looked up without recording anything in the trace)."""
    return TreeIndex(sch.func).blocks[name].block


# ---------------------------------------------------------------- goldens and numerics


def test_cache_write_of_a_reduction_with_cache_read_of_both_operands(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    sch.cache_read(block, 1, "global")
    sch.cache_read(block, 2, "global")
    copy = sch.cache_write(block, 0, "local")
    assert copy.block_name == "C_local"
    node = block_node(sch, "C")
    assert [r.buffer.name for r in node.writes] == ["C_local"]
    assert [r.buffer.name for r in node.reads] == ["C_local", "A_global", "B_global"]
    check_schedule(sch, matmul, golden, "schedule/cache_write_matmul")


def test_cache_write_of_an_intermediate_goes_before_its_readers(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline)
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert [r.buffer.name for r in block_node(sch, "C").reads] == ["B"]  # other readers keep reading B
    check_schedule(sch, pipeline, golden, "schedule/cache_write_intermediate")


def test_cache_write_under_a_split_copies_back_only_the_rows_written(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    block = sch.get_block("B")
    i, _ = sch.get_loops(block)
    sch.split(i, [None, 32])
    sch.cache_write(block, 0, "local")
    index = TreeIndex(sch.func)
    assert [loop.extent.value for loop in index.loops_above(index.blocks["B_local"])] == [100, 8]
    check_schedule(sch, scale, golden, "schedule/cache_write_split")


def test_cache_write_of_a_reduction_split_with_a_predicate(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    k_outer, k_inner = sch.split(k, [None, 5])  # 5 * 5 > 24: a T.where on the reduction
    sch.reorder(k_outer, i, j, k_inner)
    sch.cache_write(block, 0, "local")
    check_schedule(sch, matmul, golden, "schedule/cache_write_split_reduction")


def test_cache_write_inside_a_nested_block_scope(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(tiles)
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert [b.name for b in block_node(sch, "outer").alloc_buffers] == ["B_local"]
    check_schedule(sch, tiles, golden, "schedule/cache_write_nested_scope")


def test_cache_write_then_reverse_compute_at_copies_back_per_tile(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, 8])
    j_outer, j_inner = sch.split(j, [None, 8])
    sch.reorder(i_outer, j_outer, i_inner, j_inner, k)
    copy = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(copy, j_outer)
    check_schedule(sch, matmul, golden, "schedule/cache_write_per_tile")


def test_cache_write_names_stay_unique() -> None:
    sch = Schedule(pipeline)
    first = sch.cache_write(sch.get_block("B"), 0, "local")
    second = sch.cache_write(first, 0, "local")
    assert (first.block_name, second.block_name) == ("B_local", "B_local_1")
    check_numerics(pipeline, sch.func)


# ---------------------------------------------------------------- preconditions


def refused(sch: Schedule, original: tir.PrimFunc, message: str, index: int = 0, scope: str = "local") -> None:
    with pytest.raises(ScheduleError, match=message):
        sch.cache_write(sch.get_block("B"), index, scope)
    assert tir.structural_equal(sch.func, original)  # a refused primitive changes nothing


def test_cache_write_rejects_a_buffer_index_out_of_range() -> None:
    refused(Schedule(scale), scale, r"cache_write: block 'B': buffer index 1 is out of range", index=1)


def test_cache_write_rejects_an_unknown_scope() -> None:
    refused(Schedule(scale), scale, r"unknown storage scope 'registers'", scope="registers")


def test_cache_write_rejects_the_root_block() -> None:
    sch = Schedule(root_writes)
    with pytest.raises(ScheduleError, match=r"the root block has no scope to put the copy in"):
        sch.cache_write(sch.get_block("root"), 0, "local")
    assert tir.structural_equal(sch.func, root_writes)


def test_cache_write_rejects_a_block_inside_an_init() -> None:
    sch = Schedule(init_nested)
    with pytest.raises(ScheduleError, match=r"the block is inside the init of 'red'"):
        sch.cache_write(sch.get_block("zero"), 0, "local")
    assert tir.structural_equal(sch.func, init_nested)


def test_cache_write_rejects_two_write_regions_of_the_buffer() -> None:
    refused(Schedule(two_regions), two_regions, r"the block lists 2 write regions of B")


def test_cache_write_of_a_tile_written_by_a_loop_of_stores() -> None:
    sch = Schedule(rows, debug=True)
    sch.cache_write(sch.get_block("B"), 0, "local")
    check_numerics(rows, sch.func)
    check_replay(sch, rows)


@T.script
def rows_then_shift(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16, 4), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            for j in range(4):
                B[vi, j] = A[vi, j] * 2.0
            B[vi, 0] = B[vi, 3]


def test_cache_write_rejects_a_tile_accessed_outside_a_child_block() -> None:
    refused(
        Schedule(rows_then_shift),
        rows_then_shift,
        r"the block writes a tile of B and accesses it outside a child block \(other than a nest of loops",
    )


def test_cache_write_rejects_a_block_under_an_if() -> None:
    refused(Schedule(guarded), guarded, r"the block is under an if inside its scope")


def test_cache_write_rejects_other_elements_touched() -> None:
    refused(Schedule(mirror), mirror, r"the block touches B elsewhere than the element it writes")


def test_cache_write_rejects_a_read_before_the_write() -> None:
    refused(Schedule(accumulate), accumulate, r"the block must store to B unconditionally before anything else")


def test_cache_write_rejects_a_conditional_store() -> None:
    refused(
        Schedule(conditional_store), conditional_store, r"the block must store to B unconditionally before anything"
    )


def test_cache_write_rejects_an_init_that_reads_the_buffer() -> None:
    refused(Schedule(reading_init), reading_init, r"its init must store to B unconditionally")


def test_cache_write_rejects_an_init_not_run_first() -> None:
    refused(
        Schedule(reversed_reduction),
        reversed_reduction,
        r"cannot prove the first instance of each element of B runs the init",
    )


@pytest.mark.parametrize(
    "program,detail",
    [
        (every_other, r"loop i has coefficient 2, expected 1"),
        (diagonal, r"loop i feeds indices 0 and 1"),
        (halves, r"not a sum of loop variables times constants"),
        (scatter, r"index 0 is Idx\[i\], which reads memory"),
        (evens, r"the predicate i % 2 == 0 is not an upper bound on one index"),
        (symbolic_reduction, r"loop k may run no iteration"),
    ],
    ids=["coefficient", "coupled", "nonlinear", "data_dependent", "predicate", "empty_loop"],
)
def test_cache_write_rejects_writes_that_are_not_a_dense_box(program: tir.PrimFunc, detail: str) -> None:
    refused(Schedule(program), program, r"cannot prove the instances write a dense box of B \(.*" + detail)


def test_cache_write_rejects_loop_bounds_depending_on_outer_loops() -> None:
    refused(Schedule(triangle), triangle, r"loop j has bounds that depend on outer loops")


def test_cache_write_copies_back_inside_a_loop_nest_shared_with_a_reader() -> None:
    sch = Schedule(same_nest, debug=True)
    sch.cache_write(sch.get_block("B"), 0, "local")
    check_numerics(same_nest, sch.func)
    text = sch.func.script()
    assert text.index('T.block("B_local")') < text.index('T.block("C")')


def test_cache_write_rejects_a_buffer_not_defined_in_the_scope() -> None:
    refused(Schedule(view_writer), view_writer, r"Bv is not defined in the scope of block 'root'")


def test_cache_write_of_an_int64_shaped_buffer_written_with_int32_indices() -> None:
    from test_prim_cache_read import shape_int64

    sch = Schedule(shape_int64, debug=True)
    sch.cache_write(sch.get_block("B"), 0, "local")
    check_numerics(shape_int64, sch.func)
    check_replay(sch, shape_int64)


def test_cache_write_copies_back_before_a_consumer_in_the_same_loop(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's cache_write_location: A is written a tile at a time and B reads each tile in the
    # same iteration, so the copy back goes between them.
    from test_prim_cache_read import tile_producer

    sch = Schedule(tile_producer, debug=True)
    sch.cache_write(sch.get_block("A"), 0, "global")
    check_schedule(sch, tile_producer, golden, "schedule/cache_write_before_tile_consumer")


# ---------------------------------------------------------------- consumer_blocks (TVM's test_cache_write_location)


def write_block_buffers(sch: Schedule, name: str) -> tuple[list[str], list[str]]:
    block = block_node(sch, name)
    return [r.buffer.name for r in block.reads], [w.buffer.name for w in block.writes]


@pytest.mark.parametrize(
    "consumers,golden_name",
    [(["B"], "cache_write_location_b"), (["C"], "cache_write_location_c"), (["B", "C"], "cache_write_location_bc")],
    ids=["B", "C", "B_C"],
)
def test_cache_write_location(golden, consumers: list[str], golden_name: str) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_cache_write_location: the named consumers read A_global; the copy back goes
    # before the first reader of A that is not one of them (after loop i when only C reads A,
    # between the blocks in loop i when B does).
    from test_prim_cache_read import tile_producer

    sch = Schedule(tile_producer, debug=True)
    sch.cache_write(sch.get_block("A"), 0, "global", consumer_blocks=[sch.get_block(name) for name in consumers])
    for name in ("B", "C"):
        assert write_block_buffers(sch, name)[0] == (["A_global"] if name in consumers else ["A"])
    check_schedule(sch, tile_producer, golden, f"schedule/{golden_name}")

    by_name = Schedule(tile_producer, debug=True)
    by_name.cache_write("A", 0, "global", consumer_blocks=consumers)
    tir.assert_structural_equal(by_name.func, sch.func)
    check_replay(by_name, tile_producer)


@T.script
def under_scope(B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    A = T.alloc_buffer((128, 128), "float32")
    for i0, j0 in T.grid(8, 8):
        with T.block("scope"):
            i, j = T.remap("SS", i0, j0)
            for x, y in T.grid(16, 16):
                with T.block("A"):
                    vi = T.spatial_axis(128, i * 16 + x)
                    vj = T.spatial_axis(128, j * 16 + y)
                    A[vi, vj] = T.cast(vi * 128 + vj, "float32")
            for x, y in T.grid(16, 16):
                with T.block("B"):
                    vi = T.spatial_axis(128, i * 16 + x)
                    vj = T.spatial_axis(128, j * 16 + y)
                    B[vi, vj] = A[vi, vj] + 1.0
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = A[vi, vj] * 2.0


@pytest.mark.parametrize("use_block_name", [False, True], ids=["block_obj", "block_name"])
def test_cache_write_under_scope(golden, use_block_name: bool) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_cache_write_under_scope: A and B are cached inside the block "scope", then the
    # tile of A each instance of "scope" writes is cached as a whole and copied back after
    # its loops.
    sch = Schedule(under_scope, debug=True)
    for name, scope in (("A", "local"), ("B", "global"), ("scope", "global")):
        sch.cache_write(name if use_block_name else sch.get_block(name), 0, scope)
    assert write_block_buffers(sch, "scope")[1] == ["A_global", "B"]
    assert write_block_buffers(sch, "C")[0] == ["A"]
    if use_block_name:
        check_numerics(under_scope, sch.func)
        check_replay(sch, under_scope)
    else:
        check_schedule(sch, under_scope, golden, "schedule/cache_write_under_scope")


def test_cache_write_of_a_blockized_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline, debug=True)
    i, _ = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, 4])
    outer = sch.blockize(inner)
    sch.cache_write(outer, 0, "local")
    assert write_block_buffers(sch, "B_o")[1] == ["B_local"]
    check_schedule(sch, pipeline, golden, "schedule/cache_write_blockized")


@T.script
def read_more(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def read_before(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(4):
        for j in range(4):
            with T.block("C"):
                vi = T.spatial_axis(16, i * 4 + j)
                C[vi] = B[vi]
        for j in range(4):
            with T.block("D"):
                vi = T.spatial_axis(16, i * 4 + j)
                B[vi] = B[vi] + 1.0


@T.script
def previous_tile(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi = T.spatial_axis(16, i * 4 + j)
                B[vi] = A[vi] * 2.0
        for j in range(4):
            with T.block("C"):
                vi = T.spatial_axis(16, i * 4 + j)
                C[vi] = B[vi // 2]


@T.script
def late_consumer(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(4):
        for j in range(4):
            with T.block("C"):
                vi = T.spatial_axis(16, i * 4 + j)
                C[vi] = B[vi]
        for j in range(4):
            with T.block("B"):
                vi = T.spatial_axis(16, i * 4 + j)
                B[vi] = A[vi] * 2.0


@T.script
def overwritten(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("W"):
            vi = T.remap("S", i)
            B[vi] = B[vi] + 1.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def consumer_in_tile(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for o in range(4):
        with T.block("outer"):
            vo = T.remap("S", o)
            for j in range(4):
                with T.block("C"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    C[vi] = B[vi]


@pytest.mark.parametrize(
    "program,consumer,message",
    [
        (read_more, "B", r"consumer block 'B' is the block itself"),
        (pipeline, "B", r"consumer block 'B' is the block itself"),
        (overwritten, "W", r"consumer block 'W' writes B as well"),
        (read_more, "C", r"cannot prove consumer block 'C' reads only elements of B the block wrote before it"),
        (previous_tile, "C", r"cannot prove consumer block 'C' reads only elements of B the block wrote before it"),
        (late_consumer, "C", r"consumer block 'C' runs before the block"),
        (overwritten, "C", r"B is written between the block and consumer block 'C'"),
        (consumer_in_tile, "C", r"consumer block 'C' is not in the block scope of 'B'"),
    ],
    ids=["itself", "itself_2", "writer", "unwritten", "earlier_tile", "before", "overwritten", "other_scope"],
)
def test_cache_write_refuses_a_consumer_that_cannot_read_the_cache(
    program: tir.PrimFunc, consumer: str, message: str
) -> None:
    sch = Schedule(program)
    before = sch.func
    with pytest.raises(ScheduleError, match=message):
        sch.cache_write(sch.get_block("B"), 0, "local", consumer_blocks=[sch.get_block(consumer)])
    assert sch.func is before


def test_cache_write_refuses_a_consumer_that_does_not_read_the_buffer() -> None:
    from test_prim_cache_read import tile_producer

    sch = Schedule(tile_producer)
    with pytest.raises(ScheduleError, match=r"consumer block 'C' does not read B"):
        sch.cache_write(sch.get_block("B"), 0, "local", consumer_blocks=[sch.get_block("C")])


# ---------------------------------------------------------------- a tile per instance: preconditions


@T.script
def half_tile(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for o in range(4):
        with T.block("B"):
            vo = T.remap("S", o)
            T.reads(A[vo * 4 : vo * 4 + 4])
            T.writes(B[vo * 4 : vo * 4 + 4])
            for j in range(2):
                with T.block("inner"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    B[vi] = A[vi] * 2.0


@T.script
def reads_outside_tile(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for o in range(4):
        with T.block("B"):
            vo = T.remap("S", o)
            for j in range(4):
                with T.block("inner"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    B[vi] = A[vi] * 2.0
            for j in range(4):
                with T.block("use"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    C[vi] = B[(vi + 4) % 16]


@T.script
def read_first_tile(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for o in range(4):
        with T.block("B"):
            vo = T.remap("S", o)
            for j in range(4):
                with T.block("use"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    C[vi] = B[vi]
            for j in range(4):
                with T.block("inner"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    B[vi] = A[vi] * 2.0


@T.script
def gapped_tiles(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    for o in range(4):
        with T.block("B"):
            vo = T.remap("S", o)
            for j in range(4):
                with T.block("inner"):
                    vi = T.spatial_axis(32, vo * 8 + j)
                    B[vi] = A[vi] * 2.0


@T.script
def predicated_tiles(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for o in range(5):
        with T.block("B"):
            vo = T.spatial_axis(4, o)
            T.where(o < 4)
            for j in range(4):
                with T.block("inner"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    B[vi] = A[vi] * 2.0


@pytest.mark.parametrize(
    "program,message",
    [
        (
            half_tile,
            r"cannot prove its child block 'inner' writes all of the tile of B: dimension 0 is \[vo \* 4, vo \* 4 \+ 4\), it writes \[vo \* 4, vo \* 4 \+ 2\)",
        ),
        (reads_outside_tile, r"the block reads .* of B, outside the tile"),
        (read_first_tile, r"the first of the statements of its body to touch B must be one child block that writes it"),
        (gapped_tiles, r"cannot prove the instances write a dense box of B \(loop o steps index 0 by 8"),
        (predicated_tiles, r"the block writes a tile of B under a T.where"),
    ],
    ids=["half_tile", "reads_outside", "reads_first", "gap", "predicate"],
)
def test_cache_write_refuses_a_tile_it_cannot_prove(program: tir.PrimFunc, message: str) -> None:
    sch = Schedule(program)
    index = [region.buffer.name for region in block_node(sch, "B").writes].index("B")
    refused(sch, program, message, index=index)


@pytest.mark.parametrize("loop", ["j", "k"])
def test_cache_write_of_a_blockized_reduction(golden, loop: str) -> None:  # type: ignore[no-untyped-def]
    # blockize(j): each C_o writes a row, its init a loop of stores; blockize(k): each C_o
    # writes one element that its child block accumulates. Either way the cache starts with
    # the init's values, and C_o reads only what its instance wrote.
    sch = Schedule(matmul, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    outer = sch.blockize({"j": j, "k": k}[loop])
    sch.cache_write(outer, 0, "local")
    assert block_node(sch, "C_o").writes[0].buffer.name == "C_local"
    check_schedule(sch, matmul, golden, f"schedule/cache_write_blockized_reduction_{loop}")


def test_cache_write_of_a_blockized_reduction_under_its_reduction_loop() -> None:
    # The outer reduction loop ko runs around the tiles: the first instance of each tile
    # (ko = 0) runs the init.
    sch = Schedule(matmul, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    io, ii = sch.split(i, [None, 4])
    sch.reorder(ko, io, jo, ii, ji, ki)
    outer = sch.blockize(ii)
    sch.cache_write(outer, 0, "local")
    check_numerics(matmul, sch.func)
    check_replay(sch, matmul)


@T.script
def reversed_tiles(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16,), "float32")):
    for k, o in T.grid(4, 4):
        with T.block("B"):
            vo = T.spatial_axis(4, o)
            vk = T.reduce_axis(4, 3 - k)
            T.reads(B[vo * 4 : vo * 4 + 4], A[vo * 4 : vo * 4 + 4, vk])
            T.writes(B[vo * 4 : vo * 4 + 4])
            with T.init():
                for j in range(4):
                    B[vo * 4 + j] = 0.0
            for j in range(4):
                with T.block("inner"):
                    vi = T.spatial_axis(16, vo * 4 + j)
                    B[vi] = B[vi] + A[vi, vk]


def test_cache_write_refuses_a_tile_whose_first_instance_skips_the_init() -> None:
    refused(
        Schedule(reversed_tiles),
        reversed_tiles,
        r"cannot prove the first instance to touch each tile of B runs the init",
    )


@T.script
def wrapped_predicate(A: T.Buffer((12, 24), "float32"), B: T.Buffer((10, 20), "float32")):
    for i, j in T.grid(12, 24):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            with T.block("inner"):
                T.where(vi < 10 and vj < 20)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def wrapped_predicate_in_a_larger_buffer(A: T.Buffer((12, 24), "float32"), B: T.Buffer((12, 24), "float32")):
    for i, j in T.grid(12, 24):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            with T.block("inner"):
                T.where(vi < 10 and vj < 20)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def wrapped_parity_predicate(A: T.Buffer((12, 24), "float32"), B: T.Buffer((12, 24), "float32")):
    for i, j in T.grid(12, 24):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            with T.block("inner"):
                T.where(vi % 2 == 0)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def wrapped_siblings(A: T.Buffer((12, 24), "float32"), B: T.Buffer((12, 24), "float32")):
    for i, j in T.grid(12, 24):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            with T.block("left"):
                T.where(vi < 8)
                B[vi, vj] = A[vi, vj] * 2.0
            with T.block("top"):
                T.where(vj < 16)
                B[vi, vj] = A[vi, vj] * 3.0


@pytest.mark.parametrize(
    ("program", "golden_name", "extents"),
    [
        (wrapped_predicate, "schedule/cache_write_wrapped_predicate", [10, 20]),
        # B[10:, :] and B[:, 20:] keep their values: the copy back covers only what is written.
        (wrapped_predicate_in_a_larger_buffer, "schedule/cache_write_wrapped_predicate_larger", [10, 20]),
    ],
)
def test_cache_write_of_a_block_wrapping_a_predicated_child(  # type: ignore[no-untyped-def]
    golden, program: tir.PrimFunc, golden_name: str, extents: list[int]
) -> None:
    sch = Schedule(program)
    sch.cache_write(sch.get_block("B"), 0, "local")
    index = TreeIndex(sch.func)
    assert [loop.extent.value for loop in index.loops_above(index.blocks["B_local"])] == extents
    check_schedule(sch, program, golden, golden_name)


def test_cache_write_refuses_a_wrapped_predicate_that_is_not_an_upper_bound() -> None:
    refused(
        Schedule(wrapped_parity_predicate),
        wrapped_parity_predicate,
        r"cannot prove the instances write a dense box of B \(the predicate i % 2 == 0 is not an upper bound",
    )


def test_cache_write_refuses_sibling_predicated_children() -> None:
    # The children write rows 0-7 and columns 0-15: not a box. Copying back the bounding box
    # (what TVM does) would overwrite B[8:, 16:] with values nothing wrote.
    refused(
        Schedule(wrapped_siblings),
        wrapped_siblings,
        r"the first of the statements of its body to touch B must be one child block that writes it",
    )
