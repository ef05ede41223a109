"""Programs and hand schedules shared by the CUDA code-generation tests."""

from __future__ import annotations

import tir
import tir.intrin.cuda as I
import tir.script as T
from tir.schedule import Schedule


def make_matmul_f16(n: int = 256, acc: str = "float32") -> tir.PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``: float16 inputs, ``acc`` accumulation."""

    @T.script
    def matmul(A: T.Buffer((n, n), "float16"), B: T.Buffer((n, n), "float16"), C: T.Buffer((n, n), acc)):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = T.cast(0, acc)
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], acc) * T.cast(B[vk, vj], acc)

    return matmul


def _cooperative_fetch(sch: Schedule, block: object, warps: tuple[int, int]) -> None:
    """Spread a shared-memory copy block's loops over the block's threads (tz, ty, 32 lanes)."""
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops[-2:])
    _, tz, ty, tx = sch.split(fused, [None, warps[0], warps[1], 32])
    sch.bind(tz, "threadIdx.z")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")


def schedule_tensor_core(
    func: tir.PrimFunc, mma: bool = False, block_tile: int = 64, warp_tiles: int = 2, k_tile: int = 32
) -> Schedule:
    """The classic tensor-core matmul schedule.

    Each thread block computes a ``block_tile`` square of C with 2 x 2 warps (threadIdx.z /
    threadIdx.y); A and B tiles are staged in shared memory (cooperative copies over the
    block's 4 x 32 threads), then in fragments; each warp accumulates ``warp_tiles`` x
    ``warp_tiles`` fragment tiles and stores them to C. ``mma=False``: WMMA m16n16k16;
    ``mma=True``: mma.sync m16n8k16 with ldmatrix (fragments of 16 x 8 for B and C).
    """
    n_tile = 8 if mma else 16
    scope_a, scope_b, scope_c = (
        ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.matrixC")
        if mma
        else ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
    )
    sch = Schedule(func)
    block = sch.get_block("C")
    c_frag = sch.cache_write(block, 0, scope_c)
    a_shared = sch.cache_read(block, 1, "shared")
    b_shared = sch.cache_read(block, 2, "shared")
    a_frag = sch.cache_read(block, 1, scope_a)
    b_frag = sch.cache_read(block, 2, scope_b)

    warp_rows = block_tile // 2  # rows of C per warp (2 warps along each axis)
    i, j, k = sch.get_loops(block)
    bi, wi, ti, ii = sch.split(i, [None, 2, warp_rows // 16, 16])
    wcols = block_tile // 2
    bj, wj, tj, jj = sch.split(j, [None, 2, wcols // n_tile, n_tile])
    ko, ki, kk = sch.split(k, [None, k_tile // 16, 16])
    # The warp loops sit inside the k loop, so that the shared-memory copies at ko can be
    # spread over all the block's threads (sibling loops bound to the same thread axes).
    sch.reorder(bi, bj, ko, wi, wj, ki, ti, tj, ii, jj, kk)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(wi, "threadIdx.z")
    sch.bind(wj, "threadIdx.y")

    # The accumulator tiles go back to C, each warp its own.
    sch.reverse_compute_at(c_frag, bj)
    ci, cj = sch.get_loops(c_frag)[-2:]
    cwi, ci0, ci1 = sch.split(ci, [2, None, 16])
    cwj, cj0, cj1 = sch.split(cj, [2, None, n_tile])
    sch.reorder(cwi, cwj, ci0, cj0, ci1, cj1)
    sch.bind(cwi, "threadIdx.z")
    sch.bind(cwj, "threadIdx.y")
    sch.tensorize(ci1, I.MMA_STORE_F32_GLOBAL if mma else I.WMMA_STORE_F32_GLOBAL)

    # Shared-memory staging at ko, fragments at ki.
    sch.compute_at(a_frag, ki)
    sch.compute_at(b_frag, ki)
    sch.compute_at(a_shared, ko)
    sch.compute_at(b_shared, ko)
    _cooperative_fetch(sch, a_shared, (2, 2))
    _cooperative_fetch(sch, b_shared, (2, 2))
    ai, ak = sch.get_loops(a_frag)[-2:]
    ai0, ai1 = sch.split(ai, [None, 16])
    sch.tensorize(ai1, I.MMA_LDMATRIX_A if mma else I.WMMA_LOAD_A)
    bk, bjl = sch.get_loops(b_frag)[-2:]
    bj0, bj1 = sch.split(bjl, [None, n_tile])
    sch.reorder(bj0, bk, bj1)
    sch.tensorize(bk, I.MMA_LDMATRIX_B if mma else I.WMMA_LOAD_B)

    # The update and its initialization.
    init = sch.decompose_reduction(block, ko)
    sch.tensorize(ii, I.MMA_SYNC_F16F16F32 if mma else I.WMMA_SYNC_F16F16F32)
    init_loops = sch.get_loops(init)
    sch.tensorize(init_loops[-2], I.MMA_FILL_F32 if mma else I.WMMA_FILL_F32)
    return sch


def make_add_one(n: int = 1024) -> tir.PrimFunc:
    @T.script
    def add_one(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
        for i in range(n):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = T.exp(A[vi]) + T.cast(vi // 3 - vi % 5, "float32")

    return add_one


def schedule_elementwise(func: tir.PrimFunc, threads: int = 128) -> Schedule:
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def make_matmul_f32(n: int = 128) -> tir.PrimFunc:
    @T.script
    def matmul(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return matmul


def schedule_shared_tiled(func: tir.PrimFunc, tile: int = 16) -> Schedule:
    """16 x 16 threads per block, one C element each; A and B tiles staged in shared memory."""
    sch = Schedule(func)
    block = sch.get_block("C")
    a_shared = sch.cache_read(block, 1, "shared")
    b_shared = sch.cache_read(block, 2, "shared")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, tile])
    bj, tj = sch.split(j, [None, tile])
    ko, ki = sch.split(k, [None, tile])
    sch.reorder(bi, bj, ko, ti, tj, ki)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    for cached in (a_shared, b_shared):
        sch.compute_at(cached, ko)
        r, c = sch.get_loops(cached)[-2:]
        sch.bind(r, "threadIdx.y")
        sch.bind(c, "threadIdx.x")
    return sch
