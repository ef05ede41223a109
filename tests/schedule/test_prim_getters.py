"""The getters (get_block, get_loops, get_child_blocks, get_producers, get_consumers), handle
validity across transformations, ``Schedule.copy``, and what ``mod`` / ``show`` print."""

from __future__ import annotations

import pytest

import tir
import tir.script as T
from tir.ir import For, IRModule
from tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError, Trace


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
def conv2d(
    data: T.Buffer((1, 6, 6, 3), "float32"),
    weight: T.Buffer((3, 3, 3, 4), "float32"),
    conv: T.Buffer((1, 6, 6, 4), "float32"),
):
    padded = T.alloc_buffer((1, 8, 8, 3), "float32")
    for n, h, w, c in T.grid(1, 8, 8, 3):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(1 <= vh < 7 and 1 <= vw < 7, data[vn, vh - 1, vw - 1, vc], 0.0)
    for n, h, w, co, rh, rw, ci in T.grid(1, 6, 6, 4, 3, 3, 3):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                conv[vn, vh, vw, vco] = 0.0
            conv[vn, vh, vw, vco] += padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


def names(blocks: list[BlockRV]) -> list[str]:
    return [block.block_name for block in blocks]


def loop_names(sch: Schedule, loops: list[LoopRV]) -> list[str]:
    return [sch.get_loop_node(loop).loop_var.name for loop in loops]


# ---------------------------------------------------------------- get_block


def test_get_block_names_a_block() -> None:
    sch = Schedule(matmul_relu)
    block = sch.get_block("C")
    assert isinstance(block, BlockRV)
    assert block.block_name == "C"
    assert sch.get_block_node(block).name == "C"
    assert sch.trace.as_python() == "b0 = sch.get_block('C')"


def test_get_block_unknown_name() -> None:
    sch = Schedule(matmul_relu)
    with pytest.raises(ScheduleError, match=r"get_block: block 'E': no such block in the current program") as info:
        sch.get_block("E")
    assert info.value.primitive == "get_block"
    assert len(sch.trace) == 0  # a refused getter records nothing


# ---------------------------------------------------------------- get_loops


def test_get_loops_outermost_first() -> None:
    sch = Schedule(matmul_relu)
    loops = sch.get_loops(sch.get_block("C"))
    assert loop_names(sch, loops) == ["i", "j", "k"]
    assert all(isinstance(sch.get_loop_node(loop), For) for loop in loops)
    assert loop_names(sch, sch.get_loops(sch.get_block("D"))) == ["i", "j"]
    # the two nests have loops of the same names but different variables
    assert sch.get_loops(sch.get_block("C"))[0].loop_var is not sch.get_loops(sch.get_block("D"))[0].loop_var


def test_get_loops_of_conv_and_of_the_root() -> None:
    sch = Schedule(conv2d)
    assert loop_names(sch, sch.get_loops(sch.get_block("pad"))) == ["n", "h", "w", "c"]
    assert loop_names(sch, sch.get_loops(sch.get_block("conv"))) == ["n", "h", "w", "co", "rh", "rw", "ci"]
    assert sch.get_loops(sch.get_block("root")) == []


def test_get_loops_after_compute_at_shares_the_consumer_loops() -> None:
    sch = Schedule(conv2d)
    pad, conv = sch.get_block("pad"), sch.get_block("conv")
    n, h, w = sch.get_loops(conv)[:3]
    sch.compute_at(pad, w)
    pad_loops = sch.get_loops(pad)
    assert [loop.loop_var for loop in pad_loops[:3]] == [n.loop_var, h.loop_var, w.loop_var]
    assert loop_names(sch, pad_loops) == ["n", "h", "w", "ax0", "ax1", "ax2"]
    assert names(sch.get_child_blocks(w)) == ["pad", "conv"]


# ---------------------------------------------------------------- get_child_blocks


def test_get_child_blocks_of_a_block_and_of_a_loop() -> None:
    sch = Schedule(matmul_relu)
    assert names(sch.get_child_blocks(sch.get_block("root"))) == ["C", "D"]
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert names(sch.get_child_blocks(i)) == ["C"]
    assert names(sch.get_child_blocks(k)) == ["C"]
    assert names(sch.get_child_blocks(sch.get_block("C"))) == []


