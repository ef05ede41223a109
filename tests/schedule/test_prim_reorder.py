"""reorder: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
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
def pipeline(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def mirrored(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + B[15 - vi, 7 - vj]


@T.script
def running_sum(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.opaque_axis(4, i)
            vj = T.spatial_axis(4, j)
            B[vi, vj] = B[T.max(vi - 1, 0), vj] + A[vi, vj]


@T.script
def no_blocks(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        B[i, j] = A[i, j] * 2.0


@T.script
def two_nests(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i in range(16):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
        for j in range(8):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = B[vi, vj] + 1.0


@T.script
def nested_block(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i in range(16):
        with T.block("outer"):
            vi = T.spatial_axis(16, i)
            for j in range(8):
                with T.block("B"):
                    vj = T.spatial_axis(8, j)
                    B[vi, vj] = A[vi, vj] * 2.0


@T.script
def triangle(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i + 1):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vj = T.spatial_axis(8, j)
                B[vi, vj] = A[vi, vj] * 2.0


@T.script
def max_pool(data: T.Buffer((1, 9, 9, 2), "float32"), pool: T.Buffer((1, 4, 4, 2), "float32")):
    for n, h, w, c, rh, rw in T.grid(1, 4, 4, 2, 3, 3):
        with T.block("pool"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                pool[vn, vh, vw, vc] = T.float32("-inf")
            pool[vn, vh, vw, vc] = T.max(pool[vn, vh, vw, vc], data[vn, vh * 2 + vrh, vw * 2 + vrw, vc])


def test_reorder_matmul_reduction_outermost(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i)
    # k and i swap places; j, not given, stays in the middle. Handles stay valid.
    assert "for k, j, i in T.grid(16, 16, 16):" in sch.func.script()
    assert sch.get_loop_node(i).loop_var is i.loop_var
    check_schedule(sch, matmul, golden, "schedule/reorder_matmul")


def test_reorder_tiles_after_split(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [2, 8])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    check_schedule(sch, matmul, golden, "schedule/reorder_tiles")


def test_reorder_two_blocks_touching_disjoint_parts(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.reorder(j, i)
    check_schedule(sch, pipeline, golden, "schedule/reorder_pipeline")


def test_reorder_of_a_loop_fusing_spatial_and_reduction_axes_builds_right() -> None:
    # The innermost loop runs w, rh and rw fused: each iteration updates pool[0, h, f % 4, c],
    # so it carries a dependence through memory at a modulo address, which LLVM's loop
    # vectorizer got wrong (tir.codegen.llvm_vectorizer_guard). Found by the fuzzer.
    sch = Schedule(max_pool)
    n, h, w, c, rh, rw = sch.get_loops(sch.get_block("pool"))
    sch.reorder(rw, rh, w, h, n, c)
    fused = sch.fuse(rw, rh, w)
    sch.reorder(c, h, n, fused)
    assert "for c, h, n, rw_rh_w_fused in T.grid(2, 4, 1, 36):" in sch.func.script()
    check_numerics(max_pool, sch.func)
    check_replay(sch, max_pool)


def test_reorder_in_the_current_order_changes_nothing() -> None:
    sch = Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k)
    sch.reorder(j)
    assert sch.func is matmul


# ---------------------------------------------------------------- refusals


def _refused(func: tir.PrimFunc, block: str, pick, message: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(func)
    loops = sch.get_loops(sch.get_block(block))
    with pytest.raises(ScheduleError, match=message):
        sch.reorder(*pick(loops))
    assert sch.func is func  # a refused primitive changes nothing


def test_reorder_refuses_loops_with_a_sequence_between() -> None:
    _refused(
        two_nests,
        "B",
        lambda ls: [ls[1], ls[0]],
        r"reorder: loop j: the loops must be perfectly nested under loop i: the body of loop i is a SeqStmt",
    )


def test_reorder_refuses_loops_of_different_nests() -> None:
    sch = Schedule(two_nests)
    _, j_b = sch.get_loops(sch.get_block("B"))
    _, j_c = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"the body of loop j is a BlockRealize, not a single loop"):
        sch.reorder(j_c, j_b)
    assert sch.func is two_nests


def test_reorder_refuses_a_block_between_the_loops() -> None:
    sch = Schedule(nested_block)
    (i,) = sch.get_loops(sch.get_block("outer"))
    (j,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"the body of loop i is a BlockRealize, not a single loop"):
        sch.reorder(j, i)
    assert sch.func is nested_block


def test_reorder_refuses_a_range_depending_on_a_loop_moved_inside() -> None:
    _refused(
        triangle,
        "B",
        lambda ls: [ls[1], ls[0]],
        r"reorder: loop j: the range of loop j depends on loop i, which would not be outside it",
    )


def test_reorder_refuses_an_opaque_iterator_of_a_moved_loop() -> None:
    _refused(
        running_sum,
        "B",
        lambda ls: [ls[1], ls[0]],
        r"reorder: loop i: an opaque iterator is bound to a moved loop; its instances must keep their order "
        r"\(block 'B'\)\n    vi = T.opaque_axis\(4, i\)",
    )


def test_reorder_refuses_a_statement_outside_every_block() -> None:
    sch = Schedule(no_blocks)
    loops = [sch.loop_rv(loop.loop_var) for loop in [no_blocks.body.block.body, no_blocks.body.block.body.body]]
    with pytest.raises(ScheduleError, match=r"reorder: loop i: a statement outside every block sits under the loops"):
        sch.reorder(loops[1], loops[0])
    assert sch.func is no_blocks


def test_reorder_refuses_a_dependence_between_blocks() -> None:
    _refused(
        mirrored,
        "C",
        lambda ls: [ls[1], ls[0]],
        r"reorder: loop i: blocks \['B', 'C'\] under the loops share buffer 'B' \(written by \['B'\]\); "
        r"cannot prove that different iterations touch disjoint parts of it, so it is not safe to change the "
        r"order of the iterations\n    block 'B' writes B\[i, j\]\n    block 'C' reads B\[0:16, 0:8\]",
    )


def test_reorder_refuses_a_loop_given_twice() -> None:
    _refused(matmul, "C", lambda ls: [ls[0], ls[1], ls[0]], r"reorder: loop i: each loop may be given only once")


def test_reorder_refuses_a_replaced_loop() -> None:
    sch = Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, 4])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"reorder: loop i: no such loop in the current program"):
        sch.reorder(k, i)
    assert sch.func is before
