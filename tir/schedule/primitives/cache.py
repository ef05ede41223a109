"""Schedule primitives: cache_read, cache_write, set_scope, storage_align."""

from __future__ import annotations


class CachePrimitives:
    """Schedule methods for cache_read, cache_write, set_scope, storage_align."""
