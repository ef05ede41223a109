"""Schedule primitives: blockize, tensorize."""

from __future__ import annotations

from tir.analysis import infer_block_access
from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer, simplify
from tir.arith.iter_map import detect_iter_map, inverse_iter_map
from tir.intrin import IntrinError, TensorIntrin
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    For,
    IfThenElse,
    IterKind,
    IterVar,
    MatchBufferRegion,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    substitute,
)
from tir.ir.expr import GE, GT, LE, LT, Add, FloorDiv, IntImm, Mul, Sub, conjunction
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, LoopRV
from tir.schedule.primitives._binding_division import Division, DivisionError, divide_binding, rebuilt
from tir.schedule.primitives._common import doc_from, loop_target
from tir.schedule.primitives._expr_util import conjuncts, is_true, prove_equal, uses_any, var_ids
from tir.schedule.primitives._fresh_copy import Instantiator
from tir.schedule.primitives._init_order_util import check_init_order
from tir.schedule.primitives._tensorize_match import Matcher, MatchFailure, buffer_regions, show

# ===================================================================== blockize


def blockize(func: PrimFunc, loop_var: Var, primitive: str = "blockize") -> tuple[PrimFunc, str]:
    """Turn the subtree under ``loop`` into a block of its own, ``"<inner name>_o"``; returns it.

    The loops from ``loop`` inward must be perfectly nested around exactly one block (the
    *inner* block). Each binding of the inner block is divided (with iterator-map detection)
    into an *outer* part, a function of the loops outside ``loop``, and an *inner* part, a
    function of the loops from ``loop`` inward: ``v = v_o * F + v_i`` (plus a constant). The
    outer block gets an iterator ``v_o`` (of ``v``'s kind) bound to the outer part; the inner
    block gets ``v_i`` bound to the inner part, and its body reads ``v_o * F + v_i`` where it
    read ``v``. A binding with no inner part becomes ``v_o`` (the inner block loses ``v``);
    one with no outer part stays as it is. The outer block's reads and writes are the inner
    block's regions relaxed over the inner iterators.

    Refused when: the loops under ``loop`` hold anything but loops and one block; the range
    of a loop under ``loop`` depends on a loop outside it, or the inner block uses such a
    loop directly; a binding cannot be divided (``(i_o * 16 + i_i) // 3`` mixes the two
    parts, so does ``i_o + i_i * 8``); a predicate (``T.where``) conjunct mixes outer and
    inner loops in a way the outer iterators cannot express. Predicate conjuncts on outer
    loops only move to the outer block, the others stay on the inner block (outer loops
    replaced by the outer iterators); a conjunct of both that only grows with the inner loops
    (a split's ``o * 12 + i < 72``) also guards the outer block, with the inner loops at their
    start (``o * 12 < 72``), so no outer instance runs that no inner one would.

    ``T.init()``: the init moves to the outer block, as a loop nest over copies of the inner
    loops that drive spatial iterators (guarded by the predicate at the first reduction
    step); the inner block loses it. The outer block's reduce iterators are the outer parts
    of the reduce iterators, so the init runs on the first outer reduction step (every time
    when the reduction lies wholly inside). Refused when one inner loop drives both a spatial
    and a reduce iterator, when a reduce iterator does not start at its minimum where the
    inner loops start, or when the init uses the inner block's own buffers: in those cases
    decompose_reduction first. Refused too when the outer block's init could run after updates
    of the same output element (the loops outside fuse spatial with reduce iterators out of
    order; see ``reorder``).

    Before (``blockize(i_1)``)::

        for i_0, j_0, i_1, j_1 in T.grid(4, 4, 16, 16):
            with T.block("B"):
                vi = T.spatial_axis(64, i_0 * 16 + i_1)
                vj = T.spatial_axis(64, j_0 * 16 + j_1)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        for i_0, j_0 in T.grid(4, 4):
            with T.block("B_o"):
                vi_o, vj_o = T.remap("SS", i_0, j_0)
                T.reads(A[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
                T.writes(B[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
                for i_1, j_1 in T.grid(16, 16):
                    with T.block("B"):
                        vi_i, vj_i = T.remap("SS", i_1, j_1)
                        T.reads(A[vi_o * 16 + vi_i, vj_o * 16 + vj_i])
                        T.writes(B[vi_o * 16 + vi_i, vj_o * 16 + vj_i])
                        B[vi_o * 16 + vi_i, vj_o * 16 + vj_i] = A[vi_o * 16 + vi_i, vj_o * 16 + vj_i] * 2.0
    """
    index = TreeIndex(func)
    loop = index.loops.get(id(loop_var))
    if loop is None:
        raise ScheduleError(primitive, f"loop {loop_var.name}", "no such loop")
    target = loop_target(loop)

    def refuse(rule: str, fragment: object = loop) -> ScheduleError:
        return ScheduleError(primitive, target, rule, fragment)

    inner_loops: list[For] = []
    node: Stmt = loop
    while isinstance(node, For):
        inner_loops.append(node)
        node = node.body
    if not isinstance(node, BlockRealize):
        raise refuse(
            f"the loops from {loop.loop_var.name} inward must be perfectly nested around exactly one block; "
            f"found a {type(node).__name__} under loop {inner_loops[-1].loop_var.name}"
        )
    realize, block = node, node.block
    scope_loops = index.loops_above(realize)
    inner_ids = {id(item) for item in inner_loops}
    outer_loops = [item for item in scope_loops if id(item) not in inner_ids]
    inner_vars = [item.loop_var for item in inner_loops]
    outer_vars = [item.loop_var for item in outer_loops]
    for item in inner_loops:
        culprits = [v for v in outer_vars if uses_any((item.min, item.extent), [v])]
        if culprits:
            raise refuse(
                f"the range of loop {item.loop_var.name} depends on loop {culprits[0].name}, which stays outside the "
                "new block (the block could not see it)"
            )
    if uses_any((block.body, block.init, block.reads, block.writes, block.match_buffers), outer_vars):
        raise refuse(
            f"block {block.name!r} uses a loop variable outside {loop.loop_var.name} directly, not through a binding"
        )

    loop_dom = {item.loop_var: Range(item.min, item.extent) for item in scope_loops}
    divisions: list[Division] = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        try:
            divisions.append(divide_binding(value, iv.dom, inner_vars, loop_dom, f"the binding of {iv.var.name}"))
        except DivisionError as error:
            raise refuse(f"block {block.name!r}: {error}", realize) from None

    outer_ivs: list[IterVar] = []
    outer_values: list[PrimExpr] = []
    inner_ivs: list[IterVar] = []
    inner_values: list[PrimExpr] = []
    vmap: dict[Var, PrimExpr] = {}
    new_vars: list[tuple[Var | None, Var | None]] = []
    for iv, division in zip(block.iter_vars, divisions):
        outer_var = inner_var = None
        if division.kind in ("outer", "both"):
            outer_var = Var(f"{iv.var.name}_o", iv.var.dtype)
            assert division.outer is not None and division.outer_dom is not None
            outer_ivs.append(IterVar(outer_var, division.outer_dom, iv.kind))
            outer_values.append(division.outer)
        if division.kind == "inner":
            inner_var = iv.var
            inner_ivs.append(iv)
        elif division.kind == "both":
            inner_var = Var(f"{iv.var.name}_i", iv.var.dtype)
            assert division.inner_dom is not None
            inner_ivs.append(IterVar(inner_var, division.inner_dom, iv.kind))
        if division.inner is not None:
            inner_values.append(division.inner)
        if division.kind != "inner":
            vmap[iv.var] = rebuilt(division, outer_var, inner_var)
        new_vars.append((outer_var, inner_var))

    # Predicate conjuncts: outer-only ones guard the outer block; the others stay inside,
    # with the outer loops written through the outer iterators.
    outer_parts: list[PrimExpr] = []
    inner_parts: list[PrimExpr] = []
    inverse: dict[Var, PrimExpr] | None = None
    inner_dom = {item.loop_var: Range(item.min, item.extent) for item in inner_loops}
    inner_dom.update({iv.var: iv.dom for iv in outer_ivs})
    for part in conjuncts(realize.predicate):
        if not uses_any(part, inner_vars):
            outer_parts.append(part)
            continue
        if not uses_any(part, outer_vars):
            inner_parts.append(part)
            continue
        # The part also limits the outer instances: none of their inner iterations runs where
        # it fails with the inner loops at their start (when it only grows with them). Without
        # this, an outer iterator that the predicate kept inside its domain would leave it.
        first = _at_inner_start(part, inner_loops)
        if first is not None:
            first = simplify(first, loop_dom)
            if not is_true(first):
                outer_parts.append(first)
        if inverse is None:
            inverse = _outer_inverse(outer_ivs, outer_values, outer_loops)
        missing = [v for v in outer_vars if id(v) in var_ids(part) and v not in inverse]
        if missing:
            raise refuse(
                f"the predicate `{part}` of block {block.name!r} uses loop {missing[0].name} outside and loops inside "
                f"{loop.loop_var.name}, and {missing[0].name} cannot be written through the outer iterators",
                realize,
            )
        inner_parts.append(simplify(substitute(part, inverse), inner_dom))

    init: Stmt | None = None
    if block.init is not None:
        init = _outer_init(
            block, inner_loops, outer_ivs, inner_ivs, inner_values, divisions, new_vars, inner_parts, refuse
        )

    inner_block = substitute(block.replace(init=None), vmap).replace(iter_vars=tuple(inner_ivs))
    inner_realize = BlockRealize(tuple(inner_values), conjunction(inner_parts), inner_block)
    body: Stmt = inner_realize
    for item in reversed(inner_loops):
        body = item.replace(body=body)
    name = _unique_block_name(index, f"{block.name}_o")
    outer_block = Block(name, tuple(outer_ivs), (), (), body, init=init)
    reads, writes = infer_block_access(outer_block)
    outer_block = outer_block.replace(reads=reads, writes=writes)
    outer_realize = BlockRealize(tuple(outer_values), conjunction(outer_parts), outer_block)
    result = replace_stmt(index, loop, outer_realize)
    if init is not None:
        check_init_order(primitive, target, func, result, {name: block.name})
    return result, name


