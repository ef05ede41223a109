"""Schedule primitives: compute_at, reverse_compute_at."""

from __future__ import annotations


class ComputeLocationPrimitives:
    """Schedule methods for compute_at, reverse_compute_at."""
