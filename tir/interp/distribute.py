"""Loop distribution of copies, so that the reference interpreter can batch what they feed.

A GPU schedule copies each tile into shared memory inside the loops that use it::

    for by, bx, ty, tx, k0 in ...:            # thread-bound loops, then the reduction's outer loop
        for ax0, ax1 in T.grid(64, 8):
            with T.block("A_shared"): ... A_shared[v0, v1] = A[v0, v1]
        for k1, i, j in T.grid(8, 4, 4):
            with T.block("C"): ... C[vi, vj] += A_shared[vi, vk] * B[vk, vj]

The statement sequence under ``k0`` keeps the batched evaluator (``tir.interp.batched``) from
seeing ``C``'s nest whole: the interpreter would step every instance of a 2048^3 product in
Python. ``distribute(loop, facts)`` splits such a nest in two when that cannot change what any
statement reads:

    for by, k0, ax0, ax1 ...: A_shared block    (the copy, once per point of the loops it uses)
    for by, bx, ty, tx, k0, k1, i, j ...: C block

A statement is hoisted (a *pure copy*) when

* it is loops and blocks (no init, no predicate, no buffers of their own) around stores
  ``X[idx] = Y[idx]`` (a cast allowed), ``Y`` written nowhere in the function and ``X`` written
  nowhere else: every element of ``X`` then always receives the same value, so running the copy
  earlier, or more than once, or once instead of many times, leaves ``X`` the same;
* no statement before it in the sequence reads ``X``;
* every read of ``X`` by a later statement in the sequence lies, at each iteration of the
  loops, inside what the copy writes at that same iteration (proved on the relaxed regions):
  every read then saw a written element before, and sees the same value after. A read the
  proof cannot place keeps the nest as it is, so a read of an element never written is still
  met as the scalar interpreter meets it.

Two more rewrites serve copies out of a tile (``write_at``):

* the last statement is *sunk* (run after every iteration of the others) when the others
  neither read nor write what it writes, and what it reads of their outputs lies, at each
  iteration, in a box that iteration stores completely and no other iteration stores;
* a last statement that copies ``X[idx(p)] = Y[idx(p)]`` using only the outer loops ``p`` of
  the nest (every thread writing the whole tile back) runs once per ``p``, after the inner
  loops: only its last execution shows, when only it writes ``X`` and nothing in the nest
  reads ``X``.

The function must have no way to write memory unseen (calls beyond pure arithmetic, matched
sub-buffers; a buffer is its own storage otherwise); otherwise nothing is distributed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from tir.arith.int_set import relax_region
from tir.arith.iter_map import detect_iter_map, determined_vars
from tir.arith.simplify import Analyzer
from tir.interp.batched import PURE_CALLS, loop_chain
from tir.ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    buffer_loads,
    free_vars,
    is_const_int,
    post_order_visit,
    substitute,
)
from tir.ir.structural import structural_equal


@dataclass(frozen=True)
class Facts:
    """What distribution needs to know about the whole function."""

    #: Per buffer (by id): how many stores to it the function has.
    stores: dict[int, int]
    #: False when something may write memory that no store shows (then nothing is distributed).
    transparent: bool


def function_facts(func: PrimFunc) -> Facts:
    stores: dict[int, int] = {}
    transparent = True

    def visit(node: object) -> None:
        nonlocal transparent
        if isinstance(node, BufferStore):
            stores[id(node.buffer)] = stores.get(id(node.buffer), 0) + 1
        elif isinstance(node, Call) and node.op not in PURE_CALLS:
            transparent = False
        elif isinstance(node, Block) and node.match_buffers:
            transparent = False

    post_order_visit(func.body, visit)
    return Facts(stores, transparent)


def distribute(loop: For, facts: Facts) -> list[Stmt] | None:
    """``loop``'s nest as statements to run in order: each hoistable copy in its own nest (over
    the loops it uses), then the nest of the other statements. None when nothing is hoisted."""
    if not facts.transparent:
        return None
    loops, node = loop_chain(loop)
    if not isinstance(node, SeqStmt) or len(node.stmts) < 2:
        return None
    local = _local_buffers(loop)
    hoisted: list[Stmt] = []
    kept: list[Stmt] = []
    for position, stmt in enumerate(node.stmts):
        targets = _pure_copy_targets(stmt, facts, local)
        if (
            targets is None
            or _touched(node.stmts[:position], stores=False) & targets.keys()
            or not all(_covered(stmt, later, targets, loops) for later in node.stmts[position + 1 :])
        ):
            kept.append(stmt)
            continue
        nest = _nest_over_used_loops(loops, stmt)
        if nest is None:
            kept.append(stmt)
            continue
        hoisted.append(nest)
    sunk: Stmt | None = None
    if len(kept) >= 2 and _sinkable(kept[-1], kept[:-1], loops):
        sunk, kept = kept[-1], kept[:-1]
    if not hoisted and sunk is None:
        return _last_copy_once(loops, list(node.stmts), facts, local)
    parts = hoisted + [_nest(loops, kept)]
    if sunk is not None:
        parts.append(_nest(loops, [sunk]))
    return parts


def _last_copy_once(loops: list[For], stmts: list[Stmt], facts: Facts, local: set[int]) -> list[Stmt] | None:
    """A copy-back at the end of a nest that does not use the innermost loops (every thread
    writing back the whole tile) run once, after those loops::

        for p, u: S; X[idx(p)] = Y[idx(p)]   ->   for p: (for u: S); X[idx(p)] = Y[idx(p)]

    Only its last execution per ``p`` shows: the earlier ones write the same elements of ``X``,
    which only the copy writes and nothing in the nest reads, and the last one reads ``Y`` after
    every ``u``, as it does here. The inner loops must run (constant extents >= 1)."""
    last = stmts[-1]
    targets = _pure_copy_targets(last, facts, local, source_may_change=True)
    if targets is None or _touched(stmts, stores=False) & targets.keys():
        return None
    used = {id(v) for v in free_vars(last)}
    cut = len(loops)
    while cut > 0 and id(loops[cut - 1].loop_var) not in used:
        cut -= 1
    inner, outer = loops[cut:], loops[:cut]
    if not inner:
        return None
    if not all(_runs(loop) for loop in inner):
        return None
    if not outer:
        return [_nest(inner, stmts[:-1]), last]
    return [_nest(outer, [_nest(inner, stmts[:-1]), last])]


def _runs(loop: For) -> bool:
    """Whether ``loop`` runs at least once whatever the values around it (constant extent >= 1)."""
    return isinstance(loop.extent, IntImm) and loop.extent.value >= 1


def _loop_ranges(loops: list[For]) -> dict[Var, Range]:
    return {loop.loop_var: Range(loop.min, loop.extent) for loop in loops}


def _loop_analyzer(loops: list[For]) -> Analyzer:
    analyzer = Analyzer()
    for var, rng in _loop_ranges(loops).items():
        analyzer.bind(var, rng)
    return analyzer


def _nest(loops: list[For], stmts: list[Stmt]) -> Stmt:
    body: Stmt = stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))
    for outer in reversed(loops):
        body = replace(outer, body=body)
    return body


def _sinkable(last: Stmt, earlier: list[Stmt], loops: list[For]) -> bool:
    """Whether ``last`` can run after every iteration of ``earlier`` instead of after each:
    ``earlier`` neither reads nor writes what ``last`` writes, and what ``last`` reads of the
    buffers ``earlier`` writes, at an iteration of ``loops``, lies inside what ``earlier``
    writes at that iteration (a box every element of which is stored), elements that no other
    iteration writes (the stores determine every loop of ``loops``). Each element ``last`` reads
    then holds, both ways, the value that iteration left."""
    earlier_writes = _touched(earlier, stores=True)
    earlier_reads = _touched(earlier, stores=False)
    last_writes = _touched([last], stores=True)
    if last_writes & (earlier_writes | earlier_reads):
        return False
    shared = _touched([last], stores=False) & earlier_writes
    if not shared:
        return False  # independent statements: nothing gained by moving one
    reads = _accesses(last, shared, stores=False)
    if reads is None:
        return False
    writes: list[_Access] = []
    for stmt in earlier:
        found = _accesses(stmt, shared, stores=True)
        if found is None:
            return False
        writes += found
    outer_ranges = _loop_ranges(loops)
    moving = [outer.loop_var for outer in loops if not is_const_int(outer.extent, 1)]
    for write in writes:
        found_vars = {id(v) for v in determined_vars(list(write.indices), {**outer_ranges, **write.dom})}
        if any(id(v) not in found_vars for v in moving):
            return False  # two iterations might write one element
    analyzer = _loop_analyzer(loops)
    boxes = [(write.buffer, _written_box(write, outer_ranges)) for write in writes]
    for read in reads:
        want = relax_region(read.indices, read.dom, read.buffer.shape)
        if not any(buffer is read.buffer and box and _inside(analyzer, want, box) for buffer, box in boxes):
            return False
    return True


def _written_box(write: _Access, outer_ranges: dict[Var, Range]) -> list[Range] | None:
    """The box a store fills at one iteration of the outer loops (every element of it written: an
    unguarded store whose indices are an iter map without gaps, independent per index), or None.
    A hull would claim elements a strided or guarded store skips."""
    if write.guarded:
        return None
    found = detect_iter_map(list(write.indices), write.dom, var_ranges=outer_ranges)
    if not found.ok or not found.predicate_applied:
        return None
    return found.ranges


def _inside(analyzer: Analyzer, want: tuple[Range, ...] | list[Range], have: tuple[Range, ...] | list[Range]) -> bool:
    return all(
        analyzer.can_prove(r.min >= w.min) and analyzer.can_prove(r.min + r.extent <= w.min + w.extent)
        for w, r in zip(have, want)
    )


def _touched(stmts: Sequence[Stmt], stores: bool) -> set[int]:
    found: set[int] = set()
    kind = BufferStore if stores else BufferLoad

    def visit(node: object) -> None:
        if isinstance(node, kind):
            found.add(id(node.buffer))  # type: ignore[attr-defined]

    for stmt in stmts:
        post_order_visit(stmt, visit)
    return found


def _local_buffers(stmt: Stmt) -> set[int]:
    """Buffers allocated inside ``stmt`` (they do not outlive an iteration)."""
    found: set[int] = set()

    def visit(node: object) -> None:
        if isinstance(node, Block):
            found.update(id(buffer) for buffer in node.alloc_buffers)
        elif isinstance(node, Allocate):
            found.add(id(node.buffer))

    post_order_visit(stmt, visit)
    return found


def _pure_copy_targets(
    stmt: Stmt, facts: Facts, local: set[int], source_may_change: bool = False
) -> dict[int, Buffer] | None:
    """The buffers ``stmt`` writes when it is a pure copy (module docstring), else None.
    ``source_may_change``: the buffers copied from may be written elsewhere."""
    targets: dict[int, Buffer] = {}
    counts: dict[int, int] = {}

    def check(node: Stmt) -> bool:
        if isinstance(node, For):
            return not buffer_loads((node.min, node.extent)) and check(node.body)
        if isinstance(node, SeqStmt):
            return all(check(item) for item in node.stmts)
        if isinstance(node, BlockRealize):
            block = node.block
            trivial = is_const_int(node.predicate, 1)
            plain = block.init is None and not block.alloc_buffers and not block.match_buffers
            return trivial and plain and not buffer_loads(node.iter_values) and check(block.body)
        if isinstance(node, BufferStore):
            value = node.value.value if isinstance(node.value, Cast) else node.value
            if not isinstance(value, BufferLoad) or value.buffer is node.buffer:
                return False
            changing = facts.stores.get(id(value.buffer), 0) and not source_may_change
            if changing or id(value.buffer) in local or id(node.buffer) in local:
                return False
            if len(value.indices) != len(node.indices) or buffer_loads(node.indices):
                return False
            if not all(structural_equal(a, b) for a, b in zip(value.indices, node.indices)):
                return False
            targets[id(node.buffer)] = node.buffer
            counts[id(node.buffer)] = counts.get(id(node.buffer), 0) + 1
            return True
        return False

    if not check(stmt):
        return None
    if any(facts.stores.get(key, 0) != count for key, count in counts.items()):
        return None  # another statement writes the same buffer
    return targets


# ---------------------------------------------------------------- regions


@dataclass(frozen=True)
class _Access:
    """One access, its indices in terms of the outer loops and the loops inside the statement
    (``dom``), block iterators replaced by their bindings."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dom: dict[Var, Range]
    #: Under a block predicate or an ``if``: it may not happen at every point of ``dom``.
    guarded: bool = False


