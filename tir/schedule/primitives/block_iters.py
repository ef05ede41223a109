"""Schedule primitives: reorder_block_iter_var, unsafe_set_dtype.

``reorder_block_iter_var`` permutes a block's iterators (and their bindings): the same
instances, listed in another order, which is what the auto-tensorizer and the printer see.
``unsafe_set_dtype`` stores an intermediate buffer in another data type: every store casts to
it and every load casts back, so the program computes the same expressions with the values
rounded (or truncated) in between; "unsafe" because that changes the results.
"""

from __future__ import annotations

from collections.abc import Sequence

from tir.analysis import infer_block_access
from tir.analysis.tree import TreeIndex, replace_stmt
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    DataType,
    IRMutator,
    PrimExpr,
    PrimFunc,
    Stmt,
    as_dtype,
)
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._layout_util import region_buffer


def reorder_block_iter_var(func: PrimFunc, block_name: str, new_order: Sequence[int]) -> PrimFunc:
    """List the iterators of a block in a new order: ``new_order[k]`` is the position of the
    iterator that comes ``k``-th. The bindings move with their iterators; nothing else changes.

    Preconditions: ``new_order`` is a permutation of ``range(n)`` for the block's ``n``
    iterators.

    Before (``reorder_block_iter_var(C, [2, 1, 0])``)::

        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            ...

    After::

        with T.block("C"):
            vk, vj, vi = T.remap("RSS", k, j, i)
            ...
    """
    primitive = "reorder_block_iter_var"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    block = realize.block
    order = list(new_order)
    count = len(block.iter_vars)
    if any(isinstance(k, bool) or not isinstance(k, int) for k in order) or sorted(order) != list(range(count)):
        raise ScheduleError(
            primitive,
            block_target(realize),
            f"new_order must be a permutation of 0..{count - 1} (one entry per iterator of the block), got {order}",
        )
    new_block = block.replace(iter_vars=tuple(block.iter_vars[k] for k in order))
    new_realize = realize.replace(block=new_block, iter_values=tuple(realize.iter_values[k] for k in order))
    return replace_stmt(index, realize, new_realize)


def unsafe_set_dtype(func: PrimFunc, block_name: str, buffer_index: int, dtype: str | DataType) -> PrimFunc:
    """Store the ``buffer_index``-th buffer the block writes in ``dtype``: every store to it
    casts the value to ``dtype``, every load casts it back to the old type. Unsafe: values are
    rounded (or truncated) in between, so results change.

    Preconditions: the buffer is allocated in the function (a parameter's type is the
    caller's) and ``dtype`` is a scalar type. A ``match_buffer`` view of the buffer is
    retyped with it, and its loads and stores are cast the same way.

    Before (``unsafe_set_dtype(B, 0, "float16")``)::

        B = T.alloc_buffer((16,), "float32")
        ...
            B[vi] = A[vi] * 2.0
        ...
            C[vi] = B[vi] + 1.0

    After::

        B = T.alloc_buffer((16,), "float16")
        ...
            B[vi] = T.cast(A[vi] * 2.0, "float16")
        ...
            C[vi] = T.cast(B[vi], "float32") + 1.0
    """
    primitive = "unsafe_set_dtype"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    buffer = region_buffer(realize, "write", buffer_index, primitive)
    target = f"{block_target(realize)}, buffer {buffer.name}"
    try:
        new_dtype = as_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ScheduleError(primitive, target, f"bad dtype {dtype!r}: {exc}") from exc
    if new_dtype.lanes != 1 or new_dtype.is_handle:
        raise ScheduleError(primitive, target, f"the new dtype must be a scalar number type, got {new_dtype}")
    if any(param is buffer for param in func.params):
        raise ScheduleError(
            primitive, target, f"{buffer.name} is a parameter; its type is the caller's (cache_write it first)"
        )
    if new_dtype == buffer.dtype:
        return func
    new_buffer = buffer.replace(dtype=new_dtype)
    rewriter = _DtypeRewriter(buffer, new_buffer)
    return func.replace(body=rewriter.visit(func.body))


class _DtypeRewriter(IRMutator):
    """Retype a buffer and every match_buffer view of it (a view's elements are the buffer's)."""

    def __init__(self, old: Buffer, new: Buffer) -> None:
        self.old_dtype = old.dtype
        self.new_dtype = new.dtype
        self.retyped: dict[int, Buffer] = {id(old): new}

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.retyped.get(id(buffer), buffer)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        visited = self.generic_visit(load)
        if id(load.buffer) not in self.retyped:
            return visited  # type: ignore[no-any-return]
        assert isinstance(visited, BufferLoad)
        lanes = load.dtype.lanes
        return Cast(self.old_dtype.with_lanes(lanes), visited.replace(dtype=self.new_dtype.with_lanes(lanes)))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        visited = self.generic_visit(store)
        if id(store.buffer) not in self.retyped:
            return visited  # type: ignore[no-any-return]
        assert isinstance(visited, BufferStore)
        value = visited.value
        return visited.replace(value=Cast(self.new_dtype.with_lanes(value.dtype.lanes), value))

    def visit_Block(self, block: Block) -> Stmt:
        for match in block.match_buffers:
            if id(match.source.buffer) in self.retyped:
                self.retyped[id(match.buffer)] = match.buffer.replace(dtype=self.new_dtype)
        visited = self.generic_visit(block)
        assert isinstance(visited, Block)
        if visited is block:
            return visited
        reads, writes = infer_block_access(visited)
        return visited.replace(reads=tuple(reads), writes=tuple(writes))

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        return self.generic_visit(realize)  # type: ignore[no-any-return]


class BlockIterPrimitives:
    """Schedule methods for reorder_block_iter_var and unsafe_set_dtype."""

    @doc_from(reorder_block_iter_var)
    def reorder_block_iter_var(self, block: BlockRV, new_order: Sequence[int]) -> None:
        name = self.resolve_block(block, "reorder_block_iter_var").block.name  # type: ignore[attr-defined]
        order = list(new_order)
        self._apply(  # type: ignore[attr-defined]
            "reorder_block_iter_var", (block, order), {}, lambda func: reorder_block_iter_var(func, name, order)
        )

    @doc_from(unsafe_set_dtype)
    def unsafe_set_dtype(self, block: BlockRV, buffer_index: int, dtype: str) -> None:
        name = self.resolve_block(block, "unsafe_set_dtype").block.name  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            "unsafe_set_dtype",
            (block, buffer_index, str(dtype)),
            {},
            lambda func: unsafe_set_dtype(func, name, buffer_index, dtype),
        )


__all__ = ["BlockIterPrimitives", "reorder_block_iter_var", "unsafe_set_dtype"]
