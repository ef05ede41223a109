"""Rules ``binding`` and ``reduction-binding``: how blocks are bound to their loops.

``binding``, for every block with iterators, over the loops between it and its parent block
(variables bound outside that scope, such as the parent's iterators, are constants here):

- The bindings of the spatial and reduce iterators are quasi-affine and independent:
  ``tir.arith.detect_iter_map(..., predicate=block predicate, check_level="surjective")``
  succeeds (``v1 = i, v2 = i * 2`` fails; ``v1 = i // 4, v2 = i % 4`` passes). Opaque
  iterators are exempt; constants are fine. A nest whose loop ranges depend on other loops
  of the scope is not judged.
- Every binding stays inside its iterator's domain, for every value of the outer variables
  (relaxed over their ranges): a provable excursion is reported.
- A reduce iterator's binding reaches its whole domain over the loops, predicate aside (the
  reduction is complete; a predicate may still skip instances, as ``rfactor`` of a padded
  split does). Spatial iterators may cover part of their domains: a cache of a window or a block moved under a loop by
  ``compute_at`` computes a sub-region, which is how those primitives work.
- A block with reduce iterators runs each instance once per reduction: every loop from the
  outermost loop a reduce binding uses inward has all of its iterations used by the
  bindings, and the bindings using such loops do not overlap. (Unused or overlapping loops
  further out merely recompute the whole reduction, which is allowed, as for spatial blocks.)
- A block with ``T.init()`` runs its init before every update of the same output element:
  the instance where the reduce iterators start comes first, in the loops' execution order,
  among the instances of each spatial point (``tir.analysis.init_order``; reported when an
  enumeration of the nest shows an update running first, which loops fusing spatial with
  reduce iterators out of order can do).

A predicate conjunct that loads from a buffer (``T.where(B[i, j] < 10.0)``) is a data guard:
it skips instances at run time, so the rules above judge the bindings without it; each element
it loads must lie in a read region the block declares (at the same instance), which keeps
every dependence and region computed from the declared reads true for the guard.

When the predicate cannot be related to the bindings, the value ranges iter-map reports are
supersets; an excursion is then confirmed by enumerating the loop nest (up to 2**16 points)
or not reported.

``reduction-binding``: a loop whose variable appears in a reduce iterator's binding is not
``parallel`` or ``vectorized``, and is not thread-bound, unless the block carries the annotation ``{"cross_thread_reduction":
True}``: then ``threadIdx.*`` loops are allowed (the block is lowered as a cross-thread
reduction), ``blockIdx.*`` / ``vthread.*`` loops still are not.
"""

from __future__ import annotations

import numpy as np

from tir.analysis.init_order import init_order_problem
from tir.analysis.verify._context import BlockInfo, Program, Violation, block_target, fragment, loop_target
from tir.arith.int_set import eval_interval
from tir.arith.iter_map import IterMapResult, detect_iter_map
from tir.arith.simplify import Analyzer
from tir.ir.buffer import Range
from tir.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    IterKind,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Sub,
    Var,
    conjunction,
    conjuncts,
)
from tir.ir.functor import buffer_loads, substitute
from tir.ir.stmt import For, ForKind

RULE = "binding"
REDUCTION_RULE = "reduction-binding"

#: Loop nests up to this many points are enumerated to confirm a suspected excursion.
ENUMERATION_LIMIT = 1 << 16

#: The block annotation that allows reduce loops bound to threadIdx.
CROSS_THREAD_REDUCTION = "cross_thread_reduction"


def _vars_of(expr: PrimExpr) -> dict[int, Var]:
    found: dict[int, Var] = {}

    def visit(node: object) -> None:
        if isinstance(node, Var):
            found[id(node)] = node
        elif isinstance(node, PrimExpr):
            for name in type(node).child_fields():
                value = getattr(node, name)
                for item in value if isinstance(value, tuple) else (value,):
                    visit(item)

    visit(expr)
    return found


def _outer_ranges(info: BlockInfo) -> dict[Var, Range]:
    """Ranges of the variables bound outside the block's scope: enclosing loops beyond the
    parent block and the iterators of enclosing blocks."""
    ranges: dict[Var, Range] = {}
    scope_loops = {id(loop) for loop in info.loops}
    for loop in info.all_loops:
        if id(loop) not in scope_loops:
            ranges[loop.loop_var] = Range(loop.min, loop.extent)
    parent = info.parent
    while parent is not None:
        for iv in parent.block.iter_vars:
            ranges[iv.var] = iv.dom
        parent = parent.parent
    return ranges