def _at_inner_start(part: PrimExpr, inner_loops: list[For]) -> PrimExpr | None:
    """``part`` with the inner loops at their start, when it holds for some inner iteration
    exactly if it holds there: ``e < b`` or ``e <= b`` with ``e`` non-decreasing in every inner
    loop and ``b`` free of them (as a split's ``T.where`` is); else None."""
    inner_ids = {id(item.loop_var) for item in inner_loops}
    if isinstance(part, (GT, GE)):
        part = (LT if isinstance(part, GT) else LE)(part.b, part.a)
    if not isinstance(part, (LT, LE)) or var_ids(part.b) & inner_ids or not _non_decreasing(part.a, inner_ids):
        return None
    return substitute(part, {item.loop_var: item.min for item in inner_loops})


def _non_decreasing(expr: PrimExpr, inner_ids: set[int]) -> bool:
    """Whether ``expr`` provably does not decrease as any variable of ``inner_ids`` grows."""
    if not var_ids(expr) & inner_ids or isinstance(expr, Var):
        return True
    if isinstance(expr, Add):
        return _non_decreasing(expr.a, inner_ids) and _non_decreasing(expr.b, inner_ids)
    if isinstance(expr, Sub):
        return _non_decreasing(expr.a, inner_ids) and not var_ids(expr.b) & inner_ids
    if isinstance(expr, Mul):
        for scale, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(scale, IntImm) and scale.value >= 0:
                return _non_decreasing(other, inner_ids)
        return False
    if isinstance(expr, FloorDiv) and isinstance(expr.b, IntImm) and expr.b.value > 0:
        return _non_decreasing(expr.a, inner_ids)
    return False


