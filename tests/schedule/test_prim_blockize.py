"""blockize: golden, numerics, replay, validation, and one negative test per precondition."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_testing import check_replay, check_schedule

import tir
import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def scale(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for i, j in T.grid(64, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def add_one(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
    for i in range(100):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] + 1.0


@T.script
def rowsum(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += A[vi, vk]


@T.script
def quarter(A: T.Buffer((28,), "float32"), B: T.Buffer((28,), "float32")):
    for io, ii in T.grid(7, 16):
        with T.block("B"):
            vi = T.spatial_axis(28, (io * 16 + ii) // 4)
            B[vi] = A[vi] * 3.0


def _debug(func: tir.PrimFunc) -> Schedule:
    return Schedule(func, debug=True)  # every step is validated (tir.analysis.verify)


def test_blockize_tile(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [4, 16])
    j0, j1 = sch.split(j, [4, 16])
    sch.reorder(i0, j0, i1, j1)
    outer = sch.blockize(i1)
    assert outer.block_name == "B_o"
    assert [iv.var.name for iv in sch.get_block_node(outer).iter_vars] == ["vi_o", "vj_o"]
    # The loops under the new block keep their handles.
    assert sch.get_loop_node(i1).extent.value == 16
    assert tir.analysis.verify(sch.func) == []
    check_schedule(sch, scale, golden, "schedule/blockize_tile")


def test_blockize_moves_init_to_outer_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [4, 4])
    j0, j1 = sch.split(j, [4, 4])
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    outer = sch.blockize(i1)
    assert sch.get_block_node(outer).init is not None
    assert sch.get_block_node(sch.get_block("C")).init is None
    check_schedule(sch, matmul, golden, "schedule/blockize_matmul_init")


def test_blockize_keeps_inner_predicate(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(add_one)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.split(i, [None, 16])
    sch.blockize(i1)
    assert "T.where(vi_o * 16 + i_1 < 100)" in sch.func.script()
    check_schedule(sch, add_one, golden, "schedule/blockize_predicate")


def test_blockize_padded_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(rowsum)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 5])
    sch.blockize(k1)
    check_schedule(sch, rowsum, golden, "schedule/blockize_padded_reduction")


def test_blockize_whole_nest(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(rowsum)
    i, _ = sch.get_loops(sch.get_block("B"))
    outer = sch.blockize(i)
    node = sch.get_block_node(outer)
    assert node.iter_vars == ()  # nothing outside: the block runs once, its init every time
    assert node.init is not None
    check_schedule(sch, rowsum, golden, "schedule/blockize_whole_nest")


def test_blockize_division_of_fused_digits(golden) -> None:  # type: ignore[no-untyped-def]
    # (io * 16 + ii) // 4 == io * 4 + ii // 4: outer io, inner ii // 4.
    sch = _debug(quarter)
    _, ii = sch.get_loops(sch.get_block("B"))
    sch.blockize(ii)
    assert "T.spatial_axis(4, ii // 4)" in sch.func.script()
    check_schedule(sch, quarter, golden, "schedule/blockize_fused_digits")


def test_blockize_twice_nests_blocks(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [4, 16])
    j0, j1 = sch.split(j, [4, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)
    outer = sch.blockize(j0)
    assert outer.block_name == "B_o_o"
    check_schedule(sch, scale, golden, "schedule/blockize_twice")


@T.script
def scale_rows(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


def test_blockize_moves_an_outer_predicate_to_the_outer_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(scale_rows)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 16])
    outer = sch.blockize(j)
    realize = sch.index.blocks[outer.block_name]
    assert str(realize.predicate) == "i_0 * 16 + i_1 < 100"
    check_schedule(sch, scale_rows, golden, "schedule/blockize_outer_predicate")


def test_blockize_inside_a_blockized_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = _debug(scale_rows)
    i, j = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.split(i, [None, 16])
    sch.blockize(i1)
    inner = sch.blockize(j)  # its scope is the block B_o
    assert inner.block_name == "B_o_1"
    check_schedule(sch, scale_rows, golden, "schedule/blockize_nested_scope")


SYMBOLIC = """
@T.script
def tiles(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n * 16,), "float32")
    B = T.match_buffer(b, (n * 16,), "float32")
    for io, ii in T.grid(n, 16):
        with T.block("B"):
            vi = T.spatial_axis(n * 16, io * 16 + ii)
            B[vi] = A[vi] + 1.0
