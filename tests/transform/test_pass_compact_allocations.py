"""compact_allocations: allocations move next to their uses, only where that is safe, and shrink."""

from __future__ import annotations

import numpy as np
import pytest
from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.ir import Allocate, For
from tir.transform import compact_allocations


def _compact(func: tir.PrimFunc) -> tir.PrimFunc:
    return compact_allocations(lower_before(func, "compact_allocations"))


def _allocation(func: tir.PrimFunc, name: str) -> Allocate:
    return next(n for n in nodes_of(func.body) if isinstance(n, Allocate) and n.buffer.name == name)


def _enclosing_loops(func: tir.PrimFunc, name: str) -> list[str]:
    """Loop variables around the allocation of ``name``, outermost first."""
    found: list[str] = []

    def walk(stmt: tir.Stmt, loops: list[str]) -> None:
        if isinstance(stmt, Allocate) and stmt.buffer.name == name:
            found.extend(loops)
            return
        if isinstance(stmt, For):
            walk(stmt.body, [*loops, stmt.loop_var.name])
            return
        for field in ("body", "then_case", "else_case"):
            value = getattr(stmt, field, None)
            if isinstance(value, tir.Stmt):
                walk(value, loops)
        for item in getattr(stmt, "stmts", ()):
            walk(item, loops)

    walk(func.body, [])
    return found


@pytest.mark.parametrize("name", ["parallel_cache", "tiled_boundary", "carried_buffer", "big_and_small"])
def test_golden(name: str, golden) -> None:
    func, _ = PROGRAMS[name]
    golden.check(f"transform/compact_{name}", _compact(func).script())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    assert_same_results(func, _compact(func), make_args)


def test_moves_into_loop_with_disjoint_iterations_and_shrinks() -> None:
    compacted = _compact(PROGRAMS["parallel_cache"][0])
    assert _enclosing_loops(compacted, "C") == ["i"]
    assert _allocation(compacted, "C").buffer.const_shape() == (1, 16)


def test_value_carried_between_iterations_keeps_allocation_outside() -> None:
    compacted = _compact(PROGRAMS["carried_buffer"][0])
    assert _enclosing_loops(compacted, "acc") == []


def test_boundary_tile_shrinks_to_bounded_extent() -> None:
    """Guarded (the tail not cut off by partition_tails): the guard's bound caps the tile at 4."""
    from tir.transform import convert_blocks_to_loops, lower_init

    compacted = compact_allocations(convert_blocks_to_loops(lower_init(PROGRAMS["tiled_boundary"][0])))
    assert _enclosing_loops(compacted, "local") == ["io"]
    assert _allocation(compacted, "local").buffer.const_shape() == (4,)


def test_a_tile_is_compacted_before_its_tail_is_cut_off() -> None:
    """In the pipeline the tile shrinks first (4 elements), then partition_tails copies its loop:
    the full tiles and the cut-off last one each allocate it."""
    from tir.transform import partition_tails

    compacted = partition_tails(_compact(PROGRAMS["tiled_boundary"][0]))
    shapes = [n.buffer.const_shape() for n in nodes_of(compacted.body) if isinstance(n, Allocate)]
    assert shapes == [(4,), (4,)]


SHARED_ACROSS_ITERATIONS = """
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    T_s = T.alloc_buffer((8,), "float32")
    for i in range(8):
        for j in range(8):
            with T.block("w"):
                vi, vj = T.remap("SS", i, j)
                T_s[vj] = A[vi, vj] + T_s[vj]
"""


def test_region_independent_of_loop_stays_outside() -> None:
    compacted = _compact(tir.parse(SHARED_ACROSS_ITERATIONS))
    assert _enclosing_loops(compacted, "T_s") == []


OFFSET_REGION = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(4):
        with T.block("tile"):
            vi = T.spatial_axis(4, i)
            T.reads(A[vi * 16 : vi * 16 + 16])
            T.writes(B[vi * 16 : vi * 16 + 16])
            S = T.alloc_buffer((64,), "float32")
            for j in range(16):
                with T.block("load"):
                    vj = T.spatial_axis(64, vi * 16 + j)
                    S[vj] = A[vj] * 2.0
            for j in range(16):
                with T.block("store"):
                    vj = T.spatial_axis(64, vi * 16 + j)
                    B[vj] = S[vj]
"""


def test_indices_shift_by_region_start(golden) -> None:
    func = tir.parse(OFFSET_REGION)
    compacted = _compact(func)
    golden.check("transform/compact_offset_region", compacted.script())
    assert _allocation(compacted, "S").buffer.const_shape() == (16,)
    assert "S[j]" in compacted.script()


VECTORIZED_USE = """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    S = T.alloc_buffer((8,), "float32")
    for i in T.vectorized(8):
        with T.block("b"):
            vi = T.spatial_axis(8, i)
            S[vi] = A[vi]
            B[vi] = S[vi]
