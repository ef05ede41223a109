"""Helpers shared by cache_read and cache_write: which statements touch a buffer, the region a
set of blocks reads or writes over some loops, the exact union of boxes over loops, and the
copy nest and names of a cache."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer, eval_interval, relax_range, simplify, union_regions
from tir.ir import (
    KNOWN_SCOPES,
    Add,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Cast,
    For,
    ForKind,
    IntImm,
    IRMutator,
    IRVisitor,
    IterKind,
    IterVar,
    LetStmt,
    Max,
    Min,
    Mul,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    const,
    free_vars,
    is_const_int,
    replace_buffers,
    substitute,
)
from tir.schedule.errors import ScheduleError
from tir.schedule.primitives._common import (
    block_target,
    buffer_names,
    unique_name,
)


def check_scope_name(primitive: str, target: str, scope: str) -> None:
    """Refuse a storage scope the backends do not know."""
    if scope not in KNOWN_SCOPES:
        raise ScheduleError(
            primitive, target, f"unknown storage scope {scope!r}; known scopes: {', '.join(KNOWN_SCOPES)}"
        )


def region_buffer(primitive: str, realize: BlockRealize, field: str, position: int | str) -> Buffer:
    """The buffer of ``block.reads[position]`` (``field="reads"``) or ``block.writes[position]``;
    ``position`` may also name the buffer (TVM's ``cache_read("C", "A", "global")``)."""
    regions: tuple[BufferRegion, ...] = getattr(realize.block, field)
    if isinstance(position, str):
        named = [k for k, region in enumerate(regions) if region.buffer.name == position]
        if len(named) == 1:
            return regions[named[0]].buffer
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < len(regions):
        names = [region.buffer.name for region in regions]
        raise ScheduleError(
            primitive,
            block_target(realize),
            f"buffer index {position!r} is out of range: the block {field} {len(regions)} buffer(s) {names}",
        )
    return regions[position].buffer


def _sanitize(name: str) -> str:
    return re.sub(r"\W", "_", name)


class ReplaceRealizes(IRMutator):
    """Block realizes (by identity) replaced by new statements."""

    def __init__(self, replacements: Mapping[int, Stmt]) -> None:
        self.replacements = replacements

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        new = self.replacements.get(id(realize))
        if new is not None:
            return new
        rebuilt = self.generic_visit(realize)
        assert isinstance(rebuilt, Stmt)
        return rebuilt


def check_visible(
    func: PrimFunc, index: TreeIndex, scope: BlockRealize, buffer: Buffer, primitive: str, target: str
) -> None:
    """Refuse unless ``buffer`` is defined at the top of ``scope``'s body: a parameter, or a
    buffer that ``scope`` or a block around it allocates or matches."""
    if any(param is buffer for param in func.params):
        return
    for node in [scope.block, *index.ancestors(scope.block)]:
        if isinstance(node, Block) and (
            any(b is buffer for b in node.alloc_buffers) or any(m.buffer is buffer for m in node.match_buffers)
        ):
            return
    raise ScheduleError(
        primitive,
        target,
        f"{buffer.name} is not defined in the scope of block {scope.block.name!r} "
        "(a match_buffer view or allocation of the block itself?)",
    )


def path_to_scope(index: TreeIndex, realize: BlockRealize, scope: BlockRealize, stop: Stmt | None = None) -> list[Stmt]:
    """Statements strictly between ``realize`` and the block of ``scope`` (or ``stop``, a
    statement inside it), innermost first."""
    path = []
    for node in index.ancestors(realize):
        if node is scope.block or node is stop:
            break
        path.append(node)
    return path


class Accesses(IRVisitor):
    """Whether a statement reads / writes a buffer: loads, stores, and the read/write regions and
    match_buffer sources of the blocks in it. Block realizes in ``skip`` are left out."""

    def __init__(self, buffer: Buffer, skip: frozenset[int] = frozenset()) -> None:
        self.buffer = buffer
        self.skip = skip
        self.reads = False
        self.writes = False

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        if id(realize) not in self.skip:
            self.generic_visit(realize)

    def visit_Block(self, block: Block) -> None:
        if any(region.buffer is self.buffer for region in block.reads):
            self.reads = True
        if any(region.buffer is self.buffer for region in block.writes):
            self.writes = True
        if any(match.source.buffer is self.buffer for match in block.match_buffers):
            self.reads = True
        self.visit(block.init)
        self.visit(block.body)

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if load.buffer is self.buffer:
            self.reads = True
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if store.buffer is self.buffer:
            self.writes = True
        self.generic_visit(store)


def accesses(node: Stmt | PrimExpr | None, buffer: Buffer, skip: frozenset[int] = frozenset()) -> Accesses:
    visitor = Accesses(buffer, skip)
    visitor.visit(node)
    return visitor


def uses_vars(expr: PrimExpr, variables: Sequence[Var] | set[Var]) -> set[Var]:
    return set(free_vars(expr)).intersection(variables)


def as_dtype(expr: PrimExpr, like: PrimExpr) -> PrimExpr:
    if expr.dtype == like.dtype:
        return expr
    if isinstance(expr, IntImm):
        return IntImm(expr.value, like.dtype)
    return Cast(like.dtype, expr)


def copy_nest(name: str, source: Buffer, target: Buffer, region: Sequence[Range]) -> Stmt:
    """``for ax...: with T.block(name): target[v...] = source[v...]`` over ``region``.

    The block iterators are spatial over the whole buffer dimension, bound to ``min + ax``; the
    loops run over the region's extents.
    """
    loop_vars: list[Var] = []
    iter_vars: list[IterVar] = []
    bindings: list[PrimExpr] = []
    for dim, (rng, extent) in enumerate(zip(region, source.shape)):
        loop_var = Var(f"ax{dim}", extent.dtype)
        loop_vars.append(loop_var)
        iter_vars.append(IterVar(Var(f"v{dim}", extent.dtype), Range(const(0, extent.dtype), extent), IterKind.SPATIAL))
        start = as_dtype(rng.min, extent)
        bindings.append(loop_var if is_const_int(start, 0) else simplify(start + loop_var))
    point = tuple(iv.var for iv in iter_vars)
    block = Block(
        name,
        tuple(iter_vars),
        reads=(BufferRegion.point(source, point),),
        writes=(BufferRegion.point(target, point),),
        body=BufferStore(target, BufferLoad(source, point), point),
    )
    stmt: Stmt = BlockRealize(tuple(bindings), const(True), block)
    for loop_var, rng, extent in reversed(list(zip(loop_vars, region, source.shape))):
        stmt = For(loop_var, const(0, extent.dtype), as_dtype(rng.extent, extent), ForKind.SERIAL, stmt)
    return stmt


def cache_buffer_and_block_names(func: PrimFunc, index: TreeIndex, buffer: Buffer, scope: str) -> tuple[str, str]:
    base = _sanitize(f"{buffer.name}_{scope}")
    return unique_name(base, buffer_names(func)), unique_name(base, set(index.blocks))


def outer_analyzer(index: TreeIndex, scope: BlockRealize, within: Stmt | None = None) -> Analyzer:
    """An analyzer that knows the ranges of the loops and block iterators around ``scope``'s body
    (or around ``within``, a statement inside it)."""
    analyzer = Analyzer()
    start = scope.block if within is None else within
    for node in [start, *index.ancestors(start)]:
        if isinstance(node, For):
            analyzer.bind(node.loop_var, Range(node.min, node.extent))
        elif isinstance(node, Block):
            for iter_var in node.iter_vars:
                analyzer.bind(iter_var.var, iter_var.dom)
    return analyzer


def clamp_region(region: Sequence[Range], shape: Sequence[PrimExpr], analyzer: Analyzer) -> tuple[Range, ...]:
    """``region`` intersected with the buffer's bounds ``[0, shape)``."""
    clamped = []
    for rng, extent in zip(region, shape):
        low, end = rng.min, analyzer.simplify(rng.min + rng.extent)
        if not analyzer.can_prove(low >= 0):
            low = analyzer.simplify(Max(low, const(0, low.dtype)))
        if not analyzer.can_prove(end <= as_dtype(extent, end)):
            end = analyzer.simplify(Min(end, as_dtype(extent, end)))
        if low is rng.min and analyzer.can_prove_equal(end, rng.min + rng.extent):
            clamped.append(rng)
        else:
            clamped.append(Range(low, analyzer.simplify(end - low)))
    return tuple(clamped)


def redirect_blocks(func: PrimFunc, names: Sequence[str], old: Buffer, new: Buffer) -> PrimFunc:
    """The blocks ``names`` read and write ``new`` where they used ``old``."""
    for name in names:
        index = TreeIndex(func)
        realize = index.blocks[name]
        func = replace_stmt(index, realize, realize.replace(block=replace_buffers(realize.block, {old: new})))
    return func


def loop_nest_body(stmt: Stmt) -> Stmt:
    """The statement under a nest of loops (``stmt`` itself when it is no loop)."""
    while isinstance(stmt, For):
        stmt = stmt.body
    return stmt


def child_position(index: TreeIndex, sequence: SeqStmt, stmt: Stmt) -> int:
    """Which statement of ``sequence`` holds ``stmt``."""
    chain = [stmt, *index.ancestors(stmt)]
    at = next(k for k, node in enumerate(chain) if node is sequence)
    return next(k for k, item in enumerate(sequence.stmts) if item is chain[at - 1])


def has_load(expr: PrimExpr) -> bool:
    found = False

    class Find(IRVisitor):
        def visit_BufferLoad(self, load: BufferLoad) -> None:
            nonlocal found
            found = True

    Find().visit(expr)
    return found


def _full_if_loaded(rng: Range, extent: PrimExpr) -> Range:
    """``rng``, or the whole dimension when its bounds read memory (which may change before the
    consumers run)."""
    if has_load(rng.min) or has_load(rng.extent):
        return Range(const(0, extent.dtype), extent)
    return rng


def _iterator_ranges(consumer: BlockRealize, dom: Mapping[Var, Range], analyzer: Analyzer) -> dict[Var, Range]:
    """The range of each iterator of ``consumer`` as the loops of ``dom`` sweep: its binding's
    values cut to its domain (the block runs only where every binding is in its domain). An
    iterator whose binding uses no loop of ``dom`` keeps its binding (a point)."""
    ranges: dict[Var, Range] = {}
    for iter_var, binding in zip(consumer.block.iter_vars, consumer.iter_values):
        if not uses_vars(binding, set(dom)):
            ranges[iter_var.var] = Range(binding, const(1, binding.dtype))
            continue
        low, high = eval_interval(binding, dom)
        dom_low = iter_var.dom.min
        dom_high = analyzer.simplify(iter_var.dom.min + iter_var.dom.extent - 1)
        # max(low, dom_low) .. min(high, dom_high), or a provable superset of it.
        low = low if analyzer.can_prove(low >= dom_low) else dom_low
        high = high if analyzer.can_prove(high <= dom_high) else dom_high
        ranges[iter_var.var] = Range(low, analyzer.simplify(high - low + 1))
    return ranges


def _tighter(first: Range, second: Range, inner_vars: Sequence[Var], analyzer: Analyzer) -> Range:
    """Per end, the tighter of two hulls of one region, where provable; ``first`` otherwise.
    A ``second`` that names a loop inside the scope (an iterator domain that does) is not used."""
    if uses_vars(second.min, inner_vars) or uses_vars(second.extent, inner_vars):
        return first
    first_end = analyzer.simplify(first.min + first.extent)
    second_end = analyzer.simplify(second.min + second.extent)
    low = second.min if analyzer.can_prove(second.min > first.min) else first.min
    end = second_end if analyzer.can_prove(second_end < first_end) else first_end
    if low is first.min and end is first_end:
        return first
    return Range(low, analyzer.simplify(end - low))


def access_region(
    index: TreeIndex,
    scope: BlockRealize,
    consumers: list[BlockRealize],
    buffer: Buffer,
    primitive: str,
    within: Stmt | None = None,
    clamp: bool = True,
    field: str = "reads",
) -> tuple[Range, ...]:
    """The hull of what ``consumers`` read of ``buffer`` (``field="writes"``: write), over the
    loops inside ``scope`` (or inside ``within``, a statement sequence in it: the loops around
    it stay symbolic); kept inside the buffer unless ``clamp`` is false.

    Each dimension is the tighter of two hulls of the read region: with the bindings
    substituted and the loops swept (exact where the bindings are correlated), and with each
    iterator swept over its binding's values cut to its domain. The second honours the
    ``T.where`` of a split loop whose last tile runs past the iterator's extent: the block
    never runs there, so nothing it would read there was written (``region-cover``)."""
    region: tuple[Range, ...] | None = None
    outer = outer_analyzer(index, scope, within)
    for consumer in consumers:
        dom: dict[Var, Range] = {}
        inner_vars: list[Var] = []
        for node in path_to_scope(index, consumer, scope, within):
            if isinstance(node, For):
                dom[node.loop_var] = Range(node.min, node.extent)
                inner_vars.append(node.loop_var)
            elif isinstance(node, LetStmt):
                inner_vars.append(node.var)
        bindings = {iv.var: value for iv, value in zip(consumer.block.iter_vars, consumer.iter_values)}
        iter_dom = _iterator_ranges(consumer, dom, outer)
        for read in getattr(consumer.block, field):
            if read.buffer is not buffer:
                continue
            ranges = tuple(
                _full_if_loaded(
                    _tighter(
                        relax_range(
                            Range(substitute(rng.min, bindings), substitute(rng.extent, bindings)), dom, extent
                        ),
                        relax_range(rng, iter_dom, extent),
                        inner_vars,
                        outer,
                    ),
                    extent,
                )
                for rng, extent in zip(read.region, buffer.shape)
            )
            for rng in ranges:
                if uses_vars(rng.min, inner_vars) or uses_vars(rng.extent, inner_vars):
                    raise ScheduleError(
                        primitive,
                        block_target(consumer),
                        f"cannot express the region of {buffer.name} it {field[:-1]}s outside its loops",
                        read,
                    )
            if region is None:
                region = ranges
            else:
                merged = union_regions(region, ranges, buffer.shape)
                assert isinstance(merged, tuple)
                region = merged
    assert region is not None
    return clamp_region(region, buffer.shape, outer) if clamp else region


def union_over_loops(region: Sequence[Range], loops: Sequence[For], analyzer: Analyzer) -> list[Range] | str:
    """The union of the boxes ``region`` (in terms of the variables of ``loops``) over all
    iterations of ``loops``, exactly, as one box; or why it cannot be proved one.

    Per dimension the start must be a sum of loop variables times positive constants and the
    extent free of them, each loop feeding one dimension at most. Taking the loops by
    increasing step, each step must be at most what the smaller steps cover (no gap); loops
    feeding no dimension repeat the same boxes. Every loop must run at least once.
    """
    loop_of = {loop.loop_var: loop for loop in loops}
    loop_vars = set(loop_of)
    for loop in loops:
        name = loop.loop_var.name
        if uses_vars(loop.min, loop_vars) or uses_vars(loop.extent, loop_vars):
            return f"loop {name} has bounds that depend on other loops"
        if not analyzer.can_prove(loop.extent >= 1):
            return f"loop {name} may run no iteration"
    fed: dict[Var, int] = {}
    union: list[Range] = []
    for dim, rng in enumerate(region):
        if uses_vars(rng.extent, loop_vars):
            return f"the extent {rng.extent} of index {dim} changes with the loops"
        start = simplify(rng.min)
        form = linear_form(start, loop_vars)
        if form is None:
            return f"index {dim} starts at {start}, not a sum of loop variables times constants"
        coeffs, base = form
        covered = rng.extent
        for var, coeff in sorted(coeffs.items(), key=lambda item: item[1]):
            name = var.name
            if var in fed:
                return f"loop {name} feeds indices {fed[var]} and {dim}"
            fed[var] = dim
            loop = loop_of[var]
            if coeff <= 0:
                return f"index {dim} decreases with loop {name}"
            step = const(coeff, covered.dtype)
            if not analyzer.can_prove(step <= covered):
                return f"loop {name} steps index {dim} by {coeff}, more than the {covered} it covers inside: a gap"
            base = base + const(coeff, base.dtype) * as_dtype(loop.min, base)
            covered = analyzer.simplify(step * (as_dtype(loop.extent, covered) - 1) + covered)
        union.append(Range(analyzer.simplify(base), covered))
    return union


def show_range(rng: Range) -> str:
    """``[min, end)`` for error messages."""
    return f"[{rng.min}, {simplify(rng.min + rng.extent)})"


def first_not_contained(outer: Sequence[Range], inner: Sequence[Range], analyzer: Analyzer) -> int | None:
    """The first dimension where ``inner`` is not provably inside ``outer`` (None: none)."""
    for dim, (big, small) in enumerate(zip(outer, inner)):
        low = as_dtype(small.min, big.min)
        end = as_dtype(small.min + small.extent, big.min)
        if not (analyzer.can_prove(low >= big.min) and analyzer.can_prove(end <= big.min + big.extent)):
            return dim
    return None


class _AccessesOutside(Accesses):
    """``Accesses`` leaving out the statements (by identity) in ``skip_nodes``."""

    def __init__(self, buffer: Buffer, skip_nodes: frozenset[int]) -> None:
        super().__init__(buffer)
        self.skip_nodes = skip_nodes

    def visit(self, node: object) -> None:
        if node is not None and id(node) in self.skip_nodes:
            return
        super().visit(node)


def writes_outside(node: Stmt, buffer: Buffer, skip_nodes: frozenset[int]) -> bool:
    visitor = _AccessesOutside(buffer, skip_nodes)
    visitor.visit(node)
    return visitor.writes


def direct_access(stmt: Stmt, buffer: Buffer) -> bool:
    """Whether ``stmt`` loads or stores ``buffer`` outside the blocks in it."""
    found = False

    class Find(IRVisitor):
        def visit_BlockRealize(self, realize: BlockRealize) -> None:
            pass

        def visit_BufferLoad(self, load: BufferLoad) -> None:
            nonlocal found
            found = found or load.buffer is buffer
            self.generic_visit(load)

        def visit_BufferStore(self, store: BufferStore) -> None:
            nonlocal found
            found = found or store.buffer is buffer
            self.generic_visit(store)

    Find().visit(stmt)
    return found


def linear_form(expr: PrimExpr, variables: set[Var]) -> tuple[dict[Var, int], PrimExpr] | None:
    """``expr`` as ``base + sum(coeff * var)`` over ``variables`` (None when not of that form)."""
    if not uses_vars(expr, variables):
        return {}, expr
    if isinstance(expr, Var):
        return {expr: 1}, const(0, expr.dtype)
    if isinstance(expr, (Add, Sub)):
        left, right = linear_form(expr.a, variables), linear_form(expr.b, variables)
        if left is None or right is None:
            return None
        sign = 1 if isinstance(expr, Add) else -1
        coeffs = dict(left[0])
        for var, coeff in right[0].items():
            coeffs[var] = coeffs.get(var, 0) + sign * coeff
        base = left[1] + right[1] if sign == 1 else left[1] - right[1]
        return {v: c for v, c in coeffs.items() if c != 0}, base
    if isinstance(expr, Mul):
        for scale, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(scale, IntImm):
                inner = linear_form(other, variables)
                if inner is None:
                    return None
                return {v: c * scale.value for v, c in inner[0].items() if c * scale.value != 0}, inner[1] * scale
        return None
    return None