def _enumerate(
    info: BlockInfo, values: list[PrimExpr], dom_map: dict[Var, Range], predicate: PrimExpr
) -> list[tuple[int, int]] | None:
    """(min, max) of each value over the scope loops where the predicate holds, by enumeration;
    None when the nest is too large, symbolic, or uses outer variables."""
    extents = []
    for var, dom in dom_map.items():
        if not isinstance(dom.min, IntImm) or not isinstance(dom.extent, IntImm):
            return None
        extents.append((var, dom.min.value, dom.extent.value))
    total = 1
    for _, _, extent in extents:
        total *= max(extent, 1)
    if total > ENUMERATION_LIMIT or total == 0:
        return None
    allowed = {id(var) for var, _, _ in extents}
    for expr in (*values, predicate):
        if any(var_id not in allowed for var_id in _vars_of(expr)):
            return None
    grids = np.meshgrid(*[np.arange(lo, lo + n) for _, lo, n in extents], indexing="ij") if extents else []
    env = {id(var): grid.reshape(-1).astype(np.int64) for (var, _, _), grid in zip(extents, grids)}
    count = int(total)
    try:
        keep = np.broadcast_to(_evaluate(predicate, env), (count,)).astype(bool)
        result = []
        for expr in values:
            column = np.broadcast_to(_evaluate(expr, env), (count,))[keep]
            if column.size == 0:
                return None
            result.append((int(column.min()), int(column.max())))
    except _Unsupported:
        return None
    return result


class _Unsupported(Exception):
    pass


def _evaluate(expr: PrimExpr, env: dict[int, object]) -> object:
    if isinstance(expr, IntImm):
        return np.int64(expr.value)
    if isinstance(expr, Var):
        return env[id(expr)]
    if isinstance(expr, Cast):
        return _evaluate(expr.value, env)
    if isinstance(expr, Not):
        return np.logical_not(_evaluate(expr.a, env))
    ops = {
        Add: np.add,
        Sub: np.subtract,
        Mul: np.multiply,
        FloorDiv: np.floor_divide,
        FloorMod: np.mod,
        Min: np.minimum,
        Max: np.maximum,
        LT: np.less,
        LE: np.less_equal,
        GT: np.greater,
        GE: np.greater_equal,
        NE: np.not_equal,
        EQ: np.equal,
        And: np.logical_and,
        Or: np.logical_or,
    }
    op = ops.get(type(expr))  # type: ignore[call-overload]
    if op is None:
        raise _Unsupported(type(expr).__name__)
    return op(_evaluate(expr.a, env), _evaluate(expr.b, env))  # type: ignore[attr-defined]


def size_vars(program: Program) -> dict[Var, Range]:
    """Variables of parameter buffer shapes: sizes, assumed at least 1 (a size-0 nest runs
    nothing, so nothing it would do can be wrong)."""
    found: dict[Var, Range] = {}
    for buffer in program.func.buffer_params:
        for extent in buffer.shape:
            for var in _vars_of(extent).values():
                found[var] = Range(IntImm(1, var.dtype), IntImm(var.dtype.max_value() - 1, var.dtype))
    return found


def _check_block(info: BlockInfo, out: list[Violation], size_ranges: dict[Var, Range]) -> None:
    realize = info.realize
    block = info.block
    if realize is None or not block.iter_vars:
        return
    target = block_target(block)
    dom_map = {loop.loop_var: Range(loop.min, loop.extent) for loop in info.loops}
    scope_ids = {id(var) for var in dom_map}
    for loop in info.loops:
        if any(var_id in scope_ids for var_id in (*_vars_of(loop.min), *_vars_of(loop.extent))):
            return  # a non-rectangular nest: not judged
    judged = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values) if iv.kind is not IterKind.OPAQUE]
    if not judged:
        return
    known = {**size_ranges, **_outer_ranges(info)}
    predicate, guards = _split_predicate(realize.predicate)
    if guards and not _guards_read_declared(info, guards, dom_map, known, out):
        return
    result = detect_iter_map([value for _, value in judged], dom_map, predicate, "surjective", known)
    if not result.ok:
        out.append(
            Violation(
                RULE,
                target,
                "the bindings are not quasi-affine and independent: " + "; ".join(result.errors),
                fragment(realize),
            )
        )
        return
    _check_domains(info, judged, result, dom_map, out, size_ranges, predicate)
    if any(iv.kind is IterKind.REDUCE for iv, _ in judged):
        _check_single_reduction(info, judged, result, out)
        _check_init_order(info, out, size_ranges)


