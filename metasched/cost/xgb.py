"""``XGBModel``: gradient-boosted trees (xgboost) that learn normalized throughput.

Training data are the measured candidates of every task seen so far: a candidate's features
(one row per buffer store, ``extract_features``) and its normalized throughput (per task: best
seconds / seconds, 0 for a failure). Each ``update`` adds the new records and retrains from
scratch: a few dozen boosting rounds on a few thousand candidates take well under a second with
the thread count pinned, and a fresh fit has no drift from stale early trees.

Two ways to turn per-store rows into one score per program (``mode``):

- ``"packsum"`` (the default): each store row gets a prediction and a program's score is the
  sum over its rows (the stores' costs add up), trained with a custom squared-error objective on
  the sums, so the rows need no labels of their own.
- ``"aggregate"``: one row per program, the sum, max and mean of its store rows side by side;
  plain squared-error regression.

Measured on held-out candidates of two float32 matmul spaces (256^3 and 128x512x128; tiles,
vectorize, unroll and parallel varied; 200 built and timed candidates each; 60 for training,
the rest held out, 6 splits) the two rank alike: Spearman 0.58 for both, the best of the top 8
predicted within 1% (packsum) and 2% (aggregate) of the held-out best. Trained on one shape
and tested on the other, packsum ranked a little better (Spearman 0.66 against 0.65 on average),
and its per-store rows keep their meaning for programs of many different stages, where a sum of
a packing stage's and a matmul's features means little: so packsum is the default.
(A model on the raw schedule parameters reaches 0.50-0.54 on the same splits; repeated timings
agree at 0.97.)

Samples are weighted by their throughput (plus a floor), so the fit is most accurate among
the fast candidates, the ones the search must order correctly. Before the first training the
model returns deterministic random scores from its seed (the search then explores at random).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from metasched.cost.base import CostModel, normalized_throughput
from metasched.cost.features import NUM_FEATURES

MODES = ("aggregate", "packsum")


def _as_rows(features: np.ndarray) -> np.ndarray:
    rows = np.asarray(features, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows.reshape(1, -1)
    if rows.shape[0] == 0:
        rows = np.zeros((1, rows.shape[1] if rows.ndim == 2 and rows.shape[1] else NUM_FEATURES), np.float32)
    return rows


def aggregate_rows(features: Sequence[np.ndarray]) -> np.ndarray:
    """One row per program: the sum, max and mean of its store rows, side by side."""
    table = np.empty((len(features), 3 * NUM_FEATURES), dtype=np.float32)
    for position, rows in enumerate(features):
        rows = _as_rows(rows)
        table[position, :NUM_FEATURES] = rows.sum(axis=0)
        table[position, NUM_FEATURES : 2 * NUM_FEATURES] = rows.max(axis=0)
        table[position, 2 * NUM_FEATURES :] = rows.mean(axis=0)
    return table


class XGBModel(CostModel):
    """XGBoost cost model; see the module docstring.

    ``num_rounds`` boosting rounds of trees of ``max_depth`` at learning rate ``eta``, on
    ``num_threads`` threads (pinned: the tuner measures on the other cores). ``seed`` makes
    training and the untrained model's random scores reproducible.
    """

    def __init__(
        self,
        seed: int = 0,
        mode: str = "packsum",
        num_rounds: int = 60,
        max_depth: int = 4,
        eta: float = 0.1,
        num_threads: int = 1,
        weight_floor: float = 1.0,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"XGBModel mode must be one of {MODES}, got {mode!r}")
        self.seed = seed
        self.mode = mode
        self.num_rounds = num_rounds
        self.max_depth = max_depth
        self.eta = eta
        self.num_threads = num_threads
        self.weight_floor = weight_floor
        self._rng = np.random.default_rng(seed)
        # task key -> (list of feature arrays, list of seconds): everything measured so far.
        self._data: dict[str, tuple[list[np.ndarray], list[float | None]]] = {}
        self._booster: Any = None

    # ---------------------------------------------------------------- contract

    @property
    def trained(self) -> bool:
        return self._booster is not None

    @property
    def num_samples(self) -> int:
        return sum(len(seconds) for _, seconds in self._data.values())

    def update(self, task_key: str, features: Sequence[np.ndarray], seconds: Sequence[float | None]) -> None:
        """Add measured candidates of ``task_key`` and retrain on everything seen so far."""
        if len(features) != len(seconds):
            raise ValueError(f"XGBModel.update: {len(features)} feature arrays for {len(seconds)} results")
        if not features:
            return
        stored_features, stored_seconds = self._data.setdefault(task_key, ([], []))
        stored_features.extend(_as_rows(f) for f in features)
        stored_seconds.extend(None if s is None else float(s) for s in seconds)
        self._train()

    def predict(self, task_key: str, features: Sequence[np.ndarray]) -> np.ndarray:
        """Scores, higher = faster: predicted normalized throughput (random before training)."""
        if not features:
            return np.zeros(0, dtype=np.float64)
        if self._booster is None:
            return self._rng.random(len(features))
        import xgboost as xgb

        if self.mode == "aggregate":
            matrix = xgb.DMatrix(aggregate_rows(features), nthread=self.num_threads)
            return self._booster.predict(matrix).astype(np.float64)
        rows = [_as_rows(f) for f in features]
        matrix = xgb.DMatrix(np.concatenate(rows), nthread=self.num_threads)
        per_row = self._booster.predict(matrix).astype(np.float64)
        bounds = np.cumsum([0] + [len(r) for r in rows])
        return np.add.reduceat(per_row, bounds[:-1])

    def save(self, path: str | os.PathLike) -> None:
        """The booster, the settings and the training data, in one ``.npz`` file."""
        keys = sorted(self._data)
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {
            "kind": "xgb",
            "settings": self._settings(),
            "tasks": [],
            "rng": self._rng.bit_generator.state,
        }
        for index, key in enumerate(keys):
            features, seconds = self._data[key]
            meta["tasks"].append({"key": key, "seconds": seconds, "rows": [len(f) for f in features]})
            arrays[f"task{index}"] = np.concatenate(features) if features else np.zeros((0, NUM_FEATURES), np.float32)
        if self._booster is not None:
            arrays["booster"] = np.frombuffer(bytes(self._booster.save_raw("json")), dtype=np.uint8)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        with open(path, "wb") as file:
            # numpy's stub matches the **arrays against allow_pickle: bool (no key here is that)
            np.savez_compressed(file, **arrays)  # type: ignore[arg-type]

    def load(self, path: str | os.PathLike) -> None:
        with np.load(path) as archive:
            meta = json.loads(archive["meta"].tobytes().decode())
            if meta.get("kind") != "xgb":
                raise ValueError(f"{os.fspath(path)} does not hold an XGBModel (kind {meta.get('kind')!r})")
            tables = [archive[f"task{index}"] for index in range(len(meta["tasks"]))]
            for table in tables:
                if table.ndim != 2 or table.shape[1] != NUM_FEATURES:
                    # Saved by a version with other features: its rows and trees mean nothing here.
                    raise ValueError(
                        f"{os.fspath(path)} holds {table.shape[-1]} features per row; this version extracts "
                        f"{NUM_FEATURES}: train a new model (metasched.tune retrains from the database)"
                    )
            for name, value in meta["settings"].items():
                setattr(self, name, value)
            self._data = {}
            for task, table in zip(meta["tasks"], tables):
                bounds = np.cumsum([0] + task["rows"])
                features = [table[bounds[i] : bounds[i + 1]] for i in range(len(task["rows"]))]
                self._data[task["key"]] = (features, list(task["seconds"]))
            self._booster = None
            if "booster" in archive:
                import xgboost as xgb

                self._booster = xgb.Booster(params={"nthread": self.num_threads})
                self._booster.load_model(bytearray(archive["booster"].tobytes()))
        self._rng = np.random.default_rng(self.seed)
        self._rng.bit_generator.state = meta["rng"]

    # ---------------------------------------------------------------- training

    def _settings(self) -> dict[str, Any]:
        names = ("seed", "mode", "num_rounds", "max_depth", "eta", "num_threads", "weight_floor")
        return {name: getattr(self, name) for name in names}

    def _params(self) -> dict[str, Any]:
        return {
            "max_depth": self.max_depth,
            "eta": self.eta,
            "min_child_weight": 0.0,
            "subsample": 1.0,
            "lambda": 1.0,
            "nthread": self.num_threads,
            "seed": self.seed,
            "verbosity": 0,
            "tree_method": "hist",
        }

    def _training_set(self) -> tuple[list[np.ndarray], np.ndarray]:
        features: list[np.ndarray] = []
        targets: list[np.ndarray] = []
        for key in sorted(self._data):  # sorted: the fit does not depend on arrival order of tasks
            task_features, task_seconds = self._data[key]
            features.extend(task_features)
            targets.append(normalized_throughput(task_seconds))
        return features, np.concatenate(targets) if targets else np.zeros(0)

    def _train(self) -> None:
        import xgboost as xgb

        features, targets = self._training_set()
        if len(features) < 2 or not np.any(targets > 0):
            return  # nothing to rank yet: keep the previous model (or the random scores)
        weights = targets + self.weight_floor
        if self.mode == "aggregate":
            matrix = xgb.DMatrix(aggregate_rows(features), label=targets, weight=weights, nthread=self.num_threads)
            params = {**self._params(), "objective": "reg:squarederror", "base_score": float(targets.mean())}
            self._booster = xgb.train(params, matrix, self.num_rounds)
            return
        rows = [_as_rows(f) for f in features]
        counts = np.array([len(r) for r in rows])
        bounds = np.concatenate([[0], np.cumsum(counts)])
        program_of_row = np.repeat(np.arange(len(rows)), counts)
        matrix = xgb.DMatrix(np.concatenate(rows), nthread=self.num_threads)

        def packsum_objective(predictions: np.ndarray, _: Any) -> tuple[np.ndarray, np.ndarray]:
            # Squared error of each program's summed prediction: every row of a program gets the
            # gradient of the sum (d sum / d row = 1), weighted per program.
            sums = np.add.reduceat(predictions.astype(np.float64), bounds[:-1])
            gradient = (weights * (sums - targets))[program_of_row]
            hessian = weights[program_of_row]
            return gradient, hessian

        params = {**self._params(), "base_score": 0.0, "disable_default_eval_metric": 1}
        self._booster = xgb.train(params, matrix, self.num_rounds, obj=packsum_objective)
