"""``convert_blocks_to_loops``: blocks disappear, leaving loops, conditions and allocations.

For every block instance (innermost first):

- ``T.init()`` is folded into the body (see ``lower_init``), in case that pass did not run;
- ``match_buffer`` views are rewritten to index their source: ``view[i, j]`` becomes
  ``src[min0 + i, min1 + j]``; when the view has fewer dimensions than the region, region
  dimensions of extent 1 are dropped (they index at their min). Shape, stride and offset
  variables the match defines are replaced by what they match;
- ``alloc_buffer`` s become ``Allocate`` statements around the block's body;
- the iterators are replaced by their (simplified) bindings;
- a predicate other than ``True`` wraps the result in ``if``.

Before::

    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            vj = T.spatial_axis(3, j)
            T.where(j < 3)
            B[vi, vj] = A[vi, vj] * 2.0

After::

    for i, j in T.grid(4, 4):
        if j < 3:
            B[i, j] = A[i, j] * 2.0
"""

from __future__ import annotations

from tir.arith import Analyzer, simplify
from tir.ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    IfThenElse,
    IntImm,
    IRMutator,
    MatchBufferRegion,
    PrimExpr,
    PrimFunc,
    Ramp,
    Stmt,
    Var,
    post_order_visit,
    substitute,
)
from tir.ir.function import CONSTANTS_ATTR
from tir.transform._common import LoweringError, cast_to, widest_int
from tir.transform.lower_init import lower_block_init

__all__ = ["STRIDE_OP", "convert_blocks_to_loops", "deferred_strides", "row_major_strides"]


STRIDE_OP = "tir.buffer_stride"


def deferred_strides(buffer: Buffer) -> tuple[PrimExpr, ...]:
    """``tir.buffer_stride(B[0, ...], d)`` for every dimension: the stride of ``buffer`` as it
    will be laid out, which ``flatten_buffers`` resolves (see ``resolve_strides``).

    ``d`` counts from the last dimension (-1 is the innermost): a pass in between may put
    dimensions in front (software pipelining gives a staged buffer a leading stage dimension),
    and the stride meant is still that of the same trailing dimension."""
    zeros = tuple(IntImm(0, extent.dtype) for extent in buffer.shape)
    ndim = len(buffer.shape)
    return tuple(
        Call(extent.dtype, STRIDE_OP, (BufferLoad(buffer, zeros), IntImm(dim - ndim, "int32")))
        for dim, extent in enumerate(buffer.shape)
    )


def row_major_strides(buffer: Buffer) -> tuple[PrimExpr, ...]:
    """The buffer's strides in elements: its explicit ones, else compact row-major."""
    if buffer.strides:
        return buffer.strides
    dtype = widest_int(list(buffer.shape))
    strides: list[PrimExpr] = []
    stride: PrimExpr = IntImm(1, dtype)
    for extent in reversed(buffer.shape):
        strides.append(stride)
        extent = cast_to(extent, dtype)
        stride = simplify(stride * extent) if not _is_one(stride) else extent
    return tuple(reversed(strides))