def _accesses(stmt: Stmt, targets: Collection[int], stores: bool) -> list[_Access] | None:
    """Every load (``stores`` False) or store (True) of a target buffer (by id) under ``stmt``; None when
    a statement kind is not understood (the caller then proves nothing)."""
    found: list[_Access] = []

    def expressions(exprs: object, vmap: dict[Var, PrimExpr], dom: dict[Var, Range]) -> None:
        if stores:
            return
        for load in buffer_loads(exprs):
            if id(load.buffer) in targets:
                found.append(_Access(load.buffer, tuple(substitute(i, vmap) for i in load.indices), dict(dom)))

    def walk(node: Stmt, vmap: dict[Var, PrimExpr], dom: dict[Var, Range], guarded: bool) -> bool:
        if isinstance(node, SeqStmt):
            return all(walk(item, vmap, dom, guarded) for item in node.stmts)
        if isinstance(node, For):
            low, extent = substitute(node.min, vmap), substitute(node.extent, vmap)
            expressions((node.min, node.extent), vmap, dom)
            return walk(node.body, vmap, {**dom, node.loop_var: Range(low, extent)}, guarded)
        if isinstance(node, BlockRealize):
            expressions((node.iter_values, node.predicate), vmap, dom)
            inner = dict(vmap)
            for iter_var, value in zip(node.block.iter_vars, node.iter_values):
                inner[iter_var.var] = substitute(value, vmap)
            block = node.block
            if block.match_buffers:
                return False
            guarded = guarded or not is_const_int(node.predicate, 1)
            if block.init is not None and not walk(block.init, inner, dom, guarded):
                return False
            return walk(block.body, inner, dom, guarded)
        if isinstance(node, BufferStore):
            expressions((node.value, node.indices), vmap, dom)
            if stores and id(node.buffer) in targets:
                indices = tuple(substitute(i, vmap) for i in node.indices)
                found.append(_Access(node.buffer, indices, dict(dom), guarded))
            return True
        if isinstance(node, IfThenElse):
            expressions(node.condition, vmap, dom)
            then_ok = walk(node.then_case, vmap, dom, True)
            return then_ok and (node.else_case is None or walk(node.else_case, vmap, dom, True))
        if isinstance(node, LetStmt):
            expressions(node.value, vmap, dom)
            return walk(node.body, {**vmap, node.var: substitute(node.value, vmap)}, dom, guarded)
        if isinstance(node, Evaluate):
            expressions(node.value, vmap, dom)
            return True
        if isinstance(node, Allocate):
            return walk(node.body, vmap, dom, guarded)
        return False

    return found if walk(stmt, {}, {}, False) else None


