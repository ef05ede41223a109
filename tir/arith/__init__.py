"""Integer arithmetic analysis: simplification, constant bounds, symbolic intervals.

``simplify(expr, dom_map)`` canonicalizes index expressions; ``Analyzer`` holds variable
knowledge for repeated queries (``simplify``, ``const_int_bound``, ``can_prove``,
``can_prove_equal``); ``is_multiple`` (provable divisibility); ``eval_interval`` / ``relax_region`` / ``relax_range`` (``RangeRelaxer``
for many ranges over one domain) / ``union_regions`` compute the symbolic ranges that block
read/write regions are made of.
"""

from __future__ import annotations

from tir.arith.bound import ConstIntBound, const_int_bound
from tir.arith.int_set import RangeRelaxer, eval_interval, relax_range, relax_region, union_regions
from tir.arith.simplify import Analyzer, is_multiple, simplify

__all__ = [
    "Analyzer",
    "ConstIntBound",
    "RangeRelaxer",
    "const_int_bound",
    "eval_interval",
    "is_multiple",
    "relax_range",
    "relax_region",
    "simplify",
    "union_regions",
]
