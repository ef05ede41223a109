"""The reference interpreter on TVM-sized schedule-test programs (``tir.interpret``).

TVM's tests of read_at / write_at run a 2048^3 matrix product bound to GPU threads (blocks,
vthreads, threads, the k loop split by 8), with shared-memory copies inside the thread loops.
This times, at size ``--n`` (default 2048):

- ``threads``: that schedule with no copies;
- ``read_at_ab``: A and B read at the k loop into shared memory (this project's read_at);
- ``write_at_c``: plus C written back through shared memory at the thread loop;
- ``tvm_write_at_c``: TVM's own expected program for its write_at test (copy blocks with loops
  inside, every thread writing the whole 64x64 tile back);

each checked against numpy (float64). Prints one JSON line of seconds and max errors.

    python3 benchmarks/interp_speed.py [--n 2048] [--only threads,tvm_write_at_c]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import tir
import tir.script as T
from tir.schedule import Schedule


def matmul(n: int) -> tir.PrimFunc:
    @T.script
    def func(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    return func


def gpu_schedule(n: int, copies: str) -> tir.PrimFunc:
    sch = Schedule(matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    by, vy, ty, i3 = sch.split(i, [None, 2, 8, 4])
    bx, vx, tx, j3 = sch.split(j, [None, 2, 8, 4])
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(by, bx, vy, vx, ty, tx, k0, k1, i3, j3)
    for loop, tag in [(by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread.y"), (vx, "vthread.x")]:
        sch.bind(loop, tag)
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    if copies in ("ab", "abc"):
        sch.read_at(k0, block, 1, "shared")
        sch.read_at(k0, block, 2, "shared")
    if copies == "abc":
        sch.write_at(tx, block, 0, "shared")
    return sch.func


def tvm_write_at_c(n: int) -> tir.PrimFunc:
    tiles, steps = n // 64, n // 8

    @T.script
    def func(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        A_shared = T.alloc_buffer((n, n), "float32", scope="shared")
        B_shared = T.alloc_buffer((n, n), "float32", scope="shared")
        C_shared = T.alloc_buffer((n, n), "float32", scope="shared")
        for by in T.thread_binding(tiles, thread="blockIdx.y"):
            for bx in T.thread_binding(tiles, thread="blockIdx.x"):
                for vy in T.thread_binding(2, thread="vthread.y"):
                    for vx in T.thread_binding(2, thread="vthread.x"):
                        for ty in T.thread_binding(8, thread="threadIdx.y"):
                            for tx in T.thread_binding(8, thread="threadIdx.x"):
                                for k0 in range(steps):
                                    with T.block("A_shared"):
                                        v0, v1 = T.remap("SS", by, k0)
                                        T.reads(A[v0 * 64 : v0 * 64 + 64, v1 * 8 : v1 * 8 + 8])
                                        T.writes(A_shared[v0 * 64 : v0 * 64 + 64, v1 * 8 : v1 * 8 + 8])
                                        for ax0, ax1 in T.grid(64, 8):
                                            A_shared[v0 * 64 + ax0, v1 * 8 + ax1] = A[v0 * 64 + ax0, v1 * 8 + ax1]
                                    with T.block("B_shared"):
                                        v0, v1 = T.remap("SS", k0, bx)
                                        T.reads(B[v0 * 8 : v0 * 8 + 8, v1 * 64 : v1 * 64 + 64])
                                        T.writes(B_shared[v0 * 8 : v0 * 8 + 8, v1 * 64 : v1 * 64 + 64])
                                        for ax0, ax1 in T.grid(8, 64):
                                            B_shared[v0 * 8 + ax0, v1 * 64 + ax1] = B[v0 * 8 + ax0, v1 * 64 + ax1]
                                    for k1, i, j in T.grid(8, 4, 4):
                                        with T.block("C"):
                                            vi = T.spatial_axis(n, by * 64 + vy * 32 + ty * 4 + i)
                                            vj = T.spatial_axis(n, bx * 64 + vx * 32 + tx * 4 + j)
                                            vk = T.reduce_axis(n, k0 * 8 + k1)
                                            with T.init():
                                                C_shared[vi, vj] = 0.0
                                            C_shared[vi, vj] = C_shared[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
                                with T.block("C_shared"):
                                    v0, v1 = T.remap("SS", by, bx)
                                    T.reads(C_shared[v0 * 64 : v0 * 64 + 64, v1 * 64 : v1 * 64 + 64])
                                    T.writes(C[v0 * 64 : v0 * 64 + 64, v1 * 64 : v1 * 64 + 64])
                                    for ax0, ax1 in T.grid(64, 64):
                                        C[v0 * 64 + ax0, v1 * 64 + ax1] = C_shared[v0 * 64 + ax0, v1 * 64 + ax1]

    return func


PROGRAMS = {
    "threads": lambda n: gpu_schedule(n, ""),
    "read_at_ab": lambda n: gpu_schedule(n, "ab"),
    "write_at_c": lambda n: gpu_schedule(n, "abc"),
    "tvm_write_at_c": tvm_write_at_c,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2048, help="matrix size (a multiple of 64)")
    parser.add_argument("--only", default=",".join(PROGRAMS), help="comma-separated programs to time")
    args = parser.parse_args()
    if args.n % 64:
        parser.error(f"--n must be a multiple of 64, got {args.n}")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, args.n, args.n), dtype=np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    report: dict[str, object] = {"benchmark": "interp_speed", "n": args.n}
    for name in args.only.split(","):
        func = PROGRAMS[name](args.n)
        c = np.zeros((args.n, args.n), np.float32)
        start = time.perf_counter()
        tir.interpret(func, a, b, c)
        report[name] = {"seconds": round(time.perf_counter() - start, 2), "max_abs_err": float(np.abs(c - want).max())}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