def _unique_block_name(index: TreeIndex, wanted: str, taken: set[str] | None = None) -> str:
    names = set(index.blocks) if taken is None else taken
    name, k = wanted, 1
    while name in names:
        name = f"{wanted}_{k}"
        k += 1
    return name


def _outer_inverse(
    outer_ivs: list[IterVar], outer_values: list[PrimExpr], outer_loops: list[For]
) -> dict[Var, PrimExpr]:
    """Outer loop variables as expressions of the outer iterators, where the outer bindings
    determine them."""
    inverse: dict[Var, PrimExpr] = {}
    for iv, value in zip(outer_ivs, outer_values):
        if isinstance(value, Var):
            inverse.setdefault(value, iv.var)
    used: set[int] = set().union(*(var_ids(v) for v in outer_values)) if outer_values else set()
    dom = {item.loop_var: Range(item.min, item.extent) for item in outer_loops if id(item.loop_var) in used}
    if dom and outer_values:
        result = detect_iter_map(outer_values, dom, check_level="bijective")
        if result.ok:
            try:
                found = inverse_iter_map(result, [iv.var for iv in outer_ivs])
            except ValueError:
                found = {}
            for var, expr in found.items():
                inverse.setdefault(var, expr)
    return inverse


def _outer_init(
    block: Block,
    inner_loops: list[For],
    outer_ivs: list[IterVar],
    inner_ivs: list[IterVar],
    inner_values: list[PrimExpr],
    divisions: list[Division],
    new_vars: list[tuple[Var | None, Var | None]],
    inner_parts: list[PrimExpr],
    refuse: object,
) -> Stmt:
    """The inner block's init as a loop nest for the outer block (see ``blockize``)."""
    assert block.init is not None and callable(refuse)
    advice = "decompose_reduction first"
    own = {id(b) for b in block.alloc_buffers} | {id(m.buffer) for m in block.match_buffers}
    used_buffers: set[int] = set()

    from tir.ir import post_order_visit

    post_order_visit(block.init, lambda n: used_buffers.add(id(n)) if isinstance(n, Buffer) else None)
    if own & used_buffers:
        raise refuse(f"the init of block {block.name!r} uses a buffer the block declares itself; {advice}")
    spatial_values = [v for iv, v in zip(inner_ivs, inner_values) if iv.kind is not IterKind.REDUCE]
    reduce_values = [v for iv, v in zip(inner_ivs, inner_values) if iv.kind is IterKind.REDUCE]
    copied: list[For] = []
    for item in inner_loops:
        spatial = uses_any(spatial_values, [item.loop_var])
        reduce = uses_any(reduce_values, [item.loop_var])
        if spatial and reduce:
            raise refuse(
                f"loop {item.loop_var.name} drives both spatial and reduce iterators of block {block.name!r}, so its "
                f"init cannot become a loop nest of the outer block; {advice}"
            )
        if spatial:
            copied.append(item)
    copied_ids = {id(item) for item in copied}
    left = [item for item in inner_loops if id(item) not in copied_ids]
    rename: dict[Var, PrimExpr] = {item.loop_var: Var(item.loop_var.name, item.loop_var.dtype) for item in copied}
    at_start: dict[Var, PrimExpr] = {item.loop_var: item.min for item in left}
    for item in copied:
        if uses_any((item.min, item.extent), [other.loop_var for other in left]):
            raise refuse(f"the range of loop {item.loop_var.name} depends on a reduction loop; {advice}")
    full = {**rename, **at_start}
    analyzer = Analyzer()
    for item in inner_loops:
        analyzer.bind(item.loop_var, Range(item.min, item.extent))
    for iv, value in zip(inner_ivs, inner_values):
        if iv.kind is IterKind.REDUCE and not prove_equal(analyzer, substitute(value, at_start), iv.dom.min):
            raise refuse(
                f"reduce iterator {iv.var.name} of block {block.name!r} does not start at its minimum where the inner "
                f"loops start, so the init cannot run before the first reduction step; {advice}"
            )
    init_map: dict[Var, PrimExpr] = {}
    inner_iter = iter(inner_values)
    for iv, division, (outer_var, _inner) in zip(block.iter_vars, divisions, new_vars):
        inner_value = None
        if division.inner is not None:
            inner_value = substitute(next(inner_iter), full)
        init_map[iv.var] = rebuilt(division, outer_var, inner_value)
    init: Stmt = substitute(block.init, init_map)
    # The init runs when the outer reduce iterators are at their minimum.
    first_step = {iv.var: iv.dom.min for iv in outer_ivs if iv.kind is IterKind.REDUCE}
    guard = [simplify(substitute(part, {**full, **first_step})) for part in inner_parts]
    guard = [part for part in guard if not is_true(part)]
    if guard:
        init = IfThenElse(conjunction(guard), init)
    for item in reversed(copied):
        new_var = rename[item.loop_var]
        assert isinstance(new_var, Var)
        init = For(
            new_var, substitute(item.min, rename), substitute(item.extent, rename), item.kind, init, item.thread_tag
        )
    return init