"""


def test_never_moves_into_vectorized_loop() -> None:
    compacted = _compact(tir.parse(VECTORIZED_USE))
    assert _enclosing_loops(compacted, "S") == []


def test_compacting_twice_changes_nothing() -> None:
    once = _compact(PROGRAMS["parallel_cache"][0])
    tir.assert_structural_equal(compact_allocations(once), once)


WRITTEN_BEFORE_READ = """
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    row = T.alloc_buffer((16,), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.parallel(8):
        for j in range(16):
            with T.block("load"):
                vi, vj = T.remap("SS", i, j)
                row[vj] = A[vi, vj] * 2.0
        with T.block("init"):
            acc[0] = 0.0
        for j in range(16):
            with T.block("sum"):
                vj = T.remap("R", j)
                acc[0] = acc[0] + row[vj]
        for j in range(16):
            with T.block("store"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = row[15 - vj] + acc[0]
"""


def test_moves_into_loop_when_each_iteration_writes_before_reading(golden) -> None:
    func = tir.parse(WRITTEN_BEFORE_READ)
    compacted = _compact(func)
    golden.check("transform/compact_written_before_read", compacted.script())
    assert _enclosing_loops(compacted, "row") == ["i"]
    assert _enclosing_loops(compacted, "acc") == ["i"]

    def make_args(rng: np.random.Generator) -> list[np.ndarray]:
        return [rng.standard_normal((8, 16)).astype(np.float32), np.zeros((8, 16), np.float32)]

    assert_same_results(func, compacted, make_args)


PARTIAL_WRITES = """
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    row = T.alloc_buffer((16,), "float32")
    for i in range(8):
        for j in range(8):
            with T.block("load"):
                vi, vj = T.remap("SS", i, j)
                row[vj] = A[vi, vj]
        for j in range(16):
            with T.block("store"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = row[vj]
"""

CONDITIONAL_WRITES = """
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    row = T.alloc_buffer((16,), "float32")
    for i in range(8):
        for j in range(16):
            with T.block("load"):
                vi, vj = T.remap("SS", i, j)
                if A[vi, vj] > 0.0:
                    row[vj] = A[vi, vj]
        for j in range(16):
            with T.block("store"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = row[vj]
"""


@pytest.mark.parametrize("source", [PARTIAL_WRITES, CONDITIONAL_WRITES], ids=["partial", "conditional"])
def test_reads_not_covered_keep_allocation_outside(source: str) -> None:
    compacted = _compact(tir.parse(source))
    assert _enclosing_loops(compacted, "row") == []


GPU_SHARED = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    A_shared = T.alloc_buffer((64,), "float32", scope="shared")
    A_local = T.alloc_buffer((64,), "float32", scope="local")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("load"):
                v = T.spatial_axis(64, bx * 16 + tx)
                A_shared[v] = A[v]
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("local"):
                v = T.spatial_axis(64, bx * 16 + tx)
                A_local[v] = A_shared[v] * 2.0
                B[v] = A_local[v]
"""


def test_shared_memory_stays_per_block_and_local_per_thread(golden) -> None:
    compacted = _compact(tir.parse(GPU_SHARED))
    golden.check("transform/compact_gpu_scopes", compacted.script())
    assert _enclosing_loops(compacted, "A_shared") == ["bx"]
    assert _enclosing_loops(compacted, "A_local") == ["bx", "tx"]
    assert _allocation(compacted, "A_shared").buffer.const_shape() == (16,)
    assert _allocation(compacted, "A_local").buffer.const_shape() == (1,)


def _fused_diagonals(reach: int) -> str:
    """A fused loop over a 4 x 4 grid of 2 x 2 tiles: each iteration writes its tile's
    diagonal of ``S`` (not a box, so no proof that the reads are written first) and reads the
    diagonal ``reach`` further on (1: into the next tile's, whose iteration wrote it)."""
    return f"""
@T.prim_func
def f(A: T.Buffer((9, 9), "float32"), B: T.Buffer((8, 8), "float32")):
    S = T.alloc_buffer((9, 9), "float32")
    for f in range(16):
        for i in range(2):
            with T.block("write"):
                vi = T.spatial_axis(9, f // 4 * 2 + i)
                vj = T.spatial_axis(9, f % 4 * 2 + i)
                S[vi, vj] = A[vi, vj] * 2.0
        for i in range(2):
            with T.block("read"):
                vi = T.spatial_axis(8, f // 4 * 2 + i)
                vj = T.spatial_axis(8, f % 4 * 2 + i)
                B[vi, vj] = S[vi + {reach}, vj + {reach}]
"""


def test_fused_loop_with_disjoint_tiles_takes_the_allocation() -> None:
    # f // 4 and f % 4 do not step evenly with f: each iteration's tile is compared with the others'.
    func = tir.parse(_fused_diagonals(reach=0))
    compacted = _compact(func)
    assert _enclosing_loops(compacted, "S") == ["f"]
    assert _allocation(compacted, "S").buffer.const_shape() == (2, 2)

    def make_args(rng: np.random.Generator) -> list[np.ndarray]:
        return [rng.standard_normal((9, 9)).astype(np.float32), np.zeros((8, 8), np.float32)]

    assert_same_results(func, compacted, make_args)


def test_fused_loop_reading_its_neighbours_tiles_keeps_allocation_outside() -> None:
    compacted = _compact(tir.parse(_fused_diagonals(reach=1)))
    assert _enclosing_loops(compacted, "S") == []
