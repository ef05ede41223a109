"""Schedule primitive: merge.

Sibling loops of one extent become one loop whose body runs their bodies one after the other
(TVM's ``merge``): ``for i: A(i)`` then ``for i: B(i)`` becomes ``for i: A(i); B(i)``. That
changes the order: ``B(i)`` now runs before ``A(j)`` for ``j > i``. TVM does not check it;
here it is proved safe: what two merged bodies both touch (one writing it) is, per iteration,
a slice of the buffer that no other iteration touches, so only same-iteration pairs meet, and
those keep their order.
"""

from __future__ import annotations

from collections.abc import Sequence

from tir.arith import Analyzer, relax_range
from tir.ir import (
    BlockRealize,
    Buffer,
    For,
    ForKind,
    IntImm,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    substitute,
)
from tir.ir import post_order_visit as _visit
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import LoopRV
from tir.schedule.primitives._blockize_util import Instantiator
from tir.schedule.primitives._common import doc_from, loop_target
from tir.schedule.tree import TreeIndex, replace_stmt

_Access = tuple[Buffer, tuple[Range, ...], bool]  # buffer, region per iteration, is a write


def merge(func: PrimFunc, loop_vars: Sequence[Var]) -> tuple[PrimFunc, Var]:
    """Merge consecutive sibling loops of one extent into one loop running their bodies in
    order. Returns the merged loop.

    Preconditions: at least two loops, consecutive statements of one sequence, serial, without
    annotations, starting at 0 with one extent; for every buffer two of the bodies touch (one
    writing it), both touch per iteration a slice ``[c * i + o, c * i + o + w)`` (``w <= c``)
    of one dimension, the same for both, so that different iterations touch different
    elements.

    Before (``merge(i, i_1)``)::

        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0
        for i_1 in range(16):
            with T.block("C"):
                vi = T.remap("S", i_1)
                C[vi] = B[vi] + 1.0

    After::

        for i in range(16):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = B[vi] + 1.0
    """
    primitive = "merge"
    index = TreeIndex(func)
    if len(loop_vars) < 2:
        raise ScheduleError(primitive, "loops", "merge needs at least two loops")
    loops: list[For] = []
    for var in loop_vars:
        loop = index.loops.get(id(var))
        if loop is None:
            raise ScheduleError(primitive, f"loop {var.name}", "no such loop")
        loops.append(loop)
    first = loops[0]
    target = loop_target(first)
    parent = index.parent_of(first)
    if not isinstance(parent, SeqStmt):
        raise ScheduleError(primitive, target, "the loops must be consecutive statements of one sequence")
    positions = []
    for loop in loops:
        position = next((k for k, item in enumerate(parent.stmts) if item is loop), None)
        if position is None:
            raise ScheduleError(
                primitive, loop_target(loop), f"the loop is not a sibling of loop {first.loop_var.name}"
            )
        positions.append(position)
    if positions != list(range(positions[0], positions[0] + len(loops))):
        raise ScheduleError(primitive, target, "the loops must be consecutive statements, in order")
    analyzer = Analyzer()
    for loop in loops:
        if loop.kind is not ForKind.SERIAL or loop.annotations or loop.thread_tag:
            raise ScheduleError(primitive, loop_target(loop), "only serial loops without annotations can be merged")
        if not analyzer.can_prove_equal(loop.min, 0) or not analyzer.can_prove_equal(loop.extent, first.extent):
            raise ScheduleError(
                primitive, loop_target(loop), f"the loops must start at 0 and have one extent ({first.extent})"
            )
    outer = {lp.loop_var: Range(lp.min, lp.extent) for lp in index.loops_above(first)}
    accesses = [_accesses(loop, outer) for loop in loops]
    for a in range(len(loops)):
        for b in range(a + 1, len(loops)):
            _check_slices(primitive, target, loops[a], accesses[a], loops[b], accesses[b])
    merged_var = Var(first.loop_var.name, first.loop_var.dtype)
    bodies: list[Stmt] = []
    for loop in loops:
        copier = Instantiator({}, lambda name: name)
        copier.vars[loop.loop_var] = merged_var
        bodies.append(copier.visit(loop.body))
    merged = For(merged_var, first.min, first.extent, ForKind.SERIAL, _flat(bodies))
    items = list(parent.stmts)
    items[positions[0] : positions[-1] + 1] = [merged]
    new_parent: Stmt = merged if len(items) == 1 else SeqStmt(tuple(items))
    return replace_stmt(index, parent, new_parent), merged_var