"""


def test_blockize_symbolic_extent() -> None:
    func = tir.parse(SYMBOLIC)
    sch = _debug(func)
    _, ii = sch.get_loops(sch.get_block("B"))
    sch.blockize(ii)
    text = sch.func.script()
    assert 'vi_o = T.remap("S", io)' in text
    assert "B[vi_o * 16 + vi_i] = A[vi_o * 16 + vi_i] + 1.0" in text
    a = np.random.default_rng(0).uniform(-1.0, 1.0, 80).astype("float32")
    interpreted, built = np.zeros_like(a), np.zeros_like(a)
    tir.interpret(sch.func, a, interpreted, 5)
    tir.build(sch.func, "llvm")(a, built, 5)
    np.testing.assert_allclose(interpreted, a + 1.0, rtol=1e-6)
    np.testing.assert_allclose(built, a + 1.0, rtol=1e-6)
    check_replay(sch, func)


# ---------------------------------------------------------------- preconditions


@T.script
def two_blocks(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi]


@T.script
def triangle(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i, 8):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vj = T.spatial_axis(8, j)
                B[vi, vj] = A[vi, vj]


@T.script
def opaque(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16, 4), "float32")):
    for i, j in T.grid(16, 4):
        with T.block("B"):
            B[i, j] = A[i, j]


@T.script
def thirds(A: T.Buffer((38,), "float32"), B: T.Buffer((38,), "float32")):
    for io, ii in T.grid(7, 16):
        with T.block("B"):
            vi = T.spatial_axis(38, (io * 16 + ii) // 3)
            B[vi] = A[vi]


@T.script
def interleaved(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for io, ii in T.grid(8, 16):
        with T.block("B"):
            vi = T.spatial_axis(128, io + ii * 8)
            B[vi] = A[vi]


@T.script
def product(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for io, ii in T.grid(8, 16):
        with T.block("B"):
            vi = T.spatial_axis(128, io * ii)
            B[vi] = A[vi]


@T.script
def hidden_outer(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for io, ii in T.grid(7, 16):
        with T.block("B"):
            vi = T.spatial_axis(16, ii)
            T.where(io * 16 + ii < 100)
            B[vi] = A[vi]


@T.script
def reversed_reduction(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 16):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            vk = T.reduce_axis(16, 15 - k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def init_uses_own_buffer(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 16):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            S = T.alloc_buffer((1,), "float32")
            with T.init():
                S[0] = 0.0
                B[vi] = S[0]
            B[vi] = B[vi] + A[vi, vk]


def _refused(func: tir.PrimFunc, pick, message: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(func)
    loop = pick(sch)
    before = sch.func
    with pytest.raises(ScheduleError, match=message) as info:
        sch.blockize(loop)
    assert info.value.primitive == "blockize"
    assert sch.func is before  # a refused primitive changes nothing
    assert tir.structural_equal(sch.func, func)


def _loop(position: int):  # type: ignore[no-untyped-def]
    return lambda sch: sch.get_loops(sch.get_block("B"))[position]


def test_blockize_refuses_a_subtree_with_two_blocks() -> None:
    _refused(two_blocks, _loop(0), r"perfectly nested around exactly one block; found a SeqStmt under loop i")


def test_blockize_refuses_an_inner_range_using_an_outer_loop() -> None:
    _refused(triangle, _loop(1), r"the range of loop j depends on loop i, which stays outside the new block")


def test_blockize_refuses_a_block_using_an_outer_loop_directly() -> None:
    _refused(opaque, _loop(1), r"block 'B' uses a loop variable outside j directly, not through a binding")


@pytest.mark.parametrize(
    "func,message",
    [
        (thirds, r"mixes loops outside and inside the blockized loop in `\(io \* 16 \+ ii\) // 3`"),
        (interleaved, r"its inner part `ii \* 8` takes 121 values, more than the step 1 of its outer part `io`"),
        (product, r"the binding of vi is not an affine map of the loops"),
    ],
)
def test_blockize_refuses_an_indivisible_binding(func: tir.PrimFunc, message: str) -> None:
    _refused(func, _loop(1), message)


def test_blockize_refuses_a_predicate_it_cannot_express() -> None:
    _refused(
        hidden_outer,
        _loop(1),
        r"the predicate `io \* 16 \+ ii < 100` of block 'B' uses loop io outside and loops inside ii, "
        r"and io cannot be written through the outer iterators",
    )


def test_blockize_refuses_an_init_over_a_loop_driving_spatial_and_reduce_iterators() -> None:
    def fused_inner(sch: Schedule):  # type: ignore[no-untyped-def]
        i, k = sch.get_loops(sch.get_block("B"))
        _, inner = sch.split(sch.fuse(i, k), [None, 32])
        return inner

    _refused_after_steps(
        rowsum,
        fused_inner,
        r"loop i_k_fused_1 drives both spatial and reduce iterators of block 'B'.*decompose_reduction first",
    )


def test_blockize_refuses_an_init_when_a_reduction_does_not_start_at_its_minimum() -> None:
    _refused(
        reversed_reduction,
        _loop(1),
        r"reduce iterator vk of block 'B' does not start at its minimum where the inner loops start.*"
        r"decompose_reduction first",
    )


def test_blockize_refuses_an_init_using_the_blocks_own_buffer() -> None:
    _refused(init_uses_own_buffer, _loop(1), r"the init of block 'B' uses a buffer the block declares itself")


def test_blockize_refuses_a_replaced_loop() -> None:
    sch = Schedule(scale)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [4, 16])
    with pytest.raises(ScheduleError, match=r"blockize: loop i: no such loop in the current program"):
        sch.blockize(i)


def _refused_after_steps(func: tir.PrimFunc, steps, message: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(func)
    loop = steps(sch)
    before = sch.func
    with pytest.raises(ScheduleError, match=message):
        sch.blockize(loop)
    assert sch.func is before
