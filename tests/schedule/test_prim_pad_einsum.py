"""pad_einsum: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul127(
    A: T.Buffer((127, 127), "float32"), B: T.Buffer((127, 127), "float32"), C: T.Buffer((127, 127), "float32")
):
    for i, j, k in T.grid(127, 127, 127):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def small_matmul(A: T.Buffer((10, 7), "float32"), B: T.Buffer((7, 12), "float32"), C: T.Buffer((10, 12), "float32")):
    for i, j, k in T.grid(10, 12, 7):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def int8_matmul(A: T.Buffer((10, 7), "int8"), B: T.Buffer((7, 12), "int8"), C: T.Buffer((10, 12), "int32")):
    for i, j, k in T.grid(10, 12, 7):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] += T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


@T.script
def elementwise(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10, 3), "float32")):
    for i, j in T.grid(10, 3):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = T.exp(A[vi, 2]) + A[vi, 2] * 0.5


def test_pad_einsum_matmul_127_to_128(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul127, debug=True)
    block = sch.get_block("C")
    loops = sch.get_loops(block)
    sch.pad_einsum(block, [128, 128, 128])
    # The loops keep their handles; only their extents grew.
    assert [sch.get_loop_node(loop).extent.value for loop in loops] == [128, 128, 128]
    check_schedule(sch, matmul127, golden, "schedule/pad_einsum_matmul127")


def test_pad_einsum_rounds_up_to_multiples(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(small_matmul, debug=True)
    block = sch.get_block("C")
    sch.pad_einsum(block, [4, 12, 8])  # 10 -> 12, 12 stays, 7 -> 8
    check_schedule(sch, small_matmul, golden, "schedule/pad_einsum_multiples")


def test_pad_einsum_takes_integer_constant_padding() -> None:
    # IntImm constants stand for their ints (as in split); the trace records the ints.
    from tir.ir import IntImm

    by_constant, by_int = Schedule(small_matmul, debug=True), Schedule(small_matmul, debug=True)
    by_constant.pad_einsum(by_constant.get_block("C"), [IntImm(4, "int64"), IntImm(12, "int32"), 8])
    by_int.pad_einsum(by_int.get_block("C"), [4, 12, 8])
    tir.assert_structural_equal(by_constant.func, by_int.func)
    assert by_constant.trace.instructions[-1].args[1] == [4, 12, 8]
    check_replay(by_constant, small_matmul)


def test_pad_einsum_spatial_only_with_constant_index(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(elementwise, debug=True)
    sch.pad_einsum(sch.get_block("B"), [8, 4])
    check_schedule(sch, elementwise, golden, "schedule/pad_einsum_spatial")


def test_pad_einsum_casts_in_the_product() -> None:
    sch = Schedule(int8_matmul, debug=True)
    sch.pad_einsum(sch.get_block("C"), [16, 16, 16])
    check_numerics(int8_matmul, sch.func)
    check_replay(sch, int8_matmul)


def test_pad_einsum_after_decompose_reduction_copies_the_output_in() -> None:
    sch = Schedule(small_matmul, debug=True)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.decompose_reduction(block, i)
    sch.pad_einsum(block, [16, 16, 16])
    names = [b.block_name for b in sch.get_child_blocks(sch.get_block("root"))]
    assert names == ["C_init", "A_pad", "B_pad", "C_pad", "C", "C_unpad"]
    check_numerics(small_matmul, sch.func)
    check_replay(sch, small_matmul)


@T.script
def conv_1d(A: T.Buffer((12, 6), "float32"), W: T.Buffer((3, 6, 10), "float32"), B: T.Buffer((10, 10), "float32")):
    for x, co, r, ci in T.grid(10, 10, 3, 6):
        with T.block("B"):
            vx, vco, vr, vci = T.remap("SSRR", x, co, r, ci)
            with T.init():
                B[vx, vco] = 0.0
            B[vx, vco] += A[vx + vr, vci] * W[vr, vci, vco]


def test_pad_einsum_leaves_an_operand_no_padded_iterator_indexes() -> None:
    """A convolution's output channels padded (10 -> 16, ImageNet's 1000 -> 1008 on AVX-512):
    the input, read at ``vx + vr``, is indexed by no padded iterator and keeps its indices."""
    sch = Schedule(conv_1d, debug=True)
    sch.pad_einsum(sch.get_block("B"), [1, 16, 1, 1])
    names = [b.block_name for b in sch.get_child_blocks(sch.get_block("root"))]
    assert names == ["W_pad", "B", "B_unpad"]
    check_numerics(conv_1d, sch.func)
    check_replay(sch, conv_1d)
    # Padding the iterator of that compound index is still refused.
    with pytest.raises(ScheduleError, match="not in einsum form: every index of a padded buffer .* vx \\+ vr"):
        sch2 = Schedule(conv_1d)
        sch2.pad_einsum(sch2.get_block("B"), [16, 1, 1, 1])


def test_pad_einsum_without_padding_changes_nothing() -> None:
    sch = Schedule(small_matmul)
    sch.pad_einsum(sch.get_block("C"), [5, 6, 7])
    assert sch.func is small_matmul
    check_replay(sch, small_matmul)


# ---------------------------------------------------------------- preconditions


@T.script
def opaque_iterator(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.opaque_axis(10, i)
            B[vi] = A[vi]


@T.script
def symbolic(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]


@T.script
def two_blocks(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi]


@T.script
def nested(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("outer"):
            vi = T.remap("S", i)
            with T.block("inner"):
                B[vi] = A[vi]


@T.script
def viewed(A: T.Buffer((10, 4), "float32"), B: T.Buffer((10, 4), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            Av = T.match_buffer(A[vi, 0:4], (4,), "float32")
            for j in range(4):
                B[vi, j] = Av[j]


@T.script
def window(A: T.Buffer((13,), "float32"), B: T.Buffer((10,), "float32")):
    for i, k in T.grid(10, 3):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += A[vi + vk]


@T.script
def transpose_add(A: T.Buffer((10, 10), "float32"), B: T.Buffer((10, 10), "float32")):
    for i, j in T.grid(10, 10):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + A[vj, vi]


@T.script
def row_max(A: T.Buffer((10, 10), "float32"), B: T.Buffer((10,), "float32")):
    for i, k in T.grid(10, 10):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = T.float32(-1e30)
            B[vi] = T.max(B[vi], A[vi, vk])


@T.script
def exp_sum(A: T.Buffer((10, 10), "float32"), B: T.Buffer((10,), "float32")):
    for i, k in T.grid(10, 10):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += T.exp(A[vi, vk]) * A[vi, vk]


@T.script
def scaled_count(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 10):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += A[vi] * 2.0


@T.script
def int_div(A: T.Buffer((10,), "int32"), D: T.Buffer((10,), "int32"), B: T.Buffer((10,), "int32")):
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] // D[vi]


@T.script
def own_buffer(B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            X = T.alloc_buffer((10,), "float32")
            T.reads(X[vi])
            T.writes(B[vi])
            B[vi] = X[vi]


@T.script
def in_init(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    with T.block("outer"):
        with T.init():
            for i in range(10):
                with T.block("B"):
                    vi = T.remap("S", i)
                    B[vi] = A[vi] * 2.0
        for i in range(10):
            with T.block("C"):
                vi = T.remap("S", i)
                B[vi] = B[vi] + 1.0


@T.script
def last_column(A: T.Buffer((10, 6), "float32"), B: T.Buffer((10,), "float32")):
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi] = A[vi, vj]


@T.script
def guarded_read(A: T.Buffer((5,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = T.if_then_else(vi < 5, A[vi], 0.0)


@T.script
def conditional_store(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.remap("S", i)
            if vi < 5:
                B[vi] = A[vi]


def _split(func: PrimFunc, name: str) -> PrimFunc:
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block(name))[:1]
    sch.split(i, [None, 4])
    return sch.func


@pytest.mark.parametrize(
    "func,block,padding,message",
    [
        (small_matmul, "C", [16, 16], r"padding needs one entry per block iterator \(3\), got 2"),
        (small_matmul, "C", [16, 0, 16], "padding entries must be positive integers"),
        (_split(small_matmul, "C"), "C", [16, 16, 16], r"the block has a predicate \(T.where"),
        (opaque_iterator, "B", [16], "iterator vi is opaque; it cannot be padded"),
        (two_blocks, "B", [16], "under a sequence with other statements"),
        (nested, "outer", [16], r"the block holds nested blocks \('inner'\)"),
        (viewed, "B", [16], "the block has match_buffer views"),
        (window, "B", [16, 4], "not in einsum form: .* load of A\\[vi \\+ vk\\] has the index vi \\+ vk"),
        (transpose_add, "B", [16, 16], "A is accessed at different indices"),
        (guarded_read, "B", [16], "index 0 of A, vi, reaches 9, outside the dimension's extent 5"),
        (conditional_store, "B", [16], "the block stores B only under a condition"),
        (row_max, "B", [16, 16], "padding the reduce iterator\\(s\\) vk needs the body to be one update"),
        (exp_sum, "B", [10, 16], "the factor T.exp\\(A\\[vi, vk\\]\\) reads a padded buffer but is not a plain load"),
        (scaled_count, "B", [16, 16], "no factor of A\\[vi\\] \\* 2.0 loads an operand indexed by vk"),
        (last_column, "B", [1, 4], "the padded spatial iterator vj does not index the store to B\\[vi\\]"),
        (int_div, "B", [16], "the integer division A\\[vi\\] // D\\[vi\\] may divide by a zero of the padding"),
        (own_buffer, "B", [16], "X is not defined in the scope of block 'root'"),
        (in_init, "B", [16], "the block is inside the init of 'outer'"),
    ],
)
def test_pad_einsum_refuses(func: PrimFunc, block: str, padding: list[int], message: str) -> None:
    sch = Schedule(func)
    rv = sch.get_block(block)
    with pytest.raises(ScheduleError, match=message):
        sch.pad_einsum(rv, padding)
    assert tir.structural_equal(sch.func, func)


def test_pad_einsum_symbolic_extent_pads_to_ceildiv() -> None:
    # A size (here the scalar parameter n) is padded to ceildiv(n, 16) * 16 (issue 18).
    sch = tir.Schedule(symbolic, debug=True)
    sch.pad_einsum(sch.get_block("B"), [16])
    text = sch.mod.script()
    assert "(n + 15) // 16 * 16" in text
    for n in (1, 16, 17):
        a = np.arange(n, dtype="float32")
        b = np.zeros_like(a)
        tir.interpret(sch.mod, a, b, n)
        np.testing.assert_array_equal(b, a)
