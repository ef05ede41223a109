"""``RandomModel``: scores at random, the baseline a learned model must beat.

The scores come from a generator seeded once, so a tuning run with the same seed sees the same
sequence of scores (and picks the same candidates).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np

from metasched.cost.base import CostModel


class RandomModel(CostModel):
    """Uniform random scores in [0, 1); learns nothing."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def update(self, task_key: str, features: Sequence[np.ndarray], seconds: Sequence[float | None]) -> None:
        """Nothing to learn."""

    def predict(self, task_key: str, features: Sequence[np.ndarray]) -> np.ndarray:
        return self._rng.random(len(features))

    def save(self, path: str | os.PathLike) -> None:
        """The seed and the generator's state (a loaded model continues the same sequence)."""
        with open(path, "w") as file:
            json.dump({"kind": "random", "seed": self.seed, "state": self._rng.bit_generator.state}, file)

    def load(self, path: str | os.PathLike) -> None:
        with open(path) as file:
            data = json.load(file)
        self.seed = int(data["seed"])
        self._rng = np.random.default_rng(self.seed)
        self._rng.bit_generator.state = data["state"]