def _split_predicate(predicate: PrimExpr) -> tuple[PrimExpr, list[PrimExpr]]:
    """The predicate's conjuncts over indices only (they bound the iteration, judged with the
    bindings) and its data guards (conjuncts that load from a buffer, ``T.where(B[i, j] <
    10.0)``: they skip instances at run time, so the bindings are judged without them)."""
    index_part, guards = [], []
    for term in conjuncts(predicate):
        (guards if buffer_loads(term) else index_part).append(term)
    return conjunction(index_part), guards


def _guards_read_declared(
    info: BlockInfo, guards: list[PrimExpr], dom_map: dict[Var, Range], known: dict[Var, Range], out: list[Violation]
) -> bool:
    """Whether every element a data guard loads lies in a read region the block declares (at
    the same instance), so that dependences and regions computed from the declared reads hold
    for the guard too; a violation is reported otherwise."""
    realize = info.realize
    assert realize is not None
    bindings = {iv.var: value for iv, value in zip(info.block.iter_vars, realize.iter_values)}
    analyzer = Analyzer()
    for var, dom in {**known, **dom_map}.items():
        analyzer.bind(var, dom)
    for guard in guards:
        for load in buffer_loads(guard):
            covered = any(
                region.buffer is load.buffer
                and len(region.region) == len(load.indices)
                and all(
                    analyzer.can_prove(substitute(rng.min, bindings) <= index)
                    and analyzer.can_prove(index < substitute(rng.min + rng.extent, bindings))
                    for rng, index in zip(region.region, load.indices)
                )
                for region in info.block.reads
            )
            if not covered:
                out.append(
                    Violation(
                        RULE,
                        block_target(info.block),
                        f"the predicate loads {load}, which no read region the block declares covers: declare it in "
                        "T.reads so that the block's dependences include it",
                        fragment(realize),
                    )
                )
                return False
    return True


def _check_init_order(info: BlockInfo, out: list[Violation], size_ranges: dict[Var, Range]) -> None:
    """A shown init-order problem (``tir.analysis.init_order``): an update of some output
    element runs before the init. What is only not provable is not reported."""
    if info.block.init is None:
        return
    chain = []
    node: BlockInfo | None = info
    while node is not None and node.realize is not None:
        chain.append((node.realize, node.loops))
        node = node.parent
    problem = init_order_problem(chain, size_ranges)
    if problem is not None and problem.definite:
        out.append(Violation(RULE, block_target(info.block), problem.message(), fragment(info.realize)))