def _covered(copy: Stmt, reader: Stmt, targets: Collection[int], loops: list[For]) -> bool:
    """Whether each read of a target by ``reader``, at any iteration of ``loops``, lies inside
    what ``copy`` writes at that iteration."""
    reads = _accesses(reader, targets, stores=False)
    if reads is None:
        return False
    if not reads:
        return True
    writes = _accesses(copy, targets, stores=True)
    if not writes:
        return False
    analyzer, outer_ranges = _loop_analyzer(loops), _loop_ranges(loops)
    for read in reads:
        written = [w for w in writes if w.buffer is read.buffer]
        if len(written) != 1:
            return False  # a union of several stores is not worth proving here
        box = _written_box(written[0], outer_ranges)
        if box is None or not _inside(analyzer, relax_region(read.indices, read.dom, read.buffer.shape), box):
            return False
    return True


def _nest_over_used_loops(loops: list[For], stmt: Stmt) -> Stmt | None:
    """``stmt`` inside the loops of ``loops`` it uses (and those their bounds use). A loop left
    out must run at least once (constant extent >= 1), or the copy would run where it never did."""
    used = {id(v) for v in free_vars(stmt)}
    keep = [False] * len(loops)
    changed = True
    while changed:
        changed = False
        for k, outer in enumerate(loops):
            if not keep[k] and id(outer.loop_var) in used:
                keep[k] = changed = True
                used |= {id(v) for v in free_vars((outer.min, outer.extent))}
    if not all(keep[k] or _runs(outer) for k, outer in enumerate(loops)):
        return None
    body = stmt
    for k in reversed(range(len(loops))):
        if keep[k]:
            body = replace(loops[k], body=body)
    return body


__all__ = ["Facts", "distribute", "function_facts"]
