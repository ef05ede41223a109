"""The tuner's own time: ``metasched.tune`` with measurement stubbed out.

Tunes ``tune_cpu.py``'s GEMM and conv2d for 64 trials (XGBoost cost model, candidates made in
this process) with a measurer that returns a fixed latency per program (a hash of its text)
instead of building and running it, so what is timed is the search, the postprocessors and
validator, the features, the cost model and the bookkeeping. Compare two checkouts by running
each in its own process, alternately, on the same machine:

    PYTHONPATH=OLD python3 OLD/benchmarks/tuner_overhead.py
    PYTHONPATH=NEW python3 NEW/benchmarks/tuner_overhead.py

Prints one JSON line: seconds per workload.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tune_cpu  # noqa: E402

import metasched  # noqa: E402
from metasched.measure import MeasureResult  # noqa: E402


class FixedLatencies:
    """A latency per program from its text: deterministic, no build, no run."""

    def measure(self, inputs, best_seconds=None):  # noqa: ANN001, ANN201
        return [MeasureResult(1e-3 * (1 + hash(item.func.script()) % 1000 / 1000.0)) for item in inputs]

    def close(self) -> None:
        pass


def main() -> None:
    seconds = {}
    for name in ("gemm", "conv"):
        func = tune_cpu.WORKLOADS[name][0]
        start = time.perf_counter()
        metasched.tune(func, "llvm", trials=64, measurer=FixedLatencies(), seed=0, search_workers=1, log=lambda s: None)
        seconds[name] = round(time.perf_counter() - start, 2)
    print(json.dumps({"benchmark": "tuner_overhead", "trials": 64, "seconds": seconds}))


if __name__ == "__main__":
    main()
