"""read_at / write_at (TVM's): a cache copied at a loop, marked auto_copy; numerics, replay."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay

import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def _tiled() -> tuple[Schedule, list[object]]:
    sch = Schedule(matmul, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, k1, i1, j1)
    return sch, [i0, j0, k0, k1, i1, j1]


def test_read_at_copies_the_tile_of_each_operand_per_k_step() -> None:
    sch, loops = _tiled()
    block = sch.get_block("C")
    a = sch.read_at(loops[2], block, 1, "shared")
    b = sch.read_at(loops[2], block, 2, "shared")
    assert sch.get(a).annotations == {"auto_copy": 1} and sch.get(b).name == "B_shared"
    text = sch.func.script()
    assert "for ax0, ax1 in T.grid(8, 4):" in text and "for ax0, ax1 in T.grid(4, 8):" in text
    check_numerics(matmul, sch.func)
    check_replay(sch, matmul)


def test_write_at_copies_the_output_tile_back_per_tile() -> None:
    sch, loops = _tiled()
    copy = sch.write_at(loops[1], sch.get_block("C"), 0, "local")
    assert sch.get(copy).name == "C_local"
    assert "for ax0, ax1 in T.grid(8, 8):" in sch.func.script()
    check_numerics(matmul, sch.func)
    check_replay(sch, matmul)


def test_read_at_a_loop_not_above_the_block_is_refused() -> None:
    sch = Schedule(matmul)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.cache_read(block, 1, "global")
    (other,) = sch.get_loops(sch.get_block("A_global"))[:1]
    with pytest.raises(ScheduleError, match=r"read_at: .*\(compute_at\)"):
        sch.read_at(other, block, 2, "shared")
