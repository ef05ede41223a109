"""rfactor: golden, numerics, replay, and one negative test per precondition."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from schedule_testing import check_numerics, check_schedule

import tir
import tir.script as T
from tir.ir import For, ForKind, PrimFunc
from tir.schedule import Schedule, ScheduleError

RTOL = 1e-4  # rfactor reassociates float sums


@T.script
def rowsum(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def rowmax(A: T.Buffer((8, 18), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 18):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = T.float32("-inf")
            B[vi] = T.max(B[vi], A[vi, vk])


@T.script
def rowmin(A: T.Buffer((8, 12), "int32"), B: T.Buffer((8,), "int32")):
    for i, k in T.grid(8, 12):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 2147483647
            B[vi] = T.min(A[vi, vk], B[vi])


@T.script
def rowprod(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 1.0
            B[vi] = B[vi] * A[vi, vk]


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def colsum(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8,), "float32")):
    for k, j in T.grid(16, 8):
        with T.block("B"):
            vj, vk = T.remap("SR", j, k)
            with T.init():
                B[vj] = 0.0
            B[vj] = B[vj] + A[vk, vj]


def _split_reduce(sch: Schedule, block: str, factors: list) -> list:  # type: ignore[type-arg]
    loops = sch.get_loops(sch.get_block(block))
    return sch.split(loops[-1], factors)


def test_rfactor_inner_part_of_a_split_sum(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(rowsum)
    _, k1 = _split_reduce(sch, "B", [None, 4])
    rf = sch.rfactor(k1, 0)
    assert rf.block_name == "B_rf"
    check_schedule(sch, rowsum, golden, "schedule/rfactor_rowsum_inner", rtol=RTOL)


def test_rfactor_unit_loop_that_drives_no_iterator(golden) -> None:  # type: ignore[no-untyped-def]
    """A split by 1 (or a fuse) leaves a unit loop the bindings no longer name; TVM factors it
    as a reduce loop of extent 1 (its test_reduction_rfactor_square_sum_square_root): the
    intermediate gets a dimension of one."""
    sch = Schedule(rowsum)
    _, k1 = _split_reduce(sch, "B", [None, 1])
    sch.rfactor(k1, 0)
    check_schedule(sch, rowsum, golden, "schedule/rfactor_rowsum_unit_loop", rtol=RTOL)


def test_rfactor_outer_part_then_parallelize_it(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(rowsum)
    i, k = sch.get_loops(sch.get_block("B"))
    k0, k1 = sch.split(k, [4, None])
    sch.reorder(k0, i, k1)
    sch.rfactor(k0, 1)
    # k_0 now drives a spatial iterator of B_rf: it can run in parallel.
    sch.parallel(k0)
    check_schedule(sch, rowsum, golden, "schedule/rfactor_rowsum_parallel", rtol=RTOL)
    assert sch.get_loop_node(k0).kind is ForKind.PARALLEL


def test_rfactor_matmul(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    k0, _ = _split_reduce(sch, "C", [None, 4])
    sch.rfactor(k0, 2)
    check_schedule(sch, matmul, golden, "schedule/rfactor_matmul", rtol=RTOL)
    assert sch.get_block_node(sch.get_block("C_rf")).alloc_buffers == ()
    assert [b.name for b in sch.func.root_block.alloc_buffers] == ["C_rf"]  # type: ignore[union-attr]


def test_rfactor_max_with_a_guarded_split(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(rowmax)
    _, k1 = _split_reduce(sch, "B", [None, 4])
    sch.rfactor(k1, 1)
    check_schedule(sch, rowmax, golden, "schedule/rfactor_rowmax_guarded", rtol=RTOL)


def test_rfactor_reduce_loop_outside_the_spatial_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(colsum)
    k, _ = sch.get_loops(sch.get_block("B"))
    k0, _ = sch.split(k, [None, 4])
    sch.rfactor(k0, 0)
    check_schedule(sch, colsum, golden, "schedule/rfactor_colsum", rtol=RTOL)


@pytest.mark.parametrize("func", [rowmin, rowprod], ids=["min", "product"])
@pytest.mark.parametrize("which", [0, 1])
def test_rfactor_min_and_product(func: PrimFunc, which: int) -> None:
    sch = Schedule(func)
    parts = _split_reduce(sch, "B", [None, 4])
    sch.rfactor(parts[which], 1 - which)
    check_numerics(func, sch.func, rtol=RTOL)
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)


def test_rfactor_unsplit_loop_and_names_stay_unique() -> None:
    sch = Schedule(rowsum)
    _, k = sch.get_loops(sch.get_block("B"))
    first = sch.rfactor(k, 0)
    assert first.block_name == "B_rf"
    # The write-back is a reduction again: factor it once more, over its own loop.
    wb_loops = sch.get_loops(sch.get_block("B"))
    second = sch.rfactor(wb_loops[-1], 0)
    assert second.block_name == "B_rf_1"
    assert [b.name for b in sch.func.root_block.alloc_buffers] == ["B_rf", "B_rf_1"]  # type: ignore[union-attr]
    check_numerics(rowsum, sch.func, rtol=RTOL)


# ---------------------------------------------------------------- negative tests


@T.script
def two_blocks(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in range(8):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = 1.0


@T.script
def no_reduce_axis(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.remap("S", i)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi]


@T.script
def own_buffer(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            S = T.alloc_buffer((1,), "float32")
            with T.init():
                B[vi] = 0.0
            S[0] = A[vi, vk]
            B[vi] = B[vi] + S[0]


@T.script
def two_outputs(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
                D[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
            D[vi] = D[vi] + A[vi, vk]


@T.script
def subtract(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] - A[vi, vk]


@T.script
def two_stores(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
            B[vi] = B[vi] + 1.0


@T.script
def reads_output(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + B[vi] * A[vi, vk]


@T.script
def wrong_identity(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 1.0
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
def fused(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for f in range(64):
        with T.block("B"):
            vi = T.spatial_axis(8, f // 8)
            vk = T.reduce_axis(8, f % 8)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def fused_outer(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for f, k1 in T.grid(32, 2):
        with T.block("B"):
            vi = T.spatial_axis(8, f // 4)
            vk = T.reduce_axis(8, f % 4 * 2 + k1)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def symbolic(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (8, n), "float32")
    B = T.match_buffer(b, (8,), "float32")
    for i, k in T.grid(8, n):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def triangular(A: T.Buffer((8, 4, 4), "float32"), B: T.Buffer((8,), "float32")):
    for i, k0 in T.grid(8, 4):
        for k1 in range(k0 + 1):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk0 = T.reduce_axis(4, k0)
                vk1 = T.reduce_axis(4, k1)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk0, vk1]


@T.script
def guarded(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k0 in T.grid(8, 4):
        if i < 8:
            for k1 in range(2):
                with T.block("B"):
                    vi = T.spatial_axis(8, i)
                    vk = T.reduce_axis(8, k0 * 2 + k1)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]


@T.script
def spatial_bounds_use_reduce(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for k0 in range(4):
        for i in range(k0, k0 + 1):
            for k1 in range(2):
                with T.block("B"):
                    vi = T.spatial_axis(8, i)
                    vk = T.reduce_axis(8, k0 * 2 + k1)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]


@T.script
def sibling_reader(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
    for i, k0 in T.grid(8, 4):
        for k1 in range(2):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(8, k0 * 2 + k1)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = B[vi]


@T.script
def guard_on_other_loop(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k0, x, k1 in T.grid(8, 4, 2, 2):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(8, k0 * 2 + k1)
            T.where(x < 1)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def reversed_reduce(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(8, 7 - k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def unit_outside(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, u, k in T.grid(8, 1, 16):  # noqa: B007 - u drives no iterator: the point of the test
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


def _loop(sch: Schedule, block: str, position: int):  # type: ignore[no-untyped-def]
    return sch.get_loops(sch.get_block(block))[position]


def _overcovering_split(sch: Schedule) -> None:
    k0, _ = sch.split(_loop(sch, "B", 1), [5, 5])
    sch.rfactor(k0, 0)


CASES: list[tuple[str, PrimFunc, Callable[[Schedule], object], str]] = [
    ("two blocks under the loop", two_blocks, lambda s: s.rfactor(_loop(s, "B", 0), 0), r"exactly one block, found"),
    ("no reduce iterator", no_reduce_axis, lambda s: s.rfactor(_loop(s, "B", 0), 0), "has no reduce iterator"),
    ("own buffer", own_buffer, lambda s: s.rfactor(_loop(s, "B", 1), 0), "allocates or matches buffers of its own"),
    (
        "two outputs without lets",
        two_outputs,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        "with 2 outputs the body must bind each new value to a let",
    ),
    ("body not one store", two_stores, lambda s: s.rfactor(_loop(s, "B", 1), 0), "the body must be one store"),
    (
        "operator not recognized",
        subtract,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        r"the body must be of the form `B\[...\] = B\[...\] op e` .*; saw the value B\[vi\] - A\[vi, vk\]",
    ),
    (
        "operand reads the output",
        reads_output,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        r"combine B\[...\] with a value that does not read B",
    ),
    (
        "init is not the identity",
        wrong_identity,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        r"the init value 1.0 is not the identity of \+ \(expected 0\)",
    ),
    (
        "one output element",
        one_element,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        "cannot show that the output B",
    ),
    ("spatial loop", rowsum, lambda s: s.rfactor(_loop(s, "B", 0), 0), "loop i: the loop drives no reduce iterator"),
    (
        "unit loop outside the reduce loops",
        unit_outside,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        "loop u: the loop drives no iterator of block 'B' and is not inside one of its reduce loops",
    ),
    (
        "loop drives both",
        fused,
        lambda s: s.rfactor(_loop(s, "B", 0), 0),
        "drives a spatial iterator of block 'B' as well",
    ),
    ("another loop drives both", fused_outer, lambda s: s.rfactor(_loop(s, "B", 1), 0), "loop f drives both"),
    (
        "factor_axis",
        rowsum,
        lambda s: s.rfactor(_loop(s, "B", 1), 2),
        r"factor_axis must be in \[-2, 1\] for B \(negative: counted from the end\), got 2",
    ),
    ("symbolic extent", symbolic, lambda s: s.rfactor(_loop(s, "B", 1), 0), "needs a constant min and extent"),
    (
        "reduce loop bounds use a loop",
        triangular,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        "the bounds of reduce loop k1 use loop or block iterators",
    ),
    ("not only loops between", guarded, lambda s: s.rfactor(_loop(s, "B", 2), 0), "only loops may lie between loop k0"),
    (
        "copied loop bounds use a left-out loop",
        spatial_bounds_use_reduce,
        lambda s: s.rfactor(_loop(s, "B", 2), 0),
        r"the bounds of loop i use loops \['k0'\] that the write-back block does not get",
    ),
    (
        "something else uses the output",
        sibling_reader,
        lambda s: s.rfactor(_loop(s, "B", 2), 0),
        "something else under loop k0 accesses the output B",
    ),
    (
        "predicate uses a left-out loop",
        guard_on_other_loop,
        lambda s: s.rfactor(_loop(s, "B", 3), 0),
        r"the predicate x < 1 uses loops \['x'\] that the write-back block does not get",
    ),
    (
        "init would not run first",
        reversed_reduce,
        lambda s: s.rfactor(_loop(s, "B", 1), 0),
        "reduce iterator vk is not at its minimum 0",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rfactor_refuses(case: tuple[str, PrimFunc, Callable[[Schedule], object], str]) -> None:
    _, func, action, message = case
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        action(sch)
    assert tir.structural_equal(sch.func, func)  # a refused primitive changes nothing


def test_rfactor_refuses_a_block_without_init() -> None:
    sch = Schedule(rowsum)
    block = sch.get_block("B")
    sch.decompose_reduction(block, sch.get_loops(block)[1])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"rfactor: block 'B': the block has no T.init\(\)"):
        sch.rfactor(sch.get_loops(block)[1], 0)
    assert sch.func is before


def test_rfactor_refuses_a_predicate_that_skips_a_whole_factor() -> None:
    sch = Schedule(rowmax)
    k0, _ = sch.split(_loop(sch, "B", 1), [5, 5])  # 25 > 18: k_0 == 4 runs no iteration
    before = sch.func
    with pytest.raises(ScheduleError, match=r"the predicate k_0 \* 5 \+ k_1 < 18 does not hold at the start"):
        sch.rfactor(k0, 0)
    assert sch.func is before


def test_rfactor_loop_handle_stays_valid() -> None:
    sch = Schedule(rowsum)
    _, k1 = _split_reduce(sch, "B", [None, 4])
    sch.rfactor(k1, 0)
    node = sch.get_loop_node(k1)
    assert isinstance(node, For) and node.extent.value == 4


def test_rfactor_then_decompose_both_and_vectorize(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    _, _, k = sch.get_loops(block)
    _, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, 2)
    sch.decompose_reduction(rf, sch.get_loops(rf)[2])
    sch.decompose_reduction(block, sch.get_loops(block)[2])
    sch.vectorize(k1)  # the factored loop drives a spatial iterator of C_rf
    check_schedule(sch, matmul, golden, "schedule/rfactor_decompose_vectorize", rtol=RTOL)


@pytest.mark.parametrize(("negative", "positive"), [(-1, 1), (-2, 0)])
def test_rfactor_negative_factor_axis_counts_from_the_end(negative: int, positive: int) -> None:
    # TVM's test_reduction_rfactor_factor_axis_range: -1 puts the new dimension last.
    first, second = Schedule(rowsum, debug=True), Schedule(rowsum, debug=True)
    first.rfactor(_loop(first, "B", 1), negative)
    second.rfactor(_loop(second, "B", 1), positive)
    assert tir.structural_equal(first.func, second.func)
    check_numerics(rowsum, first.func)


@T.script
def rowsum_not_quasi_affine(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(128, 16):
        with T.block("B"):
            vi = T.axis.S(128, i)
            vk = T.axis.R(128, T.floordiv(k * k, 2))
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


def test_rfactor_refuses_bindings_that_are_not_quasi_affine_without_debug() -> None:
    # TVM's test_reduction_rfactor_not_reduction_block2. vk = k * k // 2 is 0 at k = 0 and at
    # k = 1, so the original starts the reduction again at k = 1; a factored program would not.
    # Without debug nothing validates the program first: rfactor itself must refuse.
    sch = Schedule(rowsum_not_quasi_affine)
    before = sch.func
    with pytest.raises(
        ScheduleError, match=r"rfactor: block 'B': the bindings are not quasi-affine and independent \(.*k \* k"
    ):
        sch.rfactor(_loop(sch, "B", 1), 0)
    assert sch.func is before
