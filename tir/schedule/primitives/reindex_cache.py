"""Schedule primitives: reindex_cache_read, reindex_cache_write.

A cache whose layout the user chooses as a function of the block's iterators: TVM's
``reindex_cache_read(block, i, scope, index_map)``. It is ``reindex`` (a copy indexed by the
iterators the access uses, in the given scope, named after it) followed by ``transform_layout``
of that copy by ``index_map``, composed here so that the trace holds one step and the index map
takes every iterator of the block, as in TVM.
"""

from __future__ import annotations

from tir.analysis.tree import TreeIndex
from tir.ir import BlockRealize, Buffer, For, PrimFunc, Var, free_vars
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.index_map import IndexMap, IndexMapError
from tir.schedule.primitives._common import block_target, body_stmts, doc_from, find_block, top_position
from tir.schedule.primitives._layout_util import region_buffer
from tir.schedule.primitives._location_util import blocks_in_order
from tir.schedule.primitives.cache import check_scope_name
from tir.schedule.primitives.compute_location import compute_at, reverse_compute_at
from tir.schedule.primitives.layout import IndexMapLike, reindex, transform_layout


def reindex_cache_read(
    func: PrimFunc, block_name: str, read_buffer_index: int, storage_scope: str, index_map: IndexMapLike
) -> tuple[PrimFunc, str]:
    """Read ``block.reads[read_buffer_index]`` through a cache in ``storage_scope`` laid out by
    ``index_map`` of the block's iterators: ``cache[index_map(v)] = A[f(v)]`` in a new block
    ``<A>_<scope>`` before the block, which then reads ``cache[index_map(v)]``. Returns the new
    block.

    Preconditions: those of ``reindex`` (each instance reads one element of ``A``, at indices
    of its iterators, every value of those iterators runs) and of ``transform_layout``;
    ``index_map`` takes one index per iterator of the block and uses only the iterators the
    access uses.

    Before (``reindex_cache_read(C, 0, "shared", lambda i, j: (j, i // 2, i % 2))``)::

        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = B[vi, vj] + 1.0

    After::

        B_shared = T.alloc_buffer((16, 8, 2), "float32", scope="shared")
        for ax0, ax1 in T.grid(16, 16):
            with T.block("B_shared"):
                v0, v1 = T.remap("SS", ax0, ax1)
                B_shared[v1, v0 // 2, v0 % 2] = B[v0, v1]
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = B_shared[vj, vi // 2, vi % 2] + 1.0
    """
    return _reindex_cache(func, block_name, "read", read_buffer_index, storage_scope, index_map)


def reindex_cache_write(
    func: PrimFunc, block_name: str, write_buffer_index: int, storage_scope: str, index_map: IndexMapLike
) -> tuple[PrimFunc, str]:
    """Write ``block.writes[write_buffer_index]`` through a cache in ``storage_scope`` laid out
    by ``index_map`` of the block's iterators; a new block ``<C>_<scope>`` after the block copies
    the cache back. Returns the new block. Preconditions as ``reindex_cache_read``.

    Before (``reindex_cache_write(B, 0, "shared", lambda i, j: (j, i))``)::

        for i, j in T.grid(16, 16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        B_shared = T.alloc_buffer((16, 16), "float32", scope="shared")
        for i, j in T.grid(16, 16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B_shared[vj, vi] = A[vi, vj] * 2.0
        for ax0, ax1 in T.grid(16, 16):
            with T.block("B_shared"):
                v0, v1 = T.remap("SS", ax0, ax1)
                B[v0, v1] = B_shared[v1, v0]
    """
    return _reindex_cache(func, block_name, "write", write_buffer_index, storage_scope, index_map)


