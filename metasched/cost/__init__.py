"""The cost model: features of scheduled programs and models that rank candidates by them.

``extract_features(func, target)`` gives one row per buffer store (``features.py``);
``XGBModel`` learns normalized throughput from measured candidates (``xgb.py``);
``RandomModel`` scores at random, for comparison (``random.py``). Both follow the
``CostModel`` contract of docs/metasched.md: ``update``, ``predict`` (higher = faster),
``save`` and ``load``.
"""

from __future__ import annotations

from metasched.cost.base import CostModel, normalized_throughput
from metasched.cost.features import FEATURE_NAMES, NUM_FEATURES, extract_features
from metasched.cost.random import RandomModel
from metasched.cost.xgb import XGBModel

__all__ = [
    "FEATURE_NAMES",
    "NUM_FEATURES",
    "CostModel",
    "RandomModel",
    "XGBModel",
    "extract_features",
    "normalized_throughput",
]
