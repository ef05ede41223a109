"""Schedule primitive: cache_index.

TVM's ``cache_index``: the arithmetic a block does on its own iterators (the coordinates a
resize computes for every output pixel, ``vi // 4 + vj // 4`` in an index) is computed once per
value of those iterators, ahead of the block, into new buffers; the block loads it from there.

Which expressions: in every store of the block, the largest pure subexpressions of its
iterators (no loads, no impure calls, more than a variable or a constant) are candidates, each
counted as often as it occurs. With ``cse_thresh = 0`` every candidate of a stored value is
cached. With a threshold, a candidate seen fewer times than the threshold hands its count down
to its own largest subexpressions, which may reach the threshold together (largest candidates
first); those that reach it are cached. Integer candidates are compared after simplification,
float ones only as written, so caching never reassociates float arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tir.analysis.tree import TreeIndex, replace_stmt
from tir.arith import Analyzer
from tir.ir import (
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IntImm,
    IRMutator,
    IterKind,
    IterVar,
    Let,
    Node,
    PrimExpr,
    PrimFunc,
    Ramp,
    Range,
    Stmt,
    StringImm,
    Var,
    const,
    free_vars,
    post_order_visit,
    substitute,
)
from tir.ir.dtype import DataType
from tir.ir.ops import get_op
from tir.ir.stmt import seq
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import (
    block_target,
    body_stmts,
    buffer_names,
    doc_from,
    find_block,
    top_position,
    unique_name,
)
from tir.schedule.primitives._layout_util import ReplaceStmts, outer_vars, scope_of
from tir.schedule.primitives.cache import check_scope_name

_Key = tuple[Any, ...]


def cache_index(func: PrimFunc, block_name: str, storage_scope: str, cse_thresh: int = 0) -> tuple[PrimFunc, list[str]]:
    """Precompute the index arithmetic of a block into buffers filled before it.

    For each chosen expression ``e`` of the block's iterators ``v...`` (those it uses, in block
    order), a buffer ``index_var_<k>`` in ``storage_scope``, one dimension per iterator (its
    extent), is filled by a new block ``index_<k>`` over the iterators' whole domains, placed
    right before the block's top-level statement in its scope; in the values the block stores
    every occurrence of ``e`` becomes ``index_var_<k>[v...]`` and the block declares that read.
    The indices of the block's own stores stay as they are, so that its writes stay exact
    (TVM rewrites those too; they still count towards the threshold, as in TVM).
    Buffers are numbered largest expression first. Returns the new blocks' names.

    The expressions (see the module docstring): pure arithmetic of the block's iterators and of
    variables defined outside its scope, scalar (int, uint or float), at least one operation,
    using at least one iterator (whose domain is defined outside the scope, as the buffer's
    shape must be), without loads, impure calls or ``let``, and without an integer
    division or modulo by anything but a nonzero constant (the new block evaluates ``e`` for
    every value in the domain, also those the block would skip, so nothing it computes may
    trap). With ``cse_thresh = 0`` every such largest subexpression of a stored value is cached;
    a larger threshold caches the expressions that occur at least that often (counting those of
    rarer enclosing ones).

    Preconditions: ``cse_thresh`` is an integer >= 0; the storage scope is known; the block is
    not the root block and not inside its scope's init; the block has some expression to cache.

    Before (``cache_index(A, "global")``)::

        for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
            with T.block("A"):
                n, c, vi, vj = T.remap("SSSS", i0, i1, i2, i3)
                B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4, vj // 2]

    After::

        index_var_0 = T.alloc_buffer((80, 80), "int32")
        index_var_1 = T.alloc_buffer((80,), "int32")
        for ax0, ax1 in T.grid(80, 80):
            with T.block("index_0"):
                v0, v1 = T.remap("SS", ax0, ax1)
                index_var_0[v0, v1] = v0 // 4 + v1 // 4
        for ax0 in range(80):
            with T.block("index_1"):
                v0 = T.remap("S", ax0)
                index_var_1[v0] = v0 // 2
        for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
            with T.block("A"):
                n, c, vi, vj = T.remap("SSSS", i0, i1, i2, i3)
                B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj], index_var_1[vj]]
    """
    primitive = "cache_index"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    target = block_target(realize)
    if isinstance(cse_thresh, bool) or not isinstance(cse_thresh, int) or cse_thresh < 0:
        raise ScheduleError(primitive, target, f"cse_thresh must be an integer >= 0, got {cse_thresh!r}")
    check_scope_name(primitive, target, storage_scope)
    scope = scope_of(index, realize, primitive)
    position = top_position(index, scope, realize)
    if position is None:
        raise ScheduleError(primitive, target, f"the block is inside the init of {scope.block.name!r}")
    block = realize.block
    outer = _outer_vars(func, index, scope)
    # An index buffer is allocated in the scope, shaped by the iterator's domain.
    iters = {
        iv.var: iv for iv in block.iter_vars if all(id(var) in outer for var in free_vars((iv.dom.min, iv.dom.extent)))
    }
    keys = _Keys()

    def eligible(expr: PrimExpr) -> bool:
        return _is_candidate(expr, iters, outer)

    stores = _own_stores(block)
    chosen: dict[_Key, PrimExpr] = {}
    for store in stores:
        for expr in _chosen_in_store(store, eligible, keys, cse_thresh):
            chosen.setdefault(keys.of(expr), expr)
    if not chosen:
        raise ScheduleError(
            primitive,
            target,
            "the block stores no pure arithmetic of its iterators to cache"
            + (f" occurring at least {cse_thresh} times" if cse_thresh > 1 else ""),
            block,
        )
    exprs = sorted(chosen.values(), key=_complexity, reverse=True)  # stable: ties keep their order
    # An expression chosen in one store may sit only inside a larger one chosen in another:
    # then no load would use it.
    dry_run = _ReplaceInStores({keys.of(expr): None for expr in exprs}, keys, eligible)
    dry_run.visit(block.body)
    dry_run.visit(block.init)
    exprs = [expr for expr in exprs if keys.of(expr) in dry_run.used]

    taken_buffers = buffer_names(func)
    taken_blocks = set(index.blocks)
    nests: list[Stmt] = []
    buffers: list[Buffer] = []
    names: list[str] = []
    loads: dict[_Key, BufferLoad] = {}
    for k, expr in enumerate(exprs):
        used = [iv for iv in block.iter_vars if _uses(expr, iv.var)]
        buffer_name = unique_name(f"index_var_{k}", taken_buffers)
        taken_buffers.add(buffer_name)
        block_name_k = unique_name(f"index_{k}", taken_blocks)
        taken_blocks.add(block_name_k)
        buffer = Buffer(buffer_name, tuple(iv.dom.extent for iv in used), expr.dtype, storage_scope)
        buffers.append(buffer)
        names.append(block_name_k)
        nests.append(_index_nest(block_name_k, buffer, expr, used))
        loads[keys.of(expr)] = BufferLoad(buffer, tuple(_offset(iv.var, iv.dom.min) for iv in used))

    rewriter = _ReplaceInStores(loads, keys, eligible)
    new_block = block.replace(
        body=rewriter.visit(block.body),
        init=rewriter.visit(block.init) if block.init is not None else None,
        reads=(*block.reads, *(BufferRegion.point(load.buffer, load.indices) for load in loads.values())),
    )
    stmts = body_stmts(scope.block)
    new_top = ReplaceStmts({id(realize): realize.replace(block=new_block)}).visit(stmts[position])
    body = seq(*stmts[:position], *nests, new_top, *stmts[position + 1 :])
    new_scope = scope.block.replace(body=body, alloc_buffers=(*scope.block.alloc_buffers, *buffers))
    return replace_stmt(index, scope, scope.replace(block=new_scope)), names


# ---------------------------------------------------------------- choosing the expressions


class _Keys:
    """Equivalence keys: integer expressions compared after simplification, others as written;
    variables by identity."""

    def __init__(self) -> None:
        self.analyzer = Analyzer()
        self.cache: dict[int, tuple[PrimExpr, _Key]] = {}

    def of(self, expr: PrimExpr) -> _Key:
        found = self.cache.get(id(expr))
        if found is not None and found[0] is expr:
            return found[1]
        form = self.analyzer.simplify(expr) if expr.dtype.is_integer else expr
        key = _structure(form)
        self.cache[id(expr)] = (expr, key)
        return key


def _structure(node: Any) -> Any:
    if isinstance(node, Var):
        return ("var", id(node))
    if isinstance(node, Node):
        return (type(node).__name__, *(_structure(getattr(node, name)) for name in node.child_fields()))
    if isinstance(node, tuple):
        return tuple(_structure(item) for item in node)
    if isinstance(node, DataType):
        return str(node)
    return node


def _children(expr: PrimExpr) -> Iterator[PrimExpr]:
    for name in expr.child_fields():
        value = getattr(expr, name)
        if isinstance(value, PrimExpr):
            yield value
        elif isinstance(value, tuple):
            yield from (item for item in value if isinstance(item, PrimExpr))


def _is_leaf(expr: PrimExpr) -> bool:
    return isinstance(expr, (Var, IntImm, FloatImm, StringImm))


def _complexity(expr: PrimExpr) -> int:
    count = 0

    def visit(node: object) -> None:
        nonlocal count
        count += isinstance(node, PrimExpr)

    post_order_visit(expr, visit)
    return count


def _uses(expr: PrimExpr, var: Var) -> bool:
    found = False

    def visit(node: object) -> None:
        nonlocal found
        found = found or node is var

    post_order_visit(expr, visit)
    return found


def _is_candidate(expr: PrimExpr, iters: dict[Var, IterVar], outer: set[int]) -> bool:
    """Pure scalar arithmetic of the iterators (and outer variables) that cannot trap."""
    if _is_leaf(expr) or isinstance(expr, (Ramp, Broadcast)):
        return False
    dtype = expr.dtype
    if dtype.lanes != 1 or not (dtype.is_integer or dtype.is_float):
        return False
    ok = True
    uses_iter = False

    def visit(node: object) -> None:
        nonlocal ok, uses_iter
        if isinstance(node, Var):
            if node in iters:
                uses_iter = True
            elif id(node) not in outer:
                ok = False  # defined inside the block (a loop, a let): not one value per iterator
        elif isinstance(node, (BufferLoad, Let, Ramp, Broadcast)):
            ok = False
        elif isinstance(node, Call):
            info = get_op(node.op)
            ok = ok and info is not None and info.pure
        elif isinstance(node, (Div, FloorDiv, FloorMod)) and node.dtype.is_integer:
            ok = ok and isinstance(node.b, IntImm) and node.b.value != 0

    post_order_visit(expr, visit)
    return ok and uses_iter


def _largest(expr: PrimExpr, eligible: Callable[[PrimExpr], bool]) -> Iterator[PrimExpr]:
    """The eligible subexpressions of ``expr`` (itself included) not inside another one."""
    if _is_leaf(expr):
        return
    if eligible(expr):
        yield expr
        return
    for child in _children(expr):
        yield from _largest(child, eligible)


def _chosen_in_store(
    store: BufferStore, eligible: Callable[[PrimExpr], bool], keys: _Keys, threshold: int
) -> list[PrimExpr]:
    """The expressions of one store to cache, in the post-order of its stored value."""
    table: dict[_Key, list[Any]] = {}  # key -> [first expression seen, count]

    def add(expr: PrimExpr, count: int) -> None:
        entry = table.setdefault(keys.of(expr), [expr, 0])
        entry[1] += count

    for part in (store.value, *store.indices):
        for expr in _largest(part, eligible):
            add(expr, 1)
    # A candidate seen too rarely hands its count to its own largest subexpressions; the
    # largest candidates go first, so each is decided after everything containing it.
    sizes: dict[_Key, int] = {}
    done: set[_Key] = set()
    while len(done) < len(table):
        for k in table:
            if k not in sizes:
                sizes[k] = _complexity(table[k][0])
        key = max((k for k in table if k not in done), key=sizes.__getitem__)
        done.add(key)
        expr, count = table[key]
        if count < threshold:
            for child in _children(expr):
                for sub in _largest(child, eligible):
                    add(sub, count)
    selected = {key for key, (_, count) in table.items() if count >= threshold}
    ordered: dict[_Key, PrimExpr] = {}

    def visit(node: PrimExpr) -> None:
        """The outermost selected occurrences (those a load will replace), in post-order."""
        if _is_leaf(node):
            return
        if eligible(node):
            key = keys.of(node)
            if key in selected:
                ordered.setdefault(key, table[key][0])
                return
        for child in _children(node):
            visit(child)

    visit(store.value)
    return list(ordered.values())


def _own_stores(block: Block) -> list[BufferStore]:
    """The stores of the block itself (body and init), not those of nested blocks."""
    found: list[BufferStore] = []

    def walk(node: Any) -> None:
        if isinstance(node, BufferStore):
            found.append(node)
        elif isinstance(node, BlockRealize):
            return
        elif isinstance(node, Node):
            for name in node.child_fields():
                walk(getattr(node, name))
        elif isinstance(node, tuple):
            for item in node:
                walk(item)

    walk(block.init)
    walk(block.body)
    return found


def _outer_vars(func: PrimFunc, index: TreeIndex, scope: BlockRealize) -> set[int]:
    """``outer_vars`` and the size variables of parameter buffers' shapes."""
    found = outer_vars(func, index, scope)
    for buffer in func.params:
        if isinstance(buffer, Buffer):
            for extent in buffer.shape:
                if isinstance(extent, Var):
                    found.add(id(extent))
    return found


