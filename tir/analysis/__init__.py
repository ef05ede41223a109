"""Program analyses: block read/write region inference and the validator.

``infer_block_access(block)`` gives a block's read and write regions; ``verify(func, target)``
lists the rules a program breaks (docs/design.md section 6; see ``tir.analysis.verify``), and
``verify_or_raise`` raises ``VerificationError`` listing them; ``in_place_pairs(func)`` the
outputs that may be written over an input (``tir.analysis.in_place``).
"""

from __future__ import annotations

from tir.analysis.block_access import infer_block_access
from tir.analysis.in_place import in_place_pairs
from tir.analysis.verify import (
    RULES,
    VerificationError,
    Violation,
    is_warp_level_op,
    register_warp_level_op,
    verify,
    verify_or_raise,
)

__all__ = [
    "RULES",
    "VerificationError",
    "Violation",
    "in_place_pairs",
    "infer_block_access",
    "is_warp_level_op",
    "register_warp_level_op",
    "verify",
    "verify_or_raise",
]
