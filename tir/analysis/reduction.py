"""A reduction block read as ``out[idx] = out[idx] op rhs`` with an identity init.

``match_reduction(block)`` recognizes the simple one-output form (``op`` one of ``+``, ``*``,
``T.max``, ``T.min``), which ``bind`` checks before annotating a block for a cross-thread
reduction and ``lower_cross_thread_reduction`` lowers; ``identity_ok(op, value)`` says whether
an init value is the identity of ``op`` (``rfactor`` and ``fuse_reduction_epilogue`` ask it
too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tir.ir import (
    Add,
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    FloatImm,
    IntImm,
    Max,
    Min,
    Mul,
    Node,
    PrimExpr,
    post_order_visit,
)
from tir.ir.structural import structural_equal

_COMBINERS: dict[type, str] = {Add: "+", Mul: "*", Max: "T.max", Min: "T.min"}


@dataclass(frozen=True)
class ReductionForm:
    """A block ``out[idx] = init`` / ``out[idx] = out[idx] op rhs`` (``op`` one of +, *, max, min)."""

    op: type
    init: BufferStore
    update: BufferStore
    rhs: PrimExpr

    def combine(self, acc: PrimExpr, value: PrimExpr) -> PrimExpr:
        return self.op(acc, value)  # type: ignore[no-any-return]


def match_reduction(block: Block) -> ReductionForm | None:
    """The reduction form of ``block``, or None: one init store of the identity of the combiner,
    one update store ``out[idx] = out[idx] op rhs`` at the same indices, ``rhs`` free of ``out``.
    """
    init, update = block.init, block.body
    if not (isinstance(init, BufferStore) and isinstance(update, BufferStore) and init.buffer is update.buffer):
        return None
    out = init.buffer
    value = update.value
    op = type(value)
    if op not in _COMBINERS:
        return None

    def is_out(e: PrimExpr) -> bool:
        return (
            isinstance(e, BufferLoad)
            and e.buffer is out
            and len(e.indices) == len(update.indices)
            and all(structural_equal(a, b) for a, b in zip(e.indices, update.indices))
        )

    a, b = value.a, value.b  # type: ignore[attr-defined]
    if is_out(a) and not _reads(b, out):
        rhs = b
    elif is_out(b) and not _reads(a, out):
        rhs = a
    else:
        return None
    if not all(structural_equal(x, y) for x, y in zip(init.indices, update.indices)):
        return None
    if not identity_ok(op, init.value)[0]:
        return None
    return ReductionForm(op, init, update, rhs)


def _reads(expr: PrimExpr, buffer: Buffer) -> bool:
    found = False

    def note(n: Node) -> None:
        nonlocal found
        if isinstance(n, BufferLoad) and n.buffer is buffer:
            found = True

    post_order_visit(expr, note)
    return found


def identity_ok(op: type, value: PrimExpr) -> tuple[bool, str]:
    """Whether ``value`` is the identity of ``op`` (Add, Mul, Max, Min) for its dtype, and what
    was expected."""
    dtype = value.dtype
    if op is Add:
        return isinstance(value, (IntImm, FloatImm)) and value.value == 0, "0"
    if op is Mul:
        return isinstance(value, (IntImm, FloatImm)) and value.value == 1, "1"
    lowest = op is Max
    if isinstance(value, IntImm):
        want = dtype.min_value() if lowest else dtype.max_value()
        return value.value == want, str(want)
    if isinstance(value, FloatImm):
        finite = _float_max(str(dtype))
        if lowest:
            ok = value.value == -math.inf or (finite is not None and value.value == -finite)
            return ok, f'T.{dtype}("-inf") or the lowest {dtype}'
        ok = value.value == math.inf or (finite is not None and value.value == finite)
        return ok, f'T.{dtype}("inf") or the largest {dtype}'
    return False, "a constant"


def _float_max(dtype: str) -> float | None:
    try:
        import numpy as np

        return float(np.finfo(dtype).max)
    except (TypeError, ValueError):
        return None


__all__ = ["ReductionForm", "identity_ok", "match_reduction"]