# ---------------------------------------------------------------- building


def _offset(var: Var, start: PrimExpr) -> PrimExpr:
    return var if isinstance(start, IntImm) and start.value == 0 else var - start


def _index_nest(name: str, buffer: Buffer, expr: PrimExpr, used: list[IterVar]) -> Stmt:
    """``for ax...: with T.block(name): v... = ax...; buffer[v...] = expr`` over the iterators'
    domains (an iterator's value is ``v + its domain's start``)."""
    new_vars = [Var(f"v{k}", iv.var.dtype) for k, iv in enumerate(used)]
    loop_vars = [Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(used)]
    vmap: dict[Var, PrimExpr] = {}
    for iv, var in zip(used, new_vars):
        start = iv.dom.min
        vmap[iv.var] = var if isinstance(start, IntImm) and start.value == 0 else var + start
    new_iters = tuple(
        IterVar(var, Range(const(0, iv.dom.extent.dtype), iv.dom.extent), IterKind.SPATIAL)
        for var, iv in zip(new_vars, used)
    )
    indices = tuple(new_vars)
    value = substitute(expr, vmap)
    if any(v is not var for v, var in zip(vmap.values(), new_vars)):
        # ``(v0 + 2) - 2`` where a domain starts at 2: the integer parts simplified (exact).
        value = _SimplifyIntegers().visit(value)
    store = BufferStore(buffer, value, indices)
    block = Block(name, new_iters, (), (BufferRegion.point(buffer, indices),), store)
    stmt: Stmt = BlockRealize(tuple(loop_vars), const(True), block)
    for var, iv in reversed(list(zip(loop_vars, used))):
        stmt = For(var, const(0, iv.dom.extent.dtype), iv.dom.extent, ForKind.SERIAL, stmt)
    return stmt


