"""``flatten_buffers``: every multi-dimensional buffer becomes a 1-D buffer.

An access ``B[i0, ..., ik]`` becomes ``B_flat[elem_offset + i0 * s0 + ... + ik * sk]`` where the
strides ``s`` are the buffer's explicit strides, or row-major strides of its shape. The flat
buffer keeps name, dtype, scope and alignment; its one extent covers every element. Parameters
are replaced by flat buffers too and ``attrs["param_shapes"]`` keeps the original shapes (one
entry per parameter, None for scalars), so callers can still check arguments. A ``Ramp``
index stays a ``Ramp`` (its base and stride scaled by the dimension's stride). A buffer's
``axis_separators`` (TVM's request for a multi-dimensional physical buffer) are flattened across
like any other dimension boundary: no backend here has multi-dimensional memory. Before::

    def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
        for i, j in T.grid(4, 8):
            B[i, j] = A[i, j] + 1.0

After::

    def f(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
        T.func_attr({"param_shapes": ((4, 8), (4, 8))})
        for i, j in T.grid(4, 8):
            B[i * 8 + j] = A[i * 8 + j] + 1.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tir.arith import const_int_bound, simplify
from tir.ir import (
    Allocate,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    DataType,
    IntImm,
    IRMutator,
    PrimExpr,
    PrimFunc,
    Ramp,
    Stmt,
)
from tir.transform._common import LoweringError, cast_to, widest_int
from tir.transform.convert_blocks import STRIDE_OP, row_major_strides

__all__ = ["flat_index", "flatten_buffers", "index_dtype"]

_INT32_MAX = 2**31 - 1
_INT64 = DataType("int", 64)


def _upper(expr: PrimExpr) -> float:
    """The largest value ``expr`` may take (a shape variable: the top of its dtype)."""
    return min(const_int_bound(expr).max_value, expr.dtype.max_value())


def _lower(expr: PrimExpr) -> float:
    return max(const_int_bound(expr).min_value, expr.dtype.min_value())


def _span_upper_bound(buffer: Buffer) -> float:
    """How many elements the flat buffer may span at most (``inf`` when unbounded)."""
    if buffer.strides:
        # A stride may be negative (a reversed view): its magnitude counts.
        span = 1 + sum(
            max(_upper(dim) - 1, 0) * max(_upper(stride), -_lower(stride), 0)
            for dim, stride in zip(buffer.shape, buffer.strides)
        )
    else:
        span = math.prod(max(_upper(d), 0) for d in buffer.shape)
    if buffer.elem_offset is not None:
        span += max(_upper(buffer.elem_offset), 0)
    return span


def index_dtype(buffer: Buffer, exprs: Sequence[PrimExpr] = ()) -> DataType:
    """The integer dtype of ``buffer``'s flat indices: the widest of its shape, strides, offset
    and ``exprs``, widened to int64 when the buffer may span more than ``2**31 - 1`` elements.

    An in-bounds flat index (and every partial sum of it) is below the span, so int32 is exact
    for the common small buffer; a 50000 x 50000 buffer, or a multi-dimensional buffer of shape
    variables, computes its indices and its extent in 64 bits.
    """
    parts = [*buffer.shape, *buffer.strides, *([buffer.elem_offset] if buffer.elem_offset is not None else [])]
    dtype = widest_int([*parts, *exprs])
    if dtype.bits < 64 and _span_upper_bound(buffer) > _INT32_MAX:
        return _INT64
    return dtype


def _strides(buffer: Buffer, dtype: DataType) -> tuple[PrimExpr, ...]:
    """``row_major_strides`` computed in ``dtype`` (the product of the trailing extents may
    not fit the extents' own dtype)."""
    if buffer.strides:
        return tuple(cast_to(stride, dtype) for stride in buffer.strides)
    if dtype == widest_int(list(buffer.shape)):
        return row_major_strides(buffer)
    return row_major_strides(buffer.replace(shape=tuple(cast_to(extent, dtype) for extent in buffer.shape)))


def _scale(index: PrimExpr, stride: PrimExpr) -> PrimExpr:
    if isinstance(stride, IntImm) and stride.value == 1:
        return index
    if isinstance(index, Ramp):
        return Ramp(simplify(index.base * stride), simplify(index.stride * stride), index.lanes)
    if isinstance(index, Broadcast):
        return Broadcast(simplify(index.value * stride), index.lanes)
    if index.dtype.lanes > 1:
        return index * Broadcast(stride, index.dtype.lanes)
    return index * stride


def _add(a: PrimExpr | None, b: PrimExpr) -> PrimExpr:
    if a is None:
        return b
    if a.dtype.lanes == 1 and b.dtype.lanes == 1:
        return a + b
    if a.dtype.lanes > 1 and b.dtype.lanes > 1:
        raise LoweringError("flatten_buffers: an access with vector indices in two dimensions cannot be flattened")
    scalar, vector = (a, b) if a.dtype.lanes == 1 else (b, a)
    if isinstance(vector, Ramp):
        return Ramp(simplify(scalar + vector.base), vector.stride, vector.lanes)
    if isinstance(vector, Broadcast):
        return Broadcast(simplify(scalar + vector.value), vector.lanes)
    return Broadcast(scalar, vector.dtype.lanes) + vector


def flat_index(buffer: Buffer, indices: tuple[PrimExpr, ...]) -> PrimExpr:
    """The 1-D index of ``buffer[indices]``: ``elem_offset + sum(index_k * stride_k)``."""
    if len(indices) != buffer.ndim:
        raise LoweringError(
            f"flatten_buffers: buffer {buffer.name} has {buffer.ndim} dimensions, accessed with {len(indices)} indices"
        )
    dtype = index_dtype(buffer, list(indices))
    strides = _strides(buffer, dtype)
    total: PrimExpr | None = None
    for index, stride in zip(indices, strides):
        total = _add(total, _scale(cast_to(index, dtype), cast_to(stride, dtype)))
    if buffer.elem_offset is not None and not (
        isinstance(buffer.elem_offset, IntImm) and buffer.elem_offset.value == 0
    ):
        total = _add(total, cast_to(buffer.elem_offset, dtype))
    if total is None:
        return IntImm(0, dtype)
    return simplify(total) if total.dtype.lanes == 1 else total


def _flat_extent(buffer: Buffer) -> PrimExpr:
    """How many elements the flat buffer spans."""
    if not buffer.shape:
        return IntImm(1)
    dtype = index_dtype(buffer)
    if buffer.strides:
        extent = IntImm(1, dtype)
        for dim, stride in zip(buffer.shape, buffer.strides):
            extent = extent + (cast_to(dim, dtype) - 1) * cast_to(stride, dtype)
    else:
        extent = cast_to(buffer.shape[0], dtype)
        for dim in buffer.shape[1:]:
            extent = extent * cast_to(dim, dtype)
    if buffer.elem_offset is not None:
        extent = cast_to(buffer.elem_offset, extent.dtype) + extent
    return simplify(extent)


class _Flatten(IRMutator):
    def __init__(self, keep_scopes: tuple[str, ...] = ()) -> None:
        self.flat: dict[Buffer, Buffer] = {}
        self.keep_scopes = keep_scopes

    def flat_buffer(self, buffer: Buffer) -> Buffer:
        new = self.flat.get(buffer)
        if new is None:
            if buffer.scope in self.keep_scopes or (
                buffer.ndim == 1 and not buffer.strides and buffer.elem_offset is None
            ):
                new = buffer
            else:
                new = Buffer(
                    buffer.name,
                    (_flat_extent(buffer),),
                    buffer.dtype,
                    buffer.scope,
                    align=buffer.align,
                    offset_factor=buffer.offset_factor,
                    span=buffer.span,
                )
            self.flat[buffer] = new
        return new

    def index(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        if self.flat_buffer(buffer) is buffer:
            return indices
        return (flat_index(buffer, indices),)

    def visit_Allocate(self, stmt: Allocate) -> Stmt:
        return stmt.replace(buffer=self.flat_buffer(stmt.buffer), body=self.visit(stmt.body))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        return load.replace(buffer=self.flat_buffer(load.buffer), indices=self.index(load.buffer, load.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        return store.replace(buffer=self.flat_buffer(store.buffer), indices=self.index(store.buffer, store.indices))


class _ResolveStrides(IRMutator):
    """``tir.buffer_stride(B[...], d)`` (left by convert_blocks_to_loops for match_buffer views)
    becomes the stride of ``B`` as it is laid out now, after allocations were compacted (and
    staged by software pipelining); ``d`` < 0 counts from the last dimension."""

    def visit_Call(self, call: Call) -> PrimExpr:
        if call.op != STRIDE_OP:
            return self.generic_visit(call)  # type: ignore[return-value]
        load, dim = call.args
        assert isinstance(load, BufferLoad) and isinstance(dim, IntImm)
        stride = _strides(load.buffer, index_dtype(load.buffer))[dim.value]
        return stride if stride.dtype == call.dtype else Cast(call.dtype, stride)


def flatten_buffers(func: PrimFunc, keep_scopes: tuple[str, ...] = ()) -> PrimFunc:
    """Make every buffer 1-D (see the module docstring).

    Buffers of a scope in ``keep_scopes`` keep their shape (the GPU pipeline keeps warp
    fragments as tiles: the CUDA code generator declares them tile by tile).
    """
    mutator = _Flatten(keep_scopes)
    params = tuple(mutator.flat_buffer(p) if isinstance(p, Buffer) else p for p in func.params)
    body = mutator.visit(_ResolveStrides().visit(func.body))
    attrs = func.attrs
    if "param_shapes" not in attrs:
        shapes = tuple(p.shape if isinstance(p, Buffer) else None for p in func.params)
        attrs = {**attrs, "param_shapes": shapes}
    if body is func.body and all(a is b for a, b in zip(params, func.params)) and attrs is func.attrs:
        return func
    return func.replace(params=params, body=body, attrs=attrs)
