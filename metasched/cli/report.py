"""The proof at the end of a run, and ``metasched bench``: outputs compared with onnxruntime on
random inputs, and latency (median and spread) of our model and onnxruntime's, each pinned to
the same thread count.

Timings take turns in rounds of back-to-back runs (so a machine that slows down slows all
alike). onnxruntime runs as configured out of the box (its threads spin while they wait for
work); each block of runs starts after a 0.3 s pause, so that no contender's spinning threads
are still running (they slowed a kernel timed right after them by up to 2x, see
benchmarks/tune_cpu.py).
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from metasched.cli.common import say

__all__ = ["Timing", "compare_outputs", "ort_session", "print_table", "time_contenders"]


@dataclass(frozen=True)
class Timing:
    """Seconds of one run: the median and the interquartile range of the samples."""

    median: float
    low: float
    high: float

    @staticmethod
    def of(samples: list[float]) -> Timing:
        ordered = sorted(samples)
        quartiles = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
        return Timing(statistics.median(ordered), quartiles[0], quartiles[2])

    def text(self) -> str:
        return f"{self.median * 1e3:.3f} ms (IQR {self.low * 1e3:.3f}-{self.high * 1e3:.3f})"


def ort_session(proto: Any, threads: int) -> Any:
    """An onnxruntime CPU session pinned to ``threads``; None when onnxruntime is missing."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def compare_outputs(ours: Mapping[str, np.ndarray], theirs: Mapping[str, np.ndarray]) -> list[tuple[str, float, float]]:
    """Per output: (name, max absolute difference, max difference relative to the output's
    largest magnitude)."""
    rows = []
    for name, want in theirs.items():
        got = ours[name]
        if got.shape != want.shape:
            rows.append((name, float("inf"), float("inf")))
            continue
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        worst = float(diff.max()) if diff.size else 0.0
        rows.append((name, worst, worst / scale if scale > 0 else worst))
    return rows


def time_contenders(contenders: Mapping[str, Callable[[], Any]], repeat: int, rounds: int = 3) -> dict[str, Timing]:
    """Median and spread of each callable over ``repeat`` runs: ``rounds`` rounds, each giving
    every contender a block of back-to-back runs after a pause and two warm-up runs. Blocks rather than
    alternating single runs: a thread pool left idle while another contender runs goes to sleep,
    and waking it (several milliseconds on some machines) would be charged to a sub-millisecond
    run."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    per_round = [repeat // rounds + (1 if index < repeat % rounds else 0) for index in range(rounds)]
    for count in per_round:
        for name, run in contenders.items():
            time.sleep(0.3)
            for _ in range(2):
                run()
            for _ in range(max(count, 1)):
                start = time.perf_counter()
                run()
                samples[name].append(time.perf_counter() - start)
    return {name: Timing.of(values) for name, values in samples.items()}


def print_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A table on stdout: rich's on a terminal, aligned plain text elsewhere (logs, pipes)."""
    import sys

    if sys.stdout.isatty() and importlib.util.find_spec("rich") is not None:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for index, column in enumerate(columns):
            table.add_column(column, justify="left" if index == 0 else "right")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max(len(column), *(len(row[i]) for row in rows)) for i, column in enumerate(columns)]
    say(title)
    say("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(columns, widths))))
    for row in rows:
        say("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
