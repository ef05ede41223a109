"""Let the tuner find the schedule: ``metasched.tune`` on a matmul, no hand scheduling.

The tuner generates sketches from the program's blocks (multi-level tiling with a cache-write
stage and operand packing, parallel / vectorize / unroll), samples their decisions, ranks them
with an XGBoost cost model, and builds and times the most promising ones in worker processes,
checking each against the unscheduled program. Every measurement goes to a database directory,
from which ``metasched.apply_database`` gives the tuned program back.

    python examples/tune_matmul.py                 # 256^3, 32 trials (about a minute)
    python examples/tune_matmul.py 512 96          # size and trials
"""

from __future__ import annotations

import sys
import tempfile

import numpy as np
from _common import run_example

import metasched
import tir
import tir.script as T


def make_matmul(n: int, name: str = "matmul") -> tir.PrimFunc:
    """The textbook float32 matmul of size n x n x n."""

    @T.script
    def matmul(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    return matmul.replace(name=name)


# The interface every example has: a small kernel the test suite interprets (the tuner is
# exercised by main() and by tests/metasched).
SMALL = 16
KERNEL = make_matmul(SMALL, "tune_matmul")
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a = rng.standard_normal((SMALL, SMALL), dtype=np.float32)
    b = rng.standard_normal((SMALL, SMALL), dtype=np.float32)
    return [a, b, np.zeros((SMALL, SMALL), np.float32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a @ b}


def main(n: int = 64, trials: int = 8) -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    func = make_matmul(n)
    with tempfile.TemporaryDirectory(prefix="tune-matmul-") as work_dir:
        result = metasched.tune(func, "llvm", trials=trials, work_dir=work_dir, seed=0, log=lambda line: None)
        print(result.summary())
        tuned = metasched.apply_database(func, result.database, "llvm")
    assert tuned is not None
    print("\n# the schedule the tuner found, as replayable Python")
    result.tasks[0].best_trace.show()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    module = tir.build(tuned, "llvm")
    module(a, b, c)
    error = float(np.abs(c - a @ b).max())
    naive = tir.build(func, "llvm")
    speedup = naive.time(a, b, c, repeat=5) / module.time(a, b, c, repeat=5)
    print(f"\ntuned matmul {n}^3: max abs error {error:.2g} against numpy, {speedup:.1f}x the unscheduled build")


if __name__ == "__main__":
    args = [int(x) for x in sys.argv[1:3]]
    main(*(args or [256, 32]))