def test_get_child_blocks_after_reverse_compute_at() -> None:
    sch = Schedule(matmul_relu)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.reverse_compute_at(sch.get_block("D"), i)
    assert names(sch.get_child_blocks(i)) == ["C", "D"]
    assert names(sch.get_child_blocks(sch.get_block("root"))) == ["C", "D"]


def test_get_child_blocks_of_conv() -> None:
    sch = Schedule(conv2d)
    assert names(sch.get_child_blocks(sch.get_block("root"))) == ["pad", "conv"]
    rh = sch.get_loops(sch.get_block("conv"))[4]
    assert names(sch.get_child_blocks(rh)) == ["conv"]


# ---------------------------------------------------------------- producers / consumers


def test_producers_and_consumers_of_matmul_relu() -> None:
    sch = Schedule(matmul_relu)
    c, d = sch.get_block("C"), sch.get_block("D")
    assert names(sch.get_producers(d)) == ["C"]
    assert names(sch.get_consumers(c)) == ["D"]
    assert names(sch.get_producers(c)) == []  # C reads only parameters
    assert names(sch.get_consumers(d)) == []
    assert names(sch.get_producers(sch.get_block("root"))) == []


def test_producers_and_consumers_of_conv() -> None:
    sch = Schedule(conv2d)
    pad, conv = sch.get_block("pad"), sch.get_block("conv")
    assert names(sch.get_producers(conv)) == ["pad"]
    assert names(sch.get_consumers(pad)) == ["conv"]
    assert names(sch.get_producers(pad)) == []
    assert names(sch.get_consumers(conv)) == []


def test_producers_and_consumers_follow_a_cache_read() -> None:
    sch = Schedule(conv2d)
    conv = sch.get_block("conv")
    cached = sch.cache_read(conv, 1, "local")  # conv reads (conv, padded, weight): cache padded
    assert names(sch.get_producers(conv)) == [cached.block_name]
    assert names(sch.get_producers(cached)) == ["pad"]
    assert names(sch.get_consumers(sch.get_block("pad"))) == [cached.block_name]


def test_getters_are_recorded_and_replay() -> None:
    sch = Schedule(conv2d)
    conv = sch.get_block("conv")
    (pad,) = sch.get_producers(conv)
    sch.compute_inline(pad)
    assert [inst.kind for inst in sch.trace] == ["get_block", "get_producers", "compute_inline"]
    fresh = Schedule(conv2d)
    Trace.from_json(sch.trace.to_json()).apply_to(fresh)
    tir.assert_structural_equal(fresh.func, sch.func)


# ---------------------------------------------------------------- handle validity


def test_loop_handle_survives_a_split_of_another_loop() -> None:
    sch = Schedule(matmul_relu)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, 4])
    assert sch.get_loop_node(j).loop_var is j.loop_var
    assert sch.get_loop_node(k).extent.value == 16
    j0, j1 = sch.split(j, [2, 8])  # j still names the loop
    assert loop_names(sch, sch.get_loops(sch.get_block("C"))) == ["i_0", "i_1", "j_0", "j_1", "k"]


def test_block_handle_survives_compute_at() -> None:
    sch = Schedule(matmul_relu)
    c, d = sch.get_block("C"), sch.get_block("D")
    i, _ = sch.get_loops(d)
    sch.compute_at(c, i)
    assert sch.get_block_node(c).name == "C"
    assert sch.get_loops(c)[0].loop_var is i.loop_var
    sch.decompose_reduction(c, sch.get_loops(c)[1])  # the handle still drives primitives


def test_loop_handle_gone_after_split() -> None:
    sch = Schedule(matmul_relu)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 4])
    func, length = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=r"get_loop_node: loop i: no such loop in the current program"):
        sch.get_loop_node(i)
    with pytest.raises(ScheduleError, match=r"parallel: loop i: no such loop in the current program"):
        sch.parallel(i)
    with pytest.raises(ScheduleError, match=r"get_child_blocks: loop i: no such loop"):
        sch.get_child_blocks(i)
    assert sch.func is func and len(sch.trace) == length


