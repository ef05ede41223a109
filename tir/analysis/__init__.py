"""Program analyses: block read/write region inference (and, later, the validator)."""

from __future__ import annotations

from tir.analysis.block_access import infer_block_access

__all__ = ["infer_block_access"]