def _flat(stmts: list[Stmt]) -> Stmt:
    items: list[Stmt] = []
    for stmt in stmts:
        items.extend(stmt.stmts if isinstance(stmt, SeqStmt) else [stmt])
    return items[0] if len(items) == 1 else SeqStmt(tuple(items))


def _accesses(loop: For, outer: dict[Var, Range]) -> list[_Access]:
    """What each block under ``loop`` reads and writes, per iteration of ``loop``: regions in
    terms of the loop variable, relaxed over the loops inside it."""
    found: list[_Access] = []

    def walk(node: object, inner: dict[Var, Range]) -> None:
        if isinstance(node, For):
            walk(node.body, {**inner, node.loop_var: Range(node.min, node.extent)})
        elif isinstance(node, BlockRealize):
            bindings = {iv.var: v for iv, v in zip(node.block.iter_vars, node.iter_values)}
            dom = {**inner, **{iv.var: iv.dom for iv in node.block.iter_vars if iv.var not in bindings}}
            for regions, is_write in ((node.block.reads, False), (node.block.writes, True)):
                for region in regions:
                    relaxed = tuple(
                        relax_range(Range(substitute(r.min, bindings), substitute(r.extent, bindings)), dom)
                        for r in region.region
                    )
                    found.append((region.buffer, relaxed, is_write))
            walk(node.block.body, inner)
        elif isinstance(node, SeqStmt):
            for item in node.stmts:
                walk(item, inner)
        elif hasattr(node, "body"):
            walk(node.body, inner)  # type: ignore[attr-defined]

    walk(loop.body, {})
    return found


def _check_slices(
    primitive: str, target: str, loop_a: For, accesses_a: list[_Access], loop_b: For, accesses_b: list[_Access]
) -> None:
    for buffer_a, region_a, write_a in accesses_a:
        for buffer_b, region_b, write_b in accesses_b:
            if buffer_a is not buffer_b or not (write_a or write_b):
                continue
            if not _same_slicing(region_a, loop_a.loop_var, region_b, loop_b.loop_var):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the bodies of loops {loop_a.loop_var.name} and {loop_b.loop_var.name} both touch "
                    f"{buffer_a.name} (one writes it) in parts not proved to belong to one iteration each: merged, "
                    f"an iteration of the second would run before later iterations of the first",
                )


def _same_slicing(region_a: tuple[Range, ...], var_a: Var, region_b: tuple[Range, ...], var_b: Var) -> bool:
    """Whether some dimension of both regions is ``[c * i + o, c * i + o + w)``, ``w <= c``,
    with one ``c`` and ``o`` (``i`` each loop's variable)."""
    analyzer = Analyzer()
    for rng_a, rng_b in zip(region_a, region_b):
        form_a, form_b = _slice(rng_a, var_a, analyzer), _slice(rng_b, var_b, analyzer)
        if form_a is None or form_b is None:
            continue
        (c_a, o_a, w_a), (c_b, o_b, w_b) = form_a, form_b
        if c_a == c_b and c_a > 0 and w_a <= c_a and w_b <= c_b and analyzer.can_prove_equal(o_a, o_b):
            return True
    return False


def _slice(rng: Range, var: Var, analyzer: Analyzer) -> tuple[int, PrimExpr, int] | None:
    if not isinstance(rng.extent, IntImm):
        extent = analyzer.simplify(rng.extent)
        if not isinstance(extent, IntImm):
            return None
    else:
        extent = rng.extent
    start = analyzer.simplify(rng.min)
    offset = analyzer.simplify(substitute(start, {var: IntImm(0, var.dtype)}))
    step = analyzer.simplify(substitute(start, {var: IntImm(1, var.dtype)}) - offset)
    if not isinstance(step, IntImm) or not analyzer.can_prove_equal(start, offset + step * var):
        return None
    if any(v is var for v in _vars(offset)):
        return None
    return step.value, offset, extent.value


def _vars(expr: object) -> list[Var]:
    found: list[Var] = []
    _visit(expr, lambda n: found.append(n) if isinstance(n, Var) else None)
    return found


class MergePrimitives:
    """Schedule method for merge."""

    @doc_from(merge)
    def merge(self, *loops: LoopRV) -> LoopRV:  # type: ignore[misc]
        nodes = [self.resolve_loop(loop, "merge") for loop in loops]  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "merge", loops, {}, lambda func: merge(func, [node.loop_var for node in nodes])
        )


__all__ = ["MergePrimitives", "merge"]
