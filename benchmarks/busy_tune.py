"""A tune beside another job against a quiet tune: does load decide which program is kept?

Each workload of ``tune_cpu.py`` (conv2d 56x56 64->64 3x3 NHWC, dense 128x3072x768 + bias +
relu, GEMM 1024^3) is tuned twice with the same seed and trials, candidates at 2 threads: once on
the quiet machine, once while ``--hogs`` processes spin on the CPU for the whole tune (default:
one fewer than this process's CPUs, so one core stays free, as beside a single-threaded job).
Then, the hogs gone, the two best programs are timed side by side (alternating rounds, best
median of each) and compared: ``busy / quiet`` near 1.0 means the tune beside the job kept as
good a program as the quiet one. Also printed: what each tune believed its best took, and
whether the busy tune called its result trustworthy.

Run: python benchmarks/busy_tune.py [--workloads conv dense] [--trials 64] [--hogs 1]
(on an otherwise idle machine; state ``lscpu``'s model with the figures). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tune_cpu  # noqa: E402  (this directory's benchmark: its workloads)

import metasched  # noqa: E402
from metasched.measure.builder import build_program  # noqa: E402

ROUNDS = 7


def _hogs(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def _tune(func: Any, trials: int, seed: int) -> Any:  # noqa: ANN401
    with tempfile.TemporaryDirectory(prefix="busy-tune-") as work_dir:
        return metasched.tune(
            func, "llvm", trials=trials, work_dir=work_dir, seed=seed, num_threads=2, log=lambda line: None
        )


def _side_by_side(workload: Any, programs: dict[str, Any]) -> dict[str, float]:  # noqa: ANN401
    """Best median seconds of each program at 2 threads, timed in alternating rounds."""
    runs = {}
    for name, func in programs.items():
        built = build_program(func, "llvm")
        arguments = built.arguments([np.copy(a) for a in workload.arrays])
        built.module.set_num_threads(2)
        built.module(*arguments)
        runs[name] = (built.module, arguments)
    best = dict.fromkeys(programs, float("inf"))
    for _ in range(ROUNDS):
        for name, (module, arguments) in runs.items():
            time.sleep(0.05)
            best[name] = min(best[name], module.time(*arguments, repeat=20, warmup=2))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=sorted(tune_cpu.WORKLOADS), default=["conv", "dense"])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--hogs", type=int, default=max(1, len(os.sched_getaffinity(0)) - 1))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for name in args.workloads:
        workload = tune_cpu.Workload(name, tune_cpu.WORKLOADS[name][0], tune_cpu.WORKLOADS[name][1], rng)
        quiet = _tune(workload.func, args.trials, args.seed)
        hogs = _hogs(args.hogs)
        try:
            time.sleep(0.5)
            busy = _tune(workload.func, args.trials, args.seed)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        time.sleep(1.0)
        timed = _side_by_side(workload, {"quiet": quiet.tasks[0].best_func, "busy": busy.tasks[0].best_func})
        row = {
            "workload": name,
            "quiet_ms": timed["quiet"] * 1e3,
            "busy_ms": timed["busy"] * 1e3,
            "busy_over_quiet": timed["busy"] / timed["quiet"],
            "quiet_believed_ms": (quiet.tasks[0].best_seconds or float("nan")) * 1e3,
            "busy_believed_ms": (busy.tasks[0].best_seconds or float("nan")) * 1e3,
            "busy_trustworthy": busy.trustworthy,
        }
        rows.append(row)
        print(
            f"{name:6s} quiet-tuned {row['quiet_ms']:.3f} ms, busy-tuned {row['busy_ms']:.3f} ms "
            f"(busy/quiet {row['busy_over_quiet']:.2f}x); believed {row['quiet_believed_ms']:.3f} / "
            f"{row['busy_believed_ms']:.3f} ms; busy tune trustworthy: {row['busy_trustworthy']}",
            flush=True,
        )
    print(json.dumps({"benchmark": "busy_tune", "trials": args.trials, "hogs": args.hogs, "rows": rows}))


if __name__ == "__main__":
    main()
