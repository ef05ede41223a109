"""Checks shared by the loop primitives (reorder) and the loop-kind primitives (parallel,
vectorize, bind): may the iterations of some loops run in another order, or at once?

Changing the order of loop iterations is safe when the instances it reorders do not depend on
each other. Blocks say so through their iterator kinds: instances of one block that differ in
a spatial iterator are independent, instances that differ in a reduction iterator accumulate
(order-insensitive up to rounding), and an opaque iterator promises nothing. Between two
different blocks under the loops nothing is promised, so ``check_disjoint_footprints`` proves
that different iterations touch disjoint parts of every buffer one block writes and another
block accesses.

The proof looks, per buffer dimension, for a *window*: every access region of the buffer in
that dimension is ``[K(v) + a, K(v) + b)`` for one key expression ``K`` of the loop variables
``v`` and offsets ``a < b`` free of them, and the regions together are narrower than the gap
between two different values of ``K`` (the gcd of its coefficients). Two iterations whose keys
differ then touch disjoint windows; the iterations are independent when the keys of the
windowed dimensions together tell every iteration apart (a mixed-radix check on linear keys,
iterator-map detection for keys like ``f // 56, f % 56``, or enumeration over small constant
loop ranges).

Whether different iterations run different instances of one block is an iterator-map question
first (``_bindings_tell_apart``): when the block's spatial bindings are quasi-affine maps of
the loops whose values determine the loops being changed (``tir.arith.iter_map.
determined_vars``), two iterations never share an instance. That proof costs the
same for ``(o * 16 + i) // 56, (o * 16 + i) % 56`` over 10^9 iterations as over 10; the window
proof above is the fallback for bindings the detection does not accept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tir.analysis.tree import child_stmts
from tir.arith import RangeRelaxer, simplify
from tir.arith.evaluate import evaluate_int
from tir.arith.iter_map import determined_vars
from tir.ir import (
    Add,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    Evaluate,
    For,
    IntImm,
    IterKind,
    LetStmt,
    Mul,
    Node,
    PrimExpr,
    Range,
    Stmt,
    Sub,
    Var,
    is_const_int,
    post_order_visit,
    substitute,
)
from tir.ir.structural import structural_equal
from tir.schedule.errors import ScheduleError

#: Enumerate at most this many iterations when proving that keys tell iterations apart.
MAX_ENUMERATED_ITERATIONS = 1 << 16


def uses_any(node: Node, variables: Iterable[Var]) -> bool:
    """Whether ``node`` uses (not defines) one of ``variables``."""
    wanted = {id(v) for v in variables}
    if not wanted:
        return False
    found = False

    def visit(n: Node) -> None:
        nonlocal found
        if isinstance(n, Var) and id(n) in wanted:
            found = True

    post_order_visit(node, visit)
    return found


def loop_header(loop: For) -> str:
    """The first line of a loop as printed, without its body or the loops in it (a short
    fragment for error messages)."""
    return str(loop.replace(body=Evaluate(IntImm(0, loop.loop_var.dtype)))).splitlines()[0]


@dataclass
class BlockSite:
    """A block directly under a statement (not inside another block) and the loops between."""

    realize: BlockRealize
    inner_loops: list[For]


def collect_block_sites(root: Stmt, moved: Sequence[Var], primitive: str, target: str, rule: str) -> list[BlockSite]:
    """The blocks under ``root`` (outermost ones), refusing a store outside every block.

    ``rule`` explains that refusal: without a block, nothing says whether its iterations may
    run in another order. A ``LetStmt`` whose value depends on ``moved`` or on a loop under
    ``root`` is refused too: a block binding could depend on the loops through its variable.
    """
    sites: list[BlockSite] = []

    def walk(stmt: Stmt, loops: list[For]) -> None:
        if isinstance(stmt, BlockRealize):
            sites.append(BlockSite(stmt, list(loops)))
            return
        if isinstance(stmt, BufferStore) or (isinstance(stmt, Evaluate) and not isinstance(stmt.value, IntImm)):
            raise ScheduleError(primitive, target, rule, stmt)
        if isinstance(stmt, LetStmt) and uses_any(stmt.value, [*moved, *(loop.loop_var for loop in loops)]):
            raise ScheduleError(
                primitive,
                target,
                f"the variable {stmt.var.name} bound inside depends on the loop variables; block bindings "
                "using it cannot be checked",
                f"{stmt.var.name} = {stmt.value}",
            )
        if isinstance(stmt, For):
            loops.append(stmt)
            walk(stmt.body, loops)
            loops.pop()
            return
        for child in child_stmts(stmt):
            walk(child, loops)

    walk(root, [])
    return sites


def check_distinct_instances(
    sites: Sequence[BlockSite],
    loops: Sequence[For],
    primitive: str,
    target: str,
    what: str,
    outer_loops: Sequence[For] = (),
) -> None:
    """Refuse unless different iterations of ``loops`` run different instances of every block
    under them: instances that differ in a spatial iterator are independent, but one instance
    run by two iterations at once races with itself. ``outer_loops`` (the loops around
    ``loops`` up to their block) help the proof: bindings fuse them with ``loops``."""
    for site in sites:
        realize = site.realize
        if _bindings_tell_apart(site, loops, outer_loops):
            continue
        dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in site.inner_loops}
        relaxer = RangeRelaxer(dom) if dom else None
        ranges = []
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
            if iter_var.kind is IterKind.SPATIAL:
                point = Range(value, IntImm(1, value.dtype))
                ranges.append(relaxer.relax(point) if relaxer else point)
        if not _footprints_disjoint([tuple(ranges)], loops, outer_loops):
            shown = ", ".join(f"{iv.var.name} = {v}" for iv, v in zip(realize.block.iter_vars, realize.iter_values))
            raise ScheduleError(
                primitive,
                target,
                f"cannot prove that different iterations run different instances of block "
                f"{realize.block.name!r} (its spatial iterators must tell the iterations apart) to {what}",
                f"block {realize.block.name!r}: {shown or 'no iterators'}",
            )


def _bindings_tell_apart(site: BlockSite, loops: Sequence[For], outer_loops: Sequence[For]) -> bool:
    """Whether the spatial bindings of the block of ``site`` determine the values of ``loops``
    (for fixed values of the loops outside them), proved by iterator-map detection
    (``determined_vars``) over ``loops`` and the loops between them and the block, under the
    block predicate (it only removes iterations) or, failing that, without it.

    The loops outside ``loops`` are iterators of the map too when given: a binding like
    ``(o * 16 + i) % 1000`` is quasi-affine only with ``o`` an iterator, and values that
    determine ``i`` over all of ``o`` determine it for each ``o``."""
    realize = site.realize
    spatial = [
        value
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values)
        if iter_var.kind is IterKind.SPATIAL
    ]
    inner = [*loops, *site.inner_loops]
    candidates = [[*outer_loops, *inner], inner] if outer_loops else [inner]
    return any(_determine(spatial, free, loops, realize.predicate) for free in candidates)


def _determine(exprs: Sequence[PrimExpr], free: Sequence[For], loops: Sequence[For], predicate: PrimExpr) -> bool:
    """Whether the values of ``exprs`` (of the ``free`` loops) determine every loop of ``loops``."""
    exprs = [expr for expr in exprs if uses_any(expr, [loop.loop_var for loop in free])]
    if not exprs:
        return all(_runs_once(loop) for loop in loops)
    # A loop that no spatial binding uses gives every iteration the same instance, even when
    # the predicate lets only one iteration run (``T.where(c < 1)``): proving that from the
    # predicate alone would accept a loop whose lowering sees the same elements written by
    # every iteration, so such a loop is refused.
    if any(not _runs_once(loop) and not any(uses_any(e, [loop.loop_var]) for e in exprs) for loop in loops):
        return False
    dom_map = {loop.loop_var: Range(loop.min, loop.extent) for loop in free}
    conditions: list[PrimExpr | bool] = [True]
    if not (isinstance(predicate, IntImm) and predicate.value == 1):
        conditions.insert(0, predicate)
    positive = _positive_extent_vars(free)
    for condition in conditions:
        found = {id(var) for var in determined_vars(exprs, dom_map, condition, positive)}
        if all(id(loop.loop_var) in found for loop in loops):
            return True
    return False


def _positive_extent_vars(loops: Sequence[For]) -> dict[Var, Range]:
    """Size variables that are at least 1 wherever the loops run: ``n`` when a loop's extent
    is ``c * n`` (``c > 0``). Where the loop does not run there are no iterations to tell apart,
    so the assumption costs nothing."""
    ranges: dict[Var, Range] = {}
    for loop in loops:
        extent = loop.extent
        coefficient = 1
        while isinstance(extent, Mul) and isinstance(extent.b, IntImm):
            coefficient *= extent.b.value
            extent = extent.a
        if isinstance(extent, Var) and coefficient > 0:
            ranges[extent] = Range(IntImm(1, extent.dtype), IntImm(2**30, extent.dtype))
    return ranges


def _runs_once(loop: For) -> bool:
    return isinstance(loop.extent, IntImm) and loop.extent.value == 1


def check_iterator_kinds(
    sites: Sequence[BlockSite],
    moved: Sequence[Var],
    allowed: frozenset[IterKind],
    primitive: str,
    target: str,
    rule: Callable[[IterKind], str],
) -> None:
    """Refuse when a block iterator of a kind not in ``allowed`` is bound to an expression of
    ``moved``, or when a block uses a variable of ``moved`` in its body directly."""
    for site in sites:
        realize = site.realize
        block = realize.block
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            if iter_var.kind not in allowed and uses_any(value, moved):
                axis = {IterKind.SPATIAL: "spatial", IterKind.REDUCE: "reduce", IterKind.OPAQUE: "opaque"}[
                    iter_var.kind
                ]
                dom = iter_var.dom
                shown = str(dom.extent) if is_const_int(dom.min, 0) else f"({dom.min}, {dom.min + dom.extent})"
                raise ScheduleError(
                    primitive,
                    target,
                    rule(iter_var.kind) + f" (block {block.name!r})",
                    f"{iter_var.var.name} = T.{axis}_axis({shown}, {value})",
                )
        if _block_uses(block, moved):
            raise ScheduleError(
                primitive,
                target,
                f"block {block.name!r} uses the loop variable directly in its body, not through its iterators",
                realize,
            )


def _block_uses(block: Block, variables: Sequence[Var]) -> bool:
    parts: list[Node] = [block.body, *block.reads, *block.writes, *block.match_buffers]
    if block.init is not None:
        parts.append(block.init)
    return any(uses_any(part, variables) for part in parts)


# ---------------------------------------------------------------- footprints


@dataclass
class _Access:
    site: BlockSite
    buffer: Buffer
    ranges: tuple[Range, ...]
    is_write: bool


def _site_accesses(site: BlockSite) -> list[_Access]:
    realize = site.realize
    block = realize.block
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in site.inner_loops}
    relaxer = RangeRelaxer(dom) if dom else None
    accesses = []
    for regions, is_write in ((block.reads, False), (block.writes, True)):
        for region in regions:
            ranges = []
            for dim, rng in enumerate(region.region):
                bound = Range(simplify(substitute(rng.min, bindings)), simplify(substitute(rng.extent, bindings)))
                ranges.append(relaxer.relax(bound, region.buffer.shape[dim]) if relaxer else bound)
            accesses.append(_Access(site, region.buffer, tuple(ranges), is_write))
    return accesses


def _allocated_under(sites: Sequence[BlockSite]) -> set[int]:
    """Buffers allocated by a block under the loops: each iteration has its own."""
    found: set[int] = set()

    def visit(node: Node) -> None:
        if isinstance(node, Block):
            found.update(id(b) for b in node.alloc_buffers)

    for site in sites:
        post_order_visit(site.realize, visit)
    return found


def check_disjoint_footprints(
    sites: Sequence[BlockSite],
    loops: Sequence[For],
    primitive: str,
    target: str,
    what: str,
    private_buffers: Iterable[Buffer] = (),
    outer_loops: Sequence[For] = (),
) -> None:
    """Refuse unless different iterations of ``loops`` touch disjoint parts of every buffer
    that one block under them writes and another block under them accesses.

    ``what`` says what the primitive would do to the iterations ("run them in parallel").
    ``private_buffers`` are left out, like buffers allocated under the loops: each iteration
    has its own copy. ``outer_loops`` (the loops around ``loops`` up to their block) help the
    proof, as in ``check_distinct_instances``.
    """
    if len(sites) < 2:
        return
    private = _allocated_under(sites) | {id(buffer) for buffer in private_buffers}
    by_buffer: dict[int, list[_Access]] = {}
    buffers: dict[int, Buffer] = {}
    for site in sites:
        for access in _site_accesses(site):
            buffer = access.buffer
            if id(buffer) in private:
                continue
            buffers[id(buffer)] = buffer
            by_buffer.setdefault(id(buffer), []).append(access)
    for key, accesses in by_buffer.items():
        blocks = {id(a.site.realize) for a in accesses}
        writers = [a for a in accesses if a.is_write]
        if len(blocks) < 2 or not writers:
            continue
        if not _footprints_disjoint([a.ranges for a in accesses], loops, outer_loops):
            names = sorted({a.site.realize.block.name for a in accesses})
            writer_names = sorted({a.site.realize.block.name for a in writers})
            under = "the loops" if len(loops) > 1 else "the loop"
            raise ScheduleError(
                primitive,
                target,
                f"blocks {names} under {under} share buffer {buffers[key].name!r} "
                f"(written by {writer_names}); cannot prove that different iterations touch disjoint "
                f"parts of it, so it is not safe to {what}",
                "\n".join(_show_access(a) for a in accesses),
            )


def _show_access(access: _Access) -> str:
    """``block 'C' reads B[i, 0:8]``: an access as a function of the loops."""
    parts = []
    for rng in access.ranges:
        if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
            parts.append(str(rng.min))
        else:
            parts.append(f"{rng.min}:{simplify(rng.min + rng.extent)}")
    verb = "writes" if access.is_write else "reads"
    return f"block {access.site.realize.block.name!r} {verb} {access.buffer.name}[{', '.join(parts)}]"


def _footprints_disjoint(
    regions: Sequence[tuple[Range, ...]], loops: Sequence[For], outer_loops: Sequence[For] = ()
) -> bool:
    """Whether different iterations of ``loops`` touch disjoint parts of a buffer accessed in
    ``regions`` (each a function of the loop variables)."""
    loop_vars = [loop.loop_var for loop in loops]
    keys: list[list[tuple[int, PrimExpr]]] = []
    for dim in range(len(regions[0]) if regions else 0):
        key = _window_key([region[dim] for region in regions], loop_vars)
        if key is not None:
            keys.append(key)
    return _keys_injective(keys, loops, outer_loops)


def _window_key(ranges: Sequence[Range], loop_vars: Sequence[Var]) -> list[tuple[int, PrimExpr]] | None:
    """The key terms of a window every range of one dimension lies in, or None."""
    key: list[tuple[int, PrimExpr]] | None = None
    base: PrimExpr | None = None
    lows: list[int] = []
    highs: list[int] = []
    for rng in ranges:
        terms = _terms(simplify(rng.min))
        if terms is None:
            return None
        moving = [(c, t) for c, t in terms if t is not None and uses_any(t, loop_vars)]
        fixed = _sum([(c, t) for c, t in terms if t is None or not uses_any(t, loop_vars)], rng.min.dtype)
        if not moving or uses_any(rng.extent, loop_vars):
            return None
        if key is None:
            key, base = moving, fixed
        elif not _same_terms(key, moving):
            return None
        assert base is not None
        low = simplify(fixed - base)
        high = simplify(fixed + rng.extent - base)
        if not (isinstance(low, IntImm) and isinstance(high, IntImm)):
            return None
        lows.append(low.value)
        highs.append(high.value)
    assert key is not None
    gap = math.gcd(*(abs(c) for c, _ in key))
    return key if max(highs) - min(lows) <= gap else None


def _terms(expr: PrimExpr) -> list[tuple[int, PrimExpr | None]] | None:
    """``expr`` as a sum of ``coefficient * term`` (``term`` None for a constant)."""
    if isinstance(expr, IntImm):
        return [(expr.value, None)]
    if isinstance(expr, (Add, Sub)):
        a, b = _terms(expr.a), _terms(expr.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(expr, Add) else -1
        return a + [(sign * c, t) for c, t in b]
    if isinstance(expr, Mul):
        for scale, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(scale, IntImm):
                inner = _terms(other)
                return None if inner is None else [(scale.value * c, t) for c, t in inner]
    return [(1, expr)]


def _sum(terms: Sequence[tuple[int, PrimExpr | None]], dtype: object) -> PrimExpr:
    total: PrimExpr = IntImm(0, dtype)  # type: ignore[arg-type]
    for c, t in terms:
        total = total + (IntImm(c, dtype) if t is None else t * IntImm(c, dtype))  # type: ignore[arg-type]
    return simplify(total)


def _same_terms(a: Sequence[tuple[int, PrimExpr]], b: Sequence[tuple[int, PrimExpr]]) -> bool:
    if len(a) != len(b):
        return False
    unmatched = list(b)
    for c, t in a:
        for position, (c2, t2) in enumerate(unmatched):
            if c == c2 and structural_equal(t, t2):
                del unmatched[position]
                break
        else:
            return False
    return True


def _keys_injective(
    keys: Sequence[Sequence[tuple[int, PrimExpr]]], loops: Sequence[For], outer_loops: Sequence[For] = ()
) -> bool:
    """Whether equal values of every key imply equal values of every loop variable."""
    determined: set[int] = set()
    for key in keys:
        determined |= _mixed_radix_vars(key, loops)
    if all(id(loop.loop_var) in determined for loop in loops):
        return True
    return _keys_determine(keys, loops, outer_loops) or _enumerate_injective(keys, loops)


def _keys_determine(
    keys: Sequence[Sequence[tuple[int, PrimExpr]]], loops: Sequence[For], outer_loops: Sequence[For]
) -> bool:
    """Whether the keys, as expressions of ``loops`` (and ``outer_loops``), determine
    ``loops`` (``f // 56, f % 56`` determine ``f``), by iterator-map detection: no size limit."""
    exprs = [_sum(key, key[0][1].dtype) for key in keys if key]
    if not exprs:
        return False
    true = IntImm(1, "bool")
    candidates = [[*outer_loops, *loops], list(loops)] if outer_loops else [list(loops)]
    return any(_determine(exprs, free, loops, true) for free in candidates)


def _mixed_radix_vars(key: Sequence[tuple[int, PrimExpr]], loops: Sequence[For]) -> set[int]:
    """Loop variables a linear key ``sum(c_k * v_k)`` determines (empty when it is not linear
    in distinct loop variables, or its coefficients may collide)."""
    by_var = {id(loop.loop_var): loop for loop in loops}
    if any(not isinstance(t, Var) or id(t) not in by_var for _, t in key):
        return set()
    if len({id(t) for _, t in key}) != len(key):
        return set()
    ordered = sorted(key, key=lambda ct: abs(ct[0]))
    reach = 0  # the largest |sum| the smaller terms can differ by
    for position, (c, t) in enumerate(ordered):
        if abs(c) <= reach:
            return set()
        if position == len(ordered) - 1:
            break
        extent = by_var[id(t)].extent
        if not isinstance(extent, IntImm):
            return set()
        reach += abs(c) * (extent.value - 1)
    return {id(t) for _, t in key}


def _enumerate_injective(keys: Sequence[Sequence[tuple[int, PrimExpr]]], loops: Sequence[For]) -> bool:
    """Whether the key tuples of all iterations differ, by evaluating them (small constant
    loop ranges only)."""
    starts, sizes = [], []
    for loop in loops:
        if not (isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)):
            return False
        starts.append(loop.min.value)
        sizes.append(loop.extent.value)
    total = math.prod(sizes)
    if total > MAX_ENUMERATED_ITERATIONS:
        return False
    if total <= 1:
        return True
    if not keys:
        return False
    # Row-major enumeration of the iteration space, one array of values per loop variable.
    env: dict[int, np.ndarray] = {}
    inner = total
    for loop, start, size in zip(loops, starts, sizes):
        inner //= size
        env[id(loop.loop_var)] = start + (np.arange(total, dtype=np.int64) // inner) % size
    columns = []
    for key in keys:
        value = np.zeros(total, dtype=np.int64)
        for c, t in key:
            evaluated = evaluate_int(t, env)
            if evaluated is None:
                return False
            value = value + c * evaluated
        columns.append(value)
    rows = np.stack(columns, axis=1)
    return len(np.unique(rows, axis=0)) == total
