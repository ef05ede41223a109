"""Schedule primitive: loop_partition.

A loop becomes consecutive loops over consecutive parts of its range, each with its own copy of
the body (blocks renamed ``<block>_<loop><k>``). The iterations run in the same order as before,
so any loop may be partitioned; what it buys is a part whose bounds are known (a tail without a
predicate, a border without padding checks) for later primitives to treat apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from tir.analysis.tree import TreeIndex, replace_stmt
from tir.ir import For, ForKind, IntImm, IterKind, PrimFunc, Stmt, Var, const, free_vars
from tir.ir.stmt import seq
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import ExprRV, LoopRV
from tir.schedule.primitives._common import doc_from, loop_target
from tir.schedule.primitives._fresh_copy import Instantiator


def loop_partition(func: PrimFunc, loop_var: Var, factors: Sequence[int | None]) -> tuple[PrimFunc, list[Var]]:
    """Partition a loop into consecutive loops of ``factors`` iterations each. One factor may
    be ``None``: the iterations the others leave. Without a ``None``, iterations past the
    factors' sum form one more part (TVM's convention: ``[2, 1, 64]`` of 128 gives parts of 2,
    1, 64 and 61). Each part gets a copy of the body, its blocks renamed ``<block>_<loop><k>``
    and its loop ``<loop><k>`` ranging over its part; returns the new loops.

    Preconditions: the loop has a constant start and extent, is not bound to a thread and drives
    no reduction iterator (each part would hold a piece of the reduction in blocks of its own);
    the factors are positive integers (at most one ``None``) whose sum is at most the extent.

    Before (``loop_partition(i, [2, None])``)::

        for i in range(8):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0

    After::

        for i0 in range(2):
            with T.block("B_i0"):
                vi = T.remap("S", i0)
                B[vi] = A[vi] * 2.0
        for i1 in range(2, 8):
            with T.block("B_i1"):
                vi = T.remap("S", i1)
                B[vi] = A[vi] * 2.0
    """
    primitive = "loop_partition"
    index = TreeIndex(func)
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError(primitive, f"loop {loop_var.name}", "no such loop")
    target = loop_target(loop)
    if loop.kind is ForKind.THREAD_BINDING:
        raise ScheduleError(primitive, target, f"the loop is bound to {loop.thread_tag}; partition it before binding")
    if not (isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)):
        raise ScheduleError(primitive, target, "the loop needs a constant start and extent")
    for realize in index.blocks.values():
        if not index.is_ancestor(loop, realize):
            continue
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
            if iter_var.kind is IterKind.REDUCE and any(v is loop_var for v in free_vars(value)):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the loop drives the reduction iterator {iter_var.var.name} of block {realize.block.name!r}: "
                    "each part would hold part of the reduction, in blocks of its own (rfactor or split it instead)",
                )
    factors = list(factors)
    if not factors or sum(f is None for f in factors) > 1:
        raise ScheduleError(primitive, target, f"factors must be a non-empty list with at most one None, got {factors}")
    if any(f is not None and (isinstance(f, bool) or not isinstance(f, int) or f < 1) for f in factors):
        raise ScheduleError(primitive, target, f"factors must be positive integers (or one None), got {factors}")
    extent = loop.extent.value
    known = sum(f for f in factors if f is not None)
    if known > extent:
        raise ScheduleError(primitive, target, f"the factors {factors} add up to {known}, past the extent {extent}")
    sizes = [extent - known if f is None else f for f in factors]
    if None not in factors and known < extent:
        sizes.append(extent - known)
    sizes = [size for size in sizes if size > 0]
    taken = set(index.blocks)
    name = loop_var.name
    parts: list[Stmt] = []
    new_vars: list[Var] = []
    start = loop.min.value
    for k, size in enumerate(sizes):
        suffix = f"_{name}{k}"

        def rename(block_name: str, suffix: str = suffix) -> str:
            wanted = candidate = f"{block_name}{suffix}"
            n = 1
            while candidate in taken:
                candidate = f"{wanted}_{n}"
                n += 1
            taken.add(candidate)
            return candidate

        var = Var(f"{name}{k}", loop_var.dtype)
        copier = Instantiator({}, rename)
        copier.vars[loop_var] = var
        body = copier.visit(loop.body)
        empty = _block_never_running(loop.body, loop_var, start, size, index.loops_above(loop))
        if empty is not None:
            raise ScheduleError(
                primitive,
                target,
                f"the part [{start}, {start + size}) runs no instance of block {empty!r} (its T.where excludes "
                "them all): choose factors that end within the predicate's bound",
            )
        parts.append(
            For(
                var,
                const(start, loop.min.dtype),
                const(size, loop.extent.dtype),
                loop.kind,
                body,
                loop.thread_tag,
                dict(loop.annotations),
            )
        )
        new_vars.append(var)
        start += size
    return replace_stmt(index, loop, seq(*parts)), new_vars


def _block_never_running(body: Stmt, var: Var, start: int, size: int, outer: list[For]) -> str | None:
    """The name of a block in ``body`` whose predicate is false for every value of ``var`` in
    ``[start, start + size)`` (and of the loops around), else None."""
    from tir.arith import Analyzer
    from tir.ir import BlockRealize, For, IntImm, Not, Range

    found: list[str] = []

    def visit(node: object, ranges: dict[Var, Range]) -> None:
        if isinstance(node, For):
            visit(node.body, {**ranges, node.loop_var: Range(node.min, node.extent)})
        elif isinstance(node, BlockRealize):
            predicate = node.predicate
            if not (isinstance(predicate, IntImm) and predicate.value):
                analyzer = Analyzer()
                for v, rng in ranges.items():
                    analyzer.bind(v, rng)
                if analyzer.can_prove(Not(predicate)):
                    found.append(node.block.name)
        elif hasattr(node, "stmts"):
            for item in node.stmts:  # type: ignore[attr-defined]
                visit(item, ranges)

    base = {loop.loop_var: Range(loop.min, loop.extent) for loop in outer}
    visit(body, {**base, var: Range(IntImm(start, var.dtype), IntImm(size, var.dtype))})
    return found[0] if found else None


class PartitionPrimitives:
    """Schedule method for loop_partition."""

    @doc_from(loop_partition)
    def loop_partition(  # type: ignore[misc]
        self, loop: LoopRV, factors: Sequence[int | IntImm | ExprRV | None], preserve_unit_iters: bool = True
    ) -> list[LoopRV]:
        # preserve_unit_iters (TVM's keyword) is accepted: bindings always keep the new loops.
        node = self.resolve_loop(loop, "loop_partition")  # type: ignore[attr-defined]
        sizes = [None if f is None else self.resolve_int(f, "loop_partition") for f in factors]  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "loop_partition",
            (loop,),
            {"factors": [f.value if isinstance(f, IntImm) else f for f in factors]},  # IntImm: as its int
            lambda func: loop_partition(func, node.loop_var, sizes),
        )


__all__ = ["PartitionPrimitives", "loop_partition"]
