"""Schedule primitives: sample_perfect_tile, sample_categorical, sample_compute_location."""

from __future__ import annotations


class SamplingPrimitives:
    """Schedule methods for sample_perfect_tile, sample_categorical, sample_compute_location."""
