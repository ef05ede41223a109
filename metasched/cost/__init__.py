"""The cost model: features of scheduled programs and models that rank candidates by them.

``extract_features(func, target)`` gives one row per buffer store (``features.py``);
``XGBModel`` learns normalized throughput from measured candidates (``xgb.py``);
``RandomModel`` scores at random, for comparison (``random.py``). Both follow the
``CostModel`` contract of docs/metasched.md: ``update``, ``predict`` (higher = faster),
``save`` and ``load``. To add a model, write a class with those methods in a module of this
package and name it in ``COST_MODELS`` (``tune(cost_model=NAME)`` then makes it with ``seed=``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metasched.cost.base import CostModel, normalized_throughput
from metasched.cost.features import FEATURE_NAMES, NUM_FEATURES, extract_features
from metasched.cost.random import RandomModel
from metasched.cost.xgb import XGBModel

if TYPE_CHECKING:
    from metasched.protocols import CostModel as ModelProtocol

__all__ = [
    "COST_MODELS",
    "FEATURE_NAMES",
    "NUM_FEATURES",
    "CostModel",
    "RandomModel",
    "XGBModel",
    "extract_features",
    "make_cost_model",
    "normalized_throughput",
]

#: The cost models ``tune(cost_model=NAME)`` makes, by name (each constructed with ``seed=``).
COST_MODELS: dict[str, type[CostModel]] = {"xgb": XGBModel, "random": RandomModel}


def make_cost_model(model: str | ModelProtocol | None, seed: int = 0) -> ModelProtocol | None:
    """The model registered as ``model`` (a name), or ``model`` itself (an object, or None for
    a search without a model)."""
    if not isinstance(model, str):
        return model
    cls = COST_MODELS.get(model)
    if cls is None:
        known = ", ".join(repr(name) for name in COST_MODELS)
        raise ValueError(f"unknown cost_model {model!r}; use {known} or a CostModel object")
    return cls(seed=seed)  # type: ignore[call-arg]
