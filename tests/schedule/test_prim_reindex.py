"""reindex: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError


@T.script
def conv1d(A: T.Buffer((11,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                C[vi] = 0.0
            C[vi] += A[vi + vk] * B[vk]


@T.script
def conv2d_nhwc(
    data: T.Buffer((1, 6, 6, 3), "float32"),
    weight: T.Buffer((3, 3, 3, 4), "float32"),
    conv: T.Buffer((1, 4, 4, 4), "float32"),
):
    for n, h, w, co, rh, rw, ci in T.grid(1, 4, 4, 4, 3, 3, 3):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                conv[vn, vh, vw, vco] = 0.0
            conv[vn, vh, vw, vco] += data[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


@T.script
def scale(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
    for i in range(100):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0


def test_reindex_read_of_a_window(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv1d, debug=True)
    block = sch.get_block("C")
    copy = sch.reindex(block, ("read", 1))
    assert copy.block_name == "A_reindex"
    assert sch.get_block_node(copy).reads[0].buffer.name == "A"
    check_schedule(sch, conv1d, golden, "schedule/reindex_read")


def test_reindex_write_of_a_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv1d, debug=True)
    block = sch.get_block("C")
    copy = sch.reindex(block, "C")  # by name: a buffer the block reads and writes is taken as written
    assert copy.block_name == "C_reindex"
    assert sch.trace.instructions[-1].args[1] == ("write", 0)
    check_schedule(sch, conv1d, golden, "schedule/reindex_write")


def test_reindex_conv2d_operands_and_output(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv2d_nhwc, debug=True)
    block = sch.get_block("conv")
    sch.reindex(block, ("read", 1))
    sch.reindex(block, ("read", 2))
    sch.reindex(block, ("write", 0))
    shapes = {b.name: b.const_shape() for b in sch.func.root_block.alloc_buffers}  # type: ignore[union-attr]
    assert shapes == {
        "data_reindex": (1, 4, 4, 3, 3, 3),
        "weight_reindex": (4, 3, 3, 3),
        "conv_reindex": (1, 4, 4, 4),
    }
    check_schedule(sch, conv2d_nhwc, golden, "schedule/reindex_conv2d")


def test_reindex_after_split_with_predicate(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale, debug=True)
    block = sch.get_block("B")
    (i,) = sch.get_loops(block)
    sch.split(i, [None, 32])
    sch.reindex(block, ("read", 0))
    sch.reindex(block, ("write", 0))
    check_schedule(sch, scale, golden, "schedule/reindex_split")


def test_reindex_names_are_unique() -> None:
    sch = Schedule(scale)
    block = sch.get_block("B")
    first = sch.reindex(block, ("read", 0))
    second = sch.reindex(block, ("read", 0))  # now reads A_reindex
    assert (first.block_name, second.block_name) == ("A_reindex", "A_reindex_reindex")


# ---------------------------------------------------------------- preconditions


@T.script
def no_iterators(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    with T.block("B"):
        B[0] = A[0]


@T.script
def opaque_iterator(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.opaque_axis(4, i)
            B[vi] = A[vi]


@T.script
def nested(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("outer"):
            vi = T.remap("S", i)
            with T.block("inner"):
                B[vi] = A[vi]


@T.script
def viewed(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            Av = T.match_buffer(A[vi, 0:4], (4,), "float32")
            for j in range(4):
                B[vi, j] = Av[j]


@T.script
def declared_only(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = 1.0


@T.script
def two_patterns(A: T.Buffer((5,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] + A[vi + 1]


@T.script
def gather(A: T.Buffer((8,), "float32"), idx: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[idx[vi]]


@T.script
def row_region(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            T.reads(A[vi, 0:4])
            T.writes(B[vi])
            B[vi] = A[vi, 0]


@T.script
def loop_var_in_body(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[i]


@T.script
def constant_index(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[0]


@T.script
def shifted_domain(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(2, 6):
        with T.block("B"):
            vi = T.spatial_axis((2, 6), i)
            B[vi] = A[vi]


@T.script
def accumulate(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = B[vi] + A[vi]


@T.script
def half_predicate(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            T.where(i < 4)
            B[vi] = A[vi] * 2.0


@T.script
def in_init(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("outer"):
        with T.init():
            for i in range(8):
                with T.block("B"):
                    vi = T.remap("S", i)
                    B[vi] = A[vi] * 2.0
        for i in range(8):
            with T.block("C"):
                vi = T.remap("S", i)
                B[vi] = B[vi] + 1.0


@T.script
def own_buffer(B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            X = T.alloc_buffer((4,), "float32")
            T.reads(X[vi])
            T.writes(B[vi])
            B[vi] = X[vi]


@T.script
def fused_producer(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + 1.0


@T.script
def fused_consumer(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + 1.0


@T.script
def guarded_shift(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = T.if_then_else(vi >= 1, A[vi - 1], 0.0)


@T.script
def conditional_store(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            if vi < 2:
                B[vi] = A[vi]


@pytest.mark.parametrize(
    "func,block,buffer,message",
    [
        (scale, "root", ("read", 0), "the root block cannot be transformed"),
        (no_iterators, "B", ("read", 0), r"the block has no iterators \(an opaque block\)"),
        (opaque_iterator, "B", ("read", 0), r"the block has opaque iterators \['vi'\]"),
        (scale, "B", ("read", 3), "read buffer index 3 is out of range"),
        (scale, "B", ("other", 0), 'the buffer kind must be "read" or "write"'),
        (scale, "B", "D", "the block neither reads nor writes a buffer 'D'"),
        (nested, "outer", ("read", 0), "the block holds nested blocks"),
        (viewed, "B", ("read", 0), "the block views A through a match_buffer"),
        (declared_only, "B", ("read", 0), "the block declares A but never loads or stores it"),
        (two_patterns, "B", ("read", 0), "the block accesses A at different indices"),
        (gather, "B", ("read", 0), r"must be scalar expressions of the iterators \(no T.ramp, no loads\)"),
        (row_region, "B", ("read", 0), "each instance must access a single point of A"),
        (loop_var_in_body, "B", ("read", 0), "use i, which is neither an iterator of the block nor defined outside"),
        (constant_index, "B", ("read", 0), "the indices of A use no iterator of the block"),
        (shifted_domain, "B", ("read", 0), "the domain of iterator vi must start at 0"),
        (guarded_shift, "B", ("read", 0), r"index 0 of A, vi - 1, may leave \[0, 4\) .* out of bounds"),
        (conv1d, "C", ("read", 0), r"the block writes C as well; reindex it as a write buffer"),
        (conditional_store, "B", ("write", 0), "the block stores B only under a condition"),
        (accumulate, "B", ("write", 0), r"the block reads B without a T.init\(\) that stores it first"),
        (half_predicate, "B", ("read", 0), r"iterator vi takes the values \[0, 4\) in its scope"),
        (in_init, "B", ("read", 0), "the block is inside the init of 'outer'"),
        (own_buffer, "B", ("read", 0), "X is not defined in the scope of block 'root'"),
        (fused_producer, "C", ("read", 0), "another block in the same top-level statement writes B"),
        (fused_consumer, "B", ("write", 0), "another block in the same top-level statement accesses B"),
    ],
)
def test_reindex_refuses(func: PrimFunc, block: str, buffer: object, message: str) -> None:
    sch = Schedule(func)
    rv = sch.get_block(block)
    with pytest.raises(ScheduleError, match=message):
        sch.reindex(rv, buffer)  # type: ignore[arg-type]
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


@T.script
def matmul_mixed_index_types(
    A: T.Buffer((T.int64(2), 32), "float32"), B: T.Buffer((48, 32), "float32"), C: T.Buffer((T.int64(2), 48), "float32")
):
    # TVM's test_reindex_mixed_dtype, smaller: an int64 loop next to int32 ones.
    for i0, i1, i2 in T.grid(T.int64(2), 48, 32):
        with T.block("C"):
            i = T.axis.spatial(T.int64(2), i0)
            j, k = T.axis.remap("SR", [i1, i2])
            with T.init():
                C[i, j] = 0.0
            C[i, j] = C[i, j] + A[i, k] * B[j, k]


def test_reindex_write_with_mixed_index_types(golden) -> None:  # type: ignore[no-untyped-def]
    # The int32 iterators' value ranges came out with int64 extents, which never equal an
    # int32 domain: reindex refused with "takes the values [0, 48) ..., not its whole domain
    # [0, 48)", and the validator crashed adding the two types.
    sch = Schedule(matmul_mixed_index_types, debug=True)
    copy = sch.reindex(sch.get_block("C"), ("write", 0))
    assert copy.block_name == "C_reindex"
    check_schedule(sch, matmul_mixed_index_types, golden, "schedule/reindex_mixed_index_types")


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(("block", "buffer"), [("C", ("write", 0)), ("C", "C"), (None, ("read", 1)), (None, "A")])
def test_reindex_with_mixed_index_types_by_name_or_position(debug: bool, block: str | None, buffer: object) -> None:
    from schedule_testing import check_numerics, check_replay

    sch = Schedule(matmul_mixed_index_types, debug=debug)
    sch.reindex(block if block is not None else sch.get_block("C"), buffer)  # type: ignore[arg-type]
    check_numerics(matmul_mixed_index_types, sch.func)
    check_replay(sch, matmul_mixed_index_types)
