"""Schedule primitives: compute_inline, reverse_compute_inline."""

from __future__ import annotations


class InlinePrimitives:
    """Schedule methods for compute_inline, reverse_compute_inline."""
