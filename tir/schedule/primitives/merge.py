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

from tir.analysis.tree import TreeIndex, replace_stmt
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
    free_vars,
    substitute,
)
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import LoopRV
from tir.schedule.primitives._common import doc_from, loop_target
from tir.schedule.primitives._fresh_copy import Instantiator

_Access = tuple[Buffer, tuple[Range, ...], bool]  # buffer, region per iteration, is a write


def merge(func: PrimFunc, loop_vars: Sequence[Var]) -> tuple[PrimFunc, Var]:
    """Merge consecutive sibling loops of one extent into one loop running their bodies in
    order. Returns the merged loop.

    Loops nested ``k`` deep in perfect nests (each enclosing loop holding only the next one)
    whose outermost loops are siblings are merged together with their enclosing loops, level
    by level (the result is the innermost merged loop).

    Preconditions: at least two loops, whose nests' outermost loops are consecutive statements
    of one sequence; all merged loops serial, without annotations, starting at 0, with one
    extent per level; for every buffer two of the bodies touch (one writing it), for every
    level both touch per iteration a slice ``[c * i + o, c * i + o + w)`` (``w <= c``) of one
    dimension, the same for both, so that different iterations touch different elements.

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
    target = loop_target(loops[0])
    chains = _chains_to_siblings(primitive, index, loops)
    tops = [chain[0] for chain in chains]
    first = tops[0]
    parent = index.parent_of(first)
    assert isinstance(parent, SeqStmt)
    positions = [next(k for k, item in enumerate(parent.stmts) if item is top) for top in tops]
    if positions != list(range(positions[0], positions[0] + len(tops))):
        raise ScheduleError(primitive, target, "the loops must be consecutive statements, in order")
    analyzer = Analyzer()
    for chain in chains:
        for level, loop in enumerate(chain):
            if loop.kind is not ForKind.SERIAL or loop.annotations or loop.thread_tag:
                raise ScheduleError(primitive, loop_target(loop), "only serial loops without annotations can be merged")
            extent = chains[0][level].extent
            if not analyzer.can_prove_equal(loop.min, 0) or not analyzer.can_prove_equal(loop.extent, extent):
                raise ScheduleError(
                    primitive, loop_target(loop), f"the loops must start at 0 and have one extent ({extent})"
                )
    outer = {lp.loop_var: Range(lp.min, lp.extent) for lp in index.loops_above(first)}
    accesses = [_accesses(chain[-1], outer) for chain in chains]
    loop_vars_of = [[lp.loop_var for lp in chain] for chain in chains]
    for a in range(len(chains)):
        for b in range(a + 1, len(chains)):
            _check_slices(primitive, target, loop_vars_of[a], accesses[a], loop_vars_of[b], accesses[b])
    merged_vars = [Var(lp.loop_var.name, lp.loop_var.dtype) for lp in chains[0]]
    bodies: list[Stmt] = []
    for chain in chains:
        copier = Instantiator({}, lambda name: name)
        for lp, merged_var in zip(chain, merged_vars):
            copier.vars[lp.loop_var] = merged_var
        bodies.append(copier.visit(chain[-1].body))
    merged: Stmt = _flat(bodies)
    for lp, merged_var in reversed(list(zip(chains[0], merged_vars))):
        merged = For(merged_var, lp.min, lp.extent, ForKind.SERIAL, merged)
    items = list(parent.stmts)
    items[positions[0] : positions[-1] + 1] = [merged]
    new_parent: Stmt = merged if len(items) == 1 else SeqStmt(tuple(items))
    return replace_stmt(index, parent, new_parent), merged_vars[-1]


def _chains_to_siblings(primitive: str, index: TreeIndex, loops: list[For]) -> list[list[For]]:
    """For each loop, the perfect nest of loops from an ancestor down to it, the ancestors one
    level up for all loops at once, until the tops are distinct statements of one sequence.
    Merging loops nested ``k`` deep merges their ``k`` enclosing loops too."""
    chains = [[loop] for loop in loops]
    while True:
        parents = [index.parent_of(chain[0]) for chain in chains]
        if all(isinstance(p, SeqStmt) for p in parents) and all(p is parents[0] for p in parents):
            if len({id(chain[0]) for chain in chains}) != len(chains):
                raise ScheduleError(primitive, loop_target(loops[0]), "the loops must be distinct")
            return chains
        for chain, p in zip(chains, parents):
            if not isinstance(p, For):
                raise ScheduleError(
                    primitive,
                    loop_target(chain[0]),
                    f"loop {chain[0].loop_var.name} is neither a sibling of the other loops nor the only statement "
                    "of its enclosing loop, so the loops cannot be merged level by level",
                )
            chain.insert(0, p)


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
    primitive: str,
    target: str,
    vars_a: list[Var],
    accesses_a: list[_Access],
    vars_b: list[Var],
    accesses_b: list[_Access],
) -> None:
    for buffer_a, region_a, write_a in accesses_a:
        for buffer_b, region_b, write_b in accesses_b:
            if buffer_a is not buffer_b or not (write_a or write_b):
                continue
            if not _same_slicing(region_a, vars_a, region_b, vars_b):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the bodies of loops {vars_a[-1].name} and {vars_b[-1].name} both touch "
                    f"{buffer_a.name} (one writes it) in parts not proved to belong to one iteration each: merged, "
                    f"an iteration of the second would run before later iterations of the first",
                )


def _same_slicing(
    region_a: tuple[Range, ...], vars_a: list[Var], region_b: tuple[Range, ...], vars_b: list[Var]
) -> bool:
    """Whether, for every merged level, some dimension of both regions is
    ``[c * i + o, c * i + o + w)``, ``w <= c``, with one ``c`` and ``o`` (``i`` each loop's
    variable at that level, ``o`` free of all merged variables): then iterations that differ
    at any level touch different elements."""
    analyzer = Analyzer()
    merged = {id(v) for v in (*vars_a, *vars_b)}
    for var_a, var_b in zip(vars_a, vars_b):
        found = False
        for rng_a, rng_b in zip(region_a, region_b):
            form_a, form_b = _slice(rng_a, var_a, analyzer), _slice(rng_b, var_b, analyzer)
            if form_a is None or form_b is None:
                continue
            (c_a, o_a, w_a), (c_b, o_b, w_b) = form_a, form_b
            if any(id(v) in merged for v in free_vars((o_a, o_b))):
                continue
            if c_a == c_b and c_a > 0 and w_a <= c_a and w_b <= c_b and analyzer.can_prove_equal(o_a, o_b):
                found = True
                break
        if not found:
            return False
    return True


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
    if any(v is var for v in free_vars(offset)):
        return None
    return step.value, offset, extent.value


class MergePrimitives:
    """Schedule method for merge."""

    @doc_from(merge)
    def merge(self, *loops: LoopRV) -> LoopRV:  # type: ignore[misc]
        nodes = [self.resolve_loop(loop, "merge") for loop in loops]  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "merge", loops, {}, lambda func: merge(func, [node.loop_var for node in nodes])
        )


__all__ = ["MergePrimitives", "merge"]
