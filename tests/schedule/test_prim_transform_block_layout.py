"""transform_block_layout: golden, numerics, replay, one negative test per precondition; and
conv2d NHWC turned into a 2-D matmul by reindex + transform_block_layout + transform_layout."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import BufferLoad, BufferStore, IterKind, PrimFunc
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul(A: T.Buffer((4, 16), "float32"), B: T.Buffer((16, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for i, j, k in T.grid(4, 8, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


N, H, W, CI, CO, KH, KW = 2, 4, 4, 3, 8, 3, 3


@T.script
def conv2d_nhwc(
    data: T.Buffer((N, H + 2, W + 2, CI), "float32"),
    weight: T.Buffer((KH, KW, CI, CO), "float32"),
    conv: T.Buffer((N, H, W, CO), "float32"),
):
    for n, h, w, co, rh, rw, ci in T.grid(N, H, W, CO, KH, KW, CI):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                conv[vn, vh, vw, vco] = 0.0
            conv[vn, vh, vw, vco] += data[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


def test_transform_block_layout_fuses_spatial_iterators(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    sch.transform_block_layout(block, lambda i, j, k: (i * 8 + j, k))
    node = sch.get_block_node(block)
    assert [(iv.var.name, iv.kind) for iv in node.iter_vars] == [("vi_vj", IterKind.SPATIAL), ("vk", IterKind.REDUCE)]
    assert [sch.get_loop_node(loop).extent.value for loop in sch.get_loops(block)] == [32, 16]
    check_schedule(sch, matmul, golden, "schedule/transform_block_layout_fuse")


def test_transform_block_layout_permutes_and_reverses() -> None:
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    sch.transform_block_layout(block, lambda i, j, k: (k, 7 - j, i))
    node = sch.get_block_node(block)
    assert [iv.kind for iv in node.iter_vars] == [IterKind.REDUCE, IterKind.SPATIAL, IterKind.SPATIAL]
    check_numerics(matmul, sch.func)
    check_replay(sch, matmul)


def _loads_and_stores(func: PrimFunc, block_name: str) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    sch = Schedule(func)
    block = sch.get_block_node(sch.get_block(block_name))

    def visit(node: object) -> None:
        if isinstance(node, (BufferLoad, BufferStore)):
            found.append((node.buffer.name, [str(i) for i in node.indices]))

    tir.ir.post_order_visit(block.body, visit)
    return found


def test_conv2d_becomes_a_matmul(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(conv2d_nhwc, debug=True)
    block = sch.get_block("conv")
    sch.reindex(block, ("read", 1))  # data
    sch.reindex(block, ("read", 2))  # weight
    sch.reindex(block, ("write", 0))  # conv
    sch.transform_block_layout(
        block, lambda n, h, w, co, rh, rw, ci: (n * H * W + h * W + w, co, rh * KW * CI + rw * CI + ci)
    )
    sch.transform_layout(
        block, ("read", 1), lambda n, h, w, rh, rw, ci: (n * H * W + h * W + w, rh * KW * CI + rw * CI + ci)
    )
    sch.transform_layout(block, ("read", 2), lambda co, rh, rw, ci: (rh * KW * CI + rw * CI + ci, co))
    sch.transform_layout(block, ("write", 0), lambda n, h, w, co: (n * H * W + h * W + w, co))
    node = sch.get_block_node(block)
    i, j, k = (iv.var for iv in node.iter_vars)
    assert [iv.kind for iv in node.iter_vars] == [IterKind.SPATIAL, IterKind.SPATIAL, IterKind.REDUCE]
    assert [iv.dom.extent.value for iv in node.iter_vars] == [N * H * W, CO, KH * KW * CI]
    # The block is now C[i, j] = C[i, j] + A[i, k] * B[k, j] (loads first, then the store).
    assert _loads_and_stores(sch.func, "conv") == [
        ("conv_reindex", [i.name, j.name]),
        ("data_reindex", [i.name, k.name]),
        ("weight_reindex", [k.name, j.name]),
        ("conv_reindex", [i.name, j.name]),
    ]
    assert isinstance(node.init, BufferStore) and [str(e) for e in node.init.indices] == [i.name, j.name]
    check_schedule(sch, conv2d_nhwc, golden, "schedule/transform_block_layout_conv2d")


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
def two_blocks(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi]


@T.script
def one_loop_two_iterators(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            vj = T.spatial_axis(4, i)
            B[vi, vj] = A[vi, vj]


@T.script
def shifted_loop(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(2, 6):
        with T.block("B"):
            vi = T.spatial_axis((2, 6), i)
            B[vi] = A[vi]


@T.script
def extra_loop(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i, _j in T.grid(4, 2):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]


def _scheduled(func: PrimFunc, steps: str) -> PrimFunc:
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    if steps == "split_predicate":
        sch.split(i, [None, 3])
    elif steps == "split_exact":
        sch.split(i, [2, 2])
    elif steps == "parallel":
        sch.parallel(i)
    return sch.func


@pytest.mark.parametrize(
    "func,block,index_map,message",
    [
        (matmul, "root", lambda: (), "the root block cannot be transformed"),
        (no_iterators, "B", lambda: (0,), r"the block has no iterators \(an opaque block\)"),
        (_scheduled(matmul, "split_predicate"), "C", lambda i, j, k: (i, j, k), r"the block has a predicate \(T.where"),
        (opaque_iterator, "B", lambda i: (i,), r"the block has opaque iterators \['vi'\]"),
        (two_blocks, "B", lambda i: (i,), "under a sequence with other statements"),
        (_scheduled(matmul, "split_exact"), "C", lambda i, j, k: (i, j, k), "vi is bound to i_0 \\* 2 \\+ i_1"),
        (one_loop_two_iterators, "B", lambda i, j: (i, j), "loop i is bound to two iterators"),
        (shifted_loop, "B", lambda i: (i,), r"loop i must run over the domain of vi from 0 \(the loop is \[2, 6\)"),
        (extra_loop, "B", lambda i: (i,), "loop _j binds no iterator of the block"),
        (_scheduled(matmul, "parallel"), "C", lambda i, j, k: (i, j, k), "loop i is parallel; the loops are replaced"),
        (matmul, "C", lambda i, j: (i, j), "bad index map: the index map takes 2 indices"),
        (matmul, "C", lambda i, j, k: (i, j, k // 2), "one-to-one onto a box starting at 0"),
        (matmul, "C", lambda i, j, k: ((i * 3) % 4, j, k), "is one-to-one here, but not quasi-affine"),
        (
            matmul,
            "C",
            lambda i, j, k: (i, j * 16 + k),
            r"result 1 of the index map, j \* 16 \+ k, mixes spatial and reduce",
        ),
    ],
)
def test_transform_block_layout_refuses(func: PrimFunc, block: str, index_map: object, message: str) -> None:
    sch = Schedule(func)
    rv = sch.get_block(block)
    with pytest.raises(ScheduleError, match=message):
        sch.transform_block_layout(rv, index_map)  # type: ignore[arg-type]
    assert tir.structural_equal(sch.func, func)