# ===================================================================== tensorize


def tensorize(func: PrimFunc, target: str | Var, intrin_name: str) -> PrimFunc:
    """Replace a block's body (or a loop's subtree) by a tensor intrinsic's implementation.

    ``target`` is a block name or a loop variable; a loop is blockized first (``blockize``),
    and its new block is tensorized. The intrinsic (``tir.intrin.TensorIntrin.get``) has a
    description and an implementation; the block's body (its loop nest and inner blocks)
    must match the description's body node for node, up to the names of loop variables and
    iterators, where each access ``X[e]`` of the block is compared as ``X_view[e - r.min]``
    with ``r`` the block's region of ``X`` (the hull of its ``T.reads`` / ``T.writes`` of X).
    The description's buffer parameters are matched to the block's buffers by where they
    appear; each must have the dtype of its buffer, a scope equal to its buffer's (unless the
    description says ``"global"``: any scope), and a shape equal to the region's extents.

    On a match the block keeps its iterators, signature and ``T.init()``; its body becomes
    the implementation's body, whose buffer parameters are bound as ``T.match_buffer`` views
    of the block's regions (lowering turns view accesses back into accesses of the source
    buffers). On a mismatch, a ScheduleError shows the first pair of differing nodes
    (intrinsic side and block side) and a likely fix: a unit loop to remove, padding needed
    (pad_einsum), a scope to stage (cache_read / cache_write / set_scope), a dtype, or a
    different computation. An unknown intrinsic name is refused with the closest names.
    Whether a target can run the implementation is checked when building.

    Before (``tensorize(i_1, "test_mm4")``; the intrinsic's description is the 4 x 4 x 4
    ``C[i, j] += A[i, k] * B[k, j]``, its implementation vectorized over ``j``)::

        for i_0, j_0, k_0, i_1, j_1, k_1 in T.grid(4, 4, 4, 4, 4, 4):
            with T.block("C"):
                vi = T.spatial_axis(16, i_0 * 4 + i_1)
                vj = T.spatial_axis(16, j_0 * 4 + j_1)
                vk = T.reduce_axis(16, k_0 * 4 + k_1)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    After::

        for i_0, j_0, k_0 in T.grid(4, 4, 4):
            with T.block("C_o"):
                vi_o, vj_o, vk_o = T.remap("SSR", i_0, j_0, k_0)
                T.reads(C[vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4], A[vi_o * 4:vi_o * 4 + 4, vk_o * 4:vk_o * 4 + 4], B[vk_o * 4:vk_o * 4 + 4, vj_o * 4:vj_o * 4 + 4])
                T.writes(C[vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4])
                A_1 = T.match_buffer(A[vi_o * 4:vi_o * 4 + 4, vk_o * 4:vk_o * 4 + 4], (4, 4), "float32")
                B_1 = T.match_buffer(B[vk_o * 4:vk_o * 4 + 4, vj_o * 4:vj_o * 4 + 4], (4, 4), "float32")
                C_1 = T.match_buffer(C[vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4], (4, 4), "float32")
                for i, k in T.grid(4, 4):
                    C_1[i, T.ramp(0, 1, 4)] = C_1[i, T.ramp(0, 1, 4)] + T.broadcast(A_1[i, k], 4) * B_1[k, T.ramp(0, 1, 4)]
    """
    if isinstance(target, Var):
        where = f"loop {target.name}"
    else:
        where = f"block {target!r}"
    try:
        intrin = TensorIntrin.get(intrin_name)
    except IntrinError as error:
        raise ScheduleError("tensorize", where, str(error)) from None
    if isinstance(target, Var):
        func, name = blockize(func, target, primitive="tensorize")
        where = f"loop {target.name} (blockized as block {name!r})"
    else:
        name = target
    index = TreeIndex(func)
    realize = index.blocks.get(name)
    if realize is None:
        raise ScheduleError("tensorize", where, "no such block")
    if realize is func.body:
        raise ScheduleError("tensorize", where, "cannot tensorize the root block")
    block = realize.block
    desc_root, impl_root = intrin.desc.root_block, intrin.impl.root_block
    if desc_root is None or impl_root is None:
        raise ScheduleError("tensorize", where, f"intrinsic {intrin_name!r}: desc and impl must have a root block")
    if desc_root.init is not None or impl_root.init is not None or impl_root.match_buffers:
        raise ScheduleError(
            "tensorize",
            where,
            f"intrinsic {intrin_name!r}: a T.init() or match_buffer in the root block of its desc or impl is not supported",
        )
    matcher = Matcher(intrin.desc.buffer_params, buffer_regions(block))
    try:
        matcher.match(desc_root.body, block.body)
    except MatchFailure as failure:
        raise ScheduleError(
            "tensorize",
            where,
            f"block {name!r} does not match the description of intrinsic {intrin_name!r}: {failure.reason}",
            _mismatch_text(failure, name),
        ) from None
    desc_params, impl_params = intrin.desc.buffer_params, intrin.impl.buffer_params
    for param in desc_params:
        if id(param) not in matcher.buffer_map:
            raise ScheduleError(
                "tensorize", where, f"intrinsic {intrin_name!r}: its description never uses its parameter {param.name}"
            )
    views: list[MatchBufferRegion] = []
    buffer_map: dict[int, Buffer] = {}
    inst = Instantiator({}, lambda n: n)
    for desc_param, impl_param in zip(desc_params, impl_params):
        actual = matcher.buffer_map[id(desc_param)]
        region = matcher.regions[id(actual)][1]
        view = inst.fresh_buffer(impl_param).replace(scope=actual.scope)
        views.append(MatchBufferRegion(view, BufferRegion(actual, region)))
        buffer_map[id(impl_param)] = view
    removed = {r.block.name for r in _blocks_under(block.body)}
    taken = {n for n in index.blocks if n not in removed}

    def rename(wanted: str) -> str:
        fresh = _unique_block_name(index, wanted, taken)
        taken.add(fresh)
        return fresh

    inst.buffers.update(buffer_map)
    inst.rename = rename
    allocs = tuple(inst.fresh_buffer(b) for b in impl_root.alloc_buffers)
    body = inst.visit(impl_root.body)
    new_block = block.replace(
        body=body, match_buffers=block.match_buffers + tuple(views), alloc_buffers=block.alloc_buffers + allocs
    )
    return replace_stmt(index, block, new_block)