def test_loop_handles_gone_after_fuse() -> None:
    sch = Schedule(matmul_relu)
    i, j = sch.get_loops(sch.get_block("D"))
    fused = sch.fuse(i, j)
    assert sch.get_loop_node(fused).extent.value == 256
    for gone in (i, j):
        with pytest.raises(ScheduleError, match=rf"split: loop {gone.loop_var.name}: no such loop in the current"):
            sch.split(gone, [2, None])


def test_block_handle_gone_after_compute_inline() -> None:
    sch = Schedule(conv2d)
    pad = sch.get_block("pad")
    pad_loops = sch.get_loops(pad)
    sch.compute_inline(pad)
    with pytest.raises(ScheduleError, match=r"get_loops: block 'pad': no such block in the current program"):
        sch.get_loops(pad)
    with pytest.raises(ScheduleError, match=r"compute_inline: block 'pad': no such block"):
        sch.compute_inline(pad)
    with pytest.raises(ScheduleError, match=r"get_loop_node: loop n: no such loop"):
        sch.get_loop_node(pad_loops[0])  # its loops went with it


def test_a_handle_of_the_wrong_kind_is_refused() -> None:
    sch = Schedule(matmul_relu)
    block = sch.get_block("C")
    with pytest.raises(ScheduleError, match=r"expected a loop handle \(LoopRV\)"):
        sch.get_loop_node(block)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match=r"expected a block handle \(BlockRV\)"):
        sch.get_loops(sch.get_loops(block)[0])  # type: ignore[arg-type]


# ---------------------------------------------------------------- copy


def test_copy_is_independent() -> None:
    sch = Schedule(matmul_relu, seed=7)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    before_func, before_trace = sch.func, sch.trace.as_python()
    other = sch.copy()
    other.split(i, [4, 4])  # handles of the original work on the copy
    other.parallel(other.get_loops(other.get_block("D"))[0])
    assert sch.func is before_func
    assert sch.trace.as_python() == before_trace
    assert len(other.trace) == len(sch.trace) + 4
    # the original goes its own way
    sch.vectorize(sch.get_loops(sch.get_block("D"))[1])
    assert "T.vectorized" not in other.func.script()
    assert "T.parallel" not in sch.func.script()


def test_copy_continues_the_same_random_stream() -> None:
    sch = Schedule(matmul_relu, seed=3)
    k = sch.get_loops(sch.get_block("C"))[2]
    sch.sample_perfect_tile(k, n=3, max_innermost_factor=16)  # advance the stream
    other = sch.copy()
    mine = [int(v) for v in sch.sample_perfect_tile(k, n=3, max_innermost_factor=16)]
    theirs = [int(v) for v in other.sample_perfect_tile(k, n=3, max_innermost_factor=16)]
    assert mine == theirs
    assert [int(v) for v in sch.sample_perfect_tile(k, n=3)] == [int(v) for v in other.sample_perfect_tile(k, n=3)]


# ---------------------------------------------------------------- printing


def test_mod_is_a_module_of_the_current_program() -> None:
    sch = Schedule(matmul_relu)
    mod = sch.mod
    assert isinstance(mod, IRModule)
    assert list(mod.functions) == ["matmul_relu"]
    assert mod.functions["matmul_relu"] is sch.func
    sch.split(sch.get_loops(sch.get_block("D"))[0], [2, 8])
    assert sch.mod.functions["matmul_relu"] is sch.func
    assert Schedule(sch.mod).func is sch.func  # a schedule of a one-function module


def test_show_prints_the_program_and_trace_show_the_python(capsys: pytest.CaptureFixture[str]) -> None:
    sch = Schedule(matmul_relu)
    d = sch.get_block("D")
    i, j = sch.get_loops(d)
    sch.fuse(i, j)
    sch.show()
    shown = capsys.readouterr().out
    assert shown.strip() == sch.func.script().strip()
    assert "for i_j_fused in range(256):" in shown
    sch.trace.show()
    assert capsys.readouterr().out.strip().splitlines() == [
        "b0 = sch.get_block('D')",
        "l1, l2 = sch.get_loops(b0)",
        "l3 = sch.fuse(l1, l2)",
    ]
    assert str(sch.trace) == sch.trace.as_python()
