"""Loop transformations: split, fuse, reorder, add_unit_loop."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tir.analysis.tree import TreeIndex, child_stmts, replace_stmt
from tir.arith import Analyzer, simplify
from tir.arith.iter_map import IterMapResult, detect_iter_map, normalize_iter_map
from tir.ir import (
    Block,
    BlockRealize,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    IterKind,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    const,
    free_vars,
    is_const_int,
    post_order_visit,
    substitute,
)
from tir.ir.dtype import INT32
from tir.ir.expr import And
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.primitives._common import doc_from, find_block, loop_dom_map, loop_target, substitute_and_simplify
from tir.schedule.primitives._init_order_util import blocks_with_init, check_init_order
from tir.schedule.primitives._loops_util import (
    check_disjoint_footprints,
    check_iterator_kinds,
    collect_block_sites,
    loop_header,
    uses_any,
)


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
    dtype = loop_var.dtype
    known = math.prod(f for f in factors if f is not None)
    sizes: list[int | PrimExpr]
    # A symbolic extent that is provably a multiple of the known factors (a padded one:
    # ``(m + 3) // 4 * 4``) splits exactly, with no tail to guard.
    exact_symbolic = (
        extent is None and None in factors and is_const_int(simplify(FloorMod(loop.extent, const(known, dtype))), 0)
    )
    if None in factors and extent is None:
        # A symbolic extent: the inferred factor is ceildiv(extent, known), as TVM makes it;
        # the predicate below keeps the tail of the last outer iteration from running.
        inferred = simplify(FloorDiv(loop.extent + const(known - 1, dtype), const(known, dtype)))
        sizes = [inferred if f is None else f for f in factors]
        total = known
    elif None in factors:
        assert extent is not None
        sizes = [-(-extent // known) if f is None else f for f in factors]
        total = math.prod(sizes)  # type: ignore[arg-type]
    else:
        sizes = [int(f) for f in factors]  # type: ignore[arg-type]
        total = math.prod(sizes)  # type: ignore[arg-type]
    # Fewer iterations than the loop has would silently drop instances.
    if extent is not None and total < extent:
        raise ScheduleError(
            "split",
            loop_target(loop),
            f"the factors {list(factors)} multiply to {total}, less than the loop's extent {extent}: "
            "iterations would be lost",
            loop,
        )
    if extent is None and None not in factors and not Analyzer().can_prove(loop.extent <= total):
        raise ScheduleError(
            "split",
            loop_target(loop),
            f"the factors {list(factors)} multiply to {total}, which may be less than the loop's extent "
            f"{loop.extent}: iterations would be lost (infer a factor with None instead)",
            loop,
        )
    new_vars = [Var(f"{loop_var.name}_{k}", dtype) for k in range(len(sizes))]
    extents = [size if isinstance(size, PrimExpr) else const(size, dtype) for size in sizes]
    fused: PrimExpr = new_vars[0]
    for var, size in zip(new_vars[1:], extents[1:]):
        fused = fused * size + var
    if not (isinstance(loop.min, IntImm) and loop.min.value == 0):
        fused = loop.min + fused
    dom = loop_dom_map(index, loop)
    dom.update({var: Range(const(0, dtype), size) for var, size in zip(new_vars, extents)})
    body = substitute_and_simplify(loop.body, {loop_var: fused}, dom)
    guard = None
    if (extent is None and not exact_symbolic) or (extent is not None and total != extent):
        guard = fused < loop.min + loop.extent
        body = _guard(body, index, guard, dom)
    new_loop: Stmt = body
    for var, size in reversed(list(zip(new_vars, extents))):
        new_loop = For(var, const(0, dtype), size, ForKind.SERIAL, new_loop)
    result = replace_stmt(index, loop, new_loop)
    result = _keep_bindings_affine("split", loop_target(loop), index, result, new_loop, {loop_var: fused}, guard)
    return result, new_vars


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
    result = replace_stmt(index, loops[0], new_loop)
    return _keep_bindings_affine("fuse", loop_target(loops[0]), index, result, new_loop, vmap), fused


def _keep_bindings_affine(
    primitive: str,
    target: str,
    before: TreeIndex,
    func: PrimFunc,
    new_loop: Stmt,
    vmap: dict[Var, PrimExpr],
    guard: PrimExpr | None = None,
) -> PrimFunc:
    """``func`` (the result of a split or fuse that put ``new_loop`` in place and substituted
    ``vmap`` into the bindings) with every block binding under ``new_loop`` quasi-affine and
    independent again where it was before, and inside their iterators' domains, as
    ``tir.analysis.verify`` requires (``guard``: the predicate a split added).

    Simplifying the substituted bindings can take them out of that form: after fusing
    ``(5, 7, 2)`` and splitting by 8, ``(o * 8 + i) // 2 % 7`` simplifies to
    ``(o * 4 + i // 2) % 7``, which uses the digits of ``o`` separately from
    ``(o * 8 + i) // 14``, and iterator-map detection no longer sees one fused iterator. Such a
    block gets its bindings as normalized from their iterator sums, or else substituted
    without simplification, with its predicate as simplified or else as substituted; if no
    such form is accepted, the primitive is refused.
    """
    changed = free_vars(tuple(vmap.values()))
    after: TreeIndex | None = None
    fixed: dict[int, BlockRealize] = {}
    for realize in _realizes_under(new_loop):
        # Sums and products of loop variables stay in the detector's form; only an expression
        # of the new loops with a division or modulo in it can be simplified out of it. (This
        # keeps split and fuse cheap on the common path: no detection at all.)
        exprs = (*realize.iter_values, realize.predicate)
        if not any(uses_any(expr, changed) and _divides(expr) for expr in exprs):
            continue
        after = after or TreeIndex(func)
        if _bindings_affine(after, realize) is not False:
            continue
        old = before.blocks.get(realize.block.name)
        if old is None or _bindings_affine(before, old) is not True:
            continue  # not affine before this step either: not this step's doing
        raw = [substitute(value, vmap) for value in old.iter_values]
        dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in after.loops_above(realize)}
        raw_predicate = substitute(old.predicate, vmap)
        if guard is not None:
            raw_predicate = guard if _is_true(raw_predicate) else And(raw_predicate, guard)
        for predicate in (realize.predicate, raw_predicate):
            for values in (normalize_iter_map(raw, dom, predicate), raw):
                candidate = realize.replace(iter_values=tuple(values), predicate=predicate)
                if _bindings_affine(after, candidate, realize) is True:
                    fixed[id(realize)] = candidate
                    break
            if id(realize) in fixed:
                break
        if id(realize) not in fixed:
            result = _detect_bindings(after, realize)
            errors = "; ".join(result.errors) if result is not None else ""
            raise ScheduleError(
                primitive,
                target,
                f"the bindings of block {realize.block.name!r} would no longer be quasi-affine and independent "
                f"({errors})",
                realize,
            )
    if not fixed:
        return func

    class Rebind(IRMutator):
        def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
            replacement = fixed.get(id(realize))
            return replacement if replacement is not None else self.generic_visit(realize)

    return func.replace(body=Rebind().visit(func.body))


def _divides(expr: PrimExpr) -> bool:
    """Whether ``expr`` has a floor division or modulo in it."""
    found = False

    def visit(node: object) -> None:
        nonlocal found
        if isinstance(node, (FloorDiv, FloorMod)):
            found = True

    post_order_visit(expr, visit)
    return found


def _realizes_under(stmt: Stmt) -> list[BlockRealize]:
    """The block realizes under ``stmt`` that are not inside another block."""
    found: list[BlockRealize] = []

    def walk(node: Stmt) -> None:
        if isinstance(node, BlockRealize):
            found.append(node)
            return
        for child in child_stmts(node):
            walk(child)

    walk(stmt)
    return found


def _detect_bindings(
    index: TreeIndex, realize: BlockRealize, placed: BlockRealize | None = None
) -> IterMapResult | None:
    """Iterator-map detection of the block's non-opaque bindings over the loops between it and
    its parent block, as the validator runs it (None when it does not judge the block: no
    bindings, or loop ranges that depend on other loops). ``placed``: the realize whose
    position in ``index`` to use, when ``realize`` is a candidate not in the tree."""
    loops = index.loops_above(placed if placed is not None else realize)
    loop_vars = [loop.loop_var for loop in loops]
    if any(uses_any(bound, loop_vars) for loop in loops for bound in (loop.min, loop.extent)):
        return None
    values = [v for iv, v in zip(realize.block.iter_vars, realize.iter_values) if iv.kind is not IterKind.OPAQUE]
    if not values:
        return None
    dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in loops}
    return detect_iter_map(values, dom, realize.predicate, "surjective", _known_ranges(index, placed or realize))


def _known_ranges(index: TreeIndex, realize: BlockRealize) -> dict[Var, Range]:
    """What the validator knows of the variables bound outside a block's scope: parameter
    sizes are at least 1, outer loops and the iterators of enclosing blocks have ranges."""
    known: dict[Var, Range] = {}
    sizes = free_vars(tuple(extent for buffer in index.func.buffer_params for extent in buffer.shape))
    for var in sizes:
        known[var] = Range(IntImm(1, var.dtype), IntImm(var.dtype.max_value() - 1, var.dtype))
    for node in index.ancestors(realize):
        if isinstance(node, For):
            known[node.loop_var] = Range(node.min, node.extent)
        elif isinstance(node, Block):
            known.update({iv.var: iv.dom for iv in node.iter_vars})
    return known


def _bindings_affine(index: TreeIndex, realize: BlockRealize, placed: BlockRealize | None = None) -> bool | None:
    """Whether detection accepts the bindings and, where it relates the predicate to them,
    finds their constant ranges inside the iterators' domains (the validator's checks); None
    when it does not judge the block."""
    result = _detect_bindings(index, realize, placed)
    if result is None:
        return None
    if not result.ok:
        return False
    if not result.predicate_applied:
        return True  # ranges are supersets: the validator only reports an excursion it confirms
    judged = [iv for iv in realize.block.iter_vars if iv.kind is not IterKind.OPAQUE]
    for iter_var, values in zip(judged, result.ranges):
        dom = iter_var.dom
        bounds = (values.min, values.extent, dom.min, dom.extent)
        if all(isinstance(b, IntImm) for b in bounds):
            low, extent, dom_low, dom_extent = (b.value for b in bounds)  # type: ignore[attr-defined]
            if low < dom_low or low + extent > dom_low + dom_extent:
                return False  # the values leave the iterator's domain as far as detection sees
    return True


def _is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


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
      different iterations touch disjoint parts of it (a dependence the new order could break);
    - a block with ``T.init()`` would run its init after updates of the same output element: the
      init runs where the reduce iterators start, which must come first for every output element.
      Only loops that fuse spatial with reduce iterators can break that: the loops of such a fused
      index (``(fo * 9 + fi) // 12``, ``(fo * 9 + fi) % 12``) must stay in the order of the index
      (``fo`` outside ``fi``), unless the parts they would swap are purely spatial (see
      ``tir.analysis.init_order``).

    Otherwise instances of one block that differ in spatial or reduction iterators may run in any
    order (reductions accumulate in another order, which can change float rounding).

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
    result = replace_stmt(index, chain[0], new_loop)
    check_init_order("reorder", target, func, result, blocks_with_init(new_loop))
    return result


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
        realize = find_block(index, target, "add_unit_loop")
        if realize is func.body:
            raise ScheduleError("add_unit_loop", f"block {target!r}", "cannot add a loop above the root block")
        stmt = realize
    unit = Var("u", INT32)
    new_loop = For(unit, const(0, INT32), const(1, INT32), ForKind.SERIAL, stmt)
    return replace_stmt(index, stmt, new_loop), unit


class LoopPrimitives:
    """Schedule methods for loop transformations."""

    @doc_from(split)
    def split(  # type: ignore[misc]
        self,
        loop: LoopRV,
        factors: Sequence[int | IntImm | ExprRV | None],
        preserve_unit_iters: bool = True,
        disable_predication: bool = False,
    ) -> list[LoopRV]:
        # preserve_unit_iters (TVM's keyword) is accepted: bindings always keep the new loops.
        for_node = self.resolve_loop(loop, "split")  # type: ignore[attr-defined]
        if isinstance(factors, (int, ExprRV)) or not isinstance(factors, Sequence):
            raise ScheduleError(
                "split",
                f"loop {for_node.loop_var.name}",
                f"factors must be a list (one extent per new loop, at most one None), got {factors!r}; "
                f"for an inner loop of {factors!r} write split(loop, [None, {factors!r}])",
            )
        # A sampled -1 (sample_perfect_tile of a symbolic extent) is the inferred factor, as in TVM.
        sizes = [
            None if f is None or (isinstance(f, ExprRV) and int(f) == -1) else self.resolve_int(f, "split")  # type: ignore[attr-defined]
            for f in factors
        ]
        if disable_predication and not _split_is_exact(for_node.extent, sizes):
            # Dropping the predicate of an inexact split would run iterations past the extent
            # (out-of-range reads and writes); only an exact split, which has no predicate, is safe.
            raise ScheduleError(
                "split",
                f"loop {for_node.loop_var.name}",
                f"disable_predication=True needs the factors {sizes!r} to tile the extent "
                f"{for_node.extent} exactly (a constant extent equal to their product, or divisible by "
                "it when one factor is None): without its predicate the tail would run iterations "
                "outside the loop's extent",
            )
        # An integer constant (IntImm) is recorded as the int it stands for.
        recorded = [f.value if isinstance(f, IntImm) else f for f in factors]
        return self._apply(  # type: ignore[attr-defined]
            "split", (loop,), {"factors": recorded}, lambda func: split(func, for_node.loop_var, sizes)
        )

    @doc_from(fuse)
    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:  # type: ignore[misc]
        # preserve_unit_iters (TVM's keyword) is accepted; a fused unit loop is simplified away either way.
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


def _split_is_exact(extent: PrimExpr, sizes: Sequence[int | None]) -> bool:
    """Whether splitting a loop of ``extent`` into ``sizes`` needs no predicate."""
    if not isinstance(extent, IntImm):
        return False
    known = math.prod(size for size in sizes if size is not None)
    if known <= 0:
        return False
    if None in sizes:
        return extent.value % known == 0
    return known == extent.value
