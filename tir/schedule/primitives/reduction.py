"""Schedule primitives: decompose_reduction, merge_reduction, rfactor."""

from __future__ import annotations


class ReductionPrimitives:
    """Schedule methods for decompose_reduction, merge_reduction, rfactor."""
