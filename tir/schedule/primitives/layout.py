"""Schedule primitives: reindex, transform_layout, transform_block_layout, pad_einsum."""

from __future__ import annotations


class LayoutPrimitives:
    """Schedule methods for reindex, transform_layout, transform_block_layout, pad_einsum."""