def _reindex_cache(
    func: PrimFunc, block_name: str, kind: str, buffer_index: int, storage_scope: str, index_map: IndexMapLike
) -> tuple[PrimFunc, str]:
    primitive = f"reindex_cache_{kind}"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    buffer = region_buffer(realize, kind, buffer_index, primitive)
    check_scope_name(primitive, target, storage_scope)
    iter_vars = realize.block.iter_vars
    try:
        full_map = IndexMap.coerce(index_map, len(iter_vars), [iv.var.dtype for iv in iter_vars])
    except (IndexMapError, TypeError) as exc:
        raise ScheduleError(
            primitive, target, f"bad index map (one index per iterator of the block, {len(iter_vars)}): {exc}"
        ) from exc
    regions = realize.block.reads if kind == "read" else realize.block.writes
    used_ids = {id(v) for rng in regions[buffer_index].region for v in free_vars(rng.min)}
    used = [k for k, iv in enumerate(iter_vars) if id(iv.var) in used_ids]
    extra = {id(v) for result in full_map.results for v in free_vars(result)} - {id(full_map.params[k]) for k in used}
    if extra:
        names = [p.name for p in full_map.params if id(p) in extra]
        raise ScheduleError(
            primitive,
            target,
            f"the index map {full_map} uses {names}, iterators the access of {buffer.name} does not use",
        )
    near, conflicts = _loop_shared_with_conflicts(index, realize, buffer, kind)
    try:
        func, copy_name = reindex(
            func,
            block_name,
            kind,
            buffer_index,
            f"{buffer.name}_{storage_scope}",
            storage_scope,
            stale_copy_ok=near is not None,
        )
        if near is not None:
            # Another block of the statement writes A (or reads C): the copy goes next to the
            # block, inside the innermost loop around both -- right before the block's
            # statement for a read, right after it for a write -- covering one iteration.
            move = compute_at if kind == "read" else reverse_compute_at
            func = move(func, copy_name, near, crossing=conflicts)
        # The copy is indexed by the used iterators in block order: the map restricted to them.
        layout = IndexMap(tuple(full_map.params[k] for k in used), full_map.results)
        return transform_layout(func, block_name, kind, buffer_index, layout), copy_name
    except ScheduleError as error:
        # Named as the user's step: the rule broken is the reindex's or the layout's.
        raise ScheduleError(primitive, error.target, f"({error.primitive}) {error.rule}", error.fragment) from None


def _loop_shared_with_conflicts(
    index: TreeIndex, realize: BlockRealize, buffer: Buffer, kind: str
) -> tuple[Var | None, list[str]]:
    """The innermost loop around the block and every other block of its top-level statement
    that writes ``buffer`` (a read cache would copy before their writes) or reads it (a write
    cache would copy back after their reads), and those blocks' names; None when there is none.
    A write cache with another writer is left to ``reindex`` to refuse: the copy back could
    overwrite its values."""
    scope = index.scope_block(realize)
    if scope is None:
        return None, []
    position = top_position(index, scope, realize)
    if position is None:
        return None, []
    top = body_stmts(scope.block)[position]
    others = [r for r in blocks_in_order(index) if r is not realize and (r is top or index.is_ancestor(top, r))]
    writers = [r for r in others if any(region.buffer is buffer for region in r.block.writes)]
    readers = [r for r in others if any(region.buffer is buffer for region in r.block.reads)]
    if kind == "write" and writers:
        return None, []
    conflicts = writers if kind == "read" else readers
    if not conflicts:
        return None, []
    for node in index.ancestors(realize):
        if isinstance(node, For) and all(index.is_ancestor(node, other) for other in conflicts):
            return node.loop_var, [other.block.name for other in conflicts]
    return None, []


class ReindexCachePrimitives:
    """Schedule methods for reindex_cache_read and reindex_cache_write."""

    @doc_from(reindex_cache_read)
    def reindex_cache_read(  # type: ignore[misc]
        self, block: BlockRV | str, read_buffer_index: int, storage_scope: str, index_map: IndexMapLike
    ) -> BlockRV:
        return self._reindex_cache("read", block, read_buffer_index, storage_scope, index_map)

    @doc_from(reindex_cache_write)
    def reindex_cache_write(  # type: ignore[misc]
        self, block: BlockRV | str, write_buffer_index: int, storage_scope: str, index_map: IndexMapLike
    ) -> BlockRV:
        return self._reindex_cache("write", block, write_buffer_index, storage_scope, index_map)

    def _reindex_cache(
        self, kind: str, block: BlockRV | str, buffer_index: int, storage_scope: str, index_map: IndexMapLike
    ) -> BlockRV:
        primitive = f"reindex_cache_{kind}"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        name = realize.block.name
        iter_vars = realize.block.iter_vars
        try:
            text = str(IndexMap.coerce(index_map, len(iter_vars), [iv.var.dtype for iv in iter_vars]))
        except (IndexMapError, TypeError) as exc:
            raise ScheduleError(
                primitive,
                block_target(realize),
                f"bad index map (one index per iterator of the block, {len(iter_vars)}): {exc}",
            ) from exc
        pure = reindex_cache_read if kind == "read" else reindex_cache_write
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            primitive,
            (block, buffer_index, storage_scope, text),
            {},
            lambda func: pure(func, name, buffer_index, storage_scope, text),
        )


__all__ = ["ReindexCachePrimitives", "reindex_cache_read", "reindex_cache_write"]