class _SimplifyIntegers(IRMutator):
    """Each outermost integer subexpression simplified; float arithmetic left as written."""

    def __init__(self) -> None:
        self.analyzer = Analyzer()

    def visit(self, node: Any) -> Any:
        if isinstance(node, PrimExpr) and node.dtype.is_integer and not _is_leaf(node):
            return self.analyzer.simplify(node)
        return super().visit(node)


class _ReplaceInStores(IRMutator):
    """In the values the block stores (not in nested blocks), each cached expression (the
    outermost occurrence) becomes a load of its buffer."""

    def __init__(self, loads: dict[_Key, BufferLoad | None], keys: _Keys, eligible: Callable[[PrimExpr], bool]) -> None:
        self.loads = loads  # a None load: only find out which are used
        self.keys = keys
        self.eligible = eligible
        self.in_store = False
        self.used: set[_Key] = set()

    def visit(self, node: Any) -> Any:
        if self.in_store and isinstance(node, PrimExpr) and not _is_leaf(node) and self.eligible(node):
            key = self.keys.of(node)
            if key in self.loads:
                self.used.add(key)
                load = self.loads[key]
                return node if load is None else load
        return super().visit(node)

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        return realize  # a nested block keeps its own arithmetic

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        # Only the stored value: the store's own indices stay plain arithmetic of the
        # iterators, so that what the block writes stays exact (TVM replaces them as well).
        self.in_store = True
        try:
            value = self.visit(store.value)
        finally:
            self.in_store = False
        return store.replace(value=value)


class CacheIndexPrimitives:
    """Schedule method for cache_index."""

    @doc_from(cache_index)
    def cache_index(self, block: BlockRV | str, storage_scope: str, cse_thresh: int = 0) -> list[BlockRV]:  # type: ignore[misc]
        realize = self.resolve_block(block, "cache_index")  # type: ignore[attr-defined]
        name = realize.block.name
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "cache_index",
            (block, storage_scope, cse_thresh),
            {},
            lambda func: cache_index(func, name, storage_scope, cse_thresh),
        )


__all__ = ["CacheIndexPrimitives", "cache_index"]
