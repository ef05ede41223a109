"""Schedule primitives: read_at, write_at.

TVM's ``read_at(loop, block, i, scope)``: a cache of what ``block`` reads of its ``i``-th read
buffer under ``loop``, copied at ``loop`` (per iteration of the loops around it), and marked
``{"auto_copy": 1}`` for the lowering that turns copies into vector or async transfers.
Here it is ``cache_read`` then ``compute_at`` of the copy at the loop (``write_at``:
``cache_write`` then ``reverse_compute_at``), composed so the trace holds one step.
"""

from __future__ import annotations

from tir.ir import PrimFunc, Var
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, LoopRV
from tir.schedule.primitives._common import doc_from
from tir.schedule.primitives.annotate import annotate
from tir.schedule.primitives.cache import cache_read, cache_write
from tir.schedule.primitives.compute_location import compute_at, reverse_compute_at


def read_at(
    func: PrimFunc, loop_var: Var, block_name: str, read_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Copy what ``block`` reads of ``block.reads[read_buffer_index]`` under ``loop`` into a
    buffer in ``storage_scope`` at ``loop``; the block reads the copy. The copy block is
    annotated ``{"auto_copy": 1}``. Returns it.

    Preconditions: those of ``cache_read`` and of ``compute_at`` of the copy at ``loop``.

    Before (``read_at(k0, C, 1, "shared")``)::

        for i, k0, k1 in T.grid(16, 4, 4):
            with T.block("C"):
                vi, vk = T.remap("SR", i, k0 * 4 + k1) ...
                C[vi] += A[vi, vk]

    After::

        A_shared = T.alloc_buffer((16, 16), "float32", scope="shared")
        for i, k0 in T.grid(16, 4):
            for ax0 in range(4):
                with T.block("A_shared"):
                    ...
                    T.block_attr({"auto_copy": 1})
                    A_shared[v0, v1] = A[v0, v1]
            for k1 in range(4):
                with T.block("C"):
                    ...
                    C[vi] += A_shared[vi, vk]
    """
    return _at(func, loop_var, block_name, read_buffer_index, storage_scope, read=True)


def write_at(
    func: PrimFunc, loop_var: Var, block_name: str, write_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Write ``block.writes[write_buffer_index]`` through a buffer in ``storage_scope`` copied
    back at ``loop`` (per iteration of the loops around it); the copy block is annotated
    ``{"auto_copy": 1}``. Returns it. Preconditions: those of ``cache_write`` and of
    ``reverse_compute_at`` of the copy at ``loop``."""
    return _at(func, loop_var, block_name, write_buffer_index, storage_scope, read=False)


def _at(
    func: PrimFunc, loop_var: Var, block_name: str, buffer_index: int, storage_scope: str, read: bool
) -> tuple[PrimFunc, str]:
    primitive = "read_at" if read else "write_at"
    try:
        if read:
            func, copy = cache_read(func, block_name, buffer_index, storage_scope)
            func = compute_at(func, copy, loop_var)
        else:
            func, copy = cache_write(func, block_name, buffer_index, storage_scope)
            func = reverse_compute_at(func, copy, loop_var)
        return annotate(func, copy, "auto_copy", 1), copy
    except ScheduleError as error:
        raise ScheduleError(primitive, error.target, f"({error.primitive}) {error.rule}", error.fragment) from None


class ReadWriteAtPrimitives:
    """Schedule methods for read_at and write_at."""

    @doc_from(read_at)
    def read_at(self, loop: LoopRV, block: BlockRV | str, read_buffer_index: int, storage_scope: str) -> BlockRV:  # type: ignore[misc]
        return self._at("read_at", loop, block, read_buffer_index, storage_scope)

    @doc_from(write_at)
    def write_at(self, loop: LoopRV, block: BlockRV | str, write_buffer_index: int, storage_scope: str) -> BlockRV:  # type: ignore[misc]
        return self._at("write_at", loop, block, write_buffer_index, storage_scope)

    def _at(self, primitive: str, loop: LoopRV, block: BlockRV | str, index: int, scope: str) -> BlockRV:
        node = self.resolve_loop(loop, primitive)  # type: ignore[attr-defined]
        name = self.resolve_block(block, primitive).block.name  # type: ignore[attr-defined]
        pure = read_at if primitive == "read_at" else write_at
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            primitive, (loop, block, index, scope), {}, lambda func: pure(func, node.loop_var, name, index, scope)
        )


__all__ = ["ReadWriteAtPrimitives", "read_at", "write_at"]
