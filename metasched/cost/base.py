"""The cost-model contract (docs/metasched.md) and the target the models learn.

A model scores candidates of a task from their features (``extract_features``: one array of
shape ``(rows, NUM_FEATURES)`` per candidate); higher means faster. ``update`` hands it measured
candidates as they arrive (``None`` seconds: the candidate failed); ``save`` / ``load`` keep it
across runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np


class CostModel:
    """Base of the cost models: scores candidates, learns from measured ones."""

    def update(self, task_key: str, features: Sequence[np.ndarray], seconds: Sequence[float | None]) -> None:
        """Learn from measured candidates of task ``task_key`` (``None``: the candidate failed)."""
        raise NotImplementedError

    def predict(self, task_key: str, features: Sequence[np.ndarray]) -> np.ndarray:
        """One score per candidate, higher = faster (float64 array)."""
        raise NotImplementedError

    def save(self, path: str | os.PathLike) -> None:
        raise NotImplementedError

    def load(self, path: str | os.PathLike) -> None:
        raise NotImplementedError


def normalized_throughput(seconds: Sequence[float | None]) -> np.ndarray:
    """Per task: best seconds / seconds, in (0, 1]; 0 for a failed (or non-positive) run.

    Throughput rather than time: a model fit to it spends its accuracy on the fast candidates
    the search cares about, and failures sit naturally at 0."""
    valid = [s for s in seconds if s is not None and math.isfinite(s) and s > 0]
    result = np.zeros(len(seconds), dtype=np.float64)
    if not valid:
        return result
    best = min(valid)
    for position, value in enumerate(seconds):
        if value is not None and math.isfinite(value) and value > 0:
            result[position] = best / value
    return result
