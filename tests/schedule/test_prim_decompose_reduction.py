"""decompose_reduction: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

from collections.abc import Callable

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
def rowmax(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = T.float32("-inf")
            B[vi] = T.max(B[vi], A[vi, vk])


def test_decompose_at_the_reduce_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    _, _, k = sch.get_loops(block)
    init = sch.decompose_reduction(block, k)
    assert init.block_name == "C_init"
    assert sch.get_block_node(block).init is None
    check_schedule(sch, matmul, golden, "schedule/decompose_reduction_matmul_k")


def test_decompose_at_the_outermost_loop_copies_the_spatial_loops(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    init = sch.decompose_reduction(block, i)
    check_schedule(sch, matmul, golden, "schedule/decompose_reduction_matmul_i")
    assert [sch.get_loop_node(lp).loop_var.name for lp in sch.get_loops(init)] == ["i_init", "j_init"]


def test_decompose_a_max_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(rowmax)
    block = sch.get_block("B")
    _, k = sch.get_loops(block)
    sch.decompose_reduction(block, k)
    check_schedule(sch, rowmax, golden, "schedule/decompose_reduction_rowmax")


def test_decompose_tiled_keeps_spatial_predicate_and_drops_reduce_one(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(rowsum)
    block = sch.get_block("B")
    i, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    k0, k1 = sch.split(k, [None, 5])
    sch.reorder(i0, k0, i1, k1)
    init = sch.decompose_reduction(block, k0)
    check_schedule(sch, rowsum, golden, "schedule/decompose_reduction_tiled")
    # The init gets a copy of i_1 (spatial, under k_0), not of k_0 / k_1, and keeps the row guard.
    init_loops = [sch.get_loop_node(lp).loop_var.name for lp in sch.get_loops(init)]
    assert init_loops == ["i_0", "i_1_init"]
    assert "T.where(i_0 * 4 + i_1_init < 10)" in sch.func.script()


@T.script
def taken_name(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B_init"):
            vi = T.remap("S", i)
            D[vi] = 1.0
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


def test_decompose_names_stay_unique() -> None:
    sch = Schedule(taken_name)
    block = sch.get_block("B")
    init = sch.decompose_reduction(block, sch.get_loops(block)[1])
    assert init.block_name == "B_init_1"


# ---------------------------------------------------------------- negative tests


@T.script
def two_nests(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
    for i in range(8):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = A[vi, 0]


@T.script
def no_reduce_axis(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi]


@T.script
def opaque_axis(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi = T.opaque_axis(8, i)
            vk = T.reduce_axis(8, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def reduce_outer(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for k, i in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def fused(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for f in range(64):
        with T.block("B"):
            vi = T.spatial_axis(8, f // 8)
            vk = T.reduce_axis(8, f % 8)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def guarded(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in range(8):
            if i < 6:
                with T.block("B"):
                    vi, vk = T.remap("SR", i, k)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]


@T.script
def bounds_use_reduce_loop(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, k in T.grid(8, 8):
        for j in range(k, k + 1):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vj = T.spatial_axis(8, j)
                vk = T.reduce_axis(8, k)
                with T.init():
                    B[vi, vj] = 0.0
                B[vi, vj] = B[vi, vj] + A[vi, vk]


@T.script
def init_reads_reduce(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = A[vi, vk]
            B[vi] = B[vi] + A[vi, vk]


@T.script
def init_loop(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                for x in range(1):
                    B[vi + x] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def init_own_buffer(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            S = T.alloc_buffer((1,), "float32")
            with T.init():
                B[vi] = S[0]
            B[vi] = B[vi] + A[vi, vk]


@T.script
def one_element(A: T.Buffer((8, 8), "float32"), B: T.Buffer((1,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[0] = 0.0
            B[0] = B[0] + A[vi, vk]


@T.script
def reduce_indexed(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi, vk] = 0.0
            B[vi, vk] = B[vi, vk] + A[vi, vk]


@T.script
def body_reads_neighbour(A: T.Buffer((8, 8), "float32"), B: T.Buffer((9,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk] * B[vi + 1]


@T.script
def sibling_reader(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = B[vi] * 2.0


@T.script
def reversed_reduce(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(8, 7 - k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


def _block_and_loop(sch: Schedule, block: str, loop: int) -> tuple:  # type: ignore[type-arg]
    rv = sch.get_block(block)
    return rv, sch.get_loops(rv)[loop]


CASES: list[tuple[str, PrimFunc, Callable[[Schedule], object], str]] = [
    (
        "loop not above the block",
        two_nests,
        lambda sch: sch.decompose_reduction(sch.get_block("B"), sch.get_loops(sch.get_block("D"))[0]),
        r"decompose_reduction: loop i: the loop is not above block 'B'",
    ),
    (
        "no reduce iterator",
        no_reduce_axis,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 0)),
        "the block has no reduce iterator",
    ),
    (
        "opaque iterator",
        opaque_axis,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"only spatial and reduce iterators; \['vi'\] are opaque",
    ),
    (
        "init not stores",
        init_loop,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"the init must be a buffer store",
    ),
    (
        "reduce loop above",
        reduce_outer,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"loop k above loop i drives a reduce iterator, so the init would run once per iteration",
    ),
    (
        "mixed loop",
        fused,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 0)),
        r"loop f drives both spatial and reduce iterators",
    ),
    (
        "not only loops between",
        guarded,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 0)),
        r"only loops may lie between loop i and the block, found a IfThenElse",
    ),
    (
        "copied loop bounds use a reduce loop",
        bounds_use_reduce_loop,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 0)),
        r"the bounds of loop j use loops \['k'\] that drive reduce iterators",
    ),
    (
        "init uses a reduce iterator",
        init_reads_reduce,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"the init uses reduce iterators \['vk'\]",
    ),
    (
        "init uses the block's own buffer",
        init_own_buffer,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        "the init uses a buffer the block allocates or matches",
    ),
    (
        "output indexed by a reduce iterator",
        reduce_indexed,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"the output B is indexed by reduce iterators \['vk'\]",
    ),
    (
        "output not one element per spatial point",
        one_element,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"cannot show that the output B\[...\] is a different element for every spatial point",
    ),
    (
        "body accesses the output elsewhere",
        body_reads_neighbour,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        "the body accesses the output B at other indices than the init stores to",
    ),
    (
        "another block under the loop uses the output",
        sibling_reader,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 0)),
        "something else under loop i accesses the output B",
    ),
    (
        "init would not run first",
        reversed_reduce,
        lambda sch: sch.decompose_reduction(*_block_and_loop(sch, "B", 1)),
        r"reduce iterator vk is not at its minimum 0 when its loops start",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_decompose_reduction_refuses(case: tuple[str, PrimFunc, Callable[[Schedule], object], str]) -> None:
    _, func, action, message = case
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        action(sch)
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


def test_decompose_reduction_refuses_a_block_without_init() -> None:
    sch = Schedule(matmul)
    sch.decompose_reduction(*_block_and_loop(sch, "C", 2))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"decompose_reduction: block 'C': the block has no T.init\(\)"):
        sch.decompose_reduction(*_block_and_loop(sch, "C", 1))
    assert sch.func is before


def test_decompose_reduction_of_the_sibling_case_at_the_inner_loop_is_fine() -> None:
    # The same program is accepted one loop further in: nothing else runs under k.
    from schedule_testing import check_numerics

    sch = Schedule(sibling_reader)
    sch.decompose_reduction(*_block_and_loop(sch, "B", 1))
    check_numerics(sibling_reader, sch.func, llvm=False)


# ---------------------------------------------------------------- blockized reductions (TVM's test_reduction_decompose1)


@T.script
def rowsum_blockized(A: T.Buffer((8, 4, 32), "float32"), B: T.Buffer((8, 4), "float32")):
    for i0, i2_0 in T.grid(8, 4):
        with T.block("blockized_B"):
            io, ko = T.remap("SR", i0, i2_0)
            with T.init():
                for i1 in range(4):
                    with T.block("B_init"):
                        ii_init = T.spatial_axis(4, i1)
                        B[io, ii_init] = 0.0
            for i1_1, i2_1 in T.grid(4, 8):
                with T.block("B"):
                    ii = T.spatial_axis(4, i1_1)
                    k = T.reduce_axis(32, ko * 8 + i2_1)
                    B[io, ii] = B[io, ii] + A[io, ii, k]


@T.script
def tiles_overlap(A: T.Buffer((8, 32), "float32"), B: T.Buffer((10,), "float32")):
    for i0, k0 in T.grid(4, 4):
        with T.block("blockized_B"):
            io, ko = T.remap("SR", i0, k0)
            with T.init():
                for i1 in range(4):
                    with T.block("B_init"):
                        ii_init = T.spatial_axis(4, i1)
                        B[io * 2 + ii_init] = 0.0
            for i1, k1 in T.grid(2, 8):
                with T.block("B"):
                    ii = T.spatial_axis(2, i1)
                    k = T.reduce_axis(32, ko * 8 + k1)
                    B[io * 2 + ii] = B[io * 2 + ii] + A[io * 2 + ii, k]


@T.script
def body_outside_tile(A: T.Buffer((8, 4, 32), "float32"), B: T.Buffer((8, 5), "float32")):
    for i0, i2_0 in T.grid(8, 4):
        with T.block("blockized_B"):
            io, ko = T.remap("SR", i0, i2_0)
            with T.init():
                for i1 in range(4):
                    with T.block("B_init"):
                        ii_init = T.spatial_axis(4, i1)
                        B[io, ii_init] = 0.0
            for i1_1, i2_1 in T.grid(4, 8):
                with T.block("B"):
                    ii = T.spatial_axis(4, i1_1)
                    k = T.reduce_axis(32, ko * 8 + i2_1)
                    B[io, ii + 1] = B[io, ii + 1] + A[io, ii, k]


def test_decompose_a_blockized_reduction_hoists_its_tile_init(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(rowsum_blockized, debug=True)
    block = sch.get_block("blockized_B")
    io, _ = sch.get_loops(block)
    init = sch.decompose_reduction(block, io)
    assert sch.get(init).name == "blockized_B_init"
    check_schedule(sch, rowsum_blockized, golden, "schedule/decompose_reduction_blockized")


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (tiles_overlap, "cannot show that the init's tiles of B are disjoint"),
        (body_outside_tile, "the body accesses the output B outside the tile the init writes"),
    ],
)
def test_decompose_a_blockized_reduction_refuses(func: PrimFunc, message: str) -> None:
    sch = Schedule(func)
    before = sch.func
    block = sch.get_block("blockized_B")
    io, _ = sch.get_loops(block)
    with pytest.raises(ScheduleError, match=message):
        sch.decompose_reduction(block, io)
    assert sch.func is before


@T.script
def rowsum_not_quasi_affine(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 16):
        with T.block("B"):
            vi = T.axis.S(128, i)
            vk = T.axis.R(128, T.floordiv(k * k, 2))
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@pytest.mark.parametrize("position", [0, 1])
def test_decompose_reduction_refuses_bindings_that_are_not_quasi_affine_without_debug(position: int) -> None:
    # vk = k * k // 2 is 0 at k = 0 and at k = 1: the original starts the sum again at k = 1,
    # which an init hoisted before the loop would not. Without debug nothing validates first.
    sch = Schedule(rowsum_not_quasi_affine)
    before = sch.func
    with pytest.raises(
        ScheduleError, match=r"decompose_reduction: block 'B': the bindings are not quasi-affine and independent"
    ):
        sch.decompose_reduction(*_block_and_loop(sch, "B", position))
    assert sch.func is before
