"""Loop transformations: split, fuse, reorder, add_unit_loop."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tir.arith import Analyzer, simplify
from tir.ir import (
    BlockRealize,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    const,
)
from tir.ir.dtype import INT32
from tir.ir.expr import And
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.primitives._common import doc_from, loop_dom_map, loop_target, substitute_and_simplify
from tir.schedule.primitives._loops_util import (
    check_disjoint_footprints,
    check_iterator_kinds,
    collect_block_sites,
    loop_header,
    uses_any,
)
from tir.schedule.tree import TreeIndex, replace_stmt


def split(func: PrimFunc, loop_var: Var, factors: Sequence[int | None]) -> tuple[PrimFunc, list[Var]]:
    """Split a loop into nested loops whose extents are ``factors`` (outermost first).

    One factor may be ``None``: it is inferred as ``ceil(extent / product(others))``. When the
    product exceeds the extent, the blocks under the loop get the predicate
    ``fused < extent`` (a ``T.where``), so every instance still runs exactly once. A product
    below the extent (or not provably covering a symbolic extent) is refused: it would lose
    iterations.

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
    if loop.kind is not ForKind.SERIAL or loop.annotations:
        raise ScheduleError(
            "split",
            loop_target(loop),
            f"only a serial loop without annotations can be split (this one is {loop.kind.value}"
            f"{' with annotations' if loop.annotations else ''}); split first, then parallelize, "
            "vectorize, bind or annotate",
            loop,
        )
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
    total = math.prod(sizes)
    # Fewer iterations than the loop has would silently drop instances.
    if extent is not None and total < extent:
        raise ScheduleError(
            "split",
            loop_target(loop),
            f"the factors {list(factors)} multiply to {total}, less than the loop's extent {extent}: "
            "iterations would be lost",
            loop,
        )
    if extent is None and not Analyzer().can_prove(loop.extent <= total):
        raise ScheduleError(
            "split",
            loop_target(loop),
            f"the factors {list(factors)} multiply to {total}, which may be less than the loop's extent "
            f"{loop.extent}: iterations would be lost (infer a factor with None instead)",
            loop,
        )
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


def _find_loop(index: TreeIndex, loop_var: Var, primitive: str) -> For:
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError(primitive, f"loop {loop_var.name}", "no such loop")
    return loop


def _refuse_duplicates(loop_vars: Sequence[Var], primitive: str) -> None:
    seen: set[int] = set()
    for var in loop_vars:
        if id(var) in seen:
            raise ScheduleError(primitive, f"loop {var.name}", "each loop may be given only once")
        seen.add(id(var))


