"""Trace replay speed: re-apply a hand-written matmul schedule to a fresh ``Schedule``.

The search replays a trace for every candidate it measures, so replay must stay cheap: the
target is under 20 ms for this ~15-instruction schedule of a 1024x1024x1024 float32 matmul.

Run: python benchmarks/trace_replay.py   (prints the schedule, the timing, and one JSON line)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _harness import median_seconds, report

import tir
import tir.script as T
from tir.schedule import Schedule, Trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

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

    # The tuner replays and verifies every candidate: the schedule of examples/matmul_schedule.py
    # (B packed into panels, register tile, parallel) is the kind of trace it replays.
    from matmul_schedule import make_matmul, schedule_matmul

    from tir.analysis import verify

    base = make_matmul(1024)
    example = schedule_matmul(base)
    example_trace = Trace.from_json(example.trace.to_json())
    tir.assert_structural_equal(replay(example_trace, base).func, example.func)
    example_ms = 1e3 * median_seconds(lambda: replay(example_trace, base), repeat=options.repeat, warmup=3)
    verify_ms = 1e3 * median_seconds(lambda: verify(example.func), repeat=options.repeat, warmup=3)
    print(f"examples/matmul_schedule.py trace: {len(example_trace)} instructions")
    print(f"example_replay_ms: {example_ms:.3f}  (target < 10 on a Zen 1 core)")
    print(f"example_verify_ms: {verify_ms:.3f}  (target < 5 on a Zen 1 core)")
    report({"trace_replay_ms": replay_ms, "example_replay_ms": example_ms, "example_verify_ms": verify_ms})


if __name__ == "__main__":
    main()
