"""A hand-scheduled float16 Tensor Core matmul (float32 accumulation) for NVIDIA GPUs.

``C[i, j] = sum_k A[i, k] * B[k, j]`` with float16 ``A`` and ``B`` and a float32 ``C``,
scheduled by hand in the classic way:

- each thread block computes a 64 x 64 tile of ``C`` (``blockIdx.y`` / ``blockIdx.x``) with
  2 x 2 warps (``threadIdx.z`` / ``threadIdx.y``), each warp 2 x 2 WMMA 16 x 16 tiles;
- ``A`` and ``B`` tiles of 32 along k are staged in shared memory by all 128 threads, 8
  float16 (16 bytes) per thread and copy, each shared row padded by ``storage_align`` (row
  strides 40 and 72 halves once lowering shrinks the buffers to one k tile), then loaded into
  WMMA fragments and multiplied with ``mma_sync``;
- the k loop is software-pipelined (``software_pipeline_stage = [0, 0, 1]``): the copies of
  the next k tile run while the current one is multiplied, into double-buffered shared memory,
  with ``cp.async`` on sm_80 and newer.

``KERNEL`` is the schedule at 128^3 (the interpreter runs its thread-bound loops in order and
the WMMA ops on plain arrays). ``python examples/matmul_tensorcore.py`` builds the 4096^3
kernel for ``cuda -arch=sm_80``, prints the size of its CUDA source and the number of HMMA
instructions in its SASS, and, where a GPU is present, runs it against numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from _common import run_example

import tir
import tir.intrin.cuda as I
import tir.script as T
from tir.schedule import Schedule

#: The target this example is scheduled for (tests honour it instead of the host CPU).
TARGET = "cuda -arch=sm_80"

BLOCK_TILE = 64  # rows and columns of C per thread block
K_TILE = 32  # k extent of one shared-memory stage
VECTOR = 8  # float16 elements per thread and copy: 16 bytes, one cp.async
PAD = 8  # storage_align offset: rows of 32 + 8 halves = 80 bytes, off the 128-byte bank period


def make_matmul(n: int) -> tir.PrimFunc:
    """The unscheduled ``n`` x ``n`` x ``n`` float16 matmul with float32 accumulation."""

    @T.script
    def matmul(A: T.Buffer((n, n), "float16"), B: T.Buffer((n, n), "float16"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = T.cast(0, "float32")
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "float32") * T.cast(B[vk, vj], "float32")

    return matmul


class Tiling(NamedTuple):
    """One hand schedule's shape: a ``block_m`` x ``block_n`` tile of C per thread block, split
    over ``warps_m`` x ``warps_n`` warps; ``k_tile`` of k per shared-memory stage; WMMA
    m16n16k16 fragments, or with ``mma`` the PTX ``mma.sync`` m16n8k16 with ``ldmatrix``;
    ``stages`` versions of the shared tiles in flight (pipelined when 2 or more); with
    ``fragment_pipeline`` the fragments of the next k16 step loaded while this one multiplies;
    with ``raster`` > 1 the thread blocks run in groups of ``raster`` row tiles down each column
    of tiles (one ``blockIdx.x``), so blocks running together share B's and A's tiles in L2;
    with ``interleave`` the copies into shared rows shorter than 128 bytes walk down the rows
    first (``_cooperative_fetch``)."""

    block_m: int = BLOCK_TILE
    block_n: int = BLOCK_TILE
    warps_m: int = 2
    warps_n: int = 2
    k_tile: int = K_TILE
    mma: bool = False
    stages: int = 2
    fragment_pipeline: bool = False
    raster: int = 1
    interleave: bool = False

    @property
    def name(self) -> str:
        kind = "mma" if self.mma else "wmma"
        staged = f" stages {self.stages}" if self.stages != 2 else ""
        staged += " +frag" if self.fragment_pipeline else ""
        staged += f" raster {self.raster}" if self.raster > 1 else ""
        staged += " interleaved" if self.interleave else ""
        return f"{kind} {self.block_m}x{self.block_n}x{self.k_tile} warps {self.warps_m}x{self.warps_n}{staged}"


#: The example's schedule: 64 x 64 tiles of C, 2 x 2 warps, k tiles of 32, WMMA.
DEFAULT_TILING = Tiling()


def _cooperative_fetch(sch: Schedule, block: object, tiling: Tiling) -> None:
    """Spread a shared-memory copy over all the block's threads, 8 elements (16 bytes) per copy;
    with ``tiling.interleave`` and rows of fewer than 8 such vectors, lanes take one vector of 8
    rows before the next vector (the 8 stores of a phase then fall in 8 bank groups of the
    padded rows, where two rows a phase conflict 2-way)."""
    rows, cols = sch.get_loops(block)[-2:]
    extent = sch.get(cols).extent.value  # type: ignore[union-attr]
    if tiling.interleave and extent // VECTOR < 8:
        row_groups, row = sch.split(rows, [None, 8])
        column, vec = sch.split(cols, [None, VECTOR])
        sch.reorder(row_groups, column, row, vec)
        _, tz, ty, tx = sch.split(sch.fuse(row_groups, column, row), [None, tiling.warps_m, tiling.warps_n, 32])
    else:
        _, tz, ty, tx, vec = sch.split(sch.fuse(rows, cols), [None, tiling.warps_m, tiling.warps_n, 32, VECTOR])
    sch.bind(tz, "threadIdx.z")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)


def schedule_matmul(func: tir.PrimFunc, pipelined: bool = True, tiling: Tiling = DEFAULT_TILING) -> Schedule:
    """Tile, stage in shared memory, tensorize and pipeline the k loop (module docstring);
    ``pipelined=False`` leaves the k loop as it is, ``tiling`` picks the tile shapes."""
    t = tiling
    n_tile = 8 if t.mma else 16  # columns of a B / C fragment
    scopes = (
        ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.matrixC")
        if t.mma
        else ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
    )
    sch = Schedule(func)
    block = sch.get_block("C")
    c_frag = sch.cache_write(block, 0, scopes[2])
    a_shared = sch.cache_read(block, 1, "shared")
    b_shared = sch.cache_read(block, 2, "shared")
    a_frag = sch.cache_read(block, 1, scopes[0])
    b_frag = sch.cache_read(block, 2, scopes[1])

    warp_m, warp_n = t.block_m // t.warps_m, t.block_n // t.warps_n  # C per warp
    i, j, k = sch.get_loops(block)
    bi, wi, ti, ii = sch.split(i, [None, t.warps_m, warp_m // 16, 16])
    bj, wj, tj, jj = sch.split(j, [None, t.warps_n, warp_n // n_tile, n_tile])
    ko, ki, kk = sch.split(k, [None, t.k_tile // 16, 16])
    # The warp loops sit inside ko, so the shared-memory copies at ko use every thread.
    sch.reorder(bi, bj, ko, wi, wj, ki, ti, tj, ii, jj, kk)
    if t.raster > 1:
        # Block order: `raster` row tiles of one column of tiles, then the next column.
        group, row = sch.split(bi, [None, t.raster])
        sch.reorder(group, bj, row)
        block_loop = sch.fuse(group, bj, row)
        sch.bind(block_loop, "blockIdx.x")
    else:
        sch.bind(bi, "blockIdx.y")
        sch.bind(bj, "blockIdx.x")
        block_loop = bj
    sch.bind(wi, "threadIdx.z")
    sch.bind(wj, "threadIdx.y")

    sch.reverse_compute_at(c_frag, block_loop)
    ci, cj = sch.get_loops(c_frag)[-2:]
    cwi, ci0, ci1 = sch.split(ci, [t.warps_m, None, 16])
    cwj, cj0, cj1 = sch.split(cj, [t.warps_n, None, n_tile])
    sch.reorder(cwi, cwj, ci0, cj0, ci1, cj1)
    sch.bind(cwi, "threadIdx.z")
    sch.bind(cwj, "threadIdx.y")
    sch.tensorize(ci1, I.MMA_STORE_F32_GLOBAL if t.mma else I.WMMA_STORE_F32_GLOBAL)

    sch.compute_at(a_frag, ki)
    sch.compute_at(b_frag, ki)
    sch.compute_at(a_shared, ko)
    sch.compute_at(b_shared, ko)
    for cached in (a_shared, b_shared):
        # Pad each shared row by PAD halves, so that fragment loads of 16 rows hit different banks.
        sch.storage_align(cached, 0, axis=0, factor=32, offset=PAD)
        _cooperative_fetch(sch, cached, t)
    ai, _ = sch.get_loops(a_frag)[-2:]
    _, ai1 = sch.split(ai, [None, 16])
    sch.tensorize(ai1, I.MMA_LDMATRIX_A if t.mma else I.WMMA_LOAD_A)
    bk, bjl = sch.get_loops(b_frag)[-2:]
    bj0, _ = sch.split(bjl, [None, n_tile])
    sch.reorder(bj0, bk)
    sch.tensorize(bk, I.MMA_LDMATRIX_B if t.mma else I.WMMA_LOAD_B)

    init = sch.decompose_reduction(block, ko)
    sch.tensorize(ii, I.MMA_SYNC_F16F16F32 if t.mma else I.WMMA_SYNC_F16F16F32)
    sch.tensorize(sch.get_loops(init)[-2], I.MMA_FILL_F32 if t.mma else I.WMMA_FILL_F32)

    if pipelined and t.stages > 1:
        # Copy k tiles up to ko + stages - 1 (stage 0: A, B) while tile ko is multiplied.
        sch.annotate(ko, "software_pipeline_stage", [0, 0, t.stages - 1])
        sch.annotate(ko, "software_pipeline_order", [0, 1, 2])
        if t.fragment_pipeline:
            # Register double-buffering: load the fragments of ki + 1 while ki is multiplied.
            sch.annotate(ki, "software_pipeline_stage", [0, 0, 1])
            sch.annotate(ki, "software_pipeline_order", [0, 1, 2])
    return sch


#: The schedule at 128^3, the size the tests run in the interpreter.
SIZE = 128
KERNEL = schedule_matmul(make_matmul(SIZE)).func.replace(name="matmul_tensorcore")
#: float16 inputs in [-1, 1), float32 sums of 128 exact products: only summation order differs.
ATOL = 1e-3


def make_args(rng: np.random.Generator, n: int = SIZE) -> list[np.ndarray]:
    a = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    return [a, b, np.zeros((n, n), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.float32) @ b.astype(np.float32)}


def build(n: int = 4096, target: str = TARGET, tiling: Tiling = DEFAULT_TILING) -> object:
    """The scheduled ``n``^3 kernel built for ``target``: a ``tir.runtime.cuda.CUDAModule``."""
    return tir.build(schedule_matmul(make_matmul(n), tiling=tiling).func.replace(name="matmul_tensorcore"), target)


def main() -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    from tir.codegen.cuda_compile import CudaCompileError
    from tir.runtime.cuda import CUDADeviceError

    n = 4096
    module = build(n)
    print(f"{n}^3 for {TARGET}: {len(module.get_source())} bytes of CUDA source")  # type: ignore[attr-defined]
    try:
        sass = module.get_source("sass")  # type: ignore[attr-defined]
    except CudaCompileError as error:
        print(f"SASS not shown: {error}")
    else:
        print(f"SASS: {sass.count('HMMA')} HMMA, {sass.count('LDGSTS')} LDGSTS (cp.async) instructions")
    args = make_args(np.random.default_rng(0), n)
    try:
        module(*args)  # type: ignore[operator]
    except CUDADeviceError as error:
        print(f"not run on a GPU: {error}")
        return
    worst = float(np.abs(args[2] - reference(*args)["C"]).max())
    print(f"GPU result vs numpy: max abs error {worst:.3g}")


if __name__ == "__main__":
    main()
