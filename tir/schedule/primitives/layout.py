"""Schedule primitives: reindex, transform_layout, transform_block_layout, pad_einsum.

These change how data and iterations are laid out, never what is computed:

- ``reindex`` puts a copy of one buffer access in a new buffer indexed by the block's own
  iterators (the step that shows conv2d as a matmul, TensorIR's "ReIndex");
- ``transform_layout`` moves an allocated buffer to a new layout given by an index map;
- ``transform_block_layout`` remaps a block's iteration space by an index map, replacing its
  loops;
- ``pad_einsum`` pads an einsum-like block's iteration space (and its operands) to multiples.

Index maps are Python lambdas (``lambda i, j: (i // 16, j, i % 16)``), their text, or
``tir.schedule.index_map.IndexMap`` objects; the trace stores the text, so traces stay JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tir.analysis import infer_block_access
from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer, RangeRelaxer, eval_interval, simplify
from tir.arith.iter_map import inverse_iter_map
from tir.ir import (
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    DataType,
    Div,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    IterKind,
    IterVar,
    LetStmt,
    Mul,
    Or,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    const,
    free_vars,
    is_const_int,
    post_order_visit,
    replace_buffers,
    substitute,
)
from tir.ir.expr import Add
from tir.ir.functor import contains
from tir.ir.stmt import seq
from tir.ir.structural import structural_equal
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.index_map import IndexMap, IndexMapError
from tir.schedule.primitives._cache_util import clamp_region
from tir.schedule.primitives._common import block_target, doc_from, loop_dom_map
from tir.schedule.primitives._init_order_util import check_init_order
from tir.schedule.primitives._layout_util import (
    Access,
    ReplaceStmts,
    accesses_in,
    allocating_block,
    bijective_box_image,
    block_accesses,
    block_header,
    body_stmts,
    buffer_names,
    defined_in_scope,
    find_block,
    has_ramp,
    is_true,
    normalize_buffer_arg,
    outer_vars,
    path_to_scope,
    range_text,
    region_buffer,
    scope_of,
    stores_unconditionally,
    top_position,
    touches,
    trivial_loop_nest,
    unique_name,
)
from tir.schedule.primitives.axis_separator import set_axis_separator
from tir.script.printer import to_script

IndexMapLike = IndexMap | str | Callable[..., Any]


# ---------------------------------------------------------------- shared builders


def _point(buffer: Buffer, indices: Sequence[PrimExpr]) -> BufferRegion:
    return BufferRegion.point(buffer, tuple(indices))


def _copy_nest(
    name: str,
    iter_vars: Sequence[IterVar],
    extents: Sequence[PrimExpr],
    make_body: Callable[[dict[Var, PrimExpr]], tuple[BufferStore, tuple[BufferRegion, ...], BufferRegion]],
) -> Stmt:
    """A loop nest ``ax0, ax1, ...`` over ``extents`` around a block ``name`` whose spatial
    iterators (fresh, named after ``iter_vars``) are bound to the loops. ``make_body`` gets the
    map old iterator -> new iterator and returns the store, the reads and the write."""
    new_iters = []
    loop_vars = []
    vmap: dict[Var, PrimExpr] = {}
    for k, (iter_var, extent) in enumerate(zip(iter_vars, extents)):
        var = Var(iter_var.var.name, iter_var.var.dtype)
        vmap[iter_var.var] = var
        new_iters.append(IterVar(var, Range(const(0, extent.dtype), extent), IterKind.SPATIAL))
        loop_vars.append(Var(f"ax{k}", iter_var.var.dtype))
    store, reads, write = make_body(vmap)
    block = Block(name, tuple(new_iters), reads, (write,), store)
    stmt: Stmt = BlockRealize(tuple(loop_vars), const(True), block)
    for var, extent in reversed(list(zip(loop_vars, extents))):
        stmt = For(var, const(0, extent.dtype), extent, ForKind.SERIAL, stmt)
    return stmt


class _RedirectAccesses(IRMutator):
    """Loads and stores of ``old`` go to ``new`` at ``indices`` instead."""

    def __init__(self, old: Buffer, new: Buffer, indices: tuple[PrimExpr, ...]) -> None:
        self.old = old
        self.new = new
        self.indices = indices

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        if load.buffer is self.old:
            return BufferLoad(self.new, self.indices)
        return self.generic_visit(load)  # type: ignore[return-value]

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        if store.buffer is self.old:
            return BufferStore(self.new, self.visit(store.value), self.indices)
        return self.generic_visit(store)  # type: ignore[return-value]


def _show_access(access: Access) -> str:
    node = access.node
    text = f"{node.buffer.name}[{', '.join(str(i) for i in node.indices)}]"
    return ("store to " if access.is_store else "load of ") + text


def _outer_dom(index: TreeIndex, scope: BlockRealize) -> dict[Var, Range]:
    dom = loop_dom_map(index, scope)
    for node in [scope.block, *index.ancestors(scope.block)]:
        if isinstance(node, Block):
            for iv in node.iter_vars:
                dom[iv.var] = iv.dom
    return dom


# ---------------------------------------------------------------- reindex


def reindex(
    func: PrimFunc,
    block_name: str,
    buffer_kind: str,
    buffer_index: int,
    base_name: str | None = None,
    storage_scope: str | None = None,
    *,
    stale_copy_ok: bool = False,
) -> tuple[PrimFunc, str]:
    """Access a buffer of a block through a new buffer indexed by the block's iterators.

    For the block's ``buffer_index``-th read (``buffer_kind="read"``) or write buffer ``A``,
    accessed as ``A[f(v)]``, a new buffer ``A_reindex`` gets one dimension per block iterator
    that ``f`` uses (in block iterator order, the iterator's extent as size). A new block (also
    named ``A_reindex``) copies ``A_reindex[v...] = A[f(v)]`` right before the block's
    top-level statement in its scope (for a read), or ``A[f(v)] = A_reindex[v...]`` right after
    it (for a write), over the whole domain of those iterators; the block itself accesses
    ``A_reindex[v...]``. Returns the new block's name. This is how a convolution becomes a
    matmul: every operand is then indexed by plain iterators (see ``transform_block_layout``).

    Preconditions:

    - the block is not the root block, has iterators and none of them is opaque; it holds no
      nested blocks and no match_buffer view of ``A``;
    - every access of ``A`` in the block (body and init) uses the same indices ``f(v)``, a
      single point (no vector ``T.ramp``, no loads in the indices), and the block declares
      single-point regions of ``A``; ``f`` uses at least one iterator, each with a domain
      starting at 0, and no variable defined inside the block's scope other than them; the
      indices stay inside ``A`` over the whole domain of those iterators (the copy visits all
      of it, even where the block guards its access);
    - every value of those iterators runs (their bindings cover their domains over the loops
      inside the scope, a ``T.where`` included; no ``if`` or ``let`` between the block and its
      scope), so the copy touches exactly what the block touches;
    - a read buffer is not written by the block (reindex it as a write); a written buffer is
      stored unconditionally (not under an ``if`` or a loop, in the body or the init), and read
      by the block only after its ``T.init()`` stored to it;
    - ``A`` is defined in the block's scope, the block is not inside the scope's init, and
      nothing else in the block's top-level statement writes ``A`` (for a read) or touches
      ``A`` (for a write).

    Before (``reindex(C, ("read", 1))``: ``A``, read at ``[vi + vk]``)::

        for i, k in T.grid(8, 4):
            with T.block("C"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    C[vi] = 0.0
                C[vi] += A[vi + vk] * B[vk]

    After::

        A_reindex = T.alloc_buffer((8, 4), "float32")
        for ax0, ax1 in T.grid(8, 4):
            with T.block("A_reindex"):
                vi, vk = T.remap("SS", ax0, ax1)
                A_reindex[vi, vk] = A[vi + vk]
        for i, k in T.grid(8, 4):
            with T.block("C"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    C[vi] = 0.0
                C[vi] += A_reindex[vi, vk] * B[vk]
    """
    primitive = "reindex"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    block = realize.block
    scope = scope_of(index, realize, primitive)
    if not block.iter_vars:
        raise ScheduleError(
            primitive, target, "the block has no iterators (an opaque block): nothing to index a new buffer by"
        )
    opaque = [iv.var.name for iv in block.iter_vars if iv.kind is IterKind.OPAQUE]
    if opaque:
        raise ScheduleError(
            primitive,
            target,
            f"the block has opaque iterators {opaque}; only spatial and reduce iterators can index a buffer",
        )
    buffer = region_buffer(realize, buffer_kind, buffer_index, primitive)
    accesses, nested = block_accesses(block, buffer)
    if nested:
        raise ScheduleError(
            primitive,
            target,
            f"the block holds nested blocks ({nested[0].name!r}); reindex a block without them",
            block,
        )
    if any(match.source.buffer is buffer for match in block.match_buffers):
        raise ScheduleError(primitive, target, f"the block views {buffer.name} through a match_buffer", block)
    if not accesses:
        raise ScheduleError(primitive, target, f"the block declares {buffer.name} but never loads or stores it", block)
    pattern = accesses[0].indices
    for access in accesses[1:]:
        if not structural_equal(access.indices, pattern):
            raise ScheduleError(
                primitive,
                target,
                f"the block accesses {buffer.name} at different indices ({_show_access(accesses[0])}, "
                f"{_show_access(access)}); reindex needs one index pattern",
                block,
            )
    if has_ramp(pattern) or contains(pattern, BufferLoad):
        raise ScheduleError(
            primitive,
            target,
            f"the indices of {buffer.name} must be scalar expressions of the iterators (no T.ramp, no loads): "
            f"{_show_access(accesses[0])}",
        )
    for region in (*block.reads, *block.writes):
        if region.buffer is buffer and not all(
            isinstance(rng.extent, IntImm) and rng.extent.value == 1 for rng in region.region
        ):
            raise ScheduleError(
                primitive,
                target,
                f"each instance must access a single point of {buffer.name}, but the block declares the region "
                f"{to_script(region)}",
                block_header(realize),
            )
    iter_ids = {id(iv.var) for iv in block.iter_vars}
    outer = outer_vars(func, index, scope)
    used_ids = set()
    for var in free_vars(pattern):
        if id(var) in iter_ids:
            used_ids.add(id(var))
        elif id(var) not in outer:
            raise ScheduleError(
                primitive,
                target,
                f"the indices of {buffer.name} use {var.name}, which is neither an iterator of the block nor "
                "defined outside its scope",
                _show_access(accesses[0]),
            )
    used = [(k, iv) for k, iv in enumerate(block.iter_vars) if id(iv.var) in used_ids]
    if not used:
        raise ScheduleError(
            primitive, target, f"the indices of {buffer.name} use no iterator of the block: {_show_access(accesses[0])}"
        )
    analyzer = Analyzer()
    for _, iv in used:
        if not analyzer.can_prove_equal(iv.dom.min, 0):
            raise ScheduleError(
                primitive, target, f"the domain of iterator {iv.var.name} must start at 0 (it starts at {iv.dom.min})"
            )
    outer_dom = _outer_dom(index, scope)
    iter_dom = {iv.var: iv.dom for _, iv in used}
    bounds = Analyzer()
    for var, rng in outer_dom.items():
        bounds.bind(var, rng)
    for dim, (expr, extent) in enumerate(zip(pattern, buffer.shape)):
        low, high = eval_interval(expr, iter_dom)
        if not (bounds.can_prove(low >= 0) and bounds.can_prove(high < extent)):
            raise ScheduleError(
                primitive,
                target,
                f"index {dim} of {buffer.name}, {expr}, may leave [0, {extent}) as the iterators sweep their "
                "domains; the copy (over the whole domain) would access the buffer out of bounds",
                _show_access(accesses[0]),
            )
    reads_it = any(not a.is_store for a in accesses)
    writes_it = any(a.is_store for a in accesses)
    if buffer_kind == "read" and writes_it:
        raise ScheduleError(
            primitive,
            target,
            f'the block writes {buffer.name} as well; reindex it as a write buffer ("write", i)',
            block,
        )
    if buffer_kind == "write" and reads_it:
        init_stores = any(a.is_store for a in accesses_in(block.init, buffer))
        if not init_stores:
            raise ScheduleError(
                primitive,
                target,
                f"the block reads {buffer.name} without a T.init() that stores it first; the new buffer would "
                "start without the values it reads (reindex before decompose_reduction)",
                block,
            )
    if (
        buffer_kind == "write"
        and not stores_unconditionally(block.body, buffer)
        and not stores_unconditionally(block.init, buffer)
    ):
        raise ScheduleError(
            primitive,
            target,
            f"the block stores {buffer.name} only under a condition (an if or a loop); the copy back would "
            "write elements the block leaves alone",
            block,
        )
    _check_instances_cover(index, realize, scope, used, primitive)
    position = top_position(index, scope, realize)
    if position is None:
        raise ScheduleError(primitive, target, f"the block is inside the init of {scope.block.name!r}")
    if not defined_in_scope(func, index, scope, buffer):
        raise ScheduleError(
            primitive,
            target,
            f"{buffer.name} is not defined in the scope of block {scope.block.name!r} (allocated by the block itself?)",
        )
    stmts = body_stmts(scope.block)
    top = stmts[position]
    other_reads, other_writes = touches(top, buffer, skip=[realize])
    # stale_copy_ok: the caller moves the copy next to the block (reindex_cache_read/_write).
    if buffer_kind == "read" and other_writes and not stale_copy_ok:
        raise ScheduleError(
            primitive,
            target,
            f"another block in the same top-level statement writes {buffer.name}; a copy made before the statement "
            "would be stale",
            top,
        )
    if buffer_kind == "write" and (other_reads or other_writes) and not stale_copy_ok:
        raise ScheduleError(
            primitive,
            target,
            f"another block in the same top-level statement accesses {buffer.name}; it would miss what the block "
            "writes (the copy back comes after the statement)",
            top,
        )

    # (reindex_cache_read / _write name the copy after its scope and place it there.)
    base = base_name if base_name is not None else f"{buffer.name}_reindex"
    name = unique_name(base, buffer_names(func))
    copy_name = unique_name(base, set(index.blocks))
    used_iters = [iv for _, iv in used]
    scope_name = storage_scope if storage_scope is not None else buffer.scope
    new_buffer = Buffer(name, tuple(iv.dom.extent for iv in used_iters), buffer.dtype, scope_name)
    new_indices = tuple(iv.var for iv in used_iters)

    def copy_body(vmap: dict[Var, PrimExpr]) -> tuple[BufferStore, tuple[BufferRegion, ...], BufferRegion]:
        inner = tuple(vmap[iv.var] for iv in used_iters)
        outer_indices = tuple(substitute(index_expr, vmap) for index_expr in pattern)
        if buffer_kind == "read":
            store = BufferStore(new_buffer, BufferLoad(buffer, outer_indices), inner)
            return store, (_point(buffer, outer_indices),), _point(new_buffer, inner)
        store = BufferStore(buffer, BufferLoad(new_buffer, inner), outer_indices)
        return store, (_point(new_buffer, inner),), _point(buffer, outer_indices)

    copy = _copy_nest(copy_name, used_iters, [iv.dom.extent for iv in used_iters], copy_body)
    redirect = _RedirectAccesses(buffer, new_buffer, new_indices)
    new_block = block.replace(
        body=redirect.visit(block.body),
        init=redirect.visit(block.init) if block.init is not None else None,
        reads=tuple(_point(new_buffer, new_indices) if r.buffer is buffer else r for r in block.reads),
        writes=tuple(_point(new_buffer, new_indices) if r.buffer is buffer else r for r in block.writes),
    )
    new_top = ReplaceStmts({id(realize): realize.replace(block=new_block)}).visit(top)
    pieces = [copy, new_top] if buffer_kind == "read" else [new_top, copy]
    body = seq(*stmts[:position], *pieces, *stmts[position + 1 :])
    new_scope = scope.block.replace(body=body, alloc_buffers=(*scope.block.alloc_buffers, new_buffer))
    return replace_stmt(index, scope, scope.replace(block=new_scope)), copy_name


def _check_instances_cover(
    index: TreeIndex, realize: BlockRealize, scope: BlockRealize, used: list[tuple[int, IterVar]], primitive: str
) -> None:
    """Refuse unless, for each outer iteration of the scope, the block runs every value of the
    ``used`` iterators (the loops inside the scope, and the predicate, cover their domains)."""
    from tir.arith.iter_map import detect_iter_map

    target = block_target(realize)
    inner: dict[Var, Range] = {}
    for node in path_to_scope(index, realize, scope):
        if isinstance(node, For):
            inner[node.loop_var] = Range(node.min, node.extent)
        elif isinstance(node, (IfThenElse, LetStmt)):
            kind = "an if" if isinstance(node, IfThenElse) else "a let"
            raise ScheduleError(
                primitive,
                target,
                f"the block is under {kind} inside its scope; cannot tell which of its instances run",
                node,
            )
    bindings = [realize.iter_values[k] for k, _ in used]
    predicate: PrimExpr | bool = True if is_true(realize.predicate) else realize.predicate
    result = detect_iter_map(bindings, inner, predicate, "surjective", var_ranges=_outer_dom(index, scope))
    analyzer = Analyzer()
    problem = "; ".join(result.errors)
    if result.ok and not result.predicate_applied:
        problem = f"the predicate {realize.predicate} may skip instances"
    if result.ok and not problem:
        for (_, iv), rng in zip(used, result.ranges):
            if not (
                analyzer.can_prove_equal(rng.min, iv.dom.min) and analyzer.can_prove_equal(rng.extent, iv.dom.extent)
            ):
                problem = (
                    f"iterator {iv.var.name} takes the values {range_text(rng)} in its scope, "
                    f"not its whole domain {range_text(iv.dom)}"
                )
                break
    if problem:
        raise ScheduleError(
            primitive,
            target,
            "the block must run every value of the iterators the access uses, so the copy touches exactly what "
            f"the block touches: {problem}",
            block_header(realize),
        )


# ---------------------------------------------------------------- transform_layout


def transform_layout(
    func: PrimFunc,
    block_name: str,
    buffer_kind: str,
    buffer_index: int,
    index_map: IndexMapLike,
    pad_value: PadValue = None,
) -> PrimFunc:
    """Store a buffer in a new layout given by ``index_map``.

    The buffer is the block's ``buffer_index``-th read (``buffer_kind="read"``) or write; the
    change applies to every block that uses it. The new shape is the image of the old one
    under the map, which must send the old box ``[0, shape)`` one-to-one onto a box starting
    at 0 (decided with ``tir.arith.iter_map`` for quasi-affine maps, by enumeration for other
    maps of small constant shapes); a one-to-one map onto part of such a box is accepted too,
    the rest of the box being padding that no access reaches (``i -> (i // 4, i % 4)`` stores 14
    elements in a 4 x 4 buffer). Every access ``A[idx]`` becomes ``A[map(idx)]``
    (simplified under the iterator and loop ranges), every declared region is mapped (relaxed
    to a box when it is not a point), and the allocation gets the new shape.

    A function parameter may be transformed too (its shape constant): the signature changes, so
    callers pass and get back arrays in the new layout (as TVM's signature rewrite).

    A map written with TVM's ``IndexMap.AXIS_SEPARATOR`` between results
    (``lambda i, j: (i, IndexMap.AXIS_SEPARATOR, j)``) also gives the buffer those axis
    separators (see ``set_axis_separator``; the Schedule method records that as a separate
    ``set_axis_separator``). Without one, separators the buffer had stay if the number of
    dimensions does, and are dropped otherwise. The identity map with separators changes nothing
    else: of the preconditions below only the first applies to it (a viewed buffer may get
    separators this way), and the Schedule method records it as the ``set_axis_separator`` alone.

    Preconditions: the buffer is allocated in the function or is a parameter of constant
    shape, has no explicit strides or offset, is not viewed by a
    ``match_buffer``, is never accessed with a vector index (``T.ramp``), and the map takes one
    index per dimension and is a bijection onto a box from 0.

    Before (``transform_layout(C, ("read", 1), lambda k, j: (j // 16, k, j % 16))``)::

        B_global = T.alloc_buffer((64, 32), "float32")
        for ax0, ax1 in T.grid(64, 32):
            with T.block("B_global"):
                v0, v1 = T.remap("SS", ax0, ax1)
                B_global[v0, v1] = B[v0, v1]
        for i, j, k in T.grid(32, 32, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B_global[vk, vj]

    After::

        B_global = T.alloc_buffer((2, 64, 16), "float32")
        for ax0, ax1 in T.grid(64, 32):
            with T.block("B_global"):
                v0, v1 = T.remap("SS", ax0, ax1)
                B_global[v1 // 16, v0, v1 % 16] = B[v0, v1]
        for i, j, k in T.grid(32, 32, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B_global[vj // 16, vk, vj % 16]
    """
    primitive = "transform_layout"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    buffer = region_buffer(realize, buffer_kind, buffer_index, primitive)
    target = f"{block_target(realize)}, buffer {buffer.name}"
    is_param = any(param is buffer for param in func.params)
    if is_param:
        # The signature changes: callers pass (and get back) the array in the new layout.
        if buffer.const_shape() is None:
            raise ScheduleError(
                primitive,
                target,
                f"{buffer.name} is a parameter with a symbolic shape, which defines its size variables; "
                "cache_read / cache_write it first, then transform the copy",
            )
    elif allocating_block(func, buffer) is None:
        raise ScheduleError(
            primitive, target, f"{buffer.name} is not allocated by a block of the function (a match_buffer view?)"
        )
    index_map = _coerce_map(index_map, buffer.ndim, [s.dtype for s in buffer.shape], primitive, target)
    if index_map.axis_separators and _is_identity(index_map):
        # TVM's way to give axis separators alone: no access or view changes.
        return set_axis_separator(func, block_name, buffer_kind, buffer_index, index_map.axis_separators)
    if buffer.strides or buffer.elem_offset is not None:
        raise ScheduleError(
            primitive,
            target,
            f"{buffer.name} has explicit strides or an element offset (storage_align?); transform its layout first",
        )
    viewer = _match_buffer_user(func, buffer)
    if viewer is not None:
        raise ScheduleError(
            primitive,
            target,
            f"block {viewer.name!r} views {buffer.name} through a match_buffer; the view would not follow the layout",
        )
    accesses = _all_accesses(func, buffer)
    for access in accesses:
        if has_ramp(access.indices):
            raise ScheduleError(
                primitive, target, f"{buffer.name} is accessed with a vector index: {_show_access(access)}"
            )
    domain = [Range(const(0, extent.dtype), extent) for extent in buffer.shape]
    image = bijective_box_image(
        index_map, domain, primitive, target, f"the shape {list(map(str, buffer.shape))}", padding=True
    )
    if index_map.axis_separators:
        separators = index_map.axis_separators
        if separators[-1] > len(image.shape):
            raise ScheduleError(primitive, target, f"the map's axis separators {list(separators)} lie past its results")
    else:
        # Separators set earlier keep their meaning only if the dimensions do.
        separators = buffer.axis_separators if len(image.shape) == buffer.ndim else ()
    new_buffer = buffer.replace(shape=tuple(image.shape), axis_separators=separators)
    rewriter = _LayoutRewriter(buffer, new_buffer, index_map)
    params = tuple(new_buffer if param is buffer else param for param in func.params)
    result = func.replace(params=params, body=rewriter.visit(func.body))
    if pad_value is None or image.exact_cover:
        return result
    return _fill_padding(result, new_buffer, index_map, list(buffer.shape), pad_value, primitive, target)


#: The name ``pad_einsum`` gives the block copying a padded output back: ``<buffer>_unpad``.
UNPAD_SUFFIX = "_unpad"

#: TVM's ``pad_value``: a constant, or a function of the new buffer's indices (a lambda or its text).
PadValue = int | float | Callable[..., Any] | str | None


def _fill_padding(
    func: PrimFunc,
    buffer: Buffer,
    index_map: IndexMap,
    old_shape: list[PrimExpr],
    pad_value: PadValue,
    primitive: str,
    target: str,
) -> PrimFunc:
    """A block ``<B>_pad`` at the start of the buffer's scope storing ``pad_value`` into every
    element of the new layout that no old index maps to (the padding)."""
    new_vars = [Var(f"v{k}", extent.dtype) for k, extent in enumerate(buffer.shape)]
    padding = _padding_condition(index_map, old_shape, new_vars, primitive, target)
    if callable(pad_value) or isinstance(pad_value, str):
        value_map = _coerce_map(pad_value, buffer.ndim, [s.dtype for s in buffer.shape], primitive, target)
        if value_map.ndim_out != 1:
            raise ScheduleError(primitive, target, "pad_value must give one value per element")
        value = value_map.apply(new_vars)[0]
        if value.dtype != buffer.dtype:
            value = Cast(buffer.dtype, value)
    elif isinstance(pad_value, (bool, int, float)):
        value = const(pad_value, buffer.dtype)
    else:
        raise ScheduleError(
            primitive, target, f"pad_value must be a number or a function of the indices, got {pad_value!r}"
        )
    loop_vars = [Var(f"ax{k}", extent.dtype) for k, extent in enumerate(buffer.shape)]
    name = _unique_block_name(func, f"{buffer.name}_pad")
    block = Block(
        name,
        tuple(IterVar(v, Range(const(0, e.dtype), e), IterKind.SPATIAL) for v, e in zip(new_vars, buffer.shape)),
        reads=(),
        writes=(BufferRegion.point(buffer, tuple(new_vars)),),
        body=BufferStore(buffer, value, tuple(new_vars)),
    )
    reads, writes = infer_block_access(block)
    block = block.replace(reads=tuple(reads), writes=tuple(writes))
    predicate = substitute(padding, dict(zip(new_vars, loop_vars)))
    nest: Stmt = BlockRealize(tuple(loop_vars), simplify(predicate), block)
    for var, extent in reversed(list(zip(loop_vars, buffer.shape))):
        nest = For(var, const(0, extent.dtype), extent, ForKind.SERIAL, nest)
    index = TreeIndex(func)
    owner = allocating_block(func, buffer)
    scope = index.blocks[owner.name] if owner is not None else func.body
    assert isinstance(scope, BlockRealize)
    body = seq(nest, scope.block.body)
    return replace_stmt(index, scope, scope.replace(block=scope.block.replace(body=body)))


def _padding_condition(
    index_map: IndexMap, old_shape: list[PrimExpr], new_vars: list[Var], primitive: str, target: str
) -> PrimExpr:
    """The condition on the new indices that no old index maps there: the map inverted on the
    old box widened to the map's divisors (a bijection there), and the preimage outside the box."""
    # A parameter used only shifted (``(i + 1) // 8``) is inverted as the shifted value
    # ``q = i + c`` over ``[0, c + extent)`` (widened), then ``i = q - c``.
    shifts = [_constant_shift(index_map, param) for param in index_map.params]
    shifted = [Var(f"{param.name}_shifted", param.dtype) if c else param for param, c in zip(index_map.params, shifts)]
    results = [
        simplify(substitute(r, {p: q - c for p, q, c in zip(index_map.params, shifted, shifts) if c}))
        for r in index_map.results
    ]
    shifted_map = IndexMap(tuple(shifted), tuple(results))
    dom = {q: Range(const(0, extent.dtype), simplify(extent + c)) for q, extent, c in zip(shifted, old_shape, shifts)}
    widened = _widened_inverse(shifted_map, dom)
    if widened is None:
        raise ScheduleError(
            primitive,
            target,
            f"cannot tell the padding of the index map {index_map} (it has no quasi-affine inverse); "
            "leave pad_value out: the padding is then never read nor written",
        )
    result, _ = widened
    inverse = inverse_iter_map(result, list(new_vars))
    outside = []
    for q, extent, c in zip(shifted, old_shape, shifts):
        old = inverse[q]
        outside.append(old >= extent + c)
        if c:
            outside.append(old < c)
    condition = outside[0]
    for part in outside[1:]:
        condition = Or(condition, part)
    return condition


def _constant_shift(index_map: IndexMap, param: Var) -> int:
    """``c`` when every use of ``param`` in the map's results is ``param + c`` for one constant
    ``c > 0``, else 0."""
    shifts: set[int] = set()
    uses = shifted_uses = 0

    def note(node: object) -> None:
        nonlocal uses, shifted_uses
        if node is param:
            uses += 1
        elif isinstance(node, Add):
            for a, b in ((node.a, node.b), (node.b, node.a)):
                if a is param and isinstance(b, IntImm):
                    shifts.add(b.value)
                    shifted_uses += 1

    for result in index_map.results:
        post_order_visit(result, note)
    if uses != shifted_uses or len(shifts) != 1:
        return 0
    return max(shifts.pop(), 0)


def _widened_inverse(index_map: IndexMap, dom: dict[Var, Range]) -> tuple[Any, dict[Var, Range]] | None:
    """The bijective iterator map of ``index_map`` on ``dom`` with each extent rounded up to a
    multiple of the map's constant divisors (None when not found)."""
    import math

    from tir.arith.iter_map import detect_iter_map

    divisors: set[int] = set()

    def note(node: object) -> None:
        if isinstance(node, (FloorDiv, FloorMod)) and isinstance(node.b, IntImm) and node.b.value > 1:
            divisors.add(node.b.value)

    for result in index_map.results:
        post_order_visit(result, note)
    step = math.lcm(*divisors) if divisors else 1
    widened = {}
    for var, rng in dom.items():
        extent = rng.extent
        if isinstance(extent, IntImm) and extent.value % step:
            extent = IntImm(-(-extent.value // step) * step, extent.dtype)
        widened[var] = Range(rng.min, extent)
    found = detect_iter_map(list(index_map.results), widened, True, "bijective")
    return (found, widened) if found.ok else None


def _unique_block_name(func: PrimFunc, wanted: str) -> str:
    names = set(TreeIndex(func).blocks)
    name, k = wanted, 1
    while name in names:
        name = f"{wanted}_{k}"
        k += 1
    return name


def _is_identity(index_map: IndexMap) -> bool:
    return list(index_map.results) == list(index_map.params)


def _coerce_map(index_map: IndexMapLike, ndim: int, dtypes: Sequence[Any], primitive: str, target: str) -> IndexMap:
    try:
        return IndexMap.coerce(index_map, ndim, dtypes)
    except (IndexMapError, TypeError) as exc:
        raise ScheduleError(primitive, target, f"bad index map: {exc}") from exc


def _match_buffer_user(func: PrimFunc, buffer: Buffer) -> Block | None:
    from tir.ir import IRVisitor

    found: list[Block] = []

    class Find(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            if any(match.source.buffer is buffer for match in block.match_buffers):
                found.append(block)
            self.generic_visit(block)

    Find().visit(func.body)
    return found[0] if found else None


def _all_accesses(func: PrimFunc, buffer: Buffer) -> list[Access]:
    from tir.ir import IRVisitor

    found: list[Access] = []

    class Find(IRVisitor):
        def visit_BufferLoad(self, load: BufferLoad) -> None:
            if load.buffer is buffer:
                found.append(Access(load, False))
            self.generic_visit(load)

        def visit_BufferStore(self, store: BufferStore) -> None:
            if store.buffer is buffer:
                found.append(Access(store, True))
            self.generic_visit(store)

    Find().visit(func.body)
    return found


class _LayoutRewriter(IRMutator):
    """Every access and region of ``old`` mapped through ``index_map`` onto ``new``."""

    def __init__(self, old: Buffer, new: Buffer, index_map: IndexMap) -> None:
        self.old = old
        self.new = new
        self.index_map = index_map
        self.dom: dict[Var, Range] = {}

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.new if buffer is self.old else buffer

    def _scoped(self, entries: dict[Var, Range], visit: Callable[[], Any]) -> Any:
        saved = {var: self.dom[var] for var in entries if var in self.dom}
        self.dom.update(entries)
        try:
            return visit()
        finally:
            for var in entries:
                del self.dom[var]
            self.dom.update(saved)

    def visit_For(self, loop: For) -> Stmt:
        return self._scoped({loop.loop_var: Range(loop.min, loop.extent)}, lambda: self.generic_visit(loop))

    def visit_Block(self, block: Block) -> Stmt:
        return self._scoped({iv.var: iv.dom for iv in block.iter_vars}, lambda: self.generic_visit(block))

    def _map(self, indices: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        return tuple(simplify(expr, self.dom) for expr in self.index_map.apply(list(indices)))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        new = self.generic_visit(load)
        assert isinstance(new, BufferLoad)
        if load.buffer is not self.old:
            return new
        return BufferLoad(self.new, self._map(new.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        new = self.generic_visit(store)
        assert isinstance(new, BufferStore)
        if store.buffer is not self.old:
            return new
        return BufferStore(self.new, new.value, self._map(new.indices))

    def _within_shape(self, ranges: tuple[Range, ...]) -> tuple[Range, ...]:
        """The declared region cut to the old buffer's shape. A guarded access declares its
        whole hull (``A[vi, vk]`` with ``vk < 16`` read only where ``vk < 12``); the buffer's
        bounds cut it before, but once mapped into the new layout the excess would name other
        elements (the next row of a fused buffer). Only a point index not provably inside is
        widened to the part of its range inside the dimension, which covers every access the
        program can make there."""
        analyzer = Analyzer()
        for var, rng in self.dom.items():
            analyzer.bind(var, rng)
        result = []
        for rng, extent in zip(ranges, self.old.shape):
            if not is_const_int(rng.extent, 1) or (
                analyzer.can_prove(rng.min >= 0) and analyzer.can_prove(rng.min < extent)
            ):
                result.append(rng)
                continue
            low, high = eval_interval(rng.min, self.dom)
            (cut,) = clamp_region([Range(low, analyzer.simplify(high - low + 1))], [extent], analyzer)
            result.append(cut)
        return tuple(result)

    def visit_BufferRegion(self, region: BufferRegion) -> BufferRegion:
        if region.buffer is not self.old:
            return self.generic_visit(region)  # type: ignore[return-value]
        ranges = self._within_shape(region.region)
        if all(isinstance(r.extent, IntImm) and r.extent.value == 1 for r in ranges):
            return _point(self.new, self._map([r.min for r in ranges]))
        # Relax the map over the region: each non-point dimension becomes a variable sweeping it.
        sweep: dict[Var, Range] = {}
        indices: list[PrimExpr] = []
        for dim, rng in enumerate(ranges):
            if isinstance(rng.extent, IntImm) and rng.extent.value == 1:
                indices.append(rng.min)
            else:
                var = Var(f"t{dim}", rng.min.dtype)
                sweep[var] = rng
                indices.append(var)
        relaxer = RangeRelaxer(sweep)
        new_ranges = []
        for expr, extent in zip(self.index_map.apply(indices), self.new.shape):
            relaxed = relaxer.relax(Range(expr, const(1, expr.dtype)), extent)
            new_ranges.append(Range(simplify(relaxed.min, self.dom), simplify(relaxed.extent, self.dom)))
        return BufferRegion(self.new, tuple(new_ranges))


# ---------------------------------------------------------------- transform_block_layout


def transform_block_layout(func: PrimFunc, block_name: str, index_map: IndexMapLike) -> PrimFunc:
    """Remap a block's iteration space: the new iterators are ``index_map(old iterators)``.

    The loops around the block (in its scope) are replaced by one new loop per new iterator,
    over the image of the old domain (outermost first, in the map's result order), each new
    iterator bound to its loop. The block's body, init and regions use the old iterators
    expressed through the inverse map, simplified. A new iterator that depends only on spatial
    (reduce) iterators is spatial (reduce). A result that is one old iterator keeps its name
    and its loop's name; a combination is named after its parts (``vn_vh_vw`` over loop
    ``n_h_w``). Handles of the old loops become invalid: ``get_loops`` gives the new ones.

    Preconditions: the block is not the root, has iterators, none opaque, and no predicate
    (``T.where``); the statements between it and its scope are loops only, serial without
    annotations, each binding exactly one iterator over its whole domain from 0 (no other
    statement or block under them); the map takes one index per iterator, is quasi-affine,
    and sends the iteration domain one-to-one onto a box starting at 0; no result mixes
    spatial and reduce iterators (so each new loop drives one kind, and a ``T.init()`` still
    runs before every update of its output element, which is checked on the result).

    Before (``transform_block_layout(C, lambda i, j, k: (i * 8 + j, k))``)::

        for i, j, k in T.grid(4, 8, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    After::

        for i_j, k in T.grid(32, 16):
            with T.block("C"):
                vi_vj, vk = T.remap("SR", i_j, k)
                with T.init():
                    C[vi_vj // 8, vi_vj % 8] = 0.0
                C[vi_vj // 8, vi_vj % 8] += A[vi_vj // 8, vk] * B[vk, vi_vj % 8]
    """
    primitive = "transform_block_layout"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    block = realize.block
    scope = _check_remappable(index, realize)
    loops = trivial_loop_nest(index, realize, scope, primitive, serial_only=True)
    index_map = _coerce_map(
        index_map, len(block.iter_vars), [iv.var.dtype for iv in block.iter_vars], primitive, target
    )
    image = bijective_box_image(
        index_map, [iv.dom for iv in block.iter_vars], primitive, target, "the block's iteration domain"
    )
    if not image.by_iter_map:
        raise ScheduleError(
            primitive,
            target,
            f"the index map {index_map} is one-to-one here, but not quasi-affine; its inverse cannot be written",
        )
    param_kind = {id(p): iv.kind for p, iv in zip(index_map.params, block.iter_vars)}
    param_pos = {id(p): k for k, p in enumerate(index_map.params)}
    new_iters: list[IterVar] = []
    loop_names: list[str] = []
    taken_iters: set[str] = set()
    taken_loops: set[str] = set()
    for k, (result, extent) in enumerate(zip(index_map.results, image.shape)):
        sources = [param_pos[id(v)] for v in free_vars(result) if id(v) in param_pos]
        sources.sort()
        kinds = {param_kind[id(index_map.params[s])] for s in sources}
        if len(kinds) > 1:
            raise ScheduleError(
                primitive,
                target,
                f"result {k} of the index map, {result}, mixes spatial and reduce iterators "
                f"({', '.join(block.iter_vars[s].var.name for s in sources)})",
            )
        kind = kinds.pop() if kinds else IterKind.SPATIAL
        if sources:
            iter_name = "_".join(block.iter_vars[s].var.name for s in sources)
            loop_name = "_".join(loops[s].loop_var.name for s in sources)
        else:
            iter_name, loop_name = f"v{k}", f"ax{k}"
        iter_name = unique_name(iter_name, taken_iters)
        loop_name = unique_name(loop_name, taken_loops)
        taken_iters.add(iter_name)
        taken_loops.add(loop_name)
        dtype = result.dtype
        new_iters.append(IterVar(Var(iter_name, dtype), Range(const(0, dtype), extent), kind))
        loop_names.append(loop_name)
    inverse = inverse_iter_map(image.result, [iv.var for iv in new_iters])
    new_dom = {iv.var: iv.dom for iv in new_iters}
    vmap: dict[Var, PrimExpr] = {}
    for param, iv in zip(index_map.params, block.iter_vars):
        vmap[iv.var] = simplify(inverse[param], new_dom)
    new_block = _SubstituteBlock(vmap, new_dom).visit(block)
    assert isinstance(new_block, Block)
    new_block = new_block.replace(iter_vars=tuple(new_iters))
    loop_vars = [Var(name, iv.var.dtype) for name, iv in zip(loop_names, new_iters)]
    stmt: Stmt = BlockRealize(tuple(loop_vars), realize.predicate, new_block)
    for var, iv in reversed(list(zip(loop_vars, new_iters))):
        stmt = For(var, iv.dom.min, iv.dom.extent, ForKind.SERIAL, stmt)
    outermost: Stmt = path_to_scope(index, realize, scope)[-1] if loops else realize
    result = replace_stmt(index, outermost, stmt)
    check_init_order(primitive, target, func, result, [block_name])
    return result


def _check_remappable(index: TreeIndex, realize: BlockRealize) -> BlockRealize:
    """The first checks of transform_block_layout (before the index map is read); returns the
    block's scope."""
    primitive = "transform_block_layout"
    target = block_target(realize)
    block = realize.block
    scope = scope_of(index, realize, primitive)
    if not block.iter_vars:
        raise ScheduleError(primitive, target, "the block has no iterators (an opaque block)")
    if not is_true(realize.predicate):
        raise ScheduleError(
            primitive,
            target,
            f"the block has a predicate (T.where({realize.predicate})); only a block without one can be remapped",
            block_header(realize),
        )
    opaque = [iv.var.name for iv in block.iter_vars if iv.kind is IterKind.OPAQUE]
    if opaque:
        raise ScheduleError(primitive, target, f"the block has opaque iterators {opaque}; they cannot be remapped")
    return scope


class _SubstituteBlock(IRMutator):
    """Old iterators replaced by expressions of the new ones; indices and regions simplified."""

    def __init__(self, vmap: dict[Var, PrimExpr], dom: dict[Var, Range]) -> None:
        self.vmap = vmap
        self.dom = dict(dom)

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.vmap.get(var, var)

    def visit_For(self, loop: For) -> Stmt:
        self.dom[loop.loop_var] = Range(loop.min, loop.extent)
        try:
            return self.generic_visit(loop)  # type: ignore[return-value]
        finally:
            del self.dom[loop.loop_var]

    def _simplify_all(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return tuple(simplify(i, self.dom) for i in indices)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        new = self.generic_visit(load)
        assert isinstance(new, BufferLoad)
        return new if new is load else new.replace(indices=self._simplify_all(new.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        new = self.generic_visit(store)
        assert isinstance(new, BufferStore)
        return new if new is store else new.replace(indices=self._simplify_all(new.indices))

    def visit_Range(self, rng: Range) -> Range:
        new = self.generic_visit(rng)
        assert isinstance(new, Range)
        if new is rng:
            return rng
        return Range(simplify(new.min, self.dom), simplify(new.extent, self.dom))


# ---------------------------------------------------------------- pad_einsum


def pad_einsum(func: PrimFunc, block_name: str, padding: Sequence[int]) -> PrimFunc:
    """Pad an einsum-like block's iteration space, and its operands, to multiples of ``padding``.

    ``padding`` has one positive entry per block iterator; an iterator of extent ``e`` gets the
    extent ``ceil(e / p) * p``. Every buffer indexed by a padded iterator is replaced, in the
    block, by a new buffer ``<name>_pad`` of the padded shape: a block ``<name>_pad`` before
    the block's loop nest copies an input in, zero outside the original range
    (``T.if_then_else``); a block ``<name>_unpad`` after it copies the original part of an
    output back. An output the block reads without a ``T.init()`` storing it is copied in as
    well. The loops keep their variables (and kinds); only their extents grow. When no extent
    changes the program is unchanged.

    Preconditions:

    - the block is not the root, has no predicate, no opaque iterators, constant iterator
      extents, no nested blocks or match_buffers, and the statements between it and its scope
      are its own loops only, each binding one iterator over its whole domain from 0;
    - einsum form for every buffer a padded iterator indexes: each index of its loads and
      stores is a block iterator or an integer constant, one index pattern per buffer, inside
      its bounds over the original iteration domain (other operands may have any indices:
      ``data[v0, v1 + r0, v2 + r1, r2]`` when only the output channels are padded);
    - an output is stored unconditionally (not under an ``if`` or a loop), unless it is copied
      in (read without an init);
    - when a reduce iterator is padded, the body is one update ``C[...] = C[...] + X`` where
      ``X`` is a product in which, for each padded reduce iterator, some factor is a load (or a
      cast of one) of a buffer indexed by it, and every factor that is not such a load reads no
      padded buffer (so the extra iterations add exact zeros);
    - every padded spatial iterator indexes every buffer the block writes (else the extra
      instances would overwrite kept elements);
    - no integer division or modulo divides by a load of a padded buffer (padding is zero);
    - the padded buffers are defined in the block's scope and the block is not in its init.

    Before (``pad_einsum(C, [16, 16, 16])``)::

        for i, j, k in T.grid(127, 127, 127):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    After::

        A_pad = T.alloc_buffer((128, 128), "float32")
        B_pad = T.alloc_buffer((128, 128), "float32")
        C_pad = T.alloc_buffer((128, 128), "float32")
        for ax0, ax1 in T.grid(128, 128):
            with T.block("A_pad"):
                vi, vk = T.remap("SS", ax0, ax1)
                A_pad[vi, vk] = T.if_then_else(vi < 127 and vk < 127, A[vi, vk], 0.0)
        for ax0, ax1 in T.grid(128, 128):
            with T.block("B_pad"):
                vk, vj = T.remap("SS", ax0, ax1)
                B_pad[vk, vj] = T.if_then_else(vk < 127 and vj < 127, B[vk, vj], 0.0)
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C_pad[vi, vj] = 0.0
                C_pad[vi, vj] += A_pad[vi, vk] * B_pad[vk, vj]
        for ax0, ax1 in T.grid(127, 127):
            with T.block("C_unpad"):
                vi, vj = T.remap("SS", ax0, ax1)
                C[vi, vj] = C_pad[vi, vj]
    """
    primitive = "pad_einsum"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    block = realize.block
    scope = scope_of(index, realize, primitive)
    padding = list(padding)
    if len(padding) != len(block.iter_vars):
        raise ScheduleError(
            primitive,
            target,
            f"padding needs one entry per block iterator ({len(block.iter_vars)}), got {len(padding)}: {padding}",
        )
    for factor in padding:
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise ScheduleError(primitive, target, f"padding entries must be positive integers, got {padding}")
    if not is_true(realize.predicate):
        raise ScheduleError(
            primitive, target, f"the block has a predicate (T.where({realize.predicate}))", block_header(realize)
        )
    extents: list[PrimExpr] = []
    sizes = _size_var_ids(func)
    for iv in block.iter_vars:
        if iv.kind is IterKind.OPAQUE:
            raise ScheduleError(primitive, target, f"iterator {iv.var.name} is opaque; it cannot be padded")
        # A symbolic extent is padded too (to ceildiv(n, p) * p), when it is made of sizes only.
        if not (is_const_int(iv.dom.min, 0) and all(id(var) in sizes for var in free_vars(iv.dom.extent))):
            raise ScheduleError(
                primitive,
                target,
                f"iterator {iv.var.name} must have a domain starting at 0 whose extent is a constant or made of "
                f"the function's sizes, it has {range_text(iv.dom)}",
            )
        extents.append(iv.dom.extent)
    loops = trivial_loop_nest(index, realize, scope, primitive, serial_only=False)
    accesses, nested = block_accesses(block)
    if nested:
        raise ScheduleError(primitive, target, f"the block holds nested blocks ({nested[0].name!r})", block)
    if block.match_buffers:
        raise ScheduleError(primitive, target, "the block has match_buffer views", block)
    iter_by_id = {id(iv.var): k for k, iv in enumerate(block.iter_vars)}
    padded_extents = [_padded_extent(e, p) for e, p in zip(extents, padding)]
    padded_iters = {k for k, (e, p) in enumerate(zip(extents, padded_extents)) if e is not p}
    if not padded_iters:
        return func
    padded_var_ids = {id(block.iter_vars[k].var) for k in padded_iters}
    # Only the buffers a padded iterator indexes are padded, so only their accesses need the
    # einsum form; another operand (a convolution's input at v1 + r0, neither padded) keeps its
    # indices, which stay inside the domains they had.
    touched = {
        id(access.node.buffer)
        for access in accesses
        if any(id(var) in padded_var_ids for expr in access.indices for var in free_vars(expr))
    }
    patterns: dict[int, tuple[Buffer, tuple[PrimExpr, ...]]] = {}
    for access in accesses:
        buffer = access.node.buffer
        if id(buffer) not in touched:
            continue
        for expr in access.indices:
            if not (isinstance(expr, IntImm) or (isinstance(expr, Var) and id(expr) in iter_by_id)):
                raise ScheduleError(
                    primitive,
                    target,
                    f"not in einsum form: every index of a padded buffer must be a block iterator or a constant, "
                    f"but the {_show_access(access)} has the index {expr}",
                    block,
                )
        known = patterns.get(id(buffer))
        if known is None:
            patterns[id(buffer)] = (buffer, access.indices)
        elif not structural_equal(known[1], access.indices):
            raise ScheduleError(
                primitive,
                target,
                f"{buffer.name} is accessed at different indices ({buffer.name}[{', '.join(map(str, known[1]))}] "
                f"and {buffer.name}[{', '.join(map(str, access.indices))}]); einsum form needs one pattern per buffer",
                block,
            )
    padded_buffers: list[tuple[Buffer, tuple[PrimExpr, ...]]] = list(patterns.values())
    padded_ids = {id(buffer) for buffer, _ in padded_buffers}
    analyzer = Analyzer()
    for buffer, pattern in padded_buffers:
        for dim, (expr, size) in enumerate(zip(pattern, buffer.shape)):
            last = simplify(extents[iter_by_id[id(expr)]] - 1) if isinstance(expr, Var) else expr
            if not (not _is_negative(last) and analyzer.can_prove(last < size)):
                raise ScheduleError(
                    primitive,
                    target,
                    f"index {dim} of {buffer.name}, {expr}, reaches {last}, outside the dimension's extent {size}; "
                    "the copies would access the buffer out of bounds",
                    block,
                )
    for k in sorted(padded_iters):
        iv = block.iter_vars[k]
        if iv.kind is not IterKind.SPATIAL:
            continue
        for access in accesses:
            if access.is_store and not any(e is iv.var for e in access.indices):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the padded spatial iterator {iv.var.name} does not index the {_show_access(access)}; "
                    "the extra instances would overwrite elements that are kept",
                    block,
                )
    _check_zero_padding_is_harmless(block, padded_ids, padded_iters, patterns, iter_by_id, primitive, target)
    position = top_position(index, scope, realize)
    if position is None:
        raise ScheduleError(primitive, target, f"the block is inside the init of {scope.block.name!r}")
    for buffer, _ in padded_buffers:
        if not defined_in_scope(func, index, scope, buffer):
            raise ScheduleError(
                primitive,
                target,
                f"{buffer.name} is not defined in the scope of block {scope.block.name!r} "
                "(allocated by the block itself?)",
            )

    stored = {id(a.node.buffer) for a in accesses if a.is_store}
    loaded = {id(a.node.buffer) for a in accesses if not a.is_store}
    init_stored = {id(a.node.buffer) for a in accesses_in(block.init, None) if a.is_store}
    for buffer, _ in padded_buffers:
        copied_in = id(buffer) in loaded and id(buffer) not in init_stored
        if (
            id(buffer) in stored
            and not copied_in
            and not (stores_unconditionally(block.body, buffer) or stores_unconditionally(block.init, buffer))
        ):
            raise ScheduleError(
                primitive,
                target,
                f"the block stores {buffer.name} only under a condition (an if or a loop); the copy back would "
                "write elements the block leaves alone",
                block,
            )

    # ---- build
    taken_buffers = buffer_names(func)
    taken_blocks = set(index.blocks)
    # Inputs first, then outputs, each in the order the block declares them.
    order: dict[int, int] = {}
    for region in (*block.reads, *block.writes):
        order.setdefault(id(region.buffer), len(order))
    padded_buffers.sort(key=lambda item: (id(item[0]) in stored, order.get(id(item[0]), len(order))))
    new_buffers: dict[int, Buffer] = {}
    copy_ins: list[Stmt] = []
    copy_outs: list[Stmt] = []
    for buffer, pattern in padded_buffers:
        shape = tuple(
            _cast_extent(padded_extents[iter_by_id[id(e)]], buffer.shape[d].dtype)
            if isinstance(e, Var)
            else buffer.shape[d]
            for d, e in enumerate(pattern)
        )
        name = unique_name(f"{buffer.name}_pad", taken_buffers)
        taken_buffers.add(name)
        pad = Buffer(name, shape, buffer.dtype, buffer.scope)
        new_buffers[id(buffer)] = pad
        # The copies run over the buffer's dimensions in order (iterators as they first appear).
        used = list(dict.fromkeys(iter_by_id[id(e)] for e in pattern if isinstance(e, Var)))
        used_iters = [block.iter_vars[k] for k in used]
        # An input, or an output the block reads without an init storing it first.
        if id(buffer) in loaded and id(buffer) not in init_stored:
            block_name_in = unique_name(f"{buffer.name}_pad", taken_blocks)
            taken_blocks.add(block_name_in)
            copy_ins.append(
                _copy_nest(
                    block_name_in,
                    used_iters,
                    [_cast_extent(padded_extents[k], block.iter_vars[k].var.dtype) for k in used],
                    _pad_copy_in(buffer, pad, pattern, used, extents, padded_iters, block),
                )
            )
        if id(buffer) in stored:
            block_name_out = unique_name(f"{buffer.name}{UNPAD_SUFFIX}", taken_blocks)
            taken_blocks.add(block_name_out)
            copy_outs.append(
                _copy_nest(
                    block_name_out,
                    used_iters,
                    [_cast_extent(extents[k], block.iter_vars[k].var.dtype) for k in used],
                    _pad_copy_out(buffer, pad, pattern),
                )
            )
    replaced = {buffer: new_buffers[id(buffer)] for buffer, _ in padded_buffers}

    def region_of(region: BufferRegion) -> BufferRegion:
        pad = new_buffers.get(id(region.buffer))
        if pad is None:
            return region
        return _point(pad, patterns[id(region.buffer)][1])

    new_iter_vars = tuple(
        iv.replace(dom=Range(iv.dom.min, _cast_extent(padded_extents[k], iv.dom.extent.dtype)))
        for k, iv in enumerate(block.iter_vars)
    )
    new_block = block.replace(
        iter_vars=new_iter_vars,
        body=replace_buffers(block.body, replaced),
        init=replace_buffers(block.init, replaced) if block.init is not None else None,
        reads=tuple(region_of(r) for r in block.reads),
        writes=tuple(region_of(r) for r in block.writes),
    )
    new_extent = {id(loop.loop_var): padded_extents[k] for k, loop in enumerate(loops)}
    stmt: Stmt = realize.replace(block=new_block)
    for node in path_to_scope(index, realize, scope):
        assert isinstance(node, For)
        extent = new_extent[id(node.loop_var)]
        grown = not structural_equal(node.extent, extent)
        stmt = node.replace(body=stmt, extent=_cast_extent(extent, node.extent.dtype) if grown else node.extent)
    stmts = body_stmts(scope.block)
    body = seq(*stmts[:position], *copy_ins, stmt, *copy_outs, *stmts[position + 1 :])
    new_scope = scope.block.replace(
        body=body, alloc_buffers=(*scope.block.alloc_buffers, *(new_buffers[id(b)] for b, _ in padded_buffers))
    )
    return replace_stmt(index, scope, scope.replace(block=new_scope))


def _pad_copy_in(
    buffer: Buffer,
    pad: Buffer,
    pattern: tuple[PrimExpr, ...],
    used: list[int],
    extents: list[PrimExpr],
    padded_iters: set[int],
    block: Block,
) -> Callable[[dict[Var, PrimExpr]], tuple[BufferStore, tuple[BufferRegion, ...], BufferRegion]]:
    def make(vmap: dict[Var, PrimExpr]) -> tuple[BufferStore, tuple[BufferRegion, ...], BufferRegion]:
        indices = tuple(substitute(e, vmap) for e in pattern)
        condition: PrimExpr | None = None
        for k in used:
            if k in padded_iters:
                var = vmap[block.iter_vars[k].var]
                bound = var < _cast_extent(extents[k], var.dtype)
                condition = bound if condition is None else And(condition, bound)
        assert condition is not None
        value = Call(buffer.dtype, "if_then_else", (condition, BufferLoad(buffer, indices), const(0, buffer.dtype)))
        return BufferStore(pad, value, indices), (_point(buffer, indices),), _point(pad, indices)

    return make


def _pad_copy_out(
    buffer: Buffer, pad: Buffer, pattern: tuple[PrimExpr, ...]
) -> Callable[[dict[Var, PrimExpr]], tuple[BufferStore, tuple[BufferRegion, ...], BufferRegion]]:
    def make(vmap: dict[Var, PrimExpr]) -> tuple[BufferStore, tuple[BufferRegion, ...], BufferRegion]:
        indices = tuple(substitute(e, vmap) for e in pattern)
        return BufferStore(buffer, BufferLoad(pad, indices), indices), (_point(pad, indices),), _point(buffer, indices)

    return make


def _size_var_ids(func: PrimFunc) -> set[int]:
    """Variables that are sizes: scalar parameters and variables of parameter buffers' shapes."""
    ids = {id(param) for param in func.params if isinstance(param, Var)}
    for buffer in func.buffer_params:
        for extent in buffer.shape:
            ids.update(id(var) for var in free_vars(extent))
    return ids


def _padded_extent(extent: PrimExpr, factor: int) -> PrimExpr:
    """``extent`` rounded up to a multiple of ``factor``; ``extent`` itself when it is one."""
    if isinstance(extent, IntImm):
        padded = -(-extent.value // factor) * factor
        return extent if padded == extent.value else const(padded, extent.dtype)
    if factor == 1 or Analyzer().can_prove(FloorMod(extent, const(factor, extent.dtype)) == 0):
        return extent
    step = const(factor, extent.dtype)
    return simplify(FloorDiv(extent + const(factor - 1, extent.dtype), step) * step)


def _cast_extent(extent: PrimExpr, dtype: DataType) -> PrimExpr:
    if extent.dtype == dtype:
        return extent
    return const(extent.value, dtype) if isinstance(extent, IntImm) else Cast(dtype, extent)


def _is_negative(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value < 0


def _strip_casts(expr: PrimExpr) -> PrimExpr:
    while isinstance(expr, Cast):
        expr = expr.value
    return expr


def _factors(expr: PrimExpr) -> list[PrimExpr]:
    if isinstance(expr, Mul):
        return _factors(expr.a) + _factors(expr.b)
    return [expr]


def _loads_of(expr: Any, buffer_ids: set[int]) -> bool:
    from tir.ir import IRVisitor

    hit = False

    class Find(IRVisitor):
        def visit_BufferLoad(self, load: BufferLoad) -> None:
            nonlocal hit
            if id(load.buffer) in buffer_ids:
                hit = True
            self.generic_visit(load)

    Find().visit(expr)
    return hit


def _check_zero_padding_is_harmless(
    block: Block,
    padded_ids: set[int],
    padded_iters: set[int],
    patterns: dict[int, tuple[Buffer, tuple[PrimExpr, ...]]],
    iter_by_id: dict[int, int],
    primitive: str,
    target: str,
) -> None:
    """The extra iterations must not change what the original iterations compute: they may
    write padded outputs freely, but a padded reduction may only add exact zeros, and no
    integer division may divide by a padding zero."""
    from tir.ir import IRVisitor

    class Divisions(IRVisitor):
        def visit_BinaryOp(self, node: Any) -> None:
            if isinstance(node, (Div, FloorDiv, FloorMod)) and node.dtype.is_integer and _loads_of(node.b, padded_ids):
                raise ScheduleError(
                    primitive,
                    target,
                    f"the integer division {node} may divide by a zero of the padding",
                    block,
                )
            self.generic_visit(node)

    Divisions().visit(block.body)
    Divisions().visit(block.init)
    reduce_padded = [k for k in padded_iters if block.iter_vars[k].kind is IterKind.REDUCE]
    if not reduce_padded:
        return
    names = ", ".join(block.iter_vars[k].var.name for k in sorted(reduce_padded))
    rule = (
        f"padding the reduce iterator(s) {names} needs the body to be one update C[...] = C[...] + X, X a product "
        "with a factor loading an operand indexed by each padded reduce iterator, so the extra iterations add zeros"
    )
    body = block.body
    if not isinstance(body, BufferStore) or not isinstance(body.value, Add):
        raise ScheduleError(primitive, target, rule, block)
    output = body.buffer
    value = body.value
    if _is_load_of(value.a, output):
        product = value.b
    elif _is_load_of(value.b, output):
        product = value.a
    else:
        raise ScheduleError(primitive, target, rule, block)
    if _loads_of(product, {id(output)}):
        raise ScheduleError(primitive, target, rule, block)
    factors = _factors(product)
    for factor in factors:
        bare = _strip_casts(factor)
        if not isinstance(bare, BufferLoad) and _loads_of(bare, padded_ids):
            raise ScheduleError(
                primitive,
                target,
                f"{rule}; the factor {factor} reads a padded buffer but is not a plain load, so it may not be "
                "zero (or finite) on the padding",
                block,
            )
    for k in reduce_padded:
        var = block.iter_vars[k].var
        zeroing = False
        for factor in factors:
            bare = _strip_casts(factor)
            if isinstance(bare, BufferLoad) and id(bare.buffer) in padded_ids:
                if any(isinstance(e, Var) and e is var for e in bare.indices):
                    zeroing = True
        if not zeroing:
            raise ScheduleError(
                primitive,
                target,
                f"{rule}; no factor of {product} loads an operand indexed by {var.name}",
                block,
            )


def _is_load_of(expr: PrimExpr, buffer: Buffer) -> bool:
    return isinstance(expr, BufferLoad) and expr.buffer is buffer


# ---------------------------------------------------------------- Schedule methods


class LayoutPrimitives:
    """Schedule methods for reindex, transform_layout, transform_block_layout, pad_einsum."""

    @doc_from(reindex)
    def reindex(self, block: BlockRV, buffer: tuple[str, int] | list[Any] | str | Buffer) -> BlockRV:
        realize = self.resolve_block(block, "reindex")  # type: ignore[attr-defined]
        scope_of(self.index, realize, "reindex")  # type: ignore[attr-defined]
        kind, position = normalize_buffer_arg(realize, buffer, "reindex")
        name = realize.block.name
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "reindex", (block, (kind, position)), {}, lambda func: reindex(func, name, kind, position)
        )

    @doc_from(transform_layout)
    def transform_layout(
        self,
        block: BlockRV,
        buffer: tuple[str, int] | list[Any] | str | Buffer,
        index_map: IndexMapLike,
        pad_value: PadValue = None,
    ) -> None:
        primitive = "transform_layout"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        kind, position = normalize_buffer_arg(realize, buffer, primitive)
        target_buffer = region_buffer(realize, kind, position, primitive)
        target = f"{block_target(realize)}, buffer {target_buffer.name}"
        imap = _coerce_map(index_map, target_buffer.ndim, [s.dtype for s in target_buffer.shape], primitive, target)
        pad: PadValue = pad_value
        if callable(pad_value):
            # The trace keeps the function as text, like the index map.
            pad_map = _coerce_map(pad_value, len(imap.results), [r.dtype for r in imap.results], primitive, target)
            loads = [r for r in pad_map.results if contains(r, BufferLoad)]
            if loads:
                # A pad value read from a buffer (even the transformed one) is a claim about the
                # caller's data that nothing here can check or establish.
                raise ScheduleError(
                    primitive,
                    target,
                    f"the pad value {loads[0]} reads a buffer; it may use only the new indices and constants",
                )
            pad = str(pad_map)
        name = realize.block.name
        separators = list(imap.axis_separators)
        if separators and _is_identity(imap):
            self.set_axis_separator(block, (kind, position), separators)  # type: ignore[attr-defined]
            return
        plain = IndexMap(imap.params, imap.results)  # the trace's text cannot hold separators
        self._apply(  # type: ignore[attr-defined]
            primitive,
            (block, (kind, position), str(plain)),
            {} if pad is None else {"pad_value": pad},
            lambda func: transform_layout(func, name, kind, position, plain, pad),
        )
        if separators:
            # As TVM: the separators are a set_axis_separator of their own in the trace.
            self.set_axis_separator(block, (kind, position), separators)  # type: ignore[attr-defined]

    @doc_from(transform_block_layout)
    def transform_block_layout(self, block: BlockRV, index_map: IndexMapLike) -> None:
        primitive = "transform_block_layout"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        _check_remappable(self.index, realize)  # type: ignore[attr-defined]
        iter_vars = realize.block.iter_vars
        imap = _coerce_map(
            index_map, len(iter_vars), [iv.var.dtype for iv in iter_vars], primitive, block_target(realize)
        )
        name = realize.block.name
        self._apply(  # type: ignore[attr-defined]
            primitive, (block, str(imap)), {}, lambda func: transform_block_layout(func, name, imap)
        )

    @doc_from(pad_einsum)
    def pad_einsum(self, block: BlockRV, padding: Sequence[int]) -> None:
        primitive = "pad_einsum"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        if isinstance(padding, (str, bytes)) or not isinstance(padding, Sequence):
            raise ScheduleError(
                primitive, block_target(realize), f"padding must be a list of integers, got {padding!r}"
            )
        factors = [self.resolve_int(p, primitive) for p in padding]  # type: ignore[attr-defined]
        name = realize.block.name
        self._apply(  # type: ignore[attr-defined]
            primitive,
            (block, [p.value if isinstance(p, IntImm) else p for p in padding]),  # IntImm: as its int
            {},
            lambda func: pad_einsum(func, name, factors),
        )
