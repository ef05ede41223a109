"""Schedule primitives: blockize, tensorize."""

from __future__ import annotations


class BlockizePrimitives:
    """Schedule methods for blockize, tensorize."""