def _check_domains(
    info: BlockInfo,
    judged: list[tuple[object, PrimExpr]],
    result: IterMapResult,
    dom_map: dict[Var, Range],
    out: list[Violation],
    size_ranges: dict[Var, Range],
    predicate: PrimExpr,
) -> None:
    realize = info.realize
    assert realize is not None
    outer = _outer_ranges(info)
    analyzer = Analyzer()
    for var, dom in size_ranges.items():
        analyzer.bind(var, dom)
    for var, dom in {**outer, **dom_map}.items():
        analyzer.bind(var, dom)
    enumerated: list[tuple[int, int]] | None | bool = False  # False: not tried yet
    for k, ((iv, value), image) in enumerate(zip(judged, result.ranges)):
        dom = iv.dom  # type: ignore[attr-defined]
        first = analyzer.simplify(image.min)
        last = analyzer.simplify(image.min + image.extent - 1)
        low, _ = eval_interval(first, outer)
        _, high = eval_interval(last, outer)
        dom_last = analyzer.simplify(dom.min + dom.extent - 1)
        # Relaxed ends bound the values from outside; they prove an excursion only when exact.
        outside = (_exact_relaxation(first, outer) and analyzer.can_prove(low < dom.min)) or (
            _exact_relaxation(last, outer) and analyzer.can_prove(high > dom_last)
        )
        if outside and not result.predicate_applied:
            if enumerated is False:
                enumerated = _enumerate(info, [v for _, v in judged], dom_map, predicate)
            if enumerated is None:
                outside = False
            else:
                lo, hi = enumerated[k]  # type: ignore[index]
                outside = analyzer.can_prove(IntImm(lo, dom.min.dtype) < dom.min) or analyzer.can_prove(
                    IntImm(hi, dom.min.dtype) > dom_last
                )
        name = iv.var.name  # type: ignore[attr-defined]
        witness = None
        if not outside and (result.predicate_applied or _is_true(predicate)):
            # Sizes are symbolic: an excursion for some sizes only (a split tail without a
            # predicate) is not provable for all of them; a concrete size showing it is reported.
            exact_low, exact_high = _exact_relaxation(first, outer), _exact_relaxation(last, outer)
            witness = _size_witness(
                low if exact_low else None, high if exact_high else None, dom.min, dom_last, size_ranges, analyzer
            )
        if witness is not None:
            sizes, span = witness
            out.append(
                Violation(
                    RULE,
                    block_target(info.block),
                    f"the binding of {name} ({value}) takes values outside its domain [{dom.min}, {dom_last}] "
                    f"for some sizes ({sizes}: its values span [{span[0]}, {span[1]}]); a split of a symbolic "
                    "extent needs a predicate (T.where) that keeps its tail inside",
                    fragment(realize),
                )
            )
            continue
        if outside:
            out.append(
                Violation(
                    RULE,
                    block_target(info.block),
                    f"the binding of {name} ({value}) takes values outside its domain "
                    f"[{dom.min}, {dom_last}] (its values span [{low}, {high}])",
                    fragment(realize),
                )
            )
            continue
        if iv.kind is IterKind.REDUCE:  # type: ignore[attr-defined]
            # What the loops can reach, predicate aside (a predicate states which instances
            # do not run): a hull of the values, so a shortfall of it is a real one.
            reach_low, reach_high = eval_interval(value, {**outer, **dom_map})
            short = analyzer.can_prove(reach_low > dom.min) or analyzer.can_prove(reach_high < dom_last)
            if short:
                out.append(
                    Violation(
                        RULE,
                        block_target(info.block),
                        f"the binding of the reduce iterator {name} ({value}) reaches only "
                        f"[{reach_low}, {reach_high}] of its domain [{dom.min}, {dom_last}]: the reduction is incomplete",
                        fragment(realize),
                    )
                )


#: Values tried for each size variable when looking for a size that shows an excursion.
_WITNESS_SIZES = (*range(1, 18), 31, 32, 33, 63, 64, 65, 100, 127, 128, 129)


def _size_witness(
    low: PrimExpr | None,
    high: PrimExpr | None,
    dom_min: PrimExpr,
    dom_last: PrimExpr,
    size_ranges: dict[Var, Range],
    analyzer: Analyzer,
) -> tuple[str, tuple[int, int]] | None:
    """Sizes (``"n = 5"``) for which ``[low, high]`` leaves ``[dom_min, dom_last]``, and the
    values there; None when the ends are provably inside, depend on more than sizes (or on
    more than three), or no tried size leaves the domain."""
    if (low is None or analyzer.can_prove(low >= dom_min)) and (high is None or analyzer.can_prove(high <= dom_last)):
        return None
    ends = [end for end in (low, high, dom_min, dom_last) if end is not None]
    used: dict[int, Var] = {}
    for end in ends:
        used.update(_vars_of(end))
    size_ids = {id(var) for var in size_ranges}
    if not used or len(used) > 3 or any(var_id not in size_ids for var_id in used):
        return None
    variables = list(used.values())
    grids = np.meshgrid(*[np.array(_WITNESS_SIZES, dtype=np.int64)] * len(variables), indexing="ij")
    env: dict[int, object] = {id(var): grid.reshape(-1) for var, grid in zip(variables, grids)}
    count = grids[0].size
    try:
        values = {
            id(end): np.broadcast_to(np.asarray(_evaluate(end, env), dtype=np.int64), (count,))
            for end in (low, high, dom_min, dom_last)
            if end is not None
        }
    except _Unsupported:
        return None
    bad = np.zeros(count, dtype=bool)
    if low is not None:
        bad |= values[id(low)] < values[id(dom_min)]
    if high is not None:
        bad |= values[id(high)] > values[id(dom_last)]
    if not bad.any():
        return None
    first = int(np.argmax(bad))
    sizes = ", ".join(f"{var.name} = {int(env[id(var)][first])}" for var in variables)  # type: ignore[index]
    span_low = int(values[id(low)][first]) if low is not None else int(values[id(dom_min)][first])
    span_high = int(values[id(high)][first]) if high is not None else int(values[id(dom_last)][first])
    return sizes, (span_low, span_high)


def _is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


