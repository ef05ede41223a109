"""compact_allocations on GPU-style shared tiles: cooperative vectorized copies, storage_align."""

from __future__ import annotations

import numpy as np

import tir
import tir.script as T
from tir.ir import Allocate, For, ForKind, IRVisitor
from tir.schedule import Schedule
from tir.transform import compact_allocations, convert_blocks_to_loops, lower_init


@T.script
def scale(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for i, j in T.grid(64, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * T.float32(2)


def _tiled(align: bool) -> tir.PrimFunc:
    """16 x 16 tiles of B per thread block; A's tile staged in shared memory by 32 threads, 8
    floats each, with a vectorized copy of 4 (optionally storage_align'ed: factor 32, offset 8)."""
    sch = Schedule(scale)
    block = sch.get_block("B")
    shared = sch.cache_read(block, 0, "shared")
    i, j = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 16])
    bj, tj = sch.split(j, [None, 16])
    sch.reorder(bi, bj, ti, tj)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.x")
    sch.compute_at(shared, bj)
    if align:
        sch.storage_align(shared, 0, axis=0, factor=32, offset=8)
    fused = sch.fuse(*sch.get_loops(shared)[-2:])
    _, tx, vec = sch.split(fused, [None, 16, 4])
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return compact_allocations(convert_blocks_to_loops(lower_init(sch.func)))


class _Homes(IRVisitor):
    """Each allocation with the loops around it (innermost last)."""

    def __init__(self) -> None:
        self.loops: list[For] = []
        self.homes: dict[str, tuple[Allocate, list[For]]] = {}

    def visit_For(self, loop: For) -> None:
        self.loops.append(loop)
        self.generic_visit(loop)
        self.loops.pop()

    def visit_Allocate(self, alloc: Allocate) -> None:
        self.homes[alloc.buffer.name] = (alloc, list(self.loops))
        self.generic_visit(alloc)


def _home(func: tir.PrimFunc, name: str) -> tuple[Allocate, list[For]]:
    homes = _Homes()
    homes.visit(func.body)
    return homes.homes[name]


def _check_numerics(func: tir.PrimFunc) -> None:
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    b = np.zeros((64, 64), np.float32)
    tir.interpret(func, a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_shared_tile_of_a_vectorized_cooperative_copy_moves_into_the_thread_block() -> None:
    func = _tiled(align=False)
    alloc, loops = _home(func, "A_shared")
    # Inside both blockIdx loops (each block has its own shared memory), shrunk to one tile.
    assert [loop.thread_tag for loop in loops] == ["blockIdx.y", "blockIdx.x"]
    assert all(loop.kind is ForKind.THREAD_BINDING for loop in loops)
    assert alloc.buffer.const_shape() == (16, 16)
    assert alloc.buffer.strides == ()
    _check_numerics(func)


def test_storage_aligned_shared_tile_shrinks_and_recomputes_its_padded_stride() -> None:
    func = _tiled(align=True)
    alloc, loops = _home(func, "A_shared")
    assert [loop.thread_tag for loop in loops] == ["blockIdx.y", "blockIdx.x"]
    assert alloc.buffer.const_shape() == (16, 16)
    # 16 rounded to the alignment rule (stride % 32 == 8): 40, not the full-width 64 + 8.
    assert [s.value for s in alloc.buffer.strides] == [40, 1]  # type: ignore[attr-defined]
    _check_numerics(func)


def test_storage_align_records_its_rule_on_the_buffer() -> None:
    sch = Schedule(scale)
    shared = sch.cache_read(sch.get_block("B"), 0, "shared")
    sch.storage_align(shared, 0, axis=0, factor=32, offset=8)
    (buffer,) = sch.func.body.block.alloc_buffers  # type: ignore[attr-defined]
    assert [s.value for s in buffer.strides] == [72, 1]
    assert buffer.dim_align == ((0, 32, 8),)