def _is_one(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 1


def _offset_index(start: PrimExpr, index: PrimExpr) -> PrimExpr:
    """``start + index`` (a Ramp index keeps its shape)."""
    if isinstance(start, IntImm) and start.value == 0:
        return index
    dtype = widest_int([start, index])
    start, index = cast_to(start, dtype), cast_to(index, dtype)
    if isinstance(index, Ramp):
        return Ramp(simplify(start + index.base), index.stride, index.lanes)
    return simplify(start + index)


class _ViewRewriter(IRMutator):
    """Accesses of match-buffer views become accesses of their source buffers."""

    def __init__(self, view: Buffer, source: BufferRegion, pairs: dict[int, int]) -> None:
        self.view = view
        self.source = source
        self.pairs = pairs  # view dimension -> source dimension

    def indices(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        out = [rng.min for rng in self.source.region]
        for view_dim, source_dim in self.pairs.items():
            out[source_dim] = _offset_index(self.source.region[source_dim].min, indices[view_dim])
        return tuple(out)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if load.buffer is not self.view:
            return load
        return BufferLoad(self.source.buffer, self.indices(load.indices), span=load.span)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        if store.buffer is not self.view:
            return store
        return BufferStore(self.source.buffer, store.value, self.indices(store.indices), span=store.span)


def _pair_dimensions(match: MatchBufferRegion, block: Block) -> tuple[dict[int, int], dict[Var, PrimExpr]]:
    """Which source dimension each view dimension indexes, and the values of the view's variables.

    Dimensions are aligned from the right; a region dimension of extent 1 with no view
    dimension left to pair (or of another extent) is dropped, and so is a view dimension of
    extent 1 that matches no region dimension.
    """
    view, region = match.buffer, match.source.region
    analyzer = Analyzer()
    bindings: dict[Var, PrimExpr] = {}
    pairs: dict[int, int] = {}

    def is_unit(expr: PrimExpr) -> bool:
        return analyzer.can_prove_equal(expr, 1)

    v, r = view.ndim - 1, len(region) - 1
    while v >= 0 or r >= 0:
        view_extent = view.shape[v] if v >= 0 else None
        region_extent = region[r].extent if r >= 0 else None
        if view_extent is not None and region_extent is not None:
            if isinstance(view_extent, Var) and view_extent not in bindings and not is_unit(region_extent):
                bindings[view_extent] = region_extent
                pairs[v] = r
                v, r = v - 1, r - 1
                continue
            if analyzer.can_prove_equal(substitute(view_extent, bindings), region_extent):
                pairs[v] = r
                v, r = v - 1, r - 1
                continue
        if region_extent is not None and is_unit(region_extent):
            r -= 1
        elif view_extent is not None and is_unit(view_extent):
            v -= 1
        else:
            raise LoweringError(
                f"convert_blocks_to_loops: block {block.name!r}: match_buffer {view.name} of shape "
                f"{tuple(str(s) for s in view.shape)} does not fit the region of {match.source.buffer.name} "
                f"with extents {tuple(str(rng.extent) for rng in region)}"
            )
    # Strides and the element offset the view declares as variables take the source's values.
    # A source without explicit strides may still shrink (compact_allocations runs after this
    # pass), and so may one whose strides storage_align padded (compaction pads them again for
    # the shrunk shape: rows of 1024 + 8 become rows of 32 + 8), so their strides are named
    # symbolically and resolved when buffers are flattened. Other explicit strides are kept.
    source = match.source.buffer
    source_strides = source.strides if source.strides and not source.dim_align else deferred_strides(source)
    if view.strides:
        for view_dim, stride in enumerate(view.strides):
            if isinstance(stride, Var) and view_dim in pairs:
                bindings[stride] = source_strides[pairs[view_dim]]
    if isinstance(view.elem_offset, Var):
        offset: PrimExpr = match.source.buffer.elem_offset or IntImm(0, view.elem_offset.dtype)
        for rng, stride in zip(region, source_strides):
            offset = offset + rng.min * stride
        bindings[view.elem_offset] = simplify(offset)
    return pairs, bindings


def _convert(
    block: Block,
    iter_values: tuple[PrimExpr, ...],
    predicate: PrimExpr | None,
    body: Stmt,
    constants: dict[Buffer, tuple[int | float, ...]],
) -> Stmt:
    """The loop-level statement for one block instance whose nested blocks are already gone."""
    for match in reversed(block.match_buffers):
        pairs, bindings = _pair_dimensions(match, block)
        body = substitute(_ViewRewriter(match.buffer, match.source, pairs).visit(body), bindings)
    for buffer in reversed(block.alloc_buffers):
        body = Allocate(buffer, body, data=constants.get(buffer))
    vmap: dict[Var, PrimExpr] = {}
    for iter_var, value in zip(block.iter_vars, iter_values):
        vmap[iter_var.var] = simplify(value)
    body = substitute(body, vmap)
    if predicate is not None and not (isinstance(predicate, IntImm) and predicate.value):
        body = IfThenElse(substitute(predicate, vmap), body)
    return body


class _ConvertBlocks(IRMutator):
    def __init__(self, constants: dict[Buffer, tuple[int | float, ...]]) -> None:
        self.constants = constants

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = lower_block_init(realize.block)
        return _convert(block, realize.iter_values, realize.predicate, self.visit(block.body), self.constants)

    def visit_Block(self, block: Block) -> Stmt:
        if block.iter_vars:
            raise LoweringError(
                f"convert_blocks_to_loops: block {block.name!r} has iterators but no BlockRealize binding them"
            )
        block = lower_block_init(block)
        return _convert(block, (), None, self.visit(block.body), self.constants)


def convert_blocks_to_loops(func: PrimFunc) -> PrimFunc:
    """Replace every block by plain loop-level statements (see the module docstring)."""
    constants = func.constants
    body = _ConvertBlocks(constants).visit(func.body)
    if not constants:
        return func.replace(body=body)
    allocated: set[int] = set()

    def note_constant(node: object) -> None:
        if isinstance(node, Allocate) and node.data is not None:
            allocated.add(id(node.buffer))

    post_order_visit(body, note_constant)
    for buffer in constants:
        if id(buffer) not in allocated:
            raise LoweringError(
                f"convert_blocks_to_loops: constant buffer {buffer.name!r} (T.allocate_const) is no longer "
                "allocated in the function: a transformation replaced it without its values"
            )
    # The values now live in the Allocate statements (data=...).
    attrs = {key: value for key, value in func.attrs.items() if key != CONSTANTS_ATTR}
    return func.replace(body=body, attrs=attrs)
