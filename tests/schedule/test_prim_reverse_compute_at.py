"""reverse_compute_at: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError
from tir.transform.lower_cross_thread_reduction import lower_cross_thread_reduction


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


def test_reverse_compute_at_splits_a_reduction_across_the_loop_that_walks_it(golden) -> None:  # type: ignore[no-untyped-def]
    """Under B's loop j, one iteration produces B[i, j] only, and C sums the row: C's reduction
    is split across j, each iteration adding the element it has just produced (vk = j), the
    init at j = 0."""
    sch = Schedule(row_sum, debug=True)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), j)
    check_schedule(sch, row_sum, golden, "schedule/reverse_compute_at_split_reduction")
    assert "cross_thread_reduction" not in sch.get(sch.get_block("C")).annotations


@T.script
def row_sum_sliding(A: T.Buffer((16, 9), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 9), "float32")
    for i, j in T.grid(16, 8):
        for dj in range(2):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                vj = T.axis.spatial(9, j + dj)
                B[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(16, 9):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                C[vi] = 0.0
            C[vi] = C[vi] + B[vi, vk]


@T.script
def row_sum_in_blocks(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i in T.thread_binding(16, thread="blockIdx.x"):
        for j in T.thread_binding(8, thread="blockIdx.y"):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(16, 8):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                C[vi] = 0.0
            C[vi] = C[vi] + B[vi, vk]


def test_reverse_compute_at_refuses_splitting_a_reduction_over_overlapping_tiles() -> None:
    """Each j writes B[i, j:j + 2]: the tiles overlap, so a split reduction would add the
    shared elements twice; the whole reduction cannot run there either."""
    sch = Schedule(row_sum_sliding)
    _, j, _ = sch.get_loops(sch.get_block("B"))
    message = (
        r"the block is a reduction over dimension 1 of B, but one iteration of the loop j produces only part "
        r"of that dimension \(\[j, j \+ 2\) of \[0, 9\)\)"
    )
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_at(sch.get_block("C"), j)
    assert tir.structural_equal(sch.func, row_sum_sliding)


def test_reverse_compute_at_refuses_splitting_a_reduction_across_thread_blocks() -> None:
    """Bound to blockIdx.y, the iterations of j run at once in different thread blocks, which
    no lowering combines: a split reduction would race on C."""
    sch = Schedule(row_sum_in_blocks)
    _, j = sch.get_loops(sch.get_block("B"))
    message = r"splitting it across the iterations instead would have the threads of blockIdx.y accumulate into C"
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_at(sch.get_block("C"), j)
    assert tir.structural_equal(sch.func, row_sum_in_blocks)


@T.script
def factorized(A: T.Buffer((16, 16, 16), "float32"), B: T.Buffer((16,), "float32")):
    B_rf_local = T.alloc_buffer((16, 16), "float32", scope="local")
    for j in T.thread_binding(16, thread="blockIdx.x"):
        for i_o in T.thread_binding(4, thread="threadIdx.x"):
            for i_i, k in T.grid(4, 16):
                with T.block("B_rf"):
                    vi = T.axis.spatial(16, i_o * 4 + i_i)
                    vj, vk = T.remap("SR", j, k)
                    with T.init():
                        B_rf_local[vi, vj] = 0.0
                    B_rf_local[vi, vj] = B_rf_local[vi, vj] + A[vj, vi, vk]
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + B_rf_local[vk, vi]


def test_reverse_compute_at_splits_a_reduction_across_threads_as_a_cross_thread_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    """TVM's test_reverse_compute_at_factorized: B goes under the threadIdx.x loop i_o, each
    thread reducing its 4 of the 16 partials into B[j]. In order that equals the original; on a
    GPU the threads run at once, so the block is marked a cross-thread reduction (as ``bind``
    marks one), and lowering combines the threads' partial sums with warp shuffles -- never a
    race on B[j]."""
    sch = Schedule(factorized, debug=True)
    _, i_o, _, _ = sch.get_loops(sch.get_block("B_rf"))
    sch.reverse_compute_at(sch.get_block("B"), i_o)
    check_schedule(sch, factorized, golden, "schedule/reverse_compute_at_split_reduction_threads", llvm=False)
    assert sch.get(sch.get_block("B")).annotations["cross_thread_reduction"] is True
    lowered = lower_cross_thread_reduction(sch.func).script()
    assert "cross_thread_reduction" not in lowered and lowered.count("cuda_shfl_down_sync") == 2  # 4 lanes


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


# ---------------------------------------------------------------- reads through floordiv / floormod


@T.script
def flatten_read(X: T.Buffer((16, 16), "float32"), Y: T.Buffer((256,), "float32")):
    temp = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("A"):
            vi, vj = T.remap("SS", i, j)
            temp[vi, vj] = X[vj, vi] + 1.0
    for i in range(256):
        with T.block("B"):
            vi = T.remap("S", i)
            Y[vi] = temp[vi // 16, vi % 16]


@T.script
def nested_digits_read(A: T.Buffer((16, 64, 8, 32), "float32"), C: T.Buffer((3, 512, 512), "float32")):
    B = T.alloc_buffer((1, 128, 16, 8, 2, 32, 2), "float32")
    for a1, a2, a3, a4, a5, a6, a7 in T.grid(1, 128, 16, 8, 2, 32, 2):
        with T.block("In"):
            v1, v2, v3, v4, v5, v6, v7 = T.remap("SSSSSSS", a1, a2, a3, a4, a5, a6, a7)
            B[v1, v2, v3, v4, v5, v6, v7] = (
                A[(v2 * 4 + v5 * 2 + v7) // 32, (v3 * 32 + v6) // 8, v4, (v2 * 4 + v5 * 2 + v7) % 32] + 3.0
            )
    for x1, x2, x3 in T.grid(3, 512, 512):
        with T.block("Out"):
            w1, w2, w3 = T.remap("SSS", x1, x2, x3)
            C[w1, w2, w3] = B[w1 // 8, w2 // 4, w3 // 32, w1, w2 % 4 // 2, w3 % 32, w2 % 2] * 2.0


@T.script
def layout_change(A: T.Buffer((1, 3, 5, 5, 16), "float32"), C: T.Buffer((1, 6, 5, 5, 8), "float32")):
    B = T.alloc_buffer((1, 3, 5, 5, 16), "float32")
    for i0, i1, i2, i3, i4 in T.grid(1, 3, 5, 5, 16):
        with T.block("compute"):
            v0, v1, v2, v3, v4 = T.remap("SSSSS", i0, i1, i2, i3, i4)
            B[v0, v1, v2, v3, v4] = A[v0, v1, v2, v3, v4] + 1.0
    for j0, j1, j2, j3, j4 in T.grid(1, 6, 5, 5, 8):
        with T.block("T_layout_trans"):
            w0, w1, w2, w3, w4 = T.remap("SSSSS", j0, j1, j2, j3, j4)
            C[w0, w1, w2, w3, w4] = B[w0, (w1 * 8 + w4) // 16, w2, w3, (w1 * 8 + w4) % 16]


def test_reverse_compute_at_floordiv_floormod_read(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reverse_compute_at_floordiv_and_floormod_indices: row i of temp feeds
    # Y[i * 16 : i * 16 + 16], found by inverting (vi // 16, vi % 16).
    sch = Schedule(flatten_read)
    i, _ = sch.get_loops(sch.get_block("A"))
    sch.reverse_compute_at(sch.get_block("B"), i)
    check_schedule(sch, flatten_read, golden, "schedule/reverse_compute_at_floordiv_floormod")
    assert "i * 16 + ax0" in sch.func.script()


def test_reverse_compute_at_nested_floordiv_floormod_read(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reverse_compute_at_floordiv_and_floormod_recursive: digits of w2 spread over
    # three dimensions, w1 both alone and (as a constant 0) divided.
    sch = Schedule(nested_digits_read)
    _, _, a3, _, _, _, _ = sch.get_loops(sch.get_block("In"))
    sch.reverse_compute_at(sch.get_block("Out"), a3)
    check_schedule(sch, nested_digits_read, golden, "schedule/reverse_compute_at_floordiv_floormod_nested")
    loops = sch.get_loops(sch.get_block("Out"))
    assert [sch.get_loop_node(loop).extent.value for loop in loops] == [1, 128, 16, 3, 4, 32]


def test_reverse_compute_at_layout_change_read(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reverse_compute_at_layout_trans: one 16-wide block of B (i1) feeds two
    # 8-wide blocks of C (w1 in [i1 * 2, i1 * 2 + 2)).
    sch = Schedule(layout_change)
    _, i1, _, _, _ = sch.get_loops(sch.get_block("compute"))
    sch.reverse_compute_at(sch.get_block("T_layout_trans"), i1)
    check_schedule(sch, layout_change, golden, "schedule/reverse_compute_at_layout_change")
    loops = sch.get_loops(sch.get_block("T_layout_trans"))
    assert [sch.get_loop_node(loop).extent.value for loop in loops] == [1, 3, 2, 5, 5, 8]


@T.script
def overlapping_digits_read(X: T.Buffer((16, 16), "float32"), Y: T.Buffer((128,), "float32")):
    temp = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("A"):
            vi, vj = T.remap("SS", i, j)
            temp[vi, vj] = X[vj, vi] + 1.0
    for i in range(128):
        with T.block("B"):
            vi = T.remap("S", i)
            Y[vi] = temp[vi // 8, vi % 16]


def test_reverse_compute_at_refuses_a_read_index_that_is_not_one_to_one() -> None:
    # vi // 8 and vi % 16 share the digit vi // 8 % 2: no inverse, so no instance range.
    sch = Schedule(overlapping_digits_read)
    i, _ = sch.get_loops(sch.get_block("A"))
    with pytest.raises(ScheduleError, match="cannot be inverted"):
        sch.reverse_compute_at(sch.get_block("B"), i)


# ---------------------------------------------------------------- index: where under the loop


@T.script
def two_consumers(A: T.Buffer((128, 128), "float32"), D: T.Buffer((128, 128), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    C = T.alloc_buffer((128, 128), "float32")
    for i_0, j_0, i_1 in T.grid(8, 8, 16):
        for j_1 in range(16):
            with T.block("B"):
                vi = T.spatial_axis(128, i_0 * 16 + i_1)
                vj = T.spatial_axis(128, j_0 * 16 + j_1)
                B[vi, vj] = A[vi, vj] * 2.0
        for ax0 in range(16):
            with T.block("C"):
                vi = T.spatial_axis(128, i_0 * 16 + i_1)
                vj = T.spatial_axis(128, j_0 * 16 + ax0)
                C[vi, vj] = B[vi, vj] + 1.0
    for i, j in T.grid(128, 128):
        with T.block("D"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = B[vi, vj] + 1.0


@T.script
def small_consumer(A: T.Buffer((128, 128), "float32"), D: T.Buffer((1, 2, 1), "float32")):
    B = T.alloc_buffer((128, 128), "float32")
    for i_0, j_0, i_1 in T.grid(8, 8, 16):
        for j_1 in range(16):
            with T.block("B"):
                vi = T.spatial_axis(128, i_0 * 16 + i_1)
                vj = T.spatial_axis(128, j_0 * 16 + j_1)
                B[vi, vj] = A[vi, vj] * 2.0
    for ax0, ax1, ax2 in T.grid(1, 2, 1):
        with T.block("D"):
            v0, v1, v2 = T.remap("SSS", ax0, ax1, ax2)
            D[v0, v1, v2] = B[v0, v1] + 1.0


def test_reverse_compute_at_to_index(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reverse_compute_at_to_index: index=1 puts D between B's loop and C's.
    sch = Schedule(two_consumers)
    i_1 = sch.get_loops(sch.get_block("B"))[2]
    sch.reverse_compute_at(sch.get_block("D"), i_1, index=1)
    check_schedule(sch, two_consumers, golden, "schedule/reverse_compute_at_to_index")
    script = sch.func.script()
    assert script.index('T.block("B")') < script.index('T.block("D")') < script.index('T.block("C")')


def test_reverse_compute_at_first_point_after_the_producers() -> None:
    # index=-2: right after the last statement that writes what D reads (here as index=1).
    sch = Schedule(two_consumers)
    i_1 = sch.get_loops(sch.get_block("B"))[2]
    sch.reverse_compute_at(sch.get_block("D"), i_1, index=-2)
    check_numerics(two_consumers, sch.func)
    check_replay(sch, two_consumers)
    script = sch.func.script()
    assert script.index('T.block("B")') < script.index('T.block("D")') < script.index('T.block("C")')


def test_reverse_compute_at_with_unit_loop_to_index(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reverse_compute_at_with_unit_loop: index=1 is after the only statement.
    sch = Schedule(small_consumer)
    i_1 = sch.get_loops(sch.get_block("B"))[2]
    sch.reverse_compute_at(sch.get_block("D"), i_1, preserve_unit_loops=True, index=1)
    check_schedule(sch, small_consumer, golden, "schedule/reverse_compute_at_unit_loop_to_index")


@pytest.mark.parametrize(
    "index,message",
    [
        (0, r"index=0: statement 0 of the loop i_1 writes what the block reads, so the block must go after it"),
        (3, r"index=3: the body of the loop i_1 has 2 statements: the index must be -1, -2 or in \[0, 2\]"),
        (-3, r"index=-3: the body of the loop i_1 has 2 statements"),
    ],
)
def test_reverse_compute_at_refuses_an_index_before_a_producer(index: int, message: str) -> None:
    sch = Schedule(two_consumers)
    i_1 = sch.get_loops(sch.get_block("B"))[2]
    with pytest.raises(ScheduleError, match=message):
        sch.reverse_compute_at(sch.get_block("D"), i_1, index=index)
    assert tir.structural_equal(sch.func, two_consumers)


@T.script
def diagonal_tiles(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for t, a, b in T.grid(4, 4, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, t * 4 + a)
            vj = T.axis.spatial(16, t * 4 + b)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(16, 16):
        with T.block("C"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                C[vi] = 0.0
            C[vi] = C[vi] + B[vi, vk]


def test_reverse_compute_at_refuses_splitting_a_reduction_when_the_loop_walks_a_spatial_dimension_too() -> None:
    """Each t writes the diagonal tile B[4t:4t+4, 4t:4t+4]: splitting C's reduction there would
    run only the pairs (vi, vk) of the same tile, never the others."""
    sch = Schedule(diagonal_tiles)
    t, _, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"one iteration of the loop t produces only part of that dimension"):
        sch.reverse_compute_at(sch.get_block("C"), t)
    assert tir.structural_equal(sch.func, diagonal_tiles)