def _blocks_under(stmt: Stmt) -> list[BlockRealize]:
    found: list[BlockRealize] = []

    from tir.ir import post_order_visit

    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, BlockRealize) else None)
    return found


def _mismatch_text(failure: MatchFailure, block_name: str) -> str:
    def indent(text: str) -> str:
        lines = text.splitlines() or [""]
        if len(lines) > 12:
            lines = lines[:12] + [f"... ({len(lines) - 12} more lines)"]
        return "\n".join("    " + line for line in lines)

    desc = failure.desc if isinstance(failure.desc, str) else show(failure.desc)
    actual = failure.block if isinstance(failure.block, str) else show(failure.block)
    return f"intrinsic (desc):\n{indent(desc)}\nblock {block_name!r}:\n{indent(actual)}\nlikely fix: {failure.hint}"


class BlockizePrimitives:
    """Schedule methods for blockize, tensorize."""

    @doc_from(blockize)
    def blockize(self, loop: LoopRV) -> BlockRV:  # type: ignore[misc]
        node = self.resolve_loop(loop, "blockize")  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "blockize", (loop,), {}, lambda func: blockize(func, node.loop_var)
        )

    @doc_from(tensorize)
    def tensorize(self, block_or_loop: BlockRV | LoopRV, intrin_name: str) -> None:  # type: ignore[misc]
        target: str | Var
        if isinstance(block_or_loop, LoopRV):
            target = self.resolve_loop(block_or_loop, "tensorize").loop_var  # type: ignore[attr-defined]
        else:
            target = self.resolve_block(block_or_loop, "tensorize").block.name  # type: ignore[attr-defined]
        if not isinstance(intrin_name, str):
            raise ScheduleError("tensorize", repr(intrin_name), "the intrinsic must be given by its registered name")
        self._apply(  # type: ignore[attr-defined]
            "tensorize", (block_or_loop, intrin_name), {}, lambda func: tensorize(func, target, intrin_name)
        )