def fuse(func: PrimFunc, loop_vars: Sequence[Var]) -> tuple[PrimFunc, Var]:
    """Fuse nested loops (outermost first) into one loop over the product of their extents.

    The loops must be directly nested (each the only statement in the body of the one before),
    start at 0, be serial without annotations (fuse before parallelizing, vectorizing, binding
    or annotating), share one dtype, and no extent may depend on another of the loops. The
    fused loop is named ``a_b_fused``; the old loop variables become ``fused // (product of the
    inner extents) % extent``, simplified, so a split undone by a fuse gives back the original
    bindings. Fusing a single loop changes nothing and returns that loop.

    Before (``fuse(i, j)``)::

        for i, j in T.grid(100, 8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i_j_fused in range(800):
            with T.block("B"):
                vi = T.spatial_axis(100, i_j_fused // 8)
                vj = T.spatial_axis(8, i_j_fused % 8)
                B[vi, vj] = A[vi, vj] * 2.0
    """
    index = TreeIndex(func)
    if not loop_vars:
        raise ScheduleError("fuse", "no loops", "needs at least one loop")
    loops = [_find_loop(index, var, "fuse") for var in loop_vars]
    _refuse_duplicates(loop_vars, "fuse")
    if len(loops) == 1:
        return func, loops[0].loop_var
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise ScheduleError(
                "fuse",
                loop_target(inner),
                f"the loops must be directly nested: loop {inner.loop_var.name} is not the only statement "
                f"in the body of loop {outer.loop_var.name}",
                outer,
            )
    dtype = loops[0].loop_var.dtype
    for loop in loops:
        if loop.kind is not ForKind.SERIAL or loop.annotations:
            what = f"is {loop.kind.value}" if loop.kind is not ForKind.SERIAL else f"has annotations {loop.annotations}"
            raise ScheduleError(
                "fuse",
                loop_target(loop),
                f"only serial loops without annotations can be fused; this loop {what} "
                "(fuse first, then parallelize, vectorize, bind or annotate the fused loop)",
                loop_header(loop),
            )
        if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
            raise ScheduleError(
                "fuse",
                loop_target(loop),
                f"the loops must start at 0; this one starts at {loop.min}",
                loop_header(loop),
            )
        if loop.loop_var.dtype != dtype:
            raise ScheduleError(
                "fuse",
                loop_target(loop),
                f"the loops must share one dtype: {loop.loop_var.dtype} is not {dtype}",
                loop_header(loop),
            )
        for other in loops:
            if uses_any(loop.extent, [other.loop_var]):
                raise ScheduleError(
                    "fuse",
                    loop_target(loop),
                    f"the extent of loop {loop.loop_var.name} depends on loop {other.loop_var.name}",
                    loop_header(loop),
                )
    extents = [loop.extent for loop in loops]
    if all(isinstance(e, IntImm) for e in extents):
        product = math.prod(e.value for e in extents)  # type: ignore[attr-defined]
        if product > int(dtype.max_value()):
            raise ScheduleError("fuse", loop_target(loops[0]), f"the fused extent {product} overflows {dtype}")
    fused = Var("_".join(loop.loop_var.name for loop in loops) + "_fused", dtype)
    total: PrimExpr = extents[0]
    for extent in extents[1:]:
        total = total * extent
    dom = loop_dom_map(index, loops[0])
    dom[fused] = Range(const(0, dtype), total)
    total = simplify(total, dom)
    dom[fused] = Range(const(0, dtype), total)
    vmap: dict[Var, PrimExpr] = {}
    inner_product: PrimExpr = const(1, dtype)
    for position in range(len(loops) - 1, -1, -1):
        value: PrimExpr = fused if _is_one(inner_product) else fused // inner_product
        if position > 0:
            value = value % extents[position]
        vmap[loops[position].loop_var] = simplify(value, dom)
        inner_product = extents[position] if _is_one(inner_product) else inner_product * extents[position]
    body = substitute_and_simplify(loops[-1].body, vmap, dom)
    new_loop = For(fused, const(0, dtype), total, ForKind.SERIAL, body)
    return replace_stmt(index, loops[0], new_loop), fused


