"""Trace replay speed: re-apply a hand-written matmul schedule to a fresh ``Schedule``.

The search replays a trace for every candidate it measures, so replay must stay cheap: the
target is under 20 ms for this ~15-instruction schedule of a 1024x1024x1024 float32 matmul.

Run: python benchmarks/trace_replay.py   (prints the schedule, the timing, and one JSON line)
"""

from __future__ import annotations

import argparse

from _harness import median_seconds, report

import tir
import tir.script as T
from tir.schedule import Schedule, Trace

M = N = K = 1024


@T.script
def matmul1024(
    A: T.Buffer((M, K), "float32"),
    B: T.Buffer((K, N), "float32"),
    C: T.Buffer((M, N), "float32"),
):
    for i, j, k in T.grid(M, N, K):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def hand_schedule(func: tir.PrimFunc) -> Schedule:
    """A CPU matmul schedule: 2-level tiles of i and j, k split, B cached per tile, init split
    off, inner j vectorized, the k tile unrolled, the outer tile loop parallel."""
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 32])
    j0, j1 = sch.split(j, [None, 64])
    j2, j3 = sch.split(j1, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, j2, k1, j3)
    cached = sch.cache_read(block, 2, "local")
    sch.compute_at(cached, k0)
    sch.decompose_reduction(block, k0)
    sch.vectorize(j3)
    sch.unroll(k1)
    sch.parallel(i0)
    return sch


def replay(trace: Trace, func: tir.PrimFunc) -> Schedule:
    fresh = Schedule(func)
    trace.apply_to(fresh)
    return fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=50, help="timed replays (the median is reported)")
    parser.add_argument("--quiet", action="store_true", help="do not print the scheduled program")
    options = parser.parse_args()

    sch = hand_schedule(matmul1024)
    trace = sch.trace
    if not options.quiet:
        print(sch.func.script())
        print(trace.as_python())
    # The replay must rebuild the very program the schedule produced.
    tir.assert_structural_equal(replay(trace, matmul1024).func, sch.func)

    replay_ms = 1e3 * median_seconds(lambda: replay(trace, matmul1024), repeat=options.repeat, warmup=3)
    print(f"instructions: {len(trace)}")
    print(f"trace_replay_ms: {replay_ms:.3f}  (median of {options.repeat}; target < 20)")
    report({"trace_replay_ms": replay_ms})


if __name__ == "__main__":
    main()
