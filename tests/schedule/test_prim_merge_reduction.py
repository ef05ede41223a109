"""merge_reduction: golden, numerics, replay, the inverse of decompose_reduction, and one
negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def rowsum(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10,), "float32")):
    for i, k in T.grid(10, 12):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def two_blocks(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                B[vi] = B[vi] + A[vi, vk]


def test_merge_a_hand_written_init_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(two_blocks)
    merged = sch.merge_reduction(sch.get_block("B_init"), sch.get_block("B"))
    assert merged.block_name == "B"
    assert sch.get_block_node(merged).init is not None
    check_schedule(sch, two_blocks, golden, "schedule/merge_reduction_rowsum")


def test_decompose_then_merge_in_one_trace(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    _, j, _ = sch.get_loops(block)
    init = sch.decompose_reduction(block, j)
    sch.merge_reduction(init, block)
    tir.assert_structural_equal(sch.func, matmul)
    check_schedule(sch, matmul, golden, "schedule/merge_reduction_roundtrip")


def _tiled_rowsum(reorder: bool) -> Schedule:
    sch = Schedule(rowsum)
    block = sch.get_block("B")
    i, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    k0, k1 = sch.split(k, [None, 5])
    if reorder:
        sch.reorder(i0, k0, i1, k1)
    return sch


@pytest.mark.parametrize("reorder,position", [(True, 0), (True, 1), (False, 0), (False, 1), (False, 2)])
def test_merge_undoes_decompose_at_every_loop(reorder: bool, position: int) -> None:
    sch = _tiled_rowsum(reorder)
    before = sch.func
    block = sch.get_block("B")
    init = sch.decompose_reduction(block, sch.get_loops(block)[position])
    assert not tir.structural_equal(sch.func, before)
    sch.merge_reduction(init, block)
    tir.assert_structural_equal(sch.func, before)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_merge_undoes_decompose_of_matmul(position: int) -> None:
    sch = Schedule(matmul)
    block = sch.get_block("C")
    init = sch.decompose_reduction(block, sch.get_loops(block)[position])
    sch.merge_reduction(init, block)
    tir.assert_structural_equal(sch.func, matmul)


# ---------------------------------------------------------------- negative tests


@T.script
def init_with_init(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            with T.init():
                B[vi] = 1.0
            B[vi] = 0.0
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                B[vi] = B[vi] + A[vi, vk]


@T.script
def init_allocates(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            S = T.alloc_buffer((1,), "float32")
            S[0] = 0.0
            B[vi] = S[0]
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                B[vi] = B[vi] + A[vi, vk]


@T.script
def init_loop_body(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            for x in range(1):
                B[vi + x] = 0.0
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                B[vi] = B[vi] + A[vi, vk]


@T.script
def update_has_init(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]


@T.script
def update_not_reduction(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = B[vi] + A[vi]


@T.script
def other_scope(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("P"):
        for i in range(8):
            with T.block("B_init"):
                vi = T.remap("S", i)
                B[vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def not_adjacent(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
    for i in range(8):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = 1.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def reduce_loop_outside(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for k in range(8):
        for i in range(8):
            with T.block("B_init"):
                vi = T.remap("S", i)
                B[vi] = 0.0
        for i in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                B[vi] = B[vi] + A[vi, vk]


@T.script
def fused_update(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
    for f in range(64):
        with T.block("B"):
            vi = T.spatial_axis(8, f // 8)
            vk = T.reduce_axis(8, f % 8)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def guarded_update(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
        for k in range(8):
            if i < 8:
                with T.block("B"):
                    vi, vk = T.remap("SR", i, k)
                    B[vi] = B[vi] + A[vi, vk]


@T.script
def loop_count_differs(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("B_init"):
        vi = T.spatial_axis(8, 0)
        B[vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def loop_bounds_differ(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(4):
        with T.block("B_init"):
            vi = T.spatial_axis(8, i)
            B[vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def binding_differs(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.spatial_axis(8, 7 - i)
            B[vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def iterator_missing(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B_init"):
            vi = T.spatial_axis(8, i)
            B[vi, j] = 0.0
        for k in range(8):
            with T.block("B"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                B[vi, vj] = B[vi, vj] + A[vi, vk]


@T.script
def body_uses_loop(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = T.cast(i, "float32")
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def predicate_differs(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            T.where(i < 4)
            B[vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def writes_other_buffer(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            D[vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def other_element(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[7 - vi] = 0.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            B[vi] = B[vi] + A[vi, vk]


@T.script
def sibling_reader(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
    for i in range(8):
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                B[vi] = B[vi] + A[vi, vk]
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = B[vi]


@T.script
def reversed_reduce(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            B[vi] = 0.0
        for k in range(8):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(8, 7 - k)
                B[vi] = B[vi] + A[vi, vk]


CASES: list[tuple[str, PrimFunc, str, str, str]] = [
    ("same block", two_blocks, "B", "B", "the init block and the update block are the same"),
    ("init has a reduce iterator", two_blocks, "B", "B_init", "the init block must have only spatial iterators"),
    ("init has an init", init_with_init, "B_init", "B", r"the init block has a T.init\(\) of its own"),
    ("init allocates", init_allocates, "B_init", "B", "the init block allocates or matches buffers"),
    ("init body not stores", init_loop_body, "B_init", "B", "the init block's body must be a buffer store"),
    ("update has an init", update_has_init, "B_init", "B", r"block 'B': the update block already has a T.init\(\)"),
    ("update not a reduction", update_not_reduction, "B_init", "B", "the block has no reduce iterator"),
    ("other scope", other_scope, "B_init", "B", "the init block is not in the same scope as block 'B'"),
    ("not adjacent", not_adjacent, "B_init", "B", "must be followed directly by block 'B' or a loop above it"),
    ("reduce loop outside", reduce_loop_outside, "B_init", "B", "loop k, above the init block, drives a reduce"),
    ("mixed loop", fused_update, "B_init", "B", "loop f drives both spatial and reduce iterators"),
    ("not only loops between", guarded_update, "B_init", "B", "only loops may lie between loop k and the block"),
    ("loop count differs", loop_count_differs, "B_init", "B", r"the init block's loops \(none\) do not match .* \(i\)"),
    ("loop bounds differ", loop_bounds_differ, "B_init", "B", "init loop i does not have the bounds of loop i"),
    ("binding differs", binding_differs, "B_init", "B", r"init iterator vi \(bound to 7 - i\) matches no spatial"),
    ("iterator missing", iterator_missing, "B_init", "B", r"spatial iterators \['vj'\] of 'B' have no init iterator"),
    ("body uses a loop", body_uses_loop, "B_init", "B", "the init block's body uses its loop variables directly"),
    ("predicate differs", predicate_differs, "B_init", "B", "the init block's predicate i < 4 is not the update's"),
    ("writes another buffer", writes_other_buffer, "B_init", "B", "block 'B' does not write D"),
    ("other element", other_element, "B_init", "B", "the body accesses the output B at other indices"),
    ("sibling reader", sibling_reader, "B_init", "B", "something else inside the update's loops accesses the output B"),
    ("init would not run first", reversed_reduce, "B_init", "B", "reduce iterator vk is not at its minimum 0"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_merge_reduction_refuses(case: tuple[str, PrimFunc, str, str, str]) -> None:
    _, func, init_name, update_name, message = case
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        sch.merge_reduction(sch.get_block(init_name), sch.get_block(update_name))
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


@T.script
def init_then_not_quasi_affine(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(128):
        with T.block("B_init"):
            vi = T.axis.S(128, i)
            B[vi] = 0.0
        for k in range(16):
            with T.block("B"):
                vi = T.axis.S(128, i)
                vk = T.axis.R(128, T.floordiv(k * k, 2))
                B[vi] = B[vi] + A[vi, vk]


def test_merge_reduction_refuses_bindings_that_are_not_quasi_affine_without_debug() -> None:
    # vk = k * k // 2 is 0 at k = 0 and at k = 1: merged, the init would run again at k = 1 and
    # drop the first term. Without debug nothing validates the program first.
    sch = Schedule(init_then_not_quasi_affine)
    before = sch.func
    with pytest.raises(
        ScheduleError, match=r"merge_reduction: block 'B': the bindings are not quasi-affine and independent"
    ):
        sch.merge_reduction(sch.get_block("B_init"), sch.get_block("B"))
    assert sch.func is before