def _is_one(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


def reorder(func: PrimFunc, loop_vars: Sequence[Var]) -> PrimFunc:
    """Put the given loops in the given order (outermost first).

    The loops must lie in one chain of perfectly nested loops: from the outermost given loop
    down to the innermost, each loop is the only statement in the body of the one before (no
    sequence, branch or block in between). The given loops take the positions the given loops
    held, in the order given; loops of the chain that were not given keep their positions.
    Loops keep their variables, kinds and annotations. Refused when:

    - a loop's min or extent depends on a loop that would move inside it;
    - a block under the loops binds an opaque iterator to a moved loop, or uses a moved loop's
      variable in its body directly (nothing says its instances may run in another order);
    - a statement outside every block sits under the loops (same reason);
    - two blocks under the loops share a buffer one of them writes, and it cannot be proved that
      different iterations touch disjoint parts of it (a dependence the new order could break).

    Instances of one block that differ in spatial or reduction iterators may run in any order
    (reductions accumulate in another order, which can change float rounding).

    Before (``reorder(k, i)``)::

        for i, j, k in T.grid(64, 64, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    After::

        for k, j, i in T.grid(64, 64, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]
    """
    index = TreeIndex(func)
    if not loop_vars:
        raise ScheduleError("reorder", "no loops", "needs at least one loop")
    given = [_find_loop(index, var, "reorder") for var in loop_vars]
    _refuse_duplicates(loop_vars, "reorder")
    depth = {id(loop): sum(1 for _ in index.ancestors(loop)) for loop in given}
    outermost = min(given, key=lambda loop: depth[id(loop)])
    wanted = {id(loop.loop_var) for loop in given}
    chain = [outermost]
    found = 1
    while found < len(given):
        body = chain[-1].body
        if not isinstance(body, For):
            missing = [loop.loop_var.name for loop in given if all(loop is not c for c in chain)]
            raise ScheduleError(
                "reorder",
                f"loop {missing[0]}",
                f"the loops must be perfectly nested under loop {outermost.loop_var.name}: the body of loop "
                f"{chain[-1].loop_var.name} is a {type(body).__name__}, not a single loop, before loop(s) "
                f"{missing} are reached",
                chain[-1],
            )
        chain.append(body)
        found += id(body.loop_var) in wanted
    positions = [p for p, loop in enumerate(chain) if id(loop.loop_var) in wanted]
    new_chain = list(chain)
    for position, loop in zip(positions, given):
        new_chain[position] = loop
    changed = [p for p in range(len(chain)) if new_chain[p] is not chain[p]]
    if not changed:
        return func
    for position, loop in enumerate(new_chain):
        inside = [other.loop_var for other in new_chain[position:]]
        for bound in (loop.min, loop.extent):
            if uses_any(bound, inside):
                culprit = next(v for v in inside if uses_any(bound, [v]))
                raise ScheduleError(
                    "reorder",
                    loop_target(loop),
                    f"the range of loop {loop.loop_var.name} depends on loop {culprit.name}, "
                    "which would not be outside it",
                    loop_header(loop),
                )
    moved = chain[changed[0] : changed[-1] + 1]
    moved_vars = [loop.loop_var for loop in moved]
    target = loop_target(chain[positions[0]])
    # Loops of the chain inside the moved ones keep their order; they sweep within an iteration.
    sites = collect_block_sites(
        chain[changed[-1]].body,
        moved_vars,
        "reorder",
        target,
        "a statement outside every block sits under the loops; without a block nothing says its "
        "iterations may run in another order",
    )
    check_iterator_kinds(
        sites,
        moved_vars,
        frozenset({IterKind.SPATIAL, IterKind.REDUCE}),
        "reorder",
        target,
        lambda kind: "an opaque iterator is bound to a moved loop; its instances must keep their order",
    )
    check_disjoint_footprints(sites, moved, "reorder", target, "change the order of the iterations")
    new_loop: Stmt = chain[-1].body
    for loop in reversed(new_chain):
        new_loop = loop.replace(body=new_loop)
    return replace_stmt(index, chain[0], new_loop)


def add_unit_loop(func: PrimFunc, target: str | Var) -> tuple[PrimFunc, Var]:
    """Wrap a block (by name) or a loop (by loop variable) in a new loop of extent 1.

    The new loop, named ``u``, sits directly above the block's realize or the loop; the
    program computes the same thing. Not possible above the root block.

    Before (``add_unit_loop(block "B")``)::

        for i in range(100):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi] * 2.0

    After::

        for i in range(100):
            for u in range(1):
                with T.block("B"):
                    vi = T.remap("S", i)
                    B[vi] = A[vi] * 2.0
    """
    index = TreeIndex(func)
    stmt: Stmt
    if isinstance(target, Var):
        stmt = _find_loop(index, target, "add_unit_loop")
    else:
        realize = index.blocks.get(target)
        if realize is None:
            raise ScheduleError("add_unit_loop", f"block {target!r}", "no such block")
        if realize is func.body:
            raise ScheduleError("add_unit_loop", f"block {target!r}", "cannot add a loop above the root block")
        stmt = realize
    unit = Var("u", INT32)
    new_loop = For(unit, const(0, INT32), const(1, INT32), ForKind.SERIAL, stmt)
    return replace_stmt(index, stmt, new_loop), unit


class LoopPrimitives:
    """Schedule methods for loop transformations."""

    @doc_from(split)
    def split(self, loop: LoopRV, factors: Sequence[int | ExprRV | None]) -> list[LoopRV]:  # type: ignore[misc]
        for_node = self.resolve_loop(loop, "split")  # type: ignore[attr-defined]
        sizes = [None if f is None else self.resolve_int(f, "split") for f in factors]  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined]
            "split", (loop,), {"factors": list(factors)}, lambda func: split(func, for_node.loop_var, sizes)
        )

    @doc_from(fuse)
    def fuse(self, *loops: LoopRV) -> LoopRV:  # type: ignore[misc]
        nodes = [self.resolve_loop(loop, "fuse") for loop in loops]  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined]
            "fuse", loops, {}, lambda func: fuse(func, [node.loop_var for node in nodes])
        )

    @doc_from(reorder)
    def reorder(self, *loops: LoopRV) -> None:  # type: ignore[misc]
        nodes = [self.resolve_loop(loop, "reorder") for loop in loops]  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            "reorder", loops, {}, lambda func: reorder(func, [node.loop_var for node in nodes])
        )

    @doc_from(add_unit_loop)
    def add_unit_loop(self, block_or_loop: BlockRV | LoopRV) -> LoopRV:  # type: ignore[misc]
        target: str | Var
        if isinstance(block_or_loop, LoopRV):
            target = self.resolve_loop(block_or_loop, "add_unit_loop").loop_var  # type: ignore[attr-defined]
        else:
            target = self.resolve_block(block_or_loop, "add_unit_loop").block.name  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined]
            "add_unit_loop", (block_or_loop,), {}, lambda func: add_unit_loop(func, target)
        )