def _exact_relaxation(expr: PrimExpr, relaxed: dict[Var, Range]) -> bool:
    """Whether relaxing ``expr`` over ``relaxed`` gives its exact extremes: a sum of
    constant multiples of variables, each relaxed variable appearing once."""
    relaxed_ids = {id(var) for var in relaxed}
    seen: set[int] = set()

    def linear(node: PrimExpr) -> bool:
        if isinstance(node, IntImm):
            return True
        if isinstance(node, Var):
            if id(node) in relaxed_ids:
                if id(node) in seen:
                    return False
                seen.add(id(node))
            return True
        if isinstance(node, (Add, Sub)):
            return linear(node.a) and linear(node.b)
        if isinstance(node, Mul):
            if isinstance(node.b, IntImm):
                return linear(node.a)
            if isinstance(node.a, IntImm):
                return linear(node.b)
            return not any(var_id in relaxed_ids for var_id in _vars_of(node))
        return not any(var_id in relaxed_ids for var_id in _vars_of(node))

    return linear(expr)


def _check_single_reduction(
    info: BlockInfo, judged: list[tuple[object, PrimExpr]], result: IterMapResult, out: list[Violation]
) -> None:
    realize = info.realize
    assert realize is not None
    position = {id(loop.loop_var): k for k, loop in enumerate(info.loops)}
    reduce_positions = [
        position[id(var)]
        for (iv, _), used in zip(judged, result.binding_vars)
        if iv.kind is IterKind.REDUCE  # type: ignore[attr-defined]
        for var in used
        if id(var) in position
    ]
    if not reduce_positions:
        return
    first = min(reduce_positions)
    inner = {id(loop.loop_var): loop for loop in info.loops[first:]}
    opaque_vars: set[int] = set()
    for iv, value in zip(info.block.iter_vars, realize.iter_values):
        if iv.kind is IterKind.OPAQUE:
            opaque_vars.update(_vars_of(value))
    for var in result.unused_vars:
        loop = inner.get(id(var))
        if loop is not None and id(var) not in opaque_vars:
            out.append(
                Violation(
                    RULE,
                    block_target(info.block),
                    f"not every iteration of {loop_target(loop)} is used by the bindings, and it runs inside "
                    "the reduction: reduction instances would run more than once",
                    fragment(realize),
                )
            )
            return
    for (iv, value), exact, used in zip(judged, result.exact, result.binding_vars):
        if not exact and any(id(var) in inner for var in used):
            out.append(
                Violation(
                    RULE,
                    block_target(info.block),
                    f"the binding of {iv.var.name} ({value}) overlaps itself inside the reduction: "  # type: ignore[attr-defined]
                    "reduction instances would run more than once",
                    fragment(realize),
                )
            )
            return


def _reduce_loops(info: BlockInfo) -> list[For]:
    """The enclosing loops whose variables appear in the reduce iterators' bindings."""
    loop_of = {id(loop.loop_var): loop for loop in info.all_loops}
    assert info.realize is not None
    found: dict[int, For] = {}
    for iv, value in zip(info.block.iter_vars, info.realize.iter_values):
        if iv.kind is IterKind.REDUCE:
            for var_id in _vars_of(value):
                if var_id in loop_of:
                    found.setdefault(var_id, loop_of[var_id])
    return list(found.values())


def _check_reduction_loops(info: BlockInfo, out: list[Violation]) -> None:
    if info.realize is None or not any(iv.kind is IterKind.REDUCE for iv in info.block.iter_vars):
        return
    cross_thread = info.block.annotations.get(CROSS_THREAD_REDUCTION) is True
    for loop in _reduce_loops(info):
        if loop.kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
            reason = f"is {loop.kind.value}"
        elif loop.kind is ForKind.THREAD_BINDING:
            tag = loop.thread_tag or ""
            if cross_thread and tag.startswith("threadIdx"):
                continue
            reason = f"is bound to {tag}"
            if tag.startswith("threadIdx"):
                reason += f' (allowed only in a block annotated {{"{CROSS_THREAD_REDUCTION}": True}})'
        else:
            continue
        out.append(
            Violation(
                REDUCTION_RULE,
                block_target(info.block),
                f"{loop_target(loop)} feeds a reduce iterator but {reason}: its iterations would race on the result",
                fragment(info.realize),
            )
        )


def check_bindings(program: Program) -> list[Violation]:
    """The ``binding`` and ``reduction-binding`` violations of the walked program."""
    out: list[Violation] = []
    sizes = size_vars(program)
    for info in program.blocks:
        _check_block(info, out, sizes)
        _check_reduction_loops(info, out)
    return out
