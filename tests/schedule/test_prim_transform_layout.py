"""transform_layout (and IndexMap): golden, numerics, replay, one negative test per precondition."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import PrimExpr, PrimFunc
from tir.schedule import Schedule, ScheduleError
from tir.schedule.index_map import IndexMap, IndexMapError


@T.script
def matmul(A: T.Buffer((32, 64), "float32"), B: T.Buffer((64, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 64):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def row_sum(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8,), "float32")):
    X = T.alloc_buffer((8, 16), "float32")
    for i, j in T.grid(8, 16):
        with T.block("X"):
            vi, vj = T.remap("SS", i, j)
            X[vi, vj] = A[vi, vj] * 2.0
    for i in range(8):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = 0.0
            for j in range(16):
                C[vi] = C[vi] + X[vi, j]


@T.script
def copy16(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    X = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("X"):
            vi = T.remap("S", i)
            X[vi] = A[vi] + 1.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = X[vi] * 3.0


def test_transform_layout_packs_a_cache_read_copy(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    sch.cache_read(block, 2, "global")
    sch.transform_layout(block, ("read", 2), lambda k, j: (j // 16, k, j % 16))
    packed = sch.func.root_block.alloc_buffers[0]  # type: ignore[union-attr]
    assert packed.name == "B_global" and packed.const_shape() == (2, 64, 16)
    assert "lambda k, j: (j // 16, k, j % 16)" in sch.trace.as_python()
    check_schedule(sch, matmul, golden, "schedule/transform_layout_packed")


def test_transform_layout_maps_a_relaxed_region(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(row_sum, debug=True)
    consumer = sch.get_block("C")
    sch.transform_layout(consumer, "X", lambda i, j: (j // 4, i, j % 4))
    reads = sch.get_block_node(consumer).reads
    region = next(r for r in reads if r.buffer.name == "X")
    assert [(str(r.min), str(r.extent)) for r in region.region] == [("0", "4"), ("vi", "1"), ("0", "4")]
    check_schedule(sch, row_sum, golden, "schedule/transform_layout_region")


def test_transform_layout_flattens(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(row_sum, debug=True)
    sch.transform_layout(sch.get_block("X"), ("write", 0), "lambda i, j: (i * 16 + j,)")
    assert sch.func.root_block.alloc_buffers[0].const_shape() == (128,)  # type: ignore[union-attr]
    check_schedule(sch, row_sum, golden, "schedule/transform_layout_flat")


def test_transform_layout_by_enumeration() -> None:
    # (i * 3) % 16 permutes 0..15 but is not quasi-affine: decided by enumerating the box.
    sch = Schedule(copy16, debug=True)
    sch.transform_layout(sch.get_block("C"), ("read", 0), lambda i: ((i * 3) % 16,))
    from schedule_testing import check_numerics, check_replay

    check_numerics(copy16, sch.func)
    check_replay(sch, copy16)


def test_index_map_prints_and_reads_back() -> None:
    index_map = IndexMap.from_func(lambda i, j: (i // 16, j, i % 16))
    assert str(index_map) == "lambda i, j: (i // 16, j, i % 16)"
    again = IndexMap.parse(str(index_map))
    assert str(again) == str(index_map)
    assert tir.structural_equal(list(again.results), list(again.apply(list(again.params))))
    assert (
        str(IndexMap.parse("lambda a: -a + T.max(a, 3) - min(a, 2)")) == "lambda a: (-a + T.max(a, 3) - T.min(a, 2),)"
    )
    assert IndexMap.parse("lambda a: a * 2", "int64").results[0].dtype.bits == 64
    assert str(IndexMap.from_func(lambda T, j: (T * 16 + j,))) == "lambda i0, j: (i0 * 16 + j,)"


@pytest.mark.parametrize(
    "text,message",
    [
        ("i + 1", "an index map is written `lambda i, j: \\(...\\)`"),
        ("lambda i: i ** 2", "this operator"),
        ("lambda i: (j,)", "unknown name 'j'"),
        ("lambda i: (__import__('os'),)", "the call __import__"),
        ("lambda i: (1.5,)", "a non-integer constant"),
        ("lambda i, i: (i,)", "repeats a parameter name"),
        ("lambda *i: i", "only plain positional parameters"),
    ],
)
def test_index_map_text_is_restricted(text: str, message: str) -> None:
    with pytest.raises(IndexMapError, match=message):
        IndexMap.parse(text)


# ---------------------------------------------------------------- preconditions


@T.script
def view_of_param(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for i in range(8):
        with T.block("outer"):
            vi = T.remap("S", i)
            Av = T.match_buffer(A[vi, 0:4], (4,), "float32")
            for j in range(4):
                with T.block("inner"):
                    vj = T.remap("S", j)
                    B[vi, vj] = Av[vj]


@T.script
def viewed_alloc(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    X = T.alloc_buffer((8, 4), "float32")
    for i, j in T.grid(8, 4):
        with T.block("X"):
            vi, vj = T.remap("SS", i, j)
            X[vi, vj] = A[vi, vj]
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            Xv = T.match_buffer(X[vi, 0:4], (4,), "float32")
            for j in range(4):
                B[vi, j] = Xv[j]


@T.script
def vector_store(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    X = T.alloc_buffer((16,), "float32")
    for i in range(4):
        with T.block("X"):
            vi = T.remap("S", i)
            X[T.ramp(vi * 4, 1, 4)] = A[T.ramp(vi * 4, 1, 4)]
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = X[vi]


def _aligned() -> PrimFunc:
    sch = Schedule(row_sum)
    sch.storage_align(sch.get_block("X"), 0, 0, 16, 1)
    return sch.func


@pytest.mark.parametrize(
    "func,block,buffer,index_map,message",
    [
        (view_of_param, "inner", ("read", 0), lambda i: (i,), "Av is not allocated by a block of the function"),
        (_aligned(), "C", ("read", 1), lambda i, j: (j, i), "X has explicit strides or an element offset"),
        (viewed_alloc, "X", ("write", 0), lambda i, j: (j, i), "block 'B' views X through a match_buffer"),
        (row_sum, "C", ("read", 1), lambda i: (i,), "bad index map: the index map takes 1 indices"),
        (row_sum, "C", ("read", 1), "lambda i, j: (i ** 2, j)", "bad index map: .*this operator"),
        (vector_store, "B", ("read", 0), lambda i: (i,), "X is accessed with a vector index"),
        (row_sum, "C", ("read", 1), lambda i, j: (i, j // 2), "must send the shape .* one-to-one onto a box"),
        (row_sum, "C", ("read", 1), lambda i, j: (i + 1, j), "onto a box that does not start at 0"),
    ],
)
def test_transform_layout_refuses(func: PrimFunc, block: str, buffer: object, index_map: object, message: str) -> None:
    sch = Schedule(func)
    rv = sch.get_block(block)
    with pytest.raises(ScheduleError, match=message):
        sch.transform_layout(rv, buffer, index_map)  # type: ignore[arg-type]
    assert tir.structural_equal(sch.func, func)


# ---------------------------------------------------------------- parameters (TVM rewrites the signature)


@T.script
def symbolic_rows(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 8), "float32")
    C = T.match_buffer(c, (n, 8), "float32")
    for i, j in T.grid(n, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = A[vi, vj] * 2.0


def test_transform_layout_of_a_parameter_changes_the_signature() -> None:
    import numpy as np

    sch = Schedule(matmul, debug=True)
    sch.transform_layout(sch.get_block("C"), ("read", 2), lambda k, j: (j // 8, k, j % 8))
    params = sch.func.params
    assert params[1].const_shape() == (4, 64, 8)  # callers now pass B as [j // 8, k, j % 8]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 64)).astype("float32")
    b = rng.standard_normal((64, 32)).astype("float32")
    packed = np.ascontiguousarray(b.reshape(64, 4, 8).transpose(1, 0, 2))
    for run in (lambda f, *args: tir.interpret(f, *args), lambda f, *args: tir.build(f)(*args)):
        c = np.zeros((32, 32), "float32")
        run(sch.func, a, packed, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # The printed program parses back with the new signature.
    assert tir.structural_equal(tir.parse(sch.func.script()), sch.func)


def test_transform_layout_refuses_a_parameter_of_symbolic_shape() -> None:
    sch = Schedule(symbolic_rows)
    with pytest.raises(ScheduleError, match="A is a parameter with a symbolic shape"):
        sch.transform_layout(sch.get_block("C"), ("read", 0), lambda i, j: (j, i))


@T.script
def fourteen(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,), "float32")
    for i in range(14):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(14):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + 1.0


def test_transform_layout_with_implicit_padding(golden) -> None:  # type: ignore[no-untyped-def]
    # One-to-one onto 14 of the 16 points of a 4 x 4 box: the buffer gets the box, the two
    # padding elements are never touched.
    sch = Schedule(fourteen, debug=True)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i: (i // 4, i % 4))
    assert sch.get(sch.get_block("B")).writes[0].buffer.const_shape() == (4, 4)
    check_schedule(sch, fourteen, golden, "schedule/transform_layout_implicit_padding")


def test_transform_layout_with_a_sampled_factor() -> None:
    # An ExprRV in the map contributes its sampled value (TVM's ExprRV index maps).
    def split_by(f: object) -> Callable[[PrimExpr], tuple[PrimExpr, PrimExpr]]:
        return lambda i: (i // f, i % f)

    for decision, factor in ((0, 2), (1, 7)):
        sch = Schedule(fourteen, debug=True)
        f = sch.sample_categorical([2, 7], [0.5, 0.5], decision=decision)
        sch.transform_layout(sch.get_block("B"), ("write", 0), split_by(f))
        assert sch.get(sch.get_block("B")).writes[0].buffer.const_shape() == (14 // factor, factor)
        check_numerics(fourteen, sch.func)


def test_transform_layout_with_arithmetic_on_sampled_factors(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_transform_layout_with_sampling: sampled tile sizes multiplied in the map; the
    # trace records the product the map used.
    sch = Schedule(row_sum, debug=True)
    loop = sch.get_loops(sch.get_block("X"))[-1]
    _, j1, j2 = sch.sample_perfect_tile(loop, 3, decision=[2, 4, 2])
    sch.transform_layout(sch.get_block("X"), ("write", 0), lambda i, j: (i, j // (j1 * j2), j % (j1 * j2)))
    assert sch.get(sch.get_block("X")).writes[0].buffer.const_shape() == (8, 2, 8)
    check_schedule(sch, row_sum, golden, "schedule/transform_layout_sampled_product")
    assert "j // 8, j % 8" in str(sch.trace)
    # j1 holds 4: arithmetic with ints gives ints.
    assert [j1 + 1, 1 + j1, j1 - 1, 9 - j1, -j1] == [5, 5, 3, 5, -4]
    assert [9 // j1, j1 // 3, 9 % j1, j1 % 3, 3 * j1] == [2, 1, 1, 1, 12]


def test_transform_layout_with_a_pad_value(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's pad_value: the padding elements get the value, in a block at the buffer's scope start.
    sch = Schedule(fourteen, debug=True)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i: (i // 4, i % 4), pad_value=0.0)
    assert 'T.block("B_pad")' in sch.func.script()
    check_schedule(sch, fourteen, golden, "schedule/transform_layout_pad_value")


def test_transform_layout_of_an_output_with_an_index_dependent_pad_value() -> None:
    import numpy as np

    sch = Schedule(fourteen, debug=True)
    sch.transform_layout(sch.get_block("C"), ("write", 0), lambda i: (i // 4, i % 4), pad_value=lambda a, b: a * 4 + b)
    check_replay(sch, fourteen)
    a = np.arange(14, dtype=np.float32)
    for run in (lambda f, *x: tir.interpret(f, *x), lambda f, *x: tir.build(f)(*x)):
        c = np.full((4, 4), np.nan, np.float32)
        run(sch.func, a, c)
        np.testing.assert_array_equal(c.reshape(-1), np.concatenate([a * 2 + 1, [14, 15]]).astype(np.float32))


def test_transform_layout_pads_a_shifted_map_at_both_ends(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_index_map_dtype_legalize_with_constant: (i + 1) // 4 puts i = 0 at (0, 1), so
    # (0, 0) is padding before the data and (3, 3) after it; a constant first result adds a unit
    # dimension. The padding condition comes from inverting the map in q = i + 1.
    import numpy as np

    sch = Schedule(fourteen, debug=True)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i: (0, (i + 1) // 4, (i + 1) % 4), pad_value=0.0)
    assert sch.get(sch.get_block("B")).writes[0].buffer.const_shape() == (1, 4, 4)
    check_schedule(sch, fourteen, golden, "schedule/transform_layout_shifted_pad_value")
    # On an output the padding shows: index-dependent values at both ends, the data between.
    sch = Schedule(fourteen, debug=True)
    sch.transform_layout(
        sch.get_block("C"), ("write", 0), lambda i: (0, (i + 1) // 4, (i + 1) % 4), pad_value=lambda z, a, b: a * 4 + b
    )
    check_replay(sch, fourteen)
    a = np.arange(14, dtype=np.float32)
    c = np.full((1, 4, 4), np.nan, np.float32)
    tir.interpret(sch.func, a, c)
    np.testing.assert_array_equal(c.reshape(-1), np.concatenate([[0], a * 2 + 1, [15]]).astype(np.float32))


@T.script
def guarded_read(A: T.Buffer((6, 12), "float32"), P: T.Buffer((6, 16), "float32")):
    G = T.alloc_buffer((6, 12), "float32")
    for i, j in T.grid(6, 12):
        with T.block("G"):
            vi, vj = T.remap("SS", i, j)
            G[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(6, 16):
        with T.block("P"):
            vi, vk = T.remap("SS", i, k)
            T.reads(G[vi, vk])
            T.writes(P[vi, vk])
            P[vi, vk] = T.if_then_else(vk < 12, G[vi, vk], 0.0)


def test_transform_layout_cuts_a_guarded_region_to_the_old_shape() -> None:
    # P declares G[vi, vk] for vk up to 15 but reads it only where vk < 12. Fused into one
    # dimension, that hull would reach into the next row (which the copy of this row does not
    # write): the region is cut to the old shape first, G[vi * 12:vi * 12 + 12].
    sch = Schedule(guarded_read, debug=True)
    sch.transform_layout(sch.get_block("P"), ("read", 0), lambda a, b: (a * 12 + b,))
    assert "T.reads(G[vi * 12:vi * 12 + 12])" in sch.func.script()
    check_numerics(guarded_read, sch.func)
    check_replay(sch, guarded_read)


def test_transform_layout_refuses_a_pad_value_it_cannot_place() -> None:
    sch = Schedule(fourteen)
    with pytest.raises(ScheduleError, match="cannot tell the padding of the index map"):
        sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i: (i % 7, i // 7 * 3), pad_value=0.0)


@T.script
def copy16_with_n(A: T.Buffer((16,), "int32"), n: T.int32):
    B = T.alloc_buffer((16,), "int32")
    for i in range(16):
        with T.block("block"):
            vi = T.remap("S", i)
            B[vi] = A[vi]


def test_transform_layout_refuses_a_map_that_uses_a_program_variable() -> None:
    # TVM's test_transform_layout_with_var accepts this by assuming n > 0; the program assumes
    # nothing of n, and for n <= 0 the new layout would divide by zero.
    sch = Schedule(copy16_with_n)
    n = copy16_with_n.params[1]
    with pytest.raises(ScheduleError, match=r"i // n uses n, a variable whose value is not known here"):
        sch.transform_layout(sch.get_block("block"), ("write", 0), lambda i: (i // n, i % n), pad_value=0)
    assert sch.func is copy16_with_n


@T.script
def copy14_int(A: T.Buffer((14,), "int32")):
    B = T.alloc_buffer((14,), "int32")
    for i in range(14):
        with T.block("block"):
            vi = T.remap("S", i)
            B[vi] = A[vi]


def test_transform_layout_refuses_a_pad_value_read_from_a_buffer() -> None:
    # TVM's test_padded_transform_repeated_buffer_element (an xfail there): the padding of A
    # would repeat A's first elements, a claim about the caller's data.
    sch = Schedule(copy14_int)
    a = sch.get(sch.get_block("block")).reads[0].buffer
    with pytest.raises(ScheduleError, match=r"the pad value A\[.*\] reads a buffer; it may use only"):
        sch.transform_layout(
            sch.get_block("block"), ("read", 0), lambda i: (i // 4, i % 4), pad_value=lambda i, j: a[(4 * i + j) % 14]
        )
    assert sch.func is copy14_int
