"""Helpers shared by compute_at / reverse_compute_at and compute_inline / reverse_compute_inline.

- ``detachable_nest``: the block together with the loops that hold nothing else, and a check
  that it sits in a statement sequence it can be taken out of.
- ``check_domain_predicate``: a block's ``T.where`` may only bound its iterators to their
  domains (what ``split`` adds), because these primitives rebuild the predicate.
- ``point_index_map``: which iterator (plus which offset) each dimension of a one-element
  access is, so that the access can be inverted.
- ``blocks_in_order`` / ``shares_loop``: program order and loop nesting of blocks, for the
  dependence rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tir.analysis.tree import TreeIndex, child_stmts
from tir.arith import Analyzer
from tir.arith.iter_map import detect_iter_map
from tir.ir import (
    GE,
    GT,
    LE,
    LT,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    For,
    IntImm,
    IterKind,
    PrimExpr,
    Range,
    SeqStmt,
    Stmt,
    Var,
    as_dtype,
    free_vars,
    substitute,
)
from tir.ir.expr import conjunction
from tir.schedule.errors import ScheduleError
from tir.schedule.primitives._common import block_target


def is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value != 0


def conjuncts(expr: PrimExpr) -> list[PrimExpr]:
    if isinstance(expr, And):
        return conjuncts(expr.a) + conjuncts(expr.b)
    return [expr]


# ---------------------------------------------------------------- nests


def detachable_nest(index: TreeIndex, realize: BlockRealize, primitive: str) -> Stmt:
    """The outermost statement holding ``realize`` and nothing else (the block and the loops
    that contain only it). Refuses when it is not an item of a statement sequence, since
    taking it out would leave its parent without a body."""
    node: Stmt = realize
    parent = index.parent_of(node)
    while isinstance(parent, For) and parent.body is node:
        node = parent
        parent = index.parent_of(node)
    if not isinstance(parent, SeqStmt):
        raise ScheduleError(
            primitive,
            block_target(realize),
            "the block and its loops are the only statement of their parent, so they cannot be taken out",
            parent if parent is not None else realize,
        )
    return node


def blocks_in_order(index: TreeIndex) -> list[BlockRealize]:
    """Every block realize of the function, in program (pre-)order."""
    found: list[BlockRealize] = []

    def walk(node: Stmt) -> None:
        if isinstance(node, BlockRealize):
            found.append(node)
            block = node.block
            if block.init is not None:
                walk(block.init)
            walk(block.body)
            return
        for child in child_stmts(node):
            walk(child)

    walk(index.func.body)
    return found


def context_dom(index: TreeIndex, stmt: Stmt) -> dict[Var, Range]:
    """Ranges of every loop around ``stmt`` and of the iterators of every block around it."""
    dom: dict[Var, Range] = {}
    for node in index.ancestors(stmt):
        if isinstance(node, For):
            dom[node.loop_var] = Range(node.min, node.extent)
        elif isinstance(node, Block):
            for iter_var in node.iter_vars:
                dom[iter_var.var] = iter_var.dom
    return dom


def enclosing_loops(index: TreeIndex, stmt: Stmt) -> list[For]:
    """Every loop around ``stmt``, across block boundaries."""
    return [node for node in index.ancestors(stmt) if isinstance(node, For)]


def shares_loop(index: TreeIndex, a: Stmt, b: Stmt) -> bool:
    """Whether some loop encloses both ``a`` and ``b``."""
    around_a = {id(loop) for loop in enclosing_loops(index, a)}
    return any(id(loop) in around_a for loop in enclosing_loops(index, b))


def reads_buffer(block: Block, buffer: Buffer) -> bool:
    return any(region.buffer is buffer for region in block.reads)


def writes_buffer(block: Block, buffer: Buffer) -> bool:
    return any(region.buffer is buffer for region in block.writes)


# ---------------------------------------------------------------- predicates


def check_domain_predicate(primitive: str, realize: BlockRealize, dom_map: dict[Var, Range]) -> None:
    """Refuse a ``T.where`` that does more than keep iterators inside their domains.

    Each conjunct must compare one iterator's binding plus a constant with a constant, and
    follow from that iterator's domain (``i_0 * 32 + i_1 < 100`` for ``vi`` in ``[0, 100)``).
    Such a predicate only undoes a split's overshoot, so a primitive that regenerates the
    block's loops may replace it by bounds of its own.
    """
    if is_true(realize.predicate):
        return
    analyzer = Analyzer()
    for var, dom in dom_map.items():
        analyzer.bind(var, dom)
    for condition in conjuncts(realize.predicate):
        if not _is_domain_bound(condition, realize, analyzer):
            raise ScheduleError(
                primitive,
                block_target(realize),
                "the block's predicate (T.where) restricts more than its iterator domains; "
                "its instances cannot be regenerated",
                realize.predicate,
            )


def iterator_predicate(primitive: str, realize: BlockRealize, dom_map: dict[Var, Range]) -> PrimExpr:
    """The part of a block's ``T.where`` that is more than domain bounds, over the block's own
    iterators, for a primitive that regenerates its loops and keeps that part: the predicate
    of a row reduction's lane partials, ``k_0 * 16 + k_1 < 750``, which skips the last vector's
    two missing lanes, becomes ``vk_0 * 16 + vk_1 < 750``. A conjunct can be kept when every
    loop it names is some iterator's whole binding (the iterator is then the loop's value in
    every instance); others are refused as in ``check_domain_predicate``. True when the
    predicate only bounds the domain."""
    if is_true(realize.predicate):
        return conjunction([])
    analyzer = Analyzer()
    for var, dom in dom_map.items():
        analyzer.bind(var, dom)
    iterator_of = {
        value: iter_var.var
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
        if isinstance(value, Var) and iter_var.kind is not IterKind.OPAQUE
    }
    kept: list[PrimExpr] = []
    for condition in conjuncts(realize.predicate):
        if _is_domain_bound(condition, realize, analyzer):
            continue
        if not set(free_vars(condition)) <= set(iterator_of):
            raise ScheduleError(
                primitive,
                block_target(realize),
                "the block's predicate (T.where) restricts more than its iterator domains, over loops that "
                "are not its iterators' whole bindings; its instances cannot be regenerated",
                realize.predicate,
            )
        kept.append(substitute(condition, {var: iterator_of[var] for var in free_vars(condition)}))
    return conjunction(kept)


def _is_domain_bound(condition: PrimExpr, realize: BlockRealize, analyzer: Analyzer) -> bool:
    if not isinstance(condition, (LT, LE, GT, GE)) or not as_dtype(condition.a.dtype).is_integer:
        return False  # a data guard (T.where(B[i] < 10.0)) bounds no iterator
    difference = analyzer.simplify(condition.a - condition.b)
    for iter_var, binding in zip(realize.block.iter_vars, realize.iter_values):
        for sign in (1, -1):
            offset = analyzer.simplify(difference - binding * sign)
            if not isinstance(offset, IntImm):
                continue
            # condition <=> sign * v + offset  OP  0, for v the iterator.
            v = Var("v", binding.dtype)
            checker = Analyzer()
            checker.bind(v, iter_var.dom)
            rebuilt = type(condition)(v * sign + offset, IntImm(0, binding.dtype))
            if checker.can_prove(rebuilt):
                return True
    return False


# ---------------------------------------------------------------- index maps


@dataclass(frozen=True)
class DimMap:
    """Dimension ``dim`` of an access is ``var + offset`` (``offset`` free of the block's
    iterators)."""

    dim: int
    var: Var
    offset: PrimExpr


def point_index_map(indices: Sequence[PrimExpr], block: Block, analyzer: Analyzer) -> tuple[list[DimMap], list[int]]:
    """Split the dimensions of an access into ``iterator + offset`` ones and the rest.

    Returns the simple dimensions and the indices of the dimensions that mention an iterator
    of ``block`` in any other way.
    """
    own = {iv.var for iv in block.iter_vars}
    simple: list[DimMap] = []
    complex_dims: list[int] = []
    for dim, index in enumerate(indices):
        used = set(free_vars(index)) & own
        if not used:
            continue
        if len(used) == 1:
            var = next(iter(used))
            offset = analyzer.simplify(index - var)
            if not (set(free_vars(offset)) & own):
                simple.append(DimMap(dim, var, offset))
                continue
        complex_dims.append(dim)
    return simple, complex_dims


def region_point_indices(region: BufferRegion) -> list[PrimExpr] | None:
    """The indices of a one-element region, or None when a dimension is wider."""
    indices = []
    for rng in region.region:
        if not (isinstance(rng.extent, IntImm) and rng.extent.value == 1):
            return None
        indices.append(rng.min)
    return indices


def iter_kinds(block: Block) -> tuple[list[Var], list[Var], list[Var]]:
    """The spatial, reduce and opaque iterators of ``block``."""
    spatial = [iv.var for iv in block.iter_vars if iv.kind is IterKind.SPATIAL]
    reduce = [iv.var for iv in block.iter_vars if iv.kind is IterKind.REDUCE]
    opaque = [iv.var for iv in block.iter_vars if iv.kind is IterKind.OPAQUE]
    return spatial, reduce, opaque


# ---------------------------------------------------------------- instance sets


def instance_ranges(index: TreeIndex, realize: BlockRealize, fixed: Sequence[For] = ()) -> list[Range] | None:
    """The values each iterator of the block takes as its loops run, or None when they are
    not known to form a box.

    The loops between the block and its scope block sweep, except those in ``fixed`` (loops
    the caller compares per iteration), which stay symbolic like everything outside the scope.
    The result is a box exactly: the bindings are quasi-affine, independent and without gaps
    (``detect_iter_map``, "surjective"), and the predicate is accounted for. Opaque iterators
    are not described, so a block with one gives None.
    """
    if any(iv.kind is IterKind.OPAQUE for iv in realize.block.iter_vars):
        return None
    if not realize.block.iter_vars:
        return []
    return swept_image(index, realize, list(realize.iter_values), fixed)


def swept_image(
    index: TreeIndex, realize: BlockRealize, exprs: Sequence[PrimExpr], fixed: Sequence[For] = ()
) -> list[Range] | None:
    """The box of values ``exprs`` (of the loop variables around the block) take as the
    instances of the block run, or None when it is not known to be a box; loops as in
    ``instance_ranges``. With the block's store index (its bindings substituted), this is what
    a block writes even where its instances are not a box (a tile grid cut by ``T.where``).
    """
    fixed_ids = {id(loop) for loop in fixed}
    sweep: dict[Var, Range] = {}
    known: dict[Var, Range] = {}
    for var, dom in context_dom(index, realize).items():
        known[var] = dom
    for loop in index.loops_above(realize):
        if id(loop) not in fixed_ids:
            sweep[loop.loop_var] = Range(loop.min, loop.extent)
            known.pop(loop.loop_var, None)
    # A nest whose bounds depend on its own loops is not a box of loop points.
    for loop in index.loops_above(realize):
        if set(free_vars((loop.min, loop.extent))) & set(sweep):
            return None
    # A conjunct on the fixed loops alone says in which of their iterations the block runs at
    # all, which a box per iteration cannot say: it must hold always.
    analyzer = Analyzer()
    for var, dom in known.items():
        analyzer.bind(var, dom)
    swept: list[PrimExpr] = []
    for condition in conjuncts(realize.predicate):
        if set(free_vars(condition)) & set(sweep):
            swept.append(condition)
        elif not analyzer.can_prove(condition):
            return None
    result = detect_iter_map(list(exprs), sweep, conjunction(swept), "surjective", known)
    if not result.ok or not result.predicate_applied:
        return None
    return list(result.ranges)


def image_ranges(
    indices: Sequence[PrimExpr], dom: dict[Var, Range], known: dict[Var, Range] | None = None
) -> list[Range] | None:
    """The box of values ``indices`` take as the variables of ``dom`` sweep their ranges, or
    None when it is not a box (an index with gaps, two indices sharing a variable)."""
    sweep = {var: rng for var, rng in dom.items() if any(var in free_vars(i) for i in indices)}
    result = detect_iter_map(list(indices), sweep, True, "surjective", known or {})
    if not result.ok:
        return None
    return list(result.ranges)
