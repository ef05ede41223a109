"""Loop transformations: split, fuse, reorder, add_unit_loop."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tir.ir import (
    BlockRealize,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    const,
)
from tir.ir.expr import And
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import ExprRV, LoopRV
from tir.schedule.primitives._common import doc_from, loop_dom_map, loop_target, substitute_and_simplify
from tir.schedule.tree import TreeIndex, replace_stmt


def split(func: PrimFunc, loop_var: Var, factors: Sequence[int | None]) -> tuple[PrimFunc, list[Var]]:
    """Split a loop into nested loops whose extents are ``factors`` (outermost first).

    One factor may be ``None``: it is inferred as ``ceil(extent / product(others))``. When the
    product exceeds the extent, the blocks under the loop get the predicate
    ``fused < extent`` (a ``T.where``), so every instance still runs exactly once.

    Before (``split(i, [None, 32])``)::

        for i in range(100):
            with T.block("B"):
                vi = T.spatial_axis(100, i)
                B[vi] = A[vi] * 2.0

    After::

        for i_0, i_1 in T.grid(4, 32):
            with T.block("B"):
                vi = T.spatial_axis(100, i_0 * 32 + i_1)
                T.where(i_0 * 32 + i_1 < 100)
                B[vi] = A[vi] * 2.0
    """
    index = TreeIndex(func)
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError("split", f"loop {loop_var.name}", "no such loop")
    if not factors:
        raise ScheduleError("split", loop_target(loop), "needs at least one factor")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError("split", loop_target(loop), f"at most one factor may be None, got {list(factors)}")
    for factor in factors:
        if factor is not None and (not isinstance(factor, int) or isinstance(factor, bool) or factor < 1):
            raise ScheduleError("split", loop_target(loop), f"factors must be positive integers, got {list(factors)}")
    extent = loop.extent.value if isinstance(loop.extent, IntImm) else None
    known = math.prod(f for f in factors if f is not None)
    if None in factors:
        if extent is None:
            raise ScheduleError(
                "split", loop_target(loop), "cannot infer a factor (None) of a loop with a symbolic extent", loop
            )
        inferred = -(-extent // known)
        sizes = [inferred if f is None else f for f in factors]
    else:
        sizes = [int(f) for f in factors]  # type: ignore[arg-type]
    dtype = loop_var.dtype
    new_vars = [Var(f"{loop_var.name}_{k}", dtype) for k in range(len(sizes))]
    fused: PrimExpr = new_vars[0]
    for var, size in zip(new_vars[1:], sizes[1:]):
        fused = fused * const(size, dtype) + var
    if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
        fused = loop.min + fused
    dom = loop_dom_map(index, loop)
    dom.update({var: Range(const(0, dtype), const(size, dtype)) for var, size in zip(new_vars, sizes)})
    body = substitute_and_simplify(loop.body, {loop_var: fused}, dom)
    total = math.prod(sizes)
    if extent is None or total != extent:
        body = _guard(body, index, fused < loop.min + loop.extent, dom)
    new_loop: Stmt = body
    for var, size in reversed(list(zip(new_vars, sizes))):
        new_loop = For(var, const(0, dtype), const(size, dtype), ForKind.SERIAL, new_loop)
    return replace_stmt(index, loop, new_loop), new_vars


def _guard(body: Stmt, index: TreeIndex, condition: PrimExpr, dom: dict[Var, Range]) -> Stmt:
    """Add ``condition`` to the predicate of every block directly under ``body`` (or wrap
    ``body`` in an ``if`` when it holds no block)."""
    from tir.arith import simplify
    from tir.ir import IRMutator

    condition = simplify(condition, dom)
    found = False

    class AddPredicate(IRMutator):
        def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
            nonlocal found
            found = True
            predicate = realize.predicate
            is_true = isinstance(predicate, IntImm) and predicate.value == 1
            return realize.replace(predicate=condition if is_true else And(predicate, condition))

    new_body = AddPredicate().visit(body)
    return new_body if found else IfThenElse(condition, body)


class LoopPrimitives:
    """Schedule methods for loop transformations."""

    @doc_from(split)
    def split(self, loop: LoopRV, factors: Sequence[int | ExprRV | None]) -> list[LoopRV]:  # type: ignore[misc]
        for_node = self.resolve_loop(loop, "split")  # type: ignore[attr-defined]
        sizes = [None if f is None else self.resolve_int(f, "split") for f in factors]  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined]
            "split", (loop,), {"factors": list(factors)}, lambda func: split(func, for_node.loop_var, sizes)
        )
