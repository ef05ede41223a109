"""The design space of a 1024^3 float32 matmul, measured: random samples and hand-picked decisions.

Draws samples of every sketch (fresh decisions, postprocessors), builds and times each, then
times the decisions that reproduce examples/matmul_schedule.py's shape (packed B panels, 4 x 16
register tile, parallel row blocks) and a few neighbours; numpy runs with the same threads.

    python benchmarks/space_matmul_cpu.py [--samples 30] [--threads 2] [--n 1024]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _harness import blas_threads, median_seconds, report

import tir
from metasched.space import PostprocError, SpaceGenerator, default_postprocs
from tir.schedule import Schedule, ScheduleError, Trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "metasched"))
from test_space import _hand_decisions, matmul, packed_sketch  # noqa: E402

from tir.target import Target


def measure(func: tir.PrimFunc, sketch: Trace, decisions: dict, args: list[np.ndarray], threads: int, seed: int):
    sch = Schedule(func, seed=seed)
    sketch.apply_to(sch, decisions)
    for postproc in default_postprocs(Target.parse("llvm")):
        postproc.apply(sch)
    start = time.perf_counter()
    module = tir.build(sch.func, "llvm")
    build = time.perf_counter() - start
    module.set_num_threads(threads)
    start = time.perf_counter()
    module(*args)
    first = time.perf_counter() - start
    np.testing.assert_allclose(args[2], args[0] @ args[1], rtol=1e-2, atol=1e-2)
    seconds = first if first > 0.5 else module.time(*args, repeat=3)  # a slow sample is timed once
    return seconds, build, sch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=1024)
    options = parser.parse_args()
    n, threads = options.n, options.threads
    flops = 2.0 * n**3
    func = matmul(n)
    sketches = SpaceGenerator().generate(func, "llvm")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)]
    args.append(np.zeros((n, n), np.float32))
    with blas_threads(threads):
        numpy_seconds = median_seconds(lambda: args[0] @ args[1], repeat=5)
    print(f"numpy ({threads} threads): {flops / numpy_seconds / 1e9:.1f} GFLOP/s; {len(sketches)} sketches")

    random_gflops, builds, refused = [], [], 0
    for seed in range(options.samples):
        sketch = sketches[seed % len(sketches)]
        try:
            seconds, build, _ = measure(func, sketch, {p: None for p in sketch.decisions}, args, threads, seed)
        except (ScheduleError, PostprocError) as error:
            refused += 1
            print(f"  sample {seed}: refused: {str(error).splitlines()[0][:100]}")
            continue
        random_gflops.append(flops / seconds / 1e9)
        builds.append(build)
        print(f"  sample {seed} (sketch {seed % len(sketches)}): {random_gflops[-1]:.1f} GFLOP/s, build {build:.2f} s")

    hand = packed_sketch(sketches)
    best = 0.0
    for row_block, depth, unroll in [(128, 1024, 16), (256, 1024, 16), (128, 512, 16), (128, 1024, 64)]:
        decisions = _hand_decisions(hand, n, row_block, depth, unroll)
        seconds, build, _ = measure(func, hand, decisions, args, threads, 0)
        gflops = flops / seconds / 1e9
        best = max(best, gflops)
        print(f"  hand-picked rows {row_block}, depth {depth}, unroll {unroll}: {gflops:.1f} GFLOP/s")
    with blas_threads(threads):  # the machine may be shared: numpy's best of before and after
        numpy_seconds = min(numpy_seconds, median_seconds(lambda: args[0] @ args[1], repeat=5))
    numpy_gflops = flops / numpy_seconds / 1e9
    print(f"numpy ({threads} threads), best of before and after: {numpy_gflops:.1f} GFLOP/s")
    print(
        f"random samples: best {max(random_gflops, default=0):.1f}, median "
        f"{statistics.median(random_gflops) if random_gflops else 0:.1f} GFLOP/s, {refused} refused; "
        f"hand-picked best {best:.1f} GFLOP/s = {best / numpy_gflops:.2f} of numpy"
    )
    report(
        {
            "n": n,
            "threads": threads,
            "numpy_gflops": numpy_gflops,
            "random_best_gflops": max(random_gflops, default=0.0),
            "random_median_gflops": statistics.median(random_gflops) if random_gflops else 0.0,
            "refused": refused,
            "median_build_seconds": statistics.median(builds) if builds else 0.0,
            "hand_best_gflops": best,
            "hand_vs_numpy": best / numpy_gflops,
        }
    )


if __name__ == "__main__":
    main()
