"""Shared benchmark helpers: thread pinning for numpy's BLAS, timing, and the closing JSON line.

Fair comparisons need the same thread count on both sides: numpy's OpenBLAS is pinned through
threadpoolctl, our modules through ``Module.set_num_threads``.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """Limit numpy's BLAS to ``count`` threads inside the block."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError as exc:  # pragma: no cover - the bench extra installs it
        raise SystemExit("benchmarks need threadpoolctl: pip install -e '.[bench]'") from exc
    with threadpool_limits(limits=count, user_api="blas"):
        yield


def median_seconds(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def report(figures: dict[str, Any]) -> None:
    """Print the one JSON line every benchmark script ends with."""
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}))
