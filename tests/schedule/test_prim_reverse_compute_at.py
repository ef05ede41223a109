"""reverse_compute_at: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError


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
def row_sum(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(16, 8):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                C[vi] = 0.0
            C[vi] = C[vi] + B[vi, vk]


# ---------------------------------------------------------------- positive


def test_reverse_compute_at_relu_under_matmul_tiles(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, 4])
    j0, _ = sch.split(j, [None, 8])
    sch.reverse_compute_at(sch.get_block("D"), j0)
    check_schedule(sch, matmul_relu, golden, "schedule/reverse_compute_at_matmul_tiles")
    loops = sch.get_loops(sch.get_block("D"))
    assert [sch.get_loop_node(loop).extent.value for loop in loops] == [4, 4, 2, 8]


def test_reverse_compute_at_split_with_remainder(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 5])
    sch.reverse_compute_at(sch.get_block("D"), i0)
    check_schedule(sch, matmul_relu, golden, "schedule/reverse_compute_at_remainder")
    assert "T.where(i_0 * 5 + ax0 < 16)" in sch.func.script()


def test_reverse_compute_at_preserve_unit_loops(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul_relu)
    _, j, _ = sch.get_loops(sch.get_block("C"))
    sch.reverse_compute_at(sch.get_block("D"), j, preserve_unit_loops=True)
    check_schedule(sch, matmul_relu, golden, "schedule/reverse_compute_at_unit_loops")
    assert len(sch.get_loops(sch.get_block("D"))) == 4


def test_reverse_compute_at_stencil_consumer(golden) -> None:  # type: ignore[no-untyped-def]
    # Each iteration computes every instance whose window meets the element just written;
    # an instance computed before its whole window is ready is computed again later.
    sch = Schedule(stencil)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    check_schedule(sch, stencil, golden, "schedule/reverse_compute_at_stencil")


def test_reverse_compute_at_reduction_consumer(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(row_sum)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    check_schedule(sch, row_sum, golden, "schedule/reverse_compute_at_row_sum")


# ---------------------------------------------------------------- negative


@T.script
def no_producer(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + 1.0


@T.script
def two_producers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
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
def two_produced(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    E = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
        with T.block("E"):
            vi = T.remap("S", i)
            E[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + E[vi]


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
def accumulate_no_init(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 4), "float32")
    for i, k in T.grid(16, 4):
        with T.block("B"):
            vi, vk = T.remap("SS", i, k)
            B[vi, vk] = A[vi, vk]
    for i, k in T.grid(16, 4):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            C[vi] = C[vi] + B[vi, vk]


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
def opaque_iter(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.opaque_axis(16, i)
            C[vi] = B[vi]


@T.script
def restricting_predicate(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi = T.spatial_axis(16, i * 4 + j)
            T.where(j % 2 == 0)
            C[vi] = B[vi]


@T.script
def strided_read(A: T.Buffer((32,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((32,), "float32")
    for i in range(32):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi * 2]


@T.script
def two_regions(A: T.Buffer((17,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(17):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            T.reads(B[vi], B[vi + 1])
            T.writes(C[vi])
            C[vi] = B[vi] + B[vi + 1]


@T.script
def partial_producer(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi]


@T.script
def inner_loop(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4), "float32")
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj]
    for i in range(4):
        with T.block("C"):
            vi = T.remap("S", i)
            for j in range(4):
                C[vi, j] = B[vi, j] * 2.0


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


def _loop(sch: Schedule, block: str, position: int):  # type: ignore[no-untyped-def]
    return sch.get_loops(sch.get_block(block))[position]


@pytest.mark.parametrize(
    "func,block,loop_block,loop_position,message",
    [
        (matmul_relu, "D", "D", 0, r"reverse_compute_at: block 'D': the block is already under the loop i"),
        (matmul_relu, "C", "D", 0, r"the loop i comes after the block; .* use compute_at"),
        (no_producer, "C", "B", 0, r"the block has no producer in its scope"),
        (two_producers, "C", "B", 0, r"producer block 'E' is not under the loop i"),
        (output_read_between, "C", "B", 0, r"block 'X' accesses buffer C, which the block writes"),
        (accumulate_no_init, "C", "B", 0, r"the block is a reduction without T.init"),
        (self_reading, "C", "B", 0, r"the block reads a buffer it writes"),
        (opaque_iter, "C", "B", 0, r"the block has an opaque iterator \(vi\)"),
        (restricting_predicate, "C", "B", 0, r"the block's predicate \(T.where\) restricts more than"),
        (strided_read, "C", "B", 0, r"the iterator vi appears in the read region of B only in a form that cannot"),
        (two_regions, "C", "B", 0, r"the block reads B through 2 regions"),
        (guarded, "C", "B", 0, r"the block and its loops are the only statement of their parent"),
        (partial_producer, "C", "B", 0, r"the producers under the loop i do not write every element of B"),
    ],
)
def test_reverse_compute_at_refuses(
    func: PrimFunc, block: str, loop_block: str, loop_position: int, message: str
) -> None:
    sch = Schedule(func)
    loop = _loop(sch, loop_block, loop_position)
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_at(sch.get_block(block), loop)
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


def _inner_j(sch: Schedule):  # type: ignore[no-untyped-def]
    (j,) = [
        sch.loop_rv(node.loop_var)
        for node in sch.index.loops.values()
        if node.loop_var.name == "j" and sch.index.scope_block(node) is sch.index.blocks["C"]
    ]
    return j


def test_reverse_compute_at_refuses_a_loop_inside_the_block() -> None:
    sch = Schedule(inner_loop)
    with pytest.raises(ScheduleError, match=r"reverse_compute_at: block 'C': the loop j is inside the block itself"):
        sch.reverse_compute_at(sch.get_block("C"), _inner_j(sch))
    assert tir.structural_equal(sch.func, inner_loop)


def test_reverse_compute_at_refuses_a_loop_of_another_scope() -> None:
    sch = Schedule(inner_loop)
    with pytest.raises(ScheduleError, match=r"block 'B': the block and the loop j are in different block scopes"):
        sch.reverse_compute_at(sch.get_block("B"), _inner_j(sch))
    assert tir.structural_equal(sch.func, inner_loop)


# ---------------------------------------------------------------- reductions (issue 17 A.2)


def test_reverse_compute_at_refuses_a_reduction_under_the_loop_that_walks_its_reduction() -> None:
    """Under B's loop j, one iteration produces B[i, j] only, while C sums the whole row: C
    would run its reduction over elements not produced yet."""
    sch = Schedule(row_sum)
    _, j = sch.get_loops(sch.get_block("B"))
    message = (
        r"the block is a reduction over dimension 1 of B, but one iteration of the loop j produces only part "
        r"of that dimension \(\[j, j \+ 1\) of \[0, 8\)\)"
    )
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_at(sch.get_block("C"), j)
    assert tir.structural_equal(sch.func, row_sum)


@pytest.mark.parametrize("position", [0, 1])
def test_decompose_reduction_after_reverse_compute_at_is_correct_or_refused(position: int) -> None:
    sch = Schedule(row_sum, debug=True)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    loops = sch.get_loops(sch.get_block("C"))
    sch.decompose_reduction(sch.get_block("C"), loops[position])
    check_numerics(row_sum, sch.func)
    check_replay(sch, row_sum)


@T.script
def row_sum_recomputed(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
        for ax0 in range(8):
            with T.block("C"):
                vi, vk = T.remap("SR", i, ax0)
                with T.init():
                    C[vi] = 0.0
                C[vi] = C[vi] + B[vi, vk]


def test_decompose_reduction_refuses_to_hoist_the_init_above_a_loop_that_repeats_the_reduction() -> None:
    """The program an earlier reverse_compute_at made (C's whole reduction recomputed at each
    j): hoisting the init above j would sum each row 8 times."""
    for position in (0, 1):
        sch = Schedule(row_sum_recomputed)
        loops = sch.get_loops(sch.get_block("C"))
        with pytest.raises(ScheduleError, match=r"loop j repeats instances of the block"):
            sch.decompose_reduction(sch.get_block("C"), loops[position])
    sch = Schedule(row_sum_recomputed, debug=True)
    sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[2])
    check_numerics(row_sum_recomputed, sch.func)


def test_reverse_compute_at_reads_two_buffers_produced_under_the_loop() -> None:
    """A consumer of two buffers both written per iteration (a softmax's exponentials read the
    scores and the row maxima) runs, per iteration, the instances both agree on."""
    sch = Schedule(two_produced)
    sch.reverse_compute_at(sch.get_block("C"), _loop(sch, "B", 0))
    assert len(sch.get_loops(sch.get_block("C"))) == 1  # one instance per iteration of i
    check_numerics(two_produced, sch.func)
    check_replay(sch, two_produced)
