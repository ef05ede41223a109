"""Does a reduction block's ``T.init()`` run before every update of the same output element?

A block with an init runs it, right before its body, at the instance whose reduce iterators
are all at the start of their domains (``lower_init`` makes that ``if vk == 0:``). That is
right only if, for every value of the spatial iterators, this instance comes first in the
execution order of the loops around the block (their lexicographic order, outermost loop most
significant) among all instances with those spatial values. Otherwise updates that ran earlier
are overwritten by the late init: after ``fuse(i, k)``, ``split(fused, [None, 9])`` and
``reorder(inner, outer)`` a 6x12 row sum runs the update ``vi = 1, vk = 6`` (inner 0, outer 2)
before the init ``vi = 1, vk = 0`` (inner 3, outer 1).

``init_order_problem(chain)`` decides it, without guessing:

1. No loop feeds both a spatial and a reduce iterator: the order is right whatever the loop
   order. Let ``p`` be the first loop where the init instance ``l0`` of an instance ``l``
   differs from ``l``: a loop that feeds spatial iterators only has the same value in both
   (inside the reduction the spatial bindings tell instances apart: what the validator's
   ``binding`` rule asks); one that feeds reduce iterators only is at its start in ``l0`` (a
   quasi-affine reduce binding whose value starts where its domain starts is at its start
   exactly when all its digits are 0), so ``l0`` is earlier.
2. Otherwise (after fusing spatial with reduce loops) the bindings are detected as
   quasi-affine, one-to-one maps (``tir.arith.iter_map``), and the argument above is made per
   *digit*: a digit of a loop used directly by a spatial (reduce) binding is equal (0) in
   ``l0``. A *fused index* ``T`` (``fo * 9 + fi``) whose digits feed both kinds is where order
   can break: ``l0`` has the reduce digits of ``T`` zeroed, so ``T(l0) <= T(l)``, which gives
   ``l0`` first only while the loop digits of ``T`` that differ are compared most significant
   first. Precisely: a loop digit of ``T`` is *pure* when the positions it covers in ``T``'s
   mixed radix are owned by bindings of one kind and every boundary between the digits of
   ``T`` divides the next (then its value in ``l0`` is that of ``l``, or 0); the order is
   proved when, for every digit of ``T`` that is not pure, each more significant digit of
   ``T`` that is not purely spatial sits on a loop outside it (or is a more significant digit
   of the same loop). At the first digit where ``l0`` and ``l`` differ, every more
   significant digit of ``T`` is then equal, and ``T(l0) <= T(l)`` makes this one smaller.
   ``fo`` outside ``fi`` passes; ``fi`` outside ``fo`` does not; splitting the fused
   ``i * 12 + k`` by 24 and putting the inner 24 outside passes (the outer part is spatial).
3. Where 2 finds no proof (a rule broken, or bindings it cannot analyze) and the loop nest is
   small and constant, every instance is enumerated in execution order: the answer is exact and
   a broken order comes with a witness. Otherwise the problem is reported as unproved.

Variables bound outside the chain of blocks given are constants. The chain lets a block inside
a block be judged over the loops of both: its bindings are composed with its parent's when
they use the parent's iterators, and a parent iterator its init uses (the output element it
initializes) counts as one of its spatial iterators.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tir.arith.evaluate import evaluate_int
from tir.arith.iter_map import IterMark, IterSplit, IterSum, detect_iter_map
from tir.arith.simplify import Analyzer
from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    And,
    BlockRealize,
    For,
    IntImm,
    IterKind,
    IterVar,
    Not,
    Or,
    PrimExpr,
    Range,
    Var,
    free_vars,
    substitute,
)

__all__ = ["ENUMERATION_LIMIT", "InitOrderProblem", "init_order_problem"]

#: Loop nests up to this many points are enumerated when no proof is found.
ENUMERATION_LIMIT = 1 << 16


@dataclass(frozen=True)
class InitOrderProblem:
    """Why the init of ``block`` may run after an update of the same output element.

    ``reason`` names the loops and iterators and the rule; ``witness`` (when the nest was
    enumerated) shows one update that runs before its init; ``definite`` is True when the
    order is shown wrong (there is a witness), False when it could not be proved right.
    """

    block: str
    reason: str
    witness: str | None = None
    definite: bool = True

    def message(self) -> str:
        if not self.definite:
            return (
                f"cannot prove that the init of block {self.block!r} runs before every update of the same "
                f"output element: {self.reason}"
            )
        return (
            f"the init of block {self.block!r} would run after updates of the same output element: "
            f"{self.reason}; {self.witness}"
        )


# ---------------------------------------------------------------- entry point


def init_order_problem(
    chain: Sequence[tuple[BlockRealize, Sequence[For]]], var_ranges: Mapping[Var, Range] | None = None
) -> InitOrderProblem | None:
    """None when the init of ``chain[0]``'s block provably runs first for every output element
    (or the block has no init, or no reduce iterator); otherwise what is wrong.

    ``chain``: the block's realize and the loops between it and its parent block (outermost
    first), then its parent's realize and loops, and so on up to (not including) the root
    block. ``var_ranges``: known ranges of other variables (sizes), for proofs.
    """
    realize, _ = chain[0]
    block = realize.block
    if block.init is None or not any(iv.kind is IterKind.REDUCE for iv in block.iter_vars):
        return None
    pairs, predicate, loops = _compose(chain)
    values = [value for _, value in pairs]
    kinds = [iv.kind for iv, _ in pairs]
    used = [_var_ids(value) for value in values]
    spatial_ids = set().union(*(u for u, kind in zip(used, kinds) if kind is IterKind.SPATIAL))
    reduce_ids = set().union(*(u for u, kind in zip(used, kinds) if kind is IterKind.REDUCE))
    mixed = [loop for loop in loops if id(loop.loop_var) in spatial_ids and id(loop.loop_var) in reduce_ids]
    if not mixed:
        return None  # rule 1
    needed = spatial_ids | reduce_ids | _var_ids(predicate)
    loops = [loop for loop in loops if id(loop.loop_var) in needed]
    names = [iv.var.name for iv, _ in pairs]
    spatial_names = [n for n, kind in zip(names, kinds) if kind is IterKind.SPATIAL]
    reduce_names = [n for n, kind in zip(names, kinds) if kind is IterKind.REDUCE]
    carried = f"spatial iterator(s) {', '.join(spatial_names)} and reduce iterator(s) {', '.join(reduce_names)}"
    proof = _digit_proof(pairs, values, predicate, loops, var_ranges)
    if proof is None:
        return None
    witness = _enumerate(pairs, values, predicate, loops)
    if witness is False:
        return None  # enumerated: the order is right after all
    name = block.name
    if isinstance(proof, _Broken):
        reason = (
            f"loops {proof.major.name} and {proof.minor.name} together run the fused index {proof.fused}, "
            f"which carries {carried}; the init runs when the reduce iterators are at their start, which comes "
            f"first for each output element only while loop {proof.major.name} (the more significant part) is "
            f"outside loop {proof.minor.name}, but loop {proof.minor.name} is outside loop {proof.major.name}"
        )
        return InitOrderProblem(name, reason, witness or None, bool(witness))
    mixed_names = ", ".join(loop.loop_var.name for loop in mixed)
    reason = (
        f"loop(s) {mixed_names} carry both {carried}, and it cannot be proved that the instance where the reduce "
        f"iterators start runs first for each output element ({proof})"
    )
    return InitOrderProblem(name, reason, witness or None, bool(witness))


# ---------------------------------------------------------------- composing through parents


def _var_ids(expr: PrimExpr) -> set[int]:
    """Ids of the variables ``expr`` uses (the callers hold loop variables by id)."""
    return {id(v) for v in free_vars(expr)}


def _compose(
    chain: Sequence[tuple[BlockRealize, Sequence[For]]],
) -> tuple[list[tuple[IterVar, PrimExpr]], PrimExpr, list[For]]:
    """The block's spatial and reduce iterators with their bindings, and its predicate, over
    the loops of the chain: a parent's iterators are replaced by their bindings for as long as
    the bindings use them. A parent iterator that the init uses (``S[vi_o] = 10.0`` in a block
    inside ``S_o``) tells output elements apart as the block's own spatial iterators do: it
    joins them, bound to its parent binding."""
    realize, scope_loops = chain[0]
    block = realize.block
    pairs = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values) if iv.kind is not IterKind.OPAQUE]
    init_ids = _var_ids(block.init) if block.init is not None else set()
    predicate = realize.predicate
    loops = list(scope_loops)
    for parent, parent_loops in chain[1:]:
        bound = {iv.var: value for iv, value in zip(parent.block.iter_vars, parent.iter_values)}
        ids = {id(var) for var in bound}
        extra = [
            (IterVar(iv.var, iv.dom, IterKind.SPATIAL), value)
            for iv, value in zip(parent.block.iter_vars, parent.iter_values)
            if id(iv.var) in init_ids
        ]
        if not extra and not any(_var_ids(expr) & ids for expr in (*(v for _, v in pairs), predicate)):
            break
        pairs = [(iv, substitute(value, bound)) for iv, value in pairs] + extra
        predicate = substitute(predicate, bound)
        if not _is_true(parent.predicate):
            predicate = parent.predicate if _is_true(predicate) else And(parent.predicate, predicate)
        loops = [*parent_loops, *loops]
    return pairs, predicate, loops


# ---------------------------------------------------------------- rule 2: digits


@dataclass(frozen=True)
class _Broken:
    """A fused index whose digit on loop ``minor`` is outside a more significant one on
    ``major`` that is not purely spatial."""

    fused: PrimExpr
    major: Var
    minor: Var


@dataclass(frozen=True)
class _Digit:
    """A digit of a loop variable, ``(var - min) // lower % extent``, at ``position`` (its
    scale) in a fused index."""

    var: Var
    lower: PrimExpr
    extent: PrimExpr
    position: PrimExpr


def _digit_proof(
    pairs: Sequence[tuple[IterVar, PrimExpr]],
    values: Sequence[PrimExpr],
    predicate: PrimExpr,
    loops: Sequence[For],
    var_ranges: Mapping[Var, Range] | None,
) -> _Broken | str | None:
    """None when rule 2 proves the order; a ``_Broken`` fused index; or why it cannot judge."""
    loop_ids = {id(loop.loop_var) for loop in loops}
    for loop in loops:
        if _var_ids(loop.min) & loop_ids or _var_ids(loop.extent) & loop_ids:
            return "the range of a loop depends on another loop"
    dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in loops}
    # Surjective, as the validator detects: simplification may take a digit of a fused index
    # out of it (``(f0 * 9 + f1) // 36`` becomes ``f0 // 4``), which a bijective detection
    # reports as a partly unused fused index; the digits are matched up below instead.
    result = detect_iter_map(list(values), dom, predicate, "surjective", var_ranges)
    if not result.ok or result.indices is None:
        return "the bindings are not quasi-affine and independent: " + "; ".join(result.errors)
    if result.unused_vars or not all(result.exact):
        return "some iterations of the loops repeat instances of the block"
    analyzer = Analyzer()
    for var, rng in {**(var_ranges or {}), **dom}.items():
        analyzer.bind(var, rng)
    for (iv, _), index in zip(pairs, result.indices):
        if iv.kind is IterKind.REDUCE and not analyzer.can_prove_equal(index.base, iv.dom.min):
            return f"the binding of {iv.var.name} does not provably start at {iv.dom.min}"
    # Splits of every mark the bindings use, by mark, with the kind of their binding.
    owners: dict[object, tuple[IterMark, list[tuple[IterSplit, IterKind]]]] = {}
    for (iv, _), index in zip(pairs, result.indices):
        for split in index.args:
            entry = owners.setdefault(_mark_key(split.mark), (split.mark, []))
            entry[1].append((split, iv.kind))
    rank = {id(loop.loop_var): k for k, loop in enumerate(loops)}
    for mark, splits in owners.values():
        if isinstance(mark.source, Var):
            continue  # digits of one loop: equal or zero in the init instance
        parts: list[tuple[object, _Digit]] = []
        digits = _flatten(mark.source, IntImm(1, mark.extent.dtype), parts)
        if digits is None:
            return f"the fused index {mark.value_expr()} is made of parts of other fused indices"
        ranges = _owned_ranges(splits, parts, owners)
        if ranges is None:
            return f"the digits of the fused index {mark.value_expr()} cannot be matched to the bindings"
        if len({kind for _, _, kind in ranges}) < 2:
            continue  # all of one kind: equal or zero in the init instance
        purity = _purity(digits, ranges)
        if purity is None:
            return f"not every digit of the fused index {mark.value_expr()} is used by a binding"
        for digit, pure in zip(digits, purity):
            if pure is not None:
                continue
            for other, other_pure in zip(digits, purity):
                if other is digit or other_pure is IterKind.SPATIAL:
                    continue
                more = _const(other.position)
                mine = _const(digit.position)
                if more is None or mine is None:
                    return f"the fused index {mark.value_expr()} has symbolic digit positions"
                if more <= mine:
                    continue
                earlier = _earlier(other, digit, rank)
                if earlier is None:
                    return f"the digits of {digit.var.name} in {mark.value_expr()} cannot be ordered"
                if not earlier:
                    return _Broken(mark.value_expr(), other.var, digit.var)
    return None


def _mark_key(mark: IterMark) -> object:
    if isinstance(mark.source, Var):
        return ("var", id(mark.source))
    return (
        "sum",
        frozenset((_mark_key(a.mark), str(a.lower_factor), str(a.extent), str(a.scale)) for a in mark.source.args),
    )


def _flatten(source: IterSum, scale: PrimExpr, parts: list[tuple[object, _Digit]]) -> list[_Digit] | None:
    """The loop digits of a fused index, with their positions; None when a part is a piece
    (not the whole) of another fused index. ``parts`` collects every part on the way (a loop
    digit, or a whole fused index inside), by mark key, as a digit of that mark."""
    digits: list[_Digit] = []
    for arg in source.args:
        position = _mul(arg.scale, scale)
        mark = arg.mark
        if isinstance(mark.source, Var):
            digit = _Digit(mark.source, arg.lower_factor, arg.extent, position)
            digits.append(digit)
            parts.append((_mark_key(mark), digit))
            continue
        if not (_is_one(arg.lower_factor) and str(arg.extent) == str(mark.extent)):
            return None
        parts.append((_mark_key(mark), _Digit(Var("fused"), arg.lower_factor, arg.extent, position)))
        inner = _flatten(mark.source, position, parts)
        if inner is None:
            return None
        digits.extend(inner)
    return digits


def _owned_ranges(
    splits: Sequence[tuple[IterSplit, IterKind]],
    parts: Sequence[tuple[object, _Digit]],
    owners: Mapping[object, tuple[IterMark, list[tuple[IterSplit, IterKind]]]],
) -> list[tuple[int, int, IterKind]] | None:
    """The positions ``[low, high)`` of a fused index that each binding kind owns: through
    splits of the index itself, or through splits taken directly of one of its parts (a loop
    digit, or a fused index inside it, simplified out of it: ``(f0 * 9 + f1) // 36`` is
    ``f0 // 4``); None where positions are not constant or a direct split straddles the
    part."""
    ranges: list[tuple[int, int, IterKind]] = []
    for split, kind in splits:
        low, extent = _const(split.lower_factor), _const(split.extent)
        if low is None or extent is None:
            return None
        ranges.append((low, low * extent, kind))
    for key, digit in parts:
        entry = owners.get(key)
        if entry is None:
            continue
        lower, extent, position = _const(digit.lower), _const(digit.extent), _const(digit.position)
        if lower is None or extent is None or position is None:
            return None
        for split, kind in entry[1]:
            low, size = _const(split.lower_factor), _const(split.extent)
            if low is None or size is None:
                return None
            high = low * size
            if high <= lower or low >= lower * extent:
                continue  # another part of the loop
            if low < lower or high > lower * extent or low % lower:
                return None
            ranges.append((position * low // lower, position * high // lower, kind))
    return ranges


def _purity(digits: Sequence[_Digit], ranges: Sequence[tuple[int, int, IterKind]]) -> list[IterKind | None] | None:
    """Per loop digit of a fused index: the binding kind that owns all the positions it
    covers, when every boundary between its digits and the owned ranges divides the next;
    else None (its value in the init instance is only known to keep the index from growing).
    None for the whole when the owned ranges leave a gap."""
    bounds: set[int] = set()
    spans: list[tuple[int, int]] = []
    for low, high, _ in ranges:
        bounds |= {low, high}
    for digit in digits:
        low, size = _const(digit.position), _const(digit.extent)
        if low is None or size is None:
            return [None] * len(digits)
        spans.append((low, low * size))
        bounds |= {low, low * size}
    owned = sorted((low, high) for low, high, _ in ranges)
    reach = 1
    for low, high in owned:
        if low > reach:
            return None  # a gap: those digits repeat instances (the validator's concern)
        reach = max(reach, high)
    ordered = sorted(bounds)
    if any(b % a for a, b in zip(ordered, ordered[1:])):
        return [None] * len(digits)  # e.g. digits of 9 against splits at 12: values do not separate
    purity: list[IterKind | None] = []
    for low, high in spans:
        kinds = {kind for a, b, kind in ranges if max(a, low) < min(b, high)}
        purity.append(kinds.pop() if len(kinds) == 1 else None)
    return purity


def _earlier(a: _Digit, b: _Digit, rank: Mapping[int, int]) -> bool | None:
    """Whether digit ``a`` comes before digit ``b`` in execution-order significance: on a loop
    outside ``b``'s, or a more significant digit of the same loop."""
    ra, rb = rank.get(id(a.var)), rank.get(id(b.var))
    if ra is None or rb is None:
        return None
    if ra != rb:
        return ra < rb
    la, lb = _const(a.lower), _const(b.lower)
    if la is None or lb is None:
        return None
    return la > lb


def _const(expr: PrimExpr) -> int | None:
    return expr.value if isinstance(expr, IntImm) else None


def _is_one(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


def _is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if _is_one(b):
        return a
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value * b.value, a.dtype)
    return a * b


# ---------------------------------------------------------------- rule 3: enumeration


def _enumerate(
    pairs: Sequence[tuple[IterVar, PrimExpr]], values: Sequence[PrimExpr], predicate: PrimExpr, loops: Sequence[For]
) -> str | bool | None:
    """Run the nest in execution order: False when every init comes first, a witness when one
    does not, None when the nest is too large, symbolic or not evaluable."""
    sizes = []
    for loop in loops:
        low, extent = _const(loop.min), _const(loop.extent)
        if low is None or extent is None:
            return None
        sizes.append((low, extent))
    total = math.prod(extent for _, extent in sizes)
    if total == 0:
        return False
    if total > ENUMERATION_LIMIT:
        return None
    env: dict[int, np.ndarray] = {}
    inner = total
    for loop, (low, extent) in zip(loops, sizes):
        inner //= extent
        env[id(loop.loop_var)] = low + (np.arange(total, dtype=np.int64) // inner) % extent
    keep = _evaluate_condition(predicate, env)
    if keep is None:
        return None
    columns = []
    for value in values:
        column = evaluate_int(value, env)
        if column is None:
            return None
        columns.append(np.broadcast_to(np.asarray(column, dtype=np.int64), (total,)))
    order = np.nonzero(np.broadcast_to(np.asarray(keep, dtype=bool), (total,)))[0]
    if order.size == 0:
        return False
    spatial = [k for k, (iv, _) in enumerate(pairs) if iv.kind is IterKind.SPATIAL]
    reduce = [k for k, (iv, _) in enumerate(pairs) if iv.kind is IterKind.REDUCE]
    at_start = np.ones(order.size, dtype=bool)
    for k in reduce:
        low = _const(pairs[k][0].dom.min)
        if low is None:
            return None
        at_start &= columns[k][order] == low
    if spatial:
        keys = np.stack([columns[k][order] for k in spatial], axis=1)
        _, group = np.unique(keys, axis=0, return_inverse=True)
        group = group.reshape(-1)
    else:
        group = np.zeros(order.size, dtype=np.int64)
    # An output element whose first instance is an update. (An init again later, where
    # instances repeat, starts a recomputation of the whole reduction: that is allowed.)
    _, first = np.unique(group, return_index=True)
    late = first[~at_start[first]]
    if late.size:
        update = int(late.min())
        inits = np.nonzero(at_start & (group == group[update]))[0]
        if inits.size == 0:
            return None  # the init never runs: an incomplete reduction, the validator's business
        return _witness(pairs, columns, loops, env, int(order[update]), int(order[inits[0]]))
    return False


def _witness(
    pairs: Sequence[tuple[IterVar, PrimExpr]],
    columns: Sequence[np.ndarray],
    loops: Sequence[For],
    env: Mapping[int, np.ndarray],
    update: int,
    init: int,
) -> str:
    def iters(point: int, kind: IterKind) -> str:
        return ", ".join(
            f"{iv.var.name} = {int(column[point])}" for (iv, _), column in zip(pairs, columns) if iv.kind is kind
        )

    def at(point: int) -> str:
        return ", ".join(f"{loop.loop_var.name} = {int(env[id(loop.loop_var)][point])}" for loop in loops)

    return (
        f"for {iters(init, IterKind.SPATIAL) or 'the output'}, the update at {iters(update, IterKind.REDUCE)} "
        f"({at(update)}) runs before the init at {iters(init, IterKind.REDUCE)} ({at(init)})"
    )


def _evaluate_condition(expr: PrimExpr, env: Mapping[int, np.ndarray]) -> np.ndarray | bool | None:
    """A predicate at every point (comparisons and logic over ``evaluate_int``)."""
    if isinstance(expr, IntImm):
        return bool(expr.value)
    if isinstance(expr, Not):
        inner = _evaluate_condition(expr.a, env)
        return None if inner is None else np.logical_not(inner)
    if isinstance(expr, (And, Or)):
        a, b = _evaluate_condition(expr.a, env), _evaluate_condition(expr.b, env)
        if a is None or b is None:
            return None
        return np.logical_and(a, b) if isinstance(expr, And) else np.logical_or(a, b)
    compare = {LT: np.less, LE: np.less_equal, GT: np.greater, GE: np.greater_equal, EQ: np.equal, NE: np.not_equal}
    op = compare.get(type(expr))  # type: ignore[call-overload]
    if op is None:
        return None
    a, b = evaluate_int(expr.a, env), evaluate_int(expr.b, env)
    if a is None or b is None:
        return None
    return op(a, b)
