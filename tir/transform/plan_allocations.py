"""``plan_allocations``: decide where each ``Allocate`` lives: ``"stack"`` or ``"heap"``.

A buffer of constant size up to ``stack_limit`` bytes (64 KiB by default) goes on the stack;
a larger or symbolic one on the heap. Buffers outside the ``global`` scope (GPU ``shared`` /
``local`` memory, fragments) have a fixed home whatever the size and are marked ``"stack"``
when their size is constant. Before::

    A = T.allocate((128,), "float32")
    B = T.allocate((1024, 1024), "float32")
    C = T.allocate((n,), "float32")

After::

    A = T.allocate((128,), "float32")
    B = T.allocate((1024, 1024), "float32", storage="heap")
    C = T.allocate((n,), "float32", storage="heap")
"""

from __future__ import annotations

from tir.ir import Allocate, Buffer, IntImm, IRMutator, PrimFunc, Stmt

__all__ = ["STACK_LIMIT_BYTES", "buffer_bytes", "plan_allocations"]

#: The largest allocation (in bytes) that goes on the stack.
STACK_LIMIT_BYTES = 64 * 1024


def buffer_bytes(buffer: Buffer) -> int | None:
    """The buffer's size in bytes (what its explicit strides span, when it has them), or None
    when a dimension or stride is symbolic."""
    shape = buffer.const_shape()
    if shape is None:
        return None
    if buffer.strides:
        if not all(isinstance(stride, IntImm) for stride in buffer.strides):
            return None
        strides = [stride.value for stride in buffer.strides]  # type: ignore[attr-defined]
        count = 1 + sum((extent - 1) * stride for extent, stride in zip(shape, strides)) if all(shape) else 0
    else:
        count = 1
        for extent in shape:
            count *= extent
    return count * ((buffer.dtype.bits * buffer.dtype.lanes + 7) // 8)


class _Plan(IRMutator):
    def __init__(self, stack_limit: int) -> None:
        self.stack_limit = stack_limit

    def visit_Allocate(self, stmt: Allocate) -> Stmt:
        size = buffer_bytes(stmt.buffer)
        if size is None:
            storage = "heap"
        elif stmt.buffer.scope != "global":
            storage = "stack"
        else:
            storage = "stack" if size <= self.stack_limit else "heap"
        return stmt.replace(body=self.visit(stmt.body), storage=storage)


def plan_allocations(func: PrimFunc, stack_limit: int = STACK_LIMIT_BYTES) -> PrimFunc:
    """Set ``Allocate.storage`` of every allocation in ``func`` (see the module docstring)."""
    return func.replace(body=_Plan(stack_limit).visit(func.body))
